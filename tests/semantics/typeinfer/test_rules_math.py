"""Type rules of ir/hir/math (Binary, Unary): accept and reject cases quoting the HIR spec, and
hypothesis properties against torch's result shapes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tilefoundry.semantics.typeinfer.math  # noqa: F401  (registers the math rules)
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Var
from tilefoundry.semantics.ops import (
    ALIASES,
    UNARY_PROPERTIES,
    Binary,
    BinaryKind,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
from tilefoundry.semantics.types import (
    Broadcast,
    DimVar,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    StorageKind,
    TensorType,
)

F32, F16, I32, BOOL = DType.F32, DType.F16, DType.I32, DType.BOOL
MESH = Mesh("device", ("x",), (2,))
MESH2 = Mesh("device", ("x", "y"), (2, 2))
N = DimVar("N", 1, 64)

TORCH_DT = {F32: torch.float32, F16: torch.float16, I32: torch.int32, DType.I64: torch.int64,
            BOOL: torch.bool, DType.BF16: torch.bfloat16, DType.I8: torch.int8,
            DType.U8: torch.uint8}


def T(*shape, dt: DType = F32, layout=None, storage=StorageKind.GMEM) -> TensorType:
    return TensorType(tuple(shape), dt, layout, storage)


def shard(*attrs, shape=(4, 8), mesh=MESH) -> ShardLayout:
    return ShardLayout(mesh, tuple(attrs), Layout(tuple(shape)))


def infer(op, *types):
    return infer_expr(Call(op, tuple(Var(f"v{i}", t) for i, t in enumerate(types))))


def reject(op, *types) -> TypeInferError:
    with pytest.raises(TypeInferError) as ei:
        infer(op, *types)
    return ei.value


def B(kind: BinaryKind) -> Binary:
    return Binary(kind)


def U(kind: UnaryKind) -> Unary:
    return Unary(kind)


ADD, SUB, MUL, DIV = BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL, BinaryKind.DIV
ARITH = [ADD, SUB, MUL, DIV, BinaryKind.MIN, BinaryKind.MAX]
COMPARE = [k for k in BinaryKind if k.is_comparison]
LOGICAL = [k for k in BinaryKind if k.is_boolean]


# =============================================================================================
# Binary: dtypes
# =============================================================================================
def test_binary_same_dtype_accepts():
    """HIR Binary: "Both operands MUST already carry the same dtype" — same dtype types."""
    t = infer(B(ADD), T(4, 8, dt=F16), T(4, 8, dt=F16))
    assert t == T(4, 8, dt=F16)


@pytest.mark.parametrize("kind", list(BinaryKind))
def test_binary_dtype_mismatch_rejects(kind):
    """HIR Binary: "Both operands MUST already carry the same dtype, and typeinfer MUST reject a
    mismatch." — every kind, naming the operand and the cast fix."""
    e = reject(B(kind), T(4, dt=F32), T(4, dt=F16))
    assert e.operand == "rhs" and "rhs" in str(e)
    assert "insert an explicit cast" in str(e)


def test_binary_no_promotion_int_float():
    """HIR Binary: "dtypes do not promote" — i32 + f32 is rejected, not promoted to f32."""
    e = reject(B(ADD), T(3, dt=I32), T(3, dt=F32))
    assert "do not promote" in str(e) and "insert an explicit cast" in str(e)


@pytest.mark.parametrize("kind", COMPARE)
def test_comparisons_give_bool(kind):
    """HIR math: "Pointwise arithmetic and comparison, torch semantics" — a comparison's result
    is bool, whatever the (shared) operand dtype."""
    for dt in (F32, I32, BOOL):
        assert infer(B(kind), T(2, 3, dt=dt), T(3, dt=dt)) == T(2, 3, dt=BOOL)


