"""The Triton backend's row kernels at the memory limit (issue 35, D340-D343): 16-byte vector
accesses (checked in the SASS that Triton's own ptxas builds for sm_90, in a subprocess without
the interpreter), the integer-key max / min reductions (exact on NaN, +-0, +-inf, in the
interpreter), the GPU-only ex2 / rcp narrow math emulated with its worst-case hardware error on
every bf16 / f16 pattern, the fused rows (residual-add + RMSNorm, softmax with scale and mask),
the tile-loop fallback for rows too long for one tile, and ``tilefoundry compile --explain``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from compiler_helpers import RMSNORM_SRC

# Triton's interpreter is chosen when triton is first imported (triton_backend._interpret_mode)
if "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")
pytest.importorskip("torch")

from tilefoundry.cli import main
from tilefoundry.compiler import kir
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.compiler.render_triton import hoisted, render
from tilefoundry.compiler.triton_backend import TRITON_TILES, TritonBackend
from tilefoundry.compiler.triton_explain import explain
from tilefoundry.oracle.compare import check
from tilefoundry.semantics.dsl import parse_module

SOURCE = RMSNORM_SRC + """
@func
def softmax_rows(x: Tensor[(R, C), bf16]) -> Tensor[(R, C), bf16]:
    return softmax(x, axis=1)

@func
def swiglu(g: Tensor[(R, C), bf16], u: Tensor[(R, C), bf16]) -> Tensor[(R, C), bf16]:
    return silu(g) * u

@func
def add_rmsnorm(x: Tensor[(R, C), bf16], r: Tensor[(R, C), bf16],
                w: Tensor[(C,), bf16]) -> tuple[Tensor[(R, C), bf16], Tensor[(R, C), bf16]]:
    h = x + r
    return h, rms_norm(h, w, eps=1e-6)

@func
def softmax_scale_mask(x: Tensor[(R, C), bf16], m: Tensor[(R, C), bf16]) -> Tensor[(R, C), bf16]:
    return softmax(x * 0.125 + m, axis=1)

@func
def rowmax(x: Tensor[(R, C), f32]) -> Tensor[(R,), f32]:
    return reduce_max(x, axes=(1,), keepdim=False)

@func
def rowmin(x: Tensor[(R, C), f32]) -> Tensor[(R,), f32]:
    return reduce_min(x, axes=(1,), keepdim=False)

@func
def rowsum(x: Tensor[(R, C), f32]) -> Tensor[(R,), f32]:
    return reduce_sum(x, axes=(1,), keepdim=False)

@func
def colsum(x: Tensor[(R, C), f32]) -> Tensor[(C,), f32]:
    return reduce_sum(x, axes=(0,), keepdim=False)
