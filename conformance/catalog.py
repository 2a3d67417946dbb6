"""The conformance case catalog: ``build_catalog(seed)``.

Every case is a deterministic recipe (``conformance/cases.py``): ``build()`` returns
``(module, "f", inputs)`` with plain C-contiguous numpy inputs (ml_dtypes storage for the low
precision formats; a sharded parameter takes the *global* array, which a mesh-capable backend
distributes as the parameter's ShardLayout says). Building the catalog builds no program — the
builders run when a case runs, so a worker process rebuilds the catalog and picks one id cheaply.

Families of cases (the first segment of the id):

* ``spec/...`` — **spec-derived**: each cites the sentence it tests in ``Case.spec`` (the HIR spec,
  the Tile design, or ARCHITECTURE.md's numeric contracts, which decide what the missing companion
  documents leave open). Empty-reduction identities, NaN and signed-zero order of max / min,
  round half to even, integer wraparound, the fold_left / fold_right ``[1, 2, 3]`` example,
  Gather's batched element rule, CacheUpdate's write window, TopK tie-breaking, the fused Silu,
  RoPE's rotate-half form, casts' overflow modes, f8e8m0 rounding, single rounding, Partial
  completion by Reshard (sharded), loops, calls and dispatch.
* ``cast/<src>-><dst>/[<overflow>/][<rounding>/]exhaustive`` — every bit pattern of f16, bf16,
  fp8e4m3, fp8e5m2, f8e8m0, i8, u8 and bool through every destination and mode (one case per
  (src, dst, overflow, rounding)); ``.../structured`` — the f32 patterns that put a tie, a carry
  and a sticky bit at every rounding position for every exponent
  (``numerics_sweep.structured_f32_patterns``); ``.../near-ties`` — i32 / i64 integers next to
  the destination's rounding ties.
* ``binary/<fp8>/<kind>/all-pairs`` — all 65,536 pairs of an fp8 format through add, sub, mul,
  div, min, max and the comparisons; ``unary/<dtype>/<kind>/all-patterns`` — every pattern of
  f16, bf16 and the fp8 formats through every float Unary kind.
* ``spec/tile/...`` / ``special/tile/...`` — the tile family (Select / ``ite``, Bitcast, Scan)
  and the fold_right orientation example (``conformance/catalog_tile.py``).
* ``special/<family>/<op>/<dtype>`` — every op of ``ALL_OPS`` over special values (NaN, ±inf,
  ±0, subnormals, max finite, rounding ties, half-integers) in every float dtype it takes
  (f32, bf16, f16 always; the fp8 formats for the elementwise and structural ops).
* ``sharded/...`` — sharded programs (Split inputs, Partial results completed by Reshard,
  per-device elementwise, redistribution, ``Local``); they need ``Capabilities.mesh`` (the runner
  derives NOT_SUPPORTED from ``requirements(module).mesh``).
* ``spec/run-time-check/<check>/...`` (and ``sharded/run-time-check/...``) — **expected-error**
  cases (``Case.expect_error``): inputs that fail a run-time check of the spec (a Gather index or
  RoPE position out of range, a CacheUpdate or InsertSlice window out of bounds, an extent
  outside a dispatch envelope); a backend passes by raising ``RunTimeCheckError``
  (``backend.py``), all in the quick tier; see ``_run_time_check_cases``.
* ``spec/tile/...`` and ``special/tile/...`` — the ``tile`` family's seeded, masked and custom
  reductions (``conformance/catalog_tile_reduce.py``): the seed's position per policy, empty and
  fully masked fibers returning the seed, masked lanes skipped, Welford / product / difference
  reducers, special values.
* ``program/seed<S>/<i>`` — hypothesis-generated programs, drawn from ``seed`` when the program
  generator (``tilefoundry.oracle.programs``) is importable; see ``_program_cases``.
* ``capability/<key>/<n>`` — with ``build_catalog(seed, backend_caps=caps)`` (every run: the
  runner passes the judged backend's capabilities): programs composed only of the claimed ops,
  dtypes and modes — chains and DAGs of >= 3 of them with narrow-float rounding points in the
  middle, reductions feeding elementwise ops, casts between claimed dtypes
  (``conformance/catalog_capability.py``); ``key`` hashes the capability set and ``seed``.
* ``kernels/<pattern>/...`` — the patterns real models run (SwiGLU, RMSNorm, softmax, RoPE,
  attention, cross-entropy, GEMM epilogues, MX fp8 quantization, ...) at model shapes, each
  quoting its convention (``conformance/catalog_kernels.py``).

Determinism: ids never depend on the machine; inputs depend only on the case id (a SHA-256 of
the id seeds the case's generator), except generated programs, whose ids carry the seed. The
same ``seed`` therefore gives the same ids and the same input bits.

Tiers: ``quick`` (the spec cases, the special-value cases, the sharded cases, a representative
subset of the sweeps, 25 generated programs, the expected-error cases, the coverage fill, the
kernels family's small shapes) ⊂ ``full`` (everything). The sizes and the reference's time are
in docs/conformance.md (held to this catalog by ``tests/conformance/test_conformance_doc.py``);
``tilefoundry conformance list --tier quick`` counts them per family.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from tilefoundry.conformance.cases import Case, Catalog
from tilefoundry.conformance.numerics_sweep import (
    EXHAUSTIVE_SOURCES,
    FLOATS,
    INTS,
    all_patterns,
    modes,
    structured_f32_patterns,
)
from tilefoundry.semantics.dtypes import FORMATS, DType, bits_dtype, cast, from_bits, to_bits
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    DimVarRangePat,
    Function,
    GridRegionExpr,
    Module,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.ops import (
    ALL_OPS,
    Binary,
    BinaryKind,
    CacheUpdate,
    Cast,
    Concat,
    Conv2D,
    Gather,
    Gelu,
    InsertSlice,
    LayerNorm,
    Local,
    MatMul,
    Rank,
    Reduce,
    ReduceKind,
    ReLU,
    Reshape,
    Reshard,
    RMSNorm,
    RoPE,
    ShapeCompose,
    ShapeExtract,
    ShapeOf,
    Sigmoid,
    Silu,
    Slice,
    SoftMax,
    Stack,
    Tanh,
    TopK,
    Transpose,
    Unary,
    UnaryKind,
    Zeros,
)
from tilefoundry.semantics.types import (
    Broadcast,
    DimVar,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    TensorType,
    Topology,
    TopologyLevel,
)

__all__ = ["ENTRY", "GENERATED_PER_TIER", "build_catalog", "int_special_values",
           "special_values"]

ENTRY = "f"
F32, F16, BF16 = DType.F32, DType.F16, DType.BF16
E4M3, E5M2, E8M0 = DType.FP8E4M3, DType.FP8E5M2, DType.F8E8M0
I8, U8, I32, I64, BOOL = DType.I8, DType.U8, DType.I32, DType.I64, DType.BOOL
FLOAT3 = (F32, BF16, F16)
FLOAT5 = (F32, BF16, F16, E4M3, E5M2)
FLOAT6 = (*FLOAT5, E8M0)
INT4 = (I8, U8, I32, I64)
#: generated (unsharded) programs per tier — quick ⊂ full: the first ``quick`` of the full list;
#: a quarter as many sharded ones
GENERATED_PER_TIER = {"quick": 20, "full": 200}

Built = tuple[Module, str, list]


# =============================================================================================
# small helpers
# =============================================================================================
def _rng(case_id: str) -> np.random.Generator:
    """The case's own generator: seeded by the id, so inputs never depend on build order."""
    d = hashlib.sha256(case_id.encode()).digest()
    return np.random.default_rng(int.from_bytes(d[:8], "little"))


def _t(shape: tuple, dt: DType, shard: ShardLayout | None = None) -> TensorType:
    return TensorType(tuple(shape), dt, shard) if shard is not None else \
        TensorType(tuple(shape), dt)


def _var(name: str, shape: tuple, dt: DType, shard: ShardLayout | None = None) -> Var:
    return Var(name, _t(shape, dt, shard))


def _call(op, *args) -> Call:
    return Call(op, tuple(args))


def _module(params: list[Var], body, topology: Topology | None = None,
            extra: tuple[Function, ...] = ()) -> Module:
    fn = Function(ENTRY, tuple(params), body, None)
    if topology is None:
        return Module((fn, *extra))
    return Module((fn, *extra), topology=topology)


def _vals(values, dt: DType) -> np.ndarray:
    """Python numbers as an array of ``dt`` (one rounding from f64 through the exact cast for
    floats: exact for every value used here)."""
    if dt.is_float:
        return np.ascontiguousarray(cast(np.asarray(values, np.float64).astype(np.float32), dt))
    return np.ascontiguousarray(np.asarray(values).astype(FORMATS[dt].storage))


def _frac(v: Fraction) -> float:
    return float(v)


def _named(dt: DType) -> dict[str, np.ndarray]:
    """Named special scalars of a float dtype (0-d arrays)."""
    info = FORMATS[dt]
    big = _frac(info.max_finite)
    sub = _frac(info.min_subnormal)
    table = {
        "nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"),
        "max": big, "-max": -big, "0": 0.0, "-0": -0.0, "minsub": sub, "-minsub": -sub,
        "minnorm": _frac(info.min_normal), "1": 1.0, "-1": -1.0, "2": 2.0, "-2": -2.0,
        "3": 3.0, "-3": -3.0, "4": 4.0, "-4": -4.0, "0.5": 0.5, "-0.5": -0.5, "1.5": 1.5, "2.5": 2.5,
        "-2.5": -2.5, "10": 10.0, "-10": -10.0, "0.25": 0.25, "5": 5.0,
    }
    return {k: np.asarray(cast(np.asarray(v, np.float32), dt)) for k, v in table.items()}


