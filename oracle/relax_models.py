"""The models behind ``afn``, ``arcp``, ``contract`` and ``wp`` (``oracle/relax.py``).

Each function takes an op site and its strict enclosure (None: exact) and returns the widened
one; every widening is a hull with the strict set, so a relaxed set is never narrower.

**afn** (``AFN``): the Vulkan 1.3 precision table's primitives (exp / exp2 3 + 2·|x| ulp, log /
log2 3 ulp outside [0.5, 2] and 2^-21 absolute inside, inversesqrt 2 ulp, division 2.5 ulp for
|y| in [2^-126, 2^126]) replace the OpenCL full-profile ones in the same model implementations
``semantics/ulp.py`` derives the strict f32 budgets from (u = 2^-24; k ulp <= 2k·u relative,
lemma A there):

* sigmoid 1/(1 + exp(-x)): exp's 6u becomes (6 + 4|x|)u and the reciprocal's u becomes 5u:
  8u -> (12 + 4|x|)u, i.e. 12 + 4|x| ulp;
* silu x/(1 + exp(-x)) (and (x·e)·e, e = exp(x/2), below -88): 14u -> (14 + 4|x|)u... plus the
  division: 18 + 4|x| ulp;
* gelu(tanh) x·σ(z): 5u·|z| + 14u with σ's 8u (14u split) -> (9|z| + 18 + 4) ulp, written
  9|z| + 22;
* tanh, from Vulkan's own derivation (sinh / cosh through exp): absolute error
  ((6 + 4|x|)(1 - t²) + 7|t| + 2)·u, t = tanh(x);
* softmax: each e_i's 6u becomes (6 + 4|d_i|)u, the sum's weighted mean of those errors grows by
  at most 4·min(max_j |d_j|, n/e)·u (x·e^-x <= 1/e), the division's u becomes 5u:
  139 + 4|d_i| + 4·min(max|d|, n/e) + 4 ulp;
* sqrt, which Vulkan inherits from 1 / inversesqrt: 4u + 5u, i.e. 9 ulp (strict: exact);
* a division whose divisor lies beyond 2^126 may also return a same-signed zero (CUDA's
  documented __fdividef; Vulkan leaves that range unbounded), so do sigmoid and silu where
  1 + exp(-x) > 2^126 (x < -87.34).

Narrow dtypes (lemma B of ``semantics/ulp.py``): an f32 error of E ulp keeps the rounded result
within 1 ulp of the correctly rounded one when E < 2^(23-p); beyond, within ⌈E / 2^(23-p)⌉ + 1.

**arcp**: x / y as x · (1/y), each rounded in f32 (then to the dtype): that value joins the set.

**contract**: a + b·c (or b·c ± a) as one f32 fma rounded once to the dtype joins the set.

**wp** (``WP``): the textbook f32 algorithm, any summation order (Higham's γ(n) = n·u/(1 - n·u)
for a sum of n terms, ch. 4), every other operation rounded once (u; exp 3 ulp; rsqrt 2 ulp),
evaluated in f64 interval arithmetic and rounded outward:

* RMSNorm: s = Σx², y = x · rsqrt(s/n + eps) · w. Where Σx² may pass f32's maximum the
  algorithm's rsqrt(inf) = 0 gives ±0 (NaN from inf · 0): the set gains 0 and NaN there;
* LayerNorm (two pass): μ = Σx/n, d = x - μ, v = Σd²/n, y = d · rsqrt(v + eps) · w + b. μ's
  error γ(n+1)·Σ|x|/n reaches every d_i: near-mean elements get an absolute, row-scaled error.
  Overflow of Σd² gives rsqrt(inf) = 0, y = b; of Σx, NaN;
* softmax: m = max, e_i = exp(x_i - m), S = Σe, y = e_i / S with the sum in any order and
  underflowing e_i (2^-149 each);
* sigmoid / silu 1/(1 + exp(-x)), x·σ(x): exp(-x) overflows below -88.72, giving ±0; silu's
  σ is subnormal below -87.34 (absolute error |x|·2^-149);
* gelu: 0.5·x·(1 + tanh(z)) and 0.5·x·(1 + erf(x/√2)): the 1 + tanh / 1 + erf cancellation
  for x < 0 costs an absolute error of 0.5·|x|·(12u + 4u·|z|·(1 - t²)) (tanh 5 ulp, its
  argument 2u·|z|) resp. 0.5·|x|·35u (erf 16 ulp + 1.5u), plus 2u·|y|; x · (1 + t) before the
  halving overflows to ±inf where |x| > max / 2.

Variance and log-sum-exp are no HIR ops (they are written from Reduce / exp / log, where the
strict per-op contracts already apply).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tilefoundry.oracle.enclosure import Enc, as_enc, as_f64, hull
from tilefoundry.semantics.dtypes import DType, cast, dtype_of
from tilefoundry.semantics.formats import FORMATS

U = 2.0 ** -24
F32_MAX = 3.4028234663852886e38
SUB = 2.0 ** -149
EXP_OVERFLOW = 88.72283935546875   # exp(x) > f32 max beyond
RCP_FLUSH = 87.33654475055310      # 1 + exp(-x) > 2^126 below -RCP_FLUSH
_C0 = 2.0 * math.sqrt(2.0 / math.pi)
_C1 = _C0 * 0.044715


def gamma(n: np.ndarray | float) -> np.ndarray:
    n = np.asarray(n, np.float64)
    return np.where(n * U < 0.5, n * U / (1 - n * U), np.inf)


def _steps(e32: np.ndarray, dt: DType) -> np.ndarray:
    """An f32 error of ``e32`` ulp as steps of ``dt`` (lemma B for the narrow formats)."""
    e32 = np.asarray(e32, np.float64)
    if dt is DType.F32:
        return np.ceil(e32)
    p = FORMATS[dt].mbits + 1
    q = 2.0 ** (23 - p)
    return np.where(e32 < q, 1.0, np.ceil(e32 / q) + 1)


def _absx(site: Any, i: int = 0) -> np.ndarray:
    e = as_enc(site.encs[i] if isinstance(site.encs[i], Enc) else None,
               np.asarray(site.args[i]))
    with np.errstate(all="ignore"):
        return np.where(e.real, np.maximum(np.abs(as_f64(e.lo)), np.abs(as_f64(e.hi))), 0.0)


def _box(site: Any, i: int = 0) -> tuple[np.ndarray, np.ndarray]:
    e = as_enc(site.encs[i] if isinstance(site.encs[i], Enc) else None,
               np.asarray(site.args[i]))
    return as_f64(e.lo), as_f64(e.hi)


def _outward(lo: np.ndarray, hi: np.ndarray, dt: DType) -> Enc:
    from tilefoundry.oracle.enclosures.core import _outward as ow

    lo = np.asarray(lo, np.float64)
    shape = lo.shape
    return ow(lo, np.asarray(hi, np.float64), dt, np.zeros(shape, bool), np.ones(shape, bool),
              "relaxed")


def _widen(site: Any, e: Enc | None, e32: np.ndarray, cause: str) -> Enc:
    from tilefoundry.oracle.relax import widen_steps

    v = np.asarray(site.value)
    dt = dtype_of(v)
    strict = float(site.ulp)
    extra = _steps(e32, dt) - (strict if dt is DType.F32 else max(strict, 1.0) if strict else 0)
    out = widen_steps(as_enc(e, v), np.broadcast_to(extra, v.shape))
    out.cause = out.cause or cause
    return out


def _with_zero(e: Enc, where: np.ndarray, neg: np.ndarray | bool) -> Enc:
    where = np.broadcast_to(where, e.shape)
    if not where.any():
        return e
    dt = e.dtype
    z = np.where(np.broadcast_to(neg, e.shape), cast(np.asarray(-0.0, np.float32), dt),
                 cast(np.zeros((), np.float32), dt))
    pt = Enc(np.where(where, z, e.lo), np.where(where, z, e.hi), e.nan, e.real, e.cause)
    return hull(e, pt)


def _with_abs(e: Enc, v: np.ndarray, a: np.ndarray, site: Any) -> Enc:
    """``e`` hulled with [lo - a, hi + a] (f64 absolute error ``a``), rounded outward."""
    lo, hi = as_f64(e.lo), as_f64(e.hi)
    with np.errstate(all="ignore"):
        w = _outward(np.where(e.real, lo, 0.0) - a, np.where(e.real, hi, 0.0) + a, e.dtype)
    w = Enc(w.lo, w.hi, e.nan, e.real, e.cause)
    return hull(e, w)


# ---------------------------------------------------------------------------------------------
# afn
# ---------------------------------------------------------------------------------------------
def afn(site: Any, e: Enc | None) -> Enc | None:
    from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary, UnaryKind
    from tilefoundry.semantics.ops.nn import Gelu, Sigmoid, Silu, SoftMax, Tanh

    op = site.op
    v = np.asarray(site.value)
    with np.errstate(all="ignore"):
        if isinstance(op, Unary) and op.kind in (UnaryKind.EXP, UnaryKind.EXP2):
            return _widen(site, e, 3 + 2 * _absx(site), "afn exp")
        if isinstance(op, Unary) and op.kind is UnaryKind.SQRT:  # Vulkan: 1 / inversesqrt
            return _widen(site, e, np.full(v.shape, 9.0), "afn sqrt")
        if isinstance(op, Unary) and op.kind in (UnaryKind.LOG, UnaryKind.LOG2):
            lo, hi = _box(site)
            inside = (hi >= 0.5) & (lo <= 2.0)
            if not inside.any():
                return e
            return _with_abs(as_enc(e, v), v, np.where(inside, 2.0 ** -21, 0.0), site)
        if isinstance(op, Binary) and op.kind is BinaryKind.DIV:
            out = _widen(site, e, np.full(v.shape, 2.5), "afn division")
            lo, hi = _box(site, 1)
            big = np.broadcast_to((np.minimum(np.abs(lo), np.abs(hi)) > 2.0 ** 126) |
                                  (lo * hi < 0) & (np.maximum(np.abs(lo), np.abs(hi)) >
                                                   2.0 ** 126), v.shape)
            return _with_zero(out, big, np.signbit(as_f64(v)))
        x = _absx(site)
        if isinstance(op, Sigmoid):
            lo, _ = _box(site)
            out = _widen(site, e, 12 + 4 * x, "afn sigmoid")
            return _with_zero(out, lo < -RCP_FLUSH, False)
        if isinstance(op, Silu):
            lo, _ = _box(site)
            out = _widen(site, e, 18 + 4 * x, "afn silu")
            return _with_zero(out, lo < -RCP_FLUSH, True)
        if isinstance(op, Gelu) and op.approximate == "tanh":
            z = x * (_C0 + _C1 * x * x)
            return _widen(site, e, 9 * z + 22, "afn gelu(tanh)")
        if isinstance(op, Tanh):
            t = np.minimum(np.abs(np.tanh(_box(site)[0])), np.abs(np.tanh(_box(site)[1])))
            tv = np.abs(as_f64(v))
            a = ((6 + 4 * x) * (1 - t * t) + 7 * np.minimum(tv, 1.0) + 2) * U
            return _with_abs(as_enc(e, v), v, a, site)
        if isinstance(op, SoftMax):
            ax = op.axis % v.ndim
            lo, hi = _box(site)
            m = np.max(np.where(np.isfinite(hi), hi, -np.inf), axis=ax, keepdims=True)
            d = np.where(np.isfinite(lo), np.abs(m - lo), 0.0)
            n = v.shape[ax]
            dmax = np.minimum(np.max(d, axis=ax, keepdims=True), n / math.e)
            return _widen(site, e, 139 + 4 * d + 4 * dmax + 4, "afn softmax")
    return e


# ---------------------------------------------------------------------------------------------
# arcp and contract
# ---------------------------------------------------------------------------------------------
def _in_f32(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x if x.dtype == np.float32 else cast(x, DType.F32)


def arcp(site: Any, e: Enc | None) -> Enc | None:
    from tilefoundry.oracle.relax import hull_alt
    from tilefoundry.semantics.ops.math import Binary, BinaryKind

    if not (isinstance(site.op, Binary) and site.op.kind is BinaryKind.DIV):
        return e
    v = np.asarray(site.value)
    dt = dtype_of(v)

    def recip(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            r = _in_f32(a) * (np.float32(1.0) / _in_f32(b))
        return r if dt is DType.F32 else cast(r, dt)

    return hull_alt(e, v, recip, list(site.encs), tuple(site.args), "arcp x·(1/y)")


def contract(site: Any, e: Enc | None, lookup: Callable[[Any], tuple[Any, Any]]) -> Enc | None:
    """a·b ± c as one f32 fma: ``lookup(node)`` gives an IR node's (value, enclosure)."""
    from tilefoundry.oracle.relax import hull_alt
    from tilefoundry.semantics.ir import Call
    from tilefoundry.semantics.matmul import fma_f32
    from tilefoundry.semantics.ops.math import Binary, BinaryKind

    op = site.op
    if not (isinstance(op, Binary) and op.kind in (BinaryKind.ADD, BinaryKind.SUB)):
        return e
    v = np.asarray(site.value)
    dt = dtype_of(v)
    for i, arg in enumerate(site.call.args):
        if not (isinstance(arg, Call) and isinstance(arg.op, Binary)
                and arg.op.kind is BinaryKind.MUL):
            continue
        (a, ea), (b, eb) = lookup(arg.args[0]), lookup(arg.args[1])
        c, ec = site.args[1 - i], site.encs[1 - i]
        if not all(isinstance(t, np.ndarray) for t in (a, b, c)):
            continue
        neg_c = op.kind is BinaryKind.SUB and i == 0
        neg_p = op.kind is BinaryKind.SUB and i == 1

        def fused(a_, b_, c_, neg_c=neg_c, neg_p=neg_p):
            a32, b32, c32 = _in_f32(a_), _in_f32(b_), _in_f32(c_)
            if neg_p:
                a32 = -a32
            if neg_c:
                c32 = -c32
            with np.errstate(all="ignore"):
                a32, b32, c32 = np.broadcast_arrays(a32, b32, c32)
                r = fma_f32(a32, b32, c32)
            return r if dt is DType.F32 else cast(r, dt)

        try:
            e = hull_alt(e, v, fused, [ea, eb, ec], (a, b, c), "contract fma")
        except ValueError:  # shapes that do not broadcast to the result (cannot happen in
            continue        # well-typed programs; kept strict)
    return e


