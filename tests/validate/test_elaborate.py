"""The ``elaborate`` pass validated (D479): the typed entry read with the reference evaluator's
call / dispatch / DimVar semantics against the elaborated Function — valid for the landed
elaborator on nested calls and a dispatch prototype; invalid, with a counterexample the
reference confirms, when the elaborator selects the wrong variant."""

from __future__ import annotations

import numpy as np

import tilefoundry.compiler.hir_passes as hp
from tilefoundry.semantics.dsl import DimVar, DimVarRangePat, Tensor, f32, func, module
from tilefoundry.validate.elaborate import check_elaboration
from tilefoundry.validate.passes import validate_program

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
