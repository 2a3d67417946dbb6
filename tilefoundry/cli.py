"""The ``tilefoundry`` console command."""

from __future__ import annotations

import argparse
import contextlib
import sys

import tilefoundry


def _selfcheck(args: argparse.Namespace) -> int:
    if args.fuzz_ir is not None:
        if args.fuzz_ir < 1:
            print("tilefoundry selfcheck: --fuzz-ir takes a positive number of inputs",
                  file=sys.stderr)
            return 2
        from tilefoundry.conformance.fuzz_ir import run_fuzz

        def progress(r) -> None:
            if args.fuzz_ir >= 1000 and r.inputs % 1000 == 0:
                print(f"  {r.inputs:,} inputs, {r.non_project:,} non-project exceptions, "
                      f"{len(r.hangs)} hangs, {r.seconds:.0f} s", flush=True)

        report = run_fuzz(args.fuzz_ir, args.seed, hang_s=args.hang_s, progress=progress)
        print(report.format())
        return 0 if not report.non_project and not report.hangs else 1
    from tilefoundry.conformance.selfcheck import run_selfcheck

    return run_selfcheck(seed=args.seed, f32_samples=args.f32_samples)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tilefoundry", description=__doc__)
    p.add_argument("--version", action="store_true",
                   help="print the version (with --verbose: the Python, platform and peer "
                        "versions and torch's CPU capability) and exit")
    p.add_argument("--verbose", action="store_true", help="with --version: every version")
    sub = p.add_subparsers(dest="command")
    sc = sub.add_parser("selfcheck", help="run the numerics sweeps and print their summary",
                        description="Run the numerics sweeps (every conversion against the "
                                    "exact model) and print their summary.",
                        epilog="example: tilefoundry selfcheck --f32-samples 20000")
    sc.add_argument("--seed", type=int, default=0, help="seed of the random f32 samples")
    sc.add_argument("--f32-samples", type=int, default=200_000,
                    help="random f32 sources per conversion checked against the exact model")
    sc.add_argument("--fuzz-ir", type=int, metavar="N", default=None,
                    help="instead of the sweeps: the malformed-input fuzz over N inputs (mutated "
                         "generated programs, bypassed frozen fields, mutated / garbage DSL "
                         "source, garbage API arguments); exit 1 when a call raised anything "
                         "but the project's errors or ran past --hang-s")
    sc.add_argument("--hang-s", type=float, default=10.0,
                    help="with --fuzz-ir: seconds one call may take before it counts as a hang")
    sc.set_defaults(func=_selfcheck)
    from tilefoundry.smt.cli import add_parser as add_prove

    add_prove(sub)
    from tilefoundry.conformance.cli import add_parser as add_conformance

    add_conformance(sub)
    from tilefoundry.compiler.cli import add_parser as add_compile

    add_compile(sub)
    from tilefoundry.validate.cli import add_parser as add_validate

    add_validate(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(f"tilefoundry {tilefoundry.__version__}")
        if args.verbose:
            from tilefoundry.versions import format_environment

            print(format_environment())
        return 0
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # the reader went away (`tilefoundry ... | head`): stop quietly, as Unix tools do;
        # stdout is pointed at devnull so the interpreter's final flush cannot raise again
        import os

        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE
    except OSError as e:
        # an output nothing above named (stdout on a full disk, > /dev/full): one line, and
        # stdout pointed at devnull so the interpreter's final flush cannot raise again
        import os

        where = f"{e.filename}: " if e.filename else "writing the output: "
        print(f"tilefoundry: error: {where}{e.strerror or e} (errno {e.errno}); free space or "
              f"write it elsewhere", file=sys.stderr)
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
