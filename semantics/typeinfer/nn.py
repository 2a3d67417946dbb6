"""Type rules of ir/hir/nn: MatMul, Conv2D, the activations, SoftMax, LayerNorm, RMSNorm, RoPE.

Every rule consults the Partial commutation table (``commutation.check_partials``) with the
op's operand names, so the table alone decides which Partial states propagate. Decisions the HIR
spec leaves open (recorded in docs/decisions.md):

* **Dtypes.** No promotion: every value input of an op shares one dtype (fix: an explicit cast).
  MatMul accepts float and integer dtypes (the reference accumulates integers in i64 and wraps,
  docs/decisions.md D39) but not bool. Conv2D, the activations, SoftMax, LayerNorm, RMSNorm and
  RoPE take float dtypes only (torch has no integer conv / normalization kernels, and the
  activations are transcendental or defined as float ops). f4e2m1 is type-level only and is
  rejected everywhere here with the fix "cast to f32 first".
* **MatMul shapes** follow torch.matmul for rank >= 2: ``a [..., M, K] @ b [..., K, N]`` gives
  ``broadcast(a[..., :-2], b[..., :-2]) + [M, N]``; K must match (symbolic K only against an
  identical dim). **Rank-1 operands are rejected** (fix: Reshape to ``[1, K]`` / ``[K, 1]``): the
  reference ``matmul`` and the lowering take ``[..., M, K] x [..., K, N]``, and torch's
  rank-dropping 1-D rules would make a sharded result layout depend on removed axes.
* **MatMul sharding.** Per mesh axis: both operands replicated → Broadcast; one Partial(sum) with
  the other operand *replicated* on that axis → Partial(sum) (the table; a Split on the other
  operand is rejected); a Split of a's M axis (b replicated) or b's N axis (a replicated) → the
  same Split on the result; a Split of a batch axis carries through when the other operand is
  split identically on its batch axis or has no / a size-1 batch axis there; a Split of both
  operands' K axis at the same layout position (same K refinement) → Partial(sum) on the result
  (each device holds a partial contraction). Everything else fails closed with the Reshard fix.
  A sharded result gets the layout positions of its source axes with shared-engine C-order
  strides; a plain result has layout None.
* **Conv2D.** x is NCHW, weight OIHW with ``C == weight.C * groups`` and ``O % groups == 0``;
  bias is required (pass zeros for none) and is rank-1 of length O. Output
  ``H_out = (H + 2·pad - dil·(kH-1) - 1) // stride + 1`` (torch). The kernel extents kH, kW must be
  static; N, C, H, W may be symbolic: H_out / W_out are then dim expressions and their
  positivity is checked at evaluation (statically when H / W are static). With ``groups > 1``
  the channel counts must be static. Sharding: Partial(sum) on x only with weight and bias
  replicated (the table); a Split of x's batch axis (weight, bias replicated) or of weight's O
  axis together with bias split identically (x replicated, groups == 1) carries to the result;
  anything else (a split channel / spatial axis) fails closed. Result storage is x's.
* **Activations** (ReLU / Sigmoid / Tanh / Gelu / Silu): elementwise; the output is x's type with
  the Partial states the table lets through (ReLU / Sigmoid / Tanh: max / min).
* **SoftMax** needs rank >= 1 and an axis in ``[-rank, rank)``; **LayerNorm / RMSNorm** normalize
  the last axis; weight (and LayerNorm's bias) are rank-1 with the last axis's length (a DimVar /
  dim expression matches only an identical one). The normalized axis MUST stay inside one op
  instance, so a Split of x on that axis is rejected, and the affine inputs must be replicated
  (a Split of weight / bias is rejected). Any Partial is rejected by the table. Output: x's type.
* **RoPE** (rotate-half). Contract: ``q [..., S, D]`` and ``k [..., S, D]`` (leading axes free and
  independent — GQA heads may differ), D static, even and positive; ``cos_cache`` and
  ``sin_cache`` are ``[P, D]`` (the HF full-width caches, ``cat(freqs, freqs)``), P any extent;
  ``pos_ids`` is a rank-1 integer tensor ``[S]`` shared by q and k (out-of-range positions are an
  evaluation error). q, k and both caches share one float dtype. The result is
  ``TupleType((q_type, k_type))``: each branch keeps its own input's shape, dtype, storage and
  layout, including that input's own Partial states. A Split of q / k on the S or D axis and
  any Split of a cache / pos_ids is rejected (the rotation pairs ``x[i], x[i + D/2]`` and indexes
  the caches by the full position vector); splits of leading axes carry through.
"""

