"""Compiler SIMD C target throughput and compile times, side by side with peers (not a test).

    .venv/bin/python benchmarks/bench_compiler.py [--n 16777216] [--rows 4096] [--cols 4096]
        [--repeat 3] [--seed 0] [--torch-threads N] [--quick]

Every program is built with the DSL and compiled by ``compile(module, entry, shapes,
target="simd")``; the timed call is ``compiled([inputs])`` (input copies and output read-back
included, as a caller sees it).

(a) a fused 6-op f32 elementwise chain on ``--n`` elements (default 2^24):

        t1 = x * y   t2 = t1 + x   t3 = t2 - y   t4 = maximum(t3, x)   t5 = t4 / y   t6 = -t5

    next to numpy f32 with the same six ufuncs (np.multiply, np.add, np.subtract, np.maximum,
    np.divide, np.negative); ns per element and the ratio (issue target: >= 2.5x faster).
(b) the same chain in bf16, next to the same ufuncs on ``ml_dtypes.bfloat16`` arrays (target:
    >= 10x faster, issue 35 item 4).
(c) RMSNorm over the last axis, bf16, ``--rows`` x ``--cols`` (default 4096 x 4096,
    ``rms_norm(x, w, eps=1e-6)``), next to the reference evaluator and torch CPU
    ``torch.nn.functional.rms_norm`` in bf16.
(d) softmax over the last axis, bf16, same size, next to the reference evaluator and torch CPU
    ``torch.softmax(x, -1)`` in bf16 (target: >= 1.0x torch, issue 35 item 4).
(e) compile times per program: cold (``compile`` with ``$TILEFOUNDRY_CACHE`` pointing at a fresh
    empty folder, so the C compiler runs) and warm (``c_runtime.build.forget_loaded()`` then
    ``compile`` again: the shared object comes from the cache), total and per kernel.

The whole run uses a temporary cache folder (removed at the end), never the user's cache. The
C toolchain is described once per process (``--version``, ``-march`` macros); that probe is
timed on its own and not counted in the cold compiles. Run times are the median of
``--repeat`` runs after one warm-up run; compile times are the median of ``--repeat`` cold /
warm pairs. A case whose program the SIMD target cannot compile yet (``NotSupportedError``)
prints one "not supported yet" line and the others go on. Before timing, the SIMD result of
each program is judged by the oracle (``oracle.compare.check``, the strict contract) on a
sub-problem the full run contains exactly: the first 65,536 elements of the chains, the first
and last 64 rows of the row kernels (their outputs taken from the full-size run).

Cases (a)-(d) run twice in one process, under **one thread** (``TILEFOUNDRY_NUM_THREADS=1``
for the C code, ``torch.set_num_threads(1)``) and under **all threads** (the variable unset:
the CPUs the process may use; torch with ``--torch-threads``, default all cores); numpy is
single-threaded in both. A summary table with every ratio, target and verdict closes the run,
after the 1-minute load average at the start and the end (the machine may be shared). The chains also report a "storage preallocated" line: the C kernel called on
storage allocated once, next to numpy writing every result into one preallocated array
(``out=``) — the compute alone, without either side's output allocation.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np

import tilefoundry.compiler.simd_backend  # noqa: F401  (registers the "simd" target)
from tilefoundry.compiler.c_runtime import build as c_build
from tilefoundry.compiler.errors import NotSupportedError
from tilefoundry.compiler.pipeline import Compiled
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.oracle.compare import check
from tilefoundry.semantics.dsl import (
    DimVar,
    Tensor,
    bf16,
    f32,
    func,
    maximum,
    module,
    neg,
    rms_norm,
    softmax,
)
from tilefoundry.semantics.evaluator.core import evaluate

N = DimVar("N", 1, 1 << 30)
R = DimVar("R", 1, 1 << 16)
C = DimVar("C", 1, 1 << 16)
EPS = 1e-6
N_OPS = 6
BF = ml_dtypes.bfloat16


# ---------------------------------------------------------------------------------------------
# programs
# ---------------------------------------------------------------------------------------------
@func
def chain_f32(x: Tensor[(N,), f32], y: Tensor[(N,), f32]) -> Tensor[(N,), f32]:
    t1 = x * y
    t2 = t1 + x
    t3 = t2 - y
    t4 = maximum(t3, x)
    t5 = t4 / y
    return neg(t5)


@func
def chain_bf16(x: Tensor[(N,), bf16], y: Tensor[(N,), bf16]) -> Tensor[(N,), bf16]:
    t1 = x * y
    t2 = t1 + x
    t3 = t2 - y
    t4 = maximum(t3, x)
    t5 = t4 / y
    return neg(t5)


@func
def rmsnorm_rows(x: Tensor[(R, C), bf16], w: Tensor[(C,), bf16]) -> Tensor[(R, C), bf16]:
    return rms_norm(x, w, eps=1e-6)


@func
def softmax_rows(x: Tensor[(R, C), bf16]) -> Tensor[(R, C), bf16]:
    return softmax(x, axis=-1)


PROGRAMS = module(chain_f32, chain_bf16, rmsnorm_rows, softmax_rows)


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def median_time(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def numpy_chain(x, y):
    t = np.multiply(x, y)
    t = np.add(t, x)
    t = np.subtract(t, y)
    t = np.maximum(t, x)
    t = np.divide(t, y)
    return np.negative(t)


def numpy_chain_into(x, y, t):
    """The chain with every result written into the preallocated ``t`` (no allocation)."""
    np.multiply(x, y, out=t)
    np.add(t, x, out=t)
    np.subtract(t, y, out=t)
    np.maximum(t, x, out=t)
    np.divide(t, y, out=t)
    return np.negative(t, out=t)


def kernel_only(compiled: Compiled, inputs: list[np.ndarray]):
    """A callable running the compiled C on storage allocated once (inputs, temporaries,
    outputs reused across calls): the kernel's own time, without allocating the output."""
    import ctypes

    ex = compiled.executable
    st = ex.storage(inputs)
    arrays = [st[n] for n in ex.order]
    ptrs = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    arg = ctypes.cast(ptrs, ctypes.c_void_p)

    def call(keep=(arrays, ptrs)):  # the storage and the pointer table live with the callable
        ex.fn(arg)

    return call


def bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def ratio_text(ours: float, peer: float, peer_name: str) -> str:
    r = peer / ours
    if r >= 1.0:
        return f"tilefoundry is {r:.2f}x faster than {peer_name}"
    return f"tilefoundry is {1.0 / r:.2f}x slower than {peer_name}"


def ratio(ours: float, peer: float) -> float:
    """peer / ours: > 1 means tilefoundry is faster."""
    return peer / ours


def to_torch(torch, a: np.ndarray):
    if a.dtype == BF:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def say(line: str = "") -> None:
    print(line, flush=True)


# ---------------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------------
#: (case, threads, ours ms, peer name, peer ms, target ratio or None, verdict) per timed row
SUMMARY: list[tuple[str, str, float, str, float, float | None, str]] = []


def verdict(entry: str, inputs: list[np.ndarray], observed) -> str:
    """The oracle's verdict (strict contract) on ``observed``."""
    v = check(PROGRAMS, entry, inputs, observed)
    return v.status if v.status == "PASS" else f"{v.status}: {v.message[:160]}"


def rows_sub(a: np.ndarray, n: int = 64) -> np.ndarray:
    """The first and the last ``n`` rows (a row kernel's result on them is the full run's)."""
    return np.concatenate([a[:n], a[-n:]]) if a.ndim == 2 and a.shape[0] > 2 * n else a


def case_chain(label: str, dtype, n: int, rng, args, target: float, threads: str) -> None:
    entry = "chain_f32" if dtype == np.float32 else "chain_bf16"
    name = "f32" if dtype == np.float32 else "bf16"
    x = rng.standard_normal(n).astype(np.float32).astype(dtype)
    y = (rng.standard_normal(n).astype(np.float32) + np.float32(3.0)).astype(dtype)
    compiled: Compiled = tf_compile(PROGRAMS, entry, [(n,), (n,)], target="simd")
    full = np.asarray(compiled([x, y]))
    m = min(n, 1 << 16)
    judged = verdict(entry, [x[:m], y[:m]], full[:m])  # elementwise: a prefix is exact
    t_ours = median_time(lambda: compiled([x, y]), args.repeat)
    peer = f"numpy {name}" + (" (ml_dtypes)" if dtype == BF else "")
    t_np = median_time(lambda: numpy_chain(x, y), args.repeat)
    say(f"case {label} [{threads} thread(s)]: 6-op elementwise chain, {name}, n = {n:,} "
            f"({len(compiled.kernels)} kernel(s))")
    say(f"  {'tilefoundry simd':<26} {t_ours * 1e3:10.2f} ms  {t_ours / n * 1e9:8.3f} ns/el")
    say(f"  {peer:<26} {t_np * 1e3:10.2f} ms  {t_np / n * 1e9:8.3f} ns/el")
    r = ratio(t_ours, t_np)
    say(f"  {ratio_text(t_ours, t_np, peer)}  (target >= {target:g}x faster: "
            f"{'met' if r >= target else 'NOT met'})")
    run_c = kernel_only(compiled, [x, y])
    t_k = median_time(run_c, args.repeat)
    into = np.empty(n, dtype)
    t_npk = median_time(lambda: numpy_chain_into(x, y, into), args.repeat)
    say(f"  storage preallocated (no output allocation on either side): tilefoundry "
        f"{t_k * 1e3:.2f} ms, numpy with out= {t_npk * 1e3:.2f} ms; "
        f"{ratio_text(t_k, t_npk, peer + ' (out=)')}")
    say(f"  oracle on the first {m:,} elements of this run's output: {judged}")
    SUMMARY.append((f"{label}: chain {name}", threads, t_ours, peer, t_np, target, judged))


