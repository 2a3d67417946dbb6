"""Conformance levels: the relaxation vocabulary, declared sets, and each relaxation's widening.

The strict contracts (``compare``, ``enclosure``) are the reference and are never weakened by
default. A **relaxation** is a named, stated widening of the admitted set, in the words compiler
writers already use (LLVM fast-math flags, the Vulkan precision table, C's excess precision),
derived from a model — never a tolerance tuned until a peer passes. ``RELAXATIONS`` is the
table (printable: ``format_table``; docs/contracts.md, "Conformance levels", holds it to the
code); ``SCOPE`` says, per op class, which relaxations can apply to an op (one registry keyed by
op class, with a completeness test); ``relax_operands`` / ``relax_result`` are the widenings
the enclosing evaluator applies at each op site when a set is active (``Admit``). The diagnosis
(``oracle/diagnose.py``) searches the least sets under which a rejected output is admitted.

The models behind ``afn`` and ``wp`` (per-element budgets, textbook f32 algorithms) are in
``oracle/relax_models.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.oracle.enclosure import Enc, as_enc, as_f64, corners, from_candidates, hull
from tilefoundry.semantics.dtypes import DType, cast, dtype_of
from tilefoundry.semantics.formats import FORMATS

__all__ = [
    "NAMES",
    "RELAXATIONS",
    "SCOPE",
    "Admit",
    "Relaxation",
    "applicable",
    "format_table",
    "op_label",
    "parse_admit",
    "relax_operands",
    "relax_result",
]

RELAX_VERSION = "1"


@dataclass(frozen=True)
class Relaxation:
    name: str
    title: str
    source: str
    #: the widening, stated: what the admitted set gains under it
    model: str


RELAXATIONS: tuple[Relaxation, ...] = (
    Relaxation("nsz", "no signed zeros", "LLVM fast-math flag `nsz`",
               "the sign of a zero operand or result is insignificant: a zero result may be "
               "either zero; max / min of ±0 either; an op may read a zero operand as either"),
    Relaxation("nnan", "no NaNs", "LLVM fast-math flag `nnan`",
               "where an operand may be NaN or the result would be NaN, the result is any "
               "value (LLVM poison, frozen); max / min may drop a NaN"),
    Relaxation("ninf", "no infinities", "LLVM fast-math flag `ninf`",
               "where an operand may be ±inf or the result would be ±inf, the result is any "
               "value (LLVM poison, frozen)"),
    Relaxation("ftz", "flush subnormals", "PTX `.ftz`, x86 FTZ/DAZ, LLVM denormal-fp-math="
               "preserve-sign", "an operand or result of magnitude below 2^-126 (the f32 "
               "compute format's least normal) may be read / written as the same-signed zero"),
    Relaxation("afn", "approximate functions", "LLVM fast-math flag `afn`; the Vulkan 1.3 "
               "precision table (SPIR-V, 'Precision and Operation of SPIR-V Instructions')",
               "exp / exp2 within 3 + 2·|x| ulp, log / log2 within 3 ulp outside [0.5, 2] and "
               "2^-21 absolute inside, rsqrt 2 ulp, sqrt as 1 / rsqrt (9 ulp), division 2.5 ulp for |y| in [2^-126, "
               "2^126] (beyond: also a same-signed zero, CUDA __fdividef); sigmoid, silu, tanh, "
               "gelu(tanh) and softmax by their f32 models with those primitives "
               "(relax_models.AFN)"),
    Relaxation("arcp", "allow reciprocal", "LLVM fast-math flag `arcp`",
               "x / y may be computed as x · (1/y), each rounded in the compute format"),
    Relaxation("contract", "contraction", "LLVM fast-math flag `contract`; C FP_CONTRACT",
               "a·b + c (an add / sub whose operand is a mul) may be one fma in the compute "
               "format (f32), then rounded to the dtype"),
    Relaxation("excess", "excess precision", "C11 5.2.4.2.2 FLT_EVAL_METHOD; GCC "
               "-fexcess-precision", "the implicit rounding of a narrow-float (bf16, f16, fp8) "
               "arithmetic result to its dtype may be skipped where the value is an "
               "intermediate (the f32 value flows on): never a program output, never a value "
               "a data-movement / store op consumes, never an explicit Cast (C: casts and "
               "assignments remove excess precision)"),
    Relaxation("wp", "working-precision algorithms", "the textbook f32 formulas of torch / "
               "Triton kernels, with Higham's forward error bounds (Accuracy and Stability of "
               "Numerical Algorithms, 2nd ed., ch. 3-4)", "LayerNorm (two pass), RMSNorm, "
               "softmax, sigmoid, silu and gelu judged by the forward error bound of their "
               "textbook f32 algorithm in any summation order — bounds that scale with the "
               "row's / argument's magnitude, not the output's — including that algorithm's own "
               "intermediate overflow (Σx² past f32 max gives 0 or NaN) and underflow "
               "(relax_models.WP)"),
)
NAMES: tuple[str, ...] = tuple(r.name for r in RELAXATIONS)
BY_NAME = {r.name: r for r in RELAXATIONS}


def format_table() -> str:
    w = max(len(n) for n in NAMES) + 2
    lines = [f"relaxations (version {RELAX_VERSION})"]
    for r in RELAXATIONS:
        lines.append(f"{r.name.ljust(w)}{r.title} [{r.source}]: {r.model}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# which relaxations can apply to which op (one registry keyed by op class)
# ---------------------------------------------------------------------------------------------
def op_label(op: Any) -> str:
    kind = getattr(op, "kind", None)
    kind = getattr(kind, "value", kind)
    if type(op).__name__ == "Gelu":
        kind = getattr(op, "approximate", None)
    return type(op).__name__ + (f"({kind})" if kind is not None else "")


#: float arithmetic, read as LLVM reads an FP instruction
_ARITH = frozenset({"nsz", "nnan", "ninf", "ftz"})
SCOPE: dict[type, Callable[[Any], frozenset[str]]] = {}


def _register_scope() -> None:
    from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary, UnaryKind
    from tilefoundry.semantics.ops.nn import (
        Conv2D,
        Gelu,
        LayerNorm,
        MatMul,
        ReLU,
        RMSNorm,
        RoPE,
        Sigmoid,
        Silu,
        SoftMax,
        Tanh,
    )
    from tilefoundry.semantics.ops.shape import ShapeCompose, ShapeExtract
    from tilefoundry.semantics.ops.sharding import Local, Reshard
    from tilefoundry.semantics.ops.tensor import (
        CacheUpdate,
        Cast,
        Concat,
        Gather,
        InsertSlice,
        Rank,
        Reduce,
        Reshape,
        ShapeOf,
        Slice,
        Stack,
        TopK,
        Transpose,
        Zeros,
    )
    from tilefoundry.semantics.ops.tile_mma import Mma
    from tilefoundry.semantics.ops.tile_reduce import CustomReduce, MaskedReduce, SeededReduce
    from tilefoundry.semantics.ops.tile_scan import Scan
    from tilefoundry.semantics.ops.tile_scan_flags import MaskedScan, SegmentedScan
    from tilefoundry.semantics.ops.tile_select import Bitcast, Select
    from tilefoundry.semantics.ops.tile_sort import Sort

    afn_unary = {UnaryKind.EXP, UnaryKind.EXP2, UnaryKind.LOG, UnaryKind.LOG2,
                 UnaryKind.RSQRT, UnaryKind.SQRT}

    def binary(op) -> frozenset[str]:
        s = set(_ARITH) | {"excess"}
        if op.kind is BinaryKind.DIV:
            s |= {"afn", "arcp"}
        if op.kind in (BinaryKind.ADD, BinaryKind.SUB):
            s.add("contract")
        return frozenset(s)

    def unary(op) -> frozenset[str]:
        return frozenset(_ARITH | {"excess"} | ({"afn"} if op.kind in afn_unary else set()))

    def fixed(*names: str) -> Callable[[Any], frozenset[str]]:
        s = frozenset(names)
        return lambda op: s

    arith = tuple(_ARITH)
    for c in (MatMul, Conv2D, Mma, Reduce, SeededReduce, MaskedReduce, CustomReduce, Scan,
              MaskedScan, SegmentedScan, ReLU):
        SCOPE[c] = fixed(*arith, "excess")
    SCOPE[RoPE] = fixed(*arith, "excess", "wp")
    SCOPE[Binary] = binary
    SCOPE[Unary] = unary
    SCOPE[Cast] = fixed(*arith)  # an explicit cast always rounds (C's rule), so no `excess`
    SCOPE[Tanh] = fixed(*arith, "excess", "afn")
    SCOPE[Sigmoid] = SCOPE[Silu] = fixed(*arith, "excess", "afn", "wp")
    SCOPE[SoftMax] = fixed(*arith, "excess", "afn", "wp")
    SCOPE[RMSNorm] = SCOPE[LayerNorm] = fixed(*arith, "excess", "wp")
    SCOPE[Gelu] = lambda op: frozenset(_ARITH | {"excess", "wp"} | (
        {"afn"} if op.approximate == "tanh" else set()))
    for c in (Bitcast, CacheUpdate, Concat, Gather, InsertSlice, Local, Rank, Reshape, Reshard,
              ShapeCompose, ShapeExtract, ShapeOf, Slice, Sort, Stack, TopK, Transpose, Zeros,
              Select):
        SCOPE[c] = fixed()  # data movement, selection, shapes: nothing rounds


_register_scope()


def applicable(op: Any) -> frozenset[str]:
    fn = SCOPE.get(type(op))
    return fn(op) if fn is not None else frozenset()


# ---------------------------------------------------------------------------------------------
# a declared set
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Admit:
    """A declared relaxation set: per name, the op labels it is scoped to (``None``: every op
    it can apply to). ``Admit.of("nsz", "afn")`` is the unscoped set."""

    scopes: tuple[tuple[str, frozenset[str] | None], ...] = ()

    @staticmethod
    def of(*names: str) -> Admit:
        return Admit(tuple((n, None) for n in sorted(set(names), key=NAMES.index)))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.scopes)

    def __bool__(self) -> bool:
        return bool(self.scopes)

    def at(self, op: Any) -> frozenset[str]:
        """The relaxations active at ``op``."""
        can = applicable(op)
        label = op_label(op)
        cls = type(op).__name__
        return frozenset(n for n, ops in self.scopes
                         if n in can and (ops is None or label in ops or cls in ops))

    def spelled(self) -> str:
        return ",".join(n if ops is None else ",".join(f"{n}@{o}" for o in sorted(ops))
                        for n, ops in self.scopes)

    def merged(self, other: Admit) -> Admit:
        out: dict[str, frozenset[str] | None] = dict(self.scopes)
        for n, ops in other.scopes:
            if n in out:
                cur = out[n]
                out[n] = None if cur is None or ops is None else cur | ops
            else:
                out[n] = ops
        return Admit(tuple(sorted(out.items(), key=lambda kv: NAMES.index(kv[0]))))


def _op_classes() -> dict[str, type]:
    return {c.__name__: c for c in SCOPE}


def parse_admit(spec: str | Iterable[str], *, origin: str = "--admit") -> Admit:
    """``"nsz,afn"`` or ``["nsz", "afn@Silu"]`` -> ``Admit``. An unknown name is an
    ``InvalidArgumentError`` naming the valid ones; ``name@Op`` where the relaxation cannot
    apply to that op (or the op does not exist) is one naming both."""
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
    scopes: dict[str, frozenset[str] | None] = {}
    classes = _op_classes()
    for item in items:
        if not isinstance(item, str) or not item:
            raise InvalidArgumentError(f"{origin}: an empty relaxation name; valid: "
                                       f"{', '.join(NAMES)}")
        name, _, op = item.partition("@")
        if name not in BY_NAME:
            raise InvalidArgumentError(f"{origin}: unknown relaxation {name!r}; valid: "
                                       f"{', '.join(NAMES)}")
        if not op:
            scopes[name] = None
            continue
        cls_name, _, kind = op.partition("(")
        cls = classes.get(cls_name)
        if cls is None:
            raise InvalidArgumentError(f"{origin}: {item!r} names no op class {cls_name!r}; "
                                       f"write name@Op with Op one of "
                                       f"{', '.join(sorted(classes))}")
        can = _class_scope(cls, kind.rstrip(")") or None)
        if name not in can:
            raise InvalidArgumentError(
                f"{origin}: relaxation {name!r} cannot apply to {op} (it applies to "
                f"{_where_applies(name)}); {op} takes {', '.join(sorted(can)) or 'none'}")
        cur = scopes.get(name, frozenset())
        scopes[name] = None if cur is None else cur | {op}
    return Admit(tuple(sorted(scopes.items(), key=lambda kv: NAMES.index(kv[0]))))


def _class_scope(cls: type, kind: str | None) -> frozenset[str]:
    """The union of what ``cls`` can take over its kinds (or for the one ``kind`` named)."""
    from types import SimpleNamespace

    from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary, UnaryKind
    from tilefoundry.semantics.ops.nn import Gelu

    kinds: dict[type, list[Any]] = {Binary: list(BinaryKind), Unary: list(UnaryKind),
                                    Gelu: ["none", "tanh"]}
    fn = SCOPE[cls]
    out: set[str] = set()
    for k in kinds.get(cls, [None]):
        if kind is None or k is None or getattr(k, "value", k) == kind:
            out |= fn(SimpleNamespace(kind=k, approximate=k))
    return frozenset(out)


def _where_applies(name: str) -> str:
    ops = []
    for cls in SCOPE:
        if name in _class_scope(cls, None):
            ops.append(cls.__name__)
    return ", ".join(sorted(ops)) or "no op"


# ---------------------------------------------------------------------------------------------
# the widenings at one op site
# ---------------------------------------------------------------------------------------------
TINY = 2.0 ** -126  # f32's least normal: the compute format's flush threshold


def _has_zero(dt: DType) -> bool:
    return dt.is_float and FORMATS[dt].has_sign


def _zero(dt: DType, neg: bool) -> np.ndarray:
    return cast(np.asarray(-0.0 if neg else 0.0, np.float32), dt)


def flush(e: Enc) -> Enc | None:
    """ftz on one enclosure: where the box reaches below 2^-126 in magnitude on a side, that
    side extends to the same-signed zero. None when nothing changes."""
    dt = e.dtype
    if not _has_zero(dt):
        return None
    lo, hi = as_f64(e.lo), as_f64(e.hi)
    up = e.real & (lo > 0) & (lo < TINY)
    dn = e.real & (hi < 0) & (hi > -TINY)
    if not (up.any() or dn.any()):
        return None
    out = Enc(np.where(up, _zero(dt, False), e.lo), np.where(dn, _zero(dt, True), e.hi),
              e.nan, e.real, e.cause or "ftz", e.nan_bits, dense=e.dense)
    if e.cands is not None:  # the finite set gains the flushed zero
        z = np.where(up | dn, _zero(dt, False), e.cands[0])
        out.cands = np.concatenate([e.cands, z[None]])
    return out


def signless_zero(e: Enc) -> Enc | None:
    """nsz on one enclosure: a box reaching 0 reaches both zeros (lo -0, hi +0)."""
    dt = e.dtype
    if not _has_zero(dt):
        return None
    lo, hi = as_f64(e.lo), as_f64(e.hi)
    at0 = e.real & (lo <= 0) & (hi >= 0)
    if not at0.any():
        return None
    nlo = np.where(at0 & (lo == 0), _zero(dt, True), e.lo)
    nhi = np.where(at0 & (hi == 0), _zero(dt, False), e.hi)
    # a finite set compares values (-0 == +0): it stands as it is
    return Enc(nlo, nhi, e.nan, e.real, e.cause or "nsz", e.nan_bits, e.cands, e.dense)


def _zero_sign_matters(op: Any) -> bool:
    """Ops whose non-zero result depends on a zero operand's sign (x / ±0, rsqrt(±0)); for
    every other op a zero operand's sign reaches only a zero result, which nsz frees there."""
    from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary, UnaryKind

    return (isinstance(op, Binary) and op.kind is BinaryKind.DIV) or (
        isinstance(op, Unary) and op.kind is UnaryKind.RSQRT)


