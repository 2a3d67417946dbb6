"""Type rules of the ``tile`` family's reductions: SeededReduce, MaskedReduce, CustomReduce.

MUST (each a TypeInferError naming the operand, the rule and the fix):

* ``axes`` in range and not repeated;
* ``seed`` has x's dtype and exactly the result's shape (keepdim or not) — a state, not a value
  to broadcast into every partial (Tile design: "incoming state is included once");
* ``mask`` (MaskedReduce) is bool with exactly x's shape;
* the kind is defined in x's dtype (bool has no sum, f8e8m0 no sum);
* CustomReduce: ``reducer`` names a registered reducer; x is a float of an evaluable format;
  ``seed`` is f32 of the reduced shape plus ``(S,)`` state components; a tree policy needs the
  reducer's merge contract ("diagnose the missing contract and suggest a fold policy"), an
  unordered tree its commutative law.

MUST NOT: accept a Partial operand (every row of the commutation table rejects: the seed would
be included once per device, or a custom state is not a homomorphism of the Partial's
reduction), nor a Split / Broadcast-sharded operand (these ops reduce unsharded values; the fix
is a Reshard to Broadcast, then Local).
"""

from __future__ import annotations

from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ops.tile_reduce import CustomReduce, MaskedReduce, SeededReduce
from tilefoundry.semantics.reducers import REDUCERS, TREES, reducer
from tilefoundry.semantics.typeinfer.common import dims_equal, norm_axis
from tilefoundry.semantics.typeinfer.commutation import check_partials
from tilefoundry.semantics.typeinfer.core import Ctx, register_typeinfer, tensor_operand
from tilefoundry.semantics.types import TensorType, TupleType


