"""Lowering of the tile-family ``Sort`` (an extension of the HIR catalog): selection by rank
(``lower_tensor.rank_select`` with k = n), the same kernel TopK uses. ``nan="error"`` is the
run-time check ``sort_nan`` (``lower.plan_checks``: on the host for an input, a probe kernel for a
computed operand); the sort itself then orders as ``nan="last"`` (no NaN reaches it)."""

from __future__ import annotations

from tilefoundry.compiler.kir import Buffer
from tilefoundry.compiler.lower import _Lowerer, register
from tilefoundry.compiler.lower_tensor import rank_select
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.ops.tile_sort import Sort


@register(Sort)
def _sort(lw: _Lowerer, node: Call, args: list[Buffer]) -> tuple[Buffer, Buffer]:
    (x,) = args
    a = node.op.axis % len(x.shape)
    return rank_select(lw, node, x, a, x.shape[a], node.op.descending,
                       nan_first=node.op.nan == "first", hint="sort")
