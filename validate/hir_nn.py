"""SMT semantics of the nn ops whose reference is an exact float64 algorithm (``LayerNorm``,
``RMSNorm``): the reference evaluator's own steps (``semantics/evaluator/nn.py``), transcribed
operation for operation on Z3 ``Float64`` terms and rounded once to the dtype
(``round_f64_once``, ``encode.round_to`` from f64). Exact: every step is one IEEE f64 operation
(add, sub, mul, div, sqrt, a comparison, a select), so the encoding is the reference's value,
not a bound on it. Each op's ULP contract (``semantics/ulp.py``) is not what is checked: a
lowering is proved only when it computes the reference's bits.

* ``LayerNorm`` (``eval_layernorm``), per row of the last axis: ``finite`` (every lane
  finite, ``np.isfinite`` spelled ``w - w == 0``: ``_is_finite``), ``wf`` (the lanes, 0 where the row is not finite), the compensated row sum
  ``s_hi, s_lo = dd_row_sum(wf)`` (``symexec.dd_row_sum``), per lane ``t, t_err =
  two_sum(n·wf, -s_hi)``, ``dev = t + (t_err - s_lo)`` (an exact zero made +0), ``var =
  np.sum(dev·dev) / n³`` (``symexec.numpy_sum_f64``: numpy's pairwise order over a C-contiguous
  fiber), ``rstd = 1 / sqrt(var + eps)``, ``v = ((dev / n)·rstd)·w + b``, NaN where the row is
  not finite.
* ``RMSNorm`` (``eval_rmsnorm``): ``ms = np.sum(x·x) / n``, ``r = 1 / sqrt(ms + eps)``, ``v =
  (x·r)·w``.

Operands widen exactly to f64 (through f32, as ``_wide``). The registered table is ``NN_OPS``
(merged into ``hir_smt.HIR_OPS``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import z3

from tilefoundry.compiler import kir
from tilefoundry.semantics.ops import (
    Conv2D,
    Gelu,
    LayerNorm,
    RMSNorm,
    RoPE,
    Sigmoid,
    Silu,
    SoftMax,
    Tanh,
)
from tilefoundry.validate import encode as E
from tilefoundry.validate.encode import Unsupported
from tilefoundry.validate.symexec import dd_row_sum, numpy_sum_f64, two_sum

__all__ = ["NN_OPS"]

Val = tuple[np.ndarray, str]
F64 = "f64"


def _c(v: float) -> z3.FPRef:
    return E.const(np.float64(v), F64)


def _operands(op: Any, args: list[Val], ranks: str) -> tuple[list[np.ndarray], str, int]:
    """The operands widened exactly to f64, the shared dtype and the last-axis length; the
    evaluator's operand errors (a non-float or mixed dtype, a weight not rank-1 of the last
    axis) are "unsupported" (an evaluation error is no program to validate)."""
    name = type(op).__name__
    dts = {dt for _, dt in args}
    if len(dts) != 1 or not kir.is_float(next(iter(dts))):
        raise Unsupported(f"{name} over dtypes {sorted(dts)} (an evaluation error)")
    dt = dts.pop()
    x = args[0][0]
    if x.ndim < 1 or any(a.shape != x.shape[-1:] for a, _ in args[1:]):
        raise Unsupported(f"{name} with {ranks} not rank-1 of x's last axis (an evaluation "
                          f"error)")
    wide = [np.vectorize(lambda t: E.widen(t, dt, F64), otypes=[object])(a) if a.size else a
            for a, _ in args]
    return wide, dt, x.shape[-1]


def _is_finite(t: z3.FPRef) -> z3.BoolRef:
    """``np.isfinite`` spelled ``t - t == 0`` (the same predicate on every f64, NaN and inf
    giving NaN; ``test_compensated`` proves the two spellings equal): it is the spelling the
    lowering uses, so equal inputs build hash-consed equal terms and the proof is immediate."""
    zero = _c(0.0)
    return z3.fpEQ(E.binary("sub", F64)(t, t), zero)


def _all(bs: list[z3.BoolRef]) -> z3.BoolRef:
    """``np.all`` of a row as a left chain of binary conjunctions."""
    acc = bs[0]
    for b in bs[1:]:
        acc = z3.And(acc, b)
    return acc


def _layernorm(op: LayerNorm, args: list[Val], abstr: set[str]) -> Val:
    (w, g, b), dt, n = _operands(op, args, "weight / bias")
    if w.size == 0:
        return np.empty(w.shape, object), dt
    add, sub, mul, div = (E.binary(k, F64) for k in ("add", "sub", "mul", "div"))
    nn, n3, eps, one, zero = _c(float(n)), _c(float(n) ** 3), _c(op.eps), _c(1.0), _c(0.0)
    nan = _c(np.nan)
    rows = w.reshape(-1, n)
    out = np.empty(rows.shape, object)
    for r in range(rows.shape[0]):
        lanes = list(rows[r])
        finite = _all([_is_finite(t) for t in lanes])
        wf = [z3.If(finite, t, zero) for t in lanes]
        s_hi, s_lo = dd_row_sum(wf)
        dev = []
        for t in wf:
            tt, t_err = two_sum(mul(nn, t), z3.fpNeg(s_hi))
            d = add(tt, sub(t_err, s_lo))
            dev.append(z3.If(z3.fpEQ(d, zero), zero, d))
        var = div(numpy_sum_f64([mul(d, d) for d in dev]), n3)
        rstd = div(one, z3.fpSqrt(E.RNE, add(var, eps)))
        for i, d in enumerate(dev):
            v = add(mul(mul(div(d, nn), rstd), g[i]), b[i])
            out[r, i] = E.round_to(z3.If(finite, v, nan), F64, dt, "nonfinite")
    return out.reshape(w.shape), dt


def _rmsnorm(op: RMSNorm, args: list[Val], abstr: set[str]) -> Val:
    (w, g), dt, n = _operands(op, args, "weight")
    if w.size == 0:
        return np.empty(w.shape, object), dt
    add, mul, div = (E.binary(k, F64) for k in ("add", "mul", "div"))
    rows = w.reshape(-1, n)
    out = np.empty(rows.shape, object)
    for r in range(rows.shape[0]):
        lanes = list(rows[r])
        ms = div(numpy_sum_f64([mul(t, t) for t in lanes]), _c(float(n)))
        rr = div(_c(1.0), z3.fpSqrt(E.RNE, add(ms, _c(op.eps))))
        for i, t in enumerate(lanes):
            out[r, i] = E.round_to(mul(mul(t, rr), g[i]), F64, dt, "nonfinite")
    return out.reshape(w.shape), dt


def _activation(op: Any, args: list[Val], abstr: set[str]) -> Val:
    """``Sigmoid`` / ``Tanh`` / ``Silu`` / ``Gelu``: the kernel IR's ``math`` function of that
    name (``kir_math.MATH_OPS``), whose definition *is* the op's reference evaluator (the
    correctly rounded value in the operand's dtype): one uninterpreted function per (function,
    dtype), the same one the lowered ``math`` instruction reads (D523). Exact as an encoding;
    what it leaves out is the renderers' ULP accuracy of that function."""
    from tilefoundry.compiler.kir_math import math_fn_of

    (x, dt), = args
    name = math_fn_of(op)
    if name is None:
        raise Unsupported(f"unsupported op {op!r} (no math function of that name)")
    if not kir.is_float(dt):
        raise Unsupported(f"unsupported op {type(op).__name__} on {dt} (an evaluation error)")
    abstr.add(f"math.{name} (uninterpreted)")
    f = E.math_apply(name, dt)
    return (np.vectorize(f, otypes=[object])(x) if x.size
            else np.empty(x.shape, object)), dt


