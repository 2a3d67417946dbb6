"""Type rules of the tile family (Select / ``ite``, Bitcast, Scan) and of the u32 dtype: one
accept and at least one reject per MUST of the Tile design sentences the rules enforce; the
Partial rows run through the rules in ``test_commutation_table.py``.

Expected result types are written out by hand from the design's sentences (broadcasting as
numpy does, checked against ``np.broadcast_shapes``), never taken from the rules under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Var
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Bitcast,
    Cast,
    Reduce,
    ReduceKind,
    Reshard,
    Scan,
    Select,
    Transpose,
    Unary,
    UnaryKind,
    Zeros,
)
from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
from tilefoundry.semantics.types import (
    Broadcast,
    IRError,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    StorageKind,
    TensorType,
)

F32, BF16, F16, I32, I8, U8, U32, BOOL = (DType.F32, DType.BF16, DType.F16, DType.I32, DType.I8,
                                          DType.U8, DType.U32, DType.BOOL)
M2 = Mesh("device", ("x",), (2,))


def T(shape, dt=F32, layout=None, storage=StorageKind.GMEM):
    return TensorType(tuple(shape), dt, layout, storage)


def infer(op, *types):
    return infer_expr(Call(op, tuple(Var(f"v{i}", t) for i, t in enumerate(types))))


def rejects(op, *types) -> TypeInferError:
    with pytest.raises(TypeInferError) as ei:
        infer(op, *types)
    return ei.value


# ---- Select ---------------------------------------------------------------------------------
def test_select_broadcasts_condition_and_operands():
    """Tile design: ite "supports Scalar and Tile values, including broadcast conditions and
    operands" — the result has the broadcast shape and the operands' dtype."""
    for cs, ts, fs in [((6,), (4, 6), (4, 6)), ((3, 1, 5), (4, 1), ()), ((), (2,), (2,)),
                       ((4, 6), (4, 6), (1, 6))]:
        want = tuple(np.broadcast_shapes(cs, ts, fs))
        for dt in (F32, BF16, I32, U32, BOOL):
            assert infer(Select(), T(cs, BOOL), T(ts, dt), T(fs, dt)) == T(want, dt)


def test_select_condition_must_be_bool():
    e = rejects(Select(), T((4,), F32), T((4,)), T((4,)))
    assert e.operand == "cond" and "bool" in str(e) and e.fix


def test_select_branches_share_one_dtype():
    e = rejects(Select(), T((4,), BOOL), T((4,), F32), T((4,), BF16))
    assert e.operand == "f" and "do not promote" in str(e) and "cast" in e.fix


def test_select_shapes_must_broadcast():
    e = rejects(Select(), T((3,), BOOL), T((4,)), T((4,)))
    assert e.rule == "broadcasting"


def test_select_rejects_type_level_only_dtype():
    e = rejects(Select(), T((4,), BOOL), T((4,), DType.F4E2M1), T((4,), DType.F4E2M1))
    assert "type level only" in str(e)


def test_select_storage_is_the_most_local():
    t = infer(Select(), T((4,), BOOL), T((4,), F32, storage=StorageKind.RMEM),
              T((4,), F32, storage=StorageKind.SMEM))
    assert t.storage is StorageKind.RMEM


# ---- Bitcast --------------------------------------------------------------------------------
def test_bitcast_f32_u32_pair_keeps_shape_layout_storage():
    """Tile design: bitcast "preserve[s] the named axes and extents"."""
    lay = Layout((2, 3), (3, 1))
    assert infer(Bitcast(U32), T((2, 3), F32, lay, StorageKind.SMEM)) == \
        T((2, 3), U32, lay, StorageKind.SMEM)
    assert infer(Bitcast(F32), T((5,), U32)) == T((5,), F32)
    sh = ShardLayout(M2, (Split(0),), Layout((4,)))
    assert infer(Bitcast(U32), T((4,), F32, sh)).layout == sh


@pytest.mark.parametrize(("src", "dst"), [(F32, F32), (U32, U32), (F32, I32), (I32, F32),
                                          (BF16, U32), (F16, U32), (U32, BF16), (U8, F32),
                                          (F32, U8), (DType.I64, F32), (BOOL, U32)])
def test_bitcast_rejects_every_other_pair(src, dst):
    """Tile design: "This initial API supports only the float32/uint32 pair; other widths and
    index/view conversions are rejected.\""""
    e = rejects(Bitcast(dst), T((4,), src))
    assert "only the f32 <-> u32 pair" in str(e) and "Cast" in e.fix


def test_bitcast_rejects_a_partial_operand():
    sh = ShardLayout(M2, (Partial("sum"),), Layout((4,)))
    e = rejects(Bitcast(U32), T((4,), F32, sh))
    assert "Partial(sum)" in str(e) and "Reshard" in e.fix


def test_bitcast_dtype_attribute_is_checked():
    with pytest.raises(IRError):
        Bitcast("u32")


# ---- Scan -----------------------------------------------------------------------------------
def test_scan_keeps_type():
    lay = Layout((3, 5), (5, 1))
    for dt, comb in [(F32, "add"), (BF16, "max"), (I32, "mul"), (U8, "add"), (BOOL, "min"),
                     (DType.FP8E4M3, "min"), (DType.F8E8M0, "max")]:
        assert infer(Scan(1, comb), T((3, 5), dt, lay)) == T((3, 5), dt, lay)
    assert infer(Scan(0), T((0, 2))) == T((0, 2))  # an empty axis types like any other


