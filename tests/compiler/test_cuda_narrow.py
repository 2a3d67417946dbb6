"""The CUDA targets' narrow-dtype row kernels in f32 (``CUDA_TILES.narrow_f32``, D279 / D280).

``semantics/ulp.py``, lemma (B): "An implementation that widens to f32, computes with an f32
error of E ulp32 and rounds once to the dtype returns a value within **1 ulp** of the correctly
rounded result whenever E < 2^(23−p)". RMSNorm and softmax of bf16 / f16 are lowered in f32 for
the CUDA targets (the lowering the Triton backend uses); the C-family spelling computes the
exp of an f32 value with CUDA's double library rounded once (within f32's budget, so within the
narrow one). Judged here on the host emulation (``cuda-host``) with rows at both ends of the
range; the conformance tiers run the same kernels on the GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from narrow_rows import NP, rms_rows, softmax_rows

pytest.importorskip("cuda.bindings.nvrtc")

from tilefoundry.compiler import kir
from tilefoundry.compiler.cuda_backend import CUDA_TILES
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.oracle.compare import check
from tilefoundry.semantics.dsl import parse_module

SOURCE = """
N = DimVar("N", 1, 1 << 20)
R = DimVar("R", 1, 1 << 10)

@func
def f_softmax(x: Tensor[(R, N), {dt}]) -> Tensor[(R, N), {dt}]:
    return softmax(x, axis=1)

@func
def f_rmsnorm(x: Tensor[(R, N), {dt}], w: Tensor[(N,), {dt}]) -> Tensor[(R, N), {dt}]:
    return rms_norm(x, w, eps=1e-6)

@func
def f_exp(x: Tensor[(N,), {dt}]) -> Tensor[(N,), {dt}]:
    return exp(x)

@func
def f_sigmoid(x: Tensor[(N,), {dt}]) -> Tensor[(N,), {dt}]:
    return sigmoid(x)

@func
def f_silu(x: Tensor[(N,), {dt}]) -> Tensor[(N,), {dt}]:
    return silu(x)
"""


def _module(dt: str):
    return parse_module(SOURCE.format(dt=dt))  # the DSL's own names need no env


def _f64_free(comp) -> bool:
    """No f64 value in any kernel of the lowered program (the narrow f32 form was taken)."""
    bm = comp.program.buffer_map()
    return all(t.dtype != "f64" for k in comp.program.kernels()
               for t in kir.kernel_types(k, bm).values())


def test_cuda_tiles_ask_for_the_narrow_f32_forms() -> None:
    assert CUDA_TILES.narrow_f32


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_narrow_softmax_on_cuda_meets_the_budget_down_to_the_subnormals(dt: str) -> None:
    mod = _module(dt)
    x = softmax_rows(dt)
    comp = tf_compile(mod, "f_softmax", [x.shape], "cuda-host")
    exps = [i for i in kir.iter_instrs(comp.program.kernels()[0].body)
            if isinstance(i, kir.Math)]
    assert exps and all(i.within == dt for i in exps), exps  # the f32 path was taken
    v = check(mod, "f_softmax", [x], comp([x]))
    assert v.status == "PASS", v.message[:2000]


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_narrow_rmsnorm_on_cuda_meets_the_budget_at_both_ends_of_the_range(dt: str) -> None:
    mod = _module(dt)
    x = rms_rows(dt)
    rng = np.random.default_rng(5)
    w = (rng.standard_normal(x.shape[1]) * 2.0).astype(NP[dt])
    w[:4] = np.array([1.0, -1.0, 1e30 if dt == "bf16" else 6e4, 0.0]).astype(NP[dt])
    comp = tf_compile(mod, "f_rmsnorm", [x.shape, w.shape], "cuda-host")
    assert _f64_free(comp)
    v = check(mod, "f_rmsnorm", [x, w], comp([x, w]))
    assert v.status == "PASS", v.message[:2000]


# -- D519: exp / sigmoid / silu of bf16 / f16 by the f32 narrow forms (c_vecmath.CUDA_MATH) -------
def _every_pattern(dt: str) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint16).view(NP[dt])


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("fn", ["exp", "sigmoid", "silu"])
def test_narrow_math_on_cuda_meets_the_budget_on_every_pattern(dt: str, fn: str) -> None:
    """The host emulation's narrow form (tf__expf_v for h, a division) on all 65,536 patterns;
    the GPU's form (ex2.approx.ftz / rcp.approx.ftz) is the Triton GPU form, emulated at the
    hardware's worst error in tests/compiler/test_triton_rows.py."""
    mod = _module(dt)
    x = _every_pattern(dt)
    comp = tf_compile(mod, f"f_{fn}", [x.shape], "cuda-host")
    body = comp.executable.source.split("__global__", 1)[1]
    assert f"tf__{fn}_nf(" in body and "64(" not in body and "(double)" not in body
    v = check(mod, f"f_{fn}", [x], comp([x]))
    assert v.status == "PASS", v.message[:2000]


def test_a_wrong_constant_in_the_narrow_form_fails(monkeypatch) -> None:
    """The check above can fail: h = exp(-0.55 |w|) instead of exp(-|w|/2) leaves the budget."""
    from tilefoundry.compiler import c_vecmath

    bad = c_vecmath.CUDA_MATH.replace("tf__expf_v((a) * 0.5f)", "tf__expf_v((a) * 0.55f)")
    assert bad != c_vecmath.CUDA_MATH
    monkeypatch.setattr(c_vecmath, "CUDA_MATH", bad)
    mod = _module("bf16")
    x = _every_pattern("bf16")
    comp = tf_compile(mod, "f_silu", [x.shape], "cuda-host")
    assert "0.55f" in comp.executable.source
    assert check(mod, "f_silu", [x], comp([x])).status == "FAIL"


def test_f32_exp_on_cuda_is_the_vector_exp_not_the_narrow_form() -> None:
    """An f32 exp not marked ``within`` keeps the f32 budget: tf__expf_v (<= 1 ulp32, D400)."""
    src = """
N = DimVar("N", 1, 1 << 20)

@func
def f(x: Tensor[(N,), f32]) -> Tensor[(N,), f32]:
    return exp(x)
"""
    mod = parse_module(src)
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-104, 89, 4096), [0.0, -0.0, np.inf, -np.inf, np.nan,
                                                     88.7, -87.3, -100.0]]).astype(np.float32)
    comp = tf_compile(mod, "f", [x.shape], "cuda-host")
    body = comp.executable.source.split("__global__", 1)[1]
    assert "tf__expf_v(" in body and "_nf(" not in body
    v = check(mod, "f", [x], comp([x]))
    assert v.status == "PASS", v.message[:2000]
