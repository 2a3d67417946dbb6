"""Float-format classification of the commutation table's allow rows (split from
``commutation.py``, D381): each row in f32, bf16, f16, fp8e4m3 (E4M3FN) and fp8e5m2 under
the arithmetic contract — exact, exact-finite, ±0, rounding, NaN, n/a or unproven — by Z3 FP
proofs for comparison-only equations and a witness search re-checked by Z3 constant folding
for the arithmetic ones; the ``commutation.float_formats`` obligation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import numpy as np
import z3

from tilefoundry.semantics.combine_laws import order_reductions
from tilefoundry.semantics.ops.math import UNARY_PROPERTIES, BinaryKind, UnaryKind
from tilefoundry.semantics.typeinfer.commutation import REDS, TABLE, Row
from tilefoundry.smt.framework import Outcome, ProveCtx, obligation
from tilefoundry.smt.obligations.commutation_models import (
    _KERNELS,
    _NN_KERNEL,
    NN_PROPERTIES,
    Kernel,
    _max,
    _min,
    row_id,
)
from tilefoundry.smt.obligations.commutation_reals import _fmt_witness, _group_of, prove_row

# =============================================================================================
# float formats: per-format classification of the allow rows
# =============================================================================================
FORMATS = ("f32", "bf16", "f16", "fp8e4m3", "fp8e5m2")


_RNE = z3.RNE()


_F32 = z3.FPSort(8, 24)


_S44 = z3.FPSort(4, 4)


#: the Z3 carrier sort of each format; fp8e4m3 (E4M3FN) is the subset of FPSort(5, 4) that its
#: rounding fixes (see the module docstring)
_CARRIER = {"f32": (8, 24), "bf16": (8, 8), "f16": (5, 11), "fp8e4m3": (5, 4),
            "fp8e5m2": (5, 3)}


CLASSES = ("exact", "exact-finite", "±0", "rounding", "NaN", "n/a", "unproven")


class _Z3FP:
    """A format's values and arithmetic in Z3 FP sorts under the contract: widen to f32, one
    IEEE f32 operation, round once to the format; max / min propagate NaN, −0 < +0."""

    def __init__(self, fmt: str):
        self.fmt = fmt
        self.S = z3.FPSort(*_CARRIER[fmt])
        self.nan = z3.fpNaN(self.S)

    def round(self, r):
        if self.fmt == "f32":
            return r
        if self.fmt != "fp8e4m3":
            return z3.fpToFP(_RNE, r, self.S)
        small = z3.fpToFP(_RNE, z3.fpToFP(_RNE, r, _S44), self.S)  # quantum 2^-9 below 2^-6
        big = z3.fpToFP(_RNE, r, self.S)  # 3 fraction bits from 2^-6 up
        return z3.If(z3.Or(z3.fpIsNaN(r), z3.fpIsInf(r)), self.nan,
                     z3.If(z3.fpLT(z3.fpAbs(r), z3.FPVal(2.0 ** -6, _F32)), small,
                           z3.If(z3.fpGT(z3.fpAbs(big), z3.FPVal(448.0, self.S)), self.nan,
                                 big)))

    def valid(self, x):
        """x is a value of the format (E4M3FN: a fixed point of its rounding)."""
        if self.fmt != "fp8e4m3":
            return z3.BoolVal(True)
        back = z3.fpToFP(_RNE, z3.fpToFP(_RNE, x, _S44), self.S)
        return z3.Or(z3.fpIsNaN(x), z3.And(
            z3.Not(z3.fpIsInf(x)), z3.fpLEQ(z3.fpAbs(x), z3.FPVal(448.0, self.S)),
            z3.Or(z3.fpGEQ(z3.fpAbs(x), z3.FPVal(2.0 ** -6, self.S)), x == back)))

    def _w(self, x):
        return x if self.fmt == "f32" else z3.fpToFP(_RNE, x, _F32)

    def add(self, x, y):
        return self.round(z3.fpAdd(_RNE, self._w(x), self._w(y)))

    def sub(self, x, y):
        return self.round(z3.fpSub(_RNE, self._w(x), self._w(y)))

    def mul(self, x, y):
        return self.round(z3.fpMul(_RNE, self._w(x), self._w(y)))

    def div(self, x, y):
        return self.round(z3.fpDiv(_RNE, self._w(x), self._w(y)))

    def neg(self, x):
        return z3.fpNeg(x)

    def lt(self, x, y):  # the total order of non-NaN values with -0 < +0
        return z3.Or(z3.fpLT(x, y), z3.And(z3.fpIsZero(x), z3.fpIsZero(y),
                                           z3.fpIsNegative(x), z3.fpIsPositive(y)))

    def max(self, x, y):
        return z3.If(z3.Or(z3.fpIsNaN(x), z3.fpIsNaN(y)), self.nan, z3.If(self.lt(x, y), y, x))

    def min(self, x, y):
        return z3.If(z3.Or(z3.fpIsNaN(x), z3.fpIsNaN(y)), self.nan, z3.If(self.lt(y, x), y, x))

    def const(self, v: float):
        return z3.FPVal(v, self.S)


class _NP:
    """The same arithmetic evaluated with the reference (``apply_lowp``, ``cast``) on arrays."""

    def __init__(self, fmt: str):
        from tilefoundry.semantics.formats import DType

        self.dt = DType(fmt)

    def _f(self, x):
        from tilefoundry.semantics.dtypes import widen_to_f32

        return widen_to_f32(x)

    def _back(self, w):
        from tilefoundry.semantics.dtypes import cast

        return cast(np.asarray(w, np.float32), self.dt)

    def _op(self, fn, x, y):
        from tilefoundry.semantics.dtypes import apply_lowp

        return apply_lowp(fn, *np.broadcast_arrays(x, y))

    def add(self, x, y):
        return self._op(np.add, x, y)

    def sub(self, x, y):
        return self._op(np.subtract, x, y)

    def mul(self, x, y):
        return self._op(np.multiply, x, y)

    def div(self, x, y):
        return self._op(np.divide, x, y)

    def neg(self, x):
        return self._back(-self._f(x))

    def _pick(self, x, y, largest: bool):
        a, b = self._f(x), self._f(y)
        a, b = np.broadcast_arrays(a, b)
        nan = np.isnan(a) | np.isnan(b)
        lt = (a < b) | ((a == 0) & (b == 0) & np.signbit(a) & ~np.signbit(b))
        take_b = lt if largest else ((b < a) | ((a == 0) & (b == 0) & np.signbit(b) &
                                              ~np.signbit(a)))
        return self._back(np.where(nan, np.float32("nan"), np.where(take_b, b, a)))

    def max(self, x, y):
        return self._pick(x, y, True)

    def min(self, x, y):
        return self._pick(x, y, False)

    def const(self, v: float):
        return self._back(np.float32(v))


class _Abs:
    """Abstract rounding: exact real arithmetic followed by an uninterpreted ``rnd`` that is odd
    (RNE is symmetric) and, where ``monotone``, monotone non-decreasing."""

    def __init__(self, monotone: bool):
        self.monotone = monotone
        self.rnd = z3.Function("rnd", z3.RealSort(), z3.RealSort())
        self.apps: list = []

    def _r(self, x):
        self.apps.append(x)
        return self.rnd(x)

    def add(self, x, y):
        return self._r(x + y)

    def sub(self, x, y):
        return self._r(x - y)

    def mul(self, x, y):
        return self._r(x * y)

    def div(self, x, y):
        return self._r(x / y)

    def neg(self, x):
        return -x

    def max(self, x, y):
        return _max(x, y)

    def min(self, x, y):
        return _min(x, y)

    def const(self, v: float):
        return z3.RealVal(Fraction(v))

    def facts(self) -> list:
        pts = [*self.apps, *[-p for p in self.apps]]
        out = [self.rnd(-p) == -self.rnd(p) for p in self.apps]
        if self.monotone:
            for p, q in itertools.combinations(pts, 2):
                out += [z3.Implies(p <= q, self.rnd(p) <= self.rnd(q)),
                        z3.Implies(q <= p, self.rnd(q) <= self.rnd(p))]
        return out


@dataclass(frozen=True)
class _Template:
    """A float equation ``lhs = rhs`` over named inputs for two devices. ``compare``: only
    comparisons / selections (proved by Z3 FP directly); otherwise rounded arithmetic (witness
    search + Z3 re-check); ``abstract``: after the rounded operations only order / sign
    operations follow, so the abstract-rounding proof covers it (also with ±inf overflow)."""

    text: str
    inputs: tuple[str, ...]
    fn: Callable  # (backend, {name: value}) -> (lhs, rhs)
    compare: bool = False
    abstract: bool = False
    kernel: bool = False


def _t_reduce(r: str, which: str):
    def fn(B, v):
        red = getattr(B, {"sum": "add"}.get(r, r))
        if which == "mean":
            two = B.const(2.0)
            lhs = B.div(B.add(B.add(v["x10"], v["x20"]), B.add(v["x11"], v["x21"])), two)
            rhs = B.add(B.div(B.add(v["x10"], v["x11"]), two),
                        B.div(B.add(v["x20"], v["x21"]), two))
            return lhs, rhs
        return (red(red(v["x10"], v["x20"]), red(v["x11"], v["x21"])),
                red(red(v["x10"], v["x11"]), red(v["x20"], v["x21"])))
    return fn


def _t_rope(B, v):
    def out0(q0, q1):  # q*cos + rotate_half(q)*sin, element 0: q0*c - q1*s
        return B.sub(B.mul(q0, v["c"]), B.mul(q1, v["s"]))
    return (out0(B.add(v["q10"], v["q20"]), B.add(v["q11"], v["q21"])),
            B.add(out0(v["q10"], v["q11"]), out0(v["q20"], v["q21"])))


_TEMPLATES: dict[str, _Template] = {
    "add_both_sum": _Template(
        "(a1+a2)+(b1+b2) = (a1+b1)+(a2+b2)", ("a1", "a2", "b1", "b2"),
        lambda B, v: (B.add(B.add(v["a1"], v["a2"]), B.add(v["b1"], v["b2"])),
                      B.add(B.add(v["a1"], v["b1"]), B.add(v["a2"], v["b2"])))),
    **{f"add_{side}_{r}": _Template(
        f"{r}(a1,a2)+c = {r}(a1+c, a2+c)" if side == "lhs" else
        f"c+{r}(a1,a2) = {r}(c+a1, c+a2)", ("a1", "a2", "c"),
        (lambda B, v, _r=r: (B.add(getattr(B, _r)(v["a1"], v["a2"]), v["c"]),
                             getattr(B, _r)(B.add(v["a1"], v["c"]), B.add(v["a2"], v["c"]))))
        if side == "lhs" else
        (lambda B, v, _r=r: (B.add(v["c"], getattr(B, _r)(v["a1"], v["a2"])),
                             getattr(B, _r)(B.add(v["c"], v["a1"]), B.add(v["c"], v["a2"])))),
        abstract=True)
        for side in ("lhs", "rhs") for r in ("max", "min")},
    "mul_lhs_sum": _Template(
        "(a1+a2)·c = a1·c+a2·c", ("a1", "a2", "c"),
        lambda B, v: (B.mul(B.add(v["a1"], v["a2"]), v["c"]),
                      B.add(B.mul(v["a1"], v["c"]), B.mul(v["a2"], v["c"])))),
    "mul_rhs_sum": _Template(
        "c·(a1+a2) = c·a1+c·a2", ("a1", "a2", "c"),
        lambda B, v: (B.mul(v["c"], B.add(v["a1"], v["a2"])),
                      B.add(B.mul(v["c"], v["a1"]), B.mul(v["c"], v["a2"])))),
    "mma_input_acc_sum": _Template(
        "(a1+a2)·c + (d1+d2) = (a1·c+d1) + (a2·c+d2)", ("a1", "a2", "c", "d1", "d2"),
        lambda B, v: (B.add(B.mul(B.add(v["a1"], v["a2"]), v["c"]), B.add(v["d1"], v["d2"])),
                      B.add(B.add(B.mul(v["a1"], v["c"]), v["d1"]),
                            B.add(B.mul(v["a2"], v["c"]), v["d2"])))),
    "neg_sum": _Template(
        "-(a1+a2) = (-a1)+(-a2)", ("a1", "a2"),
        lambda B, v: (B.neg(B.add(v["a1"], v["a2"])), B.add(B.neg(v["a1"]), B.neg(v["a2"]))),
        abstract=True),
    **{f"mono_{r}": _Template(
        f"f({r}(a1,a2)) = {r}(f(a1), f(a2)), f monotone", ("a1", "a2"),
        lambda B, v, _r=r: (B.f(getattr(B, _r)(v["a1"], v["a2"])),
                            getattr(B, _r)(B.f(v["a1"]), B.f(v["a2"]))),
        compare=True, kernel=True) for r in ("max", "min")},
    **{f"reduce_{k}_{r}": _Template(
        (f"reduce_{k}(x1 ⊕ x2) = reduce_{k}(x1) ⊕ reduce_{k}(x2), ⊕ = {r}, a length-2 axis"),
        ("x10", "x11", "x20", "x21"), _t_reduce(r, k), compare=r != "sum")
        for k, r in (("sum", "sum"), ("mean", "sum"), ("max", "max"), ("min", "min"))},
    "rope": _Template(
        "rope(q1+q2) = rope(q1)+rope(q2), element 0: q0·c − q1·s",
        ("q10", "q11", "q20", "q21", "c", "s"), _t_rope),
    **{f"select_{r}": _Template(
        f"select(u1 ⊕ u2 | d1 ⊕ d2) = select(u1|d1) ⊕ select(u2|d2), ⊕ = {r}",
        ("u1", "u2", "d1", "d2"), lambda B, v: (None, None), compare=True)
        for r in REDS},
}


def _fp_template(row: Row) -> tuple[str, str | None] | None:
    """The float equation of an allow row (and the kernel of a monotone row), or None."""
    op, kind, pat, red = row.op, row.kind, row.pattern, row.reduction
    if op == "Binary" and kind == BinaryKind.ADD.value:
        return ("add_both_sum", None) if pat == "lhs+rhs" else (f"add_{pat}_{red}", None)
    if op == "Binary" and kind == BinaryKind.MUL.value and red == "sum":
        return f"mul_{pat}_sum", None
    if op == "MatMul" and red == "sum":
        return ("mul_lhs_sum" if pat == "a" else "mul_rhs_sum"), None
    if op == "Mma" and red == "sum":  # (a+acc) and (b+acc) alike: the product commutes
        return "mma_input_acc_sum", None
    props = UNARY_PROPERTIES.get(UnaryKind(kind)) if op == "Unary" else NN_PROPERTIES.get(op)
    if props is not None and "monotone" in props and red in order_reductions():
        return f"mono_{red}", (kind if op == "Unary" else _NN_KERNEL[op])
    if op == "Unary" and props is not None and "linear" in props and red == "sum":
        return "neg_sum", None
    if op == "Reduce":
        return f"reduce_{kind}_{red}", None
    if op == "RoPE" and red == "sum":
        return "rope", None
    if op in ("Gather", "InsertSlice", "CacheUpdate", "Select"):
        return f"select_{red}", None
    if op == "Scan":  # prefix 0 is x0 itself; prefix 1 is the length-2 reduction
        return f"reduce_{ {'add': 'sum'}.get(kind, kind)}_{red}", None
    return None


@dataclass
class FPClass:
    cls: str
    witness: str = ""
    how: str = ""


def _fmt_fp(x: float) -> str:
    if np.isnan(x):
        return "NaN"
    if x == 0:
        return "-0" if np.signbit(x) else "0"
    return repr(float(x))


def _def_facts(B: _Z3FP, f, pts: list, kernel: Kernel) -> list:
    """The kernel's exact float definition at every point it is applied to."""
    return [f(p) == kernel.fp_define(B, p) for p in pts]


