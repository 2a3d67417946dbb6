"""The ULP budget table (semantics/ulp.py): completeness, lookups and errors, the printed form,
the unit (``ulp_distance``), and the derivations — every f32 entry is recomputed here from the
analysis in the module docstring, and lemma B (narrow formats) is checked numerically."""

from __future__ import annotations

import math

import ml_dtypes
import mpmath
import numpy as np
import pytest

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.dtypes import DType, cast, from_bits
from tilefoundry.semantics.evaluator.math import round_f64_once
from tilefoundry.semantics.ulp import (
    BUDGETS,
    DTYPES,
    OPS,
    VERSION,
    budget,
    format_table,
    ulp_distance,
)

REQUIRED_OPS = ("exp", "log", "exp2", "log2", "rsqrt", "sigmoid", "tanh", "gelu_tanh",
                "gelu_none", "silu", "softmax", "layernorm", "rmsnorm", "rope")
REQUIRED_DTYPES = (DType.F32, DType.F16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2)


# ---------------------------------------------------------------------------------------------
# the table as data
# ---------------------------------------------------------------------------------------------
def test_every_required_entry_exists_and_is_a_positive_float():
    assert set(REQUIRED_OPS) <= set(OPS)
    assert set(REQUIRED_DTYPES) <= set(DTYPES)
    assert set(BUDGETS) == {(o, d) for o in OPS for d in DTYPES}
    for key, b in BUDGETS.items():
        assert isinstance(b, float) and b >= 1.0 and math.isfinite(b), key


def test_table_is_read_only_and_versioned():
    with pytest.raises(TypeError):
        BUDGETS[("exp", DType.F32)] = 1.0  # type: ignore[index]
    assert isinstance(VERSION, str) and VERSION


def test_narrow_dtypes_get_one_ulp():
    """Lemma B: every f32 bound is below 2^(23-p) f32 ulps for every narrow format."""
    for op in OPS:
        for dt in DTYPES:
            if dt is not DType.F32:
                assert budget(op, dt) == 1.0, (op, dt)
        assert budget(op, DType.F32) < 2 ** (23 - 11), op  # f16's threshold, the tightest


@pytest.mark.parametrize(("op", "dtype", "pattern"), [
    ("expm1", DType.F32, r"op 'expm1' and dtype f32"),
    ("exp", DType.I32, r"op 'exp' and dtype i32"),
    ("softmax", "f4e2m1", r"op 'softmax' and dtype f4e2m1"),
    ("rope", "f33", r"op 'rope' and dtype f33"),
])
def test_missing_entry_raises_naming_op_and_dtype(op, dtype, pattern):
    with pytest.raises(InvalidArgumentError, match=pattern):
        budget(op, dtype)


def test_budget_accepts_names():
    assert budget("exp", "f32") == budget("exp", DType.F32) == 3.0
    assert budget("tanh", "bf16") == 1.0


def test_format_table_lists_every_entry():
    text = format_table()
    lines = text.splitlines()
    assert VERSION in lines[0]
    header = lines[1].split()
    assert header == ["op", *[str(d) for d in DTYPES]]
    rows = {ln.split()[0]: [float(v) for v in ln.split()[1:]] for ln in lines[2:]}
    assert list(rows) == list(OPS)
    for op, vals in rows.items():
        assert vals == [BUDGETS[(op, d)] for d in DTYPES]


# ---------------------------------------------------------------------------------------------
# derivations (module docstring): recomputed from the primitives, not read back from the table
# ---------------------------------------------------------------------------------------------
OPENCL = {"exp": 3, "exp2": 3, "log": 3, "log2": 3, "rsqrt": 2, "tanh": 5, "erfc": 16}
N_MAX_LOG2 = 16  # the table assumes n <= 2^16


def _rel(ulps: float) -> float:
    """Lemma A: k ulp is at most 2k relative units u."""
    return 2.0 * ulps


def test_primitive_entries_are_the_opencl_figures():
    for op in ("exp", "exp2", "log", "log2", "rsqrt", "tanh"):
        assert budget(op, DType.F32) == OPENCL[op]


def test_sigmoid_silu_derivation():
    e = _rel(OPENCL["exp"])  # 6u
    sigmoid = max(e / 2 + 1 + 1, e + 1 + 1, e)  # x >= 0, -88 <= x < 0, x < -88
    silu = max(e / 2 + 1 + 1, e + 1 + 1, e + 1 + e + 1)  # ..., x < -88: (x·e)·e
    assert budget("sigmoid", DType.F32) == math.ceil(sigmoid) == 8
    assert budget("silu", DType.F32) == math.ceil(silu) == 14


def _smallest_normal_point(y, x0):
    """x < 0 with |y(x)| = 2^-126 (the largest argument magnitude with a normal result)."""
    return mpmath.findroot(lambda x: -y(x) - mpmath.mpf(2) ** -126, x0)


