"""Enclosure rule of the tile-family ``Sort`` (an extension of the HIR catalog).

The r-th sorted value is an order statistic: monotone in every element, so TopK's rule
(``enclosures.tensor._topk_sorted``, with ``largest`` = ``descending``) encloses it; the indices are
the reference's wherever a fiber's intervals are pairwise disjoint. ``nan="first"`` moves a
possibly-NaN element to the front, which breaks that monotonicity, and ``nan="error"`` has no
result for a NaN: where an operand may be NaN those two give the full enclosure (sound; never
judged as a PASS).
"""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.enclosure import register_enclosure
from tilefoundry.oracle.enclosures.core import Site, _full_like
from tilefoundry.oracle.enclosures.tensor import _topk_sorted, index_range
from tilefoundry.semantics.ops.tile_sort import Sort


@register_enclosure(Sort)
def _sort(s: Site):
    if s.exact_inputs:
        return None
    x = s.enc(0)
    vals, idx = s.value
    if s.op.nan != "last" and bool(np.any(x.nan | ~x.real)):
        why = f"Sort(nan={s.op.nan!r}) over possibly-NaN elements"
        ax = s.op.axis % x.lo.ndim if x.lo.ndim else 0
        return (_full_like(np.asarray(vals), why),
                index_range(idx, x.lo.shape[ax] if x.lo.ndim else 1, why))
    return _topk_sorted(s, s.op.descending)
