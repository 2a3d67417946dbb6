"""Type rules of the tile family (extensions of the HIR catalog): Sort and Mma — accept and
reject per MUST / MUST NOT (``semantics/typeinfer/tile_sort.py`` / ``tile_mma.py``), quoting the
Tile design sentence each rule comes from. The Partial rows go through the real rules in
``test_commutation_table.py``."""

from __future__ import annotations

import pytest

import tilefoundry.semantics.typeinfer  # noqa: F401  (registers the rules)
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Expr, Var
from tilefoundry.semantics.ops import Mma, Sort
from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
from tilefoundry.semantics.types import (
    Broadcast,
    DimVar,
    IRError,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    StorageKind,
    TensorType,
    TupleType,
)

F32, F16, BF16, I32, I64 = DType.F32, DType.F16, DType.BF16, DType.I32, DType.I64
E4M3, E5M2, E8M0, F4 = DType.FP8E4M3, DType.FP8E5M2, DType.F8E8M0, DType.F4E2M1
M2 = Mesh("device", ("x",), (2,))


def T(shape, dtype=F32, layout=None, storage=StorageKind.GMEM):
    return TensorType(tuple(shape), dtype, layout, storage)


def sl(attrs, shape):
    return ShardLayout(M2, tuple(attrs), Layout(tuple(shape)))


def infer(op, *args):
    return infer_expr(Call(op, tuple(a if isinstance(a, Expr) else Var(f"v{i}", a)
                                     for i, a in enumerate(args))))


def rejects(op, *args, match: str) -> TypeInferError:
    with pytest.raises(TypeInferError, match=match) as e:
        infer(op, *args)
    msg = str(e.value)
    assert f"{type(op).__name__}:" in msg and "[rule:" in msg and "fix:" in msg, msg
    return e.value


# =============================================================================================
# Sort
# =============================================================================================
@pytest.mark.parametrize("dt", [F32, BF16, F16, E4M3, E5M2, I32, I64, DType.BOOL, DType.U8])
def test_sort_returns_values_and_int64_indices(dt):
    """Tile design: sort "return[s] RankedTile<T> with values and INT64 source indices" — values
    keep x's shape, dtype and storage; indices are i64 of the same shape."""
    t = infer(Sort(1, True, "first"), T((3, 5), dt, storage=StorageKind.SMEM))
    assert t == TupleType((T((3, 5), dt, storage=StorageKind.SMEM),
                           T((3, 5), I64, storage=StorageKind.SMEM)))


def test_sort_symbolic_extents_and_negative_axis():
    n = DimVar("N", 1, 64)
    t = infer(Sort(-2), T((n, 4)))
    assert t.fields[0].shape == (n, 4) and t.fields[1].dtype is I64


def test_sort_rejects_rank_0_and_bad_axis():
    """Sort is "a logical permutation along named axes": x MUST have the axis."""
    rejects(Sort(), T(()), match="rank-0")
    rejects(Sort(2), T((3, 4)), match="axis")
    rejects(Sort(-3), T((3, 4)), match="axis")


def test_sort_rejects_type_level_only_dtype():
    rejects(Sort(), T((4,), F4), match="f4e2m1")


def test_sort_split_on_the_sorted_axis_is_rejected_other_splits_carry():
    """Tile design: "Distribution analysis may keep the axis local, repartition it, or reject a
    requested single-kernel schedule that cannot communicate across the required participant
    scope" — the sorted axis MUST NOT be Split; a Split elsewhere carries to both results."""
    e = rejects(Sort(1), T((4, 6), F32, sl((Split(1),), (4, 6))), match="MUST NOT be Split")
    assert "Reshard" in str(e)
    t = infer(Sort(1), T((4, 6), F32, sl((Split(0),), (4, 6))))
    for f in t.fields:
        assert isinstance(f.layout, ShardLayout) and isinstance(f.layout.attrs[0], Split)
    t = infer(Sort(0), T((4, 6), F32, sl((Broadcast(),), (4, 6))))
    assert isinstance(t.fields[1].layout.attrs[0], Broadcast)


@pytest.mark.parametrize("red", ["sum", "max", "min"])
def test_sort_rejects_every_partial(red):
    """The indices name a winner, and the sort of partial values is not the sort of their
    reduction: every Partial is rejected (the commutation table's Sort rows)."""
    rejects(Sort(), T((4, 6), F32, sl((Partial(red),), (4, 6))), match="does not commute")


@pytest.mark.parametrize(("kw", "what"), [({"axis": 1.0}, "axis"), ({"axis": True}, "axis"),
                                          ({"descending": 1}, "descending"),
                                          ({"nan": "middle"}, "nan"), ({"nan": None}, "nan")])
def test_sort_attributes_are_validated(kw, what):
    with pytest.raises(IRError, match=f"Sort.{what}"):
        Sort(**kw)


# =============================================================================================
# Mma
# =============================================================================================
@pytest.mark.parametrize("dt", [F16, BF16, E4M3, E5M2, F32])
def test_mma_result_is_acc_shape_in_f32(dt):
    """Tile design: "acc = mma(a, b, acc); // FP16 inputs, FP32 accumulator"; "mma(A, B, C)
    returns a value in Batch x M x N"."""
    assert infer(Mma(), T((4, 3), dt), T((3, 5), dt), T((4, 5))) == T((4, 5))
    t = infer(Mma(False), T((2, 4, 3), dt), T((2, 3, 5), dt), T((2, 4, 5), storage=StorageKind.SMEM))
    assert t == T((2, 4, 5), storage=StorageKind.SMEM)


