"""How the conformance runner starts its workers: ``fork`` (the default), ``spawn`` or
``forkserver`` (docs/conformance.md, D311).

A forked worker inherits the runner's memory: the cases (their builder closures are never
pickled) and everything the runner imported — including the backend, which the runner loads once
to read its capabilities. A runtime that does not survive ``fork`` (JAX, CUDA, a library that
started threads at import: the child gets their locks in whatever state they were, and no
threads to release them) then hangs or fails in every worker. ``spawn`` starts each worker as a
fresh interpreter and ``forkserver`` forks it from a clean server process started before
anything of the run was loaded there; either way the worker imports the backend itself from its
spec (``load_backend(spec)``), so nothing of the parent's backend state crosses.

**Choosing.** ``--start-method`` (``run(start_method=...)``) wins; otherwise the backend's
``start_method`` attribute (a string of ``START_METHODS``); otherwise ``fork``. An invalid
value is a one-line ``ConformanceError`` naming the valid ones (and, for the attribute, the
backend); a method this platform lacks is one too. ``--executor ray`` starts no local workers,
so ``--start-method`` is refused there (Ray workers import the backend themselves already).

**The cases under spawn / forkserver** are sent to each worker (``worker_cases``), not inherited:

* cases that come from the catalog (``run`` was given a tier name): the worker rebuilds the
  catalog from ``(catalog spec, seed, capabilities)`` — the catalog's contract is that a case id
  always builds the same program and inputs — and takes the selected ids;
* any other cases (a list of ``Case``, a fuzz campaign's ``GeneratedCases``) are pickled
  (standard ``pickle``: builders must be module-level functions or ``functools.partial`` of
  them); modules loaded from ``path/to/file.py`` specs are loaded again in the worker first, so
  what pickles by reference to them resolves. Cases that do not pickle are a one-line
  ``ConformanceError`` before any case runs.

**Start-up.** A spawned worker imports tilefoundry, the backend and rebuilds the cases before its
first case; it reports ``("ready", pid)`` when done, and the pool waits for that (up to
``START_LIMIT_S``) before handing it a case, so its start-up is not the case's time. A worker
that dies or stays silent while starting is handed its case anyway: the case's own death or
timeout then names it. Everything else is the same as under fork: the worker leads its own
process group (a TIMEOUT kills the group), ``PR_SET_PDEATHSIG`` (under forkserver the worker's
parent is the server, which exits when the runner does), ``faulthandler`` stacks on a
TIMEOUT / CRASH, the per-worker memory limit.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tilefoundry.errors import TilefoundryError

__all__ = ["START_LIMIT_S", "START_METHODS", "choose_start_method", "resolve_cases",
           "wait_ready", "worker_cases"]

START_METHODS = ("fork", "spawn", "forkserver")
#: how long the pool waits for a spawned / forkserver worker's start-up (imports, the backend,
#: rebuilding the cases) before handing it a case anyway
START_LIMIT_S = 300.0


def _error(msg: str) -> TilefoundryError:
    from tilefoundry.conformance.selection import ConformanceError

    return ConformanceError(msg)


def choose_start_method(flag: str | None, backend: Any, spec: str, executor: str) -> str:
    """The start method of a run: ``flag`` (``--start-method``), else the backend's
    ``start_method`` attribute, else ``fork``; a one-line error for an invalid or unavailable
    one."""
    valid = ", ".join(START_METHODS)
    if flag is not None:
        if flag not in START_METHODS:
            raise _error(f"--start-method: expected one of {valid}, got {flag!r}")
        if executor != "local":
            raise _error(f"--start-method is for the local executor's worker processes; "
                         f"--executor {executor} starts none (drop --start-method)")
        method = flag
    else:
        method = getattr(backend, "start_method", None)
        if method is None or executor != "local":
            method = "fork"
        elif method not in START_METHODS:
            raise _error(f"backend {spec!r}: its start_method attribute is {method!r}; expected "
                         f"one of {valid} (or override it with --start-method)")
    if method not in multiprocessing.get_all_start_methods():
        raise _error(f"the start method {method!r} is not available on this platform "
                     f"(available: {', '.join(multiprocessing.get_all_start_methods())}); "
                     f"choose another with --start-method")
    return method


@dataclass(frozen=True)
class _FromCatalog:
    """The cases a spawned worker rebuilds: the catalog ``catalog`` of ``seed`` (with the
    capability-directed cases of ``caps``), the ids ``ids`` in order."""

    catalog: str | None
    seed: int
    caps: Any
    ids: tuple[str, ...]


@dataclass(frozen=True)
class _Pickled:
    """Pickled cases, and the ``path/to/file.py`` modules to load before unpickling them
    (``(module name, file)``)."""

    data: bytes
    files: tuple[tuple[str, str], ...]


def worker_cases(cases: Sequence, method: str, origin: tuple | None) -> Any:
    """What ``_worker_main`` receives as its cases: ``cases`` themselves under fork (inherited),
    else a picklable recipe (``origin``: ``(catalog spec, seed, caps)`` when ``cases`` were
    selected from that catalog by id)."""
    if method == "fork":
        return cases
    if origin is not None:
        return _FromCatalog(origin[0], origin[1], origin[2], tuple(c.id for c in cases))
    try:
        data = pickle.dumps(cases, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:
        bad = next((c for c in (cases if isinstance(cases, list) else ())
                    if not _picklable(c)), None)
        where = f" (case {bad.id!r})" if bad is not None else ""
        raise _error(f"--start-method {method}: the cases cannot be sent to a {method} worker"
                     f"{where}: {type(e).__name__}: {str(e)[:200]}; give their builders as "
                     f"module-level functions or functools.partial of them, run a tier of a "
                     f"catalog (the worker rebuilds it), or use --start-method fork") from None
    files = tuple(sorted((name, mod.__file__) for name, mod in list(sys.modules.items())
                         if name.startswith("tilefoundry_user_")
                         and getattr(mod, "__file__", None)))
    return _Pickled(data, files)


def _picklable(x: Any) -> bool:
    try:
        pickle.dumps(x)
    except Exception:
        return False
    return True


class _Unbuildable(Sequence):
    """The cases of a worker that could not rebuild them: each builds by raising why (the
    runner reports a ``harness:`` ERROR on every case, naming it)."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __len__(self) -> int:
        return 10**9

    def __getitem__(self, i):  # type: ignore[override]
        from tilefoundry.conformance.cases import Case

        def build() -> tuple:
            raise RuntimeError(self.why)

        return Case(f"unbuilt/{i}", "unbuilt", build)


def resolve_cases(source: Any) -> Sequence:
    """In the worker: the cases ``worker_cases`` described."""
    try:
        if isinstance(source, _FromCatalog):
            from tilefoundry.conformance.selection import load_catalog

            cat = load_catalog(source.seed, catalog=source.catalog, backend_caps=source.caps)
            return [cat[i] for i in source.ids]
        if isinstance(source, _Pickled):
            from tilefoundry.loading import load_file

            for _name, path in source.files:
                with contextlib.suppress(TilefoundryError):
                    load_file(path, "a case module", path)
            return pickle.loads(source.data)
    except Exception as e:
        return _Unbuildable(f"the worker could not rebuild the cases ({type(e).__name__}: "
                            f"{str(e)[:300]})")
    return source


def wait_ready(conn: Any, proc: Any, limit_s: float = START_LIMIT_S) -> None:
    """Wait until a starting worker sends ``("ready", pid)``, dies, or ``limit_s`` passes."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if conn.poll(0.05):
            with contextlib.suppress(EOFError, OSError):
                conn.recv()
            return
        if not proc.is_alive():
            return
