"""The case model of the conformance catalog.

A ``Case`` is a named, deterministic recipe: ``build()`` returns ``(module, entry, inputs)``; the
same case id always builds the same program and the same input bits (seeds are explicit, part of
the id where they matter). Cases are reconstructed inside worker processes from
``(catalog spec, case id)``, so builders must be pure functions of what the catalog knows.

Fields used by reports: ``family`` (op family for the summary table), ``ops`` and ``dtypes``
(the op × dtype coverage matrix), ``spec`` (the spec sentence a spec-derived case cites),
``tier`` (``quick`` ⊂ ``full``; ``fuzz`` cases are generated on demand).

``expect_error`` names a run-time check (a key of ``tilefoundry.errors.RUN_TIME_CHECKS``) that
the case's inputs fail: the program has no result there, the reference raises
``RunTimeCheckError`` of that check, and a backend passes only by raising it too (the protocol,
``backend.py``). The runner verifies the reference side: an expected-error case whose reference
returns values, or fails another check, is a ``harness:`` ERROR — an error of the catalog.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tilefoundry.errors import RUN_TIME_CHECKS, InvalidArgumentError, bad_choice

__all__ = ["TIERS", "VERDICTS", "Case", "Catalog"]

#: ADMITTED: rejected by the strict contracts, admitted under the relaxations the run declared
#: (``--admit`` / the manifest's [[admit]]): never a strict PASS
VERDICTS = ("PASS", "ADMITTED", "FLAKY", "UNJUDGED", "FAIL", "NOT_SUPPORTED", "XFAIL", "XPASS",
            "CRASH", "TIMEOUT", "ERROR")
TIERS = ("quick", "full")


@dataclass(frozen=True)
class Case:
    id: str
    family: str
    build: Callable[[], tuple[Any, str, list]] = field(repr=False, compare=False)
    ops: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    spec: str = ""
    tier: str = "quick"
    expect_error: str | None = None  # a RUN_TIME_CHECKS name: the inputs fail that check

    def __post_init__(self):
        if self.tier not in TIERS:
            raise InvalidArgumentError(f"Case {self.id}: tier must be one of {TIERS}, got "
                                       f"{self.tier!r}")
        if self.expect_error is not None and self.expect_error not in RUN_TIME_CHECKS:
            raise InvalidArgumentError(bad_choice(f"Case {self.id}: expect_error",
                                                  self.expect_error, [*RUN_TIME_CHECKS, None]))


class Catalog:
    """An ordered, id-unique collection of cases."""

    def __init__(self, cases: Iterable[Case] = ()):
        self._cases: dict[str, Case] = {}
        for c in cases:
            self.add(c)

    def add(self, case: Case) -> None:
        if case.id in self._cases:
            raise InvalidArgumentError(f"Catalog: duplicate case id {case.id!r}")
        self._cases[case.id] = case

    def __iter__(self):
        return iter(self._cases.values())

    def __len__(self) -> int:
        return len(self._cases)

    def __getitem__(self, case_id: str) -> Case:
        try:
            return self._cases[case_id]
        except KeyError:
            raise InvalidArgumentError(f"Catalog: no case {case_id!r}") from None

    def tier(self, tier: str) -> list[Case]:
        if tier not in TIERS:
            raise InvalidArgumentError(f"tier must be one of {TIERS}, got {tier!r}")
        return [c for c in self if tier == "full" or c.tier == "quick"]
