"""tilefoundry.semantics.dtypes: descriptors, conversions, widen-op-round, and bad input.

Expected values here come from the published format definitions (IEEE 754, OCP OFP8 / MX) and
the Tile design text, never from this implementation's own output.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilefoundry.errors import InvalidArgumentError, TilefoundryError, UnsupportedDTypeError
from tilefoundry.semantics.dtypes import (
    FORMATS,
    DType,
    apply_lowp,
    cast,
    cast_ex,
    dtype_of,
    from_bits,
    to_bits,
    widen_to_f32,
)

F32 = DType.F32


def f32_bits(*bits: int) -> np.ndarray:
    return np.array(bits, dtype=np.uint32).view(np.float32)


def bits_of(x: np.ndarray) -> list[int]:
    return [int(b) for b in to_bits(x)]


# ---------------------------------------------------------------------------------------------
# descriptors against the published definitions
# ---------------------------------------------------------------------------------------------
PUBLISHED = {
    # dtype: (max finite, smallest subnormal (or smallest value), bits)
    DType.F32: (Fraction(2**24 - 1) * 2**104, Fraction(1, 2**149), 32),
    DType.F16: (Fraction(65504), Fraction(1, 2**24), 16),
    DType.BF16: (Fraction(2**8 - 1) * 2**120, Fraction(1, 2**133), 16),
    DType.FP8E4M3: (Fraction(448), Fraction(1, 2**9), 8),
    DType.FP8E5M2: (Fraction(57344), Fraction(1, 2**16), 8),
    DType.F8E8M0: (Fraction(2**127), Fraction(1, 2**127), 8),
    DType.F4E2M1: (Fraction(6), Fraction(1, 2), 4),
}


@pytest.mark.parametrize("dt", list(PUBLISHED))
def test_format_facts_match_published_definitions(dt):
    """Tile design: 'float8_e4m3fn: Bias 7, finite values through ±448, signed zeros and NaNs,
    no infinities'; 'float8_e5m2: Bias 15, finite values through ±57344'."""
    mx, tiny, bits = PUBLISHED[dt]
    info = FORMATS[dt]
    assert info.max_finite == mx
    assert info.min_subnormal == tiny
    assert info.bits == bits


def test_format_biases_and_specials():
    assert FORMATS[DType.FP8E4M3].bias == 7 and FORMATS[DType.FP8E5M2].bias == 15
    assert not FORMATS[DType.FP8E4M3].has_inf and FORMATS[DType.FP8E5M2].has_inf
    assert FORMATS[DType.FP8E4M3].nan_code == 0x7F  # S.1111.111
    assert FORMATS[DType.F8E8M0].nan_code == 0xFF and not FORMATS[DType.F8E8M0].has_sign


@pytest.mark.parametrize("dt", [DType.F16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2,
                                DType.F8E8M0, DType.F4E2M1])
def test_format_facts_agree_with_ml_dtypes_finfo(dt):
    fi = ml_dtypes.finfo(FORMATS[dt].storage)
    assert float(FORMATS[dt].max_finite) == float(fi.max)
    assert float(FORMATS[dt].min_subnormal) == float(fi.smallest_subnormal)


def test_every_storage_type_maps_back_to_its_dtype():
    for dt, info in FORMATS.items():
        assert dtype_of(np.zeros(3, info.storage)) is dt


# ---------------------------------------------------------------------------------------------
# conversions stated by the Tile design
# ---------------------------------------------------------------------------------------------
def test_bf16_host_conversion_rules():
    """Tile design: 'BF16 host conversion from float32 uses nearest, ties to even, preserves
    signed zeros/subnormals, overflows to infinity and quiets NaNs.'"""
    x = f32_bits(
        0x3F808000,  # 1 + 2^-8: tie between 0x3F80 and 0x3F81 -> even 0x3F80
        0x3F818000,  # tie between 0x3F81 and 0x3F82 -> even 0x3F82
        0x3F808001,  # just above the tie -> 0x3F81
        0x80000000,  # -0
        0x02000000,  # 2^-123 normal
        0x00080000,  # 2^-130: bf16 subnormal, 8 units of 2^-133
        0x7F7FFFFF,  # f32 max rounds up to 2^128: overflow -> inf
        0x7F800001,  # signalling NaN -> quiet NaN
    )
    assert bits_of(cast(x, DType.BF16)) == [0x3F80, 0x3F82, 0x3F81, 0x8000, 0x0200, 0x0008,
                                           0x7F80, 0x7FC0]


