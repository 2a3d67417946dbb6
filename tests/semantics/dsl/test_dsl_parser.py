"""The @func parser: sharing, operators and subscripts, scalars, every op spelling, calls,
dispatch and sealing, Mesh scopes, annotations, name resolution.

HIR spec §1.1: 'the parser binds c = add(a, b) in its lexical env so subsequent mul(c, c) /
sub(c, d) share the same Call node'; math family: 'an arithmetic or comparison operand pair
SHOULD be written with the Python operator ... a sub-tensor SHOULD be written as a subscript
... Both spellings build the same IR'."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.semantics.dsl import (
    SPELLINGS,
    DimVar,
    DimVarRangePat,
    DSLError,
    Layout,
    Mesh,
    ShardLayout,
    Split,
    Tensor,
    Tuple,
    bf16,
    f32,
    func,
    module,
    parse_module,
    to_source,
)
from tilefoundry.semantics.dsl import exp as dsl_exp
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Constant, GridRegionExpr, TupleGetItem, Var
from tilefoundry.semantics.ops import ALL_OPS, Binary, BinaryKind, Unary, UnaryKind
from tilefoundry.semantics.ops.nn import MatMul
from tilefoundry.semantics.ops.tensor import Gather, Reshape, Slice
from tilefoundry.semantics.typeinfer import infer_module
from tilefoundry.semantics.types import StorageKind, TensorType, TupleType

N = DimVar("N", 1, 65)
HEAD = "from tilefoundry.semantics.dsl import *\nN = DimVar('N', 1, 65)\n"


def one(src: str, name: str = "f"):
    """The Function ``name`` of DSL source (the shared header prepended)."""
    return parse_module(HEAD + src)[name]


# ---------------------------------------------------------------------------------------------
# sharing and operators
# ---------------------------------------------------------------------------------------------
def test_a_reused_name_is_one_call_node():
    f = one("""
@func
def f(a: Tensor[(N,), f32], b: Tensor[(N,), f32]):
    c = a + b
    return c * c
""")
    mul = f.body
    assert isinstance(mul.op, Binary) and mul.op.kind is BinaryKind.MUL
    assert mul.args[0] is mul.args[1]  # one node, shared by identity
    assert mul.args[0].op == Binary(BinaryKind.ADD) and mul.args[0].args == f.params


@pytest.mark.parametrize(("expr", "op"), [
    ("a + b", Binary(BinaryKind.ADD)), ("a - b", Binary(BinaryKind.SUB)),
    ("a * b", Binary(BinaryKind.MUL)), ("a / b", Binary(BinaryKind.DIV)),
    ("a == b", Binary(BinaryKind.EQ)), ("a != b", Binary(BinaryKind.NE)),
    ("a < b", Binary(BinaryKind.LT)), ("a <= b", Binary(BinaryKind.LE)),
    ("a > b", Binary(BinaryKind.GT)), ("a >= b", Binary(BinaryKind.GE)),
    ("a @ b", MatMul()), ("minimum(a, b)", Binary(BinaryKind.MIN)),
    ("add(a, b)", Binary(BinaryKind.ADD)), ("cmp_lt(a, b)", Binary(BinaryKind.LT)),
])
def test_operators_and_their_named_forms_build_the_same_ops(expr, op):
    f = one(f"""
@func
def f(a: Tensor[(4, 4), f32], b: Tensor[(4, 4), f32]):
    return {expr}
""")
    assert f.body.op == op and f.body.args == f.params


@pytest.mark.parametrize(("expr", "kind"), [("-a", UnaryKind.NEG), ("~m", UnaryKind.LOGICAL_NOT),
                                            ("abs(a)", UnaryKind.ABS),
                                            ("exp(a)", UnaryKind.EXP)])
def test_unary_operators(expr, kind):
    f = one(f"""
@func
def f(a: Tensor[(4,), f32], m: Tensor[(4,), bool]):
    return {expr}
