"""Evaluator of the tile family's Scan: ``reductions.scan``, the design's left prefix
recurrence (prefix[0] = seed, prefix[i + 1] = op(prefix[i], x[i]); inclusive[i] = prefix[i + 1],
exclusive[i] = prefix[i]).

Decisions (docs/decisions.md D219):

* Low-precision floats carry an f32 state (widened exactly) and each output is rounded once to
  x's dtype; f32 is the IEEE f32 chain. Integer add / mul wrap around in x's dtype; max / min on
  floats propagate NaN and order -0 < +0 (the Reduce rules).
* No seed: the recurrence starts at x0 (no identity enters a non-empty prefix, so an inclusive
  add over [-0.] is -0), and exclusive[0] is the combine's HIR identity (+0 for add, -inf / the
  least value for max, +inf / the greatest for min, 1 for mul).
* A seed enters once, first, in every prefix (fold_left's position).
* An empty scan axis gives an empty result.
* The reference is the fold_left chain. Under ``ordered_tree`` a float ``add`` notes an
  ``admitted_set`` contract: each prefix may be any order-preserving regrouping of its own leaf
  sequence (seed first, then x0..xi), judged by ``reductions.scan_admits``. Everything else
  (fold_left, max / min, integer and bool scans) is exact.
"""

from __future__ import annotations

import numpy as np

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.dtypes import positive_nan
from tilefoundry.semantics.evaluator.registry import EvalCtx, OpContract, register_eval
from tilefoundry.semantics.formats import dtype_of
from tilefoundry.semantics.ops.tile_scan import Scan
from tilefoundry.semantics.reductions import scan

__all__ = ["eval_scan", "scan_contract_is_set"]


def scan_contract_is_set(op: Scan, x: np.ndarray) -> bool:
    """Whether the Scan's result is an admitted set (ordered-tree float add) rather than exact."""
    return op.policy == "ordered_tree" and op.combine == "add" and dtype_of(x).is_float


@register_eval(Scan)
def eval_scan(ctx: EvalCtx, args: tuple) -> np.ndarray:
    x = np.asarray(args[0])
    op: Scan = ctx.op
    if x.ndim == 0:
        ctx.error("x is rank-0; a scan runs along an axis")
    try:
        r = scan(x, op.combine, op.axis, inclusive=op.inclusive, seed=op.seed,
                 policy=op.policy)
    except InvalidArgumentError as e:
        ctx.error(str(e))
    if scan_contract_is_set(op, x):
        ctx.note(OpContract(op="Scan(add)", kind="admitted_set", dtype=dtype_of(x),
                            policy="ordered_tree",
                            detail="each prefix: an order-preserving regrouping of its leaves"))
    return np.array(positive_nan(np.asarray(r)), order="C", copy=True)  # D21
