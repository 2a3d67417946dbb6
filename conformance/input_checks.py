"""Bad input a new user makes, caught before any case runs, each as one line naming the
offending thing and the fix (issue 33, "Bad input" and Deliver 6):

* a results file that already holds a run, given to ``run --jsonl`` without ``--resume`` or
  ``--overwrite``, or to ``fuzz --jsonl``, ``merge -o``, ``probe --jsonl`` / ``--out`` without
  ``--overwrite`` (``refuse_existing_results``): results are never replaced silently;
* a ``--cases`` glob that matches no case (``check_globs``): the closest case ids and id
  prefixes, and the other tier when the glob matches there;
* a capability set that claims no op or no dtype (``check_claims``): there is no tier to run;
* a ``--backend`` name that is close to a built-in (``closest_names``).
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tilefoundry.errors import TilefoundryError

__all__ = ["check_claims", "check_globs", "closest_names", "count_case_records",
           "refuse_existing_results"]

_WILD = "*?["


def closest_names(got: str, names: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The names of ``names`` closest to ``got`` (difflib), best first."""
    return difflib.get_close_matches(got, sorted(set(names)), n=n, cutoff=cutoff)


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(repr(x) for x in names)


def count_case_records(path: Path) -> int:
    """How many case records a results file holds (lines of ``"type": "case"``; a cheap scan,
    no JSON parse)."""
    n = 0
    with path.open("rb") as f:
        for line in f:
            n += b'"type": "case"' in line
    return n


def refuse_existing_results(path: Path, error: type[TilefoundryError], *, resume: bool = True,
                            flag: str = "--jsonl") -> None:
    """An ``error`` when ``path`` exists and is not empty: a run without ``--resume`` would
    replace what it holds. ``resume=False``: a command that cannot continue a run (``fuzz``,
    ``merge -o``, ``probe``) names only ``--overwrite``; ``flag`` is the option naming it."""
    try:
        size = path.stat().st_size
    except OSError:
        return
    if size == 0:
        return
    n = count_case_records(path)
    held = f"{n:,} case result(s)" if n else "a run header and no case result yet" \
        if path.suffix == ".jsonl" else f"{size:,} byte(s)"
    how = "add --resume to continue that run or --overwrite to replace it" if resume else \
        "add --overwrite to replace it"
    raise error(f"{flag} {path} already holds {held}; {how} (or give another {flag})")


def _suggest(glob: str, ids: Sequence[str]) -> list[str]:
    """The case ids, or id prefixes (as ``prefix/*``), closest to ``glob``: a glob's literal
    head is compared with the ids cut to its depth, anything else with the whole ids."""
    cut = min((glob.index(c) for c in _WILD if c in glob), default=len(glob))
    head = glob[:cut].rstrip("/")
    if cut < len(glob) and head:
        depth = head.count("/") + 1
        heads = {"/".join(c.split("/")[:depth]) for c in ids if c.count("/") >= depth}
        found = [p + "/*" for p in closest_names(head, heads)]
        if found:
            return found
    return closest_names(glob, ids)


def _matches(cid: str, glob: str) -> bool:
    return cid == glob or fnmatch.fnmatchcase(cid, glob)


def check_globs(globs: Sequence[str] | None, selected_ids: Sequence[str],
                all_ids: Sequence[str], tier: str, error: type[TilefoundryError],
                other_tier: tuple[str, Sequence[str]] | None = None) -> None:
    """An ``error`` naming the first ``--cases`` glob that matches none of ``selected_ids``
    (the tier's cases) with the closest ids; when the glob matches cases of ``other_tier``
    (``(name, ids)``), it says so."""
    for g in globs or ():
        if any(_matches(c, g) for c in selected_ids):
            continue
        if other_tier is not None:
            name, ids = other_tier
            n = sum(_matches(c, g) for c in ids)
            if n:
                raise error(f"--cases {g!r} matches no case of tier {tier!r} but {n} of tier "
                            f"{name!r}; add --tier {name}")
        near = _suggest(g, all_ids)
        hint = f" (closest: {_quoted(near)})" if near else \
            " ('tilefoundry conformance list' prints the case ids)"
        raise error(f"--cases {g!r} matches no case of tier {tier!r}{hint}")


def check_claims(caps: Any, spec: str, error: type[TilefoundryError], *,
                 source: str = "capabilities()") -> None:
    """An ``error`` when ``caps`` claims no op or no dtype: no case of any tier can run."""
    if caps.ops is not None and not caps.ops:
        what = "no op"
    elif not caps.dtypes:
        what = "no dtype"
    else:
        return
    raise error(f"backend {spec!r}: {source} claims {what}, so no case of any tier can run; "
                f"claim the ops and dtypes it runs in capabilities() (docs/conformance.md, "
                f"the backend protocol) or derive them: tilefoundry conformance probe "
                f"--backend {spec} --out caps.json")
