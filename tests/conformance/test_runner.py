"""The conformance runner: verdicts from worker processes, crash / hang isolation, JSON lines,
resume after SIGKILL, determinism, manifests, reproducers, reduction, worker recycling.

Issue 'conformance runner', Must show: 'A test backend that segfaults on one case, hangs on
another and returns garbage on a third: the run finishes, with CRASH / TIMEOUT / FAIL for exactly
those cases; killing the runner with SIGKILL midway and resuming yields the same final report as
an uninterrupted run.' The backends and catalogs are synthetic (flaky_backend.py,
synthetic_catalog.py next to this file; pytest's rootdir-relative import puts this folder on
sys.path and the forked workers inherit it; subprocesses get it through PYTHONPATH).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pids as pids_mod
import pytest
import synthetic_catalog as syn

from tilefoundry.conformance.manifest import Manifest
from tilefoundry.conformance.report import read_jsonl, strip_timing
from tilefoundry.conformance.results import _read_resume
from tilefoundry.conformance.runner import run
from tilefoundry.conformance.selection import ConformanceError, GeneratedCases

HERE = Path(__file__).resolve().parent
FLAKY = "flaky_backend:factory"
TIMEOUT = 3.0  # for runs with the hang case: short, so the test is quick
SLACK = 30.0  # for runs without it: generous, so a loaded machine cannot turn a case into TIMEOUT


def env(**extra: str) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(HERE), *filter(None, [e.get("PYTHONPATH")])])
    e.update(extra)
    return e


def quick(seed: int = 0):
    return syn.build_catalog(seed).tier("quick")


def no_hang(seed: int = 0):
    return syn.build_no_hang(seed).tier("full")


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """Every synthetic case but the hang, on the flaky backend, with reproducers."""
    d = tmp_path_factory.mktemp("full")
    res = run(FLAKY, no_hang(), jobs=2, timeout_s=SLACK, seed=0, out_jsonl=d / "r.jsonl",
              repro_dir=d / "repro")
    return res, d


# =============================================================================================
# verdicts
# =============================================================================================
def test_segfault_hang_and_garbage_are_crash_timeout_fail_and_the_rest_passes(tmp_path):
    t0 = time.monotonic()
    res = run(FLAKY, quick(), jobs=2, timeout_s=TIMEOUT, seed=0, out_jsonl=tmp_path / "r.jsonl")
    assert time.monotonic() - t0 < 20
    v = res.verdicts()
    assert {k: x for k, x in v.items() if x != "PASS"} == {
        "flaky/segv": "CRASH", "flaky/hang": "TIMEOUT", "flaky/garbage": "FAIL"}
    assert len(v) == len(quick()) and list(v) == [c.id for c in quick()]  # case order
    rec = {r["id"]: r for r in res.records}
    assert "SIGSEGV" in rec["flaky/segv"]["message"]
    assert "during backend.run" in rec["flaky/segv"]["message"]
    assert "flaky_backend.py" in rec["flaky/segv"]["message"]  # faulthandler's frames
    assert f"exceeded the {TIMEOUT:g} s limit during backend.run" in \
        rec["flaky/hang"]["message"]
    assert "flaky_backend.py" in rec["flaky/hang"]["message"] and \
        "in run" in rec["flaky/hang"]["message"]
    (worst,) = rec["flaky/garbage"]["outputs"]
    assert worst["contract"] == "exact" and worst["mismatches"] == 8
    assert worst["expected_hex"].startswith("0x") and worst["observed_hex"] != \
        worst["expected_hex"]
    assert res.exit_code == 1 and not res.ok


def test_errors_crashes_and_not_supported_name_the_problem(full_run):
    rec = {r["id"]: r for r in full_run[0].records}
    assert rec["flaky/raise"]["verdict"] == "ERROR"
    assert "backend.run raised ValueError: the flaky backend does not like" in \
        rec["flaky/raise"]["message"]
    assert rec["flaky/malformed"]["verdict"] == "ERROR"
    assert "shape (1,), expected (8,)" in rec["flaky/malformed"]["message"]
    assert rec["flaky/exit"]["verdict"] == "CRASH"
    assert "exited with status 3" in rec["flaky/exit"]["message"]
    assert rec["flaky/ulp1"]["verdict"] == "FAIL"
    assert rec["flaky/ulp1"]["outputs"][0]["ulp_distance"] == 1.0
    assert rec["int/add/i8"]["verdict"] == "NOT_SUPPORTED"
    assert "i8" in rec["int/add/i8"]["message"]
    assert rec["planted/buried"]["verdict"] == "PASS"
    # ops / dtypes: from the case when it names them, from the program otherwise
    assert rec["elementwise/add/f32"]["ops"] == ["Binary.add"]
    assert rec["elementwise/max/f16"]["ops"] == ["Binary.max"]
    assert rec["elementwise/max/f16"]["dtypes"] == ["f16"]
    assert rec["reduce/sum/f32"]["ops"] == ["Reduce.sum"]


def _nested(entry: str):
    from tilefoundry.semantics.dsl import parse_module

    def build():
        m = parse_module(f"""
