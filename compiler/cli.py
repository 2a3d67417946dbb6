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
import sys

from tilefoundry.errors import TilefoundryError

PROG = "tilefoundry compile"


def add_parser(sub) -> None:
    import tilefoundry.compiler.simd_backend  # noqa: F401  (registers the simd target)
    from tilefoundry.compiler.pipeline import LAZY_TARGETS, PASS_NAMES, TARGETS

    p = sub.add_parser("compile", help="compile a module's entry and print passes",
                       description="Compile a module's entry for concrete shapes: typeinfer, "
                                   "elaborate, canonicalize, lower, fuse, render, build.",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n"
                              "  tilefoundry compile tilefoundry.compiler.examples:EXAMPLES "
                              "rmsnorm --shape 4x64 --shape 64 --print-after fuse\n"
                              "  tilefoundry compile ./kernels.py:mod f --shape 8 --shape 8 "
                              "--target simd")
    p.add_argument("spec", help="'package.module:attr' or 'path/to/file.py:attr' naming a "
                                "Module (or a function returning one); the current directory "
                                "is importable")
    p.add_argument("entry", help="the entry function")
    p.add_argument("--shape", action="append", default=[], metavar="DIMS",
                   help="one per parameter, e.g. 4x64 ('scalar' for rank 0)")
    p.add_argument("--print-after", action="append", default=[], metavar="PASS",
                   choices=(*PASS_NAMES, "all"), help="print the IR after this pass")
    p.add_argument("--target", default="interp",
                   choices=sorted(set(TARGETS) | set(LAZY_TARGETS)))
    p.add_argument("--no-fuse", action="store_true", help="skip the fuse pass")
    p.add_argument("--launch", action="append", default=[], metavar="KEY=VALUE",
                   help="a launch option of the cuda targets, e.g. fp8_promote=128 (native fp8 "
                        "tensor cores promoted to f32 every 32 / 64 / 128 products: a declared "
                        "trade, D411 / D536) and fp8_kmajor=1 (an fp8 matmul's B copied K-major "
                        "first, which fp8 wgmma needs)")
    p.add_argument("--explain", action="store_true",
                   help="say which mapping each kernel got and why (the triton targets: "
                        "row / elementwise / dot / tile-loop fallback, reductions, access "
                        "widths, launch options and their source; the cuda targets: rows / "
                        "block / lane / instance / mma, threads a block, and why)")
    p.set_defaults(func=_compile)


def parse_shape(s: str) -> tuple[int, ...]:
    if s in ("scalar", "()", ""):
        return ()
    try:
        return tuple(int(n) for n in s.lower().split("x"))
    except ValueError:
        raise TilefoundryError(f"--shape {s!r}: write extents joined by 'x', e.g. 4x64") \
            from None


def load_module(spec: str):
    from tilefoundry.loading import load_object
    from tilefoundry.semantics.ir import Module

    obj = load_object(spec, "compile")
    if callable(obj) and not isinstance(obj, Module):
        try:
            obj = obj()
        except TilefoundryError:
            raise
        except Exception as e:
            raise TilefoundryError(f"compile {spec!r}: calling it raised {type(e).__name__}: "
                                   f"{e}") from None
    if not isinstance(obj, Module):
        raise TilefoundryError(f"{spec!r} is a {type(obj).__name__}, not a Module")
    return obj


def _compile(args: argparse.Namespace) -> int:
    from tilefoundry.compiler.pipeline import PASS_NAMES, compile

    shows = set(PASS_NAMES) if "all" in args.print_after else set(args.print_after)
    try:
        if args.explain and args.target not in EXPLAINED:
            raise TilefoundryError(f"--explain reports the triton and cuda targets' mappings; "
                                   f"got --target {args.target}: use --target triton-cuda or "
                                   f"cuda (the GPU's kernels), or triton / cuda-host")
        cfg = _launch_cfg(args.launch, args.target)
        module = load_module(args.spec)
        shapes = [parse_shape(s) for s in args.shape]
        c = compile(module, args.entry, shapes, args.target, print_after=shows,
                    stream=sys.stdout, fuse=not args.no_fuse, cfg=cfg)
        if args.explain:
            sys.stdout.write(_explain(module, args.entry, c))
            for line in c.forwarded:
                sys.stdout.write(f"copy forwarded (D549): {line}\n")
    except TilefoundryError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    if not shows and not args.explain:
        print(f"{args.entry}: {len(c.kernels)} kernel(s) for target {c.target}: "
              f"{', '.join(k.name for k in c.kernels)}")
    return 0


def _launch_cfg(items: list[str], target: str):
    """The cuda targets' tiles with ``--launch KEY=VALUE`` options (None: the target's own); the
    renderer checks the names and values (``render_cuda_wgmma.check_launch``)."""
    if not items:
        return None
    if target not in ("cuda", "cuda-host"):
        raise TilefoundryError(f"--launch sets the cuda targets' launch options; got --target "
                               f"{target} (the triton targets take theirs from the autotuner's "
                               f"record, benchmarks/bench_gpu.py --tune)")
    from dataclasses import replace

    from tilefoundry.compiler.cuda_backend import CUDA_TILES

    opts = []
    for item in items:
        key, eq, val = item.partition("=")
        try:
            opts.append((key.strip(), int(val)))
        except ValueError:
            raise TilefoundryError(f"--launch {item!r}: write KEY=INTEGER, e.g. "
                                   f"fp8_promote=128") from None
        if not eq or not key.strip():
            raise TilefoundryError(f"--launch {item!r}: write KEY=INTEGER, e.g. "
                                   f"fp8_promote=128")
    return replace(CUDA_TILES, launch=tuple(opts))


#: the targets ``--explain`` reports on
EXPLAINED = ("triton", "triton-cuda", "cuda", "cuda-host")


def _explain(module, entry: str, c) -> str:
    """The Triton mapping report of a compiled entry (``compiler/triton_explain.py``), with the
    tile configuration the target lowered with and where its launch options came from."""
    from tilefoundry.compiler import triton_tune
    from tilefoundry.compiler.triton_backend import TRITON_TILES
    from tilefoundry.compiler.triton_explain import explain

    if c.target in ("cuda", "cuda-host"):
        return _explain_cuda(c)
    if c.target == "triton":
        cfg, src = TRITON_TILES, "the defaults by tile size (the interpreter target reads no " \
                                 "tuning record)"
    else:
        cfg, path = triton_tune.lookup(module, entry, c.shapes, TRITON_TILES)
        src = f"the autotuner's record in {path}" if path else \
            "the defaults by tile size (no tuning record for this program and shapes)"
    return explain(c.program, cfg, src)


def _explain_cuda(c) -> str:
    """The CUDA mapping report: each kernel's mapping, threads a block and why (the launch
    plan the rendered source carries, ``render_cuda.parse_plan``; D482)."""
    from tilefoundry.compiler.render_cuda import kernel_threads, parse_plan

    plan = parse_plan(c.executable.source)
    lines = [f"{c.target}: {len(plan['kernels'])} kernel(s)"]
    for name, k in plan["kernels"].items():
        lines.append(f"  {name} ({k['fn']}): {k['mapping']}, {kernel_threads(plan, k)} "
                     f"threads a block, {k['instances']} instance(s)")
        lines.append(f"    why: {k.get('why') or 'not recorded'}")
    return "\n".join(lines) + "\n"
