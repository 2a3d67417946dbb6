"""Element types and exact, vectorized conversions between them.

Every conversion is computed on integer bit patterns from the formats' definitions (see
``formats.FormatInfo``): a source value is decoded to ``(sign, m, e)`` with value ``m · 2^e``
(``m`` an unsigned 64-bit integer), rounded once to the destination's grid with an unbounded
exponent, and only then compared with the destination's largest finite value. ml_dtypes and torch
are peers that the tests compare against; neither is used to compute a result.

Contracts (ARCHITECTURE.md, "Numeric contracts"; decisions in docs/decisions.md):

* float → float: one rounding, to nearest, ties to even; signed zeros and subnormals preserved.
  ``overflow="nonfinite"``: ±inf where the format has infinities, NaN otherwise (fp8e4m3);
  ``overflow="saturate"``: finite overflow and ±inf clamp to ±max finite. NaN in → the
  destination's canonical quiet NaN carrying the source's sign (formats with a sign).
* f8e8m0: ``rounding`` is ``"nearest"`` (ties at 1.5·2^e go up), ``"up"`` or ``"down"``; zero,
  negative and NaN sources give NaN; results above 2^127 give NaN (``saturate``: 2^127); results
  below 2^-127 give 2^-127.
* int → float: one rounding from the exact integer (i64 included).
* float → int: truncation toward zero; NaN, ±inf and out-of-range sources are *unspecified*:
  ``cast_ex`` reports them in ``unspecified`` and the reference writes 0 there.
* int → int: two's-complement wraparound. bool → x: 0 / 1. x → bool: ``x != 0`` (NaN → True).

Fast paths (performance only, bit-identical; docs/decisions.md D110): bf16 → f32 is a 16-bit
shift; f32 → f32 / bf16 / f16 / fp8e4m3 / fp8e5m2 round with the integer bias trick (and one IEEE
f32 addition for the destination's subnormals), in cache-sized blocks. The engine below is the
definition; tests/semantics/test_dtypes_fastpath.py holds the fast paths to the exact model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tilefoundry.errors import InvalidArgumentError, bad_choice
from tilefoundry.semantics.formats import (
    FORMATS,
    DType,
    FormatInfo,
    bits_dtype,
    dtype_of,
    require_evaluable,
)

__all__ = [
    "FORMATS",
    "OVERFLOW_MODES",
    "ROUNDING_MODES",
    "CastResult",
    "DType",
    "FormatInfo",
    "apply_lowp",
    "bits_dtype",
    "cast",
    "cast_ex",
    "dtype_of",
    "from_bits",
    "noncanonical_bool",
    "positive_nan",
    "to_bits",
    "widen_to_f32",
]

OVERFLOW_MODES = ("nonfinite", "saturate")
ROUNDING_MODES = ("nearest", "up", "down")

_FINITE, _INF, _NAN = 0, 1, 2
_POS_QNAN_F32 = np.array(0x7FC00000, np.uint32).view(np.float32)
_U64 = np.uint64


# ---------------------------------------------------------------------------------------------
# bits <-> arrays
# ---------------------------------------------------------------------------------------------
def to_bits(x: np.ndarray) -> np.ndarray:
    """The bit patterns of ``x`` as unsigned integers of the storage width (a view, no copy)."""
    from tilefoundry.arguments import as_array

    x = as_array(x, "to_bits: x")
    dt = dtype_of(x)
    return x.view(bits_dtype(dt))


def noncanonical_bool(storage: np.ndarray) -> tuple[int, int] | None:
    """(flat index, byte) of the first element of a bool array's storage bytes (uint8, or a
    numpy bool array viewed as them) that is neither 0 nor 1, or None: numpy views any byte as a
    bool, and only 0 and 1 are values of the type (D543)."""
    b = storage.reshape(-1).view(np.uint8)
    if not b.size or b.max() <= 1:
        return None
    i = int(np.argmax(b > 1))
    return i, int(b[i])


def from_bits(bits: np.ndarray, dtype: DType | str) -> np.ndarray:
    """Reinterpret unsigned bit patterns as an array of ``dtype`` (raw copy, no conversion)."""
    from tilefoundry.arguments import as_array

    dt = DType.parse(dtype)
    want = bits_dtype(dt)
    b = as_array(bits, "from_bits: bits")
    if b.dtype != want:
        if not np.issubdtype(b.dtype, np.integer):
            raise InvalidArgumentError(
                f"from_bits: bits must be an integer array, got {b.dtype}")
        hi = (1 << FORMATS[dt].bits) - 1 if dt is not DType.BOOL else 1
        if b.size and (b.min() < 0 or b.max() > hi):
            raise InvalidArgumentError(
                f"from_bits: bit patterns for {dt} lie in [0, {hi:#x}]; got values outside it")
        b = b.astype(want)
    bad = noncanonical_bool(b) if dt is DType.BOOL else None
    if bad is not None:
        raise InvalidArgumentError(
            f"from_bits: a bool element's bits are 0 or 1; element {bad[0]} (flat) is "
            f"{bad[1]:#04x}; write bools as 0 / 1 bytes (x.astype(np.uint8))")
    return b.view(FORMATS[dt].storage)


# ---------------------------------------------------------------------------------------------
# argument checking
# ---------------------------------------------------------------------------------------------
def _check_modes(dst: DType, overflow: str, rounding: str) -> None:
    if overflow not in OVERFLOW_MODES:
        raise InvalidArgumentError(bad_choice("cast overflow", overflow, OVERFLOW_MODES))
    if rounding not in ROUNDING_MODES:
        raise InvalidArgumentError(bad_choice("cast rounding", rounding, ROUNDING_MODES))
    info = FORMATS[dst]
    if info.kind != "float" and (overflow, rounding) != ("nonfinite", "nearest"):
        raise InvalidArgumentError(
            f"cast to {dst}: overflow={overflow!r}, rounding={rounding!r} are not taken by an "
            f"{info.kind} destination (float → int truncates toward zero, int → int wraps "
            f"around); leave both at their defaults ('nonfinite', 'nearest')")
    if rounding != "nearest" and dst is not DType.F8E8M0:
        raise InvalidArgumentError(
            f"cast to {dst}: rounding={rounding!r} is only taken by f8e8m0 (the MX scale "
            f"format); {dst} rounds to nearest, ties to even. Allowed: 'nearest'")


# ---------------------------------------------------------------------------------------------
# decoding to (sign, m, e, class)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Decoded:
    """Sources as ``(-1)^sign · m · 2^e``; ``valexp`` = floor(log2(m · 2^e)) where m > 0."""

    sign: np.ndarray  # uint8 0/1
    m: np.ndarray  # unsigned significand (0 for zero): uint32 for f32 sources, else uint64
    e: np.ndarray  # signed exponent of the significand's unit
    valexp: np.ndarray  # signed; meaningless where m == 0 or cls != finite
    cls: np.ndarray  # uint8: _FINITE / _INF / _NAN
    m_bits: int  # every m is below 2^m_bits


def _decode_float_codes(codes: np.ndarray, info: FormatInfo) -> _Decoded:
    """Decode float bit patterns of a format of at most 16 bits from its definition."""
    c = codes.astype(_U64)
    if info.has_sign:
        sign = (c >> _U64(info.bits - 1)).astype(np.uint8)
        mag = c & _U64(info.sign_bit - 1)
    else:
        sign = np.zeros(c.shape, np.uint8)
        mag = c
    cls = np.full(c.shape, _FINITE, np.uint8)
    if not info.implicit_bit:  # E8M0: 2^(code - bias), code 0xFF is NaN
        m = np.ones(c.shape, _U64)
        e = mag.astype(np.int64) - info.bias
        cls[mag > _U64(info.max_code)] = _NAN
        return _Decoded(sign, m, e, e, cls, 1)
    fbits = mag & _U64((1 << info.mbits) - 1)
    efield = (mag >> _U64(info.mbits)).astype(np.int64)
    normal = efield > 0
    m = np.where(normal, fbits | _U64(1 << info.mbits), fbits)
    e = np.where(normal, efield, 1) - info.bias - info.mbits
    if info.inf_code is not None:
        cls[mag == _U64(info.inf_code)] = _INF
    if info.nan != "none":
        cls[mag > _U64(info.max_code if info.inf_code is None else info.inf_code)] = _NAN
    return _Decoded(sign, m, e, _bit_length(m) - 1 + e, cls, info.mbits + 1)


def _decode_f32(x: np.ndarray) -> _Decoded:
    """Decode f32 values in 32-bit integer arithmetic (the hot path of every cast)."""
    u = x.view(np.uint32)
    sign = (u >> np.uint32(31)).astype(np.uint8)
    efield = ((u >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int32)
    fbits = u & np.uint32(0x7FFFFF)
    normal = efield > 0
    m = fbits | (normal.astype(np.uint32) << np.uint32(23))
    e = np.maximum(efield, 1)
    e -= 150
    valexp = efield - np.int32(127)  # exact for normals; zeros get -127 (below every emin + 1)
    sub = ~normal & (fbits != 0)
    if sub.any():  # subnormals: frexp is exact on finite f32, x = f · 2^k with f in [0.5, 1)
        valexp[sub] = np.frexp(x[sub])[1].astype(np.int32) - 1
    special = efield == 0xFF
    cls = special.astype(np.uint8) * (np.uint8(1) + (fbits != 0).astype(np.uint8))
    return _Decoded(sign, m, e, valexp, cls, 24)


def _decode_ints(x: np.ndarray) -> _Decoded:
    v = x.astype(np.int64)
    neg = v < 0
    mag = v.view(_U64).copy()
    mag[neg] = _U64(0) - mag[neg]  # two's complement magnitude; -2^63 -> 2^63 exactly
    zeros = np.zeros(v.shape, np.int64)
    return _Decoded(neg.astype(np.uint8), mag, zeros, _bit_length(mag) - 1,
                    np.zeros(v.shape, np.uint8), 64)


def _bit_length(m: np.ndarray) -> np.ndarray:
    """Exact bit length of uint64 values, vectorized (0 for 0)."""
    _, ex = np.frexp(m.astype(np.float64))  # may be one too large when the float rounds up
    ex = ex.astype(np.int64)
    pos = ex > 0
    shift = np.where(pos, ex - 1, 0).astype(_U64)
    too_big = pos & ((m >> shift) == 0)
    return ex - too_big


# ---------------------------------------------------------------------------------------------
# the rounding engine
# ---------------------------------------------------------------------------------------------
def _round_codes(d: _Decoded, info: FormatInfo, overflow: str, rounding: str) -> np.ndarray:
    """Round decoded values once to float format ``info``; returns unsigned bit patterns.

    Works in the integer width of ``d.m`` (32 bits for f32 sources, 64 otherwise).
    """
    m, e = d.m, d.e
    ut = m.dtype.type
    st = e.dtype.type
    one = ut(1)
    mb, emin = info.mbits, info.emin
    q = np.maximum(d.valexp, st(emin))
    q -= st(mb)  # exponent of the destination's unit in the last place
    sh = q - e
    # A value with sh >= m_bits + 2 lies below a quarter of the unit: replace it by the sticky
    # stand-in m=1, sh=2, which rounds the same way in every mode (and keeps shifts in range:
    # integer sources have e = 0, so sh <= 63 for them).
    far = sh >= d.m_bits + 2
    left = sh < 0  # only when widening: the value is then exact with room to spare
    m_r = m.copy()
    np.copyto(m_r, one, where=far)
    sh_r = np.clip(sh, 0, None).astype(ut)
    np.copyto(sh_r, ut(2), where=far)
    if rounding == "nearest" and d.m_bits + 1 < 8 * m.itemsize:
        # Shift one extra bit in so every shift is >= 1, then round half to even by adding
        # (half - 1) + lsb before the final shift.
        m_r <<= one
        sh_r += one
        lsb = (m_r >> sh_r) & one
        r = (m_r + ((one << (sh_r - one)) - one) + lsb) >> sh_r
    else:
        r = m_r >> sh_r
        rem = m_r - (r << sh_r)
        half = (one << sh_r) >> one
        if rounding == "nearest":
            inc = (rem > half) | ((rem == half) & (half > 0) & ((r & one) == one))
        elif rounding == "up":
            inc = rem != 0
        else:
            inc = np.zeros(r.shape, bool)
        r += inc.astype(ut)
    if left.any():
        np.copyto(r, m << np.clip(-sh, 0, 63).astype(ut), where=left)
    r = r.astype(st)
    if info.implicit_bit:
        q += st(mb - emin)
        q <<= st(mb)
        code = q + r
    else:  # E8M0: r is 1 or 2 at or above 2^emin; below it clamps to the smallest value
        code = np.maximum(q - st(emin) + r - st(1), st(0))
    nonzero = m != 0
    over = code > info.max_code
    over |= d.cls == _INF
    if overflow == "saturate":
        special = info.max_code
    else:
        special = info.inf_code if info.inf_code is not None else info.nan_code
    out_t = bits_dtype(info.dtype).type
    out = code.astype(out_t)
    np.copyto(out, out_t(0), where=~nonzero)
    np.copyto(out, out_t(special), where=over)
    nan = d.cls == _NAN
    if not info.has_sign:  # E8M0: zero and negatives have no encoding
        nan |= ~nonzero & (d.cls == _FINITE)
        nan |= d.sign == 1
    np.copyto(out, out_t(info.nan_code), where=nan)
    if info.has_sign:
        out |= d.sign.astype(out_t) << out_t(info.bits - 1)
    return out


def _wrap_to_int(v: np.ndarray, dst: DType) -> np.ndarray:
    """Two's-complement wraparound of int64 values into ``dst``."""
    info = FORMATS[dst]
    u = v.astype(np.int64).view(_U64) & _U64((1 << info.bits) - 1)
    return u.astype(bits_dtype(dst)).view(info.storage)


