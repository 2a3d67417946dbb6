"""Type rules of ir/hir/tensor (and ir/hir/shape): one accept and at least one reject case per
MUST / MUST NOT of the HIR spec entries, every Partial-commutation row of Reduce, TopK, Gather,
InsertSlice and CacheUpdate through the real rules, and hypothesis checks against torch / numpy
result shapes on random data.

Expected shapes come from torch 2.13 CPU / numpy on random arrays or from the spec formulas
written out by hand, never from the rules under test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tilefoundry.semantics.typeinfer.shape
import tilefoundry.semantics.typeinfer.tensor  # noqa: F401  (registers the rules)
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Constant, Expr, Var
from tilefoundry.semantics.ops import (
    CacheUpdate,
    Cast,
    Concat,
    Gather,
    InsertSlice,
    Rank,
    Reduce,
    ReduceKind,
    ShapeCompose,
    ShapeExtract,
    ShapeOf,
    Slice,
    Stack,
    TopK,
    Transpose,
    Zeros,
)
from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
from tilefoundry.semantics.typeinfer.commutation import TABLE
from tilefoundry.semantics.types import (
    Broadcast,
    DimType,
    DimVar,
    Layout,
    Mesh,
    Partial,
    ShapeType,
    ShardLayout,
    Split,
    StorageKind,
    TensorType,
    TupleType,
    dim_min,
)

F32, BF16, I32, I64 = DType.F32, DType.BF16, DType.I32, DType.I64
M2 = Mesh("device", ("x",), (2,))
M22 = Mesh("device", ("x", "y"), (2, 2))


def sl(mesh, attrs, shape, strides=None):
    return ShardLayout(mesh, tuple(attrs), Layout(tuple(shape), strides))


def T(shape, dtype=F32, layout=None, storage=StorageKind.GMEM):
    return TensorType(tuple(shape), dtype, layout, storage)


def arg(a) -> Expr:
    return a if isinstance(a, Expr) else Var("v", a)


def infer(op, *args):
    return infer_expr(Call(op, tuple(arg(a) for a in args)))


def rejects(op, *args, match: str | None = None) -> str:
    with pytest.raises(TypeInferError, match=match) as e:
        infer(op, *args)
    msg = str(e.value)
    assert f"{type(op).__name__}:" in msg and "[rule:" in msg and "fix:" in msg, msg
    return msg


def i32(v: int) -> Constant:
    return Constant(np.array(v, np.int32))


# =============================================================================================
# Cast
# =============================================================================================
def test_cast_identity_in_shape_storage_layout():
    """'Identity in shape / storage / layout; only the element dtype changes to dtype. A
    ShardLayout input keeps its layout (the relation is the identity).'"""
    s = sl(M22, (Split(0), Partial("sum")), (8, 4), (4, 1))
    t = infer(Cast(BF16), T((8, 4), F32, s, StorageKind.SMEM))
    assert t == T((8, 4), BF16, s, StorageKind.SMEM)
    n = DimVar("N", 1, 9)
    assert infer(Cast(I32), T((n, 3))).shape == (n, 3)


@pytest.mark.parametrize("src,dst", [(F32, DType.FP8E4M3), (DType.FP8E4M3, F32),
                                     (F32, DType.F8E8M0), (DType.F4E2M1, BF16),
                                     (F32, DType.F4E2M1)])
def test_cast_low_precision_boundary(src, dst):
    """'Cast is the conversion boundary for the low-precision dtypes (fp8e4m3 / f8e8m0 /
    f4e2m1), accepted as either the input or the target dtype.'"""
    assert infer(Cast(dst), T((3,), src)).dtype is dst


def test_cast_rounding_only_for_f8e8m0():
    """f8e8m0 'takes a rounding attribute' (ARCHITECTURE.md); D13: 'rounding other than
    nearest is accepted only for f8e8m0'."""
    assert infer(Cast(DType.F8E8M0, rounding="up"), T((2,))).dtype is DType.F8E8M0
    rejects(Cast(BF16, rounding="up"), T((2,)), match="f8e8m0")


def test_cast_overflow_only_for_float_targets():
    """D13: 'Integer and bool destinations accept only the defaults (nonfinite, nearest)'."""
    assert infer(Cast(DType.FP8E4M3, overflow="saturate"), T((2,))).dtype is DType.FP8E4M3
    rejects(Cast(I32, overflow="saturate"), T((2,)), match="overflow")


def test_cast_needs_a_tensor():
    """Cast converts a tensor ('x: input; source tensor')."""
    rejects(Cast(F32), Call(ShapeOf(), (Var("x", T((2,))),)), match="expected a tensor")


def test_materialized_strides_invariant():
    """'every ShardLayout reachable from a value's type has concrete layout.strides (never
    None) — the un-materialized (strides=None) parser sugar MUST be materialized'."""
    s = sl(M2, (Split(0),), (4, 6))
    t = infer(Cast(BF16), T((4, 6), F32, s))
    assert t.shard.layout.strides == (6, 1)


# =============================================================================================
# Gather
# =============================================================================================
def test_gather_shape_formula():
    """'Result shape is x.shape[:axis] + index.shape[batch_dims:] + x.shape[axis+1:]'."""
    t = infer(Gather(1), T((4, 5, 6)), T((2, 3), I32))
    assert t == T((4, 2, 3, 6))
    t = infer(Gather(-1), T((4, 5)), T((), I64))
    assert t == T((4,))


def test_gather_batch_dims():
    """'the first batch_dims of the axis leading dims also index index'."""
    t = infer(Gather(1, batch_dims=1), T((4, 5, 6)), T((4, 3), I32))
    assert t == T((4, 3, 6))


def test_gather_no_implicit_batching():
    """'a leading-dimension shape coincidence MUST NOT implicitly enable batching — batching is
    selected only by an explicit positive batch_dims.'"""
    assert infer(Gather(1), T((4, 5)), T((4, 3), I32)).shape == (4, 4, 3)


