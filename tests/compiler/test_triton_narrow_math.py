"""The Triton renderer's fast f32 paths for narrow-dtype math (``render_triton.math_narrow_f32``,
softmax under ``TileConfig.narrow_f32``), judged by the oracle on every bit pattern.

``semantics/ulp.py``, lemma (B): "An implementation that widens to f32, computes with an f32
error of E ulp32 and rounds once to the dtype returns a value within **1 ulp** of the correctly
rounded result whenever E < 2^(23−p)". These paths rely on it; the test runs them in Triton's
interpreter (the CI path; ``benchmarks/bench_gpu.py`` and the conformance tiers run them on the
GPU) over every bf16 / f16 pattern and rows built to reach the subnormal range, where a flushing
``exp`` would leave the budget.
"""

from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

# Triton's interpreter is chosen when triton is first imported (triton_backend._interpret_mode)
if "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from narrow_rows import rms_rows, softmax_rows

from tilefoundry.compiler import kir
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.compiler.triton_backend import TRITON_TILES, TritonBackend
from tilefoundry.oracle.compare import check
from tilefoundry.semantics.dsl import parse_module

NP = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}

SOURCE = """
N = DimVar("N", 1, 1 << 20)
R = DimVar("R", 1, 1 << 10)

@func
def f_exp(x: Tensor[(N,), {dt}]) -> Tensor[(N,), {dt}]:
    return exp(x)

@func
def f_sigmoid(x: Tensor[(N,), {dt}]) -> Tensor[(N,), {dt}]:
    return sigmoid(x)

@func
def f_silu(x: Tensor[(N,), {dt}]) -> Tensor[(N,), {dt}]:
    return silu(x)

@func
def f_softmax(x: Tensor[(R, N), {dt}]) -> Tensor[(R, N), {dt}]:
    return softmax(x, axis=1)

@func
def f_rmsnorm(x: Tensor[(R, N), {dt}], w: Tensor[(N,), {dt}]) -> Tensor[(R, N), {dt}]:
    return rms_norm(x, w, eps=1e-6)

@func
def f_rmsnorm_big_eps(x: Tensor[(R, N), {dt}], w: Tensor[(N,), {dt}]) -> Tensor[(R, N), {dt}]:
    return rms_norm(x, w, eps=1e20)

@func
def f_rmsnorm_tiny_eps(x: Tensor[(R, N), {dt}], w: Tensor[(N,), {dt}]) -> Tensor[(R, N), {dt}]:
    return rms_norm(x, w, eps=1e-29)
"""


def _module(dt: str):
    return parse_module(SOURCE.format(dt=dt))  # the DSL's own names need no env


@pytest.fixture(scope="module", autouse=True)
def _interpreter():
    TritonBackend(device="interpret")  # sets TRITON_INTERPRET in this process


def _every_pattern(dt: str) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint16).view(NP[dt])


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("fn", ["f_exp", "f_sigmoid", "f_silu"])
def test_fast_narrow_math_meets_the_budget_on_every_pattern(dt: str, fn: str) -> None:
    mod = _module(dt)
    x = _every_pattern(dt)
    comp = tf_compile(mod, fn, [x.shape], "triton", cfg=TRITON_TILES)
    src = comp.executable.source
    assert "tl.float64" not in src.split("def k_", 1)[1], "the narrow path must not use f64"
    v = check(mod, fn, [x], comp([x]))
    assert v.status == "PASS", v.message[:2000]


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_narrow_f32_softmax_meets_the_budget_down_to_the_subnormals(dt: str) -> None:
    mod = _module(dt)
    x = softmax_rows(dt)
    comp = tf_compile(mod, "f_softmax", [x.shape], "triton", cfg=TRITON_TILES)
    exps = [i for i in kir.iter_instrs(comp.program.kernels()[0].body)
            if isinstance(i, kir.Math)]
    assert exps and all(i.within == dt for i in exps), exps  # the f32 path was taken
    v = check(mod, "f_softmax", [x], comp([x]))
    assert v.status == "PASS", v.message[:2000]


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("fn", ["f_rmsnorm", "f_rmsnorm_big_eps", "f_rmsnorm_tiny_eps"])
def test_narrow_f32_rmsnorm_meets_the_budget_at_both_ends_of_the_range(dt: str, fn: str) -> None:
    """RMSNorm of a narrow dtype in f32 (D279): a bf16 row is scaled by 1/max|x| so its
    squares neither overflow nor underflow; judged against the reference's f64 value."""
    mod = _module(dt)
    x = rms_rows(dt)
    rng = np.random.default_rng(5)
    w = (rng.standard_normal(x.shape[1]) * 2.0).astype(NP[dt])
    w[:4] = np.array([1.0, -1.0, 1e30 if dt == "bf16" else 6e4, 0.0]).astype(NP[dt])
    comp = tf_compile(mod, fn, [x.shape, w.shape], "triton", cfg=TRITON_TILES)
    assert "tl.float64" not in comp.executable.source.split("def k_", 1)[1]
    v = check(mod, fn, [x, w], comp([x, w]))
    assert v.status == "PASS", v.message[:2000]


