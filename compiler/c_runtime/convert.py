"""numpy-facing wrappers over the conversion loops of ``tf_numerics.c`` (through ctypes).

The same contracts as ``semantics.dtypes.cast`` / ``widen_to_f32`` / ``apply_lowp``'s rounding
step, computed by the C routines the SIMD renderer inlines; tests/compiler/test_c_runtime.py
holds them bit-exact to the reference.

* ``c_widen(x)``: a float array (f32 or narrower) widened exactly to f32.
* ``c_cast(x, dtype, overflow=..., rounding=...)``: f32 → every float / integer dtype; narrow
  float → anything (widened exactly to f32 first: one rounding, as the contract asks); i8 / u8 /
  i32 / i64 → every float dtype. bool and int → int are not provided (they are plain C casts;
  ``UnsupportedDTypeError`` names the pair).
* ``c_round_lowp(x, dtype, overflow=...)``: f32 results of low-precision arithmetic rounded to
  ``dtype`` with a NaN written as the positive quiet NaN (D21).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from tilefoundry.compiler.c_runtime.build import RUNTIME_DIR, load
from tilefoundry.errors import InvalidArgumentError, UnsupportedDTypeError, bad_choice
from tilefoundry.semantics.dtypes import (
    FORMATS,
    OVERFLOW_MODES,
    ROUNDING_MODES,
    DType,
    bits_dtype,
    dtype_of,
)

__all__ = ["RUNTIME_SOURCE", "c_cast", "c_round_lowp", "c_widen", "runtime_library"]

RUNTIME_SOURCE = RUNTIME_DIR / "tf_numerics.c"

_NARROW = (DType.BF16, DType.F16, DType.FP8E4M3, DType.FP8E5M2, DType.F8E8M0)
_ROUND_DSTS = (DType.F32, DType.BF16, DType.F16, DType.FP8E4M3, DType.FP8E5M2)
_INT_SRCS = (DType.I8, DType.U8, DType.I32, DType.I64)
_INT_DSTS = (DType.I8, DType.U8, DType.I32, DType.I64)


def runtime_library() -> ctypes.CDLL:
    """The built ``tf_numerics.c`` (through the build cache)."""
    return load(RUNTIME_SOURCE)


@functools.cache
def _fn(lib: ctypes.CDLL, name: str):
    f = getattr(lib, f"tfl_{name}")
    f.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    f.restype = None
    return f


#: where the loops run: None, the C library; or a function ``(name, x, out)`` that fills
#: ``out`` with loop ``tfl_<name>`` applied to ``x`` (``compiler.cuda_numerics.device_runner``:
#: the same loops compiled for the GPU, so the tests of this module test the device's runtime)
RUNNER = None


def _run(name: str, x: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    src = np.ascontiguousarray(x)
    out = np.empty(src.shape, out_dtype)
    if src.size:
        if RUNNER is not None:
            RUNNER(name, src, out)
        else:
            _fn(runtime_library(), name)(src.ctypes.data, out.ctypes.data, src.size)
    return out


def _check(src: DType, dst: DType, overflow: str, rounding: str) -> None:
    if overflow not in OVERFLOW_MODES:
        raise InvalidArgumentError(bad_choice("cast overflow", overflow, OVERFLOW_MODES))
    if rounding not in ROUNDING_MODES:
        raise InvalidArgumentError(bad_choice("cast rounding", rounding, ROUNDING_MODES))
    if dst.is_int and (overflow, rounding) != ("nonfinite", "nearest"):
        raise InvalidArgumentError(
            f"cast to {dst}: overflow / rounding are not taken by an integer destination; "
            f"leave both at their defaults ('nonfinite', 'nearest')")
    if rounding != "nearest" and dst is not DType.F8E8M0:
        raise InvalidArgumentError(
            f"cast to {dst}: rounding={rounding!r} is only taken by f8e8m0; {dst} rounds to "
            f"nearest, ties to even. Allowed: 'nearest'")
    for d in (src, dst):
        if not FORMATS[d].evaluable or d is DType.BOOL:
            raise UnsupportedDTypeError(
                f"c_cast {src} -> {dst}: the C runtime has no conversion for {d}")


def _round_name(dst: DType, overflow: str, rounding: str, prefix: str) -> str:
    if dst is DType.F8E8M0:
        return f"{prefix}_to_f8e8m0_{overflow}_{rounding}"
    return f"{prefix}_to_{dst}_{overflow}"


def c_widen(x: np.ndarray) -> np.ndarray:
    """Exact widening of a float array (f32 or narrower) to f32; NaNs become the quiet NaN with
    their sign (f8e8m0's NaN: the positive one); f32 input is returned unchanged (a copy)."""
    x = np.asarray(x)
    src = dtype_of(x)
    if src is DType.F32:
        return x.copy()
    if src not in _NARROW:
        raise InvalidArgumentError(
            f"c_widen: expected a float array, got {src}; use c_cast for integers")
    return _run(f"widen_{src}", x.view(bits_dtype(src)), np.dtype(np.float32))


def c_cast(x: np.ndarray, dtype: DType | str, *, overflow: str = "nonfinite",
           rounding: str = "nearest") -> np.ndarray:
    """``semantics.dtypes.cast`` computed by the C runtime (see the module docstring)."""
    x = np.asarray(x)
    src, dst = dtype_of(x), DType.parse(dtype)
    _check(src, dst, overflow, rounding)
    if src in _NARROW:
        x, src = c_widen(x), DType.F32
    if src is DType.F32:
        if dst in _INT_DSTS:
            return _run(f"f32_to_{dst}", x, dst.storage)
        out = _run(_round_name(dst, overflow, rounding, "f32"), x, bits_dtype(dst))
        return out.view(dst.storage)
    if src in _INT_SRCS and dst.is_float:
        out = _run(_round_name(dst, overflow, rounding, str(src)), x, bits_dtype(dst))
        return out.view(dst.storage)
    raise UnsupportedDTypeError(
        f"c_cast {src} -> {dst}: not provided by the C runtime (integer -> integer wraps and "
        f"is a plain C cast in rendered code)")


def c_round_lowp(x: np.ndarray, dtype: DType | str, *, overflow: str = "nonfinite") -> np.ndarray:
    """Round f32 results of low-precision arithmetic to ``dtype`` (bf16, f16, fp8e4m3, fp8e5m2
    or f32) as ``apply_lowp`` does: one rounding, the overflow mode, NaN → the positive quiet
    NaN (D21)."""
    x = np.asarray(x)
    dst = DType.parse(dtype)
    if dtype_of(x) is not DType.F32:
        raise InvalidArgumentError(f"c_round_lowp: expected f32 results, got {dtype_of(x)}")
    if dst not in _ROUND_DSTS:
        raise InvalidArgumentError(bad_choice("c_round_lowp dtype", str(dst),
                                              [str(d) for d in _ROUND_DSTS]))
    _check(DType.F32, dst, overflow, "nearest")
    out = _run(f"f32_to_{dst}_{overflow}_pnan", x, bits_dtype(dst))
    return out.view(dst.storage)
