"""Type rules of ir/hir/sharding: Reshard (with the HIR spec's (layout, storage) stride
resolution table) and Local.

Reshard is the one op that changes a value's layout / mesh and the one that completes a
Partial: any source state may go to any target ShardLayout over the same logical shape.

Decisions (docs/decisions.md):

* ``layout`` MUST be a ShardLayout (HIR Reshard: "Supplied layout is a ShardLayout"); a plain
  ``Layout`` is rejected with the fix of wrapping it in an all-Broadcast ShardLayout.
* "Split-axes-zero source" means the source has at least one Split position and every Split
  position has stride 0; a source without Splits, or with ``strides=None``, is shared-engine.
* A no-op Reshard (no layout, no storage change) returns x's type, with a ``strides=None``
  ShardLayout materialized to shared-engine C-order (architecture invariant).
* The destination storage is ``storage`` or, when omitted, x's storage; either way it must be
  concrete (an UNMATERIALIZED x needs an explicit concrete ``storage=``).
* Local of a Partial value is allowed: it exposes the device's partial piece as plain data.
  Local's result strides are the ShardLayout's own (per position), over the local extents.
"""

from __future__ import annotations

from tilefoundry.semantics.ops.sharding import Local, Reshard
from tilefoundry.semantics.typeinfer.core import Ctx, register_typeinfer, tensor_operand
from tilefoundry.semantics.typeinfer.reshape import materialize
from tilefoundry.semantics.types import (
    Layout,
    ShardLayout,
    Split,
    StorageKind,
    TensorType,
    dim_str,
    simplify,
)


def _split_axes_zero(x: TensorType) -> bool:
    s = x.shard
    if s is None or s.layout.strides is None:
        return False
    sp = s.split_positions
    flat = s.layout.flat_strides
    return bool(sp) and all(flat[p] == 0 for p in sp)  # type: ignore[index]


def resolve_strides(x: TensorType, target: ShardLayout, dest: StorageKind) -> tuple[ShardLayout,
                                                                                     str]:
    """The HIR Reshard stride-resolution table: (target with concrete strides, table row)."""
    if target.layout.strides is not None:
        return target, "verbose strides: taken verbatim"
    src, dst = x.storage.level, dest.level
    if dst == src:
        if _split_axes_zero(x):
            return target.with_strides(target.per_instance_strides()), \
                "sugar, same level, Split-axes-zero source: per-instance"
        return target.with_strides(target.shared_engine_strides()), \
            "sugar, same level: shared-engine C-order"
    if dst > src:
        return target.with_strides(target.shared_engine_strides()), \
            "sugar, low -> high level: shared-engine C-order over layout.shape"
    return target.with_strides(target.per_instance_strides()), \
        "sugar, high -> low level: per-instance"


@register_typeinfer(Reshard)
def infer_reshard(ctx: Ctx, types: tuple):
    x = tensor_operand(ctx, types[0], 0)
    op: Reshard = ctx.op  # type: ignore[assignment]
    if op.storage is None or op.storage is x.storage:
        if op.layout is None:
            lay = materialize(x.shard) if x.shard is not None else x.layout
            return TensorType(tuple(x.shape), x.dtype, lay, x.storage)
    if op.layout is None:
        ctx.error(f"storage changes {x.storage.value} -> {op.storage.value} "  # type: ignore[union-attr]
                  f"without a layout", rule="Reshard: a storage change MUST carry an explicit "
                                            "layout=",
                  fix="pass layout=ShardLayout(...) (strides=None resolves per the table)")
    if not isinstance(op.layout, ShardLayout):
        ctx.error(f"layout {op.layout} is a plain Layout", rule="Reshard: the supplied layout "
                  "is a ShardLayout",
                  fix="wrap it: ShardLayout(mesh, (Broadcast(),) * n_axes, layout)")
    dest = op.storage if op.storage is not None else x.storage
    if dest is StorageKind.UNMATERIALIZED:
        ctx.error("the destination storage is unmaterialized", rule="Reshard: destination "
                  "storage is concrete, not unmaterialized",
                  fix="pass storage=rmem, smem or gmem")
    target = op.layout
    if len(target.layout.shape) != x.rank:
        ctx.error(f"the target layout has {len(target.layout.shape)} axes but x has rank "
                  f"{x.rank}", operand=0, rule="Reshard preserves the logical shape",
                  fix="give a layout over x's shape")
    for a, (d, e) in enumerate(zip(x.shape, target.layout.axis_extents, strict=True)):
        d = simplify(d)
        if isinstance(d, int) and d != e:
            ctx.error(f"axis {a}: the target layout's positions multiply to {e} but x's extent "
                      f"is {dim_str(d)}", operand=0, rule="Reshard preserves the logical shape",
                      fix="give a layout whose positions multiply to each axis extent")
    out, row = resolve_strides(x, target, dest)
    if "per-instance" in row:
        loc = out.local_positions()
        wide = [p for p in out.split_positions if loc[p] > 1]
        if wide:
            # smt `reshard.strides` proves per-instance strides alias here (docs/decisions D65)
            ctx.error(f"the per-instance form ({row}) gives Split position(s) {wide} stride 0, "
                      f"but their local extents {[loc[p] for p in wide]} exceed 1, so local "
                      f"elements would share addresses", operand=0,
                      rule="per-instance strides need local extent 1 on every Split position",
                      fix="factor the split position as (mesh, split)(rest) so its local "
                          "extent is 1 (Reshape rule 2), or give verbose strides")
    return TensorType(tuple(x.shape), x.dtype, out, dest)


@register_typeinfer(Local)
def infer_local(ctx: Ctx, types: tuple):
    x = tensor_operand(ctx, types[0], 0)
    if x.shard is None:
        ctx.error(f"x's layout is {x.layout!r}, not a ShardLayout", operand=0,
                  rule="Local: x.type.layout MUST be a ShardLayout",
                  fix="Local applies to sharded values only; drop it or Reshard x first")
    shard = materialize(x.shard)
    loc = shard.local_axis_extents()
    split_axes = {shard.layout.axis_of_position[a.position] for a in shard.attrs
                  if isinstance(a, Split)}
    shape = tuple(loc[a] if a in split_axes and isinstance(simplify(d), int) else d
                  for a, d in enumerate(x.shape))
    pos = iter(shard.local_positions())
    entries = tuple(tuple(next(pos) for _ in e) if isinstance(e, tuple) else next(pos)
                    for e in shard.layout.shape)
    base = Layout(entries, shard.layout.strides)
    return TensorType(shape, x.dtype, base, x.storage)
