"""The declared reducers' law obligations (``smt/obligations/reducers.py``): exact laws proved,
real laws proved over the reals and refuted in f32 with a concrete witness (Welford's merge
associativity), the witness's trees admitted by the oracle, padding identities decided; a
planted false declaration is caught."""

from __future__ import annotations

import dataclasses

from tilefoundry.semantics.reducers import REDUCERS, Law
from tilefoundry.smt.framework import REGISTRY, ProveCtx, run_obligations
from tilefoundry.smt.obligations import reducers as R

NAMES = sorted(n for n in REGISTRY if n.startswith("reducers."))


def test_every_declared_law_has_its_obligations():
    want = {"reducers.padding.neg_zero_add", "reducers.padding.pos_zero_add",
            "reducers.welford.admitted_set_covers"}
    for r in REDUCERS.values():
        for lw in r.laws:
            base = f"reducers.{r.name}.{lw.name}" + (f".{'_'.join(lw.components)}"
                                                     if lw.components else "")
            want |= {base} if lw.over == "exact" else {f"{base}.real", f"{base}.f32"}
    assert set(NAMES) == want


def test_outcomes_match_expectations():
    results = {ob.name: (ob, out) for ob, out in run_obligations(NAMES)}
    for name, (ob, out) in results.items():
        assert out.status == ob.expect, (name, out.status, out.detail, out.counterexample)
    w = results["reducers.welford.associative.f32"][1].counterexample
    # a concrete f32 witness: the two trees' states differ in mean or m2
    assert w["left.mean"] != w["right.mean"] or w["left.m2"] != w["right.m2"]
    assert all(v.startswith("0x") for v in w.values())
    s = results["reducers.sum_max.associative.sum.f32"][1].counterexample
    assert s["left.sum"] != s["right.sum"]
    z = results["reducers.padding.pos_zero_add"][1].counterexample
    assert z["x"].startswith("0x80000000")  # -0 + +0 = +0


def test_a_false_identity_is_refuted():
    r = dataclasses.replace(REDUCERS["sum_max"], identity=(0.0, float("-inf")))
    out = R.check_exact(ProveCtx(), r, Law("identity", "exact"))  # +0 is no sum identity
    assert out.status == "counterexample"