""")
    assert f.body.op == Unary(kind)


def test_boolean_operators_on_masks():
    f = one("""
@func
def f(p: Tensor[(4,), bool], q: Tensor[(4,), bool]):
    return (p & q) | (p ^ q)
""")
    assert f.body.op.kind is BinaryKind.OR
    assert [a.op.kind for a in f.body.args] == [BinaryKind.AND, BinaryKind.XOR]


# ---------------------------------------------------------------------------------------------
# scalars
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32", "fp8e4m3"])
def test_a_python_float_takes_the_other_operands_float_dtype(dtype):
    """HIR spec, Binary: 'A Python float scalar is given the other operand's float dtype by the
    authoring surface, before it is an operand at all'."""
    f = one(f"""
@func
def f(x: Tensor[(N,), {dtype}]):
    return 0.5 * (x + 2.0)
""")
    c_left, add = f.body.args
    c_right = add.args[1]
    for c in (c_left, c_right):
        assert isinstance(c, Constant) and c.value.shape == ()
        assert c.value.dtype == DType.parse(dtype).storage
    assert float(c_left.value.astype(np.float64)) == 0.5
    assert infer_module(parse_module(HEAD + f"""
@func
def f(x: Tensor[(N,), {dtype}]):
    return 0.5 * (x + 2.0)
""")) is not None


def test_a_python_int_is_an_i32_constant_not_the_other_dtype():
    """'... a Python integer is not': an int literal is a rank-0 i32 constant."""
    f = one("""
@func
def f(k: Tensor[(N,), i32]):
    return k * 3 - 1
""")
    three = f.body.args[0].args[1]
    assert three.value.dtype == np.int32 and int(three.value) == 3
    with pytest.raises(DSLError, match=r"int scalar 1: a Python int is not given"):
        one("""
@func
def f(x: Tensor[(N,), f32]):
    return x + 1
""")


# ---------------------------------------------------------------------------------------------
# subscripts
# ---------------------------------------------------------------------------------------------
def test_slice_subscripts_resolve_to_slice():
    f = one("""
@func
def f(x: Tensor[(N, 8), f32]):
    return x[1:3, :], x[:, ::2], x[2:], x[-2:, 1:7:3]
""")
    s1, s2, s3, s4 = f.body.fields
    assert s1.op == Slice((1, 0), (3, 8))
    assert s2.op == Slice((0, 0), (N, 8), (1, 2))
    assert s3.op == Slice((2, 0), (N, 8))  # omitted trailing axes are whole
    assert s4.op == Slice((-2, 1), (N, 7), (1, 3))


def test_integer_indices_drop_their_axis_like_numpy():
    f = one("""
@func
def f(x: Tensor[(N, 8, 5), f32]):
    return x[:, 3], x[..., -1], x[2, 1:3]
""")
    a, b, c = f.body.fields
    assert a.op == Reshape((N, 5)) and a.args[0].op == Slice((0, 3, 0), (N, 4, 5))
    assert b.op == Reshape((N, 8)) and b.args[0].op == Slice((0, 0, 4), (N, 8, 5))
    assert c.op == Reshape((2, 5)) and c.args[0].op == Slice((2, 1, 0), (3, 3, 5))
    types = infer_module(parse_module(HEAD + """
@func
def f(x: Tensor[(N, 8, 5), f32]):
    return x[:, 3], x[..., -1], x[2, 1:3]
"""))["f"].body.checked_type
    assert [t.shape for t in types.fields] == [(N, 5), (N, 8), (2, 5)]


def test_a_tensor_index_is_a_gather_on_its_axis():
    f = one("""
@func
def f(x: Tensor[(N, 8), f32], idx: Tensor[(3,), i32]):
    return x[idx], x[:, idx], x[..., idx]
""")
    for g, axis in zip(f.body.fields, (0, 1, 1), strict=True):
        assert g.op == Gather(axis) and g.args[1] is f.params[1]


