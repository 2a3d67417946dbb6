"""The special-value cases (``special/<family>/<op>/<dtype>``) (split from
``conformance/catalog.py``, D383).

Every op of ``ALL_OPS`` over NaN, ±inf, ±0, subnormals, max finite, rounding ties and half-integers
in every float dtype it takes.
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
    FLOAT3,
    FLOAT5,
    FLOAT6,
    I32,
    I64,
    INT4,
    NN_ELEMENTWISE,
    Acc,
    Built,
    case_rng,
    fill_shape,
    int_special_values,
    kinded,
    make_call,
    make_module,
    make_var,
    named_values,
    random_float,
    rows_array,
    scalar_array,
    special_array,
    special_unary_op,
    special_values,
    split_pairs,
    values_array,
)
from tilefoundry.conformance.catalog.quotes import _S_SOFTMAX, _S_WRAP
from tilefoundry.conformance.catalog.spec import _reduce_build
from tilefoundry.conformance.catalog.sweeps import (
    _FLOAT_UNARY,
    _binary_build,
    _build_cast,
    _cast_id,
    _unary_build,
)
from tilefoundry.conformance.numerics_sweep import (
    FLOATS,
    INTS,
    modes,
)
from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.ir import (
    Tuple,
    TupleGetItem,
)
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    CacheUpdate,
    Concat,
    Conv2D,
    Gather,
    InsertSlice,
    LayerNorm,
    MatMul,
    Rank,
    ReduceKind,
    Reshape,
    RMSNorm,
    RoPE,
    ShapeCompose,
    ShapeExtract,
    ShapeOf,
    Slice,
    SoftMax,
    Stack,
    TopK,
    Transpose,
    Unary,
    UnaryKind,
    Zeros,
)

# =============================================================================================
# per-op special-value cases
# =============================================================================================
_SPECIAL_SPEC = ("ARCHITECTURE.md, Numeric contracts (special values: NaN class, ±0 "
                 "significance, subnormals preserved, overflow, ties) applied to {op}.")


_REDUCE_ROWS = [
    ["1", "2", "3", "0.5"], ["nan", "1", "2", "3"], ["1", "2", "3", "nan"],
    ["inf", "1", "-1", "2"], ["inf", "-inf", "1", "2"], ["-inf", "-1", "-2", "-3"],
    ["-0", "-0", "-0", "-0"], ["-0", "0", "-0", "0"], ["0", "-0", "0", "-0"],
    ["max", "max", "-max", "1"], ["max", "max", "max", "max"],
    ["minsub", "minsub", "-minsub", "minsub"], ["1", "-1", "0.5", "-0.5"],
    ["2.5", "-2.5", "10", "-10"], ["-max", "-max", "-1", "-2"], ["minnorm", "-minsub", "0", "-0"],
]


_SOFTMAX_ROWS = [
    ["1", "2", "3", "4"], ["nan", "1", "2", "3"], ["inf", "1", "2", "3"],
    ["-inf", "-inf", "-inf", "-inf"], ["-inf", "0", "1", "2"], ["0", "0", "0", "0"],
    ["-0", "0", "-0", "0"], ["max", "-max", "0", "1"], ["max", "max", "max", "max"],
    ["-max", "-10", "-max", "-1"], ["minsub", "-minsub", "0", "minnorm"], ["10", "-10", "5", "-4"],
]


_NORM_ROWS = [
    ["-1", "1", "-1", "1"], ["-4", "4", "-4", "4"], ["2.5", "-2.5", "2.5", "-2.5"],
    ["nan", "1", "2", "3"], ["inf", "1", "2", "3"], ["-inf", "-inf", "1", "2"],
    ["5", "5", "5", "5"], ["0", "0", "0", "0"], ["-0", "-0", "-0", "-0"],
    ["max", "-max", "max", "-max"], ["minsub", "-minsub", "minsub", "-minsub"],
    ["1", "2", "3", "4"], ["-10", "10", "-10", "10"],
]


def _special_reduce(kind: ReduceKind, dt: DType) -> Callable[[], Built]:
    return _reduce_build(kind, dt, lambda: rows_array(dt, _REDUCE_ROWS))


def _special_structural(name: str, dt: DType) -> Callable[[], Built]:
    """A special-valued tensor through a structural op (every bit must survive)."""

    def build() -> Built:
        r = case_rng(f"special/tensor/{name}/{dt}")
        sv = special_array(dt)
        if name == "reshape":
            a = fill_shape(sv, (2, 3, 4), r)
            x = make_var("x", a.shape, dt)
            return make_module([x], make_call(Reshape((4, 6)), x)), ENTRY, [a]
        if name == "transpose":
            a = fill_shape(sv, (2, 3, 4), r)
            x = make_var("x", a.shape, dt)
            return make_module([x], make_call(Transpose((2, 0, 1)), x)), ENTRY, [a]
        if name == "slice":
            a = fill_shape(sv, (6, 8), r)
            x = make_var("x", a.shape, dt)
            return (make_module([x], make_call(Slice((1, -7), (6, 8), (2, 3)), x)), ENTRY, [a])
        if name == "concat":
            xs = [fill_shape(sv, (2, k), r) for k in (1, 3, 2)]
            vs = [make_var(f"x{j}", x.shape, dt) for j, x in enumerate(xs)]
            return make_module(vs, make_call(Concat(axis=1), *vs)), ENTRY, xs
        if name == "stack":
            xs = [fill_shape(sv, (2, 3), r) for _ in range(3)]
            vs = [make_var(f"x{j}", x.shape, dt) for j, x in enumerate(xs)]
            return make_module(vs, make_call(Stack(axis=1), *vs)), ENTRY, xs
        if name == "gather":
            a = fill_shape(sv, (5, 4), r)
            idx = np.asarray([[4, 0, 1], [2, 2, 3]], np.int64)
            x, i = make_var("x", a.shape, dt), make_var("i", idx.shape, I64)
            return make_module([x, i], make_call(Gather(axis=0), x, i)), ENTRY, [a, idx]
        if name == "insert_slice":
            d = fill_shape(sv, (4, 5), r)
            u = fill_shape(sv, (2, 3), r)
            dv, uv = make_var("dst", d.shape, dt), make_var("update", u.shape, dt)
            o0, o1 = make_var("o0", (), I32), make_var("o1", (), I32)
            return (make_module([dv, uv, o0, o1], make_call(InsertSlice(), dv, uv, o0, o1)), ENTRY,
                    [d, u, scalar_array(1), scalar_array(2)])
        if name == "cache_update":
            c = fill_shape(sv, (1, 6, 2, 4), r)
            n = fill_shape(sv, (1, 3, 2, 4), r)
            cv, nv = make_var("cache", c.shape, dt), make_var("new", n.shape, dt)
            pv, svar = make_var("cur_pos", (), I32), make_var("s", (), I32)
            return (make_module([cv, pv, svar, nv], make_call(CacheUpdate(), cv, pv, svar, nv)), ENTRY,
                    [c, scalar_array(2), scalar_array(3), n])
        if name == "zeros":
            a = fill_shape(sv, (2, 3), r)
            x = make_var("x", a.shape, dt)
            z = make_call(Zeros((2, 3), dt))
            return make_module([x], Tuple((z, make_call(Concat(axis=0), x, z)))), ENTRY, [a]
        if name == "shape_of":
            a = fill_shape(sv, (2, 3, 1), r)
            x = make_var("x", a.shape, dt)
            return make_module([x], make_call(ShapeOf(), x)), ENTRY, [a]
        if name == "rank":
            a = fill_shape(sv, (2, 3, 1), r)
            x = make_var("x", a.shape, dt)
            return make_module([x], make_call(Rank(), x)), ENTRY, [a]
        if name == "shape_extract":
            a = fill_shape(sv, (2, 3, 5), r)
            x = make_var("x", a.shape, dt)
            s = make_call(ShapeOf(), x)
            return (make_module([x], Tuple((make_call(ShapeExtract(-1), s), make_call(ShapeExtract(1), s)))),
                    ENTRY, [a])
        if name == "shape_compose":
            a = fill_shape(sv, (2, 3, 5), r)
            x = make_var("x", a.shape, dt)
            s = make_call(ShapeOf(), x)
            body = make_call(ShapeCompose(), make_call(ShapeExtract(2), s), make_call(ShapeExtract(0), s))
            return make_module([x], body), ENTRY, [a]
        if name == "topk":
            a = rows_array(dt, [r_ for r_ in _REDUCE_ROWS if "nan" not in r_])
            x = make_var("x", a.shape, dt)
            hi, lo = make_call(TopK(2, axis=1), x), make_call(TopK(3, axis=1, largest=False), x)
            outs = (TupleGetItem(hi, 0), TupleGetItem(hi, 1), TupleGetItem(lo, 0),
                    TupleGetItem(lo, 1))
            return make_module([x], Tuple(outs)), ENTRY, [a]
        raise AssertionError(name)

    return build


_STRUCTURAL = {
    "reshape": "Reshape", "transpose": "Transpose", "slice": "Slice", "concat": "Concat",
    "stack": "Stack", "gather": "Gather", "insert_slice": "InsertSlice",
    "cache_update": "CacheUpdate", "zeros": "Zeros", "shape_of": "ShapeOf", "rank": "Rank",
    "shape_extract": "ShapeExtract", "shape_compose": "ShapeCompose", "topk": "TopK",
}


def _nn_special(name: str, dt: DType) -> Callable[[], Built]:
    def build() -> Built:
        r = case_rng(f"special/nn/{name}/{dt}")
        if name == "softmax":
            a = rows_array(dt, _SOFTMAX_ROWS)
            x = make_var("x", a.shape, dt)
            return make_module([x], make_call(SoftMax(axis=-1), x)), ENTRY, [a]
        if name == "layer_norm":
            a = rows_array(dt, _NORM_ROWS)
            w = values_array([1.0, 2.0, 0.5, 1.0], dt)
            b = values_array([0.0, 0.0, 0.0, 0.0], dt)
            x, wv, bv = make_var("x", a.shape, dt), make_var("w", (4,), dt), make_var("b", (4,), dt)
            return make_module([x, wv, bv], make_call(LayerNorm(), x, wv, bv)), ENTRY, [a, w, b]
        if name == "rms_norm":
            a = rows_array(dt, _NORM_ROWS)
            w = values_array([1.0, -1.0, 0.5, 2.0], dt)
            x, wv = make_var("x", a.shape, dt), make_var("w", (4,), dt)
            return make_module([x, wv], make_call(RMSNorm(), x, wv)), ENTRY, [a, w]
        if name == "matmul":
            a = rows_array(dt, [["1", "2", "3"], ["inf", "0", "1"], ["-0", "-0", "-0"],
                           ["max", "max", "1"], ["nan", "1", "1"], ["minsub", "0.5", "-1"]])
            b = rows_array(dt, [["1", "-1"], ["2", "0"], ["0.5", "-0"]])
            av, bv = make_var("a", a.shape, dt), make_var("b", b.shape, dt)
            return make_module([av, bv], make_call(MatMul(), av, bv)), ENTRY, [a, b]
        if name == "matmul_tiles":
            # past one 128 x 128 x 32 tile in M, N and K (ragged at every edge), reassociation
            # admitted: the shape compiled backends map onto tensor cores (D263, D280); an inf,
            # a NaN, a -0 row and products near the dtype's max among random values
            a = random_float(r, (130, 72), dt)
            b = random_float(r, (72, 136), dt)
            named = named_values(dt)
            a[3, 5], b[7, 2], a[10, 71] = named["inf"], named["-inf"], named["nan"]
            a[20, :] = named["-0"]
            a[40, :4], b[:4, 40] = named["max"], named["2"]
            av, bv = make_var("a", a.shape, dt), make_var("b", b.shape, dt)
            return make_module([av, bv], make_call(MatMul(allow_reassociation=True), av, bv)), ENTRY, \
                [a, b]
        if name == "conv2d":
            x = random_float(r, (1, 2, 4, 4), dt)
            named = named_values(dt)
            x[0, 0, 0, 0] = named["inf"]
            x[0, 1, 3, 3] = named["nan"]
            x[0, 0, 2, 1] = named["-0"]
            x[0, 1, 1, 2] = named["max"]
            w = random_float(r, (3, 2, 2, 2), dt)
            b = values_array([0.0, -0.0, 1.5], dt)
            xv, wv, bv = make_var("x", x.shape, dt), make_var("w", w.shape, dt), make_var("b", (3,), dt)
            op = Conv2D(stride=(1, 1), padding=(1, 1))
            return make_module([xv, wv, bv], make_call(op, xv, wv, bv)), ENTRY, [x, w, b]
        if name == "conv2d_padded_nonfinite_weight":
            # batch and channels > 1: every output reads the NaN / inf taps, some of them only
            # through zero padding (0 * NaN and 0 * inf are NaN)
            x = random_float(r, (2, 2, 3, 3), dt, 0.5, 2.0)
            w = random_float(r, (2, 2, 3, 3), dt, 0.5, 2.0)
            named = named_values(dt)
            w[0, 0, 0, 0] = named["nan"]
            w[1, 1, 2, 2] = named["inf"]
            b = values_array([0.0, 0.0], dt)
            xv, wv, bv = make_var("x", x.shape, dt), make_var("w", w.shape, dt), make_var("b", (2,), dt)
            op = Conv2D(stride=(1, 1), padding=(1, 1))
            return make_module([xv, wv, bv], make_call(op, xv, wv, bv)), ENTRY, [x, w, b]
        if name == "rope":
            s, d, p = 4, 4, 5
            q = fill_shape(special_array(dt), (1, s, d), r)
            k = fill_shape(special_array(dt), (1, s, d), r)
            ang = np.outer(np.arange(p), [1.0, 0.01])
            ang = np.concatenate([ang, ang], axis=-1)
            cos, sin = values_array(np.cos(ang), dt), values_array(np.sin(ang), dt)
            pos = np.asarray([0, 4, 1, 0], np.int64)
            qv, kv = make_var("q", q.shape, dt), make_var("k", k.shape, dt)
            cv, sv = make_var("cos", cos.shape, dt), make_var("sin", sin.shape, dt)
            pv = make_var("pos", pos.shape, I64)
            return (make_module([qv, kv, cv, sv, pv], make_call(RoPE(), qv, kv, cv, sv, pv)), ENTRY,
                    [q, k, cos, sin, pos])
        raise AssertionError(name)

    return build


_NN_OTHER = {"softmax": "SoftMax", "layer_norm": "LayerNorm", "rms_norm": "RMSNorm",
             "matmul": "MatMul", "conv2d": "Conv2D", "rope": "RoPE",
             "conv2d_padded_nonfinite_weight": "Conv2D"}


_S_CONV_PAD = ("docs/decisions.md D98: Conv2D reduces over (c_in, kh, kw) \"padding as +0 inputs "
               "that take part (0·inf = NaN)\" — zero padding extends the input with +0.")


_ARITH = (BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL, BinaryKind.DIV, BinaryKind.MIN,
          BinaryKind.MAX)


_CMP = (BinaryKind.EQ, BinaryKind.NE, BinaryKind.LT, BinaryKind.LE, BinaryKind.GT, BinaryKind.GE)


def _special_cases(acc: Acc) -> None:
    add = acc.add
    for kind in _ARITH + _CMP:
        op = Binary(kind)
        for dt in FLOAT5:
            add(f"special/binary/{kind.value}/{dt}", "math",
                _binary_build(kind, dt, lambda d=dt: split_pairs(special_values(d))),
                ops=kinded(op), dtypes=(dt,), spec=_SPECIAL_SPEC.format(op=f"Binary({kind.value})"),
                tier="quick")
        for dt in INT4:
            if kind is BinaryKind.DIV:
                continue
            add(f"special/binary/{kind.value}/{dt}", "math",
                _binary_build(kind, dt, lambda d=dt: split_pairs(int_special_values(d))),
                ops=kinded(op), dtypes=(dt,), spec=_S_WRAP, tier="quick")
    for kind in (BinaryKind.AND, BinaryKind.OR, BinaryKind.XOR):
        add(f"special/binary/{kind.value}/bool", "math",
            _binary_build(kind, BOOL, lambda: split_pairs(np.array([False, True]))),
            ops=kinded(Binary(kind)), dtypes=(BOOL,), spec="HIR Binary: boolean kinds",
            tier="quick")
    for kind in _FLOAT_UNARY:
        for dt in FLOAT5:
            add(f"special/unary/{kind.value}/{dt}", "math", special_unary_op(Unary(kind), dt),
                ops=kinded(Unary(kind)), dtypes=(dt,),
                spec=_SPECIAL_SPEC.format(op=f"Unary({kind.value})"), tier="quick")
    add("special/unary/logical_not/bool", "math",
        _unary_build(UnaryKind.LOGICAL_NOT, BOOL, lambda: np.array([False, True])),
        ops=kinded(Unary(UnaryKind.LOGICAL_NOT)), dtypes=(BOOL,), tier="quick")
    for kind in (UnaryKind.NEG, UnaryKind.ABS, UnaryKind.CEIL, UnaryKind.ROUND, UnaryKind.RELU,
                 UnaryKind.SQUARE):
        for dt in INT4:
            add(f"special/unary/{kind.value}/{dt}", "math",
                _unary_build(kind, dt, lambda d=dt: int_special_values(d)),
                ops=kinded(Unary(kind)), dtypes=(dt,), spec=_S_WRAP, tier="quick")
    # casts from f32 special values (the other sources are swept exhaustively)
    for src, vals in ((F32, special_values), (I32, int_special_values),
                      (I64, int_special_values)):
        for dst in FLOATS + INTS + (BOOL,):
            if dst is src:
                continue
            for overflow, rounding in modes(dst):
                cid = "special/" + _cast_id(str(src), dst, overflow, rounding, "").rstrip("/")
                add(cid, "cast", _build_cast(src, dst, overflow, rounding,
                                             lambda s=src, v=vals: v(s)),
                    ops=("Cast",), dtypes=(src, dst), spec=_SPECIAL_SPEC.format(op="Cast"),
                    tier="quick")
    for kind in ReduceKind:
        dts = FLOAT5 + ((E8M0,) if kind in (ReduceKind.MAX, ReduceKind.MIN,
                                            ReduceKind.ABS_MAX) else ())
        for dt in dts:
            add(f"special/tensor/reduce-{kind.value}/{dt}", "tensor", _special_reduce(kind, dt),
                ops=("Reduce", f"Reduce.{kind.value}"), dtypes=(dt,),
                spec=_SPECIAL_SPEC.format(op=f"Reduce({kind.value})"), tier="quick")
    for name, cls in _STRUCTURAL.items():
        for dt in FLOAT6:
            if dt is E8M0 and name in ("zeros", "topk"):
                continue  # f8e8m0 has no zero; TopK on f8e8m0 is covered by the fp8 ones
            add(f"special/tensor/{name.replace('_', '-')}/{dt}",
                "shape" if cls.startswith("Shape") else "tensor", _special_structural(name, dt),
                ops=(cls,) + (("ShapeOf",) if name.startswith("shape_") else ()),
                dtypes=(dt,), spec=_SPECIAL_SPEC.format(op=cls), tier="quick")
    for name, op in NN_ELEMENTWISE.items():
        for dt in FLOAT5:
            add(f"special/nn/{name}/{dt}", "nn", special_unary_op(op, dt),
                ops=(type(op).__name__,), dtypes=(dt,),
                spec=_SPECIAL_SPEC.format(op=type(op).__name__), tier="quick")
    for name, cls in _NN_OTHER.items():
        for dt in FLOAT3:
            add(f"special/nn/{name.replace('_', '-')}/{dt}", "nn", _nn_special(name, dt),
                ops=(cls,), dtypes=(dt,),
                spec=_S_SOFTMAX if name == "softmax" else _S_CONV_PAD if "padded" in name
                else _SPECIAL_SPEC.format(op=cls),
                tier="quick")
    for dt in (BF16, F16, E4M3, E5M2):
        add(f"special/nn/matmul-tiles/{dt}", "nn", _nn_special("matmul_tiles", dt),
            ops=("MatMul",), dtypes=(dt,), spec=_SPECIAL_SPEC.format(op="MatMul"),
            tier="quick" if dt in (BF16, E4M3) else "full")