@pytest.mark.parametrize("kind", LOGICAL)
def test_logical_kinds_need_bool(kind):
    """HIR Binary: "kind: binary arithmetic, comparison, or boolean tag" — boolean kinds take
    bool operands (accept) and reject numeric ones with a cast fix."""
    assert infer(B(kind), T(5, dt=BOOL), T(5, dt=BOOL)) == T(5, dt=BOOL)
    e = reject(B(kind), T(5, dt=I32), T(5, dt=I32))
    assert e.operand == "lhs" and "cast to bool" in str(e)


@pytest.mark.parametrize("kind", ARITH)
def test_arithmetic_rejects_bool(kind):
    """HIR Binary: "kind: binary arithmetic, comparison, or boolean tag" — arithmetic kinds do
    not take bool operands (no implicit promotion of bool)."""
    e = reject(B(kind), T(5, dt=BOOL), T(5, dt=BOOL))
    assert e.operand == "lhs" and "insert an explicit cast" in str(e)


def test_integer_div_rejected_float_div_accepted():
    """HIR Binary: "Values follow torch pointwise semantics; dtypes do not promote." — torch's
    integer `/` promotes to float, so an integer DIV has no non-promoting meaning: rejected."""
    e = reject(B(DIV), T(4, dt=I32), T(4, dt=I32))
    assert "float dtype" in str(e) and e.operand == "lhs"
    assert infer(B(DIV), T(4, dt=F16), T(4, dt=F16)) == T(4, dt=F16)
    assert infer(B(ADD), T(4, dt=I32), T(4, dt=I32)) == T(4, dt=I32)


@pytest.mark.parametrize("kind", list(BinaryKind))
def test_binary_f4e2m1_rejected(kind):
    """HIR Cast: "Cast is the conversion boundary for the low-precision dtypes (fp8e4m3 / f8e8m0
    / f4e2m1)" and the evaluator cannot evaluate f4e2m1 — Binary on f4e2m1 is rejected with the
    fix to cast to f32 first."""
    e = reject(B(kind), T(4, dt=DType.F4E2M1), T(4, dt=DType.F4E2M1))
    assert "f32" in str(e) and e.operand == "lhs"


def test_minimum_maximum_aliases():
    """HIR Binary: "The elementwise min / max kinds are also surfaced as minimum / maximum." """
    assert ALIASES["minimum"] == (Binary, BinaryKind.MIN)
    assert ALIASES["maximum"] == (Binary, BinaryKind.MAX)
    assert infer(Binary(ALIASES["maximum"][1]), T(3, dt=I32), T(3, dt=I32)) == T(3, dt=I32)


def test_binary_non_tensor_operand_rejected():
    """HIR Binary: "lhs: input; input tensor." — a tuple operand is rejected, naming it."""
    from tilefoundry.semantics.types import TupleType

    e = reject(B(ADD), T(3), TupleType((T(3),)))
    assert e.operand == "rhs"


# =============================================================================================
# Binary: shapes
# =============================================================================================
def test_binary_broadcasting_accepts():
    """HIR Binary: "Values follow torch pointwise semantics" — torch broadcasting."""
    assert infer(B(MUL), T(4, 1, 3), T(5, 1)).shape == (4, 5, 3)
    assert infer(B(ADD), T(), T(2, 3)).shape == (2, 3)
    assert infer(B(ADD), T(0, 3), T(1, 3)).shape == (0, 3)


def test_binary_symbolic_broadcasting():
    """HIR Binary: "Values follow torch pointwise semantics" — a symbolic dim broadcasts against
    1 or an identical dim only."""
    assert infer(B(ADD), T(N, 4), T(1, 4)).shape == (N, 4)
    assert infer(B(ADD), T(N, 4), T(N, 4)).shape == (N, 4)
    e = reject(B(ADD), T(N, 4), T(3, 4))
    assert e.operand == "rhs" and "broadcast" in str(e)
    e = reject(B(ADD), T(N, 4), T(DimVar("M", 1, 64), 4))
    assert "broadcast" in str(e)


