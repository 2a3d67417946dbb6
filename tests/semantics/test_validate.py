"""Only the project's errors at the entry points (issue 21.3): sizes, nesting, recursion through
dispatch, bypassed frozen fields, the DSL's static evaluator. Each case is one the malformed-input
fuzz found raising a foreign exception (MemoryError, RecursionError, OverflowError, ...) or
hanging; the expected message names the offending thing and the limit or fix."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.limits import LimitError, use_limits
from tilefoundry.semantics.dsl import DSLError, parse_module, to_source
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, DimVarRangePat, Function, GridRegionExpr, Module, Var
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Cast,
    Conv2D,
    Gelu,
    MatMul,
    Reduce,
    ReduceKind,
    Reshape,
    Zeros,
)
from tilefoundry.semantics.printer import to_text
from tilefoundry.semantics.typeinfer import infer_module
from tilefoundry.semantics.types import DimVar, IRError, TensorType

F32 = DType.F32
ADD = Binary(BinaryKind.ADD)


def _t(*shape):
    return TensorType(tuple(shape), F32)


def _add_module(shape=(4,)):
    x = Var("x", _t(*shape))
    return Module((Function("f", (x,), Call(ADD, (x, x)), _t(*shape)),))


# --- value sizes ------------------------------------------------------------------------------
def test_zeros_past_max_elements_is_a_limit_error_before_allocating():
    m = Module((Function("f", (), Call(Zeros((1 << 62,), F32), ()), _t(1 << 62)),))
    with pytest.raises(LimitError, match=r"Zeros.*4,611,686,018,427,387,904 elements.*"
                                         r"max_elements.*TILEFOUNDRY_LIMITS") as ei:
        evaluate(m, "f", [])
    assert ei.value.limit == "max_elements"


def test_outer_product_matmul_asking_37_gib_is_refused():
    n = 10 ** 5
    a, b = Var("a", _t(n, 1)), Var("b", _t(1, n))
    m = Module((Function("f", (a, b), Call(MatMul(), (a, b)), _t(n, n)),))
    with pytest.raises(LimitError, match=r"MatMul.*\(100000, 100000\).*10,000,000,000"):
        evaluate(m, "f", [np.zeros((n, 1), np.float32), np.zeros((1, n), np.float32)])


def test_the_limit_is_configurable_both_ways():
    m = Module((Function("f", (), Call(Zeros((64,), F32), ()), _t(64)),))
    with use_limits(max_value_bytes=255), pytest.raises(LimitError, match="256 bytes"):
        evaluate(m, "f", [])
    assert evaluate(m, "f", []).shape == (64,)  # 64 f32 = 256 bytes under the default


@pytest.mark.parametrize("kw, match", [
    (dict(padding=(1 << 62, 0)), r"padding must be a pair of ints in \[0, 2\*\*62\)"),
    (dict(stride=(1 << 64, 1)), r"stride must be a pair of ints in \[1, 2\*\*62\)"),
    (dict(groups=True), r"groups must be an int .*not a bool"),
    (dict(padding=np.array([1, 1])), r"padding must be a pair"),
])
def test_conv2d_attributes_out_of_range_are_ir_errors(kw, match):
    with pytest.raises(IRError, match=match):
        Conv2D(**kw)


def test_conv2d_huge_padding_is_refused_before_padding_the_input():
    x, w, b = Var("x", _t(1, 1, 4, 4)), Var("w", _t(1, 1, 1, 1)), Var("b", _t(1))
    m = Module((Function("f", (x, w, b), Call(Conv2D(padding=(1 << 40, 0)), (x, w, b)),
                         None),))
    with pytest.raises(LimitError, match="Conv2D"):
        evaluate(m, "f", [np.zeros((1, 1, 4, 4), np.float32), np.zeros((1, 1, 1, 1), np.float32),
                          np.zeros(1, np.float32)])


@pytest.mark.parametrize("shapes, match", [
    ([("a",)], r"shapes\[0\] axis 0 must be a non-negative int, got 'a'"),
    ([(None,)], r"got None"),
    ([(float("inf"),)], r"got inf"),
    ([(4.5,)], r"got 4.5"),
    ([(-4,)], r"got -4"),
    ("x", r"shapes must be a list of shapes"),
    ([None], r"shapes\[0\] must be a tuple of ints"),
])
def test_compile_rejects_malformed_shapes(shapes, match):
    from tilefoundry.compiler.errors import LoweringError

    with pytest.raises(LoweringError, match=match):
        tf_compile(_add_module(), "f", shapes, "interp")


def test_compile_rejects_shapes_past_the_size_limit():
    with pytest.raises(LimitError, match="max_elements"):
        tf_compile(_add_module(), "f", [(1 << 62,)], "interp")


# --- nesting and recursion --------------------------------------------------------------------
def _nested_calls(n):
    t = _t(2)
    x = Var("x", t)
    prev = Function("g0", (x,), Call(ADD, (x, x)), t)
    fns = [prev]
    for i in range(1, n):
        y = Var("x", t)
        prev = Function(f"g{i}", (y,), Call(prev, (y,)), t)
        fns.append(prev)
    return Module(tuple(fns))


def _nested_loops(n, extent=1):
    t = _t(2)
    x = Var("x", t)
    cs = [Var("c", t) for _ in range(n)]
    y = Call(ADD, (cs[-1], cs[-1]))
    for k in range(n - 1, -1, -1):
        y = GridRegionExpr(Var("i", None), (cs[k],), (cs[k - 1] if k else x,), y, (y,), extent)
    return Module((Function("f", (x,), y, t),))


def test_130_nested_calls_and_200_nested_loops_evaluate():
    """Recursion-limit cases of the issue: they run (the nesting is within max_nesting)."""
    one = np.ones(2, np.float32)
    assert evaluate(_nested_calls(130), "g129", [one]).tolist() == [2.0, 2.0]
    # 200 loops of one trip each, the innermost doubles: 2 ** 1 of the carried 1.0 ... each
    # loop yields c + c of its own carry, initialised by the enclosing loop's carry
    out = evaluate(_nested_loops(200), "f", [one])
    assert out.tolist() == [2.0, 2.0]
    assert to_text(_nested_loops(200)).count("grid_region") == 200  # prints without recursion


def test_nesting_past_max_nesting_is_a_limit_error():
    with pytest.raises(LimitError, match=r"nests 300 levels.*max_nesting"):
        infer_module(_nested_loops(300))
    with use_limits(max_nesting=50), pytest.raises(LimitError, match="max_nesting"):
        to_text(_nested_calls(60))


def test_nested_loops_past_max_loop_iterations_stop():
    """130 nested two-trip loops would run 2 ** 130 iterations."""
    with pytest.raises(LimitError, match="max_loop_iterations"):
        evaluate(_nested_loops(130, extent=2), "f", [np.ones(2, np.float32)])


def _counted_loops(outer, inner):
    """x + outer * inner * x: an outer loop of ``outer`` trips around an inner one of ``inner``
    trips that adds the loop-invariant x to its carry; outer + outer * inner iterations."""
    t = _t(2)
    x, c0, c1 = Var("x", t), Var("c0", t), Var("c1", t)
    step = Call(ADD, (c1, x))
    inner_loop = GridRegionExpr(Var("j", None), (c1,), (c0,), step, (step,), inner)
    outer_loop = GridRegionExpr(Var("i", None), (c0,), (x,), inner_loop, (inner_loop,), outer)
    return Module((Function("f", (x,), outer_loop, t),))


def test_max_loop_iterations_is_exact_at_the_boundary():
    """4 outer trips + 4 x 249 inner trips = 1,000 iterations: within a limit of 1,000, and the
    loop-invariant x and each carry are the ones of their own iteration (1 + 996 = 997); one
    more inner trip (1,004) is refused."""
    one = np.ones(2, np.float32)
    with use_limits(max_loop_iterations=1000):
        assert evaluate(_counted_loops(4, 249), "f", [one]).tolist() == [997.0, 997.0]
        with pytest.raises(LimitError, match=r"1,004.*max_loop_iterations"):
            evaluate(_counted_loops(4, 250), "f", [one])


def test_loop_scope_restores_the_value_table():
    """An iteration runs in the caller's table (no per-iteration copy): what it adds is removed
    on exit, a binding it shadows is restored, also when the iteration raises."""
    from tilefoundry.semantics.ir import loop_scope

    values = {1: "a", 2: "b"}
    with loop_scope(values, {2: "B", 3: "c"}) as it:
        assert it is values and values == {1: "a", 2: "B", 3: "c"}
        values[4] = "d"
    assert values == {1: "a", 2: "b"}
    with pytest.raises(KeyError), loop_scope(values, {5: "e"}):
        values[6] = "f"
        raise KeyError(6)
    assert values == {1: "a", 2: "b"}


def test_a_10k_op_chain_prints_and_serializes_without_pickle():
    t = _t(2)
    x = Var("x", t)
    e = x
    for _ in range(10 ** 4):
        e = Call(ADD, (e, x))
    m = Module((Function("f", (x,), e, t),))
    assert to_text(m).count("add") >= 10 ** 4
    assert parse_module(to_source(m)) == m


def test_a_variant_calling_its_own_prototype_is_an_ir_error():
    n = DimVar("N", 1, 8)
    x, y = Var("x", _t(n)), Var("x", _t(n))
    proto = Function("f", (x,), None, _t(n))
    proto.add_variant(Function("f", (y,), Call(proto, (y,)), _t(n),
                               specializations=(DimVarRangePat("N", 1, 8),)))
    m = Module((proto,))
    for entry in (infer_module, to_text, to_source):
        with pytest.raises(IRError, match=r"variant @f \[N\$1_8\] calls its own dispatch "
                                          r"prototype @f; HIR functions are not recursive"):
            entry(m)
    with pytest.raises(IRError, match="not recursive"):
        evaluate(m, "f", [np.zeros(3, np.float32)])


def test_add_variant_of_itself_is_refused():
    n = DimVar("N", 1, 8)
    v = Function("f", (Var("x", _t(n)),), None, _t(n),
                 specializations=(DimVarRangePat("N", 1, 8),))
    with pytest.raises(IRError, match="not its own variant"):
        v.add_variant(v)


def test_a_bypassed_frozen_field_is_the_constructors_error():
    m = _add_module()
    call = m["f"].body
    object.__setattr__(call, "args", (call.args[0], "not an expr"))
    with pytest.raises(IRError, match=r"infer_module: Call: Call.args must be a tuple of Exprs"
                                      r".*changed after construction"):
        infer_module(m)
    with pytest.raises(IRError, match="to_text"):
        to_text(m)


def test_a_bypassed_variant_cycle_is_an_ir_error():
    m = _add_module()
    f = m["f"]
    object.__setattr__(f, "variants", (f,))
    with pytest.raises(IRError):
        infer_module(m)


# --- the DSL's static evaluator ---------------------------------------------------------------
_HEAD = "from tilefoundry.semantics.dsl import *\n"


@pytest.mark.parametrize("src, match", [
    ("N = 10 ** 10 ** 10\n", r"10 \*\* 10000000000 has about .* bits.*max_static_int_bits"),
    ("A = 1 << 10 ** 9\n", "max_static_int_bits"),
    ("X = 9 ** 9 ** 9 % 7\n", "max_static_int_bits"),
    ("K = 10.0 ** 400\n", "the float result is out of range"),
    ("S = (1,) * 10 ** 9\n", r"repeating 1 items 1,000,000,000 times.*max_static_items"),
    ("T = 'ab' * 10 ** 9\n", "max_static_items"),
    ("X = " + "-" * 5000 + "1\n", "nests too deeply|max_source_nesting"),
    ("X = " + " + ".join(["1"] * 300) + "\n", "max_source_nesting"),
])
def test_static_expressions_are_bounded(src, match):
    with pytest.raises(DSLError, match=match):
        parse_module(_HEAD + src)


def test_static_integers_within_the_bound_still_compute():
    m = parse_module(_HEAD + "K = 2 ** 64 // 2 ** 62\n@func\ndef f(x: Tensor[(K,), f32]) -> "
                     "Tensor[(K,), f32]:\n    return x + x\n")
    assert m["f"].params[0].type.shape == (4,)


def test_parse_module_rejects_non_text():
    with pytest.raises(DSLError, match="source text"):
        parse_module(b"x = 1")


# --- numpy arrays as attributes (found by the 10^4-input fuzz) --------------------------------
@pytest.mark.parametrize("make, match", [
    (lambda: Cast(F32, np.array(["a", "b"])), "Cast.overflow must be one of"),
    (lambda: Cast(F32, "nonfinite", np.array([1, 2])), "Cast.rounding must be one of"),
    (lambda: Gelu(np.array([1, 2])), "Gelu.approximate must be"),
    (lambda: Reduce((0,), kind=ReduceKind.SUM, policy=np.array([1, 2])),
     "Reduce.policy must be one of"),
])
def test_array_valued_string_attributes_are_ir_errors(make, match):
    with pytest.raises(IRError, match=match):
        make()


def test_to_source_of_a_gather_with_a_huge_axis_does_not_overflow():
    from tilefoundry.errors import TilefoundryError
    from tilefoundry.semantics.ops import Gather

    x, i = Var("x", _t(4)), Var("i", TensorType((2,), DType.I32))
    m = Module((Function("f", (x, i), Call(Gather(1 << 62), (x, i)), None),))
    try:
        text = to_source(m)
    except TilefoundryError:
        return
    assert "1 << 62" in text or str(1 << 62) in text


@pytest.mark.parametrize("build", [
    lambda v: __import__("tilefoundry.semantics.types", fromlist=["Partial"]).Partial(v),
    lambda v: __import__("tilefoundry.semantics.ops", fromlist=["Scan"]).Scan(0, "add",
                                                                              policy=v),
    lambda v: __import__("tilefoundry.semantics.ops", fromlist=["Scan"]).Scan(0, v),
    lambda v: __import__("tilefoundry.semantics.ops", fromlist=["MaskedReduce"]).MaskedReduce(
        (0,), kind=v),
    lambda v: __import__("tilefoundry.semantics.ops", fromlist=["SeededReduce"]).SeededReduce(
        (0,), policy=v),
    lambda v: __import__("tilefoundry.semantics.ops", fromlist=["Sort"]).Sort(nan=v),
])
def test_a_numpy_array_for_a_string_attribute_is_an_ir_error(build):
    """The 10^5 malformed-input fuzz on the H200 (inputs 7989, 77820, 79360): `x not in
    CHOICES` on an array is numpy's ambiguous-truth ValueError; now the project's IRError."""
    with pytest.raises(IRError, match="must be"):
        build(np.array(["sum", "max"]))


def test_a_slice_of_an_axis_past_ssize_t_has_its_extent():
    """Input 10552: `len(range(...))` of a slice raised OverflowError past 2^63."""
    from tilefoundry.semantics.ops import Slice

    n = 1 << 70
    x = Var("x", _t(n))
    m = Module((Function("f", (x,), Call(Slice((1,), (n,), (2,)), (x,)), None),))
    assert infer_module(m)["f"].body.checked_type.shape == (n // 2,)  # 1, 3, ..., n - 1


def test_a_scan_seed_past_every_float_is_a_type_error():
    """10^5 malformed-input fuzz, input 58626: float(seed) raised OverflowError."""
    from tilefoundry.semantics.ops import Scan
    from tilefoundry.semantics.typeinfer.core import TypeInferError

    x = Var("x", _t(3))
    m = Module((Function("f", (x,), Call(Scan(0, "add", True, 10 ** 400), (x,)), None),))
    with pytest.raises(TypeInferError, match="is not a finite float"):
        infer_module(m)


def test_a_value_of_more_than_64_axes_is_a_limit_error():
    """Input 47586: a reshape to rank 100 reached numpy's 'maximum supported dimension'."""
    x = Var("x", _t(2))
    m = Module((Function("f", (x,), Call(Reshape((1,) * 98 + (2, 1)), (x,)), None),))
    with pytest.raises(LimitError, match=r"rank 100.*at most 64 axes"):
        evaluate(m, "f", [np.ones(2, np.float32)])
