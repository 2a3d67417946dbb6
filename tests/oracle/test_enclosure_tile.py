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
        # row 0's indices are free among its tied elements, yet indices of its axis: judged
        # by [0, 5] (D274), so the reference PASSes and an index past the axis FAILs
        assert idx.status == PASS and idx.unjudged == 0
        past = (ref[0], ref[1].copy())
        past[1][0, 0] = 6
        assert check(m, "f", [xv], past).status == FAIL
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


def test_bitcast_in_a_called_function_knows_a_computed_nan_from_an_input():
    """The H200 CUDA fuzz's fuzz/0/002580: the Bitcast's operand is the callee's parameter,
    bound to a computed x / x. What decides is the value, not the node: the callee's
    parameter bound to x - x has free NaN bits, bound to the input x itself exact bits."""
    from tilefoundry.semantics.ir import Tuple
    from tilefoundry.semantics.ops import Bitcast

    t = TensorType((2,), F32)
    a = Var("a", t)
    g = Function("g", (a,), Call(Bitcast(DType.U32), (a,)), None)
    x = Var("x", t)
    body = Tuple((Call(g, (Call(Binary(BinaryKind.SUB), (x, x)),)), Call(g, (x,))))
    m = Module((Function("f", (x,), body, None), g))
    xv = np.array([np.inf, 0.0], np.float32)
    xv[1] = np.uint32(0x7FA00000).view(np.float32)
    ref = evaluate(m, "f", [xv])
    assert [r.tolist() for r in ref] == [[0x7FC00000] * 2, [0x7F800000, 0x7FA00000]]
    assert check(m, "f", [xv], (_u32(0x7FFFFFFF, 0xFFC00000), ref[1])).status == PASS
    assert check(m, "f", [xv], (ref[0], _u32(0x7F800000, 0x7FC00000))).status == FAIL


def test_integer_wraparound_of_an_enclosed_value_never_rejects_the_reference():
    """H200 fuzz finds (Triton fuzz/0/000653, CUDA fuzz/0/018018 and 015009): TopK's indices
    over possibly-NaN values are enclosed by everything; a Cast of them to i8 evaluated at the
    corners gave [-1, 0] (i64 min / max wrap to 0 / -1), an integer abs_max at them
    [-2^63, 0] (|INT_MIN| wraps), an integer square of wide values the hull of two wrapped
    squares; each rejected the reference's own index 1. A wrapping integer op now bounds a
    value only where the box maps onto one run of the result (D17, D34)."""
    src = '''
@func
def f(x: Tensor[(2,), f32]):
    v, i = topk(sigmoid(x), 1, 0, True, True)
    return cast(i, i8), reduce_abs_max(i, (0,), False), square(i)
'''
    from tilefoundry.semantics.dsl import parse_module

    m = parse_module(src)
    x = np.array([np.nan, 0.3], np.float32)  # a possibly-NaN value: the indices are free
    ref = evaluate(m, "f", [x])  # ... within the axis, [0, 1] (D274)
    assert [int(np.asarray(r).ravel()[0]) for r in ref] == [1, 1, 1]
    v = check(m, "f", [x], ref)
    assert [o.status for o in v.outputs] == [PASS, PASS, PASS], [o.detail for o in v.outputs]
    zero = (np.zeros(1, np.int8), np.asarray(0), np.zeros(1, np.int64))  # the other index
    assert [o.status for o in check(m, "f", [x], zero).outputs] == [PASS, PASS, PASS]
    two = (np.full(1, 2, np.int8), np.asarray(2), np.full(1, 4))  # no index of a 2-element axis
    assert [o.status for o in check(m, "f", [x], two).outputs] == [FAIL, FAIL, FAIL]


def test_bitcast_of_an_enclosed_value_is_judged_by_the_patterns_of_its_box():
    """A Bitcast of an enclosed f32 was everything (UNJUDGED). An f32's pattern grows with its
    value among non-negative floats and with its magnitude among negative ones, so exp's
    3-ulp box maps to 3 patterns either side: within them PASS, past them FAIL, for positive
    and negative values; a box admitting NaN admits NaN patterns only; and back, u32 -> f32
    of an enclosed pattern interval is the floats of those patterns."""
    from tilefoundry.semantics.ops import Bitcast

    U32 = DType.U32
    x = Var("x", TensorType((3,), F32))
    xv = np.array([0.5, -2.0, 10.0], np.float32)
    pos = Call(Bitcast(U32), (_exp(x),))
    neg = Call(Bitcast(U32), (Call(Unary(UnaryKind.NEG), (_exp(x),)),))
    for body in (pos, neg):
        m = Module((Function("f", (x,), body, None),))
        ref = evaluate(m, "f", [xv])
        v = check(m, "f", [xv], ref)
        assert v.status == PASS and v.outputs[0].unjudged == 0, v.outputs[0].detail
        for k in (1, 2, 3):
            assert check(m, "f", [xv], ref + np.uint32(k)).status == PASS
            assert check(m, "f", [xv], ref - np.uint32(k)).status == PASS
        assert check(m, "f", [xv], ref + np.uint32(8)).status == FAIL
        assert check(m, "f", [xv], ref ^ np.uint32(0x80000000)).status == FAIL  # the sign
    # a box that may be NaN (log of exp(x) - 2: negative at x = 0.5) admits NaN patterns only
    two = Call(Binary(BinaryKind.SUB), (_exp(x), Call(Binary(BinaryKind.ADD), (x, x))))
    lg = Call(Bitcast(U32), (Call(Unary(UnaryKind.LOG), (two,)),))
    m = Module((Function("f", (x,), lg, None),))
    ref = evaluate(m, "f", [xv])
    assert check(m, "f", [xv], ref).status != FAIL
    # back: Bitcast(f32) of the enclosed patterns is the floats between them
    back = Call(Bitcast(F32), (pos,))
    m = Module((Function("f", (x,), back, None),))
    ref = evaluate(m, "f", [xv])
    v = check(m, "f", [xv], ref)
    assert v.status == PASS and v.outputs[0].unjudged == 0
    assert check(m, "f", [xv], ref * np.float32(1.001)).status == FAIL


def test_a_wide_integer_box_through_a_wrapping_op_is_not_bounded_by_its_corners():
    """D268 with a box the corners misjudge: exp(20) = 485,165,184 in f32, whose 3-ulp box
    is the integers 485,165,088 .. 485,165,280 after a Cast to i64; their i8 casts wrap
    through all 256 values, yet the corners alone gave [-32, 32], rejecting the reference's
    -128 — likewise an i32 square of the box. Now both are everything there (UNJUDGED)."""
    from tilefoundry.semantics.dsl import parse_module

    m = parse_module('''
@func
def f(x: Tensor[(1,), f32]):
    n = cast(exp(x), i64)
    return cast(n, i8), square(cast(n, i32))
''')
    x = np.array([20.0], np.float32)
    ref = evaluate(m, "f", [x])
    assert int(ref[0][0]) == -128
    v = check(m, "f", [x], ref)
    assert [o.status for o in v.outputs] == [UNJUDGED, UNJUDGED], [o.detail for o in v.outputs]
