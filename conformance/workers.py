"""The runner's worker processes (split from ``runner.py``, D380): the long-lived pool of
forked (or spawned) workers, each running cases through ``judge._run_one``; the dispatch of
cases to them (resume, shards, manifest, flake retries, the fuzz deadline); and what the
runner does when a worker dies, hangs or outgrows its memory (CRASH / TIMEOUT records with
the phase and the worker's last frames).
"""

from __future__ import annotations

import collections
import contextlib
import faulthandler
import json
import multiprocessing
import os
import re
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from tilefoundry.conformance.backend import (
    Capabilities,
    load_backend,
)
from tilefoundry.conformance.cases import Case
from tilefoundry.conformance.judge import (
    _IDLE,
    _PHASES,
    _RETRYABLE,
    BAD_VERDICTS,
    _raised,
    _run_one,
    _seed_rngs,
    _text,
)
from tilefoundry.conformance.manifest import Manifest
from tilefoundry.conformance.processes import (
    Reaper,
    mark_worker,
    over_memory_limit,
)
from tilefoundry.conformance.repro_nonpass import NONPASS_REPRO, write_nonpass_reproducer
from tilefoundry.conformance.results import (
    LATE_DEATH_S,
    _died_after,
    _safe_name,
    crash_record,
    timeout_record,
)
from tilefoundry.conformance.start_method import (
    resolve_cases,
    wait_ready,
)
from tilefoundry.conformance.terminal import (
    OutputForwarder,
    capture_worker_output,
)


# =============================================================================================
# the worker
# =============================================================================================
def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when the runner dies (a killed runner leaves no hung
    workers behind)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _default_fatal_signals() -> None:
    """The fatal signals back to their default action before ``faulthandler.enable``: a
    process that used Ray before forking (a test session) inherits the C++ failure handlers Ray
    installs, and faulthandler then wrote no traceback."""
    faulthandler.disable()
    for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT"):
        sig = getattr(signal, name, None)
        if sig is not None:
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                signal.signal(sig, signal.SIG_DFL)


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _worker_main(conn, spec: str, cases: Sequence[Case], caps: Capabilities, seed: int,
                 fault_path: str, phase, close_fds: tuple = (), announce: bool = False) -> None:
    for fd in close_fds:  # the runner's locked results file: a worker must not hold the lock
        with contextlib.suppress(OSError):
            os.close(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's to handle
    _die_with_parent()
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # its own process group: what the backend forks goes with it
    mark_worker()  # processes.py: what the backend starts is found and killed (D330)
    capture_worker_output(fault_path)  # terminal.py: to the runner, printable (D332)
    fh = open(fault_path, "w")  # kept open for faulthandler
    _default_fatal_signals()
    faulthandler.enable(file=fh, all_threads=False)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=fh, all_threads=True)
    backend, load_error = None, ""
    try:
        backend = load_backend(spec)
    except Exception as e:
        load_error = f"loading the backend in the worker raised {type(e).__name__}: {_text(e)}"
    if announce:  # spawn / forkserver: the cases come as a recipe (start_method.py)
        cases = resolve_cases(cases)
        conn.send(("ready", os.getpid()))
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            break
        if task is None:
            break
        idx, opts = task
        out = _run_one(backend, load_error, caps, cases[idx], seed, opts, phase, conn, idx)
        conn.send(("done", idx, out, _rss_mb()))


# =============================================================================================
# the runner side
# =============================================================================================
@dataclass
class _Slot:
    n: int
    proc: Any = None
    conn: Any = None
    phase: Any = None
    fault: Path | None = None
    task: tuple | None = None  # (index, case, started, deadline)
    partial: dict | None = None
    meta: dict = field(default_factory=dict)
    runs: int = 0  # cases this worker process finished
    rerun: str | None = None  # why the current case runs again in a fresh worker
    flake: list | None = None  # [earlier attempts' verdicts, first failure] (--flake-retries)
    #: (returned at, flake, case, index, record) of the cases it finished and has not yet
    #: outlived by LATE_DEATH_S (finished another case that much later, or exited cleanly)
    held: list = field(default_factory=list)


