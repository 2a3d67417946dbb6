"""Reference semantics of the flagged scans (``MaskedScan``, ``SegmentedScan``).

Both follow Scan's left recurrence (``reductions.scan``) one position at a time, vectorized over
every fiber; the dtype rules are Scan's (D219): low-precision floats carry an f32 state (each
output rounded once), integer add / mul wrap in x's dtype, float max / min propagate NaN and
order -0 < +0.

* masked (D385): a contribution whose mask is false is skipped — the state passes it unchanged,
  no identity is combined in its place. Output i is the state after (inclusive) or before
  (exclusive) position i; a state with no contribution and no seed is the combine's identity.
* segmented (D386): the state is the lifted pair ``(head, value)`` and each step applies
  ``lifted_combine`` — ``(h1, v1) ⊕ (h2, v2) = (h1 or h2, v2 if h2 else op(v1, v2))`` — the
  function whose associativity ``smt/obligations/scan_segmented.py`` proves. The seed is
  ``(false, seed)`` before x0, so it reaches the prefixes before the first head only. Exclusive
  output at a head is the identity.

``keep_matrix`` gives, per output position i, the contributions j its prefix combines and
whether the seed enters it — what the admitted-set judge (``flagged_scan_admits``) and the
compiled lowering read.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.combine_laws import COMBINE_LAWS
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.reductions import (
    _F32,
    ENUMERATE_MAX,
    Admission,
    _cast,
    _check_kind_dtype,
    _float_target,
    _operand,
    _pick,
    _same,
    _same_f32,
    _seed_value,
    _tree_admits,
    identity,
    normalize_axis,
)
from tilefoundry.semantics.reductions import round_to as _round
from tilefoundry.semantics.reductions import widen as _widen

__all__ = ["FLAG_MODES", "flagged_scan", "flagged_scan_admits", "keep_matrix", "lifted_combine"]

FLAG_MODES = ("mask", "segment")


def lifted_combine(op: Callable, where: Callable, or_: Callable) -> Callable:
    """The segmented scan's combine on lifted ``(head, value)`` pairs:
    ``(h1, v1) ⊕ (h2, v2) = (h1 or h2, v2 if h2 else op(v1, v2))``. ``where`` / ``or_`` are
    numpy's (``np.where``, ``np.logical_or``) in the evaluator and z3's (``If``, ``Or``) in the
    proof, so both use this one definition."""

    def comb(a: tuple, b: tuple) -> tuple:
        (h1, v1), (h2, v2) = a, b
        return or_(h1, h2), where(h2, v2, op(v1, v2))

    return comb


def _work(dt: DType, combine: str) -> tuple[Callable, Callable, Callable, np.ndarray]:
    """(to working values, op on them, back to dt, the identity as a working value)."""
    ident = np.asarray(1, dt.storage) if combine == "mul" else identity(
        "sum" if combine == "add" else combine, dt)
    if dt.is_float:
        op = np.add if combine == "add" else (lambda a, b: _pick(a, b, combine == "max"))
        return (lambda a: _widen(a, dt)), op, (lambda a: _round(a, dt)), _widen(ident, dt)
    if combine in ("add", "mul"):  # i64 wraparound is exact modulo 2^bits, then wraps into dt
        return ((lambda a: np.asarray(a).astype(np.int64)),
                np.add if combine == "add" else np.multiply,
                (lambda a: _cast(a, dt)), ident.astype(np.int64))
    op = np.maximum if combine == "max" else np.minimum
    return (lambda a: np.asarray(a)), op, (lambda a: np.asarray(a, dt.storage)), ident


def _check(x: np.ndarray, flags: np.ndarray, mode: str, combine: str, axis: int
           ) -> tuple[np.ndarray, DType, int, np.ndarray]:
    if mode not in FLAG_MODES:
        raise InvalidArgumentError(f"flagged scan: mode {mode!r} is not one of {FLAG_MODES}")
    x, dt = _operand(np.asarray(x), "flagged scan")
    f = np.asarray(flags)
    if f.dtype != np.bool_ or f.shape != x.shape:
        raise InvalidArgumentError(
            f"flagged scan: the {'mask' if mode == 'mask' else 'heads'} must be bool with x's "
            f"shape {x.shape}, got {f.dtype} {f.shape}")
    if combine not in COMBINE_LAWS:
        raise InvalidArgumentError(f"flagged scan: combine {combine!r} is not "
                                   f"{'/'.join(COMBINE_LAWS)}")
    if COMBINE_LAWS[combine].int_only and not dt.is_int:
        raise InvalidArgumentError(f"flagged scan mul: integer dtypes only, got {dt}")
    _check_kind_dtype({"add": "sum", "mul": "max"}.get(combine, combine), dt, "flagged scan")
    return x, dt, normalize_axis(axis, x.ndim, "flagged scan"), f


def flagged_scan(x: np.ndarray, flags: np.ndarray, mode: str, combine: str = "add",
                 axis: int = -1, *, inclusive: bool = True, seed: object = None) -> np.ndarray:
    """The fold_left reference of a masked (``mode="mask"``) or segmented (``"segment"``) scan."""
    x, dt, ax, f = _check(x, flags, mode, combine, axis)
    v, fl = np.moveaxis(x, ax, -1), np.moveaxis(f, ax, -1)
    n, batch = v.shape[-1], v.shape[:-1]
    if n == 0:
        return x.copy()
    to_w, op, back, ident = _work(dt, combine)
    w = to_w(v)
    has = np.zeros(batch, bool)
    state = np.broadcast_to(ident, batch).astype(w.dtype)
    if seed is not None:
        state = np.broadcast_to(to_w(_seed_value(seed, dt, "flagged scan")), batch).astype(
            w.dtype)
        has = np.ones(batch, bool)
    head = np.zeros(batch, bool)  # the lifted state's head component
    comb = lifted_combine(op, np.where, np.logical_or)
    outs = []
    with np.errstate(all="ignore"):
        for i in range(n):  # one step per position, every fiber at once
            xi, fi = w[..., i], fl[..., i]
            if mode == "mask":
                new = np.where(has, op(state, xi), xi)
                if not inclusive:
                    outs.append(np.where(has, state, ident))
                state, has = np.where(fi, new, state), has | fi
                if inclusive:
                    outs.append(np.where(has, state, ident))
            else:
                if not inclusive:
                    outs.append(np.where(has & ~fi, state, ident))
                h2, v2 = comb((head, state), (fi, xi))
                head = h2
                state = np.where(has, v2, xi)
                has = np.ones(batch, bool)
                if inclusive:
                    outs.append(state)
    out = back(np.stack(outs, -1).astype(w.dtype))
    return np.moveaxis(np.asarray(out, dt.storage), -1, ax)


def keep_matrix(flags: np.ndarray, mode: str, axis: int, *, inclusive: bool
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per output position i (moved last, then j): ``keep[..., i, j]`` — contribution j enters
    prefix i — and ``seeded[..., i]`` — the seed enters prefix i (if there is one)."""
    f = np.moveaxis(np.asarray(flags, bool), axis, -1)
    n = f.shape[-1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    before = (j <= i) if inclusive else (j < i)
    if mode == "mask":
        keep = f[..., None, :] & before
        return keep, np.ones(f.shape, bool)
    seg = np.cumsum(f, axis=-1)  # segment id of each position: heads at or before it
    keep = (seg[..., None, :] == seg[..., :, None]) & before
    return keep, seg == 0


def flagged_scan_admits(result: np.ndarray, x: np.ndarray, flags: np.ndarray, mode: str,
                        combine: str = "add", axis: int = -1, *, inclusive: bool = True,
                        seed: object = None, policy: str = "ordered_tree",
                        enumerate_max: int = ENUMERATE_MAX) -> Admission:
    """Whether ``result`` is admitted: exact (fold_left, max / min, integers) or, for a float add
    under ordered_tree, each prefix an order-preserving regrouping of its own leaves — the seed
    (where it enters) then the kept contributions in order. A skipped contribution is an exact
    -0 leaf there, which changes no tree's value (x + -0 = x in IEEE arithmetic, NaN and +0
    included), so the trees over the padded leaves are exactly the trees over the kept ones; a
    prefix with no leaf at all is the identity, compared exactly."""
    x, dt, ax, f = _check(x, flags, mode, combine, axis)
    r = np.asarray(result)
    ref = flagged_scan(x, flags, mode, combine, ax, inclusive=inclusive, seed=seed)
    if r.shape != ref.shape:
        raise InvalidArgumentError(f"flagged scan: result has shape {r.shape}, x has {x.shape}")
    if combine != "add" or policy == "fold_left" or not dt.is_float:
        ok = np.asarray(_same(r, ref, dt, "flagged scan"))
        return Admission(ok, np.full(r.shape, "exact"), f"{mode} scan {combine}: equality with "
                         f"the reference; {int(ok.sum())}/{r.size} admitted")
    target = _float_target(r, "flagged scan")
    w = _widen(np.moveaxis(x, ax, -1), dt)
    rw = _widen(np.moveaxis(r, ax, -1), target)
    n = w.shape[-1]
    if n == 0:
        return Admission(np.ones(r.shape, bool), np.full(r.shape, "exact"), "empty scan")
    keep, seeded = keep_matrix(f, mode, ax, inclusive=inclusive)
    zero = _F32(-0.0)
    if seed is not None:
        sd = np.broadcast_to(_widen(_seed_value(seed, dt, "flagged scan"), dt), w.shape[:-1])
    oks, methods = [], []
    for i in range(n):  # one output position at a time, all fibers at once
        leaves = np.where(keep[..., i, :], w, zero)[..., :i + 1]
        empty = ~keep[..., i, :].any(-1)
        if seed is not None:
            leaves = np.concatenate([np.where(seeded[..., i], sd, zero)[..., None], leaves], -1)
            empty &= ~seeded[..., i]
        ok, method, _ = _tree_admits(leaves, rw[..., i], target, False, None, enumerate_max)
        exact = _same_f32(rw[..., i], _widen(np.moveaxis(ref, ax, -1)[..., i], dt))
        oks.append(np.where(empty, exact, ok))
        methods.append(method)
    ok = np.moveaxis(np.stack(oks, -1), -1, ax)
    meth = np.moveaxis(np.broadcast_to(np.array(methods), rw.shape), -1, ax)
    return Admission(ok, np.ascontiguousarray(meth),
                     f"{mode} scan add of {dt} under ordered_tree, each prefix judged on its "
                     f"own kept leaves; {int(ok.sum())}/{ok.size} admitted")
