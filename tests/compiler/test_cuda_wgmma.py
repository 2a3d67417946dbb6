"""The CUDA backend's Hopper wgmma + TMA matmul kernel (``compiler/render_cuda_wgmma.py``, D520).

On ``cuda-host`` the kernel runs with the TMA loads emulated from the launch plan's tensor-map
description into the swizzled stages and each ``wgmma`` step read through its 64-bit
descriptors, each accumulator an in-order f32 fold of the exact products: the oracle judges the
tiling, the tensor maps, the edges, the swizzle, the descriptors (as modelled), the fragment
map and the epilogue here. NVRTC and nvcc build the device code for sm_90a (no GPU needed);
the instructions themselves run on the device only (``benchmarks/bench_gpu.py``).
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest
from compiler_helpers import MATMUL_SRC

pytest.importorskip("cuda.bindings.nvrtc")

from tilefoundry.compiler import cuda_build, kir, render_cuda, render_cuda_wgmma
from tilefoundry.compiler.cuda_backend import CUDA_TILES
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.errors import InvalidArgumentError
from tilefoundry.oracle.compare import check
from tilefoundry.semantics.dsl import parse_module

NP = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "fp8e4m3": ml_dtypes.float8_e4m3fn,
      "fp8e5m2": ml_dtypes.float8_e5m2}

SRC = MATMUL_SRC


@pytest.fixture(autouse=True)
def _wgmma_on(monkeypatch) -> None:
    monkeypatch.setenv("TF_CUDA_WGMMA", "1")  # the default (D520), whatever the environment
    monkeypatch.delenv("TF_CUDA_WGMMA_TILE", raising=False)


def _mod(dt: str):
    return parse_module(SRC.format(dt=dt))


def _arrays(dt: str, shapes, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s, np.float32).astype(NP[dt]) for s in shapes]


def _plan(comp) -> dict:
    return render_cuda.parse_plan(comp.executable.source)


def _mappings(comp) -> list[str]:
    return [k["mapping"] for k in _plan(comp)["kernels"].values()]


def _judged(dt: str, entry: str, shapes, seed: int = 0):
    mod = _mod(dt)
    xs = _arrays(dt, shapes, seed)
    comp = tf_compile(mod, entry, [x.shape for x in xs], "cuda-host", cfg=CUDA_TILES)
    return comp, check(mod, entry, xs, comp(xs))


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("mkn", [(200, 136, 72), (130, 72, 264), (64, 64, 64), (16, 24, 64)])
def test_wgmma_kernel_is_admitted_at_ragged_edges(dt: str, mkn) -> None:
    """M / N past a tile edge (TMA boxes partly outside: zeros), K not a multiple of the K tile
    64 (136, 72, 24), N past one 256 tile (264), an exact tile and a tile smaller than 64: the
    kernel is the wgmma mapping and every output is in the admitted set."""
    m, k, n = mkn
    comp, v = _judged(dt, "mm", [(m, k), (k, n)], seed=m + n)
    assert _mappings(comp) == ["wgmma"]
    assert _plan(comp)["arch"] == "compute_90a"
    assert v.status == "PASS", v.message[:2000]


def test_batch_axis() -> None:
    """A batch axis (a 3-D tensor map per operand, the batch coordinate from the block index,
    the output's batch stride) stays admitted."""
    comp, v = _judged("f16", "bmm", [(3, 70, 48), (3, 48, 40)], seed=4)
    assert _mappings(comp) == ["wgmma"] and v.status == "PASS", v.message[:2000]
    maps = next(iter(_plan(comp)["kernels"].values()))["tmaps"]
    assert [len(m["dims"]) for m in maps] == [3, 3]


def test_the_tensor_maps_describe_the_operands() -> None:
    """The launch plan's tensor maps are the operands' layouts: A [M, K] row-major is (K, M)
    with a row stride of 2K bytes and one 64 x 128 box; B [K, N] row-major is (N, K) with 2N
    bytes and 64 x 64 boxes (N-major); 384 threads (a producer and two consumer warpgroups)."""
    m, k, n = 200, 136, 72
    mod = _mod("bf16")
    comp = tf_compile(mod, "mm", [(m, k), (k, n)], "cuda-host", cfg=CUDA_TILES)
    entry = next(iter(_plan(comp)["kernels"].values()))
    a, b = entry["tmaps"]
    assert (a["dims"], a["strides"], a["box"]) == ([k, m], [2 * k], [64, 128])
    assert (b["dims"], b["strides"], b["box"]) == ([n, k], [2 * n], [64, 64])
    assert entry["threads"] == 384 and entry["blocks"] == -(-m // 128) * -(-n // 256)


@pytest.mark.parametrize("tile", ["64x128x3", "128x128x2x1xnoreg", "128x192x4x2xwait0",
                                  "64x64x6"])
def test_plan_variants_stay_admitted(monkeypatch, tile: str) -> None:
    """The benchmark's plan variants (``TF_CUDA_WGMMA_TILE``: tile, stages, L2 group, no
    register rebalancing): each covers the domain with its own tiles and is admitted."""
    monkeypatch.setenv("TF_CUDA_WGMMA_TILE", tile)
    comp, v = _judged("bf16", "mm", [(200, 136), (136, 200)], seed=7)
    assert _mappings(comp) == ["wgmma"]
    assert v.status == "PASS", v.message[:2000]
    src = comp.executable.source
    assert ("TF_WG_WAIT1();" in src) == ("wait0" not in tile)
    assert ("setmaxnreg.inc" in src) == ("noreg" not in tile)


def test_parse_tile_refuses_what_does_not_fit() -> None:
    with pytest.raises(InvalidArgumentError):
        render_cuda_wgmma.parse_tile("128x256x5")  # 5 x 48 KiB: past 227 KiB
    with pytest.raises(InvalidArgumentError):
        render_cuda_wgmma.parse_tile("256x128x2")  # 4 consumer warpgroups: not a plan
    with pytest.raises(InvalidArgumentError, match="TF_CUDA_WGMMA_TILE"):
        render_cuda_wgmma.parse_tile("128x256x4xfast")  # no such flag
    with pytest.raises(InvalidArgumentError):
        render_cuda_wgmma.parse_tile("128x256x4x8x2")  # a fifth number
    assert render_cuda_wgmma.parse_tile("64x128x3x16xwait0") == render_cuda_wgmma.WgTile(
        64, 128, 3, 16, True, 0)


def test_declined_kernels_keep_mma_sync_and_say_why(monkeypatch) -> None:
    """A row stride that is no TMA stride (300 elements: not a 16-byte multiple), an older
    target and TF_CUDA_WGMMA=0 keep the mma.sync kernel (and pass), with the reason in the
    plan's ``why`` (``tilefoundry compile --explain``)."""
    comp, v = _judged("bf16", "mm", [(64, 40), (40, 300)], seed=1)
    why = next(iter(_plan(comp)["kernels"].values()))["why"]
    assert _mappings(comp) == ["mma"] and "wgmma declined: B: stride 300" in why
    assert v.status == "PASS" and "arch" not in _plan(comp)
    monkeypatch.setattr(cuda_build, "TARGET_SM", 80)
    comp, v = _judged("bf16", "mm", [(64, 40), (40, 64)], seed=1)
    assert _mappings(comp) == ["mma"] and "sm_80" in _plan(comp)["kernels"]["k0_matmul"]["why"]
    monkeypatch.setattr(cuda_build, "TARGET_SM", 90)
    monkeypatch.setenv("TF_CUDA_WGMMA", "0")
    comp, v = _judged("bf16", "mm", [(64, 40), (40, 64)], seed=1)
    why = _plan(comp)["kernels"]["k0_matmul"]["why"]
    assert _mappings(comp) == ["mma"] and "TF_CUDA_WGMMA=0" in why and v.status == "PASS"
    monkeypatch.delenv("TF_CUDA_WGMMA")  # on by default since judged on an H100 (D520)
    comp, v = _judged("bf16", "mm", [(64, 40), (40, 64)], seed=1)
    assert _mappings(comp) == ["wgmma"] and v.status == "PASS"


def _planted(monkeypatch, old: str, new: str, where: str) -> None:
    """Render the wgmma kernel with ``old`` replaced by ``new`` in its function or in the
    helper head (which the program renderer reads at render time)."""
    if where == "head":
        assert old in render_cuda_wgmma.WGMMA_HEAD
        monkeypatch.setattr(render_cuda_wgmma, "WGMMA_HEAD",
                            render_cuda_wgmma.WGMMA_HEAD.replace(old, new))
        return
    real = render_cuda_wgmma.render_wgmma

    def planted(kc, w):
        helpers, fn = real(kc, w)
        assert any(old in line for line in fn), old
        return helpers, [line.replace(old, new) for line in fn]

    monkeypatch.setattr(render_cuda_wgmma, "render_wgmma", planted)


@pytest.mark.parametrize("old,new,where", [
    # the TMA writes the stage unswizzled while wgmma reads it swizzled
    ("sm[(o & ~1023u) | TF_SW128(o & 1023u)] = h[j];", "sm[o] = h[j];", "head"),
    # the last K tile dropped (K = 136: two tiles of 64, 8 lanes lost)
    ("kt < 3ll", "kt < 2ll", "kernel"),
    # the K-major stride byte offset off (8-row groups read 512 bytes apart)
    (", 16, 1024)", ", 16, 512)", "kernel"),
    # the N-major boxes read at the wrong leading byte offset
    (", 8192, 1024)", ", 4096, 1024)", "kernel"),
    # each thread's two columns of the D fragment swapped in the epilogue
    ("2 * (l % 4) + (i & 1);", "2 * (l % 4) + ((i & 1) ^ 1);", "kernel"),
])
def test_the_judging_catches_planted_errors(monkeypatch, old: str, new: str,
                                            where: str) -> None:
    """The judging above can fail: each planted error in the emulated path is a FAIL."""
    _planted(monkeypatch, old, new, where)
    comp, v = _judged("bf16", "mm", [(200, 136), (136, 72)], seed=9)
    assert _mappings(comp) == ["wgmma"]
    assert new in comp.executable.source
    assert v.status == "FAIL"


def _source(dt: str = "bf16") -> str:
    comp = tf_compile(_mod(dt), "mm", [(200, 136), (136, 72)], "cuda-host", cfg=CUDA_TILES)
    return comp.executable.source


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_device_code_builds_for_sm_90a_with_nvrtc(dt: str) -> None:
    """NVRTC compiles the program for compute_90a (the plan's arch) and ptxas for sm_90a: the
    PTX has four m64n256k16 wgmma per K tile, five TMA loads, the mbarrier wait and the
    register rebalancing."""
    src = _source(dt)
    ptx = cuda_build.build(src, "compute_90a").data.decode()
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n256k16.f32.{dt}.{dt}") == 4
    assert ptx.count("cp.async.bulk.tensor.2d") == 5
    assert "mbarrier.try_wait.parity" in ptx and "setmaxnreg.inc.sync.aligned.u32 232" in ptx
    assert len(cuda_build.build(src, "sm_90a").data) > 0


def _ptxas_report(tmp_path, source: str) -> str:
    """``nvcc -arch=sm_90a`` on ``source`` with ptxas's verbose report: its stderr (the
    compile must succeed)."""
    cu = tmp_path / "k.cu"
    cu.write_text(source)
    res = subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", f"-I{cuda_build.HEADER.parent}",
                          "-x", "cu", "--fmad=false", "-std=c++17", "-Xptxas", "-v", "-o",
                          str(tmp_path / "k.cubin"), str(cu)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
def test_device_code_builds_with_nvcc_without_spills(tmp_path) -> None:
    """``nvcc -arch=sm_90a`` compiles the rendered source; ptxas reports no stack frame and no
    spills for the kernel (the 128 accumulators a consumer thread stay in registers)."""
    err = _ptxas_report(tmp_path, _source())
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in err


# ---------------------------------------------------------------------------------------------
# native fp8 with promotion (D536): only where the launch options declare it (D411)
# ---------------------------------------------------------------------------------------------
def _fp8_cfg(promote: int, kmajor: int = 1):
    return dataclasses.replace(CUDA_TILES, launch=(("fp8_promote", promote),
                                                   ("fp8_kmajor", kmajor)))


def _judged_fp8(dt: str, shapes, promote: int, seed: int = 0, kmajor: int = 1):
    mod = _mod(dt)
    xs = _arrays(dt, shapes, seed)
    comp = tf_compile(mod, "mm", [x.shape for x in xs], "cuda-host",
                      cfg=_fp8_cfg(promote, kmajor))
    return comp, check(mod, "mm", xs, comp(xs))


@pytest.mark.parametrize("dt", ["fp8e4m3", "fp8e5m2"])
@pytest.mark.parametrize("promote", [32, 64, 128])
@pytest.mark.parametrize("mkn", [(200, 272, 136), (130, 144, 264), (16, 48, 64)])
def test_fp8_wgmma_with_promotion_is_admitted_at_ragged_edges(dt: str, promote: int,
                                                              mkn) -> None:
    """fp8_promote = 32 / 64 / 128 with B copied K-major (fp8_kmajor): the matmul kernel is the
    wgmma mapping (m64n128k32, both operands K-major through 128-byte rows of 128 fp8 lanes),
    K past a 128-lane tile (272, 144, 48: TMA zero fill), M / N past a tile edge, an odd
    number of K tiles (the peeled last tile of the double-buffered loop); every output is in
    the admitted set (the emulation folds each promotion group in f32, then adds it onto the
    accumulator: one admitted bracketing)."""
    m, k, n = mkn
    comp, v = _judged_fp8(dt, [(m, k), (k, n)], promote, seed=m + promote)
    assert _mappings(comp)[-1] == "wgmma", _plan(comp)
    why = _plan(comp)["kernels"]["k1_matmul"]["why"]
    assert f"promoted to f32 every {promote} products" in why
    assert v.status == "PASS", v.message[:2000]


@pytest.mark.parametrize("mkn", [(200, 272, 136), (130, 144, 264), (16, 48, 64)])
def test_fp8_group_in_flight_variant_is_admitted_at_ragged_edges(monkeypatch, mkn) -> None:
    """The 128 x 128 variant with a promotion group left in flight (two buffers alternating by
    tile, the loop unrolled by two, an odd last tile peeled: 3, 2 and 1 K tiles here) — no
    longer the default tile (D548), still a benchmark variant — stays admitted."""
    monkeypatch.setenv("TF_CUDA_WGMMA_TILE", "128x128x6")
    m, k, n = mkn
    comp, v = _judged_fp8("fp8e4m3", [(m, k), (k, n)], 128, seed=m + 3)
    assert "tf_t1" in comp.executable.source and _mappings(comp)[-1] == "wgmma"
    assert v.status == "PASS", v.message[:2000]


NT_SRC = SRC + """
@func
def mm_nt(a: Tensor[(M, K), {dt}], w: Tensor[(N, K), {dt}]) -> Tensor[(M, N), {dt}]:
    return matmul(a, transpose(w, (1, 0)), allow_reassociation=True)
"""


@pytest.mark.parametrize("mkn", [(200, 272, 136), (16, 48, 64)])
def test_fp8_a_times_w_transposed_is_one_wgmma_kernel_reading_w(mkn) -> None:
    """``matmul(a, transpose(w))`` with w [N, K] under fp8_promote / fp8_kmajor: the transpose and
    the K-major copy compose to w itself (D549), so the program is the wgmma kernel alone, B's
    tensor map over w's own [N, K] rows — what cuBLAS is handed (column-major B); PASS, and the
    same bytes as the program of three kernels (fusion off). ``mm_tn`` (A transposed too) keeps
    A's transpose: forwarding it would make A M-major, which fp8 wgmma cannot read."""
    m, k, n = mkn
    mod = parse_module(NT_SRC.format(dt="fp8e4m3"))
    xs = _arrays("fp8e4m3", [(m, k), (n, k)], seed=m)
    comp = tf_compile(mod, "mm_nt", [x.shape for x in xs], "cuda-host", cfg=_fp8_cfg(128))
    assert _mappings(comp) == ["wgmma"], _plan(comp)
    (entry,) = _plan(comp)["kernels"].values()
    assert entry["tmaps"][1]["dims"] == [k, n] and entry["tmaps"][1]["strides"] == [k]
    out = comp(xs)
    assert check(mod, "mm_nt", xs, out).status == "PASS"
    three = tf_compile(mod, "mm_nt", [x.shape for x in xs], "cuda-host", cfg=_fp8_cfg(128),
                       fuse=False)
    assert len(three.program.kernels()) == 3
    assert np.array_equal(np.asarray(out).view(np.uint8), np.asarray(three(xs)).view(np.uint8))
    tn = tf_compile(mod, "mm_tn", [(k, m), (n, k)], "cuda-host", cfg=_fp8_cfg(128))
    assert _mappings(tn) == ["transpose", "wgmma"]  # A's transpose: the tiled mapping (D551)
    # the transpose forwarded into the K-major copy (which then reads w itself), that copy into
    # the matmul
    kinds = lambda c: [ln.split(":")[0].split("_", 1)[1] for ln in c.forwarded]  # noqa: E731
    assert kinds(comp) == ["transpose", "kmajor"]
    assert all(" read from w by " in ln for ln in comp.forwarded)
    assert comp.forwarded[1].endswith("_matmul")
    # B's transpose and K-major copy forwarded (to b itself); A's transpose kept
    assert kinds(tn) == ["transpose", "kmajor"]
    assert all(" read from b by " in ln for ln in tn.forwarded)
    (kept,) = [k for k in tn.program.kernels() if k.name.endswith("_transpose")]
    assert {i.buffer for i in kir.iter_instrs(kept.body) if isinstance(i, kir.Load)} == {"a"}


def test_compile_explain_names_the_forwarded_copies(capsys, tmp_path) -> None:
    """``tilefoundry compile --explain`` on the fp8 a·transpose(w): one wgmma kernel, and a line
    per copy the fuse pass forwarded (D549)."""
    from tilefoundry.cli import main

    spec = tmp_path / "nt_mod.py"
    spec.write_text("from tilefoundry.semantics.dsl import parse_module\n"
                    f"MOD = parse_module({NT_SRC.format(dt='fp8e4m3')!r})\n")
    assert main(["compile", f"{spec}:MOD", "mm_nt", "--shape", "200x256", "--shape", "136x256",
                 "--target", "cuda-host", "--launch", "fp8_promote=128", "--launch",
                 "fp8_kmajor=1", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "cuda-host: 1 kernel(s)" in out and "wgmma, 384 threads" in out
    assert out.count("copy forwarded (D549): ") == 2 and "read from w by" in out


def test_fp8_tensor_maps_read_bytes_k_major() -> None:
    """A [M, K] fp8 is (K, M) with a row stride of K bytes and one 128 x 128 box (128 fp8 lanes:
    one 128-byte row); B arrives as its K-major copy [N, K]: (K, N), K bytes, a 128 x 192 box
    (the default fp8 tile's N, D548)."""
    m, k, n = 200, 272, 136
    comp = tf_compile(_mod("fp8e4m3"), "mm", [(m, k), (k, n)], "cuda-host", cfg=_fp8_cfg(128))
    entry = _plan(comp)["kernels"]["k1_matmul"]
    a, b = entry["tmaps"]
    assert (a["dims"], a["strides"], a["box"], a["dtype"]) == ([k, m], [k], [128, 128],
                                                               "fp8e4m3")
    assert (b["dims"], b["strides"], b["box"]) == ([k, n], [k], [128, 192])
    assert entry["blocks"] == -(-m // 128) * -(-n // 192) and entry["threads"] == 384


def test_fp8_without_a_declared_promotion_stays_staged_and_says_why() -> None:
    """No fp8_promote: fp8 is staged exactly as f16 on mma.sync (D411), whatever the layout;
    promotion without the K-major copy of B is declined by name (fp8 wgmma reads K-major B
    only)."""
    comp, v = _judged_fp8("fp8e4m3", [(64, 64), (64, 64)], 0, seed=3)
    why = _plan(comp)["kernels"]["k1_matmul"]["why"]
    assert _mappings(comp)[-1] == "mma" and "staged exactly as f16" in why and "fp8_promote" in why
    assert v.status == "PASS"
    comp, v = _judged_fp8("fp8e4m3", [(64, 64), (64, 64)], 128, kmajor=0, seed=3)
    why = _plan(comp)["kernels"]["k0_matmul"]["why"]
    assert _mappings(comp) == ["mma"] and "B is N-major" in why and "fp8_kmajor=1" in why
    assert v.status == "PASS"


@pytest.mark.parametrize("launch,what", [
    ((("num_warps", 8),), "'num_warps'"), ((("fp8_promote", 48),), "fp8_promote=48"),
    ((("fp8_kmajor", 2),), "fp8_kmajor=2")])
def test_bad_cuda_launch_options_are_refused_by_name(launch, what: str) -> None:
    cfg = dataclasses.replace(CUDA_TILES, launch=launch)
    with pytest.raises(InvalidArgumentError, match=what):
        tf_compile(_mod("fp8e4m3"), "mm", [(64, 64), (64, 64)], "cuda-host", cfg=cfg)


@pytest.mark.parametrize("old,new,promote", [
    # the K step inside a tile read 16 bytes on instead of 32 (fp8: 32 lanes an instruction)
    ("+ (kk) * 32), 16, 1024)", "+ (kk) * 16), 16, 1024)", 128),
    # a promotion buffer not cleared at its group's first instruction (scale-d always 1)
    ("tid & 127, j > 0); }", "tid & 127, 1); }", 64),
    # the promotion dropped: each group's sum replaces the accumulator
    ("TF_R(tf_acc)[j] = __fadd_rn(TF_R(tf_acc)[j], TF_R(tf_t0)[j]);",
     "TF_R(tf_acc)[j] = TF_R(tf_t0)[j];", 32),
])
def test_the_fp8_judging_catches_planted_errors(monkeypatch, old: str, new: str,
                                                promote: int) -> None:
    _planted(monkeypatch, old, new, "kernel")
    comp, v = _judged_fp8("fp8e4m3", [(200, 272), (272, 136)], promote, seed=11)
    assert _mappings(comp)[-1] == "wgmma" and new in comp.executable.source
    assert v.status == "FAIL"


@pytest.mark.parametrize("tile,promote,bn,unrolled", [("128x128x6", 128, 128, True),
                                                      (None, 128, 192, False),
                                                      (None, 64, 192, False)])
def test_fp8_device_code_builds_for_sm_90a_with_nvrtc(monkeypatch, tile, promote: int, bn: int,
                                                      unrolled: bool) -> None:
    """The PTX of the promoted kernel: m64nBNk32 e4m3 instructions (four a K tile; eight in the
    loop unrolled by two tiles when a tile is one group, the group left in flight, as the
    128 x 128 variant does; the default 128 x 192 tile waits for each group, D548), one-byte
    tensor maps' loads, the register rebalancing."""
    if tile:
        monkeypatch.setenv("TF_CUDA_WGMMA_TILE", tile)
    comp = tf_compile(_mod("fp8e4m3"), "mm", [(200, 256), (256, 136)], "cuda-host",
                      cfg=_fp8_cfg(promote))
    ptx = cuda_build.build(comp.executable.source, "compute_90a").data.decode()
    n = ptx.count(f"wgmma.mma_async.sync.aligned.m64n{bn}k32.f32.e4m3.e4m3")
    assert n == (8 if unrolled else 4), n
    assert ("wgmma.wait_group.sync.aligned 1" in ptx) == unrolled
    assert "setmaxnreg.inc.sync.aligned.u32 232" in ptx


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("tile,promote", [("128x128x6", 128), (None, 128), (None, 32)])
def test_fp8_device_code_builds_with_nvcc_unserialised(tmp_path, monkeypatch, tile,
                                                       promote: int) -> None:
    """nvcc / ptxas for sm_90a: no spills, and no C7514 remark (ptxas serialising every wgmma
    because a register of one in flight is read: the double-buffered promotion must not)."""
    if tile:
        monkeypatch.setenv("TF_CUDA_WGMMA_TILE", tile)
    comp = tf_compile(_mod("fp8e4m3"), "mm", [(200, 272), (272, 136)], "cuda-host",
                      cfg=_fp8_cfg(promote))
    err = _ptxas_report(tmp_path, comp.executable.source)
    assert "C7514" not in err, err[-2000:]
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in err


def test_compile_cli_takes_launch_options_and_explains_the_fp8_mapping(capsys, tmp_path) -> None:
    """``tilefoundry compile --target cuda-host --launch fp8_promote=128 --launch fp8_kmajor=1
    --explain``: the matmul is the wgmma mapping with the promotion named; without the options
    it stays staged on mma.sync, saying how to opt in; a bad option or a non-cuda target is a
    one-line error naming it."""
    from tilefoundry.cli import main

    spec = tmp_path / "fp8_mod.py"
    spec.write_text("from tilefoundry.semantics.dsl import parse_module\n"
                    f"MOD = parse_module({SRC.format(dt='fp8e4m3')!r})\n")
    base = ["compile", f"{spec}:MOD", "mm", "--shape", "200x256", "--shape", "256x136",
            "--target", "cuda-host", "--explain"]
    assert main([*base, "--launch", "fp8_promote=128", "--launch", "fp8_kmajor=1"]) == 0
    out = capsys.readouterr().out
    assert "wgmma, 384 threads" in out and "promoted to f32 every 128 products" in out
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "mma, " in out and "staged exactly as f16" in out and "fp8_promote=N" in out
    for bad, what in [("fp8_promote=48", "fp8_promote=48"), ("num_warps=8", "'num_warps'"),
                      ("fp8_promote", "KEY=INTEGER")]:
        assert main([*base, "--launch", bad]) == 2
        assert what in capsys.readouterr().err
    assert main([*base[:-3], "--target", "triton", "--launch", "fp8_promote=128"]) == 2
    assert "--launch sets the cuda targets' launch options" in capsys.readouterr().err


@pytest.mark.parametrize("mkn", [(200, 272, 136), (16, 48, 64)])
def test_fp8_staggered_consumers_stay_admitted(monkeypatch, mkn) -> None:
    """D546: ``stagger`` (two consumers half a K tile apart) changes only the device's
    scheduling — consumer 1 waits on named barrier 1 until consumer 0 has issued its first
    group — so the emulated kernel gives the same admitted values at ragged edges, one K tile
    included (the barrier is passed in the first tile, whatever the tile count)."""
    monkeypatch.setenv("TF_CUDA_WGMMA_TILE", "128x192x5xwait0xstagger")
    m, k, n = mkn
    comp, v = _judged_fp8("fp8e4m3", [(m, k), (k, n)], 128, seed=m + 7)
    assert _mappings(comp)[-1] == "wgmma", _plan(comp)
    src = comp.executable.source
    assert src.count('bar.sync 1, 256;') == 1 and src.count('bar.arrive 1, 256;') == 1
    assert "consumers staggered (D546)" in _plan(comp)["kernels"]["k1_matmul"]["why"]
    assert v.status == "PASS", v.message[:2000]


def test_stagger_needs_two_consumers_and_no_group_in_flight() -> None:
    from tilefoundry.compiler.render_cuda_wgmma import parse_tile

    assert parse_tile("128x192x5xwait0xstagger").stagger
    for bad in ("128x192x5xstagger", "64x128x4xwait0xstagger"):
        with pytest.raises(InvalidArgumentError, match="stagger needs bm 128 and wait0"):
            parse_tile(bad)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
def test_fp8_staggered_device_code_builds_with_nvcc(tmp_path, monkeypatch) -> None:
    """The staggered 128 x 192 kernel under nvcc / ptxas sm_90a: no spills, no C7514."""
    monkeypatch.setenv("TF_CUDA_WGMMA_TILE", "128x192x5xwait0xstagger")
    comp = tf_compile(_mod("fp8e4m3"), "mm", [(200, 272), (272, 392)], "cuda-host",
                      cfg=_fp8_cfg(128))
    err = _ptxas_report(tmp_path, comp.executable.source)
    assert "C7514" not in err, err[-2000:]
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in err
