"""Program-generator builders of the flagged scans (MaskedScan, SegmentedScan), registered into
``BUILDERS`` when ``oracle.programs`` imports this module. The draw mirrors Scan's:
an unsharded x of rank >= 1, a combine its dtype takes, an axis, a seed from Scan's pool when it
is exact in x's dtype, a policy the capabilities allow, and a fresh bool leaf of x's shape as
the mask / heads."""

from __future__ import annotations

from tilefoundry.oracle.generator.base import _builder
from tilefoundry.oracle.generator.tile_scan import _SCAN_SEEDS, _scan_combines
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_scan_flags import MaskedScan, SegmentedScan
from tilefoundry.semantics.types import TensorType


def _build(g, sc, cls: type) -> bool:
    from tilefoundry.semantics.typeinfer.tile_scan import seed_problem

    src = g.src
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1 and v.type.shard is None,
                         sharded=False))
    if x is None:
        return False
    xt = x.type
    combines = _scan_combines(xt.dtype)
    if not combines:
        return False
    c = src.choice(combines)
    axis = src.choice(list(range(xt.rank)))
    seed = None
    if src.boolean(0.5):
        pool = _SCAN_SEEDS["float" if xt.dtype.is_float else "int"]
        ok = [v for v in pool if seed_problem(v, xt.dtype) is None]
        seed = src.choice(ok) if ok else None
    pols = [p for p in cls.POLICIES if g.limit is None or p in g.limit.policies]
    if not pols:
        return False
    flags = g.leaf(sc, TensorType(tuple(xt.shape), DType.BOOL),
                   name="m" if cls is MaskedScan else "h")
    if flags is None:
        return False
    op = cls(axis, c, inclusive=src.boolean(0.5), seed=seed, policy=src.choice(pols))
    return g.apply(sc, op, [x, flags]) is not None


@_builder(MaskedScan)
def build_masked_scan(g, sc) -> bool:
    return _build(g, sc, MaskedScan)


@_builder(SegmentedScan)
def build_segmented_scan(g, sc) -> bool:
    return _build(g, sc, SegmentedScan)
