"""The kernel-IR interpreter: runs a ``Program`` with numpy, vectorized over tiles.

Every program instance of a kernel runs at once: an SSA value is a numpy array of shape
``(instances, *tile)`` (a leading 1 where the value does not depend on the instance; 1 on the
axes the tile does not span), so a kernel costs one numpy operation per instruction — and one
per tile step of a ``TileLoop`` or lane of a ``Dot`` / fold. Loads gather through the element
offsets (masked lanes read ``other``), stores scatter (masked lanes write nothing).

The numerics are the reference evaluator's own helpers, never a re-implementation
(ARCHITECTURE.md, "Numeric contracts"): ``Widen`` / ``Round`` / ``Cast`` are
``semantics.dtypes`` (``widen_to_f32``, ``cast``; f64 → dtype is ``round_f64_once``, the one
rounding of the evaluator's float64 paths); f32 arithmetic uses the evaluator's tables
(``FLOAT_BINARY``, ``FLOAT_UNARY``: NaN-propagating min / max with -0 < +0, relu(-0) = -0);
``Math`` is the evaluator's implementation of the op (the correctly rounded value the ULP
contract is measured from); reductions over f32 and integers use ``semantics.reductions``
(``pairwise`` — the reference's balanced tree for the tree policies —, ``fold``,
``reduce_fibers``); ``Dot`` is the reference K-order fold. Where the kernel IR is exact the
interpreter is therefore bit-exact with the evaluator; where it follows a ULP contract (the
wide f64 row kernels) it differs only by the f64 summation order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import HostLoop, Kernel, Program, root_of
from tilefoundry.compiler.kir_math import LIBM64, MATH_OPS
from tilefoundry.compiler.lower import RunChecks
from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.dtypes import DType, cast, widen_to_f32
from tilefoundry.semantics.evaluator.math import (
    COMPARE,
    FLOAT_BINARY,
    FLOAT_UNARY,
    INT_UNARY,
    f64_to_f32_odd,
    round_f64_once,
)
from tilefoundry.semantics.evaluator.nn import dd_row_sum
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx
from tilefoundry.semantics.ops.math import BinaryKind, UnaryKind
from tilefoundry.semantics.reductions import (
    extreme_index,
    fold,
    pairwise,
    reduce_fibers,
)

__all__ = ["Interpreter", "run_program"]

_F32, _F64 = np.float32, np.float64
_UNARY_KIND = {"neg": UnaryKind.NEG, "abs": UnaryKind.ABS, "ceil": UnaryKind.CEIL,
               "round": UnaryKind.ROUND, "relu": UnaryKind.RELU, "square": UnaryKind.SQUARE,
               "sqrt": UnaryKind.SQRT}


# ---------------------------------------------------------------------------------------------
# scalar helpers for f64 (the reference's f32 helpers are used for f32)
# ---------------------------------------------------------------------------------------------
def _fminmax(a: np.ndarray, b: np.ndarray, largest: bool) -> np.ndarray:
    """NaN-propagating min / max ordering -0 < +0, in the operands' dtype."""
    if largest:
        tie = np.where(np.signbit(a), b, a)
        r = np.where(a > b, a, np.where(b > a, b, tie))
    else:
        tie = np.where(np.signbit(a), a, b)
        r = np.where(a < b, a, np.where(b < a, b, tie))
    return np.where(np.isnan(a) | np.isnan(b), a.dtype.type(np.nan), r).astype(a.dtype)


def _extreme64(v: np.ndarray, largest: bool) -> np.ndarray:
    """max / min over the last axis of f64 fibers: NaN propagates, -0 < +0."""
    r = np.max(v, axis=-1) if largest else np.min(v, axis=-1)
    zero = r == 0
    if zero.any():
        pos = np.any((v == 0) & ~np.signbit(v), axis=-1)
        neg = np.any((v == 0) & np.signbit(v), axis=-1)
        want_neg = ~pos if largest else neg
        r = np.where(zero, np.where(want_neg, -0.0, 0.0), r)
    return r


