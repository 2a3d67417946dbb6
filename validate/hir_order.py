"""SMT semantics of the HIR ordering ops: the tile-family ``Sort``, ``TopK`` and ``CustomReduce``
with the Top-K merge reducer (``TopKMerge``) — ``semantics/ordering.py``'s total order,
transcribed from its contract rather than from an implementation (D514, D515):

1. NaN placement: ``nan="last"`` puts every NaN after every number, ``"first"`` before, in
   either direction (``"error"`` is a run-time check; past it the order is ``"last"``, and the
   encoding reads it so: the check itself is not modelled, an abstraction named in the outcome).
2. the value, ascending or descending; low-precision floats compare by their exact f32 values;
   -0 and +0 compare EQUAL (``fpLT`` / ``fpEQ`` on the widened values: IEEE comparison ignores
   the zero's sign), every NaN has one key (only its index decides among NaNs); integers by
   their signed / unsigned value, bool False < True.
3. the original index, ascending in both directions (stable: equal values — the two zero signs
   included — keep their source order).
4. Top-K merge only (``ordering.topk_merge``: ``np.lexsort`` on (valid, NaN placement, value,
   index), stable over the concatenation seed slots ++ contributions): a valid candidate before
   an invalid one (a seed slot is valid iff its index is >= 0); candidates equal on every key
   keep their position in the concatenation (the seed's first).

Sort / TopK (D514): an element's place is its *rank*, the number of elements that strictly
precede it; the order is total, so the ranks are a permutation and output place ``p`` holds the
element whose rank is ``p`` (its value's original bits — NaN payloads are one class, D21 — and
its index as int64). Sort keeps all ``n``, TopK the first ``k``. Per fiber ``n²`` comparisons.

The Top-K merge (D515) is the contract's region form: identity_K, then each seed slot, then
each element inserted by merge_K's sorted insertion (``_insert``), the predicate in the
lowering's normal form (proved equal to ``_lex`` by a test); an empty slot holds zero bits and
index -1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import z3

from tilefoundry.compiler import kir
from tilefoundry.semantics.ops import CustomReduce
from tilefoundry.semantics.ops.tensor import TopK
from tilefoundry.semantics.ops.tile_sort import Sort
from tilefoundry.validate import encode as E
from tilefoundry.validate.encode import Unsupported
from tilefoundry.validate.symexec import _pairwise

__all__ = ["ORDER_OPS", "is_topk_reduce", "rank_order"]

Val = tuple[np.ndarray, str]
I64 = 64


class _Cand:
    """One element of a fiber: its value term, its key (the value widened exactly to f32 for
    floats, the value itself otherwise), its NaN flag and its index (the tiebreak)."""

    __slots__ = ("index", "key", "nan", "value")

    def __init__(self, value: Any, dt: str, index: int):
        self.value, self.index = value, index
        if kir.is_float(dt):
            self.key = value if dt == "f32" else E.widen(value, dt, "f32")
            # NaN spelled x != x (np.isnan's predicate, and the lowering's spelling: equal
            # atoms are one term, which the solver does not have to re-derive)
            self.nan = z3.Not(z3.fpEQ(self.key, self.key))
        else:
            self.key, self.nan = value, z3.BoolVal(False)


def _value_cmp(dt: str, descending: bool) -> tuple[Callable, Callable]:
    """(strictly before, equal) on two keys in the requested direction; floats: IEEE ``<`` /
    ``==`` (so -0 == +0; a NaN key is never compared here)."""
    if kir.is_float(dt):
        return (z3.fpGT if descending else z3.fpLT), z3.fpEQ
    return E.binary("gt" if descending else "lt", dt), E.binary("eq", dt)


def _lex(keys: list[tuple[Any, Any]], last: Any) -> Any:
    """Lexicographic "strictly before" over keys, most significant first (``np.lexsort``'s
    order): ``lt1 or (eq1 and (lt2 or (eq2 and ... last)))``; each key is (before, equal)."""
    r = last
    for lt, eq in reversed(keys):
        r = z3.Or(lt, z3.And(r, eq) if r is not last else z3.And(eq, r))
    return r


def _before(c: _Cand, d: _Cand, dt: str, descending: bool, nan_first: bool) -> Any:
    """c strictly precedes d in the total order (module docstring): lexicographic over (the
    NaN flag in the placement's direction; the value, every NaN one key; the index)."""
    lt, eq = _value_cmp(dt, descending)
    if not kir.is_float(dt):  # no NaN key
        return _lex([(lt(c.key, d.key), eq(c.key, d.key))], z3.BoolVal(c.index < d.index))
    nan_key = (z3.And(c.nan, z3.Not(d.nan)) if nan_first else z3.And(z3.Not(c.nan), d.nan),
               d.nan == c.nan)
    # IEEE < is false when either is NaN; two NaNs share one value key
    value_key = (lt(c.key, d.key), z3.Or(eq(c.key, d.key), z3.And(d.nan, c.nan)))
    return _lex([nan_key, value_key], z3.BoolVal(c.index < d.index))


def rank_order(cands: list[_Cand], dt: str, descending: bool, nan_first: bool, k: int
               ) -> tuple[list[Any], list[Any]]:
    """The first ``k`` places of the fiber's total order: (values, i64 indices). Place ``p``
    holds the element with exactly ``p`` predecessors."""
    m = len(cands)
    one, nil = z3.BitVecVal(1, I64), z3.BitVecVal(0, I64)
    # rank[i] = #{j : j precedes i}, summed as a balanced pairwise tree over j = 0..m-1: integer
    # sums are order-free, and this spelling is a rank-based lowering's own, so the solver
    # matches its adders instead of re-deriving associativity (j = i counts "i precedes
    # itself", false in a strict order: the same spelling again)
    rank = [_pairwise([z3.If(_before(c, d, dt, descending, nan_first), one, nil)
                       for c in cands], lambda a, b: a + b) for d in cands]
    vals, idxs = [], []
    for p in range(min(k, m)):
        # the ranks are a permutation of 0..m-1 (the order is total), so exactly one element
        # has rank p; the chain tests them in lane order (the last hit wins) and ends in zero
        # bits / index 0: an unreachable default, spelled as kernel-interp's fresh buffer and a
        # scatter's last-write-wins order, so that a lowering by rank is proved without
        # re-deriving that the ranks are a permutation. The hit reads "a kept place (rank < k),
        # and place p" (implied by rank == p, p < k: the same value), the store's own test
        v: Any = E.zero(dt)
        ix: Any = nil
        for i, c in enumerate(cands):
            hit = z3.And(z3.BitVecVal(k, I64) > rank[i], rank[i] == p)  # a kept place: p
            v, ix = z3.If(hit, c.value, v), z3.If(hit, z3.BitVecVal(c.index, I64), ix)
        vals.append(v)
        idxs.append(ix)
    return vals, idxs


def _fibers(x: np.ndarray, axis: int) -> tuple[np.ndarray, tuple[int, ...]]:
    v = np.moveaxis(x, axis, -1)
    return v.reshape(-1, v.shape[-1]), v.shape[:-1]


def _select(x: np.ndarray, dt: str, axis: int, k: int, descending: bool, nan_first: bool
            ) -> tuple[Val, Val]:
    """Sort / TopK along ``axis``: the first ``k`` places of each fiber's order."""
    f, batch = _fibers(x, axis)
    n = f.shape[1]
    vals = np.empty((f.shape[0], k), object)
    idxs = np.empty((f.shape[0], k), object)
    for r in range(f.shape[0]):
        cands = [_Cand(f[r, i], dt, i) for i in range(n)]
        v, ix = rank_order(cands, dt, descending, nan_first, k)
        vals[r], idxs[r] = v, ix
    shape = (*batch, k)
    return ((np.moveaxis(vals.reshape(shape), -1, axis), dt),
            (np.moveaxis(idxs.reshape(shape), -1, axis), "i64"))


def _nan_first(nan: str, abstr: set[str], what: str) -> bool:
    if nan == "error":
        abstr.add(f"{what} nan='error' read as 'last' (the run-time NaN check is not modelled)")
    return nan == "first"


def _order_dtype(dt: str, what: str) -> None:
    if dt == "f8e8m0" and "TopKMerge" in what:  # topk_reducer._prepare refuses it
        raise Unsupported(f"unsupported op {what} on f8e8m0 (an evaluation error: no order "
                          f"with zeros and signs)")
    if dt == "f64":
        raise Unsupported(f"unsupported op {what} on f64")


def _sort(op: Sort, args: list[Val], abstr: set[str]) -> tuple[Val, Val]:
    (x, dt), = args
    if x.ndim == 0:
        raise Unsupported("Sort of a rank-0 value (an evaluation error)")
    _order_dtype(dt, "Sort")
    ax = op.axis % x.ndim
    if x.size == 0:
        return (x.copy(), dt), (np.empty(x.shape, object), "i64")
    return _select(x, dt, ax, x.shape[ax], op.descending, _nan_first(op.nan, abstr, "Sort"))


def _topk(op: TopK, args: list[Val], abstr: set[str]) -> tuple[Val, Val]:
    """``TopK`` (NaNs last, the reference's sorted order; ``sorted=False`` admits any
    permutation of it, compared here with the sorted member the reference returns)."""
    (x, dt), = args
    if x.ndim == 0:
        raise Unsupported("TopK of a rank-0 value (an evaluation error)")
    _order_dtype(dt, "TopK")
    if isinstance(op.k, bool) or not isinstance(op.k, int | np.integer):
        raise Unsupported(f"unsupported op TopK with a symbolic k ({op.k!r})")
    ax = op.axis % x.ndim
    k = int(op.k)
    if not 0 <= k <= x.shape[ax]:
        raise Unsupported(f"TopK k={k} outside [0, {x.shape[ax]}] (an evaluation error)")
    if not op.sorted:
        abstr.add("TopK sorted=False compared with the sorted member")
    if x.size == 0 or k == 0:
        shape = tuple(k if d == ax else e for d, e in enumerate(x.shape))
        return (np.empty(shape, object), dt), (np.empty(shape, object), "i64")
    return _select(x, dt, ax, k, op.largest, False)


def is_topk_reduce(op: object) -> bool:
    from tilefoundry.semantics.topk_reducer import TopKMerge

    return isinstance(op, CustomReduce) and isinstance(op.reducer, TopKMerge)


def topk_reduce(op: CustomReduce, args: list[Any], abstr: set[str]) -> tuple[Val, Val]:
    """``CustomReduce(reducer=TopKMerge(k, largest, nan))`` (``topk_reducer.topk_reduce``):
    ``merge_K(seed, lift-and-merge of the contributions)`` is ``take_K(sort(seed slots ++
    contributions))`` under the merge's total order (keys 1-4: the merge is exactly
    associative and commutative, so every policy and tree gives this value; a contribution
    outside the fiber's own top K is outranked by K of them and never taken). The seed's
    slots are normalized as the reference normalizes them: an invalid slot (index < 0) is
    zero bits and index -1."""
    r = op.reducer
    (x, dt) = args[0]
    seed = args[1]
    if not (isinstance(seed, tuple) and len(seed) == 2 and all(
            isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], np.ndarray)
            for s in seed)):
        raise Unsupported("CustomReduce(TopKMerge): the seed is not a (values, indices) pair")
    (sv, sdt), (si, idt) = seed
    if x.ndim == 0:
        raise Unsupported("CustomReduce(TopKMerge) of a rank-0 value (an evaluation error)")
    _order_dtype(dt, "CustomReduce(TopKMerge)")
    if sdt != dt or idt != "i64":
        raise Unsupported(f"CustomReduce(TopKMerge): seed of {sdt} / {idt} for x of {dt} (an "
                          f"evaluation error)")
    if len(op.axes) != 1:
        raise Unsupported(f"CustomReduce(TopKMerge) over axes {op.axes} (an evaluation error)")
    ax = op.axes[0] % x.ndim
    f, batch = _fibers(x, ax)
    keep_shape = tuple(1 if d == ax else e for d, e in enumerate(x.shape))
    if sv.shape not in ((*batch, r.k), (*keep_shape, r.k)) or si.shape != sv.shape:
        raise Unsupported(f"CustomReduce(TopKMerge): seed shapes {sv.shape} / {si.shape} (an "
                          f"evaluation error)")
    sv, si = sv.reshape(-1, r.k), si.reshape(-1, r.k)
    nan_first = _nan_first(r.nan, abstr, "CustomReduce(TopKMerge)")
    flt = kir.is_float(dt)
    carry = "f32" if flt else "i64"
    up = (lambda t: E.widen(t, dt, "f32") if dt != "f32" else t) if flt else \
        (lambda t: E.cast(t, dt, "i64", "nonfinite", "nearest"))
    # the carried key back to x's dtype: exactly the original value for the floats and the
    # integers (widening is exact, SMT floats have one NaN); an 8-bit NaN code becomes the one
    # NaN code the rounding gives (its sign / payload are the NaN class the contracts leave
    # open, D21; a code's bits are otherwise compared exactly)
    down = (lambda t: E.round_to(t, "f32", dt, "nonfinite") if dt != "f32" else t) if flt \
        else (lambda t: E.cast(t, "i64", dt, "nonfinite", "nearest"))
    n = f.shape[1]
    vals = np.empty((f.shape[0], r.k), object)
    idxs = np.empty((f.shape[0], r.k), object)
    true = z3.BoolVal(True)
    for row in range(f.shape[0]):
        empty = _Slot(E.const(0, carry), z3.BitVecVal(-1, I64), flt)
        best = [empty] * r.k
        for j in range(r.k):  # the seed's slots, each a candidate iff its index >= 0
            c = _Slot(up(sv[row, j]), si[row, j], flt)
            best = _insert(best, c, si[row, j] >= 0, flt, r.largest, nan_first)
        for i in range(n):
            c = _Slot(up(f[row, i]), z3.BitVecVal(i, I64), flt)
            best = _insert(best, c, true, flt, r.largest, nan_first)
        vals[row] = [down(sl.key) for sl in best]
        idxs[row] = [sl.index for sl in best]
    shape = (*(keep_shape if op.keepdim else batch), r.k)
    return (vals.reshape(shape), dt), (idxs.reshape(shape), "i64")


