"""Lowering rule of the tile family's Scan (registered into ``lower.LOWERINGS``).

A scan over axis ``a`` of extent n is one kernel over the domain ``x.shape + (n,)``: the new
last axis ``j`` walks the contributions, and output position ``i`` (on axis ``a``) reduces the
lanes ``j <= i`` (inclusive) or ``j < i`` (exclusive) with a masked kernel-IR ``Reduce``. Masked
lanes are *skipped* (never replaced by a padding identity), the seed is the Reduce's ``init``
(first, once), the policy is carried unchanged (``fold_left`` or ``ordered_tree``), and the
accumulator is the Reduce's: f32 for low-precision floats (each output rounded once), the
integer dtype itself (wrapping), any / all for bool. Without a seed, exclusive[0] is the
combine's identity (a Select on ``i == 0``). Lanes longer than the tile budget run a
``TileLoop`` carrying the accumulator, as Reduce does. Each prefix is reduced independently:
O(n^2) lane work, a reference realization rather than a work-efficient scan.

``combine="mul"`` (integer product scans) is a kernel-IR ``prod`` Reduce (the wrapping integer
product; the Triton renderer reports ``prod`` NOT_SUPPORTED).
"""

from __future__ import annotations

import numpy as np

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import Buffer
from tilefoundry.compiler.lower import KB, _Lowerer, _seed, bcast_strides, register
from tilefoundry.compiler.schedule import prev_pow2
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.ops.tile_scan import Scan
from tilefoundry.semantics.reductions import identity

_KIND = {"add": "sum", "max": "max", "min": "min", "mul": "prod"}


@register(Scan)
def _scan(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    op: Scan = node.op
    (x,) = args
    dt = x.dtype
    r = len(x.shape)
    a = op.axis % r
    n = x.shape[a]
    out = lw.temp(dt, x.shape)
    if out.size == 0:
        return out
    kind = _KIND[op.combine]
    lowp = kir.is_float(dt)
    acc = "f32" if lowp else dt
    dom = (*x.shape, n)
    j = r  # the contribution axis
    xs = list(bcast_strides(x, x.shape))
    x_strides = (*(0 if d == a else s for d, s in enumerate(xs)), xs[a])
    out_strides = (*bcast_strides(out, out.shape), 0)
    kb = KB(lw, "scan", dom)

    def produce() -> tuple[str, str | None]:
        v = kb.load(x, x_strides)
        if lowp:
            v = kb.widen(v, dt, "f32")
        ci, cj = kb.coord(a), kb.coord(j)
        keep = kb.binop("le" if op.inclusive else "lt", cj, ci)
        m = kb.and_masks(kb.edge(kb.f(v)), keep)
        return kb.broadcast(v, kb.f(m)), m  # the lanes of every output position i

    def const(value) -> str:
        return kb.const(float(value) if acc == "f32" else value, acc)

    seed = None if op.seed is None else const(op.seed)
    fits = kir.next_pow2(n) <= lw.cfg.max_row or n <= 1
    if fits:
        v, m = produce()
        s = kb.reduce(v, (j,), kind, op.policy, m,
                      None if seed is None else kb.broadcast(seed, [d for d in range(r)]))
    else:
        init = seed if seed is not None else const(1 if kind == "prod" else _seed(kind, acc))
        init = kb.broadcast(init, list(range(r)))
        blk = min(kir.next_pow2(n), prev_pow2(lw.cfg.max_row))

        def body(c: str) -> list[str]:
            v, m = produce()
            return [kb.reduce(v, (j,), kind, op.policy, m, c)]

        s = kb.loop(j, blk, [init], body)[0]
    if not op.inclusive and op.seed is None:  # exclusive[0]: the combine's identity
        ident = np.asarray(1) if kind == "prod" else identity(kind, DType(dt))
        ival = float(np.asarray(ident).astype(np.float32)) if lowp else ident.item()
        first = kb.binop("eq", kb.coord(a), kb.const(0, "i64"))
        s = kb.select(first, kb.broadcast(const(ival), kb.f(s)), s)
    if lowp:
        s = kb.round(s, "f32", dt)
    kb.store(out, out_strides, s)
    kb.finish(single=[j] if fits and n > 1 else [])
    return out
