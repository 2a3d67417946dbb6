"""Conformance backends built on the compiler: ``kernel-interp`` (the kernel-IR interpreter).

``KernelInterpBackend`` runs the whole pipeline (typeinfer, elaborate, canonicalize, lower,
fuse) and interprets the fused kernel IR with numpy, so a conformance failure of a rendered
backend (SIMD C, Triton, CUDA) that this backend passes is a rendering bug, and one it shares
is a lowering or fusion bug. ``compile(module, entry)`` type-checks once; the kernels are built
per input-shape signature on the first ``run`` with those shapes (the protocol's compile does
not see shapes) and cached.

Capabilities are honest: the ops with a lowering rule (``lower.LOWERINGS``), every evaluable
dtype, every reduction policy and overflow mode, no mesh. Anything else is NOT_SUPPORTED in
the runner before the backend is called; nothing falls back to the reference evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilefoundry.compiler.hir_passes import typeinfer
from tilefoundry.compiler.lower import LOWERINGS
from tilefoundry.compiler.pipeline import Compiled, compile
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.conformance.backend import ALL_OVERFLOW, ALL_POLICIES, Capabilities
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ir import Module
from tilefoundry.semantics.typeinfer.core import Session

__all__ = ["KernelInterpBackend"]


@dataclass
class _Program:
    module: Module
    entry: str
    cache: dict[tuple, Compiled] = field(default_factory=dict)


class KernelInterpBackend:
    """The kernel-IR interpreter as a conformance backend (``--backend kernel-interp``)."""

    name = "kernel-interp"
    target = "interp"

    def __init__(self, *, fuse: bool = True, cfg: TileConfig | None = None):
        self.fuse = fuse
        self.cfg = cfg or TileConfig()

    def capabilities(self) -> Capabilities:
        return Capabilities(
            ops=frozenset(op.__name__ for op in LOWERINGS),
            dtypes=frozenset(d for d in DType if FORMATS[d].evaluable),
            policies=ALL_POLICIES, overflow_modes=ALL_OVERFLOW, mesh=False)

    def compile(self, module: Module, entry: str) -> _Program:
        typeinfer(module, Session())[entry]  # fail early on a malformed module or entry
        return _Program(module, entry)

    def compiled_for(self, prog: _Program, shapes: list[tuple[int, ...]]) -> Compiled:
        key = tuple(shapes)
        hit = prog.cache.get(key)
        if hit is None:
            hit = compile(prog.module, prog.entry, shapes, self.target, fuse=self.fuse,
                          cfg=self.cfg)
            prog.cache[key] = hit
        return hit

    def run(self, compiled: _Program, inputs: list[np.ndarray]) -> Any:
        shapes = [tuple(np.shape(x)) for x in inputs]
        return self.compiled_for(compiled, shapes)(inputs)
