"""The reference backend judged by its own oracle over generated programs (a meta-test, not a
timed test): every verdict must be PASS or UNJUDGED; a FAIL is an oracle error.

    .venv/bin/python benchmarks/reference_self_fuzz.py [--n 20000] [--seed 0] [--workers 2]
                                                        [--max-ops 8] [--shard I/K]
                                                        [--sharded mixed|all|none]

Program ``i`` is ``oracle.programs.generate_program(seed + i, caps=<the reference backend's
capabilities>)``, as ``tilefoundry conformance fuzz --backend reference`` draws it: every op,
every evaluable dtype, and a mesh, so a program is sharded with the generator's
``SHARDED_FRACTION`` (a coin of its own per seed). Each is judged as the runner judges a case:
the enclosing reference evaluation (``evaluate_enclosed``), the reference backend's own run on
copies of the inputs, then ``compare.check``. ``--workers`` splits the seeds over processes;
``--shard I/K`` takes only the seeds with ``(seed - --seed) % K == I`` (for separate runs);
``--sharded all`` / ``none`` forces every program sharded / unsharded.

Prints the programs, how many were sharded, the counts per verdict (PASS / UNJUDGED / FAIL, and
ERROR for an exception in the oracle or the reference, GEN_ERROR for one in the generator,
CHECK for a run-time check the reference raised), the wall time, and every FAIL's and ERROR's
seed, reason and program text. Exits 1 when any program FAILs or errs.
"""

from __future__ import annotations

import argparse
import collections
import copy
import multiprocessing as mp
import sys
import time
import traceback
from dataclasses import dataclass

#: verdicts that are oracle (or reference) errors: the reference must pass its own judge
BAD = ("FAIL", "ERROR", "GEN_ERROR")


@dataclass
class Outcome:
    seed: int
    verdict: str
    sharded: bool
    seconds: float
    detail: str = ""
    program: str = ""


def _caps():
    from tilefoundry.conformance.backend import ReferenceBackend

    return ReferenceBackend().capabilities()


def judge_seed(seed: int, max_ops: int = 8, sharded: bool | None = None) -> Outcome:
    """Generate program ``seed`` and judge the reference backend's outputs on it
    (``sharded``: None for the generator's coin, True / False to force it)."""
    from tilefoundry.conformance.backend import ReferenceBackend
    from tilefoundry.errors import RunTimeCheckError
    from tilefoundry.oracle.compare import check
    from tilefoundry.oracle.enclosure_eval import evaluate_enclosed
    from tilefoundry.oracle.programs import generate_program
    from tilefoundry.semantics.printer import to_text

    t0 = time.perf_counter()
    try:
        p = generate_program(seed, max_ops=max_ops, caps=_caps(), sharded=sharded)
        m, e, ins = p.module, p.entry, list(p.inputs)
    except Exception as ex:
        return Outcome(seed, "GEN_ERROR", False, time.perf_counter() - t0,
                       f"{type(ex).__name__}: {ex}"[:400])
    sharded = p.mesh is not None

    def out(verdict: str, detail: str = "") -> Outcome:
        text = ""
        if verdict in BAD:
            try:
                text = to_text(m)
            except Exception as ex:  # the text is for the report only
                text = f"(no text: {type(ex).__name__}: {ex})"
        return Outcome(seed, verdict, sharded, time.perf_counter() - t0, detail, text)

    try:
        backend = ReferenceBackend()
        ev, _ = evaluate_enclosed(m, e, ins)
        try:
            observed = backend.run(backend.compile(m, e), [copy.deepcopy(x) for x in ins])
        except RunTimeCheckError as ex:
            return out("CHECK", str(ex)[:200])
        v = check(m, e, ins, observed, reference=ev)
    except Exception as ex:
        tb = traceback.format_exc(limit=-3)
        return out("ERROR", f"{type(ex).__name__}: {ex}"[:400] + "\n" + tb)
    detail = ""
    if v.status == "FAIL":
        detail = "; ".join(o.line() for o in v.outputs if o.status == "FAIL")
    elif v.status == "ERROR":
        detail = v.message
    return out(v.status, detail)


