"""The Top-K merge reducer: Top-K as an ordinary reduce over an indexed Tile (issue 37; Tile
design "Ordering and selection stay logical Tile operations"; docs/decisions.md D486–D488).

Tile design: "The general region form is therefore ordinary reduce over an indexed Tile" and
"topk<K>(x, axis, order...) is a library shorthand for that region, not a second execution
model or primitive."

``TopKMerge(k, largest, nan)`` is a built-in, parametric reducer a ``CustomReduce`` carries in
its ``reducer`` attribute (like a declared ``Reducer(...)``, a static value):

* **state** — the K best candidates under the stated total order, best first: a pair
  ``(values, indices)`` of the reduced shape plus ``(K,)``, the values in x's dtype (their
  original bits), the indices int64. A slot is valid iff its index is >= 0; an empty slot holds
  zero bits and index -1 (``ordering.TopKState`` with ``valid = index >= 0``).
* **order** (D38 / D223, ``semantics/ordering.py``): NaN placement (``nan="last"``: after every
  number, ``"first"``: before, ``"error"``: a NaN in x or in the seed's values is the run-time
  check ``topk_nan``), then the value in the requested direction with -0 == +0 (so the two zero
  signs tie and their indices decide), then the original index ascending. Candidates that tie
  on all of these (only possible between a seed slot and a contribution of the same index) keep
  the seed first (D487).
* **identity** — K empty slots; **lift** — element ``i`` of the reduced axis becomes the state
  holding the one candidate ``(x[i], i)``; **merge** — ``merge_K(a, b) = take_K(sort(a ∪ b))``
  (``ordering.topk_merge``): associative, commutative and with the empty state as identity,
  exactly (``laws.topk_merge_k1`` / ``k2`` prove it in Z3 for distinct indices), so every
  policy's every tree gives this one result: the oracle judges equality of values (bits) and
  indices.

The reduced axis is one axis (the indexed Tile's index is the position along it). The
evaluator is vectorized (``np.lexsort``): ``merge(seed, lift-and-merge of all contributions)``,
which by the exact laws is the result of every tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilefoundry.errors import InvalidArgumentError, bad_choice
from tilefoundry.semantics.dtypes import dtype_of
from tilefoundry.semantics.formats import DType, require_evaluable
from tilefoundry.semantics.ordering import (
    NAN_PLACEMENTS,
    TopKState,
    topk_from,
    topk_identity,
    topk_merge,
)
from tilefoundry.semantics.reducers import Law
from tilefoundry.semantics.reductions import normalize_axes

__all__ = ["TOPK_LAWS", "TopKMerge", "is_topk", "topk_fold", "topk_identity_state",
           "topk_reduce"]

#: the laws of merge_K, all exact (bit-exact values and indices), proved by laws.topk_merge_k*
TOPK_LAWS = (Law("associative", "exact"), Law("commutative", "exact"), Law("identity", "exact"))
#: the proof obligations that establish TOPK_LAWS (``tilefoundry prove``)
TOPK_PROOFS = ("laws.topk_merge_k1", "laws.topk_merge_k2", "sort.merge_sorted")


@dataclass(frozen=True)
class TopKMerge:
    """The Top-K merge reducer over (value, index) states (module docstring). Spelled
    ``TopKMerge(k, largest=True, nan='last')`` in the DSL / textual IR."""

    k: int
    largest: bool = True
    nan: str = "last"

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, int | np.integer) or self.k < 1:
            raise InvalidArgumentError(f"TopKMerge: k={self.k!r} must be an integer >= 1 (K is a "
                                       f"static specialization: it sets the state's shape)")
        if not isinstance(self.largest, bool | np.bool_):
            raise InvalidArgumentError(f"TopKMerge: largest must be True or False, got "
                                       f"{self.largest!r}")
        if not isinstance(self.nan, str) or self.nan not in NAN_PLACEMENTS:
            raise InvalidArgumentError(bad_choice("TopKMerge nan", self.nan, NAN_PLACEMENTS))
        object.__setattr__(self, "k", int(self.k))
        object.__setattr__(self, "largest", bool(self.largest))

    # the facts the reducer-generic code reads (reducers.Reducer's interface)
    @property
    def name(self) -> str:
        return "topk_merge"

    @property
    def state(self) -> tuple[str, ...]:
        return ("values", "indices")

    merge_contract = True
    laws = TOPK_LAWS
    identity = None  # a pair of arrays, not f32 constants: topk_identity_state

    def law(self, name: str, component: str | None = None) -> str | None:
        return next((lw.over for lw in self.laws if lw.name == name), None)

    def __str__(self) -> str:
        return f"TopKMerge({self.k}, largest={self.largest}, nan={self.nan!r})"


def is_topk(r: object) -> bool:
    return isinstance(r, TopKMerge)


def topk_identity_state(r: TopKMerge, batch: tuple[int, ...],
                        dtype: DType | str) -> tuple[np.ndarray, np.ndarray]:
    """identity_K per fiber: K empty slots (zero bits, index -1)."""
    s = topk_identity(r.k, tuple(batch), dtype, largest=r.largest, nan=r.nan)
    return s.values, s.indices


def _axis(axes: object, ndim: int, what: str) -> int:
    ax = normalize_axes(axes, ndim, what)
    if len(ax) != 1:
        raise InvalidArgumentError(f"{what}: the Top-K merge reduces one indexed axis, got axes "
                                   f"{axes!r}; reduce one axis (Reshape first to merge axes)")
    return ax[0]


def _seed_state(r: TopKMerge, seed: object, dt: DType, batch: tuple[int, ...],
                keep_shape: tuple[int, ...], what: str) -> TopKState:
    if not isinstance(seed, tuple | list) or len(seed) != 2:
        raise InvalidArgumentError(f"{what}: the seed is the state pair (values, indices), got "
                                   f"{type(seed).__name__}")
    sv, si = (np.asarray(a) for a in seed)
    want = [(*batch, r.k), (*keep_shape, r.k)]
    if dtype_of(sv) is not dt or sv.shape not in want:
        raise InvalidArgumentError(f"{what}: seed values must be {dt} of shape {want[0]}, got "
                                   f"{dtype_of(sv)} {sv.shape}")
    if si.dtype != np.int64 or si.shape != sv.shape:
        raise InvalidArgumentError(f"{what}: seed indices must be i64 of shape {sv.shape}, got "
                                   f"{si.dtype} {si.shape}")
    sv, si = sv.reshape(*batch, r.k), si.reshape(*batch, r.k)
    valid = si >= 0
    return TopKState(np.where(valid, sv, np.zeros((), sv.dtype)), np.where(valid, si, -1),
                     valid, r.k, r.largest, _nan(r))


def _nan(r: TopKMerge) -> str:
    """The placement the merge orders by (``"error"`` is checked first, then orders as last)."""
    return "last" if r.nan == "error" else r.nan


def nan_problem(r: TopKMerge, x: np.ndarray, seed_values: np.ndarray) -> str | None:
    """The run-time check ``topk_nan`` (``nan="error"``): a NaN in x or anywhere in the seed's
    values (an empty slot holds zero bits, so a NaN there is a malformed state too)."""
    from tilefoundry.semantics.run_time_checks import topk_nan_problem

    if r.nan != "error":
        return None
    for what, a in (("x", np.asarray(x)), ("seed values", np.asarray(seed_values))):
        dt = dtype_of(a)
        if not dt.is_float or a.size == 0:
            continue
        from tilefoundry.semantics.dtypes import widen_to_f32

        bad = np.isnan(widen_to_f32(a.reshape(-1))).reshape(a.shape)
        if bad.any():
            return topk_nan_problem(what, int(bad.sum()),
                                    tuple(int(i) for i in np.argwhere(bad)[0]))
    return None


def _prepare(r: TopKMerge, x: np.ndarray, seed: object, axes: object, what: str):
    x = np.asarray(x)
    dt = dtype_of(x)
    require_evaluable(dt, what)
    if dt is DType.F8E8M0:
        raise InvalidArgumentError(f"{what}: f8e8m0 has no order with zeros and signs; Cast x "
                                   f"first")
    if x.ndim == 0:
        raise InvalidArgumentError(f"{what}: x is rank-0; the Top-K merge reduces an axis")
    a = _axis(axes, x.ndim, what)
    f = np.moveaxis(x, a, -1)  # fibers: candidates along the last axis
    batch = f.shape[:-1]
    keep_shape = tuple(1 if d == a else n for d, n in enumerate(x.shape))
    s = _seed_state(r, seed, dt, batch, keep_shape, what)
    problem = nan_problem(r, x, seed[0])
    if problem:
        raise InvalidArgumentError(f"{what}: {problem}")
    return a, f, s, batch, keep_shape


def topk_reduce(x: np.ndarray, seed: object, r: TopKMerge, axes: object = -1, *,
                keepdim: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Reference result of ``CustomReduce(reducer=TopKMerge(...))``: ``(values, indices)`` of the
    reduced shape (keepdim as given) plus ``(K,)``; ``merge(seed, merge of every lift(x_i))``."""
    if not isinstance(r, TopKMerge):
        raise InvalidArgumentError(f"topk_reduce: reducer must be a TopKMerge, got {r!r}")
    _a, f, s, batch, keep_shape = _prepare(r, x, seed, axes, "topk_reduce")
    lifted = topk_from(f, r.k, largest=r.largest, nan=_nan(r))
    out = topk_merge(s, lifted)  # seed first: full ties keep the seed's candidate first
    shape = (*(keep_shape if keepdim else batch), r.k)
    return out.values.reshape(shape), out.indices.reshape(shape)


def topk_fold(x: np.ndarray, seed: object, r: TopKMerge, axes: object = -1, *,
              right: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The literal strict fold ``merge(...merge(merge(seed, lift(x0)), lift(x1))...)``
    (fold_right: ``merge(lift(x_i), state)`` from the last element), one merge per element —
    the region form, for tests that check it equals ``topk_reduce``. Loops over the axis only."""
    _a, f, s, _batch, _ = _prepare(r, x, seed, axes, "topk_fold")
    nan = _nan(r)
    n = f.shape[-1]
    acc = s
    order = range(n - 1, -1, -1) if right else range(n)
    for i in order:
        one = topk_from(f[..., i:i + 1], r.k, i, largest=r.largest, nan=nan)
        acc = topk_merge(one, acc) if right else topk_merge(acc, one)
    return acc.values, acc.indices
