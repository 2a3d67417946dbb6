"""The oracle's contracts and comparison: a structured verdict for a candidate's outputs.

``check(module, entry, inputs, observed)`` evaluates the reference (``evaluate(..., report=True)``)
and judges every output under the contract the semantics defines for it
(ARCHITECTURE.md, Numeric contracts; ``CONTRACTS_VERSION``):

* **exact** — bit-identical; every NaN equals every NaN (payload and sign are no contract,
  D14); ``-0`` and ``+0`` are different values. Integers and bools compare by value. An output
  made only of copies (``_copied``: ``COPIES_BITS`` ops, parameters, constants) is judged
  **exact bits** — NaN payload and sign too (D298).
* **ulp** — within ``ulp`` units in the last place of the result dtype of the reference (the
  ULP budget table, ``semantics/ulp.py``); the distance is measured on the format's ordered
  integer line (``-0`` and ``+0`` are the same point there; ``+inf`` is one step past max
  finite); NaN and non-NaN never match.
* **admitted_set** — a tree-policy Reduce (``reductions.admits`` on the op's own input), a
  MatMul (``matmul.matmul_admits``: the K-order reference with or without FMA, and with
  ``allow_reassociation`` any order within the rigorous bound), a Reshard completing a
  Partial(sum) (``admits`` over the devices' pieces), an ordered-tree float Scan(add)
  (``reductions.scan_admits``: each prefix an order-preserving regrouping of its own leaves, the
  seed once and first; a permuted leaf order is not admitted). A tile-family Mma
  (``matmul.mma_admits``, the accumulator one more leaf of the sum).
* **unspecified** — elements the contract leaves open (float → int out of range) are accepted
  whatever they hold; the rest compare exactly.

An output is judged by the contract of the op that produces it when every op upstream of that op
is exact. An output downstream of an inexact op (a transcendental feeding an add, a tree
reduction feeding a cast, ...) is judged by its sound enclosure (``oracle/enclosure.py``): the
set of every result an execution the contracts admit could produce, never a tolerance. What no
enclosure bounds (an element admitting every value, a sharded value downstream of an inexact
op) is ``UNJUDGED`` — never a PASS.

A candidate that returns the wrong number of outputs, a wrong shape or dtype, a non-array, or
raises gets a verdict with status ``ERROR`` saying so — the oracle itself never crashes on a
candidate's output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tilefoundry.semantics.dtypes import to_bits
from tilefoundry.semantics.evaluator.mesh import PerDevice, Sharded, unshard
from tilefoundry.semantics.formats import FORMATS, DType, dtype_of
from tilefoundry.semantics.ir import (
    Call,
    Expr,
    GridRegionExpr,
    Module,
    Tuple,
    TupleGetItem,
    reachable,
)

__all__ = [
    "CONTRACTS_VERSION", "OutputVerdict", "Verdict", "check", "check_candidate",
    "compare_exact", "compare_ulp", "ordered", "ulp_distance",
]

CONTRACTS_VERSION = "1"
PASS, FAIL, ERROR = "PASS", "FAIL", "ERROR"
#: an output (or some of its elements) the oracle could not judge: its enclosure admits every
#: value, or no contract decides it. Never a PASS: a verdict with an UNJUDGED output is UNJUDGED.
UNJUDGED = "UNJUDGED"
NOT_CHECKED = UNJUDGED  # the former name (those outputs used to count as PASS)


# ---------------------------------------------------------------------------------------------
# element-level helpers
# ---------------------------------------------------------------------------------------------
def _c(x: np.ndarray) -> np.ndarray:
    """C-contiguous without turning a 0-d array into shape (1,) (np.ascontiguousarray does)."""
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.array(x, order="C")


def _is_nan(x: np.ndarray) -> np.ndarray:
    dt = dtype_of(x)
    if not dt.is_float:
        return np.zeros(x.shape, bool)
    with np.errstate(all="ignore"):
        return np.isnan(x.astype(np.float32))


def ordered(x: np.ndarray) -> np.ndarray:
    """The float patterns of ``x`` on the format's ordered integer line (int64): adjacent
    representable values differ by 1, ``-0`` and ``+0`` are both 0, ``±inf`` sit one step past
    ±max finite. NaN patterns map somewhere meaningless: mask them with ``_is_nan``."""
    dt = dtype_of(x)
    info = FORMATS[dt]
    bits = to_bits(_c(x)).astype(np.int64)
    if not info.has_sign:
        return bits
    sign = np.int64(1) << (info.bits - 1)
    mag = bits & (sign - 1)
    return np.where(bits & sign, -mag, mag)


def ulp_distance(expected: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Per element: steps between the two values on the ordered line; 0 when both are NaN,
    ``inf`` when exactly one is NaN."""
    e, o = np.asarray(expected), np.asarray(observed)
    d = np.abs(ordered(e) - ordered(o)).astype(np.float64)
    ne, no = _is_nan(e), _is_nan(o)
    return np.where(ne & no, 0.0, np.where(ne | no, np.inf, d))


