"""The ``kernels`` family: the patterns real models run, as HIR programs at model shapes.

A kernel library implementing exactly the fused patterns of a transformer (SwiGLU, RMSNorm,
softmax, ...) reached a handful of catalog cases (issue 33): the catalog had no multi-op kernel
patterns. Each case here is one pattern, written as the HIR program of the convention it quotes
(``Case.spec``), on one dtype, one shape and one class of input rows:

* ``ordinary`` — N(0, 1) values (weights N(0, 1/K), norm weights 1 + N(0, 1/16));
* ``large`` — N(0, 1) scaled by 2^70 (f32, bf16) or 2^10 (f16): squares and sums of squares
  overflow the dtype and f32 where a textbook kernel forms them (the exact result is finite);
* ``tiny`` — scaled by 2^-130 (f32, bf16: subnormals) or 2^-20 (f16): squares underflow;
* ``special`` — the first row holds NaN, ±inf, ±0, the least subnormal and ±max finite among
  ordinary values (every other row ordinary): what each pattern does with them is the HIR's
  per-op semantics, composed.

Ids: ``kernels/<pattern>[/<variant>]/<dtype>/<shape>/<rows>``, the shape as ``AxBxC`` in the
pattern's parameter order. Quick: one small model shape (hidden 1,024, 4 rows) in every dtype
and row class, and a small ragged shape; full: hidden sizes up to 16,384, rows up to 4,096,
vocabularies of 32,000 and 128,256. Every case is judged by the oracle exactly as any other
program: each op's own contract (a GEMM's reassociation set, a transcendental's ULP budget,
an exact rounding), composed by the enclosure — no tolerance of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tilefoundry.semantics.dtypes import FORMATS, DType, cast
from tilefoundry.semantics.ir import Call, Constant, Function, Module, Tuple, Var
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Cast,
    Concat,
    Gather,
    Gelu,
    LayerNorm,
    MatMul,
    Reduce,
    ReduceKind,
    ReLU,
    Reshape,
    RMSNorm,
    RoPE,
    Select,
    Silu,
    Slice,
    SoftMax,
    Transpose,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.types import TensorType

__all__ = ["ROW_CLASSES", "kernel_cases"]

F32, BF16, F16, I32, BOOL = DType.F32, DType.BF16, DType.F16, DType.I32, DType.BOOL
E4M3, E5M2, E8M0 = DType.FP8E4M3, DType.FP8E5M2, DType.F8E8M0
FLOATS = (F32, BF16, F16)
ROW_CLASSES = ("ordinary", "large", "tiny", "special")
ENTRY = "f"
_LARGE = {F32: 2.0 ** 70, BF16: 2.0 ** 70, F16: 2.0 ** 10}
_TINY = {F32: 2.0 ** -130, BF16: 2.0 ** -130, F16: 2.0 ** -20}
Built = tuple[Module, str, list]

# ---- the conventions each case quotes ------------------------------------------------------
_HIR = (" HIR: every op rounds to its dtype (docs/contracts.md: widen, operate, round once; "
        "a GEMM's K order is free with allow_reassociation, a transcendental within its ULP "
        "budget).")
S = {
    "swiglu/matmul": "Shazeer 2020, \"GLU Variants Improve Transformer\", eq. (6): "
    "FFN_SwiGLU(x, W, V, W2) = (Swish_1(xW) ⊗ xV) W2; here the gated product "
    "silu(x @ Wg) * (x @ Wu), as LLaMA's MLP writes it (down_proj(act_fn(gate_proj(x)) * "
    "up_proj(x))).",
    "swiglu/gate-up": "vLLM silu_and_mul / FlashInfer: out = silu(gate) * up on the given gate "
    "and up halves of the fused gate_up projection.",
    "geglu/matmul": "Shazeer 2020, eq. (5): GEGLU(x, W, V) = GELU(xW) ⊗ xV (Gemma: GELU with "
    "the tanh approximation, gelu_pytorch_tanh); the variant names Gelu.approximate.",
    "geglu/gate-up": "vLLM gelu_and_mul / gelu_tanh_and_mul: out = gelu(gate) * up on the "
    "given halves; the variant names Gelu.approximate ('none': the erf form).",
    "add-rmsnorm": "vLLM fused_add_rms_norm / HF LlamaDecoderLayer: residual = x + residual "
    "(stored in the model dtype), out = RMSNorm(residual) = residual / sqrt(mean(residual^2) "
    "+ eps) * w, eps = 1e-6; both outputs (out, residual).",
    "layernorm": "torch.nn.functional.layer_norm over the last axis with weight and bias, eps "
    "= 1e-5: (x - mean) / sqrt(var + eps) * w + b, var the biased (population) variance.",
    "softmax/scale": "Vaswani et al. 2017, eq. (1): softmax(Q K^T / sqrt(d_k)) (torch SDPA's "
    "default scale): softmax(scores * scale), scale = 1/sqrt(128) rounded to the dtype (a "
    "scalar constant of the dtype).",
    "softmax/causal": "softmax(select(mask, scores * scale, -inf)) with the causal mask "
    "aligned to the bottom-right corner (FlashAttention >= 2.1, torch SDPA is_causal with a "
    "KV cache): query row i of R sees keys j <= i + (C - R).",
    "softmax/padding": "torch SDPA with a boolean attn_mask (True: take part): "
    "softmax(select(mask, scores * scale, -inf)); a row whose keys are all padding is NaN "
    "(every exp is exp(-inf - (-inf))), as SDPA returns it.",
    "softmax/causal-bias": "HF eager attention: scores * scale + causal_mask, the mask 0 or "
    "torch.finfo(dtype).min (an additive bias, not -inf), then softmax.",
    "softmax/f32": "HF / FlashAttention accumulation: scores upcast to f32 (softmax(..., "
    "dtype=torch.float32)), scaled and causally masked in f32, softmax in f32, one cast back "
    "to the dtype.",
    "rope/op": "HF apply_rotary_pos_emb (rotate-half, GPT-NeoX style) through the HIR RoPE "
    "op on q [H, S, D] and k [Hkv, S, D] (GQA), cos / sin caches [P, D] = cos / sin(cat(freqs, "
    "freqs)), freqs = pos * 10000^(-2i/D), gathered by position ids; one rounding per output "
    "element.",
    "rope/rotate-half": "HF apply_rotary_pos_emb written out: q * cos + rotate_half(q) * sin "
    "with rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]), cos / sin already gathered by "
    "position [S, D]; each op rounds (mul, neg, mul, add), on q and k.",
    "attention": "Vaswani et al. 2017, eq. (1) / torch SDPA (is_causal, a KV cache): "
    "scaled dot-product attention, one block: softmax(select(causal, (q @ k^T) * "
    "1/sqrt(D), -inf)) @ v on q [H, S, D], k, v [H, T, D], the causal mask bottom-right "
    "aligned (query i sees keys j <= i + T - S).",
    "cross-entropy/f32": "torch.nn.functional.cross_entropy(logits.float(), target, "
    "reduction='none') through log-sum-exp: loss = (m + log(sum(exp(x - m)))) - x[target], "
    "m = max(x), the logits cast to f32 first (HF's causal-LM loss).",
    "cross-entropy/native": "torch.nn.functional.cross_entropy(logits, target, "
    "reduction='none') on logits kept in their own dtype (no upcast), through the same "
    "log-sum-exp: loss = (m + log(sum(exp(x - m)))) - x[target], each op rounding to it.",
    "gemm": "cuBLASLt epilogue CUBLASLT_EPILOGUE_{RELU,GELU}_BIAS as the unfused HIR program: "
    "act(x @ W + b), bias [N] broadcast over rows; the GEMM in the dtype, the add and the "
    "activation each rounding to it. The variant names the activation.",
    "gemm/f32-epilogue": "cuBLASLt with an f32 compute type: x and W widened to f32, the GEMM, "
    "the bias add and the activation (silu) in f32, one rounding to the output dtype.",
    "mx-quant": "OCP Microscaling Formats (MX) v1.0, §5-6: blocks of 32 along the last axis, "
    "one E8M0 scale X per block, elements P_i = quantize(V_i / X) saturating to the element "
    "format's max normal; X = 2^(floor(log2(amax)) - emax_elem) for the 'down' variant (the "
    "spec's; amax = 0 read as f32's least normal, as the microxcaling reference does): "
    "cast<f8e8m0, rounding>(max(amax, 2^-126) * 2^-emax_elem); 'up': cast<f8e8m0, up>(amax / "
    "max_elem) (no element saturates: the NVIDIA MXFP8 recipe); 'nearest' the same with "
    "round to nearest. Outputs (P [R, K], X [R, K/32]).",
    "mx-dequant": "OCP MX v1.0 §6: V_i = X * P_i — P widened to f32 times the block's E8M0 "
    "scale widened to f32 (exact unless it leaves f32's range), output f32.",
    "mx-roundtrip": "OCP MX quantize ('down' scales, E4M3 elements) then dequantize, in one "
    "program: what an fp8 GEMM's operand holds, back in f32.",
}


# =============================================================================================
# values
# =============================================================================================
def _rng(case_id: str, what: str) -> np.random.Generator:
    from tilefoundry.conformance.catalog.build import case_rng as catalog_rng

    return catalog_rng(f"{case_id}#{what}")


def _data(case_id: str, what: str, shape: tuple, dt: DType, rows: str,
          scale: float = 1.0) -> np.ndarray:
    """A data operand of the row class ``rows`` (the module docstring)."""
    g = _rng(case_id, what)
    v = g.standard_normal(shape) * scale
    if rows == "large":
        v *= _LARGE[dt]
    elif rows == "tiny":
        v *= _TINY[dt]
    elif rows == "special" and v.size:
        info = FORMATS[dt]
        big = float(info.max_finite)
        sp = [math.nan, math.inf, -math.inf, 0.0, -0.0, float(info.min_subnormal), big, -big]
        first = v.reshape(-1, shape[-1])[0] if len(shape) else v.reshape(1)
        for i in range(0, first.size, 3):  # every third element of the first row
            first[i] = sp[(i // 3) % len(sp)]
    with np.errstate(over="ignore"):
        return np.array(cast(v.astype(np.float32), dt), order="C")


def _weights(case_id: str, what: str, shape: tuple, dt: DType, kind: str) -> np.ndarray:
    g = _rng(case_id, what)
    v = g.standard_normal(shape)
    if kind == "matrix":
        v = v / math.sqrt(shape[0])
    elif kind == "gain":
        v = 1.0 + v / 16.0
    elif kind == "bias":
        v = v / 4.0
    return np.array(cast(v.astype(np.float32), dt), order="C")


def _scalar(v: float, dt: DType) -> Constant:
    return Constant(np.array(cast(np.asarray(v, np.float32), dt), order="C"))


# =============================================================================================
# program helpers
# =============================================================================================
class _P:
    """Parameters with their inputs, and calls."""

    def __init__(self) -> None:
        self.params: list[Var] = []
        self.inputs: list[np.ndarray] = []

    def arg(self, name: str, value: np.ndarray, dt: DType) -> Var:
        v = Var(name, TensorType(tuple(value.shape), dt))
        self.params.append(v)
        self.inputs.append(value)
        return v

    def done(self, body: Any) -> Built:
        return Module((Function(ENTRY, tuple(self.params), body, None),)), ENTRY, self.inputs


def _c(op: Any, *args: Any) -> Call:
    return Call(op, tuple(args))


def _mul(a: Any, b: Any) -> Call:
    return _c(Binary(BinaryKind.MUL), a, b)


def _add(a: Any, b: Any) -> Call:
    return _c(Binary(BinaryKind.ADD), a, b)


def _sub(a: Any, b: Any) -> Call:
    return _c(Binary(BinaryKind.SUB), a, b)


def _red(kind: ReduceKind, x: Any, axis: int) -> Call:
    return _c(Reduce((axis,), keepdim=True, kind=kind, policy="unordered_tree"), x)


def _causal(r: int, c: int) -> Constant:
    i = np.arange(r)[:, None]
    j = np.arange(c)[None, :]
    return Constant(np.array(j <= i + (c - r), order="C"))


def _neg_inf(dt: DType) -> Constant:
    return _scalar(-math.inf, dt)


# =============================================================================================
# the patterns: (case id, dtype, shape, rows) -> Built
# =============================================================================================
def swiglu_matmul(cid: str, dt: DType, shape: tuple, rows: str, act: Any = None) -> Built:
    r, h, i = shape
    p = _P()
    x = p.arg("x", _data(cid, "x", (r, h), dt, rows), dt)
    wg = p.arg("w_gate", _weights(cid, "wg", (h, i), dt, "matrix"), dt)
    wu = p.arg("w_up", _weights(cid, "wu", (h, i), dt, "matrix"), dt)
    g = _c(act if act is not None else Silu(), _c(MatMul(), x, wg))
    return p.done(_mul(g, _c(MatMul(), x, wu)))


def gate_up(cid: str, dt: DType, shape: tuple, rows: str, act: Any = None) -> Built:
    p = _P()
    gate = p.arg("gate", _data(cid, "gate", shape, dt, rows), dt)
    up = p.arg("up", _data(cid, "up", shape, dt, "ordinary" if rows == "special" else rows),
               dt)
    return p.done(_mul(_c(act if act is not None else Silu(), gate), up))


def add_rmsnorm(cid: str, dt: DType, shape: tuple, rows: str) -> Built:
    p = _P()
    x = p.arg("x", _data(cid, "x", shape, dt, rows), dt)
    res = p.arg("residual", _data(cid, "res", shape, dt, "ordinary"), dt)
    w = p.arg("weight", _weights(cid, "w", shape[-1:], dt, "gain"), dt)
    h = _add(x, res)
    return p.done(Tuple((_c(RMSNorm(eps=1e-6), h, w), h)))


def layernorm(cid: str, dt: DType, shape: tuple, rows: str) -> Built:
    p = _P()
    x = p.arg("x", _data(cid, "x", shape, dt, rows), dt)
    w = p.arg("weight", _weights(cid, "w", shape[-1:], dt, "gain"), dt)
    b = p.arg("bias", _weights(cid, "b", shape[-1:], dt, "bias"), dt)
    return p.done(_c(LayerNorm(eps=1e-5), x, w, b))


def softmax(cid: str, dt: DType, shape: tuple, rows: str, mask: str) -> Built:
    r, c = shape
    p = _P()
    s = p.arg("scores", _data(cid, "s", shape, dt, rows, scale=4.0), dt)
    if mask == "f32":
        s32 = _c(Cast(F32), s)
        scaled = _mul(s32, _scalar(1 / math.sqrt(128), F32))
        out = _c(SoftMax(axis=-1), _c(Select(), _causal(r, c), scaled, _neg_inf(F32)))
        return p.done(_c(Cast(dt), out))
    scaled = _mul(s, _scalar(1 / math.sqrt(128), dt))
    if mask == "scale":
        x = scaled
    elif mask == "causal":
        x = _c(Select(), _causal(r, c), scaled, _neg_inf(dt))
    elif mask == "causal-bias":
        bias = np.where(_causal(r, c).value, 0.0, -float(FORMATS[dt].max_finite))
        x = _add(scaled, Constant(np.array(cast(bias.astype(np.float32), dt), order="C")))
    else:  # padding: each row keeps a prefix of keys; a special row keeps none
        g = _rng(cid, "mask")
        keep = g.integers(1, c + 1, r)
        if rows == "special":
            keep[0] = 0
        m = p.arg("mask", np.array(np.arange(c)[None, :] < keep[:, None], order="C"), BOOL)
        x = _c(Select(), m, scaled, _neg_inf(dt))
    return p.done(_c(SoftMax(axis=-1), x))


def _rope_inputs(cid: str, dt: DType, s: int, d: int, gathered: bool
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g = _rng(cid, "pos")
    pmax = 4 * s + 64
    pos = np.sort(g.integers(0, pmax, s)).astype(np.int64)
    inv = 1.0 / (10000.0 ** (np.arange(0, d, 2) / d))
    ang = np.outer(np.arange(pmax) if not gathered else pos, inv)
    ang = np.concatenate([ang, ang], axis=-1)
    cos = np.array(cast(np.cos(ang).astype(np.float32), dt), order="C")
    sin = np.array(cast(np.sin(ang).astype(np.float32), dt), order="C")
    return cos, sin, pos


def rope_op(cid: str, dt: DType, shape: tuple, rows: str) -> Built:
    h, s, d = shape
    hk = max(1, h // 4)
    p = _P()
    q = p.arg("q", _data(cid, "q", (h, s, d), dt, rows), dt)
    k = p.arg("k", _data(cid, "k", (hk, s, d), dt, rows), dt)
    cos, sin, pos = _rope_inputs(cid, dt, s, d, gathered=False)
    cv, sv = p.arg("cos_cache", cos, dt), p.arg("sin_cache", sin, dt)
    pv = p.arg("pos_ids", pos, DType.I64)
    return p.done(_c(RoPE(), q, k, cv, sv, pv))


def _rotate_half(x: Any, shape: tuple) -> Call:
    *lead, d = shape
    z = tuple(0 for _ in lead)
    lo = _c(Slice((*z, 0), (*lead, d // 2)), x)
    hi = _c(Slice((*z, d // 2), (*lead, d)), x)
    return _c(Concat(axis=len(lead)), _c(Unary(UnaryKind.NEG), hi), lo)


def rope_rotate_half(cid: str, dt: DType, shape: tuple, rows: str) -> Built:
    h, s, d = shape
    hk = max(1, h // 4)
    p = _P()
    q = p.arg("q", _data(cid, "q", (h, s, d), dt, rows), dt)
    k = p.arg("k", _data(cid, "k", (hk, s, d), dt, rows), dt)
    cos, sin, _ = _rope_inputs(cid, dt, s, d, gathered=True)
    cv, sv = p.arg("cos", cos, dt), p.arg("sin", sin, dt)

    def rot(x: Any, sh: tuple) -> Call:
        return _add(_mul(x, cv), _mul(_rotate_half(x, sh), sv))

    return p.done(Tuple((rot(q, (h, s, d)), rot(k, (hk, s, d)))))


def attention(cid: str, dt: DType, shape: tuple, rows: str) -> Built:
    h, s, t, d = shape
    p = _P()
    # special values go to v (key 0, which every query sees): one in q or k makes a whole
    # score row infinite, whose softmax no enclosure bounds (UNJUDGED for every backend)
    q = p.arg("q", _data(cid, "q", (h, s, d), dt, "ordinary" if rows == "special" else rows),
              dt)
    k = p.arg("k", _data(cid, "k", (h, t, d), dt, "ordinary"), dt)
    v = p.arg("v", _data(cid, "v", (h, t, d), dt, rows if rows == "special" else "ordinary"),
              dt)
    scores = _mul(_c(MatMul(), q, _c(Transpose((0, 2, 1)), k)), _scalar(1 / math.sqrt(d), dt))
    probs = _c(SoftMax(axis=-1), _c(Select(), _causal(s, t), scores, _neg_inf(dt)))
    return p.done(_c(MatMul(), probs, v))


def cross_entropy(cid: str, dt: DType, shape: tuple, rows: str, how: str) -> Built:
    r, vocab = shape
    p = _P()
    x = p.arg("logits", _data(cid, "x", shape, dt, rows, scale=3.0), dt)
    tgt = p.arg("target", np.array(_rng(cid, "t").integers(0, vocab, (r, 1)).astype(np.int32),
                                   order="C"), I32)
    xs = _c(Cast(F32), x) if how == "f32" else x
    m = _red(ReduceKind.MAX, xs, 1)
    lse = _add(_c(Unary(UnaryKind.LOG), _red(ReduceKind.SUM, _c(Unary(UnaryKind.EXP),
                                                                _sub(xs, m)), 1)), m)
    picked = _c(Gather(axis=1, batch_dims=1), xs, tgt)
    return p.done(_c(Reshape((r,)), _sub(lse, picked)))


def gemm(cid: str, dt: DType, shape: tuple, rows: str, act: str) -> Built:
    m, k, n = shape
    p = _P()
    x = p.arg("x", _data(cid, "x", (m, k), dt, rows), dt)
    w = p.arg("w", _weights(cid, "w", (k, n), dt, "matrix"), dt)
    b = p.arg("bias", _weights(cid, "b", (n,), dt, "bias"), dt)
    if act == "f32-epilogue":
        acc = _add(_c(MatMul(), _c(Cast(F32), x), _c(Cast(F32), w)), _c(Cast(F32), b))
        return p.done(_c(Cast(dt), _c(Silu(), acc)))
    acts = {"relu": ReLU(), "gelu": Gelu("none"), "gelu-tanh": Gelu("tanh"), "silu": Silu()}
    return p.done(_c(acts[act], _add(_c(MatMul(), x, w), b)))


_ELEM = {E4M3: (8, 448.0), E5M2: (15, 57344.0)}  # (emax_elem, max normal) of OCP MX §5.3


def _mx_scales(v32: Any, r: int, kk: int, elem: DType, rounding: str) -> tuple[Any, Any]:
    """(blocks [r, kk/32, 32] in f32, the E8M0 scales [r, kk/32, 1])."""
    blocks = _c(Reshape((r, kk // 32, 32)), v32)
    amax = _c(Reduce((2,), keepdim=True, kind=ReduceKind.ABS_MAX, policy="unordered_tree"),
              blocks)
    emax, top = _ELEM[elem]
    if rounding == "up":
        pre = _c(Binary(BinaryKind.DIV), amax, _scalar(top, F32))
    else:
        pre = _mul(_c(Binary(BinaryKind.MAX), amax, _scalar(2.0 ** -126, F32)),
                   _scalar(2.0 ** -emax, F32))
    return blocks, _c(Cast(E8M0, "nonfinite", rounding), pre)


def mx_quant(cid: str, dt: DType, shape: tuple, rows: str, variant: str) -> Built:
    elem_name, rounding = variant.split("-")
    elem = {"e4m3": E4M3, "e5m2": E5M2}[elem_name]
    r, kk = shape
    p = _P()
    v = p.arg("v", _data(cid, "v", shape, dt, rows), dt)
    blocks, x = _mx_scales(_c(Cast(F32), v) if dt is not F32 else v, r, kk, elem, rounding)
    q = _c(Cast(elem, "saturate"), _c(Binary(BinaryKind.DIV), blocks, _c(Cast(F32), x)))
    return p.done(Tuple((_c(Reshape((r, kk)), q), _c(Reshape((r, kk // 32)), x))))


def mx_dequant(cid: str, dt: DType, shape: tuple, rows: str, variant: str) -> Built:
    elem = {"e4m3": E4M3, "e5m2": E5M2}[variant]
    r, kk = shape
    p = _P()
    # the elements: a quantized operand's values (the data rows cast, saturating)
    with np.errstate(all="ignore"):
        src = _data(cid, "q", shape, F32, rows)
        qv = np.array(cast(np.asarray(src, np.float32), elem, overflow="saturate"), order="C")
    g = _rng(cid, "scale")
    xv = np.array(cast((2.0 ** g.integers(-20, 21, (r, kk // 32))).astype(np.float32), E8M0),
                  order="C")
    if rows == "special":
        xv.reshape(-1)[:1] = cast(np.asarray([math.nan], np.float32), E8M0)
    q = p.arg("p", qv, elem)
    x = p.arg("scale", xv, E8M0)
    blocks = _c(Reshape((r, kk // 32, 32)), _c(Cast(F32), q))
    sc = _c(Reshape((r, kk // 32, 1)), _c(Cast(F32), x))
    return p.done(_c(Reshape((r, kk)), _mul(blocks, sc)))


def mx_roundtrip(cid: str, dt: DType, shape: tuple, rows: str) -> Built:
    r, kk = shape
    p = _P()
    v = p.arg("v", _data(cid, "v", shape, dt, rows), dt)
    blocks, x = _mx_scales(_c(Cast(F32), v) if dt is not F32 else v, r, kk, E4M3, "down")
    sc = _c(Cast(F32), x)
    q = _c(Cast(E4M3, "saturate"), _c(Binary(BinaryKind.DIV), blocks, sc))
    return p.done(_c(Reshape((r, kk)), _mul(_c(Cast(F32), q), sc)))


# =============================================================================================
# the cases
# =============================================================================================
#: pattern -> (builder, variants (None: one), ops, extra dtypes, quick shapes, full shapes,
#: dtypes); quick: the first quick shape in every dtype and row class, the other quick shapes
#: (ragged) ordinary rows; full: each (shape, row classes, dtypes or None for all)
_SMALL_MM = [(4, 1024, 64), (3, 33, 17)]
_SMALL_ROWS = [(4, 1024), (3, 100)]
_ALL = ROW_CLASSES
_OS = ("ordinary", "special")
_O = ("ordinary",)
PATTERNS: dict[str, tuple] = {
    "swiglu/matmul": (swiglu_matmul, None, ("MatMul", "Silu", "Binary", "Binary.mul"), (),
                      _SMALL_MM, [((16, 4096, 128), _OS, None), ((1, 8192, 64), _O, None)],
                      FLOATS),
    "swiglu/gate-up": (gate_up, None, ("Silu", "Binary", "Binary.mul"), (), _SMALL_ROWS,
                       [((1, 14336), _ALL, None), ((64, 11008), _OS, None)], FLOATS),
    "geglu/matmul": (swiglu_matmul, {"tanh": Gelu("tanh"), "none": Gelu("none")},
                     ("MatMul", "Gelu", "Binary", "Binary.mul"), (), _SMALL_MM,
                     [((16, 4096, 128), _O, None)], FLOATS),
    "geglu/gate-up": (gate_up, {"tanh": Gelu("tanh"), "none": Gelu("none")},
                      ("Gelu", "Binary", "Binary.mul"), (), _SMALL_ROWS,
                      [((1, 16384), _ALL, None)], FLOATS),
    "add-rmsnorm": (add_rmsnorm, None, ("Binary", "Binary.add", "RMSNorm"), (),
                    [(4, 1024), (5, 33)], [((1, 16384), _ALL, None), ((128, 8192), _OS, None),
                                           ((4096, 4096), _O, (BF16,))], FLOATS),
    "layernorm": (layernorm, None, ("LayerNorm",), (), [(4, 1024), (5, 33)],
                  [((1, 16384), _ALL, None), ((256, 4096), _OS, None)], FLOATS),
    "softmax": (softmax, {m: m for m in ("scale", "causal", "padding", "causal-bias", "f32")},
                ("SoftMax", "Binary", "Binary.mul"), (), [(4, 1024), (3, 33)],
                [((1, 32000), _ALL, None), ((256, 4096), _O, None)], FLOATS),
    "rope/op": (rope_op, None, ("RoPE",), (DType.I64,), [(4, 8, 64), (3, 5, 10)],
                [((32, 128, 128), _OS, None), ((32, 1, 128), _ALL, None)], FLOATS),
    "rope/rotate-half": (rope_rotate_half, None, ("Slice", "Concat", "Unary", "Unary.neg",
                                                  "Binary", "Binary.mul", "Binary.add"), (),
                         [(4, 8, 64), (3, 5, 10)], [((32, 128, 128), _O, None)], FLOATS),
    "attention": (attention, None, ("MatMul", "Transpose", "Select", "SoftMax", "Binary",
                                    "Binary.mul"), (BOOL,), [(2, 4, 16, 64), (1, 3, 5, 8)],
                  [((8, 64, 256, 128), _O, None), ((32, 1, 1024, 128), _OS, None)], FLOATS),
    "cross-entropy": (cross_entropy, {"f32": "f32", "native": "native"},
                      ("Reduce", "Reduce.max", "Reduce.sum", "Unary", "Unary.exp",
                       "Unary.log", "Gather", "Reshape", "Binary", "Binary.sub"), (I32,),
                      _SMALL_ROWS, [((8, 32000), _ALL, None), ((2, 128256), _OS, None)],
                      FLOATS),
    "gemm": (gemm, {a: a for a in ("gelu-tanh", "relu", "gelu", "silu", "f32-epilogue")},
             ("MatMul", "Binary", "Binary.add"), (), _SMALL_MM, [((8, 4096, 128), _O, None)],
             FLOATS),
    "mx-quant": (mx_quant, {v: v for v in ("e4m3-down", "e4m3-up", "e4m3-nearest",
                                           "e5m2-down", "e5m2-up")},
                 ("Reshape", "Reduce", "Reduce.abs_max", "Binary", "Cast"), (E8M0,),
                 [(4, 1024), (3, 64)], [((1, 16384), _ALL, None), ((256, 4096), _O, None)],
                 (F32, BF16)),
    "mx-dequant": (mx_dequant, {"e4m3": "e4m3", "e5m2": "e5m2"},
                   ("Cast", "Reshape", "Binary", "Binary.mul"), (E8M0,),
                   [(4, 1024), (3, 64)], [((256, 4096), _OS, None)], (F32,)),
    "mx-roundtrip": (mx_roundtrip, None, ("Reshape", "Reduce", "Reduce.abs_max", "Binary",
                                          "Cast"), (E8M0, E4M3), [(4, 1024), (3, 64)],
                     [((256, 4096), _OS, None)], (F32, BF16)),
}
#: variants in the quick tier (every variant is in the full tier)
_QUICK_VARIANTS = {"geglu/matmul": ("tanh",), "geglu/gate-up": ("none",),
                   "softmax": ("scale", "causal", "padding", "f32"),
                   "cross-entropy": ("f32", "native"), "gemm": ("gelu-tanh", "f32-epilogue"),
                   "mx-quant": ("e4m3-down", "e4m3-up"), "mx-dequant": ("e4m3",)}
_EXTRA_OPS = {"softmax/causal": ("Select",), "softmax/padding": ("Select",),
              "softmax/f32": ("Select", "Cast"), "softmax/causal-bias": ("Binary.add",),
              "gemm/relu": ("ReLU",), "gemm/gelu": ("Gelu",), "gemm/gelu-tanh": ("Gelu",),
              "gemm/silu": ("Silu",), "gemm/f32-epilogue": ("Silu", "Cast"),
              "cross-entropy/f32": ("Cast",), "mx-quant/e4m3-up": ("Binary.div",)}


def _shape_id(shape: tuple) -> str:
    return "x".join(str(d) for d in shape)


def kernel_cases(add: Callable[..., None]) -> None:
    """Register every case of the family with ``add(cid, family, build, ops=, dtypes=, spec=,
    tier=)`` (the catalog's accumulator)."""
    for name, (fn, variants, ops, extra, quick, full, dts) in PATTERNS.items():
        for vname, vval in (variants or {None: None}).items():
            key = f"{name}/{vname}" if vname else name
            spec = S.get(key, S.get(name, "")) + _HIR
            vops = tuple(dict.fromkeys((*ops, *_EXTRA_OPS.get(key, ()))))
            in_quick = vname is None or vname in _QUICK_VARIANTS.get(name, (vname,))
            if name == "softmax" and vname == "f32":
                vdts = (BF16, F16)
            else:
                vdts = dts
            plan: list[tuple[tuple, str, str, Any]] = []
            for k, shape in enumerate(quick):
                for rows in (ROW_CLASSES if k == 0 else ("ordinary",)):
                    plan.append((shape, rows, "quick" if in_quick else "full", None))
            plan += [(shape, rows, "full", only) for shape, classes, only in full
                     for rows in classes]
            for dt in vdts:
                for shape, rows, tier, only in plan:
                    if only is not None and dt not in only:
                        continue
                    cid = f"kernels/{key}/{dt}/{_shape_id(shape)}/{rows}"
                    add(cid, "kernels", _builder(fn, vval, cid, dt, shape, rows),
                        ops=vops, dtypes=(dt, *extra), spec=spec, tier=tier)


def _builder(fn: Callable, variant: Any, cid: str, dt: DType, shape: tuple,
             rows: str) -> Callable[[], Built]:
    def build() -> Built:
        if variant is None:
            return fn(cid, dt, shape, rows)
        return fn(cid, dt, shape, rows, variant)

    return build