def _shape_eq(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(dims_equal(x, y) for x, y in zip(a, b, strict=True))


def _reduced(ctx: Ctx, x: TensorType, axes: tuple, keepdim: bool) -> tuple:
    ax = [norm_axis(ctx, a, x.rank, "axes entry") for a in axes]
    if len(set(ax)) != len(ax):
        ctx.error(f"axes {axes} repeat an axis", rule="reduction axes (no repeats)",
                  fix="list each axis once")
    red = set(ax)
    if keepdim:
        return tuple(1 if a in red else d for a, d in enumerate(x.shape))
    return tuple(d for a, d in enumerate(x.shape) if a not in red)


def _unsharded(ctx: Ctx, types: tuple, kind: str) -> None:
    check_partials(ctx, types, kind=kind)  # every Partial row of these ops rejects
    for i, t in enumerate(types):
        if isinstance(t, TensorType) and t.shard is not None:
            ctx.error("a sharded operand: the tile-family reductions reduce unsharded values",
                      operand=i, rule="tile reductions take unsharded operands",
                      fix="Reshard the operand to Broadcast and take Local first")


@register_typeinfer(SeededReduce)
@register_typeinfer(MaskedReduce)
def infer_seeded_reduce(ctx: Ctx, types: tuple) -> TensorType:
    op: SeededReduce = ctx.op  # type: ignore[assignment]
    x = tensor_operand(ctx, types[0], 0)
    seed = tensor_operand(ctx, types[1], 1)
    _unsharded(ctx, types, op.kind)
    shape = _reduced(ctx, x, op.axes, op.keepdim)
    if (x.dtype is DType.BOOL and op.kind == "sum") or \
            (x.dtype is DType.F8E8M0 and op.kind == "sum"):
        ctx.error(f"kind=sum over {x.dtype} is not representable in the input dtype",
                  operand=0, rule="seeded reduction result dtype = x's dtype",
                  fix="Cast x to f32 (or an integer dtype for bool) first")
    if seed.dtype is not x.dtype:
        ctx.error(f"seed has dtype {seed.dtype}, x has {x.dtype}; the seed is the incoming "
                  f"state, of x's dtype", operand=1, rule="seed dtype = x's dtype",
                  fix=f"Cast the seed to {x.dtype}")
    if not _shape_eq(tuple(seed.shape), shape):
        ctx.error(f"seed has shape {tuple(seed.shape)}; the result (one state per fiber) has "
                  f"{shape}", operand=1, rule="seed shape = result shape (keepdim as given)",
                  fix="pass one seed per output element (Reshape or broadcast it explicitly)")
    if isinstance(op, MaskedReduce):
        m = tensor_operand(ctx, types[2], 2)
        if m.dtype is not DType.BOOL:
            ctx.error(f"mask has dtype {m.dtype}; a mask is bool", operand=2,
                      rule="mask dtype = bool", fix="compare to build a bool mask")
        if not _shape_eq(tuple(m.shape), tuple(x.shape)):
            ctx.error(f"mask has shape {tuple(m.shape)}, x has {tuple(x.shape)}", operand=2,
                      rule="mask shape = x's shape (one flag per contribution)",
                      fix="broadcast the mask to x's shape explicitly")
    return TensorType(shape, x.dtype, None, x.storage)


@register_typeinfer(CustomReduce)
def infer_custom_reduce(ctx: Ctx, types: tuple) -> TensorType | TupleType:
    op: CustomReduce = ctx.op  # type: ignore[assignment]
    from tilefoundry.semantics.topk_reducer import TopKMerge

    if isinstance(op.reducer, TopKMerge):
        return _infer_topk_reduce(ctx, op, types)
    x = tensor_operand(ctx, types[0], 0)
    seed = tensor_operand(ctx, types[1], 1)
    if isinstance(op.reducer, str) and op.reducer not in REDUCERS:
        ctx.error(f"reducer {op.reducer!r} is not declared", rule="CustomReduce reducer is a "
                  "registered reducer", fix=f"use one of {tuple(REDUCERS)} or declare it with "
                  f"Reducer(...)")
    r = reducer(op.reducer)
    if getattr(r, "declared", False):  # the program's own laws, checked per program (D449)
        from tilefoundry.semantics.reducer_laws import check_laws

        check_laws(r)
    _unsharded(ctx, types, r.name)
    shape = _reduced(ctx, x, op.axes, op.keepdim)
    if not x.dtype.is_float or x.dtype is DType.F8E8M0 or not FORMATS[x.dtype].evaluable:
        ctx.error(f"reducer {r.name!r} takes a float x, got {x.dtype}", operand=0,
                  rule="CustomReduce x is f32 / f16 / bf16 / fp8e4m3 / fp8e5m2",
                  fix="Cast x to f32 first")
    if op.policy in TREES and not r.merge_contract:
        ctx.error(f"policy {op.policy} needs a merge contract, and reducer {r.name!r} declares "
                  f"none (Tile design: 'diagnose the missing contract and suggest a fold "
                  f"policy')", rule="a tree policy needs a compatible lift/merge contract",
                  fix="use policy fold_left (or fold_right)")
    if op.policy == "unordered_tree" and not r.law("commutative"):
        ctx.error(f"unordered_tree permutes contributions and reducer {r.name!r} declares no "
                  f"commutative law", rule="unordered_tree needs a commutative merge",
                  fix="use policy ordered_tree or a fold")
    want = (*shape, len(r.state))
    if seed.dtype is not DType.F32 or not _shape_eq(tuple(seed.shape), want):
        ctx.error(f"seed is {seed.dtype} {tuple(seed.shape)}; reducer {r.name!r} carries an f32 "
                  f"state of shape {want} (the result's shape plus its components {r.state})",
                  operand=1, rule="CustomReduce seed = f32 state of the result's shape",
                  fix=f"pass an f32 seed of shape {want} (its identity "
                      f"{r.identity} per fiber, where the reducer has one)")
    return TensorType(want, DType.F32, None, x.storage)


def _infer_topk_reduce(ctx: Ctx, op: CustomReduce, types: tuple) -> TupleType:
    """CustomReduce with the Top-K merge reducer (D486): x of an ordered evaluable dtype, one
    reduced axis (the indexed Tile's index), the seed the state pair (values of x's dtype, i64
    indices) of the reduced shape plus (K,); the result the same pair. Every policy is admitted
    (merge_K is exactly associative and commutative with an identity)."""
    r = op.reducer
    x = tensor_operand(ctx, types[0], 0)
    _unsharded(ctx, types[:1], r.name)
    if x.rank == 0:
        ctx.error("x is rank-0; the Top-K merge reduces an axis", operand=0,
                  rule="Top-K merge reduces one axis of x", fix="pass a tensor of rank >= 1")
    if len(op.axes) != 1:
        ctx.error(f"axes {op.axes} name {len(op.axes)} axes; the Top-K merge reduces one "
                  f"indexed axis (the candidates' index is the position along it)",
                  rule="Top-K merge reduces exactly one axis",
                  fix="Reshape the axes into one first, or reduce one axis")
    if x.dtype is DType.F8E8M0 or not FORMATS[x.dtype].evaluable:
        ctx.error(f"x is {x.dtype}, which has no evaluable order with signed zeros", operand=0,
                  rule="Top-K merge x is an evaluable float, integer or bool",
                  fix="Cast x to f32 first")
    shape = _reduced(ctx, x, op.axes, op.keepdim)
    want_v = TensorType((*shape, r.k), x.dtype, None, x.storage)
    want_i = TensorType((*shape, r.k), DType.I64, None, x.storage)
    seed = types[1]
    ok = (isinstance(seed, TupleType) and len(seed.fields) == 2 and
          all(isinstance(f, TensorType) and f.shard is None for f in seed.fields))
    if ok:
        sv, si = seed.fields
        ok = (sv.dtype is x.dtype and si.dtype is DType.I64 and
              _shape_eq(tuple(sv.shape), want_v.shape) and
              _shape_eq(tuple(si.shape), want_v.shape))
    if not ok:
        ctx.error(f"seed is {seed}; {r} carries the state pair (values {x.dtype} "
                  f"{want_v.shape}, indices i64 {want_v.shape}): the result's shape plus K",
                  operand=1, rule="Top-K merge seed = (values, indices) state of the result's "
                  "shape", fix="pass (values, indices) with K empty slots (zero values, index "
                  "-1) per fiber, its identity, or an earlier Top-K state")
    return TupleType((want_v, want_i))
