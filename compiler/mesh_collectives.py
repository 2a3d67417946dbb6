"""The collective steps of a ``MeshProgram`` simulated on the devices' stacked values
(``run_collective``) and ``Reshard`` planned as collective steps (``plan_reshard``, the spec's
table: complete the Partials, then one all_to_all or all-gathers and a local slice)."""

from __future__ import annotations

import math

import numpy as np

from tilefoundry.compiler.errors import KernelIRError
from tilefoundry.compiler.mesh_ir import Collective, Slot
from tilefoundry.errors import RunTimeCheckError
from tilefoundry.semantics.types import (
    Broadcast,
    ShardLayout,
    Split,
)

__all__ = ["all_to_all", "plan_reshard", "replica", "run_collective"]

# =============================================================================================
# the collectives, simulated on the devices' stacked values
# =============================================================================================
def _sharded(slot: Slot, data: np.ndarray):
    from tilefoundry.semantics.evaluator.mesh import Sharded

    return Sharded(slot.layout, np.ascontiguousarray(data))


def _global(slot: Slot, data: np.ndarray, mesh_rank: int) -> np.ndarray:
    """The logical value of a slot with no Partial (replicas checked)."""
    from tilefoundry.semantics.evaluator.mesh import unshard

    if slot.layout is None:
        return replica(slot, data, mesh_rank)
    return unshard(_sharded(slot, data))


def replica(slot: Slot, data: np.ndarray, mesh_rank: int) -> np.ndarray:
    from tilefoundry.semantics.dtypes import to_bits

    n = math.prod(data.shape[:mesh_rank])
    flat = data.reshape((n, *data.shape[mesh_rank:]))
    bits = to_bits(np.ascontiguousarray(flat))
    if not (bits == bits[:1]).all():
        bad = int(np.argwhere((bits != bits[:1]).reshape(len(bits), -1).any(axis=1))[0][0])
        raise KernelIRError(f"slot {slot.name}: device {bad}'s replica differs from device "
                            f"0's; a replicated value must be bit-identical on every device")
    return np.array(flat[0], order="C")


