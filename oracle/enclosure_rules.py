"""The enclosure rule of every op class (``ENCLOSURES``), grouped by op family.

A rule gets a ``Site`` (the op, a fresh evaluation context to run the reference's own kernel
at box corners, the operand enclosures — ``None`` for an exact operand —, the operand values,
the reference result and the contracts this call noted) and returns the result's enclosure:
an ``Enc``, ``None`` (the result is exact), or a tuple of them for tuple results.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tilefoundry.oracle.enclosure import (
    Enc,
    _isnan,
    as_enc,
    corners,
    from_candidates,
    from_ordered,
    hull,
    ordered,
    register_enclosure,
    with_nan,
)
from tilefoundry.oracle.enclosure import (
    as_f64 as _f64,
)
from tilefoundry.semantics.dtypes import DType, cast, dtype_of
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx
from tilefoundry.semantics.formats import FORMATS
from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary, UnaryKind
from tilefoundry.semantics.ops.nn import (
    Conv2D,
    Gelu,
    LayerNorm,
    MatMul,
    ReLU,
    RMSNorm,
    RoPE,
    Sigmoid,
    Silu,
    SoftMax,
    Tanh,
)
from tilefoundry.semantics.ops.shape import ShapeCompose, ShapeExtract
from tilefoundry.semantics.ops.sharding import Local, Reshard
from tilefoundry.semantics.ops.tensor import (
    CacheUpdate,
    Cast,
    Concat,
    Gather,
    InsertSlice,
    Rank,
    Reduce,
    ReduceKind,
    Reshape,
    ShapeOf,
    Slice,
    Stack,
    TopK,
    Transpose,
    Zeros,
)
from tilefoundry.semantics.ops.tile_scan import Scan
from tilefoundry.semantics.ops.tile_select import Bitcast, Select


@dataclass
class Site:
    op: Any
    call: Any
    out_type: Any
    dims: Any
    encs: list  # Enc | None per operand
    args: tuple
    value: Any
    contracts: list  # OpContract noted by this call

    def impl(self, *args) -> Any:
        """The reference kernel on other operand values (its notes are discarded)."""
        ctx = EvalCtx(self.op, self.call, self.out_type, [], tuple(args), self.dims)
        return EVALUATORS[type(self.op)](ctx, tuple(args))

    @property
    def name(self) -> str:
        kind = getattr(self.op, "kind", None)
        kind = getattr(kind, "value", kind)  # an enum kind, or a plain str (tile family)
        return type(self.op).__name__ + (f"({kind})" if kind is not None else "")

    def enc(self, i: int) -> Enc:
        return as_enc(self.encs[i], np.asarray(self.args[i]))

    @property
    def ulp(self) -> float:
        return max([float(c.ulp) for c in self.contracts if c.kind == "ulp"] or [0.0])

    @property
    def exact_inputs(self) -> bool:
        return all(e is None for e in self.encs)

    def widen_ulp(self, e: Enc) -> Enc:
        """``e``, an enclosure of the reference result, widened by the op's ULP budget; where
        that reference may be f8e8m0's least value 2^-127, NaN is admitted too (a model's f32
        value may underflow to 0 there, whose cast is NaN: lemma B′ of ``semantics/ulp.py``)."""
        from tilefoundry.semantics.ulp import nan_admitted

        w = e.widen_ulps(self.ulp)
        if not self.ulp or e.dtype is not DType.F8E8M0:
            return w
        least = e.real & nan_admitted(e.lo)  # lo is the least value: the reference may be it
        return replace(w, nan=w.nan | least) if least.any() else w


def _to_dt(v64: np.ndarray, dt: DType) -> np.ndarray:
    """f64 values to ``dt`` by round-to-nearest through f32 (within one ulp of ``dt``)."""
    with np.errstate(all="ignore"):
        f = np.asarray(v64, np.float64).astype(np.float32)
    return f if dt is DType.F32 else cast(f, dt)


def _full_like(v: np.ndarray, cause: str) -> Enc:
    return Enc.full(dtype_of(np.asarray(v)), tuple(np.shape(v)), cause)


def _ulp_source(s: Site) -> Enc | None:
    """The freedom of a ULP-budget op on exact inputs: the reference ± budget ulps."""
    if not s.ulp:
        return None
    v = np.asarray(s.value)
    e = s.widen_ulp(Enc.point(v))
    e.cause = f"{s.name} within {s.ulp:g} ulp"
    k = int(np.ceil(s.ulp))
    if 2 * k + 1 <= CANDIDATES_MAX and dtype_of(v).is_float:
        base = ordered(v)
        e.cands = np.stack([from_ordered(base + j, dtype_of(v)) for j in range(-k, k + 1)])
    return e


#: the most admitted values an enclosure carries as a finite set (``Enc.cands``)
CANDIDATES_MAX = 8


def _outward(v64_lo: np.ndarray, v64_hi: np.ndarray, dt: DType, nan: np.ndarray,
             real: np.ndarray, cause: str) -> Enc:
    """Round f64 bounds (within 2^-40 relative of the true bounds) outward onto ``dt``."""
    with np.errstate(all="ignore"):
        slo = v64_lo - np.abs(v64_lo) * 2.0 ** -40 - 1e-300
        shi = v64_hi + np.abs(v64_hi) * 2.0 ** -40 + 1e-300
        lo = _to_dt(slo, dt)
        hi = _to_dt(shi, dt)
    # a bound the format cannot hold (fp8e4m3 overflow, f8e8m0 of a value <= 0) rounds to NaN:
    # NaN is then admitted and that end is the format's extreme
    lo_nan, hi_nan = _isnan(lo), _isnan(hi)
    lo = np.where(lo_nan, Enc.full(dt, ()).lo, from_ordered(ordered(lo) - 1, dt))
    hi = np.where(hi_nan, Enc.full(dt, ()).hi, from_ordered(ordered(hi) + 1, dt))
    bad = np.isnan(v64_lo) | np.isnan(v64_hi)
    e = Enc(lo, hi, nan | bad | lo_nan | hi_nan, real, cause)
    if bad.any():
        f = Enc.full(dt, e.shape, cause)
        e = Enc(np.where(bad, f.lo, e.lo), np.where(bad, f.hi, e.hi), e.nan, e.real | bad,
                cause)
    return e


# ---------------------------------------------------------------------------------------------
# math: Binary, Unary
# ---------------------------------------------------------------------------------------------
_CMP = {BinaryKind.EQ, BinaryKind.NE, BinaryKind.LT, BinaryKind.LE, BinaryKind.GT,
        BinaryKind.GE}
_INT_WRAP = {BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL, BinaryKind.DIV}


def _compare(kind: BinaryKind, a: Enc, b: Enc, shape) -> Enc:
    al, ah, bl, bh = _f64(a.lo), _f64(a.hi), _f64(b.lo), _f64(b.hi)
    both = a.real & b.real
    if kind is BinaryKind.LT:
        sure_t, may_t = both & (ah < bl), both & (al < bh)
    elif kind is BinaryKind.LE:
        sure_t, may_t = both & (ah <= bl), both & (al <= bh)
    elif kind is BinaryKind.GT:
        sure_t, may_t = both & (al > bh), both & (ah > bl)
    elif kind is BinaryKind.GE:
        sure_t, may_t = both & (al >= bh), both & (ah >= bl)
    else:
        overlap = both & (al <= bh) & (bl <= ah)
        point = both & (al == ah) & (bl == bh) & (al == bl)
        sure_t, may_t = point, overlap
        if kind is BinaryKind.NE:
            sure_t, may_t = both & ~overlap, ~point
    nan = a.nan | b.nan | ~a.real | ~b.real  # a NaN operand: False (True for ne)
    if kind is BinaryKind.NE:
        may_t = may_t | nan
        sure_t = sure_t & ~(a.nan | b.nan)
    else:
        sure_t = sure_t & ~nan
    lo = np.broadcast_to(sure_t, shape).copy()
    hi = np.broadcast_to(may_t | sure_t, shape).copy()
    return Enc(lo, hi, np.zeros(shape, bool), np.ones(shape, bool), a.cause or b.cause)


@register_enclosure(Binary)
def _binary(s: Site):
    kind = s.op.kind
    a, b = s.enc(0), s.enc(1)
    v = np.asarray(s.value)
    dt = a.dtype
    if kind in _CMP:
        return _compare(kind, a, b, v.shape)
    if dt.is_int and kind in _INT_WRAP:
        return _full_like(v, "integer arithmetic on an enclosed operand (wraps)")
    if dt.is_float and kind is BinaryKind.DIV:
        straddle = b.real & (_f64(b.lo) <= 0) & (_f64(b.hi) >= 0) & ~(
            (_f64(b.lo) == 0) & (_f64(b.hi) == 0))
    else:
        straddle = None
    cands, nan_in = corners(s.impl, [a, b])
    e = from_candidates(cands, nan_in, dtype_of(v), a.cause or b.cause, s.name)
    if dt.is_float:
        e = with_nan(e, np.broadcast_to(a.nan, v.shape) | np.broadcast_to(b.nan, v.shape))
    if straddle is not None and np.any(straddle):
        f = _full_like(v, "division by an interval containing 0")
        m = np.broadcast_to(straddle, v.shape)
        e = Enc(np.where(m, f.lo, e.lo), np.where(m, f.hi, e.hi), e.nan | m, e.real | m, e.cause)
    return e


#: critical points of non-monotone elementwise functions (their extrema inside the domain)
_CRIT = {UnaryKind.ABS: (0.0,), UnaryKind.SQUARE: (0.0,)}
_SILU_MIN, _GELU_MIN, _GELU_TANH_MIN = -1.2784645427610738, -0.7517915246935645, -0.7522


def _crit_points(x: Enc, crits: tuple[float, ...]) -> list[np.ndarray]:
    """The grid points of x's dtype around each critical point, clipped into x's interval."""
    dt = x.dtype
    out = []
    lo, hi = _f64(x.lo), _f64(x.hi)
    for c in crits:
        cv = cast(np.full(x.shape, c, np.float32), dt) if dt.is_float else \
            np.full(x.shape, c).astype(x.lo.dtype)
        base = ordered(cv) if dt.is_float else None
        for k in (-2, -1, 0, 1, 2):
            p = from_ordered(base + k, dt) if dt.is_float else cv
            pw = _f64(p)
            inside = (pw >= lo) & (pw <= hi)
            out.append(np.where(inside, p, x.lo))
    return out


def _elementwise_unary(s: Site, crits: tuple[float, ...] = ()) -> Enc | None:
    x = s.enc(0)
    v = np.asarray(s.value)
    if s.exact_inputs:
        return _ulp_source(s)
    dt = x.dtype
    if dt.is_int and x.lo.dtype.kind == "i" and np.any(x.real & (x.lo == np.iinfo(x.lo.dtype)
                                                                  .min)):
        return _full_like(v, "integer unary at the minimum (wraps)")
    below = None
    if dt.is_float and getattr(s.op, "kind", None) in _DOMAIN_FROM_ZERO:
        # NaN below 0, monotone from 0 on: the part of the box below 0 admits NaN only
        lo64 = _f64(x.lo)
        below = x.real & (lo64 < 0)
        zero = np.zeros_like(x.lo)
        x = Enc(np.where(below, zero, x.lo), np.where(below & (_f64(x.hi) < 0), zero, x.hi),
                x.nan | below, x.real & ~(below & (_f64(x.hi) < 0)), x.cause)
    extra = [_crit_points(x, crits)] if crits else None
    cands, nan_in = corners(s.impl, [x], extra)
    e = from_candidates(cands, nan_in, dtype_of(v), x.cause, s.name)
    if dt.is_int and getattr(s.op, "kind", None) is UnaryKind.SQUARE:
        # x * x wraps past the dtype's range, where the corners bound nothing
        big = np.maximum(np.abs(_f64(x.lo)), np.abs(_f64(x.hi))) ** 2 > \
            float(np.iinfo(x.lo.dtype).max) * (1 - 2.0 ** -40)
        if np.any(big := x.real & big):
            f = _full_like(v, "integer square past the dtype's range (wraps)")
            e = Enc(np.where(big, f.lo, e.lo), np.where(big, f.hi, e.hi), e.nan, e.real | big,
                    e.cause)
    if dt.is_float:
        e = with_nan(e, x.nan)
    return s.widen_ulp(e)


#: sqrt, log, log2, rsqrt: NaN for x < 0, monotone on [0, inf]
_DOMAIN_FROM_ZERO = {UnaryKind.SQRT, UnaryKind.LOG, UnaryKind.LOG2, UnaryKind.RSQRT}


@register_enclosure(Unary)
def _unary(s: Site):
    return _elementwise_unary(s, _CRIT.get(s.op.kind, ()))


@register_enclosure(ReLU, Sigmoid, Tanh)
def _monotone_nn(s: Site):
    return _elementwise_unary(s)


@register_enclosure(Silu)
def _silu(s: Site):
    return _elementwise_unary(s, (_SILU_MIN,))


@register_enclosure(Gelu)
def _gelu(s: Site):
    return _elementwise_unary(s, (_GELU_MIN, _GELU_TANH_MIN))


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


def _elementwise_abs(x: Enc) -> Enc:
    lo, hi = _f64(x.lo), _f64(x.hi)
    straddle = (lo <= 0) & (hi >= 0)
    zero = np.zeros_like(x.lo)
    with np.errstate(over="ignore"):
        alo = np.where(straddle, zero, np.where(lo > 0, x.lo, -x.hi))
        ahi = np.where(np.abs(lo) >= np.abs(hi), np.abs(x.lo), np.abs(x.hi))
    alo, ahi = alo.astype(x.lo.dtype), ahi.astype(x.lo.dtype)
    if x.lo.dtype.kind == "i":  # |INT_MIN| wraps to INT_MIN: the magnitudes span everything
        ii = np.iinfo(x.lo.dtype)
        at_min = x.real & (x.lo == ii.min)
        alo = np.where(at_min, ii.min, alo).astype(x.lo.dtype)
        ahi = np.where(at_min, ii.max, ahi).astype(x.lo.dtype)
    return Enc(alo, ahi, x.nan, x.real, x.cause)


def _products(a: Enc, b: Enc):
    """Per (..., m, n, k): the f64 intervals of the products of a (..., m, k) and b (..., k, n)
    (exact: products of f32-representable values), from the operands' real parts; plus the
    leaves that may be NaN (an operand may be), that cross the domain (inf · 0 at a corner),
    and that are certainly NaN (an operand has no real part)."""
    with np.errstate(all="ignore"):
        al = np.where(a.real, _f64(a.lo), 0.0)[..., :, None, :]
        ah = np.where(a.real, _f64(a.hi), 0.0)[..., :, None, :]
        bl = np.swapaxes(np.where(b.real, _f64(b.lo), 0.0), -1, -2)[..., None, :, :]
        bh = np.swapaxes(np.where(b.real, _f64(b.hi), 0.0), -1, -2)[..., None, :, :]
        c = np.stack(np.broadcast_arrays(al * bl, al * bh, ah * bl, ah * bh))
        isn = np.isnan(c)
        lo = np.where(isn, np.inf, c).min(0)
        hi = np.where(isn, -np.inf, c).max(0)
    shape = lo.shape

    def leaves(m_a, m_b):
        return np.broadcast_to(m_a[..., :, None, :] | np.swapaxes(m_b, -1, -2)[..., None, :, :],
                               shape)

    maybe_nan = leaves(a.nan, b.nan)
    dead = leaves(~a.real, ~b.real)
    return lo, hi, maybe_nan, isn.any(0) & ~dead, dead


def _matmul_enc(a: Enc, b: Enc, out_dt: DType, cause: str) -> Enc | None:
    from tilefoundry.semantics.matmul import ETA_F32

    lo, hi, maybe_nan, cross, dead = _products(a, b)
    k = lo.shape[-1]
    if k == 0:
        return None
    skip = cross | dead
    e = _tree_bounds(np.where(skip, 0.0, lo), np.where(skip, 0.0, hi), k, out_dt, None,
                     ETA_F32, cause)
    crossed, died = cross.any(-1), dead.any(-1)
    e = with_nan(e, maybe_nan.any(-1) | crossed | died)
    if crossed.any():
        f = Enc.full(out_dt, e.shape, cause)
        e = Enc(np.where(crossed, f.lo, e.lo), np.where(crossed, f.hi, e.hi), e.nan, e.real,
                cause)
    return Enc(e.lo, e.hi, e.nan, e.real & ~(died & ~crossed), cause)


def _int_matmul(a: Enc, b: Enc, v: np.ndarray) -> Enc:
    """Interval products summed exactly (f64 holds them while every bound is below 2^53); where
    the sum's bounds stay inside the result dtype nothing wraps and the interval is exact,
    elsewhere the i64 accumulator's wrap admits every value."""
    lo, hi, _, _, _ = _products(a, b)
    slo, shi = lo.sum(-1), hi.sum(-1)
    info = np.iinfo(v.dtype)
    ok = (np.abs(lo).max(-1, initial=0) * max(lo.shape[-1], 1) < 2.0 ** 53) & \
        (np.abs(hi).max(-1, initial=0) * max(hi.shape[-1], 1) < 2.0 ** 53) & \
        (slo >= info.min) & (shi <= info.max)
    f = _full_like(v, "integer matmul of enclosed values (wraps)")
    lo_v = np.where(ok, np.clip(slo, info.min, info.max), 0).astype(v.dtype)
    hi_v = np.where(ok, np.clip(shi, info.min, info.max), 0).astype(v.dtype)
    cause = a.cause or b.cause or "MatMul"
    return Enc(*(np.broadcast_to(t, v.shape).copy() for t in (
        np.where(ok, lo_v, f.lo), np.where(ok, hi_v, f.hi), np.zeros(v.shape, bool),
        np.ones(v.shape, bool))), cause if ok.all() else f.cause)


