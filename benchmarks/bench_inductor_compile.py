"""Where the Inductor backend's time goes per case: ``compile`` versus the first ``run`` (not a
test; the numbers go in a report).

    .venv/bin/python benchmarks/bench_inductor_compile.py [--n 20] [--seed 0] [--dispatch 4]

Picks ``--n`` quick-tier cases the backend supports (every k-th of them in catalog order, so
the pick is the same on every machine) plus up to ``--dispatch`` quick-tier cases whose entry
has a symbolic (DimVar) parameter shape, and for each times, in one process: ``compile`` (as
the conformance runner calls it: ``protocol.compile_for``, with the input specs when the
backend takes them), the first ``run`` and a second ``run``. Run it with
``TORCHINDUCTOR_CACHE_DIR`` set to an empty directory for cold-cache figures. The first compile
in a process pays Inductor's start-up (~10 s); a warm-up case is compiled first and not counted.
"""

from __future__ import annotations

import argparse
import statistics
import time

from tilefoundry.conformance.backend import requirements, unsupported_reason
from tilefoundry.conformance.inductor_backend import InductorBackend
from tilefoundry.conformance.selection import load_catalog
from tilefoundry.semantics.types import DimVar, TensorType

try:
    from tilefoundry.conformance.protocol import compile_for
except ImportError:  # before the input-spec protocol existed: compile(module, entry)
    compile_for = None


def _compile(backend, module, entry, inputs):
    if compile_for is None:
        return backend.compile(module, entry)
    return compile_for(backend, module, entry, inputs)


def _symbolic(module, entry) -> bool:
    fn = next(f for f in module.functions if f.name == entry)
    return any(isinstance(p.type, TensorType) and any(isinstance(d, DimVar) or not isinstance(d, int)
                                                      for d in p.type.shape) for p in fn.params)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dispatch", type=int, default=4)
    args = ap.parse_args()
    backend = InductorBackend()
    caps = backend.capabilities()
    ok, sym = [], []
    for c in load_catalog(args.seed).tier("quick"):
        if c.expect_error is not None:
            continue
        m, e, ins = c.build()
        if unsupported_reason(caps, requirements(m)) is None:
            (sym if _symbolic(m, e) else ok).append((c, m, e, ins))
    step = max(1, len(ok) // (args.n + 1))
    picked = ok[step::step][:args.n] + sym[:args.dispatch]
    warm = ok[0]
    _compile(backend, warm[1], warm[2], warm[3])
    rows = []
    for c, m, e, ins in picked:
        t0 = time.perf_counter()
        try:
            compiled = _compile(backend, m, e, ins)
            t1 = time.perf_counter()
            backend.run(compiled, ins)
            t2 = time.perf_counter()
            backend.run(compiled, ins)
            t3 = time.perf_counter()
            rows.append((c.id, t1 - t0, t2 - t1, t3 - t2, _symbolic(m, e)))
        except Exception as ex:
            print(f"{c.id}: {type(ex).__name__}: {str(ex)[:100]}")
    print(f"{'case':60s} {'compile_s':>9s} {'run1_s':>8s} {'run2_s':>8s}")
    for cid, a, b, d, s in rows:
        print(f"{cid[:60]:60s} {a:9.3f} {b:8.3f} {d:8.4f}{'  (symbolic shape)' if s else ''}")
    for label, sel in (("static", [r for r in rows if not r[4]]),
                       ("symbolic", [r for r in rows if r[4]])):
        if sel:
            print(f"{label}: {len(sel)} cases; compile_s median {statistics.median(r[1] for r in sel):.3f}"
                  f" total {sum(r[1] for r in sel):.2f}; first run_s median "
                  f"{statistics.median(r[2] for r in sel):.3f} total {sum(r[2] for r in sel):.2f}")


if __name__ == "__main__":
    main()