def test_gelu_derivations():
    mp = mpmath
    with mp.workdps(40):
        c0 = 2 * mp.sqrt(2 / mp.pi)
        c1 = c0 * mp.mpf("0.044715")

        def z(x):
            return x * (c0 + c1 * x * x)

        xs = _smallest_normal_point(lambda x: x / (1 + mp.exp(-z(x))), -10)
        # argument 5u amplified by |z|(1 - sigma) -> |z|; sigma's own 14u (exp(z/2)^2 split); ·x
        bound_tanh = 5 * abs(z(xs)) + _rel(OPENCL["exp"]) * 2 + 2
        assert budget("gelu_tanh", DType.F32) == math.ceil(bound_tanh) == 463
        # the sigma condition number stays below 0.3 for z >= 0: the left tail dominates
        assert max(float(t * (1 - 1 / (1 + mp.exp(-t)))) for t in np.linspace(0, 20, 401)) < 0.3

        def phi(x):
            return mp.erfc(-x / mp.sqrt(2)) / 2

        xn = _smallest_normal_point(lambda x: x * phi(x), -13)
        t = -xn / mp.sqrt(2)
        kappa = 2 * t * mp.exp(-t * t) / (mp.sqrt(mp.pi) * mp.erfc(t))
        bound_none = 2 * kappa + _rel(OPENCL["erfc"]) + 1  # 2u argument, erfc 32u, ·x u
        assert budget("gelu_none", DType.F32) == math.ceil(bound_none) == 381
        assert abs(float(kappa) - (2 * float(t) ** 2 + 1)) < 0.05 * float(kappa)


def test_normalization_and_rope_derivations():
    n_log = N_MAX_LOG2 * math.log(2)
    lev = N_MAX_LOG2
    e = _rel(OPENCL["exp"])
    softmax = (126 * math.log(2) + n_log) + e + (e + n_log + lev) + 1
    assert budget("softmax", DType.F32) == math.ceil(softmax) == 139
    rms = (lev + 3) / 2 + _rel(OPENCL["rsqrt"]) + 2
    assert budget("rmsnorm", DType.F32) == math.ceil(rms) == 16
    ln = lev + 8 + (3 * lev + 7) / 2
    assert budget("layernorm", DType.F32) == math.ceil(ln) == 52
    # the docstring's widening factor κ_b·((L+1)(κ_c + ρ) + (L+5)/2 + 6) + 1 is ln at κ = 1
    assert 1 * ((lev + 1) * (1 + 1) + (lev + 5) / 2 + 6) + 1 == ln
    assert budget("rope", DType.F32) == 2  # Kahan's 2x2 algorithm: relative error <= 2u


