"""Hypothesis strategies for tilefoundry values, exported for users (issue 7, deliverable 2).

Public strategies:

* ``dtypes(...)`` — IR element types (``DType``), f32 first so that shrinking prefers it.
* ``dimvars(...)``, ``shapes(...)``, ``bindings(...)`` — static and symbolic shapes: a symbolic
  axis is a ``DimVar`` with an envelope ``[lo, hi)``; ``bindings`` draws a concrete size for every
  DimVar of a shape inside its envelope and ``bind`` evaluates a shape under such a binding.
* ``arrays(dtype, shape, specials=True)`` — numpy arrays of the dtype's *storage* type (ml_dtypes
  for low precision). Values are generated as **bit patterns** (so every low-precision code is
  reachable exactly, nothing is rounded on the way in) and weighted toward the format's special
  values: NaN (several payloads and signs), ±inf where the format has them, ±0, the smallest and
  largest subnormal, the smallest normal, ±max finite, ±1, and *rounding ties / carry patterns*:
  significands whose low bits are exactly half an ulp of every narrower format (ties), one code
  either side of a tie, and all-ones significands (rounding carries into the exponent).
* ``meshes(...)`` and ``shard_layouts(shape, mesh)`` — 1-D / 2-D meshes and ShardLayouts over a
  static shape (natural or refined layouts; Split / Broadcast / Partial per mesh axis);
  ``topology_of(mesh)`` is the Module topology a mesh lives in.

Every strategy is a thin wrapper over a function that takes a ``Source`` (a stream of choices):
``DrawSource`` reads them from hypothesis (so hypothesis shrinks them; a choice of 0 is always the
"simplest" option), ``RandomSource`` from a seeded ``random.Random`` plus a seeded numpy
``Generator`` (deterministic: the same seed gives the same values, with no hypothesis overhead).
The program generator (``oracle/programs.py``) drives the same functions with either source.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from hypothesis import strategies as st

from tilefoundry.semantics.dtypes import cast, from_bits
from tilefoundry.semantics.formats import FORMATS, DType, FormatInfo
from tilefoundry.semantics.types import (
    Broadcast,
    DimVar,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    Topology,
    TopologyLevel,
    evaluate_dim,
    free_dimvars,
)

__all__ = [
    "ALL_DTYPES",
    "EVALUABLE_DTYPES",
    "FLOAT_DTYPES",
    "INT_DTYPES",
    "DrawSource",
    "RandomSource",
    "Source",
    "ValueSpec",
    "arrays",
    "bind",
    "bindings",
    "dimvars",
    "draw_array",
    "draw_mesh",
    "draw_shard_layout",
    "dtypes",
    "meshes",
    "shapes",
    "shard_layouts",
    "special_codes",
    "tie_and_carry_codes",
    "topology_of",
]

# f32 first: hypothesis shrinks a sampled choice toward the first element.
ALL_DTYPES: tuple[DType, ...] = (
    DType.F32, DType.BF16, DType.F16, DType.FP8E4M3, DType.FP8E5M2, DType.F8E8M0, DType.F4E2M1,
    DType.I32, DType.I64, DType.I8, DType.U8, DType.BOOL,
)
EVALUABLE_DTYPES = tuple(d for d in ALL_DTYPES if FORMATS[d].evaluable)
FLOAT_DTYPES = tuple(d for d in EVALUABLE_DTYPES if d.is_float)
INT_DTYPES = tuple(d for d in EVALUABLE_DTYPES if d.is_int)


# =============================================================================================
# sources of choices
# =============================================================================================
class Source:
    """A stream of choices. ``integer`` / ``choice`` / ``boolean`` drive structure;
    ``integers`` / ``ints`` draw a whole vector (array data). Choice 0 / the first option /
    False is the simplest, so a shrinking source simplifies toward it."""

    def ints(self, lo: int, hi: int, n: int) -> list[int]:
        return [int(v) for v in self.integers(lo, hi, n)]

    def integer(self, lo: int, hi: int) -> int:  # inclusive bounds
        raise NotImplementedError

    def integers(self, lo: int, hi: int, n: int) -> np.ndarray:  # inclusive; int64 or uint64
        raise NotImplementedError

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self.integer(0, len(seq) - 1)]

    def boolean(self, p: float = 0.5) -> bool:
        """True with probability ``p`` (False is the simple value)."""
        return self.integer(0, 999) >= round(1000 * (1.0 - p))

    def subset(self, seq: Sequence[Any], p: float = 0.5) -> list:
        return [x for x in seq if self.boolean(p)]

    def permutation(self, n: int) -> list[int]:
        items = list(range(n))
        out = []
        while items:
            out.append(items.pop(self.integer(0, len(items) - 1)))
        return out


_I64_MAX = (1 << 63) - 1


def _vec_dtype(lo: int, hi: int) -> type:
    return np.uint64 if hi > _I64_MAX else np.int64


class RandomSource(Source):
    """Deterministic choices from a seed: structure from ``random.Random(seed)``, array data from
    a second ``random.Random`` seeded from the same seed — two independent streams, so the data
    drawn never shifts the structure that follows it."""

    def __init__(self, seed: int):
        self.seed = seed
        self.rng = random.Random(seed)
        self.drng = random.Random(f"tilefoundry-data:{seed}")  # str seeds hash stably

    # random() scaled rather than randrange: several times faster, and the generator's ranges
    # are tiny, so the 2^-53 granularity bias is irrelevant
    def integer(self, lo: int, hi: int) -> int:
        return lo if lo >= hi else lo + int(self.rng.random() * (hi - lo + 1))

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[int(self.rng.random() * len(seq))]

    def boolean(self, p: float = 0.5) -> bool:
        return self.rng.random() < p

    def integers(self, lo: int, hi: int, n: int) -> np.ndarray:
        return np.array(self.ints(lo, hi, n), _vec_dtype(lo, hi))

    def ints(self, lo: int, hi: int, n: int) -> list[int]:
        span = hi - lo + 1
        if span & (span - 1) == 0:  # a power of two: plain random bits
            rb, k = self.drng.getrandbits, span.bit_length() - 1
            return [lo + rb(k) for _ in range(n)] if k else [lo] * n
        rr = self.drng.randrange
        return [lo + rr(span) for _ in range(n)]


class DrawSource(Source):
    """Choices drawn from hypothesis (inside ``st.composite`` or ``st.data()``)."""

    def __init__(self, draw):
        self.draw = draw

    def ints(self, lo: int, hi: int, n: int) -> list[int]:
        if n == 0 or lo >= hi:
            return [lo] * n
        return self.draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))

    def integer(self, lo: int, hi: int) -> int:
        # sampled_from over a small range draws about uniformly (st.integers favours its
        # bounds, which would skew every structural choice) and still shrinks toward ``lo``
        if lo >= hi:
            return lo
        if hi - lo < 1024:
            return self.draw(st.sampled_from(range(lo, hi + 1)))
        return self.draw(st.integers(lo, hi))

    def integers(self, lo: int, hi: int, n: int) -> np.ndarray:
        dt = _vec_dtype(lo, hi)
        if n == 0 or lo >= hi:
            return np.full(n, lo, dt)
        return np.array(self.draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n)), dt)


# =============================================================================================
# dtypes
# =============================================================================================
def dtypes(*, floats: bool = True, ints: bool = True, bools: bool = True,
           evaluable_only: bool = True, exclude: Sequence[DType] = ()) -> st.SearchStrategy:
    """IR element types. ``evaluable_only`` drops the type-level-only f4e2m1."""
    pool = [d for d in (ALL_DTYPES if not evaluable_only else EVALUABLE_DTYPES)
            if d not in exclude and ((floats and d.is_float) or (ints and d.is_int)
                                     or (bools and d is DType.BOOL))]
    if not pool:
        raise ValueError("dtypes(): the filters exclude every dtype")
    return st.sampled_from(pool)


# =============================================================================================
# shapes
# =============================================================================================
def draw_dimvar(src: Source, name: str = "N", *, min_lo: int = 1, max_hi: int = 8) -> DimVar:
    lo = src.integer(min_lo, max(min_lo, max_hi - 2))
    hi = src.integer(lo + 1, max(lo + 1, max_hi))
    return DimVar(name, lo, hi)


def dimvars(name: str = "N", *, min_lo: int = 1, max_hi: int = 8) -> st.SearchStrategy:
    """A DimVar ``name`` with a non-empty envelope ``[lo, hi)``, ``min_lo <= lo < hi <= max_hi``."""
    return st.composite(lambda draw: draw_dimvar(DrawSource(draw), name, min_lo=min_lo,
                                                 max_hi=max_hi))()


def draw_shape(src: Source, *, min_rank: int = 0, max_rank: int = 3, min_side: int = 1,
               max_side: int = 4, dim_vars: Sequence[DimVar] = (),
               symbolic_p: float = 0.4) -> tuple:
    rank = src.integer(min_rank, max_rank)
    out: list = []
    for _ in range(rank):
        if dim_vars and src.boolean(symbolic_p):
            out.append(src.choice(list(dim_vars)))
        else:
            out.append(src.integer(min_side, max_side))
    return tuple(out)


def shapes(*, min_rank: int = 0, max_rank: int = 3, min_side: int = 1, max_side: int = 4,
           dim_vars: Sequence[DimVar] = (), symbolic: bool = False,
           max_envelope: int = 8) -> st.SearchStrategy:
    """Shapes (tuples of ShapeDims). Static extents lie in ``[min_side, max_side]``. An axis is
    symbolic — one of ``dim_vars`` — with probability 0.4; with ``symbolic=True`` and no
    ``dim_vars`` given, one or two DimVars (``N``, ``M``) with envelopes inside
    ``[max(min_side, 1), max_envelope)`` are drawn first. Use ``bindings`` / ``bind`` for
    concrete sizes."""

    @st.composite
    def _s(draw):
        src = DrawSource(draw)
        dvs = list(dim_vars)
        if symbolic and not dvs:
            for name in ("N", "M")[:src.integer(1, 2)]:
                dvs.append(draw_dimvar(src, name, min_lo=max(min_side, 1),
                                       max_hi=max_envelope))
        return draw_shape(src, min_rank=min_rank, max_rank=max_rank, min_side=min_side,
                          max_side=max_side, dim_vars=dvs)

    return _s()


def _shape_dimvars(shape_or_dvs: Any) -> list[DimVar]:
    out: dict[str, DimVar] = {}
    for d in shape_or_dvs:
        for v in sorted(free_dimvars(d), key=lambda v: v.name):
            out.setdefault(v.name, v)
    return list(out.values())


def draw_binding(src: Source, shape_or_dvs: Any) -> dict[str, int]:
    return {v.name: src.integer(v.lo, v.hi - 1) for v in _shape_dimvars(shape_or_dvs)}


def bindings(shape_or_dvs: Any) -> st.SearchStrategy:
    """A concrete size (name -> int) for every DimVar of a shape (or of a list of DimVars),
    inside its envelope."""
    return st.composite(lambda draw: draw_binding(DrawSource(draw), shape_or_dvs))()


def bind(shape: tuple, env: Mapping[str, int]) -> tuple[int, ...]:
    """The concrete shape of ``shape`` under ``env``."""
    return tuple(evaluate_dim(d, env) for d in shape)


# =============================================================================================
# values
# =============================================================================================
@dataclass(frozen=True)
class ValueSpec:
    """How array elements are drawn.

    * ``general``: bit patterns weighted toward special values (``specials=True``) or only
      ordinary finite values of moderate magnitude (``specials=False``);
    * ``int_range``: integer values in ``[lo, hi]`` (in any dtype; exact in a float format when
      the range is inside its exactly-representable integers);
    * ``real_range``: finite values in ``[lo, hi]`` on a grid of step 1/8 (integers and the
      ties ``k + 0.5`` included), rounded once to the format.
    """

    kind: str = "general"
    lo: float = 0
    hi: float = 0
    specials: bool = True

    @staticmethod
    def int_range(lo: int, hi: int) -> ValueSpec:
        return ValueSpec("int_range", lo, hi)

    @staticmethod
    def real_range(lo: float, hi: float) -> ValueSpec:
        return ValueSpec("real_range", lo, hi)


GENERAL = ValueSpec()
ORDINARY = ValueSpec(specials=False)


def _mag_code(info: FormatInfo, exp: int, mant: int) -> int:
    if not info.implicit_bit:
        return exp
    return (exp << info.mbits) | mant


def tie_and_carry_codes(info: FormatInfo) -> tuple[int, ...]:
    """Significand (fraction-field) patterns of ``info`` that are rounding ties or carries when a
    value is rounded to a narrower float format: for every narrower fraction width ``k`` the
    dropped ``m - k`` low bits are exactly ``10..0`` (a tie; kept bits even and odd), ``10..01``
    and ``01..1`` (one code either side of the tie) and ``11..1`` under all-ones kept bits (the
    round-up carries into the exponent); plus the all-ones / all-ones-minus-one / half
    significands of the format itself."""
    m = info.mbits
    if m == 0:
        return (0,)
    full = (1 << m) - 1
    pats = {0, 1, full, full - 1 if full > 1 else full, 1 << (m - 1)}
    for k in sorted({FORMATS[d].mbits for d in ALL_DTYPES if d.is_float}):
        if k >= m:
            continue
        drop = m - k
        half = 1 << (drop - 1)
        low_mask = (1 << drop) - 1
        for kept in (0, 1, (1 << k) - 1, (1 << k) - 2 if k > 1 else 0):
            base = kept << drop
            pats.update({base | half, base | half | 1 if drop > 1 else base | half,
                         base | (half - 1), base | low_mask})
    return tuple(sorted({p & full for p in pats}))


@cache
def _float_pools(dt: DType) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, int]:
    """(special codes, structured exponents, significand patterns, ordinary exp lo / hi,
    largest exponent field value)."""
    info = FORMATS[dt]
    sign = info.sign_bit
    e_all = (1 << info.ebits) - 1
    specials: list[int] = []

    def both(c: int) -> None:
        specials.append(c)
        if info.has_sign:
            specials.append(c | sign)

    if info.implicit_bit:
        both(0)  # ±0
        if info.mbits:
            both(1)  # smallest subnormal
            both((1 << info.mbits) - 1)  # largest subnormal
        both(1 << info.mbits)  # smallest normal
        both(_mag_code(info, info.bias, 0))  # ±1
        both(_mag_code(info, info.bias, 1 << (info.mbits - 1)) if info.mbits else
             _mag_code(info, info.bias + 1, 0))  # ±1.5 (a tie for the integer rounding)
    else:  # E8M0: 2^(code - bias), no sign, no zero
        specials += [0, 1, info.bias - 1, info.bias, info.bias + 1]
    both(info.max_code)  # ±max finite
    both(max(info.max_code - 1, 0))
    if info.inf_code is not None:
        both(info.inf_code)
    if info.nan_code is not None:
        both(info.nan_code)
        if info.nan == "ieee":  # a signalling payload and an all-ones payload
            both((e_all << info.mbits) | 1)
            both((e_all << info.mbits) | ((1 << info.mbits) - 1))
    max_exp_field = e_all
    exps = sorted({0, 1, 2, max(info.bias - 1, 0), info.bias, min(info.bias + 1, e_all),
                   max(e_all - 1, 0), e_all})
    if not info.implicit_bit:
        exps = [e for e in exps if e <= e_all]
    lo = max(1 if info.implicit_bit else 0, info.bias - 3)
    hi_cap = e_all - 1 if (info.has_inf or info.nan == "ieee") else e_all
    if not info.implicit_bit:
        hi_cap = e_all - 1
    hi = min(info.bias + 3, hi_cap)
    return (np.array(sorted(set(specials)), np.uint64), np.array(exps, np.uint64),
            np.array(tie_and_carry_codes(info), np.uint64), lo, hi, max_exp_field)


@cache
def _float_tables(dt: DType) -> tuple[list[int], list[int], list[int], int, int, int]:
    sp, ex, mt, lo, hi, top = _float_pools(dt)
    return [int(c) for c in sp], [int(c) for c in ex], [int(c) for c in mt], lo, hi, top


def special_codes(dtype: DType) -> tuple[int, ...]:
    """The bit patterns of the special values ``arrays`` weights toward (see the module doc)."""
    dt = DType.parse(dtype)
    info = FORMATS[dt]
    if info.kind == "float":
        return tuple(int(c) for c in _float_pools(dt)[0])
    if info.kind == "bool":
        return (0, 1)
    return tuple(int(c) for c in _int_specials(dt))


@cache
def _int_specials(dt: DType) -> np.ndarray:
    info = FORMATS[dt]
    bits = info.bits
    mask = (1 << bits) - 1
    if info.signed:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        lo, hi = 0, mask
    vals = {0, 1, 2, 7, lo, hi, lo + 1, hi - 1, hi // 2, hi // 2 + 1}
    if info.signed:
        vals |= {-1, -2, -8}
    return np.array(sorted(v & mask for v in vals), np.uint64)


_FIELDS = (1 << 62) - 1  # one draw per element; its digits select category and fields


def _float_general(src: Source, dt: DType, n: int, specials: bool) -> np.ndarray:
    """Float codes, one integer draw per element (0 shrinks to the first special value): the
    draw's digits pick a category — 0-2 special (from ``special_codes``), 3-4 structured (an
    exponent from the edge exponents x a tie / carry significand pattern), 5-8 ordinary (finite,
    magnitude about 2^-3 .. 2^3, random significand), 9 uniform over every code — then the
    category's fields; ``specials=False`` keeps only the ordinary category. (Plain Python
    integers: the arrays are small and numpy's per-call overhead dominates there.)"""
    info = FORMATS[dt]
    spec_pool, exps, mants, olo, ohi, _ = _float_tables(dt)
    mb, mmask, implicit = info.mbits, (1 << info.mbits) - 1, info.implicit_bit
    sbit = info.sign_bit if info.has_sign else 0
    ocap = info.max_code if implicit and info.nan == "all_ones" else None
    ospan, nsp, nex, nmt = ohi - olo + 1, len(spec_pool), len(exps), len(mants)
    umask = (1 << info.bits) - 1
    out = []
    for u in src.ints(0, _FIELDS, n):
        cat, rest = divmod(u, 10)[::-1] if specials else (5, u)
        sign, rest = rest & 1, rest >> 1
        if cat <= 2:
            out.append(spec_pool[rest % nsp])
            continue
        if cat == 9:
            out.append(rest & umask)
            continue
        if cat <= 4:
            e = exps[rest % nex]
            mag = (e << mb) | mants[(rest // nex) % nmt] if implicit else e
        else:
            e = olo + rest % ospan
            mag = (e << mb) | ((rest >> 8) & mmask) if implicit else e
            if ocap is not None and mag > ocap:  # E4M3FN: S.1111.111 is NaN
                mag = ocap
        out.append(mag | sbit if sign else mag)
    return np.array(out, np.uint64)


def _int_general(src: Source, dt: DType, n: int, specials: bool) -> np.ndarray:
    """Integer codes, one draw per element: 0-2 special (0, ±1, min, max, ...), 3-7 small
    (|v| <= 8), 8-9 uniform over every code (64-bit formats: the draw's digits spread over the
    whole range)."""
    info = FORMATS[dt]
    mask = (1 << info.bits) - 1
    lo, hi = (-8, 8) if info.signed else (0, 16)
    pool = [int(c) for c in _int_specials(dt)]
    out = []
    for u in src.ints(0, _FIELDS, n):
        cat, rest = divmod(u, 10)[::-1] if specials else (5, u)
        if cat <= 2:
            out.append(pool[rest % len(pool)])
        elif cat <= 7:
            out.append((lo + rest % (hi - lo + 1)) & mask)
        else:
            out.append((rest * 0x9E3779B97F4A7C15 if info.bits == 64 else rest) & mask)
    return np.array(out, np.uint64)


def draw_array(src: Source, dtype: DType, shape: tuple[int, ...],
               spec: ValueSpec = GENERAL) -> np.ndarray:
    """An array of ``dtype``'s storage type and concrete ``shape`` drawn from ``src``."""
    dt = DType.parse(dtype)
    info = FORMATS[dt]
    shape = tuple(int(d) for d in shape)
    n = math.prod(shape)
    if spec.kind == "int_range":
        lo, hi = int(spec.lo), int(spec.hi)
        v = src.integers(lo, hi, n).astype(np.int64)
        if dt is DType.BOOL:
            return (v != 0).reshape(shape)
        if info.kind == "int":
            return v.astype(info.storage).reshape(shape)
        return np.asarray(cast(v.astype(np.float32), dt)).reshape(shape)
    if spec.kind == "real_range":
        lo8, hi8 = math.ceil(spec.lo * 8), math.floor(spec.hi * 8)
        v = src.integers(lo8, hi8, n).astype(np.float64) / 8.0
        return np.asarray(cast(v.astype(np.float32), dt)).reshape(shape)
    if spec.kind != "general":
        raise ValueError(f"ValueSpec.kind {spec.kind!r} is not general / int_range / real_range")
    if dt is DType.BOOL:
        return (src.integers(0, 1, n) != 0).reshape(shape)
    codes = _float_general(src, dt, n, spec.specials) if info.kind == "float" else \
        _int_general(src, dt, n, spec.specials)
    from tilefoundry.semantics.formats import bits_dtype

    # not np.ascontiguousarray: it turns a rank-0 array into shape (1,)
    return np.array(from_bits(codes.astype(bits_dtype(dt)), dt).reshape(shape), order="C")


def arrays(dtype: DType | str, shape: tuple, specials: bool = True, *,
           spec: ValueSpec | None = None,
           env: Mapping[str, int] | None = None) -> st.SearchStrategy:
    """Arrays of ``dtype``'s storage type (ml_dtypes for low precision) and shape ``shape``
    (symbolic axes are bound by ``env``, or drawn inside their envelopes). Values come from bit
    patterns weighted toward the format's special values (``specials=True``) or are ordinary
    finite values (``specials=False``); ``spec`` overrides both (``ValueSpec.int_range`` /
    ``real_range``)."""
    dt = DType.parse(dtype)
    sp = spec if spec is not None else (GENERAL if specials else ORDINARY)

    @st.composite
    def _s(draw):
        src = DrawSource(draw)
        e = dict(env) if env is not None else draw_binding(src, shape)
        return draw_array(src, dt, bind(tuple(shape), e), sp)

    return _s()


# =============================================================================================
# meshes and ShardLayouts
# =============================================================================================
_MESH_SHAPES = ((2,), (3,), (4,), (2, 2), (2, 3), (3, 2), (2, 4), (4, 2), (1,), (1, 2))


def draw_mesh(src: Source, *, max_axes: int = 2, max_devices: int = 8) -> Mesh:
    shapes_ = [s for s in _MESH_SHAPES if len(s) <= max_axes and math.prod(s) <= max_devices]
    ext = src.choice(shapes_)
    return Mesh("device", ("x", "y")[:len(ext)], tuple(ext))


def meshes(*, max_axes: int = 2, max_devices: int = 8) -> st.SearchStrategy:
    """1-D and 2-D meshes (axes ``x``, ``y``) over the topology level ``device``; pair with
    ``topology_of(mesh)``."""
    return st.composite(lambda draw: draw_mesh(DrawSource(draw), max_axes=max_axes,
                                               max_devices=max_devices))()


def topology_of(mesh: Mesh) -> Topology:
    """The Module topology with one level for ``mesh`` (its extent is the mesh size)."""
    return Topology((TopologyLevel(mesh.topology, mesh.size),))


def _factor_pairs(e: int) -> list[tuple[int, int]]:
    return [(a, e // a) for a in range(2, e) if e % a == 0]


def draw_shard_layout(src: Source, shape: tuple[int, ...], mesh: Mesh, *,
                      partials: Sequence[str] = ("sum", "max", "min"), refine: bool = True,
                      split_p: float = 0.5) -> ShardLayout:
    shape = tuple(int(d) for d in shape)
    entries: list = list(shape)
    if refine and shape and src.boolean(0.2):
        cands = [a for a, e in enumerate(shape) if _factor_pairs(e)]
        if cands:
            a = src.choice(cands)
            entries[a] = src.choice(_factor_pairs(shape[a]))
    layout = Layout(tuple(entries))
    pos = layout.positions
    used: set[int] = set()
    attrs: list = []
    for m in mesh.axis_extents:
        splits = [p for p, e in enumerate(pos) if p not in used and e % m == 0 and e >= m]
        r = src.integer(0, 9)
        if splits and r >= round(10 * (1 - split_p)):
            p = src.choice(splits)
            used.add(p)
            attrs.append(Split(p))
        elif partials and r >= 2:
            if src.boolean(0.4):
                attrs.append(Partial(src.choice(list(partials))))
            else:
                attrs.append(Broadcast())
        else:
            attrs.append(Broadcast())
    return ShardLayout(mesh, tuple(attrs), layout)


def shard_layouts(shape: tuple[int, ...], mesh: Mesh, *,
                  partials: Sequence[str] = ("sum", "max", "min"),
                  refine: bool = True) -> st.SearchStrategy:
    """ShardLayouts of a static ``shape`` on ``mesh``: a natural layout or one axis refined into
    two positions; per mesh axis a Split of a divisible, not yet split position, Broadcast, or
    Partial (one of ``partials``; pass ``()`` for none). ``strides`` is left as the
    ``None`` sugar (type inference materializes it)."""
    return st.composite(lambda draw: draw_shard_layout(DrawSource(draw), shape, mesh,
                                                       partials=partials, refine=refine))()
