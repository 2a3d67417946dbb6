"""tilefoundry.semantics.ordering: sort, top-k and the Top-K merge algebra.

Expected orders come from the Tile design's total-order contract, re-implemented here with
Python's stable ``sorted`` over per-element keys, never from this implementation's own output.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.dtypes import DType, cast
from tilefoundry.semantics.ordering import (
    TopKState,
    sort,
    topk,
    topk_from,
    topk_identity,
    topk_merge,
)

FLOATS = [DType.F32, DType.F16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2]
ELEMS = st.one_of(st.sampled_from([0.0, -0.0, 1.0, -1.0, math.nan, math.inf, -math.inf]),
                  st.floats(-4, 4, width=32))


def draw_x(data, dt: DType, shape: tuple) -> np.ndarray:
    if dt.is_int:
        info = np.iinfo(dt.storage)
        return data.draw(arrays(dt.storage, shape, elements=st.integers(
            max(info.min, -3), min(info.max, 3))))
    return cast(data.draw(arrays(np.float32, shape, elements=ELEMS)), dt)


def ref_order(row: list[float], descending: bool, nan: str) -> list[int]:
    """The total order: NaN placement, then value (-0 == +0), then original index."""
    def key(i: int):
        v = row[i]
        isnan = v != v
        place = isnan if nan == "last" else not isnan
        val = 0.0 if isnan else (-v if descending else v)
        return (place, val, i)
    return sorted(range(len(row)), key=key)


def bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.dtype(f"u{x.dtype.itemsize}"))


def f32(*v: float) -> np.ndarray:
    return np.array(v, np.float32)


# ---------------------------------------------------------------------------------------------
# sort
# ---------------------------------------------------------------------------------------------
def test_ties_break_by_index_including_signed_zeros():
    """Tile design: sort 'breaks equal-value ties by original index, including ties between the
    two zero signs'."""
    x = f32(0.0, -0.0, 1.0, -0.0, 0.0)
    v, i = sort(x)
    assert i.tolist() == [0, 1, 3, 4, 2]
    assert np.signbit(v).tolist() == [False, True, True, False, False]
    v, i = sort(x, descending=True)
    assert i.tolist() == [2, 0, 1, 3, 4]
    assert i.dtype == np.int64


def test_nan_placement_is_explicit_in_both_directions():
    """Tile design: sort(x, feature, descending, stable_ties(), nan::last); NaN positions are
    fixed in the output whatever the direction."""
    x = f32(math.nan, 2.0, -1.0, math.nan, 0.0)
    for desc in (False, True):
        assert sort(x, descending=desc, nan="last")[1].tolist()[-2:] == [0, 3]
        assert sort(x, descending=desc, nan="first")[1].tolist()[:2] == [0, 3]
    assert sort(x, descending=True)[1].tolist() == [1, 4, 2, 0, 3]
    with pytest.raises(InvalidArgumentError, match="2 NaN"):
        sort(x, nan="error")
    with pytest.raises(InvalidArgumentError, match="'last', 'first', 'error'"):
        sort(x, nan="middle")


@given(data=st.data(), dt=st.sampled_from([*FLOATS, DType.I8, DType.U8, DType.I64]),
       descending=st.booleans(), nan=st.sampled_from(["last", "first"]),
       shape=st.sampled_from([(7,), (3, 5), (2, 0)]))
def test_sort_matches_the_total_order(data, dt, descending, nan, shape):
    """Low-precision inputs compare by their exact values; every row follows ref_order."""
    x = draw_x(data, dt, shape)
    v, idx = sort(x, axis=-1, descending=descending, nan=nan)
    rows = (math.prod(shape[:-1]), shape[-1])
    assert v.shape == idx.shape == x.shape
    for row, got, vals in zip(x.reshape(rows), idx.reshape(rows), v.reshape(rows), strict=True):
        want = ref_order([float(t) for t in row], descending, nan)
        assert got.tolist() == want
        assert (bits(vals) == bits(row[want])).all()


def test_sort_other_axis_and_errors():
    x = np.array([[3, 1], [1, 3], [2, 2]], np.int32)
    assert sort(x, axis=0)[1].tolist() == [[1, 0], [2, 2], [0, 1]]
    with pytest.raises(InvalidArgumentError, match=r"axis 2 .*rank 2"):
        sort(x, axis=2)
    with pytest.raises(InvalidArgumentError, match="rank 0"):
        sort(np.float32(1.0))


