"""The spec-derived cases of the casts, the tensor and nn ops, functions and the mesh (split from
``conformance/catalog.py``, D383).

Each cites the sentence it tests (``quotes.py``); ``spec._spec_cases`` adds them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.conformance.catalog.build import (
    BF16,
    E4M3,
    E5M2,
    E8M0,
    ENTRY,
    F16,
    F32,
    I8,
    I32,
    I64,
    U8,
    Built,
    _Acc,
    _call,
    _fill,
    _mesh,
    _module,
    _random_float,
    _rng,
    _scalar,
    _sl,
    _t,
    _vals,
    _var,
    special_values,
)
from tilefoundry.conformance.catalog.quotes import (
    _S_BF16,
    _S_CACHE,
    _S_CALL,
    _S_DISPATCH,
    _S_E8M0,
    _S_F2INT,
    _S_GATHER,
    _S_GATHER0,
    _S_GATHER_SPLIT,
    _S_GELU,
    _S_GRID,
    _S_GRID_DIM,
    _S_INSERT,
    _S_INT2F,
    _S_LOCAL,
    _S_MATMUL,
    _S_ONCE,
    _S_OVF,
    _S_PARTIAL,
    _S_ROPE,
    _S_SILU,
    _S_TOPK,
    _S_TOPK_NAN,
    _S_WRAP,
    _S_ZEROS,
)
from tilefoundry.conformance.catalog.sweeps import _build_cast, _near_tie_ints
from tilefoundry.conformance.numerics_sweep import (
    all_patterns,
)
from tilefoundry.semantics.dtypes import FORMATS, DType, cast, to_bits
from tilefoundry.semantics.ir import (
    Call,
    DimVarRangePat,
    Function,
    GridRegionExpr,
    Tuple,
    Var,
)
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    CacheUpdate,
    Cast,
    Gather,
    Gelu,
    InsertSlice,
    Local,
    MatMul,
    Reshard,
    RoPE,
    ShapeOf,
    Silu,
    TopK,
    Unary,
    UnaryKind,
    Zeros,
)
from tilefoundry.semantics.types import (
    Broadcast,
    DimVar,
    Partial,
    Split,
)


def _cast_vals(src: DType, dst: DType, values, overflow: str = "nonfinite",
               rounding: str = "nearest") -> Callable[[], Built]:
    return _build_cast(src, dst, overflow, rounding, lambda: _vals(values, src))


def _double_rounding_inputs(dst: DType, via: DType, n: int, case_id: str) -> np.ndarray:
    """f32 values whose one rounding to ``dst`` differs from rounding through ``via``."""
    r = _rng(case_id)
    hits: list[np.ndarray] = []
    total = 0
    while total < n:
        bits = r.integers(0x30000000, 0x43F00000, 1 << 16, dtype=np.uint64).astype(np.uint32)
        sign = (r.integers(0, 2, bits.size, dtype=np.uint64) << 31).astype(np.uint32)
        x = (bits | sign).view(np.float32)
        once = to_bits(cast(x, dst))
        twice = to_bits(cast(cast(x, via), dst))
        h = x[once != twice]
        hits.append(h)
        total += h.size
    return np.ascontiguousarray(np.concatenate(hits)[:n])


def _spec_casts(acc: _Acc) -> None:
    add = acc.add
    big = [448.0, 449.0, 464.0, 465.0, 480.0, 500.0, 1e6, 3e38, np.inf, -np.inf, np.nan,
           -465.0, -1e6, 57344.0, 61439.0, 61440.0, 65504.0, 1e5, -1e5, 1.0, -0.0]
    for dst in (E4M3, E5M2, F16, BF16):
        for ovf in ("nonfinite", "saturate"):
            add(f"spec/cast/overflow-{ovf}/f32->{dst}", "cast",
                _cast_vals(F32, dst, big, ovf), ops=("Cast",), dtypes=(F32, dst), spec=_S_OVF,
                tier="quick")
    for src in (BF16, F16):
        for ovf in ("nonfinite", "saturate"):
            add(f"spec/cast/overflow-{ovf}/{src}->fp8e4m3", "cast",
                _cast_vals(src, E4M3, [448.0, 464.0, 480.0, 512.0, 1e4, np.inf, -np.inf,
                                       np.nan, -512.0, 0.0], ovf),
                ops=("Cast",), dtypes=(src, E4M3), spec=_S_OVF, tier="quick")
    for dst in (E4M3, E5M2, F16):
        cid = f"spec/cast/single-rounding/f32->{dst}"
        add(cid, "cast", _build_cast(F32, dst, "nonfinite", "nearest",
                                     lambda c=cid, d=dst: _double_rounding_inputs(d, BF16, 4096,
                                                                                  c)),
            ops=("Cast",), dtypes=(F32, dst), spec=_S_ONCE, tier="quick")
    bf16_vals = [1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -8 + 2.0 ** -23,
                 1.0 + 2.0 ** -8 - 2.0 ** -23, -0.0, 0.0, 2.0 ** -130, -(2.0 ** -133),
                 2.0 ** -134, 3.0 * 2.0 ** -134, 3.3961776e38, 3.4e38, np.inf, np.nan,
                 -np.nan, -(1.0 + 2.0 ** -8)]
    add("spec/cast/nearest-even-zeros-subnormals/f32->bf16", "cast",
        _cast_vals(F32, BF16, bf16_vals), ops=("Cast",), dtypes=(F32, BF16), spec=_S_BF16,
        tier="quick")
    e8 = [1.0, 1.5, 3.0, 0.75, 1.4, 1.6, 2.0 ** -127, 2.0 ** -128, 1.25 * 2.0 ** -127,
          1.75 * 2.0 ** -127, 2.0 ** 127, 1.5 * 2.0 ** 127, 1.7e38, np.inf, 0.0, -0.0, -1.0,
          -3.0, np.nan, 2.0 ** -149, 6.0, 7.0, 2.0 ** 100 + 2.0 ** 80, 0.375]
    for rounding in ("nearest", "up", "down"):
        for ovf in ("nonfinite", "saturate"):
            add(f"spec/cast/e8m0-{rounding}-{ovf}/f32->f8e8m0", "cast",
                _cast_vals(F32, E8M0, e8, ovf, rounding), ops=("Cast",), dtypes=(F32, E8M0),
                spec=_S_E8M0, tier="quick")
        add(f"spec/cast/e8m0-{rounding}/bf16->f8e8m0", "cast",
            _cast_vals(BF16, E8M0, [1.0, 1.5, 3.0, 0.75, 2.0 ** -127, 2.0 ** -130, 2.0 ** 127,
                                    -2.0, 0.0, np.nan, np.inf, 6.0], "nonfinite", rounding),
            ops=("Cast",), dtypes=(BF16, E8M0), spec=_S_E8M0, tier="quick")
    for src in (I32, I64):
        cid = f"spec/cast/int-single-rounding/{src}->bf16"
        add(cid, "cast", _build_cast(src, BF16, "nonfinite", "nearest",
                                     lambda s=src: _near_tie_ints(s)),
            ops=("Cast",), dtypes=(src, BF16), spec=_S_INT2F, tier="quick")
    f2i = [-2.7, 2.7, -0.5, 0.5, 100.9, -100.9, 126.99, -127.9, 0.0, -0.0, 1e-30, 254.5,
           2147483520.0, -2147483648.0, np.nan, np.inf, -np.inf, 3e9, -129.0, 256.0]
    for dst in (I8, U8, I32, I64):
        add(f"spec/cast/float-to-int-truncates/f32->{dst}", "cast",
            _cast_vals(F32, dst, f2i), ops=("Cast",), dtypes=(F32, dst), spec=_S_F2INT,
            tier="quick")
    add("spec/cast/float-to-int-truncates/bf16->i32", "cast",
        _cast_vals(BF16, I32, [-2.75, 2.75, -0.5, 1e10, np.nan, 65280.0, -65536.0]),
        ops=("Cast",), dtypes=(BF16, I32), spec=_S_F2INT, tier="quick")


def _spec_tensor(acc: _Acc) -> None:
    add = acc.add

    def gather_batched(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            r = _rng(f"spec/gather/batch-dims/{dt}")
            a = _fill(special_values(dt), (2, 3, 5), r) if dt.is_float else \
                np.arange(30, dtype=FORMATS[dt].storage).reshape(2, 3, 5)
            idx = np.asarray([[4, 0, 2, 2], [1, 3, 0, 4]], np.int64)
            x, i = _var("x", a.shape, dt), _var("i", idx.shape, I64)
            return _module([x, i], _call(Gather(axis=2, batch_dims=1), x, i)), ENTRY, [a, idx]

        return build

    def gather_plain(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            a = _fill(special_values(dt), (2, 5), _rng(f"spec/gather/plain/{dt}"))
            idx = np.asarray([[4, 0, 1], [1, 1, 3]], np.int32)
            x, i = _var("x", a.shape, dt), _var("i", idx.shape, I32)
            return _module([x, i], _call(Gather(axis=1), x, i)), ENTRY, [a, idx]

        return build

    for dt in (F32, BF16, I32):
        add(f"spec/gather/batch-dims-element-rule/{dt}", "tensor", gather_batched(dt),
            ops=("Gather",), dtypes=(dt, I64), spec=_S_GATHER, tier="quick")
    for dt in (F32, F16):
        add(f"spec/gather/no-implicit-batching/{dt}", "tensor", gather_plain(dt),
            ops=("Gather",), dtypes=(dt, I32), spec=_S_GATHER0, tier="quick")

    def cache_update(dt: DType, cur: int, s: int, new_len: int) -> Callable[[], Built]:
        def build() -> Built:
            r = _rng(f"spec/cache-update/{dt}/{cur}/{s}/{new_len}")
            c = _random_float(r, (2, 8, 2, 4), dt)
            n = _random_float(r, (2, new_len, 2, 4), dt, 10.0, 20.0)
            cv, nv = _var("cache", c.shape, dt), _var("new", n.shape, dt)
            pv, sv = _var("cur_pos", (), I32), _var("s", (), I32)
            body = _call(CacheUpdate(), cv, pv, sv, nv)
            return _module([cv, pv, sv, nv], body), ENTRY, [c, _scalar(cur), _scalar(s), n]

        return build

    for dt in (F32, BF16):
        add(f"spec/cache-update/write-window/{dt}", "tensor", cache_update(dt, 3, 2, 4),
            ops=("CacheUpdate",), dtypes=(dt, I32), spec=_S_CACHE, tier="quick")
        add(f"spec/cache-update/window-at-end/{dt}", "tensor", cache_update(dt, 5, 3, 3),
            ops=("CacheUpdate",), dtypes=(dt, I32), spec=_S_CACHE, tier="quick")
        add(f"spec/cache-update/single-position/{dt}", "tensor", cache_update(dt, 0, 1, 4),
            ops=("CacheUpdate",), dtypes=(dt, I32), spec=_S_CACHE, tier="quick")

    def insert(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            r = _rng(f"spec/insert-slice/{dt}")
            d = _random_float(r, (4, 6), dt)
            u = _fill(special_values(dt), (2, 3), r)
            dv, uv = _var("dst", d.shape, dt), _var("update", u.shape, dt)
            o0, o1 = _var("o0", (), I32), _var("o1", (), I32)
            return (_module([dv, uv, o0, o1], _call(InsertSlice(), dv, uv, o0, o1)), ENTRY,
                    [d, u, _scalar(2), _scalar(3)])

        return build

    for dt in (F32, BF16):
        add(f"spec/insert-slice/window/{dt}", "tensor", insert(dt), ops=("InsertSlice",),
            dtypes=(dt, I32), spec=_S_INSERT, tier="quick")

    def topk(dt: DType, rows: list[list[float]], k: int, largest: bool) -> Callable[[], Built]:
        def build() -> Built:
            a = _vals(rows, dt)
            x = _var("x", a.shape, dt)
            return (_module([x], _call(TopK(k, axis=-1, largest=largest), x)), ENTRY, [a])

        return build

    ties = [[1, 3, 3, 2, 3, 1], [5, 5, 5, 5, 5, 5], [0, 2, 1, 2, 0, 1], [-1, -1, 4, 4, -1, 4]]
    zeros = [[0.0, -0.0, 0.0, -0.0, 1.0, -1.0], [-0.0, 0.0, -0.0, 0.0, -1.0, -0.0],
             [-0.0, -0.0, 0.0, 0.0, 0.0, -0.0]]
    for dt in (F32, BF16, I32):
        for largest in (True, False):
            w = "largest" if largest else "smallest"
            add(f"spec/topk/ties-by-index-{w}/{dt}", "tensor", topk(dt, ties, 3, largest),
                ops=("TopK",), dtypes=(dt,), spec=_S_TOPK, tier="quick")
    for dt in (F32, F16):
        for largest in (True, False):
            w = "largest" if largest else "smallest"
            add(f"spec/topk/signed-zeros-tie-{w}/{dt}", "tensor", topk(dt, zeros, 4, largest),
                ops=("TopK",), dtypes=(dt,), spec=_S_TOPK, tier="quick")
            add(f"spec/topk/nan-last-{w}/{dt}", "tensor",
                topk(dt, [[1.0, np.nan, 3.0, 2.0], [np.nan, np.nan, -1.0, 0.0],
                          [np.inf, np.nan, -np.inf, 0.0]], 3, largest),
                ops=("TopK",), dtypes=(dt,), spec=_S_TOPK_NAN, tier="quick")

    def zeros_case(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            a = _vals([-0.0, 0.0, 1.0, -1.0], dt)
            x = _var("x", (4,), dt)
            z = _call(Zeros((4,), dt))
            return _module([x], Tuple((z, _call(Binary(BinaryKind.ADD), x, z)))), ENTRY, [a]

        return build

    for dt in (F32, BF16, F16, E4M3, E5M2):
        add(f"spec/zeros/positive-zero/{dt}", "tensor", zeros_case(dt),
            ops=("Zeros", "Binary", "Binary.add"), dtypes=(dt,), spec=_S_ZEROS, tier="quick")


def _spec_nn(acc: _Acc) -> None:
    add = acc.add

    def silu_all(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            a = all_patterns(dt)
            x = _var("x", a.shape, dt)
            return _module([x], _call(Silu(), x)), ENTRY, [a]

        return build

    for dt in (BF16, F16):
        add(f"spec/silu/fused-all-patterns/{dt}", "nn", silu_all(dt), ops=("Silu",),
            dtypes=(dt,), spec=_S_SILU, tier="quick")

    def gelu_default(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            a = _random_float(_rng(f"spec/gelu/{dt}"), (512,), dt, -6.0, 6.0)
            x = _var("x", a.shape, dt)
            return _module([x], _call(Gelu(), x)), ENTRY, [a]

        return build

    for dt in (F32, BF16):
        add(f"spec/gelu/tanh-is-default/{dt}", "nn", gelu_default(dt), ops=("Gelu",),
            dtypes=(dt,), spec=_S_GELU, tier="quick")

    def rope(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            r = _rng(f"spec/rope/{dt}")
            s, d, p = 5, 8, 7
            q = _random_float(r, (2, s, d), dt, -3.0, 3.0)
            k = _random_float(r, (2, s, d), dt, -3.0, 3.0)
            inv = 1.0 / (10000.0 ** (np.arange(0, d, 2) / d))
            ang = np.outer(np.arange(p), inv)
            ang = np.concatenate([ang, ang], axis=-1)
            cos, sin = _vals(np.cos(ang), dt), _vals(np.sin(ang), dt)
            pos = np.asarray([6, 0, 3, 3, 1], np.int64)
            qv, kv = _var("q", q.shape, dt), _var("k", k.shape, dt)
            cv, sv = _var("cos", cos.shape, dt), _var("sin", sin.shape, dt)
            pv = _var("pos", pos.shape, I64)
            body = _call(RoPE(), qv, kv, cv, sv, pv)
            return _module([qv, kv, cv, sv, pv], body), ENTRY, [q, k, cos, sin, pos]

        return build

    for dt in (F32, BF16, F16):
        add(f"spec/rope/rotate-half/{dt}", "nn", rope(dt), ops=("RoPE",), dtypes=(dt, I64),
            spec=_S_ROPE, tier="quick")

    def matmul_korder(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            r = _rng(f"spec/matmul/k-order/{dt}")
            a = _random_float(r, (4, 16), dt, -8.0, 8.0)
            b = _random_float(r, (16, 3), dt, -8.0, 8.0)
            av, bv = _var("a", a.shape, dt), _var("b", b.shape, dt)
            return (_module([av, bv], _call(MatMul(allow_reassociation=False), av, bv)), ENTRY,
                    [a, b])

        return build

    for dt in (F32, BF16):
        add(f"spec/matmul/no-reassociation-k-order/{dt}", "nn", matmul_korder(dt),
            ops=("MatMul",), dtypes=(dt,), spec=_S_MATMUL, tier="quick")

    def matmul_int(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            ii = np.iinfo(FORMATS[dt].storage)
            a = np.asarray([[ii.max, 1], [ii.min, -1], [3, 4]], FORMATS[dt].storage)
            b = np.asarray([[2, 1], [ii.max, ii.min]], FORMATS[dt].storage)
            av, bv = _var("a", a.shape, dt), _var("b", b.shape, dt)
            return _module([av, bv], _call(MatMul(), av, bv)), ENTRY, [a, b]

        return build

    for dt in (I32, I8):
        add(f"spec/matmul/integer-wraps/{dt}", "nn", matmul_int(dt), ops=("MatMul",),
            dtypes=(dt,), spec=_S_WRAP + " docs/decisions.md D39: integer operands "
            "accumulate in i64 and wrap into the result dtype.", tier="quick")


def _spec_functions(acc: _Acc) -> None:
    add = acc.add

    def carried(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            x = _var("x", (4,), dt)
            i = _var("i", (), I32)
            a = Var("acc", None)
            step = _call(Binary(BinaryKind.ADD), a, x)
            loop = GridRegionExpr(i, (a,), (_call(Zeros((4,), dt)),), step, (step,), 5)
            return _module([x], loop), ENTRY, [_vals([0.1, -0.0, 3.0, 1e30], dt)]

        return build

    for dt in (F32, BF16):
        add(f"spec/grid/carried-accumulator/{dt}", "program", carried(dt),
            ops=("Binary", "Binary.add", "Zeros"), dtypes=(dt,), spec=_S_GRID, tier="quick")

    def dimvar_extent() -> Built:
        n = DimVar("N", 1, 9)
        x = _var("x", (n,), F32)
        i = _var("i", (), I32)
        a, b = Var("acc", None), Var("cnt", None)
        s1 = _call(Binary(BinaryKind.MUL), a, x)
        s2 = _call(Binary(BinaryKind.ADD), b, _call(Cast(F32), i))
        loop = GridRegionExpr(i, (a, b), (x, _call(Zeros((), F32))), s1, (s1, s2), n, 2, 1)
        return _module([x], loop), ENTRY, [_vals([1.5, -1.0, 2.0, 0.5, 3.0, -0.0], F32)]

    add("spec/grid/dimvar-extent-step-start/f32", "program", dimvar_extent,
        ops=("Binary", "Binary.mul", "Binary.add", "Cast", "Zeros"), dtypes=(F32, I32),
        spec=_S_GRID_DIM, tier="quick")

    def dispatch(n_val: int) -> Callable[[], Built]:
        def build() -> Built:
            m = DimVar("M", 1, 17)
            proto = Function("g", (_var("x", (m,), F32),), None, _t((m,), F32))
            xs = _var("x", (m,), F32)
            proto.add_variant(Function("g", (xs,), _call(Binary(BinaryKind.ADD), xs, xs),
                                       _t((m,), F32), (DimVarRangePat("M", 1, 8),),
                                       label="small"))
            xl = _var("x", (m,), F32)
            proto.add_variant(Function("g", (xl,), _call(Binary(BinaryKind.MUL), xl, xl),
                                       _t((m,), F32), (DimVarRangePat("M", 8, 17),),
                                       label="large"))
            y = _var("y", (m,), F32)
            body = _call(Unary(UnaryKind.NEG), Call(proto, (y,)))
            a = _vals(np.linspace(-3, 3, n_val), F32)
            return _module([y], body, extra=(proto,)), ENTRY, [a]

        return build

    for n_val, w in ((5, "small"), (8, "boundary"), (16, "large")):
        add(f"spec/function/dispatch-{w}/f32", "program", dispatch(n_val),
            ops=("Binary", "Binary.add", "Binary.mul", "Unary", "Unary.neg"), dtypes=(F32,),
            spec=_S_DISPATCH, tier="quick")

    def call_twice() -> Built:
        p = _var("p", (3,), F32)
        callee = Function("sq_plus", (p,), _call(Binary(BinaryKind.ADD),
                                                  _call(Unary(UnaryKind.SQUARE), p), p), None)
        x = _var("x", (3,), F32)
        body = Tuple((Call(callee, (x,)), Call(callee, (_call(Unary(UnaryKind.NEG), x),))))
        return _module([x], body, extra=(callee,)), ENTRY, [_vals([1.5, -2.0, 1e20], F32)]

    add("spec/function/call-elaboration/f32", "program", call_twice,
        ops=("Binary", "Binary.add", "Unary", "Unary.square", "Unary.neg"), dtypes=(F32,),
        spec=_S_CALL, tier="quick")


def _spec_sharded(acc: _Acc) -> None:
    add = acc.add

    def gather_partial(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = _mesh((2,))
            r = _rng(f"spec/reshard/partial-sum/{dt}")
            a = _fill(special_values(dt), (4, 3), r)
            a[0] = _vals([-0.0, -0.0, 1.0], dt)
            x = _var("x", (4, 3), dt, _sl(mesh, (Split(0),), (4, 3)))
            idx = np.asarray([0, 3, 1, 0, 2], np.int64)
            i = _var("i", idx.shape, I64)
            g = _call(Gather(axis=0), x, i)
            out = _call(Reshard(layout=_sl(mesh, (Broadcast(),), (5, 3))), g)
            return _module([x, i], out, topo), ENTRY, [a, idx]

        return build

    for dt in (F32, BF16):
        add(f"spec/reshard/partial-sum-completion/{dt}", "sharding", gather_partial(dt),
            ops=("Gather", "Reshard"), dtypes=(dt, I64), spec=_S_PARTIAL + " " + _S_GATHER_SPLIT,
            tier="quick")

    def partial_max(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = _mesh((3,))
            a = _vals([1.0, -0.0, 0.0, np.nan, -np.inf, 2.5], dt)
            b = _vals([0.5, 0.0, -0.0, 1.0, 1.0, -2.5], dt)
            x = _var("x", (6,), dt, _sl(mesh, (Partial("max"),), (6,)))
            y = _var("y", (6,), dt)
            s = _call(Binary(BinaryKind.ADD), x, y)
            out = _call(Reshard(layout=_sl(mesh, (Broadcast(),), (6,))), s)
            return _module([x, y], out, topo), ENTRY, [a, b]

        return build

    for dt in (F32, BF16):
        add(f"spec/reshard/partial-max-completion/{dt}", "sharding", partial_max(dt),
            ops=("Binary", "Binary.add", "Reshard"), dtypes=(dt,), spec=_S_PARTIAL,
            tier="quick")

    def local_shape() -> Built:
        mesh, topo = _mesh((2, 2))
        x = _var("x", (4, 6), F32, _sl(mesh, (Split(0), Split(1)), (4, 6)))
        out = _call(ShapeOf(), _call(Local(), x))
        return _module([x], out, topo), ENTRY, [_fill(special_values(F32), (4, 6))]

    add("spec/local/shape-contracts-split-axes/f32", "sharding", local_shape,
        ops=("Local", "ShapeOf"), dtypes=(F32,), spec=_S_LOCAL, tier="quick")
