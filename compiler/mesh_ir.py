"""The IR of the per-device lowering of sharded programs (``lower_mesh.py``): slots, device
launches, collective steps and host loops (``MeshProgram``), its verifier and its text form."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tilefoundry.compiler.errors import KernelIRError
from tilefoundry.semantics.types import (
    Broadcast,
    ShardLayout,
    Split,
)

__all__ = ["COLLECTIVE_KINDS", "STAGE", "Collective", "DeviceLaunch", "MeshLoop", "MeshProgram",
           "Slot", "mesh_text", "verify_mesh", "walk_steps"]

STAGE = "the per-device lowering of sharded programs"

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


def walk_steps(steps: Sequence) -> list:
    """Every step, nested loops' bodies included, in program order (a loop before its body)."""
    out: list = []
    for s in steps:
        out.append(s)
        if isinstance(s, MeshLoop):
            out += walk_steps(s.body)
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
        return [s for s in walk_steps(self.steps) if isinstance(s, DeviceLaunch)]

    def collectives(self) -> list[Collective]:
        """Every collective step, those in loop bodies included, in program order."""
        return [s for s in walk_steps(self.steps) if isinstance(s, Collective)]

    def loops(self) -> list[MeshLoop]:
        return [s for s in walk_steps(self.steps) if isinstance(s, MeshLoop)]


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

