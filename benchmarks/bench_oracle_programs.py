"""Generated-program throughput of the oracle's program generator and the reference evaluator
(not a test).

    .venv/bin/python benchmarks/bench_oracle_programs.py [--n 1000] [--seed 0] [--max-ops 8]
                                                         [--sharded-every 5] [--repeat 3]

Generates ``--n`` small programs from consecutive seeds ``--seed, --seed + 1, ...`` with
``oracle.programs.generate_program`` (the seeded path: same seeds, same programs; one program in
``--sharded-every`` is sharded, 0 for none) and times, separately:

* **generation**: building the module and drawing its inputs;
* **type inference**: ``infer_module`` from scratch (what the volume test pays per program);
* **reference evaluation**: ``evaluate(module, entry, inputs)`` — which runs its own type
  inference first, as every caller of the reference does — reported as programs/s (issue 7
  target: >= 100 programs/s on this machine) and reachable ops/s;
* **judging with enclosures**: the oracle's enclosing evaluation plus ``check`` of the
  reference's outputs, as the runner judges a case, reported as a ratio to the reference
  evaluation alone (issue 15 target: <= 3x).

Times are medians of ``--repeat`` runs over the same programs (the machine is shared), plus the
process CPU time of the median run. Every program must evaluate (an error is reported and
counted; none is expected).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tilefoundry.oracle.programs import generate_program
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.typeinfer import infer_module


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """(median wall seconds, CPU seconds of that run, last result)."""
    runs = []
    out = None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        runs.append((time.perf_counter() - w, time.process_time() - c))
    runs.sort()
    wall, cpu = runs[len(runs) // 2]
    return wall, cpu, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-ops", type=int, default=8)
    ap.add_argument("--sharded-every", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    every = args.sharded_every

    def options(s: int) -> dict:
        return {"max_ops": args.max_ops,
                "sharded": bool(every) and s % every == every - 1}

    def generate():
        progs = [generate_program(s, **options(s))
                 for s in range(args.seed, args.seed + args.n)]
        for p in progs:
            p.inputs  # noqa: B018 - inputs are drawn lazily; generation includes them
        return progs

    g_wall, g_cpu, progs = timed(generate, args.repeat)
    n_ops = sum(sum(p.op_counts.values()) for p in progs)
    n_sharded = sum("sharded" in p.features for p in progs)

    # inference stamps the nodes it types (evaluate infers first), so every timed run works on
    # freshly generated, identical copies of the programs (built outside the timing)
    batches = iter([generate() for _ in range(args.repeat)])
    i_wall, i_cpu, _ = timed(lambda: [infer_module(p.module) for p in next(batches)],
                             args.repeat)
    errors: list = []

    def eval_all(ps: list) -> None:
        errors.clear()
        for p in ps:
            try:
                with np.errstate(all="ignore"):
                    evaluate(p.module, p.entry, list(p.inputs))
            except Exception as e:  # reported below; none is expected
                errors.append((p.seed, f"{type(e).__name__}: {e}"))

    batches = iter([generate() for _ in range(args.repeat)])
    e_wall, e_cpu, _ = timed(lambda: eval_all(next(batches)), args.repeat)

    # the oracle judging the reference's own outputs: the enclosing evaluation (the reference
    # with every value's enclosure beside it) plus the comparison (issue 15: <= 3x the
    # reference evaluation alone)
    from tilefoundry.oracle.compare import check
    from tilefoundry.oracle.enclosure_eval import evaluate_enclosed

    refs = [evaluate(p.module, p.entry, list(p.inputs)) for p in generate()]
    judged = {"errors": 0}

    def judge_all(ps: list) -> None:
        judged["errors"] = 0
        for p, ref in zip(ps, refs, strict=True):
            try:
                with np.errstate(all="ignore"):
                    ev, _ = evaluate_enclosed(p.module, p.entry, list(p.inputs))
                    check(p.module, p.entry, list(p.inputs), ref, reference=ev)
            except Exception:
                judged["errors"] += 1

    batches = iter([generate() for _ in range(args.repeat)])
    j_wall, j_cpu, _ = timed(lambda: judge_all(next(batches)), args.repeat)
    n = args.n
    print(f"{n} generated programs (seeds {args.seed}..{args.seed + n - 1}, max_ops="
          f"{args.max_ops}, {n_sharded} sharded), {n_ops} reachable ops "
          f"({n_ops / n:.1f} per program); median of {args.repeat} runs")
    print(f"  generation        : {n / g_wall:8.1f} programs/s  ({g_wall * 1e3 / n:.2f} ms each, "
          f"CPU {g_cpu * 1e3 / n:.2f} ms)")
    print(f"  type inference    : {n / i_wall:8.1f} programs/s  ({i_wall * 1e3 / n:.2f} ms each, "
          f"CPU {i_cpu * 1e3 / n:.2f} ms)")
    print(f"  reference eval    : {n / e_wall:8.1f} programs/s  ({e_wall * 1e3 / n:.2f} ms each, "
          f"CPU {e_cpu * 1e3 / n:.2f} ms; {n_ops / e_wall:.0f} ops/s)  target >= 100 "
          f"programs/s: {'met' if n / e_wall >= 100 else 'NOT met'}")
    print(f"  judge (enclosures): {n / j_wall:8.1f} programs/s  ({j_wall * 1e3 / n:.2f} ms each, "
          f"CPU {j_cpu * 1e3 / n:.2f} ms): {j_wall / e_wall:.2f}x the reference evaluation "
          f"alone (target <= 3x: {'met' if j_wall / e_wall <= 3 else 'NOT met'}); "
          f"{judged['errors']} error(s)")
    print(f"  evaluation errors : {len(errors)}")
    for seed, msg in errors[:10]:
        print(f"    seed {seed}: {msg[:200]}")


if __name__ == "__main__":
    main()
