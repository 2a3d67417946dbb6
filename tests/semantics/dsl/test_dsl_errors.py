"""Bad input: every unsupported construct raises ``DSLError`` naming the construct and the
source location (file:line:column, 1-based column), with the offending line and a caret.

Issue 4, Bad input: 'Unsupported Python constructs (while loops, early return inside a tile
loop, assignment to a subscript, an unknown annotation, a `with Mesh` naming a topology level the
Module does not declare) raise the project's error naming the construct and the source
location.'"""

from __future__ import annotations

import inspect

import pytest

from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.dsl import (
    DimVarRangePat,
    DSLError,
    Tensor,
    f32,
    func,
    module,
    parse_module,
)
from tilefoundry.semantics.dsl import Mesh as _Mesh

HEAD = "N = DimVar('N', 1, 65)\n"  # line 1; line 2 is `@func`, line 3 the def, body from 4
P = "x: Tensor[(N,), f32]"


def parse_error(params: str, body: str, tail: str = "") -> DSLError:
    src = f"{HEAD}@func\ndef f({params}):\n{body}\n{tail}"
    with pytest.raises(DSLError) as e:
        parse_module(src)
    return e.value


def check(e: DSLError, construct: str, line: int, col: int) -> None:
    assert isinstance(e, TilefoundryError)
    assert e.construct == construct, e
    assert (e.line, e.col) == (line, col), e
    text = str(e)
    assert text.startswith(f"<dsl>:{line}:{col}: {construct}: "), text
    assert text.splitlines()[-1].index("^") - 4 == col - 1 - (len(e.source_line) -
                                                               len(e.source_line.lstrip()))


# ---------------------------------------------------------------------------------------------
# the constructs the issue lists
# ---------------------------------------------------------------------------------------------
def test_while_loop():
    e = parse_error(P, "    while True:\n        x = x + 1.0\n    return x")
    check(e, "while loop", 4, 5)
    assert "for i in tile(n)" in e.detail


def test_early_return_inside_a_tile_loop():
    e = parse_error(P, "    acc = x\n    for i in tile(4):\n        acc = acc + x\n"
                       "        return acc\n    return acc")
    check(e, "early return inside a tile loop", 7, 9)


def test_early_return_inside_a_nested_with_in_a_loop():
    e = parse_error(P, "    acc = x\n    for i in range(1, 4, 2):\n        acc = acc + x\n"
                       "        with Mesh(topology='device', axis_names=('d',), "
                       "axis_extents=(2,)) as m:\n            return acc\n    return acc")
    check(e, "early return inside a tile loop", 8, 13)


@pytest.mark.parametrize("stmt", ["y[0] = x[1]", "y[1:2] += x[0:1]"])
def test_assignment_to_a_subscript(stmt):
    e = parse_error(P, f"    y = x\n    {stmt}\n    return y")
    check(e, "assignment to a subscript", 5, 5)
    assert "insert_slice" in e.detail


@pytest.mark.parametrize(("params", "ret", "col"), [
    ("x: int", "", 10), ("x: np.ndarray", "", 10), ("x: Tensor", "", 10),
    ("x: Tensor[(N,), f32]", " -> list[int]", 32), ("x: Foo[(N,), f32]", "", 10),
])
def test_unknown_annotation(params, ret, col):
    src = f"{HEAD}@func\ndef f({params}){ret}:\n    return x\n"
    with pytest.raises(DSLError) as e:
        parse_module(src, {"np": __import__("numpy")})
    check(e.value, "unknown annotation", 3, col)
    assert "Tensor[(M, N), f32]" in e.value.detail


def test_with_mesh_naming_an_undeclared_topology_level():
    body = ("    with Mesh(topology='cta', axis_names=('c',), axis_extents=(4,)) as cta:\n"
            "        y = x + x\n    return y")
    e = parse_error(P, body, "mod = module(f, topology={'device': 2})\n")
    check(e, "with Mesh(topology='cta')", 4, 10)
    assert "'cta', which the Module does not declare (its levels: ['device'])" in e.detail


def test_with_mesh_undeclared_level_through_func_points_at_this_file():
    @func
    def f(x: Tensor[(8,), f32]):
        with _Mesh(topology="cta", axis_names=("c",), axis_extents=(2,)) as cta:  # noqa: F841
            y = x * 2.0
        return y

    with pytest.raises(DSLError) as e:
        module(f, topology={"device": 2})
    lines, first = inspect.getsourcelines(test_with_mesh_undeclared_level_through_func_points_at_this_file)
    want = first + next(k for k, ln in enumerate(lines) if "with _Mesh(" in ln)
    assert e.value.filename == __file__ and e.value.line == want
    assert e.value.col == lines[want - first].index("_Mesh(") + 1
    assert e.value.construct == "with Mesh(topology='cta')"


