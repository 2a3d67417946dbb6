"""ir/hir/tile (from the Tile design): the flagged scans, MaskedScan and SegmentedScan.

Both carry Scan's attributes (``axis``, ``combine``, ``inclusive``, ``seed``, ``policy``, with
Scan's checks) and a second input of bool flags with x's shape:

* ``MaskedScan(x, mask)`` — "Masked contributions are skipped under a defined mask contract,
  rather than treating every padding value as a valid identity": a contribution x[j] whose
  mask[j] is false enters no prefix (no identity is substituted for it); output i is the left
  recurrence over the unmasked contributions up to i (inclusive) or before i (exclusive), the
  seed first, once. A prefix with no contribution and no seed is the combine's identity.
* ``SegmentedScan(x, heads)`` — "segmented scans can use a lifted (head, value) associative
  state": heads[j] true starts a new segment at j. The state is the lifted pair combined by
  ``(h1, v1) ⊕ (h2, v2) = (h1 or h2, v2 if h2 else op(v1, v2))`` (associative: proved in
  ``smt/obligations/scan_segmented.py``; the evaluator folds that very function). The seed is
  the lifted ``(false, seed)`` in front of x0: it enters the prefixes before the first head
  only — an incoming chunk state never leaks across a segment head. Exclusive output at a head
  is the combine's identity (its segment has no earlier element).

The admitted numerics are Scan's (docs/decisions.md D219, D385).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from tilefoundry.semantics.ops.tile_scan import Scan
from tilefoundry.semantics.ops.tile_select import _Tile
from tilefoundry.semantics.types import IRError


@dataclass(frozen=True)
class _FlaggedScan(_Tile):
    axis: int = -1
    combine: str = "add"
    inclusive: bool = True
    seed: int | float | None = None
    policy: str = "ordered_tree"
    #: the orders the contract admits (D442): Scan's (its checks run on a Scan)
    POLICIES: ClassVar[tuple[str, ...]] = Scan.POLICIES

    def __post_init__(self):
        name = type(self).__name__
        try:  # Scan's attribute checks, under this op's name
            Scan(self.axis, self.combine, self.inclusive, self.seed, self.policy)
        except IRError as e:
            raise IRError(str(e).replace("Scan.", f"{name}.", 1)) from None

    def as_scan(self) -> Scan:
        """The plain Scan with the same attributes (what an all-true mask / no head means)."""
        return Scan(self.axis, self.combine, self.inclusive, self.seed, self.policy)

    def _key(self) -> tuple:
        s = self.seed
        sign = math.copysign(1.0, s) if isinstance(s, float) else 0.0
        return (type(self).__name__, self.axis, self.combine, self.inclusive, type(s).__name__,
                s, sign, self.policy)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True, eq=False)
class MaskedScan(_FlaggedScan):
    """Scan over the contributions whose mask is true (masked ones skipped, never padded)."""
    INPUTS: ClassVar[tuple[str, ...]] = ("x", "mask")


@dataclass(frozen=True, eq=False)
class SegmentedScan(_FlaggedScan):
    """Scan restarting at every head (the lifted (head, value) state); the seed before the
    first head only."""
    INPUTS: ClassVar[tuple[str, ...]] = ("x", "heads")


FLAGGED_SCANS = (MaskedScan, SegmentedScan)

__all__ = ["FLAGGED_SCANS", "MaskedScan", "SegmentedScan"]
