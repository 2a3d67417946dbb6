"""Lowering: an elaborated, canonical HIR Function (concrete shapes) to a kernel-IR Program.

One registry keyed by op class (``LOWERINGS``; the rules live in ``lower_nn.py`` and
``lower_tensor.py``); ``NOT_LOWERED`` lists the ops without a rule and why (tests check that the
two cover ``ALL_OPS``). Each HIR op becomes its own kernel(s)
here — fusion (``compiler/fusion.py``) merges them afterwards — except the ops that need no
code: Reshape and an unsharded Reshard are views (buffer aliases), Constants / Zeros are
constant buffers, Tuple / TupleGetItem are bookkeeping.

The numerics follow the reference evaluator op by op (ARCHITECTURE.md, "Numeric contracts"):

* low-precision float arithmetic is ``widen -> f32 op -> round`` per HIR op (bf16 ``a + b*c`` is
  two roundings, fused or not); f32 arithmetic is the f32 op; integers wrap in their dtype;
* transcendentals and the activations (Sigmoid, Tanh, Gelu, Silu) are ``Math`` instructions on
  the operand dtype (the ULP contract; the interpreter reproduces the reference's correctly
  rounded value);
* Reduce widens low-precision floats to an f32 accumulator, carries its policy into the kernel
  IR, divides by ``f32(n)`` for mean and rounds once; a fiber longer than the tile budget runs a
  ``TileLoop`` whose carried accumulator seeds the next tile (fold order kept);
* MatMul is a ``Dot`` over K with an f32 (integers: i64) accumulator in K order, K tiled by a
  ``TileLoop`` when long, seeded with +0 (the reference's ``mma(a, b, zeros)``, D200), rounded
  once;
* SoftMax, RMSNorm and LayerNorm are *wide* kernels: the reference computes them in float64 from
  the widened inputs and rounds once, and so do they (f64 temporaries, f64 row reductions, one
  ``round f64 -> dtype``); their contract is the ULP budget, which the f64 summation order cannot
  approach. They lower to several kernels (row statistics, then the elementwise pass) that
  fusion merges into one when a row fits a tile.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tilefoundry.compiler import kir
from tilefoundry.compiler.errors import LoweringError, NotSupportedError
from tilefoundry.compiler.kir import (
    Buffer,
    HostLoop,
    Kernel,
    Program,
    TileLoop,
    c_strides,
    root_of,
)
from tilefoundry.compiler.schedule import TileConfig, choose_block, dot_axis, prev_pow2
from tilefoundry.errors import RunTimeCheckError
from tilefoundry.limits import check_value_size
from tilefoundry.semantics.formats import dtype_of
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GridRegionExpr,
    Tuple,
    TupleGetItem,
    Var,
    run_dag,
)
from tilefoundry.semantics.ops import CacheUpdate, Gather, InsertSlice, Local, RoPE, Sort
from tilefoundry.semantics.run_time_checks import (
    cache_bounds_problem,
    slice_window_problem,
    sort_nan_problem,
    topk_nan_problem,
)
from tilefoundry.semantics.types import TensorType

__all__ = ["LOWERINGS", "NOT_LOWERED", "RunCheck", "RunChecks", "lower", "lower_checked"]

LowerFn = Callable[["_Lowerer", Call, list], Any]
LOWERINGS: dict[type, LowerFn] = {}

#: ops without a lowering rule, and why (the backend leaves them out of its capabilities)
NOT_LOWERED: dict[type, str] = {
    Local: "per-device views need mesh simulation",
}


def register(*op_classes: type) -> Callable[[LowerFn], LowerFn]:
    """Register ``fn`` as the lowering of each op class; a second registration of a class is a
    LoweringError (it used to replace the first silently), as ``register_eval`` refuses."""
    def deco(fn: LowerFn) -> LowerFn:
        for c in op_classes:
            if c in LOWERINGS and LOWERINGS[c] is not fn:
                raise LoweringError(f"register: {c.__name__} already lowers through "
                                    f"{LOWERINGS[c].__name__}; remove one registration")
            LOWERINGS[c] = fn
        return fn

    return deco


# =============================================================================================
# the kernel builder
# =============================================================================================
class KB:
    """Builds one kernel body; tracks which axes each value spans (for masks)."""

    def __init__(self, lw: _Lowerer, hint: str, domain: tuple[int, ...]):
        self.lw = lw
        self.hint = hint
        self.domain = tuple(int(n) for n in domain)
        self.root: list = []
        self.stack: list[list] = [self.root]
        self.full: dict[str, frozenset] = {}
        self.n = 0
        self.loop_blocks: dict[int, int] = {}

    # -- plumbing -------------------------------------------------------------------------
    def name(self) -> str:
        self.n += 1
        return f"%{self.n - 1}"

    def emit(self, ins: kir.Instr, full: frozenset = frozenset()) -> str:
        self.stack[-1].append(ins)
        out = getattr(ins, "out", None)
        if out is not None:
            self.full[out] = frozenset(d for d in full if self.domain[d] > 1)
        return out

    def f(self, *names: str | None) -> frozenset:
        out: frozenset = frozenset()
        for n in names:
            if n is not None:
                out |= self.full[n]
        return out

    # -- values ---------------------------------------------------------------------------
    def const(self, value: Any, dtype: str) -> str:
        if dtype == "bool":
            value = bool(value)
        elif kir.is_int(dtype):
            value = int(value)
        else:
            value = float(value)
        return self.emit(kir.Const(self.name(), value, dtype))

    def coord(self, axis: int) -> str:
        return self.emit(kir.Coord(self.name(), axis), frozenset({axis}))

    def edge(self, axes: Any) -> str | None:
        axes = tuple(sorted({d for d in axes if self.domain[d] > 1}))
        if not axes:
            return None
        return self.emit(kir.EdgeMask(self.name(), axes), frozenset(axes))

    def and_masks(self, a: str | None, b: str | None) -> str | None:
        if a is None or b is None:
            return a or b
        return self.binop("and", a, b)

    def load(self, buf: Buffer, strides: Sequence[int], offset: int = 0,
             index: Sequence[tuple[str, int]] = (), mask: str | None = None,
             other: Any = 0) -> str:
        strides = tuple(0 if self.domain[d] <= 1 else int(s) for d, s in enumerate(strides))
        full = frozenset(d for d, s in enumerate(strides) if s) | self.f(*(n for n, _ in index))
        m = self.and_masks(self.edge(full), mask)
        if m is None:
            other = 0
        return self.emit(kir.Load(self.name(), buf.name, strides, int(offset), tuple(index), m,
                                  _other(other, buf.dtype)), full | self.f(m))

    def store(self, buf: Buffer, strides: Sequence[int], value: str, offset: int = 0,
              index: Sequence[tuple[str, int]] = (), mask: str | None = None) -> None:
        strides = tuple(0 if self.domain[d] <= 1 else int(s) for d, s in enumerate(strides))
        full = frozenset(d for d, s in enumerate(strides) if s) | self.f(*(n for n, _ in index))
        m = self.and_masks(self.edge(full), mask)
        self.emit(kir.Store(buf.name, strides, value, int(offset), tuple(index), m))

    def widen(self, x: str, frm: str, to: str = "f32") -> str:
        if frm == to or (to == "f32" and frm == "f64"):
            return x
        return self.emit(kir.Widen(self.name(), x, to), self.f(x))

    def round(self, x: str, frm: str, to: str, overflow: str = "nonfinite") -> str:
        if frm == to:
            return x
        return self.emit(kir.Round(self.name(), x, to, overflow), self.f(x))

    def cast(self, x: str, to: str, overflow: str = "nonfinite",
             rounding: str = "nearest") -> str:
        return self.emit(kir.Cast(self.name(), x, to, overflow, rounding), self.f(x))

    def binop(self, kind: str, a: str, b: str) -> str:
        return self.emit(kir.BinOp(self.name(), kind, a, b), self.f(a, b))

    def unop(self, kind: str, x: str) -> str:
        return self.emit(kir.UnOp(self.name(), kind, x), self.f(x))

    def math(self, fn: str, x: str, within: str | None = None) -> str:
        return self.emit(kir.Math(self.name(), fn, x, within), self.f(x))

    def broadcast(self, x: str, axes: Any) -> str:
        """``x`` spanning ``axes`` too (a loop's carried seed takes the result's tile)."""
        axes = tuple(sorted({d for d in axes if self.domain[d] > 1} - self.full[x]))
        if not axes:
            return x
        return self.emit(kir.Broadcast(self.name(), x, axes), self.f(x) | set(axes))

    def select(self, c: str, a: str, b: str) -> str:
        return self.emit(kir.Select(self.name(), c, a, b), self.f(c, a, b))

    def reduce(self, x: str, axes: Sequence[int], kind: str, policy: str,
               mask: str | None = None, init: str | None = None) -> str:
        axes = tuple(sorted(axes))
        return self.emit(kir.Reduce(self.name(), x, axes, kind, policy, mask, init),
                         self.f(x) - set(axes))

    def dot(self, a: str, b: str, axis: int, mask: str | None, init: str | None,
            reassociate: bool) -> str:
        return self.emit(kir.Dot(self.name(), a, b, axis, mask, init, reassociate),
                         self.f(a, b) - {axis})

    # -- loops ----------------------------------------------------------------------------
    def loop(self, axis: int, block: int, inits: Sequence[str], body: Callable[..., list],
             reverse: bool = False) -> list[str]:
        """``body(*carried) -> yields`` inside a TileLoop over ``axis``."""
        self.loop_blocks[axis] = block
        carried = [self.name() for _ in inits]
        for c, i in zip(carried, inits, strict=True):
            self.full[c] = self.full[i]
        self.stack.append([])
        yields = [self.broadcast(y, self.full[c]) for y, c in zip(body(*carried), carried,
                                                                   strict=True)]
        inner = self.stack.pop()
        outs = [self.name() for _ in inits]
        for o, i in zip(outs, inits, strict=True):
            self.full[o] = self.full[i]
        self.stack[-1].append(TileLoop(tuple(outs), axis, tuple(carried), tuple(inits),
                                       tuple(inner), tuple(yields), reverse))
        return outs

    def finish(self, single: Sequence[int] = ()) -> Kernel:
        block = choose_block(self.domain, single, self.loop_blocks, self.lw.cfg,
                             dot_axis(self.stack[0]))
        if block is None:
            raise LoweringError(f"{self.hint}: the unsplit axes {sorted(single)} of domain "
                                f"{self.domain} do not fit a tile")
        k = Kernel(self.lw.kernel_name(self.hint), self.domain, block, tuple(self.root),
                   tuple(sorted(self.loop_blocks)))
        self.lw.steps[-1].append(k)
        return k


def _other(v: Any, dtype: str) -> Any:
    if dtype == "bool":
        return bool(v)
    if kir.is_int(dtype):
        return int(v)
    return float(v)


# =============================================================================================
# run-time checks (tilefoundry.errors.RUN_TIME_CHECKS)
# =============================================================================================
@dataclass(frozen=True)
class RunCheck:
    """One run-time check of the spec on the values of one op's operands.

    ``kind`` is ``"range"`` (Gather indices / RoPE pos_ids within ``[0, bounds[0])``; ``axis``
    is the gathered axis, ``what`` the operand's name), ``"cache"`` (CacheUpdate ``cur_pos``,
    ``s`` against ``bounds = (new.len, cache.len)``) or ``"window"`` (InsertSlice offsets against
    ``bounds = (update extents..., dst extents...)``). ``operands`` are the buffers holding the
    checked values. With ``probe`` None they are inputs or constants and the executable checks
    them on the host before any kernel runs; otherwise a kernel computes them and the check
    kernel emitted before the op's own kernel records the operand values of every failing lane
    in ``probe = (flag buffer, value buffer)`` (program outputs, so fusion keeps them), which the
    host reads after the launch."""

    check: str
    op: str
    kind: str
    operands: tuple[str, ...]
    bounds: tuple[int, ...]
    what: str = ""
    axis: int = 0
    probe: tuple[str, str] | None = None
    shape: tuple[int, ...] = ()  # range: the checked operand's shape (positions name it)
    #: host checks: per operand, ``(input root, element offset, shape)`` (read from the input's
    #: flat storage; fusion may drop an alias buffer) or the constant's values
    sources: tuple = ()

    def host_values(self, storage: Any) -> list[np.ndarray]:
        """The operands' values of a host check, from the run's flat storage by buffer name."""
        out = []
        for src in self.sources:
            if isinstance(src, np.ndarray):
                out.append(src)
            else:
                root, off, shape = src
                out.append(storage[root][off:off + math.prod(shape)].reshape(shape))
        return out

    def verify(self, values: Sequence[np.ndarray], flags: np.ndarray | None = None) -> None:
        """Raise ``RunTimeCheckError`` when ``values`` (one array per operand; or, for a probed
        check, the recorded value buffer) fail the check. ``flags`` (probed checks) marks the
        recorded lanes; the others hold no value."""
        if self.kind == "nan":
            if flags is not None:
                bad = np.asarray(flags).reshape(self.shape) != 0
            else:
                from tilefoundry.semantics.evaluator.tile_sort import nan_mask

                bad = nan_mask(np.asarray(values[0]).reshape(self.shape))
            first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else ()
            msg = topk_nan_problem(self.what, int(bad.sum()), first) \
                if self.check == "topk_nan" else sort_nan_problem(int(bad.sum()), first)
            if msg is not None:
                raise RunTimeCheckError(f"{self.op}: {msg}", self.check)
            return
        if self.kind == "range":
            v = np.asarray(values[0]).astype(np.int64).reshape(self.shape)
            n = self.bounds[0]
            bad = (v < 0) | (v >= n)
            if flags is not None:
                bad &= np.asarray(flags).reshape(v.shape) != 0
            if not bad.any():
                return
            pos = tuple(int(j) for j in np.argwhere(bad)[0])
            val = int(v[pos])
            if self.op == "RoPE":
                raise RunTimeCheckError(
                    f"RoPE: pos_ids[{pos[0] if pos else 0}] = {val} is outside the cache "
                    f"positions [0, {n}) ({int(bad.sum())} of {v.size} positions out of range)",
                    self.check)
            raise RunTimeCheckError(f"{self.op}: index {val} at {self.what}{list(pos)} is "
                                    f"outside [0, {n}) on axis {self.axis}", self.check)
        vals = [int(np.asarray(x).reshape(-1)[0]) for x in values]
        if flags is not None:
            if not np.any(flags):
                return
            vals = [int(x) for x in np.asarray(values[0]).reshape(-1)]
        if self.kind == "cache":
            cur, s = vals
            nlen, length = self.bounds
            msg = cache_bounds_problem(cur, s, nlen, length)
            if msg is None:
                return
            raise RunTimeCheckError(f"CacheUpdate: {msg}", self.check)
        r = len(vals)
        for a, o in enumerate(vals):
            msg = slice_window_problem(a, o, self.bounds[a], self.bounds[r + a])
            if msg is not None:
                raise RunTimeCheckError(f"InsertSlice: {msg}", self.check)


@dataclass(frozen=True)
class RunChecks:
    """The run-time checks of a lowered program, in program order: ``host`` on inputs and
    constants (before the launch), ``probed`` on computed values (after the launch). When
    ``probed`` is not empty the program's outputs are ``(result, probe buffers...)`` and an
    executable returns ``outputs[0]``."""

    host: tuple[RunCheck, ...] = ()
    probed: tuple[RunCheck, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.host or self.probed)


def _scalar_strides(b: Buffer) -> list[int]:
    return [0] * max(len(b.shape), 1)


def plan_checks(lw: _Lowerer, node: Call, args: list[Buffer]) -> None:
    """The run-time checks of ``node`` (Gather, RoPE, CacheUpdate, InsertSlice), recorded in
    ``lw.checks``; for computed operands (or inside a host loop, where the op may run any
    number of times) a check kernel is emitted here, before the op's own kernels."""
    op = node.op
    if isinstance(op, Gather) and op.fill is None:  # a fill defines out-of-range reads (D388)
        x, idx = args
        axis = op.axis % len(x.shape)
        spec = RunCheck("index_range", "Gather", "range", (idx.name,), (x.shape[axis],),
                        "indices", axis, shape=idx.shape)
    elif isinstance(op, RoPE):
        cos, pos = args[2], args[4]
        spec = RunCheck("index_range", "RoPE", "range", (pos.name,), (cos.shape[0],),
                        "pos_ids", shape=pos.shape)
    elif isinstance(op, CacheUpdate):
        cache, cur, s, new = args
        spec = RunCheck("cache_bounds", "CacheUpdate", "cache", (cur.name, s.name),
                        (new.shape[1], cache.shape[1]))
    elif isinstance(op, InsertSlice):
        dst, upd, *offs = args
        spec = RunCheck("slice_window", "InsertSlice", "window", tuple(o.name for o in offs),
                        (*upd.shape, *dst.shape))
    elif isinstance(op, Sort) and op.nan == "error" and kir.is_float(args[0].dtype):
        (x,) = args
        if x.size == 0:
            return
        spec = RunCheck("sort_nan", "Sort", "nan", (x.name,), (), "x", shape=x.shape)
    else:
        from tilefoundry.compiler.lower_tile_topk import topk_nan_checks  # (imports us)

        topk_nan_checks(lw, node, args)  # a Top-K merge with nan='error': x, the seed's values
        return
    plan_check(lw, spec)


