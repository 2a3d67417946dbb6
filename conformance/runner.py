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
"""

from __future__ import annotations

import collections
import contextlib
import copy
import faulthandler
import functools
import inspect
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from tilefoundry.conformance.backend import (
    Capabilities,
    capability_name_error,
    load_backend,
    reference_check,
    requirements,
    unsupported_reason,
)
from tilefoundry.conformance.cases import TIERS, VERDICTS, Case, Catalog
from tilefoundry.conformance.input_checks import (
    check_claims,
    check_globs,
    refuse_existing_results,
)
from tilefoundry.conformance.manifest import Manifest, ManifestEntry, ManifestError
from tilefoundry.conformance.processes import (
    DEFAULT_MEMORY_LIMIT_MB,
    Reaper,
    check_memory_limit,
    mark_worker,
    over_memory_limit,
)
from tilefoundry.conformance.protocol import compile_for
from tilefoundry.conformance.reduction_orders import check_reduction_claims, judged_module
from tilefoundry.conformance.repro_nonpass import NONPASS_REPRO, write_nonpass_reproducer
from tilefoundry.conformance.start_method import (
    choose_start_method,
    resolve_cases,
    wait_ready,
    worker_cases,
)
from tilefoundry.conformance.terminal import (
    OutputForwarder,
    capture_worker_output,
    check_results_path,
)
from tilefoundry.errors import BackendUnsupportedError, RunTimeCheckError, TilefoundryError

__all__ = [
    "BAD_VERDICTS", "DEFAULT_CATALOG", "ConformanceError", "GeneratedCases", "Manifest",
    "ManifestError", "RunResult", "load_catalog", "load_generator", "run", "select_cases",
    "validate_capabilities",
]

DEFAULT_CATALOG = "tilefoundry.conformance.catalog:build_catalog"
BAD_VERDICTS = ("FAIL", "CRASH", "TIMEOUT", "ERROR", "XPASS")
#: the verdicts --flake-retries runs again (XPASS is the manifest's, applied after the attempts)
_RETRYABLE = ("FAIL", "CRASH", "TIMEOUT", "ERROR")
JSONL_FORMAT = 1
EXECUTORS = ("local", "ray")

# what a worker is doing (a shared int the runner reads when the worker dies or hangs)
_PHASES = ("idle", "building the case", "computing its requirements",
           "evaluating the reference", "backend.compile", "backend.run", "the oracle check",
           "writing the reproducer", "reducing the failure")
_IDLE, _BUILD, _REQ, _REF, _COMPILE, _RUN, _CHECK, _REPRO, _REDUCE = range(len(_PHASES))


class ConformanceError(TilefoundryError):
    """A run that cannot start (bad backend, catalog, paths, resume file)."""


# =============================================================================================
# loading: backend capabilities, catalogs, generators
# =============================================================================================
def validate_capabilities(caps: Any, spec: str) -> Capabilities:
    """``caps`` as a Capabilities with frozen sets, or a ConformanceError naming the problem."""
    from tilefoundry.semantics.formats import DType

    where = f"backend {spec!r}: capabilities()"
    if not isinstance(caps, Capabilities):
        raise ConformanceError(f"{where} returned {type(caps).__name__}, expected a "
                               f"tilefoundry.conformance.backend.Capabilities")

    def strset(v: Any, what: str) -> frozenset:
        if isinstance(v, str) or not isinstance(v, set | frozenset | list | tuple) or \
                not all(isinstance(x, str) for x in v):
            raise ConformanceError(f"{where}: {what} must be a set of strings, got {v!r}")
        return frozenset(v)

    def dtset(v: Any, what: str) -> frozenset:
        if isinstance(v, str) or not isinstance(v, set | frozenset | list | tuple) or \
                not all(isinstance(x, DType | str) for x in v):
            raise ConformanceError(f"{where}: {what} must be a set of DType (or dtype names), "
                                   f"got {v!r}")
        return frozenset(v)

    def mapping(v: Any, what: str) -> dict:
        if not isinstance(v, dict | MappingProxyType) or \
                not all(isinstance(k, str) for k in v):
            raise ConformanceError(f"{where}: {what} must map op names to sets, got {v!r}")
        return dict(v)

    ops = None if caps.ops is None else strset(caps.ops, "ops")
    d = dtset(caps.dtypes, "dtypes")
    pols = strset(caps.policies, "policies")
    ovf = strset(caps.overflow_modes, "overflow modes")
    rnd = strset(caps.rounding_modes, "rounding modes")
    feats = strset(caps.features, "features")
    op_dt = {k: dtset(v, f"op_dtypes[{k!r}]")
             for k, v in mapping(caps.op_dtypes, "op_dtypes").items()}
    op_at = {k: {a: strset(x, f"op_attrs[{k!r}][{a!r}]")
                 for a, x in mapping(v, f"op_attrs[{k!r}]").items()}
             for k, v in mapping(caps.op_attrs, "op_attrs").items()}
    # every unknown name, each with the closest valid name
    pairs = caps.cast_pairs
    if pairs is not None:
        if isinstance(pairs, str) or not isinstance(pairs, set | frozenset | list | tuple) or \
                not all(isinstance(x, tuple | list) and len(x) == 2 and
                        all(isinstance(y, DType | str) for y in x) for x in pairs):
            raise ConformanceError(f"{where}: cast_pairs must be None or a set of (source, "
                                   f"destination) dtype pairs, got {pairs!r}")
        pairs = frozenset(tuple(x) for x in pairs)
    bad_name = capability_name_error(ops, d, pols, ovf, rnd, feats, op_dt, op_at, pairs)
    if bad_name is not None:
        raise ConformanceError(f"{where}: {bad_name}")

    def dts(v: frozenset) -> frozenset:
        return frozenset(x if isinstance(x, DType) else DType(x) for x in v)

    if not isinstance(caps.mesh, bool):
        raise ConformanceError(f"{where}: mesh must be a bool, got {caps.mesh!r}")
    shapes = caps.mesh_shapes
    if shapes is not None:
        if not isinstance(shapes, set | frozenset | list | tuple) or not all(
                isinstance(x, tuple | list) and x and all(
                    isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in x)
                for x in shapes):
            raise ConformanceError(f"{where}: mesh_shapes must be None or a set of tuples of "
                                   f"positive ints (mesh axis extents), got {shapes!r}")
        shapes = frozenset(tuple(x) for x in shapes)
    return Capabilities(ops=ops, dtypes=dts(d), policies=pols, overflow_modes=ovf,
                        mesh=caps.mesh, rounding_modes=rnd, features=feats,
                        op_dtypes=MappingProxyType({k: dts(v) for k, v in op_dt.items()}),
                        op_attrs=MappingProxyType({k: MappingProxyType(v)
                                                   for k, v in op_at.items()}),
                        mesh_shapes=shapes,
                        cast_pairs=None if pairs is None else frozenset(
                            tuple(x if isinstance(x, DType) else DType(x) for x in p)
                            for p in pairs),
                        **check_reduction_claims(caps, where, ConformanceError))


def _load_backend_checked(spec: str, caps_override: Capabilities | None = None
                          ) -> tuple[Any, Capabilities]:
    """The backend and its validated capabilities (``caps_override`` instead of its own: a
    ``--capabilities`` file, or the probe's claim of everything)."""
    try:
        backend = load_backend(spec)
    except TilefoundryError:
        raise
    except Exception as e:  # the factory's own failure
        raise ConformanceError(f"--backend {spec!r}: loading it raised {type(e).__name__}: "
                               f"{e}") from None
    if caps_override is not None:
        return backend, validate_capabilities(caps_override, spec)
    try:
        caps = backend.capabilities()
    except Exception as e:
        raise ConformanceError(f"backend {spec!r}: capabilities() raised "
                               f"{type(e).__name__}: {e}") from None
    return backend, validate_capabilities(caps, spec)


def _resolve(spec: str, what: str) -> Callable:
    """``package.module:function`` or ``path/to/file.py:function`` (tilefoundry.loading)."""
    from tilefoundry.loading import load_object

    try:
        fn = load_object(spec, what)
    except TilefoundryError as e:
        raise ConformanceError(str(e)) from None
    if not callable(fn):
        raise ConformanceError(f"{what} {spec!r}: a {type(fn).__name__}, not a function")
    return fn


def load_catalog(seed: int = 0, *, catalog: str | None = None,
                 backend_caps: Capabilities | None = None) -> Catalog:
    """The case catalog from ``catalog`` (``module:function``; default: the built-in catalog's
    ``build_catalog``), called as ``factory(seed)`` — plus ``backend_caps=`` when it takes it."""
    factory = _resolve(catalog or DEFAULT_CATALOG, "--catalog")
    kwargs = {}
    with contextlib.suppress(TypeError, ValueError):
        if "backend_caps" in inspect.signature(factory).parameters:
            kwargs["backend_caps"] = backend_caps
    try:
        cat = factory(seed, **kwargs)
    except TilefoundryError:
        raise
    except Exception as e:
        raise ConformanceError(f"building the catalog ({catalog or DEFAULT_CATALOG}) raised "
                               f"{type(e).__name__}: {e}") from None
    return cat if isinstance(cat, Catalog) else Catalog(cat)


def select_cases(catalog: Catalog, tier: str = "full",
                 globs: Sequence[str] | None = None) -> list[Case]:
    """The cases of ``tier`` whose id matches one of ``globs`` (all when none), in order."""
    import fnmatch

    if tier not in TIERS:
        raise ConformanceError(f"--tier: expected one of {list(TIERS)}, got {tier!r}")
    cases = catalog.tier(tier)
    if globs:
        def hit(c: Case, g: str) -> bool:
            return c.id == g or fnmatch.fnmatchcase(c.id, g)

        picked = [c for c in cases if any(hit(c, g) for g in globs)]
        unmatched = [g for g in globs if not any(hit(c, g) for c in picked)]
        if unmatched:  # one line naming the closest ids (and the other tier, if it has them)
            other = next(t for t in TIERS if t != tier)
            check_globs(unmatched, [], [c.id for c in catalog], tier, ConformanceError,
                        (other, [c.id for c in catalog.tier(other)]))
        cases = picked
    return cases


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` (1 <= I <= N) as ``(I, N)``; anything else is a one-line error."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ConformanceError(f"--shard: expected I/N with 1 <= I <= N (e.g. 2/8), got "
                               f"{text!r}")
    return int(m.group(1)), int(m.group(2))


def shard_cases(cases: Sequence[Case], i: int, n: int) -> list[Case]:
    """Shard ``i`` of ``n`` (1-based): the cases whose id hashes (sha256) to ``i - 1`` mod
    ``n``. Stable under catalog growth (a case stays in its shard), and the shards partition
    the cases: every case in exactly one."""
    import hashlib

    if not 1 <= i <= n:
        raise ConformanceError(f"--shard: expected I/N with 1 <= I <= N, got {i}/{n}")
    return [c for c in cases
            if int.from_bytes(hashlib.sha256(c.id.encode()).digest()[:8], "big") % n == i - 1]


def _derive(seed: int, *parts: object) -> int:
    return zlib.crc32(":".join(str(p) for p in (seed, *parts)).encode())


class GeneratedCases(Sequence):
    """A lazy sequence of generated-program cases: item ``i`` calls ``generator(s_i)`` with a
    seed derived from ``(seed, i)``; its id is ``fuzz/<seed>/<i>``. Workers inherit the object,
    so any index can be built on demand (``fuzz`` runs until its deadline). ``replay`` (program
    seeds, e.g. the failing seeds of an earlier run) come first, as ``fuzz/replay/<s>``."""

    def __init__(self, generator: Callable[[int], tuple], seed: int = 0, limit: int = 10**9,
                 family: str = "generated", replay: Sequence[int] = ()):
        self.generator, self.seed, self.limit, self.family = generator, seed, limit, family
        self.replay = tuple(dict.fromkeys(int(s) for s in replay))

    def __len__(self) -> int:
        return self.limit + len(self.replay)

    def seed_of(self, i: int) -> int:
        """The program seed item ``i`` builds from."""
        r = len(self.replay)
        return self.replay[i] if i < r else _derive(self.seed, "fuzz", i - r)

    def case_seed(self, case_id: str) -> int | None:
        """The program seed of the case ``case_id`` of this sequence (None: not one of it)."""
        head, _, tail = case_id.rpartition("/")
        if head == "fuzz/replay" and tail.isdigit():
            return int(tail)
        if head == f"fuzz/{self.seed}" and tail.isdigit():
            return _derive(self.seed, "fuzz", int(tail))
        return None

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not 0 <= i < len(self):
            raise IndexError(i)
        r = len(self.replay)
        cid = f"fuzz/replay/{self.replay[i]}" if i < r else f"fuzz/{self.seed}/{i - r:06d}"
        return Case(id=cid, family=self.family,
                    build=functools.partial(self.generator, self.seed_of(i)), tier="full")


def _takes_caps(fn: Callable) -> bool:
    try:
        return "caps" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def load_generator(spec: str | None = None, caps: Capabilities | None = None
                   ) -> Callable[[int], tuple]:
    """A program generator ``f(seed) -> (module, entry, inputs)``: ``spec`` (``module:function``)
    or the oracle's program generator (``tilefoundry.oracle.programs``) when it exists.

    With ``caps`` (the backend's capabilities) the programs are drawn inside them: a generator
    taking a ``caps=`` keyword (the oracle's does) is called with it; any other generator's
    program that needs more than ``caps`` is redrawn from derived seeds (``_CAPS_RETRIES``
    times, deterministically). Capabilities the oracle's generator cannot draw anything inside
    are a ConformanceError here, before any case runs."""
    if caps is not None:
        fn = _resolve(spec, "--generator") if spec else None
        if fn is None:
            with contextlib.suppress(ImportError):
                from tilefoundry.oracle import programs

                fn = getattr(programs, "generate_program", None)
                try:
                    programs.capability_limit(caps)
                except TilefoundryError as e:
                    raise ConformanceError(f"fuzz: {e}") from None
        if fn is not None:
            return functools.partial(_adapt_generated, fn, False, caps=caps)
    if spec:
        return _resolve(spec, "--generator")
    try:
        from tilefoundry.oracle import programs  # type: ignore[attr-defined]
    except ImportError as e:
        raise ConformanceError(
            f"fuzz: no program generator: tilefoundry.oracle.programs is not available ({e}); "
            f"pass --generator package.module:function (a function seed -> (module, entry, "
            f"inputs))") from None
    for name in ("generate_case", "random_case", "generate_program", "random_program"):
        fn = getattr(programs, name, None)
        if callable(fn):
            return functools.partial(_adapt_generated, fn, False)
    fn = getattr(programs, "draw_program", None)
    if callable(fn):
        return functools.partial(_adapt_generated, fn, True)
    raise ConformanceError("fuzz: tilefoundry.oracle.programs has no generator the runner "
                           "knows (generate_case / draw_program); pass --generator")


#: redraws of a program that needs more than the capabilities (generators without ``caps=``)
_CAPS_RETRIES = 4


def _adapt_generated(fn: Callable, wants_source: bool, seed: int, *,
                     caps: Capabilities | None = None, _pass: Capabilities | None = None
                     ) -> tuple:
    if caps is not None:
        # a program outside the capabilities is redrawn from derived seeds (deterministic:
        # the k-th redraw's seed is derived), for generators without ``caps=`` and for what a
        # caps-aware generator cannot limit itself (structural features, op x dtype pairs)
        inner = caps if _takes_caps(fn) else None
        for k in range(_CAPS_RETRIES + 1):
            got = _adapt_generated(fn, wants_source, seed if k == 0 else
                                   _derive(seed, "caps", k), caps=None, _pass=inner)
            if unsupported_reason(caps, requirements(got[0])) is None:
                break
        return got
    return _draw(fn, wants_source, seed, _pass)


def _draw(fn: Callable, wants_source: bool, seed: int, caps: Capabilities | None) -> tuple:
    kw = {"caps": caps} if caps is not None else {}
    if wants_source:
        from tilefoundry.oracle.strategies import RandomSource

        got = fn(RandomSource(seed), **kw)
    else:
        got = fn(seed, **kw)
    if isinstance(got, tuple) and len(got) == 3:
        return got
    module = getattr(got, "module", None)
    entry = getattr(got, "entry", None)
    inputs = getattr(got, "inputs", None)
    if module is None or entry is None or inputs is None:
        raise ConformanceError(f"the program generator returned {type(got).__name__}, not "
                               f"(module, entry, inputs)")
    return module, entry, list(inputs)


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


def _run_one(backend: Any, load_error: str, caps: Capabilities, case: Case, seed: int,
             opts: dict, phase: Any, conn: Any, idx: int) -> dict:
    """One case in a worker (a forked one, or a Ray worker: ``ray_executor``): ``_execute``
    with the case's warnings recorded on it and a harness bug reported on the case. ``phase``
    has a ``value`` (an int of ``_PHASES``); ``conn`` has ``send`` (the "meta" / "partial"
    messages)."""
    caught: list[tuple] = []
    with warnings.catch_warnings():
        # every warning of the case is recorded on the case (with the phase it came from)
        # instead of going, unattributed, to the runner's stderr
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, category, filename, lineno, *a, _c=caught, \
            **k: _c.append((_PHASES[phase.value], category.__name__,
                           os.path.basename(str(filename)), lineno, str(message)))
        try:
            out = _execute(backend, load_error, caps, case, seed, opts, phase, conn, idx)
        except Exception as e:  # a harness bug: report it on the case, keep the worker
            out = {"verdict": "ERROR", "harness": True,
                   "message": f"harness: {type(e).__name__}: {_short(str(e))}"}
    if caught:
        out["warnings"] = _warning_summary(caught)
    phase.value = _IDLE
    return out


def _warning_summary(caught: list[tuple]) -> list[dict]:
    """The distinct warnings of a case (phase, category, file:line, message) with counts."""
    counts = collections.Counter(caught)
    return [{"phase": ph, "category": cat, "where": f"{f}:{ln}", "message": msg[:300],
             "count": n} for (ph, cat, f, ln, msg), n in list(counts.items())[:10]]


def _short(s: str, n: int = 2000) -> str:
    s = " ".join(s.split()) if "\n" in s and len(s) > 200 else s
    return s if len(s) <= n else s[:n] + f"... ({len(s) - n} more characters)"


def _library_file(path: str) -> bool:
    """A frame outside the backend author's code: the standard library, an installed
    third-party package, or this runner."""
    p = os.path.abspath(path)
    return p == os.path.abspath(__file__) or p.startswith(_STDLIB) or \
        any(part in ("site-packages", "dist-packages") for part in p.split(os.sep))


_STDLIB = os.path.abspath(os.path.dirname(os.__file__)) + os.sep


def _where(e: BaseException, origin: Any = None) -> str:
    """Where an exception came from: the innermost frame in ``origin``'s file (the backend's
    class: its own line, issue 22), else the innermost frame outside the standard library
    and installed packages; plus the innermost frame, where the exception was raised, when
    that is elsewhere (``interpreter.py:1515`` alone named no line of the backend)."""
    tb = traceback.extract_tb(e.__traceback__)
    if not tb:
        return ""
    inner = tb[-1]
    own_file = None
    if origin is not None:
        with contextlib.suppress(TypeError, OSError):
            own_file = os.path.abspath(inspect.getsourcefile(type(origin)) or "")
    own = next((f for f in reversed(tb) if own_file and os.path.abspath(f.filename) == own_file),
               None) or next((f for f in reversed(tb) if not _library_file(f.filename)), None)
    if own is None or own is inner:
        return f" ({os.path.basename(inner.filename)}:{inner.lineno})"
    return (f" (at {os.path.basename(own.filename)}:{own.lineno} in {own.name}; raised in "
            f"{os.path.basename(inner.filename)}:{inner.lineno})")


def _text(e: BaseException) -> str:
    """``str(e)``, or a placeholder when the exception's own ``__str__`` raises (a backend's
    unprintable exception is still that backend's error, never the harness's)."""
    try:
        return str(e)
    except BaseException as inner:
        try:
            name = type(inner).__name__
        except BaseException:
            name = "an exception"
        return f"<unprintable {type(e).__name__}: its __str__ raised {name}>"


def _raised(what: str, e: BaseException, origin: Any = None) -> str:
    return _short(f"{what} raised {type(e).__name__}: {_text(e)}{_where(e, origin)}")


def _copy(x: Any) -> Any:
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else copy.deepcopy(x)


def _seed_rngs(seed: int, case_id: str) -> None:
    s = _derive(seed, case_id)
    random.seed(s)
    np.random.seed(s)


def _ops_dtypes(case: Case, req: Any) -> tuple[list[str], list[str]]:
    # kind-level names where the op has kinds, class names otherwise; a case's own op list
    # (the ops it tests) names classes, each expanded to the kinds the program uses, so a
    # report counts ``Binary.add`` once, never beside a bare ``Binary``
    kinds: dict[str, list[str]] = {}
    for o in sorted(req.ops):
        if "." in o:
            kinds.setdefault(o.split(".")[0], []).append(o)
    if case.ops:
        ops = list(dict.fromkeys(k for o in case.ops for k in kinds.get(o, [o])))
    else:
        ops = sorted(o for o in req.ops if "." in o or o not in kinds)
    dts = list(case.dtypes) if case.dtypes else sorted(d.value for d in req.dtypes)
    return ops, dts


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not np.isfinite(v):
        return "inf" if v > 0 else ("-inf" if v < 0 else "nan")
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    return v


def _output_detail(o: Any) -> dict:
    return {"output": o.output, "contract": o.contract, "mismatches": o.mismatches,
            "total": o.total, "worst_index": list(o.worst_index or ()),
            "expected": o.expected, "observed": o.observed, "expected_hex": o.expected_hex,
            "observed_hex": o.observed_hex, "ulp_distance": _jsonable(o.ulp_distance),
            "detail": o.detail,
            "classes": [{"class": c[0], "count": c[1], "index": list(c[2]),
                         "expected_hex": c[3], "observed_hex": c[4], "expected": c[5],
                         "observed": c[6]} for c in getattr(o, "classes", ())],
            **({"diagnosis": o.diagnosis.to_json()} if getattr(o, "diagnosis", None) else {})}


def _diagnosed(module: Any, entry: str, inputs: list, observed: Any, v: Any) -> Any:
    """The FAIL verdict with its conformance-level diagnosis (``oracle/diagnose.py``); a
    diagnosis that cannot be computed leaves the strict verdict as it is."""
    from tilefoundry.oracle.diagnose import diagnose

    if os.environ.get("TILEFOUNDRY_DIAGNOSE", "1") == "0":  # measuring its cost
        return v
    try:
        return diagnose(module, entry, inputs, observed, v)
    except Exception:
        return v


def _tolerance(verdict: Any, observed: Any, ulp: int) -> tuple[bool, float]:
    """Whether every FAIL output of ``verdict`` is a float output within ``ulp`` of the
    reference (see manifest.py), and the worst distance."""
    from tilefoundry.oracle.compare import as_outputs as _as_outputs
    from tilefoundry.oracle.compare import gather_outputs as _gather
    from tilefoundry.oracle.compare import ulp_distance
    from tilefoundry.semantics.formats import dtype_of

    exp = [_gather(x) for x in _as_outputs(verdict.reference.value)]
    obs = [_gather(x) for x in _as_outputs(observed)]
    worst = 0.0
    for ov in verdict.outputs:
        if ov.status != "FAIL":
            continue
        e, o = exp[ov.output], np.asarray(obs[ov.output])
        if not dtype_of(e).is_float:
            return False, float("inf")
        d = ulp_distance(e, o)
        m = float(d.max()) if d.size else 0.0
        worst = max(worst, m)
        if m > ulp:
            return False, worst
    return True, worst


def _expected_mismatch(case: Case, e: BaseException | None) -> str:
    """The harness message for a reference evaluation that does not do what the case says: an
    unexpected raise, or (an expected-error case) values or another error — a catalog error."""
    if case.expect_error is None:
        return _raised("the reference evaluation", e)
    if e is None:
        return (f"the case expects the run-time check {case.expect_error!r} to fail, but the "
                f"reference evaluation returned values (an error of the catalog)")
    got = reference_check(e)
    return _raised(f"the case expects the run-time check {case.expect_error!r} to fail; the "
                   f"reference evaluation", e) + \
        (f" (the run-time check {got!r})" if got else "") + " (an error of the catalog)"


def _reported_check(case: Case, e: RunTimeCheckError, ref_error: BaseException | None
                    ) -> tuple[str, str]:
    """The verdict of a backend that raised ``RunTimeCheckError`` (backend.py's protocol)."""
    named = f"RunTimeCheckError({e.check!r})" if e.check else "RunTimeCheckError"
    if ref_error is None:
        return "FAIL", _short(f"backend.run raised {named}: {_text(e)}; the reference evaluates this "
                              f"case without failing any run-time check")
    if e.check is not None and e.check != case.expect_error:
        return "FAIL", _short(f"backend.run reported the run-time check {e.check!r}, the "
                              f"reference fails {case.expect_error!r} here ({ref_error})")
    return "PASS", _short(f"backend.run raised {named} as the reference does: {_text(e)}")


def _case_program(case: Case) -> str:
    """The program of a case whose worker died (CRASH / TIMEOUT), rebuilt in the runner."""
    try:
        return _program_text(case.build()[0])
    except Exception:
        return ""


def _program_text(module: Any) -> str:
    """The program as text for reports (the DSL source where it reads back exactly, else the
    canonical IR text), at most 20,000 characters."""
    try:
        from tilefoundry.conformance.report import _program_source

        text, src, _ = _program_source(module)
        t = src or text
    except Exception:
        return ""
    return t if len(t) <= 20000 else t[:20000] + f"\n... ({len(t) - 20000} more characters)"


def _execute(backend: Any, load_error: str, caps: Capabilities, case: Case, seed: int,
             opts: dict, phase, conn, idx: int) -> dict:
    from tilefoundry.conformance.fail_rules import fail_message
    from tilefoundry.oracle.compare import check
    from tilefoundry.oracle.enclosure_eval import evaluate_enclosed

    _seed_rngs(seed, case.id)
    t0 = time.perf_counter()
    rec: dict[str, Any] = {}

    module = None

    def done(verdict: str, message: str = "", **extra: Any) -> dict:
        rec.update(verdict=verdict, message=message, seconds=time.perf_counter() - t0, **extra)
        if verdict in BAD_VERDICTS and module is not None:
            rec["program"] = _program_text(module)  # what a report shows with the failure
        return rec

    phase.value = _BUILD
    try:
        module, entry, inputs = case.build()
    except Exception as e:
        return done("ERROR", "harness: " + _raised("building the case", e), harness=True)
    phase.value = _REQ
    try:
        req = requirements(module)
    except Exception as e:
        return done("ERROR", "harness: " + _raised("type-checking the case's program", e),
                    harness=True)
    rec["ops"], rec["dtypes"] = _ops_dtypes(case, req)
    conn.send(("meta", idx, {"ops": rec["ops"], "dtypes": rec["dtypes"]}))  # for a CRASH
    why = unsupported_reason(caps, req)
    if why:
        return done("NOT_SUPPORTED", why)
    if backend is None:
        return done("ERROR", load_error)
    phase.value = _REF
    if case.expect_error is not None:
        rec["expect_error"] = case.expect_error
    ref_error: BaseException | None = None
    try:  # judged: under the backend's declared reduction order (reduction_orders.py)
        judged = judged_module(caps, module)
        if judged is not module:
            rec["judged_order"] = caps.reduction_order
        ev, _ = evaluate_enclosed(judged, entry, inputs)
    except Exception as e:
        if case.expect_error is None or reference_check(e) != case.expect_error:
            return done("ERROR", "harness: " + _expected_mismatch(case, e), harness=True)
        ref_error = e
    else:
        if case.expect_error is not None:
            return done("ERROR", "harness: " + _expected_mismatch(case, None), harness=True)
    phase.value = _COMPILE
    try:
        compiled = compile_for(backend, module, entry, inputs)  # input_specs: protocol.py
    except BackendUnsupportedError as e:
        return done("NOT_SUPPORTED", f"backend.compile: {_text(e)}")
    except Exception as e:
        return done("ERROR", _raised("backend.compile", e, backend))
    phase.value = _RUN
    try:
        observed = backend.run(compiled, [_copy(x) for x in inputs])
    except BackendUnsupportedError as e:
        return done("NOT_SUPPORTED", f"backend.run: {_text(e)}")
    except RunTimeCheckError as e:
        return done(*_reported_check(case, e, ref_error))
    except Exception as e:
        if ref_error is not None:  # D202: an exception other than the protocol's is an ERROR
            return done("ERROR", _raised("backend.run", e, backend) + f"; the reference fails the "
                        f"run-time check {case.expect_error!r} here, which a backend reports "
                        f"by raising tilefoundry.errors.RunTimeCheckError")
        return done("ERROR", _raised("backend.run", e, backend))
    if ref_error is not None:
        return done("FAIL", _short(f"the reference raises the run-time check "
                                   f"{case.expect_error!r} here ({ref_error}); the backend "
                                   f"returned values instead of raising RunTimeCheckError"))
    phase.value = _CHECK
    try:
        v = check(judged, entry, inputs, observed, reference=ev)
    except Exception as e:  # malformed output that slipped through the oracle's validation
        return done("ERROR", _raised("judging the backend's output", e))
    if v.status == "ERROR":
        return done("ERROR", "malformed output: " + v.message)
    rec["elements"] = sum(o.total for o in v.outputs)
    rec["unjudged"] = sum(o.unjudged for o in v.outputs)
    rec["methods"] = sorted({o.contract.split("(")[0].split(" ")[0] for o in v.outputs})
    if v.status == "PASS":
        return done("PASS")
    if v.status == "UNJUDGED":  # nothing rejected, but not everything could be judged
        unj = [o for o in v.outputs if o.status == "UNJUDGED"]
        return done("UNJUDGED", f"{rec['unjudged']} of {rec['elements']} element(s) unjudged "
                                f"in {len(unj)} output(s): {unj[0].line()}")
    v = _diagnosed(judged, entry, inputs, observed, v)
    fails = [o for o in v.outputs if o.status == "FAIL"]
    if v.diagnosis is not None:
        rec["diagnosis"] = v.diagnosis.to_json()
    admit = opts.get("admit")
    if admit:
        from tilefoundry.oracle.diagnose import judge_under

        try:
            under = judge_under(judged, entry, inputs, observed, v, admit)
        except Exception:
            under = False
        if under:
            return done("ADMITTED", f"admitted under the declared {admit.spelled()}; strictly: "
                                    + fails[0].line(), admitted=admit.spelled(),
                        outputs=[_output_detail(o) for o in fails])
    tol = opts.get("tolerance")
    if tol is not None:
        ok, worst = _tolerance(v, observed, tol[0])
        if ok:
            return done("PASS", f"accepted by the manifest's tolerance override (<= {tol[0]} "
                                f"ulp; worst {worst:g} ulp): {tol[1]}", tolerance=tol[0])
    why = f"; {v.diagnosis.line()}" if v.diagnosis is not None else ""
    if "judged_order" in rec:
        why += f" (judged as the declared reduction_order {rec['judged_order']!r})"
    done("FAIL", fail_message(v, fails) + why,
         outputs=[_output_detail(o) for o in fails])
    repro = opts.get("repro")
    if repro:
        phase.value = _REPRO
        try:
            _write_repro(Path(repro), case, seed, opts, module, entry, inputs, v, observed)
            rec["repro"] = Path(repro).name
        except Exception as e:
            rec["repro_error"] = _raised("writing the reproducer", e)
        if opts.get("reduce_s", 0) > 0 and "repro" in rec:
            conn.send(("partial", idx, dict(rec), float(opts["reduce_s"]) + 10.0))
            phase.value = _REDUCE
            _reduce_into(Path(repro) / "reduced", backend, case, seed, opts, module, entry,
                         inputs)
    return rec


def _write_repro(path: Path, case: Case, seed: int, opts: dict, module: Any, entry: str,
                 inputs: list, verdict: Any, observed: Any) -> None:
    from tilefoundry.conformance.report import write_reproducer

    write_reproducer(path, case_id=case.id, family=case.family, seed=seed,
                     backend=opts["backend"], catalog=opts.get("catalog"), module=module,
                     entry=entry, inputs=inputs, verdict=verdict, observed=observed)


def _reduce_into(path: Path, backend: Any, case: Case, seed: int, opts: dict, module: Any,
                 entry: str, inputs: list) -> None:
    """Shrink the failing program with the oracle's reducer (the backend re-run on each
    candidate) and write a second reproducer for the result."""
    from tilefoundry.oracle.compare import check
    from tilefoundry.oracle.reduce import reduce_failure

    def still_fails(m: Any, e: str, ins: list) -> bool:
        try:
            out = backend.run(compile_for(backend, m, e, ins), [_copy(x) for x in ins])
            return check(m, e, ins, out).status == "FAIL"
        except Exception:
            return False

    try:
        r = reduce_failure(module, entry, inputs, still_fails, budget_s=float(opts["reduce_s"]))
        ins = list(r.inputs)
        out = backend.run(compile_for(backend, r.module, r.entry, ins), [_copy(x) for x in ins])
        v = check(r.module, r.entry, ins, out)
        if v.status != "FAIL":
            return
        _write_repro(path, case, seed, opts, r.module, r.entry, ins, v, out)
        (path / "reduction.txt").write_text(
            f"reduced in {r.seconds:.1f} s with {r.checks} checks; {r.op_count} op(s) left\n"
            + "".join(f"  {s}\n" for s in r.steps))
    except Exception as e:
        path.mkdir(parents=True, exist_ok=True)
        (path / "reduction.txt").write_text(_raised("the reducer", e) + "\n")


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


def _warm_imports() -> None:
    """Import what every case needs before forking, so workers start warm."""
    import tilefoundry.oracle.compare
    import tilefoundry.semantics.evaluator.core
    import tilefoundry.semantics.typeinfer.functions  # noqa: F401
    from tilefoundry.semantics.evaluator import families  # noqa: F401


def _safe_name(case_id: str, taken: set[str]) -> str:
    s = re.sub(r"[^A-Za-z0-9._+-]+", "_", case_id).strip("._") or "case"
    if len(s) > 100 or s != case_id:
        s = f"{s[:90]}-{zlib.crc32(case_id.encode()):08x}"
    while s in taken:
        s += "_"
    taken.add(s)
    return s


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
    tmp = Path(tempfile.mkdtemp(prefix="tilefoundry-conformance-"))
    old_term = _term_as_exit()
    pool: _Pool | None = None
    try:
        if ray_session is None:
            pool = _Pool(backend_spec, cases, caps, seed, min(jobs, max(1, len(cases))), tmp,
                         close_fds=(f.fileno(),), start=start)
            pool.memory_limit_mb = memory_limit_mb
    except BaseException:
        f.close()
        shutil.rmtree(tmp, ignore_errors=True)
        _restore_term(old_term)
        if ray_session is not None:
            ray_session.close()
        raise
    d = _Dispatch(cases, done, f, prog, manifest, flake_retries, deadline,
                  {"backend": backend_spec, "catalog": catalog, "seed": seed}, reduce_s,
                  repro_dir)
    try:
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
