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


def gather(op: Any, x: np.ndarray, xdt: str, idx: np.ndarray, idt: str,
           run_ref: Callable[[tuple], Any], base: int, abstractions: set[str]) -> np.ndarray:
    """The output terms of ``op`` (a ``Gather``) over data terms ``x`` and index terms
    ``idx`` (integer dtype ``idt``); ``run_ref(operands)`` runs the reference evaluator on
    concrete operands, ``base`` offsets the positions (``hir_smt._BASE``)."""
    from tilefoundry.validate.choices import unspecified

    r = x.ndim
    axis, bd = op.axis % r, op.batch_dims
    n = x.shape[axis]
    pos = np.arange(base, base + x.size, dtype=np.int64).reshape(x.shape)
    npdt = kir.numpy_dtype(idt)
    maps = [np.asarray(run_ref((pos, np.full(idx.shape, k, npdt)))) for k in range(n)]
    shape = maps[0].shape if maps else x.shape[:axis] + idx.shape[bd:] + x.shape[axis + 1:]
    # the index element each output element reads
    g = np.arange(idx.size, dtype=np.int64).reshape(
        idx.shape[:bd] + (1,) * (axis - bd) + idx.shape[bd:] + (1,) * (r - axis - 1))
    gid = np.broadcast_to(g, shape)
    flat_x = x.reshape(-1)
    flat_i = idx.reshape(-1)
    w = E.width(idt)
    out = np.empty(shape, object)
    for p in np.ndindex(*shape):
        it = flat_i[gid[p]]
        cands = [flat_x[int(m[p]) - base] for m in maps]
        if op.fill is not None:
            v = E.const(np.asarray(op.fill).astype(kir.numpy_dtype(xdt)), xdt)
        else:
            v = unspecified(("gather_oob", xdt, it, *cands), cands[0].sort() if cands else
                            E.fp_sort(xdt), abstractions)
            abstractions.add(GATHER_OOB)
        for k in reversed(range(n)):
            v = z3.If(it == z3.BitVecVal(k, w), cands[k], v)
        out[p] = v
    return out


def scalar_positions(name: str, data: list[tuple[int, np.ndarray, str]],
                     dyn: list[tuple[int, np.ndarray, str]], fixed: dict[int, np.ndarray],
                     nargs: int, run_ref: Callable[[tuple], Any], base: int,
                     abstractions: set[str]) -> tuple[np.ndarray, str]:
    """An op whose rank-0 position operands ``dyn`` ((operand index, terms, dtype)) are data:
    ``data`` its data operands (one dtype), ``fixed`` its constant position operands."""
    from itertools import product

    from tilefoundry.errors import TilefoundryError
    from tilefoundry.validate.choices import unspecified

    dts = {dt for _, _, dt in data}
    if len(dts) != 1:
        raise E.Unsupported(f"unsupported op {name} over operands of dtypes {sorted(dts)}")
    ddt = dts.pop()
    top = max((max(a.shape, default=1) for _, a, _ in data), default=1)
    combos = (top + 1) ** len(dyn)
    if combos > MAX_COMBOS:
        raise E.Unsupported(f"unsupported op {name}: {len(dyn)} data-dependent positions of "
                            f"up to {top + 1} values each ({combos} combinations, more than "
                            f"{MAX_COMBOS})")
    sizes = [a.size for _, a, _ in data]
    offs = np.cumsum([0, *sizes])
    flat = np.concatenate([a.reshape(-1) for _, a, _ in data]) if data else np.empty(0, object)
    ops: list[Any] = [None] * nargs
    for o, (i, a, _) in zip(offs, data, strict=False):
        ops[i] = np.arange(base + o, base + o + a.size, dtype=np.int64).reshape(a.shape)
    for i, c in fixed.items():
        ops[i] = c
    maps: list[tuple[tuple[int, ...], np.ndarray]] = []
    for vals in product(range(top + 1), repeat=len(dyn)):
        for (i, _, dt), v in zip(dyn, vals, strict=True):
            ops[i] = np.asarray(v, kir.numpy_dtype(dt))
        try:
            res = np.asarray(run_ref(tuple(ops)))
        except (TilefoundryError, E.Unsupported):
            continue  # the reference refuses these positions: an evaluation error
        if res.dtype != np.int64 or (res.size and (res.min() < base or
                                                   res.max() >= base + int(offs[-1]))):
            raise E.Unsupported(f"unsupported op {name}: its reference implementation is not "
                                f"an index map here")
        maps.append((vals, res))
    if not maps:
        raise E.Unsupported(f"unsupported op {name}: no value of its data-dependent positions "
                            f"in [0, {top}] is in range")
    shape = maps[0][1].shape
    terms = [a.reshape(()).item() if a.shape == () else a.reshape(-1)[0] for _, a, _ in dyn]
    conds = [z3.And([t == z3.BitVecVal(v, E.width(dt)) for t, v, (_, _, dt)
                     in zip(terms, vals, dyn, strict=True)]) for vals, _ in maps]
    out = np.empty(shape, object)
    for p in np.ndindex(*shape):
        cands = [flat[int(m[p]) - base] for _, m in maps]
        v = unspecified(("position_oob", ddt, name, *terms, *cands), cands[0].sort(),
                        abstractions)
        for c, t in zip(reversed(conds), reversed(cands), strict=True):
            v = z3.If(c, t, v)
        out[p] = v
    abstractions.add(GATHER_OOB)
    return out, ddt