def reduce_identity(kind: str, dt: str) -> Any:
    if dt == "bool":
        return kind == "min"
    if kir.is_int(dt):
        ii = np.iinfo(kir.numpy_dtype(dt))
        return {"sum": 0, "abs_max": 0, "max": ii.min, "min": ii.max, "prod": 1}[kind]
    return {"sum": 0.0, "max": -np.inf, "min": np.inf, "abs_max": 0.0, "sum_hi": 0.0,
            "sum_lo": 0.0}[kind]


def _reduce_lanes(f: np.ndarray, dt: str, kind: str, policy: str,
                  init: np.ndarray | None) -> np.ndarray:
    """Reduce fibers ``f`` (rows, lanes) in lane order; ``init`` seeds them (rows,)."""
    npdt = kir.numpy_dtype(dt)
    rows, n = f.shape
    if n == 0:
        if init is not None:
            return init
        return np.full(rows, reduce_identity(kind, dt), npdt)
    with np.errstate(all="ignore"):
        if kind in ("sum_hi", "sum_lo"):
            hi, lo = dd_row_sum(f)
            return (hi if kind == "sum_hi" else lo)[:, 0]
        if kind == "sum":
            if policy in ("unordered_tree", "ordered_tree"):
                # the tree member the reference picks: balanced pairwise for f32 and integers
                # (reductions.reduce), numpy's pairwise order for the float64 paths (nn)
                # (numpy's unrolled pairwise sum permutes lanes: unordered_tree only)
                s = np.sum(f, axis=-1) if dt == "f64" and policy == "unordered_tree" else \
                    pairwise(f, np.add)
                if init is not None:
                    s = np.add(init, s)
            else:
                s = fold(f, np.add, policy == "fold_left", init)
            return np.asarray(s).astype(npdt)
        if dt == "f64":
            v = np.abs(f) if kind == "abs_max" else f
            r = _extreme64(v, kind != "min")
            if init is not None:
                r = _fminmax(init, r, kind != "min")
            return r
        if dt == "f32":
            v = np.abs(f) if kind == "abs_max" else f
            idx = extreme_index(v, kind != "min")
            r = np.take_along_axis(v, idx[:, None], -1)[:, 0]
            if init is not None:
                r = _fminmax(init, r, kind != "min")
            return r
        if kind == "prod":  # the wrapping integer product (numpy integer products wrap)
            r = np.multiply.reduce(f, axis=-1, dtype=npdt)
            return (r if init is None else np.multiply(np.asarray(init, npdt), r)).astype(npdt)
        r = np.asarray(reduce_fibers(f, DType(dt), kind, policy)).astype(npdt)
        if init is not None:
            if kind == "abs_max" and dt != "bool":  # magnitudes: |INT_MIN| wraps to INT_MIN
                u = np.dtype(f"u{npdt.itemsize}")
                init = np.asarray(init, npdt)
                r = np.where(init.view(u) >= r.view(u), init, r)
            else:
                r = np.maximum(init, r) if kind == "max" else np.minimum(init, r)
        return r.astype(npdt)


