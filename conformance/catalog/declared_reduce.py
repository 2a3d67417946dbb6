"""Catalog cases of reducers the program declares itself (``Reducer(...)`` in a CustomReduce;
docs/decisions.md D448–D451): the reference evaluates the program's own declaration, a tree
policy is judged by the declared-law enclosure (fibers past enumeration), a fold by equality."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.semantics.declared_reducers import declare_reducer
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_reduce import CustomReduce
from tilefoundry.semantics.reductions import POLICIES

F32 = DType.F32
S_DECLARED = ('Tile design: "A custom contract can be supplied after the domain"; "Independent '
              'states may form a product reducer with permissions checked for each component"')

#: a product reducer: an f32 sum and the largest magnitude (sum: real laws; amax: exact laws)
SUM_ABSMAX = declare_reducer(
    "sum_absmax", state=(("sum", F32), ("amax", F32)),
    lift=("x", ("max", "x", ("sub", 0.0, "x"))),
    merge=(("add", "a.sum", "b.sum"), ("max", "a.amax", "b.amax")), identity=(-0.0, 0.0),
    laws=(("associative", "real", ("sum",)), ("associative", "exact", ("amax",)),
          ("commutative", "exact"), ("identity", "exact")))

#: a coupled state (count, mean) with a let binding and ifzero: real laws only
COUNT_MEAN = declare_reducer(
    "count_mean", state=(("count", F32), ("mean", F32)), lift=(1.0, "x"),
    lets=(("n", ("add", "a.count", "b.count")),),
    merge=("n", ("ifzero", "n", 0.0,
                 ("add", "a.mean", ("mul", ("sub", "b.mean", "a.mean"),
                                    ("div", "b.count", "n"))))),
    identity=(0.0, 0.0),
    laws=(("associative", "real"), ("commutative", "real"), ("identity", "real")))


def _module_of(r, policy: str, x: np.ndarray, s: np.ndarray) -> Callable:
    def build():
        from tilefoundry.conformance.catalog.tile_reduce import _module

        return _module(CustomReduce((1,), r, policy, False),
                       [np.ascontiguousarray(x, np.float32), np.ascontiguousarray(s, np.float32)],
                       [F32, F32])
    return build


def _data(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, n)) * np.array([[1.0], [100.0], [1e-3]])
    x[0] = np.abs(x[0]) + 0.5  # one fiber of positives: the sum box is tight there too
    return x.astype(np.float32)


def declared_reduce_cases(acc) -> None:
    add = acc.add
    for policy in POLICIES:
        for n, tier in ((4, "quick"), (24, "quick"), (200, "full")):
            add(f"spec/tile/custom-reduce/declared-sum-absmax-{policy}-len{n}/f32", "tile",
                _module_of(SUM_ABSMAX, policy, _data(n, 37 + n),
                           np.tile(np.float32([-0.0, 0.0]), (3, 1))),
                ops=("CustomReduce",), dtypes=(F32,), spec=S_DECLARED, tier=tier)
        add(f"spec/tile/custom-reduce/declared-count-mean-{policy}-len16/f32", "tile",
            _module_of(COUNT_MEAN, policy, _data(16, 41), np.float32([[1.0, 2.0]] * 3)),
            ops=("CustomReduce",), dtypes=(F32,), spec=S_DECLARED, tier="quick")
    # special values: NaN, ±inf, ±0 among the contributions (NaN propagates through max / add)
    sp = np.float32([[np.nan, 1.0, -0.0, 0.0, 2.0, -3.0, 4.0, 5.0],
                     [np.inf, -np.inf, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                     [-0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0]])
    for policy in ("fold_left", "unordered_tree"):
        add(f"special/tile/custom-reduce/declared-sum-absmax-{policy}/f32", "tile",
            _module_of(SUM_ABSMAX, policy, sp, np.tile(np.float32([-0.0, 0.0]), (3, 1))),
            ops=("CustomReduce",), dtypes=(F32,), spec=S_DECLARED, tier="quick")
