"""The local (per-device) HIR of a run of local ops of a partitioned sharded function
(``rebuild_segment``): each op re-typed by its rule on the local types and checked against the
layouts' local types; loops over sharded values whose body needs no collective rebuilt on the
local types."""

from __future__ import annotations

from typing import Any

from tilefoundry.compiler.errors import NotSupportedError
from tilefoundry.compiler.mesh_ir import STAGE as _STAGE
from tilefoundry.compiler.mesh_partition import MV as _MV
from tilefoundry.compiler.mesh_partition import local_type_of as _local_type
from tilefoundry.compiler.mesh_partition import probe_call
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GridRegionExpr,
    Tuple,
    TupleGetItem,
    Var,
    operands,
)
from tilefoundry.semantics.types import (
    TensorType,
    TupleType,
)

__all__ = ["rebuild_segment", "slot_name", "storage"]

# =============================================================================================
# building the mesh program
# =============================================================================================
def slot_name(mid: int) -> str:
    return f"v{mid}"


def rebuild_segment(seg: list[_MV], inputs: list[int], outputs: list[int], mvs: list[_MV],
                     name: str) -> Function:
    """The local HIR function of a run of local ops (typed by the op rules on local types,
    checked against the layouts' local types)."""
    from tilefoundry.semantics.typeinfer.core import Session, TypeInferError, infer_expr

    exprs: dict[int, Expr] = {}
    session = Session()
    params = []
    for k, mid in enumerate(inputs):
        t = mvs[mid].type
        v = Var(f"a{k}", t)
        v.stamp(t)
        params.append(v)
        exprs[mid] = v
    for mv in seg:
        node, ids, op = mv.local
        if node == "identity":
            exprs[mv.id] = exprs[ids[0]]
            continue
        args = tuple(exprs[i] for i in ids)
        if isinstance(node, tuple) and node[0] == "tuple":  # a host loop's carried values
            e = Tuple(args)
        elif isinstance(node, tuple):  # ("field", k) of a tuple value
            e = TupleGetItem(args[0], node[1])
        elif isinstance(node, Constant):
            e = node  # immutable, typed (a folded shape keeps its ShapeType)
        elif isinstance(node, GridRegionExpr):
            e = _rebuild_local_loop(node, args, op[1]) if op[2] else \
                _rebuild_loop(node, args, op[1])
        elif isinstance(node, Tuple):
            e = Tuple(args)
        elif isinstance(node, TupleGetItem):
            e = TupleGetItem(args[0], node.index)
        else:
            e = Call(op if op is not None else node.op, args)
        try:
            infer_expr(e, session)
        except TypeInferError as ex:  # the op's rule rejects the local operands
            what = type(e.op).__name__ if isinstance(e, Call) else type(e).__name__
            raise NotSupportedError(what, f"it does not type on the local shapes ({ex})",
                                    stage=_STAGE) from ex
        exprs[mv.id] = e
    outs = [exprs[m] for m in outputs]
    body = outs[0] if len(outs) == 1 else Tuple(tuple(outs))
    infer_expr(body, session)
    for mv in seg:
        e = exprs[mv.id]
        node = mv.local[0]
        if node == "identity" or isinstance(node, Constant | GridRegionExpr) or \
                not e.has_type:  # not an output's operand: not in the launch
            continue
        if e.checked_type != mv.type:
            what = type(node.op).__name__ if isinstance(node, Call) else type(node).__name__
            raise NotSupportedError(what, f"its type on the local shapes is {e.checked_type}, "
                                    f"not the layout's local type {mv.type}",
                                    stage=_STAGE)
    return Function(name, tuple(params), body, None)


def storage(t: Any) -> tuple[Any, tuple[int, ...]]:
    """(dtype, shape) of a value of type ``t`` on a device (a shape value is i64[rank])."""
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.types import DimType, ShapeType

    if isinstance(t, TensorType):
        return t.dtype, tuple(t.shape)
    if isinstance(t, DimType):
        return DType.I64, ()
    if isinstance(t, ShapeType):
        return DType.I64, (t.rank,)
    raise NotSupportedError(f"a {type(t).__name__} value crossing a collective", "",
                            stage=_STAGE)



def _local_call(e: Call, ops: list) -> Call:
    """A Call of a collective-free loop body on the devices' local values: the op the
    per-device driver runs on each device's local blocks (``probe_call``; a loop whose body
    needs a collective is a host loop, ``Partitioner.host_loop``; reaching one here is
    NOT_SUPPORTED)."""
    why, op = probe_call(e)
    if why is not None:
        raise NotSupportedError(type(e.op).__name__, f"{why} inside a loop kept as one local "
                                f"op", stage=_STAGE)
    return Call(op, tuple(ops))


