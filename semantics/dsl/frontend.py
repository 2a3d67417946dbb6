"""The authoring entry points: ``@func``, ``@f.specialize(...)``, ``module(...)`` and
``parse_module(source, env)``.

``@func`` reads the decorated function's source (``inspect.getsource``) and keeps its AST and the
scope the decorator saw; the body is never run. Parsing is lazy — on ``f.ir``, when another
function's body calls ``f``, or when ``f`` enters a ``module(...)`` — so a function may call one
defined after it, as Python allows. A dispatch prototype (``@func def f(...): pass``) collects
the variants registered with ``@f.specialize(DimVarRangePat(...))``; each variant's display
label is the identifier it was defined under. ``module(...)`` builds the HIR ``Module``, which
seals every function (a sealed prototype rejects further variants), after checking that every
``with Mesh(topology=...)`` names a level the Module declares.
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Callable, Mapping
from typing import Any

from tilefoundry.semantics.dsl.errors import DSLError, SourceInfo, located
from tilefoundry.semantics.dsl.parser import FunctionParser, MeshUse, StaticEvaluator
from tilefoundry.semantics.ir import DimVarRangePat, Function, Module, Target
from tilefoundry.semantics.typeinfer.core import Session, TypeInferError
from tilefoundry.semantics.typeinfer.functions import check_function
from tilefoundry.semantics.types import IRError, Topology, TopologyLevel

__all__ = ["DSLFunction", "func", "module", "parse_module"]

Lookup = Callable[[str], tuple[bool, Any]]


class DSLFunction:
    """A @func function: its source, the scope it resolves names in, and (once parsed) its HIR
    ``Function`` (``.ir``). A variant handle (returned by ``@f.specialize``) belongs to its
    base and is not callable on its own."""

    def __init__(self, fdef: ast.FunctionDef, src: SourceInfo, lookup: Lookup, *,
                 base: DSLFunction | None = None, pattern: DimVarRangePat | None = None) -> None:
        self.fdef = fdef
        self.src = src
        self.lookup = lookup
        self.base = base
        self.pattern = pattern
        self.name = base.name if base is not None else fdef.name
        self.label = fdef.name if base is not None else None
        self.variants: list[DSLFunction] = []
        self.mesh_uses: list[MeshUse] = []
        self.callees: list[DSLFunction] = []
        self._fn: Function | None = None
        self._building = False

    def __repr__(self) -> str:
        if self.base is not None:
            return f"<@{self.name} variant {self.label} [{self.pattern.canonical}]>"  # type: ignore[union-attr]
        return f"<@func {self.name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise DSLError(f"@func {self.name} is HIR, not Python: call it from another @func body, "
                       f"or evaluate it with evaluate(module(...), {self.name!r}, inputs)",
                       construct=f"call of @{self.name}")

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_python(cls, fn: Any, scope: Mapping[str, Any], **kw: Any) -> DSLFunction:
        if not inspect.isfunction(fn):
            raise DSLError(f"@func decorates a Python function, got {type(fn).__name__}",
                           construct="@func")
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise DSLError(f"cannot read the source of {fn.__qualname__} ({e}); define it in a "
                           f"file, or parse source text with parse_module(source, env)",
                           construct="@func") from None
        filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
        indent = min((len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()), default=0)
        text = "".join(ln[indent:] if ln.strip() else "\n" for ln in lines)
        try:
            tree = ast.parse(text)
        except SyntaxError as e:  # pragma: no cover - Python already compiled it
            raise DSLError(str(e), construct="@func", filename=filename) from None
        fdef = tree.body[0] if tree.body else None
        if not isinstance(fdef, ast.FunctionDef):
            raise DSLError(f"@func decorates a plain `def` (got {type(fdef).__name__})",
                           construct="@func", filename=filename, line=first)
        src = SourceInfo(filename, first - 1, indent, tuple(ln.rstrip("\n") for ln in lines))
        return cls(fdef, src, _python_lookup(fn, scope), **kw)

    # --- the HIR function ---------------------------------------------------------------
    @property
    def ir(self) -> Function:
        """The HIR Function (parsed on first access). For a variant handle, the variant."""
        return self.build(Session())

    def build(self, session: Session) -> Function:
        if self.base is not None:
            self.base.build(session)
            assert self._fn is not None
            return self._fn
        if self._fn is None:
            self._building = True
            try:
                self._fn = self._parse(session)
            finally:
                self._building = False
            for v in self.variants:
                self._attach(v, session)
        return self._fn

    def _parse(self, session: Session, base_fn: Function | None = None) -> Function:
        p = FunctionParser(self.fdef, self.src, self.lookup, session, self._resolve_callee)
        params, rt = p.signature(base_fn)
        if base_fn is None and p.is_prototype_body():
            if rt is None:
                raise p.error(self.fdef, f"dispatch prototype {self.name}",
                              "a dispatch prototype declares the signature: annotate the "
                              "return type")
            fn = Function(self.name, params, None, rt)
        else:
            if base_fn is not None and p.is_prototype_body():
                raise p.error(self.fdef, f"variant {self.label}", "a variant carries the "
                              "implementation: give it a body that returns a value")
            body = p.body()
            try:
                fn = Function(self.name, params, body, rt,
                              (self.pattern,) if self.pattern is not None else (),
                              label=self.label)
            except IRError as e:
                raise p.error(self.fdef, f"function {self.name}", str(e)) from None
            try:
                check_function(fn)
            except TypeInferError as e:
                raise p.error(self.fdef, f"function {self.fdef.name}", str(e)) from None
        self.mesh_uses = list(p.mesh_uses)
        return fn

    def _resolve_callee(self, obj: Any, node: ast.AST, session: Session) -> Function | None:
        if isinstance(obj, Function):
            return obj
        if not isinstance(obj, DSLFunction):
            return None
        if obj.base is not None:
            raise located(self.src, node, f"call of variant {obj.label}",
                          f"a variant is selected by dispatch, never by its label; call the "
                          f"base {obj.name}(...)")
        if obj._building:
            raise located(self.src, node, f"call of @{obj.name}",
                          "recursive call: HIR functions form a DAG (no recursion)")
        fn = obj.build(session)
        if obj not in self.callees:
            self.callees.append(obj)
        return fn

    # --- dispatch -----------------------------------------------------------------------
    def specialize(self, pattern: DimVarRangePat) -> Callable[[Any], DSLFunction]:
        """``@f.specialize(DimVarRangePat("N", lo, hi))`` registers the decorated function as a
        variant of the dispatch prototype ``f``; its label is the decorated identifier."""
        if self.base is not None:
            raise DSLError(f"{self.label} is a variant; register variants on the base "
                           f"{self.name}", construct="@specialize")
        if not isinstance(pattern, DimVarRangePat):
            raise DSLError(f"specialize takes one DimVarRangePat, got {pattern!r}",
                           construct=f"@{self.name}.specialize")
        scope = sys._getframe(1).f_locals

        def deco(fn: Any) -> DSLFunction:
            v = DSLFunction.from_python(fn, scope, base=self, pattern=pattern)
            self.add_variant(v)
            return v

        return deco

    def add_variant(self, v: DSLFunction) -> None:
        self.variants.append(v)
        if self._fn is not None:
            self._attach(v, Session())

    def _attach(self, v: DSLFunction, session: Session) -> None:
        base_fn = self._fn
        assert base_fn is not None
        where = f"@{self.name}.specialize"
        if base_fn.body is not None:
            raise located(v.src, v.fdef, where, f"{self.name} has a body; only a dispatch "
                          f"prototype (its body is `pass`) takes variants")
        if base_fn.sealed:
            raise located(v.src, v.fdef, where, f"the dispatch prototype {self.name} is sealed "
                          f"(it entered a Module); it rejects further variants (HIR spec, "
                          f"Authoring freeze)")
        if v._fn is None:
            v._fn = v._parse(session, base_fn)
        if any(x is v._fn for x in base_fn.variants):
            return
        try:
            base_fn.add_variant(v._fn)
        except IRError as e:
            raise located(v.src, v.fdef, where, str(e)) from None

    # --- walking ------------------------------------------------------------------------
    def reachable(self) -> list[DSLFunction]:
        """This handle, its variants and every handle its bodies call, once each."""
        out: list[DSLFunction] = []
        todo = [self]
        while todo:
            h = todo.pop()
            if any(h is x for x in out):
                continue
            out.append(h)
            todo.extend(reversed(h.callees))
            todo.extend(reversed(h.variants))
        return out


def _python_lookup(fn: Any, scope: Mapping[str, Any]) -> Lookup:
    """Names as Python resolves them for ``fn``: closure cells (live), the scope the decorator
    ran in (its locals), the module globals (live)."""
    code = fn.__code__
    cells = dict(zip(code.co_freevars, fn.__closure__ or (), strict=True))
    globs = fn.__globals__

    def lookup(name: str) -> tuple[bool, Any]:
        cell = cells.get(name)
        if cell is not None:
            try:
                return True, cell.cell_contents
            except ValueError:  # not yet assigned
                pass
        if name in scope:
            return True, scope[name]
        if name in globs:
            return True, globs[name]
        return False, None

    return lookup


def func(fn: Any) -> DSLFunction:
    """Decorator: parse the function's source into a HIR Function (lazily; see ``.ir``)."""
    if isinstance(fn, DSLFunction):
        raise DSLError(f"{fn!r} is already a @func function", construct="@func")
    return DSLFunction.from_python(fn, sys._getframe(1).f_locals)


