"""Ordinary-data sweep of conformance levels (issue 32, "Must show"): torch eager's and
Inductor's LayerNorm, RMSNorm, softmax, SiLU and both GeLUs on N(0, σ) rows, judged strictly and
diagnosed (the least relaxation sets, ``oracle/diagnose.py``).

    python benchmarks/relaxation_sweep.py [--rows 16] [--widths 1024,4096,16384]
        [--sigmas -8,0,8] [--dtypes f32,bf16,f16] [--paths eager,inductor] [--seed 0]
        [--json FILE]

Each (path, op, dtype, width, σ) is one program judged by ``compare.check``; a strict FAIL is
diagnosed. Printed per path and op: elements, strict-rejected elements, the least sets with the
share of elements each admits, and elements admitted under none (a genuine divergence). Not a
timed test: it reports what the oracle says about a peer, seeded and deterministic.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

import ml_dtypes
import numpy as np

from tilefoundry.oracle.compare import FAIL, check
from tilefoundry.oracle.diagnose import diagnose
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops.nn import Gelu, LayerNorm, RMSNorm, Silu, SoftMax
from tilefoundry.semantics.types import TensorType

STORAGE = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


def _program(op: str, dt: DType, rows: int, n: int) -> Module:
    x = Var("x", TensorType((rows, n), dt))
    w = Var("w", TensorType((n,), dt))
    b = Var("b", TensorType((n,), dt))
    if op == "layernorm":
        return Module((Function("f", (x, w, b), Call(LayerNorm(eps=1e-5), (x, w, b)), None),))
    if op == "rmsnorm":
        return Module((Function("f", (x, w), Call(RMSNorm(eps=1e-6), (x, w)), None),))
    body = {"softmax": SoftMax(axis=-1), "silu": Silu(), "gelu_tanh": Gelu(approximate="tanh"),
            "gelu_none": Gelu(approximate="none")}[op]
    return Module((Function("f", (x,), Call(body, (x,)), None),))


def _torch_fn(op: str):
    import torch
    import torch.nn.functional as F

    return {
        "layernorm": lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5),
        "rmsnorm": lambda x, w: F.rms_norm(x, (x.shape[-1],), w, eps=1e-6),
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "silu": F.silu,
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "gelu_none": lambda x: F.gelu(x, approximate="none"),
    }[op]


def _to_torch(a: np.ndarray, dt: str):
    import torch

    if dt == "bf16":
        return torch.from_numpy(a.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def _from_torch(t, dt: str) -> np.ndarray:
    import torch

    t = t.detach().contiguous()
    if dt == "bf16":
        return t.view(torch.int16).numpy().view(np.uint16).view(ml_dtypes.bfloat16)
    return t.numpy()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--widths", default="1024,4096,16384")
    ap.add_argument("--sigmas", default="-8,0,8", help="log2 of σ")
    ap.add_argument("--dtypes", default="f32,bf16,f16")
    ap.add_argument("--ops", default="layernorm,rmsnorm,softmax,silu,gelu_tanh,gelu_none")
    ap.add_argument("--paths", default="eager,inductor")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    import torch

    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    widths = [int(w) for w in args.widths.split(",")]
    sigmas = [2.0 ** int(s) for s in args.sigmas.split(",")]
    table: dict[tuple, collections.Counter] = {}
    rows_out = []
    t0 = time.perf_counter()
    for path in args.paths.split(","):
        for op in args.ops.split(","):
            for dt in args.dtypes.split(","):
                st = STORAGE[dt]
                for n in widths:
                    fn = _torch_fn(op)
                    if path == "inductor":  # one compiled kernel per dtype and shape
                        torch._dynamo.reset()
                        fn = torch.compile(fn, fullgraph=True, dynamic=False)
                    for sg in sigmas:
                        x = (rng.standard_normal((args.rows, n)) * sg).astype(np.float32)
                        w = (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
                        b = (0.1 * rng.standard_normal(n)).astype(np.float32)
                        xs = [a.astype(st) for a in ((x, w, b) if op == "layernorm" else
                                                     (x, w) if op == "rmsnorm" else (x,))]
                        m = _program(op, DType(dt), args.rows, n)
                        with torch.no_grad():
                            out = fn(*(_to_torch(a, dt) for a in xs))
                        obs = _from_torch(out, dt)
                        v = check(m, "f", xs, obs)
                        c = table.setdefault((path, op, dt), collections.Counter())
                        o = v.outputs[0]
                        c["elements"] += o.total
                        c[f"strict {v.status}"] += 1
                        rec = {"path": path, "op": op, "dtype": dt, "width": n, "sigma": sg,
                               "strict": v.status, "rejected": o.mismatches}
                        if v.status == FAIL:
                            d = diagnose(m, "f", xs, obs, v).outputs[0].diagnosis
                            c["rejected"] += o.mismatches
                            c["none"] += d.none
                            c[f"least {d.label}"] += o.mismatches - d.none
                            rec["least"] = d.label
                            rec["none"] = d.none
                        rows_out.append(rec)
    print(f"relaxation sweep: rows {args.rows}, widths {widths}, σ {sigmas}, seed {args.seed}, "
          f"{time.perf_counter() - t0:.1f} s")
    print(f"{'path':9} {'op':10} {'dtype':5} {'elements':>9} {'rejected':>9} {'none':>6}  "
          f"least sets (elements)  strict verdicts")
    for (path, op, dt), c in table.items():
        least = ", ".join(f"{k[6:]}: {v}" for k, v in sorted(c.items())
                          if k.startswith("least "))
        verdicts = ", ".join(f"{k[7:]} {v}" for k, v in sorted(c.items())
                             if k.startswith("strict "))
        print(f"{path:9} {op:10} {dt:5} {c['elements']:9d} {c['rejected']:9d} {c['none']:6d}  "
              f"{least or '-'}  [{verdicts}]")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows_out, f, indent=1)
    return 1 if any(c["none"] for c in table.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
