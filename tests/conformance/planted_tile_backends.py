"""Planted backends of the tile family (Sort, Mma): the reference evaluator except for one
planted behaviour (the pattern of ``planted_backends.py``).

* **bugs** the quick tier must catch: ``sort_unstable`` (equal values come out in reverse source
  order), ``sort_zero_sign_swap`` (-0 and +0 ordered as distinct values, -0 below +0, instead of
  tying by source index), ``mma_bf16_inputs`` (inputs rounded to bf16 before the f32-accumulating
  product), ``mma_tf32_inputs`` (a TF32-style substitution: inputs rounded to 10 fraction bits);
* **Top-K merge bugs** (``CustomReduce`` with ``TopKMerge``, D488) the quick tier must catch:
  ``topk_merge_unsorted`` (the merge keeps the first K candidates in arrival order, never
  sorting), ``topk_merge_ties_reversed`` (equal values by the highest index first),
  ``topk_merge_zero_sign_split`` (-0 ordered below +0 instead of tying by index);
* **legal freedoms** it must pass: ``sort_packed_key`` (the Tile design's reversible packed-key
  sort for f32 and power-of-two extents: one u64 key per element carrying the order key, the
  zero sign and the index, sorted by value — any sort algorithm, the keys are unique — and
  decoded back to the value bits without a gather of the input).

Load one as ``tests.conformance.planted_tile_backends:<name>`` (each name is a factory).
"""

from __future__ import annotations

import numpy as np

from tests.conformance.planted_backends import Planted, _wrap_eval
from tilefoundry.semantics.dtypes import cast, widen_to_f32
from tilefoundry.semantics.formats import DType, dtype_of
from tilefoundry.semantics.ops.tile_mma import Mma
from tilefoundry.semantics.ops.tile_sort import Sort


def _lexsort_fibers(x: np.ndarray, axis: int, keys_last_major: list[np.ndarray]):
    order = np.lexsort(keys_last_major, axis=axis)
    return (np.ascontiguousarray(np.take_along_axis(x, order, axis)),
            np.ascontiguousarray(order.astype(np.int64)))


def _value_key(x: np.ndarray, desc: bool) -> tuple[np.ndarray, np.ndarray]:
    dt = dtype_of(x)
    if not dt.is_float:
        v = x.astype(np.int64)
        return np.zeros(x.shape, bool), (-v if desc else v)
    v = x if dt is DType.F32 else widen_to_f32(x.reshape(-1)).reshape(x.shape)
    v = v.astype(np.float64)
    nan = np.isnan(v)
    key = np.where(nan, 0, v)
    return nan, (-key if desc else key)


def _index(x: np.ndarray, axis: int) -> np.ndarray:
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return np.broadcast_to(np.arange(x.shape[axis]).reshape(shape), x.shape)


# ---------------------------------------------------------------------------------------------
# bugs
# ---------------------------------------------------------------------------------------------
def sort_unstable() -> Planted:
    """Ties (equal values) by the highest source index first: an unstable sort."""
    def make(good):
        def bad(ctx, args):
            good(ctx, args)  # the run-time checks (nan="error") as the reference makes them
            (x,) = args
            ax = ctx.op.axis % x.ndim
            nan, key = _value_key(x, ctx.op.descending)
            primary = nan if ctx.op.nan != "first" else ~nan
            return _lexsort_fibers(x, ax, [-_index(x, ax), key, primary])
        return bad
    return Planted("sort-unstable", lambda: _wrap_eval(Sort, make))


def sort_zero_sign_swap() -> Planted:
    """-0 ordered below +0 (a total order on the bits) instead of tying with it."""
    def make(good):
        def bad(ctx, args):
            good(ctx, args)
            (x,) = args
            ax = ctx.op.axis % x.ndim
            nan, key = _value_key(x, ctx.op.descending)
            dt = dtype_of(x)
            neg0 = np.zeros(x.shape, np.int8)
            if dt.is_float:
                v = x if dt is DType.F32 else widen_to_f32(x.reshape(-1)).reshape(x.shape)
                neg0 = ((v == 0) & np.signbit(v)).astype(np.int8)
            sign = neg0 if ctx.op.descending else -neg0  # ascending: -0 first
            primary = nan if ctx.op.nan != "first" else ~nan
            return _lexsort_fibers(x, ax, [_index(x, ax), sign, key, primary])
        return bad
    return Planted("sort-zero-sign-swap", lambda: _wrap_eval(Sort, make))


