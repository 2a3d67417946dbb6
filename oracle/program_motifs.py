"""Program shapes the random generator used to miss (issue 33), found in a program and drawn.

Four shapes, each a known blind spot of backends (a bug there passed the catalog and the fuzz):

* ``narrow_chain`` — an elementwise op with a narrow float result (bf16, f16, fp8) whose operand
  is another such op: a backend that keeps the intermediate in f32 and rounds once at the end
  (the most common fused-kernel bug) differs there;
* ``float_select`` — a Select whose condition is a comparison of float operands: a select
  inverted on NaN (``!(a < b)`` for ``a >= b``) differs there;
* ``partial_nonlinear`` — a nonlinear op (relu, abs, exp, max, a normalization, ...) consuming a
  completed Partial(sum) whose pieces have mixed signs on some element: a consumer applied per
  piece before the all-reduce (relu(a) + relu(b) for relu(a + b)) differs there;
* ``sharded_reshape_inner`` — a Reshape of a Split value whose merged result axis holds the
  split layout position at an inner place (``(2, 6)`` split on axis 1, reshaped to ``(12,)``): a
  device that reshapes its block in another order, or as if the split were outermost, differs.

``motifs_in(module, entry, inputs)`` names the shapes a program holds (the benchmark
``benchmarks/bench_generator_motifs.py`` counts them per 1,000 programs); ``build_motif(g, sc)``
draws one of them into a program the generator (``oracle/programs.py``) is growing, inside its
capability limit — the generator calls it on a share of its steps when drawing for a backend's
capabilities (``generate_program(seed, caps=...)``, what ``conformance fuzz`` uses).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Gelu,
    LayerNorm,
    Reduce,
    ReduceKind,
    ReLU,
    Reshape,
    Reshard,
    RMSNorm,
    Sigmoid,
    Silu,
    SoftMax,
    Tanh,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.ops.tile_select import Select
from tilefoundry.semantics.types import Partial, Split, TensorType

__all__ = ["MOTIFS", "NARROW_FLOATS", "is_elementwise", "motifs_in"]

MOTIFS = ("narrow_chain", "float_select", "partial_nonlinear", "sharded_reshape_inner")
NARROW_FLOATS = frozenset({DType.BF16, DType.F16, DType.FP8E4M3, DType.FP8E5M2})
_ACTIVATIONS = (ReLU, Sigmoid, Tanh, Silu, Gelu)


def is_elementwise(op: Any) -> bool:
    """An arithmetic elementwise op (a Binary other than comparisons and boolean ops, a Unary
    other than logical_not, an activation)."""
    if isinstance(op, Binary):
        return not (op.kind.is_comparison or op.kind.is_boolean)
    if isinstance(op, Unary):
        return op.kind is not UnaryKind.LOGICAL_NOT
    return isinstance(op, _ACTIVATIONS)


def _nonlinear(op: Any) -> bool:
    if isinstance(op, Unary):
        return op.kind not in (UnaryKind.NEG, UnaryKind.LOGICAL_NOT)
    if isinstance(op, Binary):
        return op.kind in (BinaryKind.MAX, BinaryKind.MIN) or op.kind.is_comparison
    if isinstance(op, Reduce):
        return op.kind in (ReduceKind.MAX, ReduceKind.MIN, ReduceKind.ABS_MAX)
    return isinstance(op, (*_ACTIVATIONS, SoftMax, RMSNorm, LayerNorm))


def _narrow(t: Any) -> bool:
    return isinstance(t, TensorType) and t.dtype in NARROW_FLOATS


def _sum_axes(t: Any) -> set[int]:
    if not isinstance(t, TensorType) or t.shard is None:
        return set()
    return {i for i, a in enumerate(t.shard.attrs) if isinstance(a, Partial) and
            a.reduction == "sum"}


def _inner_split_merge(x: Any, r: Any) -> bool:
    """A Reshape from ``x`` to ``r`` (typed) whose result axis holding a split layout position
    merges several positions and holds the split one after the first."""
    if not (isinstance(x, TensorType) and isinstance(r, TensorType) and x.shard is not None
            and r.shard is not None and len(r.shape) < len(x.shape)):
        return False
    aop = r.shard.layout.axis_of_position
    for a in r.shard.attrs:
        if isinstance(a, Split):
            ax = aop[a.position]
            first = aop.index(ax)
            if a.position > first:
                return True
    return False


def _calls(module: Module) -> list[Call]:
    """Every Call of the typed module's functions (each node once)."""
    from tilefoundry.oracle.reduce import nodes
    from tilefoundry.semantics.ir import GridRegionExpr

    out: list[Call] = []
    seen: set[int] = set()
    fns: list[Function] = []
    for f in module.functions:
        fns.append(f)
        fns.extend(f.variants)
    for f in fns:
        if f.body is None:
            continue
        stack = [f.body]
        while stack:
            for n in nodes(stack.pop()):
                if id(n) in seen:
                    continue
                seen.add(id(n))
                if isinstance(n, Call) and not isinstance(n.op, Function):
                    out.append(n)
                if isinstance(n, GridRegionExpr):
                    stack.extend(n.yield_values)
    return out


