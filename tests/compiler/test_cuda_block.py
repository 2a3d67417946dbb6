"""The CUDA backend's block mapping (docs/decisions.md D276) without a GPU: row kernels (RMSNorm,
softmax, row sums) get one thread block per program instance, keep their values in registers and
shared memory (no global scratch), compile with NVRTC, and, run through the host emulation
(each barrier-separated phase for every thread of the block in turn), give the oracle's values
under every reduction policy, NaN / ±0 / inf rows and ragged (masked) rows included. The
emulation is shown to catch a missing barrier."""

from __future__ import annotations

import re
import shutil

import ml_dtypes
import numpy as np
import pytest
from compiler_helpers import module_of, one_op, var

pytest.importorskip("cuda.bindings.nvrtc")

from tilefoundry.compiler import cuda_backend, cuda_build, render_cuda
from tilefoundry.compiler.cuda_backend import CudaExecutable
from tilefoundry.compiler.interp import Interpreter
from tilefoundry.compiler.pipeline import compile
from tilefoundry.oracle.compare import check
from tilefoundry.semantics import reductions
from tilefoundry.semantics.dsl import DimVar, Tensor, bf16, f32, func, module, rms_norm, softmax
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.ops import Reduce, ReduceKind

R = DimVar("R", 1, 1 << 16)
C = DimVar("C", 1, 1 << 16)


@func
def rmsnorm(x: Tensor[(R, C), bf16], w: Tensor[(C,), bf16]) -> Tensor[(R, C), bf16]:
    return rms_norm(x, w, eps=1e-6)


@func
def softmax_rows(x: Tensor[(R, C), bf16]) -> Tensor[(R, C), bf16]:
    return softmax(x, axis=1)


@func
def softmax_f32(x: Tensor[(R, C), f32]) -> Tensor[(R, C), f32]:
    return softmax(x, axis=1)


ROWS = module(rmsnorm, softmax_rows, softmax_f32)
HOST_CXX = shutil.which("g++") is not None
POLICIES = ("fold_left", "fold_right", "ordered_tree", "unordered_tree")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))
    # this file is the block mapping's (D276): the row mapping (D482), which takes wide rows
    # first, is switched off here (tests/compiler/test_cuda_rows.py is its own)
    monkeypatch.setattr(render_cuda.KernelCuda, "ROWS_MAPPING", False)


def _program(m, entry: str, *arrays: np.ndarray):
    return compile(m, entry, [a.shape for a in arrays], "interp").program


