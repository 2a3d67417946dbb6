"""Type rules of ir/hir/tensor: Reshape, Cast, Gather, Zeros, Reduce, InsertSlice, CacheUpdate,
TopK and the consensus torch / numpy ops Transpose, Slice, Concat, Stack, ShapeOf, Rank.
Over 800 lines: one type rule per op of the tensor family (``semantics/ops/tensor.py`` holds
the same ops), each a few dozen lines; the shared helpers are the rules' own.

Each rule enforces the MUST / MUST NOT sentences of its HIR spec entry through ``ctx.error``
(naming the operand, the rule and the fix). Partial states go through the one commutation table
(``commutation.check_partials``) wherever it has rows; the consensus ops, which the table does
not cover, decide here and fail closed when a sharding is not derivable.

Decisions the spec leaves open (docs/decisions.md):

* Ops that produce a *new* tensor (Gather, Reduce, TopK, Slice, Concat, Stack) re-derive the
  result strides in the input's form: per-instance when the input is per-instance, otherwise
  shared-engine C-order (verbose producer strides describe the input buffer only). Gather's
  layout is natural contiguous, as its entry requires. Views (Reshape rule 1, Transpose) keep
  each layout position's stride; Cast, InsertSlice and CacheUpdate keep the layout unchanged.
  Every returned ShardLayout has concrete strides (``strides=None`` input sugar reads as
  shared-engine C-order).
* A plain (non-Shard) ``Layout`` survives only where the op is the identity on it (Cast,
  InsertSlice / CacheUpdate, Transpose permutes it, Reduce with the rank unchanged, an identity
  Slice); otherwise the result layout is ``None`` (unconstrained).
* Transpose is a permutation of elements, so every Partial commutes with it and carries; Slice,
  Concat and Stack are selections / placements, so a Partial carries when every input carries
  the identical state; a Split survives only on an axis the op leaves whole.
* Symbolic extents cannot become layout extents (``Layout`` extents are static), so a rule that
  must build a ShardLayout over a symbolic extent fails closed.
* Multi-input ops (Concat, Stack) require one storage kind; Gather takes x's, InsertSlice dst's,
  CacheUpdate cache's.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ir import Constant
from tilefoundry.semantics.ops.tensor import (
    CacheUpdate,
    Cast,
    Concat,
    Gather,
    InsertSlice,
    Rank,
    Reduce,
    ReduceKind,
    Reshape,
    ShapeOf,
    Slice,
    Stack,
    TopK,
    Transpose,
    Zeros,
)
from tilefoundry.semantics.typeinfer.common import dims_equal, norm_axis
from tilefoundry.semantics.typeinfer.commutation import FIX as PARTIAL_FIX
from tilefoundry.semantics.typeinfer.commutation import check_partials
from tilefoundry.semantics.typeinfer.core import (
    Ctx,
    register_typeinfer,
    same_dtype,
    tensor_operand,
)
from tilefoundry.semantics.typeinfer.reshape import (
    CUSTOM,
    SHARED,
    ReshapeRejected,
    materialize,
    rebuild,
    reshape_layout,
    stride_form,
)
from tilefoundry.semantics.types import (
    Broadcast,
    DimMul,
    IRError,
    Layout,
    Partial,
    ShapeDim,
    ShapeType,
    ShardLayout,
    Split,
    TensorType,
    TupleType,
    dim_str,
    dim_sum,
    evaluate_dim,
    free_dimvars,
    is_shape_dim,
    simplify,
    upper_bound,
)


# =============================================================================================
# shared helpers
# =============================================================================================
def _shp(shape) -> str:
    return "(" + ", ".join(dim_str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _out_form(shard: ShardLayout) -> str:
    form = stride_form(shard)
    return SHARED if form == CUSTOM else form


def _keep_layout(t: TensorType):
    """t's layout unchanged, a ShardLayout materialized (architecture invariant)."""
    return materialize(t.shard) if t.shard is not None else t.layout


def _axis_positions(layout: Layout) -> list[list[int]]:
    """Flat layout-position indices of each tensor axis."""
    out: list[list[int]] = [[] for _ in layout.shape]
    for p, a in enumerate(layout.axis_of_position):
        out[a].append(p)
    return out


def _split_axes(shard: ShardLayout) -> dict[int, int]:
    """mesh-axis index -> tensor axis of its Split position."""
    aop = shard.layout.axis_of_position
    return {ax: aop[a.position] for ax, a in enumerate(shard.attrs) if isinstance(a, Split)}


def _regroup(shard: ShardLayout, entries_of: list, *, attrs: dict | None = None,
             zero_axes: frozenset[int] = frozenset()) -> ShardLayout:
    """Rebuild ``shard`` over new axes: ``entries_of`` lists, per new axis, either an old axis
    index (its positions move there whole) or ``("new", extent)`` (a fresh single position).
    Positions of new axes in ``zero_axes`` get stride 0."""
    old_pos = _axis_positions(shard.layout)
    entries, pos_map, zero, i = [], {}, set(), 0
    for j, src in enumerate(entries_of):
        if isinstance(src, tuple):
            entries.append(src[1])
            if j in zero_axes:
                zero.add(i)
            i += 1
            continue
        entries.append(shard.layout.shape[src])
        for p in old_pos[src]:
            pos_map[p] = i
            if j in zero_axes:
                zero.add(i)
            i += 1
    return rebuild(shard, tuple(entries), pos_map, _out_form(shard), attrs=attrs,
                   zero_positions=frozenset(zero))


