"""Type rules of ir/hir/sharding: Reshard (the (layout, storage) stride-resolution table) and
Local, plus the architecture invariant that every inferred ShardLayout has concrete strides.

Expected strides are computed here from the ARCHITECTURE.md definitions ("Shared-engine form:
C-order over the global layout positions. Per-instance form: stride 0 on every split position;
the other positions C-order over the local extents, with size-1 positions given stride 0"),
independently of ``ShardLayout.shared_engine_strides`` / ``per_instance_strides``.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tilefoundry.semantics.typeinfer.sharding
import tilefoundry.semantics.typeinfer.tensor  # noqa: F401  (registers the rules)
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Expr, Var
from tilefoundry.semantics.ops import (
    Gather,
    Local,
    Reduce,
    ReduceKind,
    Reshape,
    Reshard,
    Slice,
    TopK,
    Transpose,
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

F32 = DType.F32
RMEM, SMEM, GMEM, UNMAT = (StorageKind.RMEM, StorageKind.SMEM, StorageKind.GMEM,
                           StorageKind.UNMATERIALIZED)
M2 = Mesh("device", ("x",), (2,))
M22 = Mesh("cta", ("x", "y"), (2, 2))


def sl(mesh, attrs, shape, strides=None):
    return ShardLayout(mesh, tuple(attrs), Layout(tuple(shape), strides))


def T(shape, layout=None, storage=GMEM, dtype=F32):
    return TensorType(tuple(shape), dtype, layout, storage)


def infer(op, *args):
    return infer_expr(Call(op, tuple(a if isinstance(a, Expr) else Var("x", a) for a in args)))


def rejects(op, *args, match=None) -> str:
    with pytest.raises(TypeInferError, match=match) as e:
        infer(op, *args)
    msg = str(e.value)
    assert f"{type(op).__name__}:" in msg and "[rule:" in msg and "fix:" in msg, msg
    return msg


# ---- independent stride forms ---------------------------------------------------------------
def c_order(exts, zero_ones=False):
    out = []
    for i in range(len(exts)):
        s = math.prod(exts[i + 1:])
        out.append(0 if zero_ones and exts[i] == 1 else s)
    return tuple(out)


def shared(shard: ShardLayout):
    return c_order(shard.layout.positions)


def per_instance(shard: ShardLayout):
    m = {a.position: shard.mesh.axis_extents[ax] for ax, a in enumerate(shard.attrs)
         if isinstance(a, Split)}
    loc = [1 if p in m else e for p, e in enumerate(shard.layout.positions)]
    st_ = c_order(loc, zero_ones=True)
    return tuple(0 if p in m else s for p, s in enumerate(st_))


# =============================================================================================
# Reshard
# =============================================================================================
def test_reshard_noop():
    """'layout=None, storage unchanged → x.type (no-op).' / 'Omitting layout preserves
    x.layout; omitting storage preserves x.storage.'"""
    s = sl(M2, (Split(0),), (4, 6), (0, 1))
    x = T((4, 6), s, SMEM)
    assert infer(Reshard(), x) == x
    assert infer(Reshard(storage=SMEM), x) == x
    assert infer(Reshard(), T((4, 6))) == T((4, 6))


def test_reshard_storage_change_needs_layout():
    """'layout=None, storage changed → error; a storage change MUST carry an explicit
    layout=.'"""
    rejects(Reshard(storage=SMEM), T((4, 6)), match="MUST carry")


def test_reshard_layout_must_be_shard_layout():
    """'Supplied layout is a ShardLayout.'"""
    rejects(Reshard(Layout((4, 6))), T((4, 6)), match="ShardLayout")


@pytest.mark.parametrize("op,x", [
    (Reshard(sl(M2, (Broadcast(),), (4, 6)), UNMAT), T((4, 6))),
    (Reshard(sl(M2, (Broadcast(),), (4, 6))), T((4, 6), None, UNMAT)),
])
def test_reshard_destination_storage_concrete(op, x):
    """'Destination storage is concrete, not unmaterialized.'"""
    rejects(op, x, match="unmaterialized")


def test_reshard_from_unmaterialized_to_concrete():
    """'Destination storage is concrete' — an unmaterialized source may be given a concrete
    destination."""
    t = infer(Reshard(sl(M2, (Split(0),), (4, 6)), GMEM), T((4, 6), None, UNMAT))
    assert t.storage is GMEM and t.shard.layout.strides is not None


@pytest.mark.parametrize("target", [sl(M2, (Split(0),), (4, 5)), sl(M2, (Split(0),), (4,)),
                                    sl(M2, (Split(0),), (4, 6, 1))])
def test_reshard_preserves_logical_shape(target):
    """'The output preserves the input logical TensorType.shape.'"""
    rejects(Reshard(target), T((4, 6)), match="logical shape")


