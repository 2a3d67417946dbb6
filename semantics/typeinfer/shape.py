"""Type rules of ir/hir/shape: ShapeExtract (a shape value -> one Dim) and ShapeCompose (Dims
-> a shape value, in input order).

Decision (docs/decisions.md): ShapeExtract.index takes Python-style negative indices, like every
axis attribute; ShapeCompose of no inputs is the rank-0 shape.
"""

from __future__ import annotations

from tilefoundry.semantics.ops.shape import ShapeCompose, ShapeExtract
from tilefoundry.semantics.typeinfer.common import norm_axis
from tilefoundry.semantics.typeinfer.core import Ctx, register_typeinfer
from tilefoundry.semantics.types import DimType, ShapeType


@register_typeinfer(ShapeExtract)
def infer_shape_extract(ctx: Ctx, types: tuple):
    s = types[0]
    if not isinstance(s, ShapeType):
        ctx.error(f"expected a shape value (ShapeType), got {type(s).__name__}", operand=0,
                  rule="ShapeExtract input is a shape value", fix="pass ShapeOf(x)")
    norm_axis(ctx, ctx.op.index, s.rank, "index")
    return DimType()


@register_typeinfer(ShapeCompose)
def infer_shape_compose(ctx: Ctx, types: tuple):
    for i, t in enumerate(types):
        if not isinstance(t, DimType):
            ctx.error(f"expected a dimension value (DimType), got {type(t).__name__}",
                      operand=i, rule="ShapeCompose inputs are dims",
                      fix="pass ShapeExtract results (one per axis)")
    return ShapeType(len(types))
