"""The generated-program cases (``program/seed<S>/<i>``) (split from ``conformance/catalog.py``,
D383).

Hypothesis-drawn programs from ``tilefoundry.oracle.programs``, when it is importable.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.conformance.catalog.build import GENERATED_PER_TIER, Acc, Built
from tilefoundry.semantics.ops import (
    ALL_OPS,
    Local,
)


# =============================================================================================
# generated programs
# =============================================================================================
def _program_generator() -> Callable[..., Built] | None:
    """The hook to the program generator (``tilefoundry.oracle.programs.generate_program``):
    ``gen(seed, sharded=...)`` returns ``(module, entry, inputs)`` with every input a global
    numpy array (a generated ``Sharded`` input is gathered with ``mesh.unshard``; the generator
    keeps sharded values integral, so the logical value is exact). ``None`` when the generator is
    not importable — the catalog then simply has no ``program/`` cases."""
    try:
        from tilefoundry.oracle.programs import generate_program
    except Exception:  # the generator is optional for the catalog
        return None

    def gen(seed: int, sharded: bool = False) -> Built:
        from tilefoundry.semantics.evaluator.mesh import Sharded, unshard

        kw: dict = {}
        if sharded:
            # Local's device-varying result cannot be an output the oracle compares; Local is
            # covered by the spec / sharded cases
            kw["ops"] = tuple(op for op in ALL_OPS if op is not Local)
        p = generate_program(seed, sharded=sharded, **kw)
        ins = [np.ascontiguousarray(unshard(x)) if isinstance(x, Sharded) else x
               for x in p.inputs]
        return p.module, p.entry, ins

    return gen


def _program_cases(acc: Acc, seed: int) -> None:
    gen = _program_generator()
    if gen is None:
        return
    for sharded in (False, True):
        n_full = GENERATED_PER_TIER["full"] // (4 if sharded else 1)
        n_quick = GENERATED_PER_TIER["quick"] // (4 if sharded else 1)
        for i in range(n_full):
            sub = seed * 1_000_003 + i  # one deterministic generator seed per program

            def build(s=sub, sh=sharded) -> Built:
                return gen(s, sharded=sh)

            cid = f"program/seed{seed}/sharded/{i}" if sharded else f"program/seed{seed}/{i}"
            acc.add(cid, "sharding" if sharded else "program", build,
                    spec=f"Generated program (tilefoundry.oracle.programs.generate_program"
                         f"({sub}{', sharded=True' if sharded else ''}))",
                    tier="quick" if i < n_quick else "full")
