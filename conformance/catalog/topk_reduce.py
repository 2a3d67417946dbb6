"""Catalog cases of Top-K as an ordinary reduce over an indexed Tile (``CustomReduce`` with the
Top-K merge reducer ``TopKMerge``; ``semantics/topk_reducer.py``, docs/decisions.md D486–D488):
the region under every policy, seeded with identity_K and with an earlier chunk's state, the
``topk_merge`` shorthand's expansion (K back at the axis), ties, signed zeros, duplicates, NaN
placement and low-precision / integer dtypes. merge_K is exactly associative and commutative
under its total order, so every case is judged exact (values and indices), never an admitted
set and never UNJUDGED."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.semantics.dtypes import cast
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ir import Call, Function, Module, Tuple, Var
from tilefoundry.semantics.ops.tile_reduce import CustomReduce
from tilefoundry.semantics.reductions import POLICIES
from tilefoundry.semantics.topk_reducer import TopKMerge, topk_identity_state, topk_reduce
from tilefoundry.semantics.types import TensorType

__all__ = ["S_TOPK_NAN", "S_TOPK_REGION", "S_TOPK_SHORTHAND", "topk_reduce_cases"]

F32, F16, BF16, E4M3, I32 = DType.F32, DType.F16, DType.BF16, DType.FP8E4M3, DType.I32
ENTRY = "f"
S_TOPK_REGION = ('Tile design: "The general region form is therefore ordinary reduce over an '
                 'indexed Tile" — merge_K(a, b) = take_K(sort(a union b)) on the total key '
                 '(valid, value, original_index), identity_K the empty sequence.')
S_TOPK_NAN = ('Tile design: the implemented topk "requires non-NaN inputs"; "The general region '
              'form is therefore ordinary reduce over an indexed Tile" — nan=\'error\' is the '
              'run-time check topk_nan (docs/decisions.md D488).')
S_TOPK_SHORTHAND = ('Tile design: "topk<K>(x, axis, order...) is a library shorthand for that '
                    'region, not a second execution model or primitive."')


def _values(rows, dt: DType) -> np.ndarray:
    a = np.asarray(rows, np.float64)
    if dt.is_float:
        return np.ascontiguousarray(cast(a.astype(np.float32), dt))
    return np.ascontiguousarray(a.astype(FORMATS[dt].storage))


def _region(x: np.ndarray, dt: DType, r: TopKMerge, policy: str, axis: int = 1,
            seed: tuple | None = None, keepdim: bool = False) -> tuple[Module, str, list]:
    a = axis % x.ndim
    batch = tuple(1 if (d == a and keepdim) else n for d, n in enumerate(x.shape)
                  if d != a or keepdim)
    sv, si = seed if seed is not None else topk_identity_state(r, batch, dt)
    sv, si = np.ascontiguousarray(sv), np.ascontiguousarray(si)
    xv = Var("x", TensorType(tuple(x.shape), dt))
    svv = Var("seed_values", TensorType(tuple(sv.shape), dt))
    siv = Var("seed_indices", TensorType(tuple(si.shape), DType.I64))
    body = Call(CustomReduce((axis,), r, policy, keepdim), (xv, Tuple((svv, siv))))
    return Module((Function(ENTRY, (xv, svv, siv), body, None),)), ENTRY, [x, sv, si]


def _region_case(rows, dt: DType, r: TopKMerge, policy: str, axis: int = 1,
                 seeded: bool = False, keepdim: bool = False) -> Callable:
    def build():
        x = _values(rows, dt)
        seed = None
        if seeded:  # an earlier chunk's state: candidates at indices past this chunk's
            prev = _values(np.asarray(rows)[..., ::-1], dt)  # (axis is the last one here)
            a = axis % x.ndim
            batch = tuple(n for d, n in enumerate(x.shape) if d != a)
            ident = topk_identity_state(r, batch, dt)
            sv, si = topk_reduce(prev, ident, r, axis)
            si = np.where(si >= 0, si + x.shape[a], si)  # the earlier chunk's global indices
            seed = (sv, si)
        return _region(x, dt, r, policy, axis, seed, keepdim)
    return build


def _nan_seed_case(rows, r: TopKMerge) -> Callable:
    def build():
        x = _values(rows, F32)
        sv, si = (np.array(a) for a in topk_identity_state(r, (x.shape[0],), F32))
        sv[:, 0], si[:, 0] = np.float32(np.nan), 100
        return _region(x, F32, r, "fold_left", 1, (sv, si))
    return build


def _shorthand_case(rows, dt: DType, k: int, axis: int, largest: bool, nan: str) -> Callable:
    def build():
        from tilefoundry.semantics.dsl.topk_sugar import topk_region

        x = _values(rows, dt)
        xv = Var("x", TensorType(tuple(x.shape), dt))
        body = topk_region(xv, tuple(x.shape), dt, k, axis, largest, nan)
        return Module((Function(ENTRY, (xv,), body, None),)), ENTRY, [x]
    return build


def _rows(seed: int, shape: tuple[int, ...], pool) -> np.ndarray:
    return np.random.default_rng(seed).choice(np.asarray(pool, np.float64), shape)


def topk_reduce_cases(acc) -> None:
    add = acc.add
    ops = ("CustomReduce",)
    ties = [-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 1.0, 3.0, 3.0]  # duplicates and both zero signs
    rand = _rows(486, (4, 16), ties)
    for policy in POLICIES:
        for largest in (True, False):
            d = "largest" if largest else "smallest"
            add(f"spec/tile/topk-merge/region-{policy}-{d}-k4/f32", "tile",
                _region_case(rand, F32, TopKMerge(4, largest), policy), ops=ops, dtypes=(F32,),
                spec=S_TOPK_REGION, tier="quick")
        add(f"spec/tile/topk-merge/seeded-{policy}-k3/f32", "tile",
            _region_case(rand, F32, TopKMerge(3), policy, seeded=True), ops=ops,
            dtypes=(F32,), spec=S_TOPK_REGION, tier="quick")
    # ties by index, including ties between the two zero signs
    zeros = [[0.0, -0.0, 0.0, -0.0, -1.0, -0.0], [-0.0, 0.0, -0.0, 0.0, 1.0, 1.0],
             [2.0, 2.0, 2.0, 2.0, 2.0, 2.0]]
    for largest in (True, False):
        d = "largest" if largest else "smallest"
        add(f"special/tile/topk-merge/zero-sign-ties-{d}-k4/f32", "tile",
            _region_case(zeros, F32, TopKMerge(4, largest), "unordered_tree"), ops=ops,
            dtypes=(F32,), spec=S_TOPK_REGION, tier="quick")
    nans = [[1.0, np.nan, 3.0, np.nan, -0.0, 0.0], [np.nan, np.nan, -1.0, np.inf, -np.inf, 0.0]]
    for nan in ("last", "first"):
        for largest in (True, False):
            d = "largest" if largest else "smallest"
            add(f"special/tile/topk-merge/nan-{nan}-{d}-k3/f32", "tile",
                _region_case(nans, F32, TopKMerge(3, largest, nan), "ordered_tree"), ops=ops,
                dtypes=(F32,), spec=S_TOPK_REGION, tier="quick")
    add("spec/tile/topk-merge/nan-error-without-nans-k2/f32", "tile",
        _region_case(zeros, F32, TopKMerge(2, True, "error"), "fold_left"), ops=ops,
        dtypes=(F32,), spec=S_TOPK_REGION, tier="quick")
    # nan='error' meeting a NaN: the run-time check topk_nan (in x; in the seed's values)
    add("spec/run-time-check/topk_nan/nan-in-x/f32", "run-time-check",
        _region_case(nans, F32, TopKMerge(2, True, "error"), "unordered_tree"), ops=ops,
        dtypes=(F32,), spec=S_TOPK_NAN, tier="quick", expect_error="topk_nan")
    add("spec/run-time-check/topk_nan/nan-in-seed/f32", "run-time-check",
        _nan_seed_case(zeros, TopKMerge(2, False, "error")), ops=ops, dtypes=(F32,),
        spec=S_TOPK_NAN, tier="quick", expect_error="topk_nan")
    # K past the axis's extent: the slots after the last candidate stay empty (index -1)
    add("spec/tile/topk-merge/k-past-extent/f32", "tile",
        _region_case(zeros, F32, TopKMerge(8), "fold_right"), ops=ops, dtypes=(F32,),
        spec=S_TOPK_REGION, tier="quick")
    add("spec/tile/topk-merge/keepdim-axis0-k2/f32", "tile",
        _region_case(_rows(7, (6, 3), ties), F32, TopKMerge(2), "fold_left", axis=0,
                     keepdim=True), ops=ops, dtypes=(F32,), spec=S_TOPK_REGION, tier="quick")
    for dt in (BF16, F16, E4M3, I32):
        pool = ties if dt.is_float else [-3, -1, 0, 0, 2, 2, 7]
        add(f"spec/tile/topk-merge/region-unordered_tree-k3/{dt}", "tile",
            _region_case(_rows(11, (3, 12), pool), dt, TopKMerge(3), "unordered_tree"),
            ops=ops, dtypes=(dt,), spec=S_TOPK_REGION, tier="quick")
    # the shorthand topk<K>(x, axis, order): its expansion, K back at the axis
    for axis, largest, dt in ((1, True, F32), (0, False, BF16), (-1, False, F32)):
        d = "largest" if largest else "smallest"
        add(f"spec/tile/topk-merge/shorthand-axis{axis}-{d}-k3/{dt}", "tile",
            _shorthand_case(_rows(13, (5, 7), ties), dt, 3, axis, largest, "last"),
            ops=(*ops, "Transpose") if axis == 0 else ops, dtypes=(dt,),
            spec=S_TOPK_SHORTHAND, tier="quick")
