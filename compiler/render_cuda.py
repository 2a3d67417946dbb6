"""Render kernel-IR programs to CUDA C++: the CUDA backend's renderer (docs/decisions.md
D207-D211).

The CUDA spelling of the one C-family renderer (``render_c``): ``KernelCuda`` and
``ProgramCuda`` subclass ``render_c.KernelC`` / ``ProgramC`` and override only what a GPU spells
differently; every instruction, reduction, dot, tile loop, memory rule and numerics algorithm is
the SIMD C renderer's own code (so the two backends cannot drift apart).

**Grid mapping (D209).** One CUDA thread per program instance, ``THREADS`` threads per block,
``ceil(instances / THREADS)`` blocks: thread ``pid`` runs the kernel body for its tile exactly
as one iteration of the SIMD C renderer's instance loop does (its lanes in loops, its SSA arrays
in a per-thread slice of a global scratch buffer). Reductions therefore keep their policy by
construction: ``fold_left`` / ``fold_right`` / ``ordered_tree`` walk the lanes in order,
``unordered_tree`` runs the eight interleaved accumulators and the balanced tree that the SIMD
renderer uses (one of the trees the policy admits); dots fold K in order. No warp shuffles or
shared memory: correctness first (a faster mapping must realise the same admitted orders).
Kernels of lane-wise runs only, over one set of axes and storing nowhere twice, get one thread
per lane instead (``KernelCuda.plan_mapping``): their lanes are independent.

**What differs from SIMD C** (the spelling): no ``omp simd`` pragmas; no pthreads, malloc or
libm; the kernels are ``extern "C" __global__`` functions taking one pointer per root buffer,
one per snapshot of a root the kernel reads and writes, the scratch base and the instance range
``[lo, hi)``; f32 / f64 ``+ - * /`` and ``sqrt`` are the explicit round-to-nearest intrinsics
(``__fadd_rn`` ... ``__fdiv_rn``, ``__fsqrt_rn``, ``__ddiv_rn``, ``__dsqrt_rn``); the math
functions are CUDA's double-precision library (``exp``, ``log``, ``exp2``, ``log2``, ``tanh``,
``erfc``) rounded once to the dtype, as in C. Host loops are not rendered: the executable runs
them on the host between launches (``cuda_backend``).

**The plan.** The source ends with a comment ``/* tf-plan {...} */`` holding, per kernel-IR
kernel name, the function, the roots it passes, the snapshots, the instance count and the
per-thread scratch bytes: the executable reads it back, so the printed source is all there is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import HostLoop, Kernel, Program, root_of
from tilefoundry.compiler.render_c import (
    SHARED_PRELUDE,
    KernelC,
    ProgramC,
    _Run,
    prelude_constants,
)

__all__ = ["THREADS", "KernelCuda", "ProgramCuda", "parse_plan", "render"]

#: threads per block (one thread per program instance)
THREADS = 128
#: the lane loops (``int64_t`` induction variables) stay loops: NVVM would unroll the
#: constant-trip loops of a tile (tens to thousands of lanes) into code that takes seconds to
#: compile and gains a thread nothing (measured: an RMSNorm program 3.9 s -> 0.7 s); the
#: accumulator loops (``int j``) may unroll
_LOOP = re.compile(r"^(\s*)for \(int64_t ")

_CUDA_HEAD = r"""/* CUDA C++ for NVRTC: no C library headers; tf_numerics.h is compiled as __device__ code
 * (TF_FN). Build with --fmad=false and without -use_fast_math (tf_numerics.h refuses it). */
