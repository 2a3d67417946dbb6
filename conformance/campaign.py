"""CI campaigns over conformance results: baselines, merging shard results, diffing two runs.

Everything here works on the runner's JSON-lines files (``report.read_jsonl``), never on a live
run, so a CI job can shard a tier over machines, merge the shards, compare against a baseline
and diff against yesterday's run from the files alone.

**Baseline** (``--baseline FILE``, written by ``--write-baseline FILE``): the known failures of a
backend, each with a reason. A JSON object::

    {"format": 1, "backend": "mypkg:factory",
     "failures": [{"case": "cast/f32->bf16/tie", "verdict": "FAIL",
                   "reason": "rounds by truncation (tracker #12)"}]}

``case`` is a case id (exact: a baseline lists what failed, not a pattern), ``verdict`` one of
the failing verdicts (FAIL / CRASH / TIMEOUT / ERROR / XPASS), ``reason`` a non-empty string;
no other keys. A run against a baseline fails only on a **new** failure (a failing case the
baseline does not list); a listed case that no longer fails is reported **fixed** (remove it);
a listed case that fails with another verdict is reported as changed but stays known. A
baseline naming a case id the catalog does not have, or a malformed entry, is an error before
any case runs (a stale baseline would otherwise hide nothing and say so nowhere).

**Merge**: the shard files of one campaign (same backend, seed, capabilities; shards ``i/N``
for every ``i`` once, or unsharded files with disjoint cases) become one result, records in
case-id order. Its report is the report of a single run of the union (the runner's records do
not depend on scheduling apart from ``report.TIMING_KEYS``).

**Diff**: two result files, case by case: regressions (a case that passed, or was not bad, and
now fails), fixes, other verdict changes, cases only in one of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tilefoundry.errors import TilefoundryError

__all__ = ["BASELINE_FORMAT", "Baseline", "BaselineError", "CampaignError", "Diff",
           "Merged", "diff_runs", "merge_results", "write_merged"]

BASELINE_FORMAT = 1
BAD = ("FAIL", "CRASH", "TIMEOUT", "ERROR", "XPASS")
_ENTRY_KEYS = {"case", "verdict", "reason"}
_TOP_KEYS = {"format", "backend", "failures"}


class CampaignError(TilefoundryError):
    """Result files that cannot be merged or compared (unreadable, different runs, a shard
    missing or present twice)."""


class BaselineError(CampaignError):
    """A baseline file that cannot be used (unreadable, malformed, unknown case ids)."""


# =============================================================================================
# baselines
# =============================================================================================
@dataclass(frozen=True)
class BaselineEntry:
    case: str
    verdict: str
    reason: str


@dataclass
class BaselineOutcome:
    known: list[tuple[dict, BaselineEntry]] = field(default_factory=list)
    new: list[dict] = field(default_factory=list)  # failing records the baseline lacks
    fixed: list[tuple[dict, BaselineEntry]] = field(default_factory=list)
    changed: list[tuple[dict, BaselineEntry]] = field(default_factory=list)  # other bad verdict

    def to_json(self) -> dict:
        return {"known": len(self.known), "new": [r["id"] for r in self.new],
                "fixed": [r["id"] for r, _ in self.fixed],
                "changed": [r["id"] for r, _ in self.changed]}


@dataclass
class Baseline:
    entries: dict[str, BaselineEntry]
    source: str = "<baseline>"
    backend: str | None = None

    @classmethod
    def load(cls, path: str | Path) -> Baseline:
        from tilefoundry.conformance.loaders import read_text_file

        p = Path(path)
        text = read_text_file(p, what=f"--baseline {p}", kind="baseline", error=BaselineError)
        return cls.parse(text, str(p))

    @classmethod
    def parse(cls, text: str, source: str = "<baseline>") -> Baseline:
        from tilefoundry.conformance.loaders import parse_json

        where = f"--baseline {source}"
        if not isinstance(text, str):
            raise BaselineError(f"{where}: Baseline.parse takes the JSON text (a str), got "
                                f"{type(text).__name__}; Baseline.load reads a file")
        data = parse_json(text, where, BaselineError, fix="write one with --write-baseline")
        if not isinstance(data, dict):
            raise BaselineError(f"{where}: expected a JSON object with 'failures', got "
                                f"{type(data).__name__}")
        unknown = sorted(set(data) - _TOP_KEYS)
        if unknown:
            raise BaselineError(f"{where}: unknown key(s) {unknown} (allowed: "
                                f"{sorted(_TOP_KEYS)})")
        if data.get("format", BASELINE_FORMAT) != BASELINE_FORMAT:
            raise BaselineError(f"{where}: format {data.get('format')!r}, this version reads "
                                f"format {BASELINE_FORMAT}")
        fails = data.get("failures")
        if not isinstance(fails, list):
            raise BaselineError(f"{where}: 'failures' must be a list of objects, got "
                                f"{type(fails).__name__}")
        entries: dict[str, BaselineEntry] = {}
        for n, e in enumerate(fails, 1):
            at = f"{where}: failures[{n - 1}]"
            if not isinstance(e, dict):
                raise BaselineError(f"{at}: expected an object with case / verdict / reason, "
                                    f"got {e!r}")
            bad_keys = sorted(set(e) - _ENTRY_KEYS)
            if bad_keys:
                raise BaselineError(f"{at}: unknown key(s) {bad_keys} (allowed: "
                                    f"{sorted(_ENTRY_KEYS)})")
            case, verdict, reason = e.get("case"), e.get("verdict"), e.get("reason")
            if not isinstance(case, str) or not case:
                raise BaselineError(f"{at}: 'case' (a case id) is required")
            if verdict not in BAD:
                raise BaselineError(f"{at} ({case!r}): 'verdict' must be one of {list(BAD)}, "
                                    f"got {verdict!r}")
            if not isinstance(reason, str) or not reason.strip():
                raise BaselineError(f"{at} ({case!r}): a non-empty 'reason' is required")
            if case in entries:
                raise BaselineError(f"{at}: case {case!r} is listed twice")
            entries[case] = BaselineEntry(case, verdict, reason.strip())
        backend = data.get("backend")
        return cls(entries, source, backend if isinstance(backend, str) else None)

    def check_ids(self, known_ids: Iterable[str]) -> None:
        """A BaselineError naming the entries whose case id is not in ``known_ids``."""
        import difflib

        ids = set(known_ids)
        missing = [c for c in self.entries if c not in ids]
        if missing:
            near = difflib.get_close_matches(missing[0], list(ids), n=1)
            raise BaselineError(
                f"--baseline {self.source}: {len(missing)} case id(s) the catalog does not "
                f"have: {missing[:3]}{' ...' if len(missing) > 3 else ''}"
                + (f" (closest id to {missing[0]!r}: {near[0]!r})" if near else "")
                + "; remove them or write a fresh one with --write-baseline")

    def apply(self, records: Sequence[dict]) -> BaselineOutcome:
        """Split ``records`` into known / new failures, fixed and changed entries. Entries of
        cases that did not run (another shard, a --cases filter) are left alone."""
        out = BaselineOutcome()
        for r in records:
            e = self.entries.get(r["id"])
            bad = r["verdict"] in BAD
            if e is None:
                if bad:
                    out.new.append(r)
            elif not bad:
                out.fixed.append((r, e))
            else:
                out.known.append((r, e))
                if r["verdict"] != e.verdict:
                    out.changed.append((r, e))
        return out


def baseline_json(records: Sequence[dict], backend: str,
                  old: Baseline | None = None) -> dict:
    """The baseline of ``records``' failures; a reason is kept from ``old`` where it lists the
    case, otherwise it is the failure's message (edit it into a reason)."""
    fails = []
    for r in sorted(records, key=lambda r: r["id"]):
        if r["verdict"] not in BAD:
            continue
        prev = old.entries.get(r["id"]) if old is not None else None
        msg = " ".join(str(r.get("message", "")).split())
        reason = prev.reason if prev is not None else \
            (msg[:200] + ("..." if len(msg) > 200 else "")) or r["verdict"]
        fails.append({"case": r["id"], "verdict": r["verdict"], "reason": reason})
    return {"format": BASELINE_FORMAT, "backend": backend, "failures": fails}


