"""``--executor ray``: the conformance runner's cases as Ray tasks (docs/conformance.md, D267).

The driver (``runner.run``) is the same as for the forked pool: it picks the next case
(``workers._Dispatch``: resume, shard, manifest, --flake-retries, the fuzz deadline), and it alone
writes the JSON-lines file, under its lock. This module only replaces the pool:

* **One Ray task per case** (not an actor per slot): a task's worker process can be killed on a
  timeout with ``ray.cancel(ref, force=True)``, which Ray does not offer for actor methods, and
  Ray replaces a dead worker by itself. Each Ray worker process loads the backend and the cases
  (one ``ray.put`` of the driver's cases) once, on its first task of the run, and keeps them in
  ``_STATE`` for the tasks after; the case runs through ``judge._run_one`` — the forked worker's
  own per-case path (warnings, phases, harness errors, reproducers).
* The task is a streaming generator: it yields ``("started", pid, host)`` once its worker has the
  backend and the cases, then ``("done", record)``. The case's time limit counts from
  "started" (so a worker's start-up, a queue behind a busy cluster, are not the case's time);
  a task that does not even start within the limit plus ``START_GRACE_S`` is TIMEOUT too.
* ``max_retries=0``: a task whose worker dies (a segfault, ``os._exit``, SIGKILL, Ray's memory
  monitor) is that case's **CRASH**, recorded at once and never retried by Ray, so the verdict is
  deterministic; the message names the death (Ray's error, the worker's pid and host). A task
  past the limit is cancelled with ``force=True`` (its worker is killed) and is **TIMEOUT**.
  The run continues; no case is lost.

* A worker that sees the driver's status folder of the run (its host, or shared storage) writes
  its phase, the ops / dtypes it inferred and its ``faulthandler`` stacks to per-pid files
  there (``_status_files``), so a CRASH / TIMEOUT names the phase and innermost frames as the
  forked pool does; elsewhere only the death is named.

Not carried over from the forked pool: replacing workers that grow beyond ``worker_rss_mb``
(Ray's own memory monitor kills a worker under memory pressure: a CRASH), killing processes a
backend forked, and a reducer's partial result when its worker dies (a FAIL being reduced gets
``reduce_s`` + 10 s more time up front instead).

On a real cluster every node needs tilefoundry, the backend and the catalog importable, and
``--repro-dir`` / the fuzz ``--db`` must be on storage every node sees (only the driver reads the
database; workers write reproducers).
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import shutil
import signal
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilefoundry.conformance.backend import Capabilities, load_backend
from tilefoundry.conformance.cases import Case
from tilefoundry.conformance.judge import _IDLE, _PHASES, _run_one, _short, _text
from tilefoundry.conformance.results import crash_record, timeout_record
from tilefoundry.conformance.selection import ConformanceError
from tilefoundry.conformance.workers import _Dispatch, _frames, _Task

#: how long a task may wait for a Ray worker (start-up, loading the backend) beyond its limit
START_GRACE_S = 120.0
#: the TCP connection timeout of the --address check
CONNECT_TIMEOUT_S = 5.0
#: the object store of a local cluster (the cases are about 1 MB)
LOCAL_OBJECT_STORE_BYTES = 256 * 2**20

# one run's backend and cases in a Ray worker process: {key: (backend, load error, cases, caps,
# seed, phase fd, meta fd, fault file)}; only the latest run's is kept
_STATE: dict[str, tuple] = {}


class _Phase:
    """What the case is doing (``judge._PHASES``), as the forked worker's shared int: also
    written (one byte) to this worker's status file of the run when it has one, so the driver
    can name the phase of a death."""

    def __init__(self, fd: int | None) -> None:
        self._v, self._fd = _IDLE, fd
        self.value = _IDLE

    @property
    def value(self) -> int:
        return self._v

    @value.setter
    def value(self, v: int) -> None:
        self._v = v
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.pwrite(self._fd, bytes([v]), 0)


class _Messages:
    """The worker's side of the forked pool's pipe: ``_execute``'s "meta" (the inferred ops /
    dtypes, which a CRASH record carries) goes to this worker's meta file of the run."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd
        self.send(("meta", 0, {}))

    def send(self, msg: tuple) -> None:
        if msg and msg[0] == "meta" and self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
                if msg[2]:
                    os.pwrite(self._fd, json.dumps(msg[2]).encode(), 0)


