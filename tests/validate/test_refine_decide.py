"""``refine.decide`` before the solver (D550): an element pair the solver would prove equal by a
query that another element already made is not asked again; a pair equal after ``z3.simplify``
needs no query; a ``math`` function applied to a literal is its value (``encode.math_apply``: the
kernel-IR interpreter's definition, which is the reference op's), so a term over constants folds
to a literal. None of these may turn a real difference into "valid"."""

from __future__ import annotations

import time

import numpy as np
import pytest
import z3

from tilefoundry.errors import TilefoundryError
from tilefoundry.validate import encode as E
from tilefoundry.validate import refine

S = E.fp_sort("f32")


def _arr(*terms) -> np.ndarray:
    out = np.empty(len(terms), object)
    out[:] = list(terms)
    return out


@pytest.fixture
def queries(monkeypatch) -> list:
    """The constraint lists ``decide`` hands the solver."""
    seen: list = []
    real = refine.solve

    def counting(constraints, timeout_ms):
        seen.append(constraints)
        return real(constraints, timeout_ms)

    monkeypatch.setattr(refine, "solve", counting)
    return seen


def _no_replay(model):
    raise TilefoundryError("replayed")


def _decide(x: np.ndarray, y: np.ndarray) -> refine.Outcome:
    return refine.decide([(x, y)], set(), set(), _no_replay, time.perf_counter(), 5_000)


def test_a_repeated_element_pair_is_one_query(queries) -> None:
    """|-a| against |a| twice (not equal after simplify, unsat): one query, valid."""
    a = z3.FP("a", S)
    x, y = z3.fpAbs(z3.fpNeg(a)), z3.fpAbs(a)
    assert not z3.eq(z3.simplify(x), z3.simplify(y))
    out = _decide(_arr(x, x), _arr(y, y))
    assert out.status == "valid" and len(queries) == 1


def test_a_pair_equal_after_simplify_needs_no_query(queries) -> None:
    a, b = z3.FP("a", S), z3.FP("b", S)
    x, y = z3.fpAdd(z3.RNE(), a, b), z3.fpAdd(z3.RNE(), b, a)
    assert not z3.eq(x, y)
    out = _decide(_arr(x), _arr(y))
    assert out.status == "valid" and out.reason == "identical terms" and not queries


def test_math_at_a_literal_argument_is_the_reference_value() -> None:
    """``math_apply`` at a literal argument gives the literal the reference evaluator computes
    (sigmoid on bf16, the specials included; NaN compared as a class), at an unknown one the
    uninterpreted application."""
    import ml_dtypes

    from tilefoundry.semantics.dsl import parse_module
    from tilefoundry.semantics.evaluator.core import evaluate

    mod = parse_module("@func\ndef f(x: Tensor[(6,), bf16]) -> Tensor[(6,), bf16]:\n"
                       "    return sigmoid(x)\n")
    x = np.array([0.75, -3.0, -0.0, np.inf, -np.inf, np.nan], np.float32).astype(
        ml_dtypes.bfloat16)
    ref = np.asarray(evaluate(mod, "f", [x])).view(np.uint16)
    sig = E.math_apply("sigmoid", "bf16")
    for xi, want in zip(x.view(np.uint16), ref, strict=True):
        got = sig(z3.fpBVToFP(z3.BitVecVal(int(xi), 16), E.fp_sort("bf16")))
        bits, nan = E.value_bits(got, "bf16")
        assert (nan and np.isnan(np.uint16(want).view(ml_dtypes.bfloat16))) or bits == want
    a = z3.FP("a", E.fp_sort("bf16"))
    t = sig(a)
    assert z3.is_app(t) and t.decl().name() == "math.sigmoid.bf16"


def test_a_program_over_constants_needs_no_query(queries) -> None:
    """program/seed0/5 (a loop carrying sigmoid of a constant tensor, a max over it): with the
    math folded where its arguments are literals, every pass is decided without the solver
    (before D550: 208 queries, 28 s, "failed to prove" at the CI limit)."""
    from tilefoundry.conformance.catalog import build_catalog
    from tilefoundry.validate.passes import Bounds, validate_case

    rep = validate_case(build_catalog(0)["program/seed0/5"], Bounds(timeout_ms=2_000,
                                                                    narrow=False))
    status = {p.name: p.outcome.status for p in rep.passes}
    assert status["lower"] == "valid" and status["schedule"] == "valid", status
    assert not queries
