"""Partial commutation: every row of the commutation table proved or refuted over the reals, the
per-format float classification of the allow rows, the table's coverage of the type rules, and
Gather's Split → Partial(sum) migration.

The table under check is imported (``semantics/typeinfer/commutation.py``, ``TABLE``); nothing of
it is restated here. A row ``(op, kind, pattern, reduction, allow)`` claims, for the operands named
by ``pattern`` carrying ``Partial(⊕)`` on one mesh axis (every other value operand replicated):

    op(⊕ᵢ xᵢ, c) = ⊕ᵢ op(xᵢ, c)        for every device count n ≥ 1.

**Allow rows: the homomorphism step and induction.** An allow row is proved over the reals for two
symbolic pieces — ``F(a ⊕ b) = F(a) ⊕ F(b)`` (one Partial operand, replicated operands fixed) or
``F(a₁ ⊕ a₂, b₁ ⊕ b₂) = F(a₁, b₁) ⊕ F(a₂, b₂)`` (several Partial operands) — with the pieces
arbitrary. Since ⊕ ∈ {+, max, min} is associative, every n follows by induction: n = 1 is
trivial, and ``F(⊕ᵢ₌₁ⁿ⁺¹ xᵢ) = F((⊕ᵢ₌₁ⁿ xᵢ) ⊕ xₙ₊₁) = F(⊕ᵢ₌₁ⁿ xᵢ) ⊕ F(xₙ₊₁) = ⊕ᵢ₌₁ⁿ⁺¹ F(xᵢ)``
(the step applied with its first piece ``⊕ᵢ₌₁ⁿ xᵢ``, then the induction hypothesis). The step is
one Z3 query (``ctx.prove``) per row, over small symbolic shapes: scalars for the pointwise ops, a
length-2 tensor axis for Reduce / SoftMax / the norms, a 1-D dot product for MatMul (and Conv2D
with its bias), a 3-row table with a symbolic in-range index for Gather, a 3-element destination
with a symbolic in-range window for InsertSlice / CacheUpdate, head dim 2 with two cache rows and
a symbolic position for RoPE.

**Op models.** Binary kinds, neg, abs, square, relu, ceil, round (ties to even), sqrt / rsqrt
(``y ≥ 0 ∧ y² = x``) and the tensor / nn ops are modelled by their definitions. In an allow proof
a kind whose property set (``UNARY_PROPERTIES``, or ``NN_PROPERTIES`` below for the nn
activations, quoting the HIR nn entry) contains ``monotone`` is an *uninterpreted* function,
constrained monotone non-decreasing (the axiom instantiated at every pair of its application
points, which is sound for a proof) — nothing per kind. Transcendental kernels (exp, exp2, log,
log2, sigmoid, tanh, gelu, silu, SoftMax's exp, the norms' ``1/√(t+ε)``) are uninterpreted
everywhere; a *refutation* may use true facts about them (``_KERNELS``: positivity, strict
monotonicity, domain, and rigorous rational enclosures — mpmath interval arithmetic — at anchor
points: the integers −4…4, and for the norms every mean square a small-integer witness reaches).

**Reject rows.** A counterexample is searched with two devices in stages — integer values with
|v| ≤ 1, 2, 4, then multiples of 1/2 with |v| ≤ 2, then unbounded reals — the smallest stage first
(a minimized witness; small integers are exact in every float format too), reporting the pieces,
the replicated operands, the device count and both sides. Where an uninterpreted kernel occurs,
the witness's inputs are fixed and the inequality is then *proved* for every function satisfying
the kernel's facts (so it holds for the real kernel). A mixed row (Partial operands with
different reductions) is refuted when, for one assignment of reductions, some output fails under
every reduction the result could be claimed to carry. When the smallest stage finds nothing, the
equation is proved for two arbitrary pieces if it can be, and the row is recorded
``sound-but-rejected`` (the spec rejects it conservatively, e.g. Binary max with one Partial max
and a replicated operand): reported, never a failure. Bool values reduce by sum = max = OR
(torch's saturating bool add) and min = AND — the verdicts of the bool rows rest on that reading.
Refutations may look at one output element only where the others mirror it (SoftMax, the norms).

**Float formats.** Each allow row is also classified per format (f32, bf16, f16, fp8e4m3,
fp8e5m2) under the project's arithmetic contract (widen to f32, one IEEE f32 operation, one
rounding to the format; max / min propagate NaN and order −0 < +0; a 2-device reduction is one
such add / max / min). Z3 FP sorts: f32 = FPSort(8, 24), bf16 = (8, 8), f16 = (5, 11),
fp8e5m2 = (5, 3). **fp8e4m3 is E4M3FN** (finite through ±448, no infinity, NaN = S.1111.111),
which no FPSort is: its values are encoded as the subset of FPSort(5, 4) that the E4M3FN rounding
``R`` fixes — ``R(v)`` rounds an f32 value with FPSort(4, 4) below 2⁻⁶ (E4M3FN's subnormal
quantum 2⁻⁹) and with FPSort(5, 4) above (its 3 fraction bits), and gives NaN for a magnitude
rounding above 448, for ±inf and NaN (overflow "nonfinite"). The classes:

* ``exact`` — proved for every input, ±0, ±inf and NaN included (max / min / selection rows and
  monotone kernels: comparisons only, Z3 FP proofs);
* ``exact-finite`` — exact for finite inputs, with a non-finite witness (e.g. −inf + inf);
* ``±0`` — equal as numbers, a signed-zero witness shows the bits differ;
* ``rounding`` — a finite witness with two different results (e.g. (a+b)·c vs a·c+b·c);
* ``NaN`` — a finite witness where exactly one side is NaN (log of a negative piece under
  Partial(max); E4M3FN overflow);
* ``n/a`` — the row does not hold over the reals.

Witnesses of the arithmetic rows are found by a deterministic search over a small set of
characteristic values of each format (±0, ±1, ±3, 1 + ulp, 2^(p+1), max finite, the least
subnormal; then ±inf, NaN) evaluated with the reference ``apply_lowp``, and every witness is
re-checked by Z3 constant folding of the FP-sort encoding (a disagreement is an error). Exactness
of ``c + max(a, b)`` for finite inputs, which bit-blasting cannot prove within the time budget in
f32, is proved for *every* monotone rounding function (an abstract model: reals plus an
uninterpreted monotone, odd ``rnd``), which covers every format whose overflow is ordered (±inf);
E4M3FN's NaN overflow is not, and its search finds the witness. Monotone kernels are assumed
monotone in floats too (true of correctly rounded kernels).

``commutation.coverage`` enumerates (op, kind, Partial operands, reduction) from ``ALL_OPS``, their
``INPUTS`` and the kind enums, and runs the real type rule on every combination without a row to
see whether the rule meets it. ``gather.migration`` proves the Split → Partial(sum) migration.

Modules (D381): ``commutation_models.py`` (the op models and kernel facts),
``commutation_reals.py`` (the rows over the reals), ``commutation_formats.py`` (the float-format
classification), ``commutation_coverage.py`` (the coverage of the type rules); this module keeps
``gather.migration``, the generated document (``write_doc``) and re-exports ``__all__``.
"""

