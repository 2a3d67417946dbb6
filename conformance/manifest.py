"""Conformance manifests: expected failures, skips and tolerance overrides, each with a reason.

A manifest is a TOML file (read with ``tomllib``)::

    [[xfail]]
    case = "cast/f32->bf16/*"        # a case id or an fnmatch glob
    reason = "rounds by truncation (tracker #12)"
    verdict = ["FAIL"]               # optional: the failure verdicts expected (default: any of
                                     # FAIL / ERROR / CRASH / TIMEOUT)

    [[skip]]
    case = "matmul/*"
    reason = "not wired up yet"

    [[tolerance]]
    case = "exp/*"
    reason = "uses the hardware exp2 approximation"
    ulp = 2                          # a non-negative integer

* **xfail** — a case matching it whose verdict is one of the expected failure verdicts is
  recorded ``XFAIL`` (the original verdict and message are kept); one that passes is ``XPASS``
  (an unexpected pass is reported and makes the run fail, so stale entries get removed); a
  NOT_SUPPORTED case stays NOT_SUPPORTED; a failure of another kind than ``verdict`` names keeps
  its own verdict.
* **skip** — the case is not run: it is recorded ``NOT_SUPPORTED`` with the message
  ``skipped by manifest: <reason>`` (there is no SKIP verdict; a skip is a declared
  non-support).
* **admit** — conformance levels (docs/contracts.md): ``relaxations = ["nsz", "afn@Silu"]``
  declares relaxations for the matching cases. A case the strict contracts reject and those
  relaxations admit is recorded ``ADMITTED`` (never ``PASS``), with the set in ``admitted``.
  ``--admit`` on the command line adds a set for every case. An unknown name, or one scoped to
  an op it cannot apply to, is an error naming the valid ones.
* **tolerance** — the contracts are exact (bits, admitted sets); an override is an explicit,
  visible widening: an output the oracle judged FAIL is accepted when it is a float output and
  every element lies within ``ulp`` units in the last place of the reference's value on the
  format's ordered line (NaN matches only NaN; ``-0`` and ``+0`` are one point). Integer and
  bool outputs are never widened; ERROR stays ERROR. The case is then ``PASS`` with the
  record's ``tolerance`` field set and the message naming the override and the worst distance.

Every entry needs ``case`` and a non-empty ``reason``; unknown tables or keys are errors. The
first matching entry of each table applies.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilefoundry.errors import TilefoundryError

__all__ = ["FAILURE_VERDICTS", "Manifest", "ManifestEntry", "ManifestError"]

FAILURE_VERDICTS = ("FAIL", "ERROR", "CRASH", "TIMEOUT")
_KEYS = {
    "xfail": {"case", "reason", "verdict"},
    "skip": {"case", "reason"},
    "tolerance": {"case", "reason", "ulp"},
    "admit": {"case", "reason", "relaxations"},
}


class ManifestError(TilefoundryError):
    """A manifest that cannot be used (bad TOML, unknown keys, missing reason, ...)."""


@dataclass(frozen=True)
class ManifestEntry:
    kind: str  # xfail / skip / tolerance
    case: str
    reason: str
    verdicts: tuple[str, ...] = FAILURE_VERDICTS  # xfail only
    ulp: int = 0  # tolerance only
    admit: Any = None  # admit only: an oracle.relax.Admit

    def matches(self, case_id: str) -> bool:
        return case_id == self.case or fnmatch.fnmatchcase(case_id, self.case)


@dataclass
class Manifest:
    xfail: list[ManifestEntry] = field(default_factory=list)
    skip: list[ManifestEntry] = field(default_factory=list)
    tolerance: list[ManifestEntry] = field(default_factory=list)
    admit: list[ManifestEntry] = field(default_factory=list)
    source: str = "<manifest>"
    #: a set declared for every case (``--admit``)
    admit_all: Any = None

    # -----------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> Manifest:
        from tilefoundry.conformance.loaders import read_text_file

        p = Path(path)
        text = read_text_file(p, what=f"manifest {p}", kind="manifest", error=ManifestError)
        return cls.parse(text, source=str(p))

    @classmethod
    def parse(cls, text: str, source: str = "<manifest>") -> Manifest:
        from tilefoundry.conformance.loaders import parse_toml

        if not isinstance(text, str):
            raise ManifestError(f"manifest {source}: Manifest.parse takes the TOML text (a "
                                f"str), got {type(text).__name__}; Manifest.load reads a file")

        data = parse_toml(text, f"manifest {source}", ManifestError,
                          fix="see docs/conformance.md, the manifest")
        m = cls(source=source)
        for table, entries in data.items():
            if table not in _KEYS:
                raise ManifestError(f"manifest {source}: unknown table {table!r} (allowed: "
                                    f"[[xfail]], [[skip]], [[tolerance]], [[admit]])")
            if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                raise ManifestError(f"manifest {source}: {table!r} must be an array of tables "
                                    f"([[{table}]])")
            for n, e in enumerate(entries, 1):
                getattr(m, table).append(_entry(table, n, e, source))
        return m

    # -----------------------------------------------------------------------------------------
    def entries(self) -> list[ManifestEntry]:
        return [*self.xfail, *self.skip, *self.tolerance, *self.admit]

    @staticmethod
    def _first(entries: list[ManifestEntry], case_id: str) -> ManifestEntry | None:
        return next((e for e in entries if e.matches(case_id)), None)

    def skip_for(self, case_id: str) -> ManifestEntry | None:
        return self._first(self.skip, case_id)

    def xfail_for(self, case_id: str) -> ManifestEntry | None:
        return self._first(self.xfail, case_id)

    def tolerance_for(self, case_id: str) -> ManifestEntry | None:
        return self._first(self.tolerance, case_id)

    def admit_for(self, case_id: str) -> Any:
        """The relaxations declared for ``case_id`` (every matching [[admit]] entry and
        ``--admit``), an ``oracle.relax.Admit``, or None."""
        out = self.admit_all
        for e in self.admit:
            if e.matches(case_id):
                out = e.admit if out is None else out.merged(e.admit)
        return out

    def unused(self, case_ids: list[str]) -> list[ManifestEntry]:
        """Entries that match none of ``case_ids`` (reported as a warning: stale entries)."""
        return [e for e in self.entries() if not any(e.matches(c) for c in case_ids)]


#: the longest ``case`` glob of an entry (a case id is far shorter)
MAX_GLOB = 512


def _entry(table: str, n: int, e: dict, source: str) -> ManifestEntry:
    where = f"manifest {source}: [[{table}]] entry {n}"
    unknown = sorted(set(e) - _KEYS[table])
    if unknown:
        raise ManifestError(f"{where}: unknown key(s) {unknown} (allowed: "
                            f"{sorted(_KEYS[table])})")
    case = e.get("case")
    if not isinstance(case, str) or not case:
        raise ManifestError(f"{where}: 'case' (a case id or glob) is required")
    if len(case) > MAX_GLOB:  # fnmatch's translation grows past linear in the brackets
        raise ManifestError(f"{where}: 'case' is {len(case):,} characters, more than "
                            f"{MAX_GLOB}; a case id or glob is shorter (split the entry)")
    reason = e.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise ManifestError(f"{where} ({case!r}): a non-empty 'reason' is required")
    if table == "xfail":
        v = e.get("verdict", list(FAILURE_VERDICTS))
        vs = [v] if isinstance(v, str) else v
        if not isinstance(vs, list) or not vs or any(x not in FAILURE_VERDICTS for x in vs):
            raise ManifestError(f"{where} ({case!r}): 'verdict' must be one of / a list of "
                                f"{list(FAILURE_VERDICTS)}, got {v!r}")
        return ManifestEntry("xfail", case, reason.strip(), verdicts=tuple(vs))
    if table == "tolerance":
        ulp = e.get("ulp")
        if isinstance(ulp, bool) or not isinstance(ulp, int) or ulp < 0:
            raise ManifestError(f"{where} ({case!r}): 'ulp' (a non-negative integer) is "
                                f"required, got {ulp!r}")
        return ManifestEntry("tolerance", case, reason.strip(), ulp=ulp)
    if table == "admit":
        from tilefoundry.errors import InvalidArgumentError
        from tilefoundry.oracle.relax import NAMES, parse_admit

        names = e.get("relaxations")
        if not isinstance(names, list) or not names or \
                not all(isinstance(x, str) for x in names):
            raise ManifestError(f"{where} ({case!r}): 'relaxations' (a non-empty list of "
                                f"names, e.g. [\"nsz\", \"afn@Silu\"]) is required; valid "
                                f"names: {', '.join(NAMES)}")
        try:
            adm = parse_admit(names, origin=f"{where} ({case!r}): relaxations")
        except InvalidArgumentError as ex:
            raise ManifestError(str(ex)) from None
        return ManifestEntry("admit", case, reason.strip(), admit=adm)
    return ManifestEntry("skip", case, reason.strip())