def test_reshard_output_keeps_shape_dtype():
    """'the output preserves x.type.shape (logical)'."""
    n = DimVar("N", 1, 64)
    t = infer(Reshard(sl(M2, (Broadcast(),), (8, 6))), T((n, 6), dtype=DType.BF16))
    assert t.shape == (n, 6) and t.dtype is DType.BF16


def test_sugar_same_level_split_axes_zero_source_is_per_instance():
    """'layout=Layout(strides=None) (sugar), storage unchanged → dest strides match the form
    already on x.layout: a Split-axes-zero source ⇒ per-instance form'."""
    x = T((8, 6), sl(M2, (Split(1),), ((4, 2), 6), ((6, 0), 1)), SMEM)
    target = sl(M22, (Split(1), Broadcast()), ((4, 2), 6))  # split position: local extent 1
    t = infer(Reshard(target, SMEM), x)
    assert t.shard.layout.flat_strides == per_instance(target) == (6, 0, 1)
    assert t.storage is SMEM


def test_sugar_same_level_otherwise_shared_engine():
    """'otherwise ⇒ shared-engine C-order over the canonical global shape. When x.layout is None
    (plain kernel-param), fall back to shared-engine C-order.'"""
    target = sl(M2, (Split(0),), (8, 6))
    for lay in (None, Layout((8, 6), (1, 8)), sl(M2, (Split(0),), (8, 6)),
                sl(M2, (Split(0),), (8, 6), (6, 1)), sl(M2, (Broadcast(),), (8, 6), (0, 0))):
        t = infer(Reshard(target), T((8, 6), lay, SMEM))
        assert t.shard.layout.flat_strides == shared(target) == (6, 1), lay


def test_sugar_low_to_high_is_shared_engine():
    """'layout=Layout(strides=None) (sugar), low → high level → dest strides = C-order over
    layout.shape (shared-engine form).'"""
    target = sl(M22, (Split(0), Split(3)), ((2, 4), 3, 2))
    x = T((8, 3, 2), sl(M22, (Split(0), Broadcast()), (8, 3, 2), (0, 2, 1)), RMEM)
    t = infer(Reshard(target, GMEM), x)
    assert t.shard.layout.flat_strides == shared(target) == (24, 6, 2, 1)
    assert infer(Reshard(target, SMEM), x).shard.layout.flat_strides == (24, 6, 2, 1)


def test_sugar_high_to_low_is_per_instance():
    """'layout=Layout(strides=None) (sugar), high → low level → dest strides[k]=0 for every
    Split axis k; non-Split axes follow C-order over shard_layout_local_shape(layout) with
    size-1 → 0 (per-instance form).'"""
    target = sl(M22, (Split(0), Broadcast()), ((2, 4), 3, 1))
    t = infer(Reshard(target, RMEM), T((8, 3, 1)))
    assert t.shard.layout.strides == ((0, 3), 1, 0)
    assert t.shard.layout.flat_strides == per_instance(target)


def test_verbose_strides_kept_verbatim():
    """'layout=Layout(strides=tuple) (verbose) → dest strides are taken verbatim; typeinfer
    MUST NOT rewrite them (e.g. SM80 MMA fragment layouts).'"""
    target = sl(M22, (Split(0), Split(1)), ((2, 4), (2, 4)), ((0, 2), (0, 1)))
    for src, dst in ((GMEM, RMEM), (RMEM, GMEM), (SMEM, SMEM)):
        t = infer(Reshard(target, dst), T((8, 8), None, src))
        assert t.shard == target and t.storage is dst


def test_reshard_completes_a_partial():
    """'Only an explicit Reshard or allreduce may complete that state.'"""
    x = T((4, 6), sl(M22, (Partial("sum"), Split(0)), (4, 6), (6, 1)))
    t = infer(Reshard(sl(M22, (Broadcast(), Split(0)), (4, 6))), x)
    assert t.shard.attrs == (Broadcast(), Split(0)) and not t.shard.partials


def test_reshard_changes_mesh():
    """'Reshard is the explicit op that changes a value's layout / mesh.'"""
    x = T((4, 6), sl(M2, (Split(0),), (4, 6), (6, 1)))
    t = infer(Reshard(sl(M22, (Split(1), Split(0)), (4, 6))), x)
    assert t.shard.mesh == M22


LEVELS = [RMEM, SMEM, GMEM]


