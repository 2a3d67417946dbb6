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
from tilefoundry.conformance.report import ABBR, SEVERITY, _dtype_key

__all__ = ["render_html", "write_html"]

BAD = ("FAIL", "CRASH", "TIMEOUT", "ERROR", "XPASS")
_COLOUR = {"PASS": "#2e7d32", "FLAKY": "#f9a825", "UNJUDGED": "#6d8fa8", "FAIL": "#c62828",
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


def _e(x: object) -> str:
    return html.escape(str(x))


def _badge(v: str) -> str:
    return f'<span class="v" style="background:{_COLOUR.get(v, "#555")}">{_e(ABBR.get(v, v))}' \
           f'</span>'


def _summary(records: list[dict]) -> str:
    fams: dict[str, Counter] = {}
    for r in records:
        fams.setdefault(r.get("family", "?"), Counter())[r["verdict"]] += 1
    total: Counter = Counter()
    for c in fams.values():
        total.update(c)
    cols = [v for v in VERDICTS if total[v] or v in ("PASS", "FAIL")]
    head = "".join(f"<th>{_badge(v)}</th>" for v in cols)
    rows = []
    for f, c in [*sorted(fams.items()), ("total", total)]:
        cells = "".join(
            f'<td class="n" style="{"background:" + _COLOUR[v] + "22" if c[v] else ""}">'
            f'{c[v] or "-"}</td>' for v in cols)
        name = f"<b>{_e(f)}</b>" if f == "total" else _e(f)
        rows.append(f'<tr><td>{name}</td><td class="n">{sum(c.values())}</td>{cells}</tr>')
    return f"<table><tr><th>family</th><th>cases</th>{head}</tr>{''.join(rows)}</table>"


def _heat(records: list[dict]) -> str:
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
        return "<p>no case named its ops and dtypes</p>"
    cols = sorted({d for _, d in cells}, key=_dtype_key)
    rows = sorted({o for o, _ in cells})
    out = ["<table class='heat'><tr><th>op</th>" + "".join(f"<th>{_e(d)}</th>" for d in cols)
           + "</tr>"]
    for o in rows:
        tds = []
        for d in cols:
            vs = cells.get((o, d))
            if not vs:
                tds.append("<td></td>")
                continue
            judged = [v for v in vs if v != "NOT_SUPPORTED"]
            worst = max(vs, key=lambda v: SEVERITY.index(v) if v in SEVERITY else 0)
            if not judged:
                bg = "#d6d6d6"
            else:
                share = sum(v in BAD for v in judged) / len(judged)
                bg = _ramp(share)
            tip = ", ".join(f"{v} {n}" for v, n in Counter(vs).most_common())
            tds.append(f'<td style="background:{bg};color:#fff" title="{_e(o)} x {_e(d)}: '
                       f'{_e(tip)}">{_e(ABBR.get(worst, worst))} {len(vs)}</td>')
        out.append(f"<tr><th style='text-align:left'>{_e(o)}</th>{''.join(tds)}</tr>")
    out.append("</table><p class='meta'>colour: the share of a cell's judged cases that "
               "failed (green none, red all); grey: every case NOT_SUPPORTED; label: the worst "
               "verdict and the number of cases</p>")
    return "".join(out)


def _ramp(share: float) -> str:
    """green (0) -> amber (0.5) -> red (1)."""
    stops = ((0.0, (46, 125, 50)), (0.5, (230, 160, 0)), (1.0, (198, 40, 40)))
    for (a, ca), (b, cb) in itertools.pairwise(stops):
        if share <= b:
            t = (share - a) / (b - a)
            r, g, bl = (round(x + (y - x) * t) for x, y in zip(ca, cb, strict=True))
            return f"rgb({r},{g},{bl})"
    return "rgb(198,40,40)"


def _classes(o: dict) -> str:
    rows = []
    for c in o.get("classes") or []:
        rows.append(f"<tr><td>{_e(c['class'])}</td><td class='n'>{c['count']}</td>"
                    f"<td><code>{_e(c['index'])}</code></td><td>{_e(c['expected'])} "
                    f"<code>{_e(c['expected_hex'])}</code></td><td>{_e(c['observed'])} "
                    f"<code>{_e(c['observed_hex'])}</code></td></tr>")
    if not rows:  # an older record: the worst element only
        rows.append(f"<tr><td>worst element</td><td class='n'>{o.get('mismatches')}</td>"
                    f"<td><code>{_e(o.get('worst_index'))}</code></td><td>{_e(o.get('expected'))}"
                    f" <code>{_e(o.get('expected_hex'))}</code></td><td>"
                    f"{_e(o.get('observed'))} <code>{_e(o.get('observed_hex'))}</code></td></tr>")
    return (f"<p class='msg'>output {o.get('output')} under <code>{_e(o.get('contract'))}</code>: "
            f"{o.get('mismatches')}/{o.get('total')} element(s) rejected in "
            f"{len(o.get('classes') or [])} distinct class(es)</p><table><tr><th>class "
            f"(expected -> observed)</th><th>elements</th><th>first index</th><th>expected"
            f"</th><th>observed</th></tr>{''.join(rows)}</table>")


def _failure(r: dict) -> str:
    parts = [f"<div class='msg'>{_e(r.get('message', ''))}</div>"]
    if r.get("attempts"):
        parts.append(f"<p class='msg'>attempts: {_e(', '.join(r['attempts']))}</p>")
    for o in r.get("outputs") or []:
        parts.append(_classes(o))
    for w in r.get("warnings") or []:
        parts.append(f"<p class='msg'>warning during {_e(w['phase'])}: {_e(w['category'])} at "
                     f"{_e(w['where'])}: {_e(w['message'])} (x{w['count']})</p>")
    if r.get("repro"):
        parts.append(f"<p class='msg'>reproducer: <code>{_e(r['repro'])}/</code> (BUG.md, "
                     f"repro.py)</p>")
    if r.get("program"):
        parts.append(f"<details><summary>program</summary><pre>{_e(r['program'])}</pre>"
                     f"</details>")
    return (f"<details open><summary>{_badge(r['verdict'])} <code>{_e(r['id'])}</code> "
            f"<span class='meta'>{_e(r.get('family', ''))}</span></summary>{''.join(parts)}"
            f"</details>")


def render_html(records: list[dict], *, title: str, meta: str, result: str) -> str:
    bad = [r for r in records if r["verdict"] in BAD]
    flaky = [r for r in records if r["verdict"] == "FLAKY"]
    warned = [r for r in records if r.get("warnings")]
    body = [f"<h1>{_e(title)}</h1><div class='meta'>{_e(meta)}</div>",
            f"<div class='result'>result: {_e(result)}</div>",
            "<h2>Summary by family</h2>", _summary(records),
            "<h2>Coverage: op × dtype</h2>", _heat(records),
            f"<h2>Failures ({len(bad)})</h2>",
            "".join(_failure(r) for r in bad) or "<p>none</p>"]
    if flaky:
        body += [f"<h2>Flaky ({len(flaky)})</h2>", "".join(_failure(r) for r in flaky)]
    if warned:
        rows = "".join(
            f"<tr><td><code>{_e(r['id'])}</code></td><td>{_e(w['phase'])}</td><td>"
            f"{_e(w['category'])}</td><td>{_e(w['where'])}</td><td>{_e(w['message'])}</td>"
            f"<td class='n'>{w['count']}</td></tr>" for r in warned for w in r["warnings"])
        body += [f"<h2>Warnings ({len(warned)} case(s))</h2><table><tr><th>case</th><th>phase"
                 f"</th><th>category</th><th>where</th><th>message</th><th>n</th></tr>{rows}"
                 f"</table>"]
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}"
            f"</title><style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")


def write_html(records: list[dict], path: str | Path, *, title: str, meta: str,
               result: str) -> None:
    Path(path).write_text(render_html(records, title=title, meta=meta, result=result),
                          encoding="utf-8")
