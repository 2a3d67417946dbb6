"""Type rules of ir/hir/math: Binary and Unary (torch pointwise semantics, no dtype promotion).

Decisions the HIR spec leaves open (recorded in docs/decisions.md):

* **Dtypes never promote.** Binary operands MUST share one dtype (HIR Binary entry); a mismatch
  is rejected naming the operand, with the fix "insert an explicit cast".
* **Result dtype.** Comparisons (EQ / NE / LT / LE / GT / GE) give ``bool``; every other kind
  keeps the operand dtype. ``LOGICAL_NOT`` gives ``bool``.
* **bool operands.** AND / OR / XOR and LOGICAL_NOT require ``bool`` operands (no implicit
  ``x != 0``); the arithmetic kinds ADD / SUB / MUL / DIV / MIN / MAX and the numeric unary kinds
  reject ``bool`` (fix: cast). Comparisons accept every dtype, ``bool`` included, as torch does.
* **Integer DIV is rejected.** torch's ``/`` on integers is true division with a float result;
  HIR does not promote, so the only result dtype it could have is the integer one, which would be
  a different operation. The fix is a Cast to a float dtype.
* **Float-only unary kinds.** EXP / LOG / EXP2 / LOG2 / RSQRT / SQRT require a float dtype (fix:
  cast); NEG / ABS / CEIL / ROUND / RELU / SQUARE accept float or integer dtypes (on integers
  CEIL / ROUND are the identity and NEG / ABS / SQUARE wrap, as in torch).
* **f4e2m1 is type-level only** (ARCHITECTURE.md, Types; docs/decisions.md D18): every Binary
  and Unary kind on an f4e2m1 operand — comparisons included — is rejected at type inference
  with the fix "Cast to f32 first", instead of typing a program the evaluator cannot run.
  ``f8e8m0`` is an ordinary (evaluable) float here: its arithmetic is the widen–op–round
  realization, which gives NaN where the result has no E8M0 value (negative, zero).
* **Storage of a Binary result** is the most local *concrete* storage among the operands
  (``rmem < smem < gmem``): the computation reads both operands and its result lives at the
  innermost level either lives at (e.g. ``acc_rmem + tile_smem`` stays in registers). Operands do
  not have to share storage. Only when every operand is ``unmaterialized`` is the result
  ``unmaterialized``. Unary preserves its operand's storage.
* **Partial states** are decided per mesh axis by the commutation table
  (``commutation.check_partials`` with ``kind=op.kind.value``). On top of the table, Binary
  rejects two operands that both carry Partial states on *different* sets of mesh axes (HIR
  Binary entry: "Partial states on different axes are not interchangeable; ADD rejects two
  Partial inputs when their states occupy different mesh axes") — the per-axis table alone would
  admit e.g. Partial(max) on axis x + Partial(max) on axis y, which the spec sentence forbids.
* **Layout.** The result layout is ``common.elementwise_layout``: the shared ShardLayout of the
  sharded operands with the surviving Partial states (a sharded operand may not be broadcast to a
  larger shape), or the plain operands' common layout when the shape is unchanged, else None.
"""

