"""Symbolic execution of a kernel-IR program: every output element as a Z3 term of the inputs.

It is the kernel-IR interpreter (``compiler/interp.py``) run on storage whose elements are Z3
terms: ``SymKernelRun`` subclasses the interpreter's ``KernelRun`` and keeps its walk of
program instances, tiles, ``tile_loop``\\ s, coordinates, edge masks, constants, offsets and
broadcasts (those stay concrete numpy arrays, computed by the interpreter's own code). An
instruction whose operands are all concrete is the interpreter's; one with a symbolic operand
builds terms with ``validate.encode`` (object arrays, one term per lane: a term is built per
element, there is no other way to build them). A load or store whose offset depends on data
(a gather by computed indices, a sort's store at each element's rank) is executed as the
interpreter executes it, per lane an ``If`` chain over the root buffer's positions that the
offset's interval can reach (``_gather`` / ``_scatter``: a load clips its offset into the
buffer, a store drops an offset outside it and a later lane overwrites an earlier one), up to
``MAX_SCATTER`` (lane, position) pairs. A dot's mask that depends on data is ``Unsupported``,
a reduction's only where ``i_Reduce`` has no neutral element to feed the masked-out lanes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import z3

from tilefoundry.compiler import kir
from tilefoundry.compiler.interp import Interpreter, KernelRun
from tilefoundry.compiler.kir import HostLoop, Kernel, Program
from tilefoundry.validate import encode as E
from tilefoundry.validate.encode import Unsupported

__all__ = ["SymProgram", "run_symbolic"]

_TREES = ("ordered_tree", "unordered_tree")


def _is_sym(a: np.ndarray) -> bool:
    return a.dtype == object


def _vmap(fn: Callable, *arrays: np.ndarray) -> np.ndarray:
    """``fn`` on each lane of broadcast object arrays (term construction)."""
    arrays = np.broadcast_arrays(*arrays)
    out = np.empty(arrays[0].shape, object)
    flat = [a.reshape(-1) for a in arrays]
    res = out.reshape(-1)
    for i in range(res.size):
        res[i] = fn(*(f[i] for f in flat))
    return out


@dataclass
class SymProgram:
    """What a symbolic run gives: ``outputs`` (name -> object array of terms, the buffer's
    shape), the input bit-vector variables per input, the abstractions used."""

    outputs: dict[str, np.ndarray]
    dtypes: dict[str, str]
    abstractions: set[str] = field(default_factory=set)


class _SymInterp(Interpreter):
    def __init__(self, program: Program, inputs: Mapping[str, np.ndarray],
                 abstractions: set[str]):
        super().__init__(program)
        self.sym_inputs = inputs
        self.abstractions = abstractions

    def _index(self, name: str) -> np.ndarray:
        b = self.bm[name]
        idx = np.full(b.shape, b.offset, np.int64)
        for d, (n, s) in enumerate(zip(b.shape, b.strides, strict=True)):
            shape = [1] * len(b.shape)
            shape[d] = n
            idx = idx + np.arange(n, dtype=np.int64).reshape(shape) * s
        return idx

    def sym_storage(self) -> dict[str, np.ndarray]:
        st: dict[str, np.ndarray] = {}
        for b in self.p.buffers:
            if b.kind == "input":
                st[b.name] = self.sym_inputs[b.name].reshape(-1).copy()
            elif b.kind == "const":
                data = np.ascontiguousarray(b.data).reshape(-1)
                st[b.name] = _vmap(lambda v, dt=b.dtype: E.const(v, dt), data.astype(object)) \
                    if data.size else np.empty(0, object)
            elif b.kind == "temp":
                st[b.name] = np.full(b.span, E.zero(b.dtype), object)
        return st

    def read(self, st: Mapping[str, np.ndarray], name: str) -> np.ndarray:
        idx = self._index(name)
        return st[self.roots[name].name][idx.reshape(-1)].reshape(idx.shape)

    def write(self, st: Mapping[str, np.ndarray], name: str, value: np.ndarray) -> None:
        b = self.bm[name]
        if b.size:
            v = np.asarray(value)
            if not _is_sym(v):
                v = _vmap(lambda e: E.const(e, b.dtype), v.astype(object))
            # flat on both sides: a 0-d object array assigned through a 0-d index would be
            # stored as an element itself
            st[self.roots[name].name][self._index(name).reshape(-1)] = \
                np.broadcast_to(v, b.shape).reshape(-1)

    def launch(self, k: Kernel, st: dict[str, np.ndarray]) -> None:
        SymKernelRun(self, k, st).run()

    def host_loop(self, s: HostLoop, st: dict[str, np.ndarray]) -> None:
        vals = [self.read(st, i) for i in s.inits]
        for c, v in zip(s.carried, vals, strict=True):
            self.write(st, c, v)
        for i in range(s.start, s.stop, s.step):
            self.write(st, s.var, np.asarray(E.const(i, self.bm[s.var].dtype), object))
            self.steps(s.body, st)
            vals = [self.read(st, y) for y in s.yields]
            for c, v in zip(s.carried, vals, strict=True):
                self.write(st, c, v)


class SymKernelRun(KernelRun):
    """The interpreter's kernel walk with symbolic data values (see the module docstring)."""

    it: _SymInterp

    def __init__(self, it: _SymInterp, k: Kernel, st: dict[str, np.ndarray]):
        super().__init__(it, k, st)
        self.types = kir.kernel_types(k, it.bm)

    def dt(self, name: str) -> str:
        return self.types[name].dtype

    def sym(self, name: str) -> np.ndarray:
        v = self.values[name]
        if _is_sym(v):
            return v
        dt = self.dt(name)
        return _vmap(lambda e: E.const(e, dt), np.asarray(v).astype(object))

    def concrete(self, name: str, what: str) -> np.ndarray:
        v = self.values[name]
        if not _is_sym(v):
            return v
        dt = self.dt(name)
        out = _vmap(lambda t: E.concrete_value(t, dt), v)
        if any(e is None for e in out.reshape(-1)):
            raise Unsupported(f"kernel {self.k.name}: {what} {name} depends on input data "
                              f"(a data-dependent {what} is outside the validated fragment)")
        return out.astype(bool if dt == "bool" else np.int64)

    def _all_concrete(self, ins: kir.Instr) -> bool:
        return not any(_is_sym(self.values[n]) for n in ins.operands())

    # -- memory ------------------------------------------------------------------------------
    def offsets(self, ins: kir.Load | kir.Store) -> np.ndarray:
        """The interpreter's int64 offsets; an index operand that depends on input data makes
        them an object array of 64-bit bit-vector terms (``_sym_offsets``)."""
        off = np.full((1,) * (self.r + 1), ins.offset + self.it.bm[ins.buffer].offset, np.int64)
        for d, s in enumerate(ins.strides):
            if s:
                off = off + self.coords[d] * s
        sym = []
        for name, s in ins.index:
            v = self.values[name]
            if _is_sym(v) and any(E.concrete_value(t, self.dt(name)) is None
                                  for t in v.reshape(-1)):
                sym.append((name, s))
            else:
                off = off + self.concrete(name, "index").astype(np.int64) * s
        return self._sym_offsets(off, sym) if sym else off

    def _sym_offsets(self, off: np.ndarray, sym: list[tuple[str, int]]) -> np.ndarray:
        """Offsets with data-dependent index operands: ``off + sum(index * stride)`` as 64-bit
        two's-complement terms (the interpreter's int64 arithmetic; a narrower integer index
        widens as ``astype(np.int64)`` does: sign- or zero-extended)."""
        parts = [off] + [self.sym(n) for n, _ in sym]
        parts = np.broadcast_arrays(*parts)
        out = np.empty(parts[0].shape, object)
        flat = [a.reshape(-1) for a in parts]
        res = out.reshape(-1)
        for i in range(res.size):
            # built without a simplification pass (a +0 / ·1 left out): the index term stays
            # the one the kernel computed, shared with its other uses (a mask of the same rank)
            t: Any = None
            for (name, s), col in zip(sym, flat[1:], strict=True):
                v = _to_i64(col[i], self.dt(name))
                v = v if s == 1 else v * z3.BitVecVal(s % (1 << 64), 64)
                t = v if t is None else t + v
            base = int(flat[0][i])
            res[i] = t if base == 0 else z3.BitVecVal(base % (1 << 64), 64) + t
        return out

    def _mask(self, name: str | None) -> np.ndarray | None:
        return None if name is None else self.values[name]

    def i_Load(self, ins: kir.Load) -> np.ndarray:
        flat = self.st[self.it.roots[ins.buffer].name]
        dt = self.it.bm[ins.buffer].dtype
        off = self.offsets(ins)
        m = self._mask(ins.mask)
        if _is_sym(off):
            return self._gather(ins, flat, dt, off, m)
        if m is not None:
            off, m = np.broadcast_arrays(off, m)
            if not _is_sym(m):
                off = np.where(m, off, 0)
        safe = np.clip(off, 0, max(flat.size - 1, 0))
        vals = flat[safe] if flat.size else np.full(off.shape, E.zero(dt), object)
        if m is not None:
            other = E.const(ins.other, dt)
            if _is_sym(m):
                vals = _vmap(lambda c, v: z3.If(c, v, other), m, vals)
            else:
                o = np.empty((), object)
                o[()] = other
                vals = np.where(m, vals, o)
        return vals

    def _gather(self, ins: kir.Load, flat: np.ndarray, dt: str, off: np.ndarray,
                m: np.ndarray | None) -> np.ndarray:
        """A load at data-dependent offsets, as the interpreter loads: the offset clipped into
        the root buffer (``np.clip(off, 0, size - 1)``, signed), then the element there; a
        masked-out lane is ``other``. Per lane an ``If`` chain over the root's positions."""
        if not flat.size:
            raise Unsupported(f"kernel {self.k.name}: a data-dependent load from an empty "
                              f"buffer {ins.buffer}")
        _check_span(self.k.name, off.size, flat.size)
        parts = np.broadcast_arrays(off, m) if m is not None else [off]
        offs = parts[0].reshape(-1)
        ms = parts[1].reshape(-1) if m is not None else None
        other = E.const(ins.other, dt) if m is not None else None
        out = np.empty(offs.size, object)
        last = flat.size - 1
        for i, o in enumerate(offs):
            v = flat[last]
            for p in range(last - 1, 0, -1):
                v = z3.If(o == p, flat[p], v)
            if last:
                v = z3.If(o <= 0, flat[0], v)  # signed: negative offsets clip to 0
            if ms is not None:
                c = ms[i]
                v = z3.If(c, v, other) if not isinstance(c, bool | np.bool_) else \
                    (v if c else other)
            out[i] = v
        return out.reshape(parts[0].shape)

    def i_Store(self, ins: kir.Store) -> None:
        flat = self.st[self.it.roots[ins.buffer].name]
        off = self.offsets(ins)
        val = self.sym(ins.value)
        parts = [off, val] + ([self.values[ins.mask]] if ins.mask else [])
        parts = np.broadcast_arrays(*parts)
        off, val = parts[0].reshape(-1), parts[1].reshape(-1)
        if _is_sym(off):
            return self._scatter(ins, flat, off, val,
                                 parts[2].reshape(-1) if ins.mask else None)
        keep = (off >= 0) & (off < flat.size)
        if ins.mask and _is_sym(parts[2]):
            m = parts[2].reshape(-1)
            for o, v, c in zip(off[keep], val[keep], m[keep], strict=True):
                flat[o] = z3.If(c, v, flat[o])
            return None
        if ins.mask:
            keep &= parts[2].reshape(-1)
        flat[off[keep]] = val[keep]
        return None

    def _scatter(self, ins: kir.Store, flat: np.ndarray, off: np.ndarray, val: np.ndarray,
                 mask: np.ndarray | None) -> None:
        """A store at data-dependent offsets, as the interpreter stores (``flat[off[keep]] =
        val[keep]``, keep: inside the root buffer and the mask): lanes in order, a later lane
        overwriting an earlier one; every position p of the root becomes ``If(keep and off ==
        p, value, previous)``. A lane whose offset is concrete writes its one position."""
        _check_span(self.k.name, off.size, flat.size)
        for i, (o, v) in enumerate(zip(off, val, strict=True)):
            c = True if mask is None else mask[i]
            if c is False or (isinstance(c, np.bool_) and not c):
                continue
            cond = None if isinstance(c, bool | np.bool_) else c
            if z3.is_bv_value(o):
                o = o.as_signed_long()
                if 0 <= o < flat.size:
                    flat[o] = v if cond is None else z3.If(cond, v, flat[o])
                continue
            lo, hi = _offset_range(o, flat.size)
            base, t = _split_base(o)
            for p in range(lo, hi + 1):  # positions outside the offset's range are never hit
                at = t == (p - base) % (1 << 64)  # base + t == p, modulo 2^64
                hit = at if cond is None else z3.And(cond, at)
                flat[p] = z3.If(hit, v, flat[p])
        return None

    # -- arithmetic --------------------------------------------------------------------------
    def i_Widen(self, ins: kir.Widen) -> np.ndarray:
        if self._all_concrete(ins):
            return super().i_Widen(ins)
        src = self.dt(ins.x)
        if src == ins.to:
            return self.values[ins.x]
        return _vmap(lambda x: E.widen(x, src, ins.to), self.sym(ins.x))

    def i_Round(self, ins: kir.Round) -> np.ndarray:
        if self._all_concrete(ins):
            return super().i_Round(ins)
        src = self.dt(ins.x)
        return _vmap(lambda x: E.round_to(x, src, ins.to, ins.overflow), self.sym(ins.x))

    def i_Cast(self, ins: kir.Cast) -> np.ndarray:
        if self._all_concrete(ins):
            return super().i_Cast(ins)
        src = self.dt(ins.x)
        return _vmap(lambda x: E.cast(x, src, ins.to, ins.overflow, ins.rounding,
                                      self.it.abstractions), self.sym(ins.x))

    def i_BinOp(self, ins: kir.BinOp) -> np.ndarray:
        if self._all_concrete(ins):
            return super().i_BinOp(ins)
        fn = E.binary(ins.kind, self.dt(ins.a))
        return _vmap(fn, self.sym(ins.a), self.sym(ins.b))

    def i_UnOp(self, ins: kir.UnOp) -> np.ndarray:
        if self._all_concrete(ins):
            return super().i_UnOp(ins)
        return _vmap(E.unary(ins.kind, self.dt(ins.x)), self.sym(ins.x))

    def i_Select(self, ins: kir.Select) -> np.ndarray:
        if self._all_concrete(ins):
            return super().i_Select(ins)
        c = self.values[ins.cond]
        a, b = self.sym(ins.a), self.sym(ins.b)
        if not _is_sym(c):
            return np.where(c, a, b)
        return _vmap(z3.If, c, a, b)

    def i_Bitcast(self, ins: kir.Bitcast) -> np.ndarray:
        if self._all_concrete(ins):
            return super().i_Bitcast(ins)
        return bitcast(self.sym(ins.x), self.dt(ins.x), ins.to, self.it.abstractions)

    def i_Math(self, ins: kir.Math) -> np.ndarray:
        if self._all_concrete(ins):
            return super().i_Math(ins)
        f = E.math_apply(ins.fn, self.dt(ins.x))
        self.it.abstractions.add(f"math.{ins.fn} (uninterpreted)")
        return _vmap(f, self.sym(ins.x))

    def i_Reduce(self, ins: kir.Reduce) -> np.ndarray:
        if self._all_concrete(ins):
            return super().i_Reduce(ins)
        dt = self.dt(ins.x)
        x = self.sym(ins.x)
        if ins.mask and _is_sym(self.values[ins.mask]) and \
                self.dt(ins.mask) == "bool" and _neutral(ins.kind, dt, ins.policy) is not None:
            return self._reduce_data_mask(ins, dt, x)
        if ins.mask and _is_sym(self.values[ins.mask]) and ins.kind == "sum" and \
                ins.policy in _TREES and dt == "f32":
            return self._masked_tree_sum(ins, x)
        m = self.concrete(ins.mask, "reduce mask") if ins.mask else None
        shape = np.broadcast_shapes(x.shape, m.shape) if m is not None else x.shape
        x = np.broadcast_to(x, shape)
        pos = [1 + a for a in ins.axes]
        keep = [i for i in range(len(shape)) if i not in pos]
        out_shape = tuple(1 if i in pos else n for i, n in enumerate(shape))
        lanes = math.prod(shape[i] for i in pos)
        f = np.transpose(x, keep + pos).reshape(-1, lanes)
        valid = (np.transpose(np.broadcast_to(m, shape), keep + pos).reshape(-1, lanes)
                 if m is not None else np.ones(f.shape, bool))
        init = None
        if ins.init:
            init = np.broadcast_to(self.sym(ins.init), out_shape).reshape(-1)
        r = np.empty(f.shape[0], object)
        for row in range(f.shape[0]):
            r[row] = reduce_lanes(list(f[row][valid[row]]), dt, ins.kind, ins.policy,
                                  None if init is None else init[row], self.it.abstractions)
        return r.reshape(out_shape)

    def _masked_rows(self, ins: kir.Reduce, x: np.ndarray) -> tuple:
        """A reduction over a data-dependent mask as rows: (lanes, their mask terms, the
        seeds or None, the result's shape)."""
        m = self.sym(ins.mask)
        shape = np.broadcast_shapes(x.shape, m.shape)
        pos = [1 + a for a in ins.axes]
        keep = [i for i in range(len(shape)) if i not in pos]
        out_shape = tuple(1 if i in pos else n for i, n in enumerate(shape))
        lanes = math.prod(shape[i] for i in pos)
        f = np.transpose(np.broadcast_to(x, shape), keep + pos).reshape(-1, lanes)
        valid = np.transpose(np.broadcast_to(m, shape), keep + pos).reshape(-1, lanes)
        init = np.broadcast_to(self.sym(ins.init), out_shape).reshape(-1) if ins.init else None
        return f, valid, init, out_shape

    def _masked_tree_sum(self, ins: kir.Reduce, x: np.ndarray) -> np.ndarray:
        """An f32 tree sum over a data-dependent mask: its admitted set depends on which lanes
        are active, so each row is the abstraction the HIR's masked tree sum is (D542:
        ``choices.abstracted`` of the seed, the lanes and their mask bits; padded lanes, masked
        out whatever the inputs, are no operands) — a lowering that keeps the seed, the lanes
        and the mask gives the HIR's term."""
        from tilefoundry.validate.choices import abstracted

        f, valid, init, out_shape = self._masked_rows(ins, x)
        r = np.empty(f.shape[0], object)
        for row in range(f.shape[0]):
            seed = [] if init is None else [init[row]]
            r[row] = abstracted(f"a masked {ins.policy} sum", f"masked_sum.{ins.policy}",
                                [*seed, *f[row]], list(valid[row]), self.it.abstractions)
        return r.reshape(out_shape)

    def _reduce_data_mask(self, ins: kir.Reduce, dt: str, x: np.ndarray) -> np.ndarray:
        """A reduction whose mask depends on input data, where leaving a lane out equals
        feeding the kind's neutral element in its place (``_neutral``: the folds, max / min /
        abs_max, integer sums and products — never a float tree sum, whose admitted set
        depends on which lanes are valid): every lane reduced, an invalid one replaced by the
        neutral element; a row with no valid lane and no seed is the interpreter's identity."""
        f, valid, init, out_shape = self._masked_rows(ins, x)
        pad = _neutral(ins.kind, dt, ins.policy)
        r = np.empty(f.shape[0], object)
        if ins.kind == "sum" and ins.policy in ("fold_left", "fold_right"):
            for row in range(f.shape[0]):
                r[row] = _masked_fold(list(zip(valid[row], f[row], strict=True)), dt,
                                      ins.policy == "fold_right",
                                      None if init is None else init[row])
            return r.reshape(out_shape)
        for row in range(f.shape[0]):
            v = [z3.If(c, t, pad) for c, t in zip(valid[row], f[row], strict=True)]
            red = reduce_lanes(v, dt, ins.kind, ins.policy,
                               None if init is None else init[row], self.it.abstractions)
            r[row] = red if init is not None or not v else \
                z3.If(z3.Or(*valid[row]), red, _identity(ins.kind, dt))
        return r.reshape(out_shape)

    def i_Dot(self, ins: kir.Dot) -> np.ndarray:
        if self._all_concrete(ins):
            return super().i_Dot(ins)
        dt = self.dt(ins.a)
        add, mul = E.binary("add", dt), E.binary("mul", dt)
        a, b = self.sym(ins.a), self.sym(ins.b)
        ax = 1 + ins.axis
        n = max(a.shape[ax], b.shape[ax])
        m = self.concrete(ins.mask, "dot mask") if ins.mask else None
        s = self.sym(ins.init) if ins.init else None
        started = None if s is None else np.ones(s.shape, bool)
        zero = np.empty((), object)
        zero[()] = E.zero(dt)
        for j in range(n):
            aj = np.take(a, [min(j, a.shape[ax] - 1)], axis=ax)
            bj = np.take(b, [min(j, b.shape[ax] - 1)], axis=ax)
            p = _vmap(mul, aj, bj)
            vj = np.take(m, [min(j, m.shape[ax] - 1)], axis=ax) if m is not None else \
                np.ones((1,) * p.ndim, bool)
            if s is None:
                s = np.where(vj, p, zero)
                started = np.broadcast_to(vj, s.shape)
            else:
                s, p = np.broadcast_arrays(s, p)
                summed = _vmap(add, s, p)
                s = np.where(vj, np.where(started, summed, p), s)
                started = started | vj
        return s


