"""Type rule of the tile-family ``Sort`` (an extension of the HIR catalog).

``sort(x, axis, descending, nan)`` returns ``TupleType((values, indices))``: values keep x's
shape, dtype and storage, indices are i64 of the same shape. MUST / MUST NOT (Tile design,
"Ordering and selection stay logical Tile operations"; docs/decisions.md D223-D224):

* x MUST have rank >= 1 and ``axis`` MUST name one of its axes;
* x MUST NOT be type-level only (f4e2m1): its values cannot be ordered here;
* the sorted axis MUST stay inside one op instance: a Split of it is rejected (Reshard fix); other
  Splits carry to both results;
* every Partial is rejected by the commutation table: the sort of per-device partial values is
  not the sort of their reduction, and the indices name a winner.

``nan="error"`` is a run-time check (the evaluator raises when x holds a NaN), not a type error.
"""

from __future__ import annotations

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_sort import Sort
from tilefoundry.semantics.typeinfer.common import norm_axis
from tilefoundry.semantics.typeinfer.commutation import check_partials
from tilefoundry.semantics.typeinfer.core import Ctx, register_typeinfer, tensor_operand
from tilefoundry.semantics.typeinfer.math import reject_type_level_only
from tilefoundry.semantics.typeinfer.reshape import materialize
from tilefoundry.semantics.typeinfer.tensor import _regroup, _split_axes, _static_extent
from tilefoundry.semantics.types import TensorType, TupleType

__all__ = ["infer_sort"]


@register_typeinfer(Sort)
def infer_sort(ctx: Ctx, types: tuple) -> TupleType:
    x = tensor_operand(ctx, types[0], 0)
    op: Sort = ctx.op  # type: ignore[assignment]
    if x.rank == 0:
        ctx.error("x is rank-0; Sort orders the elements along an axis", operand=0,
                  rule="Sort: x MUST have rank >= 1", fix="Reshape x to [1] (rank 1) first")
    reject_type_level_only(ctx, x, 0)
    axis = norm_axis(ctx, op.axis, x.rank, "axis")
    check_partials(ctx, (x,))  # every Partial is rejected (the table's Sort rows)
    layout = x.layout
    if x.shard is not None:
        shard = materialize(x.shard)
        on = [ax for ax, a in _split_axes(shard).items() if a == axis]
        if on:
            name = shard.mesh.axis_names[on[0]]
            ctx.error(f"the sorted axis {axis} is Split on mesh axis {name}: a permutation "
                      f"along it needs every element of the axis", operand=0,
                      rule="Sort: the sorted axis MUST NOT be Split-sharded",
                      fix=f"Reshard x to Broadcast on mesh axis {name}")
        n = _static_extent(ctx, x.shape[axis], "the sorted axis's extent")
        layout = _regroup(shard, [("new", n) if a == axis else a for a in range(x.rank)])
    values = TensorType(tuple(x.shape), x.dtype, layout, x.storage)
    return TupleType((values, TensorType(tuple(x.shape), DType.I64, layout, x.storage)))