def _mono_facts(B: _Z3FP, f, pts: list, kernel: Kernel) -> list:
    out = []
    for p in pts:
        nan_in = z3.fpIsNaN(p)
        if kernel.nan_below_zero:
            nan_in = z3.Or(nan_in, z3.fpLT(p, z3.FPVal(0.0, B.S)))
        out += [z3.fpIsNaN(f(p)) == nan_in]
    for p, q in itertools.combinations(pts, 2):
        ok = z3.And(z3.Not(z3.fpIsNaN(f(p))), z3.Not(z3.fpIsNaN(f(q))))
        out += [z3.Implies(z3.And(ok, z3.Or(B.lt(p, q), p == q)),
                           z3.Or(B.lt(f(p), f(q)), f(p) == f(q))),
                z3.Implies(z3.And(ok, z3.Or(B.lt(q, p), p == q)),
                           z3.Or(B.lt(f(q), f(p)), f(p) == f(q)))]
    return out


def _classify_compare(ctx: ProveCtx, tname: str, fmt: str, kname: str | None) -> FPClass:
    """Comparison-only equations: Z3 FP proofs, finite inputs first, then every value."""
    t = _TEMPLATES[tname]
    B = _Z3FP(fmt)
    xs = {n: z3.FP(f"{n}_{fmt}", B.S) for n in t.inputs}
    side: list = []
    if tname.startswith("select_"):
        # a selection picks one operand's pieces: with the choice fixed (both cases), both
        # sides are the same term
        r = tname.split("_")[1]
        red = getattr(B, {"sum": "add"}.get(r, r))
        for picked in (("u1", "u2"), ("d1", "d2")):
            lhs = red(xs[picked[0]], xs[picked[1]])
            st, _ = ctx.prove(lhs == red(xs[picked[0]], xs[picked[1]]),
                              f"fp:{tname}:{fmt}:{picked[0]}", assumptions=tuple(side))
            if st != "proved":  # pragma: no cover - identical terms
                return FPClass("unproven", "", f"selection case {picked}: {st}")
        return FPClass("exact", "", "a selection commutes with every elementwise reduction "
                       "(proved per selection case)")
    if t.kernel:
        k = _KERNELS[kname]
        f = z3.Function(f"{kname}_{fmt}", B.S, B.S)
        B.f = f  # type: ignore[attr-defined]
    lhs, rhs = t.fn(B, xs)
    if t.kernel:
        r = tname.split("_")[1]
        pts = [*xs.values(), getattr(B, r)(xs["a1"], xs["a2"])]
        side += _def_facts(B, f, pts, k) if k.fp_define else _mono_facts(B, f, pts, k)
    finite = [z3.Not(z3.Or(z3.fpIsNaN(x), z3.fpIsInf(x))) for x in xs.values()]
    valid = [B.valid(x) for x in xs.values()]
    tag = f"fp:{tname}:{'nan<0' if t.kernel and _KERNELS[kname].nan_below_zero else '-'}:{fmt}"
    # every value of the carrier sort first (a superset of E4M3FN's: a proof covers it); on a
    # witness, the format's values (finite inputs first)
    finite_exact = False
    fin, nonfin = _candidates(fmt)
    nice = [z3.Or(*[x == B.const(c) for c in fin[:6]]) for x in xs.values()]
    nice_all = [z3.Or(*[x == B.const(c) for c in fin[:6] + nonfin]) for x in xs.values()]
    found: dict | None = None
    for stage, extra in (("carrier", []), ("small", nice), ("finite", valid + finite),
                         ("small-all", nice_all), ("all", valid)):
        s = ctx.solver()
        s.add(*side, *extra, lhs != rhs)
        res = ctx.check(s, f"{tag}:{stage}")
        if res == z3.unknown:
            return FPClass("unproven", "", f"solver gave up ({stage})")
        if res == z3.unsat and stage == "carrier":
            return FPClass("exact", "", "Z3 FP proof over every value" + (
            "" if not t.kernel else " (f monotone; NaN exactly for NaN inputs and x < 0)"
            if _KERNELS[kname].nan_below_zero else " (f monotone; NaN only for NaN inputs)"))
        if res == z3.sat and stage != "carrier":
            found = {"stage": stage, "m": s.model()}
            if stage.startswith("small"):  # the canonical (first in order) small witness
                found["m"] = _first_witness(ctx, side, lhs, rhs, xs, B,
                                            fin[:6] + (nonfin if stage == "small-all" else []),
                                            tag) or found["m"]
            break
        if res == z3.unsat and stage == "finite":
            finite_exact = True
    if found is None:
        return FPClass("exact", "", "Z3 FP proof over every value of the format")
    m = found["m"]
    vals = {n: m.eval(x, model_completion=True) for n, x in xs.items()}
    lv, rv = m.eval(lhs, model_completion=True), m.eval(rhs, model_completion=True)

    def show(v) -> str:  # a kernel's value is the model's: show only its class
        txt = _z3fp_str(v)
        return txt if not t.kernel or txt == "NaN" else "f(..) = a non-NaN value"
    wit = ", ".join(f"{n} = {_z3fp_str(v)}" for n, v in vals.items()) + \
        f": lhs = {show(lv)}, rhs = {show(rv)}"
    finite_in = all(_z3fp_str(v) not in ("NaN", "inf", "-inf") for v in vals.values())
    if not finite_in and (finite_exact or found["stage"] == "all"):
        return FPClass("exact-finite", wit, "Z3 FP proof for finite inputs; a non-finite "
                       "witness")
    return FPClass(_category(lv, rv), wit, "Z3 FP witness")