from __future__ import annotations

from typing import NoReturn

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.nn import (
    ACTIVATIONS,
    Conv2D,
    LayerNorm,
    MatMul,
    RMSNorm,
    RoPE,
    SoftMax,
)
from tilefoundry.semantics.typeinfer.common import broadcast_shapes, dims_equal, with_partials
from tilefoundry.semantics.typeinfer.commutation import FIX as PARTIAL_FIX
from tilefoundry.semantics.typeinfer.commutation import check_partials
from tilefoundry.semantics.typeinfer.core import (
    Ctx,
    register_typeinfer,
    same_dtype,
    tensor_operand,
)
from tilefoundry.semantics.typeinfer.math import reject_type_level_only, result_storage
from tilefoundry.semantics.types import (
    Broadcast,
    DimAdd,
    DimFloorDiv,
    DimSub,
    Layout,
    Partial,
    ShapeDim,
    ShardLayout,
    Split,
    TensorType,
    TupleType,
    c_order,
    dim_str,
    simplify,
)

__all__ = [
    "infer_activation",
    "infer_conv2d",
    "infer_layernorm",
    "infer_matmul",
    "infer_rmsnorm",
    "infer_rope",
    "infer_softmax",
]

SPLIT_FIX = PARTIAL_FIX  # the same remedy: Reshard the offending operand to Broadcast


# =============================================================================================
# helpers
# =============================================================================================
def _tensors(ctx: Ctx, types: tuple) -> list[TensorType]:
    return [tensor_operand(ctx, t, i) for i, t in enumerate(types)]


def _require_float(ctx: Ctx, t: TensorType, operand: int) -> None:
    reject_type_level_only(ctx, t, operand)
    if not t.dtype.is_float:
        ctx.error(f"{ctx.name} is defined on float dtypes only, got {t.dtype}", operand=operand,
                  rule=f"{ctx.name} takes floats",
                  fix="insert an explicit cast to a float dtype (e.g. f32)")


def _shape_str(shape: tuple) -> str:
    return "[" + ", ".join(dim_str(d) for d in shape) + "]"


def _axis_of(layout: Layout, position: int) -> tuple[int, int]:
    """(tensor axis, index of the position within that axis) of a flat layout position."""
    axis = layout.axis_of_position[position]
    first = layout.axis_of_position.index(axis)
    return axis, position - first


def _axis_offsets(entries: list) -> list[int]:
    out, acc = [], 0
    for e in entries:
        out.append(acc)
        acc += len(e) if isinstance(e, tuple) else 1
    return out


def _entry_len(e: object) -> int:
    return len(e) if isinstance(e, tuple) else 1


def _is_replicated(t: TensorType, ax: int) -> bool:
    return t.shard is None or isinstance(t.shard.attrs[ax], Broadcast)


def _reject_splits(ctx: Ctx, t: TensorType, operand: int, axes: set[int] | None,
                   why: str) -> None:
    """Reject a Split of ``t`` on any layout position of ``axes`` (None: every axis)."""
    s = t.shard
    if s is None:
        return
    for ax, a in enumerate(s.attrs):
        if isinstance(a, Split):
            axis, _ = _axis_of(s.layout, a.position)
            if axes is None or axis in axes:
                ctx.error(f"Split({a.position}) on mesh axis {s.mesh.axis_names[ax]} partitions "
                          f"tensor axis {axis}; {why}", operand=operand,
                          rule=f"{ctx.name} sharding", fix=SPLIT_FIX)


def _need_replicated_with_partial(ctx: Ctx, ts: list[TensorType], partials: dict[int, str],
                                  ) -> None:
    """The table's patterns assume every non-Partial value operand is replicated on that axis:
    reject a Split there."""
    for ax in partials:
        for i, t in enumerate(ts):
            if t.shard is not None and isinstance(t.shard.attrs[ax], Split):
                ctx.error(f"mesh axis {t.shard.mesh.axis_names[ax]} carries a Partial on another "
                          f"operand, so this operand must be replicated there, but it is split",
                          operand=i, rule=f"{ctx.name}: Partial needs replicated co-operands",
                          fix=SPLIT_FIX)