def _float_to_int(d: _Decoded, dst: DType) -> tuple[np.ndarray, np.ndarray]:
    info = FORMATS[dst]
    m, e, valexp = d.m.astype(_U64), d.e.astype(np.int64), d.valexp.astype(np.int64)
    small = (m == 0) | (valexp < 0)  # |value| < 1 truncates to 0
    fits64 = ~small & (valexp < 64)  # wider values are out of range of every integer dtype
    left_sh = np.where(fits64 & (e >= 0), e, 0).astype(_U64)
    right_sh = np.where(fits64 & (e < 0), np.minimum(-e, 63), 0).astype(_U64)
    t = np.where(fits64, (m << left_sh) >> right_sh, _U64(0))
    neg = d.sign == 1
    if info.signed:
        lim_pos, lim_neg = (1 << (info.bits - 1)) - 1, 1 << (info.bits - 1)
        ok = small | fits64 & np.where(neg, t <= _U64(lim_neg), t <= _U64(lim_pos))
    else:
        ok = small | fits64 & ~neg & (t <= _U64((1 << info.bits) - 1))
    ok &= d.cls == _FINITE
    t = np.where(ok, t, _U64(0))
    v = np.where(neg, _U64(0) - t, t).view(np.int64)
    return _wrap_to_int(v, dst), ~ok


