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

**Block mapping (D276).** Row kernels — lane-wise runs and reductions only (no dot, tile loop,
gather, indexed store) — get one thread block per program instance instead
(``KernelCuda.plan_block``): ``T`` threads (a power of two, 32 to ``BLOCK_THREADS_MAX``),
thread ``t`` owning lanes ``t, t + T, ...`` of each tile (coalesced rows). Values crossing
segments are per-thread register arrays indexed by fully unrolled slot loops (``TF_REG`` /
``TF_R``), values of one-lane store-free runs are computed by every thread, everything else a
value is read by other threads from (a reduction's result, a broadcast value) is a shared
array (``TF_SHARED``); there is no global scratch. Reductions keep their policy: order-free
one-fiber reductions (``unordered_tree`` sums, max / min / abs_max, integers, bool) combine
each thread's slots and then the threads' partials by balanced trees in shared memory;
``ordered_tree`` stages the lanes in source order and runs the reference's pairwise tree
(``semantics.reductions.pairwise``); ``fold_left`` / ``fold_right`` and the compensated sums
stage the lanes and walk each fiber in order, one thread per output lane. The body is phases
(``TF_PHASE_BEGIN`` / ``TF_PHASE_END``) separated by ``__syncthreads`` / ``__syncwarp``
(``TF_SYNC`` / ``TF_SYNCWARP``) that a hazard tracker over the shared arrays places; the host
emulation runs each phase for every thread in turn. Past 48 KiB of shared arrays
(``SHARED_LIMIT``) or ``REG_LIMIT`` slots a thread, a kernel keeps the instance mapping.

**Row mapping (D482-D484, ``render_cuda_rows``)**, tried first: one block per row of a kernel
over one tiled axis, the row in registers, 16-byte accesses, order-free reductions by warp
shuffles; ``why`` (in the plan, ``--explain``) names the rule that declined it elsewhere.

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
per-thread scratch bytes, the mapping (``instance`` / ``lane`` / ``block``) and, for the block
mapping, its threads per block: the executable reads it back, so the printed source is all
there is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from tilefoundry.compiler import c_vecmath, kir, render_cuda_rows
from tilefoundry.compiler.kir import HostLoop, Kernel, Program, root_of
from tilefoundry.compiler.render_c import (
    SHARED_PRELUDE,
    KernelC,
    ProgramC,
    Run,
    c_source,
    prelude_constants,
)
from tilefoundry.compiler.spelling import CSIZE, CTYPE, UTYPE

__all__ = ["BLOCK_LANES", "BLOCK_THREADS_MAX", "REG_LIMIT", "SHARED_LIMIT", "THREADS",
           "KernelCuda", "ProgramCuda", "kernel_threads", "parse_plan", "render"]

#: threads per block (one thread per program instance)
THREADS = 128
#: the block mapping (D276): threads per block at most, and the lanes of the widest tile one
#: thread aims to own (T is a power of two from 32 to BLOCK_THREADS_MAX)
BLOCK_THREADS_MAX = 512
BLOCK_LANES = 8
#: static shared memory a block-mapped kernel may use (CUDA's static limit per block)
SHARED_LIMIT = 48 * 1024
#: the most elements one thread keeps of a register-held value (more: the old mapping)
REG_LIMIT = 32
#: the lane loops (``int64_t`` induction variables) stay loops: NVVM would unroll the
#: constant-trip loops of a tile (tens to thousands of lanes) into code that takes seconds to
#: compile and gains a thread nothing (measured: an RMSNorm program 3.9 s -> 0.7 s); the
#: accumulator loops (``int j``) may unroll
_LOOP = re.compile(r"^(\s*)for \(int64_t ")


#: the CUDA spelling's head, reduction steps and GPU conversions (D525), before the shared prelude
CUDA_PRELUDE = c_source("tf_prelude_cuda.h")

PLAN_TAG = "/* tf-plan "


def cuda_prelude() -> str:
    return prelude_constants() + CUDA_PRELUDE + SHARED_PRELUDE + \
        c_vecmath.CUDA_MATH


class KernelCuda(KernelC):
    """One kernel as a ``__global__`` function: one thread per program instance."""

    SPELLING = ("cuda", "the CUDA C++ renderer")
    SIMD_PRAGMA = None
    ACC_BARRIER = None
    #: no GCC vector folds (``render_c_vreduce``); f32 math by ``c_vecmath.CUDA_MATH`` (D519)
    vec_math = False
    NARROW_MATH = True
    INT_MINMAX_STEPS = True
    #: allow the lane mapping (one thread per lane) for kernels that are one lane-wise run
    LANE_MAPPING = True

    #: allow the block mapping (one thread block per instance) for row kernels
    BLOCK_MAPPING = True

    flat: tuple[int, ...] | None = None  # the run's axes under the lane mapping
    block: int | None = None  # threads per block under the block mapping
    mma = None  # the tensor-core plan (render_cuda_mma.MmaPlan, D280)
    wgmma = None  # the Hopper plan (render_cuda_wgmma.WgmmaPlan, D520)
    rows = None  # the row plan (render_cuda_rows.RowsPlan, D482)
    why = ""  # why the kernel got its mapping (``tilefoundry compile --explain``)
    #: allow the row mapping (one block per row, 16-byte accesses, shuffles; D482)
    ROWS_MAPPING = True
    #: allow the tensor-core mapping for reassociated matmul kernels (D280)
    MMA_MAPPING = True
    #: allow the transpose mapping for transposing copies (render_cuda_transpose, D551)
    TRANSPOSE_MAPPING = True
    transpose = None  # its plan

    def kernel_round(self, w: str, to: str, overflow: str) -> str:
        # to bf16, overflow to inf: the GPU's cvt (the host emulation's integer algorithm, D525)
        if to == "bf16" and overflow == "nonfinite":
            return f"TF__RN_BF16({w})"
        return super().kernel_round(w, to, overflow)

    def widened(self, x: str, src: str) -> str:
        # a Widen of bf16: the GPU's exact shift (the host emulation's tf_bf16_to_f32, D525)
        return f"TF__WIDEN_BF16({x})" if src == "bf16" else super().widened(x, src)

    def render_whole(self) -> str | None:
        """The tensor-core kernel of a reassociated matmul (wgmma on sm_90, D520, else
        ``mma.sync``, D280), else None (the C-family rendering with this spelling's mapping)."""
        from tilefoundry.compiler import render_cuda_transpose, render_cuda_wgmma

        whole = render_cuda_transpose.render_whole(self) if self.TRANSPOSE_MAPPING else None
        return whole or (render_cuda_wgmma.render_whole(self) if self.MMA_MAPPING else None)

    def plan_mapping(self, segs: list) -> None:
        """The row mapping (``render_cuda_rows.plan_rows``), else the lane, block or instance
        mapping; ``why`` says which, and why the row mapping was declined."""
        no = "disabled"
        if self.ROWS_MAPPING:
            self.rows, no = render_cuda_rows.plan_rows(self, segs)
            if self.rows is not None:
                self.block, self.scratch, self.why = self.rows.threads, 0, self.rows.why
                return
        self.plan_lanes(segs)
        if self.flat is None:
            self.plan_block(segs)
        got = {"lane": "one thread per lane of a lane-wise kernel (D209)", "instance":
               "one thread per instance (D209)", "block": f"one block of {self.block} threads "
               "per instance (D276)"}[self.mapping()]
        self.why = f"{self.mapping()} mapping: {got}; row mapping declined: {no}"

    def plan_lanes(self, segs: list) -> None:
        """One thread per lane when the kernel is lane-wise runs only (no reduction, dot or
        tile loop), every run over the same axes of block > 1, no snapshot, and stores that
        no two instances or lanes share (``parallel_safe``; no indexed store, no zero stride
        on a lane axis). Every value then spans
        those axes (a run's values span its axes), so a lane reads only the array elements it
        wrote itself: the lanes are independent and running them concurrently computes what
        the instance loop does."""
        if not self.LANE_MAPPING or not segs or self.snap or not self.parallel_safe():
            return
        if not all(isinstance(s, Run) for s in segs):
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

    # -- the block mapping (D276) ---------------------------------------------------------------
    def wide(self, axes: Iterable[int]) -> tuple[int, ...]:
        """The axes of ``axes`` whose block is more than one lane (a tile's lane layout)."""
        return tuple(d for d in axes if self.k.block[d] > 1)

    def plan_block(self, segs: list) -> None:
        """One thread block per instance when the kernel is lane-wise runs and reductions only
        (no dot, tile loop, gather or indexed store), no two instances or lanes store to one
        place, every operand of a run spans only axes of that run, every reduction has a mask
        within its operand's axes and is not compensated over a mask the operand does not
        span, and the values fit: a register-held value at most ``REG_LIMIT`` elements a
        thread, the shared arrays at most ``SHARED_LIMIT`` bytes. Otherwise the instance
        mapping stays."""
        if not self.BLOCK_MAPPING or not segs or not self.parallel_safe():
            return
        merged: list = []
        for s in segs:  # consecutive runs of one lane layout are one loop over the lanes
            if isinstance(s, Run) and merged and isinstance(merged[-1], Run) and \
                    self.wide(merged[-1].axes) == self.wide(s.axes):
                merged[-1] = Run(merged[-1].axes, merged[-1].instrs + s.instrs)
            else:
                merged.append(s)
        layouts: list[tuple[int, ...]] = []
        uses: dict[str, set] = {}
        in_runs: set[str] = set()
        uniform: set[str] = set()
        for s in merged:
            if isinstance(s, Run):
                aw = self.wide(s.axes)
                layouts.append(aw)
                # a run of one lane that stores nothing: every thread computes it (its values
                # are then every thread's own, read anywhere without shared memory)
                uni = not aw and not any(isinstance(i, kir.Store) for i in s.instrs)
                here: set[str] = set()
                for i in s.instrs:
                    if isinstance(i, kir.Load | kir.Store) and i.index:
                        return
                    if isinstance(i, kir.Store) and any(i.strides[d] == 0 for d in aw):
                        return
                    for o in i.operands():
                        if o in self.consts or o in here:
                            continue
                        if not set(self.wide(self.full(o))) <= set(aw):
                            return
                        uses.setdefault(o, set()).add("uniform" if uni else aw)
                    here.update(i.results())
                in_runs |= here
                if uni:
                    uniform |= here
            elif isinstance(s, kir.Reduce):
                dt = self.dt(s.x)
                if not (dt in ("f32", "f64") or kir.is_int(dt) or dt == "bool"):
                    return
                xw = self.wide(self.full(s.x))
                if s.mask and not set(self.wide(self.full(s.mask))) <= set(xw):
                    return
                layouts.append(xw)
                for o in (s.x, s.mask):
                    if o and o not in self.consts:
                        uses.setdefault(o, set()).add(xw)
                if s.init and s.init not in self.consts:
                    uses.setdefault(s.init, set()).add(None)  # read by the output lanes
            else:
                return
        e_max = max(self.elems(a) for a in layouts)
        t = 32
        while t < BLOCK_THREADS_MAX and t * BLOCK_LANES < e_max:
            t *= 2
        reg = {n for n in self.arrays if n in in_runs and (n in uniform or
               uses.get(n, set()) <= {self.wide(self.full(n))})}
        shared = set(self.arrays) - reg
        if any(-(-self.elems(self.full(n)) // t) > REG_LIMIT for n in reg):
            return
        nbytes = sum(self.elems(self.full(n)) * kir.numpy_dtype(self.dt(n)).itemsize
                     for n in shared)
        stage: dict[str, int] = {}
        flags = 0
        paths: dict[str, str] = {}
        for s in segs:
            if not isinstance(s, kir.Reduce):
                continue
            path, at, m, n = self.reduce_path(s, t)
            paths[s.out] = path
            size = t if path == "partial" else m * n
            stage[at] = max(stage.get(at, 0), size)
            if s.mask:
                flags = max(flags, size)
        nbytes += sum(n * CSIZE[ct] for ct, n in stage.items()) + flags
        if nbytes > SHARED_LIMIT:
            return
        self.block, self.reg, self.shared, self.paths = t, reg, shared, paths
        self.stage, self.flags, self.uniform = stage, flags, uniform
        self.scratch = 0  # nothing in global scratch: registers and shared memory
        segs[:] = merged

    def reduce_path(self, ins: kir.Reduce, t: int) -> tuple[str, str, int, int]:
        """How a reduction runs under the block mapping: (path, accumulator C type, output
        lanes M, fiber length N). ``partial``: one fiber (M = 1) of an order-free reduction
        (max / min / abs_max, integers, bool, or an ``unordered_tree`` sum): each thread
        combines its own lanes by a balanced tree, then the threads' partials by a balanced
        tree in shared memory (a tree of a permutation of the lanes). ``tree``: the lanes
        staged in shared memory in source order, fiber by fiber, and combined as the
        reference's pairwise tree (``ordered_tree``; order-free reductions with M > 1).
        ``fold``: staged, then one thread per output lane walks its fiber in order
        (``fold_left`` / ``fold_right`` float sums). ``comp``: the compensated f64 fold of
        ``sum_hi`` / ``sum_lo``, staged and walked likewise."""
        dt, kind = self.dt(ins.x), ins.kind
        xf = self.full(ins.x)
        m = self.elems(self.full(ins.out))
        n = self.elems([d for d in ins.axes if d in xf])
        if kind in kir.COMPENSATED:
            return "comp", "double", m, n
        at = UTYPE[dt] if kind == "abs_max" and kir.is_int(dt) else CTYPE[dt]
        order_free = kind in ("max", "min", "abs_max") or not kir.is_float(dt) or \
            ins.policy == "unordered_tree"
        if order_free and m == 1:
            return "partial", at, m, n
        if order_free or ins.policy == "ordered_tree":
            return "tree", at, m, n
        return "fold", at, m, n

    def segment(self, lines: list[str], reads: set[str], writes: set[str], out: list[str],
                ind: str, warp: frozenset = frozenset()) -> None:
        """Append one segment's code, after a barrier when it reads a shared array written, or
        writes one read or written, since the last barrier (``__syncwarp`` when every such
        array is in ``warp``: its accesses pair threads of one warp)."""
        clash = (reads & self.pw) | (writes & (self.pr | self.pw))
        if clash:
            if clash <= warp:
                out += [f"{ind}TF_PHASE_END", f"{ind}TF_SYNCWARP", f"{ind}TF_PHASE_BEGIN"]
                self.pr -= clash
                self.pw -= clash
            else:
                out += [f"{ind}TF_PHASE_END", f"{ind}TF_SYNC", f"{ind}TF_PHASE_BEGIN"]
                self.pr, self.pw = set(), set()
        self.pr |= reads
        self.pw |= writes
        out.extend(lines)

    def lane_loop(self, axes: Iterable[int], body: list[str], ind: str,
                  pre: Iterable[str] = (), post: Iterable[str] = (),
                  uniform: bool = False) -> list[str]:
        """Thread ``tf_tx``'s lanes ``tf_tx + j * T`` (j < ceil(E / T), fully unrolled) of a
        tile spanning ``axes`` (E lanes, row-major), with the coordinates ``c<d>``; ``body``
        is one lane's code (indented by ``ind`` plus two levels)."""
        t = self.block
        e = self.elems(axes)
        r = -(-e // t)
        w = self.wide(axes)
        i2 = ind + "        "
        if uniform:  # every thread computes the one lane
            return [f"{ind}{{ const int tf_j = 0; (void)tf_j;", *self.coords_of("0", (), i2),
                    *[i2 + ln for ln in body], f"{ind}}}"]
        lines = [f"{ind}{{ const int tf_tx = (int)threadIdx.x; (void)tf_tx;"]
        lines += [f"{ind}    {ln}" for ln in pre]
        lines += [f"{ind}    #pragma unroll",
                  f"{ind}    for (int tf_j = 0; tf_j < {r}; ++tf_j) {{",
                  f"{i2}const int64_t tf_f = (int64_t)tf_tx + (int64_t)tf_j * {t}ll;"]
        if e % t:
            lines.append(f"{i2}if (tf_f < {e}ll) {{")
        lines += self.coords_of("tf_f", w, i2)
        lines += [i2 + ln for ln in body]
        if e % t:
            lines.append(f"{i2}}}")
        lines.append(f"{ind}    }}")
        lines += [f"{ind}    {ln}" for ln in post]
        lines.append(f"{ind}}}")
        return lines

    def coords_of(self, flat: str, axes: tuple[int, ...], ind: str) -> list[str]:
        """``c<d>`` for every axis: row-major over ``axes`` from ``flat``, 0 elsewhere."""
        lines = [f"{ind}int64_t tf_r = {flat}; (void)tf_r;"]
        for d in reversed(axes):
            lines.append(f"{ind}const int64_t c{d} = tf_r % {self.k.block[d]}ll; "
                         f"tf_r /= {self.k.block[d]}ll;")
        lines += [f"{ind}const int64_t c{d} = 0;" for d in range(self.k.rank) if d not in axes]
        if self.k.rank:
            lines.append(ind + " ".join(f"(void)c{d};" for d in range(self.k.rank)))
        return lines

    def shared_of(self, ins: kir.Instr, defined: set[str]) -> set[str]:
        return {o for o in ins.operands() if o in self.shared and o not in defined}

    def block_run(self, run: Run, out: list[str], ind: str) -> None:
        coords = {d: f"c{d}" for d in range(self.k.rank)}
        local: dict[str, str] = {}

        def ref(n: str) -> str:
            return local[n] if n in local else self.aref(n, coords)

        body, _ = self.run_lines(run, ref, local, coords)
        defined: set[str] = set()
        reads: set[str] = set()
        for i in run.instrs:
            reads |= self.shared_of(i, defined)
            defined.update(i.results())
        uni = not self.wide(run.axes) and not any(isinstance(i, kir.Store)
                                                  for i in run.instrs)
        self.segment(self.lane_loop(run.axes, body, ind, uniform=uni), reads,
                     {n for n in defined if n in self.shared}, out, ind)

    def block_reduce(self, ins: kir.Reduce, out: list[str], ind: str) -> None:
        t = self.block
        path, at, m, n = self.reduce_path(ins, t)
        xf = self.full(ins.x)
        red = tuple(d for d in ins.axes if d in xf)
        kept = self.full(ins.out)
        coords = {d: f"c{d}" for d in range(self.k.rank)}
        st, an = f"tf_st_{at}", "tf_an"
        reads = {o for o in (ins.x, ins.mask) if o and o in self.shared}
        stage = {st, an} if ins.mask else {st}
        if path == "comp":
            self.block_compensated(ins, red, kept, m, n, reads, stage, out, ind)
            return
        ops = self.reduce_ops(ins)
        flag = ops.track
        res = ops.res

        def seed() -> str:
            return f"({at}){self.aref(ins.init, coords)}"

        def result(acc: str, anyv: str | None, i2: str, seeded: bool = False) -> list[str]:
            """The result from an accumulation of the lanes; an init that seeds the
            accumulation enters here (order-free kinds: first or last is one value) unless
            ``seeded`` (a fold started from it)."""
            if ops.seed_init and not seeded:
                acc = ops.step(seed(), acc)
            return [f"{i2}{res} = {ops.finish(acc, anyv)};"]

        if path == "partial":
            r = -(-self.elems(xf) // t)
            body: list[str] = []
            v = ops.value("", body)
            body = [ln.strip() for ln in body] + [f"tf_p[tf_j] = {v};"]
            pre = [f"{at} tf_p[{r}];", "#pragma unroll",
                   f"for (int tf_j = 0; tf_j < {r}; ++tf_j) tf_p[tf_j] = {ops.ident};"]
            post = []
            if flag:
                body.append(f"tf_q[tf_j] = {self.aref(ins.mask, coords)};")
                pre += [f"uint8_t tf_q[{r}];", "#pragma unroll",
                        f"for (int tf_j = 0; tf_j < {r}; ++tf_j) tf_q[tf_j] = 0;"]
            s = 1
            while s < r:  # the thread's own lanes: a balanced tree, odd ones carried up
                post += ["#pragma unroll", f"for (int tf_i = 0; tf_i + {s} < {r}; "
                         f"tf_i += {2 * s}) {{ tf_p[tf_i] = "
                         f"{ops.step('tf_p[tf_i]', f'tf_p[tf_i + {s}]')};" +
                         (f" tf_q[tf_i] |= tf_q[tf_i + {s}];" if flag else "") + " }"]
                s *= 2
            post.append(f"{st}[tf_tx] = tf_p[0];" + (f" {an}[tf_tx] = tf_q[0];" if flag else ""))
            self.segment(self.lane_loop(xf, body, ind, pre, post), reads, stage, out, ind)
            s = 1
            while s < t:  # the threads' partials: a balanced tree over shared memory
                i2 = ind + "        "
                lines = [f"{ind}{{ const int tf_tx = (int)threadIdx.x;",
                         f"{ind}    if ((tf_tx & {2 * s - 1}) == 0) {{",
                         f"{i2}{st}[tf_tx] = {ops.step(f'{st}[tf_tx]', f'{st}[tf_tx + {s}]')};"]
                if flag:
                    lines.append(f"{i2}{an}[tf_tx] |= {an}[tf_tx + {s}];")
                if 2 * s == t:  # the last level: thread 0 writes the result
                    lines += self.coords_of("0", (), i2)
                    lines += result(f"{st}[0]", f"{an}[0]" if flag else None, i2)
                lines += [f"{ind}    }}", f"{ind}}}"]
                self.segment(lines, set(), stage | ({ins.out} if 2 * s == t else set()), out,
                             ind, warp=frozenset(stage) if 2 * s <= 32 else frozenset())
                s *= 2
            return
        # staged in source order: element (output lane k, fiber position i) at k * N + i
        body = []
        v = ops.value("", body)
        at_k = f"({self.index(kept, coords)}) * {n}ll + ({self.index(red, coords)})"
        body = [ln.strip() for ln in body] + [f"{st}[{at_k}] = {v};"]
        if flag:
            body.append(f"{an}[{at_k}] = {self.aref(ins.mask, coords)};")
        self.segment(self.lane_loop(xf, body, ind), reads, stage, out, ind)
        i2 = ind + "        "
        if path == "tree":
            s = 1
            while s < n:  # the reference's pairwise tree: pairs at stride s, odd ones carried
                p = -(-n // (2 * s))
                lines = [f"{ind}{{ const int tf_tx = (int)threadIdx.x;",
                         f"{ind}    for (int64_t tf_w = tf_tx; tf_w < {m * p}ll; "
                         f"tf_w += {t}ll) {{",
                         f"{i2}const int64_t tf_i = (tf_w / {p}ll) * {n}ll + "
                         f"(tf_w % {p}ll) * {2 * s}ll;",
                         f"{i2}if ((tf_w % {p}ll) * {2 * s}ll + {s}ll < {n}ll) {{",
                         f"{i2}    {st}[tf_i] = {ops.step(f'{st}[tf_i]', f'{st}[tf_i + {s}]')};"]
                if flag:
                    lines.append(f"{i2}    {an}[tf_i] |= {an}[tf_i + {s}];")
                lines += [f"{i2}}}", f"{ind}    }}", f"{ind}}}"]
                self.segment(lines, set(), stage, out, ind)
                s *= 2
            acc, anyv, walk = f"{st}[tf_k * {n}ll]", f"{an}[tf_k * {n}ll]" if flag else None, []
        else:  # one thread per output lane folds its fiber in order
            rev = ins.policy == "fold_right"
            loop = (f"for (int64_t tf_i = {n - 1}ll; tf_i >= 0; --tf_i)" if rev else
                    f"for (int64_t tf_i = 0; tf_i < {n}ll; ++tf_i)")
            walk = [f"{at} tf_acc = {seed() if ops.seed_init else ops.ident};"]
            if flag:
                walk.append("uint8_t tf_any = 0;")
            walk.append(f"{loop} {{ tf_acc = {ops.step('tf_acc', f'{st}[tf_k * {n}ll + tf_i]')};" +
                        (f" tf_any |= {an}[tf_k * {n}ll + tf_i];" if flag else "") + " }")
            acc, anyv = "tf_acc", "tf_any" if flag else None
        lines = [f"{ind}{{ const int tf_tx = (int)threadIdx.x;",
                 f"{ind}    for (int64_t tf_k = tf_tx; tf_k < {m}ll; tf_k += {t}ll) {{"]
        lines += self.coords_of("tf_k", self.wide(kept), i2)
        lines += [i2 + ln for ln in walk]
        lines += result(acc, anyv, i2, seeded=path == "fold")
        lines += [f"{ind}    }}", f"{ind}}}"]
        rd = stage | ({ins.init} & self.shared if ins.init else set())
        self.segment(lines, rd, {ins.out}, out, ind)

    def block_compensated(self, ins: kir.Reduce, red: tuple[int, ...], kept: tuple[int, ...],
                          m: int, n: int, reads: set[str], stage: set[str], out: list[str],
                          ind: str) -> None:
        """``sum_hi`` / ``sum_lo`` (D-compensated, ``reduce_compensated``'s TwoSum fold): the
        lanes staged, then one thread per output lane folds its fiber in order."""
        coords = {d: f"c{d}" for d in range(self.k.rank)}
        at_k = f"({self.index(kept, coords)}) * {n}ll + ({self.index(red, coords)})"
        body = [f"tf_st_double[{at_k}] = {self.aref(ins.x, coords)};"]
        if ins.mask:
            body.append(f"tf_an[{at_k}] = {self.aref(ins.mask, coords)};")
        self.segment(self.lane_loop(self.full(ins.x), body, ind), reads, stage, out, ind)
        i2 = ind + "        "
        w = f"tf_st_double[tf_k * {n}ll + tf_i]"
        step = (f"const double w = {w}; const double s = hi + w; const double bb = s - hi; "
                f"const double e = (hi - (s - bb)) + (w - bb); hi = s; lo = lo + e;")
        if ins.mask:
            step = f"if (tf_an[tf_k * {n}ll + tf_i]) {{ {step} }}"
        part = "s" if ins.kind == "sum_hi" else "e"
        lines = [f"{ind}{{ const int tf_tx = (int)threadIdx.x;",
                 f"{ind}    for (int64_t tf_k = tf_tx; tf_k < {m}ll; tf_k += {self.block}ll) {{"]
        lines += self.coords_of("tf_k", self.wide(kept), i2)
        lines += [f"{i2}double hi = 0.0, lo = 0.0;",
                  f"{i2}for (int64_t tf_i = 0; tf_i < {n}ll; ++tf_i) {{ {step} }}",
                  f"{i2}{{ const double s = hi + lo; const double bb = s - hi; "
                  f"const double e = (hi - (s - bb)) + (lo - bb); "
                  f"{self.aref(ins.out, coords)} = {part}; }}",
                  f"{ind}    }}", f"{ind}}}"]
        self.segment(lines, stage, {ins.out}, out, ind)

    def aref(self, name: str, coords: Mapping[int, str]) -> str:
        if self.block is None or name in self.consts:
            return super().aref(name, coords)
        if self.rows is not None:  # the row mapping: registers only
            if name in self.rows.remat:  # recomputed at the lane: an edge mask, a load from
                return self.rows_remat(name, coords)  # its kept words, their widening
            if name in self.rows.uniform:
                return f"TF_R(r{self.cid(name)})[0]"
            if name in self.rows.reg:
                return f"TF_R(r{self.cid(name)})[tf_s]"
            raise AssertionError(f"row mapping: {name} has no storage")
        if name in self.uniform:  # computed by every thread: its own copy
            return f"TF_R(r{self.cid(name)})[0]"
        if name in self.reg:  # this thread's element of the lane it is at (tf_j)
            return f"TF_R(r{self.cid(name)})[tf_j]"
        if name in self.shared:
            return f"s{self.cid(name)}[{self.index(self.full(name), coords)}]"
        raise AssertionError(f"block mapping: {name} has no storage")

    def rows_remat(self, name: str, coords: Mapping[int, str]) -> str:
        ins = self.rows.remat[name]
        expr, pre = self.lane_expr(ins, lambda n: self.aref(n, coords))
        assert not pre, f"row mapping: {name} is recomputed by one expression"
        return f"({expr})"

    def emit(self, segs: list, out: list[str], ind: str) -> None:
        if self.rows is not None:
            render_cuda_rows.emit_rows(self, segs, out, ind)
            return
        if self.block is None:
            super().emit(segs, out, ind)
            return
        self.pr: set[str] = set()
        self.pw: set[str] = set()
        out.append(f"{ind}TF_PHASE_BEGIN")
        for seg in segs:
            if isinstance(seg, Run):
                self.block_run(seg, out, ind + "    ")
            else:
                self.block_reduce(seg, out, ind + "    ")
        out.append(f"{ind}TF_PHASE_END")

    def block_decls(self, ind: str) -> list[str]:
        """The shared arrays and the per-thread register arrays of the block mapping."""
        out = []
        for n in sorted(self.shared, key=self.cid):
            out.append(f"{ind}TF_SHARED {CTYPE[self.dt(n)]} s{self.cid(n)}"
                       f"[{max(self.elems(self.full(n)), 1)}];")
        for ct, size in sorted(self.stage.items()):
            out.append(f"{ind}TF_SHARED {ct} tf_st_{ct}[{size}];")
        if self.flags:
            out.append(f"{ind}TF_SHARED uint8_t tf_an[{self.flags}];")
        for n in sorted(self.reg, key=self.cid):
            r = -(-self.elems(self.full(n)) // self.block)
            out.append(f"{ind}TF_REG({CTYPE[self.dt(n)]}, r{self.cid(n)}, {self.block}, {r});")
        return out

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

    def l_Load(self, ins: kir.Load, ref) -> tuple[str, list[str]]:
        if self.rows is not None and ins.out in self.rows.vload:
            return render_cuda_rows.load_expr(self, ins, ref)
        return super().l_Load(ins, ref)

    def store(self, ins: kir.Store, ref) -> list[str]:
        if self.rows is not None and id(ins) in self.rows.vstore:
            return render_cuda_rows.store_lines(self, ins, ref)
        lines = super().store(ins, ref)  # a run of one lane under the row mapping: thread 0's
        return [f"if (tf_tx == 0) {ln}" for ln in lines] if self.rows and self.rows_thread0 \
            else lines

    def farith(self, k: str, a: str, b: str, dt: str) -> str:
        if dt not in ("f32", "f64"):
            return super().farith(k, a, b, dt)
        return f"__{'f' if dt == 'f32' else 'd'}{k}_rn({a}, {b})"

    def fsqrt(self, x: str, dt: str) -> str:
        return f"__{'f' if dt == 'f32' else 'd'}sqrt_rn({x})"

    def wrap(self, body: list[str]) -> list[str]:
        if self.block is not None:
            return self.wrap_block(body)
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

    def wrap_block(self, body: list[str]) -> list[str]:
        """The block mapping's function: block ``blockIdx.x`` runs instance ``lo + blockIdx.x``
        with ``self.block`` threads; its phases (``TF_PHASE_BEGIN`` ... ``TF_PHASE_END``) are
        separated by barriers."""
        name = f"tf_k{self.kidx}"
        n = len(self.roots)
        snaps = [self.roots[r] for r in self.snap]
        params = [f"char *p{i}" for i in range(n)] + [f"char *q{i}" for i in snaps] + \
            ["char *S0", "int64_t lo", "int64_t hi"]
        what = (f"/* {self.why} */" if self.rows is not None else
                f"/* block mapping: one block of {self.block} threads per instance (D276) */")
        out = [self.comment(), what,
               f'extern "C" __global__ void __launch_bounds__({self.block}'
               f'{render_cuda_rows.min_blocks(self)}) {name}(',
               "    " + ", ".join(params) + ")", "{",
               "    const int64_t pid = lo + (int64_t)blockIdx.x;",
               "    if (pid >= hi) return;"]
        ps = ", ".join(f"p{i}" for i in range(n)) or "0"
        out += [f"    char *const P[{max(n, 1)}] = {{{ps}}};", "    (void)P; (void)S0;"]
        if snaps:
            qs = ", ".join(f"q{i}" if i in snaps else "0" for i in range(n))
            out.append(f"    char *const Q[{n}] = {{{qs}}};")
        out += self.const_lines("    ")
        out += (render_cuda_rows.rows_decls(self, "    ") if self.rows is not None else
                self.block_decls("    "))
        out.append("    {")
        out += self.tile_origin("        ")
        out.extend(_LOOP.sub(r"\1#pragma unroll 1\n\1for (int64_t ", ln) for ln in body)
        out.append("    }")
        out.append("}")
        return out

    def mapping(self) -> str:
        if self.transpose is not None:
            return "transpose"
        if self.wgmma is not None:
            return "wgmma"
        if self.mma is not None:
            return "mma"
        if self.rows is not None:
            return "rows"
        return "block" if self.block is not None else "lane" if self.flat else "instance"

    def plan(self) -> dict:
        """What the executable needs to launch this kernel (after ``render``): the mapping,
        and for the block mapping its threads per block (one block per instance)."""
        entry = {"fn": f"tf_k{self.kidx}", "instances": self.k.instances,
                 "lanes": self.lanes(), "scratch": self.scratch, "snap": list(self.snap),
                 "mapping": self.mapping(), "why": self.why}
        if self.block is not None:
            entry["threads"] = self.block
        if self.wgmma is not None or self.transpose is not None:  # their own tiles
            entry.update(self.wgmma.plan_entry(self) if self.wgmma else
                         self.transpose.plan_entry())
        return entry


class ProgramCuda(ProgramC):
    """A program's kernels; host loops stay on the host (the executable runs them)."""

    KERNEL = KernelCuda

    def render(self) -> str:
        self.kernels: dict[str, dict] = {}
        self.steps(self.p.steps, [], "")
        plan = {"roots": self.names, "threads": THREADS, "kernels": self.kernels}
        if any(k["mapping"] == "wgmma" for k in self.kernels.values()):
            plan["arch"] = "compute_90a"  # wgmma / setmaxnreg: sm_90a only (D520)
        text = json.dumps(plan, sort_keys=True).replace("/", "\\/")  # no "*/" inside
        head = [cuda_prelude()]
        maps = {k["mapping"] for k in self.kernels.values()}
        if maps & {"mma", "wgmma"}:
            from tilefoundry.compiler import render_cuda_mma, render_cuda_wgmma

            head += [render_cuda_mma.MMA_HEAD] + \
                ([render_cuda_wgmma.WGMMA_HEAD] if "wgmma" in maps else [])
        if any(k["mapping"] == "rows" for k in self.kernels.values()):
            head.append(render_cuda_rows.ROWS_HEAD)
        parts = [*head, f"/* program {self.p.name} */", *self.funcs,
                 f"{PLAN_TAG}{text} */"]
        return "\n".join(parts) + "\n"

    def kernel_step(self, kc: KernelC, out: list[str], ind: str) -> None:
        if kc.k.name in self.kernels:
            raise self.unsupported("Kernel", f"two kernels named {kc.k.name}")
        self.kernels[kc.k.name] = kc.plan()

    def host_loop(self, s: HostLoop, out: list[str], ind: str) -> None:
        self.steps(s.body, out, ind)  # the loop itself runs on the host


def render(program: Program, launch: Mapping[str, int] | None = None) -> str:
    """CUDA C++ source of ``program`` with its launch plan (``NotSupportedError`` for what it
    cannot render); ``launch``: the target's launch options (``LAUNCH_OPTIONS``)."""
    from tilefoundry.compiler.render_cuda_wgmma import check_launch

    return ProgramCuda(program, check_launch(launch)).render()


def kernel_threads(plan: dict, entry: dict) -> int:
    """Threads per block of one kernel of a launch plan (``parse_plan``): the block mapping's
    own, else the program's ``THREADS``."""
    return int(entry.get("threads", plan["threads"]))


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
