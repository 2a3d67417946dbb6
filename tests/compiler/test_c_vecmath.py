"""The SIMD C renderer's vector f32 ``exp`` (``compiler/c_vecmath.py``, D400) and its vector row
reductions (``compiler/render_c_vreduce.py``, D401), run through the ``simd`` target.

* ``tf__expf_v`` for bf16 / f16 arguments: every one of the 65,536 patterns, judged by the
  oracle (1-ulp budget) and within 1 ulp of the reference evaluator; for f32 arguments a seeded
  sample of 2^20 values over [-104, 89] plus the edges (the overflow and underflow thresholds
  and their neighbours, powers of two, subnormal results, ±0, ±inf, NaN): within 1 ulp of
  the correctly rounded value (the f32 budget is 3), the oracle PASS; the same source with one
  polynomial coefficient changed leaves the budget (the test can see an error).
* The narrow softmax and RMSNorm the ``simd`` target now computes in f32 (``SIMD_TILES``):
  rows reaching the subnormal range, inf, NaN, judged by the oracle.
* The vector max / min / abs_max / sum give the scalar form's bits on rows with NaNs of both
  signs, signed zeros and infinities.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from narrow_rows import rms_rows, softmax_rows

from tilefoundry.compiler import kir, render_c
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.compiler.simd_backend import SIMD_TILES, SimdExecutable
from tilefoundry.oracle.compare import check, ulp_distance
from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.evaluator.core import evaluate

NP = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}

SOURCE = """
N = DimVar("N", 1, 1 << 22)
R = DimVar("R", 1, 1 << 10)

@func
def f_exp(x: Tensor[(N,), {dt}]) -> Tensor[(N,), {dt}]:
    return exp(x)

@func
def f_softmax(x: Tensor[(R, N), {dt}]) -> Tensor[(R, N), {dt}]:
    return softmax(x, axis=1)

@func
def f_rmsnorm(x: Tensor[(R, N), {dt}], w: Tensor[(N,), {dt}]) -> Tensor[(R, N), {dt}]:
    return rms_norm(x, w, eps=1e-6)

@func
def rowmax(x: Tensor[(R, N), {dt}]) -> Tensor[(R,), {dt}]:
    return reduce_max(x, axes=(1,), keepdim=False)

@func
def rowmin(x: Tensor[(R, N), {dt}]) -> Tensor[(R,), {dt}]:
    return reduce_min(x, axes=(1,), keepdim=False)

@func
def rowabsmax(x: Tensor[(R, N), {dt}]) -> Tensor[(R,), {dt}]:
    return reduce_abs_max(x, axes=(1,), keepdim=False)

@func
def rowsum(x: Tensor[(R, N), {dt}]) -> Tensor[(R,), {dt}]:
    return reduce_sum(x, axes=(1,), keepdim=False, policy="unordered_tree")
