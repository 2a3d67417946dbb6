"""``tilefoundry compile --explain`` for the Triton backend: which mapping each kernel got and why.

``explain(program, cfg, launch_from)`` reads the fused kernel IR the way ``render_triton``
renders it and says, per kernel:

* the **mapping**: ``dot (TMA persistent)`` (a plain matmul: ``render_triton_gemm``, D408),
  ``dot (tensor cores)`` (``tl.dot`` on the kernel's own operand tiles; the why says what kept
  it off the TMA path),
  ``dot (K fold)`` (the reference order, one lane a step), ``rows`` (every reduced axis is one
  tile: a row, or a few, per program kept in registers, each reduction a block reduction, one
  pass over memory), ``rows, tile loop`` (a reduced axis longer than ``max_row`` elements does
  not fit one tile: the row is walked in tiles, the fallback that is always correct but reads a
  row more than once) or ``elementwise``;
* how each **reduction** is rendered (integer keys for f32 max / min, a ``tl.reduce`` tree,
  an ordered fold, the compensated TwoSum fold) and under which policy;
* each **load / store**: how wide its accesses can be (contiguous stride-1 lanes, the
  alignment the offsets provably have, at most 16 bytes) or why they are scalar (a run-time
  index, an offset clamped into the storage);
* the **launch options** and where they came from (the autotuner's record, or the defaults by
  tile size of ``render_triton.TUNING``).

It changes nothing: the same kernel IR is rendered whether or not it is explained.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import Kernel, Program, root_of
from tilefoundry.compiler.render_decisions import root_size as _root_size
from tilefoundry.compiler.render_triton import _KernelT
from tilefoundry.compiler.schedule import TileConfig

__all__ = ["explain", "kernel_mapping"]

_ITEM = {"f64": 8, "i64": 8, "f32": 4, "i32": 4, "u32": 4, "bf16": 2, "f16": 2}


def _pow2_dividing(n: int, cap: int) -> int:
    """The largest power of two dividing ``n`` (``cap`` when n is 0), at most ``cap``."""
    if n == 0:
        return cap
    return min(cap, n & -n)


def _access(t: _KernelT, ins: kir.Load | kir.Store) -> str:
    """How wide the accesses of a load / store can be, and why."""
    b = t.bm[ins.buffer]
    root = root_of(ins.buffer, t.bm)
    size = _root_size(root)
    what = f"{'load' if isinstance(ins, kir.Load) else 'store'} {root.name}"
    if ins.index:
        return f"{what}: scalar accesses (a run-time index term)"
    if not t.in_storage(ins, size):
        if isinstance(ins, kir.Load):
            return f"{what}: scalar accesses (offsets clamped into the storage)"
        what += " (masked to the storage's bounds)"
    item = _ITEM.get(b.dtype, 1)
    inner = [d for d, s in enumerate(ins.strides) if s == 1 and t.block[d] > 1]
    if not inner:
        return f"{what}: one element per lane (no stride-1 axis in the tile)"
    d = inner[-1]
    # every lane run starts at base + (pid * block[d] + 8k) along d plus multiples of the
    # other axes' strides: its alignment in elements is what divides all of them
    g = ins.offset + b.offset
    for a, s in enumerate(ins.strides):
        if a != d and s:
            g = math.gcd(g, s)
    g = math.gcd(g, t.block[d]) if t.k.grid[d] > 1 else g
    lanes = _pow2_dividing(g, min(t.block[d], max(1, 16 // item)))
    mask = " (masked at the ragged edge)" if ins.mask else ""
    return (f"{what}: contiguous along axis {d}, {lanes} element(s) aligned: up to "
            f"{lanes * item}-byte vectors{mask}")


def _reduction(t: _KernelT, ins: kir.Reduce) -> str:
    dt = t.dt(ins.x)
    ax = ",".join(str(a) for a in ins.axes)
    head = f"reduce.{ins.kind} over axis {ax} [{ins.policy}] ({dt})"
    if ins.kind in kir.COMPENSATED:
        return f"{head}: the compensated TwoSum fold, one lane a step"
    if kir.is_float(dt) and ins.kind == "sum" and ins.policy != "unordered_tree":
        return f"{head}: the policy's order, one lane a step (no tree)"
    if dt == "f32" and ins.kind in ("max", "min", "abs_max"):
        return (f"{head}: a block reduction of integer keys (NaN first, -0 < +0: exact for "
                f"any order)")
    return f"{head}: a block reduction (tl.reduce tree; the policy admits any bracketing)"


def kernel_mapping(k: Kernel, bm: Mapping[str, kir.Buffer],
                   cfg: TileConfig) -> tuple[str, str]:
    """(the mapping, why) of one kernel."""
    t = _KernelT(k, bm)
    body = list(kir.iter_instrs(k.body))
    dots = [i for i in body if isinstance(i, kir.Dot)]
    reds = [i for i in body if isinstance(i, kir.Reduce)]
    loops = [i for i in body if isinstance(i, kir.TileLoop)]
    if dots:
        from tilefoundry.compiler.render_triton_gemm import describe, match, split_launch

        plan, why_not = match(t)
        if plan is not None:
            return describe(plan, split_launch({**t.launch_options(), **dict(cfg.launch)})[1])
        why_not = f"; not the TMA path: {why_not}"
        if all(t.mma_operands(d) is not None for d in dots):
            m, n = (t.block[dots[0].axis - 2], t.block[dots[0].axis - 1]) \
                if dots[0].axis >= 2 else (1, t.block[0])
            return (f"dot (tensor cores): tl.dot on {m}x{n} output tiles, K step "
                    f"{t.block[dots[0].axis]}",
                    "the contract admits reassociation and both operands are exact widenings "
                    "of bf16 / f16 / fp8 loads" + why_not)
        return ("dot (K fold): the reference order, one lane a step",
                "no reassociation admitted, or operands that are not plain narrow loads"
                + why_not)
    if loops:
        ax = sorted({lp.axis for lp in loops})
        return (f"rows, tile loop: axis {','.join(map(str, ax))} walked in tiles of "
                f"{', '.join(str(t.block[a]) for a in ax)} (each tile read once per pass)",
                f"a reduced axis of {', '.join(str(k.domain[a]) for a in ax)} elements does "
                f"not fit one tile (max_row = {cfg.max_row}): the fallback, correct at any "
                f"length, re-reads the row")
    if reds:
        red = sorted({a for r in reds for a in r.axes if k.domain[a] > 1})
        row = math.prod(t.block[a] for a in red) if red else 1
        rows = math.prod(b for a, b in enumerate(t.block) if a not in red)
        hoist = dict(cfg.launch).get("hoist_loads", 0)
        return (f"rows: {rows} row(s) of {row} lanes per program, kept in registers; "
                f"{len(reds)} block reduction(s), one pass over memory; "
                + ("every load issued before the reductions" if hoist else
                   "loads in the kernel IR's order"),
                f"every reduced axis fits one tile (at most max_row = {cfg.max_row} "
                f"elements); {rows} row(s) a program from tile_elems = {cfg.tile_elems}"
                + ("; hoist_loads 1 from the launch options (the tuner measured it faster)"
                   if hoist else ""))
    return (f"elementwise: {math.prod(t.block)} elements per program",
            f"no reduction: tiles of tile_elems = {cfg.tile_elems} elements")


def explain(program: Program, cfg: TileConfig, launch_from: str) -> str:
    """The report of every kernel of ``program`` as the Triton backend renders it;
    ``launch_from`` says where ``cfg``'s launch options came from."""
    bm = program.buffer_map()
    lines = [f"program {program.name}: {len(program.kernels())} kernel(s); tiles: tile_elems "
             f"{cfg.tile_elems}, max_row {cfg.max_row}, matmul tiles {cfg.dot_mn} K "
             f"{cfg.k_block}; launch options from {launch_from}"]
    for k in program.kernels():
        t = _KernelT(k, bm)
        mapping, why = kernel_mapping(k, bm, cfg)
        launch = dict(cfg.launch) or t.launch_options()
        lines.append(f"kernel {k.name}: domain {list(k.domain)} block {list(k.block)} grid "
                     f"{list(k.grid)} ({math.prod(k.grid)} programs); offsets "
                     f"{t.idx.removeprefix('tl.')}")
        lines.append(f"  mapping: {mapping}")
        lines.append(f"  why: {why}")
        lines.append("  launch: " + ", ".join(f"{a} {v}" for a, v in sorted(launch.items())))
        for ins in kir.iter_instrs(k.body):
            if isinstance(ins, kir.Reduce):
                lines.append(f"  {_reduction(t, ins)}")
            elif isinstance(ins, kir.Load | kir.Store) and \
                    _root_size(root_of(ins.buffer, bm)) > 1:
                lines.append(f"  {_access(t, ins)}")
    return "\n".join(lines) + "\n"
