"""The ``elaborate`` pass validated (D479): the typed entry read with the reference evaluator's
call / dispatch / DimVar semantics against the elaborated Function — valid for the landed
elaborator on nested calls and a dispatch prototype; invalid, with a counterexample the
reference confirms, when the elaborator selects the wrong variant. The same HIR-against-HIR
check is ``canonicalize``'s where the elaborated HIR does not lower (D527)."""

from __future__ import annotations

import numpy as np

import tilefoundry.compiler.hir_passes as hp
from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
from tilefoundry.semantics.dsl import DimVar, DimVarRangePat, Tensor, f32, func, module
from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.ir import Call, Constant, Function, Module, Var
from tilefoundry.semantics.ops import Binary, BinaryKind
from tilefoundry.semantics.types import TensorType
from tilefoundry.validate.elaborate import check_elaboration
from tilefoundry.validate.passes import validate_program
from tilefoundry.validate.refine import flat_arrays

F32 = DType.F32

L = DimVar("L", 1, 257)


def _module():
    @func
    def scale(x: Tensor[(L,), f32]) -> Tensor[(L,), f32]:
        pass

    @scale.specialize(DimVarRangePat("L", 1, 3))
    def scale_short(x):
        return x - 1.0

    @scale.specialize(DimVarRangePat("L", 3, 257))
    def scale_long(x):
        return 1.0 - x

    @func
    def twice(x: Tensor[(L,), f32], y: Tensor[(L,), f32]) -> Tensor[(L,), f32]:
        return scale(x) * y

    @func
    def main(x: Tensor[(L,), f32], y: Tensor[(L,), f32]):
        return (twice(x, y), scale(y))

    return module(scale, twice, main)


def test_nested_calls_and_dispatch_elaborate_validly():
    m = _module()
    for n in (2, 4):  # the short and the long variant
        out = check_elaboration(m, "main", [(n,), (n,)])
        assert out.status == "valid", out.reason
    rep = validate_program(m, "main", [(4,), (4,)])
    assert rep.status("elaborate") == "valid" and rep.status("lower") == "valid", rep.text()


def test_a_wrong_variant_is_invalid_with_a_replayed_counterexample(monkeypatch):
    m = _module()
    real = hp.select_variant

    def wrong(fn, shapes):  # the elaborator picks the other variant (the evaluator does not)
        v = real(fn, shapes)
        return next(w for w in fn.variants if w is not v)

    monkeypatch.setattr(hp, "select_variant", wrong)
    out = check_elaboration(m, "main", [(4,), (4,)])
    assert out.status == "invalid", out.reason
    cx = out.counterexample
    assert cx is not None and cx.differing
    src, got = cx.src["source 1"], cx.tgt["elaborated 1"]
    # source: 1 - y (the long variant); elaborated: y - 1
    y = cx.inputs["y"]
    with np.errstate(all="ignore"):
        assert np.array_equal(src, np.float32(1.0) - y, equal_nan=True)
        assert np.array_equal(got, y - np.float32(1.0), equal_nan=True)


# ---------------------------------------------------------------------------------------------
# canonicalize checked HIR against HIR where the elaborated HIR does not lower (D527), and the
# shape ops folded from their constant operands
# ---------------------------------------------------------------------------------------------
def _shape_module(kind: BinaryKind) -> Module:
    from tilefoundry.semantics.ir import Tuple
    from tilefoundry.semantics.ops import ShapeOf
    from tilefoundry.semantics.ops.shape import ShapeExtract

    x = Var("a0", TensorType((2, 3), F32))
    c = Constant(np.array([[1.5, -2.0, 0.25]] * 2, np.float32))
    d = Call(ShapeExtract(-1), (Call(ShapeOf(), (x,)),))
    return Module((Function("f", (x,), Tuple((Call(Binary(kind), (x, c)), d)), None),))


def _hir(module: Module, names: list[str]):
    st = State(module, "f", [(2, 3)], TARGETS["interp"])
    return run_passes(st, names)


def test_canonicalize_is_checked_hir_against_hir_where_the_raw_hir_does_not_lower():
    rep = validate_program(_shape_module(BinaryKind.SUB), "f", [(2, 3)])
    assert rep.status("elaborate") == "valid"  # ShapeExtract folded from ShapeOf's constants
    can = next(p.outcome for p in rep.passes if p.name == "canonicalize")
    assert can.status == "valid" and "HIR against HIR" in can.reason, can.reason
    assert rep.status("lower") == "valid"


def test_an_op_of_no_operands_is_the_constant_of_its_attributes():
    """``ShapeCompose()`` (the empty shape, a generated program's reshape to rank 0) has no
    operand to be data: the reference's value, a constant, so elaborate is checked (it was
    "unsupported op ShapeCompose" in 14 quick-tier programs)."""
    from tilefoundry.semantics.ir import Tuple
    from tilefoundry.semantics.ops.shape import ShapeCompose

    x = Var("a0", TensorType((2, 3), F32))
    m = Module((Function("f", (x,), Tuple((Call(Binary(BinaryKind.ADD), (x, x)),
                                           Call(ShapeCompose(), ()))), None),))
    rep = validate_program(m, "f", [(2, 3)])
    assert rep.status("elaborate") == "valid", rep.text()


def test_a_wrong_canonical_hir_is_invalid_and_replays():
    """The planted bug: the canonical HIR of ``x - c`` computes ``x + c``."""
    from tilefoundry.validate.elaborate import check_hir_refinement

    el = _hir(_shape_module(BinaryKind.SUB), ["typeinfer", "elaborate"]).hir
    wrong = _hir(_shape_module(BinaryKind.ADD), ["typeinfer", "elaborate", "canonicalize"]).hir
    out = check_hir_refinement(el, wrong, (Module((el,)), el.name), "canonical",
                               timeout_ms=20_000)
    assert out.status == "invalid", (out.status, out.reason)
    x = out.counterexample.inputs["a0"]
    good = flat_arrays(evaluate(_shape_module(BinaryKind.SUB), "f", [x]))[0]
    bad = flat_arrays(evaluate(_shape_module(BinaryKind.ADD), "f", [x]))[0]
    assert not np.array_equal(good.view(np.uint32), bad.view(np.uint32))