def test_narrowing_is_a_numerical_event():
    """Tile design: 'cast<float>(cast<bf16>(x)) is not x.'"""
    x = np.array([0.1], np.float32)
    assert cast(cast(x, DType.BF16), F32)[0] != x[0]


def test_double_rounding_through_bf16_is_not_the_contract():
    """ARCHITECTURE: 'a double rounding through an intermediate format is a defect
    (f32→bf16→fp8e4m3 differs from f32→fp8e4m3 ...)'. 1 + 2^-4 + 2^-9 is just above an fp8e4m3
    tie; bf16 rounds it onto the tie, and fp8 then rounds the tie to even (down)."""
    x = np.array([1 + 2**-4 + 2**-9], np.float32)
    direct = cast(x, DType.FP8E4M3)
    twice = cast(cast(x, DType.BF16), DType.FP8E4M3)
    assert float(cast(direct, F32)[0]) == 1.125
    assert float(cast(twice, F32)[0]) == 1.0


@pytest.mark.parametrize(
    ("value", "dst", "overflow", "expected"),
    [
        (464.0, DType.FP8E4M3, "nonfinite", 448.0),  # tie between 448 and 480 -> even (448)
        (464.5, DType.FP8E4M3, "nonfinite", math.nan),  # rounds to 480 > 448: overflow
        (464.5, DType.FP8E4M3, "saturate", 448.0),
        (math.inf, DType.FP8E4M3, "saturate", 448.0),
        (-math.inf, DType.FP8E4M3, "nonfinite", math.nan),
        (61440.0, DType.FP8E5M2, "nonfinite", math.inf),  # tie 57344 / 65536 -> even: 65536
        (61439.0, DType.FP8E5M2, "nonfinite", 57344.0),
        (1e6, DType.FP8E5M2, "saturate", 57344.0),
        (-math.inf, DType.FP8E5M2, "saturate", -57344.0),
        (65520.0, DType.F16, "nonfinite", math.inf),  # tie 65504 / 65536 -> even: 65536
        (65519.0, DType.F16, "nonfinite", 65504.0),
        (2.0**-10, DType.FP8E4M3, "nonfinite", 0.0),  # half of the smallest subnormal: tie -> 0
        (1.5 * 2.0**-9, DType.FP8E4M3, "nonfinite", 2.0**-8),  # 1.5 units: tie -> 2 units
    ],
)
def test_overflow_and_tie_cases(value, dst, overflow, expected):
    """ARCHITECTURE, Numeric contracts: 'nonfinite' gives ±inf with infinities, NaN without;
    'saturate' clamps finite overflow and infinities to ±max finite."""
    got = float(cast(cast(np.array([value], np.float32), dst, overflow=overflow), F32)[0])
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected


def test_nan_stays_nan_under_saturate():
    x = np.array([np.nan], np.float32)
    for dst in (DType.FP8E4M3, DType.FP8E5M2, DType.BF16, DType.F8E8M0):
        assert np.isnan(cast(cast(x, dst, overflow="saturate"), F32)[0])


@pytest.mark.parametrize(
    ("value", "rounding", "expected"),
    [
        (1.5, "nearest", 2.0),  # 'ties at 1.5·2^e go up'
        (1.49, "nearest", 1.0),
        (3.0, "nearest", 4.0),
        (1.01, "up", 2.0),
        (1.99, "down", 1.0),
        (2.0, "up", 2.0),
        (2.0**-130, "nearest", 2.0**-127),  # below the smallest value -> 2^-127
        (2.0**-130, "down", 2.0**-127),
        (1.4 * 2.0**-127, "nearest", 2.0**-127),  # f32 subnormal: midpoint is 1.5·2^-127
        (1.6 * 2.0**-127, "nearest", 2.0**-126),
        (2.0**127, "nearest", 2.0**127),
        (1.6 * 2.0**127, "nearest", math.nan),  # rounds to 2^128 > 2^127
        (1.4 * 2.0**127, "nearest", 2.0**127),
        (0.0, "nearest", math.nan),
        (-0.0, "up", math.nan),
        (-4.0, "nearest", math.nan),
    ],
)
def test_e8m0_rounding_modes(value, rounding, expected):
    """ARCHITECTURE: f8e8m0 takes rounding nearest (ties at 1.5·2^e go up), up, down; zero,
    negative and NaN inputs and results beyond 2^127 give NaN; results below 2^-127 give
    2^-127."""
    got = float(cast(cast(np.array([value], np.float32), DType.F8E8M0, rounding=rounding), F32)[0])
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_e8m0_saturate_clamps_overflow_to_2_pow_127():
    x = np.array([1.6 * 2.0**127, np.inf, -1.0], np.float32)
    got = cast(cast(x, DType.F8E8M0, overflow="saturate"), F32)
    assert got[0] == 2.0**127 and got[1] == 2.0**127 and np.isnan(got[2])


