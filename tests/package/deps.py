"""The package dependency graph, from the imports (AST; top-level and function-level imports
both count). ``python tests/package/deps.py [ROOT]`` prints it; ``test_dependencies.py``
checks it (D372).

A *package* is a top-level folder (``semantics``, ``smt``, ``oracle``, ``compiler``,
``conformance``, ``validate``) or a module of ``tilefoundry/`` (``tilefoundry.cli`` sits above everything;
``errors`` / ``limits`` / ... below everything). The backend protocol — ``conformance/backend.py``
and the modules it imports (``PROTOCOL``) — is a layer of its own, ``conformance.protocol``:
the compiler's backends implement it, and the rest of ``conformance`` runs the compiler.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("semantics", "smt", "oracle", "compiler", "conformance", "validate")
#: the backend protocol's modules (``conformance.protocol``)
PROTOCOL = ("backend", "reduction_orders", "loaders", "input_checks", "cases")
#: the layers, bottom first: a package may import only packages of lower layers (D372)
LAYERS = (
    ("tilefoundry.errors",),
    ("tilefoundry.limits", "tilefoundry.arguments", "tilefoundry.loading", "tilefoundry.versions"),
    ("semantics",),
    ("smt", "oracle"),
    ("conformance.protocol",),
    ("compiler",),
    ("conformance",),
    ("validate",),  # translation validation: runs the compiler, writes conformance reproducers
    ("tilefoundry", "tilefoundry.cli"),
    ("tilefoundry.__main__",),
)


def package_of_module(name: str) -> str | None:
    """``tilefoundry.semantics.ir`` -> ``semantics``; ``tilefoundry.cli`` -> ``tilefoundry.cli``."""
    parts = name.split(".")
    if parts[0] != "tilefoundry" or len(parts) < 2:
        return None
    if parts[1] == "conformance" and len(parts) > 2 and parts[2] in PROTOCOL:
        return "conformance.protocol"
    if parts[1] in FOLDERS:
        return parts[1]
    return f"tilefoundry.{parts[1]}"


def source_files(root: Path = ROOT):
    for folder in (*FOLDERS, "tilefoundry"):
        for p in sorted((root / folder).rglob("*.py")):
            rel = p.relative_to(root)
            pkg = folder if folder != "tilefoundry" else f"tilefoundry.{p.stem}"
            if folder == "conformance" and rel.parent == Path("conformance") and \
                    p.stem in PROTOCOL:
                pkg = "conformance.protocol"
            if folder == "tilefoundry" and p.stem == "__init__":
                pkg = "tilefoundry"
            yield pkg, rel, p


def imports(tree: ast.AST):
    """(module, imported names, line) of every import in the file, nested ones included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [a.name for a in node.names], node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, [], node.lineno


def scan(root: Path = ROOT):
    """(edges: pkg -> {pkg: [where]}, private: [(file:line, module, name)])."""
    edges: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    private: list[tuple[str, str, str]] = []
    for pkg, rel, path in source_files(root):
        tree = ast.parse(path.read_text(), str(rel))
        for module, names, line in imports(tree):
            dst = package_of_module(module)
            if dst is None or dst == pkg:
                continue
            edges[pkg][dst].append(f"{rel}:{line}")
            for n in names:
                # a private name of another package, or a private module of it
                if n.startswith("_") and not n.startswith("__"):
                    private.append((f"{rel}:{line}", module, n))
            if any(p.startswith("_") and not p.startswith("__") for p in module.split(".")):
                private.append((f"{rel}:{line}", module, "*"))
    return edges, private


def cycles(edges) -> list[list[str]]:
    """The strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    nodes = set(edges) | {d for e in edges.values() for d in e}

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def layer_of(pkg: str) -> int:
    for i, names in enumerate(LAYERS):
        if pkg in names:
            return i
    raise KeyError(f"{pkg} is in no layer of tests/package/deps.py LAYERS")


def upward(edges) -> list[str]:
    """Edges that do not go to a strictly lower layer."""
    return [f"{src} -> {dst} ({edges[src][dst][0]})" for src in sorted(edges)
            for dst in sorted(edges[src]) if layer_of(dst) >= layer_of(src)]


def render(edges) -> str:
    lines = []
    for src in sorted(edges):
        for dst in sorted(edges[src]):
            lines.append(f"{src} -> {dst}  ({len(edges[src][dst])} imports, e.g. "
                         f"{edges[src][dst][0]})")
    return "\n".join(lines)


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    e, priv = scan(root)
    print(render(e))
    print("cycles:", cycles(e))
    print("edges not going down the layers:", upward(e))
    print(f"cross-package private imports: {len(priv)}")
    for where, mod, name in priv:
        print(f"  {where}: from {mod} import {name}")
