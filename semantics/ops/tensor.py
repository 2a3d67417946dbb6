"""ir/hir/tensor: structural tensor ops (Reshape, Cast, Gather, Zeros, Reduce, InsertSlice,
CacheUpdate, TopK) and the consensus torch / numpy ones (Transpose, Slice, Concat, Stack, ShapeOf,
Rank)."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import ClassVar

from tilefoundry.semantics.dtypes import OVERFLOW_MODES, ROUNDING_MODES
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Op
from tilefoundry.semantics.reductions import POLICIES
from tilefoundry.semantics.types import IRError, StorageKind, is_shape_dim


class ReduceKind(enum.Enum):
    SUM = "sum"
    MEAN = "mean"
    MAX = "max"
    MIN = "min"
    ABS_MAX = "abs_max"


def _int(v: object, what: str, lo: int | None = None) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or (lo is not None and v < lo):
        raise IRError(f"{what} must be an int{'' if lo is None else f' >= {lo}'}, got {v!r}")


def _ints(v: object, what: str) -> None:
    if not isinstance(v, tuple):
        raise IRError(f"{what} must be a tuple of ints, got {v!r}")
    for x in v:
        _int(x, what)


def _shape(v: object, what: str) -> None:
    if not isinstance(v, tuple) or not all(is_shape_dim(d) for d in v):
        raise IRError(f"{what} must be a tuple of ShapeDims, got {v!r}")


class _Tensor(Op):
    FAMILY: ClassVar[str] = "tensor"


@dataclass(frozen=True)
class Reshape(_Tensor):
    COPIES_BITS: ClassVar[bool] = True
    new_shape: tuple
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)

    def __post_init__(self):
        _shape(self.new_shape, "Reshape.new_shape")


@dataclass(frozen=True)
class Cast(_Tensor):
    """Extends the HIR Cast with ``overflow`` / ``rounding`` (ARCHITECTURE.md, numeric
    contracts: saturation is specified independently of the format)."""

    dtype: DType
    overflow: str = "nonfinite"
    rounding: str = "nearest"
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)

    def __post_init__(self):
        if not isinstance(self.dtype, DType):
            raise IRError(f"Cast.dtype must be a DType, got {self.dtype!r}")
        if not isinstance(self.overflow, str) or self.overflow not in OVERFLOW_MODES:
            raise IRError(f"Cast.overflow must be one of {OVERFLOW_MODES}, got "
                          f"{self.overflow!r}")
        if not isinstance(self.rounding, str) or self.rounding not in ROUNDING_MODES:
            raise IRError(f"Cast.rounding must be one of {ROUNDING_MODES}, got "
                          f"{self.rounding!r}")


@dataclass(frozen=True)
class Gather(_Tensor):
    """``fill`` (Tile design: "gather supplies a logical shift with defined boundary fill";
    D388): None — every index MUST be in range — or a finite number exactly representable in
    x's dtype that an out-of-range index (negative or >= n) reads instead."""
    COPIES_BITS: ClassVar[bool] = True
    axis: int
    batch_dims: int = 0
    fill: int | float | None = None
    INPUTS: ClassVar[tuple[str, ...]] = ("x", "indices")

    def __post_init__(self):
        _int(self.axis, "Gather.axis")
        _int(self.batch_dims, "Gather.batch_dims", 0)
        f = self.fill
        if f is not None and (isinstance(f, bool) or not isinstance(f, int | float) or
                              (isinstance(f, float) and not math.isfinite(f))):
            raise IRError(f"Gather.fill must be None, an int or a finite float, got {f!r}; "
                          f"omit it to require in-range indices")

    def _key(self) -> tuple:
        f = self.fill
        sign = math.copysign(1.0, f) if isinstance(f, float) else 0.0  # -0.0 != 0.0 as a fill
        return (self.axis, self.batch_dims, type(f).__name__, f, sign)

    def __eq__(self, other: object) -> bool:
        return type(other) is Gather and self._key() == other._key()  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True)