def _sharded_layout(ctx: Ctx, mesh, attrs: list, entries: list) -> ShardLayout:
    """A ShardLayout over ``entries`` (one per tensor axis) with shared-engine C-order strides."""
    for o, e in enumerate(entries):
        if not isinstance(e, int | tuple):
            ctx.error(f"the sharded result needs a static extent on axis {o}, got {dim_str(e)}",
                      rule=f"{ctx.name} sharded result",
                      fix="specialize the symbolic extent (shape dispatch) or Reshard the "
                          "operands to Broadcast")
    lay = Layout(tuple(entries))
    lay = lay.with_flat_strides(c_order(lay.positions))
    return ShardLayout(mesh, tuple(attrs), lay)


# =============================================================================================
# MatMul
# =============================================================================================
@register_typeinfer(MatMul)
def infer_matmul(ctx: Ctx, types: tuple) -> TensorType:
    """torch.matmul for rank >= 2 operands with batch broadcasting; one Partial(sum) per axis."""
    a, b = _tensors(ctx, types)
    dt = same_dtype(ctx, [a, b], [0, 1])
    reject_type_level_only(ctx, a, 0)
    if dt is DType.BOOL:
        ctx.error("MatMul does not take bool operands", operand=0, rule="MatMul dtypes",
                  fix="insert an explicit cast to an integer or float dtype")
    if dt is DType.F8E8M0:
        ctx.error("MatMul does not take f8e8m0 operands: a scale format has no zero to "
                  "accumulate from and no sign (D137)", operand=0, rule="MatMul dtypes",
                  fix="insert an explicit cast to f32 (or bf16) first")
    for i, t in ((0, a), (1, b)):
        if t.rank < 2:
            ctx.error(f"operands are [..., M, K] and [..., K, N] (rank >= 2); got rank "
                      f"{t.rank} shape {_shape_str(t.shape)}", operand=i,
                      rule="MatMul operand rank",
                      fix="Reshape the rank-1 operand to [1, K] (a) or [K, 1] (b)")
    if not dims_equal(a.shape[-1], b.shape[-2]):
        ctx.error(f"contraction lengths differ: a {_shape_str(a.shape)} has K = "
                  f"{dim_str(a.shape[-1])}, b {_shape_str(b.shape)} has K = "
                  f"{dim_str(b.shape[-2])}", operand=1, rule="MatMul contraction length",
                  fix="transpose or slice the operands so a's last axis matches b's "
                      "second-to-last")
    batch = broadcast_shapes(ctx, [a.shape[:-2], b.shape[:-2]], [0, 1])
    out_shape = (*batch, a.shape[-2], b.shape[-1])
    partials = check_partials(ctx, (a, b))
    layout = None
    if a.shard is not None or b.shard is not None:
        layout = _matmul_layout(ctx, a, b, out_shape, partials)
    return TensorType(out_shape, dt, layout, result_storage([a, b]))


