"""A byte-for-byte snapshot of what the renderers emit for the conformance quick tier (not a
test; a tool for refactoring a renderer without changing its output).

    .venv/bin/python benchmarks/render_snapshot.py --out /tmp/render-main.tsv
    .venv/bin/python benchmarks/render_snapshot.py --out /tmp/render-new.tsv \\
        --compare /tmp/render-main.tsv

Every quick-tier case of ``build_catalog()`` (``--tier all``: every case) is compiled through the pipeline (sharded ones
through ``lower_mesh.compile_mesh``, one render per launch) with each backend's tile
configuration, and each kernel-IR program it renders is given to ``render_c.render`` (SIMD C,
``SIMD_TILES``), ``render_cuda.render`` (``CUDA_TILES``) and ``render_triton.render`` with
``interpret=False`` and ``interpret=True`` (``TRITON_TILES``). One line per (case, renderer):
the sha256 of the rendered texts in render order, or the ``NotSupportedError`` of the first
refusal (``N/S``), or the compile error that stopped the case before any render (``ERR``).
``--compare`` prints every line that differs and exits 1 when any does.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

#: renderer -> the tile configuration its backend lowers with (resolved in the worker)
RENDERERS = ("simd", "cuda", "triton", "triton-interp")


def _renders() -> dict[str, tuple[object, Callable]]:
    """Fake pipeline targets' (cfg, [(renderer, render function)]) keyed by target name: the
    renderers are looked up at call time, so the script measures the code on disk."""
    from tilefoundry.compiler import render_c, render_cuda, render_triton
    from tilefoundry.compiler.cuda_backend import CUDA_TILES
    from tilefoundry.compiler.simd_backend import SIMD_TILES
    from tilefoundry.compiler.triton_backend import TRITON_TILES

    return {
        "snap-simd": (SIMD_TILES, [("simd", lambda p: render_c.render(p))]),
        "snap-cuda": (CUDA_TILES, [("cuda", lambda p: render_cuda.render(p))]),
        "snap-triton": (TRITON_TILES, [
            ("triton", lambda p: render_triton.render(p, interpret=False)),
            ("triton-interp", lambda p: render_triton.render(p, interpret=True))]),
    }


def _case_lines(index: int) -> list[str]:
    import numpy as np

    from tilefoundry.compiler import pipeline
    from tilefoundry.compiler.backends import KernelInterpBackend, _mesh_inputs
    from tilefoundry.compiler.errors import NotSupportedError

    case = _CASES[index]
    lines = []
    try:
        module, entry, inputs = case.build()
    except Exception as e:  # recorded and compared like any other outcome
        return [f"{case.id}\t{r}\tERR build {type(e).__name__}: {e}" for r in RENDERERS]
    for tname, (cfg, renders) in _TARGETS.items():
        got: dict[str, list[str]] = {r: [] for r, _ in renders}
        refused: dict[str, str] = {}

        def render(program, renders=renders, got=got, refused=refused) -> str:
            for r, fn in renders:
                if r in refused:
                    continue
                try:
                    got[r].append(hashlib.sha256(fn(program).encode()).hexdigest())
                except NotSupportedError as e:
                    refused[r] = f"N/S {e}"
            return ""

        pipeline.TARGETS[tname] = pipeline.Target(tname, render, lambda p, s: object(), cfg)
        err = None
        try:
            backend = KernelInterpBackend(cfg=cfg)
            backend.target = tname
            prog = backend.compile(module, entry)
            ins = _mesh_inputs(prog, inputs) if prog.mesh else inputs
            backend.compiled_for(prog, [tuple(np.shape(x)) for x in ins])
        except Exception as e:
            err = f"{type(e).__name__}: {e}".replace("\n", " ")
        for r, _ in renders:
            if r in refused:
                out = refused[r]
            elif got[r]:
                out = hashlib.sha256("\n".join(got[r]).encode()).hexdigest() + \
                    f" ({len(got[r])} renders)" + (f" then ERR {err}" if err else "")
            else:
                out = f"ERR {err}" if err else "ERR no kernel rendered"
            lines.append(f"{case.id}\t{r}\t{out.replace(chr(10), ' ').replace(chr(9), ' ')}")
    return lines


_CASES: list = []
_TARGETS: dict = {}


def _init(tier: str) -> None:
    from tilefoundry.conformance.catalog import build_catalog

    _CASES[:] = [c for c in build_catalog() if tier in ("all", c.tier)]
    _TARGETS.update(_renders())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--compare", type=Path, default=None)
    ap.add_argument("--jobs", type=int, default=multiprocessing.cpu_count())
    ap.add_argument("--tier", choices=("quick", "all"), default="quick",
                    help="the quick tier (default) or every case of the catalog")
    ap.add_argument("--limit", type=int, default=None, help="only the first N quick cases")
    args = ap.parse_args()
    _init(args.tier)
    n = len(_CASES) if args.limit is None else min(args.limit, len(_CASES))
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(args.jobs) as pool:
        chunks = pool.map(_case_lines, range(n), chunksize=8)
    lines = [ln for ch in chunks for ln in ch]
    args.out.write_text("\n".join(lines) + "\n")
    counts: Counter = Counter()
    for ln in lines:
        _, r, out = ln.split("\t", 2)
        counts[(r, out.split(" ", 1)[0] if out[:3] in ("N/S", "ERR") else "rendered")] += 1
    print(f"{n} cases ({args.tier})")
    for r in RENDERERS:
        print(f"  {r:14s} rendered {counts[(r, 'rendered')]:5d}  refused (N/S) "
              f"{counts[(r, 'N/S')]:5d}  not compiled (ERR) {counts[(r, 'ERR')]:5d}")
    if args.compare is None:
        return 0
    old = args.compare.read_text().splitlines()
    diffs = [(a, b) for a, b in zip(old, lines, strict=False) if a != b]
    if len(old) != len(lines):
        print(f"line counts differ: {len(old)} before, {len(lines)} now")
    for a, b in diffs[:50]:
        print(f"- {a}\n+ {b}")
    print(f"differences: {len(diffs) + abs(len(old) - len(lines))}")
    return 1 if diffs or len(old) != len(lines) else 0


if __name__ == "__main__":
    sys.exit(main())
