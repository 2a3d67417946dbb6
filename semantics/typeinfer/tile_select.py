"""Type rules of the tile family's Select (``ite``) and Bitcast (Tile design, "Elementwise
operators lift directly to tiles" and "Storage and arithmetic precision").

* **Select** ``ite(cond, t, f)``: ``cond`` MUST be bool; ``t`` and ``f`` MUST share one dtype
  (dtypes never promote, as for Binary); all three broadcast torch-style ("including broadcast
  conditions and operands"); the result has t's dtype, the broadcast shape, the elementwise
  layout and the most local operand storage. Partial operands go through the commutation table:
  a Partial on ``cond`` is rejected (a condition is not a value to reduce); ``t`` and ``f``
  carrying the identical Partial commute (the selection picks one reduced value per element);
  one branch alone is rejected (the other branch's replicated value would be reduced once per
  device under sum; conservatively for max / min).
* **Bitcast** accepts exactly the f32 -> u32 and u32 -> f32 pairs ("This initial API supports
  only the float32/uint32 pair; other widths and index/view conversions are rejected"); shape,
  layout and storage are kept. Every Partial on x is rejected in the rule (a reinterpretation of
  bits is neither linear nor monotone: bits(-1.0) = 0xBF800000 > bits(2.0) = 0x40000000), so
  Bitcast never consults the table (smt ``NON_TABLE_OPS``).
"""

from __future__ import annotations

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_select import Bitcast, Select
from tilefoundry.semantics.typeinfer.common import broadcast_shapes, elementwise_layout
from tilefoundry.semantics.typeinfer.commutation import FIX as PARTIAL_FIX
from tilefoundry.semantics.typeinfer.commutation import check_partials
from tilefoundry.semantics.typeinfer.core import (
    Ctx,
    register_typeinfer,
    same_dtype,
    tensor_operand,
)
from tilefoundry.semantics.typeinfer.math import reject_type_level_only, result_storage
from tilefoundry.semantics.types import TensorType

#: the one reinterpretation pair the Tile design admits, both directions
BITCAST_PAIRS = frozenset({(DType.F32, DType.U32), (DType.U32, DType.F32)})


@register_typeinfer(Select)
def infer_select(ctx: Ctx, types: tuple) -> TensorType:
    cond = tensor_operand(ctx, types[0], 0)
    t = tensor_operand(ctx, types[1], 1)
    f = tensor_operand(ctx, types[2], 2)
    if cond.dtype is not DType.BOOL:
        ctx.error(f"the condition has dtype {cond.dtype}; ite(cond, t, f) takes a bool "
                  f"condition", operand=0, rule="Select: cond MUST be bool",
                  fix="compare first (e.g. cmp_ne(cond, zeros)) or Cast cond to bool")
    dt = same_dtype(ctx, [t, f], [1, 2])
    reject_type_level_only(ctx, t, 1)
    shape = broadcast_shapes(ctx, [cond.shape, t.shape, f.shape], [0, 1, 2])
    partials = check_partials(ctx, (cond, t, f))
    layout = elementwise_layout(ctx, [cond, t, f], shape, partials)
    return TensorType(shape, dt, layout, result_storage([cond, t, f]))


@register_typeinfer(Bitcast)
def infer_bitcast(ctx: Ctx, types: tuple) -> TensorType:
    x = tensor_operand(ctx, types[0], 0)
    op: Bitcast = ctx.op  # type: ignore[assignment]
    if (x.dtype, op.dtype) not in BITCAST_PAIRS:
        ctx.error(f"bitcast {x.dtype} -> {op.dtype} is not admitted: only the f32 <-> u32 pair "
                  f"reinterprets bits (other widths and conversions are rejected)", operand=0,
                  rule="Bitcast: only f32 -> u32 and u32 -> f32",
                  fix="use Cast for a numeric conversion, or Cast to f32 first and bitcast "
                      "f32 -> u32")
    if x.shard is not None and x.shard.partials:
        ax = next(iter(x.shard.partials))
        ctx.error(f"x carries Partial({x.shard.partials[ax]}) on mesh axis "
                  f"{x.shard.mesh.axis_names[ax]}; a bit reinterpretation commutes with no "
                  f"reduction (bits(-1.0) > bits(2.0) as u32)", operand=0,
                  rule="Bitcast: no Partial operand", fix=PARTIAL_FIX)
    return TensorType(tuple(x.shape), op.dtype, x.layout, x.storage)
