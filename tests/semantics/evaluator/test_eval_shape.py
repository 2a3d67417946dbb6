"""Evaluator implementations of the shape family (semantics/evaluator/shape.py): ShapeExtract
and ShapeCompose, on the shape values ShapeOf produces (rank-1 int64) and dim values (rank-0
int64). Expected shapes come from numpy / torch ``.shape``, never from the implementation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tilefoundry.semantics.evaluator import families as _families  # noqa: F401  (registers)
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx, EvaluationError
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops.shape import ShapeCompose, ShapeExtract
from tilefoundry.semantics.ops.tensor import ShapeOf, Transpose
from tilefoundry.semantics.types import DimType, DimVar, ShapeType, TensorType

F32 = DType.F32
N = DimVar("N", 1, 65)


def ev(op, *args):
    return EVALUATORS[type(op)](EvalCtx(op, None, None), tuple(args))


def shape_of(x: np.ndarray) -> np.ndarray:
    return ev(ShapeOf(), x)


@given(hnp.array_shapes(min_dims=1, max_dims=5, min_side=0, max_side=6), st.data())
def test_shape_extract_is_the_extent(shape, data):
    """HIR ShapeExtract: 'The result is the dimension at index' (negative indices: D78)."""
    x = np.zeros(shape, np.float32)
    i = data.draw(st.integers(-len(shape), len(shape) - 1))
    d = ev(ShapeExtract(i), shape_of(x))
    assert isinstance(d, np.ndarray) and d.shape == () and d.dtype == np.int64
    assert int(d) == torch.zeros(shape).shape[i]


@given(hnp.array_shapes(min_dims=0, max_dims=5, min_side=0, max_side=6), st.data())
def test_shape_compose_assembles_in_input_order(shape, data):
    """HIR ShapeCompose: 'The result is a shape value assembled in input order' — composing the
    extracted dims in a permuted order gives the shape of the permuted tensor."""
    x = np.zeros(shape, np.float32)
    s = shape_of(x)
    perm = data.draw(st.permutations(range(len(shape))))
    dims = [ev(ShapeExtract(p), s) for p in perm]
    out = ev(ShapeCompose(), *dims)
    assert isinstance(out, np.ndarray) and out.dtype == np.int64 and out.shape == (len(shape),)
    assert tuple(out.tolist()) == tuple(torch.zeros(shape).permute(tuple(perm)).shape)
    # round trip: compose(extract(s, i) for i) == s
    same = ev(ShapeCompose(), *[ev(ShapeExtract(i), s) for i in range(len(shape))])
    np.testing.assert_array_equal(same, np.array(shape, np.int64).reshape(len(shape)))


def test_shape_compose_of_nothing_is_the_rank0_shape():
    out = ev(ShapeCompose())
    assert out.dtype == np.int64 and out.shape == (0,)
    np.testing.assert_array_equal(out, shape_of(np.array(1.0, np.float32)))


def test_shape_compose_accepts_integer_dims_of_any_int_dtype():
    dims = (np.array(3, np.int32), np.array(0, np.uint8), np.array(7, np.int64))
    assert ev(ShapeCompose(), *dims).tolist() == [3, 0, 7]


def test_shape_errors_name_the_op_and_value():
    s = shape_of(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(EvaluationError, match=r"^ShapeExtract: index 3 is out of range for a "
                                              r"rank-3 shape value \(2, 3, 4\)"):
        ev(ShapeExtract(3), s)
    with pytest.raises(EvaluationError, match=r"^ShapeExtract: index -4 is out of range"):
        ev(ShapeExtract(-4), s)
    with pytest.raises(EvaluationError, match=r"ShapeExtract: index 0 is out of range for a "
                                              r"rank-0"):
        ev(ShapeExtract(0), shape_of(np.zeros((), np.float32)))
    with pytest.raises(EvaluationError, match=r"ShapeExtract: expected a shape value"):
        ev(ShapeExtract(0), np.zeros((2, 2), np.int64))
    with pytest.raises(EvaluationError, match=r"ShapeCompose: operand 1: dim -2 is negative"):
        ev(ShapeCompose(), np.array(1, np.int64), np.array(-2, np.int64))
    with pytest.raises(EvaluationError, match=r"ShapeCompose: operand 0: expected a dim value"):
        ev(ShapeCompose(), np.array([1], np.int64))
    with pytest.raises(EvaluationError, match=r"ShapeCompose: operand 0: expected a dim value"):
        ev(ShapeCompose(), np.array(1.0, np.float32))


def test_shape_ops_through_evaluate():
    """A body ShapeCompose(ShapeExtract(ShapeOf(x), 1), ShapeExtract(ShapeOf(x), -2)) on a
    symbolic x evaluates to the transposed shape of the actual input."""
    x = Var("x", TensorType((N, 3), F32))
    so = Call(ShapeOf(), (x,))
    body = Call(ShapeCompose(), (Call(ShapeExtract(1), (so,)), Call(ShapeExtract(-2), (so,))))
    m = Module((Function("s", (x,), body, ShapeType(2)),))
    for n in (1, 5, 64):
        v = np.zeros((n, 3), np.float32)
        out = evaluate(m, "s", [v])
        assert out.dtype == np.int64
        assert tuple(out.tolist()) == tuple(torch.from_numpy(v).transpose(0, 1).shape)
        tv = evaluate(Module((Function("t", (x,), Call(Transpose((1, 0)), (x,)), None),)),
                      "t", [v])
        assert tuple(out.tolist()) == tv.shape
    y = Var("y", TensorType((N,), F32))
    one = Call(ShapeExtract(0), (Call(ShapeOf(), (y,)),))
    m1 = Module((Function("e", (y,), one, DimType()),))
    d = evaluate(m1, "e", [np.zeros(9, np.float32)])
    assert d.shape == () and d.dtype == np.int64 and int(d) == 9
