"""The ULP budget table: how far a backend's result may lie from the reference, per op and dtype.

ARCHITECTURE.md ("Numeric contracts"): transcendentals and the normalizations built on them are
judged against a high-precision reference "with a per-op, per-dtype ULP budget kept as data
(OpenCL-CTS style), never as a blanket rtol". This module is that data: ``BUDGETS`` maps
``(op_key, DType)`` to a budget in ulps; ``budget`` reads it (a missing entry is an error, never
a default); ``format_table`` prints it; ``VERSION`` changes whenever an entry changes. The
evaluator attaches ``OpContract(kind="ulp", ulp=budget(key, dtype))`` to every Call of these ops.

What a budget means
-------------------
The reference is the exact result rounded once to the dtype (the evaluator computes it in
float64 from the exactly widened inputs and rounds once; docs/decisions.md D91, D95). A result
``r`` meets a budget ``B`` when its **ulp distance** to the reference is at most ``B``: the number
of steps between the two on the dtype's ordered value line (``ulp_distance``; both zeros are the
same point, an infinity is one step beyond the largest finite value). NaN must appear exactly
where the reference is NaN, with one exception: an f8e8m0 result may also be NaN where the
reference is f8e8m0's least value 2^-127 (lemma B′ below). This is OpenCL's unit (the ulp of the
correctly rounded result).

The budgets are derived, not tuned: each is the error bound of a stated *model implementation*
— what a careful backend does — built from primitives of known accuracy. Nothing here was
chosen by comparing with a peer; tests/semantics/test_ulp.py recomputes every entry from the
derivation below.

Primitives (OpenCL C 1.2 / 3.0 full profile, single precision, Table "ULP values for built-in
math functions"): ``exp exp2 log log2`` ≤ 3 ulp, ``rsqrt`` ≤ 2 ulp, ``tanh`` ≤ 5 ulp, ``erfc`` ≤
16 ulp. Basic operations (+ − × ÷, fma) are IEEE-754 correctly rounded (0.5 ulp; CUDA's default
division, x86, Arm). u = 2^-24 is the f32 unit roundoff.

Two lemmas turn errors into budgets:

* **(A) ulp vs relative error, f32.** An error of k ulp is a relative error ≤ 2k·u; a relative
  error ≤ c·u is < c ulp (|y| / ulp(y) < 2^24 for normal y). For a subnormal result an absolute
  error δ·|y| < δ·2^-126 is < δ/(2u) ulp, so the normal-range bound also covers subnormal
  results as long as no *intermediate* underflows; the model formulations keep intermediates
  normal (they split ``exp(z)`` as ``exp(z/2)²`` where a product with a tiny exponential would
  otherwise lose precision).
* **(B) narrow formats.** Let the dtype have p significand bits (f16 11, bf16 8, fp8e4m3 4,
  fp8e5m2 3, f8e8m0 1). An implementation that widens to f32, computes with an f32 error of
  E ulp32 and rounds once to the dtype returns a value within **1 ulp** of the correctly rounded
  result whenever E < 2^(23−p) (its f32 value is within half a dtype ulp of the exact one, so
  its rounding is one of the two dtype neighbours of the exact value): E < 4096 for f16, 32768
  for bf16, 2^19 and 2^20 for the fp8 formats. Every f32 bound below is < 4096, so every narrow
  budget is 1. One ulp is also the least a "compute in f32, round once" implementation can
  promise: the double rounding f32 → dtype alone can cost it (e.g. exp in bf16).
* **(B′) f8e8m0 has no zero** (docs/decisions.md D292). Lemma B assumes the model's f32 value
  lies near the exact one in f32's normal range. Below it the model's value is subnormal with an
  absolute error of a few 2^-149, or 0: softmax's exp(d_i) underflows to 0 for d_i < −103.98
  (a 4-element f8e8m0 row of 1.0 and 256 gives exp(−255) = 0 and y_i = 0), and even a correctly
  rounded f32 result is 0 below 2^-150. A format with a zero rounds that 0 to within one ulp of
  its correctly rounded result (the exact value is below half its least subnormal, 2^-134 for
  bf16, the smallest of them). f8e8m0 cannot: its cast of 0 is NaN, while the reference rounds
  every exact result below 1.5·2^-127 to its least value 2^-127. Above 2^-126 no intermediate
  of a model underflows (lemma A's premise), so its f32 value is never 0 there. Hence the
  f8e8m0 column reads **1 ulp, or NaN where the reference is 2^-127** (``nan_admitted``): the
  model's outcome, admitted only where it can occur (the element's exact value is then below
  1.5·2^-127); a NaN anywhere else, and any other value more than 1 ulp away, is rejected.

f32 budgets (first-order error analysis of the model implementation; ``n`` is the normalized
axis length, the model's sums are balanced trees of depth L = ⌈log2 n⌉, and the table entries
assume n ≤ 2^16, L ≤ 16):

* ``exp exp2 log log2``: 3; ``rsqrt``: 2; ``tanh``: 5 — the OpenCL figures themselves.
* ``sigmoid``: 8. Model: ``1 / (1 + exp(−x))``; for x < −88, ``exp(x)`` (there σ(x) = e^x·(1 −
  e^x + …), a relative difference < 2^-126). x ≥ 0: exp(−x) ≤ 1 carries 6u, the sum
  1 + e weighs it by e/(1+e) ≤ 1/2 → 3u + u, the reciprocal + u: 5u. −88 ≤ x < 0: the sum weighs
  6u by ≤ 1 → 7u, reciprocal 8u. x < −88: 6u. Max 8u → 8 ulp.
* ``silu``: 14. Model: ``x / (1 + exp(−x))`` (one division: 5u for x ≥ 0, 8u below), and for
  x < −88 (exp(−x) would overflow) ``(x·e)·e`` with ``e = exp(x/2)``: 6u + u + 6u + u = 14u.
* ``gelu_tanh``: 463. gelu_tanh(x) = 0.5·x·(1 + tanh(k0·(x + k1·x³))) = x·σ(z) with
  z = x·(c0 + c1·x²), c0 = 2·√(2/π), c1 = c0·0.044715 (the 1 + tanh form cancels
  catastrophically for x < 0 and is not a conforming model). z carries 5u (x², two f32
  constants, c1·x², the positive sum, ·x). σ amplifies a relative argument error by its
  condition number |z|·(1 − σ(z)) (≤ 0.28 for z ≥ 0, → |z| for z → −∞), plus its own 8u (14u
  with the exp(z/2)² split below z = −88), plus u for ·x: 5u·|z| + 14u. The largest |z| with a
  normal result is z* = −89.649 (x* = −10.1006, where |x|·σ(z) = 2^-126): 5·89.649 + 14 =
  462.2 → 463 ulp (subnormal results: ≤ 274 by lemma A).
* ``gelu_none``: 381. Model: ``0.5·x·erfc(−x·(1/√2))`` (1 + erf cancels for x < 0): the argument
  carries 2u (constant, product), erfc's condition number κ(t) = 2|t|·e^(−t²) / (√π·erfc(t))
  (≤ 0.30 for t ≤ 0, ≈ 2t² + 1 for t → ∞) amplifies it, erfc adds 16 ulp = 32u, ·x adds u:
  2u·κ + 33u. At the smallest normal result (x* = −13.146, t* = 9.2958, κ* = 173.81):
  380.6 → 381 ulp.
* ``softmax``: 139. Model: m = max (exact), d_i = x_i − m (u, amplified by |d_i| in the
  exponent), e_i = exp(d_i) (6u), S = Σe (tree: L·u, plus the weighted mean of the e-errors,
  ≤ 6u + u·ln n because the row holds e = 1 at d = 0), y_i = e_i / S (u). A normal y_i needs
  |d_i| ≤ 126·ln 2 + ln n. Total (|d_i| + 6) + (6 + ln n + L) + 1 with n = 2^16: 87.34 + 11.09 +
  6 + 6 + 11.09 + 16 + 1 = 138.5 → 139 ulp.
* ``rmsnorm``: 16. Model: s = Σx² (tree: (L+1)u), /n (u), + eps (u, both positive), rsqrt
  (halves the argument's error, adds 2 ulp = 4u), ·x, ·w (2u): (L+3)/2 + 4 + 2 = 15.5 → 16 ulp.
  No cancellation anywhere; the model scales the row by a power of two so x² cannot overflow.
* ``layernorm``: 52, for **well-conditioned elements**. Model (two pass): μ = Σx/n ((L+1)u of
  A = Σ|x|/n absolute), d_i = x_i − μ (u + (L+1)u·A/|d_i|), v = Σd²/n ((L+2)u + 2u +
  2(L+1)u·A/rms(d)), + eps (u), rsqrt (half of that + 4u), z = d·r (u), y = fma(z, w, b) (u).
  With the three condition numbers κ_c = A/|d_i|, ρ = A/rms(d) and κ_b = |z·w|/|y| at most 1
  the total is (L + 8 + (3L + 7)/2)u = 51.5u → 52 ulp. **Conditioning:** an element whose
  deviation from the mean is small against the row's magnitudes (κ_c > 1), a row whose mean
  dwarfs its spread (ρ > 1), or an output where z·w and b cancel (κ_b > 1) has an intrinsic f32
  error that grows with those factors in every practical implementation (torch included; the
  reference, computed with a compensated mean in float64, does not). The contract's ``detail``
  says so; an oracle judging such elements must widen the budget by the factors (first order:
  κ_b·((L+1)·(κ_c + ρ) + (L+5)/2 + 6) + 1 ulp, i.e. κ_b·(17·(κ_c + ρ) + 16.5) + 1 for L = 16,
  which is the 51.5 above at κ_c = ρ = κ_b = 1).
* ``rope``: 2. y = q·cos + rotate_half(q)·sin is a 2×2 dot product. Kahan's fma algorithm
  (w = s·b; e = fma(s, b, −w); f = fma(q, c, w); y = f + e) has relative error ≤ 2u for every
  input (Jeannerod, Louvet & Muller, Math. Comp. 82 (2013)); the plain ``fma(q, c, s·b)`` or
  ``q·c + s·b`` meets the same 2u when the two products do not cancel (same sign). For the narrow
  formats the products of two values of ≤ 11 significand bits are exact in f32 and the f32 sum
  is correctly rounded, so even the plain formula is within 1 ulp (lemma B) for every input.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.dtypes import to_bits
from tilefoundry.semantics.formats import FORMATS, DType, dtype_of

__all__ = ["BUDGETS", "DTYPES", "OPS", "VERSION", "budget", "format_table", "nan_admitted",
           "ulp_distance"]

VERSION = "1.1"

#: The float dtypes the table covers (f4e2m1 is type-level only; f8e8m0 follows lemma B).
DTYPES: tuple[DType, ...] = (DType.F32, DType.F16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2,
                             DType.F8E8M0)

#: f32 budgets (ulp), derived in the module docstring; every narrower dtype gets 1 (lemma B).
_F32_BUDGETS: dict[str, float] = {
    "exp": 3.0, "log": 3.0, "exp2": 3.0, "log2": 3.0, "rsqrt": 2.0, "tanh": 5.0,
    "sigmoid": 8.0, "silu": 14.0, "gelu_tanh": 463.0, "gelu_none": 381.0,
    "softmax": 139.0, "rmsnorm": 16.0, "layernorm": 52.0, "rope": 2.0,
}

#: Op keys in table order.
OPS: tuple[str, ...] = tuple(_F32_BUDGETS)

BUDGETS: Mapping[tuple[str, DType], float] = MappingProxyType({
    (op, dt): (b if dt is DType.F32 else 1.0)
    for op, b in _F32_BUDGETS.items() for dt in DTYPES
})


def budget(op_key: str, dtype: DType | str) -> float:
    """The budget (ulps of ``dtype``) for ``op_key`` results of ``dtype``; raises
    ``InvalidArgumentError`` naming both when the table has no entry."""
    try:
        dt = DType.parse(dtype)
    except InvalidArgumentError:
        dt = None
    got = BUDGETS.get((op_key, dt)) if dt is not None else None
    if got is None:
        raise InvalidArgumentError(
            f"ulp budget: no entry for op {op_key!r} and dtype {dtype!s} in the ULP table "
            f"(version {VERSION}); ops: {', '.join(OPS)}; dtypes: "
            f"{', '.join(str(d) for d in DTYPES)}")
    return got


def nan_admitted(reference: np.ndarray) -> np.ndarray:
    """Per element of a ULP-contract op's reference result: is a NaN also admitted there
    (lemma B′)? True exactly where the dtype is f8e8m0 and the reference is its least value
    2^-127: a model's f32 value may underflow to 0 there, whose f8e8m0 cast is NaN."""
    r = np.asarray(reference)
    if dtype_of(r) is not DType.F8E8M0:
        return np.zeros(r.shape, bool)
    return to_bits(r) == 0


