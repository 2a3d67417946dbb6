"""The renderers' shared decisions (issue 36, D500): every (kind, dtype) reduction and every
cast has a plan in ``compiler/render_decisions.py``, the plans are right, and no renderer keeps
its own copy of a moved decision (an identity table, the float -> int ranges, a cast tree).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import math

import numpy as np
import pytest

from tilefoundry.compiler import kir
from tilefoundry.compiler import render_decisions as rd

#: the modules that render kernel IR (their decisions must be render_decisions')
RENDERERS = ("render_c", "render_c_lanes", "render_c_reduce", "render_cuda", "render_cuda_rows",
             "render_cuda_mma", "render_triton", "render_triton_reduce", "render_triton_dot",
             "render_triton_gemm", "render_triton_rows")
ORDERED_KINDS = tuple(k for k in kir.REDUCE_KINDS if k not in kir.COMPENSATED)


def _values(dt: str) -> list:
    if dt == "bool":
        return [False, True]
    if kir.is_int(dt):
        ii = np.iinfo(kir.numpy_dtype(dt))
        return [int(ii.min), -1 if ii.min else 0, 0, 1, 7, int(ii.max)]
    return [-math.inf, -1.5, -0.0, 0.0, 2.0**-149, 3.25, math.inf]


def _step(kind: str, dt: str, a, b):
    if dt == "bool":
        return (a and b) if kind == "min" else (a or b)
    if kind == "sum":
        return a + b
    if kind == "prod":
        return a * b
    if kind == "abs_max":
        return max(abs(a), abs(b))
    return min(a, b) if kind == "min" else max(a, b)


@pytest.mark.parametrize(("kind", "dt"), list(itertools.product(ORDERED_KINDS,
                                                                sorted(kir.DTYPES))))
def test_every_reduction_has_an_exact_identity(kind: str, dt: str) -> None:
    if kind == "prod" and kir.is_float(dt):
        with pytest.raises(KeyError):  # products are integer-only (kir.REDUCE_KINDS)
            rd.reduce_identity(kind, dt)
        return
    if kind == "abs_max" and dt == "bool":
        return  # no lowering reduces bools by magnitude
    ident = rd.reduce_identity(kind, dt)
    for x in _values(dt):
        if kind == "abs_max":
            x = abs(x)  # abs_max folds magnitudes (an integer's unsigned)
        got = _step(kind, dt, ident, x)
        assert got == x and math.copysign(1, got) == math.copysign(1, x), (kind, dt, x)


@pytest.mark.parametrize(("kind", "dt"), [(k, d) for k in ("sum", "max", "min", "prod")
                                          for d in sorted(kir.INT_DTYPES)])
def test_c_spells_the_integer_identity(kind: str, dt: str) -> None:
    from tilefoundry.compiler.render_c_reduce import _identity

    names = {}
    for bits in (8, 16, 32, 64):
        names[f"INT{bits}_MIN"] = -(1 << (bits - 1))
        names[f"INT{bits}_MAX"] = (1 << (bits - 1)) - 1
        names[f"UINT{bits}_MAX"] = (1 << bits) - 1
    text = _identity(kind, dt)
    assert (names[text] if text in names else int(text)) == rd.reduce_identity(kind, dt)


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(sorted(kir.DTYPES),
                                                                sorted(kir.DTYPES))))
def test_every_cast_has_a_plan(src: str, dst: str) -> None:
    plan = rd.cast_plan(src, dst)
    assert plan.path in rd.CAST_PATHS
    assert plan.bool_source == (src == "bool")
    assert (plan.wide is None) == kir.is_float(src)
    if plan.path.startswith("int_"):
        assert plan.wide in ("i32", "i64")
    if plan.path == "float_int" and dt_has_range(dst):
        lo, hi, lo_in = rd.FLOAT_TO_INT_RANGE[dst]
        ii = np.iinfo(kir.numpy_dtype(dst))
        assert hi == ii.max + 1 and lo == (ii.min if lo_in else ii.min - 1)
        assert float(np.float32(lo)) == lo and float(np.float32(hi)) == hi  # exact in f32


def dt_has_range(dt: str) -> bool:
    """u32 is only Bitcast's pattern type: no cast targets it."""
    return dt != "u32"


def test_the_float_to_int_ranges_cover_the_cast_targets() -> None:
    assert set(rd.FLOAT_TO_INT_RANGE) == {d for d in kir.INT_DTYPES if dt_has_range(d)}


def test_round_and_widen_plans_cover_the_float_dtypes() -> None:
    narrow = {d for d in kir.STORAGE_DTYPES if kir.is_float(d)} - {"f32"}
    assert rd.WIDEN_SOURCES == narrow
    for dt in sorted(kir.DTYPES):
        plan = rd.round_plan(dt, "nonfinite")
        assert (plan is not None) == (dt in narrow | {"f32"}), dt
    assert rd.round_plan("f8e8m0", "saturate", "up") == rd.RoundPlan("f8e8m0", "e8m0", True, "up")


