"""Backends that are the reference evaluator except for one planted behaviour in the ``tile``
family's reductions (issue 23, part C).

* **bugs** the quick tier must catch: ``seed_per_tree_leaf`` (a tree-policy seeded float sum
  that adds the seed to every active leaf — the seed "copied into every worker's partial"),
  ``masked_lane_plus_zero`` (a masked float sum that reads each masked-out lane as +0 instead of
  skipping it);
* **legal freedoms** it must pass: ``masked_lane_minus_zero`` (masked-out lanes padded with −0,
  an exact identity of RNE addition), ``seed_merged_last`` (an unordered_tree seeded sum that adds
  the seed at the far right of a reversed chain, x0 + (x1 + (... + z)): a tree of
  another permutation), ``welford_left_fold`` (a Welford tree policy
  computed as the serial left fold, one member of its admitted set).

Load one as ``tests.conformance.planted_tile_backends:<name>``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tests.conformance.planted_backends import Planted, _ctx, _wrap_eval
from tilefoundry.semantics.dtypes import cast, widen_to_f32
from tilefoundry.semantics.formats import DType, dtype_of
from tilefoundry.semantics.ops.tile_reduce import CustomReduce, MaskedReduce, SeededReduce
from tilefoundry.semantics.reductions import _fibers, normalize_axes, pairwise


def _float_tree_sum(ctx) -> bool:
    op = ctx.op
    return op.kind == "sum" and op.policy in ("ordered_tree", "unordered_tree")


def _parts(ctx, args):
    op = ctx.op
    x, z = args[0], args[1]
    ax = normalize_axes(tuple(op.axes), x.ndim, "planted")
    f, batch, _ = _fibers(x, ax)
    valid = _fibers(args[2], ax)[0] if isinstance(op, MaskedReduce) else np.ones(f.shape, bool)
    return f, valid, np.asarray(z).reshape(batch), batch


def _wide(a: np.ndarray, dt: DType) -> np.ndarray:
    return np.asarray(a, np.float32) if dt is DType.F32 else widen_to_f32(a)


def _finish(s32: np.ndarray, dt: DType, shape) -> np.ndarray:
    return np.ascontiguousarray(cast(np.asarray(s32, np.float32), dt).reshape(shape))


def _both(make):
    import contextlib

    @contextlib.contextmanager
    def patch():
        with _wrap_eval(SeededReduce, make), _wrap_eval(MaskedReduce, make):
            yield
    return patch


def seed_per_tree_leaf() -> Planted:
    def make(good):
        def bad(ctx, args):
            r = good(ctx, args)
            dt = dtype_of(args[0])
            if not (_float_tree_sum(ctx) and dt.is_float) or args[0].size == 0:
                return r
            f, valid, z, _ = _parts(ctx, args)
            with np.errstate(all="ignore"):
                leaves = np.where(valid, _wide(f, dt) + _wide(z, dt)[..., None],
                                  np.float32(-0.0))
                s = pairwise(leaves, np.add)
                s = np.where(valid.any(-1), s, _wide(z, dt))
            return _finish(s, dt, np.shape(r))
        return bad
    return Planted("seed-per-tree-leaf", _both(make))


def _padded(pad: float):
    def make(good):
        def bad(ctx, args):
            op = ctx.op
            dt = dtype_of(args[0])
            if not isinstance(op, MaskedReduce) or op.kind != "sum" or not dt.is_float:
                return good(ctx, args)
            x = np.where(args[2], args[0], cast(np.asarray(pad, np.float32), dt))
            plain = SeededReduce(op.axes, op.kind, op.policy, op.keepdim)
            return good(_ctx(ctx, plain), (np.ascontiguousarray(x), args[1]))
        return bad
    return make


def masked_lane_plus_zero() -> Planted:
    return Planted("masked-lane-plus-zero", lambda: _wrap_eval(MaskedReduce, _padded(0.0)))


def masked_lane_minus_zero() -> Planted:
    return Planted("masked-lane-minus-zero", lambda: _wrap_eval(MaskedReduce, _padded(-0.0)))


def seed_merged_last() -> Planted:
    def make(good):
        def bad(ctx, args):
            r = good(ctx, args)
            dt = dtype_of(args[0])
            if ctx.op.kind != "sum" or ctx.op.policy != "unordered_tree" or not dt.is_float \
                    or args[0].size == 0:
                return r
            f, valid, z, _ = _parts(ctx, args)
            w = _wide(f, dt)
            s = _wide(z, dt)
            with np.errstate(all="ignore"):
                for i in range(w.shape[-1] - 1, -1, -1):  # x0 + (x1 + (... + z)): seed last
                    s = np.where(valid[..., i], w[..., i] + s, s)
            return _finish(s, dt, np.shape(r))
        return bad
    return Planted("seed-merged-last", _both(make))


def welford_left_fold() -> Planted:
    def make(good):
        def bad(ctx, args):
            op = ctx.op
            if op.policy in ("ordered_tree", "unordered_tree"):
                return good(_ctx(ctx, dataclasses.replace(op, policy="fold_left")), args)
            return good(ctx, args)
        return bad
    return Planted("welford-left-fold", lambda: _wrap_eval(CustomReduce, make))


def welford_mean_99() -> Planted:
    """A Welford reduction over 8 or more contributions that returns a mean of 99 (issue 37:
    beyond enumeration such a state was UNJUDGED, never FAIL)."""
    def make(good):
        def bad(ctx, args):
            r = good(ctx, args)
            op = ctx.op
            n = int(np.prod([np.shape(args[0])[a] for a in op.axes]))
            if op.reducer != "welford" or n < 8:
                return r
            r = np.array(r, copy=True)
            r[..., 1] = np.float32(99.0)
            return r
        return bad
    return Planted("welford-mean-99", lambda: _wrap_eval(CustomReduce, make))


def welford_unweighted_merge() -> Planted:
    """Welford's merge with the unweighted mean ``(ma + mb) / 2`` — a wrong formula in the
    reducer definition the backend runs (the reference's bound never reads it, issue 37)."""
    import contextlib

    from tilefoundry.semantics import reducers

    good = reducers.REDUCERS["welford"]
    wrong = dataclasses.replace(good, merge=(
        good.merge[0], ("ifzero", "b.count", "a.mean",
                        ("ifzero", "a.count", "b.mean", ("mul", ("add", "a.mean", "b.mean"), 0.5))),
        good.merge[2]))

    @contextlib.contextmanager
    def patch():
        reducers.REDUCERS["welford"] = wrong
        try:
            yield
        finally:
            reducers.REDUCERS["welford"] = good
    return Planted("welford-unweighted-merge", patch)


def declared_wrong_merge() -> Planted:
    """A backend that runs a program-declared reducer with its own, wrong merge formula: the sum
    component merged as ``a.sum + b.amax`` (a component typo). The reference evaluates the
    program's declaration, never the backend's (D450)."""
    def make(good):
        def bad(ctx, args):
            op = ctx.op
            r = op.reducer
            if not getattr(r, "declared", False) or "amax" not in r.state:
                return good(ctx, args)
            wrong = dataclasses.replace(r, merge=(("add", "a.sum", "b.amax"), *r.merge[1:]))
            return good(_ctx(ctx, dataclasses.replace(op, reducer=wrong)), args)
        return bad
    return Planted("declared-wrong-merge", lambda: _wrap_eval(CustomReduce, make))


def declared_reversed_fold() -> Planted:
    """A declared reducer's tree policy computed as a left fold over the contributions in
    reverse order: one tree of a permutation (unordered_tree) — legal where the declared laws
    admit it; ordered_tree and folds are computed as the reference."""
    def make(good):
        def bad(ctx, args):
            op = ctx.op
            if not getattr(op.reducer, "declared", False) or op.policy != "unordered_tree":
                return good(ctx, args)
            x = np.flip(np.asarray(args[0]), tuple(op.axes))
            return good(_ctx(ctx, dataclasses.replace(op, policy="fold_left")),
                        [np.ascontiguousarray(x), *args[1:]])
        return bad
    return Planted("declared-reversed-fold", lambda: _wrap_eval(CustomReduce, make))


BUGS = {"seed_per_tree_leaf": ("SeededReduce", "MaskedReduce"),
        "masked_lane_plus_zero": ("MaskedReduce",),
        "welford_mean_99": ("CustomReduce",),
        "welford_unweighted_merge": ("CustomReduce",),
        "declared_wrong_merge": ("CustomReduce",)}
LEGAL = {"masked_lane_minus_zero": ("MaskedReduce",),
         "seed_merged_last": ("SeededReduce", "MaskedReduce"),
         "welford_left_fold": ("CustomReduce",),
         "declared_reversed_fold": ("CustomReduce",)}
