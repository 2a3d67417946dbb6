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

__all__ = ["ORDERED_MAX", "REGISTRY", "UNORDERED_MAX", "UNSPECIFIED", "UNSPEC_PREFIX", "Choice",
           "tree_choice", "unspecified", "zero"]

ORDERED_MAX = 5  # 14 bracketings
UNORDERED_MAX = 4  # 15 trees
PREFIX = "choice:"
UNSPEC_PREFIX = "unspecified:"


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
    # the lanes by their Z3 ids (hash-consed: the same lanes are the same ids; the members
    # keep them alive, so an id is never reused while the choice exists; printing them cost
    # time and memory exponential in a term's sharing)
    key = hashlib.sha1("\x00".join([policy, dt, *(f"#{t.get_id()}" for t in v),
                                    f"#{init.get_id()}" if init is not None else "-"]).encode())
    name = f"{policy}.{dt}.{key.hexdigest()[:16]}"
    if name not in REGISTRY:
        REGISTRY[name] = Choice(z3.Const(f"choice.{name}", E.fp_sort(dt)), tuple(trees),
                                default)
    abstractions.add(PREFIX + name)
    return REGISTRY[name].var


#: every unspecified value made in this process (a float -> int cast's out-of-range element), by
#: name -> its variable (content-named like the choices: the same cast of the same term is the
#: same variable on both sides)
UNSPECIFIED: dict[str, z3.ExprRef] = {}


def zero(var: z3.ExprRef) -> z3.ExprRef:
    """The value a target's unspecified ``var`` takes: 0 of its sort (what kernel-interp and
    the reference write for an out-of-range float -> int cast)."""
    s = var.sort()
    if isinstance(s, z3.FPSortRef):
        return z3.FPVal(0.0, s)
    if s == z3.BoolSort():
        return z3.BoolVal(False)
    return z3.BitVecVal(0, s)


#: the terms each unspecified variable's name was made from, kept alive so that their Z3 ids
#: (part of the name) are never reused by other terms
_ANCHORS: dict[str, tuple] = {}


def unspecified(key: tuple, sort: z3.SortRef, abstractions: set[str]) -> z3.ExprRef:
    """The variable standing for an element the contract leaves unspecified (any value of
    ``sort``; D526), named from ``key``: strings and the Z3 terms it was computed from (by
    their ids: hash-consed, so the same term on both sides of a check is the same variable;
    printing them would cost time and memory exponential in a term's sharing). ``refine.decide``
    quantifies it universally where the source holds it (a counterexample must differ from
    every value the source may take) and sets it to 0, what kernel-interp and the reference
    write, where the target holds it (so a model replays)."""
    parts = [f"#{k.get_id()}" if isinstance(k, z3.AstRef) else str(k) for k in key]
    h = hashlib.sha1("\x00".join(parts).encode()).hexdigest()[:16]
    name = f"{key[0]}.{h}"
    if name not in UNSPECIFIED:
        UNSPECIFIED[name] = z3.Const(f"unspecified.{name}", sort)
        _ANCHORS[name] = tuple(k for k in key if isinstance(k, z3.AstRef))
    abstractions.add(UNSPEC_PREFIX + name)
    return UNSPECIFIED[name]
