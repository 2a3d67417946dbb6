"""tilefoundry.semantics: dtypes and exact rounding, types, IR, type inference, the reference
evaluator (``evaluate``) and mesh simulation (``shard`` / ``unshard`` / ``erase_sharding``)."""

from __future__ import annotations

from typing import Any

_LAZY = {
    "evaluate": ("tilefoundry.semantics.evaluator.core", "evaluate"),
    "Evaluation": ("tilefoundry.semantics.evaluator.core", "Evaluation"),
    "EvaluationError": ("tilefoundry.semantics.evaluator.registry", "EvaluationError"),
    "OpContract": ("tilefoundry.semantics.evaluator.registry", "OpContract"),
    "Sharded": ("tilefoundry.semantics.evaluator.mesh", "Sharded"),
    "PerDevice": ("tilefoundry.semantics.evaluator.mesh", "PerDevice"),
    "shard": ("tilefoundry.semantics.evaluator.mesh", "shard"),
    "unshard": ("tilefoundry.semantics.evaluator.mesh", "unshard"),
    "erase_sharding": ("tilefoundry.semantics.evaluator.erasure", "erase_sharding"),
    "check_erasure": ("tilefoundry.semantics.evaluator.erasure", "check_erasure"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    # lazy: importing tilefoundry.semantics (e.g. for dtypes) does not load the evaluator
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'tilefoundry.semantics' has no attribute {name!r}")