def test_every_binop_form_is_spelled_by_both_renderers() -> None:
    """A form the plan names renders in SIMD C and in Triton (Triton refuses narrow floats'
    bit patterns before asking), None is refused by both."""
    import types

    from tilefoundry.compiler.errors import NotSupportedError
    from tilefoundry.compiler.render_c import KernelC
    from tilefoundry.compiler.render_triton import _KernelT

    kinds = ["add", "sub", "mul", "div", "min", "max", "floordiv", "mod", "eq", "ne", "lt",
             "le", "gt", "ge", "and", "or", "xor"]
    for k, dt in itertools.product(kinds, sorted(kir.DTYPES)):
        form = rd.binop_form(k, dt)
        ins = types.SimpleNamespace(a="a", b="b", kind=k, out="o")
        kc = KernelC.__new__(KernelC)
        kc.dt = lambda name, dt=dt: dt
        kt = _KernelT.__new__(_KernelT)
        kt.dt = kc.dt
        kt.put = kt.emit = lambda *a: None
        kt.fresh = lambda p: p
        for name, render, arg in (("c", kc.l_BinOp, str), ("triton", kt.i_BinOp, "")):
            if form is None or (name == "triton" and dt in rd.WIDEN_SOURCES):
                with pytest.raises(NotSupportedError):
                    render(ins, arg)
            else:
                render(ins, arg)


@pytest.mark.parametrize("fn", kir.MATH_FNS)
def test_every_math_fn_has_a_plan_per_float_dtype(fn: str) -> None:
    from tilefoundry.compiler import spelling

    for dt in sorted(d for d in kir.DTYPES if kir.is_float(d)):
        assert rd.math_plan(fn, dt, False, spelling.C_MATH64) is not None
        plan = rd.math_plan(fn, dt, False, ())
        assert (plan is None) == (dt == "f64")
        assert rd.math_plan(fn, dt, True, ()).form == "f32"


def _tree(module: str) -> ast.Module:
    mod = importlib.import_module(f"tilefoundry.compiler.{module}")
    return ast.parse(inspect.getsource(mod))


@pytest.mark.parametrize("module", RENDERERS)
def test_no_renderer_regrows_a_moved_decision(module: str) -> None:
    """The identity tables, the float -> int ranges and the widen / round dtype sets live in
    render_decisions only; a renderer spelling a plan never restates them."""
    tree = _tree(module)
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            assert not {"sum", "max", "min"} <= keys, \
                f"{module}:{node.lineno}: a reduction table; use render_decisions.reduce_identity"
        if isinstance(node, ast.Constant) and isinstance(node.value, float):
            assert node.value not in (-129.0, 2147483648.0, 9223372036854775808.0,
                                      -2147483648.0), \
                f"{module}:{node.lineno}: a float -> int bound; use FLOAT_TO_INT_RANGE"
        if isinstance(node, ast.Attribute) and node.attr == "iinfo":
            assert module == "render_c_reduce", f"{module}:{node.lineno}: integer extremes"
        if isinstance(node, ast.FunctionDef) and node.name == "_root_size":
            raise AssertionError(f"{module}: its own _root_size; use render_decisions.root_size")


@pytest.mark.parametrize(("module", "cls", "method", "plan"), [
    ("render_c_lanes", "LanesC", "cast_expr", "cast_plan"),
    ("render_c_lanes", "LanesC", "round_f32", "round_plan"),
    ("render_c_lanes", "LanesC", "l_Round", "round_source"),
    ("render_c_lanes", "LanesC", "l_BinOp", "binop_form"),
    ("render_c_lanes", "LanesC", "l_Math", "math_plan"),
    ("render_c_lanes", "LanesC", "widened", "WIDEN_SOURCES"),
    ("render_c_reduce", "ReduceDotC", "emit_reduce", "reduce_in_order"),
    ("render_c_reduce", "ReduceDotC", "reduce_ops", "tracks_valid_lane"),
    ("render_triton", "_KernelT", "cast_expr", "cast_plan"),
    ("render_triton", "_KernelT", "round_f32", "round_plan"),
    ("render_triton", "_KernelT", "i_Round", "round_source"),
    ("render_triton", "_KernelT", "i_BinOp", "binop_form"),
    ("render_triton", "_KernelT", "i_Math", "math_plan"),
    ("render_triton", "_KernelT", "widened", "WIDEN_SOURCES"),
    ("render_triton_reduce", "ReduceT", "identity", "reduce_identity"),
    ("render_triton_reduce", "ReduceT", "i_Reduce", "reduce_in_order"),
    ("render_triton_reduce", "ReduceT", "i_Reduce", "tracks_valid_lane"),
])
def test_renderers_decide_through_the_plans(module: str, cls: str, method: str,
                                             plan: str) -> None:
    mod = importlib.import_module(f"tilefoundry.compiler.{module}")
    src = inspect.getsource(getattr(getattr(mod, cls), method))
    assert f"rd.{plan}" in src, f"{module}.{cls}.{method} does not consult render_decisions.{plan}"