#: most (lanes x root positions) a data-dependent load / store is expanded into
MAX_SCATTER = 1 << 14


def _check_span(kernel: str, lanes: int, size: int) -> None:
    if lanes * size > MAX_SCATTER:
        raise Unsupported(f"kernel {kernel}: data-dependent addressing of {lanes} lanes over "
                          f"{size} positions (more than {MAX_SCATTER} are not expanded)")


def _interval(t: z3.ExprRef, memo: dict[int, tuple[int, int] | None]
              ) -> tuple[int, int] | None:
    """A sound signed range of a bit-vector term built of constants, ``+``, ``*`` by a
    constant, ``If`` and sign / zero extension (a rank: a sum of ``If(c, 1, 0)``), or None
    (unknown, or a bound that could wrap)."""
    key = t.get_id()
    if key in memo:
        return memo[key]
    r: tuple[int, int] | None = None
    w = t.size()
    if z3.is_bv_value(t):
        v = t.as_signed_long()
        r = (v, v)
    else:
        k = t.decl().kind()
        kids = t.children()
        if k == z3.Z3_OP_ITE:
            a, b = _interval(kids[1], memo), _interval(kids[2], memo)
            r = None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
        elif k in (z3.Z3_OP_BADD, z3.Z3_OP_BMUL):
            parts = [_interval(c, memo) for c in kids]
            if all(q is not None for q in parts):
                acc = parts[0]
                for q in parts[1:]:
                    if k == z3.Z3_OP_BADD:
                        acc = (acc[0] + q[0], acc[1] + q[1])
                    else:
                        ends = [x * y for x in acc for y in q]
                        acc = (min(ends), max(ends))
                r = acc
        elif k == z3.Z3_OP_SIGN_EXT:
            r = _interval(kids[0], memo)
        elif k == z3.Z3_OP_ZERO_EXT:
            a = _interval(kids[0], memo)
            r = a if a is not None and a[0] >= 0 else (0, (1 << kids[0].size()) - 1)
    if r is not None and not (-(1 << (w - 1)) <= r[0] <= r[1] < (1 << (w - 1))):
        r = None  # could wrap: no bound
    memo[key] = r
    return r


