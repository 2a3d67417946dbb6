"""Issue 15, deliverable 4: planted candidates downstream of every inexact op class.

For each op class whose result a contract leaves free (a ULP budget, a tree policy, matmul /
conv reassociation, a Partial completion), a program ``y = op(...) * c + d`` puts an exact
multiply-add downstream of it, so the output is judged by its enclosure. Wrong answers must
FAIL: all zeros, a constant, the reference with its sign flipped, and the reference with the
downstream add dropped. A legal execution must PASS: the inexact op's own result moved by one
ulp (within every budget here) or computed in another order, followed by the multiply-add in
numpy f32 — computed here, never taken from the judged output.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.oracle.compare import FAIL, PASS, check
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.mesh import Sharded, unshard
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Constant, Function, Module, TupleGetItem, Var
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Conv2D,
    Gelu,
    LayerNorm,
    MatMul,
    Reduce,
    ReduceKind,
    Reshard,
    RMSNorm,
    RoPE,
    Sigmoid,
    Silu,
    SoftMax,
    Tanh,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.types import (
    Broadcast,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    TensorType,
    Topology,
    TopologyLevel,
)

F32, I64 = DType.F32, DType.I64
RNG = np.random.default_rng(150)
C, D = np.float32(1.75), np.float32(-0.5)


def _t(shape, dt=F32, shard=None):
    return TensorType(tuple(shape), dt, shard)


def _rope_args():
    s, d, p = 5, 8, 7
    inv = 1.0 / (10000.0 ** (np.arange(0, d, 2) / d))
    ang = np.concatenate([np.outer(np.arange(p), inv)] * 2, axis=-1)
    return [RNG.uniform(-3, 3, (2, s, d)).astype(np.float32),
            RNG.uniform(-3, 3, (2, s, d)).astype(np.float32),
            np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32),
            np.asarray([6, 0, 3, 3, 1], np.int64)]


def _mesh_partial():
    mesh = Mesh("device", ("x",), (3,))
    return mesh, ShardLayout(mesh, (Partial("sum"),), Layout((6,)))


#: name -> (op, input values, element count of the op's result row for reorderings or None)
def _cases():
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    pos = np.abs(x) + np.float32(0.25)
    w = RNG.standard_normal(8).astype(np.float32)
    b = RNG.standard_normal(8).astype(np.float32)
    out = {f"Unary.{k.value}": (Unary(k), [pos if k in (UnaryKind.LOG, UnaryKind.LOG2,
                                                         UnaryKind.RSQRT) else x])
           for k in (UnaryKind.EXP, UnaryKind.EXP2, UnaryKind.LOG, UnaryKind.LOG2,
                     UnaryKind.RSQRT)}
    out.update({
        "Sigmoid": (Sigmoid(), [x]), "Tanh": (Tanh(), [x]), "Silu": (Silu(), [x]),
        "Gelu.tanh": (Gelu("tanh"), [x]), "Gelu.none": (Gelu("none"), [x]),
        "SoftMax": (SoftMax(-1), [x]), "RMSNorm": (RMSNorm(), [x, w]),
        "LayerNorm": (LayerNorm(), [x, w, b]), "RoPE": (RoPE(), _rope_args()),
        "Reduce.sum": (Reduce((1,), True, ReduceKind.SUM), [x * np.float32(100)]),
        "Reduce.mean": (Reduce((1,), True, ReduceKind.MEAN), [x * np.float32(100)]),
        "MatMul": (MatMul(), [x, RNG.standard_normal((8, 3)).astype(np.float32)]),
        "Conv2D": (Conv2D(), [RNG.standard_normal((1, 2, 5, 5)).astype(np.float32),
                              RNG.standard_normal((3, 2, 3, 3)).astype(np.float32),
                              RNG.standard_normal(3).astype(np.float32)]),
    })
    return out


CASES = _cases()
PARTIALS = (RNG.standard_normal((3, 6)) * 1e3).astype(np.float32)  # 3 devices' pieces


def _program(name: str):
    """(module, inputs) of ``op(...) * C + D`` (RoPE: of its rotated q)."""
    if name == "Reshard.partial-sum":
        mesh, lay = _mesh_partial()
        xv = Var("x", _t((6,), F32, lay))
        inner = Call(Reshard(ShardLayout(mesh, (Broadcast(),), Layout((6,)))), (xv,))
        params, ins = [xv], [Sharded(lay, PARTIALS)]
        topo = Topology((TopologyLevel("device", 3),))
    else:
        op, vals = CASES[name]
        params = [Var(f"a{i}", _t(v.shape, I64 if v.dtype == np.int64 else F32))
                  for i, v in enumerate(vals)]
        inner = Call(op, tuple(params))
        if name == "RoPE":
            inner = TupleGetItem(inner, 0)
        ins, topo = vals, None
    mul = Call(Binary(BinaryKind.MUL), (inner, Constant(np.asarray(C))))
    body = Call(Binary(BinaryKind.ADD), (mul, Constant(np.asarray(D))))
    kw = {"topology": topo} if topo is not None else {}
    return Module((Function("f", tuple(params), body, None),), **kw), ins, inner, params


def _inner_value(name: str) -> np.ndarray:
    """The inexact op's own reference result (judged under its own contract elsewhere)."""
    m, ins, inner, params = _program(name)
    kw = {"topology": m.topology} if name == "Reshard.partial-sum" else {}
    return unshard(evaluate(Module((Function("g", tuple(params), inner, None),), **kw), "g",
                            ins))


