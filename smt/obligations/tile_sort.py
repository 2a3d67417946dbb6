"""The tile-family Sort's merge laws (the Tile design, "Ordering and selection stay logical Tile
operations"): a large sort "is a launch graph: block-local sort, followed by merge_sorted
passes", and Top-K's merge ``merge_K(a, b) = take_K(sort(a ∪ b))`` relies on "Discarding
everything below the current K-th candidate cannot affect any later Top-K merge".

Proved (``expect="proved"``), per ordering (ascending / descending × nan last / first), over
symbolic f32 values (every bit pattern: ±0, ±inf, NaN payloads) of two blocks of 3 with the
source indices 0..2 and 3..5, on the composite key of ``laws.composite_key`` (whose order is
proved equal to the D38 total key — -0 == +0, ties by index — by ``laws.topk_merge_k*``), the
symbolic laws with that key abstracted (``check_sort_merge``):

* ``sort.merge_sorted``: ``merge_sorted(sort(x), sort(y)) == sort(x ++ y)`` — the two-pointer
  merge of the sorted blocks (taking x's head unless y's head strictly precedes it) is the sort
  of the whole axis, values and indices, so block-local sorting is a sound realization of Sort;
* ``sort.topk_merge``: ``merge_K(take_K(sort(x)), take_K(sort(y))) == take_K(sort(x ++ y))`` for
  K = 2 — Top-K of the whole axis is the Top-K merge of the blocks' Top-K, i.e. TopK is the
  K-prefix of Sort and chunked Top-K loses nothing.

Both are cross-checked on concrete values against ``ordering.sort`` / ``ordering.topk``.
``merge`` / ``key_fn`` parameters exist to plant bugs in tests (a merge that takes y's head on
an equal value — an unstable merge — is refuted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import z3

from tilefoundry.semantics.ordering import sort as ref_sort
from tilefoundry.semantics.ordering import topk as ref_topk
from tilefoundry.smt.framework import Outcome, ProveCtx, obligation
from tilefoundry.smt.obligations.laws_refute import _combine
from tilefoundry.smt.obligations.laws_topk import (
    IDX_BITS,
    KEY_BITS_ABSTRACT,
    ORDERINGS,
    Cand,
    _cx,
    _same,
    _show,
    before,
    encode_topk_merge,
)

__all__ = ["check_sort_merge", "encode_sort", "merge_sorted"]

BLOCK = 3


def _known(c: z3.BoolRef) -> bool | None:
    """A condition's value when it folds to a constant (concrete candidates), else None: the
    concrete cross-checks then build no If terms."""
    c = z3.simplify(c)
    return True if z3.is_true(c) else False if z3.is_false(c) else None


def _cx2(p: Cand, q: Cand) -> tuple[Cand, Cand]:
    k = _known(before(q, p))
    if k is None:
        return _cx(p, q)
    return (q, p) if k else (p, q)


def encode_sort(xs: Sequence[Cand]) -> list[Cand]:
    """A stable bubble-sort network of compare-exchanges on ``before``."""
    u = list(xs)
    n = len(u)
    for r in range(n):
        for j in range(n - 1, r, -1):
            u[j - 1], u[j] = _cx2(u[j - 1], u[j])
    return u


def _pick(c: z3.BoolRef, p: Sequence[Cand], q: Sequence[Cand]) -> list[Cand]:
    return [Cand(*(z3.If(c, f, g) for f, g in zip(x.fields(), y.fields(), strict=True)))
            for x, y in zip(p, q, strict=True)]


def merge_sorted(a: Sequence[Cand], b: Sequence[Cand],
                 take_b: Callable[[Cand, Cand], z3.BoolRef] | None = None) -> list[Cand]:
    """The two-pointer merge of two sorted runs: y's head goes first only when it strictly
    precedes x's head (``take_b``, default ``before(b, a)``), so equal keys keep x first."""
    take = take_b or (lambda x, y: before(y, x))
    if not a:
        return list(b)
    if not b:
        return list(a)
    c = take(a[0], b[0])
    k = _known(c)
    if k is not None:  # concrete: one branch
        return [b[0], *merge_sorted(a, b[1:], take_b)] if k else \
            [a[0], *merge_sorted(a[1:], b, take_b)]
    from_a = [a[0], *merge_sorted(a[1:], b, take_b)]
    from_b = [b[0], *merge_sorted(a, b[1:], take_b)]
    return _pick(c, from_b, from_a)


