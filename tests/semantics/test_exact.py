"""Tests of the exact scalar model (semantics/exact.py) against published format facts.

Expected numbers come from the format definitions (IEEE 754 binary16/32, bfloat16, OCP FP8
E4M3FN/E5M2 and E8M0), from IEEE 754's special-value rules, or from independent implementations
(numpy's IEEE float16/float32, ml_dtypes) — never from the model's own output.
"""

from __future__ import annotations

from fractions import Fraction as Fr

import ml_dtypes
import numpy as np
import pytest

from tilefoundry.errors import InvalidArgumentError, UnsupportedDTypeError
from tilefoundry.semantics.exact import (
    Value,
    binary_bits,
    cast_bits,
    decode,
    exact_cast_many,
    round_to,
    unary_bits,
)
from tilefoundry.semantics.formats import DType

P2 = Fr(2)
F32_MAX = 0x7F7FFFFF
NP_TYPE = {"f16": np.float16, "f32": np.float32, "bf16": ml_dtypes.bfloat16,
           "fp8e4m3": ml_dtypes.float8_e4m3fn, "fp8e5m2": ml_dtypes.float8_e5m2,
           "f8e8m0": ml_dtypes.float8_e8m0fnu}
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32}
WIDTH = {"f16": 16, "bf16": 16, "f32": 32, "fp8e4m3": 8, "fp8e5m2": 8, "f8e8m0": 8}


def is_nan(bits: int, dt: str) -> bool:
    return decode(bits, dt).kind == "nan"


def np_bits(values: np.ndarray, dt: str) -> list[int]:
    """Bit patterns of numpy/ml_dtypes values of float dtype ``dt``."""
    return [int(b) for b in np.asarray(values).view(UINT[WIDTH[dt]])]


def same(got: int | None, want: int, dt: str) -> bool:
    """Bit-exact, except that any NaN matches any NaN (references differ in NaN sign)."""
    return got == want or (got is not None and is_nan(got, dt) and is_nan(want, dt))


# ---- decoding: published extremes -------------------------------------------------------------
@pytest.mark.parametrize("dt,bits,sign,value", [
    ("fp8e4m3", 0x7E, 0, Fr(448)),
    ("fp8e4m3", 0xFE, 1, Fr(448)),
    ("fp8e5m2", 0x7B, 0, Fr(57344)),
    ("f16", 0x7BFF, 0, Fr(65504)),
    ("bf16", 0x7F7F, 0, 255 * P2**120),
    ("f32", F32_MAX, 0, (2**24 - 1) * P2**104),
    ("f8e8m0", 0xFE, 0, P2**127),
])
def test_max_finite(dt, bits, sign, value):
    assert decode(bits, dt) == Value("finite", sign, value)


def test_max_finite_decimal_facts():
    assert float(decode(0x7F7F, "bf16").mag) == pytest.approx(3.3895e38, rel=1e-4)
    assert float(decode(F32_MAX, "f32").mag) == 3.4028234663852886e38


@pytest.mark.parametrize("dt,bits,value", [
    ("fp8e4m3", 0x01, P2**-9), ("fp8e4m3", 0x08, P2**-6), ("fp8e4m3", 0x07, 7 * P2**-9),
    ("fp8e5m2", 0x01, P2**-16), ("fp8e5m2", 0x04, P2**-14),
    ("f16", 0x0001, P2**-24), ("f16", 0x0400, P2**-14), ("f16", 0x03FF, 1023 * P2**-24),
    ("bf16", 0x0001, P2**-133), ("bf16", 0x0080, P2**-126),
    ("f32", 0x00000001, P2**-149), ("f32", 0x00800000, P2**-126),
    ("f8e8m0", 0x00, P2**-127), ("f8e8m0", 0x7F, Fr(1)),
    ("f32", 0x3F800000, Fr(1)), ("f16", 0x3C00, Fr(1)), ("fp8e4m3", 0x38, Fr(1)),
    ("fp8e5m2", 0x3C, Fr(1)), ("fp8e4m3", 0x78, Fr(256)), ("bf16", 0x3F80, Fr(1)), ("f32", 0x3DCCCCCD, Fr(13421773, 2**27)),
])
def test_small_and_unit_values(dt, bits, value):
    assert decode(bits, dt) == Value("finite", 0, value)


