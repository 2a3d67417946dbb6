"""The oracle's side of the ``tile`` family's reductions: the admitted-set judges (``ADMITTED``,
read by ``compare``) and the enclosure rules (registered into ``enclosure.ENCLOSURES``).

* SeededReduce / MaskedReduce: a float sum under a tree policy is judged by
  ``reducers.seeded_admits`` — every tree over the seed and the active contributions (the seed
  the leftmost leaf under ordered_tree, any leaf under unordered_tree; a masked-out occurrence
  is no leaf). Folds, max / min and integers are exact.
* CustomReduce: ``reducers.custom_admits`` — every f32 merge tree over ``[seed, lift(x)...]``.
  With the Top-K merge reducer no admitted set: merge_K is exactly associative and commutative
  under its total order, so every tree gives the reference and the outputs (values, indices) are
  judged exact (D488); of an enclosed x, by the order-statistic enclosure (``_topk_enclosure``).

Enclosures (inputs that are themselves enclosed): a seeded float sum is bounded like a Reduce
tree with the seed as one more leaf (a masked-out lane an exact zero leaf, which moves neither
the sum nor Σ|leaf|); folds and max / min are monotone in every element (corner evaluation);
integer sums wrap (everything). A custom reducer's state is not monotone in its inputs
(Welford's mean and m2): enclosed inputs give the whole f32 range (unjudged, never a false
FAIL); on exact inputs under a tree policy the enclosure is the hull of the enumerated trees.
"""

from __future__ import annotations

import numpy as np

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.oracle.enclosure import (
    Enc,
    as_f64,
    from_candidates,
    register_enclosure,
    with_nan,
)
from tilefoundry.oracle.enclosures.core import Site, _full_like
from tilefoundry.oracle.enclosures.tensor import (
    _fiber_last,
    _tree_bounds,
    mixed_inf_full,
    rank_extremes,
)
from tilefoundry.semantics.dtypes import cast, dtype_of
from tilefoundry.semantics.ops.tile_reduce import CustomReduce, MaskedReduce, SeededReduce
from tilefoundry.semantics.reducers import (
    TREES,
    custom_admits,
    custom_prepare,
    reducer,
    reducer_trees,
    seeded_admits,
)
from tilefoundry.semantics.topk_reducer import TopKMerge


def _seeded(op, ops, observed):
    mask = ops[2] if isinstance(op, MaskedReduce) else None
    adm = seeded_admits(observed, ops[0], ops[1], op.kind, tuple(op.axes), mask=mask,
                        policy=op.policy)
    return np.asarray(adm.admitted), adm.detail


def _custom(op, ops, observed):
    from tilefoundry.oracle.compare import _NotCheckable

    try:
        adm = custom_admits(observed, ops[0], ops[1], op.reducer, tuple(op.axes),
                            policy=op.policy)
    except InvalidArgumentError as e:
        raise _NotCheckable(str(e)) from None
    a = np.asarray(adm.admitted)
    return np.broadcast_to(a[..., None], np.shape(observed)).copy(), adm.detail


#: op class -> (op, contract operands, observed) -> (admitted per element, detail)
ADMITTED = {SeededReduce: _seeded, MaskedReduce: _seeded, CustomReduce: _custom}


def _end(e: Enc, up: bool) -> np.ndarray:
    """The lower / upper end of an enclosure as a value (NaN where it has no real part)."""
    v = e.hi if up else e.lo
    if e.dtype.is_float:
        v = np.where(e.real, v, cast(np.asarray(np.nan, np.float32), e.dtype))
    return np.array(v, copy=True, order="C")  # (ascontiguousarray makes a 0-d array 1-d)


