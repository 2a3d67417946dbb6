"""A conformance tier through the validator, in one process or in worker processes (the CI test
``tests/validate/test_quick_tier.py`` and ``benchmarks/bench_validate.py``).

``validate_tier(bounds, workers=2)`` validates every case of the tier (``validate_case``) and
returns one record per case, in the tier's order: ``{"case": id, "passes": [PassResult.to_json(),
...]}``, or ``{"case": id, "crash": "..."}`` when the validator itself raised (a crash is
reported, never counted as an outcome). With ``workers > 1`` the cases are dealt round-robin
(case ``i`` to worker ``i % workers``) and each worker runs its share in tier order in a fresh
(spawned) process: which cases a process has run before, and so each Z3 query's history, does
not depend on timing, and the records come back in the tier's order (D517).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from tilefoundry.validate.passes import Bounds, validate_case

__all__ = ["validate_tier"]


def _cases(seed: int, tier: str) -> list:
    from tilefoundry.conformance.catalog import build_catalog

    return build_catalog(seed).tier(tier)


def _record(case: Any, bounds: Bounds) -> dict:
    try:
        rep = validate_case(case, bounds)
    except Exception as e:  # a crash of the validator itself: reported, not hidden
        return {"case": case.id, "crash": f"{type(e).__name__}: {e}"}
    return {"case": case.id, "passes": [p.to_json() for p in rep.passes]}


def _share(args: tuple) -> list[tuple[int, dict]]:
    seed, tier, indices, bounds = args
    cases = _cases(seed, tier)
    return [(i, _record(cases[i], bounds)) for i in indices]


def validate_tier(bounds: Bounds, *, indices: Sequence[int] | None = None, workers: int = 1,
                  seed: int = 0, tier: str = "quick",
                  progress: Callable[[int, dict], None] | None = None) -> list[dict]:
    """Validate the tier's cases (``indices`` of ``build_catalog(seed).tier(tier)``, default
    all); one record per case in tier order. ``progress(i, record)`` is called per case as it
    finishes with ``workers == 1``, per case after all have finished otherwise."""
    cases = _cases(seed, tier)
    idx = list(range(len(cases))) if indices is None else list(indices)
    if workers <= 1 or len(idx) < 2:
        out = []
        for i in idx:
            out.append(_record(cases[i], bounds))
            if progress is not None:
                progress(i, out[-1])
        return out
    shares = [(seed, tier, idx[w::workers], bounds) for w in range(workers)]
    # an executor, not a Pool: a worker that dies (a crash inside Z3) raises BrokenProcessPool
    # here instead of leaving the map waiting forever
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
        done = dict(r for share in ex.map(_share, shares) for r in share)
    out = [done[i] for i in idx]
    if progress is not None:
        for i, r in zip(idx, out, strict=True):
            progress(i, r)
    return out