@pytest.mark.parametrize("op,idx", [(Gather(1, batch_dims=2), T((4, 3), I32)),
                                    (Gather(1, batch_dims=2), T((4, 5, 6), I32)),
                                    (Gather(0, batch_dims=1), T((4,), I32)),
                                    (Gather(2, batch_dims=2), T((4,), I32))])
def test_gather_batch_dims_bounds_reject(op, idx):
    """'batch_dims MUST satisfy 0 <= batch_dims <= min(axis, rank(index))'."""
    rejects(op, T((4, 5, 6)), idx, match="batch_dims")


def test_gather_batch_dims_equal_leading_reject():
    """'the leading batch_dims dims of x and index MUST be equal.'"""
    rejects(Gather(1, batch_dims=1), T((4, 5)), T((3, 2), I32), match="MUST be equal")


def test_gather_index_dtype_and_axis_reject():
    """'indices: input; integer index tensor' / 'axis: attribute; gathered axis'."""
    rejects(Gather(0), T((4,)), T((2,), F32), match="integer")
    rejects(Gather(0), T((4,)), T((2,), DType.BOOL), match="integer")
    rejects(Gather(2), T((4, 5)), T((2,), I32), match="out of range")
    rejects(Gather(0), T(()), T((2,), I32), match="rank-0")


def test_gather_layout_is_natural_contiguous():
    """'for a ShardLayout operand, the internal Layout is always natural contiguous over the
    output shape; it MUST NOT be inherited from the input.'"""
    s = sl(M2, (Split(0),), (4, 6), (1, 4))  # column-major producer strides
    t = infer(Gather(1), T((4, 6), F32, s), T((3,), I32))
    assert t.shard == ShardLayout(M2, (Split(0),), Layout.natural((4, 3)))


def test_gather_split_on_gathered_axis_becomes_partial_sum():
    """'A Split targeting the gathered axis produces Partial(sum) on that mesh axis'."""
    s = sl(M22, (Split(1), Broadcast()), (4, 6))
    t = infer(Gather(1), T((4, 6), F32, s), T((2, 5), I32))
    assert t.shape == (4, 2, 5) and t.shard.attrs == (Partial("sum"), Broadcast())


def test_gather_split_on_other_axis_renumbered():
    """'A Split targeting another axis carries through, with its logical axis renumbered for the
    axis removed at the gathered axis and index's non-batch dims inserted in its place.'"""
    s = sl(M22, (Split(2), Partial("max")), (4, 6, 8))
    t = infer(Gather(1), T((4, 6, 8), F32, s), T((2, 5), I32))
    assert t.shape == (4, 2, 5, 8) and t.shard.attrs == (Split(3), Partial("max"))
    s = sl(M2, (Split(0),), (4, 6))
    assert infer(Gather(1), T((4, 6), F32, s), T((), I32)).shard.attrs == (Split(0),)


def test_gather_multiple_splits_one_on_axis_fail_closed():
    """'Multiple Splits where one targets the gathered axis ... MUST fail closed.'"""
    s = sl(M22, (Split(0), Split(1)), (4, 6))
    rejects(Gather(1), T((4, 6), F32, s), T((3,), I32), match="fail closed")


def test_gather_composed_layout_fail_closed():
    """'... and a composed layout, have no derivable output and MUST fail closed.'"""
    s = sl(M2, (Split(0),), ((2, 2), 6))
    rejects(Gather(1), T((4, 6), F32, s), T((3,), I32), match="composed")


def test_gather_batch_dims_with_sharding():
    """'batch_dims > 0 is defined for type inference and evaluation over unsharded or fully
    replicated (Broadcast) operands; value-carrying ShardLayout operands ... MUST fail
    closed.'"""
    b = sl(M2, (Broadcast(),), (4, 5))
    t = infer(Gather(1, batch_dims=1), T((4, 5), F32, b), T((4, 3), I32))
    assert t.shard.attrs == (Broadcast(),) and t.shape == (4, 3)
    s = sl(M2, (Split(0),), (4, 5))
    rejects(Gather(1, batch_dims=1), T((4, 5), F32, s), T((4, 3), I32), match="batch_dims")


def test_gather_split_indices_fail_closed():
    """'Only the shard attrs migrate, per mesh axis' (of x): split indices have no derived
    output sharding here."""
    rejects(Gather(0), T((4,)), T((4,), I32, sl(M2, (Split(0),), (4,))), match="indices")


# =============================================================================================
# Zeros
# =============================================================================================
def test_zeros():
    """'The result is zero-initialised.' — of the given shape, dtype and storage."""
    n = DimVar("N", 1, 17)
    t = infer(Zeros((n, 4), BF16, StorageKind.RMEM))
    assert t == T((n, 4), BF16, None, StorageKind.RMEM)
    rejects(Zeros((-1, 4), F32), match="negative")


# =============================================================================================
# Reduce
# =============================================================================================
def test_reduce_numpy_shape():
    """'The logical result shape follows numpy reduction rules.'"""
    x = np.zeros((2, 3, 4), np.float32)
    for axes, keep in (((1,), True), ((0, 2), False), ((-1,), False), ((), True)):
        t = infer(Reduce(axes, keep, ReduceKind.SUM), T((2, 3, 4)))
        assert t.shape == np.sum(x, axis=axes, keepdims=keep).shape


def test_reduce_axes_reject():
    """'axes: attribute; reduced logical axes' (numpy: in range, no repeats)."""
    rejects(Reduce((3,)), T((2, 3)), match="out of range")
    rejects(Reduce((0, -2)), T((2, 3)), match="repeat")


def test_reduce_storage_preserved():
    """'Storage is preserved.'"""
    assert infer(Reduce((0,)), T((2, 3), F32, None, StorageKind.SMEM)).storage is \
        StorageKind.SMEM