def write_baseline(path: str | Path, records: Sequence[dict], backend: str,
                   old: Baseline | None = None) -> int:
    data = baseline_json(records, backend, old)
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
    return len(data["failures"])


# =============================================================================================
# merging shard results
# =============================================================================================
_SAME = ("backend", "seed", "capabilities", "format", "contracts")


@dataclass
class Merged:
    header: dict
    records: list[dict]  # in case-id order
    sources: list[str]
    shards: list[tuple[int, int] | None]


def _read(path: str | Path) -> tuple[dict, dict[str, dict], dict | None]:
    from tilefoundry.conformance.loaders import load_results

    p = Path(path)
    res = load_results(p, error=CampaignError)  # one line naming the file, line and fix
    if res.header is None:
        raise CampaignError(f"{p}: no run header; it was not written by the conformance "
                            f"runner")
    return res.header, res.records, res.summary


def merge_results(paths: Sequence[str | Path]) -> Merged:
    """The union of the results of ``paths`` (see the module docstring); a CampaignError when
    they are not parts of one campaign."""
    if not paths:
        raise CampaignError("merge: no results files given")
    first: dict | None = None
    read: list[tuple[str | Path, dict[str, dict]]] = []
    shards: list[tuple[int, int] | None] = []
    for p in paths:
        header, recs, summary = _read(p)
        if first is None:
            first = header
        else:
            for k in _SAME:
                if header.get(k) != first.get(k):
                    raise CampaignError(
                        f"merge: {p} is another run than {paths[0]}: its {k} is "
                        f"{header.get(k)!r}, not {first.get(k)!r}")
        sh = header.get("shard") or (summary or {}).get("shard")
        shards.append(tuple(sh) if sh else None)
        read.append((p, recs))
    given = [s for s in shards if s is not None]
    if given:
        ns = {n for _, n in given}
        if len(ns) > 1 or len(given) != len(shards):
            raise CampaignError(f"merge: the files are shards of different splits "
                                f"({sorted({f'{i}/{n}' for i, n in given})}"
                                f"{' and unsharded files' if len(given) != len(shards) else ''})")
        n = ns.pop()
        have = sorted(i for i, _ in given)
        missing = [i for i in range(1, n + 1) if i not in have]
        twice = sorted({i for i in have if have.count(i) > 1})
        if twice:
            raise CampaignError(f"merge: shard(s) {[f'{i}/{n}' for i in twice]} given twice")
        if missing:
            raise CampaignError(f"merge: shard(s) {[f'{i}/{n}' for i in missing]} missing; "
                                f"the merged report would lack their cases")
    seen: dict[str, str] = {}
    records: dict[str, dict] = {}
    for p, recs in read:
        for cid, r in recs.items():
            if cid in seen:
                raise CampaignError(f"merge: case {cid!r} is in both {seen[cid]} and {p}; the "
                                    f"files overlap (the same run twice?)")
            seen[cid] = str(p)
            records[cid] = r
    assert first is not None
    header = {k: v for k, v in first.items() if k != "shard"}
    return Merged(header, [records[c] for c in sorted(records)], [str(p) for p in paths],
                  shards)


