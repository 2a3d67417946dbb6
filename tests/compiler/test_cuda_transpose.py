"""The CUDA backend's transpose mapping (``compiler/render_cuda_transpose.py``, D551): a copy
whose load and store walk different axes with unit strides moves through shared memory in
32 x 32 tiles. Run on the host emulation (every block's two phases, the barrier between them)
and compared bit for bit with the reference evaluator at ragged shapes, in every storage width;
the cases it must decline keep their mapping."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest
from compiler_helpers import MATMUL_SRC

pytest.importorskip("cuda.bindings.nvrtc")

from tilefoundry.compiler import cuda_build, render_cuda
from tilefoundry.compiler.cuda_backend import CUDA_TILES
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.evaluator.core import evaluate

SRC = '''
R = DimVar("R", 1, 4096)
C = DimVar("C", 1, 4096)
B = DimVar("B", 1, 64)

@func
def t2(x: Tensor[(R, C), {dt}]) -> Tensor[(C, R), {dt}]:
    return transpose(x, (1, 0))

@func
def t3(x: Tensor[(B, R, C), {dt}]) -> Tensor[(B, C, R), {dt}]:
    return transpose(x, (0, 2, 1))

@func
def t3_outer(x: Tensor[(B, R, C), {dt}]) -> Tensor[(C, R, B), {dt}]:
    return transpose(x, (2, 1, 0))

@func
def t_slice(x: Tensor[(R, C), {dt}]) -> Tensor[(3, R), {dt}]:
    return transpose(x, (1, 0))[1:4]

@func
def rows(x: Tensor[(R, C), {dt}]) -> Tensor[(2, C), {dt}]:
    return x[1:3]

@func
def t_add(x: Tensor[(R, C), {dt}]) -> Tensor[(C, R), {dt}]:
    return transpose(x, (1, 0)) + transpose(x, (1, 0))
'''

DTYPES = {"fp8e4m3": ml_dtypes.float8_e4m3fn, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
          "u8": np.uint8, "i8": np.int8, "i64": np.int64}


def _x(dt: str, shape, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt[0] in "iu":
        return rng.integers(-100, 100, shape).astype(DTYPES[dt])
    x = (rng.standard_normal(shape) * 8).astype(np.float32).astype(DTYPES[dt])
    x.reshape(-1)[:3] = np.array([-0.0, np.inf, -np.inf] if dt != "fp8e4m3" else
                                 [-0.0, 448.0, -448.0], np.float32).astype(DTYPES[dt])
    return x


def _run(dt: str, entry: str, shape, seed: int = 0):
    mod = parse_module(SRC.format(dt=dt))
    x = _x(dt, shape, seed)
    comp = tf_compile(mod, entry, [x.shape], "cuda-host", cfg=CUDA_TILES)
    plan = render_cuda.parse_plan(comp.executable.source)
    got = np.asarray(comp([x]))
    ref = np.asarray(evaluate(mod, entry, [x]))
    assert got.shape == ref.shape and got.dtype == ref.dtype
    w = got.dtype.itemsize
    assert np.array_equal(got.view(f"u{w}"), ref.view(f"u{w}")), (entry, dt, shape)
    return [k["mapping"] for k in plan["kernels"].values()], comp


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("shape", [(37, 45), (32, 64), (5, 70), (70, 2)])
def test_a_transpose_is_the_tiled_mapping_and_bit_exact(dt: str, shape) -> None:
    """Ragged tiles both ways (37 x 45: two partial tiles), whole tiles, a short side."""
    maps, comp = _run(dt, "t2", shape, seed=shape[0])
    assert maps == ["transpose"], comp.executable.source[:2000]


@pytest.mark.parametrize("entry,shape", [("t3", (3, 33, 40)), ("t3_outer", (4, 9, 35))])
def test_other_axes_are_one_coordinate_a_block(entry: str, shape) -> None:
    """A batch axis (0, 2, 1), and the outer axes swapped (2, 1, 0): the middle axis is then
    the one walked a coordinate a block."""
    maps, _ = _run("bf16", entry, shape)
    assert maps == ["transpose"]


def test_a_slice_of_a_transpose_is_one_tiled_copy_at_an_offset() -> None:
    """The forwarded slice (D549) reads x through the transposed map from column 1: one kernel,
    the tiled mapping, the load's offset kept."""
    maps, comp = _run("f32", "t_slice", (40, 7))
    assert maps == ["transpose"] and len(comp.program.kernels()) == 1


@pytest.mark.parametrize("entry,shape,why", [
    ("rows", (5, 64), "do not walk two different axes"),  # load and store both along C
    ("t_add", (33, 40), "not a plain copy"),  # the transpose fused into an add
    ("t2", (1, 64), "do not walk two different axes"),  # a unit axis of extent 1
])
def test_what_it_declines_keeps_its_mapping_and_says_why(entry: str, shape, why: str) -> None:
    maps, comp = _run("f32", entry, shape)
    assert "transpose" not in maps
    from tilefoundry.compiler.render_cuda_transpose import plan_transpose

    class _Probe:  # what plan_transpose reads of a kernel's renderer
        def __init__(self, kernel):
            self.k, self.snap = kernel, {}

        def parallel_safe(self) -> bool:
            return True

    k = comp.program.kernels()[0]
    plan, no = plan_transpose(_Probe(k))
    assert plan is None and why in no


def test_device_code_builds_to_ptx_with_one_barrier() -> None:
    """NVRTC takes the fp8 transpose to compute_90 PTX: one ``bar.sync`` between the phases,
    the tile in shared memory."""
    mod = parse_module(SRC.format(dt="fp8e4m3"))
    comp = tf_compile(mod, "t2", [(100, 300)], "cuda-host", cfg=CUDA_TILES)
    ptx = cuda_build.build(comp.executable.source, "compute_90").data.decode()
    assert ptx.count("bar.sync") == 1 and ".shared" in ptx


def test_the_fp8_k_major_copy_of_a_matmul_is_tiled() -> None:
    """``fp8_kmajor`` (D489): the K-major copy of B, a byte transpose, now the tiled mapping;
    the matmul after it unchanged (wgmma)."""
    cfg = dataclasses.replace(CUDA_TILES, launch=(("fp8_promote", 128), ("fp8_kmajor", 1)))
    mod = parse_module(MATMUL_SRC.format(dt="fp8e4m3"))
    comp = tf_compile(mod, "mm", [(64, 160), (160, 72)], "cuda-host", cfg=cfg)
    plan = render_cuda.parse_plan(comp.executable.source)
    assert [k["mapping"] for k in plan["kernels"].values()] == ["transpose", "wgmma"]
