"""Top-K as an ordinary reduce over an indexed Tile (issue 37; ``semantics/topk_reducer.py``,
``semantics/dsl/topk_sugar.py``; docs/decisions.md D486–D488).

Tile design: "The general region form is therefore ordinary reduce over an indexed Tile" (T-O12)
and "topk<K>(x, axis, order...) is a library shorthand for that region, not a second execution
model or primitive." (T-O13)."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics import (
    ordering,
    typeinfer,  # noqa: F401  (registers every rule)
)
from tilefoundry.semantics.dsl import func, module, parse_module, to_source
from tilefoundry.semantics.dsl.errors import DSLError
from tilefoundry.semantics.dtypes import cast, widen_to_f32
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Tuple, Var, reachable
from tilefoundry.semantics.ops.tensor import TopK, Transpose
from tilefoundry.semantics.ops.tile_reduce import CustomReduce
from tilefoundry.semantics.reductions import POLICIES
from tilefoundry.semantics.topk_reducer import (
    TOPK_PROOFS,
    TopKMerge,
    topk_fold,
    topk_identity_state,
    topk_reduce,
)
from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
from tilefoundry.semantics.types import TensorType, TupleType

F32, BF16, F16, I32, I64 = DType.F32, DType.BF16, DType.F16, DType.I32, DType.I64
POOL = np.float32([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 1.0, 3.0, np.inf, -np.inf])


# --- an independent model: successive stable argsorts (least significant key first) --------
def model_topk(x: np.ndarray, k: int, axis: int, largest: bool, nan: str):
    """Top-K along ``axis`` by numpy's stable argsort, written independently of ordering.py:
    sort by index (the identity), then stably by value (-0 == +0), then stably by NaN class."""
    f = np.moveaxis(np.asarray(x), axis, -1)
    w = widen_to_f32(f.reshape(-1)).reshape(f.shape).astype(np.float64) \
        if f.dtype.kind not in "iub" else f.astype(np.float64)
    isnan = np.isnan(w)
    key = np.where(isnan | (w == 0), 0.0, w)
    key = -key if largest else key
    order = np.broadcast_to(np.arange(f.shape[-1]), f.shape)
    o1 = np.argsort(np.take_along_axis(key, order, -1), -1, kind="stable")
    order = np.take_along_axis(order, o1, -1)
    cls = np.take_along_axis(isnan if nan != "first" else ~isnan, order, -1).astype(np.int8)
    order = np.take_along_axis(order, np.argsort(cls, -1, kind="stable"), -1)[..., :k]
    return np.take_along_axis(f, order, -1), order.astype(np.int64)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _data(rng, shape, dt: DType, nan: bool) -> np.ndarray:
    pool = POOL if not nan else np.append(POOL, np.float32([np.nan, np.nan]))
    if dt.is_float:
        return cast(rng.choice(pool, shape), dt)
    return rng.integers(-3, 4, shape).astype(np.int32)


def _identity(r: TopKMerge, x: np.ndarray, axis: int, dt: DType):
    batch = tuple(n for d, n in enumerate(x.shape) if d != axis % x.ndim)
    return topk_identity_state(r, batch, dt)


# --- T-O12: the reduce -----------------------------------------------------------------------
@pytest.mark.parametrize("dt", [F32, BF16, F16, I32])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("nan", ["last", "first"])
def test_reduce_equals_argsort_model_and_hir_topk(dt, largest, nan):
    """topk via the reduce == the independent argsort model (values bit for bit, indices) on
    random and adversarial data (ties, ±0, duplicates, ±inf, NaN), and == HIR TopK where TopK
    defines the order (nan='last')."""
    rng = np.random.default_rng(486)
    for shape, axis, k in (((4, 16), 1, 4), ((9, 3), 0, 9), ((2, 3, 7), 1, 2), ((5, 1), 1, 1)):
        x = _data(rng, shape, dt, nan=dt.is_float)
        x[0] = x[0].reshape(-1)[0]  # a fiber of one repeated value: ties decide everything
        r = TopKMerge(k, largest, nan)
        v, i = topk_reduce(x, _identity(r, x, axis, dt), r, axis)
        mv, mi = model_topk(x, k, axis, largest, nan)
        assert _same_bits(v, mv) and np.array_equal(i, mi), (shape, axis)
        if nan == "last":
            tk = Call(TopK(k, axis, largest), (Var("x", TensorType(shape, dt)),))
            hv, hi = evaluate(Module((Function("f", tk.args, tk, None),)), "f", [x])
            assert _same_bits(v, np.moveaxis(hv, axis, -1)) and \
                np.array_equal(i, np.moveaxis(hi, axis, -1))


def test_zero_signs_tie_by_index_and_nan_placement():
    x = np.float32([[0.0, -0.0, 1.0, -0.0, 0.0, np.nan, -1.0]])
    v, i = topk_reduce(x, topk_identity_state(TopKMerge(4), (1,), F32), TopKMerge(4), 1)
    assert i.tolist() == [[2, 0, 1, 3]] and np.signbit(v).tolist() == [[False, False, True, True]]
    r = TopKMerge(2, False, "first")
    v, i = topk_reduce(x, topk_identity_state(r, (1,), F32), r, 1)
    assert i.tolist() == [[5, 6]]
    r = TopKMerge(2, True, "error")
    with pytest.raises(InvalidArgumentError, match="nan='error'"):
        topk_reduce(x, topk_identity_state(r, (1,), F32), r, 1)


def test_region_is_an_ordinary_fold_and_every_tree_agrees():
    """The design's region ``best = topk_insert(best, item)`` from identity_K: the literal left
    fold (and the right fold) of merge over lift(x_i) == the reduce; so do random trees over
    random chunkings, in random operand order (exact associativity and commutativity)."""
    rng = np.random.default_rng(7)
    for largest, nan in ((True, "last"), (False, "first")):
        r = TopKMerge(3, largest, nan)
        x = _data(rng, (5, 13), F32, nan=True)
        ident = topk_identity_state(r, (5,), F32)
        ref = topk_reduce(x, ident, r, 1)
        for right in (False, True):
            fv, fi = topk_fold(x, ident, r, 1, right=right)
            assert _same_bits(fv, ref[0]) and np.array_equal(fi, ref[1])
        for _ in range(20):
            cuts = np.sort(rng.choice(np.arange(1, 13), rng.integers(0, 6), replace=False))
            chunks = [ordering.topk_from(c, 3, int(lo), largest=largest, nan=nan)
                      for c, lo in zip(np.split(x, cuts, 1), [0, *cuts], strict=True)]
            while len(chunks) > 1:  # merge a random adjacent-or-not pair, random operand order
                a, b = rng.choice(len(chunks), 2, replace=False)
                m = ordering.topk_merge(chunks[a], chunks[b])
                chunks = [c for j, c in enumerate(chunks) if j not in (a, b)] + [m]
            assert _same_bits(chunks[0].values, ref[0]) and \
                np.array_equal(chunks[0].indices, ref[1])


def test_a_seed_is_included_once_and_may_be_unsorted():
    """An earlier chunk's state as the seed: the result is the Top-K of both chunks; the seed's
    slots may come in any order (the merge sorts them) and its empty slots are ignored."""
    rng = np.random.default_rng(3)
    r = TopKMerge(4)
    a, b = _data(rng, (3, 8), F32, True), _data(rng, (3, 8), F32, True)
    whole = topk_reduce(np.concatenate([b, a], 1), topk_identity_state(r, (3,), F32), r, 1)
    sv, si = topk_reduce(a, topk_identity_state(r, (3,), F32), r, 1)
    si = si + 8
    perm = rng.permutation(4)
    v, i = topk_reduce(b, (sv[:, perm], si[:, perm]), r, 1)
    assert _same_bits(v, whole[0]) and np.array_equal(i, whole[1])
    v, i = topk_reduce(b[:, :2], (np.full((3, 4), np.nan, np.float32),
                                  np.full((3, 4), -1, np.int64)), r, 1)
    assert (i[:, 2:] == -1).all() and (v[:, 2:] == 0).all() and not np.signbit(v[:, 2:]).any()


def test_merge_laws_hold_bit_exactly_on_sampled_states():
    """The laws the reducer claims, checked concretely on sampled states (K = 1..4; values with
    ties, ±0, ±inf, NaN; partially empty states; disjoint index ranges as a reduce's chunks
    have): associative, commutative, identity_K both sides — values bit for bit, indices."""
    rng = np.random.default_rng(488)

    def same(p, q):
        return _same_bits(p.values, q.values) and np.array_equal(p.indices, q.indices) and \
            np.array_equal(p.valid, q.valid)

    for k in (1, 2, 3, 4):
        for largest, nan in ((True, "last"), (False, "first"), (True, "first")):
            a, b, c = (ordering.topk_from(_data(rng, (6, int(rng.integers(0, 6))), F32, True),
                                          k, 100 * j, largest=largest, nan=nan)
                       for j in range(3))
            m = ordering.topk_merge
            e = ordering.topk_identity(k, (6,), F32, largest=largest, nan=nan)
            assert same(m(m(a, b), c), m(a, m(b, c)))
            assert same(m(a, b), m(b, a))
            assert same(m(e, a), a) and same(m(a, e), a)


def test_laws_are_the_proved_ones():
    """The reducer's claimed laws are exact, and each names a registered Z3 obligation that
    proves it (laws.topk_merge_k1 / k2; sort.merge_sorted's merge_K case)."""
    import tilefoundry.smt.obligations  # noqa: F401  (registers every obligation)
    from tilefoundry.smt.framework import REGISTRY

    r = TopKMerge(2)
    assert {lw.name: lw.over for lw in r.laws} == {"associative": "exact",
                                                   "commutative": "exact", "identity": "exact"}
    assert r.merge_contract and all(p in REGISTRY for p in TOPK_PROOFS)


# --- type rule -------------------------------------------------------------------------------
def _infer(op, x: TensorType, seed):
    args = (Var("x", x), seed)
    return infer_expr(Call(op, args))


def _seed(shape, dt):
    return Tuple((Var("sv", TensorType(shape, dt)), Var("si", TensorType(shape, I64))))


def test_type_rule_accepts_the_state_pair_and_returns_it():
    x = TensorType((4, 8), BF16)
    t = _infer(CustomReduce((1,), TopKMerge(3), "unordered_tree", False), x, _seed((4, 3), BF16))
    assert t == TupleType((TensorType((4, 3), BF16), TensorType((4, 3), I64)))
    t = _infer(CustomReduce((0,), TopKMerge(2), "fold_right", True), x, _seed((1, 8, 2), BF16))
    assert t.fields[1] == TensorType((1, 8, 2), I64)


@pytest.mark.parametrize("op,seed,match", [
    (CustomReduce((0, 1), TopKMerge(2)), _seed((2,), F32), "one indexed axis"),
    (CustomReduce((1,), TopKMerge(2)), _seed((4, 3), F32), "state pair"),
    (CustomReduce((1,), TopKMerge(2)), _seed((4, 2), BF16), "state pair"),
    (CustomReduce((1,), TopKMerge(2)), Var("s", TensorType((4, 2), F32)), "state pair"),
])
def test_type_rule_rejects(op, seed, match):
    with pytest.raises(TypeInferError, match=match):
        _infer(op, TensorType((4, 8), F32), seed)
    with pytest.raises(TypeInferError, match="no evaluable order"):
        _infer(CustomReduce((1,), TopKMerge(2)), TensorType((4, 8), DType.F8E8M0),
               _seed((4, 2), DType.F8E8M0))


def test_topkmerge_value_checks():
    for bad in (dict(k=0), dict(k=True), dict(k=2, nan="middle"), dict(k=2, largest=1)):
        with pytest.raises(InvalidArgumentError):
            TopKMerge(**bad)


# --- T-O13: the shorthand is that region -----------------------------------------------------
def test_shorthand_elaborates_to_the_reduce_not_a_primitive():
    """topk_merge(x, K, axis, ...) parses to CustomReduce(TopKMerge) (+ a Transpose putting K
    at the axis): no TopK op, no new op; it equals HIR TopK and the argsort model, and its
    to_source text (the expansion) parses back to the same module."""
    @func
    def f(x: Tensor[(5, 6), bf16]):  # noqa: F821
        return topk_merge(x, 3, axis=0, largest=False)  # noqa: F821

    m = module(f)
    ops = {type(n.op) for n in reachable(m["f"].body) if isinstance(n, Call)}
    assert ops == {CustomReduce, Transpose}
    (red,) = [n for n in reachable(m["f"].body) if isinstance(n, Call) and
              isinstance(n.op, CustomReduce)]
    assert red.op.reducer == TopKMerge(3, False, "last")
    x = cast(np.random.default_rng(1).choice(POOL, (5, 6)), BF16)
    v, i = evaluate(m, "f", [x])
    mv, mi = model_topk(x, 3, 0, False, "last")
    assert _same_bits(v, np.moveaxis(mv, -1, 0)) and np.array_equal(i, np.moveaxis(mi, -1, 0))
    tk = Call(TopK(3, 0, False), (Var("x", TensorType((5, 6), BF16)),))
    hv, hi = evaluate(Module((Function("f", tk.args, tk, None),)), "f", [x])
    assert _same_bits(v, hv) and np.array_equal(i, hi)
    m2 = parse_module(to_source(m))
    v2, i2 = evaluate(m2, "f", [x])
    assert _same_bits(v2, v) and np.array_equal(i2, i)


def test_shorthand_results_unpack_and_index_and_round_trip():
    """``v, i = topk_merge(...)`` and ``topk_merge(...)[0]`` (a written ``reduce_custom`` with a
    TopKMerge is tuple-valued too), and the printed expansion parses back to the same results."""
    text = ("from tilefoundry.semantics.dsl import *\n@func\n"
            "def f(x: Tensor[(4, 6), f32]):\n"
            "    v, i = topk_merge(x, 2, axis=0)\n"
            "    w = topk_merge(x * 2.0, 3)[0]\n"
            "    return v + 1.0, i, w\n\nmod = module(f)\n")
    m = parse_module(text)
    x = np.random.default_rng(5).choice(POOL[:8], (4, 6)).astype(np.float32)
    out = evaluate(m, "f", [x])
    assert [o.shape for o in out] == [(2, 6), (2, 6), (4, 3)]
    back = evaluate(parse_module(to_source(m)), "f", [x])
    assert all(_same_bits(a, b) for a, b in zip(out, back, strict=True))


@pytest.mark.parametrize("src,match", [
    ("topk_merge(x, 0)", "static int >= 1"),
    ("topk_merge(x)", "positionally"),
    ("topk_merge(x, 2, axis=5)", "not an axis"),
    ("topk_merge(x, 2, order=1)", "unknown keyword"),
    ("topk_merge(x, 2, nan='middle')", "nan"),
])
def test_shorthand_rejections_name_the_fix(src, match):
    text = (f"@func\ndef f(x: Tensor[(4, 6), f32]):\n    return {src}\n\nmod = module(f)\n")
    with pytest.raises(DSLError, match=match):
        parse_module("from tilefoundry.semantics.dsl import *\n" + text)


def test_shorthand_needs_a_static_shape():
    text = ("from tilefoundry.semantics.dsl import *\nN = DimVar('N', 1, 64)\n@func\n"
            "def f(x: Tensor[(N, 6), f32]):\n    return topk_merge(x, 2)\n\nmod = module(f)\n")
    with pytest.raises(DSLError, match="symbolic shape"):
        parse_module(text)


def test_policies_are_all_exact():
    """Every policy gives the one result (no admitted set is noted)."""
    rng = np.random.default_rng(0)
    x = _data(rng, (3, 9), F32, True)
    r = TopKMerge(4)
    xv = Var("x", TensorType((3, 9), F32))
    sv, si = Var("sv", TensorType((3, 4), F32)), Var("si", TensorType((3, 4), I64))
    outs = []
    for p in POLICIES:
        body = Call(CustomReduce((1,), r, p, False), (xv, Tuple((sv, si))))
        ev = evaluate(Module((Function("f", (xv, sv, si), body, None),)), "f",
                      [x, *topk_identity_state(r, (3,), F32)], report=True)
        assert not [c for _, c in ev.contracts if c.kind == "admitted_set"]
        outs.append(ev.value)
    assert all(_same_bits(o[0], outs[0][0]) and np.array_equal(o[1], outs[0][1]) for o in outs)
