"""Generator builders of Sort (split from ``oracle/programs.py``, D384; the package mirrors
``semantics/ops``).

Each builder draws attributes and operands that satisfy the op's type rule, reusing pool values
where their types fit, and registers itself in ``base.BUILDERS``; see ``oracle/programs.py``'s
docstring.
"""

from __future__ import annotations

from tilefoundry.oracle.generator.base import _builder
from tilefoundry.oracle.generator.engine import _Gen, _Scope, _split_axes, _table_ok
from tilefoundry.semantics.ops.tile_sort import Sort


@_builder(Sort)
def build_sort(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1 and _table_ok("Sort", "-", v.type) and
                         len(_split_axes(v.type)) < v.type.rank))
    if x is None:
        return False
    xt = x.type
    axis = src.choice([a for a in range(xt.rank) if a not in _split_axes(xt)])
    ax = axis - xt.rank if src.boolean(0.3) else axis
    # nan="error" only where x has no NaN by construction would need value tracking: the
    # generator draws "last" / "first" (the catalog covers "error")
    op = Sort(ax, descending=src.boolean(0.5), nan=src.choice(("last", "first")))
    return g.apply(sc, op, [x]) is not None
