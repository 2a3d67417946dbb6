"""Type rules of the tile family's reductions (``semantics/typeinfer/tile_reduce.py``): each
accepted form, each MUST / MUST NOT rejection (naming operand, rule and fix), and every row of
the Partial commutation table for these ops exercised through the rule (all reject)."""

from __future__ import annotations

import pytest

from tilefoundry.semantics import typeinfer  # noqa: F401  (registers every rule)
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Var
from tilefoundry.semantics.ops import CustomReduce, MaskedReduce, SeededReduce
from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
from tilefoundry.semantics.typeinfer.commutation import TABLE
from tilefoundry.semantics.types import (
    Broadcast,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    TensorType,
)

F32, BF16, I32, BOOL, E8M0 = DType.F32, DType.BF16, DType.I32, DType.BOOL, DType.F8E8M0
MESH = Mesh("device", ("x",), (2,))


def _t(shape, dt, layout=None):
    return TensorType(tuple(shape), dt, layout)


def _infer(op, *types):
    args = tuple(Var(f"a{i}", t) for i, t in enumerate(types))
    return infer_expr(Call(op, args))


def _rejects(op, *types, match: str):
    with pytest.raises(TypeInferError, match=match) as e:
        _infer(op, *types)
    return str(e.value)


# --- accept -----------------------------------------------------------------------------------
def test_seeded_and_masked_accept_and_keep_x_dtype():
    x = _t((4, 8), BF16)
    assert _infer(SeededReduce((1,), "sum", "fold_right", False), x, _t((4,), BF16)) == \
        _t((4,), BF16)
    assert _infer(SeededReduce((0, 1), "max", keepdim=True), x, _t((1, 1), BF16)) == \
        _t((1, 1), BF16)
    assert _infer(MaskedReduce((-1,), "min", "ordered_tree", False), x, _t((4,), BF16),
                  _t((4, 8), BOOL)) == _t((4,), BF16)
    assert _infer(SeededReduce((1,), "max"), _t((4, 8), BOOL), _t((4, 1), BOOL)).dtype is BOOL


def test_custom_accepts_a_registered_reducer_with_its_state_seed():
    x = _t((4, 8), BF16)
    assert _infer(CustomReduce((1,), "welford", "ordered_tree", False), x, _t((4, 3), F32)) \
        == _t((4, 3), F32)
    assert _infer(CustomReduce((1,), "sum_max", "unordered_tree", True), x,
                  _t((4, 1, 2), F32)) == _t((4, 1, 2), F32)
    assert _infer(CustomReduce((1,), "difference", "fold_right", False), x,
                  _t((4, 1), F32)) == _t((4, 1), F32)


# --- MUST rejections ----------------------------------------------------------------------------
def test_seed_must_have_x_dtype():
    msg = _rejects(SeededReduce((1,), "sum", keepdim=False), _t((4, 8), F32), _t((4,), BF16),
                   match="seed has dtype bf16")
    assert "Cast the seed to f32" in msg and "seed" in msg


def test_seed_must_have_the_result_shape():
    _rejects(SeededReduce((1,), "sum", keepdim=False), _t((4, 8), F32), _t((1,), F32),
             match="seed has shape")
    _rejects(SeededReduce((1,), "sum", keepdim=True), _t((4, 8), F32), _t((4,), F32),
             match=r"result \(one state per fiber\) has \(4, 1\)")


def test_mask_must_be_bool_of_x_shape():
    x, z = _t((4, 8), F32), _t((4, 1), F32)
    _rejects(MaskedReduce((1,), "sum"), x, z, _t((4, 8), I32), match="mask has dtype i32")
    _rejects(MaskedReduce((1,), "sum"), x, z, _t((1, 8), BOOL), match="mask has shape")


@pytest.mark.parametrize("dt", [BOOL, E8M0])
def test_sum_must_be_defined_in_x_dtype(dt):
    _rejects(SeededReduce((1,), "sum"), _t((4, 8), dt), _t((4, 1), dt),
             match="kind=sum over")


