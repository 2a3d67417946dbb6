"""``tilefoundry selfcheck``: the numerics sweeps with a summary (the quick start's main job)."""

from __future__ import annotations

import time
from collections import Counter

from tilefoundry.conformance import numerics_sweep as sw


def summarize(rows: list[sw.SweepRow]) -> tuple[str, int]:
    """A summary of sweep rows and the number of problems they contain: mismatches of the
    reference with the exact model, and peer disagreements the exact model blames on the
    reference. A peer that is wrong is a finding (counted, printed), never a problem."""
    compared = sum(r.n for r in rows if r.exact_mismatches >= 0)
    mism = sum(max(r.exact_mismatches, 0) for r in rows)
    dev: Counter[str] = Counter()
    ours_wrong = 0
    for r in rows:
        for p, counts in r.peer.items():
            for k, v in counts.items():
                if k == "ours_wrong":
                    ours_wrong += v
                else:
                    dev[f"{p}:{k}"] += v
    lines = [f"  results compared with the exact model: {compared:,}; mismatches: {mism}"]
    if dev or ours_wrong:
        lines.append(f"  peer disagreements the exact model blames on the reference: "
                     f"{ours_wrong}")
        for k, v in sorted(dev.items()):
            if k.endswith(":undocumented"):
                lines.append(f"    peer wrong, undocumented (a finding) {k}: {v:,} inputs")
            else:
                lines.append(f"    documented deviation {k}: {v:,} inputs")
    return "\n".join(lines), mism + ours_wrong


def run_selfcheck(seed: int = 0, f32_samples: int = 200_000, workers: int = 2) -> int:
    from tilefoundry.versions import format_environment

    problems = 0
    t0 = time.perf_counter()
    print("== Versions (peer findings are keyed by them)")
    print(format_environment())
    sections = [
        ("Exhaustive casts (every f16/bf16/fp8/e8m0/i8/u8/bool pattern, every destination and "
         "mode)", lambda: sw.cast_sweep()),
        ("Exhaustive fp8 arithmetic (every pair through add/sub/mul/div, every pattern through "
         "neg/abs/sqrt; widen-op-round)", lambda: sw.arithmetic_sweep()),
        (f"f32 sources ({f32_samples:,} per conversion: structured ties/carries/boundaries, "
         f"then random, seed {seed})",
         lambda: sw.f32_sweep(f32_samples, seed=seed, workers=workers)),
    ]
    for title, run in sections:
        t = time.perf_counter()
        rows = run()
        text, bad = summarize(rows)
        problems += bad
        print(f"== {title}: {len(rows)} sweeps in {time.perf_counter() - t:.1f} s")
        print(text)
        if bad:
            print(sw.format_rows([r for r in rows if r.exact_mismatches > 0
                                  or any(c.get("ours_wrong") for c in r.peer.values())]))
    from tilefoundry.conformance.peers import FINDINGS

    print("== Peer divergences (findings about the peers, never failures), by version and code "
          "path")
    print(FINDINGS.report())
    verdict = "PASS" if problems == 0 else f"FAIL ({problems} problems)"
    print(f"selfcheck: {verdict} in {time.perf_counter() - t0:.1f} s")
    return 0 if problems == 0 else 1
