"""Lowering rule of the tile family's Scan (registered into ``lower.LOWERINGS``).

Three lowerings (D402, D512):

**Hillis–Steele** (``_hillis_steele``), O(n log n) lane work: every scan whose contract admits a
regrouping of each prefix in order — a float ``add`` under ``ordered_tree`` (each prefix any
bracketing of its own leaves in order, seed first: docs/contracts.md "Scan"), ``max`` / ``min``
(exact in any bracketing) and every integer scan (wrapping ``add`` / ``mul`` are associative).
One kernel widens ``x`` into the accumulator dtype and folds the seed into lane 0
(``seed ⊕ x0``, the seed the leftmost leaf); then ``ceil(log2 n)`` kernels, step ``s = 1, 2,
4, ...``: ``y'[i] = y[i − s] ⊕ y[i]`` where ``i >= s``, else ``y[i]`` — the left operand holds
the earlier leaves, so every prefix stays an in-order bracketing; a last kernel stores
``y[i]`` (inclusive) or ``y[i − 1]`` with lane 0 the seed, or the combine's identity without
one (exclusive), rounded once to the dtype. Each step reads one buffer and writes a fresh one
(a kernel never reads what it writes). The accumulator is f32 for low-precision floats, the
integer dtype itself (wrapping) otherwise.

**Per-prefix reduction** (``_per_prefix``), O(n²) lane work, kept where the contract is exact
and order-bound: a float ``add`` under ``fold_left`` (each prefix exactly the left fold) and
bool scans. One kernel over the domain ``x.shape + (n,)``: the new last axis ``j`` walks the
contributions, and output position ``i`` reduces the lanes ``j <= i`` (inclusive) or ``j < i``
(exclusive) with a masked kernel-IR ``Reduce`` (policy carried, seed as ``init``); lanes
longer than the tile budget run a ``TileLoop`` carrying the accumulator, as Reduce does.

**Sequential** (``_sequential``), O(n) work, for a float ``add`` under ``fold_left`` longer than
``SEQUENTIAL_FROM`` (D512): a host loop over the scan axis, each step one kernel over the other
axes adding ``x[..., i, ...]`` to the carried f32 left fold and storing the rounded prefix at
``i``.

Interface: ``_scan(lw, node, args) -> Buffer`` (``@register(Scan)``), choosing with
``_work_efficient(op, dtype)``; both helpers take the lowerer, the op, the operand buffer and
the output buffer.
"""

from __future__ import annotations

import numpy as np

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import Buffer
from tilefoundry.compiler.lower import KB, _Lowerer, _seed, bcast_strides, register, scalar_index
from tilefoundry.compiler.schedule import prev_pow2
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.ops.tile_scan import Scan
from tilefoundry.semantics.reductions import identity

_KIND = {"add": "sum", "max": "max", "min": "min", "mul": "prod"}


_BINOP = {"sum": "add", "max": "max", "min": "min", "prod": "mul"}

#: a float add under fold_left longer than this is scanned sequentially (``_sequential``: O(n)
#: work in n steps); up to it, the per-prefix reduction (O(n²) work in one kernel) — at 64 the
#: per-prefix kernel is 4,096 lane operations per row, fewer than a host step costs (D512)
SEQUENTIAL_FROM = 64


def _work_efficient(op: Scan, dt: str) -> bool:
    """Whether the contract admits the Hillis–Steele regrouping (every scan but a float add
    under fold_left, and bool scans)."""
    if dt == "bool":
        return False
    return not (kir.is_float(dt) and op.combine == "add" and op.policy == "fold_left")


