"""Generator builders of the tensor family (Reshape, Cast, Gather, Zeros, Reduce, InsertSlice,
CacheUpdate, TopK, Transpose, Slice, Concat, Stack) (split from ``oracle/programs.py``, D384; the
package mirrors ``semantics/ops``).

Each builder draws attributes and operands that satisfy the op's type rule, reusing pool values
where their types fit, and registers itself in ``base.BUILDERS``; see ``oracle/programs.py``'s
docstring.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tilefoundry.oracle.generator.base import _builder
from tilefoundry.oracle.generator.config import (
    BF16,
    BOOL,
    F4E2M1,
    F8E8M0,
    F16,
    F32,
    I8,
    I32,
    I64,
    U8,
)
from tilefoundry.oracle.generator.engine import (
    _eq,
    _Gen,
    _has_split,
    _lo,
    _partials,
    _resolvable,
    _Scope,
    _split_axes,
    _static,
    _table_ok,
    _Val,
)
from tilefoundry.oracle.strategies import (
    Source,
    ValueSpec,
)
from tilefoundry.semantics.dtypes import OVERFLOW_MODES, ROUNDING_MODES
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ir import (
    Constant,
)
from tilefoundry.semantics.ops import (
    CacheUpdate,
    Cast,
    Concat,
    Gather,
    InsertSlice,
    Reduce,
    ReduceKind,
    Reshape,
    Slice,
    Stack,
    TopK,
    Transpose,
    Zeros,
)
from tilefoundry.semantics.types import (
    DimMin,
    DimMul,
    DimVar,
    TensorType,
    simplify,
)


def _factorizations(n: int, rank: int, src: Source) -> tuple[int, ...]:
    """A random ordered factorization of n into ``rank`` factors."""
    primes, m, p = [], n, 2
    while m > 1 and p * p <= m:
        while m % p == 0:
            primes.append(p)
            m //= p
        p += 1
    if m > 1:
        primes.append(m)
    out = [1] * rank
    for q in primes:
        out[src.integer(0, rank - 1)] *= q
    return tuple(out)


@_builder(Reshape)
def build_reshape(g: _Gen, sc: _Scope) -> bool:
    # a sharded x only without Splits: the mesh simulation reshapes each device's block with
    # the global new_shape (finding, D146)
    x = g.pick(g.tensors(sc, lambda v: not _has_split(v.type), f4=g.cfg.type_level_only))
    if x is None:
        return False
    shape = tuple(x.type.shape)
    src = g.src
    if _static(shape):
        total = math.prod(simplify(d) for d in shape)
        rank = src.integer(0 if total == 1 else 1, 4)
        new = _factorizations(total, rank, src) if rank else ()
    else:
        new_l = list(shape)
        r = src.integer(0, 2)
        if r == 0:  # insert a unit axis
            new_l.insert(src.integer(0, len(new_l)), 1)
        elif r == 1 and 1 in new_l:  # drop a unit axis
            new_l.remove(1)
        elif len(new_l) >= 2:  # merge two adjacent axes
            i = src.integer(0, len(new_l) - 2)
            a, b = new_l[i], new_l[i + 1]
            m = simplify(DimMul(a, b)) if not (isinstance(a, int) and isinstance(b, int)) \
                else a * b
            new_l[i:i + 2] = [m]
        else:
            new_l.append(1)
        new = tuple(new_l)
        unresolved = [d for d in new if not _resolvable(d, shape)]
        if len(unresolved) > 1:
            return False
    return g.apply(sc, Reshape(tuple(new)), [x]) is not None


_CAST_TARGETS = (F32, BF16, F16, DType.FP8E4M3, DType.FP8E5M2, F8E8M0, I32, I64, I8, U8, BOOL)


def _int_safe_spec(dst: DType) -> ValueSpec:
    """Float values that truncate into ``dst``'s range in every float source format (after the
    source's own rounding: e.g. 100 rounds to at most 104 in fp8e4m3)."""
    if dst is U8:
        return ValueSpec.real_range(0, 200)
    return ValueSpec.real_range(-100, 100)


