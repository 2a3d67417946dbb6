"""Every row of the Partial commutation table, exercised through the real type rule of its op
(math and nn families; the tensor family's rows are exercised by that family's tests), and the
generated doc ``docs/commutation-table.md`` kept in sync with the table."""

from __future__ import annotations

from pathlib import Path

import pytest

import tilefoundry.semantics.typeinfer.math  # registers the math rules
import tilefoundry.semantics.typeinfer.nn  # noqa: F401  (registers the nn rules)
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Var
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Conv2D,
    Gelu,
    LayerNorm,
    MatMul,
    ReLU,
    RMSNorm,
    RoPE,
    Sigmoid,
    Silu,
    SoftMax,
    Tanh,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.ops.tile_mma import Mma
from tilefoundry.semantics.ops.tile_scan import Scan
from tilefoundry.semantics.ops.tile_select import Select
from tilefoundry.semantics.ops.tile_sort import Sort
from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
from tilefoundry.semantics.typeinfer.commutation import TABLE, Row, format_matrix
from tilefoundry.semantics.types import (
    Broadcast,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    TensorType,
    TupleType,
)

ROOT = Path(__file__).resolve().parents[3]
MESH = Mesh("device", ("x",), (2,))
F32, BOOL, I32 = DType.F32, DType.BOOL, DType.I32

#: Ops whose rows the tensor family's tests exercise.
TENSOR_FAMILY = {"Reduce", "TopK", "Gather", "InsertSlice", "CacheUpdate",
                 # the tile family: tests/semantics/typeinfer/test_rules_tile_reduce.py
                 "SeededReduce", "MaskedReduce", "CustomReduce"}

#: op name -> (op factory from the row's kind, operand (shape, dtype) in INPUTS order)
SIMPLE = {"ReLU": ReLU, "Sigmoid": Sigmoid, "Tanh": Tanh, "Gelu": Gelu, "Silu": Silu,
          "SoftMax": SoftMax}


def _case(row: Row):
    if row.op == "Binary":
        kind = BinaryKind(row.kind)
        dt = BOOL if kind.is_boolean else F32
        return Binary(kind), [((4, 8), dt), ((4, 8), dt)]
    if row.op == "Unary":
        kind = UnaryKind(row.kind)
        return Unary(kind), [((4, 8), BOOL if kind is UnaryKind.LOGICAL_NOT else F32)]
    if row.op in SIMPLE:
        return SIMPLE[row.op](), [((4, 8), F32)]
    if row.op == "LayerNorm":
        return LayerNorm(), [((4, 8), F32), ((8,), F32), ((8,), F32)]
    if row.op == "RMSNorm":
        return RMSNorm(), [((4, 8), F32), ((8,), F32)]
    if row.op == "MatMul":
        return MatMul(), [((4, 8), F32), ((8, 6), F32)]
    if row.op == "Conv2D":
        return Conv2D(), [((2, 3, 8, 8), F32), ((4, 3, 3, 3), F32), ((4,), F32)]
    if row.op == "Mma":  # tile family
        return Mma(), [((4, 8), F32), ((8, 6), F32), ((4, 6), F32)]
    if row.op == "Sort":  # tile family
        return Sort(), [((4, 8), F32)]
    if row.op == "RoPE":
        return RoPE(), [((2, 6, 8), F32), ((2, 6, 8), F32), ((16, 8), F32), ((16, 8), F32),
                        ((6,), I32)]
    if row.op == "Select":  # tile family
        return Select(), [((4, 8), BOOL), ((4, 8), F32), ((4, 8), F32)]
    if row.op == "Scan":
        return Scan(1, row.kind), [((4, 8), I32 if row.kind == "mul" else F32)]
    raise AssertionError(f"no builder for commutation rows of {row.op}")


def _operands(row: Row):
    op, specs = _case(row)
    names = op.INPUTS
    pattern = row.pattern.split("+")
    assert set(pattern) <= set(names), (row, names)
    types = []
    n_partial = 0
    for idx, (name, (shape, dt)) in enumerate(zip(names, specs, strict=True)):
        if name in pattern:
            # "mixed": the Partial operands disagree — the first is sum, the rest max
            red = row.reduction if row.reduction != "mixed" else ("sum" if n_partial == 0
                                                                  else "max")
            n_partial += 1
            attr = Partial(red)
        elif idx % 2:
            attr = Broadcast()  # replicated as an explicit Broadcast ShardLayout ...
        else:
            attr = None  # ... or as a plain tensor
        layout = None if attr is None else ShardLayout(MESH, (attr,), Layout(shape))
        types.append(TensorType(shape, dt, layout))
    return op, types


def _carried(result, row: Row, names: tuple[str, ...]) -> list:
    """The mesh-axis-0 attrs of the result tensor(s) that carry the row's operand's state."""
    if isinstance(result, TupleType):  # RoPE: the branch of the Partial operand
        return [result.fields[names.index(row.pattern)].layout.attrs[0]]
    return [result.layout.attrs[0]]


ROWS = [r for r in TABLE if r.op not in TENSOR_FAMILY]


def test_rows_cover_every_math_and_nn_op():
    """HIR nn: "A ShardLayout operand carrying Partial(reduction) propagates to the output only
    when the op provably commutes with reduction" — every math / nn op (and the tile family's
    Select / Scan) with a Partial rule has rows, and each row is exercised below."""
    ops = {r.op for r in ROWS}
    assert ops == {"Binary", "Unary", "ReLU", "Sigmoid", "Tanh", "SoftMax", "Gelu", "Silu",
                   "LayerNorm", "RMSNorm", "MatMul", "Conv2D", "RoPE", "Select", "Scan",
                   "Sort", "Mma"}
    assert len(ROWS) > 200


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.op}-{r.kind}-{r.pattern}-{r.reduction}")
def test_row_through_rule(row: Row):
    """HIR Binary / Unary / nn: "A ShardLayout operand carrying Partial(reduction) propagates to
    the output only when kind provably commutes with reduction; typeinfer rejects otherwise,
    naming the offending operand and the fix (an explicit Reshard to Broadcast)." — allow ⇔ the
    rule infers and carries the Partial on that mesh axis; reject ⇔ TypeInferError quoting the
    row's reason, the first Partial operand and the Reshard fix."""
    op, types = _operands(row)
    call = Call(op, tuple(Var(f"v{i}", t) for i, t in enumerate(types)))
    first = row.pattern.split("+")[0]
    if row.allow:
        result = infer_expr(call)
        red = row.reduction
        assert _carried(result, row, op.INPUTS) == [Partial(red)]
    else:
        with pytest.raises(TypeInferError) as ei:
            infer_expr(call)
        e = ei.value
        assert row.reason in str(e)
        assert e.operand == first
        assert "Reshard" in str(e) and "Broadcast" in str(e)


def test_doc_matches_table():
    """ARCHITECTURE.md: "Z3 proves the semantic tables and laws the reference relies on (...
    Partial commutation ...)" — the published matrix in docs/commutation-table.md is exactly the
    current table (regenerate the doc when the table changes)."""
    doc = (ROOT / "docs" / "commutation-table.md").read_text()
    assert format_matrix() in doc
