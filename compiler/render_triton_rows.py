"""The Triton prelude's helpers for the row kernels at the memory limit (issue 35).

``ROWS_PRELUDE`` is appended to ``render_triton.PRELUDE``: the integer keys of the f32 max / min
reductions (D341) and the GPU-only narrow exp / sigmoid / silu on ``ex2.approx.ftz`` and
``rcp.approx.ftz`` (D343; inline PTX, which Triton's interpreter cannot run: the renderer
calls them only in the module it renders for the GPU).
"""

from __future__ import annotations

__all__ = ["ROWS_PRELUDE"]

ROWS_PRELUDE = r'''
@triton.jit
def _tf_key32(x, MIN: tl.constexpr):
    """f32 -> an i32 whose signed order is the float order with -0 < +0; a NaN is the key
    that wins (the largest for max, the smallest for MIN): reductions of max / min run on it"""
    b = x.to(tl.int32, bitcast=True)
    k = b ^ ((b >> 31) & 0x7FFFFFFF)
    return tl.where(x != x, -0x7FFFFFFF - 1 if MIN else 0x7FFFFFFF, k)


@triton.jit
def _tf_unkey32(k):
    """the inverse of _tf_key32 (a NaN's key gives a NaN)"""
    return (k ^ ((k >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)


@triton.jit
def _tf_ex2_ftz(x):
    """2^x, ex2.approx.ftz.f32 (GPU only: about 2 ulp; subnormal results flush to +0)"""
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=r,r", [x],
                                     dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _tf_rcp_ftz(x):
    """1/x, rcp.approx.ftz.f32 (GPU only: at most 1 ulp for a normal x)"""
    return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [x],
                                     dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _tf_exp_narrow_gpu(w):
    """_tf_exp_narrow on the GPU: h = 2^(w log2(e) / 2) by ex2.approx.ftz (h is normal while
    exp(w) can be a narrow value, so the flush never changes a narrow result; D343)"""
    h = _tf_ex2_ftz(w * 0.7213475204444817)
    return h * h


@triton.jit
def _tf_sigmoid_narrow_gpu(w):
    """_tf_sigmoid_narrow on the GPU: ex2.approx.ftz, and rcp.approx.ftz of 1 + q in [1, 2]"""
    h = _tf_ex2_ftz(tl.abs(w) * -0.7213475204444817)
    q = h * h
    return tl.where(w < 0, q, 1.0) * _tf_rcp_ftz(1.0 + q)


@triton.jit
def _tf_silu_narrow_gpu(w):
    """_tf_silu_narrow on the GPU: ex2.approx.ftz, and rcp.approx.ftz of 1 + q in [1, 2]"""
    h = _tf_ex2_ftz(tl.abs(w) * -0.7213475204444817)
    q = h * h
    y = tl.where(w < 0, (w * h) * h, w) * _tf_rcp_ftz(1.0 + q)
    return tl.where(w == float('-inf'), -0.0, y)


@triton.jit
def _tf_exp_narrow(w):
    """exp(w) for a narrow result: exp(w/2)² (subnormal results are not flushed)"""
    h = tl.exp(w * 0.5)
    return h * h


@triton.jit
def _tf_sigmoid_narrow(w):
    """sigmoid(w) for a narrow result: q = exp(-|w|) as exp(-|w|/2)², 1/(1+q) or q/(1+q)"""
    h = tl.exp(tl.abs(w) * -0.5)
    q = h * h
    return tl.where(w < 0, q, 1.0) / (1.0 + q)


@triton.jit
def _tf_silu_narrow(w):
    """silu(w) for a narrow result: w/(1+q) or ((w h) h)/(1+q), q = h² = exp(-|w|)"""
    h = tl.exp(tl.abs(w) * -0.5)
    q = h * h
    y = tl.where(w < 0, (w * h) * h, w) / (1.0 + q)
    return tl.where(w == float('-inf'), -0.0, y)
'''
