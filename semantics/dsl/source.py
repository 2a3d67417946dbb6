"""``to_source(module)``: a Module printed back as DSL source that ``parse_module`` reads back to
a structurally equal Module (and that Python can import from a file).
Over 800 lines: the parser's inverse, one writer over one naming environment (which nodes
are inlined, named, looped); the op spellings are the parser's data (``surface.py``).

The printer writes the preferred spellings — operators (``a + b``, ``a @ b``, ``-a``, ``~m``),
subscripts (``x[1:3, :]``, ``x[:, 3]``, ``x[i]``, ``t[0]``) and Python float / int literals where
the parser gives them the same constant back — and the op call spellings everywhere else. A
node used once is written inline; a node used several times is bound to a name once (the
parser's lexical environment turns the name back into one shared node). A GridRegionExpr is
written as the ``for`` loop the parser lowers to it: each carry is bound before the loop and
reassigned at the end of the body; after a multi-carry loop each carried name stands for its
``tuple_get_item``. Variants are written ``@f.specialize(DimVarRangePat(...))`` under their
label. DimVars and the Meshes of signatures are module-level names; a Mesh used only inside a
body is bound by ``with Mesh(...) as m:`` around that body.

What the surface cannot say raises ``DSLError`` naming the construct (a typed loop variable, a
loop body that is not its yields, a multi-carry loop value used other than through
``tuple_get_item``, names that would shadow one another).
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.declared_reducers import DeclaredReducer, reducer_source
from tilefoundry.semantics.dsl.errors import DSLError
from tilefoundry.semantics.dsl.parser import structurally_tuple
from tilefoundry.semantics.dsl.surface import (
    BINARY_OPERATORS,
    BUILTINS,
    UNARY_OPERATORS,
    spelling_of,
)
from tilefoundry.semantics.formats import DType, bits_dtype, dtype_of
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    DimVarRangePat,
    Expr,
    Function,
    GridRegionExpr,
    Module,
    Tuple,
    TupleGetItem,
    Var,
    reachable,
    structurally_equal,
)
from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary
from tilefoundry.semantics.ops.nn import MatMul
from tilefoundry.semantics.ops.sharding import Reshard
from tilefoundry.semantics.ops.tensor import Gather, Reshape, Slice
from tilefoundry.semantics.topk_reducer import TopKMerge
from tilefoundry.semantics.typeinfer.core import Session, infer_expr
from tilefoundry.semantics.types import (
    Broadcast,
    DimExpr,
    DimMax,
    DimMin,
    DimVar,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    StorageKind,
    TensorType,
    TupleType,
    free_dimvars,
)

__all__ = ["to_source"]

ATOM, UNARY, MUL, ADD, AND, XOR, OR, CMP = 16, 12, 11, 10, 8, 7, 6, 5
_BIN_PREC = {"+": ADD, "-": ADD, "*": MUL, "/": MUL, "@": MUL, "&": AND, "^": XOR, "|": OR,
             "==": CMP, "!=": CMP, "<": CMP, "<=": CMP, ">": CMP, ">=": CMP}
_INLINE_DEPTH = 6  # deeper single-use chains are broken into named statements
_NAMED_CONSTANT_SIZE = 8  # a shared constant with more elements is bound to a name
_MISSING = object()


def _err(construct: str, message: str) -> DSLError:
    return DSLError(message, construct=f"to_source: {construct}")


# =============================================================================================
# static values
# =============================================================================================
def _float_text(v: float) -> str | None:
    """A Python float literal that reads back as exactly ``v`` (None for inf / nan)."""
    if not math.isfinite(v):
        return None
    return repr(float(v))


def _str(s: str) -> str:
    """A string literal, double-quoted where that needs no escapes."""
    if '"' not in s and "\\" not in s and s.isprintable():
        return f'"{s}"'
    return repr(s)


def _tuple_text(items: list[str]) -> str:
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"


def _dtype_text(d: DType) -> str:
    return d.value


# =============================================================================================
# the module printer
# =============================================================================================
class _ModulePrinter:
    def __init__(self, module: Module) -> None:
        self.module = module
        self.var_names: set[str] = set()
        self.fn_names: dict[int, str] = {}  # id(Function) -> its Python name
        self.functions: list[Function] = []  # printed in this order (module, then referenced)
        self.in_module: list[Function] = list(module.functions)
        self.dimvars: dict[DimVar, str] = {}
        self.meshes: dict[Mesh, str] = {}
        self.taken: set[str] = set(BUILTINS) | set(keyword.kwlist) | {"func", "module"}
        self.used_builtins: set[str] = set()
        self.sink: set[str] | None = None  # names the function being printed refers to

    def note(self, name: str) -> str:
        """Record a module-level or DSL name the source refers to."""
        self.used_builtins.add(name)
        if self.sink is not None:
            self.sink.add(name)
        return name

    # --- names --------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken or name in self.var_names:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name

    def dim_name(self, d: DimVar) -> str:
        if d not in self.dimvars:
            self.dimvars[d] = self.fresh(d.name)
        if self.sink is not None:
            self.sink.add(self.dimvars[d])
        return self.dimvars[d]

    def dim(self, d: Any) -> str:
        """A ShapeDim as source: Python arithmetic over DimVars rebuilds the same expression."""
        if isinstance(d, bool):
            raise _err("shape", f"{d!r} is not a ShapeDim")
        if isinstance(d, int):
            return str(d)
        if isinstance(d, DimVar):
            return self.dim_name(d)
        if isinstance(d, DimExpr):
            lhs, rhs = self.dim(d.lhs), self.dim(d.rhs)
            if isinstance(d, DimMin | DimMax) or not (free_dimvars(d.lhs) or
                                                       free_dimvars(d.rhs)):
                # Python would fold int arithmetic: spell the node's class instead
                name = type(d).__name__ if not isinstance(d, DimMin | DimMax) else \
                    ("dim_min" if isinstance(d, DimMin) else "dim_max")
                self.note(name)
                return f"{name}({lhs}, {rhs})"
            return f"({lhs} {d.SYMBOL} {rhs})"
        raise _err("shape", f"{d!r} is not a ShapeDim")

    def static(self, v: Any, mesh_name) -> str:
        """Deterministic source of an attribute / annotation value."""
        if v is None or isinstance(v, bool):
            return repr(v)
        if isinstance(v, int | DimVar | DimExpr):
            return self.dim(v)
        if isinstance(v, float):
            t = _float_text(v)
            if t is None:
                self.note("float")
                return f'float("{v!r}")'
            return t
        if isinstance(v, str):
            return _str(v)
        if isinstance(v, DType):
            self.note(v.value)
            return _dtype_text(v)
        if isinstance(v, StorageKind):
            return self.storage(v)
        if isinstance(v, tuple):
            return _tuple_text([self.static(x, mesh_name) for x in v]) if v else "()"
        if isinstance(v, Layout):
            self.note("Layout")
            shape = self.static(v.shape, mesh_name)
            if v.strides is None:
                return f"Layout({shape})"
            return f"Layout({shape}, strides={self.static(v.strides, mesh_name)})"
        if isinstance(v, ShardLayout):
            self.note("ShardLayout")
            attrs = _tuple_text([self.static(a, mesh_name) for a in v.attrs])
            return f"ShardLayout({mesh_name(v.mesh)}, {attrs}, {self.static(v.layout, mesh_name)})"
        if isinstance(v, Split):
            self.note("Split")
            return f"Split({v.position})"
        if isinstance(v, Broadcast):
            self.note("Broadcast")
            return "Broadcast()"
        if isinstance(v, Partial):
            self.note("Partial")
            return f"Partial({_str(v.reduction)})"
        if isinstance(v, Mesh):
            return mesh_name(v)
        if isinstance(v, DeclaredReducer):  # a program's own reducer (D448)
            self.note("Reducer")
            return reducer_source(v, lambda x: self.static(x, mesh_name))
        if isinstance(v, TopKMerge):  # the Top-K merge reducer (D486)
            self.note("TopKMerge")
            return f"TopKMerge({v.k}, largest={v.largest!r}, nan={_str(v.nan)})"
        raise _err("attribute value", f"{v!r} ({type(v).__name__}) has no DSL spelling")

    def storage(self, k: StorageKind) -> str:
        if k is StorageKind.UNMATERIALIZED:
            return _str(k.value)
        return self.note(k.value)

    def mesh_literal(self, m: Mesh) -> str:
        self.note("Mesh")
        return (f"Mesh(topology={_str(m.topology)}, axis_names={self.static(m.axis_names, None)}, "
                f"axis_extents={self.static(m.axis_extents, None)})")

    def global_mesh(self, m: Mesh) -> str:
        if m not in self.meshes:
            self.meshes[m] = self.fresh(f"mesh_{m.topology}")
        return self.meshes[m]

    def annotation(self, t: Any, mesh_name) -> str:
        if isinstance(t, TensorType):
            parts = [self.static(t.shape, mesh_name) if t.shape else "()", _dtype_text(t.dtype)]
            self.note(t.dtype.value)
            if t.layout is not None:
                parts.append(self.static(t.layout, mesh_name))
            if t.storage is not StorageKind.GMEM:
                parts.append(self.storage(t.storage))
            return f"Tensor[{', '.join(parts)}]"
        if isinstance(t, TupleType):
            return f"Tuple[{', '.join(self.annotation(f, mesh_name) for f in t.fields)}]"
        raise _err("annotation", f"the type {t!r} has no DSL annotation (Tensor[...] and "
                   f"Tuple[...] do)")

    # --- functions ----------------------------------------------------------------------
    def collect(self) -> None:
        """The functions to print: the module's, then every other Function a body calls."""
        for f in self.in_module:
            self.add_function(f, f.name)
        k = 0
        while k < len(self.functions):
            fn = self.functions[k]
            for g in [fn, *fn.variants]:
                if isinstance(g.body, Expr):
                    for callee in _callees(g.body):
                        self.resolve_callee(callee)
            k += 1

    def add_function(self, f: Function, name: str) -> None:
        if keyword.iskeyword(name) or name in ("func", "module"):
            raise _err(f"function {name}", "the name is a Python keyword or a DSL entry point")
        self.fn_names[id(f)] = name
        self.functions.append(f)

    def resolve_callee(self, fn: Function) -> str:
        if id(fn) in self.fn_names:
            return self.fn_names[id(fn)]
        for g in self.functions:
            if g.name == fn.name and _same(g, fn):
                self.fn_names[id(fn)] = self.fn_names[id(g)]
                return self.fn_names[id(g)]
        if any(g.name == fn.name for g in self.functions):
            raise _err(f"call of @{fn.name}", f"two different functions named {fn.name} are "
                       f"called; the source would bind one name to both")
        self.add_function(fn, fn.name)
        return fn.name

    def print(self) -> str:
        self.collect()
        for f in self.functions:
            for g in [f, *f.variants]:
                self.var_names |= _var_names(g)
        fn_set = {self.fn_names[id(f)] for f in self.functions}
        self.taken |= fn_set
        # variant labels are def names; they must not rebind another top-level name
        labels: dict[int, str] = {}
        for f in self.functions:
            for k, v in enumerate(f.variants):
                lab = v.label
                if lab is None or not lab.isidentifier() or keyword.iskeyword(lab) or \
                        lab in self.taken or lab in self.var_names:
                    lab = self.fresh(f"{self.fn_names[id(f)]}_v{k}")
                else:
                    self.taken.add(lab)
                labels[id(v)] = lab
        # meshes of signatures are module-level names
        for f in self.functions:
            for g in [f, *f.variants]:
                for t in [p.type for p in g.params] + [g.return_type]:
                    for m in _meshes_of_type(t):
                        self.global_mesh(m)
        blocks = []
        for f in self.functions:
            name = self.fn_names[id(f)]
            blocks.append(_FunctionPrinter(self, f, name, "@func").lines())
            for v in f.variants:
                pat = v.specializations[0] if v.specializations else None
                if not isinstance(pat, DimVarRangePat) or len(v.specializations) != 1:
                    raise _err(f"variant of {name}", "a variant carries exactly one "
                               "DimVarRangePat")
                deco = f"@{name}.specialize(DimVarRangePat({_str(pat.dim_var)}, {pat.lo}, " \
                       f"{pat.hi}))"
                blocks.append(_FunctionPrinter(self, v, labels[id(v)], deco).lines())
        clash = fn_set & self.used_builtins
        if clash:
            raise _err(f"function {sorted(clash)[0]}", "a function name shadows a DSL name the "
                       "source uses")
        out = ['"""DSL source written by tilefoundry.semantics.dsl.to_source."""',
               "from tilefoundry.semantics.dsl import *  # noqa: F403", ""]
        for d, n in sorted(self.dimvars.items(), key=lambda kv: kv[1]):
            out.append(f"{n} = DimVar({_str(d.name)}, {d.lo}, {d.hi})")
        for m, n in sorted(self.meshes.items(), key=lambda kv: kv[1]):
            out.append(f"{n} = {self.mesh_literal(m)}")
        for b in blocks:
            out.extend(["", ""])
            out.extend(b)
        args = [self.fn_names[id(f)] for f in self.in_module]
        kw = []
        if self.module.topology.levels:
            levels = ", ".join(f"{_str(v.name)}: {v.extent}"
                               for v in self.module.topology.levels)
            kw.append(f"topology={{{levels}}}")
        if self.module.target.name != "reference":
            kw.append(f"target={_str(self.module.target.name)}")
        var = self.fresh("mod")
        out.extend(["", "", f"{var} = module({', '.join(args + kw)})"])
        return "\n".join(out) + "\n"