# ---------------------------------------------------------------------------------------------
# wp: the textbook f32 algorithms
# ---------------------------------------------------------------------------------------------
def wp(site: Any, e: Enc | None, *, afn: bool = False) -> Enc | None:
    from tilefoundry.semantics.ops.nn import Gelu, LayerNorm, RMSNorm, Sigmoid, Silu, SoftMax

    op = site.op
    v = np.asarray(site.value)
    dt = dtype_of(v)
    if v.size == 0:
        return e
    with np.errstate(all="ignore"):
        if isinstance(op, RMSNorm | LayerNorm):
            return _norm(site, e, isinstance(op, LayerNorm))
        if isinstance(op, SoftMax):
            return _softmax(site, e, afn)
        lo, hi = _box(site)
        if isinstance(op, Sigmoid):
            return _with_zero(as_enc(e, v), lo < -EXP_OVERFLOW, False)
        if isinstance(op, Silu):
            out = _with_zero(as_enc(e, v), lo < -EXP_OVERFLOW, True)
            x = _absx(site)
            return _with_abs(out, v, np.where(lo < -RCP_FLUSH, x * 2 * SUB, 0.0), site)
        if isinstance(op, Gelu):
            x = _absx(site)
            y = np.abs(as_f64(v))
            if op.approximate == "tanh":
                zl, zh = (t * (_C0 + _C1 * t * t) for t in (lo, hi))
                tl, th = np.tanh(zl), np.tanh(zh)
                one_m_t2 = np.where((zl <= 0) & (zh >= 0), 1.0,
                                    1 - np.minimum(tl * tl, th * th))
                z = x * (_C0 + _C1 * x * x)
                a = 0.5 * x * (12 * U + 4 * U * z * one_m_t2) + 2 * U * y
            else:
                a = 0.5 * x * 35 * U + 2 * U * y
            a = np.where(np.isfinite(a), a, 0.0)
            out = _with_abs(as_enc(e, v), v, a, site)
            # x · (1 + t) overflows before the halving where |x| > max / 2: ±inf
            over = np.broadcast_to((x > F32_MAX / 2) & (np.abs(as_f64(v)) > 0), v.shape)
            if over.any():
                inf = cast(np.where(np.signbit(as_f64(v)), -np.inf, np.inf).astype(np.float32),
                           dt)
                out = hull(out, Enc(np.where(over, inf, out.lo), np.where(over, inf, out.hi),
                                    out.nan, out.real, out.cause))
            return out
    del dt
    return e


