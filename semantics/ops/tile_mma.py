"""Tile family (extensions of the HIR catalog): ``Mma``, matrix multiply-accumulate.

The Tile design's "MMA is a portable value primitive": ``mma(a, b, acc)`` with the accumulator
as an operand of its own dtype; ``a [*B, M, K]``, ``b [*B, K, N]``, ``acc [*B, M, N]`` (batch,
M, K and N roles by position; see D226). ``allow_reassociation`` (default True) admits any
contraction order; False keeps the reference K order. Input precision is never reduced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tilefoundry.semantics.ops.tile_sort import _Tile
from tilefoundry.semantics.types import IRError


@dataclass(frozen=True)
class Mma(_Tile):
    allow_reassociation: bool = True
    INPUTS: ClassVar[tuple[str, ...]] = ("a", "b", "acc")

    def __post_init__(self):
        if not isinstance(self.allow_reassociation, bool):
            raise IRError(f"Mma.allow_reassociation must be a bool, got "
                          f"{self.allow_reassociation!r}")
