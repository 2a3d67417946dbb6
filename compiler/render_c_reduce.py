"""The SIMD C renderer's reductions, dots and tile loops (``render_c.KernelC`` inherits
``ReduceDotC``; ``render_cuda.KernelCuda`` reuses ``reduce_ops`` for its block reductions).
Split from ``render_c`` by concern (issue 36); the module docstring of ``render_c`` describes
the policies. The identity, the in-order rule and the valid-lane rule are
``render_decisions``' (D500), spelled here in C.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tilefoundry.compiler import kir, render_c_vreduce
from tilefoundry.compiler import render_decisions as rd
from tilefoundry.compiler.spelling import CTYPE, LOGIC, UTYPE

__all__ = ["ACCUMULATORS", "ReduceDotC"]

#: interleaved accumulators of an unordered_tree / extreme-value reduction
ACCUMULATORS = 8
_LOGIC = LOGIC


def _identity(kind: str, dt: str) -> str:
    """The seed of a reduction (``render_decisions.reduce_identity``) spelled in C: the
    ``<stdint.h>`` extremes by name, -0 / +0 and the infinities of the float type."""
    v = rd.reduce_identity(kind, dt)
    if dt == "bool":
        return "1" if v else "0"
    if kir.is_int(dt):
        ii = np.iinfo(kir.numpy_dtype(dt))
        if v == ii.min != 0:
            return f"INT{ii.bits}_MIN"
        if v == ii.max:
            return f"{'U' if ii.min == 0 else ''}INT{ii.bits}_MAX"
        return str(v)
    sign = "-" if math.copysign(1.0, v) < 0 else ""
    return f"{sign}0.0{'f' if dt == 'f32' else ''}" if v == 0 else \
        f"{sign}(({CTYPE[dt]})INFINITY)"


@dataclass
class _ReduceOps:
    """``KernelC.reduce_ops``: value(ind, lines) -> the lane's C name; step(acc, v); finish(acc,
    any); the accumulator C type; the identity; whether init seeds the accumulation; whether
    a no-valid-lane flag is tracked; the coordinates ``c<d>``; the result's reference."""
    value: Callable
    step: Callable
    finish: Callable
    at: str
    ident: str
    seed_init: bool
    track: bool
    coords: dict
    res: str