def test_a_tuple_subscript_is_tuple_get_item():
    f = one("""
@func
def f(x: Tensor[(4, 8), f32]):
    t = topk(x, 3)
    values, indices = topk(x, 2)
    return t[0], t[-1], values, indices
""")
    a, b, c, d = f.body.fields
    assert isinstance(a, TupleGetItem) and (a.index, b.index) == (0, 1)
    assert (c.index, d.index) == (0, 1) and c.tuple_value is d.tuple_value


# ---------------------------------------------------------------------------------------------
# every op of the catalog has a call spelling that builds it
# ---------------------------------------------------------------------------------------------
P = "x: Tensor[(4, 8), f32]"
OP_SNIPPETS = {
    "Binary": (P, "maximum(x, x)"), "Unary": (P, "rsqrt(x)"),
    "Reshape": (P, "reshape(x, (8, 4))"),
    "Cast": (P, "cast(x, fp8e4m3, overflow='saturate')"),
    "Gather": (P + ", i: Tensor[(2,), i32]", "gather(x, i, 1)"),
    "Zeros": (P, "zeros((2, N), bf16, storage='smem')"),
    "Reduce": (P, "reduce_abs_max(x, (0, 1), keepdim=False, policy='fold_left')"),
    "InsertSlice": (P + ", u: Tensor[(2, 2), f32]", "insert_slice(x, u, 1, 3)"),
    "CacheUpdate": ("c: Tensor[(1, 8, 2, 4), f32], n: Tensor[(1, 3, 2, 4), f32]",
                    "cache_update(c, 2, 3, n)"),
    "TopK": (P, "topk(x, 3, axis=0, largest=False)"), "Transpose": (P, "transpose(x, (1, 0))"),
    "Slice": (P, "slice(x, (0, 1), (4, 8), (2, 1))"), "Concat": (P, "concat((x, x), axis=1)"),
    "Stack": (P, "stack((x, x, x))"), "ShapeOf": (P, "shape_of(x)"), "Rank": (P, "rank(x)"),
    "MatMul": (P, "matmul(x, transpose(x, (1, 0)), allow_reassociation=False)"),
    "Conv2D": ("x: Tensor[(1, 2, 5, 5), f32], w: Tensor[(3, 2, 3, 3), f32], "
               "b: Tensor[(3,), f32]", "conv2d(x, w, b, stride=(2, 2), padding=(1, 1))"),
    "ReLU": (P, "nn.relu(x)"), "Sigmoid": (P, "sigmoid(x)"), "Tanh": (P, "tanh(x)"),
    "SoftMax": (P, "softmax(x, axis=0)"),
    "LayerNorm": (P + ", w: Tensor[(8,), f32]", "layer_norm(x, w, w, eps=0.001)"),
    "Gelu": (P, "gelu(x, approximate='none')"), "Silu": (P, "silu(x)"),
    "RMSNorm": (P + ", w: Tensor[(8,), f32]", "rms_norm(x, w, 1e-05)"),
    "RoPE": ("q: Tensor[(1, 4, 2, 8), f32], c: Tensor[(16, 8), f32], "
             "p: Tensor[(2,), i32]", "rope(q, q, c, c, p)"),
    "ShapeExtract": (P, "shape_extract(shape_of(x), 1)"),
    "ShapeCompose": (P, "shape_compose(shape_extract(shape_of(x), 1), "
                        "shape_extract(shape_of(x), 0))"),
    "Reshard": (P, "reshard(x, storage='smem', "
                   "layout=ShardLayout(dev, (Broadcast(),), Layout((4, 8))))"),
    "Local": ("x: Tensor[(4, 8), f32, ShardLayout(dev, (Split(0),), Layout((4, 8)))]",
              "local(x)"),
    # tile family
    "Select": (P + ", c: Tensor[(8,), bool]", "ite(c, x, neg(x))"),
    "Bitcast": (P, "bitcast(bitcast(x, u32), f32)"),
    "Scan": (P, "scan(x, 0, 'max', inclusive=False, seed=-0.0, policy='fold_left')"),
    "Sort": (P, "sort(x, axis=0, descending=True, nan='first')"),
    "Mma": ("a: Tensor[(2, 4, 3), bf16], b: Tensor[(2, 3, 5), bf16], c: Tensor[(2, 4, 5), f32]",
            "mma(a, b, c, allow_reassociation=False)"),
    "SeededReduce": (P + ", z: Tensor[(4,), f32]",
                     "reduce_sum_seeded(x, z, (1,), 'fold_right', keepdim=False)"),
    "MaskedReduce": (P + ", z: Tensor[(1, 8), f32], m: Tensor[(4, 8), bool]",
                     "reduce_max_masked(x, z, m, axes=0, policy='ordered_tree')"),
    "CustomReduce": (P + ", s: Tensor[(4, 3), f32]",
                     "reduce_custom(x, s, (1,), 'welford', 'ordered_tree', False)"),
    "MaskedScan": (P + ", m: Tensor[(4, 8), bool]",
                   "scan_masked(x, m, 1, 'add', inclusive=False, seed=2.0)"),
    "SegmentedScan": (P + ", h: Tensor[(4, 8), bool]",
                      "scan_segmented(x, h, 0, 'min', policy='fold_left')"),
}


