"""Issue 37, "Must show": planted-bug backends of the flagged scans and of ``ite`` behind a NaN
comparison each FAIL the quick tier where the cases were made for them; the legal freedom of an
ordered-tree flagged scan (each prefix the pairwise tree of its own kept leaves) PASSes and
really differs from the reference.

* ``segmented_seed_per_chunk`` — the per-chunk seed of a SegmentedScan leaks across segment
  heads: FAILs the seeded segmented cases (measured 2026-12-04: 25 of the 35 quick cases with a
  SegmentedScan).
* ``masked_padding_combined`` — masked lanes combined: FAILs 38 of the 40 MaskedScan cases.
* ``compare_as_not_complement`` (``planted_backends.py``) — ``a < b`` as ``!(a >= b)``: FAILs
  the ``spec/tile/ite/nan-compare-condition-*`` cases (12: lt / le / gt / ge x 3 dtypes).
"""

from __future__ import annotations

import collections

import pytest

from tests.conformance import planted_backends as pb
from tests.conformance import planted_scan_flag_backends as ps
from tilefoundry.conformance.catalog import build_catalog
from tilefoundry.oracle.compare import FAIL, PASS, check
from tilefoundry.semantics.dtypes import to_bits
from tilefoundry.semantics.evaluator.core import evaluate

WHERE = {"segmented_seed_per_chunk": "spec/tile/scan-segmented/inclusive-seed2/",
         "masked_padding_combined": "spec/tile/scan-masked/padding-is-not-identity-",
         "compare_as_not_complement": "spec/tile/ite/nan-compare-condition-lt/"}
BUGS = {**ps.BUGS, "compare_as_not_complement": ("Select",)}


@pytest.fixture(scope="module")
def quick():
    return [c for c in build_catalog(0).tier("quick")
            if not c.expect_error and c.id.startswith(("spec/tile/scan-", "spec/tile/ite/"))]


def _judge(be, ops, cases):
    verdicts, failed, differs = collections.Counter(), [], 0
    for case in cases:
        if not set(ops) & set(case.ops):
            continue
        m, e, ins = case.build()
        out = be.run(be.compile(m, e), list(ins))
        ref = evaluate(m, e, list(ins))
        outs, refs = (out, ref) if isinstance(out, tuple) else ((out,), (ref,))
        differs += any(to_bits(o).tobytes() != to_bits(r).tobytes()
                       for o, r in zip(outs, refs, strict=True))
        v = check(m, e, ins, out)
        verdicts[v.status] += 1
        if v.status == FAIL:
            failed.append(case.id)
    return verdicts, failed, differs


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_planted_bug_fails_the_quick_tier(quick, name):
    mod = ps if name in ps.BUGS else pb
    verdicts, failed, _ = _judge(getattr(mod, name)(), BUGS[name], quick)
    assert verdicts[FAIL] >= 1 and set(verdicts) <= {PASS, FAIL}, (name, dict(verdicts))
    assert any(cid.startswith(WHERE[name]) for cid in failed), failed


def test_segmented_seed_leak_fails_every_seeded_multi_segment_case(quick):
    """Every quick SegmentedScan case with a seed and a head after x0 has prefixes the leak
    changes; an unseeded case cannot differ."""
    _, failed, _ = _judge(ps.segmented_seed_per_chunk(), ("SegmentedScan",), quick)
    for dt in ("f32", "bf16", "i32", "i8"):
        for w in ("inclusive", "exclusive"):
            assert f"spec/tile/scan-segmented/{w}-seed2/{dt}" in failed
            assert f"spec/tile/scan-segmented/{w}/{dt}" not in failed


@pytest.mark.parametrize("name", sorted(ps.LEGAL))
def test_legal_regrouping_passes_and_differs(quick, name):
    verdicts, failed, differs = _judge(getattr(ps, name)(), ps.LEGAL[name], quick)
    assert not failed and set(verdicts) == {PASS}, (dict(verdicts), failed)
    assert differs >= 1  # the freedom was used: some output's bits differ from the fold
