"""``refine.decide`` before the solver (D550): an element pair the solver would prove equal by a
query that another element already made is not asked again; a pair equal after ``z3.simplify``
needs no query; a ``math`` function applied to a literal is its value (the kernel-IR
interpreter's definition, which is the reference op's), so a term over constants folds to a
literal. None of these may turn a real difference into "valid"."""

from __future__ import annotations

import time

import numpy as np
import pytest
import z3

from tilefoundry.errors import TilefoundryError
from tilefoundry.validate import encode as E
from tilefoundry.validate import refine

S = E.fp_sort("f32")
EXP = E.math_fn("exp", "f32")
MATH = {"math.exp (uninterpreted)"}


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


def _decide(x: np.ndarray, y: np.ndarray, abs_: set[str] = frozenset()) -> refine.Outcome:
    return refine.decide([(x, y)], set(abs_), set(abs_), _no_replay, time.perf_counter(), 5_000)


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


def test_math_at_a_literal_is_its_value(queries) -> None:
    """max(exp(0.5), exp(-1.25)) in either order: with exp uninterpreted a query (fp.max of
    unknowns); at the literals both fold to exp(0.5)'s f32 value, no query."""
    c1, c2 = z3.FPVal(0.5, S), z3.FPVal(-1.25, S)
    x, y = z3.fpMax(EXP(c1), EXP(c2)), z3.fpMax(EXP(c2), EXP(c1))
    assert not z3.eq(z3.simplify(x), z3.simplify(y))
    out = _decide(_arr(x), _arr(y), MATH)
    assert out.status == "valid" and not queries


def test_math_values_that_differ_are_never_valid(queries) -> None:
    """exp(0.5) against exp(-1.25): the literals differ, so the query is made and its model
    replayed (here the replay raises: "failed to prove", never "valid"); a term that does not
    fold (exp of the unknown a) is queried as it was built."""
    out = _decide(_arr(EXP(z3.FPVal(0.5, S))), _arr(EXP(z3.FPVal(-1.25, S))), MATH)
    assert out.status == "failed to prove" and "replay raised" in out.reason
    assert len(queries) == 1
    a = z3.FP("a", S)
    out = _decide(_arr(z3.fpMax(EXP(a), EXP(z3.FPVal(1.0, S)))),
                  _arr(z3.fpMax(EXP(z3.FPVal(1.0, S)), EXP(a))), MATH)
    assert out.status != "invalid" and len(queries) == 2
    apps = {str(e.arg(0)) for e in E.dag_nodes(queries[1][0])
            if z3.is_app(e) and e.decl().name() == "math.exp.f32"}
    assert apps == {"a", "1"}  # the query holds the terms as built
