"""Evaluation on sharded values: the sharding family (Reshard, Local) and the per-device driver.

Every op whose operands include a ``Sharded`` / ``PerDevice`` value runs **per device** through
``eval_on_mesh``: each device's local operands go to the op's ordinary (unsharded)
implementation with the local result type, and the per-device results are stacked back into a
``Sharded`` value of the Call's inferred ShardLayout (or a ``PerDevice`` value when the result
type is plain). The layout algebra of the type rules decides what each device holds; the
simulation only realizes it, so the sharded-vs-erased property tests the type rules themselves.
The places where "per device" needs more than the local operands (docs/decisions.md D130–D136):

* **Elementwise operands** (Binary, Select): a plain operand, or a Broadcast mesh axis of a sharded
  operand, is replicated — each device reads its own block of it (HIR elementwise sharding).
* **Gather** with x Split on the gathered axis gives Partial(sum): each device gathers the rows
  it owns and writes the sum's neutral element (``-0`` for floats, so ``-0`` survives the
  completion) at the rows it does not own. Indices are checked against the global extent.
* **Reduce** over an axis whose position is Split yields Broadcast on that mesh axis (the HIR
  Reduce rule), so the devices first all-gather that position and each reduces the whole fiber,
  in the same order as the unsharded evaluation (bit-identical for every policy).
* **ShapeOf / Rank** of a sharded value describe the logical (global) value.
* **Reshard** completes Partials (``mesh.unshard``: the ``unordered_tree`` policy's reference
  result — an ``admitted_set`` contract for a float sum) and redistributes to the target.
* **Local** exposes each device's local tensor as a ``PerDevice`` value.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from tilefoundry.semantics.evaluator.mesh import (
    PerDevice,
    Sharded,
    _neutral_sum,
    shard,
    unshard,
)
from tilefoundry.semantics.evaluator.registry import (
    EvalCtx,
    EvaluationError,
    OpContract,
    register_eval,
)
from tilefoundry.semantics.formats import DType, dtype_of
from tilefoundry.semantics.ops.math import Binary
from tilefoundry.semantics.ops.sharding import Local, Reshard
from tilefoundry.semantics.ops.tensor import (
    CacheUpdate,
    Gather,
    InsertSlice,
    Rank,
    Reduce,
    Reshape,
    ShapeOf,
)
from tilefoundry.semantics.ops.tile_select import Select
from tilefoundry.semantics.types import (
    Broadcast,
    Partial,
    ShardLayout,
    Split,
    TensorType,
    TupleType,
)

__all__ = ["eval_local", "eval_on_mesh", "eval_reshard", "is_mesh_value"]


def is_mesh_value(v: object) -> bool:
    if isinstance(v, tuple):
        return any(is_mesh_value(f) for f in v)
    return isinstance(v, Sharded | PerDevice)


# ---------------------------------------------------------------------------------------------
# Reshard and Local
# ---------------------------------------------------------------------------------------------
def _partial_sum_float(v: object) -> bool:
    return isinstance(v, Sharded) and dtype_of(v.data).is_float and \
        "sum" in v.layout.partials.values()


@register_eval(Reshard)
def eval_reshard(ctx: EvalCtx, args: tuple):
    (x,) = args
    if isinstance(x, PerDevice):
        ctx.error("x is a device-varying value (computed from Local), which has no logical "
                  "value to redistribute; keep the computation on the ShardLayout-typed value "
                  "instead of its Local view")
    target = ctx.out_type.layout if isinstance(ctx.out_type, TensorType) else None
    if _partial_sum_float(x):
        ctx.note(OpContract(op="Reshard", kind="admitted_set", policy="unordered_tree",
                            dtype=dtype_of(x.data),
                            detail="completing Partial(sum): any summation tree over the "
                                   "devices' pieces is admitted"))
    value = unshard(x) if isinstance(x, Sharded) else np.asarray(x)
    if isinstance(target, ShardLayout):
        return shard(value, target)
    return np.array(value, copy=True, order="C")


@register_eval(Local)
def eval_local(ctx: EvalCtx, args: tuple):
    (x,) = args
    if not isinstance(x, Sharded):
        ctx.error(f"x is not a sharded value (got {type(x).__name__}); Local exposes the "
                  f"local view of a ShardLayout-typed value")
    if x.layout.is_fully_broadcast:
        # every device's local view is the whole value (replicas checked): a plain array, as
        # erasure treats it (D135)
        return unshard(x)
    return PerDevice(x.mesh, np.array(x.data, copy=True, order="C"))


# ---------------------------------------------------------------------------------------------
# layout helpers
# ---------------------------------------------------------------------------------------------
def local_type(t: object) -> object:
    """The per-device type of a result type (ShardLayouts have static extents)."""
    if isinstance(t, TupleType):
        return TupleType(tuple(local_type(f) for f in t.fields))
    if isinstance(t, TensorType) and t.shard is not None:
        return TensorType(tuple(t.shard.local_axis_extents()), t.dtype, None, t.storage)
    return t


def _replicated(layout: ShardLayout) -> ShardLayout:
    """The layout a replicated (plain) operand is read through: Partials become Broadcast."""
    attrs = tuple(Broadcast() if isinstance(a, Partial) else a for a in layout.attrs)
    return ShardLayout(layout.mesh, attrs, layout.layout)


def _op_local_positions(v: Sharded, out: ShardLayout) -> list[int]:
    """v's local extents refined into ``out``'s layout positions (v must split only positions
    that ``out`` splits identically; the type rules guarantee it for elementwise operands)."""
    mine = v.layout.split_positions
    out_pos = out.layout.positions
    if mine and v.layout.layout.shape != out.layout.shape:
        raise EvaluationError(f"a sharded operand's layout {v.layout.layout.shape} does not "
                              f"refine like the result's {out.layout.shape}")
    return [e // mine[p] if p in mine else e for p, e in enumerate(out_pos)]


def align(v: object, out: ShardLayout) -> np.ndarray:
    """Per-device data of an elementwise operand read through the result layout ``out``:
    shape ``mesh extents + out's local extents``."""
    mesh_rank = len(out.mesh.axis_extents)
    if isinstance(v, np.ndarray):
        full = np.broadcast_to(v, tuple(out.layout.axis_extents))
        return shard(np.array(full, order="C"), _replicated(out)).data
    if not isinstance(v, Sharded):
        raise EvaluationError(f"cannot combine a {type(v).__name__} value with a sharded one")
    if v.layout.mesh != out.mesh:
        raise EvaluationError(f"operands live on different meshes ({v.layout.mesh} vs "
                              f"{out.mesh})")
    loc = _op_local_positions(v, out)
    data = v.data.reshape((*v.data.shape[:mesh_rank], *loc))
    for i, (a, b) in enumerate(zip(v.layout.attrs, out.attrs, strict=True)):
        if isinstance(b, Split) and isinstance(a, Broadcast):
            # this device reads its own block of the replicated position: a diagonal between
            # the mesh axis and the position's block index
            p, m = b.position, out.mesh.axis_extents[i]
            d = mesh_rank + p
            shp = list(data.shape)
            data = data.reshape((*shp[:d], m, shp[d] // m, *shp[d + 1:]))
            data = np.diagonal(data, axis1=i, axis2=d)  # the diagonal becomes the last axis
            data = np.moveaxis(data, -1, i)
        elif a != b:
            # a replicated operand (Broadcast) is read whole under a Partial result; two
            # Partials on one axis are the table's business (it allowed this combination)
            if not (isinstance(b, Partial) and isinstance(a, Broadcast | Partial)):
                raise EvaluationError(f"an operand's {a} on mesh axis {out.mesh.axis_names[i]} "
                                      f"cannot be read through the result's {b}")
    return np.ascontiguousarray(data).reshape((*out.mesh.axis_extents,
                                               *out.local_axis_extents()))


def gather_positions(v: Sharded, axes: list[int]) -> Sharded:
    """All-gather: turn the Split on each mesh axis in ``axes`` into Broadcast (every device
    then holds that position whole)."""
    lay = v.layout
    mesh_rank = len(lay.mesh.axis_extents)
    sp = lay.split_positions
    loc = [e // sp[p] if p in sp else e for p, e in enumerate(lay.layout.positions)]
    data = v.data.reshape((*v.data.shape[:mesh_rank], *loc))
    attrs = list(lay.attrs)
    for i in axes:
        p, m = attrs[i].position, lay.mesh.axis_extents[i]
        # bring mesh axis i next to position p, merge them (block index outermost), re-broadcast
        # mesh axis i moves to sit just before position p's local axis (the block index is
        # the outer factor of the gathered position: devices hold consecutive blocks)
        moved = np.moveaxis(data, i, mesh_rank - 1 + p)
        shp = list(moved.shape)
        d = mesh_rank - 1 + p  # index of the moved mesh dim after removing axis i
        merged = moved.reshape((*shp[:d], shp[d] * shp[d + 1], *shp[d + 2:]))
        data = np.broadcast_to(np.expand_dims(merged, i),
                               (*merged.shape[:i], m, *merged.shape[i:]))
        loc[p] *= m
        attrs[i] = Broadcast()
    out = ShardLayout(lay.mesh, tuple(attrs), lay.layout)
    return Sharded(out, np.ascontiguousarray(data).reshape(
        (*lay.mesh.axis_extents, *out.local_axis_extents())))


def _mesh_of(args: tuple):
    for a in args:
        if isinstance(a, Sharded):
            return a.mesh
        if isinstance(a, PerDevice):
            return a.mesh
        if isinstance(a, tuple):
            m = _mesh_of(a)
            if m is not None:
                return m
    return None


def _wrap(t: object, data: np.ndarray, mesh, device_varying: bool) -> object:
    """Stacked per-device results as the value of type ``t``. A plain (unsharded) result type
    computed from sharded operands says the value is replicated: the devices must agree
    bit for bit, and the value is the plain array. Only a value derived from ``Local`` is
    device-varying (``PerDevice``)."""
    if isinstance(t, TensorType) and t.shard is not None:
        return Sharded(t.shard, data)
    if device_varying:
        return PerDevice(mesh, data)
    from tilefoundry.semantics.dtypes import to_bits

    mesh_rank = len(mesh.axis_extents)
    flat = data.reshape((-1, *data.shape[mesh_rank:]))
    bits = to_bits(np.array(flat, order="C"))
    if not (bits == bits[:1]).all():
        raise EvaluationError(f"a result typed as unsharded ({t}) differs between devices; "
                              f"the type rule promised a replicated value")
    return np.array(flat[0], order="C")


# ---------------------------------------------------------------------------------------------
# the per-device driver
# ---------------------------------------------------------------------------------------------
def eval_on_mesh(ctx: EvalCtx, impl: Callable, args: tuple):
    """Evaluate one Call whose operands include sharded / per-device values."""
    op = ctx.op
    mesh = _mesh_of(args)
    if any(isinstance(a, PerDevice) for a in args) and any(isinstance(a, Sharded)
                                                          for a in args):
        ctx.error("a device-varying value (from Local) meets a ShardLayout-typed value in one "
                  "op; their per-device pieces do not describe one logical value — Reshard or "
                  "keep the computation on one side")
    if isinstance(op, ShapeOf | Rank):
        glob = tuple(np.zeros(a.shape, np.int8) if isinstance(a, Sharded) else a for a in args)
        if any(isinstance(a, PerDevice) for a in glob):
            glob = tuple(a.data[(0,) * len(mesh.axis_extents)] if isinstance(a, PerDevice)
                         else a for a in glob)
        return impl(ctx, glob)
    out_t = ctx.out_type
    if isinstance(op, Reduce) and isinstance(args[0], Sharded):
        args = (_gather_reduced(args[0], op),)
    if isinstance(op, Binary | Select) and isinstance(out_t, TensorType) and \
            out_t.shard is not None:
        datas = [align(a, out_t.shard) for a in args]
        args = tuple(Sharded(out_t.shard, d) for d in datas)
    if isinstance(op, Gather) and isinstance(args[0], Sharded):
        return _gather_split(ctx, impl, args)
    if isinstance(op, Reshape) and isinstance(out_t, TensorType) and out_t.shard is not None:
        # each device reshapes its block to its local extents (Reshape rules 1 / 2 keep the
        # C order over the local positions, D130)
        local = Reshape(tuple(out_t.shard.local_axis_extents()))
        ctx = EvalCtx(local, ctx.call, out_t, ctx.contracts, ctx.args, ctx.dims)
    if isinstance(op, InsertSlice | CacheUpdate) and isinstance(args[0], Sharded):
        return _write_split(ctx, impl, args, mesh)
    return _per_device(ctx, impl, args, mesh)


def _local_args(args: tuple, coord: tuple) -> tuple:
    out = []
    for a in args:
        if isinstance(a, Sharded | PerDevice):
            out.append(np.array(a.data[coord], order="C"))
        elif isinstance(a, tuple):
            out.append(_local_args(a, coord))
        else:
            out.append(a)
    return tuple(out)


def _keep_first_device_notes(ctx: EvalCtx, notes: list) -> None:
    """Contracts are the same on every device: keep the first device's, marked per-device."""
    ctx.contracts.extend((call, replace(c, per_device=True, operands=()))
                         for call, c in notes)


def _per_device(ctx: EvalCtx, impl: Callable, args: tuple, mesh):
    lt = local_type(ctx.out_type)
    results = []
    notes: list = []
    for n, coord in enumerate(itertools.product(*(range(m) for m in mesh.axis_extents))):
        local = _local_args(args, coord)
        lctx = EvalCtx(ctx.op, ctx.call, lt, notes if n == 0 else [], local, ctx.dims)
        results.append(impl(lctx, local))
    _keep_first_device_notes(ctx, notes)
    ext = tuple(mesh.axis_extents)
    t = ctx.out_type
    varying = any(isinstance(a, PerDevice) for a in args)
    if isinstance(t, TupleType):
        return tuple(_wrap(ft, np.stack([r[i] for r in results]).reshape(
            (*ext, *np.shape(results[0][i]))), mesh, varying) for i, ft in enumerate(t.fields))
    return _wrap(t, np.stack(results).reshape((*ext, *np.shape(results[0]))), mesh, varying)


def _natural_axis(lay: ShardLayout, p: int) -> int:
    """The tensor axis of layout position ``p``, which must be the axis's only position."""
    a = lay.layout.axis_of_position[p]
    if isinstance(lay.layout.shape[a], tuple) and len(lay.layout.shape[a]) > 1:
        raise EvaluationError(f"a write into a destination split on a refined axis "
                              f"{lay.layout.shape[a]} is not simulated; Reshard the destination "
                              f"to a natural layout first")
    return a


def _write_split(ctx: EvalCtx, impl: Callable, args: tuple, mesh):
    """InsertSlice / CacheUpdate into a destination with Splits: the type rule lets a replicated
    update cover a split axis whole (D138), so each device writes its own block of it."""
    dst = args[0]
    upd_i = 1 if isinstance(ctx.op, InsertSlice) else 3
    splits = [(i, a.position) for i, a in enumerate(dst.layout.attrs) if isinstance(a, Split)]
    upd = args[upd_i]
    own = isinstance(upd, Sharded) and all(
        isinstance(upd.layout.attrs[i], Split) for i, _ in splits)
    if own or not splits:
        return _per_device(ctx, impl, args, mesh)
    lt = local_type(ctx.out_type)
    results, notes = [], []
    for n, coord in enumerate(itertools.product(*(range(m) for m in mesh.axis_extents))):
        local = list(_local_args(args, coord))
        u = local[upd_i]
        for i, p in splits:
            if isinstance(upd, Sharded) and isinstance(upd.layout.attrs[i], Split):
                continue
            a = _natural_axis(dst.layout, p)
            blk = u.shape[a] // mesh.axis_extents[i]
            sl = [slice(None)] * u.ndim
            sl[a] = slice(coord[i] * blk, (coord[i] + 1) * blk)
            u = u[tuple(sl)]
        local[upd_i] = np.array(u, order="C")
        lctx = EvalCtx(ctx.op, ctx.call, lt, notes if n == 0 else [], tuple(local), ctx.dims)
        results.append(impl(lctx, tuple(local)))
    _keep_first_device_notes(ctx, notes)
    ext = tuple(mesh.axis_extents)
    return _wrap(ctx.out_type, np.stack(results).reshape((*ext, *results[0].shape)), mesh,
                 False)


def _gather_reduced(x: Sharded, op: Reduce) -> Sharded:
    rank = len(x.layout.layout.shape)
    red = {a % rank for a in op.axes}
    aop = x.layout.layout.axis_of_position
    axes = [i for i, a in enumerate(x.layout.attrs)
            if isinstance(a, Split) and aop[a.position] in red]
    return gather_positions(x, axes) if axes else x


def global_indices(ctx: EvalCtx, idx, n_glob: int, axis: int) -> np.ndarray:
    """Gather indices along a split axis as int64, each checked against the axis's global
    extent (the run-time check ``index_range``; negative indices do not wrap)."""
    iv = np.asarray(idx).astype(np.int64)
    bad = (iv < 0) | (iv >= n_glob)
    if bad.any():
        pos = tuple(int(j) for j in np.argwhere(bad)[0])
        ctx.error(f"index {int(iv[pos])} at indices{list(pos)} is outside [0, {n_glob}) on "
                  f"axis {axis}")
    return iv


def _gather_split(ctx: EvalCtx, impl: Callable, args: tuple):
    x, idx = args
    op: Gather = ctx.op
    lay = x.layout
    rank = len(lay.layout.shape)
    axis = op.axis % rank
    on = [(i, a) for i, a in enumerate(lay.attrs)
          if isinstance(a, Split) and lay.layout.axis_of_position[a.position] == axis]
    if not on:
        return _per_device(ctx, impl, args, lay.mesh)
    if isinstance(idx, Sharded):
        idx = unshard(idx)  # indices are replicated (a Split of indices fails typeinfer)
    if isinstance(idx, PerDevice):
        ctx.error("indices vary by device (from Local); gather needs replicated indices")
    ((i, _),) = on
    n_glob = lay.layout.axis_extents[axis]
    m = lay.mesh.axis_extents[i]
    blk = n_glob // m
    iv = global_indices(ctx, idx, n_glob, axis)
    dt = dtype_of(x.data)
    neutral = _neutral_sum(dt) if dt is not DType.F8E8M0 else None

    results = []
    notes: list = []
    lt = local_type(ctx.out_type)
    for n, coord in enumerate(itertools.product(*(range(e) for e in lay.mesh.axis_extents))):
        lo = coord[i] * blk
        own = (iv >= lo) & (iv < lo + blk)
        li = np.where(own, iv - lo, 0).astype(iv.dtype)
        local = (np.array(x.data[coord], order="C"), li.astype(np.asarray(idx).dtype))
        lctx = EvalCtx(ctx.op, ctx.call, lt, notes if n == 0 else [], local, ctx.dims)
        r = impl(lctx, local)
        mask = own.reshape((1,) * axis + own.shape + (1,) * (r.ndim - axis - own.ndim))
        results.append(np.where(mask, r, neutral).astype(r.dtype))
    _keep_first_device_notes(ctx, notes)
    ext = tuple(lay.mesh.axis_extents)
    return _wrap(ctx.out_type, np.stack(results).reshape((*ext, *results[0].shape)), lay.mesh,
                 False)
