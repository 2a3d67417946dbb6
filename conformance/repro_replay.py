"""What a reproducer's ``repro.py`` does (``rerun``): load the case from its directory (data
only: ``report.load_reproducer``), re-run the backend named on the command line — never the one
case.json records — or judge the recorded outputs, and print the verdict.

Every way it cannot start is one line on stderr and exit 2 (issue 33, Deliver 5): no backend
named (with the command to type), a backend name that names nothing (with the closest
built-in), a backend that cannot be imported from here (with how to make it importable: the
directory the run was started in, when it holds the module), a reproducer that cannot be
loaded. A backend that raises on the case (an ERROR reproducer) prints its traceback — that is
the reproduction — and exits 1, as a FAIL does.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import sys
import traceback
from pathlib import Path

import numpy as np

from tilefoundry.errors import TilefoundryError

__all__ = ["rerun"]

#: a backend spec case.json may show in the command to type (never loaded from there)
_PLAIN_SPEC = re.compile(r"[\w./@+:-]+", re.ASCII)

#: verdicts whose reproducer has no recorded outputs (the backend returned none)
NO_OUTPUTS = ("ERROR", "CRASH", "TIMEOUT")


def _names_code_inside(d: Path, spec: str) -> bool:
    """Whether ``spec`` names a file or module inside the reproducer directory ``d``, from
    wherever it may be typed (the current directory, ``d`` or a folder above it)."""
    from tilefoundry.loading import is_file_spec

    target = spec.rpartition(":")[0]
    if not target:  # a built-in name or an entry point: installed code
        return False
    root = d.resolve()
    rels = [Path(target).expanduser()] if is_file_spec(target) else \
        [Path(*target.split(".")[:k]) for k in range(1, target.count(".") + 2)]
    for base in dict.fromkeys([Path.cwd(), root, *root.parents]):
        for rel in rels:
            for c in (base / rel, (base / rel).with_name(rel.name + ".py")):
                with contextlib.suppress(OSError, RuntimeError, ValueError):
                    r = c.resolve()
                    if c.exists() and (r == root or root in r.parents):
                        return True
    return False


def _meta(d: Path) -> dict:
    """case.json as a dict, read defensively (a regular file of a sane size only: a FIFO would
    hang the refusal); {} when it cannot be read."""
    from tilefoundry.conformance.loaders import load_json

    try:
        meta = load_json(d / "case.json", what="case.json", kind="reproducer")
    except TilefoundryError:
        return {}
    return meta if isinstance(meta, dict) else {}


def _no_backend_named(d: Path) -> str:
    """The one-line refusal of a replay that names no backend, with the command to type: the
    backend case.json records when it is a plain spec naming nothing inside the directory,
    ``SPEC`` otherwise."""
    recorded = _meta(d).get("backend")
    shown = isinstance(recorded, str) and _PLAIN_SPEC.fullmatch(recorded) is not None and \
        not _names_code_inside(d, recorded)
    spec = shlex.quote(recorded) if shown else "SPEC"
    return (f"no backend named: type it, e.g. python {shlex.quote(str(d / 'repro.py'))} "
            f"--backend {spec}" + (" (the backend case.json records)" if shown else "")
            + ", or add --recorded to judge the recorded outputs; a reproducer never chooses "
              "the code it runs")


def _importable_hint(d: Path, spec: str) -> str:
    """How to make the module of ``spec`` importable: the directory the run started in (from
    case.json, shown only when it holds that module and lies outside the reproducer), or the
    general ways."""
    from tilefoundry.loading import is_file_spec

    target = spec.rpartition(":")[0]
    if not target or is_file_spec(target):
        return "; give the backend's file by a path that exists from here"
    top = target.split(".")[0]
    run_dir = _meta(d).get("run_dir")
    general = (f"; make {top!r} importable: run repro.py from the directory that holds it, add "
               f"that directory to PYTHONPATH, or pip install it")
    if not isinstance(run_dir, str) or _PLAIN_SPEC.fullmatch(run_dir) is None:
        return general
    base = Path(run_dir)
    with contextlib.suppress(OSError, RuntimeError, ValueError):
        root = d.resolve()
        held = (base / f"{top}.py").is_file() or (base / top / "__init__.py").is_file()
        if held and not (base.resolve() == root or root in base.resolve().parents):
            return (f"; the run was started in {run_dir}, which holds it: PYTHONPATH="
                    f"{shlex.quote(run_dir)} python {shlex.quote(str(d / 'repro.py'))} "
                    f"--backend {shlex.quote(spec)}")
    return general


def _load(d: Path, spec: str):
    """The candidate callable of ``spec``, or a one-line reason it cannot be loaded."""
    from tilefoundry.conformance.repro import load_candidate

    try:
        return load_candidate(spec), None
    except TilefoundryError as e:
        hint = _importable_hint(d, spec) if "cannot import" in str(e) or \
            "no such file" in str(e) else ""
        return None, f"{e}{hint}"
    except Exception as e:  # the factory's own failure
        return None, f"--backend {spec!r}: loading it raised {type(e).__name__}: {e}"


def rerun(directory: str | Path, argv: list[str] | None = None) -> int:
    """``repro.py``'s logic: re-run the backend named by ``--backend`` (or judge the recorded
    outputs) and print the verdict; 0 PASS, 1 FAIL / ERROR (a backend raising on the case), 2
    when the reproducer cannot be loaded or the backend cannot be named or loaded. The backend
    comes only from ``argv``: case.json's is shown in the refusal, never loaded (a reproducer
    is data)."""
    import argparse

    from tilefoundry.conformance.report import ReproducerError, _load_arrays, load_reproducer

    d = Path(directory)
    ap = argparse.ArgumentParser(prog="repro.py", description="re-run a conformance case")
    ap.add_argument("--backend", help="the backend to re-run (required unless --recorded; "
                                      "case.json's is never used)")
    ap.add_argument("--recorded", action="store_true",
                    help="judge the recorded observed outputs; run no backend")
    ap.add_argument("--catalog", help="the catalog a case id belongs to (default: built in)")
    args = ap.parse_args(argv)
    if args.backend is None and not args.recorded:  # never case.json's: the folder is data
        print(f"repro.py: {_no_backend_named(d)}", file=sys.stderr)
        return 2
    from tilefoundry.oracle.compare import check

    try:
        module, entry, inputs, meta = load_reproducer(d, args.catalog)
    except (ReproducerError, TilefoundryError) as e:
        print(f"repro.py: {e}", file=sys.stderr)
        return 2
    status = meta.get("status")
    if args.recorded:
        if status in NO_OUTPUTS:
            print(f"repro.py: case {meta['id']} was {status} ({meta.get('summary', '')}); it "
                  f"has no recorded outputs to judge: re-run the backend with --backend SPEC",
                  file=sys.stderr)
            return 2
        try:
            observed = tuple(_load_arrays(d, "observed", meta.get("observed") or []))
        except TilefoundryError as e:
            print(f"repro.py: {e}", file=sys.stderr)
            return 2
        observed = observed[0] if len(observed) == 1 and not meta.get("tuple_result") \
            else observed
    else:
        run, why = _load(d, args.backend)
        if run is None:
            print(f"repro.py: {why}", file=sys.stderr)
            return 2
        if status in NO_OUTPUTS:
            print(f"case {meta['id']} was {status} on {meta.get('backend') or 'its backend'}: "
                  f"{meta.get('summary', '')}; re-running {args.backend} ...", flush=True)
        try:
            observed = run(module, entry, [np.array(x, copy=True)
                                           if isinstance(x, np.ndarray) else x for x in inputs])
        except Exception as e:  # the backend's own error: its traceback is the reproduction
            traceback.print_exc()
            print(f"case {meta['id']} on {args.backend}:\nERROR: the backend raised "
                  f"{type(e).__name__}: {e}")
            return 1
    verdict = check(module, entry, inputs, observed)
    print(f"case {meta['id']} on {'the recorded outputs' if args.recorded else args.backend}:")
    print(verdict.summary())
    return 0 if verdict.status == "PASS" else 1
