"""Kernel-IR loads and stores at data-dependent offsets (``validate/symexec.py``: ``_gather``,
``_scatter``, D514): run on input variables with the inputs substituted afterwards, they agree
with kernel-interp — in-range, repeated and out-of-range indices (a load clips into the buffer,
a Gather's fill replaces an out-of-range read) — and an expansion past ``MAX_SCATTER`` is
"unsupported" with the reason."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.ops import Gather
from tilefoundry.semantics.ops.tile_sort import Sort
from tilefoundry.validate import symexec
from tilefoundry.validate.agree import agreement
from tilefoundry.validate.encode import Unsupported

from .helpers import lowered, module_of, values


@pytest.mark.parametrize("fill", [None, 2.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gather_by_data_indices_agrees_with_interp(fill, seed):
    m = module_of(Gather(0, 0, fill), [DType.BF16, DType.I32], [(5,), (7,)])
    p = lowered(m, [(5,), (7,)])
    rng = np.random.default_rng(seed)
    lo, hi = (-3, 9) if fill is not None else (0, 5)  # None: every index must be in range
    idx = rng.integers(lo, hi, 7).astype(np.int32)
    idx[:2] = idx[2]  # a repeated index
    assert agreement(p, [values(DType.BF16, 5, seed), idx], variables=True) == []


def test_an_expansion_past_the_limit_is_unsupported(monkeypatch):
    monkeypatch.setattr(symexec, "MAX_SCATTER", 4)
    p = lowered(module_of(Sort(), [DType.F32], [(2, 3)]), [(2, 3)])
    with pytest.raises(Unsupported, match=r"data-dependent addressing of .* lanes over"):
        agreement(p, [values(DType.F32, 6, 1).reshape(2, 3)], variables=True)


def test_the_offset_interval_of_a_rank():
    """A rank (a sum of ``If(c, 1, 0)``) plus a row base reaches only that row's positions."""
    import z3

    cs = [z3.Bool(f"c{i}") for i in range(4)]
    one, nil = z3.BitVecVal(1, 64), z3.BitVecVal(0, 64)
    rank = sum((z3.If(c, one, nil) for c in cs[1:]), z3.If(cs[0], one, nil))
    assert symexec._offset_range(z3.BitVecVal(8, 64) + rank, 100) == (8, 12)
    assert symexec._offset_range(rank * z3.BitVecVal(3, 64), 10) == (0, 9)  # clipped
    assert symexec._offset_range(z3.BitVec("free", 64), 10) == (0, 9)  # unbounded
    big = z3.BitVecVal(1 << 62, 64)
    assert symexec._offset_range(big + big + rank, 10) == (0, 9)  # could wrap: no bound
