"""Render kernel-IR programs to C: the SIMD C backend's renderer (docs/decisions.md D187-D192).
Split by concern (issue 36, D501): this module holds the kernel structure (runs, scratch
arrays, loops, the instance range and launcher), the programs and ``tf_program``;
``render_c_lanes`` the lane-wise instructions and ``render_c_reduce`` the reductions, dots and
tile loops (``KernelC`` inherits both). What a conversion, a reduction's seed or a math call
computes is decided once for every renderer in ``render_decisions`` (D500); the scalar
spellings are ``spelling``'s (D423).

``render(program) -> str`` emits one exported function ``void tf_program(void **roots)``
taking one pointer per root buffer (``root_names(program)`` gives the order), one static
function per kernel and the host loops inline.

**Kernels.** A kernel is a loop over its program instances, cut into one contiguous share per
thread (``tf__parallel``: pthreads created and joined per call) when the instances are
independent and the work is large enough — rows spread over threads; each instance runs the
kernel body once for its tile. Every SSA value that is used outside the
stretch of code that defines it lives in a per-thread scratch array laid out row-major over the
block extents of the axes the tile spans (a broadcast axis takes no room); constants are C
scalars. The body is cut into **runs**: maximal sequences of lane-wise instructions (loads,
stores, arithmetic, conversions, selects, math functions) over the same set of tile axes,
rendered as one loop nest whose innermost loop carries ``#pragma omp simd``, values inside a
run being C scalars. Reductions, dots and tile loops are rendered on their own:

* ``Reduce`` keeps its policy. ``fold_left`` / ``fold_right`` (and ``ordered_tree``, of which a
  left fold is one bracketing in source order) fold the lanes in order, vectorized across the
  kept lanes; ``unordered_tree`` sums over one contiguous axis run eight interleaved
  accumulators (vectorized) combined by a balanced tree, which is one of the trees the policy
  admits; max / min / abs_max are order-independent in value and use the same multi-accumulator
  loop; integer sums wrap (unsigned arithmetic) and are exact in any order. A float sum starts
  from -0 (the exact identity of IEEE addition), masked lanes add nothing, and a row with no
  valid lane is +0 (the interpreter's identity). ``sum_hi`` / ``sum_lo`` are the compensated
  (TwoSum) left fold of f64 lanes, as ``semantics.evaluator.nn.dd_row_sum``.
* ``Dot`` folds K in order (the reference's order, admitted whether or not ``reassociate``),
  vectorized across the output lanes; the f32 products are not contracted into FMAs.
* ``TileLoop`` is a C loop over the tiles of its axis with the carried tiles in scratch arrays.
* ``HostLoop`` is a C loop in ``tf_program`` that copies carried buffers through temporaries.

**Numerics** follow ``compiler/interp.py`` (and hence the reference evaluator): widen / round /
cast through ``tf_numerics.h`` (exhaustively tested against ``semantics.dtypes``); f32 / f64
arithmetic as the IEEE operations (built without fast-math or contraction); NaN-propagating
min / max with -0 < +0; integer arithmetic wrapping through unsigned types, ``floordiv`` /
``mod`` floored with a zero divisor giving 0 (numpy's); f64 → narrower float rounded once
(round-to-odd at f32, then the target); math functions from libm in double (exp, log, exp2,
log2, tanh, erfc; sigmoid / silu / gelu by their defining formulas) rounded once to the dtype —
within the ULP budgets of ``semantics.ulp``, not bit-exact with the reference.

**Memory.** Loads whose offsets may leave the buffer (ragged edges, data-dependent indices)
clamp the offset into it (masked lanes then read ``other``), as the interpreter does; stores
write only masked-in lanes inside the buffer. A kernel that loads a storage it also stores reads
a snapshot taken before the kernel when every load precedes every store (the interpreter's
all-instances-at-once order); other orders raise ``NotSupportedError``.

Anything the renderer cannot handle raises ``NotSupportedError`` naming the instruction and the
reason: never a silent fallback.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from tilefoundry.compiler import c_vecmath, kir, render_c_vreduce, spelling
from tilefoundry.compiler import render_decisions as rd
from tilefoundry.compiler.errors import NotSupportedError
from tilefoundry.compiler.kir import HostLoop, Kernel, Program, root_of
from tilefoundry.compiler.render_c_lanes import LanesC
from tilefoundry.compiler.render_c_reduce import ACCUMULATORS, ReduceDotC
from tilefoundry.compiler.spelling import CSIZE, CTYPE, c_f64_literal, c_literal

__all__ = ["ACCUMULATORS", "ENTRY", "PARALLEL_MIN_WORK", "c_source", "render", "root_names"]

ENTRY = "tf_program"
#: lane-operations (instances x tile elements x instructions) above which instances of a
#: kernel with independent instances are spread over threads: about 100 us of single-thread
#: work, against ~50 us to create and join a thread per call (measured: a 65,536-element f32
#: chain, 2^18.8 lane-operations, took 0.07 ms on 2 threads and 0.03 ms on 1)
PARALLEL_MIN_WORK = 1 << 21
_ARITH = spelling.ARITH
_INT_NAMES = ("i8", "u8", "i32", "i64")

def c_source(name: str) -> str:
    """A prelude file of ``compiler/c_runtime`` (real C sources that tools can lint and the
    tests compile on their own), as text."""
    from importlib.resources import files

    return files("tilefoundry.compiler.c_runtime").joinpath(name).read_text()


_PRELUDE = c_source("tf_prelude_c.h")

#: the prelude both C-family spellings share (SIMD C and CUDA C++): every function ``TF_FN``
#: (``static inline`` / ``static __device__``), divisions and square roots through the
#: spelling's ``TF__FDIV`` / ``TF__DDIV`` / ``TF__DSQRT`` (libm operators in C, the explicit
#: round-to-nearest intrinsics on the GPU) and the math functions through ``TF_EXP`` and friends
SHARED_PRELUDE = c_source("tf_prelude_shared.h")


def _prelude() -> str:
    return "#define _GNU_SOURCE 1 /* sched_getaffinity */\n" + prelude_constants() + \
        _PRELUDE + SHARED_PRELUDE + c_vecmath.EXPF_C + render_c_vreduce.VREDUCE_C


def prelude_constants() -> str:
    """``#define`` lines of the f64 constants of the math formulas (both spellings)."""
    from tilefoundry.semantics.evaluator import nn

    consts = {"TF__GELU_C0": nn._GELU_C0, "TF__GELU_C1": nn._GELU_C1,
              "TF__INV_SQRT2": nn._INV_SQRT2, "TF__TINY": nn._TINY}
    return "".join(f"#define {k} {c_f64_literal(v)}\n" for k, v in consts.items())


