"""The clause audit's machinery: a clause record, the checks, and the ``docs/spec-coverage.md``
renderer. The data are ``clauses_tile.py`` (the Tile operations and reductions design) and
``clauses_hir.py`` (the HIR spec): every normative sentence, quoted, with its status.

Regenerate the page after editing the data: ``.venv/bin/python tests/spec/spec_audit.py``.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATUSES = ("implemented", "decided", "not applicable", "missing")


@dataclass(frozen=True)
class Clause:
    """One normative sentence of a spec text.

    ``evidence``: for ``implemented`` the pytest node ids (``path::function`` or
    ``path::Class::function``) that exercise it; for ``decided`` ``("D123", fragment)`` — the
    decision that quotes it and a distinctive fragment of the clause that the decision's text
    contains; for ``not applicable`` ``(reason,)``; for ``missing`` ``()`` or a note."""

    id: str
    section: str
    text: str
    status: str
    evidence: tuple[str, ...] = ()


def norm(s: str) -> str:
    """Whitespace collapsed, typographic quotes and dashes made plain, for comparing quotes."""
    s = s.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"')
    s = s.replace("\u201d", '"').replace("\u2013", "-").replace("\u2014", "-")
    s = s.replace("`", "")
    return " ".join(s.split())


def decision_entries() -> dict[str, str]:
    """``D123`` -> the normalized text of that entry of docs/decisions.md."""
    text = (ROOT / "docs" / "decisions.md").read_text()
    out: dict[str, str] = {}
    for part in re.split(r"\n(?=- \*\*D\d+)", text):
        m = re.match(r"- \*\*(D\d+)\b", part)
        if m:
            out[m.group(1)] = norm(part.split("\n## ")[0])
    return out


def test_functions(path: Path) -> set[str]:
    """The ``function`` and ``Class::function`` names of the tests defined in ``path``."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for n in tree.body:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test"):
            names.add(n.name)
        elif isinstance(n, ast.ClassDef):
            for m in n.body:
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(f"{n.name}::{m.name}")
    return names


def problems(clauses: list[Clause]) -> list[str]:
    """Every way the data are wrong (empty when they are right): ids unique, statuses known,
    each named test defined, each decision present and quoting its fragment."""
    out: list[str] = []
    seen: set[str] = set()
    decisions = decision_entries()
    defined: dict[Path, set[str]] = {}
    for c in clauses:
        if c.id in seen:
            out.append(f"{c.id}: duplicate id")
        seen.add(c.id)
        if c.status not in STATUSES:
            out.append(f"{c.id}: status {c.status!r} is not one of {STATUSES}")
        if c.status == "implemented":
            if not c.evidence:
                out.append(f"{c.id}: implemented without a test id")
            for node in c.evidence:
                file, _, name = node.partition("::")
                path = ROOT / file
                if not (file.startswith("tests/") and path.is_file()):
                    out.append(f"{c.id}: {node}: no test file {file}")
                    continue
                if path not in defined:
                    defined[path] = test_functions(path)
                if name.split("[")[0] not in defined[path]:
                    out.append(f"{c.id}: {node}: no test {name} in {file}")
        elif c.status == "decided":
            if len(c.evidence) != 2:
                out.append(f"{c.id}: decided needs (D-number, fragment)")
                continue
            d, frag = c.evidence
            if d not in decisions:
                out.append(f"{c.id}: {d} is not in docs/decisions.md")
            elif len(frag) < 20 or norm(frag) not in norm(c.text):
                out.append(f"{c.id}: the fragment {frag!r} is not 20+ characters of the clause")
            elif norm(frag) not in decisions[d]:
                out.append(f"{c.id}: {d} does not quote {frag!r}")
        elif c.status == "not applicable":
            if len(c.evidence) != 1 or len(c.evidence[0]) < 10:
                out.append(f"{c.id}: not applicable needs a one-line reason")
    return out


def counts(clauses: list[Clause]) -> Counter[str]:
    return Counter(c.status for c in clauses)


def _table(title: str, clauses: list[Clause]) -> list[str]:
    sections: dict[str, Counter[str]] = {}
    for c in clauses:
        sections.setdefault(c.section, Counter())[c.status] += 1
    lines = [f"## {title}", "", "| Section | " + " | ".join(STATUSES) + " | clauses |",
             "|---|" + "---:|" * (len(STATUSES) + 1)]
    for sec, cnt in sections.items():
        lines.append(f"| {sec} | " + " | ".join(str(cnt[s]) for s in STATUSES) +
                     f" | {sum(cnt.values())} |")
    tot = counts(clauses)
    lines.append("| **total** | " + " | ".join(f"**{tot[s]}**" for s in STATUSES) +
                 f" | **{len(clauses)}** |")
    lines += ["", "Missing:", ""]
    missing = [c for c in clauses if c.status == "missing"]
    lines += [f"- `{c.id}` ({c.section}): \"{_short(c.text)}\"" for c in missing] or ["- none"]
    return [*lines, ""]


def _short(text: str, n: int = 110) -> str:
    t = norm(text).replace("|", "/")
    return t if len(t) <= n else t[: n - 3] + "..."


def render(texts: list[tuple[str, list[Clause]]]) -> str:
    lines = [
        "# Spec coverage: the clause audit",
        "",
        "Generated from `tests/spec/clauses_tile.py` and `tests/spec/clauses_hir.py` by",
        "`.venv/bin/python tests/spec/spec_audit.py`; `tests/spec/test_clause_audit.py` checks that",
        "this page is current, that every test id named there is a defined test, and that every",
        "decision named there quotes its clause. Each normative sentence of the two texts is",
        "quoted in the data with an id and a status: **implemented** (with the tests that",
        "exercise it), **decided** (a decision in `docs/decisions.md` quotes it and says how or",
        "why not), **not applicable** (with a one-line reason: C++ / Luisa / Metal / XIR",
        "specifics, rationale, future work the text itself labels optional), or **missing**.",
        "",
    ]
    for title, clauses in texts:
        lines += _table(title, clauses)
    return "\n".join(lines)


def load() -> list[tuple[str, list[Clause]]]:
    sys.path.insert(0, str(Path(__file__).parent))
    import clauses_hir
    import clauses_tile

    return [("Tile operations and reductions design", clauses_tile.CLAUSES),
            ("HIR spec", clauses_hir.CLAUSES)]


if __name__ == "__main__":
    (ROOT / "docs" / "spec-coverage.md").write_text(render(load()))
    for title, cl in load():
        print(title, dict(counts(cl)), len(cl))