def _body(src: str) -> str:
    return src[src.index("/* program"):src.rindex(render_cuda.PLAN_TAG)]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def _special_rows(rows: int, cols: int, dtype, seed: int = 0) -> np.ndarray:
    """Random rows, then rows of NaN, +inf, -inf, +0, -0 and mixed specials."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    x[1, cols // 3] = np.nan
    x[2, :] = np.inf
    x[3, 5] = -np.inf
    x[4, :] = 0.0
    x[5, :] = -0.0
    x[6, :4] = [np.inf, -np.inf, 0.0, -0.0]
    x[7, :2] = 3e38  # the sum (and the squares) overflow
    return x.astype(dtype)


def _host(p, inputs):
    if not HOST_CXX:
        pytest.skip("no host C++ compiler for the emulation")
    return CudaExecutable(p, render_cuda.render(p), "host").run(inputs)


# ---------------------------------------------------------------------------------------------
# the mapping and its rendering
# ---------------------------------------------------------------------------------------------
CASES = {
    "rmsnorm": (ROWS, "rmsnorm", lambda r, c: [np.ones((r, c), ml_dtypes.bfloat16),
                                               np.ones((c,), ml_dtypes.bfloat16)]),
    "softmax": (ROWS, "softmax_rows", lambda r, c: [np.ones((r, c), ml_dtypes.bfloat16)]),
    "sum": (None, "f", lambda r, c: [np.ones((r, c), np.float32)]),
}


def _case(name: str, rows: int, cols: int, policy: str = "unordered_tree"):
    m, entry, make = CASES[name]
    arrays = make(rows, cols)
    if m is None:
        m = one_op(Reduce((1,), False, ReduceKind.SUM, policy), *arrays)
    return _program(m, entry, *arrays), arrays


@pytest.mark.parametrize("name", sorted(CASES))
def test_row_kernels_get_one_block_per_instance(name: str) -> None:
    """RMSNorm, softmax and a row sum over 4096-wide rows: every kernel with a reduction is
    block-mapped (one block per instance, 512 threads), holds its tiles in registers and shared
    memory, asks for no global scratch, and passes NVRTC to PTX with barriers and shared
    memory in it."""
    p, _ = _case(name, 64, 4096)
    src = render_cuda.render(p)
    plan = render_cuda.parse_plan(src)
    (k,) = [k for k in p.kernels() if any(type(i).__name__ == "Reduce"
                                           for i in k.body)]
    entry = plan["kernels"][k.name]
    assert entry["mapping"] == "block" and entry["scratch"] == 0
    assert entry["threads"] == 512 and entry["instances"] == 64 == k.instances
    body = _body(src)
    assert "TF_SHARED " in body and "TF_SYNC" in body and "TF_REG(" in body
    assert "__launch_bounds__(512)" in body and "S0 +" not in body
    # every register array is indexed by the unrolled lane loop only, or is a value every
    # thread computes for itself (one slot, index 0): constant indices, so it stays in registers
    regs = re.findall(r"TF_REG\(\w+, (r\w+), 512, (\d+)\);", body)
    assert regs and all(int(n) <= render_cuda.REG_LIMIT for _, n in regs)
    for name_, slots in regs:
        got = set(re.findall(rf"TF_R\({name_}\)\[(\w+)\]", body))
        assert got == {"tf_j"} or (got == {"0"} and slots == "1"), (name_, got)
    ptx = cuda_build.compile_source(src).decode()
    assert ".shared" in ptx and "bar.sync" in ptx


def test_launches_are_one_block_per_instance(monkeypatch) -> None:
    """The launcher reads the plan: blocks = instances, the kernel's own thread count."""
    p, arrays = _case("sum", 300, 200)
    entry = render_cuda.parse_plan(render_cuda.render(p))["kernels"][p.kernels()[0].name]
    assert entry["mapping"] == "block"
    chunk, launches = cuda_backend.launch_slices(entry, 128)
    assert chunk == entry["instances"] and launches == [(chunk, 0, chunk)]
    seen: list = []
    real = cuda_backend._HostDevice.launch
    monkeypatch.setattr(cuda_backend._HostDevice, "launch",
                        lambda self, f, b, t, ps: (seen.append((b, t)), real(self, f, b, t, ps)))
    _host(p, arrays)
    assert seen == [(entry["instances"], entry["threads"])]


def test_a_tile_past_the_shared_budget_keeps_the_instance_mapping() -> None:
    """An ordered_tree sum stages its whole tile in shared memory: 16384 f32 lanes (64 KiB)
    do not fit the 48 KiB static budget, so the kernel keeps one thread per instance; an
    unordered_tree sum of the same rows needs only the threads' partials and is block-mapped."""
    x = np.ones((4, 16384), np.float32)
    kinds = {}
    for policy in ("ordered_tree", "unordered_tree"):
        p = _program(one_op(Reduce((1,), False, ReduceKind.SUM, policy), x), "f", x)
        plan = render_cuda.parse_plan(render_cuda.render(p))
        kinds[policy] = {e["mapping"] for e in plan["kernels"].values()}
    assert kinds == {"ordered_tree": {"instance"}, "unordered_tree": {"block"}}


# ---------------------------------------------------------------------------------------------
# values through the host emulation, judged by the oracle
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("cols", (4096, 1000, 37))
def test_row_sums_keep_their_policy(policy: str, cols: int) -> None:
    """f32 row sums (full, ragged 1000 of a 1024 block, 37 of 64) with NaN / inf / ±0 rows:
    the oracle passes them under each policy; fold_left, fold_right and ordered_tree give the
    reference's own order bit for bit (its left / right fold, its pairwise tree)."""
    x = _special_rows(16, cols, np.float32, seed=cols)
    m = one_op(Reduce((1,), False, ReduceKind.SUM, policy), x)
    p = _program(m, "f", x)
    plan = render_cuda.parse_plan(render_cuda.render(p))
    assert {e["mapping"] for e in plan["kernels"].values()} == {"block"}
    got = _host(p, [x])
    assert check(m, "f", [x], got).status == "PASS"
    if policy != "unordered_tree":
        with np.errstate(all="ignore"):
            want = reductions.reduce(x, "sum", 1, policy=policy)
        fin = np.isfinite(want)
        assert np.array_equal(_bits(got[fin]), _bits(want[fin]))
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
        assert np.signbit(got[5]) and not np.signbit(got[4])  # -0 row stays -0, +0 row +0