from __future__ import annotations

from pathlib import Path

import z3

from tilefoundry.smt.framework import Outcome, ProveCtx, obligation

# isort: off
# The import order is the obligations' registration order (the order `tilefoundry prove` lists
# them in): the rows over the reals, the float formats, the coverage, then gather.migration here.
from tilefoundry.smt.obligations.commutation_models import NN_PROPERTIES, _select, row_id
from tilefoundry.smt.obligations.commutation_reals import GROUPS, RowResult, prove_row
from tilefoundry.smt.obligations.commutation_formats import (
    CLASSES,
    FORMATS,
    FPClass,
    classification_table,
    classify_formats,
)
from tilefoundry.smt.obligations.commutation_coverage import NON_TABLE_OPS, coverage_gaps
# isort: on

__all__ = [
    "CLASSES",
    "FORMATS",
    "GROUPS",
    "NN_PROPERTIES",
    "NON_TABLE_OPS",
    "FPClass",
    "RowResult",
    "classification_table",
    "classify_formats",
    "coverage_gaps",
    "prove_row",
    "row_id",
    "write_doc",
]


# =============================================================================================
# Gather: a Split on the gathered axis becomes Partial(sum)
# =============================================================================================
@obligation("gather.migration")
def gather_migration(ctx: ProveCtx) -> Outcome:
    """Gather of x Split on the gathered axis: each device gathers its own rows (zeros
    elsewhere) and the device sum is the true gather — the Partial(sum) the rule produces."""
    sub = []
    for devices in (2, 3, 4):
        per, width, m = 2, 2, 2  # rows per device, row length, gathered indices
        rows = devices * per
        x = [[z3.Real(f"x{r}_{c}") for c in range(width)] for r in range(rows)]
        idx = [z3.Int(f"i{j}") for j in range(m)]
        side = [z3.And(i >= 0, i < rows) for i in idx]
        claims = []
        for i in idx:
            for c in range(width):
                true = _select(i, [x[r][c] for r in range(rows)])
                parts = []
                for d in range(devices):
                    own = [x[r][c] for r in range(d * per, (d + 1) * per)]
                    lo = d * per
                    parts.append(z3.If(z3.And(i >= lo, i < lo + per), _select(i - lo, own),
                                       z3.RealVal(0)))
                claims.append(true == z3.Sum(*parts))
        st, vals = ctx.prove(z3.And(*claims), f"gather_migration_{devices}dev",
                             assumptions=tuple(side), show={str(i): i for i in idx})
        sub.append((f"{devices} devices, {rows} rows split {per} per device, {m} symbolic "
                    f"indices", st))
        if st != "proved":
            return Outcome("counterexample" if st == "counterexample" else "failed",
                           f"{devices} devices: {st}", vals, sub=sub)
    return Outcome("proved", "the device sum of the per-device gathers (own rows, zeros "
                   "elsewhere) equals the true gather for 2, 3 and 4 devices (over the reals; in "
                   "floats x + 0 = x except -0 + 0 = +0)", sub=sub)