@func
def pair(x: Tensor[(4,), f32]):
    return (x * x, exp(x))

@func
def {entry}(x: Tensor[(4,), f32], y: Tensor[(4,), f32]):
    return ((x + y, (exp(x), pair(y))), x - y)
""")
        return m, entry, [np.linspace(-1, 1, 4, dtype=np.float32),
                          np.linspace(0, 2, 4, dtype=np.float32)]
    return build


def test_a_nested_tuple_result_is_judged(tmp_path):
    """Issue 34, deliver 4: a program whose result is a nested tuple was an ERROR for the
    reference backend itself ("output 0: expected a numpy array, got tuple"). Its outputs are
    now the result's leaves in order, each judged under its contract: the reference PASSes,
    a backend with one nested leaf wrong FAILs on exactly that output, and the reproducer
    replays it (recorded and re-run)."""
    from tilefoundry.conformance.cases import Case
    from tilefoundry.conformance.repro import rerun

    cases = [Case("nested/ok", "nested", _nested("f")),
             Case("nested/off", "nested", _nested("nested_off"))]
    ref = run("reference", cases[:1], timeout_s=SLACK, out_jsonl=tmp_path / "ref.jsonl")
    (ok,) = ref.records
    assert ok["verdict"] == "PASS" and ok["elements"] == 5 * 4, ok
    res = run(FLAKY, cases, timeout_s=SLACK, out_jsonl=tmp_path / "r.jsonl",
              repro_dir=tmp_path / "repro")
    rec = {r["id"]: r for r in res.records}
    assert rec["nested/ok"]["verdict"] == "PASS", rec["nested/ok"]
    off = rec["nested/off"]
    assert off["verdict"] == "FAIL", off
    assert [o["output"] for o in off["outputs"]] == [4], off["outputs"]  # x - y, the last leaf
    d = tmp_path / "repro" / off["repro"]
    assert rerun(d, recorded=True) == 1 and rerun(d, "reference") == 0


def test_not_supported_never_calls_the_backend(tmp_path):
    """A backend whose compile and run would crash the worker: NOT_SUPPORTED cases never
    reach it."""
    cases = [c for c in no_hang() if c.id == "int/add/i8"]
    res = run("flaky_backend:factory", cases, timeout_s=SLACK, out_jsonl=tmp_path / "r.jsonl")
    assert res.verdicts() == {"int/add/i8": "NOT_SUPPORTED"}


def test_duplicate_case_ids_are_refused(tmp_path):
    c = quick()[0]
    with pytest.raises(ConformanceError, match="appears twice"):
        run("reference", [c, c], out_jsonl=tmp_path / "r.jsonl")


def test_reference_backend_passes_the_synthetic_cases(tmp_path):
    cases = [c for c in no_hang() if not c.id.startswith("flaky/")]
    res = run("reference", cases, jobs=2, timeout_s=30, out_jsonl=tmp_path / "r.jsonl")
    assert set(res.verdicts().values()) == {"PASS"} and res.exit_code == 0


# =============================================================================================
# JSON lines, resume, determinism
# =============================================================================================
def test_jsonl_has_a_header_and_one_object_per_case(full_run):
    d = full_run[1]
    lines = [json.loads(x) for x in (d / "r.jsonl").read_text().splitlines()]
    assert lines[0]["type"] == "run" and lines[0]["backend"] == FLAKY and lines[0]["seed"] == 0
    assert lines[-1]["type"] == "summary" and lines[-1]["cases"] == len(lines) - 2
    cases = lines[1:-1]
    assert sorted(r["id"] for r in cases) == sorted(c.id for c in no_hang())
    for r in cases:
        assert {"id", "family", "verdict", "seconds", "message", "ops", "dtypes"} <= set(r)


def _proc_with_arg(arg: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if arg.encode() in (p / "cmdline").read_bytes():
                    pids.append(int(p.name))
            except OSError:
                pass
    return pids


def test_sigkill_midway_then_resume_gives_the_uninterrupted_report(tmp_path):
    jsonl = tmp_path / "killed.jsonl"
    args = ["conformance", "run", "--backend", FLAKY, "--catalog",
            "synthetic_catalog:build_catalog", "--tier", "quick", "--timeout", str(TIMEOUT),
            "--jsonl", str(jsonl)]
    p = subprocess.Popen([sys.executable, "-m", "tilefoundry", *args],
                         env=env(FLAKY_DELAY="0.25"), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    written = 0
    while time.monotonic() - t0 < 30:
        if jsonl.exists():
            written = jsonl.read_text().count('"type": "case"')
            if written >= 3:
                break
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert 3 <= written < len(quick()), "killed too late to test a resume"
    # the killed runner's workers die with it (PR_SET_PDEATHSIG), none is left hanging
    t1 = time.monotonic()
    while _proc_with_arg(str(jsonl)) and time.monotonic() - t1 < 3:
        time.sleep(0.05)
    assert _proc_with_arg(str(jsonl)) == []
    # a torn last line (a runner killed mid-write) must not break the resume either
    with open(jsonl, "a") as f:
        f.write('{"type": "case", "id": "elementwise/sub/f32", "verd')
    from tilefoundry.cli import main

    assert main([*args, "--resume", "--no-progress"]) == 1
    _, recs = read_jsonl(jsonl)
    assert len(recs) == len(quick())
    resumed = strip_timing(recs[c.id] for c in quick())
    fresh = run(FLAKY, quick(), jobs=2, timeout_s=TIMEOUT, seed=0,
                out_jsonl=tmp_path / "fresh.jsonl")
    assert resumed == fresh.report()
    # every case ran exactly once: the resumed run skipped what the killed one finished
    ids = [r["id"] for r in map(json.loads, jsonl.read_text().splitlines()[1:])
           if r["type"] == "case"]
    assert sorted(ids) == sorted(c.id for c in quick())


def test_resume_refuses_another_backend_or_seed_and_skips_finished_cases(tmp_path):
    cases = [c for c in no_hang() if c.id.startswith("elementwise/")]
    j = tmp_path / "r.jsonl"
    first = run("reference", cases[:2], out_jsonl=j, timeout_s=30)
    assert len(first.records) == 2
    with pytest.raises(ConformanceError, match="written for backend 'reference' seed 0"):
        _read_resume(j, FLAKY, 0)
    with pytest.raises(ConformanceError, match="seed 0, not backend 'reference' seed 1"):
        run("reference", cases, out_jsonl=j, resume=True, seed=1, timeout_s=30)
    again = run("reference", cases, out_jsonl=j, resume=True, timeout_s=30)
    assert [r["id"] for r in again.records] == [c.id for c in cases]
    assert j.read_text().count('"type": "case"') == len(cases)


def test_same_seed_same_cases_and_verdicts(tmp_path):
    a = run(FLAKY, no_hang(0), jobs=2, timeout_s=SLACK, seed=0, out_jsonl=tmp_path / "a")
    b = run(FLAKY, no_hang(0), jobs=2, timeout_s=SLACK, seed=0, out_jsonl=tmp_path / "b")
    assert a.report() == b.report()

    def lines(p: Path) -> list[str]:  # the files themselves, minus timings and line order
        return sorted(json.dumps(strip_timing([json.loads(x)])[0])
                      for x in p.read_text().splitlines())

    assert lines(tmp_path / "a") == lines(tmp_path / "b")
    c = run(FLAKY, no_hang(1), jobs=2, timeout_s=SLACK, seed=1, out_jsonl=tmp_path / "c")
    assert c.verdicts() == a.verdicts()  # the same cases, other inputs: other failures
    msg = {r["id"]: r["message"] for r in a.records}
    assert {r["id"]: r["message"] for r in c.records}["flaky/garbage"] != msg["flaky/garbage"]


def test_generated_cases_are_deterministic_and_lazy():
    g = GeneratedCases(syn.generate, seed=3)
    assert len(g) >= 10**6 and g[5].id == "fuzz/3/000005"
    m1, _, i1 = g[5].build()
    m2, _, i2 = GeneratedCases(syn.generate, seed=3)[5].build()
    from tilefoundry.semantics.printer import to_text

    assert to_text(m1) == to_text(m2) and all((a == b).all() for a, b in zip(i1, i2, strict=True))


# =============================================================================================
# manifests
# =============================================================================================
MANIFEST = """
[[xfail]]
case = "flaky/garbage"
reason = "known wrong subtraction"

