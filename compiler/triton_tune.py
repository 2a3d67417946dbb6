"""The Triton backend's autotuner: tile sizes and launch options chosen by measurement on the
device, recorded so that a later run starts from the record (issue 17, D277).

A **candidate** is a ``TileConfig`` (the tile sizes the lowering cuts the domain into: elements
per tile of the parallel axes, the matmul's (M, N) block and K step) with launch options
(``num_warps``, ``num_stages``) for every kernel. ``tune`` compiles the program once per tile
configuration, runs each candidate resident on the GPU (``DeviceRun``), asks ``judge`` for the
oracle's verdict on the candidate's own output (a candidate whose result the oracle does not
PASS is never chosen, however fast), times the rest with ``triton.testing.do_bench`` (median)
and returns every measurement, fastest first.

``record`` writes the winner to a JSON table keyed by the program (``program_key``: the
module's printed text, the entry and the shapes, hashed): the user's table
``<cache>/triton/tuned.json``, or the shipped one, ``compiler/triton_tuned.json``, which holds
what was measured on an H200 for the benchmark programs. ``tuned_config`` reads the user's
table, then the shipped one; the ``triton-cuda`` target lowers with it whenever ``compile`` is
given no ``cfg`` (``pipeline.Target.cfg``), so a recorded program is not re-tuned. The
interpreter target (``triton``) never reads it: tile sizes change only speed there.

The choice changes speed only: every candidate is a lowering of the same program, each of its
results is one the contracts admit, and the chosen one is judged again by every conformance run.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tilefoundry.compiler.c_runtime.build import _private_dir, _write_atomic, cache_dir
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.ir import Module
from tilefoundry.semantics.printer import to_text as module_text

__all__ = ["SHIPPED", "Candidate", "candidates", "lookup", "program_key", "record", "tune",
           "tuned_config"]

#: the shipped record (measured on an H200: ``benchmarks/bench_gpu.py --tune``)
SHIPPED = Path(__file__).with_name("triton_tuned.json")
VERSION = 1


def user_table() -> Path:
    return _private_dir(cache_dir() / "triton") / "tuned.json"


def program_key(module: Module, entry: str, shapes: Iterable[Sequence[int]]) -> str:
    """The record's key of ``module[entry]`` at ``shapes``: a hash of the module's printed
    text, the entry and the shapes (any change to the program is another key)."""
    text = f"{module_text(module)}\n@{entry}\n{[tuple(int(n) for n in s) for s in shapes]}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Candidate:
    """Tile sizes and launch options to measure."""

    cfg: TileConfig
    num_warps: int
    num_stages: int
    #: the persistent TMA GEMM's options (``render_triton_gemm.GEMM_OPTIONS``) or the row
    #: kernels' (``render_triton.ROWS_OPTIONS``), if any
    extra: tuple[tuple[str, int], ...] = ()

    def config(self) -> TileConfig:
        """The TileConfig that carries the launch options to the renderer."""
        from dataclasses import replace

        return replace(self.cfg, launch=(("num_warps", self.num_warps),
                                         ("num_stages", self.num_stages), *self.extra))

    def describe(self) -> dict[str, Any]:
        c = self.cfg
        return {"tile_elems": c.tile_elems, "max_row": c.max_row, "k_block": c.k_block,
                "dot_mn": list(c.dot_mn) if c.dot_mn else None, "num_warps": self.num_warps,
                "num_stages": self.num_stages, **dict(self.extra)}


def candidates(kind: str, base: TileConfig) -> list[Candidate]:
    """The search space: ``rows`` (row and elementwise kernels: elements per tile, warps) or
    ``dot`` (matmul kernels: the (M, N) block, the K step, warps, pipeline stages)."""
    from dataclasses import replace

    if kind == "rows":
        # the row kernels' loads before their reductions (render_triton.hoisted) at the tile
        # size every row record chose, with each warp count
        return [Candidate(replace(base, tile_elems=t), w, 1)
                for t in (2048, 4096, 8192, 16384) for w in (4, 8, 16)] + \
            [Candidate(replace(base, tile_elems=2048), w, 1, (("hoist_loads", 1),))
             for w in (4, 8, 16)]
    if kind == "dot":
        return [Candidate(replace(base, dot_mn=mn, k_block=kb), w, st)
                for mn in ((128, 128), (128, 256), (256, 128)) for kb in (64,)
                for w in (4, 8) for st in (3, 4)]
    if kind == "gemm":  # the persistent TMA GEMM (render_triton_gemm, D410)
        return [Candidate(replace(base, dot_mn=mn, k_block=kb), w, st,
                          (("tma_flatten", fl), ("tma_split", sp)))
                for mn, kb, w, st, sp, fl in (
                    ((128, 256), 64, 8, 3, 1, 1), ((128, 256), 64, 8, 4, 1, 1),
                    ((128, 256), 64, 8, 3, 0, 0), ((128, 256), 64, 8, 4, 1, 0),
                    ((256, 128), 64, 8, 3, 0, 1), ((256, 128), 64, 8, 4, 1, 1),
                    ((128, 128), 64, 4, 4, 0, 1), ((128, 128), 128, 8, 3, 0, 1))]
    raise InvalidArgumentError(f"autotune: unknown candidate kind {kind!r}; expected 'rows', "
                               f"'dot' or 'gemm'")


def tune(module: Module, entry: str, inputs: Sequence[np.ndarray],
         space: Sequence[Candidate], judge: Callable[[np.ndarray], str],
         time_fn: Callable[[Callable[[], None]], float],
         progress: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Measure every candidate of ``space`` on the GPU; each result dict holds the
    candidate's settings, ``ms`` (None when not timed), ``verdict`` (``judge``'s, on the
    candidate's output) and ``error`` (a compile or launch failure). Fastest PASS first;
    ``progress`` sees each measured row as it is made (a log that survives a timeout)."""
    import torch

    from tilefoundry.compiler.pipeline import compile as tf_compile
    from tilefoundry.compiler.triton_backend import DeviceRun

    if not space:
        raise InvalidArgumentError("autotune: an empty candidate space")
    shapes = [x.shape for x in inputs]
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, cand in enumerate(space):
        row: dict[str, Any] = {**cand.describe(), "ms": None, "verdict": None, "error": None}
        t0 = time.perf_counter()
        try:
            comp = tf_compile(module, entry, shapes, "triton-cuda", cfg=cand.config())
            # a candidate whose kernels are an earlier one's (a tile size past the row's
            # extent, say) is not measured again
            first = seen.setdefault(comp.executable.source, i)
            if first != i:
                row["same_as"] = first
                row["seconds"] = round(time.perf_counter() - t0, 2)
                out.append(row)
                continue
            run = DeviceRun(comp.executable, inputs)
            run.launch()
            torch.cuda.synchronize()
            row["verdict"] = judge(run.outputs())
            row["kernels"] = len(comp.kernels)
            if row["verdict"] == "PASS":
                row["ms"] = time_fn(run.launch)
        except Exception as e:  # a candidate Triton rejects is recorded, not fatal
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        row["seconds"] = round(time.perf_counter() - t0, 2)
        out.append(row)
        if progress is not None:
            progress(row)
    return sorted(out, key=lambda r: (r["ms"] is None, r["ms"] or 0.0))  # stable: ties keep order


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return {}
    programs = data.get("programs")
    return programs if isinstance(programs, dict) else {}


