"""Binary / Unary evaluator implementations: cross-checked against torch CPU and planted values.

Comparison rule (``_compare``): integer and bool results bit-exact; float results bit-exact with
NaN compared as a class (our NaN must be the positive quiet NaN, D21), transcendentals within
1 ulp of torch. Deliberate differences from torch are classified and counted, never ignored:

* ``nan_bits``: torch's NaN has another sign / payload (the reference writes the positive qNaN);
* ``minmax_zero``: torch.minimum / maximum return the first operand on ``-0 == +0`` on its
  scalar path (short tensors; the vectorized path orders the zeros); the
  reference orders ``-0 < +0``.
"""

from __future__ import annotations

import collections

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tilefoundry.semantics.dtypes import DType, cast, to_bits
from tilefoundry.semantics.evaluator.math import round_f64_once
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx
from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary, UnaryKind

BK, UK = BinaryKind, UnaryKind
NP = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16),
      "bf16": np.dtype(ml_dtypes.bfloat16), "i8": np.dtype(np.int8), "u8": np.dtype(np.uint8),
      "i32": np.dtype(np.int32), "i64": np.dtype(np.int64), "bool": np.dtype(bool)}
FLOATS = ("f32", "bf16", "f16")
INTS = ("i8", "i32", "i64")
UINT = {"f32": np.uint32, "f16": np.uint16, "bf16": np.uint16}
TRANSCENDENTAL = {UK.EXP, UK.LOG, UK.EXP2, UK.LOG2, UK.RSQRT}
#: Kinds compared with torch within 1 ulp. sqrt is exact (IEEE) in the reference, but torch's
#: vectorized CPU f32 sqrt is not correctly rounded (torch.sqrt of 20 copies of f32 88.7 gives
#: 9.41806698, the correctly rounded value is 9.418068): counted as a divergence of torch.
ULP_KINDS = {*TRANSCENDENTAL, UK.SQRT}

#: Divergences from torch found by every comparison in this module (kind, dtype, class) -> count.
DIVERGENCES: collections.Counter = collections.Counter()
MAX_ULP: collections.Counter = collections.Counter()


def binary(kind, a, b):
    return EVALUATORS[Binary](EvalCtx(Binary(kind), None, None), (a, b))


def unary(kind, x):
    return EVALUATORS[Unary](EvalCtx(Unary(kind), None, None), (x,))


# ---------------------------------------------------------------------------------------------
# torch bridge
# ---------------------------------------------------------------------------------------------
def to_torch(x: np.ndarray) -> torch.Tensor:
    x = np.array(x, copy=True, order="C")
    if x.dtype == NP["bf16"]:
        return torch.from_numpy(x.view(np.int16).reshape(-1).copy()).view(
            torch.bfloat16).reshape(list(x.shape))
    return torch.from_numpy(x.reshape(-1).copy()).reshape(list(x.shape))


