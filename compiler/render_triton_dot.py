"""The Triton renderer's dots and tile loops (``render_triton._KernelT`` inherits
``DotLoopT``): a ``dot`` folded in K order or, where the contract admits it, ``tl.dot`` on the
tensor cores (with the 2-D accumulator carried through the tile loop), and ``TileLoop`` as a
``range`` loop with the carried values as loop variables. Split from ``render_triton`` by
concern (issue 36).
"""

from __future__ import annotations

from tilefoundry.compiler import kir
from tilefoundry.compiler.spelling import TRITON_MMA_TL as _MMA_TL
from tilefoundry.compiler.spelling import TRITON_TL as _TL
from tilefoundry.compiler.spelling import triton_name as _name

__all__ = ["DotLoopT"]


class DotLoopT:
    """The dots and tile loops of ``_KernelT`` (a mixin: it reads the kernel's ``k``,
    ``types``, ``block``, ``rank``, ``interpret``, ``dt``, ``emit``, ``put``, ``fresh``,
    ``body`` and ``widened``)."""

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