# ---------------------------------------------------------------------------------------------
# integers and bool
# ---------------------------------------------------------------------------------------------
def _single_rounding_of_int(v: int, dst: DType) -> float:
    """Nearest-even rounding of an exact integer to dst, from the format's value set."""
    info = FORMATS[dst]
    if v == 0:
        return 0.0
    a = abs(v)
    e = a.bit_length() - 1
    q = max(e, info.emin) - info.mbits
    n, rem = divmod(a, 2**q) if q >= 0 else (a * 2**-q, 0)
    half = 2 ** (q - 1) if q >= 1 else 0
    if rem > half or (rem == half and half and n % 2):
        n += 1
    r = n * 2**q if q >= 0 else Fraction(n, 2**-q)
    if r > info.max_finite:
        return math.copysign(math.inf if info.has_inf else math.nan, v)
    return math.copysign(float(r), v)


@given(st.integers(-(2**63), 2**63 - 1), st.sampled_from([DType.F32, DType.BF16, DType.F16,
                                                         DType.FP8E4M3, DType.FP8E5M2]))
def test_i64_to_float_rounds_once_from_the_exact_integer(v, dst):
    """ARCHITECTURE: 'Integer → float rounds once from the exact integer (no double rounding
    through f32).'"""
    got = float(cast(cast(np.array([v], np.int64), dst), F32)[0])
    want = _single_rounding_of_int(v, dst)
    assert (math.isnan(got) and math.isnan(want)) or got == want


def test_int_to_bf16_tie_region_example():
    """1732247588 lies 36 above a bf16 tie; f32 first rounds it onto the tie (double rounding)."""
    x = np.array([1732247588, -1732247588], np.int32)
    got = cast(cast(x, DType.BF16), F32)
    assert list(got) == [207 * 2.0**23, -207 * 2.0**23]


@pytest.mark.parametrize("dst", [DType.I8, DType.U8, DType.I32, DType.I64])
def test_int_to_int_wraps_around(dst):
    bits = FORMATS[dst].bits
    vals = np.array([-(2**63), -(2**31) - 1, -129, -1, 0, 127, 128, 255, 256, 2**31, 2**63 - 1],
                    np.int64)
    got = cast(vals, dst)
    for v, g in zip(vals.tolist(), got.tolist(), strict=True):
        w = v % 2**bits
        if FORMATS[dst].signed and w >= 2 ** (bits - 1):
            w -= 2**bits
        assert g == w


@given(st.floats(width=32, allow_nan=True, allow_infinity=True),
       st.sampled_from([DType.I8, DType.U8, DType.I32, DType.I64]))
def test_float_to_int_truncates_and_marks_unspecified(v, dst):
    """ARCHITECTURE: 'Float → integer truncates toward zero; NaN or out-of-range sources give an
    unspecified value'."""
    res = cast_ex(np.array([v], np.float32), dst)
    info = FORMATS[dst]
    lo, hi = (-(2 ** (info.bits - 1)), 2 ** (info.bits - 1) - 1) if info.signed else (
        0, 2**info.bits - 1)
    if math.isnan(v) or math.isinf(v) or not (lo <= math.trunc(v) <= hi):
        assert res.unspecified[0]
    else:
        assert not res.unspecified[0]
        assert int(res.values[0]) == math.trunc(v)


def test_bool_conversions():
    x = np.array([0.0, -0.0, 1e-45, np.nan, -np.inf], np.float32)
    assert cast(x, DType.BOOL).tolist() == [False, False, True, True, True]
    assert cast(np.array([True, False]), DType.FP8E4M3).view(np.uint8).tolist() == [0x38, 0]
    assert cast(np.array([-3, 0, 256], np.int32), DType.BOOL).tolist() == [True, False, True]


# ---------------------------------------------------------------------------------------------
# widen-op-round
# ---------------------------------------------------------------------------------------------
def test_widen_is_exact_for_every_16_bit_pattern():
    for dt in (DType.F16, DType.BF16):
        x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(FORMATS[dt].storage)
        w = widen_to_f32(x)
        ok = ~np.isnan(w)
        # round-tripping back is the identity on every non-NaN pattern
        assert (to_bits(cast(w, dt))[ok] == to_bits(x)[ok]).all()
        # and agrees with numpy's own exact widening of f16 / ml_dtypes' of bf16
        assert (w[ok] == x.astype(np.float32)[ok]).all()


