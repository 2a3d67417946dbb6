"""Copy forwarding (``compiler/forward.py``, D549): a later kernel reads a copy's source through
the copy's index map, and the copy goes — only where every load of the copy composes, nothing
writes the source in between, and the consumer gains (a copy, or unit-stride axes kept).
Hand-built kernel IR checks each condition (the program run by the kernel interpreter before and
after, bit for bit); HIR programs check the pipeline against the reference evaluator."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tilefoundry.compiler import kir
from tilefoundry.compiler.forward import forward_copies
from tilefoundry.compiler.interp import run_program
from tilefoundry.compiler.kir import BinOp, Buffer, Const, HostLoop, Kernel, Load, Program, Store
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.evaluator.core import evaluate

X = Buffer("x", "f32", (8, 4), (4, 1), "input")
T = Buffer("t", "f32", (4, 8), (8, 1))  # x transposed by the copy P


def _buf(name: str, shape: tuple[int, ...], kind: str = "temp") -> Buffer:
    return Buffer(name, "f32", shape, kir.c_strides(shape), kind)


def _copy(name: str, src: str, src_strides, dst: str, dom, offset: int = 0) -> Kernel:
    return Kernel(name, tuple(dom), tuple(dom), (
        Load("v", src, tuple(src_strides), offset), Store(dst, kir.c_strides(tuple(dom)), "v")))


P = _copy("k0_transpose", "x", (1, 4), "t", (4, 8))  # t[i, j] = x[j, i]


def _prog(steps, bufs, outputs) -> Program:
    return Program("p", (X, T, *bufs), ("x",), outputs, tuple(steps))


def _x() -> np.ndarray:
    # distinct bit patterns, -0.0 and a NaN payload among them: a copy moves bits
    v = np.arange(32, dtype=np.float32).reshape(8, 4) - 7.5
    v[1, 2] = -0.0
    v.view(np.uint32)[3, 1] = 0x7FC01234
    return v


def _same_run(before: Program, after: Program) -> None:
    a = run_program(before, [_x()])
    b = run_program(after, [_x()])
    assert np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))


def _loads(k: Kernel) -> list[Load]:
    return [i for i in kir.iter_instrs(k.body) if isinstance(i, Load)]


def test_a_slice_of_a_transpose_reads_the_source_through_the_composed_map() -> None:
    """Rows 1..2 of t (offset 8) are columns 1..2 of x: the slice copy reads x at offset 1 with
    strides (1, 4), and the transpose is gone."""
    u = _buf("u", (2, 8))
    c = _copy("k1_slice", "t", (8, 1), "u", (2, 8), offset=8)
    before = _prog([P, c], [u], "u")
    log: list[str] = []
    after = forward_copies(before, log)
    assert [k.name for k in after.steps] == ["k1_slice"]
    (ld,) = _loads(after.steps[0])
    assert (ld.buffer, ld.strides, ld.offset) == ("x", (1, 4), 1)
    assert log == ["k0_transpose: t read from x by k1_slice"]
    _same_run(before, after)


def _add_one(src_strides, dom=(4, 8)) -> Kernel:
    return Kernel("k1_add", dom, dom, (
        Load("a", "t", tuple(src_strides)), Const("one", 1.0, "f32"),
        BinOp("s", "add", "a", "one"), Store("u", kir.c_strides(dom), "s")))


def test_a_non_copy_consumer_is_forwarded_only_where_its_unit_stride_axes_stay() -> None:
    """An elementwise consumer of the transpose would read x column-wise (unit stride on axis 0
    instead of 1): the copy stays. Of an identity copy it reads x row-wise as before: forwarded."""
    u = _buf("u", (4, 8))
    kept = _prog([P, _add_one((8, 1))], [u], "u")
    assert forward_copies(kept) == kept
    ident = _copy("k0_copy", "x", (4, 1), "t", (8, 4))
    t2 = Buffer("t", "f32", (8, 4), (4, 1))
    u2 = _buf("u", (8, 4))
    before = Program("p", (X, t2, u2), ("x",), "u", (ident, _add_one((4, 1), (8, 4))))
    after = forward_copies(before)
    assert [k.name for k in after.steps] == ["k1_add"]
    assert [(ld.buffer, ld.strides) for ld in _loads(after.steps[0])] == [("x", (4, 1))]
    _same_run(before, after)


def test_a_transpose_of_a_transpose_becomes_one_contiguous_read() -> None:
    """t2 = transpose(t): the second copy reads x with x's own strides; an elementwise consumer
    of that identity copy then reads x directly (two copies and a read become one read)."""
    t2 = _buf("t2", (8, 4))
    u = _buf("u", (8, 4))
    second = _copy("k1_transpose", "t", (1, 8), "t2", (8, 4))
    add = Kernel("k2_add", (8, 4), (8, 4), (
        Load("a", "t2", (4, 1)), Const("one", 1.0, "f32"), BinOp("s", "add", "a", "one"),
        Store("u", (4, 1), "s")))
    before = _prog([P, second, add], [t2, u], "u")
    after = forward_copies(before)
    assert [k.name for k in after.steps] == ["k2_add"]
    assert [(ld.buffer, ld.strides, ld.offset) for ld in _loads(after.steps[0])] == \
        [("x", (4, 1), 0)]
    _same_run(before, after)


@pytest.mark.parametrize("dom,strides,offset,why", [
    ((32,), (1,), 0, "a flat read walks off a row of t into the next"),
    ((4,), (1,), 6, "from column 6, four lanes pass the row's end"),
    ((2,), (1,), 32, "the offset is past the end of t"),
    ((4,), (2,), 0, "stride 2 steps along no axis of the copy's domain"),
])
def test_a_load_that_does_not_compose_keeps_the_copy(dom, strides, offset, why) -> None:
    u = _buf("u", dom)
    before = _prog([P, _copy("k1_copy", "t", strides, "u", dom, offset)], [u], "u")
    assert forward_copies(before) == before, why
    _same_run(before, before)  # the program is well formed: it runs


def test_a_copy_whose_source_is_written_later_or_whose_dst_is_needed_stays() -> None:
    """x overwritten after P (the consumer must see the old values), t a program output, t read
    by a step before P inside a loop, t named by a loop: no forwarding."""
    u = _buf("u", (2, 8))
    c = _copy("k1_slice", "t", (8, 1), "u", (2, 8), offset=8)
    w = Kernel("k_w", (8, 4), (8, 4), (Const("z", 0.0, "f32"), Store("x", (4, 1), "z")))
    assert forward_copies(_prog([P, w, c], [u], "u")).steps == (P, w, c)
    assert forward_copies(_prog([P, c], [u], ("t", "u"))).steps == (P, c)
    i = Buffer("i", "i64", (), ())
    early = HostLoop("L", "i", 0, 2, 1, (), (), (c, P), ())
    assert forward_copies(_prog([early], [u, i], "u")).steps == (early,)
    carried = HostLoop("L", "i", 0, 2, 1, ("t",), ("t",), (P, c), ("t",))
    assert forward_copies(_prog([carried], [u, i], "u")).steps == (carried,)


SRC = '''
@func
def tslice(x: Tensor[(8, 6), f32]) -> Tensor[(3, 8), f32]:
    return transpose(x, (1, 0))[1:4]

@func
def ttwice(x: Tensor[(8, 6), f32]) -> Tensor[(8, 6), f32]:
    return transpose(transpose(x, (1, 0)), (1, 0)) + 1.0

@func
def tcat(x: Tensor[(8, 6), f32], y: Tensor[(2, 8), f32]) -> Tensor[(8, 8), f32]:
    return concat((transpose(x, (1, 0)), y), 0)

@func
def mm_nt(a: Tensor[(5, 8), f32], w: Tensor[(6, 8), f32]) -> Tensor[(5, 6), f32]:
    return matmul(a, transpose(w, (1, 0)))
'''


@pytest.mark.parametrize("entry,shapes,kernels", [
    ("tslice", [(8, 6)], ["k1_slice"]),
    ("ttwice", [(8, 6)], ["k2_add"]),
    ("tcat", [(8, 6), (2, 8)], ["k1_concat", "k2_concat"]),
    # the matmul would read w with a unit stride along K, not N: the transpose stays a copy
    ("mm_nt", [(5, 8), (6, 8)], ["k0_transpose", "k1_matmul"]),
])
@pytest.mark.parametrize("target", ["interp", "simd"])
def test_the_fuse_pass_forwards_copies_and_values_stay_bit_exact(entry, shapes, kernels,
                                                                 target) -> None:
    mod = parse_module(SRC)
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    xs[0].flat[3] = -0.0
    c = tf_compile(mod, entry, shapes, target)
    assert [k.name for k in c.kernels] == kernels
    ref = np.asarray(evaluate(mod, entry, xs))
    assert np.array_equal(np.asarray(c(xs)).view(np.uint32), ref.view(np.uint32))


def test_the_validator_proves_a_forwarding_and_refutes_a_wrong_one() -> None:
    """The ``fuse`` check's refinement query (``validate.refine.check_refinement``) proves the
    forwarded slice equal to the two-copy program and finds the counterexample of a forwarding
    composed one element off (offset 0 instead of 1: column 0 of x where column 1 was copied),
    which replays on the kernel interpreter."""
    z3 = pytest.importorskip("z3")  # noqa: F841
    from tilefoundry.validate.refine import check_refinement

    u = _buf("u", (2, 8))
    before = _prog([P, _copy("k1_slice", "t", (8, 1), "u", (2, 8), offset=8)], [u], "u")
    after = forward_copies(before)
    assert check_refinement(before, after, timeout_ms=10_000).status == "valid"
    (k,) = after.steps
    wrong = replace_load(after, k, offset=0)
    out = check_refinement(before, wrong, timeout_ms=10_000)
    assert out.status == "invalid" and out.counterexample is not None
    assert out.counterexample.differing


def replace_load(p: Program, k: Kernel, **changes) -> Program:
    body = tuple(dataclasses.replace(i, **changes) if isinstance(i, Load) else i for i in k.body)
    return dataclasses.replace(p, steps=(dataclasses.replace(k, body=body),))
