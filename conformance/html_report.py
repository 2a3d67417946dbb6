"""``--html FILE``: a self-contained HTML report of a conformance run (no scripts, no external
files: inline CSS only, so it opens from a CI artifact store as it is).

Sections: the run (backend, seed, counts, result line); the summary by family × verdict; the
op × dtype coverage matrix as a heat map (a cell's colour is the share of its judged cases
that failed, grey where every case was NOT_SUPPORTED; the label is the worst verdict and the
number of cases); every failing case (FAIL / CRASH / TIMEOUT / ERROR / XPASS, then FLAKY) with
its message, each rejected output's distinct failing element classes (expected / observed
value and bits of the first element of each class), its warnings, and its program; and the
cases that raised warnings. Built from records only (``report.read_jsonl``), so a report can
be written again from a results file.
"""

from __future__ import annotations

import html
import itertools
from collections import Counter
from pathlib import Path

from tilefoundry.conformance.cases import VERDICTS
from tilefoundry.conformance.report import ABBR, SEVERITY, _dtype_key, diagnosis_label

__all__ = ["render_html", "write_html"]

BAD = ("FAIL", "CRASH", "TIMEOUT", "ERROR", "XPASS")
_COLOUR = {"PASS": "#2e7d32", "ADMITTED": "#00838f", "FLAKY": "#f9a825", "UNJUDGED": "#6d8fa8", "FAIL": "#c62828",
           "NOT_SUPPORTED": "#9e9e9e", "XFAIL": "#7b5ea7", "XPASS": "#ad1457",
           "CRASH": "#4a148c", "TIMEOUT": "#e65100", "ERROR": "#d84315"}
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
h1{font-size:22px;margin:0 0 6px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:13px} .result{font-size:16px;font-weight:600;margin:10px 0}
table{border-collapse:collapse;font-size:12px} td,th{border:1px solid #ddd;padding:3px 6px}
th{background:#f3f3f3} td.n{text-align:right} .v{color:#fff;font-weight:600;border-radius:3px;
padding:1px 5px;font-size:11px} .heat td{text-align:center;min-width:44px;font-size:11px}
details{margin:6px 0;border:1px solid #e3e3e3;border-radius:4px;padding:6px 10px}
summary{cursor:pointer} pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:11px;
max-height:360px} code{font-size:12px} .msg{font-size:12px;color:#333;margin:4px 0 8px}
"""


class _Markup(str):
    """HTML that ``_h`` built (its values escaped): ``_e`` keeps it as it is."""


def _e(x: object) -> _Markup:
    """``x`` as HTML text: escaped, quotes included, whatever its type (a number read from a
    results file may be any JSON), unless it is markup ``_h`` built."""
    return x if isinstance(x, _Markup) else _Markup(html.escape(str(x), quote=True))


def _h(template: str, *values: object) -> _Markup:
    """The one way a value enters the page: ``template`` (a literal with ``{}`` slots) with
    every value escaped (``_e``), numbers included; markup built by ``_h`` / ``_cat`` is
    inserted as it is. The module builds no markup from a value any other way (no f-string,
    ``%`` or ``+`` on values: tests/conformance/test_html_report.py checks)."""
    return _Markup(template.format(*(_e(v) for v in values)))


def _cat(parts: object) -> _Markup:
    """Markup pieces (or values, escaped) joined."""
    return _Markup("".join(_e(p) for p in parts))  # type: ignore[union-attr]


def _badge(v: str) -> _Markup:
    return _h('<span class="v" style="background:{}">{}</span>', _COLOUR.get(v, "#555"),
              ABBR.get(v, v))


def _summary(records: list[dict]) -> _Markup:
    fams: dict[str, Counter] = {}
    for r in records:
        fams.setdefault(r.get("family", "?"), Counter())[r["verdict"]] += 1
    total: Counter = Counter()
    for c in fams.values():
        total.update(c)
    cols = [v for v in VERDICTS if total[v] or v in ("PASS", "FAIL")]
    head = _cat(_h("<th>{}</th>", _badge(v)) for v in cols)
    rows = []
    for f, c in [*sorted(fams.items()), ("total", total)]:
        cells = _cat(_h('<td class="n" style="{}">{}</td>',
                        "background:" + _COLOUR[v] + "22" if c[v] else "", c[v] or "-")
                     for v in cols)
        name = _h("<b>{}</b>", f) if f == "total" else _e(f)
        rows.append(_h('<tr><td>{}</td><td class="n">{}</td>{}</tr>', name, sum(c.values()),
                       cells))
    return _h("<table><tr><th>family</th><th>cases</th>{}</tr>{}</table>", head, _cat(rows))


def _heat(records: list[dict]) -> _Markup:
    cells: dict[tuple[str, str], list[str]] = {}
    for r in records:
        rops = list(r.get("ops", ()))
        kinds = {o.split(".")[0] for o in rops if "." in o}
        for o in rops:
            if o in kinds:
                continue
            for d in r.get("dtypes", ()):
                cells.setdefault((o, d), []).append(r["verdict"])
    if not cells:
        return _h("<p>no case named its ops and dtypes</p>")
    cols = sorted({d for _, d in cells}, key=_dtype_key)
    rows = sorted({o for o, _ in cells})
    out = [_h("<table class='heat'><tr><th>op</th>{}</tr>",
              _cat(_h("<th>{}</th>", d) for d in cols))]
    for o in rows:
        tds = []
        for d in cols:
            vs = cells.get((o, d))
            if not vs:
                tds.append(_h("<td></td>"))
                continue
            judged = [v for v in vs if v != "NOT_SUPPORTED"]
            worst = max(vs, key=lambda v: SEVERITY.index(v) if v in SEVERITY else 0)
            if not judged:
                bg = "#d6d6d6"
            else:
                share = sum(v in BAD for v in judged) / len(judged)
                bg = _ramp(share)
            tip = ", ".join(str(v) + " " + str(n) for v, n in Counter(vs).most_common())
            tds.append(_h('<td style="background:{};color:#fff" title="{} x {}: {}">{} {}</td>',
                          bg, o, d, tip, ABBR.get(worst, worst), len(vs)))
        out.append(_h("<tr><th style='text-align:left'>{}</th>{}</tr>", o, _cat(tds)))
    out.append(_h("</table><p class='meta'>colour: the share of a cell's judged cases that "
                  "failed (green none, red all); grey: every case NOT_SUPPORTED; label: the "
                  "worst verdict and the number of cases</p>"))
    return _cat(out)


def _ramp(share: float) -> str:
    """green (0) -> amber (0.5) -> red (1)."""
    stops = ((0.0, (46, 125, 50)), (0.5, (230, 160, 0)), (1.0, (198, 40, 40)))
    for (a, ca), (b, cb) in itertools.pairwise(stops):
        if share <= b:
            t = (share - a) / (b - a)
            r, g, bl = (round(x + (y - x) * t) for x, y in zip(ca, cb, strict=True))
            return "rgb(" + ",".join(map(str, (r, g, bl))) + ")"
    return "rgb(198,40,40)"


def _classes(o: dict) -> _Markup:
    rows = []
    for c in o.get("classes") or []:
        rows.append(_h("<tr><td>{}</td><td class='n'>{}</td><td><code>{}</code></td><td>{} "
                       "<code>{}</code></td><td>{} <code>{}</code></td></tr>", c["class"],
                       c["count"], c["index"], c["expected"], c["expected_hex"], c["observed"],
                       c["observed_hex"]))
    if not rows:  # an older record: the worst element only
        rows.append(_h("<tr><td>worst element</td><td class='n'>{}</td><td><code>{}</code>"
                       "</td><td>{} <code>{}</code></td><td>{} <code>{}</code></td></tr>",
                       o.get("mismatches"), o.get("worst_index"), o.get("expected"),
                       o.get("expected_hex"), o.get("observed"), o.get("observed_hex")))
    d = o.get("diagnosis")
    diag = _h("")
    if isinstance(d, dict):  # conformance levels: the least relaxation sets, per class too
        per = _cat(_h("<tr><td>{}</td><td class='n'>{}</td><td>{}</td><td class='n'>{}</td>"
                      "</tr>", c.get("class"), c.get("count"), diagnosis_label(c),
                      c.get("none")) for c in d.get("classes") or [] if isinstance(c, dict))
        diag = _h("<p class='msg'>least relaxation set(s): <b>{}</b> ({} of {} rejected "
                  "element(s) admitted under none)</p><table><tr><th>class</th><th>elements"
                  "</th><th>least sets</th><th>under none</th></tr>{}</table>",
                  diagnosis_label(d), d.get("none"), d.get("rejected"), per)
    return _h("<p class='msg'>output {} under <code>{}</code>: {}/{} element(s) rejected in {} "
              "distinct class(es)</p><table><tr><th>class (expected -> observed)</th><th>"
              "elements</th><th>first index</th><th>expected</th><th>observed</th></tr>{}"
              "</table>{}", o.get("output"), o.get("contract"), o.get("mismatches"),
              o.get("total"), len(o.get("classes") or []), _cat(rows), diag)


def _failure(r: dict) -> _Markup:
    parts = [_h("<div class='msg'>{}</div>", r.get("message", ""))]
    if r.get("attempts"):
        parts.append(_h("<p class='msg'>attempts: {}</p>", ", ".join(map(str, r["attempts"]))))
    for o in r.get("outputs") or []:
        parts.append(_classes(o))
    for w in r.get("warnings") or []:
        parts.append(_h("<p class='msg'>warning during {}: {} at {}: {} (x{})</p>", w["phase"],
                        w["category"], w["where"], w["message"], w["count"]))
    if r.get("repro"):
        parts.append(_h("<p class='msg'>reproducer: <code>{}/</code> (BUG.md, repro.py)</p>",
                        r["repro"]))
    if r.get("program"):
        parts.append(_h("<details><summary>program</summary><pre>{}</pre></details>",
                        r["program"]))
    return _h("<details open><summary>{} <code>{}</code> <span class='meta'>{}</span>"
              "</summary>{}</details>", _badge(r["verdict"]), r["id"], r.get("family", ""),
              _cat(parts))


def render_html(records: list[dict], *, title: str, meta: str, result: str) -> str:
    bad = [r for r in records if r["verdict"] in BAD]
    flaky = [r for r in records if r["verdict"] == "FLAKY"]
    warned = [r for r in records if r.get("warnings")]
    body = [_h("<h1>{}</h1><div class='meta'>{}</div>", title, meta),
            _h("<div class='result'>result: {}</div>", result),
            _h("<h2>Summary by family</h2>"), _summary(records),
            _h("<h2>Coverage: op × dtype</h2>"), _heat(records),
            _h("<h2>Failures ({})</h2>", len(bad)),
            _cat(_failure(r) for r in bad) or _h("<p>none</p>")]
    if flaky:
        body += [_h("<h2>Flaky ({})</h2>", len(flaky)), _cat(_failure(r) for r in flaky)]
    admitted = [r for r in records if r["verdict"] == "ADMITTED"]
    if admitted:
        body += [_h("<h2>Admitted under declared relaxations ({})</h2>", len(admitted)),
                 _cat(_failure(r) for r in admitted)]
    if warned:
        rows = _cat(
            _h("<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
               "<td class='n'>{}</td></tr>", r["id"], w["phase"], w["category"], w["where"],
               w["message"], w["count"]) for r in warned for w in r["warnings"])
        body += [_h("<h2>Warnings ({} case(s))</h2><table><tr><th>case</th><th>phase</th><th>"
                    "category</th><th>where</th><th>message</th><th>n</th></tr>{}</table>",
                    len(warned), rows)]
    return _h("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{}</title>"
              "<style>{}</style></head><body>{}</body></html>\n", title, _Markup(_CSS),
              _cat(body))


def write_html(records: list[dict], path: str | Path, *, title: str, meta: str,
               result: str) -> None:
    Path(path).write_text(render_html(records, title=title, meta=meta, result=result),
                          encoding="utf-8")