def _round_inputs(fraction_bits: int):
    def make(good):
        def bad(ctx, args):
            a, b, c = args
            dt = dtype_of(a)

            def rnd(t: np.ndarray) -> np.ndarray:
                w = widen_to_f32(t) if dt is not DType.F32 else np.asarray(t, np.float32)
                if fraction_bits == 7:
                    return cast(cast(w, DType.BF16), DType.F32)
                u = w.view(np.uint32).astype(np.uint64)
                drop = 23 - fraction_bits  # RNE to fraction_bits (finite values)
                half = np.uint64(1 << (drop - 1))
                lsb = (u >> np.uint64(drop)) & np.uint64(1)
                r = ((u + half - np.uint64(1) + lsb) >> np.uint64(drop)) << np.uint64(drop)
                return np.where(np.isfinite(w), r.astype(np.uint32).view(np.float32), w)

            return good(ctx, (rnd(a), rnd(b), c))
        return bad
    return make


def mma_bf16_inputs() -> Planted:
    return Planted("mma-bf16-inputs", lambda: _wrap_eval(Mma, _round_inputs(7)))


def mma_tf32_inputs() -> Planted:
    return Planted("mma-tf32-inputs", lambda: _wrap_eval(Mma, _round_inputs(10)))


# ---------------------------------------------------------------------------------------------
# legal freedoms
# ---------------------------------------------------------------------------------------------
#: how many Sort calls took the packed-key path (reset by the tests)
PACKED_CALLS = {"packed": 0, "fallback": 0}


def packed_sort_f32(x: np.ndarray, axis: int, descending: bool) -> tuple[np.ndarray, np.ndarray]:
    """The reversible u64-key sort: high 32 bits an unsigned order key of the value with -0
    mapped to +0 (complemented for descending), low 32 bits ``index << 1 | zero sign``. The keys
    are unique, so any (unstable) sort of them is the stable sort; decoding restores the exact
    value bits (the zero sign from the key) and the index. f32, no NaN, power-of-two extent."""
    xs = np.moveaxis(np.ascontiguousarray(x, np.float32), axis, -1)
    n = xs.shape[-1]
    u = xs.view(np.uint32).astype(np.uint64)
    neg0 = u == np.uint64(0x80000000)
    u = np.where(neg0, np.uint64(0), u)
    sign = (u >> np.uint64(31)) == 1
    ordk = np.where(sign, ~u & np.uint64(0xFFFFFFFF), u | np.uint64(0x80000000))
    if descending:
        ordk = ~ordk & np.uint64(0xFFFFFFFF)
    idx = np.arange(n, dtype=np.uint64)
    key = (ordk << np.uint64(32)) | (idx << np.uint64(1)) | neg0.astype(np.uint64)
    key = np.sort(key, axis=-1, kind="quicksort")
    hi = key >> np.uint64(32)
    if descending:
        hi = ~hi & np.uint64(0xFFFFFFFF)
    bits = np.where((hi >> np.uint64(31)) == 1, hi & np.uint64(0x7FFFFFFF), ~hi &
                    np.uint64(0xFFFFFFFF))
    bits = np.where((key & np.uint64(1)) == 1, np.uint64(0x80000000), bits)
    vals = bits.astype(np.uint32).view(np.float32)
    index = ((key & np.uint64(0xFFFFFFFF)) >> np.uint64(1)).astype(np.int64)
    return (np.ascontiguousarray(np.moveaxis(vals, -1, axis)),
            np.ascontiguousarray(np.moveaxis(index, -1, axis)))


