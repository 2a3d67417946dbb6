"""A validation counterexample as a conformance reproducer directory (``report
.write_reproducer``'s format): the program, the counterexample's inputs as raw bits, the
miscompiled program's outputs as ``observed``, so ``python repro.py --backend SPEC`` and the
``conformance`` replay tools read it as they read a runtime failure's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tilefoundry.errors import InvalidArgumentError

__all__ = ["write_validation_reproducer"]


def write_validation_reproducer(path: str | Path, module: Any, entry: str, report: Any,
                                backend: str = "kernel-interp") -> Path:
    """Write the first invalid pass's counterexample of ``report`` into ``path``."""
    from tilefoundry.conformance.report import write_reproducer
    from tilefoundry.conformance.repro_nonpass import NonPassVerdict

    bad = next((p for p in report.passes if p.outcome.status == "invalid"), None)
    if bad is None or bad.outcome.counterexample is None:
        raise InvalidArgumentError(f"validate @{entry}: no invalid pass, so no counterexample "
                                   f"to write; nothing was written to {path}")
    cx = bad.outcome.counterexample
    if cx.entry_inputs is not None:  # the entry's own inputs (a sharded program's Sharded)
        inputs = list(cx.entry_inputs)
    elif report.sharded:
        raise InvalidArgumentError(f"validate @{entry}: the invalid pass {bad.name} is one "
                                   f"launch's kernel IR of a sharded program; its "
                                   f"counterexample is in that launch's inputs, not the "
                                   f"entry's, so no reproducer was written to {path} (the "
                                   f"text above shows it)")
    else:
        src, _tgt = report.programs[bad.name]
        if len(src.inputs) != len(report.shapes):
            raise InvalidArgumentError(f"validate @{entry}: the kernel-IR inputs "
                                       f"({len(src.inputs)}) do not match the entry's "
                                       f"parameters ({len(report.shapes)}); no reproducer "
                                       f"written")
        inputs = list(cx.inputs.values())
    msg = (f"translation validation: pass {bad.name} is invalid at shapes "
           f"{[list(s) for s in report.shapes]}; differing: {', '.join(cx.differing)}")
    return write_reproducer(path, case_id=f"validate/{entry}/{bad.name}", family="validate",
                            seed=0, backend=backend, module=module, entry=entry,
                            inputs=inputs,
                            verdict=NonPassVerdict("FAIL", msg),
                            observed=tuple(cx.tgt.values()) if len(cx.tgt) > 1
                            else next(iter(cx.tgt.values())))
