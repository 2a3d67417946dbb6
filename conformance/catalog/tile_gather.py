"""Conformance cases of Gather's ``fill`` (D388) and the Tile design's own Hillis–Steele scan
written in IR with it:

    auto prefix = x;
    for (int64_t distance = 1; distance < width; distance *= 2) {
        auto left = gather(prefix, iota(columns) - distance, columns, 0.0f);
        prefix = left + prefix;
    }

Each case returns the chain's prefixes and ``scan(x)`` side by side; for integers the two are
equal (``tests/conformance/test_catalog_tile_gather.py`` checks it on the reference), for
floats the chain is one ordered-tree regrouping of each prefix. Quick tier."""

from __future__ import annotations

import numpy as np

from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.ir import Constant, Tuple
from tilefoundry.semantics.ops import Binary, BinaryKind, Gather, Scan

__all__ = ["hillis_steele", "tile_gather_cases"]

S_FILL = ('Tile design: "gather supplies a logical shift with defined boundary fill; a bare '
          'out-of-bounds reindex would not."')
S_HS = ('Tile design: "auto left = gather(prefix, iota(columns) - distance, columns, 0.0f); '
        'prefix = left + prefix; ... For length n, this direct Hillis–Steele chain has O(n log n) '
        'work and O(log n) depth."')


def hillis_steele(c, x, n: int, dt: DType):
    """The design's doubling chain over axis 1 of ``x`` (extent ``n``) in IR."""
    prefix = x
    iota = Constant(np.arange(n, dtype=np.int32))
    d = 1
    while d < n:
        idx = c.make_call(Binary(BinaryKind.SUB), iota, Constant(np.asarray(d, np.int32)))
        left = c.make_call(Gather(1, fill=0 if dt.is_int else 0.0), prefix, idx)
        prefix = c.make_call(Binary(BinaryKind.ADD), left, prefix)
        d *= 2
    return prefix


def tile_gather_cases(acc) -> None:
    from tilefoundry.conformance.catalog import build as c

    add = acc.add

    def hs_case(dt: DType, shape: tuple, cid: str):
        def build():
            r = c.case_rng(cid)
            if dt.is_int:
                a = r.integers(-50, 50, shape).astype(dt.storage)
            else:
                t = 2.0 ** -24
                a = c.values_array(r.choice([1.0, t, -t, 3.5, -2.0, 0.25, 1e6], shape), dt)
            x = c.make_var("x", shape, dt)
            body = Tuple((hillis_steele(c, x, shape[1], dt), c.make_call(Scan(1, "add"), x)))
            return c.make_module([x], body), c.ENTRY, [a]
        return build

    for dt, shape in ((DType.I32, (3, 13)), (DType.I8, (2, 8)), (DType.F32, (3, 11)),
                      (DType.BF16, (2, 16))):
        cid = f"spec/tile/scan/hillis-steele-in-ir/{dt}"
        add(cid, "tile", hs_case(dt, shape, cid), ops=("Gather", "Binary", "Scan"),
            dtypes=(dt, DType.I32), spec=S_HS, tier="quick")

    def fill_case(dt: DType, fill, bd: int):
        def build():
            shape = (3, 6)
            x = c.make_var("x", shape, dt)
            if bd:
                i = c.make_var("i", (3, 4), DType.I32)
                idx = np.array([[-1, 0, 5, 6], [2, -7, 3, 100], [0, 1, 2, 3]], np.int32)
            else:
                i = c.make_var("i", (5,), DType.I32)
                idx = np.array([-1, 0, 5, 6, -6], np.int32)
            if dt.is_float:
                a = c.rows_array(dt, [["nan", "-0", "1", "inf", "-1", "0.5"],
                                 ["2", "nan", "minsub", "-max", "3", "-0"],
                                 ["1", "2", "3", "4", "5", "-inf"]])
            else:
                a = np.arange(18).reshape(shape).astype(dt.storage)
            return c.make_module([x, i], c.make_call(Gather(1, bd, fill=fill), x, i)), c.ENTRY, [a, idx]
        return build

    for dt, fill in ((DType.F32, -0.0), (DType.F32, 2.5), (DType.BF16, -1.5), (DType.F16, 0.0),
                     (DType.FP8E4M3, 0.5), (DType.I32, -3), (DType.U8, 255), (DType.BOOL, 1)):
        for bd in (0, 1):
            fs = str(fill).replace("-", "m")
            add(f"spec/tile/gather-fill/fill-{fs}-batch{bd}/{dt}", "tile",
                fill_case(dt, fill, bd), ops=("Gather",), dtypes=(dt, DType.I32), spec=S_FILL,
                tier="quick")