# ---------------------------------------------------------------------------------------------
# fast paths (performance only: bit-identical to the engine above, see
# tests/semantics/test_dtypes_fastpath.py and docs/decisions.md D110)
# ---------------------------------------------------------------------------------------------
_U32 = np.uint32
_SIGN32 = _U32(0x80000000)
_MAG32 = _U32(0x7FFFFFFF)
_QNAN32 = _U32(0x7FC00000)

#: f32 sources rounded by ``_round_f32_fast``: the IEEE-like layouts whose code just above the
#: largest finite one is the overflow result (inf, or E4M3FN's NaN), so that overflow is a clamp.
_FAST_ROUND_DSTS = (DType.F32, DType.BF16, DType.F16, DType.FP8E4M3, DType.FP8E5M2)
for _d in _FAST_ROUND_DSTS:
    _i = FORMATS[_d]
    assert _i.implicit_bit and _i.has_sign and _i.mbits <= 23 and _i.bias <= 127
    assert (_i.inf_code if _i.inf_code is not None else _i.nan_code) == _i.max_code + 1
del _d, _i


#: Elements per block of the fast paths: every temporary of a block stays in the core's cache,
#: so an array makes one trip through memory however many integer steps a block takes.
_BLOCK = 1 << 17


def _blocks(n: int):
    for i in range(0, n, _BLOCK):
        yield i, min(i + _BLOCK, n)