# =============================================================================================
# modules
# =============================================================================================
def _topology(t: Any) -> Topology:
    if t is None:
        return Topology(())
    if isinstance(t, Topology):
        return t
    items = t.items() if isinstance(t, Mapping) else t
    try:
        return Topology(tuple(TopologyLevel(n, e) for n, e in items))
    except (TypeError, ValueError) as e:
        raise DSLError(f"topology must be a Topology, a mapping level -> extent, or (level, "
                       f"extent) pairs: {e}", construct="module(topology=...)") from None


def _check_meshes(h: DSLFunction, topo: Topology) -> None:
    """'The name MUST resolve to one of that Module's effective Topology levels ... a Mesh MAY
    map fewer levels than the domain declares, but it MUST NOT create a level or change one's
    extent' (HIR spec §1.1)."""
    levels = [v.name for v in topo.levels]
    for use in h.mesh_uses:
        lv = topo.level(use.mesh.topology)
        if lv is None:
            raise located(use.src, use.node, use.construct,
                          f"names the topology level {use.mesh.topology!r}, which the Module "
                          f"does not declare (its levels: {levels}); a Mesh MUST NOT create a "
                          f"level")
        if use.mesh.size != lv.extent:
            raise located(use.src, use.node, use.construct,
                          f"maps {use.mesh.size} instances onto level {lv.name} of extent "
                          f"{lv.extent}; a Mesh MUST NOT change a level's extent")


