"""Evaluator implementations of Gather, Reduce, InsertSlice, CacheUpdate and TopK
(semantics/evaluator/tensor.py).

Every expected value comes from an independent reference written here (element-by-element data
movement on the raw bits, sequential f32 folds, per-fiber Python sorts, Python-int models, the
exact scalar model, hand-written identities), never from the implementation under test and never
from torch. Values are drawn as bit patterns weighted to special values (NaN with payloads, ±inf,
±0, subnormals, ±max finite, small repeated values for ties).

torch CPU is a peer that is judged, not trusted (conformance/peers.py): wherever torch's result
differs from the reference's, the test's independent model decides who is right. The reference
wrong fails; torch wrong is a *finding*, counted in ``peers.FINDINGS`` per (torch version and CPU
capability, code path, class) with the classes named after docs/decisions.md D100–D103, and is
never a failure. No count of torch's divergences is asserted (the counts measured for torch 2.13
are recorded in docs/decisions.md; the session prints the ledger). Each torch comparison is a
``check_*`` helper taking optional planted values, and ``test_planted_*`` shows the helpers fail
on a wrong reference value and record, without failing, a wrong torch value.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tilefoundry.conformance import peers
from tilefoundry.semantics import exact
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
    """Exact f32 widening, written here (neither the project's widen_to_f32 nor torch): a bf16
    pattern is the top half of an f32 pattern; f16 widens exactly through numpy's IEEE half."""
    a = np.array(a, copy=True, order="C")
    if a.dtype == NP["bf16"]:
        return (a.view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)
    if a.dtype in (NP["f16"], NP["f32"]):
        return a.astype(np.float32)
    raise TypeError(f"wide: not a float array: {a.dtype}")


def same_class(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: equal bits (signed zeros differ) or both NaN (payload and sign aside)."""
    if a.dtype.kind != "f" and a.dtype not in (NP["bf16"],):
        return np.asarray(a == b)
    wa, wb = wide(a), wide(b)
    return (bits(wa) == bits(wb)) | (np.isnan(wa) & np.isnan(wb))


def round_to(s: np.ndarray, name: str) -> np.ndarray:
    """f32 -> dtype, round to nearest even, written here: f16 through numpy's IEEE half, bf16 by
    rounding the f32 pattern's low half away (a NaN stays a NaN, quieted)."""
    s = np.array(s, np.float32, copy=True, order="C")
    if name == "f32":
        return s
    if name == "f16":
        with np.errstate(all="ignore"):
            return s.astype(np.float16)
    u = s.view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    r = np.where(np.isnan(s), (u >> 16) | 0x40, r).astype(np.uint16)
    return r.view(NP["bf16"])


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


# ---------------------------------------------------------------------------------------------
# judging torch (a peer): where it differs from the reference, the test's model decides
# ---------------------------------------------------------------------------------------------
def torch_path(fn: str, name: str) -> str:
    """A finding's code path (torch's version and CPU capability are part of the key)."""
    return f"torch.{fn} (CPU) {name}"


def agree_with(model: np.ndarray, ours: np.ndarray, nan_class: bool = False):
    """The independent model's verdict on ``ours`` at flat indices: equal bits (or both NaN with
    ``nan_class``)."""
    model, ours = np.asarray(model), np.asarray(ours)

    def ours_right(idx: np.ndarray) -> np.ndarray:
        o, m = ours.reshape(-1)[idx], model.reshape(-1)[idx]
        if o.shape != m.shape or o.dtype != m.dtype:
            return np.zeros(idx.shape, bool)
        return same_class(o, m) if nan_class else bits(o) == bits(m)
    return ours_right


def judge_torch(path: str, ours: np.ndarray, theirs, ours_right, *, documented=(),
                nan_class: bool = False, mismatch: str = "result dtype / shape",
                findings: peers.Findings | None = None) -> int:
    """Judge torch's result ``theirs`` where it differs from ``ours`` (bits; NaN as a class
    with ``nan_class``). ``documented`` holds ``(class, mask)`` pairs (a mask may be a callable
    of torch's result) naming the documented divergence classes; the other disagreements are
    "undocumented". Every class is decided by ``ours_right``, the test's independent model: the
    reference wrong fails, torch wrong is a finding. A result torch gives with another dtype or
    shape is judged on every element, as class ``mismatch``. Returns the disagreements."""
    theirs = from_torch(theirs) if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    ours = np.asarray(ours)
    if theirs.shape != ours.shape or theirs.dtype != ours.dtype:
        disagree = np.ones(ours.shape, bool)
        documented = ((f"{mismatch} ({theirs.dtype}{list(theirs.shape)})", disagree),)
    else:
        disagree = ~same_class(ours, theirs) if nan_class else bits(ours) != bits(theirs)
    rest = disagree.copy()

    def show(i):
        return (f"flat {i.tolist()}: ours {ours.reshape(-1)[i].tolist()}, torch "
                f"{theirs.reshape(-1)[i].tolist() if theirs.size == ours.size else theirs}")
    for klass, mask in (*documented, ("undocumented", None)):
        if mask is None:
            m = rest
        else:
            m = disagree & np.broadcast_to(mask(theirs) if callable(mask) else mask,
                                           disagree.shape)
            rest &= ~m
        peers.judge("torch", path, m, ours_right, klass, findings).assert_ours_right(
            f"{path} ({klass})", show)
    return int(disagree.sum())


def nan_payload(ours: np.ndarray):
    """Mask (of torch's result) where both are NaN: a NaN whose payload torch rewrote."""
    def mask(theirs):
        return np.isnan(wide(ours)) & np.isnan(wide(theirs))
    return mask


def _flip_one(arr: np.ndarray, flat: int = 0) -> np.ndarray:
    """A planted wrong value: element ``flat`` with its lowest bit flipped."""
    out = np.array(arr, copy=True, order="C")
    if out.dtype == bool:
        out.reshape(-1)[flat] = not out.reshape(-1)[flat]
        return out
    b = bits(out).reshape(-1)
    b[flat] ^= 1
    return b.view(out.dtype).reshape(out.shape)


# =============================================================================================
# Gather
# =============================================================================================
def gather_model(x: np.ndarray, idx: np.ndarray, axis: int, bd: int) -> np.ndarray:
    """HIR Gather's element rule, one element at a time on the raw bits: out[c.., i.., t..] =
    x[c.., index[b.., i..], t..], b.. being the first bd of c.."""
    xb = bits(x)
    inner = idx.shape[bd:]
    shape = (*x.shape[:axis], *inner, *x.shape[axis + 1:])
    out = np.zeros(shape, xb.dtype)
    for p in np.ndindex(*shape):
        c, i, t = p[:axis], p[axis:axis + len(inner)], p[axis + len(inner):]
        out[p] = xb[(*c, int(idx[(*c[:bd], *i)]), *t)]
    return out.view(x.dtype)


def check_gather(x: np.ndarray, idx: np.ndarray, axis_arg: int, bd: int, *, ours=None,
                 edit_peer=None, findings=None) -> dict[str, int]:
    """The reference's Gather against the element-rule model, and torch (advanced indexing,
    index_select and torch.gather, each a code path) judged by that model where it differs.
    ``ours`` / ``edit_peer(path, torch_result)`` plant values. Returns disagreements by path."""
    r = x.ndim
    axis = axis_arg % r
    shape = list(x.shape)
    inner = idx.shape[bd:]
    if ours is None:
        ours = run(Gather(axis_arg, bd), x, idx)
    model = gather_model(x, idx, axis, bd)
    name = str(dtype_of(x))
    right = agree_with(model, ours)
    xt, it = to_torch(x), torch.from_numpy(idx.astype(np.int64))
    results = {}
    # torch advanced indexing: an arange per leading axis, the indices for the gathered one
    rank = axis + len(inner)
    lead_idx = [torch.arange(shape[j]).reshape([shape[j] if a == j else 1 for a in range(rank)])
                for j in range(axis)]
    results["advanced indexing"] = xt[(*lead_idx, it.reshape(
        [*shape[:bd], *[1] * (axis - bd), *inner]))]
    if bd == 0:
        results["advanced indexing, one index tensor"] = xt[(slice(None),) * axis + (it,)]
        if len(inner) == 1:
            results["index_select"] = torch.index_select(xt, axis, it)
    # torch.gather (indices expanded to x's rank)
    lead, tail, k = shape[:axis], shape[axis + 1:], math.prod(inner)
    g = it.reshape([*shape[:bd], *[1] * (axis - bd), k, *[1] * len(tail)]).expand(
        [*lead, k, *tail])
    results["gather"] = torch.gather(xt, axis, g).reshape([*lead, *inner, *tail])
    counts = {}
    for fn, t in results.items():
        path = torch_path(fn, name)
        theirs = from_torch(t)
        if edit_peer is not None:
            theirs = edit_peer(fn, theirs)
        # D100: torch.gather on CPU rewrites bf16 / f16 NaN payloads (a documented class)
        doc = (("D100 gather rewrites 16-bit NaN payloads", nan_payload(ours)),) \
            if fn == "gather" and name in ("bf16", "f16") else ()
        counts[fn] = judge_torch(path, ours, theirs, right, documented=doc, findings=findings)
    same_bits(ours, model)
    return counts


@given(st.data())
def test_gather_matches_the_element_rule_and_judges_torch(data):
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
    check_gather(x, idx, axis_arg, bd)


def test_torch_gather_16bit_nan_payloads_are_judged():
    """D100: the reference moves bits, NaN payloads included. torch.gather on CPU (rank >= 2)
    rewrites bf16 / f16 NaN payloads (2.13: bf16 0x7F81 and 0xFFC1 come back as 0xFFFF), while
    index_select, advanced indexing and f32 gather keep them: judged by the model, recorded
    under D100, not asserted (a torch that keeps the bits records nothing)."""
    for name, nan in (("bf16", 0x7F81), ("bf16", 0xFFC1), ("f16", 0x7C01)):
        x = np.full((3, 3), nan, np.uint16).view(NP[name])
        idx = np.zeros((3, 1), np.int64)
        ours = run(Gather(1, 1), x, idx[:, 0])
        assert (bits(ours) == nan).all()
        check_gather(x, idx[:, 0], 1, 1, ours=ours)


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
    assert out.tolist() == [x[4].tolist(), x[0].tolist()]
    check_gather(x, np.array([4, 0], np.int32), 0, 0, ours=out)
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
    ones, by the exact model's bf16 additions), rounded once."""
    x = np.array([2.0 ** 24, 1.0, 1.0], np.float32)
    left = run(Reduce((0,), False, ReduceKind.SUM, "fold_left"), x)
    right = run(Reduce((0,), False, ReduceKind.SUM, "fold_right"), x)
    assert float(left) == 2.0 ** 24 and float(right) == 2.0 ** 24 + 2
    b = np.array([256.0, 1.0, 1.0], np.float32).astype(NP["bf16"])
    assert float(run(Reduce((0,), False, ReduceKind.SUM, "fold_left"), b)) == 258.0
    b0, b1, b2 = (int(v) for v in bits(b))
    steps = exact.binary_bits("add", exact.binary_bits("add", b0, b1, "bf16"), b2, "bf16")
    assert exact.decode(steps, "bf16").mag == 256  # bf16 steps


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


def _wrap(v: int, name: str) -> int:
    """A Python integer wrapped into the dtype (two's complement)."""
    ii = np.iinfo(NP[name])
    return (v - int(ii.min)) % (int(ii.max) - int(ii.min) + 1) + int(ii.min)


def test_reduce_integer_sum_wraps_in_dtype():
    """D34: integer sums wrap in the input dtype. torch accumulates (and returns) int64 instead:
    judged by the Python-int model and recorded (class D34), not asserted."""
    x = np.array([2 ** 31 - 1, 1, 5], np.int32)
    ours = run(Reduce((0,), False, ReduceKind.SUM), x)
    want = _wrap(sum(x.tolist()), "i32")
    assert ours.dtype == np.int32 and int(ours) == want == -(2 ** 31) + 5
    judge_torch(torch_path("sum", "i32"), ours, torch.sum(to_torch(x)),
                lambda idx: np.full(idx.shape, int(ours) == want),
                mismatch="D34 integer sum accumulates in int64")


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
    # torch (2.13) invents NaN: every invented element is a finding of torch's, never a failure
    try:
        invented = torch.mean(torch.zeros((3, 0), dtype=TORCH[name]), dim=1).numel()
    except RuntimeError:  # a torch that refuses, as the spec asks, records nothing
        invented = 0
    peers.FINDINGS.record("torch", torch_path("mean", name) + " over zero elements",
                          "D101 empty mean invents a value", invented)



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

# --- torch cross-checks on seeded data (torch judged; its counts recorded, not asserted) ---
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


U32 = Fraction(1, 2 ** 24)
PREC = {"f32": 24, "bf16": 8, "f16": 11}
SUB = {"f32": Fraction(1, 2 ** 149), "bf16": Fraction(1, 2 ** 133), "f16": Fraction(1, 2 ** 24)}


def tree_bound_ok(x: np.ndarray, name: str, axes: tuple, kind: str, ours: np.ndarray,
                  idx: np.ndarray) -> np.ndarray:
    """An independent necessary condition on a tree sum / mean (flat result indices ``idx``):
    n <= 2 — the sequential chain, the only tree. Otherwise every order of the n - 1 f32
    additions lies within γ(n-1)·Σ|x| of the exact sum (Higham, Accuracy and Stability of
    Numerical Algorithms, §4.2), widened by the mean's division and the final rounding to the
    dtype (relative 2^-p plus half a subnormal each); exact rationals throughout. Fibers with a
    non-finite element or where an order could overflow are left to ``admits``."""
    f, _, _ = fibers(wide(x), axes)
    n = f.shape[-1]
    if n <= 2:
        seq = seq_reference(x, name, axes, kind, True, False).reshape(-1)
        return same_class(ours.reshape(-1)[idx], seq[idx])
    f = f.reshape(-1, n)
    o = wide(ours).reshape(-1)
    g = (n - 1) * U32 / (1 - (n - 1) * U32)
    u_dt = Fraction(1, 2 ** PREC[name])
    div = n if kind == "mean" else 1
    big = Fraction(float(ml_dtypes.finfo(NP[name]).max)) / 2
    out = []
    for i in idx.tolist():
        row = f[i]
        if not np.isfinite(row).all():
            out.append(True)
            continue
        vals = [Fraction(float(v)) for v in row]
        s, a = sum(vals), sum(abs(v) for v in vals)
        if a * (1 + g) >= big:
            out.append(True)
            continue
        e = g * a  # the f32 tree
        if kind == "mean":  # the f32 division
            e = e / n + U32 * (abs(s) + e) / n + SUB["f32"] / 2
        e = e + u_dt * (abs(s) / div + e) + SUB[name] / 2  # the rounding to the dtype
        out.append(bool(np.isfinite(o[i])) and abs(Fraction(float(o[i])) - s / div) <= e)
    return np.array(out, bool)


def check_tree_reduce(x: np.ndarray, name: str, axes: tuple, kind: str, *, ours=None,
                      edit_peer=None, findings=None) -> int:
    """unordered_tree sum / mean: the reference's result is admitted (reductions.admits); torch's
    is judged where it lies outside the admitted set, by admits and the independent bound
    (``tree_bound_ok``) on ours. Returns how many torch results were outside."""
    if ours is None:
        ours = run(Reduce(axes, False, ReduceKind(kind), "unordered_tree"), x)
    adm = admits(ours, x, kind, axes, policy="unordered_tree")
    assert adm, (kind, name, axes, adm.detail)
    fn = torch.sum if kind == "sum" else torch.mean
    theirs = from_torch(fn(to_torch(x), dim=list(axes)))
    if edit_peer is not None:
        theirs = edit_peer(kind, theirs)
    ok = np.asarray(adm.admitted).reshape(ours.shape)
    path = torch_path(kind, name)
    if theirs.shape != ours.shape or theirs.dtype != ours.dtype:
        outside, klass = np.ones(ours.shape, bool), f"result dtype / shape ({theirs.dtype})"
    else:
        outside = ~np.asarray(admits(theirs, x, kind, axes).admitted).reshape(ours.shape)
        klass = "D101 sum / mean outside the admitted set"

    def ours_right(idx):
        return ok.reshape(-1)[idx] & tree_bound_ok(x, name, axes, kind, ours, idx)
    j = peers.judge("torch", path, outside, ours_right, klass, findings)
    j.assert_ours_right(f"{path} ({klass})")
    return j.disagreements


@pytest.mark.parametrize("name", FLOATS)
def test_tree_reduce_torch_judged_by_the_admitted_set(name):
    """Every torch.sum / torch.mean result outside the unordered_tree admitted set is judged
    (the reference must be admitted and within the independent bound) and recorded under D101:
    torch 2.13 had none, on either CPU capability — not asserted."""
    rng = np.random.default_rng(100)
    results = 0
    for x in _seeded(name, rng, 150):
        axes = _axes_for(rng, x.ndim)
        for kind in ("sum", "mean"):
            check_tree_reduce(x, name, axes, kind)
            results += math.prod(s for a, s in enumerate(x.shape) if a not in axes)
    assert results == 3598  # the seeded data (D101: 3,598 results per dtype)


def check_extremes(x: np.ndarray, name: str, axes: tuple, kind: str, *, ours=None,
                   edit_peer=None, findings=None) -> int:
    """max / min / abs_max (keepdim) against the independent ``_extreme_reference``; torch.amax /
    amin (abs().amax for abs_max) judged by it where it differs (NaN as a class). Its choice of a
    zero's sign where the fiber holds both is the documented class D101. Returns the
    disagreements."""
    if ours is None:
        ours = run(Reduce(axes, True, ReduceKind(kind)), x)
    ref = _extreme_reference(x, name, axes, kind, True)
    xt = to_torch(x)
    fn = torch.amin if kind == "min" else torch.amax
    theirs = from_torch(fn(xt.abs() if kind == "abs_max" else xt, dim=list(axes), keepdim=True))
    if edit_peer is not None:
        theirs = edit_peer(kind, theirs)
    path = torch_path({"max": "amax", "min": "amin", "abs_max": "abs().amax"}[kind], name)
    doc = ()
    if name in FLOATS:
        doc = (("D101 amax / amin zero sign",
                lambda t: (wide(ours) == 0) & (wide(t) == 0)),)
    n = judge_torch(path, ours, theirs, agree_with(ref, ours, nan_class=True), documented=doc,
                    nan_class=True, findings=findings)
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    assert same_class(ours, ref).all()
    return n


ZERO_POOL = [0.0, -0.0, -0.0, 0.0, -1.0, float("nan"), 1.0]


@pytest.mark.parametrize("name", FLOATS)
def test_extremes_torch_judged(name):
    """Every element where torch.amax / amin / abs().amax differs from the reference is decided
    by the independent reference; torch 2.13 differs only in the sign of a zero whose fiber holds
    both (35 amax, 61 amin results per dtype on AVX2 and DEFAULT alike: D101) — recorded, not
    asserted. The seeded data's own counts (ours) are."""
    rng = np.random.default_rng(200)
    cases = list(_seeded(name, rng, 75)) + list(_seeded(name, rng, 75, pool=ZERO_POOL))
    results = {"max": 0, "min": 0, "abs_max": 0}
    mixed = {"max": 0, "min": 0}
    for x in cases:
        axes = _axes_for(rng, x.ndim)
        f, _, _ = fibers(wide(x), axes)
        both = ((f == 0) & np.signbit(f)).any(-1) & ((f == 0) & ~np.signbit(f)).any(-1)
        for kind in results:
            check_extremes(x, name, axes, kind)
            results[kind] += both.size
            if kind in mixed:
                ref = wide(_extreme_reference(x, name, axes, kind, False))
                mixed[kind] += int((both & (ref == 0)).sum())
    assert results == dict.fromkeys(results, 2309)
    assert mixed == {"max": 97, "min": 95}


def test_integer_abs_max_at_int_min_torch_judged():
    """D34: |INT_MIN| wraps to INT_MIN and is the largest magnitude. torch computes abs() first
    (also INT_MIN) and then amax, which ranks it the smallest (2.13: 7): judged by the Python-int
    model, recorded as D101/D34, not asserted."""
    x = np.array([[-(2 ** 31), 5, -7]], np.int32)
    ours = run(Reduce((1,), False, ReduceKind.ABS_MAX), x)
    assert int(ours[0]) == -(2 ** 31)
    ref = _extreme_reference(x, "i32", (1,), "abs_max", False)
    same_bits(ours, ref)
    judge_torch(torch_path("abs().amax", "i32"), ours, torch.amax(to_torch(x).abs(), dim=1),
                agree_with(ref, ours),
                documented=(("D101/D34 integer abs_max at INT_MIN",
                             (x == -(2 ** 31)).any(1)),))


# =============================================================================================
# InsertSlice / CacheUpdate
# =============================================================================================
def insert_model(dst: np.ndarray, upd: np.ndarray, offs) -> np.ndarray:
    """HIR InsertSlice on the raw bits, one update element at a time: out = dst, then
    out[off + p] = update[p] for every position p of the update."""
    out = bits(dst).copy()
    ub = bits(upd)
    for p in np.ndindex(*upd.shape):
        out[tuple(o + q for o, q in zip(offs, p, strict=True))] = ub[p]
    return out.view(dst.dtype)


def check_insert_slice(dst: np.ndarray, upd: np.ndarray, offs, *, ours=None, edit_peer=None,
                       findings=None) -> int:
    """The reference's InsertSlice against ``insert_model``; torch slice assignment judged by
    the model where it differs."""
    if ours is None:
        before = dst.copy()
        ours = run(InsertSlice(), dst, upd, *[np.array(o, np.int64) for o in offs])
        np.testing.assert_array_equal(bits(dst), bits(before))  # dst untouched
    model = insert_model(dst, upd, offs)
    t = to_torch(dst).clone()
    t[tuple(slice(o, o + u) for o, u in zip(offs, upd.shape, strict=True))] = to_torch(upd)
    theirs = from_torch(t)
    if edit_peer is not None:
        theirs = edit_peer("slice assignment", theirs)
    n = judge_torch(torch_path("Tensor.__setitem__ (slice assignment)", str(dtype_of(dst))),
                    ours, theirs, agree_with(model, ours), findings=findings)
    same_bits(ours, model)
    return n


@given(st.data())
def test_insert_slice_matches_the_model_and_judges_torch(data):
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
    np.testing.assert_array_equal(bits(dst), bits(before))  # dst untouched
    check_insert_slice(dst, upd, offs, ours=ours)


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


def cache_model(cache: np.ndarray, cur: int, s: int, new: np.ndarray) -> np.ndarray:
    """HIR CacheUpdate on the raw bits, one element at a time: out = cache, then
    out[b, cur + j, h, d] = new[b, j, h, d] for j < s."""
    out = bits(cache).copy()
    nb = bits(new)
    for b, j, h, d in np.ndindex(*new.shape):
        if j < s:
            out[b, cur + j, h, d] = nb[b, j, h, d]
    return out.view(cache.dtype)


def check_cache_update(cache: np.ndarray, cur: int, s: int, new: np.ndarray, ours: np.ndarray,
                       *, edit_peer=None, findings=None) -> int:
    """The reference's CacheUpdate result against ``cache_model``; torch's slice assignment
    judged by the model where it differs."""
    model = cache_model(cache, cur, s, new)
    t = to_torch(cache).clone()
    t[:, cur:cur + s] = to_torch(new)[:, :s]
    theirs = from_torch(t)
    if edit_peer is not None:
        theirs = edit_peer("slice assignment", theirs)
    n = judge_torch(torch_path("Tensor.__setitem__ (cache window)", str(dtype_of(cache))),
                    ours, theirs, agree_with(model, ours), findings=findings)
    same_bits(ours, model)
    return n


@given(st.data())
def test_cache_update_matches_the_model_and_judges_torch(data):
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
    check_cache_update(cache, cur, s, new, ours)


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
        check_cache_update(cache, cur, s, new, out)


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


TOPK_CLASSES = ("D103 tie order (fibers)", "D103 NaN ranked largest (fibers)",
                "D103 tie order in a NaN fiber (fibers)", "undocumented (fibers)")


def check_topk(x: np.ndarray, name: str, k: int, axis: int, largest: bool, *, ours=None,
               edit_peer=None, findings=None) -> dict[str, int]:
    """The reference's TopK (sorted) against ``topk_reference``, the per-fiber Python sort,
    bit for bit; torch.topk judged per fiber where its values (as numbers, NaN as a class) or
    indices differ, by that sort. The classes (D103): tie order without NaN, NaN ranked as the
    largest value, tie order in a fiber with a NaN, and anything else (undocumented). Returns
    torch's fibers per class and the fiber counts."""
    axis %= x.ndim
    v, i = run(TopK(k, axis, largest, True), x) if ours is None else ours
    rv, ri = topk_reference(x, name, k, axis, largest)
    xt = to_torch(x).to(torch.float32) if name == "u8" else to_torch(x)  # no u8 topk in torch
    tv, ti = torch.topk(xt, k, dim=axis, largest=largest, sorted=True)
    tv, ti = from_torch(tv), ti.numpy()
    if edit_peer is not None:
        tv, ti = edit_peer("topk", (tv, ti))
    path = torch_path("topk", name + (" (as f32)" if name == "u8" else ""))

    def last(a):
        return np.moveaxis(np.asarray(a), axis, -1)

    def num(a):  # values as numbers
        return last(wide(a).astype(np.float64) if name in FLOATS else np.asarray(a).astype(
            np.int64))
    has_nan = np.isnan(last(wide(x))).any(-1) if name in FLOATS else np.zeros(
        last(x).shape[:-1], bool)
    nf = has_nan.size
    ob, rb = last(bits(v)).reshape(nf, k), last(bits(rv)).reshape(nf, k)
    oi, rin = last(i).reshape(nf, k), last(ri).reshape(nf, k)

    def ours_right(fidx):  # per fiber: ours' values and indices are the reference sort's
        return (ob[fidx] == rb[fidx]).all(-1) & (oi[fidx] == rin[fidx]).all(-1)
    if tv.shape != v.shape or ti.shape != i.shape or (name in FLOATS and tv.dtype != v.dtype):
        classes = {f"result dtype / shape ({tv.dtype}{list(tv.shape)}, fibers)":
                   np.ones(nf, bool)}
    else:
        ov, tvn = num(v).reshape(nf, k), num(tv).reshape(nf, k)
        same = ov == tvn
        if name in FLOATS:
            same |= np.isnan(ov) & np.isnan(tvn)
        val_differ = ~same.all(-1)
        idx_differ = (oi != last(ti).reshape(nf, k)).any(-1)
        nan = has_nan.reshape(-1)
        classes = dict(zip(TOPK_CLASSES, (idx_differ & ~val_differ & ~nan, val_differ & nan,
                                          idx_differ & ~val_differ & nan, val_differ & ~nan),
                           strict=True))
    counts = {}
    for klass, mask in classes.items():
        j = peers.judge("torch", path, mask, ours_right, klass, findings)
        j.assert_ours_right(f"{path} ({klass})", lambda f: f"fibers {f.tolist()}")
        counts[klass] = j.disagreements
    same_bits(v, rv)
    np.testing.assert_array_equal(i, ri)
    assert i.dtype == np.int64
    counts["fibers"], counts["no_nan"] = nf, int((~has_nan).sum())
    return counts


@given(st.data())
def test_topk_matches_reference_and_judges_torch(data):
    """HIR TopK: values keep x's dtype, indices are i64; ties by original index (ARCHITECTURE.md:
    'sort and top-k break ties by original index (including between -0 and +0)')."""
    name = data.draw(st.sampled_from((*FLOATS, "i32", "i64", "u8")))
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    k = data.draw(st.integers(0, n))
    largest = data.draw(st.booleans())
    x = data.draw(arrays(name, shape))
    check_topk(x, name, k, axis, largest)


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
    reference returns the sorted order (D103). torch's sorted=False selection is judged per row
    by the hand-derived selected set."""
    x = np.array([[5, 1, 9, 3, 7], [2, 8, 6, 4, 0]], np.int32)
    vs, is_ = run(TopK(3, -1, True, True), x)
    vu, iu = run(TopK(3, -1, True, False), x)
    np.testing.assert_array_equal(vu, vs)
    np.testing.assert_array_equal(iu, is_)
    want = [{2, 4, 0}, {1, 2, 3}]  # the three largest of each row, by hand
    assert [set(r) for r in iu.tolist()] == want
    _, ti = torch.topk(to_torch(x), 3, dim=-1, sorted=False)
    differ = np.array([set(r) != w for r, w in zip(ti.tolist(), want, strict=True)])
    peers.judge("torch", torch_path("topk sorted=False", "i32"), differ,
                lambda rows: np.array([set(iu[r].tolist()) == want[r] for r in rows]),
                "D103 selected set (rows)").assert_ours_right("TopK sorted=False")


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


TIE_POOL = [1.0, 1.0, 2.0, -0.0, 0.0, 3.0, float("nan"), -1.0]


@pytest.mark.parametrize("name", FLOATS)
def test_topk_torch_judged_on_tie_heavy_data(name):
    """TopK against the per-fiber sort on seeded tie-heavy data (a small pool with ties, ±0 and
    NaN; seed 300, 150 cases per dtype, k in [1, n], largest drawn). Every fiber where torch.topk
    differs is decided by the sort and recorded per D103 class — for torch 2.13 (AVX2 and DEFAULT
    alike): 102 tie-order fibers of 2,488 without NaN, 367 NaN-ranked-largest fibers (all with
    largest=True), 48 tie-order fibers with a NaN — not asserted. The data's own counts are."""
    rng = np.random.default_rng(300)
    total = dict.fromkeys(("fibers", "no_nan"), 0)
    for x in _seeded(name, rng, 150, pool=TIE_POOL):
        axis = int(rng.integers(0, x.ndim))
        k = int(rng.integers(1, x.shape[axis] + 1))
        largest = bool(rng.integers(0, 2))
        counts = check_topk(x, name, k, axis, largest)
        for key in total:
            total[key] += counts[key]
    assert total == {"fibers": 3392, "no_nan": 2488}


# =============================================================================================
# the checks themselves: planted errors (ours fails; torch's is a finding, not a failure)
# =============================================================================================
_PX = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 5.5) / 4  # no NaN, no ties, no zero
_PIDX = np.array([[3, 0], [1, 1]], np.int64)
_PNEW = np.arange(24, dtype=np.float32).reshape(1, 3, 2, 4) + 1


def _planted_cache() -> np.ndarray:
    return run(CacheUpdate(), np.zeros((1, 8, 2, 4), np.float32), np.array(5, np.int32),
               np.array(3, np.int32), _PNEW)


def _plus(v: float):
    """A planted wrong value: element 0 (flat) plus ``v``."""
    def tamper(a):
        out = np.array(a, np.float32, copy=True)
        out.reshape(-1)[0] += np.float32(v)
        return out.astype(a.dtype)
    return tamper


#: per check helper: (check(ours=, edit_peer=, findings=), the reference's result, how to plant a
#: wrong value in a result, the class a planted torch value is recorded under)
PLANTED = {
    "gather": (lambda **kw: check_gather(_PX, _PIDX, 2, 1, **kw),
               lambda: run(Gather(2, 1), _PX, _PIDX), _flip_one, "undocumented"),
    "insert_slice": (lambda **kw: check_insert_slice(_PX[0], _PX[1, :2, :2], (1, 2), **kw),
                     lambda: run(InsertSlice(), _PX[0], _PX[1, :2, :2], np.array(1, np.int32),
                                 np.array(2, np.int32)), _flip_one, "undocumented"),
    "cache_update": (
        lambda ours=None, **kw: check_cache_update(
            np.zeros((1, 8, 2, 4), np.float32), 5, 3, _PNEW,
            _planted_cache() if ours is None else ours, **kw),
        lambda: _planted_cache(), _flip_one, "undocumented"),
    "tree_sum": (lambda **kw: check_tree_reduce(_PX, "f32", (2,), "sum", **kw),
                 lambda: run(Reduce((2,), False, ReduceKind.SUM, "unordered_tree"), _PX),
                 _plus(1000.0), "D101 sum / mean outside the admitted set"),
    "extremes": (lambda **kw: check_extremes(_PX, "f32", (1, 2), "max", **kw),
                 lambda: run(Reduce((1, 2), True, ReduceKind.MAX), _PX), _flip_one,
                 "undocumented"),
    "topk": (lambda **kw: check_topk(_PX, "f32", 3, 2, True, **kw),
             lambda: run(TopK(3, 2, True, True), _PX),
             lambda r: (_flip_one(r[0]), r[1]) if isinstance(r, tuple) else _flip_one(r),
             "undocumented (fibers)"),
}


def _copy(result):
    return tuple(np.copy(r) for r in result) if isinstance(result, tuple) else np.copy(result)


@pytest.mark.parametrize("case", list(PLANTED))
def test_planted_wrong_reference_value_fails(case):
    """Meta-test: each check helper passes on the reference's result and fails when one element
    of it is wrong, the peer being right there (the peer's result is replaced by the reference's
    own, so the meta-test does not depend on torch): the judge convicts the reference, or the
    direct check against the independent model does."""
    check, result, tamper, _ = PLANTED[case]
    ours = result()

    def right_peer(path, t):
        return _copy(ours)
    findings = peers.Findings()
    check(ours=ours, edit_peer=right_peer, findings=findings)
    with pytest.raises(AssertionError):
        check(ours=tamper(ours), edit_peer=right_peer, findings=findings)
    if case != "tree_sum":  # the admitted-set assertion precedes the judge there
        with pytest.raises(AssertionError, match="the reference is wrong on 1 element"):
            check(ours=tamper(ours), edit_peer=right_peer, findings=findings)
    assert not findings  # nothing was blamed on the peer


def test_planted_wrong_reference_value_fails_the_independent_tree_bound():
    """The independent bound that judges a tree sum / mean (when torch lies outside the admitted
    set) rejects a planted wrong value and admits the reference's, n > 2 and n <= 2 alike."""
    for axes in ((2,), (0,)):
        for kind in ("sum", "mean"):
            ours = run(Reduce(axes, False, ReduceKind(kind), "unordered_tree"), _PX)
            idx = np.arange(ours.size)
            assert tree_bound_ok(_PX, "f32", axes, kind, ours, idx).all()
            wrong = ours + np.float32(0.5)
            assert not tree_bound_ok(_PX, "f32", axes, kind, wrong, idx).any()
    one_ulp = _flip_one(run(Reduce((0,), False, ReduceKind.SUM, "unordered_tree"), _PX))
    assert not tree_bound_ok(_PX, "f32", (0,), "sum", one_ulp, np.array([0])).any()


@pytest.mark.parametrize("case", list(PLANTED))
def test_planted_wrong_peer_value_is_a_finding_not_a_failure(case):
    """Meta-test: one wrong peer value (torch's result replaced by the reference's, one element
    wrong) does not fail; it is recorded, once, in the given ledger, keyed by torch's version
    (with CPU capability), the code path and its class."""
    check, result, tamper, klass = PLANTED[case]
    ours = result()
    before = peers.Findings(peers.FINDINGS)
    findings = peers.Findings()
    edited = []

    def edit_once(path, t):  # the peer: the reference's result, one wrong element on one path
        edited.append(path)
        return tamper(_copy(ours)) if len(edited) == 1 else _copy(ours)
    check(edit_peer=edit_once, findings=findings)
    assert sum(findings.values()) == 1, findings.report()
    (key,) = findings
    assert (key.peer, key.version, key.klass) == ("torch", peers.peer_version_label("torch"),
                                                  klass)
    assert key.code_path.startswith("torch.") and key.code_path.endswith("f32")
    assert peers.FINDINGS == before  # recorded in the ledger it was given only


def test_planted_torch_zero_sign_is_the_documented_class():
    """A zero of the other sign from torch.amax (ours +0, fiber holding both) is D101's class."""
    x = np.array([[-0.0, 0.0, -1.0]], np.float32)
    findings = peers.Findings()

    def neg_zero(path, t):
        return np.full_like(t, -0.0)
    check_extremes(x, "f32", (1,), "max", edit_peer=neg_zero, findings=findings)
    assert {k.klass: n for k, n in findings.items()} == {"D101 amax / amin zero sign": 1}