def _static_extent(ctx: Ctx, d: ShapeDim, what: str, operand: int | str = 0) -> int:
    d = simplify(d)
    if not isinstance(d, int):
        ctx.error(f"{what} is symbolic ({dim_str(d)}) but a ShardLayout's extents are static, so "
                  f"the result layout cannot be derived (fail closed)", operand=operand,
                  rule="sharded result layout over a static extent",
                  fix="Reshard the operand to an unsharded layout first, or specialize the "
                      "shape")
    return d


def _value_carrying(s: ShardLayout | None) -> bool:
    return s is not None and not s.is_fully_broadcast


# ---- symbolic size equality ----------------------------------------------------------------
def _factor(d: ShapeDim) -> tuple[int, Counter]:
    d = simplify(d)
    if isinstance(d, int):
        return d, Counter()
    if isinstance(d, DimMul):
        c1, a1 = _factor(d.lhs)
        c2, a2 = _factor(d.rhs)
        return c1 * c2, a1 + a2
    return 1, Counter([d])


def _size(shape) -> tuple[int, Counter]:
    c, atoms = 1, Counter()
    for d in shape:
        cd, ad = _factor(d)
        c, atoms = c * cd, atoms + ad
    return c, atoms


_ENUM_LIMIT = 4096


def sizes_equal(a: tuple, b: tuple) -> tuple[bool | None, str]:
    """Whether size(a) == size(b) for every binding of their DimVars: True (proven — equal
    product forms, or every binding enumerated), False (with a counterexample binding) or None
    (undecided)."""
    ca, aa = _size(a)
    cb, ab = _size(b)
    if aa == ab and (ca == cb or not aa):
        return ca == cb, "" if ca == cb else f"{ca} != {cb}"
    dvs = sorted(set().union(*(free_dimvars(d) for d in (*a, *b))), key=lambda v: v.name)
    names = [v.name for v in dvs]
    if len(set(names)) != len(names):
        return None, "two DimVars share a name with different envelopes"
    combos = math.prod(v.hi - v.lo for v in dvs)
    if combos <= _ENUM_LIMIT:
        points = itertools.product(*(range(v.lo, v.hi) for v in dvs))
        exhaustive = True
    else:
        # sample points of each envelope, never enumerated (an envelope may span 2^40 values)
        points = itertools.product(*(sorted(p for p in {v.lo, v.lo + 1, (v.lo + v.hi) // 2,
                                                        v.hi - 1} if v.lo <= p < v.hi)
                                     for v in dvs))
        exhaustive = False
    for pt in points:
        env = dict(zip(names, pt, strict=True))
        try:
            sa = math.prod(evaluate_dim(d, env) for d in a)
            sb = math.prod(evaluate_dim(d, env) for d in b)
        except IRError:
            continue
        if sa != sb:
            return False, f"at {env} the sizes are {sa} and {sb}"
    return (True, "") if exhaustive else (None, "the product forms differ")


# =============================================================================================
# Reshape
# =============================================================================================
@register_typeinfer(Reshape)
def infer_reshape(ctx: Ctx, types: tuple):
    x = tensor_operand(ctx, types[0], 0)
    new = ctx.op.new_shape
    for a, d in enumerate(new):
        d = simplify(d)
        if isinstance(d, int) and d < 0:
            ctx.error(f"new_shape[{a}] = {d} is negative", rule="Reshape new_shape extents",
                      fix="write every extent explicitly (no -1 inference)")
    ok, why = sizes_equal(tuple(x.shape), tuple(new))
    if ok is not True:
        ctx.error(f"size(new_shape {_shp(new)}) must equal size(x.shape {_shp(x.shape)})"
                  + (f"; {why}" if why else "") +
                  ("" if ok is False else " (equality could not be proven, fail closed)"),
                  operand=0, rule="Reshape: size(new_shape) MUST equal size(x.shape)",
                  fix="choose a new_shape with the same number of elements")
    try:
        layout = reshape_layout(x.layout, tuple(x.shape), tuple(new))
    except ReshapeRejected as e:
        ctx.error(f"the ShardLayout {x.shard.attrs} over layout positions "  # type: ignore[union-attr]
                  f"{x.shard.layout.shape} does not carry through {_shp(x.shape)} -> "  # type: ignore[union-attr]
                  f"{_shp(new)}: {e.reason}", operand=0,
                  rule="Reshape factorization of a ShardLayout (rule 1: whole layout positions; "
                       "rule 2: one Split position divided at a mesh-extent factor); otherwise "
                       "fail closed",
                  fix="Reshard x to Broadcast (or to a layout whose positions the new shape "
                      "regroups whole) before the reshape")
    return TensorType(tuple(new), x.dtype, layout, x.storage)


# =============================================================================================
# Cast
# =============================================================================================
@register_typeinfer(Cast)
def infer_cast(ctx: Ctx, types: tuple):
    x = tensor_operand(ctx, types[0], 0)
    op: Cast = ctx.op  # type: ignore[assignment]
    if op.dtype is DType.U32:
        ctx.error("a Cast to u32 is not defined: u32 exists only for bit reinterpretation "
                  "(D216)", rule="u32 results (Bitcast only)",
                  fix="Bitcast an f32 value to u32 (Bitcast(u32)), or Cast to i32 / i64")
    if op.rounding != "nearest" and op.dtype is not DType.F8E8M0:
        ctx.error(f"rounding={op.rounding!r} is only taken by an f8e8m0 target; {op.dtype} "
                  f"rounds to nearest, ties to even", rule="Cast rounding (f8e8m0 only)",
                  fix="drop rounding= (nearest) or cast to f8e8m0")
    if not op.dtype.is_float and op.overflow != "nonfinite":
        ctx.error(f"overflow={op.overflow!r} is not taken by the {op.dtype} target (float -> "
                  f"int truncates, int -> int wraps around)",
                  rule="Cast overflow (float targets only)",
                  fix="leave overflow at its default 'nonfinite'")
    if x.shard is not None:
        for ax, red in x.shard.partials.items():
            why = cast_partial_reason(x.dtype, op.dtype, red)
            if why:
                ctx.error(f"x carries Partial({red}) on mesh axis "
                          f"{x.shard.mesh.axis_names[ax]} and the cast {x.dtype} -> {op.dtype} "
                          f"does not commute with {red}: {why}", operand=0,
                          rule="Cast carries a Partial only where the cast commutes with its "
                               "reduction (D137)", fix=PARTIAL_FIX)
    return TensorType(tuple(x.shape), op.dtype, _keep_layout(x), x.storage)


