"""HIR data movement at data-dependent positions (D528), for ``hir_smt``: ``Gather`` by
data-dependent indices, and the ops whose positions are rank-0 integer operands
(``InsertSlice``'s offsets, ``CacheUpdate``'s ``cur_pos`` and ``s``).

Each output element reads one index element (``out[c.., i.., t..] = x[c.., indices[b.., i..],
t..]``, the evaluator's ``eval_gather``): it is an ``If`` chain over the ``n`` positions of
the gathered axis, ``If(index == k, x at k, ...)``, where "x at k" is the reference
evaluator's own index map run with every index ``k`` (``x`` replaced by its positions, as
``hir_smt._movement`` runs the data movement ops). An index outside ``[0, n)`` reads the
op's ``fill`` when it has one (D388); without one the reference raises an evaluation error
for the whole program, and that element is an unconstrained value (``choices.unspecified``,
keyed ``gather_oob``): universal in a source, so a target may do anything there, 0 in a
target. The outcome names the abstraction (``GATHER_OOB``).

A rank-0 position operand that is data (an offset computed from an input) is enumerated
(``scalar_positions``): every combination of the data-dependent operands' values in ``[0,
D]`` (``D`` the largest extent of the data operands; every valid position lies there) is run
through the reference's index map; a combination the reference refuses, and every value
outside the enumerated ones, is the source's evaluation error (an unconstrained element, as
above). At most ``MAX_COMBOS`` combinations, else "unsupported" with the count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import z3

from tilefoundry.compiler import kir
from tilefoundry.validate import encode as E

__all__ = ["GATHER_OOB", "MAX_COMBOS", "gather", "scalar_positions"]

#: the abstraction named when a position that is data may be out of range
GATHER_OOB = ("inputs on which a data-dependent index or offset is out of range (an evaluation "
              "error of the source) are not compared at the elements that read it")
#: the most combinations of data-dependent rank-0 positions enumerated
MAX_COMBOS = 512
#: ``hir_smt._movement``'s index map: concrete position operands (operand index -> array) to
#: where each result element comes from in the data operands' terms; None where the reference
#: refuses them and ``refused_ok``
IndexMap = Callable[..., "np.ndarray | None"]


def gather(op: Any, x_shape: tuple[int, ...], idx: np.ndarray, idt: str,
           index_map: IndexMap, flat: np.ndarray, xdt: str,
           abstractions: set[str]) -> np.ndarray:
    """The output terms of ``op`` (a ``Gather`` of an ``x`` of ``x_shape``) by index terms
    ``idx`` (integer dtype ``idt``): ``index_map({1: indices})`` is where each output element
    comes from in ``flat`` (``x``'s terms) for concrete indices (``hir_smt._movement``)."""
    from tilefoundry.validate.choices import unspecified

    r = len(x_shape)
    axis, bd = op.axis % r, op.batch_dims
    n = x_shape[axis]
    npdt = kir.numpy_dtype(idt)
    maps = [index_map({1: np.full(idx.shape, k, npdt)}) for k in range(n)]
    shape = maps[0].shape if maps else x_shape[:axis] + idx.shape[bd:] + x_shape[axis + 1:]
    # the index element each output element reads
    g = np.arange(idx.size, dtype=np.int64).reshape(
        idx.shape[:bd] + (1,) * (axis - bd) + idx.shape[bd:] + (1,) * (r - axis - 1))
    gid = np.broadcast_to(g, shape)
    flat_i = idx.reshape(-1)
    w = E.width(idt)
    fill = None if op.fill is None else \
        E.const(np.asarray(op.fill).astype(kir.numpy_dtype(xdt)), xdt)
    out = np.empty(shape, object)
    for p in np.ndindex(*shape):
        it = flat_i[gid[p]]
        cands = [flat[m[p]] for m in maps]
        v = fill
        if v is None:
            v = unspecified(("gather_oob", xdt, it, *cands), cands[0].sort() if cands else
                            E.fp_sort(xdt), abstractions)
            abstractions.add(GATHER_OOB)
        for k in reversed(range(n)):
            v = z3.If(it == z3.BitVecVal(k, w), cands[k], v)
        out[p] = v
    return out


def scalar_positions(name: str, dyn: list[tuple[int, z3.ExprRef, str]],
                     fixed: dict[int, np.ndarray], top: int, index_map: IndexMap,
                     flat: np.ndarray, dt: str, abstractions: set[str]) -> np.ndarray:
    """An op whose rank-0 position operands ``dyn`` ((operand index, term, dtype)) are data:
    every combination of their values in ``[0, top]`` through ``index_map`` (``fixed``: its
    constant position operands), the combinations the reference refuses left to the
    unconstrained element."""
    from itertools import product

    from tilefoundry.validate.choices import unspecified

    combos = (top + 1) ** len(dyn)
    if combos > MAX_COMBOS:
        raise E.Unsupported(f"unsupported op {name}: {len(dyn)} data-dependent positions of "
                            f"up to {top + 1} values each ({combos} combinations, more than "
                            f"{MAX_COMBOS})")
    maps: list[tuple[tuple[int, ...], np.ndarray]] = []
    for vals in product(range(top + 1), repeat=len(dyn)):
        pos = {**fixed, **{i: np.asarray(v, kir.numpy_dtype(d))
                           for (i, _, d), v in zip(dyn, vals, strict=True)}}
        res = index_map(pos, refused_ok=True)
        if res is not None:  # else the reference refuses these positions: an evaluation error
            maps.append((vals, res))
    if not maps:
        raise E.Unsupported(f"unsupported op {name}: no value of its data-dependent positions "
                            f"in [0, {top}] is in range")
    terms = [t for _, t, _ in dyn]
    conds = [z3.And([t == z3.BitVecVal(v, E.width(d)) for t, v, (_, _, d)
                     in zip(terms, vals, dyn, strict=True)]) for vals, _ in maps]
    out = np.empty(maps[0][1].shape, object)
    for p in np.ndindex(*out.shape):
        cands = [flat[m[p]] for _, m in maps]
        v = unspecified(("position_oob", dt, name, *terms, *cands), cands[0].sort(),
                        abstractions)
        for c, t in zip(reversed(conds), reversed(cands), strict=True):
            v = z3.If(c, t, v)
        out[p] = v
    abstractions.add(GATHER_OOB)
    return out
