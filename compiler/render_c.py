"""Render kernel-IR programs to C (the SIMD C backend's renderer; minimal: elementwise only).

``render(program) -> str`` emits one exported function ``void tf_program(void **roots)``
taking one pointer per root buffer (``root_names(program)`` gives the order). Each kernel is a
nest of plain loops over the padded iteration space of its grid (every program instance times
its tile, exactly the lanes the kernel-IR interpreter computes), the innermost marked
``#pragma omp simd``; an SSA value is one scalar per lane. The numerics follow
``compiler/interp.py`` bit for bit: widen / round / cast through ``tf_numerics.h`` (a cast's NaN
keeps its sign, as ``semantics.dtypes.cast`` does), f32 add / sub / mul / div as the IEEE
operations (built without fast-math or contraction), min / max NaN-propagating (the positive
quiet NaN) with -0 < +0, neg / abs / sqrt as ``-x`` / ``fabsf`` / ``sqrtf``. Masked loads read
``other``; unmasked loads clamp the offset into the buffer as the interpreter does; stores
write only masked-in lanes inside the buffer.

Anything else (host loops, tile loops, reductions, dots, selects, math functions, integer or
f64 arithmetic, comparisons, indexed loads / stores, a kernel that loads and stores the same
storage) raises ``NotSupportedError`` naming the instruction: never a silent fallback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from tilefoundry.compiler import kir
from tilefoundry.compiler.errors import NotSupportedError
from tilefoundry.compiler.kir import Kernel, Program, root_of

__all__ = ["ENTRY", "render", "root_names"]

ENTRY = "tf_program"

_CTYPE = {"f32": "float", "f64": "double", "bf16": "uint16_t", "f16": "uint16_t",
          "fp8e4m3": "uint8_t", "fp8e5m2": "uint8_t", "f8e8m0": "uint8_t", "bool": "uint8_t",
          "i8": "int8_t", "u8": "uint8_t", "i32": "int32_t", "i64": "int64_t"}
_WIDEN = {"bf16": "tf_bf16_to_f32", "f16": "tf_f16_to_f32", "fp8e4m3": "tf_fp8e4m3_to_f32",
          "fp8e5m2": "tf_fp8e5m2_to_f32", "f8e8m0": "tf_f8e8m0_to_f32"}
_ROUND_DST = ("f32", "bf16", "f16", "fp8e4m3", "fp8e5m2")
_RND = {"nearest": "TF_RN", "up": "TF_RU", "down": "TF_RD"}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}

_PRELUDE = """\
#include <math.h>
#include <stdint.h>
#include "tf_numerics.h"

static inline float tf__fmin(float a, float b)
{
    const float tie = signbit(a) ? a : b;
    const float r = a < b ? a : (b < a ? b : tie);
    return (isnan(a) || isnan(b)) ? tf_f32_from_bits(TF_F32_QNAN) : r;
}

static inline float tf__fmax(float a, float b)
{
    const float tie = signbit(a) ? b : a;
    const float r = a > b ? a : (b > a ? b : tie);
    return (isnan(a) || isnan(b)) ? tf_f32_from_bits(TF_F32_QNAN) : r;
}
"""


def _unsupported(ins: object, why: str) -> NotSupportedError:
    return NotSupportedError(f"simd: {type(ins).__name__}", why)


def root_names(program: Program) -> list[str]:
    """The root buffers, in the order ``tf_program`` takes their pointers."""
    return [b.name for b in program.buffers if b.kind != "alias"]


def _root_size(b: kir.Buffer) -> int:
    """Elements of a root's flat storage, as the interpreter allocates it."""
    if b.kind == "input":
        return b.size
    if b.kind == "const":
        return int(np.asarray(b.data).size)
    return b.span


def _literal(value: object, dt: str) -> str:
    if dt == "f32":
        return f"tf_f32_from_bits(0x{int(np.float32(value).view(np.uint32)):08X}u)"
    if dt == "f64":
        return f"tf_f64_from_bits(0x{int(np.float64(value).view(np.uint64)):016X}ull)"
    if dt == "bool":
        return "1" if value else "0"
    if kir.is_float(dt):  # a narrow float: its bit pattern
        npdt = kir.numpy_dtype(dt)
        bits = np.asarray(np.asarray(value).astype(npdt)).view(f"u{npdt.itemsize}")
        return f"(({_CTYPE[dt]}){int(bits)}u)"
    return f"(({_CTYPE[dt]}){int(value)}ll)"


