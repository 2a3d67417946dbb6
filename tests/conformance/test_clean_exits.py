"""Clean exits and bounded workers (issue 34, items 3 and 5): no process a case starts outlives
it (a setsid sleeper, a double-forked daemon) or the run (an attached child); a worker past
``--memory-limit`` is a CRASH naming the limit and the run goes on; outputs that cannot be
written are one line and exit status 2, the results staying resumable; what a backend prints
or raises reaches the terminal printable."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import synthetic_catalog as syn
from pids import alive

from tilefoundry.conformance.cases import Case
from tilefoundry.conformance.processes import DEFAULT_MEMORY_LIMIT_MB
from tilefoundry.conformance.report import read_jsonl
from tilefoundry.conformance.runner import run
from tilefoundry.conformance.selection import ConformanceError
from tilefoundry.conformance.terminal import printable, terminal_records
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops import BinaryKind

UNRULY = "unruly_backend:factory"
SLACK = 60.0
HERE = Path(__file__).parent
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, prctl: Linux")


def _case(entry: str, k: int = 0) -> Case:
    return Case(f"unruly/{entry}", "unruly", syn.binary(entry, BinaryKind.ADD, DType.F32, k,
                                                        entry))


# --- leftover processes ---------------------------------------------------------------------
@linux
@pytest.mark.parametrize("jobs", [1, 2])
def test_no_process_a_case_starts_outlives_it_or_the_run(tmp_path, monkeypatch, jobs):
    """Each 'leave' case starts a setsid sleeper, a double-forked daemon and an attached child.
    The next case of the same worker finds the first two of the earlier cases dead (killed when
    their case ended) and the attached ones alive (the backend's to keep, like a pool); after
    the run none of the 9 is alive."""
    monkeypatch.setenv("UNRULY_DIR", str(tmp_path))
    cases = [_case(f"leave{k}", k) for k in range(3)]
    res = run(UNRULY, cases, jobs=jobs, timeout_s=SLACK, out_jsonl=tmp_path / "r.jsonl")
    assert [r["verdict"] for r in res.records] == ["PASS"] * 3
    started = [line.split() for line in (tmp_path / "pids.txt").read_text().splitlines()]
    assert sorted(k for k, _ in started) == ["attached"] * 3 + ["daemon"] * 3 + ["setsid"] * 3
    survivors = [(k, p) for k, p in started if alive(int(p))]
    assert survivors == [], survivors
    if jobs == 1:  # one worker ran them in order: what each case saw of the earlier ones
        for k in (1, 2):
            seen = (tmp_path / f"alive-leave{k}.txt").read_text().split()
            assert seen[0::2] == ["attached"] * k, seen


@linux
def test_a_killed_workers_processes_go_with_it(tmp_path, monkeypatch):
    """A worker killed for a timeout takes every process below it, whatever its group."""
    monkeypatch.setenv("UNRULY_DIR", str(tmp_path))
    monkeypatch.setenv("UNRULY_HOG_MB", "64")  # 'hog' then sleeps past the timeout
    cases = [_case("leave0"), _case("hog")]
    res = run(UNRULY, cases, jobs=1, timeout_s=5.0, out_jsonl=tmp_path / "r.jsonl",
              memory_limit_mb=0)
    assert [r["verdict"] for r in res.records] == ["PASS", "TIMEOUT"]
    started = [line.split() for line in (tmp_path / "pids.txt").read_text().splitlines()]
    assert len(started) == 3 and not [p for _, p in started if alive(int(p))]


def test_the_subreaper_mark_is_given_back(tmp_path, monkeypatch):
    import ctypes

    monkeypatch.setenv("UNRULY_DIR", str(tmp_path))
    run(UNRULY, [_case("f")], timeout_s=SLACK, out_jsonl=tmp_path / "r.jsonl")
    if sys.platform.startswith("linux"):
        v = ctypes.c_int(-1)
        ctypes.CDLL(None).prctl(37, ctypes.byref(v), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
        assert v.value == 0


# --- the memory limit -----------------------------------------------------------------------
@linux
def test_a_case_past_the_memory_limit_is_a_crash_and_the_run_goes_on(tmp_path, monkeypatch):
    """'hog' touches 4 GB in 64 MB steps; under a 600 MB limit its worker is killed, the case
    is CRASH naming the limit, and the next case runs in a fresh worker and passes."""
    monkeypatch.setenv("UNRULY_DIR", str(tmp_path))
    cases = [_case("hog"), _case("f")]
    res = run(UNRULY, cases, jobs=1, timeout_s=SLACK, out_jsonl=tmp_path / "r.jsonl",
              memory_limit_mb=600)
    hog, after = res.records
    assert hog["verdict"] == "CRASH", hog
    assert hog["message"].startswith("memory limit 600 MB exceeded (resident "), hog
    assert "MB during backend.run); the worker was killed" in hog["message"], hog
    assert hog["memory_limit_mb"] == 600
    assert after["verdict"] == "PASS" and res.exit_code == 1


def test_the_memory_limit_is_checked(tmp_path):
    for bad in (-1, float("inf"), "lots", True):
        with pytest.raises(ConformanceError, match="--memory-limit: expected a number of MB"):
            run(UNRULY, [_case("f")], out_jsonl=tmp_path / "r.jsonl", memory_limit_mb=bad)


def test_the_cli_default_memory_limit_is_the_runners():
    from tilefoundry.conformance import cli

    assert cli.DEFAULT_MEMORY_LIMIT_MB == DEFAULT_MEMORY_LIMIT_MB
    text = (HERE.parents[1] / "docs" / "conformance.md").read_text()
    assert "--memory-limit MB" in text and f"{DEFAULT_MEMORY_LIMIT_MB:,.0f} MB" in text


# --- outputs that cannot be written ---------------------------------------------------------
def _cli(tmp_path: Path, *args: str, env: dict | None = None, pre=None) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH",
                                                                             "")])}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "tilefoundry", "conformance", "run",
                           "--backend", UNRULY, "--catalog", "synthetic_catalog:build_adds",
                           "--no-progress", *args], cwd=tmp_path, env=e, capture_output=True,
                          text=True, timeout=300, preexec_fn=pre)


@pytest.mark.parametrize("args, want", [
    (["--jsonl", "/dev/full"], "error: --jsonl /dev/full: a device or special file, not a "
                               "regular file"),
    (["--jsonl", "/dev/null"], "error: --jsonl /dev/null: a device or special file"),
    (["--jsonl", "r.jsonl", "--junit", "/dev/full"], "error: cannot write --junit /dev/full: "
                                                      "No space left on device (errno 28)"),
    (["--jsonl", "r.jsonl", "--html", "/dev/full"], "error: cannot write --html /dev/full: "
                                                     "No space left on device (errno 28)"),
    (["--jsonl", "r.jsonl", "--coverage", "/dev/full"], "error: cannot write --coverage "
                                                         "/dev/full: No space left"),
])
def test_unwritable_outputs_are_one_line_and_exit_2(tmp_path, args, want):
    p = _cli(tmp_path, *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and want in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def test_an_unwritable_directory_is_one_line(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if os.access(ro, os.W_OK):  # root ignores the mode
        ro.chmod(0o700)
        ro.rmdir()
        ro.write_text("a file, not a directory")
    p = _cli(tmp_path, "--jsonl", str(ro / "r.jsonl"))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert f"--jsonl {ro / 'r.jsonl'}: cannot write it" in p.stderr


@linux
def test_a_results_file_that_fills_up_mid_run_is_one_line_and_resumable(tmp_path):
    """A file-size limit (ulimit -f) stands for a full disk: the run stops at the first
    write past it with one line and exit 2; the cases written so far are kept and --resume
    completes the run without the limit (each case once)."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))

    p = _cli(tmp_path, "--jsonl", "r.jsonl", pre=limit)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("tilefoundry conformance: error: cannot write the results "
                               "file --jsonl r.jsonl: File too large (errno 27)"), lines
    assert lines[0].endswith("the cases recorded so far are kept: continue with --resume")
    kept = read_jsonl(tmp_path / "r.jsonl", skipped=[])[1]
    assert 0 < len(kept) < 32
    q = _cli(tmp_path, "--jsonl", "r.jsonl", "--resume")
    assert q.returncode == 0, (q.stdout, q.stderr)
    recs = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()
            if x.strip().startswith("{")]
    ids = [r["id"] for r in recs if "id" in r and "verdict" in r]
    assert len(ids) == len(set(ids)) == 32, ids


