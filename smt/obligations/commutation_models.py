"""The op models of the Partial commutation obligations (split from ``commutation.py``, D381):
each table row's op as a function of symbolic pieces over the reals (``_model``,
``_tile_model``), the kernel facts a refutation may use (``_KERNELS``: positivity,
monotonicity, domain, mpmath enclosures at anchor points) and the Z3 environment they build
in. ``commutation.py``'s docstring states what is proved with them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import Any

import z3

from tilefoundry.semantics.ops import (
    ALL_OPS,
    Binary,
    CacheUpdate,
    Conv2D,
    CustomReduce,
    Gather,
    InsertSlice,
    MaskedReduce,
    MatMul,
    Mma,
    Reduce,
    RoPE,
    Scan,
    SeededReduce,
    Select,
    SoftMax,
    Sort,
    TopK,
    Unary,
)
from tilefoundry.semantics.ops.math import UNARY_PROPERTIES, BinaryKind, UnaryKind
from tilefoundry.semantics.ops.nn import ACTIVATIONS, Gelu, LayerNorm, RMSNorm
from tilefoundry.semantics.ops.tensor import ReduceKind
from tilefoundry.semantics.typeinfer.commutation import Row

REAL, BOOL, INT = "R", "B", "I"


#: witness search stages (|v| <= bound, v a multiple of 1/denominator), smallest first, then
#: unbounded reals
BOUNDS: tuple[tuple[int, int] | None, ...] = ((1, 1), (2, 1), (4, 1), (2, 2), None)


def _bound_note(b: tuple[int, int] | None) -> str:
    if b is None:
        return "reals (no witness among small integers / halves)"
    return f"|v| <= {b[0]}" + (" integers" if b[1] == 1 else f", multiples of 1/{b[1]}")


#: The nn activations' property sets, read from ``FACTS`` on the op classes (ops/nn.py, D420).
NN_PROPERTIES: dict[str, frozenset[str]] = {
    c.__name__: c.FACTS for c in ACTIVATIONS if c.FACTS is not None}


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


def _m_binary(row: Row) -> _Model:
    k = BinaryKind(row.kind)
    s_in = BOOL if k.is_boolean else REAL
    s_out = BOOL if (k.is_boolean or k.is_comparison) else REAL
    return _Model((_Operand("lhs", 1, s_in), _Operand("rhs", 1, s_in)),
                  _one("out", s_out, ("lhs", "rhs")),
                  lambda env, v: [[_BINARY[k](v["lhs"][0], v["rhs"][0])]],
                  (lambda v: [v["rhs"][0] != 0]) if k is BinaryKind.DIV else
                  (lambda v: []))


def _m_unary(row: Row) -> _Model:
    kk = UnaryKind(row.kind)
    s = BOOL if kk is UnaryKind.LOGICAL_NOT else REAL
    return _Model((_Operand("x", 1, s),), _one("out", s, ("x",)),
                  lambda env, v: [[env.apply(kk.value, v["x"][0])]])


def _m_activation(row: Row) -> _Model:
    op = row.op
    kn = _NN_KERNEL[op]
    return _Model((_Operand("x", 1),), _one("out", REAL, ("x",)),
                  lambda env, v: [[env.apply(kn, v["x"][0])]])


def _m_reduce(row: Row) -> _Model:
    rk = ReduceKind(row.kind)
    return _Model((_Operand("x", 2),), _one("out", REAL, ("x",)),
                  lambda env, v: [[_REDUCE[rk](v["x"])]],
                  note="a length-2 reduced tensor axis")


def _m_top_k(row: Row) -> _Model:
    def topk(env, v):
        x = v["x"]
        second = x[1] > x[0]  # k = 1, largest; a tie keeps the lower index
        return [[z3.If(second, x[1], x[0])], [z3.If(second, z3.IntVal(1), z3.IntVal(0))]]
    return _Model((_Operand("x", 2),), (("values", REAL, frozenset({"x"})),
                                        ("indices", INT, frozenset({"x"}))), topk,
                  note="k = 1 over a length-2 axis")


def _m_select(row: Row) -> _Model:
    return _Model((_Operand("cond", 1, BOOL), _Operand("t", 1), _Operand("f", 1)),
                  _one("out", REAL, ("cond", "t", "f")),
                  lambda env, v: [[z3.If(v["cond"][0], v["t"][0], v["f"][0])]],
                  note="ite(cond, t, f) of scalars")


def _m_scan(row: Row) -> _Model:
    comb = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "max": _max,
            "min": _min}[row.kind]
    return _Model((_Operand("x", 2),), _one("out", REAL, ("x",)),
                  lambda env, v: [[v["x"][0], comb(v["x"][0], v["x"][1])]],
                  note="an inclusive, unseeded scan of a length-2 axis")


def _m_gather(row: Row) -> _Model:
    return _Model((_Operand("x", 3), _Operand("indices", 1, INT)),
                  _one("out", REAL, ("x", "indices")),
                  lambda env, v: [[_select(v["indices"][0], v["x"])]],
                  lambda v: [v["indices"][0] >= 0, v["indices"][0] < 3],
                  note="3 rows, one symbolic index in range")


def _m_insert_slice(row: Row) -> _Model:
    def ins(env, v):
        off, d, u = v["offsets"][0], v["dst"], v["update"][0]
        return [[z3.If(off == j, u, d[j]) for j in range(3)]]
    return _Model((_Operand("dst", 3), _Operand("update", 1), _Operand("offsets", 1, INT)),
                  _one("out", REAL, ("dst", "update", "offsets")), ins,
                  lambda v: [v["offsets"][0] >= 0, v["offsets"][0] <= 2],
                  note="dst of 3, an update of 1 at a symbolic in-range offset")


def _m_cache_update(row: Row) -> _Model:
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


def _m_mat_mul(row: Row) -> _Model:
    return _Model((_Operand("a", 2), _Operand("b", 2)), _one("out", REAL, ("a", "b")),
                  lambda env, v: [[v["a"][0] * v["b"][0] + v["a"][1] * v["b"][1]]],
                  note="a 1-D dot product, K = 2")


def _m_sort(row: Row) -> _Model:  # tile family: ascending over a length-2 axis, a tie keeps source order
    def srt(env, v):
        x = v["x"]
        swap = x[1] < x[0]
        one, zero = z3.IntVal(1), z3.IntVal(0)
        return [[z3.If(swap, x[1], x[0]), z3.If(swap, x[0], x[1])],
                [z3.If(swap, one, zero), z3.If(swap, zero, one)]]
    return _Model((_Operand("x", 2),), (("values", REAL, frozenset({"x"})),
                                        ("indices", INT, frozenset({"x"}))), srt,
                  note="ascending over a length-2 axis")


def _m_mma(row: Row) -> _Model:  # tile family: acc + a·b with K = 2
    return _Model((_Operand("a", 2), _Operand("b", 2), _Operand("acc", 1)),
                  _one("out", REAL, ("a", "b", "acc")),
                  lambda env, v: [[v["acc"][0] + v["a"][0] * v["b"][0]
                                   + v["a"][1] * v["b"][1]]],
                  note="a 1-D dot product, K = 2, plus the accumulator")


def _m_conv2d(row: Row) -> _Model:
    return _Model((_Operand("x", 2), _Operand("weight", 2), _Operand("bias", 1)),
                  _one("out", REAL, ("x", "weight", "bias")),
                  lambda env, v: [[v["x"][0] * v["weight"][0] + v["x"][1] * v["weight"][1]
                                   + v["bias"][0]]],
                  note="N = C = O = H = 1, W = 2, a 1x2 kernel: x·w + bias")


def _m_rope(row: Row) -> _Model:
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


def _m_soft_max(row: Row) -> _Model:
    def sm(env, v):
        e = [env.apply("exp", x) for x in v["x"]]
        return [[e[0] / (e[0] + e[1]), e[1] / (e[0] + e[1])]]
    return _Model((_Operand("x", 2),), _one("out", REAL, ("x",)), sm,
                  note="a length-2 axis; exp uninterpreted (positive, increasing)",
                  witness_elems=(0,))


def _m_norm(row: Row) -> _Model:
    op = row.op
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


def _m_tile_reduce(row: Row) -> _Model:
    return _tile_model(row)  # defined below, with its helpers


#: The SMT op models, keyed by op class (D422; like tinygrad's shared ALU table): each builds
#: the real-arithmetic model of one commutation row of its class.
_MODELS: dict[type, Callable[[Row], _Model]] = {
    Binary: _m_binary,
    Unary: _m_unary,
    **{c: _m_activation for c in ACTIVATIONS},
    Reduce: _m_reduce,
    TopK: _m_top_k,
    Select: _m_select,
    Scan: _m_scan,
    Gather: _m_gather,
    InsertSlice: _m_insert_slice,
    CacheUpdate: _m_cache_update,
    MatMul: _m_mat_mul,
    Sort: _m_sort,
    Mma: _m_mma,
    Conv2D: _m_conv2d,
    RoPE: _m_rope,
    SoftMax: _m_soft_max,
    LayerNorm: _m_norm,
    RMSNorm: _m_norm,
    SeededReduce: _m_tile_reduce,
    MaskedReduce: _m_tile_reduce,
    CustomReduce: _m_tile_reduce,
}

_BY_NAME: dict[str, type] = {c.__name__: c for c in ALL_OPS}


def _model(row: Row) -> _Model | None:
    """The SMT model of a commutation row (None: its op class has no model)."""
    build = _MODELS.get(_BY_NAME.get(row.op))  # type: ignore[arg-type]
    return None if build is None else build(row)


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
