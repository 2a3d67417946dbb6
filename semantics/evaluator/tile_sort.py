"""Evaluator of the tile-family ``Sort`` (an extension of the HIR catalog).

``ordering.sort``: a stable ``np.lexsort`` on explicit keys (NaN placement, value with -0 == +0,
original index), so equal values — the two zero signs included — keep their source order in both
directions (D223); NaNs go last or first whatever the direction (the Tile design's ``nan::last``
example; ``"first"``). ``nan="error"`` is the run-time check ``sort_nan``
(``semantics/run_time_checks.py``). Values keep their original bits (NaN payloads included);
indices are int64. The result is exact.
"""

from __future__ import annotations

import numpy as np

from tilefoundry.semantics.dtypes import widen_to_f32
from tilefoundry.semantics.evaluator.registry import EvalCtx, register_eval
from tilefoundry.semantics.evaluator.tensor import _axis, _out, _tensor
from tilefoundry.semantics.formats import dtype_of
from tilefoundry.semantics.ops.tile_sort import Sort
from tilefoundry.semantics.ordering import sort
from tilefoundry.semantics.run_time_checks import sort_nan_problem

__all__ = ["eval_sort"]


def nan_mask(x: np.ndarray) -> np.ndarray:
    """NaN positions of x in any IR storage dtype (integers: none)."""
    dt = dtype_of(x)
    if not dt.is_float:
        return np.zeros(x.shape, bool)
    v = x if x.dtype == np.float32 else widen_to_f32(x.reshape(-1)).reshape(x.shape)
    return np.isnan(v)


@register_eval(Sort)
def eval_sort(ctx: EvalCtx, args: tuple) -> tuple[np.ndarray, np.ndarray]:
    x = _tensor(ctx, args[0], 0)
    op: Sort = ctx.op
    if x.ndim == 0:
        ctx.error("x is rank-0; Sort orders the elements along an axis")
    axis = _axis(ctx, op.axis, x.ndim)
    if op.nan == "error":
        bad = nan_mask(x)
        problem = sort_nan_problem(int(bad.sum()), tuple(int(i) for i in np.argwhere(bad)[0])
                                   if bad.any() else ())
        if problem:
            ctx.error(problem)
    values, indices = sort(x, axis, descending=op.descending,
                           nan="last" if op.nan == "error" else op.nan)
    return _out(values), _out(indices.astype(np.int64))
