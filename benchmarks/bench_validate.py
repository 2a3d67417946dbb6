"""Translation validation over the quick tier: per pass, programs valid / invalid / failed to
prove / unsupported, and the time (docs/validate.md).

    .venv/bin/python benchmarks/bench_validate.py [--limit N] [--json out.json]

Each quick-tier case is built through the catalog (``build_catalog().tier("quick")``); its
program is validated at the case's own input shapes when they lie inside the bounds, else at the
bounded shapes of its signature (every DimVar at min(4, envelope)) when it has DimVars, else
every pass is "unsupported" with the reason (the shape bound).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

from tilefoundry.validate.passes import VALIDATED_PASSES, Bounds, validate_case


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--every", type=int, default=1, help="take every N-th case")
    ap.add_argument("--json", default=None)
    ap.add_argument("--jsonl", default=None, help="append one line per case as it finishes")
    ap.add_argument("--timeout-ms", type=int, default=10_000)
    ap.add_argument("--max-elems", type=int, default=16)
    args = ap.parse_args(argv)
    from tilefoundry.conformance.catalog import build_catalog

    cases = build_catalog(0).tier("quick")[::args.every][:args.limit]
    counts = {p: collections.Counter() for p in VALIDATED_PASSES}
    secs = collections.Counter()
    rows = []
    t_all = time.perf_counter()
    for i, c in enumerate(cases):
        if i % 100 == 0:
            print(f"[{i}/{len(cases)}] {time.perf_counter() - t_all:.0f} s", flush=True)
        try:
            rep = validate_case(c, Bounds(max_elems=args.max_elems, timeout_ms=args.timeout_ms))
        except Exception as e:  # a crash of the validator itself: counted, shown, not hidden
            print(f"{c.id}: VALIDATOR CRASH {type(e).__name__}: {e}", flush=True)
            counts["typeinfer"]["crash"] += 1
            continue
        for p in rep.passes:
            counts[p.name][p.outcome.status] += 1
            secs[p.name] += p.outcome.seconds
            if p.outcome.status in ("invalid", "failed to prove"):
                print(f"{c.id} {p.name}: {p.outcome.status}: {p.outcome.reason}", flush=True)
        rows.append({"case": c.id, "passes": [p.to_json() for p in rep.passes]})
        if args.jsonl:
            with open(args.jsonl, "a") as f:
                f.write(json.dumps(rows[-1]) + "\n")
    total = time.perf_counter() - t_all
    print(f"{len(cases)} quick-tier cases in {total:.1f} s")
    print(f"{'pass':<13} {'valid':>6} {'invalid':>8} {'failed':>7} {'unsup':>6} {'seconds':>8}")
    for p in VALIDATED_PASSES:
        k = counts[p]
        print(f"{p:<13} {k['valid']:>6} {k['invalid']:>8} {k['failed to prove']:>7} "
              f"{k['unsupported']:>6} {secs[p]:>8.1f}")
    reasons = collections.Counter(
        pj["reason"].split(":")[0][:70] for r in rows for pj in r["passes"]
        if pj["status"] == "unsupported" and pj["pass"] in ("fuse",))
    print("fuse unsupported, top reasons:")
    for why, n in reasons.most_common(12):
        print(f"  {n:5}  {why}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seconds": total, "cases": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
