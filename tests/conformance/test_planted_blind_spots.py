"""Issue 16, "Must show": planted-bug backends, one per blind spot, each caught by the quick tier;
legal-freedom controls (another Partial order, TopK unsorted in index order, a zeros-seeded fma
matmul) all PASS.

Every backend is the reference with one planted behaviour (``planted_backends.py``). Each runs
the quick-tier cases that contain the op it changes (cases without it cannot differ) and is
judged by ``check``, as the runner judges; one bug and one control also go through the runner
itself. A control must really use its freedom: some case's output differs from the reference's
in its bits.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

from tests.conformance import planted_backends as pb
from tilefoundry.conformance.catalog import build_catalog
from tilefoundry.conformance.runner import run
from tilefoundry.oracle.compare import FAIL, PASS, check
from tilefoundry.semantics.dtypes import to_bits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.registry import EvaluationError

#: the cases that fill each blind spot (catalog/coverage.py): the bugs they exist for must be
#: caught there (before them, the quick tier passed these bugs)
BLIND_SPOT = {
    "matmul_first_product_seed": "spec/matmul/",
    "stale_partial_consumer": "sharded/partial-completion-feeds/",
    "reshape_local_fortran": "sharded/reshape/",
    "ordered_as_lanes": "spec/reduce/ordered-tree-rejects-permutations/",
    "scan_permuting": "spec/tile/scan/design-example-123/",
    "scan_exclusive_off_by_one": "spec/tile/scan/exclusive",
}


@pytest.fixture(scope="module")
def quick():
    return [c for c in build_catalog(0).tier("quick") if not c.expect_error]


def _judge(name: str, ops: tuple, cases) -> tuple[collections.Counter, list[str], int]:
    be = getattr(pb, name)()
    verdicts: collections.Counter = collections.Counter()
    failed, differs = [], 0
    for case in cases:
        if not set(ops) & set(case.ops):
            continue
        m, e, ins = case.build()
        try:
            out = be.run(be.compile(m, e), list(ins))
        except EvaluationError:
            # the planted bug broke the backend's own run (a host loop fed its stale partial
            # back into a Reshard, whose unshard refused the differing replicas): the backend
            # produced no output to judge, which a runner reports as the backend's ERROR
            continue
        v = check(m, e, ins, out)
        verdicts[v.status] += 1
        if v.status == FAIL:
            failed.append(case.id)
        ref = evaluate(m, e, ins)
        outs = out if isinstance(out, tuple) else (out,)
        refs = tuple(pb._device0(r) for r in (ref if isinstance(ref, tuple) else (ref,)))
        differs += any(np.asarray(o).shape == np.asarray(r).shape and
                       not np.array_equal(to_bits(np.asarray(o)), to_bits(np.asarray(r)))
                       for o, r in zip(outs, refs, strict=True))
    return verdicts, failed, differs


@pytest.mark.parametrize("name", sorted(pb.BUGS))
def test_each_planted_bug_fails_the_quick_tier(quick, name):
    verdicts, failed, _ = _judge(name, pb.BUGS[name], quick)
    assert verdicts[FAIL] >= 1, (name, dict(verdicts))
    assert set(verdicts) <= {PASS, FAIL}, (name, dict(verdicts))  # judged, never ERROR
    if name in BLIND_SPOT:
        assert any(cid.startswith(BLIND_SPOT[name]) for cid in failed), failed


@pytest.mark.parametrize("name", sorted(pb.LEGAL))
def test_each_legal_freedom_passes_the_quick_tier(quick, name):
    verdicts, failed, differs = _judge(name, pb.LEGAL[name], quick)
    assert not failed and set(verdicts) == {PASS}, (name, dict(verdicts), failed)
    assert differs >= 1, f"{name}: no case's output differs from the reference's"


@pytest.mark.parametrize(("name", "want"), [("stale_partial_consumer", "FAIL"),
                                            ("partial_reverse_order", "PASS")])
def test_through_the_runner(tmp_path, quick, name, want):
    cases = [c for c in quick if c.id.startswith("sharded/partial-completion-feeds/exp/")]
    assert len(cases) == 2
    res = run(f"tests.conformance.planted_backends:{name}", cases, jobs=1, timeout_s=120,
              seed=0, out_jsonl=tmp_path / "run.jsonl")
    assert {r["verdict"] for r in res.records} == {want}, res.records