def _first_witness(ctx: ProveCtx, side: list, lhs, rhs, xs: dict, B: _Z3FP,
                   cand: list[float], tag: str) -> z3.ModelRef | None:
    """The first witness in the fixed enumeration order of candidate inputs (so the reported
    witness does not depend on the solver's model choice)."""
    n = len(xs)
    order = sorted(itertools.product(range(len(cand)), repeat=n), key=lambda t: (max(t), sum(t)))
    for combo in order:
        s = ctx.solver()
        s.add(*side, lhs != rhs, *[x == B.const(cand[i]) for x, i in zip(xs.values(), combo,
                                                                        strict=True)])
        if ctx.check(s, f"{tag}:first") == z3.sat:
            return s.model()
    return None


def _z3fp_str(v) -> str:
    v = z3.simplify(v)
    if z3.is_true(z3.simplify(z3.fpIsNaN(v))):
        return "NaN"
    if z3.is_true(z3.simplify(z3.fpIsInf(v))):
        return "-inf" if z3.is_true(z3.simplify(z3.fpIsNegative(v))) else "inf"
    if z3.is_true(z3.simplify(z3.fpIsZero(v))):
        return "-0" if z3.is_true(z3.simplify(z3.fpIsNegative(v))) else "0"
    r = z3.simplify(z3.fpToReal(v))
    return _fmt_fp(float(r.as_fraction()))


