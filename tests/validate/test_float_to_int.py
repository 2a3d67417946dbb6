"""Float -> integer casts in the validator (D526).

docs/contracts.md, "Float -> integer": "truncates toward zero. NaN, ±inf and out-of-range
sources are **unspecified**: the oracle accepts any value in those elements ... the reference
writes 0 there ... Sources in (−1, 0) are in range for unsigned targets (they truncate to 0)."

* agreement of the encoding with the reference evaluator (HIR) and of the lowered kernel with
  kernel-interp on every float source × integer destination, on the sources' special values,
  seeded random bit patterns and the range edges (an unspecified element compared as the 0 both
  write);
* the landed lowering is ``valid``;
* the source's unspecified elements are universal: a lowering that writes something else there
  (through i32 then wrapped to i8) is ``valid``, one that differs on an in-range element (u8
  through i8, rounding instead of truncation) is ``invalid`` with a counterexample on which the
  reference and the wrong program differ.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler.interp import run_program
from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.ir import Call, Constant, Function, Module, Var
from tilefoundry.semantics.ops import Binary, BinaryKind, Cast
from tilefoundry.semantics.types import TensorType
from tilefoundry.validate.agree import agreement, agreement_hir
from tilefoundry.validate.refine import TARGET_UNSPECIFIED, check_lowering, flat_arrays

from .helpers import lowered, module_of, values

FLOATS = [DType.F32, DType.F16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2, DType.F8E8M0]
INTS = [DType.I8, DType.U8, DType.I32, DType.I64]  # no Cast to u32 (D216)
F32 = DType.F32
#: the range edges of every destination, as f32 (each side of each limit, (-1, 0), ±0)
EDGES = np.array([127.9, 128.0, -128.9, -129.0, 255.5, 256.0, -0.5, -0.0, 0.0, -1.0,
                  2.0 ** 31 - 128, 2.0 ** 31, -(2.0 ** 31), -(2.0 ** 31) - 256, 2.0 ** 32 - 256,
                  2.0 ** 32, 2.0 ** 63 - 2.0 ** 39, 2.0 ** 63, -(2.0 ** 63),
                  -(2.0 ** 63) - 2.0 ** 40], np.float32)


def _stage(module: Module, shapes: list[tuple]) -> State:
    st = State(module, "f", shapes, TARGETS["interp"])
    return run_passes(st, ["typeinfer", "elaborate", "canonicalize", "lower"])


@pytest.mark.parametrize("src", FLOATS, ids=str)
@pytest.mark.parametrize("to", INTS, ids=str)
def test_float_to_int_agrees_with_the_reference(src, to):
    m = module_of(Cast(to), [src], [(4, 4)])
    for seed in (1, 2):
        x = values(src, 16, seed).reshape(4, 4)
        assert agreement_hir(m, "f", [x]) == []
        assert agreement(lowered(m, [(4, 4)]), [x]) == []


@pytest.mark.parametrize("to", INTS, ids=str)
def test_float_to_int_agrees_at_the_range_edges(to):
    m = module_of(Cast(to), [F32], [(4, 5)])
    x = EDGES.reshape(4, 5)
    assert agreement_hir(m, "f", [x]) == []
    assert agreement(lowered(m, [(4, 5)]), [x]) == []


@pytest.mark.parametrize("src,to", [(F32, DType.I32), (DType.BF16, DType.U8),
                                    (DType.FP8E4M3, DType.I64), (DType.F8E8M0, DType.I8)],
                         ids=str)
def test_landed_lowering_of_float_to_int_is_valid(src, to):
    m = module_of(Cast(to), [src], [(2, 3)])
    st = _stage(m, [(2, 3)])
    out = check_lowering(m, "f", st.hir, st.program, timeout_ms=20_000)
    assert out.status == "valid", (out.status, out.reason)


def _chain(src: DType, *dts: DType, add: float | None = None) -> Module:
    """f(x) = cast to dts[-1] of ... cast to dts[0] of (x [+ add])."""
    x = Var("a0", TensorType((1, 4), src))
    e = x
    if add is not None:
        e = Call(Binary(BinaryKind.ADD), (e, Constant(np.full((1, 4), add, np.float32))))
    for dt in dts:
        e = Call(Cast(dt), (e,))
    return Module((Function("f", (x,), e, None),))


def _same(a, b) -> bool:
    return np.array_equal(np.asarray(a), np.asarray(b))


def test_unspecified_source_elements_admit_any_target_value():
    """f32 -> i8 lowered through i32 and wrapped: equal on the source's in-range elements,
    something other than 0 on many out-of-range ones (300 -> 44). Valid only because the
    source's unspecified element is universal (an existential one would give a model)."""
    m = module_of(Cast(DType.I8), [F32], [(1, 4)])
    through = _stage(_chain(F32, DType.I32, DType.I8), [(1, 4)]).program
    out = check_lowering(m, "f", _stage(m, [(1, 4)]).hir, through, timeout_ms=20_000)
    assert out.status == "valid", (out.status, out.reason)
    # the target's own unspecified elements (i32 out of range) are taken as 0: named
    assert TARGET_UNSPECIFIED in out.abstractions
    x = np.array([[300.0, -200.0, 5.9, -7.9]], np.float32)
    assert run_program(through, [x]).tolist() == [[44, 56, 5, -7]]