def test_every_op_of_the_catalog_has_a_spelling():
    spelled = {s.op for s in SPELLINGS}
    assert set(ALL_OPS) <= spelled, set(ALL_OPS) - spelled
    assert {c.__name__ for c in ALL_OPS} == set(OP_SNIPPETS)


@pytest.mark.parametrize("opname", sorted(OP_SNIPPETS))
def test_each_op_spelling_parses_types_and_round_trips(opname):
    params, expr = OP_SNIPPETS[opname]
    src = HEAD + f"""
dev = Mesh(topology="device", axis_names=("d",), axis_extents=(2,))

@func
def f({params}):
    return {expr}

mod = module(f, topology={{"device": 2}})
"""
    m = parse_module(src)
    body = m["f"].body
    assert type(body.op).__name__ == opname
    infer_module(m)  # well typed
    again = parse_module(to_source(m))
    assert again == m and to_source(again) == to_source(m)


# ---------------------------------------------------------------------------------------------
# functions, calls, dispatch
# ---------------------------------------------------------------------------------------------
def test_calls_to_other_funcs_are_calls_typed_by_elaboration():
    M = DimVar("M", 1, 9)

    @func
    def caller(x: Tensor[(M,), bf16]):
        return later(x) * 2.0  # defined below: names resolve when parsed, as in Python

    @func
    def later(v: Tensor[(M,), bf16]) -> Tensor[(M,), bf16]:
        return v + v

    m = module(later, caller)
    call = m["caller"].body.args[0]
    assert isinstance(call, Call) and call.op is m["later"]
    typed = infer_module(m)
    assert typed["caller"].body.checked_type == TensorType((M,), DType.BF16)


def test_dispatch_labels_and_sealing():
    @func
    def f(x: Tensor[(N,), f32]) -> Tensor[(N,), f32]:
        pass

    @f.specialize(DimVarRangePat("N", 1, 16))
    def f_short(x):  # annotations default to the prototype's
        return x

    @f.specialize(DimVarRangePat("N", 16, 65))
    def f_long(x: Tensor[(N,), f32]) -> Tensor[(N,), f32]:
        return -x

    m = module(f)
    base = m["f"]
    assert base.body is None and base.sealed
    assert [v.label for v in base.variants] == ["f_short", "f_long"]
    assert [v.specializations[0] for v in base.variants] == [
        DimVarRangePat("N", 1, 16), DimVarRangePat("N", 16, 65)]
    assert all(v.params == base.params and v.name == "f" for v in base.variants)
    with pytest.raises(DSLError, match=r"sealed"):
        @f.specialize(DimVarRangePat("N", 3, 4))
        def f_late(x):
            return x


