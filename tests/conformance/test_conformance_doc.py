"""docs/conformance.md: its python blocks run (in order, one namespace)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_conformance_doc_python_blocks_run():
    text = (ROOT / "docs" / "conformance.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    ns: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/conformance.md[block {i}]", "exec"), ns)
    assert ns["result"].ok
