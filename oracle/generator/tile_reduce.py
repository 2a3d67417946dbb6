"""Generator builders of the tile family's reductions (SeededReduce, MaskedReduce, CustomReduce)
(split from ``oracle/programs.py``, D384; the package mirrors ``semantics/ops``).

Each builder draws attributes and operands that satisfy the op's type rule, reusing pool values
where their types fit, and registers itself in ``base.BUILDERS``; see ``oracle/programs.py``'s
docstring.
"""

from __future__ import annotations

import math

import numpy as np

from tilefoundry.oracle.generator.base import _builder
from tilefoundry.oracle.generator.config import BOOL, F8E8M0, F32, I64
from tilefoundry.oracle.generator.engine import _Gen, _Scope, _Val
from tilefoundry.semantics.formats import FORMATS
from tilefoundry.semantics.ir import Constant, Tuple
from tilefoundry.semantics.ops.tile_reduce import (
    SEEDED_KINDS,
    CustomReduce,
    MaskedReduce,
    SeededReduce,
)
from tilefoundry.semantics.reducers import REDUCERS
from tilefoundry.semantics.topk_reducer import TopKMerge
from tilefoundry.semantics.types import (
    TensorType,
    TupleType,
    simplify,
)


# ---- the tile family's reductions (semantics/ops/tile_reduce.py) ------------------------------
def _tile_reduce_axes(g: _Gen, xt: TensorType) -> tuple[int, ...]:
    src = g.src
    axes = [a for a in range(xt.rank) if src.boolean(0.5)]
    if xt.rank and not axes and src.boolean(0.7):
        axes = [src.integer(0, xt.rank - 1)]
    return tuple(a - xt.rank if src.boolean(0.3) else a for a in axes)


def _tile_reduced_shape(xt: TensorType, axes: tuple, keepdim: bool) -> tuple:
    red = {a % max(xt.rank, 1) for a in axes}
    if keepdim:
        return tuple(1 if a in red else d for a, d in enumerate(xt.shape))
    return tuple(d for a, d in enumerate(xt.shape) if a not in red)


def _build_seeded(g: _Gen, sc: _Scope, masked: bool) -> bool:
    x = g.pick(g.tensors(sc, lambda v: v.type.shard is None, sharded=False))
    if x is None:
        return False
    xt = x.type
    src = g.src
    kinds = [k for k in SEEDED_KINDS
             if not (k == "sum" and xt.dtype in (BOOL, F8E8M0))]
    kind = src.choice(kinds)
    axes = _tile_reduce_axes(g, xt)
    keepdim = src.boolean(0.5)
    seed = g.leaf(sc, TensorType(_tile_reduced_shape(xt, axes, keepdim), xt.dtype), name="z")
    if seed is None:
        return False
    args = [x, seed]
    if masked:
        m = g.leaf(sc, TensorType(tuple(xt.shape), BOOL), name="m")
        if m is None:
            return False
        args.append(m)
    cls = MaskedReduce if masked else SeededReduce
    op = cls(axes, kind, src.choice(cls.POLICIES if g.limit is None else g.limit.policies),
             keepdim)
    return g.apply(sc, op, args) is not None


@_builder(SeededReduce)
def build_seeded_reduce(g: _Gen, sc: _Scope) -> bool:
    return _build_seeded(g, sc, False)


@_builder(MaskedReduce)
def build_masked_reduce(g: _Gen, sc: _Scope) -> bool:
    return _build_seeded(g, sc, True)


@_builder(CustomReduce)
def build_custom_reduce(g: _Gen, sc: _Scope) -> bool:
    if g.src.boolean(0.3) and _build_topk_reduce(g, sc):
        return True

    def ok(v: _Val) -> bool:
        return v.type.shard is None and v.type.dtype.is_float and v.type.dtype is not F8E8M0

    x = g.pick(g.tensors(sc, ok, sharded=False))
    if x is None:
        return False
    xt = x.type
    src = g.src
    name = src.choice(tuple(REDUCERS))
    r = REDUCERS[name]
    axes = _tile_reduce_axes(g, xt)
    red = {a % max(xt.rank, 1) for a in axes}
    ext = [simplify(xt.shape[a]) for a in red]
    n = math.prod(ext) if all(isinstance(e, int) for e in ext) else None
    pols = [p for p in (CustomReduce.POLICIES if g.limit is None else g.limit.policies)
            if p.startswith("fold") or (r.merge_contract and n is not None and
                                        n + 1 <= (6 if p == "ordered_tree" else 5))]
    if not pols:
        return False
    keepdim = src.boolean(0.5)
    shape = (*_tile_reduced_shape(xt, axes, keepdim), len(r.state))
    seed = g.leaf(sc, TensorType(shape, F32), name="s")
    if seed is None:
        return False
    op = CustomReduce(axes, name, src.choice(pols), keepdim)
    return g.apply(sc, op, [x, seed]) is not None


def _build_topk_reduce(g: _Gen, sc: _Scope) -> bool:
    """Top-K as a reduce over an indexed Tile (``CustomReduce(TopKMerge(k, largest, nan))``,
    D486): one axis of a tensor whose other extents are static, seeded with identity_K (K empty
    slots per fiber: a Constant pair, as the ``topk_merge`` shorthand seeds it); K from 1 to
    one past the axis's extent (slots past it stay empty). ``nan="error"`` is not drawn (a
    drawn NaN would make the program an expected run-time error)."""
    src = g.src

    def ok(v: _Val) -> bool:
        t = v.type
        return (t.shard is None and t.rank >= 1 and t.dtype is not F8E8M0 and
                FORMATS[t.dtype].evaluable and
                sum(not isinstance(simplify(d), int) for d in t.shape) <= 1)

    x = g.pick(g.tensors(sc, ok, sharded=False))
    if x is None:
        return False
    xt = x.type
    dims = [simplify(d) for d in xt.shape]
    axes = [a for a, d in enumerate(dims)
            if all(isinstance(e, int) for j, e in enumerate(dims) if j != a)]
    if not axes:
        return False
    a = src.choice(axes)
    keepdim = src.boolean(0.3)
    batch = tuple(1 if (d == a and keepdim) else e for d, e in enumerate(dims)
                  if d != a or keepdim)
    n = dims[a] if isinstance(dims[a], int) else 4
    r = TopKMerge(src.integer(1, n + 1), src.boolean(0.5), src.choice(("last", "first")))
    sv = np.zeros((*batch, r.k), FORMATS[xt.dtype].storage)
    si = np.full((*batch, r.k), -1, np.int64)
    seed = _Val(Tuple((Constant(sv), Constant(si))),
                TupleType((TensorType(sv.shape, xt.dtype), TensorType(si.shape, I64))),
                leaf=True)
    axis = a - xt.rank if src.boolean(0.3) else a
    pols = CustomReduce.POLICIES if g.limit is None else g.limit.policies
    op = CustomReduce((axis,), r, src.choice(pols), keepdim)
    return g.apply(sc, op, [x, seed]) is not None
