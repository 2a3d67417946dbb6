"""Reshape: the size rule, and the factorization of ShardLayouts (HIR Reshape entry;
ARCHITECTURE.md "Types", the two accepted Reshape rules).

Expected layouts are written out by hand from the rule text; ownership is checked by an
independent numpy simulation of "device d owns the contiguous block [d·E/m, (d+1)·E/m) of that
position" over the linear element order, never by the implementation's own helpers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tilefoundry.semantics.typeinfer.tensor  # noqa: F401  (registers the rules)
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Var
from tilefoundry.semantics.ops import Reshape
from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
from tilefoundry.semantics.typeinfer.reshape import (
    ReshapeRejected,
    enumerate_reshapes,
    reshape_layout,
)
from tilefoundry.semantics.typeinfer.tensor import sizes_equal
from tilefoundry.semantics.types import (
    Broadcast,
    DimVar,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    TensorType,
    dim_min,
)

F32 = DType.F32
M2 = Mesh("device", ("x",), (2,))
M22 = Mesh("device", ("x", "y"), (2, 2))


def sl(mesh, attrs, shape, strides=None):
    return ShardLayout(mesh, tuple(attrs), Layout(tuple(shape), strides))


def reshape(t: TensorType, new):
    return infer_expr(Call(Reshape(tuple(new)), (Var("x", t),)))


# ---- an independent ownership model ---------------------------------------------------------
def owners(shard: ShardLayout) -> np.ndarray:
    """Per element in linear (row-major) order, per mesh axis: the owning coordinate of a Split,
    -1 for Broadcast, -2 - index(reduction) for Partial."""
    pos = shard.layout.positions
    n = math.prod(pos)
    coords = np.unravel_index(np.arange(n), pos) if pos else ()
    out = np.zeros((n, len(shard.attrs)), np.int64)
    for ax, a in enumerate(shard.attrs):
        if isinstance(a, Split):
            block = pos[a.position] // shard.mesh.axis_extents[ax]
            out[:, ax] = coords[a.position] // block
        elif isinstance(a, Broadcast):
            out[:, ax] = -1
        else:
            out[:, ax] = -2 - ("sum", "max", "min").index(a.reduction)
    return out


# =============================================================================================
# size rule
# =============================================================================================
def test_reshape_static_accept():
    """'The result shape is new_shape; size(new_shape) MUST equal size(x.shape).'"""
    t = reshape(TensorType((4, 6), F32), (2, 12))
    assert t == TensorType((2, 12), F32)


def test_reshape_static_reject():
    """'size(new_shape) MUST equal size(x.shape).'"""
    with pytest.raises(TypeInferError, match="MUST equal size") as e:
        reshape(TensorType((4, 6), F32), (5, 5))
    assert "operand x" in str(e.value) and "fix:" in str(e.value)


def test_reshape_negative_extent_reject():
    """'The result shape is new_shape' — an extent is non-negative (no -1 inference)."""
    with pytest.raises(TypeInferError, match="negative"):
        reshape(TensorType((4, 6), F32), (-1, 6))


def test_reshape_symbolic_accept_and_reject():
    """'size(new_shape) MUST equal size(x.shape)' — decided for symbolic sizes when the product
    forms agree (accept) or a binding of the envelope disagrees (reject)."""
    b, s = DimVar("B", 1, 9), DimVar("S", 1, 4097)
    assert reshape(TensorType((b, s, 64), F32), (b * s, 8, 8)).shape == (b * s, 8, 8)
    assert reshape(TensorType((b, 4, 16), F32), (b, 64)).shape == (b, 64)
    with pytest.raises(TypeInferError, match="MUST equal size"):
        reshape(TensorType((b, s, 64), F32), (b, 64))
    n = DimVar("N", 1, 100)
    with pytest.raises(TypeInferError, match="at \\{'N'"):  # (N,) -> (N // 2, 2): N odd fails
        reshape(TensorType((n,), F32), (n // 2, 2))


def test_sizes_equal_three_way():
    """'size(new_shape) MUST equal size(x.shape)' — proven, refuted, or undecided (fail
    closed)."""
    n = DimVar("N", 1, 10)
    assert sizes_equal((n, 2), (2 * n,))[0] is True
    assert sizes_equal((n,), (n + 1,))[0] is False
    big = DimVar("C", 1, 1 << 20)
    ok, _ = sizes_equal(((big // 2) * 2,), (big - big % 2,))  # equal, but not provable here
    assert ok is None
    with pytest.raises(TypeInferError, match="could not be proven"):
        reshape(TensorType(((big // 2) * 2,), F32), (big - big % 2,))


def test_reshape_plain_layout_gives_plain_output():
    """'A plain (non-ShardLayout) input reshapes to a plain output.'"""
    t = reshape(TensorType((4, 6), F32, Layout((4, 6), (6, 1))), (24,))
    assert t.layout is None


def test_reshape_fully_broadcast_gives_plain_output():
    """'A fully-Broadcast ShardLayout input (every attr Broadcast, no genuine sharding)
    reshapes to a plain (unsharded) output.'"""
    t = reshape(TensorType((4, 6), F32, sl(M22, (Broadcast(), Broadcast()), (4, 6))), (3, 8))
    assert t.layout is None