def _split_base(o: z3.ExprRef) -> tuple[int, z3.ExprRef]:
    """``o`` as (constant base, the rest) when it is ``base + t`` (``_sym_offsets`` builds it
    so): a row's position test ``base + t == p`` is then spelled ``t == p - base``, the same
    predicate on 64-bit words, on the index term itself."""
    if z3.is_app_of(o, z3.Z3_OP_BADD) and o.num_args() == 2 and z3.is_bv_value(o.arg(0)):
        return o.arg(0).as_signed_long(), o.arg(1)
    return 0, o


def _offset_range(o: z3.ExprRef, size: int) -> tuple[int, int]:
    """The root positions ``[lo, hi]`` a data-dependent offset can hit (``_interval``
    clipped to the buffer; the whole buffer when unbounded)."""
    r = _interval(o, {})
    if r is None:
        return 0, size - 1
    return max(r[0], 0), min(r[1], size - 1)


def _to_i64(t: Any, dt: str) -> z3.BitVecRef:
    """An integer index term as the interpreter's ``astype(np.int64)``."""
    if dt == "bool":
        return z3.If(t, z3.BitVecVal(1, 64), z3.BitVecVal(0, 64))
    if not kir.is_int(dt):
        raise Unsupported(f"a data-dependent index of dtype {dt}")
    w = E.width(dt)
    if w == 64:
        return t
    return z3.SignExt(64 - w, t) if E.op_class(dt) == "s" else z3.ZeroExt(64 - w, t)