#: the abstraction of an op encoded as its ULP contract's formula over uninterpreted math
#: functions (D523): a counterexample that replays with other bits than the reference's is
#: judged by the oracle's contracts (``refine.check_lowering``), never bit for bit
ULP_FORMULA = "ulp-contract formula: "


def _softmax(op: Any, args: list[Val], abstr: set[str]) -> Val:
    """``SoftMax`` as its contract's stated formula (``semantics/ulp.py``, "softmax"; the
    reference evaluator's steps) in f64 over the inputs widened exactly: per fiber ``m = max
    w`` (NaN-propagating), ``d_i = w_i - m``, ``e_i = exp(d_i)`` (``math.exp`` on f64,
    uninterpreted: the same function the lowering's f64 ``math exp`` reads), ``S = sum e``
    (``unordered_tree``: its admitted set, as every f64 tree sum), ``y_i = e_i / S``, rounded
    once to the dtype (D523). The reference's underflow rule (a zero quotient of a finite
    ``d_i`` is the least double) is left out: with the real exp, ``e_i >= +0`` and ``S >= 1``,
    so such a quotient is +0, and +0 and the least double round to the same +0 in every dtype
    with a zero; f8e8m0 (no zero: +0 rounds to NaN there, admitted by its ULP contract, lemma
    B') is "unsupported". The rule would only let an uninterpreted ``exp`` of -0 make
    differences that the real one cannot. A lowering that changes the formula (an operand, a constant, the
    rounding, the dtype it computes in) is caught; the accuracy of ``exp`` is the renderers'
    concern, and a counterexample that replays with other bits than the reference's is judged by
    the op's ULP contract (the oracle), not bit for bit."""
    (x, dt), = args
    if not kir.is_float(dt) or dt == F64:
        raise Unsupported(f"unsupported op SoftMax on {dt}")
    if dt == "f8e8m0":
        raise Unsupported("unsupported op SoftMax on f8e8m0 (no zero: an underflowing "
                          "quotient is 2^-127 in the reference and NaN in the formula, which "
                          "its ULP contract admits but the formula encoding cannot state)")
    if x.ndim == 0:
        raise Unsupported("SoftMax of a rank-0 value (an evaluation error)")
    if x.size == 0:
        return np.empty(x.shape, object), dt
    from tilefoundry.validate.symexec import reduce_lanes

    abstr.add("math.exp (uninterpreted)")
    abstr.add(ULP_FORMULA + "SoftMax (f64 max, exp, tree sum, division: the accuracy of exp "
                            "is not checked)")
    ax = op.axis % x.ndim
    v = np.moveaxis(x, ax, -1)
    sub, div = E.binary("sub", F64), E.binary("div", F64)
    exp = E.math_apply("exp", F64)
    out = np.empty(v.shape, object)
    for b in np.ndindex(*v.shape[:-1]):
        w = [E.widen(t, dt, F64) for t in v[b]]
        m = reduce_lanes(w, F64, "max", "unordered_tree", None, abstr)
        d = [sub(t, m) for t in w]
        e = [exp(t) for t in d]
        s = reduce_lanes(e, F64, "sum", "unordered_tree", None, abstr)
        for i in range(len(w)):
            out[(*b, i)] = E.round_to(div(e[i], s), F64, dt, "nonfinite")
    return np.moveaxis(out, -1, ax), dt


