"""Type inference core: the rule registry, the rule context, and the driver over Expr nodes.

One registry keyed by op class (``register_typeinfer``); a rule receives a ``Ctx`` and the
operand types and returns the result type, or calls ``ctx.error(...)``, which raises
``TypeInferError`` naming the op, the operand, the rule and the fix. Rules import nothing from the
compiler or any backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.formats import DType, dtype_of
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GridRegionExpr,
    Op,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.types import (
    IRError,
    TensorType,
    TupleType,
    is_type,
)


class TypeInferError(TilefoundryError, TypeError):
    """A typing rule rejected a node. Carries the op, the operand, the rule and the fix."""

    def __init__(self, message: str, *, op: str | None = None, operand: str | None = None,
                 rule: str | None = None, fix: str | None = None):
        self.op, self.operand, self.rule, self.fix = op, operand, rule, fix
        parts = [f"{op}: " if op else "", message]
        if operand:
            parts.append(f" (operand {operand})")
        if rule:
            parts.append(f" [rule: {rule}]")
        if fix:
            parts.append(f"; fix: {fix}")
        super().__init__("".join(parts))


Rule = Callable[["Ctx", tuple], Any]
RULES: dict[type, Rule] = {}


def register_typeinfer(op_cls: type[Op]) -> Callable[[Rule], Rule]:
    """Register the type rule of ``op_cls`` (one per class; a second registration raises)."""

    def deco(fn: Rule) -> Rule:
        if op_cls in RULES:
            raise TilefoundryError(f"register_typeinfer: {op_cls.__name__} already has a rule")
        RULES[op_cls] = fn
        return fn

    return deco


@dataclass
class Ctx:
    """What a rule sees: the op, its Call node, and the session."""

    op: Op
    call: Call | None
    session: Session

    @property
    def name(self) -> str:
        return type(self.op).__name__

    def operand_name(self, i: int) -> str:
        names = self.op.INPUTS
        if self.op.VARIADIC and i >= len(names) - 1:
            return f"{names[-1]}[{i - len(names) + 1}]"
        return names[i] if i < len(names) else f"#{i}"

    def error(self, message: str, *, operand: int | str | None = None, rule: str | None = None,
              fix: str | None = None) -> NoReturn:
        if isinstance(operand, int):
            operand = self.operand_name(operand)
        raise TypeInferError(message, op=self.name, operand=operand, rule=rule, fix=fix)


@dataclass
class Session:
    """One construction session (one parser run or one top-level infer call). Holds the
    elaboration memo: (callee, argument types) -> the identical elaborated Function."""

    memo: dict[tuple[int, tuple], Function] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)  # keeps memo keys' callees alive
    #: id(call) -> (call, the Function it resolved to): the elaborated instance of a direct
    #: call, or the prototype itself for a dispatch call (read with functions.resolved_target)
    targets: dict[int, tuple[Call, Function]] = field(default_factory=dict)
    #: id(call) -> (call, selected variant) for a dispatch call whose shapes are concrete
    dispatch: dict[int, tuple[Call, Function]] = field(default_factory=dict)
    #: id(fn) -> fn with its signature's Layout(strides=None) sugar materialized
    signatures: dict[int, Function] = field(default_factory=dict)
    #: the parameters of the enclosing Functions being inferred (innermost last); GridRegionExpr
    #: ShapeDim bounds resolve against the innermost
    scope: list[tuple] = field(default_factory=list)


# =============================================================================================
# the driver
# =============================================================================================
def _children(e: Expr) -> list[Expr]:
    if isinstance(e, Call):
        return list(e.args)
    if isinstance(e, Tuple):
        return list(e.fields)
    if isinstance(e, TupleGetItem):
        return [e.tuple_value]
    if isinstance(e, GridRegionExpr):
        return list(e.init_args)  # the body is inferred after the phis are typed
    return []


def _locate(e: TypeInferError, node: Expr) -> None:
    """Prefix the innermost DSL source line that built ``node`` (``file:line:col``), once."""
    if getattr(e, "location", None) is not None:
        return
    from tilefoundry.semantics.source_locations import location_of

    loc = location_of(node)
    if loc is not None and e.args:
        e.location = loc
        e.args = (f"{loc}: {e.args[0]}", *e.args[1:])


def infer_expr(root: Expr, session: Session | None = None) -> Any:
    """Infer and stamp the type of every node reachable from ``root``; returns root's type."""
    session = session or Session()
    stack: list[tuple[Expr, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, ready = stack.pop()
        if node.has_type:
            continue
        if ready:
            on_path.discard(id(node))
            try:
                node.stamp(_infer_node(node, session))
            except TypeInferError as e:
                _locate(e, node)
                raise
            continue
        if id(node) in on_path:
            raise TypeInferError(f"{type(node).__name__} reaches itself: HIR is a DAG",
                                 rule="SSA-as-DAG")
        on_path.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if not c.has_type)
    return root.checked_type


def _infer_node(node: Expr, session: Session) -> Any:
    if isinstance(node, Var):
        if node.type is None:
            raise TypeInferError(f"Var {node.name} has no type annotation and is not bound by a "
                                 f"loop or function", rule="Var typing",
                                 fix="annotate the parameter, e.g. Tensor[(M, N), f32]")
        return node.type
    if isinstance(node, Constant):
        return TensorType(tuple(node.value.shape), dtype_of(node.value))
    if isinstance(node, Tuple):
        return TupleType(tuple(f.checked_type for f in node.fields))
    if isinstance(node, TupleGetItem):
        t = node.tuple_value.checked_type
        if not isinstance(t, TupleType):
            raise TypeInferError(f"tuple_get_item on a non-tuple value of type "
                                 f"{type(t).__name__}", op="TupleGetItem", rule="TupleGetItem")
        if node.index >= len(t.fields):
            raise TypeInferError(f"index {node.index} out of range for a {len(t.fields)}-tuple",
                                 op="TupleGetItem", rule="TupleGetItem")
        return t.fields[node.index]
    if isinstance(node, GridRegionExpr):
        from tilefoundry.semantics.typeinfer.functions import infer_grid_region

        return infer_grid_region(node, session)
    if isinstance(node, Function):
        from tilefoundry.semantics.typeinfer.functions import infer_function

        return infer_function(node, session)
    if isinstance(node, Call):
        arg_types = tuple(a.checked_type for a in node.args)
        if isinstance(node.op, Function):
            from tilefoundry.semantics.typeinfer.functions import infer_call_to_function

            return infer_call_to_function(node, arg_types, session)
        rule = RULES.get(type(node.op))
        if rule is None:
            raise TypeInferError(f"no type rule is registered for {type(node.op).__name__}",
                                 op=type(node.op).__name__, rule="registry completeness")
        reject_u32(Ctx(node.op, node, session), arg_types)
        try:
            t = rule(Ctx(node.op, node, session), arg_types)
        except IRError as e:  # a rule built an invalid type: report it as a typing error
            raise TypeInferError(str(e), op=type(node.op).__name__, rule="result type") from e
        if not is_type(t):
            raise TypeInferError(f"rule returned {t!r}, not a type", op=type(node.op).__name__,
                                 rule="registry")
        return t
    raise TypeInferError(f"unknown node {type(node).__name__}", rule="HIR node set")


def u32_accepted(op: Op) -> bool:
    """Whether ``op`` takes u32 operands: Bitcast, Select, the comparisons and Reshard (which
    only moves or replicates the bits) — u32 exists for the Tile design's f32 <-> u32 bitcast
    pair (docs/decisions.md D216)."""
    from tilefoundry.semantics.ops.math import Binary
    from tilefoundry.semantics.ops.sharding import Reshard
    from tilefoundry.semantics.ops.tile_select import Bitcast, Select

    return isinstance(op, Bitcast | Select | Reshard) or (isinstance(op, Binary) and
                                                          op.kind.is_comparison)


def reject_u32(ctx: Ctx, types: tuple) -> None:
    """Every op but Bitcast, Select, the comparisons and Reshard rejects a u32 operand
    (D216)."""
    if u32_accepted(ctx.op):
        return
    for i, t in enumerate(types):
        if isinstance(t, TensorType) and t.dtype is DType.U32:
            ctx.error("u32 exists only for bit reinterpretation: Bitcast, Select, the "
                      "comparisons and Reshard accept it, no other op does", operand=i,
                      rule="u32 operands (Bitcast / Select / comparisons / Reshard only)",
                      fix="Bitcast the value to f32 first (or compute on i32 / i64 values)")


def tensor_operand(ctx: Ctx, t: Any, i: int) -> TensorType:
    """The operand's TensorType, or a typing error naming the operand, the rule and the fix."""
    if not isinstance(t, TensorType):
        ctx.error(f"expected a tensor, got {type(t).__name__}", operand=i,
                  rule="operand kind: a tensor input",
                  fix="pass a tensor value (ShapeOf / ShapeExtract results are not tensors)")
    return t


def same_dtype(ctx: Ctx, ts: list[TensorType], idx: list[int]) -> DType:
    d0 = ts[0].dtype
    for t, i in zip(ts[1:], idx[1:], strict=True):
        if t.dtype is not d0:
            ctx.error(f"dtype {t.dtype} differs from {ctx.operand_name(idx[0])}'s {d0}; dtypes "
                      f"do not promote", operand=i, rule="same dtype",
                      fix=f"insert an explicit cast to {d0}")
    return d0
