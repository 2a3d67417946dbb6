"""Enclosure rule of the tile-family ``Mma`` (an extension of the HIR catalog).

``mma(a, b, acc)`` is a sum over K + 1 leaves — the K products and the accumulator — in any
order when ``allow_reassociation`` (and the K order otherwise, one member of the same set): the
products' intervals (``enclosures.nn._products``) and acc's interval as one more leaf go
through the same tree bound as MatMul's (``_tree_bounds``). A possibly-NaN acc or product admits
NaN; a certainly-NaN one makes the element NaN.
"""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.enclosure import Enc, register_enclosure, with_nan
from tilefoundry.oracle.enclosure import as_f64 as _f64
from tilefoundry.oracle.enclosures.core import Site
from tilefoundry.oracle.enclosures.nn import _products
from tilefoundry.oracle.enclosures.tensor import _tree_bounds
from tilefoundry.semantics.formats import dtype_of
from tilefoundry.semantics.ops.tile_mma import Mma


@register_enclosure(Mma)
def _mma(s: Site):
    from tilefoundry.semantics.matmul import ETA_F32

    v = np.asarray(s.value)
    if s.exact_inputs and not s.contracts:
        return None
    a, b, c = s.enc(0), s.enc(1), s.enc(2)
    lo, hi, maybe_nan, cross, dead = _products(a, b)
    k = lo.shape[-1]
    skip = cross | dead
    clo = np.where(c.real, _f64(c.lo), 0.0)[..., None]
    chi = np.where(c.real, _f64(c.hi), 0.0)[..., None]
    leaves_lo = np.concatenate([np.where(skip, 0.0, lo), np.broadcast_to(clo, (*lo.shape[:-1], 1))],
                               -1)
    leaves_hi = np.concatenate([np.where(skip, 0.0, hi), np.broadcast_to(chi, (*hi.shape[:-1], 1))],
                               -1)
    # the result's dtype: f32, or an f16 / bf16 acc's (the f32 sum rounded once, D389)
    e = _tree_bounds(leaves_lo, leaves_hi, k + 1, dtype_of(v), None, ETA_F32, "Mma")
    crossed = cross.any(-1)
    died = dead.any(-1) | ~c.real
    e = with_nan(e, maybe_nan.any(-1) | crossed | died | c.nan)
    if crossed.any():
        f = Enc.full(dtype_of(v), e.shape, "Mma")
        e = Enc(np.where(crossed, f.lo, e.lo), np.where(crossed, f.hi, e.hi), e.nan, e.real,
                "Mma")
    real = e.real & ~(died & ~crossed)
    return Enc(*(np.broadcast_to(t, v.shape).copy() for t in (e.lo, e.hi, e.nan, real)),
               a.cause or b.cause or c.cause or "Mma")
