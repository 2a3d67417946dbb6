"""Fusion: elementwise chains, row reductions with their producers and consumers (RMSNorm,
softmax, LayerNorm) and matmul epilogues become one kernel; fusion never changes a value."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from compiler_helpers import assert_bitexact, module_of, one_op, var

from tilefoundry.compiler import kir
from tilefoundry.compiler.examples import EXAMPLES
from tilefoundry.compiler.kir import Load, Reduce, Round, Store
from tilefoundry.compiler.pipeline import compile
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Tuple
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    LayerNorm,
    MatMul,
    ReduceKind,
    ReLU,
    RMSNorm,
    SoftMax,
    Transpose,
)
from tilefoundry.semantics.ops import (
    Reduce as HReduce,
)

RNG = np.random.default_rng(11)


def bf16(*shape):
    return RNG.standard_normal(shape).astype(ml_dtypes.bfloat16)


def instrs(kernel, cls):
    return [i for i in kir.iter_instrs(kernel.body) if isinstance(i, cls)]


def test_bf16_rmsnorm_program_lowers_to_one_kernel():
    x, w = bf16(6, 96), bf16(96)
    for entry in ("rmsnorm", "rmsnorm_parts"):
        c = compile(EXAMPLES, entry, [x.shape, w.shape], print_after={"lower", "fuse"})
        unfused = compile(EXAMPLES, entry, [x.shape, w.shape], fuse=False)
        print(c.printed["fuse"])
        assert len(c.kernels) == 1, c.printed["fuse"]
        assert len(unfused.kernels) > 1
        k = c.kernels[0]
        assert {i.buffer for i in instrs(k, Load)} == {"x", "w"} | {
            b.name for b in c.program.buffers if b.kind == "const"}
        assert len(instrs(k, Store)) == 1 and len(instrs(k, Reduce)) == 1
        got = c([x, w])
        assert np.array_equal(got.view(np.uint16), unfused([x, w]).view(np.uint16))
        ref = evaluate(EXAMPLES, entry, [x, w])
        assert np.array_equal(got.view(np.uint16), ref.view(np.uint16))
    # the primitive program keeps one rounding per HIR op inside the one kernel
    c = compile(EXAMPLES, "rmsnorm_parts", [x.shape, w.shape])
    k = c.kernels[0]
    assert len(instrs(k, Round)) == 5 and len(instrs(k, kir.Math)) == 1  # rsqrt rounds itself


def test_softmax_and_layernorm_rows_are_single_kernels():
    x, w, b = bf16(5, 40), bf16(40), bf16(40)
    assert len(compile(EXAMPLES, "softmax_parts", [x.shape]).kernels) == 1
    ps = [var("x", x.shape, DType.BF16), var("w", w.shape, DType.BF16),
          var("b", b.shape, DType.BF16)]
    for op, args in ((SoftMax(-1), ps[:1]), (RMSNorm(1e-6), ps[:2]), (LayerNorm(1e-5), ps)):
        m = module_of(ps[:len(args)], Call(op, tuple(args)))
        c = assert_bitexact(m, [x, w, b][:len(args)])
        assert len(c.kernels) == 1, (op, [k.name for k in c.kernels])


def test_rows_that_do_not_fit_keep_separate_kernels_with_the_same_values():
    x, w = bf16(4, 64), bf16(64)
    small = TileConfig(tile_elems=32, max_row=16, k_block=8)
    c = compile(EXAMPLES, "rmsnorm_parts", [x.shape, w.shape], cfg=small)
    assert len(c.kernels) > 1
    assert any(k.loop_axes for k in c.kernels)
    whole = compile(EXAMPLES, "rmsnorm_parts", [x.shape, w.shape])([x, w])
    # the mean's tree changes with the tile loop (both admitted); the rest is the same code
    assert np.abs(c([x, w]).astype(np.float32) - whole.astype(np.float32)).max() < 0.1


def test_elementwise_chain_and_matmul_epilogue():
    x, y = (RNG.standard_normal(1000).astype(np.float32) for _ in range(2))
    c = compile(EXAMPLES, "axpby_chain", [x.shape, y.shape])
    assert len(c.kernels) == 1 and len(instrs(c.kernels[0], Store)) == 1
    a, b = RNG.standard_normal((6, 40)).astype(np.float32), \
        RNG.standard_normal((40, 5)).astype(np.float32)
    pa, pb = var("a", a.shape, DType.F32), var("b", b.shape, DType.F32)
    mm = Call(MatMul(), (pa, pb))
    m = module_of([pa, pb], Call(ReLU(), (Call(Binary(BinaryKind.ADD), (mm, mm)),)))
    c = assert_bitexact(m, [a, b], cfg=TileConfig(k_block=16))
    assert len(c.kernels) == 1 and c.kernels[0].loop_axes  # the K loop, then the epilogue


def test_no_fusion_across_instances():
    """A consumer reading the producer's output transposed needs other instances' values:
    the two kernels stay apart (a merge would race)."""
    x = RNG.standard_normal((8, 8)).astype(np.float32)
    p = var("x", x.shape, DType.F32)
    neg = Call(Binary(BinaryKind.SUB), (p, p))
    m = module_of([p], Call(Binary(BinaryKind.ADD), (Call(Transpose((1, 0)), (neg,)), neg)))
    c = assert_bitexact(m, [x])
    assert len(c.kernels) == 2


def test_shared_intermediates_stay_materialized_only_when_needed():
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    p = var("x", x.shape, DType.F32)
    sq = Call(Binary(BinaryKind.MUL), (p, p))
    s = Call(HReduce((1,), True, ReduceKind.SUM, "fold_left"), (sq,))
    m = module_of([p], Tuple((sq, Call(Binary(BinaryKind.DIV), (sq, s)))))
    c = assert_bitexact(m, [x])
    assert len(c.kernels) == 1
    stored = {i.buffer for i in instrs(c.kernels[0], Store)}
    assert stored == set(c.program.output_names())  # sq is an output, s is not stored


def test_fusion_never_changes_values_on_random_programs():
    from tilefoundry.conformance.selection import GeneratedCases, load_generator
    from tilefoundry.oracle.compare import compare_exact

    gen = GeneratedCases(load_generator(), 5)
    checked = 0
    for i in range(40):
        m, e, ins = gen[i].build()
        try:
            fused = compile(m, e, [np.shape(v) for v in ins])
        except Exception:  # an op without a lowering rule (NOT_SUPPORTED)
            continue
        unfused = compile(m, e, [np.shape(v) for v in ins], fuse=False)
        a, b = fused(ins), unfused(ins)
        for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,),
                        strict=True):
            assert compare_exact(v, u).all(), gen[i].id
        checked += 1
    assert checked >= 10


def test_one_op_kernels_fuse_with_broadcast_operands():
    x, r = RNG.standard_normal((4, 8)).astype(np.float32), RNG.standard_normal(
        (4, 1)).astype(np.float32)
    m = one_op(Binary(BinaryKind.MUL), x, r)
    assert len(assert_bitexact(m, [x, r]).kernels) == 1


def test_a_long_chain_fuses_to_one_kernel_with_the_reference_bits():
    """The incremental merge (issue 21.3: each merge renames only the kernel merged in and
    keeps the host's facts) fuses a 300-op chain into one kernel whose result is the
    reference's, bit for bit, and the unfused program's."""
    x = var("x", (3, 5), DType.BF16)
    e = x
    kinds = (BinaryKind.MUL, BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MAX)
    for k in range(300):
        e = Call(Binary(kinds[k % 4]), (e, x))
    m = module_of([x], e)
    data = [bf16(3, 5)]
    c = assert_bitexact(m, data)
    assert len(c.kernels) == 1
    unfused = compile(m, "f", [(3, 5)], "interp", fuse=False)
    assert len(unfused.kernels) == 300
    assert np.array_equal(c(data).view(np.uint16), unfused(data).view(np.uint16))
