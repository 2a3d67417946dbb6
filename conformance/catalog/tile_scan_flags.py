"""Conformance cases of the flagged scans (``MaskedScan``, ``SegmentedScan``; D385, D386), each
citing the Tile design sentence it tests. Quick: the mask contract (masked lanes hold NaN / inf /
huge values that must never enter a prefix; all-masked prefixes; seeds), segment heads (the seed
only before the first head, heads at x0 and at every lane, exclusive output at a head), wrapping
integers, NaN / signed zeros through max / min, ordered-tree regrouping, a long axis (the
TileLoop path). Full: the special values through every float dtype and both policies."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.ops.tile_scan_flags import MaskedScan, SegmentedScan

__all__ = ["tile_scan_flag_cases"]

F32, BF16, F16, I32, I8, U8, BOOL = (DType.F32, DType.BF16, DType.F16, DType.I32, DType.I8,
                                     DType.U8, DType.BOOL)
E4M3 = DType.FP8E4M3

S_MASK = ('Tile design: "Masked contributions are skipped under a defined mask contract, rather '
          'than treating every padding value as a valid identity."')
S_SEG = ('Tile design: "segmented scans can use a lifted (head, value) associative state"; a '
         'per-chunk seed is incoming state, "included once, in its specified position".')
S_REC = ('Tile design: "left prefix[0] = z; left prefix[i + 1] = op(left prefix[i], x[i]); '
         'inclusive[i] = left prefix[i + 1]; exclusive[i] = left prefix[i]"')
S_TREE = ('Tile design: "An ordered-tree scan may regroup each prefix when the merge/math '
          'contract permits it, but must preserve that prefix\'s leaf sequence and include the '
          'seed once."')
S_SPECIAL = ("ARCHITECTURE.md, Numeric contracts (special values: NaN class, ±0 and subnormals "
             "are part of the contract) through the tile family's {op}.")

#: mask / heads patterns over 6 lanes (3 rows): masked-out runs, an all-false row, x0 flagged
FLAGS6 = [[1, 0, 1, 1, 0, 1], [0, 0, 0, 0, 0, 0], [1, 1, 0, 0, 1, 0]]
HEADS6 = [[0, 0, 1, 0, 1, 1], [1, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0]]


def tile_scan_flag_cases(acc) -> None:
    from tilefoundry.conformance.catalog import build as c

    add = acc.add

    def case(op, dt: DType, make: Callable[[], np.ndarray], flags) -> Callable[[], tuple]:
        def build():
            a = make()
            f = np.asarray(flags() if callable(flags) else flags, bool)
            x = c.make_var("x", a.shape, dt)
            m = c.make_var("m" if type(op) is MaskedScan else "h", a.shape, BOOL)
            return c.make_module([x, m], c.make_call(op, x, m)), c.ENTRY, [a, f]
        return build

    def name(op) -> str:
        return "scan-masked" if type(op) is MaskedScan else "scan-segmented"

    rows = [[1, 2, 3, 4, 5, 6], [-1, 0, 7, -7, 2, 3], [10, -3, 3, 1, 0, 2]]
    # --- the mask contract: masked lanes never enter, whatever they hold --------------------
    for dt in (F32, BF16, I32, I8):
        for inc in (True, False):
            w = "inclusive" if inc else "exclusive"
            for seed in (None, 2):
                sd = "" if seed is None else "-seed2"
                op = MaskedScan(1, "add", inclusive=inc, seed=seed)
                add(f"spec/tile/scan-masked/{w}{sd}/{dt}", "tile",
                    case(op, dt, lambda d=dt: c.values_array(rows, d), FLAGS6),
                    ops=("MaskedScan",), dtypes=(dt, BOOL), spec=S_MASK, tier="quick")
    for dt in (F32, BF16, F16):  # padding that is no identity: NaN, inf, huge in masked lanes
        for comb in ("add", "max", "min"):
            op = MaskedScan(1, comb, seed=None if comb != "add" else -0.0)
            add(f"spec/tile/scan-masked/padding-is-not-identity-{comb}/{dt}", "tile",
                case(op, dt, lambda d=dt: c.rows_array(d, [["1", "nan", "2", "inf", "-1", "-inf"],
                                                      ["nan", "nan", "nan", "nan", "nan", "nan"],
                                                      ["-0", "max", "0", "-max", "3", "nan"]]),
                     FLAGS6), ops=("MaskedScan",), dtypes=(dt, BOOL), spec=S_MASK, tier="quick")
    for dt in (I32, U8, BOOL):
        for comb in ("max", "min"):
            add(f"spec/tile/scan-masked/{comb}-all-masked-identity/{dt}", "tile",
                case(MaskedScan(1, comb, inclusive=False), dt,
                     lambda d=dt: c.values_array([[1, 0, 1, 1, 0, 1]] * 3, d), FLAGS6),
                ops=("MaskedScan",), dtypes=(dt, BOOL), spec=S_MASK, tier="quick")
    for dt in (I8, U8, I32):
        add(f"spec/tile/scan-masked/add-mul-wrap/{dt}", "tile",
            case(MaskedScan(-1, "mul", seed=3), dt,
                 lambda d=dt: c.values_array([[2, 3, 5, 7, 11, 13], [1, 2, 3, 4, 5, 6],
                                       [9, 9, 9, 9, 9, 9]], d), FLAGS6),
            ops=("MaskedScan",), dtypes=(dt, BOOL), spec=S_REC, tier="quick")
    # --- segments: the lifted (head, value) state; the seed before the first head only -------
    for dt in (F32, BF16, I32, I8):
        for inc in (True, False):
            w = "inclusive" if inc else "exclusive"
            for seed in (None, 2):
                sd = "" if seed is None else "-seed2"
                op = SegmentedScan(1, "add", inclusive=inc, seed=seed)
                add(f"spec/tile/scan-segmented/{w}{sd}/{dt}", "tile",
                    case(op, dt, lambda d=dt: c.values_array(rows, d), HEADS6),
                    ops=("SegmentedScan",), dtypes=(dt, BOOL), spec=S_SEG, tier="quick")
    for comb in ("max", "min", "add"):  # every lane a head: each output its own element
        for dt in (F32, I32):
            add(f"spec/tile/scan-segmented/{comb}-every-lane-a-head-seed/{dt}", "tile",
                case(SegmentedScan(0, comb, seed=100 if comb == "max" else -100), dt,
                     lambda d=dt: c.values_array([[1, -2], [3, 4], [-5, 6]], d),
                     np.ones((3, 2), bool)),
                ops=("SegmentedScan",), dtypes=(dt, BOOL), spec=S_SEG, tier="quick")
    for dt in (I8, U8, I32):
        add(f"spec/tile/scan-segmented/mul-wraps-seeded/{dt}", "tile",
            case(SegmentedScan(-1, "mul", seed=3), dt,
                 lambda d=dt: c.values_array([[2, 3, 5, 7, 11, 13], [1, 2, 3, 4, 5, 6],
                                       [9, 9, 9, 9, 9, 9]], d), HEADS6),
            ops=("SegmentedScan",), dtypes=(dt, BOOL), spec=S_SEG, tier="quick")
    for dt in (F32, BF16):
        for comb in ("max", "min"):
            add(f"spec/tile/scan-segmented/{comb}-nan-signed-zeros/{dt}", "tile",
                case(SegmentedScan(1, comb, inclusive=False, seed=-1.0), dt,
                     lambda d=dt: c.rows_array(d, [["-0", "0", "nan", "1", "-0", "2"],
                                              ["0", "-0", "0", "-1", "-2", "-0"],
                                              ["-1", "nan", "3", "nan", "-4", "5"]]), HEADS6),
                ops=("SegmentedScan",), dtypes=(dt, BOOL), spec=S_REC, tier="quick")
    # --- ordered tree: regrouping admitted per prefix, the leaf order and the seed kept ------
    t = 2.0 ** -24
    for cls, flags in ((MaskedScan, [[1, 1, 0, 1, 1, 1]] * 2), (SegmentedScan,
                                                                  [[0, 0, 0, 1, 0, 0]] * 2)):
        for pol in ("fold_left", "ordered_tree"):
            op = cls(1, "add", seed=1.0, policy=pol)
            add(f"spec/tile/{name(op)}/regrouping-{pol.replace('_', '-')}/f32", "tile",
                case(op, F32, lambda: c.values_array([[t, t, 5.0, 1.0, t, t], [t, -1.0, t, t, 1.0, t]],
                                              F32), flags),
                ops=(cls.__name__,), dtypes=(F32, BOOL), spec=S_TREE, tier="quick")
    # --- a long axis (the TileLoop path on small tiles) and an empty one -------------------
    for cls in (MaskedScan, SegmentedScan):
        for dt in (I32, F32):
            cid = f"spec/tile/{name(cls())}/seeded-long-axis/{dt}"
            add(cid, "tile",
                case(cls(1, "add", inclusive=False, seed=7, policy="fold_left"), dt,
                     lambda d=dt, i=cid: c.case_rng(i).integers(0, 50, (2, 41)).astype(d.storage),
                     lambda i=cid: c.case_rng(i + "/flags").random((2, 41)) < 0.3),
                ops=(cls.__name__,), dtypes=(dt, BOOL), spec=S_REC, tier="quick")
            add(f"spec/tile/{name(cls())}/empty-axis/{dt}", "tile",
                case(cls(1, "add", seed=3), dt, lambda d=dt: np.zeros((3, 0), d.storage),
                     np.zeros((3, 0), bool)),
                ops=(cls.__name__,), dtypes=(dt, BOOL), spec=S_REC, tier="quick")
    # --- full: special values through every float dtype, both policies ----------------------
    specials = [["nan", "-0", "0", "inf", "1", "-inf"], ["minsub", "-max", "max", "-1", "0", "3"],
                ["-0", "-0", "-0", "-0", "nan", "2"]]
    for cls, flags in ((MaskedScan, FLAGS6), (SegmentedScan, HEADS6)):
        for dt in (F32, BF16, F16, E4M3):
            for comb in ("add", "max", "min"):
                for pol in ("fold_left", "ordered_tree"):
                    op = cls(1, comb, inclusive=comb != "min", policy=pol)
                    add(f"special/tile/{name(op)}/{comb}-{pol.replace('_', '-')}/{dt}", "tile",
                        case(op, dt, lambda d=dt: c.rows_array(d, specials), flags),
                        ops=(cls.__name__,), dtypes=(dt, BOOL),
                        spec=S_SPECIAL.format(op=cls.__name__), tier="full")
