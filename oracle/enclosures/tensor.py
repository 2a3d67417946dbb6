"""Enclosure rules of the tensor family (split from ``oracle/enclosure_rules.py``, D382; the
package mirrors ``semantics/evaluator/``). Cast, Reduce (every summation tree of the reduced
fiber), the data-movement ops (flags carried through the reference's own kernel) and TopK.
"""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.enclosure import (
    Enc,
    _isnan,
    as_enc,
    corners,
    from_candidates,
    register_enclosure,
    with_nan,
)
from tilefoundry.oracle.enclosure import as_f64 as _f64
from tilefoundry.oracle.enclosures.core import Site, _elementwise_abs, _full_like, _to_dt
from tilefoundry.semantics.dtypes import DType, cast, dtype_of
from tilefoundry.semantics.formats import FORMATS
from tilefoundry.semantics.ops.tensor import (
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
)


# ---------------------------------------------------------------------------------------------
# Cast
# ---------------------------------------------------------------------------------------------
@register_enclosure(Cast)
def _cast(s: Site):
    v = np.asarray(s.value)
    unspec = [c for c in s.contracts if c.kind == "unspecified" and c.mask is not None]
    x = s.enc(0)
    dst = dtype_of(v)
    if s.exact_inputs:
        e = None
    else:
        cands, nan_in = corners(s.impl, [x])
        if dst.is_float:
            # a cast is monotone where it is not NaN; NaN only beyond the format's range (an
            # fp8e4m3 overflow, an f8e8m0 of a value <= 0): that end of the box admits NaN
            # and the real part extends to the format's extreme on that side
            ext = Enc.full(dst, ())
            tails = [_isnan(c) & ~nan_in for c in cands]
            # a corner's NaN tail lies on the side of its source value: above the range for a
            # positive one (an overflow), below it for a negative one or a zero (a negative
            # overflow, an f8e8m0 of a value <= 0); the zero points (i >= 2) are zeros
            src = [_f64(x.lo), _f64(x.hi)]
            cands = [np.where(t, np.where(src[i] > 0, ext.hi, ext.lo) if i < 2 else ext.lo, c)
                     for i, (c, t) in enumerate(zip(cands, tails, strict=True))]
            e = from_candidates(cands, nan_in, dst, x.cause, s.name)
            e = with_nan(e, x.nan | np.logical_or.reduce(tails))
        else:
            e = from_candidates(cands, nan_in, dst, x.cause, s.name)
            lo64, hi64 = _f64(x.lo), _f64(x.hi)
            if dst is DType.BOOL and x.dtype is not DType.BOOL:
                # x != 0 is not monotone: a box reaching 0 (and not only 0) may be either
                zero = x.real & (lo64 <= 0) & (hi64 >= 0)
                either = zero & ~((lo64 == 0) & (hi64 == 0))
                e = Enc(np.where(zero, False, e.lo), np.where(either, True, e.hi), e.nan,
                        e.real, e.cause)
            elif dst.is_int and x.dtype.is_int:
                # an integer cast wraps (D17): [lo, hi] maps onto one run of the destination,
                # [cast(lo), cast(hi)], only when it spans fewer than 2^bits values and does
                # not wrap around inside (cast(lo) <= cast(hi)); elsewhere it bounds nothing
                bits = v.dtype.itemsize * 8
                span = x.hi.astype(np.uint64) - x.lo.astype(np.uint64)  # exact: hi >= lo
                fits = np.ones(v.shape, bool) if bits >= 64 else span < np.uint64(1 << bits)
                wl, wh = np.asarray(s.impl(x.lo)), np.asarray(s.impl(x.hi))
                wrap = x.real & ~(fits & (wl <= wh))
                if np.any(wrap):
                    f = _full_like(v, "integer cast of a value past the destination's range "
                                      "(wraps)")
                    e = Enc(np.where(wrap, f.lo, e.lo), np.where(wrap, f.hi, e.hi), e.nan,
                            e.real | wrap, e.cause)
        if not dst.is_float and x.dtype.is_float:  # NaN / out-of-range sources: unspecified
            lim = np.iinfo(v.dtype) if dst is not DType.BOOL else None
            if lim is not None:
                out = x.nan | ~x.real | (_f64(x.lo) <= lim.min - 1.0) | \
                    (_f64(x.hi) >= lim.max + 1.0)
            else:
                out = x.nan | ~x.real
            f = _full_like(v, "float -> int of a possibly out-of-range value")
            e = Enc(np.where(out, f.lo, e.lo), np.where(out, f.hi, e.hi), e.nan, e.real | out,
                    e.cause)
    for c in unspec:
        m = np.broadcast_to(np.asarray(c.mask, bool), v.shape)
        base = e if e is not None else Enc.point(v)
        f = _full_like(v, "unspecified float -> int element")
        e = Enc(np.where(m, f.lo, base.lo), np.where(m, f.hi, base.hi), base.nan | (
            m & f.nan), base.real | m, "unspecified")
    return e