def test_binary_non_broadcastable_rejected():
    """HIR Binary: "Values follow torch pointwise semantics" — shapes torch cannot broadcast are
    rejected, naming the operand."""
    e = reject(B(ADD), T(4, 3), T(4, 2))
    assert e.operand == "rhs" and "do not broadcast" in str(e)
    reject(B(ADD), T(0, 3), T(2, 3))


# =============================================================================================
# Binary: storage and layout
# =============================================================================================
def test_binary_storage_most_local():
    """semantic-analysis (missing; decided here): "output storage of multi-input ops" — the
    result lives at the most local concrete storage among the operands."""
    r = infer(B(ADD), T(4, storage=StorageKind.RMEM), T(4, storage=StorageKind.SMEM))
    assert r.storage is StorageKind.RMEM
    r = infer(B(ADD), T(4, storage=StorageKind.GMEM), T(4, storage=StorageKind.SMEM))
    assert r.storage is StorageKind.SMEM
    r = infer(B(ADD), T(4, storage=StorageKind.UNMATERIALIZED), T(4, storage=StorageKind.GMEM))
    assert r.storage is StorageKind.GMEM
    r = infer(B(ADD), T(4, storage=StorageKind.UNMATERIALIZED),
              T(4, storage=StorageKind.UNMATERIALIZED))
    assert r.storage is StorageKind.UNMATERIALIZED


def test_binary_split_layout_carries():
    """HIR: "each op's registered typeinfer owns the layout / mesh compatibility and result
    layout it requires" — identically split operands give that split; a replicated plain operand
    broadcasts into it."""
    lay = shard(Split(0))
    r = infer(B(ADD), T(4, 8, layout=lay), T(4, 8, layout=lay))
    assert r.layout == lay
    r = infer(B(MUL), T(4, 8, layout=lay), T(8))
    assert r.layout == lay


def test_binary_disagreeing_shardings_rejected():
    """HIR: "each op's registered typeinfer owns the layout / mesh compatibility" — operands
    split differently (or on different meshes) are rejected with a Reshard fix."""
    e = reject(B(ADD), T(4, 8, layout=shard(Split(0))), T(4, 8, layout=shard(Split(1))))
    assert e.operand == "rhs" and "Reshard" in str(e)
    other = Mesh("cta", ("x",), (2,))
    e = reject(B(ADD), T(4, 8, layout=shard(Split(0))),
               T(4, 8, layout=shard(Split(0), mesh=other)))
    assert e.operand == "rhs" and "Reshard" in str(e)


def test_binary_sharded_operand_broadcast_rejected():
    """HIR: "each op's registered typeinfer owns the layout / mesh compatibility" — a sharded
    operand cannot be broadcast to a larger result shape."""
    e = reject(B(ADD), T(1, 8, layout=shard(Split(1), shape=(1, 8))), T(4, 8))
    assert "Reshard" in str(e)


# =============================================================================================
# Binary: Partial commutation (HIR Binary entry)
# =============================================================================================
def _pl(red: str) -> ShardLayout:
    return shard(Partial(red))


def test_add_both_partial_sum_passes():
    """HIR Binary: "ADD with both operands Partial: commutes (passes) only when both carry the
    same reduction="sum" on that mesh axis" """
    r = infer(B(ADD), T(4, 8, layout=_pl("sum")), T(4, 8, layout=_pl("sum")))
    assert r.layout.attrs == (Partial("sum"),)


@pytest.mark.parametrize("reds", [("max", "max"), ("min", "min"), ("sum", "max")])
def test_add_both_partial_non_sum_rejects(reds):
    """HIR Binary: "(max/min reject — max(x)+max(y) is not max(x+y))" """
    e = reject(B(ADD), T(4, 8, layout=_pl(reds[0])), T(4, 8, layout=_pl(reds[1])))
    assert e.operand == "lhs" and "Reshard" in str(e)


