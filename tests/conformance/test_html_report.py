"""Reports a person reads (issue 22, deliverable 5): ``--html FILE`` (self-contained: summary by
family x verdict, the coverage heat map, every failure with its program, the distinct failing
element classes with expected / observed bits), warnings attributed to their case instead of
printed before the summary, and a ``BUG.md`` per reproducer (program source, inputs as hex,
expected vs observed per failing class, the one-line replay command)."""

from __future__ import annotations

import html
import html.parser
import json
from pathlib import Path

import numpy as np
import pytest
from synthetic_catalog import _data

from tilefoundry.cli import main
from tilefoundry.semantics.formats import DType


@pytest.fixture(scope="module")
def warn_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("html")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(d)
        rc = main(["conformance", "run", "--backend", "flaky_backend:factory", "--catalog",
                   "synthetic_catalog:build_warn", "--no-progress", "--html", "r.html",
                   "--repro-dir", "repro", "--jsonl", "r.jsonl"])
    recs = {json.loads(x)["id"]: json.loads(x) for x in (d / "r.jsonl").read_text()
            .splitlines() if '"type": "case"' in x}
    return d, rc, recs


def _garbage_bits():
    """flaky/garbage: x - y in f32 (the reference), and the flaky backend's (x - y) * 3 + 1."""
    x = _data(DType.F32, 8, 0, "garbagex")
    y = _data(DType.F32, 8, 0, "garbagey")
    e = (x.astype(np.float32) - y.astype(np.float32)).astype(np.float32)
    o = (e * np.float32(3) + np.float32(1)).astype(np.float32)
    return x, y, e.view(np.uint32), o.view(np.uint32)


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.srcs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.srcs += [v for k, v in attrs if k in ("src", "href") and v]


def test_html_report_is_self_contained_and_shows_each_failure(warn_run, capsys):
    d, rc, recs = warn_run
    capsys.readouterr()
    assert rc == 1
    page = (d / "r.html").read_text()
    p = _Tags()
    p.feed(page)
    assert "script" not in p.tags and p.srcs == []  # nothing to fetch, nothing to run
    assert p.tags.count("table") >= 3  # summary, heat map, a failure's classes
    # the summary row of the flaky family: 2 cases, 1 PASS (warn), 1 FAIL (garbage)
    assert "<td>flaky</td><td class=\"n\">2</td>" in page
    # the heat map: Binary.sub x f32 holds only the failing case
    assert 'title="Binary.sub x f32: FAIL 1">FAIL 1</td>' in page
    # the failure: its program and the expected / observed bits of each failing class
    _, _, e, o = _garbage_bits()
    rec = recs["flaky/garbage"]
    classes = rec["outputs"][0]["classes"]
    assert sum(c["count"] for c in classes) == rec["outputs"][0]["mismatches"] == 8
    for c in classes:
        (i,) = c["index"]
        assert c["expected_hex"] == f"0x{int(e[i]):08x}" and \
            c["observed_hex"] == f"0x{int(o[i]):08x}"
        assert f"<code>{c['expected_hex']}</code>" in page
        assert f"<code>{c['observed_hex']}</code>" in page
    assert "def garbage(x: Tensor[(8,), f32], y: Tensor[(8,), f32]):" in \
        html.unescape(page)


def test_warnings_are_attributed_to_their_case_not_printed(warn_run):
    d, _, recs = warn_run
    (w,) = recs["flaky/warn"]["warnings"]
    assert w["phase"] == "backend.run" and w["category"] == "RuntimeWarning"
    assert w["where"].startswith("flaky_backend.py:") and "invalid value" in w["message"]
    assert "warnings" not in recs["elementwise/add/f32"]
    page = (d / "r.html").read_text()
    assert "Warnings (1 case(s))" in page