# ---------------------------------------------------------------------------------------------
# top-k
# ---------------------------------------------------------------------------------------------
def test_topk_lowest_index_wins_ties():
    """Tile design: topk<K>(x, axis, order...) with tie::lowest_index."""
    x = np.array([5, 7, 7, 1, 7], np.int32)
    assert topk(x, 2)[1].tolist() == [1, 2]
    assert topk(x, 2, largest=False)[1].tolist() == [3, 0]
    z = f32(-0.0, 0.0, -1.0)
    assert topk(z, 1)[1].tolist() == [0] and topk(z, 0)[0].shape == (0,)


@pytest.mark.parametrize("k", [-1, 6, 2.0, True])
def test_topk_rejects_bad_k(k):
    with pytest.raises(InvalidArgumentError, match=r"k=.*5"):
        topk(np.zeros(5, np.float32), k)


@given(data=st.data(), dt=st.sampled_from(FLOATS), largest=st.booleans(),
       nan=st.sampled_from(["last", "first"]), n=st.integers(0, 12), k=st.integers(0, 12))
def test_topk_is_the_head_of_the_total_order(data, dt, largest, nan, n, k):
    x = draw_x(data, dt, (2, n))
    k = min(k, n)
    _, idx = topk(x, k, largest=largest, nan=nan)
    for row, got in zip(x, idx, strict=True):
        assert got.tolist() == ref_order([float(t) for t in row], largest, nan)[:k]


# ---------------------------------------------------------------------------------------------
# Top-K merge algebra
# ---------------------------------------------------------------------------------------------
def same_state(a: TopKState, b: TopKState) -> bool:
    return (a.k == b.k and (a.valid == b.valid).all() and (a.indices == b.indices).all()
            and (bits(a.values) == bits(b.values)).all())


def chunks_of(data, x: np.ndarray) -> list[tuple[int, np.ndarray]]:
    n = x.shape[-1]
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=4)))
    edges = [0, *cuts, n]
    return [(lo, x[..., lo:hi]) for lo, hi in itertools.pairwise(edges)]


@given(data=st.data(), dt=st.sampled_from([DType.F32, DType.BF16, DType.I32]),
       k=st.integers(0, 5), largest=st.booleans(), nan=st.sampled_from(["last", "first"]))
def test_merge_is_associative_with_identity(data, dt, k, largest, nan):
    """Tile design: 'merge_K(merge_K(a, b), c) = merge_K(a, merge_K(b, c))', identity_K the
    empty sequence, on the total key (valid, value, original_index)."""
    x = draw_x(data, dt, (2, 9))
    parts = [topk_from(x[:, lo:hi], k, lo, largest=largest, nan=nan)
             for lo, hi in ((0, 3), (3, 5), (5, 9))]
    a, b, c = parts
    assert same_state(topk_merge(topk_merge(a, b), c), topk_merge(a, topk_merge(b, c)))
    e = topk_identity(k, (2,), dt, largest=largest, nan=nan)
    for s in parts:
        assert same_state(topk_merge(e, s), s) and same_state(topk_merge(s, e), s)


@given(data=st.data(), dt=st.sampled_from(FLOATS), k=st.integers(0, 8), largest=st.booleans(),
       nan=st.sampled_from(["last", "first"]))
def test_topk_of_whole_equals_merge_of_chunks(data, dt, k, largest, nan):
    """Tile design: topk<K> is 'a library shorthand for that region': an ordinary reduce of
    topk_merge over the lifted chunks, in any grouping."""
    x = draw_x(data, dt, (3, 11))
    kk = min(k, 11)
    state = topk_identity(k, (3,), dt, largest=largest, nan=nan)
    for lo, chunk in reversed(chunks_of(data, x)):  # merge order differs from source order
        state = topk_merge(topk_from(chunk, k, lo, largest=largest, nan=nan), state)
    v, i = topk(x, kk, largest=largest, nan=nan)
    assert state.valid[:, :kk].all() and not state.valid[:, kk:].any()
    assert (state.indices[:, :kk] == i).all() and (bits(state.values[:, :kk]) == bits(v)).all()


def test_merge_rejects_incompatible_states():
    a = topk_identity(2)
    with pytest.raises(InvalidArgumentError, match="k"):
        topk_merge(a, topk_identity(3))
    with pytest.raises(InvalidArgumentError, match="largest"):
        topk_merge(a, topk_identity(2, largest=False))
    with pytest.raises(InvalidArgumentError, match="bf16"):
        topk_merge(a, topk_identity(2, dtype="bf16"))
