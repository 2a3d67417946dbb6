"""Small programs the compiler documentation and the ``tilefoundry compile`` examples use.

``EXAMPLES`` is a Module with:

* ``rmsnorm`` — the RMSNorm op on bf16 rows (``x: [R, C]``, weight ``[C]``);
* ``rmsnorm_parts`` — the same normalization written with primitive ops (square, mean,
  add eps, rsqrt, two multiplies), every op rounding to bf16 as the reference does;
* ``softmax_parts`` — softmax over the last axis from primitives (max, sub, exp, sum, div);
* ``axpby_chain`` — a six-op f32 elementwise chain.

``tilefoundry compile tilefoundry.compiler.examples:EXAMPLES rmsnorm --shape 4x64 --shape 64
--print-after fuse`` prints the fused kernel (docs/compiler.md).
"""

from __future__ import annotations

from tilefoundry.semantics.dsl import (
    DimVar,
    Tensor,
    bf16,
    exp,
    f32,
    func,
    module,
    reduce_max,
    reduce_mean,
    reduce_sum,
    rms_norm,
    rsqrt,
)

__all__ = ["EXAMPLES"]

R = DimVar("R", 1, 1 << 16)
C = DimVar("C", 1, 1 << 16)
N = DimVar("N", 1, 1 << 30)


@func
def rmsnorm(x: Tensor[(R, C), bf16], w: Tensor[(C,), bf16]) -> Tensor[(R, C), bf16]:
    return rms_norm(x, w, eps=1e-6)


@func
def rmsnorm_parts(x: Tensor[(R, C), bf16], w: Tensor[(C,), bf16]) -> Tensor[(R, C), bf16]:
    ms = reduce_mean(x * x, (1,), keepdim=True)
    return x * rsqrt(ms + 1e-6) * w


@func
def softmax_parts(x: Tensor[(R, C), bf16]) -> Tensor[(R, C), bf16]:
    e = exp(x - reduce_max(x, (1,), keepdim=True))
    return e / reduce_sum(e, (1,), keepdim=True)


@func
def axpby_chain(x: Tensor[(N,), f32], y: Tensor[(N,), f32]) -> Tensor[(N,), f32]:
    t = x * 1.5 + y
    return (t * t - x) / (y + 2.0) * 0.25


EXAMPLES = module(rmsnorm, rmsnorm_parts, softmax_parts, axpby_chain)
