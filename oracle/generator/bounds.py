"""The generator's value bounds and index domains as a registry keyed by op class (issue 36 item
3, D441; moved out of ``oracle/generator/engine.py``, where they were one ``isinstance`` chain).

The generator tracks, for each integer-valued tensor it builds, a bound on ``|value|`` (``None``:
unknown) so that it only builds float programs whose values stay exactly representable (the
bound must stay under the dtype's exact-integer limit, ``exact_limit``), and for index-valued
results (TopK / Sort indices, Rank) the domain ``(lo, hi)``.

``BOUND_RULES[cls](op, bs, args, t)`` gives the result's bound from the operands' bounds ``bs``
(a number, ``None``, or a list of already clipped bounds for a tuple result). A class without a
rule gets ``None`` (its results are never tracked); ``NO_BOUND`` says why for each such class.
``tests/package/test_op_facts_tables.py`` requires every op class to be in exactly one of the
two. Behaviour is the chain's: the same bound for every op.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from tilefoundry.semantics.combine_laws import COMBINE_LAWS
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ops import (
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
    Op,
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
from tilefoundry.semantics.ops.tile_mma import Mma
from tilefoundry.semantics.ops.tile_reduce import CustomReduce, MaskedReduce, SeededReduce
from tilefoundry.semantics.ops.tile_scan import Scan
from tilefoundry.semantics.ops.tile_scan_flags import MaskedScan, SegmentedScan
from tilefoundry.semantics.ops.tile_select import Bitcast, Select
from tilefoundry.semantics.ops.tile_sort import Sort
from tilefoundry.semantics.types import TensorType, TupleType, simplify

__all__ = ["BOUND_RULES", "NO_BOUND", "bounds", "clip", "domain", "exact_limit", "mx"]

BoundRule = Callable[[Op, list, Sequence[Any], Any], "float | list | None"]
BOUND_RULES: dict[type, BoundRule] = {}

_FLOAT = "float-valued (transcendental or normalizing): no integer bound is tracked"
#: the op classes whose results carry no bound, with the reason
NO_BOUND: Mapping[type, str] = MappingProxyType({
    **{c: _FLOAT for c in (Sigmoid, Tanh, SoftMax, LayerNorm, Gelu, Silu, RMSNorm)},
    **{c: "returns a shape (extents), not tensor data" for c in (ShapeOf, ShapeExtract,
                                                                 ShapeCompose)},
    Bitcast: "reinterprets bits: the result's magnitude is not bounded by the operand's",
    **{c: "not tracked (tile-family accumulation): its results count as unbounded, so float "
          "programs over them are not built" for c in (Mma, SeededReduce, MaskedReduce,
                                                       CustomReduce, MaskedScan, SegmentedScan)},
})


def exact_limit(dt: DType) -> float:
    """The largest |integer| that ``dt`` holds exactly (with every smaller one)."""
    info = FORMATS[dt]
    if info.kind == "bool":
        return 1
    if info.kind == "int":
        return (1 << (info.bits - 1)) - 1 if info.signed else (1 << info.bits) - 1
    if not info.implicit_bit:
        return 1  # f8e8m0: the integers it holds exactly are powers of two; keep only 1
    return float(min(2 ** (info.mbits + 1), info.max_finite))


def mx(*bs):
    return None if any(b is None for b in bs) else max(bs, default=0)


def clip(b: float | None, t: Any) -> float | None:
    if b is None or not isinstance(t, TensorType):
        return None
    return b if b <= exact_limit(t.dtype) else None


def _static_prod(ds) -> int | None:
    out = 1
    for d in ds:
        d = simplify(d)
        if not isinstance(d, int):
            return None
        out *= d
    return out


def _rule(*classes: type) -> Callable[[BoundRule], BoundRule]:
    def deco(fn: BoundRule) -> BoundRule:
        for c in classes:
            BOUND_RULES[c] = fn
        return fn
    return deco


@_rule(Binary)
def _binary(op, bs, args, t):
    k = op.kind
    if k.is_comparison or k.is_boolean:
        return 1
    if k in (BinaryKind.ADD, BinaryKind.SUB):
        return None if None in bs else bs[0] + bs[1]
    if k is BinaryKind.MUL:
        return None if None in bs else bs[0] * bs[1]
    if k in (BinaryKind.MIN, BinaryKind.MAX):
        return mx(*bs)
    return None


@_rule(Unary)
def _unary(op, bs, args, t):
    b0 = bs[0]
    if op.kind in (UnaryKind.NEG, UnaryKind.ABS, UnaryKind.CEIL, UnaryKind.ROUND,
                   UnaryKind.RELU):
        return b0
    if op.kind is UnaryKind.SQUARE:
        return None if b0 is None else b0 * b0
    if op.kind is UnaryKind.LOGICAL_NOT:
        return 1
    return None


@_rule(ReLU, Gather, Transpose, Reshape, Slice, Reshard, Local)
def _first(op, bs, args, t):
    return bs[0]


@_rule(Reduce)
def _reduce(op, bs, args, t):
    x, b0 = args[0].type, bs[0]
    if op.kind in (ReduceKind.MAX, ReduceKind.MIN, ReduceKind.ABS_MAX):
        return b0
    if op.kind is ReduceKind.SUM and b0 is not None:
        n = _static_prod(x.shape[a % max(x.rank, 1)] for a in op.axes)
        return None if n is None else b0 * n
    return None


@_rule(MatMul)
def _matmul(op, bs, args, t):
    k = simplify(args[0].type.shape[-1])
    return None if None in bs or not isinstance(k, int) else bs[0] * bs[1] * k


@_rule(Conv2D)
def _conv2d(op, bs, args, t):
    k = _static_prod(args[1].type.shape[1:])
    return None if None in bs or k is None else bs[0] * bs[1] * k + bs[2]


@_rule(RoPE)
def _rope(op, bs, args, t):
    if None in bs[:4]:
        return [None, None]
    c = bs[2] + bs[3]
    return [clip(bs[0] * c, t.fields[0]), clip(bs[1] * c, t.fields[1])]


@_rule(TopK, Sort)
def _topk(op, bs, args, t):
    n = simplify(args[0].type.shape[op.axis % args[0].type.rank])
    return [clip(bs[0], t.fields[0]), clip(n - 1 if isinstance(n, int) else None, t.fields[1])]


@_rule(Zeros)
def _zeros(op, bs, args, t):
    return 0


@_rule(Select)
def _select(op, bs, args, t):
    return mx(bs[1], bs[2])


@_rule(Scan)
def _scan(op, bs, args, t):
    sd = abs(op.seed) if op.seed is not None else 0
    n = simplify(args[0].type.shape[op.axis % args[0].type.rank])
    b0 = bs[0]
    if b0 is not None and COMBINE_LAWS[op.combine].order:  # max / min select an operand
        return max(b0, sd)
    if b0 is not None and op.combine == "add" and isinstance(n, int):
        return b0 * n + sd
    return None


@_rule(Rank)
def _rank(op, bs, args, t):
    return args[0].type.rank


@_rule(Cast)
def _cast(op, bs, args, t):
    return bs[0] if op.dtype is not DType.BOOL else 1


@_rule(Concat, Stack)
def _concat(op, bs, args, t):
    return mx(*bs)


@_rule(InsertSlice)
def _insert(op, bs, args, t):
    return mx(bs[0], bs[1])


@_rule(CacheUpdate)
def _cache_update(op, bs, args, t):
    return mx(bs[0], bs[3])


def bounds(op: Op, args: Sequence[Any], t: Any) -> list[float | None]:
    """One bound per result of ``op`` applied to ``args`` (generator values) with type ``t``."""
    bs = [a.bound if a.is_tensor else None for a in args]
    rule = BOUND_RULES.get(type(op))
    res = rule(op, bs, args, t) if rule is not None else None
    if isinstance(res, list):
        return res
    if isinstance(t, TupleType):
        return [None] * len(t.fields)
    return [clip(res, t)]


def domain(op: Op, args: Sequence[Any], i: int) -> tuple[int, int] | None:
    """The index domain ``(lo, hi)`` of result ``i`` (TopK / Sort indices, Rank, and what
    moves values unchanged), or None."""
    if isinstance(op, TopK | Sort) and i == 1:
        n = simplify(args[0].type.shape[op.axis % args[0].type.rank])
        return (0, n - 1) if isinstance(n, int) and n >= 1 else None
    if isinstance(op, Rank):
        r = args[0].type.rank
        return (r, r)
    if isinstance(op, Transpose | Reshape | Slice | Reshard | Gather) and args[0].domain:
        return args[0].domain
    if isinstance(op, Concat | Stack) and all(a.domain for a in args):
        return (min(a.domain[0] for a in args), max(a.domain[1] for a in args))
    return None