def plan_check(lw: _Lowerer, spec: RunCheck) -> None:
    """Record ``spec`` as a host check (its operands are inputs or constants) or emit its check
    kernel, whose flag and value buffers the host reads after the launch."""
    if not spec.operands:  # InsertSlice of rank 0: no offsets, nothing to check
        return
    ops = [lw.buffers[n] for n in spec.operands]
    roots = [root_of(b.name, lw.buffers) for b in ops]
    if len(lw.steps) == 1 and all(r.kind in ("input", "const") for r in roots):
        srcs = []
        for b, r in zip(ops, roots, strict=True):
            off = b.offset if b.kind == "alias" else 0
            if r.kind == "const":
                flat = np.ascontiguousarray(r.data).reshape(-1)
                srcs.append(flat[off:off + b.size].reshape(b.shape).copy())
            else:
                srcs.append((r.name, off, b.shape))
        lw.checks.append(replace(spec, sources=tuple(srcs)))
        return
    if spec.kind in ("range", "nan"):
        (b,) = ops
        if b.size == 0:
            return
        dom = b.shape or (1,)
        flag, vals = lw.temp("i64", dom, "chkf"), lw.temp("i64", dom, "chkv")
        kb = KB(lw, f"check_{spec.op.lower()}", dom)
        if spec.kind == "nan":  # the flag marks the NaN lanes; no value to record
            w = kb.widen(kb.load(b, b.strides or [0]), b.dtype)
            bad = kb.binop("ne", w, w)
            v = kb.broadcast(kb.const(0, "i64"), range(len(dom)))
        else:
            v = index_value(kb, kb.load(b, b.strides or [0]), b.dtype)
            bad = kb.binop("or", kb.binop("lt", v, kb.const(0, "i64")),
                           kb.binop("ge", v, kb.const(spec.bounds[0], "i64")))
        kb.store(vals, vals.strides, v, mask=bad)
        kb.store(flag, flag.strides, kb.broadcast(kb.const(1, "i64"), range(len(dom))),
                 mask=bad)
    else:
        flag, vals = lw.temp("i64", (1,), "chkf"), lw.temp("i64", (len(ops),), "chkv")
        kb = KB(lw, f"check_{spec.op.lower()}", (1,))
        vs = [scalar_index(kb, b) for b in ops]
        zero = kb.const(0, "i64")
        if spec.kind == "cache":
            (cur, s), (nlen, length) = vs, spec.bounds
            conds = [kb.binop("lt", cur, zero), kb.binop("lt", s, kb.const(1, "i64")),
                     kb.binop("gt", s, kb.const(nlen, "i64")),
                     kb.binop("gt", kb.binop("add", cur, s), kb.const(length, "i64"))]
        else:
            r = len(vs)
            conds = []
            for a, o in enumerate(vs):
                u, d = spec.bounds[a], spec.bounds[r + a]
                conds += [kb.binop("lt", o, zero),
                          kb.binop("gt", kb.binop("add", o, kb.const(u, "i64")),
                                   kb.const(d, "i64"))]
        bad = conds[0]
        for c in conds[1:]:
            bad = kb.binop("or", bad, c)
        for j, v in enumerate(vs):
            kb.store(vals, [0], v, j, mask=bad)
        kb.store(flag, [0], kb.const(1, "i64"), mask=bad)
    kb.finish()
    lw.probes.append(replace(spec, probe=(flag.name, vals.name)))


