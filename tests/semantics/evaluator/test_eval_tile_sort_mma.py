"""The tile-family evaluators (extensions of the HIR catalog): Sort and Mma against independent
models — Python loops over ``fractions.Fraction`` with the order / rounding written out here —,
the Tile design's worked examples, ``matmul(a, b) == mma(a, b, zeros)`` bit for bit, and the
admitted sets (a TF32 / bf16 input substitution is outside them)."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from tilefoundry.conformance.backend import reference_check
from tilefoundry.semantics.evaluator import families  # noqa: F401  (registers)
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.registry import EvaluationError
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.matmul import mma_admits
from tilefoundry.semantics.ops import Cast, MatMul, Mma, Sort, TopK, Zeros
from tilefoundry.semantics.types import TensorType

F32, F16, BF16, I32 = DType.F32, DType.F16, DType.BF16, DType.I32
E4M3, E5M2 = DType.FP8E4M3, DType.FP8E5M2
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -3.0, np.inf, -np.inf, np.nan, 1.0, -0.0]


def _module(params, body) -> Module:
    return Module((Function("f", tuple(params), body, None),))


def _var(name, a: np.ndarray, dt: DType) -> Var:
    return Var(name, TensorType(a.shape, dt))


def run_sort(x: np.ndarray, dt: DType, op: Sort):
    v = _var("x", x, dt)
    return evaluate(_module([v], Call(op, (v,))), "f", [x])


def _as_float(v) -> float:
    return float(np.asarray(v).astype(np.float64))  # ml_dtypes widening: exact


# =============================================================================================
# Sort: an independent model
# =============================================================================================
def model_sort(row: list, desc: bool, nan: str) -> list[int]:
    """Source indices of one fiber: NaN placement, then the exact value (Fraction: -0 == +0),
    descending or ascending, then the source index — a Python sort on an explicit key."""
    def key(i):
        v = row[i]
        isnan = isinstance(v, float) and math.isnan(v)
        group = (0 if isnan else 1) if nan == "first" else (1 if isnan else 0)
        if isnan:
            return (group, 0, i)
        f = Fraction(v) if not math.isinf(v) else (Fraction(10) ** 400 * (1 if v > 0 else -1))
        return (group, -f if desc else f, i)
    return sorted(range(len(row)), key=key)


@pytest.mark.parametrize("dt", [F32, BF16, F16, E4M3, E5M2, I32])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sort_matches_the_fraction_model(dt, seed):
    rng = np.random.default_rng(seed)
    pool = [v for v in SPECIAL if dt.is_float or (math.isfinite(v) and v == int(v))]
    if dt is E4M3:
        pool = [v for v in pool if not math.isinf(v)]  # E4M3FN has no infinity
    raw = rng.choice(np.array(pool, np.float64), (3, 9))
    x = raw.astype(FORMATS[dt].storage) if dt.is_float else raw.astype(np.int32)
    for desc in (False, True):
        for nan in ("last", "first"):
            for axis in (0, 1):
                vals, idx = run_sort(x, dt, Sort(axis, desc, nan))
                xm = np.moveaxis(x, axis, -1)
                im, vm = np.moveaxis(idx, axis, -1), np.moveaxis(vals, axis, -1)
                for r in range(xm.shape[0]):
                    row = [_as_float(v) if dt.is_float else int(v) for v in xm[r]]
                    want = model_sort(row, desc, nan)
                    assert im[r].tolist() == want, (dt, desc, nan, axis, row)
                    # the values are the source elements' bits (zero signs, NaN payloads)
                    got_b = np.ascontiguousarray(vm[r]).view(np.uint8)
                    assert np.array_equal(got_b, np.ascontiguousarray(xm[r][want]).view(np.uint8))
                assert idx.dtype == np.int64


def test_sort_design_example_descending_stable_nan_last():
    """Tile design: "auto sorted = sort(x, feature, descending, stable_ties(), nan::last);" on
    x = [2, NaN, -0, 3, +0, 3]: hand-derived [3 (3), 3 (5), 2 (0), -0 (2), +0 (4), NaN (1)]."""
    x = np.array([[2.0, np.nan, -0.0, 3.0, 0.0, 3.0]], np.float32)
    vals, idx = run_sort(x, F32, Sort(1, descending=True, nan="last"))
    assert idx.tolist() == [[3, 5, 0, 2, 4, 1]]
    assert np.signbit(vals[0, 3]) and not np.signbit(vals[0, 4]) and np.isnan(vals[0, 5])


def test_sort_zero_signs_tie_by_source_index_both_directions():
    """Tile design: ties are broken "by original index, including ties between the two zero
    signs" — -0 and +0 keep their source order ascending and descending alike (D223)."""
    x = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0], np.float32)
    _, up = run_sort(x, F32, Sort())
    _, down = run_sort(x, F32, Sort(descending=True))
    assert up.tolist() == [5, 0, 1, 2, 3, 4] and down.tolist() == [4, 0, 1, 2, 3, 5]


