"""Segmented-scan obligations: the lifted ``(head, value)`` combine the SegmentedScan evaluator
folds (``semantics.scan_flags.lifted_combine``, this very function, over z3 terms here) and what
a per-chunk seed may not do.

Proved (``expect="proved"``):

* ``scan_segmented.lifted_associative`` — ``(h1, v1) ⊕ (h2, v2) = (h1 or h2, v2 if h2 else
  op(v1, v2))`` is associative for each combine of ``scan.COMBINES`` (wraparound add / mul,
  signed max / min on 8-bit vectors, and the non-commutative affine-map composition), for every
  input: "segmented scans can use a lifted (head, value) associative state" (Tile design).
* ``scan_segmented.prefix_law`` — with the seed lifted to ``(false, seed)``, the left fold of the
  lifted combine, a blocked scan (chunks of two, the carry on the left) and the Hillis–Steele
  doubling chain over four symbolic elements and four symbolic heads all equal the segmented
  specification written independently: output i folds the elements from i's last head up to i,
  or the seed then x0..xi when no head is at or before i. The encoding is cross-checked against
  ``scan_flags.flagged_scan`` on concrete 8-bit values.

Refuted (``expect="counterexample"``):

* ``scan_segmented.seed_per_chunk`` — a per-chunk seed copied into every segment (each head
  restarting from the seed): Z3 finds heads and values where it differs from the specification.
"""

from __future__ import annotations

import numpy as np
import z3

from tilefoundry.semantics.scan_flags import flagged_scan, lifted_combine
from tilefoundry.smt.framework import Outcome, ProveCtx, obligation
from tilefoundry.smt.obligations.commutation import NON_TABLE_OPS as _NON_TABLE
from tilefoundry.smt.obligations.scan import (
    COMBINES,
    W,
    _eq,
    _var,
    blocked_prefixes,
    hillis_steele,
    left_prefixes,
)

N = 4


def _where(c, a, b):
    if isinstance(a, tuple):
        return tuple(z3.If(c, p, q) for p, q in zip(a, b, strict=True))
    return z3.If(c, a, b)


def _lift(op):
    return lifted_combine(op, _where, z3.Or)


def _spec(op, seed, xs: list, heads: list, seed_everywhere: bool = False) -> list:
    """Output i, by cases on the last head k <= i (written without the lifted combine)."""
    outs = []
    for i in range(len(xs)):
        # no head at or before i: the seed then x0..xi
        val = left_prefixes(op, seed, xs[:i + 1])[-1]
        for k in range(i + 1):  # a later head overrides an earlier one
            seg = left_prefixes(op, seed, xs[k:i + 1])[-1] if seed_everywhere else \
                left_prefixes(op, xs[k], xs[k + 1:i + 1])[-1]
            val = _where(heads[k], seg, val)
        outs.append(val)
    return outs


def _lifted_inputs(comb: str):
    seed = _var("z", comb)
    xs = [_var(f"x{i}", comb) for i in range(N)]
    hs = [z3.Bool(f"h{i}") for i in range(N)]
    return seed, xs, hs, (z3.BoolVal(False), seed), list(zip(hs, xs, strict=True))


def _prove_cases(ctx: ProveCtx, claim: z3.BoolRef, heads: list, label: str
                 ) -> tuple[str, dict | None]:
    """``claim`` for every input, proved one head assignment at a time: each case substitutes
    the booleans and simplifies, leaving a plain bit-vector identity (the If-laden whole is
    slower to bit-blast). Every assignment is covered, so the conjunction is the claim."""
    for bits in range(1 << len(heads)):
        vals = [z3.BoolVal(bool(bits >> i & 1)) for i in range(len(heads))]
        case = z3.simplify(z3.substitute(claim, *zip(heads, vals, strict=True)))
        st, cex = ctx.prove(case, f"{label}_h{bits}")
        if st != "proved":
            cex = dict(cex or {})
            cex.update({str(h): str(v) for h, v in zip(heads, vals, strict=True)})
            return st, cex
    return "proved", None


def _crosscheck() -> str | None:
    rng = np.random.default_rng(37)
    for comb in ("add", "mul", "max", "min"):
        op = COMBINES[comb][0]
        for _ in range(20):
            xs = rng.integers(-128, 128, N).astype(np.int8)
            hs = rng.random(N) < 0.4
            seed = int(rng.integers(-128, 128))
            enc = _spec(op, z3.BitVecVal(seed, W), [z3.BitVecVal(int(v), W) for v in xs],
                        [z3.BoolVal(bool(h)) for h in hs])
            got = [z3.simplify(e).as_signed_long() for e in enc]
            ref = flagged_scan(xs, hs, "segment", comb, seed=np.int8(seed)).astype(int).tolist()
            if got != ref:
                return f"{comb} on {xs.tolist()} heads {hs.tolist()} seed {seed}: {got} vs {ref}"
    return None