@pytest.mark.parametrize("dt,bits,kind,sign", [  # E4M3FN's 0x78 (field 1111) is finite
    ("f32", 0x7F800000, "inf", 0), ("f32", 0xFF800000, "inf", 1), ("f32", 0x7FC00000, "nan", 0),
    ("f32", 0x7F800001, "nan", 0), ("f32", 0xFFFFFFFF, "nan", 1), ("f16", 0x7C00, "inf", 0),
    ("f16", 0xFC01, "nan", 1), ("bf16", 0xFF80, "inf", 1), ("bf16", 0x7F81, "nan", 0),
    ("fp8e4m3", 0x7F, "nan", 0), ("fp8e4m3", 0xFF, "nan", 1), ("fp8e4m3", 0x7E, "finite", 0),
    ("fp8e5m2", 0x7C, "inf", 0), ("fp8e5m2", 0xFD, "nan", 1), ("f8e8m0", 0xFF, "nan", 0),
    ("f32", 0x80000000, "finite", 1), ("fp8e4m3", 0x80, "finite", 1),
])
def test_decode_specials(dt, bits, kind, sign):
    v = decode(bits, dt)
    assert (v.kind, v.sign) == (kind, sign)
    assert (v.mag == 0) == (bits != 0x7E)  # NaN/inf carry no magnitude; -0 has none


@pytest.mark.parametrize("dt,bits,sign,mag", [
    ("i8", 0xFF, 1, 1), ("i8", 0x80, 1, 128), ("i8", 0x7F, 0, 127), ("u8", 0xFF, 0, 255),
    ("i32", 0x80000000, 1, 2**31), ("i64", 2**63, 1, 2**63), ("i64", 2**64 - 1, 1, 1),
    ("bool", 1, 0, 1), ("bool", 0, 0, 0),
])
def test_decode_ints(dt, bits, sign, mag):
    assert decode(bits, dt) == Value("finite", sign, Fr(mag))


# ---- rounding an exact value once ---------------------------------------------------------------
@pytest.mark.parametrize("sign,mag,dt,kw,want", [
    (0, Fr(1, 3), "f16", {}, 0x3555), (0, Fr(1, 3), "bf16", {}, 0x3EAB),
    (0, Fr(1, 3), "f32", {}, 0x3EAAAAAB), (0, Fr(1, 10), "f32", {}, 0x3DCCCCCD),
    (0, Fr(464), "fp8e4m3", {}, 0x7E),  # tie between 448 and 480: even is 448
    (0, Fr(465), "fp8e4m3", {}, 0x7F), (1, Fr(465), "fp8e4m3", {}, 0xFF),
    (0, Fr(465), "fp8e4m3", {"overflow": "saturate"}, 0x7E),
    (1, Fr(10**9), "fp8e4m3", {"overflow": "saturate"}, 0xFE),
    (0, Fr(61439), "fp8e5m2", {}, 0x7B), (0, Fr(61440), "fp8e5m2", {}, 0x7C),
    (1, Fr(61440), "fp8e5m2", {"overflow": "saturate"}, 0xFB),
    (0, Fr(65519), "f16", {}, 0x7BFF), (0, Fr(65520), "f16", {}, 0x7C00),
    (1, Fr(65520), "f16", {}, 0xFC00), (0, Fr(65520), "f16", {"overflow": "saturate"}, 0x7BFF),
    (0, 1 + P2**-11, "f16", {}, 0x3C00), (0, 1 + 3 * P2**-11, "f16", {}, 0x3C02),
    (0, Fr(2049), "f16", {}, 0x6800), (0, Fr(2051), "f16", {}, 0x6802),
    (0, P2**-25, "f16", {}, 0x0000), (1, P2**-25, "f16", {}, 0x8000),
    (0, 3 * P2**-26, "f16", {}, 0x0001), (0, 3 * P2**-25, "f16", {}, 0x0002),
    (0, Fr(2047, 2) * P2**-24, "f16", {}, 0x0400),  # largest subnormal + half ulp -> min normal
    (0, 1 + P2**-8, "bf16", {}, 0x3F80), (0, 1 + 3 * P2**-8, "bf16", {}, 0x3F82),
    (0, Fr(511, 2) * P2**120, "bf16", {}, 0x7F80),  # max + half ulp: tie to 2^128 -> inf
    (0, Fr(2**24 + 1), "f32", {}, 0x4B800000), (0, Fr(2**24 + 3), "f32", {}, 0x4B800002),
    (0, (2**24 - Fr(1, 2)) * P2**104, "f32", {}, 0x7F800000),
    (0, (2**24 - Fr(1, 2)) * P2**104, "f32", {"overflow": "saturate"}, F32_MAX),
    (0, P2**-150, "f32", {}, 0), (0, P2**-150 * Fr(1001, 1000), "f32", {}, 1),
    (1, Fr(0), "fp8e5m2", {}, 0x80), (0, Fr(0), "bf16", {}, 0x0000),
    # E8M0: nearest on the linear scale, ties (1.5 * 2^e) up
    (0, Fr(3, 2), "f8e8m0", {}, 0x80), (0, Fr(149, 100), "f8e8m0", {}, 0x7F),
    (0, Fr(3), "f8e8m0", {}, 0x81), (0, Fr(3, 4), "f8e8m0", {}, 0x7F),
    (0, Fr(101, 100), "f8e8m0", {"rounding": "up"}, 0x80),
    (0, Fr(1), "f8e8m0", {"rounding": "up"}, 0x7F),
    (0, Fr(199, 100), "f8e8m0", {"rounding": "down"}, 0x7F),
    (0, Fr(4), "f8e8m0", {"rounding": "down"}, 0x81),
    (0, P2**-130, "f8e8m0", {}, 0x00), (0, P2**-130, "f8e8m0", {"rounding": "down"}, 0x00),
    (0, P2**-128 * Fr(7, 5), "f8e8m0", {}, 0x00), (0, P2**127, "f8e8m0", {}, 0xFE),
    (0, P2**-127 * Fr(7, 5), "f8e8m0", {}, 0x00), (0, P2**-127 * Fr(3, 2), "f8e8m0", {}, 0x01),
    (0, Fr(3, 2) * P2**127, "f8e8m0", {}, 0xFF),
    (0, Fr(3, 2) * P2**127, "f8e8m0", {"overflow": "saturate"}, 0xFE),
    (0, Fr(19, 10) * P2**127, "f8e8m0", {"rounding": "down"}, 0xFE),
    (0, Fr(0), "f8e8m0", {}, 0xFF), (1, Fr(0), "f8e8m0", {}, 0xFF),
    (1, Fr(1), "f8e8m0", {"overflow": "saturate"}, 0xFF),
])
def test_round_to(sign, mag, dt, kw, want):
    assert round_to(sign, mag, dt, **kw) == want