def _has_nan(x: np.ndarray) -> bool:
    """Whether a float32 array holds a NaN: one reduction, no temporary (numpy's minimum
    propagates NaN)."""
    return bool(np.isnan(np.min(x)))


def _widen_bf16(x: np.ndarray) -> np.ndarray:
    """bf16 → f32 exactly: a bf16 pattern is the upper half of the f32 pattern of the same value
    (same sign, exponent field and bias; the fraction gains 16 zero bits). NaNs become the
    canonical quiet NaN with their sign, as the engine's widening does."""
    h = np.ascontiguousarray(x).reshape(-1).view(np.uint16)
    w = np.empty(h.shape, _U32)
    wf = w.view(np.float32)
    for i, j in _blocks(h.size):
        wb = w[i:j]
        np.left_shift(h[i:j], _U32(16), out=wb)
        if _has_nan(wf[i:j]):
            nan = np.isnan(wf[i:j])
            wb[nan] = (wb[nan] & _SIGN32) | _QNAN32
    return wf.reshape(x.shape)


def _round_f32_fast(x: np.ndarray, dst: DType, overflow: str, *,
                    positive_nan: bool = False) -> np.ndarray:
    """f32 → ``dst`` in ``_FAST_ROUND_DSTS``: the same single rounding as ``_round_codes``.

    Magnitudes in the destination's normal range (and, when the destination has f32's exponent
    range, everywhere) round by the integer bias trick on the f32 pattern:
    ``(a + (half - 1) + lsb) >> shift`` is round to nearest, ties to even, at bit ``shift``
    (a carry out of the fraction increments the exponent, which is the correct next binade, and
    the unbounded exponent rounds past the largest finite code). Rebiasing the exponent field
    then gives the destination code. Magnitudes below the destination's smallest normal
    ``2^emin`` have the fixed quantum ``q = 2^(emin - mbits)``: ``|x| + M`` with
    ``M = 2^(emin - mbits + 23)`` lies in ``[M, 2M)``, where the f32 grid is exactly ``q``, so
    the IEEE f32 addition (round to nearest even) rounds ``|x|`` to a multiple of ``q`` and the
    pattern difference ``bits(|x| + M) - bits(M)`` is that multiple — the subnormal code (or
    ``2^mbits``, the smallest normal's code, when it rounds up into the normals). A code above
    ``max_code`` is overflow: ``min(code, max_code + 1)`` gives inf (E4M3FN: NaN) and
    ``min(code, max_code)`` saturates. NaN → the canonical NaN with the source's sign, as the
    engine; ``positive_nan``: with a positive sign (``apply_lowp``'s rule, D21).
    """
    info = FORMATS[dst]
    out_t = bits_dtype(dst).type
    xf = np.ascontiguousarray(x).reshape(-1)
    u = xf.view(_U32)
    out = np.empty(u.shape, out_t)
    mb, bits = info.mbits, info.bits
    shift = 23 - mb
    nan_code = out_t(info.nan_code)
    saturate = overflow == "saturate"
    m = min(_BLOCK, u.size)
    t = np.empty(m, _U32)
    a = np.empty(m, _U32) if info.bias != 127 else None
    # bf16 saturate: the smallest magnitude that rounds past the largest finite code (its tie)
    sat_from = _U32(((info.max_code + 1) << shift) - (1 << (shift - 1))) if shift else None
    for i, j in _blocks(u.size):
        ub, ob, tb = u[i:j], out[i:j], t[:j - i]
        if dst is DType.F32:  # identity up to NaN canonicalization and saturation of ±inf
            np.copyto(ob, ub)
            if saturate:
                np.bitwise_and(ub, _MAG32, out=tb)
                ob[tb == _U32(info.inf_code)] -= out_t(1)  # ±inf -> ±max finite
        elif a is None:  # f32's exponent range (bf16): f32 subnormals take the same path
            # The sign bit rides along (bit 31 -> bit 15): a carry reaches it only from a NaN
            # pattern, and NaNs are rewritten below.
            np.right_shift(ub, _U32(shift), out=tb)
            tb &= _U32(1)
            tb += ub
            tb += _U32((1 << (shift - 1)) - 1)
            np.right_shift(tb, _U32(shift), out=ob, casting="unsafe")
            if saturate:
                np.bitwise_and(ub, _MAG32, out=tb)
                ob[tb >= sat_from] -= out_t(1)  # rounds to ±inf -> ±max finite
        else:
            ab = a[:j - i]
            np.bitwise_and(ub, _MAG32, out=ab)
            np.right_shift(ab, _U32(shift), out=tb)
            tb &= _U32(1)
            tb += ab
            tb += _U32((1 << (shift - 1)) - 1)
            tb >>= _U32(shift)
            tb -= _U32((127 - info.bias) << mb)  # wraps below the normal range: replaced next
            sub = ab < _U32((info.emin + 127) << 23)
            if sub.any():
                big_m = np.float32(2.0 ** (info.emin - mb + 23))
                tb[sub] = (ab[sub].view(np.float32) + big_m).view(_U32) - big_m.view(_U32)
            # overflow and ±inf (NaN patterns are rewritten below)
            special = info.max_code if saturate else info.max_code + 1
            np.minimum(tb, _U32(special), out=tb)
            np.right_shift(ub, _U32(32 - bits), out=ab)  # the sign, at the destination's bit
            ab &= _U32(info.sign_bit)
            tb |= ab
            np.copyto(ob, tb, casting="unsafe")
        xb = xf[i:j]
        if _has_nan(xb):
            nan = np.isnan(xb)
            if positive_nan:
                ob[nan] = nan_code
            else:
                sgn = (ub[nan] >> _U32(32 - bits)) & _U32(info.sign_bit)
                ob[nan] = sgn.astype(out_t) | nan_code
    return out.reshape(x.shape).view(info.storage)