@pytest.mark.parametrize("policy", POLICIES)
def test_other_reductions_on_blocks(policy: str) -> None:
    """max / min / abs_max (f32, with specials), an integer sum and a bool any on ragged
    rows: block-mapped, PASS."""
    x = _special_rows(9, 700, np.float32, seed=5)
    ints = np.random.default_rng(1).integers(-2**31, 2**31 - 1, (9, 700)).astype(np.int32)
    for kind, arr in ((ReduceKind.MAX, x), (ReduceKind.MIN, x), (ReduceKind.ABS_MAX, x),
                      (ReduceKind.SUM, ints)):
        m = one_op(Reduce((1,), False, kind, policy), arr)
        p = _program(m, "f", arr)
        plan = render_cuda.parse_plan(render_cuda.render(p))
        assert "block" in {e["mapping"] for e in plan["kernels"].values()}, kind
        got = _host(p, [arr])
        assert check(m, "f", [arr], got).status == "PASS", (kind, policy)


@pytest.mark.parametrize("entry", ("rmsnorm", "softmax_rows", "softmax_f32"))
@pytest.mark.parametrize("cols", (4096, 1000))
def test_rmsnorm_and_softmax_on_the_host_emulation(entry: str, cols: int) -> None:
    """RMSNorm and softmax (bf16, and softmax in f32) over rows with NaN / inf / ±0: the oracle
    passes the block-mapped kernels' results."""
    dt = np.float32 if entry == "softmax_f32" else ml_dtypes.bfloat16
    x = _special_rows(12, cols, dt, seed=cols + 1)
    arrays = [x] + ([np.linspace(-2, 2, cols).astype(dt)] if entry == "rmsnorm" else [])
    p = _program(ROWS, entry, *arrays)
    plan = render_cuda.parse_plan(render_cuda.render(p))
    assert "block" in {e["mapping"] for e in plan["kernels"].values()}
    got = _host(p, arrays)
    assert check(ROWS, entry, arrays, got).status == "PASS"


def test_the_emulation_catches_a_missing_barrier(monkeypatch) -> None:
    """The host emulation runs each barrier-separated phase for every thread in turn, so a
    kernel rendered without its barriers (every phase one) reads partials that other threads
    have not written yet: its RMSNorm differs from the interpreter's, which the same kernel
    with its barriers matches."""
    x = _special_rows(8, 4096, ml_dtypes.bfloat16, seed=2)
    w = np.linspace(-2, 2, 4096).astype(ml_dtypes.bfloat16)
    p = _program(ROWS, "rmsnorm", x, w)
    want = Interpreter(p).run([x, w])
    ok = _host(p, [x, w])
    assert np.array_equal(_bits(ok), _bits(want))
    monkeypatch.setattr(render_cuda.KernelCuda, "segment",
                        lambda self, lines, reads, writes, out, ind, warp=frozenset():
                        out.extend(lines))
    broken = _host(p, [x, w])
    assert not np.array_equal(_bits(broken), _bits(want))


def test_a_broadcast_row_statistic_is_read_from_shared_memory() -> None:
    """x - mean(x) over rows (the row's value used on every lane): the reduced value is one
    shared array element read by all threads, the centred rows in registers; values PASS
    (finite rows and a -0 row: an inf or NaN row makes the enclosure of x - sum unbounded)."""
    x = (np.random.default_rng(9).standard_normal((10, 300)) * 3).astype(np.float32)
    x[4, :] = -0.0
    xv = var("x", x.shape, DType.F32)
    from tilefoundry.semantics.ops import Binary, BinaryKind

    s = Call(Reduce((1,), True, ReduceKind.SUM, "ordered_tree"), (xv,))
    m = module_of([xv], Call(Binary(BinaryKind.SUB), (xv, s)))
    p = _program(m, "f", x)
    src = render_cuda.render(p)
    assert {e["mapping"] for e in render_cuda.parse_plan(src)["kernels"].values()} == {"block"}
    (k,) = p.kernels()
    (name,) = re.findall(rf"TF_SHARED float (s\w+)\[{k.block[0]}\];", src)  # a row's value
    assert f"{name}[c0]" in src and re.search(r"TF_REG\(float, r\w+, \d+, \d+\);", src)
    got = _host(p, [x])
    assert check(m, "f", [x], got).status == "PASS"