def _category(lv, rv) -> str:
    ln = z3.is_true(z3.simplify(z3.fpIsNaN(lv)))
    rn = z3.is_true(z3.simplify(z3.fpIsNaN(rv)))
    if ln != rn:
        return "NaN"
    if z3.is_true(z3.simplify(z3.fpEQ(lv, rv))):
        return "±0"
    return "rounding"


@cache
def _candidates(fmt: str) -> tuple[list[float], list[float]]:
    """Characteristic finite values of a format, simplest first, and its non-finite ones."""
    from tilefoundry.semantics.dtypes import cast, widen_to_f32
    from tilefoundry.semantics.formats import DType

    dt = DType(fmt)
    if fmt == "f32":
        fi = np.finfo(np.float32)
        vmax, tiny, ulp = float(fi.max), float(fi.smallest_subnormal), float(fi.eps)
    else:
        codes = np.arange(1 << dt.info.bits, dtype=np.uint32)
        codes = codes.astype(np.uint16 if dt.info.bits == 16 else np.uint8)
        vals = widen_to_f32(codes.view(dt.info.storage)).astype(np.float64)
        fin = vals[np.isfinite(vals)]
        vmax, tiny = float(fin.max()), float(fin[fin > 0].min())
        ulp = float(fin[fin > 1].min()) - 1.0
    big = 2.0 / ulp
    fin = [1.0, -1.0, 0.0, -0.0, 3.0, -3.0, 1.0 + ulp, -(1.0 + ulp), big, -big, vmax, -vmax,
           tiny, -tiny]
    for v in fin:  # every candidate is a value of the format
        w = float(widen_to_f32(cast(np.float32(v), dt)))
        assert w == v and np.signbit(w) == np.signbit(v), (fmt, v)
    nonfin = [float("nan")] + ([float("inf"), float("-inf")] if dt.info.has_inf else [])
    return fin, nonfin