# ---------------------------------------------------------------------------------------------
# public cast
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CastResult:
    """Values of a conversion and the mask of elements whose value the contract leaves open."""

    values: np.ndarray
    unspecified: np.ndarray


def _convert(x: np.ndarray, src: DType, dst: DType, overflow: str, rounding: str) -> CastResult:
    sinfo, dinfo = FORMATS[src], FORMATS[dst]
    none = np.zeros(x.shape, bool)
    if src is DType.F32:
        d = _decode_f32(x)
    elif sinfo.kind == "float":
        d = _decode_float_codes(x.view(bits_dtype(src)), sinfo)
    else:
        d = _decode_ints(x.astype(np.int64) if src is DType.BOOL else x)
    if dinfo.kind == "float":
        codes = _round_codes(d, dinfo, overflow, rounding)
        return CastResult(codes.view(dinfo.storage), none)
    if dst is DType.BOOL:
        return CastResult((d.m != 0) | (d.cls != _FINITE), none)
    if sinfo.kind == "float":
        vals, unspec = _float_to_int(d, dst)
        return CastResult(vals, unspec)
    return CastResult(_wrap_to_int(x.astype(np.int64), dst), none)


@functools.lru_cache(maxsize=256)
def _table(src: DType, dst: DType, overflow: str, rounding: str) -> CastResult:
    """Whole-domain conversion table for sources of at most 16 bits, built by ``_convert``."""
    n = 1 << FORMATS[src].bits
    codes = np.arange(n, dtype=np.uint64).astype(bits_dtype(src))
    res = _convert(codes.view(FORMATS[src].storage), src, dst, overflow, rounding)
    res.values.setflags(write=False)
    res.unspecified.setflags(write=False)
    return res


