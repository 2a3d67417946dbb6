"""The planted-bug suite measured: per bug, the validator's outcome on its sample, the
counterexample's size (input elements) and the time; with ``--jsonl-dir`` also the detection by
conformance runs of the planted backends (files ``<kind>_<bug>.jsonl``, e.g. ``q_swap_operands
.jsonl`` from ``tilefoundry conformance run --backend tilefoundry.validate.planted:swap_operands
--tier quick --jsonl ...``, ``f_<bug>.jsonl`` from ``conformance fuzz``).

The fuse-pass bugs (``PLANTED``) are checked by the ``fuse`` pass of their samples; the mesh bugs
(``MESH_PLANTED``) by the ``lower`` check of a sharded program (``check_mesh_lowering``: the
sample's mesh program, launches not fused, with the bug planted) at the default bounds' solver
limit.

    .venv/bin/python benchmarks/bench_planted.py [--jsonl-dir DIR]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from tilefoundry.compiler.fusion import fuse
from tilefoundry.validate.passes import Bounds, validate_program
from tilefoundry.validate.planted import MESH_PLANTED, PLANTED, SAMPLES, mesh_sample, plant


def _detection(path: Path) -> str:
    if not path.exists():
        return "not run"
    verdicts = collections.Counter()
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if "verdict" in r:
            verdicts[r["verdict"]] += 1
    bad = sum(v for k, v in verdicts.items() if k in ("FAIL", "ERROR", "CRASH"))
    return f"{bad}/{sum(verdicts.values())} non-PASS ({dict(verdicts)})"


def _mesh_outcome(bug: str) -> Any:
    """The ``lower`` check of mesh bug ``bug``'s sample with the bug planted."""
    from tilefoundry.compiler.lower_mesh import compile_mesh
    from tilefoundry.errors import InvalidArgumentError
    from tilefoundry.validate.mesh_passes import check_mesh_lowering

    m, e, xs = mesh_sample(bug)
    c = compile_mesh(m, e, [tuple(x.shape) for x in xs], "interp", fuse=False)
    bad = plant(bug, c.program, verify=False)
    if bad is None:
        raise InvalidArgumentError(f"mesh planted bug {bug!r}: its sample has no site for it; "
                                   f"name another quick-tier case in MESH_SAMPLES")
    return check_mesh_lowering(m, e, c.hir, dataclasses.replace(c, program=bad),
                               timeout_ms=Bounds().timeout_ms)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jsonl-dir", default=None)
    args = ap.parse_args(argv)
    for bug in [*PLANTED, *MESH_PLANTED]:
        if bug in MESH_PLANTED:
            o = _mesh_outcome(bug)
        else:
            m, e, shapes = SAMPLES[bug]
            rep = validate_program(m, e, shapes, fuse_pass=lambda p, c, b=bug:
                                   plant(b, fuse(p, c)) or fuse(p, c))
            o = next(p.outcome for p in rep.passes if p.name == "fuse")
        size = o.counterexample.elements if o.counterexample is not None else 0
        line = f"{bug:<26} {o.status:<16} cx {size:>3} elements  {o.seconds:6.2f} s"
        if args.jsonl_dir:
            d = Path(args.jsonl_dir)
            line += f"  | quick: {_detection(d / f'q_{bug}.jsonl')}" \
                    f"  | fuzz: {_detection(d / f'f_{bug}.jsonl')}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
