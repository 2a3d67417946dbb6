"""The case counts the docs quote as current are the catalog's (issue 33, Deliver 8: the docs
quoted the quick tier as 759, 1,291, 1,293, 1,646 or 1,275 cases while it had 1,656; the full
tier as 1,300 while it had 2,061; the probe as 527 cases while it picked 607). Dated
measurements ("Measured when ...", "Measured 2026-12-02 ...") keep their own figures; each
sentence that states a current count is checked here against the catalog of seed 0."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def counts() -> dict[str, int]:
    from tilefoundry.conformance import probe, runner
    from tilefoundry.conformance.catalog import build_catalog

    cat = build_catalog(0)
    quick = runner.select_cases(cat, "quick")
    return {"quick": len(quick), "full": len(cat.tier("full")),
            "probe": len(probe.probe_cases(quick))}


def _num(s: str) -> int:
    return int(s.replace(",", ""))


def test_the_tier_sizes_the_docs_state_are_the_catalogs(counts):
    text = (ROOT / "docs" / "conformance.md").read_text()
    m = re.search(r"The quick tier has ([\d,]+) cases and the full tier ([\d,]+)", text)
    assert m, "docs/conformance.md no longer states the tier sizes where this test looks"
    assert (_num(m.group(1)), _num(m.group(2))) == (counts["quick"], counts["full"]), \
        f"docs/conformance.md says quick {m.group(1)} / full {m.group(2)}; the catalog has " \
        f"{counts['quick']:,} / {counts['full']:,}: update the sentence"


def test_the_probe_case_count_the_docs_state_is_the_catalogs(counts):
    text = (ROOT / "docs" / "conformance.md").read_text()
    m = re.search(r"\(([\d,]+) cases from the quick tier\)", text)
    assert m, "docs/conformance.md no longer states the probe's case count"
    assert _num(m.group(1)) == counts["probe"], \
        f"docs/conformance.md says the probe picks {m.group(1)} cases; it picks " \
        f"{counts['probe']:,}: update the sentence"


def test_no_current_tense_tier_size_elsewhere_is_stale(counts):
    """'the quick tier has N cases' anywhere in README and docs/ (a dated measurement says
    'measured' or names its date, and is not matched)."""
    pat = re.compile(r"(quick|full) tier (?:has|is) ([\d,]+) cases", re.I)
    stale = []
    for f in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for m in pat.finditer(f.read_text()):
            if _num(m.group(2)) != counts[m.group(1).lower()]:
                stale.append(f"{f.name}: {m.group(0)!r}")
    assert not stale, f"stale counts (the catalog: quick {counts['quick']:,}, full " \
                      f"{counts['full']:,}): {stale}"