def _same(a: Function, b: Function) -> bool:
    try:
        return a == b
    except TilefoundryError:
        return False


def _children(e: Expr) -> list[Expr]:
    if isinstance(e, Call):
        return list(e.args)
    if isinstance(e, Tuple):
        return list(e.fields)
    if isinstance(e, TupleGetItem):
        return [e.tuple_value]
    if isinstance(e, GridRegionExpr):
        return [*e.init_args, *e.yield_values]
    return []


def _walk(root: Expr) -> Iterator[Expr]:
    return reachable(root, _children)


def _callees(root: Expr) -> Iterator[Function]:
    for n in _walk(root):
        if isinstance(n, Call) and isinstance(n.op, Function):
            yield n.op


def _var_names(fn: Function) -> set[str]:
    out = {p.name for p in fn.params}
    if isinstance(fn.body, Expr):
        for n in _walk(fn.body):
            if isinstance(n, Var):
                out.add(n.name)
            if isinstance(n, GridRegionExpr):
                out.add(n.induction_var.name)
                out.update(v.name for v in n.carried_args)
    return out


def _meshes_of_type(t: Any) -> Iterator[Mesh]:
    if isinstance(t, TensorType) and isinstance(t.layout, ShardLayout):
        yield t.layout.mesh
    elif isinstance(t, TupleType):
        for f in t.fields:
            yield from _meshes_of_type(f)


