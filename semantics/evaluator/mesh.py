"""Mesh simulation: sharded values held as per-device local tensors.

A value whose type carries a ``ShardLayout`` is a ``Sharded``: one numpy array ``data`` of shape
``mesh.axis_extents + local_shape`` — device ``(d0, d1, ...)`` holds ``data[d0, d1, ...]``, its
local tensor (ARCHITECTURE.md, Types: local shape per layout position is ``E/m`` for a Split
position and ``E`` otherwise; the local tensor's axes are the tensor axes, each the product of
its positions' local extents, in C order over the positions).

* ``Split(p)`` on mesh axis ``i`` of extent ``m``: device coordinate ``d`` along ``i`` owns the
  contiguous block ``[d·E/m, (d+1)·E/m)`` of layout position ``p`` (cyclic when ``p`` is an inner
  position of extent ``m``).
* ``Broadcast``: every device along the axis holds the same local tensor (``unshard`` checks the
  replicas are bit-identical and raises otherwise — a replica that diverged is a program or
  backend bug, never averaged away).
* ``Partial(r)``: every device holds a piece; the logical value is ``r`` over the axis. ``unshard``
  completes it with ``reductions.reduce`` under the ``unordered_tree`` policy's reference result
  (low-precision floats accumulate in f32 and round once; ``max`` / ``min`` propagate NaN and
  order ``-0 < +0``). Several Partial mesh axes complete jointly, as one reduction over all of
  their devices.

``PerDevice`` is a plain-typed value that varies by device: what ``Local`` exposes and what
per-device computation on it produces. It has no logical global value.

``shard(x, layout)`` distributes a global array (a Partial axis puts the value on coordinate 0 and
the reduction's neutral element elsewhere: ``-0`` for a float sum, so ``-0`` survives; for
``max`` / ``min`` every device holds the value); ``Sharded.from_devices`` takes explicit per-device
pieces. Everything is vectorized: reshapes and transposes, never a loop per element.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from tilefoundry.limits import check_value_size
from tilefoundry.semantics.dtypes import to_bits
from tilefoundry.semantics.evaluator.registry import EvaluationError
from tilefoundry.semantics.formats import FORMATS, DType, dtype_of
from tilefoundry.semantics.types import Broadcast, Mesh, Partial, ShardLayout, Split

__all__ = ["PerDevice", "Sharded", "complete", "neutral_sum", "shard", "unshard"]


def _positions_plan(layout: ShardLayout) -> tuple[list[int], list[int], list[int]]:
    """Shapes for the vectorized distribution.

    Returns (expanded, mesh_dims, local_dims): ``expanded`` is the global array reshaped to one
    dim per layout position, with every Split position ``E`` written as ``(m, E/m)``;
    ``mesh_dims[i]`` is the expanded dim of mesh axis ``i``'s block index (-1 when the axis does
    not split); ``local_dims`` the remaining expanded dims, in order (the local positions)."""
    split_of = {a.position: i for i, a in enumerate(layout.attrs) if isinstance(a, Split)}
    expanded: list[int] = []
    mesh_dims = [-1] * len(layout.attrs)
    local_dims: list[int] = []
    for p, e in enumerate(layout.layout.positions):
        if p in split_of:
            m = layout.mesh.axis_extents[split_of[p]]
            mesh_dims[split_of[p]] = len(expanded)
            expanded.append(m)
            local_dims.append(len(expanded))
            expanded.append(e // m)
        else:
            local_dims.append(len(expanded))
            expanded.append(e)
    return expanded, mesh_dims, local_dims


def neutral_sum(dt: DType) -> np.ndarray:
    """The neutral element of a sum: ``-0`` for signed floats (``-0 + x == x`` for every x,
    ``-0`` included), 0 otherwise."""
    from tilefoundry.semantics.dtypes import cast

    if dt.is_float and FORMATS[dt].has_sign:
        return np.asarray(cast(np.asarray(np.float32(-0.0)), dt))
    if dt is DType.F8E8M0:
        raise EvaluationError("shard: f8e8m0 has no zero, so a Partial(sum) cannot be "
                              "distributed; build the pieces with Sharded.from_devices")
    return np.zeros((), FORMATS[dt].storage)


@dataclass(frozen=True, eq=False)
class Sharded:
    """A value with a ShardLayout: ``data[mesh coords...]`` is that device's local tensor."""

    layout: ShardLayout
    data: np.ndarray

    def __post_init__(self):
        if not isinstance(self.layout, ShardLayout):
            raise EvaluationError(f"Sharded: layout must be a ShardLayout (the parameter's "
                                  f"type.shard), got {type(self.layout).__name__}")
        want = (*self.layout.mesh.axis_extents, *self.layout.local_axis_extents())
        if not isinstance(self.data, np.ndarray) or tuple(self.data.shape) != want:
            got = getattr(self.data, "shape", type(self.data).__name__)
            raise EvaluationError(
                f"Sharded: per-device data must have shape mesh extents + local extents "
                f"{want} for {self.layout.attrs} over {self.layout.layout.shape}, got {got}")
        dtype_of(self.data)  # an IR storage dtype
        check_value_size(self.data.shape, self.data.itemsize,
                         "Sharded (per-device data, mesh axes first)")

    @staticmethod
    def from_devices(layout: ShardLayout, data: np.ndarray) -> Sharded:
        """Explicit per-device pieces, stacked with the mesh axes first."""
        return Sharded(layout, np.array(data, order="C"))

    @property
    def mesh(self) -> Mesh:
        return self.layout.mesh

    @property
    def shape(self) -> tuple[int, ...]:
        """The logical (global) shape."""
        return tuple(self.layout.layout.axis_extents)

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def local(self, coord: tuple[int, ...]) -> np.ndarray:
        return self.data[coord]

    def devices(self):
        """Mesh coordinates in C order."""
        return itertools.product(*(range(m) for m in self.mesh.axis_extents))

    def __repr__(self) -> str:
        return (f"Sharded({self.layout.attrs} over {self.layout.layout.shape} on mesh "
                f"{dict(zip(self.mesh.axis_names, self.mesh.axis_extents, strict=True))}, "
                f"dtype={self.data.dtype})")


