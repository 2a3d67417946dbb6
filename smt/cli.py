"""``tilefoundry prove``: run proof obligations, print a table, write JSON / SMT-LIB2."""

from __future__ import annotations

import argparse
import json
import runpy
import sys
from pathlib import Path

from tilefoundry.smt import DEFAULT_RLIMIT, ProveError

# z3 is imported only when `prove` runs (``_framework``): the rest of the command line — the
# conformance runner above all — works on a machine without z3-solver.


def _framework():
    try:
        from tilefoundry.smt import framework
    except ModuleNotFoundError as e:
        if e.name != "z3":
            raise
        raise ProveError("the proofs need the z3-solver package, which is not installed here: "
                         "pip install z3-solver (the conformance runner does not need it)") from None
    return framework


def load_module_file(path: str):
    """The Module ``--module`` names: ``path/to/file.py:attr`` or ``package.module:attr``
    (tilefoundry.loading, as ``--backend`` and ``compile``), or a bare file path: the file's
    Module bound to ``module`` or, when that name holds something else (the DSL's star import
    binds ``module`` to its builder function), its only Module-valued global."""
    from tilefoundry.semantics.ir import Module

    if ":" in path:
        from tilefoundry.errors import TilefoundryError
        from tilefoundry.loading import load_object

        try:
            mod = load_object(path, "--module")
        except TilefoundryError as e:
            raise ProveError(str(e)) from None
        if callable(mod) and not isinstance(mod, Module):
            try:
                mod = mod()
            except Exception as e:
                raise ProveError(f"--module {path}: calling it raised {type(e).__name__}: "
                                 f"{e}") from None
        if not isinstance(mod, Module):
            raise ProveError(f"--module {path}: a {type(mod).__name__}, not a tilefoundry "
                             f"Module")
        _reject_uncallable(path, mod)
        return mod
    p = Path(path)
    if not p.is_file():
        raise ProveError(f"--module {path}: no such file")
    try:
        ns = runpy.run_path(str(p))
    except SyntaxError as e:
        raise ProveError(f"--module {path}: does not parse (line {e.lineno}: {e.msg})") from None
    except Exception as e:  # the file's own code failed: report it, never a traceback
        raise ProveError(f"--module {path}: building the module raised "
                         f"{type(e).__name__}: {e}") from None
    mod = ns.get("module")
    if not isinstance(mod, Module):
        found = [k for k, v in ns.items() if isinstance(v, Module) and not k.startswith("_")]
        if len(found) != 1:
            raise ProveError(f"--module {path}: the file must bind a tilefoundry Module to the "
                             f"name `module` or hold exactly one Module (found "
                             f"{sorted(found) or 'none'}); or name it: --module {path}:NAME")
        mod = ns[found[0]]
    _reject_uncallable(path, mod)
    return mod


def _reject_uncallable(path: str, mod) -> None:
    """A function with no body and no variants (a dispatch prototype that never got one) is
    invalid in a sealed Module; say so with the type rules' own message. Other rules (the
    envelope partition among them) are left to the obligations, which report them."""
    from tilefoundry.semantics.typeinfer.core import TypeInferError
    from tilefoundry.semantics.typeinfer.functions import check_function

    for f in mod.functions:
        if f.body is None and not f.variants:
            try:
                check_function(f)
            except TypeInferError as e:
                raise ProveError(f"--module {path}: {e}") from None


def add_parser(sub) -> None:
    p = sub.add_parser("prove", help="run the Z3 proof obligations",
                       description="Run the Z3 proof obligations and print a table.",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n  tilefoundry prove --list\n"
                              "  tilefoundry prove commutation.Binary --json out.json\n"
                              "  tilefoundry prove --module ./dispatch.py:mod")
    p.add_argument("names", nargs="*", help="obligations to run (default: all)")
    p.add_argument("--json", dest="json_file", help="write the outcomes as JSON to this file")
    p.add_argument("--smt2-dir", help="dump every solver query as SMT-LIB2 into this folder")
    p.add_argument("--module", help="the Module module-level obligations (envelope partitions) "
                   "check: 'path/to/file.py:NAME', 'package.module:NAME', or a file whose "
                   "only Module (or `module`) it is")
    p.add_argument("--rlimit", type=int, default=DEFAULT_RLIMIT,
                   help="Z3 resource limit per query (deterministic; not wall time)")
    p.add_argument("--list", action="store_true", help="list the obligations and exit")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        fw = _framework()
        import tilefoundry.smt.obligations  # noqa: F401

        if args.list:
            for name, ob in fw.REGISTRY.items():
                print(f"{name:40} expect {ob.expect:15} {ob.doc}")
            return 0
        module = load_module_file(args.module) if args.module else None
        results = fw.run_obligations(args.names, rlimit=args.rlimit,
                                  smt2_dir=Path(args.smt2_dir) if args.smt2_dir else None,
                                  module=module)
    except ProveError as e:
        print(f"tilefoundry prove: error: {e}", file=sys.stderr)
        return 2
    bad = 0
    print(f"{'obligation':40} {'outcome':15} {'expected':15} {'queries':>7} {'secs':>7}")
    for ob, out in results:
        flag = fw.unexpected(ob, out)
        bad += flag
        print(f"{ob.name:40} {out.status:15} {ob.expect:15} {out.queries:>7} "
              f"{out.seconds:>7.2f}{'  <-- UNEXPECTED' if flag else ''}")
        if out.detail and (flag or out.status in ("counterexample", "report")
                           or any(s == "report" for _, s in out.sub)):
            for line in out.detail.splitlines():
                print(f"    {line}")
        if out.counterexample:
            for k, v in out.counterexample.items():
                print(f"    {k} = {v}")
    total = sum(o.seconds for _, o in results)
    print(f"{len(results)} obligations, {bad} unexpected, {total:.1f} s")
    if args.json_file:
        try:
            Path(args.json_file).write_text(json.dumps([
                {"name": ob.name, "expect": ob.expect, "outcome": out.status,
                 "detail": out.detail, "counterexample": out.counterexample,
                 "queries": out.queries, "seconds": round(out.seconds, 3), "sub": out.sub}
                for ob, out in results], indent=2))
        except OSError as e:
            print(f"tilefoundry prove: error: --json {args.json_file}: {e.strerror or e}",
                  file=sys.stderr)
            return 2
    return 1 if bad else 0