"""
MOD = parse_module(SOURCE)
BF = ml_dtypes.bfloat16


@pytest.fixture(scope="module", autouse=True)
def _interpreter():
    TritonBackend(device="interpret")  # sets TRITON_INTERPRET in this process


def _inputs(entry: str, r: int, c: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)

    def bf(shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(BF)

    if entry == "rmsnorm":
        return [bf((r, c)), bf((c,))]
    if entry == "softmax_rows":
        return [bf((r, c), 4.0)]
    if entry == "swiglu":
        return [bf((r, c), 3.0), bf((r, c))]
    if entry == "add_rmsnorm":
        return [bf((r, c)), bf((r, c)), bf((c,))]
    m = np.where(np.arange(c)[None, :] <= 7 * np.arange(r)[:, None], 0.0, -np.inf)
    return [bf((r, c), 8.0), m.astype(BF)]


def _gpu_source(entry: str, shapes) -> str:
    comp = tf_compile(MOD, entry, shapes, "interp", cfg=TRITON_TILES)
    return render(comp.program)


# -- vector accesses ---------------------------------------------------------------------------
@pytest.mark.parametrize("entry", ["rmsnorm", "softmax_rows", "swiglu", "add_rmsnorm"])
@pytest.mark.parametrize("cols", [4096, 1000])
def test_row_kernels_form_their_coordinates_without_reshape_or_clamp(entry: str,
                                                                      cols: int) -> None:
    """Coordinates are expanded ``arange``s (a ``tl.reshape`` hid their contiguity from
    Triton), and a load masked by the ragged edge is not clamped (a clamp did too)."""
    shapes = [x.shape for x in _inputs(entry, 8, cols)]
    src = _gpu_source(entry, shapes).split("def k_", 1)[1]
    assert "tl.reshape(" not in src
    assert "tl.minimum(tl.maximum(" not in src


_SASS_SCRIPT = textwrap.dedent('''
    import importlib.util, subprocess, sys, tempfile, pathlib
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    path, out = sys.argv[1], sys.argv[2]
    spec = importlib.util.spec_from_file_location("tf_rows_sass", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    bin_dir = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    texts = []
    for name, (fn, roots, n, types, launch) in m.KERNELS.items():
        sig = {f"P{i}": "*i16" for i in range(len(types))}
        attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(types))}
        k = triton.compile(ASTSource(fn=fn, signature=sig, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32),
                           options={**launch, "enable_fp_fusion": False})
        cubin = pathlib.Path(tempfile.mkdtemp()) / "k.cubin"
        cubin.write_bytes(k.asm["cubin"])
        texts.append(subprocess.run([str(bin_dir / "cuobjdump"), "-sass", str(cubin)],
                                    capture_output=True, text=True, check=True).stdout)
    pathlib.Path(out).write_text("\\n".join(texts))
''')


@pytest.mark.parametrize("entry,cols", [("rmsnorm", 4096), ("softmax_rows", 14336),
                                        ("swiglu", 4096)])
def test_row_kernels_load_and_store_16_byte_vectors_in_the_sass(entry: str, cols: int,
                                                                tmp_path: Path) -> None:
    """The rendered kernels compiled for sm_90 by Triton's own ptxas (no GPU needed; a
    subprocess without the interpreter): every global access is LDG.E.128 / STG.E.128, none
    a 2-byte one (what the reshaped coordinates and the clamp gave before D340)."""
    import triton

    bin_dir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    if not (bin_dir / "cuobjdump").exists() or not (bin_dir / "ptxas").exists():
        pytest.skip("this triton wheel carries no ptxas / cuobjdump")
    shapes = [x.shape for x in _inputs(entry, 8, cols)]
    src_path, out = tmp_path / "k.py", tmp_path / "k.sass"
    src_path.write_text(_gpu_source(entry, shapes))
    script = tmp_path / "sass.py"
    script.write_text(_SASS_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    r = subprocess.run([sys.executable, str(script), str(src_path), str(out)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    sass = out.read_text()
    assert "LDG.E.128" in sass and "STG.E.128" in sass
    assert "LDG.E.U16" not in sass and "STG.E.U16" not in sass


# -- integer-key max / min -----------------------------------------------------------------------
def _special_rows() -> np.ndarray:
    rows = np.array([
        [-0.0, 0.0, -0.0, -0.0],          # max +0, min -0
        [-0.0, -0.0, -0.0, -0.0],         # both -0
        [-np.inf, -3.0, -np.inf, -1e-45],  # a subnormal
        [np.inf, -np.inf, 2.0, 1.0],
        [1.0, np.nan, -np.inf, 5.0],       # NaN wins both
        [-np.nan, 1.0, 2.0, 3.0],          # a negative NaN wins both
        [3.4e38, -3.4e38, 1e-38, -0.0],
        [7.0, 7.0, 7.0, 7.0],
    ], dtype=np.float32)
    rng = np.random.default_rng(3)
    more = rng.standard_normal((24, 4)).astype(np.float32)
    more[::5, 1] = -0.0
    more[::7, 2] = np.nan
    return np.concatenate([rows, more])


@pytest.mark.parametrize("entry", ["rowmax", "rowmin"])
def test_key_reductions_are_exact_on_nan_signed_zeros_and_infinities(entry: str) -> None:
    x = _special_rows()
    comp = tf_compile(MOD, entry, [x.shape], "triton", cfg=TRITON_TILES)
    assert "_tf_key32" in comp.executable.source.split("def k_", 1)[1]
    got = np.asarray(comp([x]), dtype=np.float32)
    v = check(MOD, entry, [x], got)
    assert v.status == "PASS", v.message[:2000]
    bits = got.view(np.uint32)
    want_zero = 0x00000000 if entry == "rowmax" else 0x80000000
    assert bits[0] == want_zero  # -0 < +0 decides the mixed row
    assert bits[1] == 0x80000000
    assert np.isnan(got[4]) and np.isnan(got[5])
    assert got[2] == (np.float32(-1e-45) if entry == "rowmax" else -np.inf)


# -- the GPU-only narrow math (ex2.approx.ftz, rcp.approx.ftz), emulated --------------------------
def _ex2_ftz(a: np.ndarray, err: int) -> np.ndarray:
    """ex2.approx.ftz.f32 with its error at ``err`` ulp (subnormal input and output flush)."""
    a = np.where(np.abs(a) < np.float32(2.0 ** -126), np.float32(0.0), a)
    with np.errstate(over="ignore"):
        r = np.exp2(a.astype(np.float64)).astype(np.float32)
    for _ in range(abs(err)):
        r = np.nextafter(r, np.float32(np.inf if err > 0 else 0.0), dtype=np.float32)
    return np.where(r < np.float32(2.0 ** -126), np.float32(0.0), r)


def _rcp_ftz(d: np.ndarray, err: int) -> np.ndarray:
    r = (1.0 / d.astype(np.float64)).astype(np.float32)
    if err:
        r = np.nextafter(r, np.float32(np.inf if err > 0 else 0.0), dtype=np.float32)
    return r


def _gpu_narrow(fn: str, w: np.ndarray, err: int) -> np.ndarray:
    """``_tf_{fn}_narrow_gpu`` in f32 numpy, the approximations ``err`` ulp off (2 for ex2, 1
    for rcp, in the same direction: the worst case for the quotient's magnitude either way)."""
    f32 = np.float32
    k = f32(0.7213475204444817)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if fn == "exp":
            h = _ex2_ftz(w * k, 2 * err)
            return h * h
        h = _ex2_ftz(np.abs(w) * -k, 2 * err)
        q = h * h
        rc = _rcp_ftz(f32(1.0) + q, err)
        if fn == "sigmoid":
            return np.where(w < 0, q, f32(1.0)) * rc
        y = np.where(w < 0, (w * h) * h, w) * rc
        return np.where(w == -np.inf, f32(-0.0), y).astype(f32)


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("fn", ["exp", "sigmoid", "silu"])
@pytest.mark.parametrize("err", [-1, 0, 1])
def test_gpu_narrow_math_meets_the_budget_on_every_pattern(dt: str, fn: str, err: int) -> None:
    """D343: the GPU's approximate ex2 / rcp keep exp, sigmoid and silu of every bf16 / f16
    pattern within 1 ulp (``semantics/ulp.py`` lemma B), at the hardware's worst error."""
    np_dt = BF if dt == "bf16" else np.float16
    mod = parse_module(f"""
N = DimVar("N", 1, 1 << 20)

@func
def f(x: Tensor[(N,), {dt}]) -> Tensor[(N,), {dt}]:
    return {fn}(x)
""")
    x = np.arange(1 << 16, dtype=np.uint16).view(np_dt)
    with np.errstate(over="ignore"):
        y = _gpu_narrow(fn, x.astype(np.float32), err).astype(np_dt)
    v = check(mod, "f", [x], y)
    assert v.status == "PASS", v.message[:2000]


def test_the_emulation_would_catch_a_wrong_constant() -> None:
    """The emulation is sensitive: the same silu with exp(-|w|) for h (not exp(-|w|/2)) FAILs."""
    mod = parse_module("""
N = DimVar("N", 1, 1 << 20)

@func
def f(x: Tensor[(N,), bf16]) -> Tensor[(N,), bf16]:
    return silu(x)
""")
    x = np.arange(1 << 16, dtype=np.uint16).view(BF)
    w = x.astype(np.float32)
    with np.errstate(all="ignore"):
        h = _ex2_ftz(np.abs(w) * np.float32(-1.4426950408889634), 0)
        y = np.where(w < 0, (w * h) * h, w) / (np.float32(1.0) + h * h)
    v = check(mod, "f", [x], y.astype(BF))
    assert v.status == "FAIL"


# -- fused rows, ragged rows and the long-row fallback (interpreter) ------------------------------
@pytest.mark.parametrize("entry", ["add_rmsnorm", "softmax_scale_mask", "rmsnorm",
                                   "softmax_rows", "swiglu"])
def test_rows_and_fused_rows_are_one_kernel_and_pass_on_ragged_rows(entry: str) -> None:
    xs = _inputs(entry, 6, 1000, seed=1)
    comp = tf_compile(MOD, entry, [x.shape for x in xs], "triton", cfg=TRITON_TILES)
    assert len(comp.kernels) == 1
    v = check(MOD, entry, xs, comp(xs))
    assert v.status == "PASS", v.message[:2000]


@pytest.mark.parametrize("entry", ["rmsnorm", "softmax_rows"])
def test_rows_longer_than_a_tile_fall_back_to_a_correct_tile_loop(entry: str) -> None:
    xs = _inputs(entry, 2, TRITON_TILES.max_row + 3000, seed=2)
    comp = tf_compile(MOD, entry, [x.shape for x in xs], "triton", cfg=TRITON_TILES)
    report = explain(comp.program, TRITON_TILES, "test")
    assert "mapping: rows, tile loop" in report
    assert f"does not fit one tile (max_row = {TRITON_TILES.max_row})" in report
    v = check(MOD, entry, xs, comp(xs))
    assert v.status == "PASS", v.message[:2000]


# -- the "no valid lane" flag of a masked float sum (F45) ----------------------------------------
@pytest.mark.parametrize("entry,shape,flag", [
    ("rowsum", (6, 1000), False),   # edge mask along the reduced axis only: lane 0 is valid
    ("colsum", (1000, 6), False),
    ("rowsum", (1000, 6), True),    # the mask also bounds the kept (row) axis: flag kept
    ("colsum", (7, 1000), True),
])
def test_the_no_valid_lane_flag_is_rendered_only_where_a_row_can_have_none(
        entry: str, shape: tuple[int, int], flag: bool) -> None:
    """A masked float sum of no valid lane is +0, which the tree of -0 identities would not
    give: the renderer adds a block reduction of the mask (``t_any``) unless the mask is an
    edge mask of reduced axes only (a tile's first lane along them is inside the domain).
    Either way the kernel is judged on rows of -0 (the case the flag exists for), +-inf and
    ragged edges."""
    src = _gpu_source(entry, [shape]).split("def k_", 1)[1]
    assert ("t_any" in src) == flag, src
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    x[0, :] = -0.0
    x[:, 0] = -0.0
    x[-1, 1] = np.inf
    comp = tf_compile(MOD, entry, [shape], "triton", cfg=TRITON_TILES)
    v = check(MOD, entry, [x], comp([x]))
    assert v.status == "PASS", v.message[:2000]


@pytest.mark.parametrize("target", ["simd", "cuda-host"])
@pytest.mark.parametrize("entry,shape,flag", [
    ("rowsum", (6, 1000), False), ("colsum", (1000, 6), False),
    ("rowsum", (1000, 6), True), ("colsum", (7, 1000), True),
])
def test_the_c_family_renders_the_flag_by_the_same_rule(target, entry, shape, flag) -> None:
    """The SIMD C and CUDA renderers read the same fact (``kir.a_lane_is_valid``): the flag's
    OR-accumulation (``|=``) is rendered only where a row can have no valid lane; both kernels
    are judged on rows of -0, +-inf and ragged edges."""
    comp = tf_compile(MOD, entry, [shape], target)
    assert ("|= " in comp.executable.source) == flag
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    x[0, :] = -0.0
    x[:, 0] = -0.0
    x[-1, 1] = np.inf
    v = check(MOD, entry, [x], comp([x]))
    assert v.status == "PASS", v.message[:2000]


# -- loads hoisted ahead of the reductions (a tuner option, F45) ---------------------------------
def _check_order(body) -> None:
    """Every instruction of ``body`` follows each instruction of ``body`` it reads."""
    made = {r for ins in body for r in ins.results()}
    seen: set[str] = set()
    for ins in body:
        missing = [n for n in ins.operands() if n in made and n not in seen]
        assert not missing, f"{ins} reads {missing} before they are made"
        seen.update(ins.results())


@pytest.mark.parametrize("entry", ["rmsnorm", "add_rmsnorm", "softmax_scale_mask", "swiglu"])
@pytest.mark.parametrize("cols", [1000, TRITON_TILES.max_row + 3000])
def test_hoisted_loads_keep_every_dependency_and_pass(entry: str, cols: int) -> None:
    """``hoist_loads`` moves each load, with what its address and mask need, ahead of the
    rest: the same instructions, each after what it reads; in a one-pass row kernel every
    load precedes every reduction (the weight's no longer waits them out); a load inside a
    tile loop stays inside it. The hoisted kernels are judged in the interpreter."""
    xs = _inputs(entry, 3, cols, seed=4)
    shapes = [x.shape for x in xs]
    comp = tf_compile(MOD, entry, shapes, "interp", cfg=TRITON_TILES)
    for k in comp.program.kernels():
        h = hoisted(k.body)
        assert sorted(map(repr, h)) == sorted(map(repr, k.body))
        _check_order(h)
        kinds = [type(i).__name__ for i in h]
        if "Reduce" in kinds and "TileLoop" not in kinds:
            assert max(i for i, n in enumerate(kinds) if n == "Load") < kinds.index("Reduce")
    cfg = replace(TRITON_TILES, launch=(("hoist_loads", 1),))
    hc = tf_compile(MOD, entry, shapes, "triton", cfg=cfg)
    v = check(MOD, entry, xs, hc(xs))
    assert v.status == "PASS", v.message[:2000]


def test_the_order_check_would_catch_a_load_moved_above_its_mask() -> None:
    xs = _inputs("rmsnorm", 3, 1000)
    comp = tf_compile(MOD, "rmsnorm", [x.shape for x in xs], "interp", cfg=TRITON_TILES)
    body = list(comp.program.kernels()[0].body)
    load = next(i for i, ins in enumerate(body) if isinstance(ins, kir.Load) and ins.mask)
    with pytest.raises(AssertionError, match="before they are made"):
        _check_order([body[load], *body[:load], *body[load + 1:]])


# -- tilefoundry compile --explain -----------------------------------------------------------------
def test_compile_explain_names_the_mapping_and_why(capsys, tmp_path: Path) -> None:
    spec = tmp_path / "rows_mod.py"
    spec.write_text("from tilefoundry.semantics.dsl import parse_module\n"
                    f"MOD = parse_module({SOURCE!r})\n")
    rc = main(["compile", f"{spec}:MOD", "rmsnorm", "--shape", "64x4096", "--shape", "4096",
               "--target", "triton", "--explain"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "mapping: rows: 1 row(s) of 4096 lanes per program, kept in registers" in out
    assert "why: every reduced axis fits one tile" in out
    assert "load x: contiguous along axis 1, 8 element(s) aligned: up to 16-byte vectors" in out
    assert "reduce.max over axis 1 [unordered_tree] (f32): a block reduction of integer keys" \
        in out
    assert "launch options from the defaults by tile size" in out
    rc = main(["compile", f"{spec}:MOD", "rmsnorm", "--shape", "64x4096", "--shape", "4096",
               "--explain"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and "--explain reports the triton and cuda targets" in err
