"""Differential properties of the oracle over generated programs.

Issue 'oracle', Deliver 3: "reference vs itself under sharding erasure; reference vs a candidate
backend (a plain callable is enough here)". The oracle must accept the reference itself on every
generated program (no false FAIL, no ERROR), and a planted bug must be caught and reduced."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings

from tilefoundry.oracle.compare import FAIL, PASS, UNJUDGED, check_candidate
from tilefoundry.oracle.planted import truncating_add
from tilefoundry.oracle.programs import iter_programs, programs
from tilefoundry.oracle.reduce import reduce_failure
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.ops import Binary


def reference(module, entry, inputs):
    return evaluate(module, entry, inputs)


@settings(max_examples=max(20, settings.default.max_examples))
@given(programs())
def test_the_oracle_accepts_the_reference_on_generated_programs(p):
    v = check_candidate(p.module, p.entry, list(p.inputs), reference)
    assert v.status in (PASS, UNJUDGED), v.summary()  # never FAIL: an element may be unjudged


@settings(max_examples=max(10, settings.default.max_examples // 2))
@given(programs(sharded=True))
def test_the_oracle_accepts_the_reference_on_generated_sharded_programs(p):
    v = check_candidate(p.module, p.entry, list(p.inputs), reference)
    assert v.status in (PASS, UNJUDGED), v.summary()


def test_seeded_programs_judged_against_the_reference_and_a_planted_bug():
    """200 seeded programs over the whole catalog: the reference passes all of them. A
    candidate whose bf16 add truncates is caught by Binary-only programs (over all 31 ops a bf16
    add is rare: 3 of 300 whole-catalog programs contain one), and the first failure reduces to
    a program of at most 3 ops."""
    statuses: Counter[str] = Counter()
    outputs: Counter[str] = Counter()
    for p in iter_programs(0, 200):
        v = check_candidate(p.module, p.entry, list(p.inputs), reference)
        statuses[v.status] += 1
        outputs.update(o.status for o in v.outputs)
    assert set(statuses) <= {PASS, UNJUDGED} and sum(statuses.values()) == 200, statuses
    assert outputs[PASS] > 10 * outputs[UNJUDGED]  # most outputs are judged, not skipped
    caught = [p for p in iter_programs(0, 300, ops=[Binary])
              if check_candidate(p.module, p.entry, list(p.inputs), truncating_add).status
              == FAIL]
    assert caught, "the truncating bf16 add was never exercised by 300 Binary programs"
    p = caught[0]
    r = reduce_failure(p.module, p.entry, list(p.inputs),
                       lambda m, e, xs: check_candidate(m, e, xs, truncating_add).status == FAIL)
    assert r.op_count <= 3 and check_candidate(r.module, r.entry, list(r.inputs),
                                               truncating_add).status == FAIL