@pytest.mark.parametrize("dt", ["f16", "bf16", "fp8e4m3", "fp8e5m2"])
def test_ties_to_even_between_every_adjacent_pair(dt):
    """The midpoint of consecutive finite codes rounds to the one with an even code; values a
    hair either side of it round to the nearer one (a published IEEE rule, all codes)."""
    last = {"f16": 0x7BFF, "bf16": 0x7F7F, "fp8e4m3": 0x7E, "fp8e5m2": 0x7B}[dt]  # max finite
    step = 1 if WIDTH[dt] == 8 else 7  # every 8-bit code; a 1-in-7 sample of 16-bit codes
    for c in range(0, last, step):
        lo, hi = decode(c, dt).mag, decode(c + 1, dt).mag
        mid, eps = (lo + hi) / 2, (hi - lo) / 1024
        assert round_to(0, mid, dt) == (c if c % 2 == 0 else c + 1), (dt, c)
        assert round_to(1, mid - eps, dt) == c | (0x80 << (WIDTH[dt] - 8)), (dt, c)
        assert round_to(0, mid + eps, dt) == c + 1, (dt, c)


# ---- conversions between dtypes ---------------------------------------------------------------------
NAN32, NNAN32, INF32, NINF32 = 0x7FC00000, 0xFFC00000, 0x7F800000, 0xFF800000
SAT = {"overflow": "saturate"}