_FRAME = re.compile(r'File "([^"]+)", line (\d+) in (\S+)')


def _frames(fault: Path | None) -> str:
    """The innermost Python frames faulthandler wrote (the dumping thread's stack), up to the
    runner's own code."""
    if fault is None:
        return ""
    try:
        text = fault.read_text(errors="replace")
    except OSError:
        return ""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", text)
    block = next((b for b in blocks if b.lstrip().startswith("Current thread")),
                 blocks[-1] if blocks else "")
    out = []
    for file, line, fn in _FRAME.findall(block):
        if os.path.basename(file) == "runner.py" and "conformance" in file:
            break
        out.append(f"{os.path.basename(file)}:{line} in {fn}")
        if len(out) == 3:
            break
    return " ← ".join(out)


class _Pool:
    def __init__(self, spec: str, cases: Sequence[Case], caps: Capabilities, seed: int,
                 jobs: int, tmp: Path, close_fds: tuple = (), start: tuple = ("fork", None)):
        self.method = start[0]  # fork / spawn / forkserver (start_method.py)
        self.ctx = multiprocessing.get_context(self.method)
        if self.method != "fork":  # a fresh process holds none of the runner's descriptors
            close_fds, cases = (), start[1]  # the cases as start_method.worker_cases sends them
        if self.method == "forkserver":
            self.ctx.set_forkserver_preload(["tilefoundry.conformance.runner"])
        self.close_fds = tuple(close_fds)
        self.spec, self.cases, self.caps, self.seed, self.tmp = spec, cases, caps, seed, tmp
        self.slots = [_Slot(n) for n in range(jobs)]
        self.spawned = 0
        self.recycled = 0
        self.reaper = Reaper()  # processes.py: no process of a case outlives it (D330)
        self.forward = OutputForwarder(sys.stderr)  # terminal.py: workers' output (D332)
        self.memory_limit_mb = 0.0  # processes.py: a case's resident-set limit (D331)

    def spawn(self, slot: _Slot) -> None:
        self.spawned += 1
        slot.runs = 0
        parent, child = self.ctx.Pipe()
        slot.phase = self.ctx.RawValue("i", _IDLE)
        slot.fault = self.tmp / f"worker-{self.spawned}.txt"
        slot.proc = self.ctx.Process(
            target=_worker_main, name=f"tilefoundry-conformance-{self.spawned}",
            args=(child, self.spec, self.cases, self.caps, self.seed, str(slot.fault),
                  slot.phase, self.close_fds, self.method != "fork"))
        slot.proc.start()
        self.reaper.worker_started(slot.proc.pid)
        child.close()
        slot.conn = parent
        if self.method != "fork":
            wait_ready(parent, slot.proc)  # its start-up is not its first case's time

    def kill(self, slot: _Slot) -> None:
        if slot.proc is not None:
            self.reaper.end_worker(slot.proc.pid)  # every descendant, whatever its group
            _kill_group(slot.proc.pid)
            with contextlib.suppress(Exception):
                slot.proc.kill()
            slot.proc.join(5)
            with contextlib.suppress(Exception):
                slot.proc.close()
        if slot.conn is not None:
            with contextlib.suppress(Exception):
                slot.conn.close()
        slot.proc = slot.conn = None
        self.forward.pump(slot.fault, f"worker {slot.n}", final=True)

    def retire(self, slot: _Slot, wait_s: float = 2.0) -> int | None:
        """Ask an idle worker to exit (its backend's non-daemon threads finish first), then
        remove it and its process group; its exit status (0: a clean exit), None when it did
        not exit within ``wait_s``."""
        code = None
        if slot.proc is not None:
            pid = slot.proc.pid
            with contextlib.suppress(Exception):
                slot.conn.send(None)
            t0 = time.monotonic()
            while code is None and time.monotonic() - t0 < wait_s:
                if not hasattr(os, "waitid"):
                    code = slot.proc.exitcode
                    time.sleep(0.005)
                    continue
                try:  # exited? left unreaped, so its process group is still its own to kill
                    st = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                except OSError:  # not our child (forkserver's): wait on its sentinel
                    slot.proc.join(max(0.0, wait_s - (time.monotonic() - t0)))
                    code = slot.proc.exitcode
                    break
                if st is not None:
                    code = st.si_status if st.si_code == os.CLD_EXITED else -st.si_status
                else:
                    time.sleep(0.005)
        self.kill(slot)
        return code

    def stop(self) -> None:
        for s in self.slots:
            if s.proc is not None and s.task is None:
                with contextlib.suppress(Exception):
                    s.conn.send(None)
        for s in self.slots:
            if s.proc is not None:
                if s.task is None:
                    s.proc.join(2)
                self.kill(s)
        self.reaper.close()


