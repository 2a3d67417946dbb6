"""Lowering of the flagged scans (MaskedScan, SegmentedScan; registered into ``lower.LOWERINGS``).

Scan's construction (``lower_tile_scan``): one kernel over ``x.shape + (n,)`` whose last axis
``j`` walks the contributions, output position ``i`` reducing its lanes with a masked kernel-IR
``Reduce`` — skipped lanes are masked out, never replaced by a padding identity. The lane mask
is ``j <= i`` (inclusive) or ``j < i`` (exclusive) and:

* MaskedScan: ``mask[j]``; the seed is the Reduce's ``init`` (first, once).
* SegmentedScan: ``seg[j] == seg[i]``, where ``seg`` (i32, one kernel before) is the inclusive
  count of heads at or before each position — the segment id, so the lanes kept are exactly
  i's segment. The seed enters only where ``seg[i] == 0`` (the segment before the first head):
  two Reduces, with and without the seed as ``init``, and a Select — never a per-chunk seed
  in every segment.

A prefix with no kept lane and no seed is the combine's identity (a lane count and a Select),
as the reference defines it. Low-precision floats accumulate in f32 and round once; integers
wrap in their dtype. Lanes longer than the tile budget run a ``TileLoop`` carrying the
accumulators. O(n^2) lane work per fiber, as Scan's reference realization.
"""

from __future__ import annotations

import numpy as np

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import Buffer
from tilefoundry.compiler.lower import KB, _Lowerer, _seed, bcast_strides, register
from tilefoundry.compiler.schedule import prev_pow2
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.ops.tile_scan_flags import MaskedScan, SegmentedScan
from tilefoundry.semantics.reductions import identity

_KIND = {"add": "sum", "max": "max", "min": "min", "mul": "prod"}


def _lanes(lw: _Lowerer, kb: KB, n: int, r: int, bodies) -> list[str]:
    """Reduce over the contribution axis ``r``: ``bodies(carried | None) -> [values]`` in one
    tile when the axis fits, else in a TileLoop carrying them from ``inits``."""
    fits = kir.next_pow2(n) <= lw.cfg.max_row or n <= 1
    if fits:
        return bodies(None)
    blk = min(kir.next_pow2(n), prev_pow2(lw.cfg.max_row))
    return kb.loop(r, blk, bodies.inits(kb), lambda *c: bodies(list(c)))


def _segment_ids(lw: _Lowerer, heads: Buffer, a: int) -> Buffer:
    """seg[i] = the number of heads at or before i along axis ``a`` (i32)."""
    shape = heads.shape
    r, n = len(shape), shape[a]
    seg = lw.temp("i32", shape)
    dom = (*shape, n)
    hs = list(bcast_strides(heads, shape))
    h_strides = (*(0 if d == a else s for d, s in enumerate(hs)), hs[a])
    kb = KB(lw, "scan_segments", dom)

    class Body:
        @staticmethod
        def inits(kb: KB) -> list[str]:
            return [kb.broadcast(kb.const(0, "i32"), list(range(r)))]

        def __call__(self, carried):
            h = kb.load(heads, h_strides)
            one = kb.select(h, kb.const(1, "i32"), kb.const(0, "i32"))
            keep = kb.binop("le", kb.coord(r), kb.coord(a))
            m = kb.and_masks(kb.edge(kb.f(one)), keep)
            v = kb.broadcast(one, kb.f(m))
            return [kb.reduce(v, (r,), "sum", "fold_left", m,
                              None if carried is None else carried[0])]

    (s,) = _lanes(lw, kb, n, r, Body())
    kb.store(seg, (*bcast_strides(seg, shape), 0), s)
    kb.finish(single=[r] if kir.next_pow2(n) <= lw.cfg.max_row and n > 1 else [])
    return seg


@register(MaskedScan, SegmentedScan)
def _flagged_scan(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    op = node.op
    segmented = type(op) is SegmentedScan
    x, flags = args
    dt = x.dtype
    r = len(x.shape)
    a = op.axis % r
    n = x.shape[a]
    out = lw.temp(dt, x.shape)
    if out.size == 0:
        return out
    seg = _segment_ids(lw, flags, a) if segmented else None
    kind = _KIND[op.combine]
    lowp = kir.is_float(dt)
    acc = "f32" if lowp else dt
    dom = (*x.shape, n)
    j = r
    xs = list(bcast_strides(x, x.shape))
    x_strides = (*(0 if d == a else s for d, s in enumerate(xs)), xs[a])
    fb = seg if segmented else flags
    fs = list(bcast_strides(fb, x.shape))
    f_strides_j = (*(0 if d == a else s for d, s in enumerate(fs)), fs[a])
    f_strides_i = (*fs, 0)
    out_strides = (*bcast_strides(out, out.shape), 0)
    kb = KB(lw, "scan_segmented" if segmented else "scan_masked", dom)
    everywhere = list(range(r))

    def const(value) -> str:
        return kb.const(float(value) if acc == "f32" else value, acc)

    ident_init = 1 if kind == "prod" else _seed(kind, acc)
    seeded = op.seed is not None

    class Body:
        @staticmethod
        def inits(kb: KB) -> list[str]:
            out = [kb.broadcast(const(ident_init), everywhere)]
            if seeded:
                out.append(kb.broadcast(const(op.seed), everywhere))
            out.append(kb.broadcast(kb.const(0, "i32"), everywhere))
            return out

        def __call__(self, carried):
            v = kb.load(x, x_strides)
            if lowp:
                v = kb.widen(v, dt, "f32")
            keep = kb.binop("le" if op.inclusive else "lt", kb.coord(j), kb.coord(a))
            if segmented:
                same = kb.binop("eq", kb.load(fb, f_strides_j), kb.load(fb, f_strides_i))
            else:
                same = kb.load(fb, f_strides_j)
            keep = kb.binop("and", keep, same)
            m = kb.and_masks(kb.edge(kb.f(v)), keep)
            lanes = kb.broadcast(v, kb.f(m))
            c = carried if carried is not None else [None] * (3 if seeded else 2)
            outs = [kb.reduce(lanes, (j,), kind, op.policy, m, c[0])]
            if seeded:
                init = c[1] if carried is not None else kb.broadcast(const(op.seed), everywhere)
                outs.append(kb.reduce(lanes, (j,), kind, op.policy, m, init))
            ones = kb.broadcast(kb.const(1, "i32"), kb.f(m))
            outs.append(kb.reduce(ones, (j,), "sum", "fold_left", m, c[-1]))
            return outs

    res = _lanes(lw, kb, n, r, Body())
    plain, cnt = res[0], res[-1]
    empty = kb.binop("eq", cnt, kb.const(0, "i32"))
    if seeded:
        with_seed = res[1]
        if segmented:  # the seed belongs to the segment before the first head only
            first_seg = kb.binop("eq", kb.load(fb, f_strides_i), kb.const(0, "i32"))
            s = kb.select(first_seg, with_seed, plain)
            empty = kb.binop("and", empty, kb.unop("not", first_seg))
        else:
            s, empty = with_seed, None
    else:
        s = plain
    if empty is not None:  # no kept contribution (and no seed): the combine's identity
        ident = np.asarray(1) if kind == "prod" else identity(kind, DType(dt))
        ival = float(np.asarray(ident).astype(np.float32)) if lowp else ident.item()
        s = kb.select(empty, kb.broadcast(const(ival), kb.f(s)), s)
    if lowp:
        s = kb.round(s, "f32", dt)
    kb.store(out, out_strides, s)
    kb.finish(single=[j] if kir.next_pow2(n) <= lw.cfg.max_row and n > 1 else [])
    return out
