"""Enclosure rules of ``Select`` and ``Bitcast`` (split from ``oracle/enclosure_rules.py``, D382;
the package mirrors ``semantics/evaluator/``).
"""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.enclosure import (
    Enc,
    hull,
    register_enclosure,
)
from tilefoundry.oracle.enclosures.core import Site
from tilefoundry.semantics.ops.tile_select import Bitcast, Select


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
