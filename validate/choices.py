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

__all__ = [
    "MAX_STATE_TREES",
    "ORDERED_MAX",
    "REGISTRY",
    "UNORDERED_MAX",
    "UNSPECIFIED",
    "UNSPEC_PREFIX",
    "Choice",
    "abstracted",
    "state_choice",
    "state_trees",
    "tree_choice",
    "unspecified",
    "zero",
]

ORDERED_MAX = 6  # 42 bracketings
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


#: merge trees a tree-policy ``CustomReduce`` fiber may have to be a choice (D537): as many as
#: refinement's per-element enumeration of a source-only choice takes
MAX_STATE_TREES = 256


def state_trees(leaves: list[tuple], merge: Callable[[tuple, tuple], tuple], unordered: bool,
                limit: int = MAX_STATE_TREES) -> list[tuple] | None:
    """Every merge tree over ``leaves`` (state tuples) as the contract admits them
    (``reducers.merge_trees``, the reference's own enumeration: the bracketings in leaf order,
    or every split and both operand orders); None when there are more than ``limit``."""
    from tilefoundry.semantics.reducers import merge_trees

    n = len(leaves)
    count: dict[int, int] = {1: 1}
    for m in range(2, n + 1):  # Catalan(m - 1), or (2m - 3)!! 2^(m - 1) oriented trees
        count[m] = sum(count[k] * count[m - k] for k in range(1, m)) if not unordered else \
            count[m - 1] * (2 * m - 3) * 2
    if count[n] > limit:
        return None
    return merge_trees(leaves, merge, unordered)


def state_choice(trees: list[tuple], default: tuple, policy: str, abstractions: set[str]
                 ) -> tuple:
    """A tree-policy ``CustomReduce`` fiber's state as one choice among its merge ``trees``
    (D537): an index constant (named from the trees' content) selecting the whole state, so
    that every component comes from the same tree; ``default`` (the reference's tree, what
    kernel-interp runs) is the member a target-only choice takes."""
    ids = [f"#{t.get_id()}" for tree in trees for t in tree]
    key = hashlib.sha1("\x00".join([policy, "state", *ids]).encode()).hexdigest()[:16]
    name = f"{policy}.state.{key}"
    at = next((i for i, t in enumerate(trees)
               if all(z3.eq(a, b) for a, b in zip(t, default, strict=True))), None)
    if at is None:
        raise ValueError("the reference's merge tree is not among the enumerated trees")
    if name not in REGISTRY:
        REGISTRY[name] = Choice(z3.BitVec(f"choice.{name}", 16),
                                tuple(z3.BitVecVal(i, 16) for i in range(len(trees))),
                                z3.BitVecVal(at, 16))
    abstractions.add(PREFIX + name)
    var = REGISTRY[name].var
    out = []
    for c in range(len(default)):
        term = trees[-1][c]
        for i in range(len(trees) - 2, -1, -1):
            term = z3.If(var == i, trees[i][c], term)
        out.append(term)
    return tuple(out)


def abstracted(what: str, key: str, values: list, flags: list, abstr: set[str]) -> Any:
    """An f32 result whose admitted set depends on mask / flag values (a masked tree sum, a
    flagged ordered-tree scan prefix; D542): one uninterpreted function of the f32 values and
    the flags, named by ``key`` and the arity, so the same op on the same operands is the same
    term on both sides of a check (an elaboration that keeps it is proved) and anything else is
    a counterexample that must reproduce, or "failed to prove"; ``what`` names the
    abstraction. ``values`` ends with one value per flag (a seed may come first). A lane whose
    flag is false whatever the inputs (a tile's padding) is no operand, and flags are
    simplified, so the HIR's fiber and the kernel IR's padded, edge-masked block give one term."""
    abstr.add(f"{what} (admitted set abstracted)")
    flags = [z3.simplify(c) if z3.is_bool(c) else z3.BoolVal(bool(c)) for c in flags]
    keep = [i for i, c in enumerate(flags) if not z3.is_false(c)]
    off = len(values) - len(flags)  # the values before the flagged lanes (the seed)
    values = [*values[:off], *(values[off + i] for i in keep)]
    fs = [z3.BitVecVal(1, 1) if z3.is_true(flags[i]) else
          z3.If(flags[i], z3.BitVecVal(1, 1), z3.BitVecVal(0, 1)) for i in keep]
    f32 = E.fp_sort("f32")
    fn = z3.Function(f"abstracted.{key}.{len(values)}.{len(fs)}", *([f32] * len(values)),
                     *([z3.BitVecSort(1)] * len(fs)), f32)
    return fn(*values, *fs)


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
