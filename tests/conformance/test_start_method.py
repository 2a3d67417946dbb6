"""Worker start methods (issue 33 item 7, D311): ``fork`` stays the default; ``spawn`` and
``forkserver`` are chosen by the backend (its ``start_method`` attribute) or ``--start-method``
(which wins). A backend whose runtime does not survive fork (fork_unsafe_backend.py: a runtime
thread started at import) hangs under fork and passes under spawn / forkserver; the runner's
verdicts, crash isolation, timeouts and process-group kill are the same under every method."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import fork_unsafe_backend as fub
import pids as pids_mod
import pytest
import synthetic_catalog as syn

from tilefoundry.conformance.cases import Case
from tilefoundry.conformance.report import strip_timing
from tilefoundry.conformance.runner import run
from tilefoundry.conformance.selection import ConformanceError, GeneratedCases
from tilefoundry.conformance.start_method import START_METHODS

HERE = Path(__file__).resolve().parent
FU = "fork_unsafe_backend:ForkUnsafeBackend"
FLAKY = "flaky_backend:factory"
SLACK = 60.0  # runs that must not time out, on a loaded machine
HANG_S = 4.0  # runs that must time out


def _verdicts(res) -> list[str]:
    return [r["verdict"] for r in res.records]


def test_a_fork_unsafe_backend_hangs_under_fork_and_passes_under_spawn(tmp_path):
    cases = [fub.case(k) for k in range(3)]
    forked = run(FU, cases[:2], jobs=2, timeout_s=HANG_S, out_jsonl=tmp_path / "fork.jsonl")
    assert _verdicts(forked) == ["TIMEOUT", "TIMEOUT"]
    assert all("during backend.run" in r["message"] for r in forked.records)
    for method in ("spawn", "forkserver"):
        res = run(FU, cases, jobs=2, timeout_s=SLACK, start_method=method,
                  out_jsonl=tmp_path / f"{method}.jsonl")
        assert _verdicts(res) == ["PASS"] * 3, [r["message"] for r in res.records]


def test_the_backend_chooses_spawn_and_the_flag_wins(tmp_path):
    cases = [fub.case(k) for k in range(2)]
    own = run("fork_unsafe_backend:SpawningBackend", cases, jobs=2, timeout_s=SLACK,
              out_jsonl=tmp_path / "own.jsonl")
    assert _verdicts(own) == ["PASS", "PASS"]
    forced = run("fork_unsafe_backend:SpawningBackend", cases[:1], timeout_s=HANG_S,
                 start_method="fork", out_jsonl=tmp_path / "forced.jsonl")
    assert _verdicts(forced) == ["TIMEOUT"]


def test_bad_start_methods_are_one_line_errors(tmp_path):
    j = tmp_path / "r.jsonl"
    j.write_text("an earlier run's line\n")
    with pytest.raises(ConformanceError) as e:
        run(FU, [fub.case(0)], start_method="thread", out_jsonl=j)
    assert str(e.value) == "--start-method: expected one of fork, spawn, forkserver, got 'thread'"
    with pytest.raises(ConformanceError, match=r"backend 'fork_unsafe_backend:BadStartBackend': "
                                               r"its start_method attribute is 'thread'"):
        run("fork_unsafe_backend:BadStartBackend", [fub.case(0)], out_jsonl=j)
    with pytest.raises(ConformanceError, match="--executor ray starts none"):
        run(FU, [fub.case(0)], start_method="spawn", executor="ray", out_jsonl=j)
    unpicklable = [Case("closure/0", "x", lambda: None)]
    with pytest.raises(ConformanceError, match=r"the cases cannot be sent to a spawn worker "
                                               r"\(case 'closure/0'\)") as e:
        run(FU, unpicklable, start_method="spawn", out_jsonl=j)
    assert "\n" not in str(e.value)
    assert j.read_text() == "an earlier run's line\n"  # refused before the file is touched
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])])}
    p = subprocess.run([sys.executable, "-m", "tilefoundry", "conformance", "run", "--backend",
                        "reference", "--start-method", "threads", "--jsonl",
                        str(tmp_path / "cli.jsonl")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        "tilefoundry conformance: error: --start-method: expected one of fork, spawn, "
        "forkserver, got 'threads'"]


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_verdicts_are_the_same_under_every_start_method(tmp_path, method):
    """The catalog path (a spawned worker rebuilds the catalog and takes the ids) with a
    segfault (CRASH), wrong values (FAIL) and passing cases, and a fuzz campaign's generated
    cases (pickled): the same records as under fork."""
    def both(m: str) -> tuple:
        tier = run(FLAKY, "quick", catalog="synthetic_catalog:build_no_hang", jobs=2,
                   timeout_s=SLACK, start_method=m, out_jsonl=tmp_path / f"t-{m}.jsonl")
        gen = run(FLAKY, GeneratedCases(syn.generate, 3, limit=3), jobs=2, timeout_s=SLACK,
                  start_method=m, out_jsonl=tmp_path / f"g-{m}.jsonl")
        return strip_timing(tier.records), strip_timing(gen.records)

    forked, other = both("fork"), both(method)
    assert {r["verdict"] for r in forked[0]} >= {"PASS", "CRASH", "FAIL"}
    assert [r["verdict"] for r in forked[1]] == ["PASS"] * 3
    for a, b in zip(forked, other, strict=True):
        for ra, rb in zip(a, b, strict=True):  # a CRASH's innermost frames may differ
            assert ra["id"] == rb["id"] and ra["verdict"] == rb["verdict"]
            if ra["verdict"] != "CRASH":
                assert ra == rb
            else:
                assert rb["message"].startswith(ra["message"].split(";")[0])


def test_a_timeout_under_spawn_kills_the_worker_and_what_it_forked(tmp_path, monkeypatch):
    res = run(FLAKY, "quick", catalog="synthetic_catalog:build_catalog", jobs=1,
              case_globs=["flaky/hang", "elementwise/add/f32"], timeout_s=HANG_S,
              start_method="spawn", out_jsonl=tmp_path / "hang.jsonl")
    rec = {r["id"]: r for r in res.records}
    assert rec["flaky/hang"]["verdict"] == "TIMEOUT"
    assert "during backend.run" in rec["flaky/hang"]["message"]
    assert "flaky_backend.py" in rec["flaky/hang"]["message"]  # faulthandler's frames
    assert rec["elementwise/add/f32"]["verdict"] == "PASS"  # the run went on

    pids = tmp_path / "pids.txt"
    monkeypatch.setenv("LEFTOVER_PID_FILE", str(pids))
    left = run(FLAKY, [fub.case(k, "fork_leftover") for k in range(2)], jobs=2,
               timeout_s=SLACK, start_method="spawn", out_jsonl=tmp_path / "left.jsonl")
    assert _verdicts(left) == ["PASS", "PASS"]
    children = [int(x) for x in pids.read_text().split()]
    assert len(children) == 2
    assert not pids_mod.survivors(children)


def test_start_methods_are_the_platforms():
    import multiprocessing

    assert set(START_METHODS) <= set(multiprocessing.get_all_start_methods())
