"""Declarable reduction orders and empty reductions (issue 33 item 7, D312): a backend that
declares the order it sums in opts out of the cases whose policy needs another (NOT_SUPPORTED,
naming it) and is judged against its declared fold where the policy admits a set — stricter,
never wider; ``empty_reductions=False`` opts out of reductions over an empty axis."""

from __future__ import annotations

import dataclasses

import pytest

from tilefoundry.conformance.backend import Capabilities, requirements, unsupported_reason
from tilefoundry.conformance.runner import run
from tilefoundry.conformance.selection import ConformanceError, validate_capabilities
from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops.tensor import Reduce, ReduceKind
from tilefoundry.semantics.types import TensorType

REDUCE = ["spec/reduce/*", "special/tensor/reduce-*"]


def _by_id(res) -> dict:
    return {r["id"]: r for r in res.records}


def _reduce(kind: ReduceKind, policy: str, dt: DType = DType.F32, n: int = 8) -> Module:
    x = Var("x", TensorType((n,), dt))
    op = Reduce(axes=(0,), keepdim=False, kind=kind, policy=policy)
    return Module((Function("f", (x,), Call(op, (x,)), None),))


def _why(order: str | None, m: Module, **kw) -> str | None:
    caps = Capabilities.everything(reduction_order=order, **kw)
    return unsupported_reason(caps, requirements(m))


@pytest.mark.parametrize("order,runs", [
    (None, {"fold_left", "fold_right", "ordered_tree", "unordered_tree"}),
    ("fold_left", {"fold_left", "ordered_tree", "unordered_tree"}),
    ("fold_right", {"fold_right", "ordered_tree", "unordered_tree"}),
    ("pairwise", {"ordered_tree", "unordered_tree"}),
    ("pairwise:16", {"ordered_tree", "unordered_tree"}),
    ("any", {"unordered_tree"}),
])
def test_which_policies_a_declared_order_runs(order, runs):
    for policy in ("fold_left", "fold_right", "ordered_tree", "unordered_tree"):
        why = _why(order, _reduce(ReduceKind.SUM, policy))
        assert (why is None) == (policy in runs), (order, policy, why)
        if why is not None:
            assert f"policy={policy!r}" in why and f"reduction_order={order!r}" in why
        # exact reductions never depend on the order: no declaration opts them out
        assert _why(order, _reduce(ReduceKind.MAX, policy)) is None
        assert _why(order, _reduce(ReduceKind.SUM, policy, DType.I32)) is None


def test_empty_reductions_can_be_declared_unsupported():
    empty = _reduce(ReduceKind.SUM, "unordered_tree", n=0)
    assert _why(None, empty) is None
    why = _why(None, empty, empty_reductions=False)
    assert why is not None and "empty_reductions=False" in why and "extent 0" in why
    assert _why(None, _reduce(ReduceKind.SUM, "unordered_tree"), empty_reductions=False) is None


def test_bad_declarations_are_named():
    for caps in (Capabilities.everything(reduction_order="fold-left"),
                 Capabilities.everything(reduction_order="pairwise:0")):
        with pytest.raises(ConformanceError, match="reduction_order must be None or one of "
                                                   "fold_left, fold_right, pairwise, any"):
            validate_capabilities(caps, "x:y")
    with pytest.raises(ConformanceError, match="empty_reductions must be a bool"):
        validate_capabilities(Capabilities.everything(empty_reductions="no"), "x:y")
    caps = Capabilities.everything(reduction_order="pairwise:8", empty_reductions=False)
    back = Capabilities.from_json(caps.to_json())
    assert (back.reduction_order, back.empty_reductions) == ("pairwise:8", False)
    assert validate_capabilities(caps, "x:y").reduction_order == "pairwise:8"
    with pytest.raises(InvalidArgumentError, match="reduction_order"):
        Capabilities.from_json({**caps.to_json(), "reduction_order": "sideways"})


def test_a_declared_fold_left_opts_out_and_is_judged_exactly(tmp_path):
    honest = run("order_backends:FoldLeftBackend", "quick", case_globs=REDUCE, jobs=2,
                 timeout_s=120, out_jsonl=tmp_path / "honest.jsonl")
    liar = run("order_backends:LyingFoldLeftBackend", "quick", case_globs=REDUCE, jobs=2,
               timeout_s=120, out_jsonl=tmp_path / "liar.jsonl")
    ref = run("reference", "quick", case_globs=REDUCE, jobs=2, timeout_s=120,
              out_jsonl=tmp_path / "ref.jsonl")
    h, lie, r = _by_id(honest), _by_id(liar), _by_id(ref)
    assert {v["verdict"] for v in r.values()} == {"PASS"}
    out = {i for i, v in h.items() if v["verdict"] == "NOT_SUPPORTED"}
    assert out and all("policy='fold_right'" in h[i]["message"] for i in out)
    assert {v["verdict"] for i, v in h.items() if i not in out} == {"PASS"}
    narrowed = {i for i, v in h.items() if "judged_order" in v}
    assert {i for i in narrowed if "tree-sum" in i} and not narrowed & out
    # the same program computed as the reference's pairwise tree passes when undeclared, and
    # fails once the backend says it folds left: the declared order made the judgement stricter
    failed = {i for i, v in lie.items() if v["verdict"] == "FAIL"}
    assert failed and failed <= narrowed
    assert all("judged as the declared reduction_order 'fold_left'" in lie[i]["message"]
               for i in failed)
    assert {i for i, v in lie.items() if v["verdict"] == "NOT_SUPPORTED"} == out


def test_empty_reductions_declared_unsupported_are_never_run(tmp_path):
    res = run("order_backends:NoEmptyBackend", "quick", case_globs=REDUCE, jobs=2,
              timeout_s=120, out_jsonl=tmp_path / "r.jsonl")
    rec = _by_id(res)
    empty = {i for i in rec if "empty" in i}
    assert empty
    for i, v in rec.items():
        if i in empty:
            assert v["verdict"] == "NOT_SUPPORTED" and "empty_reductions=False" in v["message"]
        else:
            assert v["verdict"] == "PASS", (i, v["message"])


def test_capabilities_with_declarations_pickle():
    import pickle

    caps = dataclasses.replace(Capabilities.everything(), reduction_order="any",
                               empty_reductions=False)
    assert pickle.loads(pickle.dumps(caps)) == caps