def relax_operands(encs: list, args: tuple, active: frozenset[str], op: Any = None) -> list:
    """ftz / nsz on the operands an op reads: a new list (same entries where nothing
    changes)."""
    out = list(encs)
    if "nsz" in active and not _zero_sign_matters(op):
        active = active - {"nsz"}
    if not ({"ftz", "nsz"} & active):
        return out
    for i, (e, a) in enumerate(zip(encs, args, strict=True)):
        if isinstance(e, str) or not isinstance(a, np.ndarray) or a.dtype == object:
            continue
        try:
            if not dtype_of(a).is_float:
                continue
        except Exception:
            continue
        cur = as_enc(e, a)
        changed = False
        for name, fn in (("ftz", flush), ("nsz", signless_zero)):
            if name in active:
                w = fn(cur)
                if w is not None:
                    cur, changed = w, True
        if changed:
            out[i] = cur
    return out


def _poison(e: Enc, where: np.ndarray, cause: str) -> Enc:
    if not where.any():
        return e
    f = Enc.full(e.dtype, e.shape, cause)
    return Enc(np.where(where, f.lo, e.lo), np.where(where, f.hi, e.hi), e.nan | where,
               e.real | where, e.cause or cause)


def _may(enc: Any, arg: Any, what: str, shape: tuple) -> np.ndarray:
    """Per result element (broadcast): may this operand be NaN / ±inf?"""
    if not isinstance(arg, np.ndarray) or arg.dtype == object:
        return np.zeros(shape, bool)
    try:
        if not dtype_of(arg).is_float:
            return np.zeros(shape, bool)
    except Exception:
        return np.zeros(shape, bool)
    e = as_enc(enc if isinstance(enc, Enc) else None, arg)
    if what == "nan":
        m = e.nan
    else:
        m = e.real & (np.isinf(as_f64(e.lo)) | np.isinf(as_f64(e.hi)))
    if m.shape == shape:
        return m
    try:
        return np.broadcast_to(m, shape)
    except ValueError:  # a reduction / contraction: a NaN / inf operand reaches its result
        return np.zeros(shape, bool)  # element as a NaN / inf result, judged there


