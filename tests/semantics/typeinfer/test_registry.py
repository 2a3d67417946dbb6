"""One registry per concern, keyed by op class, with a completeness test (ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import tilefoundry.semantics.typeinfer  # noqa: F401  (registers every family's rules)
from tilefoundry.semantics import ops
from tilefoundry.semantics.ir import Op

ROOT = Path(__file__).resolve().parents[3]


def _all_op_classes() -> set[type]:
    seen, todo = set(), [Op]
    while todo:
        c = todo.pop()
        for s in c.__subclasses__():
            if s not in seen:
                seen.add(s)
                todo.append(s)
    return {c for c in seen
            if c.__module__.startswith("tilefoundry.semantics.ops") and "INPUTS" in vars(c)}


def test_all_ops_lists_every_op_class():
    declared = _all_op_classes()
    assert declared == set(ops.ALL_OPS), declared ^ set(ops.ALL_OPS)


def test_type_rules_import_nothing_from_compiler_or_backends():
    """ARCHITECTURE.md: 'Type rules never import anything from a backend'."""
    for path in (ROOT / "semantics").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for n in names:
                assert not n.startswith(("tilefoundry.compiler", "tilefoundry.conformance",
                                         "torch", "triton")), (path, n)


def test_every_commutation_row_is_exercised_by_a_rule_test():
    """Issue 'HIR': 'every table row is exercised' — the row-by-row tests of the math / nn
    module and of the tensor module together cover the whole table, each row once."""
    import test_commutation_table
    import test_rules_tensor
    import test_rules_tile_reduce

    from tilefoundry.semantics.typeinfer.commutation import TABLE

    a, b = list(test_commutation_table.ROWS), list(test_rules_tensor.ROWS)
    c = list(test_rules_tile_reduce.ROWS)
    assert not set(a) & set(b) and not (set(a) | set(b)) & set(c)
    assert set(a) | set(b) | set(c) == set(TABLE)
