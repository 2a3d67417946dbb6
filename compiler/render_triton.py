"""Render kernel-IR programs to Triton (issue 17): the Triton backend's renderer.
Split by concern (issue 36, D501): this module holds the kernel (arguments, coordinates,
loads / stores, lane-wise instructions) and the program; ``render_triton_reduce`` the
reductions and ``render_triton_dot`` the dots and tile loops (``_KernelT`` inherits both).
What a conversion, a reduction's seed or a math call computes is decided once for every
renderer in ``render_decisions`` (D500); the scalar spellings are ``spelling``'s (D423).

``render(program, interpret=False) -> str`` is the source of one Python module (rendered per
target: ``interpret=True`` for Triton's CPU interpreter, which differs only in the tensor-core
``dot``, findings F20): a prelude of ``@triton.jit``
helpers (the bit-exact conversions, NaN-keeping min / max, the correctly rounded division)
and one ``@triton.jit`` function per kernel, ``KERNELS[name] = (fn, roots, instances,
storage types, launch options)``;
``roots`` are the root buffers the kernel touches, in argument order, ``instances`` its
program-instance count (the launch grid is one-dimensional: the instance id is unravelled
over the kernel's grid in the kernel). Host loops stay on the host (``triton_backend``).

**Tiles.** Every SSA value is a Triton tensor of the kernel's rank (rank 0 is rendered as
rank 1 of extent 1) whose extent is the block on the axes its tile spans and 1 elsewhere;
operations broadcast. Coordinates are ``pid * block + tl.arange`` reshaped onto their axis;
a ``TileLoop`` is a ``range`` loop over the tiles of its axis with the carried values as loop
variables. Every strided offset and extent is a literal (a kernel is rendered per shape).

**Numerics** (the facts of issue 17): a low-precision float travels as its bit pattern in an
unsigned integer (bf16 / f16 in ``uint16``, the fp8 formats in ``uint8``), loaded from an
integer view of its storage; ``Widen`` / ``Round`` / ``Cast`` are integer code on those bits,
the algorithms of ``c_runtime/tf_numerics.h`` with the same format parameters, so GPU and
interpreter give the same bits (never ``.to(tl.bfloat16)`` / ``.to(tl.float8*)``, which
saturate on the GPU and are wrong in the interpreter). f32 ``/`` is ``tl.div_rn`` and
``sqrt`` ``tl.sqrt_rn`` (the GPU defaults are approximate); ``neg`` / ``abs`` flip / clear the
sign bit (``-x`` of +0 is +0 in Triton 3.6); min / max propagate NaN and order -0 < +0
(``tl.maximum`` drops NaN); ``ceil`` and ``round`` are written so that no subnormal is
flushed. Reductions widen before reducing (the kernel IR's operand dtype), fold policies
(and ``ordered_tree``, of which a left fold is one bracketing) fold their lanes in order, one
lane a step; ``unordered_tree`` sums are ``tl.sum`` in f32 / f64 (a tree); max / min are
``tl.reduce`` with the NaN-keeping pick. Math functions are computed in f64 and rounded once
(within the ULP budgets of ``semantics.ulp``; the GPU's f32 ``tl.exp`` is not).

Anything else raises ``NotSupportedError`` naming the instruction before any kernel runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np

from tilefoundry.compiler import kir, spelling
from tilefoundry.compiler import render_decisions as rd
from tilefoundry.compiler.errors import NotSupportedError
from tilefoundry.compiler.kir import HostLoop, Kernel, Program, root_of
from tilefoundry.compiler.render_triton_dot import DotLoopT
from tilefoundry.compiler.render_triton_reduce import ReduceT
from tilefoundry.compiler.render_triton_rows import ROWS_PRELUDE
from tilefoundry.compiler.spelling import ARITH as _ARITH
from tilefoundry.compiler.spelling import CMP as _CMP
from tilefoundry.compiler.spelling import LOGIC as _LOGIC
from tilefoundry.compiler.spelling import NARROW_ROUND as _NARROW_ROUND
from tilefoundry.compiler.spelling import TRITON_MATH as _MATH
from tilefoundry.compiler.spelling import TRITON_NARROW_F32_MATH as _NARROW_F32_MATH

__all__ = ["NARROW", "PRELUDE", "STORAGE", "TUNING", "render", "storage_view"]

#: the storage element type a root of each kernel-IR dtype is passed as (a numpy view)
STORAGE = {"f32": "float32", "f64": "float64", "bf16": "int16", "f16": "int16",
           "fp8e4m3": "int8", "fp8e5m2": "int8", "f8e8m0": "int8", "bool": "uint8",
           "i8": "int8", "u8": "uint8", "i32": "int32", "i64": "int64", "u32": "int32"}
#: the in-kernel element type of an SSA value of each dtype
_TL = spelling.TRITON_TL
#: dtypes stored as another integer type of their width (u32: Bitcast's patterns, passed as
#: int32 storage, reinterpreted on load and store)
_STORE_TL = {"bf16": "tl.int16", "f16": "tl.int16", "fp8e4m3": "tl.int8", "fp8e5m2": "tl.int8",
             "f8e8m0": "tl.int8", "u32": "tl.int32"}
#: matmul tile rows per group of the grouped launch order (``_KernelT.grouped_axes``)
_GROUP_M = 8
#: default launch options by kernel class (measured on an H200 in earlier sessions): ``dot``
#: kernels, and row / elementwise kernels by the elements of their tile (the first entry whose
#: limit the tile fits); the autotuner's record (``compiler/triton_tune.py``) overrides them.
#: They change speed only: every value gives an admitted result (a ``tl.reduce`` tree may
#: change with the layout, and every tree is one the unordered_tree policy admits).
TUNING: dict = {
    "dot": {"num_warps": 8, "num_stages": 3},
    "rows": [(1024, {"num_warps": 4, "num_stages": 1}),
             (4096, {"num_warps": 8, "num_stages": 1}),
             (1 << 62, {"num_warps": 16, "num_stages": 1})],
}
#: IEEE-like narrow formats, as tf_numerics.h parameterizes them:
#: (bits, exponent bits, mantissa bits, bias, largest finite code, NaN code, E4M3FN specials)
NARROW = {"bf16": (16, 8, 7, 127, 0x7F7F, 0x7FC0, 0), "f16": (16, 5, 10, 15, 0x7BFF, 0x7E00, 0),
          "fp8e4m3": (8, 4, 3, 7, 0x7E, 0x7F, 1), "fp8e5m2": (8, 5, 2, 15, 0x7B, 0x7E, 0)}
assert set(NARROW) == set(_NARROW_ROUND)
_BITS = rd.WIDEN_SOURCES
_RND = {"nearest": 0, "up": 1, "down": 2}
#: ``render_decisions.CAST_PATHS`` in Triton (``float_float`` / ``int_narrow`` are
#: ``round_f32``): {v} the operand (``cast_operand``), {tl} the destination's element type,
#: {lo} / {hi} / {ge} its ``FLOAT_TO_INT_RANGE`` (truncated through {mid})
_CAST = {"float_bool": "({v} != 0.0)",
         "float_int": "tl.where((({v} {ge} {lo}) & ({v} < {hi})), {v}, 0.0).to({mid}).to({tl})",
         "int_bool": "({v} != 0)", "int_int": "{v}.to({tl})", "int_f32": "{v}{i32}.to(tl.float32)"}
#: the ``math`` functions Triton has in f64 (``tl.<fn>``); the others are refused on f64
_F64_MATH = ("exp", "log", "exp2", "log2")


def storage_view(a: np.ndarray, dt: str) -> np.ndarray:
    """The flat numpy storage of a root of dtype ``dt`` as the kernel's pointer type."""
    return a.view(np.dtype(STORAGE[dt]))


