"""Program-declared reducers (issue 37 item 2): type-checked declarations, per-program law
checks with provenance, the declared-law enclosure, the DSL spelling."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.conformance.catalog.declared_reduce import COUNT_MEAN, SUM_ABSMAX
from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.declared_reducers import ReducerDeclarationError, declare_reducer
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.reducer_laws import ReducerLawError, check_laws
from tilefoundry.semantics.reducers import custom_admits, custom_reduce

F32 = DType.F32


def _diff(laws):
    return declare_reducer("diff", state=(("v", F32),), lift=("x",),
                           merge=(("sub", "a.v", "b.v"),), laws=laws)


def test_a_non_associative_merge_claimed_associative_is_refused():
    with pytest.raises(ReducerLawError, match=r"'diff' claims associative \(real\).*falsified "
                                              r"at inputs a, b, c ="):
        check_laws(_diff((("associative", "real"),)))
    with pytest.raises(ReducerLawError, match="commutative"):
        check_laws(_diff((("commutative", "exact"),)))
    assert issubclass(ReducerLawError, TilefoundryError)


def test_law_verdicts_name_their_provenance():
    v = {(x.law, x.over, x.component): x.provenance for x in check_laws(SUM_ABSMAX)}
    assert v[("associative", "real", "sum")] == "proved by Z3 (reals)"
    # amax's merge only selects (max): Z3's FP theory proves it for every f32 state (D495)
    assert v[("associative", "exact", "amax")] == "proved by Z3 (f32 FP theory, all states)"
    assert v[("commutative", "exact", "amax")] == "proved by Z3 (f32 FP theory, all states)"
    # the sum component rounds: IEEE addition is commutative and -0 its identity, bit for bit
    # (NaN as a class), which Z3's FP theory proves over every f32 state (D510)
    assert v[("commutative", "exact", "sum")] == "proved by Z3 (f32 FP theory, all states)"
    assert v[("identity", "exact", "sum")] == "proved by Z3 (f32 FP theory, all states)"
    # amax's identity +0 fails at a state no reduction reaches (a negative amax or -0: lifts
    # are magnitudes), so the random trials over reachable states decide; Z3's state is not
    # named (which one it picks depends on the process's earlier queries, D510)
    assert v[("identity", "exact", "amax")] == (
        "not refuted by 4096 random f32 trials, seed 20260437; Z3 refutes it only at a state "
        "outside the sampled reachable ones")
    cm = {(x.law, x.component): x.provenance for x in check_laws(COUNT_MEAN)}
    assert "random trials in exact rationals" in cm[("associative", "mean")]


def test_an_exact_identity_refuted_at_minus_zero():
    """(count, mean) with the identity (0, 0): merge(identity, (1, -0)) gives mean +0, so an
    identity claimed bit-exact is false (the catalog declares it over the reals)."""
    r = declare_reducer("cm", state=(("count", F32), ("mean", F32)), lift=(1.0, "x"),
                        lets=(("n", ("add", "a.count", "b.count")),),
                        merge=("n", ("ifzero", "n", 0.0, ("add", "a.mean", (
                            "mul", ("sub", "b.mean", "a.mean"), ("div", "b.count", "n"))))),
                        identity=(0.0, 0.0), laws=(("identity", "exact", ("mean",)),))
    with pytest.raises(ReducerLawError, match="identity"):
        check_laws(r)


@pytest.mark.parametrize("kw, match", [
    (dict(state=()), "state"),
    (dict(state=(("s", DType.I32),)), "dtype"),
    (dict(merge=(("pow", "a.s", "b.s"),)), "not an elementwise kind"),
    (dict(merge=(("add", "a.s", "c.s"),)), "'c.s' is not bound"),
    (dict(lift=("y",)), "'y' is not bound"),
    (dict(merge=(("add", "a.s"),)), "add takes 2 operands"),
    (dict(laws=(("idempotent", "real"),)), "law 'idempotent' is unknown"),
    (dict(laws=(("identity", "exact"),)), "declares no identity"),
    (dict(name="welford"), "built-in"),
])
def test_bad_declarations_name_the_reducer_and_the_fix(kw, match):
    args = dict(name="r1", state=(("s", F32),), lift=("x",), merge=(("add", "a.s", "b.s"),))
    args.update(kw)
    with pytest.raises(ReducerDeclarationError, match=match) as e:
        declare_reducer(**args)
    assert "; " in str(e.value)  # the message carries a fix


def _fibers(n, seed=3):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((4, n)) * 10).astype(np.float32)
    return x, np.tile(np.float32([-0.0, 0.0]), (4, 1))


@pytest.mark.parametrize("policy", ["ordered_tree", "unordered_tree"])
def test_enclosure_admits_a_regrouping_and_rejects_a_wrong_merge(policy):
    x, s = _fibers(100)
    ref = custom_reduce(x, s, SUM_ABSMAX, (1,), policy=policy)
    rev = custom_reduce(x[:, ::-1].copy(), s, SUM_ABSMAX, (1,), policy="fold_left")
    chain = custom_reduce(x, s, SUM_ABSMAX, (1,), policy="fold_left")
    assert custom_admits(ref, x, s, SUM_ABSMAX, (1,), policy=policy).admitted.all()
    assert custom_admits(chain, x, s, SUM_ABSMAX, (1,), policy=policy).admitted.all()
    if policy == "unordered_tree":
        assert custom_admits(rev, x, s, SUM_ABSMAX, (1,), policy=policy).admitted.all()
    bad = ref.copy()
    bad[:, 1] = np.nextafter(bad[:, 1], np.float32(np.inf))  # amax is exact by its laws
    assert not custom_admits(bad, x, s, SUM_ABSMAX, (1,), policy=policy).admitted.any()
    bad = ref.copy()
    bad[:, 0] = ref[:, 0] + ref[:, 1]  # a.sum + b.amax style error
    assert not custom_admits(bad, x, s, SUM_ABSMAX, (1,), policy=policy).admitted.any()


def test_coupled_state_box_contains_trees_and_rejects_out_of_range_mean():
    rng = np.random.default_rng(5)
    x = rng.uniform(1, 2, (3, 40)).astype(np.float32)
    s = np.float32([[1.0, 1.5]] * 3)
    ref = custom_reduce(x, s, COUNT_MEAN, (1,), policy="unordered_tree")
    chain = custom_reduce(x, s, COUNT_MEAN, (1,), policy="fold_left")
    assert custom_admits(chain, x, s, COUNT_MEAN, (1,), policy="unordered_tree").admitted.all()
    assert custom_admits(ref, x, s, COUNT_MEAN, (1,), policy="unordered_tree").admitted.all()
    bad = ref.copy()
    bad[:, 1] = 1000.0  # far above every contribution (the coupled box is loose: D451)
    assert not custom_admits(bad, x, s, COUNT_MEAN, (1,), policy="unordered_tree").admitted.any()


def test_dsl_prints_and_parses_a_declared_reducer():
    from tilefoundry.conformance.catalog.declared_reduce import _module_of
    from tilefoundry.semantics.dsl import parse_module, to_source

    x, s = _fibers(6)
    m, entry, _ = _module_of(SUM_ABSMAX, "unordered_tree", x, s)()
    src = to_source(m)
    assert "Reducer(" in src and "sum_absmax" in src
    m2 = parse_module(src)
    op = m2[entry].body.op
    assert op.reducer == SUM_ABSMAX


def test_a_law_declaration_and_a_numerical_permission_are_separate_evidence():
    """Tile design T-G07: "A law declaration and numerical permission remain separate evidence,
    even when they enable the same candidate." Laws alone grant no regrouping: under fold_left a
    reducer that declares its sum associative is judged by equality, so the tree result (a
    candidate its laws would enable) is refused where its bits differ. A permission alone
    grants no regrouping either: the same merge without the associativity law under a tree
    policy, or without the commutative law under unordered_tree, is a type error."""
    from tilefoundry.semantics.ir import Call, Var
    from tilefoundry.semantics.ops import CustomReduce
    from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
    from tilefoundry.semantics.types import TensorType

    x, s = _fibers(64, seed=11)
    tree = custom_reduce(x, s, SUM_ABSMAX, (1,), policy="unordered_tree")
    fold = custom_reduce(x, s, SUM_ABSMAX, (1,), policy="fold_left")
    differ = tree[:, 0].view(np.uint32) != fold[:, 0].view(np.uint32)
    assert differ.any()  # the data separates the two candidates
    by_fold = custom_admits(tree, x, s, SUM_ABSMAX, (1,), policy="fold_left").admitted
    assert not by_fold[differ].any()  # admission is per result (fiber)
    assert custom_admits(tree, x, s, SUM_ABSMAX, (1,), policy="unordered_tree").admitted.all()

    def typed(r, policy):
        args = (Var("x", TensorType((4, 64), F32)), Var("s", TensorType((4, 2), F32)))
        return infer_expr(Call(CustomReduce((1,), r, policy, False), args))

    no_assoc = declare_reducer(
        "sum_absmax_nolaw", state=(("sum", F32), ("amax", F32)),
        lift=("x", ("max", "x", ("sub", 0.0, "x"))),
        merge=(("add", "a.sum", "b.sum"), ("max", "a.amax", "b.amax")), identity=(-0.0, 0.0),
        laws=(("commutative", "exact"),))
    no_comm = declare_reducer(
        "sum_absmax_nocomm", state=(("sum", F32), ("amax", F32)),
        lift=("x", ("max", "x", ("sub", 0.0, "x"))),
        merge=(("add", "a.sum", "b.sum"), ("max", "a.amax", "b.amax")), identity=(-0.0, 0.0),
        laws=(("associative", "real", ("sum",)), ("associative", "exact", ("amax",))))
    typed(no_assoc, "fold_left")
    typed(no_comm, "ordered_tree")
    for policy in ("ordered_tree", "unordered_tree"):
        with pytest.raises(TypeInferError, match="needs a merge contract"):
            typed(no_assoc, policy)
    with pytest.raises(TypeInferError, match="declares no commutative law"):
        typed(no_comm, "unordered_tree")


def test_a_false_exact_law_of_a_selecting_merge_is_refused():
    """A merge that only selects goes to Z3's FP theory; a false claim there still raises,
    with the inputs (random trials over reachable states find it; Z3 alone never passes it)."""
    r = declare_reducer("first_nonzero", state=(("s", F32),), lift=("x",),
                        merge=(("ifzero", "a.s", "b.s", "a.s"),),
                        laws=(("commutative", "exact"),))
    with pytest.raises(ReducerLawError, match="commutative"):
        check_laws(r)
    ok = declare_reducer("smallest", state=(("s", F32),), lift=("x",),
                         merge=(("min", "a.s", "b.s"),), identity=(float("inf"),),
                         laws=(("associative", "exact"), ("commutative", "exact"),
                               ("identity", "exact")))
    assert {v.status for v in check_laws(ok)} == {"proved"}


def test_exact_laws_of_rounding_merges_are_proved_or_fall_back_deterministically():
    """D510: a merge that rounds goes to Z3's FP theory too. Welford's count merge (n = a.n +
    b.n) is commutative bit for bit: proved. Its m2 merge is commutative too (d = b.mean -
    a.mean only changes sign, d * d does not), but the bit-blasted proof exceeds the resource
    limit: the random trials decide and say Z3 gave no answer — the same text every run (a
    resource limit, not a wall clock)."""
    st = (("n", F32), ("mean", F32), ("m2", F32))
    lets = (("nn", ("add", "a.n", "b.n")), ("d", ("sub", "b.mean", "a.mean")))
    merge = ("nn", ("ifzero", "nn", 0.0, ("add", "a.mean", ("mul", "d", ("div", "b.n", "nn")))),
             ("add", ("add", "a.m2", "b.m2"),
              ("div", ("mul", ("mul", "d", "d"), ("mul", "a.n", "b.n")), "nn")))
    r = declare_reducer("welford_m2", state=st, lift=(1.0, "x", 0.0), lets=lets, merge=merge,
                        identity=(0.0, 0.0, 0.0),
                        laws=(("commutative", "exact", ("n", "m2")),))
    v = {x.component: x for x in check_laws(r)}
    assert v["n"].provenance == "proved by Z3 (f32 FP theory, all states)"
    assert v["m2"].status == "not refuted"
    assert v["m2"].provenance.endswith("Z3 gave no answer within its resource limit")
    check_laws.cache_clear()
    assert {x.component: x for x in check_laws(r)} == v
    # the mean's merge is not commutative bit for bit (a.mean + d * (b.n / nn) rounds
    # differently from b.mean - d * (a.n / nn)): refused, with the inputs
    bad = declare_reducer("welford_mean", state=st, lift=(1.0, "x", 0.0), lets=lets,
                          merge=merge, identity=(0.0, 0.0, 0.0),
                          laws=(("commutative", "exact", ("mean",)),))
    with pytest.raises(ReducerLawError, match=r"commutative \(exact\) for component 'mean'"):
        check_laws(bad)


def test_a_selecting_component_that_reads_a_rounding_one_is_encoded_with_it():
    """``m = max(a.m, b.s)`` only selects, but it reads ``s = a.s + b.s``, which a nested merge
    feeds back in: its exact associativity is false (max(a.m, b.s + c.s) is not
    max(max(a.m, b.s), c.s)) and must be refused, not proved by encoding only the max."""
    r = declare_reducer("max_of_sums", state=(("m", F32), ("s", F32)), lift=("x", "x"),
                        merge=(("max", "a.m", "b.s"), ("add", "a.s", "b.s")),
                        laws=(("associative", "exact", ("m",)),))
    with pytest.raises(ReducerLawError, match="associative"):
        check_laws(r)
