"""HIR encodings added for the ``lower`` check (D522, D523): ``Bitcast`` (bit-exact, NaN payloads
included), ``MatMul`` with batch dimensions, bool max / min scans and seeded / masked reductions,
the nn activations (one uninterpreted ``math`` function each), ``SoftMax`` (its contract's
formula over an uninterpreted f64 ``exp``) and casts from bool / 8-bit integers to any float
dtype (the reference's table of the source's values):

* agreement with the reference evaluator (HIR side, ``agreement_hir``; the math functions'
  applications to literals replaced by their real values, ``agree.concrete_math``) and of the
  lowered kernels with kernel-interp, on special values and seeded random bit patterns;
* the landed lowering proved ``valid``;
* wrong lowerings (a NaN canonicalized before a bitcast, a bitcast that loses the sign bit,
  every batch multiplied by b's first batch, all for any, a swapped activation, an f8e8m0
  cast rounded down for up) are
  ``invalid`` with a counterexample on which the reference and the wrong program differ;
  softmax over the wrong axis is never ``valid`` (its model is an f64 division Z3 does not
  find in time); a lowering that differs only within the ULP contract (softmax in f32 for
  bf16, ``narrow_f32``) is never ``invalid``.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler.interp import run_program
from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.ir import Call, Constant, Function, Module, Var
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Conv2D,
    Gelu,
    MaskedReduce,
    MaskedScan,
    MatMul,
    Scan,
    SeededReduce,
    SegmentedScan,
    Sigmoid,
    Silu,
    SoftMax,
    Tanh,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.ops.tensor import Slice, Zeros
from tilefoundry.semantics.ops.tile_select import Bitcast, Select
from tilefoundry.semantics.types import TensorType
from tilefoundry.validate.agree import agreement, agreement_hir
from tilefoundry.validate.passes import validate_program
from tilefoundry.validate.refine import check_lowering, flat_arrays

from .helpers import lowered, module_of, values

F32, BF16, F16, E4M3, E5M2, I32, U32, BOOL = (DType.F32, DType.BF16, DType.F16, DType.FP8E4M3,
                                              DType.FP8E5M2, DType.I32, DType.U32, DType.BOOL)
#: f32 NaNs of several payloads and both signs, a signalling one first
NANS = np.array([0x7F800001, 0xFFC00001, 0x7FBFFFFF, 0x7FC00000, 0xFFFFFFFF], np.uint32)


def _stage(module: Module, shapes: list[tuple], cfg: TileConfig | None = None) -> State:
    st = State(module, "f", shapes, TARGETS["interp"], cfg or TileConfig())
    return run_passes(st, ["typeinfer", "elaborate", "canonicalize", "lower"])


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iub":
        return np.array_equal(a, b)
    with np.errstate(invalid="ignore"):
        wa, wb = a.astype(np.float64), b.astype(np.float64)
    return bool(np.all((a.view(f"u{a.itemsize}") == b.view(f"u{b.itemsize}")) |
                       (np.isnan(wa) & np.isnan(wb))))


def _invalid_replays(module: Module, shapes: list[tuple], wrong: Module, *,
                     timeout_ms: int = 20_000) -> None:
    """``wrong`` (the same signature) lowered is checked as a lowering of ``module``: invalid,
    and on its counterexample the reference and the wrong program differ while the landed
    lowering matches the reference."""
    good = _stage(module, shapes)
    bad = _stage(wrong, shapes).program
    out = check_lowering(module, "f", good.hir, bad, timeout_ms=timeout_ms)
    assert out.status == "invalid", (out.status, out.reason)
    cex = out.counterexample
    assert cex is not None and cex.differing
    inputs = [cex.inputs[n] for n in bad.inputs]
    ref = flat_arrays(evaluate(module, "f", inputs))
    got = run_program(bad, inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    fine = run_program(good.program, inputs)
    fine = list(fine) if isinstance(fine, tuple) else [fine]
    assert not all(_same(r, g) for r, g in zip(ref, got, strict=True)), cex.text()
    assert all(_same(r, g) for r, g in zip(ref, fine, strict=True)), cex.text()


def _fn(params: tuple, body) -> Module:
    return Module((Function("f", params, body, None),))


# ---------------------------------------------------------------------------------------------
# Bitcast
# ---------------------------------------------------------------------------------------------
def _f32_with_nans(seed: int) -> np.ndarray:
    x = values(F32, 15, seed)
    x.view(np.uint32)[:NANS.size] = NANS
    return x.reshape(3, 5)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bitcast_f32_to_u32_keeps_nan_payloads(seed):
    m = module_of(Bitcast(U32), [F32], [(3, 5)])
    x = _f32_with_nans(seed)
    assert agreement_hir(m, "f", [x]) == []
    assert agreement(lowered(m, [(3, 5)]), [x], variables=True) == []


@pytest.mark.parametrize("seed", [1, 2])
def test_bitcast_round_trip_and_select_keep_bits(seed):
    """u32 -> f32 -> (select) -> u32 gives back the very bits, NaN payloads included."""
    u, c = Var("u", TensorType((3, 5), U32)), Var("c", TensorType((3, 5), BOOL))
    f = Call(Bitcast(F32), (u,))
    m = _fn((u, c), Call(Bitcast(U32), (Call(Select(), (c, f, Call(Bitcast(F32), (u,)))),)))
    bits = values(U32, 15, seed).reshape(3, 5)
    bits.reshape(-1)[:NANS.size] = NANS
    cond = values(BOOL, 15, seed + 7).reshape(3, 5)
    assert agreement_hir(m, "f", [bits, cond]) == []
    rep = validate_program(m, "f", [(3, 5), (3, 5)])
    for p in ("elaborate", "lower", "fuse", "schedule"):
        assert rep.status(p) == "valid", rep.text()


def test_lower_of_bitcast_is_valid_without_abstraction():
    rep = validate_program(module_of(Bitcast(U32), [F32], [(4, 4)]), "f", [(4, 4)])
    out = next(p.outcome for p in rep.passes if p.name == "lower")
    assert out.status == "valid", rep.text()
    assert not any("bitcast" in a for a in out.abstractions)


def test_a_nan_canonicalized_before_a_bitcast_is_invalid_and_replays():
    """The lowering quiets every NaN first (``x != x ? qNaN : x``): only a NaN payload shows
    the difference (a NaN-as-a-class encoding of the bitcast would call this valid)."""
    x = Var("a0", TensorType((1, 4), F32))
    m = module_of(Bitcast(U32), [F32], [(1, 4)])
    q = Constant(np.full((1, 4), np.float32(np.nan)))
    wrong = _fn((x,), Call(Bitcast(U32), (Call(Select(), (
        Call(Binary(BinaryKind.NE), (x, x)), q, x)),)))
    _invalid_replays(m, [(1, 4)], wrong)


def test_a_bitcast_that_loses_the_sign_bit_is_invalid_and_replays():
    x = Var("a0", TensorType((1, 4), F32))
    m = module_of(Bitcast(U32), [F32], [(1, 4)])
    wrong = _fn((x,), Call(Bitcast(U32), (Call(Unary(UnaryKind.ABS), (x,)),)))
    _invalid_replays(m, [(1, 4)], wrong)


# ---------------------------------------------------------------------------------------------
# MatMul with batch dimensions
# ---------------------------------------------------------------------------------------------
BATCHED = [((2, 2, 3), (2, 3, 2)), ((2, 1, 2, 2), (3, 2, 2)), ((3, 2, 2), (2, 2)),
           ((2, 3), (2, 3, 2))]


@pytest.mark.parametrize("dt", [F32, BF16, E4M3, I32], ids=str)
@pytest.mark.parametrize("sa,sb", BATCHED, ids=str)
def test_batched_matmul_agrees_and_lowers_valid(dt, sa, sb):
    m = module_of(MatMul(), [dt, dt], [sa, sb])
    for seed in (1, 2):
        a = values(dt, int(np.prod(sa)), seed).reshape(sa)
        b = values(dt, int(np.prod(sb)), seed + 10).reshape(sb)
        assert agreement_hir(m, "f", [a, b]) == []
    rep = validate_program(m, "f", [sa, sb])
    assert rep.status("lower") == "valid", rep.text()


def test_every_batch_times_the_first_b_is_invalid_and_replays():
    """b's batch stride lost: each batch of a multiplied by b's first batch."""
    sa, sb = (2, 2, 2), (2, 2, 2)
    a, b = Var("a0", TensorType(sa, F32)), Var("a1", TensorType(sb, F32))
    m = module_of(MatMul(), [F32, F32], [sa, sb])
    wrong = _fn((a, b), Call(MatMul(), (a, Call(Slice((0, 0, 0), (1, 2, 2)), (b,)))))
    _invalid_replays(m, [sa, sb], wrong)


# ---------------------------------------------------------------------------------------------
# bool max / min: scans, seeded and masked reductions
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("combine", ["max", "min"])
@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize("seed", [None, 0, 1])
def test_bool_scans_agree_with_the_reference(combine, inclusive, seed):
    x, f = values(BOOL, 15, 3).reshape(3, 5), values(BOOL, 15, 4).reshape(3, 5)
    for op in (Scan(-1, combine, inclusive, seed, "fold_left"),
               Scan(0, combine, inclusive, seed, "ordered_tree")):
        assert agreement_hir(module_of(op, [BOOL], [(3, 5)]), "f", [x]) == []
    for cls in (MaskedScan, SegmentedScan):
        m = module_of(cls(-1, combine, inclusive, seed), [BOOL, BOOL], [(3, 5), (3, 5)])
        assert agreement_hir(m, "f", [x, f]) == []


@pytest.mark.parametrize("kind", ["max", "min"])
def test_bool_seeded_and_masked_reduces_agree_and_lower_valid(kind):
    x, f = values(BOOL, 15, 5).reshape(3, 5), values(BOOL, 15, 6).reshape(3, 5)
    s = np.array([[True], [False], [True]])
    masked = module_of(MaskedReduce((1,), kind, "fold_left"), [BOOL, BOOL, BOOL],
                       [(3, 5), (3, 1), (3, 5)])
    seeded = module_of(SeededReduce((1,), kind), [BOOL, BOOL], [(3, 5), (3, 1)])
    assert agreement_hir(masked, "f", [x, s, f]) == []
    assert agreement_hir(seeded, "f", [x, s]) == []
    for m, shapes in ((masked, [(3, 5), (3, 1), (3, 5)]), (seeded, [(3, 5), (3, 1)])):
        rep = validate_program(m, "f", shapes)
        assert rep.status("lower") == "valid", rep.text()


@pytest.mark.parametrize("cls", [Scan, MaskedScan, SegmentedScan])
def test_bool_scans_lower_valid(cls):
    shapes = [(3, 5)] if cls is Scan else [(3, 5), (3, 5)]
    m = module_of(cls(-1, "max", True, None), [BOOL] * len(shapes), shapes)
    rep = validate_program(m, "f", shapes)
    for p in ("elaborate", "lower", "fuse", "schedule"):
        assert rep.status(p) == "valid", rep.text()


def test_all_for_any_in_a_bool_scan_is_invalid_and_replays():
    m = module_of(MaskedScan(-1, "max", True, None), [BOOL, BOOL], [(2, 4), (2, 4)])
    wrong = module_of(MaskedScan(-1, "min", True, None), [BOOL, BOOL], [(2, 4), (2, 4)])
    _invalid_replays(m, [(2, 4), (2, 4)], wrong)


# ---------------------------------------------------------------------------------------------
# nn ops with a ULP contract: activations (one math function) and SoftMax (its formula)
# ---------------------------------------------------------------------------------------------
NN = [Sigmoid(), Tanh(), Silu(), Gelu("tanh"), Gelu("none"), SoftMax(-1), SoftMax(0)]


@pytest.mark.parametrize("op", NN, ids=repr)
@pytest.mark.parametrize("dt", [F32, BF16, F16, E4M3, E5M2], ids=str)
def test_nn_ops_agree_with_the_reference(op, dt):
    m = module_of(op, [dt], [(3, 4)])
    p = lowered(m, [(3, 4)])
    for seed in (1, 2):
        x = values(dt, 12, seed).reshape(3, 4)
        assert agreement_hir(m, "f", [x]) == []
        assert agreement(p, [x]) == []


@pytest.mark.parametrize("op", NN, ids=repr)
@pytest.mark.parametrize("dt", [F32, BF16, E4M3], ids=str)
def test_lower_of_nn_ops_is_valid(op, dt):
    rep = validate_program(module_of(op, [dt], [(2, 4)]), "f", [(2, 4)])
    for p in ("elaborate", "lower", "fuse", "schedule"):
        assert rep.status(p) == "valid", rep.text()
    out = next(p.outcome for p in rep.passes if p.name == "lower")
    assert any(a.startswith("math.") for a in out.abstractions)  # the limit is named


def test_softmax_of_f8e8m0_is_unsupported_with_its_reason():
    rep = validate_program(module_of(SoftMax(-1), [DType.F8E8M0], [(2, 4)]), "f", [(2, 4)])
    out = next(p.outcome for p in rep.passes if p.name == "lower")
    assert out.status == "unsupported" and "f8e8m0" in out.reason


def test_a_swapped_activation_is_invalid_and_replays():
    _invalid_replays(module_of(Sigmoid(), [F32], [(1, 4)]), [(1, 4)],
                     module_of(Silu(), [F32], [(1, 4)]))


def test_softmax_over_the_wrong_axis_is_never_valid():
    """A formula change the encoding sees (every quotient e/e = 1 instead of e_i / S); its
    model needs an f64 division under free exp values, which Z3 does not find within seconds
    (20 s measured), so the outcome is "failed to prove" — never valid (docs/validate.md)."""
    m = module_of(SoftMax(-1), [F32], [(1, 2)])
    good = _stage(m, [(1, 2)])
    bad = _stage(module_of(SoftMax(0), [F32], [(1, 2)]), [(1, 2)]).program
    out = check_lowering(m, "f", good.hir, bad, timeout_ms=2_000)
    assert out.status in ("invalid", "failed to prove"), (out.status, out.reason)


def test_softmax_within_its_ulp_contract_is_never_invalid():
    """The bf16 lowering in f32 (``narrow_f32``: e·(1/S), D279) is another formula, within the
    1-ulp contract: not provable against the f64 formula, so "failed to prove" (a timeout, or
    a counterexample judged within the contract: the next test) — never invalid."""
    m = module_of(SoftMax(-1), [BF16], [(1, 4)])
    good = _stage(m, [(1, 4)])
    narrow = _stage(m, [(1, 4)], TileConfig(narrow_f32=True)).program
    assert narrow != good.program
    out = check_lowering(m, "f", good.hir, narrow, timeout_ms=3_000)
    assert out.status == "failed to prove", (out.status, out.reason)


def test_a_replay_within_the_ulp_contract_is_no_proof_of_a_bug():
    """``judge_by_contract``: SoftMax outputs one ulp from the reference (bf16: budget 1) are
    judged by the contract, not bit for bit — no differing element, a note; outputs far off
    stay differing (the oracle rejects them)."""
    from tilefoundry.semantics.dtypes import from_bits, to_bits
    from tilefoundry.validate.refine import judge_by_contract

    m = module_of(SoftMax(-1), [BF16], [(2, 4)])
    x = values(BF16, 8, 5).reshape(2, 4)
    x = np.where(np.isfinite(x.astype(np.float32)), x, np.asarray(0.5, x.dtype))
    ref = np.asarray(evaluate(m, "f", [x]))
    near = from_bits(to_bits(ref) + np.uint16(1), BF16)  # one ulp up: within the budget
    diff = [f"t[{i}]" for i in range(ref.size)]
    kept, note = judge_by_contract(m, "f", [x], [near], diff, ["SoftMax"])
    assert kept == [] and "SoftMax" in note
    far = from_bits(to_bits(ref) ^ np.uint16(0x4000), BF16)  # exponents flipped
    kept, note = judge_by_contract(m, "f", [x], [far], diff, ["SoftMax"])
    assert kept == diff and note == ""
    assert judge_by_contract(m, "f", [x], [near], diff, []) == (diff, "")


# ---------------------------------------------------------------------------------------------
# casts from a source of at most 256 values (bool, 8-bit integers) to any float dtype
# ---------------------------------------------------------------------------------------------
_SMALL_CASTS = [(src, to, ov, rd) for src in (BOOL, DType.U8, DType.I8)
                for to in (DType.F8E8M0, E4M3, E5M2, BF16, F16, F32)
                for ov in ("nonfinite", "saturate")
                for rd in (("nearest", "up", "down") if to is DType.F8E8M0 else ("nearest",))]


@pytest.mark.parametrize("src,to,ov,rd", _SMALL_CASTS, ids=str)
def test_small_source_casts_agree_with_the_reference(src, to, ov, rd):
    from tilefoundry.semantics.ops import Cast

    m = module_of(Cast(to, ov, rd), [src], [(4, 4)])
    x = values(src, 16, 3).reshape(4, 4)
    assert agreement_hir(m, "f", [x]) == []
    assert agreement(lowered(m, [(4, 4)]), [x]) == []


def test_a_cast_rounded_down_for_up_is_invalid_and_replays():
    from tilefoundry.semantics.ops import Cast

    m = module_of(Cast(DType.F8E8M0, "saturate", "up"), [DType.U8], [(1, 4)])
    wrong = module_of(Cast(DType.F8E8M0, "saturate", "down"), [DType.U8], [(1, 4)])
    _invalid_replays(m, [(1, 4)], wrong)



# ---------------------------------------------------------------------------------------------
# Conv2D (the reference's im2col operands on positions, the K-order fold, one rounding)
# ---------------------------------------------------------------------------------------------
CONVS = [  # (op, x shape, weight shape)
    (Conv2D(), (1, 1, 3, 3), (2, 1, 2, 2)),
    (Conv2D(stride=(2, 1), padding=(1, 0)), (1, 2, 3, 2), (2, 2, 2, 1)),
    (Conv2D(dilation=(1, 2), padding=(0, 1), groups=2), (1, 2, 2, 3), (2, 1, 1, 2))]


@pytest.mark.parametrize("dt", [F32, BF16, E4M3], ids=str)
@pytest.mark.parametrize("op,sx,sw", CONVS, ids=repr)
def test_conv2d_agrees_with_the_reference(op, sx, sw, dt):
    """Padding (+0 lanes that take part: +0·w is -0 for a negative w, NaN for an infinite one),
    stride, dilation and groups through the reference's own im2col."""
    m = module_of(op, [dt, dt, dt], [sx, sw, (sw[0],)])
    for seed in (1, 2):
        xs = [values(dt, int(np.prod(s)), seed + k).reshape(s)
              for k, s in enumerate((sx, sw, (sw[0],)))]
        assert agreement_hir(m, "f", xs) == []