@register_enclosure(MatMul)
def _matmul(s: Site):
    v = np.asarray(s.value)
    if s.exact_inputs and not s.contracts:
        return None
    if not dtype_of(v).is_float:
        return _int_matmul(s.enc(0), s.enc(1), v)
    e = _matmul_enc(s.enc(0), s.enc(1), dtype_of(v), "MatMul")
    if e is None:
        return None
    return Enc(*(np.broadcast_to(t, v.shape).copy() for t in (e.lo, e.hi, e.nan, e.real)),
               e.cause)


@register_enclosure(Conv2D)
def _conv2d(s: Site):
    from tilefoundry.semantics.evaluator.nn import conv2d_operands, conv2d_result

    v = np.asarray(s.value)
    if s.exact_inputs and not s.contracts:
        return None
    op = s.op
    ex, ew, eb = s.enc(0), s.enc(1), s.enc(2)
    parts = []
    for attr in ("lo", "hi"):
        parts.append(conv2d_operands(getattr(ex, attr), getattr(ew, attr), getattr(eb, attr),
                                     op.stride, op.padding, op.dilation, op.groups))
    def moved(mask_of):  # a flag per operand element, moved like the values (the appended
        # ones column of a and the padding are never flagged)
        fa, fb, _ = conv2d_operands(*(np.where(mask_of(e), 1.0, 0.0).astype(np.float32)
                                      for e in (ex, ew, eb)), op.stride, op.padding,
                                    op.dilation, op.groups)
        fa[..., -1] = 0.0
        return fa != 0, fb != 0

    (alo, blo, shape), (ahi, bhi, _) = parts
    (na, nb), (da, db) = moved(lambda e: e.nan), moved(lambda e: ~e.real)
    a = Enc(alo, ahi, na, ~da)
    b = Enc(blo, bhi, nb, ~db)
    e = _matmul_enc(a, b, dtype_of(v), "Conv2D")
    if e is None:
        return None
    return Enc(*(conv2d_result(t, shape) for t in (e.lo, e.hi, e.nan, e.real)), "Conv2D")


