"""Mesh simulation and the sharded-vs-erased property (semantics/evaluator/{mesh,sharding,erasure}).

ARCHITECTURE.md, The reference evaluator: "evaluating a sharded program per device and gathering
the result equals evaluating the same program with the sharding erased, up to what the reduction
policies admit." Issue 'evaluator', Must show: "The sharded-vs-erased property on
hypothesis-generated sharded programs over 1-D and 2-D meshes, with Split / Broadcast / Partial
inputs, for every op whose table row allows a Partial."

Each generated program takes one allow row of the commutation table, puts the row's Partial on
one mesh axis of a 1-D or 2-D mesh, gives the replicated operands as plain arrays or
Broadcast-sharded values, on a 2-D mesh splits the other mesh axis (or broadcasts it), applies
the op and Reshards the result to Broadcast. Data: Partial(sum) rows use small integers (every
sum and product is exact in the dtype, so the completion's summation order cannot matter and
the comparison is bit-exact); max / min rows use values weighted to the special values inside
the row's proved class (docs/commutation-proofs.md: finite values for the "exact-finite" rows,
the kernel's domain for log / log2 / sqrt). Outside those classes the rows are known not to
commute; ``test_known_non_commuting_cases`` pins those witnesses down.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from tilefoundry.semantics.dtypes import to_bits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.erasure import check_erasure, erase_sharding
from tilefoundry.semantics.evaluator.mesh import PerDevice, Sharded, shard, unshard
from tilefoundry.semantics.evaluator.registry import EvaluationError
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Function,
    Module,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.ops import Binary, BinaryKind, Mma, Scan, Select, Unary, UnaryKind
from tilefoundry.semantics.ops.nn import MatMul, ReLU, RoPE, Sigmoid, Tanh
from tilefoundry.semantics.ops.sharding import Local, Reshard
from tilefoundry.semantics.ops.tensor import (
    CacheUpdate,
    Gather,
    InsertSlice,
    Reduce,
    ReduceKind,
)
from tilefoundry.semantics.typeinfer.commutation import TABLE
from tilefoundry.semantics.types import (
    Broadcast,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    TensorType,
    Topology,
    TopologyLevel,
)

F32, BF16, I32, I64 = DType.F32, DType.BF16, DType.I32, DType.I64
BOOL = DType.BOOL
NP = {F32: np.dtype(np.float32), BF16: np.dtype(ml_dtypes.bfloat16), I32: np.dtype(np.int32),
      I64: np.dtype(np.int64)}
MESHES = [(2,), (3,), (4,), (2, 2), (2, 3)]
ALLOW = [r for r in TABLE if r.allow]
ROW_IDS = [f"{r.op}-{r.kind}-{r.pattern}-{r.reduction}" for r in ALLOW]


# ---------------------------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------------------------
def same_bits(a: np.ndarray, b: np.ndarray, *, zero_sign: bool = True) -> bool:
    """Bit-identical, with every NaN equal to every NaN (payload and sign are no contract);
    with ``zero_sign=False`` also ``-0 == +0``."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "iub":
        return bool(np.array_equal(a, b))
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    nan = np.isnan(fa) & np.isnan(fb)
    same = to_bits(np.ascontiguousarray(a)) == to_bits(np.ascontiguousarray(b))
    if not zero_sign:
        same |= (fa == 0) & (fb == 0)
    return bool(np.all(nan | same))


def assert_same(g, e, *, zero_sign: bool = True):
    if isinstance(g, tuple):
        assert isinstance(e, tuple) and len(g) == len(e)
        for x, y in zip(g, e, strict=True):
            assert_same(x, y, zero_sign=zero_sign)
        return
    assert same_bits(g, e, zero_sign=zero_sign), f"sharded-then-gathered\n{g}\n!= erased\n{e}"


# ---------------------------------------------------------------------------------------------
# meshes, layouts, data
# ---------------------------------------------------------------------------------------------
def mesh_of(ext: tuple[int, ...]) -> tuple[Mesh, Topology]:
    mesh = Mesh("device", ("x", "y")[:len(ext)], ext)
    return mesh, Topology((TopologyLevel("device", math.prod(ext)),))


