"""Render kernel-IR programs to Triton (issue 17): the Triton backend's renderer.
Over 800 lines: not split yet — its prelude is a module now (D481); the decision trees it
shares with render_c are to move into compiler/spelling.py (D423) first.

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

from tilefoundry.compiler import kir
from tilefoundry.compiler import render_decisions as rd
from tilefoundry.compiler.errors import NotSupportedError
from tilefoundry.compiler.kir import HostLoop, Kernel, Program, root_of
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
_TL = {"f32": "tl.float32", "f64": "tl.float64", "bf16": "tl.uint16", "f16": "tl.uint16",
       "fp8e4m3": "tl.uint8", "fp8e5m2": "tl.uint8", "f8e8m0": "tl.uint8", "bool": "tl.int1",
       "i8": "tl.int8", "u8": "tl.uint8", "i32": "tl.int32", "i64": "tl.int64",
       "u32": "tl.uint32"}
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
#: the Triton element type ``tl.dot`` takes a narrow operand's bits as (tensor cores)
_MMA_TL = {"bf16": "tl.bfloat16", "f16": "tl.float16", "fp8e4m3": "tl.float8e4nv",
           "fp8e5m2": "tl.float8e5"}
#: IEEE-like narrow formats, as tf_numerics.h parameterizes them:
#: (bits, exponent bits, mantissa bits, bias, largest finite code, NaN code, E4M3FN specials)
NARROW = {"bf16": (16, 8, 7, 127, 0x7F7F, 0x7FC0, 0), "f16": (16, 5, 10, 15, 0x7BFF, 0x7E00, 0),
          "fp8e4m3": (8, 4, 3, 7, 0x7E, 0x7F, 1), "fp8e5m2": (8, 5, 2, 15, 0x7B, 0x7E, 0)}
assert set(NARROW) == set(_NARROW_ROUND)
_BITS = rd.WIDEN_SOURCES
_RND = {"nearest": 0, "up": 1, "down": 2}
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


def _name(ssa: str) -> str:
    return "v_" + re.sub(r"[^0-9A-Za-z_]", "_", ssa)


def _f32_lit(v: float) -> str:
    return f"0x{int(np.float32(v).view(np.uint32)):08X}"


def _f64_lit(v: float) -> str:
    return f"0x{int(np.float64(v).view(np.uint64)):016X}"


def _root_size(b: kir.Buffer) -> int:
    if b.kind == "input":
        return b.size
    if b.kind == "const":
        return int(np.asarray(b.data).size)
    return b.span


class _KernelT:
    """One kernel rendered as a ``@triton.jit`` function."""

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
        size = _root_size(root_of(ins.buffer, self.bm))
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
        size = _root_size(b)
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
        plan = rd.cast_plan(src, dst, overflow, rounding)
        if plan.bool_source:
            x, src = f"{x}.to(tl.int32)", "i32"
        if plan.path == "float_float":
            return _KernelT.round_f32(_KernelT.widened(x, src), dst, overflow, rounding)
        if plan.path == "float_bool":
            return f"({_KernelT.widened(x, src)} != 0.0)"
        if plan.path == "float_int":
            w = _KernelT.widened(x, src)
            lo, hi, lo_in = rd.FLOAT_TO_INT_RANGE[dst]
            ok = f"(({w} {'>=' if lo_in else '>'} {lo!r}) & ({w} < {hi!r}))"
            mid = "tl.int64" if dst == "i64" else "tl.int32"
            return f"tl.where({ok}, {w}, 0.0).to({mid}).to({_TL[dst]})"
        if plan.path == "int_bool":
            return f"({x} != 0)"
        if plan.path == "int_int":
            return f"{x}.to({_TL[dst]})"
        if plan.path == "int_f32":
            return f"{x}.to(tl.float32)" if plan.wide == "i64" else \
                f"{x}.to(tl.int32).to(tl.float32)"
        # the integer rounded to odd at f32 precision carries it to the narrower format
        wide = f"_tf_i64_to_f64_odd({x})" if plan.wide == "i64" else \
            f"{x}.to(tl.int32).to(tl.float64)"
        return _KernelT.round_f32(f"_tf_f64_to_f32_odd({wide})", dst, overflow, rounding)

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

    # -- reductions ---------------------------------------------------------------------------
    def identity(self, kind: str, dt: str, shape: list[int]) -> str:
        return self.full_const(rd.reduce_identity(kind, dt), dt, shape)

    def i_Reduce(self, ins: kir.Reduce, ind: str) -> None:
        dt, kind, policy = self.dt(ins.x), ins.kind, ins.policy
        if dt in _BITS or (kind == "abs_max" and dt == "bool") or \
                (kind == "prod" and not kir.is_int(dt)):
            raise _unsupported("Reduce", f"{ins.out}: {kind} over {dt}")
        # integer abs_max compares magnitudes unsigned (a wrapped |INT_MIN| stays the largest)
        umag = kind == "abs_max" and kir.is_int(dt)
        ut = {"i8": "tl.uint8", "u8": "tl.uint8", "i32": "tl.uint32", "i64": "tl.uint64"}.get(dt)
        full = set(self.types[ins.x].full) | (set(self.types[ins.mask].full) if ins.mask
                                              else set())
        red = [d for d in ins.axes if d in full]
        ordered = rd.reduce_in_order(kind, dt, policy)
        xshape = self.shape(full=full)
        oshape = self.shape(ins.out)
        x = self.fresh("x")
        self.emit(ind, f"{x} = tl.broadcast_to({_name(ins.x)}, {xshape})")
        if umag:
            mag = x if dt == "u8" else f"tl.where({x} < 0, (0 - {x}).to({_TL[dt]}), {x})"
            self.emit(ind, f"{x} = {mag}.to({ut}, bitcast=True)")
        elif kind == "abs_max":
            self.emit(ind, f"{x} = {'_tf_abs32' if dt == 'f32' else '_tf_abs64'}({x})")
        if dt == "bool":
            self.emit(ind, f"{x} = {x}.to(tl.int32)")
        rdt = "i32" if dt == "bool" else dt
        if ins.mask:  # masked lanes: the step's exact identity (+0 for the TwoSum fold)
            mk = f"tl.broadcast_to({_name(ins.mask)}, {xshape})"
            ident = self.full_const(0.0, "f64", [1] * self.rank) if kind in kir.COMPENSATED \
                else f"tl.full({[1] * self.rank}, {rd.reduce_identity(kind, dt)}, {ut})" if umag \
                else f"tl.full({[1] * self.rank}, {int(rd.reduce_identity(kind, dt))}, tl.int32)" \
                if dt == "bool" else self.identity(kind, rdt, [1] * self.rank)
            # (a bool is reduced as 0 / 1 in i32: its identities are False / True, not the
            # i32 extremes, which a fiber with no active lane turned into True)
            self.emit(ind, f"{x} = tl.where({mk}, {x}, {ident})")
        acc = self.fresh("r")
        init = _name(ins.init) if ins.init else None
        if kind in kir.COMPENSATED:
            hi, lo = self.fresh("hi"), self.fresh("lo")
            self.emit(ind, f"{hi} = {self.full_const(0.0, 'f64', oshape)}")
            self.emit(ind, f"{lo} = {self.full_const(0.0, 'f64', oshape)}")
            inner, at = self.lane_loops(ind, red, False)
            w = self.fresh("w")
            self.emit(inner, f"{w} = {self.lanes(x, at, dt) if at else x}")
            self.emit(inner, f"{hi}, {w} = _tf_two_sum({hi}, {w})")
            self.emit(inner, f"{lo} = {lo} + {w}")
            self.emit(ind, f"{hi}, {lo} = _tf_two_sum({hi}, {lo})")
            self.emit(ind, f"{acc} = {hi if kind == 'sum_hi' else lo}")
        elif ordered:
            seeded = init is not None and policy in ("fold_left", "fold_right")
            # fold_left: the seed first; fold_right: the seed last (the first the fold meets)
            self.emit(ind, f"{acc} = tl.broadcast_to({init}, {oshape})" if seeded else
                      f"{acc} = {self.identity('sum', dt, oshape)}")
            right = policy == "fold_right"
            inner, at = self.lane_loops(ind, red, right)
            lane = self.fresh("ln")
            self.emit(inner, f"{lane} = {self.lanes(x, at, dt) if at else x}")
            self.emit(inner, f"{acc} = {lane} + {acc}" if right else f"{acc} = {acc} + {lane}")
            if init is not None and not seeded:  # ordered_tree: init + tree
                self.emit(ind, f"{acc} = {init} + {acc}")
        else:
            cur = x
            # an f32 max / min / abs_max reduces integer keys (``_tf_key32``: NaN first, -0 <
            # +0, so the pick is exact, D341): a native integer max, not a float select chain
            key = dt == "f32" and kind in ("max", "min", "abs_max")
            if key:
                nonneg = kind == "abs_max" or self.is_abs(ins.x)
                k = self.fresh("k")
                self.emit(ind, f"{k} = {cur}.to(tl.int32, bitcast=True)" if nonneg and
                          kind != "min" else f"{k} = _tf_key32({cur}, {int(kind == 'min')})")
                cur = k
            for d in red:
                nxt = self.fresh("r")
                if key:
                    fn = "tl.min" if kind == "min" else "tl.max"
                    self.emit(ind, f"{nxt} = {fn}({cur}, axis={d}, keep_dims=True)")
                elif kind == "sum" and kir.is_float(dt):
                    self.emit(ind, f"{nxt} = tl.reduce({cur}, {d}, _tf_add, keep_dims=True)")
                elif kind == "sum":
                    self.emit(ind, f"{nxt} = tl.sum({cur}, axis={d}, keep_dims=True)")
                elif kind == "prod":  # integers only: products wrap, so any order is exact
                    self.emit(ind, f"{nxt} = tl.reduce({cur}, {d}, _tf_mul, keep_dims=True)")
                elif kir.is_float(dt):
                    pick = "_tf_pickmin" if kind == "min" else "_tf_pickmax"
                    self.emit(ind, f"{nxt} = tl.reduce({cur}, {d}, {pick}, keep_dims=True)")
                else:
                    fn = "tl.min" if kind == "min" else "tl.max"
                    self.emit(ind, f"{nxt} = {fn}({cur}, axis={d}, keep_dims=True)")
                cur = nxt
            if key:
                cur = f"_tf_unkey32({cur})"
            self.emit(ind, f"{acc} = tl.broadcast_to({cur}, {oshape})")
            if dt == "bool":
                self.emit(ind, f"{acc} = {acc} != 0")
            elif umag:
                self.emit(ind, f"{acc} = {acc}.to({ut}).to({_TL[dt]}, bitcast=True)")
            elif kir.is_int(dt):
                self.emit(ind, f"{acc} = {acc}.to({_TL[dt]})")
            if init is not None:
                if umag:
                    comb = (f"tl.where({init}.to({ut}, bitcast=True) >= "
                            f"{acc}.to({ut}, bitcast=True), {init}, {acc})")
                elif kind == "sum":
                    comb = f"({init} + {acc})" if kir.is_float(dt) else \
                        f"({init} + {acc}).to({_TL[dt]})"
                elif kind == "prod":
                    comb = f"({init} * {acc}).to({_TL[dt]})"
                elif dt == "bool":
                    comb = f"({init} {_LOGIC[rd.BOOL_MINMAX[kind]]} {acc})"
                elif kir.is_float(dt):
                    comb = f"_tf_f{'min' if kind == 'min' else 'max'}({init}, {acc})"
                else:
                    comb = f"tl.{'minimum' if kind == 'min' else 'maximum'}({init}, {acc})"
                self.emit(ind, f"{acc} = {comb}")
        if rd.tracks_valid_lane(kind, dt, bool(ins.mask), init is not None) \
                and not kir.a_lane_is_valid(self.k.body, ins.mask, red, self.k.domain):
            # a row with no valid lane is +0 (the interpreter's identity)
            anyv = self.fresh("any")
            cur = f"tl.broadcast_to({_name(ins.mask)}, {xshape}).to(tl.int32)"
            for d in red:
                cur = f"tl.max({cur}, axis={d}, keep_dims=True)"
            self.emit(ind, f"{anyv} = {cur}")
            self.emit(ind, f"{acc} = tl.where({anyv} != 0, {acc}, 0.0)")
        self.put(ind, ins.out, acc)

    def is_abs(self, ssa: str) -> bool:
        """``ssa`` is an ``abs`` of this kernel (its sign bit is clear)."""
        return any(isinstance(i, kir.UnOp) and i.out == ssa and i.kind == "abs"
                   for i in kir.iter_instrs(self.k.body))

    def lane(self, v: str, d: int, j: str, dt: str, full: frozenset) -> str:
        """Lane ``j`` of ``v`` along axis ``d`` (kept as extent 1; ``v`` itself if not full)."""
        if d not in full:
            return v
        return self.lanes(v, [(d, j)], dt)

    def lanes(self, v: str, at: list[tuple[int, str]], dt: str) -> str:
        """The one lane of ``v`` at coordinates ``at`` (axis, index expression) of the tile,
        exactly: an integer sum of the lane's bit pattern and zeros (a float ``tl.sum`` would
        turn a -0 lane into +0 in the interpreter)."""
        sel = " & ".join(f"(tl.reshape(tl.arange(0, {self.block[d]}), "
                         f"{[self.block[d] if e == d else 1 for e in range(self.rank)]}) == {j})"
                         for d, j in at)
        bits = {"f32": ("tl.int32", "tl.float32"), "f64": ("tl.int64", "tl.float64")}.get(dt)
        x = f"{v}.to({bits[0]}, bitcast=True)" if bits else \
            (f"{v}.to(tl.int32)" if dt == "bool" else v)
        r = f"tl.where({sel}, {x}, 0)"
        for d, _ in at:
            r = f"tl.sum({r}, axis={d}, keep_dims=True)"
        if bits:
            return f"{r}.to({bits[0]}).to({bits[1]}, bitcast=True)"
        if dt == "bool":
            return f"({r} != 0)"
        return f"{r}.to({_TL[dt]})"

    def lane_loops(self, ind: str, red: list[int], reverse: bool) -> tuple[str, list]:
        """Nested loops over the lanes of ``red`` in lexicographic (or reverse) order; returns
        the innermost indentation and the (axis, index) coordinates."""
        at = []
        for d in red:
            i = self.fresh("i")
            b = self.block[d]
            self.emit(ind, f"for {i} in range(0, {b}):")
            ind += "    "
            at.append((d, f"({b - 1} - {i})" if reverse else i))
        return ind, at

    def mma_operands(self, ins: kir.Dot) -> tuple[kir.Load, kir.Load, str] | None:
        """The loads of the narrow operands of a ``dot`` that ``tl.dot`` may compute (tensor
        cores): the contract admits reassociation, both operands are exact f32 widenings of
        plain loads (no gathered index) of one bf16 / f16 / fp8 dtype, the tile is
        [M, K] x [N, K] with M, N, K blocks of at least 16 (the two axes before K; every other
        block 1; each load strided on its two axes only), and the K fold starts from a seed
        (so the zero accumulator of a padded lane is not a sign-of-zero question: D200).
        Returns (a's load, b's load, narrow dtype), or None for the K-ordered loop."""
        d = ins.axis
        if not ins.reassociate or ins.init is None or d < 2 or self.dt(ins.a) != "f32":
            return None
        wa, wb = self.widens.get(ins.a), self.widens.get(ins.b)
        if wa is None or wb is None or wa.to != "f32" or wb.to != "f32":
            return None
        la, lb = self.loads.get(wa.x), self.loads.get(wb.x)
        src = self.dt(wa.x)
        if la is None or lb is None or la.index or lb.index or src != self.dt(wb.x) \
                or src not in _MMA_TL:
            return None
        m, n = d - 2, d - 1
        if self.types[ins.a].full != {m, d} or self.types[ins.b].full != {n, d}:
            return None
        if any(s for i, s in enumerate(la.strides) if i not in (m, d)) or any(
                s for i, s in enumerate(lb.strides) if i not in (n, d)):
            return None
        if min(self.block[m], self.block[n], self.block[d]) < 16 or any(
                b != 1 for i, b in enumerate(self.block) if i not in (m, n, d)):
            return None
        return la, lb, src

    def mma_tile(self, ind: str, ld: kir.Load, rows: int, cols: int, src: str) -> str:
        """A 2-D operand tile [rows axis, cols axis] loaded for ``tl.dot``: lanes past an edge
        (M / N / K) are +0, the storage is read as the narrow type (bf16 /
        f16, bit-cast), or as bits widened exactly and converted to f16 (fp8: every fp8e4m3 / fp8e5m2
        value is an f16 value; Hopper's fp8 tensor-core accumulation left the admitted set,
        findings F23). In the interpreter: the exact f32 widening (findings F20)."""
        dom, b = self.k.domain, self.block
        r1, c1 = self.fresh("r"), self.fresh("c")
        self.emit(ind, f"{r1} = tl.reshape(c{rows}, [{b[rows]}])[:, None]")
        self.emit(ind, f"{c1} = tl.reshape(c{cols}, [{b[cols]}])[None, :]")
        off = f"{r1} * {ld.strides[rows]} + {c1} * {ld.strides[cols]} + " \
              f"{ld.offset + self.bm[ld.buffer].offset}"
        # lanes past a ragged edge read as +0; an axis the tiles cover exactly needs no mask
        terms = [f"({v} < {dom[a]})" for v, a in ((r1, rows), (c1, cols)) if dom[a] % b[a]]
        mask = f", mask={' & '.join(terms)}, other=0" if terms else ""
        p = self.ptr(ld.buffer)
        t = self.fresh("mt")
        bits = self.fresh("mb")
        self.emit(ind, f"{bits} = tl.load({p} + ({off}){mask}).to({_TL[src]}, bitcast=True)")
        if self.interpret:
            self.emit(ind, f"{t} = {self.widened(bits, src)}")
        elif src in ("bf16", "f16"):
            # bit-cast after the load (a pointer cast in a loop broke Triton 3.6's make_ttgir:
            # "operand #0 does not dominate this use")
            self.emit(ind, f"{t} = {bits}.to({_MMA_TL[src]}, bitcast=True)")
        else:
            self.emit(ind, f"{t} = {self.widened(bits, src)}.to(tl.float16)")
        return t

    def dot_mma(self, ins: kir.Dot, ind: str, la: kir.Load, lb: kir.Load, src: str) -> None:
        """``tl.dot`` on 2-D operand tiles loaded for it (``mma_tile``), f32 accumulation into
        the seed. Judged by the contract's admitted set like any reassociated sum
        (docs/compiler.md)."""
        d = ins.axis
        m, n = d - 2, d - 1
        bm, bn = self.block[m], self.block[n]
        a2 = self.mma_tile(ind, la, m, d, src)
        b2 = self.mma_tile(ind, lb, d, n, src)
        prec = ", input_precision='ieee'" if self.interpret else ""
        hoisted = self.acc2d.get(ins.out)
        if hoisted is not None:  # the loop carries the 2-D accumulator (carried_mma)
            self.emit(ind, f"{hoisted} = tl.dot({a2}, {b2}, acc={hoisted}{prec}, "
                           f"out_dtype=tl.float32)")
            return
        c2 = self.fresh("mma_c")
        oshape = self.shape(ins.out)
        self.emit(ind, f"{c2} = tl.reshape(tl.broadcast_to({_name(ins.init)}, {oshape}), "
                       f"[{bm}, {bn}])")
        self.emit(ind, f"{c2} = tl.dot({a2}, {b2}, acc={c2}{prec}, out_dtype=tl.float32)")
        self.put(ind, ins.out, self.unit_axes(c2, ins))

    def unit_axes(self, c2: str, ins: kir.Dot) -> str:
        """A 2-D [M, N] accumulator back at the kernel's rank: the unit axes inserted
        (expand_dims, not a reshape of the accumulator's layout)."""
        m, n = ins.axis - 2, ins.axis - 1
        expr = c2
        for i in [i for i in range(self.rank) if i not in (m, n)]:
            expr = f"tl.expand_dims({expr}, {i})"
        return expr

    def i_Dot(self, ins: kir.Dot, ind: str) -> None:
        """Tensor cores (``dot_mma``) where ``mma_operands`` allows; otherwise the reference K
        order (admitted whether or not ``reassociate``): one K lane a step, the f32 products
        not contracted (the GPU launch turns fp fusion off)."""
        mma = self.mma_operands(ins)
        if mma is not None:
            self.dot_mma(ins, ind, *mma)
            return
        dt, d = self.dt(ins.a), ins.axis
        ta, tb = self.types[ins.a].full, self.types[ins.b].full
        tm = self.types[ins.mask].full if ins.mask else frozenset()
        n = self.block[d] if d in ta | tb | tm else 1
        oshape = self.shape(ins.out)
        s, st = self.fresh("dot"), self.fresh("started")
        if ins.init:
            self.emit(ind, f"{s} = tl.broadcast_to({_name(ins.init)}, {oshape})")
            self.emit(ind, f"{st} = tl.full({oshape}, 1, tl.int1)")
        else:
            self.emit(ind, f"{s} = {self.full_const(0, dt, oshape)}")
            self.emit(ind, f"{st} = tl.full({oshape}, 0, tl.int1)")
        j = self.fresh("k")
        self.emit(ind, f"for {j} in range(0, {n}):")
        inner = ind + "    "
        p = self.fresh("p")
        aj = self.lane(_name(ins.a), d, j, dt, ta)
        bj = self.lane(_name(ins.b), d, j, dt, tb)
        self.emit(inner, f"{p} = tl.broadcast_to({aj} * {bj}, {oshape})")
        if ins.mask:
            vj = self.fresh("vm")
            self.emit(inner, f"{vj} = tl.broadcast_to({self.lane(_name(ins.mask), d, j, 'bool', tm)}"
                             f", {oshape})")
            self.emit(inner, f"{s} = tl.where({vj}, tl.where({st}, {s} + {p}, {p}), {s})")
            self.emit(inner, f"{st} = {st} | {vj}")
        else:
            self.emit(inner, f"{s} = tl.where({st}, {s} + {p}, {p})")
            self.emit(inner, f"{st} = tl.full({oshape}, 1, tl.int1)")
        self.put(ind, ins.out, s if dt == "f32" else f"{s}.to({_TL[dt]})")

    def carried_mma(self, loop: kir.TileLoop) -> dict[int, kir.Dot]:
        """The carried values of ``loop`` that are only a tensor-core ``dot``'s accumulator
        (its seed, and yielded as its result, read by nothing else in the body): those are
        carried as the 2-D [M, N] tile ``tl.dot`` accumulates in, so that the MMA layout is
        not converted back to the kernel's rank on every K step."""
        top = [i for i in loop.body if isinstance(i, kir.Dot)]
        reads: dict[str, int] = {}
        for i in kir.iter_instrs(loop.body):
            for o in i.operands():
                reads[o] = reads.get(o, 0) + 1
        for y in loop.yields:
            reads[y] = reads.get(y, 0) + 1
        out: dict[int, kir.Dot] = {}
        for j, (c, y) in enumerate(zip(loop.carried, loop.yields, strict=True)):
            dot = next((i for i in top if i.init == c and i.out == y), None)
            if dot is not None and reads.get(c) == 1 and reads.get(y) == 1 \
                    and y not in loop.carried and self.mma_operands(dot) is not None:
                out[j] = dot
        return out

    def i_TileLoop(self, ins: kir.TileLoop, ind: str) -> None:
        d, b = ins.axis, self.block[ins.axis]
        tiles = -(-self.k.domain[d] // b)
        acc = self.carried_mma(ins)
        for j, (c, i) in enumerate(zip(ins.carried, ins.inits, strict=True)):
            if j in acc:
                dot = acc[j]
                m, n = dot.axis - 2, dot.axis - 1
                name = self.fresh("acc2")
                self.emit(ind, f"{name} = tl.reshape(tl.broadcast_to({_name(i)}, "
                               f"{self.shape(dot.out)}), [{self.block[m]}, {self.block[n]}])")
                self.acc2d[dot.out] = name
                continue
            self.emit(ind, f"{_name(c)} = {_name(i)}")
        t = self.fresh("tile")
        self.emit(ind, f"for {t} in range(0, {tiles}):")
        inner = ind + "    "
        tile = f"({tiles - 1} - {t})" if ins.reverse else t
        # the loop variable is a Python int in the interpreter and an i32 on the GPU: widen it
        # to i64 through a tensor so both compute offsets alike
        self.emit_coord(inner, d, f"(tl.full([], 0, {self.idx}) + {tile})"
                        if self.k.domain[d] > 1 else "0")
        self.body(ins.body, inner)
        keep = [j for j in range(len(ins.yields)) if j not in acc]
        tmps = {j: self.fresh("y") for j in keep}
        for j in keep:
            self.emit(inner, f"{tmps[j]} = {_name(ins.yields[j])}")
        for j in keep:
            self.emit(inner, f"{_name(ins.carried[j])} = {tmps[j]}")
        for j, (o, c) in enumerate(zip(ins.outs, ins.carried, strict=True)):
            if j in acc:
                self.put(ind, o, self.unit_axes(self.acc2d.pop(acc[j].out), acc[j]))
            else:
                self.emit(ind, f"{_name(o)} = {_name(c)}")


#: the row kernels' own render options in a launch record (not Triton launch options):
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