def sort_packed_key() -> Planted:
    def make(good):
        def legal(ctx, args):
            (x,) = args
            ax = ctx.op.axis % max(x.ndim, 1)
            n = x.shape[ax] if x.ndim else 0
            if dtype_of(x) is not DType.F32 or n < 1 or n & (n - 1) or n > 2 ** 31 or \
                    np.isnan(x).any():
                PACKED_CALLS["fallback"] += 1
                return good(ctx, args)
            PACKED_CALLS["packed"] += 1
            return packed_sort_f32(x, ax, ctx.op.descending)
        return legal
    return Planted("sort-packed-key", lambda: _wrap_eval(Sort, make))


# ---------------------------------------------------------------------------------------------
# Top-K merge bugs (CustomReduce with TopKMerge): the reduce's candidates are the seed's valid
# slots then x's elements (index = position along the axis); each bug orders them wrongly
# ---------------------------------------------------------------------------------------------
def _topk_wrong(mode: str):
    from tilefoundry.semantics.ops.tile_reduce import CustomReduce
    from tilefoundry.semantics.topk_reducer import TopKMerge

    def make(good):
        def bad(ctx, args):
            op = ctx.op
            if not isinstance(op.reducer, TopKMerge):
                return good(ctx, args)
            ref_v, _ = good(ctx, args)  # its checks, and the result's shape
            r, x, (sv, si) = op.reducer, args[0], args[1]
            a = op.axes[0] % x.ndim
            f = np.moveaxis(x, a, -1)
            batch = f.shape[:-1]
            sv, si = sv.reshape(*batch, r.k), si.reshape(*batch, r.k)
            vals = np.concatenate([sv, f], -1)
            idx = np.concatenate([si, np.broadcast_to(np.arange(f.shape[-1]), f.shape)], -1)
            valid = idx >= 0
            if mode == "unsorted":
                order = np.argsort(~valid, -1, kind="stable")[..., :r.k]
            else:
                nan, key = _value_key(vals, r.largest)
                primary = nan if r.nan != "first" else ~nan
                keys = [-idx if mode == "ties_reversed" else idx]
                if mode == "zero_sign_split":
                    v = widen_to_f32(vals.reshape(-1)).reshape(vals.shape) \
                        if dtype_of(vals).is_float else vals
                    neg0 = ((v == 0) & np.signbit(v)).astype(np.int8)
                    keys.append(-neg0 if r.largest else neg0)
                order = np.lexsort([*keys, key, primary, ~valid], axis=-1)[..., :r.k]
            keep = np.take_along_axis(valid, order, -1)
            ov = np.where(keep, np.take_along_axis(vals, order, -1), np.zeros((), vals.dtype))
            oi = np.where(keep, np.take_along_axis(idx, order, -1), -1)
            return (np.ascontiguousarray(ov.reshape(ref_v.shape)),
                    np.ascontiguousarray(oi.reshape(ref_v.shape).astype(np.int64)))
        return bad
    return Planted(f"topk-merge-{mode.replace('_', '-')}", lambda: _wrap_eval(CustomReduce, make))


def topk_merge_unsorted() -> Planted:
    """merge_K(a, b) = take_K(a ++ b): the first K candidates in arrival order, unsorted."""
    return _topk_wrong("unsorted")


def topk_merge_ties_reversed() -> Planted:
    """Equal values by the highest original index first."""
    return _topk_wrong("ties_reversed")


def topk_merge_zero_sign_split() -> Planted:
    """-0 below +0 (distinct values) instead of tying with it by index."""
    return _topk_wrong("zero_sign_split")


BUGS = {"sort_unstable": ("Sort",), "sort_zero_sign_swap": ("Sort",),
        "mma_bf16_inputs": ("Mma",), "mma_tf32_inputs": ("Mma",)}
LEGAL = {"sort_packed_key": ("Sort",)}
#: the Top-K merge bugs, planted in CustomReduce(TopKMerge) (their own test: the topk cases)
TOPK_BUGS = ("topk_merge_unsorted", "topk_merge_ties_reversed", "topk_merge_zero_sign_split")
