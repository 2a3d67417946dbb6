"""Helpers shared by the op-family rules: axes, broadcasting with symbolic dims, result layouts."""

from __future__ import annotations

from tilefoundry.semantics.typeinfer.core import Ctx
from tilefoundry.semantics.types import (
    Broadcast,
    Partial,
    ShapeDim,
    ShardLayout,
    Split,
    TensorType,
    simplify,
)


def dims_equal(a: ShapeDim, b: ShapeDim) -> bool:
    """Structural equality after simplification (symbolic dims are equal only if identical)."""
    return simplify(a) == simplify(b)


def norm_axis(ctx: Ctx, axis: int, rank: int, what: str = "axis") -> int:
    """A Python-style axis in [-rank, rank) normalized to [0, rank), or a typing error with the
    fix."""
    if not -rank <= axis < rank:
        ctx.error(f"{what} {axis} is out of range for rank {rank} (allowed [{-rank}, {rank}))",
                  rule=f"{what} range",
                  fix=f"use a value in [{-rank}, {rank})" if rank else "there is no axis to "
                      "select in a rank-0 value")
    return axis % rank


def broadcast_shapes(ctx: Ctx, shapes: list[tuple], operands: list[int]) -> tuple:
    """torch / numpy broadcasting; a symbolic dim broadcasts only against 1 or itself."""
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(rank):
        dims = [(s[len(s) - rank + k], i) for s, i in zip(shapes, operands, strict=True)
                if len(s) - rank + k >= 0]
        res: ShapeDim = 1
        for d, i in dims:
            if d == 1:
                continue
            if res == 1:
                res = d
            elif not dims_equal(res, d):
                ctx.error(f"shapes {[tuple(map(str, s)) for s in shapes]} do not broadcast "
                          f"(axis {k - rank}: {res} vs {d})", operand=i, rule="broadcasting",
                          fix="reshape or slice the operands to compatible shapes")
        out.append(res)
    return tuple(out)


def with_partials(shard: ShardLayout, partials: dict[int, str]) -> ShardLayout:
    """``shard`` with the Partial state of each mesh axis replaced by ``partials`` (axes not in
    ``partials`` that were Partial become Broadcast: the op completed nothing, so callers pass
    every surviving Partial)."""
    attrs = tuple(Partial(partials[ax]) if ax in partials else
                  (Broadcast() if isinstance(a, Partial) else a)
                  for ax, a in enumerate(shard.attrs))
    return ShardLayout(shard.mesh, attrs, shard.layout)


def elementwise_layout(ctx: Ctx, types: list[TensorType], out_shape: tuple,
                       partials: dict[int, str]):
    """Result layout of an elementwise op.

    A plain operand and a Broadcast mesh axis are replicated: each device reads its part of them
    locally, so they combine with anything. On each mesh axis the Split operands must split the
    same layout position (over the same layout shape); the result carries that Split, the
    Partial the commutation table allowed (``partials``), or Broadcast. A sharded operand must
    already have the result's shape (a sharded value is never implicitly broadcast)."""
    sharded = [(i, t.shard) for i, t in enumerate(types) if t.shard is not None]
    if not sharded:
        first = types[0].layout
        return first if all(t.layout == first for t in types) and \
            tuple(types[0].shape) == tuple(out_shape) else None
    s0 = sharded[0][1]
    for i, _ in sharded:
        if tuple(types[i].shape) != tuple(out_shape):
            ctx.error("a sharded operand cannot be broadcast to a larger shape", operand=i,
                      rule="elementwise sharding", fix="Reshard to Broadcast or materialize "
                      "the broadcast first")
    attrs = []
    layout = s0.layout
    for ax in range(len(s0.mesh.axis_names)):
        splits = [(i, s) for i, s in sharded if isinstance(s.attrs[ax], Split)]
        for i, s in splits[1:]:
            if s.attrs[ax] != splits[0][1].attrs[ax] or s.layout.shape != splits[0][1].layout.shape:
                ctx.error(f"sharded operands split mesh axis {s0.mesh.axis_names[ax]} "
                          f"differently ({splits[0][1].attrs[ax]} over "
                          f"{splits[0][1].layout.shape} vs {s.attrs[ax]} over "
                          f"{s.layout.shape})", operand=i,
                          rule="elementwise operands share one sharding",
                          fix="Reshard one operand to the other's layout")
        if splits and ax in partials:
            # the commutation table's rows assume the other operands replicated on the axis
            # (commutation.py): a device holding one block of a Split operand cannot combine
            # it with a partial value, which only the completed value determines
            i = next(i for i, s in sharded if ax in s.partials)
            ctx.error(f"a Partial({partials[ax]}) operand meets a Split operand on mesh axis "
                      f"{s0.mesh.axis_names[ax]}: each device holds one block of the split "
                      f"operand, and the partial value is known only once completed",
                      operand=i, rule="elementwise sharding: Partial beside Split",
                      fix="Reshard the Partial operand (to Broadcast, or to the Split) first")
        if splits:
            attrs.append(splits[0][1].attrs[ax])
            layout = splits[0][1].layout
        elif ax in partials:
            attrs.append(Partial(partials[ax]))
        else:
            attrs.append(Broadcast())
    for i, s in sharded:
        if any(isinstance(a, Split) for a in s.attrs) and s.layout.shape != layout.shape:
            ctx.error(f"sharded operands refine their axes into different layout positions "
                      f"({s.layout.shape} vs {layout.shape})", operand=i,
                      rule="elementwise operands share one sharding",
                      fix="Reshard one operand to the other's layout")
    return ShardLayout(s0.mesh, tuple(attrs), layout)
