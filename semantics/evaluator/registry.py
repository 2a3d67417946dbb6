"""The evaluator's registry: one implementation per op class (``register_eval``).

An implementation receives an ``EvalCtx`` (the op, its Call, the inferred result type) and the
operand values (numpy arrays of the operands' storage dtypes, rank-0 arrays for scalars; tuples
for tuple values) and returns the result value. Implementations are vectorized — never a Python
loop per element — and decide every edge case explicitly (ARCHITECTURE.md, numeric contracts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from tilefoundry.errors import TilefoundryError


class EvaluationError(TilefoundryError, RuntimeError):
    """A runtime check of the semantics failed (bounds, envelopes, extents) or the inputs do not
    match the entry function's signature. Names the op or parameter and the offending values."""


EvalFn = Callable[["EvalCtx", tuple], Any]
EVALUATORS: dict[type, EvalFn] = {}


def register_eval(op_cls: type) -> Callable[[EvalFn], EvalFn]:
    def deco(fn: EvalFn) -> EvalFn:
        if op_cls in EVALUATORS:
            raise TilefoundryError(f"register_eval: {op_cls.__name__} already has an evaluator")
        EVALUATORS[op_cls] = fn
        return fn

    return deco


@dataclass
class EvalCtx:
    op: Any
    call: Any
    out_type: Any  # the Call's inferred type (TensorType / TupleType)

    @property
    def name(self) -> str:
        return type(self.op).__name__

    def error(self, message: str) -> NoReturn:
        raise EvaluationError(f"{self.name}: {message}")