def _search_fp(tname: str, fmt: str, nonfinite: bool) -> dict[str, tuple[dict, float, float]]:
    """The simplest witness per category (rounding / NaN / ±0) among candidate inputs."""
    from tilefoundry.semantics.dtypes import cast, widen_to_f32
    from tilefoundry.semantics.formats import DType

    t = _TEMPLATES[tname]
    fin, nonfin = _candidates(fmt)
    k = len(t.inputs)
    m = len(fin)
    while m ** k > 120_000:
        m -= 1
    cand = fin[:m] + (nonfin if nonfinite else [])
    idx = np.array(list(itertools.product(range(len(cand)), repeat=k)), dtype=np.int64)
    if nonfinite:
        idx = idx[(idx >= m).any(axis=1)]
    order = np.lexsort((idx.sum(axis=1), idx.max(axis=1)))
    idx = idx[order]
    dt = DType(fmt)
    arr = cast(np.array(cand, np.float32), dt)
    v = {n: arr[idx[:, j]] for j, n in enumerate(t.inputs)}
    lhs, rhs = t.fn(_NP(fmt), v)
    lw, rw = widen_to_f32(lhs), widen_to_f32(rhs)
    ln, rn = np.isnan(lw), np.isnan(rw)
    same = (ln & rn) | ((lw == rw) & (np.signbit(lw) == np.signbit(rw)))
    cats = {"NaN": ~same & (ln ^ rn), "±0": ~same & ~ln & ~rn & (lw == rw),
            "rounding": ~same & ~ln & ~rn & (lw != rw)}
    out = {}
    for c, mask in cats.items():
        hit = np.flatnonzero(mask)
        if hit.size:
            i = int(hit[0])
            out[c] = ({n: float(cand[idx[i, j]]) for j, n in enumerate(t.inputs)},
                      float(lw[i]), float(rw[i]))
    return out


