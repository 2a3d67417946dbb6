"""The kernel-IR interpreter against the reference evaluator, op by op, on hypothesis-drawn
inputs weighted toward special values (NaN, ±inf, ±0, subnormals, max finite, rounding ties).

Where the kernel IR keeps the reference's order (every elementwise op, casts, folds, the
balanced tree of an unlooped reduction, the K-order matmul, the wide row kernels over the last
axis) the interpreter is bit-exact; where a tile loop regroups a tree reduction it is judged
by the oracle under the op's contract (``oracle.compare.check``)."""

from __future__ import annotations

import numpy as np
import pytest
from compiler_helpers import (
    SMALL,
    TARGETS,
    assert_bitexact,
    assert_conforms,
    module_of,
    one_op,
    var,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.conformance.numerics_sweep import modes
from tilefoundry.oracle.strategies import EVALUABLE_DTYPES, FLOAT_DTYPES, arrays
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Constant, GridRegionExpr, Tuple, Var
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    CacheUpdate,
    Cast,
    Concat,
    Conv2D,
    Gather,
    Gelu,
    InsertSlice,
    LayerNorm,
    MatMul,
    Reduce,
    ReduceKind,
    ReLU,
    Reshape,
    RMSNorm,
    RoPE,
    Sigmoid,
    Silu,
    Slice,
    SoftMax,
    Stack,
    Tanh,
    TopK,
    Transpose,
    Unary,
    UnaryKind,
    Zeros,
)
from tilefoundry.semantics.typeinfer import infer_module
from tilefoundry.semantics.types import TensorType

EXAMPLES = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CONFIGS = st.sampled_from([None, SMALL])


def typed(m):
    """Skip draws the type rules reject (the combination is not a program)."""
    try:
        infer_module(m)
    except Exception:
        assume(False)
    return m


_FLOAT_BINARY = [k for k in BinaryKind if not k.is_boolean]
_INT_BINARY = [k for k in BinaryKind if not k.is_boolean and k is not BinaryKind.DIV]
_BOOL_BINARY = [k for k in BinaryKind if k.is_boolean or k.is_comparison]


@pytest.mark.parametrize("target", TARGETS)
@EXAMPLES
@given(st.data())
def test_binary_every_kind_bitexact(target, data):
    dt = data.draw(st.sampled_from(EVALUABLE_DTYPES))
    kinds = _FLOAT_BINARY if dt.is_float else _INT_BINARY if dt.is_int else _BOOL_BINARY
    kind = data.draw(st.sampled_from(kinds))
    rshape = data.draw(st.sampled_from([(3, 5), (1, 5), (5,), (3, 1), ()]))
    a = data.draw(arrays(dt, (3, 5)))
    b = data.draw(arrays(dt, rshape))
    assert_bitexact(typed(one_op(Binary(kind), a, b)), [a, b], cfg=data.draw(CONFIGS), target=target)


@pytest.mark.parametrize("target", TARGETS)
@EXAMPLES
@given(st.data())
def test_unary_every_kind_bitexact(target, data):
    dt = data.draw(st.sampled_from(EVALUABLE_DTYPES))
    if dt is DType.BOOL:
        kinds = [UnaryKind.LOGICAL_NOT]
    elif dt.is_int:
        kinds = [UnaryKind.NEG, UnaryKind.ABS, UnaryKind.CEIL, UnaryKind.ROUND, UnaryKind.RELU,
                 UnaryKind.SQUARE]
    else:
        kinds = [k for k in UnaryKind if k is not UnaryKind.LOGICAL_NOT]
    kind = data.draw(st.sampled_from(kinds))
    x = data.draw(arrays(dt, (4, 6)))
    assert_bitexact(typed(one_op(Unary(kind), x)), [x], cfg=data.draw(CONFIGS), target=target)