def test_axes_must_not_repeat_or_leave_the_rank():
    _rejects(SeededReduce((1, -1), "sum"), _t((4, 8), F32), _t((4, 1), F32), match="repeat")
    with pytest.raises(TypeInferError):
        _infer(SeededReduce((2,), "sum"), _t((4, 8), F32), _t((4, 8), F32))


def test_custom_reducer_must_be_declared():
    _rejects(CustomReduce((1,), "kahan"), _t((4, 8), F32), _t((4, 1, 3), F32),
             match="reducer 'kahan' is not declared")


@pytest.mark.parametrize("policy", ["ordered_tree", "unordered_tree"])
def test_a_tree_policy_without_a_merge_contract_suggests_a_fold(policy):
    """Tile design: 'diagnose the missing contract and suggest a fold policy rather than
    silently inventing a merge'."""
    msg = _rejects(CustomReduce((1,), "difference", policy, False), _t((4, 8), F32),
                   _t((4, 1), F32), match="needs a merge contract")
    assert "fold_left" in msg


def test_custom_x_must_be_float_and_seed_its_f32_state():
    _rejects(CustomReduce((1,), "welford", keepdim=False), _t((4, 8), I32), _t((4, 3), F32),
             match="takes a float x")
    msg = _rejects(CustomReduce((1,), "welford", keepdim=False), _t((4, 8), F32),
                   _t((4, 2), F32), match="carries an f32 state of shape")
    assert "(4, 3)" in msg and "count" in msg
    _rejects(CustomReduce((1,), "welford", keepdim=False), _t((4, 8), F32), _t((4, 3), BF16),
             match="carries an f32 state")


# --- MUST NOT: Partial / sharded operands -------------------------------------------------------
ROWS = [r for r in TABLE if r.op in ("SeededReduce", "MaskedReduce", "CustomReduce")]


def _operands(row):
    if row.op == "CustomReduce":
        from tilefoundry.semantics.reducers import REDUCERS

        S = len(REDUCERS[row.kind].state)
        op = CustomReduce((1,), row.kind, "fold_left", False)
        specs = [((4, 8), F32), ((4, S), F32)]
    elif row.op == "MaskedReduce":
        op = MaskedReduce((1,), row.kind, "fold_left", False)
        specs = [((4, 8), F32), ((4,), F32), ((4, 8), BOOL)]
    else:
        op = SeededReduce((1,), row.kind, "fold_left", False)
        specs = [((4, 8), F32), ((4,), F32)]
    pattern = row.pattern.split("+")
    types, n = [], 0
    for name, (shape, dt) in zip(op.INPUTS, specs, strict=True):
        if name in pattern:
            red = row.reduction if row.reduction != "mixed" else ("sum" if n == 0 else "max")
            n += 1
            types.append(_t(shape, dt, ShardLayout(MESH, (Partial(red),), Layout(shape))))
        else:
            types.append(_t(shape, dt))
    return op, types


def test_the_tile_rows_exist_and_all_reject():
    assert len(ROWS) == 135 and not any(r.allow for r in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.op}.{r.kind}.{r.pattern}."
                                                        f"{r.reduction}")
def test_every_partial_row_rejects_through_the_rule(row):
    op, types = _operands(row)
    with pytest.raises(TypeInferError, match="Partial commutation") as e:
        _infer(op, *types)
    assert "Reshard" in str(e.value)


def test_a_split_operand_is_rejected_with_the_fix():
    x = _t((4, 8), F32, ShardLayout(MESH, (Split(0),), Layout((4, 8))))
    msg = _rejects(SeededReduce((1,), "sum", keepdim=False), x, _t((4,), F32),
                   match="sharded operand")
    assert "Reshard" in msg
    b = _t((4, 8), F32, ShardLayout(MESH, (Broadcast(),), Layout((4, 8))))
    _rejects(SeededReduce((1,), "sum", keepdim=False), b, _t((4,), F32),
             match="sharded operand")
