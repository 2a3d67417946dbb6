"""The HIR passes before lowering: ``typeinfer``, ``elaborate`` and ``canonicalize``.

``elaborate(module, entry, shapes)`` specializes the entry for concrete input shapes the way
the reference evaluator resolves them at run time (``semantics/evaluator/core.py``): a dispatch
prototype selects its variant by the shapes (``select_variant``), DimVars take the values the
shapes bind (``dim_env``), every call to a Function is inlined (the elaborated instance the
type inference recorded, ``resolved_target``; a dispatch call selects its variant by the
concrete argument shapes), op attributes and loop bounds written with DimVars become integers,
and every node is stamped with its **concrete** type. The result is one flat ``Function``: op
Calls, Tuples, TupleGetItems, Constants, the parameters and GridRegionExprs with integer
bounds — no calls, no symbolic extents.

``canonicalize(fn)`` folds the shape family to constants (ShapeOf, Rank, ShapeExtract,
ShapeCompose depend on shapes only, which are now known), drops identities that do not change a
value (a Reshape to the same shape, an identity Transpose, a Reshard of an unsharded value, a
Cast to the same dtype that cannot change a value's class) and shares structurally equal Calls
(CSE; HIR is pure).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tilefoundry.compiler.errors import LoweringError, NotSupportedError
from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GridRegionExpr,
    Module,
    Tuple,
    TupleGetItem,
    Var,
    operands,
    run_dag,
)
from tilefoundry.semantics.ops.shape import ShapeCompose, ShapeExtract
from tilefoundry.semantics.ops.sharding import Reshard
from tilefoundry.semantics.ops.tensor import Cast, Rank, Reshape, ShapeOf, Transpose
from tilefoundry.semantics.typeinfer.core import Session, infer_expr
from tilefoundry.semantics.typeinfer.functions import (
    dim_env,
    infer_module,
    resolve_grid_domain,
    resolved_target,
    select_variant,
)
from tilefoundry.semantics.types import (
    DimExpr,
    DimVar,
    TensorType,
    TupleType,
    evaluate_dim,
    is_shape_dim,
)

__all__ = ["canonicalize", "elaborate", "shape_of_type", "typeinfer"]


def typeinfer(module: Module, session: Session | None = None) -> Module:
    """The ``typeinfer`` pass: ``infer_module`` (stamps every node, checks the module)."""
    if not isinstance(module, Module):
        raise LoweringError(f"compile: expected a Module, got {type(module).__name__}")
    return infer_module(module, session if session is not None else Session())


def shape_of_type(t: Any) -> tuple:
    return tuple(t.shape) if isinstance(t, TensorType) else ()


# =============================================================================================
# a DAG rewriter that knows loop scopes
# =============================================================================================
class _Rewriter:
    """Post-order rebuild of a HIR DAG (iterative; loop bodies are a scope of their own)."""

    def __init__(self, visit: Callable[[Expr, list, dict, Any], Expr],
                 loop: Callable[[GridRegionExpr, list, dict, Any], Expr]):
        self.visit = visit
        self.loop = loop

    def expr(self, root: Expr, values: dict[int, Expr], ctx: Any) -> Expr:
        def step(node: Expr) -> Expr:
            new_ops = [values[id(c)] for c in operands(node)]
            if isinstance(node, GridRegionExpr):
                return self.loop(node, new_ops, values, ctx)
            return self.visit(node, new_ops, values, ctx)

        return run_dag(root, values, step)


def _stamped(node: Expr, t: Any) -> Expr:
    node.stamp(t)
    return node


def _type_of(e: Expr) -> Any:
    return e.checked_type if e.has_type else None


# =============================================================================================
# elaborate
# =============================================================================================
def _concrete_dim(d: Any, env: dict[str, int]) -> int:
    if isinstance(d, int):
        return d
    return evaluate_dim(d, env)


def _concrete_type(t: Any, env: dict[str, int], keep_shard: bool = False) -> Any:
    """``t`` with concrete extents. A ShardLayout (its extents are static) is kept only for the
    mesh lowering (``keep_shard``, ``lower_mesh``); the single-device pipeline refuses it."""
    if isinstance(t, TensorType):
        if t.shard is not None and not keep_shard:
            raise NotSupportedError("ShardLayout", "sharded values need mesh simulation")
        return TensorType(tuple(_concrete_dim(d, env) for d in t.shape), t.dtype,
                          t.shard if keep_shard else None, t.storage)
    if isinstance(t, TupleType):
        return TupleType(tuple(_concrete_type(f, env, keep_shard) for f in t.fields))
    return t


def _concrete_attr(v: Any, env: dict[str, int]) -> Any:
    """Symbolic extents evaluated under ``env``; one that does not evaluate stays symbolic."""
    if isinstance(v, DimVar | DimExpr):
        try:
            return evaluate_dim(v, env)
        except TilefoundryError:
            return v
    if isinstance(v, tuple) and any(isinstance(x, DimVar | DimExpr) for x in v):
        return tuple(_concrete_attr(x, env) for x in v)
    return v


def _concrete_op(op: Any, env: dict[str, int]) -> Any:
    """``op`` with its symbolic extents evaluated (those ``env`` cannot evaluate stay)."""
    changes = {}
    for f in dataclasses.fields(op):
        v = getattr(op, f.name)
        nv = _concrete_attr(v, env)
        if nv is not v:
            changes[f.name] = nv
    return dataclasses.replace(op, **changes) if changes else op


def _operand_env(node: Call, ops: list, env: dict[str, int]) -> dict[str, int]:
    """The function's DimVar bindings, then those the operands' own types bind (a DimVar axis of
    an operand's inferred type against its concrete extent) — the evaluator's resolution order
    for op attributes (``evaluator/tensor.py``, ``_env``)."""
    out = dict(env)
    for a, o in zip(node.args, ops, strict=True):
        t, ct = _type_of(a), _type_of(o)
        if isinstance(t, TensorType) and isinstance(ct, TensorType) and \
                len(t.shape) == len(ct.shape):
            for d, n in zip(t.shape, ct.shape, strict=True):
                if isinstance(d, DimVar) and isinstance(n, int):
                    out.setdefault(d.name, n)
    return out


def _is_concrete(t: Any, keep_shard: bool = False) -> bool:
    if isinstance(t, TensorType):
        return all(isinstance(d, int) for d in t.shape) and (keep_shard or t.shard is None)
    if isinstance(t, TupleType):
        return all(_is_concrete(f, keep_shard) for f in t.fields)
    return True


class _Elaborator:
    def __init__(self, session: Session, keep_shard: bool = False):
        self.session = session
        self.keep_shard = keep_shard
        self.rw = _Rewriter(self.visit, self.loop)
        self.depth = 0
        self.rules = Session()  # re-typing op Calls on concrete operand types

    def function(self, fn: Function, args: list[Expr], shapes: list[tuple]) -> Expr:
        if fn.body is None:
            fn = select_variant(fn, shapes)
        env = dim_env(fn.params, shapes)
        self.depth += 1
        if self.depth > 200:
            raise LoweringError(f"@{fn.name}: calls nest deeper than 200 (recursion?)")
        try:
            return self.rw.expr(fn.body, {id(p): a for p, a in zip(fn.params, args,
                                                                     strict=True)}, env)
        finally:
            self.depth -= 1

    def visit(self, node: Expr, ops: list, values: dict, env: dict[str, int]) -> Expr:
        if isinstance(node, Var):
            raise LoweringError(f"Var {node.name} is not bound here (a free variable)")
        if isinstance(node, Constant):
            if not node.has_type:
                node.stamp(TensorType(node.value.shape, _dtype_of_array(node.value)))
            return node
        if isinstance(node, Tuple):
            return _stamped(Tuple(tuple(ops)), TupleType(tuple(_type_of(o) for o in ops)))
        if isinstance(node, TupleGetItem):
            (tv,) = ops
            if isinstance(tv, Tuple):
                return tv.fields[node.index]
            t = _type_of(tv)
            return _stamped(TupleGetItem(tv, node.index),
                            t.fields[node.index] if isinstance(t, TupleType) else None)
        if isinstance(node, Call):
            if isinstance(node.op, Function):
                target = resolved_target(node, self.session)
                shapes = [shape_of_type(_type_of(a)) for a in ops]
                return self.function(target, ops, shapes)
            env = _operand_env(node, ops, env)
            op = _concrete_op(node.op, env)
            new = Call(op, tuple(ops))
            new.stamp(self.call_type(node, new, ops, env))
            return new
        raise LoweringError(f"cannot elaborate a {type(node).__name__} node")

    def call_type(self, node: Call, new: Call, ops: list, env: dict[str, int]) -> Any:
        """The op's type rule on the concrete operand types; failing that, the inferred
        symbolic type evaluated under the function's DimVar bindings."""
        op = new.op
        try:
            t = infer_expr(new, self.rules)
            if _is_concrete(t, self.keep_shard):
                return t
        except TilefoundryError:
            pass
        t = node.checked_type
        try:
            return _concrete_type(t, env, self.keep_shard)
        except TilefoundryError as e:
            if isinstance(e, NotSupportedError):
                raise
            if isinstance(op, Reshape) and isinstance(t, TensorType):
                size = math.prod(shape_of_type(_type_of(ops[0])))
                dims = [d if isinstance(d, int) else None for d in op.new_shape]
                known = math.prod(d for d in dims if d is not None)
                if dims.count(None) == 1 and known and size % known == 0:
                    dims[dims.index(None)] = size // known
                    return TensorType(tuple(dims), t.dtype, None, t.storage)
            raise LoweringError(f"{type(op).__name__}: the result type {t} does not resolve "
                                f"to concrete extents here: {e}") from None

    def loop(self, node: GridRegionExpr, inits: list, values: dict,
             env: dict[str, int]) -> Expr:
        dom = resolve_grid_domain(node, dict(env))
        iv0 = node.induction_var
        iv = _stamped(Var(iv0.name, None), iv0.checked_type)
        carried = tuple(_stamped(Var(c.name, None), _type_of(i))
                        for c, i in zip(node.carried_args, inits, strict=True))
        inner = dict(values)
        inner[id(iv0)] = iv
        for c0, c in zip(node.carried_args, carried, strict=True):
            inner[id(c0)] = c
        yields = tuple(self.rw.expr(y, inner, env) for y in node.yield_values)
        body = _stamped(Tuple(yields), TupleType(tuple(_type_of(y) for y in yields)))
        g = GridRegionExpr(iv, carried, tuple(inits), body, yields, extent=dom.stop,
                           step=dom.step, start=dom.start)
        ts = tuple(_type_of(i) for i in inits)
        return _stamped(g, ts[0] if len(ts) == 1 else TupleType(ts))


def _dtype_of_array(a: np.ndarray) -> Any:
    from tilefoundry.semantics.formats import dtype_of

    return dtype_of(a)


def elaborate(module: Module, entry: str, shapes: Sequence[Sequence[int]],
              session: Session | None = None, *, keep_shard: bool = False) -> Function:
    """The ``elaborate`` pass: the entry of an inferred ``module`` specialized for ``shapes``
    (one tuple per parameter) as one flat, concretely typed Function. ``keep_shard`` keeps the
    ShardLayouts in the types (the mesh lowering, ``lower_mesh``); without it a sharded type
    is NOT_SUPPORTED."""
    session = session if session is not None else Session()
    fn = module[entry]
    shapes = [tuple(int(n) for n in s) for s in shapes]
    if len(shapes) != len(fn.params):
        raise LoweringError(f"@{entry} takes {len(fn.params)} inputs, got {len(shapes)} shapes")
    if fn.body is None:
        fn = select_variant(fn, shapes)
    for p, s in zip(fn.params, shapes, strict=True):
        t = p.type
        if not isinstance(t, TensorType):
            raise NotSupportedError(f"parameter {p.name}", f"a {type(t).__name__} parameter; "
                                                           f"the kernel IR takes tensors")
        if len(s) != len(t.shape):
            raise LoweringError(f"@{entry} parameter {p.name}: rank {len(s)} does not match the "
                                f"declared rank {len(t.shape)}")
    env = dim_env(fn.params, shapes)
    params = []
    for p, s in zip(fn.params, shapes, strict=True):
        for a, (d, n) in enumerate(zip(p.type.shape, s, strict=True)):
            if is_shape_dim(d) and evaluate_dim(d, env) != n:
                raise LoweringError(f"@{entry} parameter {p.name}: axis {a} has extent {n}, "
                                    f"declared {d}")
        ct = _concrete_type(p.type, env, keep_shard)
        params.append(_stamped(Var(p.name, ct), ct))
    el = _Elaborator(session, keep_shard)
    body = el.rw.expr(fn.body, {id(p): q for p, q in zip(fn.params, params, strict=True)}, env)
    flat = Function(fn.name, tuple(params), body, None)
    return flat


# =============================================================================================
# canonicalize
# =============================================================================================
def _const(value: np.ndarray, t: Any) -> Constant:
    c = Constant(np.array(value, copy=True, order="C"))
    c.stamp(t)
    return c


class _Canonicalizer:
    def __init__(self) -> None:
        self.rw = _Rewriter(self.visit, self.loop)
        self.memo: dict[tuple, Expr] = {}

    def visit(self, node: Expr, ops: list, values: dict, ctx: Any) -> Expr:
        if isinstance(node, Var | Constant):
            return node
        if isinstance(node, Tuple):
            if all(a is b for a, b in zip(ops, node.fields, strict=True)):
                return node
            return _stamped(Tuple(tuple(ops)), node.checked_type)
        if isinstance(node, TupleGetItem):
            (tv,) = ops
            if isinstance(tv, Tuple):
                return tv.fields[node.index]
            return node if tv is node.tuple_value else \
                _stamped(TupleGetItem(tv, node.index), node.checked_type)
        assert isinstance(node, Call)
        op, t = node.op, node.checked_type
        folded = self.fold(op, ops, t)
        if folded is not None:
            return folded
        key = (op, tuple(id(a) for a in ops))
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        new = node if all(a is b for a, b in zip(ops, node.args, strict=True)) else \
            _stamped(Call(op, tuple(ops)), t)
        self.memo[key] = new
        return new

    def fold(self, op: Any, ops: list, t: Any) -> Expr | None:
        x = ops[0] if ops else None
        xt = _type_of(x) if x is not None else None
        if isinstance(op, ShapeOf):
            return _const(np.array(shape_of_type(xt), np.int64).reshape(len(xt.shape)), t)
        if isinstance(op, Rank):
            return _const(np.array(len(shape_of_type(xt)), np.int64), t)
        if isinstance(op, ShapeExtract) and isinstance(x, Constant):
            s = x.value
            if s.ndim == 1 and -s.shape[0] <= op.index < s.shape[0]:
                return _const(np.array(s[op.index], np.int64), t)
            return None
        if isinstance(op, ShapeCompose) and all(isinstance(a, Constant) and a.value.ndim == 0
                                                for a in ops):
            dims = [int(a.value) for a in ops]
            if all(d >= 0 for d in dims):
                return _const(np.array(dims, np.int64).reshape(len(dims)), t)
            return None
        if isinstance(xt, TensorType) and isinstance(t, TensorType) and xt.dtype is t.dtype \
                and tuple(xt.shape) == tuple(t.shape) and xt.shard == t.shard:
            if isinstance(op, Reshape):
                return x
            if isinstance(op, Transpose) and all(p % max(len(xt.shape), 1) == i
                                                 for i, p in enumerate(op.perm)):
                return x
            if isinstance(op, Reshard) and xt.shard is None and t.shard is None:
                return x
            if isinstance(op, Cast) and op.overflow == "nonfinite" and \
                    (not t.dtype.is_float or op.rounding == "nearest"):
                return x  # same dtype: the value is unchanged (a NaN's payload is no contract)
        return None

    def loop(self, node: GridRegionExpr, inits: list, values: dict, ctx: Any) -> Expr:
        inner = dict(values)
        for c in (node.induction_var, *node.carried_args):
            inner[id(c)] = c
        yields = tuple(self.rw.expr(y, inner, ctx) for y in node.yield_values)
        body = _stamped(Tuple(yields), TupleType(tuple(_type_of(y) for y in yields)))
        g = GridRegionExpr(node.induction_var, node.carried_args, tuple(inits), body, yields,
                           extent=node.extent, step=node.step, start=node.start)
        return _stamped(g, node.checked_type)


def canonicalize(fn: Function) -> Function:
    """The ``canonicalize`` pass over an elaborated (flat, concrete) Function."""
    c = _Canonicalizer()
    body = c.rw.expr(fn.body, {id(p): p for p in fn.params}, None)
    out = Function(fn.name, fn.params, body, None)
    return out
