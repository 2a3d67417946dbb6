"""Lowering of the tile-family ``Mma`` (an extension of the HIR catalog): MatMul's ``Dot`` over K
(``kir.Dot`` with ``allow_reassociation``), seeded by the accumulator operand instead of +0 —
``acc = fl(acc + a_k·b_k)`` in K order with a, b widened exactly to f32, K tiled by a carried
TileLoop. K = 0 copies acc. The batch shapes of a, b and acc are identical (the type rule)."""

from __future__ import annotations

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import Buffer
from tilefoundry.compiler.lower import KB, _dt, _Lowerer, out_type, register
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.ops.tile_mma import Mma


@register(Mma)
def _mma(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    a, b, c = args
    dt = a.dtype
    m, k = a.shape[-2:]
    n = b.shape[-1]
    nb = len(t.shape) - 2
    if k == 0:  # no products: the result is acc (an empty result too)
        return lw.elementwise("mma_copy", c.dtype, t.shape, [c], lambda kb, v: v)
    out = lw.temp(_dt(t), t.shape)
    if out.size == 0:
        return out
    dom = (*t.shape[:nb], m, n, k)
    kb = KB(lw, "mma", dom)

    def operand_strides(x: Buffer, row: int, col: int) -> list[int]:
        s = [0] * len(dom)
        for j in range(nb):
            s[j] = x.strides[j]
        s[row], s[col] = x.strides[-2], x.strides[-1]
        return s

    sa = operand_strides(a, nb, nb + 2)
    sb_ = operand_strides(b, nb + 2, nb + 1)
    kax = nb + 2

    def tile(init: str | None) -> str:
        va, vb = kb.widen(kb.load(a, sa), dt), kb.widen(kb.load(b, sb_), dt)
        return kb.dot(va, vb, kax, kb.edge([kax]), init, node.op.allow_reassociation)

    # an f16 / bf16 acc widens exactly to the f32 accumulation and the result rounds once (D389)
    seed = kb.broadcast(kb.widen(kb.load(c, [*c.strides, 0]), c.dtype), range(nb + 2))
    if kir.next_pow2(k) <= lw.cfg.k_block:
        r = tile(seed)
        single = [kax]
    else:
        r = kb.loop(kax, lw.cfg.k_block, [seed], lambda cc: [tile(cc)])[0]
        single = []
    kb.store(out, [*out.strides, 0], kb.round(r, "f32", out.dtype))
    kb.finish(single=single)
    return out
