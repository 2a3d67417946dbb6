"""The entry-point check of a Module: every node as its constructor would accept it, no
function reaching itself, nesting within ``Limits.max_nesting``.

IR nodes are frozen dataclasses whose constructors validate their fields, but a frozen field
can still be written with ``object.__setattr__`` (or a variant list grown into a cycle), so the
public entry points (``infer_module`` and through it ``evaluate`` / ``compile``, ``to_text``,
``to_source``) run ``validate_module`` first: one iterative walk over every reachable object
that re-runs each dataclass's own field checks, so a malformed field is reported as the
``IRError`` its constructor would have raised instead of surfacing later as an AttributeError
deep inside a rule. The walk also computes the nesting depth (function calls, dispatch variants
and loops, one level each) and refuses a Function that reaches itself (a variant whose body
calls its own prototype, ``v.add_variant(v)``): HIR functions are not recursive.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np

from tilefoundry.errors import TilefoundryError
from tilefoundry.limits import LimitError, limits
from tilefoundry.semantics.ir import Call, Expr, Function, GridRegionExpr, Module
from tilefoundry.semantics.types import IRError

__all__ = ["validate_module"]

_LEAVES = (int, float, str, bytes, bool, type(None), enum.Enum, np.ndarray, np.generic)


def _recheck(obj: Any, entry: str) -> None:
    post = getattr(type(obj), "__post_init__", None)
    if post is None:
        return
    where = f"{entry}: {type(obj).__name__}" + \
        (f" @{obj.name!r}" if isinstance(obj, Function) else "")
    sealed = obj.__dict__.get("_sealed") if isinstance(obj, Function) else None
    try:
        post(obj)
    except TilefoundryError as e:
        raise IRError(f"{where}: {e} (a field was changed after construction; rebuild the node "
                      f"through its constructor)") from None
    except Exception as e:  # a field of a kind the check itself cannot read
        raise IRError(f"{where}: {type(obj).__name__} holds a field its constructor rejects "
                      f"({type(e).__name__}: {e}); a field was changed after construction, "
                      f"rebuild the node through its constructor") from None
    finally:
        if isinstance(obj, Function) and sealed is not None:
            object.__setattr__(obj, "_sealed", sealed)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _fields(obj: Any) -> list[Any]:
    if isinstance(obj, tuple | list):
        return list(obj)
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    names = _FIELD_NAMES.get(type(obj))
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(obj)) if \
            dataclasses.is_dataclass(obj) and not isinstance(obj, type) else ()
        _FIELD_NAMES[type(obj)] = names
    d = obj.__dict__ if names else {}
    return [d.get(n) for n in names]


def _check_objects(module: Module, where: str) -> None:
    """Re-run every reachable dataclass's field checks (iterative, each object once)."""
    seen: set[int] = set()
    stack: list[Any] = [module]
    while stack:
        obj = stack.pop()
        if isinstance(obj, _LEAVES) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, tuple | list | dict):
            stack.extend(_fields(obj))
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            _recheck(obj, where)
            stack.extend(_fields(obj))
        # else: a foreign object inside a field: its owner's check rejects it


def _function_edges(fn: Function) -> list[tuple[Function, int]]:
    """(function, nesting level) for each function ``fn`` calls or dispatches to: its
    variants at level 1, callees at 1 + the loop nesting of the call site."""
    out: list[tuple[Function, int]] = [(v, 1) for v in fn.variants if isinstance(v, Function)]
    if not isinstance(fn.body, Expr):
        return out
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(fn.body, 0)]
    while stack:
        node, level = stack.pop()
        if not isinstance(node, Expr) or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Function):
            out.append((node, level + 1))
            continue
        if isinstance(node, Call) and isinstance(node.op, Function):
            out.append((node.op, level + 1))
        if isinstance(node, GridRegionExpr):
            out.append((None, level + 1))  # type: ignore[arg-type]  # the loop's own level
            for v in node.init_args:
                stack.append((v, level))
            for v in (node.body, *node.yield_values):
                stack.append((v, level + 1))
            continue
        for v in _fields(node):
            if isinstance(v, tuple):
                stack.extend((x, level) for x in v)
            else:
                stack.append((v, level))
    return out


def _check_functions(module: Module, where: str) -> None:
    """No function reaches itself; the deepest chain of calls / variants / loops is within
    ``max_nesting`` (iterative post-order over the function graph, memoized)."""
    lim = limits().max_nesting
    depth: dict[int, int] = {}
    on_path: dict[int, Function] = {}
    edges: dict[int, list] = {}
    for root in module.functions:
        stack: list[tuple[Function, bool]] = [(root, False)]
        while stack:
            fn, ready = stack.pop()
            if id(fn) in depth:
                continue
            if ready:
                on_path.pop(id(fn), None)
                d = 0
                for callee, level in edges.pop(id(fn)):
                    d = max(d, level + (depth[id(callee)] if callee is not None else 0))
                if d > lim:
                    raise LimitError(f"{where}: @{fn.name} nests {d:,} levels of function "
                                     f"calls, dispatch variants and loops, more than the limit "
                                     f"max_nesting; {limits().how('max_nesting')}",
                                     "max_nesting")
                depth[id(fn)] = d
                continue
            if id(fn) in on_path:
                raise IRError(f"{where}: @{fn.name} reaches itself through its calls or "
                              f"variants; HIR functions are not recursive")
            on_path[id(fn)] = fn
            es = _function_edges(fn)
            edges[id(fn)] = es
            stack.append((fn, True))
            for callee, _level in es:
                if callee is None or id(callee) in depth:
                    continue
                if id(callee) in on_path:
                    if callee is fn:
                        what = f"@{fn.name} calls itself" if not any(
                            callee is v for v in fn.variants) else \
                            f"@{fn.name} is its own dispatch variant"
                    elif any(fn is v for v in callee.variants):
                        what = (f"the variant @{fn.name} [{fn.canonical_signature}] calls its "
                                f"own dispatch prototype @{callee.name}")
                    else:
                        what = f"@{callee.name} reaches itself through @{fn.name}"
                    raise IRError(f"{where}: {what}; HIR functions are not recursive (a "
                                  f"variant must not call its own prototype, a prototype must "
                                  f"not be its own variant): call a different function or "
                                  f"unroll the recursion")
                stack.append((callee, False))


def validate_module(module: Any, where: str) -> None:
    """Check ``module`` as described in the module docstring; ``where`` (the entry point's
    name) opens every message."""
    if not isinstance(module, Module):
        raise IRError(f"{where}: expected a Module, got {type(module).__name__}")
    _check_objects(module, where)
    _check_functions(module, where)
