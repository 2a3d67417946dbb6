"""The partition of a sharded function into local ops and collective steps (``lower_mesh``):
``Partitioner`` walks the elaborated HIR and asks, for each op on mesh values, what the shared
per-device driver (``semantics/evaluator/mesh_driver.py``) does with it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from tilefoundry.compiler.errors import NotSupportedError
from tilefoundry.compiler.mesh_collectives import plan_reshard
from tilefoundry.compiler.mesh_ir import STAGE as _STAGE
from tilefoundry.semantics.evaluator.mesh_driver import MeshDevices
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
    TensorType,
    TupleType,
)

__all__ = ["MV", "Partitioner", "collective_reason", "has_mesh", "local_type_of", "loop_nodes", "probe_call"]

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
        self.devices = _PartitionDevices(self)

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
        """One node as planned steps: Reshard and Local (the collective ops) as this lowering's
        collectives, any other op on mesh values as the per-device driver runs it
        (``_PartitionDevices``)."""
        from tilefoundry.semantics.evaluator.mesh_rules import MeshRule as R
        from tilefoundry.semantics.evaluator.mesh_rules import mesh_rule
        from tilefoundry.semantics.ops.sharding import Local, Reshard

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
        # what the op does on mesh values: the shared per-device driver's (D490), with the
        # partition as its collectives implementation
        return self.devices.run(node, tuple(ids))


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


def probe_call(e: Call) -> tuple[str | None, Any]:
    """What the per-device driver does with the Call ``e`` (typed, in a loop body), asked on
    its operands' and result's types (``_ProbeDevices``): why it needs a collective step — a
    reason naming it — or None when it runs on each device's local block alone; and the op it
    runs on each device (a Reshape's local one)."""
    from tilefoundry.semantics.evaluator.mesh_driver import run_on_mesh
    from tilefoundry.semantics.evaluator.mesh_rules import MeshRule, mesh_rule
    from tilefoundry.semantics.evaluator.registry import EvalCtx

    t = e.checked_type
    out = t.shard if isinstance(t, TensorType) else None
    args = tuple(_Typed(x.shard if isinstance(x, TensorType) else None)
                 for x in (a.checked_type for a in e.args))
    if out is None and all(a.layout is None for a in args):
        return None, e.op  # no mesh value: the op itself
    if mesh_rule(e.op) is MeshRule.COLLECTIVE:
        return _SHAPE_OR_COLLECTIVE, e.op
    dev = _ProbeDevices(out)
    ran: list = []

    def impl(lctx: EvalCtx, local: tuple) -> _Typed:
        ran.append(lctx.op)
        return _Typed(out)

    try:
        run_on_mesh(EvalCtx(e.op, e, t, [], args, {}), impl, args, dev)
    except _Crosses as c:
        return c.reason, e.op
    return None, (ran[0] if ran else e.op)


def collective_reason(e: Call) -> str | None:
    """Why the Call ``e`` (typed, in a loop body) needs a collective step, or None
    (``probe_call``)."""
    return probe_call(e)[0]


# =============================================================================================
# the partition and the probe as collectives implementations of the per-device driver
# =============================================================================================
_SHAPE_OR_COLLECTIVE = "a collective or a layout query"


class _PartitionDevices(MeshDevices):
    """The partition as the per-device driver's collectives implementation (D490): a value is a
    partition value (an ``MV`` id: one slot on every device); the devices are one symbolic
    device, whose local computation is a local op of a launch; every collective or movement
    the driver asks for is a ``Collective`` step; a step this lowering has no collective for is
    NOT_SUPPORTED."""

    def __init__(self, pt: Partitioner):
        self.pt = pt
        self.node: Any = None

    def run(self, node: Call, ids: tuple[int, ...]) -> int:
        """The Call ``node`` on the partition values ``ids`` (some of them mesh values)."""
        from tilefoundry.semantics.evaluator.mesh_driver import run_on_mesh
        from tilefoundry.semantics.evaluator.registry import EvalCtx, EvaluationError

        self.node = node

        def impl(lctx: EvalCtx, local: tuple) -> int:
            return self.pt.loc(node, local, None if lctx.op is node.op else lctx.op)

        try:
            return run_on_mesh(EvalCtx(node.op, node, node.checked_type, [], ids, {}), impl,
                               ids, self)
        except EvaluationError as e:  # the driver refuses the operands
            raise NotSupportedError(type(node.op).__name__, str(e), stage=_STAGE) from e

    def _refuse(self, why: str) -> NoReturn:
        raise NotSupportedError(type(self.node.op).__name__, why, stage=_STAGE)

    def is_sharded(self, v: object) -> bool:
        return isinstance(v, int) and self.pt.mvs[v].layout is not None

    def is_varying(self, v: object) -> bool:
        return isinstance(v, int) and self.pt.mvs[v].varying

    def layout(self, v: int) -> ShardLayout:
        return self.pt.mvs[v].layout

    def mesh_of(self, v: int) -> Any:
        lay = self.pt.mvs[v].layout
        return lay.mesh if lay is not None else self.pt.mesh

    def coords(self, mesh: Any) -> list[tuple[int, ...]]:
        return [()]  # one launch, run on every device

    def block(self, v: int, coord: tuple[int, ...]) -> int:
        return v

    def assemble(self, t: Any, mesh: Any, results: list, varying: bool) -> int:
        (r,) = results
        return r

    def all_gather(self, v: int, axes: list[int]) -> int:
        lay = self.pt.mvs[v].layout
        attrs = tuple(Broadcast() if i in axes else a for i, a in enumerate(lay.attrs))
        return self.pt.coll("all_gather", (v,), tuple(axes), (),
                            ShardLayout(lay.mesh, attrs, lay.layout))

    def to_global(self, v: int) -> np.ndarray:
        self._refuse("sharded or device-varying indices")

    def align(self, v: int, out: ShardLayout) -> int:
        if _same_layout(self.pt.mvs[v].layout, out):
            return v
        return self.pt.coll("align", (v,), (), (out.attrs,),
                            ShardLayout(out.mesh, out.attrs, out.layout))

    def shape_stand_in(self, v: Any, coord: tuple[int, ...]) -> Any:
        self._refuse("a shape query left after canonicalize")

    def slices_per_device(self, ctx: Any, why: str) -> None:
        self._refuse(why)

    def gather_index(self, ctx: Any, idx: int, mesh: Any, i: int, n_glob: int, blk: int,
                     axis: int) -> int:
        return self.pt.coll("gather_index", (idx,), (i,), (n_glob, blk, axis), None,
                            self.pt.mvs[idx].type, varying=True)

    def gather_mask(self, ctx: Any, results: list, idx: int, mesh: Any, i: int, n_glob: int,
                    blk: int, axis: int) -> int:
        (g,) = results
        return self.pt.coll("gather_mask", (g, idx), (i,), (n_glob, blk, axis),
                            ctx.out_type.shard, self.pt.mvs[g].type)


def _same_layout(lay: ShardLayout | None, out: ShardLayout) -> bool:
    """An operand already in the result layout: aligning it moves nothing."""
    return lay is not None and lay.layout.shape == out.layout.shape and lay.attrs == out.attrs


@dataclass(frozen=True)
class _Typed:
    """A value of the probe: its ShardLayout (None: plain) and whether it varies by device."""

    layout: ShardLayout | None
    varying: bool = False


class _Crosses(Exception):
    """The driver asked the probe for a step that crosses devices (``reason`` names it)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _ProbeDevices(MeshDevices):
    """The driver asked what it does with a Call on values of these types (``probe_call``): it
    computes nothing, and stops (``_Crosses``) at the first step that crosses devices."""

    def __init__(self, out: ShardLayout | None):
        self.out = out

    def is_sharded(self, v: object) -> bool:
        return isinstance(v, _Typed) and v.layout is not None

    def is_varying(self, v: object) -> bool:
        return isinstance(v, _Typed) and v.varying

    def layout(self, v: _Typed) -> ShardLayout:
        return v.layout

    def mesh_of(self, v: _Typed) -> Any:
        return v.layout.mesh if v.layout is not None else self.out.mesh

    def coords(self, mesh: Any) -> list[tuple[int, ...]]:
        return [()]

    def block(self, v: _Typed, coord: tuple[int, ...]) -> _Typed:
        return v

    def assemble(self, t: Any, mesh: Any, results: list, varying: bool) -> _Typed:
        return _Typed(t.shard if isinstance(t, TensorType) else None, varying)

    def all_gather(self, v: _Typed, axes: list[int]) -> _Typed:
        raise _Crosses("a reduction over a split axis (an all-gather)")

    def to_global(self, v: _Typed) -> _Typed:
        raise _Crosses("a gather from a split value")

    def align(self, v: _Typed, out: ShardLayout) -> _Typed:
        if not _same_layout(v.layout, out):
            raise _Crosses("an operand read through another layout (a local slice)")
        return v

    def shape_stand_in(self, v: Any, coord: tuple[int, ...]) -> Any:
        raise _Crosses(_SHAPE_OR_COLLECTIVE)

    def slices_per_device(self, ctx: Any, why: str) -> None:
        raise _Crosses("a write into a split value")

    def gather_index(self, ctx: Any, idx: Any, mesh: Any, i: int, n_glob: int, blk: int,
                     axis: int) -> _Typed:
        raise _Crosses("a gather from a split value")

    def gather_mask(self, ctx: Any, results: list, idx: Any, mesh: Any, i: int, n_glob: int,
                    blk: int, axis: int) -> _Typed:
        return _Typed(self.out)