def _unsupported(what: str, why: str, spelling: tuple[str, str] = ("simd", "the SIMD C renderer")
                 ) -> NotSupportedError:
    return NotSupportedError(f"{spelling[0]}: {what}", why, stage=spelling[1])


def root_names(program: Program) -> list[str]:
    """The root buffers, in the order ``tf_program`` takes their pointers."""
    return [b.name for b in program.buffers if b.kind != "alias"]


def itemsize(dt: str) -> int:
    return kir.numpy_dtype(dt).itemsize


# =============================================================================================
# kernels
# =============================================================================================
_LANEWISE = (kir.Const, kir.Coord, kir.EdgeMask, kir.Load, kir.Store, kir.Broadcast, kir.Widen,
             kir.Round, kir.Cast, kir.BinOp, kir.UnOp, kir.Select, kir.Bitcast, kir.Math)


@dataclass
class Run:
    axes: tuple[int, ...]
    instrs: list = field(default_factory=list)


class KernelC(LanesC, ReduceDotC):
    """One kernel in the SIMD C spelling; ``render_cuda.KernelCuda`` overrides what the GPU
    spells differently (the class attributes and the methods marked *spelling*)."""

    #: (prefix, stage) of NotSupportedError messages
    SPELLING = ("simd", "the SIMD C renderer")
    #: the pragma on the innermost loop of a lane-wise run (None: no pragma)
    SIMD_PRAGMA: str | None = "#pragma omp simd"
    #: the empty-asm barrier after each step of an interleaved integer accumulation (GCC 12's
    #: miscompile, D221); None where the compiler needs none (NVRTC has no GNU ``__asm__``)
    ACC_BARRIER: str | None = '__asm__ volatile("" : "+m"({acc}));'
    #: f32 / bf16 / f16 ``exp`` through the branch-free ``tf__expf_v`` (``c_vecmath``, D400)
    #: instead of libm's double ``exp``; the CUDA spelling keeps its own math
    vec_math: bool = True
    #: ``exp`` of f32 / bf16 / f16 by ``tf__expf_v``, and ``exp`` / ``sigmoid`` / ``silu``
    #: whose result is only rounded to bf16 / f16 by the f32 narrow forms ``tf__<fn>_nf``
    #: (``c_vecmath.CUDA_MATH``, D519): the CUDA spelling; the SIMD C spelling takes ``exp``
    #: by ``vec_math`` and keeps libm's double functions for the others
    NARROW_MATH: bool = False

    def unsupported(self, what: str, why: str) -> NotSupportedError:
        return _unsupported(what, why, self.SPELLING)

    # -- spelling: f32 / f64 arithmetic ---------------------------------------------------------
    def farith(self, k: str, a: str, b: str, dt: str) -> str:
        """``a <k> b`` for k in add / sub / mul / div on f32 / f64 (the IEEE operation)."""
        return f"{a} {_ARITH[k]} {b}"

    def fsqrt(self, x: str, dt: str) -> str:
        return f"sqrt{'f' if dt == 'f32' else ''}({x})"

    def __init__(self, k: Kernel, bm: Mapping[str, kir.Buffer], roots: Mapping[str, int],
                 index: int):
        self.k, self.bm, self.roots, self.kidx = k, bm, roots, index
        self.types = kir.kernel_types(k, bm)
        self.ids: dict[str, int] = {}
        self.consts: dict[str, kir.Const] = {}
        self.alias: dict[str, str] = {}  # tile-loop outs -> their carried names
        self.arrays: dict[str, int] = {}  # SSA name -> byte offset in scratch
        self.aux: list[tuple[str, str, int]] = []  # (C name, C type, byte offset in scratch)
        self.scratch = 0
        self.snap: dict[str, str] = {}  # root -> snapshot pointer
        self.work = 0
        self.uniq = 0

    # -- names ------------------------------------------------------------------------------
    @functools.cached_property
    def defs(self) -> dict[str, kir.Instr]:
        """Each SSA name's defining instruction (loop bodies included)."""
        return {i.out: i for i in kir.iter_instrs(self.k.body) if hasattr(i, "out")}

    def cid(self, name: str) -> str:
        name = self.alias.get(name, name)
        i = self.ids.get(name)
        if i is None:
            i = self.ids[name] = len(self.ids)
        return f"{i}_{re.sub(r'[^0-9A-Za-z_]', '', name)}"

    def fresh(self, stem: str) -> str:
        self.uniq += 1
        return f"{stem}{self.uniq}"

    def dt(self, name: str) -> str:
        return self.types[name].dtype

    def full(self, name: str) -> tuple[int, ...]:
        return tuple(sorted(self.types[name].full))

    def elems(self, axes: Iterable[int]) -> int:
        return math.prod(self.k.block[d] for d in axes)

    def alloc(self, nbytes: int) -> int:
        off = self.scratch
        self.scratch += -(-max(nbytes, 1) // 64) * 64
        return off

    def need_array(self, name: str) -> None:
        name = self.alias.get(name, name)
        if name in self.arrays or name in self.consts:
            return
        self.arrays[name] = self.alloc(self.elems(self.full(name)) * itemsize(self.dt(name)))

    def aux_array(self, ctype: str, n: int) -> str:
        nm = self.fresh("aux")
        self.aux.append((nm, ctype, self.alloc(n * CSIZE[ctype])))
        return nm

    # -- references ---------------------------------------------------------------------------
    def index(self, axes: tuple[int, ...], coords: Mapping[int, str]) -> str:
        """Row-major element index of a tile spanning ``axes`` at lane ``coords``."""
        terms, stride = [], 1
        for d in reversed(axes):
            terms.append(coords[d] if stride == 1 else f"{coords[d]} * {stride}")
            stride *= self.k.block[d]
        return " + ".join(reversed(terms)) if terms else "0"

    def aref(self, name: str, coords: Mapping[int, str]) -> str:
        """The array element of ``name`` at ``coords`` (axes the value is broadcast on are
        ignored)."""
        if name in self.consts:
            return f"k{self.cid(name)}"
        real = self.alias.get(name, name)
        self.need_array(real)
        return f"v{self.cid(real)}[{self.index(self.full(name), coords)}]"

    # -- structure ----------------------------------------------------------------------------
    def segments(self, body: Iterable[kir.Instr]) -> list:
        segs: list = []
        for ins in body:
            if isinstance(ins, kir.Const):
                self.consts[ins.out] = ins
                continue
            if isinstance(ins, _LANEWISE):
                axes = self.lane_axes(ins)
                if segs and isinstance(segs[-1], Run) and segs[-1].axes == axes:
                    segs[-1].instrs.append(ins)
                else:
                    segs.append(Run(axes, [ins]))
            elif isinstance(ins, kir.TileLoop):
                for o, c in zip(ins.outs, ins.carried, strict=True):
                    self.alias[o] = self.alias.get(c, c)
                segs.append((ins, self.segments(ins.body)))
            elif isinstance(ins, kir.Reduce | kir.Dot):
                segs.append(ins)
            else:
                raise self.unsupported(type(ins).__name__, "no C rendering")
        return segs

    def lane_axes(self, ins: kir.Instr) -> tuple[int, ...]:
        if isinstance(ins, kir.Store):
            axes = {d for d, s in enumerate(ins.strides) if s and self.k.domain[d] > 1}
            for n, _ in ins.index:
                axes |= self.types[n].full
            if ins.mask:
                axes |= self.types[ins.mask].full
            return tuple(sorted(axes))
        return self.full(ins.out)

    def plan_arrays(self, segs: list) -> None:
        """Values read outside the run defining them live in arrays."""
        where: dict[str, int] = {}

        def walk(segs: list) -> None:
            for seg in segs:
                if isinstance(seg, Run):
                    sid = id(seg)
                    for ins in seg.instrs:
                        for o in ins.operands():
                            if where.get(o) != sid and o not in self.consts:
                                self.need_array(o)
                        for r in ins.results():
                            where[r] = sid
                elif isinstance(seg, tuple):
                    loop, inner = seg
                    for n in (*loop.inits, *loop.carried):
                        if n not in self.consts:
                            self.need_array(n)
                    walk(inner)
                    for n in loop.yields:
                        if n not in self.consts:
                            self.need_array(n)
                else:
                    for o in seg.operands():
                        if o not in self.consts:
                            self.need_array(o)
                    self.need_array(seg.out)

        walk(segs)

    # -- memory checks ------------------------------------------------------------------------
    def check_storage(self) -> None:
        """Loads of a storage the kernel also stores read a snapshot (all loads first), as the
        interpreter's all-instances-at-once order has it."""
        order: list[tuple[str, str, bool]] = []  # (kind, root, inside a tile loop)

        def walk(body: Iterable[kir.Instr], inside: bool) -> None:
            for ins in body:
                if isinstance(ins, kir.Load | kir.Store):
                    kind = "load" if isinstance(ins, kir.Load) else "store"
                    order.append((kind, root_of(ins.buffer, self.bm).name, inside))
                elif isinstance(ins, kir.TileLoop):
                    walk(ins.body, True)

        walk(self.k.body, False)
        stored = {r for kind, r, _ in order if kind == "store"}
        loaded = {r for kind, r, _ in order if kind == "load"}
        for r in sorted(stored & loaded):
            seq = [(kind, inside) for kind, rr, inside in order if rr == r]
            first_store = next(i for i, (kind, _) in enumerate(seq) if kind == "store")
            if any(kind == "load" for kind, _ in seq[first_store:]) or \
                    any(inside for _, inside in seq):
                raise self.unsupported("Kernel", f"{self.k.name} reads storage {r} after (or in the "
                                             f"same tile loop as) writing it")
            self.snap[r] = f"Q[{self.roots[r]}]"

    def parallel_safe(self) -> bool:
        k = self.k
        for ins in kir.iter_instrs(k.body):
            if isinstance(ins, kir.Store):
                if ins.index:
                    return False
                for d, s in enumerate(ins.strides):
                    if s == 0 and k.grid[d] > 1:
                        return False
        return True

    # -- the kernel ---------------------------------------------------------------------------
    def render(self) -> str:
        self.check_storage()
        whole = self.render_whole()
        if whole is not None:
            return whole
        segs = self.segments(self.k.body)
        self.plan_arrays(segs)
        self.plan_mapping(segs)
        body: list[str] = []
        self.emit(segs, body, "            ")
        return "\n".join(self.wrap(body))

    def render_whole(self) -> str | None:
        """*Spelling*: the whole kernel rendered by a dedicated mapping (CUDA: the tensor-core
        matmul, D280), or None for the run-by-run rendering (C: always None)."""
        return None

    def plan_mapping(self, segs: list) -> None:
        """*Spelling*: choose how instances (and lanes) map to threads (C: nothing to choose)."""

    def comment(self) -> str:
        k = self.k
        return (f"/* kernel {k.name} domain {list(k.domain)} block {list(k.block)} "
                f"grid {list(k.grid)} */")

    def const_lines(self, ind: str) -> list[str]:
        return [f"{ind}const {CTYPE[c.dtype]} k{self.cid(n)} = {c_literal(c.value, c.dtype)};"
                for n, c in self.consts.items()]

    def scratch_views(self, ind: str) -> list[str]:
        """The SSA arrays and auxiliary arrays as typed pointers into the scratch ``S``."""
        out = []
        for n, off in self.arrays.items():
            ct = CTYPE[self.dt(n)]
            out.append(f"{ind}{ct} *const v{self.cid(n)} = ({ct} *)(S + {off});")
        for nm, ct, off in self.aux:
            out.append(f"{ind}{ct} *const {nm} = ({ct} *)(S + {off});")
        return out

    def tile_origin(self, ind: str) -> list[str]:
        """``b<d>``: the first element of instance ``pid``'s tile on each axis."""
        k = self.k
        out = [f"{ind}int64_t q = pid;"]
        for d in reversed(range(k.rank)):
            if d in k.loop_axes:
                continue
            if k.domain[d] > 1 and k.grid[d] > 1:
                out.append(f"{ind}const int64_t b{d} = (q % {k.grid[d]}ll) * {k.block[d]}ll; "
                           f"q /= {k.grid[d]}ll;")
            else:
                out.append(f"{ind}const int64_t b{d} = 0;")
        out.append(f"{ind}(void)q;")
        return out

    def wrap(self, body: list[str]) -> list[str]:
        """*Spelling*: the kernel's functions around its body (one instance's code): a range
        function over instances ``[lo, hi)`` and the launcher (snapshots, threads)."""
        k = self.k
        name = f"tf_k{self.kidx}"
        inst = k.instances
        out = [self.comment(),
               f"static void {name}_range(char *const *P, char *const *Q, int64_t lo, "
               f"int64_t hi)", "{", "    (void)Q;"]
        out += self.const_lines("    ")
        out.append("    {")
        if self.scratch:
            out.append(f"        char *const S = (char *)aligned_alloc(64, {self.scratch});")
            out.append("        if (!S) abort();")
        out += self.scratch_views("        ")
        out.append("        for (int64_t pid = lo; pid < hi; ++pid) {")
        out += self.tile_origin("            ")
        out.extend(body)
        out.append("        }")
        if self.scratch:
            out.append("        free(S);")
        out.append("    }")
        out.append("}")
        # the launcher: snapshots, then the instances (over threads when that is safe)
        out += [f"static void {name}(char *const *P)", "{"]
        q = "(char *const *)0"
        if self.snap:
            q = "Q"
            out.append(f"    char *Q[{len(self.roots)}] = {{0}};")
        for root in self.snap:
            i = self.roots[root]
            nbytes = rd.root_size(self.bm[root]) * itemsize(self.bm[root].dtype)
            out.append(f"    Q[{i}] = (char *)malloc({max(nbytes, 1)});")
            out.append(f"    if (!Q[{i}]) abort();")
            out.append(f"    memcpy(Q[{i}], P[{i}], {nbytes});")
        par = inst > 1 and self.parallel_safe() and inst * self.work >= PARALLEL_MIN_WORK
        if par:
            out.append(f"    tf__parallel({name}_range, P, {q}, {inst}ll);")
        else:
            out.append(f"    {name}_range(P, {q}, 0, {inst}ll);")
        for root in self.snap:
            out.append(f"    free(Q[{self.roots[root]}]);")
        out.append("}")
        return out

    # -- emission -----------------------------------------------------------------------------
    def loops(self, axes: Iterable[int], ind: str, out: list[str], simd: bool = True,
              var: str = "c") -> str:
        axes = list(axes)
        for j, d in enumerate(axes):
            if simd and self.SIMD_PRAGMA and j == len(axes) - 1:
                out.append(f"{ind}{self.SIMD_PRAGMA}")
            out.append(f"{ind}for (int64_t {var}{d} = 0; {var}{d} < {self.k.block[d]}ll; "
                       f"++{var}{d}) {{")
            ind += "    "
        if not axes:
            out.append(f"{ind}{{")
            ind += "    "
        return ind

    def close(self, axes: Iterable[int], ind: str, out: list[str]) -> None:
        n = max(len(list(axes)), 1)
        for j in range(n):
            out.append(ind[:len(ind) - 4 * (j + 1)] + "}")

    def emit(self, segs: list, out: list[str], ind: str) -> None:
        for seg in segs:
            if isinstance(seg, Run):
                self.emit_run(seg, out, ind)
            elif isinstance(seg, tuple):
                self.emit_loop(seg[0], seg[1], out, ind)
            elif isinstance(seg, kir.Reduce):
                self.emit_reduce(seg, out, ind)
            else:
                self.emit_dot(seg, out, ind)

    def emit_run(self, run: Run, out: list[str], ind: str) -> None:
        coords = {d: f"c{d}" for d in range(self.k.rank)}
        local: dict[str, str] = {}
        self.work += self.elems(run.axes) * len(run.instrs)

        innermost = run.axes[-1] if run.axes else None
        hoisted: dict[str, str] = {}
        hoist_lines: list[str] = []

        def ref(n: str) -> str:
            """A scalar of this run, or an array element; array values that do not vary along
            the innermost axis are read once before the innermost loop (GCC vectorizes a
            loop calling libmvec functions only with loop-invariant loads hoisted)."""
            if n in local:
                return local[n]
            if n in self.consts or innermost is None or \
                    innermost in self.types[self.alias.get(n, n)].full:
                return self.aref(n, coords)
            h = hoisted.get(n)
            if h is None:
                h = hoisted[n] = f"h{self.cid(n)}"
                hoist_lines.append(f"const {CTYPE[self.dt(n)]} {h} = {self.aref(n, coords)};")
            return h

        lines, indexed_store = self.run_lines(run, ref, local, coords)
        if innermost is None:
            inner = self.loops((), ind, out)
            out.extend(inner + ln for ln in lines)
            self.close((), inner, out)
            return
        # the outer loops (or a plain block) scope the hoisted names to this run
        outer = self.loops(run.axes[:-1], ind, out, simd=False)
        out.extend(outer + ln for ln in hoist_lines)
        inner = self.loops(run.axes[-1:], outer, out, simd=not indexed_store)
        out.extend(inner + ln for ln in lines)
        self.close(run.axes[-1:], inner, out)
        self.close(run.axes[:-1], outer, out)

    def run_lines(self, run: Run, ref: Callable, local: dict[str, str],
                  coords: Mapping[int, str]) -> tuple[list[str], bool]:
        """One lane's code of a run (its instructions in order; ``ref`` reads an operand,
        ``local`` collects the run's scalars) and whether it stores through an index."""
        wide: dict[str, str] = {}  # bf16 values of this run -> their f32 value
        lines: list[str] = []
        indexed_store = False
        for ins in run.instrs:
            if isinstance(ins, kir.Store):
                indexed_store |= bool(ins.index)
                lines.extend(self.store(ins, ref))
                continue
            if isinstance(ins, kir.Round) and self.dt(ins.x) == "f32" and ins.to == "bf16" \
                    and ins.overflow == "nonfinite":
                # keep the rounded value in f32 for a widen in this run (no 16-bit round trip);
                # a value that is its own rounding is not rounded again (D511)
                w = f"w{self.cid(ins.out)}"
                same = kir.bf16_round_is_identity(self.defs, self.dt, ins.x)
                lines.append(f"const float {w} = "
                             f"{ref(ins.x) if same else f'tf__rnd_bf16({ref(ins.x)})'};")
                wide[ins.out] = w
                expr, pre = f"(uint16_t)(tf_f32_bits({w}) >> 16)", []
            elif isinstance(ins, kir.Widen) and ins.x in wide:
                w = wide[ins.x]
                expr, pre = (f"(double){w}" if ins.to == "f64" else w), []
            else:
                expr, pre = self.lane_expr(ins, ref)
            lines.extend(pre)
            t = f"t{self.cid(ins.out)}"
            lines.append(f"const {CTYPE[self.dt(ins.out)]} {t} = {expr};")
            local[ins.out] = t
            if ins.out in self.arrays:
                lines.append(f"{self.aref(ins.out, coords)} = {t};")
        return lines, indexed_store


# =============================================================================================
# programs
# =============================================================================================
class ProgramC:
    """A program in the SIMD C spelling: the kernels and ``tf_program`` with the host loops."""

    KERNEL = KernelC

    def unsupported(self, what: str, why: str) -> NotSupportedError:
        return _unsupported(what, why, self.KERNEL.SPELLING)

    def __init__(self, program: Program, launch: dict[str, int] | None = None):
        self.p = program
        #: the target's launch options (the CUDA renderer's ``fp8_promote``, D536)
        self.launch = dict(launch or {})
        self.bm = program.buffer_map()
        self.names = root_names(program)
        self.roots = {n: i for i, n in enumerate(self.names)}
        self.funcs: list[str] = []
        self.nk = 0
        self.uniq = 0

    def render(self) -> str:
        body: list[str] = []
        self.steps(self.p.steps, body, "    ")
        parts = [_prelude(), f"/* program {self.p.name} */", *self.funcs,
                 f"void {ENTRY}(void **roots)", "{"]
        parts.append(f"    char *P[{max(len(self.names), 1)}] = {{0}};")
        for i, n in enumerate(self.names):
            parts.append(f"    P[{i}] = (char *)roots[{i}]; /* {n} */")
        parts.append("    (void)P;")
        parts.extend(body)
        parts.append("}")
        return "\n".join(parts) + "\n"

    def steps(self, seq: Iterable, out: list[str], ind: str) -> None:
        for s in seq:
            if isinstance(s, Kernel):
                if s.instances == 0 or any(n == 0 for n in s.domain):
                    continue
                kc = self.KERNEL(s, self.bm, self.roots, self.nk)
                kc.launch = self.launch
                self.funcs.append(kc.render())
                self.kernel_step(kc, out, ind)
                self.nk += 1
            elif isinstance(s, HostLoop):
                self.host_loop(s, out, ind)
            else:
                raise self.unsupported(type(s).__name__, "not a step")

    def kernel_step(self, kc: KernelC, out: list[str], ind: str) -> None:
        """*Spelling*: what the host code does for a rendered kernel (here: calls it)."""
        out.append(f"{ind}tf_k{kc.kidx}(P); /* {kc.k.name} */")

    def elem(self, name: str, idx: list[str]) -> str:
        b = self.bm[name]
        root = root_of(name, self.bm)
        off = " + ".join([f"{b.offset}ll"] + [f"{i} * {s}ll" for i, s in
                                               zip(idx, b.strides, strict=True) if s])
        return f"(({CTYPE[root.dtype]} *)P[{self.roots[root.name]}])[{off}]"

    def copy(self, out: list[str], ind: str, src: str | None, dst: str | None, tmp: str,
             like: str) -> None:
        """Copy buffer ``src`` into the contiguous temporary ``tmp`` (dst None) or ``tmp`` into
        buffer ``dst``."""
        b = self.bm[like]
        if b.size == 0:
            return
        r = len(b.shape)
        idx = [f"h{j}" for j in range(r)]
        for j, nn in enumerate(b.shape):
            out.append(f"{ind}{'    ' * j}for (int64_t h{j} = 0; h{j} < {nn}ll; ++h{j})")
        flat = " + ".join(f"h{j} * {s}ll" for j, s in enumerate(kir.c_strides(b.shape))) or "0"
        pad = ind + "    " * r
        if dst is None:
            out.append(f"{pad}{tmp}[{flat}] = {self.elem(src, idx)};")
        else:
            out.append(f"{pad}{self.elem(dst, idx)} = {tmp}[{flat}];")

    def host_loop(self, s: HostLoop, out: list[str], ind: str) -> None:
        self.uniq += 1
        u = self.uniq
        out.append(f"{ind}{{ /* loop {s.name} */")
        i2 = ind + "    "
        tmps = []
        for j, c in enumerate(s.carried):
            b = self.bm[c]
            ct = CTYPE[b.dtype]
            tmp = f"hl{u}_{j}"
            out.append(f"{i2}{ct} *const {tmp} = ({ct} *)malloc({max(b.size, 1)} * "
                       f"sizeof({ct}));")
            out.append(f"{i2}if (!{tmp}) abort();")
            tmps.append(tmp)

        def transfer(srcs: tuple[str, ...], ind3: str) -> None:
            # a buffer carried to itself (an in-place write, compiler/inplace.py) copies nothing
            moved = [(src, tmp, c) for src, tmp, c in zip(srcs, tmps, s.carried, strict=True)
                     if src != c]
            for src, tmp, c in moved:
                self.copy(out, ind3, src, None, tmp, c)
            for _, tmp, c in moved:
                self.copy(out, ind3, None, c, tmp, c)

        transfer(s.inits, i2)
        vb = self.bm[s.var]
        out.append(f"{i2}for (int64_t it = {s.start}ll; it < {s.stop}ll; it += {s.step}ll) {{")
        i3 = i2 + "    "
        out.append(f"{i3}{self.elem(s.var, [])} = ({CTYPE[vb.dtype]})it;")
        self.steps(s.body, out, i3)
        transfer(s.yields, i3)
        out.append(f"{i2}}}")
        for tmp in tmps:
            out.append(f"{i2}free({tmp});")
        out.append(f"{ind}}}")


def render(program: Program) -> str:
    """C source of ``program`` (raises ``NotSupportedError`` for what it cannot render)."""
    return ProgramC(program).render()
