"""What every enclosure rule works with (split from ``oracle/enclosure_rules.py``, D382; the
package mirrors ``semantics/evaluator/``). A rule gets a ``Site`` (the op, a fresh evaluation
context to run the reference's own kernel at box corners, the operand enclosures — ``None`` for an
exact operand —, the operand values, the reference result and the contracts this call noted) and
returns the result's enclosure: an ``Enc``, ``None`` (the result is exact), or a tuple of them for
tuple results. Also the outward rounding of a float64 box to a dtype and the ULP-budget enclosure
of a source op (at most ``CANDIDATES_MAX`` values).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tilefoundry.oracle.enclosure import (
    Enc,
    _isnan,
    as_enc,
    from_ordered,
    ordered,
)
from tilefoundry.oracle.enclosure import as_f64 as _f64
from tilefoundry.semantics.dtypes import DType, cast, dtype_of
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx


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