#include "tf_numerics.h"
#ifndef INFINITY
#define INFINITY __uint_as_float(0x7F800000u)
#endif
/* explicit round-to-nearest division and square root (never the approximate ones) */
#define TF__DDIV(a, b) __ddiv_rn((a), (b))
#define TF__DSQRT(a) __dsqrt_rn(a)
/* CUDA's double-precision math library (the f32 results are rounded once from double) */
#define TF_EXP exp
#define TF_LOG log
#define TF_EXP2 exp2
#define TF_LOG2 log2
#define TF_TANH tanh
#define TF_ERFC erfc
"""

PLAN_TAG = "/* tf-plan "


def cuda_prelude() -> str:
    return prelude_constants() + _CUDA_HEAD + SHARED_PRELUDE


class KernelCuda(KernelC):
    """One kernel as a ``__global__`` function: one thread per program instance."""

    SPELLING = ("cuda", "the CUDA C++ renderer")
    SIMD_PRAGMA = None
    ACC_BARRIER = None
    #: allow the lane mapping (one thread per lane) for kernels that are one lane-wise run
    LANE_MAPPING = True

    flat: tuple[int, ...] | None = None  # the run's axes under the lane mapping

    def plan_mapping(self, segs: list) -> None:
        """One thread per lane when the kernel is lane-wise runs only (no reduction, dot or
        tile loop), every run over the same axes of block > 1, no snapshot, and stores that
        no two instances or lanes share (``parallel_safe``; no indexed store, no zero stride
        on a lane axis). Every value then spans
        those axes (a run's values span its axes), so a lane reads only the array elements it
        wrote itself: the lanes are independent and running them concurrently computes what
        the instance loop does."""
        if not self.LANE_MAPPING or not segs or self.snap or not self.parallel_safe():
            return
        if not all(isinstance(s, _Run) for s in segs):
            return
        wide = {tuple(d for d in s.axes if self.k.block[d] > 1) for s in segs}
        if len(wide) != 1:
            return
        axes = next(iter(wide))
        for s in segs:
            for i in s.instrs:
                # two lanes must never store to one place (a zero stride on a lane axis would
                # make the instance loop's last-lane-wins order a race)
                if isinstance(i, kir.Store) and (i.index or any(i.strides[d] == 0
                                                                 for d in axes)):
                    return
        self.flat = axes

    def lanes(self) -> int:
        return self.elems(self.flat) if self.flat else 1

    def loops(self, axes: Iterable[int], ind: str, out: list[str], simd: bool = True,
              var: str = "c") -> str:
        if self.flat is None:
            return super().loops(axes, ind, out, simd, var)
        axes = list(axes)
        for d in axes:  # the lane coordinates come from the thread index (``wrap``)
            lane = f"L{d}" if d in self.flat else "0"
            out.append(f"{ind}{{ const int64_t {var}{d} = {lane};")
            ind += "    "
        if not axes:
            out.append(f"{ind}{{")
            ind += "    "
        return ind

    def farith(self, k: str, a: str, b: str, dt: str) -> str:
        if dt not in ("f32", "f64"):
            return super().farith(k, a, b, dt)
        return f"__{'f' if dt == 'f32' else 'd'}{k}_rn({a}, {b})"

    def fsqrt(self, x: str, dt: str) -> str:
        return f"__{'f' if dt == 'f32' else 'd'}sqrt_rn({x})"

    def wrap(self, body: list[str]) -> list[str]:
        name = f"tf_k{self.kidx}"
        n = len(self.roots)
        snaps = [self.roots[r] for r in self.snap]
        params = [f"char *p{i}" for i in range(n)] + [f"char *q{i}" for i in snaps] + \
            ["char *S0", "int64_t lo", "int64_t hi"]
        out = [self.comment(),
               f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}(',
               "    " + ", ".join(params) + ")", "{",
               "    const int64_t tid = lo + (int64_t)blockIdx.x * (int64_t)blockDim.x + "
               "(int64_t)threadIdx.x;",
               "    if (tid >= hi) return;"]
        if self.flat is None:
            out.append("    const int64_t pid = tid;")
        else:  # thread tid: lane tid % lanes (row-major over the run's axes) of instance pid
            lanes = self.lanes()
            out.append(f"    const int64_t pid = tid / {lanes}ll;")
            out.append(f"    int64_t lane = tid % {lanes}ll;")
            for d in reversed(self.flat):
                out.append(f"    const int64_t L{d} = lane % {self.k.block[d]}ll; "
                           f"lane /= {self.k.block[d]}ll;")
            out.append("    (void)lane;")
        ps = ", ".join(f"p{i}" for i in range(n)) or "0"
        out += [f"    char *const P[{max(n, 1)}] = {{{ps}}};", "    (void)P; (void)S0;"]
        if snaps:
            qs = ", ".join(f"q{i}" if i in snaps else "0" for i in range(n))
            out.append(f"    char *const Q[{n}] = {{{qs}}};")
        out += self.const_lines("    ")
        out.append("    {")
        if self.scratch:
            # the instance's scratch (its lanes use disjoint elements of it); a launch's
            # thread range starts at an instance: lo is a multiple of the lanes
            first = "lo" if self.flat is None else f"lo / {self.lanes()}ll"
            out.append(f"        char *const S = S0 + (pid - {first}) * {self.scratch}ll;")
        out += self.scratch_views("        ")
        out.append("        {")
        out += self.tile_origin("            ")
        out.extend(_LOOP.sub(r"\1#pragma unroll 1\n\1for (int64_t ", ln) for ln in body)
        out.append("        }")
        out.append("    }")
        out.append("}")
        return out

    def plan(self) -> dict:
        """What the executable needs to launch this kernel (after ``render``)."""
        return {"fn": f"tf_k{self.kidx}", "instances": self.k.instances,
                "lanes": self.lanes(), "scratch": self.scratch, "snap": list(self.snap)}


class ProgramCuda(ProgramC):
    """A program's kernels; host loops stay on the host (the executable runs them)."""

    KERNEL = KernelCuda

    def render(self) -> str:
        self.kernels: dict[str, dict] = {}
        self.steps(self.p.steps, [], "")
        plan = {"roots": self.names, "threads": THREADS, "kernels": self.kernels}
        text = json.dumps(plan, sort_keys=True).replace("/", "\\/")  # no "*/" inside
        parts = [cuda_prelude(), f"/* program {self.p.name} */", *self.funcs,
                 f"{PLAN_TAG}{text} */"]
        return "\n".join(parts) + "\n"

    def kernel_step(self, kc: KernelC, out: list[str], ind: str) -> None:
        if kc.k.name in self.kernels:
            raise self.unsupported("Kernel", f"two kernels named {kc.k.name}")
        self.kernels[kc.k.name] = kc.plan()

    def host_loop(self, s: HostLoop, out: list[str], ind: str) -> None:
        self.steps(s.body, out, ind)  # the loop itself runs on the host


def render(program: Program) -> str:
    """CUDA C++ source of ``program`` with its launch plan (``NotSupportedError`` for what it
    cannot render)."""
    return ProgramCuda(program).render()


def parse_plan(source: str) -> dict:
    """The launch plan a rendered source carries (``render``)."""
    i = source.rfind(PLAN_TAG)
    if i < 0:
        from tilefoundry.errors import InvalidArgumentError

        raise InvalidArgumentError("this CUDA source has no launch plan (a '/* tf-plan ...' "
                                   "comment): render it with render_cuda.render")
    return json.loads(source[i + len(PLAN_TAG):source.rindex("*/")])


def kernel_roots(k: Kernel, bm) -> tuple[set[str], set[str]]:
    """(roots the kernel loads, roots it stores)."""
    loads, stores = set(), set()
    for ins in kir.iter_instrs(k.body):
        if isinstance(ins, kir.Load):
            loads.add(root_of(ins.buffer, bm).name)
        elif isinstance(ins, kir.Store):
            stores.add(root_of(ins.buffer, bm).name)
    return loads, stores
