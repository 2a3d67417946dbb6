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
