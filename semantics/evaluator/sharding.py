"""Evaluation on sharded values: the sharding family (Reshard, Local) and the mesh simulation.

Every op whose operands include a ``Sharded`` / ``PerDevice`` value runs **per device** through
``eval_on_mesh``: the per-device driver (``mesh_driver.run_on_mesh``, by the op's mesh rule in
``mesh_rules.py``) with ``AllDevices``, the collectives of every device in this process: each device's local operands go to the op's ordinary (unsharded)
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

import numpy as np

from tilefoundry.semantics.evaluator.mesh import PerDevice, Sharded, shard, unshard
from tilefoundry.semantics.evaluator.mesh_driver import (
    MeshDevices,
    global_indices,
    local_type,
    run_on_mesh,
)
from tilefoundry.semantics.evaluator.registry import (
    EvalCtx,
    EvaluationError,
    OpContract,
    register_eval,
)
from tilefoundry.semantics.formats import dtype_of
from tilefoundry.semantics.ops.sharding import Local, Reshard
from tilefoundry.semantics.types import (
    Broadcast,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    TensorType,
    TupleType,
)

__all__ = ["ALL_DEVICES", "AllDevices", "align", "eval_local", "eval_on_mesh", "eval_reshard",
           "gather_positions", "global_indices", "is_mesh_value",
           "local_type", "replicated"]


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
def replicated(layout: ShardLayout) -> ShardLayout:
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
        return shard(np.array(full, order="C"), replicated(out)).data
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
# every device in this process: the collectives of the mesh simulation
# ---------------------------------------------------------------------------------------------
class AllDevices(MeshDevices):
    """Every device of the mesh in this process: values are ``Sharded`` / ``PerDevice`` (the
    mesh axes first), collectives are reshapes of the stacked data."""

    def is_sharded(self, v: object) -> bool:
        return isinstance(v, Sharded)

    def is_varying(self, v: object) -> bool:
        return isinstance(v, PerDevice)

    def layout(self, v: Sharded) -> ShardLayout:
        return v.layout

    def mesh_of(self, v: Sharded | PerDevice) -> Mesh:
        return v.mesh

    def coords(self, mesh: Mesh) -> list[tuple[int, ...]]:
        return list(itertools.product(*(range(m) for m in mesh.axis_extents)))

    def block(self, v: Sharded | PerDevice, coord: tuple[int, ...]) -> np.ndarray:
        return np.array(v.data[coord], order="C")

    def assemble(self, t: object, mesh: Mesh, results: list, varying: bool) -> object:
        ext = tuple(mesh.axis_extents)
        if isinstance(t, TupleType):
            return tuple(_wrap(ft, np.stack([r[i] for r in results]).reshape(
                (*ext, *np.shape(results[0][i]))), mesh, varying)
                for i, ft in enumerate(t.fields))
        return _wrap(t, np.stack(results).reshape((*ext, *np.shape(results[0]))), mesh, varying)

    def all_gather(self, v: Sharded, axes: list[int]) -> Sharded:
        return gather_positions(v, axes)

    def to_global(self, v: Sharded) -> np.ndarray:
        return unshard(v)

    def align(self, v: object, out: ShardLayout) -> Sharded:
        return Sharded(out, align(v, out))


ALL_DEVICES = AllDevices()


def eval_on_mesh(ctx: EvalCtx, impl: Callable, args: tuple):
    """Evaluate one Call whose operands include sharded / per-device values (every device)."""
    return run_on_mesh(ctx, impl, args, ALL_DEVICES)
