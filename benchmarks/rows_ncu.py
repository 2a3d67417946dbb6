"""Nsight Compute profile of the row kernels of ``bench_gpu.py`` on the device (issue 35: "what
the kernel's profile shows" where a target is missed)::

    ncu --clock-control none --target-processes all -k regex:tf_k|_kernel \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        python benchmarks/rows_ncu.py rmsnorm 8192 8192 [--backend cuda|triton]

Each kernel of the program is launched twice (one warm-up, one profiled launch: ncu's
``--launch-skip``); the values are not judged here (``bench_gpu.py`` judges the same programs).
Without ncu the script only runs the kernels.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import _inputs, _module

from tilefoundry.compiler.pipeline import compile as tf_compile


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("entry")
    ap.add_argument("rows", type=int)
    ap.add_argument("cols", type=int)
    ap.add_argument("--backend", default="cuda", choices=("cuda", "triton"))
    args = ap.parse_args(argv)
    xs = _inputs(args.entry, (args.rows, args.cols), np.random.default_rng(0))
    if args.backend == "cuda":
        from tilefoundry.compiler.cuda_backend import CudaDeviceRun

        comp = tf_compile(_module(args.entry), args.entry, [x.shape for x in xs], "cuda")
        run = CudaDeviceRun(comp.executable, xs)
        for _ in range(2):
            run.launch()
        run.sync()
        run.close()
    else:
        import torch

        from tilefoundry.compiler.triton_backend import DeviceRun

        comp = tf_compile(_module(args.entry), args.entry, [x.shape for x in xs], "triton-cuda")
        run = DeviceRun(comp.executable, xs)
        for _ in range(2):
            run.launch()
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
