"""``topk_merge(x, K, axis=-1, largest=True, nan="last")``: the Tile design's ``topk<K>(x, axis,
order...)`` shorthand, as parse-time sugar for the region it names (D487).

Tile design: "The general region form is therefore ordinary reduce over an indexed Tile" ...
"topk<K>(x, axis, order...) is a library shorthand for that region, not a second execution
model or primitive."

The parser expands the call into exactly that region: a ``CustomReduce`` over ``axis`` with the
Top-K merge reducer ``TopKMerge(K, largest, nan)`` (``semantics/topk_reducer.py``) seeded with
``identity_K`` (K empty slots per fiber: zero values, index -1, a Constant pair), then a
``Transpose`` that puts the K candidates where the axis was (the result lays out like the HIR
``TopK``: values and int64 indices, the axis's extent replaced by K). No new op: every evaluator
and backend sees the ordinary reduce. ``to_source`` prints the expansion, which parses back to
the same IR.

K is a static specialization (it sets the state's and result's shape), and so is x's shape
outside the axis: the identity seed is a constant of that shape. ``DSLError`` names each
rejection (K not a static int >= 1, a symbolic shape, an axis out of range). K may exceed the
axis's extent: the slots past it stay empty (index -1), as the reduce defines.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import numpy as np

from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ir import Call, Constant, Expr, Tuple, TupleGetItem
from tilefoundry.semantics.ops.tensor import Transpose
from tilefoundry.semantics.ops.tile_reduce import CustomReduce
from tilefoundry.semantics.topk_reducer import TopKMerge
from tilefoundry.semantics.types import TensorType

if TYPE_CHECKING:
    from tilefoundry.semantics.dsl.parser import FunctionParser

__all__ = ["topk_call", "topk_region"]

_KEYWORDS = ("axis", "largest", "nan")


def topk_region(x: Expr, shape: tuple[int, ...], dtype: DType, k: int, axis: int = -1,
                largest: bool = True, nan: str = "last", policy: str = "unordered_tree") -> Expr:
    """The expansion of ``topk<K>(x, axis, order)``: a Tuple ``(values, indices)`` of x's shape
    with ``shape[axis]`` replaced by K. ``shape`` must be static (ints)."""
    r = TopKMerge(k, largest, nan)
    a = axis % len(shape)
    batch = tuple(d for i, d in enumerate(shape) if i != a)
    sv = np.zeros((*batch, r.k), FORMATS[dtype].storage)
    si = np.full((*batch, r.k), -1, np.int64)
    red = Call(CustomReduce((a,), r, policy, False), (x, Tuple((Constant(sv), Constant(si)))))
    if a == len(shape) - 1:
        return red
    # (batch..., K) -> K back at the axis's position
    perm = (*tuple(range(a)), len(shape) - 1, *tuple(range(a, len(shape) - 1)))
    return Tuple(tuple(Call(Transpose(perm), (TupleGetItem(red, i),)) for i in (0, 1)))


def topk_call(p: FunctionParser, node: ast.Call) -> Expr:
    """Expand ``topk_merge(x, K, axis=..., largest=..., nan=...)`` at ``node``."""
    where = "topk_merge(...)"
    if len(node.args) != 2 or any(isinstance(a, ast.Starred) for a in node.args):
        raise p.error(node, where, "takes the tensor and the static K positionally, the order "
                      "by keyword: topk_merge(x, 4, axis=-1, largest=True, nan='last')")
    kws = {}
    for kw in node.keywords:
        if kw.arg not in _KEYWORDS:
            raise p.error(node, where, f"unknown keyword {kw.arg!r}; topk_merge takes "
                          f"{_KEYWORDS}")
        kws[kw.arg] = p.static(kw.value, f"a static {kw.arg}")
    x = p.ir(p.expr(node.args[0]), node.args[0], "a tensor value (topk_merge's x)")
    k = p.static(node.args[1], "a static K (an int)")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise p.error(node.args[1], where, f"K = {k!r} must be a static int >= 1 (K sets the "
                      f"result's shape: a host / JIT specialization)")
    t = p.type_of(x, node.args[0], "topk_merge")
    if not isinstance(t, TensorType) or t.rank == 0:
        raise p.error(node.args[0], where, "x must be a tensor of rank >= 1")
    shape = tuple(t.shape)
    if not all(isinstance(d, int) for d in shape):
        raise p.error(node.args[0], where, f"x has the symbolic shape {shape}; the identity "
                      f"seed is a constant of x's shape outside the axis, so specialize the "
                      f"shape (a DimVarRangePat variant) or write reduce_custom with your own "
                      f"seed")
    axis = kws.get("axis", -1)
    if isinstance(axis, bool) or not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
        raise p.error(node, where, f"axis = {axis!r} is not an axis of x (rank {len(shape)})")
    try:
        return topk_region(x, shape, t.dtype, k, axis, kws.get("largest", True),
                           kws.get("nan", "last"))
    except Exception as e:  # a TopKMerge argument error: name it at the call
        raise p.error(node, where, str(e)) from None
