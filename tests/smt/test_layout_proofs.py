"""The layout obligations (smt/obligations/layout.py): envelope partitions, Reshard stride forms
and Reshape ownership — their outcomes through ``run_obligations``, and planted errors each
check must catch (overlapping / gapped dispatch variants, bad stride functions)."""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest

import tilefoundry.smt.obligations.layout as L
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import DimVarRangePat, Function, Module, Var
from tilefoundry.semantics.typeinfer.reshape import ReshapeRejected, reshape_layout
from tilefoundry.semantics.types import DimVar, Layout, Mesh, ShardLayout, Split, TensorType
from tilefoundry.smt.framework import ProveCtx, run_obligations, unexpected

NAMES = ["envelope.partition", "reshard.strides", "reshape.ownership"]
FEW = [(2, (0,)), (3, (1,))]  # structural shapes for the planted stride checks (fast)


@pytest.fixture(scope="module")
def results():
    return {ob.name: (ob, out) for ob, out in run_obligations(NAMES)}


def prototype(ranges, lo=1, hi=4097, name="f"):
    """A dispatch prototype over N in [lo, hi) with one variant per range, left unsealed
    (``add_variant`` before any Module) so a planted partition error reaches the checker."""
    t = TensorType((DimVar("N", lo, hi), 128), DType.F32)
    x = Var("x", t)
    base = Function(name, (x,), None, t)
    for a, b in ranges:
        base.add_variant(Function(name, (x,), x, t, (DimVarRangePat("N", a, b),)))
    return base


# ---------------------------------------------------------------------------------------------
# the obligations as registered
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_obligation_is_proved(results, name):
    ob, out = results[name]
    assert out.status == "proved", out.detail
    assert not unexpected(ob, out)
    assert out.queries > 0
    assert all(s in ("proved", "report") for _, s in out.sub), out.sub


def test_envelope_builtin_examples(results):
    _, out = results["envelope.partition"]
    assert "N in [1, 4097)" in out.detail and "[1, 1024), [1024, 4097)" in out.detail
    assert any("jointly cover" in case for case, _ in out.sub)


def test_strides_detail_records_d65(results):
    _, out = results["reshard.strides"]
    assert ("D65 finding", "report") in out.sub
    assert "D65" in out.detail and "EITHER reading" in out.detail
    aliases = [s for case, s in out.sub if "aliases when split position" in case]
    assert aliases and set(aliases) == {"proved"}
    agree = [s for case, s in out.sub if "readings agree" in case]
    assert agree and set(agree) == {"proved"}
    # the table reaches the aliasing case: 16 local elements on 4 addresses
    assert "16 local elements on 4 addresses" in out.detail
    assert "cross-checked" in out.detail


def test_ownership_report_counts(results):
    _, out = results["reshape.ownership"]
    m = re.search(r"enumerated (\d+) reshapes of (\d+) concrete ShardLayouts .*: (\d+) accepted, "
                  r"(\d+) rejected", out.detail)
    assert m, out.detail
    cases, _layouts, accepted, rejected = map(int, m.groups())
    assert cases == accepted + rejected and accepted > 0 and rejected > 0
    m2 = re.search(r"sound-but-rejected report: (\d+) of (\d+) rejected", out.detail)
    assert m2 and int(m2.group(2)) == rejected and 0 < int(m2.group(1)) < rejected
    assert any(s == "report" and "would have been sound" in case for case, s in out.sub)
    # the symbolic rule proofs are in the sub-results
    assert [s for case, s in out.sub if case.startswith("rule ")] == ["proved"] * 3


# ---------------------------------------------------------------------------------------------
# envelope.partition: planted errors
# ---------------------------------------------------------------------------------------------
def test_overlapping_pair_is_a_counterexample_with_its_size():
    out = L.check_envelope(prototype([(1, 1100), (1024, 4097)]), ProveCtx())
    assert out.status == "counterexample"
    assert out.counterexample["doubly_covered_size"] == 76  # [1024, 1100)
    assert out.counterexample["doubly_covered_witness"] == 1024
    assert "uncovered_size" not in out.counterexample
    assert "doubly covered" in out.detail and "76 values" in out.detail


