"""Generator builders of the math family (Binary, Unary) (split from ``oracle/programs.py``, D384;
the package mirrors ``semantics/ops``).

Each builder draws attributes and operands that satisfy the op's type rule, reusing pool values
where their types fit, and registers itself in ``base.BUILDERS``; see ``oracle/programs.py``'s
docstring.
"""

from __future__ import annotations

from tilefoundry.oracle.generator.base import _builder
from tilefoundry.oracle.generator.config import BOOL
from tilefoundry.oracle.generator.engine import (
    _binary_dtype_ok,
    _bshape,
    _Gen,
    _Scope,
    _table_ok,
    _Val,
)
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.ops.math import FLOAT_ONLY_UNARY, NUMERIC_UNARY
from tilefoundry.semantics.types import (
    TensorType,
)


@_builder(Binary)
def build_binary(g: _Gen, sc: _Scope) -> bool:
    kinds = g.kinds(Binary, BinaryKind)
    if not kinds:
        return False
    kind = g.src.choice(kinds)
    lhs = g.pick(g.tensors(sc, lambda v: _binary_dtype_ok(kind, v.type.dtype)))
    if lhs is None:
        return False
    lt = lhs.type
    sharded = lt.shard is not None

    def rhs_ok(v: _Val) -> bool:
        t = v.type
        if t.dtype is not lt.dtype:
            return False
        if sharded or t.shard is not None:
            return tuple(t.shape) == tuple(lt.shape) or (t.shard is None and
                                                         len(t.shape) <= lt.rank and
                                                         _bshape(lt.shape, t.shape))
        return _bshape(lt.shape, t.shape)

    r = g.src.integer(0, 9)
    rhs = lhs if r < 2 else g.pick(g.tensors(sc, rhs_ok)) if r < 7 else None
    if rhs is None:
        k = g.src.integer(0, lt.rank)
        shape = tuple(1 if g.src.boolean(0.25) else d for d in lt.shape[k:])
        if not g.can_leaf(sc, shape):
            shape = ()
        rhs = g.leaf(sc, TensorType(shape, lt.dtype))
        if rhs is None:
            return False
    args = [lhs, rhs] if g.src.boolean(0.7) or (rhs.type.shard is None and sharded) \
        else [rhs, lhs]
    return g.apply(sc, Binary(kind), args) is not None


#: the Unary dtype facts (ops/math.py, D420)
_UNARY_FLOAT = FLOAT_ONLY_UNARY
_UNARY_NUMERIC = NUMERIC_UNARY


def _unary_ok(kind: UnaryKind, dt: DType) -> bool:
    if kind is UnaryKind.LOGICAL_NOT:
        return dt is BOOL
    if kind in _UNARY_FLOAT:
        return dt.is_float
    return dt is not BOOL


@_builder(Unary)
def build_unary(g: _Gen, sc: _Scope) -> bool:
    kinds = g.kinds(Unary, UnaryKind)
    if not kinds:
        return False
    kind = g.src.choice(kinds)
    x = g.pick(g.tensors(sc, lambda v: _unary_ok(kind, v.type.dtype) and
                         _table_ok("Unary", kind.value, v.type)))
    return x is not None and g.apply(sc, Unary(kind), [x]) is not None
