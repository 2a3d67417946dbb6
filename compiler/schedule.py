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

__all__ = ["TileConfig", "choose_block", "dot_axis", "prev_pow2", "reduced_axes"]


@dataclass(frozen=True)
class TileConfig:
    tile_elems: int = 2048  # elements per tile for parallel axes
    max_row: int = 16384  # the most elements an unsplit (reduced) set of axes may hold
    k_block: int = 32  # matmul K tile; longer K runs a tile_loop
    #: the (M, N) block of a matmul kernel's two output axes (the two axes before its Dot's K
    #: axis), or None to fill them like any parallel axis. The Triton backend sets it so that
    #: its ``tl.dot`` gets tensor-core-sized tiles.
    dot_mn: tuple[int, int] | None = None
    #: compute softmax over a narrow dtype (bf16, f16, fp8) in f32 instead of f64: within its
    #: 1-ulp budget by ``semantics.ulp``'s lemma B (the f32 exp is marked ``within`` the dtype)
    narrow_f32: bool = False
    #: launch options every kernel gets (``(("num_warps", 8), ("num_stages", 1))``), set by
    #: the Triton autotuner's record (``compiler/triton_tune.py``); empty: the renderer's
    #: defaults by kernel class. They change speed only, never the admitted results.
    launch: tuple[tuple[str, int], ...] = ()


def prev_pow2(n: int) -> int:
    return 1 if n < 2 else 1 << (int(n).bit_length() - 1)


def choose_block(domain: tuple[int, ...], single: Iterable[int] = (),
                 loop_blocks: Mapping[int, int] | None = None,
                 cfg: TileConfig = TileConfig(),
                 dot_axis: int | None = None) -> tuple[int, ...] | None:
    loop_blocks = dict(loop_blocks or {})
    r = len(domain)
    block = [1] * r
    for d, b in loop_blocks.items():
        block[d] = b
    fixed: dict[int, int] = {}
    if cfg.dot_mn is not None and dot_axis is not None and dot_axis >= 2:
        # the matmul's M and N blocks (never padded past the next power of two), fixed before
        # the other parallel axes are filled; they are parallel axes, so ``max_row`` (which
        # bounds the unsplit ones) does not count them
        for d, want in zip((dot_axis - 2, dot_axis - 1), cfg.dot_mn, strict=True):
            if d not in loop_blocks and d not in set(single) and domain[d] > 1:
                fixed[d] = block[d] = min(next_pow2(domain[d]), want)
    whole = sorted({d for d in single if domain[d] > 1 and d not in loop_blocks})
    prod = 1
    for d in whole:
        block[d] = next_pow2(domain[d])
        prod *= block[d]
    for b in loop_blocks.values():
        prod *= b
    if prod > cfg.max_row:
        return None
    for b in fixed.values():
        prod *= b
    budget = max(cfg.tile_elems, prod)
    for d in reversed(range(r)):
        if d in whole or d in loop_blocks or d in fixed or domain[d] <= 1:
            continue
        room = max(1, budget // prod)
        block[d] = max(1, min(next_pow2(domain[d]), prev_pow2(room)))
        prod *= block[d]
    return tuple(block)


def dot_axis(body) -> int | None:
    """The K axis of the one ``Dot`` of a kernel body, or None (none, or several)."""
    axes = {ins.axis for ins in iter_instrs(body) if isinstance(ins, Dot)}
    return axes.pop() if len(axes) == 1 else None


def reduced_axes(kernel: Kernel) -> set[int]:
    """Axes reduced (Reduce / Dot) anywhere in the kernel that are not loop axes."""
    out: set[int] = set()
    for ins in iter_instrs(kernel.body):
        if isinstance(ins, Reduce):
            out |= set(ins.axes)
        elif isinstance(ins, Dot):
            out.add(ins.axis)
    return {d for d in out if d not in kernel.loop_axes and kernel.domain[d] > 1}
