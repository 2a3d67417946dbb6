"""Type rules of ir/hir/nn: accept and reject cases quoting the HIR spec, and hypothesis
properties against torch.nn.functional's result shapes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import tilefoundry.semantics.typeinfer.nn  # noqa: F401  (registers the nn rules)
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, TupleGetItem, Var
from tilefoundry.semantics.ops import (
    Conv2D,
    Gelu,
    LayerNorm,
    MatMul,
    ReLU,
    RMSNorm,
    RoPE,
    Sigmoid,
    Silu,
    SoftMax,
    Tanh,
)
from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
from tilefoundry.semantics.types import (
    Broadcast,
    DimVar,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    StorageKind,
    TensorType,
    TupleType,
    c_order,
)

F32, F16, BF16, I32, BOOL = DType.F32, DType.F16, DType.BF16, DType.I32, DType.BOOL
MESH = Mesh("device", ("x",), (2,))
MESH2 = Mesh("device", ("x", "y"), (2, 2))
N = DimVar("N", 1, 64)
S = DimVar("S", 1, 4096)
ACTIVATIONS = [ReLU(), Sigmoid(), Tanh(), Gelu(), Gelu("none"), Silu()]
TORCH_DT = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16, I32: torch.int32}


def T(*shape, dt: DType = F32, layout=None, storage=StorageKind.GMEM) -> TensorType:
    return TensorType(tuple(shape), dt, layout, storage)


def sl(shape, *attrs, mesh=MESH) -> ShardLayout:
    return ShardLayout(mesh, tuple(attrs), Layout(tuple(shape)))


def TS(shape, *attrs, dt: DType = F32, mesh=MESH) -> TensorType:
    """A sharded tensor of a static shape."""
    return T(*shape, dt=dt, layout=sl(shape, *attrs, mesh=mesh))


def infer(op, *types):
    return infer_expr(Call(op, tuple(Var(f"v{i}", t) for i, t in enumerate(types))))


def reject(op, *types) -> TypeInferError:
    with pytest.raises(TypeInferError) as ei:
        infer(op, *types)
    return ei.value


def natural(shape) -> Layout:
    return Layout(tuple(shape)).with_flat_strides(c_order(tuple(shape)))


PARTIAL = "Partial(reduction) propagates to the output only when the op provably commutes"


# =============================================================================================
# MatMul
# =============================================================================================
def test_matmul_shapes_accept():
    """HIR nn: "Consensus torch.nn.functional ops." — torch.matmul shapes for rank >= 2 with
    batch broadcasting, symbolic M / N flowing through."""
    assert infer(MatMul(), T(4, 8), T(8, 3)) == T(4, 3)
    assert infer(MatMul(), T(2, 1, 4, 8), T(5, 8, 3)).shape == (2, 5, 4, 3)
    assert infer(MatMul(), T(S, 8), T(8, N)).shape == (S, N)
    assert infer(MatMul(), T(4, S), T(S, 2)).shape == (4, 2)
    assert infer(MatMul(), T(4, 8, dt=I32), T(8, 3, dt=I32)).dtype is I32


def test_matmul_rejects_shape_errors():
    """HIR nn: "Consensus torch.nn.functional ops." — torch.matmul's K mismatch and
    non-broadcastable batches are rejected, naming the operand."""
    e = reject(MatMul(), T(4, 8), T(7, 3))
    assert e.operand == "b" and "contraction" in str(e)
    e = reject(MatMul(), T(4, S), T(N, 3))
    assert e.operand == "b"
    e = reject(MatMul(), T(2, 4, 8), T(3, 8, 5))
    assert "broadcast" in str(e)


def test_matmul_rank1_rejected():
    """HIR nn: "Consensus torch.nn.functional ops." — decided: rank-1 operands (torch's
    rank-dropping 1-D cases) are rejected with a Reshape fix; operands are [..., M, K] and
    [..., K, N]."""
    e = reject(MatMul(), T(8), T(8, 3))
    assert e.operand == "a" and "Reshape" in str(e)
    e = reject(MatMul(), T(4, 8), T(8))
    assert e.operand == "b" and "Reshape" in str(e)


def test_matmul_dtype_rules():
    """HIR Binary (shared by every value op): "dtypes do not promote" — MatMul operands share a
    dtype; bool and f4e2m1 are rejected with a cast fix."""
    e = reject(MatMul(), T(4, 8), T(8, 3, dt=F16))
    assert e.operand == "b" and "insert an explicit cast" in str(e)
    e = reject(MatMul(), T(4, 8, dt=BOOL), T(8, 3, dt=BOOL))
    assert e.operand == "a" and "cast" in str(e)
    e = reject(MatMul(), T(4, 8, dt=DType.F4E2M1), T(8, 3, dt=DType.F4E2M1))
    assert "f32" in str(e)


def test_matmul_storage_most_local():
    """semantic-analysis (missing; decided here): "output storage of multi-input ops" — MatMul
    takes the most local operand storage."""
    r = infer(MatMul(), T(4, 8, storage=StorageKind.SMEM), T(8, 3, storage=StorageKind.RMEM))
    assert r.storage is StorageKind.RMEM


@pytest.mark.parametrize("side", [0, 1])
def test_matmul_one_partial_sum_passes(side):
    """HIR nn: "MatMul is linear in one value input when the other value-carrying input is
    Broadcast / replicated. On each mesh axis, one Partial(sum) is therefore allowed" """
    a, b = T(4, 8, layout=sl((4, 8), Broadcast())), T(8, 6)
    if side == 0:
        a = TS((4, 8), Partial("sum"))
    else:
        b = TS((8, 6), Partial("sum"))
    r = infer(MatMul(), a, b)
    assert r.shape == (4, 6) and r.layout.attrs == (Partial("sum"),)
    assert r.layout.layout == natural((4, 6))