def test_sort_nan_error_is_the_sort_nan_run_time_check():
    """Tile design: the implemented sort "requires non-NaN inputs": nan='error' raises the
    run-time check sort_nan (the reference backend reports it by name); without a NaN it
    sorts like nan='last'."""
    x = np.array([[1.0, np.nan], [0.0, -1.0]], np.float32)
    with pytest.raises(EvaluationError, match="1 NaN value") as e:
        run_sort(x, F32, Sort(nan="error"))
    assert reference_check(e.value) == "sort_nan"
    ok = np.array([[1.0, -0.0, 0.0]], np.float32)
    assert run_sort(ok, F32, Sort(nan="error"))[1].tolist() == [[1, 2, 0]]
    i = np.array([3, 1, 2], np.int32)  # no NaN in an integer dtype
    assert run_sort(i, I32, Sort(nan="error"))[1].tolist() == [1, 2, 0]


@pytest.mark.parametrize("largest", [True, False])
def test_topk_is_the_k_prefix_of_sort(largest):
    """Tile design: topk is "a library shorthand" for the Top-K region over the same total key;
    HIR TopK (nan last) equals the first k of Sort(descending=largest, nan='last')."""
    rng = np.random.default_rng(7)
    x = rng.choice(np.array(SPECIAL, np.float32), (4, 10))
    v = _var("x", x, F32)
    tv, ti = evaluate(_module([v], Call(TopK(4, 1, largest), (v,))), "f", [x])
    sv, si = run_sort(x, F32, Sort(1, largest, "last"))
    assert np.array_equal(ti, si[:, :4])
    assert np.array_equal(tv.view(np.uint32), sv[:, :4].view(np.uint32))


# =============================================================================================
# Mma: an independent model
# =============================================================================================
def _f32_round(q: Fraction) -> float:
    """RNE of an exact rational to f32 (finite range), decided by exact comparisons."""
    c = np.float32(float(q))
    best = None
    for cand in (np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))):
        d = abs(Fraction(float(cand)) - q)
        even = int(np.asarray(cand).view(np.uint32)) % 2 == 0
        if best is None or d < best[0] or (d == best[0] and even):
            best = (d, cand)
    return float(best[1])


def _add(x: float, y: float) -> float:
    s = Fraction(x) + Fraction(y)
    if s == 0:  # IEEE: an exact zero sum is +0 unless both addends are -0
        return -0.0 if (math.copysign(1, x) < 0 and math.copysign(1, y) < 0) else 0.0
    return _f32_round(s)


def _mul(x: float, y: float) -> float:
    p = Fraction(x) * Fraction(y)
    if p == 0:
        return math.copysign(0.0, math.copysign(1, x) * math.copysign(1, y))
    return _f32_round(p)


def model_mma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """mma(A, B, C)[m, n] = the K-order fold from C[m, n] of fl32(fl32(a·b)) (finite values)."""
    out = np.zeros(c.shape, np.float32)
    for idx in np.ndindex(c.shape):
        *bt, m, n = idx
        acc = float(c[idx])
        for k in range(a.shape[-1]):
            acc = _add(acc, _mul(_as_float(a[(*bt, m, k)]), _as_float(b[(*bt, k, n)])))
        out[idx] = acc
    return out


def run_mma(a, b, c, dt: DType, op: Mma | None = None):
    op = op if op is not None else Mma()
    va, vb, vc = _var("a", a, dt), _var("b", b, dt), _var("acc", c, F32)
    return evaluate(_module([va, vb, vc], Call(op, (va, vb, vc))), "f", [a, b, c], report=True)


def _lowp(rng, shape, dt: DType) -> np.ndarray:
    v = rng.uniform(-4, 4, shape).astype(np.float32)
    v[rng.random(shape) < 0.1] = -0.0
    return v.astype(FORMATS[dt].storage)


