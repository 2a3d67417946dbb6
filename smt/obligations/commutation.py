"""Partial commutation: every row of the commutation table proved or refuted over the reals, the
per-format float classification of the allow rows, the table's coverage of the type rules, and
Gather's Split → Partial(sum) migration.

The table under check is imported (``semantics/typeinfer/commutation.py``, ``TABLE``); nothing of
it is restated here. A row ``(op, kind, pattern, reduction, allow)`` claims, for the operands named
by ``pattern`` carrying ``Partial(⊕)`` on one mesh axis (every other value operand replicated):

    op(⊕ᵢ xᵢ, c) = ⊕ᵢ op(xᵢ, c)        for every device count n ≥ 1.

**Allow rows: the homomorphism step and induction.** An allow row is proved over the reals for two
symbolic pieces — ``F(a ⊕ b) = F(a) ⊕ F(b)`` (one Partial operand, replicated operands fixed) or
``F(a₁ ⊕ a₂, b₁ ⊕ b₂) = F(a₁, b₁) ⊕ F(a₂, b₂)`` (several Partial operands) — with the pieces
arbitrary. Since ⊕ ∈ {+, max, min} is associative, every n follows by induction: n = 1 is
trivial, and ``F(⊕ᵢ₌₁ⁿ⁺¹ xᵢ) = F((⊕ᵢ₌₁ⁿ xᵢ) ⊕ xₙ₊₁) = F(⊕ᵢ₌₁ⁿ xᵢ) ⊕ F(xₙ₊₁) = ⊕ᵢ₌₁ⁿ⁺¹ F(xᵢ)``
(the step applied with its first piece ``⊕ᵢ₌₁ⁿ xᵢ``, then the induction hypothesis). The step is
one Z3 query (``ctx.prove``) per row, over small symbolic shapes: scalars for the pointwise ops, a
length-2 tensor axis for Reduce / SoftMax / the norms, a 1-D dot product for MatMul (and Conv2D
with its bias), a 3-row table with a symbolic in-range index for Gather, a 3-element destination
with a symbolic in-range window for InsertSlice / CacheUpdate, head dim 2 with two cache rows and
a symbolic position for RoPE.

**Op models.** Binary kinds, neg, abs, square, relu, ceil, round (ties to even), sqrt / rsqrt
(``y ≥ 0 ∧ y² = x``) and the tensor / nn ops are modelled by their definitions. In an allow proof
a kind whose property set (``UNARY_PROPERTIES``, or ``NN_PROPERTIES`` below for the nn
activations, quoting the HIR nn entry) contains ``monotone`` is an *uninterpreted* function,
constrained monotone non-decreasing (the axiom instantiated at every pair of its application
points, which is sound for a proof) — nothing per kind. Transcendental kernels (exp, exp2, log,
log2, sigmoid, tanh, gelu, silu, SoftMax's exp, the norms' ``1/√(t+ε)``) are uninterpreted
everywhere; a *refutation* may use true facts about them (``_KERNELS``: positivity, strict
monotonicity, domain, and rigorous rational enclosures — mpmath interval arithmetic — at anchor
points: the integers −4…4, and for the norms every mean square a small-integer witness reaches).

**Reject rows.** A counterexample is searched with two devices in stages — integer values with
|v| ≤ 1, 2, 4, then multiples of 1/2 with |v| ≤ 2, then unbounded reals — the smallest stage first
(a minimized witness; small integers are exact in every float format too), reporting the pieces,
the replicated operands, the device count and both sides. Where an uninterpreted kernel occurs,
the witness's inputs are fixed and the inequality is then *proved* for every function satisfying
the kernel's facts (so it holds for the real kernel). A mixed row (Partial operands with
different reductions) is refuted when, for one assignment of reductions, some output fails under
every reduction the result could be claimed to carry. When the smallest stage finds nothing, the
equation is proved for two arbitrary pieces if it can be, and the row is recorded
``sound-but-rejected`` (the spec rejects it conservatively, e.g. Binary max with one Partial max
and a replicated operand): reported, never a failure. Bool values reduce by sum = max = OR
(torch's saturating bool add) and min = AND — the verdicts of the bool rows rest on that reading.
Refutations may look at one output element only where the others mirror it (SoftMax, the norms).

**Float formats.** Each allow row is also classified per format (f32, bf16, f16, fp8e4m3,
fp8e5m2) under the project's arithmetic contract (widen to f32, one IEEE f32 operation, one
rounding to the format; max / min propagate NaN and order −0 < +0; a 2-device reduction is one
such add / max / min). Z3 FP sorts: f32 = FPSort(8, 24), bf16 = (8, 8), f16 = (5, 11),
fp8e5m2 = (5, 3). **fp8e4m3 is E4M3FN** (finite through ±448, no infinity, NaN = S.1111.111),
which no FPSort is: its values are encoded as the subset of FPSort(5, 4) that the E4M3FN rounding
``R`` fixes — ``R(v)`` rounds an f32 value with FPSort(4, 4) below 2⁻⁶ (E4M3FN's subnormal
quantum 2⁻⁹) and with FPSort(5, 4) above (its 3 fraction bits), and gives NaN for a magnitude
rounding above 448, for ±inf and NaN (overflow "nonfinite"). The classes:

* ``exact`` — proved for every input, ±0, ±inf and NaN included (max / min / selection rows and
  monotone kernels: comparisons only, Z3 FP proofs);
* ``exact-finite`` — exact for finite inputs, with a non-finite witness (e.g. −inf + inf);
* ``±0`` — equal as numbers, a signed-zero witness shows the bits differ;
* ``rounding`` — a finite witness with two different results (e.g. (a+b)·c vs a·c+b·c);
* ``NaN`` — a finite witness where exactly one side is NaN (log of a negative piece under
  Partial(max); E4M3FN overflow);
* ``n/a`` — the row does not hold over the reals.

Witnesses of the arithmetic rows are found by a deterministic search over a small set of
characteristic values of each format (±0, ±1, ±3, 1 + ulp, 2^(p+1), max finite, the least
subnormal; then ±inf, NaN) evaluated with the reference ``apply_lowp``, and every witness is
re-checked by Z3 constant folding of the FP-sort encoding (a disagreement is an error). Exactness
of ``c + max(a, b)`` for finite inputs, which bit-blasting cannot prove within the time budget in
f32, is proved for *every* monotone rounding function (an abstract model: reals plus an
uninterpreted monotone, odd ``rnd``), which covers every format whose overflow is ordered (±inf);
E4M3FN's NaN overflow is not, and its search finds the witness. Monotone kernels are assumed
monotone in floats too (true of correctly rounded kernels).

``commutation.coverage`` enumerates (op, kind, Partial operands, reduction) from ``ALL_OPS``, their
``INPUTS`` and the kind enums, and runs the real type rule on every combination without a row to
see whether the rule meets it. ``gather.migration`` proves the Split → Partial(sum) migration.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import z3

from tilefoundry.semantics.ops import ALL_OPS
from tilefoundry.semantics.ops.math import UNARY_PROPERTIES, BinaryKind, UnaryKind
from tilefoundry.semantics.ops.nn import Gelu, LayerNorm, RMSNorm
from tilefoundry.semantics.ops.tensor import ReduceKind
from tilefoundry.semantics.typeinfer.commutation import REDS, TABLE, Row
from tilefoundry.smt.framework import Outcome, ProveCtx, fmt_value, obligation

__all__ = [
    "CLASSES",
    "FORMATS",
    "GROUPS",
    "NN_PROPERTIES",
    "NON_TABLE_OPS",
    "FPClass",
    "RowResult",
    "classification_table",
    "classify_formats",
    "coverage_gaps",
    "prove_row",
    "row_id",
    "write_doc",
]

REAL, BOOL, INT = "R", "B", "I"
#: witness search stages (|v| <= bound, v a multiple of 1/denominator), smallest first, then
#: unbounded reals
BOUNDS: tuple[tuple[int, int] | None, ...] = ((1, 1), (2, 1), (4, 1), (2, 2), None)


def _bound_note(b: tuple[int, int] | None) -> str:
    if b is None:
        return "reals (no witness among small integers / halves)"
    return f"|v| <= {b[0]}" + (" integers" if b[1] == 1 else f", multiples of 1/{b[1]}")


#: HIR nn entry: "ReLU / Sigmoid / Tanh are monotone non-decreasing elementwise"; Gelu / Silu
#: "not monotone". ReLU reads the Unary relu kind's property set.
NN_PROPERTIES: dict[str, frozenset[str]] = {
    "ReLU": UNARY_PROPERTIES[UnaryKind.RELU],
    "Sigmoid": frozenset({"monotone"}),
    "Tanh": frozenset({"monotone"}),
    "Gelu": frozenset(),
    "Silu": frozenset(),
}


def row_id(row: Row) -> str:
    return f"{row.op}.{row.kind}({row.pattern}; {row.reduction}) " + \
        ("allow" if row.allow else "reject")


# =============================================================================================
# kernels: exact definitions where algebraic, facts (for refutations) where transcendental
# =============================================================================================
def _max(a, b):
    return z3.If(a >= b, a, b)


def _min(a, b):
    return z3.If(a <= b, a, b)


def _abs(a):
    return z3.If(a >= 0, a, -a)


def _round_half_even(x):
    f = z3.ToInt(x + z3.RealVal(Fraction(1, 2)))
    tie = z3.ToReal(f) == x + z3.RealVal(Fraction(1, 2))
    return z3.ToReal(z3.If(z3.And(tie, f % 2 == 1), f - 1, f))


@dataclass(frozen=True)
class Kernel:
    """A real function of one argument. ``define`` is its exact definition (algebraic kernels);
    otherwise it is uninterpreted, and refutations may use its true facts: ``sign`` (+1 strictly
    increasing, −1 strictly decreasing), ``positive``, ``domain`` and interval enclosures
    (``interval``, an mpmath ``iv`` function) at the integer anchors."""

    name: str
    props: frozenset[str] = frozenset()
    define: Callable | None = None  # (env, x) -> value
    interval: Callable | None = None
    domain: Callable | None = None  # x -> BoolRef
    sign: int = 0
    positive: bool = False
    nan_below_zero: bool = False  # its float kernel gives NaN for x < 0 (log, sqrt)
    #: the reference's exact float definition (B, x) -> FP term, where the float kernel is not
    #: monotone in the -0 < +0 order (relu: relu(-0) = -0 but relu(-1) = +0, D136)
    fp_define: Callable | None = None
    anchors: tuple[Fraction, ...] = tuple(Fraction(a) for a in range(-4, 5))


def _def_sqrt(env, x):
    y = env.aux("sqrt")
    env.side += [y >= 0, y * y == x]
    return y


def _def_rsqrt(env, x):
    y = env.aux("rsqrt")
    env.side += [y > 0, y * y * x == 1]
    return y


def _iv():
    from mpmath import iv

    iv.dps = 40
    return iv


def _iv_sigmoid(x):
    iv = _iv()
    return 1 / (1 + iv.exp(-x))


def _iv_tanh(x):
    iv = _iv()
    e = iv.exp(2 * x)
    return 1 - 2 / (e + 1)


def _iv_gelu(x):
    iv = _iv()
    if Gelu().approximate == "tanh":
        return x * (1 + _iv_tanh(iv.sqrt(2 / iv.pi) * (x + iv.mpf("0.044715") * x ** 3))) / 2
    return x * (1 + iv.erf(x / iv.sqrt(2))) / 2  # pragma: no cover - default is "tanh"


def _pos(x):
    return x > 0


def _nonneg(x):
    return x >= 0


_U = UNARY_PROPERTIES
_KERNELS: dict[str, Kernel] = {
    "neg": Kernel("neg", _U[UnaryKind.NEG], define=lambda env, x: -x),
    "abs": Kernel("abs", _U[UnaryKind.ABS], define=lambda env, x: _abs(x)),
    "square": Kernel("square", _U[UnaryKind.SQUARE], define=lambda env, x: x * x),
    "relu": Kernel("relu", _U[UnaryKind.RELU], define=lambda env, x: _max(x, z3.RealVal(0)),
                   fp_define=lambda B, x: z3.If(z3.fpLT(x, z3.FPVal(0.0, B.S)),
                                                z3.FPVal(0.0, B.S), x)),
    "ceil": Kernel("ceil", _U[UnaryKind.CEIL], define=lambda env, x: -z3.ToReal(z3.ToInt(-x))),
    "round": Kernel("round", _U[UnaryKind.ROUND], define=lambda env, x: _round_half_even(x)),
    "sqrt": Kernel("sqrt", _U[UnaryKind.SQRT], define=_def_sqrt, domain=_nonneg,
                   nan_below_zero=True),
    "rsqrt": Kernel("rsqrt", _U[UnaryKind.RSQRT], define=_def_rsqrt, domain=_pos),
    "logical_not": Kernel("logical_not", _U[UnaryKind.LOGICAL_NOT],
                          define=lambda env, x: z3.Not(x)),
    "exp": Kernel("exp", _U[UnaryKind.EXP], interval=lambda x: _iv().exp(x), sign=1,
                  positive=True),
    "exp2": Kernel("exp2", _U[UnaryKind.EXP2], interval=lambda x: _iv().exp(x * _iv().log(2)),
                   sign=1, positive=True),
    "log": Kernel("log", _U[UnaryKind.LOG], interval=lambda x: _iv().log(x), domain=_pos,
                  sign=1, nan_below_zero=True),
    "log2": Kernel("log2", _U[UnaryKind.LOG2],
                   interval=lambda x: _iv().log(x) / _iv().log(2), domain=_pos, sign=1,
                   nan_below_zero=True),
    "sigmoid": Kernel("sigmoid", NN_PROPERTIES["Sigmoid"], interval=_iv_sigmoid, sign=1,
                      positive=True),
    "tanh": Kernel("tanh", NN_PROPERTIES["Tanh"], interval=_iv_tanh, sign=1),
    "gelu": Kernel("gelu", NN_PROPERTIES["Gelu"], interval=_iv_gelu),
    "silu": Kernel("silu", NN_PROPERTIES["Silu"], interval=lambda x: x * _iv_sigmoid(x)),
}
for _op, _eps, _pts in (
        ("LayerNorm", LayerNorm().eps, {Fraction(k * k, 4) for k in range(17)}),
        ("RMSNorm", RMSNorm().eps, {Fraction(a * a + b * b, 2) for a in range(9)
                                    for b in range(9)})):
    # the norm's scale 1/sqrt(t + eps) of a (mean) square t >= 0, uninterpreted: positive,
    # strictly decreasing, enclosed at every t an integer witness with |x| <= 4 can reach
    _KERNELS[f"inv_rms_{_op}"] = Kernel(
        f"inv_rms_{_op}", domain=_nonneg, sign=-1, positive=True, anchors=tuple(sorted(_pts)),
        interval=lambda t, _e=_eps: 1 / _iv().sqrt(t + _iv().mpf(_e)))
_NN_KERNEL = {"ReLU": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Gelu": "gelu",
              "Silu": "silu"}
assert set(_NN_KERNEL) == set(NN_PROPERTIES)
assert {k.value for k in UnaryKind} <= set(_KERNELS), "every Unary kind needs a kernel model"


def _ends(v) -> tuple[Fraction, Fraction]:
    """The exact rational end points of an mpmath interval."""
    from mpmath import libmp

    lo, hi = (Fraction(*libmp.to_rational(raw)) for raw in v._mpi_)
    return lo, hi


@cache
def _anchors(name: str) -> tuple[tuple[Fraction, Fraction, Fraction], ...]:
    """Rigorous enclosures [lo, hi] of the kernel at its anchors in its domain."""
    k = _KERNELS[name]
    iv = _iv()
    out = []
    for a in k.anchors:
        if k.domain is not None and not z3.is_true(z3.simplify(k.domain(z3.RealVal(a)))):
            continue
        out.append((a, *_ends(k.interval(iv.mpf(a.numerator) / a.denominator))))
    return tuple(out)


@cache
def _anchors_z3(name: str) -> tuple[tuple[Any, Any, Any], ...]:
    return tuple((z3.RealVal(a), z3.RealVal(lo), z3.RealVal(hi)) for a, lo, hi in _anchors(name))


# =============================================================================================
# the symbolic evaluation context
# =============================================================================================
class _Env:
    """Collects the side conditions of one equation: auxiliary definitions, domains, admissible
    operand values, and the applications of uninterpreted kernels (their facts are added by
    ``facts``). ``mode`` is "prove" (a monotone kernel is only monotone) or "refute" (kernels
    carry every true fact recorded for them)."""

    def __init__(self, mode: str, tag: str = ""):
        self.mode = mode
        self.tag = tag
        self.side: list = []
        self.apps: dict[str, tuple[Kernel, Any, list]] = {}
        self.inputs: dict[str, Any] = {}
        self.n = 0

    def var(self, name: str, sort: str):
        mk = {REAL: z3.Real, BOOL: z3.Bool, INT: z3.Int}[sort]
        v = mk(f"{name}{self.tag}")
        self.inputs[name] = v
        return v

    def aux(self, name: str):
        self.n += 1
        return z3.Real(f"_{name}{self.n}{self.tag}")

    def apply(self, kname: str, x):
        k = _KERNELS[kname]
        if k.domain is not None:
            self.side.append(k.domain(x))
        uninterpreted = k.define is None or (self.mode == "prove" and "monotone" in k.props)
        if not uninterpreted:
            return k.define(self, x)
        if kname not in self.apps:
            self.apps[kname] = (k, z3.Function(f"{kname}{self.tag}", z3.RealSort(),
                                               z3.RealSort()), [])
        _, f, args = self.apps[kname]
        args.append(x)
        return f(x)

    def facts(self) -> list:
        """The kernel facts at the application points: pairwise monotonicity (strict where
        recorded), and, in refutations, positivity, domain and the anchor enclosures (a point
        equal to an anchor lies in its enclosure; a point below / above an anchor is bounded by
        it when the kernel is strictly monotone)."""
        out = []
        for kname, (k, f, args) in self.apps.items():
            only_monotone = self.mode == "prove" and "monotone" in k.props
            pts: list = []
            seen: set[int] = set()
            for a in args:
                if a.get_id() not in seen:
                    seen.add(a.get_id())
                    pts.append(a)
            strict = 0 if only_monotone else k.sign
            for p, q in itertools.combinations(pts, 2):
                if strict > 0:
                    out += [z3.Implies(p < q, f(p) < f(q)), z3.Implies(q < p, f(q) < f(p))]
                elif strict < 0:
                    out += [z3.Implies(p < q, f(p) > f(q)), z3.Implies(q < p, f(q) > f(p))]
                elif "monotone" in k.props:
                    out += [z3.Implies(p <= q, f(p) <= f(q)), z3.Implies(q <= p, f(q) <= f(p))]
            if only_monotone:
                continue
            if k.positive:
                out += [f(p) > 0 for p in pts]
            anchors = _anchors_z3(kname) if k.interval is not None else ()
            bounds = len(anchors) <= 9  # bounds between anchors only for short anchor lists
            for p in pts:
                fp = f(p)
                for a, lo, hi in anchors:
                    out.append(z3.Implies(p == a, z3.And(fp >= lo, fp <= hi)))
                    if bounds and k.sign > 0:
                        out += [z3.Implies(p < a, fp < hi), z3.Implies(p > a, fp > lo)]
                    elif bounds and k.sign < 0:
                        out += [z3.Implies(p < a, fp > lo), z3.Implies(p > a, fp < hi)]
        return out


def _red(sort: str, r: str, xs: Sequence):
    if len(xs) == 1:
        return xs[0]
    if sort == BOOL:
        return z3.And(*xs) if r == "min" else z3.Or(*xs)
    if r == "sum":
        return z3.Sum(*xs)
    acc = xs[0]
    for x in xs[1:]:
        acc = _max(acc, x) if r == "max" else _min(acc, x)
    return acc


# =============================================================================================
# op models (real semantics over small symbolic shapes)
# =============================================================================================
@dataclass(frozen=True)
class _Operand:
    name: str
    size: int
    sort: str = REAL


@dataclass(frozen=True)
class _Model:
    operands: tuple[_Operand, ...]
    outputs: tuple[tuple[str, str, frozenset[str]], ...]  # (name, sort, operands it reads)
    fn: Callable  # (env, {operand: [values]}) -> [[output values] per output]
    admissible: Callable = lambda v: []  # constraints on one evaluation's operand values
    note: str = ""
    #: refutations look at these output elements only (the others mirror them)
    witness_elems: tuple[int, ...] | None = None


def _select(idx, xs):
    acc = xs[-1]
    for j in range(len(xs) - 2, -1, -1):
        acc = z3.If(idx == j, xs[j], acc)
    return acc


_BINARY: dict[BinaryKind, Callable] = {
    BinaryKind.ADD: lambda a, b: a + b, BinaryKind.SUB: lambda a, b: a - b,
    BinaryKind.MUL: lambda a, b: a * b, BinaryKind.DIV: lambda a, b: a / b,
    BinaryKind.MIN: _min, BinaryKind.MAX: _max,
    BinaryKind.EQ: lambda a, b: a == b, BinaryKind.NE: lambda a, b: a != b,
    BinaryKind.LT: lambda a, b: a < b, BinaryKind.LE: lambda a, b: a <= b,
    BinaryKind.GT: lambda a, b: a > b, BinaryKind.GE: lambda a, b: a >= b,
    BinaryKind.AND: z3.And, BinaryKind.OR: z3.Or, BinaryKind.XOR: z3.Xor,
}
assert set(_BINARY) == set(BinaryKind)

_REDUCE: dict[ReduceKind, Callable] = {
    ReduceKind.SUM: lambda x: x[0] + x[1], ReduceKind.MEAN: lambda x: (x[0] + x[1]) / 2,
    ReduceKind.MAX: lambda x: _max(x[0], x[1]), ReduceKind.MIN: lambda x: _min(x[0], x[1]),
    ReduceKind.ABS_MAX: lambda x: _max(_abs(x[0]), _abs(x[1])),
}
assert set(_REDUCE) == set(ReduceKind)


def _one(name: str, sort: str, reads: Sequence[str]):
    return ((name, sort, frozenset(reads)),)


def _model(row: Row) -> _Model | None:
    op = row.op
    if op == "Binary":
        k = BinaryKind(row.kind)
        s_in = BOOL if k.is_boolean else REAL
        s_out = BOOL if (k.is_boolean or k.is_comparison) else REAL
        return _Model((_Operand("lhs", 1, s_in), _Operand("rhs", 1, s_in)),
                      _one("out", s_out, ("lhs", "rhs")),
                      lambda env, v: [[_BINARY[k](v["lhs"][0], v["rhs"][0])]],
                      (lambda v: [v["rhs"][0] != 0]) if k is BinaryKind.DIV else
                      (lambda v: []))
    if op == "Unary":
        kk = UnaryKind(row.kind)
        s = BOOL if kk is UnaryKind.LOGICAL_NOT else REAL
        return _Model((_Operand("x", 1, s),), _one("out", s, ("x",)),
                      lambda env, v: [[env.apply(kk.value, v["x"][0])]])
    if op in _NN_KERNEL:
        kn = _NN_KERNEL[op]
        return _Model((_Operand("x", 1),), _one("out", REAL, ("x",)),
                      lambda env, v: [[env.apply(kn, v["x"][0])]])
    if op == "Reduce":
        rk = ReduceKind(row.kind)
        return _Model((_Operand("x", 2),), _one("out", REAL, ("x",)),
                      lambda env, v: [[_REDUCE[rk](v["x"])]],
                      note="a length-2 reduced tensor axis")
    if op == "TopK":
        def topk(env, v):
            x = v["x"]
            second = x[1] > x[0]  # k = 1, largest; a tie keeps the lower index
            return [[z3.If(second, x[1], x[0])], [z3.If(second, z3.IntVal(1), z3.IntVal(0))]]
        return _Model((_Operand("x", 2),), (("values", REAL, frozenset({"x"})),
                                            ("indices", INT, frozenset({"x"}))), topk,
                      note="k = 1 over a length-2 axis")
    if op == "Select":
        return _Model((_Operand("cond", 1, BOOL), _Operand("t", 1), _Operand("f", 1)),
                      _one("out", REAL, ("cond", "t", "f")),
                      lambda env, v: [[z3.If(v["cond"][0], v["t"][0], v["f"][0])]],
                      note="ite(cond, t, f) of scalars")
    if op == "Scan":
        comb = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "max": _max,
                "min": _min}[row.kind]
        return _Model((_Operand("x", 2),), _one("out", REAL, ("x",)),
                      lambda env, v: [[v["x"][0], comb(v["x"][0], v["x"][1])]],
                      note="an inclusive, unseeded scan of a length-2 axis")
    if op == "Gather":
        return _Model((_Operand("x", 3), _Operand("indices", 1, INT)),
                      _one("out", REAL, ("x", "indices")),
                      lambda env, v: [[_select(v["indices"][0], v["x"])]],
                      lambda v: [v["indices"][0] >= 0, v["indices"][0] < 3],
                      note="3 rows, one symbolic index in range")
    if op == "InsertSlice":
        def ins(env, v):
            off, d, u = v["offsets"][0], v["dst"], v["update"][0]
            return [[z3.If(off == j, u, d[j]) for j in range(3)]]
        return _Model((_Operand("dst", 3), _Operand("update", 1), _Operand("offsets", 1, INT)),
                      _one("out", REAL, ("dst", "update", "offsets")), ins,
                      lambda v: [v["offsets"][0] >= 0, v["offsets"][0] <= 2],
                      note="dst of 3, an update of 1 at a symbolic in-range offset")
    if op == "CacheUpdate":
        def cu(env, v):
            p, s, c, nw = v["cur_pos"][0], v["s"][0], v["cache"], v["new"]
            return [[z3.If(z3.And(p <= j, j < p + s), _select(j - p, nw), c[j])
                     for j in range(3)]]
        return _Model((_Operand("cache", 3), _Operand("cur_pos", 1, INT), _Operand("s", 1, INT),
                       _Operand("new", 2)),
                      _one("out", REAL, ("cache", "cur_pos", "s", "new")), cu,
                      lambda v: [v["cur_pos"][0] >= 0, v["s"][0] >= 1, v["s"][0] <= 2,
                                 v["cur_pos"][0] + v["s"][0] <= 3],
                      note="cache length 3, new length 2, symbolic cur_pos and s in range")
    if op == "MatMul":
        return _Model((_Operand("a", 2), _Operand("b", 2)), _one("out", REAL, ("a", "b")),
                      lambda env, v: [[v["a"][0] * v["b"][0] + v["a"][1] * v["b"][1]]],
                      note="a 1-D dot product, K = 2")
    if op == "Sort":  # tile family: ascending over a length-2 axis, a tie keeps source order
        def srt(env, v):
            x = v["x"]
            swap = x[1] < x[0]
            one, zero = z3.IntVal(1), z3.IntVal(0)
            return [[z3.If(swap, x[1], x[0]), z3.If(swap, x[0], x[1])],
                    [z3.If(swap, one, zero), z3.If(swap, zero, one)]]
        return _Model((_Operand("x", 2),), (("values", REAL, frozenset({"x"})),
                                            ("indices", INT, frozenset({"x"}))), srt,
                      note="ascending over a length-2 axis")
    if op == "Mma":  # tile family: acc + a·b with K = 2
        return _Model((_Operand("a", 2), _Operand("b", 2), _Operand("acc", 1)),
                      _one("out", REAL, ("a", "b", "acc")),
                      lambda env, v: [[v["acc"][0] + v["a"][0] * v["b"][0]
                                       + v["a"][1] * v["b"][1]]],
                      note="a 1-D dot product, K = 2, plus the accumulator")
    if op == "Conv2D":
        return _Model((_Operand("x", 2), _Operand("weight", 2), _Operand("bias", 1)),
                      _one("out", REAL, ("x", "weight", "bias")),
                      lambda env, v: [[v["x"][0] * v["weight"][0] + v["x"][1] * v["weight"][1]
                                       + v["bias"][0]]],
                      note="N = C = O = H = 1, W = 2, a 1x2 kernel: x·w + bias")
    if op == "RoPE":
        rows = 2 if "pos_ids" in row.pattern.split("+") else 1  # one row: WLOG when replicated

        def rope(env, v):
            p = v["pos_ids"][0]
            c = [_select(p, v["cos_cache"][j::2]) for j in range(2)]
            s = [_select(p, v["sin_cache"][j::2]) for j in range(2)]

            def rot(x):  # rotate-half: x*cos + rotate_half(x)*sin, rotate_half(x) = (-x1, x0)
                return [x[0] * c[0] - x[1] * s[0], x[1] * c[1] + x[0] * s[1]]
            return [rot(v["q"]), rot(v["k"])]
        caches = ("cos_cache", "sin_cache", "pos_ids")
        return _Model((_Operand("q", 2), _Operand("k", 2), _Operand("cos_cache", 2 * rows),
                       _Operand("sin_cache", 2 * rows), _Operand("pos_ids", 1, INT)),
                      (("q_rope", REAL, frozenset(("q", *caches))),
                       ("k_rope", REAL, frozenset(("k", *caches)))), rope,
                      lambda v: [v["pos_ids"][0] >= 0, v["pos_ids"][0] < rows],
                      note=f"head dim 2, {rows} cache row(s), one symbolic position")
    if op == "SoftMax":
        def sm(env, v):
            e = [env.apply("exp", x) for x in v["x"]]
            return [[e[0] / (e[0] + e[1]), e[1] / (e[0] + e[1])]]
        return _Model((_Operand("x", 2),), _one("out", REAL, ("x",)), sm,
                      note="a length-2 axis; exp uninterpreted (positive, increasing)",
                      witness_elems=(0,))
    if op in ("LayerNorm", "RMSNorm"):
        names = ("x", "weight", "bias") if op == "LayerNorm" else ("x", "weight")

        def norm(env, v):
            x = v["x"]
            mu = (x[0] + x[1]) / 2 if op == "LayerNorm" else z3.RealVal(0)
            d = [xi - mu for xi in x]
            scale = env.apply(f"inv_rms_{op}", (d[0] * d[0] + d[1] * d[1]) / 2)
            out = [d[j] * scale * v["weight"][j] for j in range(2)]
            if op == "LayerNorm":
                out = [out[j] + v["bias"][j] for j in range(2)]
            return [out]
        eps = (LayerNorm() if op == "LayerNorm" else RMSNorm()).eps
        return _Model(tuple(_Operand(n, 2) for n in names), _one("out", REAL, names), norm,
                      note=f"a length-2 normalized axis, eps = {eps}", witness_elems=(0,))
    if op in ("SeededReduce", "MaskedReduce", "CustomReduce"):
        return _tile_model(row)
    return None


def _tile_model(row: Row) -> _Model:
    """The tile family's reductions over a length-2 axis: a seeded (masked) fold of
    sum / max / min with masked-out contributions skipped; a custom reducer's real-arithmetic
    merge (its declarative expressions, ``reducers.REDUCERS``) folded from the seed state."""
    if row.op == "CustomReduce":
        from tilefoundry.semantics.reducers import REDUCERS
        from tilefoundry.smt.obligations.reducers import lift_enc, merge_enc

        r = REDUCERS[row.kind]
        S = len(r.state)

        def custom(env, v):
            st = tuple(v["seed"])
            for xi in v["x"]:
                st = merge_enc(r, st, lift_enc(r, xi, True), True)
            return [list(st)]
        return _Model((_Operand("x", 2), _Operand("seed", S)),
                      _one("out", REAL, ("x", "seed")), custom,
                      note=f"a length-2 axis, the {row.kind} merge over the reals folded from "
                           f"the seed")
    masked = row.op == "MaskedReduce"
    k = row.kind

    def seeded(env, v):
        acc = v["seed"][0]
        for j, xi in enumerate(v["x"]):
            nxt = acc + xi if k == "sum" else (_max(acc, xi) if k == "max" else _min(acc, xi))
            acc = z3.If(v["mask"][j], nxt, acc) if masked else nxt
        return [[acc]]
    ops = (_Operand("x", 2), _Operand("seed", 1)) + ((_Operand("mask", 2, BOOL),) if masked
                                                      else ())
    names = tuple(o.name for o in ops)
    return _Model(ops, _one("out", REAL, names), seeded,
                  note="a length-2 reduced axis with one seed" + (" and a mask" if masked
                                                                 else ""))


# =============================================================================================
# the row prover
# =============================================================================================
@dataclass
class RowResult:
    row: Row
    status: str  # proved | counterexample | sound-but-rejected | failed | error
    detail: str = ""
    values: dict[str, str] | None = None


@dataclass
class _Eq:
    env: _Env
    outs: dict[str, tuple[list, list[list], str]]  # output -> (lhs, per-element device values)
    n: int
    elems: tuple[int, ...] | None = None  # restrict the claim to these output elements

    def claim(self, rho: dict[str, str]):
        parts = []
        for name, (lhs, devs, sort) in self.outs.items():
            parts += [lhs[e] == _red(sort, rho[name], devs[e]) for e in range(len(lhs))
                      if self.elems is None or e in self.elems]
        return z3.And(*parts)


def _equation(model: _Model, pattern: Sequence[str], reds: dict[str, str], mode: str,
              n: int = 2, tag: str = "") -> _Eq:
    env = _Env(mode, tag)
    dev: list[dict[str, list]] = [{} for _ in range(n)]
    true: dict[str, list] = {}
    for o in model.operands:
        if o.name in pattern:
            for i in range(n):
                dev[i][o.name] = [env.var(f"{o.name}@{i}[{e}]", o.sort) for e in range(o.size)]
            true[o.name] = [_red(o.sort, reds[o.name], [dev[i][o.name][e] for i in range(n)])
                            for e in range(o.size)]
        else:
            shared = [env.var(f"{o.name}[{e}]", o.sort) for e in range(o.size)]
            true[o.name] = shared
            for i in range(n):
                dev[i][o.name] = shared
    for v in (true, *dev):
        env.side += model.admissible(v)
    lhs = model.fn(env, true)
    per = [model.fn(env, v) for v in dev]
    outs = {}
    for k, (name, sort, reads) in enumerate(model.outputs):
        if reads & set(pattern):
            outs[name] = (lhs[k], [[per[i][k][e] for i in range(n)] for e in range(len(lhs[k]))],
                          sort)
    return _Eq(env, outs, n)


def _fmt_real(v) -> str:
    """A model value; a rational with a long denominator (a kernel value inside its enclosure)
    as a decimal approximation."""
    if isinstance(v, z3.RatNumRef) and v.denominator_as_long() > 10 ** 4:
        return f"≈{float(v.as_fraction()):.10g}"
    return fmt_value(v)


def _values(eq: _Eq, m: z3.ModelRef, rho: dict[str, str]) -> dict[str, str]:
    vals = {"devices": str(eq.n)}
    for name, v in eq.env.inputs.items():
        vals[name] = _fmt_real(m.eval(v, model_completion=True))
    for name, (lhs, devs, sort) in eq.outs.items():
        for e in range(len(lhs)):
            if eq.elems is not None and e not in eq.elems:
                continue
            vals[f"op(reduce) {name}[{e}]"] = _fmt_real(m.eval(lhs[e], model_completion=True))
            vals[f"{rho[name]}(op) {name}[{e}]"] = _fmt_real(
                m.eval(_red(sort, rho[name], devs[e]), model_completion=True))
    return vals


def _search(ctx: ProveCtx, eq: _Eq, rhos: list[dict[str, str]], label: str,
            b: tuple[int, int] | None) -> tuple[str, dict | None, str]:
    """A witness where the claim fails under every reduction map in ``rhos``, at one search
    stage ``b`` (values in a small grid, or unbounded reals); with uninterpreted kernels the
    witness is then proved for every function with the kernel's facts. Returns (status, values,
    note) with status counterexample / none / unknown."""
    env = eq.env
    fail = z3.And(*[z3.Not(eq.claim(r)) for r in rhos])
    facts = env.facts()
    s = ctx.solver()
    s.add(*env.side, *facts, fail)
    if b is not None:  # a finite domain (faster for Z3 than IsInt and bounds)
        grid = [Fraction(i, b[1]) for i in range(-b[0] * b[1], b[0] * b[1] + 1)]
        for v in env.inputs.values():
            if v.sort() == z3.RealSort():
                s.add(z3.Or(*[v == z3.RealVal(g) for g in grid]))
            elif v.sort() == z3.IntSort():
                s.add(z3.Or(*[v == int(g) for g in grid if g.denominator == 1]))
    tag = "R" if b is None else f"{b[0]}_{b[1]}"
    for _attempt in range(3):
        r = ctx.check(s, f"{label}:find-{tag}")
        if r != z3.sat:
            return ("unknown" if r == z3.unknown else "none"), None, ""
        m = s.model()
        fixed = [(v, m.eval(v, model_completion=True)) for v in env.inputs.values()]
        if not env.apps:
            return "counterexample", _values(eq, m, rhos[0]), _bound_note(b)
        # verify: with the inputs fixed, the inequality holds for every admissible kernel
        st, _ = ctx.prove(z3.substitute(fail, *fixed), f"{label}:verify",
                          assumptions=(z3.simplify(z3.substitute(z3.And(*env.side, *facts),
                                                                 *fixed)),))
        if st == "proved":
            return "counterexample", _values(eq, m, rhos[0]), \
                f"{_bound_note(b)}; verified for every kernel with its recorded facts"
        s.add(z3.Or(*[v != val for v, val in fixed]))  # try other inputs
    return "none", None, ""


def _refute(ctx: ProveCtx, model: _Model, row: Row, label: str,
            b: tuple[int, int] | None) -> tuple[str, str, dict | None]:
    """One search stage over every reduction assignment and output of a reject row: a
    counterexample refutes the row when one output fails under every reduction it could be
    claimed to carry (per-reduction witnesses where no single one exists)."""
    pattern = row.pattern.split("+")
    unknown = False
    for reds in _assignments(pattern, row.reduction):
        choices = _rho_choices(model, pattern, reds)
        eq = _equation(model, pattern, reds, "refute")
        for out in eq.outs:
            rhos = list({c[out]: c for c in choices}.values())
            sub = _Eq(eq.env, {out: eq.outs[out]}, eq.n, model.witness_elems)
            fs, fvals, note = _search(ctx, sub, rhos, f"{label}:{out}", b)
            if fs == "none" and len(rhos) > 1:  # one witness per claimed reduction
                found = [_search(ctx, sub, [c], f"{label}:{out}:{c[out]}", b) for c in rhos]
                if all(f[0] == "counterexample" for f in found):
                    fs, note = "counterexample", "one witness per reduction"
                    fvals = {f"[{c[out]}] {k}": v for c, f in zip(rhos, found, strict=True)
                             for k, v in (f[1] or {}).items()}
                elif any(f[0] == "unknown" for f in found):
                    fs = "unknown"
            if fs == "counterexample":
                how = "; ".join(f"{p}: {reds[p]}" for p in pattern)
                return "counterexample", (f"{out} under {'/'.join(c[out] for c in rhos)}" +
                                          (f" ({how})" if row.reduction == "mixed" else "") +
                                          f"; {note}"), fvals
            unknown |= fs == "unknown"
    return ("unknown" if unknown else "none"), "", None


def _assignments(pattern: list[str], red: str) -> list[dict[str, str]]:
    if red != "mixed":
        return [dict.fromkeys(pattern, red)]
    out = []
    for r1, r2 in itertools.permutations(REDS, 2):
        out.append({p: (r1 if i == 0 else r2) for i, p in enumerate(pattern)})
    return out


def _rho_choices(model: _Model, pattern: list[str], reds: dict[str, str]) -> list[dict]:
    """The reduction maps the result could be claimed to carry: the operands' own reduction
    where an output reads Partial operands of one reduction, every reduction otherwise."""
    per: dict[str, tuple[str, ...]] = {}
    for name, _sort, reads in model.outputs:
        rs = {reds[p] for p in pattern if p in reads}
        if rs:
            per[name] = (rs.pop(),) if len(rs) == 1 else REDS
    keys = list(per)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*per.values())]


def _fmt_witness(vals: dict[str, str] | None) -> str:
    if not vals:
        return ""
    return ", ".join(f"{k} = {v}" for k, v in vals.items())


_ROW_CACHE: dict[tuple[Row, int], RowResult] = {}


def prove_row(ctx: ProveCtx, row: Row) -> RowResult:
    """Prove an allow row over the reals (any device count, by the homomorphism step) or refute
    a reject row with a concrete counterexample; a reject row whose equation holds is
    ``sound-but-rejected``. An allow row that fails gets a concrete counterexample."""
    key = (row, ctx.rlimit)
    if key in _ROW_CACHE:
        return _ROW_CACHE[key]
    try:
        res = _prove_row(ctx, row)
    except Exception as e:  # a modelling bug is an error for this row, never a pass
        res = RowResult(row, "error", f"{type(e).__name__}: {e}")
    _ROW_CACHE[key] = res
    return res


def _prove_row(ctx: ProveCtx, row: Row) -> RowResult:
    model = _model(row)
    if model is None:
        return RowResult(row, "error", f"no model for op {row.op}")
    pattern = row.pattern.split("+")
    names = {o.name for o in model.operands}
    if not set(pattern) <= names:
        return RowResult(row, "error", f"pattern {row.pattern} names no operands of {row.op}")
    label = row_id(row).replace(" ", "_")
    if row.allow:
        if row.reduction == "mixed":
            return RowResult(row, "counterexample", "an allow row with mixed reductions has no "
                             "single reduction to carry")
        reds = dict.fromkeys(pattern, row.reduction)
        rho = _rho_choices(model, pattern, reds)[0]
        eq = _equation(model, pattern, reds, "prove")
        st, vals = ctx.prove(eq.claim(rho), f"{label}:step",
                             assumptions=(*eq.env.side, *eq.env.facts()))
        if st == "proved":
            return RowResult(row, "proved", "homomorphism step for two arbitrary pieces; every "
                             "n by induction" + (f" ({model.note})" if model.note else ""))
        if st == "failed":
            return RowResult(row, "failed", f"step: solver gave up ({vals})")
        # concrete values with the kernels' true facts
        req = _equation(model, pattern, reds, "refute")
        for b in BOUNDS:
            fs, fvals, note = _search(ctx, req, [rho], label, b)
            if fs == "counterexample":
                return RowResult(row, "counterexample", f"the allow row fails ({note})", fvals)
        full = _values(eq, _model_of(ctx, eq, rho), rho)
        return RowResult(row, "counterexample", "the allow row fails for some function with "
                         "the row's properties (no concrete witness for the kernel itself)", full)
    # reject row: the smallest search stage, then (before the larger stages) a soundness proof
    unknown = False
    for i, b in enumerate(BOUNDS):
        fs, where, fvals = _refute(ctx, model, row, label, b)
        if fs == "counterexample":
            return RowResult(row, "counterexample", where, fvals)
        unknown |= fs == "unknown"
        if i == 0:
            st = _sound(ctx, model, row, label)
            if st is not None:
                return st
    st = _sound(ctx, model, row, label, final=True)
    if st is not None:
        return st
    return RowResult(row, "failed", "no counterexample found and the equation not proved" +
                     (" (a solver gave up)" if unknown else ""))


def _sound(ctx: ProveCtx, model: _Model, row: Row, label: str,
           final: bool = False) -> RowResult | None:
    """Prove a reject row's equation (the operands' own reductions; with the kernels' true
    facts): sound-but-rejected. None when not proved."""
    pattern = row.pattern.split("+")
    reds = _assignments(pattern, row.reduction)[0]
    eq = _equation(model, pattern, reds, "refute")
    rho = _rho_choices(model, pattern, reds)[0]
    if row.reduction == "mixed" and not final:
        return None
    st, _vals = ctx.prove(eq.claim(rho), f"{label}:sound",
                          assumptions=(*eq.env.side, *eq.env.facts()))
    if st != "proved":
        return None
    return RowResult(row, "sound-but-rejected", "the equation holds over the reals for any "
                     "device count; the spec rejects the row conservatively" +
                     ("" if row.reduction != "mixed" else
                      f" (with {', '.join(f'{p}: {r}' for p, r in reds.items())})"))


def _model_of(ctx: ProveCtx, eq: _Eq, rho: dict[str, str]) -> z3.ModelRef:
    s = ctx.solver()
    s.add(*eq.env.side, *eq.env.facts(), z3.Not(eq.claim(rho)))
    if ctx.check(s, "model") != z3.sat:  # pragma: no cover - called after a sat query
        raise RuntimeError("lost the counterexample model")
    return s.model()


# =============================================================================================
# the row-group obligations
# =============================================================================================
_FAMILY = {cls.__name__: getattr(cls, "FAMILY", "") for cls in ALL_OPS}


def _group_of(row: Row) -> str:
    if row.op in ("Binary", "Unary", "Reduce"):
        return row.op
    if _FAMILY.get(row.op) == "tile":
        return "tile"
    return "nn" if _FAMILY.get(row.op) == "nn" else "tensor"


GROUPS = ("Binary", "Unary", "Reduce", "nn", "tensor", "tile")


def _run_group(ctx: ProveCtx, group: str) -> Outcome:
    rows = [r for r in TABLE if _group_of(r) == group]
    results = [prove_row(ctx, r) for r in rows]
    return _group_outcome(results)


def _group_outcome(results: list[RowResult]) -> Outcome:
    sub = [(row_id(r.row), r.status) for r in results]
    bad_allow = [r for r in results if r.row.allow and r.status != "proved"]
    bad_reject = [r for r in results if not r.row.allow and
                  r.status not in ("counterexample", "sound-but-rejected")]
    sbr = [r for r in results if r.status == "sound-but-rejected"]
    n_allow = sum(r.row.allow for r in results)
    n_cex = sum(1 for r in results if not r.row.allow and r.status == "counterexample")
    lines = [f"{len(results)} rows: {n_allow - len(bad_allow)}/{n_allow} allow rows proved, "
             f"{n_cex} reject rows refuted, {len(sbr)} sound-but-rejected"]
    for r in bad_allow + bad_reject:
        lines.append(f"{row_id(r.row)}: {r.status}: {r.detail} {_fmt_witness(r.values)}")
    if sbr:
        lines.append("sound-but-rejected: " + "; ".join(row_id(r.row) for r in sbr))
    detail = "\n".join(lines)
    errors = [r for r in bad_allow + bad_reject if r.status in ("error", "failed")]
    if errors:
        st = "error" if any(r.status == "error" for r in errors) else "failed"
        return Outcome(st, detail, sub=sub)
    if bad_allow or bad_reject:
        first = (bad_allow + bad_reject)[0]
        cex = {"row": row_id(first.row), **(first.values or {})}
        return Outcome("counterexample", detail, cex, sub=sub)
    return Outcome("proved", detail, sub=sub)


def _group_obligation(group: str) -> None:
    def run(ctx: ProveCtx) -> Outcome:
        return _run_group(ctx, group)

    run.__doc__ = (f"Partial commutation rows of {group}: allow rows proved over the reals for "
                   f"any device count, reject rows refuted (or sound-but-rejected).")
    obligation(f"commutation.{group}")(run)


for _g in GROUPS:
    _group_obligation(_g)


@obligation("commutation.sound_but_rejected", expect="report")
def sound_but_rejected(ctx: ProveCtx) -> Outcome:
    """Reject rows whose equation holds over the reals (the spec's conservatism), listed."""
    results = [prove_row(ctx, r) for r in TABLE if not r.allow]
    sbr = [r for r in results if r.status == "sound-but-rejected"]
    bad = [r for r in results if r.status in ("failed", "error")]
    sub = [(row_id(r.row), r.status) for r in sbr]
    detail = f"{len(sbr)} of {len(results)} reject rows hold over the reals:\n" + \
        "\n".join(f"{row_id(r.row)}: {r.row.reason}" for r in sbr)
    if bad:
        return Outcome("failed", detail + f"\n{len(bad)} rows undecided", sub=sub)
    return Outcome("report", detail, sub=sub)


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
    if props is not None and "monotone" in props and red in ("max", "min"):
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


# =============================================================================================
# coverage: every (op, kind, Partial operands, reduction) the type rules can meet has a row
# =============================================================================================
#: Ops that never consult the table, and why (checked: every op of ALL_OPS is in the table or
#: here).
NON_TABLE_OPS: dict[str, str] = {
    "Zeros": "no inputs: it can never meet a Partial",
    "ShapeOf": "reads only x's static shape, never its values: a pending value reduction does "
               "not change the result",
    "Rank": "reads only x's rank, never its values",
    "ShapeExtract": "its operand is a shape value (ShapeType), which carries no ShardLayout",
    "ShapeCompose": "its operands are dims (DimType), which carry no ShardLayout",
    "Reshard": "the sharding op itself: it completes or moves a Partial by definition (an "
               "allreduce), there is nothing to commute",
    "Local": "exposes the device's partial piece as plain data by definition (D79)",
    "Reshape": "a view: a regroup of layout positions commutes with every elementwise "
               "reduction; its rule carries Partial unchanged (HIR Reshape entry)",
    "Transpose": "a permutation of elements commutes with every elementwise reduction; its rule "
                 "carries every Partial (D77)",
    "Slice": "a selection commutes with every elementwise reduction; its rule carries a "
             "Partial (D77)",
    "Concat": "a placement: its rule carries a Partial only when every input carries the "
              "identical state (D77)",
    "Stack": "a placement: its rule carries a Partial only when every input carries the "
             "identical state (D77)",
    "Bitcast": "its rule rejects every Partial operand before the table: a reinterpretation "
               "of bits commutes with no reduction (bits(-1.0) = 0xBF800000 > bits(2.0) = "
               "0x40000000 as u32; D218)",
    "Cast": "its rule carries a Partial (D72): exact for widening casts, up to rounding for "
            "narrowing ones (a Partial(sum) rounds each piece before the sum)",
}


def _rule_operands(op: str) -> tuple[str, ...]:
    """The operand names the type rule passes to the table (variadic operands share their base
    name: every InsertSlice offset is ``offsets``)."""
    cls = next(c for c in ALL_OPS if c.__name__ == op)
    return tuple(cls.INPUTS)


def _kinds(op: str) -> list[str]:
    if op == "Scan":
        from tilefoundry.semantics.ops.tile_scan import SCAN_COMBINES

        return list(SCAN_COMBINES)
    enum = {"Binary": BinaryKind, "Unary": UnaryKind, "Reduce": ReduceKind}.get(op)
    if enum:
        return [k.value for k in enum]
    if op in ("SeededReduce", "MaskedReduce"):  # the tile family: str kinds / reducer names
        from tilefoundry.semantics.ops.tile_reduce import SEEDED_KINDS

        return list(SEEDED_KINDS)
    if op == "CustomReduce":
        from tilefoundry.semantics.reducers import REDUCERS

        return list(REDUCERS)
    return ["-"]


def _subsets(names: Sequence[str]) -> list[str]:
    return ["+".join(n for i, n in enumerate(names) if mask >> i & 1)
            for mask in range(1, 1 << len(names))]


def _combos(op: str) -> list[tuple[str, str, str, str]]:
    out = []
    for kind in _kinds(op):
        for pat in _subsets(_rule_operands(op)):
            for red in (*REDS, "mixed") if "+" in pat else REDS:
                out.append((op, kind, pat, red))
    return out


def _rule_call(op: str, kind: str, pattern: str, red: str):
    """A Call of the real op whose operands carry Partial exactly on ``pattern`` (mixed: the
    first sum, the others max) over a 2-device mesh axis."""
    from tilefoundry.semantics import ops as O
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ir import Call, Var
    from tilefoundry.semantics.types import Layout, Mesh, Partial, ShardLayout, TensorType

    F32, I32, BOOL = DType.F32, DType.I32, DType.BOOL
    v2 = ((4, 8), F32)
    cases: dict[str, tuple[Any, list]] = {
        "Reduce": (lambda: O.Reduce((1,), True, ReduceKind(kind)), [((4, 6), F32)]),
        "TopK": (lambda: O.TopK(2), [((4, 6), F32)]),
        "Select": (O.Select, [((4, 8), BOOL), ((4, 8), F32), ((4, 8), F32)]),
        "Scan": (lambda: O.Scan(1, kind), [((4, 6), I32 if kind == "mul" else F32)]),
        "Gather": (lambda: O.Gather(0), [((4, 6), F32), ((3,), I32)]),
        "InsertSlice": (O.InsertSlice, [((6,), F32), ((2,), F32), ((), I32)]),
        "CacheUpdate": (O.CacheUpdate, [((1, 8, 2, 4), F32), ((), I32), ((), I32),
                                        ((1, 3, 2, 4), F32)]),
        "MatMul": (O.MatMul, [((4, 8), F32), ((8, 6), F32)]),
        "Sort": (O.Sort, [((4, 6), F32)]),
        "Mma": (O.Mma, [((4, 8), F32), ((8, 6), F32), ((4, 6), F32)]),
        "Conv2D": (O.Conv2D, [((2, 3, 8, 8), F32), ((4, 3, 3, 3), F32), ((4,), F32)]),
        "LayerNorm": (O.LayerNorm, [v2, ((8,), F32), ((8,), F32)]),
        "RMSNorm": (O.RMSNorm, [v2, ((8,), F32)]),
        "RoPE": (O.RoPE, [((2, 6, 8), F32), ((2, 6, 8), F32), ((16, 8), F32), ((16, 8), F32),
                          ((6,), I32)]),
        "SeededReduce": (lambda: O.SeededReduce((1,), kind, "fold_left", False),
                         [((4, 8), F32), ((4,), F32)]),
        "MaskedReduce": (lambda: O.MaskedReduce((1,), kind, "fold_left", False),
                         [((4, 8), F32), ((4,), F32), ((4, 8), BOOL)]),
    }
    if op == "CustomReduce":
        from tilefoundry.semantics.reducers import REDUCERS

        cases[op] = (lambda: O.CustomReduce((1,), kind, "fold_left", False),
                     [((4, 8), F32), ((4, len(REDUCERS[kind].state)), F32)])
    if op == "Binary":
        bk = BinaryKind(kind)
        dt = BOOL if bk.is_boolean else F32
        make, specs = (lambda: O.Binary(bk)), [((4, 8), dt), ((4, 8), dt)]
    elif op == "Unary":
        uk = UnaryKind(kind)
        make, specs = (lambda: O.Unary(uk)), [((4, 8), BOOL if uk is UnaryKind.LOGICAL_NOT
                                                 else F32)]
    elif op in cases:
        make, specs = cases[op]
    else:
        make, specs = getattr(O, op), [v2]
    mesh = Mesh("device", ("x",), (2,))
    parts = pattern.split("+")
    args = []
    for i, (name, (shape, dt)) in enumerate(zip(_rule_operands(op), specs, strict=True)):
        layout = None
        if name in parts:
            r = red if red != "mixed" else ("sum" if name == parts[0] else "max")
            layout = ShardLayout(mesh, (Partial(r),), Layout(shape))
        args.append(Var(f"v{i}", TensorType(shape, dt, layout)))
    return Call(make(), tuple(args))


def coverage_gaps() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(gaps, notes): combinations the real type rule meets without a row (and how it then
    decides), and the other combinations without a row (rejected before the table)."""
    import tilefoundry.semantics.typeinfer.math
    import tilefoundry.semantics.typeinfer.nn
    import tilefoundry.semantics.typeinfer.tensor
    import tilefoundry.semantics.typeinfer.tile_reduce  # noqa: F401  (register the rules)
    from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
    from tilefoundry.semantics.typeinfer.commutation import lookup

    table_ops = {r.op for r in TABLE}
    gaps: list[tuple[str, str]] = []
    notes: list[tuple[str, str]] = []
    for op in sorted(table_ops, key=lambda o: [c.__name__ for c in ALL_OPS].index(o)):
        for combo in _combos(op):
            if lookup(*combo) is not None:
                continue
            cid = f"{combo[0]}.{combo[1]}({combo[2]}; {combo[3]})"
            try:
                infer_expr(_rule_call(*combo))
            except TypeInferError as e:
                if "has no row in the commutation table" in str(e):
                    gaps.append((cid, "met by the rule, no row: rejected as unproven "
                                      "(fails closed)"))
                else:
                    notes.append((cid, f"rejected before the table: {e.rule}"))
                continue
            gaps.append((cid, "met by the rule and ACCEPTED without a row"))
    return gaps, notes


@obligation("commutation.coverage")
def coverage(ctx: ProveCtx) -> Outcome:
    """Every (op, kind, Partial operands, reduction) the type rules can meet has a table row;
    ops that never consult the table are listed with the reason."""
    all_ops = [c.__name__ for c in ALL_OPS]
    table_ops = {r.op for r in TABLE}
    sub: list[tuple[str, str]] = []
    problems: list[str] = []
    for op in all_ops:
        if op in table_ops:
            sub.append((op, f"table ({len(_combos(op))} combinations)"))
        elif op in NON_TABLE_OPS:
            sub.append((op, f"never consults the table: {NON_TABLE_OPS[op]}"))
        else:
            problems.append(f"{op}: neither in the table nor explained in NON_TABLE_OPS")
    problems += [f"{op}: in the table but not an op of ALL_OPS"
                 for op in sorted(table_ops - set(all_ops))]
    extra = [r for r in TABLE if r.op in all_ops and
             (r.op, r.kind, r.pattern, r.reduction) not in set(_combos(r.op))]
    problems += [f"{row_id(r)}: names no operand combination of the rule" for r in extra]
    gaps, notes = coverage_gaps()
    sub += [(cid, f"gap: {why}") for cid, why in gaps] + notes
    lines = problems + [f"{len(gaps)} combination(s) the rules meet without a row:"] + \
        [f"  {cid}: {why}" for cid, why in gaps] if (problems or gaps) else []
    n = sum(len(_combos(op)) for op in table_ops)
    head = f"{len(table_ops)} table ops, {n} combinations, {len(TABLE)} rows; " \
           f"{len(all_ops) - len(table_ops)} ops never consult the table"
    if problems or gaps:
        return Outcome("counterexample", head + "\n" + "\n".join(lines),
                       {"missing": ", ".join(cid for cid, _ in gaps[:12]) +
                        (f" ... ({len(gaps)} in all)" if len(gaps) > 12 else "")}, sub=sub)
    return Outcome("proved", head, sub=sub)


# =============================================================================================
# Gather: a Split on the gathered axis becomes Partial(sum)
# =============================================================================================
@obligation("gather.migration")
def gather_migration(ctx: ProveCtx) -> Outcome:
    """Gather of x Split on the gathered axis: each device gathers its own rows (zeros
    elsewhere) and the device sum is the true gather — the Partial(sum) the rule produces."""
    sub = []
    for devices in (2, 3, 4):
        per, width, m = 2, 2, 2  # rows per device, row length, gathered indices
        rows = devices * per
        x = [[z3.Real(f"x{r}_{c}") for c in range(width)] for r in range(rows)]
        idx = [z3.Int(f"i{j}") for j in range(m)]
        side = [z3.And(i >= 0, i < rows) for i in idx]
        claims = []
        for i in idx:
            for c in range(width):
                true = _select(i, [x[r][c] for r in range(rows)])
                parts = []
                for d in range(devices):
                    own = [x[r][c] for r in range(d * per, (d + 1) * per)]
                    lo = d * per
                    parts.append(z3.If(z3.And(i >= lo, i < lo + per), _select(i - lo, own),
                                       z3.RealVal(0)))
                claims.append(true == z3.Sum(*parts))
        st, vals = ctx.prove(z3.And(*claims), f"gather_migration_{devices}dev",
                             assumptions=tuple(side), show={str(i): i for i in idx})
        sub.append((f"{devices} devices, {rows} rows split {per} per device, {m} symbolic "
                    f"indices", st))
        if st != "proved":
            return Outcome("counterexample" if st == "counterexample" else "failed",
                           f"{devices} devices: {st}", vals, sub=sub)
    return Outcome("proved", "the device sum of the per-device gathers (own rows, zeros "
                   "elsewhere) equals the true gather for 2, 3 and 4 devices (over the reals; in "
                   "floats x + 0 = x except -0 + 0 = +0)", sub=sub)


# =============================================================================================
# the generated document
# =============================================================================================
DOC = Path(__file__).resolve().parents[2] / "docs" / "commutation-proofs.md"
_DOC_HEAD = """# Partial commutation: proofs and float classification

Generated by `tilefoundry.smt.obligations.commutation` (the `commutation.*` obligations of
`tilefoundry prove`); `tests/smt/test_commutation_proofs.py` fails when this file is not the
current rendering. Regenerate with:

```
.venv/bin/python -c "from tilefoundry.smt.obligations.commutation import write_doc; write_doc()"
```

Every allow row of the commutation table (`docs/commutation-table.md`) is proved over the reals
for any device count (the homomorphism step for two arbitrary pieces, then induction over the
associative reduction); the table below classifies the same rows in each float format under the
arithmetic contract (widen to f32, one IEEE operation, one rounding; a 2-device reduction is one
such add / max / min; max / min propagate NaN and order -0 < +0). fp8e4m3 is E4M3FN (finite
through ±448, NaN on overflow), encoded as the subset of FPSort(5, 4) its rounding fixes.

Classes: **exact** — no counterexample for any input (±0, ±inf, NaN included); **exact-finite** —
exact for finite inputs, a non-finite witness exists; **±0** — numerically exact, the sign of a
zero differs; **rounding** — a finite witness gives two different values; **NaN** — a finite
witness makes exactly one side NaN; **n/a** — the row does not hold over the reals.

How: comparison-only equations (max / min, selections, monotone kernels) are Z3 FP proofs over
every value of the format; the float kernels of monotone kinds are assumed monotone (true of
correctly rounded kernels) with NaN exactly on NaN inputs — and on x < 0 for log, log2 and sqrt.
Witnesses of the arithmetic rows come from a search over characteristic values of each format
with the reference arithmetic (`apply_lowp`) and are re-checked by Z3 constant folding.
**exact-finite** for `c + max(a, b)` is proved for the values by an abstract model (reals and an
uninterpreted monotone, odd rounding — every format whose overflow is ordered); the sign of a
zero result is checked on the candidate values only.

"""


def write_doc(path: Path | None = None) -> str:
    text = _DOC_HEAD + classification_table() + "\n"
    (path or DOC).write_text(text)
    return text
