"""docs/backend-authors.md: the tutorial's python blocks run, in order, in one namespace.

Issue 'conformance runner', Deliver 8: "docs/backend-authors.md is a tutorial that writes a tiny
backend from scratch and runs the suite on it — executed by the tests."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_backend_authors_tutorial_runs():
    text = (ROOT / "docs" / "backend-authors.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 4
    ns: dict = {}
    path0 = list(sys.path)
    try:
        for i, block in enumerate(blocks):
            exec(compile(block, f"docs/backend-authors.md[block {i}]", "exec"), ns)
    finally:
        sys.path[:] = path0
        sys.modules.pop("tiny_backend", None)
    assert ns["result"].ok and ns["result"].counts()["PASS"] >= 1
