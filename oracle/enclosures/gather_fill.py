"""The enclosure of a Gather with ``fill`` (D388): the data-movement rule of
``enclosure_rules`` moves the enclosure of x (its lo / hi / nan / real parts through the
reference kernel), which at an out-of-range index would read the fill as if it were a part; the
fill is an exact point, so there the result is the fill itself. This wraps the registered rule
(registered once, in ``ENCLOSURES``; a Gather without a fill is the rule unchanged)."""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.enclosure import ENCLOSURES, Enc
from tilefoundry.oracle.enclosures import tensor as _tensor  # noqa: F401  (the movement rule first)
from tilefoundry.semantics.evaluator.gather_fill import expand_invalid
from tilefoundry.semantics.ops.tensor import Gather

_MOVE = ENCLOSURES[Gather]


def _gather(s):
    e = _MOVE(s)
    op = s.op
    if e is None or op.fill is None or not isinstance(e, Enc):
        return e
    x, idx = np.asarray(s.args[0]), np.asarray(s.args[1]).astype(np.int64)
    n = x.shape[op.axis % x.ndim]
    bad = expand_invalid((idx < 0) | (idx >= n), op, x.ndim, np.ndim(s.value))
    bad = np.broadcast_to(bad, e.shape)
    v = np.asarray(s.value)  # the fill there, exactly
    return Enc(np.where(bad, v, e.lo), np.where(bad, v, e.hi), np.where(bad, False, e.nan),
               np.where(bad, True, e.real), e.cause)


ENCLOSURES[Gather] = _gather
