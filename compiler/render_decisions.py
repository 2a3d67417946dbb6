"""The decisions the renderers share (issue 36, D500): which path a conversion takes, what a
reduction starts from, how bool min / max combine, which form a ``math`` call is computed in.

``compiler/spelling.py`` says how a scalar operation is *spelled*; this module says *what* is
computed, as plain data and pure functions returning a plan (a path name, the helper's
parameters, the constants), for the SIMD C renderer (``render_c`` and its CUDA subclass
``render_cuda``) and the Triton renderer (``render_triton``) alike. Each renderer turns a plan
into its own syntax (its C helpers, its Triton prelude functions; tinygrad's shared logic with
per-target ``code_for_op`` overrides), so a second copy of a decision in a renderer is a
spelling table, never a decision tree (``tests/compiler/test_render_decisions.py`` checks the
plans cover every dtype and that the renderers consult them).

What stays per renderer, and why: hardware forms (Triton's ``cvt.rn.bf16.f32`` round and bf16
widen on the GPU, D279; the CUDA ``__fadd_rn`` family), the sign-bit ``neg`` / ``abs`` of
Triton (``-x`` of +0 is +0 there), the reduction schedules (C's interleaved accumulators and
seeded folds, Triton's integer keys for f32 max / min, D341), and which functions a target has
in f64 or in a fast f32 form (the arguments of ``math_plan``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from tilefoundry.compiler import kir
from tilefoundry.compiler.spelling import NARROW_ROUND

__all__ = [
    "BOOL_MINMAX",
    "CAST_PATHS",
    "FLOAT_TO_INT_RANGE",
    "WIDEN_SOURCES",
    "CastPlan",
    "MathPlan",
    "RoundPlan",
    "binop_form",
    "cast_operand",
    "cast_plan",
    "math_plan",
    "reduce_identity",
    "reduce_in_order",
    "root_size",
    "round_plan",
    "round_source",
    "tracks_valid_lane",
]

# -- widen / round ---------------------------------------------------------------------------
#: the dtypes widened exactly to f32 by a helper (f32 itself needs none)
WIDEN_SOURCES: frozenset[str] = frozenset(NARROW_ROUND) | {"f8e8m0"}


@dataclass(frozen=True)
class RoundPlan:
    """An f32 value rounded to ``to``: ``path`` is ``"f32"`` (f32 -> f32: only the overflow
    mode acts), ``"ieee"`` (an IEEE-like narrow format, to nearest even) or ``"e8m0"`` (a
    power of two, by ``rounding``); ``saturate`` is the overflow mode."""

    to: str
    path: str
    saturate: bool
    rounding: str


def round_plan(to: str, overflow: str, rounding: str = "nearest") -> RoundPlan | None:
    """How an f32 is rounded to ``to``; None: no rounding to ``to`` (the renderer refuses)."""
    path = "f32" if to == "f32" else "ieee" if to in NARROW_ROUND else \
        "e8m0" if to == "f8e8m0" else None
    return None if path is None else RoundPlan(to, path, overflow == "saturate", rounding)


def round_source(src: str) -> str:
    """A ``Round`` from ``src``: ``"f32"`` (``round_plan`` directly) or, from f64,
    ``"f64"``: to f32 it is the one correctly rounded conversion (saturated afterwards when
    the overflow mode saturates); to a narrower format it is f64 -> f32 rounded to odd, then
    ``round_plan`` (so the value is rounded once)."""
    return "f32" if src == "f32" else "f64"


# -- casts -----------------------------------------------------------------------------------
#: every path a ``Cast`` can take (``cast_plan``)
CAST_PATHS = ("float_float", "float_bool", "float_int", "int_bool", "int_int", "int_f32",
              "int_narrow")
#: integer dtype -> (lo, hi, lo inclusive): the f32 values a float -> int cast truncates;
#: outside (and NaN) the result is 0 (``tf_numerics.h``'s ``tf_f32_to_<int>``)
FLOAT_TO_INT_RANGE: Mapping[str, tuple[float, float, bool]] = MappingProxyType({
    "i8": (-129.0, 128.0, False), "u8": (-1.0, 256.0, False),
    "i32": (-2147483648.0, 2147483648.0, True),
    "i64": (-9223372036854775808.0, 9223372036854775808.0, True)})


@dataclass(frozen=True)
class CastPlan:
    """A ``Cast``: ``bool_source`` reads a bool as i32 first; ``path`` is one of
    ``CAST_PATHS``; ``wide`` is the integer type an integer source converts through (i32 or
    i64; None for a float source). A float result (``float_float`` / ``int_narrow``) is
    rounded by ``round_plan(dst, overflow, rounding)``."""

    path: str
    bool_source: bool
    wide: str | None


def cast_plan(src: str, dst: str) -> CastPlan:
    """The path of a cast from ``src`` to ``dst``. A float source is widened to f32 first
    (``WIDEN_SOURCES``); an integer to a narrow float is rounded once (through the integer's
    value rounded to odd at f32 precision, or the C runtime's direct conversion)."""
    bool_source = src == "bool"
    if bool_source:
        src = "i32"
    if kir.is_float(src):
        path = "float_float" if kir.is_float(dst) else "float_bool" if dst == "bool" else \
            "float_int"
        return CastPlan(path, bool_source, None)
    wide = "i64" if src == "i64" else "i32"
    path = "int_bool" if dst == "bool" else "int_int" if kir.is_int(dst) else \
        "int_f32" if dst == "f32" else "int_narrow"
    return CastPlan(path, bool_source, wide)


def cast_operand(plan: CastPlan, x: str, src: str, as_i32: Callable[[str], str],
                 widen: Callable[[str, str], str]) -> str:
    """The operand a cast's path reads, spelled by the renderer's ``as_i32`` (a bool source)
    and ``widen`` (a float source, exactly to f32)."""
    if plan.bool_source:
        return as_i32(x)
    return widen(x, src) if plan.wide is None else x


# -- binary operations -----------------------------------------------------------------------
#: bool min / max: the logic operation they are (False < True)
BOOL_MINMAX: Mapping[str, str] = MappingProxyType({"min": "and", "max": "or"})


def binop_form(kind: str, dt: str) -> str | None:
    """The form of ``BinOp`` ``kind`` on ``dt``: ``"cmp"`` / ``"logic"`` (a bool result),
    ``"farith"`` (the IEEE operation), ``"fminmax"`` (NaN-propagating, -0 < +0),
    ``"bool_minmax"`` (``BOOL_MINMAX``), ``"int_wrap"`` (add / sub / mul wrapping),
    ``"int_minmax"`` (a compare and select), ``"int_floordiv"`` (numpy's floored ``//`` /
    ``%``, a zero divisor giving 0); None: not an operation of the kernel IR on ``dt``."""
    from tilefoundry.compiler.spelling import ARITH, CMP, LOGIC

    if kind in CMP:
        return "cmp"
    if kind in LOGIC:
        return "logic"
    if dt in kir.COMPUTE_FLOATS:
        return "farith" if kind in ARITH else "fminmax" if kind in ("min", "max") else None
    if dt == "bool":
        return "bool_minmax" if kind in BOOL_MINMAX else None
    if kir.is_int(dt):
        if kind in ("add", "sub", "mul"):
            return "int_wrap"
        return "int_minmax" if kind in ("min", "max") else \
            "int_floordiv" if kind in ("floordiv", "mod") else None
    return None


# -- reductions ------------------------------------------------------------------------------
def reduce_identity(kind: str, dt: str) -> bool | int | float:
    """The seed of a reduction of ``kind`` over ``dt``: an exact identity of its combining
    step (-0 for a float sum, the extremes for max / min, 0 for an abs_max's magnitude; a bool
    is reduced as and / or). KeyError for a kind with no identity on ``dt`` (a float prod)."""
    if dt == "bool":
        return kind == "min"
    if kir.is_int(dt):
        ii = np.iinfo(kir.numpy_dtype(dt))
        return {"sum": 0, "prod": 1, "max": int(ii.min), "min": int(ii.max),
                "abs_max": 0}[kind]
    return {"sum": -0.0, "max": -math.inf, "min": math.inf, "abs_max": 0.0}[kind]


def reduce_in_order(kind: str, dt: str, policy: str) -> bool:
    """The reduction folds its lanes in the policy's order: a float sum under a fold policy
    (or ``ordered_tree``, of which a left fold is one bracketing). Integer sums wrap and
    max / min / abs_max select, so every order gives the same value."""
    return kir.is_float(dt) and kind == "sum" and policy != "unordered_tree"


def tracks_valid_lane(kind: str, dt: str, masked: bool, seeded: bool) -> bool:
    """A masked float sum without init tracks whether a lane was valid: a row with none is +0
    (the interpreter's identity), not the -0 seed. (The renderer skips the flag where
    ``kir.a_lane_is_valid`` proves every row has a valid lane.)"""
    return masked and not seeded and kind == "sum" and kir.is_float(dt)


# -- math ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MathPlan:
    """A ``Math`` call: ``form`` is ``"f32"`` (the target's one-pass f32 form, its result
    rounded to a narrow dtype when ``dt`` is one), ``"f64"`` (the f64 function of an f64
    operand) or ``"wide"`` (widened to f64, the f64 function, rounded once to ``dt``: to f32
    directly, to a narrow float through f32 rounded to odd); ``narrow`` the operand is a
    narrow float (widened to f32 first, the result rounded back, overflow to inf)."""

    form: str
    narrow: bool


def math_plan(fn: str, dt: str, f32_form: bool, f64_fns: Collection[str]) -> MathPlan | None:
    """How ``fn`` of a ``dt`` operand is computed, given the target's fast f32 form for this
    call (``f32_form``) and the functions it has in f64 (``f64_fns``); None: the target has
    no way (the renderer refuses)."""
    narrow = dt not in kir.COMPUTE_FLOATS
    if f32_form:
        return MathPlan("f32", narrow)
    if dt == "f64":
        return MathPlan("f64", False) if fn in f64_fns else None
    return MathPlan("wide", narrow)


# -- storage ---------------------------------------------------------------------------------
def root_size(b: kir.Buffer) -> int:
    """Elements of a root buffer's flat storage, as the interpreter allocates it."""
    if b.kind == "input":
        return b.size
    if b.kind == "const":
        return int(np.asarray(b.data).size)
    return b.span
