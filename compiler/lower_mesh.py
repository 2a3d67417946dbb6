"""The per-device lowering of sharded programs: a ``MeshProgram`` of device launches and
explicit collective steps, run by ``kernel-interp`` and ``simd`` with the collectives simulated
on the host.
Over 800 lines: not split yet — its per-op planning is to move onto the shared mesh driver
and planner (issue 36 item 1, D430), after which what remains is split by concern.

A program whose values carry ShardLayouts is elaborated keeping the layouts
(``elaborate(..., keep_shard=True)``), canonicalized, then partitioned (``lower_mesh``):

* every op that the mesh simulation runs per device (``semantics/evaluator/sharding.py``) becomes
  a **local** op on the device's local shape (``local_type``: split extents divided by the mesh
  axis, ``Local`` exposing the local tensor); a ``Reshape`` of a sharded value reshapes to the
  local extents. Maximal runs of local ops are one ``DeviceLaunch``: an ordinary single-device
  kernel-IR ``Program`` (lowered, fused, rendered and built by the target's pipeline), compiled
  once — every device has the same local shapes — and launched once per device on that device's
  storage;
* the steps that cross devices are ``Collective`` steps between launches, on the values of all
  devices at once (the mesh's devices in C order):

  ==============  =====================================================================
  kind            does
  ==============  =====================================================================
  all_reduce      Partial(r) on ``axes`` -> Broadcast: the devices' pieces reduced with
                  ``r`` (several Partial axes of one reduction jointly, distinct reductions
                  one axis at a time in mesh-axis order), in the reference's order
                  (``unordered_tree``: low-precision floats accumulate in f32 and round
                  once; a float sum is an ``admitted_set`` contract, max / min are exact)
  all_gather      Split -> Broadcast on ``axes`` (the blocks concatenated in device order)
  all_to_all      Split(p) -> Split(q) on one mesh axis ``axes[0]``: chunk k of position q
                  goes to device k, who concatenates what it gets along p in device order
  slice           Broadcast -> Split / Partial (or a plain, replicated value -> any
                  layout): each device keeps its own block (a Partial(sum) target keeps
                  the value on coordinate 0 and the sum's neutral element, ``-0`` for
                  floats, elsewhere; Partial(max / min) keeps it everywhere)
  replicate       a fully Broadcast value -> the plain value (the replicas are checked to
                  be bit-identical)
  align           an elementwise operand read through the result layout (a replicated
                  operand's own block; ``sharding.align``)
  gather_index    Gather on a split axis: each device's local indices (the global ones
                  checked against the global extent: ``index_range``)
  gather_mask     ... and the sum's neutral element at the rows the device does not own
                  (the result is Partial(sum))
  ==============  =====================================================================

  ``Reshard`` is planned as the spec's table composes it (``plan_reshard``): complete the
  Partials (all_reduce), then either one all_to_all (Split -> Split on another position, the
  rest unchanged) or all_gather of the Splits that change followed by a local slice.
* The cross-CTA fence the spec requires where a reshard changes ownership is a **kernel
  boundary**: a collective is never inside a launch, so every program instance (CTA) of the
  producing launch has finished — its stores visible — before the collective reads, and the
  consuming launch starts after it (docs/decisions.md D256).

A ``grid_region`` is one local op of its launch when its body needs no collective: kept as it is
when all its values are plain, rebuilt on the local types when it carries sharded values. One
whose body needs a collective (a ``Reshard``, ``Local``, a reduction over a split axis, an
operand read through another layout, a gather from / a write into a split value) is a
**host loop** (``MeshLoop``): the body partitioned as the program is (its own launches,
collectives and nested loops), run on the host for ``range(start, stop, step)``; every
iteration binds the induction variable (a replicated rank-0 slot) and the carried slots on every
device, the yields become the next iteration's carried values, and the carried slots after the
last iteration (the inits for a zero-trip loop) are the loop's value (D259). The iterations
count against ``max_loop_iterations`` as the reference's do (``LimitError``).

Run-time checks of a launch are made by its executable on every device; the collectives make
their own (``gather_index``). The simulation runs every device's launch in one process, one
device after the other; nothing falls back to the reference evaluator except the reductions of
``all_reduce`` and the data movement of ``slice`` / ``align``, which are the mesh simulation's
own vectorized functions (the semantics of those steps, not a computation of the program).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilefoundry.compiler.errors import KernelIRError, NotSupportedError
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.errors import RunTimeCheckError
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GridRegionExpr,
    Module,
    Tuple,
    TupleGetItem,
    Var,
    loop_children,
    operands,
    postorder,
    reachable,
)
from tilefoundry.semantics.types import (
    Broadcast,
    ShardLayout,
    Split,
    TensorType,
    TupleType,
)

__all__ = ["COLLECTIVE_KINDS", "Collective", "DeviceLaunch", "MeshCompiled", "MeshLoop",
           "MeshProgram", "Slot", "compile_mesh", "has_mesh", "lower_mesh", "mesh_text",
           "plan_reshard", "run_collective", "run_steps", "verify_mesh"]

_STAGE = "the per-device lowering of sharded programs"

COLLECTIVE_KINDS = ("all_reduce", "all_gather", "all_to_all", "slice", "replicate", "align",
                    "gather_index", "gather_mask")


# =============================================================================================
# the IR
# =============================================================================================
@dataclass(frozen=True)
class Slot:
    """A per-device value: every device holds a ``shape`` / ``dtype`` tensor (its local
    tensor). ``layout``: the ShardLayout it is a piece of (None: plain — replicated, or
    device-varying when ``varying``)."""

    name: str
    dtype: Any  # DType
    shape: tuple[int, ...]
    layout: ShardLayout | None = None
    varying: bool = False


@dataclass(frozen=True)
class DeviceLaunch:
    """A single-device kernel-IR program run on every device: its inputs are the devices'
    values of the slots ``inputs``, its outputs become ``outputs``."""

    name: str
    program: Any  # kir.Program
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class Collective:
    """A host step across the devices (``COLLECTIVE_KINDS``): reads the slots ``srcs``, writes
    ``dst``. ``axes``: the mesh axes it runs over; ``attrs``: the kind's parameters."""

    kind: str
    srcs: tuple[str, ...]
    dst: str
    axes: tuple[int, ...] = ()
    attrs: tuple = ()


@dataclass(frozen=True)
class MeshLoop:
    """A host loop ``for i in range(start, stop, step)`` around ``body`` (launches, collectives,
    nested loops) on every device: ``carried`` slots take ``inits`` before the first iteration
    and ``yields`` after each (all yields read first); ``var`` (a replicated rank-0 integer slot)
    holds ``i``. The loop's value is the carried slots after it; the slots the body writes are
    its own (not readable after the loop: a zero-trip loop never writes them)."""

    name: str
    var: str
    start: int
    stop: int
    step: int
    carried: tuple[str, ...]
    inits: tuple[str, ...]
    body: tuple
    yields: tuple[str, ...]

    @property
    def trips(self) -> int:
        return len(range(self.start, self.stop, self.step))