def _masked_fold(lanes: list, dt: str, right: bool, init: Any) -> Any:
    """A sum fold over the lanes whose (symbolic) mask holds, as the interpreter folds the
    valid lanes: from the seed, else from the first valid lane; no valid lane and no seed is
    the identity. Written as the reference's masked fold is (``If(m, state + x, state)`` per
    lane), so the solver meets the same terms on both sides."""
    add = E.binary("add", dt)
    op = (lambda acc, t: add(t, acc)) if right else add
    acc = init if init is not None else _identity("sum", dt)
    started: Any = init is not None
    for c, t in (lanes[::-1] if right else lanes):
        stepped = op(acc, t) if started is True else t if started is False else \
            z3.If(started, op(acc, t), t)
        acc = z3.If(c, stepped, acc)
        started = True if started is True else c if started is False else z3.Or(started, c)
    return acc if started is True else z3.If(started, acc, _identity("sum", dt))


def _neutral(kind: str, dt: str, policy: str) -> z3.ExprRef | None:
    """An element e with op(a, e) = op(e, a) = a for every a, bit for bit, under the kind's
    combine in ``dt`` (so a masked-out lane may be replaced by it), or None where there is
    none or the lane set changes the admitted set (a float sum under a tree policy).
    Float sum: -0 (a + -0 = a for every a, +0 included); max: -inf; min: +inf; abs_max: +0
    (lanes are magnitudes); integers: 0 / 1 / the dtype's extremes; bool max / min: F / T."""
    cls = E.op_class(dt)
    if cls == "fp":
        if kind == "sum":
            return None if policy in _TREES else E.const(-0.0, dt)
        v = {"max": -np.inf, "min": np.inf, "abs_max": 0.0}.get(kind)
        return None if v is None else E.const(v, dt)
    if cls == "bool":
        return {"max": z3.BoolVal(False), "min": z3.BoolVal(True)}.get(kind)
    if cls in ("s", "u"):
        ii = np.iinfo(kir.numpy_dtype(dt))
        v = {"sum": 0, "prod": 1, "max": ii.min, "min": ii.max, "abs_max": 0}.get(kind)
        return None if v is None else E.const(v, dt)
    return None


