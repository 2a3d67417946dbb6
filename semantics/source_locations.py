"""Where a DSL-built IR node came from (``file:line:col``), kept beside the node rather than
in it (a node's identity, equality and printing ignore its source), so that an error found
after parsing — a typing rule rejecting a Call — names the line that wrote it.

The parser records each Call it builds for an expression (``remember_location``); the type
inference prefixes a ``TypeInferError`` raised at a recorded node with its location
(``location_of``). Entries go with their nodes (weak references)."""

from __future__ import annotations

import weakref
from typing import Any

_LOCS: dict[int, tuple[weakref.ref, str]] = {}


def remember_location(node: Any, filename: str | None, line: int, col: int | None) -> None:
    key = id(node)
    if key in _LOCS and _LOCS[key][0]() is node:
        return  # the innermost expression that built it was recorded first
    try:
        ref = weakref.ref(node, lambda _r, key=key: _LOCS.pop(key, None))
    except TypeError:  # a node type without weak references: no location
        return
    where = f"{filename or '<dsl>'}:{line}" + (f":{col}" if col is not None else "")
    _LOCS[key] = (ref, where)


def location_of(node: Any) -> str | None:
    hit = _LOCS.get(id(node))
    if hit is None or hit[0]() is not node:
        return None
    return hit[1]


__all__ = ["location_of", "remember_location"]
