"""How much of each output the oracle judges, and how tight its enclosures are (not a test).

    .venv/bin/python benchmarks/measure_enclosures.py generated [--n 10000] [--seed 0]
    .venv/bin/python benchmarks/measure_enclosures.py quick|full

Judges the reference backend's own outputs (``check`` with enclosures, as the runner does) on
the catalog's quick or full tier, or on ``--n`` generated programs (one in five sharded, the
``bench_oracle_programs.py`` workload), and reports:

* the verdicts (a FAIL here is an oracle bug: the reference must pass its own judge), and the
  errors (none expected);
* the fraction of output elements judged, and the unjudged ones counted by cause;
* the median enclosure width in ulps per dtype over outputs judged by their enclosure, and per
  source of freedom (the cause an enclosure names) with that source's **floor**: an op with a
  ULP budget of B admits 2B + 1 results around the reference on exact inputs, so no sound
  enclosure downstream of it is narrower than 2B ulps (``excess`` = median width - floor).
"""

from __future__ import annotations

import argparse
import collections
import re
import time

import numpy as np

from tilefoundry.oracle.compare import FAIL, UNJUDGED, check
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import dtype_of

_WIDTH = re.compile(r"^enclosure\((.*); width median ([0-9.e+-]+) / max ([0-9.e+-]+) ulp\)$")
_BUDGET = re.compile(r" within ([0-9.]+) ulp")


def _floor(source: str) -> float | None:
    """2 x the ULP budget of the freedom an enclosure names (f32), 0 for freedom without a
    budget (trees, Partials, matmul / conv reassociation, roundings), None when the budget
    cannot be told from the name (Gelu without its approximation)."""
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ulp import BUDGETS

    b = _BUDGET.search(source)
    if b:
        return 2 * float(b.group(1))
    name = source.split(" ")[0]
    key = (name[len("Unary("):-1] if name.startswith("Unary(") else name).lower()
    if key == "gelu":
        return None
    return 2 * float(BUDGETS[(key, DType.F32)]) if (key, DType.F32) in BUDGETS else 0.0


def _cases(tier: str, n: int, seed: int):
    if tier == "generated":
        from tilefoundry.oracle.programs import generate_program

        for s in range(seed, seed + n):
            p = generate_program(s, max_ops=8, sharded=(s % 5 == 4))
            yield f"seed {s}", p.module, p.entry, list(p.inputs)
        return
    from tilefoundry.conformance.catalog import build_catalog

    for c in build_catalog(seed).tier(tier):
        if c.expect_error:  # no result to judge: the reference raises its run-time check
            continue
        m, e, ins = c.build()
        yield c.id, m, e, ins


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tier", choices=("generated", "quick", "full"))
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    statuses: collections.Counter = collections.Counter()
    methods: collections.Counter = collections.Counter()
    causes: collections.Counter = collections.Counter()
    widths: dict = collections.defaultdict(list)
    by_source: dict = collections.defaultdict(list)
    total = unjudged = 0
    errors, fails = [], []
    t0 = time.perf_counter()
    for cid, m, e, ins in _cases(args.tier, args.n, args.seed):
        try:
            ref = evaluate(m, e, ins)
            v = check(m, e, ins, ref)
        except Exception as ex:  # counted: the oracle must judge every case it can evaluate
            errors.append(f"{cid}: {type(ex).__name__}: {ex}"[:200])
            continue
        statuses[v.status] += 1
        refs = list(ref) if isinstance(ref, tuple | list) else [ref]
        for o in v.outputs:
            methods[(o.status, o.contract.split("(")[0].split(" ")[0])] += 1
            total += o.total
            if o.status == FAIL:
                fails.append(f"{cid}: {o.line()}"[:300])
            if o.status == UNJUDGED:
                unjudged += o.unjudged
                causes[o.detail.split("every value: ")[-1].split(": ", 1)[-1][:90]] += \
                    o.unjudged
            w = _WIDTH.match(o.contract)
            if w is None:
                continue
            try:
                dt = str(dtype_of(np.asarray(refs[o.output])))
            except Exception:
                dt = "?"
            med = float(w.group(2))
            widths[dt].append(med)
            source = w.group(1)
            key = (dt, source.split(" within")[0][:40], _floor(source))
            by_source[key].append(med)
    dt_s = time.perf_counter() - t0
    print(f"{args.tier}: {sum(statuses.values())} judged cases in {dt_s:.1f} s: "
          f"{dict(statuses)}; errors {len(errors)}")
    for line in fails[:10] + errors[:10]:
        print("  ", line)
    print("outputs by (verdict, method):", dict(methods))
    print(f"output elements {total}, unjudged {unjudged}, judged "
          f"{100 * (1 - unjudged / max(total, 1)):.3f} %")
    print("unjudged elements by cause:")
    for c, k in causes.most_common(12):
        print(f"  {k:7d}  {c}")
    print("median enclosure width (ulps) per dtype (outputs judged by their enclosure):")
    for dt, ws in sorted(widths.items(), key=lambda kv: -len(kv[1])):
        print(f"  {dt:9s} {len(ws):6d} outputs  median {np.median(ws):8.2f}")
    print("f32 by source of freedom: outputs, median width, floor (2 x budget), excess")
    for (dt, src, floor), ws in sorted(by_source.items(), key=lambda kv: -len(kv[1])):
        if dt == "f32":
            med = float(np.median(ws))
            fl, ex = ("?", "?") if floor is None else (f"{floor:g}", f"{med - floor:+.2f}")
            print(f"  {len(ws):6d}  {med:10.2f}  {fl:>6s}  {ex:>10s}  {src}")
    f32 = [(w, fl) for (dt, _, fl), ws in by_source.items() if dt == "f32" and fl is not None
           for w in ws]
    if f32:
        free = [w for w, fl in f32 if fl == 0]
        print(f"f32 outputs whose freedom has no ULP budget (trees, Partials, matmul, conv, "
              f"roundings): {len(free)}, median width "
              f"{np.median(free) if free else float('nan'):.2f}; median excess over the floor "
              f"(all f32): {np.median([w - fl for w, fl in f32]):.2f}")


if __name__ == "__main__":
    main()
