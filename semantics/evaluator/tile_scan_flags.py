"""Evaluators of the flagged scans: ``scan_flags.flagged_scan`` (the fold_left recurrence; the
segmented one folds the proven lifted combine). Under ``ordered_tree`` a float ``add`` notes an
``admitted_set`` contract, judged by ``scan_flags.flagged_scan_admits`` (each prefix an
order-preserving regrouping of its own kept leaves); everything else is exact (D385, D386)."""

from __future__ import annotations

import numpy as np

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.dtypes import positive_nan
from tilefoundry.semantics.evaluator.registry import EvalCtx, OpContract, register_eval
from tilefoundry.semantics.formats import dtype_of
from tilefoundry.semantics.ops.tile_scan_flags import MaskedScan, SegmentedScan
from tilefoundry.semantics.scan_flags import flagged_scan

__all__ = ["eval_flagged_scan", "flag_mode"]


def flag_mode(op: MaskedScan | SegmentedScan) -> str:
    return "mask" if type(op) is MaskedScan else "segment"


@register_eval(MaskedScan)
@register_eval(SegmentedScan)
def eval_flagged_scan(ctx: EvalCtx, args: tuple) -> np.ndarray:
    x, flags = np.asarray(args[0]), np.asarray(args[1])
    op = ctx.op
    if x.ndim == 0:
        ctx.error("x is rank-0; a scan runs along an axis")
    try:
        r = flagged_scan(x, flags, flag_mode(op), op.combine, op.axis, inclusive=op.inclusive,
                         seed=op.seed)
    except InvalidArgumentError as e:
        ctx.error(str(e))
    if op.policy == "ordered_tree" and op.combine == "add" and dtype_of(x).is_float:
        ctx.note(OpContract(op=f"{ctx.name}(add)", kind="admitted_set", dtype=dtype_of(x),
                            policy="ordered_tree",
                            detail="each prefix: an order-preserving regrouping of its kept "
                                   "leaves"))
    return np.array(positive_nan(np.asarray(r)), order="C", copy=True)  # D21