def test_apply_lowp_rounds_the_f32_result_once():
    a = np.array([1.0], ml_dtypes.bfloat16)
    b = np.array([2.0**-8], ml_dtypes.bfloat16)
    # 1 + 2^-8 is a bf16 tie: rounds to even (1.0); f32 holds it exactly
    assert bits_of(apply_lowp(np.add, a, b)) == [0x3F80]
    c = np.array([448.0], ml_dtypes.float8_e4m3fn)
    assert np.isnan(cast(apply_lowp(np.add, c, c), F32)[0])
    assert float(cast(apply_lowp(np.add, c, c, overflow="saturate"), F32)[0]) == 448.0


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------
def test_unknown_dtype_name_lists_allowed_values():
    with pytest.raises(InvalidArgumentError, match=r"dtype: got 'float8'.*'fp8e4m3'"):
        cast(np.zeros(2, np.float32), "float8")


def test_float64_storage_is_rejected_with_a_fix():
    with pytest.raises(InvalidArgumentError, match=r"float64.*np\.asarray"):
        cast(np.zeros(2), DType.BF16)


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"overflow": "clamp"}, r"overflow: got 'clamp'.*'nonfinite', 'saturate'"),
    ({"rounding": "stochastic"}, r"rounding: got 'stochastic'.*'nearest', 'up', 'down'"),
    ({"rounding": "up"}, r"rounding='up' is only taken by f8e8m0"),
])
def test_bad_modes(kwargs, pattern):
    with pytest.raises(InvalidArgumentError, match=pattern):
        cast(np.zeros(2, np.float32), DType.BF16, **kwargs)


def test_integer_destinations_take_only_default_modes():
    with pytest.raises(InvalidArgumentError, match="truncates toward zero"):
        cast(np.zeros(2, np.float32), DType.I32, overflow="saturate")


def test_f4e2m1_is_type_level_only():
    """HIR spec, Cast: 'evaluating a Cast to a dtype outside this set (e.g. f4e2m1) raises an
    unsupported-dtype error.'"""
    with pytest.raises(UnsupportedDTypeError, match="f4e2m1"):
        cast(np.zeros(2, np.float32), DType.F4E2M1)
    with pytest.raises(UnsupportedDTypeError, match="f4e2m1"):
        cast(np.zeros(2, ml_dtypes.float4_e2m1fn), DType.F32)


def test_apply_lowp_rejects_mixed_dtypes():
    with pytest.raises(InvalidArgumentError, match="share one float dtype"):
        apply_lowp(np.add, np.zeros(1, np.float32), np.zeros(1, ml_dtypes.bfloat16))


def test_from_bits_range_checked():
    with pytest.raises(InvalidArgumentError, match=r"fp8e4m3 lie in \[0, 0xff\]"):
        from_bits(np.array([256]), DType.FP8E4M3)
    assert bits_of(from_bits(np.array([0x7F]), DType.FP8E4M3)) == [0x7F]


@pytest.mark.parametrize(("bits", "match"), [
    (np.array([0, 1, 0xFF], np.uint8), r"bool element's bits are 0 or 1; element 2 .* 0xff"),
    (np.array([0, 1, 2]), r"bit patterns for bool lie in \[0, 0x1\]"),
])
def test_from_bits_refuses_a_bool_byte_other_than_0_or_1(bits, match):
    """D543: numpy views any byte as a bool; only 0 and 1 are values of the type, whatever
    the integer dtype the bits come in."""
    with pytest.raises(InvalidArgumentError, match=match):
        from_bits(bits, DType.BOOL)
    assert from_bits(np.array([0, 1], np.uint8), DType.BOOL).tolist() == [False, True]


def test_errors_are_project_errors():
    assert issubclass(InvalidArgumentError, TilefoundryError)
    assert issubclass(UnsupportedDTypeError, TilefoundryError)


@pytest.mark.parametrize("dst", [DType.BF16, DType.FP8E4M3, DType.I32, DType.BOOL, DType.F32])
def test_zero_dimensional_arrays_keep_their_shape(dst):
    x = np.asarray(1.5, np.float32)
    r = cast_ex(x, dst)
    assert r.values.shape == () and r.unspecified.shape == ()
    assert float(cast(r.values, F32)) == (1.0 if dst in (DType.I32, DType.BOOL) else 1.5)