def test_reduce_plain_layout_passes_through():
    """'Plain input layout passes through unchanged.' — with the rank unchanged, the reduced
    axis becomes size 1 stride 0; a rank-changing reduce gives an unconstrained layout."""
    lay = Layout((4, 6), (1, 4))
    assert infer(Reduce((), kind=ReduceKind.SUM), T((4, 6), F32, lay)).layout == lay
    assert infer(Reduce((0,), True, ReduceKind.SUM), T((4, 6), F32, lay)).layout == \
        Layout((1, 6), (0, 4))
    assert infer(Reduce((0,), False, ReduceKind.SUM), T((4, 6), F32, lay)).layout is None


def test_reduce_split_on_reduced_axis_collapses_to_broadcast():
    """'For ShardLayout input, every split layout position that belongs to a reduced tensor axis
    collapses to broadcast with size-1 stride-0 output.'"""
    s = sl(M22, (Split(1), Split(0)), (4, 6))
    t = infer(Reduce((1,), True, ReduceKind.SUM), T((4, 6), F32, s))
    assert t.shard.attrs == (Broadcast(), Split(0))
    assert t.shard.layout == Layout((4, 1), (1, 0))
    t = infer(Reduce((1,), False, ReduceKind.MAX), T((4, 6), F32, s))
    assert t.shard.attrs == (Broadcast(), Split(0)) and t.shard.layout == Layout((4,), (1,))


def test_reduce_split_positions_renumber():
    """'every split layout position that belongs to a reduced tensor axis collapses' — the
    others keep their axis, renumbered past removed positions."""
    s = sl(M2, (Split(3),), ((2, 2), 3, 4), ((24, 12), 4, 1))
    t = infer(Reduce((0,), False, ReduceKind.SUM), T((4, 3, 4), F32, s))
    assert t.shard.attrs == (Split(1),) and t.shard.layout.shape == (3, 4)


def test_reduce_non_default_strides_must_be_explicit():
    """'Non-default-stride sharded input must carry explicit producer strides, or typeinfer
    rejects it.'"""
    s = sl(M2, (Split(0),), ((2, 2), 6))
    rejects(Reduce((1,), kind=ReduceKind.SUM), T((4, 6), F32, s), match="explicit")
    s = sl(M2, (Split(0),), ((2, 2), 6), ((0, 6), 1))
    assert infer(Reduce((1,), kind=ReduceKind.SUM), T((4, 6), F32, s)).shard is not None


def test_reduce_dtype_rules():
    """Reduce keeps x's dtype (D34: 'integer mean raises (cast first)'; bool takes max / min
    only; f8e8m0 refuses sum / mean)."""
    assert infer(Reduce((0,), kind=ReduceKind.SUM), T((3,), I32)).dtype is I32
    assert infer(Reduce((0,), kind=ReduceKind.MAX), T((3,), DType.BOOL)).dtype is DType.BOOL
    rejects(Reduce((0,), kind=ReduceKind.MEAN), T((3,), I32), match="Cast x to f32")
    rejects(Reduce((0,), kind=ReduceKind.SUM), T((3,), DType.BOOL), match="Cast")
    rejects(Reduce((0,), kind=ReduceKind.MEAN), T((3,), DType.F8E8M0), match="Cast")


# =============================================================================================
# the commutation rows through the real rules
# =============================================================================================
def _partial_t(shape, red, dtype=F32):
    return T(shape, dtype, sl(M2, (Partial(red),), shape))


def _row_case(row):
    """(op, args, mesh axis-0 reduction the result carries) for one table row."""
    red = row.reduction
    r1, r2 = ("sum", "max") if red == "mixed" else (red, red)
    plain = {"x": T((4, 6)), "dst": T((4, 6)), "update": T((2, 6)),
             "cache": T((1, 8, 2, 4)), "new": T((1, 3, 2, 4)), "indices": T((3,), I32),
             "offsets": T((), I32), "cur_pos": T((), I32), "s": T((), I32)}
    pshape = {k: v.shape for k, v in plain.items()}
    parts = row.pattern.split("+")

    def val(name, r):
        t = plain[name]
        return _partial_t(pshape[name], r, t.dtype) if name in parts else t

    reds = {n: (r1 if k == 0 else r2) for k, n in enumerate(parts)}
    if row.op == "Reduce":
        return Reduce((1,), True, ReduceKind(row.kind)), (val("x", r1),)
    if row.op == "TopK":
        return TopK(2), (val("x", r1),)
    if row.op == "Gather":
        return Gather(0), (val("x", reds.get("x", r1)), val("indices", reds.get("indices", r1)))
    if row.op == "InsertSlice":
        off = val("offsets", reds.get("offsets", r1)) if "offsets" in parts else None
        return InsertSlice(), (val("dst", reds.get("dst", r1)),
                               val("update", reds.get("update", r1)), off or i32(1),
                               off or i32(0))
    assert row.op == "CacheUpdate"
    return CacheUpdate(), (val("cache", reds.get("cache", r1)),
                           val("cur_pos", reds.get("cur_pos", r1)),
                           val("s", reds.get("s", r1)), val("new", reds.get("new", r1)))


ROWS = [r for r in TABLE if r.op in ("Reduce", "TopK", "Gather", "InsertSlice", "CacheUpdate")]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.op}-{r.kind}-{r.pattern}-{r.reduction}")
def test_commutation_row(row):
    """'An x mesh axis carrying Partial(reduction) ... propagates only when kind commutes with
    reduction ... Typeinfer rejects a non-commuting combination, naming the offending reduction
    and the fix (an explicit Reshard to Broadcast).' (Reduce; likewise the TopK, Gather,
    InsertSlice and CacheUpdate Partial sentences): allow <=> inference succeeds carrying the
    Partial; reject <=> a TypeInferError with the row's reason and the Reshard fix."""
    op, args = _row_case(row)
    if row.allow:
        t = infer(op, *args)
        t = t.fields[0] if isinstance(t, TupleType) else t
        assert t.shard is not None and t.shard.attrs == (Partial(row.reduction),)
    else:
        msg = rejects(op, *args)
        assert row.reason in msg and "Reshard" in msg


