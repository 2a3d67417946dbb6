"""The package structure (issue 36; D372, D374): the package dependency graph computed from the
imports (AST, function-level imports included) has no cycle and goes down the layers
``errors < limits / arguments / loading / versions < semantics < smt, oracle < the backend
protocol < compiler < conformance < cli``; no module imports another package's private name;
no module outside ``semantics/ir.py`` writes out its own IR walk (but the listed ones, each with
why it stays). ``python tests/package/deps.py`` / ``walks.py`` print the graph and the walks.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import deps
import walks


def test_package_graph_has_no_cycle_and_goes_down_the_layers():
    edges, _ = deps.scan()
    print(deps.render(edges))  # the graph, with -s
    assert deps.cycles(edges) == []
    assert deps.upward(edges) == []
    # the layering is about real edges: the big packages do import what they sit on
    assert "semantics" in edges["oracle"] and "compiler" in edges["conformance"]
    assert "conformance.protocol" in edges["compiler"]


def test_no_cross_package_private_import():
    _, private = deps.scan()
    assert private == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for folder in (*deps.FOLDERS, "tilefoundry"):
        (tmp_path / folder).mkdir(exist_ok=True)
    return tmp_path


def test_the_scan_sees_function_level_imports_cycles_and_private_names(tmp_path):
    root = _tree(tmp_path, {
        "semantics/a.py": "def f():\n    from tilefoundry.oracle.b import _hidden\n",
        "oracle/b.py": "from tilefoundry.semantics import a\n_hidden = 1\n",
        "compiler/c.py": "import tilefoundry.conformance.backend\n",
    })
    edges, private = deps.scan(root)
    assert deps.cycles(edges) == [["oracle", "semantics"]]
    assert private == [("semantics/a.py:2", "tilefoundry.oracle.b", "_hidden")]
    assert "semantics -> oracle (semantics/a.py:2)" in deps.upward(edges)
    assert dict(edges["compiler"]) == {"conformance.protocol": ["compiler/c.py:1"]}


#: the hand-written walks left, and why each stays (D374)
KEEP = {
    # the DSL printer's passes: the order of emission is the printed program's order
    "semantics/dsl/source.py analyze", "semantics/dsl/source.py stamp_loops",
    "semantics/dsl/source.py require", "semantics/dsl/source.py emit_loop",
    "semantics/printer.py body",  # prints in a fixed visiting order, with indentation state
    # stamps types with cycle detection (an IR that reaches itself is refused)
    "semantics/typeinfer/core.py infer_expr",
    "semantics/validate.py _function_edges",  # walks functions and their call edges together
    "oracle/compare.py _copied",  # a copying walk whose result order is compared
    "oracle/generator/config.py count_ops",  # moved by the generator split (issue 36 item 6)
    "compiler/mesh_partition.py loop",  # stops at the outer values, which it collects on the way
    # the fuzzer's mutation sites: Ops and types too, capped at 5,000, in a seeded order
    "conformance/fuzz_ir.py _nodes",
}


def _names(found: list[str]) -> set[str]:
    return {f"{w.split(':')[0]} {w.split(' ')[1]}" for w in found}


def test_no_new_hand_written_ir_walk():
    found = _names(walks.hand_written_walks())
    assert found - KEEP == set(), "use semantics/ir.py's reachable / postorder / run_dag"
    assert KEEP - found == set(), "a kept walk is gone: drop it from KEEP"


def test_the_walk_scan_finds_a_work_list_walk(tmp_path):
    root = _tree(tmp_path, {"oracle/w.py": (
        "def mine(root):\n"
        "    out, stack = [], [root]\n"
        "    while stack:\n"
        "        n = stack.pop()\n"
        "        out.append(n)\n"
        "        if isinstance(n, Call):\n"
        "            stack.extend(n.args)\n"
        "    return out\n"
        "def steps(xs):\n"
        "    stack = list(xs)\n"
        "    while stack:\n"
        "        stack.pop()\n")})
    assert walks.hand_written_walks(root) == ["oracle/w.py:1 mine"]
