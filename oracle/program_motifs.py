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
    from tilefoundry.semantics.ir import function_nodes, yield_children

    return [n for n in function_nodes(module.functions, yield_children)
            if isinstance(n, Call) and not isinstance(n.op, Function)]


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

    class _Hook(core.Evaluator):
        def eval_call(self, node, values, env):
            if id(node) in want and not hit:
                x = values[id(node.args[0])]
                if isinstance(x, Sharded):
                    axes = tuple(i for i, a in enumerate(x.layout.attrs)
                                 if isinstance(a, Partial) and a.reduction == "sum")
                    d = np.asarray(x.data, np.float64) if x.data.dtype.kind != "V" else None
                    if d is None:
                        d = x.data.astype(np.float64)
                    if axes and bool(((d < 0).any(axis=axes) & (d > 0).any(axis=axes)).any()):
                        hit.append(True)
            return super().eval_call(node, values, env)

    try:
        core.run(typed, entry, list(inputs), evaluator=_Hook)
    except Exception:
        return False
    return bool(hit)


# =============================================================================================
# drawing them (the generator calls build_motif on a share of its steps)
# =============================================================================================
#: the share of generator steps that draw a motif when drawing for capabilities
MOTIF_RATE = 0.3
_CHAIN_KINDS = (BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL, BinaryKind.DIV, BinaryKind.ADD,
                BinaryKind.MUL, BinaryKind.MIN, BinaryKind.MAX)
_CHAIN_UNARY = (UnaryKind.EXP, UnaryKind.SQUARE, UnaryKind.SQRT, UnaryKind.RSQRT,
                UnaryKind.LOG, UnaryKind.NEG, UnaryKind.ABS, UnaryKind.EXP2)
_NONLINEAR_UNARY = (UnaryKind.RELU, UnaryKind.ABS, UnaryKind.SQUARE, UnaryKind.EXP)


def build_motif(g: Any, sc: Any) -> bool:
    """Draw one motif into the scope ``sc`` of the generator ``g`` (``programs._Gen``): the
    sharded ones in sharded programs, the others anywhere; False when none fits the limit."""
    names = ["narrow_chain", "narrow_chain", "float_select"]
    if g.mesh is not None and sc.fscope.kind == "entry" and sc.kind == "entry" and \
            max(g.mesh.axis_extents) >= 2:
        names = ["narrow_chain", "float_select", *(["partial_nonlinear",
                                                    "sharded_reshape_inner"] * 3)]
    first = g.src.choice(names)
    for name in [first, *(n for n in names if n != first)]:
        if _DRAW[name](g, sc):
            g.stats[f"motif:{name}"] += 1
            return True
    return False


def _fresh_or_pool(g: Any, sc: Any, dts: Sequence[DType], like: Any = None) -> Any:
    """A pool tensor of one of ``dts`` (the shape of ``like``'s type, broadcastable to it, when
    given), or a fresh leaf."""
    from tilefoundry.oracle.generator.engine import _bshape

    def ok(v: Any) -> bool:
        if v.type.dtype not in dts or v.type.shard is not None:
            return False
        return like is None or (v.type.dtype is like.type.dtype and
                                len(v.type.shape) <= len(like.type.shape) and
                                _bshape(like.type.shape, v.type.shape))

    cands = g.tensors(sc, ok)
    if cands and g.src.boolean(0.5):
        return g.src.choice(cands)
    if like is not None:
        shape, dt = tuple(like.type.shape), like.type.dtype
    else:
        shape, dt = g.leaf_shape(sc, min_rank=1), g.src.choice(list(dts))
    return g.leaf(sc, TensorType(shape, dt))


def _draw_narrow_chain(g: Any, sc: Any) -> bool:
    dts = [d for d in g.only(tuple(sorted(NARROW_FLOATS, key=lambda d: d.value)))]
    kinds = g.kinds(Binary, _CHAIN_KINDS)
    ukinds = g.kinds(Unary, _CHAIN_UNARY)
    if not dts or not (kinds or ukinds):
        return False
    cur = _fresh_or_pool(g, sc, dts)
    if cur is None:
        return False
    made = 0
    for _ in range(g.src.integer(2, 4)):
        if kinds and (not ukinds or g.src.boolean(0.7)):
            other = _fresh_or_pool(g, sc, dts, like=cur)
            if other is None:
                break
            args = [cur, other] if g.src.boolean(0.7) else [other, cur]
            out = g.apply(sc, Binary(g.src.choice(kinds)), args)
        else:
            out = g.apply(sc, Unary(g.src.choice(ukinds)), [cur])
        if out is None:
            break
        cur, made = out[0], made + 1
    return made >= 2


def _draw_float_select(g: Any, sc: Any) -> bool:
    cmps = [k for k in g.kinds(Binary, tuple(BinaryKind)) if k.is_comparison]
    floats = [d for d in g.only((DType.F32, DType.BF16, DType.F16, DType.FP8E4M3,
                                 DType.FP8E5M2))]
    if not cmps or not floats or (g.limit is not None and Select not in g.limit.classes):
        return False
    a = _fresh_or_pool(g, sc, floats)
    if a is None:
        return False
    b = _fresh_or_pool(g, sc, floats, like=a)
    if b is None:
        return False
    cond = g.apply(sc, Binary(g.src.choice(cmps)), [a, b])
    if cond is None:
        return False
    t, f = (a, b) if g.src.boolean(0.5) else (b, a)
    return g.apply(sc, Select(), [cond[0], t, f]) is not None