def relax_result(site: Any, e: Enc | None, active: frozenset[str], *, intermediate: bool,
                 operand_values: Callable[[Any], Any] | None = None,
                 operand_encs: list | None = None) -> Enc | None:
    """The result enclosure of one op site under the active relaxations (``e``: the strict
    one, None for exact). Only float array results are widened."""
    from tilefoundry.oracle import relax_models as M

    v = site.value
    if isinstance(v, tuple) and "wp" in active and type(site.op).__name__ == "RoPE":
        return M.wp_rope(site, e)
    if not isinstance(v, np.ndarray) or v.dtype == object:
        return e
    dt = dtype_of(v)
    encs = operand_encs if operand_encs is not None else site.encs
    if dt.is_float:
        if "afn" in active:
            e = M.afn(site, e)
        if "arcp" in active:
            e = M.arcp(site, e)
        if "contract" in active and operand_values is not None:
            e = M.contract(site, e, operand_values)
        if "wp" in active:
            e = M.wp(site, e, afn="afn" in active)
        if "ftz" in active and e is not None:
            e = flush(e) or e
        elif "ftz" in active:
            e = flush(Enc.point(v)) or e
        excess = "excess" in active and intermediate and dt in NARROW
        if excess:
            e = excess_box(site, e, v)
            e.cause = e.cause or "excess"
        if "nsz" in active:
            z = signless_zero(as_enc(e, v))
            if z is not None:  # applied where the result is a zero, even where the strict
                # enclosure reached -0 already (a hull looser than an exact contract)
                z.applied = (as_f64(v) == 0) | getattr(e, "applied", False)
                e = z
    for what, name in (("nan", "nnan"), ("inf", "ninf")):
        if name not in active:
            continue
        m = np.zeros(v.shape, bool)
        for enc, a in zip(encs, site.args, strict=False):
            m = m | _may(enc, a, what, v.shape)
        if dt.is_float and FORMATS[dt].has_inf:
            # (E4M3FN / E8M0 encode overflow as NaN: the op's overflow mode governs it there)
            r = as_enc(e, v)
            m = m | (r.nan if what == "nan" else
                     r.real & (np.isinf(as_f64(r.lo)) | np.isinf(as_f64(r.hi))))
        if m.any():
            prev = getattr(e, "applied", False)
            e = _poison(as_enc(e, v), m, f"{name}: a {what} operand or result")
            # where it applies, even over an enclosure that admitted everything already
            e.applied = m | prev
    if dt.is_float and excess:
        e.dense, e.cands = True, None  # f32 values flow on: no finite set of bf16 values
    return e