def sl(mesh: Mesh, attrs: tuple, shape: tuple) -> ShardLayout:
    return ShardLayout(mesh, attrs, Layout(tuple(shape)))


SPECIAL_F = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-40, -1e-40, 3.0e38, -3.0e38, 7.0, 2.5]


def values(draw, shape, dt: DType, *, small: bool, positive: bool = False,
           nonneg_zero: bool = True) -> np.ndarray:
    n = math.prod(shape)
    if dt.is_int or small:
        lo, hi = (0, 4) if positive else (-4, 4)
        v = np.array(draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n)), np.float64)
        if positive:
            v = v + 1
        return v.reshape(shape).astype(NP[dt])
    pool = [x for x in SPECIAL_F if not positive or x > 0]
    if not nonneg_zero:
        pool = [x for x in pool if not (x == 0 and math.copysign(1, x) < 0)]
    elems = st.one_of(st.sampled_from(pool),
                      st.floats(0.0 if positive else -1e6, 1e6, allow_nan=False,
                                allow_subnormal=True, width=32).filter(
                          lambda x: not positive or x > 0))
    v = np.array(draw(st.lists(elems, min_size=n, max_size=n)), np.float32).reshape(shape)
    v = v.astype(NP[dt])
    if not nonneg_zero:  # no -0, also none made by the rounding to dt (a tiny negative in bf16)
        v = np.where(v.astype(np.float32) == 0, np.zeros((), NP[dt]), v).astype(NP[dt])
    return v


def replicate(data: np.ndarray, layout: ShardLayout) -> np.ndarray:
    """Make every Broadcast mesh axis of per-device data bit-identical (coordinate 0)."""
    for i, a in enumerate(layout.attrs):
        if isinstance(a, Broadcast):
            data = np.broadcast_to(np.take(data, [0], axis=i), data.shape)
    return np.ascontiguousarray(data)


def partial_value(draw, layout: ShardLayout, dt: DType, **kw) -> Sharded:
    """Per-device pieces of a Partial operand (replicas equal on Broadcast axes)."""
    full = (*layout.mesh.axis_extents, *layout.local_axis_extents())
    return Sharded.from_devices(layout, replicate(values(draw, full, dt, **kw), layout))


def replicated_value(draw, layout: ShardLayout | None, shape, dt: DType, **kw):
    """A replicated operand: a plain array, or the same value sharded Broadcast / Split."""
    v = values(draw, shape, dt, **kw)
    if layout is None or draw(st.booleans()):
        return v, None
    return shard(v, layout), layout


# ---------------------------------------------------------------------------------------------
# program builders, one per op of the allow rows
# ---------------------------------------------------------------------------------------------
class Case:
    def __init__(self, mesh, topo):
        self.mesh, self.topo = mesh, topo
        self.params: list[Var] = []
        self.inputs: list = []

    def param(self, name, shape, dt, value, layout=None):
        v = Var(name, TensorType(tuple(shape), dt, layout))
        self.params.append(v)
        self.inputs.append(value)
        return v

    def finish(self, out, out_shapes):
        def to_bcast(e, shape):
            return Call(Reshard(layout=sl(self.mesh, (Broadcast(),) * len(self.mesh.axis_names),
                                          shape)), (e,))
        if isinstance(out_shapes, list):
            body = Tuple(tuple(to_bcast(TupleGetItem(out, i), s)
                               for i, s in enumerate(out_shapes)))
        else:
            body = to_bcast(out, out_shapes)
        return Module((Function("f", tuple(self.params), body, None),), topology=self.topo)


def attrs_for(mesh_rank: int, pax: int, red: str | None, other) -> tuple:
    """Per-mesh-axis attrs: the Partial (or Broadcast when red is None) on ``pax``, ``other``
    on the other axis of a 2-D mesh."""
    out = []
    for i in range(mesh_rank):
        if i == pax:
            out.append(Partial(red) if red else Broadcast())
        else:
            out.append(other)
    return tuple(out)


