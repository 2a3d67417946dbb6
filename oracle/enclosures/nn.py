"""Enclosure rules of the nn family (split from ``oracle/enclosure_rules.py``, D382; the package
mirrors ``semantics/evaluator/``). The monotone and critical-point activations, MatMul and Conv2D
(interval products), the row ops (SoftMax, RMSNorm, LayerNorm) and RoPE.
"""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.enclosure import (
    Enc,
    register_enclosure,
    with_nan,
)
from tilefoundry.oracle.enclosure import as_f64 as _f64
from tilefoundry.oracle.enclosures.core import Site, _full_like, _outward, _ulp_source
from tilefoundry.oracle.enclosures.math import (
    _GELU_MIN,
    _GELU_TANH_MIN,
    _SILU_MIN,
    _elementwise_unary,
)
from tilefoundry.oracle.enclosures.tensor import _tree_bounds
from tilefoundry.semantics.dtypes import DType, dtype_of
from tilefoundry.semantics.ops.nn import (
    ACTIVATIONS,
    Conv2D,
    Gelu,
    LayerNorm,
    MatMul,
    RMSNorm,
    RoPE,
    Silu,
    SoftMax,
)

#: the activations whose ``FACTS`` say monotone non-decreasing: the enclosure is the image of
#: the box's ends (no critical points inside the domain)
_MONOTONE = tuple(c for c in ACTIVATIONS if "monotone" in (c.FACTS or ()))


@register_enclosure(*_MONOTONE)
def _monotone_nn(s: Site):
    return _elementwise_unary(s)


@register_enclosure(Silu)
def _silu(s: Site):
    return _elementwise_unary(s, (_SILU_MIN,))


@register_enclosure(Gelu)
def _gelu(s: Site):
    return _elementwise_unary(s, (_GELU_MIN, _GELU_TANH_MIN))


def _products(a: Enc, b: Enc):
    """Per (..., m, n, k): the f64 intervals of the products of a (..., m, k) and b (..., k, n)
    (exact: products of f32-representable values), from the operands' real parts; plus the
    leaves that may be NaN (an operand may be), that cross the domain (inf · 0 at a corner),
    and that are certainly NaN (an operand has no real part)."""
    with np.errstate(all="ignore"):
        al = np.where(a.real, _f64(a.lo), 0.0)[..., :, None, :]
        ah = np.where(a.real, _f64(a.hi), 0.0)[..., :, None, :]
        bl = np.swapaxes(np.where(b.real, _f64(b.lo), 0.0), -1, -2)[..., None, :, :]
        bh = np.swapaxes(np.where(b.real, _f64(b.hi), 0.0), -1, -2)[..., None, :, :]
        c = np.stack(np.broadcast_arrays(al * bl, al * bh, ah * bl, ah * bh))
        isn = np.isnan(c)
        lo = np.where(isn, np.inf, c).min(0)
        hi = np.where(isn, -np.inf, c).max(0)
    shape = lo.shape

    def leaves(m_a, m_b):
        return np.broadcast_to(m_a[..., :, None, :] | np.swapaxes(m_b, -1, -2)[..., None, :, :],
                               shape)

    maybe_nan = leaves(a.nan, b.nan)
    dead = leaves(~a.real, ~b.real)
    return lo, hi, maybe_nan, isn.any(0) & ~dead, dead


def _matmul_enc(a: Enc, b: Enc, out_dt: DType, cause: str) -> Enc | None:
    from tilefoundry.semantics.matmul import ETA_F32

    lo, hi, maybe_nan, cross, dead = _products(a, b)
    k = lo.shape[-1]
    if k == 0:
        return None
    skip = cross | dead
    e = _tree_bounds(np.where(skip, 0.0, lo), np.where(skip, 0.0, hi), k, out_dt, None,
                     ETA_F32, cause)
    crossed, died = cross.any(-1), dead.any(-1)
    e = with_nan(e, maybe_nan.any(-1) | crossed | died)
    if crossed.any():
        f = Enc.full(out_dt, e.shape, cause)
        e = Enc(np.where(crossed, f.lo, e.lo), np.where(crossed, f.hi, e.hi), e.nan, e.real,
                cause)
    return Enc(e.lo, e.hi, e.nan, e.real & ~(died & ~crossed), cause)