# =============================================================================================
# one function
# =============================================================================================
@dataclass
class _LoopCtx:
    loop: GridRegionExpr
    carries: tuple[str, ...]
    entry_names: set[str]
    window: bool
    ivar_name: str


@dataclass
class _Scope:
    """The parser's lexical environment as the printer tracks it."""

    env: dict[str, int] = field(default_factory=dict)  # name -> canonical node id
    names: dict[int, list[str]] = field(default_factory=dict)  # node id -> current names

    def bind(self, name: str, nid: int) -> None:
        old = self.env.get(name)
        if old is not None and name in self.names.get(old, []):
            self.names[old].remove(name)
        self.env[name] = nid
        self.names.setdefault(nid, []).append(name)

    def copy(self) -> _Scope:
        return _Scope(dict(self.env), {k: list(v) for k, v in self.names.items()})


class _FunctionPrinter:
    def __init__(self, mp: _ModulePrinter, fn: Function, pyname: str, decorator: str) -> None:
        self.mp = mp
        self.fn = fn
        self.pyname = pyname
        self.decorator = decorator
        self.out: list[str] = []
        self.indent = 1
        self.scope = _Scope()
        self.loops: list[_LoopCtx] = []
        self.local_meshes: dict[Mesh, str] = {}
        self.body_names: set[str] = set()  # module-level / DSL names the body refers to
        self.session = Session()
        self.temp_k = 0

    # --- entry --------------------------------------------------------------------------
    def lines(self) -> list[str]:
        fn = self.fn
        params = ", ".join(f"{p.name}: {self.mp.annotation(p.type, self.mesh_name)}"
                           for p in fn.params)
        ret = "" if fn.return_type is None else \
            f" -> {self.mp.annotation(fn.return_type, self.mesh_name)}"
        head = [self.decorator, f"def {self.pyname}({params}){ret}:"]
        if fn.body is None:
            return [*head, "    pass"]
        self.analyze(fn.body)
        for name in sorted(self.local_names):
            if keyword.iskeyword(name):
                raise _err(f"variable {name}", "the name is a Python keyword")
        for p in fn.params:
            self.scope.bind(p.name, id(p))
        self.session.scope.append(fn.params)
        self.mp.sink = self.body_names
        try:
            self.stamp_loops(fn.body)
            self.require(fn.body)
            text, _ = self.ref(fn.body, ctx="return")
        finally:
            self.session.scope.pop()
            self.mp.sink = None
        if isinstance(fn.body, Tuple) and len(fn.body.fields) > 1 and \
                self.current_name(self.canon[id(fn.body)]) is None:
            text = text[1:-1]  # return a, b
        self.emit(f"return {text}")
        clash = self.body_names & (self.local_names | set(self.local_meshes.values()))
        if clash:
            raise _err(f"function {self.fn.name}", f"the local name {sorted(clash)[0]} shadows "
                       f"a module-level or DSL name the body uses")
        body = self.out
        if self.local_meshes:
            withs = [f"with {self.mp.mesh_literal(m)} as {n}:"
                     for m, n in self.local_meshes.items()]
            wrapped = []
            for k, w in enumerate(withs):
                wrapped.append("    " * (k + 1) + w)
            pad = "    " * len(withs)
            body = wrapped + [pad + ln for ln in body]
        return [*head, *body]

    def emit(self, line: str) -> None:
        self.out.append("    " * self.indent + line)

    # --- analysis -----------------------------------------------------------------------
    def analyze(self, root: Expr) -> None:
        """Use counts, canonical ids (every tuple_get_item of a multi-carry loop's field k is one
        name after the loop), each node's loop dependencies, and which nodes get names."""
        self.canon: dict[int, int] = {}
        self.nodes: dict[int, Expr] = {}
        tgi_key: dict[tuple[int, int], int] = {}
        order: list[Expr] = []
        seen: set[int] = set()
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            n, ready = stack.pop()
            if ready:
                order.append(n)
                continue
            if id(n) in seen:
                continue
            seen.add(id(n))
            if isinstance(n, Function):
                raise _err("function value", f"the function {n.name} is used as a value "
                           f"(not called); the DSL only calls functions")
            stack.append((n, True))
            stack.extend((c, False) for c in reversed(_children(n)))
        self.binder_owner: dict[int, GridRegionExpr] = {}
        params = {id(p) for p in self.fn.params}
        for n in order:
            self.nodes[id(n)] = n
            cid = id(n)
            if isinstance(n, TupleGetItem) and isinstance(n.tuple_value, GridRegionExpr) and \
                    len(n.tuple_value.carried_args) > 1:
                cid = tgi_key.setdefault((id(n.tuple_value), n.index), id(n))
            self.canon[id(n)] = cid
            if isinstance(n, GridRegionExpr):
                self.check_loop(n)
                self.binder_owner[id(n.induction_var)] = n
                for v in n.carried_args:
                    self.binder_owner[id(v)] = n
        self.local_names = {p.name for p in self.fn.params}
        for n in order:
            if isinstance(n, GridRegionExpr):
                self.local_names.add(n.induction_var.name)
                self.local_names.update(v.name for v in n.carried_args)
        # use counts over canonical ids
        self.uses: dict[int, int] = {}
        for n in order:
            for c in _children(n):
                k = self.canon[id(c)]
                self.uses[k] = self.uses.get(k, 0) + 1
        rk = self.canon[id(root)]
        self.uses[rk] = self.uses.get(rk, 0) + 1
        self.remaining = dict(self.uses)
        # loop dependencies
        self.deps: dict[int, frozenset[int]] = {}
        for n in order:
            if isinstance(n, Var):
                if id(n) in self.binder_owner:
                    self.deps[id(n)] = frozenset([id(n)])
                elif id(n) in params:
                    self.deps[id(n)] = frozenset()
                else:
                    raise _err(f"variable {n.name}", "a free variable (neither a parameter nor "
                               "a loop binder) has no DSL spelling")
            else:
                d: set[int] = set()
                for c in _children(n):
                    d |= self.deps[id(c)]
                if isinstance(n, GridRegionExpr):
                    d -= {id(n.induction_var), *(id(v) for v in n.carried_args)}
                self.deps[id(n)] = frozenset(d)
        # which nodes are named (a statement of their own)
        self.named: set[int] = set()
        depth: dict[int, int] = {}
        for n in order:
            k = self.canon[id(n)]
            if isinstance(n, Var):
                depth[k] = 0
                continue
            if isinstance(n, GridRegionExpr):
                self.named.add(k)
                depth[k] = 0
                continue
            if k != id(n):  # a carry reference: named by the loop
                depth[k] = 0
                continue
            if isinstance(n, TupleGetItem) and isinstance(n.tuple_value, GridRegionExpr):
                depth[k] = 0
                continue
            dd = 1 + max((depth[self.canon[id(c)]] for c in _children(n)), default=0)
            big_const = isinstance(n, Constant) and n.value.size > _NAMED_CONSTANT_SIZE
            wide = isinstance(n, Call) and isinstance(n.op, Reshard)  # long layout attributes
            if (self.uses.get(k, 0) > 1 and (not isinstance(n, Constant) or big_const)) \
                    or dd > _INLINE_DEPTH or wide:
                self.named.add(k)
                dd = 0
            depth[k] = dd
        for n in [root, *order]:  # a multi-carry loop value is used only through its fields
            kids = [root] if n is root else [] if isinstance(n, TupleGetItem) else _children(n)
            for c in kids:
                if isinstance(c, GridRegionExpr) and len(c.carried_args) > 1:
                    raise _err("multi-carry loop", "the loop's tuple value is used directly; "
                               "the DSL names a multi-carry loop's results only through its "
                               "carried names (tuple_get_item)")

    def check_loop(self, n: GridRegionExpr) -> None:
        if not n.carried_args:
            raise _err("loop", "a loop with no carried value has no DSL spelling (its value "
                       "would be unused)")
        if n.induction_var.type is not None:
            raise _err(f"loop variable {n.induction_var.name}", "an annotated induction "
                       "variable has no DSL spelling (the parser binds an unannotated i32 Var)")
        for v in n.carried_args:
            if v.type is not None:
                raise _err(f"loop carry {v.name}", "an annotated carry phi has no DSL spelling "
                           "(the parser types phis from their init_args)")
        names = [v.name for v in n.carried_args]
        if len(set(names)) != len(names):
            raise _err("loop carries", f"two carries share a name {names}")
        if n.induction_var.name in names:
            raise _err("loop carries", f"a carry is named like the loop variable "
                       f"{n.induction_var.name}")
        ys = n.yield_values
        ok = structurally_equal(n.body, ys[0]) if len(ys) == 1 else \
            isinstance(n.body, Tuple) and structurally_equal(n.body.fields, ys)
        if not ok:
            raise _err("loop body", "the DSL writes a loop's body as its yields (the body is "
                       "the single yield, or the tuple of the yields); this loop's body is "
                       "another expression")

    def stamp_loops(self, root: Expr) -> None:
        """Type the loop binders as the parser does on loop entry (outer loops first), so type
        queries inside loop bodies succeed."""
        order = []
        seen: set[int] = set()
        stack = [root]
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            if isinstance(n, GridRegionExpr):
                order.append(n)
            stack.extend(_children(n))
        memo: dict[int, int] = {}
        for loop in sorted(order, key=lambda lp: self.loop_depth(lp, memo, set())):
            if not loop.induction_var.has_type:
                loop.induction_var.stamp(TensorType((), DType.I32))
            for phi, init in zip(loop.carried_args, loop.init_args, strict=False):
                if not phi.has_type:
                    try:
                        phi.stamp(infer_expr(init, self.session))
                    except TilefoundryError:
                        pass

    def loop_depth(self, loop: GridRegionExpr, memo: dict[int, int], busy: set[int]) -> int:
        """How many loops enclose ``loop`` (the loops whose binders it depends on)."""
        if id(loop) in memo:
            return memo[id(loop)]
        if id(loop) in busy:
            raise _err("loop nesting", "two loops depend on each other's binders")
        busy.add(id(loop))
        owners = {id(self.binder_owner[b]): self.binder_owner[b] for b in self.deps[id(loop)]}
        d = 1 + max((self.loop_depth(o, memo, busy) for o in owners.values()), default=-1)
        memo[id(loop)] = d
        return d

    def ptype(self, e: Expr) -> Any:
        try:
            return infer_expr(e, self.session)
        except TilefoundryError:
            return None

    # --- names --------------------------------------------------------------------------
    def temp(self) -> str:
        while True:
            name = f"v{self.temp_k}"
            self.temp_k += 1
            if name not in self.mp.taken and name not in self.mp.var_names:
                self.local_names.add(name)
                return name

    def mesh_name(self, m: Mesh) -> str:
        if m in self.mp.meshes:
            self.body_names.add(self.mp.meshes[m])
            return self.mp.meshes[m]
        if m not in self.local_meshes:
            name = self.mp.fresh(f"m_{m.topology}")
            self.local_meshes[m] = name
        return self.local_meshes[m]

    def current_name(self, nid: int) -> str | None:
        names = self.scope.names.get(nid)
        return names[-1] if names else None

    def check_assign(self, name: str, loops: list[_LoopCtx]) -> None:
        """An assignment inside a loop to a name bound before the loop that is not one of its
        carries would change the loop's carries when parsed: refuse it."""
        for lc in loops:
            if name in lc.entry_names and name not in lc.carries:
                raise _err(f"name {name}", f"the name is bound before an enclosing loop and "
                           f"assigned inside it without being one of its carries "
                           f"{list(lc.carries)}; the parser would carry it")

    def rebind(self, name: str, nid: int) -> None:
        """Bind ``name`` to node ``nid`` as an assignment would, first giving the node it named
        an alias when that node is still needed and has no other name."""
        self.check_assign(name, self.loops)
        self.protect(name)
        self.scope.bind(name, nid)
        self.local_names.add(name)

    def protect(self, name: str) -> None:
        old = self.scope.env.get(name)
        if old is None:
            return
        names = self.scope.names.get(old, [])
        if self.remaining.get(old, 0) > 0 and names == [name]:
            alias = self.temp()
            self.emit(f"{alias} = {name}")
            self.scope.bind(alias, old)

    # --- scheduling ---------------------------------------------------------------------
    def require(self, root: Expr) -> None:
        """Emit the statements every named node under ``root`` needs, in dependency order."""
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            n, ready = stack.pop()
            k = self.canon[id(n)]
            if isinstance(n, Var):
                if self.current_name(k) is None:
                    raise _err(f"variable {n.name}", "used outside its loop, or shadowed")
                continue
            if self.current_name(k) is not None:
                continue
            if k != id(n):  # a carry reference: its loop binds the name
                stack.append((self.nodes[k], False))
                continue
            if ready:
                if k in self.named and self.current_name(k) is None:
                    if isinstance(n, GridRegionExpr):
                        self.emit_loop(n)
                    else:
                        text, _ = self.expr(n)
                        name = self.temp()
                        self.emit(f"{name} = {text}")
                        self.scope.bind(name, k)
                continue
            if isinstance(n, GridRegionExpr):
                stack.append((n, True))
                stack.extend((c, False) for c in reversed(n.init_args))
                continue
            stack.append((n, True))
            stack.extend((c, False) for c in reversed(_children(n)))

    def emit_loop(self, loop: GridRegionExpr) -> None:
        # hoist what the body needs that depends on no binder of this loop or of a loop nested
        # in it (only on the binders of the loops already open around it)
        open_binders = {id(b) for lc in self.loops
                        for b in (lc.loop.induction_var, *lc.loop.carried_args)}
        seen: set[int] = set()
        stack = list(reversed(loop.yield_values))
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            if self.deps[id(n)] <= open_binders:
                self.require(n)
            else:
                stack.extend(reversed(_children(n)))
        names = tuple(v.name for v in loop.carried_args)
        if not len(names) == len(loop.init_args) == len(loop.yield_values):
            raise DSLError(f"a grid_region with {len(names)} carried args, "
                           f"{len(loop.init_args)} init args and {len(loop.yield_values)} "
                           f"yield values has no source form: the three must have one "
                           f"length")
        # carry inits: `name = init` unless the name already is the init
        todo = [(nm, self.canon[id(a)]) for nm, a in zip(names, loop.init_args, strict=True)]
        texts = []
        for nm, (_, ik) in zip(names, todo, strict=True):
            init = self.nodes[ik]
            if self.scope.env.get(nm) == ik:
                self.remaining[ik] = self.remaining.get(ik, 1) - 1
                texts.append(None)
            else:
                texts.append(self.ref(init, ctx="init")[0])
        pending = [(nm, ik, t) for (nm, ik), t in zip(todo, texts, strict=True) if t is not None]
        if _clobbers([t for _, _, t in pending], [nm for nm, _, _ in pending]):
            staged = []
            for nm, ik, t in pending:
                tmp = self.temp()
                self.emit(f"{tmp} = {t}")
                self.scope.bind(tmp, ik)
                staged.append((nm, ik, tmp))
            pending = staged
        for nm, ik, t in pending:
            self.rebind(nm, ik)
            self.emit(f"{nm} = {t}")
        # the loop variable and the phis shadow their names inside the body
        iv = loop.induction_var
        for nm in (iv.name, *names):
            self.protect(nm)
        entry = set(self.scope.env)
        saved = self.scope.copy()
        window = loop.start == 0 and loop.step != 1
        self.emit(f"for {iv.name} in {self.domain(loop)}:")
        self.indent += 1
        self.loops.append(_LoopCtx(loop, names, entry, window, iv.name))
        self.scope.bind(iv.name, id(iv))
        for v in loop.carried_args:
            self.scope.bind(v.name, id(v))
        for y in loop.yield_values:
            self.require(y)
        ytexts = [self.ref(y, ctx="carry")[0] for y in loop.yield_values]
        for nm in names:
            self.check_assign(nm, self.loops[:-1])
        if not _clobbers(ytexts, list(names)):
            for nm, t in zip(names, ytexts, strict=True):
                self.emit(f"{nm} = {t}")
        else:
            tmps = []
            for t in ytexts:
                tmp = self.temp()
                self.emit(f"{tmp} = {t}")
                tmps.append(tmp)
            for nm, tmp in zip(names, tmps, strict=True):
                self.emit(f"{nm} = {tmp}")
        self.loops.pop()
        self.indent -= 1
        self.scope = saved
        lk = self.canon[id(loop)]
        if len(names) == 1:
            self.rebind_after(names[0], lk)
        else:
            for k, nm in enumerate(names):
                key = next((c for i, c in self.canon.items()
                            if isinstance(self.nodes.get(i), TupleGetItem)
                            and self.nodes[i].tuple_value is loop  # type: ignore[union-attr]
                            and self.nodes[i].index == k), None)  # type: ignore[union-attr]
                self.rebind_after(nm, key if key is not None else -(k + 1) - id(loop))

    def rebind_after(self, name: str, nid: int) -> None:
        self.check_assign(name, self.loops)
        self.protect(name)
        self.scope.bind(name, nid)

    def domain(self, loop: GridRegionExpr) -> str:
        d = self.mp.dim
        if loop.start == 0 and not isinstance(loop.start, bool):
            self.mp.note("tile")
            if loop.step == 1 and not isinstance(loop.step, bool):
                return f"tile({d(loop.extent)})"
            return f"tile({d(loop.extent)}, {d(loop.step)})"
        self.mp.note("range")
        return f"range({d(loop.start)}, {d(loop.extent)}, {d(loop.step)})"

    # --- expressions --------------------------------------------------------------------
    def use_builtin(self, name: str) -> str:
        self.mp.note(name.split(".")[0])
        return name

    def ref(self, e: Expr, ctx: str = "input", other: Expr | None = None) -> tuple[str, int]:
        """The source of one use of ``e`` (consumes the use)."""
        k = self.canon[id(e)]
        self.remaining[k] = self.remaining.get(k, 0) - 1
        name = self.current_name(k)
        if name is not None:
            return name, ATOM
        if isinstance(e, Constant):
            lit = self.literal(e, ctx, other)
            if lit is not None:
                return lit
            return self.const_text(e), ATOM
        if isinstance(e, Var):
            raise _err(f"variable {e.name}", "used where its name is not bound")
        if k in self.named:
            raise _err(type(e).__name__, "internal: a named node was not emitted")
        return self.expr(e)

    def literal(self, c: Constant, ctx: str, other: Expr | None) -> tuple[str, int] | None:
        """A Python literal the parser turns back into exactly ``c`` in this context."""
        v = c.value
        if v.ndim != 0 or ctx not in ("binary", "input"):
            return None
        dt = dtype_of(v)
        if dt is DType.BOOL:
            return repr(bool(v)), ATOM
        if dt is DType.I32:
            if ctx == "binary" and other is not None:
                t = self.ptype(other)
                if isinstance(t, TensorType) and t.dtype.is_float:
                    return None
            n = int(v)
            return str(n), UNARY if n < 0 else ATOM
        if ctx != "binary" or other is None or not dt.is_float:
            return None
        t = self.ptype(other)
        if not isinstance(t, TensorType) or t.dtype is not dt:
            return None
        f = float(np.asarray(v).astype(np.float64))
        text = _float_text(f)
        if text is None:
            return None
        back = np.asarray(float(text), dtype=dt.storage)
        if back.view(bits_dtype(dt)).tobytes() != np.asarray(v).view(bits_dtype(dt)).tobytes():
            return None
        return text, UNARY if text.startswith("-") else ATOM

    def const_text(self, c: Constant) -> str:
        v = np.asarray(c.value)
        dt = dtype_of(v)
        self.use_builtin(dt.value)
        shape = "" if 0 not in v.shape else f", shape={_tuple_text([str(s) for s in v.shape])}"
        vals = None
        if dt is DType.BOOL or not dt.is_float:
            vals = v.tolist()
        else:
            wide = v.astype(np.float64)
            if np.all(np.isfinite(wide)):
                vals = wide.tolist()
        if vals is not None:
            text = _py_text(vals)
            try:
                back = np.asarray(vals, dtype=dt.storage)  # repr round-trips each float
                ok = back.shape == v.shape or 0 in v.shape
                ok = ok and back.view(bits_dtype(dt)).tobytes() == \
                    v.view(bits_dtype(dt)).tobytes()
            except (ValueError, TypeError, OverflowError):
                ok = False
            if ok:
                return f"{self.use_builtin('const')}({text}, {dt.value}{shape})"
        bits = v.view(bits_dtype(dt)).tolist()
        return f"{self.use_builtin('const_bits')}({_py_text(bits)}, {dt.value}{shape})"

    def operand(self, e: Expr, prec: int, ctx: str = "input", other: Expr | None = None,
                strict: bool = False) -> str:
        text, p = self.ref(e, ctx, other)
        if p < prec or (strict and p == prec):
            return f"({text})"
        return text

    def expr(self, e: Expr) -> tuple[str, int]:
        """The source of ``e`` itself (its operands by reference)."""
        if isinstance(e, Call):
            if isinstance(e.op, Function):
                name = self.mp.resolve_callee(e.op)
                self.body_names.add(name)
                args = ", ".join(self.ref(a)[0] for a in e.args)
                return f"{name}({args})", ATOM
            return self.op_expr(e)
        if isinstance(e, Tuple):
            if not e.fields:
                raise _err("tuple", "an empty tuple value has no DSL spelling")
            return _tuple_text([self.ref(f, ctx="tuple")[0] for f in e.fields]), ATOM
        if isinstance(e, TupleGetItem):
            base = e.tuple_value
            if structurally_tuple(base) is True:
                return f"{self.operand(base, ATOM, 'base')}[{e.index}]", ATOM
            self.use_builtin("tuple_get_item")
            return f"tuple_get_item({self.ref(base, 'base')[0]}, {e.index})", ATOM
        if isinstance(e, Constant):
            return self.const_text(e), ATOM
        raise _err(type(e).__name__, "has no DSL spelling here")

    def op_expr(self, e: Call) -> tuple[str, int]:
        op = e.op
        if isinstance(op, Binary):
            lhs, rhs = e.args
            sym = BINARY_OPERATORS.get(op.kind)
            rlit = isinstance(rhs, Constant) and self.current_name(self.canon[id(rhs)]) is None \
                and self.literal(rhs, "binary", lhs) is not None
            lctx = "nolit" if rlit else "binary"
            if sym is None:
                name = self.use_builtin(spelling_of(op).name)
                a = self.ref(lhs, lctx, rhs)[0]
                b = self.ref(rhs, "binary", lhs)[0]
                return f"{name}({a}, {b})", ATOM
            p = _BIN_PREC[sym]
            strict_left = p == CMP
            a = self.operand(lhs, p, lctx, rhs, strict=strict_left)
            b = self.operand(rhs, p, "binary", lhs, strict=True)
            return f"{a} {sym} {b}", p
        if isinstance(op, Unary):
            sym = UNARY_OPERATORS.get(op.kind)
            if sym is not None:
                return f"{sym}{self.operand(e.args[0], UNARY, 'unary')}", UNARY
            name = self.use_builtin(spelling_of(op).name)
            return f"{name}({self.ref(e.args[0], 'unary')[0]})", ATOM
        if isinstance(op, MatMul) and op.allow_reassociation:
            a = self.operand(e.args[0], MUL, "unary")
            b = self.operand(e.args[1], MUL, "unary", strict=True)
            return f"{a} @ {b}", MUL
        if isinstance(op, Slice):
            return self.slice_expr(e)
        if isinstance(op, Reshape):
            t = self.index_expr(e)
            if t is not None:
                return t, ATOM
        if isinstance(op, Gather) and op.fill is None:  # indexing has no fill (D388)
            t = self.gather_expr(e)
            if t is not None:
                return t, ATOM
        return self.call_expr(e), ATOM

    def call_expr(self, e: Call) -> str:
        op = e.op
        sp = spelling_of(op)
        name = self.use_builtin(sp.name)
        parts = []
        if sp.variadic == "sequence":
            parts.append(_tuple_text([self.ref(a, "tuple")[0] for a in e.args])
                         if e.args else "()")
        else:
            parts.extend(self.ref(a, "input")[0] for a in e.args)
        defaults = sp.defaults
        for a in sp.attrs:
            v = getattr(op, a)
            if a not in defaults:
                parts.append(self.mp.static(v, self.mesh_name))
            elif not _same_value(v, defaults[a]):
                parts.append(f"{a}={self.mp.static(v, self.mesh_name)}")
        return f"{name}({', '.join(parts)})"

    # --- subscripts ---------------------------------------------------------------------
    def slice_entries(self, op: Slice, t: Any, skip: set[int] = frozenset()) -> list[str]:
        steps = op.strides
        full = isinstance(t, TensorType) and t.rank == len(op.begin)
        out = []
        for a in range(len(op.begin)):
            b, e = op.begin[a], op.end[a]
            if a in skip:
                out.append(self.mp.dim(b))
                continue
            bt = "" if isinstance(b, int) and not isinstance(b, bool) and b == 0 else \
                self.mp.dim(b)
            omit = full and type(e) is type(t.shape[a]) and e == t.shape[a]
            et = "" if omit else self.mp.dim(e)
            if steps is None:
                out.append(f"{bt}:{et}")
            elif steps[a] != 1 or all(s == 1 for s in steps):
                out.append(f"{bt}:{et}:{steps[a]}")
            else:
                out.append(f"{bt}:{et}")
        return out

    def slice_expr(self, e: Call) -> tuple[str, int]:
        op: Slice = e.op
        x = e.args[0]
        t = self.ptype(x)
        if (op.strides is not None and len(op.strides) != len(op.begin)) or \
                len(op.end) != len(op.begin):
            return self.call_expr(e), ATOM
        entries = self.slice_entries(op, t)
        base = self.operand(x, ATOM, "base")
        return f"{base}[{', '.join(entries) if entries else '()'}]", ATOM

    def index_expr(self, e: Call) -> str | None:
        """``x[.., 3, ..]``: a Reshape dropping the indexed axes of a single-use Slice."""
        s = e.args[0]
        sk = self.canon[id(s)]
        if not (isinstance(s, Call) and isinstance(s.op, Slice)) or sk in self.named or \
                self.current_name(sk) is not None or self.uses.get(sk, 0) != 1:
            return None
        op: Slice = s.op
        xt, st = self.ptype(s.args[0]), self.ptype(s)
        if not (isinstance(xt, TensorType) and isinstance(st, TensorType)) or \
                op.strides is not None or not (xt.rank == st.rank == len(op.begin)
                                                == len(op.end)):
            return None
        cands = set()
        for a in range(st.rank):
            b, end = op.begin[a], op.end[a]
            try:
                succ = b + 1
            except TypeError:
                continue
            if type(end) is not type(succ) or end != succ:
                continue
            if isinstance(b, int):
                ext = xt.shape[a]
                if isinstance(b, bool) or b < 0 or (isinstance(ext, int) and b >= ext) or \
                        not isinstance(ext, int):
                    continue
            cands.add(a)
        ns = e.op.new_shape
        drop: set[int] = set()
        j = 0
        for a in range(st.rank):
            if j < len(ns) and type(st.shape[a]) is type(ns[j]) and st.shape[a] == ns[j]:
                j += 1
            elif a in cands:
                drop.add(a)
            else:
                return None
        if j != len(ns) or not drop:
            return None
        self.remaining[sk] = self.remaining.get(sk, 0) - 1
        entries = self.slice_entries(op, xt, drop)
        return f"{self.operand(s.args[0], ATOM, 'base')}[{', '.join(entries)}]"

    def gather_expr(self, e: Call) -> str | None:
        op: Gather = e.op
        x, idx = e.args
        if op.batch_dims != 0 or not 0 <= op.axis <= 64:  # no `x[:, :, ...]` spelling past that
            return None
        ik = self.canon[id(idx)]
        lead = ":, " * op.axis
        lc = self.window_of(idx)
        if lc is not None:
            self.remaining[ik] = self.remaining.get(ik, 0) - 1
            return f"{self.operand(x, ATOM, 'base')}[{lead}{lc.ivar_name}]"
        if isinstance(idx, Var) and any(lc.window and lc.loop.induction_var is idx
                                        for lc in self.loops):
            return None  # the bare name of a tile window would select the window
        base = self.operand(x, ATOM, "base")
        return f"{base}[{lead}{self.ref(idx, 'index')[0]}]"

    def window_of(self, idx: Expr) -> _LoopCtx | None:
        """The enclosing tile(n, step) loop whose window ``i + [0, step)`` ``idx`` is."""
        if not (isinstance(idx, Call) and isinstance(idx.op, Binary) and
                idx.op.kind is BinaryKind.ADD):
            return None
        if self.current_name(self.canon[id(idx)]) is not None:
            return None
        v, c = idx.args
        for lc in self.loops:
            if not lc.window or lc.loop.induction_var is not v or \
                    self.scope.env.get(lc.ivar_name) != id(v):
                continue
            step = lc.loop.step
            if isinstance(step, int) and isinstance(c, Constant) and \
                    c.value.dtype == np.int32 and c.value.shape == (step,) and \
                    np.array_equal(c.value, np.arange(step, dtype=np.int32)):
                return lc
        return None


def _clobbers(texts: list[str], names: list[str]) -> bool:
    """Whether assigning ``names[k] = texts[k]`` in order would let a later text read a name an
    earlier assignment already changed (then the texts go through temporaries first)."""
    for k, t in enumerate(texts):
        for nm in names[:k]:
            if re.search(rf"(?<![\w.]){re.escape(nm)}(?!\w)", t):
                return True
    return False


def _same_value(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # pragma: no cover - attribute values compare cleanly
        return False


def _py_text(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_py_text(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return repr(v)


def to_source(module: Module) -> str:
    """The DSL source of ``module``; ``parse_module(to_source(m)) == m`` and printing the
    parsed module gives the same text."""
    if not isinstance(module, Module):
        raise _err("module", f"expected a Module, got {type(module).__name__}")
    from tilefoundry.limits import deep_recursion
    from tilefoundry.semantics.validate import validate_module

    validate_module(module, "to_source")
    with deep_recursion():
        return _ModulePrinter(module).print()
