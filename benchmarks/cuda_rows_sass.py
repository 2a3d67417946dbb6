"""Static profile of the CUDA backend's row kernels in the SASS of sm_90, on a machine without a
GPU (issue 35 item 1; the CUDA counterpart of ``triton_rows_sass.py``; D482-D484).

Each row program of ``bench_gpu.py`` is compiled for the bench's shapes by the ``cuda`` target's
renderer twice — with the row mapping (``render_cuda_rows``, "after") and with it switched off
(``KernelCuda.ROWS_MAPPING = False``: the block / lane mappings, "before") — and each source is
compiled by ``nvcc -arch=sm_90 -cubin`` with NVRTC's options (``cuda_build.OPTIONS``). Per
kernel it prints the mapping and threads a block, the registers a thread, the 16-byte global
loads / stores (``LDG.E.128`` / ``STG.E.128``), all global loads / stores, the barriers
(``BAR.SYNC``), the warp shuffles (``SHFL``), the local-memory traffic (``LDL`` / ``STL``:
spills) and the spill bytes ptxas reports::

    .venv/bin/python benchmarks/cuda_rows_sass.py [--entries rmsnorm softmax_rows] [--nvcc PATH]

It measures no speed: only a device run does (``bench_gpu.py --rows``).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import FUSED_ENTRIES, ROW_ENTRIES, ROW_SHAPES, _inputs, _module

from tilefoundry.compiler import render_cuda
from tilefoundry.compiler.c_runtime.build import RUNTIME_DIR
from tilefoundry.compiler.cuda_build import OPTIONS
from tilefoundry.compiler.pipeline import compile as tf_compile


def source(entry: str, shape: tuple[int, int], rows: bool) -> str:
    """The ``cuda`` target's source of one bench program (the row mapping on or off); rendered
    through ``cuda-host`` (same renderer and tiles, no NVRTC needed)."""
    xs = _inputs(entry, shape, np.random.default_rng(0))
    old = render_cuda.KernelCuda.ROWS_MAPPING
    render_cuda.KernelCuda.ROWS_MAPPING = rows
    try:
        comp = tf_compile(_module(entry), entry, [x.shape for x in xs], "cuda-host")
    finally:
        render_cuda.KernelCuda.ROWS_MAPPING = old
    return comp.executable.source


def _cuobjdump(nvcc: str) -> str:
    """nvcc's cuobjdump, else the one on PATH, else the one Triton ships."""
    for t in (Path(nvcc).with_name("cuobjdump"), Path(shutil.which("cuobjdump") or "/-")):
        if t.exists():
            return str(t)
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def sass_profile(src: str, nvcc: str) -> list[dict]:
    """Per kernel of ``src``: its plan entry and counts from its SASS."""
    plan = render_cuda.parse_plan(src)
    with tempfile.TemporaryDirectory() as d:
        cu, cubin = Path(d, "k.cu"), Path(d, "k.cubin")
        cu.write_text(src)
        opts = [o.replace("--prec-div=true", "-prec-div=true")
                .replace("--prec-sqrt=true", "-prec-sqrt=true").replace("--ftz=false", "-ftz=false")
                for o in OPTIONS]
        r = subprocess.run([nvcc, "-arch=sm_90", "-cubin", *opts, "-I", str(RUNTIME_DIR),
                            "-Xptxas", "-v", "-o", str(cubin), str(cu)],
                           capture_output=True, text=True, timeout=900)
        if r.returncode:
            raise RuntimeError(f"nvcc failed: {r.stderr[-2000:]}")
        ptxas = r.stderr
        tool = _cuobjdump(nvcc)
        sass = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
        res = subprocess.run([tool, "-res-usage", str(cubin)], capture_output=True, text=True,
                             check=True).stdout
    out = []
    for name, k in plan["kernels"].items():
        fn = k["fn"]
        m = re.search(r"Function " + fn + r":[^\n]*\n[^\n]*REG:(\d+)", res)
        part = re.split(r"\n\s*Function : ", sass)
        body = next((p for p in part if p.startswith(fn)), "")
        spill = re.search(r"Compiling entry function '" + fn + r"'.*?(\d+) bytes spill stores, "
                          r"(\d+) bytes spill loads", ptxas, re.S)
        out.append({"kernel": name, "mapping": k["mapping"],
                    "threads": render_cuda.kernel_threads(plan, k),
                    "regs": int(m.group(1)) if m else None,
                    "LDG.128": body.count("LDG.E.128"), "STG.128": body.count("STG.E.128"),
                    "LDG": len(re.findall(r"\bLDG\.", body)),
                    "STG": len(re.findall(r"\bSTG\.", body)),
                    "BAR.SYNC": body.count("BAR.SYNC"), "SHFL": len(re.findall(r"\bSHFL\.", body)),
                    "LDL/STL": len(re.findall(r"\b(?:LDL|STL)\b", body)),
                    "spill": f"{spill.group(1)}/{spill.group(2)}" if spill else "?"})
    return out


COLS = ("mapping", "threads", "regs", "LDG.128", "STG.128", "LDG", "STG", "BAR.SYNC", "SHFL",
        "LDL/STL", "spill")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", nargs="+", default=list(ROW_ENTRIES + FUSED_ENTRIES))
    ap.add_argument("--shapes", nargs="+", default=[f"{r}x{c}" for r, c in ROW_SHAPES])
    ap.add_argument("--nvcc", default=shutil.which("nvcc") or "/usr/local/bin/nvcc")
    a = ap.parse_args()
    print("| kernel | shape | when | " + " | ".join(COLS) + " |")
    print("|---|---|---|" + "---|" * len(COLS))
    for entry in a.entries:
        for s in a.shapes:
            shape = tuple(int(x) for x in s.split("x"))
            for when, rows in (("before", False), ("after", True)):
                for k in sass_profile(source(entry, shape, rows), a.nvcc):
                    print(f"| {entry} | {s} | {when} | " +
                          " | ".join(str(k[c]) for c in COLS) + " |", flush=True)


if __name__ == "__main__":
    main()