# ---------------------------------------------------------------------------------------------
# normalizations and RoPE: interval arithmetic in f64, rounded outward, widened by the budget
# ---------------------------------------------------------------------------------------------
def _iv(e: Enc) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The real part in f64 (0 where unusable) and the elements whose real part is infinite
    or empty (those make the interval formulas meaningless). NaN possibilities are handled by
    the caller (``_row_nan``)."""
    lo, hi = _f64(e.lo), _f64(e.hi)
    bad = e.real & (~np.isfinite(lo) | ~np.isfinite(hi))
    return np.where(bad | ~e.real, 0.0, lo), np.where(bad | ~e.real, 0.0, hi), bad


def _row_nan(encs: list[Enc], shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """A row op propagates NaN to its whole row (softmax, LayerNorm, RMSNorm): the rows that
    may be NaN, and those that certainly are (an element with no real part)."""
    may = np.zeros(shape, bool)
    dead = np.zeros(shape, bool)
    for e in encs:
        may = may | np.broadcast_to((e.nan | ~e.real).any(-1, keepdims=True), shape)
        dead = dead | np.broadcast_to((~e.real).any(-1, keepdims=True), shape)
    return may, dead


def _imul(al, ah, bl, bh):
    c = np.stack([al * bl, al * bh, ah * bl, ah * bh])
    return c.min(0), c.max(0)


def _isq(al, ah):
    lo = np.where((al <= 0) & (ah >= 0), 0.0, np.minimum(al * al, ah * ah))
    return lo, np.maximum(al * al, ah * ah)


def _row_op(s: Site, fn) -> Enc | None:
    v = np.asarray(s.value)
    if s.exact_inputs:
        return _ulp_source(s)
    with np.errstate(all="ignore"):
        lo, hi, bad, may_nan, dead = fn(s)
    bad = np.broadcast_to(bad, v.shape) & ~dead
    e = _outward(lo, hi, dtype_of(v), np.broadcast_to(may_nan, v.shape).copy(),
                 ~np.broadcast_to(dead, v.shape), s.name)
    f = _full_like(v, f"{s.name} of a row with an infinite enclosed element")
    e = Enc(np.where(bad, f.lo, e.lo), np.where(bad, f.hi, e.hi), e.nan | bad, e.real | bad,
            e.cause)
    return s.widen_ulp(e)


def _exclusive_sum(t: np.ndarray) -> np.ndarray:
    """Per element of the last axis, the sum of the *other* elements, without a subtraction."""
    z = np.zeros_like(t[..., :1])
    before = np.concatenate([z, np.cumsum(t[..., :-1], axis=-1)], axis=-1)
    after = np.concatenate([np.cumsum(t[..., :0:-1], axis=-1)[..., ::-1], z], axis=-1)
    return before + after


@register_enclosure(SoftMax)
def _softmax(s: Site):
    def fn(s):
        ax = s.op.axis % np.ndim(s.value)
        x = s.enc(0)
        moved = Enc(*(np.moveaxis(t, ax, -1) for t in (x.lo, x.hi, x.nan, x.real)))
        lo, hi = _f64(moved.lo), _f64(moved.hi)
        # an element whose real part is certainly -inf (a masked score) adds e^-inf = 0 and
        # gets exactly 0, and a real part reaching down to -inf only lowers e^lo to 0: only
        # +inf, or a row whose every element may be -inf (0 / 0: NaN), leaves a row unbounded
        bad = moved.real & ((lo == np.inf) | (hi == np.inf))
        use = moved.real & ~bad
        lo, hi = np.where(use, lo, 0.0), np.where(use, hi, 0.0)
        m = np.where(use, hi, -np.inf).max(-1, keepdims=True)
        m = np.where(m == -np.inf, 0.0, m)  # no usable element: the row is NaN or unbounded
        el, eh = np.exp(lo - m), np.exp(hi - m)
        # y_i >= e^lo_i / (e^lo_i + sum_{j != i} e^hi_j), y_i <= e^hi_i / (e^hi_i + sum_{j != i}
        # e^lo_j); the sums over the others are prefix + suffix sums of positive terms (a total
        # minus the own term cancels: 1 + 1e-48 - 1 is 0, which made y_i's lower bound 1)
        ylo = np.where(el == 0, 0.0, el / (el + _exclusive_sum(eh)))
        yhi = np.where(eh == 0, 0.0, eh / (eh + _exclusive_sum(el)))
        all_neg = (~use | (lo == -np.inf)).all(-1, keepdims=True)
        rowbad = np.broadcast_to(bad.any(-1, keepdims=True) | all_neg, bad.shape)
        may, dead = _row_nan([moved], rowbad.shape)
        return tuple(np.moveaxis(t, -1, ax) for t in (ylo, yhi, rowbad, may, dead))

    return _row_op(s, fn)


def _rms_or_ln(s: Site, centered: bool):
    xl, xh, xb = _iv(s.enc(0))
    gl, gh, gb = _iv(s.enc(1))
    n = xl.shape[-1]
    eps = float(s.op.eps)
    if centered:
        bl, bh, bb = _iv(s.enc(2))
        mul, muh = xl.mean(-1, keepdims=True), xh.mean(-1, keepdims=True)
        dl, dh = xl - muh, xh - mul
        ql, qh = _isq(dl, dh)
    else:
        dl, dh = xl, xh
        ql, qh = _isq(xl, xh)
        bl = bh = 0.0
        bb = False
    vl, vh = ql.sum(-1, keepdims=True) / n + eps, qh.sum(-1, keepdims=True) / n + eps
    rl, rh = 1.0 / np.sqrt(vh), 1.0 / np.sqrt(vl)
    yl, yh = _imul(dl, dh, rl, rh)
    yl, yh = _imul(yl, yh, gl, gh)
    shape = np.broadcast_shapes(xb.shape, np.shape(gb))
    bad = np.broadcast_to(xb.any(-1, keepdims=True), shape) | gb | bb
    encs = [s.enc(i) for i in range(len(s.args))]
    may, dead = _row_nan(encs[:1], shape)
    for e in encs[1:]:  # weight / bias: elementwise
        may, dead = may | (e.nan | ~e.real), dead | ~e.real
    return yl + bl, yh + bh, bad, may, dead


@register_enclosure(RMSNorm)
def _rmsnorm(s: Site):
    return _row_op(s, lambda s: _rms_or_ln(s, False))


@register_enclosure(LayerNorm)
def _layernorm(s: Site):
    return _row_op(s, lambda s: _rms_or_ln(s, True))


@register_enclosure(RoPE)
def _rope(s: Site):
    outs = s.value
    if s.exact_inputs:
        return tuple(s.widen_ulp(Enc.point(np.asarray(o))) if s.ulp else None
                     for o in outs)
    res = []
    pos = np.asarray(s.args[4]).astype(np.int64)
    cl, ch, cb = _iv(s.enc(2))
    sl, sh, sb = _iv(s.enc(3))
    if s.encs[4] is not None:
        return tuple(_full_like(o, "RoPE with enclosed positions") for o in outs)
    ce, se = s.enc(2), s.enc(3)
    cn, sn = (ce.nan | ~ce.real)[pos], (se.nan | ~se.real)[pos]
    cd, sd = (~ce.real)[pos], (~se.real)[pos]
    cl, ch, cb, sl, sh, sb = (t[pos] for t in (cl, ch, cb, sl, sh, sb))
    for i, o in enumerate(outs):
        x = s.enc(i)
        xl, xh, xb = _iv(x)
        xn, xd = x.nan | ~x.real, ~x.real
        hh = xn.shape[-1] // 2
        rn = np.concatenate([xn[..., hh:], xn[..., :hh]], -1)
        rd = np.concatenate([xd[..., hh:], xd[..., :hh]], -1)
        may, dead = xn | rn | cn | sn, xd | rd | cd | sd
        h = xl.shape[-1] // 2
        rl = np.concatenate([-xh[..., h:], xl[..., :h]], -1)
        rh = np.concatenate([-xl[..., h:], xh[..., :h]], -1)
        rb = np.concatenate([xb[..., h:], xb[..., :h]], -1)
        with np.errstate(all="ignore"):
            p1l, p1h = _imul(xl, xh, cl, ch)
            p2l, p2h = _imul(rl, rh, sl, sh)
        bad = xb | rb | cb | sb
        ov = np.asarray(o)
        dead = np.broadcast_to(dead, ov.shape)
        e = _outward(p1l + p2l, p1h + p2h, dtype_of(ov), np.broadcast_to(may, ov.shape).copy(),
                     ~dead, "RoPE")
        f = _full_like(ov, "RoPE of an infinite enclosed element")
        bad = np.broadcast_to(bad, ov.shape) & ~dead
        e = Enc(np.where(bad, f.lo, e.lo), np.where(bad, f.hi, e.hi), e.nan | bad,
                e.real | bad, e.cause)
        res.append(s.widen_ulp(e))
    return tuple(res)


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


def _topk_sorted(s: Site, largest: bool | None = None):
    """The order-statistic enclosure of a sorted selection (TopK; the tile-family Sort passes
    ``largest`` = its ``descending``)."""
    largest = s.op.largest if largest is None else largest
    vals, idx = s.value
    if s.exact_inputs:
        return None
    x = s.enc(0)
    dt = x.dtype
    nan_any = bool(np.any(x.nan | ~x.real))
    # the r-th selected value is an order statistic: monotone in every element; NaN ranks last
    # in either direction, so an element turning NaN drops out of the ranking. The extreme
    # configurations: every maybe-NaN element real at its end, or dropped (NaN)
    if dt.is_float:
        nanv = cast(np.asarray(np.nan, np.float32), dt)
        real_lo, real_hi = np.where(x.real, x.lo, nanv), np.where(x.real, x.hi, nanv)
        maybe = x.nan & x.real
        drop_lo, drop_hi = np.where(maybe, nanv, real_lo), np.where(maybe, nanv, real_hi)
    else:
        real_lo = drop_lo = x.lo
        real_hi = drop_hi = x.hi
    lo_cfg, hi_cfg = (drop_lo, real_hi) if largest else (real_lo, drop_hi)
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


# ---------------------------------------------------------------------------------------------
# shapes and zeros are exact; Reshard / Local on plain values (mesh values take the mesh path)
# ---------------------------------------------------------------------------------------------
@register_enclosure(ShapeOf, Rank, ShapeExtract, ShapeCompose, Zeros)
def _exact(s: Site):
    return None


@register_enclosure(Reshard, Local)
def _sharded(s: Site):
    if s.exact_inputs:
        return None  # a Partial completion on exact inputs: judged by its admitted set
    if isinstance(s.op, Reshard):
        # a plain value to a plain type (a storage / layout annotation only): the kernel
        # copies it, so the enclosure is the operand's (mesh values take the mesh path)
        return s.enc(0)
    return "sharded"



# ---------------------------------------------------------------------------------------------
# tile family: Select, Bitcast, Scan
# ---------------------------------------------------------------------------------------------
def _bcast_enc(e: Enc, shape: tuple) -> Enc:
    return Enc(*(np.broadcast_to(t, shape) for t in (e.lo, e.hi, e.nan, e.real)), e.cause)


@register_enclosure(Select)
def _select(s: Site):
    """The chosen branch's enclosure where the condition is known; the hull of both where an
    enclosed condition may be either."""
    if s.exact_inputs:
        return None
    v = np.asarray(s.value)
    shape = v.shape
    t, f = _bcast_enc(s.enc(1), shape), _bcast_enc(s.enc(2), shape)
    c = s.enc(0)
    c_lo, c_hi = np.broadcast_to(np.asarray(c.lo, bool), shape), \
        np.broadcast_to(np.asarray(c.hi, bool), shape)
    either = c_lo != c_hi
    h = hull(t, f)
    pick = [np.where(c_lo, a, b) for a, b in zip((t.lo, t.hi, t.nan, t.real),
                                                  (f.lo, f.hi, f.nan, f.real), strict=True)]
    parts = [np.where(either, hv, pv) for hv, pv in zip((h.lo, h.hi, h.nan, h.real), pick,
                                                         strict=True)]
    cause = next(e.cause for e in s.encs if e is not None)
    return Enc(*(np.array(p, order="C") for p in parts), cause)


@register_enclosure(Bitcast)
def _bitcast(s: Site):
    """Exact on exact bits; an enclosed operand's bits are unconstrained (a reinterpretation of
    an interval is no interval: [-1, 1] in f32 spans u32 0 .. 0xBF800000).

    D266: a NaN an op computed has no contracted payload or sign (D21 fixes the reference's
    own choice, the positive quiet NaN; float outputs match any NaN): its f32 -> u32 Bitcast
    admits every NaN bit pattern, and only those. A NaN that no op touched (an entry input's
    or a constant's) keeps its bits exactly (D217). This rule also runs on exact operands
    (``EnclosingEvaluator``: ``RULES_ON_EXACT``), except an entry input itself, passed on
    unchanged through calls and loop carries (``EnclosingEvaluator.untouched``)."""
    from tilefoundry.semantics.ir import Constant

    if not s.exact_inputs:
        v = np.asarray(s.value)
        return _bits_of_box(s.enc(0), v) if v.dtype == np.uint32 else _box_of_bits(s.enc(0), v)
    v = np.asarray(s.value)
    x = np.asarray(s.args[0])
    if v.dtype != np.uint32 or x.dtype != np.float32 or \
            isinstance(s.call.args[0], Constant):
        return None
    computed_nan = np.isnan(x)
    if not computed_nan.any():
        return None
    return Enc(v, v, np.zeros(v.shape, bool), np.ones(v.shape, bool),
               "the bits of a computed NaN (D266)", computed_nan)


_SIGN, _INF_BITS = np.uint32(0x80000000), np.uint32(0x7F800000)


def _bits_of_box(x: Enc, v: np.ndarray) -> Enc:
    """f32 -> u32 of an enclosed value: an f32's bit pattern grows with the value among the
    non-negative floats and with the magnitude among the negative ones, so a box above 0 maps
    to [bits(lo), bits(hi)], one below 0 to [bits(hi), bits(lo)], and one reaching 0 (whose
    zero may be either sign) into [0, bits(lo)] or [0, 0x80000000]; a box admitting NaN admits
    every NaN pattern (``nan_bits``, D266)."""
    lo = np.asarray(x.lo, np.float32)
    hi = np.asarray(x.hi, np.float32)
    bl, bh = lo.view(np.uint32), hi.view(np.uint32)
    with np.errstate(invalid="ignore"):
        pos, neg = x.real & (lo > 0), x.real & (hi < 0)
        zero = x.real & ~pos & ~neg
        lo_b = np.where(pos, bl, np.where(neg, bh, np.uint32(0)))
        hi_b = np.where(pos, bh, np.where(neg, bl, np.where(zero & (lo < 0), bl, _SIGN)))
    nb = np.asarray(x.nan, bool).copy()
    return Enc(lo_b.astype(np.uint32), hi_b.astype(np.uint32), np.zeros(v.shape, bool),
               np.asarray(x.real, bool).copy(), x.cause or "Bitcast of an enclosed value", nb)


def _box_of_bits(x: Enc, v: np.ndarray) -> Enc:
    """u32 -> f32 of an enclosed pattern interval [a, b]: its non-negative part
    [a, min(b, 0x7f800000)] is the floats [f(a), f(..)], its negative part
    [max(a, 0x80000000), min(b, 0xff800000)] the floats [f(..), f(max(a, ..))], the hull of
    both; any NaN pattern in [a, b] admits NaN."""
    a, b = np.asarray(x.lo, np.uint32), np.asarray(x.hi, np.uint32)
    real = np.asarray(x.real, bool)
    p_lo, p_hi = a, np.minimum(b, _INF_BITS)
    has_p = real & (a <= _INF_BITS)
    n_lo, n_hi = np.maximum(a, _SIGN), np.minimum(b, _SIGN | _INF_BITS)
    has_n = real & (n_lo <= n_hi) & (b >= _SIGN)
    nan = real & (((a <= np.uint32(0x7FFFFFFF)) & (b > _INF_BITS)) |
                  (b > (_SIGN | _INF_BITS)))
    f = lambda u: np.asarray(u, np.uint32).view(np.float32)  # noqa: E731
    lo = np.where(has_n, f(n_hi), f(p_lo))  # the most negative float, else the least positive
    hi = np.where(has_p, f(p_hi), f(n_lo))
    return Enc(lo.astype(np.float32), hi.astype(np.float32), nan, has_p | has_n,
               x.cause or "Bitcast of an enclosed pattern")


def _prefix_any(m: np.ndarray, ax: int, inclusive: bool) -> np.ndarray:
    """Per output position: some contributing element (x0..xi, or x0..x(i-1)) has ``m``."""
    if m.shape[ax] == 0:
        return m
    acc = np.logical_or.accumulate(m, axis=ax)
    if inclusive:
        return acc
    first = np.zeros_like(np.take(acc, [0], axis=ax))
    return np.concatenate([first, np.take(acc, range(acc.shape[ax] - 1), axis=ax)], axis=ax)


@register_enclosure(Scan)
def _scan(s: Site):
    from tilefoundry.semantics.evaluator.tile_scan import scan_contract_is_set

    op: Scan = s.op
    v = np.asarray(s.value)
    xv = np.asarray(s.args[0])
    tree = scan_contract_is_set(op, xv)
    if s.exact_inputs and not tree:
        return None
    x = s.enc(0)
    dt = x.dtype
    ax = op.axis % xv.ndim
    if v.shape[ax] == 0:
        return None
    if dt.is_int and op.combine in ("add", "mul") and not s.exact_inputs:
        return _full_like(v, f"integer scan {op.combine} of enclosed values (wraps)")
    if op.combine == "add" and dt.is_float:
        lo = np.moveaxis(np.where(x.real, _f64(x.lo), np.nan), ax, -1)
        hi = np.moveaxis(np.where(x.real, _f64(x.hi), np.nan), ax, -1)
        if op.seed is not None:
            sd = np.broadcast_to(np.float64(op.seed), (*lo.shape[:-1], 1))
            lo, hi = np.concatenate([sd, lo], -1), np.concatenate([sd, hi], -1)
        off = (1 if op.inclusive else 0) + (1 if op.seed is not None else 0)
        vv = np.moveaxis(v, ax, -1)
        outs = []
        for j in range(vv.shape[-1]):
            m = j + off
            if m == 0:  # exclusive[0] without a seed: the identity, exact
                outs.append(Enc.point(vv[..., j]))
                continue
            e = _tree_bounds(lo[..., :m], hi[..., :m], m - 1, dt, None, 0.0,
                             f"Scan(add, {op.policy}) prefix")
            if tree:
                e = _enumerated_trees(e, lo[..., :m], hi[..., :m], dt, False, False)
            outs.append(e)
        parts = [np.moveaxis(np.stack([getattr(e, a) for e in outs], -1), -1, ax)
                 for a in ("lo", "hi", "nan", "real")]
        nan = _prefix_any(x.nan | ~x.real, ax, op.inclusive)
        cause = x.cause or f"Scan(add, {op.policy})"
        return with_nan(Enc(*(np.array(p, order="C") for p in parts), cause), nan)
    # max / min (and a fold_left add of exact ints, handled above): monotone in every element
    cands, _ = corners(s.impl, [x])
    nan = _prefix_any(x.nan | ~x.real, ax, op.inclusive)
    e = from_candidates(cands, nan, dtype_of(v), x.cause, s.name)
    return with_nan(e, nan)
from tilefoundry.oracle import tile_reduce as _tile_reduce  # noqa: E402, F401  (registers its rules)
