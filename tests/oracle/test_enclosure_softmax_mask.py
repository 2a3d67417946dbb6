"""The SoftMax enclosure with masked (-inf) scores (issue 33: an attention block's outputs were
UNJUDGED where any score of the row was masked)."""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.compare import FAIL, PASS, check
from tilefoundry.semantics.dtypes import to_bits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Constant, Function, Module, Var
from tilefoundry.semantics.ops import MatMul, Select, SoftMax
from tilefoundry.semantics.types import TensorType


def test_a_masked_softmax_feeding_a_gemm_is_judged():
    """Masked scores are -inf, each exactly 0 after the softmax: the enclosure bounds the rest
    of the row (before, any -inf left the whole row unbounded and 3/4 of an attention block's
    outputs UNJUDGED), and still rejects a wrong value."""
    f32 = DType.F32
    a, b = Var("a", TensorType((4, 8), f32)), Var("b", TensorType((8, 6), f32))
    v = Var("v", TensorType((6, 5), f32))
    mask = Constant(np.array(np.arange(6)[None, :] <= np.arange(4)[:, None] + 2, order="C"))
    ninf = Constant(np.array(-np.inf, np.float32))
    s = Call(Select(), (mask, Call(MatMul(), (a, b)), ninf))
    body = Call(MatMul(), (Call(SoftMax(axis=-1), (s,)), v))
    m = Module((Function("f", (a, b, v), body, None),))
    g = np.random.default_rng(0)
    ins = [g.standard_normal(sh).astype(np.float32) for sh in ((4, 8), (8, 6), (6, 5))]
    out = evaluate(m, "f", ins)
    ok = check(m, "f", ins, out)
    assert ok.status == PASS and not any(o.status != PASS for o in ok.outputs), ok.summary()
    bad = out.copy()
    bad[0, 0] = bad[0, 0] * np.float32(1.25) + np.float32(0.125)
    assert check(m, "f", ins, bad).status == FAIL
    # a leak: a masked key's value mixed in (softmax over the unmasked row) is rejected
    leak = evaluate(Module((Function("f", (a, b, v), Call(MatMul(), (
        Call(SoftMax(axis=-1), (Call(MatMul(), (a, b)),)), v)), None),)), "f", ins)
    assert check(m, "f", ins, leak).status == FAIL
    assert not np.array_equal(to_bits(leak), to_bits(out))


def test_a_fully_masked_row_is_not_claimed():
    """Soundness: a row whose every score is -inf is NaN (0 / 0); the enclosure claims no bound
    there (the row is unjudged, never rejected), and the other rows stay judged."""
    f32 = DType.F32
    a, b = Var("a", TensorType((3, 4), f32)), Var("b", TensorType((4, 5), f32))
    mask = np.ones((3, 5), bool)
    mask[1] = False
    s = Call(Select(), (Constant(mask), Call(MatMul(), (a, b)),
                        Constant(np.array(-np.inf, np.float32))))
    m = Module((Function("f", (a, b), Call(SoftMax(axis=-1), (s,)), None),))
    g = np.random.default_rng(1)
    ins = [g.standard_normal((3, 4)).astype(np.float32),
           g.standard_normal((4, 5)).astype(np.float32)]
    out = evaluate(m, "f", ins)
    assert np.isnan(out[1]).all() and np.isfinite(out[[0, 2]]).all()
    v = check(m, "f", ins, out)
    assert v.status != FAIL
    other = out.copy()
    other[1] = np.float32(0.2)  # the NaN row replaced: not rejected (nothing is claimed there)
    assert check(m, "f", ins, other).status != FAIL
    worse = out.copy()
    worse[0, 0] += np.float32(0.25)
    assert check(m, "f", ins, worse).status == FAIL