def _matmul_layout(ctx: Ctx, a: TensorType, b: TensorType, out_shape: tuple,
                   partials: dict[int, str]) -> ShardLayout:
    ts = (a, b)
    mesh = (a.shard or b.shard).mesh  # type: ignore[union-attr]
    nb = len(out_shape) - 2
    # role of every operand axis: ("out", output axis) | ("K", None) | ("bcast", output axis)
    roles: list[dict[int, tuple[str, int | None]]] = []
    for idx, t in enumerate(ts):
        r: dict[int, tuple[str, int | None]] = {}
        off = nb - (t.rank - 2)
        for k in range(t.rank - 2):
            full = dims_equal(t.shape[k], out_shape[k + off])
            r[k] = ("out" if full else "bcast", k + off)
        r[t.rank - 2] = ("out", nb) if idx == 0 else ("K", None)
        r[t.rank - 1] = ("K", None) if idx == 0 else ("out", nb + 1)
        roles.append(r)
    # layout entry of every output axis: from the first sharded operand that supplies it
    entries: list = []
    for o in range(len(out_shape)):
        entry = None
        for t, r in zip(ts, roles, strict=True):
            if t.shard is None:
                continue
            k = next((k for k, (role, oo) in r.items() if role == "out" and oo == o), None)
            if k is not None:
                entry = t.shard.layout.shape[k]
                break
        entries.append(entry if entry is not None else out_shape[o])
    offsets = _axis_offsets(entries)
    attrs: list = []
    for ax, axis_name in enumerate(mesh.axis_names):
        if ax in partials:
            _need_replicated_with_partial(ctx, [a, b], {ax: partials[ax]})
            attrs.append(Partial(partials[ax]))
            continue
        splits = []
        for idx, t in enumerate(ts):
            if t.shard is not None and isinstance(t.shard.attrs[ax], Split):
                pos = t.shard.attrs[ax].position
                k, within = _axis_of(t.shard.layout, pos)
                splits.append((idx, k, within, roles[idx][k]))
        if not splits:
            attrs.append(Broadcast())
            continue

        def fail(idx: int, why: str, axis_name: str = axis_name) -> NoReturn:
            ctx.error(f"Split on mesh axis {axis_name}: {why}", operand=idx,
                      rule="MatMul sharding (fails closed)", fix=SPLIT_FIX)

        def entry_of(idx: int, k: int):
            return ts[idx].shard.layout.shape[k]  # type: ignore[union-attr]

        if len(splits) == 1:
            idx, k, within, (role, o) = splits[0]
            other = 1 - idx
            if role == "K":
                fail(idx, f"the contraction axis of {ctx.operand_name(idx)} is split but "
                          f"{ctx.operand_name(other)} is not split identically on its "
                          f"contraction axis")
            if role == "bcast":
                fail(idx, f"axis {k} of {ctx.operand_name(idx)} is broadcast against the other "
                          f"operand; a split of it has no result position")
            if o is not None and o < nb:  # a batch axis: the other operand must not supply it
                ko = o - (nb - (ts[other].rank - 2))
                if ko >= 0 and dims_equal(ts[other].shape[ko], out_shape[o]) and \
                        not dims_equal(out_shape[o], 1):
                    fail(other, f"{ctx.operand_name(idx)} splits batch axis {k} but "
                                f"{ctx.operand_name(other)} holds that batch axis whole; split "
                                f"it identically or Reshard")
            if entries[o] != entry_of(idx, k):  # type: ignore[index]
                fail(idx, f"the split axis {k} of {ctx.operand_name(idx)} has a layout "
                          f"refinement the result does not take")
            attrs.append(Split(offsets[o] + within))  # type: ignore[index]
            continue
        (ia, ka, wa, (ra, oa)), (ib, kb, wb, (rb, ob)) = splits
        same = wa == wb and entry_of(ia, ka) == entry_of(ib, kb)
        if ra == "K" and rb == "K" and same:
            attrs.append(Partial("sum"))  # each device holds a partial contraction
        elif ra == rb == "out" and oa == ob and oa is not None and oa < nb and same \
                and entries[oa] == entry_of(ia, ka):
            attrs.append(Split(offsets[oa] + wa))
        else:
            fail(1, "both operands are split on it but not on the same batch axis or the same "
                    "contraction position (a's M with b's N would leave each device only a "
                    "diagonal block)")
    return _sharded_layout(ctx, mesh, attrs, entries)


# =============================================================================================
# Conv2D
# =============================================================================================
def _conv_out(ctx: Ctx, size: ShapeDim, k: int, stride: int, pad: int, dil: int,
              what: str) -> ShapeDim:
    eff = dil * (k - 1) + 1
    if isinstance(size, int):
        if size + 2 * pad < eff:
            ctx.error(f"the padded input {what} = {size} + 2*{pad} is smaller than the dilated "
                      f"kernel extent {eff}", operand=0, rule="Conv2D output size",
                      fix="increase padding or use a smaller kernel / dilation")
        return (size + 2 * pad - eff) // stride + 1
    c = 2 * pad - eff
    num: ShapeDim = DimAdd(size, c) if c >= 0 else DimSub(size, -c)
    return simplify(DimAdd(DimFloorDiv(simplify(num), stride), 1))