def test_scan_needs_an_axis():
    assert "rank-0" in str(rejects(Scan(0), T(())))
    assert "out of range" in str(rejects(Scan(2), T((3, 4))))


@pytest.mark.parametrize(("comb", "dt"), [("mul", F32), ("mul", BF16), ("mul", BOOL),
                                          ("add", BOOL), ("add", DType.F8E8M0)])
def test_scan_combine_dtype_rejects(comb, dt):
    e = rejects(Scan(0, comb), T((4,), dt))
    assert e.fix and ("integer" in str(e) or "not representable" in str(e))


@pytest.mark.parametrize(("seed", "dt"), [(0.1, F32), (1 + 2.0 ** -10, BF16), (300, I8),
                                          (-1, U8), (1.5, I32), (2, BOOL), (65504.0 * 2, F16),
                                          (-1.0, DType.F8E8M0), (2.0 ** 200, F32)])
def test_scan_seed_must_be_exact_in_the_dtype(seed, dt):
    comb = "max" if dt in (BOOL, DType.F8E8M0) else "add"
    e = rejects(Scan(0, comb, seed=seed), T((4,), dt))
    assert "exactly representable" in str(e)


def test_scan_exact_seeds_accepted():
    for seed, dt in [(-0.0, F32), (2.5, DType.FP8E4M3), (-128, I8), (255, U8), (1, BOOL),
                     (2.0 ** -133, F32), (0.5, DType.F8E8M0)]:
        comb = "max" if dt in (BOOL, DType.F8E8M0) else "add"
        assert infer(Scan(0, comb, seed=seed), T((4,), dt)) == T((4,), dt)


def test_scan_policy_never_permutes():
    """Tile design: "scan must not inherit the permission to globally permute reduction
    contributions" — unordered_tree (and fold_right: a scan follows the left recurrence) are
    rejected where the op is built."""
    with pytest.raises(IRError, match="never permutes"):
        Scan(0, policy="unordered_tree")
    with pytest.raises(IRError, match="left prefix recurrence"):
        Scan(0, policy="fold_right")
    for bad in (float("nan"), float("inf"), True, "1"):
        with pytest.raises(IRError, match="seed"):
            Scan(0, seed=bad)
    with pytest.raises(IRError):
        Scan(0, combine="sub")


def test_scan_signed_zero_seeds_are_distinct_ops():
    assert Scan(0, seed=-0.0) != Scan(0, seed=0.0) and Scan(0, seed=1) != Scan(0, seed=1.0)
    assert Scan(0, seed=-0.0) == Scan(0, seed=-0.0)
    assert hash(Scan(0, seed=-0.0)) == hash(Scan(0, seed=-0.0))


def test_scan_axis_must_not_be_split():
    sh = ShardLayout(M2, (Split(1),), Layout((4, 6)))
    e = rejects(Scan(1), T((4, 6), F32, sh))
    assert "Split" in str(e) and "Reshard" in e.fix
    assert infer(Scan(0), T((4, 6), F32, sh)).layout == sh  # another axis may be split


def test_seeded_add_rejects_a_partial():
    """The seed would enter once per device: z + Σ x_d != Σ (z + x_d)."""
    sh = ShardLayout(M2, (Partial("sum"),), Layout((4,)))
    e = rejects(Scan(0, "add", seed=1.0), T((4,), F32, sh))
    assert "once per device" in str(e)
    assert infer(Scan(0, "add"), T((4,), F32, sh)).layout == sh
    mx = ShardLayout(M2, (Partial("max"),), Layout((4,)))
    assert infer(Scan(0, "max", seed=1.0), T((4,), F32, mx)).layout == mx


# ---- u32: only Bitcast, Select, the comparisons (and Reshard) take it --------------------------
@pytest.mark.parametrize("make", [
    lambda: (Binary(BinaryKind.ADD), [T((4,), U32), T((4,), U32)]),
    lambda: (Binary(BinaryKind.MAX), [T((4,), U32), T((4,), U32)]),
    lambda: (Unary(UnaryKind.NEG), [T((4,), U32)]),
    lambda: (Reduce((0,), kind=ReduceKind.MAX), [T((4,), U32)]),
    lambda: (Cast(F32), [T((4,), U32)]),
    lambda: (Transpose((0,)), [T((4,), U32)]),
    lambda: (Scan(0, "max"), [T((4,), U32)]),
])
def test_other_ops_reject_u32(make):
    op, types = make()
    e = rejects(op, *types)
    assert "u32 exists only for bit reinterpretation" in str(e) and "Bitcast" in e.fix


def test_u32_results_only_from_bitcast():
    assert "Cast to u32" in str(rejects(Cast(U32), T((4,), F32)))
    assert "Zeros of u32" in str(rejects(Zeros((4,), U32)))


def test_u32_comparisons_and_reshard_accepted():
    for k in (BinaryKind.EQ, BinaryKind.LT, BinaryKind.GE):
        assert infer(Binary(k), T((4,), U32), T((4,), U32)) == T((4,), BOOL)
    lay = ShardLayout(M2, (Broadcast(),), Layout((4,)))
    assert infer(Reshard(layout=lay), T((4,), U32)).dtype is U32
