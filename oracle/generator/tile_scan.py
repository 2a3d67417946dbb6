"""Generator builders of Scan (split from ``oracle/programs.py``, D384; the package mirrors
``semantics/ops``).

Each builder draws attributes and operands that satisfy the op's type rule, reusing pool values
where their types fit, and registers itself in ``base.BUILDERS``; see ``oracle/programs.py``'s
docstring.
"""

from __future__ import annotations

from tilefoundry.oracle.generator.base import _builder
from tilefoundry.oracle.generator.engine import _Gen, _Scope, _split_axes, _table_ok
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_scan import (
    SCAN_COMBINES,
    Scan,
    scan_combine_refuses,
)


def _scan_combines(dt: DType) -> list[str]:
    return [c for c in SCAN_COMBINES if not scan_combine_refuses(c, dt)]


_SCAN_SEEDS = {"int": (-3, -1, 0, 2, 3), "float": (-0.0, 0.0, 1.0, -2.5, 0.5, 6.0)}


@_builder(Scan)
def build_scan(g: _Gen, sc: _Scope) -> bool:
    from tilefoundry.semantics.typeinfer.tile_scan import seed_problem

    src = g.src
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1 and
                         len(_split_axes(v.type)) < v.type.rank))
    if x is None:
        return False
    xt = x.type
    combines = [c for c in _scan_combines(xt.dtype) if _table_ok("Scan", c, xt)]
    if not combines:
        return False
    c = src.choice(combines)
    axis = src.choice([a for a in range(xt.rank) if a not in _split_axes(xt)])
    seed = None
    partial = xt.shard is not None and bool(xt.shard.partials)
    if src.boolean(0.5) and not (partial and c in ("add", "mul")):
        pool = _SCAN_SEEDS["float" if xt.dtype.is_float else "int"]
        ok = [v for v in pool if seed_problem(v, xt.dtype) is None]
        seed = src.choice(ok) if ok else None
    pols = [p for p in Scan.POLICIES if g.limit is None or p in g.limit.policies]
    if not pols:
        return False
    ax = axis - xt.rank if src.boolean(0.3) else axis
    op = Scan(ax, c, inclusive=src.boolean(0.5), seed=seed, policy=src.choice(pols))
    return g.apply(sc, op, [x]) is not None