def _int_matmul(a: Enc, b: Enc, v: np.ndarray) -> Enc:
    """Interval products summed exactly (f64 holds them while every bound is below 2^53); where
    the sum's bounds stay inside the result dtype nothing wraps and the interval is exact,
    elsewhere the i64 accumulator's wrap admits every value."""
    lo, hi, _, _, _ = _products(a, b)
    slo, shi = lo.sum(-1), hi.sum(-1)
    info = np.iinfo(v.dtype)
    ok = (np.abs(lo).max(-1, initial=0) * max(lo.shape[-1], 1) < 2.0 ** 53) & \
        (np.abs(hi).max(-1, initial=0) * max(hi.shape[-1], 1) < 2.0 ** 53) & \
        (slo >= info.min) & (shi <= info.max)
    f = _full_like(v, "integer matmul of enclosed values (wraps)")
    lo_v = np.where(ok, np.clip(slo, info.min, info.max), 0).astype(v.dtype)
    hi_v = np.where(ok, np.clip(shi, info.min, info.max), 0).astype(v.dtype)
    cause = a.cause or b.cause or "MatMul"
    return Enc(*(np.broadcast_to(t, v.shape).copy() for t in (
        np.where(ok, lo_v, f.lo), np.where(ok, hi_v, f.hi), np.zeros(v.shape, bool),
        np.ones(v.shape, bool))), cause if ok.all() else f.cause)


@register_enclosure(MatMul)
def _matmul(s: Site):
    v = np.asarray(s.value)
    if s.exact_inputs and not s.contracts:
        return None
    if not dtype_of(v).is_float:
        return _int_matmul(s.enc(0), s.enc(1), v)
    e = _matmul_enc(s.enc(0), s.enc(1), dtype_of(v), "MatMul")
    if e is None:
        return None
    return Enc(*(np.broadcast_to(t, v.shape).copy() for t in (e.lo, e.hi, e.nan, e.real)),
               e.cause)


@register_enclosure(Conv2D)
def _conv2d(s: Site):
    from tilefoundry.semantics.evaluator.nn import conv2d_operands, conv2d_result

    v = np.asarray(s.value)
    if s.exact_inputs and not s.contracts:
        return None
    op = s.op
    ex, ew, eb = s.enc(0), s.enc(1), s.enc(2)
    parts = []
    for attr in ("lo", "hi"):
        parts.append(conv2d_operands(getattr(ex, attr), getattr(ew, attr), getattr(eb, attr),
                                     op.stride, op.padding, op.dilation, op.groups))
    def moved(mask_of):  # a flag per operand element, moved like the values (the appended
        # ones column of a and the padding are never flagged)
        fa, fb, _ = conv2d_operands(*(np.where(mask_of(e), 1.0, 0.0).astype(np.float32)
                                      for e in (ex, ew, eb)), op.stride, op.padding,
                                    op.dilation, op.groups)
        fa[..., -1] = 0.0
        return fa != 0, fb != 0

    (alo, blo, shape), (ahi, bhi, _) = parts
    (na, nb), (da, db) = moved(lambda e: e.nan), moved(lambda e: ~e.real)
    a = Enc(alo, ahi, na, ~da)
    b = Enc(blo, bhi, nb, ~db)
    e = _matmul_enc(a, b, dtype_of(v), "Conv2D")
    if e is None:
        return None
    return Enc(*(conv2d_result(t, shape) for t in (e.lo, e.hi, e.nan, e.real)), "Conv2D")


