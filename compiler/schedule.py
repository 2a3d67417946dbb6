"""Tile sizes: how a kernel's domain is cut into blocks (shared by lowering and fusion).

``choose_block`` gives every axis a power-of-two block: axes a kernel reduces over (outside a
``TileLoop``) and axes that must not be split across program instances get the whole extent
(rounded up to a power of two, masked at the ragged edge); loop axes keep the block their loop
walks; the remaining axes are filled innermost first up to ``tile_elems`` elements per tile.
It returns None when the unsplit axes do not fit ``max_row`` elements — the caller then loops
(reductions) or does not fuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tilefoundry.compiler.kir import Dot, Kernel, Reduce, iter_instrs, next_pow2

__all__ = ["TileConfig", "choose_block", "prev_pow2", "reduced_axes"]


@dataclass(frozen=True)
class TileConfig:
    tile_elems: int = 2048  # elements per tile for parallel axes
    max_row: int = 16384  # the most elements an unsplit (reduced) set of axes may hold
    k_block: int = 32  # matmul K tile; longer K runs a tile_loop


def prev_pow2(n: int) -> int:
    return 1 if n < 2 else 1 << (int(n).bit_length() - 1)


def choose_block(domain: tuple[int, ...], single: Iterable[int] = (),
                 loop_blocks: Mapping[int, int] | None = None,
                 cfg: TileConfig = TileConfig()) -> tuple[int, ...] | None:
    loop_blocks = dict(loop_blocks or {})
    r = len(domain)
    block = [1] * r
    for d, b in loop_blocks.items():
        block[d] = b
    whole = sorted({d for d in single if domain[d] > 1 and d not in loop_blocks})
    prod = 1
    for d in whole:
        block[d] = next_pow2(domain[d])
        prod *= block[d]
    for b in loop_blocks.values():
        prod *= b
    if prod > cfg.max_row:
        return None
    budget = max(cfg.tile_elems, prod)
    for d in reversed(range(r)):
        if d in whole or d in loop_blocks or domain[d] <= 1:
            continue
        room = max(1, budget // prod)
        block[d] = max(1, min(next_pow2(domain[d]), prev_pow2(room)))
        prod *= block[d]
    return tuple(block)


def reduced_axes(kernel: Kernel) -> set[int]:
    """Axes reduced (Reduce / Dot) anywhere in the kernel that are not loop axes."""
    out: set[int] = set()
    for ins in iter_instrs(kernel.body):
        if isinstance(ins, Reduce):
            out |= set(ins.axes)
        elif isinstance(ins, Dot):
            out.add(ins.axis)
    return {d for d in out if d not in kernel.loop_axes and kernel.domain[d] > 1}
