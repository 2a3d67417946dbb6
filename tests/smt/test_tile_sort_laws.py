"""The tile-family Sort's merge obligation (``smt/obligations/tile_sort.py``): block-local sort +
merge_sorted == sort, and the Top-K merge of the blocks' Top-K == the sort's K-prefix (the Tile
design's merge law) — proved; a planted unstable merge (y's head first on an equal value) is
refuted with a concrete witness."""

from __future__ import annotations

import z3

from tilefoundry.smt.framework import REGISTRY, ProveCtx
from tilefoundry.smt.obligations import tile_sort as TS
from tilefoundry.smt.obligations.laws_topk import IDX_BITS


def test_sort_merge_obligation_is_proved():
    ob = REGISTRY["sort.merge_sorted"]
    assert ob.expect == "proved"
    out = TS.check_sort_merge(ProveCtx())
    assert out.status == "proved", out
    cases = dict(out.sub)
    assert cases["merge_sorted(sort(x), sort(y)) == sort(x ++ y)"] == "proved"
    assert cases["merge_K(topk(x), topk(y)) == take_K(sort(x ++ y)), K = 2"] == "proved"
    assert sum(1 for c in cases if c.startswith("crosscheck")) == 4


def test_an_unstable_merge_is_refuted():
    """Taking y's head when its value (the key without the index) is not below x's head puts
    an equal value of the later block first: the cross-check against ordering.sort fails."""
    def unstable(a, b):
        def take_b(x, y):
            w = x.key.size()
            hi = max(w - IDX_BITS - 1, 0)
            return z3.UGE(z3.Extract(w - 1, hi, y.key), z3.Extract(w - 1, hi, x.key))
        return TS.merge_sorted(a, b, take_b)

    out = TS.check_sort_merge(ProveCtx(), orderings=((False, "last"),), merge=unstable)
    assert out.status == "counterexample", out
    assert out.counterexample and "merged indices" in out.counterexample