def _identity(kind: str, dt: str) -> z3.ExprRef:
    from tilefoundry.compiler.interp import reduce_identity as ident

    return E.const(ident(kind, dt), dt)


def _pairwise(v: list, op: Callable) -> Any:
    """``reductions._pairwise``: a balanced tree, an odd last element carried up."""
    while len(v) > 1:
        pairs = [op(v[i], v[i + 1]) for i in range(0, len(v) - 1, 2)]
        v = pairs + ([v[-1]] if len(v) % 2 else [])
    return v[0]


def _fold(v: list, op: Callable, left: bool, seed: Any) -> Any:
    order = list(range(len(v))) if left else list(range(len(v) - 1, -1, -1))
    s = v[order.pop(0)] if seed is None else seed
    for i in order:
        s = op(s, v[i]) if left else op(v[i], s)
    return s


def _tree_uf(v: list, dt: str, policy: str, init: Any, abstractions: set[str]) -> Any:
    """A tree sum over more lanes than ``choices`` enumerates: one uninterpreted function of
    the lanes (in a canonical order for ``unordered_tree``, in source order for
    ``ordered_tree``), so the same lanes give the same term (a pass that keeps them is proved)
    and anything else is a counterexample that must reproduce concretely or is "failed to
    prove"."""
    abstractions.add(f"{policy} sum (admitted set abstracted)")
    lanes = sorted(v, key=lambda t: t.sexpr()) if policy == "unordered_tree" else list(v)
    if init is not None:
        lanes = [init, *lanes]
    s = E.fp_sort(dt)
    f = z3.Function(f"{policy}_sum.{dt}.{len(lanes)}", *([s] * len(lanes)), s)
    return f(*lanes)


