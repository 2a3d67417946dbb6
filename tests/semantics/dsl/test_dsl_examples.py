"""The HIR spec's worked examples written in the DSL: the loop-carried accumulator, a multi-carry
loop, a dispatch prototype with two variants partitioning its envelope, a Mesh-scoped function.
Each is checked against the IR the spec sketches and evaluated with the reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.semantics import unshard
from tilefoundry.semantics.dsl import (
    Broadcast,
    DimVar,
    DimVarRangePat,
    DSLError,
    Layout,
    Mesh,
    ShardLayout,
    Split,
    Tensor,
    exp,
    func,
    maximum,
    module,
    parse_module,
    reduce_mean,
    reduce_sum,
    reshard,
    rmem,
    rsqrt,
    square,
    tile,
    to_source,
    zeros,
)
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Function,
    GridRegionExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.ops import Binary, BinaryKind
from tilefoundry.semantics.ops.tensor import Gather, Reduce, ReduceKind, Zeros
from tilefoundry.semantics.typeinfer import infer_module
from tilefoundry.semantics.typeinfer.functions import select_variant
from tilefoundry.semantics.types import StorageKind, TensorType

f32 = DType.F32
M = DimVar("M", 1, 17)
K = DimVar("K", 1, 33)
BLOCK = 2


# ---------------------------------------------------------------------------------------------
# HIR spec §1.2, "Minimal example — loop-carried accumulator"
# ---------------------------------------------------------------------------------------------
def make_accumulate(m):
    """The example over columns ``m`` (a DimVar, or an int: the evaluator resolves a symbolic
    Zeros shape only from operands, and Zeros has none)."""

    @func
    def accumulate(x: Tensor[(K, m), f32]) -> Tensor[(m,), f32, rmem]:
        acc = zeros((m,), f32, storage=rmem)
        for i in tile(K, step=BLOCK):
            acc = acc + reduce_sum(x[i], (0,), keepdim=False)  # x[i]: the tile window of rows
        return acc

    return accumulate


accumulate = make_accumulate(M)


def test_loop_carried_accumulator_is_the_spec_sketch():
    """'GridRegionExpr(induction_var = i, carried_args = (acc_phi,), init_args =
    (Call(Zeros(...), ()),), body = Call(Binary(kind=ADD), (acc_phi, load_tile(x, i))),
    yield_values = (Call(Binary(kind=ADD), ...),), extent = K, step = BLOCK)' and 'After the
    loop, `acc` resolves to the GridRegionExpr value.'"""
    fn = accumulate.ir
    loop = fn.body
    assert isinstance(loop, GridRegionExpr)
    phi = loop.carried_args[0]
    assert phi.name == "acc" and loop.induction_var.name == "i"
    assert loop.init_args == (Call(Zeros((M,), f32, StorageKind.RMEM), ()),)
    assert loop.body is loop.yield_values[0]
    assert loop.body.op == Binary(BinaryKind.ADD) and loop.body.args[0] is phi
    assert (loop.start, loop.extent, loop.step) == (0, K, BLOCK)
    # the whole function, built by hand
    x = Var("x", TensorType((K, M), f32))
    i, acc = Var("i"), Var("acc")
    window = Call(Binary(BinaryKind.ADD), (i, Constant(np.arange(BLOCK, dtype=np.int32))))
    upd = Call(Binary(BinaryKind.ADD), (acc, Call(Reduce((0,), False, ReduceKind.SUM),
                                                  (Call(Gather(0), (x, window)),))))
    hand = GridRegionExpr(i, (acc,), (Call(Zeros((M,), f32, StorageKind.RMEM), ()),), upd,
                          (upd,), K, BLOCK)
    assert fn == Function("accumulate", (x,), hand,
                          TensorType((M,), f32, None, StorageKind.RMEM))


def test_loop_carried_accumulator_evaluates():
    m = module(make_accumulate(3))
    xs = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
    out = evaluate(m, "accumulate", [xs])
    assert out.dtype == np.float32 and out.tolist() == xs.sum(axis=0).tolist()


# ---------------------------------------------------------------------------------------------
# a multi-carry loop: tuple_get_item after the loop
# ---------------------------------------------------------------------------------------------
def make_sum_and_max(cols):
    @func
    def sum_and_max(x: Tensor[(K, cols), f32]):
        s = zeros((cols,), f32)
        m = x[0]
        for i in tile(K):
            s = s + x[i]
            m = maximum(m, x[i])
        return s, m

    return sum_and_max


sum_and_max = make_sum_and_max(M)