# =============================================================================================
# rule 1
# =============================================================================================
def test_rule1_merge_keeps_positions_and_split():
    """'non-size-1 new axes are the product of a contiguous run of whole layout positions, in
    either merge direction'."""
    s = sl(M2, (Split(0),), (8, 6))
    out = reshape_layout(s, (8, 6), (48,))
    assert out == sl(M2, (Split(0),), ((8, 6),), ((6, 1),))


def test_rule1_split_direction_remaps_split_position():
    """'a Split layout-axis reference remaps to its new layout position'."""
    s = sl(M2, (Split(2),), (1, 3, (2, 4)))  # position 2 = the extent-2 refinement of axis 2
    out = reshape_layout(s, (1, 3, 8), (3, 2, 4))
    assert out is not None and out.attrs == (Split(1),) and out.layout.shape == (3, 2, 4)
    assert out.layout.strides == (8, 4, 1)


def test_rule1_size1_axes_insert_and_drop():
    """'size-1 axes insert/drop freely and hold no sharding'."""
    s = sl(M2, (Split(1),), (1, 4, 6))
    out = reshape_layout(s, (1, 4, 6), (4, 1, 6, 1))
    assert out is not None and out.layout.shape == (4, 1, 6, 1) and out.attrs == (Split(0),)


def test_rule1_partial_and_broadcast_carry():
    """'Partial / Broadcast carry through unchanged (mesh-axis states, no layout axis)'."""
    s = sl(M22, (Partial("max"), Broadcast()), (4, 6))
    out = reshape_layout(s, (4, 6), (24,))
    assert out is not None and out.attrs == (Partial("max"), Broadcast())
    t = reshape(TensorType((4, 6), F32, s), (4, 6, 1))
    assert t.shard is not None and t.shard.attrs == (Partial("max"), Broadcast())


def test_rule1_verbose_strides_kept_per_position():
    """'expressible as a view over the input's layout positions' — a verbose (producer) stride
    stays with its position."""
    s = sl(M2, (Split(0),), (4, 6), (1, 4))  # column-major producer
    out = reshape_layout(s, (4, 6), (24,))
    assert out is not None and out.layout.strides == ((1, 4),)


def test_rule1_per_instance_form_kept():
    """Strides keep the input's form (ARCHITECTURE.md 'Strides': per-instance form)."""
    s = sl(M2, (Split(0),), ((2, 3), 4), ((0, 4), 1))
    assert s.per_instance_strides() == (0, 4, 1)
    out = reshape_layout(s, (6, 4), (2, 12))
    assert out is not None and out.layout.shape == (2, (3, 4))
    assert out.layout.strides == (0, (4, 1)) == tuple(
        out.layout.with_flat_strides(out.per_instance_strides()).strides)


# =============================================================================================
# rule 2
# =============================================================================================
def test_rule2_divides_split_position():
    """'a Split-bound layout position divides across a new-axis boundary at a point its bound
    mesh extent evenly divides: the outer (earlier) sub-factor itself further factors into
    (mesh_ext, Split-bound, local extent 1) and (sub-factor / mesh_ext, plain), and the inner
    residual becomes a plain (non-Split) layout position'."""
    s = sl(M2, (Split(0),), (8, 6))
    out = reshape_layout(s, (8, 6), (4, 12))
    assert out == sl(M2, (Split(0),), ((2, 2), (2, 6)), ((24, 12), (6, 1)))
    assert out.local_positions()[0] == 1  # 'every Split-bound layout dim keeps local extent 1'


def test_rule2_through_the_typeinfer_rule():
    """'A genuine ShardLayout input ... carries through Reshape when the reshape is expressible
    as a view over the input's layout positions'."""
    s = sl(M2, (Split(0),), (8, 6))
    t = reshape(TensorType((8, 6), F32, s), (4, 2, 6))
    assert t.shard is not None and t.shard.layout.shape == ((2, 2), 2, 6)
    assert t.shard.layout.strides is not None


