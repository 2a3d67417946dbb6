"""Enclosure rules of the tile family: Sort and Mma downstream of an inexact op (exp) are judged
by their enclosures — the reference's own result PASSes (soundness), a shifted Mma result FAILs
(the enclosure bounds something), Sort's indices are unjudged exactly on fibers whose enclosed
values overlap (tied inputs), and an Mma feeding an add is judged through its admitted set."""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.compare import FAIL, PASS, UNJUDGED, check
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Binary, BinaryKind, Mma, Sort, Unary, UnaryKind
from tilefoundry.semantics.types import TensorType

F32 = DType.F32


def _exp(v):
    return Call(Unary(UnaryKind.EXP), (v,))


def test_sort_of_an_inexact_value():
    x = Var("x", TensorType((3, 6), F32))
    xv = np.random.default_rng(0).uniform(-2, 2, (3, 6)).astype(np.float32)
    xv[0, :2] = 1.0  # a tie: exp's enclosures of the two overlap
    for op in (Sort(), Sort(1, True, "first")):
        m = Module((Function("f", (x,), Call(op, (_exp(x),)), None),))
        ref = evaluate(m, "f", [xv])
        v = check(m, "f", [xv], ref)
        vals, idx = v.outputs
        assert vals.status == PASS and vals.unjudged == 0
        assert idx.status == UNJUDGED and idx.unjudged == 6  # row 0 only
        swapped = (ref[0], ref[1].copy())
        swapped[1][1] = swapped[1][1][::-1]  # row 1 has no tie: a wrong permutation FAILs
        assert check(m, "f", [xv], swapped).status == FAIL


def test_mma_of_an_inexact_value_and_downstream():
    a, b, c = (Var(n, TensorType(s, F32)) for n, s in (("a", (3, 4)), ("b", (4, 2)),
                                                        ("c", (3, 2))))
    r = np.random.default_rng(1)
    ins = [r.standard_normal(s).astype(np.float32) for s in ((3, 4), (4, 2), (3, 2))]
    m = Module((Function("f", (a, b, c), Call(Mma(), (_exp(a), b, c)), None),))
    ref = evaluate(m, "f", ins)
    assert check(m, "f", ins, ref).status == PASS
    assert check(m, "f", ins, ref + np.float32(0.5)).status == FAIL
    m = Module((Function("f", (a, b, c), Call(Binary(BinaryKind.ADD),
                                              (Call(Mma(), (a, b, c)), c)), None),))
    ref = evaluate(m, "f", ins)
    v = check(m, "f", ins, ref)
    assert v.status == PASS and v.outputs[0].unjudged == 0
    assert check(m, "f", ins, ref + np.float32(0.5)).status == FAIL


def test_a_folded_sum_of_summands_that_may_be_plus_and_minus_inf_admits_nan():
    """exp(100) rounds to +inf in f32 and its enclosure is [a finite bound, +inf]; times [1, -1]
    the two summands may be +inf and -inf, so the fold's sum may be NaN — which neither the
    all-lower (-inf) nor the all-upper (+inf) evaluation shows. The reference's own NaN must
    be inside the enclosure (a CUDA fuzz case, fuzz/0/001859, had a SeededReduce whose
    enclosure said [-inf, inf] without NaN and rejected the reference's NaN)."""
    from tilefoundry.semantics.ops import Reduce, ReduceKind, SeededReduce

    x, s, z = Var("x", TensorType((2,), F32)), Var("s", TensorType((2,), F32)), \
        Var("z", TensorType((), F32))
    y = Call(Binary(BinaryKind.MUL), (_exp(x), s))
    ins = [np.array([100, 100], np.float32), np.array([1, -1], np.float32),
           np.array(0.5, np.float32)]
    for red in (Call(SeededReduce((0,), "sum", "fold_left", False), (y, z)),
                Call(SeededReduce((0,), "sum", "fold_right", False), (y, z)),
                Call(Reduce((0,), False, ReduceKind.SUM, "fold_left"), (y,))):
        m = Module((Function("f", (x, s, z), red, None),))
        ref = evaluate(m, "f", ins)
        assert np.isnan(ref)
        v = check(m, "f", ins, ref)
        assert v.status == UNJUDGED and v.outputs[0].unjudged == 1, (red.op, v)


def _u32(*bits):
    return np.array(bits, np.uint32)


def test_bitcast_of_a_computed_nan_admits_every_nan_pattern_and_only_those():
    """D266: a NaN an op computed (inf - inf, NaN propagated through a subtraction) has no
    contracted payload or sign, so its f32 -> u32 Bitcast admits every NaN bit pattern (the
    CUDA backend's 0x7fffffff, x86's 0xffc00000) and nothing else (not +-inf, not -0); the
    other elements stay exact, and a parameter's NaN bitcast directly keeps its payload
    (D217). A consumer of such bits is unjudged there (no rule maps a set of patterns)."""
    from tilefoundry.semantics.ops import Bitcast, Select

    U32 = DType.U32
    x = Var("x", TensorType((3,), F32))
    xv = np.array([np.inf, 1.0, 0.0], np.float32)
    xv[2] = np.uint32(0x7FA00000).view(np.float32)  # a NaN with a payload
    diff = Call(Binary(BinaryKind.SUB), (x, x))
    m = Module((Function("f", (x,), Call(Bitcast(U32), (diff,)), None),))
    ref = evaluate(m, "f", [xv])
    assert ref.tolist() == [0x7FC00000, 0, 0x7FC00000]  # D21: the positive quiet NaN
    assert check(m, "f", [xv], ref).status == PASS
    assert check(m, "f", [xv], _u32(0x7FFFFFFF, 0, 0xFFC00000)).status == PASS
    for wrong in (_u32(0x7F800000, 0, 0x7FC00000), _u32(0x7FC00000, 0, 0xFF800000),
                  _u32(0x80000000, 0, 0x7FC00000), _u32(0x7FC00000, 0x80000000, 0x7FC00000)):
        assert check(m, "f", [xv], wrong).status == FAIL, [hex(b) for b in wrong]
    direct = Module((Function("f", (x,), Call(Bitcast(U32), (x,)), None),))
    assert check(direct, "f", [xv], _u32(0x7F800000, 0x3F800000, 0x7FA00000)).status == PASS
    assert check(direct, "f", [xv], _u32(0x7F800000, 0x3F800000, 0x7FC00000)).status == FAIL
    c = Var("c", TensorType((3,), DType.BOOL))
    sel = Call(Select(), (c, Call(Bitcast(U32), (diff,)), Call(Bitcast(U32), (x,))))
    m = Module((Function("f", (c, x), sel, None),))
    ins = [np.array([True, True, False]), xv]
    ref = evaluate(m, "f", ins)
    v = check(m, "f", ins, ref)
    assert v.status == UNJUDGED and v.outputs[0].unjudged == 1  # element 0 only
    assert check(m, "f", ins, _u32(0x7FC00000, 0x3F800000, 0x7FA00000)).status == FAIL