@st.composite
def targets(draw):
    rank = draw(st.integers(1, 3))
    entries = []
    for _ in range(rank):
        ps = tuple(draw(st.sampled_from([1, 2, 4, 3])) for _ in range(draw(st.integers(1, 2))))
        entries.append(ps[0] if len(ps) == 1 else ps)
    lay = Layout(tuple(entries))
    attrs, used = [], set()
    for m in M22.axis_extents:
        opts = [p for p, e in enumerate(lay.positions) if e % m == 0 and p not in used]
        if opts and draw(st.booleans()):
            p = draw(st.sampled_from(opts))
            used.add(p)
            attrs.append(Split(p))
        else:
            attrs.append(draw(st.sampled_from([Broadcast(), Partial("sum")])))
    return ShardLayout(M22, tuple(attrs), lay)


@given(targets(), st.sampled_from(LEVELS), st.sampled_from(LEVELS), st.booleans())
def test_stride_resolution_table(target, src, dst, zero_src):
    """The Reshard stride-resolution table, row by row: 'same level → the form already on x';
    'low → high level → C-order over layout.shape'; 'high → low level → per-instance'. Every
    result has concrete strides ('after HIR typeinfer runs, every ShardLayout reachable from a
    value's type has concrete layout.strides')."""
    ext = target.layout.axis_extents
    src_lay = None
    if zero_src:  # a Split-axes-zero source over a natural layout (axis 0 split when possible)
        a0 = [Split(0) if ext[0] % 2 == 0 else Broadcast(), Broadcast()]
        s = ShardLayout(M22, tuple(a0), Layout(ext))
        src_lay = s.with_strides(per_instance(s))
    if dst.level == src.level:
        zero = zero_src and isinstance(src_lay.attrs[0], Split)
        want = per_instance(target) if zero else shared(target)
    elif dst.level > src.level:
        want = shared(target)
    else:
        want = per_instance(target)
    loc = target.local_positions()
    if want == per_instance(target) != shared(target) and any(
            loc[p] > 1 for p in target.split_positions):
        # D65: per-instance strides alias a split position of local extent > 1 -> rejected
        rejects(Reshard(target, dst), T(ext, src_lay, src), match="local extent 1")
        return
    t = infer(Reshard(target, dst), T(ext, src_lay, src))
    got = t.shard.layout.flat_strides
    assert got == want and t.storage is dst and t.shape == ext


# =============================================================================================
# Local
# =============================================================================================
def test_local_requires_shard_layout():
    """'Local(x): x.type.layout MUST be ShardLayout.'"""
    rejects(Local(), T((4, 6)), match="MUST be a ShardLayout")
    rejects(Local(), T((4, 6), Layout((4, 6), (6, 1))), match="MUST be a ShardLayout")


def test_local_contracts_split_axes():
    """'The result shape contracts each Split axis by that mesh axis's extent.' / 'dtype and
    storage are preserved.' / 'The shard wrapper is stripped, leaving the base Layout.'"""
    s = sl(M22, (Split(1), Split(0)), (8, 6), (6, 1))
    t = infer(Local(), T((8, 6), s, SMEM, DType.BF16))
    assert t == TensorType((4, 3), DType.BF16, Layout((4, 3), (6, 1)), SMEM)


def test_local_inner_position_split():
    """'a split on an inner position of extent m (local extent 1) is cyclic' — the axis still
    contracts by m."""
    s = sl(M2, (Split(1),), ((4, 2), 3), ((0, 0), 1))
    t = infer(Local(), T((8, 3), s))
    assert t.shape == (4, 3) and t.layout == Layout(((4, 1), 3), ((0, 0), 1))


def test_local_symbolic_sizes_pass_through():
    """'Static split sizes divide by mesh extent; symbolic sizes pass through.'"""
    n = DimVar("N", 1, 64)
    t = infer(Local(), T((n, 6), sl(M22, (Split(0), Split(1)), (8, 6))))
    assert t.shape == (n, 3) and t.layout.strides == (6, 1)


def test_local_of_partial_and_broadcast():
    """'Local(x): ... layout becomes the corresponding local layout' — Broadcast / Partial axes
    do not contract."""
    t = infer(Local(), T((4, 6), sl(M22, (Partial("sum"), Broadcast()), (4, 6))))
    assert t.shape == (4, 6) and t.layout == Layout((4, 6), (6, 1))


@given(targets())
def test_local_shape_times_mesh_is_global(target):
    """'The result shape contracts each Split axis by that mesh axis's extent.'"""
    ext = target.layout.axis_extents
    t = infer(Local(), T(ext, target))
    for a, (g, loc) in enumerate(zip(ext, t.shape, strict=True)):
        m = math.prod(M22.axis_extents[ax] for ax, at in enumerate(target.attrs)
                      if isinstance(at, Split)
                      and target.layout.axis_of_position[at.position] == a)
        assert loc * m == g