def compare_exact(expected: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Per-element acceptance under the exact contract (NaN class; signed zeros significant)."""
    e, o = np.asarray(expected), np.asarray(observed)
    dt = dtype_of(e)
    if not dt.is_float:
        return np.asarray(e == o)
    same = to_bits(_c(e)) == to_bits(_c(o))
    return same | (_is_nan(e) & _is_nan(o))


def compare_bits(expected: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Per-element acceptance of a copied value: the same encoding, NaN payload and sign
    included (D298: load / store copying preserves the encoded value)."""
    e, o = np.asarray(expected), np.asarray(observed)
    if not dtype_of(e).is_float:
        return np.asarray(e == o)
    return to_bits(_c(e)) == to_bits(_c(o))


def _multiset_key(x: np.ndarray) -> np.ndarray:
    """An injective sort key on the exact contract's classes: the bit pattern, every NaN one
    key (sorting two arrays by it and comparing exactly tests multiset equality)."""
    x = np.asarray(x)
    dt = dtype_of(x)
    if not dt.is_float:
        return x.astype(np.int64) if dt is not DType.BOOL else x.astype(np.int8)
    return np.where(_is_nan(x), np.uint64(2**64 - 1), to_bits(_c(x)).astype(np.uint64))


def _sorted_along(x: np.ndarray, by: np.ndarray, axis: int) -> np.ndarray:
    order = np.argsort(by, axis=axis, kind="stable")
    return np.take_along_axis(np.asarray(x), order, axis=axis)


def compare_permutation(expected: np.ndarray, observed: np.ndarray, axis: int) -> np.ndarray:
    """Per-fiber acceptance under the permutation contract: along ``axis`` the observed fiber
    holds the expected elements in some order (exact classes). The mask is per element of the
    fiber, broadcast: a fiber that is no permutation fails as a whole."""
    e, o = np.asarray(expected), np.asarray(observed)
    if e.ndim == 0 or e.shape[axis] == 0:
        return compare_exact(e, o)
    same = compare_exact(_sorted_along(e, _multiset_key(e), axis),
                         _sorted_along(o, _multiset_key(o), axis))
    return np.broadcast_to(np.all(same, axis=axis, keepdims=True), e.shape)


def compare_ulp(expected: np.ndarray, observed: np.ndarray, budget: float) -> np.ndarray:
    return ulp_distance(expected, observed) <= budget


def _hex(x: np.ndarray, idx: tuple) -> str:
    dt = dtype_of(x)
    width = max(1, FORMATS[dt].bits // 4)
    v = int(to_bits(_c(x))[idx]) if dt is not DType.BOOL else int(x[idx])
    return f"0x{v:0{width}x}"


def _dec(x: np.ndarray, idx: tuple) -> str:
    v = x[idx]
    dt = dtype_of(x)
    if dt.is_float:
        with np.errstate(invalid="ignore"):  # a signalling NaN quiets on widening: still NaN
            f = float(np.asarray(v).astype(np.float64))
        return repr(f) if not (f == 0 and np.signbit(f)) else "-0.0"
    return str(v.item() if hasattr(v, "item") else v)


# ---------------------------------------------------------------------------------------------
# verdicts
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OutputVerdict:
    """The judgement of one output. ``worst_index`` is the element with the largest ULP
    distance among the rejected ones (the first rejected one for non-float outputs)."""

    output: int
    status: str
    contract: str
    mismatches: int = 0
    total: int = 0
    worst_index: tuple | None = None
    expected_hex: str | None = None
    observed_hex: str | None = None
    expected: str | None = None
    observed: str | None = None
    ulp_distance: float | None = None
    detail: str = ""
    unjudged: int = 0  # elements not judged (UNJUDGED outputs)
    #: the distinct classes of the rejected elements, most frequent first (``failure_classes``)
    classes: tuple = ()
    #: per element, accepted by the strict contract (a bool array; FAIL outputs; not reported)
    ok: Any = field(default=None, repr=False, compare=False)
    #: conformance levels (``oracle/diagnose.py``): the least relaxation sets under which the
    #: rejected elements are admitted, per element class (None: not diagnosed)
    diagnosis: Any = field(default=None, compare=False)
    #: at the worst element of an exact / ulp FAIL: the error |observed - expected| and the
    #: interval the contract admits there, as text ("6e-08", "[a, b]"); None elsewhere
    error: str | None = None
    admitted: str | None = None

    def line(self) -> str:
        s = f"output {self.output}: {self.status} under {self.contract}"
        if self.status == FAIL:
            s += (f": {self.mismatches}/{self.total} elements rejected; worst at index "
                  f"{list(self.worst_index or ())}: expected {self.expected} "
                  f"({self.expected_hex}), observed {self.observed} ({self.observed_hex})")
            if self.ulp_distance is not None:
                s += f", {self.ulp_distance:g} ulp apart"
            if self.admitted is not None:
                s += (f" (error {self.error}, " if self.error else " (") + \
                    f"admitted {self.admitted})"
        if self.status == UNJUDGED and not self.detail:
            s += f": {self.unjudged} of {self.total} element(s) unjudged"
        if self.detail:
            s += f" — {self.detail}"
        return s


@dataclass(frozen=True)
class Verdict:
    status: str  # PASS / FAIL / ERROR
    outputs: tuple = ()
    message: str = ""
    contracts_version: str = CONTRACTS_VERSION
    reference: Any = field(default=None, repr=False, compare=False)
    #: conformance levels for the whole case (``oracle/diagnose.py``; None: not diagnosed)
    diagnosis: Any = field(default=None, compare=False)

    def __bool__(self) -> bool:
        return self.status == PASS

    @property
    def mismatches(self) -> int:
        return sum(o.mismatches for o in self.outputs)

    def summary(self) -> str:
        head = f"{self.status}" + (f": {self.message}" if self.message else "")
        return "\n".join([head, *(f"  {o.line()}" for o in self.outputs)])


#: value kinds of a float element, for the failing element classes
_KINDS = ("NaN", "+inf", "-inf", "+0", "-0", "subnormal", "normal")
_ULP_BUCKETS = ((1, "1 ulp"), (15, "2-15 ulp"), (255, "16-255 ulp"), (float("inf"), ">255 ulp"))
MAX_CLASSES = 12


def _float_kinds(x: np.ndarray) -> np.ndarray:
    """Per element, an index into ``_KINDS`` (vectorized)."""
    from tilefoundry.semantics.formats import FORMATS

    with np.errstate(invalid="ignore"):  # a signalling NaN quiets on widening: still NaN
        f = np.asarray(x).astype(np.float64)
    tiny = float(FORMATS[dtype_of(x)].min_normal)
    k = np.full(f.shape, 6, np.int64)
    k[np.abs(f) < tiny] = 5
    k[(f == 0) & ~np.signbit(f)] = 3
    k[(f == 0) & np.signbit(f)] = 4
    k[np.isposinf(f)] = 1
    k[np.isneginf(f)] = 2
    k[np.isnan(f)] = 0
    return k


def failure_classes(ok: np.ndarray, e: np.ndarray, o: np.ndarray,
                    limit: int = MAX_CLASSES) -> tuple:
    """The distinct classes of the rejected elements (``~ok``): for floats the value kind
    expected -> observed (NaN, ±inf, ±0, subnormal, normal) and, between finite values, the
    ULP distance bucket; for integers and bool the sign of observed - expected. Each class is
    ``(name, count, first index, expected hex, observed hex, expected, observed)``, most
    frequent first (ties by first index), at most ``limit``. An exhaustive case with several
    bugs shows each of them, not only the worst element."""
    bad = ~np.asarray(ok, bool)
    if not bad.any():
        return ()
    code, name = class_codes(e, o)
    flat_code = code[bad]
    where = np.argwhere(bad) if bad.ndim else np.zeros((1, 0), np.int64)
    uniq, first, counts = np.unique(flat_code, return_index=True, return_counts=True)
    order = sorted(range(len(uniq)), key=lambda j: (-int(counts[j]), int(first[j])))
    out = []
    for j in order[:limit]:
        idx = tuple(int(v) for v in where[first[j]])
        out.append((name(int(uniq[j])), int(counts[j]), idx, _hex(e, idx), _hex(o, idx),
                    _dec(e, idx), _dec(o, idx)))
    return tuple(out)


def class_codes(e: np.ndarray, o: np.ndarray) -> tuple[np.ndarray, Callable[[int], str]]:
    """Per element, the code of its class (``failure_classes``) and the code -> name map."""
    dt = dtype_of(e)
    if dt.is_float:
        ke, ko = _float_kinds(e), _float_kinds(o)
        finite = (ke >= 3) & (ko >= 3) & ~((ke <= 4) & (ko <= 4))  # a distance to show
        d = np.where(finite, ulp_distance(e, o), 0.0)
        bucket = np.zeros(d.shape, np.int64)
        for j, (hi, _) in enumerate(_ULP_BUCKETS[:-1]):
            bucket[(d > hi)] = j + 1
        code = (ke * 7 + ko) * 8 + np.where(finite, bucket + 1, 0)

        def name(c: int) -> str:
            b = c % 8
            k = c // 8
            s = f"{_KINDS[k // 7]} -> {_KINDS[k % 7]}"
            return s + (f" ({_ULP_BUCKETS[b - 1][1]})" if b else "")
    else:
        ev = np.asarray(e).astype(np.int64)
        ov = np.asarray(o).astype(np.int64)
        code = np.sign(ov - ev) + 1

        def name(c: int) -> str:
            return ("observed < expected", "equal bits, rejected", "observed > expected")[c]
    return np.asarray(code), name


def _from_ordered(v: int, dt: DType) -> str | None:
    """The value at position ``v`` of the format's ordered line (``ordered``'s inverse), as
    the shortest text that reads back to it in the format; None past the line's ends (beyond
    ±inf or max finite: a NaN pattern)."""
    from tilefoundry.semantics.dtypes import from_bits

    info = FORMATS[dt]
    if info.has_sign:
        if abs(v) >= 1 << (info.bits - 1):
            return None
        bits = v if v >= 0 else (1 << (info.bits - 1)) | -v
    elif not 0 <= (bits := v) < 1 << info.bits:
        return None
    x = np.asarray(from_bits(np.asarray([bits], np.int64), dt))[0]
    with np.errstate(invalid="ignore"):
        if np.isnan(float(np.asarray(x).astype(np.float64))):
            return None
    return str(x)


def _interval(e: np.ndarray, o: np.ndarray, idx: tuple, budget: float) -> tuple[str, str]:
    """(error |observed - expected|, admitted interval) at ``idx`` under a budget of ``budget``
    ulp (0: exact, the reference itself): the reference ± budget steps on the format's ordered
    line, stopping at its ends."""
    dt = dtype_of(e)
    if not dt.is_float:
        ei, oi = int(np.asarray(e[idx])), int(np.asarray(o[idx]))
        return f"{abs(oi - ei)}", f"[{ei}, {ei}]"
    with np.errstate(invalid="ignore", over="ignore"):
        ef = float(np.asarray(e[idx]).astype(np.float64))
        of = float(np.asarray(o[idx]).astype(np.float64))
    err = f"{abs(of - ef):.2g}" if np.isfinite(ef) and np.isfinite(of) else ""
    if not budget or not np.isfinite(ef):
        return err, f"[{_dec(e, idx)}, {_dec(e, idx)}]"
    k, b = int(ordered(np.asarray(e[idx]).reshape(1))[0]), int(budget)
    ends = []
    for step in (-1, 1):
        j = k + step * b
        while (v := _from_ordered(j, dt)) is None and j != k:  # clip at ±inf / max finite
            j -= step
        ends.append(v if v is not None else _dec(e, idx))
    return err, f"[{ends[0]}, {ends[1]}]"


def _judge(i: int, contract: str, ok: np.ndarray, e: np.ndarray, o: np.ndarray,
           detail: str = "", budget: float | None = None) -> OutputVerdict:
    ok = np.asarray(ok, bool)
    ok = ok.reshape(e.shape) if ok.size == e.size else np.broadcast_to(ok, e.shape)
    total = int(ok.size)
    bad = int((~ok).sum())
    if not bad:
        return OutputVerdict(i, PASS, contract, 0, total, detail=detail)
    dist = None
    if dtype_of(e).is_float:
        d = np.where(ok, -1.0, ulp_distance(e, o))
        worst = tuple(int(j) for j in np.unravel_index(int(np.argmax(d)), d.shape)) \
            if d.ndim else ()
        dist = float(d[worst]) if d.ndim else float(d)
    else:
        worst = tuple(int(j) for j in np.argwhere(~ok)[0]) if ok.ndim else ()
    try:
        classes = failure_classes(ok, e, o)
    except Exception:  # a format the classifier cannot read: the worst element still stands
        classes = ()
    err = adm = None
    if budget is not None:
        try:
            err, adm = _interval(e, o, worst, budget)
        except Exception:  # a format the interval cannot be read in: the line stays as it was
            err = adm = None
    return OutputVerdict(i, FAIL, contract, bad, total, worst, _hex(e, worst), _hex(o, worst),
                         _dec(e, worst), _dec(o, worst), dist, detail, classes=classes, ok=ok,
                         error=err, admitted=adm)


# ---------------------------------------------------------------------------------------------
# which contract applies to which output
# ---------------------------------------------------------------------------------------------
def _children(e: Expr) -> list[Expr]:
    if isinstance(e, Call):
        return list(e.args)
    if isinstance(e, Tuple):
        return list(e.fields)
    if isinstance(e, TupleGetItem):
        return [e.tuple_value]
    if isinstance(e, GridRegionExpr):
        return [*e.init_args, *e.yield_values, e.body]
    return []


def _upstream_children(n: Expr) -> list[Expr]:
    kids = _children(n)
    if isinstance(n, Call) and getattr(n.op, "body", None) is not None:
        kids.append(n.op.body)  # a called function's body (calls elaborate structurally)
    return kids


def _upstream(root: Expr) -> list[Expr]:
    return list(reachable(root, _upstream_children))


def _outputs(fn) -> list[tuple[Expr, int | None]]:
    """(producing node, tuple index or None) per output of ``fn``: the leaves of its result in
    order, as ``as_outputs`` lists them (a leaf of a nested tuple field of a node that is no
    ``Tuple`` has that node as its producer, index None)."""
    from tilefoundry.semantics.types import TupleType

    def leaves(t: Any) -> int:
        return sum(leaves(f) for f in t.fields) if isinstance(t, TupleType) else 1

    def of(node: Expr) -> list[tuple[Expr, int | None]]:
        if isinstance(node, Tuple):
            return [x for f in node.fields for x in of(f)]
        t = node.checked_type if node.has_type else None
        if isinstance(t, TupleType):
            return [x for i, f in enumerate(t.fields) for x in
                    ([(node, None)] * leaves(f) if isinstance(f, TupleType) else [(node, i)])]
        return [(node, None)]

    return of(fn.body)


def _copied(node: Expr) -> bool:
    """True when ``node``'s value is made only of copies (D298): following float-typed edges
    back from it reaches only ops with ``COPIES_BITS`` (a move, a selection, a bit
    reinterpretation), the entry's parameters and constants. Bool / integer operands (a select's
    condition, an index) carry no NaN and are not followed; anything else (arithmetic, a call, a
    loop, a tuple) computes, and a computed NaN's payload is no contract (D21)."""
    from tilefoundry.semantics.ir import Constant, Var
    from tilefoundry.semantics.types import TensorType

    def float_typed(x: Expr) -> bool:
        t = x.checked_type if x.has_type else None
        return isinstance(t, TensorType) and DType(t.dtype).is_float

    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Var | Constant):
            continue
        if not (isinstance(n, Call) and getattr(n.op, "COPIES_BITS", False)):
            return False
        stack.extend(a for a in n.args if float_typed(a))
    return True


def _producer(node: Expr, index: int | None) -> tuple[Expr, int | None]:
    while isinstance(node, TupleGetItem) and index is None:
        node, index = node.tuple_value, node.index
    return node, index


# ---------------------------------------------------------------------------------------------
# admitted sets
# ---------------------------------------------------------------------------------------------
def _admitted(contract, observed: np.ndarray, node: Call) -> tuple[np.ndarray, str]:
    from tilefoundry.semantics.matmul import matmul_admits
    from tilefoundry.semantics.ops.nn import Conv2D, MatMul
    from tilefoundry.semantics.ops.sharding import Reshard
    from tilefoundry.semantics.ops.tensor import Reduce
    from tilefoundry.semantics.reductions import admits

    op = node.op
    ops = contract.operands
    from tilefoundry.oracle.tile_reduce import ADMITTED

    if type(op) in ADMITTED:
        return ADMITTED[type(op)](op, ops, observed)
    if isinstance(op, Reduce):
        x = ops[0]
        adm = admits(observed, x, op.kind.value, tuple(op.axes), policy=op.policy)
        return np.asarray(adm.admitted), adm.detail
    from tilefoundry.semantics.ops.tile_scan import Scan

    if isinstance(op, Scan):
        from tilefoundry.semantics.reductions import scan_admits

        adm = scan_admits(observed, ops[0], op.combine, op.axis, inclusive=op.inclusive,
                          seed=op.seed, policy=op.policy)
        return np.asarray(adm.admitted), adm.detail
    if isinstance(op, MatMul):
        adm = matmul_admits(observed, ops[0], ops[1],
                            allow_reassociation=op.allow_reassociation)
        return np.asarray(adm.admitted), adm.detail
    from tilefoundry.semantics.ops.tile_mma import Mma

    if isinstance(op, Mma):
        from tilefoundry.semantics.matmul import mma_admits

        adm = mma_admits(observed, ops[0], ops[1], ops[2],
                         allow_reassociation=op.allow_reassociation)
        return np.asarray(adm.admitted), adm.detail
    if isinstance(op, Conv2D):
        from tilefoundry.semantics.evaluator.nn import (
            conv2d_matmul_view,
            conv2d_operands,
            conv2d_result,
        )

        a, b, out_shape = conv2d_operands(ops[0], ops[1], ops[2], op.stride, op.padding,
                                          op.dilation, op.groups)
        adm = matmul_admits(conv2d_matmul_view(observed, op.groups), a, b)
        return conv2d_result(np.asarray(adm.admitted), out_shape), adm.detail
    if isinstance(op, Reshard) and isinstance(ops[0], Sharded):
        src = ops[0]
        lay = src.layout
        from tilefoundry.semantics.types import Broadcast, Partial, Split

        if any(isinstance(a, Split) for a in lay.attrs) or \
                len(set(lay.partials.values())) != 1:
            raise _NotCheckable("a Reshard completing a Partial of a value that is also Split "
                                "(or mixes reductions) is judged on exact programs only")
        data = src.data
        for i in reversed(range(len(lay.attrs))):
            if isinstance(lay.attrs[i], Broadcast):
                data = np.take(data, 0, axis=i)
        pax = tuple(j for j, a in enumerate(a for a in lay.attrs
                                            if not isinstance(a, Broadcast))
                    if isinstance(a, Partial))
        (red,) = set(lay.partials.values())
        adm = admits(observed, data, red, pax, policy=contract.policy or "unordered_tree")
        return np.asarray(adm.admitted), adm.detail
    raise _NotCheckable(f"no admitted-set check for {type(op).__name__}")


class _NotCheckable(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# the entry points
# ---------------------------------------------------------------------------------------------
def as_outputs(v: Any, top: bool = True) -> list:
    """The outputs of a result (a value, or a tuple / list of them): its leaves in order, a
    nested tuple flattened (a list inside is a value: not an array, an ERROR)."""
    if isinstance(v, tuple) or (top and isinstance(v, list)):
        return [x for f in v for x in as_outputs(f, False)]
    return [v]


def gather_outputs(v: Any) -> Any:
    if isinstance(v, Sharded):
        return unshard(v)
    if isinstance(v, tuple | list):
        return type(v)(gather_outputs(f) for f in v)
    return v


def _validate(expected: list, observed: Any) -> tuple[list | None, str]:
    got = as_outputs(observed)
    if len(got) != len(expected):
        return None, (f"the candidate returned {len(got)} output(s), the program has "
                      f"{len(expected)}")
    out = []
    for i, (e, o) in enumerate(zip(expected, got, strict=True)):
        if isinstance(o, Sharded):
            try:
                o = unshard(o)
            except Exception as ex:  # a diverged replica is the candidate's error
                return None, f"output {i}: {ex}"
        if isinstance(o, PerDevice) or isinstance(e, PerDevice):
            return None, f"output {i}: per-device (Local) outputs are not comparable"
        if not isinstance(o, np.ndarray):
            return None, (f"output {i}: expected a numpy array, got {type(o).__name__}")
        if o.dtype == object:
            return None, f"output {i}: an object array"
        try:
            dt_o = dtype_of(o)
        except Exception:
            return None, f"output {i}: numpy dtype {o.dtype} is no IR dtype"
        dt_e = dtype_of(e)
        if dt_o is not dt_e:
            return None, (f"output {i}: dtype {dt_o} (storage {o.dtype}), expected {dt_e} "
                          f"(storage {e.dtype})")
        if tuple(o.shape) != tuple(e.shape):
            return None, f"output {i}: shape {tuple(o.shape)}, expected {tuple(e.shape)}"
        out.append(o)
    return out, ""


def check(module: Module, entry: str, inputs: Sequence[Any], observed: Any, *,
          reference: Any = None, enclose: bool = True) -> Verdict:
    """Judge ``observed`` (the candidate's outputs: an array, or a tuple / list of arrays;
    Sharded values are gathered) against the reference under the contracts.

    Every output downstream of an inexact op is judged by its sound enclosure
    (``oracle/enclosure.py``): an element outside its enclosure FAILs, an output with elements
    whose enclosure admits everything is UNJUDGED (never a PASS). ``reference``: an
    ``Evaluation`` already computed (with its enclosures: ``enclosure_eval.evaluate_enclosed``).
    ``enclose=False`` skips the enclosures: those outputs are then UNJUDGED."""
    from tilefoundry.semantics.evaluator.core import Evaluation, evaluate

    encs = reference.enclosures if isinstance(reference, Evaluation) else None
    if enclose and encs is None:
        from tilefoundry.oracle.enclosure_eval import evaluate_enclosed

        ev, encs = evaluate_enclosed(module, entry, inputs)
    elif isinstance(reference, Evaluation):
        ev = reference
    else:
        ev = evaluate(module, entry, inputs, report=True)
    if not enclose:
        encs = None
    expected = [gather_outputs(x) for x in as_outputs(ev.value)]
    got, why = _validate(expected, observed)
    if got is None:
        return Verdict(ERROR, (), why, reference=ev)
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.semantics.typeinfer.functions import infer_module

    # the typed entry the evaluation ran: its Calls are the ones the contracts name (a second
    # type inference would rebuild nodes and lose them)
    fn = ev.entry_fn if ev.entry_fn is not None else infer_module(module, Session())[entry]
    if fn.body is None:  # a dispatch prototype: the variant the reference chose
        from tilefoundry.semantics.evaluator.core import shape_of
        from tilefoundry.semantics.typeinfer.functions import select_variant

        fn = select_variant(fn, [shape_of(x) for x in inputs])
    notes: dict[int, list] = {}
    for call, c in ev.contracts:
        notes.setdefault(id(call), []).append(c)
    outs = _outputs(fn)
    reached = {id(n) for n in _upstream(fn.body)}
    # notes made inside called functions belong to their elaborated bodies: an output that
    # depends on a call is then conservatively downstream of them
    hidden = any(k not in reached for k in notes)
    verdicts = []
    fields: dict[int, dict[int, tuple[int, int]]] = {}  # TopK(sorted=False) outputs by call
    for i, ((node, index), e, o) in enumerate(zip(outs, expected, got, strict=True)):
        prod, field_ = _producer(node, index)
        own = notes.get(id(prod), [])
        ups = _upstream(prod)
        upstream = [n for n in ups if n is not prod and id(n) in notes]
        if hidden:
            from tilefoundry.semantics.ir import Function

            upstream += [n for n in ups if isinstance(n, Call) and isinstance(n.op, Function)]
        if upstream and encs is not None:
            verdicts.append(_judge_enclosure(i, encs[i], e, o))
            continue
        if upstream:  # enclose=False: what no contract decides is not judged
            names = sorted({type(n.op).__name__ if isinstance(n, Call) else type(n).__name__
                            for n in upstream})
            verdicts.append(OutputVerdict(i, UNJUDGED, "none", total=int(e.size),
                                          unjudged=int(e.size),
                                          detail=f"downstream of inexact op(s) {names}: no "
                                                 f"exact composition of their contracts"))
            continue
        if not own and encs is not None and encs[i] is not None and \
                not isinstance(encs[i], str):
            # no contract upstream or here, yet enclosed: a computed NaN's bits (D266) reach it
            verdicts.append(_judge_enclosure(i, encs[i], e, o))
            continue
        ov = _apply(i, own, prod, e, o)
        if ov.status == PASS and ov.contract == "exact" and not hidden and \
                dtype_of(e).is_float and field_ is None and _copied(prod):
            ov = _judge(i, "exact bits (a copy: NaN payload and sign kept)",
                        compare_bits(e, o), e, o, budget=0)
        if own and own[-1].kind == "permutation" and field_ is not None:
            fields.setdefault(id(prod), {})[field_] = (i, own[-1].axis)
        if ov.status == UNJUDGED and encs is not None and not isinstance(encs[i], str | None):
            ov = _judge_enclosure(i, encs[i], e, o)  # no contract decides it; its enclosure does
        verdicts.append(ov)
    for pair in fields.values():  # values and indices of one TopK permuted alike
        if 0 in pair and 1 in pair:
            (iv, ax), (ii, _) = pair[0], pair[1]
            if verdicts[iv].status == PASS and verdicts[ii].status == PASS:
                ev_, oi = expected[iv], got[ii]
                ok = compare_exact(_sorted_along(ev_, expected[ii], ax),
                                   _sorted_along(got[iv], oi, ax))
                ok = np.broadcast_to(np.all(ok, axis=ax, keepdims=True), ev_.shape)
                verdicts[iv] = _judge(iv, "permutation(values paired with output "
                                          f"{ii}'s indices, axis {ax})", ok, ev_, got[iv])
    status = FAIL if any(v.status == FAIL for v in verdicts) else \
        UNJUDGED if any(v.status == UNJUDGED for v in verdicts) else PASS
    return Verdict(status, tuple(verdicts), reference=ev)


def _judge_enclosure(i: int, enc: Any, e: np.ndarray, o: np.ndarray) -> OutputVerdict:
    """An output downstream of an inexact op, judged by its enclosure."""
    from tilefoundry.oracle.enclosure import Enc
    from tilefoundry.oracle.enclosure_eval import SHARDED

    total = int(e.size)
    if enc is None:  # no freedom reached this output's value: it is exact
        return _judge(i, "exact (no freedom reaches it)", compare_exact(e, o), e, o, budget=0)
    if enc == SHARDED:
        return OutputVerdict(i, UNJUDGED, "enclosure", total=total, unjudged=total,
                             detail=f"{total} element(s) unjudged: a sharded value downstream "
                                    f"of an inexact op is not enclosed")
    assert isinstance(enc, Enc)
    ok = np.asarray(enc.contains(o), bool).reshape(e.shape)
    unb = np.asarray(enc.unbounded(), bool).reshape(e.shape)
    w = enc.width_ulps().reshape(e.shape)[~unb]
    widths = (f"width median {float(np.median(w)):g} / max {float(w.max()):g} ulp"
              if w.size else "no bounded element")
    name = f"enclosure({enc.cause or 'composed'}; {widths})"
    if not ok.all():
        v = _judge(i, name, ok, e, o)
        bad = v.worst_index or ()
        lo, hi = enc.lo.reshape(e.shape), enc.hi.reshape(e.shape)
        nan = enc.nan.reshape(e.shape)
        try:  # the error and the admitted interval as numbers, as for exact / ulp
            err = _interval(e, o, bad, 0)[0]
        except Exception:  # a format the interval cannot be read in: the detail says it
            err = None
        return replace(v, detail=(f"enclosure at {list(bad)}: [{_dec(lo, bad)}, {_dec(hi, bad)}]"
                                  f"{' or NaN' if nan[bad] else ''}"), error=err,
                       admitted=f"[{_dec(lo, bad)}, {_dec(hi, bad)}]"
                       + (" or NaN" if nan[bad] else ""))
    if unb.any():
        return OutputVerdict(i, UNJUDGED, name, total=total, unjudged=int(unb.sum()),
                             detail=f"{int(unb.sum())} of {total} element(s) unjudged (their "
                                    f"enclosure admits every value: {enc.cause})")
    return OutputVerdict(i, PASS, name, 0, total)


def _apply(i: int, own: list, prod: Expr, e: np.ndarray, o: np.ndarray) -> OutputVerdict:
    if not own:
        return _judge(i, "exact", compare_exact(e, o), e, o, budget=0)
    c = own[-1]  # in a loop the last iteration's note is the output's
    if c.per_device:
        return OutputVerdict(i, UNJUDGED, c.kind, total=int(e.size), unjudged=int(e.size),
                             detail=f"{c.op} was evaluated per device; judged on exact "
                                    f"programs only")
    if c.kind == "exact":
        return _judge(i, "exact", compare_exact(e, o), e, o, budget=0)
    if c.kind == "ulp":
        from tilefoundry.semantics.ulp import nan_admitted

        name = f"ulp(<= {c.ulp:g} in {c.dtype}, {c.op})"
        # f8e8m0 at its least value: a model's f32 underflow to 0 casts to NaN (lemma B')
        ok = compare_ulp(e, o, float(c.ulp)) | (nan_admitted(e) & _is_nan(o))
        return _judge(i, name, ok, e, o, budget=float(c.ulp))
    if c.kind == "permutation":
        return _judge(i, f"permutation(axis {c.axis}, {c.op} sorted=False)",
                      compare_permutation(e, o, c.axis), e, o)
    if c.kind == "unspecified":
        mask = np.broadcast_to(np.asarray(c.mask, bool), e.shape) if c.mask is not None else \
            np.zeros(e.shape, bool)
        return _judge(i, f"unspecified where {int(mask.sum())} element(s) are open",
                      mask | compare_exact(e, o), e, o, budget=0)
    if c.kind == "admitted_set":
        try:
            ok, detail = _admitted(c, o, prod)
        except _NotCheckable as why:
            return OutputVerdict(i, UNJUDGED, f"admitted_set({c.policy})",
                                 total=int(e.size), unjudged=int(e.size), detail=str(why))
        return _judge(i, f"admitted_set({c.policy}, {c.op})", ok, e, o, detail)
    return OutputVerdict(i, UNJUDGED, c.kind, total=int(e.size), unjudged=int(e.size),
                         detail=f"unknown contract kind {c.kind!r}")


def check_candidate(module: Module, entry: str, inputs: Sequence[Any],
                    candidate: Callable[[Module, str, list], Any]) -> Verdict:
    """Run ``candidate(module, entry, inputs)`` and judge what it returns; a candidate that
    raises gets an ERROR verdict naming the exception."""
    from tilefoundry.oracle.enclosure_eval import evaluate_enclosed

    ev, _ = evaluate_enclosed(module, entry, inputs)
    try:
        observed = candidate(module, entry, [np.array(x, copy=True) if isinstance(x, np.ndarray)
                                             else x for x in inputs])
    except Exception as ex:  # the candidate's failure is a verdict, never an oracle crash
        return Verdict(ERROR, (), f"the candidate raised {type(ex).__name__}: {ex}",
                       reference=ev)
    try:
        return check(module, entry, inputs, observed, reference=ev)
    except Exception as ex:  # malformed candidate output that slipped through validation
        return Verdict(ERROR, (), f"judging the candidate's output failed: "
                                  f"{type(ex).__name__}: {ex}", reference=ev)