def _recheck(ctx: ProveCtx, tname: str, fmt: str, inputs: dict[str, float]) -> str:
    """Re-check a witness by Z3 constant folding of the FP-sort encoding."""
    t = _TEMPLATES[tname]
    B = _Z3FP(fmt)
    xs = {n: B.const(val) for n, val in inputs.items()}
    lhs, rhs = t.fn(B, xs)
    eq = z3.simplify(lhs == rhs)
    if not z3.is_false(eq):
        s = ctx.solver()
        s.add(lhs == rhs)
        if ctx.check(s, f"fp:{tname}:{fmt}:recheck") != z3.unsat:
            raise RuntimeError(f"Z3 FP encoding disagrees with the reference on {tname} "
                               f"{fmt} {inputs}")
    return f"lhs = {_z3fp_str(lhs)}, rhs = {_z3fp_str(rhs)}"


def _classify_arith(ctx: ProveCtx, tname: str, fmt: str) -> FPClass:
    t = _TEMPLATES[tname]
    hits = _search_fp(tname, fmt, nonfinite=False)

    def wit(c: str) -> str:
        inputs = hits[c][0]
        return ", ".join(f"{n} = {_fmt_fp(x)}" for n, x in inputs.items()) + ": " + \
            _recheck(ctx, tname, fmt, inputs)

    for c in ("rounding", "NaN"):
        if c in hits:
            return FPClass(c, wit(c), "witness search (reference arithmetic), re-checked in Z3")
    if not t.abstract:
        if "±0" in hits:
            return FPClass("±0", wit("±0"), "witness search; numeric exactness not proved")
        return FPClass("unproven", "", "no witness among the candidates and no proof")
    # abstract rounding proof: odd for every format, monotone where overflow is ordered
    monotone = fmt != "fp8e4m3"
    A = _Abs(monotone)
    xs = {n: z3.Real(f"{n}_abs") for n in t.inputs}
    lhs, rhs = t.fn(A, xs)
    st, _ = ctx.prove(lhs == rhs, f"fp:{tname}:{fmt}:abstract", assumptions=tuple(A.facts()))
    how = f"abstract proof: every {'monotone, ' if monotone else ''}odd rounding"
    if st != "proved":
        return FPClass("±0" if "±0" in hits else "unproven", wit("±0") if "±0" in hits else "",
                       f"{how} does not apply ({st}); no finite witness among the candidates")
    if "±0" in hits:
        return FPClass("±0", wit("±0"), how + " (numerically exact)")
    more = _search_fp(tname, fmt, nonfinite=True)
    if more:
        hits = more
        c = next(iter(more))
        return FPClass("exact-finite", wit(c), how + " for finite values; a non-finite witness")
    return FPClass("exact-finite", "", how + " for finite values; no non-finite witness among "
                   "±inf / NaN")