def test_every_row_is_exercised():
    """Every commutation-table row of these ops has a case (the table is the one source)."""
    assert {r.op for r in ROWS} == {"Reduce", "TopK", "Gather", "InsertSlice", "CacheUpdate"}
    # Reduce 5 kinds x 3; TopK 3; Gather 3 patterns x 3 + mixed; InsertSlice / CacheUpdate
    # (dst+update, dst, update) x 3 + mixed, plus every pattern with an index operand
    # (InsertSlice: 1 single x 3 + 3 pairs/triples x 4; CacheUpdate: 2 x 3 + 10 x 4)
    assert len(ROWS) == 5 * 3 + 3 + (3 * 3 + 1) + 2 * (3 * 3 + 1) + (3 + 12) + (6 + 40)


# =============================================================================================
# InsertSlice
# =============================================================================================
def test_insert_slice_accepts():
    """'update has the same rank and dtype as dst; the window on each axis is [offset_axis,
    offset_axis + update.shape[axis])' — the result is dst's type."""
    d = T((4, 6), BF16, Layout((4, 6), (6, 1)), StorageKind.SMEM)
    assert infer(InsertSlice(), d, T((2, 6), BF16), i32(2), i32(0)) == d
    assert infer(InsertSlice(), T((8,)), T((3,)), i32(5)) == T((8,))  # a bare rank-0 scalar
    assert infer(InsertSlice(), T((4, 6)), T((2, 3)), T((), I64), T((), I32)) == T((4, 6))


def test_insert_slice_rank_and_dtype_reject():
    """'update has the same rank and dtype as dst'."""
    rejects(InsertSlice(), T((4, 6)), T((6,)), i32(0), i32(0), match="rank")
    rejects(InsertSlice(), T((4, 6)), T((2, 6), BF16), i32(0), i32(0), match="dtype")


def test_insert_slice_offset_count_reject():
    """'A rank-1 dst accepts a bare rank-0 scalar offset; a rank-N dst requires an offset tuple
    whose length equals the rank.'"""
    rejects(InsertSlice(), T((4, 6)), T((2, 6)), i32(0), match="offset")
    rejects(InsertSlice(), T((4,)), T((2,)), i32(0), i32(0), match="offset")
    rejects(InsertSlice(), T((4,)), match="InsertSlice takes")


def test_insert_slice_offset_kind_reject():
    """'offsets: ... a rank-0 integer scalar ... or a tuple of rank-0 integer scalars'."""
    rejects(InsertSlice(), T((4,)), T((2,)), T((), F32), match="integer scalars")
    rejects(InsertSlice(), T((4,)), T((2,)), Constant(np.array([1], np.int32)),
            match="integer scalars")


def test_insert_slice_literal_window_reject_names_axis():
    """'A literal (compile-time) offset that places a negative or out-of-bounds window on an
    axis fails typeinfer, naming the axis; a runtime offset is checked at eval/runtime.'"""
    msg = rejects(InsertSlice(), T((4, 6)), T((2, 6)), i32(3), i32(0), match="axis 0")
    assert "[3, 3 + 2)" in msg
    rejects(InsertSlice(), T((4, 6)), T((2, 3)), i32(0), i32(-1), match="axis 1")
    n = DimVar("N", 1, 64)
    rejects(InsertSlice(), T((n,)), T((n,)), i32(1), match="axis 0")
    assert infer(InsertSlice(), T((n,)), T((n,)), i32(0)) == T((n,))
    assert infer(InsertSlice(), T((4, 6)), T((2, 6)), T((), I32), T((), I32)) == T((4, 6))
    rejects(InsertSlice(), T((4, 6)), T((5, 6)), T((), I32), T((), I32), match="exceeds")


def test_insert_slice_partial_identity():
    """'When dst's ShardLayout carries a Partial(reduction) mesh axis, update MUST carry the
    identical mesh and the identical per-mesh-axis ShardAttr state (update's own cute layout may
    still differ ...)'."""
    d = T((4, 6), F32, sl(M22, (Partial("sum"), Broadcast()), (4, 6)))
    u = T((2, 6), F32, sl(M22, (Partial("sum"), Broadcast()), ((2, 1), 6)))
    assert infer(InsertSlice(), d, u, i32(0), i32(0)).shard.attrs == (Partial("sum"),
                                                                       Broadcast())
    u2 = T((2, 6), F32, sl(M22, (Partial("sum"), Split(1)), (2, 6)))
    rejects(InsertSlice(), d, u2, i32(0), i32(0), match="identical")


def test_insert_slice_complete_dst_rejects_partial_update():
    """'When dst is complete, an update carrying a Partial MUST be rejected ... An explicit
    Reshard(update, Broadcast) completes it.'"""
    msg = rejects(InsertSlice(), T((4, 6)), _partial_t((2, 6), "sum"), i32(0), i32(0))
    assert "Reshard" in msg


def test_insert_slice_sharded_write():
    """Writes keep dst's sharding: a replicated update is written by each owner; an update
    Split matching dst's own Split of a whole-window axis is accepted, any other update Split
    fails closed."""
    ds = sl(M2, (Split(1),), (4, 6))
    d = T((4, 6), F32, ds)
    assert infer(InsertSlice(), d, T((2, 6)), i32(0), i32(0)).shard == materialize_(ds)
    u = T((2, 6), F32, sl(M2, (Split(1),), (2, 6)))
    assert infer(InsertSlice(), d, u, i32(2), i32(0)).shard.attrs == (Split(1),)
    u = T((4, 2), F32, sl(M2, (Split(1),), (4, 2)))
    rejects(InsertSlice(), d, u, i32(0), i32(0), match="fail closed")
    rejects(InsertSlice(), T((4, 6)), u, i32(0), i32(0), match="fail closed")