def wp_rope(site: Any, e: Any) -> Any:
    """RoPE's textbook q·cos + rotate_half(q)·sin in f32: two products and a sum, each
    rounded (u): an absolute error u·(|q·c| + |r·s|)·(1 + u) + u·|y| per output, which the
    strict 2-ulp budget (Kahan's algorithm, or products of one sign) does not cover where the
    products cancel. Exact inputs only (an enclosed operand keeps its strict enclosure)."""
    outs = site.value
    if not isinstance(outs, tuple) or any(x is not None for x in site.encs):
        return e
    q, k, c, sn, pos = (np.asarray(a) for a in site.args)
    f32 = [np.abs(as_f64(t)) for t in (q, k, c, sn)]
    zero = np.zeros_like(f32[2])
    # the op's own gather / rotation on magnitudes: |x|·|c| and rot(|x|)·|s|
    with np.errstate(all="ignore"):
        pc = site.impl(*(cast(t.astype(np.float32), DType.F32) for t in (f32[0], f32[1], f32[2],
                                                                          zero)), pos)
        ps = site.impl(*(cast(t.astype(np.float32), DType.F32) for t in (f32[0], f32[1], zero,
                                                                          f32[3])), pos)
    es = list(e) if isinstance(e, tuple) else [e] * len(outs)
    res = []
    for i, o in enumerate(outs):
        o = np.asarray(o)
        y = np.abs(as_f64(o))
        # (the kernel may round the magnitudes to the op's dtype: 2^-7 covers bf16 and fp8e4m3)
        a = U * (np.abs(as_f64(pc[i])) + np.abs(as_f64(ps[i]))) * (1 + 2.0 ** -7) + U * y
        a = np.where(np.isfinite(a), a, 0.0)
        res.append(_with_abs(as_enc(es[i], o), o, a, site))
    return tuple(res)


