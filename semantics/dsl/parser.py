"""The @func parser: a Python ``ast.FunctionDef`` becomes one HIR ``Function``; the body is never
run.
Over 800 lines: one recursive-descent reader of Python's ``ast`` (statements, expressions,
subscripts, loops) over one lexical environment; the op spellings are data in ``surface.py``.

- **Lexical environment.** Assignments bind names to IR values in the parser, never in the IR:
  ``c = a + b`` used twice is one Call node (SSA sharing by object identity, HIR spec §1.1).
  Names resolve like Python: the function's own bindings, then the enclosing scope the
  decorator saw (closure, locals, module globals), then the DSL's names (``surface.BUILTINS``).
- **Static values** (ints, DimVars, dtypes, layouts, meshes, tuples of them) are evaluated at
  parse time; tensor values are IR Exprs. An operator with two static operands is Python
  arithmetic (``N // 4`` is a dim expression); with a tensor operand it is an op.
- **Scalars.** A Python float is given the other operand's float dtype (HIR spec, Binary: "by the
  authoring surface, before it is an operand at all"); a Python int is not (it is a rank-0 i32
  constant, the induction variable's dtype) and a bool is a rank-0 bool constant.
- **Loops.** ``for i in tile(n)`` / ``tile(n, step)`` / ``range(start, stop[, step])`` lower to
  one GridRegionExpr with the spec's carry-out semantics (see ``_for``).
- **Types at parse time.** Where the surface needs a type (the extent behind ``:``, an integer
  index, a float scalar's dtype) the parser runs type inference on the operand in the parse's
  Session — one construction session per parser run, as the spec's elaboration memo requires.

Every error is a ``DSLError`` naming the construct and its file:line:column.
"""

from __future__ import annotations

import ast
import operator
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilefoundry.errors import TilefoundryError
from tilefoundry.limits import limits
from tilefoundry.semantics.dsl.errors import DSLError, SourceInfo, located
from tilefoundry.semantics.dsl.map_sugar import map_call
from tilefoundry.semantics.dsl.static_bounds import FormatRefused, percent_format_bound, static_size
from tilefoundry.semantics.dsl.surface import (
    BUILTINS,
    BY_NAME,
    STATIC_CALLABLE_IDS,
    Builtin,
    Intrinsic,
    Namespace,
    Spelling,
    Tensor,
    Tuple,
    tensor_type_from_items,
)
from tilefoundry.semantics.dsl.topk_sugar import topk_call
from tilefoundry.semantics.formats import DType, bits_dtype
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GridRegionExpr,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.ir import Tuple as TupleNode
from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary, UnaryKind
from tilefoundry.semantics.ops.nn import MatMul, RoPE
from tilefoundry.semantics.ops.tensor import Gather, Reshape, Slice, TopK
from tilefoundry.semantics.ops.tile_reduce import CustomReduce
from tilefoundry.semantics.ops.tile_sort import Sort
from tilefoundry.semantics.source_locations import remember_location
from tilefoundry.semantics.topk_reducer import TopKMerge
from tilefoundry.semantics.typeinfer.core import Session, infer_expr
from tilefoundry.semantics.types import (
    IRError,
    Mesh,
    ShardLayout,
    TensorType,
    TupleType,
    is_shape_dim,
    is_type,
)

__all__ = ["FunctionParser", "MeshBinding", "MeshUse", "RangeSlice", "StaticEvaluator",
           "structurally_tuple", "window_index"]

_MISSING = object()


@dataclass(frozen=True)
class RangeSlice:
    """The parser-side binding of ``for i in tile(n, step)``: the window
    ``[i, i + step)``. As a subscript it selects that window; anywhere else it is the scalar
    induction variable ``i``."""

    var: Var
    size: Any


@dataclass(frozen=True)
class MeshBinding:
    """An active ``with Mesh(...) as name:`` binding."""

    mesh: Mesh
    name: str


@dataclass(frozen=True)
class MeshUse:
    """A Mesh the function names, where and how (checked against the Module's Topology)."""

    mesh: Mesh
    node: ast.AST
    construct: str
    src: SourceInfo


def window_index(var: Var, size: int) -> Expr:
    """The index tensor of a tile window: ``var + [0, 1, ..., size - 1]`` (i32)."""
    return Call(Binary(BinaryKind.ADD), (var, Constant(np.arange(size, dtype=np.int32))))


def structurally_tuple(e: Expr) -> bool | None:
    """Whether ``e`` is tuple-valued, decided from its structure alone (None: not evident)."""
    if isinstance(e, TupleNode):
        return True
    if isinstance(e, GridRegionExpr):
        return len(e.carried_args) != 1
    if isinstance(e, Call):
        if isinstance(e.op, Function):
            rt = e.op.return_type
            return isinstance(rt, TupleType) if rt is not None else None
        if isinstance(e.op, CustomReduce):  # the Top-K merge's state pair (D486)
            return isinstance(e.op.reducer, TopKMerge)
        return isinstance(e.op, TopK | RoPE | Sort)
    if isinstance(e, Var):
        return isinstance(e.type, TupleType) if e.type is not None else None
    if isinstance(e, Constant):
        return False
    return None


_STMT_NAMES: dict[type, str] = {
    ast.While: "while loop", ast.If: "if statement", ast.Try: "try statement",
    ast.Raise: "raise statement", ast.Delete: "del statement", ast.Global: "global statement",
    ast.Nonlocal: "nonlocal statement", ast.FunctionDef: "nested function definition",
    ast.AsyncFunctionDef: "nested function definition", ast.ClassDef: "class definition",
    ast.Import: "import statement", ast.ImportFrom: "import statement", ast.Break: "break",
    ast.Continue: "continue", ast.AsyncFor: "async for loop", ast.AsyncWith: "async with",
    ast.Assert: "assert statement", ast.Match: "match statement",
}
_EXPR_NAMES: dict[type, str] = {
    ast.IfExp: "conditional expression", ast.Lambda: "lambda", ast.ListComp: "comprehension",
    ast.SetComp: "comprehension", ast.DictComp: "comprehension",
    ast.GeneratorExp: "generator expression", ast.JoinedStr: "f-string",
    ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield", ast.NamedExpr: "walrus (:=)",
    ast.Starred: "starred expression", ast.Set: "set display", ast.BoolOp: "and / or",
}
_BINOPS: dict[type, BinaryKind | None] = {
    ast.Add: BinaryKind.ADD, ast.Sub: BinaryKind.SUB, ast.Mult: BinaryKind.MUL,
    ast.Div: BinaryKind.DIV, ast.BitAnd: BinaryKind.AND, ast.BitOr: BinaryKind.OR,
    ast.BitXor: BinaryKind.XOR, ast.MatMult: None,
}
_PY_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_OP_SYMBOL: dict[type, str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
    ast.RShift: ">>", ast.MatMult: "@",
}
_CMPOPS: dict[type, BinaryKind] = {
    ast.Eq: BinaryKind.EQ, ast.NotEq: BinaryKind.NE, ast.Lt: BinaryKind.LT,
    ast.LtE: BinaryKind.LE, ast.Gt: BinaryKind.GT, ast.GtE: BinaryKind.GE,
}