def _crosscheck(desc: bool, nan: str, merge, n_cases: int = 16):
    """The encodings on concrete values == ordering.sort / ordering.topk."""
    rng = np.random.default_rng(5)
    pool = np.array([0.0, -0.0, 1.0, -1.0, 2.0, np.inf, -np.inf, np.nan, 1.0], np.float32)
    for case in range(n_cases):
        x = rng.choice(pool, 2 * BLOCK).astype(np.float32)
        cands = [Cand.of(z3.BoolVal(True), z3.BitVecVal(int(b), 32), z3.BitVecVal(i, IDX_BITS),
                         desc, nan) for i, b in enumerate(x.view(np.uint32).tolist())]
        got = merge(encode_sort(cands[:BLOCK]), encode_sort(cands[BLOCK:]))
        got_idx = [z3.simplify(c.index).as_long() for c in got]
        _, want = ref_sort(x, descending=desc, nan=nan)
        _, want_k = ref_topk(x, 2, largest=desc, nan=nan)
        if got_idx != want.tolist() or got_idx[:2] != want_k.tolist():
            return case + 1, {"x": str(x.tolist()), "merged indices": str(got_idx),
                              "ordering.sort indices": str(want.tolist())}
    return n_cases, None


def _abstract_block(prefix: str, start: int) -> list[Cand]:
    """Valid candidates with free KEY_BITS_ABSTRACT-bit keys, free value bits, fixed indices."""
    return [Cand(z3.BoolVal(True), z3.BitVec(f"{prefix}{i}_key", KEY_BITS_ABSTRACT),
                 z3.BitVec(f"{prefix}{i}_value", 32), z3.BitVecVal(start + i, IDX_BITS))
            for i in range(BLOCK)]


def check_sort_merge(ctx: ProveCtx, orderings=ORDERINGS, merge=merge_sorted) -> Outcome:
    """1. concrete, per ordering: the encodings with the real composite key == ordering.sort /
    ordering.topk; 2. symbolic: keys abstracted to free 4-bit values, distinct (the composite
    key is: it ends in the index). The networks read keys only through comparisons, so an
    order-preserving relabelling of the 6 real keys into 4 bits maps any real counterexample to
    one of these (the argument of ``laws.check_topk_laws``)."""
    res: list = []
    cases = 0
    for desc, nan in orderings:
        tag = f"descending={desc}, nan={nan}"
        n, bad = _crosscheck(desc, nan, merge)
        cases += n
        res.append((f"crosscheck ({tag}) with ordering.sort / ordering.topk",
                     "counterexample" if bad else "proved", bad))
    x, y = _abstract_block("x", 0), _abstract_block("y", BLOCK)
    distinct = tuple(p.key != q.key for i, p in enumerate([*x, *y]) for q in [*x, *y][i + 1:])
    whole = encode_sort([*x, *y])
    merged = merge(encode_sort(x), encode_sort(y))
    show = {**_show(x, "x"), **_show(y, "y"), **_show(merged, "merged"), **_show(whole, "sort")}
    # every network moves a candidate's fields together (one condition per exchange) and the
    # indices are distinct constants, so equal index sequences are equal candidate sequences
    same = z3.And(*[p.index == q.index for p, q in zip(merged, whole, strict=True)])
    res.append(("merge_sorted(sort(x), sort(y)) == sort(x ++ y)",
                *ctx.prove(same, "sort_merge", assumptions=distinct, show=show)))
    k = 2
    tk = encode_topk_merge(encode_sort(x)[:k], encode_sort(y)[:k], k)
    res.append((f"merge_K(topk(x), topk(y)) == take_K(sort(x ++ y)), K = {k}",
                *ctx.prove(_same(tk, whole[:k]), "sort_topk", assumptions=distinct,
                           show={**show, **_show(tk, "merge_K")})))
    return _combine(res, f"blocks of {BLOCK} (indices 0..{BLOCK - 1} and {BLOCK}.."
                         f"{2 * BLOCK - 1}; keys abstracted to {KEY_BITS_ABSTRACT} bits, see "
                         f"check_sort_merge): merge_sorted of the sorted blocks is the sort of "
                         f"the axis, and the Top-K merge (K = 2) of the blocks' Top-K is its "
                         f"2-prefix; {cases} concrete cross-checks (ascending / descending x "
                         f"nan last / first, the real composite key) agree with ordering.sort")


@obligation("sort.merge_sorted")
def sort_merge_sorted(ctx: ProveCtx) -> Outcome:
    """Tile-family Sort: block-local sort + merge_sorted == sort; Top-K is Sort's K-prefix."""
    return check_sort_merge(ctx)

