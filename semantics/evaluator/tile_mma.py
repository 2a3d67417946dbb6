"""Evaluator of the tile-family ``Mma`` (an extension of the HIR catalog).

``semantics.matmul.mma``: a and b widen exactly to the f32 accumulator, then the unfused K-order
fold starting from acc (``acc = fl(fl(acc + a_k·b_k))`` for k = 0, 1, ...; K = 0 returns acc).
The contract is an admitted set (``matmul.mma_admits``): ``allow_reassociation=True`` admits
any order over the K + 1 leaves (bound-checked), False only the K-order reference, unfused or as
an fma chain. ``matmul(a, b)`` equals ``mma(a, b, zeros)`` bit for bit (f32; narrower MatMul
results are that value rounded once).
"""

from __future__ import annotations

import numpy as np

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.evaluator.nn import _canonical_nan, _out
from tilefoundry.semantics.evaluator.registry import EvalCtx, OpContract, register_eval
from tilefoundry.semantics.formats import dtype_of
from tilefoundry.semantics.matmul import mma
from tilefoundry.semantics.ops.tile_mma import Mma

__all__ = ["eval_mma"]


@register_eval(Mma)
def eval_mma(ctx: EvalCtx, args: tuple) -> np.ndarray:
    a, b, acc = (np.asarray(v) for v in args)
    reassoc = ctx.op.allow_reassociation
    try:
        r = mma(a, b, acc, allow_reassociation=reassoc)
    except InvalidArgumentError as e:
        ctx.error(str(e))
    policy = "reassociate" if reassoc else "k_order"
    dc = dtype_of(acc)  # f32, or f16 / bf16 accumulated in f32 and rounded once (D389)
    ctx.note(OpContract(op="Mma", kind="admitted_set", dtype=dc, policy=policy,
                        detail=f"mma_admits(result, a, b, acc, allow_reassociation={reassoc})"))
    return _out(_canonical_nan(r, dc))