def cast_ex(x: np.ndarray, dtype: DType | str, *, overflow: str = "nonfinite",
            rounding: str = "nearest") -> CastResult:
    """Convert ``x`` to ``dtype`` under the numeric contracts; also report unspecified values."""
    dst = DType.parse(dtype)
    x = np.asarray(x)
    if x.ndim == 0:  # numpy ufuncs turn 0-d arrays into scalars; work on one element
        r = cast_ex(x.reshape(1), dst, overflow=overflow, rounding=rounding)
        return CastResult(r.values.reshape(()), r.unspecified.reshape(()))
    src = dtype_of(x)
    require_evaluable(src, "cast source")
    require_evaluable(dst, "cast destination")
    _check_modes(dst, overflow, rounding)
    if src is dst:
        # Identity conversion: float formats still quiet (canonicalize) NaNs through the
        # same single-rounding rule; ints and bool are returned as a copy.
        if FORMATS[src].kind != "float":
            return CastResult(x.copy(), np.zeros(x.shape, bool))
    if src is DType.F32 and dst in _FAST_ROUND_DSTS:
        return CastResult(_round_f32_fast(x, dst, overflow), np.zeros(x.shape, bool))
    if src is DType.BF16 and dst is DType.F32 and overflow == "nonfinite":
        return CastResult(_widen_bf16(x), np.zeros(x.shape, bool))
    if FORMATS[src].kind == "float" and FORMATS[src].bits <= 16:
        tab = _table(src, dst, overflow, rounding)
        idx = x.view(bits_dtype(src))
        if FORMATS[dst].kind != "int":  # float / bool destinations: every value is specified
            return CastResult(tab.values[idx], np.zeros(x.shape, bool))
        return CastResult(tab.values[idx], tab.unspecified[idx])
    return _convert(x, src, dst, overflow, rounding)