def _judge(args: tuple) -> Outcome:
    return judge_seed(*args)


def run(seed: int, n: int, *, workers: int = 1, max_ops: int = 8, shard: tuple[int, int] =
        (0, 1), sharded: bool | None = None, progress: bool = False
        ) -> tuple[list[Outcome], float]:
    """Judge programs ``seed .. seed + n - 1`` (those of ``shard``); (outcomes, wall seconds)."""
    i, k = shard
    seeds = [(s, max_ops, sharded) for s in range(seed, seed + n) if (s - seed) % k == i]
    # judge one program here before the workers fork: everything judging imports (lazily too)
    # is then loaded, so a worker started later (maxtasksperchild) runs the code this run
    # started with, even if the sources change meanwhile
    if seeds and workers > 1:
        judge_seed(*seeds[0])

    t0 = time.perf_counter()
    outs: list[Outcome] = []
    if workers <= 1:
        it = map(_judge, seeds)
        pool = None
    else:
        pool = mp.get_context("fork").Pool(workers, maxtasksperchild=500)
        it = pool.imap_unordered(_judge, seeds, chunksize=8)
    try:
        for o in it:
            outs.append(o)
            if o.verdict in BAD:
                print(f"[seed {o.seed}] {o.verdict}: {o.detail.splitlines()[0] if o.detail else ''}"
                      [:300], file=sys.stderr, flush=True)
            if progress and len(outs) % 1000 == 0:
                c = collections.Counter(x.verdict for x in outs)
                print(f"... {len(outs)}/{len(seeds)} in {time.perf_counter() - t0:.0f} s: "
                      f"{dict(c)}", file=sys.stderr, flush=True)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    outs.sort(key=lambda o: o.seed)
    return outs, time.perf_counter() - t0


def summary(outs: list[Outcome], wall: float) -> str:
    verdicts = collections.Counter(o.verdict for o in outs)
    by_sharding = collections.Counter((o.sharded, o.verdict) for o in outs)
    n_sh = sum(o.sharded for o in outs)
    slow = sorted(outs, key=lambda o: -o.seconds)[:3]
    lines = [f"programs {len(outs)} (sharded {n_sh}, unsharded {len(outs) - n_sh}) in "
             f"{wall:.1f} s wall",
             "verdicts: " + ", ".join(f"{k} {verdicts[k]}" for k in sorted(verdicts)),
             "  sharded: " + ", ".join(f"{v} {c}" for (s, v), c in sorted(by_sharding.items())
                                       if s),
             "  unsharded: " + ", ".join(f"{v} {c}" for (s, v), c in
                                         sorted(by_sharding.items()) if not s),
             "slowest: " + ", ".join(f"seed {o.seed} {o.seconds:.1f} s" for o in slow)]
    for o in outs:
        if o.verdict in BAD:
            lines += ["", f"=== seed {o.seed} ({'sharded' if o.sharded else 'unsharded'}): "
                          f"{o.verdict}", o.detail, o.program]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--max-ops", type=int, default=8)
    ap.add_argument("--shard", default="0/1", help="I/K: only the seeds with (s - seed) %% K == I")
    ap.add_argument("--sharded", choices=("mixed", "all", "none"), default="mixed",
                    help="mixed: the generator's own coin per seed (SHARDED_FRACTION); all / "
                         "none: every program sharded / unsharded")
    args = ap.parse_args(argv)
    i, k = (int(x) for x in args.shard.split("/"))
    sharded = {"mixed": None, "all": True, "none": False}[args.sharded]
    outs, wall = run(args.seed, args.n, workers=args.workers, max_ops=args.max_ops,
                     shard=(i, k), sharded=sharded, progress=True)
    print(f"seeds {args.seed}..{args.seed + args.n - 1} (shard {i}/{k}), max_ops "
          f"{args.max_ops}, workers {args.workers}, sharded {args.sharded}")
    print(summary(outs, wall))
    return 1 if any(o.verdict in BAD for o in outs) else 0


if __name__ == "__main__":
    sys.exit(main())