@pytest.mark.parametrize("target", TARGETS)
@EXAMPLES
@given(st.data())
def test_cast_every_mode_bitexact(target, data):
    src = data.draw(st.sampled_from(EVALUABLE_DTYPES))
    dst = data.draw(st.sampled_from(EVALUABLE_DTYPES))
    overflow, rounding = data.draw(st.sampled_from(list(modes(dst))))
    x = data.draw(arrays(src, (37,)))
    if src.is_float and dst.is_int:  # float -> int out of range is unspecified
        assert_conforms(typed(one_op(Cast(dst, overflow, rounding), x)), [x], target=target)
    else:
        assert_bitexact(typed(one_op(Cast(dst, overflow, rounding), x)), [x], target=target)


@pytest.mark.parametrize("target", TARGETS)
@EXAMPLES
@given(st.data())
def test_activations_bitexact(target, data):
    op = data.draw(st.sampled_from([ReLU(), Sigmoid(), Tanh(), Silu(), Gelu("tanh"),
                                    Gelu("none")]))
    dt = data.draw(st.sampled_from(FLOAT_DTYPES))
    x = data.draw(arrays(dt, (5, 7)))
    assert_bitexact(typed(one_op(op, x)), [x], cfg=data.draw(CONFIGS), target=target)


@pytest.mark.parametrize("target", TARGETS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_reduce_every_kind_policy_and_axes(target, data):
    dt = data.draw(st.sampled_from(EVALUABLE_DTYPES))
    kind = data.draw(st.sampled_from(list(ReduceKind)))
    policy = data.draw(st.sampled_from(["unordered_tree", "ordered_tree", "fold_left",
                                        "fold_right"]))
    shape = data.draw(st.sampled_from([(3, 10, 4), (2, 1, 19), (5, 3, 2), (1, 33, 1)]))
    axes = tuple(data.draw(st.lists(st.integers(-3, 2), min_size=0, max_size=3, unique_by=lambda
                                    a: a % 3)))
    keepdim = data.draw(st.booleans())
    cfg = data.draw(CONFIGS)
    x = data.draw(arrays(dt, shape))
    m = typed(one_op(Reduce(axes, keepdim, kind, policy), x))
    n = int(np.prod([shape[a % 3] for a in axes])) if axes else 1
    looped = cfg is not None and n > cfg.max_row
    if dt.is_float and kind in (ReduceKind.SUM, ReduceKind.MEAN) and looped and \
            policy in ("unordered_tree", "ordered_tree"):
        assert_conforms(m, [x], cfg=cfg, target=target)  # a tile loop is another tree of the admitted set
    else:
        assert_bitexact(m, [x], cfg=cfg, target=target)


@pytest.mark.parametrize("target", TARGETS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_row_ops_softmax_rmsnorm_layernorm(target, data):
    dt = data.draw(st.sampled_from([DType.F32, DType.BF16, DType.F16, DType.FP8E4M3]))
    which = data.draw(st.sampled_from(["softmax", "rmsnorm", "layernorm"]))
    shape = data.draw(st.sampled_from([(3, 5), (2, 3, 12), (6, 1), (1, 17)]))
    cfg = data.draw(CONFIGS)
    x = data.draw(arrays(dt, shape))
    ins = [x]
    if which == "softmax":
        axis = data.draw(st.integers(-len(shape), len(shape) - 1))
        op = SoftMax(axis)
    else:
        ins.append(data.draw(arrays(dt, shape[-1:])))
        if which == "layernorm":
            ins.append(data.draw(arrays(dt, shape[-1:])))
        op = RMSNorm(1e-6) if which == "rmsnorm" else LayerNorm(1e-5)
    m = typed(one_op(op, *ins))
    last_axis = which != "softmax" or op.axis % len(shape) == len(shape) - 1
    if cfg is None and last_axis:
        assert_bitexact(m, ins, target=target)  # the reference's own f64 algorithm, one rounding
    else:
        assert_conforms(m, ins, cfg=cfg, target=target)


@pytest.mark.parametrize("target", TARGETS)
@EXAMPLES
@given(st.data())
def test_matmul_k_order_bitexact_also_when_k_is_tiled(target, data):
    dt = data.draw(st.sampled_from([DType.F32, DType.BF16, DType.F16, DType.FP8E5M2,
                                    DType.I32, DType.I8]))
    b_, m_, k_, n_ = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 5)),
                      data.draw(st.integers(0, 11)), data.draw(st.integers(1, 4)))
    a = data.draw(arrays(dt, (b_, m_, k_)))
    b = data.draw(arrays(dt, (k_, n_)))
    reassoc = data.draw(st.booleans())
    assert_bitexact(typed(one_op(MatMul(reassoc), a, b)), [a, b], cfg=data.draw(CONFIGS), target=target)


