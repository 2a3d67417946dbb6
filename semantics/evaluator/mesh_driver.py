"""The per-device driver: one Call on mesh values, by its mesh rule (``mesh_rules.py``, D371).

The driver is written once; *where* the devices are is the business of a ``MeshDevices``
implementation (the collectives interface):

* ``sharding.AllDevices`` — every device of the mesh in this process (the reference evaluator's
  mesh simulation: values are ``Sharded`` / ``PerDevice``, stacked with the mesh axes first);
* ``conformance.distributed_rank.RankDevices`` — one ``torch.distributed`` rank, the device
  it is (values are ``LocalShard`` / ``LocalVarying``; collectives run in one process group per
  set of mesh axes);
* ``mesh_planner.PlanningDevices`` — ``AllDevices`` recording each collective (D430);
* ``compiler.mesh_partition._PartitionDevices`` — the mesh lowering (D490): values are slots of
  the mesh program, the devices one symbolic device whose local computation is a local op of a
  launch, each collective a ``Collective`` step (and ``_ProbeDevices``, the same question asked
  on a loop body's types: does this call need a collective?);
* ``oracle.enclosure_eval._EnclosureDevices`` — the enclosing evaluator (D491): values are
  (value, enclosure) pairs, every movement applied to each enclosure component.

The driver asks the implementation for the devices it computes here, each device's local block
of a value, the collectives a rule needs (all-gather of Split positions, the global value of
replicated indices), the alignment of an elementwise operand to the result layout, and the
assembly of the local results into the result value, and the steps of a rule's own path (a
shape query's stand-in, slicing a replicated update, a gather's local indices and its mask:
methods with the in-process behaviour as their default, which a lowering turns into steps or
refuses). The local computation itself is the ``impl`` the caller passes: the op's ordinary
implementation (``registry.EVALUATORS``) on the device's local operands with the local result
type, for the evaluators.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tilefoundry.semantics.evaluator.mesh import neutral_sum
from tilefoundry.semantics.evaluator.mesh_rules import MeshRule, mesh_rule
from tilefoundry.semantics.evaluator.registry import EvalCtx, EvaluationError
from tilefoundry.semantics.formats import DType, dtype_of
from tilefoundry.semantics.ops.tensor import InsertSlice, Reshape
from tilefoundry.semantics.types import Mesh, ShardLayout, Split, TensorType, TupleType

__all__ = ["MeshDevices", "global_indices", "local_type", "natural_axis", "run_on_mesh"]


class MeshDevices(ABC):
    """Where a mesh's devices are, and how values move between them (the collectives)."""

    # -- representation ------------------------------------------------------------------------
    @abstractmethod
    def is_sharded(self, v: object) -> bool:
        """A ShardLayout-typed mesh value."""

    @abstractmethod
    def is_varying(self, v: object) -> bool:
        """A plain-typed, device-varying value (from ``Local``)."""

    @abstractmethod
    def layout(self, v: Any) -> ShardLayout:
        """The ShardLayout of a sharded value."""

    @abstractmethod
    def mesh_of(self, v: Any) -> Mesh:
        """The mesh of a sharded or device-varying value."""

    @abstractmethod
    def coords(self, mesh: Mesh) -> Sequence[tuple[int, ...]]:
        """The devices this process computes, in C order (all of them, or its own)."""

    @abstractmethod
    def block(self, v: Any, coord: tuple[int, ...]) -> np.ndarray:
        """Device ``coord``'s local tensor of a mesh value (C-contiguous)."""

    @abstractmethod
    def assemble(self, t: Any, mesh: Mesh, results: list, varying: bool) -> Any:
        """The value of type ``t`` from the local results of ``coords(mesh)`` (in order);
        ``varying``: the result derives from a device-varying value."""

    # -- collectives and movements -------------------------------------------------------------
    @abstractmethod
    def all_gather(self, v: Any, axes: list[int]) -> Any:
        """Split -> Broadcast on each mesh axis in ``axes`` (every device holds the position
        whole)."""

    @abstractmethod
    def to_global(self, v: Any) -> np.ndarray:
        """The logical value of a sharded value, on every device."""

    @abstractmethod
    def align(self, v: Any, out: ShardLayout) -> Any:
        """An elementwise operand (plain or sharded) read through the result layout ``out``:
        a sharded value of layout ``out``."""

    # -- steps a rule takes on each device; a lowering that lacks one refuses it ----------------
    def shape_stand_in(self, v: Any, coord: tuple[int, ...]) -> Any:
        """What a shape query (``GLOBAL_SHAPE``) reads of an operand: a stand-in of the logical
        shape for a sharded value, the device's block of a device-varying one."""
        if self.is_sharded(v):
            return np.zeros(v.shape, np.int8)
        return self.block(v, coord) if self.is_varying(v) else v

    def slices_per_device(self, ctx: EvalCtx, why: str) -> None:
        """A rule is about to slice a replicated operand to each device's own block (``why``
        says which); the implementations that hold the devices' data do it (nothing to
        do here), a lowering without such a step raises."""
        del ctx, why  # the implementations holding the devices' data slice in ``local_fn``

    def gather_index(self, ctx: EvalCtx, idx: Any, mesh: Mesh, i: int, n_glob: int,
                     blk: int, axis: int) -> Any:
        """``GATHER_SPLIT``: the replicated global indices ``idx`` as each device's local ones
        (a device-varying value): the index into its own block of mesh axis ``i`` (``blk``
        rows each), 0 where it does not own the row; every index checked against the global
        extent ``n_glob`` (``index_range``)."""
        iv = global_indices(ctx, idx, n_glob, axis)
        idt = np.asarray(idx).dtype
        local = [np.where(_owns(iv, c[i] * blk, blk), iv - c[i] * blk, 0).astype(idt)
                 for c in self.coords(mesh)]
        return self.assemble(None, mesh, local, True)

    def gather_mask(self, ctx: EvalCtx, results: list, idx: Any, mesh: Mesh, i: int,
                    n_glob: int, blk: int, axis: int) -> Any:
        """``GATHER_SPLIT``: the devices' local gather results with the sum's neutral element
        (``-0`` for floats) at the rows a device does not own — the Partial(sum) result."""
        iv = np.asarray(idx).astype(np.int64)
        dt = dtype_of(results[0]) if results else None
        neutral = neutral_sum(dt) if dt is not None and dt is not DType.F8E8M0 else None
        masked = []
        for r, c in zip(results, self.coords(mesh), strict=True):
            own = _owns(iv, c[i] * blk, blk)
            mask = own.reshape((1,) * axis + own.shape + (1,) * (r.ndim - axis - own.ndim))
            masked.append(np.where(mask, r, neutral).astype(r.dtype))
        return self.assemble(ctx.out_type, mesh, masked, False)

    def flatten(self, args: Iterable) -> Iterable:
        for a in args:
            if isinstance(a, tuple):
                yield from self.flatten(a)
            else:
                yield a

    def is_mesh(self, v: object) -> bool:
        return any(self.is_sharded(a) or self.is_varying(a) for a in self.flatten((v,)))