def two_sum(a: Any, b: Any, dt: str = "f64") -> tuple[Any, Any]:
    """Knuth's TwoSum (``evaluator.nn._two_sum``) on FP terms: ``s = a + b``, ``bb = s - a``,
    ``e = (a - (s - bb)) + (b - bb)``, each one IEEE operation in ``dt``."""
    add, sub = E.binary("add", dt), E.binary("sub", dt)
    s = add(a, b)
    bb = sub(s, a)
    return s, add(sub(a, sub(s, bb)), sub(b, bb))


def dd_row_sum(v: list, dt: str = "f64") -> tuple[Any, Any]:
    """``evaluator.nn.dd_row_sum`` on one fiber of FP terms: ``hi`` and ``lo`` start at +0;
    per lane in order ``hi, e = two_sum(hi, x)``, ``lo = lo + e``; the result is
    ``two_sum(hi, lo)``. Exact IEEE f64 operations, so the encoding is exact."""
    add = E.binary("add", dt)
    hi = lo = E.const(0.0, dt)
    for x in v:
        hi, e = two_sum(hi, x, dt)
        lo = add(lo, e)
    return two_sum(hi, lo, dt)


def numpy_sum_f64(v: list, dt: str = "f64") -> Any:
    """``np.sum`` of one C-contiguous float fiber (numpy's ``pairwise_sum`` under ``add.reduce``
    with its identity): ``+0 + P(v)``, where P of fewer than 8 lanes is the left fold from -0,
    and of 8 to 128 lanes eight strided accumulators ``r[j] = v[j] + v[j+8] + ...``, combined
    ``((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))``, then the remaining lanes folded in. (The reference
    evaluator's float64 sums, e.g. LayerNorm's variance; kernel-interp's f64 ``unordered_tree``
    sum.)"""
    add = E.binary("add", dt)
    n = len(v)
    if n > 128:
        raise Unsupported(f"a numpy float sum over {n} lanes (more than one pairwise block)")
    if n < 8:
        p = E.const(-0.0, dt)
        for x in v:
            p = add(p, x)
    else:
        r = list(v[:8])
        i = 8
        while i < n - n % 8:
            r = [add(r[j], v[i + j]) for j in range(8)]
            i += 8
        p = add(add(add(r[0], r[1]), add(r[2], r[3])), add(add(r[4], r[5]), add(r[6], r[7])))
        for x in v[i:]:
            p = add(p, x)
    return add(E.const(0.0, dt), p)