@dataclass(frozen=True, eq=False)
class PerDevice:
    """A plain-typed value that differs by device (``Local``'s view and what is computed from
    it): ``data[mesh coords...]`` is the device's value."""

    mesh: Mesh
    data: np.ndarray

    def __post_init__(self):
        if not isinstance(self.mesh, Mesh):
            raise EvaluationError(f"PerDevice: mesh must be a Mesh, got {self.mesh!r}")
        lead = tuple(self.mesh.axis_extents)
        if not isinstance(self.data, np.ndarray) or tuple(self.data.shape[:len(lead)]) != lead:
            got = getattr(self.data, "shape", type(self.data).__name__)
            raise EvaluationError(f"PerDevice: data must be a numpy array whose leading axes "
                                  f"are the mesh extents {lead}, got {got}")
        check_value_size(self.data.shape, self.data.itemsize,
                         "PerDevice (per-device data, mesh axes first)")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape[len(self.mesh.axis_extents):])

    def local(self, coord: tuple[int, ...]) -> np.ndarray:
        return self.data[coord]

    def __repr__(self) -> str:
        return f"PerDevice(mesh={self.mesh.axis_names}, local shape={self.shape})"


def shard(x: np.ndarray, layout: ShardLayout) -> Sharded:
    """Distribute the global array ``x`` over ``layout`` (see the module docstring)."""
    if not isinstance(layout, ShardLayout):
        raise EvaluationError(f"shard: layout must be a ShardLayout, got {layout!r}")
    x = np.asarray(x)
    dt = dtype_of(x)
    shape = tuple(layout.layout.axis_extents)
    if tuple(x.shape) != shape:
        raise EvaluationError(f"shard: the array's shape {tuple(x.shape)} is not the layout's "
                              f"logical shape {shape} ({layout.layout.shape})")
    expanded, mesh_dims, local_dims = _positions_plan(layout)
    v = x.reshape(expanded)
    # put the split mesh dims first, then add size-1 dims for the non-splitting mesh axes
    split_dims = [d for d in mesh_dims if d >= 0]
    v = np.transpose(v, split_dims + local_dims)
    lead = [1] * len(mesh_dims)
    for i, d in enumerate(mesh_dims):
        if d >= 0:
            lead[i] = expanded[d]
    # reorder the split dims into mesh-axis order (they are in mesh-axis order already, as
    # split_dims follows mesh_dims); reshape to mesh extents with 1 on the other axes
    local_shape = layout.local_axis_extents()
    v = v.reshape((*lead, *local_shape))
    full = (*layout.mesh.axis_extents, *local_shape)
    data = np.array(np.broadcast_to(v, full), copy=True, order="C")
    for i, a in enumerate(layout.attrs):
        if isinstance(a, Partial) and a.reduction == "sum":
            # coordinate 0 keeps the value, every other coordinate holds the neutral element
            idx = [slice(None)] * data.ndim
            idx[i] = slice(1, None)
            data[tuple(idx)] = neutral_sum(dt)
    return Sharded(layout, data)