@pytest.mark.parametrize("wrong,why", [
    (_chain(F32, DType.I8, DType.U8), "u8 through i8: 128..255 are in range for u8"),
    (_chain(F32, DType.U8, add=0.5), "rounded to nearest instead of truncated"),
], ids=["u8-through-i8", "rounded"])
def test_a_wrong_float_to_int_lowering_is_invalid_and_replays(wrong, why):
    m = module_of(Cast(DType.U8), [F32], [(1, 4)])
    bad = _stage(wrong, [(1, 4)]).program
    good = _stage(m, [(1, 4)])
    out = check_lowering(m, "f", good.hir, bad, timeout_ms=20_000)
    assert out.status == "invalid", (why, out.status, out.reason)
    inputs = [out.counterexample.inputs[n] for n in bad.inputs]
    ref = flat_arrays(evaluate(m, "f", inputs))[0]
    assert not _same(ref, run_program(bad, inputs)), out.counterexample.text()
    assert _same(ref, run_program(good.program, inputs))
    # the differing element is in range: the reference's value there is specified
    from tilefoundry.semantics.dtypes import cast_ex
    spec = ~cast_ex(inputs[0], DType.U8).unspecified
    assert np.any(spec & (np.asarray(ref) != run_program(bad, inputs)))


@pytest.mark.parametrize("src", FLOATS, ids=str)
def test_saturating_cast_to_f32_agrees_with_the_reference(src):
    """docs/contracts.md: under ``saturate`` "finite overflow and ±inf clamp to ±max finite";
    to f32 that is ±inf -> ±3.4028235e38 (an f32 -> f32 cast included: program/cover/662)."""
    m = module_of(Cast(F32, "saturate"), [src], [(4, 4)])
    for seed in (1, 2):
        x = values(src, 16, seed).reshape(4, 4)
        assert agreement_hir(m, "f", [x]) == []
        assert agreement(lowered(m, [(4, 4)]), [x]) == []
    if src is F32:
        st = _stage(m, [(4, 4)])
        out = check_lowering(m, "f", st.hir, st.program, timeout_ms=20_000)
        assert out.status == "valid", (out.status, out.reason)



# integer -> narrow float under every mode (D532): one rounding from the exact integer
_INT_CASTS = [(src, to, ov, rd) for src in (DType.I32, DType.I64)
              for to in (DType.F8E8M0, DType.FP8E4M3, DType.FP8E5M2, DType.BF16, DType.F16,
                         DType.F32)
              for ov in ("nonfinite", "saturate")
              for rd in (("nearest", "up", "down") if to is DType.F8E8M0 else ("nearest",))]
#: integers next to the narrow formats' rounding boundaries: ties of bf16 / f16 / fp8 at
#: several exponents, 2^24 + 1 (inexact in f32, the double-rounding case), the largest values
_INT_EDGES = [0, 1, -1, 3, 5, 6, 7, 9, 17, 19, 257, 259, 2049, 2051, 65504, 65520, 65536,
              57344, 61440, 448, 464, 480, 2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 24) - 1,
              2 ** 31 - 1, -(2 ** 31), 2 ** 25 + 2 ** 17 + 1, 2 ** 20 + 2 ** 12 + 1, 2 ** 30 + 1]


@pytest.mark.parametrize("src,to,ov,rd", _INT_CASTS, ids=str)
def test_integer_to_narrow_float_agrees_with_the_reference(src, to, ov, rd):
    m = module_of(Cast(to, ov, rd), [src], [(4, 8)])
    edges = np.array(_INT_EDGES + [v + 1 for v in _INT_EDGES[:2]], np.int64)
    x = edges.astype(src.storage).reshape(4, 8)
    assert agreement_hir(m, "f", [x]) == []
    assert agreement(lowered(m, [(4, 8)]), [x]) == []
    r = values(src, 32, 3).reshape(4, 8)
    assert agreement_hir(m, "f", [r]) == []


def test_a_universal_value_inside_arithmetic_keeps_its_quantifier():
    """``_differs_from_all`` outside the ``If`` rule: ``u + 1`` can equal 5 (no difference for
    every ``u``: unsat), ``u·0 + 1`` differs from 2 whatever ``u`` is (sat)."""
    import z3

    from tilefoundry.validate.refine import _differs_from_all, solve

    u = z3.BitVec("unspecified.t", 32)
    univ, names = {str(u): u}, frozenset({str(u)})
    d = _differs_from_all(u + 1, z3.BitVecVal(5, 32), univ, names, {})
    assert z3.is_quantifier(d) and solve([d], 5_000)[0] == z3.unsat
    d = _differs_from_all(u * 0 + 1, z3.BitVecVal(2, 32), univ, names, {})
    assert solve([d], 5_000)[0] == z3.sat
    c = z3.Bool("c")  # an If on a condition free of u: the quantifier taken out
    d = _differs_from_all(z3.If(c, z3.BitVecVal(3, 32), u), z3.BitVecVal(4, 32), univ, names, {})
    assert not z3.is_quantifier(d) and solve([d], 5_000)[0] == z3.sat
