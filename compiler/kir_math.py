"""The kernel IR's ``math`` functions as one table (issue 36 item 3, D437).

``MATH_OPS`` maps each ``math`` function name to the HIR op whose reference evaluator defines it.
The name is also the op's key in the ULP table (``semantics/ulp.py``): the reference notes
``budget(name, dtype)`` for it, and a kernel computing ``math`` is held to that budget. Everything
else derives from this one table:

* the verifier's set of admitted names (``kir.MATH_FNS``);
* the interpreter's semantics of each name (the op's registered evaluator, called as the
  reference calls it, so the interpreter and the reference agree bit for bit on f32 and narrower);
* which nn activation classes lower to one ``math`` (``MATH_ACTIVATIONS``, the lowering's
  registration) and the name a node lowers to (``math_fn_of``).

Adding an elementwise op computed by one ``math`` instruction is one entry here (plus its ULP
budget, its renderer spellings and its docs row, each checked by a completeness test in
``tests/package/test_op_registries.py`` / ``tests/package/test_docs_counts.py``).

``LIBM64`` is the f64 subset (the wide kernels' libm calls) with its numpy function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import numpy as np

from tilefoundry.semantics.ops import Op, Unary, UnaryKind
from tilefoundry.semantics.ops.nn import Gelu, ReLU, Sigmoid, Silu, Tanh

__all__ = ["LIBM64", "MATH_ACTIVATIONS", "MATH_FNS", "MATH_OPS", "NOT_MATH", "math_fn_of"]

#: math function name (= ULP table key) -> the HIR op whose evaluator is its semantics
MATH_OPS: Mapping[str, Op] = MappingProxyType({
    "exp": Unary(UnaryKind.EXP),
    "log": Unary(UnaryKind.LOG),
    "exp2": Unary(UnaryKind.EXP2),
    "log2": Unary(UnaryKind.LOG2),
    "rsqrt": Unary(UnaryKind.RSQRT),
    "tanh": Tanh(),
    "sigmoid": Sigmoid(),
    "silu": Silu(),
    "gelu_tanh": Gelu("tanh"),
    "gelu_none": Gelu("none"),
})

#: the names the verifier admits, in table order
MATH_FNS: tuple[str, ...] = tuple(MATH_OPS)

#: the names with an f64 libm function (the wide kernels' statistics), and that function
LIBM64: Mapping[str, Callable[[np.ndarray], np.ndarray]] = MappingProxyType({
    "exp": np.exp, "log": np.log, "exp2": np.exp2, "log2": np.log2, "tanh": np.tanh,
})

#: the nn activation classes lowered to one ``math`` instruction
MATH_ACTIVATIONS: tuple[type[Op], ...] = tuple(dict.fromkeys(
    type(op) for op in MATH_OPS.values() if getattr(type(op), "FAMILY", None) == "nn"))

#: elementwise classes that are not a ``math`` function, with the reason (the completeness test
#: requires every activation and every transcendental Unary kind to be one or the other)
NOT_MATH: Mapping[type[Op], str] = MappingProxyType({
    ReLU: "exact (no rounding): the kernel IR's unop relu",
})


def math_fn_of(op: Op) -> str | None:
    """The ``math`` function name that computes ``op``, or None."""
    for name, o in MATH_OPS.items():
        if o == op:
            return name
    return None
