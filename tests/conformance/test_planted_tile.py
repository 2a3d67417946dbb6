"""Issue 23 (part B), "Must show": planted-bug backends of the tile family — an unstable sort, a
-0/+0 tie swap, an f32-accumulating mma whose inputs were rounded to bf16 first (and a TF32-style
substitution) — each FAILs the quick tier's tile cases; the packed-key sort of the Tile design
("a reversible UINT64-key network for float32 and power-of-two extents") PASSes them.

Each backend is the reference with one planted behaviour (``planted_tile_backends.py``), run on
the quick-tier cases it is planted for (the packed-key sort: every quick case containing Sort)
and judged by ``check`` as the runner judges. Measured on all quick tile cases (2026-12-04):
the unstable sort FAILs 42 of 42 Sort cases, the zero-sign swap 31 of 42, the bf16-input mma
12 of 31 Mma cases, the TF32-input one 5 of 31 (the f32-input ones).
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

from tests.conformance import planted_tile_backends as pt
from tilefoundry.conformance.catalog import build_catalog
from tilefoundry.oracle.compare import FAIL, PASS, check
from tilefoundry.semantics.ordering import sort


@pytest.fixture(scope="module")
def tile_quick():
    return [c for c in build_catalog(0).tier("quick")
            if not c.expect_error and set(c.ops) & {"Sort", "Mma"}]


def _judge(be, ops: tuple, cases, prefix: str = "") -> tuple[collections.Counter, list[str]]:
    verdicts: collections.Counter = collections.Counter()
    failed = []
    for case in cases:
        if not set(ops) & set(case.ops) or not case.id.startswith(prefix):
            continue
        m, e, ins = case.build()
        v = check(m, e, ins, be.run(be.compile(m, e), list(ins)))
        verdicts[v.status] += 1
        if v.status == FAIL:
            failed.append(case.id)
    return verdicts, failed


#: the cases each bug is planted for: it must FAIL there
WHERE = {"sort_unstable": "spec/sort/ties-by-index-", "sort_zero_sign_swap":
         "spec/sort/signed-zeros-tie-", "mma_bf16_inputs": "spec/mma/input-precision-kept/",
         "mma_tf32_inputs": "spec/mma/input-precision-kept/"}


@pytest.mark.parametrize("name", sorted(pt.BUGS))
def test_each_planted_tile_bug_fails_the_quick_tier(tile_quick, name):
    verdicts, failed = _judge(getattr(pt, name)(), pt.BUGS[name], tile_quick, WHERE[name])
    assert verdicts[FAIL] >= 1, (name, dict(verdicts))
    assert set(verdicts) <= {PASS, FAIL}, (name, dict(verdicts))  # judged, never ERROR
    assert any(cid.startswith(WHERE[name]) for cid in failed), failed


def test_packed_key_sort_passes(tile_quick):
    pt.PACKED_CALLS.update(packed=0, fallback=0)
    verdicts, failed = _judge(pt.sort_packed_key(), ("Sort",), tile_quick)
    assert not failed and set(verdicts) == {PASS}, (dict(verdicts), failed)
    assert pt.PACKED_CALLS["packed"] >= 4, pt.PACKED_CALLS  # the power-of-two cases used it


def test_packed_key_decoding_restores_bits():
    """The key carries the index and the zero sign: decoding gives the stable sort's value bits
    (both zero signs, ties by index) and indices, without a gather of the input."""
    rng = np.random.default_rng(3)
    x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, 1e-45, -3e38],
                            np.float32), (5, 32))
    for desc in (False, True):
        v, i = pt.packed_sort_f32(x, 1, desc)
        rv, ri = sort(x, 1, descending=desc)
        assert np.array_equal(v.view(np.uint32), rv.view(np.uint32)) and np.array_equal(i, ri)


# --- Top-K as a reduce (CustomReduce with TopKMerge; D488) ------------------------------------
@pytest.fixture(scope="module")
def topk_quick():
    return [c for c in build_catalog(0).tier("quick") if "/topk-merge/" in c.id]


@pytest.mark.parametrize("name", pt.TOPK_BUGS)
def test_each_planted_topk_merge_bug_fails_the_quick_tier(topk_quick, name):
    """A merge that does not sort, breaks ties by the highest index, or splits -0 from +0 FAILs
    quick-tier topk-merge cases; every verdict is judged (PASS / FAIL, never UNJUDGED or
    ERROR). Measured (2026-12-04, 28 cases): unsorted FAILs 28, ties reversed 28, zero signs
    split 8."""
    verdicts, failed = _judge(getattr(pt, name)(), ("CustomReduce",), topk_quick)
    assert sum(verdicts.values()) == len(topk_quick) >= 20
    assert set(verdicts) <= {PASS, FAIL}, (name, dict(verdicts))
    assert verdicts[FAIL] >= 5, (name, dict(verdicts))
    assert any(c.startswith("spec/tile/topk-merge/") or
               c.startswith("special/tile/topk-merge/") for c in failed), failed