@pytest.mark.parametrize("target", TARGETS)
@EXAMPLES
@given(st.data())
def test_structural_ops_bitexact(target, data):
    dt = data.draw(st.sampled_from(EVALUABLE_DTYPES))
    which = data.draw(st.sampled_from(["transpose", "reshape", "slice", "concat", "stack",
                                       "gather", "insert", "cache", "zeros"]))
    cfg = data.draw(CONFIGS)
    x = data.draw(arrays(dt, (3, 4, 5)))
    if which == "transpose":
        perm = tuple(data.draw(st.permutations([0, 1, -1])))
        m, ins = one_op(Transpose(perm), x), [x]
    elif which == "reshape":
        m, ins = one_op(Reshape(data.draw(st.sampled_from([(12, 5), (60,), (3, 20, 1)]))),
                        x), [x]
    elif which == "slice":
        begin = tuple(data.draw(st.integers(-4, 4)) for _ in range(3))
        end = tuple(data.draw(st.integers(-5, 6)) for _ in range(3))
        steps = tuple(data.draw(st.integers(1, 3)) for _ in range(3))
        m, ins = one_op(Slice(begin, end, steps), x), [x]
    elif which in ("concat", "stack"):
        y = data.draw(arrays(dt, (3, 4, 5)))
        axis = data.draw(st.integers(0, 2))
        m, ins = one_op(Concat(axis) if which == "concat" else Stack(axis), x, y, x), [x, y, x]
    elif which == "gather":
        axis = data.draw(st.integers(0, 2))
        idx = np.asarray(data.draw(st.lists(st.integers(0, x.shape[axis] - 1), min_size=1,
                                            max_size=6)), np.int32).reshape(-1, 1)
        m, ins = one_op(Gather(axis), x, idx), [x, idx]
    elif which == "insert":
        upd = data.draw(arrays(dt, (2, 3, 2)))
        offs = [np.array(data.draw(st.integers(0, n - u)), np.int32)
                for n, u in zip(x.shape, upd.shape, strict=True)]
        m, ins = one_op(InsertSlice(), x, upd, *offs), [x, upd, *offs]
    elif which == "cache":
        cache = data.draw(arrays(dt, (1, 6, 2, 3)))
        new = data.draw(arrays(dt, (1, 3, 2, 3)))
        s = data.draw(st.integers(1, 3))
        cur = data.draw(st.integers(0, 6 - s))
        ins = [cache, np.array(cur, np.int32), np.array(s, np.int32), new]
        m = one_op(CacheUpdate(), *ins)
    else:
        assume(dt is not DType.F8E8M0)  # the format has no zero
        p = var("x", x.shape, dt)
        m, ins = module_of([p], Tuple((Call(Zeros((2, 3), dt), ()), p))), [x]
    assert_bitexact(typed(m), ins, cfg=cfg, target=target)


