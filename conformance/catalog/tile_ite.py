"""Conformance cases of ``ite`` behind a float comparison with NaN operands (issue 37, blind
spot 4): ``ite(a < b, t, f)`` and the other ordered comparisons, with NaN in ``a``, in ``b`` and
in both. An ordered comparison with a NaN operand is false (``ne`` true), so ``f`` is chosen; a
backend that computes ``a < b`` as ``!(a >= b)`` picks ``t`` there. Quick tier, f32 / bf16 / f16.
"""

from __future__ import annotations

import numpy as np

from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.ops import Binary, BinaryKind, Select

__all__ = ["tile_ite_nan_cases"]

S_ITE_NAN = ('Tile design: "ite selects already-computed values; it is not lazy control flow"; '
             'IEEE 754-2019 5.11: every ordered comparison involving a NaN is false (unordered), '
             '"!=" true.')


def tile_ite_nan_cases(acc) -> None:
    from tilefoundry.conformance.catalog import build as c

    rows_a = [["nan", "1", "nan", "-0", "nan", "inf"], ["2", "-inf", "0", "nan", "-1", "nan"]]
    rows_b = [["1", "nan", "nan", "0", "-inf", "nan"], ["2", "nan", "-0", "-1", "nan", "nan"]]
    for dt in (DType.F32, DType.BF16, DType.F16):
        for kind in (BinaryKind.LT, BinaryKind.LE, BinaryKind.GT, BinaryKind.GE, BinaryKind.EQ,
                     BinaryKind.NE):
            def build(d=dt, k=kind):
                shape = (2, 6)
                a, b = c.make_var("a", shape, d), c.make_var("b", shape, d)
                t, f = c.make_var("t", shape, d), c.make_var("f", shape, d)
                cond = c.make_call(Binary(k), a, b)
                mod = c.make_module([a, b, t, f], c.make_call(Select(), cond, t, f))
                return mod, c.ENTRY, [c.rows_array(d, rows_a), c.rows_array(d, rows_b),
                                      c.values_array(np.full(shape, 1.0), d),
                                      c.values_array(np.full(shape, -1.0), d)]
            c_id = f"spec/tile/ite/nan-compare-condition-{kind.value}/{dt}"
            acc.add(c_id, "tile", build, ops=("Select", "Binary"), dtypes=(dt, DType.BOOL),
                    spec=S_ITE_NAN, tier="quick")