def all_to_all(src: Slot, dst: Slot, data: np.ndarray, i: int) -> np.ndarray:
    """The devices' values after an all-to-all on mesh axis ``i`` (Split(p) -> Split(q)); pure
    data movement (the translation validator runs it on position arrays, D534)."""
    lay = src.layout
    nm = len(lay.mesh.axis_extents)
    m = lay.mesh.axis_extents[i]
    p, q = lay.attrs[i].position, dst.layout.attrs[i].position
    sp = lay.split_positions
    loc = [e // sp[k] if k in sp else e for k, e in enumerate(lay.layout.positions)]
    x = np.moveaxis(data.reshape((*lay.mesh.axis_extents, *loc)), i, 0)  # (c, rest.., loc..)
    o = nm  # first position dim
    shp = list(x.shape)
    y = x.reshape((*shp[:o + q], m, shp[o + q] // m, *shp[o + q + 1:]))  # chunk k of q
    # y[c, .., k, j, ..]: device c's chunk k; device k gets it as block c of position p
    z = np.moveaxis(np.swapaxes(y, 0, o + q), o + q, o + p)
    zs = list(z.shape)
    z = z.reshape((*zs[:o + p], zs[o + p] * zs[o + p + 1], *zs[o + p + 2:]))
    z = np.moveaxis(z, 0, i)
    return np.ascontiguousarray(z).reshape((*lay.mesh.axis_extents,
                                            *dst.layout.local_axis_extents()))


def run_collective(c: Collective, slots: dict[str, Slot], values: dict[str, np.ndarray],
                   mesh) -> np.ndarray:
    """The devices' values of ``c.dst`` (shape mesh extents + the slot's shape)."""
    from tilefoundry.semantics.evaluator.mesh import Sharded, complete, shard
    from tilefoundry.semantics.evaluator.sharding import align, gather_positions

    ext = tuple(mesh.axis_extents)
    nm = len(ext)
    src, dst = slots[c.srcs[0]], slots[c.dst]
    data = values[c.srcs[0]]
    full = (*ext, *dst.shape)
    if c.kind == "all_reduce":
        red = _sharded(src, data)
        if set(c.axes) != set(src.layout.partials):  # only some Partial axes: complete those
            attrs = tuple(a if i in c.axes else Broadcast()
                          for i, a in enumerate(src.layout.attrs))
            red = Sharded(ShardLayout(src.layout.mesh, attrs, src.layout.layout), red.data)
        return np.ascontiguousarray(np.broadcast_to(complete(red), full))
    if c.kind == "all_gather":
        return gather_positions(_sharded(src, data), list(c.axes)).data
    if c.kind == "all_to_all":
        return all_to_all(src, dst, data, c.axes[0])
    if c.kind == "slice":
        return shard(_global(src, data, nm), dst.layout).data
    if c.kind == "replicate":
        return np.ascontiguousarray(np.broadcast_to(replica(src, data, nm), full))
    if c.kind == "align":
        (out_attrs,) = c.attrs
        out = ShardLayout(dst.layout.mesh, out_attrs, dst.layout.layout)
        v = _sharded(src, data) if src.layout is not None else replica(src, data, nm)
        return align(v, out)
    if c.kind == "gather_index":
        (n_glob, blk, axis) = c.attrs
        iv = replica(src, data, nm).astype(np.int64)
        bad = (iv < 0) | (iv >= n_glob)
        if bad.any():
            pos = tuple(int(j) for j in np.argwhere(bad)[0])
            raise RunTimeCheckError(f"Gather: index {int(iv[pos])} at indices{list(pos)} is "
                                    f"outside [0, {n_glob}) on axis {axis}", "index_range")
        (i,) = c.axes
        lo = (np.arange(ext[i]) * blk).reshape((*([1] * i), ext[i], *([1] * (nm - i - 1)),
                                                *([1] * iv.ndim)))
        own = (iv >= lo) & (iv < lo + blk)
        li = np.where(own, iv - lo, 0).astype(data.dtype)
        return np.ascontiguousarray(np.broadcast_to(li, full))
    if c.kind == "gather_mask":
        from tilefoundry.semantics.evaluator.mesh import neutral_sum
        from tilefoundry.semantics.formats import dtype_of

        (n_glob, blk, axis) = c.attrs
        iv = replica(slots[c.srcs[1]], values[c.srcs[1]], nm).astype(np.int64)
        (i,) = c.axes
        lo = (np.arange(ext[i]) * blk).reshape((*([1] * i), ext[i], *([1] * (nm - i - 1)),
                                                *([1] * iv.ndim)))
        own = (iv >= lo) & (iv < lo + blk)  # mesh dims + index dims
        rank = data.ndim - nm
        own = own.reshape((*own.shape[:nm], *([1] * axis), *own.shape[nm:],
                           *([1] * (rank - axis - iv.ndim))))
        return np.ascontiguousarray(np.where(own, data, neutral_sum(dtype_of(data)))
                                    .astype(data.dtype))
    raise KernelIRError(f"unknown collective kind {c.kind!r}")


# =============================================================================================
# Reshard as collectives
# =============================================================================================
def plan_reshard(src: ShardLayout | None, dst: ShardLayout | None
                 ) -> list[tuple[str, tuple[int, ...], ShardLayout | None]]:
    """The collective steps of ``Reshard`` from ``src`` to ``dst`` (None: a plain value), each
    ``(kind, mesh axes, layout after the step)``."""
    steps: list[tuple[str, tuple[int, ...], ShardLayout | None]] = []
    if src is None:
        if dst is not None:
            steps.append(("slice", (), dst))
        return steps
    lay = src
    parts = lay.partials
    if parts:
        attrs = tuple(Broadcast() if i in parts else a for i, a in enumerate(lay.attrs))
        reds = sorted(set(parts.values()))
        if len(reds) == 1:
            lay = ShardLayout(lay.mesh, attrs, lay.layout)
            steps.append(("all_reduce", tuple(sorted(parts)), lay))
        else:  # distinct reductions: one axis at a time, in mesh-axis order
            for i in sorted(parts):
                a2 = tuple(Broadcast() if j == i else a for j, a in enumerate(lay.attrs))
                lay = ShardLayout(lay.mesh, a2, lay.layout)
                steps.append(("all_reduce", (i,), lay))
    if dst is not None and lay.layout.shape == dst.layout.shape and lay.attrs == dst.attrs:
        return steps
    if dst is not None and _is_all_to_all(lay, dst):
        i = next(k for k, (a, b) in enumerate(zip(lay.attrs, dst.attrs, strict=True)) if a != b)
        steps.append(("all_to_all", (i,), dst))
        return steps
    same = dst is not None and lay.layout.shape == dst.layout.shape
    gather = tuple(i for i, a in enumerate(lay.attrs) if isinstance(a, Split) and
                   not (same and dst.attrs[i] == a))
    if gather:
        attrs = tuple(Broadcast() if i in gather else a for i, a in enumerate(lay.attrs))
        lay = ShardLayout(lay.mesh, attrs, lay.layout)
        steps.append(("all_gather", gather, lay))
    if dst is None:
        steps.append(("replicate", (), None))
    elif not (lay.layout.shape == dst.layout.shape and lay.attrs == dst.attrs):
        steps.append(("slice", (), dst))
    return steps


def _is_all_to_all(lay: ShardLayout, dst: ShardLayout) -> bool:
    if lay.layout.shape != dst.layout.shape or lay.partials or dst.partials or \
            lay.mesh != dst.mesh:
        return False
    diff = [i for i, (a, b) in enumerate(zip(lay.attrs, dst.attrs, strict=True)) if a != b]
    if len(diff) != 1:
        return False
    a, b = lay.attrs[diff[0]], dst.attrs[diff[0]]
    if not (isinstance(a, Split) and isinstance(b, Split)):
        return False
    return b.position not in lay.split_positions and a.position not in dst.split_positions