def _rows(dt: DType, rows: list[list[str]]) -> np.ndarray:
    named = _named(dt)
    out = np.stack([np.stack([named[n] for n in r]) for r in rows])
    return np.ascontiguousarray(out)


def special_values(dt: DType) -> np.ndarray:
    """The special values of a float dtype as a 1-D array of ``dt``: ±0, the smallest and
    largest subnormal, the smallest normal, max finite and its predecessor, ±inf, NaN (both
    signs where the format has them), rounding ties of narrower formats (``1 + 2^-k``),
    half-integers for round / ceil, and a few ordinary values (powers of two, 0.1, 10, 88.5 where
    exp overflows in f32, ...). Each value appears once (by bits)."""
    info = FORMATS[dt]
    mags: list[int] = [0, 1, info.max_code, info.max_code - 1]
    if info.implicit_bit:
        mags += [(1 << info.mbits) - 1, 1 << info.mbits]
    if info.inf_code is not None:
        mags.append(info.inf_code)
    if info.nan_code is not None:
        mags.append(info.nan_code)
    codes = list(mags)
    if info.has_sign:
        codes += [m | info.sign_bit for m in mags]
    bits = np.array(codes, dtype=np.uint64).astype(bits_dtype(dt))
    parts = [from_bits(bits, dt)]
    ordinary = [1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, 0.1, -0.1, 10.0, -10.0,
                88.5, -88.5, 100.0, 1e-3, 0.75]
    ordinary += [1.0 + 2.0 ** -k for k in (2, 3, 4, 8, 11) if k <= info.mbits]
    ordinary += [-(1.0 + 2.0 ** -k) for k in (3, 8) if k <= info.mbits]
    parts.append(cast(np.asarray(ordinary, np.float32), dt))
    allv = np.concatenate(parts)
    _, first = np.unique(to_bits(allv), return_index=True)
    return np.ascontiguousarray(allv[np.sort(first)])


def int_special_values(dt: DType) -> np.ndarray:
    ii = np.iinfo(FORMATS[dt].storage)
    vals = [int(ii.min), int(ii.min) + 1, -2, -1, 0, 1, 2, 3, 7, 100, int(ii.max) - 1,
            int(ii.max)]
    vals = sorted({v for v in vals if ii.min <= v <= ii.max})
    return np.asarray(vals, dtype=FORMATS[dt].storage)