# ---------------------------------------------------------------------------------------------
# Reduce, MatMul, Conv2D: the admitted sets
# ---------------------------------------------------------------------------------------------
def _tree_bounds(leaves_lo: np.ndarray, leaves_hi: np.ndarray, k: int, target: DType,
                 divisor: int | None, eta: float, cause: str) -> Enc:
    """Every tree over leaves anywhere in [leaves_lo, leaves_hi] (f64, fiber last) lands in the
    returned enclosure: a tree is monotone in its leaves, and ``bound_interval`` bounds every
    tree over fixed leaves."""
    from tilefoundry.semantics.reductions import bound_interval

    blo = bound_interval(leaves_lo, k, target, divisor=divisor, eta=eta)
    bhi = bound_interval(leaves_hi, k, target, divisor=divisor, eta=eta)
    # the finite part where the leaves are finite; ±inf where a leaf is or a partial may
    # overflow (bound_interval's pinf_v / ninf_v), taken from the upper / lower leaves
    lo64 = np.where(blo.ninf_v, -np.inf, np.where(blo.nonempty, blo.lo_t, np.inf))
    hi64 = np.where(bhi.pinf_v, np.inf, np.where(bhi.nonempty, bhi.hi_t, -np.inf))
    lo64, hi64 = np.where(np.isnan(lo64), -np.inf, lo64), np.where(np.isnan(hi64), np.inf, hi64)
    real = lo64 <= hi64
    if not FORMATS[target].has_inf:  # an overflow is NaN there; the finite part stays bounded
        over = np.isinf(lo64) | np.isinf(hi64)
        ext = Enc.full(target, ())
        lo64 = np.where(np.isinf(lo64), _f64(ext.lo), lo64)
        hi64 = np.where(np.isinf(hi64), _f64(ext.hi), hi64)
    else:
        over = np.zeros(lo64.shape, bool)
    lo, hi = _to_dt(lo64, target), _to_dt(hi64, target)  # exact: already on the target grid
    nan = blo.nan_ok | bhi.nan_ok | _mixed_inf(leaves_lo, leaves_hi, k) | _isnan(lo) | \
        _isnan(hi) | over
    lo = np.where(_isnan(lo), Enc.full(target, ()).lo, lo)
    hi = np.where(_isnan(hi), Enc.full(target, ()).hi, hi)
    return Enc(lo, hi, nan, real, cause)


def _mixed_inf(leaves_lo: np.ndarray, leaves_hi: np.ndarray, k: int) -> np.ndarray:
    """Per fiber (last axis, f64 leaves): may one summand be +inf (a leaf, or a positive part
    that overflows f32) while another is -inf? Then a sum of them may be NaN, although neither
    the all-lower nor the all-upper evaluation shows it."""
    with np.errstate(all="ignore"):
        grow = (1 + 2.0 ** -20) * (1 + (k + 1) * 2.0 ** -23)
        pos = np.where(np.isfinite(leaves_hi), np.maximum(leaves_hi, 0), 0).sum(-1) * grow
        neg = np.where(np.isfinite(leaves_lo), np.maximum(-leaves_lo, 0), 0).sum(-1) * grow
        may_pinf = (leaves_hi == np.inf).any(-1) | (pos >= 2.0 ** 128)
        may_ninf = (leaves_lo == -np.inf).any(-1) | (neg >= 2.0 ** 128)
    return may_pinf & may_ninf


