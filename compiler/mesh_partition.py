"""The partition of a sharded function into local ops and collective steps (``lower_mesh``):
``Partitioner`` walks the elaborated HIR and asks, for each op on mesh values, what the shared
per-device driver (``semantics/evaluator/mesh_driver.py``) does with it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tilefoundry.compiler.errors import NotSupportedError
from tilefoundry.compiler.mesh_collectives import plan_reshard
from tilefoundry.compiler.mesh_ir import STAGE as _STAGE
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GridRegionExpr,
    Tuple,
    TupleGetItem,
    Var,
    loop_children,
    operands,
    postorder,
    reachable,
)
from tilefoundry.semantics.types import (
    Broadcast,
    ShardLayout,
    Split,
    TensorType,
    TupleType,
)

__all__ = ["MV", "Partitioner", "collective_reason", "has_mesh", "local_type_of", "loop_nodes"]

# =============================================================================================
# the partition
# =============================================================================================
def has_mesh(fn: Function) -> bool:
    """Whether an (elaborated or inferred) function has a ShardLayout-typed value."""
    from tilefoundry.semantics.ir import reachable

    def sharded(t: Any) -> bool:
        if isinstance(t, TupleType):
            return any(sharded(f) for f in t.fields)
        return isinstance(t, TensorType) and t.shard is not None

    if any(sharded(p.type) for p in fn.params):
        return True
    return fn.body is not None and any(e.has_type and sharded(e.checked_type)
                                       for e in reachable(fn.body))


def local_type_of(t: Any) -> Any:
    from tilefoundry.semantics.evaluator.sharding import local_type

    return local_type(t)


@dataclass
class MV:
    """A value of the partition: a slot-to-be (``slot``) made by a local op or a collective."""

    id: int
    type: Any  # the local (per-device) type
    layout: ShardLayout | None
    varying: bool
    local: tuple | None = None  # (hir node, operand ids, op override) for a local op
    coll: tuple | None = None  # (kind, src ids, axes, attrs) for a collective
    input: int | None = None
    bound: bool = False  # a host loop's induction variable or carried value (the loop sets it)
    hloop: tuple | None = None  # a host loop: (name, range, iv, carried, inits, body, yields)

    def srcs(self) -> tuple[int, ...]:
        if self.local is not None:
            return self.local[1]
        if self.coll is not None:
            return self.coll[1]
        if self.hloop is not None:
            return self.hloop[4]
        return ()


class Partitioner:
    def __init__(self, fn: Function):
        self.fn = fn
        self.mvs: list[MV] = []
        self.of: dict[int, int] = {}  # HIR node id -> mv id
        self.field_of: dict[int, list[int]] = {}  # a tuple mv -> its fields' mvs
        self.mesh = None
        self.scope: list[int] = []  # the mvs of the scope being built (the program's, a body's)
        self.n_loops = 0

    def new(self, t, layout, varying, **kw) -> int:
        mv = MV(len(self.mvs), t, layout, varying, **kw)
        self.mvs.append(mv)
        self.scope.append(mv.id)
        return mv.id

    def _mesh(self, layout: ShardLayout | None) -> None:
        if layout is None:
            return
        if self.mesh is None:
            self.mesh = layout.mesh
        elif tuple(layout.mesh.axis_extents) != tuple(self.mesh.axis_extents):
            raise NotSupportedError("meshes of different shapes",
                                    f"{self.mesh} and {layout.mesh} in one program",
                                    stage=_STAGE)

    def run(self) -> list[int]:
        for k, p in enumerate(self.fn.params):
            t = p.checked_type
            lay = t.shard if isinstance(t, TensorType) else None
            self._mesh(lay)
            self.of[id(p)] = self.new(local_type_of(t), lay, False, input=k)
        body = self.fn.body
        for node in _post_order(body):
            if id(node) in self.of or (node is body and isinstance(node, Tuple)):
                continue
            self.of[id(node)] = self.visit(node)
        outs = list(body.fields) if isinstance(body, Tuple) else [body]
        res = []
        for o in outs:
            mid = self.of[id(o)]
            mv = self.mvs[mid]
            if isinstance(mv.type, TupleType):
                raise NotSupportedError("a tuple-valued output field", "flatten it",
                                        stage=_STAGE)
            if mv.varying:
                raise NotSupportedError("a device-varying (Local) output", "it has no logical "
                                        "value; Reshard it through a ShardLayout-typed value",
                                        stage=_STAGE)
            for kind, axes, after in plan_reshard(mv.layout, None):
                mid = self.coll(kind, (mid,), axes, (), after, None)
            res.append(mid)
        return res

    def coll(self, kind, srcs, axes, attrs, layout, t=None, varying=False) -> int:
        src = self.mvs[srcs[0]]
        if t is None and layout is not None:  # a piece of ``layout``
            t = TensorType(tuple(layout.local_axis_extents()), src.type.dtype)
        elif t is None:  # replicate: the whole (global) value on every device
            t = TensorType(tuple(src.layout.layout.axis_extents), src.type.dtype)
        return self.new(t, layout, varying, coll=(kind, tuple(srcs), tuple(axes),
                                                   tuple(attrs)))

    def loc(self, node: Expr, ids: Sequence[int], op: Any = None) -> int:
        t = node.checked_type
        lay = t.shard if isinstance(t, TensorType) else None
        self._mesh(lay)
        varying = lay is None and any(self.mvs[i].varying for i in ids)
        mid = self.new(local_type_of(t), lay, varying, local=(node, tuple(ids), op))
        self._fields(mid, t, varying)
        return mid

    def _fields(self, mid: int, t: Any, varying: bool) -> None:
        """A tuple value's fields, made right after it (in its launch), so a field used past a
        collective crosses it as a tensor (``fields`` maps the tuple to them)."""
        if not isinstance(t, TupleType):
            return
        fids = []
        for k, ft in enumerate(t.fields):
            lay = ft.shard if isinstance(ft, TensorType) else None
            f = self.new(local_type_of(ft), lay, varying and lay is None,
                         local=(("field", k), (mid,), None))
            self._fields(f, ft, varying)
            fids.append(f)
        self.field_of[mid] = fids

    def loop(self, node: GridRegionExpr) -> int:
        """A loop whose body needs no collective: one local op of its launch (kept as it is
        over plain values, rebuilt on the local types over sharded ones). One whose body needs
        a collective: a host loop (``host_loop``)."""
        outer: list[Expr] = []
        inside: list[Expr] = []
        seen: set[int] = set()
        stack = [node.body, *node.yield_values]
        while stack:
            e = stack.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            if id(e) in self.of:
                outer.append(e)
                continue
            inside.append(e)
            kids = list(operands(e))
            if isinstance(e, GridRegionExpr):
                kids += [e.body, *e.yield_values]
            stack.extend(kids)
        if any(isinstance(e, Call) and e.has_type and not isinstance(e.op, Function) and
               collective_reason(e) is not None for e in inside):
            return self.host_loop(node)
        ids = [self.of[id(a)] for a in node.init_args] + [self.of[id(o)] for o in outer]
        mvs = [self.mvs[i] for i in ids]
        if any(m.varying for m in mvs) and any(m.layout is not None for m in mvs):
            raise NotSupportedError("GridRegionExpr", "a device-varying value meets a "
                                    "ShardLayout-typed one in a loop",
                                    stage=_STAGE)
        sharded = _has_shard(node.checked_type) or any(m.layout is not None for m in mvs) or \
            any(e.has_type and _has_shard(e.checked_type) for e in loop_nodes(node))
        return self.loc(node, ids, ("loop", tuple(outer), sharded))

    def host_loop(self, node: GridRegionExpr) -> int:
        """A loop whose body needs a collective: its body partitioned as a scope of its own (the
        induction variable and the carried values bound by the loop, the outer values read as
        they are), one ``hloop`` mv in the enclosing scope; the loop's value is its carried
        mvs. A carried value is device-varying when its init or its yield is (the body is
        partitioned again when a yield turns out varying)."""
        from tilefoundry.semantics.typeinfer.core import TypeInferError
        from tilefoundry.semantics.typeinfer.functions import resolve_grid_domain

        try:
            dom = resolve_grid_domain(node, {})
        except TypeInferError as e:
            raise NotSupportedError("GridRegionExpr", f"its bounds do not resolve to integers "
                                    f"({e})", stage=_STAGE) from e
        inits = [self.of[id(a)] for a in node.init_args]
        for i in inits:
            if isinstance(self.mvs[i].type, TupleType):
                raise NotSupportedError("GridRegionExpr", "a carried tuple value in a loop "
                                        "whose body needs a collective", stage=_STAGE)
        ivt = node.induction_var.checked_type
        if not (isinstance(ivt, TensorType) and ivt.shape == () and ivt.shard is None):
            raise NotSupportedError("GridRegionExpr", f"an induction variable of type {ivt}",
                                    stage=_STAGE)
        varying = [self.mvs[i].varying for i in inits]
        outer_scope, outer_of, mark = self.scope, self.of, len(self.mvs)
        while True:
            self.scope, self.of = [], dict(outer_of)
            iv = self.new(TensorType((), ivt.dtype), None, False, bound=True)
            self.of[id(node.induction_var)] = iv
            carried = []
            for c, i, v in zip(node.carried_args, inits, varying, strict=True):
                m = self.mvs[i]
                carried.append(self.new(m.type, m.layout, v, bound=True))
                self.of[id(c)] = carried[-1]
            for e in _post_order_of(node.yield_values, self.of):
                self.of[id(e)] = self.visit(e)
            ys = [self.of[id(y)] for y in node.yield_values]
            body, self.scope, self.of = self.scope, outer_scope, outer_of
            more = [v or self.mvs[y].varying for v, y in zip(varying, ys, strict=True)]
            if more == varying:
                break
            varying = more  # a yield is device-varying: so is its carried value; again
            del self.mvs[mark:]
            self.field_of = {k: f for k, f in self.field_of.items() if k < mark}
        for y in ys:
            if isinstance(self.mvs[y].type, TupleType):
                raise NotSupportedError("GridRegionExpr", "a yielded tuple value in a loop "
                                        "whose body needs a collective", stage=_STAGE)
        name = f"loop{self.n_loops}"
        self.n_loops += 1
        self.new(None, None, False, hloop=(name, dom, iv, tuple(carried), tuple(inits),
                                           tuple(body), tuple(ys)))
        if len(carried) == 1:
            return carried[0]
        t = TupleType(tuple(self.mvs[c].type for c in carried))
        mid = self.new(t, None, any(self.mvs[c].varying for c in carried),
                       local=(("tuple",), tuple(carried), None))
        self.field_of[mid] = list(carried)
        return mid

    def visit(self, node: Expr) -> int:
        """One node as planned steps, by the op's mesh rule (``mesh_rules.py``)."""
        from tilefoundry.semantics.evaluator.mesh_rules import MeshRule as R
        from tilefoundry.semantics.evaluator.mesh_rules import mesh_rule
        from tilefoundry.semantics.ops.sharding import Local, Reshard
        from tilefoundry.semantics.ops.tensor import InsertSlice, Reshape

        if isinstance(node, GridRegionExpr):
            return self.loop(node)
        if isinstance(node, Var):
            raise NotSupportedError(f"Var {node.name}", "a free variable",
                                    stage=_STAGE)
        if isinstance(node, Constant):
            return self.loc(node, ())
        ids = [self.of[id(a)] for a in operands(node)]
        if isinstance(node, TupleGetItem) and ids[0] in self.field_of:
            return self.field_of[ids[0]][node.index]
        if isinstance(node, Tuple | TupleGetItem):
            return self.loc(node, ids)
        if isinstance(node.op, Function):
            raise NotSupportedError("a call", "elaborate inlines calls",
                                    stage=_STAGE)
        op = node.op
        mvs = [self.mvs[i] for i in ids]
        meshy = [m for m in mvs if m.layout is not None or m.varying]
        t = node.checked_type
        out_lay = t.shard if isinstance(t, TensorType) else None
        self._mesh(out_lay)
        rule = mesh_rule(op)
        if rule is R.COLLECTIVE and isinstance(op, Reshard):
            (x,) = ids
            if mvs[0].varying:
                raise NotSupportedError("Reshard of a device-varying value", "it has no "
                                        "logical value", stage=_STAGE)
            mid = x
            for kind, axes, after in plan_reshard(mvs[0].layout, out_lay):
                mid = self.coll(kind, (mid,), axes, (), after)
            if mid == x:  # an identity Reshard
                return x
            return mid
        if rule is R.COLLECTIVE and isinstance(op, Local):
            (x,) = mvs
            if x.layout is None:
                raise NotSupportedError("Local of an unsharded value", "",
                                        stage=_STAGE)
            if x.layout.is_fully_broadcast:
                return self.coll("replicate", (ids[0],), (), (), None,
                                 TensorType(tuple(x.type.shape), x.type.dtype))
            return self.new(x.type, None, True, local=("identity", (ids[0],), None))
        if not meshy:
            return self.loc(node, ids)
        if any(m.varying for m in meshy) and any(m.layout is not None for m in meshy):
            raise NotSupportedError(type(op).__name__, "a device-varying value meets a "
                                    "ShardLayout-typed one", stage=_STAGE)
        if rule is R.GLOBAL_SHAPE:
            raise NotSupportedError(type(op).__name__, "a shape query left after "
                                    "canonicalize", stage=_STAGE)
        if rule is R.GATHER_REDUCED and mvs[0].layout is not None:
            lay = mvs[0].layout
            rank = len(lay.layout.shape)
            red = {a % rank for a in op.axes}
            aop = lay.layout.axis_of_position
            axes = tuple(i for i, a in enumerate(lay.attrs)
                         if isinstance(a, Split) and aop[a.position] in red)
            if axes:
                attrs = tuple(Broadcast() if i in axes else a for i, a in enumerate(lay.attrs))
                glay = ShardLayout(lay.mesh, attrs, lay.layout)
                ids[0] = self.coll("all_gather", (ids[0],), axes, (), glay)
            return self.loc(node, ids)
        if rule is R.ALIGN and out_lay is not None:
            new_ids = []
            for i, m in zip(ids, mvs, strict=True):
                if m.layout is not None and m.layout.layout.shape == out_lay.layout.shape \
                        and m.layout.attrs == out_lay.attrs:
                    new_ids.append(i)
                    continue
                tgt = ShardLayout(out_lay.mesh, out_lay.attrs, out_lay.layout)
                new_ids.append(self.coll("align", (i,), (), (out_lay.attrs,), tgt))
            return self.loc(node, new_ids)
        if rule is R.GATHER_SPLIT and mvs[0].layout is not None:
            lay = mvs[0].layout
            rank = len(lay.layout.shape)
            axis = op.axis % rank
            on = [i for i, a in enumerate(lay.attrs)
                  if isinstance(a, Split) and lay.layout.axis_of_position[a.position] == axis]
            if on:
                if mvs[1].layout is not None or mvs[1].varying:
                    raise NotSupportedError("Gather", "sharded or device-varying indices",
                                            stage=_STAGE)
                (i,) = on
                n_glob = lay.layout.axis_extents[axis]
                blk = n_glob // lay.mesh.axis_extents[i]
                attrs = (n_glob, blk, axis)
                li = self.coll("gather_index", (ids[1],), (i,), attrs, None, mvs[1].type,
                               varying=True)
                g = self.loc(node, [ids[0], li])
                return self.coll("gather_mask", (g, ids[1]), (i,), attrs, out_lay,
                                 self.mvs[g].type)
            return self.loc(node, ids)
        if rule is R.LOCAL_RESHAPE and out_lay is not None:
            return self.loc(node, ids, Reshape(tuple(out_lay.local_axis_extents())))
        if rule is R.WRITE_SPLIT and mvs[0].layout is not None and \
                mvs[0].layout.split_positions:
            upd = mvs[1 if isinstance(op, InsertSlice) else 3]
            splits = [i for i, a in enumerate(mvs[0].layout.attrs) if isinstance(a, Split)]
            if not (upd.layout is not None and
                    all(isinstance(upd.layout.attrs[i], Split) for i in splits)):
                raise NotSupportedError(type(op).__name__, "a replicated update written into "
                                        "a split destination", stage=_STAGE)
        return self.loc(node, ids)