@obligation("scan_segmented.lifted_associative")
def lifted_associative(ctx: ProveCtx) -> Outcome:
    """The lifted (head, value) combine is associative for every scan combine."""
    sub, failed = [], []
    for comb, (op, _) in COMBINES.items():
        lift = _lift(op)
        a, b, c = ((z3.Bool(f"h{n}"), _var(f"v{n}", comb)) for n in "abc")
        left, right = lift(lift(a, b), c), lift(a, lift(b, c))
        claim = z3.And(left[0] == right[0], _eq(left[1], right[1]))
        st, vals = _prove_cases(ctx, claim, [a[0], b[0], c[0]], f"lifted_assoc_{comb}")
        sub.append((f"{comb}: (a ⊕ b) ⊕ c = a ⊕ (b ⊕ c)", st))
        if st != "proved":
            failed.append((comb, st, vals))
    if failed:
        comb, st, vals = failed[0]
        return Outcome("counterexample" if st == "counterexample" else "failed",
                       f"{comb}: {st}", vals, sub=sub)
    return Outcome("proved", f"{len(sub)} associativity laws of the lifted combine over 8-bit "
                   f"values and booleans, every input", sub=sub)


@obligation("scan_segmented.prefix_law")
def prefix_law(ctx: ProveCtx) -> Outcome:
    """Left fold, blocked and Hillis-Steele scans of the lifted combine equal the segmented
    specification (the seed before the first head only)."""
    bad = _crosscheck()
    if bad:
        return Outcome("failed", f"the specification disagrees with flagged_scan: {bad}")
    sub, failed = [], []
    for comb, (op, ident) in COMBINES.items():
        seed, xs, hs, lseed, lifted = _lifted_inputs(comb)
        lift = _lift(op)

        def lident(i=ident):
            return z3.BoolVal(False), i()

        spec = _spec(op, seed, xs, hs)
        for name, got in (("left_fold", left_prefixes(lift, lseed, lifted)),
                          ("blocked", blocked_prefixes(lift, lident, lseed, lifted)),
                          ("hillis_steele", hillis_steele(lift, lident, lseed, lifted))):
            claim = z3.And(*(_eq(g[1], s) for g, s in zip(got[1:], spec, strict=True)))
            st, vals = _prove_cases(ctx, claim, hs, f"segmented_{comb}_{name}")
            sub.append((f"{comb}: {name} of the lifted combine = segmented spec", st))
            if st != "proved":
                failed.append((comb, name, st, vals))
    if failed:
        comb, name, st, vals = failed[0]
        return Outcome("counterexample" if st == "counterexample" else "failed",
                       f"{comb} {name}: {st}", vals, sub=sub)
    return Outcome("proved", f"{len(sub)} equalities over {N} symbolic elements and heads and a "
                   f"symbolic seed; the specification agrees with flagged_scan", sub=sub)


@obligation("scan_segmented.seed_per_chunk", expect="counterexample")
def seed_per_chunk(ctx: ProveCtx) -> Outcome:
    """A seed copied into every segment is not the segmented scan: refuted with a witness."""
    op = COMBINES["add"][0]
    seed, xs, hs, _, _ = _lifted_inputs("add")
    good, leak = _spec(op, seed, xs, hs), _spec(op, seed, xs, hs, seed_everywhere=True)
    claim = z3.And(*(a == b for a, b in zip(good, leak, strict=True)))
    st, vals = ctx.prove(claim, "segmented_seed_leak",
                         show={"z": seed, **{f"h{i}": h for i, h in enumerate(hs)}})
    return Outcome(st if st in ("proved", "counterexample") else "failed",
                   f"segmented add with the seed in every segment vs once: {st}", vals)


# The flagged scans never meet a Partial: their type rule rejects every mesh layout first (D385).
_NON_TABLE.update({
    name: "its rule rejects every sharded operand before the table: a flag picks the "
          "contributions a prefix combines, which a pending reduction's pieces cannot honour "
          "per device (D385)"
    for name in ("MaskedScan", "SegmentedScan")})