def _status_files(status_dir: str) -> tuple:
    """This worker's phase and meta file descriptors and its faulthandler file in the driver's
    status folder of the run — when the folder is here (the driver's host, or shared storage);
    else ``(None, None, None)``."""
    if not os.path.isdir(status_dir):
        return None, None, None
    base = os.path.join(status_dir, str(os.getpid()))
    fault = open(base + ".fault", "w")  # kept open for faulthandler
    faulthandler.enable(file=fault, all_threads=False)
    if hasattr(signal, "SIGUSR1"):  # the driver asks for the stacks of a case past its limit
        faulthandler.register(signal.SIGUSR1, file=fault, all_threads=True)
    flags = os.O_RDWR | os.O_CREAT
    return os.open(base + ".phase", flags, 0o644), os.open(base + ".meta", flags, 0o644), fault


def _forget_state() -> None:
    for st in _STATE.values():
        for fd in st[5:7]:
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
    _STATE.clear()


def _case_task(key: str, box: list, i: int, opts: dict):
    """In a Ray worker: case ``i`` of the run ``key`` (``box`` holds the reference of its
    ``(spec, cases, caps, seed, status folder)``; a list, so Ray does not fetch it for every
    task). Yields ``("started", pid, host)``, then ``("done", record)``."""
    st = _STATE.get(key)
    if st is None:
        import ray

        spec, cases, caps, seed, status_dir = ray.get(box[0])
        backend, load_error = None, ""
        try:
            backend = load_backend(spec)
        except Exception as e:
            load_error = f"loading the backend in the Ray worker raised {type(e).__name__}: " \
                         f"{_text(e)}"
        _forget_state()
        st = _STATE[key] = (backend, load_error, cases, caps, seed, *_status_files(status_dir))
    backend, load_error, cases, caps, seed, phase_fd, meta_fd, _ = st
    phase, conn = _Phase(phase_fd), _Messages(meta_fd)  # reset: nothing of the last case
    yield ("started", os.getpid(), socket.gethostname())
    yield ("done", _run_one(backend, load_error, caps, cases[i], seed, opts, phase, conn, i))


def _probe_address(address: str) -> None:
    """A TCP connection to ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``) within
    ``CONNECT_TIMEOUT_S``: ``ray.init`` on an address nobody answers retries for minutes."""
    if address in ("auto", "local"):
        return
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConformanceError(f"--address: expected HOST:PORT or ray://HOST:PORT (a Ray "
                               f"cluster's head), got {address!r}")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_S):
            pass
    except OSError as e:
        raise ConformanceError(f"--address {address}: no Ray cluster answers there "
                               f"({e.strerror or e}); start one with 'ray start --head' or "
                               f"fix the address") from None


def connect(address: str | None, jobs: int) -> RaySession:
    """A Ray session: the cluster at ``address``, or a local one of ``jobs`` CPUs (an already
    initialised Ray, e.g. a test's cluster, is used as it is). Errors are one-line
    ``ConformanceError``s, before any case runs."""
    try:
        import ray
    except ImportError:
        raise ConformanceError("--executor ray needs Ray, which is not installed; install it "
                               "with: pip install 'tilefoundry[ray]'") from None
    if address is not None:
        _probe_address(address)
    if ray.is_initialized():
        return RaySession(ray, started=False)
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "logging_level": "WARNING"}
    try:
        if address is not None:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=jobs, object_store_memory=LOCAL_OBJECT_STORE_BYTES, **kwargs)
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0]
        where = f"--address {address}" if address is not None else "a local Ray cluster"
        raise ConformanceError(f"--executor ray: cannot start or join {where} "
                               f"({type(e).__name__}: {_short(first, 200)}); check 'ray "
                               f"status' there or fix the address") from None
    return RaySession(ray, started=True)


@dataclass
class _Flight:
    task: _Task
    limit: float  # the case's time limit
    deadline: float  # time.monotonic(): before "started", the limit plus START_GRACE_S
    started: float | None = None
    where: str = ""  # "pid N on HOST" once started
    pid: int | None = None
    host: str = ""


