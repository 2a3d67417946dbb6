"""Evaluator implementations of the structural tensor ops of ``ir/hir/tensor``: Cast, Zeros,
Reshape, Transpose, Slice, Concat, Stack, ShapeOf, Rank.

Values are unsharded numpy arrays of the storage dtypes (ShardLayouts are type-level in this
slice). Every result is a fresh C-contiguous array of the result's storage dtype (never a view
of an operand; rank-0 stays rank-0). Decisions (docs/decisions.md style):

* **Cast** is ``dtypes.cast`` with the op's ``overflow`` / ``rounding`` — the bit-exact contract;
  never numpy ``astype``. Float → int values the contract leaves unspecified (``cast_ex`` marks
  them) are whatever ``cast`` writes. f4e2m1 (type level only) raises the unsupported-dtype
  error ``cast`` raises.
* **Shape dims** given as DimVars / dim expressions (Zeros.shape, Reshape.new_shape, Slice
  begin / end) are resolved, in order: a constant after ``simplify``; the DimVars bound by the
  operands' actual shapes (matching each operand's checked type against its array, when the op
  has a typed Call); the concrete extent of ``ctx.out_type`` at that axis (Zeros, Reshape).
  Reshape may additionally compute **one** unresolved extent from the total size when that is
  unambiguous (the known extents' product is non-zero and divides the size). Anything else is an
  ``EvaluationError`` saying the shape needs resolution.
* **Zeros** writes bit pattern 0 of the dtype, which is ``+0`` for every float format except
  f8e8m0; f8e8m0 has no zero (its code 0 is 2^-127), so Zeros over f8e8m0 raises (the type rule
  accepts it; the value does not exist). f4e2m1 raises the unsupported-dtype error.
* **Slice** uses Python / torch slice semantics per axis (negative bounds count from the end,
  out-of-range bounds clamp), ``strides`` default 1 and must be >= 1.
* **ShapeOf** returns a rank-1 int64 array of the extents; **Rank** a rank-0 int64 array.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tilefoundry.semantics.dtypes import cast, from_bits
from tilefoundry.semantics.evaluator.registry import EvalCtx, register_eval
from tilefoundry.semantics.formats import DType, bits_dtype, dtype_of, require_evaluable
from tilefoundry.semantics.ops.tensor import (
    Cast,
    Concat,
    Rank,
    Reshape,
    ShapeOf,
    Slice,
    Stack,
    Transpose,
    Zeros,
)
from tilefoundry.semantics.types import (
    DimVar,
    IRError,
    TensorType,
    dim_str,
    evaluate_dim,
    simplify,
)

__all__ = [
    "eval_cast", "eval_concat", "eval_rank", "eval_reshape", "eval_shape_of", "eval_slice",
    "eval_stack", "eval_transpose", "eval_zeros",
]


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _out(x: np.ndarray) -> np.ndarray:
    """A C-contiguous result that owns its data (a view of an operand is copied). Not
    ``np.ascontiguousarray``: it turns a rank-0 array into shape ``(1,)``."""
    if x.flags.c_contiguous and x.flags.owndata:
        return x
    return np.array(x, copy=True, order="C")


def _tensor(ctx: EvalCtx, x: object, i: int) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        ctx.error(f"operand {i}: expected a numpy array, got {type(x).__name__}")
    dtype_of(x)  # raises on a non-IR storage type
    return x


def _env(ctx: EvalCtx, args: tuple) -> dict[str, int]:
    """DimVar bindings read off the operands: each operand's checked type against its array."""
    env: dict[str, int] = {}
    call = ctx.call
    if call is None:
        return env
    for a, v in zip(getattr(call, "args", ()), args, strict=False):
        if not getattr(a, "has_type", False) or not isinstance(v, np.ndarray):
            continue
        t = a.checked_type
        if isinstance(t, TensorType) and len(t.shape) == v.ndim:
            for d, n in zip(t.shape, v.shape, strict=True):
                if isinstance(d, DimVar):
                    env.setdefault(d.name, int(n))
    return env


