"""Meta-tests of the oracle's contracts (oracle/compare.py).

Issue 'oracle', Must show: "the contracts accept every admitted result and reject planted
single-ULP, sign-of-zero and NaN-class errors where the contract is exact." Bad input: "A
candidate that returns the wrong number of outputs, wrong shapes, wrong dtypes, or raises: a
structured verdict saying so, never a crash of the oracle."
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilefoundry.oracle.compare import (
    ERROR,
    FAIL,
    PASS,
    UNJUDGED,
    check,
    check_candidate,
    ordered,
    ulp_distance,
)
from tilefoundry.semantics.dtypes import from_bits, to_bits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Tuple, Var
from tilefoundry.semantics.ops import Binary, BinaryKind, Unary, UnaryKind
from tilefoundry.semantics.ops.nn import MatMul
from tilefoundry.semantics.ops.tensor import Cast, Reduce, ReduceKind
from tilefoundry.semantics.types import TensorType

F32, BF16 = DType.F32, DType.BF16
NP = {F32: np.float32, BF16: ml_dtypes.bfloat16}
BITS = {F32: np.uint32, BF16: np.uint16}


def elementwise_module(dt: DType, n: int) -> Module:
    a = Var("a", TensorType((n,), dt))
    b = Var("b", TensorType((n,), dt))
    s = Call(Binary(BinaryKind.ADD), (a, b))
    body = Tuple((Call(Binary(BinaryKind.MUL), (s, b)), Call(Binary(BinaryKind.SUB), (a, b))))
    return Module((Function("f", (a, b), body, None),))


def bit_arrays(dt: DType, n: int):
    return st.lists(st.integers(0, np.iinfo(BITS[dt]).max), min_size=n, max_size=n).map(
        lambda v: from_bits(np.array(v, BITS[dt]), dt))


def next_up(x: np.ndarray, i: int) -> np.ndarray:
    """x with element i moved one step up the ordered line (never across NaN)."""
    y = np.array(x, copy=True)
    bits = to_bits(y)
    o = ordered(y)[i] + 1
    width = bits.dtype.itemsize * 8
    sign = 1 << (width - 1)
    bits[i] = o if o >= 0 else (sign | (-o))
    return from_bits(bits, DType.F32 if y.dtype == np.float32 else DType.BF16)


# ---------------------------------------------------------------------------------------------
# the exact contract
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [F32, BF16])
@given(data=st.data())
def test_exact_contract_accepts_the_reference_and_rejects_a_planted_ulp(dt, data):
    n = 6
    m = elementwise_module(dt, n)
    a, b = data.draw(bit_arrays(dt, n)), data.draw(bit_arrays(dt, n))
    ref = evaluate(m, "f", [a, b])
    assert check(m, "f", [a, b], ref).status == PASS
    out = ref[0]
    finite = np.flatnonzero(np.isfinite(out.astype(np.float32)) &
                            (np.abs(out.astype(np.float32)) < float(np.finfo(np.float32).max)))
    if finite.size == 0:
        return
    i = int(data.draw(st.sampled_from(list(finite))))
    planted = next_up(out, i)
    v = check(m, "f", [a, b], (planted, ref[1]))
    assert v.status == FAIL and v.outputs[0].status == FAIL and v.outputs[1].status == PASS
    o = v.outputs[0]
    assert o.mismatches == 1 and o.worst_index == (i,)
    # one step on the ordered line: 1 ulp, except +-0 which are one point there (sign flip)
    assert o.ulp_distance == (0.0 if out.astype(np.float32)[i] == 0 and
                              planted.astype(np.float32)[i] == 0 else 1.0)


def test_exact_contract_rejects_the_sign_of_zero_and_a_nan_class_change():
    m = elementwise_module(F32, 3)
    a = np.array([1.0, 2.0, np.inf], np.float32)
    b = np.array([-1.0, 0.5, -np.inf], np.float32)
    ref = evaluate(m, "f", [a, b])  # a + b = [+0, 2.5, nan]; (a+b)*b = [-0, 1.25, nan]
    assert np.signbit(ref[0][0]) and ref[0][0] == 0
    flipped = ref[0].copy()
    flipped[0] = np.float32(0.0)
    v = check(m, "f", [a, b], (flipped, ref[1]))
    assert v.status == FAIL and v.outputs[0].mismatches == 1
    assert v.outputs[0].expected == "-0.0" and v.outputs[0].observed == "0.0"
    assert v.outputs[0].expected_hex == "0x80000000" and v.outputs[0].observed_hex == "0x00000000"
    finite_for_nan = ref[0].copy()
    finite_for_nan[2] = np.float32(1.0)
    v = check(m, "f", [a, b], (finite_for_nan, ref[1]))
    assert v.status == FAIL and v.outputs[0].worst_index == (2,)
    assert v.outputs[0].ulp_distance == float("inf")
    # NaN payload and sign are not part of the contract: another NaN is accepted
    other_nan = ref[0].copy()
    other_nan.view(np.uint32)[2] = 0xFFC00123
    assert check(m, "f", [a, b], (other_nan, ref[1])).status == PASS


def test_ulp_distance_on_the_ordered_line():
    x = np.array([0.0, -0.0, 1.0, np.inf, -np.float32(1e-45)], np.float32)
    y = np.array([-0.0, np.float32(1e-45), np.nextafter(np.float32(1), np.float32(2)),
                  np.finfo(np.float32).max, np.float32(1e-45)], np.float32)
    assert ulp_distance(x, y).tolist() == [0.0, 1.0, 1.0, 1.0, 2.0]
    assert ulp_distance(np.array([np.nan], np.float32), np.array([np.nan], np.float32))[0] == 0
    assert ulp_distance(np.array([np.nan], np.float32), np.array([1], np.float32))[0] == np.inf


# ---------------------------------------------------------------------------------------------
# the admitted-set contracts: every admitted result is accepted
# ---------------------------------------------------------------------------------------------
def _sum_module(n: int, policy: str) -> Module:
    x = Var("x", TensorType((n,), F32))
    r = Call(Reduce((0,), keepdim=False, kind=ReduceKind.SUM, policy=policy), (x,))
    return Module((Function("s", (x,), r, None),))


def _all_tree_sums(v: list[float]) -> set[float]:
    """Every f32 result of a binary summation tree over every order of v (test-side)."""
    out: set[float] = set()

    def trees(xs):
        if len(xs) == 1:
            yield xs[0]
            return
        for k in range(1, len(xs)):
            for left in trees(xs[:k]):
                for right in trees(xs[k:]):
                    yield np.float32(np.float32(left) + np.float32(right))
    for perm in itertools.permutations(v):
        out.update(float(t) for t in trees([np.float32(p) for p in perm]))
    return out


def test_every_tree_result_of_an_unordered_sum_is_accepted_and_others_rejected():
    v = [1.0, 2.0 ** -24, 2.0 ** -24, -1.0]
    m = _sum_module(4, "unordered_tree")
    x = np.array(v, np.float32)
    results = _all_tree_sums(v)
    assert len(results) > 1  # the order matters for these values
    for r in results:
        assert check(m, "s", [x], np.asarray(np.float32(r))).status == PASS, r
    outside = np.float32(max(results)) * np.float32(4) + np.float32(1)
    v2 = check(m, "s", [x], np.asarray(outside))
    assert v2.status == FAIL and "admitted_set(unordered_tree" in v2.outputs[0].contract
    # fold_left is an exact function: only its own result is accepted
    mf = _sum_module(4, "fold_left")
    ref = evaluate(mf, "s", [x])
    others = results - {float(ref)}
    assert check(mf, "s", [x], ref).status == PASS
    assert check(mf, "s", [x], np.asarray(np.float32(next(iter(others))))).status == FAIL


@given(perm=st.permutations(list(range(6))))
def test_matmul_with_reassociation_accepts_any_k_order(perm):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 6)).astype(np.float32)
    b = rng.standard_normal((6, 3)).astype(np.float32)
    av, bv = Var("a", TensorType((2, 6), F32)), Var("b", TensorType((6, 3), F32))
    m = Module((Function("mm", (av, bv), Call(MatMul(), (av, bv)), None),))
    p = list(perm)
    acc = np.zeros((2, 3), np.float32)
    for k in p:  # a left fold in the permuted K order, f32 all along
        acc = (acc + a[:, k:k + 1] * b[k:k + 1, :]).astype(np.float32)
    assert check(m, "mm", [a, b], acc).status == PASS
    wrong = acc.copy()
    wrong[0, 0] = wrong[0, 0] + np.float32(1.0)
    assert check(m, "mm", [a, b], wrong).status == FAIL


def test_unspecified_cast_values_accept_anything_but_the_rest_is_exact():
    x = Var("x", TensorType((4,), F32))
    m = Module((Function("c", (x,), Call(Cast(DType.I32), (x,)), None),))
    xs = np.array([1.5, np.nan, 3e10, -2.5], np.float32)
    ref = evaluate(m, "c", [xs])
    anything = ref.copy()
    anything[1], anything[2] = 12345, -7
    v = check(m, "c", [xs], anything)
    assert v.status == PASS and "2 element(s) are open" in v.outputs[0].contract
    anything[0] = 2  # truncation of 1.5 is 1: specified, so exact
    assert check(m, "c", [xs], anything).status == FAIL


def test_output_downstream_of_an_inexact_op_is_judged_by_its_enclosure():
    x = Var("x", TensorType((3,), F32))
    e = Call(Unary(UnaryKind.EXP), (x,))
    m = Module((Function("g", (x,), Tuple((e, Call(Binary(BinaryKind.ADD), (e, x)))), None),))
    xs = np.array([0.0, 1.0, -1.0], np.float32)
    ref = evaluate(m, "g", [xs])
    v = check(m, "g", [xs], ref)
    assert v.outputs[0].status == PASS and v.outputs[0].contract.startswith("ulp(")
    assert v.outputs[1].status == PASS and v.outputs[1].contract.startswith("enclosure(")
    wrong = (ref[0], ref[1] + np.float32(1.0))
    assert check(m, "g", [xs], wrong).outputs[1].status == FAIL
    # without enclosures such an output is UNJUDGED (never a PASS) and names the upstream op
    v = check(m, "g", [xs], wrong, enclose=False)
    assert v.status == UNJUDGED and v.outputs[1].status == UNJUDGED
    assert "Unary" in v.outputs[1].detail and v.outputs[1].unjudged == 3


# ---------------------------------------------------------------------------------------------
# bad candidates: a structured verdict, never a crash
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("candidate", "pattern"), [
    (lambda m, e, xs: (xs[0],), r"returned 1 output\(s\), the program has 2"),
    (lambda m, e, xs: (xs[0][:2], xs[0]), r"output 0: shape \(2,\), expected \(3,\)"),
    (lambda m, e, xs: (xs[0].astype(np.float64), xs[0]), r"output 0: numpy dtype float64"),
    (lambda m, e, xs: (xs[0].astype(np.int32), xs[0]), r"output 0: dtype i32"),
    (lambda m, e, xs: ([1.0, 2.0, 3.0], xs[0]), r"output 0: expected a numpy array, got list"),
    (lambda m, e, xs: 1 / 0, r"the candidate raised ZeroDivisionError"),
    (lambda m, e, xs: None, r"expected a numpy array, got NoneType|returned 1 output"),
])
def test_bad_candidates_get_an_error_verdict(candidate, pattern):
    m = elementwise_module(F32, 3)
    xs = [np.ones(3, np.float32), np.ones(3, np.float32)]
    v = check_candidate(m, "f", xs, candidate)
    assert v.status == ERROR and not v
    import re

    assert re.search(pattern, v.message), v.message


def test_verdict_summary_names_the_worst_element():
    m = elementwise_module(F32, 3)
    xs = [np.array([1, 2, 3], np.float32), np.array([1, 1, 1], np.float32)]
    ref = evaluate(m, "f", xs)
    bad = ref[0].copy()
    bad[2] = np.float32(9.0)
    text = check(m, "f", xs, (bad, ref[1])).summary()
    assert "FAIL" in text and "index [2]" in text and "expected 4.0 (0x40800000)" in text


def test_conv2d_accepts_any_summation_order_and_rejects_a_changed_element():
    from tilefoundry.semantics.ops.nn import Conv2D

    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 2, 2)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    xv, wv, bv = (Var(n, TensorType(a.shape, F32)) for n, a in (("x", x), ("w", w), ("b", bias)))
    m = Module((Function("conv", (xv, wv, bv), Call(Conv2D(), (xv, wv, bv)), None),))
    # a test-side convolution in f64, rounded once: a legitimate reassociated result
    out = np.zeros((1, 3, 3, 3), np.float64)
    for o in range(3):
        for i in range(3):
            for j in range(3):
                out[0, o, i, j] = (x[0, :, i:i + 2, j:j + 2].astype(np.float64) *
                                   w[o].astype(np.float64)).sum() + bias[o]
    f64 = out.astype(np.float32)
    assert check(m, "conv", [x, w, bias], f64).status == PASS
    bad = f64.copy()
    bad[0, 2, 1, 0] += np.float32(0.5)
    v = check(m, "conv", [x, w, bias], bad)
    assert v.status == FAIL and v.outputs[0].worst_index == (0, 2, 1, 0)
    assert v.outputs[0].mismatches == 1


def test_an_ulp_enclosure_carries_through_data_movement():
    from tilefoundry.semantics.ops.tensor import Reshape, Transpose
    from tilefoundry.semantics.ulp import budget

    x = Var("x", TensorType((2, 3), F32))
    e = Call(Unary(UnaryKind.EXP), (x,))
    moved = Call(Reshape((6,)), (Call(Transpose((1, 0)), (e,)),))
    computed = Call(Binary(BinaryKind.ADD), (e, x))
    m = Module((Function("g", (x,), Tuple((moved, computed)), None),))
    xs = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    ref = evaluate(m, "g", [xs])
    v = check(m, "g", [xs], ref)
    # the enclosure of exp (± its budget) is moved element by element
    assert v.outputs[0].status == PASS and "Unary(exp) within" in v.outputs[0].contract
    assert v.outputs[1].status == PASS and v.outputs[1].contract.startswith("enclosure(")
    b = int(budget("exp", F32))
    off = ref[0].copy()
    off.view(np.uint32)[4] += np.uint32(b)  # exactly at the budget: accepted
    assert check(m, "g", [xs], (off, ref[1])).status == PASS
    off.view(np.uint32)[4] += np.uint32(1)  # one past it: rejected at the moved position
    v = check(m, "g", [xs], (off, ref[1]))
    assert v.status == FAIL and v.outputs[0].worst_index == (4,)
    assert v.outputs[0].ulp_distance == b + 1


@pytest.mark.parametrize("strides", [None, (1,)])
def test_a_partial_completion_keeps_its_admitted_set_when_strides_are_sugar(strides):
    """Issue 16: the contract of a Reshard completing Partial(sum) was found by object identity
    in a second type inference, which rebuilds modules written with strides=None: every output
    was then judged exact and a legal completion in another device order FAILed. The oracle now
    judges with the typed entry the evaluation ran."""
    from tilefoundry.semantics.evaluator.mesh import Sharded
    from tilefoundry.semantics.ops.sharding import Reshard
    from tilefoundry.semantics.types import (
        Broadcast,
        Layout,
        Mesh,
        Partial,
        ShardLayout,
        Topology,
        TopologyLevel,
    )

    mesh = Mesh("device", ("x",), (3,))
    src = ShardLayout(mesh, (Partial("sum"),), Layout((1,), strides))
    dst = ShardLayout(mesh, (Broadcast(),), Layout((1,), strides))
    x = Var("x", TensorType((1,), F32, src))
    m = Module((Function("f", (x,), Call(Reshard(dst), (x,)), None),),
               topology=Topology((TopologyLevel("device", 3),)))
    inp = Sharded(src, np.array([[2.0 ** 24], [1.0], [1.0]], np.float32))
    # device order 0, 1, 2 gives 2^24 (each 1 is absorbed); (1 + 1) + 2^24 = 2^24 + 2
    v = check(m, "f", [inp], np.array([2.0 ** 24 + 2], np.float32))
    assert v.status == PASS and v.outputs[0].contract.startswith("admitted_set(")
    assert check(m, "f", [inp], np.array([2.0 ** 24 + 4], np.float32)).status == FAIL


def _topk_module(sorted_: bool, k=3, n=7, rows=4, then_exp=False):
    from tilefoundry.semantics.ir import Tuple as TupleExpr
    from tilefoundry.semantics.ir import TupleGetItem
    from tilefoundry.semantics.ops import Unary, UnaryKind
    from tilefoundry.semantics.ops.tensor import TopK

    x = Var("x", TensorType((rows, n), F32))
    t = Call(TopK(k, axis=1, sorted=sorted_), (x,))
    vals, idx = TupleGetItem(t, 0), TupleGetItem(t, 1)
    if then_exp:
        vals = Call(Unary(UnaryKind.EXP), (vals,))
    return Module((Function("f", (x,), TupleExpr((vals, idx)), None),))


def _index_order(vals: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(idx, axis=1, kind="stable")
    return np.take_along_axis(vals, order, 1), np.take_along_axis(idx, order, 1)


_TK_X = np.array([[5, -1, 3, 9, 0, 2, 7], [1, 1, 1, 1, 1, 1, 1],
                  [-0.0, 0.0, -2, 4, np.nan, 4, 8], [3, 2, 1, 0, -1, -2, -3]], np.float32)


def _selected(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference's selection rule computed independently: largest first, NaN last, ties to
    the lowest index (a stable sort of -x with NaN keyed last)."""
    key = np.where(np.isnan(x), np.inf, -x.astype(np.float64))
    idx = np.argsort(key, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(x, idx, 1), idx.astype(np.int64)


def test_topk_unsorted_admits_the_selected_set_in_any_order():
    """HIR TopK: "sorted returns the selected elements ordered by largest; otherwise the same
    selected set is returned in an unspecified order." Issue 16: a legal backend returning the
    set in index order failed. Now: any order of the same (value, index) pairs PASSes; another
    set, or values and indices permuted differently, FAIL; sorted=True stays exact."""
    vals, idx = _selected(_TK_X, 3)
    iv, ii = _index_order(vals, idx)
    assert not np.array_equal(ii, idx)  # the index order really is another order
    v = check(_topk_module(False), "f", [_TK_X], (iv, ii))
    assert v.status == PASS, v.summary()
    assert all(o.contract.startswith("permutation") for o in v.outputs)
    assert check(_topk_module(True), "f", [_TK_X], (iv, ii)).status == FAIL
    assert check(_topk_module(True), "f", [_TK_X], (vals, idx)).status == PASS
    # values and indices each a permutation, but not the same one: the pairs are broken
    broken = check(_topk_module(False), "f", [_TK_X], (vals, ii))
    assert broken.status == FAIL and broken.outputs[0].status == FAIL
    assert "paired" in broken.outputs[0].contract
    # another set: row 0's 5.0 (index 0) replaced by the 4th largest, 3.0 (index 2)
    other_i, other_v = ii.copy(), iv.copy()
    assert 2 not in idx[0] and other_i[0, 0] == 0
    other_i[0, 0], other_v[0, 0] = 2, _TK_X[0, 2]
    assert check(_topk_module(False), "f", [_TK_X], (other_v, other_i)).status == FAIL
    # a tie broken the other way (row 1 is all ones: the lowest indices win): the values are
    # the same multiset, the indices are not the selected set
    tie_i = ii.copy()
    tie_i[1] = [4, 5, 6]
    tied = check(_topk_module(False), "f", [_TK_X], (iv, tie_i))
    assert tied.status == FAIL and tied.outputs[1].status == FAIL


def test_topk_unsorted_feeding_an_op_is_enclosed_as_a_set():
    """Downstream of an unsorted TopK the order is free: exp of the values in index order
    PASSes (each fiber's enclosure holds every selected value's exp), zeros FAIL."""
    m = _topk_module(False, then_exp=True)
    vals, idx = _selected(_TK_X, 3)
    _, ii = _index_order(vals, idx)
    ref = evaluate(m, "f", [_TK_X])
    e = ref[0]
    # the reference's exp values, moved to index order with the indices
    ev, _ = _index_order(e, ref[1])
    assert check(m, "f", [_TK_X], (ev, ii)).status == PASS
    zeros = check(m, "f", [_TK_X], (np.zeros_like(e), ii))
    assert zeros.status == FAIL and zeros.outputs[0].contract.startswith("enclosure(")


def test_a_partial_completion_is_judged_under_its_contract_on_every_path(tmp_path):
    """Issue 16: contracts must survive every path a program takes to the judge — the module as
    written (strides=None sugar), the module after a type inference, a pickled copy, and one
    reloaded from a reproducer directory. On each, the completion of a 3-device Partial(sum)
    in reverse device order (legal) PASSes and a value outside the admitted set FAILs."""
    import pickle

    from tilefoundry.conformance.repro import load_repro, write_repro
    from tilefoundry.semantics.evaluator.mesh import Sharded
    from tilefoundry.semantics.ops.sharding import Reshard
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.semantics.typeinfer.functions import infer_module
    from tilefoundry.semantics.types import (
        Broadcast,
        Layout,
        Mesh,
        Partial,
        ShardLayout,
        Topology,
        TopologyLevel,
    )

    mesh = Mesh("device", ("x",), (3,))
    src = ShardLayout(mesh, (Partial("sum"),), Layout((1,)))
    dst = ShardLayout(mesh, (Broadcast(),), Layout((1,)))
    x = Var("x", TensorType((1,), F32, src))
    m = Module((Function("f", (x,), Call(Reshard(dst), (x,)), None),),
               topology=Topology((TopologyLevel("device", 3),)))
    inp = Sharded(src, np.array([[2.0 ** 24], [1.0], [1.0]], np.float32))
    legal, wrong = np.array([2.0 ** 24 + 2], np.float32), np.array([2.0 ** 24 + 4], np.float32)
    typed = infer_module(m, Session())
    reinferred = Module(tuple(typed[f.name] for f in m.functions), topology=m.topology)
    v0 = check(m, "f", [inp], legal)
    rdir = write_repro(tmp_path / "r", m, "f", [inp], v0, observed=legal)
    rm, r_entry, rins, _ = load_repro(rdir)
    assert r_entry == "f"
    paths = {"as written": (m, [inp]), "re-inferred": (reinferred, [inp]),
             "pickled": (pickle.loads(pickle.dumps(m)), [inp]), "reproducer": (rm, rins)}
    for name, (mod, ins) in paths.items():
        ok = check(mod, "f", ins, legal)
        assert ok.status == PASS, (name, ok.summary())
        assert ok.outputs[0].contract.startswith("admitted_set("), (name, ok.summary())
        assert check(mod, "f", ins, wrong).status == FAIL, name


# ---------------------------------------------------------------------------------------------
# f8e8m0 results of ULP-table ops: lemma B' (semantics/ulp.py, D292; issue 32 item 6b)
# ---------------------------------------------------------------------------------------------
E8M0_SOFTMAX = """
@func
def main(x: Tensor[(4, 4), f8e8m0]):
    return softmax(x, axis=-1)

module(main)
"""

E8M0_SOFTMAX_MOVED = """
@func
def main(x: Tensor[(4, 4), f8e8m0]):
    return transpose(softmax(x, axis=-1), (1, 0))

module(main)
"""


def _e8m0_softmax_model(x: np.ndarray) -> np.ndarray:
    """The ULP table's softmax model (semantics/ulp.py), in numpy f32: m = max, d = x - m,
    e = exp(d), S = a balanced (pairwise) sum of the four e, y = e / S, one rounding to the
    dtype."""
    from tilefoundry.semantics.dtypes import cast

    xf = x.astype(np.float32)
    d = xf - xf.max(axis=-1, keepdims=True)
    e = np.exp(d)
    s = (e[:, 0] + e[:, 1]) + (e[:, 2] + e[:, 3])
    y = e / s[:, None]
    assert d.dtype == e.dtype == s.dtype == y.dtype == np.float32
    return cast(y, DType.F8E8M0)


def _e8m0(values) -> np.ndarray:
    from tilefoundry.semantics.dtypes import cast

    return cast(np.asarray(values, np.float32), DType.F8E8M0)


def test_f8e8m0_softmax_model_underflowing_to_nan_is_admitted_and_wrong_answers_are_not():
    from tilefoundry.semantics.dsl import parse_module

    m = parse_module(E8M0_SOFTMAX)
    x32 = np.ones((4, 4), np.float32)
    x32[1, 2] = 256.0
    x = _e8m0(x32)
    model = _e8m0_softmax_model(x)
    small = np.zeros((4, 4), bool)
    small[1, [0, 1, 3]] = True
    # the model's f32 exp(1 - 256) is 0, so the cast gives NaN; the reference rounds the exact
    # e^-255 / (1 + 3e^-255) to f8e8m0's least value 2^-127
    assert np.isnan(model.astype(np.float32)[small]).all()
    ref = evaluate(m, "main", [x])
    assert (ref.astype(np.float64)[small] == 2.0 ** -127).all()
    v = check(m, "main", [x], model)
    assert v.status == PASS, v.summary()
    # the same NaN read through an exact movement downstream is judged by the enclosure
    mv = parse_module(E8M0_SOFTMAX_MOVED)
    v = check(mv, "main", [x], np.ascontiguousarray(model.T))
    assert v.status == PASS and v.outputs[0].contract.startswith("enclosure("), v.summary()
    # wrong answers stay rejected: NaN where the reference is not the least value, the small
    # elements 2 ulp up, the large one 2 ulp down, a uniform row
    for bad in ([(0, 0)], [(1, 2)]):
        w = model.copy()
        for idx in bad:
            w[idx] = _e8m0([np.nan])[0]
        assert check(m, "main", [x], w).status == FAIL, bad
        assert check(mv, "main", [x], np.ascontiguousarray(w.T)).status == FAIL, bad
    w = model.copy()
    w[small] = _e8m0([2.0 ** -125])[0]
    assert check(m, "main", [x], w).status == FAIL
    w = model.copy()
    w[1, 2] = _e8m0([0.25])[0]  # 2 ulp below the reference 1.0
    assert check(m, "main", [x], w).status == FAIL
    w = model.copy()
    w[1] = _e8m0([0.25] * 4)
    assert check(m, "main", [x], w).status == FAIL
    assert check(mv, "main", [x], np.ascontiguousarray(w.T)).status == FAIL


def test_nan_is_admitted_only_where_an_f8e8m0_reference_is_its_least_value():
    from tilefoundry.semantics.dtypes import cast
    from tilefoundry.semantics.ulp import nan_admitted

    r = _e8m0([2.0 ** -127, 2.0 ** -126, 1.0, 2.0 ** 127, np.nan])
    assert nan_admitted(r).tolist() == [True, False, False, False, False]
    for dt in (DType.F32, DType.BF16, DType.F16, DType.FP8E4M3, DType.FP8E5M2):
        z = cast(np.float32([0.0, 2.0 ** -127, 1.0]), dt)
        assert not nan_admitted(z).any(), dt


def test_a_moved_f8e8m0_enclosure_keeps_its_nan_and_real_flags():
    """The movement rule moves an enclosure's nan / real masks as 1 / 0 values of the dtype;
    f8e8m0 has no 0 (its cast is NaN, which read back as True), so after any Reshape /
    Transpose / Slice of an enclosed f8e8m0 value NaN was admitted everywhere."""
    from tilefoundry.semantics.dsl import parse_module

    m = parse_module("""
@func
def main(x: Tensor[(2, 3), f8e8m0]):
    return transpose(exp(x), (1, 0))

module(main)
""")
    x = _e8m0([[1.0, 2.0, 0.5], [4.0, 0.25, 1.0]])
    ref = evaluate(m, "main", [x])
    assert check(m, "main", [x], ref).status == PASS
    w = ref.copy()
    w[1, 0] = _e8m0([np.nan])[0]
    v = check(m, "main", [x], w)
    assert v.status == FAIL and v.outputs[0].contract.startswith("enclosure("), v.summary()


def test_a_fail_line_states_the_error_and_the_admitted_interval():
    """Issue 33, Deliver 4: "FAIL under exact ... 8.64e+08 ulp apart" for an error of 6e-08
    named no number a person can weigh. The line now states the error and the interval the
    contract admits at the worst element: the reference itself under exact, the reference
    ± the budget's steps under ulp (clipped at the format's ends)."""
    import ml_dtypes

    from tilefoundry.oracle.compare import _interval, _judge, compare_exact, compare_ulp

    e, o = np.array([0.0, 1.0], np.float32), np.array([6e-8, 1.0], np.float32)
    line = _judge(0, "exact", compare_exact(e, o), e, o, budget=0).line()
    assert line.endswith("8.64082e+08 ulp apart (error 6e-08, admitted [0.0, 0.0])"), line
    line = _judge(0, "ulp(<= 2)", compare_ulp(e, o, 2), e, o, budget=2).line()
    assert line.endswith("(error 6e-08, admitted [-3e-45, 3e-45])"), line
    bf = ml_dtypes.bfloat16
    assert _interval(np.array([1.5], bf), np.array([1.0], bf), (0,), 1) == \
        ("0.5", "[1.49219, 1.50781]")
    e4 = ml_dtypes.float8_e4m3fn  # no inf: the interval stops at max finite, not at NaN / -0
    assert _interval(np.array([448.0], e4), np.array([416.0], e4), (0,), 2)[1] == "[384, 448]"
    f32max = np.array([np.finfo(np.float32).max], np.float32)
    assert _interval(f32max, np.array([1.0], np.float32), (0,), 2)[1] == "[3.402823e+38, inf]"
    assert _interval(np.array([5], np.int32), np.array([7], np.int32), (0,), 0) == ("2", "[5, 5]")
    # contracts with their own interval text keep their line (permutation: no budget)
    p = _judge(0, "permutation", np.array([False, True]), e, o)
    assert "admitted" not in p.line()