def _kill_group(pid: int | None) -> None:
    """SIGKILL the worker's process group (it leads one: ``_worker_main``), so processes its
    backend forked do not outlive it."""
    if pid is None or not hasattr(os, "killpg"):
        return
    with contextlib.suppress(OSError):
        if os.getpgid(pid) == pid:  # never the runner's own group
            os.killpg(pid, signal.SIGKILL)


def _death(code: int | None) -> str:
    if code is None:
        return "the worker stopped answering"
    if code < 0:
        try:
            sig = signal.Signals(-code)
            return f"the worker was killed by signal {sig.name} ({signal.strsignal(sig)})"
        except ValueError:
            return f"the worker was killed by signal {-code}"
    return f"the worker exited with status {code}"


def _warm_imports() -> None:
    """Import what every case needs before forking, so workers start warm."""
    import tilefoundry.oracle.compare
    import tilefoundry.semantics.evaluator.core
    import tilefoundry.semantics.typeinfer.functions  # noqa: F401
    from tilefoundry.semantics.evaluator import families  # noqa: F401


@dataclass
class _Task:
    """One attempt of a case, as the driver hands it to an executor."""

    i: int
    case: Case
    opts: dict
    rerun: str | None = None  # why it runs again (its worker died after earlier cases)
    flake: list | None = None  # [earlier attempts' verdicts, first failure] (--flake-retries)

    @property
    def fresh(self) -> bool:
        """It should run in a fresh worker (another attempt, or a run again after a death)."""
        return self.rerun is not None or self.flake is not None