def _has_shard(t: Any) -> bool:
    if isinstance(t, TupleType):
        return any(_has_shard(f) for f in t.fields)
    return isinstance(t, TensorType) and t.shard is not None


def _post_order_of(roots: Sequence[Expr], known: dict[int, int]) -> list[Expr]:
    """The nodes under ``roots`` not in ``known`` (a loop body's own nodes: the outer values
    and the loop's bound variables are known), operands first."""
    return postorder(roots, operands, known)


def _post_order(root: Expr) -> list[Expr]:
    return postorder(root)


def loop_nodes(g: GridRegionExpr) -> list[Expr]:
    """The nodes of a loop's body (nested loops' bodies included), not the outer values."""
    # the roots in reverse: the last yield is entered first, as a work list of them pops it
    return list(reachable([*g.yield_values[::-1], g.body], loop_children))


def collective_reason(e: Call) -> str | None:
    """Why the Call ``e`` (typed, in a loop body) needs a collective step — a reason naming
    it — or None when the mesh simulation runs it on each device's local block alone (by the
    op's mesh rule)."""
    from tilefoundry.semantics.evaluator.mesh_rules import MeshRule as R
    from tilefoundry.semantics.evaluator.mesh_rules import mesh_rule

    op = e.op
    rule = mesh_rule(op)
    t = e.checked_type
    out = t.shard if isinstance(t, TensorType) else None
    ins = [a.checked_type for a in e.args]
    lays = [x.shard if isinstance(x, TensorType) else None for x in ins]
    meshy = out is not None or any(lay is not None for lay in lays)
    if rule in (R.COLLECTIVE, R.GLOBAL_SHAPE) and meshy:
        return "a collective or a layout query"
    if rule is R.GATHER_REDUCED and lays[0] is not None and any(
            isinstance(a, Split) and lays[0].layout.axis_of_position[a.position] in
            {x % len(lays[0].layout.shape) for x in op.axes} for a in lays[0].attrs):
        return "a reduction over a split axis (an all-gather)"
    if rule is R.ALIGN and out is not None and any(
            lay is None or lay.attrs != out.attrs or lay.layout.shape != out.layout.shape
            for lay in lays):
        return "an operand read through another layout (a local slice)"
    if rule is R.GATHER_SPLIT and lays[0] is not None and lays[0].split_positions:
        return "a gather from a split value"
    if rule is R.WRITE_SPLIT and lays[0] is not None and \
            lays[0].split_positions:
        return "a write into a split value"
    return None

