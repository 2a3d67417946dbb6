"""Quick-tier cases that fill the catalog's blind spots (issue 16, "coverage by construction").

Each family here exists because a planted-bug backend (``tests/conformance/planted_backends.py``)
passed the quick tier without it:

* **completed Partials feeding further ops** — a split-K matmul's Partial(sum), completed by a
  Reshard, then consumed by each consumer class (elementwise unary / binary, a reduction, a
  matmul, a normalization); a Partial(max) completion feeding an elementwise op. A consumer that
  reads a device's stale partial instead of the completed value fails these; a completion in
  another device order passes.
* **reshapes of Split / Broadcast / Partial values** under both factorization rules of HIR
  Reshape (whole layout positions; a Split-bound position divided at a boundary its mesh extent
  divides), then gathered. A device that reshapes its block in another order fails them.
* **matmul ≡ mma(a, b, zeros)** — a dot product whose every product is −0 is +0 (D200), under
  ``allow_reassociation=False``; a first-product-seeded kernel (−0) fails it.
* **TopK sorted=False** with ties and a NaN — any order of the selected set passes (D201).
* **ordered_tree vs a permutation** — rows whose every order-preserving tree gives one value
  and a leaf permutation another: a backend accumulating in SIMD lanes (even / odd leaves)
  where ``ordered_tree`` is asked fails it (the other quick-tier tree cases admit it).

Inputs are seeded by the case id (``catalog._rng``); every case is tiny.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.ir import Tuple, TupleGetItem
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    MatMul,
    Reduce,
    ReduceKind,
    Reshape,
    Reshard,
    SoftMax,
    TopK,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.types import Broadcast, Layout, Partial, ShardLayout, Split

__all__ = ["coverage_cases"]

_S_PARTIAL_FEEDS = (
    "ARCHITECTURE.md, Types: \"`Partial(reduction)` ...: every device holds a partial value; the "
    "logical value is the reduction over the mesh axis\"; HIR: \"A ShardLayout operand carrying "
    "Partial(reduction) propagates to the output only when the op provably commutes with "
    "reduction\" — a completed (Broadcast) value feeds any op.")
_S_RESHAPE = (
    "HIR Reshape: \"every layout position lies entirely within one new axis ... OR a Split-bound "
    "layout position divides across a new-axis boundary at a point its bound mesh extent evenly "
    "divides\"; \"Partial / Broadcast carry through unchanged\".")
_S_MMA_ZEROS = ("Tile design: \"auto c = matmul(a, b); // equivalent to mma(a, b, "
                "zeros(result_shape))\" (docs/decisions.md D200).")
_S_TOPK_SET = ("HIR TopK: \"sorted returns the selected elements ordered by largest; otherwise "
               "the same selected set is returned in an unspecified order.\"")

F32, BF16 = DType.F32, DType.BF16


def coverage_cases(acc) -> None:
    from tilefoundry.conformance.catalog import build as c

    add = acc.add

    def split_k(mesh, dt: DType, cid: str, m: int = 4, k: int = 6, n: int = 3):
        """A split-K matmul's Partial(sum) and its operands' values."""
        r = c.case_rng(cid)
        a = c.random_float(r, (m, k), dt)
        b = c.random_float(r, (k, n), dt)
        av = c.make_var("a", (m, k), dt, c.shard_layout(mesh, (Split(1),), (m, k)))
        bv = c.make_var("b", (k, n), dt, c.shard_layout(mesh, (Split(0),), (k, n)))
        return c.make_call(MatMul(), av, bv), [av, bv], [a, b]

    consumers: dict[str, tuple[Callable, tuple]] = {
        "exp": (lambda s, extra: c.make_call(Unary(UnaryKind.EXP), s), ("Unary", "Unary.exp")),
        "mul": (lambda s, extra: c.make_call(Binary(BinaryKind.MUL), s, extra),
                ("Binary", "Binary.mul")),
        "reduce-sum": (lambda s, extra: c.make_call(Reduce((1,), keepdim=True, kind=ReduceKind.SUM),
                                                s), ("Reduce", "Reduce.sum")),
        "matmul": (lambda s, extra: c.make_call(MatMul(), s, extra), ("MatMul",)),
        "softmax": (lambda s, extra: c.make_call(SoftMax(-1), s), ("SoftMax",)),
    }

    def feeds(consumer: str, dt: DType) -> Callable:
        cid = f"sharded/partial-completion-feeds/{consumer}/{dt}"

        def build():
            mesh, topo = c.make_mesh((2,))
            mm, params, vals = split_k(mesh, dt, cid)
            full = c.make_call(Reshard(layout=c.shard_layout(mesh, (Broadcast(),), (4, 3))), mm)
            eshape = (3, 2) if consumer == "matmul" else (4, 3)
            ev = c.make_var("e", eshape, dt, c.shard_layout(mesh, (Broadcast(),), eshape))
            out = consumers[consumer][0](full, ev)
            e = c.random_float(c.case_rng(cid + "/e"), eshape, dt)
            return c.make_module([*params, ev], out, topo), c.ENTRY, [*vals, e]

        return build

    for consumer, (_, ops) in consumers.items():
        for dt in (F32, BF16):
            add(f"sharded/partial-completion-feeds/{consumer}/{dt}", "sharding",
                feeds(consumer, dt), ops=("MatMul", "Reshard", *ops), dtypes=(dt,),
                spec=_S_PARTIAL_FEEDS, tier="quick")

    def order3(dt: DType) -> Callable:
        cid = f"sharded/partial-completion-order/mesh3-exp/{dt}"

        def build():
            mesh, topo = c.make_mesh((3,))
            mm, params, vals = split_k(mesh, dt, cid)
            full = c.make_call(Reshard(layout=c.shard_layout(mesh, (Broadcast(),), (4, 3))), mm)
            return c.make_module(params, c.make_call(Unary(UnaryKind.EXP), full), topo), c.ENTRY, vals

        return build

    for dt in (F32, BF16):
        add(f"sharded/partial-completion-order/mesh3-exp/{dt}", "sharding", order3(dt),
            ops=("MatMul", "Reshard", "Unary", "Unary.exp"), dtypes=(dt,),
            spec=_S_PARTIAL_FEEDS, tier="quick")

    def max_feeds(dt: DType) -> Callable:
        def build():
            mesh, topo = c.make_mesh((3,))
            a = c.values_array([1.0, -0.0, 0.0, np.nan, -np.inf, 2.5], dt)
            x = c.make_var("x", (6,), dt, c.shard_layout(mesh, (Partial("max"),), (6,)))
            full = c.make_call(Reshard(layout=c.shard_layout(mesh, (Broadcast(),), (6,))), x)
            return c.make_module([x], c.make_call(Unary(UnaryKind.NEG), full), topo), c.ENTRY, [a]

        return build

    for dt in (F32, BF16):
        add(f"sharded/partial-max-completion-feeds/neg/{dt}", "sharding", max_feeds(dt),
            ops=("Reshard", "Unary", "Unary.neg"), dtypes=(dt,), spec=_S_PARTIAL_FEEDS,
            tier="quick")

    # reshapes of sharded values, then an all-gather (the D146 shapes plus Broadcast / Partial)
    reshapes = {
        "split-rule1-whole-positions": ((4, 6), (4, (2, 3)), (Split(0),), (4, 2, 3)),
        "split-refined-outer-position": ((12,), ((2, 6),), (Split(0),), (2, 6)),
        "split-rule2-divided-position": ((12,), (12,), (Split(0),), (6, 2)),
        "split-rule1-merge": ((2, 3, 4), (2, 3, 4), (Split(0),), (2, 12)),
        "broadcast": ((4, 6), (4, 6), (Broadcast(),), (6, 4)),
    }

    def reshape_case(name: str, dt: DType) -> Callable:
        shape, layout, attrs, new = reshapes[name]
        cid = f"sharded/reshape/{name}/{dt}"

        def build():
            mesh, topo = c.make_mesh((2,))
            lay = ShardLayout(mesh, attrs, Layout(layout))
            x = c.make_var("x", shape, dt, lay)
            r = c.make_call(Reshape(new), c.make_call(Unary(UnaryKind.NEG), x))
            out = c.make_call(Reshard(layout=c.shard_layout(mesh, (Broadcast(),), new)), r)
            xv = c.random_float(c.case_rng(cid), shape, dt)
            return c.make_module([x], out, topo), c.ENTRY, [xv]

        return build

    for name in reshapes:
        for dt in (F32, BF16):
            add(f"sharded/reshape/{name}/{dt}", "sharding", reshape_case(name, dt),
                ops=("Reshape", "Reshard", "Unary", "Unary.neg"), dtypes=(dt,),
                spec=_S_RESHAPE, tier="quick")

    def reshape_partial(dt: DType) -> Callable:
        cid = f"sharded/reshape/partial-sum/{dt}"

        def build():
            mesh, topo = c.make_mesh((2,))
            mm, params, vals = split_k(mesh, dt, cid)
            r = c.make_call(Reshape((12,)), mm)
            out = c.make_call(Reshard(layout=c.shard_layout(mesh, (Broadcast(),), (12,))), r)
            return c.make_module(params, out, topo), c.ENTRY, vals

        return build

    for dt in (F32, BF16):
        add(f"sharded/reshape/partial-sum/{dt}", "sharding", reshape_partial(dt),
            ops=("MatMul", "Reshape", "Reshard"), dtypes=(dt,), spec=_S_RESHAPE, tier="quick")

    def ordered_vs_permuted(dt: DType) -> Callable:
        def build():
            # [2^25, 1, -2^25, 0]: every order-preserving tree gives 0 (1 is absorbed by 2^25
            # or 1 - 2^25 rounds to -2^25), a permutation pairing 2^25 with -2^25 first gives 1
            m = 2.0 ** 25
            a = c.values_array([[m, 1.0, -m, 0.0], [0.0, -m, 1.0, m], [1.0, m, 1.0, -m],
                         [m, -1.0, -m, 0.5]], dt)
            x = c.make_var("x", a.shape, dt)
            out = c.make_call(Reduce((1,), keepdim=False, kind=ReduceKind.SUM,
                                 policy="ordered_tree"), x)
            return c.make_module([x], out), c.ENTRY, [a]

        return build

    for dt in (F32, BF16):
        add(f"spec/reduce/ordered-tree-rejects-permutations/{dt}", "tensor",
            ordered_vs_permuted(dt), ops=("Reduce", "Reduce.sum"), dtypes=(dt,),
            spec="Tile design: ordered_tree may \"Regroup; preserve leaf order\", "
                 "unordered_tree may \"Regroup and permute contributions\"", tier="quick")

    def mma_zeros(dt: DType, reassoc: bool) -> Callable:
        def build():
            # row 0: every product -0 (+0 from the zeros seed); row 1 mixes signs; row 2 has one
            # +0 product among -0 ones
            a = c.values_array([[-0.0, 1.0, -0.0], [1.5, -2.0, 0.25], [0.0, -0.0, 1.0]], dt)
            b = c.values_array([[1.0, -3.0], [-0.0, 0.5], [2.0, -0.0]], dt)
            av, bv = c.make_var("a", (3, 3), dt), c.make_var("b", (3, 2), dt)
            out = c.make_call(MatMul(allow_reassociation=reassoc), av, bv)
            return c.make_module([av, bv], out), c.ENTRY, [a, b]

        return build

    for dt in (F32, BF16):
        add(f"spec/matmul/zeros-seeded-negative-zero-products/{dt}", "nn",
            mma_zeros(dt, False), ops=("MatMul",), dtypes=(dt,), spec=_S_MMA_ZEROS,
            tier="quick")

    def topk_set(dt: DType) -> Callable:
        def build():
            a = c.values_array([[5, -1, 3, 9, 0, 2, 7], [1, 1, 1, 1, 1, 1, 1],
                         [-0.0, 0.0, -2, 4, np.nan, 4, 8]], dt)
            x = c.make_var("x", a.shape, dt)
            t = c.make_call(TopK(4, axis=1, sorted=False), x)
            out = Tuple((TupleGetItem(t, 0), TupleGetItem(t, 1),
                         c.make_call(Unary(UnaryKind.NEG), TupleGetItem(t, 0))))
            return c.make_module([x], out), c.ENTRY, [a]

        return build

    for dt in (F32, BF16):
        add(f"spec/topk/unsorted-selected-set/{dt}", "tensor", topk_set(dt),
            ops=("TopK", "Unary", "Unary.neg"), dtypes=(dt, DType.I64), spec=_S_TOPK_SET,
            tier="quick")