def reduce_lanes(v: list, dt: str, kind: str, policy: str, init: Any,
                 abstractions: set[str]) -> Any:
    """One fiber (interp._reduce_lanes), lanes in lexicographic order of the reduced axes."""
    if kind in kir.COMPENSATED:  # interp: dd_row_sum of the (valid) lanes, whatever the policy
        if dt != "f64":
            raise Unsupported(f"unsupported op reduce.{kind} on {dt}")
        if init is not None:  # kernel-interp ignores a seed here; the lowering never gives one
            raise Unsupported(f"unsupported op reduce.{kind} with a seed")
        hi, lo = dd_row_sum(v, dt)
        return hi if kind == "sum_hi" else lo
    if not v:
        return init if init is not None else _identity(kind, dt)
    cls = E.op_class(dt)
    if kind == "sum":
        if cls == "bool":
            raise Unsupported(f"unsupported op reduce.sum on {dt}")
        add = E.binary("add", dt)
        if policy in _TREES and cls == "fp":
            s = _pairwise(v, add)
            if dt == "f64" and policy == "unordered_tree":
                # the member kernel-interp runs: its f64 unordered_tree sum is numpy's (np.sum,
                # as the reference's own f64 sums of the nn ops); of one or two lanes it is that
                # value (+0 where every lane is -0, where the tree x + y gives -0)
                s = numpy_sum_f64(v, dt)
            s = s if init is None else add(init, s)
            if len(v) <= 2:  # one tree (x + y == y + x exactly)
                return s
            from tilefoundry.validate.choices import tree_choice

            c = tree_choice(v, dt, policy, init, s, abstractions)
            return c if c is not None else _tree_uf(v, dt, policy, init, abstractions)
        if policy in _TREES:  # integers wrap: every order gives the same sum
            s = _pairwise(v, add)
            return s if init is None else add(init, s)
        return _fold(v, add, policy == "fold_left", init)
    if kind in ("max", "min", "abs_max"):
        largest = kind != "min"
        if cls == "fp":
            lanes = [z3.fpAbs(x) for x in v] if kind == "abs_max" else v
            r = _fold(lanes, lambda a, b: E.fminmax(a, b, largest), True, None)
            return r if init is None else E.fminmax(init, r, largest)
        if kind == "abs_max" and cls == "s":  # magnitudes compared unsigned (|INT_MIN| wraps)
            lanes = [z3.If(x < 0, -x, x) for x in v]
            pick = lambda a, b: z3.If(z3.UGE(a, b), a, b)  # noqa: E731
            r = _fold(lanes, pick, True, None)
            return r if init is None else pick(init, r)
        op = E.binary("max" if largest else "min", dt)
        r = _fold(v, op, True, None)
        return r if init is None else op(init, r)
    if kind == "prod" and cls in ("s", "u"):
        mul = E.binary("mul", dt)
        r = _fold(v, mul, True, None)
        return r if init is None else mul(init, r)
    raise Unsupported(f"unsupported op reduce.{kind} on {dt}")