# =============================================================================================
# access maps
# =============================================================================================
def bcast_strides(buf: Buffer, domain: tuple[int, ...]) -> tuple[int, ...]:
    """Strides reading ``buf`` broadcast (numpy rules, right-aligned) over ``domain``."""
    r, rb = len(domain), len(buf.shape)
    if rb > r:
        raise LoweringError(f"buffer {buf.name} {buf.shape} does not broadcast to {domain}")
    out = [0] * r
    for j in range(rb):
        d = j + r - rb
        n = buf.shape[j]
        if n == domain[d] and n > 1:
            out[d] = buf.strides[j]
        elif n != 1 and n != domain[d]:
            raise LoweringError(f"buffer {buf.name} {buf.shape} does not broadcast to {domain}")
    return tuple(out)


def _dt(t: Any) -> str:
    return t.dtype.value


# =============================================================================================
# the lowerer
# =============================================================================================
class _Lowerer:
    def __init__(self, fn: Function, cfg: TileConfig):
        self.fn = fn
        self.cfg = cfg
        self.buffers: dict[str, Buffer] = {}
        self.steps: list[list] = [[]]
        self.names: set[str] = set()
        self.counters: dict[str, int] = {}
        self.checks: list[RunCheck] = []  # on inputs / constants: run on the host
        self.probes: list[RunCheck] = []  # on computed values: a check kernel records failures

    # -- names and buffers ------------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        while True:
            i = self.counters.get(prefix, 0)
            self.counters[prefix] = i + 1
            n = f"{prefix}{i}"
            if n not in self.names:
                self.names.add(n)
                return n

    def kernel_name(self, hint: str) -> str:
        i = self.counters.get("#kernel", 0)
        self.counters["#kernel"] = i + 1
        return f"k{i}_{hint}"

    def add(self, b: Buffer) -> Buffer:
        self.buffers[b.name] = b
        self.names.add(b.name)
        return b

    def temp(self, dtype: str, shape: Sequence[int], prefix: str = "t") -> Buffer:
        shape = tuple(int(n) for n in shape)
        check_value_size(shape, kir.numpy_dtype(dtype).itemsize,
                         lambda: f"compile: a {dtype} buffer of the lowered program")
        return self.add(Buffer(self.fresh(prefix), dtype, shape, c_strides(shape), "temp"))

    def const_buffer(self, value: np.ndarray) -> Buffer:
        v = np.array(value, copy=True, order="C")
        dt = dtype_of(v).value
        return self.add(Buffer(self.fresh("c"), dt, tuple(v.shape), c_strides(v.shape),
                               "const", data=v))

    def alias(self, src: Buffer, shape: Sequence[int]) -> Buffer:
        root = src if src.kind != "alias" else self.buffers[src.base]
        shape = tuple(int(n) for n in shape)
        if src.strides != c_strides(src.shape) and src.size:
            raise LoweringError(f"reshape of the non-contiguous buffer {src.name}")
        return self.add(Buffer(self.fresh("v"), src.dtype, shape, c_strides(shape), "alias",
                               base=root.name, offset=src.offset if src.kind == "alias" else 0))

    # -- the walk ---------------------------------------------------------------------------
    def run(self) -> Program:
        values: dict[int, Any] = {}
        inputs = []
        for p in self.fn.params:
            t = p.checked_type
            name = p.name if p.name not in self.names else self.fresh(p.name + "_")
            self.names.add(name)
            self.add(Buffer(name, _dt(t), tuple(t.shape), c_strides(tuple(t.shape)), "input"))
            values[id(p)] = self.buffers[name]
            inputs.append(name)
        out = _names(self.expr(self.fn.body, values))
        if self.probes:  # the probe buffers are outputs: read after the launch, kept by fusion
            out = (out, *(n for c in self.probes for n in c.probe))
        return Program(self.fn.name, tuple(self.buffers.values()), tuple(inputs),
                       out, tuple(self.steps[0]))

    def expr(self, root: Expr, values: dict[int, Any]) -> Any:
        return run_dag(root, values, lambda node: self.node(node, values))

    def node(self, node: Expr, values: dict[int, Any]) -> Any:
        if isinstance(node, Var):
            raise LoweringError(f"Var {node.name} is not bound (a free variable)")
        if isinstance(node, Constant):
            return self.const_buffer(node.value)
        if isinstance(node, Tuple):
            return tuple(values[id(f)] for f in node.fields)
        if isinstance(node, TupleGetItem):
            return values[id(node.tuple_value)][node.index]
        if isinstance(node, GridRegionExpr):
            return self.loop(node, values)
        if isinstance(node, Call):
            if isinstance(node.op, Function):
                raise LoweringError("a Call to a Function survived elaboration")
            rule = LOWERINGS.get(type(node.op))
            if rule is None:
                raise NotSupportedError(type(node.op).__name__,
                                        NOT_LOWERED.get(type(node.op), "no lowering rule"))
            args = [values[id(a)] for a in node.args]
            from tilefoundry.compiler.lower_tile_topk import state_operand  # (imports us)

            for i, a in enumerate(args):
                if not isinstance(a, Buffer) and not state_operand(node.op, i, a):
                    raise NotSupportedError(type(node.op).__name__,
                                            f"operand {i} is a tuple value")
            plan_checks(self, node, args)
            return rule(self, node, args)
        raise LoweringError(f"cannot lower a {type(node).__name__} node")

    def loop(self, node: GridRegionExpr, values: dict[int, Any]) -> Any:
        inits = [values[id(a)] for a in node.init_args]
        if not all(isinstance(b, Buffer) for b in inits):
            raise NotSupportedError("GridRegionExpr", "a carried tuple value")
        it = node.induction_var.checked_type
        var = self.temp(_dt(it), (), "i")
        carried = [self.temp(b.dtype, b.shape, "carry") for b in inits]
        inner = dict(values)
        inner[id(node.induction_var)] = var
        for c, b in zip(node.carried_args, carried, strict=True):
            inner[id(c)] = b
        self.steps.append([])
        yields = [self.expr(y, inner) for y in node.yield_values]
        body = self.steps.pop()
        if not all(isinstance(y, Buffer) for y in yields):
            raise NotSupportedError("GridRegionExpr", "a yielded tuple value")
        self.steps[-1].append(HostLoop(self.fresh("loop"), var.name, int(node.start),
                                       int(node.extent), int(node.step),
                                       tuple(c.name for c in carried),
                                       tuple(b.name for b in inits), tuple(body),
                                       tuple(y.name for y in yields)))
        return carried[0] if len(carried) == 1 else tuple(carried)

    # -- kernel templates -------------------------------------------------------------------
    def elementwise(self, hint: str, out_dtype: str, shape: Sequence[int], args: list[Buffer],
                    compute: Callable[..., str]) -> Buffer:
        out = self.temp(out_dtype, shape)
        if out.size == 0:
            return out
        kb = KB(self, hint, out.shape)
        vals = [kb.load(a, bcast_strides(a, out.shape)) for a in args]
        kb.store(out, bcast_strides(out, out.shape), compute(kb, *vals))
        kb.finish()
        return out

    def reduction(self, hint: str, x: Buffer, axes: Sequence[int], kind: str, policy: str,
                  acc: str, out_dtype: str, pre: Callable[[KB, str], str] | None = None,
                  post: Callable[[KB, str], str] | None = None, keepdim: bool = True) -> Buffer:
        """One reduce kernel over ``x``'s axes ``axes`` accumulating in ``acc``."""
        axes = tuple(sorted(a % max(len(x.shape), 1) for a in axes))
        kept = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
        shape = kept if keepdim else tuple(n for d, n in enumerate(x.shape) if d not in axes)
        out = self.temp(out_dtype, shape)
        if out.size == 0:
            return out
        n = math.prod(x.shape[a] for a in axes)
        if n == 0:
            raise LoweringError(f"{hint}: reduces zero elements here")  # callers handle it
        dom = tuple(x.shape)
        out_strides = tuple(0 if d in axes else s for d, s in
                            zip(range(len(dom)), _spread(out.strides, dom, axes, keepdim),
                                strict=True))
        x_strides = bcast_strides(x, dom)

        def produce(kb: KB) -> tuple[str, str | None]:
            v = kb.load(x, x_strides)
            m = kb.edge(kb.f(v))
            return (pre(kb, v) if pre is not None else v), m

        self.reduce_kernel(hint, dom, axes, kind, policy, acc, produce, post, out, out_strides)
        return out

    def reduce_kernel(self, hint: str, dom: tuple[int, ...], axes: tuple[int, ...], kind: str,
                      policy: str, acc: str, produce: Callable[[KB], tuple[str, str | None]],
                      post: Callable[[KB, str], str] | None, out: Buffer,
                      out_strides: Sequence[int],
                      seed_fn: Callable[[KB], str] | None = None) -> None:
        """A kernel over ``dom`` reducing ``produce(kb)`` (value, lane mask) over ``axes`` (from
        ``seed_fn(kb)``, an incoming state, when given — the tile family's seeded reductions); the
        innermost reduced axes that fit ``max_row`` stay whole, the outer ones run nested
        ``tile_loop``s carrying the accumulator (one lane at a time but the innermost, so the
        lanes keep their lexicographic order)."""
        kb = KB(self, hint, dom)
        red = [a for a in axes if dom[a] > 1]
        inner_prod = 1
        loop_axes: list[int] = []
        for a in reversed(red):  # the innermost reduce axes that fit stay whole
            if inner_prod * kir.next_pow2(dom[a]) <= self.cfg.max_row:
                inner_prod *= kir.next_pow2(dom[a])
            else:
                loop_axes = [b for b in red if b <= a]
                break

        def tile(init: str | None) -> str:
            v, m = produce(kb)
            return kb.reduce(v, axes, kind, policy, m, init)

        if not loop_axes:
            r = tile(seed_fn(kb) if seed_fn is not None else None)
        else:
            init = seed_fn(kb) if seed_fn is not None else kb.const(_seed(kind, acc), acc)
            seed = kb.broadcast(init,
                                [d for d in range(len(dom)) if d not in axes])
            reverse = policy == "fold_right"

            def nest(i: int, acc_v: str) -> str:
                a = loop_axes[i]
                blk = 1 if i < len(loop_axes) - 1 else \
                    min(kir.next_pow2(dom[a]), prev_pow2(self.cfg.max_row // inner_prod))
                if i == len(loop_axes) - 1:
                    return kb.loop(a, blk, [acc_v], lambda c: [tile(c)], reverse)[0]
                return kb.loop(a, blk, [acc_v], lambda c: [nest(i + 1, c)], reverse)[0]

            r = nest(0, seed)
        if post is not None:
            r = post(kb, r)
        kb.store(out, out_strides, r)
        kb.finish(single=[a for a in red if a not in loop_axes])


def _spread(strides: tuple[int, ...], dom: tuple[int, ...], axes: tuple[int, ...],
            keepdim: bool) -> tuple[int, ...]:
    """Output strides placed on the domain axes (reduced axes get 0)."""
    if keepdim:
        return strides
    it = iter(strides)
    return tuple(0 if d in axes else next(it) for d in range(len(dom)))


def _seed(kind: str, acc: str) -> Any:
    """The exact identity a carried accumulator starts from (-0 for sums: IEEE's exact one)."""
    if acc == "bool":
        return kind == "min"
    if kir.is_int(acc):
        ii = np.iinfo(kir.numpy_dtype(acc))
        return {"sum": 0, "abs_max": 0, "max": int(ii.min), "min": int(ii.max)}[kind]
    return {"sum": -0.0, "max": -math.inf, "min": math.inf, "abs_max": -math.inf}[kind]


def _names(v: Any) -> Any:
    if isinstance(v, tuple):
        return tuple(_names(x) for x in v)
    return v.name


def lower(fn: Function, cfg: TileConfig | None = None) -> Program:
    """The ``lower`` pass: one kernel (or a few) per HIR op, no fusion."""
    return lower_checked(fn, cfg)[0]


def lower_checked(fn: Function, cfg: TileConfig | None = None) -> tuple[Program, RunChecks]:
    """``lower`` and the program's run-time checks (``RunChecks``: an executable runs them;
    a program with probed checks returns ``(result, probe buffers...)``)."""
    lw = _Lowerer(fn, cfg or TileConfig())
    program = lw.run()
    return program, RunChecks(tuple(lw.checks), tuple(lw.probes))


# =============================================================================================
# helpers of the op rules (lower_nn.py, lower_tensor.py)
# =============================================================================================
def out_type(node: Call) -> TensorType:
    t = node.checked_type
    if not isinstance(t, TensorType):
        raise LoweringError(f"{type(node.op).__name__}: result type {t} is not a tensor")
    return t


def lowp_apply(kb: KB, dt: str, fn: Callable[..., str], *xs: str) -> str:
    """widen -> f32 op -> round (f32: just the op)."""
    wide = [kb.widen(x, dt) for x in xs]
    return kb.round(fn(*wide), "f32", dt)


def wide64(kb: KB, v: str, dt: str) -> str:
    return kb.widen(v, dt, "f64")


def two_sum(kb: KB, a: str, b: str) -> tuple[str, str]:
    """Knuth's TwoSum in f64: s + e == a + b exactly."""
    s = kb.binop("add", a, b)
    bb = kb.binop("sub", s, a)
    e = kb.binop("add", kb.binop("sub", a, kb.binop("sub", s, bb)), kb.binop("sub", b, bb))
    return s, e


def index_value(kb: KB, v: str, dtype: str) -> str:
    return v if dtype == "i64" else kb.cast(v, "i64")


def scalar_index(kb: KB, b: Buffer) -> str:
    v = kb.load(b, [0] * len(kb.domain))
    return v if b.dtype == "i64" else kb.cast(v, "i64")


def check_registry() -> list[str]:
    """Ops of ``ALL_OPS`` with neither a lowering rule nor a NOT_LOWERED reason."""
    from tilefoundry.semantics.ops import ALL_OPS

    return sorted(o.__name__ for o in ALL_OPS if o not in LOWERINGS and o not in NOT_LOWERED)


# the op rules register themselves into LOWERINGS (imported last: they use the names above)
from tilefoundry.compiler import (  # noqa: E402, F401
    lower_nn,
    lower_tensor,
    lower_tile_mma,
    lower_tile_reduce,
    lower_tile_scan,
    lower_tile_scan_flags,
    lower_tile_select,
    lower_tile_sort,
)
