"""The kernel IR: what lowering produces, fusion rewrites, the interpreter runs and the SIMD C,
Triton and CUDA C++ renderers print.

A ``Program`` is a list of **buffers** (name, dtype, shape, strides; inputs, temporaries,
constants and aliases — views of another buffer's storage, as a Reshape makes) and a list of
**steps**: ``Kernel`` launches and ``HostLoop``\\ s (a loop around kernel launches with carried
buffers, what a ``GridRegionExpr`` lowers to).

A ``Kernel`` iterates a rectangular **domain** (one extent per axis ``d0, d1, ...``) cut into
**tiles** of ``block`` extents (powers of two). The axes not in ``loop_axes`` are spread over a
**grid of program instances** (``ceil(domain / block)`` per axis); each instance runs the body
once for its tile. An axis in ``loop_axes`` is not spread: a ``TileLoop`` inside the body walks
its tiles one after the other, with carried values (a long row, a matmul's K). This is the
blocked model of Triton (a program instance over a block, ``tl.arange`` coordinates, masks),
of CUDA (a thread block per tile) and of SIMD C (a loop nest over tiles whose inner loops
vectorize).

Values are SSA names (``%3``) of **tile** type: a dtype and, per domain axis, either the full
block extent or 1 (broadcast along that axis). Tile shapes are therefore symbolic in the block:
fusion can re-block a kernel without touching its instructions. An axis whose domain extent is
1 is never full (canonical form).

Memory is touched only by ``Load`` / ``Store``: element offset = ``offset + Σ stride_d · d`` over
the domain coordinates, plus ``Σ stride · value`` for indirect (gather / dynamic-offset)
components. Axes with stride 0 are broadcast (Load) or written once (Store). A load or store
that is full on a **ragged** axis (the block does not divide the extent) must carry a mask that
covers that axis (``EdgeMask`` gives ``coordinate < extent``).

Numeric contracts are explicit instructions (ARCHITECTURE.md, "Numeric contracts"):

* ``Widen`` (a float dtype → f32 or f64, exact), an arithmetic ``BinOp`` / ``UnOp`` in f32 / f64
  (IEEE, round to nearest even; the verifier rejects float arithmetic in any other dtype), and
  ``Round`` (f32 / f64 → a narrower float, one rounding, with its overflow mode). bf16
  ``a + b·c`` is ``round(widen(a) + widen(round(widen(b) · widen(c))))``: every HIR op boundary
  keeps its rounding, fused or not.
* ``Cast`` is the HIR conversion (any dtype to any dtype, with overflow / rounding modes);
  ``Bitcast`` reinterprets an f32 pattern as u32 or back (no conversion: -0, subnormals and NaN
  payloads survive).
* ``Math`` is a function judged by a ULP budget (``semantics.ulp``): it reads a value of a float
  dtype and returns its correctly rounded result (a backend's is within the budget) in the same
  dtype; on f64 it is the f64 libm function.
* ``Reduce`` carries its kind, its policy (``fold_left``, ``fold_right``, ``ordered_tree``,
  ``unordered_tree``; ``prod`` is the wrapping integer product) and accumulates in its operand's dtype (f32 for low-precision floats, f64
  in the wide normalizations, the integer dtype itself); lanes are taken in lexicographic order
  of the reduced axes; ``init`` seeds it (the carried accumulator of a ``TileLoop``: seed first
  for fold_left, last for fold_right, ``init + tree`` for the trees; an integer ``abs_max``
  compares magnitudes unsigned, so a wrapped ``|INT_MIN|`` stays the largest).
* ``Dot`` is the matmul tile op: f32 operands (i64 for integers), an f32 accumulator, the K order
  of the reference (unfused, seeded by ``init`` or the first product); ``reassociate`` says
  whether any order is admitted (tensor cores, split K).

``verify(program)`` checks all of it and raises ``KernelIRError`` naming the kernel and the
instruction; ``to_text(program)`` prints it (types shown with the current block).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from tilefoundry.compiler.errors import KernelIRError
from tilefoundry.semantics.dtypes import OVERFLOW_MODES, ROUNDING_MODES
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.reductions import POLICIES

__all__ = [
    "BINARY_KINDS",
    "DTYPES",
    "MATH_FNS",
    "REDUCE_KINDS",
    "UNARY_KINDS",
    "BinOp",
    "Bitcast",
    "Broadcast",
    "Buffer",
    "Cast",
    "Const",
    "Coord",
    "Dot",
    "EdgeMask",
    "HostLoop",
    "Instr",
    "Kernel",
    "Load",
    "Math",
    "Program",
    "Reduce",
    "Round",
    "Select",
    "Store",
    "Tile",
    "TileLoop",
    "UnOp",
    "Widen",
    "buffer_span",
    "c_strides",
    "iter_instrs",
    "kernel_types",
    "next_pow2",
    "numpy_dtype",
    "to_text",
    "verify",
]

# =============================================================================================
# dtypes
# =============================================================================================
#: storage dtypes (the IR's evaluable ones) plus f64, the kernel IR's wide compute type
STORAGE_DTYPES = frozenset(d.value for d in DType if FORMATS[d].evaluable)
DTYPES = STORAGE_DTYPES | {"f64"}
COMPUTE_FLOATS = frozenset({"f32", "f64"})
INT_DTYPES = frozenset(d.value for d in DType if FORMATS[d].kind == "int")


def is_float(dt: str) -> bool:
    return dt == "f64" or (dt in STORAGE_DTYPES and DType(dt).is_float)


def is_int(dt: str) -> bool:
    return dt in INT_DTYPES


def numpy_dtype(dt: str) -> np.dtype:
    """numpy storage of a kernel-IR dtype (ml_dtypes for the low-precision floats)."""
    if dt == "f64":
        return np.dtype(np.float64)
    return np.dtype(DType(dt).storage)


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(out))


def buffer_span(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """Elements of storage a (shape, strides) view spans from its first element."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides, strict=True))


BINARY_KINDS = ("add", "sub", "mul", "div", "min", "max", "eq", "ne", "lt", "le", "gt", "ge",
                "and", "or", "xor", "floordiv", "mod")
COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
LOGICAL = frozenset({"and", "or", "xor"})
UNARY_KINDS = ("neg", "abs", "ceil", "round", "relu", "square", "sqrt", "not")
MATH_FNS = ("exp", "log", "exp2", "log2", "rsqrt", "tanh", "sigmoid", "silu", "gelu_tanh",
            "gelu_none")
LIBM64 = frozenset({"exp", "log", "exp2", "log2", "tanh"})
REDUCE_KINDS = ("sum", "max", "min", "abs_max", "sum_hi", "sum_lo", "prod")  # prod: integers
#: the compensated (double-double) left fold of f64 lanes, its high and low parts
COMPENSATED = frozenset({"sum_hi", "sum_lo"})


# =============================================================================================
# tiles and instructions
# =============================================================================================
@dataclass(frozen=True)
class Tile:
    """A tile type: ``dtype`` and the domain axes on which the tile spans the block."""

    dtype: str
    full: frozenset

    def shape(self, block: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(b if d in self.full else 1 for d, b in enumerate(block))

    def text(self, block: tuple[int, ...]) -> str:
        if not block:
            return self.dtype
        return f"{self.dtype}[{'x'.join(str(n) for n in self.shape(block))}]"


class Instr:
    """Base of kernel-body instructions. ``SSA`` names the fields holding operand names."""

    SSA: tuple[str, ...] = ()

    def operands(self) -> list[str]:
        out = [getattr(self, f) for f in self.SSA if getattr(self, f) is not None]
        for name, _ in getattr(self, "index", ()):
            out.append(name)
        return out

    def results(self) -> tuple[str, ...]:
        out = getattr(self, "out", None)
        return (out,) if out is not None else ()

    def renamed(self, m: Mapping[str, str]) -> Instr:
        """A copy with operand and result names mapped through ``m`` (missing: unchanged)."""
        ch: dict[str, Any] = {f: m.get(getattr(self, f), getattr(self, f))
                              for f in self.SSA if getattr(self, f) is not None}
        if hasattr(self, "out"):
            ch["out"] = m.get(self.out, self.out)
        if hasattr(self, "index"):
            ch["index"] = tuple((m.get(n, n), s) for n, s in self.index)
        return replace(self, **ch)


@dataclass(frozen=True)
class Const(Instr):
    out: str
    value: float | int | bool
    dtype: str


@dataclass(frozen=True)
class Coord(Instr):
    """The i64 coordinates of the current tile along ``axis``."""

    out: str
    axis: int


@dataclass(frozen=True)
class EdgeMask(Instr):
    """True where every coordinate along ``axes`` is inside the domain (ragged edges)."""

    out: str
    axes: tuple[int, ...]


@dataclass(frozen=True)
class Load(Instr):
    out: str
    buffer: str
    strides: tuple[int, ...]
    offset: int = 0
    index: tuple[tuple[str, int], ...] = ()
    mask: str | None = None
    other: float | int | bool = 0
    SSA = ("mask",)


@dataclass(frozen=True)
class Store(Instr):
    buffer: str
    strides: tuple[int, ...]
    value: str
    offset: int = 0
    index: tuple[tuple[str, int], ...] = ()
    mask: str | None = None
    SSA = ("value", "mask")


@dataclass(frozen=True)
class Broadcast(Instr):
    """``x`` made full on ``axes`` (the same value along them): what a forwarded store value
    that did not vary along an axis needs to replace a load that did span it."""

    out: str
    x: str
    axes: tuple[int, ...]
    SSA = ("x",)


@dataclass(frozen=True)
class Widen(Instr):
    out: str
    x: str
    to: str
    SSA = ("x",)


@dataclass(frozen=True)
class Round(Instr):
    out: str
    x: str
    to: str
    overflow: str = "nonfinite"
    SSA = ("x",)


@dataclass(frozen=True)
class Cast(Instr):
    out: str
    x: str
    to: str
    overflow: str = "nonfinite"
    rounding: str = "nearest"
    SSA = ("x",)


@dataclass(frozen=True)
class BinOp(Instr):
    out: str
    kind: str
    a: str
    b: str
    SSA = ("a", "b")


@dataclass(frozen=True)
class UnOp(Instr):
    out: str
    kind: str
    x: str
    SSA = ("x",)


@dataclass(frozen=True)
class Select(Instr):
    out: str
    cond: str
    a: str
    b: str
    SSA = ("cond", "a", "b")


@dataclass(frozen=True)
class Bitcast(Instr):
    """Reinterpret ``x``'s 32-bit pattern as ``to`` (f32 <-> u32 only): no conversion."""

    out: str
    x: str
    to: str
    SSA = ("x",)


@dataclass(frozen=True)
class Math(Instr):
    """``fn(x)`` within its ULP budget for x's dtype. ``within``: the result is only ever
    rounded to this narrow dtype (whose budget is 1 ulp), so a renderer may compute an f32
    ``x`` with any f32 error below 2^(23-p) ulp (``semantics.ulp``, lemma B; p the narrow
    dtype's significand bits) instead of the f32 budget."""

    out: str
    fn: str
    x: str
    within: str | None = None
    SSA = ("x",)


@dataclass(frozen=True)
class Reduce(Instr):
    out: str
    x: str
    axes: tuple[int, ...]
    kind: str
    policy: str
    mask: str | None = None
    init: str | None = None
    SSA = ("x", "mask", "init")


@dataclass(frozen=True)
class Dot(Instr):
    out: str
    a: str
    b: str
    axis: int
    mask: str | None = None
    init: str | None = None
    reassociate: bool = True
    SSA = ("a", "b", "mask", "init")


@dataclass(frozen=True)
class TileLoop(Instr):
    """Walk the tiles of ``axis`` in order (``reverse``: last tile first); ``carried`` names
    start as ``inits`` and take ``yields`` after each tile; ``outs`` hold the final values."""

    outs: tuple[str, ...]
    axis: int
    carried: tuple[str, ...]
    inits: tuple[str, ...]
    body: tuple
    yields: tuple[str, ...]
    reverse: bool = False

    def operands(self) -> list[str]:
        return list(self.inits)

    def results(self) -> tuple[str, ...]:
        return self.outs

    def renamed(self, m: Mapping[str, str]) -> TileLoop:
        g = lambda t: tuple(m.get(n, n) for n in t)  # noqa: E731
        return replace(self, outs=g(self.outs), carried=g(self.carried), inits=g(self.inits),
                       yields=g(self.yields), body=tuple(i.renamed(m) for i in self.body))


def iter_instrs(body: Iterable[Instr]) -> Iterator[Instr]:
    """Every instruction of a body, loop bodies included (pre-order)."""
    for ins in body:
        yield ins
        if isinstance(ins, TileLoop):
            yield from iter_instrs(ins.body)


# =============================================================================================
# buffers, kernels, programs
# =============================================================================================
BUFFER_KINDS = ("input", "temp", "const", "alias")


@dataclass(frozen=True)
class Buffer:
    """A tensor in memory. ``alias``: a view (own shape / strides, element ``offset``) of the
    storage of ``base``; ``const``: initialized with ``data`` (C order)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    kind: str = "temp"
    base: str | None = None
    offset: int = 0
    data: Any = field(default=None, compare=False, repr=False)

    @property
    def span(self) -> int:
        return buffer_span(self.shape, self.strides)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Kernel:
    name: str
    domain: tuple[int, ...]
    block: tuple[int, ...]
    body: tuple
    loop_axes: tuple[int, ...] = ()

    @property
    def rank(self) -> int:
        return len(self.domain)

    @property
    def grid(self) -> tuple[int, ...]:
        """Program instances per domain axis (1 on loop axes)."""
        return tuple(1 if d in self.loop_axes else -(-n // b)
                     for d, (n, b) in enumerate(zip(self.domain, self.block, strict=True)))

    @property
    def instances(self) -> int:
        return math.prod(self.grid)

    def ragged(self, d: int) -> bool:
        return self.domain[d] % self.block[d] != 0


@dataclass(frozen=True)
class HostLoop:
    """``for i in range(start, stop, step)`` around ``body``: ``carried`` buffers take ``inits``
    before the first iteration and ``yields`` after each (all copies read first); ``var`` (a
    rank-0 integer buffer) holds ``i``. The loop's value is the carried buffers."""

    name: str
    var: str
    start: int
    stop: int
    step: int
    carried: tuple[str, ...]
    inits: tuple[str, ...]
    body: tuple
    yields: tuple[str, ...]


@dataclass(frozen=True)
class Program:
    name: str
    buffers: tuple[Buffer, ...]
    inputs: tuple[str, ...]
    outputs: Any  # a buffer name, or a (nested) tuple of them
    steps: tuple

    def buffer_map(self) -> dict[str, Buffer]:
        return {b.name: b for b in self.buffers}

    def kernels(self) -> list[Kernel]:
        out: list[Kernel] = []

        def walk(steps: Iterable) -> None:
            for s in steps:
                if isinstance(s, Kernel):
                    out.append(s)
                else:
                    walk(s.body)

        walk(self.steps)
        return out

    def output_names(self) -> list[str]:
        out: list[str] = []

        def walk(o: Any) -> None:
            if isinstance(o, tuple):
                for x in o:
                    walk(x)
            else:
                out.append(o)

        walk(self.outputs)
        return out


def root_of(name: str, buffers: Mapping[str, Buffer]) -> Buffer:
    b = buffers[name]
    seen = set()
    while b.kind == "alias":
        if b.name in seen:
            raise KernelIRError(f"buffer {name}: alias cycle through {sorted(seen)}")
        seen.add(b.name)
        b = buffers[b.base]
    return b


# =============================================================================================
# the verifier (also the type derivation the printer and the passes use)
# =============================================================================================
def _fmt_instr(ins: Instr) -> str:
    return _instr_text(ins, None, ())


class _Checker:
    def __init__(self, kernel: Kernel, buffers: Mapping[str, Buffer], where: str,
                 strict: bool = True):
        self.k = kernel
        self.buffers = buffers
        self.where = where
        self.strict = strict
        self.types: dict[str, Tile] = {}
        self.defs: dict[str, Instr] = {}

    # -- reporting ---------------------------------------------------------------------------
    def fail(self, ins: Instr | None, msg: str) -> None:
        at = f": {_fmt_instr(ins)}" if ins is not None else ""
        raise KernelIRError(f"{self.where}, kernel {self.k.name}{at}: {msg}")

    def t(self, ins: Instr, name: str | None) -> Tile | None:
        if name is None:
            return None
        if name not in self.types:
            self.fail(ins, f"operand {name} is not defined before this instruction (SSA)")
        return self.types[name]

    def define(self, ins: Instr, name: str, tile: Tile, active: frozenset) -> None:
        if name in self.types:
            self.fail(ins, f"{name} is defined twice (SSA)")
        if tile.dtype not in DTYPES:
            self.fail(ins, f"result dtype {tile.dtype!r} is not a kernel-IR dtype")
        escaped = (tile.full & set(self.k.loop_axes)) - active
        if escaped:
            self.fail(ins, f"the value spans loop axis d{min(escaped)} outside a tile_loop over "
                           f"it (loop-axis coordinates exist only inside the loop)")
        self.types[name] = tile
        self.defs[name] = ins

    def canon(self, axes: Iterable[int]) -> frozenset:
        return frozenset(d for d in axes if self.k.domain[d] > 1)

    # -- the kernel ----------------------------------------------------------------------------
    def run(self) -> dict[str, Tile]:
        k = self.k
        if len(k.block) != len(k.domain):
            self.fail(None, f"block {k.block} and domain {k.domain} differ in rank")
        for d, (n, b) in enumerate(zip(k.domain, k.block, strict=True)):
            if not isinstance(n, int) or n < 0:
                self.fail(None, f"domain extent d{d} = {n!r} is not a non-negative int")
            if not isinstance(b, int) or b < 1 or b & (b - 1):
                self.fail(None, f"block extent d{d} = {b!r} is not a power of two >= 1")
        if len(set(k.loop_axes)) != len(k.loop_axes) or \
                any(not 0 <= d < k.rank for d in k.loop_axes):
            self.fail(None, f"loop_axes {k.loop_axes} are not distinct axes of the domain")
        self.block(k.body, frozenset())
        return self.types

    def block(self, body: Iterable[Instr], active: frozenset) -> None:
        for ins in body:
            if not isinstance(ins, Instr):
                self.fail(None, f"body holds a {type(ins).__name__}, not an instruction")
            getattr(self, "i_" + type(ins).__name__)(ins, active)

    def split_axis(self, ins: Instr, d: int, active: frozenset) -> None:
        """Reducing over ``d`` needs the whole axis in this instance."""
        k = self.k
        if d in k.loop_axes:
            if d not in active:
                self.fail(ins, f"axis d{d} is a loop axis; reduce it inside its tile_loop")
        elif k.domain[d] > k.block[d]:
            self.fail(ins, f"axis d{d} (extent {k.domain[d]}) is split across program "
                           f"instances (block {k.block[d]}): a reduction over it would give "
                           f"partial results")

    # -- instructions ------------------------------------------------------------------------
    def i_Const(self, ins: Const, active: frozenset) -> None:
        dt = ins.dtype
        if dt not in DTYPES:
            self.fail(ins, f"dtype {dt!r} is not a kernel-IR dtype")
        if is_float(dt) and dt not in COMPUTE_FLOATS:
            self.fail(ins, f"a {dt} constant: constants live in f32 / f64 (or integer / bool); "
                           f"round one explicitly")
        v = ins.value
        ok = isinstance(v, bool) if dt == "bool" else (
            isinstance(v, int) and not isinstance(v, bool) if is_int(dt)
            else isinstance(v, float | int) and not isinstance(v, bool))
        if not ok:
            self.fail(ins, f"value {v!r} does not fit dtype {dt}")
        if dt == "f32" and not (math.isnan(v) or float(np.float32(v)) == v):
            self.fail(ins, f"value {v!r} is not exactly an f32 value")
        self.define(ins, ins.out, Tile(dt, frozenset()), active)

    def i_Coord(self, ins: Coord, active: frozenset) -> None:
        if not 0 <= ins.axis < self.k.rank:
            self.fail(ins, f"axis {ins.axis} is outside the domain's rank {self.k.rank}")
        if ins.axis in self.k.loop_axes and ins.axis not in active:
            self.fail(ins, f"coord of the loop axis d{ins.axis} outside a tile_loop over it (the "
                           f"axis has no tile there)")
        self.define(ins, ins.out, Tile("i64", self.canon([ins.axis])), active)

    def i_EdgeMask(self, ins: EdgeMask, active: frozenset) -> None:
        if not ins.axes or any(not 0 <= d < self.k.rank for d in ins.axes) or \
                len(set(ins.axes)) != len(ins.axes):
            self.fail(ins, f"axes {ins.axes} are not distinct axes of the domain")
        self.define(ins, ins.out, Tile("bool", self.canon(ins.axes)), active)

    def access(self, ins: Load | Store) -> tuple[Buffer, frozenset, Tile | None]:
        """(buffer, the axes the access spans, the mask's type)."""
        b = self.buffers.get(ins.buffer)
        if b is None:
            self.fail(ins, f"buffer {ins.buffer} does not exist")
        if len(ins.strides) != self.k.rank:
            self.fail(ins, f"{len(ins.strides)} strides for a rank-{self.k.rank} domain")
        for d, s in enumerate(ins.strides):
            if not isinstance(s, int):
                self.fail(ins, f"stride d{d} = {s!r} is not an int")
            if s and self.k.domain[d] <= 1:
                self.fail(ins, f"stride {s} on axis d{d} of extent {self.k.domain[d]} "
                               f"(canonical form: 0)")
        full = self.canon(d for d, s in enumerate(ins.strides) if s)
        for name, s in ins.index:
            it = self.t(ins, name)
            if it.dtype != "i64":
                self.fail(ins, f"index operand {name} is {it.dtype}; indices are i64 (cast)")
            if not isinstance(s, int):
                self.fail(ins, f"index stride {s!r} is not an int")
            full |= it.full
        mt = self.t(ins, ins.mask)
        if mt is not None and mt.dtype != "bool":
            self.fail(ins, f"mask {ins.mask} is {mt.dtype}, not bool")
        ragged = {d for d in full if self.k.ragged(d)}
        uncovered = ragged - (mt.full if mt is not None else frozenset())
        if uncovered:
            d = min(uncovered)
            self.fail(ins, f"unmasked access on ragged axis d{d} (extent {self.k.domain[d]}, "
                           f"block {self.k.block[d]}): the last tile reads / writes out of "
                           f"bounds; mask it with edge_mask")
        edge_only = ins.mask is None or isinstance(self.defs.get(ins.mask), EdgeMask)
        if self.strict and not ins.index and b.size and edge_only:  # (data masks: dynamic)
            lo = ins.offset + sum((n - 1) * s for n, s in zip(self.k.domain, ins.strides,
                                                              strict=True) if s < 0 and n)
            hi = ins.offset + sum((n - 1) * s for n, s in zip(self.k.domain, ins.strides,
                                                              strict=True) if s > 0 and n)
            if self.k.instances and all(self.k.domain) and (lo < 0 or hi >= b.span):
                self.fail(ins, f"offsets [{lo}, {hi}] leave buffer {b.name} (span {b.span})")
        return b, full, mt

    def i_Load(self, ins: Load, active: frozenset) -> None:
        b, full, mt = self.access(ins)
        self.define(ins, ins.out, Tile(b.dtype, full | (mt.full if mt else frozenset())),
                    active)

    def i_Store(self, ins: Store, active: frozenset) -> None:
        b, full, mt = self.access(ins)
        root = root_of(b.name, self.buffers)
        if root.kind in ("input", "const"):
            self.fail(ins, f"stores to {root.kind} buffer {root.name} (read-only)")
        vt = self.t(ins, ins.value)
        if vt.dtype != b.dtype:
            self.fail(ins, f"value {ins.value} is {vt.dtype}, buffer {b.name} holds {b.dtype}")
        extra = (vt.full | (mt.full if mt else frozenset())) - full
        if extra:
            self.fail(ins, f"the value or mask varies along d{min(extra)} but the store writes "
                           f"one location along it (stride 0): lanes would race")

    def i_Broadcast(self, ins: Broadcast, active: frozenset) -> None:
        xt = self.t(ins, ins.x)
        if not ins.axes or any(not 0 <= d < self.k.rank for d in ins.axes):
            self.fail(ins, f"axes {ins.axes} are not axes of the domain")
        self.define(ins, ins.out, Tile(xt.dtype, xt.full | self.canon(ins.axes)), active)

    def i_Widen(self, ins: Widen, active: frozenset) -> None:
        xt = self.t(ins, ins.x)
        if ins.to not in COMPUTE_FLOATS or not is_float(xt.dtype) or xt.dtype == ins.to or \
                (ins.to == "f32" and xt.dtype == "f64"):
            self.fail(ins, f"widen {xt.dtype} -> {ins.to}: widening goes from a narrower float "
                           f"to f32 or f64")
        self.define(ins, ins.out, Tile(ins.to, xt.full), active)

    def i_Round(self, ins: Round, active: frozenset) -> None:
        xt = self.t(ins, ins.x)
        ok = xt.dtype in COMPUTE_FLOATS and ins.to in STORAGE_DTYPES and is_float(ins.to) and \
            ins.to != xt.dtype
        if not ok:
            self.fail(ins, f"round {xt.dtype} -> {ins.to}: rounding goes from f32 / f64 to a "
                           f"narrower float storage dtype")
        if ins.overflow not in OVERFLOW_MODES:
            self.fail(ins, f"overflow {ins.overflow!r} is not one of {OVERFLOW_MODES}")
        self.define(ins, ins.out, Tile(ins.to, xt.full), active)

    def i_Cast(self, ins: Cast, active: frozenset) -> None:
        xt = self.t(ins, ins.x)
        if xt.dtype not in STORAGE_DTYPES or ins.to not in STORAGE_DTYPES:
            self.fail(ins, f"cast {xt.dtype} -> {ins.to}: casts convert between storage "
                           f"dtypes (f64 values are rounded with round)")
        if ins.overflow not in OVERFLOW_MODES or ins.rounding not in ROUNDING_MODES:
            self.fail(ins, f"modes ({ins.overflow!r}, {ins.rounding!r}) are not valid")
        if (ins.overflow, ins.rounding) != ("nonfinite", "nearest") and not is_float(ins.to):
            self.fail(ins, f"a cast to {ins.to} takes no overflow / rounding mode")
        if ins.rounding != "nearest" and ins.to != "f8e8m0":
            self.fail(ins, f"rounding {ins.rounding!r} is only taken by f8e8m0")
        self.define(ins, ins.out, Tile(ins.to, xt.full), active)

    def i_BinOp(self, ins: BinOp, active: frozenset) -> None:
        at, bt = self.t(ins, ins.a), self.t(ins, ins.b)
        k, dt = ins.kind, at.dtype
        if k not in BINARY_KINDS:
            self.fail(ins, f"kind {k!r} is not one of {BINARY_KINDS}")
        if at.dtype != bt.dtype:
            self.fail(ins, f"operand dtypes differ ({at.dtype} vs {bt.dtype})")
        if is_float(dt) and dt not in COMPUTE_FLOATS:
            self.fail(ins, f"{k} on {dt}: float arithmetic runs in f32 / f64 (widen, op, round "
                           f"— the numeric contract)")
        if k in LOGICAL and dt != "bool":
            self.fail(ins, f"{k} takes bool operands, got {dt}")
        if k in ("floordiv", "mod") and not is_int(dt):
            self.fail(ins, f"{k} takes integer operands, got {dt}")
        if k == "div" and not is_float(dt):
            self.fail(ins, f"div takes float operands, got {dt} (floordiv for integers)")
        if dt == "bool" and k in ("add", "sub", "mul"):
            self.fail(ins, f"{k} is not defined on bool")
        out = "bool" if k in COMPARISONS else dt
        self.define(ins, ins.out, Tile(out, at.full | bt.full), active)

    def i_UnOp(self, ins: UnOp, active: frozenset) -> None:
        xt = self.t(ins, ins.x)
        k, dt = ins.kind, xt.dtype
        if k not in UNARY_KINDS:
            self.fail(ins, f"kind {k!r} is not one of {UNARY_KINDS}")
        if is_float(dt) and dt not in COMPUTE_FLOATS:
            self.fail(ins, f"{k} on {dt}: float arithmetic runs in f32 / f64")
        if (k == "not") != (dt == "bool"):
            self.fail(ins, f"{k} is not defined on {dt}")
        if k == "sqrt" and not is_float(dt):
            self.fail(ins, f"sqrt takes a float operand, got {dt}")
        self.define(ins, ins.out, Tile(dt, xt.full), active)

    def i_Select(self, ins: Select, active: frozenset) -> None:
        ct, at, bt = self.t(ins, ins.cond), self.t(ins, ins.a), self.t(ins, ins.b)
        if ct.dtype != "bool" or at.dtype != bt.dtype:
            self.fail(ins, f"select needs a bool condition and equal dtypes, got {ct.dtype}, "
                           f"{at.dtype}, {bt.dtype}")
        self.define(ins, ins.out, Tile(at.dtype, ct.full | at.full | bt.full), active)

    def i_Bitcast(self, ins: Bitcast, active: frozenset) -> None:
        xt = self.t(ins, ins.x)
        if (xt.dtype, ins.to) not in (("f32", "u32"), ("u32", "f32")):
            self.fail(ins, f"bitcast {xt.dtype} -> {ins.to}: only f32 <-> u32 reinterprets bits")
        self.define(ins, ins.out, Tile(ins.to, xt.full), active)

    def i_Math(self, ins: Math, active: frozenset) -> None:
        xt = self.t(ins, ins.x)
        if ins.fn not in MATH_FNS:
            self.fail(ins, f"fn {ins.fn!r} is not one of {MATH_FNS}")
        if not is_float(xt.dtype):
            self.fail(ins, f"{ins.fn} takes a float operand, got {xt.dtype}")
        if xt.dtype == "f64" and ins.fn not in LIBM64:
            self.fail(ins, f"{ins.fn} on f64: only {sorted(LIBM64)} are f64 libm functions")
        self.define(ins, ins.out, Tile(xt.dtype, xt.full), active)

    def reduction(self, ins: Instr, axes: Iterable[int], full: frozenset,
                  active: frozenset) -> frozenset:
        axes = tuple(axes)
        if not axes or list(axes) != sorted(set(axes)) or \
                any(not 0 <= d < self.k.rank for d in axes):
            self.fail(ins, f"axes {axes} are not sorted distinct axes of the domain")
        for d in axes:
            if d not in full and self.k.domain[d] > 1:
                self.fail(ins, f"reduces axis d{d} on which the operand is broadcast "
                               f"(extent {self.k.domain[d]})")
            if self.k.domain[d] > 1:
                self.split_axis(ins, d, active)
        return full - set(axes)

    def i_Reduce(self, ins: Reduce, active: frozenset) -> None:
        xt = self.t(ins, ins.x)
        dt = xt.dtype
        if ins.kind not in REDUCE_KINDS or ins.policy not in POLICIES:
            self.fail(ins, f"kind {ins.kind!r} / policy {ins.policy!r} are not valid "
                           f"({REDUCE_KINDS}, {POLICIES})")
        if is_float(dt) and dt not in COMPUTE_FLOATS:
            self.fail(ins, f"reduces {dt}: reductions accumulate in f32 / f64 (widen first)")
        if dt == "bool" and ins.kind not in ("max", "min"):
            self.fail(ins, f"{ins.kind} is not defined on bool")
        if ins.kind == "prod" and not is_int(dt):
            self.fail(ins, f"prod is an integer (wrapping) product, got {dt}")
        if ins.kind in COMPENSATED and (dt != "f64" or ins.policy != "fold_left" or ins.init):
            self.fail(ins, f"{ins.kind} is the compensated fold_left of f64 lanes (no init)")
        mt = self.t(ins, ins.mask)
        if mt is not None and mt.dtype != "bool":
            self.fail(ins, f"mask {ins.mask} is {mt.dtype}, not bool")
        out = self.reduction(ins, ins.axes, xt.full, active)
        it = self.t(ins, ins.init)
        if it is not None and (it.dtype != dt or not it.full <= out):
            self.fail(ins, f"init {ins.init} ({it.text(self.k.block)}) does not fit the result")
        self.define(ins, ins.out, Tile(dt, out), active)

    def i_Dot(self, ins: Dot, active: frozenset) -> None:
        at, bt = self.t(ins, ins.a), self.t(ins, ins.b)
        if at.dtype != bt.dtype or at.dtype not in ("f32", "i64"):
            self.fail(ins, f"dot takes f32 (or i64) operands of one dtype, got {at.dtype}, "
                           f"{bt.dtype}")
        out = self.reduction(ins, (ins.axis,), at.full | bt.full, active)
        mt = self.t(ins, ins.mask)
        if mt is not None and mt.dtype != "bool":
            self.fail(ins, f"mask {ins.mask} is {mt.dtype}, not bool")
        it = self.t(ins, ins.init)
        if it is not None and (it.dtype != at.dtype or not it.full <= out):
            self.fail(ins, f"init {ins.init} does not fit the result")
        self.define(ins, ins.out, Tile(at.dtype, out), active)

    def i_TileLoop(self, ins: TileLoop, active: frozenset) -> None:
        d = ins.axis
        if d not in self.k.loop_axes:
            self.fail(ins, f"tile_loop over d{d}, which is not in the kernel's loop_axes "
                           f"{self.k.loop_axes}")
        if d in active:
            self.fail(ins, f"nested tile_loop over d{d} inside a loop over it")
        n = len(ins.carried)
        if not (len(ins.inits) == len(ins.yields) == len(ins.outs) == n):
            self.fail(ins, "carried / inits / yields / outs differ in length")
        init_t = [self.t(ins, i) for i in ins.inits]
        inner = active | {d}
        for c, t in zip(ins.carried, init_t, strict=True):
            self.define(ins, c, t, inner)
        self.block(ins.body, inner)
        for c, y, t in zip(ins.carried, ins.yields, init_t, strict=True):
            yt = self.t(ins, y)
            if yt != t:
                self.fail(ins, f"yield {y} ({yt.text(self.k.block)}) does not match carry {c} "
                               f"({t.text(self.k.block)})")
        for o, t in zip(ins.outs, init_t, strict=True):
            self.define(ins, o, t, active)


def kernel_types(kernel: Kernel, buffers: Mapping[str, Buffer] | Iterable[Buffer], *,
                 where: str = "program") -> dict[str, Tile]:
    """Verify ``kernel`` against ``buffers`` and return the tile type of every SSA name."""
    bm = buffers if isinstance(buffers, Mapping) else {b.name: b for b in buffers}
    return _Checker(kernel, bm, where).run()


def _step_io(step: Any, buffers: Mapping[str, Buffer] | None = None
             ) -> tuple[set[str], set[str]]:
    """(buffers read, buffers written) by a step; a HostLoop's include its body's. With
    ``buffers``, names are resolved to the root storage (an alias reads / writes its base)."""
    if isinstance(step, Kernel):
        r: set[str] = set()
        w: set[str] = set()
        for ins in iter_instrs(step.body):
            if isinstance(ins, Load):
                r.add(ins.buffer)
            elif isinstance(ins, Store):
                w.add(ins.buffer)
    else:
        r, w = set(step.inits) | set(step.yields), set(step.carried) | {step.var}
        for s in step.body:
            sr, sw = _step_io(s)
            r |= sr
            w |= sw
    if buffers is not None:
        r = {root_of(n, buffers).name for n in r}
        w = {root_of(n, buffers).name for n in w}
    return r, w


def verify(program: Program | Kernel, buffers: Iterable[Buffer] | None = None) -> None:
    """Check a program (or one kernel against ``buffers``); raise ``KernelIRError`` naming the
    kernel and the offending instruction."""
    if isinstance(program, Kernel):
        kernel_types(program, list(buffers or ()), where="kernel")
        return
    if not isinstance(program, Program):
        raise KernelIRError(f"verify takes a Program or a Kernel, got {type(program).__name__}")
    where = f"program {program.name}"
    bm: dict[str, Buffer] = {}
    for b in program.buffers:
        if b.name in bm:
            raise KernelIRError(f"{where}: buffer {b.name} is declared twice")
        bm[b.name] = b
    for b in program.buffers:
        w = f"{where}, buffer {b.name}"
        if b.dtype not in DTYPES or b.kind not in BUFFER_KINDS:
            raise KernelIRError(f"{w}: dtype {b.dtype!r} / kind {b.kind!r} is not valid")
        if len(b.shape) != len(b.strides) or any(n < 0 for n in b.shape):
            raise KernelIRError(f"{w}: shape {b.shape} and strides {b.strides} do not fit")
        if b.kind == "alias":
            if b.base not in bm:
                raise KernelIRError(f"{w}: alias of unknown buffer {b.base}")
            root = root_of(b.name, bm)
            if b.dtype != root.dtype:
                raise KernelIRError(f"{w}: alias dtype {b.dtype} differs from {root.dtype}")
            if b.size and b.offset + b.span > buffer_span(root.shape, root.strides):
                raise KernelIRError(f"{w}: the view leaves the storage of {root.name}")
        if b.kind == "const":
            d = b.data
            if not isinstance(d, np.ndarray) or d.shape != b.shape or \
                    d.dtype != numpy_dtype(b.dtype):
                raise KernelIRError(f"{w}: const data must be a {b.dtype} array of shape "
                                    f"{b.shape}")
    for n in program.inputs:
        if n not in bm or bm[n].kind != "input":
            raise KernelIRError(f"{where}: input {n} is not an input buffer")
    for n in program.output_names():
        if n not in bm:
            raise KernelIRError(f"{where}: output {n} is not a buffer")
    ready = {b.name for b in program.buffers if b.kind in ("input", "const")}
    names: set[str] = set()

    def avail(n: str) -> bool:  # written, or empty (nothing to write)
        return n in ready or bm[n].size == 0 or (bm[n].kind == "alias" and avail(bm[n].base))

    def steps(seq: Iterable, ready: set[str]) -> None:
        for s in seq:
            if isinstance(s, Kernel):
                if s.name in names:
                    raise KernelIRError(f"{where}: two steps are named {s.name}")
                names.add(s.name)
                kernel_types(s, bm, where=where)
                r, w = _step_io(s)
                for n in sorted(r - w):
                    if not avail(n):
                        raise KernelIRError(f"{where}, kernel {s.name}: reads buffer {n} "
                                            f"before any step writes it")
                ready |= w
            elif isinstance(s, HostLoop):
                lw = f"{where}, loop {s.name}"
                vb = bm.get(s.var)
                if vb is None or vb.shape != () or not is_int(vb.dtype):
                    raise KernelIRError(f"{lw}: var {s.var} must be a rank-0 integer buffer")
                if s.step < 1:
                    raise KernelIRError(f"{lw}: step {s.step} is not positive")
                if not len(s.carried) == len(s.inits) == len(s.yields):
                    raise KernelIRError(f"{lw}: carried / inits / yields differ in length")
                for c, i in zip(s.carried, s.inits, strict=True):
                    if c not in bm or i not in bm or (bm[c].dtype, bm[c].shape) != \
                            (bm[i].dtype, bm[i].shape):
                        raise KernelIRError(f"{lw}: carry {c} and init {i} differ")
                    if not avail(i):
                        raise KernelIRError(f"{lw}: init {i} is not written before the loop")
                ready |= set(s.carried) | {s.var}
                steps(s.body, ready)
                for c, y in zip(s.carried, s.yields, strict=True):
                    if y not in bm or (bm[c].dtype, bm[c].shape) != (bm[y].dtype, bm[y].shape):
                        raise KernelIRError(f"{lw}: yield {y} does not match carry {c}")
                    if not avail(y):
                        raise KernelIRError(f"{lw}: yield {y} is not written by the body")
            else:
                raise KernelIRError(f"{where}: a step is a {type(s).__name__}")

    steps(program.steps, ready)
    for n in program.output_names():
        if not avail(n):
            raise KernelIRError(f"{where}: output {n} is never written")


# =============================================================================================
# the printer
# =============================================================================================
def _lit(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _affine(strides: tuple[int, ...], offset: int, index: tuple) -> str:
    terms = [f"{s}*d{d}" if s != 1 else f"d{d}" for d, s in enumerate(strides) if s]
    terms += [f"{s}*{n}" if s != 1 else n for n, s in index]
    if offset or not terms:
        terms.append(str(offset))
    return " + ".join(terms)


def _axes(axes: Iterable[int]) -> str:
    return ", ".join(f"d{d}" for d in axes)


def _instr_text(ins: Instr, types: Mapping[str, Tile] | None, block: tuple[int, ...]) -> str:
    def ty(n: str) -> str:
        return f" : {types[n].text(block)}" if types is not None and n in types else ""

    def m(mask: str | None) -> str:
        return f" mask {mask}" if mask else ""

    if isinstance(ins, Const):
        return f"{ins.out} = const {_lit(ins.value)}{ty(ins.out) or ' : ' + ins.dtype}"
    if isinstance(ins, Coord):
        return f"{ins.out} = coord d{ins.axis}{ty(ins.out)}"
    if isinstance(ins, EdgeMask):
        return f"{ins.out} = edge_mask {_axes(ins.axes)}{ty(ins.out)}"
    if isinstance(ins, Load):
        oth = f" other {_lit(ins.other)}" if ins.mask else ""
        return (f"{ins.out} = load {ins.buffer}[{_affine(ins.strides, ins.offset, ins.index)}]"
                f"{m(ins.mask)}{oth}{ty(ins.out)}")
    if isinstance(ins, Store):
        return (f"store {ins.buffer}[{_affine(ins.strides, ins.offset, ins.index)}] <- "
                f"{ins.value}{m(ins.mask)}")
    if isinstance(ins, Broadcast):
        return f"{ins.out} = broadcast {ins.x} over {_axes(ins.axes)}{ty(ins.out)}"
    if isinstance(ins, Widen):
        return f"{ins.out} = widen {ins.x} -> {ins.to}{ty(ins.out)}"
    if isinstance(ins, Round):
        return f"{ins.out} = round {ins.x} -> {ins.to} ({ins.overflow}){ty(ins.out)}"
    if isinstance(ins, Cast):
        modes = "" if (ins.overflow, ins.rounding) == ("nonfinite", "nearest") else \
            f" ({ins.overflow}, {ins.rounding})"
        return f"{ins.out} = cast {ins.x} -> {ins.to}{modes}{ty(ins.out)}"
    if isinstance(ins, BinOp):
        return f"{ins.out} = {ins.kind} {ins.a}, {ins.b}{ty(ins.out)}"
    if isinstance(ins, UnOp):
        return f"{ins.out} = {ins.kind} {ins.x}{ty(ins.out)}"
    if isinstance(ins, Select):
        return f"{ins.out} = select {ins.cond}, {ins.a}, {ins.b}{ty(ins.out)}"
    if isinstance(ins, Bitcast):
        return f"{ins.out} = bitcast {ins.x} -> {ins.to}{ty(ins.out)}"
    if isinstance(ins, Math):
        contract = ""
        if types is not None and ins.x in types and types[ins.x].dtype != "f64":
            from tilefoundry.semantics.ulp import budget

            key = ins.fn
            try:
                contract = f" [ulp <= {budget(key, types[ins.x].dtype):g}]"
            except Exception:  # a dtype the table does not cover
                contract = ""
        elif types is not None:
            contract = " [f64 libm]"
        if ins.within:
            contract += f" [for {ins.within}]"
        return f"{ins.out} = math.{ins.fn} {ins.x}{contract}{ty(ins.out)}"
    if isinstance(ins, Reduce):
        init = f" init {ins.init}" if ins.init else ""
        return (f"{ins.out} = reduce.{ins.kind} {ins.x} over {_axes(ins.axes)} "
                f"[{ins.policy}]{m(ins.mask)}{init}{ty(ins.out)}")
    if isinstance(ins, Dot):
        init = f" init {ins.init}" if ins.init else ""
        order = "reassociate" if ins.reassociate else "k_order"
        return (f"{ins.out} = dot {ins.a}, {ins.b} over d{ins.axis} [{order}]{m(ins.mask)}"
                f"{init}{ty(ins.out)}")
    if isinstance(ins, TileLoop):
        carry = ", ".join(f"{c} = {i}" for c, i in zip(ins.carried, ins.inits, strict=True))
        rev = " reversed" if ins.reverse else ""
        return f"{', '.join(ins.outs)} = tile_loop d{ins.axis}{rev} carry ({carry})"
    return repr(ins)


def _kernel_lines(k: Kernel, bm: Mapping[str, Buffer], indent: str) -> list[str]:
    try:
        types: Mapping[str, Tile] | None = _Checker(k, bm, "print", strict=False).run()
    except KernelIRError:
        types = None
    loops = f" loop_axes [{_axes(k.loop_axes)}]" if k.loop_axes else ""
    lines = [f"{indent}kernel {k.name} domain {list(k.domain)} block {list(k.block)} "
             f"grid {list(k.grid)}{loops}"]

    def body(seq: Iterable[Instr], ind: str) -> None:
        for ins in seq:
            lines.append(ind + _instr_text(ins, types, k.block))
            if isinstance(ins, TileLoop):
                body(ins.body, ind + "  ")
                lines.append(f"{ind}  yield {', '.join(ins.yields)}")

    body(k.body, indent + "  ")
    return lines


def _buffer_line(b: Buffer) -> str:
    head = f"{b.kind:<5} {b.name}: {b.dtype}{list(b.shape)} strides {list(b.strides)}"
    if b.kind == "alias":
        head += f" view of {b.base}" + (f" + {b.offset}" if b.offset else "")
    if b.kind == "const" and isinstance(b.data, np.ndarray):
        if b.data.size <= 4:
            vals = ", ".join(repr(float(v)) if is_float(b.dtype) else str(v)
                             for v in b.data.reshape(-1).astype(
                                 np.float64 if is_float(b.dtype) else b.data.dtype).tolist())
            head += f" = [{vals}]"
        else:
            head += f" = <{b.data.size} values>"
    return head


def _outputs_text(o: Any) -> str:
    if isinstance(o, tuple):
        return "(" + ", ".join(_outputs_text(x) for x in o) + ("," if len(o) == 1 else "") + ")"
    return o


def to_text(program: Program | Kernel, buffers: Iterable[Buffer] | None = None) -> str:
    """The program (or one kernel) as text: buffers, then steps; every SSA value with its tile
    type at the current block sizes."""
    if isinstance(program, Kernel):
        bm = {b.name: b for b in (buffers or ())}
        return "\n".join(_kernel_lines(program, bm, ""))
    bm = program.buffer_map()
    lines = [f"program {program.name}({', '.join(program.inputs)}) -> "
             f"{_outputs_text(program.outputs)}"]
    lines += ["  " + _buffer_line(b) for b in program.buffers]

    def steps(seq: Iterable, ind: str) -> None:
        for s in seq:
            if isinstance(s, Kernel):
                lines.extend(_kernel_lines(s, bm, ind))
            else:
                carry = ", ".join(f"{c} = {i}" for c, i in zip(s.carried, s.inits, strict=True))
                lines.append(f"{ind}loop {s.name} {s.var} in range({s.start}, {s.stop}, "
                             f"{s.step}) carry ({carry})")
                steps(s.body, ind + "  ")
                lines.append(f"{ind}  yield {', '.join(s.yields)}")

    steps(program.steps, "  ")
    return "\n".join(lines) + "\n"


def instr_fields(ins: Instr) -> dict[str, Any]:
    return {f.name: getattr(ins, f.name) for f in fields(ins)}
