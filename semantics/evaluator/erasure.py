"""Sharding erasure: a sharded program's unsharded twin.

``erase_sharding(module)`` rewrites every type carrying a ShardLayout to the same tensor type
without it (shape, dtype and storage kept), drops every ``Reshard`` (a redistribution or a
storage move does not change the logical value) and every ``Local`` of a value that is Broadcast
on every mesh axis (its local view *is* the value). A ``Local`` of a Split or Partial value has
no unsharded twin — its result differs by device — so erasure raises, naming it.

The central dynamic property (ARCHITECTURE.md, The reference evaluator): evaluating the sharded
program per device and gathering the result (``mesh.unshard``) equals evaluating the erased
program on the gathered inputs, up to what the reduction policies admit. ``check_erasure`` runs
both sides on one set of inputs and returns them for the caller to compare.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tilefoundry.semantics.evaluator.mesh import Sharded, unshard
from tilefoundry.semantics.evaluator.registry import EvaluationError
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
    run_dag,
)
from tilefoundry.semantics.ops.sharding import Local, Reshard
from tilefoundry.semantics.types import TensorType, TupleType

__all__ = ["check_erasure", "erase_sharding", "erase_type"]


def erase_type(t: Any) -> Any:
    if isinstance(t, TensorType) and t.shard is not None:
        return TensorType(tuple(t.shape), t.dtype, None, t.storage)
    if isinstance(t, TupleType):
        return TupleType(tuple(erase_type(f) for f in t.fields))
    return t


class _Eraser:
    def __init__(self) -> None:
        self.memo: dict[int, Any] = {}
        self.keep: list[Any] = []  # keeps the originals alive so ids stay unique

    def fn(self, f: Function) -> Function:
        if id(f) in self.memo:
            return self.memo[id(f)]
        params = tuple(self.expr(p) for p in f.params)
        body = self.expr(f.body) if f.body is not None else None
        variants = tuple(self.fn(v) for v in f.variants)
        out = Function(f.name, params, body, erase_type(f.return_type), f.specializations,
                       variants, label=f.label)
        self.memo[id(f)] = out
        self.keep.append(f)
        return out

    def expr(self, root: Expr) -> Expr:
        def step(node: Expr) -> Expr:
            self.keep.append(node)
            return self.rebuild(node)

        return run_dag(root, self.memo, step, _children)

    def rebuild(self, e: Expr) -> Expr:
        m = self.memo
        if isinstance(e, Var):
            return Var(e.name, erase_type(e.type))
        if isinstance(e, Constant):
            return e
        if isinstance(e, Tuple):
            return Tuple(tuple(m[id(f)] for f in e.fields))
        if isinstance(e, TupleGetItem):
            return TupleGetItem(m[id(e.tuple_value)], e.index)
        if isinstance(e, GridRegionExpr):
            return GridRegionExpr(m[id(e.induction_var)], tuple(m[id(v)] for v in e.carried_args),
                                  tuple(m[id(v)] for v in e.init_args), m[id(e.body)],
                                  tuple(m[id(v)] for v in e.yield_values), e.extent, e.step,
                                  e.start)
        if isinstance(e, Call):
            args = tuple(m[id(a)] for a in e.args)
            if isinstance(e.op, Reshard):
                return args[0]
            if isinstance(e.op, Local):
                src = e.args[0].checked_type if e.args[0].has_type else None
                shard = src.shard if isinstance(src, TensorType) else None
                if shard is None or not shard.is_fully_broadcast:
                    raise EvaluationError(
                        f"erase_sharding: Local of a value sharded as "
                        f"{shard.attrs if shard is not None else src} has no unsharded twin "
                        f"(its result differs by device); only a Local of an all-Broadcast "
                        f"value erases")
                return args[0]
            op = self.fn(e.op) if isinstance(e.op, Function) else e.op
            return Call(op, args)
        raise EvaluationError(f"erase_sharding: cannot rewrite a {type(e).__name__} node")


def _children(e: Expr) -> list[Expr]:
    if isinstance(e, Call):
        return list(e.args)
    if isinstance(e, Tuple):
        return list(e.fields)
    if isinstance(e, TupleGetItem):
        return [e.tuple_value]
    if isinstance(e, GridRegionExpr):
        return [e.induction_var, *e.carried_args, *e.init_args, e.body, *e.yield_values]
    return []


def erase_sharding(module: Module) -> Module:
    """The unsharded twin of ``module`` (see the module docstring)."""
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.semantics.typeinfer.functions import infer_module

    if not isinstance(module, Module):
        raise EvaluationError(f"erase_sharding: expected a Module, got {type(module).__name__}")
    m = infer_module(module, Session())  # stamps the types Local's check reads
    er = _Eraser()
    return Module(tuple(er.fn(f) for f in m.functions), m.target, m.topology)


def check_erasure(module: Module, entry: str, inputs: Sequence[Any]) -> tuple[Any, Any]:
    """Evaluate ``module[entry]`` per device and gather its result, and evaluate the erased twin
    on the gathered inputs; returns ``(gathered sharded result, erased result)``."""
    from tilefoundry.semantics.evaluator.core import evaluate

    sharded = evaluate(module, entry, inputs)
    plain_inputs = [unshard(x) if isinstance(x, Sharded) else x for x in inputs]
    erased = evaluate(erase_sharding(module), entry, plain_inputs)

    def gather(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(gather(f) for f in v)
        return unshard(v)

    return gather(sharded), erased
