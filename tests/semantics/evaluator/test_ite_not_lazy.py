"""Tile design: "ite selects already-computed values; it is not lazy control flow and does not
by itself guard an unsafe load in either operand." An out-of-range Gather in the branch a
Select never picks is still the program's run-time check failure, in the reference and in the
compiled kernel interpreter alike."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.errors import RunTimeCheckError
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.registry import EvaluationError
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Gather
from tilefoundry.semantics.ops.tile_select import Select
from tilefoundry.semantics.types import TensorType


def _program() -> Module:
    x = Var("x", TensorType((4,), DType.F32))
    idx = Var("idx", TensorType((4,), DType.I32))
    c = Var("c", TensorType((4,), DType.BOOL))
    unsafe = Call(Gather(0), (x, idx))
    return Module((Function("f", (x, idx, c), Call(Select(), (c, unsafe, x)), None),))


X = np.arange(4, dtype=np.float32)


def test_the_unpicked_operand_is_still_evaluated():
    never = np.zeros(4, bool)  # the gather's result is never selected
    with pytest.raises(EvaluationError, match="out of range"):
        evaluate(_program(), "f", [X, np.array([0, 1, 2, 9], np.int32), never])
    # in range, the same program is the unpicked operand's plain copy
    out = evaluate(_program(), "f", [X, np.array([0, 1, 2, 3], np.int32), never])
    assert np.array_equal(out, X)


def test_the_compiled_kernel_does_not_skip_it_either():
    from tilefoundry.compiler.pipeline import compile as compile_program

    c = compile_program(_program(), "f", [(4,), (4,), (4,)])
    with pytest.raises(RunTimeCheckError, match=r"out of range|index"):
        c([X, np.array([0, 1, 2, 9], np.int32), np.zeros(4, bool)])
