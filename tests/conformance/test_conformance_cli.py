"""``tilefoundry conformance run / fuzz / list``: reports, exit status, and bad input (one line
on stderr and exit status 2 before any case runs).

Issue 'conformance runner', Bad input: 'An unloadable backend path, a backend whose
capabilities() is malformed, a manifest with unknown keys, an unwritable report path: a one-line
error naming the problem and a non-zero exit before any case runs.'"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tilefoundry.cli import main
from tilefoundry.conformance.selection import ConformanceError, load_generator

CAT = ["--catalog", "synthetic_catalog:build_no_hang"]


def cli(*args: str) -> int:
    return main(["conformance", *args])


def test_run_writes_every_report_and_fails_on_failures(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = cli("run", "--backend", "flaky_backend:factory", *CAT, "--tier", "full", "-j", "2",
             "--timeout", "30", "--junit", "j.xml", "--coverage", "cov.txt", "--repro-dir",
             "repro", "--no-progress")
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "14 case(s)" in out, out and out.splitlines()[1].startswith("family")
    assert "CRASH    flaky/segv: the worker was killed by signal SIGSEGV" in out
    assert "result: FAIL (2 FAIL, 2 CRASH, 2 ERROR)" in out, out
    # issue 33: the FAILs grouped by root cause, the NOT_SUPPORTED case by reason, before them
    assert out.index("FAIL by root cause (2 group(s) over 2 case(s)") < \
        out.index("NOT_SUPPORTED by reason (1 case(s)") < out.index("result: FAIL"), out
    lines = (tmp_path / "tilefoundry-conformance.jsonl").read_text().splitlines()
    assert len(lines) == 16  # the header, one line per case, the closing summary
    summary = json.loads(lines[-1])
    assert summary["type"] == "summary" and summary["cases"] == 14
    assert summary["exit_code"] == 1 and summary["counts"]["CRASH"] == 2
    assert ET.parse(tmp_path / "j.xml").getroot().get("tests") == "14"
    assert "Binary.add" in (tmp_path / "cov.txt").read_text()
    # every non-PASS has a reproducer (issue 33): the two FAILs, CRASHes and ERRORs
    assert len(list((tmp_path / "repro").iterdir())) == 6


def test_run_passes_with_exit_status_zero(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = cli("run", "--backend", "reference", *CAT, "--cases", "elementwise/*", "--cases",
             "cast/*", "--jsonl", "x.jsonl")
    out = capsys.readouterr().out
    assert rc == 0 and "5 case(s)" in out and "result: PASS" in out


def test_list(capsys):
    assert cli("list", *CAT, "--tier", "quick", "--cases", "flaky/*") == 0
    c = capsys.readouterr()
    assert [x.split("\t")[0] for x in c.out.splitlines()] == ["flaky/segv", "flaky/garbage"]
    assert "2 case(s) in tier 'quick': flaky 2" in c.err


@pytest.mark.parametrize(("args", "pattern"), [
    (["--backend", "no_such_pkg.mod:factory"], "cannot import 'no_such_pkg.mod'"),
    (["--backend", "flaky_backend:nope"], "has no attribute 'nope'"),
    (["--backend", "nonsense"], "not a built-in"),
    (["--backend", "flaky_backend:bad_caps"], r"capabilities\(\) returned dict"),
    (["--backend", "reference", "--catalog", "synthetic_catalog:nope"],
     "has no attribute 'nope'"),
    (["--backend", "reference", "--manifest", "BAD"], r"unknown key\(s\) \['owner'\]"),
    # report folders are created; a path under a regular file cannot be
    (["--backend", "reference", "--junit", "afile/dir/j.xml"], "--junit afile/dir/j.xml: "
                                                                "cannot write it"),
    (["--backend", "reference", "--coverage", "."], "--coverage .: is a directory"),
    (["--backend", "reference", "--jsonl", "afile/r.jsonl"], "cannot write it"),
    (["--backend", "reference", "--repro-dir", "afile/x"], "--repro-dir afile/x"),
    (["--backend", "reference", "-j", "0"], "at least 1 worker"),
    (["--backend", "reference", "--reduce", "5"], "--reduce needs --repro-dir"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_case(tmp_path, monkeypatch, capsys,
                                                          args, pattern):
    import re

    monkeypatch.chdir(tmp_path)
    (tmp_path / "BAD").write_text('[[xfail]]\ncase = "a"\nreason = "r"\nowner = "me"\n')
    (tmp_path / "afile").write_text("")
    rc = cli("run", *CAT, *["--jsonl" if a == "--jsonl" else a for a in args],
             *([] if "--jsonl" in args else ["--jsonl", "r.jsonl"]))
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("tilefoundry conformance: error: ")
    assert re.search(pattern, err), err
    r = tmp_path / "r.jsonl"
    assert not r.exists() or r.read_text() == ""  # no case ran


def test_resume_of_a_file_from_another_run_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli("run", "--backend", "reference", *CAT, "--cases", "cast/*") == 0
    capsys.readouterr()
    assert cli("run", "--backend", "reference", *CAT, "--seed", "7", "--resume") == 2
    assert "written for backend 'reference' seed 0" in capsys.readouterr().err


def test_fuzz_runs_generated_programs_until_the_deadline(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = cli("fuzz", "--backend", "flaky_backend:truncating", "--minutes", "0.1",
             "--generator", "synthetic_catalog:generate", "--repro-dir", "repro", "--seed", "5")
    out = capsys.readouterr().out
    recs = [r for r in (json.loads(x) for x in (tmp_path / "tilefoundry-fuzz.jsonl")
                        .read_text().splitlines()[1:]) if r["type"] == "case"]
    assert len(recs) >= 5 and recs[0]["id"] == "fuzz/5/000000"
    assert {r["verdict"] for r in recs} <= {"PASS", "FAIL"}
    # every generated program holds one bf16 mul: the truncating backend fails some
    assert rc == 1 and "FAIL" in out and any(r["verdict"] == "FAIL" for r in recs)
    assert cli("fuzz", "--backend", "reference", "--minutes", "0", "--generator",
               "synthetic_catalog:generate") == 2


def test_fuzz_without_a_generator_names_the_gap_or_uses_the_oracles():
    try:
        gen = load_generator(None)
    except ConformanceError as e:
        assert "--generator" in str(e)
    else:
        assert callable(gen)


# ---------------------------------------------------------------------------------------------
# capability-directed fuzzing (issue 16, deliverable 5)
# ---------------------------------------------------------------------------------------------
def _fuzz_records(path):
    return [r for r in (json.loads(x) for x in path.read_text().splitlines()[1:])
            if r["type"] == "case"]


def test_fuzz_against_a_narrow_backend_stays_inside_it_and_finds_the_truncating_cast(tmp_path):
    """A fixed number of programs from a fixed seed: under 5 % NOT_SUPPORTED for a backend that
    declares only Binary / Unary / Cast on f32 and bf16, and the planted truncating bf16 cast
    FAILs within them; the correct narrow backend passes every one."""
    from narrow_backend import NARROW

    from tilefoundry.conformance.runner import run
    from tilefoundry.conformance.selection import GeneratedCases

    n = 40
    verdicts = {}
    for spec in ("narrow_backend:truncating", "narrow_backend:correct"):
        cases = GeneratedCases(load_generator(None, caps=NARROW), 11, limit=n)
        res = run(spec, cases, out_jsonl=tmp_path / "f.jsonl")
        verdicts[spec] = [r["verdict"] for r in res.records]
        assert len(verdicts[spec]) == n
        assert verdicts[spec].count("NOT_SUPPORTED") < 0.05 * n
    bad = verdicts["narrow_backend:truncating"]
    assert "FAIL" in bad and set(bad) <= {"PASS", "FAIL", "UNJUDGED"}, bad
    assert "FAIL" not in verdicts["narrow_backend:correct"]
    assert set(verdicts["narrow_backend:correct"]) <= {"PASS", "UNJUDGED"}
    # the unrestricted generator, against the same backend, is mostly NOT_SUPPORTED
    res = run("narrow_backend:correct", GeneratedCases(load_generator(None), 11, limit=n),
              out_jsonl=tmp_path / "u.jsonl")
    assert sum(r["verdict"] == "NOT_SUPPORTED" for r in res.records) > 0.5 * n


def test_fuzz_draws_sharded_programs_only_when_a_mesh_is_declared():
    from narrow_backend import NARROW

    from tilefoundry.conformance.backend import ReferenceBackend
    from tilefoundry.semantics.types import TensorType

    def sharded(caps) -> int:
        cases = GeneratedCases(load_generator(None, caps=caps), 0, limit=30)
        return sum(any(isinstance(p.type, TensorType) and p.type.layout is not None
                       for p in cases[i].build()[0].functions[0].params) for i in range(30))

    from tilefoundry.conformance.selection import GeneratedCases

    assert ReferenceBackend().capabilities().mesh and sharded(ReferenceBackend().capabilities())
    assert not NARROW.mesh and sharded(NARROW) == 0


def test_a_second_fuzz_run_replays_the_saved_failure_first(tmp_path, monkeypatch, capsys):
    from tilefoundry.conformance.selection import GeneratedCases

    monkeypatch.chdir(tmp_path)
    args = ["fuzz", "--backend", "narrow_backend:truncating", "--seed", "2", "--no-progress"]
    rc = cli(*args, "--minutes", "0.05", "--jsonl", "one.jsonl")
    out = capsys.readouterr().out
    first = _fuzz_records(tmp_path / "one.jsonl")
    fails = [r["id"] for r in first if r["verdict"] == "FAIL"]
    assert rc == 1 and fails, out
    assert (tmp_path / ".tilefoundry" / "fuzz-db").is_dir()  # the default database
    ids = GeneratedCases(lambda s: None, 2)
    failed_seeds = sorted(ids.case_seed(i) for i in fails)
    assert f"saved {len(fails)} new failing seed(s)" in out, out

    rc = cli(*args, "--minutes", "0.02", "--jsonl", "two.jsonl")
    out = capsys.readouterr().out
    second = _fuzz_records(tmp_path / "two.jsonl")
    # the saved failing seeds run first, in seed order (as many as the deadline allows), and
    # fail again
    replayed = [r for r in second if r["id"].startswith("fuzz/replay/")]
    assert replayed and second[0]["id"].startswith("fuzz/replay/")
    assert [r["id"] for r in second[:len(replayed)]] == [r["id"] for r in replayed]
    assert [int(r["id"].rsplit("/", 1)[1]) for r in replayed] == \
        failed_seeds[:len(replayed)]
    assert {r["verdict"] for r in replayed} == {"FAIL"}
    assert f"({len(replayed)} still FAIL, 0 now PASS and dropped)" in out
    assert f"replayed {len(replayed)} of {len(failed_seeds)} saved failing program(s) first" \
        in out

    # --no-db neither replays nor saves; another --db starts empty
    cli(*args, "--minutes", "0.01", "--jsonl", "three.jsonl", "--no-db")
    assert not any(r["id"].startswith("fuzz/replay/")
                   for r in _fuzz_records(tmp_path / "three.jsonl"))
    cli(*args, "--minutes", "0.01", "--jsonl", "four.jsonl", "--db", "other-db")
    assert not any(r["id"].startswith("fuzz/replay/")
                   for r in _fuzz_records(tmp_path / "four.jsonl"))
    capsys.readouterr()


@pytest.mark.parametrize("command", ["fuzz", "run"])
@pytest.mark.parametrize(("factory", "pattern"), [
    ("misnamed_op", "unknown op 'Unray' (closest valid name: 'Unary')"),
    ("misnamed_dtype", "unknown dtype 'bf61' (closest valid name: 'bf16')"),
    # issue 22: these two names claimed nothing; 741 NOT_SUPPORTED, 'result: PASS', exit 0
    ("misspelled_kinds", "unknown op 'Binary.ad' (closest valid names: 'Binary.add', "
                         "'Binary.and'); unknown op 'Redcue' (closest valid name: 'Reduce')"),
    ("misnamed_policy", "unknown reduction policy 'fold-left' (closest valid name: "
                        "'fold_left')"),
])
def test_an_unknown_capability_name_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys,
                                                           command, factory, pattern):
    monkeypatch.chdir(tmp_path)
    extra = ["--minutes", "1"] if command == "fuzz" else [*CAT]
    rc = cli(command, "--backend", f"narrow_backend:{factory}", *extra, "--jsonl", "r.jsonl")
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("tilefoundry conformance: error: "), err
    assert pattern in err, err
    assert not (tmp_path / "r.jsonl").exists()  # no case ran


def test_a_replayed_seed_that_passes_now_is_dropped_from_the_database(tmp_path, monkeypatch,
                                                                       capsys):
    from hypothesis.database import DirectoryBasedExampleDatabase
    from narrow_backend import NARROW

    from tilefoundry.conformance.cli import fuzz_db_key
    from tilefoundry.conformance.selection import GeneratedCases

    monkeypatch.chdir(tmp_path)
    spec = "narrow_backend:correct"
    db = DirectoryBasedExampleDatabase(str(tmp_path / "db"))
    key = fuzz_db_key(spec, None, NARROW)
    s = GeneratedCases(lambda s: None, 3).seed_of(0)  # a program the correct backend passes
    db.save(key, str(s).encode())
    db.save(fuzz_db_key("narrow_backend:truncating", None, NARROW), b"12345")  # another key
    cli("fuzz", "--backend", spec, "--minutes", "0.01", "--db", "db", "--no-progress")
    out = capsys.readouterr().out
    recs = _fuzz_records(tmp_path / "tilefoundry-fuzz.jsonl")
    assert recs[0]["id"] == f"fuzz/replay/{s}" and recs[0]["verdict"] == "PASS", recs[0]
    assert not any(r["id"] == "fuzz/replay/12345" for r in recs)  # keyed by the backend
    assert "(0 still FAIL, 1 now PASS and dropped)" in out, out
    assert list(db.fetch(key)) == []


def test_a_run_that_judges_nothing_is_no_pass(tmp_path, monkeypatch, capsys):
    """Issue 22: `--cases 'nomatch*'` ran 0 cases and passed; a backend that supports none of
    the cases got `result: PASS`, exit 0. Both now exit 1 and say why."""
    monkeypatch.chdir(tmp_path)
    rc = cli("run", "--backend", "reference", *CAT, "--cases", "nomatch*", "--jsonl", "a.jsonl")
    err = capsys.readouterr().err  # issue 33: a glob matching nothing is now bad input
    assert rc == 2 and "--cases 'nomatch*' matches no case of tier 'quick'" in err, err
    rc = cli("run", "--backend", "flaky_backend:factory", *CAT, "--tier", "full", "--cases",
             "int/*", "--jsonl", "b.jsonl")  # the flaky backend declares no i8
    out = capsys.readouterr().out
    assert rc == 1 and "NOTHING JUDGED (every case (1) was NOT_SUPPORTED)" in out, out


def test_shards_partition_the_tier(tmp_path, monkeypatch, capsys):
    """Issue 22: --shard I/N runs a stable partition of the selected cases: the shards'
    union is the selection, no case twice; a malformed shard is one line, exit 2."""
    from tilefoundry.conformance.catalog import build_catalog
    from tilefoundry.conformance.selection import parse_shard, select_cases, shard_cases

    quick = select_cases(build_catalog(0), "quick")
    parts = [shard_cases(quick, i, 4) for i in range(1, 5)]
    ids = [c.id for p in parts for c in p]
    assert sorted(ids) == sorted(c.id for c in quick) and len(ids) == len(set(ids))
    assert all(len(p) > len(quick) // 8 for p in parts)  # no empty or degenerate shard
    assert [c.id for c in shard_cases(quick[:50], 2, 4)] == \
        [c.id for c in parts[1] if c in quick[:50]]  # stable: a case keeps its shard
    assert parse_shard("3/8") == (3, 8)
    monkeypatch.chdir(tmp_path)
    for bad in ("0/4", "5/4", "4/3", "0/2", "x", "2-4"):
        rc = cli("run", "--backend", "reference", *CAT, "--shard", bad)
        err = capsys.readouterr().err
        assert rc == 2 and "--shard" in err and len(err.strip().splitlines()) == 1, err
    rc = cli("run", "--backend", "reference", *CAT, "--cases", "elementwise/*", "--shard", "1/2",
             "--jsonl", "s1.jsonl")
    rc2 = cli("run", "--backend", "reference", *CAT, "--cases", "elementwise/*", "--shard",
              "2/2", "--jsonl", "s2.jsonl")
    capsys.readouterr()
    got = [json.loads(x)["id"] for f in ("s1.jsonl", "s2.jsonl")
           for x in (tmp_path / f).read_text().splitlines() if '"type": "case"' in x]
    assert sorted(got) == sorted(c.id for c in select_cases(
        __import__("synthetic_catalog").build_no_hang(0), "full", ["elementwise/*"]))
    assert rc in (0, 1) and rc2 in (0, 1)


def test_a_closed_pipe_is_no_traceback():
    """Issue 22: `tilefoundry conformance list | head` ended in a BrokenPipeError traceback.
    A reader that goes away stops the command quietly (exit 141, as SIGPIPE)."""
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "tilefoundry", "conformance", "list", "--tier",
                          "full"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline()
    p.stdout.close()  # the reader goes away with the rest unread
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


# ---------------------------------------------------------------------------------------------
# issue 33: results are never lost; bad input a new user makes
# ---------------------------------------------------------------------------------------------
def test_an_existing_results_file_is_refused_without_resume_or_overwrite(tmp_path, monkeypatch,
                                                                         capsys):
    """Issue 33, Deliver 6: re-running without --resume silently replaced a 1,656-case results
    file with a 2-line one. Now a non-empty file is refused (one line naming --resume and
    --overwrite, exit 2, the file untouched); --overwrite replaces it, --resume continues it."""
    monkeypatch.chdir(tmp_path)
    assert cli("run", "--backend", "reference", *CAT, "--cases", "elementwise/*",
               "--no-progress") == 0
    j = tmp_path / "tilefoundry-conformance.jsonl"
    before = j.read_bytes()
    capsys.readouterr()
    assert cli("run", "--backend", "reference", *CAT, "--cases", "cast/*",
               "--no-progress") == 2
    err = capsys.readouterr().err
    assert err == ("tilefoundry conformance: error: --jsonl tilefoundry-conformance.jsonl "
                   "already holds 4 case result(s); add --resume to continue that run or "
                   "--overwrite to replace it (or give another --jsonl)\n"), err
    assert j.read_bytes() == before
    assert cli("run", "--backend", "reference", *CAT, "--cases", "cast/*", "--no-progress",
               "--resume") == 0
    assert len([x for x in j.read_text().splitlines() if '"type": "case"' in x]) == 5
    assert cli("run", "--backend", "reference", *CAT, "--cases", "cast/*", "--no-progress",
               "--overwrite") == 0
    kept = [json.loads(x) for x in j.read_text().splitlines() if '"type": "case"' in x]
    assert [r["id"] for r in kept] == ["cast/f32-bf16"]
    (tmp_path / "empty.jsonl").write_text("")  # an empty file holds nothing to lose
    assert cli("run", "--backend", "reference", *CAT, "--cases", "cast/*", "--no-progress",
               "--jsonl", "empty.jsonl") == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):  # argparse: the two exclude each other
        cli("run", "--backend", "reference", "--resume", "--overwrite")


@pytest.mark.parametrize(("glob", "expected"), [
    ("elementwse/*", "(closest: 'elementwise/*')"),
    ("cats/*", "(closest: 'cast/*')"),
    ("elementwise/ad/f32", "'elementwise/add/f32'"),
    ("int/*", "matches no case of tier 'quick' but 1 of tier 'full'; add --tier full"),
])
def test_a_glob_that_matches_nothing_names_the_closest_ids(tmp_path, monkeypatch, capsys, glob,
                                                            expected):
    monkeypatch.chdir(tmp_path)
    for cmd in (["run", "--backend", "reference"], ["list", "--tier", "quick"]):
        assert cli(*cmd, *CAT, "--cases", "elementwise/*", "--cases", glob) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--cases {glob!r} matches no case" in err, err
        assert expected in err, err
    assert not (tmp_path / "tilefoundry-conformance.jsonl").exists()


def test_a_mistyped_backend_name_suggests_the_builtin(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli("run", "--backend", "refrence", "--no-progress") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--backend 'refrence': no backend of that name; did you " \
        "mean 'reference'?" in err, err
    assert cli("probe", "--backend", "kernel-intrp", "--out", "c.json") == 2
    assert "did you mean 'kernel-interp'?" in capsys.readouterr().err


def test_a_capability_set_that_claims_no_op_is_refused(tmp_path, monkeypatch, capsys):
    """Issue 33, Bad input: no claimed op means no tier to run: one line, exit 2."""
    from tilefoundry.conformance.backend import Capabilities

    monkeypatch.chdir(tmp_path)
    (tmp_path / "none.json").write_text(json.dumps(Capabilities().to_json()))
    nodt = Capabilities.everything().to_json()
    nodt["dtypes"] = []
    (tmp_path / "nodt.json").write_text(json.dumps(nodt))
    for f, what in (("none.json", "no op"), ("nodt.json", "no dtype")):
        assert cli("run", "--backend", "reference", *CAT, "--capabilities", f) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"the capability set claims {what}, so no case of " \
            f"any tier can run" in err and "conformance probe --backend reference" in err, err
    assert not (tmp_path / "tilefoundry-conformance.jsonl").exists()
