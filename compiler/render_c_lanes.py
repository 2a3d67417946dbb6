"""The SIMD C renderer's lane-wise instructions (``render_c.KernelC`` inherits ``LanesC``):
one lane's C expression per kernel-IR instruction of a run (loads, stores, conversions,
arithmetic, selects, math functions), spelling the plans of ``render_decisions`` (D500) with
the C runtime's helpers (``c_runtime/tf_numerics.h``, ``tf_prelude_shared.h``). Split from
``render_c`` by concern (issue 36); ``render_cuda.KernelCuda`` overrides ``l_Load``, ``store``,
``farith`` and ``fsqrt``.
"""

from __future__ import annotations

from tilefoundry.compiler import c_vecmath, kir, spelling
from tilefoundry.compiler import render_decisions as rd
from tilefoundry.compiler.kir import root_of
from tilefoundry.compiler.spelling import CTYPE, UTYPE, c_literal

__all__ = ["LanesC"]

#: the C runtime's rounding-mode constants
_RND = {"nearest": "TF_RN", "up": "TF_RU", "down": "TF_RD"}
_ARITH = spelling.ARITH
_CMP = spelling.CMP
_LOGIC = spelling.LOGIC
_MATH64 = spelling.C_MATH64
#: ``render_decisions.CAST_PATHS`` in C (``float_float`` is ``round_f32``): {v} the operand
#: (``cast_operand``), {ct} / {wt} the C types of the destination / of the integer width
#: ``{wide}`` an integer source converts through
_CAST = {"float_bool": "(uint8_t)({v} != 0.0f)", "float_int": "tf_f32_to_{dst}({v})",
         "int_bool": "(uint8_t)({v} != 0)", "int_int": "({ct}){v}",
         "int_f32": "tf_{wide}_to_f32(({wt}){v})",
         "int_narrow": "tf_{wide}_to_{dst}(({wt}){v}, {sat}{rnd})"}


