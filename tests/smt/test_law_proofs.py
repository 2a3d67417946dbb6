"""The merge-law obligations: proved laws, refuted laws, and planted bugs caught."""

from __future__ import annotations

import z3

import tilefoundry.smt.obligations.laws as L
import tilefoundry.smt.obligations.laws_refute as LR
import tilefoundry.smt.obligations.laws_topk as LT
from tilefoundry.semantics.formats import DType
from tilefoundry.smt.framework import REGISTRY, ProveCtx, run_obligations

PROVED = ["laws.sum_i8", "laws.sum_i32", "laws.max_f32", "laws.min_f32", "laws.max_bf16",
          "laws.min_bf16", "laws.max_fp8e4m3", "laws.min_fp8e4m3", "laws.topk_merge_k1",
          "laws.topk_merge_k2"]
REFUTED = ["laws.f32_add_assoc", "laws.bf16_add_assoc", "laws.fold_sub_left_right",
           "laws.fold_add_left_right", "laws.welford_merge_assoc"]


def test_registered_with_their_expectations():
    for n in PROVED:
        assert REGISTRY[n].expect == "proved"
    for n in REFUTED:
        assert REGISTRY[n].expect == "counterexample"


def test_laws_that_hold_are_proved():
    for ob, out in run_obligations(PROVED):
        assert out.status == ob.expect == "proved", (ob.name, out.detail, out.counterexample)
        assert out.sub and all(st == "proved" for _, st in out.sub), out.sub


def test_laws_that_fail_give_concrete_counterexamples():
    results = dict((ob.name, out) for ob, out in run_obligations(REFUTED))
    for name, out in results.items():
        assert out.status == REGISTRY[name].expect == "counterexample", (name, out.detail)
        assert out.counterexample and all(v.startswith("0x")
                                          for v in out.counterexample.values()), name
    # simplest witnesses, with the intermediate values of both sides
    f32 = results["laws.f32_add_assoc"].counterexample
    assert f32["(a+b)+c"] != f32["a+(b+c)"]
    assert {"a+b", "b+c"} <= set(f32)
    assert (f32["a"], f32["b"], f32["c"]) == ("0x3f800000 (1)", "0x3f800000 (1)",
                                              "0x4b800000 (1*(2**24))")
    bf = results["laws.bf16_add_assoc"].counterexample
    assert bf["c"] == "0x4380 (1*(2**8))" and bf["(a+b)+c"] != bf["a+(b+c)"]
    sub = results["laws.fold_sub_left_right"].counterexample
    assert sub["(z-x0)-x1"].startswith("0xbf800000") and sub["x0-(x1-z)"].startswith("0x3f8")
    w = results["laws.welford_merge_assoc"].counterexample
    assert w["mean((ab)c)"] != w["mean(a(bc))"] or w["M2((ab)c)"] != w["M2(a(bc))"]


# --- planted errors ---------------------------------------------------------------------------
def test_wrong_identity_for_max_is_a_counterexample():
    plus_inf = L.identity_bits("min", DType.F32)  # +inf: the identity of min, not of max
    out = L.check_extremum_laws(ProveCtx(), DType.F32, "max", ident=plus_inf)
    assert out.status == "counterexample"
    assert "identity" in out.detail
    assert set(out.counterexample) == {"a", "op(e,a)", "op(a,e)"}


def test_wrong_identity_for_fp8e4m3_max_is_a_counterexample():
    out = L.check_extremum_laws(ProveCtx(), DType.FP8E4M3, "max", ident=0x80)  # -0, not -448
    assert out.status == "counterexample" and "identity" in out.detail


def test_max_without_the_signed_zero_order_is_caught():
    def ieee_only(kind, a, b):  # plain IEEE '<': -0 and +0 compare equal, so the first wins
        take_b = z3.And(z3.Not(a.nan), z3.Or(b.nan, z3.fpLT(a.fp, b.fp)))
        return b.select(take_b, a)

    out = L.check_extremum_laws(ProveCtx(), DType.BF16, "max", encoder=ieee_only)
    assert out.status == "counterexample"
    # reduce(max) orders -0 < +0, so the concrete cross-check already disagrees
    assert out.sub[0] == ("crosscheck with reductions.reduce(max)", "counterexample")


def test_wrong_identity_for_sum_is_a_counterexample():
    out = L.check_int_sum_laws(ProveCtx(), DType.I8, ident=1)
    assert out.status == "counterexample" and "identity" in out.detail


def test_topk_merge_without_sorting_is_caught():
    def concat_take(a, b, k):  # take_K(a ++ b): no sort
        out = [c.canonical() for c in [*a, *b][:k]]
        return out + [LT._invalid(out[0].key.size() if out else 4)] * (k - len(out))

    out = L.check_topk_laws(ProveCtx(), 2, orderings=[(True, "last")], merge=concat_take)
    assert out.status == "counterexample"


def test_topk_wrong_empty_state_is_caught():
    def one_valid(k):  # an "identity" holding a valid candidate
        return [L.Cand(z3.BoolVal(True), z3.BitVecVal(0, LT.KEY_BITS_ABSTRACT),
                       z3.BitVecVal(0, 32), z3.BitVecVal(7, LT.IDX_BITS))] + [
            LT._invalid(LT.KEY_BITS_ABSTRACT)] * (k - 1)

    out = L.check_topk_laws(ProveCtx(), 1, orderings=[(True, "last")], empty=one_valid)
    assert out.status == "counterexample" and "identity" in out.detail


def test_topk_key_that_orders_signed_zeros_is_caught():
    def zero_aware(value, index, largest, nan):  # -0 < +0: ties by index are then lost
        is_nan = z3.fpIsNaN(z3.fpBVToFP(value, z3.Float32()))
        sign = z3.Extract(31, 31, value) == 1
        vk = z3.If(sign, ~value, value | 0x80000000)
        vk = vk if largest else ~vk
        early = is_nan if nan == "first" else z3.Not(is_nan)
        return z3.Concat(z3.If(early, z3.BitVecVal(1, 1), z3.BitVecVal(0, 1)),
                         z3.If(is_nan, z3.BitVecVal(0, 32), vk), ~index)

    out = L.check_topk_laws(ProveCtx(), 1, orderings=[(True, "last")], key_fn=zero_aware)
    assert out.status == "counterexample"
    assert out.sub[0][1] == "counterexample"  # the lemma against the D38 key fails


def test_refuting_a_law_that_holds_finds_nothing():
    va, vb = LR.Var("a", z3.BitVec("a", 32), DType.F32), LR.Var("b", z3.BitVec("b", 32), DType.F32)
    rne = z3.RNE()
    ab, ba = z3.fpAdd(rne, va.fp, vb.fp), z3.fpAdd(rne, vb.fp, va.fp)
    out = LR.refute(ProveCtx(), "f32_add_comm", [va, vb], LR._differ(ab, ba),
                   {"a+b": ab, "b+a": ba},
                   lambda f: {"a+b": LR._np32(f)[0] + LR._np32(f)[1],
                              "b+a": LR._np32(f)[1] + LR._np32(f)[0]},
                   lambda r: LR._np_differ(r["a+b"], r["b+a"]), "f32 add is not commutative")
    assert out.status == "failed"  # no witness: never reported as a counterexample