def case_rows(label: str, kind: str, r: int, c: int, rng, args, torch, threads: str,
              evaluator: bool) -> None:
    entry = "rmsnorm_rows" if kind == "rmsnorm" else "softmax_rows"
    title = "RMSNorm" if kind == "rmsnorm" else "softmax"

    def inputs(rr: int, cc: int) -> list[np.ndarray]:
        x = rng.standard_normal((rr, cc)).astype(np.float32).astype(BF)
        if kind == "softmax":
            return [x]
        w = (np.float32(1.0) + np.float32(0.1) * rng.standard_normal(cc).astype(np.float32))
        return [x, w.astype(BF)]

    ins = inputs(r, c)
    compiled: Compiled = tf_compile(PROGRAMS, entry, [a.shape for a in ins], target="simd")
    full = np.asarray(compiled(ins))
    subs = [rows_sub(ins[0]), *ins[1:]]
    judged = verdict(entry, subs, rows_sub(full))
    t_ours = median_time(lambda: compiled(ins), args.repeat)
    rows = [("tilefoundry simd", t_ours)]
    if evaluator:
        t_ev = median_time(lambda: evaluate(PROGRAMS, entry, ins), args.repeat)
        rows.append(("reference evaluator", t_ev))
    if torch is not None:
        tins = [to_torch(torch, a) for a in ins]
        if kind == "rmsnorm":
            f = torch.nn.functional.rms_norm
            t_t = median_time(lambda: f(tins[0], (c,), tins[1], eps=EPS), args.repeat)
        else:
            t_t = median_time(lambda: torch.softmax(tins[0], -1), args.repeat)
        rows.append(("torch CPU bf16", t_t))
        SUMMARY.append((f"{label}: {title} rows bf16", threads, t_ours, "torch CPU bf16", t_t,
                        1.0 if kind == "softmax" else None, judged))
    say(f"case {label} [{threads} thread(s)]: {title} rows, bf16, {r} x {c} over the last axis "
            f"({len(compiled.kernels)} kernel(s))")
    for impl, t in rows:
        say(f"  {impl:<26} {t * 1e3:10.2f} ms  {r / t:12.0f} rows/s")
    for impl, t in rows[1:]:
        say(f"  {ratio_text(t_ours, t, impl)}")
    say(f"  oracle on the first and last 64 rows of this run's output: {judged}")


def summary() -> None:
    say("summary (ratio = peer time / ours: > 1 means tilefoundry is faster)")
    say(f"  {'case':<24} {'threads':>7} {'ours ms':>9} {'peer':<24} {'peer ms':>9} "
        f"{'ratio':>7} {'target':>7} {'met':>4}  verdict")
    for case, th, ours, peer, tp, target, judged in SUMMARY:
        r = tp / ours
        met = "-" if target is None else ("yes" if r >= target else "NO")
        tgt = "-" if target is None else f">={target:g}"
        say(f"  {case:<24} {th:>7} {ours * 1e3:9.2f} {peer:<24} {tp * 1e3:9.2f} {r:7.2f} "
            f"{tgt:>7} {met:>4}  {judged}")


def set_threads(threads: str, torch, torch_all: int) -> None:
    """``"1"``: one C thread and one torch thread; ``"all"``: the C default (the variable
    unset) and ``torch_all`` torch threads."""
    if threads == "1":
        os.environ["TILEFOUNDRY_NUM_THREADS"] = "1"
    else:
        os.environ.pop("TILEFOUNDRY_NUM_THREADS", None)
    if torch is not None:
        torch.set_num_threads(1 if threads == "1" else torch_all)


