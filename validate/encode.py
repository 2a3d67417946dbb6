"""Bit-precise SMT encodings of kernel-IR values and instructions (Z3).

Value representation, per kernel-IR dtype:

* ``f32`` / ``f64`` / ``f16`` / ``bf16``: Z3 floating-point terms (``Float32``, ``Float64``,
  ``FPSort(5, 11)``, ``FPSort(8, 8)``). SMT-LIB has one NaN per sort, so equality of two terms
  is exactly the project's NaN rule (D21: NaN compared as a class, -0 != +0).
* ``fp8e4m3`` / ``fp8e5m2`` / ``f8e8m0``: 8-bit codes (bit-vectors). Rounding to them is the
  project's own bit-vector transcription of ``dtypes.cast`` (``smt.obligations.rounding
  .encode_round_f32``, the model ``tilefoundry prove`` checks against an independent
  specification) — not a second model. Widening is the evaluator's ``widen_to_f32`` table over
  all 256 codes.
* integers: bit-vectors of their width (two's complement, wrapping); ``bool``: Z3 Bool.

Every encoded instruction kind is a key of the tables below (``BINARY``, ``UNARY``, ...), named
by the kernel IR's own kind tuples (``kir.BINARY_KINDS`` ...). A kind / dtype with no entry
raises ``Unsupported`` naming it: nothing is silently skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import z3

from tilefoundry.compiler import kir
from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.dtypes import from_bits, widen_to_f32
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.smt_fp import fminmax  # the reference's max / min, shared
from tilefoundry.smt.obligations.rounding import encode_round_f32

__all__ = [
    "BINARY",
    "UNARY",
    "Unsupported",
    "bits_of",
    "const",
    "dag_nodes",
    "fp_sort",
    "from_input_bits",
    "is_code",
    "is_fp",
    "raw_bits",
    "round_to",
    "widen",
    "zero",
]

RNE = z3.RNE()
FP_SORTS = {"f32": (8, 24), "f64": (11, 53), "f16": (5, 11), "bf16": (8, 8)}
CODE_DTYPES = frozenset({"fp8e4m3", "fp8e5m2", "f8e8m0"})
_QNAN32 = 0x7FC00000


class Unsupported(TilefoundryError):
    """An op, dtype or shape outside what the validator encodes (reported, never skipped)."""


def dag_nodes(t: z3.ExprRef):
    """Each distinct node of the term ``t`` once (a walk of its DAG, children after parents)."""
    seen: set[int] = set()
    stack = [t]
    while stack:
        e = stack.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        yield e
        stack.extend(e.children())


def is_fp(dt: str) -> bool:
    return dt in FP_SORTS


def is_code(dt: str) -> bool:
    return dt in CODE_DTYPES


def width(dt: str) -> int:
    if dt == "f64":
        return 64
    return FORMATS[DType(dt)].bits


@cache
def fp_sort(dt: str) -> z3.FPSortRef:
    e, s = FP_SORTS[dt]
    return z3.FPSort(e, s)


def _signed(dt: str) -> bool:
    return kir.is_int(dt) and FORMATS[DType(dt)].signed


def input_var(name: str, dt: str) -> z3.BitVecRef:
    """The storage bits of one input element as a variable: ``width(dt)`` bits, except that a
    bool element ranges over its type's two values only (a 1-bit variable, zero-extended to
    its byte: a byte like 0xFF is no value of the type, and the evaluators need not agree on
    it; D539)."""
    if dt == "bool":
        return z3.ZeroExt(width(dt) - 1, z3.BitVec(name, 1))
    return z3.BitVec(name, width(dt))


def from_input_bits(bits: z3.BitVecRef, dt: str) -> z3.ExprRef:
    """The value of a storage bit pattern (an input element is a bit-vector variable)."""
    if is_fp(dt):
        return z3.fpBVToFP(bits, fp_sort(dt))
    if dt == "bool":
        return bits != 0
    return bits


def bits_of(x: z3.ExprRef, dt: str) -> z3.BitVecRef:
    """The storage bits of a value (NaN: the positive quiet NaN of the format)."""
    if is_fp(dt):
        w = width(dt)
        e, s = FP_SORTS[dt]
        qnan = ((1 << (e + 1)) - 1) << (s - 2)
        return z3.If(z3.fpIsNaN(x), z3.BitVecVal(qnan, w), z3.fpToIEEEBV(x))
    if dt == "bool":
        return z3.If(x, z3.BitVecVal(1, 8), z3.BitVecVal(0, 8))
    return x


#: the abstraction a bitcast records when it reads a computed f32 value (D522)
COMPUTED_NAN_BITS = ("bitcast of a computed f32 value (a NaN's payload is not modelled: the "
                     "positive quiet NaN on both sides)")


def raw_bits(x: z3.ExprRef, dt: str) -> tuple[z3.BitVecRef, bool]:
    """The storage bits a bitcast reads from the float value ``x`` (D522), and whether they
    are exact. SMT-LIB has one NaN per sort and Z3's ``fp.to_ieee_bv`` is unspecified on it,
    so the bits are taken from the term's *structure*: a value that entered as bits — an input
    element, a constant, a u32 -> f32 bitcast (each ``fpBVToFP(b)``) — gives ``b`` itself, NaN
    payload and sign included; a selection (``If``) selects between its operands' bits.
    Any other (computed) value gives ``bits_of``: exact except that a NaN is the positive
    quiet NaN (its payload is not modelled; the contracts fix none, D21), ``exact`` False."""
    if z3.is_app_of(x, z3.Z3_OP_FPA_TO_FP) and x.num_args() == 1 and \
            z3.is_bv(x.arg(0)) and x.arg(0).size() == width(dt):
        return x.arg(0), True
    if z3.is_app_of(x, z3.Z3_OP_ITE):
        a, ea = raw_bits(x.arg(1), dt)
        b, eb = raw_bits(x.arg(2), dt)
        return z3.If(x.arg(0), a, b), ea and eb
    return bits_of(x, dt), False


def const(v: Any, dt: str) -> z3.ExprRef:
    """A concrete element of dtype ``dt`` (a numpy scalar or a Python number) as a term."""
    if dt == "bool":
        return z3.BoolVal(bool(v))
    if kir.is_int(dt):
        return z3.BitVecVal(int(v) % (1 << width(dt)), width(dt))
    npdt = kir.numpy_dtype(dt)
    b = int(np.asarray(v).astype(npdt).reshape(1).view(f"u{npdt.itemsize}")[0])
    if is_code(dt):
        return z3.BitVecVal(b, 8)
    return z3.fpBVToFP(z3.BitVecVal(b, width(dt)), fp_sort(dt))


def zero(dt: str) -> z3.ExprRef:
    return const(0, dt)


def concrete_value(t: z3.ExprRef, dt: str) -> Any:
    """A term's concrete value when it simplifies to a literal (index / mask use), else None."""
    s = z3.simplify(t)
    if dt == "bool":
        return True if z3.is_true(s) else False if z3.is_false(s) else None
    if kir.is_int(dt) and z3.is_bv_value(s):
        return s.as_signed_long() if _signed(dt) else s.as_long()
    return None


