"""Static profile of the Triton row kernels in the SASS of sm_90, on a machine without a GPU
(issue 35 item 2, finding F45).

Each row program of ``bench_gpu.py`` is compiled for the bench's shapes (launch options from
the shipped tuning record, as the device run takes them), rendered for the GPU, and compiled by
Triton's own ptxas for sm_90 (no GPU needed). Per kernel it prints the registers a thread, the
barriers (``BAR.SYNC``: one per block reduction round trip through shared memory), the 16-byte
global loads / stores, the SASS instruction count, and where each global load of the kernel
source sits relative to its reductions (a load issued after a block reduction waits out the
reduction before its latency starts)::

    .venv/bin/python benchmarks/triton_rows_sass.py [--entries rmsnorm softmax_rows]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import FUSED, PROGRAMS, ROW_SHAPES, _inputs, _module

from tilefoundry.compiler.pipeline import compile as tf_compile

_SCRIPT = textwrap.dedent('''
    import importlib.util, pathlib, subprocess, sys, tempfile
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    path, out = sys.argv[1], sys.argv[2]
    spec = importlib.util.spec_from_file_location("tf_rows_sass", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    bin_dir = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    texts = []
    for name, (fn, roots, n, types, launch) in m.KERNELS.items():
        sig = {f"P{i}": "*i16" for i in range(len(types))}
        attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(types))}
        k = triton.compile(ASTSource(fn=fn, signature=sig, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32),
                           options={**launch, "enable_fp_fusion": False})
        cubin = pathlib.Path(tempfile.mkdtemp()) / "k.cubin"
        cubin.write_bytes(k.asm["cubin"])
        res = subprocess.run([str(bin_dir / "cuobjdump"), "-res-usage", str(cubin)],
                             capture_output=True, text=True, check=True).stdout
        sass = subprocess.run([str(bin_dir / "cuobjdump"), "-sass", str(cubin)],
                              capture_output=True, text=True, check=True).stdout
        texts.append("#KERNEL " + name + " " + repr(launch) + "\\n" + res + "\\n" + sass)
    pathlib.Path(out).write_text("\\n".join(texts))
''')


def source_order(src: str) -> str:
    """The kernel body's loads and reductions in source order (``L`` load, ``R`` reduction)."""
    body = src[src.rfind("@triton.jit"):]
    marks = []
    for line in body.splitlines():
        if "tl.load(" in line:
            marks.append("L:" + line.split("tl.load(")[1].split(" ")[0])
        elif re.search(r"tl\.(max|min|sum|reduce)\(", line):
            marks.append("R")
    return " ".join(marks)


def profile(entry: str, shape: tuple[int, int]) -> str:
    xs = _inputs(entry, shape, __import__("numpy").random.default_rng(0))
    comp = tf_compile(_module(entry), entry, [x.shape for x in xs], "triton-cuda")
    src = comp.executable.source
    with tempfile.TemporaryDirectory() as d:
        sp, op, scr = Path(d, "k.py"), Path(d, "k.sass"), Path(d, "s.py")
        sp.write_text(src)
        scr.write_text(_SCRIPT)
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["TRITON_CACHE_DIR"] = str(Path(d, "cache"))
        r = subprocess.run([sys.executable, str(scr), str(sp), str(op)], env=env,
                           capture_output=True, text=True, timeout=600)
        if r.returncode:
            return f"{entry} {shape}: compile failed: {r.stderr[-500:]}"
        sass = op.read_text()
    regs = re.findall(r"REG:(\d+)", sass)
    n_ins = len(re.findall(r"/\*[0-9a-f]{4}\*/", sass))
    return (f"{entry:<18} {shape[0]}x{shape[1]:<6} {sass.split(chr(10))[0][8:]}: "
            f"regs {','.join(regs)}; BAR.SYNC {sass.count('BAR.SYNC')}; "
            f"LDG.E.128 {sass.count('LDG.E.128')}; STG.E.128 {sass.count('STG.E.128')}; "
            f"SASS instructions {n_ins}; source order: {source_order(src)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", nargs="+", default=["rmsnorm", "softmax_rows", "add_rmsnorm"])
    a = ap.parse_args()
    assert PROGRAMS and FUSED
    for entry in a.entries:
        for shape in ROW_SHAPES:
            print(profile(entry, shape), flush=True)


if __name__ == "__main__":
    main()
