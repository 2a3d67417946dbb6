"""The oracle's side of the flagged scans (MaskedScan, SegmentedScan; D385, D386): their
admitted-set judge (registered into ``tile_reduce.ADMITTED``, read by ``compare``) and their
enclosure rule (registered into ``enclosure.ENCLOSURES``).

* Judge: ``scan_flags.flagged_scan_admits`` — exact for fold_left / max / min / integers; an
  ordered-tree float add admits, per prefix, every order-preserving regrouping of its own kept
  leaves (the seed first where it enters).
* Enclosure (inputs themselves enclosed): the flags must be exact (a flag computed from an
  enclosed value may go either way: everything, soundly); a float add bounds every tree over
  each prefix's kept leaves — a skipped contribution an exact -0 leaf, which moves no tree —
  as Scan's rule does; max / min and folds are monotone in every element of x (corner
  evaluation at the all-lower / all-upper ends); an integer add / mul of enclosed values wraps
  (everything). A prefix with no leaf is the identity, exactly.
"""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.enclosure import (
    Enc,
    corners,
    from_candidates,
    register_enclosure,
    with_nan,
)
from tilefoundry.oracle.enclosure import as_f64 as _f64
from tilefoundry.oracle.enclosures.core import Site, _full_like
from tilefoundry.oracle.enclosures.tensor import _enumerated_trees, _tree_bounds
from tilefoundry.oracle.tile_reduce import ADMITTED
from tilefoundry.semantics.dtypes import dtype_of
from tilefoundry.semantics.evaluator.tile_scan_flags import flag_mode
from tilefoundry.semantics.ops.tile_scan_flags import MaskedScan, SegmentedScan
from tilefoundry.semantics.scan_flags import flagged_scan_admits, keep_matrix


def _admitted(op, ops, observed):
    adm = flagged_scan_admits(observed, ops[0], ops[1], flag_mode(op), op.combine, op.axis,
                              inclusive=op.inclusive, seed=op.seed, policy=op.policy)
    return np.asarray(adm.admitted), adm.detail


ADMITTED[MaskedScan] = _admitted
ADMITTED[SegmentedScan] = _admitted


def _is_tree(op, xv: np.ndarray) -> bool:
    return op.policy == "ordered_tree" and op.combine == "add" and dtype_of(xv).is_float


@register_enclosure(MaskedScan, SegmentedScan)
def _flagged_scan(s: Site):
    op = s.op
    v = np.asarray(s.value)
    xv, fv = np.asarray(s.args[0]), np.asarray(s.args[1], bool)
    tree = _is_tree(op, xv)
    if s.exact_inputs and not tree:
        return None
    ax = op.axis % xv.ndim
    if v.shape[ax] == 0:
        return None
    if s.encs[1] is not None:
        return _full_like(v, f"{s.name}: flags computed from enclosed values")
    x = s.enc(0)
    dt = x.dtype
    if dt.is_int and op.combine in ("add", "mul"):
        return _full_like(v, f"integer {s.name} {op.combine} of enclosed values (wraps)")
    keep, seeded = keep_matrix(fv, flag_mode(op), ax, inclusive=op.inclusive)
    bad_x = np.moveaxis(x.nan | ~x.real, ax, -1)
    nan = np.moveaxis((keep & bad_x[..., None, :]).any(-1), -1, ax)
    if op.combine == "add" and dt.is_float:
        lo = np.moveaxis(np.where(x.real, _f64(x.lo), np.nan), ax, -1)
        hi = np.moveaxis(np.where(x.real, _f64(x.hi), np.nan), ax, -1)
        vv = np.moveaxis(v, ax, -1)
        outs = []
        for i in range(vv.shape[-1]):  # one prefix at a time, every fiber at once
            k = keep[..., i, :i + 1]
            llo, lhi = np.where(k, lo[..., :i + 1], -0.0), np.where(k, hi[..., :i + 1], -0.0)
            empty = ~k.any(-1)
            if op.seed is not None:
                sd = np.where(seeded[..., i], np.float64(op.seed), -0.0)[..., None]
                llo, lhi = np.concatenate([sd, llo], -1), np.concatenate([sd, lhi], -1)
                empty &= ~seeded[..., i]
            m = llo.shape[-1]
            e = _tree_bounds(llo, lhi, max(m - 1, 0), dt, None, 0.0,
                             f"{s.name}(add, {op.policy}) prefix")
            if tree:
                e = _enumerated_trees(e, llo, lhi, dt, False, False)
            p = Enc.point(vv[..., i])
            outs.append(Enc(*(np.where(empty, getattr(p, a), getattr(e, a))
                              for a in ("lo", "hi", "nan", "real")), e.cause))
        parts = [np.moveaxis(np.stack([getattr(e, a) for e in outs], -1), -1, ax)
                 for a in ("lo", "hi", "nan", "real")]
        cause = x.cause or f"{s.name}(add, {op.policy})"
        return with_nan(Enc(*(np.array(p, order="C") for p in parts), cause), nan)
    cands, _ = corners(lambda a: s.impl(a, fv), [x])  # max / min: monotone in every element
    return with_nan(from_candidates(cands, nan, dtype_of(v), x.cause, s.name), nan)