def build(draw, row, ext: tuple[int, ...], dt: DType):
    mesh, topo = mesh_of(ext)
    c = Case(mesh, topo)
    pax = draw(st.integers(0, len(ext) - 1))
    red = row.reduction
    small = red == "sum"
    other_m = ext[1 - pax] if len(ext) == 2 else None
    pats = set(row.pattern.split("+"))
    kw: dict = {"small": small}

    def other_attr(extent_of_pos0: int):
        if other_m is not None and extent_of_pos0 % other_m == 0 and draw(st.booleans()):
            return Split(0)
        return Broadcast()

    if row.op in ("Binary", "Unary", "ReLU", "Sigmoid", "Tanh"):
        shape = (draw(st.sampled_from([2, 4, 6])), draw(st.integers(1, 3)))
        oth = other_attr(shape[0])
        play = sl(mesh, attrs_for(len(ext), pax, red, oth), shape)
        rlay = sl(mesh, attrs_for(len(ext), pax, None, oth), shape)
        if row.op == "Unary":
            kind = UnaryKind(row.kind)
            if kind in (UnaryKind.LOG, UnaryKind.LOG2, UnaryKind.SQRT):
                kw["positive"] = True  # the kernel's domain (NaN class outside it)
            if kind is UnaryKind.RELU:
                kw["nonneg_zero"] = False  # the relu(-0) = -0 witness (see below)
        if row.op == "ReLU":
            kw["nonneg_zero"] = False
        names = ("lhs", "rhs") if row.op == "Binary" else ("x",)
        args = []
        for i, nm in enumerate(names):
            if nm in pats:
                args.append(c.param(f"a{i}", shape, dt, partial_value(draw, play, dt, **kw),
                                    play))
            else:
                v, lay = replicated_value(draw, rlay, shape, dt, **kw)
                args.append(c.param(f"a{i}", shape, dt, v, lay))
        op = {"Binary": lambda: Binary(BinaryKind(row.kind)),
              "Unary": lambda: Unary(UnaryKind(row.kind)), "ReLU": ReLU, "Sigmoid": Sigmoid,
              "Tanh": Tanh}[row.op]()
        return c.finish(Call(op, tuple(args)), shape), c
    if row.op == "Reduce":
        shape = (4, draw(st.sampled_from([2, 4])))
        oth = other_attr(shape[0])
        lay = sl(mesh, attrs_for(len(ext), pax, red, oth), shape)
        x = c.param("x", shape, dt, partial_value(draw, lay, dt, **kw), lay)
        axes = draw(st.sampled_from([(0,), (1,), (0, 1), (-1,)]))
        keep = draw(st.booleans())
        policy = draw(st.sampled_from(["unordered_tree", "ordered_tree", "fold_left",
                                       "fold_right"]))
        op = Reduce(axes, keepdim=keep, kind=ReduceKind(row.kind), policy=policy)
        out_shape = tuple(1 if (a in [b % 2 for b in axes]) else e for a, e in enumerate(shape)
                          if keep or a not in [b % 2 for b in axes])
        return c.finish(Call(op, (x,)), out_shape), c
    if row.op == "MatMul":
        m, k, n = 4, draw(st.integers(1, 4)), draw(st.integers(1, 3))
        oth = other_attr(m)
        if "a" in pats:
            alay = sl(mesh, attrs_for(len(ext), pax, red, oth), (m, k))
            a = c.param("a", (m, k), dt, partial_value(draw, alay, dt, **kw), alay)
            blay = sl(mesh, attrs_for(len(ext), pax, None, Broadcast()), (k, n))
            bv, bl = replicated_value(draw, blay, (k, n), dt, **kw)
            b = c.param("b", (k, n), dt, bv, bl)
        else:
            alay = sl(mesh, attrs_for(len(ext), pax, None, oth), (m, k))
            av, al = replicated_value(draw, alay, (m, k), dt, **kw)
            if al is None and oth != Broadcast():
                av, al = shard(av, alay), alay
            a = c.param("a", (m, k), dt, av, al)
            blay = sl(mesh, attrs_for(len(ext), pax, red, Broadcast()), (k, n))
            b = c.param("b", (k, n), dt, partial_value(draw, blay, dt, **kw), blay)
        return c.finish(Call(MatMul(allow_reassociation=False), (a, b)), (m, n)), c
    if row.op == "RoPE":
        s, d, p = 4, 4, 6
        q_lay = sl(mesh, attrs_for(len(ext), pax, red, Broadcast()), (s, d))
        r_lay = sl(mesh, attrs_for(len(ext), pax, None, Broadcast()), (s, d))
        ops = []
        for nm in ("q", "k"):
            if nm in pats:
                ops.append(c.param(nm, (s, d), dt, partial_value(draw, q_lay, dt, **kw), q_lay))
            else:
                v, lay = replicated_value(draw, r_lay, (s, d), dt, **kw)
                ops.append(c.param(nm, (s, d), dt, v, lay))
        cos = c.param("cos", (p, d), dt, values(draw, (p, d), dt, small=True))
        sin = c.param("sin", (p, d), dt, values(draw, (p, d), dt, small=True))
        pos = c.param("pos", (s,), I64,
                      np.array(draw(st.lists(st.integers(0, p - 1), min_size=s, max_size=s)),
                               np.int64))
        return c.finish(Call(RoPE(), (*ops, cos, sin, pos)), [(s, d), (s, d)]), c
    if row.op == "Gather":
        shape = (6, 4)
        axis = draw(st.integers(0, 1))
        oth = other_attr(shape[0]) if axis == 1 else Broadcast()
        lay = sl(mesh, attrs_for(len(ext), pax, red, oth), shape)
        x = c.param("x", shape, dt, partial_value(draw, lay, dt, **kw), lay)
        ni = draw(st.integers(1, 5))
        idx = np.array(draw(st.lists(st.integers(0, shape[axis] - 1), min_size=ni,
                                     max_size=ni)), np.int64)
        i = c.param("i", (ni,), I64, idx)
        out_shape = (ni, 4) if axis == 0 else (6, ni)
        return c.finish(Call(Gather(axis=axis), (x, i)), out_shape), c
    if row.op == "InsertSlice":
        dshape, ushape = (6, 4), (2, 4)
        lay_d = sl(mesh, attrs_for(len(ext), pax, red, Broadcast()), dshape)
        lay_u = sl(mesh, attrs_for(len(ext), pax, red, Broadcast()), ushape)
        dst = c.param("dst", dshape, dt, partial_value(draw, lay_d, dt, **kw), lay_d)
        upd = c.param("upd", ushape, dt, partial_value(draw, lay_u, dt, **kw), lay_u)
        o0 = Constant(np.asarray(draw(st.integers(0, 4)), np.int32))
        o1 = Constant(np.asarray(0, np.int32))
        return c.finish(Call(InsertSlice(), (dst, upd, o0, o1)), dshape), c
    if row.op == "CacheUpdate":
        cshape, nshape = (1, 6, 2, 4), (1, 3, 2, 4)
        oth = Split(2) if other_m == 2 and draw(st.booleans()) else Broadcast()
        lay_c = sl(mesh, attrs_for(len(ext), pax, red, oth), cshape)
        lay_n = sl(mesh, attrs_for(len(ext), pax, red, oth), nshape)
        cache = c.param("cache", cshape, dt, partial_value(draw, lay_c, dt, **kw), lay_c)
        new = c.param("new", nshape, dt, partial_value(draw, lay_n, dt, **kw), lay_n)
        s_val = draw(st.integers(1, 3))
        pos_val = draw(st.integers(0, 6 - s_val))
        cur = c.param("cur", (), I32, np.asarray(pos_val, np.int32))
        s = c.param("s", (), I32, np.asarray(s_val, np.int32))
        return c.finish(Call(CacheUpdate(), (cache, cur, s, new)), cshape), c
    if row.op == "Select":  # tile family: both branches carry the Partial, cond replicated
        shape = (4, 4)
        lay = sl(mesh, attrs_for(len(ext), pax, red, Broadcast()), shape)
        cond = c.param("cond", shape, BOOL,
                       np.array(draw(st.lists(st.booleans(), min_size=16, max_size=16)),
                                bool).reshape(shape))
        t = c.param("t", shape, dt, partial_value(draw, lay, dt, **kw), lay)
        f = c.param("f", shape, dt, partial_value(draw, lay, dt, **kw), lay)
        return c.finish(Call(Select(), (cond, t, f)), shape), c
    if row.op == "Scan":  # tile family: scan axis 1, never the Split one
        shape = (4, draw(st.sampled_from([2, 4])))
        lay = sl(mesh, attrs_for(len(ext), pax, red, other_attr(shape[0])), shape)
        x = c.param("x", shape, dt, partial_value(draw, lay, dt, **kw), lay)
        op = Scan(1, row.kind, inclusive=draw(st.booleans()),
                  policy=draw(st.sampled_from(["fold_left", "ordered_tree"])))
        return c.finish(Call(op, (x,)), shape), c
    if row.op == "Mma":  # tile family: one input and acc carry the Partial(sum), the other
        # input replicated (acc is f32 whatever the inputs: the design's accumulator)
        m, k, n = 4, draw(st.integers(1, 4)), draw(st.integers(1, 3))

        def part(nm: str, shape: tuple, d: DType):
            lay = sl(mesh, attrs_for(len(ext), pax, red, Broadcast()), shape)
            return c.param(nm, shape, d, partial_value(draw, lay, d, **kw), lay)

        def rep(nm: str, shape: tuple, d: DType):
            lay0 = sl(mesh, attrs_for(len(ext), pax, None, Broadcast()), shape)
            v, lay = replicated_value(draw, lay0, shape, d, **kw)
            return c.param(nm, shape, d, v, lay)

        if "a" in pats:
            a, b = part("a", (m, k), dt), rep("b", (k, n), dt)
        else:
            a, b = rep("a", (m, k), dt), part("b", (k, n), dt)
        acc = part("acc", (m, n), F32)
        return c.finish(Call(Mma(False), (a, b, acc)), (m, n)), c
    raise AssertionError(f"no builder for {row}")