def test_mma_symbolic_roles():
    m, k = DimVar("M", 1, 64), DimVar("K", 0, 64)
    assert infer(Mma(), T((m, k), BF16), T((k, 8), BF16), T((m, 8))).shape == (m, 8)


def test_mma_roles_must_agree():
    """Tile design: "contraction dimensions occur in A and B but not C, and the two free
    dimension sets are checked against C"."""
    rejects(Mma(), T((4, 3), F16), T((2, 5), F16), T((4, 5)), match="K differs")
    rejects(Mma(), T((4, 3), F16), T((3, 5), F16), T((2, 5)), match="M differs")
    rejects(Mma(), T((4, 3), F16), T((3, 5), F16), T((4, 6)), match="N differs")


def test_mma_batch_dims_must_be_identical():
    """Tile design: "Batch dimensions occur in all three operands"; "the operation never guesses
    from labels, extents, strides" — no batch broadcast (D226)."""
    rejects(Mma(), T((1, 4, 3), F16), T((2, 3, 5), F16), T((2, 4, 5)), match="batch")
    rejects(Mma(), T((4, 3), F16), T((2, 3, 5), F16), T((2, 4, 5)), match="batch")
    rejects(Mma(), T((2, 4, 3), F16), T((2, 3, 5), F16), T((3, 4, 5)), match="batch")


def test_mma_operand_rank():
    rejects(Mma(), T((3,), F16), T((3, 5), F16), T((1, 5)), match="rank >= 2")
    rejects(Mma(), T((4, 3), F16), T((3, 5), F16), T((5,)), match="rank >= 2")


def test_mma_input_dtypes():
    """a and b share one input dtype among f32 / f16 / bf16 / fp8 (the design's "FP16/BF16"
    and FP8 inputs); integers go to MatMul; f8e8m0 and f4e2m1 are rejected."""
    rejects(Mma(), T((4, 3), F16), T((3, 5), BF16), T((4, 5)), match="share one input dtype")
    rejects(Mma(), T((4, 3), I32), T((3, 5), I32), T((4, 5)), match="MatMul")
    rejects(Mma(), T((4, 3), E8M0), T((3, 5), E8M0), T((4, 5)), match="f8e8m0")
    rejects(Mma(), T((4, 3), F4), T((3, 5), F4), T((4, 5)), match="f4e2m1")


@pytest.mark.parametrize("acc", [E4M3, I32])
def test_mma_accumulator_must_be_f32(acc):
    """Tile design: "Inputs are converted to the accumulator type by the reference realization"
    and "does not permit silently reducing input precision" — the accumulator is f32 (D225),
    or f16 / bf16 under allow_reassociation (D389)."""
    e = rejects(Mma(), T((4, 3), F16), T((3, 5), F16), T((4, 5), acc), match="MUST be f32")
    assert "Cast the result" in str(e)


@pytest.mark.parametrize("acc", [F16, BF16])
def test_mma_narrow_accumulator_needs_reassociation(acc):
    """Tile design: "XIR lowers FP16/BF16 MMA accumulators through FP32 internal accumulation
    when MmaPolicy::allow_reassociation is enabled, then rounds the result to the declared type.
    Strict BF16 accumulation still rejects" (D389)."""
    t = infer(Mma(True), T((4, 3), BF16), T((3, 5), BF16), T((4, 5), acc))
    assert t.dtype is acc and tuple(t.shape) == (4, 5)
    e = rejects(Mma(False), T((4, 3), F16), T((3, 5), F16), T((4, 5), acc),
                match="Strict BF16 accumulation still rejects")
    assert "allow_reassociation=True" in str(e)


def test_mma_partial_rows():
    """Partial(sum) on {a, acc} (or {b, acc}) with the other input replicated carries; on a
    alone the replicated acc would be added once per device: rejected; a Split fails closed."""
    def p(shape):
        return sl((Partial("sum"),), shape)

    t = infer(Mma(), T((4, 3), F16, p((4, 3))), T((3, 5), F16), T((4, 5), F32, p((4, 5))))
    assert t.layout.attrs == (Partial("sum"),)
    t = infer(Mma(), T((4, 3), F16), T((3, 5), F16, p((3, 5))), T((4, 5), F32, p((4, 5))))
    assert t.layout.attrs == (Partial("sum"),)
    rejects(Mma(), T((4, 3), F16, p((4, 3))), T((3, 5), F16), T((4, 5)),
            match="added once per device")
    rejects(Mma(), T((4, 3), F16), T((3, 5), F16), T((4, 5), F32, p((4, 5))),
            match="added once per device")
    rejects(Mma(), T((4, 3), F16, sl((Split(0),), (4, 3))), T((3, 5), F16), T((4, 5)),
            match="fails closed")
    t = infer(Mma(), T((4, 3), F16, sl((Broadcast(),), (4, 3))), T((3, 5), F16), T((4, 5)))
    assert t.layout.attrs == (Broadcast(),)


def test_mma_attribute_is_validated():
    with pytest.raises(IRError, match="allow_reassociation"):
        Mma(1)