NARROW = frozenset({DType.BF16, DType.F16, DType.FP8E4M3, DType.FP8E5M2})


def _directed(x32: np.ndarray, dt: DType, up: bool) -> np.ndarray:
    """f32 values rounded down (``up`` False) / up onto ``dt``'s grid."""
    from tilefoundry.oracle.enclosure import from_ordered, ordered

    r = cast(np.asarray(x32, np.float32), dt)
    rw = as_f64(r)
    xw = np.asarray(x32, np.float64)
    step = (rw < xw) if up else (rw > xw)
    moved = from_ordered(ordered(r) + (1 if up else -1), dt)
    return np.where(step & np.isfinite(xw), moved, r)


def excess_box(site: Any, e: Enc | None, v: np.ndarray) -> Enc:
    """``excess`` at one narrow intermediate: its admitted set grows by the unrounded f32
    value. For an exact elementwise op that value is the op's own kernel on the operands'
    boxes widened to f32 (negation, abs, max stay on the grid: no widening), rounded outward
    onto the dtype's grid; for any other op one ulp of the dtype either way (every f32 value
    that rounds to a member lies within it: ``relax.excess.one_ulp`` proves it)."""
    from tilefoundry.semantics.ops.math import Binary, Unary

    dt = dtype_of(v)
    base = as_enc(e, v)
    exact = all(c.kind == "exact" for c in site.contracts)
    if not exact or not isinstance(site.op, Binary | Unary) or \
            any(isinstance(x, Enc) and x.nan_bits is not None for x in site.encs):
        return base.widen_ulps(1)
    boxes = []
    for x, a in zip(site.encs, site.args, strict=True):
        b = as_enc(x if isinstance(x, Enc) else None, np.asarray(a))
        if b.dtype in NARROW:
            b = Enc(cast(b.lo, DType.F32), cast(b.hi, DType.F32), b.nan, b.real, b.cause)
        boxes.append(b)
    with np.errstate(all="ignore"):
        cands, nan_in = corners(site.impl, boxes)
        if any(np.asarray(c).dtype != np.float32 for c in cands):
            return base.widen_ulps(1)
        w = from_candidates(cands, nan_in, DType.F32, "excess", "excess")
        lo, hi = _directed(w.lo, dt, False), _directed(w.hi, dt, True)
    box = Enc(np.where(w.real, lo, base.lo), np.where(w.real, hi, base.hi), w.nan, w.real,
              "excess")
    out = hull(base, box)
    # an f32 value past a format with no infinity (E4M3FN: 500 rounds to NaN) has no box on
    # its grid: that element admits everything downstream
    past = w.real & (np.isnan(as_f64(lo)) | np.isnan(as_f64(hi)))
    return _poison(out, np.broadcast_to(past, out.shape), "excess past the format's range")


