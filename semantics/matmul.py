"""Matrix multiply (``mma`` / MatMul) reference and its admitted set.

Tile design, "MMA is a portable value primitive": inputs are converted to the f32 accumulator;
``allow_reassociation=True`` (default) admits any summation order (bound-checked), ``False`` keeps
the reference K order — "not a promise to disable target FMA fusion", so the K-order fma chain is
admitted too. Decisions: docs/decisions.md (reductions and matmul).
"""

from __future__ import annotations

import numpy as np

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.dtypes import dtype_of
from tilefoundry.semantics.formats import DType, require_evaluable
from tilefoundry.semantics.reductions import (
    _F32,
    _F64,
    ETA_F32,
    Admission,
    _bound_admits,
    _cast,
    _float_target,
    _operand,
    _same,
    _same_f32,
    round_to,
    widen,
)

__all__ = ["matmul", "matmul_admits", "mma", "mma_admits"]


def _mm_operands(a: np.ndarray, b: np.ndarray, what: str):
    a, da = _operand(a, what)
    b, db = _operand(b, what)
    if a.ndim < 2 or b.ndim < 2:
        raise InvalidArgumentError(
            f"{what}: operands are [..., M, K] and [..., K, N]; got ranks {a.ndim} and {b.ndim}")
    if a.shape[-1] != b.shape[-2]:
        raise InvalidArgumentError(
            f"{what}: contraction lengths differ: a has K = {a.shape[-1]}, b has K = "
            f"{b.shape[-2]}")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise InvalidArgumentError(
            f"{what}: batch shapes {a.shape[:-2]} and {b.shape[:-2]} do not broadcast") from None
    if DType.BOOL in (da, db) or da.is_float != db.is_float:
        raise InvalidArgumentError(
            f"{what}: operands must both be float or both be integer (got {da} and {db}); "
            f"Cast one of them first")
    return a, da, b, db, (*batch, a.shape[-2], b.shape[-1])


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Correctly rounded f32 fma(a, b, c), vectorized.

    a·b of f32 values is exact in f64 (48-bit significand, exponents within range). TwoSum gives
    p + c = s + e exactly. RN32(s) equals RN32(s + e) unless s is exactly a midpoint between
    two adjacent f32 values (|e| is under half an f64 step of s, and midpoints are f64 values
    distinct from s otherwise); at a midpoint with e != 0 the exact value lies on e's side, so
    the neighbour on that side is the answer. This avoids the double rounding of f64 -> f32.
    """
    p = a.astype(_F64) * b.astype(_F64)
    c64 = np.asarray(c, _F64)
    s = p + c64
    bb = s - p
    e = (p - (s - bb)) + (c64 - bb)
    r = s.astype(_F32)
    r2 = np.nextafter(r, np.where(s > r.astype(_F64), _F32(np.inf), _F32(-np.inf)))

    def ext(t: np.ndarray) -> np.ndarray:  # the f32 overflow point 2^128 stands in for inf
        return np.where(np.isinf(t), np.copysign(2.0 ** 128, t), t.astype(_F64))

    r64, r264 = ext(r), ext(r2)
    mid = (r64 != s) & ((r64 + r264) * 0.5 == s)
    to_r2 = mid & (((e > 0) & (r264 > r64)) | ((e < 0) & (r264 < r64)))
    res = np.where(to_r2, r2, r)
    return np.where(np.isfinite(s) & np.isfinite(e), res, s.astype(_F32))


def _mm_f32(a32: np.ndarray, b32: np.ndarray, shape: tuple, fused: bool) -> np.ndarray:
    k_len = a32.shape[-1]
    if k_len == 0:
        return np.zeros(shape, _F32)
    with np.errstate(all="ignore"):
        # matmul(a, b) is mma(a, b, zeros(result_shape)) (Tile design): the fold starts from
        # +0, so every product being -0 gives +0 (D200)
        a0, b0 = a32[..., :, 0, None], b32[..., None, 0, :]
        zero = np.zeros(np.broadcast_shapes(a0.shape, b0.shape), _F32)
        acc = fma_f32(a0, b0, zero) if fused else zero + a0 * b0
        for k in range(1, k_len):
            ak, bk = a32[..., :, k, None], b32[..., None, k, :]
            acc = fma_f32(ak, bk, acc) if fused else acc + ak * bk
    return np.broadcast_to(acc, shape)


def _out_dtype(out_dtype: DType | str | None, da: DType, what: str) -> DType:
    out = da if out_dtype is None else DType.parse(out_dtype)
    require_evaluable(out, what)
    if (da.is_float and (not out.is_float or out is DType.F8E8M0)) or (da.is_int and
                                                                       not out.is_int):
        allowed = "f32, f16, bf16, fp8e4m3, fp8e5m2" if da.is_float else "i8, u8, i32, i64"
        raise InvalidArgumentError(f"{what}: out_dtype {out} for {da} operands; allowed: "
                                   f"{allowed}")
    return out


def matmul(a: np.ndarray, b: np.ndarray, *, allow_reassociation: bool = True,
           out_dtype: DType | str | None = None) -> np.ndarray:
    """Reference [..., M, K] @ [..., K, N] with broadcast batch dims.

    Floats: operands widen exactly to f32; the K-order fold acc = fl(fl(fl(+0 + a0·b0) + a1·b1)
    ...) (unfused, seeded by +0: ``matmul(a, b)`` is ``mma(a, b, zeros)``, D200) rounds once to
    ``out_dtype`` (default a's dtype); K = 0 gives +0. Integers accumulate in i64 and wrap into ``out_dtype``. The reference is the
    same for both values of ``allow_reassociation``; it only widens the admitted set.
    """
    a, da, b, db, shape = _mm_operands(a, b, "matmul")
    out = _out_dtype(out_dtype, da, "matmul")
    if da.is_int:
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
        acc = np.zeros(shape, np.int64)
        for k in range(a.shape[-1]):
            acc = acc + a64[..., :, k, None] * b64[..., None, k, :]
        return _cast(acc, out)
    return round_to(_mm_f32(widen(a, da), widen(b, db), shape, False), out)


def matmul_admits(result: np.ndarray, a: np.ndarray, b: np.ndarray, *,
                  allow_reassociation: bool = True) -> Admission:
    """Whether ``result`` (in its own dtype) is an admitted matmul result.

    False: bit-exact with the K-order unfused reference or the K-order fma chain (the Tile
    design keeps "the reference K order, not a promise to disable target FMA fusion"). True:
    additionally anything within γ(K)·Σ|a_k·b_k| (+2K·2^-150 for underflowing products) of the
    exact dot product, through the monotone rounding criterion of ``_bound_admits``.
    """
    a, da, b, db, shape = _mm_operands(a, b, "matmul_admits")
    r = np.asarray(result)
    if r.shape != shape:
        raise InvalidArgumentError(f"matmul_admits: result has shape {r.shape}, expected {shape}")
    if da.is_int:
        ok = _same(r, matmul(a, b, out_dtype=dtype_of(r)), dtype_of(r), "matmul_admits")
        return Admission(ok, np.full(shape, "exact"), "integer matmul: exact")
    target = _float_target(r, "matmul_admits")
    a32, b32, rw = widen(a, da), widen(b, db), widen(r, target)
    refs = [widen(round_to(_mm_f32(a32, b32, shape, f), target), target) for f in (False, True)]
    ok = _same_f32(rw, refs[0]) | _same_f32(rw, refs[1])
    k_len = a.shape[-1]
    method, how = "exact", "K-order reference, unfused or fma"
    if allow_reassociation and k_len > 0:
        with np.errstate(all="ignore"):  # inf · 0 is a NaN leaf
            prods = a32.astype(_F64)[..., :, :, None] * b32.astype(_F64)[..., None, :, :]
        prods = np.broadcast_to(np.moveaxis(prods, -2, -1), (*shape, k_len))
        ok = ok | _bound_admits(prods, k_len, rw, target, eta=ETA_F32, strict_zero=False)
        method, how = "bound", f"bound γ({k_len})·Σ|a·b| or the K-order references"
    return Admission(ok, np.full(shape, method),
                     f"matmul {da}x{db} -> {target}: {how}; {int(ok.sum())}/{ok.size} admitted")


# ---------------------------------------------------------------------------------------------
# mma(a, b, acc): the accumulator as an operand (tile family)
# ---------------------------------------------------------------------------------------------
def _mma_operands(a: np.ndarray, b: np.ndarray, acc: np.ndarray, what: str):
    a, da, b, db, shape = _mm_operands(a, b, what)
    c, dc = _operand(acc, what)
    if not da.is_float or da is DType.F8E8M0:
        raise InvalidArgumentError(f"{what}: inputs must be f32, f16, bf16, fp8e4m3 or fp8e5m2, "
                                   f"got {da}; use matmul for integers")
    if da is not db:
        raise InvalidArgumentError(f"{what}: a is {da} but b is {db}; Cast one of them")
    if dc not in MMA_ACC_DTYPES:
        raise InvalidArgumentError(f"{what}: acc must be f32, f16 or bf16 (D225, D389), got {dc}")
    if c.shape != shape or a.shape[:-2] != c.shape[:-2] or b.shape[:-2] != c.shape[:-2]:
        raise InvalidArgumentError(
            f"{what}: a {a.shape}, b {b.shape} and acc {c.shape} are not [*B, M, K], "
            f"[*B, K, N], [*B, M, N] with one batch shape")
    return widen(a, da), widen(b, db), widen(c, dc), shape


#: accumulator dtypes: f32, and f16 / bf16 accumulated in f32 and rounded once (D389; the type
#: rule allows them only with allow_reassociation)
MMA_ACC_DTYPES = (DType.F32, DType.F16, DType.BF16)


def _mma_f32(a32: np.ndarray, b32: np.ndarray, c32: np.ndarray, fused: bool) -> np.ndarray:
    """The K-order fold seeded by the accumulator: acc = fl(fl(c + a0·b0) + a1·b1) ... (or the
    fma chain when ``fused``); K = 0 returns acc unchanged."""
    acc = np.array(c32, _F32, copy=True)
    with np.errstate(all="ignore"):
        for k in range(a32.shape[-1]):
            ak, bk = a32[..., :, k, None], b32[..., None, k, :]
            acc = fma_f32(ak, bk, acc) if fused else acc + ak * bk
    return acc


def mma(a: np.ndarray, b: np.ndarray, acc: np.ndarray, *,
        allow_reassociation: bool = True) -> np.ndarray:
    """Reference ``mma(a, b, acc)``: inputs widen exactly to the f32 accumulator (the Tile
    design: "Inputs are converted to the accumulator type by the reference realization"), then
    the unfused K-order fold starting from ``acc``. The reference is the same for both values of
    ``allow_reassociation``; it only widens the admitted set. ``matmul(a, b)`` (f32 operands) is
    ``mma(a, b, zeros)`` bit for bit: the same fold from +0."""
    a32, b32, c32, _ = _mma_operands(a, b, acc, "mma")
    return round_to(_mma_f32(a32, b32, c32, False), dtype_of(np.asarray(acc)))


def mma_admits(result: np.ndarray, a: np.ndarray, b: np.ndarray, acc: np.ndarray, *,
               allow_reassociation: bool = True) -> Admission:
    """Whether the f32 ``result`` is an admitted ``mma(a, b, acc)``.

    False: bit-exact with the K-order reference seeded by acc, unfused or as an fma chain. True:
    additionally anything within γ(K+1)·(Σ|a_k·b_k| + |acc|) (+2(K+1)·2^-150) of the exact
    ``acc + Σ a_k·b_k`` (any order over the K + 1 leaves). Inputs rounded to a narrower format
    first (TF32, bf16) are outside the bound for generic operands: precision is never reduced.
    """
    a32, b32, c32, shape = _mma_operands(a, b, acc, "mma_admits")
    r = np.asarray(result)
    dc = dtype_of(np.asarray(acc))  # the result's dtype: f32, or f16 / bf16 rounded once
    if r.shape != shape or dtype_of(r) is not dc:
        raise InvalidArgumentError(f"mma_admits: the result must be {dc} of shape {shape}, got "
                                   f"{dtype_of(r)} {r.shape}")
    rw = widen(r, dc)
    refs = [widen(round_to(_mma_f32(a32, b32, c32, f), dc), dc) for f in (False, True)]
    ok = _same_f32(rw, refs[0]) | _same_f32(rw, refs[1])
    k_len = a32.shape[-1]
    method, how = "exact", "K-order reference from acc, unfused or fma"
    if allow_reassociation and k_len > 0:
        with np.errstate(all="ignore"):  # inf · 0 is a NaN leaf; a signaling NaN acc widens
            prods = a32.astype(_F64)[..., :, :, None] * b32.astype(_F64)[..., None, :, :]
            prods = np.moveaxis(prods, -2, -1)
            leaves = np.concatenate([prods, c32.astype(_F64)[..., None]], -1)
        ok = ok | _bound_admits(leaves, k_len + 1, rw, dc, eta=ETA_F32, strict_zero=False)
        method, how = "bound", f"bound γ({k_len + 1})·(Σ|a·b| + |acc|) or the K-order references"
    return Admission(ok, np.full(shape, method),
                     f"mma -> {dc}: {how}; {int(ok.sum())}/{ok.size} admitted")
