"""HIR types (ARCHITECTURE.md "Types"): ShapeDim arithmetic with Python floor semantics,
simplification, static upper bounds (HIR TopK entry), evaluation; frozen structural dataclasses;
Layout / ShardLayout validation; local shapes and the two stride forms on hand-computed
examples."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.types import (
    Broadcast,
    DimAdd,
    DimFloorDiv,
    DimMax,
    DimMin,
    DimMod,
    DimMul,
    DimSub,
    DimVar,
    IRError,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    StorageKind,
    TensorType,
    Topology,
    TopologyLevel,
    TupleType,
    c_order,
    dim_bounds,
    dim_max,
    dim_min,
    dim_str,
    evaluate_dim,
    free_dimvars,
    simplify,
    upper_bound,
)

N = DimVar("N", 0, 5)
M = DimVar("M", 1, 9)
CTX = DimVar("CTX_LEN", 1, 8192)


# =============================================================================================
# ShapeDim arithmetic
# =============================================================================================
def test_operator_sugar_builds_dim_expressions():
    """'ShapeDim: int | DimVar(name, lo, hi) | dim expression (DimAdd, DimSub, DimMul,
    DimFloorDiv, DimMod, DimMin, DimMax).'"""
    assert N + 1 == DimAdd(N, 1) and 1 + N == DimAdd(1, N)
    assert N - 1 == DimSub(N, 1) and 3 - N == DimSub(3, N)
    assert N * 2 == DimMul(N, 2) and 2 * N == DimMul(2, N)
    assert N // 4 == DimFloorDiv(N, 4) and 10 // N == DimFloorDiv(10, N)
    assert N % 3 == DimMod(N, 3) and 10 % N == DimMod(10, N)
    assert dim_min(512, CTX // 4) == DimMin(512, DimFloorDiv(CTX, 4))
    assert dim_max(N, M) == DimMax(N, M)
    assert dim_str(dim_min(512, CTX // 4)) == "dim_min(512, (CTX_LEN // 4))"
    assert free_dimvars(dim_min(N, M * 2)) == {N, M}


@pytest.mark.parametrize("bad", [1.5, True, "N", None])
def test_operator_sugar_rejects_non_shapedims(bad):
    """'ShapeDim: int | DimVar | dim expression' — anything else raises IRError."""
    with pytest.raises(IRError):
        N + bad
    with pytest.raises(IRError):
        DimAdd(N, bad)


def test_floor_semantics_with_negative_operands():
    """'Python floor semantics for div/mod.'"""
    assert simplify(DimFloorDiv(-7, 2)) == -4
    assert simplify(DimMod(-7, 2)) == 1
    assert simplify(DimFloorDiv(7, -2)) == -4
    assert simplify(DimMod(7, -2)) == -1
    assert simplify(DimFloorDiv(-7, -2)) == 3
    assert evaluate_dim(N // 4, {"N": -7}) == -2
    assert evaluate_dim(N % 4, {"N": -7}) == 1


def test_division_by_zero_raises_irerror():
    """A dim expression dividing by zero is malformed, not a ZeroDivisionError."""
    with pytest.raises(IRError, match="divides by zero"):
        simplify(DimFloorDiv(3, 0))
    with pytest.raises(IRError, match="modulo zero"):
        evaluate_dim(N % 0, {"N": 3})


def test_simplify_identities_and_constant_folding():
    """simplify constant-folds and drops identities (x+0, x*1, x//1, x*0, x-x, min(x, x))."""
    assert simplify(N + 0) == N and simplify(0 + N) == N
    assert simplify(N * 1) == N and simplify(1 * N) == N
    assert simplify(N * 0) == 0 and simplify(0 * N) == 0
    assert simplify(N // 1) == N and simplify(N - 0) == N
    assert simplify(N - N) == 0
    assert simplify(dim_min(N, N)) == N and simplify(dim_max(M, M)) == M
    assert simplify(DimAdd(DimMul(2, 3), N)) == DimAdd(6, N)
    assert simplify(dim_min(512, DimFloorDiv(4096, 4))) == 512
    assert simplify(7) == 7 and simplify(N) is N


def test_evaluate_dim_unbound_dimvar_raises():
    """'An unbound DimVar MUST raise.' (HIR §1.2) — evaluate_dim names it, as IRError."""
    with pytest.raises(IRError, match="DimVar M is unbound"):
        evaluate_dim(N + M, {"N": 1})
    assert evaluate_dim(dim_min(512, CTX // 4), {"CTX_LEN": 100}) == 25


def test_upper_bound_composes_through_the_listed_constructors():
    """TopK: 'a symbolic value whose statically-derivable upper bound — DimVar.hi - 1, composed
    through DimMin/DimMax/DimAdd/DimMul/DimFloorDiv/DimMod — is known'."""
    assert upper_bound(7) == 7
    assert upper_bound(CTX) == 8191
    assert upper_bound(dim_min(512, CTX // 4)) == 512
    assert upper_bound(CTX // 4) == 2047
    assert upper_bound(CTX % 8) == 7
    assert upper_bound(N % 8) == 4  # N itself is at most 4
    assert upper_bound(dim_max(N, M)) == 8
    assert upper_bound(N + M) == 12
    assert upper_bound(N * M) == 32
    assert upper_bound(dim_min(N, M - 1)) == 4  # one known side bounds a min


def test_upper_bound_does_not_compose_through_sub_or_symbolic_divisors():
    """TopK: 'an upper bound that does not statically compose (e.g. through DimSub, or a
    DimFloorDiv/ DimMod with a symbolic divisor), is not checked at typeinfer — it fails
    open'."""
    assert upper_bound(CTX - 4) is None
    assert upper_bound(CTX // M) is None
    assert upper_bound(CTX % M) is None
    assert upper_bound(dim_max(N, M - 1)) is None
    assert upper_bound(N + (M - 1)) is None
    assert upper_bound((CTX - 4) // 4) is None


def test_upper_bound_is_sound_with_negative_constants():
    """A static upper bound must bound every value: (N + -10) % 4 reaches 3, N * -1 reaches 0
    (regression: the bound used to be -6 and -4)."""
    assert upper_bound(DimMod(DimAdd(N, -10), 4)) == 3
    assert upper_bound(DimMul(N, -1)) == 0
    assert dim_bounds(DimMul(N, -1)) == (-4, 0)


# --- hypothesis: random dim expressions -----------------------------------------------------
VARS = (DimVar("A", 0, 6), DimVar("B", 1, 9), DimVar("C", 3, 4))


def _exprs():
    leaves = st.one_of(st.integers(-6, 12), st.sampled_from(VARS))
    ctors = (DimAdd, DimSub, DimMul, DimFloorDiv, DimMod, DimMin, DimMax)

    def extend(children):
        return st.builds(lambda c, a, b: c(a, b), st.sampled_from(ctors), children, children)

    return st.recursive(leaves, extend, max_leaves=8)


def _envs():
    return st.fixed_dictionaries({v.name: st.integers(v.lo, v.hi - 1) for v in VARS})


def _value(d, env):
    try:
        return evaluate_dim(d, env)
    except IRError:
        return "error"


@given(_exprs(), _envs())
def test_simplify_preserves_value(d, env):
    """simplify is an equivalence: the simplified expression has the same value (or the same
    division-by-zero error) in every environment."""
    before = _value(d, env)
    try:
        s = simplify(d)
    except IRError:
        assert before == "error"
        return
    after = _value(s, env)
    assert after == before or before == "error"  # x*0 -> 0 may drop a dividing-by-zero x


@given(_exprs(), _envs())
def test_static_bounds_are_sound(d, env):
    """Every static bound holds at every in-envelope environment."""
    v = _value(d, env)
    if v == "error":
        return
    lo, hi = dim_bounds(d)
    if hi is not None:
        assert v <= hi
    if lo is not None:
        assert v >= lo
    assert upper_bound(d) == hi


# =============================================================================================
# frozen dataclasses, equality, hashing
# =============================================================================================
def _samples():
    mesh = Mesh("device", ("x",), (2,))
    lay = Layout((4, 2), (2, 1))
    return [N, N + 1, lay, mesh, Split(0), Partial("sum"), Broadcast(),
            ShardLayout(mesh, (Split(0),), lay), TensorType((N, 2), DType.F32),
            TupleType((TensorType((2,), DType.F32),)), TopologyLevel("device", 2),
            Topology((TopologyLevel("device", 2),))]


@pytest.mark.parametrize("obj", [o for o in _samples() if dataclasses.fields(o)],
                         ids=lambda o: type(o).__name__)
def test_types_are_frozen(obj):
    """Types are immutable after construction (frozen dataclasses)."""
    f = dataclasses.fields(obj)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, f[0].name, getattr(obj, f[0].name))
    with pytest.raises(dataclasses.FrozenInstanceError):
        obj.extra = 1  # frozen dataclasses also refuse new attributes


def test_broadcast_is_a_frozen_singleton_value():
    """Broadcast carries no field; its instances are equal and frozen."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        Broadcast().x = 1
    assert Broadcast() == Broadcast() and hash(Broadcast()) == hash(Broadcast())


@pytest.mark.parametrize("obj", _samples(), ids=lambda o: type(o).__name__)
def test_structural_equality_and_hashing(obj):
    """Equality and hashing are structural: a copy equals and hashes like the original."""
    copy = dataclasses.replace(obj) if dataclasses.fields(obj) else type(obj)()
    assert copy == obj and hash(copy) == hash(obj) and copy is not obj
    assert len({obj, copy}) == 1


def test_structural_inequality():
    """Different fields or different constructors are different values."""
    assert DimVar("N", 0, 5) != DimVar("N", 0, 6)
    assert DimAdd(N, 1) != DimMul(N, 1)
    assert DimAdd(N, 1) != DimAdd(1, N)
    assert TensorType((2,), DType.F32) != TensorType((2,), DType.F32, storage=StorageKind.SMEM)
    assert Layout((2,)) != Layout((2,), (1,))
    assert Partial("sum") != Partial("max")


# =============================================================================================
# validation
# =============================================================================================
@pytest.mark.parametrize("make,match", [
    (lambda: DimVar("N", -1, 4), "0 <= lo < hi"),
    (lambda: DimVar("N", 4, 4), "0 <= lo < hi"),
    (lambda: DimVar("2N", 0, 4), "identifier"),
    (lambda: DimVar("N", 0, 4.0), "must be an int"),
    (lambda: DimVar("N", True, 4), "must be an int"),
])
def test_dimvar_validation(make, match):
    """'[lo, hi) is half-open' with 0 <= lo < hi; malformed fields raise IRError."""
    with pytest.raises(IRError, match=match):
        make()


@pytest.mark.parametrize("make,match", [
    (lambda: Layout((4, -1)), "non-negative"),
    (lambda: Layout((4, ())), "at least one extent"),
    (lambda: Layout((4, 2), (1,)), "mirror"),
    (lambda: Layout((4, (2, 2)), (4, 2, 1)), "mirror"),
    (lambda: Layout([4]), "tuple"),
])
def test_layout_validation(make, match):
    """Layout strides mirror the (possibly nested) shape."""
    with pytest.raises(IRError, match=match):
        make()


MESH2 = Mesh("device", ("x", "y"), (2, 4))


@pytest.mark.parametrize("make,match", [
    # divisibility: position 0 of extent 6 split by x (2) is fine, by y (4) is not
    (lambda: ShardLayout(MESH2, (Broadcast(), Split(0)), Layout((6, 4))), "not divisible"),
    (lambda: ShardLayout(MESH2, (Split(0), Split(0)), Layout((8, 4))),
     "two mesh axes split layout position 0"),
    (lambda: ShardLayout(MESH2, (Split(0),), Layout((8, 4))), "exactly one ShardAttr per mesh"),
    (lambda: ShardLayout(MESH2, (Split(0), Broadcast(), Broadcast()), Layout((8, 4))),
     "exactly one ShardAttr per mesh"),
    (lambda: ShardLayout(MESH2, (Split(2), Broadcast()), Layout((8, 4))),
     "does not exist"),
    (lambda: ShardLayout(MESH2, (Split(0), "bcast"), Layout((8, 4))), "must be Split"),
    (lambda: ShardLayout(MESH2, [Split(0), Broadcast()], Layout((8, 4))), "exactly one"),
    (lambda: Split(-1), "non-negative"),
    (lambda: Partial("prod"), "must be one of"),
    (lambda: Mesh("device", ("x", "x"), (2, 2)), "distinct"),
    (lambda: Mesh("device", ("x",), (2, 2)), "one positive extent"),
    (lambda: Mesh("device", ("x",), (0,)), "one positive extent"),
    (lambda: Topology((TopologyLevel("d", 2), TopologyLevel("d", 4))), "distinct"),
    (lambda: TopologyLevel("d", True), "positive int"),
])
def test_shard_validation(make, match):
    """ShardLayout: 'exactly one ShardAttr per mesh axis'; Split 'by one layout position whose
    extent is divisible by the mesh-axis extent m'; 'Two mesh axes never split the same
    position.'"""
    with pytest.raises(IRError, match=match):
        make()


@pytest.mark.parametrize("make,match", [
    (lambda: TensorType((2, 3), DType.F32, Layout((6,))), "1 axes but the shape"),
    (lambda: TensorType((2, 3), DType.F32, Layout((2, 4))), "axis 1 has extent 3"),
    (lambda: TensorType((-1,), DType.F32), "non-negative"),
    (lambda: TensorType((2,), "f32"), "DType"),
    (lambda: TensorType((2,), DType.F32, storage="gmem"), "StorageKind"),
    (lambda: TupleType((1,)), "tuple of types"),
])
def test_tensor_type_validation(make, match):
    """TensorType(shape, dtype, layout, storage): the layout has one entry per axis, whose
    positions multiply to the axis extent."""
    with pytest.raises(IRError, match=match):
        make()


def test_symbolic_axis_with_a_layout_is_allowed():
    """A DimVar axis is not checked against its layout's static extent."""
    assert TensorType((N, 3), DType.F32, Layout((4, 3))).rank == 2


# =============================================================================================
# local shapes and strides, by hand
# =============================================================================================
def test_block_split_on_the_outer_position():
    """'device d owns the contiguous block [d·E/m, (d+1)·E/m) of that position'; 'Local shape:
    per layout position, E/m for a split position, E otherwise.' Shared-engine form: 'C-order
    over the global layout positions'. Per-instance form: 'stride 0 on every split position;
    the other positions C-order over the local extents, with size-1 positions given stride 0.'

    Layout (8, 4), mesh x=2, y=2, Split(0) on x: local (4, 4); shared strides (4, 1);
    per-instance (0, 1)."""
    sl = ShardLayout(Mesh("device", ("x", "y"), (2, 2)), (Split(0), Broadcast()),
                     Layout((8, 4)))
    assert sl.split_positions == {0: 2}
    assert sl.local_positions() == (4, 4)
    assert sl.local_axis_extents() == (4, 4)
    assert sl.shared_engine_strides() == (4, 1)
    assert sl.per_instance_strides() == (0, 1)
    assert sl.with_strides((4, 1)).layout == Layout((8, 4), (4, 1))


def test_cyclic_split_on_an_inner_position():
    """'a split on an inner position of extent m (local extent 1) is cyclic'.

    Layout (8, (2, 2)) — positions (8, 2, 2) — Split(1) on x=2: local positions (8, 1, 2),
    local axes (8, 2); shared strides C-order over (8, 2, 2) = (4, 2, 1); per-instance: split
    position 0, the rest C-order over (8, 1, 2) = (2, 0, 1)."""
    sl = ShardLayout(Mesh("device", ("x", "y"), (2, 2)), (Split(1), Partial("max")),
                     Layout((8, (2, 2))))
    assert sl.layout.positions == (8, 2, 2)
    assert sl.layout.axis_of_position == (0, 1, 1)
    assert sl.local_positions() == (8, 1, 2)
    assert sl.local_axis_extents() == (8, 2)
    assert sl.shared_engine_strides() == (4, 2, 1)
    assert sl.per_instance_strides() == (2, 0, 1)
    assert sl.partials == {1: "max"}
    assert sl.with_strides((4, 2, 1)).layout.strides == (4, (2, 1))


def test_two_splits_on_two_axes():
    """Layout ((2, 4), (2, 4)) — positions (2, 4, 2, 4) — Split(0) on x=2 and Split(2) on y=2:
    local positions (1, 4, 1, 4), local axes (4, 4); shared strides (32, 8, 4, 1);
    per-instance (0, 4, 0, 1)."""
    sl = ShardLayout(Mesh("device", ("x", "y"), (2, 2)), (Split(0), Split(2)),
                     Layout(((2, 4), (2, 4))))
    assert sl.local_positions() == (1, 4, 1, 4)
    assert sl.local_axis_extents() == (4, 4)
    assert sl.shared_engine_strides() == (32, 8, 4, 1)
    assert sl.per_instance_strides() == (0, 4, 0, 1)
    assert not sl.is_fully_broadcast


def test_c_order_and_natural_layout():
    """Row-major strides, optionally zero for size-1 extents; Layout.natural is C-order."""
    assert c_order((2, 3, 4)) == (12, 4, 1)
    assert c_order((2, 1, 4), zero_size_one=True) == (4, 0, 1)
    assert c_order(()) == ()
    assert Layout.natural((2, 3)) == Layout((2, 3), (3, 1))
    assert Layout((4, (2, 3))).axis_extents == (4, 6)
    assert Layout((4, (2, 3))).with_flat_strides((6, 3, 1)).strides == (6, (3, 1))
