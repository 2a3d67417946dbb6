"""Evaluator implementations of the shape family (``ir/hir/shape``): ShapeExtract and
ShapeCompose.

Values (docs/decisions.md D104): a *shape value* is a rank-1 int64 array of extents, as ShapeOf
produces it (``evaluator/tensor.py``); a *dim value* is a rank-0 int64 array.

* **ShapeExtract** returns ``shape[index]`` as a rank-0 int64 array; ``index`` takes Python-style
  negative indices (D78); an index outside ``[-rank, rank)`` is an ``EvaluationError``.
* **ShapeCompose** assembles rank-0 integer dims, in input order, into a rank-1 int64 array
  (no inputs: the rank-0 shape, an empty array). A dim must be a non-negative integer (an extent);
  a negative one raises. Integer dims of any IR integer dtype are accepted and widened to int64.
"""

from __future__ import annotations

import numpy as np

from tilefoundry.semantics.evaluator.registry import EvalCtx, register_eval
from tilefoundry.semantics.formats import dtype_of
from tilefoundry.semantics.ops.shape import ShapeCompose, ShapeExtract

__all__ = ["eval_shape_compose", "eval_shape_extract"]


@register_eval(ShapeExtract)
def eval_shape_extract(ctx: EvalCtx, args: tuple) -> np.ndarray:
    if len(args) != 1:
        ctx.error(f"takes one shape value, got {len(args)} operand(s)")
    s = args[0]
    if not isinstance(s, np.ndarray) or s.ndim != 1 or not dtype_of(s).is_int:
        what = f"{s.shape} {s.dtype}" if isinstance(s, np.ndarray) else type(s).__name__
        ctx.error(f"expected a shape value (a rank-1 integer array, as ShapeOf gives), got "
                  f"{what}")
    rank, i = s.shape[0], ctx.op.index
    if not -rank <= i < rank:
        ctx.error(f"index {i} is out of range for a rank-{rank} shape value {tuple(s.tolist())} "
                  f"(valid indices are {-rank}..{rank - 1})")
    return np.array(s[i], dtype=np.int64)


@register_eval(ShapeCompose)
def eval_shape_compose(ctx: EvalCtx, args: tuple) -> np.ndarray:
    dims = []
    for i, d in enumerate(args):
        if not isinstance(d, np.ndarray) or d.ndim != 0 or not dtype_of(d).is_int:
            what = f"{d.shape} {d.dtype}" if isinstance(d, np.ndarray) else type(d).__name__
            ctx.error(f"operand {i}: expected a dim value (a rank-0 integer array), got {what}")
        v = int(d)
        if v < 0:
            ctx.error(f"operand {i}: dim {v} is negative; an extent is >= 0")
        dims.append(v)
    return np.array(dims, dtype=np.int64).reshape(len(dims))
