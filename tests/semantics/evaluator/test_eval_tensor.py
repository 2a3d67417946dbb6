"""Structural tensor evaluator implementations (semantics/evaluator/tensor.py).

Reshape / Transpose / Slice / Concat / Stack are cross-checked bit-exactly against torch CPU on
random shapes and random bit patterns (bf16, f32, i32; NaN payloads included: these ops move
bits, they never compute). torch is judged, never trusted (issue 14): the same op done by numpy
on the operands' raw bits (unsigned-integer views, independent of torch and of the evaluator)
is the model. Our result must have the model's shape and dtype; where torch and the evaluator
differ, the model decides — ours wrong fails, torch wrong is a finding in ``peers.FINDINGS``
(keyed by torch's version and CPU capability and the torch call), not a failure. The planted
meta-tests show a wrong evaluator result still fails. Cast is checked against ``dtypes.cast``
(the bit-exact contract) on planted cases; Zeros on its ``+0`` bit patterns and on its decided
errors.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tilefoundry.conformance import peers
from tilefoundry.errors import UnsupportedDTypeError
from tilefoundry.semantics.dtypes import DType, cast, cast_ex, dtype_of, to_bits
from tilefoundry.semantics.evaluator import tensor as _tensor_impls  # noqa: F401  (registers)
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx, EvaluationError
from tilefoundry.semantics.ir import Call, Var
from tilefoundry.semantics.ops.tensor import (
    Cast,
    Concat,
    Rank,
    Reshape,
    ShapeOf,
    Slice,
    Stack,
    Transpose,
    Zeros,
)
from tilefoundry.semantics.typeinfer import infer_expr
from tilefoundry.semantics.types import DimVar, TensorType

NP = {"f32": np.dtype(np.float32), "bf16": np.dtype(ml_dtypes.bfloat16),
      "i32": np.dtype(np.int32)}
BITS = {"f32": np.uint32, "bf16": np.uint16, "i32": np.uint32}
DTYPES = tuple(NP)


# ---------------------------------------------------------------------------------------------
# harness
# ---------------------------------------------------------------------------------------------
def run(op, *args, out_type=None):
    """Infer the real type rule on concrete operand types, then call the implementation."""
    if out_type is None:
        vs = tuple(Var(f"x{i}", TensorType(tuple(a.shape), dtype_of(a)))
                   for i, a in enumerate(args))
        out_type = infer_expr(Call(op, vs))
    r = EVALUATORS[type(op)](EvalCtx(op, None, out_type), tuple(args))
    assert isinstance(r, np.ndarray) and r.flags.c_contiguous
    if isinstance(out_type, TensorType) and all(isinstance(d, int) for d in out_type.shape):
        assert r.shape == tuple(out_type.shape)
        assert dtype_of(r) is out_type.dtype
    return r


def to_torch(x: np.ndarray) -> torch.Tensor:
    x = np.array(x, copy=True, order="C")
    if x.dtype == NP["bf16"]:
        return torch.from_numpy(x.view(np.int16).reshape(-1).copy()).view(
            torch.bfloat16).reshape(list(x.shape))
    return torch.from_numpy(x.reshape(-1).copy()).reshape(list(x.shape))


def from_torch(t: torch.Tensor) -> np.ndarray:
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.reshape(-1).view(torch.int16).numpy().view(NP["bf16"]).reshape(tuple(t.shape))
    return t.numpy()


def raw(x: np.ndarray) -> np.ndarray:
    """The elements' bits as unsigned integers (a numpy view; shares no code with torch or the
    evaluator), any rank including 0."""
    x = np.array(x, copy=True, order="C")
    return x.view(f"u{x.dtype.itemsize}")


def judged(what: str, ours: np.ndarray, ref: torch.Tensor, model: np.ndarray, dtype: np.dtype,
           *, findings: peers.Findings | None = None) -> peers.Judgement:
    """Judge the evaluator's ``ours`` and torch's ``ref`` (the torch call ``what``) by
    ``model``, the op done by numpy on the operands' raw bits (operands of ``dtype``).

    Our shape and dtype must be the model's (these ops keep the operands' dtype). Where torch's bits differ from ours (or torch's
    shape or dtype is not the model's: every element), the model decides: an element of ours
    that is not the model's fails; torch wrong is recorded as a finding.
    """
    dt = dtype_of(ours)
    code_path = f"{what} (CPU) {dt}"
    assert ours.shape == model.shape, f"{what}: the evaluator's shape {ours.shape}, the " \
        f"model's {model.shape}"
    assert ours.dtype == dtype, f"{what}: the evaluator's dtype {ours.dtype}, the operands' " \
        f"{dtype}"
    mine = raw(ours).reshape(-1)
    want = model.reshape(-1)
    theirs = from_torch(ref)
    if theirs.shape != model.shape or theirs.dtype != dtype:
        disagree = np.ones(ours.shape, bool)  # torch delivered no conforming element
        klass = "wrong-shape-or-dtype"
    else:
        disagree = raw(theirs) != raw(ours)
        klass = "undocumented"
    j = peers.judge("torch", code_path, disagree, lambda idx: mine[idx] == want[idx],
                    klass=klass, findings=findings)
    j.assert_ours_right(f"{code_path}: the evaluator", show=lambda idx: str(
        [(int(i), hex(int(mine[i])), hex(int(want[i]))) for i in idx]))
    return j


@st.composite
def arrays(draw, dt=None, shape=None, min_side=0):
    dt = dt or draw(st.sampled_from(DTYPES))
    if shape is None:
        shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=min_side, max_side=5))
    bits = draw(hnp.arrays(BITS[dt], shape))
    return np.ascontiguousarray(bits).view(NP[dt])


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


# ---------------------------------------------------------------------------------------------
# torch cross-checks
# ---------------------------------------------------------------------------------------------
@given(st.data())
def test_reshape_matches_torch(data):
    x = data.draw(arrays(min_side=1))
    rem, new = x.size, []
    for _ in range(data.draw(st.integers(0, 3))):
        d = data.draw(st.sampled_from(_divisors(rem)))
        new.append(d)
        rem //= d
    new.append(rem)
    new = data.draw(st.permutations(new))
    judged("Tensor.reshape", run(Reshape(tuple(new)), x), to_torch(x).reshape(new),
           raw(x).reshape(new), x.dtype)


@given(st.data())
def test_transpose_matches_torch(data):
    x = data.draw(arrays())
    perm = tuple(data.draw(st.permutations(range(x.ndim))))
    if data.draw(st.booleans()):
        perm = tuple(p - x.ndim for p in perm)  # negative axes
    judged("Tensor.permute", run(Transpose(perm), x), to_torch(x).permute(perm),
           raw(x).transpose(perm), x.dtype)


@given(st.data())
def test_slice_matches_torch(data):
    x = data.draw(arrays())
    begin, end, steps = [], [], []
    for n in x.shape:
        begin.append(data.draw(st.integers(-n - 2, n + 2)))
        end.append(data.draw(st.integers(-n - 2, n + 2)))
        steps.append(data.draw(st.integers(1, 3)))
    strides = tuple(steps) if data.draw(st.booleans()) else None
    if strides is None:
        steps = [1] * x.ndim
    ours = run(Slice(tuple(begin), tuple(end), strides), x)
    idx = tuple(slice(b, e, t) for b, e, t in zip(begin, end, steps, strict=True))
    judged("Tensor slicing", ours, to_torch(x)[idx], raw(x)[idx], x.dtype)


@given(st.data())
def test_concat_matches_torch(data):
    dt = data.draw(st.sampled_from(DTYPES))
    base = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))
    axis = data.draw(st.integers(-len(base), len(base) - 1))
    xs = []
    for _ in range(data.draw(st.integers(1, 4))):
        shape = list(base)
        shape[axis] = data.draw(st.integers(0, 4))
        xs.append(data.draw(arrays(dt, tuple(shape))))
    judged("torch.cat", run(Concat(axis), *xs), torch.cat([to_torch(x) for x in xs], dim=axis),
           np.concatenate([raw(x) for x in xs], axis=axis), NP[dt])


@given(st.data())
def test_stack_matches_torch(data):
    dt = data.draw(st.sampled_from(DTYPES))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    xs = [data.draw(arrays(dt, shape)) for _ in range(data.draw(st.integers(1, 4)))]
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    judged("torch.stack", run(Stack(axis), *xs), torch.stack([to_torch(x) for x in xs], dim=axis),
           np.stack([raw(x) for x in xs], axis=axis), NP[dt])


# ---------------------------------------------------------------------------------------------
# planted errors: a wrong evaluator result fails; a wrong torch result is a finding
# ---------------------------------------------------------------------------------------------
def _planted_operand() -> np.ndarray:
    bits = np.array([[0x3F800000, 0x7FC00123, 0x80000000], [0xFF800000, 0x00000001, 0x40490FDB]],
                    np.uint32)
    return bits.view(np.float32)


@pytest.mark.parametrize("wrong", ["one-element", "nan-payload", "shape", "dtype"])
def test_planted_wrong_evaluator_result_fails(wrong):
    """Meta-test: the evaluator's Transpose made wrong — one element's bits, a NaN's payload
    (these ops move bits: a payload is part of the result), its shape or its dtype — while torch
    is right: the model convicts ours."""
    x = _planted_operand()
    ours = run(Transpose((1, 0)), x).copy()
    if wrong == "one-element":
        ours.view(np.uint32)[2, 1] ^= 1
    elif wrong == "nan-payload":
        ours.view(np.uint32)[1, 0] ^= 0x100  # still a NaN
        assert np.isnan(ours[1, 0])
    elif wrong == "shape":
        ours = np.ascontiguousarray(ours.reshape(2, 3))
    else:
        ours = ours.view(np.int32)
    match = {"shape": "the evaluator's shape", "dtype": "the evaluator's dtype"}.get(
        wrong, "reference is wrong on 1 element")
    with pytest.raises(AssertionError, match=match):
        judged("Tensor.permute", ours, to_torch(x).permute((1, 0)), raw(x).transpose((1, 0)),
               x.dtype, findings=peers.Findings())


def test_planted_wrong_torch_result_is_a_finding_not_a_failure():
    x = _planted_operand()
    theirs = to_torch(x).permute((1, 0)).contiguous().clone()
    theirs.view(torch.int32)[2, 1] ^= 1
    ledger = peers.Findings()
    j = judged("Tensor.permute", run(Transpose((1, 0)), x), theirs, raw(x).transpose((1, 0)),
               x.dtype, findings=ledger)
    assert j.disagreements == 1 and j.peer_wrong == 1 and j.ours_wrong.size == 0
    (key,) = ledger
    assert ledger[key] == 1 and key.klass == "undocumented"
    assert key.code_path == "Tensor.permute (CPU) f32"
    assert key.version == peers.peer_version_label("torch")
    # a torch result of the wrong shape: every element is torch's error, none ours
    ledger = peers.Findings()
    j = judged("Tensor.permute", run(Transpose((1, 0)), x), to_torch(x),
               raw(x).transpose((1, 0)), x.dtype, findings=ledger)
    assert j.peer_wrong == 6 and [k.klass for k in ledger] == ["wrong-shape-or-dtype"]


# ---------------------------------------------------------------------------------------------
# Reshape / Slice with symbolic dims
# ---------------------------------------------------------------------------------------------
N = DimVar("N", 1, 65)
M = DimVar("M", 1, 65)


def test_reshape_symbolic_dim_from_out_type_or_size():
    x = np.arange(24, dtype=np.int32).reshape(4, 6)
    op = Reshape((N, 3))
    r = run(op, x, out_type=TensorType((8, 3), DType.I32))
    np.testing.assert_array_equal(r, x.reshape(8, 3))
    # symbolic result type: the one unknown extent comes from the size
    r = run(op, x, out_type=TensorType((N, 3), DType.I32))
    np.testing.assert_array_equal(r, x.reshape(8, 3))
    with pytest.raises(EvaluationError, match="needs resolution"):
        run(Reshape((N, M)), x, out_type=TensorType((N, M), DType.I32))
    with pytest.raises(EvaluationError, match="needs resolution"):
        run(Reshape((N, 5)), x, out_type=TensorType((N, 5), DType.I32))  # 5 does not divide 24
    with pytest.raises(EvaluationError, match="needs resolution"):  # 0 * N: ambiguous
        run(Reshape((0, N)), np.zeros((0, 3), np.int32),
            out_type=TensorType((0, N), DType.I32))


def test_reshape_dimvar_bound_by_operand_type():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    xv = Var("x", TensorType((N, 4), DType.F32))
    call = Call(Reshape((4, N)), (xv,))
    t = infer_expr(call)
    r = EVALUATORS[Reshape](EvalCtx(call.op, call, t), (x,))
    np.testing.assert_array_equal(r, x.reshape(4, 3))


def test_slice_symbolic_end_bound_by_operand_type():
    x = np.arange(10, dtype=np.int32)
    xv = Var("x", TensorType((N,), DType.I32))
    call = Call(Slice((1,), (N,), (2,)), (xv,))
    t = infer_expr(call)
    r = EVALUATORS[Slice](EvalCtx(call.op, call, t), (x,))
    np.testing.assert_array_equal(r, x[1:10:2])
    with pytest.raises(EvaluationError, match="need resolution"):
        EVALUATORS[Slice](EvalCtx(call.op, None, t), (x,))


# ---------------------------------------------------------------------------------------------
# Cast
# ---------------------------------------------------------------------------------------------
F32_PLANTED = np.array([0.0, -0.0, 1.0, -1.5, 3.0e38, -3.0e38, 1.0e6, 448.0, 480.0, 1e-10,
                        0.1, 2.5, 3.5, np.inf, -np.inf, np.nan, 6.0e-8, 1.0e-45],
                       dtype=np.float32)


@pytest.mark.parametrize("dtype,overflow,rounding", [
    (DType.BF16, "nonfinite", "nearest"),
    (DType.F16, "nonfinite", "nearest"),
    (DType.F16, "saturate", "nearest"),
    (DType.FP8E4M3, "saturate", "nearest"),
    (DType.FP8E4M3, "nonfinite", "nearest"),
    (DType.FP8E5M2, "saturate", "nearest"),
    (DType.F8E8M0, "nonfinite", "up"),
    (DType.F8E8M0, "saturate", "down"),
    (DType.F8E8M0, "nonfinite", "nearest"),
    (DType.I32, "nonfinite", "nearest"),
    (DType.I8, "nonfinite", "nearest"),
])
def test_cast_equals_dtypes_cast(dtype, overflow, rounding):
    x = F32_PLANTED.reshape(3, 6)
    r = run(Cast(dtype, overflow, rounding), x)
    ref = cast(x, dtype, overflow=overflow, rounding=rounding)
    assert r.dtype == ref.dtype and r.shape == x.shape
    np.testing.assert_array_equal(to_bits(r), to_bits(ref))


def test_cast_planted_values():
    x = np.array([1.0e6, -1.0e6, np.inf], np.float32)
    sat = run(Cast(DType.FP8E4M3, "saturate"), x)
    np.testing.assert_array_equal(sat.astype(np.float32), [448.0, -448.0, 448.0])
    # f8e8m0 directed rounding: 3 lies between 2 and 4
    three = np.array([3.0], np.float32)
    assert float(run(Cast(DType.F8E8M0, rounding="up"), three)[0]) == 4.0
    assert float(run(Cast(DType.F8E8M0, rounding="down"), three)[0]) == 2.0
    # rank-0 and bf16 -> f32 widening
    b = np.array(1.5, NP["bf16"])
    r = run(Cast(DType.F32), b)
    assert r.shape == () and r.dtype == np.float32 and float(r) == 1.5
    # unspecified float -> int values: the reference writes what cast writes
    x = np.array([np.nan, 3.0e9, -3.0e9, 2.9], np.float32)
    res = cast_ex(x, DType.I32)
    assert res.unspecified[:3].all() and not res.unspecified[3]
    np.testing.assert_array_equal(run(Cast(DType.I32), x), res.values)


def test_cast_f4e2m1_unsupported():
    with pytest.raises(UnsupportedDTypeError):
        EVALUATORS[Cast](EvalCtx(Cast(DType.F4E2M1), None, None), (F32_PLANTED,))


# ---------------------------------------------------------------------------------------------
# Zeros
# ---------------------------------------------------------------------------------------------
# u32 is left out: Zeros of u32 is a type error (D216; tests/semantics/typeinfer/test_rules_tile.py)
@pytest.mark.parametrize("dtype", [d for d in DType
                                   if d not in (DType.F8E8M0, DType.F4E2M1, DType.U32)])
def test_zeros_positive_zero_bits(dtype):
    r = run(Zeros((2, 3), dtype))
    assert dtype_of(r) is dtype and r.shape == (2, 3)
    assert not to_bits(r).any()
    if dtype.is_float:
        assert not np.signbit(r.astype(np.float32)).any()
    assert run(Zeros((), dtype)).shape == ()
    assert run(Zeros((0, 4), dtype)).shape == (0, 4)


def test_zeros_decided_errors():
    with pytest.raises(EvaluationError, match="f8e8m0 has no zero"):
        run(Zeros((2,), DType.F8E8M0))
    with pytest.raises(UnsupportedDTypeError):
        run(Zeros((2,), DType.F4E2M1))
    with pytest.raises(EvaluationError, match="needs resolution"):
        run(Zeros((N, 2), DType.F32))
    # a concrete result type resolves the symbolic extent
    r = run(Zeros((N, 2), DType.F32), out_type=TensorType((5, 2), DType.F32))
    assert r.shape == (5, 2) and not to_bits(r).any()


# ---------------------------------------------------------------------------------------------
# ShapeOf / Rank
# ---------------------------------------------------------------------------------------------
@given(arrays())
def test_shape_of_and_rank(x):
    s = EVALUATORS[ShapeOf](EvalCtx(ShapeOf(), None, None), (x,))
    assert s.dtype == np.int64 and s.shape == (x.ndim,) and tuple(s) == x.shape
    r = run(Rank(), x)
    assert r.dtype == np.int64 and r.shape == () and int(r) == x.ndim


def test_shape_of_rank0():
    x = np.array(1.0, np.float32)
    s = EVALUATORS[ShapeOf](EvalCtx(ShapeOf(), None, None), (x,))
    assert s.dtype == np.int64 and s.shape == (0,)
    assert int(run(Rank(), x)) == 0


def test_results_never_alias_operands():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for op in (Reshape((3, 2)), Transpose((0, 1)), Slice((0, 0), (2, 3)), Concat(0), Stack(0),
               Cast(DType.F32)):
        r = run(op, x)
        assert r.flags.c_contiguous and not np.shares_memory(r, x)
