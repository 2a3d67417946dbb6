"""Type inference: a registry of rules keyed by op class, the driver, and the verifier.

Importing this package registers every family's rules (``math``, ``tensor``, ``nn``, ``shape``,
``sharding``, and the ``tile`` extension family: ``tile_select``, ``tile_scan``,
``tile_sort``, ``tile_mma``, ``tile_reduce``)."""

from __future__ import annotations

# Importing the families registers their rules (one registry keyed by op class).
from tilefoundry.semantics.typeinfer import (  # noqa: F401
    functions,
    math,
    nn,
    shape,
    sharding,
    tensor,
    tile_mma,
    tile_reduce,
    tile_scan,
    tile_scan_flags,
    tile_select,
    tile_sort,
)
from tilefoundry.semantics.typeinfer.core import (
    RULES,
    Ctx,
    Session,
    TypeInferError,
    infer_expr,
    register_typeinfer,
)
from tilefoundry.semantics.typeinfer.functions import infer_module, verify_module

__all__ = [
    "RULES",
    "Ctx",
    "Session",
    "TypeInferError",
    "infer_expr",
    "infer_module",
    "register_typeinfer",
    "verify_module",
]
