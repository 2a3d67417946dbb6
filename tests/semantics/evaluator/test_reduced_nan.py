"""D21 for reductions and scans: "Every NaN an arithmetic operation returns is the positive quiet
NaN — created ... or propagated (NaN + 1, −NaN)". numpy's reductions propagate an operand's NaN
(its payload and sign, a signalling NaN only quieted); the reference must not inherit that.
Reducing no axis is the identity (a copy) and keeps the encoding."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.semantics.dtypes import from_bits, to_bits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops.tensor import Reduce, ReduceKind
from tilefoundry.semantics.ops.tile_reduce import SeededReduce
from tilefoundry.semantics.ops.tile_scan import Scan
from tilefoundry.semantics.types import TensorType

#: a negative signalling NaN with a payload, per dtype, and the positive quiet NaN
NEG_SNAN = {DType.F32: 0xFFA00005, DType.BF16: 0xFFA5, DType.F16: 0xFD05}
POS_QNAN = {DType.F32: 0x7FC00000, DType.BF16: 0x7FC0, DType.F16: 0x7E00}
UINT = {DType.F32: np.uint32, DType.BF16: np.uint16, DType.F16: np.uint16}


def _run(op, dt: DType, extra: tuple = ()):
    x = Var("x", TensorType((3, 4), dt))
    params = [x] + [Var(f"s{i}", TensorType(a.shape, dt)) for i, a in enumerate(extra)]
    m = Module((Function("f", tuple(params), Call(op, tuple(params)), None),))
    bits = np.full((3, 4), 0x3C00 if dt is DType.F16 else
                   (0x3F80 if dt is DType.BF16 else 0x3F800000), UINT[dt])
    bits[:, 1] = NEG_SNAN[dt]
    return evaluate(m, "f", [from_bits(bits, dt), *extra])


OPS = {
    "sum": lambda: Reduce((1,), kind=ReduceKind.SUM),
    "max": lambda: Reduce((1,), kind=ReduceKind.MAX),
    "min": lambda: Reduce((1,), kind=ReduceKind.MIN),
    "scan-add": lambda: Scan(axis=1, combine="add"),
    "scan-max": lambda: Scan(axis=1, combine="max", policy="fold_left"),
}


@pytest.mark.parametrize("dt", list(NEG_SNAN), ids=str)
@pytest.mark.parametrize("name", sorted(OPS))
def test_a_reduced_nan_is_the_positive_quiet_nan(name, dt):
    out = _run(OPS[name](), dt)
    b = to_bits(np.asarray(out))
    nan = np.isnan(np.asarray(out).astype(np.float32))
    assert nan.any()
    assert set(b[nan].tolist()) == {POS_QNAN[dt]}, [hex(v) for v in set(b[nan].tolist())]


def test_a_seeded_reduce_nan_is_the_positive_quiet_nan():
    seed = from_bits(np.zeros((3, 1), np.uint32), DType.F32)
    out = _run(SeededReduce((1,)), DType.F32, (seed,))
    assert set(to_bits(np.asarray(out)).ravel().tolist()) == {POS_QNAN[DType.F32]}


def test_reducing_no_axis_is_a_copy():
    out = _run(Reduce((), kind=ReduceKind.SUM), DType.F32)
    assert (to_bits(np.asarray(out))[:, 1] == NEG_SNAN[DType.F32]).all()