def _rope(op: Any, args: list[Val], abstr: set[str]) -> tuple[Val, Val]:
    """``RoPE`` (rotate half) as its contract's stated formula (D529): per element of q and k
    ``RN64(x·c + rot·s)`` rounded once to the dtype, where ``x`` is the element widened
    exactly to f64, ``rot`` is ``-x[d + D/2]`` for ``d < D/2`` and ``x[d - D/2]`` after, and
    ``c`` / ``s`` are the cos / sin cache rows at ``pos_ids[s]`` (both products exact in f64).
    The reference sums the two products exactly (TwoSum, round to odd) — the formula's one f64
    rounding is within the op's ULP budget (``semantics/ulp.py``, "rope"), so a counterexample
    that replays with other bits than the reference's is judged by that contract (the oracle),
    never bit for bit (``ULP_FORMULA``). ``pos_ids`` may be data: each row an ``If`` chain
    over the cache's rows; a position outside ``[0, P)`` is the source's evaluation error,
    an unconstrained element there (``hir_dynamic.GATHER_OOB``)."""
    from tilefoundry.validate.choices import unspecified
    from tilefoundry.validate.hir_dynamic import GATHER_OOB

    if len(args) != 5:
        raise Unsupported(f"RoPE with {len(args)} operands (an evaluation error)")
    (q, dt), (k, kdt), (cos, cdt), (sin, sdt), (pos, pdt) = args
    if len({dt, kdt, cdt, sdt}) != 1 or not kir.is_float(dt) or not kir.is_int(pdt):
        raise Unsupported(f"RoPE over dtypes {dt}, {kdt}, {cdt}, {sdt}, {pdt} (an evaluation "
                          f"error)")
    if q.ndim < 2 or k.ndim < 2 or cos.ndim != 2 or sin.shape != cos.shape or pos.ndim != 1:
        raise Unsupported(f"RoPE of shapes {q.shape}, {k.shape}, {cos.shape}, {pos.shape} (an "
                          f"evaluation error)")
    n_s, d = q.shape[-2:]
    if k.shape[-2:] != (n_s, d) or cos.shape[1] != d or pos.shape != (n_s,) or d % 2:
        raise Unsupported(f"RoPE of shapes {q.shape}, {k.shape}, {cos.shape}, {pos.shape} (an "
                          f"evaluation error)")
    abstr.add(ULP_FORMULA + "RoPE (the two exact f64 products summed in one f64 rounding: "
                            "the reference's exact sum is within its ULP budget)")
    h, n_p, w = d // 2, cos.shape[0], E.width(pdt)
    wide = np.vectorize(lambda t: E.widen(t, dt, F64), otypes=[object])
    wc, ws = (wide(cos), wide(sin)) if cos.size else (cos, sin)
    mul, add = E.binary("mul", F64), E.binary("add", F64)
    # per sequence position: (in range, cos row, sin row) as terms
    rows = []
    for i in range(n_s):
        p = pos[i]
        if z3.is_bv_value(p):
            v = p.as_signed_long() if pdt.startswith("i") else p.as_long()
            if not 0 <= v < n_p:
                raise Unsupported(f"RoPE pos_ids[{i}] = {v} outside [0, {n_p}) (an evaluation "
                                  f"error)")
            rows.append((None, list(wc[v]), list(ws[v])))
            continue
        hit = [p == z3.BitVecVal(j, w) for j in range(n_p)]
        cr, sr = [], []
        for col in range(d):
            c_t = s_t = None
            for j in reversed(range(n_p)):
                c_t = wc[j, col] if c_t is None else z3.If(hit[j], wc[j, col], c_t)
                s_t = ws[j, col] if s_t is None else z3.If(hit[j], ws[j, col], s_t)
            cr.append(c_t)
            sr.append(s_t)
        rows.append((z3.Or(hit) if hit else z3.BoolVal(False), cr, sr))
    outs = []
    for x in (q, k):
        out = np.empty(x.shape, object)
        for b in np.ndindex(*x.shape[:-2]):
            for i in range(n_s):
                ok, cr, sr = rows[i]
                xw = [E.widen(t, dt, F64) for t in x[(*b, i)]]
                for col in range(d):
                    rot = z3.fpNeg(xw[col + h]) if col < h else xw[col - h]
                    v = E.round_to(add(mul(xw[col], cr[col]), mul(rot, sr[col])), F64, dt,
                                   "nonfinite")
                    if ok is not None:
                        u = unspecified(("position_oob", dt, v), v.sort(), abstr)
                        abstr.add(GATHER_OOB)
                        v = z3.If(ok, v, u)
                    out[(*b, i, col)] = v
        outs.append((out, dt))
    return outs[0], outs[1]


