"""Sort, top-k and the Top-K merge algebra of the reference semantics.

Contract (Tile design, "Ordering and selection stay logical Tile operations"; ARCHITECTURE.md):
sort is a logical permutation under a pure total order. The order is decided explicitly with
``np.lexsort`` on explicit keys, never inherited from numpy's NaN placement:

1. NaN placement: ``nan="last"`` puts NaNs at the end of the output, ``"first"`` at the start,
   whatever the direction; ``"error"`` raises on any NaN.
2. value, ascending or descending; -0 and +0 compare EQUAL (so their original order decides);
   low-precision floats compare by their exact values (widened exactly to f32).
3. original index, ascending: equal values keep their source order in both directions.

Top-K keeps the first k of that order. The Top-K merge is ``take_K(sort(a ∪ b))`` on the total
key (valid, NaN placement, value, original index): a fixed-K state of candidates with a validity
mask, associative, with the all-invalid state as identity.

Decisions (docs/decisions.md): ``stable=False`` is accepted and returns the same (stable)
reference, one member of what an unstable sort admits; for top-k, ``nan="last"`` makes NaNs the
least preferred candidates and ``"first"`` the most preferred (torch's ``topk`` treats NaN as the
largest value); invalid slots of a ``TopKState`` hold zero bits and index -1 so that states
compare by their fields; a merge does not deduplicate, so chunks must cover disjoint indices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilefoundry.errors import InvalidArgumentError, bad_choice
from tilefoundry.semantics.dtypes import dtype_of, widen_to_f32
from tilefoundry.semantics.formats import DType, require_evaluable
from tilefoundry.semantics.reductions import normalize_axis

__all__ = ["NAN_PLACEMENTS", "TopKState", "sort", "topk", "topk_from", "topk_identity",
           "topk_merge"]

NAN_PLACEMENTS = ("last", "first", "error")


def _check_nan(nan: str, what: str) -> None:
    if not isinstance(nan, str) or nan not in NAN_PLACEMENTS:
        raise InvalidArgumentError(bad_choice(f"{what} nan", nan, NAN_PLACEMENTS))


def _check_bool(v: object, name: str, what: str) -> None:
    if not isinstance(v, bool | np.bool_):
        raise InvalidArgumentError(f"{what}: {name} must be True or False, got {v!r}")


def _keys(x: np.ndarray, dt: DType, descending: bool) -> tuple[np.ndarray, np.ndarray]:
    """(NaN flag, value key) of each element: the key orders in the requested direction, maps
    -0 and +0 to one key and gives every NaN the same key (its index decides among NaNs)."""
    if dt.is_float:
        v = x if dt is DType.F32 else widen_to_f32(x.reshape(-1)).reshape(x.shape)
        nan = np.isnan(v)
        key = np.where(nan | (v == 0), np.float32(0), v)
        return nan, (-key if descending else key)
    key = x.astype(np.int64)  # u8, i8, i32, i64 and bool all fit; ~k reverses without overflow
    return np.zeros(x.shape, bool), (~key if descending else key)


def _order(x: np.ndarray, dt: DType, axis: int, descending: bool, nan: str,
           what: str) -> np.ndarray:
    nanflag, key = _keys(x, dt, descending)
    if nan == "error" and nanflag.any():
        raise InvalidArgumentError(
            f"{what}: x holds {int(nanflag.sum())} NaN value(s) and nan='error'; choose "
            f"nan='last' or nan='first', or remove the NaNs first")
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    index = np.broadcast_to(np.arange(x.shape[axis]).reshape(shape), x.shape)
    primary = nanflag if nan in ("last", "error") else ~nanflag
    return np.lexsort((index, key, primary), axis=axis)  # last key is the most significant


def _operand(x: np.ndarray, what: str) -> tuple[np.ndarray, DType]:
    x = np.asarray(x)
    dt = dtype_of(x)
    require_evaluable(dt, what)
    return x, dt


def sort(x: np.ndarray, axis: int = -1, *, descending: bool = False, nan: str = "last",
         stable: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Sort along ``axis``; returns the values (original bits) and the int64 source indices.

    Equal values, including -0 and +0, keep their original index order; see the module
    docstring for the total order.
    """
    x, dt = _operand(x, "sort")
    ax = normalize_axis(axis, x.ndim, "sort")
    _check_nan(nan, "sort")
    _check_bool(descending, "descending", "sort")
    _check_bool(stable, "stable", "sort")
    order = _order(x, dt, ax, bool(descending), nan, "sort")
    return np.take_along_axis(x, order, ax), order.astype(np.int64)