def test_warnings_stay_off_stderr(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    main(["conformance", "run", "--backend", "flaky_backend:factory", "--catalog",
          "synthetic_catalog:build_warn", "--cases", "flaky/warn", "--no-progress"])
    out, err = capfd.readouterr()
    assert "RuntimeWarning" not in err and "invalid value" not in err, err
    assert "1 case(s) raised warnings, recorded on each case" in out, out


def test_bug_md_per_reproducer(warn_run):
    d, _, recs = warn_run
    bug = (d / "repro" / recs["flaky/garbage"]["repro"] / "BUG.md").read_text()
    assert bug.startswith("# flaky/garbage: FAIL on backend `flaky_backend:factory`")
    assert f"python repro/{recs['flaky/garbage']['repro']}/repro.py --backend " \
           f"flaky_backend:factory" in bug
    x, y, e, o = _garbage_bits()
    for c in recs["flaky/garbage"]["outputs"][0]["classes"]:
        assert f"| {c['class']} | {c['count']} | {c['index']} |" in bug
        (i,) = c["index"]
        assert f"(`0x{int(e[i]):08x}`) |" in bug and f"(`0x{int(o[i]):08x}`) |" in bug
    assert "```python" in bug and "    return x - y" in bug
    assert " ".join(f"{int(b):08x}" for b in x.view(np.uint32)) in bug  # input 0 as hex
    assert " ".join(f"{int(b):08x}" for b in y.view(np.uint32)) in bug


#: markup that would run or load something if it reached the page unescaped, in text, in an
#: attribute (both quotes) and after a closing tag
PAYLOAD = "</code></td>\"'><script>alert(1)</script><img src=x onerror=alert(2)>&amp;"
#: record keys left alone: those the report computes with (a number the summary adds up)
_KEEP = ("type", "id", "verdict", "seconds", "elements", "unjudged")


def _tamper(x, key=None, numbers=True):
    """Every value of a record replaced by PAYLOAD (numbers too unless ``numbers`` is False:
    a results file with a string where a number belongs is refused when it is read, issue 34
    item 2), keys kept."""
    if isinstance(x, dict):
        return {k: x[k] if k in _KEEP else _tamper(v, k, numbers) for k, v in x.items()}
    if isinstance(x, list):
        return [_tamper(v, key, numbers) for v in x] or ([PAYLOAD] if numbers else [])
    if (not numbers and isinstance(x, int | float | bool)) or x is None:
        return x
    return PAYLOAD


def _tampered_results(src, dst, numbers=True):
    """The warn run's results with every case field a page shows replaced by PAYLOAD: the
    FAIL case also made to warn (its failure section shows its warnings), attempted twice and
    given a worst-element-only output (an older record), plus a FLAKY case."""
    lines = []
    for line in src.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("type") == "case":
            if rec["verdict"] == "FAIL":
                rec["warnings"] = [{"phase": "p", "category": "c", "where": "w", "message": "m",
                                    "count": 1}]
                rec["attempts"] = ["FAIL", "FAIL"]
                rec["repro"] = "r"
                old = dict(rec["outputs"][0])
                old.pop("classes")
                rec["outputs"].append(old)
                flaky = {**rec, "id": rec["id"] + "/flaky", "verdict": "FLAKY"}
                lines.append(json.dumps(_tamper(flaky, numbers=numbers)))
            rec = _tamper(rec, numbers=numbers)
        lines.append(json.dumps(rec))
    dst.write_text("\n".join(lines) + "\n")


def _no_markup_of_the_payload(page: str) -> None:
    p = _Tags()
    p.feed(page)
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "script" not in p.tags and "img" not in p.tags and p.srcs == []
    assert PAYLOAD not in page
    assert html.escape(PAYLOAD) in page  # it is there, as text


class _Attrs(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.names |= {k for k, _ in attrs}


def test_a_tampered_results_file_puts_no_markup_in_the_html_report(warn_run, tmp_path,
                                                                   monkeypatch, capsys):
    """Issue 34, deliver 1: fields read from a results file (outputs[].output, mismatches,
    total, classes[].count, warnings[].count) were written into the HTML report unescaped
    through `conformance merge --html` and `run --resume --html`: stored XSS. Every field is
    now escaped, numbers included: a results file whose every case field is a script and an
    attribute breaker yields a page with no script, no image, no event attribute."""
    from tilefoundry.conformance.html_report import render_html

    d, _, _ = warn_run
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    # numbers replaced by markup: the file is refused when read (one line, exit 2), and the
    # page rendered from those records anyway (the loader bypassed) still holds no markup
    _tampered_results(d / "r.jsonl", tmp_path / "n.jsonl")
    rc = main(["conformance", "merge", "n.jsonl", "-o", "n-all.jsonl", "--html", "n.html"])
    err = capsys.readouterr().err
    assert rc == 2 and "n.jsonl: line 2: " in err and len(err.strip().splitlines()) == 1, err
    recs = [json.loads(x) for x in (tmp_path / "n.jsonl").read_text().splitlines()]
    _no_markup_of_the_payload(render_html([r for r in recs if r.get("type") == "case"],
                                          title="t", meta="m", result="FAIL"))
    # every string field replaced by markup: the file loads and the page escapes it all
    _tampered_results(d / "r.jsonl", tmp_path / "t.jsonl", numbers=False)
    rc = main(["conformance", "merge", "t.jsonl", "-o", "all.jsonl", "--html", "m.html"])
    assert rc == 1, capsys.readouterr()
    _no_markup_of_the_payload((tmp_path / "m.html").read_text())
    rc = main(["conformance", "run", "--backend", "flaky_backend:factory", "--catalog",
               "synthetic_catalog:build_warn", "--no-progress", "--resume", "--jsonl", "t.jsonl",
               "--html", "r.html"])
    assert rc == 1, capsys.readouterr()
    page = (tmp_path / "r.html").read_text()
    _no_markup_of_the_payload(page)
    a = _Attrs()
    a.feed(page)
    assert a.names <= {"lang", "charset", "class", "style", "title", "open"}, a.names


def test_html_report_builds_markup_only_through_its_escaping_helper():
    """By construction: html_report.py turns a value into markup only through ``_h`` (every
    value escaped); no f-string, ``%`` formatting or ``str.format`` elsewhere in it."""
    import ast

    from tilefoundry.conformance import html_report

    tree = ast.parse(Path(html_report.__file__).read_text())
    helper = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_h")
    inside = {id(n) for n in ast.walk(helper)}
    def builds_text(n: ast.AST) -> bool:
        if isinstance(n, ast.JoinedStr):  # an f-string with a value in it
            return any(isinstance(v, ast.FormattedValue) for v in n.values)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod):  # "..." % values
            return isinstance(n.left, ast.Constant) and isinstance(n.left.value, str)
        return isinstance(n, ast.Attribute) and n.attr == "format" and id(n) not in inside

    bad = [n.lineno for n in ast.walk(tree) if builds_text(n)]
    assert not bad, f"html_report.py builds text outside _h at line(s) {bad}"