def _is_ir(v: Any) -> bool:
    return isinstance(v, Expr | RangeSlice)


def _unparse(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every node the parser sees
        return type(node).__name__


# =============================================================================================
# static evaluation (shared by function bodies and the top level of parse_module)
# =============================================================================================
def _short(v: Any) -> str:
    """A bounded repr of a static value (a huge int or tuple prints by its size)."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 64:
        return f"<an int of {v.bit_length():,} bits>"
    if isinstance(v, tuple | str | bytes | list) and (len(v) > 16 or static_size(v) > 64):
        return f"<a {type(v).__name__} of {len(v):,} items>"
    try:
        r = repr(v)
    except Exception:  # a repr that raises: name the type
        return f"<{type(v).__name__}>"
    return r if len(r) <= 200 else r[:200] + "..."


class StaticEvaluator:
    """Evaluates the static part of the surface: literals, names, tuples, dicts, Python
    arithmetic on static operands, attribute access on modules / namespaces, and calls of the
    static constructors (DimVar, Layout, ShardLayout, Mesh, ...)."""

    def __init__(self, src: SourceInfo, lookup: Callable[[str], tuple[bool, Any]]) -> None:
        self.src = src
        self.lookup_outer = lookup
        self.env: dict[str, Any] = {}
        self.mesh_uses: list[MeshUse] = []

    # --- errors -------------------------------------------------------------------------
    def error(self, node: ast.AST | None, construct: str, message: str) -> DSLError:
        return located(self.src, node, construct, message)

    # --- names --------------------------------------------------------------------------
    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.env:
            return self.env[name]
        found, v = self.lookup_outer(name)
        if found:
            return v
        if name in BUILTINS:
            return BUILTINS[name]
        raise self.unknown_name(name, node)

    def unknown_name(self, name: str, node: ast.AST) -> DSLError:
        return self.error(node, f"name {name}", f"{name!r} is not bound: not a parameter or "
                          f"local, not in the enclosing scope or module, and not a DSL name")

    # --- expressions --------------------------------------------------------------------
    def expr(self, node: ast.AST) -> Any:
        v = self._expr(node)
        if isinstance(v, Call) and isinstance(node, ast.BinOp | ast.UnaryOp | ast.Call |
                                              ast.Subscript | ast.Compare):
            line, col, _ = self.src.where(node) if self.src is not None else (None, None, None)
            if line is not None:  # type errors found later name this line (source_locations)
                remember_location(v, self.src.filename, line, col)
        return v

    def _expr(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.lookup(node.id, node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Tuple | ast.List):
            return self.sequence(node)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise self.error(node, "dict unpacking", "**mapping is not supported")
            return {self.static(k): self.static(v) for k, v in zip(node.keys, node.values,
                                                                    strict=True)}
        if isinstance(node, ast.BinOp):
            return self.binop(node)
        if isinstance(node, ast.UnaryOp):
            return self.unaryop(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Compare):
            return self.compare(node)
        what = _EXPR_NAMES.get(type(node), type(node).__name__)
        hint = "; use & / | / ~ for elementwise logic" if isinstance(node, ast.BoolOp) else ""
        raise self.error(node, what, f"{what} is not supported in the DSL{hint}")

    def static(self, node: ast.AST, what: str = "a static value") -> Any:
        v = self.expr(node)
        if _is_ir(v):
            raise self.error(node, _unparse(node), f"expected {what} (an int, a shape, a dtype, "
                             f"a layout ...), got a tensor value")
        return v

    def sequence(self, node: ast.Tuple | ast.List) -> Any:
        vals = [self.expr(e) for e in node.elts]
        if any(isinstance(e, ast.Starred) for e in node.elts):
            raise self.error(node, "starred expression", "*x in a tuple is not supported")
        out = tuple(vals)
        if static_size(out) > limits().max_static_items:  # (t, t, t) of a large t
            raise self.error(node, "tuple", f"the tuple has {static_size(out):,} items (nested "
                             f"items counted), more than the limit max_static_items; "
                             f"{limits().how('max_static_items')}")
        return out

    def attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        if _is_ir(base):
            raise self.error(node, f"attribute .{node.attr}", "attribute access on a tensor "
                             "value is not supported (HIR values have no fields); use the op "
                             "spellings, e.g. shape_of(x)")
        if isinstance(base, Namespace | type) or type(base).__name__ == "module":
            try:
                return getattr(base, node.attr)
            except AttributeError as e:
                raise self.error(node, f"attribute .{node.attr}", str(e)) from None
        if isinstance(base, tuple | int | float | str):
            raise self.error(node, f"attribute .{node.attr}",
                             f"attribute access on {type(base).__name__} is not supported")
        try:
            return getattr(base, node.attr)
        except AttributeError as e:
            raise self.error(node, f"attribute .{node.attr}", str(e)) from None

    def binop(self, node: ast.BinOp) -> Any:
        left, right = self.expr(node.left), self.expr(node.right)
        return self.static_binop(node, left, right)

    def static_binop(self, node: ast.BinOp, left: Any, right: Any) -> Any:
        fn = _PY_BINOPS.get(type(node.op))
        if fn is None or _is_ir(left) or _is_ir(right):
            raise self.error(node, f"operator {_OP_SYMBOL.get(type(node.op), '?')}",
                             "not supported on these operands")
        self._bound_binop(node, left, right)
        try:
            out = fn(left, right)
        except (TilefoundryError, TypeError, ValueError, ZeroDivisionError) as e:
            raise self.error(node, f"operator {_OP_SYMBOL[type(node.op)]}",
                             f"on static operands {_short(left)}, {_short(right)}: {e}") from None
        except OverflowError:
            raise self.error(node, f"operator {_OP_SYMBOL[type(node.op)]}",
                             f"on static operands {_short(left)}, {_short(right)}: the float "
                             f"result is out of range (static float arithmetic does not "
                             f"overflow to inf in the DSL); use smaller operands") from None
        self._bound_result(node, out)
        return out

    # --- bounds (tilefoundry.limits): the static evaluator never computes without end -----
    def _limit(self, node: ast.AST, what: str, name: str) -> DSLError:
        lim = limits()
        return self.error(node, f"operator {_OP_SYMBOL.get(type(getattr(node, 'op', None)), '?')}",
                          f"{what}, more than the limit {name}; {lim.how(name)}")

    def _bound_binop(self, node: ast.BinOp, left: Any, right: Any) -> None:
        """Refuse, before computing it, a static result past the size limits: an integer of
        more than ``max_static_int_bits`` bits, a repetition of more than ``max_static_items``
        items."""
        self.tick(node)
        lim = limits()
        op = type(node.op)
        ints = all(isinstance(v, int) for v in (left, right))
        if ints and op is ast.Pow and right > 0 and abs(left) > 1:
            bits = (abs(left).bit_length() - 1) * right
            if bits > lim.max_static_int_bits:
                raise self._limit(node, f"{_short(left)} ** {_short(right)} has about {bits:,} "
                                  f"bits", "max_static_int_bits")
        if ints and op is ast.LShift and left and right > 0 and \
                abs(left).bit_length() + right > lim.max_static_int_bits:
            raise self._limit(node, f"{_short(left)} << {_short(right)} has "
                              f"{abs(left).bit_length() + right:,} bits", "max_static_int_bits")
        # sizes count nested items (static_bounds.static_size): ((t,) * 1000,) * 1000 is a
        # million of t, whatever its top-level length
        if op is ast.Mult:
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, tuple | str | bytes | list) and isinstance(n, int) and \
                        static_size(seq) * max(n, 0) > lim.max_static_items:
                    raise self._limit(node, f"repeating {static_size(seq):,} items {n:,} "
                                      f"times makes {static_size(seq) * n:,}",
                                      "max_static_items")
        if op is ast.Add and all(isinstance(v, tuple | str | bytes) for v in (left, right)) and \
                static_size(left) + static_size(right) > lim.max_static_items:
            raise self._limit(node, f"the concatenation has "
                              f"{static_size(left) + static_size(right):,} items",
                              "max_static_items")
        if op is ast.Mod and isinstance(left, str | bytes):
            try:
                n = percent_format_bound(left, right)
            except FormatRefused as e:
                raise self.error(node, "operator %", f"{e}; write the string out") from None
            if n > lim.max_static_items:
                raise self._limit(node, f"the formatted string has up to {n:,} characters",
                                  "max_static_items")

    def _bound_result(self, node: ast.AST, v: Any) -> None:
        lim = limits()
        if isinstance(v, int) and v.bit_length() > lim.max_static_int_bits:
            raise self._limit(node, f"the result has {v.bit_length():,} bits",
                              "max_static_int_bits")
        if isinstance(v, tuple | str | bytes) and static_size(v) > lim.max_static_items:
            raise self._limit(node, f"the result has {static_size(v):,} items",
                              "max_static_items")

    def tick(self, node: ast.AST) -> None:
        """The time bound of one parse (``max_parse_seconds``)."""
        deadline = getattr(self, "_deadline", None)
        if deadline is None:
            deadline = time.monotonic() + limits().max_parse_seconds
            self._deadline = deadline
        if time.monotonic() > deadline:
            lim = limits()
            raise self.error(node, "source", f"parsing took longer than the limit "
                             f"max_parse_seconds; {lim.how('max_parse_seconds')}")

    def unaryop(self, node: ast.UnaryOp) -> Any:
        v = self.expr(node.operand)
        return self.static_unary(node, v)

    def static_unary(self, node: ast.UnaryOp, v: Any) -> Any:
        fns = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
               ast.Not: operator.not_}
        self.tick(node)
        try:
            return fns[type(node.op)](v)
        except (TypeError, ValueError, TilefoundryError) as e:
            raise self.error(node, "unary operator", f"on {_short(v)}: {e}") from None

    def compare(self, node: ast.Compare) -> Any:
        raise self.error(node, "comparison", "comparisons of static values are not supported")

    def subscript(self, node: ast.Subscript) -> Any:
        base = self.expr(node.value)
        if base is Tensor or base is Tuple:
            return self.annotation(node)
        if isinstance(base, tuple):
            idx = self.static(node.slice)
            try:
                return base[idx]
            except (TypeError, IndexError) as e:
                raise self.error(node, "subscript", str(e)) from None
        raise self.error(node, "subscript", f"cannot subscript {base!r} here")

    def call(self, node: ast.Call) -> Any:
        fn = self.expr(node.func)
        if id(fn) in STATIC_CALLABLE_IDS:
            return self.static_call(fn, node)
        if isinstance(fn, Intrinsic) and fn.dsl_name == Builtin.FLOAT.value:
            return self.float_call(node)
        raise self.error(node, f"call of {_unparse(node.func)}",
                         "only static constructors (DimVar, Layout, ShardLayout, Mesh, Split, "
                         "Broadcast, Partial, DimVarRangePat, ...) may be called here")

    def float_call(self, node: ast.Call) -> float:
        if len(node.args) != 1 or node.keywords:
            raise self.error(node, "float(...)", "takes one argument")
        v = self.static(node.args[0])
        try:
            return float(v)
        except (TypeError, ValueError) as e:
            raise self.error(node, "float(...)", str(e)) from None

    def static_call(self, fn: Any, node: ast.Call) -> Any:
        name = getattr(fn, "__name__", repr(fn))
        if any(isinstance(a, ast.Starred) for a in node.args) or \
                any(k.arg is None for k in node.keywords):
            raise self.error(node, f"{name}(...)", "*args / **kwargs are not supported")
        if fn is ShardLayout:
            args = list(node.args)
            kws = {k.arg: k.value for k in node.keywords}
            mesh_node = args.pop(0) if args else kws.pop("mesh", None)
            if mesh_node is None:
                raise self.error(node, "ShardLayout(...)", "the first argument is the mesh")
            mesh = self.mesh_ref(mesh_node)
            try:
                return ShardLayout(mesh, *[self.static(a) for a in args],
                                   **{k: self.static(v) for k, v in kws.items()})
            except (TilefoundryError, TypeError) as e:
                raise self.error(node, "ShardLayout(...)", str(e)) from None
        args = [self.static(a) for a in node.args]
        kwargs = {k.arg: self.static(k.value) for k in node.keywords}
        try:
            return fn(*args, **kwargs)
        except (TilefoundryError, TypeError, ValueError) as e:
            raise self.error(node, f"{name}(...)", str(e)) from None

    def mesh_ref(self, node: ast.AST) -> Mesh:
        """A ShardLayout's mesh: 'ShardLayout.mesh MUST point at an active binding on the
        lexical path' (HIR spec §1.1) — an active ``with Mesh(...) as m`` or a module-level
        Mesh."""
        if not isinstance(node, ast.Name):
            raise self.error(node, "ShardLayout mesh", "the mesh must be a name bound by an "
                             "active `with Mesh(...) as m:` or a module-level Mesh, not an "
                             "inline expression (HIR spec: ShardLayout.mesh MUST point at an "
                             "active binding on the lexical path)")
        v = self.lookup(node.id, node)
        if isinstance(v, MeshBinding):
            return v.mesh
        if isinstance(v, Mesh) and node.id not in self.env:
            self.mesh_uses.append(MeshUse(v, node, f"Mesh {node.id} (topology="
                                          f"{v.topology!r})", self.src))
            return v
        raise self.error(node, f"ShardLayout mesh {node.id}",
                         f"{node.id} is not an active mesh binding (got {type(v).__name__}); "
                         f"bind one with `with Mesh(...) as {node.id}:`")

    # --- annotations --------------------------------------------------------------------
    def annotation(self, node: ast.AST) -> Any:
        """A type annotation: ``Tensor[shape, dtype, (layout), (storage)]``,
        ``Tuple[T, ...]``, or a name bound to a type."""
        what = _unparse(node)
        if isinstance(node, ast.Subscript):
            try:
                head = self.expr(node.value)
            except DSLError:
                head = None
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head is Tensor:
                vals = [self.static(e) for e in items]
                try:
                    return tensor_type_from_items(tuple(vals))
                except (TilefoundryError, TypeError) as e:
                    raise self.error(node, f"annotation {what}", str(e)) from None
            if head is Tuple:
                fields = tuple(self.annotation(e) for e in items)
                return TupleType(fields)
        else:
            try:
                v = self.expr(node)
            except DSLError:
                v = None
            if is_type(v):
                return v
        raise self.error(node, "unknown annotation",
                         f"{what} is not a DSL annotation; write Tensor[(M, N), f32] (optionally "
                         f"with a Layout / ShardLayout and a storage 'rmem' / 'smem' / 'gmem') "
                         f"or Tuple[...]")


# =============================================================================================
# function bodies
# =============================================================================================
class FunctionParser(StaticEvaluator):
    """Parses one function definition. ``resolve_callee(obj)`` maps an object a call names to
    the Function it calls (a @func handle), or None."""

    def __init__(self, fdef: ast.FunctionDef, src: SourceInfo,
                 lookup: Callable[[str], tuple[bool, Any]], session: Session,
                 resolve_callee: Callable[[Any, ast.AST, Session], Function | None]) -> None:
        super().__init__(src, lookup)
        self.fdef = fdef
        self.session = session
        self.resolve_callee = resolve_callee
        self.loop_depth = 0
        self.ended_meshes: dict[str, int] = {}
        self.params: tuple[Var, ...] = ()

    # --- entry points -------------------------------------------------------------------
    def signature(self, base: Function | None = None) -> tuple[tuple[Var, ...], Any]:
        """The parameters and the return type. A variant (``base`` given) may leave
        annotations out: they default to the base's."""
        a = self.fdef.args
        for group, what in ((a.posonlyargs, "positional-only parameter"),
                            (a.kwonlyargs, "keyword-only parameter"),
                            (a.defaults, "parameter default"),
                            ([d for d in a.kw_defaults if d is not None], "parameter default")):
            if group:
                raise self.error(group[0], what, f"{what}s are not supported; parameters are "
                                 f"plain positional names with annotations")
        for extra, what in ((a.vararg, "*args"), (a.kwarg, "**kwargs")):
            if extra is not None:
                raise self.error(extra, what, f"{what} is not supported")
        params = []
        for i, arg in enumerate(a.args):
            if arg.annotation is None:
                if base is not None and i < len(base.params):
                    t = base.params[i].type
                else:
                    raise self.error(arg, "parameter annotation",
                                     f"parameter {arg.arg} has no annotation; write "
                                     f"{arg.arg}: Tensor[(M, N), f32]")
            else:
                t = self.annotation(arg.annotation)
            try:
                params.append(Var(arg.arg, t))
            except IRError as e:
                raise self.error(arg, f"parameter {arg.arg}", str(e)) from None
        if self.fdef.returns is not None:
            rt = self.annotation(self.fdef.returns)
        else:
            rt = base.return_type if base is not None else None
        self.params = tuple(params)
        return self.params, rt

    def is_prototype_body(self) -> bool:
        """``pass`` (after an optional docstring): a dispatch prototype."""
        stmts = self._strip_docstring(self.fdef.body)
        return bool(stmts) and all(isinstance(s, ast.Pass) for s in stmts)

    def body(self) -> Expr:
        """The body as one Expr (the returned value)."""
        for p in self.params:
            self.env[p.name] = p
        self.session.scope.append(self.params)
        try:
            r = self.block(self._strip_docstring(self.fdef.body))
        finally:
            self.session.scope.pop()
        if r is None:
            raise self.error(self.fdef, f"function {self.fdef.name}",
                             "the body never returns a value; end it with `return ...` (a "
                             "dispatch prototype's body is just `pass`)")
        return r

    @staticmethod
    def _strip_docstring(stmts: list[ast.stmt]) -> list[ast.stmt]:
        if stmts and isinstance(stmts[0], ast.Expr) and isinstance(stmts[0].value, ast.Constant) \
                and isinstance(stmts[0].value.value, str):
            return stmts[1:]
        return stmts

    # --- statements ---------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt]) -> Expr | None:
        for k, s in enumerate(stmts):
            r = self.stmt(s)
            if r is not None:
                if k + 1 < len(stmts):
                    raise self.error(stmts[k + 1], "statement after return",
                                     "unreachable: the function already returned")
                return r
        return None

    def stmt(self, s: ast.stmt) -> Expr | None:
        if isinstance(s, ast.Return):
            return self._return(s)
        if isinstance(s, ast.Assign):
            self._assign(s)
        elif isinstance(s, ast.AugAssign):
            self._augassign(s)
        elif isinstance(s, ast.AnnAssign):
            raise self.error(s, "annotated assignment", "write a plain assignment; types come "
                             "from the operands")
        elif isinstance(s, ast.For):
            self._for(s)
        elif isinstance(s, ast.With):
            return self._with(s)
        elif isinstance(s, ast.Pass):
            pass
        elif isinstance(s, ast.Expr):
            raise self.error(s, "expression statement", "its value would be discarded (HIR is "
                             "pure: a value that is not bound or returned has no effect)")
        elif isinstance(s, ast.While):
            raise self.error(s, "while loop", "while loops are not supported: a HIR loop has a "
                             "static iteration domain; write `for i in tile(n):` or "
                             "`for i in range(start, stop, step):`")
        elif isinstance(s, ast.If):
            raise self.error(s, "if statement", "data-dependent control flow is not "
                             "expressible in HIR (pure SSA dataflow)")
        else:
            what = _STMT_NAMES.get(type(s), type(s).__name__)
            raise self.error(s, what, f"{what} is not supported in a @func body")
        return None

    def _return(self, s: ast.Return) -> Expr:
        if self.loop_depth > 0:
            raise self.error(s, "early return inside a tile loop",
                             "a loop's value is its carried names; assign them in the body and "
                             "return after the loop")
        if s.value is None:
            raise self.error(s, "return", "return a value (HIR functions return by value)")
        return self.ir(self.expr(s.value), s.value, "the returned value")

    def _assign(self, s: ast.Assign) -> None:
        if len(s.targets) != 1:
            raise self.error(s, "chained assignment", "write one target per assignment")
        t = s.targets[0]
        if isinstance(t, ast.Name):
            self.bind(t.id, self.expr(s.value))
        elif isinstance(t, ast.Tuple | ast.List) and all(isinstance(e, ast.Name)
                                                         for e in t.elts):
            names = [e.id for e in t.elts]  # type: ignore[attr-defined]
            if isinstance(s.value, ast.Tuple | ast.List) and len(s.value.elts) == len(names):
                vals = [self.expr(e) for e in s.value.elts]
            else:
                v = self.ir(self.expr(s.value), s.value, "the unpacked value")
                if not self.is_tuple(v, s.value):
                    raise self.error(s.value, "tuple unpacking", "the value is not a tuple")
                vals = [TupleGetItem(v, k) for k in range(len(names))]
            for n, v in zip(names, vals, strict=True):
                self.bind(n, v)
        elif isinstance(t, ast.Subscript):
            raise self.error(t, "assignment to a subscript",
                             "HIR values are immutable; write y = insert_slice(x, update, "
                             "offsets...) for a window write")
        elif isinstance(t, ast.Attribute):
            raise self.error(t, "assignment to an attribute", "HIR values have no fields")
        else:
            raise self.error(t, "assignment target", f"cannot assign to {_unparse(t)}")

    def _augassign(self, s: ast.AugAssign) -> None:
        t = s.target
        if isinstance(t, ast.Subscript):
            raise self.error(t, "assignment to a subscript",
                             "HIR values are immutable; write y = insert_slice(x, update, "
                             "offsets...) for a window write")
        if not isinstance(t, ast.Name):
            raise self.error(t, "assignment target", f"cannot assign to {_unparse(t)}")
        cur = self.lookup(t.id, t)
        fake = ast.BinOp(left=t, op=s.op, right=s.value)
        ast.copy_location(fake, s)
        self.bind(t.id, self.binop_values(fake, cur, self.expr(s.value)))

    def bind(self, name: str, v: Any) -> None:
        self.env[name] = v

    # --- loops --------------------------------------------------------------------------
    def _for(self, s: ast.For) -> None:
        """'The parser populates the carry chain when a for i in tile(...) body contains an
        ast.Assign whose single Name target binds an outer-scope name: the carried name becomes
        a phi Var in carried_args, the pre-loop binding of that name becomes the matching entry
        in init_args, inside the loop body the same name resolves to that phi Var, after the
        loop, the post-region binding refers to the GridRegionExpr itself (single carry) or a
        tuple_get_item of it (multi-carry)' (HIR spec §1.2). Carries are ordered by first
        assignment; names first bound inside the body, and the loop variable, are local to it."""
        if s.orelse:
            raise self.error(s.orelse[0], "for-else", "a for loop takes no else block")
        if not isinstance(s.target, ast.Name):
            raise self.error(s.target, "loop target", "a for loop binds one name: "
                             "for i in tile(n):")
        start, extent, step, window = self._domain(s.iter)
        name = s.target.id
        carried = self._carries(s.body, name)
        if not carried:
            raise self.error(s, "for loop", "the loop assigns no name bound before it, so its "
                             "value would be unused (a HIR loop's only result is its carried "
                             "values); bind the accumulator before the loop")
        inits = []
        for n, _node in carried:
            v = self.env[n]
            if isinstance(v, RangeSlice):
                v = v.var
            inits.append(v)
        saved = dict(self.env)
        ivar = Var(name, None)
        ivar.stamp(TensorType((), DType.I32))
        phis = [Var(n, None) for n, _ in carried]
        for phi, init in zip(phis, inits, strict=True):
            try:  # type the phi now so parse-time type queries inside the body succeed
                phi.stamp(infer_expr(init, self.session))
            except TilefoundryError:
                pass
        self.env[name] = RangeSlice(ivar, step) if window else ivar
        for (n, _), phi in zip(carried, phis, strict=True):
            self.env[n] = phi
        self.loop_depth += 1
        try:
            self.block(s.body)
            yields = []
            for n, node in carried:
                v = self.env[n]
                yields.append(self.ir(v, node, f"the carried value {n}"))
        finally:
            self.loop_depth -= 1
            self.env = saved
        body = yields[0] if len(yields) == 1 else TupleNode(tuple(yields))
        try:
            loop = GridRegionExpr(ivar, tuple(phis), tuple(inits), body, tuple(yields), extent,
                                  step, start)
        except IRError as e:
            raise self.error(s, "for loop", str(e)) from None
        if len(carried) == 1:
            self.env[carried[0][0]] = loop
        else:
            for k, (n, _) in enumerate(carried):
                self.env[n] = TupleGetItem(loop, k)

    def _domain(self, it: ast.AST) -> tuple[Any, Any, Any, bool]:
        """(start, extent, step, binds a window) of ``tile(...)`` / ``range(...)``."""
        form = None
        if isinstance(it, ast.Call):
            try:
                f = self.expr(it.func)
            except DSLError:
                f = None
            if isinstance(f, Intrinsic) and f.dsl_name in (Builtin.TILE.value,
                                                           Builtin.RANGE.value):
                form = f.dsl_name
        if form is None:
            raise self.error(it, "loop iterable", "a for loop iterates over tile(n), "
                             "tile(n, step) or range(start, stop, step)")
        assert isinstance(it, ast.Call)
        args = [self.static(a, "a ShapeDim") for a in it.args]
        kws = {k.arg: self.static(k.value, "a ShapeDim") for k in it.keywords}
        if form == "tile":
            if set(kws) - {"step"} or len(args) not in (1, 2) or (len(args) == 2 and kws):
                raise self.error(it, "tile(...)", "takes tile(extent) or tile(extent, step) / "
                                 "tile(extent, step=step)")
            start, extent = 0, args[0]
            step = args[1] if len(args) == 2 else kws.get("step", 1)
            window = len(args) == 2 or "step" in kws
        else:
            if kws or len(args) not in (1, 2, 3):
                raise self.error(it, "range(...)", "takes range(stop), range(start, stop) or "
                                 "range(start, stop, step)")
            start, extent, step = (0, args[0], 1) if len(args) == 1 else \
                (args[0], args[1], args[2] if len(args) == 3 else 1)
            window = False
        for v, what in ((start, "start"), (extent, "extent"), (step, "step")):
            if not is_shape_dim(v):
                raise self.error(it, f"{form}(...)", f"the {what} must be a ShapeDim (an int, "
                                 f"a DimVar or a dim expression), got {v!r}")
        return start, extent, step, window

    def _carries(self, body: list[ast.stmt], loopvar: str) -> list[tuple[str, ast.AST]]:
        """The outer-scope names the body assigns, in order of first assignment."""
        out: list[tuple[str, ast.AST]] = []
        seen: set[str] = set()

        def target(t: ast.AST) -> None:
            if not isinstance(t, ast.Name):
                return
            if t.id == loopvar:
                raise self.error(t, "assignment to the loop variable",
                                 f"{loopvar} is the induction variable of the enclosing loop")
            if t.id in self.env and t.id not in seen:
                v = self.env[t.id]
                if not isinstance(v, Expr):
                    raise self.error(t, f"rebinding {t.id} inside a loop",
                                     f"{t.id} is bound to a static value or loop variable "
                                     f"before the loop; only tensor values can be carried")
                seen.add(t.id)
                out.append((t.id, t))

        def visit(stmts: list[ast.stmt]) -> None:
            for st in stmts:
                if isinstance(st, ast.Assign):
                    if len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                        target(st.targets[0])
                    else:
                        for t in st.targets:
                            for e in (t.elts if isinstance(t, ast.Tuple | ast.List) else [t]):
                                if isinstance(e, ast.Name) and e.id in self.env:
                                    raise self.error(
                                        e, "tuple assignment to an outer-scope name in a loop",
                                        f"{e.id} is bound before the loop; a loop carries a "
                                        f"name only through a single-name assignment "
                                        f"({e.id} = ...)")
                elif isinstance(st, ast.AugAssign):
                    target(st.target)
                elif isinstance(st, ast.For | ast.With):
                    visit(st.body)

        visit(body)
        return out

    # --- with Mesh ----------------------------------------------------------------------
    def _with(self, s: ast.With) -> Expr | None:
        """'A with Mesh(topology="cta", ...) as cta: inside the body names a level of the
        execution domain the owning Module declares ... the scope creates a parser-lexical mesh
        binding' (HIR spec §1.1). The level is checked when the function enters a Module."""
        bound: list[tuple[str, Any]] = []
        for item in s.items:
            ce = item.context_expr
            f = None
            if isinstance(ce, ast.Call):
                try:
                    f = self.expr(ce.func)
                except DSLError:
                    f = None
            if f is not Mesh:
                raise self.error(ce, "with statement", "only `with Mesh(topology=..., "
                                 "axis_names=..., axis_extents=...) as name:` is supported")
            assert isinstance(ce, ast.Call)
            mesh = self.static_call(Mesh, ce)
            if not isinstance(item.optional_vars, ast.Name):
                raise self.error(ce, f"with Mesh(topology={mesh.topology!r})",
                                 "bind the mesh to a name: with Mesh(...) as m:")
            self.mesh_uses.append(MeshUse(mesh, ce, f"with Mesh(topology={mesh.topology!r})",
                                          self.src))
            n = item.optional_vars.id
            bound.append((n, self.env.get(n, _MISSING)))
            self.env[n] = MeshBinding(mesh, n)
        try:
            return self.block(s.body)
        finally:
            for n, prev in reversed(bound):
                if prev is _MISSING:
                    self.env.pop(n, None)
                else:
                    self.env[n] = prev
                self.ended_meshes[n] = s.lineno + self.src.line_offset

    def unknown_name(self, name: str, node: ast.AST) -> DSLError:
        if name in self.ended_meshes:
            return self.error(node, f"mesh {name}", f"the mesh binding {name} is not active "
                              f"here: its `with Mesh(...) as {name}:` block ended (line "
                              f"{self.ended_meshes[name]})")
        return super().unknown_name(name, node)

    def sequence(self, node: ast.Tuple | ast.List) -> Any:
        """A tuple display: static when every element is static (a shape), else a Tuple of
        tensor values."""
        vals = super().sequence(node)
        if not any(_is_ir(v) for v in vals):
            return vals
        return TupleNode(tuple(self.ir(v, e, "a tuple element (all tensor values)")
                               for v, e in zip(vals, node.elts, strict=True)))

    # --- values -------------------------------------------------------------------------
    def ir(self, v: Any, node: ast.AST, what: str = "a tensor value") -> Expr:
        """``v`` as an IR value: Exprs pass, a window is its induction variable, a Python int
        is a rank-0 i32 constant, a bool a rank-0 bool constant, a numpy array a Constant."""
        if isinstance(v, Expr):
            return v
        if isinstance(v, RangeSlice):
            return v.var
        if isinstance(v, bool):
            return Constant(np.array(v, dtype=np.bool_))
        if isinstance(v, int):
            if not -2**31 <= v < 2**31:
                raise self.error(node, f"integer {_short(v)}", "a Python int is a rank-0 i32 "
                                 "constant "
                                 "and this one is out of range; write const(v, i64)")
            return Constant(np.array(v, dtype=np.int32))
        if isinstance(v, float):
            raise self.error(node, f"float {v!r}", "a Python float takes the other operand's "
                             "dtype in a binary op; here there is none: write const(v, f32)")
        if isinstance(v, np.ndarray):
            try:
                return Constant(np.array(v, order="C", copy=True))
            except IRError as e:
                raise self.error(node, "constant", str(e)) from None
        shown = repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."
        raise self.error(node, _unparse(node), f"expected {what}, got "
                         f"{type(v).__name__} {shown}")

    def type_of(self, e: Expr, node: ast.AST, why: str, soft: bool = False) -> Any:
        try:
            return infer_expr(e, self.session)
        except TilefoundryError as err:
            if soft:
                return None
            raise self.error(node, _unparse(node), f"{why} needs the operand's type, and type "
                             f"inference rejected it: {err}") from None

    def is_tuple(self, e: Expr, node: ast.AST) -> bool:
        s = structurally_tuple(e)
        if s is not None:
            return s
        return isinstance(self.type_of(e, node, "a subscript", soft=True), TupleType)

    # --- operators ----------------------------------------------------------------------
    def binop(self, node: ast.BinOp) -> Any:
        return self.binop_values(node, self.expr(node.left), self.expr(node.right))

    def binop_values(self, node: ast.BinOp, left: Any, right: Any) -> Any:
        if not _is_ir(left) and not _is_ir(right):
            return self.static_binop(node, left, right)
        t = type(node.op)
        if t not in _BINOPS:
            raise self.error(node, f"operator {_OP_SYMBOL[t]}",
                             f"{_OP_SYMBOL[t]} is not a DSL operator on tensors (operators: "
                             f"+ - * / @ & | ^ and comparisons)")
        kind = _BINOPS[t]
        if kind is None:  # @
            a = self.ir(left, node.left)
            b = self.ir(right, node.right)
            return Call(MatMul(), (a, b))
        return self.binary(node, kind, left, right, node.left, node.right)

    def binary(self, node: ast.AST, kind: BinaryKind, left: Any, right: Any,
               lnode: ast.AST, rnode: ast.AST) -> Expr:
        left = left.var if isinstance(left, RangeSlice) else left
        right = right.var if isinstance(right, RangeSlice) else right
        if isinstance(left, Expr) and not isinstance(right, Expr):
            right = self.scalar(right, left, rnode, node)
        elif isinstance(right, Expr) and not isinstance(left, Expr):
            left = self.scalar(left, right, lnode, node)
        return Call(Binary(kind), (self.ir(left, lnode), self.ir(right, rnode)))

    def scalar(self, v: Any, other: Expr, vnode: ast.AST, node: ast.AST) -> Any:
        """A static operand beside a tensor: 'A Python float scalar is given the other operand's
        float dtype by the authoring surface, before it is an operand at all (parser §1.9); a
        Python integer is not' (HIR spec, Binary)."""
        if isinstance(v, float):
            t = self.type_of(other, node, "a Python float scalar")
            if not isinstance(t, TensorType) or not t.dtype.is_float:
                got = t.dtype if isinstance(t, TensorType) else type(t).__name__
                raise self.error(vnode, f"float scalar {v!r}",
                                 f"a Python float takes the other operand's float dtype, but "
                                 f"the other operand has dtype {got}")
            return Constant(np.asarray(v, dtype=t.dtype.storage))
        if isinstance(v, int) and not isinstance(v, bool):
            t = self.type_of(other, node, "", soft=True)
            if isinstance(t, TensorType) and t.dtype.is_float:
                raise self.error(vnode, f"int scalar {_short(v)}",
                                 f"a Python int is not given the other operand's dtype (it is a "
                                 f"rank-0 i32 constant) and the other operand is {t.dtype}; "
                                 f"write it as a float literal"
                                 + (f" ({float(v)!r})" if v.bit_length() <= 64 else ""))
        return v

    def unaryop(self, node: ast.UnaryOp) -> Any:
        v = self.expr(node.operand)
        if not _is_ir(v):
            return self.static_unary(node, v)
        x = self.ir(v, node.operand)
        if isinstance(node.op, ast.USub):
            return Call(Unary(UnaryKind.NEG), (x,))
        if isinstance(node.op, ast.UAdd):
            return x
        if isinstance(node.op, ast.Invert):
            return Call(Unary(UnaryKind.LOGICAL_NOT), (x,))
        raise self.error(node, "not", "`not` is not elementwise; write ~x (logical_not)")

    def compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise self.error(node, "chained comparison", "write one comparison per operator, "
                             "e.g. (a < b) & (b < c)")
        kind = _CMPOPS.get(type(node.ops[0]))
        if kind is None:
            raise self.error(node, f"comparison {type(node.ops[0]).__name__}",
                             "is / in are not elementwise; use == != < <= > >=")
        left, right = self.expr(node.left), self.expr(node.comparators[0])
        if not _is_ir(left) and not _is_ir(right):
            raise self.error(node, "comparison", "comparisons of static values are not "
                             "supported")
        return self.binary(node, kind, left, right, node.left, node.comparators[0])

    # --- calls --------------------------------------------------------------------------
    def call(self, node: ast.Call) -> Any:
        fn = self.expr(node.func)
        if isinstance(fn, Intrinsic):
            name = fn.dsl_name
            if name in BY_NAME:
                return self.op_call(BY_NAME[name], node)
            if name == Builtin.CONST.value:
                return self.const_call(node, bits=False)
            if name == Builtin.CONST_BITS.value:
                return self.const_call(node, bits=True)
            if name == Builtin.TUPLE_GET_ITEM.value:
                return self.tuple_get_item(node)
            if name == Builtin.FLOAT.value:
                return self.float_call(node)
            if name == Builtin.MAP.value:
                return map_call(self, node)
            if name == Builtin.TOPK_MERGE.value:
                return topk_call(self, node)
            raise self.error(node, f"{name}(...)", f"{name}(...) is only a for-loop iterable: "
                             f"for i in {name}(...):")
        callee = self.resolve_callee(fn, node, self.session)
        if callee is not None:
            return self.function_call(callee, node)
        if id(fn) in STATIC_CALLABLE_IDS:
            return self.static_call(fn, node)
        if _is_ir(fn):
            raise self.error(node, "call", "a tensor value is not callable")
        raise self.error(node, f"call of {_unparse(node.func)}",
                         f"{_unparse(node.func)} is {type(fn).__name__} {fn!r}, not a DSL op, "
                         f"a @func function or a static constructor")

    def function_call(self, callee: Function, node: ast.Call) -> Expr:
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.error(node, f"call of @{callee.name}", "pass arguments positionally")
        if len(node.args) != len(callee.params):
            raise self.error(node, f"call of @{callee.name}",
                             f"{len(node.args)} argument(s) for {len(callee.params)} "
                             f"parameter(s) {tuple(p.name for p in callee.params)}")
        args = tuple(self.ir(self.expr(a), a, "an argument") for a in node.args)
        return Call(callee, args)

    def op_call(self, sp: Spelling, node: ast.Call) -> Expr:
        if any(isinstance(a, ast.Starred) for a in node.args) or \
                any(k.arg is None for k in node.keywords):
            raise self.error(node, f"{sp.name}(...)", "*args / **kwargs are not supported")
        inputs_ast: list[ast.AST]
        if sp.variadic == "positional":
            inputs_ast, attr_ast = list(node.args), []
            if len(inputs_ast) < sp.inputs:
                raise self.error(node, f"{sp.name}(...)", f"takes at least {sp.inputs} tensor "
                                 f"inputs")
        elif sp.variadic == "sequence":
            if not node.args or not isinstance(node.args[0], ast.Tuple | ast.List):
                raise self.error(node, f"{sp.name}(...)", f"takes a tuple of inputs first: "
                                 f"{sp.name}((a, b), axis=0)")
            inputs_ast, attr_ast = list(node.args[0].elts), list(node.args[1:])
        else:
            inputs_ast, attr_ast = list(node.args[:sp.inputs]), list(node.args[sp.inputs:])
        if len(attr_ast) > len(sp.attrs):
            raise self.error(node, f"{sp.name}(...)", f"too many arguments: {sp.name} takes "
                             f"{sp.inputs} input(s) and the attributes {sp.attrs}")
        attrs = {a: self.static(v, f"the attribute {a}") for a, v in zip(sp.attrs, attr_ast,
                                                                          strict=False)}
        by_name: dict[str, ast.AST] = {}
        for k in node.keywords:
            assert k.arg is not None
            if k.arg in sp.attrs:
                if k.arg in attrs:
                    raise self.error(k, f"{sp.name}(...)", f"{k.arg} is given twice")
                attrs[k.arg] = self.static(k.value, f"the attribute {k.arg}")
            elif sp.variadic is None and k.arg in sp.op.INPUTS[:sp.inputs]:
                by_name[k.arg] = k.value
            else:
                raise self.error(k, f"{sp.name}(...)", f"unknown keyword {k.arg}; {sp.name} "
                                 f"takes the inputs {sp.op.INPUTS} and the attributes "
                                 f"{sp.attrs}")
        if by_name:
            names = sp.op.INPUTS[:sp.inputs]
            for i in range(len(inputs_ast), sp.inputs):
                if names[i] not in by_name:
                    break
                inputs_ast.append(by_name.pop(names[i]))
            if by_name:
                raise self.error(node, f"{sp.name}(...)", f"inputs {sorted(by_name)} are given "
                                 f"both positionally and by name, or out of order")
        if sp.variadic is None and len(inputs_ast) != sp.inputs:
            raise self.error(node, f"{sp.name}(...)", f"takes {sp.inputs} tensor input(s) "
                             f"{sp.op.INPUTS[:sp.inputs]}, got {len(inputs_ast)}")
        raw = [self.expr(a) for a in inputs_ast]
        try:
            op = sp.build(attrs)
        except (TilefoundryError, TypeError, ValueError) as e:
            raise self.error(node, f"{sp.name}(...)", str(e)) from None
        if isinstance(op, Binary):
            return self.binary(node, op.kind, raw[0], raw[1], inputs_ast[0], inputs_ast[1])
        args = tuple(self.ir(v, a, f"a tensor input of {sp.name}")
                     for v, a in zip(raw, inputs_ast, strict=True))
        try:
            return Call(op, args)
        except IRError as e:
            raise self.error(node, f"{sp.name}(...)", str(e)) from None

    def const_call(self, node: ast.Call, bits: bool) -> Expr:
        what = "const_bits" if bits else "const"
        args = [self.static(a) for a in node.args]
        kws = {k.arg: self.static(k.value) for k in node.keywords}
        if len(args) == 1 and "dtype" in kws:
            args.append(kws.pop("dtype"))
        if len(args) != 2 or set(kws) - {"shape"}:
            raise self.error(node, f"{what}(...)", f"write {what}(value, dtype) or "
                             f"{what}(value, dtype, shape=(...))")
        value, dt = args
        dt = DType.BOOL if dt is bool else dt
        if isinstance(dt, str):
            dt = DType.parse(dt)
        if not isinstance(dt, DType):
            raise self.error(node, f"{what}(...)", f"the dtype must be a dtype name, got {dt!r}")
        try:
            if bits:
                arr = np.asarray(value, dtype=bits_dtype(dt)).view(dt.storage)
            else:
                arr = np.asarray(value, dtype=dt.storage)
            if "shape" in kws:
                arr = arr.reshape(tuple(kws["shape"]))
            return Constant(np.array(arr, order="C", copy=True))
        except (TilefoundryError, TypeError, ValueError, OverflowError) as e:
            raise self.error(node, f"{what}(...)", str(e)) from None

    def tuple_get_item(self, node: ast.Call) -> Expr:
        if len(node.args) != 2 or node.keywords:
            raise self.error(node, "tuple_get_item(...)", "write tuple_get_item(t, index)")
        t = self.ir(self.expr(node.args[0]), node.args[0], "a tuple value")
        k = self.static(node.args[1])
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise self.error(node.args[1], "tuple_get_item(...)", f"the index must be a "
                             f"non-negative int, got {k!r}")
        return TupleGetItem(t, k)

    # --- subscripts ---------------------------------------------------------------------
    def subscript(self, node: ast.Subscript) -> Any:
        base = self.expr(node.value)
        if not _is_ir(base):
            return super().subscript(node)
        if isinstance(base, RangeSlice):
            raise self.error(node, "subscript of a tile window", "a tile window variable "
                             "indexes tensors (x[i]); it is not itself indexable")
        entries = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if self.is_tuple(base, node.value):
            if len(entries) != 1:
                raise self.error(node, "tuple subscript", "index a tuple with one int")
            k = self.static(entries[0], "an int index")
            if not isinstance(k, int) or isinstance(k, bool):
                raise self.error(node, "tuple subscript", f"the index must be an int, got {k!r}")
            if k < 0:
                t = self.type_of(base, node, "a negative tuple index")
                k += len(t.fields)
                if k < 0:
                    raise self.error(node, "tuple subscript", "index out of range")
            return TupleGetItem(base, k)
        return self.tensor_subscript(node, base, entries)

    def tensor_subscript(self, node: ast.Subscript, base: Expr, entries: list[ast.AST]) -> Expr:
        """``x[...]``: slices and static indices resolve to Slice (an index drops its axis
        through a Reshape, as numpy does); one tensor index is a Gather on its axis; a tile
        window ``x[i]`` is a Gather of the window ``i + [0, step)``."""
        kinds: list[tuple] = []
        for e in entries:
            if isinstance(e, ast.Slice):
                lo = None if e.lower is None else self.static(e.lower, "a slice bound")
                hi = None if e.upper is None else self.static(e.upper, "a slice bound")
                st = None if e.step is None else self.static(e.step, "a slice step")
                for v, what in ((lo, "start"), (hi, "stop")):
                    if v is not None and not is_shape_dim(v):
                        raise self.error(e, "slice", f"the {what} must be a ShapeDim, got "
                                         f"{v!r}")
                if st is not None and (not isinstance(st, int) or isinstance(st, bool) or
                                       st < 1):
                    raise self.error(e, "slice", f"the step must be a positive int, got {st!r}")
                kinds.append(("slice", lo, hi, st, e))
            elif isinstance(e, ast.Constant) and e.value is Ellipsis:
                kinds.append(("ellipsis", e))
            else:
                v = self.expr(e)
                if isinstance(v, RangeSlice):
                    kinds.append(("window", v, e))
                elif isinstance(v, Expr):
                    kinds.append(("gather", v, e))
                elif is_shape_dim(v):
                    kinds.append(("index", v, e))
                elif v is None:
                    raise self.error(e, "subscript None", "new axes (None) are not supported; "
                                     "use reshape")
                else:
                    raise self.error(e, "subscript", f"an index must be an int, a ShapeDim, a "
                                     f"slice or a tensor, got {v!r}")
        if sum(1 for k in kinds if k[0] == "ellipsis") > 1:
            raise self.error(node, "subscript", "at most one ... per subscript")
        gathers = [(i, k) for i, k in enumerate(kinds) if k[0] in ("gather", "window")]
        if gathers:
            return self._gather_subscript(node, base, kinds, gathers)
        need_type = any(k[0] in ("ellipsis", "index") or (k[0] == "slice" and k[2] is None)
                        for k in kinds)
        t = self.type_of(base, node.value, "this subscript", soft=not need_type)
        if t is not None and not isinstance(t, TensorType):
            raise self.error(node, "subscript", f"cannot subscript a value of type "
                             f"{type(t).__name__}")
        rank = t.rank if t is not None else len(kinds)
        n_axes = sum(1 for k in kinds if k[0] != "ellipsis")
        if n_axes > rank:
            raise self.error(node, "subscript", f"{n_axes} indices for a rank-{rank} tensor")
        expanded: list[tuple] = []
        for k in kinds:
            if k[0] == "ellipsis":
                expanded.extend([("slice", None, None, None, k[1])] * (rank - n_axes))
            else:
                expanded.append(k)
        expanded.extend([("slice", None, None, None, node)] * (rank - len(expanded)))
        begin, end, steps, dropped = [], [], [], []
        explicit_step = False
        for a, k in enumerate(expanded):
            if k[0] == "slice":
                _, lo, hi, st, _e = k
                begin.append(0 if lo is None else lo)
                end.append(t.shape[a] if hi is None else hi)  # type: ignore[union-attr]
                explicit_step |= st is not None
                steps.append(1 if st is None else st)
            else:
                _, d, e = k
                if isinstance(d, int):
                    ext = t.shape[a]  # type: ignore[union-attr]
                    if d < 0:
                        if not isinstance(ext, int):
                            raise self.error(e, f"index {d}", "a negative index against a "
                                             "symbolic extent cannot be normalized")
                        d += ext
                    if isinstance(ext, int) and not 0 <= d < ext:
                        raise self.error(e, f"index {k[1]}", f"out of range for axis {a} of "
                                         f"extent {ext}")
                begin.append(d)
                end.append(d + 1)
                steps.append(1)
                dropped.append(a)
        try:
            sl = Call(Slice(tuple(begin), tuple(end), tuple(steps) if explicit_step else None),
                      (base,))
        except (IRError, TypeError) as e:
            raise self.error(node, "subscript", str(e)) from None
        if not dropped:
            return sl
        st = self.type_of(sl, node, "an integer index")
        new_shape = tuple(d for a, d in enumerate(st.shape) if a not in dropped)
        return Call(Reshape(new_shape), (sl,))

    def _gather_subscript(self, node: ast.Subscript, base: Expr, kinds: list[tuple],
                          gathers: list[tuple[int, tuple]]) -> Expr:
        if len(gathers) > 1:
            raise self.error(node, "subscript", "at most one tensor index per subscript (it "
                             "is a Gather along its axis)")
        pos, g = gathers[0]
        for k in kinds:
            if k[0] == "slice" and any(v is not None for v in k[1:4]):
                raise self.error(k[4], "subscript", "a tensor index combines only with full "
                                 "slices `:`; slice first, then index")
            if k[0] == "index":
                raise self.error(k[2], "subscript", "a tensor index combines only with full "
                                 "slices `:`; slice first, then index")
        ell = [i for i, k in enumerate(kinds) if k[0] == "ellipsis"]
        if ell and ell[0] < pos:
            t = self.type_of(base, node.value, "`...` before a tensor index")
            axis = t.rank - (len(kinds) - pos)
        else:
            axis = pos
        if g[0] == "window":
            rs: RangeSlice = g[1]
            if not isinstance(rs.size, int):
                raise self.error(g[2], "tile window", f"a window subscript needs a static "
                                 f"step, got {rs.size}")
            idx = window_index(rs.var, rs.size)
        else:
            idx = g[1]
        return Call(Gather(axis), (base, idx))
