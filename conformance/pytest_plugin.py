"""pytest plugin: ``pytest --tilefoundry-backend=SPEC`` runs the conformance catalog as tests.

Registered through the ``pytest11`` entry point (``tilefoundry``), so installing tilefoundry is
enough. Without ``--tilefoundry-backend`` it does nothing (no imports beyond this module, no
items). With it, one test item per case is added to the session — ``tilefoundry-conformance::
test_case[<case id>]``, marked ``tilefoundry_conformance`` (select with ``-m``, narrow with
``-k``). The selected cases are run **once, together, by the conformance runner** (worker
processes, per-case time limits, the manifest) when the first of them runs, so a segfaulting or
hanging backend is a failing test, never a dead pytest. Each item then reports its verdict:
PASS passes, and so does ADMITTED (a pass under the declared relaxations only, recorded as the
item's ``admitted`` user property); NOT_SUPPORTED is a skip (with the reason); XFAIL is an xfail; FAIL, ERROR, CRASH,
TIMEOUT and XPASS fail with the runner's message (worst element, reproducer path).

Options: ``--tilefoundry-tier`` (quick), ``--tilefoundry-seed`` (0), ``--tilefoundry-jobs`` (1),
``--tilefoundry-timeout`` (60 s), ``--tilefoundry-manifest``, ``--tilefoundry-cases`` (glob,
repeatable), ``--tilefoundry-catalog`` (``module:function``), ``--tilefoundry-jsonl`` and
``--tilefoundry-repro-dir``.
"""

from __future__ import annotations

import pytest

_ROOT = "tilefoundry-conformance"
_KEY: pytest.StashKey[dict] = pytest.StashKey()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("tilefoundry", "tilefoundry conformance")
    g.addoption("--tilefoundry-backend", default=None, metavar="SPEC",
                help="run the tilefoundry conformance catalog against this backend "
                     "('package.module:factory', 'reference', or an entry-point name)")
    g.addoption("--tilefoundry-tier", default="quick", choices=("quick", "full"))
    g.addoption("--tilefoundry-seed", type=int, default=0)
    g.addoption("--tilefoundry-jobs", type=int, default=1)
    g.addoption("--tilefoundry-timeout", type=float, default=60.0)
    g.addoption("--tilefoundry-manifest", default=None)
    g.addoption("--tilefoundry-cases", action="append", default=None, metavar="GLOB")
    g.addoption("--tilefoundry-catalog", default=None, metavar="MODULE:FUNCTION")
    g.addoption("--tilefoundry-jsonl", default=None)
    g.addoption("--tilefoundry-repro-dir", default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tilefoundry_conformance: a tilefoundry conformance "
                                       "case (added by --tilefoundry-backend)")


class ConformanceFailure(Exception):
    def __init__(self, record: dict):
        super().__init__(record.get("message", ""))
        self.record = record


class CatalogCollector(pytest.Collector):
    def collect(self):  # pragma: no cover - items are built in pytest_collection_modifyitems
        return []


class CaseItem(pytest.Item):
    def __init__(self, *, case, **kw):
        super().__init__(**kw)
        self.case = case
        self.add_marker("tilefoundry_conformance")

    def runtest(self) -> None:
        rec = _results(self.session).get(self.case.id)
        if rec is None:
            pytest.fail(f"the runner recorded no verdict for {self.case.id!r}", pytrace=False)
        v = rec["verdict"]
        if v == "PASS":
            return
        if v == "ADMITTED":  # passes under the declared relaxations only: said so
            self.user_properties.append(("admitted", rec.get("admitted", "")))
            return
        if v == "NOT_SUPPORTED":
            pytest.skip(f"NOT_SUPPORTED: {rec.get('message', '')}")
        if v == "XFAIL":
            pytest.xfail(rec.get("message", ""))
        raise ConformanceFailure(rec)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ConformanceFailure):
            from tilefoundry.conformance.report import _details

            return _details(excinfo.value.record)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"{_ROOT}::{self.name}"


def _results(session: pytest.Session) -> dict:
    """Run every selected conformance item's case once, in the runner; cache the records."""
    store = session.config.stash
    if _KEY in store:
        return store[_KEY]
    import tempfile
    from pathlib import Path

    from tilefoundry.conformance.manifest import Manifest
    from tilefoundry.conformance.runner import run

    opt = session.config.getoption
    items = [i for i in session.items if isinstance(i, CaseItem)]
    manifest_path = opt("--tilefoundry-manifest")
    with tempfile.TemporaryDirectory(prefix="tilefoundry-") as scratch:
        # without --tilefoundry-jsonl the records live in the stash; the scratch file goes
        jsonl = opt("--tilefoundry-jsonl") or str(Path(scratch) / "conformance.jsonl")
        result = run(opt("--tilefoundry-backend"), [i.case for i in items],
                     jobs=opt("--tilefoundry-jobs"), timeout_s=opt("--tilefoundry-timeout"),
                     seed=opt("--tilefoundry-seed"), out_jsonl=Path(jsonl),
                     manifest=Manifest.load(manifest_path) if manifest_path else None,
                     repro_dir=opt("--tilefoundry-repro-dir"), progress=False,
                     catalog=opt("--tilefoundry-catalog"))
    store[_KEY] = {r["id"]: r for r in result.records}
    return store[_KEY]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list) -> None:
    spec = config.getoption("--tilefoundry-backend")
    if not spec:
        return
    from tilefoundry.conformance.selection import _load_backend_checked, load_catalog, select_cases
    from tilefoundry.errors import TilefoundryError

    try:
        _, caps = _load_backend_checked(spec)
        cat = load_catalog(config.getoption("--tilefoundry-seed"),
                           catalog=config.getoption("--tilefoundry-catalog"),
                           backend_caps=caps)
        cases = select_cases(cat, config.getoption("--tilefoundry-tier"),
                             config.getoption("--tilefoundry-cases"))
    except TilefoundryError as e:
        raise pytest.UsageError(f"--tilefoundry-backend: {e}") from None
    parent = CatalogCollector.from_parent(session, name=_ROOT, nodeid=_ROOT)
    for c in cases:
        items.append(CaseItem.from_parent(parent, name=f"test_case[{c.id}]", case=c))
