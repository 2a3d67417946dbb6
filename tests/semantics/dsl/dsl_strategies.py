"""Hypothesis strategies for well-typed HIR modules, built as IR (not through the DSL), for the
DSL round-trip property.

A generated module has a main function whose body is a DAG of ops over one to three parameters
of one tensor type ``T`` (every intermediate has type ``T``, so any pick of operands is well
typed; picks with replacement give sharing), optionally with loops (one or two carries, tile /
range domains, the induction variable and tile windows used in the body, one level of nesting),
calls of a helper function, a dispatch prototype with two or three variants partitioning the
envelope of ``N`` (called from main), tuple returns, and a Mesh-scoped function. Type inference
(``infer_module``) accepts every one — the property test asserts it.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    DimVarRangePat,
    Function,
    GridRegionExpr,
    Module,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary, UnaryKind
from tilefoundry.semantics.ops.nn import Gelu, Sigmoid, Silu, SoftMax, Tanh
from tilefoundry.semantics.ops.sharding import Reshard
from tilefoundry.semantics.ops.tensor import (
    Cast,
    Concat,
    Gather,
    Reduce,
    ReduceKind,
    Reshape,
    Slice,
)
from tilefoundry.semantics.types import (
    Broadcast,
    DimVar,
    Layout,
    Mesh,
    ShardLayout,
    Split,
    TensorType,
    Topology,
    TopologyLevel,
    TupleType,
)

N = DimVar("N", 1, 9)
ARITH = [BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL, BinaryKind.MIN, BinaryKind.MAX]
UNARY = [UnaryKind.NEG, UnaryKind.ABS, UnaryKind.EXP, UnaryKind.SQUARE, UnaryKind.RELU,
         UnaryKind.CEIL]
CMP = [BinaryKind.LT, BinaryKind.GE, BinaryKind.EQ]
LABELS = ["small", "large", "mid", "tiny", "huge", "edge"]


def call(op, *args):
    return Call(op, tuple(args))


class _Builder:
    """Draws ops over a pool of values of type ``t`` (all of one shape and dtype)."""

    def __init__(self, draw, t: TensorType, helper: Function | None,
                 proto: Function | None) -> None:
        self.draw = draw
        self.t = t
        self.helper = helper
        self.proto = proto
        self.n_phis = 0

    def pick(self, pool):
        return pool[self.draw(st.integers(0, len(pool) - 1))]

    def scalar(self, value: float) -> Constant:
        return Constant(np.asarray(value, dtype=self.t.dtype.storage))

    def step(self, pool, ivar: Var | None, depth: int, window: int | None):
        """One new value of type t from the pool."""
        d, t = self.draw, self.t
        kinds = ["binary", "unary", "scalar", "nn", "cast", "concat", "reduce", "index",
                 "cmp"]
        if self.helper is not None:
            kinds.append("helper")
        if self.proto is not None:
            kinds.append("dispatch")
        loop_kinds = ["ivar"] + (["window"] if window is not None else [])
        if depth < 2:
            kinds.append("loop")
        if ivar is not None and d(st.booleans()):
            kinds = loop_kinds  # inside a loop, use the loop variable often
        k = d(st.sampled_from(kinds))
        a = self.pick(pool)
        if k == "binary":
            return call(Binary(d(st.sampled_from(ARITH))), a, self.pick(pool))
        if k == "unary":
            return call(Unary(d(st.sampled_from(UNARY))), a)
        if k == "scalar":
            c = self.scalar(d(st.sampled_from([2.0, 0.5, -1.5, -0.0, 3.0])))
            kind = d(st.sampled_from(ARITH))
            return call(Binary(kind), *((a, c) if d(st.booleans()) else (c, a)))
        if k == "nn":
            op = d(st.sampled_from([Sigmoid(), Tanh(), Silu(), Gelu(), Gelu("none"),
                                    SoftMax(), SoftMax(0)]))
            return call(op, a)
        if k == "cast":
            other = DType.BF16 if t.dtype is DType.F32 else DType.F32
            return call(Cast(t.dtype), call(Cast(other), a))
        if k == "concat":
            rows, cols = t.shape
            half = call(Slice((0, 0), (rows, 2)), a)
            rest = call(Slice((0, 2), (rows, cols), d(st.sampled_from([None, (1, 1)]))),
                        self.pick(pool))
            return call(Concat(1), half, rest)
        if k == "reduce":
            kind = d(st.sampled_from([ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MEAN]))
            return call(Binary(BinaryKind.ADD), a, call(Reduce((1,), True, kind), a))
        if k == "index":  # x[:, j] reshaped back to a column, broadcast against x
            rows, _ = t.shape
            j = d(st.integers(0, 3))
            col = call(Reshape((rows,)), call(Slice((0, j), (rows, j + 1)), a))
            return call(Binary(BinaryKind.MUL), a, call(Reshape((rows, 1)), col))
        if k == "cmp":
            return call(Cast(t.dtype), call(Binary(d(st.sampled_from(CMP))), a,
                                            self.pick(pool)))
        if k == "helper":
            args = [self.pick(pool) for _ in self.helper.params]
            return call(self.helper, *args)
        if k == "dispatch":
            return call(self.proto, a)
        if k == "ivar":
            return call(Binary(BinaryKind.MUL), a, call(Cast(t.dtype), ivar))
        if k == "window":  # reduce_sum(x[i], (0,)) of a tile window, broadcast over rows
            idx = call(Binary(BinaryKind.ADD), ivar, Constant(np.arange(window,
                                                                         dtype=np.int32)))
            part = call(Reduce((0,), True, ReduceKind.SUM), call(Gather(0), a, idx))
            return call(Binary(BinaryKind.ADD), a, part)
        return self.loop(pool, depth)

    def loop(self, pool, depth: int):
        d = self.draw
        ncarry = d(st.integers(1, 2))
        names = []
        for _ in range(ncarry):
            names.append(["acc", "s", "m", "t", "u", "w"][self.n_phis]
                         if self.n_phis < 6 else f"c{self.n_phis}")
            self.n_phis += 1
        phis = [Var(n) for n in names]
        forms = ["tile1", "tile2", "range"] + (["tileN"] if self.t.shape[0] is N else [])
        form = d(st.sampled_from(forms))
        start, extent, step = {"tile1": (0, 3, 1), "tile2": (0, 4, 2), "range": (1, 5, 2),
                               "tileN": (0, N, 1)}[form]
        ivar = Var(d(st.sampled_from(["i", "j", "k"])) if depth == 0 else "jj")
        inner = list(pool) + phis
        window = step if form == "tile2" else None
        yields = []
        for k in range(ncarry):
            v = self.step(inner, ivar, depth + 1, window)
            inner.append(v)
            if d(st.integers(0, 4)) > 0:  # mostly an accumulator: phi op update
                v = call(Binary(d(st.sampled_from(ARITH))), phis[k], v)
            yields.append(v)
        # a carry may also be yielded unchanged, or a phi may feed another yield
        if ncarry == 2 and d(st.booleans()):
            yields[1] = phis[1] if d(st.booleans()) else call(Binary(BinaryKind.ADD),
                                                               phis[0], yields[1])
        inits = [self.pick(pool) for _ in range(ncarry)]
        body = yields[0] if ncarry == 1 else Tuple(tuple(yields))
        g = GridRegionExpr(ivar, tuple(phis), tuple(inits), body, tuple(yields), extent, step,
                           start)
        if ncarry == 1:
            return g
        return TupleGetItem(g, d(st.integers(0, 1)))

    def dag(self, params, steps: int, loop: bool = False):
        pool = list(params)
        for _ in range(steps):
            pool.append(self.step(pool, None, 0, None))
        if loop:
            pool.append(self.loop(pool, 0))
        return pool


@st.composite
def modules(draw) -> Module:
    """A well-typed Module (see the module docstring)."""
    shape = draw(st.sampled_from([(N, 4), (3, 4)]))
    dtype = draw(st.sampled_from([DType.F32, DType.BF16]))
    t = TensorType(shape, dtype)
    fns = []
    helper = None
    if draw(st.booleans()):
        hp = tuple(Var(n, t) for n in ["a", "b"][:draw(st.integers(1, 2))])
        hb = _Builder(draw, t, None, None)
        pool = hb.dag(hp, draw(st.integers(1, 3)))
        helper = Function("helper", hp, pool[-1], draw(st.sampled_from([None, t])))
        fns.append(helper)
    proto = None
    if shape[0] is N and draw(st.booleans()):
        cuts = sorted(draw(st.sets(st.integers(2, 8), min_size=1, max_size=2)))
        bounds = [1, *cuts, 9]
        proto = Function("dispatch", (Var("x", t),), None, t)
        labels = draw(st.permutations(LABELS))
        for lo, hi, label in zip(bounds, bounds[1:], labels, strict=False):
            vx = Var("x", t)
            vb = _Builder(draw, t, None, None)
            pool = vb.dag((vx,), draw(st.integers(1, 2)))
            proto.add_variant(Function("dispatch", (vx,), pool[-1], t,
                                       (DimVarRangePat("N", lo, hi),), label=label))
        fns.append(proto)
    params = tuple(Var(n, t) for n in ["x", "y", "z"][:draw(st.integers(1, 3))])
    b = _Builder(draw, t, helper, proto)
    pool = b.dag(params, draw(st.integers(0, 6)), loop=draw(st.booleans()))
    if proto is not None and draw(st.booleans()):
        pool.append(call(proto, b.pick(pool)))
    if draw(st.integers(0, 3)) == 0:
        body = Tuple((pool[-1], b.pick(pool)))
        rt = draw(st.sampled_from([None, TupleType((t, t))]))
    else:
        body, rt = pool[-1], draw(st.sampled_from([None, t]))
    fns.append(Function("main", params, body, rt))
    topo = Topology(())
    if draw(st.booleans()):
        fns.append(sharded_function(draw))
        topo = Topology((TopologyLevel("device", 2),))
    return Module(tuple(fns), topology=topo)


def sharded_function(draw) -> Function:
    """Reshard to a Split over a 2-device mesh, an elementwise op per device, back to
    Broadcast."""
    mesh = Mesh("device", ("d",), (2,))
    x = Var("x", TensorType((8, 4), DType.F32))
    axis = draw(st.integers(0, 1))
    split = ShardLayout(mesh, (Split(axis),), Layout((8, 4)))
    y = call(Reshard(split), x)
    op = draw(st.sampled_from([Unary(UnaryKind.NEG), Unary(UnaryKind.EXP), Tanh()]))
    z = call(op, y)
    if draw(st.booleans()):
        z = call(Binary(BinaryKind.ADD), z, y)
    out = call(Reshard(ShardLayout(mesh, (Broadcast(),), Layout((8, 4)))), z)
    return Function("sharded", (x,), out, None)