def from_torch(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.reshape(-1).view(torch.int16).numpy().view(NP["bf16"]).reshape(tuple(t.shape))
    return t.numpy()


TORCH_BINARY = {BK.ADD: torch.add, BK.SUB: torch.sub, BK.MUL: torch.mul, BK.DIV: torch.div,
                BK.MIN: torch.minimum, BK.MAX: torch.maximum, BK.EQ: torch.eq, BK.NE: torch.ne,
                BK.LT: torch.lt, BK.LE: torch.le, BK.GT: torch.gt, BK.GE: torch.ge,
                BK.AND: torch.logical_and, BK.OR: torch.logical_or,
                BK.XOR: torch.logical_xor}
TORCH_UNARY = {UK.NEG: torch.neg, UK.ABS: torch.abs, UK.LOGICAL_NOT: torch.logical_not,
               UK.RSQRT: torch.rsqrt, UK.EXP: torch.exp, UK.LOG: torch.log, UK.CEIL: torch.ceil,
               UK.ROUND: torch.round, UK.EXP2: torch.exp2, UK.LOG2: torch.log2,
               UK.RELU: torch.relu, UK.SQUARE: torch.square, UK.SQRT: torch.sqrt}

BINARY_DTYPES = {k: (*FLOATS, *INTS, "u8") for k in (BK.ADD, BK.SUB, BK.MUL, BK.MIN, BK.MAX)}
BINARY_DTYPES[BK.DIV] = FLOATS
BINARY_DTYPES.update({k: (*FLOATS, *INTS, "u8", "bool") for k in
                      (BK.EQ, BK.NE, BK.LT, BK.LE, BK.GT, BK.GE)})
BINARY_DTYPES.update({k: ("bool",) for k in (BK.AND, BK.OR, BK.XOR)})
UNARY_DTYPES = {k: (*FLOATS, *INTS, "u8") for k in
                (UK.NEG, UK.ABS, UK.CEIL, UK.ROUND, UK.RELU, UK.SQUARE)}
UNARY_DTYPES.update({k: FLOATS for k in (*TRANSCENDENTAL, UK.SQRT)})
UNARY_DTYPES[UK.LOGICAL_NOT] = ("bool",)
assert set(BINARY_DTYPES) == set(BK) and set(UNARY_DTYPES) == set(UK)


def _ordered(x: np.ndarray, dt: str) -> np.ndarray:
    """Sign-magnitude bits to a monotone integer line (-0 and +0 both 0)."""
    bits = x.view(UINT[dt]).astype(np.int64)
    top = np.int64(1) << (8 * x.dtype.itemsize - 1)
    mag = bits & (top - 1)
    return np.where(bits & top, -mag, mag)


def _pos_qnan_bits(dt: str) -> int:
    return int(to_bits(cast(np.array([np.nan], np.float32), dt))[0])


def _compare(kind, dt: str, ours: np.ndarray, theirs: np.ndarray, args=()) -> None:
    """Assert ``ours`` matches torch's ``theirs``; count the documented divergences."""
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    if ours.dtype.kind in "biu":
        bad = ours != theirs
        assert not bad.any(), (kind, dt, ours[bad][:5], theirs[bad][:5])
        return
    on, tn = np.isnan(ours.astype(np.float32)), np.isnan(theirs.astype(np.float32))
    assert (on == tn).all(), (kind, dt, ours[on != tn][:5], theirs[on != tn][:5])
    ob, tb = ours.view(UINT[dt]), theirs.view(UINT[dt])
    assert (ob[on] == _pos_qnan_bits(dt)).all(), "a NaN result is not the positive qNaN"
    DIVERGENCES[(kind.value, dt, "nan_bits")] += int((ob[on] != tb[on]).sum())
    diff = (ob != tb) & ~on
    if kind in ULP_KINDS:
        ulp = np.abs(_ordered(ours, dt) - _ordered(theirs, dt))[~on]
        m = int(ulp.max()) if ulp.size else 0
        MAX_ULP[(kind.value, dt)] = max(MAX_ULP[(kind.value, dt)], m)
        assert m <= 1, (kind, dt, m)
        DIVERGENCES[(kind.value, dt, "ulp1")] += int((ulp == 1).sum())
        diff &= ~(np.abs(_ordered(ours, dt) - _ordered(theirs, dt)) == 1)
    if kind in (BK.MIN, BK.MAX):
        a, b = np.broadcast_arrays(*args)
        zeros = (a.astype(np.float32) == 0) & (b.astype(np.float32) == 0) & (
            np.signbit(a.astype(np.float32)) != np.signbit(b.astype(np.float32)))
        # torch returns one of the zeros (which one depends on its scalar / vectorized path);
        # the reference orders -0 < +0.
        DIVERGENCES[(kind.value, dt, "minmax_zero")] += int((diff & zeros).sum())
        diff &= ~zeros
    assert not diff.any(), (kind, dt, ours[diff][:5], theirs[diff][:5],
                            [x[diff][:5] for x in np.broadcast_arrays(*args)] if args else ())


def check_binary(kind, a, b):
    dt = next(k for k, v in NP.items() if v == a.dtype)
    ours = binary(kind, a, b)
    assert isinstance(ours, np.ndarray)
    theirs = from_torch(TORCH_BINARY[kind](to_torch(a), to_torch(b)))
    _compare(kind, dt, ours, theirs, (a, b))


def check_unary(kind, x):
    dt = next(k for k, v in NP.items() if v == x.dtype)
    ours = unary(kind, x)
    assert isinstance(ours, np.ndarray)
    theirs = from_torch(TORCH_UNARY[kind](to_torch(x)))
    _compare(kind, dt, ours, theirs, (x,))


# ---------------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------------
def specials(dt: str) -> np.ndarray:
    npdt = NP[dt]
    if dt == "bool":
        return np.array([False, True])
    if npdt.kind in "iu":
        info = np.iinfo(npdt)
        vals = [0, 1, 2, 3, 7, 100, info.max, info.max - 1, info.min, info.min + 1]
        if npdt.kind == "i":
            vals += [-1, -2, -3, -100]
        return np.array(vals, dtype=np.int64).astype(npdt)
    fi = ml_dtypes.finfo(npdt)
    base = [0.0, 1.0, 0.5, 1.5, 2.5, 3.5, 0.25, 2.0, 3.0, 10.0, 1e-3, 88.7, 100.0, 128.0, 150.0,
            float(fi.max), float(fi.tiny), float(fi.smallest_subnormal),
            float(fi.tiny) - float(fi.smallest_subnormal), float(fi.eps), 1 + float(fi.eps),
            np.inf]
    vals = np.array(base + [-v for v in base] + [np.nan], np.float32)
    return cast(vals, dt)


def random_bits(dt: str, n: int, rng) -> np.ndarray:
    npdt = NP[dt]
    if dt == "bool":
        return rng.integers(0, 2, n).astype(bool)
    raw = rng.integers(0, 256, n * npdt.itemsize, dtype=np.uint8)
    return raw.view(npdt)


@st.composite
def arrays(draw, dt: str, shape):
    npdt = NP[dt]
    n = int(np.prod(shape, dtype=np.int64))
    sp = specials(dt)
    picks = draw(st.lists(st.one_of(
        st.integers(0, len(sp) - 1).map(lambda i: sp[i : i + 1]),
        st.binary(min_size=npdt.itemsize, max_size=npdt.itemsize).map(
            lambda b: np.frombuffer(b, np.uint8).copy().view(npdt) if dt != "bool"
            else np.array([b[0] & 1], bool))), min_size=n, max_size=n))
    flat = np.concatenate(picks) if picks else np.zeros(0, npdt)
    return flat.astype(npdt).reshape(shape)


SHAPES = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4)