def _triton_prelude() -> str:
    """``compiler/triton_prelude.py`` as text (read, not imported: rendering needs no Triton)."""
    from importlib.resources import files

    return files("tilefoundry.compiler").joinpath("triton_prelude.py").read_text()


PRELUDE = _triton_prelude()


def _erfc64_source() -> str:
    """``_tf_erfc64``: ``semantics.special.erfc`` (Cody's rational approximations, the same
    coefficient tuples, the same Horner order and the same exp(-y²) split) as Triton f64 code,
    so the reference and the kernel evaluate one algorithm."""
    from tilefoundry.semantics import special as sp

    def horner(var, z, lead, coefs, den_coefs, last_num, last_den, n):
        out = [f"    {var}n = {lead!r} * {z}", f"    {var}d = {z}"]
        for i in range(n):
            out.append(f"    {var}n = ({var}n + {coefs[i]!r}) * {z}")
            out.append(f"    {var}d = ({var}d + {den_coefs[i]!r}) * {z}")
        out.append(f"    {var}r = ({var}n + {last_num!r}) / ({var}d + {last_den!r})")
        return out

    def exp_neg_sq(y, name):
        return [f"    {name}s = tl.floor({y} * 16.0) / 16.0",
                f"    {name} = tl.exp(-{name}s * {name}s) * tl.exp(-(({y} - {name}s) * "
                f"({y} + {name}s)))"]

    th = sp._THRESH
    lines = ["@triton.jit", "def _tf_erfc64(x):",
             '    """semantics.special.erfc in Triton f64 (generated from its coefficients)"""',
             "    y = tl.abs(x)",
             f"    small = y <= {th!r}",
             "    xs = tl.where(small, x, 0.0)",
             "    y2 = xs * xs"]
    lines += horner("a", "y2", sp._A[4], sp._A, sp._B, sp._A[3], sp._B[3], 3)
    lines += ["    r_small = 1.0 - xs * ar",
              "    yb = tl.where(small | (y != y), 1.0, y)",
              "    mid = yb <= 4.0",
              "    ym = tl.where(mid, yb, 1.0)",
              "    yl = tl.where(mid | (yb > 1.7976931348623157e308), 5.0, yb)"]
    lines += horner("c", "ym", sp._C[8], sp._C, sp._D, sp._C[7], sp._D[7], 7)
    lines += exp_neg_sq("ym", "em")
    lines += ["    r_mid = em * cr", "    z = 1.0 / (yl * yl)"]
    lines += horner("p", "z", sp._P[5], sp._P, sp._Q, sp._P[4], sp._Q[4], 4)
    lines += exp_neg_sq("yl", "el")
    lines += [f"    r_large = el * (({sp._SQRPI!r} - z * pr) / yl)",
              f"    r_large = tl.where(yl >= {sp._XBIG!r}, 0.0, r_large)",
              "    big = tl.where(mid, r_mid, r_large)",
              "    big = tl.where(yb == float('inf'), 0.0, big)",
              "    r_big = tl.where(x < 0, 2.0 - big, big)",
              "    out = tl.where(small, r_small, r_big)",
              "    return tl.where(x != x, x, out)"]
    return "\n".join(lines) + "\n"


PRELUDE += "\n\n" + _erfc64_source() + "\n\n" + ROWS_PRELUDE


