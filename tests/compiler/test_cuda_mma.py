"""The CUDA backend's tensor-core matmul kernels (``compiler/render_cuda_mma.py``, D280).

The host emulation (``cuda-host``) runs the same source with each thread's ``mma`` step computed
as the four accumulators its m16n8 fragment owns: the staging, edges, strides, seed, fragment
map and epilogue are judged here by the oracle's admitted set for a reassociated dot ("any
bracketing of IEEE f32 additions of the exact products"); NVRTC builds the device code (the PTX
``mma.sync``) to PTX and to an sm_90 cubin (ptxas), which needs no GPU. The tensor core's own
accumulation is judged on the device (the conformance tiers, ``benchmarks/bench_gpu.py``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from compiler_helpers import MATMUL_SRC

pytest.importorskip("cuda.bindings.nvrtc")

from tilefoundry.compiler import cuda_build, render_cuda
from tilefoundry.compiler.cuda_backend import CUDA_TILES
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.oracle.compare import check
from tilefoundry.semantics.dsl import parse_module

NP = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "fp8e4m3": ml_dtypes.float8_e4m3fn,
      "fp8e5m2": ml_dtypes.float8_e5m2, "f32": np.float32}

SRC = MATMUL_SRC + """
@func
def mm_ordered(a: Tensor[(M, K), {dt}], b: Tensor[(K, N), {dt}]) -> Tensor[(M, N), {dt}]:
    return matmul(a, b, allow_reassociation=False)