def _legal(name: str) -> np.ndarray:
    """Another admitted execution of the op, then the multiply-add in f32."""
    if name == "Reshard.partial-sum":
        _, ins, _, _ = _program(name)
        data = ins[0].data
        r = ((data[2] + data[1]).astype(np.float32) + data[0]).astype(np.float32)  # reversed
    elif name in ("Reduce.sum", "Reduce.mean"):
        x = CASES[name][1][0]
        acc = x[:, -1].astype(np.float32)
        for j in range(x.shape[1] - 2, -1, -1):  # a right-to-left fold: one admitted tree
            acc = (acc + x[:, j]).astype(np.float32)
        r = acc[:, None] if name == "Reduce.sum" else \
            (acc / np.float32(x.shape[1])).astype(np.float32)[:, None]
    elif name == "MatMul":
        a, bm = CASES[name][1]
        acc = np.zeros((a.shape[0], bm.shape[1]), np.float32)
        for k in range(a.shape[1] - 1, -1, -1):  # K in reverse: admitted with reassociation
            acc = (acc + (a[:, k, None] * bm[None, k, :]).astype(np.float32)).astype(np.float32)
        r = acc
    else:
        # one ulp up, away from zero: within every budget here (the smallest is 1 ulp)
        r = _inner_value(name)
        r = np.nextafter(r, np.copysign(np.float32(np.inf), r)).astype(np.float32)
    return ((r * C).astype(np.float32) + D).astype(np.float32)


NAMES = [*sorted(CASES), "Reshard.partial-sum"]


@pytest.mark.parametrize("name", NAMES)
def test_legal_execution_passes(name):
    m, ins, _, _ = _program(name)
    v = check(m, "f", ins, _legal(name))
    assert v.status == PASS, v.summary()
    assert v.outputs[0].contract.startswith("enclosure("), v.summary()


@pytest.mark.parametrize("wrong", ["zeros", "constant", "wrong-sign", "no-downstream-add"])
@pytest.mark.parametrize("name", NAMES)
def test_wrong_answers_fail(name, wrong):
    m, ins, _, _ = _program(name)
    ref = unshard(evaluate(m, "f", ins))
    inner = _inner_value(name)
    cand = {"zeros": np.zeros_like(ref), "constant": np.full_like(ref, np.float32(0.75)),
            "wrong-sign": (-ref).astype(np.float32),
            "no-downstream-add": (inner * C).astype(np.float32)}[wrong]
    v = check(m, "f", ins, cand)
    assert v.status == FAIL, (name, wrong, v.summary())
    assert "enclosure at [" in v.outputs[0].line()


def test_the_legal_executions_really_differ_from_the_reference():
    """The controls exercise a freedom: for most op classes the legal candidate differs from
    the reference's output in its bits somewhere (a 1-ulp move of a budget op always does)."""
    differs = []
    for name in NAMES:
        m, ins, _, _ = _program(name)
        ref = unshard(evaluate(m, "f", ins))
        differs.append(not np.array_equal(ref.view(np.uint32), _legal(name).view(np.uint32)))
    assert sum(differs) >= len(NAMES) - 3, dict(zip(NAMES, differs, strict=True))