class Zeros(_Tensor):
    shape: tuple
    dtype: DType
    storage: StorageKind = StorageKind.GMEM
    INPUTS: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        _shape(self.shape, "Zeros.shape")
        if not isinstance(self.dtype, DType):
            raise IRError(f"Zeros.dtype must be a DType, got {self.dtype!r}")
        if not isinstance(self.storage, StorageKind):
            raise IRError(f"Zeros.storage must be a StorageKind, got {self.storage!r}")


@dataclass(frozen=True)
class Reduce(_Tensor):
    """``policy`` extends the HIR Reduce with the Tile design's reduction policies."""

    axes: tuple
    keepdim: bool = True
    kind: ReduceKind = ReduceKind.MEAN
    policy: str = "unordered_tree"
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)
    #: the orders the contract admits (D442): every reduction policy
    POLICIES: ClassVar[tuple[str, ...]] = POLICIES

    def __post_init__(self):
        _ints(self.axes, "Reduce.axes")
        if not isinstance(self.keepdim, bool):
            raise IRError(f"Reduce.keepdim must be a bool, got {self.keepdim!r}")
        if not isinstance(self.kind, ReduceKind):
            raise IRError(f"Reduce.kind must be a ReduceKind, got {self.kind!r}")
        if not isinstance(self.policy, str) or self.policy not in self.POLICIES:
            raise IRError(f"Reduce.policy must be one of {self.POLICIES}, got {self.policy!r}")


@dataclass(frozen=True)
class InsertSlice(_Tensor):
    """Inputs (dst, update, *offsets): one rank-0 integer offset per axis of dst."""
    COPIES_BITS: ClassVar[bool] = True

    INPUTS: ClassVar[tuple[str, ...]] = ("dst", "update", "offsets")
    VARIADIC: ClassVar[bool] = True


@dataclass(frozen=True)
class CacheUpdate(_Tensor):
    COPIES_BITS: ClassVar[bool] = True
    INPUTS: ClassVar[tuple[str, ...]] = ("cache", "cur_pos", "s", "new")


@dataclass(frozen=True)
class TopK(_Tensor):
    k: object
    axis: int = -1
    largest: bool = True
    sorted: bool = True
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)

    def __post_init__(self):
        _int(self.axis, "TopK.axis")
        for f in ("largest", "sorted"):
            if not isinstance(getattr(self, f), bool):
                raise IRError(f"TopK.{f} must be a bool, got {getattr(self, f)!r}")
        # k's ShapeDim contract is a type rule (HIR TopK: "any other value fails typeinfer")


@dataclass(frozen=True)
class Transpose(_Tensor):
    COPIES_BITS: ClassVar[bool] = True
    perm: tuple
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)

    def __post_init__(self):
        _ints(self.perm, "Transpose.perm")


@dataclass(frozen=True)
class Slice(_Tensor):
    COPIES_BITS: ClassVar[bool] = True
    begin: tuple
    end: tuple
    strides: tuple | None = None
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)

    def __post_init__(self):
        _shape(self.begin, "Slice.begin")
        _shape(self.end, "Slice.end")
        if self.strides is not None:
            _ints(self.strides, "Slice.strides")


@dataclass(frozen=True)
class Concat(_Tensor):
    COPIES_BITS: ClassVar[bool] = True
    axis: int = 0
    INPUTS: ClassVar[tuple[str, ...]] = ("xs",)
    VARIADIC: ClassVar[bool] = True

    def __post_init__(self):
        _int(self.axis, "Concat.axis")


@dataclass(frozen=True)
class Stack(_Tensor):
    COPIES_BITS: ClassVar[bool] = True
    axis: int = 0
    INPUTS: ClassVar[tuple[str, ...]] = ("xs",)
    VARIADIC: ClassVar[bool] = True

    def __post_init__(self):
        _int(self.axis, "Stack.axis")


@dataclass(frozen=True)
class ShapeOf(_Tensor):
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)


@dataclass(frozen=True)
class Rank(_Tensor):
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)
