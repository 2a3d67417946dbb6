"""Evaluator implementations of the pointwise math family: ``Binary`` and ``Unary``.

Every kind is vectorized over numpy arrays and decides its edge cases explicitly
(ARCHITECTURE.md "Numeric contracts"; docs/decisions.md D20–D22):

* **Float arithmetic** (add sub mul div neg abs ceil round relu square sqrt) is widen–op–round
  (``dtypes.apply_lowp``): operands widen exactly to f32, numpy float32 performs the IEEE
  operation, the result rounds once to the operand dtype (``overflow="nonfinite"``). f32 goes
  through the same path, so every NaN result is the positive quiet NaN (D21). f8e8m0 is treated
  as a float like the others (its cast rules then apply: zero / negative results give NaN).
* **Transcendentals** (exp log exp2 log2 rsqrt) are computed in float64 from the exactly widened
  f32 value (numpy's libm; ``rsqrt`` is ``1 / sqrt`` in float64) and the float64 value is rounded
  **once** to the operand dtype. The single rounding is exact: float64 → f32 is done with
  round-to-odd (numpy's correctly rounded conversion, then one step to the odd neighbour when
  inexact and even), and f32 → dtype with ``dtypes.cast`` (round to nearest even). f32 carries at
  least ``p + 2`` bits more than every narrower float format at every exponent (subnormals
  included), so round-to-odd followed by round-to-nearest-even equals one rounding of the float64
  value. For f32 the value is numpy's correctly rounded float64 → f32 conversion. The only
  deviation from the real result is the float64 libm error (< 1 ulp of float64); the per-op ULP
  budget (later) covers hardware implementations.
* **sqrt** is IEEE correctly rounded in f32 and kept on the widen–op–round path (exact).
* **min / max** propagate NaN (torch.minimum / maximum) and order ``-0 < +0``: ``max(-0, +0)`` is
  ``+0`` and ``min(-0, +0)`` is ``-0`` whatever the operand order. (numpy's ``maximum`` and torch's
  both return the first operand on ``-0 == +0``; the reference does not inherit that.)
* **Comparisons** compare exact values: any comparison with a NaN is false except ``ne`` (true);
  ``-0 == +0``.
* **round** is round half to even (``np.rint``; torch.round agrees); ``ceil(-0.5)`` is ``-0``.
* **relu** is ``x < 0 ? +0 : x``: ``relu(-0)`` is ``-0`` and ``relu(NaN)`` is NaN, matching torch
  (measured: torch.relu(-0.) == -0. on CPU, f32 and bf16).
* **Integers** follow torch with two's-complement wraparound (add sub mul neg abs square;
  ``abs(INT_MIN) == INT_MIN``), computed by numpy in the operand dtype with warnings suppressed;
  ``ceil`` / ``round`` are the identity, ``relu`` is ``max(x, 0)``. Integer ``div`` is rejected by
  the type rules and raises here.
* **Booleans**: and / or / xor / logical_not; comparisons, min and max also accept them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.semantics.dtypes import DType, apply_lowp, cast, dtype_of, widen_to_f32
from tilefoundry.semantics.evaluator.registry import EvalCtx, OpContract, register_eval
from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary, UnaryKind
from tilefoundry.semantics.ulp import budget

__all__ = ["eval_binary", "eval_unary", "round_f64_once"]

_F32 = np.float32


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _f32_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NaN-propagating minimum ordering -0 < +0 (f32 in, f32 out)."""
    tie = np.where(np.signbit(a), a, b)  # equal values: the negative zero wins
    r = np.where(a < b, a, np.where(b < a, b, tie))
    return np.where(np.isnan(a) | np.isnan(b), _F32(np.nan), r).astype(_F32)