@pytest.mark.parametrize("red", ["max", "min"])
@pytest.mark.parametrize("side", [0, 1])
def test_add_one_partial_max_min_passes(red, side):
    """HIR Binary: "ADD with one Partial operand and the other plain/Broadcast: commutes (passes)
    for reduction in {"max", "min"}" """
    ops = [T(4, 8, layout=shard(Broadcast())), T(4, 8)]
    ops[side] = T(4, 8, layout=_pl(red))
    r = infer(B(ADD), *ops)
    assert r.layout.attrs == (Partial(red),)


@pytest.mark.parametrize("side", [0, 1])
def test_add_one_partial_sum_rejects(side):
    """HIR Binary: "and rejects for "sum" (sum(x)+b != sum(x+b))" — naming the offending
    operand and the Reshard-to-Broadcast fix."""
    ops = [T(4, 8), T(4, 8)]
    ops[side] = T(4, 8, layout=_pl("sum"))
    e = reject(B(ADD), *ops)
    assert e.operand == ("lhs", "rhs")[side] and "Reshard" in str(e) and "Broadcast" in str(e)


@pytest.mark.parametrize("side", [0, 1])
def test_mul_one_partial_sum_passes(side):
    """HIR Binary: "MUL with one Partial operand and the other plain/Broadcast: commutes (passes)
    only for reduction="sum" (scaling by a replicated constant distributes over sum)" """
    ops = [T(4, 8), T(4, 8)]
    ops[side] = T(4, 8, layout=_pl("sum"))
    assert infer(B(MUL), *ops).layout.attrs == (Partial("sum"),)


@pytest.mark.parametrize("red", ["max", "min"])
def test_mul_one_partial_max_min_rejects(red):
    """HIR Binary: "rejects for "max"/"min" (the constant's sign is not statically provable, and
    a negative scale flips max to min)" """
    e = reject(B(MUL), T(4, 8), T(4, 8, layout=_pl(red)))
    assert e.operand == "rhs" and "Reshard" in str(e)


@pytest.mark.parametrize(("kind", "red"), [(ADD, "max"), (ADD, "min"), (MUL, "sum")])
@pytest.mark.parametrize("side", [0, 1])
def test_one_partial_beside_a_split_on_the_same_mesh_axis_rejects(kind, red, side):
    """The table's one-Partial rows hold for the other operand *replicated* on the mesh axis
    (commutation.py). A Split there gives each device one block of it, which it cannot combine
    with its partial value: ``min_d(p_d) + s`` is no per-device function of ``(p_d, s_d)``. The
    rule typed the result Split and dropped the Partial; the mesh simulation could not run it
    ("an operand's Partial(min) ... cannot be read through the result's Split"), found by the
    reference's self-fuzz (benchmarks/reference_self_fuzz.py, seed 17341, issue 32)."""
    ops = [T(4, 8, layout=shard(Split(0))), T(4, 8, layout=shard(Split(0)))]
    ops[side] = T(4, 8, layout=_pl(red))
    e = reject(B(kind), *ops)
    assert e.operand == ("lhs", "rhs")[side] and "Reshard" in str(e), str(e)
    # on a 2-D mesh, the Partial's axis split by the other operand (the fuzz's program)
    ops = [T(2, 1, 2, layout=shard(Split(2), Split(0), shape=(2, 1, 2), mesh=MESH2))] * 2
    ops[side] = T(2, 1, 2, layout=shard(Broadcast(), Partial(red), shape=(2, 1, 2), mesh=MESH2))
    assert "Split" in str(reject(B(kind), *ops))
    # replicated on that axis, the row's premise holds: accepted, the Partial carried
    ops = [T(4, 8, layout=shard(Broadcast())), T(4, 8)]
    ops[side] = T(4, 8, layout=_pl(red))
    assert infer(B(kind), *ops).layout.attrs == (Partial(red),)


@pytest.mark.parametrize("red", ["sum", "max", "min"])
def test_mul_both_partial_rejects(red):
    """HIR Binary: "Every other kind / operand-shape combination involving a Partial operand
    (including MUL with both operands Partial) rejects" """
    e = reject(B(MUL), T(4, 8, layout=_pl(red)), T(4, 8, layout=_pl(red)))
    assert "Reshard" in str(e)