def cast_partial_reason(src: DType, dst: DType, red: str) -> str | None:
    """Why ``Cast(src -> dst)`` of a Partial(red) value is not the Partial(red) of the cast pieces
    (None: it commutes — exactly, or up to rounding for float -> float sums, D72).
    docs/decisions.md D137; tests/semantics/typeinfer/test_rules_cast_partial.py checks every
    decision against evaluation (a witness for every rejection)."""
    fs, fd = FORMATS[src], FORMATS[dst]
    unsigned_src = src is DType.BOOL or (src.is_int and not fs.signed) or src is DType.F8E8M0
    if red == "sum":
        if DType.F8E8M0 in (src, dst):
            return "f8e8m0 has no zero and no sign: there is no f8e8m0 sum, and its cast of a " \
                   "negative or zero sum is NaN"
        if src is DType.BOOL:
            return "bool has no sum"
        if dst is DType.BOOL:
            return "x != 0 is not linear"
        if src.is_float and dst.is_float:
            return None  # linear up to rounding (D72)
        if src.is_float:
            return "truncation toward zero is not linear (trunc(0.5) + trunc(0.5) != trunc(1))"
        if dst.is_int and fd.bits <= fs.bits:
            return None  # wraparound is linear modulo 2^bits of the target
        return ("the pieces' sum wraps around in the source dtype, their cast does not "
                "(i8: 100 + 100 = -56, but 100.0 + 100.0 = 200)")
    # max / min: the cast must be monotone in the -0 < +0 total order, and NaN-free where the
    # reduction would not produce NaN anyway
    if dst is DType.F8E8M0 and red == "max" and src is not DType.F8E8M0:
        return "zero and negative values cast to f8e8m0 NaN, which max propagates"
    if dst is DType.BOOL and not unsigned_src:
        return "x != 0 is not monotone for signed values (max(-1, 0) = 0 -> False, but " \
               "max(True, False) = True)"
    if src.is_int and dst.is_int:
        contained = (fd.bits > fs.bits and (fd.signed or not fs.signed)) or \
            (fd.bits == fs.bits and fd.signed == fs.signed)
        if not contained:
            return "wraparound to a narrower or differently signed integer is not monotone"
    return None


# =============================================================================================
# Gather
# =============================================================================================
@register_typeinfer(Gather)
def infer_gather(ctx: Ctx, types: tuple):
    x = tensor_operand(ctx, types[0], 0)
    idx = tensor_operand(ctx, types[1], 1)
    op: Gather = ctx.op  # type: ignore[assignment]
    if x.rank == 0:
        ctx.error("x is rank-0; Gather needs an axis to gather along", operand=0,
                  rule="Gather axis", fix="reshape x to rank >= 1")
    if not idx.dtype.is_int:
        ctx.error(f"indices have dtype {idx.dtype}; Gather takes an integer index tensor",
                  operand=1, rule="Gather indices dtype", fix="Cast the indices to i32 or i64")
    axis = norm_axis(ctx, op.axis, x.rank, "axis")
    bd = op.batch_dims
    if not 0 <= bd <= min(axis, idx.rank):
        ctx.error(f"batch_dims={bd} must satisfy 0 <= batch_dims <= min(axis={axis}, "
                  f"rank(indices)={idx.rank})", rule="Gather batch_dims bounds",
                  fix=f"use batch_dims <= {min(axis, idx.rank)}")
    for i in range(bd):
        if not dims_equal(x.shape[i], idx.shape[i]):
            ctx.error(f"batched dim {i}: x has {dim_str(x.shape[i])}, indices "
                      f"{dim_str(idx.shape[i])}; the leading batch_dims dims MUST be equal",
                      operand=1, rule="Gather batch dims equal",
                      fix="make the leading dims equal or lower batch_dims")
    shape = tuple(x.shape[:axis]) + tuple(idx.shape[bd:]) + tuple(x.shape[axis + 1:])
    if op.fill is not None:
        from tilefoundry.semantics.typeinfer.gather_fill import check_fill

        check_fill(ctx, x, idx)
    check_partials(ctx, (x, idx))  # x: linear selection (allow); indices: reject
    xs, ish = x.shard, idx.shard
    if bd > 0 and (_value_carrying(xs) or _value_carrying(ish)):
        ctx.error(f"batch_dims={bd} with a value-carrying ShardLayout is not supported",
                  operand=0 if _value_carrying(xs) else 1,
                  rule="Gather: batch_dims > 0 over value-carrying ShardLayouts MUST fail closed",
                  fix="Reshard the operands to Broadcast, or use batch_dims=0")
    if ish is not None and any(isinstance(a, Split) for a in ish.attrs):
        ctx.error(f"indices carry a Split ({ish.attrs}); the output sharding of split "
                  f"indices is not derived (fail closed)", operand=1,
                  rule="Gather: only x's shard attrs migrate",
                  fix="Reshard the indices to Broadcast")
    if xs is None:
        return TensorType(shape, x.dtype, None, x.storage)
    splits = [(ax, a.position) for ax, a in enumerate(xs.attrs) if isinstance(a, Split)]
    composed = any(isinstance(e, tuple) for e in xs.layout.shape)
    if splits and composed:
        ctx.error(f"x's ShardLayout has a composed layout {xs.layout.shape} with a Split; "
                  f"no output layout is derivable", operand=0,
                  rule="Gather: a composed layout MUST fail closed",
                  fix="Reshard x to a natural (one position per axis) layout first")
    on_axis = [ax for ax, p in splits if p == axis]
    if on_axis and len(splits) > 1:
        ctx.error(f"x has {len(splits)} Splits and one targets the gathered axis {axis}",
                  operand=0, rule="Gather: multiple Splits with one on the gathered axis MUST "
                                  "fail closed",
                  fix="Reshard x so that the gathered axis is not split, or only it is")
    for a, d in enumerate(shape):
        _static_extent(ctx, d, f"output axis {a}")
    if on_axis and x.dtype in (DType.BOOL, DType.F8E8M0):
        ctx.error(f"x has dtype {x.dtype} and a Split on the gathered axis, which makes a "
                  f"Partial(sum); {x.dtype} has no sum to complete it with", operand=0,
                  rule="Gather over a split axis gives Partial(sum) (D137)",
                  fix="Reshard x to Broadcast on that mesh axis, or Cast it to a dtype with a "
                      "sum first")
    shift = idx.rank - bd - 1
    attrs = {ax: Partial("sum") if p == axis else Split(p if p < axis else p + shift)
             for ax, p in splits}
    out = ShardLayout(xs.mesh, tuple(attrs.get(ax, a) for ax, a in enumerate(xs.attrs)),
                      Layout.natural(tuple(simplify(d) for d in shape)))
    return TensorType(shape, x.dtype, out, x.storage)