# ---------------------------------------------------------------------------------------------
# normalizations and RoPE: interval arithmetic in f64, rounded outward, widened by the budget
# ---------------------------------------------------------------------------------------------
def _iv(e: Enc) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The real part in f64 (0 where unusable) and the elements whose real part is infinite
    or empty (those make the interval formulas meaningless). NaN possibilities are handled by
    the caller (``_row_nan``)."""
    lo, hi = _f64(e.lo), _f64(e.hi)
    bad = e.real & (~np.isfinite(lo) | ~np.isfinite(hi))
    return np.where(bad | ~e.real, 0.0, lo), np.where(bad | ~e.real, 0.0, hi), bad


def _row_nan(encs: list[Enc], shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """A row op propagates NaN to its whole row (softmax, LayerNorm, RMSNorm): the rows that
    may be NaN, and those that certainly are (an element with no real part)."""
    may = np.zeros(shape, bool)
    dead = np.zeros(shape, bool)
    for e in encs:
        may = may | np.broadcast_to((e.nan | ~e.real).any(-1, keepdims=True), shape)
        dead = dead | np.broadcast_to((~e.real).any(-1, keepdims=True), shape)
    return may, dead


def _imul(al, ah, bl, bh):
    c = np.stack([al * bl, al * bh, ah * bl, ah * bh])
    return c.min(0), c.max(0)


def _isq(al, ah):
    lo = np.where((al <= 0) & (ah >= 0), 0.0, np.minimum(al * al, ah * ah))
    return lo, np.maximum(al * al, ah * ah)


def _row_op(s: Site, fn) -> Enc | None:
    v = np.asarray(s.value)
    if s.exact_inputs:
        return _ulp_source(s)
    with np.errstate(all="ignore"):
        lo, hi, bad, may_nan, dead = fn(s)
    bad = np.broadcast_to(bad, v.shape) & ~dead
    e = _outward(lo, hi, dtype_of(v), np.broadcast_to(may_nan, v.shape).copy(),
                 ~np.broadcast_to(dead, v.shape), s.name)
    f = _full_like(v, f"{s.name} of a row with an infinite enclosed element")
    e = Enc(np.where(bad, f.lo, e.lo), np.where(bad, f.hi, e.hi), e.nan | bad, e.real | bad,
            e.cause)
    return s.widen_ulp(e)


def _exclusive_sum(t: np.ndarray) -> np.ndarray:
    """Per element of the last axis, the sum of the *other* elements, without a subtraction."""
    z = np.zeros_like(t[..., :1])
    before = np.concatenate([z, np.cumsum(t[..., :-1], axis=-1)], axis=-1)
    after = np.concatenate([np.cumsum(t[..., :0:-1], axis=-1)[..., ::-1], z], axis=-1)
    return before + after


@register_enclosure(SoftMax)
def _softmax(s: Site):
    def fn(s):
        ax = s.op.axis % np.ndim(s.value)
        x = s.enc(0)
        moved = Enc(*(np.moveaxis(t, ax, -1) for t in (x.lo, x.hi, x.nan, x.real)))
        lo, hi = _f64(moved.lo), _f64(moved.hi)
        # an element whose real part is certainly -inf (a masked score) adds e^-inf = 0 and
        # gets exactly 0, and a real part reaching down to -inf only lowers e^lo to 0: only
        # +inf, or a row whose every element may be -inf (0 / 0: NaN), leaves a row unbounded
        bad = moved.real & ((lo == np.inf) | (hi == np.inf))
        use = moved.real & ~bad
        lo, hi = np.where(use, lo, 0.0), np.where(use, hi, 0.0)
        m = np.where(use, hi, -np.inf).max(-1, keepdims=True)
        m = np.where(m == -np.inf, 0.0, m)  # no usable element: the row is NaN or unbounded
        el, eh = np.exp(lo - m), np.exp(hi - m)
        # y_i >= e^lo_i / (e^lo_i + sum_{j != i} e^hi_j), y_i <= e^hi_i / (e^hi_i + sum_{j != i}
        # e^lo_j); the sums over the others are prefix + suffix sums of positive terms (a total
        # minus the own term cancels: 1 + 1e-48 - 1 is 0, which made y_i's lower bound 1)
        ylo = np.where(el == 0, 0.0, el / (el + _exclusive_sum(eh)))
        yhi = np.where(eh == 0, 0.0, eh / (eh + _exclusive_sum(el)))
        all_neg = (~use | (lo == -np.inf)).all(-1, keepdims=True)
        rowbad = np.broadcast_to(bad.any(-1, keepdims=True) | all_neg, bad.shape)
        may, dead = _row_nan([moved], rowbad.shape)
        return tuple(np.moveaxis(t, -1, ax) for t in (ylo, yhi, rowbad, may, dead))

    return _row_op(s, fn)


def _rms_or_ln(s: Site, centered: bool):
    xl, xh, xb = _iv(s.enc(0))
    gl, gh, gb = _iv(s.enc(1))
    n = xl.shape[-1]
    eps = float(s.op.eps)
    if centered:
        bl, bh, bb = _iv(s.enc(2))
        mul, muh = xl.mean(-1, keepdims=True), xh.mean(-1, keepdims=True)
        dl, dh = xl - muh, xh - mul
        ql, qh = _isq(dl, dh)
    else:
        dl, dh = xl, xh
        ql, qh = _isq(xl, xh)
        bl = bh = 0.0
        bb = False
    vl, vh = ql.sum(-1, keepdims=True) / n + eps, qh.sum(-1, keepdims=True) / n + eps
    rl, rh = 1.0 / np.sqrt(vh), 1.0 / np.sqrt(vl)
    yl, yh = _imul(dl, dh, rl, rh)
    yl, yh = _imul(yl, yh, gl, gh)
    shape = np.broadcast_shapes(xb.shape, np.shape(gb))
    bad = np.broadcast_to(xb.any(-1, keepdims=True), shape) | gb | bb
    encs = [s.enc(i) for i in range(len(s.args))]
    may, dead = _row_nan(encs[:1], shape)
    for e in encs[1:]:  # weight / bias: elementwise
        may, dead = may | (e.nan | ~e.real), dead | ~e.real
    return yl + bl, yh + bh, bad, may, dead


@register_enclosure(RMSNorm)
def _rmsnorm(s: Site):
    return _row_op(s, lambda s: _rms_or_ln(s, False))


@register_enclosure(LayerNorm)
def _layernorm(s: Site):
    return _row_op(s, lambda s: _rms_or_ln(s, True))


@register_enclosure(RoPE)
def _rope(s: Site):
    outs = s.value
    if s.exact_inputs:
        return tuple(s.widen_ulp(Enc.point(np.asarray(o))) if s.ulp else None
                     for o in outs)
    res = []
    pos = np.asarray(s.args[4]).astype(np.int64)
    cl, ch, cb = _iv(s.enc(2))
    sl, sh, sb = _iv(s.enc(3))
    if s.encs[4] is not None:
        return tuple(_full_like(o, "RoPE with enclosed positions") for o in outs)
    ce, se = s.enc(2), s.enc(3)
    cn, sn = (ce.nan | ~ce.real)[pos], (se.nan | ~se.real)[pos]
    cd, sd = (~ce.real)[pos], (~se.real)[pos]
    cl, ch, cb, sl, sh, sb = (t[pos] for t in (cl, ch, cb, sl, sh, sb))
    for i, o in enumerate(outs):
        x = s.enc(i)
        xl, xh, xb = _iv(x)
        xn, xd = x.nan | ~x.real, ~x.real
        hh = xn.shape[-1] // 2
        rn = np.concatenate([xn[..., hh:], xn[..., :hh]], -1)
        rd = np.concatenate([xd[..., hh:], xd[..., :hh]], -1)
        may, dead = xn | rn | cn | sn, xd | rd | cd | sd
        h = xl.shape[-1] // 2
        rl = np.concatenate([-xh[..., h:], xl[..., :h]], -1)
        rh = np.concatenate([-xl[..., h:], xh[..., :h]], -1)
        rb = np.concatenate([xb[..., h:], xb[..., :h]], -1)
        with np.errstate(all="ignore"):
            p1l, p1h = _imul(xl, xh, cl, ch)
            p2l, p2h = _imul(rl, rh, sl, sh)
        bad = xb | rb | cb | sb
        ov = np.asarray(o)
        dead = np.broadcast_to(dead, ov.shape)
        e = _outward(p1l + p2l, p1h + p2h, dtype_of(ov), np.broadcast_to(may, ov.shape).copy(),
                     ~dead, "RoPE")
        f = _full_like(ov, "RoPE of an infinite enclosed element")
        bad = np.broadcast_to(bad, ov.shape) & ~dead
        e = Enc(np.where(bad, f.lo, e.lo), np.where(bad, f.hi, e.hi), e.nan | bad,
                e.real | bad, e.cause)
        res.append(s.widen_ulp(e))
    return tuple(res)