@pytest.mark.parametrize("kind", [k for k in BinaryKind if k not in (ADD, MUL)])
@pytest.mark.parametrize("red", ["sum", "max", "min"])
def test_other_kinds_reject_partial(kind, red):
    """HIR Binary: "Every other kind / operand-shape combination involving a Partial operand ...
    rejects: not proven to commute with any reduction." """
    dt = BOOL if kind.is_boolean else F32
    e = reject(B(kind), T(4, 8, dt=dt, layout=_pl(red)), T(4, 8, dt=dt))
    assert e.operand == "lhs" and "Reshard" in str(e)


def test_partial_decided_per_mesh_axis():
    """HIR Binary: "Decisions are made independently for each mesh axis." — sum+sum on both
    axes passes and keeps both Partials; a Split on one axis leaves the other axis's decision
    alone."""
    lay = ShardLayout(MESH2, (Partial("sum"), Partial("sum")), Layout((4, 8)))
    r = infer(B(ADD), T(4, 8, layout=lay), T(4, 8, layout=lay))
    assert r.layout.attrs == (Partial("sum"), Partial("sum"))
    a = ShardLayout(MESH2, (Split(0), Partial("max")), Layout((4, 8)))
    b = ShardLayout(MESH2, (Split(0), Broadcast()), Layout((4, 8)))
    assert infer(B(ADD), T(4, 8, layout=a), T(4, 8, layout=b)).layout.attrs == \
        (Split(0), Partial("max"))


@pytest.mark.parametrize("red", ["sum", "max"])
def test_add_partials_on_different_axes_rejects(red):
    """HIR Binary: "Partial states on different axes are not interchangeable; ADD rejects two
    Partial inputs when their states occupy different mesh axes." """
    a = ShardLayout(MESH2, (Partial(red), Broadcast()), Layout((4, 8)))
    b = ShardLayout(MESH2, (Broadcast(), Partial(red)), Layout((4, 8)))
    e = reject(B(ADD), T(4, 8, layout=a), T(4, 8, layout=b))
    assert "Reshard" in str(e) and e.operand in ("lhs", "rhs")


# =============================================================================================
# Unary
# =============================================================================================
MONOTONE = [UnaryKind.EXP, UnaryKind.LOG, UnaryKind.RELU, UnaryKind.CEIL, UnaryKind.ROUND,
            UnaryKind.EXP2, UnaryKind.LOG2]
NO_COMMUTE = [UnaryKind.ABS, UnaryKind.SQUARE, UnaryKind.RSQRT, UnaryKind.LOGICAL_NOT]


def _udt(kind: UnaryKind) -> DType:
    return BOOL if kind is UnaryKind.LOGICAL_NOT else F32


@pytest.mark.parametrize("kind", MONOTONE)
def test_unary_monotone_commutes_with_max_min_not_sum(kind):
    """HIR Unary: "exp / log / relu / ceil / round / exp2 / log2 are monotone non-decreasing, so
    they commute with max / min but not sum." """
    for red in ("max", "min"):
        assert infer(U(kind), T(4, 8, layout=_pl(red))).layout.attrs == (Partial(red),)
    e = reject(U(kind), T(4, 8, layout=_pl("sum")))
    assert e.operand == "x" and "Reshard" in str(e)


def test_unary_neg_commutes_with_sum_only():
    """HIR Unary: "neg is linear, so it commutes with sum but not max / min (negation reverses
    order)." """
    assert infer(U(UnaryKind.NEG), T(4, 8, layout=_pl("sum"))).layout.attrs == (Partial("sum"),)
    for red in ("max", "min"):
        e = reject(U(UnaryKind.NEG), T(4, 8, layout=_pl(red)))
        assert e.operand == "x" and "Reshard" in str(e)