def topk(x: np.ndarray, k: int, axis: int = -1, *, largest: bool = True,
         nan: str = "last") -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` elements along ``axis`` of the total order (descending when ``largest``);
    ties go to the lowest index. Returns values and int64 source indices."""
    x, dt = _operand(x, "topk")
    ax = normalize_axis(axis, x.ndim, "topk")
    _check_nan(nan, "topk")
    _check_bool(largest, "largest", "topk")
    n = x.shape[ax]
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 0 <= k <= n:
        raise InvalidArgumentError(
            f"topk: k={k!r} must be an integer with 0 <= k <= {n}, the length of axis {ax}")
    order = np.take(_order(x, dt, ax, bool(largest), nan, "topk"), np.arange(int(k)), ax)
    return np.take_along_axis(x, order, ax), order.astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Top-K merge algebra
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class TopKState:
    """A fixed-K candidate list per batch element, best first; the candidate axis is last.

    ``values`` hold the candidates' dtype, ``indices`` their original (global) int64 indices,
    ``valid`` marks real candidates; invalid slots come last with zero bits and index -1.
    """

    values: np.ndarray
    indices: np.ndarray
    valid: np.ndarray
    k: int
    largest: bool = True
    nan: str = "last"

    @property
    def dtype(self) -> DType:
        return dtype_of(self.values)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self.values.shape[:-1]


def _check_k(k: object, what: str) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
        raise InvalidArgumentError(f"{what}: K={k!r} must be a non-negative integer")
    return int(k)


def topk_identity(k: int, batch_shape: tuple[int, ...] = (), dtype: DType | str = DType.F32, *,
                  largest: bool = True, nan: str = "last") -> TopKState:
    """The empty candidate list: every slot invalid. ``merge(identity, s) == s``."""
    k = _check_k(k, "topk_identity")
    dt = DType.parse(dtype)
    require_evaluable(dt, "topk_identity")
    _check_nan(nan, "topk_identity")
    _check_bool(largest, "largest", "topk_identity")
    shape = (*tuple(batch_shape), k)
    return TopKState(np.zeros(shape, dt.storage), np.full(shape, -1, np.int64),
                     np.zeros(shape, bool), k, bool(largest), nan)


def topk_from(x: np.ndarray, k: int, offset: int = 0, *, largest: bool = True,
              nan: str = "last") -> TopKState:
    """Lift a chunk (candidates along the last axis, global indices ``offset + i``) to a state;
    a chunk shorter than K leaves the remaining slots invalid."""
    k = _check_k(k, "topk_from")
    x, dt = _operand(x, "topk_from")
    if x.ndim == 0:
        raise InvalidArgumentError("topk_from: x needs a candidate axis (rank >= 1), got rank 0")
    kk = min(k, x.shape[-1])
    vals, idx = topk(x, kk, -1, largest=largest, nan=nan)
    ident = topk_identity(k, x.shape[:-1], dt, largest=largest, nan=nan)
    values, indices, valid = ident.values.copy(), ident.indices.copy(), ident.valid.copy()
    values[..., :kk], indices[..., :kk], valid[..., :kk] = vals, idx + int(offset), True
    return TopKState(values, indices, valid, k, bool(largest), nan)


def topk_merge(a: TopKState, b: TopKState) -> TopKState:
    """``take_K(sort(a ∪ b))`` on the total key (valid, NaN placement, value, index)."""
    for name in ("k", "largest", "nan"):
        if getattr(a, name) != getattr(b, name):
            raise InvalidArgumentError(
                f"topk_merge: states differ in {name} ({getattr(a, name)!r} vs "
                f"{getattr(b, name)!r}); only states of one Top-K reduction merge")
    if a.dtype is not b.dtype:
        raise InvalidArgumentError(f"topk_merge: states hold {a.dtype} and {b.dtype}")
    try:
        batch = np.broadcast_shapes(a.batch_shape, b.batch_shape)
    except ValueError:
        raise InvalidArgumentError(
            f"topk_merge: batch shapes {a.batch_shape} and {b.batch_shape} do not "
            f"broadcast") from None

    def cat(f: str) -> np.ndarray:
        return np.concatenate([np.broadcast_to(getattr(s, f), (*batch, a.k)) for s in (a, b)], -1)

    values, indices, valid = cat("values"), cat("indices"), cat("valid")
    nanflag, key = _keys(values, a.dtype, a.largest)
    nanflag &= valid
    key = np.where(valid, key, key.dtype.type(0))
    primary = nanflag if a.nan in ("last", "error") else ~nanflag & valid
    order = np.lexsort((np.where(valid, indices, -1), key, primary, ~valid), axis=-1)[..., :a.k]
    keep = np.take_along_axis(valid, order, -1)
    out_vals = np.take_along_axis(values, order, -1)
    out_vals[~keep] = np.zeros((), values.dtype)
    out_idx = np.where(keep, np.take_along_axis(indices, order, -1), -1)
    return TopKState(out_vals, out_idx, keep, a.k, a.largest, a.nan)
