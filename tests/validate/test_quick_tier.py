"""CI: translation validation of a deterministic subset of the quick tier's programs.

Budget: ~60 s on 2 cores. The subset is every 40th quick-tier case (catalog seed 0) with a
2-second solver limit per output element; ``benchmarks/bench_validate.py`` measures the whole
tier (docs/validate.md gives the figures). Asserted: no pass of the landed compiler is
``invalid`` on any of them, every ``unsupported`` / ``failed to prove`` names its reason, and
the subset really proves something (an all-unsupported run would pass vacuously)."""

from __future__ import annotations

import collections

from tilefoundry.conformance.catalog import build_catalog
from tilefoundry.validate.passes import VALIDATED_PASSES, Bounds, validate_case

EVERY = 40


def test_quick_tier_subset_has_no_invalid_pass():
    cases = build_catalog(0).tier("quick")[::EVERY]
    counts: dict[str, collections.Counter] = {p: collections.Counter() for p in VALIDATED_PASSES}
    invalid = []
    for c in cases:
        rep = validate_case(c, Bounds(timeout_ms=2_000))
        for p in rep.passes:
            counts[p.name][p.outcome.status] += 1
            if p.outcome.status == "invalid":
                invalid.append(f"{c.id} {p.name}:\n{p.outcome.counterexample.text()}")
            if p.outcome.status in ("unsupported", "failed to prove"):
                assert p.outcome.reason, (c.id, p.name)
    print({p: dict(k) for p, k in counts.items()})
    assert not invalid, "\n".join(invalid)
    for p in ("canonicalize", "lower", "fuse"):
        assert counts[p]["valid"] >= 3, (p, dict(counts[p]))
