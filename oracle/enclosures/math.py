"""Enclosure rules of the math family: ``Binary`` and ``Unary`` (split from
``oracle/enclosure_rules.py``, D382; the package mirrors ``semantics/evaluator/``).
"""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.enclosure import (
    Enc,
    corners,
    from_candidates,
    from_ordered,
    ordered,
    register_enclosure,
    with_nan,
)
from tilefoundry.oracle.enclosure import as_f64 as _f64
from tilefoundry.oracle.enclosures.core import Site, _full_like, _ulp_source
from tilefoundry.semantics.dtypes import cast, dtype_of
from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary, UnaryKind

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
