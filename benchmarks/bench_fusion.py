"""Fusion time on long elementwise chains (issue 21.3: fusion must be near-linear).

    python benchmarks/bench_fusion.py 100 1000 10000

For each length n: the lowered program of ``y = x; repeat n times y = y + x`` (one kernel per
op), then ``fusion.fuse`` timed alone; prints the kernel counts before / after and seconds.
"""

from __future__ import annotations

import sys
import time

from tilefoundry.compiler import fusion
from tilefoundry.compiler.hir_passes import canonicalize, elaborate, typeinfer
from tilefoundry.compiler.lower import lower
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Binary, BinaryKind
from tilefoundry.semantics.typeinfer.core import Session
from tilefoundry.semantics.types import TensorType


def chain_program(n: int, shape: tuple = (64,)):
    t = TensorType(shape, DType.F32)
    x = Var("x", t)
    e = x
    for k in range(n):
        e = Call(Binary(BinaryKind.ADD if k % 2 else BinaryKind.MUL), (e, x))
    m = Module((Function("f", (x,), e, t),))
    s = Session()
    m = typeinfer(m, s)
    fn = canonicalize(elaborate(m, "f", [shape], s))
    return lower(fn)


def main(argv: list[str]) -> None:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
    for n in [int(a) for a in argv] or [100, 1000]:
        p = chain_program(n)
        t0 = time.perf_counter()
        q = fusion.fuse(p)
        dt = time.perf_counter() - t0
        print(f"{n:>6} ops: {len(p.kernels())} kernels -> {len(q.kernels())} in {dt:.2f} s",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
