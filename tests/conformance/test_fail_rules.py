"""A FAIL message a person can act on (issue 33, Deliver 4; D302): the rule in words with the
section of docs/contracts.md it comes from, the error and the admitted interval as numbers
beside the ulp distance; and the per-op table of the terminal summary.

Issue 33: 'FAIL messages name the contract kind, not the rule ("FAIL under exact … 8.64e+08
ulp apart" for an error of 6e-08); ... no per-op table'."""

from __future__ import annotations

import json
import re
from pathlib import Path

import ml_dtypes
import numpy as np

from tilefoundry.cli import main
from tilefoundry.conformance.fail_rules import (
    ORACLE_KINDS,
    RULES,
    SECTIONS,
    fail_message,
    rule_for,
)
from tilefoundry.conformance.report_groups import op_table
from tilefoundry.semantics.evaluator.registry import CONTRACT_KINDS

ROOT = Path(__file__).resolve().parents[2]
CAT = ["--catalog", "synthetic_catalog:build_no_hang"]


def test_every_contract_kind_has_a_rule_and_every_section_is_a_heading():
    kinds = (*CONTRACT_KINDS, *ORACLE_KINDS)
    assert all((k, "*") in RULES for k in kinds), [k for k in kinds if (k, "*") not in RULES]
    assert {k for k, _ in RULES} == set(kinds)  # no rule for a kind the oracle does not make
    from tilefoundry.conformance.backend import known_op_names

    ops = known_op_names()
    assert all(o == "*" or o in ops for _, o in RULES), [o for _, o in RULES if o not in ops]
    headings = {m.group(1).strip() for m in re.finditer(
        r"^#{2,4} (.+)$", (ROOT / "docs" / "contracts.md").read_text(), re.M)}
    missing = [s for s in SECTIONS if s not in headings]
    assert not missing, f"sections the FAIL rules cite that docs/contracts.md lacks: {missing}"
    assert set(SECTIONS) == {s for _, s in RULES.values()}


def test_every_contract_the_oracle_writes_has_a_rule_of_its_kind():
    """Read from the oracle's source, so a new contract text without a rule fails here: each
    literal contract of a ``_judge`` / ``OutputVerdict`` call in oracle/*.py."""
    from tilefoundry.conformance.fail_rules import contract_kind

    found = set()
    for f in sorted((ROOT / "oracle").glob("*.py")):
        for m in re.finditer(r'(?:_judge\(\w+, |OutputVerdict\(\w+, \w+, )f?"([^"]+)"',
                             f.read_text()):
            found.add(contract_kind(m.group(1)))
    found.discard("none")  # UNJUDGED only: no contract decided it, no FAIL names it
    assert {"exact", "exact_bits", "permutation", "unspecified", "admitted_set",
            "enclosure"} <= found, found
    assert all((k, "*") in RULES for k in found), sorted(k for k in found
                                                        if (k, "*") not in RULES)


def test_the_rule_is_picked_by_kind_and_op_class():
    assert rule_for("ulp(<= 1 in bf16, Unary(exp))", "Unary(exp)", "bf16") == (
        "correctly rounded within 1 ulp in bf16 of the exact value",
        "Transcendentals: the ULP budget table")
    assert rule_for("exact", "Binary(add)", "f16")[1] == "Elementwise arithmetic"
    assert "round once to f16" in rule_for("exact", "Binary(add)", "f16")[0]
    assert rule_for("exact", "Cast", "bf16")[1] == "Conversions (`Cast`)"
    assert rule_for("exact", "Transpose", "f32")[1] == "How an output is judged"
    assert rule_for("admitted_set(unordered_tree, Reduce(sum))", "Reduce(sum)",
                    "f32")[1] == "Reductions"
    assert "NaN payload" in rule_for("exact bits (a copy: NaN payload and sign kept)",
                                     "Transpose", "f32")[0]
    assert rule_for("enclosure(Unary(exp) within 1 ulp; width median 2 / max 3 ulp)",
                    "Binary(mul)", "bf16")[1] == "How an output is judged"


def _exp_bf16():
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ir import Call, Function, Module, Var
    from tilefoundry.semantics.ops import Unary, UnaryKind
    from tilefoundry.semantics.types import TensorType

    x = Var("x", TensorType((4,), DType.BF16))
    return Module((Function("main", (x,), Call(Unary(UnaryKind.EXP), (x,)), None),))