class _Slot:
    """A Top-K candidate / slot: its key (x's value widened exactly: f32 for floats, i64 for
    integers and bool) and its index; valid iff index >= 0; NaN iff key != key."""

    __slots__ = ("index", "key", "nan")

    def __init__(self, key: Any, index: Any, flt: bool):
        self.key, self.index = key, index
        self.nan = z3.Not(z3.fpEQ(key, key)) if flt else None


def _pick(c: Any, a: _Slot, b: _Slot, flt: bool) -> _Slot:
    """``c ? a : b`` field by field."""
    return _Slot(z3.If(c, a.key, b.key), z3.If(c, a.index, b.index), flt)


def _precedes(c: _Slot, ok: Any, s: _Slot, flt: bool, largest: bool, nan_first: bool) -> Any:
    """Candidate c (valid where ``ok``) strictly precedes slot s: s is empty (index < 0), or c
    comes first lexicographically on (NaN placement, value with every NaN one key, index).
    Spelled in the normal form ``by_nan or (same NaN class and (better or (tie and
    earlier)))``, the lowering's (D515: equal atoms are one term; ``tests/validate/
    test_hir_order.py`` proves this form equal to the lexicographic ``_lex`` on all inputs)."""
    better = (z3.fpGT if largest else z3.fpLT)(c.key, s.key) if flt else \
        (c.key > s.key if largest else c.key < s.key)
    earlier = c.index < s.index
    if flt:
        tie = z3.Or(z3.fpEQ(c.key, s.key), z3.And(c.nan, s.nan))
        by_key = z3.And(c.nan == s.nan, z3.Or(better, z3.And(tie, earlier)))
        a, b = (c.nan, s.nan) if nan_first else (s.nan, c.nan)
        key = z3.Or(z3.And(a, z3.Not(b)), by_key)
    else:
        key = z3.Or(better, z3.And(c.key == s.key, earlier))
    return z3.And(ok, z3.Or(z3.Not(s.index >= 0), key))


def _insert(best: list[_Slot], c: _Slot, ok: Any, flt: bool, largest: bool, nan_first: bool
            ) -> list[_Slot]:
    """``merge_K(best, {c})`` for a sorted ``best`` and a candidate later than all of it
    (``take_K(sort(best ∪ {c}))``): c enters before the first slot it strictly precedes (a
    full tie keeps the earlier candidate: the stable sort), the slots below shift down one,
    the last drops out; an invalid c enters nowhere, a valid one precedes every empty slot."""
    b = [_precedes(c, ok, s, flt, largest, nan_first) for s in best]
    out = [_pick(b[0], c, best[0], flt)]
    for j in range(1, len(best)):
        # b is monotone along the sorted slots: where b[j - 1] holds, c sits above slot j
        out.append(_pick(b[j], _pick(b[j - 1], best[j - 1], c, flt), best[j], flt))
    return out


ORDER_OPS: dict[type, Callable[[Any, list[Val], set[str]], Any]] = {Sort: _sort, TopK: _topk}