def test_kahan_2x2_bound_holds_for_rope_shaped_sums():
    """The rope f32 budget cites Jeannerod–Louvet–Muller: Kahan's fma algorithm for a·b + c·d
    is within 2u. Check it (f32, fma emulated exactly in float64) on near-cancelling inputs."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal(20000).astype(np.float32)
    b = rng.standard_normal(20000).astype(np.float32)
    c = (a * np.float32(1 + 2.0 ** -12)).astype(np.float32)  # a·b + c·(−b) nearly cancels
    d = (-b).astype(np.float32)

    def fma32(x, y, z):  # x·y is exact in float64; the f64 sum adds <= 2^-53 (in the slack)
        return (x.astype(np.float64) * y + z.astype(np.float64)).astype(np.float32)

    w = (c * d).astype(np.float32)
    err = fma32(c, d, -w)
    f = fma32(a, b, w)
    y = (f + err).astype(np.float32)
    exact = a.astype(np.float64) * b + c.astype(np.float64) * d
    nz = exact != 0
    rel = np.abs(y[nz] - exact[nz]) / np.abs(exact[nz])
    assert rel.max() <= 2 * 2.0 ** -24 * (1 + 2.0 ** -20)
    naive = (a * b + c * d).astype(np.float32)  # the plain formula breaks on cancellation
    assert (np.abs(naive[nz] - exact[nz]) / np.abs(exact[nz])).max() > 2 * 2.0 ** -24


@pytest.mark.parametrize("dt", ["f16", "bf16", "fp8e4m3", "fp8e5m2"])
def test_lemma_b_f32_error_below_half_a_narrow_ulp_stays_within_one_ulp(dt):
    """An f32 value within 2^(23-p) - 1 f32 ulps of the exact value rounds to within one ulp of
    the correctly rounded narrow result; 4·2^(23-p) f32 ulps can cost two (negative control)."""
    p = {"f16": 11, "bf16": 8, "fp8e4m3": 4, "fp8e5m2": 3}[dt]
    fi = ml_dtypes.finfo({"f16": np.float16, "bf16": ml_dtypes.bfloat16,
                          "fp8e4m3": ml_dtypes.float8_e4m3fn,
                          "fp8e5m2": ml_dtypes.float8_e5m2}[dt])
    rng = np.random.default_rng(p)
    n = 20000
    lo, hi = math.log2(float(fi.smallest_subnormal)), math.log2(float(fi.max)) - 1
    y = np.exp2(rng.uniform(lo, hi, n)) * rng.choice([-1.0, 1.0], n)
    want = round_f64_once(y, DType(dt))
    y32 = y.astype(np.float32)  # within half an f32 ulp of y

    def perturbed(steps):
        k = rng.integers(-steps, steps + 1, n)
        bits = y32.view(np.uint32).astype(np.int64)
        sign = np.where(y32 < 0, -1, 1)
        return from_bits(((bits + sign * k).astype(np.uint32)), "f32")

    inside = cast(perturbed(2 ** (23 - p) - 1), dt)
    assert ulp_distance(inside, want).max() <= 1
    outside = cast(perturbed(4 * 2 ** (23 - p)), dt)
    assert ulp_distance(outside, want).max() >= 2


def test_lemma_b_prime_f8e8m0_model_softmax_is_nan_only_at_the_least_value():
    """Lemma B′: the table's f32 softmax model (max, sub, exp, pairwise sum, div, one rounding)
    on f8e8m0 rows is within 1 ulp of the reference, or NaN where the reference is f8e8m0's
    least value 2^-127 (the model's f32 value underflowed to 0). Rows of random f8e8m0 values:
    the NaN case occurs, and nowhere else (``nan_admitted`` is exactly where it may)."""
    from tilefoundry.semantics.dsl import parse_module
    from tilefoundry.semantics.evaluator.core import evaluate
    from tilefoundry.semantics.ulp import nan_admitted

    rng = np.random.default_rng(6)
    n = 4000
    codes = np.concatenate([rng.integers(0, 255, (n, 4)),  # anything
                            rng.integers(110, 136, (n, 4))])  # differences near exp's underflow
    x = from_bits(codes.astype(np.uint8), "f8e8m0")
    m = parse_module(f"""
@func
def main(x: Tensor[({2 * n}, 4), f8e8m0]):
    return softmax(x, axis=-1)

module(main)
""")
    ref = evaluate(m, "main", [x])
    xf = x.astype(np.float32)
    e = np.exp(xf - xf.max(axis=-1, keepdims=True))
    y = e / ((e[:, 0] + e[:, 1]) + (e[:, 2] + e[:, 3]))[:, None]
    assert y.dtype == np.float32
    model = cast(y, "f8e8m0")
    nan = np.isnan(model.astype(np.float32))
    assert nan.sum() > 100  # the case the lemma is about is exercised
    assert (nan_admitted(ref)[nan]).all()  # NaN only where the reference is 2^-127
    assert ulp_distance(model[~nan], ref[~nan]).max() <= 1
    assert (y[nan] == 0).all()


# ---------------------------------------------------------------------------------------------
# the unit
# ---------------------------------------------------------------------------------------------
def test_ulp_distance_on_the_ordered_line():
    f = np.float32
    tiny = f(1.4e-45)
    a = np.array([0.0, -0.0, 1.0, tiny, np.inf, np.nan, np.nan, 1.0], f)
    b = np.array([-0.0, 0.0, np.nextafter(f(1.0), f(2)), -tiny, np.finfo(f).max, np.nan, 1.0,
                  -1.0], f)
    d = ulp_distance(a, b)
    assert list(d[:6]) == [0.0, 0.0, 1.0, 2.0, 1.0, 0.0]
    assert d[6] == np.inf and d[7] == 2 * 0x3F800000


def test_ulp_distance_narrow_formats():
    e4 = cast(np.float32([448.0, 0.0, 1.0]), "fp8e4m3")
    e4b = cast(np.float32([416.0, -0.0, 1.125]), "fp8e4m3")
    assert list(ulp_distance(e4, e4b)) == [1.0, 0.0, 1.0]
    s = cast(np.float32([1.0, 2.0 ** -127]), "f8e8m0")  # unsigned: codes are the line
    t = cast(np.float32([4.0, 2.0 ** -126]), "f8e8m0")
    assert list(ulp_distance(s, t)) == [2.0, 1.0]
    with pytest.raises(InvalidArgumentError, match="share one float dtype"):
        ulp_distance(np.float32([1.0]), cast(np.float32([1.0]), "bf16"))
    with pytest.raises(InvalidArgumentError, match="shapes differ"):
        ulp_distance(np.float32([1.0]), np.float32([1.0, 2.0]))
