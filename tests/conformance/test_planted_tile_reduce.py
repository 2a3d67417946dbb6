"""Issue 23 part C, "Must show": planted-bug backends of the tile family's reductions each FAIL
the quick tier (a seed added per tree leaf, a masked lane replaced by +0); legal freedoms (−0
padding, the seed merged last under unordered_tree, Welford's trees as a left fold) PASS.
Each backend runs the quick ``tile`` cases containing the ops it changes, judged by ``check``."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from tests.conformance import planted_tile_reduce_backends as pt
from tests.conformance.planted_backends import _device0
from tilefoundry.conformance.catalog import build_catalog
from tilefoundry.oracle.compare import FAIL, PASS, check
from tilefoundry.semantics.dtypes import to_bits
from tilefoundry.semantics.evaluator.core import evaluate

#: the case each bug exists for
CATCHES = {"seed_per_tree_leaf": "spec/tile/seeded-reduce/seed-once-",
           "masked_lane_plus_zero": "spec/tile/masked-reduce/skip-not-plus-zero-",
           "welford_mean_99": "spec/tile/custom-reduce/welford-ordered_tree-len8/",
           "welford_unweighted_merge": "spec/tile/custom-reduce/welford-unordered_tree-len1000/",
           "declared_wrong_merge": "spec/tile/custom-reduce/declared-sum-absmax-unordered_tree-len24/"}


@pytest.fixture(scope="module")
def tile_quick():
    return [c for c in build_catalog(0).tier("quick") if "tile/" in c.id]


def _judge(name: str, ops: tuple, cases):
    be = getattr(pt, name)()
    verdicts: collections.Counter = collections.Counter()
    failed, differs = [], 0
    for case in cases:
        if not set(ops) & set(case.ops):
            continue
        m, e, ins = case.build()
        out = be.run(be.compile(m, e), list(ins))
        v = check(m, e, ins, out)
        verdicts[v.status] += 1
        if v.status == FAIL:
            failed.append(case.id)
        ref = _device0(evaluate(m, e, ins))
        pairs = zip(out, ref, strict=True) if isinstance(ref, tuple) else [(out, ref)]
        differs += any(np.asarray(o).shape == np.asarray(r).shape and  # (Top-K: a pair)
                       not np.array_equal(to_bits(np.asarray(o)), to_bits(np.asarray(r)))
                       for o, r in pairs)
    return verdicts, failed, differs


@pytest.mark.parametrize("name", sorted(pt.BUGS))
def test_each_planted_tile_bug_fails_the_quick_tier(tile_quick, name):
    verdicts, failed, _ = _judge(name, pt.BUGS[name], tile_quick)
    assert verdicts[FAIL] >= 1, (name, dict(verdicts))
    assert set(verdicts) <= {PASS, FAIL}, (name, dict(verdicts))
    assert any(cid.startswith(CATCHES[name]) for cid in failed), failed


@pytest.mark.parametrize("name", sorted(pt.LEGAL))
def test_each_legal_tile_freedom_passes(tile_quick, name):
    verdicts, failed, differs = _judge(name, pt.LEGAL[name], tile_quick)
    assert not failed and set(verdicts) == {PASS}, (name, dict(verdicts), failed)
    if name != "masked_lane_minus_zero":  # -0 padding is bit-identical by design (D234)
        assert differs >= 1, f"{name}: no case's output differs from the reference's"


def test_a_wrong_welford_mean_fails_over_8_and_1000_contributions(tile_quick):
    """Issue 37, "Must show": wrong-mean Welford over 8 and 1,000 elements FAILs in the quick
    tier (both were UNJUDGED: beyond enumeration no bound existed)."""
    _, failed, _ = _judge("welford_mean_99", pt.BUGS["welford_mean_99"], tile_quick)
    assert {"spec/tile/custom-reduce/welford-ordered_tree-len8/f32",
            "spec/tile/custom-reduce/welford-unordered_tree-len1000/f32"} <= set(failed), failed


def test_a_declared_wrong_merge_fails_past_enumeration(tile_quick):
    """Issue 37 item 2: a backend whose merge formula for a program-declared reducer is wrong
    FAILs the quick tier under every policy past enumeration (24 contributions), judged from the
    program's own declaration."""
    verdicts, failed, _ = _judge("declared_wrong_merge", pt.BUGS["declared_wrong_merge"],
                                 [c for c in tile_quick if "declared" in c.id])
    assert {f"spec/tile/custom-reduce/declared-sum-absmax-{p}-len24/f32" for p in
            ("fold_left", "fold_right", "ordered_tree", "unordered_tree")} <= set(failed), failed
    assert set(verdicts) <= {PASS, FAIL}, dict(verdicts)