def materialize_(s: ShardLayout) -> ShardLayout:
    return s.with_strides(s.shared_engine_strides())


# =============================================================================================
# CacheUpdate
# =============================================================================================
CACHE = T((2, 16, 4, 8), BF16)
NEW = T((2, 3, 4, 8), BF16)


def test_cache_update_result_is_cache_type():
    """'The write interval is runtime data, never a shape dimension. The result has cache's
    same static shape; no context-length DimVar grows with a write.'"""
    assert infer(CacheUpdate(), CACHE, T((), I32), T((1,), I32), NEW) == CACHE
    ctx = DimVar("CTX", 1, 4096)
    c = T((1, ctx, 4, 8), BF16)
    assert infer(CacheUpdate(), c, T((1, 1), I32), T((), I32), T((1, ctx, 4, 8), BF16)) == c


@pytest.mark.parametrize("cache,new,match", [
    (T((2, 16, 4)), T((2, 3, 4)), "rank-4"),
    (CACHE, T((2, 3, 4, 8), F32), "dtype"),
    (CACHE, T((1, 3, 4, 8), BF16), "B"),
    (CACHE, T((2, 3, 2, 8), BF16), "kv_heads"),
    (CACHE, T((2, 3, 4, 4), BF16), "head_dim"),
    (CACHE, T((2, 17, 4, 8), BF16), "MUST NOT exceed"),
])
def test_cache_update_shape_reject(cache, new, match):
    """'cache and new MUST be rank-4 [B, len, kv_heads, head_dim] tensors with the same dtype
    and equal B, kv_heads, and head_dim; typeinfer rejects a mismatch. When both lengths are
    static, new.len MUST NOT exceed cache.len.'"""
    rejects(CacheUpdate(), cache, T((), I32), T((), I32), new, match=match)


@pytest.mark.parametrize("cur,s", [(T((), I64), T((), I32)), (T((), I32), T((2,), I32)),
                                   (T((DimVar("ONE", 1, 2),), I32), T((), I32)),
                                   (T((), I32), T((), F32))])
def test_cache_update_scalar_reject(cur, s):
    """'cur_pos and s MUST be i32 scalar tensors. A scalar is rank-0 or has only literal size-1
    dimensions; typeinfer rejects another dtype or shape.'"""
    rejects(CacheUpdate(), CACHE, cur, s, NEW, match="i32 scalar")


def test_cache_update_partial_identity():
    """'A cache carrying Partial(reduction) on a mesh axis requires new to carry the identical
    mesh and per-mesh-axis state; a complete cache rejects a new carrying Partial.'"""
    c = T((2, 16, 4, 8), BF16, sl(M22, (Partial("sum"), Split(2)), (2, 16, 4, 8)))
    n = T((2, 3, 4, 8), BF16, sl(M22, (Partial("sum"), Split(2)), (2, 3, 4, 8)))
    assert infer(CacheUpdate(), c, T((), I32), T((), I32), n).shard.attrs == (
        Partial("sum"), Split(2))
    n2 = T((2, 3, 4, 8), BF16, sl(M22, (Partial("sum"), Broadcast()), (2, 3, 4, 8)))
    rejects(CacheUpdate(), c, T((), I32), T((), I32), n2, match="identical")
    n3 = T((2, 4, 4, 8), BF16, sl(M22, (Partial("sum"), Split(1)), (2, 4, 4, 8)))
    c3 = T((2, 16, 4, 8), BF16, sl(M22, (Partial("sum"), Split(1)), (2, 16, 4, 8)))
    rejects(CacheUpdate(), c3, T((), I32), T((), I32), n3, match="fail closed")


# =============================================================================================
# TopK
# =============================================================================================
def test_topk_result_tuple():
    """'The result is a (values, indices) tuple; both shrink the selected axis to length k;
    values keep x's dtype and indices are i64.'"""
    t = infer(TopK(3, axis=1), T((4, 6), BF16))
    assert t == TupleType((T((4, 3), BF16), T((4, 3), I64)))
    assert infer(TopK(0), T((5,))).fields[0].shape == (0,)


