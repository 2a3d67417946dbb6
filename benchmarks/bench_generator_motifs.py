"""How often the program generator draws the shapes issue 33 found under-drawn (not a test).

    .venv/bin/python benchmarks/bench_generator_motifs.py [--n 1000] [--seed 0]

For ``--n`` consecutive seeds, per population, the number of programs holding each shape of
``oracle/program_motifs.py`` (``motifs_in``; the Partial one evaluated, so its pieces' mixed
signs are real) — per 1,000 programs — and the mean count of narrow-float elementwise ops:

* ``fuzz reference``: ``generate_program(seed, caps=<the reference's capabilities>)``, what
  ``conformance fuzz --backend reference`` draws (30 % sharded);
* ``fuzz narrow``: the same for Binary / Unary / Cast on f32 + bf16 (``tests/conformance/
  narrow_backend.py``);
* ``fuzz bf16-kernels``: Binary / Unary / Reduce / Cast / SoftMax / RMSNorm / Select on f32 +
  bf16 + bool;
* ``plain``: ``generate_program(seed)`` — the catalog's programs (unchanged by design: without
  capabilities a seed's program is what it always was);
* ``malformed-input fuzz``: the programs ``conformance/fuzz_ir.py`` mutates.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "conformance"))

from narrow_backend import NARROW  # noqa: E402

from tilefoundry.conformance.backend import (  # noqa: E402
    ALL_FEATURES,
    ALL_OVERFLOW,
    ALL_POLICIES,
    ALL_ROUNDING,
    Capabilities,
    ReferenceBackend,
)
from tilefoundry.oracle.program_motifs import (  # noqa: E402
    MOTIFS,
    NARROW_FLOATS,
    is_elementwise,
    motifs_in,
)
from tilefoundry.oracle.programs import generate_program  # noqa: E402
from tilefoundry.semantics.formats import DType  # noqa: E402

KERNELS = Capabilities(ops=frozenset({"Binary", "Unary", "Reduce", "Cast", "SoftMax", "RMSNorm",
                                      "Select"}),
                       dtypes=frozenset({DType.F32, DType.BF16, DType.BOOL}),
                       policies=ALL_POLICIES, overflow_modes=ALL_OVERFLOW,
                       rounding_modes=ALL_ROUNDING, features=ALL_FEATURES)


def _narrow_ops(module) -> int:
    from tilefoundry.oracle.program_motifs import _calls
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.semantics.typeinfer.functions import infer_module

    m = infer_module(module, Session())
    return sum(1 for c in _calls(m) if is_elementwise(c.op) and c.has_type and
               getattr(c.checked_type, "dtype", None) in NARROW_FLOATS)


def measure(label: str, draw, n: int, seed: int) -> dict:
    counts: Counter = Counter()
    narrow = 0
    t = time.perf_counter()
    for i in range(n):
        p = draw(seed + i)
        counts.update(motifs_in(p.module, p.entry, list(p.inputs)))
        narrow += _narrow_ops(p.module)
    wall = time.perf_counter() - t
    per = {k: 1000 * counts[k] / n for k in MOTIFS}
    print(f"  {label:<22} " + "  ".join(f"{per[k]:>7.1f}" for k in MOTIFS) +
          f"  {narrow / n:>6.2f}   ({n / wall:.0f} programs/s)")
    return per


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    ref = ReferenceBackend().capabilities()

    def fuzz_ir_program(s: int):
        from tilefoundry.conformance.fuzz_ir import _program

        return _program(random.Random(f"{s}/0"))

    print(f"programs holding each shape, per 1,000 (seeds {args.seed}..{args.seed + args.n - 1})"
          f"; last column: narrow-float elementwise ops per program")
    print(f"  {'population':<22} " + "  ".join(f"{k[:7]:>7}" for k in MOTIFS) + "  narrow/p")
    measure("fuzz reference", lambda s: generate_program(s, caps=ref), args.n, args.seed)
    measure("fuzz narrow", lambda s: generate_program(s, caps=NARROW), args.n, args.seed)
    measure("fuzz bf16-kernels", lambda s: generate_program(s, caps=KERNELS), args.n, args.seed)
    measure("plain", generate_program, args.n, args.seed)
    measure("malformed-input fuzz", fuzz_ir_program, args.n, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
