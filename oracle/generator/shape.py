"""Generator builders of the shape ops (ShapeOf, Rank, ShapeExtract,
ShapeCompose) (split from ``oracle/programs.py``, D384; the package mirrors ``semantics/ops``).

Each builder draws attributes and operands that satisfy the op's type rule,
reusing pool values where their types fit, and registers itself in ``base.BUILDERS``; see
``oracle/programs.py``'s docstring.
"""

from __future__ import annotations

from tilefoundry.oracle.generator.base import _builder
from tilefoundry.oracle.generator.engine import _Gen, _Scope, _Val
from tilefoundry.semantics.ops import (
    Rank,
    ShapeCompose,
    ShapeExtract,
    ShapeOf,
)
from tilefoundry.semantics.types import (
    DimType,
    ShapeType,
)


@_builder(ShapeOf)
def build_shape_of(g: _Gen, sc: _Scope) -> bool:
    x = g.pick(g.tensors(sc, f4=True))
    return x is not None and g.apply(sc, ShapeOf(), [x]) is not None


@_builder(Rank)
def build_rank(g: _Gen, sc: _Scope) -> bool:
    x = g.pick(g.tensors(sc, f4=True))
    return x is not None and g.apply(sc, Rank(), [x]) is not None


def _shape_value(g: _Gen, sc: _Scope) -> _Val | None:
    shapes = [v for v in sc.pool if isinstance(v.type, ShapeType) and v.type.rank >= 1]
    if shapes and g.src.boolean(0.7):
        return g.src.choice(shapes)
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1, f4=True))
    if x is None:
        return None
    out = g.apply(sc, ShapeOf(), [x])
    return out[0] if out else None


@_builder(ShapeExtract)
def build_shape_extract(g: _Gen, sc: _Scope) -> bool:
    s = _shape_value(g, sc)
    if s is None:
        return False
    r = s.type.rank
    return g.apply(sc, ShapeExtract(g.src.integer(-r, r - 1)), [s]) is not None


@_builder(ShapeCompose)
def build_shape_compose(g: _Gen, sc: _Scope) -> bool:
    dims = [v for v in sc.pool if isinstance(v.type, DimType)]
    n = g.src.integer(0, 3)
    parts = []
    for _ in range(n):
        if dims and g.src.boolean(0.6):
            parts.append(g.src.choice(dims))
            continue
        s = _shape_value(g, sc)
        if s is None:
            break
        r = s.type.rank
        out = g.apply(sc, ShapeExtract(g.src.integer(-r, r - 1)), [s])
        if out:
            parts.append(out[0])
            dims.append(out[0])
    return g.apply(sc, ShapeCompose(), parts) is not None