class RaySession:
    """A connection to a Ray cluster for one ``run`` (``close`` shuts down a cluster it
    started)."""

    def __init__(self, ray: Any, started: bool):
        self.ray, self.started = ray, started
        self.box: list | None = None
        self.key = ""
        self.status: Path | None = None  # the workers' phase / meta / stack files of the run
        self.remote = ray.remote(num_returns="streaming", max_retries=0,
                                 num_cpus=1)(_case_task)

    def prepare(self, spec: str, cases: Any, caps: Capabilities, seed: int) -> None:
        """Put the run's cases in the object store (before the results file is touched: cases
        that cannot be sent are a one-line error)."""
        import sys

        from ray import cloudpickle

        for name, mod in list(sys.modules.items()):
            if name.startswith("tilefoundry_user_"):  # a 'path/file.py:function' spec's module
                cloudpickle.register_pickle_by_value(mod)  # (workers cannot import it by name)
        self.status = Path(tempfile.mkdtemp(prefix="tilefoundry-ray-"))
        try:
            ref = self.ray.put((spec, cases, caps, seed, str(self.status)))
        except Exception as e:
            why: BaseException = e
            try:  # the pickling error itself (Ray's own message repeats the whole value)
                cloudpickle.dumps(cases)
            except Exception as inner:
                why = inner
            first = (str(why).strip().splitlines() or [""])[0]
            raise ConformanceError(f"--executor ray: the cases cannot be sent to Ray workers "
                                   f"({type(why).__name__}: {_short(first, 200)}); make their "
                                   f"builders picklable (no locks, open files or sockets "
                                   f"inside)") from None
        self.box, self.key = [ref], ref.hex()

    def close(self) -> None:
        if self.status is not None:
            shutil.rmtree(self.status, ignore_errors=True)
            self.status = None
        if self.started:
            self.ray.shutdown()
            self.started = False

    def run_cases(self, d: _Dispatch, jobs: int, timeout_s: float) -> None:
        """Keep ``jobs`` tasks of ``d`` in flight until it has none left; every finished,
        dead or timed-out task is concluded on ``d`` (which writes its record)."""
        ray = self.ray
        inflight: dict[Any, _Flight] = {}
        cancelled: list = []  # their last item (the cancellation) is read, so Ray logs nothing
        try:
            while True:
                while len(inflight) < jobs and d.more():
                    t = d.next_task()
                    if t is None:
                        break
                    limit = timeout_s
                    if t.opts.get("repro") and t.opts.get("reduce_s", 0) > 0:
                        limit += float(t.opts["reduce_s"]) + 10.0  # the reducer's time
                    gen = self.remote.remote(self.key, self.box, t.i, t.opts)
                    inflight[gen] = _Flight(t, limit, time.monotonic() + limit + START_GRACE_S)
                if not inflight:
                    if not d.more():
                        break
                    continue
                wait_s = max(0.0, min(f.deadline for f in inflight.values()) - time.monotonic())
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=min(wait_s, 0.5))
                for gen in ready:
                    self._advance(d, inflight, gen)
                cancelled = self._drain(cancelled, 0.0)
                now = time.monotonic()
                for gen, fl in list(inflight.items()):
                    if now >= fl.deadline:
                        phase, frames, meta = self._detail(fl, dump=True)  # before the kill
                        ray.cancel(gen, force=True)  # kills its worker; Ray starts another
                        cancelled.append(gen)
                        del inflight[gen]
                        if fl.started is None:
                            how = (f"before it started: no Ray worker took it within "
                                   f"{fl.limit + START_GRACE_S:g} s (a busy cluster, or the "
                                   f"backend loads slowly); the task was cancelled")
                            elapsed = 0.0
                        else:
                            how = (f"{phase}on a Ray worker ({fl.where}); the task was "
                                   f"cancelled and its worker killed{frames}")
                            elapsed = now - fl.started
                        self._conclude(d, fl, timeout_record(fl.task.case, timeout_s, elapsed,
                                                             how, meta))
        finally:
            for gen in inflight:  # interrupted: nothing of this run keeps running
                try:
                    ray.cancel(gen, force=True)
                except Exception:  # the cluster may be gone already
                    pass
            self._drain(cancelled + list(inflight), 5.0)

    def _drain(self, gens: list, timeout: float) -> list:
        """Read the error item of cancelled tasks (within ``timeout``); the rest, still
        going."""
        if not gens:
            return gens
        try:
            ready, rest = self.ray.wait(gens, num_returns=len(gens), timeout=timeout)
        except Exception:
            return []
        for gen in ready:
            try:
                self.ray.get(next(gen))
            except Exception:  # the cancellation itself, expected
                pass
        return list(rest)

    def _advance(self, d: _Dispatch, inflight: dict, gen: Any) -> None:
        ray = self.ray
        fl = inflight[gen]
        try:
            item = ray.get(next(gen))
        except StopIteration:  # the generator ended without a record (never expected)
            del inflight[gen]
            self._conclude(d, fl, {"verdict": "ERROR", "harness": True,
                                   "message": "harness: the Ray task ended without a record"})
            return
        except ray.exceptions.RayTaskError as e:  # the task itself raised: the harness's
            del inflight[gen]
            cause = e.cause if getattr(e, "cause", None) is not None else e
            self._conclude(d, fl, {"verdict": "ERROR", "harness": True,
                                   "message": f"harness: the Ray task raised "
                                              f"{type(cause).__name__}: {_short(str(cause))}"})
            return
        except ray.exceptions.RayError as e:  # the worker died, or the node
            del inflight[gen]
            first = (str(e).strip().splitlines() or [""])[0]
            who = f"the Ray worker running it ({fl.where})" if fl.started is not None else \
                "the Ray worker taking it (before the case started)"
            elapsed = time.monotonic() - fl.started if fl.started is not None else 0.0
            phase, frames, meta = self._detail(fl)
            self._conclude(d, fl, crash_record(
                fl.task.case, elapsed, f"{who} died {phase}({type(e).__name__}: "
                                       f"{_short(first, 300)}; not retried: max_retries=0)"
                                       f"{frames}", meta))
            return
        if item[0] == "started":
            fl.started = time.monotonic()
            fl.deadline = fl.started + fl.limit
            fl.where = f"pid {item[1]} on {item[2]}"
            fl.pid, fl.host = item[1], item[2]
            return
        del inflight[gen]
        self._conclude(d, fl, item[1])

    def _detail(self, fl: _Flight, dump: bool = False) -> tuple[str, str, dict]:
        """``("during PHASE ", "; innermost frames: ...", meta)`` of a started task from its
        worker's status files (``("", "", {})`` where there are none: another host). ``dump``:
        ask the live worker for its stacks first (SIGUSR1; faulthandler)."""
        if fl.pid is None or self.status is None:
            return "", "", {}
        base = self.status / str(fl.pid)
        fault = base.with_suffix(".fault")
        if not fault.exists():
            return "", "", {}
        if dump and fl.host == socket.gethostname() and hasattr(signal, "SIGUSR1"):
            with contextlib.suppress(OSError):
                os.kill(fl.pid, signal.SIGUSR1)
                t0 = time.monotonic()
                while time.monotonic() - t0 < 2.0 and not _frames(fault):
                    time.sleep(0.02)
                time.sleep(0.05)  # let the dump finish
        phase = meta = None
        with contextlib.suppress(OSError, ValueError, IndexError):
            phase = _PHASES[base.with_suffix(".phase").read_bytes()[0]]
        with contextlib.suppress(OSError, ValueError):
            meta = json.loads(base.with_suffix(".meta").read_text() or "{}")
        where = _frames(fault)
        return (f"during {phase} " if phase and phase != "idle" else "",
                f"; innermost frames: {where}" if where else "",
                meta if isinstance(meta, dict) else {})

    @staticmethod
    def _conclude(d: _Dispatch, fl: _Flight, out: dict) -> None:
        t: _Task = fl.task
        case: Case = t.case
        d.conclude(t.flake, case, t.i, out)


__all__ = ["CONNECT_TIMEOUT_S", "START_GRACE_S", "RaySession", "connect"]
