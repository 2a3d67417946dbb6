"""Spec-derived conformance cases of the tile-family ``Sort`` (an extension of the HIR catalog),
each quoting the Tile design sentence it tests. Called from ``catalog._spec_cases``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_sort import Sort

__all__ = ["S_SORT_NAN", "S_SORT_PACKED", "S_SORT_TIES", "spec_tile_sort"]

S_SORT_TIES = ("Tile design: sort \"requires non-NaN inputs and breaks equal-value ties by "
               "original index, including ties between the two zero signs\"; \"returning "
               "RankedTile<T> with values and INT64 source indices\".")
S_SORT_NAN = ("Tile design: \"auto sorted = sort(x, feature, descending, stable_ties(), "
              "nan::last);\" — NaNs after every number in either direction; nan='first' the "
              "mirror placement (docs/decisions.md D224).")
S_SORT_ERROR = ("Tile design: the implemented sort \"requires non-NaN inputs\" — nan='error' "
                "is the run-time check sort_nan (docs/decisions.md D224).")
S_SORT_PACKED = ("Tile design: \"SortAlgorithm::PACKED_FP32 ... selects a reversible "
                 "UINT64-key network for float32 and power-of-two extents\"; a realization "
                 "detail: the result is the default sort's.")


def spec_tile_sort(acc) -> None:
    from tilefoundry.conformance.catalog.build import (
        BF16,
        E4M3,
        E5M2,
        ENTRY,
        F16,
        F32,
        I32,
        case_rng,
        make_call,
        make_module,
        make_var,
        random_float,
        special_values,
        values_array,
    )
    from tilefoundry.conformance.catalog.special import _SPECIAL_SPEC

    add = acc.add

    def sort_case(dt: DType, rows, op: Sort) -> Callable:
        def build():
            a = values_array(rows, dt)
            x = make_var("x", a.shape, dt)
            return make_module([x], make_call(op, x)), ENTRY, [a]

        return build

    ties = [[1, 3, 3, 2, 3, 1], [5, 5, 5, 5, 5, 5], [0, 2, 1, 2, 0, 1], [-1, -1, 4, 4, -1, 4]]
    zeros = [[0.0, -0.0, 0.0, -0.0, 1.0, -1.0], [-0.0, 0.0, -0.0, 0.0, -1.0, -0.0],
             [-0.0, -0.0, 0.0, 0.0, 0.0, -0.0]]
    nans = [[1.0, np.nan, 3.0, 2.0, -0.0, 0.0], [np.nan, np.nan, -1.0, 0.0, -0.0, np.nan],
            [np.inf, np.nan, -np.inf, 0.0, 2.0, 2.0]]
    for desc in (False, True):
        w = "descending" if desc else "ascending"
        for dt in (F32, BF16, I32):
            add(f"spec/sort/ties-by-index-{w}/{dt}", "tile", sort_case(dt, ties, Sort(-1, desc)),
                ops=("Sort",), dtypes=(dt,), spec=S_SORT_TIES, tier="quick")
        for dt in (F32, F16, E4M3):
            add(f"spec/sort/signed-zeros-tie-{w}/{dt}", "tile",
                sort_case(dt, zeros, Sort(-1, desc)), ops=("Sort",), dtypes=(dt,),
                spec=S_SORT_TIES, tier="quick")
        for dt in (F32, F16, E5M2):
            for nan in ("last", "first"):
                add(f"spec/sort/nan-{nan}-{w}/{dt}", "tile",
                    sort_case(dt, nans, Sort(-1, desc, nan)), ops=("Sort",), dtypes=(dt,),
                    spec=S_SORT_NAN, tier="quick")
        add(f"spec/sort/nan-error-no-nan-{w}/f32", "tile",
            sort_case(F32, zeros, Sort(0, desc, "error")), ops=("Sort",), dtypes=(F32,),
            spec=S_SORT_ERROR, tier="quick")
        add(f"spec/run-time-check/sort_nan/nan-error-{w}/f32", "run-time-check",
            sort_case(F32, nans, Sort(-1, desc, "error")), ops=("Sort",), dtypes=(F32,),
            spec=S_SORT_ERROR, tier="quick", expect_error="sort_nan")

    def packed(n: int, desc: bool) -> Callable:
        def build():
            r = case_rng(f"spec/sort/packed/{n}/{desc}")
            a = random_float(r, (3, n), F32, -4.0, 4.0)
            a[:, ::3] = np.float32(1.5)  # ties
            a[0, 1::4], a[1, 2::5] = np.float32(-0.0), np.float32(0.0)  # both zero signs
            a[2, : n // 2] = np.round(a[2, : n // 2])
            x = make_var("x", a.shape, F32)
            return make_module([x], make_call(Sort(-1, desc), x)), ENTRY, [a]

        return build

    for n in (16, 64):
        for desc in (False, True):
            w = "descending" if desc else "ascending"
            add(f"spec/sort/power-of-two-extent-{n}-{w}/f32", "tile", packed(n, desc),
                ops=("Sort",), dtypes=(F32,), spec=S_SORT_PACKED + " " + S_SORT_TIES,
                tier="quick")

    def long_axis(dt: DType) -> Callable:
        def build():
            r = case_rng(f"spec/sort/long-axis/{dt}")
            a = random_float(r, (37, 3), dt, -3.0, 3.0)
            a[::4, 1] = a[0, 1]
            x = make_var("x", a.shape, dt)
            return make_module([x], make_call(Sort(0, False, "last"), x)), ENTRY, [a]

        return build

    for dt in (F32, BF16):
        add(f"spec/sort/non-power-of-two-axis-0/{dt}", "tile", long_axis(dt), ops=("Sort",),
            dtypes=(dt,), spec=S_SORT_TIES, tier="quick")

    def special(dt: DType, desc: bool, nan: str) -> Callable:
        def build():
            v = special_values(dt)
            r = case_rng(f"special/tile/sort/{dt}")
            a = np.ascontiguousarray(np.stack([v, v[::-1], v[r.permutation(v.size)]]))
            x = make_var("x", a.shape, dt)
            return make_module([x], make_call(Sort(-1, desc, nan), x)), ENTRY, [a]

        return build

    for dt in (F32, BF16, F16, E4M3, E5M2):
        for desc, nan in ((False, "last"), (True, "first")):
            w = "descending" if desc else "ascending"
            add(f"special/tile/sort-{w}-nan-{nan}/{dt}", "tile", special(dt, desc, nan),
                ops=("Sort",), dtypes=(dt,), spec=_SPECIAL_SPEC.format(op="Sort") + " " +
                S_SORT_TIES, tier="quick")