@pytest.mark.parametrize("red", ["max", "min"])
def test_matmul_non_sum_partial_rejects(red):
    """HIR nn: "a double-Partial input or a non-sum reduction is rejected." (non-sum)"""
    e = reject(MatMul(), TS((4, 8), Partial(red)), T(8, 6))
    assert e.operand == "a" and "Reshard" in str(e)


def test_matmul_double_partial_rejects():
    """HIR nn: "a double-Partial input or a non-sum reduction is rejected." (double)"""
    e = reject(MatMul(), TS((4, 8), Partial("sum")), TS((8, 6), Partial("sum")))
    assert "Reshard" in str(e) and e.operand == "a"


def test_matmul_partial_with_split_other_rejects():
    """HIR nn: "MatMul is linear in one value input when the other value-carrying input is
    Broadcast / replicated." — a Partial(sum) next to a *split* other operand is rejected."""
    e = reject(MatMul(), TS((4, 8), Partial("sum")), TS((8, 6), Split(1)))
    assert e.operand == "b" and "Reshard" in str(e)


def test_matmul_splits_carry():
    """HIR: "each op's registered typeinfer owns the layout / mesh compatibility and result
    layout it requires" — M split of a, N split of b and a shared batch split carry to the
    result; a K split on both gives Partial(sum)."""
    r = infer(MatMul(), TS((4, 8), Split(0)), T(8, 6))
    assert r.layout.attrs == (Split(0),) and r.layout.layout == natural((4, 6))
    r = infer(MatMul(), T(4, 8), TS((8, 6), Split(1)))
    assert r.layout.attrs == (Split(1),)
    r = infer(MatMul(), TS((2, 4, 8), Split(0)), TS((2, 8, 6), Split(0)))
    assert r.layout.attrs == (Split(0),) and r.shape == (2, 4, 6)
    r = infer(MatMul(), TS((2, 4, 8), Split(0)), T(8, 6))
    assert r.layout.attrs == (Split(0),)
    r = infer(MatMul(), TS((4, 8), Split(1)), TS((8, 6), Split(0)))
    assert r.layout.attrs == (Partial("sum"),)
    two = ShardLayout(MESH2, (Split(0), Partial("sum")), Layout((4, 8)))
    r = infer(MatMul(), T(4, 8, layout=two), T(8, 6))
    assert r.layout.attrs == (Split(0), Partial("sum"))


def test_matmul_split_refinement_carries():
    """HIR: "each op's registered typeinfer owns ... result layout" — a cyclic split (inner
    layout position of a refined M axis) keeps its position in the result."""
    a = T(4, 8, layout=ShardLayout(MESH, (Split(1),), Layout(((2, 2), 8))))
    r = infer(MatMul(), a, T(8, 6))
    assert r.layout.layout.shape == ((2, 2), 6) and r.layout.attrs == (Split(1),)


def test_matmul_unsupported_splits_fail_closed():
    """HIR Reshape (the project's fail-closed rule for layouts): "A reshape not expressible by
    the above MUST fail closed rather than fabricate a layout." — MatMul splits without a
    derivable result layout are rejected with a Reshard fix."""
    e = reject(MatMul(), TS((4, 8), Split(1)), T(8, 6))  # K split on one side only
    assert e.operand == "a" and "Reshard" in str(e)
    e = reject(MatMul(), TS((4, 8), Split(0)), TS((8, 6), Split(1)))  # M with N
    assert "Reshard" in str(e)
    e = reject(MatMul(), TS((2, 4, 8), Split(0)), T(2, 8, 6))  # b holds the batch whole
    assert e.operand == "b" and "Reshard" in str(e)
    other = Mesh("cta", ("x",), (2,))
    e = reject(MatMul(), TS((4, 8), Split(0)), TS((8, 6), Broadcast(), mesh=other))
    assert e.operand == "b" and "Reshard" in str(e)


