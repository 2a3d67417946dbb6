"""Conformance levels: the finite laws the relaxation widenings rest on (smt/obligations/relax.py)
— and the excess claim can fail: a value two bf16 steps above the unrounded one is neither of
its directed roundings."""

from __future__ import annotations

import z3

from tilefoundry.smt.framework import REGISTRY, ProveCtx, run_obligations


def test_relaxation_laws_hold_and_arcp_is_real():
    results = {ob.name: out for ob, out in run_obligations(
        ["relax.excess.one_ulp.bf16", "relax.excess.one_ulp.f16", "relax.arcp.differs.f32"])}
    assert results["relax.excess.one_ulp.bf16"].status == "proved"
    assert results["relax.excess.one_ulp.f16"].status == "proved"
    arcp = results["relax.arcp.differs.f32"]
    assert arcp.status == REGISTRY["relax.arcp.differs.f32"].expect == "counterexample"
    assert arcp.counterexample["x*(1/y)"] != arcp.counterexample["x/y"]


def test_the_excess_claim_can_fail():
    """The same claim with the value two bf16 steps up in place of RNE(x): a counterexample."""
    ctx = ProveCtx()
    sort = z3.FPSort(8, 8)
    x = z3.fpBVToFP(z3.BitVec("x", 32), z3.Float32())
    ru = z3.fpToFP(z3.RTP(), x, sort)
    rd = z3.fpToFP(z3.RTN(), x, sort)
    two_up = z3.fpBVToFP(z3.fpToIEEEBV(ru) + 1, sort)
    fin = (z3.Not(z3.fpIsNaN(x)), z3.Not(z3.fpIsInf(x)), z3.fpGT(x, z3.FPVal(1.0, z3.Float32())),
           z3.fpLT(x, z3.FPVal(2.0, z3.Float32())))
    status, _ = ctx.prove(z3.Or(z3.fpEQ(two_up, rd), z3.fpEQ(two_up, ru)), "two_up",
                          assumptions=fin)
    assert status == "counterexample"