def bitcast(x: np.ndarray, src: str, to: str, abstr: set[str]) -> np.ndarray:
    """f32 <-> u32 reinterpretation of the terms ``x`` (D522): f32 -> u32 reads
    ``encode.raw_bits`` (exact bits for a value that entered as bits, NaN payloads included; a
    computed value's NaN is the quiet NaN, recorded in ``abstr``); u32 -> f32 is
    ``fpBVToFP(bits)``, so a later bitcast back reads the same bits. Shared by the kernel IR's
    ``Bitcast`` and the HIR op."""
    if {src, to} != {"f32", "u32"}:
        raise Unsupported(f"unsupported op Bitcast {src} -> {to} (only f32 <-> u32 reinterprets "
                          f"bits; an evaluation error)")
    if src == "u32":
        return _vmap(lambda t: E.from_input_bits(t, "f32"), x) if x.size else x.copy()
    out = np.empty(x.shape, object)
    for i, t in np.ndenumerate(x):
        out[i], exact = E.raw_bits(t, "f32")
        if not exact:
            abstr.add(E.COMPUTED_NAN_BITS)
    return out


def input_vars(program: Program, tag: str = "") -> dict[str, np.ndarray]:
    """A bit-vector variable per input element (``x[1,2]``), its value by dtype."""
    bm = program.buffer_map()
    out = {}
    for name in program.inputs:
        b = bm[name]
        n = math.prod(b.shape)
        arr = np.empty(n, object)
        for i, idx in enumerate(np.ndindex(*b.shape) if b.shape else [()]):
            if i >= n:
                break
            arr[i] = E.input_var(f"{tag}{name}[{','.join(map(str, idx))}]", b.dtype)
        out[name] = arr.reshape(b.shape)
    return out


def run_symbolic(program: Program, bits: Mapping[str, np.ndarray]) -> SymProgram:
    """Run ``program`` on inputs given as bit-vector terms (``input_vars``)."""
    bm = program.buffer_map()
    vals = {n: _vmap(lambda x, dt=bm[n].dtype: E.from_input_bits(x, dt), bits[n])
            if bits[n].size else bits[n] for n in program.inputs}
    abstractions: set[str] = set()
    it = _SymInterp(program, vals, abstractions)
    st = it.sym_storage()
    it.steps(program.steps, st)
    outs = {n: it.read(st, n) for n in program.output_names()}
    return SymProgram(outs, {n: bm[n].dtype for n in outs}, abstractions)
