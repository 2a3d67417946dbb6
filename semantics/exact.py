"""Exact scalar reference model of element conversions and low-precision arithmetic.

Every value is held exactly, as a sign and a magnitude ``num / den`` of Python integers (the
public :class:`Value` shows the magnitude as a :class:`~fractions.Fraction`). A conversion
decodes the source pattern to that exact value and rounds it *once* to the destination, by
scaling it to the destination's quantum and rounding an integer quotient. No float arithmetic
and no bit-twiddling of significands is involved; ``semantics/dtypes.py`` (the vectorized
implementation) is checked against this model and shares no code with it.

Contracts implemented here (the project's Cast and arithmetic contracts):

* float -> float: round to nearest, ties to even, with an unbounded exponent; a rounded magnitude
  above max finite is overflow. ``overflow="nonfinite"`` gives +-inf where the format has
  infinities and NaN otherwise; ``"saturate"`` clamps finite overflow and +-inf to +-max finite.
  NaN is the canonical quiet NaN of the destination with the source sign.
* f8e8m0 destination: ``rounding`` "nearest" (linear midpoint 1.5*2^e, ties up), "up", "down";
  zero, negative and NaN give NaN; results below 2^-127 give 2^-127.
* float -> int: truncation toward zero; NaN, inf or out of range -> ``None`` (unspecified).
* int -> int: two's complement wraparound. bool -> x: 0/1. x -> bool: value != 0 (NaN -> True).
* arithmetic: exact IEEE result, rounded once to f32, then cast to the operand dtype.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from math import isqrt

from tilefoundry.errors import InvalidArgumentError, UnsupportedDTypeError, bad_choice
from tilefoundry.semantics.formats import FORMATS, DType, FormatInfo, require_evaluable

FINITE, INF, NAN = "finite", "inf", "nan"
OVERFLOW_MODES = ("nonfinite", "saturate")
ROUNDING_MODES = ("nearest", "up", "down")
BINARY_OPS = ("add", "sub", "mul", "div")
UNARY_OPS = ("neg", "abs", "sqrt")
ARITH_DTYPES = (DType.BF16, DType.F16, DType.F32, DType.FP8E4M3, DType.FP8E5M2)


@dataclass(frozen=True, slots=True)
class _Fmt:
    """The FormatInfo facts this model uses, copied to plain attributes once (speed only)."""

    dtype: DType
    kind: str
    bits: int
    signed: bool
    has_sign: bool
    has_inf: bool
    implicit_bit: bool
    mbits: int
    bias: int
    emin: int
    max_code: int
    inf_code: int | None
    nan_code: int | None
    sign_bit: int

    @classmethod
    def of(cls, fi: FormatInfo) -> _Fmt:
        floats = fi.kind == "float"
        return cls(fi.dtype, fi.kind, fi.bits, fi.signed, fi.has_sign, fi.has_inf,
                   fi.implicit_bit, fi.mbits, fi.bias, fi.emin if floats else 0,
                   fi.max_code if floats else 0, fi.inf_code, fi.nan_code, fi.sign_bit)


_FMT = {dt: _Fmt.of(fi) for dt, fi in FORMATS.items()}
_F32 = _FMT[DType.F32]

# Internal exact value: (kind, sign, num, den), magnitude num/den with num >= 0, den > 0.
_Exact = tuple[str, int, int, int]


@dataclass(frozen=True)
class Value:
    """An exactly decoded element: ``kind`` "finite"/"inf"/"nan", ``sign`` 0/1, ``mag`` >= 0."""

    kind: str
    sign: int
    mag: Fraction = Fraction(0)


# ---- exact helpers on num/den ----------------------------------------------------------------
def _times_pow2(num: int, den: int, k: int) -> tuple[int, int]:
    """num/den * 2**k, still as an integer pair."""
    return (num << k, den) if k >= 0 else (num, den << -k)


def _floor_log2(num: int, den: int) -> int:
    """floor(log2(num/den)) for num/den > 0: the bit lengths bound it to e or e - 1."""
    e = num.bit_length() - den.bit_length()
    a, b = _times_pow2(num, den, -e)
    return e - 1 if a < b else e


# ---- decoding ---------------------------------------------------------------------------------
def _decode(bits: int, fi: _Fmt) -> _Exact:
    if fi.kind == "bool":
        return FINITE, 0, bits, 1
    if fi.kind == "int":
        if fi.signed and bits >> (fi.bits - 1):  # two's complement: pattern - 2^bits
            return FINITE, 1, (1 << fi.bits) - bits, 1
        return FINITE, 0, bits, 1
    sign = bits >> (fi.bits - 1) if fi.has_sign else 0
    code = bits & ~fi.sign_bit
    if code > fi.max_code:  # every code above max finite is inf (if the format has it) or NaN
        return (INF if code == fi.inf_code else NAN), sign, 0, 1
    if not fi.implicit_bit:  # E8M0: 2^(code - bias)
        return (FINITE, sign, *_times_pow2(1, 1, code - fi.bias))
    exp_field, frac = code >> fi.mbits, code & ((1 << fi.mbits) - 1)
    if exp_field == 0:  # zero / subnormal: 0.frac * 2^emin
        return (FINITE, sign, *_times_pow2(frac, 1, fi.emin - fi.mbits))
    return (FINITE, sign, *_times_pow2((1 << fi.mbits) | frac, 1, exp_field - fi.bias - fi.mbits))


def _check_bits(bits: int, fi: _Fmt) -> None:
    width = 1 if fi.kind == "bool" else fi.bits
    if not 0 <= bits < (1 << width):
        raise InvalidArgumentError(
            f"bits: got {bits!r}; a {fi.dtype} storage pattern is an int in [0, 2**{width}) "
            f"(negative integers are given as their two's complement pattern)")


def decode(bits: int, dt: DType | str) -> Value:
    """The exact value a storage bit pattern of ``dt`` holds."""
    fi = _FMT[DType.parse(dt)]
    require_evaluable(fi.dtype, "decode")
    bits = int(bits)
    _check_bits(bits, fi)
    kind, sign, num, den = _decode(bits, fi)
    return Value(kind, sign, Fraction(num, den))


# ---- rounding to a float format ----------------------------------------------------------------
def _nan(fi: _Fmt, sign: int) -> int:
    return fi.nan_code | (fi.sign_bit if sign else 0)


def _overflowed(fi: _Fmt, sign: int, overflow: str) -> int:
    """Result for a magnitude above max finite (or an infinite input)."""
    if sign and not fi.has_sign:  # E8M0 has no negative values at all
        return _nan(fi, sign)
    if overflow == "saturate":
        return fi.max_code | (fi.sign_bit if sign else 0)
    if fi.has_inf:
        return fi.inf_code | (fi.sign_bit if sign else 0)
    return _nan(fi, sign)


def _round_e8m0(sign: int, num: int, den: int, fi: _Fmt, overflow: str,
                rounding: str) -> int:
    if sign or num == 0:  # no zero and no negative values
        return _nan(fi, 0)
    e = _floor_log2(num, den)  # 2^e <= x < 2^(e+1)
    if rounding == "nearest":  # midpoint of 2^e and 2^(e+1) is 3 * 2^(e-1); a tie goes up
        a, b = _times_pow2(num, den, 1 - e)
        e += int(a >= 3 * b)
    elif rounding == "up":  # smallest power of two >= x
        a, b = _times_pow2(num, den, -e)
        e += int(a > b)
    if e > fi.max_code - fi.bias:
        return _overflowed(fi, 0, overflow)
    return max(e, -fi.bias) + fi.bias  # below 2^-127 -> 2^-127 (code 0)


def _round(sign: int, num: int, den: int, fi: _Fmt, overflow: str, rounding: str) -> int:
    """Round the exact finite value (-1)^sign * num/den once to float format ``fi``."""
    if not fi.implicit_bit:
        return _round_e8m0(sign, num, den, fi, overflow, rounding)
    sbit = fi.sign_bit if sign else 0
    if num == 0:
        return sbit
    # Quantum (ulp) exponent: mbits below the value's binade, never below the subnormal ulp.
    qe = max(_floor_log2(num, den), fi.emin) - fi.mbits
    a, b = _times_pow2(num, den, -qe)  # x / 2^qe
    n, r = divmod(a, b)  # x = (n + r/b) * 2^qe
    if 2 * r > b or (2 * r == b and n & 1):  # nearest, ties to even
        n += 1
    # The rounded value is n * 2^qe, with n <= 2^(mbits+1). Encode it:
    if n == 1 << (fi.mbits + 1):  # rounding carried into the next binade
        n, qe = n >> 1, qe + 1
    if n < 1 << fi.mbits:  # zero or subnormal (then qe == emin - mbits): exponent field 0
        code = n
    else:
        code = ((qe + fi.mbits + fi.bias) << fi.mbits) | (n - (1 << fi.mbits))
    # Codes increase with magnitude, so "value > max finite" is "code > max_code".
    if code > fi.max_code:
        return _overflowed(fi, sign, overflow)
    return sbit | code


def _to_float(x: _Exact, fi: _Fmt, overflow: str, rounding: str) -> int:
    kind, sign, num, den = x
    if kind == NAN:
        return _nan(fi, sign)
    if kind == INF:
        return _overflowed(fi, sign, overflow)
    return _round(sign, num, den, fi, overflow, rounding)


# ---- argument checks ----------------------------------------------------------------------------
def _check_modes(src: DType | None, dst: DType, overflow: str, rounding: str) -> None:
    if overflow not in OVERFLOW_MODES:
        raise InvalidArgumentError(bad_choice("overflow", overflow, OVERFLOW_MODES))
    if rounding not in ROUNDING_MODES:
        raise InvalidArgumentError(bad_choice("rounding", rounding, ROUNDING_MODES))
    for dt, role in ((src, "source"), (dst, "destination")):
        if dt is not None:
            require_evaluable(dt, f"exact cast ({role} dtype)")
    if not dst.is_float:
        if (overflow, rounding) == ("nonfinite", "nearest"):
            return
        if dst is DType.BOOL:
            how = "conversion to bool is value != 0"
        elif src is not None and src.is_float:
            how = (f"{src} -> {dst} truncates toward zero (NaN, inf and out-of-range values "
                   f"are unspecified)")
        else:
            how = f"{src} -> {dst} wraps around (two's complement, value mod 2^bits)"
        raise InvalidArgumentError(
            f"cast to {dst}: overflow={overflow!r}, rounding={rounding!r} do not apply: {how}; "
            f"only overflow='nonfinite', rounding='nearest' are accepted")
    if rounding != "nearest" and dst is not DType.F8E8M0:
        raise InvalidArgumentError(bad_choice(
            f"rounding (dst dtype {dst})", rounding, ["nearest"],
            "'up' and 'down' are accepted only when dst is f8e8m0"))


# ---- public conversions ---------------------------------------------------------------------------
def round_to(sign: int, mag: Fraction | int, dst: DType | str, overflow: str = "nonfinite",
             rounding: str = "nearest") -> int:
    """Round the exact value (-1)^sign * mag once to float format ``dst``; the bit pattern."""
    dst = DType.parse(dst)
    require_evaluable(dst, "round_to")
    if not dst.is_float:
        raise InvalidArgumentError(
            f"round_to: dst must be a float format, got {dst}; use cast_bits for int/bool")
    _check_modes(None, dst, overflow, rounding)
    mag = Fraction(mag)
    if sign not in (0, 1) or mag < 0:
        raise InvalidArgumentError(
            f"round_to: need sign in (0, 1) and mag >= 0, got sign={sign!r}, mag={mag}")
    return _round(sign, mag.numerator, mag.denominator, _FMT[dst], overflow, rounding)


def _cast(bits: int, sfi: _Fmt, dfi: _Fmt, overflow: str, rounding: str) -> int | None:
    x = _decode(bits, sfi)
    kind, sign, num, den = x
    if dfi.kind == "bool":
        return int(kind != FINITE or num != 0)
    if dfi.kind == "float":
        return _to_float(x, dfi, overflow, rounding)
    if kind != FINITE:
        return None
    v = -(num // den) if sign else num // den  # truncation toward zero (exact for ints)
    if sfi.kind == "float":
        lo = -(1 << (dfi.bits - 1)) if dfi.signed else 0
        hi = (1 << (dfi.bits - 1 if dfi.signed else dfi.bits)) - 1
        if not lo <= v <= hi:
            return None
    return v % (1 << dfi.bits)  # two's complement pattern (int -> int wraps around)


def cast_bits(bits: int, src: DType | str, dst: DType | str, overflow: str = "nonfinite",
              rounding: str = "nearest") -> int | None:
    """Convert one ``src`` bit pattern to ``dst``; ``None`` means an unspecified value."""
    src, dst = DType.parse(src), DType.parse(dst)
    _check_modes(src, dst, overflow, rounding)
    bits = int(bits)
    _check_bits(bits, _FMT[src])
    return _cast(bits, _FMT[src], _FMT[dst], overflow, rounding)


def exact_cast_many(bits_list: Iterable[int], src: DType | str, dst: DType | str,
                    overflow: str = "nonfinite", rounding: str = "nearest") -> list[int | None]:
    """``cast_bits`` over a sequence (arguments checked once)."""
    src, dst = DType.parse(src), DType.parse(dst)
    _check_modes(src, dst, overflow, rounding)
    sfi, dfi = _FMT[src], _FMT[dst]
    if hasattr(bits_list, "tolist"):  # numpy array: Python ints are much faster to loop over
        bits_list = bits_list.tolist()
    out: list[int | None] = []
    for bits in bits_list:
        bits = int(bits)
        _check_bits(bits, sfi)
        out.append(_cast(bits, sfi, dfi, overflow, rounding))
    return out


# ---- arithmetic: exact IEEE result, rounded once to f32, then cast to dt ------------------------
_QNAN = Value(NAN, 0)  # an invalid operation's NaN (IEEE leaves its sign open; we use +)


def _exact_binary(op: str, x: Value, y: Value) -> Value:
    if x.kind == NAN or y.kind == NAN:  # propagate the (first) NaN operand, sign kept
        return x if x.kind == NAN else y
    if op == "sub":  # x - y is x + (-y), including the signs of zeros
        op, y = "add", Value(y.kind, 1 - y.sign, y.mag)
    if op == "add":
        if x.kind == INF or y.kind == INF:
            if x.kind == y.kind == INF and x.sign != y.sign:
                return _QNAN  # inf - inf
            return x if x.kind == INF else y
        total = (-x.mag if x.sign else x.mag) + (-y.mag if y.sign else y.mag)
        if total == 0:  # exact zero sum is +0 (round to nearest), except (-0) + (-0) = -0
            return Value(FINITE, x.sign & y.sign, Fraction(0))
        return Value(FINITE, int(total < 0), abs(total))
    sign = x.sign ^ y.sign
    if op == "mul":
        if INF in (x.kind, y.kind):
            zero = (x.kind == FINITE and x.mag == 0) or (y.kind == FINITE and y.mag == 0)
            return _QNAN if zero else Value(INF, sign)  # 0 * inf is invalid
        return Value(FINITE, sign, x.mag * y.mag)
    # div
    if x.kind == INF:
        return _QNAN if y.kind == INF else Value(INF, sign)  # inf / inf is invalid
    if y.kind == INF:
        return Value(FINITE, sign, Fraction(0))
    if y.mag == 0:
        return _QNAN if x.mag == 0 else Value(INF, sign)  # 0/0 invalid; x/0 = inf
    return Value(FINITE, sign, x.mag / y.mag)


def _sqrt_f32(mag: Fraction) -> Fraction:
    """sqrt(mag) correctly rounded (nearest even) to f32 precision, as an exact value.

    sqrt is irrational in general, so it is rounded here directly: with q the f32 quantum at
    sqrt(mag), n = floor(sqrt(mag)/q) = isqrt(floor(mag/q^2)), and sqrt(mag)/q is compared with
    the midpoint n + 1/2 by comparing squares exactly.
    """
    num, den = mag.numerator, mag.denominator
    qe = max(_floor_log2(num, den) // 2, _F32.emin) - _F32.mbits  # floor(log2 sqrt) = floor(/2)
    a, b = _times_pow2(num, den, -2 * qe)  # (sqrt(mag) / 2^qe)^2 = a/b
    n = isqrt(a // b)
    lhs, rhs = 4 * a, (2 * n + 1) ** 2 * b  # a/b vs (n + 1/2)^2
    if lhs > rhs or (lhs == rhs and n & 1):
        n += 1
    return Fraction(n) * Fraction(2) ** qe


def _exact_unary(op: str, x: Value) -> Value:
    if op == "neg":
        return Value(x.kind, 1 - x.sign, x.mag)
    if op == "abs":
        return Value(x.kind, 0, x.mag)
    if x.kind == NAN or (x.kind == FINITE and x.mag == 0):
        return x  # sqrt(NaN) = NaN, sqrt(+-0) = +-0
    if x.sign:
        return _QNAN  # sqrt of a negative (including -inf) is invalid
    if x.kind == INF:
        return x
    return Value(FINITE, 0, _sqrt_f32(x.mag))


def _arith_dtype(dt: DType | str, op: str, ops: tuple[str, ...], overflow: str) -> DType:
    if op not in ops:
        raise InvalidArgumentError(bad_choice("op", op, ops))
    if overflow not in OVERFLOW_MODES:
        raise InvalidArgumentError(bad_choice("overflow", overflow, OVERFLOW_MODES))
    dt = DType.parse(dt)
    require_evaluable(dt, f"exact {op}")
    if dt not in ARITH_DTYPES:
        raise UnsupportedDTypeError(
            f"exact {op}: dtype {dt} is not modelled; the arithmetic model covers "
            f"{', '.join(str(d) for d in ARITH_DTYPES)}")
    return dt


def _finish(r: Value, dt: DType, overflow: str) -> int:
    """Round the exact result once to f32 (overflow -> inf), then cast f32 -> dt with
    ``overflow`` (for dt = f32 that cast is the identity, or clamps ±inf under "saturate").

    Project decision (docs/decisions.md): every NaN an arithmetic operation returns — created or
    propagated — is the positive canonical quiet NaN; NaN sign is hardware-defined (x86 and Arm
    differ) and not part of the contract, so the reference fixes one.
    """
    if r.kind == "nan":
        r = Value("nan", 0, Fraction(0))
    x = (r.kind, r.sign, r.mag.numerator, r.mag.denominator)
    f32 = _to_float(x, _F32, "nonfinite", "nearest")
    result = _cast(f32, _F32, _FMT[dt], overflow, "nearest")
    assert result is not None  # float -> float is always specified
    return result


def binary_bits(op: str, a: int, b: int, dt: DType | str, overflow: str = "nonfinite") -> int:
    """``a op b`` for op in add/sub/mul/div under the widen-op-round contract."""
    dt = _arith_dtype(dt, op, BINARY_OPS, overflow)
    return _finish(_exact_binary(op, decode(a, dt), decode(b, dt)), dt, overflow)


def unary_bits(op: str, a: int, dt: DType | str, overflow: str = "nonfinite") -> int:
    """``op(a)`` for op in neg/abs/sqrt under the widen-op-round contract."""
    dt = _arith_dtype(dt, op, UNARY_OPS, overflow)
    return _finish(_exact_unary(op, decode(a, dt)), dt, overflow)
