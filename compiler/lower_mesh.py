"""The per-device lowering of sharded programs: a ``MeshProgram`` of device launches and
explicit collective steps, run by ``kernel-interp`` and ``simd`` with the collectives simulated
on the host (and by ``triton`` / ``cuda``, every device's launches on one GPU).

The modules, by concern: ``mesh_ir.py`` (the ``MeshProgram`` IR, its verifier and text),
``mesh_partition.py`` (the partition: what each op does on mesh values is the shared per-device
driver's, ``semantics/evaluator/mesh_driver.py``, run with the partition as its collectives
implementation, D490), ``mesh_local.py`` (the local HIR of a launch), ``mesh_collectives.py``
(the collectives simulated on the host, ``plan_reshard``) and this one (``lower_mesh``,
``run_steps``, ``MeshCompiled``, ``compile_mesh``; it re-exports the public names of the others).

A program whose values carry ShardLayouts is elaborated keeping the layouts
(``elaborate(..., keep_shard=True)``), canonicalized, then partitioned (``lower_mesh``):

* every op that the per-device driver runs on each device's local operands becomes
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilefoundry.compiler.errors import NotSupportedError
from tilefoundry.compiler.mesh_collectives import plan_reshard, run_collective
from tilefoundry.compiler.mesh_collectives import replica as _replica
from tilefoundry.compiler.mesh_ir import (
    COLLECTIVE_KINDS,
    Collective,
    DeviceLaunch,
    MeshLoop,
    MeshProgram,
    Slot,
    mesh_text,
    verify_mesh,
)
from tilefoundry.compiler.mesh_ir import (
    STAGE as _STAGE,
)
from tilefoundry.compiler.mesh_ir import (
    walk_steps as _walk,
)
from tilefoundry.compiler.mesh_local import rebuild_segment as _rebuild_segment
from tilefoundry.compiler.mesh_local import slot_name as _slot_name
from tilefoundry.compiler.mesh_local import storage as _storage
from tilefoundry.compiler.mesh_partition import MV as _MV
from tilefoundry.compiler.mesh_partition import Partitioner as _Partitioner
from tilefoundry.compiler.mesh_partition import has_mesh
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.semantics.ir import (
    Function,
    Module,
    Tuple,
)
from tilefoundry.semantics.types import (
    TupleType,
)

__all__ = ["COLLECTIVE_KINDS", "Collective", "DeviceLaunch", "MeshCompiled", "MeshLoop",
           "MeshProgram", "Slot", "compile_mesh", "has_mesh", "lower_mesh", "mesh_text",
           "plan_reshard", "run_collective", "run_steps", "verify_mesh"]

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


