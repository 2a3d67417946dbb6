"""The fast widen / round paths of ``semantics.dtypes`` are bit-identical to the exact model.

``dtypes`` routes bf16 → f32 widening (a shift by 16) and f32 → f32 / bf16 / f16 / fp8e4m3 /
fp8e5m2 rounding (integer bias trick, IEEE f32 addition for the destination's subnormals) around
its general decode-and-round engine (``dtypes._convert``, transcribed and proved for every f32
input in ``smt/obligations/rounding.py``) for speed (docs/decisions.md D110). These tests hold the
fast paths to the exact scalar model (``semantics/exact.py``, Python integers and Fractions, no
code shared with ``dtypes``) and to the engine:

* widening: every bf16, f16, fp8e4m3 and fp8e5m2 pattern (exhaustive);
* f32 → bf16 / f16 rounding: every structured pattern (ties, near-ties, carries and sticky bits at
  every rounding position, for every sign and exponent field, plus the specials) and 10^6 seeded
  random patterns (half uniform over all 2^32 patterns, half with the exponent field near the
  destination's range, where the rounding is not trivial), both overflow modes; fp8 and f32
  destinations: structured patterns against the exact model, the random patterns against the
  engine;
* ``apply_lowp`` add / mul / div on 10^6 seeded random bf16 pairs per op against an exact
  pipeline — the exact model's widening, the operation in float64 (exact for mul; for add and
  div, rounding to float64 then to f32 equals one rounding to f32 because 53 >= 2 * 24 + 2, the
  innocuous double rounding of Figueroa 1995; bf16 operands keep every float64 result in range),
  the positive quiet NaN for a NaN result, and the exact model's f32 → bf16 cast — and, on a
  seeded sample, directly against ``exact.binary_bits``.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.conformance.numerics_sweep import structured_f32_patterns
from tilefoundry.semantics import dtypes, exact
from tilefoundry.semantics.dtypes import (
    FORMATS,
    DType,
    apply_lowp,
    bits_dtype,
    cast,
    cast_ex,
    from_bits,
    to_bits,
    widen_to_f32,
)

F32, BF16, F16 = DType.F32, DType.BF16, DType.F16
FP8 = (DType.FP8E4M3, DType.FP8E5M2)
MODES = ("nonfinite", "saturate")
N_RANDOM = 1_000_000
N_SATURATE = 1 << 18  # random patterns rounded with saturate against the exact model
N_DIRECT = 5_000  # pairs per op and mode checked one by one with exact.binary_bits


def all_patterns(dt: DType) -> np.ndarray:
    return from_bits(np.arange(1 << FORMATS[dt].bits, dtype=np.uint32).astype(bits_dtype(dt)), dt)


def engine(x: np.ndarray, dst: DType, overflow: str = "nonfinite") -> np.ndarray:
    """The general engine (decode, round once), bypassing every fast path and table."""
    src = dtypes.dtype_of(x)
    return dtypes._convert(x, src, dst, overflow, "nearest").values


def exact_codes(x: np.ndarray, dst: DType, overflow: str = "nonfinite") -> np.ndarray:
    src = dtypes.dtype_of(x)
    want = exact.exact_cast_many(to_bits(x).ravel(), src, dst, overflow)
    return np.array(want, dtype=np.uint64).astype(bits_dtype(dst)).reshape(x.shape)


def assert_bits_equal(got: np.ndarray, want_bits: np.ndarray, src_bits: np.ndarray, what: str):
    got_bits = to_bits(got)
    assert got_bits.shape == want_bits.shape
    bad = np.flatnonzero(got_bits.ravel() != want_bits.ravel())
    if bad.size:
        i = bad[:5]
        raise AssertionError(
            f"{what}: {bad.size} mismatches, e.g. sources "
            f"{[hex(v) for v in src_bits.ravel()[i].tolist()]} gave "
            f"{[hex(v) for v in got_bits.ravel()[i].tolist()]}, expected "
            f"{[hex(v) for v in want_bits.ravel()[i].tolist()]}")


def random_f32_patterns(dst: DType, n: int, seed: int) -> np.ndarray:
    """``n`` seeded f32 patterns: half uniform over 2^32, half with an exponent field within the
    destination's interesting window (below its smallest subnormal up to above its largest
    finite), any sign and fraction."""
    rng = np.random.default_rng(seed)
    half = n // 2
    uni = rng.integers(0, 1 << 32, half, dtype=np.uint64).astype(np.uint32)
    info = FORMATS[dst]
    lo = max(0, info.emin - info.mbits - 3 + 127)
    hi = min(255, info.bias + 3 + 127) if dst is not F32 else 255
    ef = rng.integers(lo, hi + 1, n - half, dtype=np.uint32)
    frac = rng.integers(0, 1 << 23, n - half, dtype=np.uint32)
    sign = rng.integers(0, 2, n - half, dtype=np.uint32)
    near = (sign << np.uint32(31)) | (ef << np.uint32(23)) | frac
    return np.concatenate([uni, near]).view(np.float32)


# ---------------------------------------------------------------------------------------------
# widening: exhaustive
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("src", [BF16, F16, *FP8], ids=str)
def test_widening_every_pattern_matches_the_exact_model(src):
    x = all_patterns(src)
    want = exact_codes(x, F32)
    assert_bits_equal(widen_to_f32(x), want, to_bits(x), f"widen {src}")
    assert_bits_equal(cast(x, F32), want, to_bits(x), f"cast {src} -> f32")
    assert_bits_equal(engine(x, F32), want, to_bits(x), f"engine {src} -> f32")
    if src is BF16:
        assert_bits_equal(dtypes._widen_bf16(x), want, to_bits(x), "_widen_bf16")
        # saturate keeps the engine's table (±inf -> ±max finite f32)
        sat = exact_codes(x, F32, "saturate")
        assert_bits_equal(cast(x, F32, overflow="saturate"), sat, to_bits(x), "bf16 saturate")


# ---------------------------------------------------------------------------------------------
# f32 -> narrow rounding
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("overflow", MODES)
@pytest.mark.parametrize("dst", [BF16, F16, *FP8, F32], ids=str)
def test_rounding_structured_patterns_match_the_exact_model(dst, overflow):
    src = structured_f32_patterns()
    x = src.view(np.float32)
    want = exact_codes(x, dst, overflow)
    assert_bits_equal(cast(x, dst, overflow=overflow), want, src, f"f32 -> {dst} {overflow}")
    assert_bits_equal(engine(x, dst, overflow), want, src, f"engine f32 -> {dst} {overflow}")


@pytest.mark.parametrize("overflow", MODES)
@pytest.mark.parametrize("dst", [BF16, F16], ids=str)
def test_rounding_random_patterns_match_the_exact_model(dst, overflow):
    """10^6 patterns in the evaluator's mode (nonfinite); saturate differs from it only where a
    result overflows, and runs on a 2^18 subset here (all 10^6 against the engine below)."""
    x = random_f32_patterns(dst, N_RANDOM, seed={BF16: 110, F16: 111}[dst])
    if overflow == "saturate":
        x = x[np.random.default_rng(4).choice(x.size, N_SATURATE, replace=False)]
    want = exact_codes(x, dst, overflow)
    assert_bits_equal(cast(x, dst, overflow=overflow), want, to_bits(x),
                      f"f32 -> {dst} {overflow}")


@pytest.mark.parametrize("overflow", MODES)
@pytest.mark.parametrize("dst", [BF16, F16, *FP8, F32], ids=str)
def test_rounding_random_patterns_match_the_engine(dst, overflow):
    x = random_f32_patterns(dst, N_RANDOM, seed=7)
    want = to_bits(engine(x, dst, overflow))
    assert_bits_equal(cast(x, dst, overflow=overflow), want, to_bits(x),
                      f"f32 -> {dst} {overflow}")


@pytest.mark.parametrize("dst", [BF16, F16, *FP8, F32], ids=str)
def test_layouts_blocks_and_nans(dst):
    """Shapes, strides, block boundaries and NaN payloads / signs take the engine's results."""
    bits = random_f32_patterns(dst, 3 * dtypes._BLOCK + 1001, seed=3).view(np.uint32).copy()
    bits[5] = 0x7F800001  # signalling NaN, positive
    bits[dtypes._BLOCK + 7] = 0xFFFFFFFF  # negative NaN whose rounding would carry
    bits[2 * dtypes._BLOCK - 1] = 0x7FFF8000  # positive NaN whose bf16 rounding would carry
    x = bits.view(np.float32)
    for ov in MODES:
        for v in (x, x[::3], x[:0], x[:1].reshape(()), x[: 6 * 1000].reshape(6, 10, 100).T,
                  x[dtypes._BLOCK:].reshape(-1, 1)):
            got = cast(v, dst, overflow=ov)
            want = engine(np.ascontiguousarray(v).reshape(-1), dst, ov).reshape(v.shape)
            assert got.shape == v.shape and got.dtype == FORMATS[dst].storage
            assert np.array_equal(to_bits(np.ascontiguousarray(got)).reshape(-1),
                                  to_bits(want).reshape(-1)), (dst, ov)
            assert not cast_ex(v, dst, overflow=ov).unspecified.any()
    nan_free = x[~np.isnan(x)]
    assert np.array_equal(to_bits(cast(nan_free, dst)), to_bits(engine(nan_free, dst)))