@pytest.mark.parametrize("kind", NO_COMMUTE)
@pytest.mark.parametrize("red", ["sum", "max", "min"])
def test_unary_non_commuting_rejects(kind, red):
    """HIR Unary: "abs / square / rsqrt / logical_not are not proven to commute with any reduction
    and reject a Partial operand unconditionally." """
    e = reject(U(kind), T(4, 8, dt=_udt(kind), layout=_pl(red)))
    assert e.operand == "x" and "Reshard" in str(e) and "Broadcast" in str(e)


def test_unary_preserves_shape_layout_storage():
    """HIR Unary: "Behavior follows torch pointwise semantics" — pointwise: shape, layout and
    storage are x's; a Split carries through."""
    lay = shard(Split(1))
    x = T(4, 8, dt=F16, layout=lay, storage=StorageKind.SMEM)
    assert infer(U(UnaryKind.EXP), x) == x
    assert infer(U(UnaryKind.NEG), T(N, 3, dt=I32)) == T(N, 3, dt=I32)


def test_unary_logical_not_needs_bool():
    """HIR Unary: "unary tag including neg, abs, logical_not, ..." — logical_not takes bool (no
    implicit x != 0) and gives bool."""
    assert infer(U(UnaryKind.LOGICAL_NOT), T(3, dt=BOOL)) == T(3, dt=BOOL)
    e = reject(U(UnaryKind.LOGICAL_NOT), T(3, dt=I32))
    assert e.operand == "x" and "cast to bool" in str(e)


@pytest.mark.parametrize("kind", [UnaryKind.EXP, UnaryKind.LOG, UnaryKind.EXP2, UnaryKind.LOG2,
                                  UnaryKind.RSQRT, UnaryKind.SQRT])
def test_unary_transcendentals_need_float(kind):
    """HIR Unary: "exp is the natural exponential e ** x; log is the natural logarithm; exp2 /
    log2 are the base-2 counterparts." — defined on float dtypes; integers need a cast."""
    assert infer(U(kind), T(3, dt=DType.BF16)).dtype is DType.BF16
    e = reject(U(kind), T(3, dt=I32))
    assert e.operand == "x" and "cast" in str(e)
    reject(U(kind), T(3, dt=BOOL))


@pytest.mark.parametrize("kind", [UnaryKind.NEG, UnaryKind.ABS, UnaryKind.CEIL, UnaryKind.ROUND,
                                  UnaryKind.RELU, UnaryKind.SQUARE])
def test_unary_numeric_kinds_int_ok_bool_rejected(kind):
    """HIR Unary: "ceil rounds toward positive infinity; round rounds to the nearest integer
    with ties to even" — numeric kinds accept float and integer dtypes, not bool."""
    assert infer(U(kind), T(3, dt=I32)).dtype is I32
    assert infer(U(kind), T(3, dt=F32)).dtype is F32
    e = reject(U(kind), T(3, dt=BOOL))
    assert e.operand == "x" and "insert an explicit cast" in str(e)


@pytest.mark.parametrize("kind", list(UnaryKind))
def test_unary_f4e2m1_rejected(kind):
    """HIR Cast: "evaluating a Cast to a dtype outside this set (e.g. f4e2m1) raises an
    unsupported-dtype error" — f4e2m1 is type-level only, so Unary arithmetic on it is rejected
    at typeinfer with the fix to cast to f32."""
    e = reject(U(kind), T(3, dt=DType.F4E2M1))
    assert e.operand == "x" and "cast to f32" in str(e)