def _iv(site: Any, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from tilefoundry.oracle.enclosures.nn import _iv as iv

    return iv(as_enc(site.encs[i] if isinstance(site.encs[i], Enc) else None,
                     np.asarray(site.args[i])))


def _rel(lo: np.ndarray, hi: np.ndarray, k: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] widened by a relative error k (both ends, either sign)."""
    return lo - np.abs(lo) * k, hi + np.abs(hi) * k


def _norm(site: Any, e: Enc | None, centered: bool) -> Enc | None:
    from tilefoundry.oracle.enclosures.nn import _imul, _isq

    v = np.asarray(site.value)
    dt = dtype_of(v)
    xl, xh, xb = _iv(site, 0)
    gl, gh, gb = _iv(site, 1)
    n = xl.shape[-1]
    eps = float(site.op.eps)
    if centered:
        bl, bh, bb = _iv(site, 2)
        a = np.maximum(np.abs(xl), np.abs(xh)).sum(-1, keepdims=True) / n
        emu = gamma(n + 1) * a + n * SUB
        mul, muh = xl.sum(-1, keepdims=True) / n - emu, xh.sum(-1, keepdims=True) / n + emu
        dl, dh = _rel(xl - muh, xh - mul, U)
        over_mu = a * n > F32_MAX
    else:
        bl = bh = np.zeros(())
        bb = np.zeros((), bool)
        dl, dh = xl, xh
        over_mu = np.zeros((*xl.shape[:-1], 1), bool)
    ql, qh = _isq(dl, dh)
    g = gamma(n + 2)
    sl = np.maximum(ql.sum(-1, keepdims=True) * (1 - g) - n * SUB, 0.0)
    sh = qh.sum(-1, keepdims=True) * (1 + g) + n * SUB
    over = (sh > F32_MAX) | (qh.max(-1, keepdims=True) > F32_MAX)
    vl, vh = (sl / n + eps) * (1 - U) ** 2, (sh / n + eps) * (1 + U) ** 2
    rl = 1 / np.sqrt(vh) * (1 - 4 * U)
    rh = np.where(vl > 0, 1 / np.sqrt(vl) * (1 + 4 * U), np.inf)
    yl, yh = _rel(*_imul(dl, dh, rl, rh), U)
    yl, yh = _rel(*_imul(yl, yh, gl, gh), U)
    yl, yh = _rel(yl + bl, yh + bh, U)
    bad = np.broadcast_to(xb.any(-1, keepdims=True), v.shape) | gb | bb | ~np.isfinite(yl) | \
        ~np.isfinite(yh)
    w = _outward(np.where(bad, 0.0, yl), np.where(bad, 0.0, yh), dt)
    strict = as_enc(e, v)
    bad = np.broadcast_to(bad, v.shape)
    w = Enc(np.where(bad, strict.lo, w.lo), np.where(bad, strict.hi, w.hi),
            np.zeros(v.shape, bool), strict.real | ~bad, "wp")
    out = hull(strict, w)
    ovf = np.broadcast_to(over | over_mu, v.shape) & ~bad
    if ovf.any():  # rsqrt(inf) = 0: y = b (LayerNorm) or ±0 (RMSNorm); NaN from inf · 0
        out = _with_zero(out, ovf, np.signbit(as_f64(v)))
        if centered:
            bvals = np.broadcast_to(np.asarray(site.args[2]), v.shape)
            out = hull(out, Enc(np.where(ovf, bvals, out.lo), np.where(ovf, bvals, out.hi),
                                out.nan, out.real, out.cause))
        out = Enc(out.lo, out.hi, out.nan | ovf, out.real, out.cause)
    out.cause = out.cause or "wp"
    return out


def _softmax(site: Any, e: Enc | None, afn: bool) -> Enc | None:
    from tilefoundry.oracle.enclosures.nn import _exclusive_sum

    v = np.asarray(site.value)
    dt = dtype_of(v)
    ax = site.op.axis % v.ndim
    xl, xh, xb = (np.moveaxis(t, ax, -1) for t in _iv(site, 0))
    n = xl.shape[-1]
    m_lo, m_hi = xl.max(-1, keepdims=True), xh.max(-1, keepdims=True)
    dl, dh = _rel(xl - m_hi, xh - m_lo, U)
    dabs = np.maximum(np.abs(dl), np.abs(dh))
    c = (6 + 4 * dabs) * U if afn else 6 * U
    el = np.maximum(np.exp(dl) * (1 - c) - SUB, 0.0)
    eh = np.exp(dh) * (1 + c) + SUB
    g = gamma(n)
    div = 5 * U if afn else U
    yl = el / ((el + _exclusive_sum(eh)) * (1 + g)) * (1 - div)
    yh = eh / ((eh + _exclusive_sum(el)) * (1 - g)) * (1 + div)
    bad = np.broadcast_to(xb.any(-1, keepdims=True), xl.shape) | ~np.isfinite(yl) | \
        ~np.isfinite(yh)
    yl, yh, bad = (np.moveaxis(t, -1, ax) for t in (yl, yh, bad))
    w = _outward(np.where(bad, 0.0, yl), np.where(bad, 0.0, yh), dt)
    strict = as_enc(e, v)
    w = Enc(np.where(bad, strict.lo, w.lo), np.where(bad, strict.hi, w.hi),
            np.zeros(v.shape, bool), strict.real | ~bad, "wp")
    out = hull(strict, w)
    out.cause = out.cause or "wp softmax"
    return out