def _walk(steps: Sequence) -> list:
    """Every step, nested loops' bodies included, in program order (a loop before its body)."""
    out: list = []
    for s in steps:
        out.append(s)
        if isinstance(s, MeshLoop):
            out += _walk(s.body)
    return out


@dataclass(frozen=True)
class MeshProgram:
    name: str
    mesh: Any  # Mesh
    slots: tuple[Slot, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    steps: tuple
    tuple_output: bool = False

    def slot_map(self) -> dict[str, Slot]:
        return {s.name: s for s in self.slots}

    def launches(self) -> list[DeviceLaunch]:
        """Every launch, those in loop bodies included, in program order."""
        return [s for s in _walk(self.steps) if isinstance(s, DeviceLaunch)]

    def collectives(self) -> list[Collective]:
        """Every collective step, those in loop bodies included, in program order."""
        return [s for s in _walk(self.steps) if isinstance(s, Collective)]

    def loops(self) -> list[MeshLoop]:
        return [s for s in _walk(self.steps) if isinstance(s, MeshLoop)]


def verify_mesh(mp: MeshProgram) -> None:
    """Every slot written before it is read, every output written, every collective's layouts
    consistent with its kind, every loop's carried / init / yield slots alike and its body's
    slots read only inside it; raises ``KernelIRError``."""
    where = f"mesh program {mp.name}"
    sm = mp.slot_map()
    if len(sm) != len(mp.slots):
        raise KernelIRError(f"{where}: a slot is declared twice")
    for n in (*mp.inputs, *mp.outputs):
        if n not in sm:
            raise KernelIRError(f"{where}: slot {n} is not declared")
    ready = _verify_steps(mp.steps, set(mp.inputs), sm, where)
    for n in mp.outputs:
        if n not in ready:
            raise KernelIRError(f"{where}: output {n} is never written")


def _verify_steps(steps: Sequence, ready: set[str], sm: dict[str, Slot], where: str) -> set[str]:
    """The steps checked in order from the slots ``ready``; returns the slots ready after."""
    from tilefoundry.compiler.kir import verify

    ready = set(ready)
    for s in steps:
        if isinstance(s, MeshLoop):
            for n in (*s.inits, s.var, *s.carried, *s.yields):
                if n not in sm:
                    raise KernelIRError(f"{where}: loop {s.name} names slot {n}, which is "
                                        f"not declared")
            for n in s.inits:
                if n not in ready:
                    raise KernelIRError(f"{where}: loop {s.name} reads slot {n} before any "
                                        f"step writes it")
            if not (len(s.carried) == len(s.inits) == len(s.yields)):
                raise KernelIRError(f"{where}: loop {s.name} has {len(s.carried)} carried "
                                    f"slots, {len(s.inits)} inits and {len(s.yields)} yields")
            if s.step < 1 or s.start < 0 or s.stop < 0:
                raise KernelIRError(f"{where}: loop {s.name} over range({s.start}, {s.stop}, "
                                    f"{s.step}) (start and stop must be non-negative, step "
                                    f"positive)")
            v = sm[s.var]
            if v.shape != () or v.layout is not None or v.varying or not v.dtype.is_int:
                raise KernelIRError(f"{where}: loop {s.name}'s induction slot {v.name} is not "
                                    f"a replicated rank-0 integer")
            for c, i, y in zip(s.carried, s.inits, s.yields, strict=True):
                sc, si, sy = sm[c], sm[i], sm[y]
                for other in (si, sy):
                    if (other.dtype, other.shape, other.layout) != (sc.dtype, sc.shape,
                                                                   sc.layout) or \
                            (other.varying and not sc.varying):
                        raise KernelIRError(f"{where}: loop {s.name} carries {_slot_text(sc)} "
                                            f"from {_slot_text(other)}")
            inner = _verify_steps(s.body, ready | {s.var, *s.carried}, sm, where)
            for n in s.yields:
                if n not in inner:
                    raise KernelIRError(f"{where}: loop {s.name} yields slot {n}, which its "
                                        f"body never writes")
            ready |= set(s.carried)  # the body's own slots stay inside it
            continue
        reads = s.inputs if isinstance(s, DeviceLaunch) else s.srcs
        writes = s.outputs if isinstance(s, DeviceLaunch) else (s.dst,)
        for n in (*reads, *writes):
            if n not in sm:
                raise KernelIRError(f"{where}: {_step_name(s)} names slot {n}, which is not "
                                    f"declared")
        for n in reads:
            if n not in ready:
                raise KernelIRError(f"{where}: {_step_name(s)} reads slot {n} before any "
                                    f"step writes it")
        if isinstance(s, DeviceLaunch):
            verify(s.program)
            if len(s.program.inputs) != len(s.inputs):
                raise KernelIRError(f"{where}: launch {s.name} takes "
                                    f"{len(s.program.inputs)} inputs, given {len(s.inputs)}")
        else:
            _verify_collective(s, sm, where)
        ready |= set(writes)
    return ready


def _verify_collective(s: Collective, sm: dict[str, Slot], where: str) -> None:
    if s.kind not in COLLECTIVE_KINDS:
        raise KernelIRError(f"{where}: unknown collective kind {s.kind!r}")
    src, dst = sm[s.srcs[0]], sm[s.dst]
    if s.kind == "all_reduce" and (src.layout is None or
                                   not set(s.axes) <= set(src.layout.partials)):
        raise KernelIRError(f"{where}: all_reduce over {s.axes} of {src.name}, whose "
                            f"Partial axes are "
                            f"{sorted(src.layout.partials) if src.layout else []}")
    if s.kind in ("all_gather", "all_to_all") and (
            src.layout is None or
            not all(isinstance(src.layout.attrs[i], Split) for i in s.axes)):
        raise KernelIRError(f"{where}: {s.kind} over {s.axes} of {src.name}, which "
                            f"is not Split there")
    if s.kind == "slice" and src.layout is not None and dst.layout is not None:
        for i, (a, b) in enumerate(zip(src.layout.attrs, dst.layout.attrs, strict=True)):
            if a != b and not isinstance(a, Broadcast):
                raise KernelIRError(f"{where}: slice of {src.name} changes mesh axis "
                                    f"{i} from {a} (a local slice starts from "
                                    f"Broadcast)")
    if s.kind == "replicate" and (src.layout is None or not src.layout.is_fully_broadcast):
        raise KernelIRError(f"{where}: replicate of {src.name}, which is not fully "
                            f"Broadcast")


def _step_name(s: Any) -> str:
    if isinstance(s, MeshLoop):
        return f"loop {s.name}"
    return f"launch {s.name}" if isinstance(s, DeviceLaunch) else f"collective {s.kind} -> {s.dst}"


def _slot_text(s: Slot) -> str:
    lay = f" {s.layout.attrs}" if s.layout is not None else (" varying" if s.varying else
                                                              " replicated")
    return f"{s.name}: {s.dtype.value}{list(s.shape)}{lay}"


def mesh_text(mp: MeshProgram) -> str:
    """The mesh program as text: slots, then steps (each launch's kernel IR indented, each
    loop's body indented under its header)."""
    ext = dict(zip(mp.mesh.axis_names, mp.mesh.axis_extents, strict=True))
    lines = [f"mesh program {mp.name} on mesh {ext} ({', '.join(mp.inputs)}) -> "
             f"({', '.join(mp.outputs)})"]
    lines += ["  slot " + _slot_text(s) for s in mp.slots]
    _steps_text(mp.steps, "  ", lines)
    return "\n".join(lines) + "\n"


def _steps_text(steps: Sequence, ind: str, lines: list[str]) -> None:
    from tilefoundry.compiler.kir import to_text

    for s in steps:
        if isinstance(s, DeviceLaunch):
            lines.append(f"{ind}launch {s.name} on every device ({', '.join(s.inputs)}) -> "
                         f"({', '.join(s.outputs)})")
            lines += [ind + "  " + ln for ln in to_text(s.program).splitlines()]
        elif isinstance(s, MeshLoop):
            carry = ", ".join(f"{c} = {i}" for c, i in zip(s.carried, s.inits, strict=True))
            lines.append(f"{ind}host loop {s.name}: for {s.var} in range({s.start}, {s.stop}, "
                         f"{s.step}) carry ({carry}) {{  // on the host, every device")
            _steps_text(s.body, ind + "  ", lines)
            lines.append(f"{ind}  yield ({', '.join(s.yields)}) -> "
                         f"({', '.join(s.carried)})")
            lines.append(f"{ind}}}")
        else:
            at = f" {s.attrs}" if s.attrs else ""
            lines.append(f"{ind}{s.dst} = {s.kind}[axes={list(s.axes)}{at}]"
                         f"({', '.join(s.srcs)})  // kernel boundary")


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
        return _replica(slot, data, mesh_rank)
    return unshard(_sharded(slot, data))


def _replica(slot: Slot, data: np.ndarray, mesh_rank: int) -> np.ndarray:
    from tilefoundry.semantics.dtypes import to_bits

    n = math.prod(data.shape[:mesh_rank])
    flat = data.reshape((n, *data.shape[mesh_rank:]))
    bits = to_bits(np.ascontiguousarray(flat))
    if not (bits == bits[:1]).all():
        bad = int(np.argwhere((bits != bits[:1]).reshape(len(bits), -1).any(axis=1))[0][0])
        raise KernelIRError(f"slot {slot.name}: device {bad}'s replica differs from device "
                            f"0's; a replicated value must be bit-identical on every device")
    return np.array(flat[0], order="C")


def _all_to_all(src: Slot, dst: Slot, data: np.ndarray, i: int) -> np.ndarray:
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
        return _all_to_all(src, dst, data, c.axes[0])
    if c.kind == "slice":
        return shard(_global(src, data, nm), dst.layout).data
    if c.kind == "replicate":
        return np.ascontiguousarray(np.broadcast_to(_replica(src, data, nm), full))
    if c.kind == "align":
        (out_attrs,) = c.attrs
        out = ShardLayout(dst.layout.mesh, out_attrs, dst.layout.layout)
        v = _sharded(src, data) if src.layout is not None else _replica(src, data, nm)
        return align(v, out)
    if c.kind == "gather_index":
        (n_glob, blk, axis) = c.attrs
        iv = _replica(src, data, nm).astype(np.int64)
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
        iv = _replica(slots[c.srcs[1]], values[c.srcs[1]], nm).astype(np.int64)
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


# =============================================================================================
# the partition
# =============================================================================================
def has_mesh(fn: Function) -> bool:
    """Whether an (elaborated or inferred) function has a ShardLayout-typed value."""
    from tilefoundry.semantics.ir import reachable

    def sharded(t: Any) -> bool:
        if isinstance(t, TupleType):
            return any(sharded(f) for f in t.fields)
        return isinstance(t, TensorType) and t.shard is not None

    if any(sharded(p.type) for p in fn.params):
        return True
    return fn.body is not None and any(e.has_type and sharded(e.checked_type)
                                       for e in reachable(fn.body))


def _local_type(t: Any) -> Any:
    from tilefoundry.semantics.evaluator.sharding import local_type

    return local_type(t)


@dataclass
class _MV:
    """A value of the partition: a slot-to-be (``slot``) made by a local op or a collective."""

    id: int
    type: Any  # the local (per-device) type
    layout: ShardLayout | None
    varying: bool
    local: tuple | None = None  # (hir node, operand ids, op override) for a local op
    coll: tuple | None = None  # (kind, src ids, axes, attrs) for a collective
    input: int | None = None
    bound: bool = False  # a host loop's induction variable or carried value (the loop sets it)
    hloop: tuple | None = None  # a host loop: (name, range, iv, carried, inits, body, yields)

    def srcs(self) -> tuple[int, ...]:
        if self.local is not None:
            return self.local[1]
        if self.coll is not None:
            return self.coll[1]
        if self.hloop is not None:
            return self.hloop[4]
        return ()


class _Partitioner:
    def __init__(self, fn: Function):
        self.fn = fn
        self.mvs: list[_MV] = []
        self.of: dict[int, int] = {}  # HIR node id -> mv id
        self.field_of: dict[int, list[int]] = {}  # a tuple mv -> its fields' mvs
        self.mesh = None
        self.scope: list[int] = []  # the mvs of the scope being built (the program's, a body's)
        self.n_loops = 0

    def new(self, t, layout, varying, **kw) -> int:
        mv = _MV(len(self.mvs), t, layout, varying, **kw)
        self.mvs.append(mv)
        self.scope.append(mv.id)
        return mv.id

    def _mesh(self, layout: ShardLayout | None) -> None:
        if layout is None:
            return
        if self.mesh is None:
            self.mesh = layout.mesh
        elif tuple(layout.mesh.axis_extents) != tuple(self.mesh.axis_extents):
            raise NotSupportedError("meshes of different shapes",
                                    f"{self.mesh} and {layout.mesh} in one program",
                                    stage=_STAGE)

    def run(self) -> list[int]:
        for k, p in enumerate(self.fn.params):
            t = p.checked_type
            lay = t.shard if isinstance(t, TensorType) else None
            self._mesh(lay)
            self.of[id(p)] = self.new(_local_type(t), lay, False, input=k)
        body = self.fn.body
        for node in _post_order(body):
            if id(node) in self.of or (node is body and isinstance(node, Tuple)):
                continue
            self.of[id(node)] = self.visit(node)
        outs = list(body.fields) if isinstance(body, Tuple) else [body]
        res = []
        for o in outs:
            mid = self.of[id(o)]
            mv = self.mvs[mid]
            if isinstance(mv.type, TupleType):
                raise NotSupportedError("a tuple-valued output field", "flatten it",
                                        stage=_STAGE)
            if mv.varying:
                raise NotSupportedError("a device-varying (Local) output", "it has no logical "
                                        "value; Reshard it through a ShardLayout-typed value",
                                        stage=_STAGE)
            for kind, axes, after in plan_reshard(mv.layout, None):
                mid = self.coll(kind, (mid,), axes, (), after, None)
            res.append(mid)
        return res

    def coll(self, kind, srcs, axes, attrs, layout, t=None, varying=False) -> int:
        src = self.mvs[srcs[0]]
        if t is None and layout is not None:  # a piece of ``layout``
            t = TensorType(tuple(layout.local_axis_extents()), src.type.dtype)
        elif t is None:  # replicate: the whole (global) value on every device
            t = TensorType(tuple(src.layout.layout.axis_extents), src.type.dtype)
        return self.new(t, layout, varying, coll=(kind, tuple(srcs), tuple(axes),
                                                   tuple(attrs)))

    def loc(self, node: Expr, ids: Sequence[int], op: Any = None) -> int:
        t = node.checked_type
        lay = t.shard if isinstance(t, TensorType) else None
        self._mesh(lay)
        varying = lay is None and any(self.mvs[i].varying for i in ids)
        mid = self.new(_local_type(t), lay, varying, local=(node, tuple(ids), op))
        self._fields(mid, t, varying)
        return mid

    def _fields(self, mid: int, t: Any, varying: bool) -> None:
        """A tuple value's fields, made right after it (in its launch), so a field used past a
        collective crosses it as a tensor (``fields`` maps the tuple to them)."""
        if not isinstance(t, TupleType):
            return
        fids = []
        for k, ft in enumerate(t.fields):
            lay = ft.shard if isinstance(ft, TensorType) else None
            f = self.new(_local_type(ft), lay, varying and lay is None,
                         local=(("field", k), (mid,), None))
            self._fields(f, ft, varying)
            fids.append(f)
        self.field_of[mid] = fids

    def loop(self, node: GridRegionExpr) -> int:
        """A loop whose body needs no collective: one local op of its launch (kept as it is
        over plain values, rebuilt on the local types over sharded ones). One whose body needs
        a collective: a host loop (``host_loop``)."""
        outer: list[Expr] = []
        inside: list[Expr] = []
        seen: set[int] = set()
        stack = [node.body, *node.yield_values]
        while stack:
            e = stack.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            if id(e) in self.of:
                outer.append(e)
                continue
            inside.append(e)
            kids = list(operands(e))
            if isinstance(e, GridRegionExpr):
                kids += [e.body, *e.yield_values]
            stack.extend(kids)
        if any(isinstance(e, Call) and e.has_type and not isinstance(e.op, Function) and
               _collective_reason(e) is not None for e in inside):
            return self.host_loop(node)
        ids = [self.of[id(a)] for a in node.init_args] + [self.of[id(o)] for o in outer]
        mvs = [self.mvs[i] for i in ids]
        if any(m.varying for m in mvs) and any(m.layout is not None for m in mvs):
            raise NotSupportedError("GridRegionExpr", "a device-varying value meets a "
                                    "ShardLayout-typed one in a loop",
                                    stage=_STAGE)
        sharded = _has_shard(node.checked_type) or any(m.layout is not None for m in mvs) or \
            any(e.has_type and _has_shard(e.checked_type) for e in _loop_nodes(node))
        return self.loc(node, ids, ("loop", tuple(outer), sharded))

    def host_loop(self, node: GridRegionExpr) -> int:
        """A loop whose body needs a collective: its body partitioned as a scope of its own (the
        induction variable and the carried values bound by the loop, the outer values read as
        they are), one ``hloop`` mv in the enclosing scope; the loop's value is its carried
        mvs. A carried value is device-varying when its init or its yield is (the body is
        partitioned again when a yield turns out varying)."""
        from tilefoundry.semantics.typeinfer.core import TypeInferError
        from tilefoundry.semantics.typeinfer.functions import resolve_grid_domain

        try:
            dom = resolve_grid_domain(node, {})
        except TypeInferError as e:
            raise NotSupportedError("GridRegionExpr", f"its bounds do not resolve to integers "
                                    f"({e})", stage=_STAGE) from e
        inits = [self.of[id(a)] for a in node.init_args]
        for i in inits:
            if isinstance(self.mvs[i].type, TupleType):
                raise NotSupportedError("GridRegionExpr", "a carried tuple value in a loop "
                                        "whose body needs a collective", stage=_STAGE)
        ivt = node.induction_var.checked_type
        if not (isinstance(ivt, TensorType) and ivt.shape == () and ivt.shard is None):
            raise NotSupportedError("GridRegionExpr", f"an induction variable of type {ivt}",
                                    stage=_STAGE)
        varying = [self.mvs[i].varying for i in inits]
        outer_scope, outer_of, mark = self.scope, self.of, len(self.mvs)
        while True:
            self.scope, self.of = [], dict(outer_of)
            iv = self.new(TensorType((), ivt.dtype), None, False, bound=True)
            self.of[id(node.induction_var)] = iv
            carried = []
            for c, i, v in zip(node.carried_args, inits, varying, strict=True):
                m = self.mvs[i]
                carried.append(self.new(m.type, m.layout, v, bound=True))
                self.of[id(c)] = carried[-1]
            for e in _post_order_of(node.yield_values, self.of):
                self.of[id(e)] = self.visit(e)
            ys = [self.of[id(y)] for y in node.yield_values]
            body, self.scope, self.of = self.scope, outer_scope, outer_of
            more = [v or self.mvs[y].varying for v, y in zip(varying, ys, strict=True)]
            if more == varying:
                break
            varying = more  # a yield is device-varying: so is its carried value; again
            del self.mvs[mark:]
            self.field_of = {k: f for k, f in self.field_of.items() if k < mark}
        for y in ys:
            if isinstance(self.mvs[y].type, TupleType):
                raise NotSupportedError("GridRegionExpr", "a yielded tuple value in a loop "
                                        "whose body needs a collective", stage=_STAGE)
        name = f"loop{self.n_loops}"
        self.n_loops += 1
        self.new(None, None, False, hloop=(name, dom, iv, tuple(carried), tuple(inits),
                                           tuple(body), tuple(ys)))
        if len(carried) == 1:
            return carried[0]
        t = TupleType(tuple(self.mvs[c].type for c in carried))
        mid = self.new(t, None, any(self.mvs[c].varying for c in carried),
                       local=(("tuple",), tuple(carried), None))
        self.field_of[mid] = list(carried)
        return mid

    def visit(self, node: Expr) -> int:
        """One node as planned steps, by the op's mesh rule (``mesh_rules.py``)."""
        from tilefoundry.semantics.evaluator.mesh_rules import MeshRule as R
        from tilefoundry.semantics.evaluator.mesh_rules import mesh_rule
        from tilefoundry.semantics.ops.sharding import Local, Reshard
        from tilefoundry.semantics.ops.tensor import InsertSlice, Reshape

        if isinstance(node, GridRegionExpr):
            return self.loop(node)
        if isinstance(node, Var):
            raise NotSupportedError(f"Var {node.name}", "a free variable",
                                    stage=_STAGE)
        if isinstance(node, Constant):
            return self.loc(node, ())
        ids = [self.of[id(a)] for a in operands(node)]
        if isinstance(node, TupleGetItem) and ids[0] in self.field_of:
            return self.field_of[ids[0]][node.index]
        if isinstance(node, Tuple | TupleGetItem):
            return self.loc(node, ids)
        if isinstance(node.op, Function):
            raise NotSupportedError("a call", "elaborate inlines calls",
                                    stage=_STAGE)
        op = node.op
        mvs = [self.mvs[i] for i in ids]
        meshy = [m for m in mvs if m.layout is not None or m.varying]
        t = node.checked_type
        out_lay = t.shard if isinstance(t, TensorType) else None
        self._mesh(out_lay)
        rule = mesh_rule(op)
        if rule is R.COLLECTIVE and isinstance(op, Reshard):
            (x,) = ids
            if mvs[0].varying:
                raise NotSupportedError("Reshard of a device-varying value", "it has no "
                                        "logical value", stage=_STAGE)
            mid = x
            for kind, axes, after in plan_reshard(mvs[0].layout, out_lay):
                mid = self.coll(kind, (mid,), axes, (), after)
            if mid == x:  # an identity Reshard
                return x
            return mid
        if rule is R.COLLECTIVE and isinstance(op, Local):
            (x,) = mvs
            if x.layout is None:
                raise NotSupportedError("Local of an unsharded value", "",
                                        stage=_STAGE)
            if x.layout.is_fully_broadcast:
                return self.coll("replicate", (ids[0],), (), (), None,
                                 TensorType(tuple(x.type.shape), x.type.dtype))
            return self.new(x.type, None, True, local=("identity", (ids[0],), None))
        if not meshy:
            return self.loc(node, ids)
        if any(m.varying for m in meshy) and any(m.layout is not None for m in meshy):
            raise NotSupportedError(type(op).__name__, "a device-varying value meets a "
                                    "ShardLayout-typed one", stage=_STAGE)
        if rule is R.GLOBAL_SHAPE:
            raise NotSupportedError(type(op).__name__, "a shape query left after "
                                    "canonicalize", stage=_STAGE)
        if rule is R.GATHER_REDUCED and mvs[0].layout is not None:
            lay = mvs[0].layout
            rank = len(lay.layout.shape)
            red = {a % rank for a in op.axes}
            aop = lay.layout.axis_of_position
            axes = tuple(i for i, a in enumerate(lay.attrs)
                         if isinstance(a, Split) and aop[a.position] in red)
            if axes:
                attrs = tuple(Broadcast() if i in axes else a for i, a in enumerate(lay.attrs))
                glay = ShardLayout(lay.mesh, attrs, lay.layout)
                ids[0] = self.coll("all_gather", (ids[0],), axes, (), glay)
            return self.loc(node, ids)
        if rule is R.ALIGN and out_lay is not None:
            new_ids = []
            for i, m in zip(ids, mvs, strict=True):
                if m.layout is not None and m.layout.layout.shape == out_lay.layout.shape \
                        and m.layout.attrs == out_lay.attrs:
                    new_ids.append(i)
                    continue
                tgt = ShardLayout(out_lay.mesh, out_lay.attrs, out_lay.layout)
                new_ids.append(self.coll("align", (i,), (), (out_lay.attrs,), tgt))
            return self.loc(node, new_ids)
        if rule is R.GATHER_SPLIT and mvs[0].layout is not None:
            lay = mvs[0].layout
            rank = len(lay.layout.shape)
            axis = op.axis % rank
            on = [i for i, a in enumerate(lay.attrs)
                  if isinstance(a, Split) and lay.layout.axis_of_position[a.position] == axis]
            if on:
                if mvs[1].layout is not None or mvs[1].varying:
                    raise NotSupportedError("Gather", "sharded or device-varying indices",
                                            stage=_STAGE)
                (i,) = on
                n_glob = lay.layout.axis_extents[axis]
                blk = n_glob // lay.mesh.axis_extents[i]
                attrs = (n_glob, blk, axis)
                li = self.coll("gather_index", (ids[1],), (i,), attrs, None, mvs[1].type,
                               varying=True)
                g = self.loc(node, [ids[0], li])
                return self.coll("gather_mask", (g, ids[1]), (i,), attrs, out_lay,
                                 self.mvs[g].type)
            return self.loc(node, ids)
        if rule is R.LOCAL_RESHAPE and out_lay is not None:
            return self.loc(node, ids, Reshape(tuple(out_lay.local_axis_extents())))
        if rule is R.WRITE_SPLIT and mvs[0].layout is not None and \
                mvs[0].layout.split_positions:
            upd = mvs[1 if isinstance(op, InsertSlice) else 3]
            splits = [i for i, a in enumerate(mvs[0].layout.attrs) if isinstance(a, Split)]
            if not (upd.layout is not None and
                    all(isinstance(upd.layout.attrs[i], Split) for i in splits)):
                raise NotSupportedError(type(op).__name__, "a replicated update written into "
                                        "a split destination", stage=_STAGE)
        return self.loc(node, ids)


def _has_shard(t: Any) -> bool:
    if isinstance(t, TupleType):
        return any(_has_shard(f) for f in t.fields)
    return isinstance(t, TensorType) and t.shard is not None


def _post_order_of(roots: Sequence[Expr], known: dict[int, int]) -> list[Expr]:
    """The nodes under ``roots`` not in ``known`` (a loop body's own nodes: the outer values
    and the loop's bound variables are known), operands first."""
    return postorder(roots, operands, known)


def _post_order(root: Expr) -> list[Expr]:
    return postorder(root)


# =============================================================================================
# building the mesh program
# =============================================================================================
def _slot_name(mid: int) -> str:
    return f"v{mid}"


def _rebuild_segment(seg: list[_MV], inputs: list[int], outputs: list[int], mvs: list[_MV],
                     name: str) -> Function:
    """The local HIR function of a run of local ops (typed by the op rules on local types,
    checked against the layouts' local types)."""
    from tilefoundry.semantics.typeinfer.core import Session, TypeInferError, infer_expr

    exprs: dict[int, Expr] = {}
    session = Session()
    params = []
    for k, mid in enumerate(inputs):
        t = mvs[mid].type
        v = Var(f"a{k}", t)
        v.stamp(t)
        params.append(v)
        exprs[mid] = v
    for mv in seg:
        node, ids, op = mv.local
        if node == "identity":
            exprs[mv.id] = exprs[ids[0]]
            continue
        args = tuple(exprs[i] for i in ids)
        if isinstance(node, tuple) and node[0] == "tuple":  # a host loop's carried values
            e = Tuple(args)
        elif isinstance(node, tuple):  # ("field", k) of a tuple value
            e = TupleGetItem(args[0], node[1])
        elif isinstance(node, Constant):
            e = node  # immutable, typed (a folded shape keeps its ShapeType)
        elif isinstance(node, GridRegionExpr):
            e = _rebuild_local_loop(node, args, op[1]) if op[2] else \
                _rebuild_loop(node, args, op[1])
        elif isinstance(node, Tuple):
            e = Tuple(args)
        elif isinstance(node, TupleGetItem):
            e = TupleGetItem(args[0], node.index)
        else:
            e = Call(op if op is not None else node.op, args)
        try:
            infer_expr(e, session)
        except TypeInferError as ex:  # the op's rule rejects the local operands
            what = type(e.op).__name__ if isinstance(e, Call) else type(e).__name__
            raise NotSupportedError(what, f"it does not type on the local shapes ({ex})",
                                    stage=_STAGE) from ex
        exprs[mv.id] = e
    outs = [exprs[m] for m in outputs]
    body = outs[0] if len(outs) == 1 else Tuple(tuple(outs))
    infer_expr(body, session)
    for mv in seg:
        e = exprs[mv.id]
        node = mv.local[0]
        if node == "identity" or isinstance(node, Constant | GridRegionExpr) or \
                not e.has_type:  # not an output's operand: not in the launch
            continue
        if e.checked_type != mv.type:
            what = type(node.op).__name__ if isinstance(node, Call) else type(node).__name__
            raise NotSupportedError(what, f"its type on the local shapes is {e.checked_type}, "
                                    f"not the layout's local type {mv.type}",
                                    stage=_STAGE)
    return Function(name, tuple(params), body, None)


def _storage(t: Any) -> tuple[Any, tuple[int, ...]]:
    """(dtype, shape) of a value of type ``t`` on a device (a shape value is i64[rank])."""
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.types import DimType, ShapeType

    if isinstance(t, TensorType):
        return t.dtype, tuple(t.shape)
    if isinstance(t, DimType):
        return DType.I64, ()
    if isinstance(t, ShapeType):
        return DType.I64, (t.rank,)
    raise NotSupportedError(f"a {type(t).__name__} value crossing a collective", "",
                            stage=_STAGE)


def _loop_nodes(g: GridRegionExpr) -> list[Expr]:
    """The nodes of a loop's body (nested loops' bodies included), not the outer values."""
    # the roots in reverse: the last yield is entered first, as a work list of them pops it
    return list(reachable([*g.yield_values[::-1], g.body], loop_children))


def _collective_reason(e: Call) -> str | None:
    """Why the Call ``e`` (typed, in a loop body) needs a collective step — a reason naming
    it — or None when the mesh simulation runs it on each device's local block alone (by the
    op's mesh rule)."""
    from tilefoundry.semantics.evaluator.mesh_rules import MeshRule as R
    from tilefoundry.semantics.evaluator.mesh_rules import mesh_rule

    op = e.op
    rule = mesh_rule(op)
    t = e.checked_type
    out = t.shard if isinstance(t, TensorType) else None
    ins = [a.checked_type for a in e.args]
    lays = [x.shard if isinstance(x, TensorType) else None for x in ins]
    meshy = out is not None or any(lay is not None for lay in lays)
    if rule in (R.COLLECTIVE, R.GLOBAL_SHAPE) and meshy:
        return "a collective or a layout query"
    if rule is R.GATHER_REDUCED and lays[0] is not None and any(
            isinstance(a, Split) and lays[0].layout.axis_of_position[a.position] in
            {x % len(lays[0].layout.shape) for x in op.axes} for a in lays[0].attrs):
        return "a reduction over a split axis (an all-gather)"
    if rule is R.ALIGN and out is not None and any(
            lay is None or lay.attrs != out.attrs or lay.layout.shape != out.layout.shape
            for lay in lays):
        return "an operand read through another layout (a local slice)"
    if rule is R.GATHER_SPLIT and lays[0] is not None and lays[0].split_positions:
        return "a gather from a split value"
    if rule is R.WRITE_SPLIT and lays[0] is not None and \
            lays[0].split_positions:
        return "a write into a split value"
    return None


def _local_call(e: Call, ops: list) -> Call:
    """A Call of a collective-free loop body on the devices' local values: only ops that the
    mesh simulation runs on the local blocks alone (a loop whose body needs a collective is a
    host loop, ``_Partitioner.host_loop``; reaching one here is NOT_SUPPORTED)."""
    from tilefoundry.semantics.evaluator.mesh_rules import MeshRule, mesh_rule

    why = _collective_reason(e)
    if why is not None:
        raise NotSupportedError(type(e.op).__name__, f"{why} inside a loop kept as one local "
                                f"op", stage=_STAGE)
    op = e.op
    t = e.checked_type
    out = t.shard if isinstance(t, TensorType) else None
    if mesh_rule(op) is MeshRule.LOCAL_RESHAPE and out is not None:
        op = type(op)(tuple(out.local_axis_extents()))
    return Call(op, tuple(ops))


def _rebuild_local_loop(node: GridRegionExpr, args: tuple, outer: tuple) -> GridRegionExpr:
    """A loop over sharded values whose body is local (no collective): the body rebuilt on the
    local types, each op re-typed by its rule and checked against the layout's local type."""
    from tilefoundry.compiler.hir_passes import _Rewriter
    from tilefoundry.semantics.typeinfer.core import Session, infer_expr

    session = Session()
    n_init = len(node.init_args)
    seeds = {id(o): a for o, a in zip(outer, args[n_init:], strict=True)}

    def check(e: Expr, new: Expr) -> Expr:
        infer_expr(new, session)
        want = _local_type(e.checked_type)
        if new.checked_type != want:
            what = type(e.op).__name__ if isinstance(e, Call) else type(e).__name__
            raise NotSupportedError(what, f"its type on the local shapes in a loop is "
                                    f"{new.checked_type}, not the layout's local type {want}",
                                    stage=_STAGE)
        return new

    def visit(e: Expr, ops: list, values: dict, ctx: Any) -> Expr:
        if isinstance(e, Constant):
            return e
        if isinstance(e, Var):
            raise NotSupportedError(f"Var {e.name}", "not bound in the loop",
                                    stage=_STAGE)
        if isinstance(e, Call):
            if isinstance(e.op, Function):
                raise NotSupportedError("a call", "elaborate inlines calls",
                                        stage=_STAGE)
            return check(e, _local_call(e, ops))
        if isinstance(e, Tuple):
            return check(e, Tuple(tuple(ops)))
        return check(e, TupleGetItem(ops[0], e.index))

    def loop(g: GridRegionExpr, inits: list, values: dict, ctx: Any) -> Expr:
        inner = dict(values)
        iv = Var(g.induction_var.name, g.induction_var.type)
        iv.stamp(g.induction_var.checked_type)
        inner[id(g.induction_var)] = iv
        carried = []
        for c, i in zip(g.carried_args, inits, strict=True):
            v = Var(c.name, None)
            v.stamp(i.checked_type)
            inner[id(c)] = v
            carried.append(v)
        ys = tuple(rw.expr(y, inner, ctx) for y in g.yield_values)
        body = rw.expr(g.body, inner, ctx)
        new = GridRegionExpr(iv, tuple(carried), tuple(inits), body, ys, extent=g.extent,
                             step=g.step, start=g.start)
        ts = tuple(i.checked_type for i in inits)
        new.stamp(ts[0] if len(ts) == 1 else TupleType(ts))
        want = _local_type(g.checked_type)
        if new.checked_type != want:
            raise NotSupportedError("GridRegionExpr", f"its local type {new.checked_type} is "
                                    f"not the layout's local type {want}",
                                    stage=_STAGE)
        return new

    rw = _Rewriter(visit, loop)
    return loop(node, list(args[:n_init]), seeds, None)


def _rebuild_loop(node: GridRegionExpr, args: tuple, outer: tuple) -> GridRegionExpr:
    """The loop with its inits and the outer values it reads replaced by the launch's values
    (the body's other nodes are kept: they are plain and typed)."""
    from tilefoundry.compiler.hir_passes import _Rewriter

    n_init = len(node.init_args)
    seeds = {id(o): a for o, a in zip(outer, args[n_init:], strict=True)}

    def visit(e: Expr, ops: list, values: dict, ctx: Any) -> Expr:
        if isinstance(e, Var | Constant) or all(a is b for a, b in zip(ops, operands(e),
                                                                          strict=True)):
            return e
        if isinstance(e, Call):
            new = Call(e.op, tuple(ops))
        elif isinstance(e, Tuple):
            new = Tuple(tuple(ops))
        else:
            new = TupleGetItem(ops[0], e.index)
        new.stamp(e.checked_type)
        return new

    def loop(g: GridRegionExpr, inits: list, values: dict, ctx: Any) -> Expr:
        inner = dict(values)
        for c in (g.induction_var, *g.carried_args):
            inner[id(c)] = c
        ys = tuple(rw.expr(y, inner, ctx) for y in g.yield_values)
        body = rw.expr(g.body, inner, ctx)
        new = GridRegionExpr(g.induction_var, g.carried_args, tuple(inits), body, ys,
                             extent=g.extent, step=g.step, start=g.start)
        new.stamp(g.checked_type)
        return new

    rw = _Rewriter(visit, loop)
    return loop(node, list(args[:n_init]), seeds, None)


def lower_mesh(fn: Function, compile_local, name: str | None = None
               ) -> tuple[MeshProgram, tuple]:
    """Partition the elaborated, canonicalized sharded ``fn`` into launches and collectives;
    ``compile_local(function, input shapes) -> (kir.Program, executable)`` compiles each
    launch's local function. Returns the program and the launches' executables, in order."""
    pt = _Partitioner(fn)
    outs = pt.run()
    if pt.mesh is None:
        raise NotSupportedError("a program without a mesh", "nothing is sharded",
                                stage=_STAGE)
    mvs = pt.mvs
    users: dict[int, set[int]] = {m.id: set() for m in mvs}
    for m in mvs:
        for s in m.srcs():
            users[s].add(m.id)
    execs: list = []

    def build(scope: Sequence[int], escape: set[int]) -> list:
        """The steps of one scope (the program's, a host loop's body): maximal runs of local
        ops as launches, whose outputs are what a later step or ``escape`` (the program's
        outputs, the body's yields) reads."""
        steps: list = []
        seg: list[_MV] = []

        def flush() -> None:
            if not seg:
                return
            ids = {m.id for m in seg}
            inputs: list[int] = []
            for m in seg:
                for s in m.local[1]:
                    if s not in ids and s not in inputs:
                        inputs.append(s)
            outputs = [m.id for m in seg if (users[m.id] - ids) or m.id in escape]
            for o in outputs:
                if isinstance(mvs[o].type, TupleType):
                    raise NotSupportedError("a tuple value crossing a collective", "",
                                            stage=_STAGE)
            if outputs:
                k = len(execs)
                lf = _rebuild_segment(seg, inputs, outputs, mvs, f"{fn.name}_dev{k}")
                prog, exe = compile_local(lf, [_storage(mvs[i].type)[1] for i in inputs])
                execs.append(exe)
                steps.append(DeviceLaunch(f"{fn.name}_dev{k}", prog,
                                          tuple(_slot_name(i) for i in inputs),
                                          tuple(_slot_name(o) for o in outputs)))
            seg.clear()

        for mid in scope:
            m = mvs[mid]
            if m.input is not None or m.bound:
                continue
            if m.local is not None:
                seg.append(m)
                continue
            flush()
            if m.hloop is not None:
                lname, dom, iv, carried, inits, body, ys = m.hloop
                steps.append(MeshLoop(lname, _slot_name(iv), dom.start, dom.stop, dom.step,
                                      tuple(_slot_name(c) for c in carried),
                                      tuple(_slot_name(i) for i in inits),
                                      tuple(build(body, set(ys))),
                                      tuple(_slot_name(y) for y in ys)))
                continue
            kind, srcs, axes, attrs = m.coll
            steps.append(Collective(kind, tuple(_slot_name(s) for s in srcs),
                                    _slot_name(m.id), axes, attrs))
        flush()
        return steps

    steps = build(pt.scope, set(outs))
    used: set[str] = set()
    for s in _walk(steps):
        if isinstance(s, DeviceLaunch):
            used |= {*s.inputs, *s.outputs}
        elif isinstance(s, MeshLoop):
            used |= {s.var, *s.carried, *s.inits, *s.yields}
        else:
            used |= {*s.srcs, s.dst}
    used |= {_slot_name(o) for o in outs} | {_slot_name(m.id) for m in mvs
                                             if m.input is not None}
    slots = tuple(Slot(_slot_name(m.id), *_storage(m.type), m.layout, m.varying) for m in mvs
                  if m.hloop is None and _slot_name(m.id) in used)
    mp = MeshProgram(name or fn.name, pt.mesh, slots,
                     tuple(_slot_name(m.id) for m in mvs if m.input is not None),
                     tuple(_slot_name(o) for o in outs), tuple(steps),
                     isinstance(fn.body, Tuple))
    verify_mesh(mp)
    return mp, tuple(execs)


# =============================================================================================
# compile and run
# =============================================================================================
def run_steps(steps: Sequence, values: dict[str, np.ndarray], slots: dict[str, Slot],
              lead: tuple[int, ...], launch, collective, counted: list[int] | None = None
              ) -> None:
    """Run ``steps`` on ``values`` (slot name -> array of shape ``lead`` + the slot's shape:
    ``lead`` is the mesh extents for the simulation of all devices, ``()`` for one rank):
    ``launch(step, values)`` writes a launch's outputs, ``collective(step, values)`` returns a
    collective's value; a ``MeshLoop`` runs here, on the host. Its iterations, with those of
    every loop entered before it in this run (``counted``), stay within ``max_loop_iterations``
    as the reference evaluator's do (nested loops multiply); past it, ``LimitError`` before the
    loop runs."""
    from tilefoundry.limits import LimitError, limits

    counted = [0] if counted is None else counted
    for st in steps:
        if isinstance(st, DeviceLaunch):
            launch(st, values)
        elif isinstance(st, Collective):
            values[st.dst] = collective(st, values)
        else:
            n = st.trips
            lim = limits()
            if counted[0] + n > lim.max_loop_iterations:
                raise LimitError(f"mesh program: host loop {st.name} over range({st.start}, "
                                 f"{st.stop}, {st.step}) would bring the loop iterations to "
                                 f"{counted[0] + n:,}, more than the limit max_loop_iterations "
                                 f"(nested loops multiply); {lim.how('max_loop_iterations')}",
                                 "max_loop_iterations")
            counted[0] += n
            for c, i in zip(st.carried, st.inits, strict=True):
                values[c] = values[i]
            vdt = slots[st.var].dtype.storage
            for i in range(st.start, st.stop, st.step):
                values[st.var] = np.full(lead, i, vdt)
                run_steps(st.body, values, slots, lead, launch, collective, counted)
                ys = [values[y] for y in st.yields]  # all read before any is written
                for c, y in zip(st.carried, ys, strict=True):
                    values[c] = y

@dataclass
class MeshCompiled:
    """A compiled sharded program: ``MeshProgram`` plus one executable per launch. Calling it
    with the entry's inputs (global arrays or ``Sharded`` values) returns the outputs' logical
    values."""

    entry: str
    hir: Function
    program: MeshProgram
    executables: tuple
    device_runs: int = field(default=0)

    def __call__(self, inputs: Sequence[Any]) -> Any:
        from tilefoundry.arguments import input_list
        from tilefoundry.compiler.run_limits import count_loops
        from tilefoundry.errors import InvalidArgumentError
        from tilefoundry.semantics.evaluator.mesh import Sharded, shard

        mp = self.program
        inputs = input_list(inputs, f"compiled {self.hir.name}", keep=(Sharded,))
        if len(inputs) != len(mp.inputs):
            raise InvalidArgumentError(f"compiled {self.hir.name}: takes {len(mp.inputs)} "
                                       f"input(s), got {len(inputs)}")
        sm = mp.slot_map()
        ext = tuple(mp.mesh.axis_extents)
        values: dict[str, np.ndarray] = {}
        for name, x in zip(mp.inputs, inputs, strict=True):
            s = sm[name]
            if s.layout is not None:
                v = x if isinstance(x, Sharded) else shard(np.asarray(x), s.layout)
                values[name] = np.ascontiguousarray(v.data)
            else:
                values[name] = np.ascontiguousarray(np.broadcast_to(np.asarray(x),
                                                                    (*ext, *np.shape(x))))
        exes = dict(zip((ln.name for ln in mp.launches()), self.executables, strict=True))
        coords = list(itertools.product(*(range(m) for m in ext)))
        counted = [0]  # the run's loop iterations: host loops and the launches' own loops

        def launch(st: DeviceLaunch, values: dict[str, np.ndarray]) -> None:
            count_loops(st.program.steps, counted, f"mesh program: launch {st.name}")
            exe = exes[st.name]
            per: list[list[np.ndarray]] = [[] for _ in st.outputs]
            for coord in coords:
                r = exe.run([np.array(values[n][coord], order="C") for n in st.inputs])
                self.device_runs += 1
                r = list(r) if isinstance(r, tuple) else [r]
                for j, a in enumerate(r):
                    per[j].append(np.asarray(a))
            for j, n in enumerate(st.outputs):
                values[n] = np.stack(per[j]).reshape((*ext, *sm[n].shape))

        run_steps(mp.steps, values, sm, ext, launch,
                  lambda st, vals: run_collective(st, sm, vals, mp.mesh), counted)
        outs = []
        for n in mp.outputs:
            outs.append(_replica(sm[n], values[n], len(ext)))
        return tuple(outs) if mp.tuple_output else outs[0]

    @property
    def kernels(self) -> list:
        return [k for ln in self.program.launches() for k in ln.program.kernels()]


def compile_mesh(module: Module, entry: str, shapes: Sequence[Sequence[int]],
                 target: str = "interp", *, fuse: bool = True,
                 cfg: TileConfig | None = None) -> MeshCompiled:
    """Compile a sharded ``module[entry]`` for the global input ``shapes`` to ``target``
    (``interp`` or ``simd``): the per-device lowering, each launch through the target's
    pipeline (canonicalize, lower, fuse, render, build)."""
    from tilefoundry.compiler import pipeline
    from tilefoundry.compiler.hir_passes import canonicalize, elaborate, typeinfer

    if target not in pipeline.TARGETS and target in pipeline.LAZY_TARGETS:
        import importlib

        importlib.import_module(pipeline.LAZY_TARGETS[target])
    tgt = pipeline.TARGETS.get(target)
    if tgt is None:
        raise NotSupportedError(f"target {target!r}", "no such target",
                                stage=_STAGE)
    inferred = typeinfer(module)
    hir = canonicalize(elaborate(inferred, entry, shapes, keep_shard=True))
    c = cfg or TileConfig()

    def compile_local(lf: Function, in_shapes):
        st = pipeline.State(Module((lf,)), lf.name, list(in_shapes), tgt, c)
        st.hir = lf
        names = ["canonicalize", "lower", *(["fuse"] if fuse else []), "render", "build"]
        pipeline.run_passes(st, names)
        return st.program, st.executable

    mp, execs = lower_mesh(hir, compile_local, entry)
    return MeshCompiled(entry, hir, mp, execs)