# ---------------------------------------------------------------------------------------------
# (a) cross-checks against torch
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(BK), ids=lambda k: k.value)
@given(data=st.data())
def test_binary_matches_torch(kind, data):
    dt = data.draw(st.sampled_from(BINARY_DTYPES[kind]), "dtype")
    (sa, sb), _ = data.draw(SHAPES, "shapes")
    a = data.draw(arrays(dt, sa), "a")
    b = data.draw(arrays(dt, sb), "b")
    check_binary(kind, a, b)


@pytest.mark.parametrize("kind", list(UK), ids=lambda k: k.value)
@given(data=st.data())
def test_unary_matches_torch(kind, data):
    dt = data.draw(st.sampled_from(UNARY_DTYPES[kind]), "dtype")
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=5), "shape")
    check_unary(kind, data.draw(arrays(dt, shape), "x"))


@pytest.mark.parametrize("kind", list(BK), ids=lambda k: k.value)
def test_binary_special_pairs_and_random_bits_match_torch(kind):
    """Every pair of special values, plus 20,000 random bit-pattern pairs, per dtype."""
    rng = np.random.default_rng(1234)
    for dt in BINARY_DTYPES[kind]:
        sp = specials(dt)
        check_binary(kind, sp[:, None], sp[None, :])
        check_binary(kind, random_bits(dt, 20_000, rng), random_bits(dt, 20_000, rng))


def test_i8_binary_exhaustive_matches_torch():
    a = np.arange(-128, 128, dtype=np.int8)
    for kind in BK:
        if "i8" in BINARY_DTYPES[kind]:
            check_binary(kind, a[:, None], a[None, :])


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("kind", [k for k in UK if k is not UK.LOGICAL_NOT],
                         ids=lambda k: k.value)
def test_unary_exhaustive_16bit_matches_torch(kind, dt):
    """Every bf16 / f16 bit pattern."""
    check_unary(kind, np.arange(65536, dtype=np.uint32).astype(np.uint16).view(NP[dt]))


@pytest.mark.parametrize("kind", [k for k in UK if k is not UK.LOGICAL_NOT],
                         ids=lambda k: k.value)
def test_unary_specials_and_random_f32_ints_match_torch(kind):
    rng = np.random.default_rng(99)
    for dt in UNARY_DTYPES[kind]:
        check_unary(kind, specials(dt))
        check_unary(kind, random_bits(dt, 50_000, rng))


# ---------------------------------------------------------------------------------------------
# transcendentals: within 1 ulp of a float64 computation (exact single rounding of it)
# ---------------------------------------------------------------------------------------------
F64 = {UK.EXP: np.exp, UK.LOG: np.log, UK.EXP2: np.exp2, UK.LOG2: np.log2,
       UK.RSQRT: lambda x: 1.0 / np.sqrt(x), UK.SQRT: np.sqrt}


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("kind", sorted(ULP_KINDS, key=lambda k: k.value),
                         ids=lambda k: k.value)