"""


def _module(dt: str):
    return parse_module(SOURCE.format(dt=dt))


def _kernel_source(comp) -> str:
    return comp.executable.source.split("static void tf_k0", 1)[1]


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_vector_exp_meets_the_narrow_budget_on_every_pattern(dt: str) -> None:
    mod = _module(dt)
    x = np.arange(1 << 16, dtype=np.uint16).view(NP[dt])
    comp = tf_compile(mod, "f_exp", [x.shape], "simd")
    kern = _kernel_source(comp)
    assert "tf__expf_v(" in kern and "TF_EXP(" not in kern  # the vector form, no libm call
    out = comp([x])
    v = check(mod, "f_exp", [x], out)
    assert v.status == "PASS", v.message[:2000]
    d = ulp_distance(np.asarray(evaluate(mod, "f_exp", [x])), np.asarray(out))
    assert d.max() <= 1


def _f32_arguments() -> np.ndarray:
    rng = np.random.default_rng(20261204)
    sample = rng.uniform(-104.0, 89.0, 1 << 20).astype(np.float32)
    f = np.float32
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 88.72283, 88.72284, 88.7228394,
             -87.33654, -103.97208, -103.972084, -103.97207, -104.0, 89.0, 1e-8, -1e-8,
             float(np.finfo(f).tiny), float(np.finfo(f).smallest_subnormal), 1e30, -1e30]
    pows = [2.0 ** k for k in range(-20, 7)]
    base = np.array(edges + pows + [-p for p in pows], np.float32)
    near = np.concatenate([np.nextafter(base, f(np.inf)), np.nextafter(base, f(-np.inf))])
    subn = rng.uniform(-103.98, -87.3, 1 << 14).astype(np.float32)  # subnormal results
    return np.concatenate([sample, base, near, subn]).astype(np.float32)


def test_vector_exp_f32_within_one_ulp_of_the_correctly_rounded_value() -> None:
    mod = _module("f32")
    x = _f32_arguments()
    comp = tf_compile(mod, "f_exp", [x.shape], "simd")
    assert "tf__expf_v(" in _kernel_source(comp)
    out = comp([x])
    ref = np.asarray(evaluate(mod, "f_exp", [x]))
    d = ulp_distance(ref, np.asarray(out))
    assert d.max() <= 1, (x[d.argmax()], ref[d.argmax()], out[d.argmax()])
    assert np.isnan(out[np.isnan(x)]).all() and (out[x == -np.inf] == 0).all()
    v = check(mod, "f_exp", [x], out)
    assert v.status == "PASS", v.message[:2000]


def test_a_wrong_coefficient_leaves_the_f32_budget() -> None:
    """The f32 check can fail: the same program built with the cubic coefficient of the
    polynomial off by 1 % is rejected."""
    mod = _module("f32")
    x = _f32_arguments()
    comp = tf_compile(mod, "f_exp", [x.shape], "simd")
    good = "0.166666671633720397949219f"
    src = comp.executable.source
    assert src.count(good) == 1
    bad = SimdExecutable(comp.program, src.replace(good, "0.165f"))
    out = bad.run([x])
    v = check(mod, "f_exp", [x], out)
    assert v.status == "FAIL"


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_simd_narrow_softmax_in_f32_down_to_the_subnormals(dt: str) -> None:
    mod = _module(dt)
    x = softmax_rows(dt)
    comp = tf_compile(mod, "f_softmax", [x.shape], "simd")
    exps = [i for k in comp.program.kernels() for i in kir.iter_instrs(k.body)
            if isinstance(i, kir.Math)]
    assert exps and all(i.within == dt for i in exps), exps  # the f32 path was taken
    assert "double" not in _kernel_source(comp).split("void tf_program", 1)[0]
    v = check(mod, "f_softmax", [x], comp([x]))
    assert v.status == "PASS", v.message[:2000]


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_simd_narrow_rmsnorm_in_f32_at_both_ends_of_the_range(dt: str) -> None:
    mod = _module(dt)
    x = rms_rows(dt)
    rng = np.random.default_rng(5)
    w = (rng.standard_normal(x.shape[1]) * 2.0).astype(NP[dt])
    w[:4] = np.array([1.0, -1.0, 1e30 if dt == "bf16" else 6e4, 0.0]).astype(NP[dt])
    comp = tf_compile(mod, "f_rmsnorm", [x.shape, w.shape], "simd")
    assert SIMD_TILES.narrow_f32 and "double" not in _kernel_source(comp).split(
        "void tf_program", 1)[0]  # the f32 form (D279), not the f64 one
    v = check(mod, "f_rmsnorm", [x, w], comp([x, w]))
    assert v.status == "PASS", v.message[:2000]


def _awkward_rows() -> np.ndarray:
    """Rows of 256 lanes (a power of two: no edge mask, which keeps the scalar form) holding
    NaNs of both signs, signed zeros, infinities and ties between them."""
    rng = np.random.default_rng(41)
    n = 256
    rows = [rng.standard_normal(n).astype(np.float32) * s for s in (1.0, 1e30, 1e-30)]
    z = np.zeros(n, np.float32)
    mixed_zero = z.copy()
    mixed_zero[::3] = -0.0
    rows += [z.copy(), -z, mixed_zero]
    nan_pos = rng.standard_normal(n).astype(np.float32)
    nan_pos[[5, 77]] = np.nan
    nan_neg = rng.standard_normal(n).astype(np.float32)
    nan_neg[[9]] = -np.float32(np.nan)
    nan_neg[[150]] = np.nan
    both = rng.standard_normal(n).astype(np.float32)
    both[250] = -np.float32(np.nan)  # a NaN in the last vector
    both[3] = np.inf
    infs = np.where(rng.random(n) < 0.5, np.float32(np.inf), np.float32(-np.inf))
    rows += [nan_pos, nan_neg, both, infs.astype(np.float32)]
    return np.stack(rows)


@pytest.mark.parametrize("entry", ["rowmax", "rowmin", "rowabsmax", "rowsum"])
def test_vector_reductions_give_the_scalar_forms_bits(entry: str, monkeypatch) -> None:
    mod = _module("f32")
    x = _awkward_rows()
    comp = tf_compile(mod, entry, [x.shape], "simd")
    assert "tf__v8_load(&" in _kernel_source(comp)  # the vector loop was rendered
    fast = np.asarray(comp([x]))
    monkeypatch.setattr(render_c.KernelC, "vec_math", False)
    scalar_comp = tf_compile(mod, entry, [x.shape], "simd")
    assert "tf__v8_load(&" not in _kernel_source(scalar_comp)
    slow = np.asarray(scalar_comp([x]))
    same = fast.view(np.uint32) == slow.view(np.uint32)
    if entry == "rowsum":
        # x86 addition returns its first operand's NaN and GCC may swap the operands of a
        # commutative +, so a sum's NaN sign is not fixed by the C source (the oracle takes
        # every NaN as equal); max / min select the first NaN met explicitly: bits there
        same |= np.isnan(fast) & np.isnan(slow)
    assert same.all(), (fast, slow)
    v = check(mod, entry, [x], fast)
    assert v.status == "PASS", v.message[:2000]
