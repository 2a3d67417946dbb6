"""C runtime of the SIMD C backend: bit-exact conversions in C (``tf_numerics.h`` / ``.c``),
the content-hashed build cache (``build``) and numpy-facing wrappers over the conversion loops
(``convert``)."""

from tilefoundry.compiler.c_runtime.build import CCompileError, load
from tilefoundry.compiler.c_runtime.convert import c_cast, c_round_lowp, c_widen

__all__ = ["CCompileError", "c_cast", "c_round_lowp", "c_widen", "load"]
