"""Translation validation of the quick-tier cases whose program holds a ``Sort``, ``TopK``,
``CustomReduce`` with the Top-K merge reducer or ``Mma`` (D514-D516): per op and pass, the
outcome counts and seconds (docs/validate.md). The whole tier: ``bench_validate.py``.

    .venv/bin/python benchmarks/bench_validate_ordering.py [--json out.json] [--timeout-ms N]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time

from tilefoundry.validate.passes import VALIDATED_PASSES, Bounds, validate_case

#: the op's spelling in the textual IR
PATTERNS = {"Sort": r"= Sort\(", "TopK": r"= TopK\(", "TopKMerge": r"TopKMerge",
            "Mma": r"= Mma\("}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--timeout-ms", type=int, default=2_000)
    args = ap.parse_args(argv)
    from tilefoundry.conformance.catalog import build_catalog
    from tilefoundry.semantics.printer import to_text

    rows = []
    t_all = time.perf_counter()
    for c in build_catalog(0).tier("quick"):
        try:
            module, _entry, _inputs = c.build()
            text = to_text(module)
        except Exception:  # a case that does not build is no program to validate here
            continue
        ops = [k for k, pat in PATTERNS.items() if re.search(pat, text)]
        if not ops:
            continue
        rep = validate_case(c, Bounds(timeout_ms=args.timeout_ms))
        rows.append({"case": c.id, "ops": ops, "passes": {
            p.name: [p.outcome.status, round(p.outcome.seconds, 3), p.outcome.reason]
            for p in rep.passes}})
        if any(p.outcome.status in ("invalid", "failed to prove") for p in rep.passes):
            bad = {p.name: p.outcome.status for p in rep.passes
                   if p.outcome.status in ("invalid", "failed to prove")}
            print(f"{c.id} {ops}: {bad}", flush=True)
    print(f"{len(rows)} cases in {time.perf_counter() - t_all:.1f} s")
    for op in (*PATTERNS, None):
        sel = [r for r in rows if op is None or op in r["ops"]]
        print(f"{op or 'all'}: {len(sel)} cases")
        print(f"  {'pass':<13} {'valid':>6} {'invalid':>8} {'failed':>7} {'unsup':>6} "
              f"{'seconds':>8}")
        for p in VALIDATED_PASSES[1:]:
            k = collections.Counter(r["passes"][p][0] for r in sel)
            secs = sum(r["passes"][p][1] for r in sel)
            print(f"  {p:<13} {k['valid']:>6} {k['invalid']:>8} {k['failed to prove']:>7} "
                  f"{k['unsupported']:>6} {secs:>8.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
