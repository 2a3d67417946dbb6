"""Copies keep the encoded value (D298).

The Tile design: "Raw from_bits() / bits() and load/store copying preserve the encoded value;
they are not numeric conversion and preserve NaN payloads." An output made only of copies
(``COPIES_BITS`` ops: moves, selections, bit reinterpretations) is judged bit for bit; an output
with arithmetic in its value cone keeps the exact contract's NaN class ("payload and NaN sign are
not part of the contract" for computed NaNs, D21).
"""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.oracle.compare import FAIL, PASS, check
from tilefoundry.semantics.dtypes import from_bits, to_bits
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Constant, Function, Module, Op, Var
from tilefoundry.semantics.ops import Binary, BinaryKind, Concat, Slice, Transpose
from tilefoundry.semantics.ops.tile_select import Select
from tilefoundry.semantics.types import TensorType

F32, BF16 = DType.F32, DType.BF16
#: a negative signalling f32 NaN with payload 5, and its canonical quieting
SNAN, QNAN = 0xFFA00005, 0x7FC00000


def _f32(bits: list[int]) -> np.ndarray:
    return from_bits(np.array(bits, np.uint32), F32)


def _module(body_of) -> tuple[Module, list]:
    x = Var("x", TensorType((2, 2), F32))
    y = Var("y", TensorType((2, 2), F32))
    return Module((Function("f", (x, y), body_of(x, y), None),)), [x, y]


def _quiet(a: np.ndarray) -> np.ndarray:
    b = to_bits(a).copy()
    b[np.isnan(a)] = QNAN
    return from_bits(b, F32)


X = _f32([SNAN, 0x3F800000, 0x80000000, 0x7F800001]).reshape(2, 2)
Y = _f32([0x40000000, 0xFFC00001, 0x00000001, 0x3F800000]).reshape(2, 2)

COPIES = {
    "transpose": lambda x, y: Call(Transpose((1, 0)), (x,)),
    "concat-slice": lambda x, y: Call(Slice((0, 0), (2, 2), (1, 1)),
                                      (Call(Concat(0), (y, x)),)),
    "select-on-compare": lambda x, y: Call(Select(), (Call(Binary(BinaryKind.LT), (x, y)), x, y)),
}


@pytest.mark.parametrize("name", sorted(COPIES))
def test_a_copy_that_quiets_a_nan_fails(name):
    m, _ = _module(COPIES[name])
    from tilefoundry.semantics.evaluator.core import evaluate

    ref = evaluate(m, "f", [X, Y])
    assert np.isnan(ref).any() and (to_bits(ref)[np.isnan(ref)] != QNAN).any()
    assert check(m, "f", [X, Y], ref).status == PASS
    v = check(m, "f", [X, Y], _quiet(ref))
    assert v.status == FAIL and "exact bits" in v.outputs[0].contract, v.outputs[0].line()
    # a NaN with the payload kept but the sign flipped is a different encoding too
    flipped = to_bits(ref).copy()
    flipped[np.isnan(ref)] ^= np.uint32(0x80000000)
    assert check(m, "f", [X, Y], from_bits(flipped, F32)).status == FAIL


def test_arithmetic_in_the_cone_keeps_the_nan_class():
    # x + 0 computes: its NaN is the quiet NaN of D21 and any NaN is admitted there
    zero = Constant(np.zeros((2, 2), np.float32))
    m, _ = _module(lambda x, y: Call(Transpose((1, 0)),
                                     (Call(Binary(BinaryKind.ADD), (x, zero)),)))
    from tilefoundry.semantics.evaluator.core import evaluate

    ref = evaluate(m, "f", [X, Y])
    v = check(m, "f", [X, Y], _quiet(ref))
    assert v.status == PASS and "exact bits" not in v.outputs[0].contract


def test_copies_bits_is_an_op_fact_on_the_moves_only():
    from tilefoundry.semantics import ops as all_ops

    classes = {c for c in vars(all_ops).values()
               if isinstance(c, type) and issubclass(c, Op) and c is not Op}
    copies = {c.__name__ for c in classes if c.COPIES_BITS}
    assert copies == {"Bitcast", "CacheUpdate", "Concat", "Gather", "InsertSlice", "Reshape",
                      "Select", "Slice", "Stack", "Transpose"}