@_builder(Cast)
def build_cast(g: _Gen, sc: _Scope) -> bool:
    targets = g.only(_CAST_TARGETS + ((F4E2M1,) if g.cfg.type_level_only else ()))
    if not targets:
        return False
    dst = g.src.choice(targets)
    x = g.pick(g.tensors(sc))
    if x is None:
        return False
    xt = x.type
    if xt.dtype.is_float and dst.is_int and g.cfg.avoid_unspecified:
        lim = 100 if dst is not U8 else -1
        if x.bound is None or x.bound > lim:
            if xt.shard is not None:
                return False
            # a fresh source drawn in range (f8e8m0 holds no such range: an f32 source then)
            src_dt = xt.dtype if xt.dtype is not F8E8M0 else F32
            x = g.leaf(sc, TensorType(xt.shape, src_dt), _int_safe_spec(dst))
            if x is None:
                return False
    if _partials(x.type) and (dst is BOOL or dst is U8):
        # the Cast rule keeps a Partial state, but x != 0 (and u8's wraparound) is no monotone
        # or linear map: sum / max of the pieces' casts is not the cast of the sum / max
        # (finding, D146)
        return False
    if dst.is_float:
        overflow = g.src.choice(OVERFLOW_MODES if g.limit is None else g.limit.overflow)
        rounding = g.src.choice(ROUNDING_MODES) if dst is F8E8M0 else "nearest"
    else:
        overflow, rounding = "nonfinite", "nearest"
    return g.apply(sc, Cast(dst, overflow, rounding), [x]) is not None


@_builder(Gather)
def build_gather(g: _Gen, sc: _Scope) -> bool:
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1))
    if x is None:
        return False
    xt = x.type
    src = g.src
    axis = src.integer(0, xt.rank - 1)
    if axis in _split_axes(xt) and xt.dtype in (BOOL, F8E8M0):
        # the rule makes a Gather over a Split axis Partial(sum) for every dtype, but a bool /
        # f8e8m0 sum does not exist, so nothing could complete it (finding, D146)
        return False
    n = _lo(xt.shape[axis])
    if n < 1:
        return False
    bd = 0
    if axis >= 1 and xt.shard is None and src.boolean(0.25):
        bd = src.integer(1, axis)
    extra = tuple(src.integer(1, 3) for _ in range(src.integer(0, 2)))
    idx_shape = tuple(xt.shape[:bd]) + extra
    if not g.can_leaf(sc, idx_shape):
        return False
    idx = g.index_leaf(sc, idx_shape, 0, n - 1, (I32, I64, I8, U8) if n <= 100 else (I32, I64))
    if idx is None:
        return False
    ax = axis - xt.rank if src.boolean(0.3) else axis
    return g.apply(sc, Gather(ax, bd), [x, idx]) is not None


@_builder(Zeros)
def build_zeros(g: _Gen, sc: _Scope) -> bool:
    statics = [tuple(v.type.shape) for v in g.tensors(sc) if _static(v.type.shape)]
    shape = g.src.choice(statics) if statics and g.src.boolean(0.5) else \
        tuple(g.src.integer(1, 4) for _ in range(g.src.integer(0, 3)))
    dt = g.leaf_dtype()
    if dt is F8E8M0:
        dt = F32
    return g.apply(sc, Zeros(tuple(shape), dt), []) is not None


def _reduce_kinds(dt: DType) -> list[ReduceKind]:
    if dt is BOOL:
        return [ReduceKind.MAX, ReduceKind.MIN]
    if dt.is_int:
        return [ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN, ReduceKind.ABS_MAX]
    if dt is F8E8M0:
        return [ReduceKind.MAX, ReduceKind.MIN, ReduceKind.ABS_MAX]
    return list(ReduceKind)


@_builder(Reduce)
def build_reduce(g: _Gen, sc: _Scope) -> bool:
    x = g.pick(g.tensors(sc))
    if x is None:
        return False
    xt = x.type
    src = g.src
    kinds = [k for k in g.kinds(Reduce, _reduce_kinds(xt.dtype))
             if _table_ok("Reduce", k.value, xt)]
    if not kinds:
        return False
    kind = src.choice(kinds)
    axes = [a for a in range(xt.rank) if src.boolean(0.5)]
    if xt.rank and not axes and src.boolean(0.7):
        axes = [src.integer(0, xt.rank - 1)]
    axes = [a - xt.rank if src.boolean(0.3) else a for a in axes]
    order = src.permutation(len(axes))
    axes = [axes[i] for i in order]
    op = Reduce(tuple(axes), keepdim=src.boolean(0.5), kind=kind,
                policy=src.choice(Reduce.POLICIES if g.limit is None else g.limit.policies))
    return g.apply(sc, op, [x]) is not None


