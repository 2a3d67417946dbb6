"""Hand-written IR walks, found by their shape (AST): a function with a ``while`` loop that
pops a work list and reads tensor-IR nodes (names a node class or ``operands``, or reads
``.tuple_value`` / ``.init_args`` / ``.yield_values``). ``semantics/ir.py`` holds the walk (``reachable``, ``postorder``, ``run_dag``,
D374); ``python tests/package/walks.py [ROOT]`` lists the others."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("semantics", "smt", "oracle", "compiler", "conformance", "tilefoundry")
#: what marks a loop as walking the tensor IR (not kernel IR steps or types): its node classes,
#: the fields only IR nodes have, the operand functions (``operands``, ``*children*``)
IR_NAMES = {"Call", "Tuple", "TupleExpr", "TupleGetItem", "GridRegionExpr", "operands"}
IR_FIELDS = {"tuple_value", "init_args", "yield_values"}
HOME = Path("semantics/ir.py")


def _is_walk(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for loop in ast.walk(fn):
        if not isinstance(loop, ast.While):
            continue
        pops = reads_ir = False
        for n in ast.walk(loop):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    n.func.attr == "pop":
                pops = True
            if isinstance(n, ast.Attribute) and n.attr in IR_FIELDS:
                reads_ir = True
            if isinstance(n, ast.Name) and (n.id in IR_NAMES or "children" in n.id):
                reads_ir = True
        if pops and reads_ir:
            return True
    return False


def hand_written_walks(root: Path = ROOT) -> list[str]:
    out = []
    for folder in FOLDERS:
        for p in sorted((root / folder).rglob("*.py")):
            rel = p.relative_to(root)
            if rel == HOME:
                continue
            tree = ast.parse(p.read_text(), str(rel))
            for fn in ast.walk(tree):
                if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and _is_walk(fn):
                    out.append(f"{rel}:{fn.lineno} {fn.name}")
    return out


if __name__ == "__main__":
    found = hand_written_walks(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
    print("\n".join(found))
    print(f"{len(found)} hand-written IR walks outside {HOME}")