def _fill(values: np.ndarray, shape: tuple, rng: np.random.Generator | None = None) -> np.ndarray:
    """``values`` cycled (optionally permuted by ``rng``) into ``shape``."""
    n = math.prod(shape)
    v = values if rng is None else values[rng.permutation(values.size)]
    reps = -(-n // max(1, v.size))
    return np.ascontiguousarray(np.tile(v, reps)[:n].reshape(shape))


def _random_float(rng: np.random.Generator, shape: tuple, dt: DType, lo: float = -2.0,
                  hi: float = 2.0) -> np.ndarray:
    return np.ascontiguousarray(cast(rng.uniform(lo, hi, shape).astype(np.float32), dt))


def _pairs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = x.size
    return (np.ascontiguousarray(np.repeat(x, n)), np.ascontiguousarray(np.tile(x, n)))


def _scalar(v: int, dt: DType = I32) -> np.ndarray:
    return np.asarray(v, FORMATS[dt].storage)


def _mesh(ext: tuple[int, ...]) -> tuple[Mesh, Topology]:
    mesh = Mesh("device", ("x", "y")[:len(ext)], ext)
    return mesh, Topology((TopologyLevel("device", math.prod(ext)),))


def _sl(mesh: Mesh, attrs: tuple, shape: tuple) -> ShardLayout:
    return ShardLayout(mesh, tuple(attrs), Layout(tuple(shape)))


# =============================================================================================
# the catalog
# =============================================================================================
class _Acc:
    """Collects cases; ``add`` takes the builder and its metadata."""

    def __init__(self) -> None:
        self.cases: list[Case] = []

    def add(self, cid: str, family: str, build: Callable[[], Built], *, ops: tuple = (),
            dtypes: tuple = (), spec: str = "", tier: str = "full",
            expect_error: str | None = None) -> None:
        self.cases.append(Case(cid, family, build, tuple(ops), tuple(str(d) for d in dtypes),
                               spec, tier, expect_error))


def build_catalog(seed: int = 0, *, backend_caps=None) -> Catalog:
    """Every case of the conformance suite (``full``), the ``quick`` ones marked; see the
    module docstring. Deterministic in ``seed``; cheap (no program is built here, except the
    first capability-directed one, to see that the claim admits any).

    ``backend_caps`` (the ``Capabilities`` being judged; the runner passes them) adds the
    capability-directed programs of that claim (``capability/<key>/<n>``,
    ``conformance/catalog_capability.py``) to both tiers."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        from tilefoundry.errors import InvalidArgumentError

        raise InvalidArgumentError(f"build_catalog: seed must be a non-negative int, got "
                                   f"{seed!r}")
    acc = _Acc()
    _spec_cases(acc)
    _cast_sweeps(acc)
    _arith_sweeps(acc)
    _special_cases(acc)
    _sharded_cases(acc)
    _sharded_loop_cases(acc)
    _program_cases(acc, seed)
    _run_time_check_cases(acc)
    from tilefoundry.conformance.catalog_coverage import coverage_cases

    coverage_cases(acc)
    from tilefoundry.conformance.catalog_tile import tile_cases

    tile_cases(acc)
    from tilefoundry.conformance.catalog_tile_reduce import tile_reduce_cases

    tile_reduce_cases(acc)
    from tilefoundry.conformance.catalog_tile_scan_flags import tile_scan_flag_cases

    tile_scan_flag_cases(acc)
    from tilefoundry.conformance.catalog_tile_ite import tile_ite_nan_cases

    tile_ite_nan_cases(acc)
    from tilefoundry.conformance.catalog_tile_gather import tile_gather_cases

    tile_gather_cases(acc)
    from tilefoundry.conformance.catalog_tile_mma_acc import tile_mma_acc_cases

    tile_mma_acc_cases(acc)
    from tilefoundry.conformance.catalog_kernels import kernel_cases

    kernel_cases(acc.add)
    _quick_fill(acc)
    if backend_caps is not None:
        from tilefoundry.conformance.catalog_capability import capability_cases

        acc.cases.extend(capability_cases(backend_caps, seed))
    return Catalog(acc.cases)


def pool_case(i: int) -> Case:
    """Program ``i`` of the coverage pool (``coverage.POOL_SEED``): a generated program the
    quick tier's fill may choose (``program/cover/<i>``, full tier unless chosen)."""
    from tilefoundry.conformance.coverage import POOL_SEED

    gen = _program_generator()
    sharded = i % 5 == 4

    def build() -> Built:
        return gen(POOL_SEED + i, sharded=sharded)

    return Case(f"program/cover/{i}", "sharding" if sharded else "program", build, (), (),
                f"Generated program (tilefoundry.oracle.programs.generate_program"
                f"({POOL_SEED + i}{', sharded=True' if sharded else ''})), chosen to cover "
                f"what the rest of the quick tier does not", "full")


def _quick_fill(acc: _Acc) -> None:
    """The quick tier's coverage fill (``conformance/quick_fill.json``, written by
    ``tilefoundry conformance coverage --write-fill``): full-tier cases promoted to quick and
    pool programs added, so the quick tier exercises every op feature and cast boundary class
    the full tier and the program pool do (``tests/conformance/test_coverage.py``)."""
    import dataclasses

    from tilefoundry.conformance.coverage import load_fill

    fill = load_fill()
    promote = set(fill.get("promote", ()))
    acc.cases = [dataclasses.replace(c, tier="quick") if c.id in promote else c
                 for c in acc.cases]
    if _program_generator() is None:
        return
    for i in fill.get("programs", ()):
        acc.cases.append(dataclasses.replace(pool_case(int(i)), tier="quick"))


def _kinded(op) -> tuple[str, ...]:
    name = type(op).__name__
    kind = getattr(op, "kind", None)
    return (name, f"{name}.{kind.value}") if hasattr(kind, "value") else (name,)


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
    x = _var("x", (n,), src)
    return _module([x], _call(Cast(dst, overflow=overflow, rounding=rounding), x))


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


def _cast_sweeps(acc: _Acc) -> None:
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
        x, y = _var("a", a.shape, dt), _var("b", b.shape, dt)
        return _module([x, y], _call(Binary(kind), x, y)), ENTRY, [a, b]

    return build


def _unary_build(kind: UnaryKind, dt: DType, make: Callable[[], np.ndarray]
                 ) -> Callable[[], Built]:
    def build() -> Built:
        a = make()
        x = _var("x", a.shape, dt)
        return _module([x], _call(Unary(kind), x)), ENTRY, [a]

    return build


_LOWP = "ARCHITECTURE.md, Numeric contracts: \"Low-precision arithmetic (bf16, f16, fp8 " \
        "operands): widen exactly to f32, apply the IEEE f32 operation (rounded to nearest " \
        "even), round the f32 result to the operand dtype.\""


def _arith_sweeps(acc: _Acc) -> None:
    for dt in (E4M3, E5M2):
        for kind in _SWEEP_BINARY:
            cid = f"binary/{dt}/{kind.value}/all-pairs"
            acc.add(cid, "math", _binary_build(kind, dt, lambda d=dt: _pairs(all_patterns(d))),
                    ops=_kinded(Binary(kind)), dtypes=(dt,), spec=_LOWP,
                    tier="quick" if cid in _QUICK_SWEEPS else "full")
    for dt in (F16, BF16, E4M3, E5M2):
        for kind in _FLOAT_UNARY:
            cid = f"unary/{dt}/{kind.value}/all-patterns"
            acc.add(cid, "math", _unary_build(kind, dt, lambda d=dt: all_patterns(d)),
                    ops=_kinded(Unary(kind)), dtypes=(dt,),
                    tier="quick" if cid in _QUICK_SWEEPS else "full")
    # 16- and 32-bit formats: every pair is too many; seeded random bit patterns plus the
    # special set crossed with itself
    for dt in (F32, BF16, F16):
        for kind in _SWEEP_BINARY[:6]:
            cid = f"binary/{dt}/{kind.value}/sampled"
            acc.add(cid, "math", _binary_build(kind, dt, lambda c=cid, d=dt: _sampled_pairs(c, d)),
                    ops=_kinded(Binary(kind)), dtypes=(dt,), spec=_LOWP, tier="full")
    for kind in _FLOAT_UNARY:
        cid = f"unary/f32/{kind.value}/sampled"
        acc.add(cid, "math", _unary_build(kind, F32, lambda c=cid: _sampled(c, F32)),
                ops=_kinded(Unary(kind)), dtypes=(F32,), tier="full")
    for dt in (BF16, F16, E4M3, E5M2):
        for name, op in _NN_ELEMENTWISE.items():
            acc.add(f"nn/{dt}/{name}/all-patterns", "nn",
                    _special_unary_op(op, dt, all_patterns), ops=(type(op).__name__,),
                    dtypes=(dt,), tier="full")
    for name, op in _NN_ELEMENTWISE.items():
        cid = f"nn/f32/{name}/sampled"
        acc.add(cid, "nn", _special_unary_op(op, F32, lambda d, c=cid: _sampled(c, d)),
                ops=(type(op).__name__,), dtypes=(F32,), tier="full")


_SAMPLES = 1 << 18


def _sampled(case_id: str, dt: DType) -> np.ndarray:
    """The special set, then seeded uniformly random bit patterns of ``dt`` (``_SAMPLES``)."""
    r = _rng(case_id)
    nbits = FORMATS[dt].bits
    bits = r.integers(0, 1 << nbits, _SAMPLES, dtype=np.uint64).astype(bits_dtype(dt))
    return np.ascontiguousarray(np.concatenate([special_values(dt), from_bits(bits, dt)]))


def _sampled_pairs(case_id: str, dt: DType) -> tuple[np.ndarray, np.ndarray]:
    a, b = _pairs(special_values(dt))
    x, y = _sampled(case_id + "/a", dt), _sampled(case_id + "/b", dt)
    return (np.ascontiguousarray(np.concatenate([a, x])),
            np.ascontiguousarray(np.concatenate([b, y])))


# =============================================================================================
# spec-derived cases
# =============================================================================================
_S_EMPTY = ("HIR Reduce: \"A reduction over an axis of no elements MUST return that kind's "
            "identity rather than fail. For max that is the least value its result dtype can "
            "hold, which is not always -inf: an integer dtype cannot hold -inf, bool's least "
            "value is False, and a finite-only float has no infinity. abs_max is 0, its results "
            "being magnitudes. sum is 0.\"")
_S_MAXMIN = ("ARCHITECTURE.md, Numeric contracts: \"`max`/`min` propagate NaN and order "
             "`-0 < +0`.\" (docs/decisions.md D35, D93)")
_S_ROUND = ("HIR Unary: \"round rounds to the nearest integer with ties to even (banker's "
            "rounding, matching torch's own round semantics).\"")
_S_CEIL = "HIR Unary: \"ceil rounds toward positive infinity\""
_S_WRAP = ("docs/decisions.md D93 / D34: integers follow torch with two's-complement "
           "wraparound (`abs(INT_MIN) = INT_MIN`); integer sums wrap in the input dtype.")
_S_FOLD = ("Tile design, Reference fold: \"left = left - x.at(r)\" (fold_left) and \"right = "
           "x.at(r) - right\" (fold_right): \"For x = [1, 2, 3] these examples yield left = -6, "
           "right = 2.\"")
_S_FOLD_DIFFER = ("Tile design: \"A policy is not an optimization-strength integer: left and "
                  "right folds generally compute different functions.\" fold_left = "
                  "op(op(op(z, x0), x1), x2), fold_right = op(x0, op(x1, op(x2, z))).")
_S_LOWP_RED = ("ARCHITECTURE.md, Numeric contracts: \"Low-precision floats accumulate in f32 "
               "and round once at the end. `fold_left` / `fold_right` are bit-exact "
               "functions\"")
_S_TREE = ("ARCHITECTURE.md, Numeric contracts: \"A tree policy defines a *set* of admitted "
           "results\"; Tile design: ordered_tree may \"Regroup; preserve leaf order\", "
           "unordered_tree may \"Regroup and permute contributions\".")
_S_GATHER = ("HIR Gather: \"Element rule: out[c.., i.., t..] = x[c.., index[b.., i..], t..], "
             "where the first batch_dims of the axis leading dims also index index.\"")
_S_GATHER0 = ("HIR Gather: \"batch_dims=0 (default) inserts the full index shape at axis; a "
              "leading-dimension shape coincidence MUST NOT implicitly enable batching\"")
_S_CACHE = ("HIR CacheUpdate: \"Write a window of ``new`` into ``cache``\" — \"cur_pos: i32 "
            "scalar where the write begins. s: i32 scalar number of positions to write. new: "
            "source positions, taken as ``new[:, :s]``.\" \"The result has cache's same static "
            "shape\"")
_S_INSERT = ("HIR InsertSlice: \"the window on each axis is [offset_axis, offset_axis + "
             "update.shape[axis]).\"")
_S_TOPK = ("Tile design: topk \"breaks equal-value ties by original index, including ties "
           "between the two zero signs.\" HIR TopK: \"sorted returns the selected elements "
           "ordered by largest\"; indices are i64.")
_S_TOPK_NAN = ("Tile design: sort(x, feature, descending, stable_ties(), nan::last) — NaNs "
               "last; the reference applies nan::last to TopK in both directions "
               "(docs/decisions.md D103).")
_S_SILU = ("HIR Silu: \"Fused rather than decomposed into Sigmoid + Binary(MUL): the fused "
           "form does not round the intermediate sigmoid(x) to x's dtype, so at reduced "
           "precision the two differ by up to ~1 ULP per element.\"")
_S_GELU = ("HIR Gelu: \"approximate: attribute; \"tanh\" selects the tanh-based approximation "
           "(HF gelu_pytorch_tanh / Gemma-2 MLP activation).\" (default \"tanh\")")
_S_ROPE = ("HIR RoPE: \"The rotation is the rotate-half form: the last axis splits in two "
           "halves and the pair (x[i], x[i + d/2]) rotates together. This is the unqualified "
           "HF convention (apply_rotary_pos_emb / rotate_half)\"")
_S_MATMUL = ("Tile design: \"Ordered accumulation is explicit: ... {.allow_reassociation = "
             "false} // preserve contraction order\"; \"Disabling reassociation retains the "
             "reference K order, not a promise to disable target FMA fusion\".")
_S_OVF = ("ARCHITECTURE.md, Numeric contracts: \"`\"nonfinite\"` (default): formats with "
          "infinities give ±inf, formats without (fp8e4m3) give NaN; `\"saturate\"`: finite "
          "overflow and infinities clamp to ±max finite; NaN stays NaN.\"")
_S_ONCE = ("ARCHITECTURE.md, Numeric contracts: \"Narrowing float casts round once from the "
           "exact source value, to nearest, ties to even. Signed zeros and subnormals are "
           "preserved; a double rounding through an intermediate format is a defect "
           "(f32→bf16→fp8e4m3 differs from f32→fp8e4m3 on millions of inputs).\"")
_S_BF16 = ("Tile design: \"BF16 host conversion from float32 uses nearest, ties to even, "
           "preserves signed zeros/subnormals, overflows to infinity and quiets NaNs.\"")
_S_E8M0 = ("ARCHITECTURE.md, Numeric contracts: \"f8e8m0 ... takes a `rounding` attribute: "
           "`\"nearest\"` (default; ties at 1.5·2^e go up, as ml_dtypes and torch do), "
           "`\"up\"` (toward +inf, the usual MX scale rule) and `\"down\"` (toward zero). Zero, "
           "negative and NaN inputs and results beyond 2^127 give NaN; results below 2^-127 "
           "give 2^-127.\"")
_S_INT2F = ("ARCHITECTURE.md, Numeric contracts: \"Integer → float rounds once from the exact "
            "integer (no double rounding through f32).\"")
_S_F2INT = ("ARCHITECTURE.md, Numeric contracts: \"Float → integer truncates toward zero; NaN "
            "or out-of-range sources give an unspecified value (the oracle accepts any value "
            "there\"")
_S_CMP = ("docs/decisions.md D93: \"Comparisons with NaN are false except `ne`; −0 == +0.\" "
          "(HIR Binary: torch pointwise semantics)")
_S_GRID = ("HIR GridRegionExpr: \"the pre-loop binding of that name becomes the matching entry "
           "in init_args (the carry's value on the first iteration)\"; \"induction_var ranges "
           "over range(start, extent, step)\"")
_S_GRID_DIM = ("HIR GridRegionExpr: \"Every DimVar referenced by a ShapeDim start / extent / "
               "step MUST be bound by the enclosing Function's parameter shapes. Resolution "
               "substitutes each such DimVar with the corresponding argument-shape size\"")
_S_DISPATCH = ("HIR Function, Dispatch resolution: \"the variant whose DimVarRangePat matches "
               "the call's concrete argument shapes is selected and is the call's result.\"")
_S_CALL = ("HIR Function, Call typing: \"A Call whose target is a Function types by "
           "elaboration: elaborate(callee, arg_types) binds each parameter to the caller's "
           "actual argument type\"")
_S_PARTIAL = ("ARCHITECTURE.md, Types: \"`Partial(reduction)` ...: every device holds a "
              "partial value; the logical value is that reduction over the axis. A Partial is a "
              "pending collective, not data.\" HIR Function: \"Only an explicit Reshard or "
              "allreduce may complete that state.\"")
_S_GATHER_SPLIT = ("HIR Gather: \"A Split targeting the gathered axis produces Partial(sum) on "
                   "that mesh axis (each device already holds the true value at the rows it "
                   "owns and a zero row elsewhere, so summing the per-device partials across "
                   "the mesh axis reconstructs the true gather).\"")
_S_LOCAL = ("HIR Local: \"The result shape contracts each Split axis by that mesh axis's "
            "extent.\"")
_S_ZEROS = "HIR Zeros: \"The result is zero-initialised.\""
_S_SOFTMAX = ("docs/decisions.md D95-D99 (nn special values): softmax: a NaN or +inf anywhere "
              "in the row makes the whole row NaN; an all −inf row is NaN; −inf entries beside "
              "a finite maximum give +0.")


def _reduce_build(kind: ReduceKind, dt: DType, make: Callable[[], np.ndarray], *,
                  axes: tuple = (1,), policy: str = "unordered_tree",
                  keepdim: bool = False) -> Callable[[], Built]:
    def build() -> Built:
        a = make()
        x = _var("x", a.shape, dt)
        op = Reduce(axes, keepdim=keepdim, kind=kind, policy=policy)
        return _module([x], _call(op, x)), ENTRY, [a]

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
        x = _var("x", (3,), dt)
        i = _var("i", (), I32)
        acc = Var("acc", None)
        if right:
            j = _call(Binary(BinaryKind.SUB), Constant(_scalar(2)), i)
            step = _call(Binary(BinaryKind.SUB), _call(Gather(axis=0), x, j), acc)
        else:
            step = _call(Binary(BinaryKind.SUB), acc, _call(Gather(axis=0), x, i))
        init = _call(Zeros((), dt))
        loop = GridRegionExpr(i, (acc,), (init,), step, (step,), 3)
        return _module([x], loop), ENTRY, [_vals([1, 2, 3], dt)]

    return build


def _spec_cases(acc: _Acc) -> None:
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
                _reduce_build(kind, dt, lambda d=dt: _vals([[1, -2, 3], [4, 5, -6]], d),
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
                _reduce_build(kind, dt, lambda d=dt: _rows(d, nan_rows)),
                ops=("Reduce", f"Reduce.{kind.value}"), dtypes=(dt,), spec=_S_MAXMIN,
                tier="quick")
        for kind in (ReduceKind.MAX, ReduceKind.MIN):
            add(f"spec/reduce/{kind.value}-orders-signed-zeros/{dt}", "tensor",
                _reduce_build(kind, dt, lambda d=dt: _rows(d, zero_rows)),
                ops=("Reduce", f"Reduce.{kind.value}"), dtypes=(dt,), spec=_S_MAXMIN,
                tier="quick")
            add(f"spec/binary/{kind.value}-orders-signed-zeros/{dt}", "math",
                _binary_build(BinaryKind(kind.value), dt,
                              lambda d=dt: (_vals([-0.0, 0.0, -0.0, 0.0, 1.0, -0.0], d),
                                            _vals([0.0, -0.0, -0.0, 0.0, -0.0, -1.0], d))),
                ops=_kinded(Binary(BinaryKind(kind.value))), dtypes=(dt,), spec=_S_MAXMIN,
                tier="quick")
            add(f"spec/binary/{kind.value}-propagates-nan/{dt}", "math",
                _binary_build(BinaryKind(kind.value), dt,
                              lambda d=dt: (_vals([np.nan, 1.0, np.nan, -np.inf, 0.0], d),
                                            _vals([1.0, np.nan, np.nan, np.nan, -0.0], d))),
                ops=_kinded(Binary(BinaryKind(kind.value))), dtypes=(dt,), spec=_S_MAXMIN,
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
            a = _vals(a, dt)
            x = _var("x", a.shape, dt)
            left = _call(Reduce((1,), keepdim=False, kind=ReduceKind.SUM, policy="fold_left"), x)
            right = _call(Reduce((1,), keepdim=False, kind=ReduceKind.SUM, policy="fold_right"),
                          x)
            return _module([x], Tuple((left, right))), ENTRY, [a]

        return build

    add("spec/reduce/fold-left-vs-fold-right-sum/f32", "tensor", fold_pair(F32),
        ops=("Reduce", "Reduce.sum"), dtypes=(F32,), spec=_S_FOLD_DIFFER, tier="quick")
    for dt in (BF16, F16, F32):
        for pol in ("fold_left", "fold_right"):
            for kind in (ReduceKind.SUM, ReduceKind.MEAN):
                cid = f"spec/reduce/{pol.replace('_', '-')}-{kind.value}/{dt}"
                add(cid, "tensor",
                    _reduce_build(kind, dt, lambda c=cid, d=dt: _random_float(
                        _rng(c), (8, 64), d, -4.0, 4.0), policy=pol),
                    ops=("Reduce", f"Reduce.{kind.value}"), dtypes=(dt,), spec=_S_LOWP_RED,
                    tier="quick")
        for pol in ("unordered_tree", "ordered_tree"):
            for n in (5, 1000):
                cid = f"spec/reduce/{pol.replace('_', '-')}-sum-len{n}/{dt}"
                add(cid, "tensor",
                    _reduce_build(ReduceKind.SUM, dt, lambda c=cid, d=dt, k=n: _random_float(
                        _rng(c), (6, k), d, -100.0, 100.0), policy=pol),
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
            _unary_build(UnaryKind.ROUND, dt, lambda d=dt: _vals(halves, d)),
            ops=_kinded(Unary(UnaryKind.ROUND)), dtypes=(dt,), spec=_S_ROUND, tier="quick")
        add(f"spec/unary/ceil-toward-positive-infinity/{dt}", "math",
            _unary_build(UnaryKind.CEIL, dt, lambda d=dt: _vals(halves, d)),
            ops=_kinded(Unary(UnaryKind.CEIL)), dtypes=(dt,), spec=_S_CEIL, tier="quick")
    for dt in INT4:
        def wrap_pairs(d=dt) -> tuple[np.ndarray, np.ndarray]:
            return _pairs(int_special_values(d))

        for kind in (BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL):
            add(f"spec/binary/int-wraparound-{kind.value}/{dt}", "math",
                _binary_build(kind, dt, wrap_pairs), ops=_kinded(Binary(kind)), dtypes=(dt,),
                spec=_S_WRAP, tier="quick")
        for kind in (UnaryKind.NEG, UnaryKind.ABS, UnaryKind.SQUARE):
            add(f"spec/unary/int-wraparound-{kind.value}/{dt}", "math",
                _unary_build(kind, dt, lambda d=dt: int_special_values(d)),
                ops=_kinded(Unary(kind)), dtypes=(dt,), spec=_S_WRAP, tier="quick")
    for dt in (BF16, F16):
        for kind in (BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL, BinaryKind.DIV):
            cid = f"spec/binary/widen-op-round-{kind.value}/{dt}"

            def rand_pairs(c=cid, d=dt) -> tuple[np.ndarray, np.ndarray]:
                r = _rng(c)
                bits = r.integers(0, 1 << 16, (2, 1 << 14), dtype=np.uint64).astype(np.uint16)
                return from_bits(bits[0], d), from_bits(bits[1], d)

            add(cid, "math", _binary_build(kind, dt, rand_pairs), ops=_kinded(Binary(kind)),
                dtypes=(dt,), spec=_LOWP, tier="quick")
    for dt in (F32, BF16):
        for kind in (BinaryKind.EQ, BinaryKind.NE, BinaryKind.LT, BinaryKind.LE,
                     BinaryKind.GT, BinaryKind.GE):
            add(f"spec/binary/compare-nan-signed-zero-{kind.value}/{dt}", "math",
                _binary_build(kind, dt, lambda d=dt: (
                    _vals([np.nan, 1.0, np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0], d),
                    _vals([1.0, np.nan, np.nan, 0.0, -0.0, np.inf, np.inf, 1.0], d))),
                ops=_kinded(Binary(kind)), dtypes=(dt,), spec=_S_CMP, tier="quick")
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
    from tilefoundry.conformance.catalog_tile_mma import spec_tile_mma
    from tilefoundry.conformance.catalog_tile_sort import spec_tile_sort

    spec_tile_sort(acc)
    spec_tile_mma(acc)


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


# =============================================================================================
# per-op special-value cases
# =============================================================================================
_SPECIAL_SPEC = ("ARCHITECTURE.md, Numeric contracts (special values: NaN class, ±0 "
                 "significance, subnormals preserved, overflow, ties) applied to {op}.")


def _sp(dt: DType) -> np.ndarray:
    """The special set of a float dtype; every pattern for the 8-bit formats."""
    return all_patterns(dt) if FORMATS[dt].bits == 8 else special_values(dt)


def _special_unary_op(op, dt: DType, values: Callable[[DType], np.ndarray] | None = None
                      ) -> Callable[[], Built]:
    def build() -> Built:
        a = (values or _sp)(dt)
        x = _var("x", a.shape, dt)
        return _module([x], _call(op, x)), ENTRY, [a]

    return build


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
    return _reduce_build(kind, dt, lambda: _rows(dt, _REDUCE_ROWS))


def _special_structural(name: str, dt: DType) -> Callable[[], Built]:
    """A special-valued tensor through a structural op (every bit must survive)."""

    def build() -> Built:
        r = _rng(f"special/tensor/{name}/{dt}")
        sv = _sp(dt)
        if name == "reshape":
            a = _fill(sv, (2, 3, 4), r)
            x = _var("x", a.shape, dt)
            return _module([x], _call(Reshape((4, 6)), x)), ENTRY, [a]
        if name == "transpose":
            a = _fill(sv, (2, 3, 4), r)
            x = _var("x", a.shape, dt)
            return _module([x], _call(Transpose((2, 0, 1)), x)), ENTRY, [a]
        if name == "slice":
            a = _fill(sv, (6, 8), r)
            x = _var("x", a.shape, dt)
            return (_module([x], _call(Slice((1, -7), (6, 8), (2, 3)), x)), ENTRY, [a])
        if name == "concat":
            xs = [_fill(sv, (2, k), r) for k in (1, 3, 2)]
            vs = [_var(f"x{j}", x.shape, dt) for j, x in enumerate(xs)]
            return _module(vs, _call(Concat(axis=1), *vs)), ENTRY, xs
        if name == "stack":
            xs = [_fill(sv, (2, 3), r) for _ in range(3)]
            vs = [_var(f"x{j}", x.shape, dt) for j, x in enumerate(xs)]
            return _module(vs, _call(Stack(axis=1), *vs)), ENTRY, xs
        if name == "gather":
            a = _fill(sv, (5, 4), r)
            idx = np.asarray([[4, 0, 1], [2, 2, 3]], np.int64)
            x, i = _var("x", a.shape, dt), _var("i", idx.shape, I64)
            return _module([x, i], _call(Gather(axis=0), x, i)), ENTRY, [a, idx]
        if name == "insert_slice":
            d = _fill(sv, (4, 5), r)
            u = _fill(sv, (2, 3), r)
            dv, uv = _var("dst", d.shape, dt), _var("update", u.shape, dt)
            o0, o1 = _var("o0", (), I32), _var("o1", (), I32)
            return (_module([dv, uv, o0, o1], _call(InsertSlice(), dv, uv, o0, o1)), ENTRY,
                    [d, u, _scalar(1), _scalar(2)])
        if name == "cache_update":
            c = _fill(sv, (1, 6, 2, 4), r)
            n = _fill(sv, (1, 3, 2, 4), r)
            cv, nv = _var("cache", c.shape, dt), _var("new", n.shape, dt)
            pv, svar = _var("cur_pos", (), I32), _var("s", (), I32)
            return (_module([cv, pv, svar, nv], _call(CacheUpdate(), cv, pv, svar, nv)), ENTRY,
                    [c, _scalar(2), _scalar(3), n])
        if name == "zeros":
            a = _fill(sv, (2, 3), r)
            x = _var("x", a.shape, dt)
            z = _call(Zeros((2, 3), dt))
            return _module([x], Tuple((z, _call(Concat(axis=0), x, z)))), ENTRY, [a]
        if name == "shape_of":
            a = _fill(sv, (2, 3, 1), r)
            x = _var("x", a.shape, dt)
            return _module([x], _call(ShapeOf(), x)), ENTRY, [a]
        if name == "rank":
            a = _fill(sv, (2, 3, 1), r)
            x = _var("x", a.shape, dt)
            return _module([x], _call(Rank(), x)), ENTRY, [a]
        if name == "shape_extract":
            a = _fill(sv, (2, 3, 5), r)
            x = _var("x", a.shape, dt)
            s = _call(ShapeOf(), x)
            return (_module([x], Tuple((_call(ShapeExtract(-1), s), _call(ShapeExtract(1), s)))),
                    ENTRY, [a])
        if name == "shape_compose":
            a = _fill(sv, (2, 3, 5), r)
            x = _var("x", a.shape, dt)
            s = _call(ShapeOf(), x)
            body = _call(ShapeCompose(), _call(ShapeExtract(2), s), _call(ShapeExtract(0), s))
            return _module([x], body), ENTRY, [a]
        if name == "topk":
            a = _rows(dt, [r_ for r_ in _REDUCE_ROWS if "nan" not in r_])
            x = _var("x", a.shape, dt)
            hi, lo = _call(TopK(2, axis=1), x), _call(TopK(3, axis=1, largest=False), x)
            outs = (TupleGetItem(hi, 0), TupleGetItem(hi, 1), TupleGetItem(lo, 0),
                    TupleGetItem(lo, 1))
            return _module([x], Tuple(outs)), ENTRY, [a]
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
        r = _rng(f"special/nn/{name}/{dt}")
        if name == "softmax":
            a = _rows(dt, _SOFTMAX_ROWS)
            x = _var("x", a.shape, dt)
            return _module([x], _call(SoftMax(axis=-1), x)), ENTRY, [a]
        if name == "layer_norm":
            a = _rows(dt, _NORM_ROWS)
            w = _vals([1.0, 2.0, 0.5, 1.0], dt)
            b = _vals([0.0, 0.0, 0.0, 0.0], dt)
            x, wv, bv = _var("x", a.shape, dt), _var("w", (4,), dt), _var("b", (4,), dt)
            return _module([x, wv, bv], _call(LayerNorm(), x, wv, bv)), ENTRY, [a, w, b]
        if name == "rms_norm":
            a = _rows(dt, _NORM_ROWS)
            w = _vals([1.0, -1.0, 0.5, 2.0], dt)
            x, wv = _var("x", a.shape, dt), _var("w", (4,), dt)
            return _module([x, wv], _call(RMSNorm(), x, wv)), ENTRY, [a, w]
        if name == "matmul":
            a = _rows(dt, [["1", "2", "3"], ["inf", "0", "1"], ["-0", "-0", "-0"],
                           ["max", "max", "1"], ["nan", "1", "1"], ["minsub", "0.5", "-1"]])
            b = _rows(dt, [["1", "-1"], ["2", "0"], ["0.5", "-0"]])
            av, bv = _var("a", a.shape, dt), _var("b", b.shape, dt)
            return _module([av, bv], _call(MatMul(), av, bv)), ENTRY, [a, b]
        if name == "matmul_tiles":
            # past one 128 x 128 x 32 tile in M, N and K (ragged at every edge), reassociation
            # admitted: the shape compiled backends map onto tensor cores (D263, D280); an inf,
            # a NaN, a -0 row and products near the dtype's max among random values
            a = _random_float(r, (130, 72), dt)
            b = _random_float(r, (72, 136), dt)
            named = _named(dt)
            a[3, 5], b[7, 2], a[10, 71] = named["inf"], named["-inf"], named["nan"]
            a[20, :] = named["-0"]
            a[40, :4], b[:4, 40] = named["max"], named["2"]
            av, bv = _var("a", a.shape, dt), _var("b", b.shape, dt)
            return _module([av, bv], _call(MatMul(allow_reassociation=True), av, bv)), ENTRY, \
                [a, b]
        if name == "conv2d":
            x = _random_float(r, (1, 2, 4, 4), dt)
            named = _named(dt)
            x[0, 0, 0, 0] = named["inf"]
            x[0, 1, 3, 3] = named["nan"]
            x[0, 0, 2, 1] = named["-0"]
            x[0, 1, 1, 2] = named["max"]
            w = _random_float(r, (3, 2, 2, 2), dt)
            b = _vals([0.0, -0.0, 1.5], dt)
            xv, wv, bv = _var("x", x.shape, dt), _var("w", w.shape, dt), _var("b", (3,), dt)
            op = Conv2D(stride=(1, 1), padding=(1, 1))
            return _module([xv, wv, bv], _call(op, xv, wv, bv)), ENTRY, [x, w, b]
        if name == "conv2d_padded_nonfinite_weight":
            # batch and channels > 1: every output reads the NaN / inf taps, some of them only
            # through zero padding (0 * NaN and 0 * inf are NaN)
            x = _random_float(r, (2, 2, 3, 3), dt, 0.5, 2.0)
            w = _random_float(r, (2, 2, 3, 3), dt, 0.5, 2.0)
            named = _named(dt)
            w[0, 0, 0, 0] = named["nan"]
            w[1, 1, 2, 2] = named["inf"]
            b = _vals([0.0, 0.0], dt)
            xv, wv, bv = _var("x", x.shape, dt), _var("w", w.shape, dt), _var("b", (2,), dt)
            op = Conv2D(stride=(1, 1), padding=(1, 1))
            return _module([xv, wv, bv], _call(op, xv, wv, bv)), ENTRY, [x, w, b]
        if name == "rope":
            s, d, p = 4, 4, 5
            q = _fill(_sp(dt), (1, s, d), r)
            k = _fill(_sp(dt), (1, s, d), r)
            ang = np.outer(np.arange(p), [1.0, 0.01])
            ang = np.concatenate([ang, ang], axis=-1)
            cos, sin = _vals(np.cos(ang), dt), _vals(np.sin(ang), dt)
            pos = np.asarray([0, 4, 1, 0], np.int64)
            qv, kv = _var("q", q.shape, dt), _var("k", k.shape, dt)
            cv, sv = _var("cos", cos.shape, dt), _var("sin", sin.shape, dt)
            pv = _var("pos", pos.shape, I64)
            return (_module([qv, kv, cv, sv, pv], _call(RoPE(), qv, kv, cv, sv, pv)), ENTRY,
                    [q, k, cos, sin, pos])
        raise AssertionError(name)

    return build


_NN_ELEMENTWISE = {"relu": ReLU(), "sigmoid": Sigmoid(), "tanh": Tanh(), "silu": Silu(),
                   "gelu-tanh": Gelu("tanh"), "gelu-none": Gelu("none")}
_NN_OTHER = {"softmax": "SoftMax", "layer_norm": "LayerNorm", "rms_norm": "RMSNorm",
             "matmul": "MatMul", "conv2d": "Conv2D", "rope": "RoPE",
             "conv2d_padded_nonfinite_weight": "Conv2D"}
_S_CONV_PAD = ("docs/decisions.md D98: Conv2D reduces over (c_in, kh, kw) \"padding as +0 inputs "
               "that take part (0·inf = NaN)\" — zero padding extends the input with +0.")
_ARITH = (BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL, BinaryKind.DIV, BinaryKind.MIN,
          BinaryKind.MAX)
_CMP = (BinaryKind.EQ, BinaryKind.NE, BinaryKind.LT, BinaryKind.LE, BinaryKind.GT, BinaryKind.GE)


def _special_cases(acc: _Acc) -> None:
    add = acc.add
    for kind in _ARITH + _CMP:
        op = Binary(kind)
        for dt in FLOAT5:
            add(f"special/binary/{kind.value}/{dt}", "math",
                _binary_build(kind, dt, lambda d=dt: _pairs(special_values(d))),
                ops=_kinded(op), dtypes=(dt,), spec=_SPECIAL_SPEC.format(op=f"Binary({kind.value})"),
                tier="quick")
        for dt in INT4:
            if kind is BinaryKind.DIV:
                continue
            add(f"special/binary/{kind.value}/{dt}", "math",
                _binary_build(kind, dt, lambda d=dt: _pairs(int_special_values(d))),
                ops=_kinded(op), dtypes=(dt,), spec=_S_WRAP, tier="quick")
    for kind in (BinaryKind.AND, BinaryKind.OR, BinaryKind.XOR):
        add(f"special/binary/{kind.value}/bool", "math",
            _binary_build(kind, BOOL, lambda: _pairs(np.array([False, True]))),
            ops=_kinded(Binary(kind)), dtypes=(BOOL,), spec="HIR Binary: boolean kinds",
            tier="quick")
    for kind in _FLOAT_UNARY:
        for dt in FLOAT5:
            add(f"special/unary/{kind.value}/{dt}", "math", _special_unary_op(Unary(kind), dt),
                ops=_kinded(Unary(kind)), dtypes=(dt,),
                spec=_SPECIAL_SPEC.format(op=f"Unary({kind.value})"), tier="quick")
    add("special/unary/logical_not/bool", "math",
        _unary_build(UnaryKind.LOGICAL_NOT, BOOL, lambda: np.array([False, True])),
        ops=_kinded(Unary(UnaryKind.LOGICAL_NOT)), dtypes=(BOOL,), tier="quick")
    for kind in (UnaryKind.NEG, UnaryKind.ABS, UnaryKind.CEIL, UnaryKind.ROUND, UnaryKind.RELU,
                 UnaryKind.SQUARE):
        for dt in INT4:
            add(f"special/unary/{kind.value}/{dt}", "math",
                _unary_build(kind, dt, lambda d=dt: int_special_values(d)),
                ops=_kinded(Unary(kind)), dtypes=(dt,), spec=_S_WRAP, tier="quick")
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
    for name, op in _NN_ELEMENTWISE.items():
        for dt in FLOAT5:
            add(f"special/nn/{name}/{dt}", "nn", _special_unary_op(op, dt),
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


# =============================================================================================
# sharded programs
# =============================================================================================
def _sharded_cases(acc: _Acc) -> None:
    add = acc.add

    def split_k(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = _mesh((2,))
            r = _rng(f"sharded/matmul/split-k/{dt}")
            a = r.integers(-50, 50, (3, 4)).astype(FORMATS[dt].storage)
            b = r.integers(-50, 50, (4, 2)).astype(FORMATS[dt].storage)
            av = _var("a", (3, 4), dt, _sl(mesh, (Split(1),), (3, 4)))
            bv = _var("b", (4, 2), dt, _sl(mesh, (Split(0),), (4, 2)))
            mm = _call(MatMul(), av, bv)
            out = _call(Reshard(layout=_sl(mesh, (Broadcast(),), (3, 2))), mm)
            return _module([av, bv], out, topo), ENTRY, [a, b]

        return build

    for dt in (I32, I64):
        add(f"sharded/matmul/split-k-partial-sum/{dt}", "sharding", split_k(dt),
            ops=("MatMul", "Reshard"), dtypes=(dt,), spec=_S_PARTIAL, tier="quick")

    def split_add(dt: DType, ext: tuple[int, ...]) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = _mesh(ext)
            r = _rng(f"sharded/elementwise/{dt}/{ext}")
            shape = (4, 6)
            attrs = (Split(0),) if len(ext) == 1 else (Split(0), Split(1))
            lay = _sl(mesh, attrs, shape)
            a = _fill(special_values(dt), shape, r)
            b = _fill(special_values(dt), shape, r)
            x, y = _var("x", shape, dt, lay), _var("y", shape, dt, lay)
            s = _call(Binary(BinaryKind.ADD), _call(Unary(UnaryKind.NEG), x), y)
            out = _call(Reshard(layout=_sl(mesh, (Broadcast(),) * len(ext), shape)), s)
            return _module([x, y], out, topo), ENTRY, [a, b]

        return build

    for dt in (F32, BF16, F16):
        add(f"sharded/elementwise/split-neg-add-allgather/{dt}", "sharding",
            split_add(dt, (2,)), ops=("Binary", "Binary.add", "Unary", "Unary.neg", "Reshard"),
            dtypes=(dt,), spec=_S_PARTIAL, tier="quick")
        add(f"sharded/elementwise/mesh2d-split-split/{dt}", "sharding", split_add(dt, (2, 3)),
            ops=("Binary", "Binary.add", "Unary", "Unary.neg", "Reshard"), dtypes=(dt,),
            spec=_S_PARTIAL, tier="quick")

    def reduce_split(dt: DType, kind: ReduceKind) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = _mesh((2,))
            a = _rows(dt, _REDUCE_ROWS)  # (16, 4): rows split over the mesh
            x = _var("x", a.shape, dt, _sl(mesh, (Split(1),), a.shape))
            red = _call(Reduce((1,), keepdim=True, kind=kind, policy="fold_left"), x)
            return _module([x], red, topo), ENTRY, [a]

        return build

    for dt in (F32, BF16):
        for kind in (ReduceKind.MAX, ReduceKind.SUM):
            add(f"sharded/reduce/split-axis-{kind.value}/{dt}", "sharding",
                reduce_split(dt, kind), ops=("Reduce", f"Reduce.{kind.value}"), dtypes=(dt,),
                spec="HIR Reduce: \"For ShardLayout input, every split layout position that "
                     "belongs to a reduced tensor axis collapses to broadcast\"", tier="quick")

    def resplit(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = _mesh((2,))
            a = _fill(special_values(dt), (4, 6), _rng(f"sharded/reshard/{dt}"))
            x = _var("x", (4, 6), dt, _sl(mesh, (Split(0),), (4, 6)))
            out = _call(Reshard(layout=_sl(mesh, (Split(1),), (4, 6))), x)
            return _module([x], out, topo), ENTRY, [a]

        return build

    for dt in (F32, BF16, E4M3):
        add(f"sharded/reshard/split0-to-split1/{dt}", "sharding", resplit(dt),
            ops=("Reshard",), dtypes=(dt,), spec="HIR Reshard: \"The single op covers "
            "zero-copy view, cross-storage copy, cross-CTA redistribute, and mixed cases\"",
            tier="quick")

    def local_rank(dt: DType) -> Callable[[], Built]:
        def build() -> Built:
            mesh, topo = _mesh((2,))
            a = _fill(special_values(dt), (4, 2), _rng(f"sharded/local/{dt}"))
            x = _var("x", (4, 2), dt, _sl(mesh, (Split(0),), (4, 2)))
            loc = _call(Local(), x)
            return (_module([x], Tuple((_call(ShapeOf(), loc), _call(Rank(), loc))), topo),
                    ENTRY, [a])

        return build

    for dt in (F32, BF16, F16):
        add(f"special/sharding/local/{dt}", "sharding", local_rank(dt),
            ops=("Local", "ShapeOf", "Rank"), dtypes=(dt,), spec=_S_LOCAL, tier="quick")
        add(f"special/sharding/reshard/{dt}", "sharding", split_add(dt, (2,)),
            ops=("Reshard", "Binary", "Binary.add", "Unary", "Unary.neg"), dtypes=(dt,),
            spec=_SPECIAL_SPEC.format(op="Reshard"), tier="quick")
        add(f"sharded/gather/split-axis-partial-sum/{dt}", "sharding", _gather_split(dt),
            ops=("Gather", "Reshard"), dtypes=(dt, I64), spec=_S_GATHER_SPLIT, tier="quick")

    def partial_pieces(dt: DType, red: str) -> Callable[[], Built]:
        """Partial(max / min) whose devices hold *different* pieces (``Sharded.from_devices``;
        ``shard`` puts the same value on every device, which a NaN-dropping or
        signed-zero-blind completion passes): a NaN on one device but not the first, on the
        first only, on all; -0 / +0 split across devices both ways; ±inf; plain numbers."""
        def build() -> Built:
            from tilefoundry.semantics.evaluator.mesh import Sharded

            mesh, topo = _mesh((4,))
            nan, inf = np.nan, np.inf
            cols = [[1.0, 1.0, nan, 1.0], [-0.0, 0.0, 0.0, 0.0], [0.0, -0.0, -0.0, -0.0],
                    [nan, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0], [-inf, inf, 0.0, -1.0],
                    [nan, nan, nan, nan], [2.5, 2.5, 2.5, 2.5]]
            pieces = _vals(np.array(cols, np.float64).T, dt)  # (device, column)
            lay = _sl(mesh, (Partial(red),), (8,))
            x = _var("x", (8,), dt, lay)
            out = _call(Reshard(layout=_sl(mesh, (Broadcast(),), (8,))), x)
            return _module([x], out, topo), ENTRY, [Sharded.from_devices(lay, pieces)]

        return build

    for dt in (F32, BF16, F16):
        for red in ("max", "min"):
            add(f"sharded/partial-pieces/{red}-nan-signed-zero/{dt}", "sharding",
                partial_pieces(dt, red), ops=("Reshard",), dtypes=(dt,),
                spec=_S_PARTIAL + " Tile numerics: \"Exceptional values: overflow, NaNs, "
                "signed zero, ties and argmax ordering are part of the operation contract\"",
                tier="full")


#: the sharded loops' bodies (``sharded_loop``), each needing collectives every iteration
SHARDED_LOOP_KINDS = ("partial-sum", "split-to-broadcast", "all-to-all")


def sharded_loop(kind: str, ext: tuple[int, ...], trips: int, dt: DType) -> Callable[[], Built]:
    """A ``grid_region`` over sharded values whose body needs collectives (the per-device
    lowering's host loop, docs/decisions.md D259), on the mesh ``ext`` (1-D, or 2x2: the
    second mesh axis Broadcast, or Split where it can be), ``trips`` iterations:

    * ``partial-sum``: ``acc += Reshard(MatMul(a * i, b), Broadcast)`` and
      ``racc += Reduce_sum(a * i, K)`` (two carried values) with K split (``a`` Split(1), ``b``
      Split(0)): a Partial(sum) completion (all_reduce), a reduction over a split axis
      (all_gather) and the induction variable read through the split layout (align), every
      iteration;
    * ``split-to-broadcast``: ``c = Reshard(Gather(Reshard(c, Broadcast), rot) + i, Split)``:
      the whole vector gathered (all_gather), rotated by one, sliced back, every iteration;
    * ``all-to-all``: ``c = Reshard(Reshard(c, Split(1)) + y, Split(0))``: Split(0) ->
      Split(1) and back on one mesh axis (two all_to_all), ``y`` read in the Split(1) layout.

    Inputs are small integers (exact in every dtype used)."""
    def build() -> Built:
        mesh, topo = _mesh(ext)
        two = len(ext) == 2
        r = _rng(f"sharded/loop/{kind}/{ext}/{trips}/{dt}")
        st = FORMATS[dt].storage
        bc = (Broadcast(),) * len(ext)
        i = _var("i", (), I32)
        c = Var("c", None)

        def lay(shape: tuple, *attrs) -> ShardLayout:
            return _sl(mesh, attrs + ((Broadcast(),) if two and len(attrs) == 1 else ()),
                       shape)

        def ints(shape: tuple, lo: int = -4, hi: int = 5) -> np.ndarray:
            return np.ascontiguousarray(r.integers(lo, hi, shape).astype(st))

        iv = _call(Cast(dt), i)
        if kind == "partial-sum":
            av = _var("a", (4, 8), dt, lay((4, 8), Split(1)))
            bv = _var("b", (8, 4), dt, lay((8, 4), Split(0)))
            acc = _var("acc", (4, 4), dt, _sl(mesh, bc, (4, 4)))
            racc = _var("racc", (4, 1), dt, _sl(mesh, bc, (4, 1)))
            d = Var("d", None)
            ai = _call(Binary(BinaryKind.MUL), av, iv)
            mm = _call(Reshard(layout=_sl(mesh, bc, (4, 4))), _call(MatMul(), ai, bv))
            rs = _call(Reduce((1,), keepdim=True, kind=ReduceKind.SUM, policy="fold_left"), ai)
            s1 = _call(Binary(BinaryKind.ADD), c, mm)
            s2 = _call(Binary(BinaryKind.ADD), d, rs)
            loop = GridRegionExpr(i, (c, d), (acc, racc), Tuple((s1, s2)), (s1, s2), trips)
            out = Tuple((_call(Reshard(layout=_sl(mesh, bc, (4, 4))), TupleGetItem(loop, 0)),
                         _call(Reshard(layout=_sl(mesh, bc, (4, 1))), TupleGetItem(loop, 1))))
            return (_module([av, bv, acc, racc], out, topo), ENTRY,
                    [ints((4, 8)), ints((8, 4)), ints((4, 4)), ints((4, 1))])
        if kind == "split-to-broadcast":
            shape = (8, 4)
            ls = _sl(mesh, (Split(0), Split(1)) if two else (Split(0),), shape)
            x = _var("x", shape, dt, ls)
            rot = _var("rot", (8,), I64)
            g = _call(Gather(axis=0), _call(Reshard(layout=_sl(mesh, bc, shape)), c), rot)
            step = _call(Reshard(layout=ls), _call(Binary(BinaryKind.ADD), g, iv))
            loop = GridRegionExpr(i, (c,), (x,), step, (step,), trips)
            out = _call(Reshard(layout=_sl(mesh, bc, shape)), loop)
            return (_module([x, rot], out, topo), ENTRY,
                    [ints(shape), np.roll(np.arange(8, dtype=np.int64), -1)])
        assert kind == "all-to-all", kind
        shape = (8, 8)
        l0, l1 = lay(shape, Split(0)), lay(shape, Split(1))
        x, y = _var("x", shape, dt, l0), _var("y", shape, dt, l1)
        t = _call(Binary(BinaryKind.ADD), _call(Reshard(layout=l1), c), y)
        step = _call(Reshard(layout=l0), t)
        loop = GridRegionExpr(i, (c,), (x,), step, (step,), trips)
        out = _call(Reshard(layout=_sl(mesh, bc, shape)), loop)
        return _module([x, y], out, topo), ENTRY, [ints(shape), ints(shape)]

    return build


def _sharded_loop_cases(acc: _Acc) -> None:
    """``sharded/loop/...``: loops whose body needs collectives (full tier)."""
    ops = {"partial-sum": ("MatMul", "Reduce", "Reduce.sum", "Binary", "Binary.add",
                           "Binary.mul", "Cast", "Reshard"),
           "split-to-broadcast": ("Gather", "Binary", "Binary.add", "Cast", "Reshard"),
           "all-to-all": ("Binary", "Binary.add", "Reshard")}
    for kind in SHARDED_LOOP_KINDS:
        for ext in ((2,), (4,), (2, 2)):
            for trips in (3, 0):
                for dt in (F32, I32):
                    mesh = "x".join(str(e) for e in ext)
                    acc.add(f"sharded/loop/{kind}/mesh{mesh}/trips{trips}/{dt}", "sharding",
                            sharded_loop(kind, ext, trips, dt), ops=ops[kind],
                            dtypes={"split-to-broadcast": (dt, I32, I64),
                                    "all-to-all": (dt,)}.get(kind, (dt, I32)),
                            spec=_S_GRID + "; " + _S_PARTIAL, tier="full")


def _gather_split(dt: DType) -> Callable[[], Built]:
    def build() -> Built:
        mesh, topo = _mesh((2, 2))
        r = _rng(f"sharded/gather/{dt}")
        a = _fill(special_values(dt), (8, 3), r)
        x = _var("x", (8, 3), dt, _sl(mesh, (Split(0), Broadcast()), (8, 3)))
        idx = np.asarray([[7, 0], [3, 4], [1, 1]], np.int64)
        i = _var("i", idx.shape, I64)
        g = _call(Gather(axis=0), x, i)
        out = _call(Reshard(layout=_sl(mesh, (Broadcast(), Broadcast()), (3, 2, 3))), g)
        return _module([x, i], out, topo), ENTRY, [a, idx]

    return build


# =============================================================================================
# generated programs
# =============================================================================================
def _program_generator() -> Callable[..., Built] | None:
    """The hook to the program generator (``tilefoundry.oracle.programs.generate_program``):
    ``gen(seed, sharded=...)`` returns ``(module, entry, inputs)`` with every input a global
    numpy array (a generated ``Sharded`` input is gathered with ``mesh.unshard``; the generator
    keeps sharded values integral, so the logical value is exact). ``None`` when the generator is
    not importable — the catalog then simply has no ``program/`` cases."""
    try:
        from tilefoundry.oracle.programs import generate_program
    except Exception:  # the generator is optional for the catalog
        return None

    def gen(seed: int, sharded: bool = False) -> Built:
        from tilefoundry.semantics.evaluator.mesh import Sharded, unshard

        kw: dict = {}
        if sharded:
            # Local's device-varying result cannot be an output the oracle compares; Local is
            # covered by the spec / sharded cases
            kw["ops"] = tuple(op for op in ALL_OPS if op is not Local)
        p = generate_program(seed, sharded=sharded, **kw)
        ins = [np.ascontiguousarray(unshard(x)) if isinstance(x, Sharded) else x
               for x in p.inputs]
        return p.module, p.entry, ins

    return gen


def _program_cases(acc: _Acc, seed: int) -> None:
    gen = _program_generator()
    if gen is None:
        return
    for sharded in (False, True):
        n_full = GENERATED_PER_TIER["full"] // (4 if sharded else 1)
        n_quick = GENERATED_PER_TIER["quick"] // (4 if sharded else 1)
        for i in range(n_full):
            sub = seed * 1_000_003 + i  # one deterministic generator seed per program

            def build(s=sub, sh=sharded) -> Built:
                return gen(s, sharded=sh)

            cid = f"program/seed{seed}/sharded/{i}" if sharded else f"program/seed{seed}/{i}"
            acc.add(cid, "sharding" if sharded else "program", build,
                    spec=f"Generated program (tilefoundry.oracle.programs.generate_program"
                         f"({sub}{', sharded=True' if sharded else ''}))",
                    tier="quick" if i < n_quick else "full")


# =============================================================================================
# expected-error cases: the run-time checks of the spec
# =============================================================================================
_S_RTC_GATHER = ("HIR Gather: \"Element rule: out[c.., i.., t..] = x[c.., index[b.., i..], "
                 "t..]\" — an index outside [0, x.shape[axis]) names no element of x (negative "
                 "indices do not wrap); the indices are run-time values, so the check is made "
                 "at eval / run time.")
_S_RTC_ROPE = ("HIR RoPE: \"Rotate query and key tensors using position-indexed cos/sin "
               "caches.\" — a pos_ids entry outside [0, P) indexes no cache row.")
_S_RTC_CACHE = ("HIR CacheUpdate: \"cur_pos >= 0, 1 <= s <= new.len, and cur_pos + s <= "
                "cache.len MUST be checked at eval/runtime, not typeinfer, because their "
                "operands are runtime values.\"")
_S_RTC_INSERT = ("HIR InsertSlice: \"A literal (compile-time) offset that places a negative or "
                 "out-of-bounds window on an axis fails typeinfer, naming the axis; a runtime "
                 "offset is checked at eval/runtime.\"")
_S_RTC_DISPATCH = ("HIR Function, Dispatch resolution: \"A shape outside the envelope matches "
                   "no variant and is an error; there is no base body to fall back to (the "
                   "prototype body is None).\"")


def _run_time_check_cases(acc: _Acc) -> None:
    """Inputs that fail each run-time check of the spec, every case tiny and in the quick tier
    (``Case.expect_error`` names the check; the runner verifies the reference raises it)."""
    add = acc.add

    def gather(idx: list, batched: bool = False) -> Callable[[], Built]:
        def build() -> Built:
            a = np.arange(10, dtype=np.float32).reshape(2, 5)
            i = np.asarray(idx, np.int64 if batched else np.int32)
            x, iv = _var("x", a.shape, F32), _var("i", i.shape, I64 if batched else I32)
            op = Gather(axis=1, batch_dims=1) if batched else Gather(axis=1)
            return _module([x, iv], _call(op, x, iv)), ENTRY, [a, i]

        return build

    for w, idx, batched in (("index-negative", [[0, -1, 2]], False),
                            ("index-at-extent", [[4, 5, 0]], False),
                            ("index-far-beyond-extent", [[1 << 30]], False),
                            ("batched-index-at-extent", [[4, 0], [5, 1]], True)):
        add(f"spec/run-time-check/index_range/gather-{w}/f32", "run-time-check",
            gather(idx, batched), ops=("Gather",), dtypes=(F32, I64 if batched else I32),
            spec=_S_RTC_GATHER, tier="quick", expect_error="index_range")

    def gather_split() -> Built:
        mesh, topo = _mesh((2,))
        a = np.arange(12, dtype=np.float32).reshape(4, 3)
        x = _var("x", (4, 3), F32, _sl(mesh, (Split(0),), (4, 3)))
        idx = np.asarray([3, 4], np.int64)
        i = _var("i", idx.shape, I64)
        g = _call(Gather(axis=0), x, i)
        out = _call(Reshard(layout=_sl(mesh, (Broadcast(),), (2, 3))), g)
        return _module([x, i], out, topo), ENTRY, [a, idx]

    add("sharded/run-time-check/index_range/gather-split-axis-index-at-extent/f32",
        "run-time-check", gather_split, ops=("Gather", "Reshard"), dtypes=(F32, I64),
        spec=_S_RTC_GATHER, tier="quick", expect_error="index_range")

    def rope(pos: list) -> Callable[[], Built]:
        def build() -> Built:
            s, d, p = 3, 4, 5
            q = np.linspace(-1, 1, 2 * s * d, dtype=np.float32).reshape(2, s, d)
            k = q[::-1].copy()
            ang = np.outer(np.arange(p), [1.0, 0.01])
            ang = np.concatenate([ang, ang], axis=-1)
            cos, sin = _vals(np.cos(ang), F32), _vals(np.sin(ang), F32)
            pos_a = np.asarray(pos, np.int64)
            qv, kv = _var("q", q.shape, F32), _var("k", k.shape, F32)
            cv, sv = _var("cos", cos.shape, F32), _var("sin", sin.shape, F32)
            pv = _var("pos", pos_a.shape, I64)
            body = _call(RoPE(), qv, kv, cv, sv, pv)
            return _module([qv, kv, cv, sv, pv], body), ENTRY, [q, k, cos, sin, pos_a]

        return build

    for w, pos in (("position-negative", [0, -1, 2]), ("position-at-cache-len", [4, 5, 0])):
        add(f"spec/run-time-check/index_range/rope-{w}/f32", "run-time-check", rope(pos),
            ops=("RoPE",), dtypes=(F32, I64), spec=_S_RTC_ROPE, tier="quick",
            expect_error="index_range")

    def cache_update(cur: int, s: int) -> Callable[[], Built]:
        def build() -> Built:
            c = np.zeros((1, 4, 1, 2), np.float32)
            n = np.arange(1, 7, dtype=np.float32).reshape(1, 3, 1, 2)
            cv, nv = _var("cache", c.shape, F32), _var("new", n.shape, F32)
            pv, sv = _var("cur_pos", (), I32), _var("s", (), I32)
            body = _call(CacheUpdate(), cv, pv, sv, nv)
            return _module([cv, pv, sv, nv], body), ENTRY, [c, _scalar(cur), _scalar(s), n]

        return build

    # cache.len = 4, new.len = 3
    for w, cur, s in (("cur-pos-negative", -1, 2), ("s-zero", 0, 0), ("s-negative", 0, -1),
                      ("s-exceeds-new-len", 0, 4), ("window-past-cache-end", 2, 3)):
        add(f"spec/run-time-check/cache_bounds/{w}/f32", "run-time-check", cache_update(cur, s),
            ops=("CacheUpdate",), dtypes=(F32, I32), spec=_S_RTC_CACHE, tier="quick",
            expect_error="cache_bounds")

    def insert(o0: int, o1: int) -> Callable[[], Built]:
        def build() -> Built:
            d = np.zeros((3, 4), np.float32)
            u = np.ones((2, 2), np.float32)
            dv, uv = _var("dst", d.shape, F32), _var("update", u.shape, F32)
            v0, v1 = _var("o0", (), I32), _var("o1", (), I32)
            return (_module([dv, uv, v0, v1], _call(InsertSlice(), dv, uv, v0, v1)), ENTRY,
                    [d, u, _scalar(o0), _scalar(o1)])

        return build

    # dst (3, 4), update (2, 2): valid offsets are [0, 1] on axis 0 and [0, 2] on axis 1
    for w, o0, o1 in (("offset-negative", 0, -1), ("window-past-end", 2, 0),
                      ("window-past-end-last-axis", 1, 3)):
        add(f"spec/run-time-check/slice_window/{w}/f32", "run-time-check", insert(o0, o1),
            ops=("InsertSlice",), dtypes=(F32, I32), spec=_S_RTC_INSERT, tier="quick",
            expect_error="slice_window")

    def prototype(name: str, m: DimVar) -> Function:
        proto = Function(name, (_var("x", (m,), F32),), None, _t((m,), F32))
        for lo, hi, kind, label in ((2, 5, BinaryKind.ADD, "small"),
                                    (5, 9, BinaryKind.MUL, "large")):
            xv = _var("x", (m,), F32)
            proto.add_variant(Function(name, (xv,), _call(Binary(kind), xv, xv), _t((m,), F32),
                                       (DimVarRangePat("M", lo, hi),), label=label))
        return proto

    def dispatch_entry(n: int) -> Callable[[], Built]:
        def build() -> Built:  # the entry is the dispatch prototype itself
            entry = prototype(ENTRY, DimVar("M", 2, 9))
            return Module((entry,)), ENTRY, [np.arange(n, dtype=np.float32)]

        return build

    def dispatch_call(n: int) -> Callable[[], Built]:
        def build() -> Built:  # the entry calls the prototype with an argument of its envelope
            m = DimVar("M", 2, 9)
            proto = prototype("g", m)
            y = _var("y", (m,), F32)
            body = _call(Unary(UnaryKind.NEG), Call(proto, (y,)))
            return _module([y], body, extra=(proto,)), ENTRY, [np.arange(n, dtype=np.float32)]

        return build

    # the envelope is M in [2, 9), partitioned [2, 5) and [5, 9)
    for w, make, n, ops in (
            ("entry-below-envelope", dispatch_entry, 1, ("Binary",)),
            ("entry-at-envelope-end", dispatch_entry, 9, ("Binary",)),
            ("call-at-envelope-end", dispatch_call, 9, ("Binary", "Unary", "Unary.neg"))):
        add(f"spec/run-time-check/dispatch_envelope/{w}/f32", "run-time-check", make(n),
            ops=ops, dtypes=(F32,), spec=_S_RTC_DISPATCH, tier="quick",
            expect_error="dispatch_envelope")