def _offset_operand(g: _Gen, sc: _Scope, lo: int, hi: int, dtypes=(I32, I64)) -> _Val | None:
    """A rank-0 integer in [lo, hi]: a literal, a pool value whose domain fits, or a leaf."""
    r = g.src.integer(0, 2)
    if r == 0:
        v = g.src.integer(lo, hi)
        if not g.only(dtypes):
            return None
        dt = g.src.choice(list(g.only(dtypes)))
        c = _Val(Constant(np.asarray(v, FORMATS[dt].storage)), TensorType((), dt), abs(v),
                 (v, v), leaf=True)
        sc.pool.append(c)
        return c
    return g.index_leaf(sc, (), lo, hi, dtypes)


@_builder(InsertSlice)
def build_insert_slice(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    dst = g.pick(g.tensors(sc, lambda v: v.type.shard is None or src.boolean(0.5)))
    if dst is None:
        return False
    dt = dst.type

    def fits(v: _Val) -> bool:
        t = v.type
        if t.dtype is not dt.dtype or t.rank != dt.rank:
            return False
        for u, d in zip(t.shape, dt.shape, strict=True):
            u, d = simplify(u), simplify(d)
            if _eq(u, d):
                continue
            if not isinstance(u, int) or u > _lo(d):
                return False
        return True

    # a dst with a Split takes only an update sharded identically: the mesh simulation writes
    # a replicated update's global window into each device's block (finding, D146)
    split = _has_split(dt)
    fits0 = fits
    fits = (lambda v: fits0(v) and v.type.shard == dt.shard) if split else fits0
    upd = g.pick(g.tensors(sc, fits)) if src.boolean(0.6) or split else None
    if upd is None and split:
        return False
    if upd is None:
        shape = tuple(d if not isinstance(simplify(d), int) and src.boolean(0.5) else
                      src.integer(1, max(1, _lo(d))) for d in dt.shape)
        upd = g.leaf(sc, TensorType(shape, dt.dtype))
        if upd is None or not fits(upd):
            return False
    offs = []
    for u, d in zip(upd.type.shape, dt.shape, strict=True):
        hi = 0 if _eq(u, d) else _lo(d) - simplify(u)
        o = _offset_operand(g, sc, 0, hi)
        if o is None:
            return False
        offs.append(o)
    return g.apply(sc, InsertSlice(), [dst, upd, *offs]) is not None


@_builder(CacheUpdate)
def build_cache_update(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    cache = g.pick(g.tensors(sc, lambda v: v.type.rank == 4))
    if cache is None or src.boolean(0.3):
        shape = (src.integer(1, 2), src.integer(1, 5), src.integer(1, 2), src.integer(1, 4))
        cache = g.leaf(sc, TensorType(shape, g.leaf_dtype()))
        if cache is None:
            return False
    ct = cache.type
    length = _lo(ct.shape[1])
    if length < 1:
        return False

    def fits(v: _Val) -> bool:
        t = v.type
        return t.rank == 4 and t.dtype is ct.dtype and all(
            _eq(t.shape[a], ct.shape[a]) for a in (0, 2, 3)) and \
            isinstance(simplify(t.shape[1]), int) and 1 <= simplify(t.shape[1]) <= length and \
            (t.shard == ct.shard if _has_split(ct) else t.shard is None or t.shard == ct.shard)

    split = _has_split(ct)  # see InsertSlice: a split cache takes an identically sharded new
    new = g.pick(g.tensors(sc, fits)) if src.boolean(0.5) or split else None
    if new is None and split:
        return False
    if new is None:
        shape = (ct.shape[0], src.integer(1, length), ct.shape[2], ct.shape[3])
        new = g.leaf(sc, TensorType(shape, ct.dtype))
        if new is None:
            return False
    nl = simplify(new.type.shape[1])
    s_hi = src.integer(1, nl)
    s = _offset_operand(g, sc, 1, s_hi, (I32,))
    cur = _offset_operand(g, sc, 0, length - s_hi, (I32,))
    if s is None or cur is None:
        return False
    return g.apply(sc, CacheUpdate(), [cache, cur, s, new]) is not None


@_builder(TopK)
def build_topk(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1 and _table_ok("TopK", "-", v.type) and
                         len(_split_axes(v.type)) < v.type.rank))
    if x is None:
        return False
    xt = x.type
    axis = src.choice([a for a in range(xt.rank) if a not in _split_axes(xt)])
    n = simplify(xt.shape[axis])
    if isinstance(n, int):  # k >= 1: an empty result would reach mean / reductions later
        k: Any = src.integer(1, n)
    elif isinstance(n, DimVar) and src.boolean(0.6):
        k = n if src.boolean(0.5) else DimMin(src.integer(1, 3), n)
    else:
        k = src.integer(1, max(1, _lo(n)))
    ax = axis - xt.rank if src.boolean(0.3) else axis
    op = TopK(k, ax, largest=src.boolean(0.5), sorted=src.boolean(0.7))
    return g.apply(sc, op, [x]) is not None


@_builder(Transpose)
def build_transpose(g: _Gen, sc: _Scope) -> bool:
    x = g.pick(g.tensors(sc, f4=g.cfg.type_level_only))
    if x is None:
        return False
    r = x.type.rank
    perm = tuple(p - r if g.src.boolean(0.2) else p for p in g.src.permutation(r))
    return g.apply(sc, Transpose(perm), [x]) is not None


@_builder(Slice)
def build_slice(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    # rank >= 1: the evaluator's Slice of a rank-0 array returns a numpy scalar (finding, D146)
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1, f4=g.cfg.type_level_only))
    if x is None:
        return False
    shape = x.type.shape
    begin, end, steps = [], [], []
    split = _split_axes(x.type)
    for a, d in enumerate(shape):
        d = simplify(d)
        t = src.choice((1, 1, 1, 2))
        if a in split:  # a Split axis stays whole (the rule fails closed otherwise)
            begin.append(0)
            end.append(d)
            steps.append(1)
            continue
        if isinstance(d, int):
            b = src.integer(0, d - 1)
            e = src.integer(b + 1, d)
            if src.boolean(0.2):
                b -= d  # negative begin counts from the end
            if e == d and src.boolean(0.2):
                e += src.integer(1, 3)  # an end past the extent clamps
            elif src.boolean(0.15):
                e -= d  # negative end
                if e == 0:
                    e = d
        else:
            if not _resolvable(d, shape):
                return False
            b = src.integer(0, max(0, _lo(d) - 1))
            e = d
        begin.append(b)
        end.append(e)
        steps.append(t)
    strides = tuple(steps) if any(s != 1 for s in steps) or src.boolean(0.3) else None
    return g.apply(sc, Slice(tuple(begin), tuple(end), strides), [x]) is not None


