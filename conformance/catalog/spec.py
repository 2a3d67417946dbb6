"""The spec-derived cases (``spec/...``) (split from ``conformance/catalog.py``, D383).

Each cites the sentence it tests
(``Case.spec``, the ``_S_*`` quotations): empty reductions, NaN and signed-zero order,
rounding, wraparound, folds, Gather / CacheUpdate / InsertSlice / TopK, the nn ops, casts,
functions, loops and dispatch, and Partial completion on a mesh.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.conformance.catalog.build import (
    BF16,
    BOOL,
    E4M3,
    E5M2,
    E8M0,
    ENTRY,
    F16,
    F32,
    I8,
    I32,
    I64,
    INT4,
    U8,
    Acc,
    Built,
    case_rng,
    int_special_values,
    kinded,
    make_call,
    make_module,
    make_var,
    random_float,
    rows_array,
    scalar_array,
    split_pairs,
    values_array,
)
from tilefoundry.conformance.catalog.quotes import (
    _S_CEIL,
    _S_CMP,
    _S_EMPTY,
    _S_FOLD,
    _S_FOLD_DIFFER,
    _S_LOWP_RED,
    _S_MAXMIN,
    _S_ROUND,
    _S_TREE,
    _S_WRAP,
)
from tilefoundry.conformance.catalog.spec_ops import (
    _spec_casts,
    _spec_functions,
    _spec_nn,
    _spec_sharded,
    _spec_tensor,
)
from tilefoundry.conformance.catalog.sweeps import _LOWP, _binary_build, _unary_build
from tilefoundry.semantics.dtypes import FORMATS, DType, bits_dtype, from_bits
from tilefoundry.semantics.ir import (
    Constant,
    GridRegionExpr,
    Tuple,
    Var,
)
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Gather,
    Reduce,
    ReduceKind,
    Unary,
    UnaryKind,
    Zeros,
)


def _reduce_build(kind: ReduceKind, dt: DType, make: Callable[[], np.ndarray], *,
                  axes: tuple = (1,), policy: str = "unordered_tree",
                  keepdim: bool = False) -> Callable[[], Built]:
    def build() -> Built:
        a = make()
        x = make_var("x", a.shape, dt)
        op = Reduce(axes, keepdim=keepdim, kind=kind, policy=policy)
        return make_module([x], make_call(op, x)), ENTRY, [a]

    return build


def _empty(dt: DType) -> Callable[[], np.ndarray]:
    def make() -> np.ndarray:
        if dt is BOOL:
            return np.zeros((3, 0), bool)
        if dt.is_int:
            return np.zeros((3, 0), FORMATS[dt].storage)
        return np.ascontiguousarray(from_bits(np.zeros((3, 0), bits_dtype(dt)), dt))

    return make


def _loop_fold(dt: DType, right: bool) -> Callable[[], Built]:
    """acc = 0; for i in range(3): acc = acc - x[i]   (fold_left)
    acc = 0; for i in range(3): acc = x[2 - i] - acc  (fold_right)."""

    def build() -> Built:
        x = make_var("x", (3,), dt)
        i = make_var("i", (), I32)
        acc = Var("acc", None)
        if right:
            j = make_call(Binary(BinaryKind.SUB), Constant(scalar_array(2)), i)
            step = make_call(Binary(BinaryKind.SUB), make_call(Gather(axis=0), x, j), acc)
        else:
            step = make_call(Binary(BinaryKind.SUB), acc, make_call(Gather(axis=0), x, i))
        init = make_call(Zeros((), dt))
        loop = GridRegionExpr(i, (acc,), (init,), step, (step,), 3)
        return make_module([x], loop), ENTRY, [values_array([1, 2, 3], dt)]

    return build


def _spec_cases(acc: Acc) -> None:
    add = acc.add
    # --- Reduce: empty identities ------------------------------------------------------------
    for kind in (ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN, ReduceKind.ABS_MAX):
        dts = [F32, BF16, F16, E4M3, E5M2, I8, U8, I32, I64]
        if kind in (ReduceKind.MAX, ReduceKind.MIN):
            dts.append(BOOL)
        if kind is not ReduceKind.SUM:
            dts.append(E8M0)
        for dt in dts:
            add(f"spec/reduce/empty-{kind.value}-identity/{dt}", "tensor",
                _reduce_build(kind, dt, _empty(dt)), ops=("Reduce", f"Reduce.{kind.value}"),
                dtypes=(dt,), spec=_S_EMPTY, tier="quick")
    for kind in (ReduceKind.SUM, ReduceKind.MAX):
        for dt in (F32, I32):
            add(f"spec/reduce/no-axes-is-identity-{kind.value}/{dt}", "tensor",
                _reduce_build(kind, dt, lambda d=dt: values_array([[1, -2, 3], [4, 5, -6]], d),
                              axes=()),
                ops=("Reduce", f"Reduce.{kind.value}"), dtypes=(dt,),
                spec="HIR Reduce: \"The logical result shape follows numpy reduction rules.\" "
                     "(numpy: reducing over axes=() reduces nothing)", tier="quick")
    # --- max / min: NaN and signed zeros -----------------------------------------------------
    nan_rows = [["nan", "1", "2", "3"], ["1", "nan", "-inf", "3"], ["-inf", "2", "inf", "nan"],
                ["1", "2", "3", "4"], ["nan", "nan", "-1", "-2"]]
    zero_rows = [["-0", "0"], ["0", "-0"], ["-0", "-0"], ["0", "0"], ["-0", "-1"], ["1", "-0"]]
    for dt in (F32, BF16, F16, E4M3):
        for kind in (ReduceKind.MAX, ReduceKind.MIN, ReduceKind.ABS_MAX):
            add(f"spec/reduce/{kind.value}-propagates-nan/{dt}", "tensor",
                _reduce_build(kind, dt, lambda d=dt: rows_array(d, nan_rows)),
                ops=("Reduce", f"Reduce.{kind.value}"), dtypes=(dt,), spec=_S_MAXMIN,
                tier="quick")
        for kind in (ReduceKind.MAX, ReduceKind.MIN):
            add(f"spec/reduce/{kind.value}-orders-signed-zeros/{dt}", "tensor",
                _reduce_build(kind, dt, lambda d=dt: rows_array(d, zero_rows)),
                ops=("Reduce", f"Reduce.{kind.value}"), dtypes=(dt,), spec=_S_MAXMIN,
                tier="quick")
            add(f"spec/binary/{kind.value}-orders-signed-zeros/{dt}", "math",
                _binary_build(BinaryKind(kind.value), dt,
                              lambda d=dt: (values_array([-0.0, 0.0, -0.0, 0.0, 1.0, -0.0], d),
                                            values_array([0.0, -0.0, -0.0, 0.0, -0.0, -1.0], d))),
                ops=kinded(Binary(BinaryKind(kind.value))), dtypes=(dt,), spec=_S_MAXMIN,
                tier="quick")
            add(f"spec/binary/{kind.value}-propagates-nan/{dt}", "math",
                _binary_build(BinaryKind(kind.value), dt,
                              lambda d=dt: (values_array([np.nan, 1.0, np.nan, -np.inf, 0.0], d),
                                            values_array([1.0, np.nan, np.nan, np.nan, -0.0], d))),
                ops=kinded(Binary(BinaryKind(kind.value))), dtypes=(dt,), spec=_S_MAXMIN,
                tier="quick")
    # --- folds -------------------------------------------------------------------------------
    for dt in (F32, I32, BF16):
        add(f"spec/reduce/fold-left-sub-123/{dt}", "program", _loop_fold(dt, right=False),
            ops=("Binary", "Binary.sub", "Gather", "Zeros"), dtypes=(dt,), spec=_S_FOLD,
            tier="quick")
        add(f"spec/reduce/fold-right-sub-123/{dt}", "program", _loop_fold(dt, right=True),
            ops=("Binary", "Binary.sub", "Gather", "Zeros"), dtypes=(dt,), spec=_S_FOLD,
            tier="quick")

    def fold_pair(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            t = 2.0 ** -24
            rows = [[1.0, t, t], [t, t, 1.0], [1.0, t, t, t, t], [-1.0, 1.0, t], [3.0, -3.0, 1e-8]]
            width = max(len(r) for r in rows)
            a = np.zeros((len(rows), width), np.float64)
            for r, row in enumerate(rows):
                a[r, :len(row)] = row
            a = values_array(a, dt)
            x = make_var("x", a.shape, dt)
            left = make_call(Reduce((1,), keepdim=False, kind=ReduceKind.SUM, policy="fold_left"), x)
            right = make_call(Reduce((1,), keepdim=False, kind=ReduceKind.SUM, policy="fold_right"),
                          x)
            return make_module([x], Tuple((left, right))), ENTRY, [a]

        return build

    add("spec/reduce/fold-left-vs-fold-right-sum/f32", "tensor", fold_pair(F32),
        ops=("Reduce", "Reduce.sum"), dtypes=(F32,), spec=_S_FOLD_DIFFER, tier="quick")
    for dt in (BF16, F16, F32):
        for pol in ("fold_left", "fold_right"):
            for kind in (ReduceKind.SUM, ReduceKind.MEAN):
                cid = f"spec/reduce/{pol.replace('_', '-')}-{kind.value}/{dt}"
                add(cid, "tensor",
                    _reduce_build(kind, dt, lambda c=cid, d=dt: random_float(
                        case_rng(c), (8, 64), d, -4.0, 4.0), policy=pol),
                    ops=("Reduce", f"Reduce.{kind.value}"), dtypes=(dt,), spec=_S_LOWP_RED,
                    tier="quick")
        for pol in ("unordered_tree", "ordered_tree"):
            for n in (5, 1000):
                cid = f"spec/reduce/{pol.replace('_', '-')}-sum-len{n}/{dt}"
                add(cid, "tensor",
                    _reduce_build(ReduceKind.SUM, dt, lambda c=cid, d=dt, k=n: random_float(
                        case_rng(c), (6, k), d, -100.0, 100.0), policy=pol),
                    ops=("Reduce", "Reduce.sum"), dtypes=(dt,), spec=_S_TREE, tier="quick")
    for dt in (I32, I8, U8, I64):
        def wrap_sum(d=dt) -> np.ndarray:
            ii = np.iinfo(FORMATS[d].storage)
            return np.asarray([[ii.max, 1, 0], [ii.max, ii.max, ii.max], [ii.min, -1 if ii.min
                               else 0, 0]], FORMATS[d].storage)

        add(f"spec/reduce/integer-sum-wraps/{dt}", "tensor",
            _reduce_build(ReduceKind.SUM, dt, wrap_sum), ops=("Reduce", "Reduce.sum"),
            dtypes=(dt,), spec=_S_WRAP, tier="quick")
        add(f"spec/reduce/integer-abs-max-int-min/{dt}", "tensor",
            _reduce_build(ReduceKind.ABS_MAX, dt, wrap_sum), ops=("Reduce", "Reduce.abs_max"),
            dtypes=(dt,), spec=_S_WRAP, tier="quick")
    # --- elementwise -------------------------------------------------------------------------
    halves = [0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, -3.5, 4.5, 5.5, 0.49999997, -0.0, 0.0,
              1023.5, 1024.5, -1024.5, 2.0 ** 22 + 0.5, 2.0 ** 23 + 1, np.inf, -np.inf,
              np.nan, 0.25, 0.75, 1.75, 2.25]
    for dt in (F32, BF16, F16, E4M3, E5M2):
        add(f"spec/unary/round-half-even/{dt}", "math",
            _unary_build(UnaryKind.ROUND, dt, lambda d=dt: values_array(halves, d)),
            ops=kinded(Unary(UnaryKind.ROUND)), dtypes=(dt,), spec=_S_ROUND, tier="quick")
        add(f"spec/unary/ceil-toward-positive-infinity/{dt}", "math",
            _unary_build(UnaryKind.CEIL, dt, lambda d=dt: values_array(halves, d)),
            ops=kinded(Unary(UnaryKind.CEIL)), dtypes=(dt,), spec=_S_CEIL, tier="quick")
    for dt in INT4:
        def wrap_pairs(d=dt) -> tuple[np.ndarray, np.ndarray]:
            return split_pairs(int_special_values(d))

        for kind in (BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL):
            add(f"spec/binary/int-wraparound-{kind.value}/{dt}", "math",
                _binary_build(kind, dt, wrap_pairs), ops=kinded(Binary(kind)), dtypes=(dt,),
                spec=_S_WRAP, tier="quick")
        for kind in (UnaryKind.NEG, UnaryKind.ABS, UnaryKind.SQUARE):
            add(f"spec/unary/int-wraparound-{kind.value}/{dt}", "math",
                _unary_build(kind, dt, lambda d=dt: int_special_values(d)),
                ops=kinded(Unary(kind)), dtypes=(dt,), spec=_S_WRAP, tier="quick")
    for dt in (BF16, F16):
        for kind in (BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL, BinaryKind.DIV):
            cid = f"spec/binary/widen-op-round-{kind.value}/{dt}"

            def rand_pairs(c=cid, d=dt) -> tuple[np.ndarray, np.ndarray]:
                r = case_rng(c)
                bits = r.integers(0, 1 << 16, (2, 1 << 14), dtype=np.uint64).astype(np.uint16)
                return from_bits(bits[0], d), from_bits(bits[1], d)

            add(cid, "math", _binary_build(kind, dt, rand_pairs), ops=kinded(Binary(kind)),
                dtypes=(dt,), spec=_LOWP, tier="quick")
    for dt in (F32, BF16):
        for kind in (BinaryKind.EQ, BinaryKind.NE, BinaryKind.LT, BinaryKind.LE,
                     BinaryKind.GT, BinaryKind.GE):
            add(f"spec/binary/compare-nan-signed-zero-{kind.value}/{dt}", "math",
                _binary_build(kind, dt, lambda d=dt: (
                    values_array([np.nan, 1.0, np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0], d),
                    values_array([1.0, np.nan, np.nan, 0.0, -0.0, np.inf, np.inf, 1.0], d))),
                ops=kinded(Binary(kind)), dtypes=(dt,), spec=_S_CMP, tier="quick")
    # --- casts -------------------------------------------------------------------------------
    _spec_casts(acc)
    # --- tensor ops --------------------------------------------------------------------------
    _spec_tensor(acc)
    # --- nn ----------------------------------------------------------------------------------
    _spec_nn(acc)
    # --- functions, loops, dispatch ---------------------------------------------------------
    _spec_functions(acc)
    # --- sharded -----------------------------------------------------------------------------
    _spec_sharded(acc)
    # --- tile family (extensions of the HIR catalog) ----------------------------------------
    from tilefoundry.conformance.catalog.tile_mma import spec_tile_mma
    from tilefoundry.conformance.catalog.tile_sort import spec_tile_sort

    spec_tile_sort(acc)
    spec_tile_mma(acc)
