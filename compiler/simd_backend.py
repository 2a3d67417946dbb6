"""The SIMD C backend (``--backend simd``; pipeline target ``simd``).

The pipeline runs as for ``kernel-interp`` (typeinfer, elaborate, canonicalize, lower, fuse);
``render_c.render`` turns the fused kernel IR into C (``omp simd`` loops over tiles, program
instances over per-call pthreads), ``c_runtime.build.load`` compiles it with the IEEE-keeping
flags plus ``-fopenmp-simd -pthread`` (and glibc's libmvec where present) into the
content-hashed cache, and the executable calls it through
ctypes on flat numpy storage laid out as the kernel-IR interpreter lays it out (inputs, temps,
consts; outputs read back through the buffers' strides).

Capabilities are those of the lowering (every lowered op, every evaluable dtype, every policy
and overflow mode; no mesh). What the renderer cannot handle raises ``NotSupportedError``
(a ``BackendUnsupportedError``: the conformance runner reports NOT_SUPPORTED naming it) before
any code runs; nothing falls back to the interpreter or the reference evaluator.
"""

from __future__ import annotations

import ctypes
import functools
import platform
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilefoundry.compiler import kir
from tilefoundry.compiler.backends import KernelInterpBackend
from tilefoundry.compiler.c_runtime.build import load
from tilefoundry.compiler.interp import Interpreter
from tilefoundry.compiler.kir import Program
from tilefoundry.compiler.pipeline import TARGETS, Target
from tilefoundry.compiler.render_c import ENTRY, render, root_names
from tilefoundry.errors import InvalidArgumentError

__all__ = ["EXTRA_FLAGS", "SimdBackend", "SimdExecutable", "build_options"]

#: added to the build's IEEE-keeping flags: the ``omp simd`` loop pragmas (no OpenMP runtime:
#: threads are pthreads created per call, D188) and pthreads
EXTRA_FLAGS = ("-fopenmp-simd", "-pthread")


@functools.cache
def _libmvec() -> bool:
    """glibc's vector math library is there (x86-64 Linux): the math calls vectorize."""
    import ctypes.util

    return platform.system() == "Linux" and platform.machine() == "x86_64" and \
        ctypes.util.find_library("mvec") is not None


def build_options() -> dict:
    """The ``c_runtime.build.load`` keywords of a rendered program."""
    if _libmvec():
        return {"extra_flags": (*EXTRA_FLAGS, "-DTF_LIBMVEC=1"), "libs": ("-lmvec",)}
    return {"extra_flags": EXTRA_FLAGS}


class SimdExecutable(Interpreter):
    """Runs a program's rendered C on flat numpy storage (the interpreter's layout)."""

    def __init__(self, program: Program, source: str):
        super().__init__(program)
        self.source = source
        self.lib = load(source, **build_options())
        self.fn = getattr(self.lib, ENTRY)
        self.fn.argtypes = (ctypes.c_void_p,)
        self.fn.restype = None
        self.order = root_names(program)
        # the per-call plan, computed once: input checks, storage to allocate, outputs
        bm = self.bm
        self._inputs = [(n, bm[n].shape, kir.numpy_dtype(bm[n].dtype)) for n in program.inputs]
        self._consts = {b.name: np.ascontiguousarray(b.data).reshape(-1)
                        for b in program.buffers if b.kind == "const"}
        self._temps = [(b.name, b.span, kir.numpy_dtype(b.dtype)) for b in program.buffers
                       if b.kind == "temp"]
        names = program.output_names()
        self._own = {n for n in names if bm[n].kind == "temp" and names.count(n) == 1 and
                     bm[n].strides == kir.c_strides(bm[n].shape) and bm[n].span == bm[n].size}
        self._ptrs = ctypes.c_void_p * max(len(self.order), 1)

    def run(self, inputs: Sequence[np.ndarray]) -> Any:
        p = self.p
        if len(inputs) != len(self._inputs):
            raise InvalidArgumentError(f"program {p.name} takes {len(p.inputs)} inputs "
                                       f"({', '.join(p.inputs)}), got {len(inputs)}")
        st: dict[str, np.ndarray] = dict(self._consts)
        for (name, shape, npdt), x in zip(self._inputs, inputs, strict=True):
            x = np.asarray(x)
            if x.shape != shape or x.dtype != npdt:
                b = self.bm[name]
                raise InvalidArgumentError(f"input {name}: expected {b.dtype}{list(b.shape)}, "
                                           f"got {x.dtype}{list(x.shape)}")
            # the C code never writes an input (the verifier rejects such stores): no copy
            st[name] = np.ascontiguousarray(x).reshape(-1)
        for name, span, npdt in self._temps:
            st[name] = np.zeros(span, npdt)
        arrays = [st[n] for n in self.order]
        self.fn(ctypes.cast(self._ptrs(*[a.ctypes.data for a in arrays]), ctypes.c_void_p))

        return self._collect(p.outputs, st)

    def _collect(self, o: Any, st: dict[str, np.ndarray]) -> Any:
        # a method, not a recursive closure: a closure referring to itself is a reference
        # cycle that would keep ``st`` (every buffer of the call) alive until the cyclic GC
        if isinstance(o, tuple):
            return tuple(self._collect(x, st) for x in o)
        return st[o].reshape(self.bm[o].shape) if o in self._own else self.read(st, o)


def _build(program: Program, source: str | None) -> SimdExecutable:
    if source is None:
        raise InvalidArgumentError("the simd target builds from rendered C source; got none")
    return SimdExecutable(program, source)


TARGETS.setdefault("simd", Target("simd", render, _build))


class SimdBackend(KernelInterpBackend):
    """The SIMD C backend as a conformance backend (``--backend simd``); capabilities are the
    lowering's (``KernelInterpBackend.capabilities``), the renderer raising
    ``NotSupportedError`` for the rest."""

    name = "simd"
    target = "simd"
