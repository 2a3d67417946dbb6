"""Conformance backends built on the compiler: ``kernel-interp`` (the kernel-IR interpreter).

``KernelInterpBackend`` runs the whole pipeline (typeinfer, elaborate, canonicalize, lower,
fuse) and interprets the fused kernel IR with numpy, so a conformance failure of a rendered
backend (SIMD C, Triton, CUDA) that this backend passes is a rendering bug, and one it shares
is a lowering or fusion bug. ``compile(module, entry)`` type-checks once; the kernels are built
per input-shape signature on the first ``run`` with those shapes (the protocol's compile does
not see shapes) and cached.

Capabilities are honest: the ops with a lowering rule (``lower.LOWERINGS``), every evaluable
dtype, every reduction policy and overflow mode, and sharded programs: a program with a
ShardLayout-typed value is compiled by the per-device lowering (``lower_mesh.compile_mesh``:
per-device launches of this target with the collectives simulated on the host between them). Anything else is NOT_SUPPORTED in
the runner before the backend is called; nothing falls back to the reference evaluator.

Run-time checks (``tilefoundry.errors.RUN_TIME_CHECKS``) are reported by the conformance
protocol, ``RunTimeCheckError`` naming the check: an input extent outside the entry's DimVar
envelope is checked on the host before compiling (``dispatch_envelope``), as is a nested
dispatch call whose elaborated shape matches no variant; Gather / RoPE indices, CacheUpdate and
InsertSlice bounds are checked by the executable (``lower.RunChecks``: on the host before the
launch for inputs and constants, by a check kernel whose flags the host reads after the launch
for computed values).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilefoundry.compiler.hir_passes import typeinfer
from tilefoundry.compiler.lower import LOWERINGS
from tilefoundry.compiler.pipeline import Compiled, compile
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.conformance.backend import (
    ALL_FEATURES,
    ALL_OVERFLOW,
    ALL_POLICIES,
    ALL_ROUNDING,
    Capabilities,
)
from tilefoundry.errors import RunTimeCheckError
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ir import Function, Module
from tilefoundry.semantics.typeinfer.core import Session, TypeInferError
from tilefoundry.semantics.types import DimVar, TensorType

__all__ = ["KernelInterpBackend", "check_envelopes"]


@dataclass
class _Program:
    module: Module
    entry: str
    fn: Function | None = None
    cache: dict[tuple, Any] = field(default_factory=dict)
    mesh: bool = False


def check_envelopes(fn: Function, shapes: list[tuple[int, ...]]) -> None:
    """The ``dispatch_envelope`` run-time check at the entry: every input extent bound to a
    DimVar lies in its envelope ``[lo, hi)`` (the reference's message)."""
    for p, shape in zip(fn.params, shapes, strict=False):
        t = p.checked_type if p.has_type else p.type
        if not isinstance(t, TensorType) or len(shape) != len(t.shape):
            continue  # a malformed input: the pipeline names it
        for a, (n, d) in enumerate(zip(shape, t.shape, strict=True)):
            if isinstance(d, DimVar) and not d.lo <= n < d.hi:
                raise RunTimeCheckError(f"@{fn.name} parameter {p.name}: axis {a} has extent "
                                        f"{n}, outside the envelope of {d.name} "
                                        f"[{d.lo}, {d.hi})", "dispatch_envelope")


class KernelInterpBackend:
    """The kernel-IR interpreter as a conformance backend (``--backend kernel-interp``)."""

    name = "kernel-interp"
    target = "interp"

    def __init__(self, *, fuse: bool = True, cfg: TileConfig | None = None):
        self.fuse = fuse
        self.cfg = cfg or TileConfig()

    def capabilities(self) -> Capabilities:
        return Capabilities(
            ops=frozenset(op.__name__ for op in LOWERINGS) | {"Local"},
            dtypes=frozenset(d for d in DType if FORMATS[d].evaluable),
            policies=ALL_POLICIES, overflow_modes=ALL_OVERFLOW, mesh=True,
            rounding_modes=ALL_ROUNDING, features=ALL_FEATURES)

    def compile(self, module: Module, entry: str, input_specs: tuple = ()) -> _Program:
        """Type-check the program; with ``input_specs`` (the conformance protocol,
        ``conformance/protocol.py``) also compile it for the case's input shapes, so the
        first ``run`` finds it in the shape cache. That compile is best-effort: a program
        that does not compile for those shapes (a run-time check, a lowering error) is left
        to ``run``, which compiles again and reports it as it always did. Sharded programs
        compile in ``run`` (their shapes are the distributed inputs')."""
        from tilefoundry.compiler.lower_mesh import has_mesh

        inferred = typeinfer(module, Session())
        fn = inferred[entry]  # fail early on a malformed module or entry
        mesh = any(has_mesh(f) or any(has_mesh(v) for v in f.variants)
                   for f in inferred.functions)
        prog = _Program(module, entry, fn, mesh=mesh)
        if input_specs and not mesh and all(s.kind in ("array", "scalar")
                                            for s in input_specs):
            with contextlib.suppress(Exception):
                self.compiled_for(prog, [tuple(s.shape) for s in input_specs])
        return prog

    def compiled_for(self, prog: _Program, shapes: list[tuple[int, ...]]) -> Compiled:
        key = tuple(shapes)
        hit = prog.cache.get(key)
        if hit is None:
            if prog.fn is not None:
                check_envelopes(prog.fn, shapes)
            try:
                if prog.mesh:
                    from tilefoundry.compiler.lower_mesh import compile_mesh

                    hit = compile_mesh(prog.module, prog.entry, shapes, self.target,
                                       fuse=self.fuse, cfg=self.cfg)
                else:
                    hit = compile(prog.module, prog.entry, shapes, self.target, fuse=self.fuse,
                                  cfg=self.cfg)
            except TypeInferError as e:
                # a dispatch call inside the program whose concrete shape is outside the
                # prototype's envelope (typeinfer.functions._select): exactly that check
                if e.rule == "Dispatch resolution" and \
                        "is outside the dispatch envelope" in str(e):
                    raise RunTimeCheckError(f"dispatch of @{prog.entry} on argument shapes "
                                            f"{[list(s) for s in shapes]}: {e}",
                                            "dispatch_envelope") from e
                raise
            prog.cache[key] = hit
        return hit

    def run(self, compiled: _Program, inputs: list[np.ndarray]) -> Any:
        if compiled.mesh:
            inputs = _mesh_inputs(compiled, inputs)
            shapes = [tuple(x.shape) for x in inputs]
        else:
            shapes = [tuple(np.shape(x)) for x in inputs]
        return self.compiled_for(compiled, shapes)(inputs)


def _mesh_inputs(prog: _Program, inputs: list) -> list:
    """A sharded program's inputs checked against the entry's signature, each sharded
    parameter distributed (``mesh.shard`` of a global array, or a ``Sharded`` value of the
    declared layout): the evaluator's input check, its run-time checks reported as such."""
    from tilefoundry.conformance.backend import reference_check
    from tilefoundry.semantics.evaluator.core import check_inputs, shape_of
    from tilefoundry.semantics.evaluator.registry import EvaluationError
    from tilefoundry.semantics.typeinfer.functions import select_variant

    fn = prog.fn
    try:
        if fn.body is None:
            try:
                fn = select_variant(fn, [shape_of(x) for x in inputs])
            except TypeInferError as e:
                raise EvaluationError(f"dispatch of @{fn.name}: {e}") from None
        return check_inputs(fn, list(inputs))
    except EvaluationError as e:
        check = reference_check(e)
        if check is None:
            raise
        raise RunTimeCheckError(str(e), check) from e