# =============================================================================================
# Conv2D
# =============================================================================================
def test_conv2d_shapes_accept():
    """HIR nn: "Consensus torch.nn.functional ops." — conv2d output size, groups, symbolic N and
    H."""
    r = infer(Conv2D(), T(2, 3, 8, 8), T(4, 3, 3, 3), T(4))
    assert r == T(2, 4, 6, 6)
    r = infer(Conv2D(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=3),
              T(1, 6, 7, 9), T(3, 2, 3, 3), T(3))
    ref = F.conv2d(torch.zeros(1, 6, 7, 9), torch.zeros(3, 2, 3, 3), torch.zeros(3), (2, 1),
                   (1, 0), (1, 2), 3)
    assert r.shape == tuple(ref.shape)
    H = DimVar("H", 3, 512)
    r = infer(Conv2D(stride=(2, 2), padding=(1, 1)), T(N, 3, H, 9), T(8, 3, 3, 3), T(8))
    assert r.shape[0] == N and r.shape[1] == 8 and r.shape[3] == 5
    from tilefoundry.semantics.types import evaluate_dim

    assert evaluate_dim(r.shape[2], {"H": 9}) == 5 and evaluate_dim(r.shape[2], {"H": 10}) == 5


def test_conv2d_rejects():
    """HIR nn: "Consensus torch.nn.functional ops." — NCHW x, OIHW weight, rank-1 bias of
    C_out, channels matching groups, kernel within the padded input; each reject names the
    operand."""
    e = reject(Conv2D(), T(3, 8, 8), T(4, 3, 3, 3), T(4))
    assert e.operand == "x"
    e = reject(Conv2D(), T(2, 3, 8, 8), T(4, 3, 3), T(4))
    assert e.operand == "weight"
    e = reject(Conv2D(), T(2, 3, 8, 8), T(4, 3, 3, 3), T(5))
    assert e.operand == "bias"
    e = reject(Conv2D(), T(2, 3, 8, 8), T(4, 3, 3, 3), T(1, 4))
    assert e.operand == "bias"
    e = reject(Conv2D(), T(2, 3, 8, 8), T(4, 2, 3, 3), T(4))
    assert e.operand == "weight" and "channels" in str(e)
    e = reject(Conv2D(groups=2), T(2, 4, 8, 8), T(3, 2, 3, 3), T(3))
    assert e.operand == "weight" and "divisible" in str(e)
    e = reject(Conv2D(), T(2, 3, 2, 8), T(4, 3, 3, 3), T(4))
    assert e.operand == "x" and "kernel" in str(e)
    e = reject(Conv2D(), T(2, 3, 8, 8), T(4, 3, N, 3), T(4))
    assert e.operand == "weight" and "static" in str(e)
    e = reject(Conv2D(), T(2, 3, 8, 8, dt=I32), T(4, 3, 3, 3, dt=I32), T(4, dt=I32))
    assert e.operand == "x" and "float" in str(e)
    e = reject(Conv2D(), T(2, 3, 8, 8), T(4, 3, 3, 3, dt=F16), T(4))
    assert e.operand == "weight" and "insert an explicit cast" in str(e)


def test_conv2d_partial_on_input_with_replicated_bias_rejects():
    """HIR nn: "A Partial(sum) on input is preserved only when the other value inputs are
    replicated." — deliberately NOT followed (docs/decisions.md D58): the replicated bias would
    be added once per device, conv(Σx, w) + b != Σ(conv(x_d, w) + b); the smt obligation
    `commutation.nn` refutes the row (2 devices, x pieces -1, weight (-1, -1), bias -1)."""
    x = TS((2, 3, 8, 8), Partial("sum"))
    e = reject(Conv2D(), x, T(4, 3, 3, 3, layout=sl((4, 3, 3, 3), Broadcast())), T(4))
    assert e.operand == "x" and "added once per device" in str(e) and "Reshard" in str(e)


def test_conv2d_partial_on_input_with_split_weight_rejects():
    """HIR nn: "A Partial(sum) on input is preserved only when the other value inputs are
    replicated." (reject)"""
    e = reject(Conv2D(), TS((2, 3, 8, 8), Partial("sum")), TS((4, 3, 3, 3), Split(0)),
               TS((4,), Split(0)))
    # the Partial(sum) on x is rejected by its row whatever the others hold (decision D58)
    assert e.operand == "x" and "Reshard" in str(e)


@pytest.mark.parametrize("which", [1, 2])
def test_conv2d_secondary_partial_rejects(which):
    """HIR nn: "A secondary Partial on weight or bias is rejected when the result layout cannot
    preserve that state." """
    ts = [T(2, 3, 8, 8), T(4, 3, 3, 3), T(4)]
    ts[which] = TS(ts[which].shape, Partial("sum"))
    e = reject(Conv2D(), *ts)
    assert e.operand == ("weight", "bias")[which - 1] and "Reshard" in str(e)


@pytest.mark.parametrize("red", ["max", "min"])
def test_conv2d_non_sum_partial_rejects(red):
    """HIR nn: "Conv2D applies the same per-axis multilinear constraint to input, weight, and
    bias." — only Partial(sum) on x is linear."""
    e = reject(Conv2D(), TS((2, 3, 8, 8), Partial(red)), T(4, 3, 3, 3), T(4))
    assert e.operand == "x" and "Reshard" in str(e)


