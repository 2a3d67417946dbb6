"""The terminal report's groupings (issue 33, Deliver 4: output a person can act on):

* ``grouped_failures``: the FAIL records' rejected outputs grouped by root cause — op ×
  contract kind × element class × least relaxation set — one line per group with its count of
  cases and elements and its first case;
* ``collapsed_failures``: one line per FAIL / CRASH / TIMEOUT / ERROR / XPASS / FLAKY record,
  except that records of one verdict with the same message are one line with their count;
* ``op_table``: per op × verdict counts of the cases that ran (a case counts under each op it
  uses), the ops with failures first;
* ``reason_lines``: NOT_SUPPORTED by reason (what is not claimed, counted per item) and
  UNJUDGED by reason, every UNJUDGED case named.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

__all__ = ["collapsed_failures", "grouped_failures", "op_table", "reason_lines"]

SHOWN_GROUPS = 30


def _int(x: Any) -> int:
    """A count read from a record (a tampered or foreign results file may hold anything)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return 0
    return int(x) if math.isfinite(x) else 0


def _least(d: Any) -> str:
    if not isinstance(d, dict):
        return "undiagnosed"
    least = [s for s in d.get("least") or () if isinstance(s, list)]
    if d.get("none") or not least:
        return "none"
    return " | ".join("{" + ", ".join(str(x) for x in s) + "}" for s in least)


def _kind(contract: str) -> str:
    return str(contract).split("(")[0].split(" ")[0] or "?"


def grouped_failures(records: list[dict], limit: int = SHOWN_GROUPS) -> str:
    """One line per root cause of the FAIL records: (op, contract kind, element class, least
    relaxation set) with the cases and rejected elements in it and its first case, largest
    group first. Empty when nothing FAILed."""
    groups: dict[tuple, list] = {}  # key -> [cases, elements, first id]
    for r in records:
        if r.get("verdict") != "FAIL":
            continue
        seen: set[tuple] = set()
        outs = [o for o in r.get("outputs") or () if isinstance(o, dict)]
        for o in outs:
            d = o.get("diagnosis") if isinstance(o.get("diagnosis"), dict) else None
            op = str((d or {}).get("op") or ",".join(r.get("ops") or ()) or "?")
            per_class = [c for c in (d or {}).get("classes") or () if isinstance(c, dict)]
            rows = [(str(c.get("class", "?")), _int(c.get("count")), _least(c))
                    for c in per_class]
            if not rows:
                rows = [(str(c.get("class", "?")), _int(c.get("count")), _least(d))
                        for c in o.get("classes") or () if isinstance(c, dict)] or \
                    [("?", _int(o.get("mismatches")), _least(d))]
            for cls, n, least in rows:
                key = (op, _kind(str(o.get("contract", "?"))), cls, least)
                g = groups.setdefault(key, [0, 0, str(r.get("id"))])
                g[1] += n
                if key not in seen:
                    g[0] += 1
                    seen.add(key)
        if not outs:  # a FAIL with no output detail (a run-time check answered with values)
            key = ("?", "run-time check" if "run-time check" in r.get("message", "") else "?",
                   "-", "-")
            g = groups.setdefault(key, [0, 0, str(r.get("id"))])
            g[0] += 1
    if not groups:
        return ""
    rows = sorted(groups.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[1][2]))
    n_fail = sum(r.get("verdict") == "FAIL" for r in records)
    out = [f"FAIL by root cause ({len(groups)} group(s) over {n_fail} case(s); op x contract x "
           f"element class x least relaxation set; docs/contracts.md, Conformance levels):"]
    w = max(len(f"{v[0]}") for _, v in rows[:limit])
    for (op, kind, cls, least), (cases, els, first) in rows[:limit]:
        out.append(f"  {cases:>{w}} case(s)  {op} {kind}  {cls}  least {least}  "
                   f"({els:,} element(s); first {first})")
    if len(rows) > limit:
        out.append(f"  ... and {len(rows) - limit} more group(s) (the 'diagnosis' of each "
                   f"record in the JSON lines)")
    return "\n".join(out)


_BAD = ("FAIL", "CRASH", "TIMEOUT", "ERROR", "XPASS", "FLAKY")
_COLLAPSE = ("CRASH", "TIMEOUT", "ERROR")


def collapsed_failures(records: list[dict], limit: int = 50) -> str:
    """One line per FAIL / CRASH / TIMEOUT / ERROR / XPASS record, then one per FLAKY one; the
    CRASH / TIMEOUT / ERROR records of one message are one line with their count."""
    bad = [r for r in records if r["verdict"] in _BAD]
    bad.sort(key=lambda r: r["verdict"] == "FLAKY")  # stable: failures first
    same: dict[tuple, list[dict]] = {}
    rows: list[list[dict]] = []
    for r in bad:
        if r["verdict"] in _COLLAPSE:
            key = (r["verdict"], r.get("message", ""))
            if key in same:
                same[key].append(r)
                continue
            same[key] = [r]
            rows.append(same[key])
        else:
            rows.append([r])
    out = []
    for grp in rows[:limit]:
        r = grp[0]
        more = f" (x{len(grp)}: this message for {len(grp)} cases, the first shown)" \
            if len(grp) > 1 else ""
        out.append(f"{r['verdict']:8} {r['id']}: {r.get('message', '')}{more}"
                   + (f" [repro: {r['repro']}]" if r.get("repro") else "")
                   + (f" [every attempt failed: {', '.join(r['attempts'])}]"
                      if r.get("attempts") else ""))
    if len(rows) > limit:
        out.append(f"... and {len(rows) - limit} more (see the JSON-lines file)")
    return "\n".join(out)


