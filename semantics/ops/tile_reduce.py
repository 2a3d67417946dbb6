"""ir/tile (an extension family of the HIR catalog): the Tile design's reductions with an
explicit seed and a mask, and reductions by a declared custom reducer.

* ``SeededReduce(x, seed)`` — sum / max / min of ``x`` over ``axes`` under ``policy``, with the
  incoming state ``seed`` (the result's shape, x's dtype) included exactly once in its
  position: first for fold_left, last for fold_right, the leftmost leaf for ordered_tree, any
  leaf for unordered_tree. An empty fiber returns the seed.
* ``MaskedReduce(x, seed, mask)`` — the same with a bool ``mask`` of x's shape: masked-out
  occurrences are skipped (never replaced by a padding value); a fully masked fiber returns the
  seed.
* ``CustomReduce(x, seed)`` — a reduction by the reducer ``reducer`` named in the declarative
  registry ``semantics.reducers.REDUCERS`` (Welford, a product reducer, a fold-only
  difference). Its state is a trailing axis of ``S`` f32 components (``seed`` and the result:
  the reduced shape plus ``(S,)``). With ``reducer=TopKMerge(k, largest, nan)`` (the Top-K
  merge over (value, index) states, ``semantics/topk_reducer.py``, D486) the state is the pair
  ``(values, indices)`` of the reduced shape plus ``(K,)``: the seed a Tuple of the two, the
  result a tuple.

The existing HIR ``Reduce`` is unchanged (its empty fiber gives the HIR identity).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tilefoundry.semantics.combine_laws import REDUCE_COMBINES
from tilefoundry.semantics.ir import Op
from tilefoundry.semantics.reductions import POLICIES
from tilefoundry.semantics.types import IRError

#: the kinds a seeded / masked reduction takes (mean has no seeded meaning; abs_max would
#: leave the seed's sign open)
SEEDED_KINDS = tuple(REDUCE_COMBINES)


class _Tile(Op):
    FAMILY: ClassVar[str] = "tile"


def _axes(v: object, what: str) -> None:
    if not isinstance(v, tuple) or not all(isinstance(a, int) and not isinstance(a, bool)
                                           for a in v):
        raise IRError(f"{what} must be a tuple of ints, got {v!r}")


def _common(self, name: str) -> None:
    _axes(self.axes, f"{name}.axes")
    if not isinstance(self.keepdim, bool):
        raise IRError(f"{name}.keepdim must be a bool, got {self.keepdim!r}")
    if not isinstance(self.policy, str) or self.policy not in self.POLICIES:
        raise IRError(f"{name}.policy must be one of {self.POLICIES}, got {self.policy!r}")


@dataclass(frozen=True)
class SeededReduce(_Tile):
    axes: tuple
    kind: str = "sum"
    policy: str = "unordered_tree"
    keepdim: bool = True
    INPUTS: ClassVar[tuple[str, ...]] = ("x", "seed")
    #: the orders the contract admits (D442); MaskedReduce inherits them
    POLICIES: ClassVar[tuple[str, ...]] = POLICIES

    def __post_init__(self):
        _common(self, type(self).__name__)
        if not isinstance(self.kind, str) or self.kind not in SEEDED_KINDS:
            raise IRError(f"{type(self).__name__}.kind must be one of {SEEDED_KINDS}, got "
                          f"{self.kind!r}")


@dataclass(frozen=True)
class MaskedReduce(SeededReduce):
    INPUTS: ClassVar[tuple[str, ...]] = ("x", "seed", "mask")


@dataclass(frozen=True)
class CustomReduce(_Tile):
    axes: tuple
    reducer: str = "welford"
    policy: str = "fold_left"
    keepdim: bool = True
    INPUTS: ClassVar[tuple[str, ...]] = ("x", "seed")
    #: the orders the contract admits (D442)
    POLICIES: ClassVar[tuple[str, ...]] = POLICIES

    def __post_init__(self):
        _common(self, "CustomReduce")
        from tilefoundry.semantics.reducers import Reducer
        from tilefoundry.semantics.topk_reducer import TopKMerge

        if not isinstance(self.reducer, str | Reducer | TopKMerge):
            raise IRError(f"CustomReduce.reducer must be a reducer name (str), a declared "
                          f"Reducer(...) or TopKMerge(k, ...), got {self.reducer!r}")


__all__ = ["SEEDED_KINDS", "CustomReduce", "MaskedReduce", "SeededReduce"]
