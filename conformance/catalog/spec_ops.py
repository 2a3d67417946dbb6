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
    Acc,
    Built,
    case_rng,
    fill_shape,
    make_call,
    make_mesh,
    make_module,
    make_var,
    random_float,
    scalar_array,
    shard_layout,
    special_values,
    tensor_type,
    values_array,
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
    return _build_cast(src, dst, overflow, rounding, lambda: values_array(values, src))


def _double_rounding_inputs(dst: DType, via: DType, n: int, case_id: str) -> np.ndarray:
    """f32 values whose one rounding to ``dst`` differs from rounding through ``via``."""
    r = case_rng(case_id)
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


def _spec_casts(acc: Acc) -> None:
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


def _spec_tensor(acc: Acc) -> None:
    add = acc.add

    def gather_batched(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            r = case_rng(f"spec/gather/batch-dims/{dt}")
            a = fill_shape(special_values(dt), (2, 3, 5), r) if dt.is_float else \
                np.arange(30, dtype=FORMATS[dt].storage).reshape(2, 3, 5)
            idx = np.asarray([[4, 0, 2, 2], [1, 3, 0, 4]], np.int64)
            x, i = make_var("x", a.shape, dt), make_var("i", idx.shape, I64)
            return make_module([x, i], make_call(Gather(axis=2, batch_dims=1), x, i)), ENTRY, [a, idx]

        return build

    def gather_plain(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            a = fill_shape(special_values(dt), (2, 5), case_rng(f"spec/gather/plain/{dt}"))
            idx = np.asarray([[4, 0, 1], [1, 1, 3]], np.int32)
            x, i = make_var("x", a.shape, dt), make_var("i", idx.shape, I32)
            return make_module([x, i], make_call(Gather(axis=1), x, i)), ENTRY, [a, idx]

        return build

    for dt in (F32, BF16, I32):
        add(f"spec/gather/batch-dims-element-rule/{dt}", "tensor", gather_batched(dt),
            ops=("Gather",), dtypes=(dt, I64), spec=_S_GATHER, tier="quick")
    for dt in (F32, F16):
        add(f"spec/gather/no-implicit-batching/{dt}", "tensor", gather_plain(dt),
            ops=("Gather",), dtypes=(dt, I32), spec=_S_GATHER0, tier="quick")

    def cache_update(dt: DType, cur: int, s: int, new_len: int) -> Callable[[], Built]:
        def build() -> Built:
            r = case_rng(f"spec/cache-update/{dt}/{cur}/{s}/{new_len}")
            c = random_float(r, (2, 8, 2, 4), dt)
            n = random_float(r, (2, new_len, 2, 4), dt, 10.0, 20.0)
            cv, nv = make_var("cache", c.shape, dt), make_var("new", n.shape, dt)
            pv, sv = make_var("cur_pos", (), I32), make_var("s", (), I32)
            body = make_call(CacheUpdate(), cv, pv, sv, nv)
            return make_module([cv, pv, sv, nv], body), ENTRY, [c, scalar_array(cur), scalar_array(s), n]

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
            r = case_rng(f"spec/insert-slice/{dt}")
            d = random_float(r, (4, 6), dt)
            u = fill_shape(special_values(dt), (2, 3), r)
            dv, uv = make_var("dst", d.shape, dt), make_var("update", u.shape, dt)
            o0, o1 = make_var("o0", (), I32), make_var("o1", (), I32)
            return (make_module([dv, uv, o0, o1], make_call(InsertSlice(), dv, uv, o0, o1)), ENTRY,
                    [d, u, scalar_array(2), scalar_array(3)])

        return build

    for dt in (F32, BF16):
        add(f"spec/insert-slice/window/{dt}", "tensor", insert(dt), ops=("InsertSlice",),
            dtypes=(dt, I32), spec=_S_INSERT, tier="quick")

    def topk(dt: DType, rows: list[list[float]], k: int, largest: bool) -> Callable[[], Built]:
        def build() -> Built:
            a = values_array(rows, dt)
            x = make_var("x", a.shape, dt)
            return (make_module([x], make_call(TopK(k, axis=-1, largest=largest), x)), ENTRY, [a])

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
            a = values_array([-0.0, 0.0, 1.0, -1.0], dt)
            x = make_var("x", (4,), dt)
            z = make_call(Zeros((4,), dt))
            return make_module([x], Tuple((z, make_call(Binary(BinaryKind.ADD), x, z)))), ENTRY, [a]

        return build

    for dt in (F32, BF16, F16, E4M3, E5M2):
        add(f"spec/zeros/positive-zero/{dt}", "tensor", zeros_case(dt),
            ops=("Zeros", "Binary", "Binary.add"), dtypes=(dt,), spec=_S_ZEROS, tier="quick")


def _spec_nn(acc: Acc) -> None:
    add = acc.add

    def silu_all(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            a = all_patterns(dt)
            x = make_var("x", a.shape, dt)
            return make_module([x], make_call(Silu(), x)), ENTRY, [a]

        return build

    for dt in (BF16, F16):
        add(f"spec/silu/fused-all-patterns/{dt}", "nn", silu_all(dt), ops=("Silu",),
            dtypes=(dt,), spec=_S_SILU, tier="quick")

    def gelu_default(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            a = random_float(case_rng(f"spec/gelu/{dt}"), (512,), dt, -6.0, 6.0)
            x = make_var("x", a.shape, dt)
            return make_module([x], make_call(Gelu(), x)), ENTRY, [a]

        return build

    for dt in (F32, BF16):
        add(f"spec/gelu/tanh-is-default/{dt}", "nn", gelu_default(dt), ops=("Gelu",),
            dtypes=(dt,), spec=_S_GELU, tier="quick")

    def rope(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            r = case_rng(f"spec/rope/{dt}")
            s, d, p = 5, 8, 7
            q = random_float(r, (2, s, d), dt, -3.0, 3.0)
            k = random_float(r, (2, s, d), dt, -3.0, 3.0)
            inv = 1.0 / (10000.0 ** (np.arange(0, d, 2) / d))
            ang = np.outer(np.arange(p), inv)
            ang = np.concatenate([ang, ang], axis=-1)
            cos, sin = values_array(np.cos(ang), dt), values_array(np.sin(ang), dt)
            pos = np.asarray([6, 0, 3, 3, 1], np.int64)
            qv, kv = make_var("q", q.shape, dt), make_var("k", k.shape, dt)
            cv, sv = make_var("cos", cos.shape, dt), make_var("sin", sin.shape, dt)
            pv = make_var("pos", pos.shape, I64)
            body = make_call(RoPE(), qv, kv, cv, sv, pv)
            return make_module([qv, kv, cv, sv, pv], body), ENTRY, [q, k, cos, sin, pos]

        return build

    for dt in (F32, BF16, F16):
        add(f"spec/rope/rotate-half/{dt}", "nn", rope(dt), ops=("RoPE",), dtypes=(dt, I64),
            spec=_S_ROPE, tier="quick")

    def matmul_korder(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            r = case_rng(f"spec/matmul/k-order/{dt}")
            a = random_float(r, (4, 16), dt, -8.0, 8.0)
            b = random_float(r, (16, 3), dt, -8.0, 8.0)
            av, bv = make_var("a", a.shape, dt), make_var("b", b.shape, dt)
            return (make_module([av, bv], make_call(MatMul(allow_reassociation=False), av, bv)), ENTRY,
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
            av, bv = make_var("a", a.shape, dt), make_var("b", b.shape, dt)
            return make_module([av, bv], make_call(MatMul(), av, bv)), ENTRY, [a, b]

        return build

    for dt in (I32, I8):
        add(f"spec/matmul/integer-wraps/{dt}", "nn", matmul_int(dt), ops=("MatMul",),
            dtypes=(dt,), spec=_S_WRAP + " docs/decisions.md D39: integer operands "
            "accumulate in i64 and wrap into the result dtype.", tier="quick")


def _spec_functions(acc: Acc) -> None:
    add = acc.add

    def carried(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            x = make_var("x", (4,), dt)
            i = make_var("i", (), I32)
            a = Var("acc", None)
            step = make_call(Binary(BinaryKind.ADD), a, x)
            loop = GridRegionExpr(i, (a,), (make_call(Zeros((4,), dt)),), step, (step,), 5)
            return make_module([x], loop), ENTRY, [values_array([0.1, -0.0, 3.0, 1e30], dt)]

        return build

    for dt in (F32, BF16):
        add(f"spec/grid/carried-accumulator/{dt}", "program", carried(dt),
            ops=("Binary", "Binary.add", "Zeros"), dtypes=(dt,), spec=_S_GRID, tier="quick")

    def dimvar_extent() -> Built:
        n = DimVar("N", 1, 9)
        x = make_var("x", (n,), F32)
        i = make_var("i", (), I32)
        a, b = Var("acc", None), Var("cnt", None)
        s1 = make_call(Binary(BinaryKind.MUL), a, x)
        s2 = make_call(Binary(BinaryKind.ADD), b, make_call(Cast(F32), i))
        loop = GridRegionExpr(i, (a, b), (x, make_call(Zeros((), F32))), s1, (s1, s2), n, 2, 1)
        return make_module([x], loop), ENTRY, [values_array([1.5, -1.0, 2.0, 0.5, 3.0, -0.0], F32)]

    add("spec/grid/dimvar-extent-step-start/f32", "program", dimvar_extent,
        ops=("Binary", "Binary.mul", "Binary.add", "Cast", "Zeros"), dtypes=(F32, I32),
        spec=_S_GRID_DIM, tier="quick")

    def dispatch(n_val: int) -> Callable[[], Built]:
        def build() -> Built:
            m = DimVar("M", 1, 17)
            proto = Function("g", (make_var("x", (m,), F32),), None, tensor_type((m,), F32))
            xs = make_var("x", (m,), F32)
            proto.add_variant(Function("g", (xs,), make_call(Binary(BinaryKind.ADD), xs, xs),
                                       tensor_type((m,), F32), (DimVarRangePat("M", 1, 8),),
                                       label="small"))
            xl = make_var("x", (m,), F32)
            proto.add_variant(Function("g", (xl,), make_call(Binary(BinaryKind.MUL), xl, xl),
                                       tensor_type((m,), F32), (DimVarRangePat("M", 8, 17),),
                                       label="large"))
            y = make_var("y", (m,), F32)
            body = make_call(Unary(UnaryKind.NEG), Call(proto, (y,)))
            a = values_array(np.linspace(-3, 3, n_val), F32)
            return make_module([y], body, extra=(proto,)), ENTRY, [a]

        return build

    for n_val, w in ((5, "small"), (8, "boundary"), (16, "large")):
        add(f"spec/function/dispatch-{w}/f32", "program", dispatch(n_val),
            ops=("Binary", "Binary.add", "Binary.mul", "Unary", "Unary.neg"), dtypes=(F32,),
            spec=_S_DISPATCH, tier="quick")

    def call_twice() -> Built:
        p = make_var("p", (3,), F32)
        callee = Function("sq_plus", (p,), make_call(Binary(BinaryKind.ADD),
                                                  make_call(Unary(UnaryKind.SQUARE), p), p), None)
        x = make_var("x", (3,), F32)
        body = Tuple((Call(callee, (x,)), Call(callee, (make_call(Unary(UnaryKind.NEG), x),))))
        return make_module([x], body, extra=(callee,)), ENTRY, [values_array([1.5, -2.0, 1e20], F32)]

    add("spec/function/call-elaboration/f32", "program", call_twice,
        ops=("Binary", "Binary.add", "Unary", "Unary.square", "Unary.neg"), dtypes=(F32,),
        spec=_S_CALL, tier="quick")


def _spec_sharded(acc: Acc) -> None:
    add = acc.add

    def gather_partial(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = make_mesh((2,))
            r = case_rng(f"spec/reshard/partial-sum/{dt}")
            a = fill_shape(special_values(dt), (4, 3), r)
            a[0] = values_array([-0.0, -0.0, 1.0], dt)
            x = make_var("x", (4, 3), dt, shard_layout(mesh, (Split(0),), (4, 3)))
            idx = np.asarray([0, 3, 1, 0, 2], np.int64)
            i = make_var("i", idx.shape, I64)
            g = make_call(Gather(axis=0), x, i)
            out = make_call(Reshard(layout=shard_layout(mesh, (Broadcast(),), (5, 3))), g)
            return make_module([x, i], out, topo), ENTRY, [a, idx]

        return build

    for dt in (F32, BF16):
        add(f"spec/reshard/partial-sum-completion/{dt}", "sharding", gather_partial(dt),
            ops=("Gather", "Reshard"), dtypes=(dt, I64), spec=_S_PARTIAL + " " + _S_GATHER_SPLIT,
            tier="quick")

    def partial_max(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = make_mesh((3,))
            a = values_array([1.0, -0.0, 0.0, np.nan, -np.inf, 2.5], dt)
            b = values_array([0.5, 0.0, -0.0, 1.0, 1.0, -2.5], dt)
            x = make_var("x", (6,), dt, shard_layout(mesh, (Partial("max"),), (6,)))
            y = make_var("y", (6,), dt)
            s = make_call(Binary(BinaryKind.ADD), x, y)
            out = make_call(Reshard(layout=shard_layout(mesh, (Broadcast(),), (6,))), s)
            return make_module([x, y], out, topo), ENTRY, [a, b]

        return build

    for dt in (F32, BF16):
        add(f"spec/reshard/partial-max-completion/{dt}", "sharding", partial_max(dt),
            ops=("Binary", "Binary.add", "Reshard"), dtypes=(dt,), spec=_S_PARTIAL,
            tier="quick")

    def local_shape() -> Built:
        mesh, topo = make_mesh((2, 2))
        x = make_var("x", (4, 6), F32, shard_layout(mesh, (Split(0), Split(1)), (4, 6)))
        out = make_call(ShapeOf(), make_call(Local(), x))
        return make_module([x], out, topo), ENTRY, [fill_shape(special_values(F32), (4, 6))]

    add("spec/local/shape-contracts-split-axes/f32", "sharding", local_shape,
        ops=("Local", "ShapeOf"), dtypes=(F32,), spec=_S_LOCAL, tier="quick")