# ---------------------------------------------------------------------------------------------
# kernel-IR reductions with an init, a ragged mask and several fibers per block
# ---------------------------------------------------------------------------------------------
def _reduce_program(dt: str, kind: str, policy: str, rows_per_tile: int, with_init: bool):
    """rows x 300 lanes reduced along axis 1 in tiles of (rows_per_tile, 512): the edge mask
    leaves 212 lanes of each row out; an init loaded per row seeds the result."""
    from tilefoundry.compiler import kir

    rows, cols = 6, 300
    bufs = [kir.Buffer("x", dt, (rows, cols), (cols, 1), "input"),
            kir.Buffer("i", dt, (rows,), (1,), "input"),
            kir.Buffer("o", dt, (rows,), (1,))]
    body = [kir.EdgeMask("%m", (1,)), kir.Load("%x", "x", (cols, 1), mask="%m"),
            kir.Load("%i", "i", (1, 0)),
            kir.Reduce("%r", "%x", (1,), kind, policy, mask="%m",
                       init="%i" if with_init else None),
            kir.Store("o", (1, 0), "%r")]
    k = kir.Kernel("red", (rows, cols), (rows_per_tile, 512), tuple(body))
    p = kir.Program("p", tuple(bufs), ("x", "i"), "o", (k,))
    kir.verify(p)
    return p


@pytest.mark.parametrize("rows_per_tile", (1, 2))
@pytest.mark.parametrize(("dt", "kind", "policy"), [
    ("f32", "sum", "fold_left"), ("f32", "sum", "fold_right"), ("f32", "sum", "ordered_tree"),
    ("f64", "sum", "fold_left"), ("i32", "sum", "unordered_tree"), ("i32", "sum", "fold_left"),
    ("i32", "abs_max", "fold_left"), ("f32", "max", "unordered_tree"),
    ("f32", "min", "fold_right"), ("f32", "abs_max", "ordered_tree"),
    ("i64", "prod", "unordered_tree"), ("f64", "sum_hi", "fold_left"),
    ("f64", "sum_lo", "fold_left")])
def test_reductions_with_init_and_mask_match_the_interpreter(dt, kind, policy,
                                                             rows_per_tile) -> None:
    """Orders the kernel-IR interpreter fixes (folds, the pairwise tree over an edge-masked
    row, integer and extreme-value reductions, the compensated fold), with and without an
    init, one fiber (partial path) or two (staged) per block: the host-emulated block kernel
    gives the interpreter's bits."""
    rng = np.random.default_rng(hash((dt, kind, policy)) % 2**32)
    npdt = np.dtype({"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64"}[dt])
    if npdt.kind == "f":
        x = (rng.standard_normal((6, 300)) * 1e3).astype(npdt)
        x[1, 7] = np.nan
        x[2, :] = -0.0
        x[3, 11] = np.inf
        init = rng.standard_normal(6).astype(npdt)
    else:
        x = rng.integers(-2**31, 2**31 - 1, (6, 300)).astype(npdt)
        x[0, 3] = np.iinfo(npdt).min
        if kind == "prod":
            x = rng.integers(-3, 4, (6, 300)).astype(npdt)
        init = rng.integers(-1000, 1000, 6).astype(npdt)
    for with_init in (False, True) if kind not in ("sum_hi", "sum_lo") else (False,):
        p = _reduce_program(dt, kind, policy, rows_per_tile, with_init)
        plan = render_cuda.parse_plan(render_cuda.render(p))
        assert plan["kernels"]["red"]["mapping"] == "block"
        want = Interpreter(p).run([x, init])
        got = _host(p, [x, init])
        assert np.array_equal(_bits(got), _bits(want)), (with_init, got, want)
