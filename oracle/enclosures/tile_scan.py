"""Enclosure rule of ``Scan`` (split from ``oracle/enclosure_rules.py``, D382; the package mirrors
``semantics/evaluator/``).
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
from tilefoundry.semantics.dtypes import dtype_of
from tilefoundry.semantics.ops.tile_scan import Scan


def _prefix_any(m: np.ndarray, ax: int, inclusive: bool) -> np.ndarray:
    """Per output position: some contributing element (x0..xi, or x0..x(i-1)) has ``m``."""
    if m.shape[ax] == 0:
        return m
    acc = np.logical_or.accumulate(m, axis=ax)
    if inclusive:
        return acc
    first = np.zeros_like(np.take(acc, [0], axis=ax))
    return np.concatenate([first, np.take(acc, range(acc.shape[ax] - 1), axis=ax)], axis=ax)


@register_enclosure(Scan)
def _scan(s: Site):
    from tilefoundry.semantics.evaluator.tile_scan import scan_contract_is_set

    op: Scan = s.op
    v = np.asarray(s.value)
    xv = np.asarray(s.args[0])
    tree = scan_contract_is_set(op, xv)
    if s.exact_inputs and not tree:
        return None
    x = s.enc(0)
    dt = x.dtype
    ax = op.axis % xv.ndim
    if v.shape[ax] == 0:
        return None
    if dt.is_int and op.combine in ("add", "mul") and not s.exact_inputs:
        return _full_like(v, f"integer scan {op.combine} of enclosed values (wraps)")
    if op.combine == "add" and dt.is_float:
        lo = np.moveaxis(np.where(x.real, _f64(x.lo), np.nan), ax, -1)
        hi = np.moveaxis(np.where(x.real, _f64(x.hi), np.nan), ax, -1)
        if op.seed is not None:
            sd = np.broadcast_to(np.float64(op.seed), (*lo.shape[:-1], 1))
            lo, hi = np.concatenate([sd, lo], -1), np.concatenate([sd, hi], -1)
        off = (1 if op.inclusive else 0) + (1 if op.seed is not None else 0)
        vv = np.moveaxis(v, ax, -1)
        outs = []
        for j in range(vv.shape[-1]):
            m = j + off
            if m == 0:  # exclusive[0] without a seed: the identity, exact
                outs.append(Enc.point(vv[..., j]))
                continue
            e = _tree_bounds(lo[..., :m], hi[..., :m], m - 1, dt, None, 0.0,
                             f"Scan(add, {op.policy}) prefix")
            if tree:
                e = _enumerated_trees(e, lo[..., :m], hi[..., :m], dt, False, False)
            outs.append(e)
        parts = [np.moveaxis(np.stack([getattr(e, a) for e in outs], -1), -1, ax)
                 for a in ("lo", "hi", "nan", "real")]
        nan = _prefix_any(x.nan | ~x.real, ax, op.inclusive)
        cause = x.cause or f"Scan(add, {op.policy})"
        return with_nan(Enc(*(np.array(p, order="C") for p in parts), cause), nan)
    # max / min (and a fold_left add of exact ints, handled above): monotone in every element
    cands, _ = corners(s.impl, [x])
    nan = _prefix_any(x.nan | ~x.real, ax, op.inclusive)
    e = from_candidates(cands, nan, dtype_of(v), x.cause, s.name)
    return with_nan(e, nan)
