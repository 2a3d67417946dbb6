"""Catalog cases of the ``tile`` family (Select / ``ite``, Bitcast, Scan) and the fold_right
orientation example: spec-derived cases quoting the Tile design (``spec/tile/...``) and the
special-value cases every op of the catalog has (``special/tile/...``). All are quick tier and
tiny; inputs are seeded by the case id (``catalog._rng``).

Highlights:

* **Scan, the design's example** — ``[1, 2, 3]`` scans to ``[1, 3, 6]``; a backend that permutes
  the contributions (``[3, 1, 2]`` gives ``[3, 4, 6]``) fails it, also under ``ordered_tree``.
* **Scan, inclusive / exclusive boundaries, seeds, empty / single / ragged axes, non-power-of-two
  lengths, integer wraparound, NaN and signed zeros under max / min**; an ordered-tree f32 add
  whose prefixes change with the grouping (admitted set) next to the same rows under
  ``fold_left`` (exact).
* **Bitcast** f32 -> u32 of -0, subnormals, NaN payloads (quiet and signalling) and back; the
  u32 order of the bits under the comparisons.
* **Select** with a broadcast condition, broadcast operands and special values (bits survive).
* **fold_right orientation** on ``x - state`` over ``[1, 2, 4, 8]``: right = 1 - (2 - (4 - (8 -
  0))) = -5; a reversed left fold (state - x) gives -15.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.semantics.dtypes import DType, from_bits
from tilefoundry.semantics.ir import Constant, GridRegionExpr, Tuple, Var
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Bitcast,
    Cast,
    Gather,
    Scan,
    Select,
    Zeros,
)

__all__ = ["tile_cases"]

F32, BF16, F16, I32, I8, U8, I64, BOOL, U32 = (DType.F32, DType.BF16, DType.F16, DType.I32,
                                               DType.I8, DType.U8, DType.I64, DType.BOOL,
                                               DType.U32)
E4M3 = DType.FP8E4M3

_S_ITE = ("Tile design: \"ite(condition, true_value, false_value) means if-then-else, using the "
          "same name and argument order as Luisa's SIMT DSL. It supports Scalar and Tile values, "
          "including broadcast conditions and operands.\"")
_S_ITE_VALUES = ("Tile design: \"ite selects already-computed values; it is not lazy control "
                 "flow\" — the chosen operand's bits arrive unchanged (NaN, -0, subnormals).")
_S_BITCAST = ("Tile design: \"tile::bitcast<uint32_t>(float_value) and tile::bitcast<float>"
              "(uint_value) reinterpret the storage bits of a Scalar or Tile without numerical "
              "conversion. They preserve the named axes and extents, including zero signs, "
              "subnormals and NaN payloads. This initial API supports only the float32/uint32 "
              "pair\"")
_S_SCAN_EXAMPLE = ("Tile design: \"Moving [1, 2, 3] to [3, 1, 2] preserves an integer sum of 6, "
                   "but changes inclusive prefixes from [1, 3, 6] to [3, 4, 6]. Therefore scan "
                   "must not inherit the permission to globally permute reduction "
                   "contributions.\"")
_S_SCAN_REC = ("Tile design: \"left prefix[0] = z; left prefix[i + 1] = op(left prefix[i], "
               "x[i]); inclusive[i] = left prefix[i + 1]; exclusive[i] = left prefix[i]\"")
_S_SCAN_EMPTY = ("Tile design: \"Empty input produces an empty output; a separate final-state "
                 "result, if added, would be the seed.\"")
_S_SCAN_TREE = ("Tile design: \"An ordered-tree scan may regroup each prefix when the "
                "merge/math contract permits it, but must preserve that prefix's leaf sequence "
                "and include the seed once.\" \"Floating-point regrouping permission does not "
                "imply exact real associativity\"; \"A strict fold preserves the recurrence "
                "above.\"")
_S_SCAN_VALID = ("Tile design: \"Validation should cover noncommutative associative combines, "
                 "seeds, inclusive/exclusive boundaries, empty/single/ragged axes, "
                 "non-power-of-two lengths, ... strict floating-point folds, exceptional values "
                 "and low-precision accumulator conversion.\"")
_S_FOLD_ORIENT = ("Tile design: \"Right fold visits contributions in reverse source order and "
                  "uses the stated element/state operand orientation. The policy does not "
                  "silently change state - element into element - state; doing only a reversed "
                  "left-fold traversal is not the same contract.\" fold_right = op(x0, op(x1, "
                  "op(x2, z))).")
_SPECIAL = ("ARCHITECTURE.md, Numeric contracts (special values: NaN class, ±0 and subnormals are "
            "part of the contract) through the tile family's {op}.")


def tile_cases(acc) -> None:
    from tilefoundry.conformance.catalog import build as c
    from tilefoundry.conformance.catalog.special import _REDUCE_ROWS

    add = acc.add
    ENTRY = c.ENTRY

    # --- Select ---------------------------------------------------------------------------
    def ite_case(dt: DType, cid: str, cshape: tuple, tshape: tuple, fshape: tuple
                 ) -> Callable[[], tuple]:
        def build():
            r = c.case_rng(cid)
            cond = r.random(cshape) < 0.5
            if dt.is_float:
                t = c.fill_shape(c.special_values(dt), tshape, r)
                f = c.fill_shape(c.special_values(dt), fshape, r)
            else:
                t = c.fill_shape(c.int_special_values(dt), tshape, r)
                f = c.fill_shape(c.int_special_values(dt), fshape, r)
            cv, tv, fv = c.make_var("cond", cshape, BOOL), c.make_var("t", tshape, dt), \
                c.make_var("f", fshape, dt)
            return (c.make_module([cv, tv, fv], c.make_call(Select(), cv, tv, fv)), ENTRY,
                    [np.array(cond, order="C"), np.array(t.reshape(tshape), order="C"),
                     np.array(f.reshape(fshape), order="C")])
        return build

    for dt in (F32, BF16, F16, E4M3, I32, U8):
        cid = f"spec/tile/ite/broadcast-condition/{dt}"
        add(cid, "tile", ite_case(dt, cid, (6,), (4, 6), (4, 6)), ops=("Select",),
            dtypes=(dt, BOOL), spec=_S_ITE, tier="quick")
        cid = f"spec/tile/ite/broadcast-operands/{dt}"
        add(cid, "tile", ite_case(dt, cid, (3, 1, 5), (4, 1), ()), ops=("Select",),
            dtypes=(dt, BOOL), spec=_S_ITE, tier="quick")
    for dt in (F32, BF16, F16):
        cid = f"special/tile/ite/{dt}"
        add(cid, "tile", ite_case(dt, cid, (5, 7), (5, 7), (5, 7)), ops=("Select",),
            dtypes=(dt, BOOL), spec=_S_ITE_VALUES, tier="quick")

    def ite_order():
        cv = c.make_var("cond", (4,), BOOL)
        tv, fv = c.make_var("t", (4,), F32), c.make_var("f", (4,), F32)
        return (c.make_module([cv, tv, fv], c.make_call(Select(), cv, tv, fv)), ENTRY,
                [np.array([True, False, True, False]), c.values_array([1, 2, 3, 4], F32),
                 c.values_array([-1, -2, -3, -4], F32)])

    add("spec/tile/ite/argument-order/f32", "tile", ite_order, ops=("Select",),
        dtypes=(F32, BOOL), spec=_S_ITE, tier="quick")

    # --- Bitcast --------------------------------------------------------------------------
    def _f32_patterns() -> np.ndarray:
        bits = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000,
                0x3F800000, 0xBF800000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000,
                0xFFC00000, 0x7F800001, 0x7FA5A5A5, 0xFFBFFFFF, 0x7FFFFFFF, 0x40000000,
                0x3EAAAAAB, 0xC0490FDB]
        return np.asarray(bits, np.uint32)

    def bitcast_to_u32():
        a = from_bits(_f32_patterns().reshape(4, 5), F32)
        x = c.make_var("x", a.shape, F32)
        u = c.make_call(Bitcast(U32), x)
        return c.make_module([x], u), ENTRY, [np.ascontiguousarray(a)]

    def bitcast_round_trip():
        u = _f32_patterns().reshape(4, 5).copy()
        x = c.make_var("u", u.shape, U32)
        f = c.make_call(Bitcast(F32), x)
        return c.make_module([x], Tuple((f, c.make_call(Bitcast(U32), f)))), ENTRY, [u]

    def bitcast_order():
        # u32 order of the bits: unsigned, so every negative float compares above every
        # non-negative one (bits(-1.0) = 0xBF800000 > bits(2.0) = 0x40000000)
        a = c.values_array([-1.0, 2.0, -0.0, 0.0, 1.0, -2.0], F32)
        b = c.values_array([2.0, -1.0, 0.0, -0.0, 2.0, -1.0], F32)
        x, y = c.make_var("x", (6,), F32), c.make_var("y", (6,), F32)
        ux, uy = c.make_call(Bitcast(U32), x), c.make_call(Bitcast(U32), y)
        lt = c.make_call(Binary(BinaryKind.LT), ux, uy)
        return (c.make_module([x, y], Tuple((lt, c.make_call(Select(), lt, ux, uy)))), ENTRY, [a, b])

    add("spec/tile/bitcast/f32-to-u32-payloads/f32", "tile", bitcast_to_u32, ops=("Bitcast",),
        dtypes=(F32, U32), spec=_S_BITCAST, tier="quick")
    add("spec/tile/bitcast/u32-to-f32-round-trip/u32", "tile", bitcast_round_trip,
        ops=("Bitcast",), dtypes=(F32, U32), spec=_S_BITCAST, tier="quick")
    add("spec/tile/bitcast/u32-order-of-bits/u32", "tile", bitcast_order,
        ops=("Bitcast", "Binary", "Binary.lt", "Select"), dtypes=(F32, U32, BOOL),
        spec=_S_BITCAST, tier="quick")

    def bitcast_special(dt: DType):
        def build():
            v = c.special_values(dt)
            if dt is not F32:  # a widening cast first (NaNs left out: the cast's NaN rule)
                v = v[~np.isnan(v.astype(np.float32))]
            x = c.make_var("x", v.shape, dt)
            f = x if dt is F32 else c.make_call(Cast(F32), x)
            return c.make_module([x], c.make_call(Bitcast(U32), f)), ENTRY, [np.ascontiguousarray(v)]
        return build

    for dt in (F32, BF16, F16):
        add(f"special/tile/bitcast/{dt}", "tile", bitcast_special(dt),
            ops=("Bitcast",) + (() if dt is F32 else ("Cast",)), dtypes=(dt, F32, U32),
            spec=_SPECIAL.format(op="Bitcast"), tier="quick")

    # --- Scan -----------------------------------------------------------------------------
    def scan_case(op: Scan, dt: DType, make: Callable[[], np.ndarray]) -> Callable[[], tuple]:
        def build():
            a = make()
            x = c.make_var("x", a.shape, dt)
            return c.make_module([x], c.make_call(op, x)), ENTRY, [a]
        return build

    for dt in (I32, F32):
        for pol in ("fold_left", "ordered_tree"):
            add(f"spec/tile/scan/design-example-123/{pol.replace('_', '-')}/{dt}", "tile",
                scan_case(Scan(-1, "add", policy=pol), dt,
                          lambda d=dt: c.values_array([[1, 2, 3], [3, 1, 2]], d)),
                ops=("Scan",), dtypes=(dt,), spec=_S_SCAN_EXAMPLE, tier="quick")
    rows = [[1, 2, 3, 4, 5], [-1, 0, 7, -7, 2], [10, -3, 3, 1, 0]]
    for dt in (F32, BF16, I32, I8):
        for inc in (True, False):
            w = "inclusive" if inc else "exclusive"
            for seed in (None, 2):
                sd = "" if seed is None else "-seed2"
                add(f"spec/tile/scan/{w}{sd}/{dt}", "tile",
                    scan_case(Scan(1, "add", inclusive=inc, seed=seed), dt,
                              lambda d=dt: c.values_array(rows, d)),
                    ops=("Scan",), dtypes=(dt,), spec=_S_SCAN_REC, tier="quick")
    for comb in ("max", "min"):
        for dt in (F32, BF16, F16, E4M3):
            for inc in (True, False):
                w = "inclusive" if inc else "exclusive"
                add(f"spec/tile/scan/{comb}-nan-signed-zeros-{w}/{dt}", "tile",
                    scan_case(Scan(1, comb, inclusive=inc), dt,
                              lambda d=dt: c.rows_array(d, [["-0", "0", "-0", "1", "nan", "2"],
                                                       ["0", "-0", "0", "-1", "-2", "-0"],
                                                       ["-1", "nan", "3", "nan", "-4", "5"]])),
                    ops=("Scan",), dtypes=(dt,), spec=_S_SCAN_VALID, tier="quick")
        for dt in (I32, U8, BOOL):
            add(f"spec/tile/scan/{comb}-seeded/{dt}", "tile",
                scan_case(Scan(0, comb, seed=1), dt,
                          lambda d=dt: c.values_array([[0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 1]],
                                               d)),
                ops=("Scan",), dtypes=(dt,), spec=_S_SCAN_REC, tier="quick")
    for dt in (F32, I32):
        add(f"spec/tile/scan/empty-axis/{dt}", "tile",
            scan_case(Scan(1, "add", inclusive=False, seed=3), dt,
                      lambda d=dt: np.zeros((3, 0), d.storage)),
            ops=("Scan",), dtypes=(dt,), spec=_S_SCAN_EMPTY, tier="quick")
        add(f"spec/tile/scan/single-element-axis/{dt}", "tile",
            scan_case(Scan(0, "add", inclusive=False), dt,
                      lambda d=dt: c.values_array([[5, -6, 7]], d)),
            ops=("Scan",), dtypes=(dt,), spec=_S_SCAN_VALID, tier="quick")
    for dt in (U8, I32):  # 21 lanes: a SIMD realization's interleaved accumulators
        cid = f"spec/tile/scan/seeded-long-axis/{dt}"
        add(cid, "tile",
            scan_case(Scan(1, "add", inclusive=False, seed=7), dt,
                      lambda d=dt, i=cid: c.case_rng(i).integers(0, 50, (2, 21)).astype(d.storage)),
            ops=("Scan",), dtypes=(dt,), spec=_S_SCAN_TREE, tier="quick")
    for dt in (I8, U8, I32):
        add(f"spec/tile/scan/add-wraps/{dt}", "tile",
            scan_case(Scan(-1, "add"), dt, lambda d=dt: c.fill_shape(c.int_special_values(d),
                                                                (3, 7))),
            ops=("Scan",), dtypes=(dt,), spec=_S_SCAN_VALID, tier="quick")
        add(f"spec/tile/scan/mul-wraps/{dt}", "tile",
            scan_case(Scan(-1, "mul", seed=3), dt,
                      lambda d=dt: c.values_array([[2, 3, 5, 7, 11, 13], [-1, 2, -3, 4, -5, 6]]
                                           if d is not U8 else
                                           [[2, 3, 5, 7, 11, 13], [1, 2, 3, 4, 5, 6]], d)),
            ops=("Scan",), dtypes=(dt,), spec=_S_SCAN_VALID, tier="quick")

    t = 2.0 ** -24

    def regroup_rows(dt: DType):
        def make():
            a = np.array([[1.0, t, t, t, t, 1.0], [t, t, 1.0, t, t, -1.0],
                          [1.0, -1.0, t, 2.0 ** 24, 1.0, -(2.0 ** 24)]])
            return c.values_array(a, dt)
        return make

    for pol in ("ordered_tree", "fold_left"):
        add(f"spec/tile/scan/regrouping-{pol.replace('_', '-')}/f32", "tile",
            scan_case(Scan(1, "add", policy=pol), F32, regroup_rows(F32)),
            ops=("Scan",), dtypes=(F32,), spec=_S_SCAN_TREE, tier="quick")
        add(f"spec/tile/scan/seed-once-{pol.replace('_', '-')}/f32", "tile",
            scan_case(Scan(1, "add", inclusive=False, seed=1.0, policy=pol), F32,
                      regroup_rows(F32)),
            ops=("Scan",), dtypes=(F32,), spec=_S_SCAN_TREE, tier="quick")
    for dt in (F32, BF16, F16):
        cid = f"spec/tile/scan/ragged-axis-37/{dt}"
        add(cid, "tile",
            scan_case(Scan(0, "add", policy="fold_left"), dt,
                      lambda d=dt, i=cid: c.random_float(c.case_rng(i), (37, 3), d)),
            ops=("Scan",), dtypes=(dt,), spec=_S_SCAN_VALID, tier="quick")
        add(f"special/tile/scan/{dt}", "tile",
            scan_case(Scan(1, "max", inclusive=False, seed=-1.0), dt,
                      lambda d=dt: c.rows_array(d, _REDUCE_ROWS)),
            ops=("Scan",), dtypes=(dt,), spec=_SPECIAL.format(op="Scan"), tier="quick")
        add(f"special/tile/scan-add-fold-left/{dt}", "tile",
            scan_case(Scan(1, "add", policy="fold_left"), dt,
                      lambda d=dt: c.rows_array(d, _REDUCE_ROWS)),
            ops=("Scan",), dtypes=(dt,), spec=_SPECIAL.format(op="Scan"), tier="quick")

    # --- fold_right orientation on x - state ------------------------------------------------
    def loop_fold(dt: DType, right: bool, values: list[int]):
        n = len(values)

        def build():
            x = c.make_var("x", (n,), dt)
            i = c.make_var("i", (), I32)
            acc_v = Var("acc", None)
            if right:
                j = c.make_call(Binary(BinaryKind.SUB), Constant(c.scalar_array(n - 1)), i)
                step = c.make_call(Binary(BinaryKind.SUB), c.make_call(Gather(axis=0), x, j), acc_v)
            else:
                step = c.make_call(Binary(BinaryKind.SUB), acc_v, c.make_call(Gather(axis=0), x, i))
            init = c.make_call(Zeros((), dt))
            loop = GridRegionExpr(i, (acc_v,), (init,), step, (step,), n)
            return c.make_module([x], loop), ENTRY, [c.values_array(values, dt)]
        return build

    for dt in (F32, I32, I64):
        add(f"spec/tile/fold-right-orientation-1248/{dt}", "program",
            loop_fold(dt, True, [1, 2, 4, 8]),
            ops=("Binary", "Binary.sub", "Gather", "Zeros"), dtypes=(dt,),
            spec=_S_FOLD_ORIENT, tier="quick")
