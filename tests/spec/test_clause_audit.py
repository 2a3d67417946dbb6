"""The clause audit of the Tile design and the HIR spec (issue 37, "Must show: the audit's count
re-done"): the data name real tests and real decisions, quote the texts verbatim, and the
generated page docs/spec-coverage.md is current.

The spec texts are not part of the repository. When they are present (``TILEFOUNDRY_SPEC_DIR``,
default ``/work/shared/spec``) every quoted clause must occur in its text; a clean checkout
without them skips only that check (the quotes are still checked against the decisions, and the
page against the data)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import clauses_hir
import clauses_tile
import spec_audit as audit

SPEC_DIR = Path(os.environ.get("TILEFOUNDRY_SPEC_DIR", "/work/shared/spec"))
TEXTS = {
    "tile": (clauses_tile.CLAUSES, "002_186bf9ff267546f5.txt"),
    "hir": (clauses_hir.CLAUSES, "000_aaa7a5bedff43411.txt"),
}


@pytest.mark.parametrize("which", sorted(TEXTS))
def test_the_audit_names_real_tests_and_decisions(which):
    clauses, _ = TEXTS[which]
    assert audit.problems(clauses) == []
    c = audit.counts(clauses)
    print(f"{which}: {len(clauses)} clauses: " +
          ", ".join(f"{c[s]} {s}" for s in audit.STATUSES))


@pytest.mark.parametrize("which", sorted(TEXTS))
def test_every_quoted_clause_is_in_its_text(which):
    clauses, name = TEXTS[which]
    path = SPEC_DIR / name
    if not path.is_file():
        pytest.skip(f"{path} is absent (a clean checkout has no spec texts; set "
                    f"TILEFOUNDRY_SPEC_DIR to check the quotes)")
    text = audit.norm(path.read_text())
    absent = [c.id for c in clauses if audit.norm(c.text) not in text]
    assert absent == []


def test_the_checks_catch_bad_data():
    """The checks above can fail: a made-up test, a made-up decision, a decision that does not
    quote the clause, a duplicate id and an unknown status are each reported."""
    C = audit.Clause
    bad = [
        C("x1", "s", "a clause", "implemented", ("tests/spec/test_clause_audit.py::test_nope",)),
        C("x2", "s", "a clause", "implemented", ("tests/nope.py::test_a",)),
        C("x3", "s", "the quick brown fox jumps over", "decided",
          ("D1", "quick brown fox jumps over")),
        C("x4", "s", "a clause", "decided", ("D99999", "a clause that is long enough")),
        C("x4", "s", "a clause", "finished"),
        C("x5", "s", "a clause", "implemented"),
    ]
    found = audit.problems(bad)
    assert any("x1" in p and "no test test_nope" in p for p in found)
    assert any("x2" in p and "no test file" in p for p in found)
    assert any("x3" in p and "D1 does not quote" in p for p in found)
    assert any("x4" in p and "duplicate" in p for p in found)
    assert any("finished" in p for p in found)
    assert any("x5" in p and "without a test id" in p for p in found)
    good = C("ok", "s", "a clause", "implemented",
             ("tests/spec/test_clause_audit.py::test_the_checks_catch_bad_data",))
    assert audit.problems([good]) == []


def test_the_coverage_page_is_current():
    """docs/spec-coverage.md is exactly what the data render (regenerate with
    `.venv/bin/python tests/spec/spec_audit.py` after editing the data)."""
    page = (audit.ROOT / "docs" / "spec-coverage.md").read_text()
    assert page == audit.render(audit.load())