@register_typeinfer(Conv2D)
def infer_conv2d(ctx: Ctx, types: tuple) -> TensorType:
    """NCHW input, OIHW weight with groups, rank-1 bias of C_out; torch output size."""
    x, w, bias = _tensors(ctx, types)
    op: Conv2D = ctx.op
    same_dtype(ctx, [x, w, bias], [0, 1, 2])
    _require_float(ctx, x, 0)
    if x.dtype is DType.F8E8M0:
        ctx.error("Conv2D does not take f8e8m0 operands: a scale format has no zero to "
                  "accumulate from (padding is zero) and no sign (D137)", operand=0,
                  rule="Conv2D dtypes", fix="insert an explicit cast to f32 (or bf16) first")
    for i, t, rank, form in ((0, x, 4, "NCHW [N, C, H, W]"), (1, w, 4, "OIHW [O, C/groups, kH, kW]"),
                             (2, bias, 1, "[O]")):
        if t.rank != rank:
            ctx.error(f"expected a rank-{rank} {form} tensor, got shape {_shape_str(t.shape)}",
                      operand=i, rule="Conv2D operand ranks",
                      fix="Reshape the operand to the documented layout")
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    g = op.groups
    for name, kd in (("kH", kh), ("kW", kw)):
        if not isinstance(kd, int) or kd < 1:
            ctx.error(f"the kernel extent {name} must be a static positive int, got "
                      f"{dim_str(kd)}", operand=1, rule="Conv2D static kernel",
                      fix="specialize the kernel size (shape dispatch)")
    if g == 1:
        if not dims_equal(c, cg):
            ctx.error(f"input channels C = {dim_str(c)} differ from weight's C/groups = "
                      f"{dim_str(cg)} (groups = 1)", operand=1, rule="Conv2D channels",
                      fix="transpose or slice so x's axis 1 matches weight's axis 1")
    else:
        for i, name, d in ((0, "C", c), (1, "C/groups", cg), (1, "O", o)):
            if not isinstance(d, int):
                ctx.error(f"with groups = {g} the channel count {name} must be static, got "
                          f"{dim_str(d)}", operand=i, rule="Conv2D grouped channels",
                          fix="specialize the channel count (shape dispatch)")
        if c != cg * g:  # type: ignore[operator]
            ctx.error(f"input channels C = {c} must equal weight's C/groups ({cg}) * groups "
                      f"({g})", operand=1, rule="Conv2D channels",
                      fix="use a weight of shape [O, C // groups, kH, kW]")
        if o % g:  # type: ignore[operator]
            ctx.error(f"output channels O = {o} must be divisible by groups = {g}", operand=1,
                      rule="Conv2D grouped channels", fix="use O a multiple of groups")
    if not dims_equal(bias.shape[0], o):
        ctx.error(f"bias has length {dim_str(bias.shape[0])} but the weight has O = "
                  f"{dim_str(o)} output channels", operand=2, rule="Conv2D bias length",
                  fix="pass a rank-1 bias of length O (zeros for no bias)")
    ho = _conv_out(ctx, h, kh, op.stride[0], op.padding[0], op.dilation[0], "H")
    wo = _conv_out(ctx, wd, kw, op.stride[1], op.padding[1], op.dilation[1], "W")
    out_shape = (n, o, ho, wo)
    partials = check_partials(ctx, (x, w, bias))
    layout = None
    if any(t.shard is not None for t in (x, w, bias)):
        layout = _conv_layout(ctx, x, w, bias, out_shape, partials)
    return TensorType(out_shape, x.dtype, layout, x.storage)


