"""Does tensor-core accumulation stay inside the admitted set? (issue 17; not a test)

    python benchmarks/mma_admitted.py [--backend triton|cuda] [--json FILE]

Needs a CUDA GPU. For bf16, f16, fp8e4m3 and fp8e5m2 inputs, compiles ``matmul(a, b,
allow_reassociation=True)`` with the Triton backend (whose matmul kernels use ``tl.dot`` on the
narrow operands: tensor cores) or the CUDA backend (``mma.sync`` m16n8k16, D280: bf16 / f16
operands as they are, fp8 converted exactly to f16) and judges every output with the oracle.
Two kinds of data:

* ``random``: normal inputs at three shapes (K = 64, 1024, 8192);
* ``small-terms``: each output is ``1 + n·2^-15`` with ``n = 1.5·2^(15-p)`` terms of ``2^-15``
  (``p`` the output's mantissa bits) after one term of 1: every order of f32 additions keeps
  every small term (f32 has 23 bits at 1), so the exact sum is 1.5 output-ulps above 1 and
  rounds to 1 + 2 ulps; an accumulator that keeps fewer than 15 bits below the leading one
  drops them and gives 1, which the oracle rejects. The literature reports that Hopper's fp8
  tensor-core accumulation keeps fewer bits than f32; this asks the oracle.

Prints one line per (dtype, data, shape): the verdict, mismatching elements, and the first
mismatch's expected / observed values.
"""

from __future__ import annotations

import argparse
import json
import sys

import ml_dtypes
import numpy as np

from tilefoundry.compiler import render_cuda
from tilefoundry.compiler.cuda_backend import CUDA_TILES
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.compiler.triton_backend import TRITON_TILES, DeviceRun
from tilefoundry.oracle.compare import check
from tilefoundry.semantics.dsl import parse_module

NP = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "fp8e4m3": ml_dtypes.float8_e4m3fn,
      "fp8e5m2": ml_dtypes.float8_e5m2}
MANT = {"bf16": 7, "f16": 10, "fp8e4m3": 3, "fp8e5m2": 2}

SOURCE = """
M = DimVar("M", 1, 1 << 16)
K = DimVar("K", 1, 1 << 16)
N = DimVar("N", 1, 1 << 16)

@func
def mm(a: Tensor[(M, K), {dt}], b: Tensor[(K, N), {dt}]) -> Tensor[(M, N), {dt}]:
    return matmul(a, b, allow_reassociation=True)
"""


def _module(dt: str):
    return parse_module(SOURCE.format(dt=dt))  # the DSL's own names need no env


def _small_terms(dt: str, m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    count = 3 << (15 - MANT[dt] - 1)  # 1.5 * 2^(15 - p)
    k = 1 + count
    a = np.zeros((m, k), np.float32)
    b = np.zeros((k, n), np.float32)
    a[:, 0], b[0, :] = 1.0, 1.0
    a[:, 1:], b[1:, :] = 2.0 ** -8, 2.0 ** -7  # products 2^-15, exact in every input format
    return a.astype(NP[dt]), b.astype(NP[dt])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--backend", choices=("triton", "cuda"), default="triton")
    ap.add_argument("--dtypes", default="bf16,f16,fp8e4m3,fp8e5m2",
                    help="the operand dtypes (comma-separated)")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("mma_admitted.py needs a CUDA GPU", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    results = []
    for dt in args.dtypes.split(","):
        mod = _module(dt)
        cases = [("random", (rng.standard_normal((128, kk), np.float32).astype(NP[dt]),
                             rng.standard_normal((kk, 128), np.float32).astype(NP[dt])))
                 for kk in (64, 1024, 8192)]
        cases.append(("small-terms", _small_terms(dt, 128, 128)))
        for kind, (a, b) in cases:
            if args.backend == "cuda":
                comp = tf_compile(mod, "mm", [a.shape, b.shape], "cuda", cfg=CUDA_TILES)
                uses_dot = "mma.sync" in comp.executable.source and any(
                    k["mapping"] in ("mma", "wgmma") for k in
                    render_cuda.parse_plan(comp.executable.source)["kernels"].values())
                out = comp([a, b])
            else:
                comp = tf_compile(mod, "mm", [a.shape, b.shape], "triton-cuda",
                                  cfg=TRITON_TILES)
                uses_dot = "tl.dot(" in comp.executable.source
                run = DeviceRun(comp.executable, [a, b])
                run.launch()
                torch.cuda.synchronize()
                out = run.outputs()
            v = check(mod, "mm", [a, b], out)
            first = ""
            if v.status != "PASS":
                first = v.message.splitlines()[0][:240] if v.message else ""
            obs = np.unique(out.astype(np.float64)) if kind == "small-terms" else None
            r = {"backend": args.backend, "dtype": dt, "data": kind,
                 "shape": [a.shape[0], a.shape[1], b.shape[1]], "tensor_cores": uses_dot, "verdict": v.status, "mismatches": v.mismatches,
                 "detail": first,
                 **({"observed_values": obs.tolist()[:4]} if obs is not None else {})}
            results.append(r)
            print(json.dumps(r), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
