"""The tile family through the compiler: Select, Bitcast and Scan lowered to the kernel IR, run
by the kernel-IR interpreter and the SIMD C backend — bit-identical to the reference where the
contract is exact (fold_left scans, max / min, integers, bits), admitted by the oracle under
ordered_tree — with the long-axis TileLoop path (a small ``max_row``) and ragged extents; the
constructs out of reach report NOT_SUPPORTED naming themselves; the Triton renderer renders the
integer Scan(mul) (Hillis-Steele BinOp steps, D402); fusion keeps ``const -0.0`` and ``const 0.0`` apart."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler import kir
from tilefoundry.compiler.errors import KernelIRError
from tilefoundry.compiler.pipeline import compile
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.oracle.compare import PASS, check
from tilefoundry.semantics.dtypes import cast, to_bits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Tuple, Var
from tilefoundry.semantics.ops import Bitcast, Scan, Select
from tilefoundry.semantics.types import TensorType

F32, BF16, I32, U8, BOOL, U32 = DType.F32, DType.BF16, DType.I32, DType.U8, DType.BOOL, \
    DType.U32
CFGS = [TileConfig(), TileConfig(max_row=4)]  # one tile per fiber; a TileLoop over the lanes


def _module(types, body_fn):
    ps = [Var(f"x{i}", TensorType(s, d)) for i, (s, d) in enumerate(types)]
    return Module((Function("f", tuple(ps), body_fn(*ps), None),))


def _same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(to_bits(a), to_bits(b))


def _exact_program():
    def body(x, c, y):
        return Tuple(tuple(Call(op, args) for op, args in [
            (Scan(1, "add", policy="fold_left"), (x,)),
            (Scan(1, "add", inclusive=False, policy="fold_left"), (x,)),
            (Scan(1, "add", inclusive=False, seed=-0.0, policy="fold_left"), (x,)),
            (Scan(0, "max", inclusive=False), (x,)),
            (Scan(1, "min", seed=1.5), (x,)),
            (Scan(1, "add", seed=250), (y,)),
            (Scan(0, "max", inclusive=False, seed=3), (y,)),
            (Select(), (c, x, Call(Scan(1, "max"), (x,)))),
            (Bitcast(U32), (x,)),
        ]))
    return _module([((3, 13), F32), ((13,), BOOL), ((3, 13), U8)], body)


@pytest.fixture(scope="module")
def exact_inputs():
    r = np.random.default_rng(5)
    x = r.choice(np.array([1.0, -0.0, 0.0, 2.0 ** -24, -3.5, np.nan, np.inf, 1e8], np.float32),
                 (3, 13))
    return [x, r.random(13) < 0.5, r.integers(0, 256, (3, 13)).astype(np.uint8)]


@pytest.mark.parametrize("target", ["interp", "simd"])
@pytest.mark.parametrize("cfg", CFGS, ids=["whole-row", "tile-loop"])
def test_exact_tile_ops_are_bit_identical(target, cfg, exact_inputs):
    m = _module_cache = _exact_program()
    ref = evaluate(m, "f", exact_inputs)
    out = compile(_module_cache, "f", [i.shape for i in exact_inputs], target, cfg=cfg)(
        exact_inputs)
    assert len(out) == len(ref)
    for i, (o, r) in enumerate(zip(out, ref, strict=True)):
        assert _same_bits(o, r), (i, o, r)


@pytest.mark.parametrize("target", ["interp", "simd"])
@pytest.mark.parametrize("cfg", CFGS, ids=["whole-row", "tile-loop"])
def test_ordered_tree_and_low_precision_scans_are_admitted(target, cfg):
    m = _module([((4, 9), BF16), ((4, 9), F32)],
                lambda a, b: Tuple((Call(Scan(1, "add", seed=1.0), (a,)),
                                    Call(Scan(0, "add", inclusive=False), (b,)),
                                    Call(Scan(1, "min", inclusive=False), (a,)))))
    r = np.random.default_rng(9)
    a = cast(r.standard_normal((4, 9)).astype(np.float32), BF16)
    b = r.standard_normal((4, 9)).astype(np.float32)
    out = compile(m, "f", [(4, 9), (4, 9)], target, cfg=cfg)([a, b])
    v = check(m, "f", [a, b], out)
    assert v.status == PASS, v


@pytest.mark.parametrize("target", ["interp", "simd"])
@pytest.mark.parametrize("cfg", CFGS, ids=["whole-row", "tile-loop"])
def test_integer_product_scan_wraps(target, cfg):
    """combine=mul lowers to a kernel-IR prod Reduce: the wrapping product, seed once."""
    m = _module([((2, 21), DType.I8), ((2, 21), I32)],
                lambda a, b: Tuple((Call(Scan(1, "mul", seed=3), (a,)),
                                    Call(Scan(1, "mul", inclusive=False), (b,)))))
    r = np.random.default_rng(2)
    a = r.integers(-5, 6, (2, 21)).astype(np.int8)
    b = r.integers(-9, 10, (2, 21)).astype(np.int32)
    ref = evaluate(m, "f", [a, b])
    out = compile(m, "f", [(2, 21), (2, 21)], target, cfg=cfg)([a, b])
    for o, w in zip(out, ref, strict=True):
        assert _same_bits(o, w)


def test_triton_renders_the_integer_product_scan():
    """Scan(mul) lowers to Hillis-Steele steps of a wrapping BinOp mul (D402), no ``prod``
    Reduce, so the Triton renderer (which reports a ``prod`` Reduce NOT_SUPPORTED) renders it;
    tests/compiler/test_scan_work.py runs it in Triton's interpreter."""
    pytest.importorskip("triton")
    from tilefoundry.compiler.render_triton import render

    m = _module([((4,), I32)], lambda x: Call(Scan(0, "mul"), (x,)))
    prog = compile(m, "f", [(4,)], "interp").program
    ins = [i for k in prog.kernels() for i in kir.iter_instrs(k.body)]
    assert not any(isinstance(i, kir.Reduce) for i in ins)
    assert any(isinstance(i, kir.BinOp) and i.kind == "mul" for i in ins)
    assert "def k" in render(prog)


