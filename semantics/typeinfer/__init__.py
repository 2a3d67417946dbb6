"""Type inference: a registry of rules keyed by op class, the driver, and the verifier.

Importing this package registers every family's rules (``math``, ``tensor``, ``nn``, ``shape``,
``sharding``)."""

from __future__ import annotations

from tilefoundry.semantics.typeinfer.core import (
    RULES,
    Ctx,
    Session,
    TypeInferError,
    infer_expr,
    register_typeinfer,
)

__all__ = ["RULES", "Ctx", "Session", "TypeInferError", "infer_expr", "register_typeinfer"]