# ---------------------------------------------------------------------------------------------
# conversions
# ---------------------------------------------------------------------------------------------
@cache
def _code_table(dt: str) -> tuple[int, ...]:
    """f32 bits of every code of an 8-bit float format, by the evaluator's ``widen_to_f32``."""
    codes = np.arange(256, dtype=np.uint8)
    with np.errstate(all="ignore"):
        f = widen_to_f32(from_bits(codes, dt))
    return tuple(int(b) for b in np.asarray(f, np.float32).view(np.uint32))


_TEMPLATES: dict[tuple, tuple[z3.ExprRef, z3.ExprRef]] = {}


def templated(key: tuple, x: z3.ExprRef, build: Callable[[z3.ExprRef], z3.ExprRef]
              ) -> z3.ExprRef:
    """``build(x)`` for a pure term builder (no Python branch on ``x``), as one substitution
    of ``x`` into ``build`` applied once per ``key`` to a placeholder of ``x``'s sort: the same
    term (Z3 hash-conses terms), one API call instead of hundreds (the 255 ``If``\\ s of an
    8-bit code's table, the rounding transcription). ``key`` names the builder and its
    arguments; the sort is added to it."""
    k = (*key, x.sort_kind(), str(x.sort()))
    t = _TEMPLATES.get(k)
    if t is None:
        v = z3.Const(f"__template_{len(_TEMPLATES)}", x.sort())
        t = _TEMPLATES[k] = (v, build(v))
    return z3.substitute(t[1], (t[0], x))


def _decode_code(x: z3.BitVecRef, dt: str) -> z3.FPRef:
    return templated(("decode", dt), x, lambda v: _decode_table(v, dt))


