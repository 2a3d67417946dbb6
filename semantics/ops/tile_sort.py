"""Tile family (extensions of the HIR catalog): ``Sort``.

The Tile design's "Ordering and selection stay logical Tile operations": sort is a logical
permutation along an axis under a pure total order, returning the values and the int64 source
indices. The order (``semantics/ordering.py``): NaN placement, then value (ascending or
descending; -0 and +0 compare equal), then original index ascending — stable in both directions,
so ties between the two zero signs keep their source order (D223).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tilefoundry.semantics.ir import Op
from tilefoundry.semantics.ordering import NAN_PLACEMENTS
from tilefoundry.semantics.types import IRError


class _Tile(Op):
    FAMILY: ClassVar[str] = "tile"


@dataclass(frozen=True)
class Sort(_Tile):
    """``sort(x, axis, descending, nan)`` → ``(values, indices)``; ``nan``: ``"last"`` (NaNs
    after every number, either direction), ``"first"``, or ``"error"`` (a run-time check: the
    implemented API's non-NaN requirement)."""

    axis: int = -1
    descending: bool = False
    nan: str = "last"
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)

    def __post_init__(self):
        if not isinstance(self.axis, int) or isinstance(self.axis, bool):
            raise IRError(f"Sort.axis must be an int, got {self.axis!r}")
        if not isinstance(self.descending, bool):
            raise IRError(f"Sort.descending must be a bool, got {self.descending!r}")
        if not isinstance(self.nan, str) or self.nan not in NAN_PLACEMENTS:
            raise IRError(f"Sort.nan must be one of {NAN_PLACEMENTS}, got {self.nan!r}")