[[xfail]]
case = "elementwise/add/*"
reason = "thought broken, but it is not"

[[xfail]]
case = "flaky/raise"
reason = "expected to crash, it raises instead"
verdict = "CRASH"

[[xfail]]
case = "flaky/exit"
reason = "exits"
verdict = ["CRASH"]

[[skip]]
case = "flaky/segv"
reason = "crashes the CI machine"

[[tolerance]]
case = "flaky/ulp1"
reason = "rounds up by one ulp"
ulp = 1

[[tolerance]]
case = "flaky/garb*"
reason = "not enough for garbage"
ulp = 4

[[skip]]
case = "no/such/case"
reason = "stale"
"""


def test_manifest_xfail_xpass_skip_and_tolerance(tmp_path):
    cases = [c for c in syn.build_catalog(0).tier("full") if c.id != "flaky/hang"]
    m = Manifest.parse(MANIFEST)
    res = run(FLAKY, cases, jobs=2, timeout_s=SLACK, out_jsonl=tmp_path / "r.jsonl",
              manifest=m)
    rec = {r["id"]: r for r in res.records}
    g = rec["flaky/garbage"]
    assert g["verdict"] == "XFAIL" and g["raw_verdict"] == "FAIL"
    assert "known wrong subtraction" in g["message"] and "8/8 elements" in g["message"]
    x = rec["elementwise/add/f32"]
    assert x["verdict"] == "XPASS" and "thought broken" in x["message"]
    assert rec["flaky/exit"]["verdict"] == "XFAIL"  # the expected kind of failure
    r = rec["flaky/raise"]  # a failure of another kind than the manifest names
    assert r["verdict"] == "ERROR" and "manifest expects ['CRASH']" in r["message"]
    s = rec["flaky/segv"]
    assert s["verdict"] == "NOT_SUPPORTED" and s["message"] == \
        "skipped by manifest: crashes the CI machine"
    u = rec["flaky/ulp1"]
    assert u["verdict"] == "PASS" and u["tolerance"] == 1 and "worst 1 ulp" in u["message"]
    assert [e.case for e in res.unused_manifest] == ["no/such/case"]
    assert res.exit_code == 1  # the XPASS and the ERROR
    assert {r["verdict"] for r in res.bad} == {"XPASS", "ERROR"}


# =============================================================================================
# reproducers, reduction, leaks
# =============================================================================================
def test_fail_gets_a_reproducer_that_replays_without_the_runner(full_run):
    res, d = full_run
    rec = {r["id"]: r for r in res.records}
    rdir = d / "repro" / rec["flaky/garbage"]["repro"]
    names = {p.name for p in rdir.iterdir()}
    assert {"program.txt", "program_dsl.py", "input_0.npy", "input_1.npy", "inputs.hex.txt",
            "expected_0.npy", "observed_0.npy", "verdict.txt", "case.json",
            "repro.py"} <= names
    assert not [n for n in names if n.endswith(".pkl")]  # nothing that runs code when loaded
    assert "Binary(kind=sub)" in (rdir / "program.txt").read_text()
    hexes = (rdir / "inputs.hex.txt").read_text()
    assert hexes.startswith("input 0: f32 shape [8]")
    assert "8/8 elements rejected" in (rdir / "verdict.txt").read_text()
    assert "repro" not in rec["elementwise/add/f32"]
    replay = [subprocess.run([sys.executable, str(rdir / "repro.py"), *a], env=env(),
                             capture_output=True, text=True, timeout=60)
              for a in ([], ["--backend", FLAKY], ["--backend", "reference"], ["--recorded"])]
    # the backend comes from the command line only (issue 34): case.json's is shown, not run
    assert replay[0].returncode == 2 and f"--backend {FLAKY} (the backend case.json records)" \
        in replay[0].stderr, replay[0].stderr
    assert replay[1].returncode == 1 and "FAIL" in replay[1].stdout, replay[1].stderr
    assert replay[2].returncode == 0 and "PASS" in replay[2].stdout, replay[2].stderr
    assert replay[3].returncode == 1 and "8/8 elements rejected" in replay[3].stdout


def test_reduce_shrinks_a_planted_truncation_to_one_mul(tmp_path):
    cases = [c for c in syn.build_catalog(0).tier("full") if c.id == "planted/buried"]
    res = run("flaky_backend:truncating", cases, timeout_s=30, out_jsonl=tmp_path / "r.jsonl",
              repro_dir=tmp_path / "repro", reduce_s=30)
    (r,) = res.records
    assert r["verdict"] == "FAIL"
    red = tmp_path / "repro" / r["repro"] / "reduced"
    text = (red / "program.txt").read_text()
    assert "Binary(kind=mul)" in text and text.count("%") <= 2, text
    assert "1/1 elements rejected" in (red / "verdict.txt").read_text()


def test_workers_over_the_memory_limit_are_replaced(tmp_path):
    cases = [c for c in no_hang() if c.id.startswith("elementwise/")]
    res = run("reference", cases, timeout_s=30, out_jsonl=tmp_path / "r.jsonl",
              worker_rss_mb=1e-3)
    assert set(res.verdicts().values()) == {"PASS"}
    assert res.recycled == len(cases)


def test_an_unprintable_backend_exception_is_the_backends_error(tmp_path):
    """Issue 21: an exception whose __str__ raises was blamed on the harness. It is the
    backend's ERROR, naming the exception type."""
    from tilefoundry.conformance.cases import Case
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ops import BinaryKind

    case = Case("flaky/unprintable", "flaky",
                syn.binary("unprintable", BinaryKind.ADD, DType.F32, 0, "unprintable"))
    res = run(FLAKY, [case], timeout_s=SLACK, out_jsonl=tmp_path / "r.jsonl")
    (rec,) = res.records
    assert rec["verdict"] == "ERROR", rec
    assert not rec["message"].startswith("harness"), rec["message"]
    assert "backend.run raised _Unprintable: <unprintable _Unprintable" in rec["message"]