@pytest.mark.parametrize("shard,old,new,why", [
    (sl(M2, (Split(0),), (8, 6)), (8, 6), (16, 3), "not Split-bound"),
    (sl(M2, (Split(0),), (12,)), (12,), (3, 4), "does not divide the outer sub-factor"),
    (sl(M2, (Split(0),), (12,)), (12,), (2, 2, 3), "more than one new-axis boundary"),
    (sl(M2, (Split(0),), (8, 6)), (8, 6), (6, 8), "straddles"),
    (sl(M22, (Split(0), Split(1)), (4, 4)), (4, 4), (2, 8), "two Split-bound positions"),
    (sl(M2, (Split(0),), (8, 6)), (8, 6), (DimVar("N", 1, 64), 6), "symbolic"),
    (sl(M2, (Partial("sum"),), (4, 6)), (4, 6), (2, 12), "not Split-bound"),
])
def test_fail_closed(shard, old, new, why):
    """'Arbitrary rank-N regroup — a Split-bound position whose device-owned block spans a
    boundary deeper than one divide, or two or more Split-bound positions interacting across the
    same regroup — is not yet supported and MUST fail closed.' / 'A reshape not expressible by
    the above MUST fail closed rather than fabricate a layout.'"""
    with pytest.raises(ReshapeRejected, match=why):
        reshape_layout(shard, old, new)


def test_fail_closed_through_the_typeinfer_rule():
    """'A reshape not expressible by the above MUST fail closed rather than fabricate a
    layout.' — the rule names why and the Reshard fix."""
    s = sl(M2, (Split(0),), (8, 6))
    with pytest.raises(TypeInferError) as e:
        reshape(TensorType((8, 6), F32, s), (16, 3))
    msg = str(e.value)
    assert "not Split-bound" in msg and "Reshard" in msg and "operand x" in msg


# =============================================================================================
# enumeration and properties
# =============================================================================================
def test_enumeration_of_one_small_layout():
    """The accepted set of (8, 6) Split(0) over m=2, written out from the two rules: rule 1
    regroups whole positions 8 | 6; rule 2 divides 8 = A·B with 2 | A (A = 2 or 4)."""
    s = sl(M2, (Split(0),), (8, 6))
    acc = {c.new_shape for c in enumerate_reshapes(s, max_rank=3, unit_axes=0) if c.accepted}
    assert acc == {(48,), (8, 6), (2, 24), (4, 12), (2, 4, 6), (4, 2, 6)}


def test_enumeration_reasons_are_named():
    """'A reshape not expressible by the above MUST fail closed' — each rejection names why."""
    s = sl(M22, (Split(0), Partial("sum")), (4, 6))
    cases = enumerate_reshapes(s, max_rank=3, unit_axes=1)
    assert all(c.accepted == (c.reason is None) for c in cases)
    assert all(c.reason for c in cases if not c.accepted)
    assert any(c.accepted for c in cases) and any(not c.accepted for c in cases)


EXTS = st.sampled_from([1, 2, 3, 4, 6])


@st.composite
def sharded_layouts(draw):
    rank = draw(st.integers(1, 3))
    entries = []
    for _ in range(rank):
        k = draw(st.integers(1, 2))
        ps = tuple(draw(EXTS) for _ in range(k))
        entries.append(ps[0] if k == 1 else ps)
    lay = Layout(tuple(entries))
    n_ax = draw(st.integers(1, 2))
    exts = tuple(draw(st.sampled_from([1, 2, 3])) for _ in range(n_ax))
    mesh = Mesh("device", ("x", "y")[:n_ax], exts)
    attrs, used = [], set()
    for m in exts:
        opts = [p for p, e in enumerate(lay.positions) if e % m == 0 and p not in used]
        kind = draw(st.sampled_from(["split", "split", "bcast", "partial"]))
        if kind == "split" and opts:
            p = draw(st.sampled_from(opts))
            used.add(p)
            attrs.append(Split(p))
        elif kind == "partial":
            attrs.append(Partial(draw(st.sampled_from(["sum", "max", "min"]))))
        else:
            attrs.append(Broadcast())
    return ShardLayout(mesh, tuple(attrs), lay)


@given(sharded_layouts(), st.data())
def test_accepted_reshapes_preserve_ownership(shard, data):
    """'Split(position) ... device d owns the contiguous block [d·E/m, (d+1)·E/m) of that
    position' (ARCHITECTURE.md) — every reshape the rules accept keeps the device owning each
    element (and the Partial / Broadcast state of every mesh axis)."""
    cases = enumerate_reshapes(shard, max_rank=3, unit_axes=1)
    assert any(c.accepted for c in cases)  # the identity at least
    if shard.is_fully_broadcast:
        return
    acc = [c for c in cases if c.accepted]
    case = data.draw(st.sampled_from(acc))
    out = case.result
    assert out is not None and out.layout.strides is not None
    assert out.layout.axis_extents == case.new_shape
    np.testing.assert_array_equal(owners(out), owners(shard))
    for p, m in out.split_positions.items():  # a divided position keeps local extent 1
        assert out.layout.positions[p] % m == 0


