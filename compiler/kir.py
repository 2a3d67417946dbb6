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
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tilefoundry.compiler.errors import KernelIRError
from tilefoundry.compiler.kir_math import LIBM64 as _LIBM64
from tilefoundry.compiler.kir_math import MATH_FNS as _MATH_FNS
from tilefoundry.semantics.formats import FORMATS, DType

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
#: ``math`` function names and their f64 subset: one table, ``compiler/kir_math.py`` (D437)
MATH_FNS = _MATH_FNS
LIBM64 = frozenset(_LIBM64)
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


def a_lane_is_valid(body: Iterable[Instr], mask: str, red: Iterable[int],
                    domain: tuple[int, ...]) -> bool:
    """Every row of a reduction over axes ``red`` masked by ``mask`` has a valid lane, so a
    masked float sum's "no valid lane gives +0" flag is statically true (F45): ``mask`` is an
    ``EdgeMask`` of reduced axes only, each with a nonempty domain. A tile never starts
    outside the domain (the grid and a ``TileLoop`` visit ceil(domain / block) tiles along an
    axis), so its first lane along every reduced axis is inside; an edge mask along a kept axis
    (a row outside the domain) keeps the flag."""
    for i in iter_instrs(body):
        if isinstance(i, EdgeMask) and i.out == mask:
            axes = set(i.axes)
            return bool(axes) and axes <= set(red) and all(domain[d] >= 1 for d in axes)
    return False


def bf16_round_is_identity(defs: Mapping[str, Instr], dtype_of, x: str) -> bool:
    """Rounding the f32 value ``x`` to bf16 (round to nearest even, ``nonfinite`` overflow,
    a NaN becoming the quiet NaN of its sign) gives ``x`` back bit for bit, whatever the inputs
    (D511): ``x`` is

    * the widening of a ``round -> bf16 (nonfinite)`` (rounding is idempotent: a finite result
      is a bf16 value, an infinity stays, a NaN is already the quiet NaN of its sign);
    * ``neg`` / ``abs`` of such a value (a sign change of a bf16 value or of a quiet NaN);
    * ``max`` / ``min`` of operands each such a value or the widening of any bf16 value (the
      result is one of the operands, or for a NaN operand the positive quiet NaN);
    * a ``select`` between two such values, or an f32 constant that is a bf16 value.

    ``defs`` maps an SSA name to its defining instruction; ``dtype_of`` gives an SSA value's
    dtype. The bf16 renderers spell such a round as a truncation of the f32 bits.
    ``tests/compiler/test_round_identity.py`` checks every rule on all 65,536 bf16 codes."""

    def d(v: str) -> Instr | None:
        return defs.get(v)

    def rounded(v: str) -> bool:
        i = d(v)
        if isinstance(i, Widen) and i.to == "f32" and dtype_of(i.x) == "bf16":
            r = d(i.x)
            return isinstance(r, Round) and r.to == "bf16" and r.overflow == "nonfinite" \
                and dtype_of(r.x) == "f32"
        if isinstance(i, UnOp) and i.kind in ("neg", "abs"):
            return rounded(i.x)
        if isinstance(i, BinOp) and i.kind in ("max", "min"):
            return any_bf16(i.a) and any_bf16(i.b)
        if isinstance(i, Select):
            return rounded(i.a) and rounded(i.b)
        if isinstance(i, Const) and i.dtype == "f32" and isinstance(i.value, float | int) \
                and not isinstance(i.value, bool):
            v32 = np.float32(i.value)  # a bf16 value: its low 16 bits are 0 (not a NaN)
            return not np.isnan(v32) and int(v32.view(np.uint32)) & 0xFFFF == 0
        return False

    def any_bf16(v: str) -> bool:
        i = d(v)
        return rounded(v) or (isinstance(i, Widen) and i.to == "f32" and
                              dtype_of(i.x) == "bf16")

    return dtype_of(x) == "f32" and rounded(x)


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


# the verifier and the printer are their own modules (D440); re-exported here, after every name
# they import from this module is defined
from tilefoundry.compiler.kir_print import to_text  # noqa: E402
from tilefoundry.compiler.kir_verify import (  # noqa: E402
    _Checker,  # noqa: F401  (fusion.py's non-strict probe)
    _step_io,  # noqa: F401  (fusion.py)
    kernel_types,
    verify,
)
