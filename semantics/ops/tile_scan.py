"""ir/hir/tile (an extension family of the HIR catalog, from the Tile design): Scan.

The design's recurrence ("Why not just infer it from reduce?"), for an ordered fiber x[0..n) with
seed z and combine op::

    left prefix[0] = z
    left prefix[i + 1] = op(left prefix[i], x[i])
    inclusive[i] = left prefix[i + 1]
    exclusive[i] = left prefix[i]

``combine`` is ``add`` / ``max`` / ``min`` (every numeric dtype) or ``mul`` (integers only);
``policy`` is ``fold_left`` (that chain, exactly) or ``ordered_tree`` (each prefix may be
regrouped but keeps its leaf sequence and the seed once, first). A permuting policy
(``unordered_tree``) or ``fold_right`` is rejected: "scan must not inherit the permission to
globally permute reduction contributions". ``seed`` is None (no incoming state: the recurrence
starts at x0 and exclusive[0] is the combine's identity) or a finite Python number exactly
representable in x's dtype (checked by the type rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from tilefoundry.semantics.combine_laws import SCAN_COMBINES as _SCAN_COMBINES
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_select import _Tile
from tilefoundry.semantics.types import IRError

#: combine operations of Scan (``mul`` on integer dtypes only: a type rule); semantics/combine_laws.py
SCAN_COMBINES = _SCAN_COMBINES


def scan_combine_refuses(combine: str, dt: DType) -> bool:
    """The dtype fact of a Scan combine (D420), read by the type rule and the generator:
    ``mul`` takes integer dtypes only; ``add`` refuses bool and f8e8m0 (the sum is not
    representable in the input dtype, which the result keeps)."""
    if combine == "mul":
        return not dt.is_int
    if combine == "add":
        return dt is DType.BOOL or dt is DType.F8E8M0
    return False
#: the policies a scan may carry (never a permutation)
SCAN_POLICIES = ("fold_left", "ordered_tree")


@dataclass(frozen=True)
class Scan(_Tile):
    axis: int = -1
    combine: str = "add"
    inclusive: bool = True
    seed: int | float | None = None
    policy: str = "ordered_tree"
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)
    #: the orders the contract admits (D442): never a permutation
    POLICIES: ClassVar[tuple[str, ...]] = SCAN_POLICIES

    def __post_init__(self):
        if not isinstance(self.axis, int) or isinstance(self.axis, bool):
            raise IRError(f"Scan.axis must be an int, got {self.axis!r}")
        if not isinstance(self.combine, str) or self.combine not in SCAN_COMBINES:
            raise IRError(f"Scan.combine must be one of {SCAN_COMBINES}, got {self.combine!r}")
        if not isinstance(self.inclusive, bool):
            raise IRError(f"Scan.inclusive must be a bool, got {self.inclusive!r}")
        if not isinstance(self.policy, str):
            raise IRError(f"Scan.policy must be one of {self.POLICIES}, got "
                          f"{type(self.policy).__name__} {self.policy!r}")
        if self.policy not in self.POLICIES:
            why = (" (a scan never permutes contributions: the Tile design says scan 'must not "
                   "inherit the permission to globally permute reduction contributions')"
                   if self.policy == "unordered_tree" else
                   " (a scan follows the left prefix recurrence; to scan from the right, "
                   "reverse the axis with a Gather of indices n-1, ..., 0 first)"
                   if self.policy == "fold_right" else "")
            raise IRError(f"Scan.policy must be one of {self.POLICIES}, got "
                          f"{self.policy!r}{why}")
        s = self.seed
        if s is not None and (isinstance(s, bool) or not isinstance(s, int | float) or
                              (isinstance(s, float) and not math.isfinite(s))):
            raise IRError(f"Scan.seed must be None, an int or a finite float, got {s!r}; "
                          f"omit the seed to start the recurrence at x0")

    def _key(self) -> tuple:
        s = self.seed
        sign = math.copysign(1.0, s) if isinstance(s, float) else 0.0  # -0.0 != 0.0 as a seed
        return (self.axis, self.combine, self.inclusive, type(s).__name__, s, sign, self.policy)

    def __eq__(self, other: object) -> bool:
        return type(other) is Scan and self._key() == other._key()  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash(self._key())