@register_enclosure(SeededReduce, MaskedReduce)
def _seeded_enclosure(s: Site):
    op = s.op
    v = np.asarray(s.value)
    x, z = s.enc(0), s.enc(1)
    dt = x.dtype
    tree = dt.is_float and op.kind == "sum" and op.policy in TREES
    if s.exact_inputs and not tree:
        return None
    if dt.is_int and op.kind == "sum":
        return _full_like(v, "integer sum of enclosed values (wraps)")
    r = x.lo.ndim
    axes = tuple(sorted(a % max(r, 1) for a in op.axes)) if r else ()
    active = np.ones(x.shape, bool) if not isinstance(op, MaskedReduce) else \
        np.asarray(s.args[2], bool)
    if tree:
        act = _fiber_last(active, axes)
        real = _fiber_last(x.real, axes)
        lo = np.where(act, np.where(real, _fiber_last(as_f64(x.lo), axes), np.nan), 0.0)
        hi = np.where(act, np.where(real, _fiber_last(as_f64(x.hi), axes), np.nan), 0.0)
        zl = np.where(z.real, as_f64(z.lo), np.nan).reshape((*lo.shape[:-1], 1))
        zh = np.where(z.real, as_f64(z.hi), np.nan).reshape((*lo.shape[:-1], 1))
        lo, hi = np.concatenate([zl, lo], -1), np.concatenate([zh, hi], -1)
        nan_in = (_fiber_last(active & (x.nan | ~x.real), axes).any(-1) |
                  (z.nan | ~z.real).reshape(lo.shape[:-1]))
        e = _tree_bounds(lo, hi, lo.shape[-1] - 1, dtype_of(v), None, 0.0,
                         f"{s.name}({op.kind}, {op.policy}) with its seed")
        e = with_nan(e, nan_in)
        return Enc(e.lo.reshape(v.shape), e.hi.reshape(v.shape), e.nan.reshape(v.shape),
                   e.real.reshape(v.shape), e.cause)
    rest = [np.asarray(s.args[2])] if isinstance(op, MaskedReduce) else []
    # monotone non-decreasing in every element (f32 add / max / min; the final rounding): the
    # all-lower and all-upper evaluations bound it (x and the seed do not broadcast together,
    # so this is two points, not ``corners``)
    cands = [s.impl(_end(x, up), _end(z, up), *rest) for up in (False, True)]
    bad = _fiber_last(active & (x.nan | ~x.real), axes).any(-1).reshape(v.shape) | \
        (z.nan | ~z.real).reshape(v.shape)
    e = from_candidates(cands, bad, dtype_of(v), x.cause, s.name)
    if dt.is_float and op.kind == "sum" and r:  # the seed is one more summand of each fiber
        lo_f = np.where(_fiber_last(active & x.real, axes), _fiber_last(as_f64(x.lo), axes), 0.0)
        hi_f = np.where(_fiber_last(active & x.real, axes), _fiber_last(as_f64(x.hi), axes), 0.0)
        zs = (*lo_f.shape[:-1], 1)
        lo_f = np.concatenate([np.where(z.real, as_f64(z.lo), 0.0).reshape(zs), lo_f], -1)
        hi_f = np.concatenate([np.where(z.real, as_f64(z.hi), 0.0).reshape(zs), hi_f], -1)
        e = mixed_inf_full(e, v, lo_f, hi_f, s.name)
    return with_nan(e, bad)


@register_enclosure(CustomReduce)
def _custom_enclosure(s: Site):
    op = s.op
    if isinstance(op.reducer, TopKMerge):  # exact laws: every tree gives the reference (D488)
        return None if s.exact_inputs else _topk_enclosure(s)
    v = np.asarray(s.value)
    tree = op.policy in TREES
    if s.exact_inputs and not tree:
        return None
    if not s.exact_inputs:
        return _full_like(v, f"CustomReduce({op.reducer}) of enclosed inputs: its state is not "
                             f"monotone in them")
    r = reducer(op.reducer)
    _, leaves, seed, _batch, _ = custom_prepare(s.args[0], s.args[1], r, tuple(op.axes),
                                                "CustomReduce enclosure")
    n = leaves.shape[-2]
    if n + 1 > (6 if op.policy == "ordered_tree" else 5):
        if op.reducer == "welford":
            return _welford_bound(s, leaves, seed, v, op)
        if getattr(r, "declared", False):
            return _declared_bound(r, leaves, seed, v, op)
        return _full_like(v, f"CustomReduce({op.reducer}, {op.policy}) over {n + 1} leaves: "
                             f"beyond enumeration")
    cols = [seed] + [leaves[..., i, :] for i in range(n)]
    cands = [c.reshape(v.shape) for c in reducer_trees(cols, r, op.policy == "unordered_tree")]
    return from_candidates(cands, np.zeros(v.shape, bool), dtype_of(v),
                           f"CustomReduce({op.reducer}, {op.policy}) merge trees", s.name)


