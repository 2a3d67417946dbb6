"""Reproducers for the non-PASS verdicts that have no backend output: ERROR, CRASH and TIMEOUT
(issue 33, Deliver 5). A FAIL's reproducer is written in the worker, next to the outputs it
judged; these are written by the driver once the case's verdict is final (a CRASH or TIMEOUT
has no worker left to write one): the case is built again from the catalog — the same program
and inputs, the seed fixes them — and written in the same format with no recorded outputs, so
``python repro.py --backend SPEC`` re-runs the backend on it (its exception, crash or hang is
the reproduction) and ``--recorded`` says there is nothing recorded to judge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["NONPASS_REPRO", "NonPassVerdict", "write_nonpass_reproducer"]

#: the verdicts whose reproducer the driver writes
NONPASS_REPRO = ("ERROR", "CRASH", "TIMEOUT")


class NonPassVerdict:
    """What ``report.write_reproducer`` reads of a verdict, for a case the oracle never judged
    (the backend raised, crashed or hung): the status, the runner's message, no outputs."""

    def __init__(self, status: str, message: str):
        from tilefoundry.oracle.compare import CONTRACTS_VERSION

        self.status, self.message = status, message
        self.reference = None
        self.outputs: list = []
        self.contracts_version = CONTRACTS_VERSION

    def summary(self) -> str:
        return f"{self.status}: {self.message}"


def write_nonpass_reproducer(path: str | Path, case: Any, seed: int, backend: str,
                             catalog: str | None, record: dict) -> None:
    """Write the reproducer of ``case``'s ERROR / CRASH / TIMEOUT ``record`` into ``path``."""
    from tilefoundry.conformance.report import write_reproducer

    module, entry, inputs = case.build()
    write_reproducer(path, case_id=case.id, family=case.family, seed=seed, backend=backend,
                     module=module, entry=entry, inputs=list(inputs),
                     verdict=NonPassVerdict(record["verdict"], record.get("message", "")),
                     observed=(), catalog=catalog)
