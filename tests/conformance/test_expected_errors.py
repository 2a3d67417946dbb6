"""Expected-error cases: a backend can be required to raise (issue 16, deliverable 3).

The spec names checks whose operands are run-time values, so no type rule makes them:

* CacheUpdate (``cache_bounds``): "cur_pos >= 0, 1 <= s <= new.len, and cur_pos + s <=
  cache.len MUST be checked at eval/runtime, not typeinfer, because their operands are runtime
  values."
* InsertSlice (``slice_window``): "A literal (compile-time) offset that places a negative or
  out-of-bounds window on an axis fails typeinfer, naming the axis; a runtime offset is checked
  at eval/runtime."
* Gather (``index_range``): "Element rule: out[c.., i.., t..] = x[c.., index[b.., i..], t..]" — an
  index outside [0, extent) names no element; RoPE (``index_range``): "Rotate query and key
  tensors using position-indexed cos/sin caches." — a position outside [0, P) names no row.
* Dispatch resolution (``dispatch_envelope``): "A shape outside the envelope matches no variant
  and is an error; there is no base body to fall back to (the prototype body is None)."

Before, such inputs had no case (a reference error was a ``harness:`` ERROR for every backend),
so a backend that clamps a bad index passed. Now: a backend that returns values FAILs, one that
raises ``RunTimeCheckError`` passes (naming another check FAILs), another exception is an
ERROR (D202), a hang or crash is TIMEOUT / CRASH as for any case. The planted backends are in
clamping_backend.py next to this file (forked workers inherit this folder on sys.path).
"""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.conformance.backend import ReferenceBackend, reference_check
from tilefoundry.conformance.cases import Case
from tilefoundry.conformance.catalog import build_catalog
from tilefoundry.conformance.runner import run
from tilefoundry.errors import RUN_TIME_CHECKS, InvalidArgumentError, RunTimeCheckError
from tilefoundry.semantics.evaluator.registry import EvaluationError

SLACK = 60.0


@pytest.fixture(scope="module")
def catalog():
    return build_catalog(0)


@pytest.fixture(scope="module")
def errors(catalog):
    """Every expected-error case of the catalog."""
    return [c for c in catalog if c.expect_error]


@pytest.fixture(scope="module")
def in_range(catalog):
    """The in-range cases of the same ops (controls: clamping is the identity there)."""
    return [c for c in catalog.tier("quick")
            if c.id.startswith(("spec/gather/", "spec/cache-update/", "spec/insert-slice/",
                                "spec/rope/", "spec/function/dispatch-",
                                "sharded/gather/split-axis"))]


def verdicts(tmp_path, spec: str, cases, timeout_s: float = SLACK, jobs: int = 2) -> dict:
    res = run(spec, cases, jobs=jobs, timeout_s=timeout_s, seed=0,
              out_jsonl=tmp_path / f"{spec.replace(':', '_')}.jsonl")
    return {r["id"]: r for r in res.records}


# ---------------------------------------------------------------------------------------------
# the catalog's cases
# ---------------------------------------------------------------------------------------------
def test_every_run_time_check_of_the_spec_has_quick_cases(errors):
    assert all(c.tier == "quick" for c in errors)
    by_check = {k: [c for c in errors if c.expect_error == k] for k in RUN_TIME_CHECKS}
    assert all(by_check.values()), {k: len(v) for k, v in by_check.items()}
    ids = [c.id for c in errors]
    # Gather: a negative index and one at the extent; RoPE: a negative position and one at P
    assert any("gather" in i and "negative" in i for i in ids)
    assert any("gather" in i and "at-extent" in i for i in ids)
    assert any("rope" in i and "negative" in i for i in ids)
    assert any("rope" in i and "at-cache-len" in i for i in ids)
    assert {"Gather", "RoPE"} <= {o for c in by_check["index_range"] for o in c.ops}
    assert {o for c in by_check["cache_bounds"] for o in c.ops} == {"CacheUpdate"}
    assert {o for c in by_check["slice_window"] for o in c.ops} == {"InsertSlice"}
    # each CacheUpdate condition of the spec sentence fails on its own in some case
    cache = {c.id.split("/")[3] for c in by_check["cache_bounds"]}
    assert {"cur-pos-negative", "s-zero", "s-exceeds-new-len", "window-past-cache-end"} <= cache
    for c in errors:
        assert c.spec.count('"') >= 2, c.id  # the spec sentence, quoted


def test_the_reference_raises_exactly_the_expected_check(errors):
    """The reference backend reports each case as the documented RunTimeCheckError of the
    case's check; ``reference_check`` reads the same check off the evaluator's error."""
    ref = ReferenceBackend()
    for c in errors:
        m, e, ins = c.build()
        with pytest.raises(RunTimeCheckError) as info:
            ref.run(ref.compile(m, e), ins)
        assert info.value.check == c.expect_error, c.id
        assert isinstance(info.value.__cause__, EvaluationError), c.id
        assert reference_check(info.value.__cause__) == c.expect_error


def test_the_reference_maps_no_other_evaluator_error():
    """Malformed inputs are an EvaluationError too, but no run-time check: they propagate."""
    catalog = build_catalog(0)
    ref = ReferenceBackend()
    m, e, (c, cur, s, new) = catalog["spec/cache-update/write-window/f32"].build()
    with pytest.raises(EvaluationError) as info:  # a wrong dtype for cur_pos
        ref.run(ref.compile(m, e), [c, cur.astype(np.int64), s, new])
    assert not isinstance(info.value, RunTimeCheckError)
    assert reference_check(info.value) is None
    assert reference_check(ValueError("Gather: index value 5 at indices position (0,) is out "
                                      "of range for axis 0 of extent 5 ")) is None


