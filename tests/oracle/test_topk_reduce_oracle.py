"""The oracle's judgement of Top-K as a reduce (``CustomReduce`` with ``TopKMerge``; D488): exact
(values bit for bit, −0 ≠ +0, and indices) under every policy, never an admitted set; downstream
of an inexact op the order-statistic enclosure judges it (a PASS is a PASS, a wrong value or a
swapped tie FAILs), and only an enclosure it cannot bound soundly is UNJUDGED."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.oracle.compare import FAIL, PASS, UNJUDGED, check
from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.evaluator.core import evaluate

SRC = '''
from tilefoundry.semantics.dsl import *
@func
def f(x: Tensor[(3, 8), f32]):
    return topk_merge(BODY, 3, axis=1, largest=LARGEST, nan=NAN)
mod = module(f)
'''


def _module(body: str, largest: bool = True, nan: str = "last"):
    return parse_module(SRC.replace("BODY", body).replace("LARGEST", str(largest))
                        .replace("NAN", repr(nan)))


def _x() -> np.ndarray:
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    x[1] = 0.5  # one fiber of ties: the indices decide
    x[2, :4] = [0.0, -0.0, 0.0, -0.0]
    return x


@pytest.mark.parametrize("body", ["x", "exp(x)"])
@pytest.mark.parametrize("largest", [True, False])
def test_the_reference_passes_and_wrong_answers_fail(body, largest):
    m, x = _module(body, largest), _x()
    out = evaluate(m, "f", [x])
    assert check(m, "f", [x], out).status == PASS
    v = out[0].copy()
    v[0, 0] = np.nextafter(v[0, 0], np.float32(np.inf)) * np.float32(1.01)
    assert check(m, "f", [x], (v, out[1])).status == FAIL
    i = out[1].copy()
    i[0, :2] = i[0, 1::-1]  # two candidates' indices swapped
    assert check(m, "f", [x], (out[0], i)).status == FAIL
    i = out[1].copy()
    i[1, 0] = 9  # an index outside the fiber
    assert check(m, "f", [x], (out[0], i)).status == FAIL


def test_exact_inputs_judge_the_zero_sign():
    """Among tying zeros the lowest index comes first and keeps its own sign: a result with the
    sign flipped FAILs (exact contract: −0 ≠ +0)."""
    m = _module("x", largest=False)
    x = np.float32([[0.0, -0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]] * 3)
    v, i = evaluate(m, "f", [x])
    assert i[0].tolist() == [0, 1, 2] and np.signbit(v[0]).tolist() == [False, True, False]
    bad = v.copy()
    bad[0, 0] = np.float32(-0.0)
    assert check(m, "f", [x], (bad, i)).status == FAIL


def test_nan_first_downstream_of_an_inexact_op_is_unjudged_not_passed():
    """A maybe-NaN element under nan='first' breaks the monotonicity the enclosure rests on:
    the outputs are UNJUDGED (never a false PASS or FAIL)."""
    m, x = _module("log(x)", nan="first"), _x()  # log of a negative: NaN
    out = evaluate(m, "f", [x])
    assert check(m, "f", [x], out).status == UNJUDGED