def _topk_enclosure(s: Site):
    """Top-K merge of an enclosed x (the seed exact): the r-th selected value is an order
    statistic of the seed's valid values and x's elements, monotone in every element, so TopK's
    extreme configurations bound it (``enclosures.tensor._topk_sorted``: a maybe-NaN element
    real at its end or dropped to NaN, which ranks last). The indices are the reference's
    wherever a fiber's candidates are pairwise disjoint intervals, else they range over the
    fiber's candidate indices. ``nan="first"`` / ``"error"`` with a maybe-NaN element, or an
    enclosed seed: the full enclosure (unjudged, never a false FAIL)."""
    from tilefoundry.oracle.enclosures.tensor import _isnan

    op, r = s.op, s.op.reducer
    vals, idx = (np.asarray(p) for p in s.value)
    seed_enc = s.encs[1]
    x = s.enc(0)
    maybe_nan = bool(np.any(x.nan | ~x.real))
    if (seed_enc is not None and not (isinstance(seed_enc, tuple) and
                                       all(e is None for e in seed_enc))) or \
            (maybe_nan and r.nan != "last"):
        why = f"CustomReduce({r}) of an enclosed seed or possibly-NaN x under nan={r.nan!r}"
        return (_full_like(vals, why), _full_like(idx, why))
    lo_cfg, hi_cfg = rank_extremes(x, r.largest)
    lo_v = np.asarray(s.impl(lo_cfg, *s.args[1:])[0])
    hi_v = np.asarray(s.impl(hi_cfg, *s.args[1:])[0])
    lo_n, hi_n = _isnan(lo_v), _isnan(hi_v)
    ext = Enc.full(dtype_of(vals), ())
    ev = Enc(np.where(lo_n, ext.lo, lo_v), np.where(hi_n, ext.hi, hi_v), lo_n | hi_n,
             ~(lo_n & hi_n), x.cause)
    # indices: fixed where every fiber's candidates (x's intervals, the seed's valid values as
    # points) are pairwise disjoint and no element may be NaN; else the fiber's index range
    a = op.axes[0] % x.lo.ndim
    batch = np.moveaxis(x.lo, a, -1).shape[:-1]
    sv, si = (np.asarray(p).reshape(*batch, r.k) for p in s.args[1])
    ok = si >= 0
    sw = as_f64(sv)
    lo = np.concatenate([np.moveaxis(as_f64(x.lo), a, -1), np.where(ok, sw, np.inf)], -1)
    hi = np.concatenate([np.moveaxis(as_f64(x.hi), a, -1), np.where(ok, sw, -np.inf)], -1)
    order = np.argsort(lo, axis=-1, kind="stable")  # an empty seed slot sorts last, disjoint
    slo, shi = np.take_along_axis(lo, order, -1), np.take_along_axis(hi, order, -1)
    fixed = (shi[..., :-1] < slo[..., 1:]).all(-1) & (not maybe_nan)
    n = x.lo.shape[a]
    top = np.maximum(n - 1, np.where(ok, si, -1).max(-1, initial=-1))
    bot = np.minimum(0, np.where(ok, si, 0).min(-1, initial=0))
    shape = idx.shape
    col = (*shape[:-1], 1)
    f = np.broadcast_to(fixed.reshape(col), shape)
    top, bot = np.broadcast_to(top.reshape(col), shape), np.broadcast_to(bot.reshape(col), shape)
    empty = idx < 0  # an empty slot is empty in every configuration (the count is fixed)
    ilo = np.where(f | empty, idx, bot).astype(idx.dtype)
    ihi = np.where(f | empty, idx, top).astype(idx.dtype)
    ie = Enc(ilo, ihi, np.zeros(shape, bool), np.ones(shape, bool),
             f"CustomReduce({r}) indices of overlapping enclosed candidates")
    return (ev, None if f.all() else ie)


def _welford_bound(s: Site, leaves, seed, v: np.ndarray, op) -> Enc:
    """Welford beyond enumeration: the sound bound of every f32 merge tree, rounded outward to
    f32 (``reducer_bounds``); fibers it cannot bound admit everything (unjudged)."""
    from tilefoundry.semantics.reducer_bounds import welford_tree_bounds

    try:
        _, lo, hi = welford_tree_bounds(leaves, seed)
    except InvalidArgumentError as e:
        return _full_like(v, f"CustomReduce(welford, {op.policy}): {e}")
    lo32 = lo.astype(np.float32)
    lo32 = np.where(lo32.astype(np.float64) > lo, np.nextafter(lo32, np.float32(-np.inf)), lo32)
    hi32 = hi.astype(np.float32)
    hi32 = np.where(hi32.astype(np.float64) < hi, np.nextafter(hi32, np.float32(np.inf)), hi32)
    shape = v.shape
    return Enc(lo32.reshape(shape), hi32.reshape(shape), np.zeros(shape, bool),
               np.ones(shape, bool), f"CustomReduce(welford, {op.policy}) merge-tree bound")


def _declared_bound(r, leaves, seed, v: np.ndarray, op) -> Enc:
    """A declared reducer beyond enumeration: the declared-law box (``declared_enclosure``,
    D451); a full component box admits NaN too."""
    from tilefoundry.semantics.declared_enclosure import ENCLOSE_MAX, tree_box

    if leaves.shape[-2] + 1 > ENCLOSE_MAX:
        return _full_like(v, f"CustomReduce({r.name}, {op.policy}): beyond {ENCLOSE_MAX} leaves")
    lo, hi = tree_box(r, leaves, seed)
    full = np.isneginf(lo) & np.isposinf(hi)
    shape = v.shape
    return Enc(lo.reshape(shape), hi.reshape(shape), full.reshape(shape),
               np.ones(shape, bool), f"CustomReduce({r.name}, {op.policy}) declared-law box")


__all__ = ["ADMITTED"]