def test_check_names_are_validated():
    with pytest.raises(InvalidArgumentError, match="index_range"):
        RunTimeCheckError("x", check="out_of_bounds")
    with pytest.raises(InvalidArgumentError, match="expect_error"):
        Case("c", "f", lambda: None, expect_error="out_of_bounds")
    assert RunTimeCheckError("x").check is None


# ---------------------------------------------------------------------------------------------
# verdicts through the runner
# ---------------------------------------------------------------------------------------------
def test_reference_passes_every_expected_error_case(tmp_path, errors):
    rec = verdicts(tmp_path, "reference", errors)
    assert {i: r["verdict"] for i, r in rec.items() if r["verdict"] != "PASS"} == {}
    for c in errors:
        assert rec[c.id]["expect_error"] == c.expect_error
        assert f"RunTimeCheckError({c.expect_error!r})" in rec[c.id]["message"]


def test_a_clamping_backend_fails_every_expected_error_case(tmp_path, errors, in_range):
    rec = verdicts(tmp_path, "clamping_backend:clamping", errors + in_range)
    for c in errors:
        r = rec[c.id]
        assert r["verdict"] == "FAIL", (c.id, r["verdict"], r["message"])
        assert f"the reference raises the run-time check {c.expect_error!r} here" in \
            r["message"]
        assert "returned values" in r["message"]
    # the controls: where every input is in range the same backend is correct
    assert len(in_range) >= 10
    assert {c.id: rec[c.id]["verdict"] for c in in_range} == {c.id: "PASS" for c in in_range}


@pytest.mark.parametrize("factory", ["checking", "anonymous"])
def test_a_backend_that_reports_the_check_passes(tmp_path, errors, in_range, factory):
    rec = verdicts(tmp_path, f"clamping_backend:{factory}", errors + in_range)
    assert {i: r["verdict"] for i, r in rec.items() if r["verdict"] != "PASS"} == {}


def test_naming_another_check_fails_naming_both(tmp_path, errors):
    rec = verdicts(tmp_path, "clamping_backend:misnaming", errors)
    for c in errors:
        r = rec[c.id]
        if c.expect_error == "index_range":
            assert r["verdict"] == "PASS", c.id
        else:
            assert r["verdict"] == "FAIL", c.id
            assert "'index_range'" in r["message"] and repr(c.expect_error) in r["message"]


def test_another_exception_is_an_error_naming_the_protocol(tmp_path, errors):
    """D202: a ValueError (or any exception but RunTimeCheckError) is ERROR, not PASS: the
    backend did not report the check in the documented way."""
    rec = verdicts(tmp_path, "clamping_backend:value_error", errors)
    for c in errors:
        r = rec[c.id]
        assert r["verdict"] == "ERROR", (c.id, r["verdict"])
        assert "ValueError" in r["message"] and "RunTimeCheckError" in r["message"]
        assert repr(c.expect_error) in r["message"]
        assert not r.get("harness")


def test_raising_the_check_where_the_program_has_a_result_fails(tmp_path, in_range):
    rec = verdicts(tmp_path, "clamping_backend:refusing", in_range)
    for c in in_range:
        assert rec[c.id]["verdict"] == "FAIL", c.id
        assert "without failing any run-time check" in rec[c.id]["message"]


def test_a_hang_or_a_crash_on_an_expected_error_case_is_timeout_or_crash(tmp_path, catalog):
    one = [catalog["spec/run-time-check/index_range/gather-index-at-extent/f32"],
           catalog["spec/gather/no-implicit-batching/f32"]]
    rec = verdicts(tmp_path, "clamping_backend:hanging", one, timeout_s=3.0, jobs=1)
    assert rec[one[0].id]["verdict"] == "TIMEOUT"
    assert rec[one[1].id]["verdict"] == "PASS"  # the fresh worker goes on
    rec = verdicts(tmp_path, "clamping_backend:crashing", one, jobs=1)
    assert rec[one[0].id]["verdict"] == "CRASH"
    assert "during backend.run" in rec[one[0].id]["message"]
    assert rec[one[1].id]["verdict"] == "PASS"


def test_a_case_whose_reference_stops_raising_is_a_catalog_error(tmp_path, catalog):
    """An expected-error case is verified on the reference side each run: values, or another
    check, are a ``harness:`` ERROR (whatever the backend does)."""
    good = catalog["spec/gather/no-implicit-batching/f32"]
    bad_idx = catalog["spec/run-time-check/index_range/gather-index-at-extent/f32"]
    cases = [Case("x/values", "t", good.build, expect_error="index_range"),
             Case("x/other-check", "t", bad_idx.build, expect_error="cache_bounds")]
    for spec in ("reference", "clamping_backend:clamping"):
        rec = verdicts(tmp_path, spec, cases)
        assert rec["x/values"]["verdict"] == "ERROR" and rec["x/values"]["harness"]
        assert "returned values" in rec["x/values"]["message"]
        assert "error of the catalog" in rec["x/values"]["message"]
        r = rec["x/other-check"]
        assert r["verdict"] == "ERROR" and r["harness"]
        assert "'cache_bounds'" in r["message"] and "'index_range'" in r["message"]