def _sharded_leaf(g: Any, sc: Any, shape: tuple, attrs: tuple, layout_shape: tuple,
                  dt: DType) -> Any:
    """A sharded entry parameter with the given ShardLayout (values small integers, as every
    sharded leaf of the generator: the mesh simulation then equals the erased program)."""
    from functools import partial as bind_args

    from tilefoundry.oracle.generator.config import _TAME
    from tilefoundry.oracle.generator.engine import _exact_limit, _partial_input, _split_input
    from tilefoundry.oracle.generator.engine import _Val as Val
    from tilefoundry.semantics.ir import Var
    from tilefoundry.semantics.typeinfer.functions import materialize_type
    from tilefoundry.semantics.types import Layout, ShardLayout

    lay = ShardLayout(g.mesh, attrs, Layout(layout_shape))
    declared = TensorType(shape, dt, lay)
    if g.limit is not None and not g.limit.admits_type(declared):
        return None
    t = materialize_type(declared)  # what inference sees (loop carries are annotated so)
    var = Var(f"s{len(sc.params)}", declared if g.src.boolean(0.5) else t)
    n_sum = 1
    for a, m in zip(attrs, g.mesh.axis_extents, strict=True):
        if isinstance(a, Partial):
            n_sum *= m
    if lay.partials:
        make = bind_args(_partial_input, lay, dt)
    else:
        make = bind_args(_split_input, lay, dt, shape, g.src.boolean(0.5))
    sc.params.append(var)
    g.add_input(sc, make)
    bound = _TAME.hi * n_sum
    v = Val(var, t, bound if bound <= _exact_limit(dt) else None, leaf=True)
    sc.pool.append(v)
    return v


def _sharded_dtypes(g: Any) -> list[DType]:
    from tilefoundry.oracle.generator.config import _SHARDED_DTYPES

    return sorted(set(g.only(_SHARDED_DTYPES)), key=lambda d: d.value)


def _draw_partial_nonlinear(g: Any, sc: Any) -> bool:
    from tilefoundry.semantics.types import Broadcast, Layout, ShardLayout

    dts = _sharded_dtypes(g)
    if not dts or (g.limit is not None and Reshard not in g.limit.classes):
        return False
    src, mesh = g.src, g.mesh
    dt = src.choice(dts)
    shape = tuple(src.choice((2, 3, 4, 6)) for _ in range(src.integer(1, 2)))
    ax = src.choice([i for i, m in enumerate(mesh.axis_extents) if m >= 2])
    attrs = tuple(Partial("sum") if i == ax else Broadcast()
                  for i in range(len(mesh.axis_extents)))
    x = _sharded_leaf(g, sc, shape, attrs, shape, dt)
    if x is None:
        return False
    done = g.apply(sc, Reshard(layout=ShardLayout(
        mesh, (Broadcast(),) * len(mesh.axis_extents), Layout(shape))), [x])
    if done is None:
        return False
    y = done[0]
    cands: list = []
    if g.limit is None or ReLU in g.limit.classes:
        cands.append(lambda: g.apply(sc, ReLU(), [y]))
    for k in g.kinds(Unary, _NONLINEAR_UNARY):
        if dt.is_float or k is not UnaryKind.EXP:
            cands.append(lambda k=k: g.apply(sc, Unary(k), [y]))
    for k in g.kinds(Binary, (BinaryKind.MAX, BinaryKind.MIN)):
        def with_leaf(k=k):
            other = g.leaf(sc, TensorType((), dt))
            return None if other is None else g.apply(sc, Binary(k), [y, other])
        cands.append(with_leaf)
    for cls in (Sigmoid, Tanh, Silu):
        if dt.is_float and (g.limit is None or cls in g.limit.classes):
            cands.append(lambda cls=cls: g.apply(sc, cls(), [y]))
    while cands:
        f = cands.pop(src.integer(0, len(cands) - 1))
        if f() is not None:
            return True
    return False


def _draw_sharded_reshape_inner(g: Any, sc: Any) -> bool:
    from tilefoundry.semantics.types import Broadcast

    dts = _sharded_dtypes(g)
    if not dts or (g.limit is not None and Reshape not in g.limit.classes):
        return False
    src, mesh = g.src, g.mesh
    ax = src.choice([i for i, m in enumerate(mesh.axis_extents) if m >= 2])
    m = mesh.axis_extents[ax]
    outer = src.choice((1, 2, 3))
    inner = m * src.choice((1, 2, 3))
    if src.boolean(0.5):  # (a, b) split on the inner axis, merged to (a * b,)
        shape = (outer + 1, inner)
        layout, split, new = shape, 1, (shape[0] * inner,)
    elif src.boolean(0.5):  # (c, a, b) split on b: (c, a * b) merges the split inside
        shape = (src.choice((1, 2)), outer + 1, inner)
        layout, split, new = shape, 2, (shape[0], shape[1] * inner)
    else:  # a refined axis (k, b) split at its inner position, merged with a leading axis
        k = src.choice((2, 3))
        shape = (outer + 1, k * inner)
        layout, split, new = (shape[0], (k, inner)), 2, (shape[0] * shape[1],)
    attrs = tuple(Split(split) if i == ax else Broadcast()
                  for i in range(len(mesh.axis_extents)))
    x = _sharded_leaf(g, sc, shape, attrs, layout, src.choice(dts))
    if x is None:
        return False
    if src.boolean(0.5):
        kinds = g.kinds(Unary, (UnaryKind.NEG, UnaryKind.ABS))
        if kinds:
            y = g.apply(sc, Unary(src.choice(kinds)), [x])
            x = y[0] if y else x
    return g.apply(sc, Reshape(new), [x]) is not None


_DRAW = {"narrow_chain": _draw_narrow_chain, "float_select": _draw_float_select,
         "partial_nonlinear": _draw_partial_nonlinear,
         "sharded_reshape_inner": _draw_sharded_reshape_inner}
