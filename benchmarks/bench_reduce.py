"""The reducer on generated failing cases (issue 16, deliverable 6; not a test).

    .venv/bin/python benchmarks/bench_reduce.py [--n 100] [--seed 0] [--max-ops 8]
                                                [--sharded-every 2] [--budget 60]

Walks seeds ``--seed, --seed + 1, ...``: each seed gives a program (``generate_program``; one in
``--sharded-every`` is sharded, 0 for none) and a planted buggy backend for it — the reference
evaluator with one op's results perturbed (``tests/oracle/test_reduce.py: planted_candidate``:
sign bit flipped, all zeros, or the lowest bit flipped; the op order is rotated by the seed).
Seeds whose program no planted candidate FAILs are skipped; the first ``--n`` failing cases are
reduced with ``reduce_failure`` under the predicate "the candidate still FAILs".

Prints: crashes (the reducer raised; must be 0, each printed with its innermost reducer frame),
property violations of the reductions (still FAILs under the same bug, no more ops, no
unreachable function, no pass-through output, every remaining output FAILs, fixpoint reached),
the original and reduced sizes in ops (median / max, ``reduce.program_ops``: Calls in the entry
and every reachable function, loop bodies included), reduction time (median / max / total) and
the wall time of the whole run. Deterministic: the same options give the same cases.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
import traceback
from pathlib import Path

from tilefoundry.oracle.compare import FAIL, check_candidate
from tilefoundry.oracle.programs import generate_program
from tilefoundry.oracle.reduce import (
    pass_through_outputs,
    program_ops,
    reachable_functions,
    reduce_failure,
)

_TESTS = Path(__file__).resolve().parents[1] / "tests" / "oracle" / "test_reduce.py"


def _planted():
    """The planted backend of the reducer's tests (one definition for test and benchmark)."""
    spec = importlib.util.spec_from_file_location("_reduce_planted", _TESTS)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def _violations(module, entry, inputs, cand, r) -> list[str]:
    out = []
    v = check_candidate(r.module, r.entry, list(r.inputs), cand)
    if v.status != FAIL:
        out.append(f"reduced program is {v.status}, not FAIL")
    if r.op_count > program_ops(module, entry):
        out.append(f"grew: {program_ops(module, entry)} -> {r.op_count} ops")
    live = set(reachable_functions(r.module, r.entry))
    dead = [f.name for f in r.module.functions if f.name not in live]
    if dead:
        out.append(f"unreachable functions {dead}")
    if pass_through_outputs(r.module, r.entry):
        out.append(f"pass-through outputs {pass_through_outputs(r.module, r.entry)}")
    if v.status == FAIL and any(o.status != FAIL for o in v.outputs):
        out.append("an output that does not FAIL")
    if not r.complete:
        out.append("budget ran out before the fixpoint")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-ops", type=int, default=8)
    ap.add_argument("--sharded-every", type=int, default=2)
    ap.add_argument("--budget", type=float, default=60.0, help="reducer budget per case (s)")
    args = ap.parse_args(argv)
    planted = _planted()

    t0 = time.monotonic()
    cases = skipped = 0
    crashes: list[str] = []
    oracle_errors: list[str] = []
    bad: list[str] = []
    orig, red, secs, rejected = [], [], [], 0
    seed = args.seed
    while cases < args.n:
        s, seed = seed, seed + 1
        sharded = bool(args.sharded_every) and s % args.sharded_every == args.sharded_every - 1
        try:  # generating and planting are not the reducer: their errors skip the seed
            g = generate_program(s, max_ops=args.max_ops, sharded=sharded)
            inputs = list(g.inputs)
            cand = planted.failing_candidate(g.module, g.entry, inputs, rotate=s)
        except Exception as e:
            oracle_errors.append(f"seed {s}: {type(e).__name__}: {e}")
            continue
        if cand is None:
            skipped += 1
            continue
        cases += 1
        n0 = program_ops(g.module, g.entry)
        try:
            r = reduce_failure(g.module, g.entry, inputs, planted.fails_under(cand),
                               budget_s=args.budget)
        except Exception as e:  # the count this benchmark exists for
            frames = [f for f in traceback.extract_tb(e.__traceback__)
                      if Path(f.filename).name == "reduce.py"]
            where = f"reduce.py:{frames[-1].lineno}" if frames else "?"
            crashes.append(f"seed {s} (sharded={sharded}): {type(e).__name__} at {where}: {e}")
            continue
        orig.append(n0)
        red.append(r.op_count)
        secs.append(r.seconds)
        rejected += bool(r.rejected)
        bad += [f"seed {s} (sharded={sharded}): {w}"
                for w in _violations(g.module, g.entry, inputs, cand, r)]
    wall = time.monotonic() - t0

    print(f"bench_reduce: {cases} failing cases from seeds {args.seed}..{seed - 1} "
          f"({skipped} seeds skipped: no planted candidate FAILs), max_ops={args.max_ops}, "
          f"sharded every {args.sharded_every}, budget {args.budget:g} s")
    if oracle_errors:
        print(f"seeds skipped on an error outside the reducer (generator / oracle): "
              f"{len(oracle_errors)}")
        for o in oracle_errors:
            print(f"  {o}")
    print(f"crashes: {len(crashes)}")
    for c in crashes:
        print(f"  {c}")
    print(f"property violations: {len(bad)}")
    for b in bad:
        print(f"  {b}")
    print(f"cases with candidates rejected by a non-project exception: {rejected}")
    if orig:
        print(f"original size (ops): median {statistics.median(orig):g}, max {max(orig)}")
        print(f"reduced size (ops):  median {statistics.median(red):g}, max {max(red)} "
              f"(1 op: {sum(x == 1 for x in red)}, 0 ops: {sum(x == 0 for x in red)})")
        print(f"reduction time (s):  median {statistics.median(secs):.3f}, "
              f"max {max(secs):.3f}, total {sum(secs):.1f}")
    print(f"total wall time: {wall:.1f} s (generation, planting and checks included)")
    return 1 if crashes or bad else 0


if __name__ == "__main__":
    sys.exit(main())