def test_topk_symbolic_k():
    """'k is a ShapeDim: a static int, or a dynamic k derived from a context-length DimVar
    (e.g. dim_min(512, CTX_LEN // 4)) — a first-class value propagated as the selected axis's
    symbolic length in the output shape'."""
    ctx = DimVar("CTX_LEN", 1, 8192)
    k = dim_min(512, ctx // 4)
    t = infer(TopK(k), T((2, ctx)))
    assert t.fields[0].shape == (2, k) and t.fields[1].dtype is I64


@pytest.mark.parametrize("k", [3.0, "3", True, None, (3,)])
def test_topk_k_must_be_shape_dim(k):
    """'k MUST satisfy the ShapeDim contract (int / DimVar / dim-arithmetic Expr); any other
    value fails typeinfer.'"""
    rejects(TopK(k), T((4, 6)), match="ShapeDim")


def test_topk_k_bounds():
    """'k MUST be non-negative (checked whenever k is static) and MUST NOT exceed the
    selected-axis length (checked whenever the axis length is static and k is either static or
    a symbolic value whose statically-derivable upper bound ... is known).'"""
    rejects(TopK(-1), T((4, 6)), match="negative")
    rejects(TopK(7), T((4, 6)), match="MUST NOT exceed")
    n = DimVar("N", 1, 100)
    rejects(TopK(dim_min(n, 16)), T((n, 8)), match="upper bound 16")
    assert infer(TopK(dim_min(n, 8)), T((n, 8))).fields[0].shape == (n, dim_min(n, 8))


def test_topk_unchecked_cases_fail_open():
    """'A symbolic k against a symbolic axis length, or an upper bound that does not statically
    compose (e.g. through DimSub ...), is not checked at typeinfer — it fails open'."""
    n = DimVar("N", 1, 100)
    assert infer(TopK(n - 1, axis=0), T((n, 8))).fields[0].shape == (n - 1, 8)
    assert infer(TopK(n - 1, axis=1), T((n, 8))).fields[0].shape == (n, n - 1)
    assert infer(TopK(5, axis=0), T((n, 8))).fields[0].shape == (5, 8)


def test_topk_k_dimvars_from_x_shape():
    """'A symbolic k's DimVar(s) MUST be resolvable from x's own (input) shape at evaluation
    time'."""
    other = DimVar("OTHER", 1, 4)
    rejects(TopK(other), T((4, 6)), match="OTHER")


def test_topk_split_on_selected_axis_reject():
    """'The selected axis MUST NOT be Split-sharded by a ShardLayout; a split selected axis
    fails typeinfer.'"""
    rejects(TopK(2, axis=1), T((4, 6), F32, sl(M2, (Split(1),), (4, 6))), match="Split")


def test_topk_sharded_output_layout():
    """'A ShardLayout output preserves the non-selected sharding and any replication; only the
    selected axis's layout extent becomes k, so the layout keeps size parity with the result
    shape.'"""
    s = sl(M22, (Split(0), Broadcast()), (4, (2, 3)))
    t = infer(TopK(2, axis=1), T((4, 6), F32, s))
    v, i = t.fields
    assert v.shard == i.shard == ShardLayout(M22, (Split(0), Broadcast()), Layout((4, 2), (2, 1)))


def test_topk_rejects_any_partial():
    """'x MUST NOT carry a Partial(reduction) mesh axis ... typeinfer rejects any Partial input
    regardless of reduction or k.'"""
    for red in ("sum", "max", "min"):
        rejects(TopK(0), _partial_t((4, 6), red), match="Reshard")


# =============================================================================================
# consensus ops
# =============================================================================================
def test_transpose():
    """Transpose follows torch.permute: 'consensus ops (Transpose / ...) follow torch / numpy'."""
    assert infer(Transpose((1, 0, 2)), T((2, 3, 4))).shape == (3, 2, 4)
    assert infer(Transpose((-1, 0)), T((2, 3))).shape == (3, 2)
    rejects(Transpose((0, 0)), T((2, 3)), match="permutation")
    rejects(Transpose((0,)), T((2, 3)), match="permutation")
    rejects(Transpose((0, 2)), T((2, 3)), match="out of range")


def test_transpose_layouts():
    """Transpose permutes the layout as a view: positions and strides move with their axes, a
    Split follows its position, Partial / Broadcast carry (a permutation commutes with every
    reduction)."""
    s = sl(M22, (Split(0), Partial("max")), ((2, 2), 6))
    t = infer(Transpose((1, 0)), T((4, 6), F32, s))
    assert t.shard == ShardLayout(M22, (Split(1), Partial("max")),
                                  Layout((6, (2, 2)), (1, (12, 6))))
    assert infer(Transpose((1, 0)), T((4, 6), F32, Layout((4, 6), (6, 1)))).layout == \
        Layout((6, 4), (1, 6))


def test_slice():
    """Slice follows torch / numpy basic slicing with a positive step."""
    t = infer(Slice((0, 1), (4, 5), (2, 1)), T((4, 6)))
    assert t.shape == tuple(torch.zeros(4, 6)[0:4:2, 1:5].shape)
    n = DimVar("N", 1, 64)
    assert infer(Slice((0, 2), (n, 6)), T((n, 6))).shape == (n, 4)
    rejects(Slice((0,), (4,), (0,)), T((4,)), match="stride")
    rejects(Slice((0,), (4,)), T((4, 6)), match="entries")
    rejects(Slice((-1,), (n,)), T((n,)), match="negative")


def test_slice_sharding():
    """Slice keeps a Split only on an axis it leaves whole (fail closed otherwise); Partial /
    Broadcast carry (a selection commutes with every reduction)."""
    s = sl(M22, (Split(0), Partial("sum")), (4, 6))
    t = infer(Slice((0, 1), (4, 5)), T((4, 6), F32, s))
    assert t.shard.attrs == (Split(0), Partial("sum")) and t.shard.layout == \
        Layout((4, 4), (4, 1))
    rejects(Slice((1, 0), (4, 6)), T((4, 6), F32, s), match="fail closed")
    assert infer(Slice((0, 0), (4, 6)), T((4, 6), F32, s)).shard.layout.strides == (6, 1)


def test_concat():
    """Concat follows torch.cat."""
    n = DimVar("N", 1, 9)
    assert infer(Concat(1), T((2, 3)), T((2, 4))).shape == (2, 7)
    assert infer(Concat(0), T((n, 3)), T((2, 3))).shape[0] == n + 2
    rejects(Concat(0), T((2, 3)), T((2, 4)), match="axis 1")
    rejects(Concat(0), T((2, 3)), T((2, 3), BF16), match="dtype")
    rejects(Concat(0), T((2, 3)), T((2,)), match="rank")
    rejects(Concat(0), T(()), match="zero-dimensional")
    rejects(Concat(0), match="at least one")
    rejects(Concat(2), T((2, 3)), match="out of range")
    rejects(Concat(0), T((2,)), T((2,), F32, None, StorageKind.SMEM), match="storage")


def test_concat_sharding():
    """Concat of identically sharded inputs keeps the sharding with the concatenated axis whole
    and unsplit; a Split on that axis, a Partial on only some inputs, or a mix of sharded and
    unsharded inputs fails closed with a Reshard fix."""
    s = sl(M22, (Split(1), Partial("sum")), (2, 4))
    t = infer(Concat(0), T((2, 4), F32, s), T((2, 4), F32, s))
    assert t.shard.attrs == (Split(1), Partial("sum")) and t.shard.layout.shape == (4, 4)
    rejects(Concat(1), T((2, 4), F32, s), T((2, 4), F32, s), match="fail closed")
    b = sl(M22, (Split(1), Broadcast()), (2, 4))
    assert "Reshard" in rejects(Concat(0), T((2, 4), F32, s), T((2, 4), F32, b),
                                match="identical state")
    rejects(Concat(0), T((2, 4), F32, s), T((2, 4)), match="fail closed")


def test_stack():
    """Stack follows torch.stack."""
    assert infer(Stack(1), T((2, 3)), T((2, 3))).shape == (2, 2, 3)
    assert infer(Stack(-1), T((2, 3))).shape == (2, 3, 1)
    rejects(Stack(0), T((2, 3)), T((3, 2)), match="shape")
    rejects(Stack(3), T((2, 3)), match="out of range")
    rejects(Stack(0), match="at least one")
    s = sl(M2, (Split(1),), (2, 4))
    t = infer(Stack(0), T((2, 4), F32, s), T((2, 4), F32, s))
    assert t.shard.attrs == (Split(2),) and t.shard.layout.shape == (2, 2, 4)


def test_shape_of_and_rank():
    """ShapeOf gives the shape value (ShapeType of the rank); Rank a rank-0 i64 tensor."""
    n = DimVar("N", 1, 9)
    assert infer(ShapeOf(), T((n, 3))) == ShapeType(2)
    assert infer(Rank(), T((n, 3))) == T((), I64)
    shp = Call(ShapeOf(), (Var("x", T((2,))),))
    rejects(ShapeOf(), shp, match="expected a tensor")
    rejects(Rank(), shp, match="expected a tensor")


def test_shape_extract_and_compose():
    """ShapeExtract: 'The result is the dimension at index.' ShapeCompose: 'The result is a
    shape value assembled in input order.'"""
    shp = Call(ShapeOf(), (Var("x", T((2, 3, 4))),))
    d = Call(ShapeExtract(1), (shp,))
    assert infer_expr(d) == DimType()
    assert infer(ShapeExtract(-3), shp) == DimType()
    assert infer(ShapeCompose(), d, d, Call(ShapeExtract(0), (shp,))) == ShapeType(3)
    assert infer(ShapeCompose()) == ShapeType(0)
    rejects(ShapeExtract(3), shp, match="out of range")
    rejects(ShapeExtract(0), T((2,)), match="ShapeType")
    rejects(ShapeCompose(), d, T(()), match="DimType")


# =============================================================================================
# hypothesis: well-typed applications match torch, corrupted ones raise TypeInferError
# =============================================================================================
SHAPES = st.lists(st.integers(0, 4), min_size=1, max_size=4).map(tuple)


def _rand(shape):
    return torch.randn(shape)


@given(SHAPES, st.data())
def test_transpose_matches_torch(shape, data):
    """Transpose follows torch.permute (consensus op)."""
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    assert infer(Transpose(perm), T(shape)).shape == tuple(_rand(shape).permute(perm).shape)


@given(SHAPES, st.data())
def test_slice_matches_torch(shape, data):
    """Slice follows torch basic slicing (consensus op)."""
    b = tuple(data.draw(st.integers(-6, 6)) for _ in shape)
    e = tuple(data.draw(st.integers(-6, 6)) for _ in shape)
    s = tuple(data.draw(st.integers(1, 3)) for _ in shape)
    want = _rand(shape)[tuple(slice(*z) for z in zip(b, e, s, strict=True))].shape
    assert infer(Slice(b, e, s), T(shape)).shape == tuple(want)


@given(SHAPES, st.data())
def test_concat_matches_torch(shape, data):
    """Concat follows torch.cat (consensus op)."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = data.draw(st.integers(1, 3))
    shapes = [tuple(data.draw(st.integers(0, 4)) if a == axis % len(shape) else d
                    for a, d in enumerate(shape)) for _ in range(n)]
    want = torch.cat([_rand(s) for s in shapes], dim=axis).shape
    assert infer(Concat(axis), *[T(s) for s in shapes]).shape == tuple(want)


@given(SHAPES, st.data())
def test_stack_matches_torch(shape, data):
    """Stack follows torch.stack (consensus op)."""
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    n = data.draw(st.integers(1, 3))
    want = torch.stack([_rand(shape) for _ in range(n)], dim=axis).shape
    assert infer(Stack(axis), *[T(shape)] * n).shape == tuple(want)


@given(SHAPES, st.data())
def test_reduce_matches_torch(shape, data):
    """'The logical result shape follows numpy reduction rules.' (torch agrees on non-empty
    axes)."""
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True))
    axes = tuple(a - len(shape) if data.draw(st.booleans()) else a for a in axes)
    keep = data.draw(st.booleans())
    kind = data.draw(st.sampled_from([ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MEAN]))
    want = torch.sum(_rand(shape), dim=axes, keepdim=keep).shape
    assert infer(Reduce(axes, keep, kind), T(shape)).shape == tuple(want)


@given(SHAPES.filter(lambda s: all(s)), st.data())
def test_gather_matches_numpy_take(shape, data):
    """'Result shape is x.shape[:axis] + index.shape[batch_dims:] + x.shape[axis+1:]' —
    np.take / torch.index_select semantics for batch_dims=0."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    ishape = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    idx = np.random.default_rng(0).integers(0, shape[axis], ishape)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    t = infer(Gather(axis), T(shape), T(ishape, I64))
    assert t.shape == np.take(x, idx, axis=axis).shape
    if len(ishape) == 1:
        ts = torch.index_select(torch.from_numpy(x), axis, torch.from_numpy(idx)).shape
        assert t.shape == tuple(ts)


@given(SHAPES, st.data())
def test_topk_matches_torch(shape, data):
    """'both shrink the selected axis to length k; values keep x's dtype and indices are
    i64.' — torch.topk on random data."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(0, shape[axis]))
    v, i = torch.topk(_rand(shape), k, dim=axis)
    t = infer(TopK(k, axis=axis), T(shape))
    assert t.fields[0].shape == tuple(v.shape) and t.fields[1].shape == tuple(i.shape)
    assert t.fields[1].dtype is I64 and i.dtype == torch.int64


@st.composite
def corrupted(draw):
    """A well-typed application with one spec rule broken."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
    r = len(shape)
    kind = draw(st.sampled_from(["transpose", "slice", "concat", "stack", "reduce", "gather",
                                 "topk", "cast", "insert", "cache", "reshape_free"]))
    x = T(shape)
    if kind == "transpose":
        bad = draw(st.sampled_from(["dup", "len"]))
        perm = (0,) * r if bad == "dup" and r > 1 else tuple(range(r + 1))
        return Transpose(perm), (x,)
    if kind == "slice":
        if draw(st.booleans()):
            return Slice((0,) * r, shape, (0,) * r), (x,)
        return Slice((0,) * (r + 1), (1,) * (r + 1)), (x,)
    if kind == "concat":
        bad = draw(st.sampled_from(["dtype", "axis", "rank"]))
        if bad == "dtype":
            return Concat(0), (x, T(shape, BF16))
        if bad == "axis":
            return Concat(r), (x, x)
        return Concat(0), (x, T((*shape, 1)))
    if kind == "stack":
        return Stack(0), (x, T((*shape[:-1], shape[-1] + 1)))
    if kind == "reduce":
        if draw(st.booleans()) or r == 1:
            return Reduce((draw(st.sampled_from([r, -r - 1])),)), (x,)
        return Reduce((0, -r)), (x,)
    if kind == "gather":
        bad = draw(st.sampled_from(["float", "axis", "bd"]))
        if bad == "float":
            return Gather(0), (x, T((2,), F32))
        if bad == "axis":
            return Gather(r), (x, T((2,), I32))
        return Gather(r - 1, batch_dims=r), (x, T(shape[:r], I32))
    if kind == "topk":
        bad = draw(st.sampled_from(["big", "neg", "notdim", "split"]))
        k = {"big": shape[-1] + 1, "neg": -1, "notdim": 1.5, "split": 1}[bad]
        lay = sl(M2, (Split(r - 1),), tuple(2 * d for d in shape)) if bad == "split" else None
        xs = T(tuple(2 * d for d in shape), F32, lay) if lay else x
        return TopK(k), (xs,)
    if kind == "cast":
        return Cast(I32, overflow="saturate"), (x,)
    if kind == "insert":
        return InsertSlice(), (x, x, *[i32(0)] * (r - 1))
    if kind == "cache":
        return CacheUpdate(), (T((1, 4, 2, 2)), T((), I32), T((), I32), T((1, 5, 2, 2)))
    return Reduce((0,), kind=ReduceKind.MEAN), (T(shape, I32),)


@given(corrupted())
def test_corrupted_applications_raise_typeinfer_error(case):
    """Each op's constraints are enforced 'by its registered @register_typeinfer(<OpClass>)
    body via ctx.error(...)' — a broken rule is a TypeInferError, never another exception."""
    op, args = case
    with pytest.raises(TypeInferError):
        infer(op, *args)


@st.composite
def any_tensor(draw):
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 4, DimVar("N", 1, 8)]),
                                max_size=3)))
    dtype = draw(st.sampled_from([F32, BF16, I32, I64, DType.BOOL]))
    static = all(isinstance(d, int) for d in shape)
    lay = None
    if static and shape and draw(st.booleans()):
        attrs = []
        for m in M22.axis_extents:
            opts = [Broadcast(), Partial(draw(st.sampled_from(["sum", "max", "min"])))]
            opts += [Split(a) for a, d in enumerate(shape) if d % m == 0
                     and Split(a) not in attrs]
            attrs.append(draw(st.sampled_from(opts)))
        lay = ShardLayout(M22, tuple(attrs), Layout(shape))
    return T(shape, dtype, lay)