def test_multi_carry_loop_binds_tuple_get_items():
    """'after the loop, the post-region binding refers to ... a tuple_get_item of it
    (multi-carry, when len(yield_values) > 1)'."""
    body = sum_and_max.ir.body
    assert isinstance(body, Tuple)
    gs, gm = body.fields
    assert isinstance(gs, TupleGetItem) and isinstance(gm, TupleGetItem)
    loop = gs.tuple_value
    assert gm.tuple_value is loop and (gs.index, gm.index) == (0, 1)
    assert [v.name for v in loop.carried_args] == ["s", "m"]
    assert len(loop.init_args) == len(loop.yield_values) == 2
    assert isinstance(loop.body, Tuple) and loop.body.fields == loop.yield_values
    assert loop.yield_values[1].op == Binary(BinaryKind.MAX)
    assert loop.yield_values[1].args[0] is loop.carried_args[1]


def test_multi_carry_loop_evaluates():
    xs = np.array([[1, -5, 2], [4, 0, -1], [-2, 7, 3]], np.float32)
    s, mx = evaluate(module(make_sum_and_max(3)), "sum_and_max", [xs])
    assert s.tolist() == xs.sum(axis=0).tolist() and mx.tolist() == xs.max(axis=0).tolist()


# ---------------------------------------------------------------------------------------------
# a dispatch prototype with two variants partitioning the envelope
# ---------------------------------------------------------------------------------------------
S = DimVar("S", 1, 129)


@func
def rms_scale(x: Tensor[(S,), f32]) -> Tensor[(S,), f32]:
    pass


@rms_scale.specialize(DimVarRangePat("S", 1, 64))
def rms_short(x):
    return x * rsqrt(reduce_mean(x * x, (0,)))


@rms_scale.specialize(DimVarRangePat("S", 64, 129))
def rms_long(x):
    return x * rsqrt(reduce_mean(square(x), (0,), policy="fold_left"))


def test_dispatch_prototype_with_two_variants_partitioning_the_envelope():
    """'The variants' ranges MUST partition the envelope ... Adjacent half-open ranges meet at
    the shared boundary value as [.., c) then [c, ..)'; 'A variant MAY carry a display label,
    taken from the identifier its author decorated'."""
    m = module(rms_scale)
    base = m["rms_scale"]
    assert base.body is None and base.sealed
    pats = [v.specializations[0] for v in base.variants]
    assert pats == [DimVarRangePat("S", 1, 64), DimVarRangePat("S", 64, 129)]
    assert [v.label for v in base.variants] == ["rms_short", "rms_long"]
    infer_module(m)
    for n, label in ((5, "rms_short"), (63, "rms_short"), (64, "rms_long"), (100, "rms_long")):
        assert select_variant(base, [(n,)]).label == label
        xs = np.linspace(-2, 3, n, dtype=np.float32)
        want = xs / np.sqrt(np.mean(xs.astype(np.float64) ** 2))
        np.testing.assert_allclose(evaluate(m, "rms_scale", [xs]), want, rtol=1e-5)
    # labels survive printing (and are the only thing telling the variants apart)
    again = parse_module(to_source(m))
    assert [v.label for v in again["rms_scale"].variants] == ["rms_short", "rms_long"]


def test_a_gap_in_the_envelope_is_reported_at_the_prototype():
    @func
    def g(x: Tensor[(S,), f32]) -> Tensor[(S,), f32]:
        pass

    @g.specialize(DimVarRangePat("S", 1, 60))
    def g_a(x):
        return x

    @g.specialize(DimVarRangePat("S", 64, 129))
    def g_b(x):
        return x

    with pytest.raises(DSLError) as e:
        module(g)
    assert e.value.construct == "dispatch prototype g"
    assert "uncovered: [60, 64)" in str(e.value)
    assert e.value.filename == __file__ and e.value.source_line.strip().startswith("def g(")
    assert e.value.line == g.src.line_offset + 2  # the def line, after the @func line


# ---------------------------------------------------------------------------------------------
# a Mesh-scoped function
# ---------------------------------------------------------------------------------------------
@func
def scaled_rows(x: Tensor[(8, 4), f32]) -> Tensor[(8, 4), f32]:
    with Mesh(topology="device", axis_names=("d",), axis_extents=(2,)) as dev:
        rows = reshard(x, ShardLayout(dev, (Split(0),), Layout((8, 4))))
        y = exp(rows) * 0.5
        out = reshard(y, ShardLayout(dev, (Broadcast(),), Layout((8, 4))))
    return out


def test_mesh_scoped_function():
    """'A with Mesh(topology="cta", ...) as cta: inside the body names a level of the execution
    domain the owning Module declares ... A Mesh MAY map fewer levels than the domain
    declares'."""
    m = module(scaled_rows, topology={"device": 2, "cta": 4})
    out = m["scaled_rows"].body
    split = out.args[0].args[0].args[0]  # reshard(mul(exp(rows), 0.5)) -> rows
    mesh = Mesh("device", ("d",), (2,))
    assert split.op.layout == ShardLayout(mesh, (Split(0),), Layout((8, 4)))
    assert out.op.layout == ShardLayout(mesh, (Broadcast(),), Layout((8, 4)))
    xs = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    got = unshard(evaluate(m, "scaled_rows", [xs]))
    np.testing.assert_allclose(got, np.exp(xs) * 0.5, rtol=2e-7)