def _decode_table(x: z3.BitVecRef, dt: str) -> z3.FPRef:
    table = _code_table(dt)
    out: z3.ExprRef = z3.BitVecVal(table[0], 32)
    for c in range(1, 256):
        out = z3.If(x == c, z3.BitVecVal(table[c], 32), out)
    return z3.fpBVToFP(out, fp_sort("f32"))


def widen(x: z3.ExprRef, src: str, to: str) -> z3.FPRef:
    """``Widen`` (exact): a float dtype to f32 / f64."""
    if is_code(src):
        x = _decode_code(x, src)
    elif not is_fp(src):
        raise Unsupported(f"widen from {src}")
    if not z3.is_fp(x):
        raise AssertionError(f"widen {src} -> {to}: operand {x} of sort {x.sort()}")
    return z3.fpToFP(RNE, x, fp_sort(to))


def _f32_bits(x: z3.FPRef) -> z3.BitVecRef:
    return z3.If(z3.fpIsNaN(x), z3.BitVecVal(_QNAN32, 32), z3.fpToIEEEBV(x))


def _from_code_bits(code: z3.BitVecRef, to: str) -> z3.ExprRef:
    return z3.fpBVToFP(code, fp_sort(to)) if is_fp(to) else code


def round_f32(x: z3.FPRef, to: str, overflow: str, rounding: str = "nearest") -> z3.ExprRef:
    """``dtypes.cast(f32 -> to)`` through the project's bit-vector transcription."""
    if to == "f32":
        if overflow == "saturate":  # ±inf clamp to ±max finite (docs/contracts.md)
            big = z3.FPVal(float(np.finfo(np.float32).max), fp_sort("f32"))
            return z3.If(z3.fpIsInf(x), z3.If(z3.fpIsNegative(x), -big, big), x)
        return x
    if to in ("f16", "bf16") and overflow == "nonfinite" and rounding == "nearest":
        # Z3's own rounding: ``tilefoundry prove`` proves it equal to the transcription below
        # on all 2^32 inputs (obligation rounding.f32_to_<dt>.nonfinite), and it solves faster
        return z3.fpToFP(RNE, x, fp_sort(to))
    return templated(("round_f32", to, overflow, rounding), x, lambda v: _from_code_bits(
        encode_round_f32(_f32_bits(v), FORMATS[DType(to)], overflow, rounding), to))


def _int_to_f32_odd(x: z3.BitVecRef, src: str) -> z3.FPRef:
    """The integer ``x`` rounded to odd into f32: toward zero, and where that is inexact
    (rounding up and down differ) the significand's last bit set. No integer overflows f32."""
    conv = z3.fpSignedToFP if _signed(src) else z3.fpUnsignedToFP
    f32 = fp_sort("f32")
    tz = conv(z3.RTZ(), x, f32)
    inexact = conv(z3.RTP(), x, f32) != conv(z3.RTN(), x, f32)
    return z3.If(inexact, z3.fpBVToFP(z3.fpToIEEEBV(tz) | 1, f32), tz)


def _f64_to_f32_odd(v: z3.FPRef) -> z3.FPRef:
    """``evaluator.math._f64_to_f32_odd``: nearest f32, moved one step toward ``v`` when
    inexact and even (round to odd)."""
    r = z3.fpToFP(RNE, v, fp_sort("f32"))
    back = z3.fpToFP(RNE, r, fp_sort("f64"))
    inexact = z3.And(z3.Not(z3.fpIsInf(r)), z3.Not(z3.fpIsNaN(r)), z3.Not(back == v))
    bits = z3.fpToIEEEBV(r)
    even = z3.Extract(0, 0, bits) == 0
    up = z3.fpGT(z3.fpAbs(v), z3.fpAbs(back))
    moved = z3.If(up, bits + 1, bits - 1)
    return z3.If(z3.And(inexact, even), z3.fpBVToFP(moved, fp_sort("f32")), r)


def round_to(x: z3.ExprRef, src: str, to: str, overflow: str) -> z3.ExprRef:
    """``Round`` (interp.i_Round): f32 / f64 to a narrower float, one rounding."""
    if src == "f32":
        return round_f32(x, to, overflow)
    if src != "f64":
        raise Unsupported(f"round from {src}")
    if to == "f32" and overflow == "nonfinite":
        return z3.fpToFP(RNE, x, fp_sort("f32"))
    return round_f32(_f64_to_f32_odd(x), to, overflow)


