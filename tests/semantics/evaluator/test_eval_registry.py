"""The evaluator registry is complete: one implementation per op class of the catalog.

Engineering conventions: "One registry per concern keyed by op class ... with a completeness
test". Issue 'evaluator': "Every op of the catalog under the numeric contracts"."""

from __future__ import annotations

import pytest

from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics import ops
from tilefoundry.semantics.evaluator import families  # noqa: F401  (registers every family)
from tilefoundry.semantics.evaluator.registry import OpContract, register_eval


def test_an_op_registers_once():
    with pytest.raises(TilefoundryError, match="already has an evaluator"):
        register_eval(ops.ALL_OPS[0])(lambda ctx, args: None)


def test_contract_kind_is_checked():
    with pytest.raises(TilefoundryError, match=r"OpContract\.kind must be one of"):
        OpContract(op="x", kind="approximately")


def test_evaluate_is_exported_from_semantics():
    import tilefoundry.semantics as sem
    from tilefoundry.semantics.evaluator.core import evaluate

    assert sem.evaluate is evaluate
    assert callable(sem.shard) and callable(sem.unshard) and callable(sem.erase_sharding)