_FP_CACHE: dict[tuple[str, str, object, int], FPClass] = {}


def _classify(ctx: ProveCtx, tname: str, fmt: str, kname: str | None) -> FPClass:
    # monotone kernels differ only in where their NaN region starts; a kernel with an exact
    # float definition is its own case
    kkey = None if kname is None else (_KERNELS[kname].nan_below_zero,
                                       kname if _KERNELS[kname].fp_define else None)
    key = (tname, fmt, kkey, ctx.rlimit)
    if key not in _FP_CACHE:
        t = _TEMPLATES[tname]
        _FP_CACHE[key] = (_classify_compare(ctx, tname, fmt, kname) if t.compare else
                          _classify_arith(ctx, tname, fmt))
    return _FP_CACHE[key]


def classify_formats(ctx: ProveCtx | None = None) -> dict[Row, dict[str, FPClass]]:
    """The float classification of every allow row in every format (``n/a`` where the row does
    not hold over the reals — a counterexample —, ``unproven`` where the real proof did not
    finish: an ``unknown`` is never an answer)."""
    ctx = ctx or ProveCtx()
    out: dict[Row, dict[str, FPClass]] = {}
    for row in TABLE:
        if not row.allow:
            continue
        real = prove_row(ctx, row)
        tk = _fp_template(row)
        per: dict[str, FPClass] = {}
        for fmt in FORMATS:
            if real.status == "counterexample":
                per[fmt] = FPClass("n/a", "", f"the row does not hold over the reals: "
                                   f"{_fmt_witness(real.values)}")
            elif real.status != "proved":
                # the solver gave up (or the row could not be encoded): no answer, and never
                # read as one ("does not hold" needs a counterexample)
                per[fmt] = FPClass("unproven", "", f"the real-arithmetic proof did not "
                                   f"finish ({real.status}: {real.detail})")
            elif tk is None:
                per[fmt] = FPClass("unproven", "", "no float equation for this row")
            else:
                per[fmt] = _classify(ctx, tk[0], fmt, tk[1])
        out[row] = per
    return out


