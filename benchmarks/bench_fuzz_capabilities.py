"""Capability-directed fuzzing against a narrow backend (issue 16, deliverable 5; not a test).

    .venv/bin/python benchmarks/bench_fuzz_capabilities.py [--n 300] [--seed 0] [-j 1]
                                                           [--sets-n 500]

The narrow backend (``tests/conformance/narrow_backend.py``) declares only Binary / Unary / Cast
on f32 and bf16 and runs the reference; its ``truncating`` variant rounds the f32 -> bf16 Cast
toward zero instead of to nearest even. For a fixed number of generated programs (``--n``, the
``fuzz`` case sequence of ``--seed``: ``GeneratedCases``) run through the conformance runner,
this reports, for the unrestricted generator (before: ``load_generator()``) and the
capability-directed one (after: ``load_generator(caps=...)``, what ``conformance fuzz`` uses):

* the verdict counts and the NOT_SUPPORTED fraction (target < 5 %);
* programs per second (the runner's wall time, worker start included);
* against the truncating variant: the programs drawn up to the first FAIL, and the wall time to
  it (a second run of exactly that many programs, timed end to end).

Then, without a backend, the NOT_SUPPORTED fraction of the capability-directed generator for
several declared capability sets (``--sets-n`` programs each; ``requirements`` /
``unsupported_reason`` as the runner computes them) and the share of sharded programs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "conformance"))

from narrow_backend import NARROW  # noqa: E402

from tilefoundry.conformance.backend import (  # noqa: E402
    Capabilities,
    ReferenceBackend,
    requirements,
    unsupported_reason,
)
from tilefoundry.conformance.runner import run  # noqa: E402
from tilefoundry.conformance.selection import GeneratedCases, load_generator  # noqa: E402
from tilefoundry.oracle.programs import generate_program  # noqa: E402
from tilefoundry.semantics.formats import DType  # noqa: E402


def fuzz(spec: str, gen, seed: int, n: int, jobs: int, out: Path):
    cases = GeneratedCases(gen, seed, limit=n)
    t = time.perf_counter()
    res = run(spec, cases, jobs=jobs, out_jsonl=out)
    return res, time.perf_counter() - t


def report(label: str, spec: str, gen, args, tmp: Path) -> None:
    res, wall = fuzz(spec, gen, args.seed, args.n, args.jobs, tmp / "f.jsonl")
    c = {k: v for k, v in res.counts().items() if v}
    n = len(res.records)
    ns = c.get("NOT_SUPPORTED", 0)
    line = (f"  {label:<22} {spec:<26} {n} programs: N/S {ns} ({100 * ns / n:.1f} %), "
            f"{n / wall:.1f} programs/s; {c}")
    print(line)
    if "truncating" in spec:
        first = next((i for i, r in enumerate(res.records) if r["verdict"] == "FAIL"), None)
        if first is None:
            print(f"  {'':<22} first FAIL: none in {n} programs")
            return
        _, w = fuzz(spec, gen, args.seed, first + 1, args.jobs, tmp / "g.jsonl")
        print(f"  {'':<22} first FAIL: program {first + 1} ({res.records[first]['id']}), "
              f"{w:.2f} s from the start of the run (worker start included); "
              f"{c.get('FAIL', 0)} FAIL in {n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--sets-n", type=int, default=500)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-fuzz-caps-"))
    print(f"narrow backend: ops {sorted(NARROW.ops)}, dtypes "
          f"{sorted(d.value for d in NARROW.dtypes)}, mesh {NARROW.mesh}; seed {args.seed}, "
          f"-j {args.jobs}")
    fuzz("narrow_backend:correct", load_generator(None, caps=NARROW), args.seed + 1, 10,
         args.jobs, tmp / "w.jsonl")  # warm-up: imports and caches, not measured
    for label, gen in (("before (unrestricted)", load_generator(None)),
                       ("after (capabilities)", load_generator(None, caps=NARROW))):
        print(label)
        for spec in ("narrow_backend:correct", "narrow_backend:truncating"):
            report(label, spec, gen, args, tmp)

    sets = {
        "narrow (Binary/Unary/Cast; f32, bf16)": NARROW,
        "reference (all; mesh)": ReferenceBackend().capabilities(),
        "kinds (Binary.add/mul, Unary.exp, Reduce fold_left, MatMul, Transpose; f16, f32; "
        "saturate)": Capabilities.everything(
            ops=frozenset({"Binary.add", "Binary.mul", "Unary.exp", "Reduce", "MatMul",
                           "Transpose"}), dtypes=frozenset({DType.F16, DType.F32}),
            policies=frozenset({"fold_left"}), overflow_modes=frozenset({"saturate"})),
        "ints + mesh (Binary, Reduce, Gather, Reshape, Reshard, Cast; i32, i8, bool)":
            Capabilities.everything(ops=frozenset({"Binary", "Reduce", "Gather", "Reshape",
                                                   "Reshard", "Cast"}),
                                    dtypes=frozenset({DType.I32, DType.I8, DType.BOOL}),
                                    mesh=True),
        "no f8 / f4, ordered_tree only (all ops; mesh)": Capabilities.everything(
            dtypes=frozenset(d for d in DType if d not in (DType.FP8E4M3, DType.FP8E5M2,
                                                           DType.F8E8M0, DType.F4E2M1)),
            policies=frozenset({"ordered_tree"}), mesh=True),
    }
    print(f"\ngenerator only, {args.sets_n} programs per declared set (seeds 0..):")
    for name, caps in sets.items():
        ns_before = ns_after = sharded = 0
        t = time.perf_counter()
        for s in range(args.sets_n):
            p = generate_program(s, caps=caps)
            sharded += "sharded" in p.features
            ns_after += unsupported_reason(caps, requirements(p.module)) is not None
        dt = time.perf_counter() - t
        for s in range(args.sets_n):
            ns_before += unsupported_reason(caps, requirements(generate_program(s).module)) \
                is not None
        print(f"  {name}: N/S before {100 * ns_before / args.sets_n:.1f} %, after "
              f"{100 * ns_after / args.sets_n:.1f} %; sharded {100 * sharded / args.sets_n:.0f} "
              f"%; {args.sets_n / dt:.0f} programs/s generated + requirements")


if __name__ == "__main__":
    main()