def widen_steps(e: Enc, k: np.ndarray) -> Enc:
    """``e`` widened by ``k`` steps per element on the dtype's ordered line (k >= 0)."""
    from tilefoundry.oracle.enclosure import from_ordered, ordered

    k = np.broadcast_to(np.ceil(np.maximum(np.asarray(k, np.float64), 0)), e.shape)
    k = np.minimum(k, 2.0 ** 40).astype(np.int64)
    if not e.dtype.is_float or not k.any():
        return e
    lo = from_ordered(ordered(e.lo) - k, e.dtype)
    hi = from_ordered(ordered(e.hi) + k, e.dtype)
    return Enc(np.where(e.real, lo, e.lo), np.where(e.real, hi, e.hi), e.nan, e.real, e.cause)


def hull_alt(e: Enc | None, v: np.ndarray, fn: Callable[..., np.ndarray], encs: list,
             args: tuple, cause: str) -> Enc:
    """``e`` (or the point ``v``) hulled with ``fn`` over the operands' box corners."""
    boxes = [as_enc(x if isinstance(x, Enc) else None, np.asarray(a))
             for x, a in zip(encs, args, strict=True)]
    if all(x is None for x in encs):  # point operands: the alternative's own value
        with np.errstate(all="ignore"):
            alt = Enc.point(np.broadcast_to(np.asarray(fn(*args)), v.shape))
    else:
        cands, nan_in = corners(fn, boxes)
        alt = from_candidates(cands, nan_in, dtype_of(v), cause, cause)
    out = hull(as_enc(e, v), alt)
    out.cause = out.cause or cause
    return out


