"""ir/hir/shape: shape-level ops on whole shape values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tilefoundry.semantics.ir import Op
from tilefoundry.semantics.types import IRError


@dataclass(frozen=True)
class ShapeExtract(Op):
    """Extract one axis of a shape value; produces a Dim."""

    index: int
    INPUTS: ClassVar[tuple[str, ...]] = ("shape",)
    FAMILY: ClassVar[str] = "shape"

    def __post_init__(self):
        if not isinstance(self.index, int) or isinstance(self.index, bool):
            raise IRError(f"ShapeExtract.index must be an int, got {self.index!r}")


@dataclass(frozen=True)
class ShapeCompose(Op):
    """Assemble per-axis dims into a shape value, in input order."""

    INPUTS: ClassVar[tuple[str, ...]] = ("dims",)
    VARIADIC: ClassVar[bool] = True
    FAMILY: ClassVar[str] = "shape"