# =============================================================================================
# hypothesis: well-typed applications match torch; corrupted ones raise TypeInferError
# =============================================================================================
TORCH_BINARY = {
    ADD: torch.add, SUB: torch.sub, MUL: torch.mul, DIV: torch.div,
    BinaryKind.MIN: torch.minimum, BinaryKind.MAX: torch.maximum,
    BinaryKind.EQ: torch.eq, BinaryKind.NE: torch.ne, BinaryKind.LT: torch.lt,
    BinaryKind.LE: torch.le, BinaryKind.GT: torch.gt, BinaryKind.GE: torch.ge,
    BinaryKind.AND: torch.logical_and, BinaryKind.OR: torch.logical_or,
    BinaryKind.XOR: torch.logical_xor,
}
TORCH_UNARY = {
    UnaryKind.NEG: torch.neg, UnaryKind.ABS: torch.abs, UnaryKind.LOGICAL_NOT: torch.logical_not,
    UnaryKind.RSQRT: torch.rsqrt, UnaryKind.EXP: torch.exp, UnaryKind.LOG: torch.log,
    UnaryKind.CEIL: torch.ceil, UnaryKind.ROUND: torch.round, UnaryKind.EXP2: torch.exp2,
    UnaryKind.LOG2: torch.log2, UnaryKind.RELU: torch.relu, UnaryKind.SQUARE: torch.square,
    UnaryKind.SQRT: torch.sqrt,
}


def _rand(shape: tuple, dt: DType) -> torch.Tensor:
    if dt is BOOL:
        return torch.rand(shape) > 0.5
    if dt.is_int:
        return torch.randint(1, 5, shape, dtype=TORCH_DT[dt])
    return (torch.rand(shape) + 0.5).to(TORCH_DT[dt])


@st.composite
def broadcast_pair(draw):
    base = draw(st.lists(st.integers(0, 4), min_size=0, max_size=4))

    def derive():
        drop = draw(st.integers(0, len(base)))
        return tuple(1 if draw(st.booleans()) and draw(st.booleans()) else d
                     for d in base[drop:])

    return derive(), derive()


def _binary_dtype(kind: BinaryKind, draw) -> DType:
    if kind.is_boolean:
        return BOOL
    if kind is DIV:
        return draw(st.sampled_from([F32, F16, DType.BF16]))
    if kind in ARITH:
        return draw(st.sampled_from([F32, F16, I32, DType.I64, DType.I8]))
    return draw(st.sampled_from([F32, I32, BOOL]))


@given(data=st.data(), kind=st.sampled_from(list(BinaryKind)), shapes=broadcast_pair())
def test_hyp_binary_matches_torch(data, kind, shapes):
    """HIR Binary: "Values follow torch pointwise semantics; dtypes do not promote." — every
    kind on random broadcastable shapes types, with torch's result shape and dtype."""
    dt = _binary_dtype(kind, data.draw)
    sa, sb = shapes
    t = infer(B(kind), T(*sa, dt=dt), T(*sb, dt=dt))
    ref = TORCH_BINARY[kind](_rand(sa, dt), _rand(sb, dt))
    assert t.shape == tuple(ref.shape)
    assert TORCH_DT[t.dtype] == ref.dtype


@given(kind=st.sampled_from(list(UnaryKind)),
       shape=st.lists(st.integers(0, 5), max_size=4).map(tuple), data=st.data())
def test_hyp_unary_matches_torch(kind, shape, data):
    """HIR Unary: "Behavior follows torch pointwise semantics with TileFoundry type promotion."
    — random well-typed Unary applications have torch's result shape and dtype."""
    if kind is UnaryKind.LOGICAL_NOT:
        dt = BOOL
    elif kind in (UnaryKind.EXP, UnaryKind.LOG, UnaryKind.EXP2, UnaryKind.LOG2, UnaryKind.RSQRT,
                  UnaryKind.SQRT):
        dt = data.draw(st.sampled_from([F32, F16, DType.BF16]))
    else:
        dt = data.draw(st.sampled_from([F32, I32, DType.I64]))
    t = infer(U(kind), T(*shape, dt=dt))
    ref = TORCH_UNARY[kind](_rand(shape, dt))
    assert t.shape == tuple(ref.shape) and TORCH_DT[t.dtype] == ref.dtype


CORRUPTIONS = ["dtype_mismatch", "no_broadcast", "bool_arith", "logical_on_float", "int_div",
               "f4e2m1", "partial_non_commuting", "unary_bool", "unary_partial", "sharding"]


