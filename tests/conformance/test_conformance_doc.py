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


def test_conformance_doc_tier_counts_are_the_catalogs():
    """The tier sizes and the capability-directed counts the page states are the catalog's."""
    from tilefoundry.conformance.catalog import build_catalog
    from tilefoundry.conformance.catalog.capability import CAPABILITY_PER_TIER

    text = (ROOT / "docs" / "conformance.md").read_text()
    m = re.search(r"The quick tier has ([\d,]+) cases and the full tier ([\d,]+)", text)
    assert m, "docs/conformance.md no longer states the tier sizes"
    cat = build_catalog(0)
    assert int(m[1].replace(",", "")) == len(cat.tier("quick"))
    assert int(m[2].replace(",", "")) == len(cat.tier("full"))
    m = re.search(r"claim, (\d+) in the quick tier and (\d+) in the full tier", text)
    assert m and (int(m[1]), int(m[2])) == (CAPABILITY_PER_TIER["quick"],
                                            CAPABILITY_PER_TIER["full"])
    m = re.search(r"passes the\s+quick tier, ([\d,]+) cases with its own (\d+)", text)
    assert m and int(m[1].replace(",", "")) == len(cat.tier("quick")) + int(m[2])
    kernels = [c for c in cat if c.family == "kernels"]
    m = re.search(r"small ragged shapes \((\d+) cases\); the full tier .*?\((\d+) more\)", text,
                  flags=re.S)
    assert m and int(m[1]) == sum(c.tier == "quick" for c in kernels)
    assert int(m[2]) == sum(c.tier == "full" for c in kernels)