def test_a_second_runner_on_the_same_results_file_is_refused(tmp_path):
    """Issue 21: two runners appending to one JSON-lines file interleaved and lost cases. The
    results file is locked: a second run gets a one-line error and writes nothing."""
    import fcntl

    cases = [c for c in no_hang() if c.id.startswith("elementwise/")]
    j = tmp_path / "r.jsonl"
    first = run("reference", cases[:1], out_jsonl=j, timeout_s=30)
    before = j.read_bytes()
    with open(j, "a") as holder:  # another runner holding the file
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
        with pytest.raises(ConformanceError, match=r"in use by another conformance run"):
            run("reference", cases, out_jsonl=j, timeout_s=30)
        with pytest.raises(ConformanceError, match=r"in use by another conformance run"):
            run("reference", cases, out_jsonl=j, resume=True, timeout_s=30)
    assert j.read_bytes() == before and len(first.records) == 1
    assert len(run("reference", cases, out_jsonl=j, resume=True, timeout_s=30).records) == \
        len(cases)  # released: the resume goes on


def test_each_run_reports_its_own_results_when_another_starts_as_it_ends(tmp_path,
                                                                         monkeypatch):
    """Issue 34, deliver 4: the results-file lock was released before the run read its
    results back; a second run starting in that window truncated the file, and the first
    reported the second's results (488 of 489 records lost). The window is widened here: the
    second run (another process, on other cases) starts and ends inside it. The lock is now
    held until the first run has read back and summarised its own results, so the second is
    refused, and run again afterwards reports its own."""
    from tilefoundry.conformance import runner as runner_module

    j = tmp_path / "r.jsonl"
    mine = [c for c in no_hang() if c.id.startswith("elementwise/")]
    cmd = [sys.executable, "-m", "tilefoundry", "conformance", "run", "--backend", "reference",
           "--catalog", "synthetic_catalog:build_no_hang", "--tier", "full", "--cases",
           "cast/*", "--no-progress", "--jsonl", str(j)]
    second: list = []
    monkeypatch.setattr(runner_module, "_BEFORE_READ_BACK", lambda: second.append(
        subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=120)))
    first = run("reference", mine, out_jsonl=j, timeout_s=SLACK)
    monkeypatch.setattr(runner_module, "_BEFORE_READ_BACK", None)
    (other,) = second
    assert [r["id"] for r in first.records] == [c.id for c in mine], first.records
    assert other.returncode == 2 and other.stderr == (
        f"tilefoundry conformance: error: --jsonl {j} is in use by another conformance run; "
        f"wait for it or use another --jsonl\n"), other.stdout + other.stderr
    lines = [json.loads(x) for x in j.read_text().splitlines()]
    assert [x["type"] for x in lines] == ["run", *["case"] * len(mine), "summary"]
    assert lines[-1]["cases"] == len(mine)  # the summary is the first run's, in its file
    again = subprocess.run([*cmd, "--overwrite"], env=env(), capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 case(s)" in again.stdout and "result: PASS" in again.stdout, again.stdout
    assert list(read_jsonl(j)[1]) == ["cast/f32-bf16"]


def test_resume_skips_torn_and_foreign_lines_and_reruns_their_cases(tmp_path, capsys):
    """A torn line in the middle of the file (another writer, a full disk) or a foreign line
    made --resume raise a raw JSONDecodeError; now it is reported and the case runs again."""
    cases = [c for c in no_hang() if c.id.startswith("elementwise/")]
    j = tmp_path / "r.jsonl"
    run("reference", cases[:3], out_jsonl=j, timeout_s=30)
    lines = j.read_text().splitlines()
    lines[2] = lines[2][: len(lines[2]) // 2]  # case 2 torn mid-line
    lines.insert(1, "not json at all")
    lines.insert(1, "[1, 2]")
    j.write_text("\n".join(lines) + "\n")
    again = run("reference", cases, out_jsonl=j, resume=True, timeout_s=30)
    err = capsys.readouterr().err
    assert "skipped 3 unreadable line(s)" in err, err
    assert [r["id"] for r in again.records] == [c.id for c in cases]
    assert all(r["verdict"] == "PASS" for r in again.records)


def test_no_temporary_folder_is_left_behind(tmp_path, monkeypatch):
    """Every exit path removes the run's temporary folder: a normal end, and a SIGTERM to the
    runner (it used to leave /tmp/tilefoundry-conformance-* behind)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    cases = [c for c in no_hang() if c.id.startswith("elementwise/")]
    run("reference", cases[:1], out_jsonl=tmp_path / "a.jsonl", timeout_s=30)
    assert not list(tmp_path.glob("tilefoundry-conformance-*"))
    jsonl = tmp_path / "t.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "tilefoundry", "conformance", "run", "--backend",
                          FLAKY, "--catalog", "synthetic_catalog:build_catalog", "--tier",
                          "quick", "--timeout", str(TIMEOUT), "--jsonl", str(jsonl)],
                         env=env(FLAKY_DELAY="0.5", TMPDIR=str(tmp_path)),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 30 and not list(tmp_path.glob("tilefoundry-conformance-*")):
        time.sleep(0.02)
    assert list(tmp_path.glob("tilefoundry-conformance-*")), "the run never started"
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) != 0
    assert not list(tmp_path.glob("tilefoundry-conformance-*"))


def test_a_late_worker_death_is_not_charged_to_the_next_case(tmp_path, monkeypatch):
    """Issue 21: a backend thread that ends the process after its case passed made the next,
    well-behaved case CRASH. A case whose worker dies after having run earlier cases runs again
    in a fresh worker and gets that verdict (the record says so); a second death is its own.
    Issue 34: the death is not hidden either: the case it followed is CRASH, "the backend died
    after returning", once the next case has passed in a fresh worker."""
    from tilefoundry.conformance.cases import Case
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ops import BinaryKind

    monkeypatch.setenv("FLAKY_DELAY", "0.4")
    monkeypatch.setenv("LATE_EXIT_S", "0.2")
    cases = [Case("flaky/late-exit", "flaky",
                  syn.binary("late", BinaryKind.ADD, DType.F32, 0, "late_exit")),
             Case("after/add", "elementwise", syn.binary("a1", BinaryKind.ADD, DType.F32, 0)),
             Case("after/segv", "flaky", syn.binary("segv", BinaryKind.ADD, DType.F32, 0,
                                                    "segv"))]
    res = run(FLAKY, cases, jobs=1, timeout_s=SLACK, out_jsonl=tmp_path / "r.jsonl")
    rec = {r["id"]: r for r in res.records}
    late = rec["flaky/late-exit"]
    assert late["verdict"] == "CRASH" and late["returned_verdict"] == "PASS", late
    assert late["message"].startswith("the backend died after returning: the worker exited "
                                      "with status 7 during backend.run of a later case "
                                      "(after/add), "), late["message"]
    assert rec["after/add"]["verdict"] == "PASS", rec["after/add"]
    assert "fresh worker" in rec["after/add"]["rerun"]
    assert "exited with status 7" in rec["after/add"]["rerun"]
    assert rec["after/segv"]["verdict"] == "CRASH"  # a death of its own stays a CRASH


def test_a_backend_that_dies_after_every_run_gets_no_pass(tmp_path, monkeypatch, capsys):
    """Issue 34, deliver 4: a backend that kills its own process 0.3 s after every run got
    32/32 PASS, exit 0, nothing printed (the deaths showed only as `rerun` keys). A case's
    record now waits until its worker has outlived it (finished another case 1 s later, or
    exited cleanly when asked): each case is CRASH "the backend died after returning", its
    outputs' verdict kept in `returned_verdict`, and the run exits 1."""
    from tilefoundry.cli import main

    monkeypatch.setenv("KILL_AFTER_RUN_S", "0.3")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    for jobs in ("1", "2"):
        rc = main(["conformance", "run", "--backend", FLAKY, "--catalog",
                   "synthetic_catalog:build_adds", "--no-progress", "-j", jobs, "--jsonl",
                   f"r{jobs}.jsonl"])
        out = capsys.readouterr().out
        recs = list(read_jsonl(tmp_path / f"r{jobs}.jsonl")[1].values())
        assert rc == 1 and len(recs) == 32, out
        assert {r["verdict"] for r in recs} == {"CRASH"}, [r["verdict"] for r in recs]
        assert {r["returned_verdict"] for r in recs} == {"PASS"}
        assert "\nresult: FAIL (32 CRASH); results in" in out, out
        line = next(x for x in out.splitlines() if x.startswith("CRASH    add/0: "))
        assert line.startswith("CRASH    add/0: the backend died after returning: the worker "
                               "was killed by signal SIGKILL (Killed) "), line
        assert "(its outputs were judged PASS)" in line, line


def test_a_well_behaved_backend_loses_no_time_to_the_wait(tmp_path):
    """The record's wait costs a well-behaved backend nothing: the reference's 32 adds pass,
    in about the time they take, its workers exiting cleanly at the end."""
    cases = list(syn.build_adds(0))
    t0 = time.monotonic()
    res = run("reference", cases, jobs=2, timeout_s=SLACK, out_jsonl=tmp_path / "r.jsonl")
    assert [r["verdict"] for r in res.records] == ["PASS"] * 32
    assert not [r for r in res.records if "died_after" in r]
    assert time.monotonic() - t0 < 15


def test_processes_a_backend_forks_do_not_outlive_the_run(tmp_path, monkeypatch):
    """Issue 21: a process the backend forked outlived the runner. Each worker leads its own
    process group, killed whole when the worker goes (at the end of the run, or replaced)."""
    from tilefoundry.conformance.cases import Case
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ops import BinaryKind

    pids = tmp_path / "pids.txt"
    monkeypatch.setenv("LEFTOVER_PID_FILE", str(pids))
    cases = [Case(f"flaky/fork-{k}", "flaky",
                  syn.binary(f"fork{k}", BinaryKind.ADD, DType.F32, k, "fork_leftover"))
             for k in range(2)]
    res = run(FLAKY, cases, jobs=2, timeout_s=SLACK, out_jsonl=tmp_path / "r.jsonl")
    assert [r["verdict"] for r in res.records] == ["PASS", "PASS"]
    children = [int(x) for x in pids.read_text().split()]
    assert len(children) == 2
    assert not pids_mod.survivors(children)


def test_workers_do_not_hold_the_results_files_lock(tmp_path, monkeypatch):
    """The lock is the runner's: a forked worker (and whatever its backend forks) closes its
    copy of the results file, so a killed runner's lingering children cannot keep a resume out
    (a suite run under load saw `--resume` refused as 'in use' after a SIGKILL)."""
    from tilefoundry.conformance.cases import Case
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ops import BinaryKind

    held = tmp_path / "fds.txt"
    monkeypatch.setenv("FD_LIST_FILE", str(held))
    j = tmp_path / "r.jsonl"
    case = Case("flaky/list-fds", "flaky",
                syn.binary("fds", BinaryKind.ADD, DType.F32, 0, "list_fds"))
    res = run(FLAKY, [case], timeout_s=SLACK, out_jsonl=j)
    assert [r["verdict"] for r in res.records] == ["PASS"]
    files = held.read_text().splitlines()
    assert files and str(j.resolve()) not in files, files


class _DeepBackend:
    def run(self, compiled, inputs):
        return self.helper(inputs)

    def helper(self, inputs):
        return np.reshape(np.zeros(3), (2,))  # raises inside numpy


def test_an_error_names_the_backends_own_line_and_where_it_was_raised():
    """Issue 22: an ERROR named the innermost frame only (``interpreter.py:1515``), not the
    backend's line. Now: the innermost frame in the backend's file, then where it raised."""
    import inspect

    from tilefoundry.conformance.judge import _raised

    b = _DeepBackend()
    try:
        b.run(None, [])
    except ValueError as e:
        msg = _raised("backend.run", e, b)
    line = inspect.getsourcelines(_DeepBackend.helper)[1] + 1
    assert f"(at test_runner.py:{line} in helper; raised in " in msg, msg
    assert "fromnumeric.py:" in msg, msg
    try:
        b.run(None, [])
    except ValueError as e:
        # no backend given: the innermost frame outside the standard library and packages
        assert f"(at test_runner.py:{line} in helper; raised in " in _raised("backend.run", e)