@pytest.mark.parametrize("bits,src,dst,kw,want", [
    (0x3DCCCCCD, "f32", "bf16", {}, 0x3DCD), (0x3EAAAAAB, "f32", "f16", {}, 0x3555),
    (0x3F808000, "f32", "bf16", {}, 0x3F80), (0x3F818000, "f32", "bf16", {}, 0x3F82),
    (0x3F808001, "f32", "bf16", {}, 0x3F81),
    (0x3F880001, "f32", "fp8e4m3", {}, 0x39),  # no double rounding through bf16 (-> 0x38)
    (0x80000000, "f32", "bf16", {}, 0x8000), (0x80000000, "f32", "f16", {}, 0x8000),
    (0x80000000, "f32", "fp8e4m3", {}, 0x80), (0x80000000, "f32", "fp8e5m2", {}, 0x80),
    (0x80000000, "f32", "f8e8m0", {}, 0xFF), (0x8000, "bf16", "f32", {}, 0x80000000),
    (NAN32, "f32", "bf16", {}, 0x7FC0), (NAN32, "f32", "f16", {}, 0x7E00),
    (NAN32, "f32", "fp8e4m3", {}, 0x7F), (NAN32, "f32", "fp8e5m2", {}, 0x7E),
    (NAN32, "f32", "f8e8m0", {}, 0xFF), (0xFFC00001, "f32", "f16", {}, 0xFE00),
    (0x7F800001, "f32", "f16", {}, 0x7E00), (0x7F800001, "f32", "f32", {}, NAN32),
    (0xFF, "fp8e4m3", "f32", {}, NNAN32), (0xFE00, "f16", "fp8e4m3", SAT, 0xFF),
    (0xFFC0, "bf16", "f8e8m0", SAT, 0xFF), (0xFF, "f8e8m0", "f32", {}, NAN32),
    (INF32, "f32", "fp8e4m3", {}, 0x7F), (INF32, "f32", "fp8e4m3", SAT, 0x7E),
    (NINF32, "f32", "fp8e4m3", {}, 0xFF), (NINF32, "f32", "fp8e4m3", SAT, 0xFE),
    (INF32, "f32", "f16", {}, 0x7C00), (NINF32, "f32", "f16", SAT, 0xFBFF),
    (INF32, "f32", "f32", SAT, F32_MAX), (INF32, "f32", "fp8e5m2", {}, 0x7C),
    (INF32, "f32", "f8e8m0", {}, 0xFF), (INF32, "f32", "f8e8m0", SAT, 0xFE),
    (NINF32, "f32", "f8e8m0", SAT, 0xFF), (0x7C00, "f16", "bf16", {}, 0x7F80),
    (F32_MAX, "f32", "bf16", {}, 0x7F80), (F32_MAX, "f32", "bf16", SAT, 0x7F7F),
    (F32_MAX, "f32", "f16", {}, 0x7C00), (0x477FF000, "f32", "f16", {}, 0x7C00),  # 65520
    (0x3C00, "f16", "f32", {}, 0x3F800000), (0x0001, "f16", "f32", {}, 0x33800000),
    (0x7BFF, "f16", "f32", {}, 0x477FE000), (0x0001, "f16", "bf16", {}, 0x3380),
    (0x7E, "fp8e4m3", "f32", {}, 0x43E00000), (0x7B, "fp8e5m2", "f32", {}, 0x47600000),
    (0x7B, "fp8e5m2", "fp8e4m3", {}, 0x7F), (0x7B, "fp8e5m2", "fp8e4m3", SAT, 0x7E),
    (0x39, "fp8e4m3", "fp8e5m2", {}, 0x3C), (0x3B, "fp8e4m3", "fp8e5m2", {}, 0x3E),
    (0x01, "fp8e4m3", "fp8e5m2", {}, 0x18), (0x14, "fp8e5m2", "fp8e4m3", {}, 0x00),
    (0x15, "fp8e5m2", "fp8e4m3", {}, 0x01), (0x94, "fp8e5m2", "fp8e4m3", {}, 0x80),
    (0x7F, "f8e8m0", "f32", {}, 0x3F800000), (0x00, "f8e8m0", "bf16", {}, 0x0040),
    (0x00, "f8e8m0", "f32", {}, 0x00400000), (0x00, "f8e8m0", "f16", {}, 0x0000),
    (0xFE, "f8e8m0", "f16", {}, 0x7C00), (0xFE, "f8e8m0", "fp8e4m3", {}, 0x7F),
    (0xFE, "f8e8m0", "fp8e4m3", SAT, 0x7E), (0xFE, "f8e8m0", "fp8e5m2", {}, 0x7C),
    (0x3FC00000, "f32", "f8e8m0", {}, 0x80), (0x3F800000, "f32", "f8e8m0", {}, 0x7F),
    (0xBF800000, "f32", "f8e8m0", {}, 0xFF), (F32_MAX, "f32", "f8e8m0", {}, 0xFF),
    (F32_MAX, "f32", "f8e8m0", SAT, 0xFE), (F32_MAX, "f32", "f8e8m0", {"rounding": "down"}, 0xFE),
    (0x00000001, "f32", "f8e8m0", {}, 0x00), (0x40400000, "f32", "f8e8m0", {"rounding": "up"}, 0x81),
    (0x40400000, "f32", "f8e8m0", {"rounding": "down"}, 0x80),
    (0x3FC00000, "f32", "f8e8m0", {"rounding": "up"}, 0x80),
    # int -> float: one rounding from the exact integer
    (0x7FFFFFFF, "i32", "fp8e4m3", {}, 0x7F), (0x7FFFFFFF, "i32", "fp8e4m3", SAT, 0x7E),
    (0x7FFFFFFF, "i32", "f32", {}, 0x4F000000), (2**63, "i64", "f32", {}, 0xDF000000),
    (2**60 + 2**36 + 1, "i64", "f32", {}, 0x5D800001),  # not rounded via f64 first
    (0x01000001, "i32", "f32", {}, 0x4B800000), (255, "u8", "bf16", {}, 0x437F),
    (255, "u8", "fp8e4m3", {}, 0x78), (0x80, "i8", "f16", {}, 0xD800),
    (0xFF, "i8", "f32", {}, 0xBF800000), (0, "i32", "f32", {}, 0), (0, "i8", "f8e8m0", {}, 0xFF),
    (3, "u8", "f8e8m0", {}, 0x81), (3, "u8", "f8e8m0", {"rounding": "down"}, 0x80),
    (0xFF, "i8", "f8e8m0", {}, 0xFF), (70000, "i32", "f16", {}, 0x7C00),
    (70000, "i32", "f16", SAT, 0x7BFF), (2**31, "i32", "fp8e5m2", {}, 0xFC),
    # float -> int: truncation toward zero; None = unspecified
    (0x4039999A, "f32", "i8", {}, 2), (0xC039999A, "f32", "i8", {}, 0xFE),
    (0xBF333333, "f32", "u8", {}, 0), (0xBF800000, "f32", "u8", {}, None),
    (0x437F8000, "f32", "u8", {}, 255), (0x43800000, "f32", "u8", {}, None),
    (0x42FFCCCD, "f32", "i8", {}, 127), (0x43000000, "f32", "i8", {}, None),
    (0xC3008000, "f32", "i8", {}, 0x80), (0xC3010000, "f32", "i8", {}, None),
    (NAN32, "f32", "i32", {}, None), (INF32, "f32", "i64", {}, None),
    (0x4F000000, "f32", "i32", {}, None), (0xCF000000, "f32", "i32", {}, 0x80000000),
    (0x5F000000, "f32", "i64", {}, None), (0xDF000000, "f32", "i64", {}, 2**63),
    (0x7E, "f8e8m0", "i32", {}, 0), (0x82, "f8e8m0", "u8", {}, 8),
    (0xFE, "f8e8m0", "i64", {}, None), (0xFF, "f8e8m0", "i8", {}, None),
    (0x8000, "bf16", "i32", {}, 0), (0x7E, "fp8e4m3", "u8", {}, None),
    (0x7E, "fp8e4m3", "i32", {}, 448), (0x7C00, "f16", "i32", {}, None),
    # int -> int: two's complement wraparound
    (300, "i32", "i8", {}, 0x2C), (0xFFFFFFFF, "i32", "u8", {}, 0xFF), (200, "u8", "i8", {}, 200),
    (0xFF, "i8", "i64", {}, 2**64 - 1), (2**40 + 5, "i64", "i32", {}, 5),
    (0xFF, "u8", "i32", {}, 255), (2**63, "i64", "i32", {}, 0), (0x80, "i8", "u8", {}, 0x80),
    # bool
    (1, "bool", "f32", {}, 0x3F800000), (1, "bool", "bf16", {}, 0x3F80),
    (1, "bool", "fp8e4m3", {}, 0x38), (1, "bool", "f8e8m0", {}, 0x7F),
    (0, "bool", "f8e8m0", {}, 0xFF), (0, "bool", "f16", {}, 0), (1, "bool", "i64", {}, 1),
    (NAN32, "f32", "bool", {}, 1), (0x80000000, "f32", "bool", {}, 0),
    (0x00000001, "f32", "bool", {}, 1), (INF32, "f32", "bool", {}, 1),
    (0x00, "f8e8m0", "bool", {}, 1), (0xFF, "f8e8m0", "bool", {}, 1),
    (0x80, "i8", "bool", {}, 1), (0, "i32", "bool", {}, 0), (1, "bool", "bool", {}, 1),
])
def test_cast(bits, src, dst, kw, want):
    assert cast_bits(bits, src, dst, **kw) == want