def _rebuild_local_loop(node: GridRegionExpr, args: tuple, outer: tuple) -> GridRegionExpr:
    """A loop over sharded values whose body is local (no collective): the body rebuilt on the
    local types, each op re-typed by its rule and checked against the layout's local type."""
    from tilefoundry.compiler.hir_passes import _Rewriter
    from tilefoundry.semantics.typeinfer.core import Session, infer_expr

    session = Session()
    n_init = len(node.init_args)
    seeds = {id(o): a for o, a in zip(outer, args[n_init:], strict=True)}

    def check(e: Expr, new: Expr) -> Expr:
        infer_expr(new, session)
        want = _local_type(e.checked_type)
        if new.checked_type != want:
            what = type(e.op).__name__ if isinstance(e, Call) else type(e).__name__
            raise NotSupportedError(what, f"its type on the local shapes in a loop is "
                                    f"{new.checked_type}, not the layout's local type {want}",
                                    stage=_STAGE)
        return new

    def visit(e: Expr, ops: list, values: dict, ctx: Any) -> Expr:
        if isinstance(e, Constant):
            return e
        if isinstance(e, Var):
            raise NotSupportedError(f"Var {e.name}", "not bound in the loop",
                                    stage=_STAGE)
        if isinstance(e, Call):
            if isinstance(e.op, Function):
                raise NotSupportedError("a call", "elaborate inlines calls",
                                        stage=_STAGE)
            return check(e, _local_call(e, ops))
        if isinstance(e, Tuple):
            return check(e, Tuple(tuple(ops)))
        return check(e, TupleGetItem(ops[0], e.index))

    def loop(g: GridRegionExpr, inits: list, values: dict, ctx: Any) -> Expr:
        inner = dict(values)
        iv = Var(g.induction_var.name, g.induction_var.type)
        iv.stamp(g.induction_var.checked_type)
        inner[id(g.induction_var)] = iv
        carried = []
        for c, i in zip(g.carried_args, inits, strict=True):
            v = Var(c.name, None)
            v.stamp(i.checked_type)
            inner[id(c)] = v
            carried.append(v)
        ys = tuple(rw.expr(y, inner, ctx) for y in g.yield_values)
        body = rw.expr(g.body, inner, ctx)
        new = GridRegionExpr(iv, tuple(carried), tuple(inits), body, ys, extent=g.extent,
                             step=g.step, start=g.start)
        ts = tuple(i.checked_type for i in inits)
        new.stamp(ts[0] if len(ts) == 1 else TupleType(ts))
        want = _local_type(g.checked_type)
        if new.checked_type != want:
            raise NotSupportedError("GridRegionExpr", f"its local type {new.checked_type} is "
                                    f"not the layout's local type {want}",
                                    stage=_STAGE)
        return new

    rw = _Rewriter(visit, loop)
    return loop(node, list(args[:n_init]), seeds, None)


def _rebuild_loop(node: GridRegionExpr, args: tuple, outer: tuple) -> GridRegionExpr:
    """The loop with its inits and the outer values it reads replaced by the launch's values
    (the body's other nodes are kept: they are plain and typed)."""
    from tilefoundry.compiler.hir_passes import _Rewriter

    n_init = len(node.init_args)
    seeds = {id(o): a for o, a in zip(outer, args[n_init:], strict=True)}

    def visit(e: Expr, ops: list, values: dict, ctx: Any) -> Expr:
        if isinstance(e, Var | Constant) or all(a is b for a, b in zip(ops, operands(e),
                                                                          strict=True)):
            return e
        if isinstance(e, Call):
            new = Call(e.op, tuple(ops))
        elif isinstance(e, Tuple):
            new = Tuple(tuple(ops))
        else:
            new = TupleGetItem(ops[0], e.index)
        new.stamp(e.checked_type)
        return new

    def loop(g: GridRegionExpr, inits: list, values: dict, ctx: Any) -> Expr:
        inner = dict(values)
        for c in (g.induction_var, *g.carried_args):
            inner[id(c)] = c
        ys = tuple(rw.expr(y, inner, ctx) for y in g.yield_values)
        body = rw.expr(g.body, inner, ctx)
        new = GridRegionExpr(g.induction_var, g.carried_args, tuple(inits), body, ys,
                             extent=g.extent, step=g.step, start=g.start)
        new.stamp(g.checked_type)
        return new

    rw = _Rewriter(visit, loop)
    return loop(node, list(args[:n_init]), seeds, None)