class _Dispatch:
    """The driver's side of a run, shared by the executors (the forked pool below, Ray in
    ``ray_executor``): which case runs next (the cases in order, skipping those a resumed file
    holds; cases to run again; --flake-retries attempts; the deadline; the manifest's skips),
    and what becomes of a finished attempt (the flake bookkeeping, the manifest's xfail, one
    JSON line appended to the locked results file)."""

    def __init__(self, cases: Sequence[Case], done: dict, f: Any, prog: Any,
                 manifest: Manifest | None, flake_retries: int, deadline: float | None,
                 base_opts: dict, reduce_s: float, repro_dir: Path | None):
        self.cases, self.done, self.f, self.prog = cases, done, f, prog
        self.manifest, self.flake_retries, self.deadline = manifest, flake_retries, deadline
        self.base_opts, self.reduce_s, self.repro_dir = base_opts, reduce_s, repro_dir
        self.order: list[str] = []
        self.taken: set[str] = set()
        self.repro_paths: dict[str, str] = {}  # case id -> its reproducer directory
        self.flake_q: collections.deque = collections.deque()  # (i, case, attempts, first)
        self.retry: collections.deque = collections.deque()  # (i, case, why)
        self.exhausted = False
        self.stopped = False
        self._it = self._fresh()

    def _fresh(self) -> Iterator[tuple[int, Case]]:
        for i in range(len(self.cases)):
            c = self.cases[i]
            if c.id in self.done:
                self.order.append(c.id)
                continue
            yield i, c

    def more(self) -> bool:
        """Whether a task may still come (fresh cases, cases to run again, attempts)."""
        return not ((self.exhausted or self.stopped) and not self.retry and not self.flake_q)

    def next_task(self) -> _Task | None:
        """The next attempt to run; None when none is due now (see ``more``). A case the
        manifest skips is recorded here, without running."""
        while True:
            rerun = None
            flake = None
            if self.flake_q:  # another attempt of a failed case (--flake-retries)
                i, case, *flake = self.flake_q.popleft()
            elif self.retry:  # a case whose worker died after running earlier cases
                i, case, rerun = self.retry.popleft()
            else:
                if self.exhausted or self.stopped:
                    return None
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    self.stopped = True
                    return None
                try:
                    i, case = next(self._it)
                except StopIteration:
                    self.exhausted = True
                    return None
                self.order.append(case.id)
            m = self.manifest
            sk = m.skip_for(case.id) if m is not None and rerun is None and flake is None \
                else None
            if sk is not None:
                self.emit(self.finalize(case, {"verdict": "NOT_SUPPORTED",
                                               "message": f"skipped by manifest: {sk.reason}",
                                               "manifest": f"skip: {sk.reason}"}))
                continue
            tol = m.tolerance_for(case.id) if m is not None else None
            opts: dict[str, Any] = {**self.base_opts,
                                    "tolerance": (tol.ulp, tol.reason) if tol else None,
                                    "admit": m.admit_for(case.id) if m is not None else None,
                                    "reduce_s": self.reduce_s if flake is None else 0.0}
            if self.repro_dir is not None and flake is None:  # the first attempt's is kept
                if case.id not in self.repro_paths:  # a case run again keeps its folder
                    self.repro_paths[case.id] = str(self.repro_dir /
                                                    _safe_name(case.id, self.taken))
                opts["repro"] = self.repro_paths[case.id]
            return _Task(i, case, opts, rerun, flake)

    def emit(self, rec: dict) -> None:
        self.f.write(json.dumps(rec) + "\n")
        self.f.flush()
        self.prog.update(rec["verdict"])

    def conclude(self, flake: list | None, case: Case, i: int, out: dict) -> None:
        """Record a finished attempt: emit it, or queue another attempt (--flake-retries)."""
        attempts, first = flake if flake is not None else ([], None)
        attempts = [*attempts, out["verdict"]]
        if out["verdict"] in _RETRYABLE and not out.get("harness") and \
                len(attempts) <= self.flake_retries:
            self.flake_q.append((i, case, attempts, first or out))
            return
        if len(attempts) > 1:
            first = first or out
            if out["verdict"] == "PASS":
                out = {**first, "verdict": "FLAKY", "attempts": attempts,
                       "message": f"flaky: {first['verdict']} on attempt 1, PASS on attempt "
                                  f"{len(attempts)}: {first['message']}"}
            else:
                out = {**first, "attempts": attempts}
        if out["verdict"] in NONPASS_REPRO and not out.get("harness") and "repro" not in out \
                and case.id in self.repro_paths:
            out = self._nonpass_repro(case, out, self.repro_paths[case.id])
        self.emit(self.finalize(case, out))

    def _nonpass_repro(self, case: Case, out: dict, path: str) -> dict:
        """``out`` with the reproducer of its ERROR / CRASH / TIMEOUT written (the case built
        again here, its RNGs seeded as the worker seeded them)."""
        seed = self.base_opts.get("seed", 0)
        try:
            _seed_rngs(seed, case.id)
            write_nonpass_reproducer(path, case, seed, self.base_opts["backend"],
                                     self.base_opts.get("catalog"), out)
        except Exception as e:
            return {**out, "repro_error": _raised("writing the reproducer", e)}
        return {**out, "repro": Path(path).name}

    def finalize(self, case: Case, out: dict) -> dict:
        rec = {"type": "case", "id": case.id, "family": case.family, "verdict": "",
               "seconds": 0.0, "message": "", "ops": list(case.ops),
               "dtypes": list(case.dtypes)}
        rec.update(out)
        rec["seconds"] = round(float(rec.get("seconds", 0.0)), 4)
        xf = self.manifest.xfail_for(case.id) if self.manifest is not None else None
        if xf is not None:
            v = rec["verdict"]
            if v in xf.verdicts:
                rec.update(verdict="XFAIL", raw_verdict=v, manifest=f"xfail: {xf.reason}",
                           message=f"expected failure ({xf.reason}): {v}: {rec['message']}")
            elif v == "PASS":
                rec.update(verdict="XPASS", raw_verdict=v, manifest=f"xfail: {xf.reason}",
                           message=f"unexpected pass: the manifest expects a failure "
                                   f"({xf.reason}); remove the entry")
            elif v in BAD_VERDICTS:
                rec["message"] += f" (the manifest expects {list(xf.verdicts)}: {xf.reason})"
        return rec