def test_conv2d_splits():
    """HIR: "each op's registered typeinfer owns the layout / mesh compatibility and result
    layout it requires" — a batch split of x or an O split of weight with bias carries; a
    channel / spatial split fails closed."""
    r = infer(Conv2D(), TS((2, 3, 8, 8), Split(0)), T(4, 3, 3, 3), T(4))
    assert r.layout.attrs == (Split(0),) and r.layout.layout == natural((2, 4, 6, 6))
    r = infer(Conv2D(), T(2, 3, 8, 8), TS((4, 3, 3, 3), Split(0)), TS((4,), Split(0)))
    assert r.layout.attrs == (Split(1),)
    e = reject(Conv2D(), TS((2, 4, 8, 8), Split(1)), T(4, 4, 3, 3), T(4))
    assert e.operand == "x" and "Reshard" in str(e)
    e = reject(Conv2D(), TS((2, 3, 8, 8), Split(2)), T(4, 3, 3, 3), T(4))
    assert e.operand == "x"
    e = reject(Conv2D(), T(2, 3, 8, 8), TS((4, 3, 3, 3), Split(0)), T(4))
    assert e.operand == "weight" and "Reshard" in str(e)


# =============================================================================================
# activations
# =============================================================================================
@pytest.mark.parametrize("op", [ReLU(), Sigmoid(), Tanh()])
def test_monotone_activations_commute_with_max_min(op):
    """HIR nn: "ReLU / Sigmoid / Tanh are monotone non-decreasing elementwise, so they commute
    with max / min but not sum." """
    for red in ("max", "min"):
        x = TS((4, 8), Partial(red))
        assert infer(op, x) == x
    e = reject(op, TS((4, 8), Partial("sum")))
    assert e.operand == "x" and "Reshard" in str(e)


@pytest.mark.parametrize("op", [Gelu(), Gelu("none"), Silu()])
@pytest.mark.parametrize("red", ["sum", "max", "min"])
def test_gelu_silu_reject_any_partial(op, red):
    """HIR Gelu / Silu: "typeinfer rejects any Partial operand with a Reshard remedy." """
    e = reject(op, TS((4, 8), Partial(red)))
    assert e.operand == "x" and "Reshard" in str(e) and "not monotone" in str(e)


@pytest.mark.parametrize("op", ACTIVATIONS)
def test_activation_output_is_x(op):
    """HIR Gelu / Silu: "Elementwise: the output type, shape, and layout are x's." """
    for x in (T(N, 3, dt=BF16, storage=StorageKind.RMEM), TS((4, 8), Split(1), dt=F16), T()):
        assert infer(op, x) == x


@pytest.mark.parametrize("op", ACTIVATIONS)
def test_activation_rejects_non_float(op):
    """HIR nn: "Neural-network value Ops following torch semantics (torch.nn.functional)." —
    decided: the activations take float dtypes (cast fix); f4e2m1 is type-level only."""
    for dt in (I32, BOOL, DType.F4E2M1):
        e = reject(op, T(3, dt=dt))
        assert e.operand == "x" and "cast" in str(e)


# =============================================================================================
# SoftMax / LayerNorm / RMSNorm
# =============================================================================================
def test_softmax_accepts_and_rejects_axis():
    """HIR nn: "Consensus torch.nn.functional ops." — softmax over an axis in [-rank, rank);
    an out-of-range axis is rejected naming x."""
    assert infer(SoftMax(axis=0), T(3, N)) == T(3, N)
    assert infer(SoftMax(axis=-2), T(3, N)) == T(3, N)
    for axis in (2, -3):
        e = reject(SoftMax(axis=axis), T(3, N))
        assert e.operand == "x" and "out of range" in str(e)
    e = reject(SoftMax(), T())
    assert e.operand == "x"
    e = reject(SoftMax(), T(3, dt=I32))
    assert e.operand == "x" and "float" in str(e)


@pytest.mark.parametrize("red", ["sum", "max", "min"])
def test_softmax_rejects_any_partial(red):
    """HIR nn: "SoftMax / LayerNorm normalize across an axis ..., so no reduction provably
    commutes; typeinfer rejects any Partial operand" (SoftMax)"""
    e = reject(SoftMax(), TS((4, 8), Partial(red)))
    assert e.operand == "x" and "Reshard" in str(e)


def test_softmax_split_axis():
    """HIR RMSNorm (same normalization argument): "the reduced axis MUST stay inside a single op
    instance" — a Split of the softmax axis is rejected; a Split of another axis carries."""
    x = TS((4, 8), Split(0))
    assert infer(SoftMax(axis=-1), x) == x
    e = reject(SoftMax(axis=0), x)
    assert e.operand == "x" and "Reshard" in str(e)


def test_layernorm_accepts():
    """HIR LayerNorm (consensus, torch.nn.functional.layer_norm over the last axis): "weight and
    bias are rank-1 of that length" (ops/nn.py) — accepted with DimVar last axis too."""
    assert infer(LayerNorm(), T(2, S, 16), T(16), T(16)) == T(2, S, 16)
    assert infer(LayerNorm(), T(2, N), T(N), T(N)) == T(2, N)