def module(*functions: DSLFunction | Function, topology: Any = None,
           target: str | Target | None = None) -> Module:
    """The HIR Module of ``functions`` (in order). Entering the Module seals every function;
    each ``with Mesh(topology=...)`` must name one of ``topology``'s levels (a Topology, a
    mapping ``{"device": 4}`` or (level, extent) pairs, outermost first)."""
    topo = _topology(topology)
    tgt = target if isinstance(target, Target) else Target(target) if target is not None \
        else Target()
    session = Session()
    fns: list[Function] = []
    handles: list[DSLFunction] = []
    for f in functions:
        if isinstance(f, DSLFunction):
            if f.base is not None:
                raise DSLError(f"{f!r} is a variant; put its base {f.name} in the Module",
                               construct="module(...)")
            fns.append(f.build(session))
            handles.append(f)
        elif isinstance(f, Function):
            fns.append(f)
        else:
            raise DSLError(f"module(...) takes @func functions, got {type(f).__name__}",
                           construct="module(...)")
    seen: list[DSLFunction] = []
    for h in handles:
        for r in h.reachable():
            if not any(r is s for s in seen):
                seen.append(r)
    for r in seen:
        _check_meshes(r, topo)
        if r.base is None and r._fn is not None and r._fn.body is None:
            try:
                check_function(r._fn)
            except TypeInferError as e:
                raise located(r.src, r.fdef, f"dispatch prototype {r.name}", str(e)) from None
    return Module(tuple(fns), tgt, topo)


# =============================================================================================
# parsing source text
# =============================================================================================
def parse_source(source: str, filename: str) -> ast.Module:
    """``ast.parse`` with the DSL's bounds: a syntax error, a tree Python cannot build (too
    deep) and one nested past ``max_source_nesting`` are DSLErrors."""
    from tilefoundry.limits import limits

    lim = limits()
    fix = f"split the expression with intermediate names, or {lim.how('max_source_nesting')}"
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as e:
        raise DSLError(e.msg, construct="syntax", filename=filename, line=e.lineno,
                       col=e.offset, source_line=e.text) from None
    except (RecursionError, MemoryError):
        raise DSLError(f"the source nests too deeply for Python's parser; {fix}",
                       construct="source nesting", filename=filename) from None
    except ValueError as e:  # NUL bytes
        raise DSLError(str(e), construct="syntax", filename=filename) from None
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > lim.max_source_nesting:
            raise DSLError(f"the syntax tree nests {depth} levels deep here, more than the limit "
                           f"max_source_nesting; {fix}", construct="source nesting",
                           filename=filename, line=getattr(node, "lineno", None))
        stack.extend((c, depth + 1) for c in ast.iter_child_nodes(node))
    return tree


