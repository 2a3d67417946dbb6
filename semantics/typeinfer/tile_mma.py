"""Type rule of the tile-family ``Mma`` (an extension of the HIR catalog).

``mma(a, b, acc)``: ``a [*B, M, K]``, ``b [*B, K, N]``, ``acc [*B, M, N]`` → ``[*B, M, N]`` in
acc's dtype. The Tile design's roles ("Batch dimensions occur in all three operands, contraction
dimensions occur in A and B but not C, and the two free dimension sets are checked against C")
are positional here (D226): the operation never broadcasts or guesses. MUST / MUST NOT:

* every operand MUST have rank >= 2 and the three batch shapes MUST be identical;
* a's K MUST equal b's K, a's M MUST equal acc's M, b's N MUST equal acc's N;
* a and b MUST share one float input dtype: f32, f16, bf16, fp8e4m3 or fp8e5m2 (integers: use
  MatMul; f8e8m0 has no zero and no sign; f4e2m1 is type-level only);
* acc MUST be f32 (D225): the reference converts the inputs to the accumulator exactly and
  accumulates in it; an f16 / bf16 / fp8 accumulator would reduce precision, which MMA never
  does silently (fix: accumulate in f32 and Cast the result);
* Partial: only Partial(sum) on exactly {a, acc} or {b, acc} commutes (the table); any Split is
  rejected (fails closed, Reshard fix). A Broadcast-only operand gives a Broadcast result.
"""

from __future__ import annotations

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_mma import Mma
from tilefoundry.semantics.typeinfer.common import dims_equal
from tilefoundry.semantics.typeinfer.commutation import FIX, check_partials
from tilefoundry.semantics.typeinfer.core import Ctx, register_typeinfer, tensor_operand
from tilefoundry.semantics.typeinfer.math import reject_type_level_only, result_storage
from tilefoundry.semantics.typeinfer.tensor import _static_extent
from tilefoundry.semantics.types import (
    Broadcast,
    Layout,
    Partial,
    ShardLayout,
    Split,
    TensorType,
    c_order,
    dim_str,
)

__all__ = ["MMA_INPUT_DTYPES", "infer_mma"]

#: the input dtypes an Mma takes (with an f32 accumulator)
MMA_INPUT_DTYPES = (DType.F32, DType.F16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2)


def _shp(shape) -> str:
    return "(" + ", ".join(dim_str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


@register_typeinfer(Mma)
def infer_mma(ctx: Ctx, types: tuple) -> TensorType:
    a, b, acc = (tensor_operand(ctx, t, i) for i, t in enumerate(types))
    for i, t in enumerate((a, b, acc)):
        reject_type_level_only(ctx, t, i)
        if t.rank < 2:
            ctx.error(f"{ctx.operand_name(i)} has rank {t.rank} (shape {_shp(t.shape)}); mma "
                      f"takes a [*B, M, K], b [*B, K, N], acc [*B, M, N]", operand=i,
                      rule="Mma: every operand MUST have rank >= 2",
                      fix="Reshape the operand to rank 2 ([1, K] / [K, 1] for a vector)")
    if a.dtype is not b.dtype:
        ctx.error(f"a is {a.dtype} but b is {b.dtype}", operand=1,
                  rule="Mma: a and b MUST share one input dtype",
                  fix=f"Cast b to {a.dtype} (exactly representable widenings only)")
    if a.dtype not in MMA_INPUT_DTYPES:
        names = ", ".join(d.value for d in MMA_INPUT_DTYPES)
        ctx.error(f"input dtype {a.dtype} is not an Mma input dtype ({names})", operand=0,
                  rule="Mma: inputs MUST be f32, f16, bf16, fp8e4m3 or fp8e5m2",
                  fix="use MatMul for integer operands; Cast f8e8m0 operands to f32 first")
    if acc.dtype is not DType.F32:
        from tilefoundry.semantics.typeinfer.tile_mma_acc import check_narrow_acc

        check_narrow_acc(ctx, acc)
    batch = [tuple(t.shape[:-2]) for t in (a, b, acc)]
    for i in (0, 1):
        if len(batch[i]) != len(batch[2]) or not all(
                dims_equal(x, y) for x, y in zip(batch[i], batch[2], strict=True)):
            ctx.error(f"{ctx.operand_name(i)}'s batch dims {_shp(batch[i])} differ from acc's "
                      f"{_shp(batch[2])}; mma never broadcasts a batch", operand=i,
                      rule="Mma: the batch dims of a, b and acc MUST be identical",
                      fix="Reshape / Concat the operand to acc's batch shape explicitly")
    checks = ((1, a.shape[-1], b.shape[-2], "K", "a's last axis", "b's second-to-last"),
              (2, a.shape[-2], acc.shape[-2], "M", "a's second-to-last", "acc's second-to-last"),
              (2, b.shape[-1], acc.shape[-1], "N", "b's last axis", "acc's last axis"))
    for i, x, y, role, wx, wy in checks:
        if not dims_equal(x, y):
            ctx.error(f"{role} differs: {wx} is {dim_str(x)} but {wy} is {dim_str(y)} (a "
                      f"{_shp(a.shape)}, b {_shp(b.shape)}, acc {_shp(acc.shape)})", operand=i,
                      rule=f"Mma: the {role} extents MUST agree",
                      fix="transpose or slice the operands so the roles line up")
    partials = check_partials(ctx, (a, b, acc))
    layout = None
    sharded = [(i, t) for i, t in enumerate((a, b, acc)) if t.shard is not None]
    if sharded:
        mesh = sharded[0][1].shard.mesh
        for i, t in sharded:
            for ax, at in enumerate(t.shard.attrs):
                if isinstance(at, Split):
                    ctx.error(f"{ctx.operand_name(i)} is Split on mesh axis "
                              f"{mesh.axis_names[ax]}; Mma's sharding rule carries only "
                              f"replicated operands and Partial(sum) on {{a, acc}} or "
                              f"{{b, acc}}", operand=i, rule="Mma sharding (fails closed)",
                              fix=FIX)
        shape = tuple(_static_extent(ctx, d, "acc's extent (the result layout)", 2)
                      for d in acc.shape)
        attrs = tuple(Partial(partials[ax]) if ax in partials else Broadcast()
                      for ax in range(len(mesh.axis_names)))
        lay = Layout(shape)
        layout = ShardLayout(mesh, attrs, lay.with_flat_strides(c_order(lay.positions)))
    return TensorType(tuple(acc.shape), acc.dtype, layout, result_storage([a, b, acc]))