def cast(x: np.ndarray, dtype: DType | str, *, overflow: str = "nonfinite",
         rounding: str = "nearest") -> np.ndarray:
    """Convert ``x`` to ``dtype``: bit-exact, vectorized (see the module docstring)."""
    return cast_ex(x, dtype, overflow=overflow, rounding=rounding).values


def widen_to_f32(x: np.ndarray) -> np.ndarray:
    """Exact widening of a float array of at most 32 bits to f32 (NaNs become quiet)."""
    src = dtype_of(x)
    if not src.is_float:
        raise InvalidArgumentError(
            f"widen_to_f32: expected a float array, got {src}; use cast() for integers")
    if src is DType.BF16 and np.ndim(x):
        require_evaluable(src, "cast source")
        return _widen_bf16(np.asarray(x))
    return cast(x, DType.F32)


def positive_nan(x: np.ndarray) -> np.ndarray:
    """``x`` with every NaN of a float dtype made the dtype's positive quiet NaN (D21: a NaN an
    arithmetic operation returns, reductions and scans included, does not inherit numpy's
    propagated payload or sign). Other arrays are returned as they are."""
    if not isinstance(x, np.ndarray) or x.dtype.kind in "biuO":
        return x
    dt = dtype_of(x)
    if not dt.is_float:
        return x
    with np.errstate(invalid="ignore"):
        nan = np.isnan(x.astype(np.float32))
    if not nan.any():
        return x
    return np.where(nan, cast(_POS_QNAN_F32, dt), x).astype(x.dtype)


def apply_lowp(fn: Callable[..., np.ndarray], *xs: np.ndarray,
               overflow: str = "nonfinite") -> np.ndarray:
    """The widen–op–round realization of low-precision arithmetic.

    Every operand (same float dtype) is widened exactly to f32, ``fn`` is applied as IEEE f32
    arithmetic (numpy float32, round to nearest even), and the f32 result is rounded once to the
    operands' dtype with ``overflow``. For f32 operands this is just ``fn``.
    """
    if not xs:
        raise InvalidArgumentError("apply_lowp: at least one operand is required")
    dts = [dtype_of(x) for x in xs]
    dt = dts[0]
    if any(d is not dt for d in dts) or not dt.is_float:
        raise InvalidArgumentError(
            f"apply_lowp: operands must share one float dtype, got {[str(d) for d in dts]}; "
            f"insert an explicit cast")
    require_evaluable(dt, "apply_lowp operand")
    wide = [widen_to_f32(x) for x in xs]
    with np.errstate(all="ignore"):
        r = np.asarray(fn(*wide))
    if r.dtype != np.float32:
        raise InvalidArgumentError(
            f"apply_lowp: fn must compute in float32 and return float32, got {r.dtype}")
    # The sign and payload of a NaN an IEEE operation produces are hardware choices (x86's
    # default NaN is negative, Arm's positive): the reference writes the positive quiet NaN.
    if r.ndim and dt in _FAST_ROUND_DSTS and overflow in OVERFLOW_MODES:
        return _round_f32_fast(r, dt, overflow, positive_nan=True)
    r = np.where(np.isnan(r), _POS_QNAN_F32, r)
    return cast(r, dt, overflow=overflow)