def _unsupported(what: str, why: str) -> NotSupportedError:
    return NotSupportedError(f"triton: {what}", why, stage="the Triton renderer")


_name = spelling.triton_name


def _f32_lit(v: float) -> str:
    return f"0x{int(np.float32(v).view(np.uint32)):08X}"


def _f64_lit(v: float) -> str:
    return f"0x{int(np.float64(v).view(np.uint64)):016X}"


class _KernelT(ReduceT, DotLoopT):
    """One kernel rendered as a ``@triton.jit`` function (``ReduceT``: its reductions,
    ``DotLoopT``: its dots and tile loops)."""

    @staticmethod
    def unsupported(what: str, why: str) -> NotSupportedError:
        return _unsupported(what, why)

    def __init__(self, k: Kernel, bm: Mapping[str, kir.Buffer], interpret: bool = False,
                 hoist_loads: bool = False):
        self.k, self.bm = k, bm
        #: issue every global load (with what its address and mask need) before the first
        #: instruction that is not such a load's dependency (``hoisted``): a load written
        #: after a block reduction otherwise waits out the reduction (F45). More values live
        #: across the reductions (registers), so the tuner chooses (``ROWS_OPTIONS``).
        self.hoist_loads = hoist_loads
        #: rendered for Triton's CPU interpreter (whose bf16 / fp8 dot works on raw bits,
        #: findings F20) rather than the GPU; the module is rendered per target
        self.interpret = interpret
        self.types = kir.kernel_types(k, bm, where="triton")
        self.rank = max(k.rank, 1)
        self.block = k.block if k.rank else (1,)
        self.lines: list[str] = []
        self.roots: list[str] = []
        self.n = 0
        read = {root_of(i.buffer, bm).name for i in kir.iter_instrs(k.body)
                if isinstance(i, kir.Load)}
        wrote = {root_of(i.buffer, bm).name for i in kir.iter_instrs(k.body)
                 if isinstance(i, kir.Store)}
        #: each widened value's source and each load (the tensor-core ``dot`` loads its
        #: narrow operands itself, as 2-D tiles)
        self.widens = {i.out: i for i in kir.iter_instrs(k.body) if isinstance(i, kir.Widen)}
        self.loads = {i.out: i for i in kir.iter_instrs(k.body) if isinstance(i, kir.Load)}
        if read & wrote:
            raise _unsupported("Kernel", f"{k.name} loads and stores the storage of "
                                         f"{', '.join(sorted(read & wrote))} (program instances "
                                         f"run concurrently)")
        #: the integer type of coordinates and offsets: i32 where every offset the kernel can
        #: form is provably inside i32 (no run-time index terms), else i64 (D278)
        self.idx = "tl.int32" if self.offsets_fit_i32() else "tl.int64"
        #: a Dot's result -> the 2-D accumulator its tile loop carries (``carried_mma``)
        self.acc2d: dict[str, str] = {}
        self.dead: frozenset[str] | None = None

    def coord_max(self, d: int) -> int:
        """The largest coordinate ``c{d}`` takes: the last lane of the last tile (tiles cover
        the domain, so lanes past its edge exist and are masked)."""
        dom = self.k.domain[d] if self.k.rank else 1
        if dom <= 1:
            return 0
        b = self.block[d]
        return -(-dom // b) * b - 1

    def offset_range(self, ins: kir.Load | kir.Store,
                     bounded: frozenset[int] = frozenset()) -> tuple[int, int] | None:
        """The least and greatest offset ``ins`` can form, or None when a run-time index term
        makes it unbounded at compile time; along ``bounded`` axes only the coordinates inside
        the domain count (the lanes an edge mask keeps)."""
        if ins.index:
            return None
        base = ins.offset + self.bm[ins.buffer].offset
        lo = hi = base
        for d, st in enumerate(ins.strides):
            if st:
                top = self.coord_max(d)
                if d in bounded:
                    top = min(top, max(self.k.domain[d] - 1, 0))
                span = st * top
                lo += min(0, span)
                hi += max(0, span)
        return lo, hi

    def offsets_fit_i32(self) -> bool:
        lim = 2 ** 31 - 1
        if any(self.coord_max(d) > lim for d in range(len(self.block))):
            return False
        for i in kir.iter_instrs(self.k.body):
            if isinstance(i, (kir.Load, kir.Store)):
                r = self.offset_range(i)
                if r is None or r[0] < -lim or r[1] > lim:
                    return False
        return True

    def in_storage(self, ins: kir.Load | kir.Store, size: int) -> bool:
        """Every offset ``ins`` can form on a lane it accesses lies inside its storage of
        ``size`` elements (so no clamp and no bounds mask is rendered). A load or store masked
        by an ``EdgeMask`` accesses only lanes inside the domain along the mask's axes (masked
        lanes are never read or written, on the GPU and in the interpreter): the clamp that
        would otherwise stop 16-byte vector accesses along a ragged row is not needed (D340)."""
        r = self.offset_range(ins, self.edge_axes(ins.mask))
        return r is not None and r[0] >= 0 and r[1] < size

    def edge_axes(self, mask: str | None) -> frozenset[int]:
        """The axes an ``EdgeMask`` result ``mask`` bounds (none for other masks)."""
        if mask is not None:
            for i in kir.iter_instrs(self.k.body):
                if isinstance(i, kir.EdgeMask) and i.out == mask:
                    return frozenset(i.axes)
        return frozenset()

    # -- helpers ------------------------------------------------------------------------------
    def fresh(self, p: str) -> str:
        self.n += 1
        return f"t_{p}{self.n}"

    def dt(self, ssa: str) -> str:
        return self.types[ssa].dtype

    def shape(self, ssa: str | None = None, full: frozenset | set | None = None) -> list[int]:
        f = self.types[ssa].full if ssa is not None else (full or frozenset())
        return [b if d in f else 1 for d, b in enumerate(self.block)] if self.k.rank else [1]

    def emit(self, ind: str, line: str) -> None:
        self.lines.append(ind + line)

    def ptr(self, buffer: str) -> str:
        r = root_of(buffer, self.bm).name
        if r not in self.roots:
            self.roots.append(r)
        return f"P{self.roots.index(r)}"

    def coord(self, d: int) -> str:
        return f"c{d}"

    def put(self, ind: str, ssa: str, expr: str) -> None:
        """``ssa = expr`` broadcast to its tile shape."""
        self.emit(ind, f"{_name(ssa)} = tl.broadcast_to({expr}, {self.shape(ssa)})")

    def full_const(self, value: object, dt: str, shape: list[int]) -> str:
        if dt == "f32":
            return f"tl.full({shape}, {_f32_lit(value)}, tl.uint32).to(tl.float32, bitcast=True)"
        if dt == "f64":
            return (f"tl.full({shape}, {_f64_lit(value)}, tl.uint64).to(tl.float64, "
                    f"bitcast=True)")
        if dt == "bool":
            return f"tl.full({shape}, {1 if value else 0}, tl.int1)"
        if dt in _BITS:
            npdt = kir.numpy_dtype(dt)
            bits = int(np.asarray(np.asarray(value).astype(npdt)).view(f"u{npdt.itemsize}"))
            return f"tl.full({shape}, {bits}, {_TL[dt]})"
        return f"tl.full({shape}, {int(value)}, {_TL[dt]})"

    # -- kernel -------------------------------------------------------------------------------
    def render(self) -> tuple[str, list[str]]:
        k = self.k
        ind = "    "
        grid = k.grid if k.rank else ()
        self.emit(ind, f"pid = tl.program_id(0).to({self.idx})")
        inner = 1
        pids = {}
        mn = self.grouped_axes()
        if mn is not None:
            # a matmul's output tiles in groups of GROUP_M rows of tiles, so the instances
            # running together share their operand tiles in L2 (any instance order is valid:
            # instances are independent)
            m, n = mn
            gm, gn, g = grid[m], grid[n], min(_GROUP_M, grid[m])
            self.emit(ind, f"t_group = pid // {g * gn}")
            self.emit(ind, f"t_first = t_group * {g}")
            self.emit(ind, f"t_size = tl.minimum({gm} - t_first, {g})")
            self.emit(ind, f"t_in = pid % {g * gn}")
            pids[m] = "(t_first + t_in % t_size)"
            pids[n] = "(t_in // t_size)"
        for d in reversed(range(k.rank)):
            if d not in pids:
                pids[d] = f"((pid // {inner}) % {grid[d]})" if grid[d] > 1 else "0"
            inner *= grid[d]
        for d in range(k.rank):
            if d in k.loop_axes:
                continue
            self.emit_coord(ind, d, pids[d])
        self.body(hoisted(k.body) if self.hoist_loads else k.body, ind)
        args = ", ".join(f"P{i}" for i in range(len(self.roots)))
        head = ["@triton.jit", f"def {self.fn_name()}({args}):"]
        return "\n".join(head + self.lines) + "\n", list(self.roots)

    def grouped_axes(self) -> tuple[int, int] | None:
        """The (M, N) axes of a matmul kernel whose grid is over those two axes only."""
        dots = [i for i in kir.iter_instrs(self.k.body) if isinstance(i, kir.Dot)]
        if len(dots) != 1 or dots[0].axis < 2 or not self.k.rank:
            return None
        m, n = dots[0].axis - 2, dots[0].axis - 1
        grid = self.k.grid
        if any(g > 1 for d, g in enumerate(grid) if d not in (m, n)) or grid[m] < 2:
            return None
        return m, n

    def launch_options(self) -> dict[str, int]:
        """``num_warps`` / ``num_stages`` for the launch: the tuned values of
        ``TUNING`` for this kernel's class, else a default by tile size."""
        if any(isinstance(i, kir.Dot) for i in kir.iter_instrs(self.k.body)):
            return dict(TUNING["dot"])
        elems = math.prod(self.block)
        for limit, opts in TUNING["rows"]:
            if elems <= limit:
                return dict(opts)
        return dict(TUNING["rows"][-1][1])

    def fn_name(self) -> str:
        return "k_" + re.sub(r"[^0-9A-Za-z_]", "_", self.k.name)

    def emit_coord(self, ind: str, d: int, tile: str) -> None:
        k = self.k
        shape = [1] * self.rank
        if k.domain[d] <= 1:
            self.emit(ind, f"c{d} = tl.zeros({shape}, {self.idx})")
            return
        b = k.block[d]
        # ``[None, :]`` indexing, not ``tl.reshape``: Triton's axis analysis keeps the
        # contiguity of an expanded ``arange`` (16-byte vector loads / stores) but not of a
        # reshaped one (2-byte ones: counted in the SASS, D340)
        at = ", ".join(":" if a == d else "None" for a in range(self.rank))
        lead = "" if tile == "0" else f"{tile} * {b} + "
        sub = f"[{at}]" if self.rank > 1 else ""
        self.emit(ind, f"c{d} = ({lead}tl.arange(0, {b}).to({self.idx})){sub}")

    def mma_only(self) -> frozenset[str]:
        """The Widen / Load results that only tensor-core dots read (``dot_mma`` loads its
        operand tiles itself): not rendered."""
        body = list(kir.iter_instrs(self.k.body))
        readers: dict[str, list[kir.Instr]] = {}
        for i in body:
            for o in i.operands():
                readers.setdefault(o, []).append(i)
        for lp in (i for i in body if isinstance(i, kir.TileLoop)):
            for y in lp.yields:
                readers.setdefault(y, []).append(lp)
        dead: set[str] = set()
        for dot in (i for i in body if isinstance(i, kir.Dot)):
            if self.mma_operands(dot) is None:
                continue
            for w in (self.widens[dot.a], self.widens[dot.b]):
                if all(r is dot for r in readers.get(w.out, [])):
                    dead.add(w.out)
                    if all(r is w for r in readers.get(w.x, [])):
                        dead.add(w.x)
        return frozenset(dead)

    def body(self, seq, ind: str) -> None:
        if self.dead is None:
            self.dead = self.mma_only()
        for ins in seq:
            if isinstance(ins, kir.Widen | kir.Load) and ins.out in self.dead:
                continue
            m = getattr(self, "i_" + type(ins).__name__, None)
            if m is None:
                raise _unsupported(type(ins).__name__, f"kernel {self.k.name}: "
                                   f"{kir._instr_text(ins, None, self.k.block)}")
            m(ins, ind)

    # -- instructions -------------------------------------------------------------------------
    def i_Const(self, ins: kir.Const, ind: str) -> None:
        self.emit(ind, f"{_name(ins.out)} = {self.full_const(ins.value, ins.dtype, self.shape(ins.out))}")

    def i_Coord(self, ins: kir.Coord, ind: str) -> None:
        self.put(ind, ins.out, f"{self.coord(ins.axis)}.to(tl.int64)")

    def i_EdgeMask(self, ins: kir.EdgeMask, ind: str) -> None:
        conds = [f"(c{d} < {self.k.domain[d]})" for d in ins.axes if self.k.domain[d] > 1]
        expr = " & ".join(conds) if conds else f"tl.full({[1] * self.rank}, 1, tl.int1)"
        self.put(ind, ins.out, expr)

    def offset_expr(self, ins: kir.Load | kir.Store) -> str:
        b = self.bm[ins.buffer]
        terms = [f"c{d} * {s}" for d, s in enumerate(ins.strides) if s]
        terms += [f"{_name(n)}.to(tl.int64) * {s}" for n, s in ins.index]
        terms.append(str(ins.offset + b.offset))
        return f"tl.zeros({[1] * self.rank}, {self.idx}) + " + " + ".join(terms)

    def i_Load(self, ins: kir.Load, ind: str) -> None:
        dt = self.bm[ins.buffer].dtype
        size = rd.root_size(root_of(ins.buffer, self.bm))
        shape = self.shape(ins.out)
        if size == 0:
            self.emit(ind, f"{_name(ins.out)} = {self.full_const(ins.other, dt, shape)}")
            return
        o = self.fresh("o")
        self.emit(ind, f"{o} = {self.offset_expr(ins)}")
        # offsets that may leave the storage are clamped into it (the interpreter's rule)
        if not self.in_storage(ins, size):
            self.emit(ind, f"{o} = tl.minimum(tl.maximum({o}, 0), {size - 1})")
        p = self.ptr(ins.buffer)
        if ins.mask:
            other = self.full_const(ins.other, dt, [1] * self.rank)
            raw = f"tl.load({p} + {o}, mask={_name(ins.mask)})"
        else:
            raw = f"tl.load({p} + {o})"
        v = self.fresh("l")
        if dt in _STORE_TL:
            self.emit(ind, f"{v} = {raw}.to({_TL[dt]}, bitcast=True)")
        elif dt == "bool":
            self.emit(ind, f"{v} = {raw} != 0")
        else:
            self.emit(ind, f"{v} = {raw}")
        if ins.mask:
            self.emit(ind, f"{v} = tl.where({_name(ins.mask)}, {v}, {other})")
        self.put(ind, ins.out, v)

    def i_Store(self, ins: kir.Store, ind: str) -> None:
        b = root_of(ins.buffer, self.bm)
        dt = self.bm[ins.buffer].dtype
        size = rd.root_size(b)
        if size == 0:
            return
        o = self.fresh("o")
        self.emit(ind, f"{o} = {self.offset_expr(ins)}")
        full = self.types[ins.value].full | (self.types[ins.mask].full if ins.mask else set())
        shape = self.shape(full=full)
        v = self.fresh("s")
        val = _name(ins.value)
        if dt in _STORE_TL:
            val = f"{val}.to({_STORE_TL[dt]}, bitcast=True)"
        elif dt == "bool":
            val = f"{val}.to(tl.uint8)"
        self.emit(ind, f"{v} = tl.broadcast_to({val}, {shape})")
        self.emit(ind, f"{o} = tl.broadcast_to({o}, {shape})")
        keep = None if self.in_storage(ins, size) else f"({o} >= 0) & ({o} < {size})"
        if ins.mask:
            keep = _name(ins.mask) if keep is None else f"{keep} & {_name(ins.mask)}"
        p = self.ptr(ins.buffer)
        self.emit(ind, f"tl.store({p} + {o}, {v}" + (f", mask={keep})" if keep else ")"))

    def i_Broadcast(self, ins: kir.Broadcast, ind: str) -> None:
        self.put(ind, ins.out, _name(ins.x))

    @staticmethod
    def widened(x: str, src: str) -> str:
        if src == "f32":
            return x
        if src not in rd.WIDEN_SOURCES:
            raise _unsupported("Widen", f"widening from {src}")
        if src == "f8e8m0":
            return f"_tf_widen_e8m0({x})"
        bits, eb, mb, bias, _, _, fn = NARROW[src]
        scale = 2.0 ** (1 - bias - mb)
        return f"_tf_widen({x}, {bits}, {eb}, {mb}, {bias}, {fn}, {scale!r})"

    @staticmethod
    def round_f32(w: str, to: str, overflow: str, rounding: str = "nearest",
                  hw: bool = False) -> str:
        """f32 ``w`` rounded to ``to``'s bits; ``hw``: on the GPU, where f32 -> bf16 to
        nearest with inf on overflow is the hardware's ``cvt.rn.bf16.f32`` (the interpreter's
        truncates, F20), that conversion with the NaN made the quiet NaN with its sign."""
        plan = rd.round_plan(to, overflow, rounding)
        if plan is None:
            raise _unsupported("Round", f"rounding to {to}")
        sat = int(plan.saturate)
        if hw and to == "bf16" and not sat and rounding == "nearest":
            return f"_tf_round_bf16_hw({w})"
        if plan.path == "e8m0":
            return f"_tf_round_e8m0({w}, {sat}, {_RND[rounding]})"
        if plan.path == "f32":
            return f"_tf_f32_to_f32({w}, {sat})"
        bits, _, mb, bias, mx, nan, _ = NARROW[to]
        return f"_tf_round({w}, {bits}, {mb}, {bias}, {mx}, {nan}, {sat})"

    def widen_f32(self, x: str, src: str) -> str:
        """``x`` of ``src`` widened to f32: on the GPU a bf16 is the hardware's exact
        bf16 -> f32 (its NaN keeps the payload: a Widen feeds arithmetic, comparisons and
        Rounds, which make every NaN the quiet NaN; D279)"""
        if src == "bf16" and not self.interpret:
            return f"{x}.to(tl.bfloat16, bitcast=True).to(tl.float32)"
        return self.widened(x, src)

    def i_Widen(self, ins: kir.Widen, ind: str) -> None:
        w = self.widen_f32(_name(ins.x), self.dt(ins.x))
        self.put(ind, ins.out, f"{w}.to(tl.float64)" if ins.to == "f64" else w)

    def i_Round(self, ins: kir.Round, ind: str) -> None:
        x, src = _name(ins.x), self.dt(ins.x)
        if rd.round_source(src) == "f32":
            expr = self.round_f32(x, ins.to, ins.overflow, hw=not self.interpret)
        elif ins.to == "f32":
            expr = f"_tf_rf64_f32({x})"
            if ins.overflow != "nonfinite":
                expr = f"_tf_f32_to_f32({expr}, 1)"
        else:
            expr = self.round_f32(f"_tf_f64_to_f32_odd({x})", ins.to, ins.overflow)
        self.put(ind, ins.out, expr)

    def i_Cast(self, ins: kir.Cast, ind: str) -> None:
        self.put(ind, ins.out, self.cast_expr(ins, _name(ins.x), self.dt(ins.x), ins.to,
                                              ins.overflow))

    @staticmethod
    def cast_expr(ins: kir.Cast, x: str, src: str, dst: str, overflow: str) -> str:
        rounding = ins.rounding
        plan = rd.cast_plan(src, dst)
        v = rd.cast_operand(plan, x, src, "{}.to(tl.int32)".format, _KernelT.widened)
        if plan.path == "float_float":
            return _KernelT.round_f32(v, dst, overflow, rounding)
        if plan.path == "int_narrow":
            # the integer rounded to odd at f32 precision carries it to the narrower format
            wide = f"_tf_i64_to_f64_odd({v})" if plan.wide == "i64" else \
                f"{v}.to(tl.int32).to(tl.float64)"
            return _KernelT.round_f32(f"_tf_f64_to_f32_odd({wide})", dst, overflow, rounding)
        lo, hi, lo_in = rd.FLOAT_TO_INT_RANGE[dst] if plan.path == "float_int" else (0, 0, 0)
        return _CAST[plan.path].format(
            v=v, tl=_TL[dst], lo=repr(lo), hi=repr(hi), ge=">=" if lo_in else ">",
            mid="tl.int64" if dst == "i64" else "tl.int32",
            i32="" if plan.wide == "i64" else ".to(tl.int32)")

    def i_BinOp(self, ins: kir.BinOp, ind: str) -> None:
        a, b, k, dt = _name(ins.a), _name(ins.b), ins.kind, self.dt(ins.a)
        if dt in _BITS:
            raise _unsupported("BinOp", f"{ins.out}: {k} on {dt} bit patterns")
        form = rd.binop_form(k, dt)
        if form == "farith" and k == "div":
            expr = f"tl.div_rn({a}, {b})" if dt == "f32" else f"({a} / {b})"
        elif form == "int_floordiv":
            expr = self.floor_divmod(k, a, b, dt, ind)
        else:
            expr = {"cmp": lambda: f"({a} {_CMP[k]} {b})",
                    "logic": lambda: f"({a} {_LOGIC[k]} {b})",
                    "farith": lambda: f"({a} {_ARITH[k]} {b})",
                    "fminmax": lambda: f"_tf_f{k}({a}, {b})",
                    "bool_minmax": lambda: f"({a} {_LOGIC[rd.BOOL_MINMAX[k]]} {b})",
                    "int_wrap": lambda: f"({a} {_ARITH[k]} {b}).to({_TL[dt]})",
                    "int_minmax": lambda: f"tl.{k}imum({a}, {b})"}.get(form, lambda: None)()
        if expr is None:
            raise _unsupported("BinOp", f"{ins.out}: {k} on {dt}")
        self.put(ind, ins.out, expr)

    def floor_divmod(self, k: str, a: str, b: str, dt: str, ind: str) -> str:
        """numpy's floored ``//`` / ``%`` (tf__floordiv / tf__mod): a zero divisor gives 0,
        MIN // -1 wraps; Triton's ``//`` / ``%`` truncate (C), on a divisor made safe."""
        t = _TL[dt]
        bs = self.fresh("bs")
        if dt == "u8":
            self.emit(ind, f"{bs} = tl.where({b} == 0, 1, {b}).to({t})")
            op = "//" if k == "floordiv" else "%"
            return f"tl.where({b} == 0, 0, {a} {op} {bs}).to({t})"
        self.emit(ind, f"{bs} = tl.where(({b} == 0) | ({b} == -1), 1, {b}).to({t})")
        q, r = self.fresh("q"), self.fresh("rm")
        self.emit(ind, f"{q} = ({a} // {bs}).to({t})")
        self.emit(ind, f"{r} = ({a} % {bs}).to({t})")
        if k == "floordiv":
            fix = f"({q} - (({r} != 0) & (({a} < 0) != ({b} < 0))).to({t})).to({t})"
            return (f"tl.where({b} == 0, 0, tl.where({b} == -1, (0 - {a}).to({t}), "
                    f"{fix})).to({t})")
        fix = f"tl.where(({r} != 0) & (({r} < 0) != ({b} < 0)), ({r} + {b}).to({t}), {r})"
        return f"tl.where(({b} == 0) | ({b} == -1), 0, {fix}).to({t})"

    def i_UnOp(self, ins: kir.UnOp, ind: str) -> None:
        x, k, dt = _name(ins.x), ins.kind, self.dt(ins.x)
        expr = None
        if k == "not":
            expr = f"({x} == 0)"
        elif dt == "f32":
            expr = {"neg": f"_tf_neg32({x})", "abs": f"_tf_abs32({x})",
                    "ceil": f"_tf_ceil32({x})", "round": f"_tf_rint32({x})",
                    "relu": f"tl.where({x} < 0, 0.0, {x})", "square": f"({x} * {x})",
                    "sqrt": f"tl.sqrt_rn({x})"}.get(k)
        elif dt == "f64":
            expr = {"neg": f"_tf_neg64({x})", "abs": f"_tf_abs64({x})",
                    "relu": f"tl.where({x} < 0, 0.0, {x})", "square": f"({x} * {x})",
                    "sqrt": f"tl.sqrt({x})"}.get(k)
        elif kir.is_int(dt):
            neg = f"(0 - {x}).to({_TL[dt]})"
            expr = {"neg": neg, "abs": x if dt == "u8" else f"tl.where({x} < 0, {neg}, {x})",
                    "ceil": x, "round": x, "relu": f"tl.where({x} < 0, 0, {x}).to({_TL[dt]})",
                    "square": f"({x} * {x}).to({_TL[dt]})"}.get(k)
        if expr is None:
            raise _unsupported("UnOp", f"{ins.out}: {k} on {dt}")
        self.put(ind, ins.out, expr)

    def i_Bitcast(self, ins: kir.Bitcast, ind: str) -> None:
        """f32 <-> u32: the same 32 bits (``.to(bitcast=True)``: no conversion, NaN payloads,
        -0 and subnormals kept)."""
        self.put(ind, ins.out, f"{_name(ins.x)}.to({_TL[ins.to]}, bitcast=True)")

    def i_Select(self, ins: kir.Select, ind: str) -> None:
        self.put(ind, ins.out, f"tl.where({_name(ins.cond)}, {_name(ins.a)}, {_name(ins.b)})")

    def math_narrow_f32(self, fn: str, w: str) -> str:
        """``fn`` (one of ``_NARROW_F32_MATH``) of an f32 ``w`` whose result only needs the
        accuracy of a narrow dtype (a 1-ulp budget: any f32 error below 2^(23-p) ulp,
        ``semantics.ulp`` lemma B): one ``tl.exp`` each, of half the argument so that no
        intermediate result flushes (``h = exp(-|w|/2)`` is normal for |w| < 174, past which
        every result is below the narrow dtypes' range), and the GPU's default division (at
        most 2 ulp32 off). Errors: the argument's rounding amplified by |w|/2 < 87 (about 90
        ulp32 for h, twice that for h²), far below 2^(23-p)."""
        gpu = "" if self.interpret else "_gpu"  # the GPU's approximate ex2 / rcp (D343)
        if fn == "exp":  # exp(w/2)² (exp(w) would flush below -87.3)
            return f"_tf_exp_narrow{gpu}({w})"
        if fn == "sigmoid":
            return f"_tf_sigmoid_narrow{gpu}({w})"
        return f"_tf_silu_narrow{gpu}({w})"

    def i_Math(self, ins: kir.Math, ind: str) -> None:
        dt, fn = self.dt(ins.x), ins.fn
        fast = fn in _NARROW_F32_MATH and ((dt == "f32" and ins.within) or dt in NARROW)
        plan = rd.math_plan(fn, dt, fast, _F64_MATH) if fn in _MATH or fast else None
        if plan is None:
            raise _unsupported("Math", f"{ins.out}: {fn} on {dt}")
        if plan.form == "f32" and not plan.narrow:
            self.put(ind, ins.out, self.math_narrow_f32(fn, _name(ins.x)))
            return
        if plan.form == "f32":
            w = self.fresh("w")
            self.emit(ind, f"{w} = {self.widen_f32(_name(ins.x), dt)}")
            self.put(ind, ins.out, self.round_f32(self.math_narrow_f32(fn, w), dt, "nonfinite",
                                                  hw=not self.interpret))
            return
        if plan.form == "f64":  # the f64 function
            x = _name(ins.x)
            self.put(ind, ins.out, f"tl.{fn}({x})")
            return
        w = self.fresh("w")
        self.emit(ind, f"{w} = {self.widened(_name(ins.x), dt)}.to(tl.float64)")
        from tilefoundry.semantics.evaluator import nn

        c0, c1, tiny = nn._GELU_C0, nn._GELU_C1, nn._TINY
        neg_inf_to_m0 = f"tl.where({w} < -1.7976931348623157e308, -0.0, {{}})"
        v = {"exp": f"tl.exp({w})", "log": f"tl.log({w})", "exp2": f"tl.exp2({w})",
             "log2": f"tl.log2({w})", "rsqrt": f"(1.0 / tl.sqrt({w}))",
             "tanh": f"_tf_tanh64({w})", "sigmoid": f"(1.0 / (1.0 + tl.exp(-{w})))",
             "silu": neg_inf_to_m0.format(f"({w} / (1.0 + tl.exp(-{w})))"),
             "gelu_tanh": neg_inf_to_m0.format(
                 f"tl.where(tl.abs({w}) < {tiny!r}, {w} * 0.5, {w} / (1.0 + tl.exp(-({w} * "
                 f"({c0!r} + {c1!r} * ({w} * {w}))))))"),
             "gelu_none": neg_inf_to_m0.format(
                 f"tl.where(tl.abs({w}) < {tiny!r}, {w} * 0.5, 0.5 * {w} * "
                 f"_tf_erfc64(-{w} * {nn._INV_SQRT2!r}))")}[fn]
        r = f"_tf_rf64_f32({v})" if dt == "f32" else \
            self.round_f32(f"_tf_f64_to_f32_odd({v})", dt, "nonfinite")
        self.put(ind, ins.out, r)


#: ``hoist_loads`` (1: every load first, ``hoisted``; 0, the default: the kernel IR's order)
ROWS_OPTIONS = ("hoist_loads",)


def hoisted(body: Sequence[kir.Instr]) -> list[kir.Instr]:
    """``body`` with its top-level loads, and every instruction they depend on, moved ahead of
    the rest, each part in its original order. The same values are computed (an instruction
    still follows everything it reads: a load's dependencies move with it, and the rest keep
    their order); a kernel never loads storage it stores (``_KernelT`` refuses one), so no
    load passes a store of what it reads. A load that depends on a loop stays in place."""
    by = {r: i for i, ins in enumerate(body) for r in ins.results()}
    early: set[int] = set()

    def close(i: int, seen: set[int]) -> bool:
        if i in early or i in seen:
            return True
        if isinstance(body[i], kir.TileLoop):
            return False
        seen.add(i)
        return all(close(by[n], seen) for n in body[i].operands() if n in by)

    for i, ins in enumerate(body):
        if isinstance(ins, kir.Load):
            seen: set[int] = set()
            if close(i, seen):
                early |= seen
    return [body[i] for i in sorted(early)] + \
        [ins for i, ins in enumerate(body) if i not in early]


def render(program: Program, interpret: bool = False,
           launch: Mapping[str, int] | None = None) -> str:
    """The Triton module of ``program``: the prelude, one jit function per kernel and
    ``KERNELS = {kernel name: (fn, [root buffer, ...], instances, [storage type, ...],
    launch options)}``; ``launch`` (num_warps / num_stages, the autotuner's record) overrides
    every kernel's default launch options."""
    from tilefoundry.compiler.render_triton_gemm import match as gemm_match
    from tilefoundry.compiler.render_triton_gemm import render_gemm, split_launch

    bm = program.buffer_map()
    parts = [PRELUDE]
    table = []

    def walk(steps) -> None:
        for s in steps:
            if isinstance(s, Kernel):
                given = dict(launch or {})
                rows_opts = {o: int(given.pop(o)) for o in ROWS_OPTIONS if o in given}
                kt = _KernelT(s, bm, interpret, bool(rows_opts.get("hoist_loads", 0)))
                # a plain matmul: the persistent TMA kernel (render_triton_gemm, D408)
                opts, gemm_opts = split_launch({**kt.launch_options(), **given})
                plan = gemm_match(kt)[0]
                if plan is not None:
                    src, roots, instances = render_gemm(kt, plan, gemm_opts, interpret)
                else:
                    (src, roots), instances = kt.render(), s.instances
                parts.append("\n\n" + src)
                types = [STORAGE[bm[r].dtype] for r in roots]
                table.append(f"    {s.name!r}: ({kt.fn_name()}, {roots!r}, {instances}, "
                             f"{types!r}, {opts!r}),")
            elif isinstance(s, HostLoop):
                walk(s.body)
            else:
                raise _unsupported(type(s).__name__, "not a kernel-IR step")

    walk(program.steps)
    parts.append("\n\nKERNELS = {\n" + "\n".join(table) + "\n}\n")
    return "".join(parts)