@pytest.mark.parametrize("which", [1, 2])
def test_layernorm_affine_shape_rejects(which):
    """HIR LayerNorm (consensus torch op): weight and bias must be rank-1 of the normalized
    length; a wrong rank or length is rejected naming the operand."""
    for bad in (T(2, 16), T(15), T(N)):
        ts = [T(2, 16), T(16), T(16)]
        ts[which] = bad
        e = reject(LayerNorm(), *ts)
        assert e.operand == ("weight", "bias")[which - 1]


@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("red", ["sum", "max", "min"])
def test_layernorm_rejects_any_partial(which, red):
    """HIR nn: "typeinfer rejects any Partial operand, including secondary affine inputs."
    (LayerNorm)"""
    ts = [T(4, 8), T(8), T(8)]
    ts[which] = TS(ts[which].shape, Partial(red))
    e = reject(LayerNorm(), *ts)
    assert e.operand == ("x", "weight", "bias")[which] and "Reshard" in str(e)


def test_rmsnorm_weight_contract():
    """HIR RMSNorm: "weight MUST be rank-1 with the same length as x's last axis; every other x
    axis, including a dynamic (DimVar / dim-arithmetic) entry, flows through unchanged." """
    x = T(N, S // 2 + 1, 64, dt=BF16, storage=StorageKind.SMEM)
    assert infer(RMSNorm(), x, T(64, dt=BF16)) == x
    D = DimVar("D", 1, 1024)
    assert infer(RMSNorm(), T(2, D), T(D)) == T(2, D)
    for w in (T(1, 64, dt=BF16), T(63, dt=BF16), T(dt=BF16), T(D, dt=BF16)):
        e = reject(RMSNorm(), x, w)
        assert e.operand == "weight" and "rank-1" in str(e)
    e = reject(RMSNorm(), T(2, D), T(DimVar("E", 1, 1024)))
    assert e.operand == "weight"
    e = reject(RMSNorm(), T(2, 64), T(64, dt=F16))
    assert e.operand == "weight" and "insert an explicit cast" in str(e)


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("red", ["sum", "max", "min"])
def test_rmsnorm_rejects_any_partial(which, red):
    """HIR RMSNorm: "no mesh-axis reduction provably commutes; typeinfer rejects any Partial
    operand." """
    ts = [T(4, 8), T(8)]
    ts[which] = TS(ts[which].shape, Partial(red))
    e = reject(RMSNorm(), *ts)
    assert e.operand == ("x", "weight")[which] and "Reshard" in str(e)


def test_rmsnorm_reduced_axis_single_instance():
    """HIR RMSNorm: "the reduced axis MUST stay inside a single op instance" — a Split of x's
    last axis (or of weight) is rejected; a Split of a leading axis flows through."""
    x = TS((4, 8), Split(0))
    assert infer(RMSNorm(), x, T(8)) == x
    e = reject(RMSNorm(), TS((4, 8), Split(1)), T(8))
    assert e.operand == "x" and "Reshard" in str(e)
    e = reject(RMSNorm(), T(4, 8), TS((8,), Split(0)))
    assert e.operand == "weight" and "Reshard" in str(e)
    e = reject(LayerNorm(), TS((4, 8), Split(1)), T(8), T(8))
    assert e.operand == "x"


# =============================================================================================
# RoPE
# =============================================================================================
def rope_args(q=None, k=None, cos=None, sin=None, pos=None):
    return (q or T(2, 4, 6, 8), k or T(2, 2, 6, 8), cos or T(16, 8), sin or T(16, 8),
            pos or T(6, dt=I32))


def test_rope_result_tuple():
    """HIR RoPE: "The result is (q_rope, k_rope) and each branch preserves the layout of its
    corresponding q or k input." """
    q, k, *rest = rope_args(q=T(2, 4, S, 8, dt=BF16, storage=StorageKind.RMEM),
                            k=T(2, 2, S, 8, dt=BF16),
                            cos=T(16, 8, dt=BF16), sin=T(16, 8, dt=BF16), pos=T(S, dt=DType.I64))
    assert infer(RoPE(), q, k, *rest) == TupleType((q, k))
    q = TS((2, 4, 6, 8), Split(1))
    k = TS((2, 2, 6, 8), Broadcast())
    r = infer(RoPE(), *rope_args(q=q, k=k))
    assert r == TupleType((q, k))
    call = Call(RoPE(), tuple(Var(f"v{i}", t) for i, t in enumerate(rope_args(q=q, k=k))))
    assert infer_expr(TupleGetItem(call, 1)) == k


def test_rope_shape_contract_rejects():
    """HIR RoPE: "The rotation is the rotate-half form: the last axis splits in two halves and
    the pair (x[i], x[i + d/2]) rotates together." — D must be static and even; caches [P, D];
    pos_ids int [S]; q / k share S and D."""
    cases = [
        (dict(q=T(2, 4, 6, 7), k=T(2, 2, 6, 7), cos=T(16, 7), sin=T(16, 7)), "q"),
        (dict(q=T(2, 4, 6, N), k=T(2, 2, 6, N), cos=T(16, N), sin=T(16, N)), "q"),
        (dict(q=T(8)), "q"),
        (dict(k=T(2, 2, 6, 4)), "k"),
        (dict(k=T(2, 2, 5, 8)), "k"),
        (dict(cos=T(16, 4)), "cos_cache"),
        (dict(sin=T(16, 8, 1)), "sin_cache"),
        (dict(sin=T(15, 8)), "sin_cache"),
        (dict(pos=T(6, dt=F32)), "pos_ids"),
        (dict(pos=T(5, dt=I32)), "pos_ids"),
        (dict(pos=T(1, 6, dt=I32)), "pos_ids"),
        (dict(k=T(2, 2, 6, 8, dt=F16)), "k"),
        (dict(cos=T(16, 8, dt=F16)), "cos_cache"),
    ]
    for kw, operand in cases:
        e = reject(RoPE(), *rope_args(**kw))
        assert e.operand == operand, (kw, str(e))
    e = reject(RoPE(), *rope_args(q=T(2, 4, 6, 8, dt=I32), k=T(2, 2, 6, 8, dt=I32),
                                  cos=T(16, 8, dt=I32), sin=T(16, 8, dt=I32)))
    assert e.operand == "q" and "float" in str(e)


@pytest.mark.parametrize("which", [0, 1])
def test_rope_branch_keeps_its_partial_sum(which):
    """HIR RoPE: "On each mesh axis, a branch MAY preserve one Partial(sum) on its corresponding
    query or key input only when cos_cache, sin_cache, and pos_ids are Broadcast / replicated on
    that axis." (accept; the other branch stays replicated)"""
    args = list(rope_args())
    args[which] = TS(args[which].shape, Partial("sum"))
    args[2] = TS((16, 8), Broadcast())
    r = infer(RoPE(), *args)
    assert r.fields[which].layout.attrs == (Partial("sum"),)
    assert r.fields[1 - which] == args[1 - which]


def test_rope_partials_on_different_axes_each_branch_own():
    """HIR RoPE: "each branch preserves the layout of its corresponding q or k input." — q's
    Partial on axis x and k's on axis y stay on their own branch."""
    q = T(2, 4, 6, 8, layout=ShardLayout(MESH2, (Partial("sum"), Broadcast()),
                                          Layout((2, 4, 6, 8))))
    k = T(2, 2, 6, 8, layout=ShardLayout(MESH2, (Broadcast(), Partial("sum")),
                                          Layout((2, 2, 6, 8))))
    r = infer(RoPE(), *rope_args(q=q, k=k))
    assert r.fields[0] == q and r.fields[1] == k


@pytest.mark.parametrize("red", ["max", "min"])
def test_rope_non_sum_partial_rejects(red):
    """HIR RoPE: "A non-sum Partial ... MUST be rejected with a Reshard remedy." """
    e = reject(RoPE(), *rope_args(q=TS((2, 4, 6, 8), Partial(red))))
    assert e.operand == "q" and "Reshard" in str(e)


def test_rope_multiple_partials_rejects():
    """HIR RoPE: "multiple value-carrying Partials ... MUST be rejected with a Reshard remedy." """
    e = reject(RoPE(), *rope_args(q=TS((2, 4, 6, 8), Partial("sum")),
                                  k=TS((2, 2, 6, 8), Partial("sum"))))
    assert e.operand == "q" and "Reshard" in str(e)


@pytest.mark.parametrize("which", [2, 3, 4])
def test_rope_secondary_partial_rejects(which):
    """HIR RoPE: "a Partial on a secondary cache/index input MUST be rejected with a Reshard
    remedy." — also when q carries an otherwise allowed Partial(sum)."""
    args = list(rope_args())
    args[which] = TS(args[which].shape, Partial("sum"), dt=args[which].dtype)
    e = reject(RoPE(), *args)
    assert e.operand == ("cos_cache", "sin_cache", "pos_ids")[which - 2] and "Reshard" in str(e)
    args[0] = TS((2, 4, 6, 8), Partial("sum"))
    e = reject(RoPE(), *args)
    assert "Reshard" in str(e)


def test_rope_partial_with_split_cache_rejects():
    """HIR RoPE: "a branch MAY preserve one Partial(sum) ... only when cos_cache, sin_cache, and
    pos_ids are Broadcast / replicated on that axis." (reject: a split cache)"""
    e = reject(RoPE(), *rope_args(q=TS((2, 4, 6, 8), Partial("sum")), cos=TS((16, 8), Split(0))))
    assert e.operand == "cos_cache" and "Reshard" in str(e)


def test_rope_split_sequence_or_head_dim_rejects():
    """HIR RoPE: "the pair (x[i], x[i + d/2]) rotates together" — a Split of D (or of S, which
    indexes the caches through pos_ids) fails closed with a Reshard fix."""
    for pos in (2, 3):
        e = reject(RoPE(), *rope_args(q=TS((2, 4, 6, 8), Split(pos))))
        assert e.operand == "q" and "Reshard" in str(e)


# =============================================================================================
# hypothesis: well-typed applications match torch; corrupted ones raise TypeInferError
# =============================================================================================
def _randn(shape, dt=F32):
    return torch.randn(tuple(shape)).to(TORCH_DT[dt])


@st.composite
def matmul_shapes(draw):
    batch = draw(st.lists(st.integers(1, 3), max_size=3))
    m, k, n = draw(st.integers(0, 4)), draw(st.integers(0, 4)), draw(st.integers(0, 4))

    def side():
        drop = draw(st.integers(0, len(batch)))
        return [1 if draw(st.booleans()) and draw(st.booleans()) else d for d in batch[drop:]]

    return (*side(), m, k), (*side(), k, n)


@given(shapes=matmul_shapes(), dt=st.sampled_from([F32, F16, BF16, I32]))
def test_hyp_matmul_matches_torch(shapes, dt):
    """HIR nn: "Consensus torch.nn.functional ops." — random well-typed MatMuls (batch
    broadcasting) have torch.matmul's result shape."""
    sa, sb = shapes
    t = infer(MatMul(), T(*sa, dt=dt), T(*sb, dt=dt))
    ref = torch.matmul(_randn(sa), _randn(sb))
    assert t.shape == tuple(ref.shape) and t.dtype is dt


@st.composite
def conv_case(draw):
    g = draw(st.integers(1, 3))
    c, o = g * draw(st.integers(1, 2)), g * draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pad = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = max(1, dil[0] * (kh - 1) + 1 - 2 * pad[0]) + draw(st.integers(0, 5))
    w = max(1, dil[1] * (kw - 1) + 1 - 2 * pad[1]) + draw(st.integers(0, 5))
    n = draw(st.integers(1, 2))
    return Conv2D(stride, pad, dil, g), (n, c, h, w), (o, c // g, kh, kw), (o,)


@given(case=conv_case())
def test_hyp_conv2d_matches_torch(case):
    """HIR nn: "Consensus torch.nn.functional ops." — random well-typed Conv2D applications
    (stride, padding, dilation, groups) have F.conv2d's result shape."""
    op, sx, sw, sb = case
    t = infer(op, T(*sx), T(*sw), T(*sb))
    ref = F.conv2d(_randn(sx), _randn(sw), _randn(sb), op.stride, op.padding, op.dilation,
                   op.groups)
    assert t.shape == tuple(ref.shape)


shapes_1plus = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


@given(shape=shapes_1plus, data=st.data(), dt=st.sampled_from([F32, F16, BF16]))
def test_hyp_softmax_and_norms_match_torch(shape, data, dt):
    """HIR nn: "Consensus torch.nn.functional ops." and HIR RMSNorm: "every other x axis ...
    flows through unchanged" — random SoftMax / LayerNorm / RMSNorm applications have torch's
    result shape."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = _randn(shape)
    assert infer(SoftMax(axis=axis), T(*shape, dt=dt)).shape == tuple(torch.softmax(x, axis).shape)
    d = shape[-1]
    ln = infer(LayerNorm(), T(*shape, dt=dt), T(d, dt=dt), T(d, dt=dt))
    assert ln.shape == tuple(F.layer_norm(x, (d,), _randn((d,)), _randn((d,))).shape)
    rn = infer(RMSNorm(), T(*shape, dt=dt), T(d, dt=dt))
    assert rn.shape == tuple(F.rms_norm(x, (d,), _randn((d,))).shape)


TORCH_ACT = {ReLU: F.relu, Sigmoid: torch.sigmoid, Tanh: torch.tanh, Silu: F.silu,
             Gelu: lambda x: F.gelu(x, approximate="tanh")}


@given(op=st.sampled_from(ACTIVATIONS), shape=st.lists(st.integers(0, 4), max_size=4).map(tuple))
def test_hyp_activations_match_torch(op, shape):
    """HIR Gelu / Silu: "Elementwise: the output type, shape, and layout are x's." — and torch's
    shape."""
    assert infer(op, T(*shape)).shape == tuple(TORCH_ACT[type(op)](_randn(shape)).shape)


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


@given(lead_q=st.lists(st.integers(1, 3), max_size=2), lead_k=st.lists(st.integers(1, 3),
       max_size=2), s=st.integers(1, 5), half=st.integers(1, 4), p=st.integers(1, 8))
def test_hyp_rope_matches_reference(lead_q, lead_k, s, half, p):
    """HIR RoPE: "This is the unqualified HF convention (apply_rotary_pos_emb / rotate_half)" —
    random well-typed RoPE applications have the HF reference's result shapes."""
    d = 2 * half
    qs, ks = (*lead_q, s, d), (*lead_k, s, d)
    r = infer(RoPE(), T(*qs), T(*ks), T(p, d), T(p, d), T(s, dt=I32))
    pos = torch.randint(0, p, (s,))
    cos, sin = _randn((p, d))[pos], _randn((p, d))[pos]
    q, k = _randn(qs), _randn(ks)
    rq, rk = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    assert r.fields[0].shape == tuple(rq.shape) and r.fields[1].shape == tuple(rk.shape)


NN_CORRUPTIONS = ["mm_dtype", "mm_k", "mm_rank1", "mm_batch", "mm_bool", "mm_partial",
                  "conv_channels", "conv_weight_rank", "conv_bias", "conv_int", "conv_kernel",
                  "softmax_axis", "norm_weight", "norm_partial", "act_partial", "act_dtype",
                  "rope_odd", "rope_pos"]


@given(data=st.data(), how=st.sampled_from(NN_CORRUPTIONS))
def test_hyp_corrupted_nn_raises_typeinfer_error(data, how):
    """HIR nn: "typeinfer rejects otherwise, naming the offending operand and the fix" —
    randomly corrupted nn applications (dtype mismatch, wrong shapes or ranks, bad axis, Partial
    on a rejecting op) raise TypeInferError and never another exception type."""
    draw = data.draw
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    red = draw(st.sampled_from(["sum", "max", "min"]))
    if how == "mm_dtype":
        a, b = draw(st.permutations([F32, F16, BF16, I32]))[:2]
        op, ts = MatMul(), [T(m, k, dt=a), T(k, n, dt=b)]
    elif how == "mm_k":
        op, ts = MatMul(), [T(m, k), T(k + draw(st.integers(1, 3)), n)]
    elif how == "mm_rank1":
        op, ts = MatMul(), draw(st.sampled_from([[T(k), T(k, n)], [T(m, k), T(k)], [T(k), T(k)]]))
    elif how == "mm_batch":
        op, ts = MatMul(), [T(2, m, k), T(3, k, n)]
    elif how == "mm_bool":
        op, ts = MatMul(), [T(m, k, dt=BOOL), T(k, n, dt=BOOL)]
    elif how == "mm_partial":
        if red == "sum":  # double Partial(sum)
            ts = [TS((m, k), Partial("sum")), TS((k, n), Partial("sum"))]
        else:
            ts = [TS((m, k), Partial(red)), T(k, n)][::draw(st.sampled_from([1, -1]))]
            if ts[0].shard is None:
                ts = [T(m, k), TS((k, n), Partial(red))]
        op = MatMul()
    elif how == "conv_channels":
        op, ts = Conv2D(), [T(1, m + 1, 5, 5), T(n, m, 3, 3), T(n)]
    elif how == "conv_weight_rank":
        op, ts = Conv2D(), [T(1, m, 5, 5), T(n, m, 3), T(n)]
    elif how == "conv_bias":
        op, ts = Conv2D(), [T(1, m, 5, 5), T(n, m, 3, 3), draw(st.sampled_from([T(n + 1),
                                                                                T(1, n)]))]
    elif how == "conv_int":
        op, ts = Conv2D(), [T(1, m, 5, 5, dt=I32), T(n, m, 3, 3, dt=I32), T(n, dt=I32)]
    elif how == "conv_kernel":
        op, ts = Conv2D(), [T(1, m, 2, 5), T(n, m, 3, 3), T(n)]
    elif how == "softmax_axis":
        axis = draw(st.sampled_from([2, 3, -3, -4]))
        op, ts = SoftMax(axis=axis), [T(m, k)]
    elif how == "norm_weight":
        w = draw(st.sampled_from([T(k + 1), T(1, k), T()]))
        op, ts = draw(st.sampled_from([(RMSNorm(), [T(m, k), w]),
                                       (LayerNorm(), [T(m, k), w, T(k)]),
                                       (LayerNorm(), [T(m, k), T(k), w])]))
    elif how == "norm_partial":
        op = draw(st.sampled_from([RMSNorm(), LayerNorm(), SoftMax()]))
        ts = [TS((m, 4), Partial(red))] + [T(4)] * (len(op.INPUTS) - 1)
    elif how == "act_partial":
        op = draw(st.sampled_from([Gelu(), Silu()] + [ReLU(), Sigmoid(), Tanh()] *
                                  (red == "sum")))
        ts = [TS((m, 4), Partial(red))]
    elif how == "act_dtype":
        op = draw(st.sampled_from(ACTIVATIONS))
        ts = [T(m, dt=draw(st.sampled_from([I32, BOOL, DType.F4E2M1])))]
    elif how == "rope_odd":
        d = 2 * k + 1
        op, ts = RoPE(), [T(2, m, d), T(2, m, d), T(8, d), T(8, d), T(m, dt=I32)]
    else:  # rope_pos
        op, ts = RoPE(), [T(2, m, 8), T(2, m, 8), T(8, 8), T(8, 8),
                          draw(st.sampled_from([T(m, dt=F32), T(m + 1, dt=I32)]))]
    with pytest.raises(TypeInferError):
        infer(op, *ts)