# =============================================================================================
# Zeros
# =============================================================================================
@register_typeinfer(Zeros)
def infer_zeros(ctx: Ctx, types: tuple):
    op: Zeros = ctx.op  # type: ignore[assignment]
    if op.dtype is DType.U32:
        ctx.error("Zeros of u32 is not defined: u32 exists only for bit reinterpretation (D216)",
                  rule="u32 results (Bitcast only)",
                  fix="Bitcast Zeros of f32 (bit pattern 0) to u32")
    for a, d in enumerate(op.shape):
        d = simplify(d)
        if isinstance(d, int) and d < 0:
            ctx.error(f"shape[{a}] = {d} is negative", rule="Zeros shape extents",
                      fix="give non-negative extents")
    return TensorType(tuple(op.shape), op.dtype, None, op.storage)


# =============================================================================================
# Reduce
# =============================================================================================
def _reduce_dtype(ctx: Ctx, dt: DType, kind: ReduceKind) -> None:
    k = kind.value
    bad = (dt is DType.BOOL and k in ("sum", "mean", "abs_max")) or \
          (dt.is_int and k == "mean") or (dt is DType.F8E8M0 and k in ("sum", "mean"))
    if bad:
        ctx.error(f"kind={k} over {dt} is not representable in the input dtype (the result "
                  f"keeps it)", operand=0, rule="Reduce result dtype = x's dtype",
                  fix="Cast x to f32 first")


@register_typeinfer(Reduce)
def infer_reduce(ctx: Ctx, types: tuple):
    x = tensor_operand(ctx, types[0], 0)
    op: Reduce = ctx.op  # type: ignore[assignment]
    axes = [norm_axis(ctx, a, x.rank, "axes entry") for a in op.axes]
    if len(set(axes)) != len(axes):
        ctx.error(f"axes {op.axes} repeat an axis", rule="Reduce axes (numpy: no repeats)",
                  fix="list each axis once")
    red = set(axes)
    _reduce_dtype(ctx, x.dtype, op.kind)
    keep = op.keepdim
    shape = tuple(1 if a in red else d for a, d in enumerate(x.shape)) if keep else \
        tuple(d for a, d in enumerate(x.shape) if a not in red)
    check_partials(ctx, (x,), kind=op.kind.value)
    lay = x.layout
    if lay is None or not red:
        return TensorType(shape, x.dtype, _keep_layout(x), x.storage)
    if isinstance(lay, Layout):
        if not keep:
            return TensorType(shape, x.dtype, None, x.storage)
        entries = tuple(1 if a in red else e for a, e in enumerate(lay.shape))
        strides = None if lay.strides is None else \
            tuple(0 if a in red else s for a, s in enumerate(lay.strides))
        return TensorType(shape, x.dtype, Layout(entries, strides), x.storage)
    shard: ShardLayout = lay
    if shard.layout.strides is None and any(isinstance(e, tuple) for e in shard.layout.shape):
        ctx.error(f"the sharded input's composed layout {shard.layout.shape} has no explicit "
                  f"strides, so its (non-default) strides are unknown", operand=0,
                  rule="Reduce: non-default-stride sharded input must carry explicit producer "
                       "strides",
                  fix="give the producer's strides explicitly (Reshard with Layout(strides=...))")
    shard = materialize(shard)
    attrs = {ax: Broadcast() for ax, a in _split_axes(shard).items() if a in red}
    entries_of: list = []
    zero: set[int] = set()
    for a in range(x.rank):
        if a in red:
            if keep:
                zero.add(len(entries_of))
                entries_of.append(("new", 1))
        else:
            entries_of.append(a)
    out = _regroup(shard, entries_of, attrs=attrs, zero_axes=frozenset(zero))
    return TensorType(shape, x.dtype, out, x.storage)