@_builder(Concat)
def build_concat(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1 and len(_split_axes(v.type)) <
                         v.type.rank, f4=g.cfg.type_level_only))
    if x is None:
        return False
    xt = x.type
    axis = src.choice([a for a in range(xt.rank) if a not in _split_axes(xt)])

    def fits(v: _Val) -> bool:
        t = v.type
        return t.dtype is xt.dtype and t.rank == xt.rank and t.storage is xt.storage and \
            all(_eq(t.shape[a], xt.shape[a]) for a in range(xt.rank) if a != axis) and \
            (t.shard == xt.shard or (t.shard is None and xt.shard is None))

    parts = [x]
    for _ in range(src.integer(0, 2)):
        r = src.integer(0, 2)
        v = x if r == 0 else g.pick(g.tensors(sc, fits, f4=g.cfg.type_level_only)) \
            if r == 1 else None
        if v is None and xt.shard is None and FORMATS[xt.dtype].evaluable:
            shape = tuple(src.integer(1, 3) if a == axis else d for a, d in enumerate(xt.shape))
            v = g.leaf(sc, TensorType(shape, xt.dtype))
        if v is not None:
            parts.append(v)
    order = src.permutation(len(parts))
    ax = axis - xt.rank if src.boolean(0.3) else axis
    return g.apply(sc, Concat(ax), [parts[i] for i in order]) is not None


@_builder(Stack)
def build_stack(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    x = g.pick(g.tensors(sc, f4=g.cfg.type_level_only))
    if x is None:
        return False
    xt = x.type

    def fits(v: _Val) -> bool:
        t = v.type
        return t.dtype is xt.dtype and t.rank == xt.rank and t.storage is xt.storage and \
            all(_eq(a, b) for a, b in zip(t.shape, xt.shape, strict=True)) and \
            (t.shard == xt.shard or (t.shard is None and xt.shard is None))

    parts = [x]
    for _ in range(src.integer(0, 2)):
        r = src.integer(0, 2)
        v = x if r == 0 else g.pick(g.tensors(sc, fits, f4=g.cfg.type_level_only)) \
            if r == 1 else None
        if v is None and xt.shard is None and FORMATS[xt.dtype].evaluable:
            v = g.leaf(sc, TensorType(xt.shape, xt.dtype))
        if v is not None:
            parts.append(v)
    axis = src.integer(0, xt.rank)
    ax = axis - (xt.rank + 1) if src.boolean(0.3) else axis
    return g.apply(sc, Stack(ax), parts) is not None