from __future__ import annotations

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.math import (
    FLOAT_ONLY_UNARY,
    NUMERIC_UNARY,
    Binary,
    BinaryKind,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.typeinfer.common import (
    broadcast_shapes,
    elementwise_layout,
    with_partials,
)
from tilefoundry.semantics.typeinfer.commutation import FIX as PARTIAL_FIX
from tilefoundry.semantics.typeinfer.commutation import check_partials
from tilefoundry.semantics.typeinfer.core import (
    Ctx,
    register_typeinfer,
    same_dtype,
    tensor_operand,
)
from tilefoundry.semantics.types import StorageKind, TensorType

__all__ = [
    "ARITHMETIC_KINDS",
    "FLOAT_ONLY_UNARY",
    "NUMERIC_UNARY",
    "infer_binary",
    "infer_unary",
    "reject_type_level_only",
    "result_storage",
]

#: Binary kinds that compute numbers: bool operands are rejected.
ARITHMETIC_KINDS = frozenset({BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL, BinaryKind.DIV,
                              BinaryKind.MIN, BinaryKind.MAX})
#: FLOAT_ONLY_UNARY / NUMERIC_UNARY: the Unary dtype facts, stated in ops/math.py (D420).

CAST_F32_FIX = "insert an explicit cast to f32 first (f4e2m1 is a type-level-only dtype)"


def reject_type_level_only(ctx: Ctx, t: TensorType, operand: int | str) -> None:
    """Reject arithmetic on a dtype that exists only at the type level (f4e2m1)."""
    if not t.dtype.info.evaluable:
        ctx.error(f"dtype {t.dtype} exists at the type level only: no {ctx.name} is defined on "
                  f"it (only Cast accepts it)", operand=operand,
                  rule="type-level-only dtype", fix=CAST_F32_FIX)


def result_storage(types: list[TensorType]) -> StorageKind:
    """The most local concrete storage among ``types`` (rmem < smem < gmem); unmaterialized only
    when every operand is."""
    concrete = [t.storage for t in types if t.storage is not StorageKind.UNMATERIALIZED]
    if not concrete:
        return StorageKind.UNMATERIALIZED
    return min(concrete, key=lambda s: s.level)


def _reject_disjoint_partials(ctx: Ctx, lhs: TensorType, rhs: TensorType) -> None:
    pl = set(lhs.shard.partials) if lhs.shard is not None else set()
    pr = set(rhs.shard.partials) if rhs.shard is not None else set()
    if pl and pr and pl != pr:
        names = lhs.shard.mesh.axis_names  # type: ignore[union-attr]
        ctx.error(f"both operands carry Partial states but on different mesh axes (lhs on "
                  f"{sorted(names[a] for a in pl)}, rhs on {sorted(names[a] for a in pr)}); "
                  f"Partial states on different axes are not interchangeable", operand="rhs",
                  rule=f"Partial commutation (Binary, {ctx.op.kind.value}): disjoint Partial "
                       f"axes", fix=PARTIAL_FIX)


@register_typeinfer(Binary)
def infer_binary(ctx: Ctx, types: tuple) -> TensorType:
    """HIR Binary: same dtype, torch broadcasting, per-kind dtype rules, Partial table."""
    lhs = tensor_operand(ctx, types[0], 0)
    rhs = tensor_operand(ctx, types[1], 1)
    dt = same_dtype(ctx, [lhs, rhs], [0, 1])
    kind: BinaryKind = ctx.op.kind
    reject_type_level_only(ctx, lhs, 0)
    if kind.is_boolean and dt is not DType.BOOL:
        ctx.error(f"{kind.value} is a boolean kind and needs bool operands, got {dt}",
                  operand=0, rule="boolean kinds take bool",
                  fix="insert an explicit cast to bool (or compare with cmp_ne against zero)")
    if kind in ARITHMETIC_KINDS and dt is DType.BOOL:
        ctx.error(f"{kind.value} is arithmetic and does not take bool operands", operand=0,
                  rule="arithmetic kinds reject bool",
                  fix="insert an explicit cast to an integer or float dtype")
    if kind is BinaryKind.DIV and not dt.is_float:
        ctx.error(f"div is true division (torch semantics) and dtypes do not promote, so it "
                  f"needs a float dtype, got {dt}", operand=0, rule="div takes floats",
                  fix="insert an explicit cast to a float dtype")
    shape = broadcast_shapes(ctx, [lhs.shape, rhs.shape], [0, 1])
    partials = check_partials(ctx, (lhs, rhs), kind=kind.value)
    _reject_disjoint_partials(ctx, lhs, rhs)
    layout = elementwise_layout(ctx, [lhs, rhs], shape, partials)
    out_dt = DType.BOOL if kind.is_comparison else dt
    return TensorType(shape, out_dt, layout, result_storage([lhs, rhs]))


@register_typeinfer(Unary)
def infer_unary(ctx: Ctx, types: tuple) -> TensorType:
    """HIR Unary: per-kind dtype rules, Partial table; shape, layout and storage preserved."""
    x = tensor_operand(ctx, types[0], 0)
    kind: UnaryKind = ctx.op.kind
    reject_type_level_only(ctx, x, 0)
    dt = x.dtype
    if kind is UnaryKind.LOGICAL_NOT:
        if dt is not DType.BOOL:
            ctx.error(f"logical_not needs a bool operand, got {dt}", operand=0,
                      rule="logical_not takes bool",
                      fix="insert an explicit cast to bool (or compare with cmp_eq against zero)")
    elif kind in FLOAT_ONLY_UNARY:
        if not dt.is_float:
            ctx.error(f"{kind.value} is defined on float dtypes only, got {dt}", operand=0,
                      rule=f"{kind.value} takes floats",
                      fix="insert an explicit cast to a float dtype (e.g. f32)")
    elif kind in NUMERIC_UNARY:
        if dt is DType.BOOL:
            ctx.error(f"{kind.value} is numeric and does not take bool", operand=0,
                      rule=f"{kind.value} rejects bool",
                      fix="insert an explicit cast to an integer or float dtype")
    else:  # pragma: no cover - every UnaryKind is classified above
        ctx.error(f"unary kind {kind.value} has no typing rule", operand=0, rule="Unary kinds")
    partials = check_partials(ctx, (x,), kind=kind.value)
    layout = with_partials(x.shard, partials) if x.shard is not None else x.layout
    return TensorType(x.shape, dt, layout, x.storage)