class LanesC:
    """The lane-wise half of ``KernelC`` (a mixin: it reads the kernel's ``k``, ``bm``,
    ``roots``, ``snap``, ``dt``, ``cid``, ``unsupported``, ``farith`` and ``fsqrt``)."""

    # -- lane-wise instructions ---------------------------------------------------------------
    def gcoord(self, d: int) -> str:
        return f"(b{d} + c{d})" if self.k.domain[d] > 1 else "0"

    def ptr(self, buffer: str, write: bool = False) -> tuple[str, int, int, str]:
        """(C pointer expression, root size, base element offset, element C type)."""
        root = root_of(buffer, self.bm)
        ct = CTYPE[root.dtype]
        base = self.snap.get(root.name) if not write else None
        p = base or f"P[{self.roots[root.name]}]"
        q = "" if write else "const "
        return f"(({q}{ct} *){p})", rd.root_size(root), self.bm[buffer].offset, ct

    def in_bounds(self, ins: kir.Load | kir.Store, base: int, size: int) -> bool:
        if ins.index:
            return False
        lo = hi = base + ins.offset
        for d, s in enumerate(ins.strides):
            if not s:
                continue
            top = -(-self.k.domain[d] // self.k.block[d]) * self.k.block[d] - 1
            lo += min(0, s * top)
            hi += max(0, s * top)
        return lo >= 0 and hi < size

    def offset_expr(self, ins: kir.Load | kir.Store, base: int, ref) -> str:
        terms = [f"{base + ins.offset}ll"]
        terms += [f"{self.gcoord(d)} * {s}ll" for d, s in enumerate(ins.strides) if s]
        terms += [f"(int64_t){ref(n)} * {s}ll" for n, s in ins.index]
        return " + ".join(terms)

    def store(self, ins: kir.Store, ref) -> list[str]:
        p, size, base, _ = self.ptr(ins.buffer, write=True)
        if size == 0:
            return []
        conds = []
        if ins.mask:
            conds.append(ref(ins.mask))
        if not self.in_bounds(ins, base, size):
            conds.append(f"o >= 0 && o < {size}ll")
        cond = " && ".join(f"({c})" for c in conds) or "1"
        return [f"{{ const int64_t o = {self.offset_expr(ins, base, ref)}; "
                f"if ({cond}) {p}[o] = {ref(ins.value)}; }}"]

    def lane_expr(self, ins: kir.Instr, ref) -> tuple[str, list[str]]:
        fn = getattr(self, "l_" + type(ins).__name__)
        return fn(ins, ref)

    def l_Coord(self, ins: kir.Coord, ref) -> tuple[str, list[str]]:
        return self.gcoord(ins.axis), []

    def l_EdgeMask(self, ins: kir.EdgeMask, ref) -> tuple[str, list[str]]:
        conds = [f"({self.gcoord(d)} < {self.k.domain[d]}ll)" for d in ins.axes
                 if self.k.domain[d] > 1]
        return "(uint8_t)(" + (" && ".join(conds) if conds else "1") + ")", []

    def l_Load(self, ins: kir.Load, ref) -> tuple[str, list[str]]:
        p, size, base, _ = self.ptr(ins.buffer)
        dt = self.bm[ins.buffer].dtype
        other = c_literal(ins.other, dt)
        if size == 0:
            return other, []
        o = f"o{self.cid(ins.out)}"
        pre = [f"int64_t {o} = {self.offset_expr(ins, base, ref)};"]
        if not self.in_bounds(ins, base, size):
            pre.append(f"{o} = {o} < 0 ? 0 : ({o} > {size - 1}ll ? {size - 1}ll : {o});")
        if ins.mask:
            ld = f"l{self.cid(ins.out)}"
            pre.append(f"const {CTYPE[dt]} {ld} = {p}[{o}];")
            return f"{ref(ins.mask)} ? {ld} : {other}", pre
        return f"{p}[{o}]", pre

    def l_Broadcast(self, ins: kir.Broadcast, ref) -> tuple[str, list[str]]:
        return ref(ins.x), []

    def widened(self, x: str, src: str) -> str:
        if src == "f32":
            return x
        if src in rd.WIDEN_SOURCES:
            return f"tf_{src}_to_f32({x})"
        raise self.unsupported("Widen", f"widening from {src}")

    def l_Widen(self, ins: kir.Widen, ref) -> tuple[str, list[str]]:
        src = self.dt(ins.x)
        if src == "f32" and ins.to == "f64":
            return f"(double){ref(ins.x)}", []
        w = self.widened(ref(ins.x), src)
        return (f"(double){w}" if ins.to == "f64" else w), []

    def round_f32(self, w: str, to: str, overflow: str, rounding: str = "nearest") -> str:
        plan = rd.round_plan(to, overflow, rounding)
        if plan is None:
            raise self.unsupported("Round", f"rounding to {to}")
        return self.spell_round(w, plan)

    @staticmethod
    def spell_round(w: str, plan: rd.RoundPlan) -> str:
        sat = "TF_SATURATE" if plan.saturate else "TF_NONFINITE"
        return f"tf_f32_to_{plan.to}({w}, {sat}, " + \
            (f"{_RND[plan.rounding]})" if plan.path == "e8m0" else "0)")

    def kernel_round(self, w: str, to: str, overflow: str) -> str:
        """An f32 value rounded to ``to`` inside a kernel (a kernel-IR ``Round``, a narrow math
        result) — not an explicit ``Cast``; a spelling may render it its own way (D525)."""
        return self.round_f32(w, to, overflow)

    def l_Round(self, ins: kir.Round, ref) -> tuple[str, list[str]]:
        x, src = ref(ins.x), self.dt(ins.x)
        if rd.round_source(src) == "f32":
            return self.kernel_round(x, ins.to, ins.overflow), []
        if ins.to == "f32":  # from f64
            return (f"(float){x}" if ins.overflow == "nonfinite" else
                    f"tf_f32_to_f32((float){x}, TF_SATURATE, 0)"), []
        return self.round_f32(f"tf__rf64_odd({x})", ins.to, ins.overflow), []

    def l_Cast(self, ins: kir.Cast, ref) -> tuple[str, list[str]]:
        return self.cast_expr(ref(ins.x), self.dt(ins.x), ins.to, ins.overflow,
                              ins.rounding), []

    def cast_expr(self, x: str, src: str, dst: str, overflow: str, rounding: str) -> str:
        plan = rd.cast_plan(src, dst)
        v = rd.cast_operand(plan, x, src, "(int32_t){}".format, self.widened)
        if plan.path == "float_float":
            return self.round_f32(v, dst, overflow, rounding)
        return _CAST[plan.path].format(
            v=v, dst=dst, ct=CTYPE[dst], wide=plan.wide, wt=CTYPE.get(plan.wide),
            sat="TF_SATURATE" if overflow == "saturate" else "TF_NONFINITE",
            rnd=f", {_RND[rounding]}" if dst == "f8e8m0" else "")

    def l_BinOp(self, ins: kir.BinOp, ref) -> tuple[str, list[str]]:
        a, b, k, dt = ref(ins.a), ref(ins.b), ins.kind, self.dt(ins.a)
        form = rd.binop_form(k, dt)
        if form == "cmp":
            return f"(uint8_t)({a} {_CMP[k]} {b})", []
        if form == "logic":
            return f"(uint8_t)({a} {_LOGIC[k]} {b})", []
        if form == "farith":
            return self.farith(k, a, b, dt), []
        if form == "fminmax":
            return f"tf__{'f' if dt == 'f32' else 'd'}{k}({a}, {b})", []
        if form == "bool_minmax":
            return f"(uint8_t)({a} {_LOGIC[rd.BOOL_MINMAX[k]]} {b})", []
        if form is not None:  # an integer dtype
            ct, ut = CTYPE[dt], UTYPE[dt]
            return {"int_wrap": lambda: f"({ct})(({ut}){a} {_ARITH[k]} ({ut}){b})",
                    "int_minmax": lambda: f"({a} {'<' if k == 'min' else '>'} {b} ? {a} : {b})",
                    "int_floordiv": lambda: f"tf__{k}_{ct}({a}, {b})"}[form](), []
        raise self.unsupported("BinOp", f"{k} on {dt}")

    def l_UnOp(self, ins: kir.UnOp, ref) -> tuple[str, list[str]]:
        x, k, dt = ref(ins.x), ins.kind, self.dt(ins.x)
        if k == "not":
            return f"(uint8_t)!{x}", []
        if dt in ("f32", "f64"):
            f = "f" if dt == "f32" else ""
            zero = f"0.0{f}"
            expr = {"neg": f"-{x}", "abs": f"fabs{f}({x})", "ceil": f"ceil{f}({x})",
                    "round": f"rint{f}({x})", "relu": f"({x} < {zero} ? {zero} : {x})",
                    "square": self.farith("mul", x, x, dt),
                    "sqrt": self.fsqrt(x, dt)}.get(k)
            if expr is not None:
                return expr, []
        elif kir.is_int(dt):
            ct, ut = CTYPE[dt], UTYPE[dt]
            neg = f"({ct})(({ut})0 - ({ut}){x})"
            expr = {"neg": neg, "abs": x if dt == "u8" else f"({x} < 0 ? {neg} : {x})",
                    "ceil": x, "round": x, "relu": f"({x} < 0 ? ({ct})0 : {x})",
                    "square": f"({ct})(({ut}){x} * ({ut}){x})"}.get(k)
            if expr is not None:
                return expr, []
        raise self.unsupported("UnOp", f"{k} on {dt}")

    def l_Select(self, ins: kir.Select, ref) -> tuple[str, list[str]]:
        return f"{ref(ins.cond)} ? {ref(ins.a)} : {ref(ins.b)}", []

    def l_Bitcast(self, ins: kir.Bitcast, ref) -> tuple[str, list[str]]:
        return f"tf__bitcast_{ins.to}({ref(ins.x)})", []

    def l_Math(self, ins: kir.Math, ref) -> tuple[str, list[str]]:
        x, dt = ref(ins.x), self.dt(ins.x)
        # the f32 narrow forms (D519): the result is only rounded to bf16 / f16 (lemma B)
        nf = self.NARROW_MATH and ins.fn in spelling.TRITON_NARROW_F32_MATH and (
            dt in c_vecmath.NARROW_DTYPES or (dt == "f32" and ins.within is not None))
        vexp = (self.vec_math or self.NARROW_MATH) and ins.fn == "exp" and \
            dt in c_vecmath.VEC_EXP_DTYPES
        plan = rd.math_plan(ins.fn, dt, nf or vexp, _MATH64)
        if plan is None:
            raise self.unsupported("Math", f"{ins.fn} on {dt}")
        if plan.form == "f32":
            w = self.widened(x, dt)
            # f32 exp within 1 ulp32 (D400), or the narrow form (D519)
            v = f"tf__{ins.fn}_nf({w})" if nf else f"tf__expf_v({w})"
            return (self.kernel_round(v, dt, "nonfinite") if plan.narrow else v), []
        if plan.form == "f64":
            return f"{_MATH64[ins.fn]}({x})", []
        v = f"{_MATH64[ins.fn]}((double){self.widened(x, dt)})"
        if dt == "f32":
            return f"tf__rf64_f32({v})", []
        return self.round_f32(f"tf__rf64_odd({v})", dt, "nonfinite"), []
