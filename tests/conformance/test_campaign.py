"""CI campaigns (issue 22, deliverable 3): ``conformance merge`` of shard results, baselines
(``--baseline`` / ``--write-baseline``), ``conformance diff`` and ``--flake-retries``.

Issue 22, Must show: '`--shard` 1/3, 2/3, 3/3 ...: `merge` of them equals a single run's
report; a baseline run with one new regression fails naming it.' Bad input: 'a shard spec like
`4/3` or `0/2`, a baseline file with unknown case ids or malformed entries: a one-line error,
exit 2, before any case runs.'"""

from __future__ import annotations

import json

import pytest

from tilefoundry.cli import main
from tilefoundry.conformance.report import read_jsonl, strip_timing

CAT = ["--catalog", "synthetic_catalog:build_no_hang", "--tier", "full"]
FLAKY = "flaky_backend:factory"


def cli(*args: str) -> int:
    return main(["conformance", *args])


def _records(path) -> list[dict]:
    return sorted(read_jsonl(path)[1].values(), key=lambda r: r["id"])


def _summary(path) -> dict:
    return json.loads(path.read_text().splitlines()[-1])


def _table(out: str) -> str:
    """The summary table of a report (the lines from the 'family' header to the total row)."""
    lines = out.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("family"))
    end = next(i for i, x in enumerate(lines) if x.startswith("total"))
    return "\n".join(lines[start:end + 1])


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """The synthetic catalog's full tier (14 cases, 2 FAIL, 2 CRASH, 2 ERROR on the flaky
    backend) as one run and as three shards: the directory, exit codes and the single run's
    report."""
    d = tmp_path_factory.mktemp("shards")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.stdout", __import__("io").StringIO())
        for name, extra in (("single", []), ("s1", ["--shard", "1/3"]),
                            ("s2", ["--shard", "2/3"]), ("s3", ["--shard", "3/3"])):
            rc = cli("run", "--backend", FLAKY, *CAT, "-j", "2", "--no-progress", "--jsonl",
                     str(d / f"{name}.jsonl"), *extra)
            out[name] = rc
            if name == "single":
                report = __import__("sys").stdout.getvalue()
    return d, out, report


def test_merge_of_three_shards_is_the_single_runs_report(shards, capsys):
    d, rcs, single_out = shards
    capsys.readouterr()
    parts = [_records(d / f"s{i}.jsonl") for i in (1, 2, 3)]
    ids = [r["id"] for p in parts for r in p]
    single = _records(d / "single.jsonl")
    assert len(single) == 14 and sorted(ids) == [r["id"] for r in single]  # union, no repeats
    assert all(parts), "a shard of 14 cases in 3 is empty"
    assert rcs["single"] == 1

    rc = cli("merge", *(str(d / f"s{i}.jsonl") for i in (3, 1, 2)), "-o", str(d / "m.jsonl"))
    merged_out = capsys.readouterr().out
    assert rc == rcs["single"] == 1
    assert strip_timing(_records(d / "m.jsonl")) == strip_timing(single)
    assert _table(merged_out) == _table(single_out)
    assert "result: FAIL (2 FAIL, 2 CRASH, 2 ERROR)" in merged_out, merged_out
    s = _summary(d / "m.jsonl")
    assert s["type"] == "summary" and s["counts"] == _summary(d / "single.jsonl")["counts"]
    assert s["cases"] == 14 and s["exit_code"] == 1


@pytest.mark.parametrize(("files", "pattern"), [
    (("s1", "s2"), "shard(s) ['3/3'] missing"),
    (("s1", "s2", "s3", "s2"), "shard(s) ['2/3'] given twice"),
    (("single", "single"), "is in both"),
    (("s1", "s2", "single"), "different splits"),
    (("s1", "nonexistent"), "cannot read it"),
])
def test_merge_refuses_files_that_are_not_one_campaign(shards, capsys, files, pattern):
    d, *_ = shards
    rc = cli("merge", *(str(d / f"{f}.jsonl") for f in files), "-o", str(d / "bad.jsonl"))
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and pattern in err, err


