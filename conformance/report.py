"""Conformance reports: progress bar, summary table, JSON lines, JUnit XML, op × dtype coverage,
and reproducer directories.

Everything here works on **records** — the per-case dicts the runner appends to its JSON-lines
file (``type``, ``id``, ``family``, ``verdict``, ``seconds``, ``message``, ``ops``, ``dtypes``;
for FAIL ``outputs`` with the worst element of each rejected output and ``repro``; for XFAIL /
XPASS ``raw_verdict`` and ``manifest``; ``tolerance`` when a manifest override accepted it) —
so a report can be regenerated from a JSON-lines file alone (``read_jsonl``).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from tilefoundry.conformance.cases import VERDICTS
from tilefoundry.errors import TilefoundryError

__all__ = [
    "SEVERITY",
    "Progress",
    "ReproducerError",
    "ResultsError",
    "coverage_matrix",
    "judged_line",
    "load_reproducer",
    "read_jsonl",
    "rerun_reproducer",
    "strip_timing",
    "summary_table",
    "write_coverage",
    "write_junit",
    "write_reproducer",
]

ABBR = {"PASS": "PASS", "ADMITTED": "ADM", "FLAKY": "FLAKY", "UNJUDGED": "UNJ", "FAIL": "FAIL", "NOT_SUPPORTED": "N/S", "XFAIL": "XFAIL",
        "XPASS": "XPASS", "CRASH": "CRASH", "TIMEOUT": "T/O", "ERROR": "ERROR"}
# worst last: what a coverage cell shows when several cases exercise it
SEVERITY = ("NOT_SUPPORTED", "PASS", "ADMITTED", "FLAKY", "UNJUDGED", "XFAIL", "XPASS", "FAIL", "ERROR", "TIMEOUT", "CRASH")
#: record keys that depend on scheduling, not on the case (how long it took; whether it ran
#: again in a fresh worker after the worker that started it died from an earlier case)
TIMING_KEYS = ("seconds", "rerun")


# =============================================================================================
# JSON lines
# =============================================================================================
class ResultsError(TilefoundryError, ValueError):
    """A results file that cannot be read (not a regular file, too big, a line that is not a
    runner's record); the message names the file, the line and what is wrong."""


def read_jsonl(path: str | Path, *, skipped: list | None = None
               ) -> tuple[dict | None, dict[str, dict]]:
    """The run header and the case records (by id; the first record of an id wins) of a
    runner's JSON-lines file, read by ``loaders.load_results`` (a regular file within the size
    limit, each line a bounded JSON object whose keys have the types the reports read). A torn
    last line is ignored. Any other bad line raises ``ResultsError`` naming the file and line,
    unless ``skipped`` is a list: then its 1-based line number is appended there and the line
    is skipped."""
    from tilefoundry.conformance.loaders import load_results

    res = load_results(path, error=ResultsError, skip_bad=skipped is not None)
    if skipped is not None:
        skipped.extend(res.skipped)
    return res.header, res.records


def strip_timing(records: Iterable[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


# =============================================================================================
# terminal
# =============================================================================================
#: ANSI colours of the verdicts on a terminal (green: passed, red: failed, yellow: not judged)
_COLOUR = {"PASS": "32", "ADMITTED": "36", "FLAKY": "33", "UNJUDGED": "33", "FAIL": "31", "NOT_SUPPORTED": "2",
           "XFAIL": "2", "XPASS": "31", "CRASH": "31", "TIMEOUT": "31", "ERROR": "31"}


def use_colour(stream: Any) -> bool:
    """Colours on a terminal only: never on a pipe or a file, nor with ``NO_COLOR`` set (the
    no-color.org convention) or ``TERM=dumb``."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def paint(text: str, verdict: str, on: bool) -> str:
    """``text`` in ``verdict``'s colour when ``on``."""
    code = _COLOUR.get(verdict)
    return f"\x1b[{code}m{text}\x1b[0m" if on and code else text


class Progress:
    """A one-line live progress bar on a text stream (``\\r``-redrawn, at most ten redraws a
    second), its verdict counts coloured on a terminal (``use_colour``)."""

    def __init__(self, total: int | None, stream: Any = None, enabled: bool = True,
                 width: int = 24, colour: bool | None = None):
        self.total, self.stream, self.enabled, self.width = total, stream or sys.stderr, \
            enabled, width
        self.colour = use_colour(self.stream) if colour is None else colour
        self.n = 0
        self.counts: Counter[str] = Counter()
        self.t0 = time.monotonic()
        self._last = 0.0
        self._drawn = False

    def update(self, verdict: str | None, done: int = 0) -> None:
        if verdict is not None:
            self.n += 1
            self.counts[verdict] += 1
        self.n += done
        now = time.monotonic()
        if self.enabled and (now - self._last >= 0.1 or self.n == self.total):
            self._last = now
            self.draw()

    def line(self) -> str:
        el = time.monotonic() - self.t0
        bad = " ".join(paint(f"{ABBR[v]} {self.counts[v]}", v, self.colour) for v in VERDICTS
                       if v != "PASS" and self.counts[v])
        if self.total:
            frac = min(1.0, self.n / self.total)
            fill = int(frac * self.width)
            bar = "#" * fill + "." * (self.width - fill)
            eta = f" eta {el / frac - el:.0f}s" if 0 < frac < 1 else ""
            head = f"[{bar}] {self.n}/{self.total} {100 * frac:3.0f}%"
        else:
            head, eta = f"{self.n} cases", ""
        return f"{head}  " + paint(f"PASS {self.counts['PASS']}", "PASS", self.colour) + \
            (f" {bad}" if bad else "") + f"  {el:.0f}s{eta}"

    def draw(self) -> None:
        line = self.line()
        if not self.colour:  # (escape codes take no columns: only a plain line is cut)
            line = line[:119].ljust(80)
        self.stream.write("\r" + line + ("\x1b[K" if self.colour else ""))
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled:
            if not self._drawn or self.n != self.total:
                self.draw()
            self.stream.write("\n")
            self.stream.flush()


def summary_table(records: list[dict]) -> str:
    """Per op family × verdict counts, with a total row (plain text, aligned)."""
    fams: dict[str, Counter] = {}
    for r in records:
        fams.setdefault(r.get("family", "?"), Counter())[r["verdict"]] += 1
    total = Counter()
    for c in fams.values():
        total.update(c)
    # FLAKY only with --flake-retries, ADMITTED only with declared relaxations
    cols = [v for v in VERDICTS if v not in ("FLAKY", "ADMITTED") or total[v]]
    head = ["family", "cases", *(ABBR[v] for v in cols)]
    rows = [[f, str(sum(c.values())), *(str(c[v]) if c[v] else "-" for v in cols)]
            for f, c in sorted(fams.items())]
    rows.append(["total", str(sum(total.values())),
                 *(str(total[v]) if total[v] else "-" for v in cols)])
    w = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]

    def fmt(x: list[str]) -> str:
        return "  ".join(s.ljust(w[0]) if i == 0 else s.rjust(w[i]) for i, s in enumerate(x))

    sep = "  ".join("-" * n for n in w)
    return "\n".join([fmt(head), sep, *(fmt(x) for x in rows[:-1]), sep, fmt(rows[-1])])


def diagnosis_label(d: Any) -> str:
    """A record's diagnosis in one token: the least sets (``nsz+afn | ftz``) or ``none``."""
    if not isinstance(d, dict):
        return "?"
    least = d.get("least") or []
    if d.get("none") or not least:
        return "none"
    return " | ".join("+".join(str(x) for x in s) for s in least if isinstance(s, list))


def relaxation_table(records: list[dict]) -> str:
    """Rejected outputs (of FAIL / ADMITTED records) per producing op × least relaxation: a
    count in each relaxation of a least set (several least sets: each counts), ``none`` for
    the outputs no relaxation admits. Empty when no record was diagnosed."""
    from tilefoundry.oracle.relax import NAMES

    rows: dict[str, Counter] = {}
    for r in records:
        if r.get("verdict") not in ("FAIL", "ADMITTED"):
            continue
        for o in r.get("outputs", ()) or ():
            d = o.get("diagnosis") if isinstance(o, dict) else None
            if not isinstance(d, dict):
                continue
            c = rows.setdefault(str(d.get("op") or "?"), Counter())
            c["outputs"] += 1
            if d.get("none") or not d.get("least"):
                c["none"] += 1
                continue
            for n in {x for s in d["least"] if isinstance(s, list) for x in s}:
                c[n] += 1
    if not rows:
        return ""
    total = Counter()
    for c in rows.values():
        total.update(c)
    cols = [n for n in NAMES if total[n]] + ["none"]
    head = ["op", "outputs", *cols]
    body = [[op, str(c["outputs"]), *(str(c[n]) if c[n] else "-" for n in cols)]
            for op, c in sorted(rows.items())]
    foot = ["total", str(total["outputs"]), *(str(total[n]) if total[n] else "-" for n in cols)]
    w = [max(len(x[i]) for x in [head, *body, foot]) for i in range(len(head))]

    def fmt(x: list[str]) -> str:
        return "  ".join(s.ljust(w[0]) if i == 0 else s.rjust(w[i]) for i, s in enumerate(x))

    sep = "  ".join("-" * n for n in w)
    return "\n".join(["rejected outputs by op x least relaxation set (docs/contracts.md, "
                      "Conformance levels):", fmt(head), sep, *(fmt(x) for x in body), sep,
                      fmt(foot)])


def judged_line(records: list[dict]) -> str:
    """Output elements judged / unjudged over the records that were judged at all."""
    el = sum(int(r.get("elements", 0)) for r in records)
    un = sum(int(r.get("unjudged", 0)) for r in records)
    if not el:
        return "output elements: none judged"
    return (f"output elements: {el:,}, judged {el - un:,} ({100 * (el - un) / el:.2f} %), "
            f"unjudged {un:,}")


def failure_lines(records: list[dict], limit: int = 50) -> str:
    """One line per FAIL / CRASH / TIMEOUT / ERROR / XPASS record, then one per FLAKY one; the
    CRASH / TIMEOUT / ERROR records of one message collapsed into one line with their count
    (``report_groups.collapsed_failures``)."""
    from tilefoundry.conformance.report_groups import collapsed_failures

    return collapsed_failures(records, limit)


# =============================================================================================
# JUnit XML
# =============================================================================================
def write_junit(records: list[dict], path: str | Path, *, name: str = "tilefoundry-conformance",
                properties: dict | None = None) -> None:
    """One ``testcase`` per record (classname ``conformance.<family>``, name = the case id):
    FAIL and XPASS are ``failure``\\ s, CRASH / TIMEOUT / ERROR ``error``\\ s, NOT_SUPPORTED and
    XFAIL ``skipped`` (with the reason / the expected failure as message)."""
    c = Counter(r["verdict"] for r in records)
    failures = c["FAIL"] + c["XPASS"]
    errors = c["CRASH"] + c["TIMEOUT"] + c["ERROR"]
    skipped = c["NOT_SUPPORTED"] + c["XFAIL"] + c["UNJUDGED"]
    t = sum(float(r.get("seconds", 0.0)) for r in records)
    attrs = {"name": name, "tests": str(len(records)), "failures": str(failures),
             "errors": str(errors), "skipped": str(skipped), "time": f"{t:.3f}"}
    root = ET.Element("testsuites", attrs)
    suite = ET.SubElement(root, "testsuite", attrs)
    if properties:
        props = ET.SubElement(suite, "properties")
        for k, v in properties.items():
            ET.SubElement(props, "property", {"name": str(k), "value": str(v)})
    for r in records:
        tc = ET.SubElement(suite, "testcase", {
            "classname": f"conformance.{r.get('family', '?')}", "name": r["id"],
            "time": f"{float(r.get('seconds', 0.0)):.3f}"})
        v, msg = r["verdict"], r.get("message", "")
        if v in ("FAIL", "XPASS"):
            el = ET.SubElement(tc, "failure", {"type": v, "message": msg})
            el.text = _details(r)
        elif v in ("CRASH", "TIMEOUT", "ERROR"):
            el = ET.SubElement(tc, "error", {"type": v, "message": msg})
            el.text = _details(r)
        elif v in ("NOT_SUPPORTED", "XFAIL", "UNJUDGED"):  # UNJUDGED: not judged, not passed
            ET.SubElement(tc, "skipped", {"type": v, "message": f"{v}: {msg}"})
        elif v == "FLAKY":  # passed on a later attempt: a pass, with the first failure shown
            ET.SubElement(tc, "system-out").text = f"{v} (attempts {r.get('attempts')}): {msg}"
        elif v == "ADMITTED":  # a pass under declared relaxations, never a strict one
            tp = ET.SubElement(tc, "properties")
            ET.SubElement(tp, "property", {"name": "admitted", "value": str(r.get("admitted"))})
            ET.SubElement(tc, "system-out").text = f"{v}: {msg}"
        if r.get("diagnosis") and v not in ("ADMITTED",):
            tp = tc.find("properties")
            if tp is None:
                tp = ET.SubElement(tc, "properties")
            ET.SubElement(tp, "property", {"name": "least_relaxations",
                                           "value": diagnosis_label(r["diagnosis"])})
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _details(r: dict) -> str:
    lines = [f"{r['verdict']}: {r.get('message', '')}"]
    for o in r.get("outputs") or ():  # a record read back: any key may be missing
        g = {k: o.get(k, "?") for k in ("output", "contract", "mismatches", "total",
                                         "worst_index", "expected", "expected_hex", "observed",
                                         "observed_hex", "ulp_distance")}
        lines.append(f"output {g['output']} ({g['contract']}): {g['mismatches']}/{g['total']} "
                     f"rejected; worst at {g['worst_index']}: expected {g['expected']} "
                     f"({g['expected_hex']}), observed {g['observed']} ({g['observed_hex']}), "
                     f"{g['ulp_distance']} ulp")
    if r.get("repro"):
        lines.append(f"reproducer: {r['repro']}/repro.py")
    return "\n".join(lines)


# =============================================================================================
# op × dtype coverage
# =============================================================================================
def _dtype_key(d: str) -> tuple:
    from tilefoundry.semantics.formats import DType

    order = [x.value for x in DType]
    return (order.index(d) if d in order else len(order), d)


def coverage_matrix(records: list[dict], fmt: str = "text") -> str:
    """Which op × dtype combinations the records exercised, and the worst verdict of each
    (a case marks every pair of its ops and dtypes; an op class named next to one of its kinds,
    ``Reduce`` beside ``Reduce.sum``, is left to the kind's row). Cells read ``<worst verdict> <cases>``;
    ``-`` is a combination no case touched. ``fmt``: ``text`` or ``markdown``."""
    cells: dict[tuple[str, str], list[str]] = {}
    ops: set[str] = set()
    dts: set[str] = set()
    for r in records:
        rops = list(r.get("ops", ()))
        kinds = {o.split(".")[0] for o in rops if "." in o}
        for o in rops:
            if o in kinds:  # "Reduce" next to "Reduce.sum": the kind-level row says it
                continue
            ops.add(o)
            for d in r.get("dtypes", ()):
                dts.add(d)
                cells.setdefault((o, d), []).append(r["verdict"])
    cols = sorted(dts, key=_dtype_key)
    rows = sorted(ops)

    def cell(o: str, d: str) -> str:
        vs = cells.get((o, d))
        if not vs:
            return "-"
        worst = max(vs, key=lambda v: SEVERITY.index(v) if v in SEVERITY else 0)
        return f"{ABBR.get(worst, worst)} {len(vs)}"

    table = [["op", *cols], *([o, *(cell(o, d) for d in cols)] for o in rows)]
    exercised = sum(1 for vs in cells.values() if any(v != "NOT_SUPPORTED" for v in vs))
    foot = (f"{exercised} op × dtype combination(s) exercised, {len(cells) - exercised} only "
            f"NOT_SUPPORTED, over {len(rows)} op(s) and {len(cols)} dtype(s)")
    if fmt == "markdown":
        out = ["| " + " | ".join(table[0]) + " |",
               "|" + "|".join(["---"] + [":-:"] * len(cols)) + "|"]
        out += ["| " + " | ".join(x) + " |" for x in table[1:]]
        return "\n".join([*out, "", foot])
    if fmt != "text":
        raise ValueError(f"coverage format: expected 'text' or 'markdown', got {fmt!r}")
    w = [max(len(x[i]) for x in table) for i in range(len(table[0]))]
    lines = ["  ".join(s.ljust(w[i]) for i, s in enumerate(x)).rstrip() for x in table]
    return "\n".join([*lines, "", foot])


def write_coverage(records: list[dict], path: str | Path) -> None:
    """The coverage matrix as markdown for ``*.md`` paths, plain text otherwise."""
    p = Path(path)
    p.write_text(coverage_matrix(records, "markdown" if p.suffix.lower() in (".md", ".markdown")
                                 else "text") + "\n")


# =============================================================================================
# reproducers
# =============================================================================================
REPRO_FORMAT = 2  # 2: no pickle anywhere (program as DSL source, inputs as raw bits)

REPRO_PY = '''\
#!/usr/bin/env python
"""Reproducer of the conformance case described in case.json, next to this file.

    python repro.py --backend SPEC [--catalog MOD:FN]   # re-run SPEC and judge its outputs
    python repro.py --recorded                          # judge the recorded outputs

SPEC: a backend (a built-in name or 'package.module:factory') or a candidate callable
'package.module:function' taking (module, entry, inputs). The backend comes only from the
command line: case.json records the one the case failed on (BUG.md shows the command), but a
reproducer never chooses the code it runs. Without --backend or --recorded it is refused with
the command to type.

The backend is re-run on the recorded input bits and its outputs judged with the tilefoundry
oracle; --recorded judges the recorded observed outputs instead, with no backend. Safe to open:
nothing in this directory is executed or unpickled. This file is the same for every case (it
holds nothing of the case's); the program is read from program_dsl.py by the DSL parser (which
runs no code), the inputs are raw bits (.npy without pickles), and this script imports only
tilefoundry, numpy and the backend you name (its own directory is taken off the import path
first). Exit status: 0 PASS, 1 FAIL / ERROR, 2 when the reproducer cannot be loaded or no
backend is named."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]

from tilefoundry.conformance.report import rerun_reproducer  # noqa: E402

if __name__ == "__main__":
    sys.exit(rerun_reproducer(HERE, sys.argv[1:]))
'''


class ReproducerError(TilefoundryError):
    """A reproducer directory that cannot be loaded without running or unpickling its files."""


def _load_program(d: Path, meta: dict, catalog: str | None = None):
    if meta.get("format", 1) < REPRO_FORMAT or (d / "module.pkl").exists() or \
            (d / "inputs.pkl").exists():
        raise ReproducerError(
            f"{d}: an old reproducer holding pickles (module.pkl / inputs.pkl), which can run "
            f"code when loaded; it is refused. Rebuild it with this tilefoundry (rerun the case "
            f"with --repro-dir), or load the pickles yourself if you trust their origin")
    src = d / "program_dsl.py"
    if src.exists() or src.is_symlink():
        from tilefoundry.conformance.loaders import read_text_file
        from tilefoundry.semantics.dsl import parse_module

        text = read_text_file(src, what=str(src), kind="reproducer", error=ReproducerError)
        try:
            return parse_module(text, filename=str(src))
        except TilefoundryError as e:
            raise ReproducerError(f"{src}: {e}") from None
    if meta.get("program") == "catalog":
        from tilefoundry.conformance.selection import load_catalog

        recorded = meta.get("catalog")
        shown = f" (the run's: --catalog {recorded})" if isinstance(recorded, str) and \
            re.fullmatch(r"[\w./@+:-]+", recorded, re.ASCII) and not catalog else ""
        if not isinstance(meta.get("seed"), int) or isinstance(meta.get("seed"), bool):
            raise ReproducerError(f"{d / 'case.json'}: a catalog case needs its integer 'seed'"
                                  f"; rebuild the reproducer (rerun the case with --repro-dir)")
        try:  # the built-in catalog unless one is named: case.json's is shown, never loaded
            cat = load_catalog(meta["seed"], catalog=catalog)
        except TilefoundryError as e:
            raise ReproducerError(f"{d}: the program is rebuilt from its catalog by case id, "
                                  f"and the catalog cannot be loaded: {e}; make it importable "
                                  f"(run from its directory, or add that to PYTHONPATH)") \
                from None
        try:
            return cat[meta["id"]].build()[0]
        except (KeyError, TilefoundryError):
            raise ReproducerError(f"{d}: case {meta['id']!r} is not in the catalog "
                                  f"{catalog or '(built in)'}; name its catalog with "
                                  f"--catalog{shown}") from None
    raise ReproducerError(f"{d}: the program has no DSL spelling "
                          f"({meta.get('program_note', 'not written')}) and is not a catalog "
                          f"case; program.txt holds its text")


def _load_arrays(d: Path, prefix: str, metas: list) -> list:
    import io
    import tokenize

    from tilefoundry.conformance.loaders import read_regular
    from tilefoundry.semantics.dtypes import from_bits

    out = []
    for i, m in enumerate(metas):
        f = d / f"{prefix}_{i}.npy"
        raw = read_regular(f, what=str(f), kind="reproducer", error=ReproducerError)
        try:
            bits = np.load(io.BytesIO(raw), allow_pickle=False)
            if not isinstance(bits, np.ndarray):
                raise ValueError("not one array (an .npz archive?)")
            out.append(from_bits(bits, m["dtype"]))
        except TilefoundryError as e:
            raise ReproducerError(f"{f}: {e}; rebuild the reproducer (rerun the case with "
                                  f"--repro-dir)") from None
        except (ValueError, EOFError, TypeError, KeyError, OverflowError, SyntaxError,
                tokenize.TokenError) as e:  # numpy's refusals (its header parser tokenizes)
            raise ReproducerError(f"{f}: not the raw bits of a {m['dtype'][:40]} array ({e}); "
                                  f"rebuild the reproducer (rerun the case with --repro-dir)"
                                  ) from None
    return out


def load_reproducer(directory: str | Path, catalog: str | None = None
                    ) -> tuple[Any, str, list, dict]:
    """(module, entry, inputs, case metadata) of a reproducer directory, executing and
    unpickling nothing from it (``ReproducerError`` when it cannot be loaded that way)."""
    from tilefoundry.conformance.loaders import load_case_json
    from tilefoundry.semantics.evaluator.mesh import Sharded

    d = Path(directory)
    if not d.is_dir():
        raise ReproducerError(f"{d}: not a directory; give the reproducer's folder (the one "
                              f"holding case.json)")
    meta = load_case_json(d / "case.json", ReproducerError)
    module = _load_program(d, meta, catalog)
    entry = meta["entry"]
    if entry not in {f.name for f in getattr(module, "functions", ())}:
        raise ReproducerError(f"{d / 'case.json'}: entry {entry[:60]!r} is not a function of "
                              f"the program; rebuild the reproducer (rerun the case with "
                              f"--repro-dir)")
    inputs = _load_arrays(d, "input", meta["inputs"])
    if any(m.get("sharded") for m in meta["inputs"]):
        from tilefoundry.semantics.typeinfer.core import Session
        from tilefoundry.semantics.typeinfer.functions import infer_module

        try:
            fn = infer_module(module, Session())[entry]
        except TilefoundryError as e:
            raise ReproducerError(f"{d}: the program does not type-check ({e})") from None
        if len(fn.params) != len(inputs) or any(
                m.get("sharded") and getattr(p.type, "shard", None) is None
                for m, p in zip(meta["inputs"], fn.params, strict=False)):
            raise ReproducerError(f"{d / 'case.json'}: its inputs do not match {entry!r}'s "
                                  f"parameters; rebuild the reproducer (rerun the case with "
                                  f"--repro-dir)")
        inputs = [Sharded(fn.params[i].type.shard, x) if m.get("sharded") else x
                  for i, (m, x) in enumerate(zip(meta["inputs"], inputs, strict=True))]
    return module, entry, inputs, meta


def rerun_reproducer(directory: str | Path, argv: list[str] | None = None) -> int:
    """``repro.py``'s logic (``conformance.repro_replay.rerun``; every reproducer's repro.py
    imports it from here)."""
    from tilefoundry.conformance.repro_replay import rerun

    return rerun(directory, argv)


def _bits(x: np.ndarray) -> tuple[np.ndarray, str]:
    from tilefoundry.semantics.dtypes import to_bits
    from tilefoundry.semantics.formats import dtype_of

    x = np.ascontiguousarray(x) if np.asarray(x).ndim else np.asarray(x)
    dt = dtype_of(x)
    return np.asarray(to_bits(x)).copy(), dt.value


#: an input of at most this many elements is written to inputs.hex.txt whole; a larger one
#: (a sweep of every bf16 pattern) by its first HEX_HEAD elements, its bits being in
#: input_<i>.npy anyway — the full tier's 301 FAIL reproducers were 120 MB, three quarters
#: of it these dumps (issue 22: reproducers sized by what failed, not by the whole sweep)
HEX_FULL_MAX = 4096
HEX_HEAD = 256


def _hex_lines(name: str, x: np.ndarray) -> list[str]:
    from tilefoundry.semantics.formats import FORMATS, DType

    bits, dt = _bits(x)
    width = max(1, FORMATS[DType(dt)].bits // 4)
    allbits = bits.reshape(-1)
    shown = allbits if allbits.size <= HEX_FULL_MAX else allbits[:HEX_HEAD]
    flat = [f"{int(b):0{width}x}" for b in shown]
    out = [f"{name}: {dt} shape {list(x.shape)}"]
    for k in range(0, len(flat), 16):
        out.append("  " + " ".join(flat[k:k + 16]))
    if shown.size < allbits.size:
        out.append(f"  ... {allbits.size - shown.size:,} more element(s), not shown: every "
                   f"element's bits are in the .npy file of this input")
    return out


def _program_source(module: Any) -> tuple[str, str | None, str]:
    """(canonical IR text, DSL source or None, why not). The DSL source is written only when
    the parser reads it back to the same Module (it is what a reproducer loads)."""
    from tilefoundry.semantics.dsl import parse_module, to_source
    from tilefoundry.semantics.printer import to_text

    text = to_text(module)
    try:
        src = to_source(module)
    except Exception as e:  # a construct the DSL cannot spell: no source, said in case.json
        return text, None, f"{type(e).__name__}: {e}"[:300]
    try:
        back = parse_module(src)
    except Exception as e:
        return text, None, f"the DSL source does not parse back: {e}"[:300]
    if back != module:
        return text, None, "the DSL source parses back to another program"
    return text, src, ""


def write_reproducer(path: str | Path, *, case_id: str, family: str, seed: int, backend: str,
                     module: Any, entry: str, inputs: list, verdict: Any, observed: Any,
                     catalog: str | None = None) -> Path:
    """A self-contained reproducer directory for a failing case:

    ``program.txt`` (the IR text) and ``program_dsl.py`` (the DSL source, when it reads back to
    the same program), ``input_<i>.npy`` (raw bits, unsigned integers of the storage width, no
    pickle; a Sharded input's per-device data) and
    ``inputs.hex.txt``, ``expected_<i>.npy`` / ``observed_<i>.npy`` (raw bits), ``verdict.txt``
    (the oracle's summary: contract, worst element, ULP distance), ``case.json`` (id, seed,
    backend, dtypes and shapes) and ``repro.py``, which re-runs the comparison with only
    tilefoundry and the backend installed: ``python repro.py --backend SPEC``. Nothing in it is
    a pickle and nothing in it runs when it is loaded (``load_reproducer``)."""
    from tilefoundry.oracle.compare import as_outputs, gather_outputs

    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    from tilefoundry.semantics.evaluator.mesh import Sharded

    text, dsl, why = _program_source(module)
    (p / "program.txt").write_text(text + "\n")
    if dsl:
        (p / "program_dsl.py").write_text(dsl if dsl.endswith("\n") else dsl + "\n")
    in_meta: list[dict] = []
    hexes: list[str] = []
    for i, x in enumerate(inputs):
        sharded = isinstance(x, Sharded)
        data = x.data if sharded else np.asarray(x)
        bits, dt = _bits(data)
        np.save(p / f"input_{i}.npy", bits, allow_pickle=False)
        in_meta.append({"dtype": dt, "shape": list(data.shape),
                        **({"sharded": True} if sharded else {})})
        hexes += _hex_lines(f"input {i}" + (" (per-device data)" if sharded else ""), data)
    (p / "inputs.hex.txt").write_text("\n".join(hexes) + "\n")
    ref = verdict.reference.value if verdict.reference is not None else None
    tuple_result = isinstance(ref, tuple | list)
    expected = [gather_outputs(x) for x in as_outputs(ref)] if ref is not None else []
    got = [gather_outputs(x) for x in as_outputs(observed)]
    ex_meta, ob_meta = [], []
    for i, e in enumerate(expected):
        bits, dt = _bits(e)
        np.save(p / f"expected_{i}.npy", bits)
        ex_meta.append({"dtype": dt, "shape": list(e.shape)})
    for i, o in enumerate(got):
        try:
            bits, dt = _bits(np.asarray(o))
        except Exception:
            continue
        np.save(p / f"observed_{i}.npy", bits)
        ob_meta.append({"dtype": dt, "shape": list(np.asarray(o).shape)})
    (p / "verdict.txt").write_text(f"case {case_id} ({family}) on backend {backend}, seed "
                                   f"{seed}\n{verdict.summary()}\n")
    program = "dsl" if dsl else ("catalog" if not case_id.startswith(("oracle/", "fuzz/"))
                                 else "none")
    meta = {"format": REPRO_FORMAT, "id": case_id, "family": family, "seed": seed,
            "backend": backend, "catalog": catalog, "program": program,
            **({"program_note": why} if why else {}),
            "entry": entry, "inputs": in_meta, "expected": ex_meta,
            "observed": ob_meta, "tuple_result": tuple_result, "status": verdict.status,
            "summary": verdict.summary()[:2000], "run_dir": os.getcwd(),
            "contracts_version": verdict.contracts_version}
    (p / "case.json").write_text(json.dumps(meta, indent=1) + "\n")
    (p / "repro.py").write_text(REPRO_PY)  # a fixed file: no text of the case in code
    (p / "BUG.md").write_text(bug_md(p, case_id=case_id, family=family, seed=seed,
                                     backend=backend, verdict=verdict, text=text, dsl=dsl,
                                     inputs=inputs))
    return p


#: input elements shown as hex in BUG.md (all of them are in input_<i>.npy / inputs.hex.txt)
BUG_HEX_ELEMENTS = 64


def bug_md(p: Path, *, case_id: str, family: str, seed: int, backend: str, verdict: Any,
           text: str, dsl: str | None, inputs: list) -> str:
    """A bug report a person can paste into a tracker: the replay command, expected vs
    observed per failing element class of each rejected output, the program source and the
    inputs as hex (the first ``BUG_HEX_ELEMENTS`` elements of each)."""
    import shlex

    from tilefoundry.semantics.evaluator.mesh import Sharded

    lines = [f"# {case_id}: {verdict.status} on backend `{backend or '(candidate)'}`", "",
             f"- family: {family}; seed: {seed}; contracts version: "
             f"{verdict.contracts_version}", "", "## Replay", "", "```sh",
             f"python {shlex.quote(str(p / 'repro.py'))} --backend "  # shell-quoted: data
             f"{shlex.quote(backend) if backend else 'SPEC'}", "```", "",
             "## Expected vs observed", ""]
    fails = [o for o in verdict.outputs if o.status == "FAIL"]
    if not fails:
        lines += [verdict.summary(), ""]
    for o in fails:
        lines += [f"Output {o.output}, contract `{o.contract}`: {o.mismatches} of {o.total} "
                  f"element(s) rejected, in {len(o.classes) or 1} distinct class(es).", "",
                  "| class (expected -> observed) | elements | first index | expected | "
                  "observed |", "|---|--:|---|---|---|"]
        classes = o.classes or (("worst element", o.mismatches, o.worst_index or (),
                                 o.expected_hex, o.observed_hex, o.expected, o.observed),)
        for name, n, idx, eh, oh, ev, ov in classes:
            lines.append(f"| {name} | {n} | {list(idx)} | {ev} (`{eh}`) | {ov} (`{oh}`) |")
        lines.append("")
    lines += ["## Program", "", "```python" if dsl else "```", (dsl or text).rstrip(), "```", "",
              "## Inputs (hex bit patterns)", ""]
    for i, x in enumerate(inputs):
        data = x.data if isinstance(x, Sharded) else np.asarray(x)
        hx = _hex_lines(f"input {i}", data.reshape(-1)[:BUG_HEX_ELEMENTS])
        more = data.size - min(data.size, BUG_HEX_ELEMENTS)
        lines += [f"input {i}: shape {list(data.shape)}" + (f" (the first {BUG_HEX_ELEMENTS} "
                  f"of {data.size} elements; all in input_{i}.npy)" if more else ""), "```",
                  *hx[1:], "```", ""]
    return "\n".join(lines)