# =============================================================================================
# InsertSlice / CacheUpdate
# =============================================================================================
def _check_write_sharding(ctx: Ctx, dst: TensorType, upd: TensorType, i_dst: int, i_upd: int,
                          partials: dict[int, str], whole_axes: set[int]) -> None:
    """Partial identity (InsertSlice / CacheUpdate entries) and Split consistency: an update
    Split must be the dst's own Split of an axis the window covers whole (same layout entry),
    so each device writes what it owns; anything else fails closed."""
    ds, us = dst.shard, upd.shard
    nd, nu = ctx.operand_name(i_dst), ctx.operand_name(i_upd)
    if partials and (ds is None or us is None or ds.mesh != us.mesh or ds.attrs != us.attrs):
        ctx.error(f"{nd} carries a Partial, so {nu} MUST carry the identical mesh and "
                  f"per-mesh-axis ShardAttr state: {nd} has "
                  f"{None if ds is None else ds.attrs}, {nu} has "
                  f"{None if us is None else us.attrs}", operand=i_upd,
                  rule="write into a Partial: identical mesh and per-mesh-axis state",
                  fix=f"Reshard {nu} to {nd}'s sharding, or Reshard both to Broadcast")
    if us is None:
        return
    for ax, a in enumerate(us.attrs):
        if not isinstance(a, Split):
            continue
        axis_name = us.mesh.axis_names[ax]
        da = ds.attrs[ax] if ds is not None and ds.mesh == us.mesh else None
        ua = us.layout.axis_of_position[a.position]
        ok = isinstance(da, Split) and ds is not None
        if ok:
            dax = ds.layout.axis_of_position[da.position]  # type: ignore[union-attr]
            ok = dax == ua and ua in whole_axes and \
                ds.layout.shape[dax] == us.layout.shape[ua] and \
                da.position - _axis_positions(ds.layout)[dax][0] == \
                a.position - _axis_positions(us.layout)[ua][0]  # type: ignore[union-attr]
        if not ok:
            ctx.error(f"{nu} is Split on mesh axis {axis_name} (tensor axis {ua}) in a way "
                      f"{nd}'s layout does not own identically; the write would need a "
                      f"redistribution (fail closed)", operand=i_upd,
                      rule="sharded write: an update Split must match the destination's Split "
                           "of a whole-window axis",
                      fix=f"Reshard {nu} to Broadcast on mesh axis {axis_name}")


def _scalar_replicated(ctx: Ctx, t: TensorType, i: int) -> None:
    if t.shard is not None and any(isinstance(a, Split) for a in t.shard.attrs):
        ctx.error("a scalar operand cannot be Split", operand=i,
                  rule="scalar operands are replicated", fix="Reshard it to Broadcast")


@register_typeinfer(InsertSlice)
def infer_insert_slice(ctx: Ctx, types: tuple):
    if len(types) < 2:
        ctx.error(f"InsertSlice takes (dst, update, *offsets), got {len(types)} input(s)",
                  rule="InsertSlice inputs", fix="pass dst, update and one offset per axis")
    dst = tensor_operand(ctx, types[0], 0)
    upd = tensor_operand(ctx, types[1], 1)
    if upd.rank != dst.rank:
        ctx.error(f"update has rank {upd.rank} but dst has rank {dst.rank}", operand=1,
                  rule="InsertSlice: update has the same rank as dst",
                  fix="reshape update to dst's rank")
    same_dtype(ctx, [dst, upd], [0, 1])
    offs = types[2:]
    if len(offs) != dst.rank:
        ctx.error(f"got {len(offs)} offset(s) for a rank-{dst.rank} dst; a rank-1 dst takes one "
                  f"bare rank-0 scalar, a rank-N dst one rank-0 scalar per axis", operand=0,
                  rule="InsertSlice offsets count = rank(dst)",
                  fix=f"pass exactly {dst.rank} offset(s)")
    for i, t in enumerate(offs):
        t = tensor_operand(ctx, t, 2 + i)
        if t.rank != 0 or not t.dtype.is_int:
            ctx.error(f"offset for axis {i} has type {_shp(t.shape)} {t.dtype}; offsets are "
                      f"rank-0 integer scalars", operand=2 + i,
                      rule="InsertSlice offsets: rank-0 integer scalars",
                      fix="pass a rank-0 i32 / i64 scalar")
        _scalar_replicated(ctx, t, 2 + i)
    args = ctx.call.args if ctx.call is not None else ()
    for a in range(dst.rank):
        ud, dd = simplify(upd.shape[a]), simplify(dst.shape[a])
        if isinstance(ud, int) and isinstance(dd, int) and ud > dd:
            ctx.error(f"axis {a}: the update extent {ud} exceeds dst's {dd}, so no offset "
                      f"places the window in bounds", operand=1,
                      rule="InsertSlice window within dst",
                      fix="slice the update or enlarge dst")
        node = args[2 + a] if len(args) > 2 + a else None
        if not isinstance(node, Constant):
            continue  # a runtime offset is checked at eval / runtime
        off = int(node.value)
        if off < 0 or (isinstance(ud, int) and isinstance(dd, int) and off + ud > dd) or \
                (off > 0 and dims_equal(ud, dd)):
            ctx.error(f"the literal offset {off} on axis {a} places the window "
                      f"[{off}, {off} + {dim_str(ud)}) outside dst's extent {dim_str(dd)}",
                      operand=2 + a,
                      rule="InsertSlice: a literal offset placing a negative or out-of-bounds "
                           "window fails typeinfer",
                      fix=f"use an offset in [0, {dim_str(dd)} - {dim_str(ud)}] on axis {a}")
    partials = check_partials(ctx, types)
    whole = {a for a in range(dst.rank) if dims_equal(upd.shape[a], dst.shape[a])}
    _check_write_sharding(ctx, dst, upd, 0, 1, partials, whole)
    return TensorType(tuple(dst.shape), dst.dtype, _keep_layout(dst), dst.storage)