# ---------------------------------------------------------------------------------------------
# the interpreter
# ---------------------------------------------------------------------------------------------
class Interpreter:
    """Runs one Program; ``run(inputs)`` returns an array or a (nested) tuple of arrays.

    ``checks`` (``lower.RunChecks``, set by the pipeline) are the program's run-time checks:
    those on inputs and constants run on the host, vectorized, before the first kernel; those
    on computed values are read after the launch from the probe buffers their check kernels
    filled. A failure raises ``RunTimeCheckError`` and the outputs are never returned."""

    def __init__(self, program: Program, checks: RunChecks | None = None):
        self.p = program
        self.checks = checks or RunChecks()
        self.bm = program.buffer_map()
        self.roots = {b.name: root_of(b.name, self.bm) for b in program.buffers}
        # the per-run storage plan, computed once
        bm = self.bm
        self._inputs = [(n, bm[n].shape, kir.numpy_dtype(bm[n].dtype)) for n in program.inputs]
        self._consts = {b.name: np.ascontiguousarray(b.data).reshape(-1)
                        for b in program.buffers if b.kind == "const"}
        self._temps = [(b.name, b.span, kir.numpy_dtype(b.dtype)) for b in program.buffers
                       if b.kind == "temp"]

    # -- storage ------------------------------------------------------------------------------
    def _view(self, st: Mapping[str, np.ndarray], name: str) -> np.ndarray:
        """The buffer as an ndarray view of its root's storage (through an unsigned-integer
        view: ``as_strided`` cannot describe the ml_dtypes element types)."""
        b = self.bm[name]
        flat = st[self.roots[name].name]
        if b.size == 0:
            return np.zeros(b.shape, flat.dtype)
        bits = flat.view(np.dtype(f"u{flat.itemsize}"))
        v = np.lib.stride_tricks.as_strided(bits[b.offset:], b.shape,
                                            tuple(s * flat.itemsize for s in b.strides))
        return v.view(flat.dtype)

    def read(self, st: Mapping[str, np.ndarray], name: str) -> np.ndarray:
        return np.array(self._view(st, name), copy=True, order="C")

    def write(self, st: Mapping[str, np.ndarray], name: str, value: np.ndarray) -> None:
        b = self.bm[name]
        if b.size:
            flat = st[self.roots[name].name]
            bits = flat.view(np.dtype(f"u{flat.itemsize}"))
            v = np.lib.stride_tricks.as_strided(bits[b.offset:], b.shape,
                                                tuple(s * flat.itemsize for s in b.strides),
                                                writeable=True)
            v[...] = np.asarray(value, flat.dtype).view(bits.dtype)

    def storage(self, inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        """Flat storage of every root buffer for one run: the inputs (checked; not copied when
        contiguous — no step writes an input), the consts, zeroed temporaries."""
        p = self.p
        if len(inputs) != len(p.inputs):
            raise InvalidArgumentError(f"program {p.name} takes {len(p.inputs)} inputs "
                                       f"({', '.join(p.inputs)}), got {len(inputs)}")
        st: dict[str, np.ndarray] = dict(self._consts)
        for (name, shape, npdt), x in zip(self._inputs, inputs, strict=True):
            x = np.asarray(x)
            if x.shape != shape or x.dtype != npdt:
                b = self.bm[name]
                raise InvalidArgumentError(f"input {name}: expected {b.dtype}{list(b.shape)}, "
                                           f"got {x.dtype}{list(x.shape)}")
            st[name] = np.ascontiguousarray(x).reshape(-1)
        for name, span, npdt in self._temps:
            st[name] = np.zeros(span, npdt)
        return st

    def run(self, inputs: Sequence[np.ndarray]) -> Any:
        st = self.storage(inputs)
        checks = self.checks
        for c in checks.host:
            c.verify(c.host_values(st))
        self.steps(self.p.steps, st)
        if not checks.probed:
            return self._outputs(self.p.outputs, st)
        for c in checks.probed:
            flag, vals = c.probe
            c.verify([self._view(st, vals)], self._view(st, flag))
        return self._outputs(self.p.outputs[0], st)

    def _outputs(self, o: Any, st: Mapping[str, np.ndarray]) -> Any:
        # a method, not a recursive closure (a self-referencing closure is a reference cycle
        # that keeps every buffer of the call alive until the cyclic GC runs)
        if isinstance(o, tuple):
            return tuple(self._outputs(x, st) for x in o)
        return self.read(st, o)

    def steps(self, seq: Sequence[Any], st: dict[str, np.ndarray]) -> None:
        for s in seq:
            if isinstance(s, Kernel):
                self.launch(s, st)
            else:
                self.host_loop(s, st)

    def launch(self, k: Kernel, st: dict[str, np.ndarray]) -> None:
        """Run one kernel on the storage ``st`` (a compiled backend's executable overrides this
        with its own launch; host loops and the step walk stay the interpreter's)."""
        KernelRun(self, k, st).run()

    def host_loop(self, s: HostLoop, st: dict[str, np.ndarray]) -> None:
        vals = [self.read(st, i) for i in s.inits]
        for c, v in zip(s.carried, vals, strict=True):
            self.write(st, c, v)
        vdt = kir.numpy_dtype(self.bm[s.var].dtype)
        for i in range(s.start, s.stop, s.step):
            self.write(st, s.var, np.asarray(i, vdt))
            self.steps(s.body, st)
            # a buffer carried to itself (an in-place write, compiler/inplace.py) copies nothing
            moved = [(c, y) for c, y in zip(s.carried, s.yields, strict=True) if c != y]
            vals = [self.read(st, y) for _, y in moved]
            for (c, _), v in zip(moved, vals, strict=True):
                self.write(st, c, v)


class KernelRun:
    def __init__(self, it: Interpreter, k: Kernel, st: dict[str, np.ndarray]):
        self.it, self.k, self.st = it, k, st
        self.r = k.rank
        self.values: dict[str, np.ndarray] = {}
        self.coords: dict[int, np.ndarray] = {}

    def shaped(self, a: np.ndarray, axis: int) -> np.ndarray:
        """A per-axis vector placed on tile axis ``axis`` (position 1 + axis)."""
        shape = [1] * (self.r + 1)
        shape[1 + axis] = a.shape[-1]
        if a.ndim == 2:
            shape[0] = a.shape[0]
        return a.reshape(shape)

    def run(self) -> None:
        k = self.k
        if k.instances == 0 or any(n == 0 for n in k.domain):
            return
        grid = k.grid
        pids = np.unravel_index(np.arange(k.instances), grid) if grid else ()
        for d in range(self.r):
            if d in k.loop_axes:
                continue
            b = k.block[d]
            if k.domain[d] <= 1:
                self.coords[d] = np.zeros((1,) * (self.r + 1), np.int64)
            else:
                c = pids[d][:, None].astype(np.int64) * b + np.arange(b, dtype=np.int64)[None]
                self.coords[d] = self.shaped(c, d)
        with np.errstate(all="ignore"):
            self.block(k.body)

    def block(self, body: Sequence[kir.Instr]) -> None:
        v = self.values
        for ins in body:
            if isinstance(ins, kir.TileLoop):
                self.tile_loop(ins)
                continue
            v[ins.out if hasattr(ins, "out") else "#store"] = \
                getattr(self, "i_" + type(ins).__name__)(ins)

    def tile_loop(self, ins: kir.TileLoop) -> None:
        d, b = ins.axis, self.k.block[ins.axis]
        tiles = -(-self.k.domain[d] // b)
        cur = [self.values[i] for i in ins.inits]
        order = range(tiles - 1, -1, -1) if ins.reverse else range(tiles)
        for t in order:
            c = t * b + np.arange(b, dtype=np.int64)
            self.coords[d] = self.shaped(c, d) if self.k.domain[d] > 1 else \
                np.zeros((1,) * (self.r + 1), np.int64)
            for name, val in zip(ins.carried, cur, strict=True):
                self.values[name] = val
            self.block(ins.body)
            cur = [self.values[y] for y in ins.yields]
        for name, val in zip(ins.outs, cur, strict=True):
            self.values[name] = val
        self.coords.pop(d, None)

    # -- instructions -----------------------------------------------------------------------
    def i_Const(self, ins: kir.Const) -> np.ndarray:
        return np.full((1,) * (self.r + 1), ins.value, kir.numpy_dtype(ins.dtype))

    def i_Coord(self, ins: kir.Coord) -> np.ndarray:
        return self.coords[ins.axis]

    def i_EdgeMask(self, ins: kir.EdgeMask) -> np.ndarray:
        m = np.ones((1,) * (self.r + 1), bool)
        for d in ins.axes:
            if self.k.domain[d] > 1:
                m = m & (self.coords[d] < self.k.domain[d])
        return m

    def offsets(self, ins: kir.Load | kir.Store) -> np.ndarray:
        off = np.full((1,) * (self.r + 1), ins.offset + self.it.bm[ins.buffer].offset, np.int64)
        for d, s in enumerate(ins.strides):
            if s:
                off = off + self.coords[d] * s
        for name, s in ins.index:
            off = off + self.values[name].astype(np.int64) * s
        return off

    def i_Load(self, ins: kir.Load) -> np.ndarray:
        flat = self.st[self.it.roots[ins.buffer].name]
        off = self.offsets(ins)
        m = self.values[ins.mask] if ins.mask else None
        if m is not None:
            off, m = np.broadcast_arrays(off, m)
            off = np.where(m, off, 0)
        safe = np.clip(off, 0, max(flat.size - 1, 0))
        vals = flat[safe] if flat.size else np.zeros(off.shape, flat.dtype)
        if m is not None:
            other = np.asarray(ins.other).astype(flat.dtype) if kir.is_float(
                self.it.bm[ins.buffer].dtype) else np.asarray(ins.other, flat.dtype)
            vals = np.where(m, vals, other)
        return vals

    def i_Store(self, ins: kir.Store) -> None:
        flat = self.st[self.it.roots[ins.buffer].name]
        off = self.offsets(ins)
        val = self.values[ins.value]
        parts = [off, val] + ([self.values[ins.mask]] if ins.mask else [])
        parts = np.broadcast_arrays(*parts)
        off, val = parts[0].reshape(-1), parts[1].reshape(-1)
        keep = (off >= 0) & (off < flat.size)
        if ins.mask:
            keep &= parts[2].reshape(-1)
        flat[off[keep]] = val[keep]
        return None

    def i_Broadcast(self, ins: kir.Broadcast) -> np.ndarray:
        x = self.values[ins.x]
        shape = list(x.shape)
        for d in ins.axes:
            if self.k.domain[d] > 1:
                shape[1 + d] = self.k.block[d]
        return np.broadcast_to(x, tuple(shape))

    def i_Widen(self, ins: kir.Widen) -> np.ndarray:
        x = self.values[ins.x]
        w = x if x.dtype == np.float32 else widen_to_f32(x)
        return w.astype(_F64) if ins.to == "f64" else w

    def i_Round(self, ins: kir.Round) -> np.ndarray:
        x = self.values[ins.x]
        if x.dtype == _F32:
            return cast(x, ins.to, overflow=ins.overflow)
        if ins.to == "f32":
            r = x.astype(_F32)
            return cast(r, "f32", overflow=ins.overflow) if ins.overflow != "nonfinite" else r
        if ins.overflow == "nonfinite":
            return round_f64_once(x, DType(ins.to))
        r = f64_to_f32_odd(x)
        r = np.where(np.isnan(r), _F32(np.nan), r).astype(_F32)
        return cast(r, ins.to, overflow=ins.overflow)

    def i_Cast(self, ins: kir.Cast) -> np.ndarray:
        return cast(self.values[ins.x], ins.to, overflow=ins.overflow, rounding=ins.rounding)

    def i_BinOp(self, ins: kir.BinOp) -> np.ndarray:
        a, b = self.values[ins.a], self.values[ins.b]
        k = ins.kind
        if k in kir.COMPARISONS:
            return np.asarray(COMPARE[BinaryKind(k)](a, b), bool)
        if k == "and":
            return np.logical_and(a, b)
        if k == "or":
            return np.logical_or(a, b)
        if k == "xor":
            return np.logical_xor(a, b)
        if a.dtype == _F32:
            return np.asarray(FLOAT_BINARY[BinaryKind(k)](a, b), _F32)
        if a.dtype == _F64:
            if k in ("min", "max"):
                return _fminmax(*np.broadcast_arrays(a, b), k == "max")
            return {"add": np.add, "sub": np.subtract, "mul": np.multiply,
                    "div": np.divide}[k](a, b)
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "min": np.minimum,
              "max": np.maximum, "floordiv": np.floor_divide, "mod": np.mod}[k]
        return np.asarray(fn(a, b)).astype(a.dtype, copy=False)

    def i_UnOp(self, ins: kir.UnOp) -> np.ndarray:
        x = self.values[ins.x]
        if ins.kind == "not":
            return np.logical_not(x)
        kind = _UNARY_KIND[ins.kind]
        if x.dtype == _F32:
            return np.asarray(FLOAT_UNARY[kind](x), _F32)
        if x.dtype == _F64:
            if ins.kind == "relu":
                return np.where(x < 0, 0.0, x)
            return np.asarray(FLOAT_UNARY[kind](x), _F64)
        return np.asarray(INT_UNARY[kind](x)).astype(x.dtype, copy=False)

    def i_Select(self, ins: kir.Select) -> np.ndarray:
        a = self.values[ins.a]
        return np.where(self.values[ins.cond], a, self.values[ins.b]).astype(a.dtype)

    def i_Bitcast(self, ins: kir.Bitcast) -> np.ndarray:
        return np.ascontiguousarray(self.values[ins.x]).view(kir.numpy_dtype(ins.to))

    def i_Math(self, ins: kir.Math) -> np.ndarray:
        x = self.values[ins.x]
        if x.dtype == _F64:
            return LIBM64[ins.fn](x)
        op = MATH_OPS[ins.fn]  # the reference evaluator of the op the name stands for (D437)
        return np.asarray(EVALUATORS[type(op)](EvalCtx(op, None, None), (x,)))

    def i_Reduce(self, ins: kir.Reduce) -> np.ndarray:
        x = self.values[ins.x]
        m = self.values[ins.mask] if ins.mask else None
        shape = np.broadcast_shapes(x.shape, m.shape) if m is not None else x.shape
        x = np.broadcast_to(x, shape)
        pos = [1 + a for a in ins.axes]
        keep = [i for i in range(len(shape)) if i not in pos]
        out_shape = tuple(1 if i in pos else n for i, n in enumerate(shape))
        lanes = math.prod(shape[i] for i in pos)
        f = np.transpose(x, keep + pos).reshape(-1, lanes)
        rows = f.shape[0]
        init = None
        if ins.init:
            init = np.broadcast_to(self.values[ins.init], out_shape).reshape(-1)
        dt = _kdtype(x.dtype)
        if m is None:
            r = _reduce_lanes(f, dt, ins.kind, ins.policy, init)
        else:
            valid = np.transpose(np.broadcast_to(m, shape), keep + pos).reshape(-1, lanes)
            r = np.empty(rows, x.dtype)
            pats, inv = np.unique(valid, axis=0, return_inverse=True)
            inv = inv.reshape(-1)
            for p_i, pat in enumerate(pats):
                sel = inv == p_i
                r[sel] = _reduce_lanes(f[sel][:, pat], dt, ins.kind, ins.policy,
                                       None if init is None else init[sel])
        return r.reshape(out_shape)

    def i_Dot(self, ins: kir.Dot) -> np.ndarray:
        a, b = self.values[ins.a], self.values[ins.b]
        ax = 1 + ins.axis
        n = max(a.shape[ax], b.shape[ax])
        m = self.values[ins.mask] if ins.mask else None
        s = self.values[ins.init] if ins.init else None
        started = None if s is None else np.ones(s.shape, bool)
        for j in range(n):
            aj = np.take(a, [min(j, a.shape[ax] - 1)], axis=ax)
            bj = np.take(b, [min(j, b.shape[ax] - 1)], axis=ax)
            p = aj * bj
            vj = np.take(m, [min(j, m.shape[ax] - 1)], axis=ax) if m is not None else True
            if s is None:
                s = np.where(vj, p, p.dtype.type(0))
                started = np.broadcast_to(vj, s.shape)
            else:
                s = np.where(vj, np.where(started, s + p, p), s)
                started = started | vj
        return np.asarray(s).astype(a.dtype, copy=False)


def _kdtype(npdt: np.dtype) -> str:
    if npdt == _F64:
        return "f64"
    from tilefoundry.semantics.formats import dtype_of

    return dtype_of(np.zeros(0, npdt)).value


def run_program(program: Program, inputs: Sequence[np.ndarray],
                checks: RunChecks | None = None) -> Any:
    """Run ``program`` on ``inputs`` (numpy arrays of the input buffers' dtypes and shapes),
    making its run-time ``checks`` (``lower.lower_checked``) when given."""
    return Interpreter(program, checks).run(inputs)

