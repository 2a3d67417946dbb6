"""What a conformance case starts dies with it; what a worker grows to is bounded (issue 34).

**Leftover processes.** A backend may start processes: a pool it keeps between cases (the
distributed backend's ranks, multiprocessing's resource tracker), a helper it forgets, a daemon
in its own session (``os.setsid()``) or one that double-forks so that its parent exits. The
worker's process group (``_worker_main``'s ``os.setpgid(0, 0)``, killed with the worker) holds
only the first kind; the others outlived the run (6 of 6 in the issue's probe, and a CI step
reading the runner's pipes waited for them). ``Reaper`` closes that (D330):

* The runner marks itself a **child subreaper** (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux) for
  the run, so a process whose parent exits (a double fork) is re-parented to the runner instead
  of init — it stays findable — and every worker sets ``TILEFOUNDRY_CONFORMANCE_WORKER`` to its
  pid in its environment, which the processes it starts inherit.
* **At the end of each case** the runner kills the case's *detached* processes: the worker's
  descendants outside the worker's process group (their own session or group), and the
  processes re-parented to the runner that carry the worker's mark (orphans of a double fork);
  with them everything below them. The worker's own attached descendants (children in its
  process group: pools) are the backend's to keep between cases.
* **When a worker goes** (retired, replaced, killed for a timeout, a crash or the memory limit)
  every descendant goes with it, whatever its group, and every orphan with its mark.
* **At the end of the run** every process re-parented to the runner during the run is killed —
  marked by a worker of this run, or (an environment cleared by the backend) outside the
  runner's process group and started after the run began — and reaped; the subreaper mark is
  restored.

Processes are found by reading ``/proc`` (pid, parent, process group, state, start time); at a
case's end only the processes created since the case began are read (pids are handed out in
increasing order until they wrap, ``/proc/loadavg`` has the last one), and none when the
counter did not move. Elsewhere than Linux it all is a no-op (the
process-group kill remains).

**Memory.** ``rss_mb(pid)`` is a process's resident set in MB (``/proc/<pid>/statm``); the
runner polls the worker's while a case runs and kills it past ``--memory-limit`` (a CRASH
naming the limit; D331). Polled from outside, not ``RLIMIT_AS`` inside: CUDA and Triton reserve
far more address space than they touch, so an address-space limit refuses GPU backends at
start-up, while the resident set is what exhausts a machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass

__all__ = ["DEFAULT_MEMORY_LIMIT_MB", "WORKER_ENV", "Reaper", "check_memory_limit",
           "mark_worker", "over_memory_limit", "rss_mb"]

WORKER_ENV = "TILEFOUNDRY_CONFORMANCE_WORKER"
_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37
_LINUX = sys.platform.startswith("linux")


def mark_worker() -> None:
    """In a worker at start: mark the environment its processes inherit with its pid."""
    os.environ[WORKER_ENV] = str(os.getpid())


#: the default per-case memory limit (``--memory-limit``; docs/conformance.md)
DEFAULT_MEMORY_LIMIT_MB = 8192.0


def check_memory_limit(mb: object, error: type[Exception]) -> None:
    """``--memory-limit`` / ``run(memory_limit_mb=)``: a finite number of MB >= 0 (0: off)."""
    ok = isinstance(mb, int | float) and not isinstance(mb, bool) and 0 <= mb < float("inf")
    if not ok:
        raise error(f"--memory-limit: expected a number of MB >= 0 (0: no limit), got {mb!r}")


def over_memory_limit(pid: int | None, limit_mb: float) -> float | None:
    """The resident MB of ``pid`` when a limit is set and it is past it, else None."""
    if not limit_mb or pid is None:
        return None
    rss = rss_mb(pid)
    return rss if rss is not None and rss > limit_mb else None


def rss_mb(pid: int) -> float | None:
    """The resident set of ``pid`` in MB; None when it cannot be read (gone, not Linux)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    pgid: int
    state: str
    start: int  # clock ticks after boot


def _stat(pid: int) -> _Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None  # gone meanwhile
    rest = text.rpartition(")")[2].split()  # the command name may hold spaces and parens
    try:
        return _Proc(pid, int(rest[1]), int(rest[2]), rest[0], int(rest[19]))
    except (IndexError, ValueError):
        return None


def _snapshot(above: int | None = None) -> dict[int, _Proc]:
    """Every process, or (``above``) those with a larger pid: the ones created since the pid
    counter stood at ``above`` (pids are handed out increasing until they wrap)."""
    out: dict[int, _Proc] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if name.isdigit() and (above is None or int(name) > above):
            p = _stat(int(name))
            if p is not None:
                out[p.pid] = p
    return out


