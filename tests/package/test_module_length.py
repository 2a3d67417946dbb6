"""Issue 36 item 6 (D445): no package module over 800 lines unless its module docstring's first
paragraph holds a line starting ``Over 800 lines:`` followed by the reason."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("semantics", "smt", "oracle", "compiler", "conformance", "validate", "tilefoundry",
           "benchmarks")
LIMIT = 800
MARK = "Over 800 lines:"


def _first_paragraph(source: str) -> str:
    doc = ast.get_docstring(ast.parse(source)) or ""
    return doc.split("\n\n", 1)[0]


def states_reason(source: str) -> bool:
    return any(line.strip().startswith(MARK) and len(line.strip()) > len(MARK) + 3
               for line in _first_paragraph(source).splitlines())


def long_modules_without_reason(root: Path = ROOT) -> list[str]:
    bad = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if text.count("\n") > LIMIT and not states_reason(text):
                bad.append(f"{path.relative_to(root)} ({text.count(chr(10))} lines)")
    return bad


@pytest.mark.parametrize(("source", "ok"), [
    ('"""Parser.\n\nOver 800 lines: one recursive-descent grammar."""\n', False),  # 2nd paragraph
    ('"""Parser.\nOver 800 lines: one recursive-descent grammar."""\n', True),
    ('"""Parser.\nOver 800 lines:"""\n', False),  # no reason given
    ("x = 1\n", False),
])
def test_reason_must_be_in_first_paragraph(source: str, ok: bool) -> None:
    assert states_reason(source) is ok


def test_no_module_over_800_lines_without_a_stated_reason() -> None:
    bad = long_modules_without_reason()
    assert not bad, ("split these modules by concern, or state why not in the first docstring "
                     f"paragraph with a line 'Over 800 lines: <reason>' (D445): {bad}")
