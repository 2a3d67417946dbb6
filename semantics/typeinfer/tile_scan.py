"""Type rule of the tile family's Scan (Tile design, "Scan preserves prefixes, not a new
execution hierarchy" and "Why not just infer it from reduce?").

* x MUST be a tensor of rank >= 1; ``axis`` MUST name one of its axes.
* ``combine``: ``add`` / ``max`` / ``min`` take every evaluable numeric dtype the matching
  Reduce kind takes (bool: max / min only; f8e8m0: no add); ``mul`` takes integer dtypes only
  (a float product scan is outside the design's builtin reducers; fix: Cast to an integer).
* ``policy`` is ``fold_left`` or ``ordered_tree`` (the op class already refuses a permuting
  policy).
* ``seed`` MUST be exactly representable in x's dtype (an int for integer and bool dtypes, in
  range; for floats a value the dtype holds exactly) — the seed is an incoming state, never
  rounded.
* The result has x's shape, dtype, layout and storage. Partial: ``add`` commutes with sum,
  ``max`` with max, ``min`` with min (commutation table); a seeded ``add`` / ``mul`` under a
  Partial is rejected (the seed would enter once per device). The scan axis MUST NOT be
  Split-sharded (each prefix reads the whole axis before it).
"""

from __future__ import annotations

import math

import numpy as np

from tilefoundry.semantics.dtypes import cast, widen_to_f32
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ops.tile_scan import Scan, scan_combine_refuses
from tilefoundry.semantics.typeinfer.common import norm_axis, with_partials
from tilefoundry.semantics.typeinfer.commutation import FIX as PARTIAL_FIX
from tilefoundry.semantics.typeinfer.commutation import check_partials
from tilefoundry.semantics.typeinfer.core import Ctx, register_typeinfer, tensor_operand
from tilefoundry.semantics.typeinfer.math import reject_type_level_only
from tilefoundry.semantics.types import TensorType


def seed_problem(seed: int | float, dt: DType) -> str | None:
    """Why ``seed`` is not exactly representable in ``dt`` (None: it is)."""
    info = FORMATS[dt]
    if dt is DType.BOOL:
        return None if isinstance(seed, int) and seed in (0, 1) else "a bool seed is 0 or 1"
    if dt.is_int:
        if not isinstance(seed, int):
            return f"an {dt} seed is an int, got the float {seed!r}"
        ii = np.iinfo(info.storage)
        return None if ii.min <= seed <= ii.max else f"{seed} is outside [{ii.min}, {ii.max}]"
    try:
        f = float(seed)
    except OverflowError:  # an int past every float's range (set bypassing the constructor)
        return f"{seed!r} is not a finite float"
    if (isinstance(seed, int) and f != seed) or not math.isfinite(f):
        return f"{seed!r} is not a finite float"
    with np.errstate(all="ignore"):
        f32 = np.float32(f)
    if float(f32) != f or math.copysign(1.0, float(f32)) != math.copysign(1.0, f):
        return f"{seed!r} is not exactly an f32 value"
    back = float(widen_to_f32(cast(np.asarray(f32), dt))) if dt is not DType.F32 else float(f32)
    if back != f or math.copysign(1.0, back) != math.copysign(1.0, f):
        return f"{seed!r} rounds to {back!r} in {dt}"
    return None


@register_typeinfer(Scan)
def infer_scan(ctx: Ctx, types: tuple) -> TensorType:
    x = tensor_operand(ctx, types[0], 0)
    op: Scan = ctx.op  # type: ignore[assignment]
    if x.rank == 0:
        ctx.error("x is rank-0; a scan runs along an axis", operand=0, rule="Scan axis",
                  fix="reshape x to rank >= 1")
    axis = norm_axis(ctx, op.axis, x.rank, "axis")
    reject_type_level_only(ctx, x, 0)
    dt = x.dtype
    c = op.combine
    if c == "mul" and scan_combine_refuses(c, dt):
        ctx.error(f"combine=mul is an integer scan; x has dtype {dt}", operand=0,
                  rule="Scan: mul takes integer dtypes only",
                  fix="Cast x to an integer dtype (i32 / i64), or use combine=add")
    if c == "add" and scan_combine_refuses(c, dt):
        ctx.error(f"combine=add over {dt} is not representable in the input dtype (the result "
                  f"keeps it)", operand=0, rule="Scan: add takes numeric dtypes (not bool, not "
                  "f8e8m0)", fix="Cast x to f32 (or an integer dtype) first")
    if op.seed is not None:
        why = seed_problem(op.seed, dt)
        if why:
            ctx.error(f"seed {op.seed!r} is not exactly representable in {dt}: {why}",
                      rule="Scan: the seed MUST be exactly representable in x's dtype",
                      fix=f"pass a seed that {dt} holds exactly, or omit it")
    partials = check_partials(ctx, (x,), kind=c)
    if partials and op.seed is not None and c in ("add", "mul"):
        ax = next(iter(partials))
        ctx.error(f"x carries Partial({partials[ax]}) on mesh axis "
                  f"{x.shard.mesh.axis_names[ax]} and the scan has a seed: the seed would "  # type: ignore[union-attr]
                  f"enter once per device", operand=0,
                  rule="Scan: a seeded add / mul does not commute with a Partial",
                  fix=PARTIAL_FIX)
    if x.shard is not None:
        from tilefoundry.semantics.typeinfer.reshape import materialize
        from tilefoundry.semantics.typeinfer.tensor import _split_axes

        shard = materialize(x.shard)
        on = [mx for mx, a in _split_axes(shard).items() if a == axis]
        if on:
            name = shard.mesh.axis_names[on[0]]
            ctx.error(f"the scan axis {axis} is Split on mesh axis {name}", operand=0,
                      rule="Scan: the scan axis MUST NOT be Split-sharded",
                      fix=f"Reshard x to Broadcast on mesh axis {name}")
        layout = with_partials(x.shard, partials)
    else:
        layout = x.layout
    return TensorType(tuple(x.shape), dt, layout, x.storage)