# --- printable output -----------------------------------------------------------------------
def test_printable_escapes_what_a_terminal_would_act_on():
    assert printable("a\x1b[2Jb\x07c\u202ed\ttab\nnext\r\x00\x9b") == \
        "a\\x1b[2Jb\\x07c\\u202ed\ttab\nnext\\x0d\\x00\\x9b"
    assert printable("plain ünïcödé ✓ 数") == "plain ünïcödé ✓ 数"
    r = terminal_records([{"id": "x", "message": "one\x1b[2J\ntwo", "n": 3}])[0]
    assert r == {"id": "x", "message": "one\\x1b[2J\n         two", "n": 3}


def test_backend_output_and_messages_reach_the_terminal_printable(tmp_path):
    cat = tmp_path / "noisy_catalog.py"
    cat.write_text("import synthetic_catalog as syn\nfrom tilefoundry.conformance.cases import "
                   "Case, Catalog\nfrom tilefoundry.semantics.formats import DType\n"
                   "from tilefoundry.semantics.ops import BinaryKind\n"
                   "def build(seed=0):\n    return Catalog([Case(f'unruly/{e}', 'unruly', "
                   "syn.binary(e, BinaryKind.ADD, DType.F32, 0, e), tier='quick') "
                   "for e in ('noisy', 'noisy_raise')])\n")
    p = _cli(tmp_path, "--jsonl", "r.jsonl", "--catalog", "noisy_catalog:build",
             env={"PYTHONPATH": os.pathsep.join([str(tmp_path), str(HERE)])})
    both = p.stdout + p.stderr
    assert p.returncode == 1, both
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in both, repr(both)
    err = p.stderr.splitlines()
    assert "[worker 0] stdout says \\x1b[2J\\x1b[31mred\\x07bell\\u202eevil" in err, err
    assert "[worker 0] stderr says \\x1b[2J\\x1b[31mred\\x07bell\\u202eevil" in err, err
    assert "[worker 0] second line" in err and \
        "[worker 0] raw fd 1 \\x1b[2J\\x1b[31mred\\x07bell\\u202eevil" in err, err
    out = p.stdout.splitlines()
    i = next(k for k, x in enumerate(out) if x.startswith("ERROR    unruly/noisy_raise: "))
    assert "first line \\x1b[2J\\x1b[31mred\\x07bell\\u202eevil" in out[i], out[i]
    assert out[i + 1].startswith("         second line\\x1b[0m"), out[i:i + 2]
    # the results file keeps the message as raised
    rec = read_jsonl(tmp_path / "r.jsonl")[1]["unruly/noisy_raise"]
    assert "\x1b[2J" in rec["message"]