"""


@pytest.fixture(autouse=True)
def _mma_sync(monkeypatch) -> None:
    """These tests judge the ``mma.sync`` kernel (D280): the wgmma kernel that takes its bf16 /
    f16 cases on sm_90 (D520, ``tests/compiler/test_cuda_wgmma.py``) is switched off."""
    monkeypatch.setenv("TF_CUDA_WGMMA", "0")


def _mod(dt: str):
    return parse_module(SRC.format(dt=dt))  # the DSL's own names need no env


def _arrays(dt: str, shapes, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s, np.float32).astype(NP[dt]) for s in shapes]


def _mappings(comp) -> list[str]:
    plan = render_cuda.parse_plan(comp.executable.source)
    return [k["mapping"] for k in plan["kernels"].values()]


def _judged(dt: str, entry: str, shapes, seed: int = 0):
    mod = _mod(dt)
    xs = _arrays(dt, shapes, seed)
    comp = tf_compile(mod, entry, [x.shape for x in xs], "cuda-host", cfg=CUDA_TILES)
    v = check(mod, entry, xs, comp(xs))
    return comp, v


@pytest.mark.parametrize("dt", ["bf16", "f16", "fp8e4m3", "fp8e5m2"])
@pytest.mark.parametrize("mkn", [(200, 72, 136), (128, 64, 128), (48, 40, 200), (256, 96, 32)])
def test_tensor_core_kernel_is_admitted_at_ragged_edges(dt: str, mkn) -> None:
    """M / N / K edges that do not divide the 128 x 128 x 32 tile (staged as +0), an exact
    tile, and tiles smaller than 128: the kernel is the tensor-core mapping and every output
    is in the admitted set."""
    m, k, n = mkn
    comp, v = _judged(dt, "mm", [(m, k), (k, n)])
    assert _mappings(comp) == ["mma"]
    assert v.status == "PASS", v.message[:2000]


@pytest.mark.parametrize("entry,shapes", [
    ("mm", [(130, 64), (64, 72)]),  # M past one 128 tile by 2 rows
    ("mm_tn", [(72, 130), (136, 72)]),  # A M-contiguous, B K-contiguous: both other paths
    ("bmm", [(3, 64, 48), (3, 48, 40)]),  # a batch axis of block 1 and its strides
])
def test_tensor_core_kernel_layouts(entry: str, shapes) -> None:
    comp, v = _judged("bf16", entry, shapes, seed=5)
    assert "mma" in _mappings(comp)
    assert v.status == "PASS", v.message[:2000]


def test_extreme_values_stay_admitted() -> None:
    """Products near f32's overflow and underflow, infinities and NaN in the operands: the
    edge zeros never meet an infinity (both operands are zero past the K edge)."""
    rng = np.random.default_rng(11)
    m, k, n = 64, 40, 48
    a = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-60, 60, (m, k))).astype(NP["bf16"])
    b = (rng.standard_normal((k, n)) * 2.0 ** rng.integers(-60, 60, (k, n))).astype(NP["bf16"])
    a[3, 5], b[7, 2], a[10, 39], b[39, 47] = np.inf, -np.inf, np.nan, np.inf
    mod = _mod("bf16")
    comp = tf_compile(mod, "mm", [a.shape, b.shape], "cuda-host", cfg=CUDA_TILES)
    assert _mappings(comp) == ["mma"]
    v = check(mod, "mm", [a, b], comp([a, b]))
    assert v.status == "PASS", v.message[:2000]


def test_only_reassociated_narrow_matmuls_take_tensor_cores() -> None:
    """The K-ordered contract, f32 operands and a tile too small for 8 warps keep the scalar
    mappings (and still pass)."""
    for dt, entry, shapes in [("bf16", "mm_ordered", [(64, 40), (40, 64)]),
                              ("f32", "mm", [(64, 40), (40, 64)]),
                              ("bf16", "mm", [(8, 40), (40, 24)])]:
        comp, v = _judged(dt, entry, shapes, seed=2)
        assert "mma" not in _mappings(comp), (dt, entry)
        assert v.status == "PASS", v.message[:2000]


def test_device_code_builds_with_nvrtc_and_ptxas() -> None:
    """The device branch (the PTX ``mma.sync`` and its fragment loads) compiles to PTX and,
    through ptxas, to an sm_90 cubin; the accumulators and fragments stay in registers (no
    local memory) and each K tile issues 4 x 4 x 2 MMAs per warp at 128 x 128 x 32."""
    mod = _mod("bf16")
    comp = tf_compile(mod, "mm", [(1024, 1024), (1024, 1024)], "cuda-host", cfg=CUDA_TILES)
    src = comp.executable.source
    ptx = cuda_build.build(src, cuda_build.PTX_ARCH).data
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 32
    # the fragments through ldmatrix (per K tile: 4 A tiles x 2 k16 steps, 2 B pairs x 2), and
    # two barriers per K tile (one shared stage) plus the prologue's
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 12
    assert ptx.count("bar.sync") == 3
    assert ".local" not in ptx
    assert len(cuda_build.build(src, "sm_90").data) > 0


def test_two_shared_stages_stay_admitted(monkeypatch) -> None:
    """The two-stage K loop (``MMA_STAGES = 2``: one barrier per K tile) is correct on the host
    emulation at ragged edges and keeps one barrier per K tile in its PTX."""
    from tilefoundry.compiler import render_cuda_mma

    monkeypatch.setattr(render_cuda_mma, "MMA_STAGES", 2)
    comp, v = _judged("bf16", "mm", [(200, 72), (72, 136)], seed=4)
    assert _mappings(comp) == ["mma"]
    assert v.status == "PASS", v.message[:2000]
    ptx = cuda_build.build(comp.executable.source, cuda_build.PTX_ARCH).data
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert ptx.count("bar.sync") == 2 and "((kt + 1) & 1)" in comp.executable.source


def test_the_judging_catches_a_wrong_fragment_map(monkeypatch) -> None:
    """The judging above can fail: the same kernel with the epilogue's fragment-to-column map
    off (each thread's two columns swapped, every store still in bounds) is rejected."""
    from tilefoundry.compiler import render_cuda_mma

    real = render_cuda_mma.render_mma
    right = "2 * t + (r & 1);"

    def swapped(kc, p):
        return [line.replace(right, "2 * t + ((r & 1) ^ 1);") if "gn =" in line else line
                for line in real(kc, p)]

    monkeypatch.setattr(render_cuda_mma, "render_mma", swapped)
    comp, v = _judged("bf16", "mm", [(64, 72), (72, 64)], seed=9)
    assert _mappings(comp) == ["mma"]
    assert "2 * t + ((r & 1) ^ 1);" in comp.executable.source
    assert v.status == "FAIL"
