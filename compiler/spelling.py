"""Scalar spellings shared by the C-family renderers (issue 36 item 5, D423).

One table per operator kind, spelled the C way; the SIMD C renderer (``render_c``), the CUDA
renderer (``render_cuda``) and the Triton renderer (``render_triton``) read them from here
instead of from each other's private names. A target whose spelling differs overrides the
entry in its own table (the way tinygrad's renderers override ``code_for_op``), and
``tests/compiler/test_spelling.py`` checks every table against the kernel IR's own sets
(``kir.MATH_FNS``), so adding a ``math`` function without a spelling for every target fails a
test instead of surfacing as a NotSupportedError at render time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from tilefoundry.compiler import kir

__all__ = [
    "ARITH",
    "CMP",
    "CSIZE",
    "CTYPE",
    "C_MATH64",
    "LOGIC",
    "NARROW_ROUND",
    "TRITON_MATH",
    "TRITON_MMA_TL",
    "TRITON_NARROW_F32_MATH",
    "TRITON_TL",
    "UTYPE",
    "c_f64_literal",
    "c_literal",
    "triton_name",
]

#: binary arithmetic ``Binary`` kinds -> C infix operator (Triton's Python spelling agrees)
ARITH: Mapping[str, str] = MappingProxyType({"add": "+", "sub": "-", "mul": "*", "div": "/"})
#: comparison kinds -> C infix operator
CMP: Mapping[str, str] = MappingProxyType(
    {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="})
#: bitwise logic kinds -> C infix operator
LOGIC: Mapping[str, str] = MappingProxyType({"and": "&", "or": "|", "xor": "^"})
#: the narrow float dtypes a cast rounds to by a rounding mode (the C prelude's ``tf_round_*``
#: and the Triton prelude's bit-level rounding)
NARROW_ROUND: tuple[str, ...] = ("bf16", "f16", "fp8e4m3", "fp8e5m2")

#: ``math`` function -> the C prelude's f64 function (the f32 and narrower kernels widen to
#: double, call it, and round once)
C_MATH64: Mapping[str, str] = MappingProxyType({
    "exp": "TF_EXP", "log": "TF_LOG", "exp2": "TF_EXP2", "log2": "TF_LOG2", "tanh": "TF_TANH",
    "rsqrt": "tf__rsqrt64", "sigmoid": "tf__sigmoid64", "silu": "tf__silu64",
    "gelu_tanh": "tf__gelu_tanh64", "gelu_none": "tf__gelu_none64"})
#: the ``math`` functions the Triton renderer spells in f64 (``_KernelT.i_Math``)
TRITON_MATH: tuple[str, ...] = ("exp", "log", "exp2", "log2", "rsqrt", "tanh", "sigmoid", "silu",
                                "gelu_tanh", "gelu_none")
#: the ``math`` functions with a fast f32 form for narrow dtypes (``_KernelT.math_narrow_f32``)
TRITON_NARROW_F32_MATH: frozenset[str] = frozenset({"exp", "sigmoid", "silu"})

#: kernel-IR dtype -> the in-kernel Triton element type of an SSA value (narrow floats are
#: their bit patterns in unsigned integers)
TRITON_TL: Mapping[str, str] = MappingProxyType({
    "f32": "tl.float32", "f64": "tl.float64", "bf16": "tl.uint16", "f16": "tl.uint16",
    "fp8e4m3": "tl.uint8", "fp8e5m2": "tl.uint8", "f8e8m0": "tl.uint8", "bool": "tl.int1",
    "i8": "tl.int8", "u8": "tl.uint8", "i32": "tl.int32", "i64": "tl.int64",
    "u32": "tl.uint32"})
#: narrow dtype -> the Triton element type ``tl.dot`` takes its bits as (tensor cores)
TRITON_MMA_TL: Mapping[str, str] = MappingProxyType({
    "bf16": "tl.bfloat16", "f16": "tl.float16", "fp8e4m3": "tl.float8e4nv",
    "fp8e5m2": "tl.float8e5"})


def triton_name(ssa: str) -> str:
    """The Python name of SSA value ``ssa`` in a rendered Triton kernel."""
    return "v_" + re.sub(r"[^0-9A-Za-z_]", "_", ssa)


# -- C-family storage types and literals (render_c, render_cuda, render_cuda_rows, render_cuda_mma)
#: kernel-IR dtype -> its C storage type (narrow floats are their bit patterns)
CTYPE: Mapping[str, str] = MappingProxyType({
    "f32": "float", "f64": "double", "bf16": "uint16_t", "f16": "uint16_t",
    "fp8e4m3": "uint8_t", "fp8e5m2": "uint8_t", "f8e8m0": "uint8_t", "bool": "uint8_t",
    "i8": "int8_t", "u8": "uint8_t", "i32": "int32_t", "i64": "int64_t", "u32": "uint32_t"})
#: integer / bool dtype -> the unsigned C type of the same width (wrapping arithmetic)
UTYPE: Mapping[str, str] = MappingProxyType({
    "i8": "uint8_t", "u8": "uint8_t", "i32": "uint32_t", "i64": "uint64_t", "bool": "uint8_t",
    "u32": "uint32_t"})
#: C type -> its size in bytes
CSIZE: Mapping[str, int] = MappingProxyType({
    "float": 4, "double": 8, "int8_t": 1, "uint8_t": 1, "uint16_t": 2, "int32_t": 4,
    "uint32_t": 4, "int64_t": 8, "uint64_t": 8})


def c_f64_literal(v: float) -> str:
    """An f64 constant by its bits (no decimal round trip)."""
    return f"tf_f64_from_bits(0x{int(np.float64(v).view(np.uint64)):016X}ull)"


def c_literal(value: object, dt: str) -> str:
    """A constant of kernel-IR dtype ``dt`` in C: floats by their bits, narrow floats as their
    storage pattern, integers with their C type."""
    if dt == "f32":
        return f"tf_f32_from_bits(0x{int(np.float32(value).view(np.uint32)):08X}u)"
    if dt == "f64":
        return c_f64_literal(float(value))
    if dt == "bool":
        return "1" if value else "0"
    if kir.is_float(dt):  # a narrow float: its bit pattern
        npdt = kir.numpy_dtype(dt)
        bits = np.asarray(np.asarray(value).astype(npdt)).view(f"u{npdt.itemsize}")
        return f"(({CTYPE[dt]}){int(bits)}u)"
    if dt == "i64" and int(value) == -(1 << 63):
        return "INT64_MIN"
    return f"(({CTYPE[dt]}){int(value)}ll)"
