"""The exhaustive numerics sweeps (split from ``conformance/catalog.py``, D383).

``cast/...`` (every bit pattern of each narrow
source format through every destination and mode, the structured f32 patterns, the near-tie
integers), ``binary/<fp8>/<kind>/all-pairs`` and ``unary/<dtype>/<kind>/all-patterns``; the
quick tier takes a representative subset.
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
    I32,
    I64,
    NN_ELEMENTWISE,
    Acc,
    Built,
    case_rng,
    kinded,
    make_call,
    make_module,
    make_var,
    special_unary_op,
    special_values,
    split_pairs,
)
from tilefoundry.conformance.numerics_sweep import (
    EXHAUSTIVE_SOURCES,
    FLOATS,
    INTS,
    all_patterns,
    modes,
    structured_f32_patterns,
)
from tilefoundry.semantics.dtypes import FORMATS, DType, bits_dtype, from_bits
from tilefoundry.semantics.ir import (
    Module,
)
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Cast,
    Unary,
    UnaryKind,
)


# =============================================================================================
# exhaustive numerics sweeps
# =============================================================================================
def _cast_id(src: str, dst: DType, overflow: str, rounding: str, what: str) -> str:
    s = f"cast/{src}->{dst}"
    if dst.is_float:
        s += f"/{overflow}"
    if dst is E8M0:
        s += f"/{rounding}"
    return f"{s}/{what}"


#: representative sweeps that run in the quick tier
_QUICK_SWEEPS = {
    "cast/bf16->fp8e4m3/nonfinite/exhaustive", "cast/bf16->fp8e4m3/saturate/exhaustive",
    "cast/f16->bf16/nonfinite/exhaustive", "cast/f16->fp8e4m3/saturate/exhaustive",
    "cast/f16->fp8e5m2/nonfinite/exhaustive", "cast/fp8e4m3->f32/nonfinite/exhaustive",
    "cast/f16->f8e8m0/nonfinite/up/exhaustive", "cast/bf16->i32/exhaustive",
    "cast/f32->bf16/nonfinite/structured", "cast/f32->fp8e4m3/saturate/structured",
    "cast/i32->bf16/nonfinite/near-ties",
    "binary/fp8e4m3/add/all-pairs", "binary/fp8e5m2/mul/all-pairs",
    "binary/fp8e4m3/max/all-pairs", "binary/fp8e4m3/div/all-pairs",
    "unary/bf16/exp/all-patterns", "unary/f16/sqrt/all-patterns",
    "unary/bf16/round/all-patterns", "unary/fp8e4m3/rsqrt/all-patterns",
}


def _cast_module(src: DType, dst: DType, overflow: str, rounding: str, n: int) -> Module:
    x = make_var("x", (n,), src)
    return make_module([x], make_call(Cast(dst, overflow=overflow, rounding=rounding), x))


def _build_cast(src: DType, dst: DType, overflow: str, rounding: str,
                make: Callable[[], np.ndarray]) -> Callable[[], Built]:
    def build() -> Built:
        x = make()
        return _cast_module(src, dst, overflow, rounding, x.size), ENTRY, [x]

    return build


def _structured_f32() -> np.ndarray:
    return np.ascontiguousarray(structured_f32_patterns().view(np.float32))


def _near_tie_ints(src: DType) -> np.ndarray:
    """Integers at, one below and one above the rounding ties of 8- and 11-bit significands, at
    every binade the source type holds (the double-rounding inputs of F2 included)."""
    top = 31 if src is I32 else 63
    vals: set[int] = set()
    for p in (4, 8, 11, 24):  # significand bits of fp8e4m3, bf16, f16, f32
        for s in range(p, top):
            for m in (1 << (p - 1), (1 << p) - 1, 0b1011 << max(0, p - 4)):
                tie = ((2 * m + 1) << (s - p))  # halfway between m·2^(s-p+1) and the next
                for d in (-2, -1, 0, 1, 2, 1 << max(0, s - p - 8)):
                    v = tie + d
                    if v < (1 << top):
                        vals.add(v)
                        vals.add(-v)
    return np.asarray(sorted(vals), dtype=FORMATS[src].storage)


def _cast_sweeps(acc: Acc) -> None:
    dsts = FLOATS + INTS + (BOOL,)
    for src in EXHAUSTIVE_SOURCES:
        for dst in dsts:
            for overflow, rounding in modes(dst):
                cid = _cast_id(str(src), dst, overflow, rounding, "exhaustive")
                acc.add(cid, "cast", _build_cast(src, dst, overflow, rounding,
                                                 lambda s=src: all_patterns(s)),
                        ops=("Cast",), dtypes=(src, dst),
                        tier="quick" if cid in _QUICK_SWEEPS else "full")
    for dst in FLOATS[1:] + INTS + (BOOL,):
        for overflow, rounding in modes(dst):
            cid = _cast_id("f32", dst, overflow, rounding, "structured")
            acc.add(cid, "cast", _build_cast(F32, dst, overflow, rounding, _structured_f32),
                    ops=("Cast",), dtypes=(F32, dst),
                    tier="quick" if cid in _QUICK_SWEEPS else "full")
    for src in (I32, I64):
        for dst in (F32, BF16, F16, E4M3):
            for overflow, rounding in modes(dst):
                cid = _cast_id(str(src), dst, overflow, rounding, "near-ties")
                acc.add(cid, "cast", _build_cast(src, dst, overflow, rounding,
                                                 lambda s=src: _near_tie_ints(s)),
                        ops=("Cast",), dtypes=(src, dst),
                        spec="ARCHITECTURE.md, Numeric contracts: \"Integer → float rounds once "
                             "from the exact integer (no double rounding through f32).\"",
                        tier="quick" if cid in _QUICK_SWEEPS else "full")


_SWEEP_BINARY = (BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL, BinaryKind.DIV,
                 BinaryKind.MIN, BinaryKind.MAX, BinaryKind.EQ, BinaryKind.NE, BinaryKind.LT,
                 BinaryKind.LE, BinaryKind.GT, BinaryKind.GE)


_FLOAT_UNARY = tuple(k for k in UnaryKind if k is not UnaryKind.LOGICAL_NOT)


def _binary_build(kind: BinaryKind, dt: DType, make: Callable[[], tuple]) -> Callable[[], Built]:
    def build() -> Built:
        a, b = make()
        x, y = make_var("a", a.shape, dt), make_var("b", b.shape, dt)
        return make_module([x, y], make_call(Binary(kind), x, y)), ENTRY, [a, b]

    return build


def _unary_build(kind: UnaryKind, dt: DType, make: Callable[[], np.ndarray]
                 ) -> Callable[[], Built]:
    def build() -> Built:
        a = make()
        x = make_var("x", a.shape, dt)
        return make_module([x], make_call(Unary(kind), x)), ENTRY, [a]

    return build


_LOWP = "ARCHITECTURE.md, Numeric contracts: \"Low-precision arithmetic (bf16, f16, fp8 " \
        "operands): widen exactly to f32, apply the IEEE f32 operation (rounded to nearest " \
        "even), round the f32 result to the operand dtype.\""


def _arith_sweeps(acc: Acc) -> None:
    for dt in (E4M3, E5M2):
        for kind in _SWEEP_BINARY:
            cid = f"binary/{dt}/{kind.value}/all-pairs"
            acc.add(cid, "math", _binary_build(kind, dt, lambda d=dt: split_pairs(all_patterns(d))),
                    ops=kinded(Binary(kind)), dtypes=(dt,), spec=_LOWP,
                    tier="quick" if cid in _QUICK_SWEEPS else "full")
    for dt in (F16, BF16, E4M3, E5M2):
        for kind in _FLOAT_UNARY:
            cid = f"unary/{dt}/{kind.value}/all-patterns"
            acc.add(cid, "math", _unary_build(kind, dt, lambda d=dt: all_patterns(d)),
                    ops=kinded(Unary(kind)), dtypes=(dt,),
                    tier="quick" if cid in _QUICK_SWEEPS else "full")
    # 16- and 32-bit formats: every pair is too many; seeded random bit patterns plus the
    # special set crossed with itself
    for dt in (F32, BF16, F16):
        for kind in _SWEEP_BINARY[:6]:
            cid = f"binary/{dt}/{kind.value}/sampled"
            acc.add(cid, "math", _binary_build(kind, dt, lambda c=cid, d=dt: _sampled_pairs(c, d)),
                    ops=kinded(Binary(kind)), dtypes=(dt,), spec=_LOWP, tier="full")
    for kind in _FLOAT_UNARY:
        cid = f"unary/f32/{kind.value}/sampled"
        acc.add(cid, "math", _unary_build(kind, F32, lambda c=cid: _sampled(c, F32)),
                ops=kinded(Unary(kind)), dtypes=(F32,), tier="full")
    for dt in (BF16, F16, E4M3, E5M2):
        for name, op in NN_ELEMENTWISE.items():
            acc.add(f"nn/{dt}/{name}/all-patterns", "nn",
                    special_unary_op(op, dt, all_patterns), ops=(type(op).__name__,),
                    dtypes=(dt,), tier="full")
    for name, op in NN_ELEMENTWISE.items():
        cid = f"nn/f32/{name}/sampled"
        acc.add(cid, "nn", special_unary_op(op, F32, lambda d, c=cid: _sampled(c, d)),
                ops=(type(op).__name__,), dtypes=(F32,), tier="full")


_SAMPLES = 1 << 18


def _sampled(case_id: str, dt: DType) -> np.ndarray:
    """The special set, then seeded uniformly random bit patterns of ``dt`` (``_SAMPLES``)."""
    r = case_rng(case_id)
    nbits = FORMATS[dt].bits
    bits = r.integers(0, 1 << nbits, _SAMPLES, dtype=np.uint64).astype(bits_dtype(dt))
    return np.ascontiguousarray(np.concatenate([special_values(dt), from_bits(bits, dt)]))


def _sampled_pairs(case_id: str, dt: DType) -> tuple[np.ndarray, np.ndarray]:
    a, b = split_pairs(special_values(dt))
    x, y = _sampled(case_id + "/a", dt), _sampled(case_id + "/b", dt)
    return (np.ascontiguousarray(np.concatenate([a, x])),
            np.ascontiguousarray(np.concatenate([b, y])))
