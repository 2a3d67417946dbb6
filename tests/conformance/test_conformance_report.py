"""Reports: the summary table, JUnit XML (parsed back with xml.etree), the op × dtype coverage
matrix and the progress bar, on records of a real run of the synthetic catalog."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from collections import Counter

import pytest
import synthetic_catalog as syn

from tilefoundry.conformance.report import (
    Progress,
    coverage_matrix,
    summary_table,
    write_coverage,
    write_junit,
)
from tilefoundry.conformance.runner import run


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    d = tmp_path_factory.mktemp("rep")
    cases = [c for c in syn.build_no_hang(0).tier("full")]
    res = run("flaky_backend:factory", cases, jobs=2, timeout_s=30, out_jsonl=d / "r.jsonl")
    return res.records


def test_junit_counts_and_elements(records, tmp_path):
    p = tmp_path / "j.xml"
    write_junit(records, p, properties={"backend": "flaky", "seed": 0})
    root = ET.parse(p).getroot()
    (suite,) = root.findall("testsuite")
    c = Counter(r["verdict"] for r in records)
    assert c == Counter({"PASS": 7, "FAIL": 2, "ERROR": 2, "CRASH": 2, "NOT_SUPPORTED": 1})
    assert suite.get("tests") == str(len(records)) == root.get("tests")
    assert suite.get("failures") == "2" and suite.get("errors") == "4"
    assert suite.get("skipped") == "1"
    cases = {tc.get("name"): tc for tc in suite.findall("testcase")}
    assert list(cases) == [r["id"] for r in records]
    assert cases["flaky/garbage"].find("failure").get("type") == "FAIL"
    assert "worst at" in cases["flaky/garbage"].find("failure").text
    assert cases["flaky/segv"].find("error").get("type") == "CRASH"
    assert cases["flaky/raise"].find("error").get("type") == "ERROR"
    assert "i8" in cases["int/add/i8"].find("skipped").get("message")
    assert list(cases["elementwise/add/f32"]) == []  # a pass has no child
    assert cases["cast/f32-bf16"].get("classname") == "conformance.cast"
    props = {x.get("name"): x.get("value") for x in suite.find("properties")}
    assert props == {"backend": "flaky", "seed": "0"}


def test_junit_xfail_is_skipped_and_xpass_a_failure(tmp_path):
    recs = [{"id": "a", "family": "f", "verdict": "XFAIL", "message": "expected failure (r)"},
            {"id": "b", "family": "f", "verdict": "XPASS", "message": "unexpected pass"},
            {"id": "c", "family": "f", "verdict": "TIMEOUT", "message": "slow"}]
    write_junit(recs, tmp_path / "j.xml")
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("1", "1", "1")
    tcs = suite.findall("testcase")
    assert tcs[0].find("skipped").get("message") == "XFAIL: expected failure (r)"
    assert tcs[1].find("failure").get("type") == "XPASS"
    assert tcs[2].find("error").get("type") == "TIMEOUT"


def test_summary_table(records):
    t = summary_table(records)
    lines = t.splitlines()
    assert lines[0].split() == ["family", "cases", "PASS", "UNJ", "FAIL", "N/S", "XFAIL",
                                "XPASS", "CRASH", "T/O", "ERROR"]
    flaky = next(x for x in lines if x.startswith("flaky")).split()
    assert flaky == ["flaky", "6", "-", "-", "2", "-", "-", "-", "2", "-", "2"]
    assert lines[-1].split() == ["total", "14", "7", "-", "2", "1", "-", "-", "2", "-", "2"]


def test_coverage_matrix(records, tmp_path):
    write_coverage(records, tmp_path / "c.md")
    md = (tmp_path / "c.md").read_text().splitlines()
    assert md[0].startswith("| op | i8 | f16 | bf16 |") and md[1].startswith("|---|:-:|")
    head = [x.strip() for x in md[0].strip("|").split("|")]
    table = {}
    for line in md[2:]:
        if not line.startswith("|"):
            break
        cells = [x.strip() for x in line.strip("|").split("|")]
        table.update({(cells[0], dt): c for dt, c in zip(head[1:], cells[1:], strict=True)})
    # Binary.add x f32: add (PASS), segv (CRASH), raise (ERROR), exit (CRASH), malformed
    # (ERROR); the crashed cases count although the worker died before reporting back
    assert table["Binary.add", "f32"] == "CRASH 5"
    assert table["Binary.add", "i8"] == "N/S 1"
    assert table["Binary.max", "f16"] == "PASS 1"
    assert table["Binary.sub", "f32"] == "FAIL 2"  # sub (PASS), garbage (FAIL)
    assert table["Cast", "bf16"] == "PASS 1" and table["Cast", "f16"] == "-"
    assert "1 only NOT_SUPPORTED" in md[-1]
    text = coverage_matrix(records)
    assert text.splitlines()[0].split()[:4] == ["op", "i8", "f16", "bf16"]
    assert text.splitlines()[-1] == md[-1]


def test_progress_bar_is_plain_text():
    s = io.StringIO()
    p = Progress(4, stream=s, enabled=True)
    for v in ("PASS", "FAIL", "PASS", "CRASH"):
        p._last = 0.0
        p.update(v)
    p.close()
    out = s.getvalue()
    assert out.endswith("\n") and "\r[" in out and "4/4 100%" in out
    assert "PASS 2 FAIL 1 CRASH 1" in out
    assert all(ch.isprintable() or ch in "\r\n" for ch in out)
    off = io.StringIO()
    q = Progress(None, stream=off, enabled=False)
    q.update("PASS")
    q.close()
    assert off.getvalue() == "" and q.line().startswith("1 cases")


def test_progress_is_coloured_on_a_terminal_and_plain_on_a_pipe(monkeypatch):
    """Issue 22: colours and a live progress bar on a TTY, plain on a pipe (and with
    NO_COLOR, the no-color.org convention)."""
    import io

    from tilefoundry.conformance.report import Progress, use_colour

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    for stream, coloured in ((Tty(), True), (io.StringIO(), False)):
        p = Progress(3, stream=stream)
        for v in ("PASS", "FAIL", "UNJUDGED"):
            p.update(v)
        p.close()
        out = stream.getvalue()
        assert ("\x1b[31mFAIL 1\x1b[0m" in out) is coloured, out
        assert ("\x1b[" in out) is coloured
        assert "3/3" in out and "FAIL 1" in out.replace("\x1b[31m", "")
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_colour(Tty())


# ---------------------------------------------------------------------------------------------
# issue 33, Deliver 4: output a person can act on
# ---------------------------------------------------------------------------------------------
def _fail(cid: str, op: str, cls: str, least: list, count: int = 1) -> dict:
    diag = {"least": least, "none": 0 if least else count, "op": op,
            "classes": [{"class": cls, "count": count, "least": least,
                         "none": 0 if least else count}]}
    return {"id": cid, "verdict": "FAIL", "message": "m", "ops": [op],
            "outputs": [{"output": 0, "contract": "exact", "mismatches": count, "total": 8,
                         "classes": [{"class": cls, "count": count}], "diagnosis": diag}]}


def test_failures_are_grouped_by_root_cause():
    from tilefoundry.conformance.report_groups import grouped_failures

    recs = [_fail("a/1", "Binary(max)", "+0 -> -0", [["nsz"]]),
            _fail("a/2", "Binary(max)", "+0 -> -0", [["nsz"]], 3),
            _fail("b/1", "Cast(bf16)", "normal -> normal (1 ulp)", [], 5),
            _fail("a/3", "Binary(max)", "+0 -> -0", [["nsz"]]),
            {"id": "p/1", "verdict": "PASS"}]
    text = grouped_failures(recs)
    lines = text.splitlines()
    assert lines[0].startswith("FAIL by root cause (2 group(s) over 4 case(s)")
    assert lines[1] == "  3 case(s)  Binary(max) exact  +0 -> -0  least {nsz}  " \
                       "(5 element(s); first a/1)", lines[1]
    assert lines[2] == "  1 case(s)  Cast(bf16) exact  normal -> normal (1 ulp)  least none  " \
                       "(5 element(s); first b/1)", lines[2]
    assert grouped_failures([{"id": "p", "verdict": "PASS"}]) == ""


def test_identical_error_lines_are_collapsed_with_a_count():
    from tilefoundry.conformance.report import failure_lines

    err = [{"id": f"e/{i}", "verdict": "ERROR", "message": "backend.run raised KeyError: Cast"}
           for i in range(118)]
    recs = [*err, {"id": "x", "verdict": "ERROR", "message": "other"},
            _fail("f/1", "Binary(add)", "normal -> normal (1 ulp)", [])]
    lines = failure_lines(recs).splitlines()
    assert lines[0] == "ERROR    e/0: backend.run raised KeyError: Cast (x118: this message " \
                       "for 118 cases, the first shown)", lines[0]
    assert lines[1] == "ERROR    x: other" and lines[2].startswith("FAIL     f/1: m")
    assert len(lines) == 3


def test_not_supported_and_unjudged_are_broken_down_by_reason(records):
    from tilefoundry.conformance.report_groups import reason_lines

    recs = [{"id": "n/1", "verdict": "NOT_SUPPORTED",
             "message": "op(s) ['Cast', 'Scan'] not in the backend's capabilities"},
            {"id": "n/2", "verdict": "NOT_SUPPORTED",
             "message": "op(s) ['Cast'] not in the backend's capabilities"},
            {"id": "n/3", "verdict": "NOT_SUPPORTED", "message": "dtype(s) ['bf16'] not supported"},
            {"id": "u/1", "verdict": "UNJUDGED", "message": "3 of 16 element(s) unjudged in 1 "
             "output(s): output 2: UNJUDGED under enclosure(Conv2D; no bounded element) — 3 of "
             "3 element(s) unjudged (their enclosure admits every value: Conv2D)"},
            {"id": "u/2", "verdict": "UNJUDGED", "message": "1 of 3 element(s) unjudged in 1 "
             "output(s): output 0: UNJUDGED under enclosure(Conv2D; width median 0 / max 0 ulp)"
             " — 1 of 8 element(s) unjudged (their enclosure admits every value: Conv2D)"}]
    lines = reason_lines(recs).splitlines()
    assert lines[0].startswith("NOT_SUPPORTED by reason (3 case(s)")
    assert lines[1] == "  op not claimed: 2 case(s): Cast 2, Scan 1", lines
    assert lines[2] == "  dtype not claimed: 1 case(s): bf16 1", lines
    assert lines[3].startswith("UNJUDGED by reason (2 case(s)")
    assert lines[4] == "  2 case(s): enclosure admits every value: Conv2D: u/1, u/2", lines
    # the real run's one NOT_SUPPORTED case (the flaky backend claims no i8)
    assert "dtype not claimed: 1 case(s): i8 1" in reason_lines(records)