def _run_local(d: _Dispatch, pool: _Pool, timeout_s: float, worker_rss_mb: float) -> None:
    """The forked-worker executor: hand ``d``'s tasks to the pool's slots, collect verdicts,
    turn a worker's death into CRASH and a case past ``timeout_s`` into TIMEOUT.

    A case's record waits (``_Slot.held``) until its worker has outlived it: finished another
    case ``LATE_DEATH_S`` later, exited cleanly when retired, or was alive at a deadline. A
    worker that dies first makes it CRASH "the backend died after returning" (``died_after``);
    when it dies during a later case, that case runs again in a fresh worker first
    (``suspects``): dying again, the death is its own and the held cases stand."""
    suspects: dict[int, tuple] = {}  # a case run again -> (held cases, how the worker died)

    def settle(held: list, died: str | None) -> None:
        now = time.monotonic()
        for t, flake, case, i, out in held:
            d.conclude(flake, case, i, out if died is None else
                       _died_after(case, out, died, now - t))

    def release(slot: _Slot, died: str | None, before: float | None = None) -> None:
        """Record the held cases (those returned before ``before``): as they are, or (the
        worker died) as dying after returning."""
        late = [before is not None and h[0] > before for h in slot.held]
        settle([h for h, x in zip(slot.held, late, strict=True) if not x], died)
        slot.held = [h for h, x in zip(slot.held, late, strict=True) if x]

    def retire(slot: _Slot) -> None:  # an idle worker: a clean exit vouches for its cases
        code = pool.retire(slot)
        release(slot, None if code in (0, None) else _death(code) + " once asked to exit")

    def resolve(i: int, own_death: bool) -> None:  # the run again of case i has an outcome
        if i in suspects:
            held, died = suspects.pop(i)
            settle(held, None if own_death else died)

    while True:
        # hand out work
        for slot in pool.slots:
            if slot.task is not None or not d.more():
                continue
            t = d.next_task()
            if t is None:
                break
            if t.fresh and slot.proc is not None and slot.runs:
                retire(slot)  # each attempt, and a run again after a death, in a fresh one
            if slot.proc is not None and not slot.proc.is_alive():
                slot.proc.join(1)
                release(slot, _death(slot.proc.exitcode) + " while idle between cases")
                pool.kill(slot)  # died between cases (a backend thread, a leak)
            if slot.proc is None:
                pool.spawn(slot)
            try:
                slot.conn.send((t.i, t.opts))
            except (BrokenPipeError, OSError):
                slot.proc.join(1)
                release(slot, _death(slot.proc.exitcode) + " while idle between cases")
                pool.kill(slot)
                pool.spawn(slot)
                slot.conn.send((t.i, t.opts))
            now = time.monotonic()
            slot.task = (t.i, t.case, now, now + timeout_s)
            slot.partial, slot.meta, slot.rerun = None, {}, t.rerun
            slot.flake = t.flake
        busy = [s for s in pool.slots if s.task is not None]
        if not busy:
            if not d.more():
                held = [s for s in pool.slots if s.held]
                if not held:
                    break
                for slot in held:  # the last cases: their workers must exit cleanly
                    retire(slot)
            continue
        now = time.monotonic()
        wait_s = max(0.0, min(s.task[3] for s in busy) - now)
        wait([x for s in busy for x in (s.conn, s.proc.sentinel)],
             min(wait_s, 0.05 if pool.memory_limit_mb else 0.5))
        for slot in busy:
            i, case, started, dl = slot.task
            pool.forward.pump(slot.fault, f"worker {slot.n}")
            msg = None
            dead_pipe = False
            try:
                if slot.conn.poll():
                    msg = slot.conn.recv()
            except (EOFError, OSError):
                dead_pipe = True
            if msg is not None and msg[0] == "meta":
                slot.meta = msg[2]
                continue
            if msg is not None and msg[0] == "partial":
                slot.partial = msg[2]
                slot.task = (i, case, started, dl + msg[3])
                continue
            if msg is not None and msg[0] == "done":
                out = msg[2]
                if slot.rerun is not None:
                    out = {**out, "rerun": slot.rerun}
                slot.task = None
                now = time.monotonic()
                release(slot, None, now - LATE_DEATH_S)  # cases it has outlived long enough
                resolve(i, False)
                slot.held.append((now, slot.flake, case, i, out))
                slot.runs += 1
                pool.reaper.end_case(slot.proc.pid)  # the case's detached processes (D330)
                if msg[3] > worker_rss_mb:
                    pool.recycled += 1
                    retire(slot)
                continue
            elapsed = time.monotonic() - started
            if dead_pipe or not slot.proc.is_alive():
                slot.proc.join(1)
                what = _death(slot.proc.exitcode)
                phase = _PHASES[slot.phase.value]
                where = _frames(slot.fault)
                if slot.partial is None and slot.rerun is None and slot.runs:
                    # this worker ran earlier cases: its death may be theirs (a backend
                    # thread exiting late). The case runs again in a fresh worker and
                    # gets that verdict; a second death is its own CRASH.
                    d.retry.append((i, case, f"{what} during {phase} in a worker that had "
                                             f"run {slot.runs} earlier case(s); run again in "
                                             f"a fresh worker"))
                    if slot.held:  # its death is this case's or the held ones'
                        suspects[i] = (slot.held, f"{what} during {phase} of a later case "
                                                  f"({case.id})")
                        slot.held = []
                    slot.task = None
                    pool.kill(slot)
                    continue
                release(slot, f"{what} during {phase} of a later case ({case.id})")
                resolve(i, True)  # run again, it died again: the first death was its own
                if slot.partial is not None:
                    out = dict(slot.partial)
                    out["message"] += f" [{what} while reducing the failure]"
                else:
                    out = crash_record(case, elapsed, f"{what} during {phase}"
                                       + (f"; innermost frames: {where}" if where else ""),
                                       slot.meta)
                if slot.rerun is not None:
                    out["rerun"] = slot.rerun
                slot.task = None
                pool.kill(slot)
                d.conclude(slot.flake, case, i, out)
            elif (rss := over_memory_limit(slot.proc.pid, pool.memory_limit_mb)) is not None:
                release(slot, None)  # alive at the limit: it outlived the held cases
                resolve(i, False)
                out = crash_record(case, elapsed, f"memory limit {pool.memory_limit_mb:g} MB "
                                   f"exceeded (resident {rss:,.0f} MB during "
                                   f"{_PHASES[slot.phase.value]}); the worker was killed",
                                   slot.meta)
                out["memory_limit_mb"] = pool.memory_limit_mb
                if slot.rerun is not None:
                    out["rerun"] = slot.rerun
                slot.task = None
                pool.kill(slot)
                d.conclude(slot.flake, case, i, out)
            elif time.monotonic() >= dl:
                release(slot, None)  # alive at the deadline: it outlived the held cases
                resolve(i, False)
                phase = _PHASES[slot.phase.value]
                with contextlib.suppress(Exception):
                    os.kill(slot.proc.pid, signal.SIGUSR1)  # faulthandler: dump stacks
                    t0 = time.monotonic()
                    while time.monotonic() - t0 < 2.0 and not _frames(slot.fault):
                        time.sleep(0.02)
                    time.sleep(0.05)  # let the dump finish
                where = _frames(slot.fault)
                if slot.partial is not None:
                    out = dict(slot.partial)
                    out["message"] += " [the reducer ran out of time]"
                else:
                    out = timeout_record(case, timeout_s, elapsed,
                                         f"during {phase}; the worker was killed"
                                         + (f"; innermost frames: {where}" if where else ""),
                                         slot.meta)
                slot.task = None
                pool.kill(slot)
                d.conclude(slot.flake, case, i, out)
