"""``tilefoundry validate SPEC ENTRY``: translation validation of the compiler's passes."""

from __future__ import annotations

import argparse
import sys

from tilefoundry.errors import InvalidArgumentError, TilefoundryError

PROG = "tilefoundry validate"


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help="prove each compiler pass a refinement on bounded shapes",
                       description="Translation validation (docs/validate.md): for each pass of "
                                   "the pipeline, prove with Z3 that its output refines its "
                                   "input on all inputs of the bounded shapes. Outcomes: valid, "
                                   "invalid (with a counterexample), failed to prove, "
                                   "unsupported (with the reason).",
                       epilog="example: tilefoundry validate "
                              "tilefoundry.compiler.examples:EXAMPLES axpby_chain --shape 5 "
                              "--shape 5")
    p.add_argument("spec", help="'package.module:attr' or 'path/to/file.py:attr' naming a Module")
    p.add_argument("entry", help="the entry function")
    p.add_argument("--shape", action="append", default=[], metavar="DIMS",
                   help="one per parameter (4x3; 'scalar'); default: every DimVar at --max-dim")
    p.add_argument("--max-dim", type=int, default=4, help="DimVar extent bound (default 4)")
    p.add_argument("--max-elems", type=int, default=16,
                   help="elements per input tensor (default 16)")
    p.add_argument("--max-elems-lanewise", type=int, default=64,
                   help="elements per input tensor of a program that combines no lanes (no "
                        "reduction, dot or loop; default 64)")
    p.add_argument("--timeout-ms", type=int, default=10_000,
                   help="Z3 timeout per output element query (default 10000)")
    p.add_argument("--plant", metavar="BUG", default=None,
                   help="validate a fuse pass carrying a planted bug (validate/planted.py)")
    p.add_argument("--repro-dir", default=None,
                   help="write an invalid pass's counterexample as a conformance reproducer here")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--ci", action="store_true",
                   help="exit 1 on 'failed to prove' as well as on 'invalid'")
    p.set_defaults(func=_validate)


def _validate(args: argparse.Namespace) -> int:
    from tilefoundry.compiler.cli import load_module, parse_shape
    from tilefoundry.validate.passes import Bounds, validate_program

    try:
        module = load_module(args.spec)
        shapes = [parse_shape(s) for s in args.shape] or None
        bounds = Bounds(args.max_dim, args.max_elems, args.timeout_ms, args.max_elems_lanewise)
        fz = None
        if args.plant is not None:
            from tilefoundry.compiler.fusion import fuse
            from tilefoundry.validate.planted import MESH_PLANTED, PLANTED, plant

            if args.plant in MESH_PLANTED:
                raise InvalidArgumentError(
                    f"--plant {args.plant}: a mesh bug mutates a compiled sharded program's "
                    f"MeshProgram, which this command does not rewrite (--plant replaces the "
                    f"fuse pass); measure it with benchmarks/bench_planted.py or run it with "
                    f"conformance --backend tilefoundry.validate.planted:{args.plant}, or "
                    f"choose a fuse bug: {', '.join(PLANTED)}")
            if args.plant not in PLANTED:
                plant(args.plant, None)  # the project's error naming the choices
            fz = lambda p, cfg: plant(args.plant, fuse(p, cfg)) or fuse(p, cfg)  # noqa: E731
        rep = validate_program(module, args.entry, shapes, bounds=bounds, fuse_pass=fz)
        print(rep.to_json() if args.json else rep.text())
        if args.repro_dir and rep.invalid:
            from tilefoundry.validate.repro import write_validation_reproducer

            path = write_validation_reproducer(args.repro_dir, module, args.entry, rep)
            print(f"reproducer: {path}", file=sys.stderr)
    except TilefoundryError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    return rep.exit_code(args.ci)