def write_merged(path: str | Path, merged: Merged, summary: dict) -> None:
    with open(path, "w") as f:
        f.write(json.dumps({**merged.header, "merged_from": merged.sources}) + "\n")
        for r in merged.records:
            f.write(json.dumps(r) + "\n")
        f.write(json.dumps(summary) + "\n")


# =============================================================================================
# diff
# =============================================================================================
@dataclass
class Diff:
    regressed: list[tuple[str, str, str]] = field(default_factory=list)  # id, old, new
    fixed: list[tuple[str, str, str]] = field(default_factory=list)
    changed: list[tuple[str, str, str]] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    same: int = 0

    def lines(self, a: str, b: str, messages: dict[str, str]) -> list[str]:
        out = [f"{len(self.regressed)} regressed, {len(self.fixed)} fixed, "
               f"{len(self.changed)} other change(s), {self.same} unchanged, "
               f"{len(self.only_a)} only in {a}, {len(self.only_b)} only in {b}"]
        for what, rows in (("REGRESSED", self.regressed), ("FIXED", self.fixed),
                           ("CHANGED", self.changed)):
            for cid, old, new in rows:
                msg = messages.get(cid, "")
                out.append(f"{what:9} {cid}: {old} -> {new}" + (f": {msg}" if msg and
                                                                  what == "REGRESSED" else ""))
        out += [f"ONLY-A    {c}" for c in self.only_a] + [f"ONLY-B    {c}" for c in self.only_b]
        return out


def diff_runs(a: dict[str, dict], b: dict[str, dict]) -> Diff:
    """Case-by-case verdict changes from the records ``a`` to ``b`` (by id)."""
    d = Diff()
    for cid in sorted(set(a) | set(b)):
        if cid not in b:
            d.only_a.append(cid)
            continue
        if cid not in a:
            d.only_b.append(cid)
            continue
        old, new = a[cid]["verdict"], b[cid]["verdict"]
        if old == new:
            d.same += 1
        elif new in BAD and old not in BAD:
            d.regressed.append((cid, old, new))
        elif old in BAD and new not in BAD:
            d.fixed.append((cid, old, new))
        else:
            d.changed.append((cid, old, new))
    return d


def read_records(path: str | Path) -> tuple[dict, dict[str, dict]]:
    header, recs, _ = _read(path)
    return header, recs
