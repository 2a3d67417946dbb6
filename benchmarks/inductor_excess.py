"""The real Inductor on three bf16 chains behind an inexact op (issue 32, Deliver 5):
``mul(softmax(x), y)``, ``add(rmsnorm(x, w), r)`` and ``mul(exp(x), y)``, each compiled as one
``torch.compile(fullgraph=True)`` function with default settings, judged strictly, diagnosed,
and judged once more with the interval hull alone (``CANDIDATES_MAX = 0``: the enclosure before
finite sets) — the share of rejected elements before -> after.

    python benchmarks/inductor_excess.py [--rows 64] [--width 64] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys

import ml_dtypes
import numpy as np

from tilefoundry.oracle.compare import FAIL, check
from tilefoundry.oracle.diagnose import diagnose
from tilefoundry.oracle.enclosures import core as enclosure_core
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Binary, BinaryKind, Unary, UnaryKind
from tilefoundry.semantics.ops.nn import RMSNorm, SoftMax
from tilefoundry.semantics.types import TensorType


def _bf(t) -> np.ndarray:
    import torch

    return t.detach().contiguous().view(torch.int16).numpy().view(np.uint16).view(
        ml_dtypes.bfloat16)


def _t(a: np.ndarray):
    import torch

    return torch.from_numpy(a.view(np.uint16).copy()).view(torch.bfloat16)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(args.seed)
    r, n = args.rows, args.width
    bf = DType.BF16
    x, y = Var("x", TensorType((r, n), bf)), Var("y", TensorType((r, n), bf))
    w = Var("w", TensorType((n,), bf))
    xs = rng.standard_normal((r, n)).astype(ml_dtypes.bfloat16)
    ys = (rng.standard_normal((r, n)) * 4).astype(ml_dtypes.bfloat16)
    ws = (1 + rng.random(n)).astype(ml_dtypes.bfloat16)
    mul, add = Binary(BinaryKind.MUL), Binary(BinaryKind.ADD)
    chains = [
        ("mul(softmax(x), y)",
         Module((Function("f", (x, y), Call(mul, (Call(SoftMax(axis=-1), (x,)), y)), None),)),
         [xs, ys], lambda a, b: torch.softmax(a, -1) * b),
        ("add(rmsnorm(x, w), r)",
         Module((Function("f", (x, w, y), Call(add, (Call(RMSNorm(eps=1e-6), (x, w)), y)),
                          None),)),
         [xs, ws, ys], lambda a, g, b: F.rms_norm(a, (a.shape[-1],), g, eps=1e-6) + b),
        ("mul(exp(x), y)",
         Module((Function("f", (x, y), Call(mul, (Call(Unary(UnaryKind.EXP), (x,)), y)),
                          None),)),
         [xs, ys], lambda a, b: torch.exp(a) * b),
    ]
    print(f"Inductor (torch {torch.__version__}, CPU, default settings), bf16 {r}x{n}, "
          f"seed {args.seed}")
    for name, m, ins, fn in chains:
        cf = torch.compile(fn, fullgraph=True)
        with torch.no_grad():
            obs = _bf(cf(*(_t(a) for a in ins)))
            eager = _bf(fn(*(_t(a) for a in ins)))
        v = check(m, "f", ins, obs)
        after = v.outputs[0].mismatches if v.status == FAIL else 0
        label = diagnose(m, "f", ins, obs, v).diagnosis.line() if v.status == FAIL else "-"
        saved = enclosure_core.CANDIDATES_MAX
        enclosure_core.CANDIDATES_MAX = 0
        try:
            vb = check(m, "f", ins, obs)
        finally:
            enclosure_core.CANDIDATES_MAX = saved
        before = vb.outputs[0].mismatches if vb.status == FAIL else 0
        ve = check(m, "f", ins, eager)
        print(f"  {name:24} inductor: {v.status} {after}/{obs.size} rejected (hull alone: "
              f"{before}); {label}; eager: {ve.status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
