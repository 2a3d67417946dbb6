"""Lowering rules of the pointwise, reduction and nn ops (registered into
``lower.LOWERINGS``): Binary, Unary, ReLU, Sigmoid / Tanh / Gelu / Silu, Cast, Reduce, RMSNorm,
SoftMax, LayerNorm, MatMul, Conv2D, RoPE. See ``compiler/lower.py`` for the numerics."""

from __future__ import annotations

import math

import numpy as np

from tilefoundry.compiler import kir
from tilefoundry.compiler.errors import LoweringError
from tilefoundry.compiler.kir import Buffer
from tilefoundry.compiler.kir_math import MATH_ACTIVATIONS, MATH_OPS, math_fn_of
from tilefoundry.compiler.lower import (
    KB,
    _dt,
    _Lowerer,
    index_value,
    lowp_apply,
    out_type,
    register,
    two_sum,
    wide64,
)
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.ops import (
    Binary,
    Cast,
    Conv2D,
    LayerNorm,
    MatMul,
    Reduce,
    ReLU,
    RMSNorm,
    RoPE,
    SoftMax,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.reductions import identity
from tilefoundry.semantics.types import TensorType

_FLOAT_UNOPS = {UnaryKind.NEG: "neg", UnaryKind.ABS: "abs", UnaryKind.CEIL: "ceil",
                UnaryKind.ROUND: "round", UnaryKind.RELU: "relu", UnaryKind.SQUARE: "square",
                UnaryKind.SQRT: "sqrt"}


#: Unary kinds computed by one kernel-IR ``math`` (from the one table, compiler/kir_math.py)
_MATH_UNARY = {op.kind: name for name, op in MATH_OPS.items() if isinstance(op, Unary)}


@register(Binary)
def _binary(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    k = node.op.kind.value
    dt = args[0].dtype

    def compute(kb: KB, a: str, b: str) -> str:
        if kir.is_float(dt):
            if node.op.kind.is_comparison:
                return kb.binop(k, kb.widen(a, dt), kb.widen(b, dt))
            return lowp_apply(kb, dt, lambda x, y: kb.binop(k, x, y), a, b)
        return kb.binop(k, a, b)

    return lw.elementwise(k, _dt(t), t.shape, args, compute)


@register(Unary)
def _unary(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    kind = node.op.kind
    dt = args[0].dtype

    def compute(kb: KB, x: str) -> str:
        if kind is UnaryKind.LOGICAL_NOT:
            return kb.unop("not", x)
        if kind in _MATH_UNARY:
            return kb.math(_MATH_UNARY[kind], x)
        if kir.is_float(dt):
            return lowp_apply(kb, dt, lambda v: kb.unop(_FLOAT_UNOPS[kind], v), x)
        return kb.unop(_FLOAT_UNOPS[kind], x)

    return lw.elementwise(kind.value, _dt(t), t.shape, args, compute)


@register(ReLU)
def _relu(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    dt = args[0].dtype
    return lw.elementwise("relu", dt, t.shape, args,
                          lambda kb, x: lowp_apply(kb, dt, lambda v: kb.unop("relu", v), x))


@register(*MATH_ACTIVATIONS)
def _activation(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    fn = math_fn_of(node.op)
    if fn is None:
        raise AssertionError(f"{node.op!r} has no entry in compiler/kir_math.py MATH_OPS")
    return lw.elementwise(fn, args[0].dtype, t.shape, args, lambda kb, x: kb.math(fn, x))


@register(Cast)
def _cast(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    op = node.op
    return lw.elementwise("cast", _dt(t), t.shape, args,
                          lambda kb, x: kb.cast(x, op.dtype.value, op.overflow, op.rounding))


@register(Reduce)
def _reduce(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    op = node.op
    (x,) = args
    dt = x.dtype
    r = len(x.shape)
    axes = tuple(sorted({a % r for a in op.axes})) if r else ()
    kind = op.kind.value
    n = math.prod(x.shape[a] for a in axes)
    if math.prod(t.shape) == 0:
        return lw.temp(dt, t.shape)
    if n == 0:
        if kind == "mean":
            raise LoweringError(f"Reduce(mean) over axes {op.axes} of shape {x.shape} reduces "
                                f"zero elements: mean has no identity")
        return lw.const_buffer(np.broadcast_to(identity(kind, DType(dt)), t.shape).copy())
    if kir.is_float(dt):
        acc = "f32"

        def pre(kb: KB, v: str) -> str:
            return kb.widen(v, dt, "f32")

        def post(kb: KB, s: str) -> str:
            if kind == "mean":
                s = kb.binop("div", s, kb.const(float(np.float32(n)), "f32"))
            return kb.round(s, "f32", dt)
    elif kind == "abs_max" and dt in ("i8", "u8", "i32"):
        # magnitudes in i64 (|INT_MIN| fits), the maximum cast back (wrapping as the reference)
        acc, kind = "i64", "max"

        def pre(kb: KB, v: str) -> str:
            return kb.unop("abs", kb.cast(v, "i64"))

        def post(kb: KB, s: str) -> str:
            return kb.cast(s, dt)
    else:
        acc, pre, post = dt, None, None  # integers wrap in their dtype; bool: any / all
    if not axes:  # no axes: every element is a fiber of one
        def one(kb: KB, v: str) -> str:
            w = pre(kb, v) if pre else v
            if kind == "abs_max":
                w = kb.unop("abs", w)
            return post(kb, w) if post else w

        return lw.elementwise(f"reduce_{kind}", dt, t.shape, [x], one)
    return lw.reduction(f"reduce_{kind}", x, axes, "sum" if kind == "mean" else kind,
                        op.policy, acc, dt, pre, post, keepdim=op.keepdim)


@register(RMSNorm)
def _rmsnorm(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    x, g = args
    dt = x.dtype
    if x.size == 0:
        return lw.temp(dt, t.shape)
    n = x.shape[-1]
    eps = float(node.op.eps)
    if lw.cfg.narrow_f32 and dt in _NARROW and 2.0 ** -100 < eps < 2.0 ** 100:
        return _rmsnorm_f32(lw, t, x, g, n, eps)
    ms = lw.reduction("rmsnorm_ms", x, (len(x.shape) - 1,), "sum", "unordered_tree", "f64",
                      "f64", pre=lambda kb, v: kb.binop("mul", wide64(kb, v, dt), wide64(kb, v, dt)),
                      post=lambda kb, s: kb.binop("div", s, kb.const(float(n), "f64")))

    def compute(kb: KB, xv: str, m: str, gv: str) -> str:
        r = kb.binop("div", kb.const(1.0, "f64"),
                     kb.unop("sqrt", kb.binop("add", m, kb.const(eps, "f64"))))
        v = kb.binop("mul", kb.binop("mul", wide64(kb, xv, dt), r), wide64(kb, gv, dt))
        return kb.round(v, "f64", dt)

    return lw.elementwise("rmsnorm", dt, t.shape, [x, ms, g], compute)


_NARROW = ("bf16", "f16", "fp8e4m3", "fp8e5m2")


def _rmsnorm_f32(lw: _Lowerer, t: TensorType, x: Buffer, g: Buffer, n: int,
                 eps: float) -> Buffer:
    """RMSNorm of a narrow dtype in f32 (``TileConfig.narrow_f32``, D279): its budget is 1 ulp,
    met by any f32 computation with an error below 2^(23-p) ulp32 (``semantics/ulp.py``, lemma
    B); this one's is tens of ulp32. A bf16 square can overflow f32 (|x| > 1.8e19) or sink into
    its subnormals, so a bf16 row is scaled by ``s`` = 1/max|x| first (the formula is
    invariant: ``x / sqrt(mean(x²) + eps) = xs / sqrt(mean((xs)²) + eps·s²)``), ``s`` clamped
    to [2^-126, 2^kmax] where ``eps·s²`` stays finite, and a row with an inf or NaN scaled by
    2^-126. ``q = s·r`` is 1/rms (< 2^50 for eps > 2^-100) and ``y = (x·q)·w``, or
    ``x·(q·w)`` where x·q underflowed under a large weight. f16 / fp8 squares fit f32
    unscaled."""
    last = len(x.shape) - 1
    dt = x.dtype
    eps32 = float(np.float32(eps))
    nf = float(np.float32(n))

    def wx(kb: KB, v: str) -> str:
        return kb.widen(v, dt, "f32")

    def c(kb: KB, v: float) -> str:
        return kb.const(v, "f32")

    def sq(kb: KB, v: str) -> str:
        return kb.binop("mul", v, v)

    def mean(kb: KB, s: str) -> str:
        return kb.binop("div", s, c(kb, nf))

    def rinv(kb: KB, m: str, e: str) -> str:
        return kb.binop("div", c(kb, 1.0), kb.unop("sqrt", kb.binop("add", m, e)))

    if dt != "bf16":
        ms = lw.reduction("rmsnorm_ms", x, (last,), "sum", "unordered_tree", "f32", "f32",
                          pre=lambda kb, v: sq(kb, wx(kb, v)), post=mean)

        def plain(kb: KB, xv: str, m: str, gv: str) -> str:
            y = kb.binop("mul", kb.binop("mul", wx(kb, xv), rinv(kb, m, c(kb, eps32))),
                         wx(kb, gv))
            return kb.round(y, "f32", dt)

        return lw.elementwise("rmsnorm", dt, t.shape, [x, ms, g], plain)
    kmax = min(126, math.floor((125.0 - math.log2(eps)) / 2.0))  # eps·2^(2 kmax) <= 2^125
    amax = lw.reduction("rmsnorm_amax", x, (last,), "max", "unordered_tree", "f32", "f32",
                        pre=lambda kb, v: kb.unop("abs", wx(kb, v)))

    def scale(kb: KB, a: str) -> str:
        big = kb.unop("not", kb.binop("le", a, c(kb, 2.0 ** 126)))  # also inf and NaN
        small = kb.binop("lt", a, c(kb, 2.0 ** -kmax))  # also 0
        s = kb.select(small, c(kb, 2.0 ** kmax), kb.binop("div", c(kb, 1.0), a))
        return kb.select(big, c(kb, 2.0 ** -126), s)

    xs = lw.elementwise("rmsnorm_scale", "f32", x.shape, [x, amax],
                        lambda kb, v, a: kb.binop("mul", wx(kb, v), scale(kb, a)))
    ms = lw.reduction("rmsnorm_ms", xs, (last,), "sum", "unordered_tree", "f32", "f32",
                      pre=sq, post=mean)

    def scaled(kb: KB, xv: str, a: str, m: str, gv: str) -> str:
        s = scale(kb, a)
        q = kb.binop("mul", s, rinv(kb, m, kb.binop("mul", kb.binop("mul", c(kb, eps32), s), s)))
        w, wg = wx(kb, xv), wx(kb, gv)
        xq = kb.binop("mul", w, q)  # |x·q| <= sqrt(n): no overflow; q = 1/rms < 2^50
        # (x·q)·w, unless x·q sank below 2^-138 (a relative error past 2^-12) under a weight
        # >= 16 that would lift it back: then x·(q·w), where q < 2^-5 keeps q·w normal
        ok = kb.binop("or", kb.binop("ge", kb.unop("abs", xq), c(kb, 2.0 ** -138)),
                      kb.binop("or", kb.binop("lt", kb.unop("abs", wg), c(kb, 16.0)),
                               kb.binop("eq", w, c(kb, 0.0))))
        y = kb.select(ok, kb.binop("mul", xq, wg), kb.binop("mul", w, kb.binop("mul", q, wg)))
        return kb.round(y, "f32", dt)

    return lw.elementwise("rmsnorm", dt, t.shape, [x, amax, ms, g], scaled)


@register(SoftMax)
def _softmax(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    (x,) = args
    dt = x.dtype
    if x.size == 0:
        return lw.temp(dt, t.shape)
    a = node.op.axis % len(x.shape)
    # f64 like the reference; a narrow dtype in f32 where the target asks (narrow_f32): max
    # exact, x - max one rounding, exp within the dtype (Math.within), a tree sum (depth <= 16:
    # < 16u), one division — far below 2^(23-p) ulp (semantics/ulp.py, lemma B)
    narrow = lw.cfg.narrow_f32 and dt in ("bf16", "f16", "fp8e4m3", "fp8e5m2")
    acc, within = ("f32", dt) if narrow else ("f64", None)
    m = lw.reduction("softmax_max", x, (a,), "max", "unordered_tree", acc, acc,
                     pre=lambda kb, v: kb.widen(v, dt, acc))
    e = lw.elementwise("softmax_exp", acc, x.shape, [x, m],
                       lambda kb, v, mv: kb.math("exp", kb.binop("sub", kb.widen(v, dt, acc), mv),
                                                 within=within))
    s = lw.reduction("softmax_sum", e, (a,), "sum", "unordered_tree", acc, acc)
    if narrow:  # e · (1/S): one more rounding (u), no per-element division
        return lw.elementwise("softmax", dt, t.shape, [e, s], lambda kb, ev, sv: kb.round(
            kb.binop("mul", ev, kb.binop("div", kb.const(1.0, acc), sv)), acc, dt))
    return lw.elementwise("softmax", dt, t.shape, [e, s],
                          lambda kb, ev, sv: kb.round(kb.binop("div", ev, sv), acc, dt))


@register(LayerNorm)
def _layernorm(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    """The reference's algorithm (``evaluator/nn.py``): a row holding a non-finite value is
    NaN; the mean is centred with a compensated (double-double) row sum, ``d = (n·x − S)/n``;
    ``var = Σ(n·d)² / n³``; ``y = (d · rsqrt(var + eps)) · w + b``, all in f64, one rounding.
    A row longer than a tile keeps the plain two-pass f64 form (within the ULP contract)."""
    t = out_type(node)
    x, g, b = args
    dt = x.dtype
    if x.size == 0:
        return lw.temp(dt, t.shape)
    last = len(x.shape) - 1
    n = float(x.shape[-1])
    eps = float(node.op.eps)
    if kir.next_pow2(x.shape[-1]) > lw.cfg.max_row:
        return _layernorm_two_pass(lw, t, x, g, b, eps)

    def finite(kb: KB, v: str) -> str:
        w = wide64(kb, v, dt)
        return kb.binop("eq", kb.binop("sub", w, w), kb.const(0.0, "f64"))

    fin = lw.reduction("layernorm_finite", x, (last,), "min", "unordered_tree", "bool", "bool",
                       pre=finite)
    wf = lw.elementwise("layernorm_zero", "f64", x.shape, [x, fin],
                        lambda kb, v, ok: kb.select(ok, wide64(kb, v, dt), kb.const(0.0, "f64")))
    s_hi = lw.reduction("layernorm_sum_hi", wf, (last,), "sum_hi", "fold_left", "f64", "f64")
    s_lo = lw.reduction("layernorm_sum_lo", wf, (last,), "sum_lo", "fold_left", "f64", "f64")

    def center(kb: KB, w: str, hi: str, lo: str) -> str:
        tt, terr = two_sum(kb, kb.binop("mul", kb.const(n, "f64"), w), kb.unop("neg", hi))
        dev = kb.binop("add", tt, kb.binop("sub", terr, lo))  # n·(x − mean)
        zero = kb.const(0.0, "f64")
        return kb.select(kb.binop("eq", dev, zero), zero, dev)  # an exact zero is +0

    dev = lw.elementwise("layernorm_center", "f64", x.shape, [wf, s_hi, s_lo], center)
    var = lw.reduction("layernorm_var", dev, (last,), "sum", "unordered_tree", "f64", "f64",
                       pre=lambda kb, v: kb.binop("mul", v, v),
                       post=lambda kb, s: kb.binop("div", s, kb.const(n ** 3, "f64")))

    def compute(kb: KB, dv: str, vv: str, gv: str, bv: str, ok: str) -> str:
        r = kb.binop("div", kb.const(1.0, "f64"),
                     kb.unop("sqrt", kb.binop("add", vv, kb.const(eps, "f64"))))
        z = kb.binop("mul", kb.binop("div", dv, kb.const(n, "f64")), r)
        y = kb.binop("add", kb.binop("mul", z, wide64(kb, gv, dt)), wide64(kb, bv, dt))
        y = kb.select(ok, y, kb.const(math.nan, "f64"))
        return kb.round(y, "f64", dt)

    return lw.elementwise("layernorm", dt, t.shape, [dev, var, g, b, fin], compute)


def _layernorm_two_pass(lw: _Lowerer, t: TensorType, x: Buffer, g: Buffer, b: Buffer,
                        eps: float) -> Buffer:
    dt = x.dtype
    last = len(x.shape) - 1
    n = float(x.shape[-1])
    mu = lw.reduction("layernorm_mean", x, (last,), "sum", "unordered_tree", "f64", "f64",
                      pre=lambda kb, v: wide64(kb, v, dt),
                      post=lambda kb, s: kb.binop("div", s, kb.const(n, "f64")))
    d = lw.elementwise("layernorm_center", "f64", x.shape, [x, mu],
                       lambda kb, v, m: kb.binop("sub", wide64(kb, v, dt), m))
    var = lw.reduction("layernorm_var", d, (last,), "sum", "unordered_tree", "f64", "f64",
                       pre=lambda kb, v: kb.binop("mul", v, v),
                       post=lambda kb, s: kb.binop("div", s, kb.const(n, "f64")))

    def compute(kb: KB, dv: str, vv: str, gv: str, bv: str) -> str:
        r = kb.binop("div", kb.const(1.0, "f64"),
                     kb.unop("sqrt", kb.binop("add", vv, kb.const(eps, "f64"))))
        z = kb.binop("mul", dv, r)
        y = kb.binop("add", kb.binop("mul", z, wide64(kb, gv, dt)), wide64(kb, bv, dt))
        return kb.round(y, "f64", dt)

    return lw.elementwise("layernorm", dt, t.shape, [d, var, g, b], compute)


@register(MatMul)
def _matmul(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    a, b = args
    dt = a.dtype
    out = lw.temp(_dt(t), t.shape)
    if out.size == 0:
        return out
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if k == 0:
        return lw.const_buffer(np.zeros(t.shape, DType(_dt(t)).storage))
    nb = len(t.shape) - 2
    batch = tuple(t.shape[:nb])
    dom = (*batch, m, n, k)
    kb = KB(lw, "matmul", dom)

    def operand_strides(x: Buffer, row: int, col: int) -> list[int]:
        s = [0] * len(dom)
        rb = len(x.shape) - 2
        for j in range(rb):
            d = j + nb - rb
            if x.shape[j] == dom[d] and dom[d] > 1:
                s[d] = x.strides[j]
        s[row], s[col] = x.strides[-2], x.strides[-1]
        return s

    sa = operand_strides(a, nb, nb + 2)
    sb_ = operand_strides(b, nb + 2, nb + 1)
    if _kmajor_b(lw, dt, nb):
        # fp8 tensor cores read B K-major only (F46): a copy kernel writes B^T [N, K] first
        # and the matmul reads B through it (the same values: a copy, D489)
        bt = lw.temp(b.dtype, (n, k))
        ck = KB(lw, "kmajor", (n, k))
        ck.store(bt, list(bt.strides), ck.load(b, [b.strides[-1], b.strides[-2]]))
        ck.finish()
        sb_ = [0] * len(dom)
        sb_[nb + 1], sb_[nb + 2] = bt.strides[0], bt.strides[1]
        b = bt
    acc = "f32" if kir.is_float(dt) else "i64"

    def tile(init: str | None) -> str:
        va, vb = kb.load(a, sa), kb.load(b, sb_)
        if acc == "f32":
            va, vb = kb.widen(va, dt), kb.widen(vb, dt)
        else:
            va, vb = kb.cast(va, "i64"), kb.cast(vb, "i64")
        return kb.dot(va, vb, nb + 2, kb.edge([nb + 2]), init, node.op.allow_reassociation)

    kax = nb + 2
    # the reference seeds the K fold with +0 (matmul is mma(a, b, zeros), D200)
    seed = kb.broadcast(kb.const(0.0 if acc == "f32" else 0, acc), range(nb + 2))
    # a single K tile needs no loop, except for a target that asks for matmul tiles
    # (``dot_mn``: Triton, whose tensor-core dot gave zeros outside a loop on the H200)
    if kir.next_pow2(k) <= lw.cfg.k_block and lw.cfg.dot_mn is None:
        r = tile(seed)
        single = [kax]
    else:
        r = kb.loop(kax, lw.cfg.k_block, [seed], lambda c: [tile(c)])[0]
        single = []
    r = kb.round(r, "f32", dt) if acc == "f32" else kb.cast(r, dt)
    kb.store(out, [*out.strides, 0], r)
    kb.finish(single=single)
    return out


def _kmajor_b(lw: _Lowerer, dt: str, nb: int) -> bool:
    """Stage an unbatched fp8 matmul's B K-major (``fp8_kmajor`` in the launch options: a
    Triton GEMM with promoted fp8 accumulation, render_triton_gemm / D489)."""
    return nb == 0 and dt in ("fp8e4m3", "fp8e5m2") and \
        bool(dict(lw.cfg.launch).get("fp8_kmajor", 0))


@register(Conv2D)
def _conv2d(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    """Direct convolution over the domain ``(N, O, Ho, Wo, C/g, kH, kW)``: the f32 products
    ``x[n, g·C/g + c, i·sh + kh·dh − ph, j·sw + kw·dw − pw] · w[o, c, kh, kw]`` folded left over
    ``(c, kh, kw)`` in C order (the reference's K order), zero padding as +0 lanes that take
    part, then ``+ bias[o]`` (the reference's last term, ``bias · 1``), one rounding."""
    t = out_type(node)
    x, w, bias = args
    op = node.op
    dt = x.dtype
    out = lw.temp(dt, t.shape)
    if out.size == 0:
        return out
    _n, _c, h_, w_ = x.shape
    o_, cg, kh, kw = w.shape
    og = o_ // op.groups
    (sh, sw), (ph, pw), (dh, dw) = op.stride, op.padding, op.dilation
    dom = (*t.shape, cg, kh, kw)
    if math.prod((cg, kh, kw)) == 0:  # no taps: the bias alone (the reference's K = 0 + 1)
        return _bias_only(lw, t, bias, out)
    sx, sw_ = x.strides, w.strides

    def produce(kb: KB) -> tuple[str, str | None]:
        index = []
        if op.groups > 1:
            g = kb.binop("floordiv", kb.coord(1), kb.const(og, "i64"))
            index.append((g, cg * sx[1]))

        def inside(a_out: int, a_k: int, s: int, d: int, p: int, n: int) -> str:
            pos = kb.binop("add", kb.binop("mul", kb.coord(a_out), kb.const(s, "i64")),
                           kb.binop("sub", kb.binop("mul", kb.coord(a_k), kb.const(d, "i64")),
                                    kb.const(p, "i64")))
            return kb.binop("and", kb.binop("ge", pos, kb.const(0, "i64")),
                            kb.binop("lt", pos, kb.const(n, "i64")))

        live = kb.binop("and", inside(2, 5, sh, dh, ph, h_), inside(3, 6, sw, dw, pw, w_))
        xs = [sx[0], 0, sh * sx[2], sw * sx[3], sx[1], dh * sx[2], dw * sx[3]]
        xv = kb.load(x, xs, -ph * sx[2] - pw * sx[3], index, mask=live)
        wv = kb.load(w, [0, sw_[0], 0, 0, sw_[1], sw_[2], sw_[3]])
        p = kb.binop("mul", kb.widen(xv, dt), kb.widen(wv, dt))
        return p, kb.edge([4, 5, 6])

    def post(kb: KB, s: str) -> str:
        b = kb.load(bias, [0, bias.strides[0], 0, 0, 0, 0, 0])
        # the fold starts from -0 (the identity); + 0 turns it into the reference's +0 seed
        # (a sum of -0 taps is -0 only there), then the bias term
        s = kb.binop("add", s, kb.const(0.0, "f32"))
        return kb.round(kb.binop("add", s, kb.widen(b, dt)), "f32", dt)

    lw.reduce_kernel("conv2d", dom, (4, 5, 6), "sum", "fold_left", "f32", produce, post, out,
                     (*out.strides, 0, 0, 0))
    return out


def _bias_only(lw: _Lowerer, t: TensorType, bias: Buffer, out: Buffer) -> Buffer:
    kb = KB(lw, "conv2d_bias", tuple(t.shape))
    kb.store(out, out.strides, kb.load(bias, [0, bias.strides[0], 0, 0]))
    kb.finish()
    return out


@register(RoPE)
def _rope(lw: _Lowerer, node: Call, args: list[Buffer]) -> tuple[Buffer, Buffer]:
    """Rotate-half RoPE: ``y = x·cos[pos] + rotate_half(x)·sin[pos]`` in f64 (both products are
    exact there), rounded once. The cos / sin rows are gathered by ``pos`` (an index term), the
    two halves of ``x`` are loads at ``±D/2`` masked to their lanes. The reference forms the sum
    exactly (TwoSum, round to odd); the f64 sum here is within its ULP budget."""
    q, k, cos, sin, pos = args
    dt = q.dtype
    outs = []
    for x in (q, k):
        out = lw.temp(dt, x.shape)
        outs.append(out)
        if out.size == 0:
            continue
        dom = x.shape
        r = len(dom)
        sax, dax, h = r - 2, r - 1, x.shape[-1] // 2
        kb = KB(lw, "rope", dom)
        sp = [0] * r
        sp[sax] = pos.strides[0]
        pv = index_value(kb, kb.load(pos, sp), pos.dtype)
        rows = []
        for tab in (cos, sin):
            st = [0] * r
            st[dax] = tab.strides[1]
            rows.append(wide64(kb, kb.load(tab, st, 0, [(pv, tab.strides[0])]), dt))
        lo = kb.binop("lt", kb.coord(dax), kb.const(h, "i64"))
        xa = kb.load(x, x.strides, h * x.strides[-1], mask=lo)  # x[d + h] for d < h
        xb = kb.load(x, x.strides, -h * x.strides[-1], mask=kb.unop("not", lo))  # x[d - h]
        rot = kb.select(lo, kb.unop("neg", wide64(kb, xa, dt)), wide64(kb, xb, dt))
        p1 = kb.binop("mul", wide64(kb, kb.load(x, x.strides), dt), rows[0])
        v = kb.binop("add", p1, kb.binop("mul", rot, rows[1]))
        kb.store(out, out.strides, kb.round(v, "f64", dt))
        kb.finish()
    return outs[0], outs[1]