def cast(x: z3.ExprRef, src: str, to: str, overflow: str, rounding: str,
         abstractions: set[str] | None = None) -> z3.ExprRef:
    """``Cast`` between float storage dtypes (widen exactly, round once), integers and bool;
    from bool or an 8-bit integer to any float dtype under any mode, the reference's table of
    the source's values; float -> integer with its unspecified elements as an unconstrained
    value (``float_to_int``; needs ``abstractions`` to record it); others unsupported."""
    if kir.is_float(src) and kir.is_int(to):
        if abstractions is None:
            raise Unsupported(f"cast {src} -> {to} outside a symbolic run (its unspecified "
                              f"elements are recorded in the run's abstractions)")
        return float_to_int(x, src, to, abstractions)
    if src == to and overflow == "nonfinite" and rounding == "nearest":
        return x
    if kir.is_float(src) and kir.is_float(to) and src != "f64" and to != "f64":
        w = x if src == "f32" else widen(x, src, "f32")
        return round_f32(w, to, overflow, rounding)
    if to == "bool":  # x != 0; NaN -> True (dtypes: "x -> bool: x != 0")
        if src == "bool":
            return x
        if kir.is_int(src):
            return x != 0
        v = x if is_fp(src) else widen(x, src, "f32")
        return z3.Not(z3.fpIsZero(v))
    if src == "bool" and (kir.is_int(to) or is_fp(to)):
        one, zero_ = (const(1, to), const(0, to))
        return z3.If(x, one, zero_)
    if kir.is_int(src) and kir.is_int(to):  # two's-complement wraparound
        ws, wt = width(src), width(to)
        if wt <= ws:
            return z3.Extract(wt - 1, 0, x)
        return z3.SignExt(wt - ws, x) if _signed(src) else z3.ZeroExt(wt - ws, x)
    if kir.is_int(src) and is_fp(to) and rounding == "nearest" and (
            overflow == "nonfinite" or to == "f32"):  # no integer overflows f32: saturate alike
        # one rounding from the exact integer
        conv = z3.fpSignedToFP if _signed(src) else z3.fpUnsignedToFP
        return conv(RNE, x, fp_sort(to))
    if (src == "bool" or (kir.is_int(src) and width(src) == 8)) and kir.is_float(to):
        # a source of at most 256 values: the reference's own table of their casts
        table = _small_cast_table(src, to, overflow, rounding)
        if src == "bool":
            return z3.If(x, table[1], table[0])
        return templated(("small_cast", src, to, overflow, rounding), x,
                         lambda v: _table_term(v, table))
    if kir.is_int(src) and kir.is_float(to) and to != "f32":
        # one rounding from the exact integer (D15) under any mode: round to odd into f32
        # (24 bits, at least 2 more than every narrower format's, so the second rounding is
        # the correct one in every mode; D532), then the project's transcription
        return round_f32(_int_to_f32_odd(x, src), to, overflow, rounding)
    raise Unsupported(f"cast {src} -> {to} (overflow={overflow}, rounding={rounding})")


def float_to_int(x: z3.ExprRef, src: str, to: str, abstractions: set[str]) -> z3.ExprRef:
    """Float -> integer (docs/contracts.md, "Float -> integer"): truncation toward zero where
    the source is finite and its truncation lies in the destination's range (a value in
    (-1, 0) truncates to 0, in range for unsigned destinations too); elsewhere the contract
    leaves the element *unspecified*: an unconstrained value (``choices.unspecified``) that
    ``refine.decide`` quantifies universally in a source and sets to what kernel-interp and the
    reference write (0) in a target."""
    from tilefoundry.validate.choices import unspecified

    v = x if is_fp(src) else widen(x, src, "f32")  # an 8-bit code: its exact f32 value
    w, signed = width(to), _signed(to)
    t = z3.fpRoundToIntegral(z3.RTZ(), v)
    if src != "f64":
        t = z3.fpToFP(RNE, t, z3.Float64())  # exact: every narrower float is an f64
    lo = z3.FPVal(-(2.0 ** (w - 1)) if signed else 0.0, z3.Float64())
    hi = z3.FPVal(2.0 ** (w - 1 if signed else w), z3.Float64())  # exact: w <= 64
    ok = z3.And(z3.Not(z3.fpIsNaN(v)), z3.Not(z3.fpIsInf(v)), z3.fpGEQ(t, lo), z3.fpLT(t, hi))
    conv = z3.fpToSBV if signed else z3.fpToUBV
    val = conv(z3.RTZ(), v, z3.BitVecSort(w))
    u = unspecified(("float_to_int", src, to, v), z3.BitVecSort(w), abstractions)
    return z3.If(ok, val, u)