def local_type(t: object) -> object:
    """The per-device type of a result type (ShardLayouts have static extents)."""
    if isinstance(t, TupleType):
        return TupleType(tuple(local_type(f) for f in t.fields))
    if isinstance(t, TensorType) and t.shard is not None:
        return TensorType(tuple(t.shard.local_axis_extents()), t.dtype, None, t.storage)
    return t


def natural_axis(lay: ShardLayout, p: int) -> int:
    """The tensor axis of layout position ``p``, which must be the axis's only position."""
    a = lay.layout.axis_of_position[p]
    if isinstance(lay.layout.shape[a], tuple) and len(lay.layout.shape[a]) > 1:
        raise EvaluationError(f"a write into a destination split on a refined axis "
                              f"{lay.layout.shape[a]} is not simulated; Reshard the destination "
                              f"to a natural layout first")
    return a


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


def _local_args(dev: MeshDevices, args: tuple, coord: tuple) -> tuple:
    out = []
    for a in args:
        if dev.is_sharded(a) or dev.is_varying(a):
            out.append(dev.block(a, coord))
        elif isinstance(a, tuple):
            out.append(_local_args(dev, a, coord))
        else:
            out.append(a)
    return tuple(out)


def _each_device(dev: MeshDevices, ctx: EvalCtx, impl: Callable, args: tuple, mesh: Mesh,
                 local_fn: Callable | None = None) -> list:
    """The op's implementation on every device of ``dev.coords(mesh)``; the first device's
    contracts are kept (marked per-device: they are the same on every device)."""
    lt = local_type(ctx.out_type)
    results = []
    notes: list = []
    for n, coord in enumerate(dev.coords(mesh)):
        local = _local_args(dev, args, coord)
        if local_fn is not None:
            local = local_fn(local, coord)
        lctx = EvalCtx(ctx.op, ctx.call, lt, notes if n == 0 else [], local, ctx.dims)
        results.append(impl(lctx, local))
    ctx.contracts.extend((call, replace(c, per_device=True, operands=()))
                         for call, c in notes)
    return results