def _fiber_last(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    keep = [a for a in range(x.ndim) if a not in axes]
    y = np.transpose(x, keep + list(axes))
    return y.reshape(*y.shape[:len(keep)], -1)


@register_enclosure(Reduce)
def _reduce(s: Site):
    op = s.op
    v = np.asarray(s.value)
    x = s.enc(0)
    dt = x.dtype
    axes = tuple(sorted(a % max(x.lo.ndim, 1) for a in op.axes)) if x.lo.ndim else ()
    tree = dt.is_float and op.kind in (ReduceKind.SUM, ReduceKind.MEAN) and \
        not op.policy.startswith("fold")
    if s.exact_inputs and not tree:
        return None
    if dt.is_int and op.kind in (ReduceKind.SUM, ReduceKind.MEAN):
        return _full_like(v, "integer sum of enclosed values (wraps)")
    if tree:
        lo, hi = _fiber_last(_f64(x.lo), axes), _fiber_last(_f64(x.hi), axes)
        n = lo.shape[-1]
        if n == 0:
            return None
        nan_in = _fiber_last(x.nan | ~x.real, axes).any(-1)
        lo = np.where(_fiber_last(x.real, axes), lo, np.nan)
        hi = np.where(_fiber_last(x.real, axes), hi, np.nan)
        e = _tree_bounds(lo, hi, n - 1, dtype_of(v),
                         n if op.kind is ReduceKind.MEAN else None, 0.0,
                         f"Reduce({op.kind.value}, {op.policy})")
        e = _enumerated_trees(e, lo, hi, dtype_of(v), op.kind is ReduceKind.MEAN,
                              op.policy == "unordered_tree")
        e = with_nan(e, nan_in)
        return Enc(e.lo.reshape(v.shape), e.hi.reshape(v.shape), e.nan.reshape(v.shape),
                   e.real.reshape(v.shape), e.cause)
    # fold policies, max / min / abs_max: monotone in every element
    cands, _ = corners(s.impl, [_elementwise_abs(x) if op.kind is ReduceKind.ABS_MAX else x])
    nan_fiber = np.asarray(np.any(x.nan | ~x.real, axis=axes, keepdims=op.keepdim)) \
        if x.lo.ndim else (x.nan | ~x.real)
    nan_fiber = np.broadcast_to(nan_fiber, v.shape) if nan_fiber.size == v.size else \
        nan_fiber.reshape(v.shape)
    e = from_candidates(cands, nan_fiber, dtype_of(v), x.cause, s.name)
    if op.kind in (ReduceKind.SUM, ReduceKind.MEAN) and dt.is_float and x.lo.ndim:
        lo_f = _fiber_last(np.where(x.real, _f64(x.lo), 0.0), axes)
        hi_f = _fiber_last(np.where(x.real, _f64(x.hi), 0.0), axes)
        e = mixed_inf_full(e, v, lo_f, hi_f, s.name)
    return with_nan(e, nan_fiber)


def mixed_inf_full(e: Enc, v: np.ndarray, lo_f: np.ndarray, hi_f: np.ndarray,
                   name: str) -> Enc:
    """A folded sum's enclosure ``e`` (from its all-lower and all-upper evaluations), made
    everything where its summands (f64 bounds, fiber last, reshaping to ``v``) may be +inf and
    -inf: their sum may be NaN, which neither end evaluation shows, and nothing bounds the real
    part."""
    mixed = _mixed_inf(lo_f, hi_f, lo_f.shape[-1]).reshape(v.shape)
    if not mixed.any():
        return e
    f = _full_like(v, f"{name} of summands that may be +inf and -inf")
    return Enc(np.where(mixed, f.lo, e.lo), np.where(mixed, f.hi, e.hi), e.nan | mixed,
               e.real | mixed, e.cause)


def _enumerated_trees(e: Enc, lo: np.ndarray, hi: np.ndarray, target: DType, mean: bool,
                      unordered: bool) -> Enc:
    """Short fibers (at most ``reductions.ENUMERATE_MAX`` leaves, as the admitted-set test):
    the hull of every tree's result at the lower leaves and at the upper leaves — exactly the
    admitted set's hull for point leaves, and sound for interval leaves since a tree of f32
    additions is monotone in its leaves. Fibers with a non-finite leaf keep the bound."""
    from tilefoundry.semantics.reductions import ENUMERATE_MAX
    from tilefoundry.semantics.reductions import enumerate_trees as _enumerate_trees
    from tilefoundry.semantics.reductions import round_to as _round
    from tilefoundry.semantics.reductions import widen as _widen

    n = lo.shape[-1]
    fibers = int(np.prod(lo.shape[:-1], dtype=np.int64))
    trees = {1: 1, 2: 1, 3: 3, 4: 15, 5: 105, 6: 945}.get(n, 0)  # (2n-3)!!
    if n > ENUMERATE_MAX or fibers * trees > 1 << 21:
        return e
    ok = np.isfinite(lo).all(-1) & np.isfinite(hi).all(-1)
    if not ok.any():
        return e
    with np.errstate(all="ignore"):
        ends = []
        for leaves, pick in ((lo, np.min), (hi, np.max)):
            c = np.stack(_enumerate_trees(np.where(ok[..., None], leaves, 0.0).astype(
                np.float32), unordered))
            if mean:
                c = c / np.float32(n)
            c = _widen(_round(c, target), target).astype(np.float64)
            ends.append(pick(np.where(np.isnan(c), np.inf if pick is np.min else -np.inf, c),
                             0))
            ok &= ~np.isnan(c).any(0)
    lo_t, hi_t = (_to_dt(t, target) for t in ends)
    return Enc(np.where(ok, lo_t, e.lo), np.where(ok, hi_t, e.hi), np.where(ok, False, e.nan),
               np.where(ok, True, e.real), e.cause)


# ---------------------------------------------------------------------------------------------
# data movement: the reference kernel moves each part of the enclosure
# ---------------------------------------------------------------------------------------------
#: operand positions that carry data (the others are indices / offsets / shapes)
_DATA = {Gather: (0,), InsertSlice: (0, 1), CacheUpdate: (0, 3)}


def _flag(mask: np.ndarray, like: np.ndarray) -> np.ndarray:
    """A bool mask as values of ``like``'s dtype (1 / 0), so a movement kernel moves it.
    f8e8m0 has no zero (its cast of 0 is NaN, which read back as True: every moved flag was
    set): there False is 2."""
    dt = dtype_of(like)
    if dt is DType.BOOL:
        return np.asarray(mask, bool)
    if dt.is_float:
        off = 2.0 if dt is DType.F8E8M0 else 0.0
        return cast(np.where(mask, 1.0, off).astype(np.float32), dt)
    return np.asarray(mask).astype(like.dtype)


def _unflag(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if dtype_of(x) is DType.F8E8M0:
        return _f64(x) == 1.0
    return _f64(x) != 0


@register_enclosure(Reshape, Transpose, Slice, Concat, Stack, Gather, InsertSlice, CacheUpdate)
def _movement(s: Site):
    data = _DATA.get(type(s.op), tuple(range(len(s.args))))
    v = np.asarray(s.value)
    if any(e is not None for i, e in enumerate(s.encs) if i not in data):
        return _full_like(v, f"{type(s.op).__name__} with an enclosed index / offset")
    if all(s.encs[i] is None for i in data):
        return None
    parts = {}
    for attr in ("lo", "hi", "nan", "real"):
        args = list(s.args)
        for i in data:
            e = s.enc(i)
            t = getattr(e, attr)
            args[i] = np.asarray(  # C order, keeping rank 0 (ascontiguousarray makes it 1-d)
                t if attr in ("lo", "hi") else _flag(t, np.asarray(s.args[i])), order="C")
        r = np.asarray(s.impl(*args))
        parts[attr] = r if attr in ("lo", "hi") else _unflag(r)
    cause = next(e.cause for e in s.encs if e is not None)
    return Enc(parts["lo"], parts["hi"], parts["nan"], parts["real"], cause)


def _fiber_hull(e: Enc | None, v: np.ndarray, ax: int) -> Enc | None:
    """Every element of a fiber along ``ax`` anywhere in it: the enclosure of a value whose
    fibers hold their elements in an unspecified order (TopK with ``sorted=False``)."""
    v = np.asarray(v)
    if v.ndim == 0 or v.shape[ax] <= 1:
        return e
    e = as_enc(e, v)
    lo64 = np.where(e.real, _f64(e.lo), np.inf)
    hi64 = np.where(e.real, _f64(e.hi), -np.inf)
    lo = np.take_along_axis(e.lo, np.argmin(lo64, axis=ax, keepdims=True), ax)
    hi = np.take_along_axis(e.hi, np.argmax(hi64, axis=ax, keepdims=True), ax)
    parts = (lo, hi, e.nan.any(ax, keepdims=True), e.real.any(ax, keepdims=True))
    return Enc(*(np.broadcast_to(t, v.shape).copy() for t in parts),
               e.cause or "TopK(sorted=False) order")


@register_enclosure(TopK)
def _topk(s: Site):
    vals, idx = s.value
    if s.op.sorted:
        return _topk_sorted(s)
    ax = s.op.axis % np.ndim(vals) if np.ndim(vals) else 0
    r = _topk_sorted(s) if not s.exact_inputs else (None, None)
    return (_fiber_hull(r[0], vals, ax), _fiber_hull(r[1], idx, ax))


def rank_extremes(x, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The two extreme configurations of an enclosed ``x`` for an order statistic (monotone in
    every element; NaN ranks last): every maybe-NaN element real at its end, or dropped to
    NaN — (the configuration giving the lowest selection, the highest)."""
    dt = x.dtype
    if dt.is_float:
        nanv = cast(np.asarray(np.nan, np.float32), dt)
        real_lo, real_hi = np.where(x.real, x.lo, nanv), np.where(x.real, x.hi, nanv)
        maybe = x.nan & x.real
        drop_lo, drop_hi = np.where(maybe, nanv, real_lo), np.where(maybe, nanv, real_hi)
    else:
        real_lo = drop_lo = x.lo
        real_hi = drop_hi = x.hi
    return (drop_lo, real_hi) if largest else (real_lo, drop_hi)


def _topk_sorted(s: Site, largest: bool | None = None):
    """The order-statistic enclosure of a sorted selection (TopK; the tile-family Sort passes
    ``largest`` = its ``descending``)."""
    largest = s.op.largest if largest is None else largest
    vals, idx = s.value
    if s.exact_inputs:
        return None
    x = s.enc(0)
    nan_any = bool(np.any(x.nan | ~x.real))
    # the r-th selected value is an order statistic: monotone in every element; NaN ranks last
    # in either direction, so an element turning NaN drops out of the ranking. The extreme
    # configurations: every maybe-NaN element real at its end, or dropped (NaN)
    lo_cfg, hi_cfg = rank_extremes(x, largest)
    lo_v = np.asarray(s.impl(lo_cfg, *s.args[1:])[0])
    hi_v = np.asarray(s.impl(hi_cfg, *s.args[1:])[0])
    lo_n, hi_n = _isnan(lo_v), _isnan(hi_v)
    ext = Enc.full(dtype_of(np.asarray(vals)), ())
    ev = Enc(np.where(lo_n, ext.lo, lo_v), np.where(hi_n, ext.hi, hi_v), lo_n | hi_n,
             ~(lo_n & hi_n), x.cause)
    iv = np.asarray(idx)
    ax = s.op.axis % x.lo.ndim if x.lo.ndim else 0
    extent = x.lo.shape[ax] if x.lo.ndim else 1
    if nan_any:
        return (ev, index_range(iv, extent, "TopK indices over possibly-NaN elements"))
    # the selection and its order are the reference's wherever a fiber's intervals are
    # pairwise disjoint (sorted by lower end, each upper end below the next lower end)
    lo, hi = np.moveaxis(_f64(x.lo), ax, -1), np.moveaxis(_f64(x.hi), ax, -1)
    order = np.argsort(lo, axis=-1, kind="stable")
    slo, shi = np.take_along_axis(lo, order, -1), np.take_along_axis(hi, order, -1)
    fixed = (shi[..., :-1] < slo[..., 1:]).all(-1) if lo.shape[-1] > 1 else \
        np.ones(lo.shape[:-1], bool)
    if fixed.all():
        return (ev, None)
    fixed = np.moveaxis(np.broadcast_to(fixed[..., None], iv.shape[:ax] + iv.shape[ax + 1:]
                                        + (iv.shape[ax],)), -1, ax)
    f = index_range(iv, extent, "TopK indices of overlapping enclosed values")
    return (ev, Enc(np.where(fixed, iv, f.lo), np.where(fixed, iv, f.hi),
                    np.zeros(iv.shape, bool), np.ones(iv.shape, bool), f.cause))


def index_range(iv: np.ndarray, extent: int, cause: str) -> Enc:
    """Indices into an axis of ``extent`` elements whatever else is free: [0, extent - 1]
    (judged: an index outside the axis FAILs; it is not everything)."""
    iv = np.asarray(iv)
    lo = np.zeros(iv.shape, iv.dtype)
    hi = np.full(iv.shape, max(extent - 1, 0), iv.dtype)
    return Enc(lo, hi, np.zeros(iv.shape, bool), np.ones(iv.shape, bool), cause)
