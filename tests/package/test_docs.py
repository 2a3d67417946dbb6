"""Every ```python block of the user-facing docs runs (the blocks of one page share a namespace,
in order), so the guide cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["docs/user-guide.md", "docs/contracts.md"]


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_run(page):
    text = (ROOT / page).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, f"{page} has no python blocks"
    ns: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{page}[block {i}]", "exec"), ns)