def motifs_in(module: Module, entry: str | None = None,
              inputs: Sequence[Any] | None = None) -> set[str]:
    """The ``MOTIFS`` ``module`` holds. ``partial_nonlinear`` needs the mixed signs: with
    ``inputs`` the program is evaluated and a completion counts only when some element's pieces
    have both signs; without them, every nonlinear consumer of a completed Partial(sum) counts."""
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.semantics.typeinfer.functions import infer_module

    m = infer_module(module, Session())
    found: set[str] = set()
    completions: list[Call] = []
    for c in _calls(m):
        op = c.op
        t = c.checked_type if c.has_type else None
        arg_t = [a.checked_type if a.has_type else None for a in c.args]
        if is_elementwise(op) and _narrow(t) and any(
                isinstance(a, Call) and is_elementwise(a.op) and _narrow(at)
                for a, at in zip(c.args, arg_t, strict=True)):
            found.add("narrow_chain")
        if isinstance(op, Select) and isinstance(c.args[0], Call) and \
                isinstance(c.args[0].op, Binary) and c.args[0].op.kind.is_comparison and \
                c.args[0].args[0].has_type and \
                c.args[0].args[0].checked_type.dtype.is_float:
            found.add("float_select")
        if isinstance(op, Reshape) and _inner_split_merge(arg_t[0], t):
            found.add("sharded_reshape_inner")
        if _nonlinear(op):
            for a in c.args:
                if isinstance(a, Call) and isinstance(a.op, Reshard) and a.args[0].has_type \
                        and _sum_axes(a.args[0].checked_type) - _sum_axes(a.checked_type):
                    completions.append(a)
    if completions:
        if inputs is None or entry is None:
            found.add("partial_nonlinear")
        elif _mixed_pieces(module, entry, inputs, completions, m):
            found.add("partial_nonlinear")
    return found


def _mixed_pieces(module: Module, entry: str, inputs: Sequence[Any], completions: list[Call],
                  typed: Module) -> bool:
    """Some completion's pieces have both signs on one element (the program evaluated with a
    hook on the Reshards; ``typed`` is the inferred module whose Calls ``completions`` are)."""
    from tilefoundry.semantics.evaluator import core
    from tilefoundry.semantics.evaluator.mesh import Sharded

    want = {id(c) for c in completions}
    hit: list[bool] = []

    class _Hook(core._Evaluator):
        def eval_node(self, node, values, env):
            if isinstance(node, Call) and id(node) in want and not hit:
                x = values[id(node.args[0])]
                if isinstance(x, Sharded):
                    axes = tuple(i for i, a in enumerate(x.layout.attrs)
                                 if isinstance(a, Partial) and a.reduction == "sum")
                    d = np.asarray(x.data, np.float64) if x.data.dtype.kind != "V" else None
                    if d is None:
                        d = x.data.astype(np.float64)
                    if axes and bool(((d < 0).any(axis=axes) & (d > 0).any(axis=axes)).any()):
                        hit.append(True)
            return super().eval_node(node, values, env)

    try:
        core.run(typed, entry, list(inputs), evaluator=_Hook)
    except Exception:
        return False
    return bool(hit)