@st.composite
def any_application(draw):
    xs = draw(st.lists(any_tensor(), min_size=1, max_size=4))
    ints = st.integers(-4, 4)
    ops = [
        lambda: Transpose(tuple(draw(st.lists(ints, max_size=4)))),
        lambda: Slice(tuple(draw(st.lists(ints, max_size=3))),
                      tuple(draw(st.lists(ints, max_size=3)))),
        lambda: Concat(draw(ints)), lambda: Stack(draw(ints)),
        lambda: Reduce(tuple(draw(st.lists(ints, max_size=3))), draw(st.booleans()),
                       draw(st.sampled_from(list(ReduceKind)))),
        lambda: Gather(draw(ints), draw(st.integers(0, 3))),
        lambda: TopK(draw(st.one_of(ints, st.just(DimVar("N", 1, 8)), st.floats()))),
        lambda: Cast(draw(st.sampled_from(list(DType)))),
        lambda: InsertSlice(), lambda: CacheUpdate(), lambda: ShapeOf(), lambda: Rank(),
    ]
    op = draw(st.sampled_from(ops))()
    n = len(op.INPUTS) if not op.VARIADIC else len(xs)
    args = [xs[i % len(xs)] for i in range(n)]
    if isinstance(op, InsertSlice) and draw(st.booleans()):
        args = args[:2] + [draw(st.sampled_from([T((), I32), T((), F32), i32(-1), i32(2)]))
                           for _ in range(draw(st.integers(0, 3)))]
    return op, args


@given(any_application())
def test_random_applications_type_or_typeinfer_error(case):
    """Typing rules reject through 'ctx.error(...)': any application either types or raises
    TypeInferError — no other exception escapes a rule."""
    op, args = case
    try:
        t = infer(op, *args)
    except TypeInferError:
        return
    for f in (t.fields if isinstance(t, TupleType) else (t,)):
        if isinstance(f, TensorType) and f.shard is not None:
            assert f.shard.layout.strides is not None