def format_table() -> str:
    """The table as fixed-width text: one row per op, one column per dtype."""
    head = f"ULP budgets (version {VERSION}; ulps of the result dtype vs the correctly rounded " \
           f"reference)"
    cols = [str(d) for d in DTYPES]
    w0 = max(len(o) for o in OPS) + 2
    lines = [head, "op".ljust(w0) + "".join(c.rjust(9) for c in cols)]
    for op in OPS:
        cells = "".join(f"{BUDGETS[(op, d)]:9g}" for d in DTYPES)
        lines.append(op.ljust(w0) + cells)
    return "\n".join(lines)


def _ordinal(x: np.ndarray, dt: DType) -> np.ndarray:
    """Bit patterns mapped to a monotone integer line (both zeros map to 0)."""
    info = FORMATS[dt]
    bits = to_bits(x).astype(np.int64)
    if not info.has_sign:
        return bits
    top = np.int64(1) << (info.bits - 1)
    mag = bits & (top - 1)
    return np.where(bits & top, -mag, mag)


def ulp_distance(result: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Elementwise ulp distance (float64) between two arrays of one float dtype.

    Steps on the dtype's ordered value line (both zeros are one point; an infinity is the step
    after the largest finite value). Both NaN: 0; exactly one NaN: +inf."""
    r, ref = np.asarray(result), np.asarray(reference)
    dt = dtype_of(r)
    if dtype_of(ref) is not dt or not dt.is_float:
        raise InvalidArgumentError(f"ulp_distance: both arrays must share one float dtype, got "
                                   f"{dt} and {dtype_of(ref)}")
    if r.shape != ref.shape:
        raise InvalidArgumentError(f"ulp_distance: shapes differ: {r.shape} vs {ref.shape}")
    rn = np.isnan(r.astype(np.float32))
    fn = np.isnan(ref.astype(np.float32))
    d = np.abs(_ordinal(r, dt) - _ordinal(ref, dt)).astype(np.float64)
    d = np.where(rn | fn, np.inf, d)
    return np.where(rn & fn, 0.0, d)
