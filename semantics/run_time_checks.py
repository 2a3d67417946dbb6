"""The spec's run-time checks on operand values, shared by the reference evaluator and every
backend that makes them (the compiled backends, the torch adapter), so the checks and their
messages are one piece of code. Each returns the problem as a message, or None when the values
pass."""

from __future__ import annotations


def cache_bounds_problem(cur_pos: int, s: int, new_len: int, cache_len: int) -> str | None:
    """HIR CacheUpdate: "cur_pos >= 0, 1 <= s <= new.len, and cur_pos + s <= cache.len MUST be
    checked at eval/runtime"."""
    if cur_pos < 0:
        return f"cur_pos = {cur_pos} is negative (the spec: cur_pos >= 0)"
    if not 1 <= s <= new_len:
        return f"s = {s} is outside [1, new.len = {new_len}] (the spec: 1 <= s <= new.len)"
    if cur_pos + s > cache_len:
        return (f"cur_pos + s = {cur_pos} + {s} = {cur_pos + s} exceeds cache.len = "
                f"{cache_len} (the spec: cur_pos + s <= cache.len)")
    return None


def slice_window_problem(axis: int, offset: int, extent: int, dst_extent: int) -> str | None:
    """HIR InsertSlice: "a runtime offset is checked at eval/runtime" — the window
    [offset, offset + extent) must lie inside the destination's axis."""
    if offset < 0 or offset + extent > dst_extent:
        return (f"axis {axis}: offset {offset} places the window [{offset}, {offset + extent}) "
                f"of the update extent {extent} outside the dst extent {dst_extent} (needs 0 "
                f"<= offset and offset + {extent} <= {dst_extent})")
    return None


def sort_nan_problem(nan_count: int, first: tuple[int, ...]) -> str | None:
    """Tile-family Sort with ``nan="error"`` (the Tile design: the implemented sort "requires
    non-NaN inputs"): x must hold no NaN. ``first`` is the position of the first NaN."""
    if nan_count > 0:
        return (f"x holds {nan_count} NaN value(s) (first at {list(first)}) and nan='error'; "
                f"choose nan='last' or nan='first', or remove the NaNs first")
    return None


def topk_nan_problem(what: str, nan_count: int, first: tuple[int, ...]) -> str | None:
    """A Top-K merge reduce with ``nan="error"`` (D488): x and the seed's values (the whole
    state array, empty slots included: an empty slot holds zero bits) must hold no NaN.
    ``what`` names the operand ("x" or "seed values"), ``first`` the first NaN's position."""
    if nan_count > 0:
        return (f"{what} holds {nan_count} NaN value(s) (first at {list(first)}) and "
                f"nan='error'; choose nan='last' or nan='first', or remove the NaNs first")
    return None


__all__ = ["cache_bounds_problem", "slice_window_problem", "sort_nan_problem",
           "topk_nan_problem"]
