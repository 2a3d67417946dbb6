"""ir/hir/tile (an extension family of the HIR catalog, from the Tile design): Select and
Bitcast.

* ``Select`` is the design's ``ite(condition, true_value, false_value)``: "if-then-else, using
  the same name and argument order as Luisa's SIMT DSL ... including broadcast conditions and
  operands". It selects already-computed values; it is not lazy control flow.
* ``Bitcast`` is ``tile::bitcast<uint32_t>(float_value)`` / ``tile::bitcast<float>(uint_value)``:
  it "reinterpret[s] the storage bits ... without numerical conversion" and "supports only the
  float32/uint32 pair"; zero signs, subnormals and NaN payloads survive bit-for-bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Op
from tilefoundry.semantics.types import IRError


class _Tile(Op):
    FAMILY: ClassVar[str] = "tile"


@dataclass(frozen=True)
class Select(_Tile):
    """``ite(cond, t, f)``: ``t`` where ``cond`` holds, else ``f`` (torch.where order)."""
    COPIES_BITS: ClassVar[bool] = True

    INPUTS: ClassVar[tuple[str, ...]] = ("cond", "t", "f")


@dataclass(frozen=True)
class Bitcast(_Tile):
    """Reinterpret x's 32-bit storage as ``dtype`` (f32 -> u32 or u32 -> f32 only)."""
    COPIES_BITS: ClassVar[bool] = True

    dtype: DType
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)

    def __post_init__(self):
        if not isinstance(self.dtype, DType):
            raise IRError(f"Bitcast.dtype must be a DType, got {self.dtype!r}")