# ---------------------------------------------------------------------------------------------
# further constructs
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "construct", "line", "col"), [
    ("    if True:\n        x = -x\n    return x", "if statement", 4, 5),
    ("    return x < x < x", "chained comparison", 4, 12),
    ("    return (x > x) and (x < x)", "and / or", 4, 12),
    ("    return not x", "not", 4, 12),
    ("    y = x\n    y.data = x\n    return y", "assignment to an attribute", 5, 5),
    ("    a = b = x\n    return a", "chained assignment", 4, 5),
    ("    x\n    return x", "expression statement", 4, 5),
    ("    return x\n    y = x", "statement after return", 5, 5),
    ("    y: Tensor[(N,), f32] = x\n    return y", "annotated assignment", 4, 5),
    ("    return (lambda v: v)(x)", "lambda", 4, 13),
    ("    return [v for v in (x,)]", "comprehension", 4, 12),
    ("    return x if True else x", "conditional expression", 4, 12),
    ("    return x.shape", "attribute .shape", 4, 12),
    ("    return x ** 2", "operator **", 4, 12),
    ("    return x + 1", "int scalar 1", 4, 16),
    ("    return undefined_name + x", "name undefined_name", 4, 12),
    ("    return x\n    return x", "statement after return", 5, 5),
    ("    try:\n        y = x\n    except Exception:\n        y = x\n    return y",
     "try statement", 4, 5),
    ("    for i in [1, 2]:\n        x = x + 1.0\n    return x", "loop iterable", 4, 14),
    ("    for i in tile(4):\n        x = x + 1.0\n    else:\n        x = x\n    return x",
     "for-else", 7, 9),
    ("    for i in tile(4):\n        y = x + 1.0\n    return x", "for loop", 4, 5),
    ("    a = x\n    b = x\n    for i in tile(4):\n        a, b = b, a\n    return a",
     "tuple assignment to an outer-scope name in a loop", 7, 9),
    ("    for i in tile(4):\n        i = x\n        x = x + 1.0\n    return x",
     "assignment to the loop variable", 5, 9),
    ("    with open('f') as fh:\n        y = x\n    return y", "with statement", 4, 10),
    ("    return x[None]", "subscript None", 4, 14),
    ("    return f(x)", "call of @f", 4, 12),
    ("    return x[x, x]", "subscript", 4, 12),
    ("    return print(x)", "name print", 4, 12),
    ("    return x + const(300, i8)", "const(...)", 4, 16),
])
def test_other_unsupported_constructs(body, construct, line, col):
    check(parse_error(P, body), construct, line, col)


def test_a_float_scalar_needs_a_float_operand():
    e = parse_error("k: Tensor[(N,), i32]", "    return k * 0.5")
    check(e, "float scalar 0.5", 4, 16)
    assert "has dtype i32" in e.detail


def test_a_parameter_needs_an_annotation():
    check(parse_error("x", "    return x"), "parameter annotation", 3, 7)


def test_a_prototype_needs_a_return_type():
    check(parse_error(P, "    pass"), "dispatch prototype f", 3, 1)


def test_a_mesh_extent_must_match_its_level():
    body = ("    with Mesh(topology='device', axis_names=('d',), axis_extents=(4,)) as m:\n"
            "        y = x + x\n    return y")
    e = parse_error(P, body, "mod = module(f, topology={'device': 2})\n")
    check(e, "with Mesh(topology='device')", 4, 10)
    assert "MUST NOT change a level's extent" in e.detail


def test_an_inline_mesh_in_a_shard_layout():
    body = ("    return reshard(x, ShardLayout(Mesh('device', ('d',), (2,)), (Split(0),), "
            "Layout((8,))))")
    check(parse_error("x: Tensor[(8,), f32]", body), "ShardLayout mesh", 4, 35)


def test_calling_a_variant_by_its_label():
    src = f"""{HEAD}@func
def g(x: Tensor[(N,), f32]) -> Tensor[(N,), f32]:
    pass

@g.specialize(DimVarRangePat("N", 1, 65))
def g_all(x):
    return x

@func
def h(x: Tensor[(N,), f32]):
    return g_all(x)
"""
    with pytest.raises(DSLError) as e:
        parse_module(src)
    check(e.value, "call of variant g_all", 12, 12)
    assert "never by its label" in e.value.detail


def test_a_variant_of_a_function_with_a_body():
    @func
    def g(x: Tensor[(8,), f32]):
        return x

    @g.specialize(DimVarRangePat("N", 1, 65))
    def g_v(x):
        return x

    with pytest.raises(DSLError, match=r"only a dispatch prototype") as e:
        _ = g.ir
    assert e.value.construct == "@g.specialize"


def test_a_syntax_error_in_source_text():
    with pytest.raises(DSLError) as e:
        parse_module("@func\ndef f(x: Tensor[(4,), f32]):\n    return x +\n")
    assert e.value.construct == "syntax" and e.value.line == 3
