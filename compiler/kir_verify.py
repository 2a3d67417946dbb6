"""The kernel IR's verifier (split out of ``compiler/kir.py``, D440): ``verify`` checks a program
or kernel and raises ``KernelIRError`` naming the kernel and the instruction; ``kernel_types``
is the type derivation the printer and the passes use. ``compiler/kir.py`` re-exports both.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from tilefoundry.compiler.errors import KernelIRError
from tilefoundry.compiler.kir import (
    BINARY_KINDS,
    BUFFER_KINDS,
    COMPARISONS,
    COMPENSATED,
    COMPUTE_FLOATS,
    DTYPES,
    LIBM64,
    LOGICAL,
    MATH_FNS,
    REDUCE_KINDS,
    STORAGE_DTYPES,
    UNARY_KINDS,
    BinOp,
    Bitcast,
    Broadcast,
    Buffer,
    Cast,
    Const,
    Coord,
    Dot,
    EdgeMask,
    HostLoop,
    Instr,
    Kernel,
    Load,
    Math,
    Program,
    Reduce,
    Round,
    Select,
    Store,
    Tile,
    TileLoop,
    UnOp,
    Widen,
    buffer_span,
    is_float,
    is_int,
    iter_instrs,
    numpy_dtype,
    root_of,
)
from tilefoundry.semantics.dtypes import OVERFLOW_MODES, ROUNDING_MODES
from tilefoundry.semantics.reductions import POLICIES


# =============================================================================================
# the verifier (also the type derivation the printer and the passes use)
# =============================================================================================
def _fmt_instr(ins: Instr) -> str:
    from tilefoundry.compiler.kir_print import _instr_text  # the printer imports this module

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
