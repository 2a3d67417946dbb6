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

from tilefoundry.validate.passes import VALIDATED_PASSES, Bounds
from tilefoundry.validate.tier import validate_tier


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--every", type=int, default=1, help="take every N-th case")
    ap.add_argument("--json", default=None)
    ap.add_argument("--jsonl", default=None, help="append one line per case as it finishes")
    ap.add_argument("--timeout-ms", type=int, default=10_000)
    ap.add_argument("--max-elems", type=int, default=16)
    ap.add_argument("--max-elems-lanewise", type=int, default=64)
    ap.add_argument("--no-narrow", action="store_true",
                    help="skip the narrowed first try of each query (as the CI test, D530)")
    ap.add_argument("-j", "--jobs", type=int, default=1,
                    help="worker processes (cases dealt round-robin; results in tier order)")
    args = ap.parse_args(argv)
    from tilefoundry.conformance.catalog import build_catalog

    n_all = len(build_catalog(0).tier("quick"))
    indices = list(range(n_all))[::args.every][:args.limit]
    counts = {p: collections.Counter() for p in VALIDATED_PASSES}
    secs = collections.Counter()
    rows = []
    t_all = time.perf_counter()
    bounds = Bounds(max_elems=args.max_elems, timeout_ms=args.timeout_ms,
                    max_elems_lanewise=args.max_elems_lanewise, narrow=not args.no_narrow)

    def done(i: int, row: dict) -> None:
        if len(rows) % 100 == 0:
            print(f"[{len(rows)}/{len(indices)}] {time.perf_counter() - t_all:.0f} s", flush=True)
        rows.append(row)
        if "crash" in row:  # a crash of the validator itself: counted, shown, not hidden
            print(f"{row['case']}: VALIDATOR CRASH {row['crash']}", flush=True)
            counts["typeinfer"]["crash"] += 1
            return
        for p in row["passes"]:
            counts[p["pass"]][p["status"]] += 1
            secs[p["pass"]] += p["seconds"]
            if p["status"] in ("invalid", "failed to prove"):
                print(f"{row['case']} {p['pass']}: {p['status']}: {p['reason']}", flush=True)
        if args.jsonl:
            with open(args.jsonl, "a") as f:
                f.write(json.dumps(row) + "\n")

    validate_tier(bounds, indices=indices, workers=args.jobs, progress=done)
    total = time.perf_counter() - t_all
    print(f"{len(indices)} quick-tier cases in {total:.1f} s ({args.jobs} worker(s); per-pass "
          f"seconds are summed over the workers)")
    print(f"{'pass':<13} {'valid':>6} {'invalid':>8} {'failed':>7} {'unsup':>6} {'seconds':>8}")
    for p in VALIDATED_PASSES:
        k = counts[p]
        print(f"{p:<13} {k['valid']:>6} {k['invalid']:>8} {k['failed to prove']:>7} "
              f"{k['unsupported']:>6} {secs[p]:>8.1f}")
    reasons = collections.Counter(
        pj["reason"].split(":")[0][:70] for r in rows for pj in r.get("passes", ())
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