def _check_replicas(v: Sharded, data: np.ndarray, axes: list[int]) -> np.ndarray:
    """Take coordinate 0 of each Broadcast mesh axis after checking the replicas agree."""
    for i in sorted(axes, reverse=True):
        first = np.take(data, [0], axis=i)
        bits = to_bits(np.ascontiguousarray(data))
        fbits = to_bits(np.ascontiguousarray(first))
        if not np.array_equal(bits, np.broadcast_to(fbits, bits.shape)):
            bad = np.argwhere(bits != np.broadcast_to(fbits, bits.shape))[0]
            raise EvaluationError(
                f"unshard: mesh axis {v.mesh.axis_names[i]} is Broadcast but the devices' "
                f"replicas differ (first at per-device index {tuple(int(j) for j in bad)}); a "
                f"Broadcast value must be bit-identical on every device")
        data = np.take(data, 0, axis=i)
    return data


def complete(v: Sharded, policy: str = "unordered_tree") -> np.ndarray:
    """Complete every Partial mesh axis (jointly) with its reduction under ``policy``; the
    result keeps the mesh axes (size 1 where completed) for ``unshard``'s next step."""
    from tilefoundry.semantics.reductions import reduce

    parts = v.layout.partials
    if not parts:
        return v.data
    reds = set(parts.values())
    if len(reds) > 1:
        # distinct reductions on distinct mesh axes: complete them one axis at a time, in
        # mesh-axis order (the logical value is defined per axis; HIR Partial is per axis)
        data = v.data
        for i in sorted(parts):
            data = reduce(data, parts[i], (i,), keepdim=True, policy=policy)
        return data
    (red,) = reds
    return reduce(v.data, red, tuple(sorted(parts)), keepdim=True, policy=policy)


def unshard(v: Sharded | np.ndarray, policy: str = "unordered_tree") -> np.ndarray:
    """The logical value of a sharded value: complete Partials, check Broadcast replicas, gather
    Splits. A plain array is returned unchanged."""
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, PerDevice):
        raise EvaluationError("unshard: a PerDevice value (from Local) has no logical global "
                              "value; Reshard it through a ShardLayout-typed value instead")
    if not isinstance(v, Sharded):
        raise EvaluationError(f"unshard: expected a Sharded value or an array, got "
                              f"{type(v).__name__}")
    lay = v.layout
    data = complete(v, policy)
    bcast = [i for i, a in enumerate(lay.attrs) if isinstance(a, Broadcast)]
    # drop completed Partial axes (size 1 now) and replicated Broadcast axes
    data = _check_replicas(v, data, bcast)
    keep = [i for i, a in enumerate(lay.attrs) if not isinstance(a, Broadcast)]
    # after dropping the Broadcast axes the remaining mesh dims are `keep`, in order
    for j in reversed(range(len(keep))):
        if isinstance(lay.attrs[keep[j]], Partial):
            data = np.take(data, 0, axis=j)
    splits = [i for i in keep if isinstance(lay.attrs[i], Split)]
    # data: split mesh dims (mesh-axis order) + local axes
    expanded, mesh_dims, local_dims = _positions_plan(lay)
    local_pos = [expanded[d] for d in local_dims]
    data = data.reshape((*[lay.mesh.axis_extents[i] for i in splits], *local_pos))
    # current dims: split mesh dims then local position dims; invert the shard transpose
    order = [mesh_dims[i] for i in splits] + local_dims
    inv = np.argsort(order)
    data = np.transpose(data, inv)
    out = data.reshape(tuple(lay.layout.axis_extents))
    return np.array(out, copy=True, order="C")


def storage_of(dt: DType) -> np.dtype:
    return np.dtype(FORMATS[dt].storage)


def mesh_size(mesh: Mesh) -> int:
    return math.prod(mesh.axis_extents)
