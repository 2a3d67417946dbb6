"""ir/hir/nn: neural-network value ops following torch.nn.functional semantics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tilefoundry.semantics.ir import Op
from tilefoundry.semantics.ops.math import UNARY_PROPERTIES, UnaryKind
from tilefoundry.semantics.types import IRError


class _NN(Op):
    FAMILY: ClassVar[str] = "nn"
    #: Op facts (D420): the order / algebra properties that rules depend on, stated once here
    #: and read by the Partial commutation table (typeinfer), the SMT commutation models, the
    #: enclosure rules and the op-registry completeness test. Same vocabulary as
    #: ``UNARY_PROPERTIES`` ("monotone" = monotone non-decreasing, "linear",
    #: "order_reversing"). ``None``: not an elementwise activation (no per-element fact).
    FACTS: ClassVar[frozenset[str] | None] = None


#: the largest stride / padding / dilation / groups: extents and indices are int64 arithmetic
_ATTR_MAX = (1 << 62) - 1


def _pair(v: object, what: str, lo: int) -> None:
    if not (isinstance(v, tuple) and len(v) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) and lo <= x <= _ATTR_MAX
            for x in v)):
        raise IRError(f"{what} must be a pair of ints in [{lo}, 2**62), got {v!r}")


@dataclass(frozen=True)
class MatMul(_NN):
    allow_reassociation: bool = True
    INPUTS: ClassVar[tuple[str, ...]] = ("a", "b")

    def __post_init__(self):
        if not isinstance(self.allow_reassociation, bool):
            raise IRError(f"MatMul.allow_reassociation must be a bool, got "
                          f"{self.allow_reassociation!r}")


@dataclass(frozen=True)
class Conv2D(_NN):
    """NCHW input, OIHW weight, optional bias (pass a zeros tensor for none)."""

    stride: tuple = (1, 1)
    padding: tuple = (0, 0)
    dilation: tuple = (1, 1)
    groups: int = 1
    INPUTS: ClassVar[tuple[str, ...]] = ("x", "weight", "bias")

    def __post_init__(self):
        _pair(self.stride, "Conv2D.stride", 1)
        _pair(self.padding, "Conv2D.padding", 0)
        _pair(self.dilation, "Conv2D.dilation", 1)
        if not isinstance(self.groups, int) or isinstance(self.groups, bool) or \
                not 1 <= self.groups <= _ATTR_MAX:
            raise IRError(f"Conv2D.groups must be an int in [1, 2**62) (not a bool), got "
                          f"{self.groups!r}")


@dataclass(frozen=True)
class ReLU(_NN):
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)
    #: HIR nn entry: "ReLU / Sigmoid / Tanh are monotone non-decreasing elementwise"; ReLU is
    #: the Unary relu kind, so it reads that kind's property set.
    FACTS: ClassVar[frozenset[str] | None] = UNARY_PROPERTIES[UnaryKind.RELU]


@dataclass(frozen=True)
class Sigmoid(_NN):
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)
    FACTS: ClassVar[frozenset[str] | None] = frozenset({"monotone"})


@dataclass(frozen=True)
class Tanh(_NN):
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)
    FACTS: ClassVar[frozenset[str] | None] = frozenset({"monotone"})


@dataclass(frozen=True)
class SoftMax(_NN):
    axis: int = -1
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)

    def __post_init__(self):
        if not isinstance(self.axis, int) or isinstance(self.axis, bool):
            raise IRError(f"SoftMax.axis must be an int, got {self.axis!r}")


@dataclass(frozen=True)
class LayerNorm(_NN):
    """Normalizes over the last axis; weight and bias are rank-1 of that length."""

    eps: float = 1e-5
    INPUTS: ClassVar[tuple[str, ...]] = ("x", "weight", "bias")

    def __post_init__(self):
        if not isinstance(self.eps, float) or not self.eps > 0:
            raise IRError(f"LayerNorm.eps must be a positive float, got {self.eps!r}")


@dataclass(frozen=True)
class Gelu(_NN):
    approximate: str = "tanh"
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)
    #: HIR nn entry: "not monotone" (x·Φ(x) dips below zero)
    FACTS: ClassVar[frozenset[str] | None] = frozenset()

    def __post_init__(self):
        if not isinstance(self.approximate, str) or self.approximate not in ("tanh", "none"):
            raise IRError(f"Gelu.approximate must be 'tanh' or 'none', got "
                          f"{self.approximate!r}")


@dataclass(frozen=True)
class Silu(_NN):
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)
    #: HIR nn entry: "not monotone" (minimum near x = -1.278)
    FACTS: ClassVar[frozenset[str] | None] = frozenset()


@dataclass(frozen=True)
class RMSNorm(_NN):
    eps: float = 1e-6
    INPUTS: ClassVar[tuple[str, ...]] = ("x", "weight")

    def __post_init__(self):
        if not isinstance(self.eps, float) or not self.eps > 0:
            raise IRError(f"RMSNorm.eps must be a positive float, got {self.eps!r}")


@dataclass(frozen=True)
class RoPE(_NN):
    """Rotate-half RoPE; result (q_rope, k_rope)."""

    INPUTS: ClassVar[tuple[str, ...]] = ("q", "k", "cos_cache", "sin_cache", "pos_ids")


#: The elementwise activations (one input, one output of the same shape), in catalog order;
#: each states its facts as ``FACTS`` above.
ACTIVATIONS: tuple[type[_NN], ...] = (ReLU, Sigmoid, Tanh, Gelu, Silu)