def compile_times(entry: str, shapes: list[tuple[int, ...]], repeat: int,
                  root: Path) -> tuple[float, float, int]:
    """(median cold seconds, median warm seconds, kernel count)."""
    colds, warms, nk = [], [], 0
    for _ in range(repeat):
        fresh = Path(tempfile.mkdtemp(prefix="cold-", dir=root))
        os.environ["TILEFOUNDRY_CACHE"] = str(fresh)
        c_build.forget_loaded()
        t = time.perf_counter()
        compiled = tf_compile(PROGRAMS, entry, shapes, target="simd")
        colds.append(time.perf_counter() - t)
        c_build.forget_loaded()
        t = time.perf_counter()
        compiled = tf_compile(PROGRAMS, entry, shapes, target="simd")
        warms.append(time.perf_counter() - t)
        nk = len(compiled.kernels)
    return statistics.median(colds), statistics.median(warms), nk


def run_case(label: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except NotSupportedError as e:
        say(f"case {label}: not supported yet: {e}")
    except Exception as e:  # report and go on with the other cases
        say(f"case {label}: FAILED: {type(e).__name__}: {e}")


def timed_cases(threads: str, args, torch) -> None:
    """Cases a-d under one thread setting (the same seeded inputs under each)."""
    rng = np.random.default_rng(args.seed)
    r, c, first = args.rows, args.cols, threads == "1"
    run_case("a", lambda: case_chain("a", np.float32, args.n, rng, args, 2.5, threads))
    say("")
    run_case("b", lambda: case_chain("b", BF, args.n, rng, args, 10.0, threads))
    say("")
    run_case("c", lambda: case_rows("c", "rmsnorm", r, c, rng, args, torch, threads, first))
    say("")
    run_case("d", lambda: case_rows("d", "softmax", r, c, rng, args, torch, threads, first))
    say("")


# ---------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1 << 24, help="chain length (default 2^24)")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torch-threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--quick", action="store_true",
                    help="smoke sizes (n = 2^16, rows 64 x 256)")
    args = ap.parse_args()
    if args.quick:
        args.n, args.rows, args.cols = 1 << 16, 64, 256
    try:
        import torch

        torch.set_num_threads(args.torch_threads)
    except ImportError:  # pragma: no cover
        torch = None

    omp = os.environ.get("TILEFOUNDRY_NUM_THREADS")
    with tempfile.TemporaryDirectory(prefix="tf-bench-cache-") as tmp:
        root = Path(tmp)
        os.environ["TILEFOUNDRY_CACHE"] = str(root / "main")
        t = time.perf_counter()
        tc = c_build.toolchain()
        t_probe = time.perf_counter() - t
        say(f"tilefoundry SIMD C target vs peers; median of {args.repeat} after 1 warm-up; "
                f"seed {args.seed}; {os.cpu_count()} cores; load average at start "
                f"{os.getloadavg()[0]:.2f}")
        say(f"threads: each of cases a-d under 1 thread (TILEFOUNDRY_NUM_THREADS=1, torch 1) "
                f"and all threads (the variable unset: C uses the CPUs the process may use; "
                f"torch {args.torch_threads}); numpy single-threaded; "
                f"TILEFOUNDRY_NUM_THREADS was {omp if omp is not None else 'unset'}")
        say(f"C compiler: {tc.version.splitlines()[0] if tc.version else tc.path} "
                f"(toolchain probe {t_probe:.3f} s, once per process, not counted below)")
        say("")
        r, c = args.rows, args.cols
        for threads in ("1", "all"):
            set_threads(threads, torch, args.torch_threads)
            timed_cases(threads, args, torch)
        set_threads("all", torch, args.torch_threads)
        if omp is not None:
            os.environ["TILEFOUNDRY_NUM_THREADS"] = omp
        summary()
        say(f"load average at the end of cases a-d: {os.getloadavg()[0]:.2f}")
        say("")
        say(f"case e: compile times (median of {args.repeat}; cold = fresh empty cache "
                f"folder, warm = forget_loaded() then compile again)")
        say(f"  {'program':<14} {'shapes':<24} {'kernels':>7} {'cold (s)':>9} "
                f"{'cold/kernel':>11} {'warm (s)':>9} {'warm/kernel':>11}")
        for entry, shapes in (("chain_f32", [(args.n,), (args.n,)]),
                              ("chain_bf16", [(args.n,), (args.n,)]),
                              ("rmsnorm_rows", [(r, c), (c,)]),
                              ("softmax_rows", [(r, c)])):
            shp = " ".join("x".join(map(str, s)) for s in shapes)

            def one(entry=entry, shapes=shapes, shp=shp) -> None:
                cold, warm, nk = compile_times(entry, shapes, args.repeat, root)
                per = max(nk, 1)
                say(f"  {entry:<14} {shp:<24} {nk:>7} {cold:9.3f} {cold / per:11.3f} "
                        f"{warm:9.4f} {warm / per:11.4f}")

            run_case(f"e ({entry})", one)
        c_build.forget_loaded()


if __name__ == "__main__":
    main()