@cache
def _small_cast_table(src: str, to: str, overflow: str, rounding: str) -> tuple:
    """``dtypes.cast`` of every value of a bool / 8-bit integer dtype to ``to`` (terms, in
    the source's bit-pattern order)."""
    from tilefoundry.semantics.dtypes import cast as ref_cast

    n = 2 if src == "bool" else 256
    vals = np.arange(n, dtype=np.uint8).view(kir.numpy_dtype(src)) if src != "bool" else \
        np.array([False, True])
    with np.errstate(all="ignore"):
        out = ref_cast(vals, to, overflow=overflow, rounding=rounding)
    return tuple(const(v, to) for v in np.asarray(out).reshape(-1))


def _table_term(x: z3.BitVecRef, table: tuple) -> z3.ExprRef:
    out = table[0]
    for c in range(1, len(table)):
        out = z3.If(x == c, table[c], out)
    return out


# ---------------------------------------------------------------------------------------------
# arithmetic (kir.BINARY_KINDS / UNARY_KINDS), per operand class
# ---------------------------------------------------------------------------------------------
_CMP_FP: dict[str, Callable] = {
    "eq": z3.fpEQ, "ne": lambda a, b: z3.Not(z3.fpEQ(a, b)), "lt": z3.fpLT, "le": z3.fpLEQ,
    "gt": z3.fpGT, "ge": z3.fpGEQ}
_CMP_S: dict[str, Callable] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
_CMP_U: dict[str, Callable] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": z3.ULT, "le": z3.ULE,
    "gt": z3.UGT, "ge": z3.UGE}

#: (kind, operand class) -> encoding; class: "fp" (f32 / f64), "s" / "u" (integers), "bool"
BINARY: dict[tuple[str, str], Callable[[Any, Any], Any]] = {
    ("add", "fp"): lambda a, b: z3.fpAdd(RNE, a, b),
    ("sub", "fp"): lambda a, b: z3.fpSub(RNE, a, b),
    ("mul", "fp"): lambda a, b: z3.fpMul(RNE, a, b),
    ("div", "fp"): lambda a, b: z3.fpDiv(RNE, a, b),
    ("min", "fp"): lambda a, b: fminmax(a, b, False),
    ("max", "fp"): lambda a, b: fminmax(a, b, True),
    **{(k, "fp"): f for k, f in _CMP_FP.items()},
    **{(k, c): f for c in ("s", "u") for k, f in (("add", lambda a, b: a + b),
                                                   ("sub", lambda a, b: a - b),
                                                   ("mul", lambda a, b: a * b))},
    ("min", "s"): lambda a, b: z3.If(a < b, a, b),
    ("max", "s"): lambda a, b: z3.If(a > b, a, b),
    ("min", "u"): lambda a, b: z3.If(z3.ULT(a, b), a, b),
    ("max", "u"): lambda a, b: z3.If(z3.UGT(a, b), a, b),
    **{(k, "s"): f for k, f in _CMP_S.items()},
    **{(k, "u"): f for k, f in _CMP_U.items()},
    ("and", "bool"): z3.And, ("or", "bool"): z3.Or, ("xor", "bool"): z3.Xor,
    ("eq", "bool"): lambda a, b: a == b, ("ne", "bool"): lambda a, b: a != b,
    ("min", "bool"): z3.And, ("max", "bool"): z3.Or,
    # numpy's bool order: False < True
    ("lt", "bool"): lambda a, b: z3.And(z3.Not(a), b),
    ("le", "bool"): lambda a, b: z3.Or(z3.Not(a), b),
    ("gt", "bool"): lambda a, b: z3.And(a, z3.Not(b)),
    ("ge", "bool"): lambda a, b: z3.Or(a, z3.Not(b)),
}

