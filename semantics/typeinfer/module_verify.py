"""The module verifier and ``infer_module`` (HIR spec §1.1): reachable functions, meshes,
materialized strides. Split from ``functions.py`` (D480)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from typing import Any

from tilefoundry.semantics.ir import (
    Call,
    Expr,
    Function,
    Module,
    Op,
    Var,
)
from tilefoundry.semantics.printer import type_str
from tilefoundry.semantics.typeinfer.core import Session, TypeInferError, infer_expr
from tilefoundry.semantics.typeinfer.functions import (
    _fn_error,
    _referenced_functions,
    _tensor_types,
    _walk,
    check_function,
    materialize_signature,
)
from tilefoundry.semantics.types import (
    Layout,
    ShardLayout,
    TensorType,
    Topology,
    is_type,
)


# =============================================================================================
# module verification
# =============================================================================================
def reachable_functions(module: Module) -> list[Function]:
    """Module functions, their variants, and every Function their bodies reference, once."""
    out: list[Function] = []
    seen: set[int] = set()
    todo = list(reversed(module.functions))
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        out.append(f)
        todo.extend(reversed(f.variants))
        if isinstance(f.body, Expr):
            todo.extend(reversed(list(_referenced_functions(f.body))))
    return out


def _shard_layouts_in(v: Any) -> Iterator[ShardLayout]:
    if isinstance(v, ShardLayout):
        yield v
    elif is_type(v):
        for t in _tensor_types(v):
            if isinstance(t.layout, ShardLayout):
                yield t.layout
    elif isinstance(v, tuple | list):
        for x in v:
            yield from _shard_layouts_in(x)


def _check_mesh(topology: Topology, sl: ShardLayout, where: str) -> None:
    m = sl.mesh
    level = topology.level(m.topology)
    if level is None:
        raise TypeInferError(
            f"{where}: Mesh topology {m.topology!r} is not a level of the module's Topology "
            f"{[v.name for v in topology.levels]}", op="Module",
            rule="a Mesh topology name MUST resolve to one of the owning Module's Topology "
            "levels; a Mesh MUST NOT create a level",
            fix="declare the level on the Module or use one of its levels")
    if m.size != level.extent:
        axes = " x ".join(f"{n}={e}" for n, e in zip(m.axis_names, m.axis_extents, strict=True))
        raise TypeInferError(
            f"{where}: Mesh over level {level.name} has axes {axes} = {m.size} instances, but "
            f"the level has extent {level.extent}", op="Module",
            rule="a Mesh MUST NOT change a Topology level's extent (its axis extents multiply "
            "to the level's extent)")


def _unmaterialized(t: Any, shard_only: bool) -> TensorType | None:
    for tt in _tensor_types(t):
        lay = tt.layout
        if isinstance(lay, ShardLayout) and lay.layout.strides is None:
            return tt
        if not shard_only and isinstance(lay, Layout) and lay.strides is None:
            return tt
    return None


def check_strides_materialized(module: Module) -> None:
    """No signature annotation reachable from the module carries ``strides=None``, and no
    inferred type (stamp) reachable from it has a ShardLayout with ``strides=None`` (the HIR
    architecture invariant after typeinfer)."""
    seen: set[int] = set()
    for fn in reachable_functions(module):
        for where, t in [(f"parameter {p.name}", p.type) for p in fn.params] + \
                [("return_type", fn.return_type)]:
            bad = _unmaterialized(t, shard_only=False)
            if bad is not None:
                raise _fn_error(fn, f"{where} {type_str(t)} carries Layout(strides=None)",
                                rule="After signature binding, no Tensor[...] annotation "
                                "reachable from the function carries strides=None",
                                fix="run infer_module (it materializes signatures)")
        if not isinstance(fn.body, Expr):
            continue
        for node in _walk(fn.body):
            if id(node) in seen or not node.has_type:
                continue
            seen.add(id(node))
            bad = _unmaterialized(node.checked_type, shard_only=True)
            if bad is not None:
                raise _fn_error(fn, f"a {type(node).__name__} has type {type_str(bad)}, a "
                                f"ShardLayout with strides=None",
                                rule="after HIR typeinfer every ShardLayout reachable from a "
                                "value's type has concrete layout.strides",
                                fix="the op's typeinfer must materialize the sugar")


def verify_module(module: Module) -> None:
    """Module-level verification: no top-level variant; every function's rules (dispatch
    prototypes: their variants and envelope partition; body is None ⟺ variants != ());
    every Mesh names a level of the module's Topology without changing its extent; strides are
    materialized (``check_strides_materialized``)."""
    if not isinstance(module, Module):
        raise TypeInferError(f"expected a Module, got {type(module).__name__}", op="Module",
                             rule="Module")
    for f in module.functions:
        if f.specializations:
            raise TypeInferError(f"top-level function {f.name} is a variant "
                                 f"({f.canonical_signature})", op="Module",
                                 rule="A top-level Module.functions entry MUST NOT be a variant")
        check_function(f)
    topo = module.topology
    for fn in reachable_functions(module):
        for p in fn.params:
            for sl in _shard_layouts_in(p.type):
                _check_mesh(topo, sl, f"function {fn.name}, parameter {p.name}")
        for sl in _shard_layouts_in(fn.return_type):
            _check_mesh(topo, sl, f"function {fn.name}, return_type")
        if not isinstance(fn.body, Expr):
            continue
        for node in _walk(fn.body):
            where = f"function {fn.name}, {type(node).__name__}"
            if isinstance(node, Var):
                for sl in _shard_layouts_in(node.type):
                    _check_mesh(topo, sl, f"{where} {node.name}")
            if node.has_type:
                for sl in _shard_layouts_in(node.checked_type):
                    _check_mesh(topo, sl, where)
            if isinstance(node, Call) and isinstance(node.op, Op):
                for f_ in fields(node.op):
                    for sl in _shard_layouts_in(getattr(node.op, f_.name)):
                        _check_mesh(topo, sl, f"{where} {type(node.op).__name__}.{f_.name}")
    check_strides_materialized(module)


def infer_module(module: Module, session: Session | None = None) -> Module:
    """Infer every function of ``module`` in one Session (a fresh one unless given) and verify
    the module. Returns the module whose functions carry materialized signatures — ``module``
    itself when no signature used the ``Layout(strides=None)`` sugar."""
    if not isinstance(module, Module):
        raise TypeInferError(f"expected a Module, got {type(module).__name__}", op="Module",
                             rule="Module")
    from tilefoundry.limits import deep_recursion
    from tilefoundry.semantics.validate import validate_module

    validate_module(module, "infer_module")
    session = session if session is not None else Session()
    with deep_recursion():
        fns = tuple(materialize_signature(f, session) for f in module.functions)
        out = module if all(a is b for a, b in zip(fns, module.functions, strict=True)) else \
            Module(fns, module.target, module.topology)
        for f in out.functions:
            infer_expr(f, session)
        verify_module(out)
    return out