class ReduceDotC:
    """The reductions, dots and tile loops of ``KernelC`` (a mixin: it reads the kernel's
    ``k``, ``dt``, ``full``, ``aref``, ``loops``, ``farith`` and friends)."""

    #: whether the spelling's prelude has the integer max / min steps (D525): ``tf__max_nonneg``
    #: (an f32 max of sign-clear values from -inf) and the ordered-integer keys ``tf__key_*`` /
    #: ``tf__kstep_*`` / ``tf__unkey_*``; otherwise every f32 step is ``TF__PICKMAX`` / ``MIN``
    INT_MINMAX_STEPS = False

    # -- reductions ---------------------------------------------------------------------------
    def emit_reduce(self, ins: kir.Reduce, out: list[str], ind: str) -> None:
        k = self.k
        dt, kind, policy = self.dt(ins.x), ins.kind, ins.policy
        xf = set(self.full(ins.x))
        red = [d for d in ins.axes if d in xf]
        kept = self.full(ins.out)
        if ins.mask and not set(self.full(ins.mask)) <= xf | set(ins.axes):
            raise self.unsupported("Reduce", f"{ins.out}: the mask spans axes the operand does not")
        n = self.elems(red)
        self.work += n * max(self.elems(kept), 1)
        ct = CTYPE[dt]
        if kind in kir.COMPENSATED:
            self.reduce_compensated(ins, red, kept, out, ind)
            return
        contiguous = len(red) == 1 and max(xf) == red[0] and n >= 2 * ACCUMULATORS
        order_free = not rd.reduce_in_order(kind, dt, policy)
        ops = self.reduce_ops(ins)
        value, step, finish, at, ident = ops.value, ops.step, ops.finish, ops.at, ops.ident
        seed_init, track, coords, res = ops.seed_init, ops.track, ops.coords, ops.res
        if contiguous and order_free:
            # several interleaved accumulators over the one contiguous reduced axis
            d = red[0]
            A = ACCUMULATORS
            inner = self.loops(kept, ind, out, simd=False)
            acc = self.fresh("acc")
            seed = self.aref(ins.init, coords) if seed_init else ident
            if seed_init and kind == "abs_max":
                seed = f"({at}){seed}"
            out.append(f"{inner}{at} {acc}[{A}];")
            if seed_init and kind in ("sum", "prod"):
                # a sum's / product's seed enters once (accumulator 0); the others start at
                # the identity.
                # (Seeding all of them counted an integer init A times: found by the tile
                # family's seeded Scan, docs/decisions.md D221.)
                out.append(f"{inner}for (int j = 1; j < {A}; ++j) {acc}[j] = {ident};")
                out.append(f"{inner}{acc}[0] = {seed};")
            else:  # max / min / abs_max / bool: idempotent, every accumulator may hold it
                out.append(f"{inner}for (int j = 0; j < {A}; ++j) {acc}[j] = {seed};")
            anyv = None
            if track:
                anyv = self.fresh("any")
                out.append(f"{inner}uint8_t {anyv} = 0;")

            def update(slot: str, ind2: str) -> None:
                """Fold lane c{d} into accumulator ``slot``."""
                lines: list[str] = []
                v = value(ind2, lines)
                out.extend(lines)
                out.append(f"{ind2}{acc}[{slot}] = {step(f'{acc}[{slot}]', v)};")
                if anyv:
                    out.append(f"{ind2}{anyv} |= {self.aref(ins.mask, coords)};")

            # a mask along the axis, or a seeded row that a row mask could leave out, keeps
            # the scalar form (a masked-out row must equal the seed folded with identities)
            lane_mask = ins.mask is not None and (d in self.full(ins.mask) or seed_init)
            if self.vec_math and ins.x not in self.consts and render_c_vreduce.vectorizable(
                    dt, kind, lane_mask, A):  # one vector of accumulators (D401)
                row_mask = None if ins.mask is None else self.aref(ins.mask, coords)
                out.extend(render_c_vreduce.vector_loop(
                    acc, kind, self.aref(ins.x, coords), d, n // A * A, inner, row_mask, anyv))
            else:
                self.interleaved_loop(acc, n // A * A, d, update, inner, out)
            if n % A:  # the tail lanes, each into the accumulator of its residue
                out.append(f"{inner}for (int64_t c{d} = {n // A * A}ll; c{d} < {n}ll; ++c{d}) {{")
                update(f"c{d} % {A}", inner + "    ")
                out.append(f"{inner}}}")
            width = A
            while width > 1:
                width //= 2
                out.append(f"{inner}for (int j = 0; j < {width}; ++j) "
                           f"{acc}[j] = {step(f'{acc}[2 * j]', f'{acc}[2 * j + 1]')};")
            out.append(f"{inner}{res} = {finish(f'{acc}[0]', anyv)};")
            self.close(kept, inner, out)
            return
        # a fold over the lanes in order, vectorized across the kept lanes
        accn = res if at == ct else None
        if accn is None:
            acc_arr = self.aux_array(at, max(self.elems(kept), 1))
            accn = f"{acc_arr}[{self.index(kept, coords)}]"
        anyv = None
        if track:
            any_arr = self.aux_array("uint8_t", max(self.elems(kept), 1))
            anyv = f"{any_arr}[{self.index(kept, coords)}]"
        inner = self.loops(kept, ind, out)
        seed = self.aref(ins.init, coords) if seed_init else ident
        out.append(f"{inner}{accn} = ({at}){seed};")
        if anyv:
            out.append(f"{inner}{anyv} = 0;")
        self.close(kept, inner, out)
        rev = policy == "fold_right"
        ind2 = ind
        for d in red:
            if rev:
                out.append(f"{ind2}for (int64_t c{d} = {k.block[d] - 1}ll; c{d} >= 0; --c{d}) {{")
            else:
                out.append(f"{ind2}for (int64_t c{d} = 0; c{d} < {k.block[d]}ll; ++c{d}) {{")
            ind2 += "    "
        inner = self.loops(kept, ind2, out)
        lines = []
        v = value(inner, lines)
        out.extend(lines)
        out.append(f"{inner}{accn} = {step(accn, v)};")
        if anyv:
            out.append(f"{inner}{anyv} |= {self.aref(ins.mask, coords)};")
        self.close(kept, inner, out)
        for _ in red:
            ind2 = ind2[:-4]
            out.append(f"{ind2}}}")
        if (ins.init is not None and not seed_init) or anyv or at != ct:
            inner = self.loops(kept, ind, out)
            out.append(f"{inner}{res} = {finish(accn, anyv)};")
            self.close(kept, inner, out)

    def interleaved_loop(self, acc: str, whole: int, d: int, update: Callable, inner: str,
                         out: list[str]) -> None:
        """The scalar interleaved fold of lanes ``[0, whole)`` into ``acc[0..A)``."""
        A = ACCUMULATORS
        out.append(f"{inner}for (int64_t i = 0; i < {whole}ll; i += {A}) {{")
        out.append(f"{inner}    for (int j = 0; j < {A}; ++j) {{")
        out.append(f"{inner}        const int64_t c{d} = i + j;")
        update("j", inner + "        ")
        out.append(f"{inner}    }}")
        # GCC 12 -O3 -march=native (AVX-512) miscompiles the vectorized outer loop of a
        # masked integer accumulation (a 33-lane i32 sum gave 14 for 66); the empty asm
        # keeps the accumulators in memory per step, the inner lanes still vectorize
        # (docs/decisions.md D221)
        if self.ACC_BARRIER:
            out.append(f"{inner}    " + self.ACC_BARRIER.format(acc=acc))
        out.append(f"{inner}}}")

    def reduce_ops(self, ins: kir.Reduce, keyed: bool = False) -> _ReduceOps:
        """The pieces of a (non-compensated) reduction that every mapping shares: how a lane's
        value is read (mask, abs), one combining step, the identity and the result from an
        accumulation (init, the no-valid-lane rule). ``keyed``: a caller that always ends with
        ``finish`` may take an f32 max / min folded from its identity as ordered-integer keys
        (``INT_MINMAX_STEPS``, D525)."""
        k = self.k
        dt, kind, policy = self.dt(ins.x), ins.kind, ins.policy
        ct = CTYPE[dt]
        seed_init = ins.init is not None and (
            policy.startswith("fold") or
            (kir.is_int(dt) and kind in ("sum", "max", "min", "prod")) or
            dt == "bool")
        track = rd.tracks_valid_lane(kind, dt, ins.mask is not None, ins.init is not None) and \
            not kir.a_lane_is_valid(k.body, ins.mask, ins.axes, k.domain)
        coords = {d: f"c{d}" for d in range(k.rank)}
        res = self.aref(ins.out, coords)

        def value(ind2: str, lines: list[str]) -> str:
            """Lines computing the lane's (masked) value; returns the C name."""
            v = self.fresh("x")
            x = self.aref(ins.x, coords)
            if kind == "abs_max" and kir.is_float(dt):
                x = f"fabs{'f' if dt == 'f32' else ''}({x})"
            elif kind == "abs_max" and kir.is_int(dt):
                ut = UTYPE[dt]
                raw = self.aref(ins.x, coords)
                x = raw if dt == "u8" else f"({raw} < 0 ? ({ut})0 - ({ut}){raw} : ({ut}){raw})"
            vt = UTYPE[dt] if kind == "abs_max" and kir.is_int(dt) else ct
            if ins.mask:
                ident = _identity(kind, dt)
                x = f"{self.aref(ins.mask, coords)} ? ({vt})({x}) : ({vt}){ident}"
            if keyed:
                x = f"tf__key_{kind}({x})"
            lines.append(f"{ind2}const {vt} {v} = {x};")
            return v

        # an f32 max of values whose sign bit is clear (an abs_max, a max of abs), folded from
        # the identity -inf: their patterns order as int32 (NaNs above inf), D525
        src = self.defs.get(ins.x)
        nonneg = self.INT_MINMAX_STEPS and dt == "f32" and not seed_init and (
            kind == "abs_max" or (kind == "max" and isinstance(src, kir.UnOp)
                                  and src.kind == "abs"))
        # any other f32 max / min from its identity, where the caller allows it: each lane's
        # ordered-integer key (a NaN the extreme key), an int32 max / min a step, D525
        keyed = keyed and self.INT_MINMAX_STEPS and dt == "f32" and not seed_init and \
            kind in ("max", "min") and not nonneg

        def step(acc: str, v: str) -> str:
            if kind == "sum":
                if kir.is_float(dt):
                    return self.farith("add", v, acc, dt) if policy == "fold_right" else \
                        self.farith("add", acc, v, dt)
                return f"({ct})(({UTYPE[dt]}){acc} + ({UTYPE[dt]}){v})"
            if kind == "prod":  # wrapping: the product of the unsigned patterns
                return f"({ct})(({UTYPE[dt]}){acc} * ({UTYPE[dt]}){v})"
            if dt == "bool":
                # (a bool abs_max, which no lowering makes, folds with & as it always did)
                return f"(uint8_t)({acc} {_LOGIC[rd.BOOL_MINMAX.get(kind, 'and')]} {v})"
            if kir.is_float(dt):
                if keyed:
                    return f"tf__kstep_{kind}({acc}, {v})"
                if nonneg:
                    return f"tf__max_nonneg({acc}, {v})"
                return f"TF__PICK{'MIN' if kind == 'min' else 'MAX'}({acc}, {v})"
            if kind == "abs_max":
                return f"({v} > {acc} ? {v} : {acc})"
            return f"({v} {'<' if kind == 'min' else '>'} {acc} ? {v} : {acc})"

        at = UTYPE[dt] if kind == "abs_max" and kir.is_int(dt) else ct
        ident = _identity(kind, dt)
        if keyed:
            ident = f"tf__key_{kind}({ident})"

        def finish(acc: str, anyv: str | None) -> str:
            """The result from the lanes' accumulation ``acc`` (init combined)."""
            if keyed:
                acc = f"tf__unkey_{kind}({acc})"
            r = f"({ct}){acc}"
            if ins.init is not None and not seed_init:
                init = self.aref(ins.init, coords)
                if kind == "sum":
                    r = self.farith("add", init, acc, dt) if kir.is_float(dt) else \
                        f"{init} + {acc}"
                elif kir.is_float(dt):
                    f = "f" if dt == "f32" else "d"
                    r = f"tf__{f}{'min' if kind == 'min' else 'max'}({init}, {acc})"
                else:  # integer abs_max: unsigned magnitudes
                    ut = UTYPE[dt]
                    r = f"(({ut}){init} >= {acc} ? {init} : ({ct}){acc})"
            if anyv is not None:
                r = f"{anyv} ? {r} : ({ct})0"
            return r
        return _ReduceOps(value, step, finish, at, ident, seed_init, track, coords, res)

    def reduce_compensated(self, ins: kir.Reduce, red: list[int], kept: tuple[int, ...],
                           out: list[str], ind: str) -> None:
        coords = {d: f"c{d}" for d in range(self.k.rank)}
        m = max(self.elems(kept), 1)
        hi = f"{self.aux_array('double', m)}[{self.index(kept, coords)}]"
        lo = f"{self.aux_array('double', m)}[{self.index(kept, coords)}]"
        inner = self.loops(kept, ind, out)
        out.append(f"{inner}{hi} = 0.0; {lo} = 0.0;")
        self.close(kept, inner, out)
        ind2 = ind
        for d in red:
            out.append(f"{ind2}for (int64_t c{d} = 0; c{d} < {self.k.block[d]}ll; ++c{d}) {{")
            ind2 += "    "
        inner = self.loops(kept, ind2, out)
        w = self.aref(ins.x, coords)
        body = (f"const double w = {w}; const double s = {hi} + w; const double bb = s - {hi}; "
                f"const double e = ({hi} - (s - bb)) + (w - bb);")
        upd = f"{hi} = s; {lo} = {lo} + e;"
        if ins.mask:
            out.append(f"{inner}if ({self.aref(ins.mask, coords)}) {{ {body} {upd} }}")
        else:
            out.append(f"{inner}{body} {upd}")
        self.close(kept, inner, out)
        for _ in red:
            ind2 = ind2[:-4]
            out.append(f"{ind2}}}")
        inner = self.loops(kept, ind, out)
        part = "s" if ins.kind == "sum_hi" else "e"
        out.append(f"{inner}{{ const double s = {hi} + {lo}; const double bb = s - {hi}; "
                   f"const double e = ({hi} - (s - bb)) + ({lo} - bb); "
                   f"{self.aref(ins.out, coords)} = {part}; }}")
        self.close(kept, inner, out)

    # -- dot ----------------------------------------------------------------------------------
    def emit_dot(self, ins: kir.Dot, out: list[str], ind: str) -> None:
        d = ins.axis
        kept = self.full(ins.out)
        spans = d in self.types[ins.a].full or d in self.types[ins.b].full
        n = self.k.block[d] if spans else 1
        self.work += n * max(self.elems(kept), 1)
        dt = self.dt(ins.a)
        coords = {e: f"c{e}" for e in range(self.k.rank)}
        s = self.aref(ins.out, coords)
        if dt == "i64":
            prod = (f"(int64_t)((uint64_t){self.aref(ins.a, coords)} * "
                    f"(uint64_t){self.aref(ins.b, coords)})")
            add = f"(int64_t)((uint64_t){s} + (uint64_t)p)"
        elif kir.is_float(dt):
            prod = self.farith("mul", self.aref(ins.a, coords), self.aref(ins.b, coords), dt)
            add = self.farith("add", s, "p", dt)
        else:
            prod = f"{self.aref(ins.a, coords)} * {self.aref(ins.b, coords)}"
            add = f"{s} + p"
        ct = CTYPE[dt]
        started = None
        if ins.mask and ins.init is None:
            started = f"{self.aux_array('uint8_t', max(self.elems(kept), 1))}" \
                      f"[{self.index(kept, coords)}]"
        first = 0
        inner = self.loops(kept, ind, out)
        if ins.init is not None:
            out.append(f"{inner}{s} = {self.aref(ins.init, coords)};")
        elif started:
            out.append(f"{inner}{s} = ({ct})0; {started} = 0;")
        else:
            out.append(f"{inner}{{ const int64_t c{d} = 0; (void)c{d}; {s} = {prod}; }}")
            first = 1
        self.close(kept, inner, out)
        if first >= n:
            return
        out.append(f"{ind}for (int64_t c{d} = {first}ll; c{d} < {n}ll; ++c{d}) {{")
        inner = self.loops(kept, ind + "    ", out)
        out.append(f"{inner}const {ct} p = {prod};")
        if ins.mask:
            m = self.aref(ins.mask, coords)
            if started:
                out.append(f"{inner}if ({m}) {{ {s} = {started} ? {add} : p; {started} = 1; }}")
            else:
                out.append(f"{inner}if ({m}) {s} = {add};")
        else:
            out.append(f"{inner}{s} = {add};")
        self.close(kept, inner, out)
        out.append(f"{ind}}}")

    # -- tile loops ---------------------------------------------------------------------------
    def copy_tile(self, dst: str, src: str, like: str, out: list[str], ind: str) -> None:
        axes = self.full(like)
        coords = {d: f"c{d}" for d in range(self.k.rank)}
        inner = self.loops(axes, ind, out)
        out.append(f"{inner}{self.aref(dst, coords)} = {self.aref(src, coords)};")
        self.close(axes, inner, out)

    def emit_loop(self, loop: kir.TileLoop, inner_segs: list, out: list[str], ind: str) -> None:
        d = loop.axis
        b = self.k.block[d]
        tiles = -(-self.k.domain[d] // b)
        for c, i in zip(loop.carried, loop.inits, strict=True):
            self.copy_tile(c, i, c, out, ind)
        t = f"t{d}"
        out.append(f"{ind}for (int64_t {t} = 0; {t} < {tiles}ll; ++{t}) {{")
        ind2 = ind + "    "
        tile = f"({tiles - 1}ll - {t})" if loop.reverse else t
        out.append(f"{ind2}const int64_t b{d} = {tile} * {b}ll; (void)b{d};")
        self.emit(inner_segs, out, ind2)
        carried = set(loop.carried)
        swap = any(self.alias.get(y, y) in carried for y in loop.yields)
        tmps = []
        if swap:
            for y in loop.yields:
                tmp = self.fresh("%yield")
                self.types[tmp] = self.types[y]
                self.need_array(tmp)
                self.copy_tile(tmp, y, y, out, ind2)
                tmps.append(tmp)
        for c, y, tmp in zip(loop.carried, loop.yields, tmps or loop.yields, strict=True):
            if self.alias.get(y, y) != c:
                self.copy_tile(c, tmp, c, out, ind2)
        out.append(f"{ind}}}")