# =============================================================================================
# the generated document
# =============================================================================================
DOC = Path(__file__).resolve().parents[2] / "docs" / "commutation-proofs.md"


_DOC_HEAD = """# Partial commutation: proofs and float classification

Generated by `tilefoundry.smt.obligations.commutation` (the `commutation.*` obligations of
`tilefoundry prove`); `tests/smt/test_commutation_proofs.py` fails when this file is not the
current rendering. Regenerate with:

```
.venv/bin/python -c "from tilefoundry.smt.obligations.commutation import write_doc; write_doc()"
```

Every allow row of the commutation table (`docs/commutation-table.md`) is proved over the reals
for any device count (the homomorphism step for two arbitrary pieces, then induction over the
associative reduction); the table below classifies the same rows in each float format under the
arithmetic contract (widen to f32, one IEEE operation, one rounding; a 2-device reduction is one
such add / max / min; max / min propagate NaN and order -0 < +0). fp8e4m3 is E4M3FN (finite
through ±448, NaN on overflow), encoded as the subset of FPSort(5, 4) its rounding fixes.

Classes: **exact** — no counterexample for any input (±0, ±inf, NaN included); **exact-finite** —
exact for finite inputs, a non-finite witness exists; **±0** — numerically exact, the sign of a
zero differs; **rounding** — a finite witness gives two different values; **NaN** — a finite
witness makes exactly one side NaN; **n/a** — the row does not hold over the reals.

How: comparison-only equations (max / min, selections, monotone kernels) are Z3 FP proofs over
every value of the format; the float kernels of monotone kinds are assumed monotone (true of
correctly rounded kernels) with NaN exactly on NaN inputs — and on x < 0 for log, log2 and sqrt.
Witnesses of the arithmetic rows come from a search over characteristic values of each format
with the reference arithmetic (`apply_lowp`) and are re-checked by Z3 constant folding.
**exact-finite** for `c + max(a, b)` is proved for the values by an abstract model (reals and an
uninterpreted monotone, odd rounding — every format whose overflow is ordered); the sign of a
zero result is checked on the candidate values only.

"""


def write_doc(path: Path | None = None) -> str:
    text = _DOC_HEAD + classification_table() + "\n"
    (path or DOC).write_text(text)
    return text
