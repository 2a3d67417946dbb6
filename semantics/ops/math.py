"""ir/hir/math: Binary and Unary, kind-tagged pointwise ops (torch pointwise semantics).

Op properties that rules depend on (linear, monotone non-decreasing, order-reversing) are
recorded once here as data; the Partial commutation table, the SMT encodings and the tests read
them from here."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

from tilefoundry.semantics.ir import Op
from tilefoundry.semantics.types import IRError


class BinaryKind(enum.Enum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MIN = "min"
    MAX = "max"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    AND = "and"
    OR = "or"
    XOR = "xor"

    @property
    def is_comparison(self) -> bool:
        return self in _COMPARISONS

    @property
    def is_boolean(self) -> bool:
        return self in _BOOLEAN


_COMPARISONS = frozenset({BinaryKind.EQ, BinaryKind.NE, BinaryKind.LT, BinaryKind.LE,
                          BinaryKind.GT, BinaryKind.GE})
_BOOLEAN = frozenset({BinaryKind.AND, BinaryKind.OR, BinaryKind.XOR})


class UnaryKind(enum.Enum):
    NEG = "neg"
    ABS = "abs"
    LOGICAL_NOT = "logical_not"
    RSQRT = "rsqrt"
    EXP = "exp"
    LOG = "log"
    CEIL = "ceil"
    ROUND = "round"
    EXP2 = "exp2"
    LOG2 = "log2"
    RELU = "relu"
    SQUARE = "square"
    SQRT = "sqrt"


#: HIR Unary entry: "exp / log / relu / ceil / round / exp2 / log2 are monotone non-decreasing
#: ... neg is linear ... abs / square / rsqrt / logical_not are not proven to commute with any
#: reduction". sqrt is monotone non-decreasing on its domain too (not named by the spec).
#: Dtype facts (D420): "float_only" kinds are defined on float dtypes only (transcendentals and
#: roots); "numeric" kinds take floats and integers, not bool; logical_not takes bool only.
UNARY_PROPERTIES: dict[UnaryKind, frozenset[str]] = {
    UnaryKind.NEG: frozenset({"linear", "order_reversing", "numeric"}),
    UnaryKind.ABS: frozenset({"numeric"}),
    UnaryKind.LOGICAL_NOT: frozenset(),
    UnaryKind.RSQRT: frozenset({"float_only"}),
    UnaryKind.EXP: frozenset({"monotone", "float_only"}),
    UnaryKind.LOG: frozenset({"monotone", "float_only"}),
    UnaryKind.CEIL: frozenset({"monotone", "numeric"}),
    UnaryKind.ROUND: frozenset({"monotone", "numeric"}),
    UnaryKind.EXP2: frozenset({"monotone", "float_only"}),
    UnaryKind.LOG2: frozenset({"monotone", "float_only"}),
    UnaryKind.RELU: frozenset({"monotone", "numeric"}),
    UnaryKind.SQUARE: frozenset({"numeric"}),
    UnaryKind.SQRT: frozenset({"monotone", "float_only"}),
}

#: Unary kinds defined only on floats / on floats and integers (read by the type rule and the
#: generator; derived from the facts above).
FLOAT_ONLY_UNARY = frozenset(k for k, p in UNARY_PROPERTIES.items() if "float_only" in p)
NUMERIC_UNARY = frozenset(k for k, p in UNARY_PROPERTIES.items() if "numeric" in p)

#: Algebraic facts about binary kinds that the commutation table reads.
BINARY_PROPERTIES: dict[BinaryKind, frozenset[str]] = {
    BinaryKind.ADD: frozenset({"additive", "translation"}),
    BinaryKind.SUB: frozenset(),
    BinaryKind.MUL: frozenset({"bilinear"}),
    **{k: frozenset() for k in BinaryKind if k not in (BinaryKind.ADD, BinaryKind.SUB,
                                                        BinaryKind.MUL)},
}


@dataclass(frozen=True)
class Binary(Op):
    """Kind-tagged pointwise binary operation; inputs (lhs, rhs)."""

    kind: BinaryKind
    INPUTS: ClassVar[tuple[str, ...]] = ("lhs", "rhs")
    FAMILY: ClassVar[str] = "math"

    def __post_init__(self):
        if not isinstance(self.kind, BinaryKind):
            raise IRError(f"Binary.kind must be a BinaryKind, got {self.kind!r}")


@dataclass(frozen=True)
class Unary(Op):
    """Kind-tagged pointwise unary operation; input (x,)."""

    kind: UnaryKind
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)
    FAMILY: ClassVar[str] = "math"

    def __post_init__(self):
        if not isinstance(self.kind, UnaryKind):
            raise IRError(f"Unary.kind must be a UnaryKind, got {self.kind!r}")


#: Surface names -> (op class, kind). "minimum" / "maximum" surface the MIN / MAX kinds.
ALIASES: dict[str, tuple[type[Op], enum.Enum]] = {
    "add": (Binary, BinaryKind.ADD), "sub": (Binary, BinaryKind.SUB),
    "mul": (Binary, BinaryKind.MUL), "div": (Binary, BinaryKind.DIV),
    "minimum": (Binary, BinaryKind.MIN), "maximum": (Binary, BinaryKind.MAX),
    "cmp_eq": (Binary, BinaryKind.EQ), "cmp_ne": (Binary, BinaryKind.NE),
    "cmp_lt": (Binary, BinaryKind.LT), "cmp_le": (Binary, BinaryKind.LE),
    "cmp_gt": (Binary, BinaryKind.GT), "cmp_ge": (Binary, BinaryKind.GE),
    "logical_and": (Binary, BinaryKind.AND), "logical_or": (Binary, BinaryKind.OR),
    "logical_xor": (Binary, BinaryKind.XOR),
    **{k.value: (Unary, k) for k in UnaryKind},
}
