"""What a conformance run judges (split from ``runner.py``, D380): the backend, loaded and its
``capabilities()`` validated; the catalog, loaded by its spec, its cases selected by tier and
sharded; and generated (fuzz) cases drawn from a generator. Every refusal is a one-line
``ConformanceError`` before any case runs.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import zlib
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

from tilefoundry.conformance.backend import (
    Capabilities,
    capability_name_error,
    load_backend,
    requirements,
    unsupported_reason,
)
from tilefoundry.conformance.cases import TIERS, Case, Catalog
from tilefoundry.conformance.input_checks import (
    check_globs,
)
from tilefoundry.conformance.reduction_orders import check_reduction_claims
from tilefoundry.errors import TilefoundryError

DEFAULT_CATALOG = "tilefoundry.conformance.catalog:build_catalog"


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