@register_typeinfer(CacheUpdate)
def infer_cache_update(ctx: Ctx, types: tuple):
    cache = tensor_operand(ctx, types[0], 0)
    new = tensor_operand(ctx, types[3], 3)
    for t, i in ((cache, 0), (new, 3)):
        if t.rank != 4:
            ctx.error(f"{ctx.operand_name(i)} has rank {t.rank}; cache and new are rank-4 "
                      f"[B, len, kv_heads, head_dim]", operand=i,
                      rule="CacheUpdate: rank-4 cache and new",
                      fix="reshape to [B, len, kv_heads, head_dim]")
    same_dtype(ctx, [cache, new], [0, 3])
    for a, nm in ((0, "B"), (2, "kv_heads"), (3, "head_dim")):
        if not dims_equal(cache.shape[a], new.shape[a]):
            ctx.error(f"{nm}: cache has {dim_str(cache.shape[a])}, new has "
                      f"{dim_str(new.shape[a])}", operand=3,
                      rule=f"CacheUpdate: equal {nm}", fix=f"make new's {nm} equal cache's")
    cl, nl = simplify(cache.shape[1]), simplify(new.shape[1])
    if isinstance(cl, int) and isinstance(nl, int) and nl > cl:
        ctx.error(f"new.len {nl} exceeds cache.len {cl}", operand=3,
                  rule="CacheUpdate: new.len MUST NOT exceed cache.len",
                  fix="write fewer positions or enlarge the cache")
    for i in (1, 2):
        t = tensor_operand(ctx, types[i], i)
        scalar = all(isinstance(d, int) and d == 1 for d in t.shape)
        if t.dtype is not DType.I32 or not scalar:
            ctx.error(f"{ctx.operand_name(i)} has type {_shp(t.shape)} {t.dtype}; it MUST be an "
                      f"i32 scalar (rank-0, or only literal size-1 dims)", operand=i,
                      rule="CacheUpdate: cur_pos and s are i32 scalars",
                      fix="Cast to i32 and reshape to ()")
        _scalar_replicated(ctx, t, i)
    partials = check_partials(ctx, types)
    _check_write_sharding(ctx, cache, new, 0, 3, partials, {0, 2, 3})
    return TensorType(tuple(cache.shape), cache.dtype, _keep_layout(cache), cache.storage)


# =============================================================================================
# TopK
# =============================================================================================
@register_typeinfer(TopK)
def infer_topk(ctx: Ctx, types: tuple):
    x = tensor_operand(ctx, types[0], 0)
    op: TopK = ctx.op  # type: ignore[assignment]
    if not is_shape_dim(op.k):
        ctx.error(f"k = {op.k!r} ({type(op.k).__name__}) is not a ShapeDim", rule="TopK: k "
                  "MUST satisfy the ShapeDim contract (int / DimVar / dim expression)",
                  fix="pass an int, a DimVar or a dim expression such as dim_min(512, N // 4)")
    if x.rank == 0:
        ctx.error("x is rank-0; TopK selects along an axis", operand=0, rule="TopK axis",
                  fix="reshape x to rank >= 1")
    axis = norm_axis(ctx, op.axis, x.rank, "axis")
    k = simplify(op.k)
    if isinstance(k, int) and k < 0:
        ctx.error(f"k = {k} is negative", rule="TopK: k MUST be non-negative",
                  fix="use k >= 0")
    length = simplify(x.shape[axis])
    ub = upper_bound(k)
    if isinstance(length, int) and ub is not None and ub > length:
        ctx.error(f"k = {dim_str(k)} (upper bound {ub}) exceeds the selected axis {axis}'s "
                  f"length {length}", operand=0,
                  rule="TopK: k MUST NOT exceed the selected-axis length",
                  fix=f"use k <= {length}")
    if not isinstance(k, int):
        own = set().union(*(free_dimvars(d) for d in x.shape))
        missing = sorted(v.name for v in free_dimvars(k) - own)
        if missing:
            ctx.error(f"k = {dim_str(k)} uses DimVar(s) {missing} that do not appear in x's "
                      f"shape {_shp(x.shape)}, so k is not resolvable at TopK's evaluation "
                      f"site", operand=0,
                      rule="TopK: a symbolic k's DimVars MUST be resolvable from x's own shape",
                      fix="derive k from a DimVar of x's shape")
    check_partials(ctx, (x,))  # every Partial is rejected (indices name a winner)
    shape = tuple(k if a == axis else d for a, d in enumerate(x.shape))
    layout = None
    if x.shard is not None:
        shard = materialize(x.shard)
        on = [ax for ax, a in _split_axes(shard).items() if a == axis]
        if on:
            ctx.error(f"the selected axis {axis} is Split on mesh axis "
                      f"{shard.mesh.axis_names[on[0]]}", operand=0,
                      rule="TopK: the selected axis MUST NOT be Split-sharded",
                      fix=f"Reshard x to Broadcast on mesh axis {shard.mesh.axis_names[on[0]]}")
        kk = _static_extent(ctx, k, "k (the selected axis's layout extent)")
        layout = _regroup(shard, [("new", kk) if a == axis else a for a in range(x.rank)])
    values = TensorType(shape, x.dtype, layout, x.storage)
    return TupleType((values, TensorType(shape, DType.I64, layout, x.storage)))