def run_on_mesh(ctx: EvalCtx, impl: Callable, args: tuple, dev: MeshDevices) -> Any:
    """Evaluate one Call whose operands include mesh values, by the op's mesh rule."""
    rule = mesh_rule(ctx.op)
    if rule is MeshRule.COLLECTIVE:
        raise EvaluationError(f"{type(ctx.op).__name__} is a collective: the evaluator runs "
                              f"it through its op hook, never per device")
    flat = list(dev.flatten(args))
    varying = any(dev.is_varying(a) for a in flat)
    if varying and any(dev.is_sharded(a) for a in flat):
        ctx.error("a device-varying value (from Local) meets a ShardLayout-typed value in one "
                  "op; their per-device pieces do not describe one logical value — Reshard or "
                  "keep the computation on one side")
    out_t = ctx.out_type
    mesh = next((dev.mesh_of(a) for a in flat if dev.is_sharded(a) or dev.is_varying(a)), None)
    if mesh is None:  # only the result is sharded (a lowering's question on types, D490)
        mesh = out_t.shard.mesh
    sharded_out = isinstance(out_t, TensorType) and out_t.shard is not None
    x = args[0] if args else None

    if rule is MeshRule.GLOBAL_SHAPE:
        first = dev.coords(mesh)[0]
        return impl(ctx, tuple(dev.shape_stand_in(a, first) for a in args))
    if rule is MeshRule.GATHER_REDUCED and dev.is_sharded(x):
        lay = dev.layout(x)
        rank = len(lay.layout.shape)
        red = {a % rank for a in ctx.op.axes}
        aop = lay.layout.axis_of_position
        axes = [i for i, a in enumerate(lay.attrs)
                if isinstance(a, Split) and aop[a.position] in red]
        if axes:
            args = (dev.all_gather(x, axes), *args[1:])
    if rule is MeshRule.ALIGN and sharded_out:
        args = tuple(dev.align(a, out_t.shard) for a in args)
    if rule is MeshRule.GATHER_SPLIT and dev.is_sharded(x):
        r = _gather_split(ctx, impl, args, dev)
        if r is not None:
            return r
    if rule is MeshRule.LOCAL_RESHAPE and sharded_out:
        # each device reshapes its block to its local extents (Reshape rules 1 / 2 keep the
        # C order over the local positions, D130)
        local = Reshape(tuple(out_t.shard.local_axis_extents()))
        ctx = EvalCtx(local, ctx.call, out_t, ctx.contracts, ctx.args, ctx.dims)
    local_fn = None
    if rule is MeshRule.WRITE_SPLIT and dev.is_sharded(x):
        local_fn = _write_split(ctx, args, dev)
    results = _each_device(dev, ctx, impl, args, mesh, local_fn)
    return dev.assemble(ctx.out_type, mesh, results, varying)


def _write_split(ctx: EvalCtx, args: tuple, dev: MeshDevices) -> Callable | None:
    """InsertSlice / CacheUpdate into a destination with Splits: the type rule lets a replicated
    update cover a split axis whole (D138), so each device writes its own block of it."""
    dst = args[0]
    lay = dev.layout(dst)
    upd_i = 1 if isinstance(ctx.op, InsertSlice) else 3
    splits = [(i, a.position) for i, a in enumerate(lay.attrs) if isinstance(a, Split)]
    upd = args[upd_i]
    upd_split = dev.is_sharded(upd)
    own = upd_split and all(isinstance(dev.layout(upd).attrs[i], Split) for i, _ in splits)
    if own or not splits:
        return None
    dev.slices_per_device(ctx, "a replicated update written into a split destination")
    mesh = lay.mesh

    def local_fn(local: tuple, coord: tuple) -> tuple:
        out = list(local)
        u = out[upd_i]
        for i, p in splits:
            if upd_split and isinstance(dev.layout(upd).attrs[i], Split):
                continue
            a = natural_axis(lay, p)
            blk = u.shape[a] // mesh.axis_extents[i]
            sl = [slice(None)] * u.ndim
            sl[a] = slice(coord[i] * blk, (coord[i] + 1) * blk)
            u = u[tuple(sl)]
        out[upd_i] = np.array(u, order="C")
        return tuple(out)

    return local_fn


def _gather_split(ctx: EvalCtx, impl: Callable, args: tuple, dev: MeshDevices) -> Any:
    """Gather along a Split axis: each device gathers the rows it owns and writes the sum's
    neutral element (``-0`` for floats) at the rows it does not own — a Partial(sum) result.
    None when the gathered axis is not split (an ordinary per-device Gather)."""
    x, idx = args
    lay = dev.layout(x)
    rank = len(lay.layout.shape)
    axis = ctx.op.axis % rank
    on = [(i, a) for i, a in enumerate(lay.attrs)
          if isinstance(a, Split) and lay.layout.axis_of_position[a.position] == axis]
    if not on:
        return None
    if dev.is_sharded(idx):
        idx = dev.to_global(idx)  # indices are replicated (a Split of indices fails typeinfer)
    if dev.is_varying(idx):
        ctx.error("indices vary by device (from Local); gather needs replicated indices")
    ((i, _),) = on
    n_glob = lay.layout.axis_extents[axis]
    blk = n_glob // lay.mesh.axis_extents[i]
    local_idx = dev.gather_index(ctx, idx, lay.mesh, i, n_glob, blk, axis)
    results = _each_device(dev, ctx, impl, (x, local_idx), lay.mesh)
    return dev.gather_mask(ctx, results, idx, lay.mesh, i, n_glob, blk, axis)


def _owns(iv: np.ndarray, lo: int, blk: int) -> np.ndarray:
    """Which global indices ``iv`` fall in the block ``[lo, lo + blk)``."""
    return (iv >= lo) & (iv < lo + blk)
