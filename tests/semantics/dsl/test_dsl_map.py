"""``map(values..., scalar_lambda)`` (D456): parse-time sugar for a custom pure scalar expression.

Tile design: "map(values..., scalar_lambda) remains the escape hatch for a custom pure scalar
expression ... Both forms become one elementwise op with a scalar SSA region in TileIR, so fusion
sees the complete expression DAG". Here: the map form builds the same IR as the written-out
expression, evaluates to the same values, and an impure / non-scalar / wrong-arity lambda is the
project's error naming the problem."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.dsl import DSLError, parse_module
from tilefoundry.semantics.evaluator.core import evaluate

HEAD = "from tilefoundry.semantics.dsl import *\n"
SIG = "x: Tensor[(4, 8), f32], y: Tensor[(8,), f32], c: Tensor[(4, 8), bool]"


def mod(body: str, sig: str = SIG):
    return parse_module(HEAD + f"@func\ndef f({sig}):\n    return {body}\n")


# (map form, written-out form): operators, math ops, broadcast, ite, cast, literals, nn ops
PAIRS = [
    ("map(x, y, lambda a, b: exp(a - b) * 2.0)", "exp(x - y) * 2.0"),
    ("map(x, lambda a: a * a + 1.0)", "x * x + 1.0"),
    ("map(c, x, y, lambda m, a, b: ite(m, a, b))", "ite(c, x, y)"),
    ("map(x, y, lambda a, b: ite(a < b, -a, nn.relu(b)))", "ite(x < y, -x, nn.relu(y))"),
    ("map(x, lambda a: cast(a * 0.5, bf16))", "cast(x * 0.5, bf16)"),
    ("map(x, y, lambda y, x: y - x)", "x - y"),  # parameters shadow outer names
]


@pytest.mark.parametrize(("mapped", "written"), PAIRS)
def test_map_builds_the_ir_of_the_written_out_form(mapped, written):
    assert mod(mapped)["f"].body == mod(written)["f"].body


@pytest.mark.parametrize(("mapped", "written"), PAIRS)
def test_map_evaluates_like_the_written_out_form(mapped, written):
    rng = np.random.default_rng(37)
    xs = rng.standard_normal((4, 8)).astype(np.float32)
    ys = rng.standard_normal(8).astype(np.float32)
    cs = rng.standard_normal((4, 8)) > 0
    got = evaluate(mod(mapped), "f", [xs, ys, cs])
    want = evaluate(mod(written), "f", [xs, ys, cs])
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_map_of_a_shared_value_keeps_the_dag_shared():
    """The lambda's parameter bound twice is one node: fusion sees a DAG, not a copied tree."""
    body = mod("map(x + 1.0, lambda a: a * a)")["f"].body
    assert body.args[0] is body.args[1]


def test_map_result_differs_from_a_different_expression():
    """The comparison above can fail: a different lambda gives different IR."""
    assert mod("map(x, lambda a: a * 2.0)")["f"].body != mod("x * 3.0")["f"].body


def err(body: str) -> DSLError:
    with pytest.raises(DSLError) as e:
        mod(body)
    assert isinstance(e.value, TilefoundryError)
    assert e.value.construct in ("map lambda", "map(...)", "name print")
    return e.value


@pytest.mark.parametrize(("body", "fragment"), [
    # wrong arity
    ("map(x, y, lambda a: a)", "takes 1 parameter(s) ('a',) but map passes 2 value(s)"),
    ("map(x, lambda a, b: a + b)", "takes 2 parameter(s)"),
    ("map(x, lambda a, b=1.0: a + b)", "plain positional parameters only"),
    ("map(x, lambda *a: a)", "plain positional parameters only"),
    ("map(x, x)", "then a lambda"),
    ("map(lambda a: a)", "then a lambda"),
    ("map(x, f=lambda a: a)", "positionally"),
    # impure
    ("map(x, lambda a: (b := a) + b)", "impure: a walrus"),
    ("map(x, lambda a: a + y)", "reads the outer tensor value 'y'"),
    ("map(x, lambda a: print(a))", "'print' is not bound"),
    # non-scalar
    ("map(x, lambda a: a[0])", "not scalar: a subscript"),
    ("map(x, lambda a: (a, a))", "not scalar: a tuple"),
    ("map(x, lambda a: reduce_sum(a, 0))", "reduce_sum(...), which is not an elementwise"),
    ("map(x, lambda a: softmax(a, axis=0))", "softmax(...), which is not an elementwise"),
    ("map(x, lambda a: transpose(a, (1, 0)))", "not an elementwise"),
    ("map(x, lambda a: a if a else a)", "write ite(cond, a, b)"),
    ("map(x, lambda a: 2.0)", "static value"),
    ("map(x, lambda a: const(2.0, f32))", "reads none of its parameters"),
])
def test_bad_lambdas_are_the_projects_error(body, fragment):
    e = err(body)
    assert fragment in str(e), str(e)


def test_a_func_call_in_the_lambda_is_rejected():
    src = HEAD + """
@func
def g(a: Tensor[(4, 8), f32]):
    return a + 1.0

@func
def f(x: Tensor[(4, 8), f32]):
    return map(x, lambda a: g(a))
"""
    with pytest.raises(DSLError) as e:
        parse_module(src)
    assert "calls g(...), which is not an elementwise DSL op" in str(e.value)


def test_the_lambda_parameters_do_not_leak():
    """After map, the lambda's parameter name is unbound again (or the outer binding returns)."""
    with pytest.raises(DSLError) as e:
        mod("map(x, lambda zz: zz * 2.0) + zz")
    assert "'zz' is not bound" in str(e.value)
    assert mod("map(y, lambda x: x * 2.0) + x")["f"].body == mod("y * 2.0 + x")["f"].body
