"""The rank side of the distributed backend (split out of ``distributed_backend.py``, D431):
the per-rank values (``LocalShard`` / ``LocalVarying``), the process groups and collectives of one
torch rank (``_Comm``), resharding, the ``RankDevices`` collectives implementation of the shared
per-device driver (``mesh_driver.py``) and the rank evaluator."""

from __future__ import annotations

import itertools
import math
import os
import signal
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilefoundry.errors import (
    TilefoundryError,
)
from tilefoundry.semantics.evaluator.mesh_driver import MeshDevices
from tilefoundry.semantics.formats import DType


class DistributedRankError(TilefoundryError, RuntimeError):
    """A rank of the process group died or did not answer (``on_rank_death="raise"``)."""


# =============================================================================================
# rank-local values
# =============================================================================================
@dataclass(frozen=True, eq=False)
class LocalShard:
    """A ShardLayout-typed value on one rank: that device's local tensor only."""

    layout: Any  # ShardLayout
    block: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.layout.layout.axis_extents)


@dataclass(frozen=True, eq=False)
class LocalVarying:
    """A plain-typed, device-varying value (``Local``'s view) on one rank."""

    mesh: Any
    block: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.block.shape)


def _contig(x: Any) -> np.ndarray:
    """C-contiguous, keeping rank 0 (``np.ascontiguousarray`` makes a 0-d array 1-d)."""
    return np.asarray(x, order="C")


def _is_local_mesh(v: object) -> bool:
    if isinstance(v, tuple):
        return any(_is_local_mesh(f) for f in v)
    return isinstance(v, LocalShard | LocalVarying)


def _shape_of(v: Any) -> tuple:
    if isinstance(v, np.ndarray | LocalShard | LocalVarying):
        return tuple(v.shape)
    return ()


def coord_of(rank: int, extents: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(c) for c in np.unravel_index(rank, extents)) if extents else ()


# =============================================================================================
# collectives (in a rank)
# =============================================================================================
class _Comm:
    """This rank's view of the process group: sub-groups by (mesh extents, mesh axes)."""

    def __init__(self, rank: int, world: int, fault: tuple | None):
        self.rank, self.world = rank, world
        self.groups: dict[tuple, Any] = {}
        self.prepared: set[tuple[int, ...]] = set()
        self.fault = fault
        self.collectives = 0

    def _maybe_fault(self) -> None:
        """The first injected fault whose marker file does not exist yet is the active one; it
        fires in its rank at that rank's next collective (and creates the marker)."""
        for kind, who, marker in self.fault or ():
            if os.path.exists(marker):
                continue
            if who != self.rank:
                return
            with open(marker, "w") as f:
                f.write(f"{kind} rank {who}\n")
            if kind == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            while True:  # hang
                time.sleep(3600)

    def prepare(self, meshes: list[tuple[int, ...]]) -> None:
        """Create the sub-groups of every mesh shape of a program (every rank of the world,
        members or not, calls ``new_group`` for each, in the same order): for each non-empty
        set of mesh axes, one group per assignment of the other axes (ranks in C order of the
        axes), the whole mesh included when it is smaller than the world."""
        import torch.distributed as dist

        for extents in sorted(set(meshes)):
            if extents in self.prepared:
                continue
            self.prepared.add(extents)
            nd = len(extents)
            for k in range(1, nd + 1):
                for axes in itertools.combinations(range(nd), k):
                    if k == nd and math.prod(extents) == self.world:
                        self.groups[(extents, axes)] = None  # the whole world
                        continue
                    others = [i for i in range(nd) if i not in axes]
                    mine = None
                    for fixed in itertools.product(*(range(extents[i]) for i in others)):
                        ranks = []
                        for var in itertools.product(*(range(extents[i]) for i in axes)):
                            c = [0] * nd
                            for i, v in zip(others, fixed, strict=True):
                                c[i] = v
                            for i, v in zip(axes, var, strict=True):
                                c[i] = v
                            ranks.append(int(np.ravel_multi_index(c, extents)))
                        g = dist.new_group(ranks=ranks)
                        if self.rank in ranks:
                            mine = g
                    self.groups[(extents, axes)] = mine

    def group(self, extents: tuple[int, ...], axes: tuple[int, ...]):
        """This rank's sub-group along ``axes`` of a mesh of ``extents`` (None: the world)."""
        return self.groups[(tuple(extents), tuple(sorted(axes)))]

    # -- byte-level data movement --------------------------------------------------------------
    @staticmethod
    def _bytes(x: np.ndarray):
        import torch

        return torch.from_numpy(_contig(x).reshape(-1).view(np.uint8).copy())

    def all_gather(self, x: np.ndarray, extents, axes) -> np.ndarray:
        """Every group member's ``x`` stacked on a new leading axis (group order)."""
        import torch
        import torch.distributed as dist

        self._maybe_fault()
        self.collectives += 1
        g = self.group(extents, axes)
        n = math.prod(extents[i] for i in axes)
        src = self._bytes(x)
        out = torch.empty(n * src.numel(), dtype=torch.uint8)
        dist.all_gather_into_tensor(out, src, group=g)
        return out.numpy().view(x.dtype).reshape((n, *x.shape)).copy()

    def all_to_all(self, chunks: np.ndarray, extents, axis: int) -> np.ndarray:
        """``chunks[k]`` goes to the group member ``k``; returns what each member sent here."""
        import torch
        import torch.distributed as dist

        self._maybe_fault()
        self.collectives += 1
        g = self.group(extents, (axis,))
        src = self._bytes(chunks)
        out = torch.empty_like(src)
        dist.all_to_all_single(out, src, group=g)
        return out.numpy().view(chunks.dtype).reshape(chunks.shape).copy()

    def all_reduce(self, x: np.ndarray, red: str, extents, axes) -> np.ndarray:
        """``red`` over the group: the library's all_reduce where it reduces the dtype, else
        all_gather + the reference's reduction (composed)."""
        import torch.distributed as dist

        from tilefoundry.semantics.formats import dtype_of

        dt = dtype_of(x)
        tdt = _torch_reducible(dt)
        if tdt is None:
            from tilefoundry.semantics.reductions import reduce

            stacked = self.all_gather(x, extents, axes)
            return _contig(reduce(stacked, red, (0,), keepdim=False,
                                               policy="unordered_tree"))
        self._maybe_fault()
        self.collectives += 1
        g = self.group(extents, axes)
        t = _to_torch(x, dt)
        op = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[red]
        dist.all_reduce(t, op=op, group=g)
        return _from_torch(t, x)


