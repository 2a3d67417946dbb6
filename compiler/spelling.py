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

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
           "ARITH",
           "CMP",
           "C_MATH64",
           "LOGIC",
           "NARROW_ROUND",
           "TRITON_MATH",
           "TRITON_NARROW_F32_MATH",
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
#: the ``math`` functions the Triton renderer spells in f64 (its ``_KernelT.math`` branches)
TRITON_MATH: tuple[str, ...] = ("exp", "log", "exp2", "log2", "rsqrt", "tanh", "sigmoid", "silu",
                                "gelu_tanh", "gelu_none")
#: the ``math`` functions with a fast f32 form for narrow dtypes (``_KernelT.math_narrow_f32``)
TRITON_NARROW_F32_MATH: frozenset[str] = frozenset({"exp", "sigmoid", "silu"})
