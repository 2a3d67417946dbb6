"""The conformance runner: cases in worker processes, one verdict each, results as JSON lines.

``run(backend_spec, cases, ...)`` judges a backend on a list of cases (or a tier of the catalog):

1. The backend is loaded once in the runner (``load_backend``) to validate it and read its
   ``capabilities()``; a backend that cannot be loaded, or whose capabilities are malformed, is a
   one-line ``ConformanceError`` before any case runs. So are an unwritable JSON-lines file or
   reproducer directory and a resumed file written for another backend or seed.
2. ``jobs`` long-lived worker processes are forked (the ``fork`` start method: the cases, with
   their builder closures, are inherited, never pickled). Each worker loads the backend itself,
   once, by its spec string, then takes case indices from the runner one at a time. ``spawn`` /
   ``forkserver`` (``start_method``, or the backend's attribute) start fresh workers that
   rebuild the cases instead (``start_method.py``).
3. Per case the worker builds ``(module, entry, inputs)``, computes ``requirements(module)`` and
   answers **NOT_SUPPORTED** naming what is missing when ``unsupported_reason`` says so — the
   backend is not called. Otherwise it evaluates the reference, calls ``backend.compile`` and
   ``backend.run`` (on copies of the inputs) and judges the outputs with
   ``oracle.compare.check``: **PASS**, **FAIL** (the worst element of each rejected output is
   recorded) or **ERROR** (the backend raised a Python exception, or returned malformed output:
   wrong count, shape, dtype, a non-array). Errors of the harness itself (a case whose build or
   reference evaluation raises) are ERROR with a message starting ``harness:``.
4. A worker that dies while running a case (a segfault, ``os._exit``, SIGKILL) makes that case
   **CRASH** (the signal or exit status, the phase — ``backend.compile``, ``backend.run``, ... —
   and the innermost Python frames, which ``faulthandler`` writes to a per-worker file), and
   one that dies after a case returned, before outliving it, makes that case CRASH "the
   backend died after returning" (``_run_local``); a case
   that exceeds ``timeout_s`` (the whole case: build, reference, compile, run, check) is
   **TIMEOUT**: the runner asks the worker for a traceback (SIGUSR1), kills it, starts a fresh
   worker and continues. A worker whose resident memory grows beyond ``worker_rss_mb`` after a
   case is replaced (a leaking backend cannot take the machine down); the count is reported.
5. The manifest (``manifest.py``) is applied: skip → NOT_SUPPORTED without running, tolerance →
   an explicit ULP widening inside the worker, xfail → XFAIL / XPASS after the verdict.
6. Each finished case is appended to the JSON-lines file at once (one object per case) and
   flushed, so a runner killed at any point loses only the cases in flight. ``resume=True`` reads
   the file, keeps its header, drops a torn last line and skips the case ids already recorded.
7. The ``RunResult`` is computed **from the JSON-lines file**, ordered by the case order, so an
   interrupted and resumed run reports exactly what an uninterrupted one does
   (``RunResult.report()`` leaves out the timings).
8. ``executor="ray"`` replaces the forked workers of 2.-4. with one Ray task per case on a Ray
   cluster (``ray_executor``; D267): the same per-case path (``_run_one``), CRASH for a task
   whose Ray worker dies, TIMEOUT for one cancelled past the limit; everything else (resume,
   shard, manifest, baseline, flake retries, the results file) is the driver's
   (``_Dispatch``), the same for both executors.

Determinism: the same seed builds the same catalog (the catalog's contract), and each case runs
with Python's and numpy's global generators seeded from ``(seed, case id)``, so a backend that
draws random numbers is reproducible too. Nothing in a record depends on timing except
``seconds``.

The runner is four modules and this driver (D380): ``selection.py`` (the backend, the catalog,
tiers, shards, generated cases), ``judge.py`` (one case's verdict, in a worker), ``workers.py``
(the worker pool and the dispatch of cases), ``results.py`` (``RunResult``, the results file,
the records of dead or hung workers). ``run`` and the names of ``__all__`` stay importable from
here, the path backend authors use.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tilefoundry.conformance.backend import (
    Capabilities,
)
from tilefoundry.conformance.cases import Case, Catalog
from tilefoundry.conformance.input_checks import (
    check_claims,
    refuse_existing_results,
)
from tilefoundry.conformance.judge import BAD_VERDICTS
from tilefoundry.conformance.manifest import Manifest, ManifestEntry, ManifestError
from tilefoundry.conformance.processes import (
    DEFAULT_MEMORY_LIMIT_MB,
    check_memory_limit,
)
from tilefoundry.conformance.results import (
    JSONL_FORMAT,
    RunResult,
    _check_writable,
    _lock_results,
    _read_resume,
    _restore_term,
    _term_as_exit,
)
from tilefoundry.conformance.selection import (
    DEFAULT_CATALOG,
    ConformanceError,
    GeneratedCases,
    _load_backend_checked,
    load_catalog,
    load_generator,
    select_cases,
    shard_cases,
    validate_capabilities,
)
from tilefoundry.conformance.start_method import (
    choose_start_method,
    worker_cases,
)
from tilefoundry.conformance.terminal import (
    check_results_path,
)
from tilefoundry.conformance.workers import _Dispatch, _Pool, _run_local, _warm_imports

__all__ = [
    "BAD_VERDICTS", "DEFAULT_CATALOG", "ConformanceError", "GeneratedCases", "Manifest",
    "ManifestError", "RunResult", "load_catalog", "load_generator", "run", "select_cases",
    "validate_capabilities",
]


EXECUTORS = ("local", "ray")


def run(backend_spec: str, cases: Sequence[Case] | Catalog | str, *, jobs: int = 1,
        timeout_s: float = 60.0, seed: int = 0, out_jsonl: Path | str,
        resume: bool = False, manifest: Manifest | None = None,
        repro_dir: Path | str | None = None, progress: bool = False,
        catalog: str | None = None, case_globs: Sequence[str] | None = None,
        reduce_s: float = 0.0, deadline: float | None = None, worker_rss_mb: float = 4096,
        stream: Any = None, shard: tuple[int, int] | None = None,
        baseline: Any = None, flake_retries: int = 0,
        budget_s: float | None = None, caps_override: Capabilities | None = None,
        executor: str = "local", ray_address: str | None = None,
        overwrite: bool = True, start_method: str | None = None,
        memory_limit_mb: float = DEFAULT_MEMORY_LIMIT_MB) -> RunResult:
    """Run ``cases`` (a list, a Catalog, a lazy sequence such as ``GeneratedCases``, or a tier
    name of the catalog ``catalog``) against the backend ``backend_spec``; see the module
    docstring. ``deadline`` (a ``time.monotonic()`` value) stops handing out new cases; so
    does ``budget_s`` seconds after the workers are started (fuzz ``--minutes``);
    ``reduce_s`` > 0 shrinks each FAIL with the oracle's reducer into ``<repro>/reduced``.

    ``baseline`` (a ``campaign.Baseline``): its case ids are checked against the catalog before
    any case runs; the result fails only on failures it does not list. ``flake_retries`` K:
    a case whose verdict is FAIL / CRASH / TIMEOUT / ERROR runs again, up to K more times; one
    that passes on a later attempt is **FLAKY** (``attempts`` lists every attempt's verdict,
    the message and details are the first failure's), one that fails every attempt keeps its
    first verdict (with ``attempts``).

    ``executor``: ``"local"`` (forked worker processes, the default) or ``"ray"`` (one Ray
    task per case on the cluster at ``ray_address``, or on a local one of ``jobs`` CPUs:
    ``ray_executor``); ``jobs`` is the number of cases in flight either way, and everything
    above (resume, shard, baseline, flake retries, manifest) is the driver's, the same for
    both.

    ``overwrite=False`` (the command line without ``--overwrite``) refuses a results file that
    already holds something unless ``resume``: a run never replaces results silently.

    ``start_method`` (``--start-method``): how local workers start, ``fork`` / ``spawn`` /
    ``forkserver``; None takes the backend's ``start_method`` attribute, else ``fork``
    (``start_method.py``).

    ``memory_limit_mb``: a case whose worker's resident set grows past it is CRASH "memory
    limit N MB exceeded" and the run goes on in a fresh worker (0: no limit; the local
    executor; ``processes``)."""

    t_start = time.monotonic()
    if jobs < 1:
        raise ConformanceError(f"-j: expected at least 1 worker, got {jobs}")
    if isinstance(flake_retries, bool) or not isinstance(flake_retries, int) or \
            flake_retries < 0:
        raise ConformanceError(f"--flake-retries: expected a non-negative integer, got "
                               f"{flake_retries!r}")
    if not timeout_s > 0:
        raise ConformanceError(f"--timeout: expected a positive number of seconds, got "
                               f"{timeout_s}")
    if executor not in EXECUTORS:
        raise ConformanceError(f"--executor: expected one of {list(EXECUTORS)}, got "
                               f"{executor!r}")
    check_memory_limit(memory_limit_mb, ConformanceError)
    if ray_address is not None and executor != "ray":
        raise ConformanceError("--address is the Ray cluster of --executor ray; add "
                               "--executor ray or drop --address")
    backend, caps = _load_backend_checked(backend_spec, caps_override)
    method = choose_start_method(start_method, backend, backend_spec, executor)
    origin = (catalog, seed, caps) if isinstance(cases, str) else None  # spawn: rebuild it
    del backend  # the runner only validates it; workers load their own
    check_claims(caps, backend_spec, ConformanceError,
                 source="capabilities()" if caps_override is None else "the capability set")
    known_ids: list[str] | None = None
    if isinstance(cases, str):
        cat = load_catalog(seed, catalog=catalog, backend_caps=caps)
        known_ids = [c.id for c in cat]
        cases = select_cases(cat, cases, case_globs)
    elif isinstance(cases, Catalog):
        cases = select_cases(cases, "full", case_globs)
    elif case_globs:
        cases = select_cases(Catalog(cases), "full", case_globs)
    finite = not isinstance(cases, GeneratedCases)
    if baseline is not None:
        if not finite:
            raise ConformanceError("--baseline: fuzz campaigns have no baseline (their cases "
                                   "are drawn, not named)")
        baseline.check_ids(known_ids if known_ids is not None else [c.id for c in cases])
    if shard is not None:
        if not finite:
            raise ConformanceError("--shard: fuzz campaigns are not sharded; give each "
                                   "machine its own --seed instead")
        cases = shard_cases(cases, *shard)
    if finite:
        seen: set[str] = set()
        dup = next((c.id for c in cases if c.id in seen or seen.add(c.id)), None)
        if dup is not None:
            raise ConformanceError(f"case id {dup!r} appears twice; case ids must be unique "
                                   f"(results and --resume are keyed by them)")
    out_jsonl = Path(out_jsonl)
    check_results_path(out_jsonl, ConformanceError)  # terminal.py: not a device or a FIFO
    _check_writable(out_jsonl, "--jsonl")
    repro_dir = Path(repro_dir) if repro_dir is not None else None
    if repro_dir is not None:
        _check_writable(repro_dir, "--repro-dir", directory=True)
    start = (method, worker_cases(cases, method, origin))  # before the results file is touched
    return _run_driver(backend_spec, cases, caps, finite, t_start, out_jsonl, resume, seed,
                       manifest, repro_dir, progress, catalog, reduce_s, deadline,
                       worker_rss_mb, stream, shard, baseline, flake_retries, budget_s, jobs,
                       timeout_s, executor, ray_address, overwrite, start, memory_limit_mb)


#: tests only: called after the cases ran, before the run reads its results back (a test
#: widens that window to show that the lock is still held there)
_BEFORE_READ_BACK: Callable[[], None] | None = None


def _run_driver(backend_spec: str, cases: Sequence[Case], caps: Capabilities, finite: bool,
                t_start: float, out_jsonl: Path, resume: bool, seed: int,
                manifest: Manifest | None, repro_dir: Path | None, progress: bool,
                catalog: str | None, reduce_s: float, deadline: float | None,
                worker_rss_mb: float, stream: Any, shard: tuple[int, int] | None,
                baseline: Any, flake_retries: int, budget_s: float | None, jobs: int,
                timeout_s: float, executor: str, ray_address: str | None,
                overwrite: bool = True, start: tuple = ("fork", None),
                memory_limit_mb: float = 0.0) -> RunResult:
    """``run`` once its arguments are checked: lock the results file, write the header, run
    the cases on the executor (the forked pool, or a Ray session), write the summary."""
    from tilefoundry.conformance.report import Progress, read_jsonl

    f = _lock_results(out_jsonl)  # before anything reads or truncates it
    ray_session = None
    try:
        if not resume and not overwrite:  # under the lock: what it holds is what is refused
            refuse_existing_results(out_jsonl, ConformanceError)
        if executor == "ray":  # after the lock, before the file is read or truncated: a bad
            from tilefoundry.conformance import ray_executor  # address touches nothing

            ray_session = ray_executor.connect(ray_address, jobs)
            ray_session.prepare(backend_spec, cases, caps, seed)
        header, done = _read_resume(out_jsonl, backend_spec, seed) if resume else (None, {})
        if not resume:
            f.truncate(0)
    except BaseException:
        f.close()
        if ray_session is not None:
            ray_session.close()
        raise
    unused = manifest.unused([c.id for c in cases]) if manifest is not None and finite else []
    _warm_imports()

    from tilefoundry import __version__
    from tilefoundry.oracle.compare import CONTRACTS_VERSION
    from tilefoundry.versions import environment

    stream = sys.stderr if stream is None else stream
    prog = Progress(len(cases) if finite else None, stream=stream, enabled=progress)
    # SIGTERM becomes SystemExit before the temporary folder exists, and every statement from
    # its creation on is inside a try that removes it: no window leaves the folder behind (a
    # SIGTERM between mkdtemp and the handler, or during _Dispatch, once did under load)
    old_term = _term_as_exit()
    tmp: Path | None = None
    pool: _Pool | None = None
    try:
        tmp = Path(tempfile.mkdtemp(prefix="tilefoundry-conformance-"))
        if ray_session is None:
            pool = _Pool(backend_spec, cases, caps, seed, min(jobs, max(1, len(cases))), tmp,
                         close_fds=(f.fileno(),), start=start)
            pool.memory_limit_mb = memory_limit_mb
    except BaseException:
        f.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        _restore_term(old_term)
        if ray_session is not None:
            ray_session.close()
        raise
    try:
        d = _Dispatch(cases, done, f, prog, manifest, flake_retries, deadline,
                      {"backend": backend_spec, "catalog": catalog, "seed": seed}, reduce_s,
                      repro_dir)
        if header is None:
            if not resume or out_jsonl.stat().st_size == 0:
                f.write(json.dumps({"type": "run", "format": JSONL_FORMAT,
                                    "backend": backend_spec, "seed": seed,
                                    "tilefoundry": __version__,
                                    "contracts": CONTRACTS_VERSION,
                                    "capabilities": caps.to_json(),
                                    "shard": list(shard) if shard else None,
                                    "versions": environment()}) + "\n")
                f.flush()
        prog.update(None, done=len([c for c in (cases if finite else ()) if c.id in done]))
        if budget_s is not None:  # the clock starts when cases can be handed out
            t = time.monotonic() + budget_s
            d.deadline = t if d.deadline is None else min(d.deadline, t)
        if pool is not None:
            _run_local(d, pool, timeout_s, worker_rss_mb)
        else:
            ray_session.run_cases(d, jobs, timeout_s)
    except BaseException:
        f.close()
        raise
    finally:
        try:
            if pool is not None:
                pool.stop()
            if ray_session is not None:
                ray_session.close()
        finally:
            prog.close()
            shutil.rmtree(tmp, ignore_errors=True)
            _restore_term(old_term)

    try:  # still under the lock: another run cannot truncate the file before it is read back
        if _BEFORE_READ_BACK is not None:
            _BEFORE_READ_BACK()
        header, recs = read_jsonl(out_jsonl, skipped=[])
        records = [recs[c] for c in dict.fromkeys(d.order) if c in recs]
        result = RunResult(backend_spec, seed, records, out_jsonl, header or {},
                           time.monotonic() - t_start, pool.recycled if pool is not None else 0,
                           unused, d.stopped,
                           baseline.apply(records) if baseline is not None else None)
        with contextlib.suppress(OSError):
            # a closing record: what this run (this session of a resumed run) concluded
            f.write(json.dumps({"type": "summary", "cases": len(records),
                                "counts": dict(result.counts()), "exit_code": result.exit_code,
                                "vacuous": result.vacuous, "stopped": d.stopped,
                                "shard": list(shard) if shard else None,
                                "baseline": result.baseline.to_json() if result.baseline
                                else None,
                                "seconds": round(result.wall_s, 3)}) + "\n")
            f.flush()
    finally:
        f.close()  # the lock goes with it
    return result


__all__ += ["ManifestEntry"]
