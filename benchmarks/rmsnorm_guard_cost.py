"""What RMSNorm's strict-contract guard costs on the GPU (issue 35): one process, one table.

    python benchmarks/rmsnorm_guard_cost.py

The bf16 RMSNorm that the Triton backend renders (``lower_nn._rmsnorm_f32``, D279) computes
``(x·q)·w`` for each element, or ``x·(q·w)`` where ``x·q`` sank below 2^-138 under a weight of
16 or more: a per-element select whose two products and three conditions are about a fifth of
the kernel's instructions (counted in its SASS). This times, at the benchmark's shapes, the
kernel as rendered beside the same kernel with the select replaced by its common branch
(``(x·q)·w`` always: NOT the contract's kernel, never used, only timed here to size the guard)
and beside a device copy, so the note on a missed target can say how much the guard costs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import bench_gpu as B

from tilefoundry.compiler import triton_tune
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.compiler.render_triton import render
from tilefoundry.compiler.triton_backend import TRITON_TILES, DeviceRun, TritonExecutable

_SELECT = re.compile(r"(v__\d+) = tl\.broadcast_to\(tl\.where\((v__\d+), (v__\d+), (v__\d+)\), "
                     r"(\[\d+, \d+\])\)\n(\s+v__\d+ = tl\.broadcast_to\(_tf_round_bf16_hw)")


def main() -> int:
    import torch

    rng = np.random.default_rng(0)
    print("| shape | copy GB/s | as rendered % of copy | without the guard % of copy |")
    print("|---|---|---|---|")
    for r, c in B.ROW_SHAPES:
        src_t = torch.empty((r, c), dtype=torch.bfloat16, device="cuda").normal_()
        dst = torch.empty_like(src_t)
        t_copy = B._time(lambda d=dst, s=src_t: d.copy_(s))
        bw_copy = 4 * r * c / t_copy / 1e6
        xs = B._inputs("rmsnorm", (r, c), rng)
        shapes = [x.shape for x in xs]
        cfg = triton_tune.tuned_config(B.PROGRAMS, "rmsnorm", shapes, TRITON_TILES)
        comp = tf_compile(B.PROGRAMS, "rmsnorm", shapes, "triton-cuda", cfg=cfg)
        src = render(comp.program, launch=dict(cfg.launch))
        m = _SELECT.search(src)
        if m is None:
            print(f"| {r}x{c} | the guard's select was not found in the rendered kernel |")
            continue
        bare = src.replace(m.group(0), f"{m.group(1)} = tl.broadcast_to({m.group(3)}, "
                                       f"{m.group(5)})\n{m.group(6)}")
        nbytes = sum(x.nbytes for x in xs) + xs[0].nbytes
        row = [f"{r}x{c}", f"{bw_copy:,.0f}"]
        for source in (src, bare):
            run = DeviceRun(TritonExecutable(comp.program, source, "cuda"), xs)
            ms = B._time(run.launch)
            row.append(f"{nbytes / ms / 1e6 / bw_copy:.0%}")
        print("| " + " | ".join(row) + " |", flush=True)
        del src_t, dst
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