def test_gap_is_a_counterexample_with_its_size():
    out = L.check_envelope(prototype([(1, 1000), (1024, 4097)]), ProveCtx())
    assert out.status == "counterexample"
    assert out.counterexample["uncovered_size"] == 24  # [1000, 1024)
    assert out.counterexample["uncovered_witness"] == 1000
    assert "doubly_covered_size" not in out.counterexample


def test_several_gaps_sum_and_overlap_reported_together():
    out = L.check_envelope(prototype([(1, 100), (200, 300), (400, 4097)]), ProveCtx())
    assert out.counterexample["uncovered_size"] == 200
    assert out.counterexample["uncovered_witness"] == 100
    out = L.check_envelope(prototype([(1, 600), (500, 1000), (1024, 4097)]), ProveCtx())
    assert out.counterexample["doubly_covered_size"] == 100
    assert out.counterexample["uncovered_size"] == 24
    assert out.counterexample["uncovered_witness"] == 1000


def test_range_outside_the_envelope():
    out = L.check_envelope(prototype([(0, 1024), (1024, 4097)]), ProveCtx())
    assert out.status == "counterexample"
    assert out.counterexample["outside_envelope_size"] == 1
    assert out.counterexample["outside_envelope_witness"] == 0


def test_exact_partition_is_proved_unsealed_and_sealed():
    ranges = [(1, 64), (64, 1024), (1024, 4097)]
    assert L.check_envelope(prototype(ranges), ProveCtx()).status == "proved"
    sealed = prototype(ranges)
    Module((sealed,))
    assert L.check_envelope(sealed, ProveCtx()).status == "proved"


def test_prototype_without_variants_is_an_error():
    out = L.check_envelope(prototype([]), ProveCtx())
    assert out.status == "error" and "no variants" in out.detail


def test_obligation_checks_the_module_it_is_given():
    bad = prototype([(1, 1100), (1024, 4097)], name="g")
    good = prototype([(1, 2048), (2048, 4097)], name="h")
    [(ob, out)] = run_obligations(["envelope.partition"], module=Module((good, bad)))
    assert out.status == "counterexample" and unexpected(ob, out)
    assert out.counterexample["prototype"] == "g"
    assert out.counterexample["doubly_covered_size"] == 76
    assert any(case.startswith("h:") and s == "proved" for case, s in out.sub)


def test_module_without_prototypes_is_a_report():
    t = TensorType((4,), DType.F32)
    x = Var("x", t)
    [(ob, out)] = run_obligations(["envelope.partition"],
                                  module=Module((Function("k", (x,), x, t),)))
    assert out.status == "report" and not unexpected(ob, out)


# ---------------------------------------------------------------------------------------------
# reshard.strides: planted stride functions
# ---------------------------------------------------------------------------------------------
def test_outer_stride_off_by_one_up_leaves_the_allocation():
    def bad(x):
        return tuple(s + 1 if k == 0 else s for k, s in enumerate(L.shared_engine_z3(x)))

    out = L.check_strides(bad, ProveCtx(), form=L.SHARED, shapes=FEW)
    assert out.status == "counterexample"
    cex = out.counterexample
    assert cex["case"].endswith("inside the allocation")
    assert int(cex["address"]) >= int(cex["allocation"])


def test_outer_stride_off_by_one_down_aliases():
    def bad(x):
        return tuple(s - 1 if k == 0 else s for k, s in enumerate(L.shared_engine_z3(x)))

    out = L.check_strides(bad, ProveCtx(), form=L.SHARED, shapes=FEW)
    assert out.status == "counterexample"
    cex = out.counterexample
    assert cex["case"].endswith("injective") and cex["i"] != cex["j"]
    i, j = ast.literal_eval(cex["i"]), ast.literal_eval(cex["j"])  # tuples of ints
    strides = [int(cex[f"s{p}"]) for p in range(len(i))]

    def addr(idx):
        return sum(a * s for a, s in zip(idx, strides, strict=True))

    assert addr(i) == addr(j) == int(cex["address"])


