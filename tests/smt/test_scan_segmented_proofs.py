"""Issue 37: the segmented scan's lifted (head, value) combine — the function the SegmentedScan
evaluator folds — is associative (Z3, every combine including a non-commutative one), its left
fold / blocked / Hillis–Steele realizations equal an independently written segmented
specification, and a seed copied into every segment is refuted. A wrong lifted combine (the
head ignored) is refuted too: the law's check has teeth."""

from __future__ import annotations

import z3

from tilefoundry.smt.framework import ProveCtx, run_obligations
from tilefoundry.smt.obligations import scan as S
from tilefoundry.smt.obligations import scan_segmented as G


def test_segmented_obligations_outcomes():
    out = {ob.name: o for ob, o in run_obligations([
        "scan_segmented.lifted_associative", "scan_segmented.prefix_law",
        "scan_segmented.seed_per_chunk"])}
    assoc = out["scan_segmented.lifted_associative"]
    assert assoc.status == "proved", assoc.detail
    assert len(assoc.sub) == 5 and all(st == "proved" for _, st in assoc.sub)
    law = out["scan_segmented.prefix_law"]
    assert law.status == "proved", law.detail
    assert len(law.sub) == 15 and all(st == "proved" for _, st in law.sub)
    leak = out["scan_segmented.seed_per_chunk"]
    assert leak.status == "counterexample"
    # the witness has a head (without one the two agree) and a seed that is not add's identity
    assert any(leak.counterexample[f"h{i}"] == "True" for i in range(4)), leak.counterexample
    assert not leak.counterexample["z"].startswith("0x00"), leak.counterexample


def test_a_combine_that_ignores_the_head_is_not_the_segmented_scan():
    ctx = ProveCtx()
    op = S.COMBINES["add"][0]
    seed, xs, hs, lseed, lifted = G._lifted_inputs("add")

    def wrong(a, b):
        return z3.Or(a[0], b[0]), op(a[1], b[1])

    got = S.left_prefixes(wrong, lseed, lifted)[1:]
    claim = z3.And(*(g[1] == s for g, s in zip(got, G._spec(op, seed, xs, hs), strict=True)))
    st, _ = ctx.prove(claim, "head_ignored")
    assert st == "counterexample"