def test_bf16_overflow_thresholds():
    # largest finite bf16 0x7F7F; 0x7F7F8000 is the tie above it (rounds to even: overflow)
    src = np.array([0x7F7F7FFF, 0x7F7F8000, 0x7F800000, 0xFF7F7FFF, 0xFF7F8000, 0xFF800000,
                    0x7FC00001, 0xFFC00000, 0x00008000, 0x00018000, 0x80008000], np.uint32)
    x = src.view(np.float32)
    assert [hex(v) for v in to_bits(cast(x, BF16)).tolist()] == [
        "0x7f7f", "0x7f80", "0x7f80", "0xff7f", "0xff80", "0xff80", "0x7fc0", "0xffc0", "0x0",
        "0x2", "0x8000"]
    assert [hex(v) for v in to_bits(cast(x, BF16, overflow="saturate")).tolist()] == [
        "0x7f7f", "0x7f7f", "0x7f7f", "0xff7f", "0xff7f", "0xff7f", "0x7fc0", "0xffc0", "0x0",
        "0x2", "0x8000"]


# ---------------------------------------------------------------------------------------------
# apply_lowp
# ---------------------------------------------------------------------------------------------
def random_bf16_pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Half uniform over all bf16 patterns; half with exponents within 10 binades of each other
    (so that add / sub really round)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 << 16, n, dtype=np.uint32)
    b = rng.integers(0, 1 << 16, n, dtype=np.uint32)
    h = n // 2
    ea = (a[h:] >> np.uint32(7)) & np.uint32(0xFF)
    eb = np.clip(ea.astype(np.int64) + rng.integers(-10, 11, n - h), 0, 255).astype(np.uint32)
    b[h:] = (b[h:] & np.uint32(0x807F)) | (eb << np.uint32(7))
    return (from_bits(a.astype(np.uint16), BF16), from_bits(b.astype(np.uint16), BF16))


