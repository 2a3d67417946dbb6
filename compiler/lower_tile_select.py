"""Lowering rules of the tile family's Select (``ite``) and Bitcast (registered into
``lower.LOWERINGS``): both are elementwise kernels — a kernel-IR ``Select`` on the operands'
storage values (no widening: a selection moves bits), and a ``Bitcast`` instruction (the f32 <->
u32 reinterpretation; the Triton renderer reports it NOT_SUPPORTED)."""

from __future__ import annotations

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import Buffer
from tilefoundry.compiler.lower import KB, _dt, _Lowerer, out_type, register
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.ops.tile_select import Bitcast, Select


@register(Select)
def _select(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    return lw.elementwise("ite", _dt(t), t.shape, args,
                          lambda kb, c, a, b: kb.select(c, a, b))


@register(Bitcast)
def _bitcast(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    to = node.op.dtype.value

    def compute(kb: KB, x: str) -> str:
        return kb.emit(kir.Bitcast(kb.name(), x, to), kb.f(x))

    return lw.elementwise("bitcast", to, t.shape, args, compute)