def test_unscaled_f32_rmsnorm_would_fail_the_huge_bf16_rows() -> None:
    """The scaling is needed: the same rows through the f64-free formula without it (x² in
    f32) overflow to inf and give zeros where the reference has finite values."""
    mod = _module("bf16")
    x = rms_rows("bf16")
    w = np.ones(x.shape[1], ml_dtypes.bfloat16)
    xf = x.astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        ms = (xf * xf).mean(axis=1, keepdims=True, dtype=np.float32)
        y = xf * (np.float32(1.0) / np.sqrt(ms + np.float32(1e-6)))
    v = check(mod, "f_rmsnorm", [x, w], y.astype(ml_dtypes.bfloat16))
    assert v.status == "FAIL"


def test_a_flushing_exp_would_fail_the_subnormal_rows() -> None:
    """The subnormal guard is needed: with it replaced by a plain ``tl.exp`` whose tiny
    results are flushed (what the GPU's ``ex2.approx.ftz`` does), bf16 exp FAILs."""
    mod = _module("bf16")
    x = _every_pattern("bf16")
    comp = tf_compile(mod, "f_exp", [x.shape], "triton", cfg=TRITON_TILES)
    out = comp([x]).astype(np.float32)
    flushed = np.where(np.abs(out) < np.float32(2.0 ** -126), np.float32(0.0), out)
    v = check(mod, "f_exp", [x], flushed.astype(ml_dtypes.bfloat16))
    assert v.status == "FAIL"


MM = """
M = DimVar("M", 1, 1 << 16)
K = DimVar("K", 1, 1 << 16)
N = DimVar("N", 1, 1 << 16)

@func
def mm(a: Tensor[(M, K), {dt}], b: Tensor[(K, N), {dt}]) -> Tensor[(M, N), {dt}]:
    return matmul(a, b, allow_reassociation=True)
"""


@pytest.mark.parametrize("dt", ["bf16", "f16", "fp8e4m3", "fp8e5m2"])
@pytest.mark.parametrize("mkn", [(40, 200, 72), (130, 33, 17), (128, 128, 128), (40, 200, 17)])
def test_the_tensor_core_dot_path_is_admitted_with_ragged_edges(dt: str, mkn) -> None:
    """Matmul tiles with reassociation admitted render to ``tl.dot`` on operand tiles the
    kernel loads itself (edges +0): in the interpreter (exact f32 widenings) every output is
    in the admitted set, at M / N / K edges that do not divide the 128 x 128 x 64 tile."""
    import tilefoundry.semantics.dsl as dsl

    env = {k: getattr(dsl, k) for k in dir(dsl) if not k.startswith("_")}
    env.update(dsl.DTYPE_NAMES)
    mod = parse_module(MM.format(dt=dt), env)
    m, k, n = mkn
    npdt = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "fp8e4m3": ml_dtypes.float8_e4m3fn,
            "fp8e5m2": ml_dtypes.float8_e5m2}[dt]
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k), np.float32).astype(npdt)
    b = rng.standard_normal((k, n), np.float32).astype(npdt)
    comp = tf_compile(mod, "mm", [a.shape, b.shape], "triton", cfg=TRITON_TILES)
    kernel = comp.executable.source.split("def k_", 1)[1]
    assert "tl.dot(" in kernel
    # whole row-major operands whose rows are multiples of 16 bytes take the persistent TMA
    # kernel (D408); the others (here N = 17: a 34- or 17-byte row) the generic tile path
    tma = all(x * {"bf16": 2, "f16": 2}.get(dt, 1) % 16 == 0 for x in (k, n))
    assert ("tl.make_tensor_descriptor(" in kernel) == tma, kernel
    if tma:
        v = check(mod, "mm", [a, b], comp([a, b]))
        assert v.status == "PASS", v.message[:2000]
        return
    if k > 64:  # a K loop: it carries the 2-D accumulator, not a per-step reshape of it
        assert "acc=t_acc2" in kernel and "tl.reshape(tl.broadcast_to(v" not in \
            kernel.split("for t_tile", 1)[1], kernel
    # the scalar path's operand loads are not rendered beside the tensor-core tiles
    assert kernel.count("tl.load(") == 2, kernel
    # masks only along axes the tiles do not cover exactly
    assert ("mask=" in kernel) == any(x % t for x, t in zip(mkn, (128, 64, 128), strict=True)), kernel
    v = check(mod, "mm", [a, b], comp([a, b]))
    assert v.status == "PASS", v.message[:2000]
