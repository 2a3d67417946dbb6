"""The rounding obligations: every f32 -> narrow-float cast proved, and planted bugs caught."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import z3

import tilefoundry.smt.obligations.rounding as R
from tilefoundry.semantics.dtypes import cast
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.smt.framework import REGISTRY, ProveCtx, run_obligations

NAMES = [R.obligation_name(*case) for case in R.rounding_cases()]


def test_every_destination_and_mode_is_registered():
    assert len(NAMES) == 14  # f16, bf16, e5m2, e4m3: 2 modes each; e8m0: 2 x 3
    assert "rounding.f32_to_bf16.nonfinite" in REGISTRY
    assert "rounding.f32_to_f8e8m0.saturate.down" in REGISTRY
    assert all(REGISTRY[n].expect == "proved" for n in NAMES)


def test_all_rounding_obligations_are_proved():
    results = run_obligations(NAMES)
    assert [ob.name for ob, _ in results] == NAMES
    for ob, out in results:
        assert out.status == ob.expect, (ob.name, out.status, out.detail, out.counterexample)
        assert dict(out.sub) == {"crosscheck": "proved", "symbolic": "proved",
                                 **({"midpoint spec == FP-theory spec": "proved"}
                                    if "fp8e5m2" in ob.name else {})}


@pytest.mark.parametrize("dt", R.DESTINATIONS)
def test_patterns_cover_the_interesting_cases(dt):
    pats = R.f32_patterns(dt)
    assert 200 <= len(pats) <= 600
    assert {0x0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000} <= set(pats.tolist())
    info = FORMATS[dt]
    if dt is not DType.F8E8M0:  # the overflow threshold (a tie between max and the next value)
        top = R._grid(info)
        thr = np.float32(float((top[-1] + top[-2]) / 2))
        assert int(thr.view(np.uint32)) in set(pats.tolist())


def test_encoding_evaluates_like_cast_on_a_tie_and_a_carry():
    x = z3.BitVec("x", 32)
    info = FORMATS[DType.BF16]
    enc = R.encode_round_f32(x, info, "nonfinite", "nearest")
    for p in (0x3F808000, 0x3F818000, 0x3FFFFFFF, 0x7F7FFFFF):  # ties to even, carry, overflow
        got = z3.simplify(z3.substitute(enc, (x, z3.BitVecVal(p, 32)))).as_long()
        ref = int(cast(np.array([p], np.uint32).view(np.float32), DType.BF16).view(np.uint16)[0])
        assert got == ref, hex(p)


# --- planted errors: the checks can fail ------------------------------------------------------
AWAY = functools.partial(R.encode_round_f32, ties="away")


@pytest.mark.parametrize("dt", [DType.F16, DType.BF16, DType.FP8E5M2, DType.FP8E4M3])
def test_ties_away_is_a_counterexample_symbolically(dt):
    out = R.check_rounding(ProveCtx(), dt, "nonfinite", "nearest", AWAY, concrete=False)
    assert out.status == "counterexample", out.detail
    assert out.counterexample is not None and "x" in out.counterexample
    assert out.counterexample["x"].startswith("0x")
    # a readable witness is shown next to the solver's
    assert "smallest structured witness" in out.counterexample


@pytest.mark.parametrize("dt", [DType.BF16, DType.FP8E4M3])
def test_ties_away_is_a_counterexample_concretely(dt):
    out = R.check_rounding(ProveCtx(), dt, "saturate", "nearest", AWAY, symbolic=False)
    assert out.status == "counterexample"
    assert set(out.counterexample) == {"x", "encoded", "dtypes.cast"}
    assert out.counterexample["x"].startswith("0x")


@pytest.mark.parametrize("dt,overflow", [(DType.F16, "nonfinite"), (DType.FP8E5M2, "saturate"),
                                         (DType.FP8E4M3, "nonfinite"),
                                         (DType.FP8E4M3, "saturate"),
                                         (DType.F8E8M0, "saturate")])
def test_wrong_max_finite_is_a_counterexample(dt, overflow):
    wrong = functools.partial(R.encode_round_f32, max_code=FORMATS[dt].max_code - 1)
    sym = R.check_rounding(ProveCtx(), dt, overflow, "nearest", wrong, concrete=False)
    assert sym.status == "counterexample", sym.detail
    con = R.check_rounding(ProveCtx(), dt, overflow, "nearest", wrong, symbolic=False)
    assert con.status == "counterexample", con.detail


def test_fp8e4m3_ties_away_witness_is_the_smallest_subnormal_tie():
    out = R.check_rounding(ProveCtx(), DType.FP8E4M3, "nonfinite", "nearest", AWAY,
                           concrete=False)
    # 2^-10 lies halfway between 0 and the smallest subnormal 2^-9: even gives 0, away 2^-9
    assert out.counterexample["smallest structured witness"].startswith("0x3a800000")


@pytest.mark.parametrize("rounding,wrong", [("nearest", "up"), ("down", "nearest"),
                                            ("up", "down")])
def test_f8e8m0_wrong_rounding_mode_is_a_counterexample(rounding, wrong):
    def enc(x, info, overflow, _rounding):
        return R.encode_round_f32(x, info, overflow, wrong)

    out = R.check_rounding(ProveCtx(), DType.F8E8M0, "nonfinite", rounding, enc)
    assert out.status == "counterexample"


def test_a_wrong_specification_is_caught_too():
    """The proof compares two independent constructions: break the spec, not the encoder."""

    def enc(x, info, overflow, rounding):  # nonfinite encoder checked against saturate spec
        return R.encode_round_f32(x, info, "nonfinite", rounding)

    out = R.check_rounding(ProveCtx(), DType.F16, "saturate", "nearest", enc, concrete=False)
    assert out.status == "counterexample"


def test_solver_giving_up_is_failed_not_proved():
    out = R.check_rounding(ProveCtx(rlimit=1000), DType.FP8E4M3, "nonfinite", "nearest",
                           concrete=False)
    assert out.status == "failed"