@given(data=st.data(), how=st.sampled_from(CORRUPTIONS))
def test_hyp_corrupted_math_raises_typeinfer_error(data, how):
    """HIR Binary: "typeinfer MUST reject a mismatch" / "typeinfer rejects otherwise, naming the
    offending operand and the fix" — randomly corrupted applications raise TypeInferError and
    never another exception type."""
    draw = data.draw
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    kind = draw(st.sampled_from(list(BinaryKind)))
    if how == "dtype_mismatch":
        a, b = draw(st.permutations([F32, F16, I32, BOOL, DType.BF16]))[:2]
        op, ts = B(kind), [T(*shape, dt=a), T(*shape, dt=b)]
    elif how == "no_broadcast":
        ax = draw(st.integers(0, len(shape) - 1))
        d = draw(st.integers(2, 5))
        e = draw(st.integers(2, 5).filter(lambda v: v != d))
        sa = (*shape[:ax], d, *shape[ax + 1:])
        sb = (*shape[:ax], e, *shape[ax + 1:])
        op, ts = B(ADD), [T(*sa), T(*sb)]
    elif how == "bool_arith":
        op, ts = B(draw(st.sampled_from(ARITH))), [T(*shape, dt=BOOL)] * 2
    elif how == "logical_on_float":
        op, ts = B(draw(st.sampled_from(LOGICAL))), [T(*shape, dt=F32)] * 2
    elif how == "int_div":
        op, ts = B(DIV), [T(*shape, dt=I32)] * 2
    elif how == "f4e2m1":
        op, ts = B(kind), [T(*shape, dt=DType.F4E2M1)] * 2
    elif how == "partial_non_commuting":
        k = draw(st.sampled_from([k for k in BinaryKind if k not in (ADD, MUL)] + [ADD, MUL]))
        red = draw(st.sampled_from(["sum", "max", "min"]))
        if k is ADD:
            red = "sum"
        elif k is MUL:
            red = draw(st.sampled_from(["max", "min"]))
        dt = BOOL if k.is_boolean else F32
        lay = ShardLayout(MESH, (Partial(red),), Layout(shape))
        op, ts = B(k), [T(*shape, dt=dt, layout=lay), T(*shape, dt=dt)][::draw(
            st.sampled_from([1, -1]))]
    elif how == "unary_bool":
        uk = draw(st.sampled_from([k for k in UnaryKind if k is not UnaryKind.LOGICAL_NOT]))
        op, ts = U(uk), [T(*shape, dt=BOOL)]
    elif how == "unary_partial":
        uk = draw(st.sampled_from(list(UnaryKind)))
        props = UNARY_PROPERTIES[uk]
        bad = [r for r in ("sum", "max", "min")
               if not (("monotone" in props and r != "sum") or ("linear" in props and r == "sum"))]
        red = draw(st.sampled_from(bad))
        lay = ShardLayout(MESH, (Partial(red),), Layout(shape))
        op, ts = U(uk), [T(*shape, dt=_udt(uk), layout=lay)]
    else:  # sharding: the operands split the mesh axis by different layout positions
        lay0 = ShardLayout(MESH, (Split(0),), Layout((2, *shape)))
        lay1 = ShardLayout(MESH, (Split(1),), Layout(((1, 2), *shape)))
        op, ts = B(kind), [T(2, *shape, dt=BOOL if kind.is_boolean else F32, layout=lay0),
                           T(2, *shape, dt=BOOL if kind.is_boolean else F32, layout=lay1)]
    with pytest.raises(TypeInferError):
        infer(op, *ts)


def test_split_operand_combines_with_broadcast_and_plain_operands():
    """Decision (docs/decisions.md): a plain operand and a Broadcast mesh axis are replicated,
    so an elementwise op reads its local part; the result keeps the Split."""
    split = ShardLayout(MESH, (Split(0),), Layout((4, 8)))
    bcast = ShardLayout(MESH, (Broadcast(),), Layout((4, 8)))
    for other in (T(4, 8, layout=bcast), T(4, 8)):
        r = infer(B(ADD), T(4, 8, layout=split), other)
        assert r.layout.attrs == (Split(0),)