def parse_module(source: str, env: Mapping[str, Any] | None = None, *,
                 filename: str = "<dsl>") -> Module:
    """Parse DSL source text (as ``to_source`` writes it) into a Module, never running it.

    The top level may hold imports (ignored), docstrings, static assignments
    (``N = DimVar("N", 1, 65)``, ``mesh = Mesh(...)``), ``@func`` definitions,
    ``@f.specialize(DimVarRangePat(...))`` variants and one ``module(...)`` call (bare or
    assigned); without one, the Module holds every non-variant function in order. Names resolve
    in the source's top level, then ``env``, then the DSL's own names."""
    if not isinstance(source, str):
        raise DSLError(f"parse_module takes the source text (a str), got "
                       f"{type(source).__name__}", construct="source", filename=filename)
    if env is not None and not isinstance(env, Mapping):
        raise DSLError(f"parse_module: env must be a mapping of names to values, got "
                       f"{type(env).__name__}", construct="env", filename=filename)
    tree = parse_source(source, filename)
    src = SourceInfo(filename, 0, 0, tuple(source.splitlines()))
    ns: dict[str, Any] = {}
    outer = dict(env or {})

    def lookup(name: str) -> tuple[bool, Any]:
        if name in ns:
            return True, ns[name]
        if name in outer:
            return True, outer[name]
        return False, None

    ev = StaticEvaluator(src, lookup)
    order: list[DSLFunction] = []
    result: Module | None = None

    def names_builder(node: ast.AST, what: Any, builtin: Any) -> bool:
        if not isinstance(node, ast.Name | ast.Attribute):
            return False
        if isinstance(node, ast.Name) and not lookup(node.id)[0]:
            return node.id == builtin.__name__
        try:
            return ev.expr(node) is builtin
        except DSLError:
            return False

    def build_module(call: ast.Call) -> Module:
        fns = []
        for a in call.args:
            v = ev.expr(a)
            if not isinstance(v, DSLFunction | Function):
                raise ev.error(a, "module(...)", f"{_unparse(a)} is not a @func function")
            fns.append(v)
        kws = {}
        for k in call.keywords:
            if k.arg not in ("topology", "target"):
                raise ev.error(k, "module(...)", f"unknown keyword {k.arg}")
            kws[k.arg] = ev.static(k.value)
        return module(*fns, **kws)

    for stmt in tree.body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and \
                isinstance(stmt.value.value, str):
            continue
        if isinstance(stmt, ast.FunctionDef):
            h = _source_function(stmt, src, lookup, ev, names_builder)
            ns[stmt.name] = h
            if h.base is None:
                order.append(h)
            continue
        call = None
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            call = stmt.value
        if call is not None and names_builder(call.func, "module", module):
            if result is not None:
                raise ev.error(stmt, "module(...)", "the source builds more than one module")
            result = build_module(call)
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        ns[t.id] = result
            continue
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name):
            ns[stmt.targets[0].id] = ev.static(stmt.value)
            continue
        raise ev.error(stmt, _stmt_name(stmt), "not supported at the top level of DSL source "
                       "(imports, static assignments, @func definitions and module(...) are)")
    if result is None:
        result = module(*order)
    return result


def _stmt_name(stmt: ast.stmt) -> str:
    from tilefoundry.semantics.dsl.parser import _STMT_NAMES

    return _STMT_NAMES.get(type(stmt), type(stmt).__name__)


def _unparse(node: ast.AST) -> str:
    return ast.unparse(node)


def _source_function(fdef: ast.FunctionDef, src: SourceInfo, lookup: Lookup,
                     ev: StaticEvaluator,
                     names_builder: Callable[[ast.AST, Any, Any], bool]) -> DSLFunction:
    """A top-level ``def`` of DSL source: ``@func`` or ``@base.specialize(pattern)``."""
    if len(fdef.decorator_list) != 1:
        raise ev.error(fdef, f"def {fdef.name}", "decorate it with exactly one of @func or "
                       "@base.specialize(DimVarRangePat(...))")
    d = fdef.decorator_list[0]
    if names_builder(d, "func", func):
        return DSLFunction(fdef, src, lookup)
    if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and \
            d.func.attr == "specialize":
        base = ev.expr(d.func.value)
        if not isinstance(base, DSLFunction) or base.base is not None:
            raise ev.error(d, "@specialize", f"{_unparse(d.func.value)} is not a @func "
                           f"dispatch prototype")
        if len(d.args) != 1 or d.keywords:
            raise ev.error(d, f"@{base.name}.specialize", "takes one DimVarRangePat")
        pat = ev.static(d.args[0])
        if not isinstance(pat, DimVarRangePat):
            raise ev.error(d, f"@{base.name}.specialize", f"takes a DimVarRangePat, got {pat!r}")
        v = DSLFunction(fdef, src, lookup, base=base, pattern=pat)
        base.add_variant(v)
        return v
    raise ev.error(d, "decorator", f"@{_unparse(d)} is not @func or @base.specialize(...)")