# =============================================================================================
# consensus ops: Transpose, Slice, Concat, Stack, ShapeOf, Rank
# =============================================================================================
@register_typeinfer(Transpose)
def infer_transpose(ctx: Ctx, types: tuple):
    x = tensor_operand(ctx, types[0], 0)
    perm = ctx.op.perm
    if len(perm) != x.rank:
        ctx.error(f"perm {perm} has {len(perm)} entries for a rank-{x.rank} tensor",
                  rule="Transpose perm is a permutation of the axes",
                  fix=f"give {x.rank} axes")
    p = [norm_axis(ctx, a, x.rank, "perm entry") for a in perm]
    if sorted(p) != list(range(x.rank)):
        ctx.error(f"perm {perm} is not a permutation of range({x.rank})",
                  rule="Transpose perm is a permutation of the axes", fix="list each axis once")
    shape = tuple(x.shape[a] for a in p)
    lay = x.layout
    if isinstance(lay, ShardLayout):
        shard = materialize(lay)
        old = _axis_positions(shard.layout)
        order = [q for a in p for q in old[a]]
        pos_map = {q: i for i, q in enumerate(order)}
        flat = shard.layout.flat_strides
        attrs = tuple(Split(pos_map[a.position]) if isinstance(a, Split) else a
                      for a in shard.attrs)
        inner = Layout(tuple(shard.layout.shape[a] for a in p))
        lay = ShardLayout(shard.mesh, attrs, inner).with_strides(
            tuple(flat[q] for q in order))  # type: ignore[index]
    elif isinstance(lay, Layout):
        lay = Layout(tuple(lay.shape[a] for a in p),
                     None if lay.strides is None else tuple(lay.strides[a] for a in p))
    return TensorType(shape, x.dtype, lay, x.storage)