UNARY: dict[tuple[str, str], Callable[[Any], Any]] = {
    ("neg", "fp"): z3.fpNeg,
    ("abs", "fp"): z3.fpAbs,
    ("ceil", "fp"): lambda x: z3.fpRoundToIntegral(z3.RTP(), x),
    ("round", "fp"): lambda x: z3.fpRoundToIntegral(RNE, x),
    # relu keeps -0 and NaN (evaluator _f32_relu; interp's f64 branch: where(x < 0, 0, x))
    ("relu", "fp"): lambda x: z3.If(z3.fpLT(x, z3.FPVal(0.0, x.sort())), z3.FPVal(0.0, x.sort()),
                                    x),
    ("square", "fp"): lambda x: z3.fpMul(RNE, x, x),
    ("sqrt", "fp"): lambda x: z3.fpSqrt(RNE, x),
    ("neg", "s"): lambda x: -x, ("neg", "u"): lambda x: -x,
    ("abs", "s"): lambda x: z3.If(x < 0, -x, x), ("abs", "u"): lambda x: x,
    ("ceil", "s"): lambda x: x, ("ceil", "u"): lambda x: x,
    ("round", "s"): lambda x: x, ("round", "u"): lambda x: x,
    ("relu", "s"): lambda x: z3.If(x > 0, x, z3.BitVecVal(0, x.size())),
    ("relu", "u"): lambda x: x,
    ("square", "s"): lambda x: x * x, ("square", "u"): lambda x: x * x,
    ("not", "bool"): z3.Not,
}


def op_class(dt: str) -> str:
    if dt in ("f32", "f64"):
        return "fp"
    if dt == "bool":
        return "bool"
    if kir.is_int(dt):
        return "s" if _signed(dt) else "u"
    return dt  # a storage float: no arithmetic is encoded on it (the verifier rejects it too)


def binary(kind: str, dt: str) -> Callable[[Any, Any], Any]:
    fn = BINARY.get((kind, op_class(dt)))
    if fn is None:
        raise Unsupported(f"unsupported op binop.{kind} on {dt}")
    return fn


def unary(kind: str, dt: str) -> Callable[[Any], Any]:
    fn = UNARY.get((kind, op_class(dt)))
    if fn is None:
        raise Unsupported(f"unsupported op unop.{kind} on {dt}")
    return fn


def value_bits(t: z3.ExprRef, dt: str) -> tuple[int | None, bool]:
    """(bits, is_nan) of a literal term; bits None when it does not simplify to one."""
    if is_fp(dt):
        s = z3.simplify(t)
        if z3.is_true(z3.simplify(z3.fpIsNaN(s))):
            return None, True
        b = z3.simplify(z3.fpToIEEEBV(s))
        return (b.as_long() if z3.is_bv_value(b) else None), False
    s = z3.simplify(bits_of(t, dt))
    return (s.as_long() if z3.is_bv_value(s) else None), False


def math_value(name: str, arg: z3.ExprRef) -> z3.ExprRef | None:
    """The literal value of ``math.<fn>.<dt>`` at the literal ``arg``, by the kernel-IR
    interpreter's definition of ``math`` (``interp.i_Math``: the op's reference evaluator, or
    ``LIBM64`` on f64); None when ``arg`` is not a literal."""
    from tilefoundry.compiler.kir_math import LIBM64, MATH_OPS
    from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx

    _, fn, dt = name.split(".")
    b, nan = value_bits(arg, dt)
    if b is None and not nan:
        return None
    npdt = kir.numpy_dtype(dt)
    x = np.array([np.nan if nan else 0], np.float64).astype(npdt) if nan else \
        np.array([b], f"u{npdt.itemsize}").view(npdt)
    with np.errstate(all="ignore"):
        if dt == "f64":
            r = LIBM64[fn](x)
        else:
            op = MATH_OPS[fn]
            r = np.asarray(EVALUATORS[type(op)](EvalCtx(op, None, None), (x,)))
    return const(np.asarray(r).reshape(-1)[0], dt)


def math_apply(fn: str, dt: str) -> Callable[[Any], Any]:
    """``math.<fn>.<dt>`` applied (D550): at an argument that simplifies to a literal, the
    function's value there (``math_value``: the kernel-IR interpreter's ``math``, which is the
    reference op's evaluator — what both programs of a refinement mean at that point, so a
    term over constants folds to a literal instead of leaving the solver an unknown); at any
    other argument the uninterpreted application (``math_fn``)."""
    f = math_fn(fn, dt)
    name = f"math.{fn}.{dt}"

    def apply(t: Any) -> Any:
        s = z3.simplify(t)
        if z3.is_fp_value(s) or z3.is_bv_value(s):
            v = math_value(name, s)
            if v is not None:
                return v
        return f(t)

    return apply


def math_fn(fn: str, dt: str) -> z3.FuncDeclRef:
    """``Math``: an uninterpreted function per (fn, dtype) — both sides of a refinement call
    the same one, so equal arguments give equal results (the ULP contract is the renderers'
    business, not a pass's); a counterexample that leans on it is replayed concretely."""
    s = fp_sort(dt) if is_fp(dt) else z3.BitVecSort(width(dt))
    return z3.Function(f"math.{fn}.{dt}", s, s)