@given(sharded_layouts(), st.data())
def test_accepted_reshapes_round_trip(shard, data):
    """A view over the layout positions is invertible: reshaping an accepted result back to the
    original shape is accepted too and restores the ownership."""
    if shard.is_fully_broadcast:
        return
    acc = [c for c in enumerate_reshapes(shard, max_rank=3, unit_axes=1) if c.accepted]
    case = data.draw(st.sampled_from(acc))
    back = reshape_layout(case.result, case.new_shape, shard.layout.axis_extents)
    assert back is not None
    np.testing.assert_array_equal(owners(back), owners(shard))


@given(sharded_layouts(), st.data())
def test_rejected_reshapes_raise_typeinfer_error(shard, data):
    """'A reshape not expressible by the above MUST fail closed rather than fabricate a
    layout.' — through the rule, a rejection is a TypeInferError, never another exception."""
    rej = [c for c in enumerate_reshapes(shard, max_rank=3, unit_axes=1) if not c.accepted]
    if not rej:
        return
    case = data.draw(st.sampled_from(rej))
    with pytest.raises(TypeInferError, match="Reshard"):
        reshape(TensorType(shard.layout.axis_extents, F32, shard), case.new_shape)


@st.composite
def shape_and_regroup(draw):
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=4)))
    n = math.prod(shape)
    if n == 0:
        new = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4).filter(
            lambda s: 0 in s))
        return shape, tuple(new)
    new, rest = [], n
    while rest > 1:
        divs = [f for f in range(2, rest + 1) if rest % f == 0]
        f = draw(st.sampled_from(divs))
        new.append(f)
        rest //= f
    for _ in range(draw(st.integers(0, 2))):
        new.insert(draw(st.integers(0, len(new))), 1)
    return shape, tuple(new)


@given(shape_and_regroup())
def test_reshape_shape_matches_torch(case):
    """'The result shape is new_shape' — equal to torch.reshape on random data."""
    shape, new = case
    x = torch.randn(shape)
    t = reshape(TensorType(shape, F32), new)
    assert t.shape == tuple(x.reshape(new).shape)


@given(shape_and_regroup(), st.integers(1, 3))
def test_reshape_corrupted_size_raises(case, bump):
    """'size(new_shape) MUST equal size(x.shape)' — a corrupted size is a TypeInferError."""
    shape, new = case
    bad = (*new, bump + 1) if math.prod(shape) else (bump,)
    with pytest.raises(TypeInferError):
        reshape(TensorType(shape, F32), bad)


def test_symbolic_k_style_dim_in_reshape_is_checked():
    """'size(new_shape) MUST equal size(x.shape)' — a dim_min extent is compared exactly over a
    small envelope."""
    n = DimVar("N", 1, 64)
    assert reshape(TensorType((dim_min(n, 8), 2), F32), (2 * dim_min(n, 8),)).shape == (
        2 * dim_min(n, 8),)


def test_zero_size_sharded_reshape():
    """'A reshape not expressible by the above MUST fail closed' — a zero-size sharded value
    has no position factorization beyond the identity."""
    s = sl(M2, (Split(0),), (0, 6))
    assert reshape_layout(s, (0, 6), (0, 6)) is not None
    with pytest.raises(ReshapeRejected, match="zero-size"):
        reshape_layout(s, (0, 6), (6, 0))


def test_partial_only_all_size_one_reshape_carries_the_partial():
    """'size-1 axes insert/drop freely and hold no sharding; ... Partial / Broadcast carry
    through unchanged' — a Partial-only (1, 1) value reshapes to () and (1,) (this was rejected
    with a reason naming a Split position that did not exist)."""
    from tilefoundry.semantics.typeinfer.reshape import reshape_layout
    from tilefoundry.semantics.types import Layout, Mesh, Partial, ShardLayout

    mesh = Mesh("device", ("x",), (2,))
    s = ShardLayout(mesh, (Partial("sum"),), Layout((1, 1), (1, 1)))
    for new in [(), (1,), (1, 1, 1)]:
        out = reshape_layout(s, (1, 1), new)
        assert out.attrs == (Partial("sum"),) and out.layout.axis_extents == new


def test_sizes_are_compared_without_enumerating_a_huge_envelope():
    """Issue 21: sizes_equal built set(range(lo, hi)) of a DimVar's envelope: N in [2, 2^28)
    took seconds then MemoryError, 2^40 never finished. Sample points decide it (a
    counterexample here; equal product forms are proven without sampling)."""
    from tilefoundry.semantics.typeinfer.tensor import sizes_equal
    from tilefoundry.semantics.types import DimVar

    for hi in (1 << 28, 1 << 40, 1 << 62):
        n = DimVar("N", 2, hi)
        ok, why = sizes_equal((n,), (n // 2, 2))
        assert ok is False and "N" in why
        assert sizes_equal((n, 2), (2, n))[0] is True