def _resolve(d: object, env: Mapping[str, int]) -> int | None:
    d = simplify(d)  # type: ignore[arg-type]
    if isinstance(d, int):
        return d
    try:
        return evaluate_dim(d, env)  # type: ignore[arg-type]
    except IRError:
        return None


def _out_dim(ctx: EvalCtx, a: int) -> int | None:
    t = ctx.out_type
    if isinstance(t, TensorType) and a < len(t.shape):
        d = simplify(t.shape[a])
        if isinstance(d, int):
            return d
    return None


# ---------------------------------------------------------------------------------------------
# Cast
# ---------------------------------------------------------------------------------------------
@register_eval(Cast)
def eval_cast(ctx: EvalCtx, args: tuple) -> np.ndarray:
    x = _tensor(ctx, args[0], 0)
    op: Cast = ctx.op
    return _out(cast(x, op.dtype, overflow=op.overflow, rounding=op.rounding))


# ---------------------------------------------------------------------------------------------
# Zeros
# ---------------------------------------------------------------------------------------------
@register_eval(Zeros)
def eval_zeros(ctx: EvalCtx, args: tuple) -> np.ndarray:
    op: Zeros = ctx.op
    dt: DType = op.dtype
    require_evaluable(dt, "Zeros dtype")
    if dt is DType.F8E8M0:
        ctx.error("f8e8m0 has no zero (its code 0 is 2^-127, every code is a power of two or "
                  "NaN), so a zero-filled f8e8m0 tensor does not exist; build the zeros in "
                  "another dtype, or fill with the scale value you mean")
    env = _env(ctx, args)
    shape = []
    for a, d in enumerate(op.shape):
        n = _resolve(d, env)
        if n is None:
            n = _out_dim(ctx, a)
        if n is None:
            ctx.error(f"shape[{a}] = {dim_str(d)} is symbolic and the shape needs resolution "
                      f"(no binding and no concrete result type); specialize the shape")
        if n < 0:
            ctx.error(f"shape[{a}] = {n} is negative")
        shape.append(n)
    if dt is DType.BOOL:
        return np.zeros(tuple(shape), bool)
    return _out(from_bits(np.zeros(tuple(shape), bits_dtype(dt)), dt))


# ---------------------------------------------------------------------------------------------
# Reshape
# ---------------------------------------------------------------------------------------------
@register_eval(Reshape)
def eval_reshape(ctx: EvalCtx, args: tuple) -> np.ndarray:
    x = _tensor(ctx, args[0], 0)
    op: Reshape = ctx.op
    env = _env(ctx, args)
    dims: list[int | None] = []
    for a, d in enumerate(op.new_shape):
        n = _resolve(d, env)
        if n is None:
            n = _out_dim(ctx, a)
        if n is not None and n < 0:
            ctx.error(f"new_shape[{a}] = {n} is negative")
        dims.append(n)
    unknown = [a for a, n in enumerate(dims) if n is None]
    known = int(np.prod([n for n in dims if n is not None], dtype=np.int64))
    if len(unknown) > 1:
        ctx.error(f"new_shape {tuple(dim_str(d) for d in op.new_shape)} has "
                  f"{len(unknown)} unresolved extents (axes {unknown}); the shape needs "
                  f"resolution (at most one extent can be computed from the size)")
    if unknown:
        a = unknown[0]
        if known == 0 or x.size % known:
            ctx.error(f"new_shape[{a}] = {dim_str(op.new_shape[a])} is unresolved and cannot be "
                      f"computed unambiguously from size {x.size} and the other extents "
                      f"(product {known}); the shape needs resolution")
        dims[a] = x.size // known
        known *= dims[a]  # type: ignore[operator]
    if known != x.size:
        ctx.error(f"new_shape {tuple(dims)} has {known} elements but x {x.shape} has {x.size}")
    return _out(x.reshape(tuple(dims), order="C"))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Transpose
