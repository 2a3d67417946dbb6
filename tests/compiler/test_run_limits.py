"""Compiled programs run within the evaluator's limits (issue 34, item 3): the loop-iteration
limit (counted as ``evaluate`` counts it: trips at loop entry, nested loops multiply) and the
value-size limits in force at the call, with the evaluator's ``LimitError``, on every target
whose host runs the loops."""

from __future__ import annotations

import importlib.util
import os
import re
import sys

import numpy as np
import pytest

import tilefoundry.compiler.simd_backend  # noqa: F401  (registers the simd target)
from tilefoundry.compiler.kir import HostLoop
from tilefoundry.compiler.pipeline import compile
from tilefoundry.compiler.run_limits import loop_iterations
from tilefoundry.limits import LimitError, use_limits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, GridRegionExpr, Module, Var
from tilefoundry.semantics.ops import Binary, BinaryKind
from tilefoundry.semantics.types import TensorType

# Triton's interpreter is chosen when triton is first imported (as in test_triton_backend.py)
if "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _has(*mods: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in mods)


#: every target whose host runs the loops: the interpreter, SIMD C, Triton (its interpreter
#: here) and the CUDA program on the host (the same executable as on a GPU, run on the CPU)
TARGETS = ["interp", "simd",
           pytest.param("triton", marks=pytest.mark.skipif(not _has("triton", "torch"),
                                                           reason="needs triton and torch")),
           pytest.param("cuda-host", marks=pytest.mark.skipif(
               not _has("cuda"), reason="needs cuda-bindings"))]

ADD = Binary(BinaryKind.ADD)
T = TensorType((2,), DType.F32)
ONE = np.ones(2, np.float32)


def _counted_loops(outer: int, inner: int, then: int = 0) -> Module:
    """x + outer * inner * x (+ then * x): an outer loop of ``outer`` trips around an inner
    one of ``inner`` trips adding x to its carry, then (``then`` > 0) a loop of ``then``
    trips: outer + outer * inner + then iterations."""
    x, c0, c1, c2 = Var("x", T), Var("c0", T), Var("c1", T), Var("c2", T)
    step = Call(ADD, (c1, x))
    inner_loop = GridRegionExpr(Var("j", None), (c1,), (c0,), step, (step,), inner)
    body = GridRegionExpr(Var("i", None), (c0,), (x,), inner_loop, (inner_loop,), outer)
    if then:
        s2 = Call(ADD, (c2, x))
        body = GridRegionExpr(Var("k", None), (c2,), (body,), s2, (s2,), then)
    return Module((Function("f", (x,), body, T),))


def _count(msg: str) -> str:
    return re.search(r"would bring the loop iterations to ([\d,]+)", msg).group(1).rstrip(",")


@pytest.mark.parametrize("target", TARGETS)
def test_a_2_62_trip_loop_is_refused_at_the_call(target):
    """The probe's loop: 2^62 trips; the compiled program is refused before it starts, with
    the evaluator's limit and count."""
    m = _counted_loops(1 << 62, 1)
    c = compile(m, "f", [(2,)], target)
    with pytest.raises(LimitError) as ref:
        evaluate(m, "f", [ONE])
    with pytest.raises(LimitError, match=r"compiled @f: host loop loop\d+ over range\(0, "
                                         r"4611686018427387904, 1\) would bring the loop "
                                         r"iterations to 4,611,686,018,427,387,904, more than "
                                         r"the limit max_loop_iterations \(nested loops "
                                         r"multiply\); raise it with") as got:
        c([ONE])
    assert ref.value.limit == got.value.limit == "max_loop_iterations"
    assert _count(str(ref.value)) == _count(str(got.value))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("outer, inner, then", [(4, 249, 0), (4, 250, 0), (3, 300, 100),
                                                (3, 300, 97), (1, 0, 5000)])
def test_the_compiled_limit_is_the_evaluators_at_the_boundary(target, outer, inner, then):
    """Within 1,000 iterations both run and agree; past it both refuse, at the same loop with
    the same running count."""
    m = _counted_loops(outer, inner, then)
    c = compile(m, "f", [(2,)], target)
    with use_limits(max_loop_iterations=1000):
        try:
            want = evaluate(m, "f", [ONE])
        except LimitError as e:
            with pytest.raises(LimitError) as got:
                c([ONE])
            assert got.value.limit == e.limit == "max_loop_iterations"
            assert _count(str(got.value)) == _count(str(e))
            assert outer + outer * inner + then > 1000
        else:
            assert outer + outer * inner + then <= 1000
            assert np.array_equal(c([ONE]), want)


def test_loop_iterations_counts_as_the_evaluator():
    c = compile(_counted_loops(3, 5, 7), "f", [(2,)])
    assert sum(isinstance(s, HostLoop) for s in c.program.steps) == 2
    assert loop_iterations(c.program.steps) == 3 + 3 * 5 + 7


def test_value_sizes_are_checked_at_the_call():
    """Compiled under the default limits, called under lower ones: refused, naming the
    buffer and the limit, as evaluate refuses the same inputs' results."""
    m = _counted_loops(2, 2)
    c = compile(m, "f", [(2,)])
    with use_limits(max_elements=1):
        with pytest.raises(LimitError, match=r"compiled @f: buffer .*2 elements.*max_elements"):
            c([ONE])
        with pytest.raises(LimitError, match="max_elements"):
            evaluate(m, "f", [ONE])
    assert c([ONE]).tolist() == [5.0, 5.0]


def test_a_loop_inside_a_mesh_launch_counts_too():
    """A collective-free loop over sharded values stays inside its launch (no host loop):
    its trips count against the limit at the call as the reference counts them."""
    from tilefoundry.compiler.lower_mesh import compile_mesh
    from tilefoundry.conformance.catalog.build import (
        make_call,
        make_mesh,
        make_module,
        make_var,
        shard_layout,
    )
    from tilefoundry.semantics.ops.sharding import Reshard
    from tilefoundry.semantics.types import Broadcast, Split

    mesh, topo = make_mesh((2,))
    x = make_var("x", (4,), DType.F32, shard_layout(mesh, (Split(0),), (4,)))
    iv, carry = Var("i", TensorType((), DType.I32)), Var("c", None)
    step = make_call(ADD, carry, x)
    loop = GridRegionExpr(iv, (carry,), (x,), step, (step,), extent=3)
    m = make_module([x], make_call(Reshard(layout=shard_layout(mesh, (Broadcast(),), (4,))), loop), topo)
    c = compile_mesh(m, "f", [(4,)])
    assert c.program.loops() == []  # the loop is in a launch, not on the host
    xs = np.array([1, 2, 3, 4], np.float32)
    with use_limits(max_loop_iterations=3):  # x + 3 x: both run
        evaluate(m, "f", [xs])
        assert c([xs]).tolist() == [4.0, 8.0, 12.0, 16.0]
    with use_limits(max_loop_iterations=2):
        with pytest.raises(LimitError) as ref:
            evaluate(m, "f", [xs])
        with pytest.raises(LimitError, match=r"mesh program: launch \S+: host loop \S+ over "
                                             r"range\(0, 3, 1\) would bring the loop "
                                             r"iterations to 3") as got:
            c([xs])
    assert ref.value.limit == got.value.limit == "max_loop_iterations"
    assert _count(str(ref.value)) == _count(str(got.value)) == "3"
