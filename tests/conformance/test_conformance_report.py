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