# ---------------------------------------------------------------------------------------------
@register_eval(Transpose)
def eval_transpose(ctx: EvalCtx, args: tuple) -> np.ndarray:
    x = _tensor(ctx, args[0], 0)
    perm = ctx.op.perm
    r = x.ndim
    if len(perm) != r or not all(-r <= p < r for p in perm) or \
            sorted(p % r for p in perm) != list(range(r)):
        ctx.error(f"perm {perm} is not a permutation of range({r})")
    return _out(np.transpose(x, tuple(p % r for p in perm)))


# ---------------------------------------------------------------------------------------------
# Slice
# ---------------------------------------------------------------------------------------------
@register_eval(Slice)
def eval_slice(ctx: EvalCtx, args: tuple) -> np.ndarray:
    x = _tensor(ctx, args[0], 0)
    op: Slice = ctx.op
    r = x.ndim
    steps = op.strides if op.strides is not None else (1,) * r
    for nm, v in (("begin", op.begin), ("end", op.end), ("strides", steps)):
        if len(v) != r:
            ctx.error(f"{nm} has {len(v)} entries for a rank-{r} tensor")
    env = _env(ctx, args)
    idx = []
    for a in range(r):
        t = steps[a]
        if t < 1:
            ctx.error(f"axis {a}: stride {t} is not positive (step >= 1)")
        bounds = []
        for nm, d in (("begin", op.begin[a]), ("end", op.end[a])):
            n = _resolve(d, env)
            if n is None:
                ctx.error(f"axis {a}: {nm} {dim_str(d)} is symbolic and unbound; the slice "
                          f"bounds need resolution")
            bounds.append(n)
        idx.append(slice(bounds[0], bounds[1], t))
    return _out(x[tuple(idx)])


# ---------------------------------------------------------------------------------------------
# Concat / Stack
# ---------------------------------------------------------------------------------------------
def _same_kind(ctx: EvalCtx, args: tuple) -> list[np.ndarray]:
    if not args:
        ctx.error("needs at least one input")
    xs = [_tensor(ctx, x, i) for i, x in enumerate(args)]
    for i, x in enumerate(xs):
        if x.dtype != xs[0].dtype:
            ctx.error(f"operand {i} has storage {x.dtype}, operand 0 {xs[0].dtype}")
    return xs


@register_eval(Concat)
def eval_concat(ctx: EvalCtx, args: tuple) -> np.ndarray:
    xs = _same_kind(ctx, args)
    r = xs[0].ndim
    if r == 0:
        ctx.error("zero-dimensional tensors cannot be concatenated")
    axis = ctx.op.axis
    if not -r <= axis < r:
        ctx.error(f"axis {axis} is out of range for rank {r}")
    axis %= r
    for i, x in enumerate(xs):
        if x.ndim != r or any(x.shape[a] != xs[0].shape[a] for a in range(r) if a != axis):
            ctx.error(f"operand {i} has shape {x.shape}, incompatible with {xs[0].shape} "
                      f"outside axis {axis}")
    return _out(np.concatenate(xs, axis=axis))


@register_eval(Stack)
def eval_stack(ctx: EvalCtx, args: tuple) -> np.ndarray:
    xs = _same_kind(ctx, args)
    r = xs[0].ndim
    axis = ctx.op.axis
    if not -(r + 1) <= axis < r + 1:
        ctx.error(f"axis {axis} is out of range for rank {r + 1}")
    for i, x in enumerate(xs):
        if x.shape != xs[0].shape:
            ctx.error(f"operand {i} has shape {x.shape}, operand 0 {xs[0].shape}")
    return _out(np.stack(xs, axis=axis % (r + 1)))


# ---------------------------------------------------------------------------------------------
# ShapeOf / Rank
# ---------------------------------------------------------------------------------------------
@register_eval(ShapeOf)
def eval_shape_of(ctx: EvalCtx, args: tuple) -> np.ndarray:
    x = _tensor(ctx, args[0], 0)
    return np.array(x.shape, dtype=np.int64).reshape(x.ndim)


@register_eval(Rank)
def eval_rank(ctx: EvalCtx, args: tuple) -> np.ndarray:
    x = _tensor(ctx, args[0], 0)
    return np.array(x.ndim, dtype=np.int64)
