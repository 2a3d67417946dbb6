"""Concat of K operands: seconds of type inference and of compile as K grows (not a test).

    .venv/bin/python benchmarks/bench_concat_operands.py [--k 1000 10000] [--symbolic]
        [--compile] [--target interp]

Builds ``f(x0, ..., x{K-1}) = Concat(axis=0)(x0, ..., x{K-1})`` over f32 vectors: with
``--symbolic`` each operand's extent is its own DimVar ``N{i}`` in ``[1, 8)`` (type inference
must build the symbolic sum of K extents), otherwise each has extent 2. Prints, per K, the
seconds of ``infer_module`` and (``--compile``: static extents only) of ``compile`` for the
target, and the checked result extent. Issue 34 measured 1,600 symbolic operands at 8 s of
type inference (~K^2.2) and a quadratic compile.
"""

from __future__ import annotations

import argparse
import time

from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Concat
from tilefoundry.semantics.typeinfer.functions import infer_module
from tilefoundry.semantics.types import DimVar, TensorType


def concat_module(k: int, symbolic: bool) -> Module:
    ps = tuple(Var(f"x{i}", TensorType((DimVar(f"N{i}", 1, 8) if symbolic else 2,), DType.F32))
               for i in range(k))
    return Module((Function("f", ps, Call(Concat(0), ps), None),))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--symbolic", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--target", default="interp")
    a = ap.parse_args()
    for k in a.k:
        m = concat_module(k, a.symbolic)
        t0 = time.perf_counter()
        inf = infer_module(m)
        t1 = time.perf_counter()
        ext = inf.functions[0].body.checked_type.shape[0]
        line = f"K={k:>6} typeinfer {t1 - t0:8.2f} s"
        if a.compile and not a.symbolic:
            t0 = time.perf_counter()
            c = tf_compile(m, "f", [(2,)] * k, a.target)
            t1 = time.perf_counter()
            line += f"  compile[{a.target}] {t1 - t0:8.2f} s ({len(c.kernels)} kernels)"
        if a.symbolic:
            line += f"  extent {type(ext).__name__}"
        else:
            line += f"  extent {ext}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