def dtypes_for(row) -> list[DType]:
    if row.op in ("Unary", "ReLU", "Sigmoid", "Tanh", "RoPE", "Mma") or row.kind == "mean":
        return [F32, BF16]
    return [F32, BF16, I32]


# 47 rows: a quarter of the profile's examples per row (15 per row, 705 programs under "ci")
@pytest.mark.parametrize("row", ALLOW, ids=ROW_IDS)
@settings(max_examples=max(10, settings.default.max_examples // 4))
@given(data=st.data())
def test_sharded_equals_erased_for_every_allow_row(row, data):
    ext = data.draw(st.sampled_from(MESHES), label="mesh")
    dt = data.draw(st.sampled_from(dtypes_for(row)), label="dtype")
    module, case = build(data.draw, row, ext, dt)
    note(f"inputs: {case.inputs}")
    gathered, erased = check_erasure(module, "f", case.inputs)
    # A sum decomposition does not determine the sign of a zero ((-1) + 1 = +0 while the
    # undecomposed value may be -0: docs/commutation-proofs.md classes "±0" / "rounding"), so
    # sum rows compare with -0 == +0; max / min rows compare every bit.
    assert_same(gathered, erased, zero_sign=row.reduction != "sum")


# ---------------------------------------------------------------------------------------------
# Split inputs that produce a Partial (MatMul over a split K, Gather over a split axis)
# ---------------------------------------------------------------------------------------------
@given(data=st.data())
def test_split_contraction_and_split_gather_complete_to_the_erased_value(data):
    ext = data.draw(st.sampled_from(MESHES))
    mesh, topo = mesh_of(ext)
    ax = data.draw(st.integers(0, len(ext) - 1))
    msz = ext[ax]
    dt = data.draw(st.sampled_from([F32, BF16, I32]))
    k = msz * data.draw(st.integers(1, 2))
    attrs_a = tuple(Split(1) if i == ax else Broadcast() for i in range(len(ext)))
    attrs_b = tuple(Split(0) if i == ax else Broadcast() for i in range(len(ext)))
    a = Var("a", TensorType((3, k), dt, sl(mesh, attrs_a, (3, k))))
    b = Var("b", TensorType((k, 2), dt, sl(mesh, attrs_b, (k, 2))))
    mm = Call(MatMul(allow_reassociation=False), (a, b))
    bcast = sl(mesh, (Broadcast(),) * len(ext), (3, 2))
    f1 = Function("mm", (a, b), Call(Reshard(layout=bcast), (mm,)), None)
    x = Var("x", TensorType((2 * msz, 3), dt, sl(mesh, attrs_b, (2 * msz, 3))))
    ni = data.draw(st.integers(1, 6))
    i = Var("i", TensorType((ni,), I64))
    g = Call(Gather(axis=0), (x, i))
    f2 = Function("g", (x, i), Call(Reshard(layout=sl(mesh, (Broadcast(),) * len(ext),
                                                       (ni, 3))), (g,)), None)
    module = Module((f1, f2), topology=topo)
    av = values(data.draw, (3, k), dt, small=True)
    bv = values(data.draw, (k, 2), dt, small=True)
    assert_same(*check_erasure(module, "mm", [av, bv]), zero_sign=False)
    xv = values(data.draw, (2 * msz, 3), dt, small=dt is not F32)
    iv = np.array(data.draw(st.lists(st.integers(0, 2 * msz - 1), min_size=ni, max_size=ni)),
                  np.int64)
    assert_same(*check_erasure(module, "g", [xv, iv]))  # selection: every bit


# ---------------------------------------------------------------------------------------------
# known non-commuting cases of allow rows (docs/commutation-proofs.md classes)
# ---------------------------------------------------------------------------------------------
def _unary_max_program(kind: UnaryKind):
    mesh, topo = mesh_of((2,))
    lay = sl(mesh, (Partial("max"),), (1,))
    x = Var("x", TensorType((1,), F32, lay))
    body = Call(Reshard(layout=sl(mesh, (Broadcast(),), (1,))), (Call(Unary(kind), (x,)),))
    return Module((Function("f", (x,), body, None),), topology=topo), lay


@pytest.mark.parametrize(("kind", "pieces", "why"), [
    # docs/commutation-proofs.md: "log / log2 / sqrt under a Partial(max) give NaN" for a piece
    # below zero
    (UnaryKind.LOG, (-1.0, 4.0), "nan"),
    (UnaryKind.SQRT, (-1.0, 4.0), "nan"),
    # relu(-0) = -0 (torch; D136) while relu(-1) = +0: max(+0, -0) = +0 but relu(max) = -0
    (UnaryKind.RELU, (-1.0, -0.0), "zero-sign"),
])
def test_known_non_commuting_cases(kind, pieces, why):
    module, lay = _unary_max_program(kind)
    v = Sharded.from_devices(lay, np.array(pieces, np.float32).reshape(2, 1))
    g, e = check_erasure(module, "f", [v])
    assert not same_bits(g, e)
    if why == "nan":
        assert np.isnan(g).all() and not np.isnan(e).any()
    else:
        assert g[0] == 0 and e[0] == 0 and not np.signbit(g[0]) and np.signbit(e[0])


# ---------------------------------------------------------------------------------------------
# shard / unshard, Local, Reshard, erasure errors
# ---------------------------------------------------------------------------------------------
@given(data=st.data())
def test_shard_then_unshard_is_the_identity(data):
    ext = data.draw(st.sampled_from(MESHES))
    mesh, _ = mesh_of(ext)
    # a 2-D tensor whose axis 0 is refined into two positions (block or cyclic splits)
    outer, inner = data.draw(st.sampled_from([(2, 6), (6, 2), (3, 4), (4, 3), (12, 1)]))
    cols = data.draw(st.integers(1, 3))
    layout = Layout(((outer, inner), cols))
    attrs = []
    free = [0, 1, 2]
    for m in ext:
        opts = [Broadcast(), Partial("max")] + [Split(p) for p in free
                                                 if layout.positions[p] % m == 0]
        a = data.draw(st.sampled_from(opts))
        if isinstance(a, Split):
            free.remove(a.position)
        attrs.append(a)
    lay = ShardLayout(mesh, tuple(attrs), layout)
    x = np.arange(outer * inner * cols, dtype=np.float32).reshape(outer * inner, cols)
    s = shard(x, lay)
    assert np.array_equal(unshard(s), x)
    # device coordinates own the blocks the layout says: check one split element directly
    for i, a in enumerate(attrs):
        if isinstance(a, Split):
            p, m = a.position, ext[i]
            blk = layout.positions[p] // m
            coord = tuple(m - 1 if j == i else 0 for j in range(len(ext)))
            pos_idx = [0, 0, 0]
            pos_idx[p] = 0  # first local element of the last device's block
            glob = list(pos_idx)
            glob[p] = (m - 1) * blk
            flat_row = glob[0] * inner + glob[1]
            local0 = s.data[coord].reshape(-1)[0]
            # the first local element is the global element at the block start on position p
            # and at the block start of every other split position (coordinate 0 there)
            assert local0 == x[flat_row, glob[2]]


def test_unshard_rejects_diverged_broadcast_replicas():
    mesh, _ = mesh_of((2,))
    lay = sl(mesh, (Broadcast(),), (3,))
    v = Sharded.from_devices(lay, np.array([[1, 2, 3], [1, 2, 4]], np.float32))
    with pytest.raises(EvaluationError, match=r"mesh axis x is Broadcast but the devices' "
                                              r"replicas differ"):
        unshard(v)


def test_partial_sum_shard_keeps_negative_zero():
    mesh, _ = mesh_of((3,))
    lay = sl(mesh, (Partial("sum"),), (2,))
    x = np.array([-0.0, 1.5], np.float32)
    back = unshard(shard(x, lay))
    assert np.signbit(back[0]) and back[1] == 1.5


def test_local_exposes_each_devices_piece_and_erasure_refuses_it():
    mesh, topo = mesh_of((2,))
    lay = sl(mesh, (Split(0),), (4,))
    x = Var("x", TensorType((4,), F32, lay))
    f = Function("f", (x,), Call(Unary(UnaryKind.NEG), (Call(Local(), (x,)),)), None)
    module = Module((f,), topology=topo)
    out = evaluate(module, "f", [np.arange(4, dtype=np.float32)])
    assert isinstance(out, PerDevice)
    assert out.data.tolist() == [[-0.0, -1.0], [-2.0, -3.0]]
    with pytest.raises(EvaluationError, match=r"Local of a value sharded as \(Split"):
        erase_sharding(module)
    with pytest.raises(EvaluationError, match="PerDevice value"):
        unshard(out)


def test_reshard_completion_reports_the_tree_contract():
    mesh, topo = mesh_of((2,))
    lay = sl(mesh, (Partial("sum"),), (2,))
    x = Var("x", TensorType((2,), F32, lay))
    f = Function("f", (x,), Call(Reshard(layout=sl(mesh, (Broadcast(),), (2,))), (x,)), None)
    ev = evaluate(Module((f,), topology=topo), "f",
                  [Sharded.from_devices(lay, np.array([[1, 2], [3, 4]], np.float32))],
                  report=True)
    assert unshard(ev.value).tolist() == [4.0, 6.0]
    (_call, contract), = ev.contracts
    assert contract.kind == "admitted_set" and contract.policy == "unordered_tree"


def test_sharded_input_must_match_the_declared_sharding():
    mesh, topo = mesh_of((2,))
    lay = sl(mesh, (Split(0),), (4,))
    x = Var("x", TensorType((4,), F32, lay))
    f = Function("f", (x,), Call(Unary(UnaryKind.NEG), (x,)), None)
    other = shard(np.zeros(4, np.float32), sl(mesh, (Broadcast(),), (4,)))
    with pytest.raises(EvaluationError, match=r"parameter x: the value's sharding "
                                              r"\(Broadcast\(\),\)"):
        evaluate(Module((f,), topology=topo), "f", [other])


# ---------------------------------------------------------------------------------------------
# docs/decisions.md D146 findings (from the program generator), fixed
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("shape", "layout", "attrs", "new"), [
    ((4, 6), (4, (2, 3)), (Split(0),), (4, 2, 3)),   # rule 1: whole positions
    ((12,), ((2, 6),), (Split(0),), (2, 6)),          # a refined axis, split on its outer position
    ((12,), (12,), (Split(0),), (6, 2)),              # rule 2: E = A·B with m | A
])
def test_reshape_of_a_split_value_reshapes_each_devices_block(shape, layout, attrs, new):
    from tilefoundry.semantics.ops.tensor import Reshape

    mesh, topo = mesh_of((2,))
    lay = ShardLayout(mesh, attrs, Layout(layout))
    x = Var("x", TensorType(shape, F32, lay))
    r = Call(Reshape(new), (x,))
    body = Call(Reshard(layout=sl(mesh, (Broadcast(),), new)), (r,))
    module = Module((Function("f", (x,), body, None),), topology=topo)
    xv = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    g, e = check_erasure(module, "f", [xv])
    assert_same(g, e)
    assert np.array_equal(e, xv.reshape(new))


def test_insert_slice_of_a_replicated_update_into_a_split_destination():
    mesh, topo = mesh_of((2,))
    lay = sl(mesh, (Split(1),), (3, 4))
    dst = Var("dst", TensorType((3, 4), F32, lay))
    upd = Var("upd", TensorType((1, 4), F32))  # covers the split axis 1 whole
    o0 = Constant(np.asarray(2, np.int32))
    o1 = Constant(np.asarray(0, np.int32))
    w = Call(InsertSlice(), (dst, upd, o0, o1))
    body = Call(Reshard(layout=sl(mesh, (Broadcast(),), (3, 4))), (w,))
    module = Module((Function("f", (dst, upd), body, None),), topology=topo)
    d = np.zeros((3, 4), np.float32)
    u = np.arange(1, 5, dtype=np.float32).reshape(1, 4)
    g, e = check_erasure(module, "f", [d, u])
    assert_same(g, e)
    assert e[2].tolist() == [1, 2, 3, 4] and not e[:2].any()


def test_slice_of_a_rank0_value_stays_an_array():
    from tilefoundry.semantics.ops.tensor import Slice

    x = Var("x", TensorType((), F32))
    m = Module((Function("f", (x,), Call(Unary(UnaryKind.NEG), (Call(Slice((), ()), (x,)),)),
                         None),))
    out = evaluate(m, "f", [np.asarray(np.float32(2.5))])
    assert isinstance(out, np.ndarray) and out.shape == () and out == -2.5


@pytest.mark.parametrize(("ext", "attrs", "shape"), [
    ((2,), (Split(1),), (2, 4)), ((2, 3), (Split(0), Split(1)), (4, 6)),
    ((2, 3), (Split(1), Split(0)), (6, 4)), ((4,), (Split(0),), (8, 3))])
def test_an_all_gather_keeps_the_blocks_in_device_order(ext, attrs, shape):
    """Found by the gloo backend (docs/findings.md F22): gather_positions interleaved the
    blocks (on 2 devices columns [0,1 | 2,3] came back [0,2,1,3]), so a fold over a split axis
    ran in the wrong order. Every device must hold the global value after the all-gather."""
    from tilefoundry.semantics.evaluator.sharding import gather_positions
    from tilefoundry.semantics.types import Layout

    mesh = Mesh("device", ("x", "y")[:len(ext)], ext)
    lay = ShardLayout(mesh, attrs, Layout(shape))
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    g = gather_positions(shard(x, lay), list(range(len(ext))))
    for coord in np.ndindex(*ext):
        assert np.array_equal(g.data[coord], x), coord


def test_a_fold_over_a_split_axis_runs_in_global_order():
    """fold_left over an axis split on 2 devices: [1e8, -1e8, 1, 1] in order is 2; the
    interleaved order [1e8, 1, -1e8, 1] gave 1 (the 1 absorbed by 1e8)."""
    from tilefoundry.semantics.ops.tensor import Reduce, ReduceKind

    mesh, topo = mesh_of((2,))
    lay = sl(mesh, (Split(1),), (1, 4))
    x = Var("x", TensorType((1, 4), F32, lay))
    red = Call(Reduce((1,), False, ReduceKind.SUM, policy="fold_left"), (x,))
    m = Module((Function("f", (x,), red, None),), topology=topo)
    xs = np.array([[1e8, -1e8, 1.0, 1.0]], np.float32)
    out = evaluate(m, "f", [xs])
    assert unshard(out).tolist() == [2.0]
