"""Kernel-library bugs the ``kernels`` family must catch in the quick tier (issue 33), each the
reference evaluator with one op replaced (``planted_backends.Planted``):

* ``softmax_bf16_denominator`` — a bf16 softmax whose denominator is accumulated in bf16 (each
  partial sum rounded), the exponentials and the quotient in f32 (issue 33 saw it pass the
  quick tier: its narrow softmax rows held at most 4 elements);
* ``rmsnorm_f32_textbook`` — RMSNorm as ``x * rsqrt(mean(x * x) + eps) * w`` in f32: the sum of
  squares overflows for large rows (and underflows for tiny ones);
* ``rope_interleaved`` — RoPE rotating the GPT-J pairs ``(x[2i], x[2i+1])`` instead of the
  rotate-half pairs ``(x[i], x[i + D/2])`` the HF / NeoX convention and the HIR use;
* ``e8m0_nearest_for_down`` — a Cast to f8e8m0 that rounds to nearest where the program asks
  for rounding down (an MX scale that is sometimes twice the OCP one);
* ``fused_activation_chains`` — a fusing compiler that keeps bf16 / f16 chains of elementwise
  ops *and activations* (Silu, Gelu, ReLU) in f32 and rounds once: caught on RoPE written out
  (``q * cos + rotate_half(q) * sin``, three exact roundings skipped); on SwiGLU's
  ``silu(g) * u`` the same fusion is inside the contract (silu's 1-ulp budget holds the
  unrounded value);

and one legal freedom it must pass: ``matmul_fma_zeros`` (``planted_backends``), every GEMM a
zeros-seeded fma chain in K order.
"""

from __future__ import annotations

import numpy as np

from tests.conformance.planted_backends import ChainInF32, Planted, _wrap_eval
from tilefoundry.semantics.dtypes import cast
from tilefoundry.semantics.formats import DType, dtype_of
from tilefoundry.semantics.ops import Cast, Gelu, ReLU, RMSNorm, RoPE, Silu, SoftMax

BF16, F32 = DType.BF16, DType.F32


def softmax_bf16_denominator() -> Planted:
    def make(good):
        def bad(ctx, args):
            (x,) = args
            if dtype_of(x) is not BF16:
                return good(ctx, args)
            ax = ctx.op.axis % x.ndim
            w = np.moveaxis(cast(x, F32), ax, -1)
            with np.errstate(all="ignore"):
                e = np.exp(w - w.max(-1, keepdims=True)).astype(np.float32)
                s = np.zeros(e.shape[:-1], np.float32)
                for i in range(e.shape[-1]):
                    s = cast(cast(s + e[..., i], BF16), F32)  # each partial sum in bf16
                y = e / s[..., None]
            return np.array(cast(np.moveaxis(y, -1, ax), BF16), order="C")
        return bad
    return Planted("softmax-bf16-denominator", lambda: _wrap_eval(SoftMax, make))


def rmsnorm_f32_textbook() -> Planted:
    def make(good):
        def bad(ctx, args):
            x, g = args
            dt = dtype_of(x)
            w = cast(x, F32).astype(np.float32)
            with np.errstate(all="ignore"):
                ms = np.mean(w * w, axis=-1, keepdims=True, dtype=np.float32)
                r = np.float32(1) / np.sqrt(ms + np.float32(ctx.op.eps))
                y = (w * r * cast(g, F32)).astype(np.float32)
            return np.array(cast(y, dt), order="C")
        return bad
    return Planted("rmsnorm-f32-textbook", lambda: _wrap_eval(RMSNorm, make))


def rope_interleaved() -> Planted:
    def make(good):
        def bad(ctx, args):
            q, k, cos, sin, pos = args
            outs = []
            for x in (q, k):
                dt = dtype_of(x)
                w = cast(x, F32).astype(np.float64)
                c, s = cast(cos, F32)[pos].astype(np.float64), cast(sin, F32)[pos].astype(
                    np.float64)
                rot = np.empty_like(w)
                rot[..., 0::2], rot[..., 1::2] = -w[..., 1::2], w[..., 0::2]
                outs.append(np.array(cast((w * c + rot * s).astype(np.float32), dt),
                                     order="C"))
            return tuple(outs)
        return bad
    return Planted("rope-interleaved", lambda: _wrap_eval(RoPE, make))


def e8m0_nearest_for_down() -> Planted:
    def make(good):
        def bad(ctx, args):
            op = ctx.op
            if op.dtype is DType.F8E8M0 and op.rounding == "down":
                import dataclasses

                from tilefoundry.semantics.evaluator.registry import EvalCtx

                near = dataclasses.replace(op, rounding="nearest")
                return good(EvalCtx(near, ctx.call, ctx.out_type, [], ctx.args, ctx.dims),
                            args)
            return good(ctx, args)
        return bad
    return Planted("e8m0-nearest-for-down", lambda: _wrap_eval(Cast, make))


class _FusedActivations(ChainInF32):
    def __init__(self):
        super().__init__(round_each=False)
        self.name = "planted-fused-activation-chains"

    def capabilities(self):
        from tilefoundry.conformance.backend import ReferenceBackend

        return ReferenceBackend().capabilities()

    def compile(self, module, entry):
        from tests.conformance.planted_backends import widen_bf16_chains

        return widen_bf16_chains(module, entry, False, extra=(Silu, Gelu, ReLU),
                                 narrow=(DType.BF16, DType.F16)), entry


def fused_activation_chains() -> _FusedActivations:
    return _FusedActivations()


BUGS = {"softmax_bf16_denominator": "kernels/softmax/", "rmsnorm_f32_textbook":
        "kernels/add-rmsnorm/", "rope_interleaved": "kernels/rope/op/",
        "e8m0_nearest_for_down": "kernels/mx-quant/", "fused_activation_chains":
        "kernels/rope/rotate-half/"}