def intermediates(fn: Any) -> dict[int, bool]:
    """Per Call of ``fn``'s body (id): may ``excess`` skip its rounding — is it no output of
    ``fn`` and is every consumer an op ``excess`` applies to, or a Cast (which reads the
    unrounded value and rounds itself)? A data-movement, store, loop or call consumer needs
    the rounded value; so does everything inside a loop body (not walked here: no excess)."""
    from tilefoundry.semantics.ir import Call, Function, Tuple, operands, reachable

    body = getattr(fn, "body", None)
    if body is None:
        return {}
    kids = operands  # a loop's init args feed it (a consumer that needs them rounded)
    outs = {id(f) for f in (body.fields if isinstance(body, Tuple) else (body,))}
    ok: dict[int, bool] = {}
    nodes = list(reachable(body, kids))
    for n in nodes:
        if isinstance(n, Call) and not isinstance(n.op, Function):
            ok.setdefault(id(n), id(n) not in outs)
    for n in nodes:
        # a Cast consumer reads the unrounded value (C: the cast's own rounding stays)
        takes = isinstance(n, Call) and not isinstance(n.op, Function) and (
            "excess" in applicable(n.op) or type(n.op).__name__ == "Cast")
        for k in kids(n):
            if not takes:
                ok[id(k)] = False
    return ok
