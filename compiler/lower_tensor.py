"""Lowering rules of the structural tensor ops (registered into ``lower.LOWERINGS``):
Reshape / unsharded Reshard (views), Transpose, Slice, Concat, Stack (copies with index maps),
Zeros and the shape ops (constants), Gather, InsertSlice, CacheUpdate (index terms and data
masks), TopK (selection by rank)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tilefoundry.compiler import kir
from tilefoundry.compiler.errors import LoweringError, NotSupportedError
from tilefoundry.compiler.kir import Buffer
from tilefoundry.compiler.lower import (
    KB,
    _dt,
    _Lowerer,
    out_type,
    register,
    scalar_index,
)
from tilefoundry.compiler.schedule import prev_pow2
from tilefoundry.limits import check_value_size
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.ops import (
    CacheUpdate,
    Concat,
    Gather,
    InsertSlice,
    Rank,
    Reshape,
    Reshard,
    ShapeCompose,
    ShapeExtract,
    ShapeOf,
    Slice,
    Stack,
    TopK,
    Transpose,
    Zeros,
)
from tilefoundry.semantics.types import TensorType


@register(Reshape, Reshard)
def _view(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    if t.shard is not None or (isinstance(node.args[0].checked_type, TensorType)
                               and node.args[0].checked_type.shard is not None):
        raise NotSupportedError(type(node.op).__name__, "sharded values")
    (x,) = args
    if tuple(t.shape) == x.shape:
        return x
    if math.prod(t.shape) != x.size:
        raise LoweringError(f"Reshape of {x.shape} ({x.size} elements) to {tuple(t.shape)}")
    return lw.alias(x, t.shape)


@register(Transpose)
def _transpose(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    (x,) = args
    r = len(x.shape)
    perm = [p % r for p in node.op.perm]
    out = lw.temp(x.dtype, t.shape)
    if out.size == 0:
        return out
    kb = KB(lw, "transpose", out.shape)
    v = kb.load(x, [x.strides[p] for p in perm])
    kb.store(out, out.strides, v)
    kb.finish()
    return out


@register(Slice)
def _slice(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    (x,) = args
    op = node.op
    r = len(x.shape)
    steps = op.strides if op.strides is not None else (1,) * r
    offset, strides = 0, []
    for d in range(r):
        start, _stop, step = slice(int(op.begin[d]), int(op.end[d]),
                                   int(steps[d])).indices(x.shape[d])
        if t.shape[d] > 0:
            offset += start * x.strides[d]
        strides.append(step * x.strides[d])
    out = lw.temp(x.dtype, t.shape)
    if out.size == 0:
        return out
    kb = KB(lw, "slice", out.shape)
    kb.store(out, out.strides, kb.load(x, strides, offset))
    kb.finish()
    return out


def _copy_into(lw: _Lowerer, hint: str, out: Buffer, src: Buffer, strides: Sequence[int],
               offset: int) -> None:
    if src.size == 0:
        return
    kb = KB(lw, hint, src.shape)
    kb.store(out, strides, kb.load(src, src.strides), offset)
    kb.finish()


@register(Concat)
def _concat(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    out = lw.temp(_dt(t), t.shape)
    axis = node.op.axis % len(t.shape)
    off = 0
    for x in args:
        _copy_into(lw, "concat", out, x, out.strides, off * out.strides[axis])
        off += x.shape[axis]
    return out


@register(Stack)
def _stack(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    out = lw.temp(_dt(t), t.shape)
    axis = node.op.axis % len(t.shape)
    strides = [s for d, s in enumerate(out.strides) if d != axis]
    for i, x in enumerate(args):
        _copy_into(lw, "stack", out, x, strides, i * out.strides[axis])
    return out


@register(Zeros)
def _zeros(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    if t.dtype is DType.F8E8M0:
        raise LoweringError("Zeros over f8e8m0: the format has no zero")
    check_value_size(tuple(t.shape), t.dtype.storage.itemsize, "compile: Zeros")
    return lw.const_buffer(np.zeros(t.shape, t.dtype.storage))


@register(ShapeOf, Rank, ShapeExtract, ShapeCompose)
def _shape_ops(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    raise LoweringError(f"{type(node.op).__name__} should have been folded by canonicalize "
                        f"(its operand shapes are concrete)")


@register(Gather)
def _gather(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    x, idx = args
    op = node.op
    r, q = len(x.shape), len(idx.shape)
    axis, bd = op.axis % r, op.batch_dims
    out = lw.temp(x.dtype, t.shape)
    if out.size == 0:
        return out
    dom = out.shape
    kb = KB(lw, "gather", dom)
    si = [0] * len(dom)
    for j in range(q):
        d = j if j < bd else axis + (j - bd)
        if idx.shape[j] > 1:
            si[d] = idx.strides[j]
    iv = kb.cast(kb.load(idx, si), "i64") if idx.dtype != "i64" else kb.load(idx, si)
    sx = [0] * len(dom)
    for j in range(r):
        if j == axis:
            continue
        d = j if j < axis else axis + q - bd + (j - axis - 1)
        if x.shape[j] > 1:
            sx[d] = x.strides[j]
    if op.fill is None:
        v = kb.load(x, sx, 0, [(iv, x.strides[axis])])
    else:  # D388: an index outside [0, n) reads the fill (a masked load's other value)
        ok = kb.binop("and", kb.binop("ge", iv, kb.const(0, "i64")),
                      kb.binop("lt", iv, kb.const(x.shape[axis], "i64")))
        v = kb.load(x, sx, 0, [(iv, x.strides[axis])], mask=ok, other=op.fill)
    kb.store(out, out.strides, v)
    kb.finish()
    return out


@register(TopK)
def _topk(lw: _Lowerer, node: Call, args: list[Buffer]) -> tuple[Buffer, Buffer]:
    """Selection by rank (``rank_select``) in the reference's total order, NaNs last."""
    vt, _ = node.checked_type.fields
    a = node.op.axis % len(args[0].shape)
    return rank_select(lw, node, args[0], a, vt.shape[a], node.op.largest, nan_first=False)


