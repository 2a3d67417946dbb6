"""Type rules of the flagged scans (MaskedScan, SegmentedScan; docs/decisions.md D385, D386).

* x: Scan's rule exactly (rank >= 1, the axis, combine / dtype, an exactly representable seed),
  its errors named by this op.
* the flags (``mask`` / ``heads``) MUST be bool with exactly x's shape (one flag per
  contribution; no implicit broadcast).
* Neither operand may carry a mesh layout (D385: a flag decides which contributions a prefix
  combines, so a Partial or Split x has no per-device meaning for it; Reshard to unsharded
  first).
* The result has x's shape, dtype, layout and storage.
"""

from __future__ import annotations

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_scan_flags import MaskedScan, SegmentedScan
from tilefoundry.semantics.typeinfer.core import Ctx, register_typeinfer, tensor_operand
from tilefoundry.semantics.typeinfer.tile_reduce import _shape_eq
from tilefoundry.semantics.typeinfer.tile_scan import infer_scan
from tilefoundry.semantics.types import TensorType


class _AsScan(Ctx):
    """Scan's rule run on the op's attributes, its errors named by the flagged op."""

    def __init__(self, ctx: Ctx):
        super().__init__(ctx.op.as_scan(), ctx.call, ctx.session)  # type: ignore[attr-defined]
        self._outer = ctx

    @property
    def name(self) -> str:
        return self._outer.name


@register_typeinfer(MaskedScan)
@register_typeinfer(SegmentedScan)
def infer_flagged_scan(ctx: Ctx, types: tuple) -> TensorType:
    what = ctx.operand_name(1)
    x = tensor_operand(ctx, types[0], 0)
    f = tensor_operand(ctx, types[1], 1)
    for i, t in ((0, x), (1, f)):
        if t.shard is not None:
            ctx.error(f"{ctx.operand_name(i)} carries a mesh layout; a {ctx.name} takes "
                      f"unsharded operands", operand=i,
                      rule=f"{ctx.name}: operands are unsharded (D385)",
                      fix="Reshard the operand to an unsharded layout first")
    out = infer_scan(_AsScan(ctx), (x,))
    if f.dtype is not DType.BOOL:
        ctx.error(f"{what} has dtype {f.dtype}; the {what} is bool", operand=1,
                  rule=f"{what} dtype = bool", fix=f"compare to build a bool {what}")
    if not _shape_eq(tuple(f.shape), tuple(x.shape)):
        ctx.error(f"{what} has shape {tuple(f.shape)}, x has {tuple(x.shape)}", operand=1,
                  rule=f"{what} shape = x's shape (one flag per contribution)",
                  fix=f"broadcast the {what} to x's shape explicitly")
    return out
