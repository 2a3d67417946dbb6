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
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tilefoundry.compiler import kir
from tilefoundry.compiler.backends import KernelInterpBackend
from tilefoundry.compiler.c_runtime.build import load
from tilefoundry.compiler.interp import Interpreter
from tilefoundry.compiler.kir import Program
from tilefoundry.compiler.pipeline import TARGETS, source_target
from tilefoundry.compiler.render_c import ENTRY, render, root_names
from tilefoundry.compiler.schedule import TileConfig

__all__ = ["EXTRA_FLAGS", "SIMD_TILES", "SimdBackend", "SimdExecutable", "build_options"]

#: the tile configuration of the ``simd`` target: narrow-dtype softmax and RMSNorm in f32
#: (``TileConfig.narrow_f32``, D279 / D400: within their 1-ulp budget by lemma B), whose f32
#: ``exp`` the renderer computes with the vectorizable ``tf__expf_v`` (``c_vecmath``)
SIMD_TILES = TileConfig(narrow_f32=True)

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
        # outputs that are whole contiguous temporaries are returned without a copy
        bm = self.bm
        names = program.output_names()
        self._own = {n for n in names if bm[n].kind == "temp" and names.count(n) == 1 and
                     bm[n].strides == kir.c_strides(bm[n].shape) and bm[n].span == bm[n].size}
        self._ptrs = ctypes.c_void_p * max(len(self.order), 1)

    def steps(self, seq: Sequence[Any], st: dict[str, np.ndarray]) -> None:
        """The whole program is one C call (``tf_program``) on the roots' storage."""
        arrays = [st[n] for n in self.order]
        self.fn(ctypes.cast(self._ptrs(*[a.ctypes.data for a in arrays]), ctypes.c_void_p))

    def _outputs(self, o: Any, st: Mapping[str, np.ndarray]) -> Any:
        if isinstance(o, tuple):
            return tuple(self._outputs(x, st) for x in o)
        return st[o].reshape(self.bm[o].shape) if o in self._own else self.read(st, o)


TARGETS.setdefault("simd", source_target("simd", render, SimdExecutable, SIMD_TILES))


class SimdBackend(KernelInterpBackend):
    """The SIMD C backend as a conformance backend (``--backend simd``); capabilities are the
    lowering's (``KernelInterpBackend.capabilities``), the renderer raising
    ``NotSupportedError`` for the rest."""

    name = "simd"
    target = "simd"

    def __init__(self, *, fuse: bool = True, cfg: TileConfig | None = None):
        super().__init__(fuse=fuse, cfg=cfg or SIMD_TILES)
