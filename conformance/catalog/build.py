"""The public case-building module every catalog family uses (split from
``conformance/catalog.py``, D383; names made public, D444).

Types, variables, calls and modules of the IR in a line each; the dtype groups; special and random
input values seeded from the case id (``case_rng``: a SHA-256 of the id); the mesh and shard-layout
helpers; ``Acc``, which collects the cases. ``ENTRY``, ``special_values`` and
``int_special_values`` are also re-exported by ``tilefoundry.conformance.catalog``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from tilefoundry.conformance.cases import Case
from tilefoundry.conformance.numerics_sweep import (
    all_patterns,
)
from tilefoundry.semantics.dtypes import FORMATS, DType, bits_dtype, cast, from_bits, to_bits
from tilefoundry.semantics.ir import (
    Call,
    Function,
    Module,
    Var,
)
from tilefoundry.semantics.ops import (
    Gelu,
    ReLU,
    Sigmoid,
    Silu,
    Tanh,
)
from tilefoundry.semantics.types import (
    Layout,
    Mesh,
    ShardLayout,
    TensorType,
    Topology,
    TopologyLevel,
)

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
def case_rng(case_id: str) -> np.random.Generator:
    """The case's own generator: seeded by the id, so inputs never depend on build order."""
    d = hashlib.sha256(case_id.encode()).digest()
    return np.random.default_rng(int.from_bytes(d[:8], "little"))


def tensor_type(shape: tuple, dt: DType, shard: ShardLayout | None = None) -> TensorType:
    return TensorType(tuple(shape), dt, shard) if shard is not None else \
        TensorType(tuple(shape), dt)


def make_var(name: str, shape: tuple, dt: DType, shard: ShardLayout | None = None) -> Var:
    return Var(name, tensor_type(shape, dt, shard))


def make_call(op, *args) -> Call:
    return Call(op, tuple(args))


def make_module(params: list[Var], body, topology: Topology | None = None,
            extra: tuple[Function, ...] = ()) -> Module:
    fn = Function(ENTRY, tuple(params), body, None)
    if topology is None:
        return Module((fn, *extra))
    return Module((fn, *extra), topology=topology)


def values_array(values, dt: DType) -> np.ndarray:
    """Python numbers as an array of ``dt`` (one rounding from f64 through the exact cast for
    floats: exact for every value used here)."""
    if dt.is_float:
        return np.ascontiguousarray(cast(np.asarray(values, np.float64).astype(np.float32), dt))
    return np.ascontiguousarray(np.asarray(values).astype(FORMATS[dt].storage))


def frac(v: Fraction) -> float:
    return float(v)


def named_values(dt: DType) -> dict[str, np.ndarray]:
    """Named special scalars of a float dtype (0-d arrays)."""
    info = FORMATS[dt]
    big = frac(info.max_finite)
    sub = frac(info.min_subnormal)
    table = {
        "nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"),
        "max": big, "-max": -big, "0": 0.0, "-0": -0.0, "minsub": sub, "-minsub": -sub,
        "minnorm": frac(info.min_normal), "1": 1.0, "-1": -1.0, "2": 2.0, "-2": -2.0,
        "3": 3.0, "-3": -3.0, "4": 4.0, "-4": -4.0, "0.5": 0.5, "-0.5": -0.5, "1.5": 1.5, "2.5": 2.5,
        "-2.5": -2.5, "10": 10.0, "-10": -10.0, "0.25": 0.25, "5": 5.0,
    }
    return {k: np.asarray(cast(np.asarray(v, np.float32), dt)) for k, v in table.items()}


def rows_array(dt: DType, rows: list[list[str]]) -> np.ndarray:
    named = named_values(dt)
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


def fill_shape(values: np.ndarray, shape: tuple, rng: np.random.Generator | None = None) -> np.ndarray:
    """``values`` cycled (optionally permuted by ``rng``) into ``shape``."""
    n = math.prod(shape)
    v = values if rng is None else values[rng.permutation(values.size)]
    reps = -(-n // max(1, v.size))
    return np.ascontiguousarray(np.tile(v, reps)[:n].reshape(shape))


def random_float(rng: np.random.Generator, shape: tuple, dt: DType, lo: float = -2.0,
                  hi: float = 2.0) -> np.ndarray:
    return np.ascontiguousarray(cast(rng.uniform(lo, hi, shape).astype(np.float32), dt))


def split_pairs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = x.size
    return (np.ascontiguousarray(np.repeat(x, n)), np.ascontiguousarray(np.tile(x, n)))


def scalar_array(v: int, dt: DType = I32) -> np.ndarray:
    return np.asarray(v, FORMATS[dt].storage)


def make_mesh(ext: tuple[int, ...]) -> tuple[Mesh, Topology]:
    mesh = Mesh("device", ("x", "y")[:len(ext)], ext)
    return mesh, Topology((TopologyLevel("device", math.prod(ext)),))


def shard_layout(mesh: Mesh, attrs: tuple, shape: tuple) -> ShardLayout:
    return ShardLayout(mesh, tuple(attrs), Layout(tuple(shape)))


# =============================================================================================
# the catalog
# =============================================================================================
class Acc:
    """Collects cases; ``add`` takes the builder and its metadata."""

    def __init__(self) -> None:
        self.cases: list[Case] = []

    def add(self, cid: str, family: str, build: Callable[[], Built], *, ops: tuple = (),
            dtypes: tuple = (), spec: str = "", tier: str = "full",
            expect_error: str | None = None) -> None:
        self.cases.append(Case(cid, family, build, tuple(ops), tuple(str(d) for d in dtypes),
                               spec, tier, expect_error))


def kinded(op) -> tuple[str, ...]:
    name = type(op).__name__
    kind = getattr(op, "kind", None)
    return (name, f"{name}.{kind.value}") if hasattr(kind, "value") else (name,)


def special_array(dt: DType) -> np.ndarray:
    """The special set of a float dtype; every pattern for the 8-bit formats."""
    return all_patterns(dt) if FORMATS[dt].bits == 8 else special_values(dt)


def special_unary_op(op, dt: DType, values: Callable[[DType], np.ndarray] | None = None
                      ) -> Callable[[], Built]:
    def build() -> Built:
        a = (values or special_array)(dt)
        x = make_var("x", a.shape, dt)
        return make_module([x], make_call(op, x)), ENTRY, [a]

    return build


NN_ELEMENTWISE = {"relu": ReLU(), "sigmoid": Sigmoid(), "tanh": Tanh(), "silu": Silu(),
                   "gelu-tanh": Gelu("tanh"), "gelu-none": Gelu("none")}