def test_cast_accepts_dtype_objects_and_many_matches_single():
    src = np.array([0x3DCCCCCD, 0x7F800001, 0x80000000, 0x3F808000], np.uint32)
    want = [cast_bits(int(b), DType.F32, DType.BF16) for b in src]
    assert want == [0x3DCD, 0x7FC0, 0x8000, 0x3F80]
    assert exact_cast_many(src, "f32", "bf16") == want


# ---- exhaustive / sampled agreement with independent implementations ---------------------------
def test_bf16_widening_is_the_upper_half_of_f32():
    for b in range(1 << 16):
        got = cast_bits(b, "bf16", "f32")
        if (b & 0x7FFF) > 0x7F80:
            assert got == (NAN32 | (b & 0x8000) << 16)
        else:
            assert got == b << 16, hex(b)


@pytest.mark.parametrize("dt", ["f16", "fp8e4m3", "fp8e5m2", "f8e8m0"])
def test_widening_to_f32_matches_reference(dt):
    codes = np.arange(1 << WIDTH[dt]).astype(UINT[WIDTH[dt]])
    want = np_bits(codes.view(NP_TYPE[dt]).astype(np.float32), "f32")
    got = exact_cast_many(codes, dt, "f32")
    bad = [(hex(c), hex(g), hex(w)) for c, g, w in zip(codes, got, want, strict=True)
           if not same(g, w, "f32")]
    assert not bad, bad[:5]


