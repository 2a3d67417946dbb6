"""Evaluator implementations of Gather, Reduce, InsertSlice, CacheUpdate and TopK
(semantics/evaluator/tensor.py).

Every expected value comes from torch CPU or from an independent reference written here
(sequential f32 folds, per-fiber Python sorts, hand-written identities), never from the
implementation under test. Values are drawn as bit patterns weighted to special values (NaN with
payloads, ±inf, ±0, subnormals, ±max finite, small repeated values for ties).

Measured divergences from torch 2.13 CPU are counted on fixed seeded data and asserted to equal
the counts recorded in docs/decisions.md (D100–D103), so a change on either side is noticed.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tilefoundry.semantics.dtypes import DType, dtype_of, to_bits
from tilefoundry.semantics.evaluator import families as _families  # noqa: F401  (registers)
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx, EvaluationError
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops.tensor import (
    CacheUpdate,
    Gather,
    InsertSlice,
    Reduce,
    ReduceKind,
    TopK,
)
from tilefoundry.semantics.reductions import admits
from tilefoundry.semantics.typeinfer import infer_expr
from tilefoundry.semantics.types import DimVar, TensorType, TupleType, dim_min

NP = {"f32": np.dtype(np.float32), "bf16": np.dtype(ml_dtypes.bfloat16),
      "f16": np.dtype(np.float16), "i32": np.dtype(np.int32), "i64": np.dtype(np.int64),
      "u8": np.dtype(np.uint8), "bool": np.dtype(bool)}
UBITS = {"f32": np.uint32, "bf16": np.uint16, "f16": np.uint16}
FLOATS = ("f32", "bf16", "f16")
INTS = ("i32", "i64", "u8")
ALL = FLOATS + INTS + ("bool",)
TORCH = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
F32, I32, I64 = DType.F32, DType.I32, DType.I64


# ---------------------------------------------------------------------------------------------
# value generation (bit patterns weighted to special values)
# ---------------------------------------------------------------------------------------------
def _special_bits(name: str) -> list[int]:
    npdt = NP[name]
    fi = ml_dtypes.finfo(npdt)
    vals = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -2.0, 3.0, np.inf, -np.inf, np.nan,
                     -np.nan, float(fi.max), -float(fi.max), float(fi.tiny), -float(fi.tiny),
                     float(fi.smallest_subnormal), -float(fi.smallest_subnormal)], np.float64)
    bits = vals.astype(npdt).view(UBITS[name]).tolist()
    bits.append({"f32": 0x7F800001, "bf16": 0x7F81, "f16": 0x7C01}[name])  # signalling payload
    bits.append({"f32": 0xFFC00123, "bf16": 0xFFC1, "f16": 0xFE01}[name])  # negative payload
    return sorted(set(bits))


SPECIAL_BITS = {n: _special_bits(n) for n in FLOATS}
INT_SPECIALS = {n: sorted({0, 1, 2, 3, int(np.iinfo(NP[n]).min), int(np.iinfo(NP[n]).max),
                           int(np.iinfo(NP[n]).min) + 1} | ({-1, -2} if n != "u8" else set()))
                for n in INTS}


def elements(name: str):
    if name in FLOATS:
        nbits = NP[name].itemsize * 8
        return st.one_of(st.sampled_from(SPECIAL_BITS[name]), st.integers(0, 2 ** nbits - 1))
    if name == "bool":
        return st.booleans()
    ii = np.iinfo(NP[name])
    return st.one_of(st.sampled_from(INT_SPECIALS[name]), st.integers(int(ii.min), int(ii.max)),
                     st.integers(max(-3, int(ii.min)), 3))


@st.composite
def arrays(draw, name: str, shape: tuple):
    if name in FLOATS:
        a = draw(hnp.arrays(UBITS[name], shape, elements=elements(name))).view(NP[name])
    else:
        a = draw(hnp.arrays(NP[name], shape, elements=elements(name)))
    return np.array(a, copy=True, order="C")


# ---------------------------------------------------------------------------------------------
# harness and torch conversion
# ---------------------------------------------------------------------------------------------
def run(op, *args, out_type=None, call=None):
    """Infer the real type rule on concrete operand types, then call the implementation."""
    if out_type is None:
        vs = tuple(Var(f"x{i}", TensorType(tuple(a.shape), dtype_of(a)))
                   for i, a in enumerate(args))
        out_type = infer_expr(Call(op, vs))
    r = EVALUATORS[type(op)](EvalCtx(op, call, out_type), tuple(args))
    outs = r if isinstance(r, tuple) else (r,)
    types = out_type.fields if isinstance(out_type, TupleType) else (out_type,)
    for v, t in zip(outs, types, strict=True):
        assert isinstance(v, np.ndarray) and v.flags.c_contiguous
        assert not any(np.shares_memory(v, a) for a in args)
        if isinstance(t, TensorType) and all(isinstance(d, int) for d in t.shape):
            assert v.shape == tuple(t.shape)
            assert dtype_of(v) is t.dtype
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
    return t.numpy().reshape(tuple(t.shape))


def bits(a: np.ndarray) -> np.ndarray:
    return to_bits(np.array(a, copy=True, order="C"))


def same_bits(ours: np.ndarray, ref) -> None:
    theirs = from_torch(ref) if isinstance(ref, torch.Tensor) else np.asarray(ref)
    assert ours.shape == theirs.shape
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(bits(ours), bits(theirs))


def wide(a: np.ndarray) -> np.ndarray:
    """Exact f32 widening through torch (independent of the project's widen_to_f32)."""
    return from_torch(to_torch(a).to(torch.float32))


def same_class(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: equal bits (signed zeros differ) or both NaN (payload and sign aside)."""
    if a.dtype.kind != "f" and a.dtype not in (NP["bf16"],):
        return np.asarray(a == b)
    wa, wb = wide(a), wide(b)
    return (bits(wa) == bits(wb)) | (np.isnan(wa) & np.isnan(wb))


def round_to(s: np.ndarray, name: str) -> np.ndarray:
    """f32 -> dtype with torch's round-to-nearest-even conversion."""
    return from_torch(torch.from_numpy(np.array(s, np.float32, copy=True)).to(TORCH[name]))


def draw_axes(data, r: int) -> tuple[int, ...]:
    axes = data.draw(st.lists(st.integers(0, max(r - 1, 0)), unique=True, max_size=r))
    return tuple(a - r if data.draw(st.booleans()) else a for a in axes)


def fibers(w: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, tuple, tuple]:
    """Reduced axes (sorted: the source order is lexicographic in axis order, D31) moved last
    and flattened; returns (fibers, batch shape, keepdim shape)."""
    r = w.ndim
    ax = sorted(a % r for a in axes)
    keep = [a for a in range(r) if a not in ax]
    batch = tuple(w.shape[a] for a in keep)
    n = math.prod(w.shape[a] for a in ax)
    kshape = tuple(1 if a in ax else s for a, s in enumerate(w.shape))
    return np.transpose(w, keep + ax).reshape((*batch, n)), batch, kshape


# =============================================================================================
# Gather
# =============================================================================================
@given(st.data())
def test_gather_matches_torch(data):
    """HIR Gather: 'Element rule: out[c.., i.., t..] = x[c.., index[b.., i..], t..], where the
    first batch_dims of the axis leading dims also index index.'"""
    name = data.draw(st.sampled_from(ALL))
    r = data.draw(st.integers(1, 4))
    axis = data.draw(st.integers(0, r - 1))
    shape = [data.draw(st.integers(0, 3)) for _ in range(r)]
    shape[axis] = n = data.draw(st.integers(1, 5))
    x = data.draw(arrays(name, tuple(shape)))
    bd = data.draw(st.integers(0, axis))
    inner = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    idt = data.draw(st.sampled_from([np.int32, np.int64, np.uint8]))
    idx = data.draw(hnp.arrays(idt, tuple(shape[:bd]) + inner, elements=st.one_of(
        st.just(0), st.just(n - 1), st.integers(0, n - 1))))
    axis_arg = axis - r if data.draw(st.booleans()) else axis
    ours = run(Gather(axis_arg, bd), x, idx)

    xt, it = to_torch(x), torch.from_numpy(idx.astype(np.int64))
    # torch advanced indexing: an arange per leading axis, the indices for the gathered one
    rank = axis + len(inner)
    lead_idx = [torch.arange(shape[j]).reshape([shape[j] if a == j else 1 for a in range(rank)])
                for j in range(axis)]
    adv = xt[(*lead_idx, it.reshape([*shape[:bd], *[1] * (axis - bd), *inner]))]
    same_bits(ours, adv)
    if bd == 0:
        same_bits(ours, xt[(slice(None),) * axis + (it,)])
        if len(inner) == 1:
            same_bits(ours, torch.index_select(xt, axis, it))
    # torch.gather (indices expanded to x's rank): equal up to NaN payload, see D100
    lead, tail, k = shape[:axis], shape[axis + 1:], math.prod(inner)
    g = it.reshape([*shape[:bd], *[1] * (axis - bd), k, *[1] * len(tail)]).expand(
        [*lead, k, *tail])
    theirs = from_torch(torch.gather(xt, axis, g).reshape([*lead, *inner, *tail]))
    assert theirs.shape == ours.shape and theirs.dtype == ours.dtype
    assert (bits(ours) == bits(theirs)).all() if name in ("f32", *INTS, "bool") else \
        same_class(ours, theirs).all()


def test_finding_torch_gather_quiets_16bit_nan_payloads():
    """D100 finding: torch.gather on CPU (rank >= 2) rewrites bf16 / f16 NaN payloads (quiets
    signalling NaNs; bf16 0x7F81 and 0xFFC1 both come back as 0xFFFF), while index_select,
    advanced indexing and f32 gather keep the bits. The reference moves bits."""
    for name, nan in (("bf16", 0x7F81), ("bf16", 0xFFC1), ("f16", 0x7C01)):
        x = np.full((3, 3), nan, np.uint16).view(NP[name])
        idx = np.zeros((3, 1), np.int64)
        ours = run(Gather(1, 1), x, idx[:, 0])
        assert (bits(ours) == nan).all()
        g = from_torch(torch.gather(to_torch(x), 1, torch.from_numpy(idx)))
        assert np.isnan(wide(g)).all() and (bits(g) != nan).all()
        same_bits(ours, to_torch(x)[torch.arange(3), torch.zeros(3, dtype=torch.int64)])


def test_gather_batched_planted():
    """batch_dims=1 on x [B, H, N] with indices [B, K]: out[b, h, k] = x[b, h, idx[b, k]];
    batch_dims=0 on the same shapes inserts the whole index shape (no implicit batching: 'a
    leading-dimension shape coincidence MUST NOT implicitly enable batching')."""
    x = np.arange(2 * 3 * 4, dtype=np.int32).reshape(2, 3, 4)
    idx = np.array([[3, 0], [1, 1]], np.int64)
    out = run(Gather(2, 1), x, idx)
    assert out.tolist() == [[[3, 0], [7, 4], [11, 8]], [[13, 13], [17, 17], [21, 21]]]
    plain = run(Gather(2, 0), x, idx)
    assert plain.shape == (2, 3, 2, 2)
    assert plain[0, 1].tolist() == [[7, 4], [5, 5]]


@given(st.data())
def test_gather_out_of_range_index_raises(data):
    """Indices outside [0, n) raise (no wraparound); the message names the op, the first
    offending value in C order, its position in indices and the axis extent."""
    n = data.draw(st.integers(1, 5))
    x = np.arange(2 * n, dtype=np.float32).reshape(2, n)
    ishape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    idt = data.draw(st.sampled_from([np.int32, np.int64]))
    idx = data.draw(hnp.arrays(idt, ishape, elements=st.integers(-3, n + 2)))
    bad = [(p, int(idx[p])) for p in np.ndindex(ishape) if not 0 <= idx[p] < n]
    assume(bad)
    pos, val = bad[0]
    with pytest.raises(EvaluationError) as e:
        run(Gather(1), x, idx)
    msg = str(e.value)
    assert msg.startswith("Gather:")
    assert f"index value {val} at indices position {pos}" in msg
    assert f"extent {n}" in msg and "do not wrap" in msg


def test_gather_u8_index_and_through_evaluate():
    with pytest.raises(EvaluationError, match=r"Gather: index value 255 at indices position "
                                              r"\(0,\) .* extent 4"):
        run(Gather(0), np.zeros(4, np.float32), np.array([255, 0], np.uint8))
    xv = Var("x", TensorType((5, 3), F32))
    iv = Var("idx", TensorType((2,), I32))
    m = Module((Function("g", (xv, iv), Call(Gather(0), (xv, iv)), None),))
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    out = evaluate(m, "g", [x, np.array([4, 0], np.int32)])
    same_bits(out, to_torch(x)[torch.tensor([4, 0])])
    with pytest.raises(EvaluationError, match=r"Gather: index value 5 at indices position "
                                              r"\(1,\) is out of range for axis 0 of extent 5"):
        evaluate(m, "g", [x, np.array([1, 5], np.int32)])
    with pytest.raises(EvaluationError, match=r"Gather: index value -1 .*extent 5"):
        evaluate(m, "g", [x, np.array([-1, 0], np.int32)])


# =============================================================================================
# Reduce
# =============================================================================================
def seq_reference(x: np.ndarray, name: str, axes: tuple, kind: str, left: bool,
                  keepdim: bool) -> np.ndarray:
    """Sequential f32 accumulation (fold_left: ((x0 + x1) + x2) ...; fold_right: x0 + (x1 +
    (x2 ...))), mean = f32 sum / f32(n), one final rounding to the dtype with torch."""
    f, batch, kshape = fibers(wide(x), axes)
    n = f.shape[-1]
    with np.errstate(all="ignore"):
        if n == 0:
            s = np.zeros(batch, np.float32)  # HIR Reduce: 'sum is 0'
        else:
            order = list(range(n)) if left else list(range(n - 1, -1, -1))
            s = f[..., order[0]].copy()
            for i in order[1:]:
                s = (s + f[..., i]) if left else (f[..., i] + s)
            s = np.asarray(s, np.float32)
            if kind == "mean":
                s = s / np.float32(n)
    return round_to(s, name).reshape(kshape if keepdim else batch)


@given(st.data())
def test_reduce_fold_is_the_sequential_f32_chain(data):
    """Tile design / ARCHITECTURE.md: 'fold_left / fold_right are bit-exact functions';
    'Low-precision floats accumulate in f32 and round once at the end'."""
    name = data.draw(st.sampled_from(FLOATS))
    shape = tuple(data.draw(st.lists(st.integers(0, 5), max_size=3)))
    x = data.draw(arrays(name, shape))
    axes = draw_axes(data, len(shape))
    kind = data.draw(st.sampled_from(["sum", "mean"]))
    n = math.prod(shape[a % len(shape)] for a in axes) if shape else 1
    assume(not (kind == "mean" and n == 0))
    policy = data.draw(st.sampled_from(["fold_left", "fold_right"]))
    keepdim = data.draw(st.booleans())
    ours = run(Reduce(axes, keepdim, ReduceKind(kind), policy), x)
    ref = seq_reference(x, name, axes, kind, policy == "fold_left", keepdim)
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    assert same_class(ours, ref).all()


def test_reduce_fold_planted():
    """The policies differ where they must: [2^24, 1, 1] is 2^24 left to right and 2^24 + 2 from
    the right; in bf16 the f32 accumulator keeps [256, 1, 1] at 258 (bf16 alone would lose the
    ones), rounded once."""
    x = np.array([2.0 ** 24, 1.0, 1.0], np.float32)
    left = run(Reduce((0,), False, ReduceKind.SUM, "fold_left"), x)
    right = run(Reduce((0,), False, ReduceKind.SUM, "fold_right"), x)
    assert float(left) == 2.0 ** 24 and float(right) == 2.0 ** 24 + 2
    b = np.array([256.0, 1.0, 1.0], np.float32).astype(NP["bf16"])
    assert float(run(Reduce((0,), False, ReduceKind.SUM, "fold_left"), b)) == 258.0
    assert float(to_torch(b)[0] + to_torch(b)[1] + to_torch(b)[2]) == 256.0  # bf16 steps


@given(st.data())
def test_reduce_tree_result_is_admitted(data):
    """Tree policies: the reference is one member of the admitted set (reductions.admits);
    where every tree coincides (n <= 2) it is the sequential chain."""
    name = data.draw(st.sampled_from(FLOATS))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    if data.draw(st.booleans()):
        shape = (2, data.draw(st.integers(7, 40)))  # the bound method
    x = data.draw(arrays(name, shape))
    axes = draw_axes(data, len(shape))
    kind = data.draw(st.sampled_from(["sum", "mean"]))
    policy = data.draw(st.sampled_from(["unordered_tree", "ordered_tree"]))
    keepdim = data.draw(st.booleans())
    ours = run(Reduce(axes, keepdim, ReduceKind(kind), policy), x)
    assert admits(ours, x, kind, tuple(a % len(shape) for a in axes), policy=policy)
    if math.prod(shape[a] for a in axes) <= 2:
        assert same_class(ours, seq_reference(x, name, axes, kind, True, keepdim)).all()


def _extreme_reference(x: np.ndarray, name: str, axes: tuple, kind: str,
                       keepdim: bool) -> np.ndarray:
    """max / min / abs_max written independently: NaN propagates, -0 < +0, integer abs_max
    wraps |min| into the dtype (D34), bool max = any, min = all."""
    f, batch, kshape = fibers(x, axes)
    shape = kshape if keepdim else batch
    if name == "bool":
        return (f.any(-1) if kind == "max" else f.all(-1)).reshape(shape)
    if name in INTS:
        vals = f.reshape(-1, f.shape[-1]).tolist()
        ii = np.iinfo(NP[name])
        out = []
        for v in vals:
            m = {"max": max, "min": min}[kind](v) if kind != "abs_max" else max(abs(e) for e in v)
            m = (m - int(ii.min)) % (int(ii.max) - int(ii.min) + 1) + int(ii.min)  # wrap
            out.append(m)
        return np.array(out, NP[name]).reshape(shape)
    w = wide(f)
    if kind == "abs_max":
        w = np.abs(w)
    with np.errstate(all="ignore"):
        m = np.max(w, -1) if kind != "min" else np.min(w, -1)  # numpy max/min propagate NaN
    pos0, neg0 = ((w == 0) & ~np.signbit(w)).any(-1), ((w == 0) & np.signbit(w)).any(-1)
    zero = np.float32(0.0) if kind != "min" else np.float32(-0.0)
    other = np.float32(-0.0) if kind != "min" else np.float32(0.0)
    has = pos0 if kind != "min" else neg0
    m = np.where(m == 0, np.where(has, zero, other), m).astype(np.float32)
    return round_to(m, name).reshape(shape)


@given(st.data())
def test_reduce_extremes_exact(data):
    """ARCHITECTURE.md: 'max/min propagate NaN and order -0 < +0'; exact under every policy."""
    name = data.draw(st.sampled_from(ALL))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    x = data.draw(arrays(name, shape))
    axes = draw_axes(data, len(shape))
    kinds = ["max", "min"] if name in ("bool",) else ["max", "min", "abs_max"]
    kind = data.draw(st.sampled_from(kinds))
    policy = data.draw(st.sampled_from(["unordered_tree", "ordered_tree", "fold_left",
                                        "fold_right"]))
    keepdim = data.draw(st.booleans())
    ours = run(Reduce(axes, keepdim, ReduceKind(kind), policy), x)
    ref = _extreme_reference(x, name, axes, kind, keepdim)
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    assert same_class(ours, ref).all()


def test_reduce_integer_sum_wraps_in_dtype():
    """D34: integer sums wrap in the input dtype (torch promotes to int64 instead)."""
    x = np.array([2 ** 31 - 1, 1, 5], np.int32)
    ours = run(Reduce((0,), False, ReduceKind.SUM), x)
    assert ours.dtype == np.int32 and int(ours) == -(2 ** 31) + 5
    assert int(torch.sum(to_torch(x))) == 2 ** 31 + 5  # torch: int64 accumulation


# --- empty reductions (HIR Reduce) -----------------------------------------------------------
# HIR Reduce: 'A reduction over an axis of no elements MUST return that kind's identity rather
# than fail. For max that is the least value its result dtype can hold, which is not always
# -inf: an integer dtype cannot hold -inf, bool's least value is False, and a finite-only float
# has no infinity. abs_max is 0, its results being magnitudes. sum is 0.' min mirrors max (D42);
# f8e8m0 (no zero, no sign) takes 2^-127 for max and abs_max (D33).
INF = float("inf")
IDENTITIES = {
    "max": {DType.F32: -INF, DType.BF16: -INF, DType.F16: -INF, DType.FP8E4M3: -448.0,
            DType.FP8E5M2: -INF, DType.F8E8M0: 2.0 ** -127, DType.I8: -128, DType.U8: 0,
            DType.I32: -(2 ** 31), DType.I64: -(2 ** 63), DType.BOOL: False},
    "min": {DType.F32: INF, DType.BF16: INF, DType.F16: INF, DType.FP8E4M3: 448.0,
            DType.FP8E5M2: INF, DType.F8E8M0: 2.0 ** 127, DType.I8: 127, DType.U8: 255,
            DType.I32: 2 ** 31 - 1, DType.I64: 2 ** 63 - 1, DType.BOOL: True},
    "sum": {d: 0 for d in (DType.F32, DType.BF16, DType.F16, DType.FP8E4M3, DType.FP8E5M2,
                           DType.I8, DType.U8, DType.I32, DType.I64)},
    "abs_max": {d: 0 for d in (DType.F32, DType.BF16, DType.F16, DType.FP8E4M3, DType.FP8E5M2,
                               DType.I8, DType.U8, DType.I32, DType.I64)} |
               {DType.F8E8M0: 2.0 ** -127},
}


@pytest.mark.parametrize(("kind", "dt", "expected"), [
    (k, d, v) for k, table in IDENTITIES.items() for d, v in table.items()])
def test_empty_reduction_is_the_identity(kind, dt, expected):
    x = np.zeros((3, 0, 2), dt.storage)
    for axes, keepdim, shape in (((1,), False, (3, 2)), ((-2,), True, (3, 1, 2)),
                                 ((0, 1, 2), False, ())):
        out = run(Reduce(axes, keepdim, ReduceKind(kind), "fold_left"), x)
        assert out.shape == shape and dtype_of(out) is dt
        if dt is DType.BOOL or dt.is_int:
            assert (out == expected).all()
        else:
            w = out.astype(np.float32)
            assert (w == expected).all()
            if expected == 0:  # +0, never -0
                assert not np.signbit(w).any()


@pytest.mark.parametrize("name", FLOATS)
def test_empty_mean_raises(name):
    """HIR Reduce: 'mean has no identity — there is nothing to divide by — so it MUST NOT
    invent one.' Also when the result itself is empty (D101)."""
    for shape, axes in (((3, 0), (1,)), ((0,), (0,)), ((0, 0), (-1,))):
        with pytest.raises(EvaluationError, match=r"Reduce: mean .* reduces zero elements.*"
                                                  r"MUST NOT invent"):
            run(Reduce(axes, True, ReduceKind.MEAN), np.zeros(shape, NP[name]))
    # torch invents NaN
    assert torch.isnan(torch.mean(torch.zeros((3, 0)), dim=1)).all()


# --- contracts (evaluate(report=True)) -------------------------------------------------------
def _reduce_module(dt: DType, kind: str, policy: str) -> Module:
    x = Var("x", TensorType((4, 5), dt))
    return Module((Function("r", (x,), Call(Reduce((-1,), False, ReduceKind(kind), policy),
                                            (x,)), None),))


@pytest.mark.parametrize(("dt", "kind", "policy", "noted"), [
    (DType.F32, "sum", "unordered_tree", True),
    (DType.BF16, "mean", "ordered_tree", True),
    (DType.F16, "sum", "ordered_tree", True),
    (DType.F32, "sum", "fold_left", False),
    (DType.BF16, "mean", "fold_right", False),
    (DType.F32, "max", "unordered_tree", False),
    (DType.F32, "abs_max", "ordered_tree", False),
    (DType.I32, "sum", "unordered_tree", False),
])
def test_reduce_contract_notes(dt, kind, policy, noted):
    """Tree-policy float sum / mean carry an admitted-set contract (ARCHITECTURE.md: 'A tree
    policy defines a *set* of admitted results'); exact results carry none (D101)."""
    x = (np.arange(20).reshape(4, 5) - 7).astype(dt.storage)
    ev = evaluate(_reduce_module(dt, kind, policy), "r", [x], report=True)
    assert ev.value.shape == (4,)
    if not noted:
        assert ev.contracts == ()
        return
    assert len(ev.contracts) == 1
    call, c = ev.contracts[0]
    assert isinstance(call, Call) and isinstance(call.op, Reduce)
    assert (c.op, c.kind, c.policy, c.dtype) == (f"Reduce({kind})", "admitted_set", policy, dt)
    assert admits(ev.value, x, kind, (1,), policy=policy)


# --- torch cross-checks with measured divergence counts --------------------------------------
def _seeded(name: str, rng: np.random.Generator, n_cases: int, pool=None):
    """Fixed seeded cases: shapes up to rank 3 plus some long rows; values mixing ordinary
    magnitudes, special values and uniform bit patterns (or a small pool, for ties)."""
    for _ in range(n_cases):
        r = int(rng.integers(1, 4))
        shape = tuple(int(s) for s in rng.integers(1, 7, size=r))
        if rng.random() < 0.2:
            shape = (2, int(rng.integers(7, 300)))
        size = math.prod(shape)
        if pool is not None:
            x = np.array(pool, np.float32)[rng.integers(0, len(pool), size)]
            yield round_to(x, name).reshape(shape)
            continue
        ordinary = (rng.standard_normal(size) * 10.0 ** rng.uniform(-3, 3, size)).astype(
            np.float32)
        x = round_to(ordinary, name).view(UBITS[name])
        pick = rng.random(size)
        sp = np.array(SPECIAL_BITS[name], UBITS[name])[rng.integers(0, len(SPECIAL_BITS[name]),
                                                                     size)]
        x = np.where(pick < 0.1, sp, x)
        nbits = NP[name].itemsize * 8
        x = np.where(pick > 0.95, rng.integers(0, 2 ** nbits, size, dtype=np.uint64).astype(
            UBITS[name]), x)
        yield x.astype(UBITS[name]).view(NP[name]).reshape(shape)


def _axes_for(rng, r: int) -> tuple[int, ...]:
    k = int(rng.integers(1, r + 1))
    return tuple(sorted(rng.choice(r, size=k, replace=False).tolist()))


# torch results that are NOT in the admitted set of unordered_tree (D101), per (dtype, kind),
# over _seeded(..., 150) with seed 100.
TORCH_NOT_ADMITTED = {("f32", "sum"): 0, ("f32", "mean"): 0, ("bf16", "sum"): 0,
                      ("bf16", "mean"): 0, ("f16", "sum"): 0, ("f16", "mean"): 0}


@pytest.mark.parametrize("name", FLOATS)
def test_tree_reduce_torch_admission_count(name):
    rng = np.random.default_rng(100)
    counts = {"sum": 0, "mean": 0}
    for x in _seeded(name, rng, 150):
        axes = _axes_for(rng, x.ndim)
        for kind in ("sum", "mean"):
            ours = run(Reduce(axes, False, ReduceKind(kind), "unordered_tree"), x)
            assert admits(ours, x, kind, axes, policy="unordered_tree")
            fn = torch.sum if kind == "sum" else torch.mean
            theirs = from_torch(fn(to_torch(x), dim=list(axes)))
            assert theirs.dtype == x.dtype
            counts[kind] += int((~admits(theirs, x, kind, axes).admitted).sum())
    assert {(name, k): v for k, v in counts.items()} == \
        {k: v for k, v in TORCH_NOT_ADMITTED.items() if k[0] == name}


# (dtype, kind) -> result elements where torch.amax / amin (abs().amax for abs_max) differs from
# the reference (NaN class aside), over _seeded(..., 150, zero pool) with seed 200; every one is
# a -0 / +0 choice (checked below).
# (2,309 results per kind and dtype; 97 max and 95 min results are a zero whose fiber holds
# both zero signs).
TORCH_EXTREME_DIFFS = {(n, k): v for n in FLOATS
                       for k, v in (("max", 35), ("min", 61), ("abs_max", 0))}
ZERO_POOL = [0.0, -0.0, -0.0, 0.0, -1.0, float("nan"), 1.0]


@pytest.mark.parametrize("name", FLOATS)
def test_extremes_torch_divergence_count(name):
    rng = np.random.default_rng(200)
    counts = {"max": 0, "min": 0, "abs_max": 0}
    cases = list(_seeded(name, rng, 75)) + list(_seeded(name, rng, 75, pool=ZERO_POOL))
    for x in cases:
        axes = _axes_for(rng, x.ndim)
        xt = to_torch(x)
        for kind in counts:
            ours = run(Reduce(axes, True, ReduceKind(kind)), x)
            fn = torch.amin if kind == "min" else torch.amax
            t = fn(xt.abs() if kind == "abs_max" else xt, dim=list(axes), keepdim=True)
            theirs = from_torch(t)
            differ = ~same_class(ours, theirs)
            # every divergence is a zero-sign choice: equal as values, NaN-ness agreeing
            wo, wt = wide(ours)[differ], wide(theirs)[differ]
            assert ((wo == 0) & (wt == 0)).all()
            counts[kind] += int(differ.sum())
    assert {(name, k): v for k, v in counts.items()} == \
        {k: v for k, v in TORCH_EXTREME_DIFFS.items() if k[0] == name}


def test_integer_abs_max_diverges_from_torch_at_int_min():
    """D34: |INT_MIN| wraps to INT_MIN and is the largest magnitude; torch computes abs() first
    (also INT_MIN) and then amax, which ranks it the smallest."""
    x = np.array([[-(2 ** 31), 5, -7]], np.int32)
    ours = run(Reduce((1,), False, ReduceKind.ABS_MAX), x)
    assert int(ours[0]) == -(2 ** 31)
    assert int(torch.amax(to_torch(x).abs(), dim=1)[0]) == 7


# =============================================================================================
# InsertSlice / CacheUpdate
# =============================================================================================
@given(st.data())
def test_insert_slice_matches_torch_slice_assignment(data):
    """HIR InsertSlice: 'the window on each axis is [offset_axis, offset_axis +
    update.shape[axis])'."""
    name = data.draw(st.sampled_from(ALL))
    dshape = tuple(data.draw(st.lists(st.integers(0, 5), max_size=3)))
    ushape = tuple(data.draw(st.integers(0, d)) for d in dshape)
    dst = data.draw(arrays(name, dshape))
    upd = data.draw(arrays(name, ushape))
    offs = [data.draw(st.integers(0, d - u)) for d, u in zip(dshape, ushape, strict=True)]
    odt = data.draw(st.sampled_from([np.int32, np.int64, np.uint8]))
    oargs = [np.array(o, odt) for o in offs]
    before = dst.copy()
    ours = run(InsertSlice(), dst, upd, *oargs)
    t = to_torch(dst).clone()
    t[tuple(slice(o, o + u) for o, u in zip(offs, ushape, strict=True))] = to_torch(upd)
    same_bits(ours, t)
    np.testing.assert_array_equal(bits(dst), bits(before))  # dst untouched


def test_insert_slice_size1_offsets_and_errors():
    dst = np.zeros((3, 4), np.float32)
    upd = np.ones((2, 2), np.float32)
    out_t = TensorType((3, 4), F32)
    # a literal size-1 offset is a scalar too (HIR CacheUpdate's scalar convention)
    r = run(InsertSlice(), dst, upd, np.array([1], np.int32), np.array([[2]], np.int64),
            out_type=out_t)
    assert r.tolist() == [[0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]]
    # HIR InsertSlice: 'a runtime offset is checked at eval/runtime'
    with pytest.raises(EvaluationError, match=r"^InsertSlice: axis 1: offset -1 .* update "
                                              r"extent 2 outside the dst extent 4"):
        run(InsertSlice(), dst, upd, np.array(0, np.int32), np.array(-1, np.int32))
    with pytest.raises(EvaluationError, match=r"^InsertSlice: axis 0: offset 2 places the window "
                                              r"\[2, 4\) of the update extent 2 outside the dst "
                                              r"extent 3"):
        run(InsertSlice(), dst, upd, np.array(2, np.int64), np.array(0, np.int64))
    with pytest.raises(EvaluationError, match=r"InsertSlice: axis 1: offset 3 .*extent 4"):
        run(InsertSlice(), dst, upd, np.array(0, np.uint8), np.array(3, np.uint8))
    with pytest.raises(EvaluationError, match=r"offset for axis 0 must be a rank-0"):
        run(InsertSlice(), dst, upd, np.array([0, 1], np.int32), np.array(0, np.int32),
            out_type=out_t)


def test_insert_slice_runtime_offsets_through_evaluate():
    d = Var("d", TensorType((4,), F32))
    u = Var("u", TensorType((3,), F32))
    o = Var("o", TensorType((), I32))
    m = Module((Function("ins", (d, u, o), Call(InsertSlice(), (d, u, o)), None),))
    dv, uv = np.zeros(4, np.float32), np.array([1.0, 2.0, 3.0], np.float32)
    assert evaluate(m, "ins", [dv, uv, np.array(1, np.int32)]).tolist() == [0, 1, 2, 3]
    with pytest.raises(EvaluationError, match=r"InsertSlice: axis 0: offset 2 .*\[2, 5\).*"
                                              r"extent 3 .*extent 4"):
        evaluate(m, "ins", [dv, uv, np.array(2, np.int32)])


@given(st.data())
def test_cache_update_matches_torch(data):
    """HIR CacheUpdate: 'source positions, taken as new[:, :s]', written at cur_pos."""
    name = data.draw(st.sampled_from(ALL))
    b, h, d = (data.draw(st.integers(1, 2)) for _ in range(3))
    length = data.draw(st.integers(1, 6))
    nlen = data.draw(st.integers(1, length))
    s = data.draw(st.integers(1, nlen))
    cur = data.draw(st.integers(0, length - s))
    cache = data.draw(arrays(name, (b, length, h, d)))
    new = data.draw(arrays(name, (b, nlen, h, d)))
    shape = [1] * data.draw(st.integers(0, 2))
    ours = run(CacheUpdate(), cache, np.array(cur, np.int32).reshape(shape),
               np.array(s, np.int32).reshape(shape), new)
    t = to_torch(cache).clone()
    t[:, cur:cur + s] = to_torch(new)[:, :s]
    same_bits(ours, t)


def _cache_module() -> Module:
    c = Var("cache", TensorType((1, 8, 2, 4), F32))
    p = Var("cur_pos", TensorType((), I32))
    s = Var("s", TensorType((), I32))
    n = Var("new", TensorType((1, 3, 2, 4), F32))
    return Module((Function("upd", (c, p, s, n), Call(CacheUpdate(), (c, p, s, n)), None),))


@pytest.mark.parametrize(("cur", "s", "pattern"), [
    (-1, 1, r"^CacheUpdate: cur_pos = -1 is negative"),
    (0, 0, r"^CacheUpdate: s = 0 is outside \[1, new.len = 3\]"),
    (0, 4, r"^CacheUpdate: s = 4 is outside \[1, new.len = 3\]"),
    (0, -2, r"^CacheUpdate: s = -2 is outside"),
    (6, 3, r"^CacheUpdate: cur_pos \+ s = 6 \+ 3 = 9 exceeds cache.len = 8"),
    (8, 1, r"^CacheUpdate: cur_pos \+ s = 8 \+ 1 = 9 exceeds cache.len = 8"),
])
def test_cache_update_runtime_checks(cur, s, pattern):
    """HIR CacheUpdate: 'cur_pos >= 0, 1 <= s <= new.len, and cur_pos + s <= cache.len MUST be
    checked at eval/runtime'."""
    cache = np.zeros((1, 8, 2, 4), np.float32)
    new = np.ones((1, 3, 2, 4), np.float32)
    args = [cache, np.array(cur, np.int32), np.array(s, np.int32), new]
    with pytest.raises(EvaluationError, match=pattern):
        evaluate(_cache_module(), "upd", args)
    with pytest.raises(EvaluationError, match=pattern):
        run(CacheUpdate(), *args)


def test_cache_update_boundaries_through_evaluate():
    cache = np.zeros((1, 8, 2, 4), np.float32)
    new = np.arange(24, dtype=np.float32).reshape(1, 3, 2, 4)
    for cur, s in ((5, 3), (0, 1), (7, 1)):  # the last allowed positions
        out = evaluate(_cache_module(), "upd",
                       [cache, np.array(cur, np.int32), np.array(s, np.int32), new])
        t = to_torch(cache).clone()
        t[:, cur:cur + s] = to_torch(new)[:, :s]
        same_bits(out, t)


# =============================================================================================
# TopK
# =============================================================================================
def topk_reference(x: np.ndarray, name: str, k: int, axis: int,
                   largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per fiber, Python's sort on (is NaN, value descending / ascending, original index): NaNs
    last (the Tile design's nan::last), -0 == +0, ties by original index."""
    v = np.moveaxis(x, axis, -1)
    w = np.moveaxis(wide(x) if name in FLOATS else x.astype(np.int64), axis, -1)
    flat_v, flat_w = v.reshape(-1, v.shape[-1]), w.reshape(-1, w.shape[-1])
    vals, idxs = [], []
    for fv, fw in zip(flat_v, flat_w, strict=True):
        def key(i, fw=fw):
            e = fw[i].item()
            nan = e != e
            return (nan, 0 if nan else (-e if largest else e), i)
        order = sorted(range(len(fw)), key=key)[:k]
        vals.append(fv[order])
        idxs.append(order)
    out_shape = (*v.shape[:-1], k)
    values = np.array(vals, x.dtype).reshape(out_shape) if vals else np.zeros(out_shape, x.dtype)
    indices = np.array(idxs, np.int64).reshape(out_shape)
    return np.moveaxis(values, -1, axis), np.moveaxis(indices, -1, axis)


@given(st.data())
def test_topk_matches_reference_and_torch(data):
    """HIR TopK: values keep x's dtype, indices are i64; ties by original index (ARCHITECTURE.md:
    'sort and top-k break ties by original index (including between -0 and +0)')."""
    name = data.draw(st.sampled_from((*FLOATS, "i32", "i64", "u8")))
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    k = data.draw(st.integers(0, n))
    largest = data.draw(st.booleans())
    x = data.draw(arrays(name, shape))
    vals, idx = run(TopK(k, axis, largest, True), x)
    rv, ri = topk_reference(x, name, k, axis % len(shape), largest)
    same_bits(vals, rv)
    np.testing.assert_array_equal(idx, ri)
    assert idx.dtype == np.int64
    # torch, where its contract coincides: fibers without NaN select equal values
    tv, _ = torch.topk(to_torch(x).to(torch.float32) if name == "u8" else to_torch(x), k,
                        dim=axis, largest=largest, sorted=True)
    xw = np.moveaxis(wide(x) if name in FLOATS else x.astype(np.float64), axis, -1)
    no_nan = ~np.isnan(xw).any(-1)
    ov = np.moveaxis(wide(vals) if name in FLOATS else vals.astype(np.float64), axis, -1)
    tvw = np.moveaxis(tv.to(torch.float64).numpy(), axis, -1)
    assert (ov[no_nan] == tvw[no_nan]).all()  # -0 == +0: a zero tie may pick either sign


def test_topk_planted_ties_and_nan():
    x = np.array([1.0, np.nan, 3.0, -0.0, 3.0, 0.0], np.float32)
    v, i = run(TopK(3), x)
    assert v.tolist()[:2] == [3.0, 3.0] and i.tolist() == [2, 4, 0]
    v, i = run(TopK(4, largest=False), x)
    assert i.tolist() == [3, 5, 0, 2]  # -0 and +0 tie: original order
    assert np.signbit(v[0]) and not np.signbit(v[1])
    v, i = run(TopK(6), x)
    assert i.tolist() == [2, 4, 0, 3, 5, 1]  # NaN last (nan::last)
    v, i = run(TopK(0), x)
    assert v.shape == (0,) and i.shape == (0,) and i.dtype == np.int64


def test_topk_unsorted_returns_the_sorted_selection():
    """HIR TopK: 'otherwise the same selected set is returned in an unspecified order'; the
    reference returns the sorted order (D103), which is the same set as torch's sorted=False."""
    x = np.array([[5, 1, 9, 3, 7], [2, 8, 6, 4, 0]], np.int32)
    vs, is_ = run(TopK(3, -1, True, True), x)
    vu, iu = run(TopK(3, -1, True, False), x)
    np.testing.assert_array_equal(vu, vs)
    np.testing.assert_array_equal(iu, is_)
    _, ti = torch.topk(to_torch(x), 3, dim=-1, sorted=False)
    for row in range(2):
        assert sorted(ti[row].tolist()) == sorted(iu[row].tolist())


N = DimVar("N", 1, 65)


def test_topk_symbolic_k_from_x_shape():
    """HIR TopK: 'A symbolic k's DimVar(s) MUST be resolvable from x's own (input) shape at
    evaluation time'; k = dim_min(4, N // 2) as in the spec's dim_min(512, CTX_LEN // 4)."""
    op = TopK(dim_min(4, N // 2))
    xv = Var("x", TensorType((3, N), F32))
    call = Call(op, (xv,))
    t = infer_expr(call)
    for n, k in ((5, 2), (20, 4), (1, 0)):
        x = np.arange(3 * n, dtype=np.float32).reshape(3, n)
        v, i = EVALUATORS[TopK](EvalCtx(op, call, t), (x,))
        assert v.shape == (3, k)
        assert i.tolist() == [list(range(n - 1, n - 1 - k, -1))] * 3
    xp = Var("x", TensorType((3, N), F32))
    m = Module((Function("tk", (xp,), Call(op, (xp,)), None),))
    v, i = evaluate(m, "tk", [np.arange(30, dtype=np.float32).reshape(3, 10)])
    assert v.shape == (3, 4) and i[0].tolist() == [9, 8, 7, 6]


def test_topk_k_resolution_fallbacks_and_errors():
    x = np.arange(6, dtype=np.float32)
    op = TopK(N // 2)
    concrete = TupleType((TensorType((3,), F32), TensorType((3,), I64)))
    v, i = EVALUATORS[TopK](EvalCtx(op, None, concrete), (x,))
    assert v.tolist() == [5.0, 4.0, 3.0] and i.tolist() == [5, 4, 3]
    symbolic = TupleType((TensorType((N // 2,), F32), TensorType((N // 2,), I64)))
    with pytest.raises(EvaluationError, match=r"TopK: k = .*N.* is symbolic and not resolvable"):
        EVALUATORS[TopK](EvalCtx(op, None, symbolic), (x,))
    # k beyond the axis: not checkable at typeinfer (symbolic k against a symbolic length)
    big = TopK(N + 1)
    xv = Var("x", TensorType((N,), F32))
    call = Call(big, (xv,))
    t = infer_expr(call)
    with pytest.raises(EvaluationError, match=r"TopK: k = 7 .* outside \[0, 6\]"):
        EVALUATORS[TopK](EvalCtx(big, call, t), (x,))


# TopK vs torch.topk on seeded data with a small value pool (ties, ±0, NaN), seed 300,
# 150 cases per dtype, k drawn in [1, n], largest drawn; counted per fiber:
#   tie: fibers without NaN whose index lists differ (their values always agree as numbers);
#   nan_largest / nan_smallest: fibers with a NaN whose values differ (torch ranks NaN as the
#     largest value; the reference places NaN last in both directions);
#   nan_tie: fibers with a NaN whose values agree but whose indices differ.
TORCH_TOPK_DIFFS = {"fibers": 3392, "no_nan": 2488, "tie": 102, "nan_largest": 367,
                    "nan_smallest": 0, "nan_tie": 48}
TIE_POOL = [1.0, 1.0, 2.0, -0.0, 0.0, 3.0, float("nan"), -1.0]


@pytest.mark.parametrize("name", FLOATS)
def test_topk_torch_divergence_count(name):
    rng = np.random.default_rng(300)
    counts = dict.fromkeys(TORCH_TOPK_DIFFS, 0)
    for x in _seeded(name, rng, 150, pool=TIE_POOL):
        axis = int(rng.integers(0, x.ndim))
        k = int(rng.integers(1, x.shape[axis] + 1))
        largest = bool(rng.integers(0, 2))
        v, i = run(TopK(k, axis, largest), x)
        tv, ti = torch.topk(to_torch(x), k, dim=axis, largest=largest)
        ov, tvn = np.moveaxis(wide(v), axis, -1), np.moveaxis(wide(from_torch(tv)), axis, -1)
        oi, tin = np.moveaxis(i, axis, -1), np.moveaxis(ti.numpy(), axis, -1)
        has_nan = np.isnan(np.moveaxis(wide(x), axis, -1)).any(-1)
        idx_differ = (oi != tin).any(-1)
        val_differ = (~((ov == tvn) | (np.isnan(ov) & np.isnan(tvn)))).any(-1)
        assert not val_differ[~has_nan].any()  # without NaN, the selected values agree
        counts["fibers"] += has_nan.size
        counts["no_nan"] += int((~has_nan).sum())
        counts["tie"] += int((idx_differ & ~has_nan).sum())
        counts["nan_largest" if largest else "nan_smallest"] += int((val_differ & has_nan).sum())
        counts["nan_tie"] += int((idx_differ & ~val_differ & has_nan).sum())
    assert counts == TORCH_TOPK_DIFFS