def test_conv2d_lowers_valid_and_a_dropped_bias_is_invalid():
    """The direct convolution of the lowering proved against the im2col fold; the same
    convolution with the bias left out (a zero bias) is invalid, with a replaying
    counterexample."""
    op, sx, sw = CONVS[0]
    shapes = [sx, sw, (sw[0],)]
    m = module_of(op, [F32, F32, F32], shapes)
    rep = validate_program(m, "f", shapes)
    assert rep.status("elaborate") == "valid" and rep.status("lower") == "valid", rep.text()
    x, w, b = (Var(n, TensorType(s, F32)) for n, s in zip("xwb", shapes, strict=True))
    zero = Call(Zeros((sw[0],), F32), ())
    wrong = _fn((x, w, b), Call(op, (x, w, zero)))
    _invalid_replays(m, shapes, wrong)


def test_the_zero_seed_lemma_of_the_conv2d_encoding_holds():
    """``hir_nn.ZERO_SEED_LEMMA``, the induction step that lets the Conv2D encoding write the
    fold from +0 as a fold from its first product plus +0: ``(s + +0) + p == (s + p) + +0``
    for all f32 s, p (RNE), NaN as a class. Proved by Z3 as three facts (the whole formula
    takes it ~20 s): (a) s = -0: directly; (b) ``s + +0 == s`` unless s is -0, so for s not -0
    the left side is ``s + p``; (c) ``s + p`` is -0 only when both are -0, so for s not -0,
    (b) applied to ``s + p`` makes the right side ``s + p`` too. The base case ``+0 + p0 ==
    p0 + +0`` is commutativity (checked as well); a -0 seed is not the same (-0 + -0 is -0)."""
    import z3

    f, rm = z3.Float32(), z3.RNE()
    s, p = z3.FP("s", f), z3.FP("p", f)
    zero = z3.FPVal(0.0, f)

    def same(a, b):
        return z3.Or(a == b, z3.And(z3.fpIsNaN(a), z3.fpIsNaN(b)))

    def negz(x):
        return z3.And(z3.fpIsZero(x), z3.fpIsNegative(x))

    def proved(fact) -> bool:
        solver = z3.Solver()
        solver.add(z3.Not(fact))
        return solver.check() == z3.unsat

    step = same(z3.fpAdd(rm, z3.fpAdd(rm, s, zero), p), z3.fpAdd(rm, z3.fpAdd(rm, s, p), zero))
    assert proved(z3.Implies(negz(s), step))  # (a)
    assert proved(z3.Implies(z3.Not(negz(s)), same(z3.fpAdd(rm, s, zero), s)))  # (b)
    assert proved(z3.Implies(negz(z3.fpAdd(rm, s, p)), z3.And(negz(s), negz(p))))  # (c)
    assert proved(same(z3.fpAdd(rm, zero, p), z3.fpAdd(rm, p, zero)))  # the base case
    assert not proved(same(z3.fpAdd(rm, z3.FPVal(-0.0, f), p), z3.fpAdd(rm, p, zero)))