def test_a_ulp_fail_states_the_rule_the_error_and_the_interval_as_numbers():
    from tilefoundry.oracle.compare import check

    mod = _exp_bf16()
    xs = np.array([0.5, 1.0, -2.0, 3.0], ml_dtypes.bfloat16)
    good = check(mod, "main", [xs], np.exp(xs.astype(np.float64)).astype(ml_dtypes.bfloat16))
    ref = np.asarray(good.reference.value)
    bits = ref.view(np.uint16).copy()
    bits[2] += 3  # three ulp away at one element (exp(-2) > 0: up the ordered line)
    bad = bits.view(ml_dtypes.bfloat16)
    v = check(mod, "main", [xs], bad)
    fails = [o for o in v.outputs if o.status == "FAIL"]
    msg = fail_message(v, fails)
    assert msg.startswith("Unary(exp) bf16: correctly rounded within 1 ulp in bf16 of the exact "
                          "value (contracts.md § Transcendentals: the ULP budget table) — "
                          "output 0: FAIL under ulp("), msg
    m = re.search(r"3 ulp apart \(error ([0-9.e+-]+), admitted \[([0-9.e+-]+), ([0-9.e+-]+)\]\)",
                  msg)
    assert m, msg
    e = float(ref[2])
    lo = float(np.array([bits[2] - 3 - 1], np.uint16).view(ml_dtypes.bfloat16)[0])
    hi = float(np.array([bits[2] - 3 + 1], np.uint16).view(ml_dtypes.bfloat16)[0])
    assert np.isclose(float(m.group(2)), lo, rtol=1e-5) and \
        np.isclose(float(m.group(3)), hi, rtol=1e-5), (m.groups(), lo, hi)
    assert np.isclose(float(m.group(1)), abs(float(bad[2]) - e), rtol=0.05), m.group(1)


def test_a_run_fail_record_names_the_rule_and_its_section(tmp_path, monkeypatch, capsys):
    """flaky/ulp1 returns a bf16 Binary result one ulp up: the exact elementwise rule, cited."""
    monkeypatch.chdir(tmp_path)
    assert main(["conformance", "run", "--backend", "flaky_backend:factory", *CAT, "--tier",
                 "full", "--cases", "flaky/ulp1", "--no-progress"]) == 1
    out = capsys.readouterr().out
    rec = next(json.loads(x) for x in (tmp_path / "tilefoundry-conformance.jsonl").read_text()
               .splitlines() if '"flaky/ulp1"' in x and '"type": "case"' in x)
    assert rec["verdict"] == "FAIL"
    assert re.match(r"Binary\(\w+\) bf16: widen to f32, operate in IEEE f32, round once to bf16: "
                    r"bit-exact \(contracts\.md § Elementwise arithmetic\) — output 0: FAIL "
                    r"under exact: .* 1 ulp apart \(error [0-9.e+-]+, admitted \[", rec["message"]), \
        rec["message"]
    assert "per op (" in out and "flaky/ulp1: Binary(" in out, out


def test_the_per_op_table_counts_a_case_under_each_op_and_puts_failures_first():
    recs = [
        {"id": "a", "verdict": "PASS", "ops": ["Binary.add", "Unary.exp"]},
        {"id": "b", "verdict": "FAIL", "ops": ["Unary.exp"]},
        {"id": "c", "verdict": "ERROR", "ops": ["Cast", "Cast"]},
        {"id": "d", "verdict": "NOT_SUPPORTED", "ops": ["MatMul"]},
        {"id": "e", "verdict": "PASS", "ops": ["Binary.add"]},
    ]
    lines = op_table(recs).splitlines()
    assert lines[0].startswith("per op (3 op(s)")
    assert lines[1].split() == ["op", "cases", "PASS", "FAIL", "ERROR"]
    rows = {x.split()[0]: x.split()[1:] for x in lines[3:]}
    assert rows == {"Unary.exp": ["2", "1", "1", "-"], "Cast": ["1", "-", "-", "1"],
                    "Binary.add": ["2", "2", "-", "-"]}
    assert [x.split()[0] for x in lines[3:]] == ["Unary.exp", "Cast", "Binary.add"]
    assert "MatMul" not in "\n".join(lines)  # NOT_SUPPORTED: broken down by reason instead
    assert op_table([recs[3]]) == ""


def test_every_unjudged_case_of_a_selfcheck_sized_run_is_named():
    """Issue 33: `make selfcheck` ended 'UNJUDGED (13 unnamed cases)'; 13 cases of one reason
    are each named (the list is cut only past 50)."""
    from tilefoundry.conformance.report_groups import reason_lines

    msg = ("1 of 3 element(s) unjudged in 1 output(s): output 0: UNJUDGED under enclosure(x) — "
           "1 of 3 element(s) unjudged (their enclosure admits every value: Conv2D)")
    recs = [{"id": f"u/{i}", "verdict": "UNJUDGED", "message": msg} for i in range(13)]
    line = reason_lines(recs).splitlines()[1]
    assert line.startswith("  13 case(s): enclosure admits every value: Conv2D: u/0, u/1")
    assert line.rsplit(": ", 1)[1].split(", ") == [f"u/{i}" for i in range(13)], line


def test_a_case_listing_an_op_class_is_counted_under_the_kinds_its_program_uses(tmp_path):
    """A catalog case whose op list names a class (``Reduce``) beside a kind (``Reduce.sum``)
    is recorded under ``Reduce.sum`` once: the per-op table never shows a bare class beside
    its kinds (it used to count the case under both)."""
    from tilefoundry.conformance import runner

    cid = "spec/reduce/empty-sum-identity/f32"
    (case,) = runner.select_cases(runner.load_catalog(0), "quick", [cid])
    assert "Reduce" in case.ops  # the catalog names the class
    res = runner.run("reference", [case], jobs=1, out_jsonl=tmp_path / "r.jsonl")
    (rec,) = res.records
    assert rec["verdict"] == "PASS" and rec["ops"] == ["Reduce.sum"], rec
