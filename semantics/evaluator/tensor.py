"""Evaluator implementations of the tensor ops of ``ir/hir/tensor``: Cast, Zeros, Reshape,
Transpose, Slice, Concat, Stack, ShapeOf, Rank, Gather, Reduce, InsertSlice, CacheUpdate, TopK.

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
* **Gather** follows the spec's element rule ``out[c.., i.., t..] = x[c.., index[b.., i..], t..]``
  (the first ``batch_dims`` of the leading dims also index ``indices``), unsharded values only
  (mesh simulation is elsewhere). Every index must lie in ``[0, n)`` of the gathered axis:
  negative indices do **not** wrap (torch.gather / index_select reject them too; numpy's take
  would wrap). The check runs vectorized before gathering; the error names the first offending
  index value, its position in ``indices``, the axis and its extent (D100).
* **Reduce** is ``reductions.reduce`` with the op's kind, axes (negatives normalized), keepdim
  and policy: low-precision floats accumulate in f32 and round once, integer sums wrap, bool
  takes max / min. An empty reduction gives the kind's identity; ``mean`` over zero elements
  raises (the spec: mean "MUST NOT invent" an identity), also when the result itself is empty.
  Contracts (D101): a float ``sum`` / ``mean`` under ``unordered_tree`` / ``ordered_tree`` notes
  ``OpContract(kind="admitted_set", policy=...)`` — the reference is one member of the set, the
  oracle decides membership with ``reductions.admits`` — for every such Call (also when the set
  happens to be a singleton, n <= 2). Fold policies, integer / bool reductions and
  max / min / abs_max are exact functions and note nothing (``evaluate(report=True)`` lists only
  Calls whose result is not simply bit-exact).
* **InsertSlice** / **CacheUpdate** return a fresh copy of ``dst`` / ``cache`` with the window
  replaced (the value form; lowering may reuse the buffer). Their runtime-valued bounds are
  checked here (InsertSlice: ``0 <= offset`` and ``offset + update extent <= dst extent`` on every
  axis; CacheUpdate: ``cur_pos >= 0``, ``1 <= s <= new.len``, ``cur_pos + s <= cache.len``), each
  violation an ``EvaluationError`` naming the values. Offsets / cur_pos / s are rank-0 or
  literal size-1 integer arrays (D102).
* **TopK** is ``ordering.topk`` with ``nan="last"`` (the Tile design's ``nan::last``: NaNs are
  the least preferred candidates in both directions; torch.topk ranks NaN as the largest value),
  ties by original index (-0 and +0 tie). A symbolic ``k`` resolves from the DimVars x's own
  shape binds (the spec: k "MUST be resolvable from x's own (input) shape"), else from the
  concrete result type; an unresolvable k or one outside ``[0, axis length]`` raises.
  ``sorted=False`` returns the sorted order, one member of what the spec's "unspecified order"
  admits, and notes a ``permutation`` contract: the oracle accepts the same selected
  (value, index) pairs in any order along the axis (D103, D201). Indices are int64.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tilefoundry.errors import EmptyReductionError, InvalidArgumentError
from tilefoundry.semantics.dtypes import cast, cast_ex, from_bits, positive_nan
from tilefoundry.semantics.evaluator.registry import EvalCtx, OpContract, register_eval
from tilefoundry.semantics.formats import DType, bits_dtype, dtype_of, require_evaluable
from tilefoundry.semantics.ops.tensor import (
    CacheUpdate,
    Cast,
    Concat,
    Gather,
    InsertSlice,
    Rank,
    Reduce,
    Reshape,
    ShapeOf,
    Slice,
    Stack,
    TopK,
    Transpose,
    Zeros,
)
from tilefoundry.semantics.ordering import topk
from tilefoundry.semantics.reductions import reduce
from tilefoundry.semantics.run_time_checks import cache_bounds_problem, slice_window_problem
from tilefoundry.semantics.types import (
    DimVar,
    IRError,
    TensorType,
    TupleType,
    dim_str,
    evaluate_dim,
    is_shape_dim,
    simplify,
)

__all__ = [
    "eval_cache_update", "eval_cast", "eval_concat", "eval_gather", "eval_insert_slice",
    "eval_rank", "eval_reduce", "eval_reshape", "eval_shape_of", "eval_slice", "eval_stack",
    "eval_topk", "eval_transpose", "eval_zeros",
]


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _out(x: np.ndarray) -> np.ndarray:
    """A C-contiguous result that owns its data (a view of an operand is copied). Not
    ``np.ascontiguousarray``: it turns a rank-0 array into shape ``(1,)``."""
    if isinstance(x, np.ndarray) and x.flags.c_contiguous and x.flags.owndata:
        return x
    return np.array(x, copy=True, order="C")  # also a numpy scalar (x[()] of a rank-0 x) -> 0-d


def _tensor(ctx: EvalCtx, x: object, i: int) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        ctx.error(f"operand {i}: expected a numpy array, got {type(x).__name__}")
    dtype_of(x)  # raises on a non-IR storage type
    return x


def _env(ctx: EvalCtx, args: tuple, *, function_dims: bool = True) -> dict[str, int]:
    """DimVar bindings: the enclosing function's (its argument shapes; D129) unless
    ``function_dims`` is False, then those read off the operands (each operand's checked type
    against its array)."""
    env: dict[str, int] = dict(ctx.dims) if function_dims else {}
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
    if op.dtype.is_int and dtype_of(x).is_float:
        r = cast_ex(x, op.dtype, overflow=op.overflow, rounding=op.rounding)
        if np.any(r.unspecified):  # NaN / out-of-range sources: the contract leaves them open
            ctx.note(OpContract(op=f"Cast({op.dtype})", kind="unspecified", dtype=op.dtype,
                                mask=np.array(r.unspecified, copy=True),
                                detail="float -> int of NaN or out-of-range sources"))
        return _out(r.values)
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


# ---------------------------------------------------------------------------------------------
# shared helpers of the indexing / writing ops
# ---------------------------------------------------------------------------------------------
def _axis(ctx: EvalCtx, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        ctx.error(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def _scalar_int(ctx: EvalCtx, v: object, what: str) -> int:
    """A rank-0 (or literal size-1) integer array as a Python int (no overflow in the checks)."""
    if not isinstance(v, np.ndarray) or v.size != 1:
        shape = v.shape if isinstance(v, np.ndarray) else type(v).__name__
        ctx.error(f"{what} must be a rank-0 (or size-1) integer scalar array, got {shape}")
    dt = dtype_of(v)
    if not dt.is_int:
        ctx.error(f"{what} has dtype {dt}; it must be an integer scalar")
    return int(v.reshape(()))


# ---------------------------------------------------------------------------------------------
# Gather
# ---------------------------------------------------------------------------------------------
@register_eval(Gather)
def eval_gather(ctx: EvalCtx, args: tuple) -> np.ndarray:
    x = _tensor(ctx, args[0], 0)
    idx = _tensor(ctx, args[1], 1)
    op: Gather = ctx.op
    if x.ndim == 0:
        ctx.error("x is rank-0; there is no axis to gather along")
    if not dtype_of(idx).is_int:
        ctx.error(f"indices have dtype {dtype_of(idx)}; Gather takes an integer index tensor")
    axis = _axis(ctx, op.axis, x.ndim)
    bd = op.batch_dims
    if not 0 <= bd <= min(axis, idx.ndim):
        ctx.error(f"batch_dims={bd} must satisfy 0 <= batch_dims <= min(axis={axis}, "
                  f"rank(indices)={idx.ndim})")
    if x.shape[:bd] != idx.shape[:bd]:
        ctx.error(f"the leading batch_dims={bd} dims differ: x {x.shape[:bd]}, indices "
                  f"{idx.shape[:bd]}")
    n = x.shape[axis]
    ii = idx.astype(np.int64)  # every IR integer dtype fits; comparisons stay exact
    bad = (ii < 0) | (ii >= n)
    if op.fill is not None:  # D388: an out-of-range index reads the fill
        from tilefoundry.semantics.evaluator.gather_fill import gather_filled

        return _out(gather_filled(ctx, x, ii, bad, eval_gather))
    if bad.any():
        pos = tuple(int(p) for p in np.argwhere(bad)[0])
        ctx.error(f"index value {int(ii[pos])} at indices position {pos} is out of range for "
                  f"axis {axis} of extent {n} (valid indices are [0, {n}); negative indices do "
                  f"not wrap); {int(bad.sum())} of {ii.size} indices are out of range")
    if bd == 0:
        return _out(np.asarray(np.take(x, ii, axis=axis)))  # a rank-0 index gives a scalar
    # out[c.., i.., t..] = x[c.., indices[b.., i..], t..]: one advanced index per leading axis
    # (broadcast over the output's leading axes) and the indices for the gathered one
    rank = axis + idx.ndim - bd
    lead = []
    for j in range(axis):
        shp = [1] * rank
        shp[j] = x.shape[j]
        lead.append(np.arange(x.shape[j], dtype=np.int64).reshape(shp))
    g = ii.reshape(idx.shape[:bd] + (1,) * (axis - bd) + idx.shape[bd:])
    return _out(x[(*lead, g)])


# ---------------------------------------------------------------------------------------------
# Reduce
# ---------------------------------------------------------------------------------------------
_TREES = ("unordered_tree", "ordered_tree")


@register_eval(Reduce)
def eval_reduce(ctx: EvalCtx, args: tuple) -> np.ndarray:
    x = _tensor(ctx, args[0], 0)
    op: Reduce = ctx.op
    kind, dt = op.kind.value, dtype_of(x)
    axes = [_axis(ctx, a, x.ndim, "axes entry") for a in op.axes]
    if len(set(axes)) != len(axes):
        ctx.error(f"axes {op.axes} repeat an axis")
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if kind == "mean" and n == 0:
        ctx.error(f"mean over axes {tuple(op.axes)} of x with shape {x.shape} reduces zero "
                  f"elements: mean has no identity (HIR Reduce: 'mean has no identity — there "
                  f"is nothing to divide by — so it MUST NOT invent one'); guard the empty "
                  f"case or reduce with sum")
    try:
        out = reduce(x, kind, tuple(axes), policy=op.policy, keepdim=op.keepdim)
    except (InvalidArgumentError, EmptyReductionError) as e:
        ctx.error(str(e))
    if dt.is_float and kind in ("sum", "mean") and op.policy in _TREES:
        ctx.note(OpContract(
            op=f"Reduce({kind})", kind="admitted_set", dtype=dt, policy=op.policy,
            detail=f"axes {tuple(sorted(axes))}, {n} element(s) per result; the reference value "
                   f"is the balanced pairwise tree in source order, one member of the set"))
    # D21: a reduced NaN is the positive quiet NaN, not numpy's propagated operand (reducing
    # no axis is the identity: a copy)
    return _out(positive_nan(out) if axes else out)


# ---------------------------------------------------------------------------------------------
# InsertSlice / CacheUpdate
# ---------------------------------------------------------------------------------------------
@register_eval(InsertSlice)
def eval_insert_slice(ctx: EvalCtx, args: tuple) -> np.ndarray:
    if len(args) < 2:
        ctx.error(f"takes (dst, update, *offsets), got {len(args)} operand(s)")
    dst = _tensor(ctx, args[0], 0)
    upd = _tensor(ctx, args[1], 1)
    if upd.ndim != dst.ndim:
        ctx.error(f"update has rank {upd.ndim} but dst has rank {dst.ndim}")
    if upd.dtype != dst.dtype:
        ctx.error(f"update has storage {upd.dtype}, dst {dst.dtype}")
    offs = args[2:]
    if len(offs) != dst.ndim:
        ctx.error(f"got {len(offs)} offset(s) for a rank-{dst.ndim} dst (one per axis)")
    window = []
    for a, v in enumerate(offs):
        o = _scalar_int(ctx, v, f"offset for axis {a}")
        u, d = upd.shape[a], dst.shape[a]
        problem = slice_window_problem(a, o, u, d)
        if problem:
            ctx.error(problem)
        window.append(slice(o, o + u))
    out = np.array(dst, copy=True, order="C")
    out[tuple(window)] = upd
    return out


@register_eval(CacheUpdate)
def eval_cache_update(ctx: EvalCtx, args: tuple) -> np.ndarray:
    if len(args) != 4:
        ctx.error(f"takes (cache, cur_pos, s, new), got {len(args)} operand(s)")
    cache = _tensor(ctx, args[0], 0)
    new = _tensor(ctx, args[3], 3)
    if cache.ndim != 4 or new.ndim != 4:
        ctx.error(f"cache {cache.shape} and new {new.shape} must be rank-4 "
                  f"[B, len, kv_heads, head_dim]")
    if cache.dtype != new.dtype:
        ctx.error(f"new has storage {new.dtype}, cache {cache.dtype}")
    for a, nm in ((0, "B"), (2, "kv_heads"), (3, "head_dim")):
        if cache.shape[a] != new.shape[a]:
            ctx.error(f"{nm}: cache has {cache.shape[a]}, new has {new.shape[a]}")
    cur = _scalar_int(ctx, args[1], "cur_pos")
    s = _scalar_int(ctx, args[2], "s")
    length, nlen = cache.shape[1], new.shape[1]
    problem = cache_bounds_problem(cur, s, nlen, length)
    if problem:
        ctx.error(problem)
    out = np.array(cache, copy=True, order="C")
    out[:, cur:cur + s] = new[:, :s]
    return out


# ---------------------------------------------------------------------------------------------
# TopK
# ---------------------------------------------------------------------------------------------
@register_eval(TopK)
def eval_topk(ctx: EvalCtx, args: tuple) -> tuple[np.ndarray, np.ndarray]:
    x = _tensor(ctx, args[0], 0)
    op: TopK = ctx.op
    if x.ndim == 0:
        ctx.error("x is rank-0; TopK selects along an axis")
    axis = _axis(ctx, op.axis, x.ndim)
    if not is_shape_dim(op.k):
        ctx.error(f"k = {op.k!r} is not a ShapeDim")
    n = x.shape[axis]
    k = _resolve(op.k, _env(ctx, args, function_dims=False))  # only x's own shape binds k
    t = ctx.out_type
    if k is None and isinstance(t, TupleType) and t.fields and \
            isinstance(t.fields[0], TensorType) and axis < len(t.fields[0].shape):
        d = simplify(t.fields[0].shape[axis])
        k = d if isinstance(d, int) else None
    if k is None:
        ctx.error(f"k = {dim_str(op.k)} is symbolic and not resolvable from x's shape "
                  f"{x.shape} (no DimVar of x's type binds it and the result type is not "
                  f"concrete); k's DimVars must appear in x's own shape")
    if not 0 <= k <= n:
        ctx.error(f"k = {k} (k = {dim_str(op.k)}) is outside [0, {n}], the length of axis "
                  f"{axis}")
    values, indices = topk(x, k, axis, largest=op.largest, nan="last")
    if not op.sorted:
        ctx.note(OpContract(op="TopK", kind="permutation", dtype=dtype_of(values), axis=axis,
                            detail="sorted=False: the selected set in an unspecified order "
                                   "(values and indices permuted alike)"))
    return _out(values), _out(indices.astype(np.int64))
