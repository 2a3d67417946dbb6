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
from tilefoundry.semantics.ops import LayerNorm, RMSNorm
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


NN_OPS: dict[type, Callable[[Any, list[Val], set[str]], Val]] = {
    LayerNorm: _layernorm, RMSNorm: _rmsnorm}