# =============================================================================================
# a sharded chain
# =============================================================================================
def test_partial_flows_until_reshard():
    """'When a layout-unconstrained parameter binds to a sharded argument, elaboration MUST
    carry each Partial(reduction) at its original mesh-axis index through the body ... Only an
    explicit Reshard or allreduce may complete that state.' — through Reshape and Reduce."""
    x = Var("x", T((8, 6), sl(M22, (Split(0), Partial("sum")), (8, 6))))
    r = Call(Reshape((2, 4, 6)), (x,))
    s = Call(Reduce((2,), False, ReduceKind.SUM), (r,))
    t = infer_expr(s)
    assert t.shape == (2, 4) and t.shard.attrs == (Split(0), Partial("sum"))
    assert t.shard.layout == Layout((2, 4), (4, 1))
    done = infer_expr(Call(Reshard(sl(M22, (Broadcast(), Broadcast()), (2, 4))), (s,)))
    assert done.shard.partials == {}


# =============================================================================================
# random sharded applications: a type with concrete strides, or a TypeInferError
# =============================================================================================
M23 = Mesh("device", ("x", "y"), (2, 3))
NV = DimVar("N", 1, 8)


@st.composite
def sharded_tensors(draw):
    entries = []
    for _ in range(draw(st.integers(0, 3))):
        ps = tuple(draw(st.sampled_from([0, 1, 2, 3, 4, 6]))
                   for _ in range(draw(st.integers(1, 2))))
        entries.append(ps[0] if len(ps) == 1 else ps)
    lay = Layout(tuple(entries))
    if draw(st.booleans()):
        lay = lay.with_flat_strides(tuple(draw(st.integers(0, 5)) for _ in lay.positions))
    attrs, used = [], set()
    for m in M23.axis_extents:
        opts = [p for p, e in enumerate(lay.positions) if e % m == 0 and p not in used]
        c = draw(st.sampled_from(["split", "split", "bcast", "partial"]))
        if c == "split" and opts:
            p = draw(st.sampled_from(opts))
            used.add(p)
            attrs.append(Split(p))
        elif c == "partial":
            attrs.append(Partial(draw(st.sampled_from(["sum", "max", "min"]))))
        else:
            attrs.append(Broadcast())
    shape = tuple(NV if draw(st.integers(0, 5)) == 0 else e for e in lay.axis_extents)
    return T(shape, ShardLayout(M23, tuple(attrs), lay), draw(st.sampled_from(LEVELS)))


DIMS = st.one_of(st.integers(-1, 6), st.just(NV), st.just(NV * 2))


@given(sharded_tensors(), sharded_tensors(), st.data())
def test_random_sharded_applications(x, other, data):
    """'Architecture invariant: after HIR typeinfer runs, every ShardLayout reachable from a
    value's type has concrete layout.strides (never None)' — and every rejection is a
    TypeInferError raised through ctx.error."""
    ints = st.integers(-3, 3)
    op = data.draw(st.sampled_from([
        lambda: Reshape(tuple(data.draw(st.lists(DIMS, max_size=4)))),
        lambda: Reshard(other.layout, data.draw(st.sampled_from([None, *LEVELS, UNMAT]))),
        lambda: Local(),
        lambda: Reduce(tuple(data.draw(st.lists(ints, max_size=2, unique=True))),
                       data.draw(st.booleans()), data.draw(st.sampled_from(list(ReduceKind)))),
        lambda: Transpose(tuple(data.draw(st.permutations(range(x.rank))))),
        lambda: Slice(tuple(data.draw(st.lists(st.integers(0, 2), min_size=x.rank,
                                               max_size=x.rank))), tuple(x.shape)),
        lambda: TopK(data.draw(st.integers(0, 2)), axis=data.draw(ints)),
        lambda: Gather(data.draw(ints)),
    ]))()
    args = (x, T((2,), None, GMEM, DType.I32)) if op.INPUTS == ("x", "indices") else (x,)
    try:
        t = infer(op, *args)
    except TypeInferError:
        return
    fields = t.fields if hasattr(t, "fields") else (t,)
    for f in fields:
        if isinstance(f, TensorType) and f.shard is not None:
            assert f.shard.layout.strides is not None


def test_high_to_low_sugar_rejects_an_aliasing_block_split():
    """Decision D65 (proved by the smt obligation `reshard.strides`): the per-instance form
    gives a Split position stride 0, which aliases when its local extent exceeds 1 — 'high →
    low level → dest strides[k]=0 for every Split axis k' is only injective for local extent 1."""
    blk = ShardLayout(Mesh("device", ("x",), (2,)), (Split(0),), Layout((8, 4)))
    rejects(Reshard(blk, SMEM), T((8, 4)), match="local extent 1")
    cyclic = ShardLayout(Mesh("device", ("x",), (2,)), (Split(0),), Layout(((2, 4), 4)))
    t = infer(Reshard(cyclic, SMEM), T((8, 4)))
    assert t.layout.layout.flat_strides == (0, 4, 1)
