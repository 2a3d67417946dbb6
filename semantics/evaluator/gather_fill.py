"""Gather with ``fill`` (D388): the Tile design's "gather supplies a logical shift with defined
boundary fill; a bare out-of-bounds reindex would not". An index outside ``[0, n)`` of the
gathered axis — negative ones included, which never wrap — reads the fill (exactly
representable in x's dtype: a type rule); in-range indices move their element's bits."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.semantics.dtypes import cast
from tilefoundry.semantics.evaluator.registry import EvalCtx
from tilefoundry.semantics.formats import dtype_of


def fill_value(fill: int | float, like: np.ndarray) -> np.ndarray:
    """The fill as a 0-d array of ``like``'s dtype (exact: the type rule checked it)."""
    dt = dtype_of(like)
    if dt.is_float:
        return np.asarray(cast(np.asarray(fill, np.float32), dt))
    return np.asarray(fill).astype(like.dtype)


def gather_filled(ctx: EvalCtx, x: np.ndarray, ii: np.ndarray, bad: np.ndarray,
                  gather: Callable) -> np.ndarray:
    """The in-range gather of clamped indices, the fill where an index was out of range."""
    ax = ctx.op.axis % x.ndim
    inner = EvalCtx(_no_fill(ctx.op), ctx.call, ctx.out_type, [], ctx.args, ctx.dims)
    if x.shape[ax] == 0:  # nothing to read: every index takes the fill (gather a stand-in row)
        x = np.zeros_like(x, shape=(*x.shape[:ax], 1, *x.shape[ax + 1:]))
    got = gather(inner, (x, np.clip(ii, 0, x.shape[ax] - 1)))
    got = np.asarray(got)
    f = fill_value(ctx.op.fill, got)
    mask = expand_invalid(bad, ctx.op, x.ndim, got.ndim)
    return np.where(mask, f, got).astype(got.dtype)


def _no_fill(op):
    from dataclasses import replace

    return replace(op, fill=None)


def expand_invalid(bad: np.ndarray, op, xrank: int, rank: int) -> np.ndarray:
    """The out-of-range mask of the indices placed on the output's axes: the output is
    ``x.shape[:axis] + indices.shape[batch_dims:] + x.shape[axis + 1:]``, indices' leading
    batch dims aligned with x's."""
    axis, bd = op.axis % xrank, op.batch_dims
    m = bad.reshape(bad.shape[:bd] + (1,) * (axis - bd) + bad.shape[bd:])
    return m.reshape(m.shape + (1,) * (rank - m.ndim))
