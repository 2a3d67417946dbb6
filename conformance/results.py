"""A run's results (split from ``runner.py``, D380): the ``RunResult`` it returns, the JSON-lines
results file (checked writable, locked for the run, read back on ``--resume``), and the
records the runner writes itself for a case whose worker timed out or died.
"""

from __future__ import annotations

import re
import signal
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilefoundry.conformance.cases import VERDICTS, Case
from tilefoundry.conformance.judge import BAD_VERDICTS, _case_program
from tilefoundry.conformance.selection import ConformanceError

JSONL_FORMAT = 1


@dataclass
class RunResult:
    """The outcome of a run, computed from the JSON-lines file in case order."""

    backend: str
    seed: int
    records: list[dict]
    jsonl: Path
    header: dict = field(default_factory=dict)
    wall_s: float = 0.0
    recycled: int = 0
    unused_manifest: list = field(default_factory=list)
    stopped_early: bool = False
    baseline: Any = None  # a campaign.BaselineOutcome when run against a baseline

    def counts(self) -> dict[str, int]:
        c = dict.fromkeys(VERDICTS, 0)
        for r in self.records:
            c[r["verdict"]] = c.get(r["verdict"], 0) + 1
        return c

    @property
    def bad(self) -> list[dict]:
        """The failing records; against a baseline, only those it does not list."""
        if self.baseline is not None:
            return list(self.baseline.new)
        return [r for r in self.records if r["verdict"] in BAD_VERDICTS]

    @property
    def ok(self) -> bool:
        return not self.bad

    @property
    def vacuous(self) -> str:
        """Why a run with no failure still proves nothing ("" when it judged something): no
        case ran, or every case was NOT_SUPPORTED (misspelled capabilities, a glob matching
        nothing, a backend that supports none of the tier)."""
        if not self.records:
            return "no case ran"
        if all(r["verdict"] == "NOT_SUPPORTED" for r in self.records):
            return f"every case ({len(self.records)}) was NOT_SUPPORTED"
        return ""

    @property
    def exit_code(self) -> int:
        """0 when nothing failed (nothing new, against a baseline) and something was judged; 1
        otherwise (a run that judged nothing is no pass)."""
        return 0 if self.ok and not self.vacuous else 1

    def report(self) -> list[dict]:
        """The records without timing: what two runs of the same seed must agree on."""
        from tilefoundry.conformance.report import strip_timing

        return strip_timing(self.records)

    def verdicts(self) -> dict[str, str]:
        return {r["id"]: r["verdict"] for r in self.records}


def _check_writable(path: Path, what: str, directory: bool = False) -> None:
    try:
        if directory:
            path.mkdir(parents=True, exist_ok=True)
            probe = path / ".tilefoundry-write-test"
            probe.write_text("")
            probe.unlink()
        else:
            if path.is_dir():
                raise ConformanceError(f"{what} {path}: is a directory")
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a"):
                pass
    except ConformanceError:
        raise
    except OSError as e:
        raise ConformanceError(f"{what} {path}: cannot write it ({e.strerror or e})") from None


def _lock_results(path: Path):
    """The results file, opened for appending and locked exclusively (``flock``): a second
    runner on the same file gets a one-line error instead of interleaving its lines."""
    import fcntl

    f = open(path, "a")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise ConformanceError(f"--jsonl {path} is in use by another conformance run; wait for "
                               f"it or use another --jsonl") from None
    return f


def _term_as_exit():
    """SIGTERM raises SystemExit in the main thread, so the run's cleanup (workers, temporary
    folder, results file) happens on ``kill`` as on Ctrl-C. Returns the previous handler."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, on_term)


def _restore_term(old) -> None:
    if old is not None:
        signal.signal(signal.SIGTERM, old)


def _read_resume(path: Path, spec: str, seed: int) -> tuple[dict | None, dict[str, dict]]:
    """The header and records of an existing JSON-lines file; a torn last line (the runner was
    killed while writing it) is cut off so that appending continues cleanly."""
    from tilefoundry.conformance.loaders import read_regular
    from tilefoundry.conformance.report import read_jsonl

    if not path.exists() or path.stat().st_size == 0:
        return None, {}
    data = read_regular(path, what=f"--resume: {path}", kind="results", error=ConformanceError)
    if not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as f:
            f.truncate(cut)
    skipped: list[int] = []
    header, recs = read_jsonl(path, skipped=skipped)
    if skipped:
        print(f"tilefoundry conformance: --resume: skipped {len(skipped)} unreadable line(s) "
              f"of {path} (line {', '.join(map(str, skipped[:5]))}"
              f"{', ...' if len(skipped) > 5 else ''}); their cases run again",
              file=sys.stderr)
    if header is None:
        raise ConformanceError(f"--resume: {path} has no run header; it was not written by "
                               f"the conformance runner")
    if header.get("backend") != spec or header.get("seed") != seed:
        raise ConformanceError(f"--resume: {path} was written for backend "
                               f"{header.get('backend')!r} seed {header.get('seed')}, not "
                               f"backend {spec!r} seed {seed}; use another --jsonl or the "
                               f"same backend and seed")
    return header, recs


def _safe_name(case_id: str, taken: set[str]) -> str:
    s = re.sub(r"[^A-Za-z0-9._+-]+", "_", case_id).strip("._") or "case"
    if len(s) > 100 or s != case_id:
        s = f"{s[:90]}-{zlib.crc32(case_id.encode()):08x}"
    while s in taken:
        s += "_"
    taken.add(s)
    return s


def timeout_record(case: Case, timeout_s: float, elapsed: float, how: str,
                   meta: dict | None = None) -> dict:
    """The TIMEOUT outcome of a case (both executors)."""
    return {**(meta or {}), "verdict": "TIMEOUT", "seconds": elapsed,
            "message": f"exceeded the {timeout_s:g} s limit {how}",
            "program": _case_program(case)}


#: a case's record waits until its worker has outlived it by this many seconds (finished
#: another case that much later) or exited cleanly; a worker that dies first makes it CRASH
#: "the backend died after returning" (no wall time: the record only waits)
LATE_DEATH_S = 1.0


def _died_after(case: Case, out: dict, died: str, after_s: float) -> dict:
    """The record of a case whose worker died ``after_s`` seconds after the case returned:
    CRASH (the verdict its outputs got kept in ``returned_verdict``), or its own failure with
    the death added to the message."""
    what = f"{died}, {after_s:.1f} s after this case returned"
    if out["verdict"] in BAD_VERDICTS:
        return {**out, "died_after": what,
                "message": out["message"] + f" [then the backend died after returning: {what}]"}
    return {**out, "verdict": "CRASH", "returned_verdict": out["verdict"], "died_after": what,
            "message": f"the backend died after returning: {what} (its outputs were judged "
                       f"{out['verdict']}); a backend thread, atexit hook or signal ended the "
                       f"worker (the death may come from another case that worker ran)",
            "program": out.get("program") or _case_program(case)}


def crash_record(case: Case, elapsed: float, what: str, meta: dict | None = None) -> dict:
    """The CRASH outcome of a case whose worker died (both executors)."""
    return {**(meta or {}), "verdict": "CRASH", "seconds": elapsed, "message": what,
            "program": _case_program(case)}
