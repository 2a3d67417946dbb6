"""The reproducer writer: a self-contained directory per failure.

One writer serves the oracle's users and the conformance runner (``conformance.report.write_reproducer``
holds the format): the program (its text ``program.txt`` and the DSL source ``program_dsl.py``
when the DSL spells it exactly; a catalog case is otherwise rebuilt by id), the inputs as raw bits (``input_<i>.npy``, an
unsigned view: ``.npy`` has no bf16 / fp8 types) and in hex (``inputs.hex.txt``), the expected and
observed outputs (``expected_<i>.npy`` / ``observed_<i>.npy``), the verdict (``verdict.txt``:
contract, mismatches, worst element in hex and decimal), ``case.json`` and a standalone
``repro.py``::

    python repro.py --backend SPEC     # or --recorded: judge the recorded outputs

re-runs the comparison with only tilefoundry and the candidate installed (exit 1 on FAIL /
ERROR). Nothing in a reproducer is a pickle or runs when it is opened: the program is DSL source
read by the DSL parser, the inputs raw bits, and ``repro.py`` is the same fixed file for every
case. ``SPEC`` names a backend (a built-in name, ``package.module:factory``) or a candidate
callable ``package.module:function`` taking ``(module, entry, inputs)``; it comes only from the
command line (case.json's is shown in the refusal, never loaded).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tilefoundry.semantics.ir import Module

__all__ = ["load_candidate", "load_repro", "rerun", "write_repro"]


def write_repro(directory: str | Path, module: Module, entry: str, inputs: Sequence[Any],
                verdict: Any, *, candidate: str | None = None, observed: Any = None,
                case_id: str | None = None) -> Path:
    """Write the reproducer directory (see the module docstring); returns its path."""
    from tilefoundry.conformance.report import write_reproducer

    return write_reproducer(directory, case_id=case_id or f"oracle/{entry}", family="oracle",
                            seed=0, backend=candidate or "", module=module, entry=entry,
                            inputs=list(inputs), verdict=verdict, observed=observed)


def load_repro(directory: str | Path, catalog: str | None = None
               ) -> tuple[Module, str, list, dict]:
    """(module, entry, inputs, case metadata) of a reproducer directory; nothing in it is
    executed or unpickled (``conformance.report.load_reproducer``)."""
    from tilefoundry.conformance.report import load_reproducer

    return load_reproducer(directory, catalog)


def load_candidate(spec: str):
    """A backend (built-in name, ``package.module:factory``, entry point) or a candidate
    callable (``package.module:function`` of ``(module, entry, inputs)``), as a callable
    ``(module, entry, inputs) -> outputs``."""
    from tilefoundry.conformance.backend import load_backend

    if ":" in spec:
        from tilefoundry.loading import load_object

        obj = load_object(spec, "candidate")
        if not isinstance(obj, type) and callable(obj) and _arity(obj) == 3:
            return obj
    from tilefoundry.conformance.protocol import compile_for

    backend = load_backend(spec)
    return lambda m, e, xs: backend.run(compile_for(backend, m, e, xs), xs)


def _arity(obj: Any) -> int:
    import inspect

    try:
        return len(inspect.signature(obj).parameters)
    except (TypeError, ValueError):
        return -1


def rerun(directory: str | Path, candidate: str | None = None, *,
          recorded: bool = False) -> int:
    """``repro.py``'s logic in-process (the library's, not the directory's file); returns its
    exit status. ``candidate`` is the backend to re-run (never the directory's case.json: with
    neither it nor ``recorded`` the replay is refused, exit 2); ``recorded`` judges the recorded
    outputs."""
    from tilefoundry.conformance.report import rerun_reproducer

    args = ([] if candidate is None else ["--backend", candidate]) + \
        (["--recorded"] if recorded else [])
    return int(rerun_reproducer(directory, args))


