"""What gloo does, and how fast --backend distributed runs (issue 19).

    python benchmarks/bench_distributed.py [--ranks 4] [--cases 16] [--verdicts]

1. **gloo's all_reduce semantics** on ``--ranks`` CPU ranks, against the contract (the mesh
   simulation's completion: a float sum accumulates in f32 and rounds once, any tree admitted;
   max / min propagate NaN and order -0 < +0):

   * bf16 / f16 sums: column j holds a large value on rank j and 0.5 on every other rank, so a
     dtype-precision accumulation that adds the large value first loses every 0.5 (the f32
     result rounds the exact sum once);
   * max / min: column j holds NaN (or -0) on rank j and 1.0 (or +0) elsewhere — the contract's
     result is NaN (min -0 / max +0) in every column, whichever rank holds it;
   * fp8: whether gloo reduces or moves it at all.

2. **Throughput**: the first ``--cases`` two-device sharded cases of the quick tier through
   ``DistributedBackend.run`` (no oracle), with the process group reused across cases vs a fresh
   group (spawn + rendezvous) per case.

3. ``--verdicts`` (``--verdicts-only`` skips 1 and 2): the sharded cases of ``--tier`` (quick)
   through the runner, verdict counts per mesh shape.

Prints one JSON object. Deterministic inputs; the timings are the only varying numbers.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time

SHARDED = ["sharded/*", "spec/reshard/*", "spec/local/*", "program/*/sharded/*"]


def _gloo_worker(rank: int, world: int, port: int, out) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    res: dict = {}
    for name, dt, big in (("bf16", torch.bfloat16, 256.0), ("f16", torch.float16, 2048.0),
                          ("f32", torch.float32, 2.0 ** 24)):
        t = torch.full((world,), 0.5, dtype=dt)
        t[rank] = big
        dist.all_reduce(t)
        exact = big + 0.5 * (world - 1)
        once = torch.tensor(exact, dtype=torch.float32).to(dt).item()  # f32 sum, rounded once
        res[f"sum_{name}"] = {"exact": exact, "f32_round_once": once,
                              "gloo_per_column": [float(v) for v in t.float().tolist()]}
    nan = float("nan")
    for name, dt in (("f32", torch.float32), ("bf16", torch.bfloat16), ("f16", torch.float16)):
        for op_name, op in (("max", dist.ReduceOp.MAX), ("min", dist.ReduceOp.MIN)):
            t = torch.ones(world, dtype=dt)
            t[rank] = nan
            dist.all_reduce(t, op=op)
            res[f"{op_name}_nan_{name}"] = ["nan" if v != v else v for v in t.float().tolist()]
            z = torch.zeros(world, dtype=dt)
            z[rank] = -0.0
            dist.all_reduce(z, op=op)
            res[f"{op_name}_signed_zero_{name}"] = [
                "-0" if torch.signbit(v) else "+0" for v in z.float()]
    for name, dt in (("fp8e4m3", torch.float8_e4m3fn),):
        t = torch.ones(world, dtype=dt)
        try:
            dist.all_reduce(t)
            res[f"sum_{name}"] = "reduced"
        except Exception as e:
            res[f"sum_{name}"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
        try:
            got = [torch.empty_like(t) for _ in range(world)]
            dist.all_gather(got, t)
            res[f"all_gather_{name}"] = "moved"
        except Exception as e:
            res[f"all_gather_{name}"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    if rank == 0:
        out.put(res)
    dist.barrier()
    dist.destroy_process_group()


def gloo_semantics(world: int) -> dict:
    import torch.multiprocessing as mp

    from tilefoundry.conformance.distributed_backend import _free_port

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_gloo_worker, args=(r, world, port, q)) for r in range(world)]
    for p in procs:
        p.start()
    res = q.get(timeout=300)
    for p in procs:
        p.join(60)
    # the verdicts against the contract
    verdict = {}
    for k, v in res.items():
        if k.startswith("sum_") and isinstance(v, dict):
            once = all(x == v["f32_round_once"] for x in v["gloo_per_column"])
            if k == "sum_f32":  # any tree of f32 additions is admitted: order may show
                verdict[k] = "f32 additions, order-dependent (any f32 tree: the contract)"
            else:
                verdict[k] = "accumulates in f32, rounds once (the contract)" if once else \
                    "accumulates in the dtype, order-dependent (leaves the admitted set)"
        elif "_nan_" in k:
            verdict[k] = "propagates NaN" if all(x == "nan" for x in v) else \
                f"drops NaN on {sum(x != 'nan' for x in v)} of {len(v)} columns (leaves " \
                f"the contract)"
        elif "signed_zero" in k:
            want = "-0" if k.startswith("min") else "+0"
            bad = sum(x != want for x in v)
            verdict[k] = "orders -0 < +0" if bad == 0 else \
                f"returns {'+0' if want == '-0' else '-0'} on {bad} of {len(v)} columns " \
                f"(leaves the contract)"
    return {"ranks": world, "raw": res, "verdict": verdict}


def _two_device_cases(n: int):
    from tilefoundry.conformance.distributed_backend import _meshes
    from tilefoundry.conformance.selection import load_catalog, select_cases
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.semantics.typeinfer.functions import infer_module

    out = []
    for c in select_cases(load_catalog(0), "quick", SHARDED):
        m, e, ins = c.build()
        if c.expect_error is None and \
                [tuple(x.axis_extents) for x in _meshes(infer_module(m, Session()))] == [(2,)]:
            out.append((c.id, m, e, ins))
        if len(out) == n:
            break
    return out


def throughput(n: int) -> dict:
    from tilefoundry.conformance.distributed_backend import DistributedBackend

    cases = _two_device_cases(n)
    res = {"cases": len(cases)}
    for label, reuse in (("reused_group", True), ("fresh_group_per_case", False)):
        b = DistributedBackend(reuse=reuse, on_rank_death="raise", timeout_s=300)
        if reuse:  # start the pool outside the timing: the reused group's steady state
            _, m, e, ins = cases[0]
            b.run(b.compile(m, e), ins)
        t0 = time.perf_counter()
        for _, m, e, ins in cases:
            b.run(b.compile(m, e), ins)
        dt = time.perf_counter() - t0
        b.close()
        res[label] = {"seconds": round(dt, 3), "cases_per_s": round(len(cases) / dt, 2),
                      "pools_started": b.pools_started}
    res["speedup"] = round(res["reused_group"]["cases_per_s"]
                           / res["fresh_group_per_case"]["cases_per_s"], 1)
    return res


def verdicts_per_mesh(tier: str = "quick") -> dict:
    from tilefoundry.conformance import runner
    from tilefoundry.conformance.distributed_backend import _meshes
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.semantics.typeinfer.functions import infer_module

    os.environ.setdefault("TILEFOUNDRY_DIST_RANKS", "8")
    cases = runner.select_cases(runner.load_catalog(0), tier, SHARDED)
    shape = {}
    for c in cases:
        m, _, _ = c.build()
        ms = sorted({tuple(x.axis_extents) for x in _meshes(infer_module(m, Session()))})
        shape[c.id] = "+".join("x".join(map(str, s)) for s in ms)
    with tempfile.TemporaryDirectory() as d:
        res = runner.run("distributed", cases, jobs=1, timeout_s=300,
                         out_jsonl=os.path.join(d, "r.jsonl"))
    per: dict = collections.defaultdict(collections.Counter)
    for r in res.records:
        per[shape[r["id"]]][r["verdict"]] += 1
    return {"total": dict(res.counts()), "per_mesh": {k: dict(v) for k, v in sorted(per.items())},
            "fails": {r["id"]: r["message"][:160] for r in res.records
                      if r["verdict"] == "FAIL"}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--cases", type=int, default=16)
    ap.add_argument("--verdicts", action="store_true")
    ap.add_argument("--tier", default="quick", choices=("quick", "full"))
    ap.add_argument("--verdicts-only", action="store_true")
    a = ap.parse_args(argv)
    out = {} if a.verdicts_only else {"gloo": gloo_semantics(a.ranks),
                                      "throughput": throughput(a.cases)}
    if a.verdicts or a.verdicts_only:
        out["verdicts"] = verdicts_per_mesh(a.tier)
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