@pytest.mark.parametrize("dt", [F32, F16, BF16, E4M3, E5M2])
@pytest.mark.parametrize("shape", [((), 3, 5, 2), ((2,), 2, 3, 3), ((), 1, 0, 2)])
def test_mma_matches_the_fraction_model(dt, shape):
    batch, m, k, n = shape
    rng = np.random.default_rng(11)
    a, b = _lowp(rng, (*batch, m, k), dt), _lowp(rng, (*batch, k, n), dt)
    c = rng.uniform(-8, 8, (*batch, m, n)).astype(np.float32)
    c[..., 0, 0] = -0.0
    for reassoc in (True, False):
        ev = run_mma(a, b, c, dt, Mma(reassoc))
        want = model_mma(a, b, c)
        assert ev.value.dtype == np.float32
        assert np.array_equal(ev.value.view(np.uint32), want.view(np.uint32)), (dt, shape)
        (_, contract), = ev.contracts
        assert contract.kind == "admitted_set"
        assert contract.policy == ("reassociate" if reassoc else "k_order")


def test_mma_k_order_from_the_accumulator():
    """Tile design: "Disabling reassociation retains the reference K order": acc = 2^24 and four
    products of 1 — each fl(acc + 1) is 2^24 (ties to even), so the K-order result is 2^24 (a
    sum of the products first would give 2^24 + 4). Only the first is admitted without
    reassociation; with it, both are."""
    a, b = np.ones((1, 4), np.float32), np.ones((4, 1), np.float32)
    c = np.full((1, 1), 2.0 ** 24, np.float32)
    assert float(run_mma(a, b, c, F32, Mma(False)).value[0, 0]) == 2.0 ** 24
    other = np.full((1, 1), 2.0 ** 24 + 4, np.float32)
    assert not mma_admits(other, a, b, c, allow_reassociation=False)
    assert mma_admits(other, a, b, c, allow_reassociation=True)


def test_mma_empty_k_returns_the_accumulator_bits():
    a, b = np.zeros((2, 0), np.float16), np.zeros((0, 2), np.float16)
    c = np.array([[-0.0, np.inf], [1.5, -2.0]], np.float32)
    assert np.array_equal(run_mma(a, b, c, F16).value.view(np.uint32), c.view(np.uint32))


@pytest.mark.parametrize("dt", [F32, F16, BF16])
def test_matmul_is_mma_of_zeros_bit_for_bit(dt):
    """Tile design: "auto c = matmul(a, b); // equivalent to mma(a, b, zeros(result_shape))":
    the evaluator's MatMul equals Mma seeded by a Zeros value bit for bit (f32; narrower
    operands: the f32 result rounded once — MatMul's result dtype is its operands')."""
    rng = np.random.default_rng(5)
    a, b = _lowp(rng, (2, 3, 7), dt), _lowp(rng, (2, 7, 4), dt)
    a[0, 0, :] = -0.0  # every product -0: the zeros seed gives +0
    va, vb = _var("a", a, dt), _var("b", b, dt)
    mm = evaluate(_module([va, vb], Call(MatMul(), (va, vb))), "f", [a, b])
    z = Call(Zeros((2, 3, 4), F32), ())
    body = Call(Mma(), (va, vb, z))
    if dt is not F32:
        body = Call(Cast(dt), (body,))
    via = evaluate(_module([va, vb], body), "f", [a, b])
    assert mm.dtype == via.dtype
    assert np.array_equal(mm.view(np.uint8), via.view(np.uint8))
    assert not np.signbit(np.asarray(mm[0, 0, 0]).astype(np.float32))


def _round_to(a: np.ndarray, frac_bits: int) -> np.ndarray:
    if frac_bits == 7:
        return a.astype(ml_dtypes.bfloat16).astype(np.float32)
    u = a.view(np.uint32).astype(np.int64)
    drop = 23 - frac_bits
    q = (u + (1 << (drop - 1)) - 1 + ((u >> drop) & 1)) >> drop << drop
    return q.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("frac_bits", [7, 10])
@pytest.mark.parametrize("reassoc", [True, False])
def test_mma_admitted_set_excludes_reduced_input_precision(frac_bits, reassoc):
    """Tile design: "MMA permits reassociation by default, but does not permit silently reducing
    input precision (for example, substituting TF32 for FP32)" — f32 inputs rounded to TF32
    (10 fraction bits) or bf16 (7) before an f32-accumulating product are outside the admitted
    set even when reassociation is allowed; the reference itself is inside it."""
    rng = np.random.default_rng(13)
    a = rng.uniform(0.5, 1.0, (4, 8)).astype(np.float32)
    b = rng.uniform(0.5, 1.0, (8, 4)).astype(np.float32)
    c = rng.uniform(-1, 1, (4, 4)).astype(np.float32)
    ref = run_mma(a, b, c, F32, Mma(reassoc)).value
    assert mma_admits(ref, a, b, c, allow_reassociation=reassoc)
    bad = model_mma(_round_to(a, frac_bits), _round_to(b, frac_bits), c)
    adm = mma_admits(bad, a, b, c, allow_reassociation=reassoc)
    assert not np.asarray(adm.admitted).any(), adm.detail