def test_nonzero_stride_on_a_split_position_is_caught():
    def bad(x):
        return tuple(1 if k in x.split else s for k, s in enumerate(L.per_instance_z3(x)))

    out = L.check_strides(bad, ProveCtx(), form=L.PER_INSTANCE, shapes=FEW)
    assert out.status == "counterexample"
    assert out.counterexample["case"].endswith("stride 0 on split positions")
    assert out.counterexample["s0"] == "1"


def test_the_real_forms_pass_check_strides():
    ctx = ProveCtx()
    assert L.check_strides(L.shared_engine_z3, ctx, form=L.SHARED, shapes=FEW).status == "proved"
    assert L.check_strides(L.per_instance_z3, ctx, form=L.PER_INSTANCE,
                           shapes=FEW).status == "proved"


def test_d65_block_split_aliases_and_local_c_order_does_not():
    ctx = ProveCtx()
    out = L.check_strides(L.per_instance_z3, ctx, form=L.PER_INSTANCE, local_hi=8, shapes=FEW)
    assert out.status == "counterexample" and out.counterexample["case"].endswith("injective")
    out = L.check_strides(L.per_instance_table_z3, ctx, form=L.PER_INSTANCE, local_hi=8,
                          shapes=FEW)
    assert out.status == "counterexample"
    out = L.check_strides(L.local_c_order_z3, ctx, form=L.PER_INSTANCE, local_hi=8,
                          zero_split=False, shapes=FEW)
    assert out.status == "proved"


def test_transcriptions_match_the_python_methods():
    sl = ShardLayout(Mesh("device", ("x", "y"), (2, 4)), (Split(0), Split(2)),
                     Layout(((4, 3), 8)))
    x = L.Extents.of(sl)
    assert x.local == sl.local_positions()
    assert L.shared_engine_z3(x) == sl.shared_engine_strides()
    assert L.per_instance_z3(x) == sl.per_instance_strides()


# ---------------------------------------------------------------------------------------------
# reshape.ownership: the ownership model and the sound-layout search
# ---------------------------------------------------------------------------------------------
def test_ownership_of_a_rule2_reshape_is_preserved():
    sl = ShardLayout(Mesh("device", ("x",), (2,)), (Split(1),), Layout((3, 12, 5)))
    out = reshape_layout(sl, (3, 12, 5), (12, 15))
    states, own = L.ownership(sl)
    states2, own2 = L.ownership(out)
    assert states == states2 and np.array_equal(own, own2)
    # a planted wrong result (the Split on the inner sub-factor) moves elements
    wrong = ShardLayout(sl.mesh, (Split(2),), Layout(((3, 2, 2), (3, 5))))
    assert not np.array_equal(own, L.ownership(wrong)[1])


def test_sound_but_rejected_reshape_has_a_checked_witness():
    sl = ShardLayout(Mesh("device", ("x",), (2,)), (Split(0),), Layout((4, 3)))
    with pytest.raises(ReshapeRejected):
        reshape_layout(sl, (4, 3), (6, 2))
    wit = L.sound_layout(sl, (6, 2), L.ownership(sl)[1])
    assert wit is not None and wit.layout.axis_extents == (6, 2)
    assert np.array_equal(L.ownership(wit)[1], L.ownership(sl)[1])


def test_unsound_rejected_reshape_has_no_witness():
    # a cyclic split (owner = column % 4): no axis of (2, 6) is divisible by 4
    sl = ShardLayout(Mesh("device", ("x",), (4,)), (Split(1),), Layout((3, 4)))
    with pytest.raises(ReshapeRejected):
        reshape_layout(sl, (3, 4), (2, 6))
    assert L.sound_layout(sl, (2, 6), L.ownership(sl)[1]) is None
