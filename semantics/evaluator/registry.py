"""The evaluator's registry: one implementation per op class (``register_eval``).

An implementation receives an ``EvalCtx`` (the op, its Call, the inferred result type) and the
operand values (numpy arrays of the operands' storage dtypes, rank-0 arrays for scalars; tuples
for tuple values) and returns the result value. Implementations are vectorized — never a Python
loop per element — and decide every edge case explicitly (ARCHITECTURE.md, numeric contracts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
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


CONTRACT_KINDS = ("exact", "ulp", "admitted_set", "unspecified", "permutation")


@dataclass(frozen=True)
class OpContract:
    """What the oracle must apply to one Call's result (ARCHITECTURE.md, numeric contracts).

    ``kind``: ``"exact"`` (bit-exact up to NaN class), ``"ulp"`` (within ``ulp`` units in the
    last place of ``dtype`` of the correctly rounded reference, per the ULP budget table),
    ``"admitted_set"`` (a tree-policy reduction or reassociating matmul: the reference value is
    one member of the set the ``policy`` admits), ``"unspecified"`` (``mask`` marks result
    elements whose value the contract leaves open, e.g. float -> int out of range),
    ``"permutation"`` (along ``axis`` each fiber may hold the reference's elements in any
    order: TopK with ``sorted=False``; values and indices permuted alike)."""

    op: str  # the op's display name, e.g. "Unary(exp)", "Reduce(sum)", "RMSNorm"
    kind: str
    dtype: Any = None  # DType of the result the contract speaks about
    ulp: float | None = None
    policy: str | None = None
    mask: Any = None  # numpy bool array (``unspecified``) or None
    detail: str = ""
    #: the operand values the contract is decided on (filled in by ``EvalCtx.note``): the
    #: reduction's input for a tree policy, the matmul operands, the transcendental's argument
    operands: tuple = field(default=(), repr=False, compare=False)
    #: decided on one device's local operands (a sharded op evaluated per device); the oracle
    #: judges the gathered value only where every contributing op is exact
    per_device: bool = False
    #: the axis a ``permutation`` contract permutes along
    axis: int | None = None

    def __post_init__(self):
        if self.kind not in CONTRACT_KINDS:
            raise TilefoundryError(f"OpContract.kind must be one of {CONTRACT_KINDS}, got "
                                   f"{self.kind!r}")


@dataclass
class EvalCtx:
    op: Any
    call: Any
    out_type: Any  # the Call's inferred type (TensorType / TupleType)
    contracts: list = field(default_factory=list)  # (call, OpContract) pairs, appended by note()
    args: tuple = ()  # the operand values of this Call (the contract's operands)
    #: DimVar bindings of the enclosing function (from its argument shapes): what a symbolic
    #: extent in an op attribute (Zeros.shape, Reshape.new_shape, TopK.k) resolves against
    dims: Mapping[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return type(self.op).__name__

    def error(self, message: str) -> NoReturn:
        raise EvaluationError(f"{self.name}: {message}")

    def note(self, contract: OpContract) -> None:
        """Attach the contract the oracle must apply to this Call's result (ops whose result
        is not simply bit-exact: transcendentals, tree reductions, unspecified values)."""
        if not contract.operands and self.args:
            contract = replace(contract, operands=tuple(self.args))
        self.contracts.append((self.call, contract))