def _f32_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NaN-propagating maximum ordering -0 < +0 (f32 in, f32 out)."""
    tie = np.where(np.signbit(a), b, a)  # equal values: the positive zero wins
    r = np.where(a > b, a, np.where(b > a, b, tie))
    return np.where(np.isnan(a) | np.isnan(b), _F32(np.nan), r).astype(_F32)


def _f32_relu(x: np.ndarray) -> np.ndarray:
    return np.where(x < 0, _F32(0.0), x).astype(_F32)


def f64_to_f32_odd(v: np.ndarray) -> np.ndarray:
    """Round float64 to f32 with round-to-odd (exact sticky rounding for a second rounding).

    numpy's float64 → f32 conversion is correctly rounded; when it is inexact and lands on an
    even pattern, the odd neighbour on the other side of ``v`` is the round-to-odd result
    (adjacent f32 patterns alternate parity, also across binades and into the subnormals)."""
    with np.errstate(all="ignore"):
        r = v.astype(_F32)
        inexact = np.isfinite(r) & (r.astype(np.float64) != v)
        even = (r.view(np.uint32) & np.uint32(1)) == 0
        direction = np.where(v > r.astype(np.float64), _F32(np.inf), _F32(-np.inf))
        return np.where(inexact & even, np.nextafter(r, direction), r).astype(_F32)


def round_f64_once(v: np.ndarray, dt: DType) -> np.ndarray:
    """Round a float64 array once (to nearest even) to the float dtype ``dt``.

    NaN gives the positive quiet NaN (D21); overflow follows ``overflow="nonfinite"``."""
    v = np.asarray(v, np.float64)
    with np.errstate(all="ignore"):
        r = v.astype(_F32) if dt is DType.F32 else f64_to_f32_odd(v)
    r = np.where(np.isnan(r), _F32(np.nan), r).astype(_F32)  # np.nan is the positive qNaN
    return np.asarray(cast(r, dt))


def transcendental(fn64: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    dt = dtype_of(x)
    wide = widen_to_f32(x).astype(np.float64)
    with np.errstate(all="ignore"):
        v = np.asarray(fn64(wide), np.float64)
    return round_f64_once(v, dt)


def _rsqrt64(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


# ---------------------------------------------------------------------------------------------
# Binary
# ---------------------------------------------------------------------------------------------
FLOAT_BINARY: dict[BinaryKind, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    BinaryKind.ADD: np.add,
    BinaryKind.SUB: np.subtract,
    BinaryKind.MUL: np.multiply,
    BinaryKind.DIV: np.divide,
    BinaryKind.MIN: _f32_min,
    BinaryKind.MAX: _f32_max,
}

_INT_BINARY: dict[BinaryKind, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    BinaryKind.ADD: np.add,
    BinaryKind.SUB: np.subtract,
    BinaryKind.MUL: np.multiply,
    BinaryKind.MIN: np.minimum,
    BinaryKind.MAX: np.maximum,
}

COMPARE: dict[BinaryKind, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    BinaryKind.EQ: np.equal,
    BinaryKind.NE: np.not_equal,
    BinaryKind.LT: np.less,
    BinaryKind.LE: np.less_equal,
    BinaryKind.GT: np.greater,
    BinaryKind.GE: np.greater_equal,
}

_LOGICAL: dict[BinaryKind, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    BinaryKind.AND: np.logical_and,
    BinaryKind.OR: np.logical_or,
    BinaryKind.XOR: np.logical_xor,
}


@register_eval(Binary)
def eval_binary(ctx: EvalCtx, args: tuple) -> np.ndarray:
    kind = ctx.op.kind
    a, b = (np.asarray(x) for x in args)
    if a.dtype != b.dtype:
        ctx.error(f"{kind.value}: operand dtypes differ ({a.dtype} vs {b.dtype})")
    dt = dtype_of(a)
    if kind in _LOGICAL:
        if dt is not DType.BOOL:
            ctx.error(f"{kind.value}: expects bool operands, got {dt}")
        return np.asarray(_LOGICAL[kind](a, b))
    if kind in COMPARE:
        if dt.is_float:
            a, b = widen_to_f32(a), widen_to_f32(b)  # exact; IEEE comparisons on f32
        with np.errstate(all="ignore"):
            return np.asarray(COMPARE[kind](a, b), dtype=bool)
    if dt.is_float:
        return np.asarray(apply_lowp(FLOAT_BINARY[kind], a, b))
    fn = _INT_BINARY.get(kind)
    if dt is DType.BOOL and kind not in (BinaryKind.MIN, BinaryKind.MAX):
        fn = None
    if fn is None:
        ctx.error(f"{kind.value} is not defined on {dt} operands")
    with np.errstate(all="ignore"):
        r = np.asarray(fn(a, b))
    return r.astype(a.dtype, copy=False)


# ---------------------------------------------------------------------------------------------
# Unary
# ---------------------------------------------------------------------------------------------
FLOAT_UNARY: dict[UnaryKind, Callable[[np.ndarray], np.ndarray]] = {
    UnaryKind.NEG: np.negative,
    UnaryKind.ABS: np.abs,
    UnaryKind.CEIL: np.ceil,
    UnaryKind.ROUND: np.rint,
    UnaryKind.RELU: _f32_relu,
    UnaryKind.SQUARE: lambda x: x * x,
    UnaryKind.SQRT: np.sqrt,
}

TRANSCENDENTAL: dict[UnaryKind, Callable[[np.ndarray], np.ndarray]] = {
    UnaryKind.EXP: np.exp,
    UnaryKind.LOG: np.log,
    UnaryKind.EXP2: np.exp2,
    UnaryKind.LOG2: np.log2,
    UnaryKind.RSQRT: _rsqrt64,
}

INT_UNARY: dict[UnaryKind, Callable[[np.ndarray], np.ndarray]] = {
    UnaryKind.NEG: np.negative,
    UnaryKind.ABS: np.abs,
    UnaryKind.CEIL: np.copy,
    UnaryKind.ROUND: np.copy,
    UnaryKind.RELU: lambda x: np.maximum(x, np.zeros((), x.dtype)),
    UnaryKind.SQUARE: lambda x: x * x,
}


@register_eval(Unary)
def eval_unary(ctx: EvalCtx, args: tuple) -> np.ndarray:
    kind = ctx.op.kind
    (x,) = (np.asarray(v) for v in args)
    dt = dtype_of(x)
    if kind is UnaryKind.LOGICAL_NOT:
        if dt is not DType.BOOL:
            ctx.error(f"logical_not expects a bool operand, got {dt}")
        return np.asarray(np.logical_not(x))
    if dt.is_float:
        if kind in TRANSCENDENTAL:
            ctx.note(OpContract(op=f"Unary({kind.value})", kind="ulp", dtype=dt,
                                ulp=budget(kind.value, dt)))
            return transcendental(TRANSCENDENTAL[kind], x)
        return np.asarray(apply_lowp(FLOAT_UNARY[kind], x))
    fn = INT_UNARY.get(kind) if dt.is_int else None
    if fn is None:
        ctx.error(f"{kind.value} is not defined on {dt} operands")
    with np.errstate(all="ignore"):
        r = np.asarray(fn(x))
    return r.astype(x.dtype, copy=False)
