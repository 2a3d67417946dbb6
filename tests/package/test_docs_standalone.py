"""The shipped docs stand alone: users get the repository only, so README.md and docs/ never
point outside it (no design notes next to the checkout), every relative markdown link resolves
to a file of the repository, and the ULP table printed in docs/contracts.md is the code's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_IMAGES = (".png", ".jpg", ".jpeg", ".gif")  # binary: no text to point anywhere
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*")
                                    if p.is_file() and p.suffix.lower() not in _IMAGES)]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OUTSIDE = ("../shared", "shared/", "ARCHITECTURE.md")

_FENCE = re.compile(r"^(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_EXTERNAL = re.compile(r"^([a-z][a-z0-9+.-]*:|//|#)", re.I)


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def _prose_lines(text: str):
    """(line number, line) outside fenced code blocks, with inline code spans removed."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            yield n, _CODE_SPAN.sub("", line)


def test_docs_found():
    assert (ROOT / "README.md").is_file() and len(PAGES) > 3


@pytest.mark.parametrize("page", DOCS, ids=_rel)
def test_no_pointer_outside_the_repository(page):
    text = page.read_text(encoding="utf-8")  # docs/ ships text only: anything else fails here
    hits = [f"{_rel(page)}:{n}: mentions {needle!r}: {line.strip()}"
            for n, line in enumerate(text.splitlines(), 1)
            for needle in OUTSIDE if needle in line]
    assert not hits, ("docs shipped with the repository point outside it (users never get "
                      "those files; cite docs/contracts.md or a decision number instead):\n"
                      + "\n".join(hits))


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_relative_links_resolve(page):
    broken = []
    for n, line in _prose_lines(page.read_text(encoding="utf-8")):
        for target in _LINK.findall(line):
            if _EXTERNAL.match(target):
                continue
            path = target.split("#", 1)[0]
            resolved = (page.parent / path).resolve()
            if not resolved.exists() or not resolved.is_relative_to(ROOT):
                broken.append(f"{_rel(page)}:{n}: link ({target}) does not resolve to a file "
                              f"of the repository")
    assert not broken, "\n".join(broken)


def test_link_checker_sees_links():
    lines = dict(_prose_lines("see [a](docs/x.md) and `[b](no.md)`\n```\n[c](code.md)\n```\n"))
    assert [_LINK.findall(v) for v in lines.values()] == [["docs/x.md"]]


def test_contracts_ulp_table_is_the_code():
    from tilefoundry.semantics.ulp import BUDGETS, DTYPES, OPS, VERSION

    text = (ROOT / "docs" / "contracts.md").read_text(encoding="utf-8")
    assert f"version {VERSION}" in text, f"docs/contracts.md must name ULP table version {VERSION}"
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("| key | op |")), None)
    assert start is not None, "docs/contracts.md has no ULP table (header '| key | op | ...')"
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in lines[start:end] if not line.startswith("|---")]
    head, body = rows[0], rows[1:]
    cols = [str(d) for d in DTYPES]
    assert head[2:] == cols, f"ULP table columns {head[2:]}, the code has {cols}"
    table = {r[0].strip("`"): [float(c) for c in r[2:]] for r in body}
    assert list(table) == list(OPS), f"ULP table ops {list(table)}, the code has {list(OPS)}"
    for op, cells in table.items():
        want = [BUDGETS[(op, d)] for d in DTYPES]
        assert cells == want, f"docs/contracts.md ULP row {op}: {cells}, the code has {want}"
