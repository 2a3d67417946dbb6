"""The reproducer writer: a self-contained directory per failure.

One writer serves the oracle and the conformance runner (``conformance.report.write_reproducer``
holds the format): the program (``module.pkl``, its text ``program.txt`` and the DSL source
``program_dsl.py`` when the DSL can print it), the inputs as raw bits (``input_<i>.npy``, an
unsigned view: ``.npy`` has no bf16 / fp8 types) and in hex (``inputs.hex.txt``), the expected and
observed outputs (``expected_<i>.npy`` / ``observed_<i>.npy``), the verdict (``verdict.txt``:
contract, mismatches, worst element in hex and decimal), ``case.json`` and a standalone
``repro.py``::

    python repro.py [--backend SPEC] [--recorded]

re-runs the comparison with only tilefoundry and the candidate installed (exit 1 on FAIL /
ERROR). ``SPEC`` names a backend (a built-in name, ``package.module:factory``) or a candidate
callable ``package.module:function`` taking ``(module, entry, inputs)``.
"""

from __future__ import annotations

import importlib
import json
import runpy
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


def _script(directory: str | Path) -> dict:
    return runpy.run_path(str(Path(directory) / "repro.py"), run_name="tilefoundry_repro")


def load_repro(directory: str | Path) -> tuple[Module, str, list, dict]:
    """(module, entry, inputs, case metadata) of a reproducer directory."""
    meta = json.loads((Path(directory) / "case.json").read_text())
    module, entry, inputs = _script(directory)["load"](meta)
    return module, entry, list(inputs), meta


def load_candidate(spec: str):
    """A backend (built-in name, ``package.module:factory``, entry point) or a candidate
    callable (``package.module:function`` of ``(module, entry, inputs)``), as a callable
    ``(module, entry, inputs) -> outputs``."""
    from tilefoundry.conformance.backend import load_backend
    from tilefoundry.errors import InvalidArgumentError

    if ":" in spec:
        mod_name, _, attr = spec.partition(":")
        try:
            obj = getattr(importlib.import_module(mod_name), attr)
        except (ImportError, AttributeError) as e:
            raise InvalidArgumentError(f"candidate {spec!r}: {e}") from None
        if not isinstance(obj, type) and callable(obj) and _arity(obj) == 3:
            return obj
    backend = load_backend(spec)
    return lambda m, e, xs: backend.run(backend.compile(m, e), xs)


def _arity(obj: Any) -> int:
    import inspect

    try:
        return len(inspect.signature(obj).parameters)
    except (TypeError, ValueError):
        return -1


def rerun(directory: str | Path, candidate: str | None = None) -> int:
    """Run the directory's ``repro.py`` logic in-process; returns its exit status."""
    args = [] if candidate is None else ["--backend", candidate]
    return int(_script(directory)["main"](args))