def _row_label(row: Row) -> str:
    kind = "" if row.kind == "-" else f" {row.kind}"
    return f"{row.op}{kind} ({row.pattern}; {row.reduction})"


def classification_table(ctx: ProveCtx | None = None) -> str:
    """The per-format classification of every allow row as Markdown (generated into
    docs/commutation-proofs.md)."""
    cls = classify_formats(ctx)
    lines = ["| allow row | float equation | " + " | ".join(FORMATS) + " |",
             "|---|---|" + "---|" * len(FORMATS)]
    used: dict[tuple[str, str | None], None] = {}
    for row, per in cls.items():
        tk = _fp_template(row)
        eq = "—"
        if tk is not None:
            used[tk] = None
            eq = _TEMPLATES[tk[0]].text.replace("|", "\\|") + \
                (f" (f = {tk[1]})" if tk[1] else "")
        lines.append(f"| {_row_label(row)} | {eq} | " +
                     " | ".join(per[f].cls for f in FORMATS) + " |")
    counts = {f: {c: 0 for c in CLASSES} for f in FORMATS}
    for per in cls.values():
        for f, c in per.items():
            counts[f][c.cls] += 1
    lines += ["", "Counts (allow rows per class):", "",
              "| class | " + " | ".join(FORMATS) + " |", "|---|" + "---|" * len(FORMATS)]
    for c in CLASSES:
        if any(counts[f][c] for f in FORMATS):
            lines.append(f"| {c} | " + " | ".join(str(counts[f][c]) for f in FORMATS) + " |")
    lines += ["", "Witnesses and proofs (one per float equation and format):", ""]
    groups: dict[tuple[str, object], list[str]] = {}
    for tname, kname in used:
        key = (tname, None if kname is None else (
            _KERNELS[kname].nan_below_zero, kname if _KERNELS[kname].fp_define else None))
        groups.setdefault(key, [])
        if kname is not None and kname not in groups[key]:
            groups[key].append(kname)
    for (tname, nanflag), kernels in groups.items():
        t = _TEMPLATES[tname]
        which = "" if not kernels else (
            f" with f ∈ {{{', '.join(kernels)}}}" +
            (" (NaN for x < 0)" if nanflag[0] else
             " (its exact float definition)" if nanflag[1] else " (NaN only for NaN)"))
        lines.append(f"- `{t.text}`{which}:")
        for f in FORMATS:
            c = _FP_CACHE[(tname, f, nanflag, (ctx or ProveCtx()).rlimit)]
            lines.append(f"  - {f}: **{c.cls}** — {c.how}" + (f"; `{c.witness}`" if c.witness
                                                               else ""))
    for row, per in cls.items():
        if per[FORMATS[0]].cls == "n/a":
            lines.append(f"- {_row_label(row)}: **n/a** — the row does not hold over the "
                         f"reals (its counterexample: `commutation.{_group_of(row)}`)")
    return "\n".join(lines)


@obligation("commutation.float_formats", expect="report")
def float_formats(ctx: ProveCtx) -> Outcome:
    """Per-format float classification of every allow row (exact / exact-finite / ±0 /
    rounding / NaN), proofs in Z3 FP sorts and witnesses re-checked in Z3."""
    cls = classify_formats(ctx)
    sub = [(f"{row_id(row)} [{f}]", c.cls) for row, per in cls.items() for f, c in per.items()]
    counts = {f: {} for f in FORMATS}
    for per in cls.values():
        for f, c in per.items():
            counts[f][c.cls] = counts[f].get(c.cls, 0) + 1
    detail = "\n".join(f"{f}: " + ", ".join(f"{c} {n}" for c, n in sorted(v.items()))
                       for f, v in counts.items())
    if any(c.cls == "unproven" for per in cls.values() for c in per.values()):
        return Outcome("failed", detail, sub=sub)
    return Outcome("report", detail, sub=sub)