def _conv_layout(ctx: Ctx, x: TensorType, w: TensorType, bias: TensorType, out_shape: tuple,
                 partials: dict[int, str]) -> ShardLayout:
    ts = [x, w, bias]
    mesh = next(t.shard.mesh for t in ts if t.shard is not None)
    entries: list = [x.shard.layout.shape[0] if x.shard is not None else out_shape[0],
                     w.shard.layout.shape[0] if w.shard is not None else
                     (bias.shard.layout.shape[0] if bias.shard is not None else out_shape[1]),
                     out_shape[2], out_shape[3]]
    offsets = _axis_offsets(entries)
    attrs: list = []
    for ax, axis_name in enumerate(mesh.axis_names):
        if ax in partials:
            _need_replicated_with_partial(ctx, ts, {ax: partials[ax]})
            attrs.append(Partial(partials[ax]))
            continue
        splits = {i: t.shard.attrs[ax].position for i, t in enumerate(ts)
                  if t.shard is not None and isinstance(t.shard.attrs[ax], Split)}
        if not splits:
            attrs.append(Broadcast())
            continue

        def fail(i: int, why: str, axis_name: str = axis_name) -> NoReturn:
            ctx.error(f"Split on mesh axis {axis_name}: {why}", operand=i,
                      rule="Conv2D sharding (fails closed)", fix=SPLIT_FIX)

        if set(splits) == {0}:
            k, within = _axis_of(x.shard.layout, splits[0])  # type: ignore[union-attr]
            if k != 0:
                fail(0, f"x is split on axis {k}; only the batch axis N of x may be split "
                        f"(a channel split needs a reduction, a spatial split a halo)")
            attrs.append(Split(offsets[0] + within))
        elif set(splits) == {1, 2}:
            kw_, ww = _axis_of(w.shard.layout, splits[1])  # type: ignore[union-attr]
            _, wb = _axis_of(bias.shard.layout, splits[2])  # type: ignore[union-attr]
            if kw_ != 0:
                fail(1, f"weight is split on axis {kw_}; only its output-channel axis O may be "
                        f"split")
            if ctx.op.groups != 1:
                fail(1, "an output-channel split needs groups == 1")
            if ww != wb or w.shard.layout.shape[0] != bias.shard.layout.shape[0]:  # type: ignore
                fail(2, "bias must be split exactly like weight's output-channel axis")
            attrs.append(Split(offsets[1] + ww))
        else:
            fail(max(splits),
                 "supported splits are x's batch axis alone, or weight's O axis together with "
                 "bias (x replicated)")
    return _sharded_layout(ctx, mesh, attrs, entries)


# =============================================================================================
# elementwise activations
# =============================================================================================
def infer_activation(ctx: Ctx, types: tuple) -> TensorType:
    """ReLU / Sigmoid / Tanh / Gelu / Silu: float elementwise; x's type, table-decided Partials."""
    (x,) = _tensors(ctx, types)
    _require_float(ctx, x, 0)
    partials = check_partials(ctx, (x,))
    layout = with_partials(x.shard, partials) if x.shard is not None else x.layout
    return TensorType(x.shape, x.dtype, layout, x.storage)


for _cls in ACTIVATIONS:  # the elementwise activations (ops/nn.py), one rule for all
    register_typeinfer(_cls)(infer_activation)


# =============================================================================================
# normalizations
# =============================================================================================
@register_typeinfer(SoftMax)
def infer_softmax(ctx: Ctx, types: tuple) -> TensorType:
    """Softmax over ``axis`` (in range, float); no Partial; the axis stays unsplit."""
    (x,) = _tensors(ctx, types)
    _require_float(ctx, x, 0)
    axis = ctx.op.axis
    if not -x.rank <= axis < x.rank:
        ctx.error(f"axis {axis} is out of range for x of rank {x.rank} (allowed "
                  f"[{-x.rank}, {x.rank}))", operand=0, rule="SoftMax axis range",
                  fix="pick an axis of x" if x.rank else "Reshape x to rank >= 1")
    ax = axis % x.rank
    check_partials(ctx, (x,))
    _reject_splits(ctx, x, 0, {ax}, "the normalized axis must stay inside one op instance")
    return TensorType(x.shape, x.dtype, x.layout, x.storage)


def _norm(ctx: Ctx, types: tuple, affine: tuple[int, ...]) -> TensorType:
    ts = _tensors(ctx, types)
    x = ts[0]
    same_dtype(ctx, ts, list(range(len(ts))))
    _require_float(ctx, x, 0)
    if x.rank < 1:
        ctx.error("x must have rank >= 1 (the last axis is normalized)", operand=0,
                  rule=f"{ctx.name} rank", fix="Reshape x to rank >= 1")
    last = x.shape[-1]
    for i in affine:
        t = ts[i]
        if t.rank != 1 or not dims_equal(t.shape[0], last):
            ctx.error(f"{ctx.operand_name(i)} must be rank-1 with x's last-axis length "
                      f"{dim_str(last)}, got shape {_shape_str(t.shape)} (x is "
                      f"{_shape_str(x.shape)})", operand=i,
                      rule=f"{ctx.name} affine shape",
                      fix=f"pass a rank-1 {ctx.operand_name(i)} of length {dim_str(last)}")
    check_partials(ctx, tuple(ts))
    _reject_splits(ctx, x, 0, {x.rank - 1},
                   "the normalized last axis must stay inside one op instance")
    for i in affine:
        _reject_splits(ctx, ts[i], i, None, "the affine inputs must be replicated")
    return TensorType(x.shape, x.dtype, x.layout, x.storage)