_NS = re.compile(r"^(op|dtype|feature|policy|overflow|rounding|mesh|cast pair)\w*\(s\) \[(.*?)\]")
_UNJ_WHY = re.compile(r"their enclosure admits every value: (.*)\)$")


def _ns_reason(msg: str) -> tuple[str, str]:
    m = _NS.match(msg)
    if m:
        return f"{m.group(1)} not claimed", m.group(2).replace("'", "")
    head, _, rest = msg.partition(": ")
    if head.startswith(("backend.compile", "backend.run")):
        return f"{head} refused", rest[:80]
    if head == "skipped by manifest":
        return head, rest[:80]
    return "other", msg[:80]


def _unj_reason(msg: str) -> str:
    m = _UNJ_WHY.search(msg)
    if m:
        return "enclosure admits every value: " + re.sub(r" within \d+ ulp", "", m.group(1))
    return msg.split(" — ", 1)[1] if " — " in msg else msg[:120]


def reason_lines(records: list[dict], names: int = 50) -> str:
    """NOT_SUPPORTED by reason (each reason's items with their case counts) and UNJUDGED by
    reason with every case named (up to ``names`` per reason). Empty when there is neither."""
    out: list[str] = []
    ns = [r for r in records if r.get("verdict") == "NOT_SUPPORTED"]
    if ns:
        by: dict[str, Counter] = {}
        cases: Counter = Counter()
        for r in ns:
            kind, item = _ns_reason(str(r.get("message", "")))
            cases[kind] += 1
            items = item.split(", ") if kind.endswith("not claimed") else [item]
            by.setdefault(kind, Counter()).update(items)  # several missing: each counts
        out.append(f"NOT_SUPPORTED by reason ({len(ns)} case(s); a case missing several items "
                   f"counts under each):")
        for kind, n in cases.most_common():
            c = by[kind]
            top = ", ".join(f"{k} {m}" for k, m in c.most_common(8))
            more = f", +{len(c) - 8} more" if len(c) > 8 else ""
            out.append(f"  {kind}: {n} case(s): {top}{more}")
    unj = [r for r in records if r.get("verdict") == "UNJUDGED"]
    if unj:
        groups: dict[str, list[str]] = {}
        for r in unj:
            groups.setdefault(_unj_reason(str(r.get("message", ""))), []).append(
                str(r.get("id")))
        out.append(f"UNJUDGED by reason ({len(unj)} case(s) not fully judged: no contract or "
                   f"enclosure bounds some element; docs/contracts.md, Verdicts):")
        for why, ids in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            shown = ", ".join(ids[:names]) + (f", +{len(ids) - names} more" if len(ids) > names
                                               else "")
            out.append(f"  {len(ids)} case(s): {why}: {shown}")
    return "\n".join(out)


SHOWN_OPS = 40
_OP_BAD = ("FAIL", "ERROR", "CRASH", "TIMEOUT", "XPASS", "FLAKY")


def op_table(records: list[dict], limit: int = SHOWN_OPS) -> str:
    """Per op (the records' ``ops``) × verdict counts over the cases that ran (NOT_SUPPORTED
    cases are left out: ``reason_lines`` breaks them down); a case counts under each op it
    uses. Ops with FAIL / ERROR / CRASH / TIMEOUT / XPASS / FLAKY cases first, most first; a
    column only for a verdict that occurs. Empty when no case ran."""
    from tilefoundry.conformance.cases import VERDICTS
    from tilefoundry.conformance.report import ABBR

    rows: dict[str, Counter] = {}
    for r in records:
        v = r.get("verdict")
        if v == "NOT_SUPPORTED" or v not in VERDICTS:
            continue
        ops = [str(o) for o in r.get("ops") or () if isinstance(o, str)] or ["?"]
        for o in dict.fromkeys(ops):
            rows.setdefault(o, Counter())[v] += 1
    if not rows:
        return ""
    total = Counter()
    for c in rows.values():
        total.update(c)
    cols = [v for v in VERDICTS if total[v]]
    order = sorted(rows.items(), key=lambda kv: (-sum(kv[1][v] for v in _OP_BAD),
                                                 -sum(kv[1].values()), kv[0]))
    head = ["op", "cases", *(ABBR.get(v, v) for v in cols)]
    body = [[o, str(sum(c.values())), *(str(c[v]) if c[v] else "-" for v in cols)]
            for o, c in order[:limit]]
    w = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]

    def fmt(x: list[str]) -> str:
        return "  ".join(s.ljust(w[0]) if i == 0 else s.rjust(w[i]) for i, s in enumerate(x))

    out = [f"per op ({len(rows)} op(s) in the cases that ran; a case counts under each op it "
           f"uses):", fmt(head), "  ".join("-" * n for n in w), *(fmt(x) for x in body)]
    if len(order) > limit:
        out.append(f"... and {len(order) - limit} more op(s), none with a failure"
                   if not any(sum(c[v] for v in _OP_BAD) for _, c in order[limit:])
                   else f"... and {len(order) - limit} more op(s)")
    return "\n".join(out)