#: ``+0 + p0 + ... + pk == (p0 + ... + pk) + +0`` in f32 under round-to-nearest-even, for
#: every k, NaN as a class: by induction on k from ``(s + +0) + p == (s + p) + +0`` for all
#: f32 ``s``, ``p`` (both sides are ``s + p`` unless a zero's sign is involved; a sum is -0 only
#: when both addends are -0), which ``tests/validate/test_hir_more.py`` proves with Z3
ZERO_SEED_LEMMA = "(s + +0) + p == (s + p) + +0"


def _conv2d(op: Any, args: list[Val], abstr: set[str]) -> Val:
    """``eval_conv2d``: the f32 matmul of the im2col operands, one rounding to the dtype,
    rearranged to ``[N, O, Ho, Wo]``. The operands are the reference's own ``conv2d_operands``
    run on *positions* (small integers, exact in f32; 0 is its +0 padding, 1 its column of ones,
    ``k + 2`` the k-th element), mapped back to the widened terms; the fold is ``matmul``'s
    K-order fold from +0 (the bias term as itself: ``fl(b · 1) = b``) and the rearrangement
    the reference's ``conv2d_result`` on the terms."""
    from tilefoundry.errors import InvalidArgumentError
    from tilefoundry.semantics.evaluator.nn import conv2d_operands, conv2d_result

    (x, dt), (w, wdt), (b, bdt) = args
    if not kir.is_float(dt) or {wdt, bdt} != {dt} or x.ndim != 4 or w.ndim != 4 or b.ndim != 1:
        raise Unsupported(f"Conv2D of {dt}{list(x.shape)}, {wdt}{list(w.shape)}, "
                          f"{bdt}{list(b.shape)} (an evaluation error)")
    if x.shape[1] != w.shape[1] * op.groups or w.shape[0] % op.groups or \
            b.shape[0] != w.shape[0]:
        raise Unsupported("Conv2D channels that do not fit its groups (an evaluation error)")
    terms = [E.widen(t, dt, "f32") if dt != "f32" else t
             for t in (*x.reshape(-1), *w.reshape(-1), *b.reshape(-1))]
    if len(terms) + 2 > 1 << 24:
        raise Unsupported("Conv2D with more than 2^24 operand elements")
    flat = np.empty(len(terms) + 2, object)
    flat[0], flat[1] = E.const(np.float32(0.0), "f32"), E.const(np.float32(1.0), "f32")
    flat[2:] = terms
    pos = np.arange(2, len(terms) + 2, dtype=np.float32)
    nx, nw = x.size, w.size
    try:
        a, bm, shape = conv2d_operands(pos[:nx].reshape(x.shape), pos[nx:nx + nw].reshape(w.shape),
                                       pos[nx + nw:].reshape(b.shape), op.stride, op.padding,
                                       op.dilation, op.groups)
    except InvalidArgumentError as e:
        raise Unsupported(f"Conv2D: {e} (an evaluation error)") from None
    ia = a.astype(np.int64)
    assert (ia[..., -1] == 1).all()  # the column of ones: its product is the bias itself
    at = flat[ia.reshape(-1)].reshape(a.shape)
    bt = flat[bm.astype(np.int64).reshape(-1)].reshape(bm.shape)
    mul, add = E.binary("mul", "f32"), E.binary("add", "f32")
    n_, g_, hw, k1 = at.shape
    r = np.empty((n_, g_, hw, bt.shape[-1]), object)
    zero = E.zero("f32")
    for n, g, i, j in np.ndindex(*r.shape):
        # the K-order fold from +0 (``matmul``), written ((p0 + p1) + ... + pK) + (+0): the
        # same value (ZERO_SEED_LEMMA), the shape a lowering's fold seeded by the sum's -0
        # identity has, so a solver need not re-derive it
        acc = None
        for k in range(k1 - 1):
            p = mul(at[n, g, i, k], bt[g, k, j])
            acc = p if acc is None else add(acc, p)
        acc = zero if acc is None else add(acc, zero)
        # the bias term last: fl(bias · 1) is the bias (NaN as a class), added as itself
        acc = add(acc, bt[g, k1 - 1, j])
        r[n, g, i, j] = E.round_to(acc, "f32", dt, "nonfinite") if dt != "f32" else acc
    return conv2d_result(r, shape), dt


NN_OPS: dict[type, Callable[[Any, list[Val], set[str]], Any]] = {
    LayerNorm: _layernorm, RMSNorm: _rmsnorm, Sigmoid: _activation, Tanh: _activation,
    Silu: _activation, Gelu: _activation, SoftMax: _softmax, RoPE: _rope, Conv2D: _conv2d}