def test_transcendental_is_float64_rounded_once(kind, dt):
    """(sqrt too: the float64 sqrt rounded once is the correctly rounded f32 / lowp sqrt.)"""
    rng = np.random.default_rng(7)
    x = np.concatenate([specials(dt), random_bits(dt, 30_000, rng)])
    ours = unary(kind, x)
    with np.errstate(all="ignore"):
        v = F64[kind](x.astype(np.float32).astype(np.float64))
    # The result is a neighbour of the float64 value on the dtype's grid (within 1 ulp) ...
    with np.errstate(all="ignore"):
        v32 = v.astype(np.float32)
    lo = cast(np.nextafter(v32, np.float32(-np.inf)), dt).astype(np.float64)
    hi = cast(np.nextafter(v32, np.float32(np.inf)), dt).astype(np.float64)
    r = ours.astype(np.float64)
    fin = np.isfinite(v) & np.isfinite(r)
    assert ((r[fin] >= np.minimum(lo, hi)[fin]) | (r[fin] == v[fin])).all()
    assert ((r[fin] <= np.maximum(lo, hi)[fin]) | (r[fin] == v[fin])).all()
    # ... and exactly the round-to-nearest-even of it, with NaN exactly where float64 gives NaN.
    assert (np.isnan(r) == np.isnan(v)).all()
    ref = round_f64_once(v, DType(dt))
    assert (to_bits(ref) == to_bits(ours)).all()


def test_round_f64_once_is_a_single_rounding():
    """bf16: a value just above a tie must round up, though f32 RNE would land on the tie."""
    one = 1.0
    tie = one + 2.0**-8  # halfway between bf16 1 and 1 + 2^-7
    for v, want in [(tie + 2.0**-40, one + 2.0**-7), (tie - 2.0**-40, one), (tie, one),
                    (one + 3 * 2.0**-8, one + 2.0**-6)]:
        got = round_f64_once(np.array([v]), DType.BF16)
        assert float(got.astype(np.float32)[0]) == want, (v, got)
    # f16 subnormals and underflow.
    got = round_f64_once(np.array([2.0**-25 + 2.0**-60, 2.0**-25, 2.0**-40]), DType.F16)
    assert list(got.astype(np.float64)) == [2.0**-24, 0.0, 0.0]


# ---------------------------------------------------------------------------------------------
# (b) planted values for the decisions
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", (*INTS, "u8"))
def test_integer_wraparound(dt):
    npdt = NP[dt]
    info = np.iinfo(npdt)
    mx, mn = np.array([info.max], npdt), np.array([info.min], npdt)
    one = np.array([1], npdt)
    with np.errstate(all="raise"):  # no numpy overflow warning escapes
        assert binary(BK.ADD, mx, one)[0] == info.min
        assert binary(BK.SUB, mn, one)[0] == info.max
        assert binary(BK.MUL, mx, np.array([2], npdt))[0] == np.array(-2).astype(npdt)
        assert unary(UK.NEG, mn)[0] == mn[0]
        assert unary(UK.ABS, mn)[0] == mn[0]
        assert unary(UK.SQUARE, mx)[0] == np.array(1).astype(npdt)
        s = binary(BK.ADD, np.array(info.max, npdt), np.array(1, npdt))  # rank 0
    assert s.dtype == npdt and s.shape == () and s == info.min
    for r in (binary(BK.ADD, mx, one), unary(UK.ABS, mn), unary(UK.RELU, mn)):
        assert r.dtype == npdt


@pytest.mark.parametrize("dt", FLOATS)
def test_min_max_order_signed_zeros_and_propagate_nan(dt):
    z = cast(np.array([-0.0, 0.0], np.float32), dt)
    nz, pz = z[:1], z[1:]
    for a, b in [(nz, pz), (pz, nz)]:
        assert not np.signbit(binary(BK.MAX, a, b).astype(np.float32))[0]
        assert np.signbit(binary(BK.MIN, a, b).astype(np.float32))[0]
    nan = cast(np.array([np.nan, -np.nan], np.float32), dt)
    one = cast(np.array([1.0, 1.0], np.float32), dt)
    for kind in (BK.MIN, BK.MAX):
        for r in (binary(kind, nan, one), binary(kind, one, nan)):
            assert (to_bits(r) == _pos_qnan_bits(dt)).all()


def test_min_max_signed_zero_differs_from_numpy_and_torch():
    """Documents why the order is decided explicitly: on equal zeros numpy returns the second
    operand and torch (scalar path) the first, so each gives max = -0 for one operand order."""
    nz, pz = np.float32([-0.0]), np.float32([0.0])
    assert np.signbit(np.maximum(pz, nz))[0]
    assert np.signbit(torch.maximum(torch.tensor(nz), torch.tensor(pz)).numpy())[0]
    assert not np.signbit(binary(BK.MAX, nz, pz))[0]


