"""SMT semantics of ``CustomReduce`` (``reducers.custom_reduce``) for ``hir_smt``: the reducer's
declared expressions, each one f32 operation (``ifzero`` spelled as the lowering spells it,
``x == +0``); a fold is the seed, then each lifted contribution merged in (fold_right:
``merge(lift(x), state)``); a tree policy is one choice among every merge tree of
``[seed, lift(x0), ...]`` (D537). The registered table is ``CUSTOM_OPS``; the Top-K merge
reducer is ``hir_order``'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import z3

from tilefoundry.semantics.ops import CustomReduce
from tilefoundry.validate import encode as E
from tilefoundry.validate.encode import Unsupported

__all__ = ["CUSTOM_OPS"]

Val = tuple[np.ndarray, str]


def _reducer_expr(e: object, env: dict[str, Any]) -> Any:
    """``reducers.eval_expr`` on f32 terms: each operation one IEEE f32 operation; max / min
    NaN-propagating with -0 < +0 (``_pick``); ``ifzero`` tests c == 0 (either zero)."""
    if isinstance(e, str):
        return env[e]
    if isinstance(e, float | int):
        return E.const(np.float32(e), "f32")
    head, *args = e
    vals = [_reducer_expr(a, env) for a in args]
    if head == "ifzero":  # the lowering's spelling (x == +0, true at ±0), so the terms match
        return z3.If(E.binary("eq", "f32")(vals[0], E.const(np.float32(0.0), "f32")),
                     vals[1], vals[2])
    if head in ("max", "min"):
        return E.fminmax(vals[0], vals[1], head == "max")
    return E.binary(head, "f32")(vals[0], vals[1])


def _custom(op: CustomReduce, args: list[Val], abstr: set[str]) -> Val:
    """``reducers.custom_reduce`` under a fold: the state starts at the seed and each lifted
    contribution is merged in (``merge(state, lift(x))``, fold_right ``merge(lift(x), state)``),
    every expression one f32 operation; x widened exactly to f32. A tree policy (its admitted
    set is every bracketing of the merge) and a reducer without merge expressions are
    "unsupported"."""
    from tilefoundry.semantics.reducers import Reducer, reducer
    from tilefoundry.validate.hir_smt import _fibers, _lowp  # (hir_smt imports this module)

    (x, dt), (sd, _) = args
    try:
        r = reducer(op.reducer)
    except Exception as e:  # a reducer that is not an expression reducer
        raise Unsupported(f"unsupported op CustomReduce({op.reducer!r}): {e}") from None
    if not isinstance(r, Reducer):
        raise Unsupported(f"unsupported op CustomReduce({type(r).__name__}): no merge "
                          f"expressions")
    if not all(isinstance(m, tuple | str | float | int) for m in (*r.merge, *r.lift)):
        raise Unsupported(f"unsupported op CustomReduce({r.name}): no merge expressions")
    f, batch, keep_shape = _fibers(x, op.axes)
    comps = len(r.state)
    seeds = sd.reshape(-1, comps)
    up = (lambda t: E.widen(t, dt, "f32")) if _lowp(dt) else (lambda t: t)

    def merge(a, b) -> tuple:
        env = {f"a.{c}": a[j] for j, c in enumerate(r.state)}
        env.update({f"b.{c}": b[j] for j, c in enumerate(r.state)})
        for name, e in r.lets:
            env[name] = _reducer_expr(e, env)
        return tuple(_reducer_expr(e, env) for e in r.merge)

    out = np.empty((f.shape[0], comps), object)
    for row in range(f.shape[0]):
        leaves = [tuple(_reducer_expr(e, {"x": up(f[row, i])}) for e in r.lift)
                  for i in range(f.shape[1])]
        state = tuple(seeds[row])
        if op.policy == "fold_right":
            for leaf in reversed(leaves):
                state = merge(leaf, state)
        elif op.policy == "fold_left":
            for leaf in leaves:
                state = merge(state, leaf)
        elif leaves:  # a tree policy: one choice among every merge tree (D537)
            state = _custom_tree(r.name, op.policy, state, leaves, merge, abstr)
        out[row] = state
    shape = (*keep_shape, comps) if op.keepdim else (*batch, comps)
    return out.reshape(shape), "f32"


def _custom_tree(name: str, policy: str, seed: tuple, leaves: list[tuple], merge,
                 abstr: set[str]) -> tuple:
    """A tree-policy fiber (D537): the state is a choice among every f32 merge tree over
    ``[seed, lift(x0), ...]`` (``reducers.reducer_trees``: bracketings in order for
    ``ordered_tree``, any split and both operand orders for ``unordered_tree``), the reference's
    own tree (the pairwise tree of the contributions, then the seed merged in front) the member
    a target-only choice takes; more trees than refinement enumerates: "unsupported"."""
    from tilefoundry.validate.choices import MAX_STATE_TREES, state_choice, state_trees

    trees = state_trees([seed, *leaves], merge, policy == "unordered_tree")
    if trees is None:
        raise Unsupported(f"unsupported op CustomReduce({name}) under {policy} over "
                          f"{len(leaves) + 1} leaves (more than {MAX_STATE_TREES} merge trees)")
    t = list(leaves)
    while len(t) > 1:  # the reference's pairwise tree (reducers._custom_fibers)
        t = [merge(t[i], t[i + 1]) for i in range(0, len(t) - 1, 2)] + t[len(t) - len(t) % 2:]
    return state_choice(trees, merge(seed, t[0]), policy, abstr)


CUSTOM_OPS: dict[type, Callable[[Any, list[Val], set[str]], Val]] = {CustomReduce: _custom}
