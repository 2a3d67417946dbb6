"""Issue 23, "Must show": the SMT obligation for the scan prefix law and its outcome, the
permutation refutation with the Tile design's example, the f32 regrouping witness; and a
planted wrong realization (the carry combined on the right) that the non-commutative combine
refutes — the law's check has teeth."""

from __future__ import annotations

import z3

from tilefoundry.smt.framework import ProveCtx, run_obligations
from tilefoundry.smt.obligations import scan as S


def test_scan_obligations_outcomes():
    out = {ob.name: o for ob, o in run_obligations(["scan.prefix_law", "scan.permutation",
                                                    "scan.f32_regrouping"])}
    law = out["scan.prefix_law"]
    assert law.status == "proved", law.detail
    # 5 combines (add, mul, max, min, affine) x 2 realizations (blocked, Hillis-Steele)
    assert len(law.sub) == 10 and all(st == "proved" for _, st in law.sub)
    perm = out["scan.permutation"]
    # Tile design: "Moving [1, 2, 3] to [3, 1, 2] preserves an integer sum of 6, but changes
    # inclusive prefixes from [1, 3, 6] to [3, 4, 6]."
    assert perm.status == "counterexample"
    assert perm.counterexample["design [1, 2, 3]"] == "[1, 3, 6]"
    assert perm.counterexample["design [3, 1, 2]"] == "[3, 4, 6]"
    reg = out["scan.f32_regrouping"]
    assert reg.status == "counterexample" and reg.counterexample["fold"] != \
        reg.counterexample["tree"]


def test_carry_on_the_right_is_refuted_for_a_noncommutative_combine():
    """Tile design: "A noncommutative combine must receive the earlier subsequence on its
    left." A blocked scan that combines (local prefix, carry) — the carry on the right — equals
    the recurrence for the commutative combines but not for affine-map composition."""
    ctx = ProveCtx()

    def wrong(op, ident, seed, xs):
        out, carry = [seed], seed
        for c0 in range(0, len(xs), 2):
            local = S.left_prefixes(op, ident(), xs[c0:c0 + 2])[1:]
            out += [op(p, carry) for p in local]
            carry = out[-1]
        return out

    verdicts = {}
    for comb, (op, ident) in S.COMBINES.items():
        seed = S._var("z", comb)
        xs = [S._var(f"x{i}", comb) for i in range(4)]
        claim = z3.And(*(S._eq(a, b) for a, b in
                         zip(wrong(op, ident, seed, xs), S.left_prefixes(op, seed, xs),
                             strict=True)))
        verdicts[comb], _ = ctx.prove(claim, f"wrong_{comb}")
    assert verdicts == {"add": "proved", "mul": "proved", "max": "proved", "min": "proved",
                        "affine": "counterexample"}
