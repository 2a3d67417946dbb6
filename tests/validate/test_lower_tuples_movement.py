"""The ``lower`` pass on programs with tuple results and data movement (D478): proved valid when
the lowering is right; a planted miscompilation behind a transpose / concat is invalid, with a
counterexample the reference evaluator confirms output by output."""

from __future__ import annotations

import numpy as np

from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
from tilefoundry.semantics.dsl import parse_module
from tilefoundry.validate.passes import validate_program
from tilefoundry.validate.planted import plant
from tilefoundry.validate.refine import check_lowering

SRC = '''
@func
def f(a: Tensor[(2, 3), bf16], b: Tensor[(3, 2), bf16]):
    t = transpose(a, (1, 0))
    return (t - b, reshape(concat((a, a), 0), (3, 4)))

module(f)
'''


def test_lower_of_a_tuple_result_with_data_movement_is_valid():
    rep = validate_program(parse_module(SRC), "f")
    assert rep.status("lower") == "valid", rep.text()
    assert rep.status("fuse") == "valid", rep.text()


def test_a_swapped_subtraction_behind_a_transpose_is_invalid_and_replays():
    m = parse_module(SRC)
    st = State(m, "f", [(2, 3), (3, 2)], TARGETS["interp"])
    run_passes(st, ["typeinfer", "elaborate", "canonicalize", "lower"])
    bad = plant("swap_operands", st.program)
    assert bad is not None
    out = check_lowering(m, "f", st.hir, bad, timeout_ms=10_000)
    assert out.status == "invalid", out.reason
    cex = out.counterexample
    assert cex is not None and cex.differing
    # the differing elements are in the first result (t - b); the reshape of the concat agrees
    first = bad.output_names()[0]
    assert all(d.startswith(first + "[") for d in cex.differing), cex.differing
    ref = cex.src[f"reference {first}"]
    got = cex.tgt[first]
    assert not np.array_equal(ref.view(np.uint16), got.view(np.uint16))


def test_rank_0_data_movement_is_encoded_not_crashed():
    """A movement op with a rank-0 result (``insert_slice`` of a scalar into a scalar): the
    index map is a 0-d array, and indexing the flat terms with it picked the term itself, so
    flattening the result crashed the validator (``program/cover/246``, TypeError 'BoolRef'
    object is not iterable). Now a 0-d array of terms: proved valid."""
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ir import Call, Function, Module, Var
    from tilefoundry.semantics.ops import InsertSlice
    from tilefoundry.semantics.types import TensorType

    for dt in (DType.BOOL, DType.F32):
        x = Var("x", TensorType((), dt))
        m = Module((Function("f", (x,), Call(InsertSlice(), (x, x)), None),))
        rep = validate_program(m, "f")
        assert rep.status("lower") == "valid", rep.text()
