"""Evaluator of the tile family's Select (``ite``) and Bitcast.

* **Select** picks, per element of the broadcast shape, t's element where cond holds and f's
  otherwise. It moves bit patterns (``np.where`` on the unsigned-integer views), so a NaN's
  payload and sign, -0 and subnormals of the chosen operand arrive unchanged; it never computes.
* **Bitcast** reinterprets the 32-bit storage (f32 <-> u32): a copy of the bytes viewed as the
  target dtype — zero signs, subnormals and NaN payloads (signalling ones included) preserved
  bit-for-bit, never a numeric conversion.
"""

from __future__ import annotations

import numpy as np

from tilefoundry.semantics.dtypes import to_bits
from tilefoundry.semantics.evaluator.registry import EvalCtx, register_eval
from tilefoundry.semantics.formats import DType, dtype_of
from tilefoundry.semantics.ops.tile_select import Bitcast, Select

__all__ = ["eval_bitcast", "eval_select"]


@register_eval(Select)
def eval_select(ctx: EvalCtx, args: tuple) -> np.ndarray:
    cond, t, f = (np.asarray(a) for a in args)
    if dtype_of(cond) is not DType.BOOL:
        ctx.error(f"cond has dtype {dtype_of(cond)}, expected bool")
    dt = dtype_of(t)
    if dtype_of(f) is not dt:
        ctx.error(f"t has dtype {dt} and f {dtype_of(f)}; they must agree")
    try:
        shape = np.broadcast_shapes(cond.shape, t.shape, f.shape)
    except ValueError:
        ctx.error(f"shapes {cond.shape}, {t.shape}, {f.shape} do not broadcast")
    bits = np.where(cond, to_bits(t), to_bits(f))
    return np.array(np.broadcast_to(bits, shape), order="C").view(dt.storage)


@register_eval(Bitcast)
def eval_bitcast(ctx: EvalCtx, args: tuple) -> np.ndarray:
    x = np.asarray(args[0])
    op: Bitcast = ctx.op
    src = dtype_of(x)
    if {src, op.dtype} != {DType.F32, DType.U32}:
        ctx.error(f"bitcast {src} -> {op.dtype}: only f32 <-> u32 reinterprets bits")
    return np.array(x, copy=True, order="C").view(op.dtype.storage)