def test_exclusive_scan_identity_survives_fusion():
    """The TileLoop accumulator starts at -0 (IEEE's exact additive identity) and exclusive[0]
    is the HIR identity +0: CSE must not merge the two constants (it did: -0.0 == 0.0)."""
    m = _module([((2, 5), F32)], lambda x: Call(Scan(1, inclusive=False), (x,)))
    x = np.ones((2, 5), np.float32)
    for fuse in (False, True):
        out = compile(m, "f", [(2, 5)], "interp", cfg=TileConfig(max_row=2), fuse=fuse)([x])
        assert out[:, 0].tolist() == [0.0, 0.0] and not np.signbit(out[:, 0]).any()


def test_kernel_ir_bitcast_verifier():
    bufs = (kir.Buffer("x", "i32", (4,), (1,), "input"), kir.Buffer("y", "f32", (4,), (1,)))
    k = kir.Kernel("k", (4,), (4,), (kir.Load("%0", "x", (1,)), kir.Bitcast("%1", "%0", "f32"),
                                     kir.Store("y", (1,), "%1")))
    with pytest.raises(KernelIRError, match="only f32 <-> u32"):
        kir.verify(kir.Program("p", bufs, ("x",), "y", (k,)))


def test_triton_renderer_renders_bitcast_and_u32():
    """Unfused (a u32 buffer between two kernels, stored as int32) and fused (the u32 value
    stays in one kernel): both render, with `.to(bitcast=True)`; the values are checked in the
    interpreter by tests/compiler/test_triton_backend.py::test_bitcast_keeps_every_bit_both_ways."""
    pytest.importorskip("triton")
    from tilefoundry.compiler.render_triton import render

    m = _module([((4,), F32)], lambda x: Call(Bitcast(F32), (Call(Bitcast(U32), (x,)),)))
    unfused = compile(m, "f", [(4,)], "interp", fuse=False).program
    assert any(b.dtype == "u32" for b in unfused.buffers)
    src = render(unfused, interpret=True)
    assert "tl.uint32, bitcast=True" in src and "tl.float32, bitcast=True" in src
    assert "'int32'" in src  # the u32 storage's pointer type
    fused = compile(m, "f", [(4,)], "interp").program
    assert "bitcast=True" in render(fused, interpret=True)


def test_integer_reduce_carry_is_counted_once():
    """A TileLoop carry (the Reduce's init) of an integer sum over a contiguous axis enters
    once, not once per interleaved C accumulator (the SIMD renderer seeded all 8)."""
    from tilefoundry.semantics.ops import Reduce, ReduceKind

    m = _module([((2, 64), I32)], lambda x: Call(Reduce((1,), False, ReduceKind.SUM), (x,)))
    x = np.arange(128, dtype=np.int32).reshape(2, 64)
    for target in ("interp", "simd"):
        out = compile(m, "f", [(2, 64)], target, cfg=TileConfig(max_row=16))([x])
        assert out.tolist() == [sum(range(64)), sum(range(64, 128))], target


def test_masked_integer_sum_over_a_ragged_row_on_simd():
    """A plain i32 Reduce over 33 lanes (block 64, an edge mask): the SIMD build gave 14 for 66
    (GCC 12 -O3 -march=native vectorizing the interleaved accumulators' outer loop)."""
    from tilefoundry.semantics.ops import Reduce, ReduceKind

    for n in (17, 33, 100):
        m = _module([((3, n), I32)], lambda x: Call(Reduce((1,), False, ReduceKind.SUM), (x,)))
        x = np.full((3, n), 2, np.int32)
        out = compile(m, "f", [(3, n)], "simd")([x])
        assert out.tolist() == [2 * n] * 3, (n, out)
