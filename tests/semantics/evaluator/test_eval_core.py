"""The evaluator's driver: input checking, calls, dispatch, loops, runtime checks.

Issue 'evaluator', Bad input: 'Inputs whose dtype or shape does not match the entry function's
signature, a wrong number of inputs, a non-contiguous or object array: a clear error naming the
parameter, before any computation.'"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.registry import EvaluationError
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import (
    Call,
    DimVarRangePat,
    Function,
    GridRegionExpr,
    Module,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.ops import Binary, BinaryKind
from tilefoundry.semantics.types import DimSub, DimVar, TensorType

F32 = DType.F32
N = DimVar("N", 1, 65)


def add(a, b):
    return Call(Binary(BinaryKind.ADD), (a, b))


def axpy_module():
    x = Var("x", TensorType((N,), F32))
    y = Var("y", TensorType((N,), F32))
    return Module((Function("f", (x, y), add(add(x, y), y), None),))


def test_evaluates_a_shared_dag():
    x = np.arange(5, dtype=np.float32)
    y = np.full(5, 0.5, np.float32)
    out = evaluate(axpy_module(), "f", [x, y])
    assert out.dtype == np.float32 and out.tolist() == (x + 1.0).tolist()


@pytest.mark.parametrize(("inputs", "pattern"), [
    ([np.zeros(4, np.float32)], r"takes 2 inputs \(x, y\), got 1"),
    ([np.zeros(4, np.float32), [0.0] * 4], r"parameter y: expected a numpy array"),
    ([np.zeros(4, object), np.zeros(4, np.float32)], r"parameter x: object arrays"),
    ([np.zeros(8, np.float32)[::2], np.zeros(4, np.float32)], r"parameter x: .*C-contiguous"),
    ([np.zeros(4, ml_dtypes.bfloat16), np.zeros(4, np.float32)],
     r"parameter x: dtype bf16 .* declared f32"),
    ([np.zeros((4, 1), np.float32), np.zeros(4, np.float32)], r"parameter x: rank 2"),
    ([np.zeros(70, np.float32), np.zeros(70, np.float32)], r"parameter x: .*envelope of N"),
    ([np.zeros(4, np.float32), np.zeros(5, np.float32)], r"N"),
])
def test_bad_inputs_name_the_parameter_before_computing(inputs, pattern):
    with pytest.raises(EvaluationError, match=pattern):
        evaluate(axpy_module(), "f", inputs)


def test_dispatch_selects_a_variant_and_rejects_outside_the_envelope():
    """HIR §1.1: 'A shape outside the envelope matches no variant and is an error; there is no
    base body to fall back to.'"""
    M = DimVar("M", 1, 17)

    def param():
        return Var("x", TensorType((M,), F32))

    proto = Function("g", (param(),), None, TensorType((M,), F32))
    xs = param()
    proto.add_variant(Function("g", (xs,), add(xs, xs), TensorType((M,), F32),
                               (DimVarRangePat("M", 1, 8),), label="small"))
    xl = param()
    proto.add_variant(Function("g", (xl,), add(add(xl, xl), xl), TensorType((M,), F32),
                               (DimVarRangePat("M", 8, 17),), label="large"))
    m = Module((proto,))
    assert evaluate(m, "g", [np.ones(3, np.float32)]).tolist() == [2.0] * 3
    assert evaluate(m, "g", [np.ones(9, np.float32)]).tolist() == [3.0] * 9
    with pytest.raises(EvaluationError, match="M = 20 is outside the dispatch envelope"):
        evaluate(m, "g", [np.ones(20, np.float32)])


def loop_module(extent, carries=1):
    x = Var("x", TensorType((N,), F32))
    i = Var("i", TensorType((), DType.I32))
    phis = tuple(Var(f"acc{k}", None) for k in range(carries))
    yields = tuple(add(p, x) for p in phis)
    body = yields[0]
    loop = GridRegionExpr(i, phis, tuple(x for _ in phis), body, yields, extent)
    out = loop if carries == 1 else TupleGetItem(loop, carries - 1)
    return Module((Function("h", (x,), out, None),))


def test_loop_carried_accumulator():
    """HIR §1.2 minimal example: the loop-carried accumulator; after the loop the name resolves
    to the GridRegionExpr value (here x + 3·x for three iterations)."""
    x = np.arange(4, dtype=np.float32)
    assert evaluate(loop_module(3), "h", [x]).tolist() == (4 * x).tolist()
    assert evaluate(loop_module(N), "h", [x]).tolist() == (5 * x).tolist()  # extent = N = 4
    assert evaluate(loop_module(3, carries=2), "h", [x]).tolist() == (4 * x).tolist()


def test_negative_resolved_extent_raises():
    """HIR §1.2: 'The resolved start and extent MUST be non-negative integers ... otherwise
    resolution MUST raise.'"""
    with pytest.raises(EvaluationError, match="GridRegionExpr"):
        evaluate(loop_module(DimSub(N, 10)), "h", [np.ones(4, np.float32)])


def test_structural_ops_through_evaluate():
    """The driver reaches the tensor family: a Cast with saturate after a Transpose."""
    from tilefoundry.semantics.ops import Cast, Transpose

    x = Var("x", TensorType((2, 3), F32))
    body = Call(Cast(DType.FP8E4M3, overflow="saturate"), (Call(Transpose((1, 0)), (x,)),))
    m = Module((Function("t", (x,), body, None),))
    v = np.array([[1.0, 500.0, -1e9], [0.5, 2.0, 3.0]], np.float32)
    out = evaluate(m, "t", [v])
    assert out.shape == (3, 2) and out.astype(np.float32).tolist() == [
        [1.0, 0.5], [448.0, 2.0], [-448.0, 3.0]]


def test_symbolic_zeros_shape_resolves_from_the_function_arguments():
    # docs/decisions.md D129: Zeros has no operands; its symbolic shape is bound by the
    # enclosing function's parameter shapes
    from tilefoundry.semantics.ops.tensor import Zeros

    x = Var("x", TensorType((N,), F32))
    z = Call(Zeros((N,), F32), ())
    m = Module((Function("f", (x,), add(x, z), None),))
    out = evaluate(m, "f", [np.arange(7, dtype=np.float32)])
    assert out.tolist() == list(range(7))


def test_a_bool_input_byte_other_than_0_or_1_is_refused_naming_the_parameter():
    """D543: an array viewed as bool from other bytes holds no value of the type (numpy
    accepts it; the evaluators would read it differently), so the entry refuses it."""
    x = Var("x", TensorType((3,), DType.BOOL))
    m = Module((Function("f", (x,), x, None),))
    ok = np.array([1, 0, 1], np.uint8).view(np.bool_)
    assert evaluate(m, "f", [ok]).tolist() == [True, False, True]
    bad = np.array([1, 0, 2], np.uint8).view(np.bool_)
    with pytest.raises(EvaluationError, match=r"parameter x: .*element 2 \(flat\) holds 0x02"):
        evaluate(m, "f", [bad])
