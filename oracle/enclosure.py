"""Sound enclosures: per element, a set containing every result an execution admitted by the
contracts could produce, computed beside the reference value for every value of a program.

A contract's freedom (a tree reduction's admitted set, a matmul's reassociation, a
transcendental's ULP budget, an unspecified float -> int element) enters as an enclosure of the
op's result; every op downstream maps its operands' enclosures to its result's (one rule per op
class, ``ENCLOSURES``, with a completeness test). A value no freedom reaches has no enclosure
(``None``): it is exact, and the oracle compares it bit for bit.

An enclosure (``Enc``) holds, per element, the real part ``[lo, hi]`` (in the value's own dtype;
``real`` false where it is empty), and ``nan``: whether NaN is admitted. A u32 value may also
admit every f32 NaN bit pattern (``nan_bits``: a Bitcast of a computed NaN, whose payload and
sign no contract fixes, D266); a consumer of such a value sees it as everything there
(``for_operand``), only the output's judgement uses the patterns. Signed zeros are not
distinguished inside an interval (−0 and +0 are the same real), so an enclosed output's zero
sign is not judged — see docs/contracts.md.

Soundness of the rules rests on one fact: every exact op of the contract is a correctly rounded
(round-to-nearest-even) function, and rounding is monotone, so a function monotone in each
operand reaches its extremes over a box at the box's corners, and the reference's own kernel
evaluated at the corners gives them, rounded as an execution would round them. Non-monotone
functions add their critical points (abs, square: 0; silu, gelu: their minimum); bilinear ones
(mul, div away from 0) reach extremes at corners as well. A NaN at a corner whose operands are
not NaN means the box crosses the domain (log of a negative, inf − inf, 0 · inf, a divisor
straddling 0): the result is then everything (``full``).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilefoundry.semantics.dtypes import DType, cast, dtype_of, from_bits
from tilefoundry.semantics.formats import FORMATS

#: op class -> rule(ctx, encs, args, value, contracts) -> Enc | tuple[Enc | None, ...] | None
ENCLOSURES: dict[type, Callable[..., Any]] = {}


def register_enclosure(*op_classes: type):
    def deco(fn):
        for c in op_classes:
            if c in ENCLOSURES:
                raise ValueError(f"enclosure rule for {c.__name__} registered twice")
            ENCLOSURES[c] = fn
        return fn

    return deco


# ---------------------------------------------------------------------------------------------
# the enclosure type
# ---------------------------------------------------------------------------------------------
def as_f64(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    dt = dtype_of(x)
    with np.errstate(all="ignore"):
        if dt.is_float and dt is not DType.F32:
            return cast(x, DType.F32).astype(np.float64)
        return x.astype(np.float64)


def _isnan(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return np.isnan(as_f64(x)) if dtype_of(x).is_float else np.zeros(x.shape, bool)


@functools.cache
def _extreme(dt: DType, sign: int) -> np.ndarray:
    """The largest (sign +1) / smallest (-1) value of a dtype, as a 0-d array of it."""
    info = FORMATS[dt]
    st = info.storage
    if dt is DType.BOOL:
        return np.asarray(sign > 0)
    if dt.is_int:
        ii = np.iinfo(st)
        return np.asarray(ii.max if sign > 0 else ii.min, st)
    if info.has_inf:
        return cast(np.asarray(np.inf * sign, np.float32), dt)
    if not info.has_sign and sign < 0:  # f8e8m0: code 0 is the smallest value, 2^-127
        return from_bits(np.zeros((), np.uint8), dt)
    return cast(np.asarray(_max_finite(dt) * sign, np.float32), dt)


def _max_finite(dt: DType) -> float:
    import ml_dtypes

    return float(ml_dtypes.finfo(FORMATS[dt].storage).max)


def ordered(x: np.ndarray) -> np.ndarray:
    from tilefoundry.oracle.compare import ordered as _ordered

    return _ordered(x)


@functools.cache
def _ordered_range(dt: DType) -> tuple[int, int]:
    return (int(ordered(_extreme(dt, -1).reshape(1))[0]),
            int(ordered(_extreme(dt, 1).reshape(1))[0]))


def from_ordered(o: np.ndarray, dt: DType) -> np.ndarray:
    """The inverse of ``compare.ordered`` (clamped to the format's ordered range)."""
    info = FORMATS[dt]
    lo_o, hi_o = _ordered_range(dt) if dt.is_float else (None, None)
    if not dt.is_float:
        return np.asarray(o).astype(info.storage)
    o = np.clip(np.asarray(o, np.int64), lo_o, hi_o)
    if not info.has_sign:
        bits = o
    else:
        sign = np.int64(1) << (info.bits - 1)
        bits = np.where(o < 0, sign | (-o), o)
    from tilefoundry.semantics.dtypes import bits_dtype

    return from_bits(bits.astype(np.uint64).astype(bits_dtype(dt)), dt)


@dataclass
class Enc:
    """Per element: the real interval ``[lo, hi]`` where ``real``, plus NaN where ``nan``."""

    lo: np.ndarray
    hi: np.ndarray
    nan: np.ndarray
    real: np.ndarray
    cause: str = ""  # the freedom that made it (for reports)
    #: u32 values only: per element, every f32 NaN bit pattern is admitted too (None: nowhere)
    nan_bits: np.ndarray | None = None
    #: a finite set: shape (K, *shape), per element the only real values admitted (inside
    #: [lo, hi]; None: every value of the interval). Carried from a ULP-budget op whose
    #: 2B + 1 results are few through the exact elementwise ops and movements that follow
    #: (``enclosure_eval.with_candidates``), so a skipped rounding between them is seen
    cands: np.ndarray | None = None
    #: the interval holds values finer than the dtype (an ``excess`` intermediate: f32 values
    #: inside a bf16 box): never enumerated as a finite set of the dtype's values
    dense: bool = False

    @property
    def dtype(self) -> DType:
        return dtype_of(self.lo)

    @property
    def shape(self) -> tuple:
        return tuple(self.lo.shape)

    @staticmethod
    def point(v: np.ndarray) -> Enc:
        v = np.asarray(v)
        n = _isnan(v)
        return Enc(v, v, n, ~n)

    @staticmethod
    def full(dt: DType, shape: tuple, cause: str = "") -> Enc:
        lo = np.broadcast_to(_extreme(dt, -1), shape).copy()
        hi = np.broadcast_to(_extreme(dt, 1), shape).copy()
        return Enc(lo, hi, np.full(shape, dt.is_float), np.ones(shape, bool), cause)

    def unbounded(self) -> np.ndarray:
        """Elements whose enclosure admits every value of the dtype: unjudged."""
        dt = self.dtype
        if dt is DType.BOOL:
            return self.real & (self.lo != self.hi)
        lo_e, hi_e = _extreme(dt, -1), _extreme(dt, 1)
        full = self.real & (as_f64(self.lo) <= as_f64(lo_e)) & (as_f64(self.hi) >= as_f64(hi_e))
        return full & (self.nan | (not dt.is_float))

    def contains(self, o: np.ndarray) -> np.ndarray:
        o = np.asarray(o)
        on = _isnan(o)
        ow = as_f64(o)
        inside = self.real & (as_f64(self.lo) <= ow) & (ow <= as_f64(self.hi))
        if self.cands is not None:
            inside = inside & np.any(as_f64(self.cands) == ow, axis=0)
        if self.nan_bits is not None:
            inside = inside | (self.nan_bits & is_f32_nan_pattern(o))
        return np.where(on, self.nan, inside)

    def for_operand(self) -> Enc:
        """This enclosure as an op's operand sees it (``EnclosingEvaluator`` hands operands
        over through it): ``nan_bits`` elements are everything (no rule maps a set of NaN
        patterns; what depends on them is unjudged there)."""
        if self.nan_bits is None:
            return self
        nb = self.nan_bits
        f = Enc.full(self.dtype, self.shape)
        return Enc(np.where(nb, f.lo, self.lo), np.where(nb, f.hi, self.hi), self.nan,
                   self.real | nb, self.cause or "a Bitcast of a computed NaN")

    def width_ulps(self) -> np.ndarray:
        """Per element, the real part's width in ulps of the dtype (0 for a point; float)."""
        if not self.dtype.is_float:
            return np.where(self.real, as_f64(self.hi) - as_f64(self.lo), 0.0)
        return np.where(self.real, (ordered(self.hi) - ordered(self.lo)).astype(np.float64), 0.0)

    def widen_ulps(self, k: float) -> Enc:
        if k <= 0 or not self.dtype.is_float:
            return self
        kk = math.ceil(k)
        lo = from_ordered(ordered(self.lo) - kk, self.dtype)
        hi = from_ordered(ordered(self.hi) + kk, self.dtype)
        return Enc(np.where(self.real, lo, self.lo), np.where(self.real, hi, self.hi),
                   self.nan, self.real, self.cause)


def is_f32_nan_pattern(o: np.ndarray) -> np.ndarray:
    """Per element of a u32 array: is it the bit pattern of an f32 NaN (either sign, any
    non-zero mantissa)? False for any other dtype."""
    o = np.asarray(o)
    if o.dtype != np.uint32:
        return np.zeros(o.shape, bool)
    return (o & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)


def hull(a: Enc, b: Enc) -> Enc:
    lo = np.where(~a.real, b.lo, np.where(~b.real | (as_f64(a.lo) <= as_f64(b.lo)), a.lo, b.lo))
    hi = np.where(~a.real, b.hi, np.where(~b.real | (as_f64(a.hi) >= as_f64(b.hi)), a.hi, b.hi))
    nb = None if a.nan_bits is None and b.nan_bits is None else \
        nan_bits_of(a) | nan_bits_of(b)
    return Enc(lo, hi, a.nan | b.nan, a.real | b.real, a.cause or b.cause, nb)


def nan_bits_of(e: Enc) -> np.ndarray:
    """``e.nan_bits`` as a mask (False everywhere when it has none)."""
    return np.zeros(e.shape, bool) if e.nan_bits is None else e.nan_bits


def as_enc(e: Enc | None, v: np.ndarray) -> Enc:
    return Enc.point(v) if e is None else e


def from_candidates(cands: list[np.ndarray], nan_in: np.ndarray, dt: DType,
                    cause: str = "", where: str = "") -> Enc:
    """The hull of corner evaluations ``cands`` (arrays of ``dt``). A NaN candidate where the
    operands were not NaN (``nan_in`` false) crosses the domain: that element is everything."""
    vals = np.stack([as_f64(c) for c in cands])
    isn = np.isnan(vals)
    with np.errstate(all="ignore"):
        lo_w = np.where(isn, np.inf, vals).min(0)
        hi_w = np.where(isn, -np.inf, vals).max(0)
    real = ~isn.all(0)
    # every corner NaN from non-NaN operands is a NaN result (an overflow past a format with
    # no infinity, a domain error over the whole box), not a crossing: a monotone function's
    # interior lies between its corners, and a box reaching 0 has the ±0 corners
    crossed = isn.any(0) & ~isn.all(0) & ~nan_in
    stack = np.stack(cands)
    ilo = np.where(isn, np.inf, vals).argmin(0)
    ihi = np.where(isn, -np.inf, vals).argmax(0)
    lo = np.take_along_axis(stack, ilo[None], 0)[0]
    hi = np.take_along_axis(stack, ihi[None], 0)[0]
    del lo_w, hi_w
    e = Enc(lo, hi, isn.any(0), real, cause)
    if crossed.any():
        why = f"{where or 'an op'} on a box crossing its domain (inf - inf, 0 * inf, ...)"
        f = Enc.full(dt, e.shape, why)
        e = Enc(np.where(crossed, f.lo, e.lo), np.where(crossed, f.hi, e.hi), e.nan | crossed,
                e.real | crossed, why)
    return e


def corners(fn: Callable[..., np.ndarray], encs: list[Enc], extra: list[list[np.ndarray]] |
            None = None) -> tuple[list[np.ndarray], np.ndarray]:
    """Evaluate ``fn`` at every corner of the operands' boxes (an empty real part is NaN
    there), plus ``extra`` points per operand; returns the candidates and the NaN-input mask."""
    pts = []
    nan_in = np.zeros(np.broadcast_shapes(*(e.shape for e in encs)), bool)
    for i, e in enumerate(encs):
        dt = e.dtype
        if dt.is_float:
            nanv = cast(np.asarray(np.nan, np.float32), dt)
            lo = np.where(e.real, e.lo, nanv)
            hi = np.where(e.real, e.hi, nanv)
        else:
            lo, hi = e.lo, e.hi
        p = [lo, hi] + (extra[i] if extra else [])
        if dt.is_float and FORMATS[dt].has_sign:
            # an interval does not know the sign of its zeros: where it reaches 0, evaluate at
            # -0 and +0 both (rsqrt(-0) = -inf, rsqrt(+0) = +inf; 1/x alike)
            lw, hw = as_f64(lo), as_f64(hi)
            at0 = e.real & (lw <= 0) & (hw >= 0)
            if np.any(at0):
                z = cast(np.zeros((), np.float32), dt)
                nz = cast(np.asarray(-0.0, np.float32), dt)
                p += [np.where(at0, nz, lo), np.where(at0, z, lo)]
        pts.append(p)
        nan_in = nan_in | ~e.real
    cands = []
    with np.errstate(all="ignore"):
        for combo in itertools.product(*pts):
            cands.append(np.asarray(fn(*combo)))
    shape = np.broadcast_shapes(*(c.shape for c in cands))
    if nan_in.shape != shape:  # a reduction / movement: the caller decides NaN inputs per fiber
        nan_in = np.zeros(shape, bool)
    return [np.broadcast_to(c, shape) for c in cands], np.broadcast_to(nan_in, shape)


def with_nan(e: Enc, nan: np.ndarray) -> Enc:
    return Enc(e.lo, e.hi, e.nan | np.broadcast_to(nan, e.shape), e.real, e.cause)
