"""Two conformance runners started together on one JSON-lines file (issue 21.1, "Must show":
10 trials, 0 lost cases, 0 tracebacks).

    python benchmarks/hardening_trials.py [TRIALS] [CASES_GLOB]

Each trial starts two ``tilefoundry conformance run --backend reference`` processes on the same
``--jsonl`` file at once. The results file is locked, so exactly one runs and the other must
exit with a one-line error before any case; the file must then hold every selected case once,
every line valid JSON. Prints, per trial, the exit codes, the refused runner's message and the
counts; then the totals (lost cases, duplicate cases, corrupt lines, tracebacks).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path


def _expected_ids(glob: str) -> set[str]:
    from tilefoundry.conformance.selection import load_catalog, select_cases

    return {c.id for c in select_cases(load_catalog(0), "quick", [glob])}


def trial(d: Path, glob: str, want: set[str]) -> dict:
    j = d / "r.jsonl"
    cmd = [sys.executable, "-m", "tilefoundry", "conformance", "run", "--backend", "reference",
           "--tier", "quick", "--cases", glob, "--jsonl", str(j), "--no-progress", "-j", "1"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=d) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    codes = [p.returncode for p in procs]
    ids, corrupt = [], 0
    for line in j.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            corrupt += 1
            continue
        if isinstance(rec, dict) and "verdict" in rec:
            ids.append(rec["id"])
    tracebacks = sum("Traceback" in o + e for o, e in outs)
    refused = [e.strip() for (o, e), c in zip(outs, codes, strict=True) if c not in (0, 1)]
    return {"codes": codes, "refused": refused, "lost": len(want - set(ids)),
            "duplicates": len(ids) - len(set(ids)), "corrupt": corrupt,
            "tracebacks": tracebacks, "cases": len(set(ids))}


def main(argv: list[str]) -> int:
    trials = int(argv[0]) if argv else 10
    glob = argv[1] if len(argv) > 1 else "spec/binary/*"
    want = _expected_ids(glob)
    tot = {"lost": 0, "duplicates": 0, "corrupt": 0, "tracebacks": 0, "one_refused": 0}
    for t in range(trials):
        with tempfile.TemporaryDirectory() as d:
            r = trial(Path(d), glob, want)
        ok_refusal = len(r["refused"]) == 1 and "\n" not in r["refused"][0]
        tot["one_refused"] += ok_refusal
        for k in ("lost", "duplicates", "corrupt", "tracebacks"):
            tot[k] += r[k]
        print(f"trial {t}: exit codes {r['codes']}, {r['cases']}/{len(want)} cases, lost "
              f"{r['lost']}, duplicates {r['duplicates']}, corrupt lines {r['corrupt']}, "
              f"tracebacks {r['tracebacks']}; refused: {r['refused']}")
    print(f"{trials} trials of two runners on one file ({len(want)} cases each): lost "
          f"{tot['lost']}, duplicates {tot['duplicates']}, corrupt lines {tot['corrupt']}, "
          f"tracebacks {tot['tracebacks']}, trials with exactly one one-line refusal "
          f"{tot['one_refused']}/{trials}")
    bad = tot["lost"] + tot["duplicates"] + tot["corrupt"] + tot["tracebacks"]
    return 0 if bad == 0 and tot["one_refused"] == trials else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
