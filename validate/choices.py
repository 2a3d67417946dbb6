"""The admitted sets of tree reductions as nondeterministic choices (Alive2's treatment of a
nondeterministic source).

A float ``ordered_tree`` sum admits every bracketing of its lanes in source order (Catalan(n-1)
members); an ``unordered_tree`` sum every bracketing of every order ((2n-3)!! distinct trees).
For a small fiber (``ORDERED_MAX`` / ``UNORDERED_MAX`` lanes) the sum is a fresh *choice*
constant constrained to the members, named from its content (policy, dtype, lanes, seed) so the
same reduction on both sides of a refinement is the same constant. ``refine.decide`` then
quantifies as refinement demands: a choice only the source makes is universal (every member is
tried: the target must differ from all of them), a choice both sides make is shared (same set),
and a choice only the target makes is the member kernel-interp runs (the reference's balanced
pairwise tree), so a counterexample replays. Larger fibers keep the uninterpreted-function
abstraction (``symexec._tree_uf``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import z3

from tilefoundry.validate import encode as E

__all__ = ["ORDERED_MAX", "REGISTRY", "UNORDERED_MAX", "Choice", "tree_choice"]

ORDERED_MAX = 5  # 14 bracketings
UNORDERED_MAX = 4  # 15 trees
PREFIX = "choice:"


@dataclass(frozen=True)
class Choice:
    var: z3.ExprRef
    members: tuple
    default: Any  # the member kernel-interp computes

    def constraint(self) -> z3.BoolRef:
        return z3.Or([self.var == m for m in self.members])


#: every choice made in this process, by name (names are content hashes: a choice is the same
#: wherever the same reduction is built)
REGISTRY: dict[str, Choice] = {}


def _ordered(v: list, add: Callable) -> list:
    if len(v) == 1:
        return [v[0]]
    return [add(a, b) for k in range(1, len(v)) for a in _ordered(v[:k], add)
            for b in _ordered(v[k:], add)]


def _unordered(v: list, add: Callable) -> list:
    """Each unordered tree once (reductions._enumerate_trees): the left part holds v[0]."""
    if len(v) == 1:
        return [v[0]]
    first, rest = v[0], v[1:]
    out = []
    for k in range(len(rest)):
        for extra in combinations(range(len(rest)), k):
            left = [first, *(rest[i] for i in extra)]
            right = [rest[i] for i in range(len(rest)) if i not in extra]
            out += [add(a, b) for a in _unordered(left, add) for b in _unordered(right, add)]
    return out


def tree_choice(v: list, dt: str, policy: str, init: Any, default: Any,
                abstractions: set[str]) -> Any | None:
    """The choice constant of a tree sum over lanes ``v`` (None: too many lanes)."""
    limit = ORDERED_MAX if policy == "ordered_tree" else UNORDERED_MAX
    if len(v) > limit:
        return None
    add = E.binary("add", dt)
    trees = (_ordered if policy == "ordered_tree" else _unordered)(list(v), add)
    if init is not None:
        trees = [add(init, t) for t in trees]
    key = hashlib.sha1("\x00".join([policy, dt, *(t.sexpr() for t in v),
                                    init.sexpr() if init is not None else "-"]).encode())
    name = f"{policy}.{dt}.{key.hexdigest()[:16]}"
    if name not in REGISTRY:
        REGISTRY[name] = Choice(z3.Const(f"choice.{name}", E.fp_sort(dt)), tuple(trees),
                                default)
    abstractions.add(PREFIX + name)
    return REGISTRY[name].var
