"""Canonical, deterministic text form of HIR modules (reproducers, diffs, golden tests).

The text is a pure function of the module's structure and of its sharing (object identity):

- every Expr node except a Var is one SSA let-binding ``%k = ...``, numbered per function in
  post-order (operands left to right), so a node shared by several users prints exactly once
  and a DAG of any depth prints without recursion;
- types print in full, layouts and shard attrs included, dims with ``dim_str``; every DimVar a
  function mentions is listed once with its envelope on the function's ``dims`` line;
- a GridRegionExpr prints as a block: its header names the induction variable, the domain and
  the carry chain (phi = init), then the body nodes first reached from the body or the yields,
  then ``body`` and ``yield`` lines;
- a variant's display label (non-canonical metadata) prints as a trailing ``# label:`` comment:
  printing back to source preserves it, while ``==`` / hashing ignore it. ``labels=False``
  leaves the comments out, ``show_types=True`` adds each node's inferred type as a comment.

Nothing in the text depends on ids, dict or set iteration order, or the run: the same module
prints the same text, and a structurally equal module built the same way prints the same text.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from typing import Any

import numpy as np

from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.formats import bits_dtype, dtype_of
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GridRegionExpr,
    Module,
    Op,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.types import (
    Broadcast,
    CallableType,
    DimExpr,
    DimType,
    DimVar,
    IRError,
    Layout,
    Mesh,
    Partial,
    ShapeType,
    ShardLayout,
    Split,
    TensorType,
    Topology,
    TupleType,
    dim_str,
    free_dimvars,
)

__all__ = ["function_text", "to_text", "type_str", "value_str"]


# =============================================================================================
# types and attribute values
# =============================================================================================
def _tup(items: list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _nested(t: Any) -> str:
    """A (possibly nested) tuple of ints, as Python writes it."""
    if isinstance(t, tuple):
        return _tup([_nested(x) for x in t])
    return str(t)


class _Dims:
    """Collects the DimVars a text mentions, so their envelopes print once."""

    def __init__(self) -> None:
        self.seen: set[DimVar] = set()

    def dim(self, d: Any) -> str:
        if isinstance(d, DimVar | DimExpr):
            self.seen |= free_dimvars(d)
        return dim_str(d)

    def line(self) -> str | None:
        if not self.seen:
            return None
        dvs = sorted(self.seen, key=lambda v: (v.name, v.lo, v.hi))
        return "dims " + ", ".join(f"{v.name} in [{v.lo}, {v.hi})" for v in dvs)


def _layout_str(lay: Layout) -> str:
    st = "None" if lay.strides is None else _nested(lay.strides)
    return f"Layout({_nested(lay.shape)}, strides={st})"


def _mesh_str(m: Mesh) -> str:
    axes = ", ".join(f"{n}={e}" for n, e in zip(m.axis_names, m.axis_extents, strict=True))
    return f"Mesh({m.topology}, {axes})"


def _attr_str(a: Any) -> str:
    if isinstance(a, Split):
        return f"Split({a.position})"
    if isinstance(a, Partial):
        return f"Partial({a.reduction})"
    if isinstance(a, Broadcast):
        return "Broadcast"
    return repr(a)


def _shard_str(s: ShardLayout) -> str:
    return (f"ShardLayout({_mesh_str(s.mesh)}, {_tup([_attr_str(a) for a in s.attrs])}, "
            f"{_layout_str(s.layout)})")


def type_str(t: Any, dims: _Dims | None = None) -> str:
    """The full text of an IR type (``?`` for a missing one)."""
    dims = dims or _Dims()
    if t is None:
        return "?"
    if isinstance(t, TensorType):
        parts = [_tup([dims.dim(d) for d in t.shape]) if t.shape else "()", str(t.dtype),
                 t.storage.value]
        if isinstance(t.layout, ShardLayout):
            parts.append(_shard_str(t.layout))
        elif isinstance(t.layout, Layout):
            parts.append(_layout_str(t.layout))
        return f"Tensor[{', '.join(parts)}]"
    if isinstance(t, TupleType):
        return f"Tuple[{', '.join(type_str(f, dims) for f in t.fields)}]"
    if isinstance(t, CallableType):
        ps = ", ".join(type_str(p, dims) for p in t.params)
        return f"Fn[({ps}) -> {type_str(t.result, dims)}]"
    if isinstance(t, DimType):
        return "Dim"
    if isinstance(t, ShapeType):
        return f"Shape[{t.rank}]"
    return repr(t)


def _array_str(v: np.ndarray) -> str:
    try:
        dt = dtype_of(v)
        bits = v.view(bits_dtype(dt)).reshape(-1)
        width = bits.dtype.itemsize * 2
        body = " ".join(f"{int(b):0{width}x}" for b in bits.tolist())
        return f"<{dt}, {_tup([str(s) for s in v.shape]) if v.shape else '()'}>[{body}]"
    except TilefoundryError:  # a non-IR array in an attribute: numpy's own text
        return np.array2string(v, threshold=np.inf)


def value_str(v: Any, dims: _Dims | None = None) -> str:
    """Deterministic text of an op attribute value."""
    dims = dims or _Dims()
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, DimVar | DimExpr | int):
        return dims.dim(v)
    if isinstance(v, float | str):
        return repr(v)
    if isinstance(v, enum.Enum):
        return str(v.value) if isinstance(v.value, str | int) else v.name
    if isinstance(v, tuple | list):
        return _tup([value_str(x, dims) for x in v]) if v else "()"
    if isinstance(v, TensorType | TupleType | CallableType | DimType | ShapeType):
        return type_str(v, dims)
    if isinstance(v, ShardLayout):
        return _shard_str(v)
    if isinstance(v, Layout):
        return _layout_str(v)
    if isinstance(v, Mesh):
        return _mesh_str(v)
    if isinstance(v, Split | Partial | Broadcast):
        return _attr_str(v)
    if isinstance(v, np.ndarray):
        return _array_str(v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        inner = ", ".join(f"{f.name}={value_str(getattr(v, f.name), dims)}"
                          for f in dataclasses.fields(v))
        return f"{type(v).__name__}({inner})"
    return repr(v)


def _op_str(op: Op, dims: _Dims) -> str:
    attrs = ", ".join(f"{f.name}={value_str(getattr(op, f.name), dims)}"
                      for f in dataclasses.fields(op))
    return f"{type(op).__name__}({attrs})" if attrs else type(op).__name__


# =============================================================================================
# functions and modules
# =============================================================================================
def _same(a: Function, b: Function) -> bool:
    """Structural equality, or False where it is undefined (an unsealed prototype cannot be
    hashed): the printer never raises on a module it can print."""
    try:
        return a == b
    except IRError:
        return False


class _Printer:
    def __init__(self, module: Module | None, labels: bool, show_types: bool) -> None:
        self.module = module
        self.labels = labels
        self.show_types = show_types
        self.extra: list[Function] = []  # referenced Functions that are not module functions
        self.extra_names: dict[int, str] = {}

    # --- callee names -------------------------------------------------------------------
    def callee_name(self, fn: Function) -> str:
        if self.module is not None:
            for f in self.module.functions:
                if f is fn:
                    return f"@{fn.name}"
            for f in self.module.functions:
                if f.name == fn.name and _same(f, fn):
                    return f"@{fn.name}"
        if id(fn) not in self.extra_names:
            for g in self.extra:
                if g.name == fn.name and _same(g, fn):
                    self.extra_names[id(fn)] = self.extra_names[id(g)]
                    break
            else:
                k = sum(1 for g in self.extra if g.name == fn.name) + 1
                self.extra_names[id(fn)] = f"@{fn.name}#{k}"
                self.extra.append(fn)
        return self.extra_names[id(fn)]

    # --- one function -------------------------------------------------------------------
    def signature(self, fn: Function, dims: _Dims) -> str:
        ps = ", ".join(f"{p.name}: {type_str(p.type, dims)}" for p in fn.params)
        return f"({ps}) -> {type_str(fn.return_type, dims)}"

    def label(self, fn: Function) -> str:
        return f"  # label: {fn.label}" if self.labels and fn.label is not None else ""

    def function(self, fn: Function, name: str, indent: int = 0) -> list[str]:
        pad = "  " * indent
        dims = _Dims()
        sig = self.signature(fn, dims)
        if fn.specializations:
            head = f"{pad}variant {name}[{fn.canonical_signature}]{sig}:"
        elif fn.body is None:
            on = sorted({p.dim_var for v in fn.variants for p in v.specializations})
            head = f"{pad}def {name}{sig}: dispatch" + (f" on {', '.join(on)}" if on else "")
        else:
            head = f"{pad}def {name}{sig}:"
        head += self.label(fn)
        body: list[str] = []
        if fn.body is not None:
            body = self.body(fn, dims, indent + 1)
        elif not fn.variants:
            body = [f"{pad}  pass"]
        dline = dims.line()
        lines = [head] + ([f"{pad}  {dline}"] if dline else []) + body
        for v in fn.variants:
            lines.extend(self.function(v, name, indent + 1))
        return lines

    def body(self, fn: Function, dims: _Dims, indent: int) -> list[str]:
        names: dict[int, str] = {}
        params = {id(p) for p in fn.params}
        binders: set[int] = set()
        out: list[str] = []
        counter = 0

        def ref(e: Expr) -> str:
            if isinstance(e, Var):
                return e.name
            if isinstance(e, Function):
                return self.callee_name(e)
            return names[id(e)]

        def comment(e: Expr) -> str:
            if self.show_types and e.has_type:
                return f"  # : {type_str(e.checked_type, dims)}"
            return ""

        def var_decl(v: Var) -> str:
            return v.name if v.type is None else f"{v.name}: {type_str(v.type, dims)}"

        # frames: ("visit", node, indent) | ("emit", node, indent) | ("open"/"close", loop, indent)
        stack: list[tuple[str, Any, int]] = [("visit", fn.body, indent)]
        ret = fn.body
        while stack:
            act, node, ind = stack.pop()
            pad = "  " * ind
            if act == "visit":
                if id(node) in names or isinstance(node, Function):
                    continue
                if isinstance(node, Var):
                    if id(node) not in params and id(node) not in binders and \
                            id(node) not in names:
                        names[id(node)] = node.name
                        out.append(f"{pad}free {var_decl(node)}{comment(node)}")
                    continue
                if isinstance(node, GridRegionExpr):
                    stack.append(("close", node, ind))
                    for y in reversed(node.yield_values):
                        stack.append(("visit", y, ind + 1))
                    stack.append(("visit", node.body, ind + 1))
                    stack.append(("open", node, ind))
                    stack.extend(("visit", a, ind) for a in reversed(node.init_args))
                    continue
                stack.append(("emit", node, ind))
                kids = list(node.args) if isinstance(node, Call) else \
                    list(node.fields) if isinstance(node, Tuple) else \
                    [node.tuple_value] if isinstance(node, TupleGetItem) else []
                stack.extend(("visit", k, ind) for k in reversed(kids))
            elif act == "emit":
                if id(node) in names:
                    continue
                names[id(node)] = f"%{counter}"
                counter += 1
                out.append(f"{pad}{names[id(node)]} = {self.node(node, ref, dims)}"
                           f"{comment(node)}")
            elif act == "open":
                names[id(node)] = f"%{counter}"
                counter += 1
                binders.add(id(node.induction_var))
                binders.update(id(v) for v in node.carried_args)
                carry = ", ".join(
                    f"{var_decl(v) if v is not None else '?'} = "
                    f"{ref(a) if a is not None else '?'}"
                    for v, a in itertools.zip_longest(node.carried_args, node.init_args))
                rng = ", ".join(dims.dim(d) for d in (node.start, node.extent, node.step))
                out.append(f"{pad}{names[id(node)]} = grid_region "
                           f"{var_decl(node.induction_var)} in range({rng}) "
                           f"carry({carry}) {{{comment(node)}")
            else:  # close
                out.append(f"{pad}  body {ref(node.body)}")
                out.append(f"{pad}  yield {', '.join(ref(y) for y in node.yield_values)}")
                out.append(f"{pad}}}")
        out.append(f"{'  ' * indent}return {ref(ret)}")
        return out

    def node(self, e: Expr, ref, dims: _Dims) -> str:
        if isinstance(e, Call):
            args = ", ".join(ref(a) for a in e.args)
            if isinstance(e.op, Function):
                return f"call {self.callee_name(e.op)}({args})"
            return f"{_op_str(e.op, dims)}({args})"
        if isinstance(e, Tuple):
            return f"tuple({', '.join(ref(f) for f in e.fields)})"
        if isinstance(e, TupleGetItem):
            return f"get({ref(e.tuple_value)}, {e.index})"
        if isinstance(e, Constant):
            return f"constant{_array_str(e.value)}"
        return type(e).__name__  # pragma: no cover - every HIR node kind is handled above


def _topology_str(t: Topology) -> str:
    return "[" + ", ".join(f"{v.name}={v.extent}" for v in t.levels) + "]"


def to_text(module: Module, *, labels: bool = True, show_types: bool = False) -> str:
    """The canonical text of ``module`` (see the module docstring)."""
    from tilefoundry.limits import deep_recursion
    from tilefoundry.semantics.validate import validate_module

    validate_module(module, "to_text")
    with deep_recursion():
        return _module_text(module, labels, show_types)


def _module_text(module: Module, labels: bool, show_types: bool) -> str:
    p = _Printer(module, labels, show_types)
    lines = [f"module target={module.target.name} topology={_topology_str(module.topology)}"]
    for fn in module.functions:
        lines.append("")
        lines.extend(p.function(fn, fn.name))
    done = 0
    while done < len(p.extra):  # functions called but not in the module (printing may add more)
        fn = p.extra[done]
        lines.append("")
        lines.append("# referenced, not in the module:")
        lines.extend(p.function(fn, p.extra_names[id(fn)][1:]))
        done += 1
    return "\n".join(lines) + "\n"


def function_text(fn: Function, *, labels: bool = True, show_types: bool = False) -> str:
    """The text of one function (callees print by name, ``@f#k``, with their definitions)."""
    p = _Printer(None, labels, show_types)
    p.extra_names[id(fn)] = f"@{fn.name}"
    lines = p.function(fn, fn.name)
    done = 0
    while done < len(p.extra):
        g = p.extra[done]
        lines.append("")
        lines.extend(p.function(g, p.extra_names[id(g)][1:]))
        done += 1
    return "\n".join(lines) + "\n"