def _mark(pid: int) -> str | None:
    """The worker mark in ``pid``'s environment (None: unreadable or absent)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return None
    key = WORKER_ENV.encode() + b"="
    for item in env.split(b"\0"):
        if item.startswith(key):
            return item[len(key):].decode("ascii", "replace")
    return None


def _last_pid() -> int | None:
    """The pid last handed out in this pid namespace (``/proc/loadavg``)."""
    try:
        with open("/proc/loadavg", "rb") as f:
            return int(f.read().split()[-1])
    except (OSError, IndexError, ValueError):
        return None


def _now_ticks() -> int:
    try:
        with open("/proc/uptime", "rb") as f:
            up = float(f.read().split()[0])
        return int(up * os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0


def _subtree(procs: dict[int, _Proc], roots: set[int]) -> set[int]:
    """``roots`` and everything below them."""
    kids: dict[int, list[int]] = {}
    for p in procs.values():
        kids.setdefault(p.ppid, []).append(p.pid)
    out, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.add(pid)
        todo.extend(kids.get(pid, ()))
    return out


class Reaper:
    """The runner's side (see the module docstring). ``enabled`` False (not Linux, or the
    subreaper mark refused): every method is a no-op."""

    def __init__(self) -> None:
        self.me = os.getpid()
        self.pgid = os.getpgrp()
        self.workers: set[int] = set()  # every worker of the run, live or gone
        self.live: set[int] = set()  # the workers not yet ended
        self.started = _now_ticks()
        self.killed = 0  # processes this reaper killed (for tests and the report)
        #: worker -> the pid counter before its current case began (its spawn, its last case)
        self._marks: dict[int, int | None] = {}
        self._was = 0
        self.enabled = False
        if not _LINUX:
            return
        with contextlib.suppress(Exception):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            was = ctypes.c_int(0)
            libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0)
            self._was = was.value
            self.enabled = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            self._libc = libc

    def worker_started(self, pid: int | None) -> None:
        if pid is not None:
            self.workers.add(pid)
            self.live.add(pid)
            self._marks[pid] = _last_pid()

    # --- the sweeps ------------------------------------------------------------------------
    def _adopted(self, procs: dict[int, _Proc], worker: int | None) -> set[int]:
        """Processes re-parented to the runner during the run (not its workers): outside the
        runner's process group or with a worker's mark, started after the run began. With
        ``worker``: those that are its — its mark (a process that exec'd keeps the environment
        it was given), its process group (a double fork without ``setsid``), or, while it is
        the only live worker, any."""
        marks = {str(w) for w in self.workers}
        out = set()
        for p in procs.values():
            if p.ppid != self.me or p.pid in self.workers or p.start < self.started:
                continue
            mark = _mark(p.pid)
            if p.pgid == self.pgid and mark not in marks:
                continue  # the runner's own (multiprocessing's helpers)
            if worker is None or mark == str(worker) or p.pgid == worker or \
                    (self.live == {worker} and mark not in marks - {str(worker)}):
                out.add(p.pid)
        return out

    def _kill(self, procs: dict[int, _Proc], pids: set[int]) -> None:
        pids = {p for p in pids if p != self.me and p not in self.workers and p in procs}
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                self.killed += 1
        self._reap(pids)

    def _reap(self, pids: set[int], wait_s: float = 2.0) -> None:
        """Collect the exit status of those of ``pids`` that are the runner's children now
        (re-parented orphans), so none stays a zombie."""
        t0 = time.monotonic()
        left = set(pids)
        while left:
            for pid in list(left):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:  # not ours (reaped by its own parent)
                    left.discard(pid)
                    continue
                except OSError:
                    left.discard(pid)
                    continue
                if done:
                    left.discard(pid)
            if not left or time.monotonic() - t0 >= wait_s:
                break
            time.sleep(0.01)

    def end_case(self, worker: int | None) -> None:
        """A case of ``worker`` ended and the worker lives on: kill the case's detached
        processes."""
        if not self.enabled or worker is None:
            return
        mark, now = self._marks.get(worker), _last_pid()
        self._marks[worker] = now
        if mark is not None and now == mark:
            return  # no process was created anywhere during the case
        # only the processes created since the case began (all of them after a wrap)
        procs = _snapshot(mark if mark is not None and now is not None and now > mark
                          else None)
        older: dict[int, _Proc | None] = {}

        def below_worker(pid: int) -> bool:  # up the parents, through older processes too
            seen = set()
            while pid not in seen and pid not in (0, 1, self.me):
                if pid == worker:
                    return True
                seen.add(pid)
                p = procs.get(pid)
                if p is None:
                    p = older[pid] if pid in older else older.setdefault(pid, _stat(pid))
                if p is None:
                    return False
                pid = p.ppid
            return False

        detached = {p.pid for p in procs.values() if p.pid != worker and p.pgid != worker
                    and below_worker(p.pid)}
        roots = detached | self._adopted(procs, worker)
        zombies = {p.pid for p in procs.values() if p.ppid == self.me and p.state == "Z"
                   and p.pid not in self.workers and p.pgid != self.pgid}
        self._kill(procs, _subtree(procs, roots))
        self._reap(zombies, 0.0)

    def end_worker(self, worker: int | None) -> None:
        """``worker`` is about to be killed or has exited: kill everything below it and every
        orphan with its mark."""
        if not self.enabled or worker is None:
            return
        procs = _snapshot()
        roots = (_subtree(procs, {worker}) - {worker}) | self._adopted(procs, worker)
        self._kill(procs, _subtree(procs, roots))
        self.live.discard(worker)

    def close(self) -> None:
        """The run ended (its workers are gone): kill and reap every process re-parented to
        the runner during the run; give the subreaper mark back."""
        if not self.enabled:
            return
        try:
            for _ in range(3):  # a process forked while we killed its parent: once more
                procs = _snapshot()
                roots = self._adopted(procs, None)
                for w in self.workers:  # a worker still present (should not be): its tree
                    if w in procs:
                        roots |= _subtree(procs, {w}) - {w}
                zombies = {p.pid for p in procs.values() if p.ppid == self.me and
                           p.state == "Z" and p.pid not in self.workers and
                           p.pgid != self.pgid}
                self._reap(zombies, 0.0)
                if not roots:
                    break
                self._kill(procs, _subtree(procs, roots))
        finally:
            with contextlib.suppress(Exception):
                self._libc.prctl(_PR_SET_CHILD_SUBREAPER, self._was, 0, 0, 0)
            self.enabled = False
