"""The CUDA backend's row mapping (docs/decisions.md D482-D484) without a GPU: the bench's row
programs (RMSNorm, softmax, SwiGLU, residual-add + RMSNorm, softmax with scale and mask) get one
block per row with 16-byte accesses and shuffle reductions at the bench's shapes; other shapes
and reductions keep the block mapping and say why; run through the host emulation (each
butterfly step a phase reading the partner thread's registers) the kernels are judged PASS by
the oracle on adversarial rows (overflowing and subnormal RMSNorm scales, NaN, ±inf, ±0, fully
masked softmax rows, ragged widths); and a planted error in the fast path is caught."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from compiler_helpers import one_op

from tilefoundry.compiler import render_cuda, render_cuda_rows
from tilefoundry.compiler.pipeline import compile
from tilefoundry.oracle.compare import check
from tilefoundry.semantics.ops import Reduce, ReduceKind

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_gpu import FUSED_ENTRIES, ROW_ENTRIES, ROW_SHAPES, _module

HOST_CXX = shutil.which("g++") is not None
BF = ml_dtypes.bfloat16
ENTRIES = ROW_ENTRIES + FUSED_ENTRIES
#: (loads, stores) of each bench program's kernel, all 16-byte
ACCESSES = {"rmsnorm": (2, 1), "softmax_rows": (1, 1), "swiglu": (2, 1), "add_rmsnorm": (3, 2),
            "softmax_scale_mask": (2, 1)}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))


def _shapes(entry: str, r: int, c: int) -> list[tuple[int, ...]]:
    return {"rmsnorm": [(r, c), (c,)], "softmax_rows": [(r, c)], "swiglu": [(r, c), (r, c)],
            "add_rmsnorm": [(r, c), (r, c), (c,)],
            "softmax_scale_mask": [(r, c), (r, c)]}[entry]


def _compiled(entry: str, r: int, c: int):
    return compile(_module(entry), entry, _shapes(entry, r, c), "cuda-host")


def _plan(c) -> dict:
    (k,) = render_cuda.parse_plan(c.executable.source)["kernels"].values()
    return k


# ---------------------------------------------------------------------------------------------
# the mapping chosen
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", ROW_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("entry", ENTRIES)
def test_bench_programs_take_the_row_mapping(entry: str, shape) -> None:
    """At the bench's shapes every bench program is one kernel under the row mapping: every
    load and store of the row a 16-byte access (``TF_LDV`` / ``TF_STV`` of 16 bytes), no
    shared staging of the row (only one warp-partials array per reduction), one barrier per
    reduction, five butterfly steps per reduction, registers only (no global scratch)."""
    c = _compiled(entry, 64, shape[1])
    k = _plan(c)
    assert k["mapping"] == "rows" and k["scratch"] == 0, k
    assert k["why"].startswith("row mapping: one block of "), k["why"]
    src = c.executable.source
    body = src[src.index("/* program"):src.rindex(render_cuda.PLAN_TAG)]
    loads, stores = ACCESSES[entry]
    got_l = set(re.findall(r"TF_LDV\(\(?&?(?:TF_R\()?(tf_\w+)", body))
    got_s = set(re.findall(r"TF_STV\([^;]*?(tf_sw\d+)", body))
    assert (len(got_l), len(got_s)) == (loads, stores), (got_l, got_s)
    assert all(m == "16" for m in re.findall(r"TF_[LS]DV\([^;]*, (\d+)\);", body))
    reduces = 0 if entry == "swiglu" else 2
    assert body.count("TF_SYNC") == reduces
    # five butterfly steps a reduction, five more for a masked sum's any-lane flag
    assert 5 * reduces <= body.count("TF_SHFL_XOR(") <= 10 * reduces
    assert "tf_st_" not in body and "S0 +" not in body
    assert f"__launch_bounds__({k['threads']}, " in body


def test_other_shapes_and_reductions_keep_the_block_mapping(capsys) -> None:
    """Fallbacks, each with its reason: rows too narrow for a warp of 16-byte chunks, tiles of
    two rows, a fold_left sum (its order is one chain), an i32 sum; ``--explain`` prints it."""
    c = _compiled("rmsnorm", 1, 128)
    k = _plan(c)
    assert k["mapping"] == "block" and "row mapping declined: a row of 128 lanes is fewer " \
        "than 32 chunks" in k["why"], k["why"]
    k = _plan(_compiled("softmax_rows", 64, 1000))
    assert k["mapping"] == "block" and "spans 2 tiled axes" in k["why"], k["why"]
    x = np.ones((8, 4096), np.float32)
    m = one_op(Reduce((1,), False, ReduceKind.SUM, "fold_left"), x)
    k = _plan(compile(m, "f", [x.shape], "cuda-host"))
    assert k["mapping"] == "block" and "under fold_left" in k["why"], k["why"]
    xi = np.ones((8, 4096), np.int32)
    m = one_op(Reduce((1,), False, ReduceKind.SUM, "unordered_tree"), xi)
    k = _plan(compile(m, "f", [xi.shape], "cuda-host"))
    assert k["mapping"] == "block" and "reduction of i32" in k["why"], k["why"]
    # switched off, the bench program keeps the block mapping (benchmarks/cuda_rows_sass.py's
    # "before")
    old = render_cuda.KernelCuda.ROWS_MAPPING
    render_cuda.KernelCuda.ROWS_MAPPING = False
    try:
        k = _plan(_compiled("rmsnorm", 64, 4096))
    finally:
        render_cuda.KernelCuda.ROWS_MAPPING = old
    assert k["mapping"] == "block" and "declined: disabled" in k["why"]
    from tilefoundry.cli import main

    spec = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu.py"
    rc = main(["compile", f"{spec}:PROGRAMS", "rmsnorm", "--shape", "8x4096", "--shape",
               "4096", "--target", "cuda-host", "--explain"])
    out = capsys.readouterr().out
    assert rc == 0 and ": rows, 128 threads a block, 8 instance(s)" in out
    assert "why: row mapping: one block of 128 threads per row of 4096 lanes, 4 chunk(s) of 8" \
        " lanes a thread; 2 load(s) and 1 store(s) vectorized; 2 order-free reduction(s)" in out


def test_padded_row_and_kept_words() -> None:
    """D533: a row of 14336 lanes in a block of 16384 gives no thread a chunk past the domain
    (the padding is masked off in every store and reduction), and RMSNorm's widened bf16 row,
    read after both reductions, is held as its load's 16-byte words (4 registers a chunk, not 8
    f32) and widened again where read, so the held state fits 4 chunks a thread: 448 threads,
    not 1,024 (two blocks an SM under the launch bounds). Full rows (4096) are unchanged."""
    k = _plan(_compiled("rmsnorm", 8, 14336))
    assert k["threads"] == 448 and "(2048 padding lanes given no thread), 4 chunk(s)" \
        in k["why"], k["why"]
    src = _compiled("rmsnorm", 8, 14336).executable.source
    body = src[src.index("/* program"):src.rindex(render_cuda.PLAN_TAG)]
    # f32 register arrays of a thread's 32 slots: the scaled square only, not the widened row
    f32_rows = re.findall(r"TF_REG\(float, r\w+, 448, 32\);", body)
    kept = re.findall(r"TF_REG\(uint32_t, tf_pf\w+, 448, 16\);", body)
    assert len(kept) == 2, kept  # x's and w's words: 4 chunks x 4 words each
    assert len(f32_rows) <= 3, f32_rows
    assert "__launch_bounds__(448, 2)" in body
    # softmax keeps exp(x - max) across its sum: its held state is the same as before
    assert _plan(_compiled("softmax_rows", 8, 14336))["threads"] == 448
    k = _plan(_compiled("rmsnorm", 8, 4096))
    assert k["threads"] == 128 and "padding" not in k["why"], k["why"]


# ---------------------------------------------------------------------------------------------
# values through the host emulation, judged by the oracle
# ---------------------------------------------------------------------------------------------
def _adversarial(r: int, c: int, seed: int, scale: float = 1.0) -> np.ndarray:
    """Random rows, then rows that overflow the sum of squares, subnormal rows, NaN, ±inf,
    ±0 and -inf rows (softmax's fully masked row)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((r, c)) * scale).astype(np.float32)
    x[1, :] = 3.0e38 * np.sign(x[1, :] + 0.5)  # |x|² overflows: the scaled path
    x[2, :] = 1e-39 * np.sign(x[2, :])  # subnormal bf16: the tiny-scale path
    x[3, c // 3] = np.nan
    x[4, :] = np.inf
    x[5, 7] = -np.inf
    x[6, :] = 0.0
    x[7, :] = -0.0
    x[8, :] = -np.inf
    x[9, :3] = [3.0e38, -3.0e38, 1e-40]
    return x.astype(BF)


def _inputs(entry: str, r: int, c: int, seed: int) -> list[np.ndarray]:
    x = _adversarial(r, c, seed)
    y = _adversarial(r, c, seed + 1)[::-1].copy()
    w = (np.random.default_rng(seed).standard_normal(c) * 2).astype(BF)
    w[0] = np.inf
    if entry == "rmsnorm":
        return [x, w]
    if entry == "softmax_rows":
        return [x]
    if entry == "swiglu":
        return [x, y]
    if entry == "add_rmsnorm":
        return [x, y, w]
    mask = np.where(np.arange(c)[None, :] <= (np.arange(r)[:, None] * 97 % c), 0.0, -np.inf)
    mask[8, :] = -np.inf  # a fully masked row
    return [x, mask.astype(BF)]


@pytest.mark.skipif(not HOST_CXX, reason="no host C++ compiler for the emulation")
@pytest.mark.parametrize("cols", (4096, 14336, 4000, 4001))
@pytest.mark.parametrize("entry", ENTRIES)
def test_row_mapping_passes_the_oracle(entry: str, cols: int) -> None:
    """Full rows (4096), a padded block (14336 of 16384: the edge-masked chunks are skipped
    whole), a ragged width whose chunks are whole (4000: guarded 16-byte accesses) and one
    whose are not (4001: per-lane accesses inside the chunks): row-mapped (SwiGLU at 4001 is
    not: its tile is not one row), and PASS on the adversarial rows."""
    r = 12
    c = _compiled(entry, r, cols)
    k = _plan(c)
    if not (entry == "swiglu" and cols in (4000, 4001)):
        assert k["mapping"] == "rows", k["why"]
    xs = _inputs(entry, r, cols, seed=cols)
    got = c(xs)
    v = check(_module(entry), entry, xs, got)
    if entry == "swiglu":  # silu of ±3e38 / inf: elements the oracle leaves unjudged; the
        # lanes are independent, so the row mapping gives the lane mapping's bits
        assert v.status in ("PASS", "UNJUDGED"), v.summary()[:500]
        old = render_cuda.KernelCuda.ROWS_MAPPING
        render_cuda.KernelCuda.ROWS_MAPPING = False
        try:
            want = _compiled(entry, r, cols)(xs)
        finally:
            render_cuda.KernelCuda.ROWS_MAPPING = old
        assert np.array_equal(want.view(np.uint16), got.view(np.uint16))
        return
    assert v.status == "PASS", v.summary()[:500]


# ---------------------------------------------------------------------------------------------
# a planted error in the fast path is caught
# ---------------------------------------------------------------------------------------------
@pytest.mark.skipif(not HOST_CXX, reason="no host C++ compiler for the emulation")
@pytest.mark.parametrize("plant", ("butterfly", "lanes", "warps"))
def test_a_planted_error_fails_the_oracle(plant: str, monkeypatch) -> None:
    """The oracle (and the emulation) see the fast path: a butterfly missing its last step (a
    warp's odd lanes left out of the sum and max), two lanes of each chunk swapped on load, or
    the warps' values combined without the last warp, each FAIL on ordinary rows."""
    if plant == "butterfly":
        monkeypatch.setattr(render_cuda_rows, "BUTTERFLY", (16, 8, 4, 2))
    elif plant == "lanes":
        real = render_cuda_rows._extract
        monkeypatch.setattr(render_cuda_rows, "_extract",
                            lambda w, ct, s: real(w, ct, s).replace("tf_v", "(tf_v ^ 1)"))
    else:  # the last warp's value read as the first's
        real_emit = render_cuda_rows.emit_rows

        def emit(kc, segs, out, ind):
            real_emit(kc, segs, out, ind)
            nw = kc.rows.threads // 32
            for i, ln in enumerate(out):
                out[i] = re.sub(r"tf_a\[tf_i\] = (tf_wp\d+)\[tf_i\]",
                                rf"tf_a[tf_i] = \1[tf_i == {nw - 1} ? 0 : tf_i]", ln)

        monkeypatch.setattr(render_cuda_rows, "emit_rows", emit)
    r, cols = 6, 4096
    c = _compiled("rmsnorm", r, cols)
    assert _plan(c)["mapping"] == "rows"
    rng = np.random.default_rng(3)
    xs = [(rng.standard_normal((r, cols)) + 2).astype(BF), rng.standard_normal(cols).astype(BF)]
    v = check(_module("rmsnorm"), "rmsnorm", xs, c(xs))
    assert v.status == "FAIL", v.status


@pytest.mark.parametrize("entry", ENTRIES)
def test_row_kernels_compile_with_nvrtc(entry: str) -> None:
    """NVRTC (the backend's own compiler) takes the row kernels: the PTX has 128-bit global
    loads and stores and, where the program reduces, butterfly shuffles and a barrier."""
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilefoundry.compiler import cuda_build

    ptx = cuda_build.compile_source(_compiled(entry, 8, 14336).executable.source).decode()
    assert "ld.global.v4.u32" in ptx and "st.global.cg.v4.u32" in ptx
    if entry != "swiglu":
        assert "shfl.sync.bfly" in ptx and "bar.sync" in ptx