def test_calling_a_handle_as_python_raises():
    @func
    def f(x: Tensor[(N,), f32]):
        return x

    with pytest.raises(DSLError, match="is HIR, not Python"):
        f(np.zeros(3, np.float32))
    with pytest.raises(DSLError, match="DSL syntax"):
        dsl_exp(1.0)


def test_names_resolve_through_the_enclosing_scope():
    """A DimVar local to the enclosing function is visible to the annotations, and a closure
    value (BLOCK) to the body."""
    R = DimVar("R", 2, 5)
    BLOCK = 4

    @func
    def f(x: Tensor[(R, 8), f32]):
        return x[:, 0:BLOCK]

    assert f.ir.params[0].type.shape == (R, 8)
    assert f.ir.body.op == Slice((0, 0), (R, 4))


# ---------------------------------------------------------------------------------------------
# annotations, meshes
# ---------------------------------------------------------------------------------------------
def test_annotations_storage_layout_tuple():
    mesh = Mesh("device", ("x",), (2,))
    f = parse_module(HEAD, {}).functions  # the header alone defines no function
    assert f == ()
    m = parse_module(HEAD + """
mesh = Mesh(topology="device", axis_names=("x",), axis_extents=(2,))

@func
def f(a: Tensor[(4, 8), f32, "smem", Layout((4, (2, 4)))],
      b: Tensor[(4,), f32, ShardLayout(mesh, (Split(0),), Layout((4,)))]
      ) -> Tuple[Tensor[(4, 8), f32, "smem", Layout((4, (2, 4)))], Tensor[(4,), f32]]:
    return a, local(b)

mod = module(f, topology={"device": 2})
""")
    a, b = m["f"].params
    assert a.type == TensorType((4, 8), DType.F32, Layout((4, (2, 4))), StorageKind.SMEM)
    assert b.type.layout == ShardLayout(mesh, (Split(0),), Layout((4,)))
    assert isinstance(m["f"].return_type, TupleType)


def test_a_with_mesh_binding_is_lexical():
    """'the scope creates a parser-lexical mesh binding; ShardLayout.mesh MUST point at an active
    binding on the lexical path' (HIR spec §1.1)."""
    src = HEAD + """
@func
def f(x: Tensor[(8,), f32]):
    with Mesh(topology="cta", axis_names=("c",), axis_extents=(4,)) as cta:
        y = reshard(x, ShardLayout(cta, (Split(0),), Layout((8,))))
    return y

mod = module(f, topology={"device": 2, "cta": 4})
"""
    m = parse_module(src)
    assert m["f"].body.op.layout.mesh == Mesh("cta", ("c",), (4,))
    with pytest.raises(DSLError, match=r"<dsl>:8:35: mesh cta: the mesh binding cta is not "
                                       r"active here"):
        parse_module(src.replace("    return y", "    return reshard(y, ShardLayout(cta, "
                                 "(Split(0),), Layout((8,))))"))


def test_loop_binds_carries_in_first_assignment_order_and_the_loop_var_is_local():
    f = one("""
@func
def f(x: Tensor[(N,), f32]):
    a = x
    b = x
    i = x
    for i in tile(4):
        b = b + a
        a = a * 2.0
    return a, b, i
""")
    ga, gb, i_after = f.body.fields
    loop = ga.tuple_value
    assert isinstance(loop, GridRegionExpr) and gb.tuple_value is loop
    assert [v.name for v in loop.carried_args] == ["b", "a"]
    assert (ga.index, gb.index) == (1, 0)
    assert i_after is f.params[0]  # the outer binding of i is back after the loop
    assert isinstance(loop.induction_var, Var) and loop.induction_var.name == "i"


def test_tensor_marker_at_run_time_is_the_type():
    assert Tensor[(N, 4), DType.F32] == TensorType((N, 4), DType.F32)
    assert Tuple[Tensor[(4,), DType.I32]] == TupleType((TensorType((4,), DType.I32),))
