"""Generator builders of Select and Bitcast (split from ``oracle/programs.py``, D384; the package
mirrors ``semantics/ops``).

Each builder draws attributes and operands that satisfy the op's type rule, reusing pool values
where their types fit, and registers itself in ``base.BUILDERS``; see ``oracle/programs.py``'s
docstring.
"""

from __future__ import annotations

from tilefoundry.oracle.generator.base import _builder
from tilefoundry.oracle.generator.config import BOOL, F32
from tilefoundry.oracle.generator.engine import _bshape, _eq, _Gen, _Scope, _Val
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_select import Bitcast, Select
from tilefoundry.semantics.types import (
    TensorType,
)


@_builder(Select)
def build_select(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    t = g.pick(g.tensors(sc, u32=True))
    if t is None:
        return False
    tt = t.type
    shape = tuple(tt.shape)

    def same(v: _Val) -> bool:
        return v is not t and v.type.dtype is tt.dtype and len(v.type.shape) == len(shape) and \
            all(_eq(a, b) for a, b in zip(v.type.shape, shape, strict=True))

    f = g.pick(g.tensors(sc, same, u32=True)) if src.boolean(0.5) else None
    if f is None:
        f = g.leaf(sc, TensorType(shape, tt.dtype))
        if f is None:
            return False
    conds = g.tensors(sc, lambda v: v.type.dtype is BOOL and _bshape(v.type.shape, shape) and
                      len(v.type.shape) <= len(shape) and v.type.shard is None)
    cond = g.pick(conds) if src.boolean(0.4) else None
    if cond is None:  # the full shape, or a broadcast one (the last axis only)
        cshape = shape if not shape or src.boolean(0.6) else (shape[-1],)
        cond = g.leaf(sc, TensorType(cshape, BOOL))
        if cond is None:
            return False
    return g.apply(sc, Select(), [cond, t, f]) is not None


@_builder(Bitcast)
def build_bitcast(g: _Gen, sc: _Scope) -> bool:
    x = g.pick(g.tensors(sc, lambda v: v.type.dtype in (F32, DType.U32) and
                         (v.type.shard is None or not v.type.shard.partials), u32=True))
    if x is None:
        if not g.only((F32,)):
            return False
        x = g.leaf(sc, TensorType(g.leaf_shape(sc), F32))
        if x is None:
            return False
    to = DType.U32 if x.type.dtype is F32 else F32
    return g.apply(sc, Bitcast(to), [x]) is not None