@register(Scan)
def _scan(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    op: Scan = node.op
    (x,) = args
    out = lw.temp(x.dtype, x.shape)
    if out.size == 0:
        return out
    if _work_efficient(op, x.dtype):
        _hillis_steele(lw, op, x, out)
    elif x.dtype != "bool" and x.shape[op.axis % len(x.shape)] > SEQUENTIAL_FROM:
        _sequential(lw, op, x, out)
    else:
        _per_prefix(lw, op, x, out)
    return out


def _identity_value(kind: str, dt: str, acc: str) -> float | int:
    ident = np.asarray(1) if kind == "prod" else identity(kind, DType(dt))
    return float(np.asarray(ident).astype(np.float32)) if acc == "f32" else ident.item()


def _hillis_steele(lw: _Lowerer, op: Scan, x: Buffer, out: Buffer) -> None:
    dt = x.dtype
    a = op.axis % len(x.shape)
    n = x.shape[a]
    kind = _KIND[op.combine]
    fn = _BINOP[kind]
    acc = "f32" if kir.is_float(dt) else dt
    dom = x.shape

    def const(kb: KB, value) -> str:
        return kb.const(float(value) if acc == "f32" else value, acc)

    # the leaves in the accumulator dtype, the seed folded into lane 0 (the leftmost leaf)
    y = lw.temp(acc, dom, prefix="scan")
    kb = KB(lw, "scan_leaves", dom)
    v = kb.load(x, bcast_strides(x, dom))
    v = kb.widen(v, dt, "f32") if acc == "f32" else v
    if op.seed is not None:
        first = kb.binop("eq", kb.coord(a), kb.const(0, "i64"))
        v = kb.select(first, kb.binop(fn, kb.broadcast(const(kb, op.seed), kb.f(v)), v), v)
    kb.store(y, y.strides, v)
    kb.finish()
    step = 1
    while step < n:  # y'[i] = y[i - step] (+) y[i]: the earlier leaves on the left
        z = lw.temp(acc, dom, prefix="scan")
        kb = KB(lw, "scan_step", dom)
        cur = kb.load(y, y.strides)
        has = kb.binop("ge", kb.coord(a), kb.const(step, "i64"))
        prev = kb.load(y, y.strides, offset=-step * y.strides[a], mask=has)
        kb.store(z, z.strides, kb.select(has, kb.binop(fn, prev, cur), cur))
        kb.finish()
        y, step = z, step * 2
    kb = KB(lw, "scan", dom)
    if op.inclusive:
        v = kb.load(y, y.strides)
    else:  # exclusive[i] = inclusive[i - 1]; exclusive[0] the seed, or the identity
        has = kb.binop("ge", kb.coord(a), kb.const(1, "i64"))
        prev = kb.load(y, y.strides, offset=-y.strides[a], mask=has)
        first = op.seed if op.seed is not None else _identity_value(kind, dt, acc)
        v = kb.select(has, prev, kb.broadcast(const(kb, first), kb.f(prev)))
    if acc == "f32":
        v = kb.round(v, "f32", dt)
    kb.store(out, bcast_strides(out, dom), v)
    kb.finish()


def _per_prefix(lw: _Lowerer, op: Scan, x: Buffer, out: Buffer) -> None:
    dt = x.dtype
    r = len(x.shape)
    a = op.axis % r
    n = x.shape[a]
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
        ival = _identity_value(kind, dt, acc)
        first = kb.binop("eq", kb.coord(a), kb.const(0, "i64"))
        s = kb.select(first, kb.broadcast(const(ival), kb.f(s)), s)
    if lowp:
        s = kb.round(s, "f32", dt)
    kb.store(out, out_strides, s)
    kb.finish(single=[j] if fits and n > 1 else [])


def _sequential(lw: _Lowerer, op: Scan, x: Buffer, out: Buffer) -> None:
    """A float add under fold_left, O(n) work: a host loop over the scan axis, one kernel per
    position over the other axes carrying the f32 left fold (``acc' = acc + x[i]``, the seed or
    -0 first — -0 + x0 is x0 bit for bit, the reference's start without a seed) and storing
    ``round(acc')`` (inclusive) or ``round(acc)`` (exclusive; position 0 without a seed the
    identity) at ``i`` of ``out`` (written in place, one slice per step; not carried)."""
    dt, r = x.dtype, len(x.shape)
    a = op.axis % r
    n = x.shape[a]
    lowp = kir.is_float(dt)
    bdom = tuple(1 if d == a else e for d, e in enumerate(x.shape))
    everywhere = list(range(r))
    # the first accumulator: the seed, or -0 (the exact identity of IEEE addition)
    acc0 = lw.temp("f32", bdom, prefix="scan")
    kb = KB(lw, "scan_start", bdom)
    start = -0.0 if op.seed is None else float(np.float32(op.seed))
    kb.store(acc0, acc0.strides, kb.broadcast(kb.const(start, "f32"), everywhere))
    kb.finish()
    var = lw.temp("i64", (), "i")
    acc = lw.temp("f32", bdom, "carry")
    lw.steps.append([])
    nxt = lw.temp("f32", bdom, prefix="scan")
    kb = KB(lw, "scan_step", bdom)
    i = scalar_index(kb, var)
    xs, os_ = bcast_strides(x, x.shape), bcast_strides(out, out.shape)
    v = kb.load(x, xs, index=[(i, xs[a])])
    if lowp:
        v = kb.widen(v, dt, "f32")
    c = kb.load(acc, acc.strides)
    s = kb.binop("add", c, v)
    kb.store(nxt, nxt.strides, s)
    y = s
    if not op.inclusive:
        y = c
        if op.seed is None:  # exclusive[0]: the combine's identity
            first = kb.binop("eq", i, kb.const(0, "i64"))
            ident = kb.broadcast(kb.const(_identity_value("sum", dt, "f32"), "f32"), kb.f(c))
            y = kb.select(first, ident, c)
    if lowp:
        y = kb.round(y, "f32", dt)
    kb.store(out, os_, y, 0, [(i, os_[a])])
    kb.finish()
    body = lw.steps.pop()
    lw.steps[-1].append(kir.HostLoop(lw.fresh("loop"), var.name, 0, n, 1, (acc.name,),
                                     (acc0.name,), tuple(body), (nxt.name,)))
