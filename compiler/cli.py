"""``tilefoundry compile``: run the compiler pipeline on a module and print passes.

    tilefoundry compile tilefoundry.compiler.examples:EXAMPLES rmsnorm \\
        --shape 4x64 --shape 64 --print-after fuse

``SPEC`` is ``package.module:attr`` naming a ``Module`` (or a function returning one); one
``--shape`` per entry parameter (``4x64``; ``scalar`` for rank 0). ``--print-after`` takes a pass
name (repeatable; ``all`` for every pass). Exit status 0, or 2 with one line on stderr when the
program cannot be compiled.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from tilefoundry.errors import TilefoundryError

PROG = "tilefoundry compile"


def add_parser(sub) -> None:
    import tilefoundry.compiler.simd_backend
    import tilefoundry.compiler.triton_backend  # noqa: F401  (triton, triton-cuda; no import of triton)
    from tilefoundry.compiler.pipeline import PASS_NAMES, TARGETS

    p = sub.add_parser("compile", help="compile a module's entry and print passes",
                       description="Compile a module's entry for concrete shapes: typeinfer, "
                                   "elaborate, canonicalize, lower, fuse, render, build.")
    p.add_argument("spec", help="'package.module:attr' naming a Module")
    p.add_argument("entry", help="the entry function")
    p.add_argument("--shape", action="append", default=[], metavar="DIMS",
                   help="one per parameter, e.g. 4x64 ('scalar' for rank 0)")
    p.add_argument("--print-after", action="append", default=[], metavar="PASS",
                   choices=(*PASS_NAMES, "all"), help="print the IR after this pass")
    p.add_argument("--target", default="interp", choices=sorted(TARGETS))
    p.add_argument("--no-fuse", action="store_true", help="skip the fuse pass")
    p.set_defaults(func=_compile)


def _shape(s: str) -> tuple[int, ...]:
    if s in ("scalar", "()", ""):
        return ()
    try:
        return tuple(int(n) for n in s.lower().split("x"))
    except ValueError:
        raise TilefoundryError(f"--shape {s!r}: write extents joined by 'x', e.g. 4x64") \
            from None


def _load(spec: str):
    from tilefoundry.semantics.ir import Module

    mod_name, _, attr = spec.partition(":")
    if not attr:
        raise TilefoundryError(f"{spec!r}: expected 'package.module:attr'")
    try:
        obj = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as e:
        raise TilefoundryError(f"{spec!r}: {e}") from None
    if callable(obj) and not isinstance(obj, Module):
        obj = obj()
    if not isinstance(obj, Module):
        raise TilefoundryError(f"{spec!r} is a {type(obj).__name__}, not a Module")
    return obj


def _compile(args: argparse.Namespace) -> int:
    from tilefoundry.compiler.pipeline import PASS_NAMES, compile

    shows = set(PASS_NAMES) if "all" in args.print_after else set(args.print_after)
    try:
        c = compile(_load(args.spec), args.entry, [_shape(s) for s in args.shape],
                    args.target, print_after=shows, stream=sys.stdout, fuse=not args.no_fuse)
    except TilefoundryError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    if not shows:
        print(f"{args.entry}: {len(c.kernels)} kernel(s) for target {c.target}: "
              f"{', '.join(k.name for k in c.kernels)}")
    return 0
