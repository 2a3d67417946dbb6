"""Generator builders of Reshard and Local (split from ``oracle/programs.py``, D384; the package
mirrors ``semantics/ops``).

Each builder draws attributes and operands that satisfy the op's type rule, reusing pool values
where their types fit, and registers itself in ``base.BUILDERS``; see ``oracle/programs.py``'s
docstring.
"""

from __future__ import annotations

from tilefoundry.oracle.generator.base import _builder
from tilefoundry.oracle.generator.config import BOOL, F8E8M0
from tilefoundry.oracle.generator.engine import _Gen, _partials, _Scope, _static
from tilefoundry.oracle.strategies import (
    draw_shard_layout,
)
from tilefoundry.semantics.ops import (
    Local,
    Reshard,
)
from tilefoundry.semantics.types import (
    REDUCTIONS,
    Broadcast,
    Layout,
    ShardLayout,
    simplify,
)


# ---- sharding ------------------------------------------------------------------------------
@_builder(Reshard)
def build_reshard(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    if g.mesh is None:  # unsharded programs: the identity Reshard (no layout / storage change)
        x = g.pick(g.tensors(sc))
        return x is not None and g.apply(sc, Reshard(), [x]) is not None
    x = g.pick(g.tensors(sc, lambda v: _static(v.type.shape)))
    if x is None:
        return False
    t = x.type
    numeric = t.dtype is not BOOL and t.dtype is not F8E8M0 and x.bound is not None
    lay = draw_shard_layout(src, tuple(simplify(d) for d in t.shape), g.mesh,
                            partials=REDUCTIONS if numeric else ())
    return g.apply(sc, Reshard(layout=lay), [x]) is not None


@_builder(Local)
def build_local(g: _Gen, sc: _Scope) -> bool:
    # Only a Local of an all-Broadcast value: its device view *is* the value, so the program
    # keeps an unsharded twin (erase_sharding refuses the Local of a Split / Partial value).
    x = g.pick(g.tensors(sc, lambda v: v.type.shard is not None and
                         v.type.shard.is_fully_broadcast))
    if x is None and g.mesh is not None:  # Reshard a value to Broadcast first
        y = g.pick(g.tensors(sc, lambda v: _static(v.type.shape) and (
            not _partials(v.type) or v.bound is not None)))
        if y is None:
            return False
        target = ShardLayout(g.mesh, (Broadcast(),) * len(g.mesh.axis_names),
                             Layout(tuple(simplify(d) for d in y.type.shape)))
        out = g.apply(sc, Reshard(layout=target), [y])
        x = out[0] if out else None
    if x is None:
        return False
    out = g.apply(sc, Local(), [x], local=True)
    return out is not None
