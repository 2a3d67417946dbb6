"""``conformance probe`` claims what it saw (issue 33, Deliver 3; D300, D301).

Issue 33: '`conformance probe` over-claims (one passing f16→f32 Cast claims every Cast target:
118 ERRORs in the follow-up run) and under-claims (it probes each op with its smallest case,
the empty reduction, so one edge-case error drops Reduce.min entirely).'"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tilefoundry.cli import main
from tilefoundry.conformance.backend import Capabilities, requirements, unsupported_reason
from tilefoundry.conformance.probe_edges import (
    ORDINARY_PREFIX,
    input_edge,
    ordinary_variant,
    result_edge,
)
from tilefoundry.conformance.selection import ConformanceError, validate_capabilities
from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops.tensor import Cast
from tilefoundry.semantics.types import TensorType

F16, F32, BF16 = DType.F16, DType.F32, DType.BF16


def _cast_module(src: DType, dst: DType) -> Module:
    x = Var("x", TensorType((4,), src))
    return Module((Function("main", (x,), Call(Cast(dst), (x,)), None),))


def _records(path) -> list[dict]:
    return [r for r in (json.loads(x) for x in path.read_text().splitlines())
            if r.get("type") == "case"]


# ---------------------------------------------------------------------------------------------
# Capabilities.cast_pairs
# ---------------------------------------------------------------------------------------------
def test_cast_pairs_round_trip_and_decide_what_a_cast_needs():
    caps = Capabilities(ops=frozenset({"Cast"}), dtypes=frozenset({F16, F32, BF16}),
                        overflow_modes=frozenset({"nonfinite"}),
                        rounding_modes=frozenset({"nearest"}),
                        cast_pairs=frozenset({(F16, F32)}))
    data = json.loads(json.dumps(caps.to_json()))
    assert data["cast_pairs"] == [["f16", "f32"]]
    back = validate_capabilities(Capabilities.from_json(data), "x")
    assert back.cast_pairs == frozenset({(F16, F32)}) and back == caps
    assert requirements(_cast_module(F16, F32)).cast_pairs == {(F16, F32)}
    assert unsupported_reason(back, requirements(_cast_module(F16, F32))) is None
    why = unsupported_reason(back, requirements(_cast_module(F32, F16)))
    assert why == "cast pair(s) [f32->f16] not in the backend's capabilities (cast_pairs)", why
    # no field: the old behaviour, every pair of claimed dtypes (old files keep working)
    old = {k: v for k, v in data.items() if k != "cast_pairs"}
    legacy = validate_capabilities(Capabilities.from_json(old), "x")
    assert legacy.cast_pairs is None and "cast_pairs" not in legacy.to_json()
    assert unsupported_reason(legacy, requirements(_cast_module(F32, BF16))) is None


@pytest.mark.parametrize(("pairs", "message"), [
    ([["f16"]], "'cast_pairs' must be null or a list of [source, destination] dtype names"),
    ("f16->f32", "'cast_pairs' must be null or a list of [source, destination] dtype names"),
    ([["f16", "f23"]], "cast_pairs[f16->f23]: unknown dtype 'f23' (closest valid name: 'f32')"),
])
def test_a_malformed_cast_pair_is_named(pairs, message):
    data = {**Capabilities(ops=frozenset({"Cast"}), dtypes=frozenset({F16})).to_json(),
            "cast_pairs": pairs}
    with pytest.raises((InvalidArgumentError, ConformanceError)) as e:
        validate_capabilities(Capabilities.from_json(data), "x")
    assert message in str(e.value), str(e.value)


# ---------------------------------------------------------------------------------------------
# ordinary and edge cases
# ---------------------------------------------------------------------------------------------
def test_inputs_are_classified_vectorized():
    assert input_edge([np.ones((2, 0), np.float32)]) == "empty"
    assert input_edge([np.array([1.0, np.nan], np.float32)]) == "special"
    assert input_edge([np.array([1.0, -np.inf], np.float32)]) == "special"
    assert input_edge([np.array([1.0, -0.0], np.float32)]) == "special"
    assert input_edge([np.array([1.0, 0.0, -2.5], np.float32), np.array([3], np.int32)]) is None
    import ml_dtypes

    assert input_edge([np.array([1.0, np.nan], ml_dtypes.bfloat16)]) == "special"


def test_a_non_finite_result_is_an_edge_and_the_variant_sanitizes_specials():
    from tilefoundry.conformance.cases import Case
    from tilefoundry.semantics.ops import Binary, BinaryKind

    x = Var("x", TensorType((3,), F16))
    mod = Module((Function("main", (x,), Call(Binary(BinaryKind.MUL), (x, x)), None),))
    big = np.array([60000.0, 1.0, 2.0], np.float16)  # 60000² overflows f16
    assert result_edge(mod, "main", [big]) == "non-finite"
    assert result_edge(mod, "main", [np.array([3.0, 1.0, 2.0], np.float16)]) is None
    case = Case("t/x", "math", lambda: (mod, "main", [np.array([np.nan, -0.0, 2.0],
                                                                np.float16)]))
    var = ordinary_variant(case)
    assert var.id == ORDINARY_PREFIX + "t/x" and var.family == "math"
    _, _, (got,) = var.build()
    assert got.dtype == np.float16 and got.tolist() == [1.0, 1.0, 2.0]
    assert input_edge([got]) is None and case.build()[2][0][1] == 0  # the case is unchanged


# ---------------------------------------------------------------------------------------------
# the probe, end to end
# ---------------------------------------------------------------------------------------------
CASTS = ["--cases", "cast/*", "--cases", "spec/cast/*"]


def test_a_passing_f16_to_f32_cast_claims_exactly_that_pair(tmp_path, monkeypatch, capsys):
    """The planted backend lowers only Cast f16 -> f32. The probe claims that one pair; the
    follow-up run has no ERROR. The same set without the pair field (what the probe wrote
    before D300: Cast on {f16, f32}) claims f32 -> f16 and f16 -> f16 too, and ERRORs."""
    monkeypatch.chdir(tmp_path)
    spec = "planted_probe_backends:cast_f16_f32_only"
    assert main(["conformance", "probe", "--backend", spec, *CASTS, "--out", "caps.json",
                 "-j", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    caps = json.loads((tmp_path / "caps.json").read_text())
    assert caps["ops"] == ["Cast"] and caps["cast_pairs"] == [["f16", "f32"]], caps
    assert caps["dtypes"] == ["f16", "f32"], caps
    assert "cast pairs ['f16->f32']" in out, out
    rc = main(["conformance", "run", "--backend", spec, "--capabilities", "caps.json", *CASTS,
               "--jsonl", "r.jsonl", "--no-progress"])
    recs = _records(tmp_path / "r.jsonl")
    verdicts = {r["verdict"] for r in recs}
    assert rc == 0 and "ERROR" not in verdicts and "PASS" in verdicts, verdicts
    assert any("cast pair(s) [" in r["message"] for r in recs if r["verdict"] ==
               "NOT_SUPPORTED")
    old = {k: v for k, v in caps.items() if k != "cast_pairs"}
    (tmp_path / "old.json").write_text(json.dumps(old))
    capsys.readouterr()
    main(["conformance", "run", "--backend", spec, "--capabilities", "old.json", *CASTS,
          "--jsonl", "o.jsonl", "--no-progress"])
    assert any(r["verdict"] == "ERROR" for r in _records(tmp_path / "o.jsonl"))


def test_an_edge_case_error_is_a_finding_not_a_dropped_claim(tmp_path, monkeypatch, capsys):
    """The planted backend errors on empty inputs and is right on every ordinary case. The
    quick tier's single-op Reduce.min f32 cases are an empty reduction, NaN / signed-zero
    cases and a special-value row: the probe decides the claim on an ordinary variant, keeps
    Reduce.min on f32, and reports the empty reduction's ERROR as a finding."""
    monkeypatch.chdir(tmp_path)
    spec = "planted_probe_backends:empty_reduce_errors"
    globs = ["--cases", "spec/reduce/*min*", "--cases", "special/tensor/reduce-min/*"]
    assert main(["conformance", "probe", "--backend", spec, *globs, "--out", "caps.json",
                 "-j", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    caps = json.loads((tmp_path / "caps.json").read_text())
    assert "Reduce.min" in caps["ops"], caps
    assert {"f32", "bf16", "f16"} <= set(caps["op_dtypes"]["Reduce.min"]), caps
    finding = [x for x in out.splitlines() if x.startswith("  finding ERROR")]
    assert any("spec/reduce/empty-min-identity/f32 (Reduce.min on f32, empty): backend.run "
               "raised ValueError: empty input" in x for x in finding), out
    assert "rejected" not in "".join(x for x in out.splitlines() if "empty-min-identity/f32"
                                     in x), out
    recs = {r["id"]: r for r in _records(tmp_path / "tilefoundry-probe.jsonl")}
    assert recs[ORDINARY_PREFIX + "spec/reduce/min-orders-signed-zeros/f32"]["verdict"] == \
        "PASS"


def test_probe_cases_put_the_ordinary_case_first():
    """Per key: one claiming probe, ordinary where the tier has one; edge cases never claim."""
    from tilefoundry.conformance import probe, runner

    cat = runner.load_catalog(0)
    picked = probe.probe_cases(runner.select_cases(cat, "quick",
                                                   ["spec/reduce/*", "special/tensor/*"]))
    claim = {p.key: p for p in picked if p.claims}
    key = next(k for k in claim if k[:3] == ("op", "Reduce.min", ("f32",)))
    assert claim[key].edge is None and claim[key].case.id.startswith(ORDINARY_PREFIX)
    edges = {p.edge: p.case.id for p in picked if not p.claims and p.key == key}
    assert edges.get("empty") == "spec/reduce/empty-min-identity/f32", edges
    assert "special" in edges, edges
    ints = next(p for k, p in claim.items() if k[:3] == ("op", "Reduce.min", ("i32",)))
    assert ints.edge == "empty"  # the tier has no ordinary i32 min: decided on its edge case
    assert len({p.case.id for p in picked}) == len(picked)


def test_an_unclaimed_cast_pair_is_a_not_supported_reason_of_its_own():
    from tilefoundry.conformance.report_groups import reason_lines

    recs = [{"id": "a", "verdict": "NOT_SUPPORTED",
             "message": "cast pair(s) [f32->f16, f32->bf16] not in the backend's capabilities "
                        "(cast_pairs)"},
            {"id": "b", "verdict": "NOT_SUPPORTED",
             "message": "cast pair(s) [f32->f16] not in the backend's capabilities "
                        "(cast_pairs)"}]
    text = reason_lines(recs)
    assert "  cast pair not claimed: 2 case(s): f32->f16 2, f32->bf16 1" in text, text
