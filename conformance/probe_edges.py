"""Ordinary and edge cases for ``conformance probe`` (issue 33, Deliver 3; D301).

A probe claims what a backend runs on ordinary values. An edge case — an empty tensor, a special
input value, a result that overflows — tests how the backend handles the edge, not whether it
runs the op: a backend that errors on an empty reduction but is right on every ordinary one
still runs ``Reduce.min``. So each probe key is probed on its smallest **ordinary** case, and
its edge cases are run too and reported separately as **findings**, never used to drop or
narrow a claim.

``input_edge`` classifies a case by its inputs (vectorized over each array):

* ``empty``: an input with no element (a zero-size axis: an empty reduction, an empty tile);
* ``special``: a float input holding NaN, ±inf or −0 (the special-value cases).

A key whose catalog cases are all edge cases (the quick tier's single-op ``Reduce.min`` cases
are an empty reduction, NaN / signed-zero cases and a special-value row) is probed on an
**ordinary variant** of a special-input case (``ordinary_variant``): the same program with each
NaN, ±inf and −0 input element replaced by 1.0 (exact in every float format), named
``probe-ordinary/<case id>``. It is built from the catalog case in the process that runs it,
so it is as deterministic as the case.

``result_edge`` classifies an ordinary-input case by its reference result: ``empty`` (an
output with no element) or ``non-finite`` (finite inputs, a NaN or ±inf result: an overflow
or an invalid operation). It evaluates the reference, so the probe calls it only on the few
smallest candidates of each key (``ORDINARY_TRIES``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["EDGE_CLASSES", "ORDINARY_PREFIX", "ORDINARY_TRIES", "input_edge",
           "ordinary_variant", "result_edge"]

#: the edge classes, in the order the probe reports them
EDGE_CLASSES = ("empty", "special", "non-finite")
#: how many of a key's smallest ordinary-input candidates the probe evaluates for an ordinary
#: result before it probes the key with an edge case (and says so)
ORDINARY_TRIES = 4
#: the id prefix of an ordinary variant of a catalog case
ORDINARY_PREFIX = "probe-ordinary/"


def _leaves(v: Any) -> list:
    """The arrays of a value (a tuple / list flattened; a sharded value gathered)."""
    from tilefoundry.semantics.evaluator.mesh import Sharded, unshard

    if isinstance(v, tuple | list):
        return [x for f in v for x in _leaves(f)]
    if isinstance(v, Sharded):
        return _leaves(unshard(v))
    return [v]


def _is_float(x: np.ndarray) -> bool:
    from tilefoundry.semantics.formats import dtype_of

    try:
        return dtype_of(x).is_float
    except Exception:  # a storage dtype the formats do not name (bool, object): not a float
        return False


def _wide(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(np.float64)


def input_edge(inputs: list) -> str | None:
    """``"empty"`` / ``"special"`` (see the module docstring) or None: ordinary inputs."""
    arrays = [np.asarray(x) for x in _leaves(list(inputs))
              if isinstance(x, np.ndarray | np.generic)]
    if any(a.size == 0 for a in arrays):
        return "empty"
    for a in arrays:
        if _is_float(a):
            w = _wide(a)
            if not np.isfinite(w).all() or (np.signbit(w) & (w == 0)).any():
                return "special"
    return None


def result_edge(module: Any, entry: str, inputs: list) -> str | None:
    """``"empty"`` / ``"non-finite"`` for the reference result of ordinary inputs, or None."""
    from tilefoundry.semantics.evaluator.core import evaluate

    value = evaluate(module, entry, list(inputs))
    outs = [np.asarray(x) for x in _leaves(value) if isinstance(x, np.ndarray | np.generic)]
    if any(a.size == 0 for a in outs):
        return "empty"
    if any(_is_float(a) and not np.isfinite(_wide(a)).all() for a in outs):
        return "non-finite"
    return None


def _special(a: np.ndarray) -> np.ndarray:
    w = _wide(a)
    return ~np.isfinite(w) | (np.signbit(w) & (w == 0))


def _sanitized(inputs: list) -> list:
    """``inputs`` with every NaN, ±inf and −0 element of a float array replaced by 1.0."""
    out = []
    for x in inputs:
        if isinstance(x, np.ndarray | np.generic) and _is_float(np.asarray(x)):
            a = np.asarray(x)
            x = np.where(_special(a), np.asarray(1.0).astype(a.dtype), a).astype(a.dtype)
        out.append(x)
    return out


def ordinary_variant(case: Any) -> Any:
    """The ordinary variant of a special-input ``case`` (see the module docstring): a Case
    ``probe-ordinary/<id>`` building the same program on sanitized inputs."""
    from dataclasses import replace

    def build() -> tuple:
        module, entry, inputs = case.build()
        return module, entry, _sanitized(list(inputs))

    return replace(case, id=ORDINARY_PREFIX + case.id, build=build)
