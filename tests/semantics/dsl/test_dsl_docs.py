"""Every ```python block of docs/dsl.md runs, in order, in one namespace — the way
tests/package/test_docs.py runs the user guide. @func reads its function's source through
``inspect``, so each block's text is registered with ``linecache`` under the name it is
compiled with (as an interactive interpreter does)."""

from __future__ import annotations

import linecache
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGE = "docs/dsl.md"


def test_dsl_page_python_blocks_run():
    text = (ROOT / PAGE).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 10, f"{PAGE} has {len(blocks)} python blocks"
    ns: dict = {}
    for i, block in enumerate(blocks):
        name = f"{PAGE}[block {i}]"
        linecache.cache[name] = (len(block), None, block.splitlines(True), name)
        try:
            exec(compile(block, name, "exec"), ns)
        finally:
            linecache.cache.pop(name, None)


def test_dsl_page_shows_every_op_family():
    text = (ROOT / PAGE).read_text()
    for family in ("math", "tensor", "nn", "shape", "sharding"):
        assert re.search(rf"^## The {family} family", text, flags=re.M), family