@pytest.mark.parametrize("target", TARGETS)
@EXAMPLES
@given(st.data())
def test_conv2d_k_order_bitexact(target, data):
    dt = data.draw(st.sampled_from([DType.F32, DType.BF16, DType.F16]))
    groups = data.draw(st.sampled_from([1, 2]))
    c, o = 2 * groups, 2 * groups
    k = data.draw(st.integers(1, 3))
    x = data.draw(arrays(dt, (data.draw(st.integers(1, 2)), c, 5, 4)))
    w = data.draw(arrays(dt, (o, c // groups, k, k)))
    b = data.draw(arrays(dt, (o,)))
    op = Conv2D(tuple(data.draw(st.integers(1, 2)) for _ in range(2)),
                tuple(data.draw(st.integers(0, 2)) for _ in range(2)),
                tuple(data.draw(st.integers(1, 2)) for _ in range(2)), groups)
    assert_bitexact(typed(one_op(op, x, w, b)), [x, w, b], cfg=data.draw(CONFIGS), target=target)


@pytest.mark.parametrize("target", TARGETS)
@EXAMPLES
@given(st.data())
def test_rope_within_its_budget(target, data):
    dt = data.draw(st.sampled_from([DType.F32, DType.BF16, DType.F16]))
    q, k = data.draw(arrays(dt, (2, 3, 6))), data.draw(arrays(dt, (1, 3, 6)))
    cos, sin = data.draw(arrays(dt, (5, 6))), data.draw(arrays(dt, (5, 6)))
    pos = np.asarray(data.draw(st.lists(st.integers(0, 4), min_size=3, max_size=3)), np.int32)
    assert_conforms(typed(one_op(RoPE(), q, k, cos, sin, pos)), [q, k, cos, sin, pos],
                    cfg=data.draw(CONFIGS), target=target)


@pytest.mark.parametrize("target", TARGETS)
@EXAMPLES
@given(st.data())
def test_topk_by_rank_bitexact(target, data):
    dt = data.draw(st.sampled_from(EVALUABLE_DTYPES))
    x = data.draw(arrays(dt, (3, 10)))
    axis = data.draw(st.sampled_from([0, 1, -1]))
    k = data.draw(st.integers(0, x.shape[axis]))
    op = TopK(k, axis, data.draw(st.booleans()), data.draw(st.booleans()))
    assert_bitexact(typed(one_op(op, x)), [x], cfg=data.draw(CONFIGS), target=target)


_CHAIN = [(Binary(BinaryKind.ADD), 2), (Binary(BinaryKind.MUL), 2), (Binary(BinaryKind.SUB), 2),
          (Binary(BinaryKind.DIV), 2), (Binary(BinaryKind.MAX), 2), (Unary(UnaryKind.NEG), 1),
          (Unary(UnaryKind.SQUARE), 1), (Unary(UnaryKind.EXP), 1), (ReLU(), 1), (Silu(), 1),
          (Unary(UnaryKind.SQRT), 1)]


@pytest.mark.parametrize("target", TARGETS)
@EXAMPLES
@given(st.data())
def test_fused_elementwise_chains_keep_every_rounding(target, data):
    """A chain of elementwise ops fuses into one kernel and stays bit-exact: every op still
    widens, computes in f32 and rounds to the dtype (bf16 a + b*c is round(a + round(b*c)))."""
    dt = data.draw(st.sampled_from([DType.BF16, DType.F16, DType.FP8E4M3, DType.F32]))
    shape = (5, 9)
    ps = [var(f"x{i}", shape, dt) for i in range(3)]
    ins = [data.draw(arrays(dt, shape)) for _ in ps]
    vals = list(ps)
    for _ in range(data.draw(st.integers(2, 7))):
        op, arity = data.draw(st.sampled_from(_CHAIN))
        args = tuple(data.draw(st.sampled_from(vals)) for _ in range(arity))
        vals.append(Call(op, args))
    c = assert_bitexact(module_of(ps, vals[-1]), ins, cfg=data.draw(CONFIGS), target=target)
    assert len(c.kernels) == 1, [k.name for k in c.kernels]


@pytest.mark.parametrize("target", TARGETS)
def test_bf16_a_plus_b_times_c_rounds_twice_in_one_kernel(target):
    import ml_dtypes

    from tilefoundry.semantics.dtypes import cast, widen_to_f32

    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal(4096).astype(ml_dtypes.bfloat16) for _ in range(3))
    ps = [var(n, (4096,), DType.BF16) for n in "abc"]
    m = module_of(ps, Call(Binary(BinaryKind.ADD),
                           (ps[0], Call(Binary(BinaryKind.MUL), (ps[1], ps[2])))))
    comp = assert_bitexact(m, [a, b, c], target=target)
    assert len(comp.kernels) == 1
    bc = cast(widen_to_f32(b) * widen_to_f32(c), DType.BF16)
    want = cast(widen_to_f32(a) + widen_to_f32(bc), DType.BF16)
    got = comp([a, b, c])
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    once = cast(widen_to_f32(a) + widen_to_f32(b) * widen_to_f32(c), DType.BF16)
    assert not np.array_equal(got.view(np.uint16), once.view(np.uint16))  # the test can fail


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", [DType.F32, DType.BF16, DType.I32])
def test_grid_region_loops_with_carried_values(dt, target):
    x = var("x", (3, 4), dt)
    i, acc = Var("i"), Var("acc")
    step = Call(Binary(BinaryKind.ADD), (acc, Call(Binary(BinaryKind.MUL), (acc, x))))
    loop = GridRegionExpr(i, (acc,), (x,), step, (step,), extent=4, step=1, start=1)
    total = Call(Reduce((1,), False, ReduceKind.SUM, "fold_left"), (loop,))
    m = module_of([x], Tuple((loop, total)))
    v = np.arange(12).reshape(3, 4) % 3 - 1
    xs = v.astype(np.float32).astype(DType(dt).storage) if dt.is_float else v.astype(np.int32)
    assert_bitexact(m, [xs], target=target)
    assert_bitexact(m, [xs], cfg=SMALL, target=target)


@pytest.mark.parametrize("target", TARGETS)
def test_long_rows_loop_and_stay_within_the_contract(target):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 300)).astype(np.float32)
    cfg = TileConfig(tile_elems=64, max_row=32, k_block=8)
    for policy in ("fold_left", "fold_right"):
        c = assert_bitexact(one_op(Reduce((1,), True, ReduceKind.SUM, policy), x), [x], cfg=cfg, target=target)
        assert c.kernels[0].loop_axes == (1,)
    assert_conforms(one_op(Reduce((1,), True, ReduceKind.SUM, "unordered_tree"), x), [x],
                    cfg=cfg, target=target)
    for op, ins in ((SoftMax(-1), [x]), (RMSNorm(1e-6), [x, x[0]]),
                    (LayerNorm(1e-5), [x, x[0], x[1]])):
        assert_conforms(one_op(op, *ins), ins, cfg=cfg, target=target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int32, np.int64])
def test_integer_abs_max_keeps_int_min_across_tile_loops(dt, target):
    x = np.arange(-40, 40).astype(dt).reshape(2, 40)
    x[0, 7] = np.iinfo(dt).min  # |INT_MIN| wraps to INT_MIN, and is the largest magnitude
    for axes in ((1,), (0, 1)):
        m = one_op(Reduce(axes, True, ReduceKind.ABS_MAX, "fold_left"), x)
        assert_bitexact(m, [x], target=target)
        assert_bitexact(m, [x], cfg=TileConfig(tile_elems=8, max_row=4), target=target)


@pytest.mark.parametrize("target", TARGETS)
def test_constants_and_rank0_values(target):
    x = var("x", (), DType.F32)
    one = Constant(np.array(1.5, np.float32))
    m = module_of([x], Call(Binary(BinaryKind.MUL), (x, one)))
    assert_bitexact(m, [np.array(-0.0, np.float32)], target=target)
    assert isinstance(m.functions[0].params[0].type, TensorType)