_F64_OPS = {"add": np.add, "mul": np.multiply, "div": np.divide}


@pytest.mark.parametrize("op", ["add", "mul", "div"])
def test_apply_lowp_random_bf16_pairs_match_the_exact_model(op):
    a, b = random_bf16_pairs(N_RANDOM, seed={"add": 1, "mul": 2, "div": 3}[op])
    got = apply_lowp(_F64_OPS[op], a, b)
    # the exact pipeline: exact widening (every pattern through the exact model), f64 operation,
    # one rounding to f32, the positive quiet NaN, the exact model's f32 -> bf16 cast
    widen = exact_codes(all_patterns(BF16), F32).view(np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        r = _F64_OPS[op](widen[to_bits(a)], widen[to_bits(b)]).astype(np.float32)
    r[np.isnan(r)] = np.float32(np.nan)
    assert to_bits(np.float32(np.nan)) == 0x7FC00000
    uniq, inv = np.unique(to_bits(r), return_inverse=True)  # the model runs once per value
    want = exact_codes(uniq.view(np.float32), BF16)[inv]
    assert_bits_equal(got, want, to_bits(a), f"apply_lowp {op} bf16")
    # the engine realization of the same contract
    with np.errstate(all="ignore"):
        r32 = _F64_OPS[op](engine(a, F32), engine(b, F32))
    r32 = np.where(np.isnan(r32), np.float32(np.nan), r32)
    for ov in MODES:
        assert_bits_equal(apply_lowp(_F64_OPS[op], a, b, overflow=ov),
                          to_bits(engine(r32, BF16, ov)), to_bits(a),
                          f"apply_lowp {op} bf16 {ov} vs engine")
    # directly against exact.binary_bits on a sample, both overflow modes
    idx = np.random.default_rng(5).choice(N_RANDOM, N_DIRECT, replace=False)
    for ov in MODES:
        sub = apply_lowp(_F64_OPS[op], a[idx], b[idx], overflow=ov)
        want = [exact.binary_bits(op, x, y, BF16, ov)
                for x, y in zip(to_bits(a[idx]).tolist(), to_bits(b[idx]).tolist(), strict=True)]
        assert to_bits(sub).tolist() == want, (op, ov)


@pytest.mark.parametrize("dt", [BF16, F16, *FP8, F32], ids=str)
def test_apply_lowp_matches_the_engine_on_every_kind_of_operation(dt):
    """Other operations (NaN-producing, sign-changing, non-arithmetic), other dtypes, odd
    shapes: ``apply_lowp`` equals widen (engine) – op – positive qNaN – round (engine)."""
    rng = np.random.default_rng(11)
    nb = FORMATS[dt].bits
    n = 2 * dtypes._BLOCK + 3
    a = from_bits(rng.integers(0, 1 << nb, n, dtype=np.uint64).astype(bits_dtype(dt)), dt)
    b = from_bits(rng.integers(0, 1 << nb, n, dtype=np.uint64).astype(bits_dtype(dt)), dt)
    fns = {"sub": np.subtract, "sqrt": np.sqrt, "neg": np.negative, "abs": np.abs,
           "max": np.maximum, "square": lambda x: x * x, "min0": lambda x: np.minimum(x, 0)}
    for name, fn in fns.items():
        args = (a, b) if name in ("sub", "max") else (a,)
        for shape in ((n,), (3, 5), ()):
            m = int(np.prod(shape))
            xs = tuple(v[:m].reshape(shape) for v in args)
            with np.errstate(all="ignore"):
                r = np.asarray(fn(*(engine(v.reshape(-1), F32).reshape(shape) for v in xs)))
            r = np.where(np.isnan(r), np.float32(np.nan), r).astype(np.float32)
            for ov in MODES:
                got = apply_lowp(fn, *xs, overflow=ov)
                want = engine(r.reshape(-1), dt, ov).reshape(shape)
                assert got.shape == shape and got.dtype == FORMATS[dt].storage
                assert np.array_equal(to_bits(np.ascontiguousarray(got)).reshape(-1),
                                      to_bits(want).reshape(-1)), (dt, name, shape, ov)