class _KernelC:
    def __init__(self, k: Kernel, bm: Mapping[str, kir.Buffer], roots: Mapping[str, int]):
        self.k, self.bm, self.roots = k, bm, roots
        self.types = kir.kernel_types(k, bm)
        self.names: dict[str, str] = {}
        self.lines: list[str] = []

    def v(self, name: str) -> str:
        c = self.names.get(name)
        if c is None:
            c = self.names[name] = f"v{len(self.names)}_{re.sub(r'[^0-9A-Za-z_]', '', name)}"
        return c

    def dt(self, name: str) -> str:
        return self.types[name].dtype

    def decl(self, out: str, expr: str) -> None:
        self.lines.append(f"const {_CTYPE[self.dt(out)]} {self.v(out)} = {expr};")

    def ptr(self, buffer: str) -> tuple[str, int, int]:
        root = root_of(buffer, self.bm)
        return f"p{self.roots[root.name]}", _root_size(root), self.bm[buffer].offset

    def offset(self, ins: kir.Load | kir.Store) -> str:
        if ins.index:
            raise _unsupported(ins, "indexed (data-dependent) addressing")
        _, _, base = self.ptr(ins.buffer)
        terms = [str(ins.offset + base)]
        terms += [f"c{d} * {s}ll" for d, s in enumerate(ins.strides) if s]
        return " + ".join(terms)

    def render(self) -> str:
        k = self.k
        if k.loop_axes:
            raise NotSupportedError("simd: Kernel", f"{k.name}: tile-loop axes")
        loaded = {root_of(i.buffer, self.bm).name for i in k.body if isinstance(i, kir.Load)}
        stored = {root_of(i.buffer, self.bm).name for i in k.body if isinstance(i, kir.Store)}
        if loaded & stored:
            raise NotSupportedError("simd: Kernel", f"{k.name}: loads and stores the same storage")
        for ins in k.body:
            fn = getattr(self, "i_" + type(ins).__name__, None)
            if fn is None:
                raise _unsupported(ins, "no C rendering")
            fn(ins)
        r = k.rank
        head: list[str] = [f"/* kernel {k.name} domain {list(k.domain)} block {list(k.block)} */",
                           "{"]
        ind = "    "
        for d in range(r):
            n = 1 if k.domain[d] <= 1 else -(-k.domain[d] // k.block[d]) * k.block[d]
            if d == r - 1:
                head.append(f"{ind}#pragma omp simd")
            head.append(f"{ind}for (int64_t c{d} = 0; c{d} < {n}ll; ++c{d}) {{")
            ind += "    "
        body = [ind + ln for ln in self.lines]
        tail = ["    " * (r - d) + "}" for d in range(r)] + ["}"]
        return "\n".join(head + body + tail)

    # -- instructions ---------------------------------------------------------------------
    def i_Const(self, ins: kir.Const) -> None:
        self.decl(ins.out, _literal(ins.value, ins.dtype))

    def i_Coord(self, ins: kir.Coord) -> None:
        self.decl(ins.out, f"c{ins.axis}")

    def i_EdgeMask(self, ins: kir.EdgeMask) -> None:
        conds = [f"(c{d} < {self.k.domain[d]}ll)" for d in ins.axes if self.k.domain[d] > 1]
        self.decl(ins.out, " && ".join(conds) if conds else "1")

    def i_Load(self, ins: kir.Load) -> None:
        p, size, _ = self.ptr(ins.buffer)
        off = self.offset(ins)
        if size == 0:
            val = _literal(ins.other, self.bm[ins.buffer].dtype)
            self.decl(ins.out, val)
            return
        o = f"o_{self.v(ins.out)}"
        self.lines.append(f"int64_t {o} = {off};")
        self.lines.append(f"{o} = {o} < 0 ? 0 : ({o} > {size - 1}ll ? {size - 1}ll : {o});")
        ct = _CTYPE[self.bm[ins.buffer].dtype]
        read = f"((const {ct} *){p})[{o}]"
        if ins.mask:
            other = _literal(ins.other, self.bm[ins.buffer].dtype)
            read = f"{self.v(ins.mask)} ? {read} : {other}"
        self.decl(ins.out, read)

    def i_Store(self, ins: kir.Store) -> None:
        p, size, _ = self.ptr(ins.buffer)
        off = self.offset(ins)
        ct = _CTYPE[self.bm[ins.buffer].dtype]
        if self.dt(ins.value) != self.bm[ins.buffer].dtype:
            raise _unsupported(ins, "value dtype differs from the buffer's")
        cond = f"(o >= 0 && o < {size}ll)"
        if ins.mask:
            cond = f"{self.v(ins.mask)} && {cond}"
        self.lines.append(f"{{ const int64_t o = {off}; if ({cond}) (({ct} *){p})[o] = "
                          f"{self.v(ins.value)}; }}")

    def i_Broadcast(self, ins: kir.Broadcast) -> None:
        self.decl(ins.out, self.v(ins.x))

    def widened(self, name: str, ins: object) -> str:
        src = self.dt(name)
        if src == "f32":
            return self.v(name)
        if src in _WIDEN:
            return f"{_WIDEN[src]}({self.v(name)})"
        raise _unsupported(ins, f"widen from {src}")

    def i_Widen(self, ins: kir.Widen) -> None:
        w = self.widened(ins.x, ins)
        self.decl(ins.out, f"(double){w}" if ins.to == "f64" else w)

    def rounded(self, w: str, to: str, overflow: str, rounding: str, ins: object) -> str:
        sat = "TF_SATURATE" if overflow == "saturate" else "TF_NONFINITE"
        if to in _ROUND_DST:
            return f"tf_f32_to_{to}({w}, {sat}, 0)"
        if to == "f8e8m0":
            return f"tf_f32_to_f8e8m0({w}, {sat}, {_RND[rounding]})"
        raise _unsupported(ins, f"conversion to {to}")

    def i_Round(self, ins: kir.Round) -> None:
        if self.dt(ins.x) != "f32":
            raise _unsupported(ins, f"round from {self.dt(ins.x)}")
        self.decl(ins.out, self.rounded(self.v(ins.x), ins.to, ins.overflow, "nearest", ins))

    def i_Cast(self, ins: kir.Cast) -> None:
        w = self.widened(ins.x, ins)
        self.decl(ins.out, self.rounded(w, ins.to, ins.overflow, ins.rounding, ins))

    def i_BinOp(self, ins: kir.BinOp) -> None:
        if self.dt(ins.a) != "f32" or self.dt(ins.b) != "f32":
            raise _unsupported(ins, f"{ins.kind} on {self.dt(ins.a)}")
        a, b = self.v(ins.a), self.v(ins.b)
        if ins.kind in _ARITH:
            self.decl(ins.out, f"{a} {_ARITH[ins.kind]} {b}")
        elif ins.kind in ("min", "max"):
            self.decl(ins.out, f"tf__f{ins.kind}({a}, {b})")
        else:
            raise _unsupported(ins, f"binary {ins.kind}")

    def i_UnOp(self, ins: kir.UnOp) -> None:
        if self.dt(ins.x) != "f32":
            raise _unsupported(ins, f"{ins.kind} on {self.dt(ins.x)}")
        x = self.v(ins.x)
        expr = {"neg": f"-{x}", "abs": f"fabsf({x})", "sqrt": f"sqrtf({x})"}.get(ins.kind)
        if expr is None:
            raise _unsupported(ins, f"unary {ins.kind}")
        self.decl(ins.out, expr)


def render(program: Program) -> str:
    """C source of ``program`` (raises ``NotSupportedError`` for what it cannot render)."""
    bm = program.buffer_map()
    names = root_names(program)
    roots = {n: i for i, n in enumerate(names)}
    parts = [_PRELUDE, f"/* program {program.name} */",
             f"void {ENTRY}(void **roots)", "{"]
    for i, n in enumerate(names):
        parts.append(f"    char *const p{i} = (char *)roots[{i}]; /* {n} */")
    parts.append("    (void)roots;")
    for step in program.steps:
        if not isinstance(step, Kernel):
            raise NotSupportedError("simd: HostLoop", "host loops are not rendered")
        if step.instances == 0 or any(n == 0 for n in step.domain):
            continue
        parts.append(_KernelC(step, bm, roots).render())
    parts.append("}")
    return "\n".join(parts) + "\n"