def test_merge_refuses_another_backends_shard(shards, tmp_path, capsys):
    d, *_ = shards
    lines = (d / "s3.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    head["backend"] = "other:factory"
    (tmp_path / "s3.jsonl").write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    rc = cli("merge", str(d / "s1.jsonl"), str(d / "s2.jsonl"), str(tmp_path / "s3.jsonl"),
             "-o", str(tmp_path / "m.jsonl"))
    err = capsys.readouterr().err
    assert rc == 2 and "its backend is 'other:factory', not 'flaky_backend:factory'" in err, err


def test_a_baseline_passes_known_failures_and_fails_naming_a_new_one(tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.chdir(tmp_path)
    rc = cli("run", "--backend", FLAKY, *CAT, "--no-progress", "--write-baseline", "known.json")
    assert rc == 1
    known = json.loads((tmp_path / "known.json").read_text())
    assert sorted(e["case"] for e in known["failures"]) == [
        "flaky/exit", "flaky/garbage", "flaky/malformed", "flaky/raise", "flaky/segv",
        "flaky/ulp1"]
    assert all(e["reason"] for e in known["failures"])
    capsys.readouterr()

    # every failure known: exit 0
    assert cli("run", "--backend", FLAKY, *CAT, "--no-progress", "--baseline", "known.json",
               "--overwrite") == 0
    out = capsys.readouterr().out
    assert "6 known failure(s), 0 new, 0 fixed" in out and "result: PASS (no new failure; 6 " \
        "known)" in out, out

    # one regression: a baseline without flaky/ulp1 -> it is new, named, exit 1
    known2 = {**known, "failures": [e for e in known["failures"] if e["case"] != "flaky/ulp1"]}
    # ... and one fixed: the baseline lists a case that passes
    known2["failures"].append({"case": "elementwise/add/f32", "verdict": "FAIL",
                               "reason": "was broken in 0.1"})
    (tmp_path / "known2.json").write_text(json.dumps(known2))
    rc = cli("run", "--backend", FLAKY, *CAT, "--no-progress", "--baseline", "known2.json",
             "--overwrite")
    out = capsys.readouterr().out
    assert rc == 1
    assert "new failure(s), not in the baseline known2.json:\nFAIL     flaky/ulp1: " in out, out
    assert "5 known failure(s), 1 new, 1 fixed" in out, out
    assert "FIXED    elementwise/add/f32: PASS now (the baseline lists FAIL: was broken in " \
           "0.1)" in out, out
    assert "result: FAIL (new: 1 FAIL)" in out, out
    assert _summary(tmp_path / "tilefoundry-conformance.jsonl")["baseline"] == {
        "known": 5, "new": ["flaky/ulp1"], "fixed": ["elementwise/add/f32"], "changed": []}


@pytest.mark.parametrize(("text", "pattern"), [
    ('{"failures": [{"case": "no/such/case", "verdict": "FAIL", "reason": "r"}]}',
     "1 case id(s) the catalog does not have: ['no/such/case']"),
    ('{"failures": [{"case": "flaky/garbag", "verdict": "FAIL", "reason": "r"}]}',
     "(closest id to 'flaky/garbag': 'flaky/garbage')"),
    ('{"failures": [{"case": "flaky/garbage", "verdict": "FAIL"}]}',
     "failures[0] ('flaky/garbage'): a non-empty 'reason' is required"),
    ('{"failures": [{"case": "flaky/garbage", "verdict": "BAD", "reason": "r"}]}',
     "failures[0] ('flaky/garbage'): 'verdict' must be one of"),
    ('{"failures": [{"case": "flaky/garbage", "verdict": "FAIL", "reason": "r", "x": 1}]}',
     "failures[0]: unknown key(s) ['x']"),
    ('{"failures": ["flaky/garbage"]}', "failures[0]: expected an object"),
    ('{"failures": {}}', "'failures' must be a list"),
    ('[1, 2]', "expected a JSON object"),
    ('not json', "not valid JSON"),
])
def test_a_bad_baseline_is_one_line_and_exit_2_before_any_case(tmp_path, monkeypatch, capsys,
                                                               text, pattern):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "b.json").write_text(text)
    rc = cli("run", "--backend", FLAKY, *CAT, "--baseline", "b.json", "--jsonl", "r.jsonl")
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith("tilefoundry conformance: error: --baseline b.json") and \
        pattern in err, err
    assert not (tmp_path / "r.jsonl").exists()  # no case ran


def _write_run(path, verdicts: dict[str, str]) -> None:
    lines = [{"type": "run", "format": 1, "backend": "b", "seed": 0}]
    lines += [{"type": "case", "id": c, "family": "f", "verdict": v, "message": f"m {c}"}
              for c, v in verdicts.items()]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_diff_names_regressions_fixes_changes_and_lone_cases(tmp_path, capsys):
    _write_run(tmp_path / "a.jsonl", {"x": "PASS", "y": "FAIL", "z": "CRASH", "w": "PASS",
                                      "gone": "PASS", "ns": "NOT_SUPPORTED"})
    _write_run(tmp_path / "b.jsonl", {"x": "FAIL", "y": "PASS", "z": "ERROR", "w": "PASS",
                                      "new": "FAIL", "ns": "TIMEOUT"})
    rc = cli("diff", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"))
    out = capsys.readouterr().out.splitlines()
    assert rc == 1
    assert out[0] == "2 regressed, 1 fixed, 1 other change(s), 1 unchanged, 1 only in A, " \
                     "1 only in B"
    assert set(out[1:]) == {"REGRESSED ns: NOT_SUPPORTED -> TIMEOUT: m ns",
                            "REGRESSED x: PASS -> FAIL: m x", "FIXED     y: FAIL -> PASS",
                            "CHANGED   z: CRASH -> ERROR", "ONLY-A    gone", "ONLY-B    new"}
    assert cli("diff", str(tmp_path / "b.jsonl"), str(tmp_path / "b.jsonl")) == 0
    capsys.readouterr()
    assert cli("diff", str(tmp_path / "a.jsonl"), str(tmp_path / "nope.jsonl")) == 2


def test_flake_retries_mark_a_case_that_passes_later_flaky(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLIP_FILE", str(tmp_path / "flip"))
    monkeypatch.setenv("FLIP_FAILS", "1")
    args = ["run", "--backend", FLAKY, "--catalog", "synthetic_catalog:build_flip",
            "--no-progress"]
    assert cli(*args, "--jsonl", "no-retry.jsonl") == 1  # the first run of flip fails
    assert read_jsonl("no-retry.jsonl")[1]["flaky/flip"]["verdict"] == "FAIL"
    (tmp_path / "flip").unlink()
    capsys.readouterr()
    rc = cli(*args, "--flake-retries", "2", "-j", "2")
    out = capsys.readouterr().out
    recs = read_jsonl("tilefoundry-conformance.jsonl")[1]
    assert rc == 1  # flaky/garbage fails every attempt
    assert recs["flaky/flip"]["verdict"] == "FLAKY"
    assert recs["flaky/flip"]["attempts"] == ["FAIL", "PASS"]
    assert recs["flaky/flip"]["message"].startswith("flaky: FAIL on attempt 1, PASS on attempt "
                                                    "2: Binary(add) f32: ")
    assert " — output 0: FAIL" in recs["flaky/flip"]["message"]
    assert recs["flaky/garbage"]["verdict"] == "FAIL"
    assert recs["flaky/garbage"]["attempts"] == ["FAIL", "FAIL", "FAIL"]
    assert "attempts" not in recs["elementwise/add/f32"]  # a pass runs once
    assert "result: FAIL (1 FAIL); 1 FLAKY" in out, out
    assert "[every attempt failed: FAIL, FAIL, FAIL]" in out, out
    (tmp_path / "flip").unlink()
    assert cli(*args, "--flake-retries", "1", "--cases", "flaky/flip", "--jsonl", "f.jsonl") == 0
    assert "result: PASS; 1 FLAKY" in capsys.readouterr().out
    assert cli(*args, "--flake-retries", "-1") == 2
    assert "--flake-retries: expected a non-negative integer" in capsys.readouterr().err
