"""Type rule of Gather's ``fill`` (docs/decisions.md D388): the fill MUST be exactly
representable in x's dtype (checked as Scan's seed: never rounded), and a filling Gather takes
unsharded operands (the mesh paths make a Gather along a Split axis a Partial(sum) whose
non-owning devices write the sum's identity; a fill would enter once per device)."""

from __future__ import annotations

from tilefoundry.semantics.typeinfer.core import Ctx
from tilefoundry.semantics.typeinfer.tile_scan import seed_problem
from tilefoundry.semantics.types import TensorType


def check_fill(ctx: Ctx, x: TensorType, idx: TensorType) -> None:
    op = ctx.op
    why = seed_problem(op.fill, x.dtype)  # type: ignore[attr-defined]
    if why:
        ctx.error(f"fill {op.fill!r} is not exactly representable in {x.dtype}: {why}",  # type: ignore[attr-defined]
                  operand=0, rule="Gather: the fill MUST be exactly representable in x's dtype",
                  fix=f"pass a fill that {x.dtype} holds exactly, or omit it")
    for i, t in ((0, x), (1, idx)):
        if t.shard is not None:
            ctx.error(f"{ctx.operand_name(i)} carries a mesh layout; a Gather with a fill takes "
                      f"unsharded operands", operand=i,
                      rule="Gather with fill: operands are unsharded (D388)",
                      fix="Reshard to an unsharded layout first, or omit the fill")