def _f32_samples(seed: int, n: int) -> np.ndarray:
    """Random f32: raw bit patterns plus log-uniform values spanning the 8/16-bit ranges."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    logu = (np.exp2(rng.uniform(-140, 20, n)) * rng.choice([-1, 1], n)).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 464, 465, 65520, 57344, 61440],
                       np.float32)
    return np.concatenate([raw, logu, special])


@pytest.mark.parametrize("dt", ["f16", "bf16", "fp8e4m3", "fp8e5m2"])
def test_f32_narrowing_matches_reference(dt):
    x = _f32_samples(7, 3000)
    with np.errstate(over="ignore", invalid="ignore"):
        want = np_bits(x.astype(NP_TYPE[dt]), dt)
    got = exact_cast_many(x.view(np.uint32), "f32", dt)
    bad = [(hex(int(b)), g, w) for b, g, w in zip(x.view(np.uint32), got, want, strict=True)
           if not same(g, w, dt)]
    assert not bad, bad[:5]


def test_f32_to_e8m0_matches_reference_in_range():
    # ml_dtypes agrees for f32 normals; for f32 subnormal inputs it does not round on the
    # linear scale (1.4 * 2^-127 -> 2^-126), so those are covered by test_round_to instead.
    x = np.abs(_f32_samples(8, 3000))
    x = x[np.isfinite(x) & (x >= 2.0**-126) & (x < 2.0**127)]
    want = np_bits(x.astype(ml_dtypes.float8_e8m0fnu), "f8e8m0")
    assert exact_cast_many(x.view(np.uint32), "f32", "f8e8m0") == want


def test_int_to_float_matches_numpy():
    rng = np.random.default_rng(3)
    i64 = np.concatenate([rng.integers(-2**63, 2**63 - 1, 2000, dtype=np.int64),
                          rng.integers(-2**30, 2**30, 2000, dtype=np.int64)])
    want = np_bits(i64.astype(np.float32), "f32")
    assert exact_cast_many(i64.view(np.uint64), "i64", "f32") == want
    i32 = rng.integers(-70000, 70000, 2000, dtype=np.int32)
    with np.errstate(over="ignore"):
        want16 = np_bits(i32.astype(np.float16), "f16")
    assert exact_cast_many(i32.view(np.uint32), "i32", "f16") == want16


def test_float_to_int_and_int_to_int_match_numpy_where_defined():
    x = np.concatenate([_f32_samples(5, 1000), np.linspace(-300, 300, 1201, dtype=np.float32)])
    got = exact_cast_many(x.view(np.uint32), "f32", "i8")
    for v, g in zip(x, got, strict=True):
        defined = np.isfinite(v) and -128 <= np.trunc(v) <= 127
        assert (g is None) == (not defined), v
        if defined:
            assert g == int(np.array(np.trunc(v), np.int8).view(np.uint8)), v
    w = np.arange(-2**15, 2**15, 7, dtype=np.int32)
    want = [int(b) for b in w.astype(np.int8).view(np.uint8)]
    assert exact_cast_many(w.view(np.uint32), "i32", "i8") == want


# ---- errors -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda: cast_bits(0, "f4e2m1", "f32"), lambda: cast_bits(0, "f32", "f4e2m1"),
    lambda: exact_cast_many([0], "bf16", "f4e2m1"), lambda: round_to(0, Fr(1), "f4e2m1"),
    lambda: binary_bits("add", 0, 0, "f4e2m1"),
])
def test_f4e2m1_is_unsupported(call):
    with pytest.raises(UnsupportedDTypeError, match="f4e2m1"):
        call()


@pytest.mark.parametrize("call,words", [
    (lambda: cast_bits(0, "f32", "f16", overflow="clamp"), ["overflow", "'saturate'"]),
    (lambda: cast_bits(0, "f32", "f16", rounding="zero"), ["rounding", "'down'"]),
    (lambda: cast_bits(0, "f32", "f16", rounding="up"), ["rounding", "f16", "'nearest'"]),
    (lambda: round_to(0, Fr(1), "bf16", rounding="down"), ["rounding", "bf16", "'nearest'"]),
    (lambda: cast_bits(0, "f32", "i32", overflow="saturate"), ["truncat", "i32"]),
    (lambda: cast_bits(0, "f32", "u8", rounding="up"), ["truncat", "rounding"]),
    (lambda: cast_bits(0, "i32", "i8", overflow="saturate"), ["wrap", "i8"]),
    (lambda: cast_bits(0, "f32", "bool", overflow="saturate"), ["!= 0"]),
    (lambda: cast_bits(256, "u8", "f32"), ["bits", "u8"]),
    (lambda: cast_bits(-1, "i8", "f32"), ["two's complement"]),
    (lambda: round_to(0, Fr(1), "i8"), ["float"]),
    (lambda: round_to(0, Fr(-1), "f32"), ["mag"]),
    (lambda: binary_bits("pow", 0, 0, "f32"), ["op", "'div'"]),
    (lambda: unary_bits("exp", 0, "f32"), ["op", "'sqrt'"]),
    (lambda: binary_bits("add", 0, 0, "f32", overflow="wrap"), ["overflow"]),
])
def test_invalid_arguments(call, words):
    with pytest.raises(InvalidArgumentError) as info:
        call()
    for w in words:
        assert w in str(info.value)


@pytest.mark.parametrize("dt", ["i32", "f8e8m0", "bool"])
def test_arithmetic_dtype_outside_model(dt):
    with pytest.raises(UnsupportedDTypeError, match=dt):
        binary_bits("add", 0, 0, dt)


# ---- arithmetic: exact IEEE op, round once to f32, then cast -------------------------------------
ONE, TWO, THREE, M_ONE = 0x3F800000, 0x40000000, 0x40400000, 0xBF800000
PZ, NZ = 0x00000000, 0x80000000


@pytest.mark.parametrize("op,a,b,want", [
    ("add", INF32, NINF32, "nan"), ("sub", INF32, INF32, "nan"), ("add", INF32, INF32, INF32),
    ("sub", NINF32, INF32, NINF32), ("mul", PZ, INF32, "nan"), ("mul", NINF32, NZ, "nan"),
    ("mul", INF32, 0xC0000000, NINF32), ("div", PZ, PZ, "nan"), ("div", NINF32, INF32, "nan"),
    ("div", ONE, PZ, INF32), ("div", ONE, NZ, NINF32), ("div", M_ONE, NZ, INF32),
    ("div", ONE, INF32, PZ), ("div", M_ONE, INF32, NZ), ("div", NINF32, THREE, NINF32),
    ("add", NZ, NZ, NZ), ("add", PZ, NZ, PZ), ("add", NZ, PZ, PZ), ("sub", NZ, PZ, NZ),
    ("sub", PZ, PZ, PZ), ("sub", THREE, THREE, PZ), ("sub", 0xC0400000, 0xC0400000, PZ),
    ("add", 0xC0400000, THREE, PZ), ("add", ONE, NAN32, "nan"), ("mul", NNAN32, PZ, "nan"),
    ("mul", 0xC0000000, THREE, 0xC0C00000), ("mul", M_ONE, M_ONE, ONE),
    ("mul", 0x8D800000, 0x0D800000, NZ),  # -2^-100 * 2^-100 underflows to -0
    ("div", NZ, THREE, NZ), ("div", ONE, THREE, 0x3EAAAAAB),
    ("add", 0x3DCCCCCD, 0x3E4CCCCD, 0x3E99999A),  # 0.1f + 0.2f
    ("div", ONE, 0x41200000, 0x3DCCCCCD), ("mul", 0x00800000, 0x34000000, 0x00000001),
    ("div", 0x00000001, TWO, PZ),  # 2^-150: tie to even -> +0
    ("div", 0x00000003, TWO, 0x00000002),  # 1.5 ulp: tie to even -> 2 ulp
    ("add", F32_MAX, F32_MAX, INF32), ("mul", F32_MAX, M_ONE, 0xFF7FFFFF),
])
def test_f32_arithmetic_ieee_rules(op, a, b, want):
    got = binary_bits(op, a, b, "f32")
    assert is_nan(got, "f32") if want == "nan" else got == want


def test_f32_overflow_under_saturate_clamps():
    """Decision: 'saturate' clamps ±inf results of f32 arithmetic too, as it does for every
    other float dtype (the second step of widen-op-round is cast f32 -> f32 with the mode)."""
    assert binary_bits("add", F32_MAX, F32_MAX, "f32", overflow="saturate") == F32_MAX
    assert binary_bits("add", F32_MAX, F32_MAX, "f32") == INF32


@pytest.mark.parametrize("op,a,dt,want", [
    ("sqrt", TWO, "f32", 0x3FB504F3), ("sqrt", M_ONE, "f32", "nan"), ("sqrt", NZ, "f32", NZ),
    ("sqrt", PZ, "f32", PZ), ("sqrt", INF32, "f32", INF32), ("sqrt", NINF32, "f32", "nan"),
    ("sqrt", 0x00000002, "f32", 0x1A800000), ("sqrt", 0x40800000, "f32", TWO),
    ("sqrt", 0x4000, "f16", 0x3DA8), ("sqrt", 0x4000, "bf16", 0x3FB5),
    ("sqrt", 0x40, "fp8e4m3", 0x3B), ("sqrt", 0x7E, "fp8e4m3", 0x5B), ("sqrt", 0xB8, "fp8e4m3", "nan"),
    ("neg", ONE, "f32", M_ONE), ("neg", PZ, "f32", NZ), ("neg", NAN32, "f32", NAN32),
    ("abs", NINF32, "f32", INF32), ("abs", NZ, "f32", PZ), ("abs", NNAN32, "f32", NAN32),
    ("neg", 0x7E, "fp8e4m3", 0xFE), ("abs", 0xFF, "fp8e4m3", 0x7F), ("neg", 0x7C, "fp8e5m2", 0xFC),
    ("neg", 0x0001, "f16", 0x8001), ("abs", 0xFBFF, "f16", 0x7BFF),
])
def test_unary(op, a, dt, want):
    got = unary_bits(op, a, dt)
    assert is_nan(got, dt) if want == "nan" else got == want


@pytest.mark.parametrize("op,a,b,dt,kw,want", [
    ("add", 0x7BFF, 0x4C00, "f16", {}, 0x7C00),  # 65504 + 16 = 65520: tie -> 65536 -> inf
    ("add", 0x7BFF, 0x4C00, "f16", SAT, 0x7BFF), ("add", 0x7BFF, 0x4B80, "f16", {}, 0x7BFF),
    ("div", 0x3C00, 0x4200, "f16", {}, 0x3555), ("mul", 0x0001, 0x3800, "f16", {}, 0x0000),
    ("add", 0x7E, 0x60, "fp8e4m3", {}, 0x7F),  # 448 + 32 = 480 -> NaN
    ("add", 0x7E, 0x60, "fp8e4m3", SAT, 0x7E), ("add", 0x78, 0x58, "fp8e4m3", {}, 0x78),
    ("mul", 0x7E, 0x40, "fp8e4m3", SAT, 0x7E), ("sub", 0x80, 0x00, "fp8e4m3", {}, 0x80),
    ("mul", 0x7B, 0x40, "fp8e5m2", {}, 0x7C), ("mul", 0x7B, 0x40, "fp8e5m2", SAT, 0x7B),
    ("sub", 0x7C, 0x7C, "fp8e5m2", SAT, "nan"), ("mul", 0xFC, 0x40, "fp8e5m2", SAT, 0xFB),
    ("add", 0x3F80, 0x3B80, "bf16", {}, 0x3F80), ("add", 0x3F80, 0x3C40, "bf16", {}, 0x3F82),
    ("div", 0x3F80, 0x0000, "bf16", {}, 0x7F80), ("div", 0x3F80, 0x8000, "bf16", SAT, 0xFF7F),
])
def test_low_precision_arithmetic(op, a, b, dt, kw, want):
    got = binary_bits(op, a, b, dt, **kw)
    assert is_nan(got, dt) if want == "nan" else got == want


def _ref_op(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op](x, y)


@pytest.mark.parametrize("dt,n", [("f32", 600), ("f16", 600), ("bf16", 400), ("fp8e4m3", 400),
                                  ("fp8e5m2", 400)])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "sqrt"])
def test_arithmetic_matches_reference(dt, n, op):
    """numpy float32/float16 and ml_dtypes compute exactly widen-op-round (IEEE f32 ops)."""
    rng = np.random.default_rng(11)
    w = WIDTH[dt]
    if dt == "f32":
        a = _f32_samples(1, n).view(np.uint32)
        b = _f32_samples(2, n).view(np.uint32)
    else:
        a, b = (rng.integers(0, 1 << w, n, dtype=np.uint64).astype(UINT[w]) for _ in range(2))
    x, y = a.view(NP_TYPE[dt]), b.view(NP_TYPE[dt])
    if op == "sqrt":
        with np.errstate(all="ignore"):
            want = np_bits(np.sqrt(x), dt)
        got = [unary_bits("sqrt", int(p), dt) for p in a]
        pairs = list(zip(a, a, strict=True))
    else:
        want = np_bits(_ref_op(op, x, y), dt)
        got = [binary_bits(op, int(p), int(q), dt) for p, q in zip(a, b, strict=True)]
        pairs = list(zip(a, b, strict=True))
    bad = [(hex(int(p)), hex(int(q)), g, w_) for (p, q), g, w_ in zip(pairs, got, want, strict=True)
           if not same(g, w_, dt)]
    assert not bad, bad[:5]


def test_nan_signs_of_arithmetic_model_decision():
    """IEEE leaves NaN signs open (x86 and Arm differ); the reference returns the positive quiet
    NaN from every arithmetic operation, whether the NaN is created or propagated."""
    assert binary_bits("sub", ONE, NNAN32, "f32") == NAN32
    assert binary_bits("add", NNAN32, NAN32, "f32") == NAN32
    assert unary_bits("neg", NAN32, "f32") == NAN32
    assert binary_bits("add", INF32, NINF32, "f32") == NAN32
    assert binary_bits("mul", NZ, NINF32, "f32") == NAN32
    assert unary_bits("sqrt", M_ONE, "f32") == NAN32
    assert binary_bits("sub", 0xFC, 0xFC, "fp8e5m2") == 0x7E
