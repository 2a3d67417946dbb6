"""The malformed-input fuzz (conformance/fuzz_ir.py) as a test: every call into a public entry
point succeeds or raises a TilefoundryError, none runs past the watchdog."""

from __future__ import annotations

import os
import random
import time

from tilefoundry.conformance import fuzz_ir
from tilefoundry.conformance.fuzz_ir import FAMILIES, FuzzReport, run_fuzz

#: inputs per profile (ci: a few seconds; `tilefoundry selfcheck --fuzz-ir N` for long runs)
_N = {"ci": 30, "dev": 200, "thorough": 2000}.get(os.environ.get("TILEFOUNDRY_PROFILE", "ci"),
                                                   30)


def test_bounded_fuzz_only_project_errors():
    r = run_fuzz(_N, seed=0, hang_s=10.0)
    assert r.inputs == _N
    assert r.non_project == 0 and not r.hangs, r.format()
    # the inputs are malformed: most calls are refused with the project's errors, and every
    # family ran (so an empty fuzz cannot pass)
    assert r.project_errors > _N // 3, r.format()
    assert r.calls > _N


def test_a_foreign_exception_is_counted_by_type_and_site():
    r = FuzzReport()
    call = fuzz_ir._Calls(r, "api", 7)

    def boom():
        return {}["missing"]

    ok, _ = call("evaluate", boom)
    assert not ok and r.non_project == 1
    (key, n), = r.findings.items()
    assert key[:3] == ("api", "evaluate", "KeyError") and n == 1
    assert r.examples[key][0] == 7
    from tilefoundry.errors import InvalidArgumentError

    def ours():
        raise InvalidArgumentError("no")

    call("evaluate", ours)
    assert r.project_errors == 1 and r.non_project == 1


def test_a_call_past_the_watchdog_is_a_hang_and_the_run_goes_on(monkeypatch):
    def slow(call, rng: random.Random) -> None:
        call("evaluate", time.sleep, 30)

    monkeypatch.setitem(fuzz_ir._RUN, "api", slow)  # inherited by the forked worker
    api = FAMILIES.index("api")
    t0 = time.monotonic()
    r = run_fuzz(len(FAMILIES), seed=0, start=api, hang_s=1.0)
    assert [(f, i, w) for f, i, w in r.hangs] == [("api", api, "evaluate")]
    assert r.inputs == len(FAMILIES)  # the inputs after the hang ran in a fresh worker
    assert time.monotonic() - t0 < 25
