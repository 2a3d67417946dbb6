"""The SIMD C backend (``--backend simd``; pipeline target ``simd``), minimal: elementwise only.

The pipeline runs as for ``kernel-interp`` (typeinfer, elaborate, canonicalize, lower, fuse);
``render_c.render`` turns the fused kernel IR into C, ``c_runtime.build.load`` compiles it with
the IEEE-keeping flags (plus ``-fopenmp-simd``) into the content-hashed cache, and the
executable calls it through ctypes on the same flat numpy storage the kernel-IR interpreter
allocates (inputs, temps, consts; outputs read back through the buffers' strides).

Capabilities are honest and narrow: f32 / bf16 / f16 elementwise add, sub, mul, div, min, max,
neg, abs, sqrt and Cast. Whatever the renderer cannot handle raises ``NotSupportedError`` when
the kernels are built; nothing falls back to the interpreter or the reference evaluator.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilefoundry.compiler.backends import KernelInterpBackend
from tilefoundry.compiler.c_runtime.build import load
from tilefoundry.compiler.interp import Interpreter
from tilefoundry.compiler.kir import Program
from tilefoundry.compiler.pipeline import TARGETS, Target
from tilefoundry.compiler.render_c import ENTRY, render, root_names
from tilefoundry.conformance.backend import ALL_OVERFLOW, ALL_POLICIES, Capabilities
from tilefoundry.semantics.formats import DType

__all__ = ["SIMD_OPS", "SimdBackend", "SimdExecutable"]

#: the ops (and kinds) whose lowering the renderer handles, verified bit-exact by the tests
SIMD_OPS = frozenset({"Binary.add", "Binary.sub", "Binary.mul", "Binary.div", "Binary.min",
                      "Binary.max", "Unary.neg", "Unary.abs", "Unary.sqrt", "Cast"})
SIMD_DTYPES = frozenset({DType.F32, DType.BF16, DType.F16})
EXTRA_FLAGS = ("-fopenmp-simd",)


class SimdExecutable(Interpreter):
    """Runs a program's rendered C: the interpreter's storage handling, C for the steps."""

    def __init__(self, program: Program, source: str):
        super().__init__(program)
        self.source = source
        self.lib = load(source, extra_flags=EXTRA_FLAGS)
        self.fn = getattr(self.lib, ENTRY)
        self.fn.argtypes = (ctypes.c_void_p,)
        self.fn.restype = None
        self.order = root_names(program)

    def steps(self, seq: Sequence[Any], st: dict[str, np.ndarray]) -> None:
        arrays = [st[n] for n in self.order]
        for a in arrays:
            assert a.flags.c_contiguous
        ptrs = (ctypes.c_void_p * max(len(arrays), 1))(*[a.ctypes.data for a in arrays])
        self.fn(ctypes.cast(ptrs, ctypes.c_void_p))

    def run(self, inputs: Sequence[np.ndarray]) -> Any:
        # copies: the C code may be handed views of the caller's arrays
        return super().run([np.array(x, copy=True) for x in inputs])


def _build(program: Program, source: str | None) -> SimdExecutable:
    assert source is not None
    return SimdExecutable(program, source)


TARGETS.setdefault("simd", Target("simd", render, _build))


class SimdBackend(KernelInterpBackend):
    """The SIMD C backend as a conformance backend (``--backend simd``)."""

    name = "simd"
    target = "simd"

    def capabilities(self) -> Capabilities:
        return Capabilities(ops=SIMD_OPS, dtypes=SIMD_DTYPES, policies=ALL_POLICIES,
                            overflow_modes=ALL_OVERFLOW, mesh=False)
