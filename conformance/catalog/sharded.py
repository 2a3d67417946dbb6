"""The sharded cases (``sharded/...``) (split from ``conformance/catalog.py``, D383).

Split inputs, Partial results completed by
Reshard, per-device elementwise ops, redistribution, ``Local`` and the sharded loops; they
need ``Capabilities.mesh``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.conformance.catalog.build import (
    BF16,
    E4M3,
    ENTRY,
    F16,
    F32,
    I32,
    I64,
    Acc,
    Built,
    case_rng,
    fill_shape,
    make_call,
    make_mesh,
    make_module,
    make_var,
    rows_array,
    shard_layout,
    special_values,
    values_array,
)
from tilefoundry.conformance.catalog.quotes import _S_GATHER_SPLIT, _S_GRID, _S_LOCAL, _S_PARTIAL
from tilefoundry.conformance.catalog.special import _REDUCE_ROWS, _SPECIAL_SPEC
from tilefoundry.semantics.dtypes import FORMATS, DType
from tilefoundry.semantics.ir import (
    GridRegionExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Cast,
    Gather,
    Local,
    MatMul,
    Rank,
    Reduce,
    ReduceKind,
    Reshard,
    ShapeOf,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.types import (
    Broadcast,
    Partial,
    ShardLayout,
    Split,
)


# =============================================================================================
# sharded programs
# =============================================================================================
def _sharded_cases(acc: Acc) -> None:
    add = acc.add

    def split_k(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = make_mesh((2,))
            r = case_rng(f"sharded/matmul/split-k/{dt}")
            a = r.integers(-50, 50, (3, 4)).astype(FORMATS[dt].storage)
            b = r.integers(-50, 50, (4, 2)).astype(FORMATS[dt].storage)
            av = make_var("a", (3, 4), dt, shard_layout(mesh, (Split(1),), (3, 4)))
            bv = make_var("b", (4, 2), dt, shard_layout(mesh, (Split(0),), (4, 2)))
            mm = make_call(MatMul(), av, bv)
            out = make_call(Reshard(layout=shard_layout(mesh, (Broadcast(),), (3, 2))), mm)
            return make_module([av, bv], out, topo), ENTRY, [a, b]

        return build

    for dt in (I32, I64):
        add(f"sharded/matmul/split-k-partial-sum/{dt}", "sharding", split_k(dt),
            ops=("MatMul", "Reshard"), dtypes=(dt,), spec=_S_PARTIAL, tier="quick")

    def split_add(dt: DType, ext: tuple[int, ...]) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = make_mesh(ext)
            r = case_rng(f"sharded/elementwise/{dt}/{ext}")
            shape = (4, 6)
            attrs = (Split(0),) if len(ext) == 1 else (Split(0), Split(1))
            lay = shard_layout(mesh, attrs, shape)
            a = fill_shape(special_values(dt), shape, r)
            b = fill_shape(special_values(dt), shape, r)
            x, y = make_var("x", shape, dt, lay), make_var("y", shape, dt, lay)
            s = make_call(Binary(BinaryKind.ADD), make_call(Unary(UnaryKind.NEG), x), y)
            out = make_call(Reshard(layout=shard_layout(mesh, (Broadcast(),) * len(ext), shape)), s)
            return make_module([x, y], out, topo), ENTRY, [a, b]

        return build

    for dt in (F32, BF16, F16):
        add(f"sharded/elementwise/split-neg-add-allgather/{dt}", "sharding",
            split_add(dt, (2,)), ops=("Binary", "Binary.add", "Unary", "Unary.neg", "Reshard"),
            dtypes=(dt,), spec=_S_PARTIAL, tier="quick")
        add(f"sharded/elementwise/mesh2d-split-split/{dt}", "sharding", split_add(dt, (2, 3)),
            ops=("Binary", "Binary.add", "Unary", "Unary.neg", "Reshard"), dtypes=(dt,),
            spec=_S_PARTIAL, tier="quick")

    def reduce_split(dt: DType, kind: ReduceKind) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = make_mesh((2,))
            a = rows_array(dt, _REDUCE_ROWS)  # (16, 4): rows split over the mesh
            x = make_var("x", a.shape, dt, shard_layout(mesh, (Split(1),), a.shape))
            red = make_call(Reduce((1,), keepdim=True, kind=kind, policy="fold_left"), x)
            return make_module([x], red, topo), ENTRY, [a]

        return build

    for dt in (F32, BF16):
        for kind in (ReduceKind.MAX, ReduceKind.SUM):
            add(f"sharded/reduce/split-axis-{kind.value}/{dt}", "sharding",
                reduce_split(dt, kind), ops=("Reduce", f"Reduce.{kind.value}"), dtypes=(dt,),
                spec="HIR Reduce: \"For ShardLayout input, every split layout position that "
                     "belongs to a reduced tensor axis collapses to broadcast\"", tier="quick")

    def resplit(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = make_mesh((2,))
            a = fill_shape(special_values(dt), (4, 6), case_rng(f"sharded/reshard/{dt}"))
            x = make_var("x", (4, 6), dt, shard_layout(mesh, (Split(0),), (4, 6)))
            out = make_call(Reshard(layout=shard_layout(mesh, (Split(1),), (4, 6))), x)
            return make_module([x], out, topo), ENTRY, [a]

        return build

    for dt in (F32, BF16, E4M3):
        add(f"sharded/reshard/split0-to-split1/{dt}", "sharding", resplit(dt),
            ops=("Reshard",), dtypes=(dt,), spec="HIR Reshard: \"The single op covers "
            "zero-copy view, cross-storage copy, cross-CTA redistribute, and mixed cases\"",
            tier="quick")

    def local_rank(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = make_mesh((2,))
            a = fill_shape(special_values(dt), (4, 2), case_rng(f"sharded/local/{dt}"))
            x = make_var("x", (4, 2), dt, shard_layout(mesh, (Split(0),), (4, 2)))
            loc = make_call(Local(), x)
            return (make_module([x], Tuple((make_call(ShapeOf(), loc), make_call(Rank(), loc))), topo),
                    ENTRY, [a])

        return build

    for dt in (F32, BF16, F16):
        add(f"special/sharding/local/{dt}", "sharding", local_rank(dt),
            ops=("Local", "ShapeOf", "Rank"), dtypes=(dt,), spec=_S_LOCAL, tier="quick")
        add(f"special/sharding/reshard/{dt}", "sharding", split_add(dt, (2,)),
            ops=("Reshard", "Binary", "Binary.add", "Unary", "Unary.neg"), dtypes=(dt,),
            spec=_SPECIAL_SPEC.format(op="Reshard"), tier="quick")
        add(f"sharded/gather/split-axis-partial-sum/{dt}", "sharding", _gather_split(dt),
            ops=("Gather", "Reshard"), dtypes=(dt, I64), spec=_S_GATHER_SPLIT, tier="quick")

    def partial_pieces(dt: DType, red: str) -> Callable[[], Built]:
        """Partial(max / min) whose devices hold *different* pieces (``Sharded.from_devices``;
        ``shard`` puts the same value on every device, which a NaN-dropping or
        signed-zero-blind completion passes): a NaN on one device but not the first, on the
        first only, on all; -0 / +0 split across devices both ways; ±inf; plain numbers."""
        def build() -> Built:
            from tilefoundry.semantics.evaluator.mesh import Sharded

            mesh, topo = make_mesh((4,))
            nan, inf = np.nan, np.inf
            cols = [[1.0, 1.0, nan, 1.0], [-0.0, 0.0, 0.0, 0.0], [0.0, -0.0, -0.0, -0.0],
                    [nan, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0], [-inf, inf, 0.0, -1.0],
                    [nan, nan, nan, nan], [2.5, 2.5, 2.5, 2.5]]
            pieces = values_array(np.array(cols, np.float64).T, dt)  # (device, column)
            lay = shard_layout(mesh, (Partial(red),), (8,))
            x = make_var("x", (8,), dt, lay)
            out = make_call(Reshard(layout=shard_layout(mesh, (Broadcast(),), (8,))), x)
            return make_module([x], out, topo), ENTRY, [Sharded.from_devices(lay, pieces)]

        return build

    for dt in (F32, BF16, F16):
        for red in ("max", "min"):
            add(f"sharded/partial-pieces/{red}-nan-signed-zero/{dt}", "sharding",
                partial_pieces(dt, red), ops=("Reshard",), dtypes=(dt,),
                spec=_S_PARTIAL + " Tile numerics: \"Exceptional values: overflow, NaNs, "
                "signed zero, ties and argmax ordering are part of the operation contract\"",
                tier="full")


#: the sharded loops' bodies (``sharded_loop``), each needing collectives every iteration
SHARDED_LOOP_KINDS = ("partial-sum", "split-to-broadcast", "all-to-all")


def sharded_loop(kind: str, ext: tuple[int, ...], trips: int, dt: DType) -> Callable[[], Built]:
    """A ``grid_region`` over sharded values whose body needs collectives (the per-device
    lowering's host loop, docs/decisions.md D259), on the mesh ``ext`` (1-D, or 2x2: the
    second mesh axis Broadcast, or Split where it can be), ``trips`` iterations:

    * ``partial-sum``: ``acc += Reshard(MatMul(a * i, b), Broadcast)`` and
      ``racc += Reduce_sum(a * i, K)`` (two carried values) with K split (``a`` Split(1), ``b``
      Split(0)): a Partial(sum) completion (all_reduce), a reduction over a split axis
      (all_gather) and the induction variable read through the split layout (align), every
      iteration;
    * ``split-to-broadcast``: ``c = Reshard(Gather(Reshard(c, Broadcast), rot) + i, Split)``:
      the whole vector gathered (all_gather), rotated by one, sliced back, every iteration;
    * ``all-to-all``: ``c = Reshard(Reshard(c, Split(1)) + y, Split(0))``: Split(0) ->
      Split(1) and back on one mesh axis (two all_to_all), ``y`` read in the Split(1) layout.

    Inputs are small integers (exact in every dtype used)."""
    def build() -> Built:
        mesh, topo = make_mesh(ext)
        two = len(ext) == 2
        r = case_rng(f"sharded/loop/{kind}/{ext}/{trips}/{dt}")
        st = FORMATS[dt].storage
        bc = (Broadcast(),) * len(ext)
        i = make_var("i", (), I32)
        c = Var("c", None)

        def lay(shape: tuple, *attrs) -> ShardLayout:
            return shard_layout(mesh, attrs + ((Broadcast(),) if two and len(attrs) == 1 else ()),
                       shape)

        def ints(shape: tuple, lo: int = -4, hi: int = 5) -> np.ndarray:
            return np.ascontiguousarray(r.integers(lo, hi, shape).astype(st))

        iv = make_call(Cast(dt), i)
        if kind == "partial-sum":
            av = make_var("a", (4, 8), dt, lay((4, 8), Split(1)))
            bv = make_var("b", (8, 4), dt, lay((8, 4), Split(0)))
            acc = make_var("acc", (4, 4), dt, shard_layout(mesh, bc, (4, 4)))
            racc = make_var("racc", (4, 1), dt, shard_layout(mesh, bc, (4, 1)))
            d = Var("d", None)
            ai = make_call(Binary(BinaryKind.MUL), av, iv)
            mm = make_call(Reshard(layout=shard_layout(mesh, bc, (4, 4))), make_call(MatMul(), ai, bv))
            rs = make_call(Reduce((1,), keepdim=True, kind=ReduceKind.SUM, policy="fold_left"), ai)
            s1 = make_call(Binary(BinaryKind.ADD), c, mm)
            s2 = make_call(Binary(BinaryKind.ADD), d, rs)
            loop = GridRegionExpr(i, (c, d), (acc, racc), Tuple((s1, s2)), (s1, s2), trips)
            out = Tuple((make_call(Reshard(layout=shard_layout(mesh, bc, (4, 4))), TupleGetItem(loop, 0)),
                         make_call(Reshard(layout=shard_layout(mesh, bc, (4, 1))), TupleGetItem(loop, 1))))
            return (make_module([av, bv, acc, racc], out, topo), ENTRY,
                    [ints((4, 8)), ints((8, 4)), ints((4, 4)), ints((4, 1))])
        if kind == "split-to-broadcast":
            shape = (8, 4)
            ls = shard_layout(mesh, (Split(0), Split(1)) if two else (Split(0),), shape)
            x = make_var("x", shape, dt, ls)
            rot = make_var("rot", (8,), I64)
            g = make_call(Gather(axis=0), make_call(Reshard(layout=shard_layout(mesh, bc, shape)), c), rot)
            step = make_call(Reshard(layout=ls), make_call(Binary(BinaryKind.ADD), g, iv))
            loop = GridRegionExpr(i, (c,), (x,), step, (step,), trips)
            out = make_call(Reshard(layout=shard_layout(mesh, bc, shape)), loop)
            return (make_module([x, rot], out, topo), ENTRY,
                    [ints(shape), np.roll(np.arange(8, dtype=np.int64), -1)])
        assert kind == "all-to-all", kind
        shape = (8, 8)
        l0, l1 = lay(shape, Split(0)), lay(shape, Split(1))
        x, y = make_var("x", shape, dt, l0), make_var("y", shape, dt, l1)
        t = make_call(Binary(BinaryKind.ADD), make_call(Reshard(layout=l1), c), y)
        step = make_call(Reshard(layout=l0), t)
        loop = GridRegionExpr(i, (c,), (x,), step, (step,), trips)
        out = make_call(Reshard(layout=shard_layout(mesh, bc, shape)), loop)
        return make_module([x, y], out, topo), ENTRY, [ints(shape), ints(shape)]

    return build


def _sharded_loop_cases(acc: Acc) -> None:
    """``sharded/loop/...``: loops whose body needs collectives (full tier)."""
    ops = {"partial-sum": ("MatMul", "Reduce", "Reduce.sum", "Binary", "Binary.add",
                           "Binary.mul", "Cast", "Reshard"),
           "split-to-broadcast": ("Gather", "Binary", "Binary.add", "Cast", "Reshard"),
           "all-to-all": ("Binary", "Binary.add", "Reshard")}
    for kind in SHARDED_LOOP_KINDS:
        for ext in ((2,), (4,), (2, 2)):
            for trips in (3, 0):
                for dt in (F32, I32):
                    mesh = "x".join(str(e) for e in ext)
                    acc.add(f"sharded/loop/{kind}/mesh{mesh}/trips{trips}/{dt}", "sharding",
                            sharded_loop(kind, ext, trips, dt), ops=ops[kind],
                            dtypes={"split-to-broadcast": (dt, I32, I64),
                                    "all-to-all": (dt,)}.get(kind, (dt, I32)),
                            spec=_S_GRID + "; " + _S_PARTIAL, tier="full")


def _gather_split(dt: DType) -> Callable[[], Built]:
    def build() -> Built:
        mesh, topo = make_mesh((2, 2))
        r = case_rng(f"sharded/gather/{dt}")
        a = fill_shape(special_values(dt), (8, 3), r)
        x = make_var("x", (8, 3), dt, shard_layout(mesh, (Split(0), Broadcast()), (8, 3)))
        idx = np.asarray([[7, 0], [3, 4], [1, 1]], np.int64)
        i = make_var("i", idx.shape, I64)
        g = make_call(Gather(axis=0), x, i)
        out = make_call(Reshard(layout=shard_layout(mesh, (Broadcast(), Broadcast()), (3, 2, 3))), g)
        return make_module([x, i], out, topo), ENTRY, [a, idx]

    return build