def rank_select(lw: _Lowerer, node: Call, x: Buffer, a: int, k: int, largest: bool, *,
                nan_first: bool, hint: str = "topk") -> tuple[Buffer, Buffer]:
    """Selection by rank: over the domain ``x.shape + (n,)`` (the extra axis ``j`` runs along
    the selected axis ``a`` again), ``rank[i] = #{j : j precedes i}`` in the reference's total
    order (NaN placement — after every number, or before with ``nan_first` —, then the value in
    the requested direction with -0 == +0, then the index), and element ``i`` is stored at
    position ``rank[i]`` when ``rank[i] < k``. The ranks are a permutation, so no two lanes write
    one place; the values keep their bits. TopK (k <= n) and the tile-family Sort (k = n)."""
    vt, it = node.checked_type.fields
    r = len(x.shape)
    n = x.shape[a]
    vals, idxs = lw.temp(x.dtype, vt.shape), lw.temp("i64", it.shape)
    if vals.size == 0:
        return vals, idxs
    dom = (*x.shape, n)
    j = r
    kb = KB(lw, hint, dom)
    si = [*x.strides, 0]
    sj = [*x.strides, x.strides[a]]
    sj[a] = 0
    xi = kb.load(x, si)
    cmp = "gt" if largest else "lt"
    flt = kir.is_float(x.dtype)
    vi = kb.widen(xi, x.dtype) if flt else xi
    ni = kb.binop("ne", vi, vi) if flt else None

    def count(init: str | None) -> str:
        xj = kb.load(x, sj)
        before = kb.binop("lt", kb.coord(j), kb.coord(a))
        if flt:
            vj = kb.widen(xj, x.dtype)
            nj = kb.binop("ne", vj, vj)
            tie = kb.binop("or", kb.binop("eq", vj, vi), kb.binop("and", ni, nj))
            same = kb.binop("and", kb.binop("or", kb.binop(cmp, vj, vi),
                                            kb.binop("and", tie, before)),
                            kb.binop("eq", ni, nj))
            # j precedes i by NaN placement: j a number and i NaN (NaNs last), or the reverse
            first, second = (nj, ni) if nan_first else (ni, nj)
            prec = kb.binop("or", kb.binop("and", kb.unop("not", second), first), same)
        else:
            prec = kb.binop("or", kb.binop(cmp, xj, xi),
                            kb.binop("and", kb.binop("eq", xj, xi), before))
        return kb.reduce(kb.cast(prec, "i64"), (j,), "sum", "unordered_tree", kb.edge([j]),
                         init)

    fits = kir.next_pow2(n) <= lw.cfg.max_row
    if fits:
        rank = count(None)
    else:  # the j axis in tiles, the count carried
        seed = kb.broadcast(kb.const(0, "i64"), range(r))
        rank = kb.loop(j, prev_pow2(lw.cfg.max_row), [seed], lambda c: [count(c)])[0]
    keep = kb.binop("lt", rank, kb.const(k, "i64"))
    so = [0 if d == a else s_ for d, s_ in enumerate(vals.strides)] + [0]
    kb.store(vals, so, xi, 0, [(rank, vals.strides[a])], keep)
    so = [0 if d == a else s_ for d, s_ in enumerate(idxs.strides)] + [0]
    kb.store(idxs, so, kb.coord(a), 0, [(rank, idxs.strides[a])], keep)
    kb.finish(single=[j] if fits else [])
    return vals, idxs


@register(InsertSlice)
def _insert_slice(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    dst, upd, *offs = args
    out = lw.elementwise("copy", dst.dtype, dst.shape, [dst], lambda kb, v: v)
    if upd.size == 0:
        return out
    kb = KB(lw, "insert_slice", upd.shape)
    index = [(scalar_index(kb, o), out.strides[j]) for j, o in enumerate(offs)]
    kb.store(out, out.strides, kb.load(upd, upd.strides), 0, index)
    kb.finish()
    return out


@register(CacheUpdate)
def _cache_update(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    cache, cur, s, new = args
    out = lw.elementwise("copy", cache.dtype, cache.shape, [cache], lambda kb, v: v)
    if new.size == 0:
        return out
    kb = KB(lw, "cache_update", new.shape)
    cv, sv = scalar_index(kb, cur), scalar_index(kb, s)
    live = kb.binop("lt", kb.coord(1), sv)
    v = kb.load(new, new.strides, mask=live)
    kb.store(out, out.strides, v, 0, [(cv, out.strides[1])], mask=live)
    kb.finish()
    return out