def _slice_axis(ctx: Ctx, length: ShapeDim, b: ShapeDim, e: ShapeDim, t: int,
                a: int) -> tuple[ShapeDim, bool]:
    """(result extent, whole-axis identity) with Python / torch slice semantics."""
    length, b, e = simplify(length), simplify(b), simplify(e)
    if isinstance(length, int) and isinstance(b, int) and isinstance(e, int):
        start, stop, step = slice(b, e, t).indices(length)
        # len(range(...)) without its ssize_t limit (a huge symbolic-free extent)
        n = max(0, (stop - start + step - 1) // step) if step > 0 else \
            max(0, (start - stop - step - 1) // -step)
        return n, n == length and step == 1
    for v, nm in ((b, "begin"), (e, "end")):
        if isinstance(v, int) and v < 0:
            ctx.error(f"axis {a}: a negative {nm} {v} against a symbolic extent cannot be "
                      f"normalized", rule="Slice bounds", fix="give a non-negative bound")
    if isinstance(b, int) and isinstance(e, int):
        n: ShapeDim = max(0, -(-(e - b) // t))
    else:
        n = simplify(e - b) if t == 1 else simplify((e - b + (t - 1)) // t)
    return n, t == 1 and b == 0 and dims_equal(e, length)


@register_typeinfer(Slice)
def infer_slice(ctx: Ctx, types: tuple):
    x = tensor_operand(ctx, types[0], 0)
    op: Slice = ctx.op  # type: ignore[assignment]
    steps = op.strides if op.strides is not None else (1,) * x.rank
    for nm, v in (("begin", op.begin), ("end", op.end), ("strides", steps)):
        if len(v) != x.rank:
            ctx.error(f"{nm} has {len(v)} entries for a rank-{x.rank} tensor",
                      rule="Slice: one begin / end / stride per axis",
                      fix=f"give {x.rank} entries")
    for a, t in enumerate(steps):
        if t < 1:
            ctx.error(f"axis {a}: stride {t} is not positive (torch slicing takes step >= 1)",
                      rule="Slice stride >= 1", fix="use a positive stride")
    res = [_slice_axis(ctx, x.shape[a], op.begin[a], op.end[a], steps[a], a)
           for a in range(x.rank)]
    shape = tuple(n for n, _ in res)
    whole = [w for _, w in res]
    lay = x.layout
    if all(whole):
        return TensorType(shape, x.dtype, _keep_layout(x), x.storage)
    if not isinstance(lay, ShardLayout):
        return TensorType(shape, x.dtype, None, x.storage)
    shard = materialize(lay)
    for ax, a in _split_axes(shard).items():
        if not whole[a]:
            ctx.error(f"axis {a} is Split on mesh axis {shard.mesh.axis_names[ax]} and the "
                      f"slice does not keep it whole, so device ownership is not block-aligned "
                      f"(fail closed)", operand=0, rule="Slice of a Split axis",
                      fix=f"Reshard x to Broadcast on mesh axis {shard.mesh.axis_names[ax]}")
    entries_of = [a if whole[a] else ("new", _static_extent(ctx, shape[a], f"axis {a}"))
                  for a in range(x.rank)]
    return TensorType(shape, x.dtype, _regroup(shard, entries_of), x.storage)


def _joint_shard(ctx: Ctx, ts: list[TensorType], skip_axis: int | None,
                 what: str) -> ShardLayout | None:
    """The ShardLayout every input of Concat / Stack shares (identical mesh, attrs and layout
    outside ``skip_axis``), or None when all are unsharded; mixing fails closed."""
    shards = [t.shard for t in ts]
    if all(s is None for s in shards):
        return None
    i0 = next(i for i, s in enumerate(shards) if s is not None)
    s0 = shards[i0]
    assert s0 is not None
    for i, s in enumerate(shards):
        if s is None:
            ctx.error(f"{ctx.operand_name(i0)} is sharded ({s0.attrs}) but "
                      f"{ctx.operand_name(i)} is not; the {what} of sharded and unsharded "
                      f"values has no single result layout (fail closed)", operand=i,
                      rule=f"{what}: inputs share one sharding",
                      fix="Reshard the inputs to one sharding (Broadcast) first")
        if s.mesh != s0.mesh or s.attrs != s0.attrs:
            part = any(isinstance(a, Partial) or isinstance(b, Partial)
                       for a, b in zip(s.attrs, s0.attrs, strict=False))
            ctx.error(f"{ctx.operand_name(i)} has {s.attrs} on {s.mesh.axis_names}, "
                      f"{ctx.operand_name(i0)} has {s0.attrs} on {s0.mesh.axis_names}"
                      + ("; a Partial carries only when every input carries the identical state"
                         if part else ""), operand=i,
                      rule=f"{what}: inputs share one sharding",
                      fix=PARTIAL_FIX if part else "Reshard the inputs to one sharding first")
        same = all(s.layout.shape[a] == s0.layout.shape[a] for a in range(len(s0.layout.shape))
                   if a != skip_axis)
        if not same:
            ctx.error(f"{ctx.operand_name(i)}'s layout {s.layout.shape} differs from "
                      f"{ctx.operand_name(i0)}'s {s0.layout.shape}", operand=i,
                      rule=f"{what}: inputs share one layout",
                      fix="Reshard the inputs to one layout first")
    return materialize(s0)


def _same_storage(ctx: Ctx, ts: list[TensorType]) -> None:
    for i, t in enumerate(ts[1:], 1):
        if t.storage is not ts[0].storage:
            ctx.error(f"storage {t.storage.value} differs from {ctx.operand_name(0)}'s "
                      f"{ts[0].storage.value}", operand=i, rule="one storage kind per op",
                      fix=f"Reshard it to storage {ts[0].storage.value} first")


@register_typeinfer(Concat)
def infer_concat(ctx: Ctx, types: tuple):
    if not types:
        ctx.error("Concat needs at least one input", rule="Concat inputs",
                  fix="pass one or more tensors")
    ts = [tensor_operand(ctx, t, i) for i, t in enumerate(types)]
    r = ts[0].rank
    if r == 0:
        ctx.error("zero-dimensional tensors cannot be concatenated", operand=0,
                  rule="Concat rank >= 1", fix="use Stack, or reshape to rank 1")
    for i, t in enumerate(ts):
        if t.rank != r:
            ctx.error(f"rank {t.rank} differs from {ctx.operand_name(0)}'s {r}", operand=i,
                      rule="Concat: equal ranks", fix="reshape the inputs to one rank")
    same_dtype(ctx, ts, list(range(len(ts))))
    axis = norm_axis(ctx, ctx.op.axis, r, "axis")
    for i, t in enumerate(ts):
        for a in range(r):
            if a != axis and not dims_equal(t.shape[a], ts[0].shape[a]):
                ctx.error(f"axis {a}: extent {dim_str(t.shape[a])} differs from "
                          f"{ctx.operand_name(0)}'s {dim_str(ts[0].shape[a])}", operand=i,
                          rule="Concat: every axis but the concatenated one matches",
                          fix="slice or pad the inputs to matching shapes")
    _same_storage(ctx, ts)
    # linear in the operands (a simplify of the growing sum per operand was quadratic)
    total: ShapeDim = ts[0].shape[axis] if len(ts) == 1 else dim_sum(t.shape[axis] for t in ts)
    shape = tuple(total if a == axis else d for a, d in enumerate(ts[0].shape))
    shard = _joint_shard(ctx, ts, axis, "Concat")
    if shard is None:
        return TensorType(shape, ts[0].dtype, None, ts[0].storage)
    for ax, a in _split_axes(shard).items():
        if a == axis:
            ctx.error(f"the concatenated axis {axis} is Split on mesh axis "
                      f"{shard.mesh.axis_names[ax]}; device ownership would interleave (fail "
                      f"closed)", operand=0, rule="Concat of a Split axis",
                      fix=f"Reshard the inputs to Broadcast on mesh axis "
                          f"{shard.mesh.axis_names[ax]}")
    ext = _static_extent(ctx, total, f"the concatenated axis {axis}")
    out = _regroup(shard, [("new", ext) if a == axis else a for a in range(r)])
    return TensorType(shape, ts[0].dtype, out, ts[0].storage)


@register_typeinfer(Stack)
def infer_stack(ctx: Ctx, types: tuple):
    if not types:
        ctx.error("Stack needs at least one input", rule="Stack inputs",
                  fix="pass one or more tensors")
    ts = [tensor_operand(ctx, t, i) for i, t in enumerate(types)]
    r = ts[0].rank
    for i, t in enumerate(ts):
        if t.rank != r or not all(dims_equal(a, b) for a, b in zip(t.shape, ts[0].shape,
                                                                    strict=False)):
            ctx.error(f"shape {_shp(t.shape)} differs from {ctx.operand_name(0)}'s "
                      f"{_shp(ts[0].shape)}", operand=i, rule="Stack: equal shapes",
                      fix="reshape the inputs to one shape")
    same_dtype(ctx, ts, list(range(len(ts))))
    axis = norm_axis(ctx, ctx.op.axis, r + 1, "axis")
    _same_storage(ctx, ts)
    shape = (*ts[0].shape[:axis], len(ts), *ts[0].shape[axis:])
    shard = _joint_shard(ctx, ts, None, "Stack")
    if shard is None:
        return TensorType(shape, ts[0].dtype, None, ts[0].storage)
    entries_of = [a for a in range(axis)] + [("new", len(ts))] + [a for a in range(axis, r)]
    return TensorType(shape, ts[0].dtype, _regroup(shard, entries_of), ts[0].storage)


@register_typeinfer(ShapeOf)
def infer_shape_of(ctx: Ctx, types: tuple):
    x = tensor_operand(ctx, types[0], 0)
    return ShapeType(x.rank)


@register_typeinfer(Rank)
def infer_rank(ctx: Ctx, types: tuple):
    tensor_operand(ctx, types[0], 0)
    return TensorType((), DType.I64)