def record(key: str, entry: str, shapes: Sequence[Sequence[int]], results: list[dict],
           device: str, path: Path | None = None) -> dict[str, Any]:
    """Write the fastest PASS of ``results`` for ``key`` into the table at ``path`` (the
    user's table by default), with every measurement beside it; returns the entry."""
    best = next((r for r in results if r["ms"] is not None and r["verdict"] == "PASS"), None)
    if best is None:
        raise InvalidArgumentError(f"autotune {entry}: no candidate PASSed the oracle; nothing "
                                   f"to record ({len(results)} measured)")
    path = path or user_table()
    programs = _read(path)
    programs[key] = {"entry": entry, "shapes": [list(map(int, s)) for s in shapes],
                     "device": device, "best": best, "measured": results}
    text = json.dumps({"version": VERSION, "programs": programs}, indent=1, sort_keys=True)
    _write_atomic(path, (text + "\n").encode())
    return programs[key]


def _config_of(best: dict[str, Any], base: TileConfig) -> TileConfig | None:
    from dataclasses import replace

    try:
        from tilefoundry.compiler.render_triton import ROWS_OPTIONS
        from tilefoundry.compiler.render_triton_gemm import GEMM_OPTIONS

        mn = best.get("dot_mn")
        extra = tuple((k, int(best[k])) for k in GEMM_OPTIONS + ROWS_OPTIONS if k in best)
        return replace(base, **{k: int(best[k]) for k in ("tile_elems", "max_row", "k_block")},
                       dot_mn=tuple(int(v) for v in mn) if mn else None,
                       launch=(("num_warps", int(best["num_warps"])),
                               ("num_stages", int(best["num_stages"])), *extra))
    except (KeyError, TypeError, ValueError):
        return None  # a damaged entry is ignored: the defaults are always valid


def tuned_config(module: Module, entry: str, shapes: Iterable[Sequence[int]],
                 base: TileConfig) -> TileConfig:
    """The recorded configuration of the program (the user's table, then the shipped one),
    else ``base``."""
    return lookup(module, entry, shapes, base)[0]


def lookup(module: Module, entry: str, shapes: Iterable[Sequence[int]],
           base: TileConfig) -> tuple[TileConfig, Path | None]:
    """``tuned_config`` and the table it came from (None: ``base``, no usable record)."""
    key = program_key(module, entry, shapes)
    for path in (user_table(), SHIPPED):
        hit = _read(path).get(key)
        if isinstance(hit, dict) and isinstance(hit.get("best"), dict):
            cfg = _config_of(hit["best"], base)
            if cfg is not None:
                return cfg, path
    return base, None