@register_typeinfer(LayerNorm)
def infer_layernorm(ctx: Ctx, types: tuple) -> TensorType:
    """LayerNorm over the last axis; weight and bias rank-1 of that length; no Partial."""
    return _norm(ctx, types, (1, 2))


@register_typeinfer(RMSNorm)
def infer_rmsnorm(ctx: Ctx, types: tuple) -> TensorType:
    """RMSNorm over the last axis; weight rank-1 of that length; every other axis flows."""
    return _norm(ctx, types, (1,))


# =============================================================================================
# RoPE
# =============================================================================================
@register_typeinfer(RoPE)
def infer_rope(ctx: Ctx, types: tuple) -> TupleType:
    """Rotate-half RoPE: q, k [..., S, D]; caches [P, D]; pos_ids int [S]; (q_type, k_type)."""
    q, k, cos, sin, pos = _tensors(ctx, types)
    same_dtype(ctx, [q, k, cos, sin], [0, 1, 2, 3])
    _require_float(ctx, q, 0)
    for i, t in ((0, q), (1, k)):
        if t.rank < 2:
            ctx.error(f"expected [..., S, D] (rank >= 2), got shape {_shape_str(t.shape)}",
                      operand=i, rule="RoPE q / k rank", fix="Reshape to [..., S, D]")
    d = q.shape[-1]
    if not isinstance(d, int) or d <= 0 or d % 2:
        ctx.error(f"the rotated axis D = {dim_str(d)} must be a static, positive, even extent "
                  f"(rotate-half pairs x[i] with x[i + D/2])", operand=0,
                  rule="RoPE head dim", fix="specialize D (shape dispatch) to an even extent")
    if not dims_equal(k.shape[-1], d):
        ctx.error(f"k's last axis {dim_str(k.shape[-1])} differs from q's D = {d}", operand=1,
                  rule="RoPE head dim", fix="q and k must share the head dim D")
    s = q.shape[-2]
    if not dims_equal(k.shape[-2], s):
        ctx.error(f"k's sequence axis {dim_str(k.shape[-2])} differs from q's S = {dim_str(s)}; "
                  f"both are rotated by the same pos_ids", operand=1, rule="RoPE sequence axis",
                  fix="apply RoPE to q and k of the same sequence length")
    for i, t in ((2, cos), (3, sin)):
        if t.rank != 2 or not dims_equal(t.shape[1], d):
            ctx.error(f"expected a [P, D] cache with D = {d}, got shape {_shape_str(t.shape)}",
                      operand=i, rule="RoPE cache shape",
                      fix="pass the full-width cache cat(freqs, freqs) of shape [P, D]")
    if not dims_equal(cos.shape[0], sin.shape[0]):
        ctx.error(f"sin_cache has {dim_str(sin.shape[0])} positions, cos_cache "
                  f"{dim_str(cos.shape[0])}", operand=3, rule="RoPE cache shape",
                  fix="pass cos / sin caches of the same shape")
    if not pos.dtype.is_int:
        ctx.error(f"pos_ids must have an integer dtype, got {pos.dtype}", operand=4,
                  rule="RoPE pos_ids dtype", fix="insert an explicit cast to i32")
    if pos.rank != 1 or not dims_equal(pos.shape[0], s):
        ctx.error(f"pos_ids must be rank-1 [S] with S = {dim_str(s)}, got shape "
                  f"{_shape_str(pos.shape)}", operand=4, rule="RoPE pos_ids shape",
                  fix="pass one position per sequence element")
    partials = check_partials(ctx, (q, k, cos, sin, pos))
    for i, t in ((0, q), (1, k)):
        _reject_splits(ctx, t, i, {t.rank - 2, t.rank - 1},
                       "the sequence and rotated axes must stay whole (positions index the "
                       "caches, rotate-half pairs x[i] with x[i + D/2])")
    for i, t in ((2, cos), (3, sin), (4, pos)):
        _reject_splits(ctx, t, i, None, "caches and pos_ids must be replicated")

    def branch(t: TensorType) -> TensorType:
        if t.shard is None:
            return t
        own = {ax: r for ax, r in partials.items() if ax in t.shard.partials}
        return TensorType(t.shape, t.dtype, with_partials(t.shard, own), t.storage)

    return TupleType((branch(q), branch(k)))
