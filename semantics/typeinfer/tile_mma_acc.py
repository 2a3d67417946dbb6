"""Mma's f16 / bf16 accumulators (docs/decisions.md D389). The Tile design: "XIR lowers FP16/BF16
MMA accumulators through FP32 internal accumulation when MmaPolicy::allow_reassociation is
enabled, then rounds the result to the declared type. Strict BF16 accumulation still rejects".

* acc f16 / bf16 with ``allow_reassociation=True``: accepted; the result has acc's dtype.
* acc f16 / bf16 with ``allow_reassociation=False`` (strict accumulation): a type error.
* every other accumulator dtype: a type error (f32 is the accumulator, D225).
"""

from __future__ import annotations

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.typeinfer.core import Ctx
from tilefoundry.semantics.types import TensorType

NARROW_ACC = (DType.F16, DType.BF16)


def check_narrow_acc(ctx: Ctx, acc: TensorType) -> None:
    if acc.dtype not in NARROW_ACC:
        ctx.error(f"acc is {acc.dtype}; the accumulator MUST be f32, or f16 / bf16 accumulated "
                  f"in f32 with allow_reassociation (D225, D389)", operand=2,
                  rule="Mma: acc MUST be f32 (or f16 / bf16 with allow_reassociation)",
                  fix="pass an f32 accumulator and Cast the result to the narrower dtype")
    if not ctx.op.allow_reassociation:  # type: ignore[attr-defined]
        ctx.error(f"acc is {acc.dtype} with allow_reassociation=False: strict {acc.dtype} "
                  f"accumulation is rejected (the Tile design: 'Strict BF16 accumulation still "
                  f"rejects'); an {acc.dtype} accumulator is accumulated in f32 and rounded "
                  f"once, which needs the reassociation permission", operand=2,
                  rule="Mma: an f16 / bf16 acc needs allow_reassociation=True (D389)",
                  fix="pass allow_reassociation=True, or an f32 accumulator")
