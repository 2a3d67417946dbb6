"""Enclosures of the flagged scans (``oracle/enclosures/tile_scan_flags.py``): a MaskedScan /
SegmentedScan whose x is itself enclosed (the output of ``exp``, a ULP op) is judged by the
bound over each prefix's kept leaves — the reference PASSes, a result where a masked lane or the
previous segment entered a prefix FAILs (the wrong amounts here, e^3 and e^2, are far beyond
every rounding bound), and NaN stays confined to the prefixes that kept it."""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.compare import FAIL, PASS, check
from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.evaluator.core import evaluate

SRC = '''
@func
def main(x: Tensor[(2, 6), f32], m: Tensor[(2, 6), bool]):
    e = exp(x)
    return (scan_masked(e, m, 1, "add", seed=1.0, policy="ordered_tree"),
            scan_segmented(e, m, 1, "max", inclusive=False),
            scan_segmented(e, m, 1, "add", policy="fold_left"))

module(main)
'''


def _inputs():
    x = np.array([[0.5, 3.0, -1.0, 0.25, np.nan, 1.0],
                  [2.0, 0.0, 1.5, -2.0, 0.75, 0.125]], np.float32)
    m = np.array([[1, 0, 1, 1, 0, 1], [0, 1, 0, 1, 1, 0]], bool)
    return x, m


def test_reference_passes_its_own_enclosed_judge():
    mod = parse_module(SRC)
    x, m = _inputs()
    ref = evaluate(mod, "main", [x, m])
    v = check(mod, "main", [x, m], ref)
    assert v.status == PASS, v.summary()
    # the NaN at x[0, 4] is masked out: no prefix of the masked scan is NaN
    assert not np.isnan(ref[0]).any()
    # in the segmented add it enters its segment's prefix (heads at 0, 2, 3, 5: its segment is 3..4) only
    assert np.isnan(ref[2][0]).tolist() == [False, False, False, False, True, False]


def test_a_masked_lane_that_entered_fails():
    mod = parse_module(SRC)
    x, m = _inputs()
    ref = evaluate(mod, "main", [x, m])
    wrong = ref[0].copy()
    wrong[0, 1:] += np.float32(np.exp(3.0))  # x[0, 1] is masked out; e^3 ~ 20 entered
    assert check(mod, "main", [x, m], (wrong, ref[1], ref[2])).status == FAIL


def test_a_prefix_across_a_segment_head_fails():
    mod = parse_module(SRC)
    x, m = _inputs()
    ref = evaluate(mod, "main", [x, m])
    wrong = ref[2].copy()
    # row 1: heads at 1, 3, 4; position 1 restarts, a leak carries e^2 ~ 7.4 from position 0
    wrong[1, 1] += np.float32(np.exp(2.0))
    assert check(mod, "main", [x, m], (ref[0], ref[1], wrong)).status == FAIL