@pytest.mark.parametrize("dt", FLOATS)
def test_round_half_to_even_and_ceil(dt):
    x = cast(np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -0.0, 0.49999997], np.float32), dt)
    r = unary(UK.ROUND, x).astype(np.float32)
    want = np.float32([0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 4.0, -0.0, 0.0])
    assert (r == want).all() and (np.signbit(r) == np.signbit(want)).all()
    c = unary(UK.CEIL, cast(np.array([-0.5, 0.5, -0.0, -1.0], np.float32), dt)).astype(np.float32)
    assert list(c) == [0.0, 1.0, 0.0, -1.0] and list(np.signbit(c)) == [True, False, True, True]


@pytest.mark.parametrize("dt", FLOATS)
def test_nan_comparisons(dt):
    nan = cast(np.array([np.nan], np.float32), dt)
    for other in (nan, cast(np.array([1.0], np.float32), dt)):
        for a, b in [(nan, other), (other, nan)]:
            for kind in (BK.EQ, BK.LT, BK.LE, BK.GT, BK.GE):
                assert not binary(kind, a, b)[0]
            assert binary(BK.NE, a, b)[0]
    z = cast(np.array([-0.0, 0.0], np.float32), dt)
    assert binary(BK.EQ, z[:1], z[1:])[0] and not binary(BK.LT, z[:1], z[1:])[0]


@pytest.mark.parametrize("dt", FLOATS)
def test_relu_negative_zero_and_nan_results(dt):
    x = cast(np.array([-0.0, -3.0, np.nan, 2.0], np.float32), dt)
    r = unary(UK.RELU, x)
    assert np.signbit(r.astype(np.float32)[0]) and r.astype(np.float32)[1] == 0
    assert not np.signbit(r.astype(np.float32)[1])
    assert to_bits(r)[2] == _pos_qnan_bits(dt)
    # Every created or propagated NaN is the positive quiet NaN (D21).
    inf = cast(np.array([np.inf], np.float32), dt)
    neg_nan = cast(np.array([-np.nan], np.float32), dt)
    for r in (binary(BK.SUB, inf, inf), binary(BK.ADD, neg_nan, inf), unary(UK.NEG, neg_nan),
              unary(UK.SQRT, -inf), unary(UK.LOG, -inf), unary(UK.RSQRT, neg_nan)):
        assert to_bits(r)[0] == _pos_qnan_bits(dt)


def test_rsqrt_and_log_at_zero():
    z = np.float32([-0.0, 0.0])
    assert list(unary(UK.RSQRT, z)) == [-np.inf, np.inf]
    assert list(unary(UK.LOG, z)) == [-np.inf, -np.inf]


def test_lowp_arithmetic_rounds_once_from_f32():
    a = cast(np.float32([1.0]), "bf16")
    b = cast(np.float32([2.0**-8]), "bf16")  # 1 + 2^-8 is a bf16 tie: rounds to even (1)
    assert binary(BK.ADD, a, b).astype(np.float32)[0] == 1.0
    big = cast(np.float32([3e38]), "bf16")
    assert np.isinf(binary(BK.ADD, big, big).astype(np.float32)[0])


def test_rejected_combinations_raise():
    from tilefoundry.semantics.evaluator.registry import EvaluationError

    with pytest.raises(EvaluationError):
        binary(BK.DIV, np.int32([1]), np.int32([1]))
    with pytest.raises(EvaluationError):
        binary(BK.AND, np.int32([1]), np.int32([1]))
    with pytest.raises(EvaluationError):
        unary(UK.EXP, np.int32([1]))


def test_report_divergences():
    """Runs last in file order: prints the divergence counts gathered above (pytest -s)."""
    print("\nDIVERGENCES from torch:", {k: v for k, v in DIVERGENCES.items() if v})
    print("MAX ULP vs torch:", dict(MAX_ULP))


@pytest.mark.parametrize("dt", ["fp8e4m3", "fp8e5m2", "f8e8m0"])
def test_fp8_dtypes_widen_op_round(dt):
    """Not torch-checked: fp8 / f8e8m0 follow widen–op–round and the float64 single rounding."""
    x = cast(np.float32([0.5, 2.0, 3.0, 448.0, np.nan]), dt)
    w = x.astype(np.float32)
    with np.errstate(all="ignore"):
        want = cast(w * w, dt)
        want_exp = round_f64_once(np.exp(w.astype(np.float64)), DType(dt))
    nan = np.isnan(w)
    assert (to_bits(binary(BK.MUL, x, x))[~nan] == to_bits(want)[~nan]).all()
    assert (to_bits(unary(UK.EXP, x)) == to_bits(want_exp)).all()