def _torch_reducible(dt: DType):
    """The torch dtype gloo reduces for ``dt`` (None: compose the reduction)."""
    import torch

    return {DType.F32: torch.float32, DType.F16: torch.float16, DType.BF16: torch.bfloat16,
            DType.I8: torch.int8, DType.I32: torch.int32, DType.I64: torch.int64}.get(dt)


def _to_torch(x: np.ndarray, dt: DType):
    import torch

    x = _contig(x).copy()
    if dt in (DType.BF16, DType.F16):
        t = torch.from_numpy(x.view(np.int16))
        return t.view(torch.bfloat16 if dt is DType.BF16 else torch.float16)
    return torch.from_numpy(x)


def _from_torch(t, like: np.ndarray) -> np.ndarray:
    import torch

    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().view(like.dtype).reshape(like.shape).copy()
    return t.numpy().reshape(like.shape).copy()


# =============================================================================================
# Reshard on ranks
# =============================================================================================
def _positions_local(lay) -> list[int]:
    sp = lay.split_positions
    return [e // sp[p] if p in sp else e for p, e in enumerate(lay.layout.positions)]


def _complete(comm: _Comm, v: LocalShard) -> tuple[Any, np.ndarray]:
    """Complete every Partial axis (all_reduce); returns (layout with Broadcast there, block)."""
    from tilefoundry.semantics.types import Broadcast, ShardLayout

    lay = v.layout
    parts = lay.partials
    block = v.block
    ext = tuple(lay.mesh.axis_extents)
    if parts:
        reds = set(parts.values())
        if len(reds) == 1:
            block = comm.all_reduce(block, next(iter(reds)), ext, tuple(sorted(parts)))
        else:  # one axis at a time, in mesh-axis order (as the reference completes them)
            for i in sorted(parts):
                block = comm.all_reduce(block, parts[i], ext, (i,))
        attrs = tuple(Broadcast() if i in parts else a for i, a in enumerate(lay.attrs))
        lay = ShardLayout(lay.mesh, attrs, lay.layout)
    return lay, block


def _gather_axes(comm: _Comm, lay, block: np.ndarray, axes: list[int]) -> tuple[Any, np.ndarray]:
    """All-gather the Split position of each mesh axis in ``axes`` (Split -> Broadcast)."""
    from tilefoundry.semantics.types import Broadcast, ShardLayout

    ext = tuple(lay.mesh.axis_extents)
    loc = _positions_local(lay)
    data = block.reshape(loc)
    attrs = list(lay.attrs)
    for i in axes:
        p = attrs[i].position
        got = comm.all_gather(data, ext, (i,))  # (m, *loc)
        data = np.concatenate(list(got), axis=p)
        attrs[i] = Broadcast()
    out = ShardLayout(lay.mesh, tuple(attrs), lay.layout)
    return out, _contig(data).reshape(out.local_axis_extents())


def _to_global(comm: _Comm, v: LocalShard) -> np.ndarray:
    from tilefoundry.semantics.types import Split

    lay, block = _complete(comm, v)
    splits = [i for i, a in enumerate(lay.attrs) if isinstance(a, Split)]
    lay, block = _gather_axes(comm, lay, block, splits)
    return _contig(block).reshape(tuple(lay.layout.axis_extents))


def _slice_global(x: np.ndarray, target, coord: tuple) -> np.ndarray:
    """Broadcast -> target: this device's block of a replicated value (a local slice)."""
    from tilefoundry.semantics.evaluator.mesh import shard

    return _contig(shard(x, target).data[coord])


def _try_all_to_all(comm: _Comm, lay, block: np.ndarray, target) -> np.ndarray | None:
    """Split(p) -> Split(q) on one mesh axis, the rest unchanged and no Partial: all_to_all."""
    from tilefoundry.semantics.types import Split

    if lay.layout.shape != target.layout.shape or lay.partials or target.partials:
        return None
    diff = [i for i, (a, b) in enumerate(zip(lay.attrs, target.attrs, strict=True)) if a != b]
    if len(diff) != 1:
        return None
    (i,) = diff
    a, b = lay.attrs[i], target.attrs[i]
    if not (isinstance(a, Split) and isinstance(b, Split)):
        return None
    p, q = a.position, b.position
    if q in lay.split_positions or p in target.split_positions:
        return None
    m = lay.mesh.axis_extents[i]
    loc = _positions_local(lay)
    data = block.reshape(loc)
    # chunk k of position q goes to member k
    shp = list(data.shape)
    chunks = data.reshape((*shp[:q], m, shp[q] // m, *shp[q + 1:]))
    chunks = _contig(np.moveaxis(chunks, q, 0))
    got = comm.all_to_all(chunks, tuple(lay.mesh.axis_extents), i)  # got[k]: member k's p-block
    merged = np.concatenate(list(got), axis=p)
    return _contig(merged).reshape(target.local_axis_extents())


def reshard_local(comm: _Comm, x: Any, target: Any, coord: tuple) -> Any:
    from tilefoundry.semantics.types import ShardLayout

    if isinstance(x, LocalShard):
        if isinstance(target, ShardLayout):
            lay, block = _complete(comm, x)
            fast = _try_all_to_all(comm, lay, block, target)
            if fast is not None:
                return LocalShard(target, fast)
            if lay.layout.shape == target.layout.shape and lay.attrs == target.attrs:
                return LocalShard(target, block)
            return LocalShard(target, _slice_global(_to_global(comm, LocalShard(lay, block)),
                                                    target, coord))
        return _to_global(comm, x)
    x = np.asarray(x)
    if isinstance(target, ShardLayout):
        return LocalShard(target, _slice_global(x, target, coord))
    return np.array(x, copy=True, order="C")


# =============================================================================================
# the per-rank evaluator
# =============================================================================================
class RankDevices(MeshDevices):
    """The collectives of one ``torch.distributed`` rank (``mesh_driver.MeshDevices``): the rank
    computes its own device; values are ``LocalShard`` / ``LocalVarying``; all-gathers run in
    the rank's process group along the mesh axes (``_Comm``)."""

    def __init__(self, comm: _Comm, coord_for):
        self.comm = comm
        self.coord_for = coord_for

    def is_sharded(self, v: object) -> bool:
        return isinstance(v, LocalShard)

    def is_varying(self, v: object) -> bool:
        return isinstance(v, LocalVarying)

    def layout(self, v: LocalShard):
        return v.layout

    def mesh_of(self, v: LocalShard | LocalVarying):
        return v.layout.mesh if isinstance(v, LocalShard) else v.mesh

    def coords(self, mesh) -> list[tuple[int, ...]]:
        return [self.coord_for(mesh)]

    def block(self, v: LocalShard | LocalVarying, coord: tuple[int, ...]) -> np.ndarray:
        return np.array(v.block, order="C")

    def assemble(self, t, mesh, results: list, varying: bool) -> Any:
        (r,) = results
        return _wrap(t, r, mesh, varying)

    def all_gather(self, v: LocalShard, axes: list[int]) -> LocalShard:
        out, block = _gather_axes(self.comm, v.layout, v.block, axes)
        return LocalShard(out, block)

    def to_global(self, v: LocalShard) -> np.ndarray:
        return _to_global(self.comm, v)

    def align(self, v: Any, out) -> LocalShard:
        return LocalShard(out, _align(v, out, self.coord_for(out.mesh)))


def _rank_evaluator_class():
    from tilefoundry.semantics.evaluator.core import Evaluator, op_hook
    from tilefoundry.semantics.evaluator.mesh_driver import run_on_mesh
    from tilefoundry.semantics.ops.sharding import Local, Reshard

    class RankEvaluator(Evaluator):
        """The reference evaluator on one rank's local data: the per-device driver with this
        rank's collectives (``RankDevices``); Reshard and Local are the rank's own."""

        def __init__(self, session, comm: _Comm, extents_to_coord):
            super().__init__(session)
            self.comm = comm
            self.coord_for = extents_to_coord
            self.devices = RankDevices(comm, extents_to_coord)

        def shape_of(self, v: Any) -> tuple:
            return _shape_of(v)

        def is_mesh_value(self, v: Any) -> bool:
            return _is_local_mesh(v)

        def check_result_size(self, node, env) -> None:
            pass  # the driver's reference run checked the global sizes already

        def on_mesh(self, ctx, impl, args):
            return run_on_mesh(ctx, impl, args, self.devices)

        @op_hook(Reshard)
        def reshard(self, ctx, args):
            from tilefoundry.semantics.types import ShardLayout, TensorType

            (x,) = args
            if isinstance(x, LocalVarying):
                ctx.error("x is a device-varying value (computed from Local), which has no "
                          "logical value to redistribute")
            target = ctx.out_type.layout if isinstance(ctx.out_type, TensorType) else None
            mesh = target.mesh if isinstance(target, ShardLayout) else \
                (x.layout.mesh if isinstance(x, LocalShard) else None)
            coord = self.coord_for(mesh) if mesh is not None else ()
            return reshard_local(self.comm, x, target, coord)

        @op_hook(Local)
        def local(self, ctx, args):
            (x,) = args
            if not isinstance(x, LocalShard):
                ctx.error(f"x is not a sharded value (got {type(x).__name__}); Local exposes "
                          f"the local view of a ShardLayout-typed value")
            if x.layout.is_fully_broadcast:
                return np.array(x.block, copy=True, order="C")
            return LocalVarying(x.layout.mesh, np.array(x.block, copy=True, order="C"))

    return RankEvaluator


def _wrap(t, r, mesh, varying: bool):
    from tilefoundry.semantics.types import TensorType, TupleType

    if isinstance(t, TupleType):
        return tuple(_wrap(ft, ri, mesh, varying) for ft, ri in zip(t.fields, r, strict=True))
    if isinstance(t, TensorType) and t.shard is not None:
        return LocalShard(t.shard, _contig(r))
    if varying:
        return LocalVarying(mesh, _contig(r))
    # a plain result from sharded operands is replicated by the type rules; the replicas of
    # the program's outputs are checked by the driver
    return np.array(r, order="C")


def _align(v: Any, out, coord: tuple) -> np.ndarray:
    """This device's block of an elementwise operand read through the result layout ``out``
    (the rank-local version of ``sharding.align``)."""
    from tilefoundry.semantics.evaluator.mesh import shard
    from tilefoundry.semantics.evaluator.registry import EvaluationError
    from tilefoundry.semantics.evaluator.sharding import replicated
    from tilefoundry.semantics.types import Broadcast, Partial, Split

    if isinstance(v, np.ndarray):
        full = np.broadcast_to(v, tuple(out.layout.axis_extents))
        return _contig(shard(np.array(full, order="C"), replicated(out)).data[coord])
    if not isinstance(v, LocalShard):
        raise EvaluationError(f"cannot combine a {type(v).__name__} value with a sharded one")
    if v.layout.mesh != out.mesh:
        raise EvaluationError(f"operands live on different meshes ({v.layout.mesh} vs "
                              f"{out.mesh})")
    mine = v.layout.split_positions
    if mine and v.layout.layout.shape != out.layout.shape:
        raise EvaluationError(f"a sharded operand's layout {v.layout.layout.shape} does not "
                              f"refine like the result's {out.layout.shape}")
    loc = [e // mine[p] if p in mine else e for p, e in enumerate(out.layout.positions)]
    data = v.block.reshape(loc)
    for i, (a, b) in enumerate(zip(v.layout.attrs, out.attrs, strict=True)):
        if isinstance(b, Split) and isinstance(a, Broadcast):
            p, m = b.position, out.mesh.axis_extents[i]
            blk = data.shape[p] // m
            sl = [slice(None)] * data.ndim
            sl[p] = slice(coord[i] * blk, (coord[i] + 1) * blk)
            data = data[tuple(sl)]
        elif a != b:
            if not (isinstance(b, Partial) and isinstance(a, Broadcast | Partial)):
                raise EvaluationError(f"an operand's {a} on mesh axis {out.mesh.axis_names[i]} "
                                      f"cannot be read through the result's {b}")
    return _contig(data).reshape(out.local_axis_extents())


# =============================================================================================
# the rank process
# =============================================================================================
