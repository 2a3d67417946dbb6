"""The compiler pipeline: ``compile(module, entry, shapes, target)``.

Named passes, in order (``PASSES``), each a function of the pipeline state that can be run and
printed on its own:

============  =====================================================================  ==========
pass          does                                                                   prints
============  =====================================================================  ==========
typeinfer     ``infer_module``: stamps and checks every function                     HIR module
elaborate     the entry specialized for the shapes: dispatch resolved, calls         HIR entry
              inlined, every extent an integer (``hir_passes.elaborate``)
canonicalize  shape ops folded, identities dropped, CSE                              HIR entry
lower         one kernel (or a few) per op (``lower.lower``), verified               kernel IR
fuse          producers merged into consumers (``fusion.fuse``), verified            kernel IR
render        the target's source (none for ``interp``: it runs the kernel IR)       source
build         an executable for the target, loaded                                   summary
============  =====================================================================  ==========

``print_after`` names passes whose output is kept in ``Compiled.printed`` (and written to
``stream`` when one is given): ``compile(m, "f", [(4, 64), (64,)], print_after={"fuse"})``.
Targets are a registry (``TARGETS``); ``interp`` (the kernel-IR interpreter) is built in, the
SIMD C, Triton and CUDA renderers plug in by name.

The ``lower`` pass also records the program's run-time checks (``lower.RunChecks``: Gather /
RoPE indices, CacheUpdate and InsertSlice bounds; ``Compiled.checks``); ``build`` hands them to
the executable (its ``checks`` attribute), which makes them on every run and raises
``RunTimeCheckError``. An executable without that attribute cannot run a program that has
checks (``NotSupportedError``): no check is ever skipped.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from tilefoundry.compiler.errors import LoweringError, NotSupportedError
from tilefoundry.compiler.fusion import fuse as fuse_pass
from tilefoundry.compiler.hir_passes import canonicalize, elaborate, typeinfer
from tilefoundry.compiler.interp import Interpreter
from tilefoundry.compiler.kir import Program, to_text, verify
from tilefoundry.compiler.lower import RunChecks, lower_checked
from tilefoundry.compiler.run_limits import check_run
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.errors import InvalidArgumentError
from tilefoundry.limits import LimitError, check_value_size, deep_recursion, limits
from tilefoundry.semantics.ir import Function, Module
from tilefoundry.semantics.printer import function_text
from tilefoundry.semantics.printer import to_text as module_text
from tilefoundry.semantics.typeinfer.core import Session

__all__ = ["LAZY_TARGETS", "PASSES", "TARGETS", "Compiled", "Pass", "State", "Target", "compile", "run_passes"]


# =============================================================================================
# targets
# =============================================================================================
@dataclass(frozen=True)
class Target:
    """A backend the pipeline can finish with: ``render(program) -> source | None`` and
    ``build(program, source) -> executable`` (an object with ``run(inputs)``)."""

    name: str
    render: Callable[[Program], str | None]
    build: Callable[[Program, str | None], Any]
    #: the tile configuration the target lowers with when ``compile`` is given none (so the
    #: printed source is the one the backend runs): a TileConfig, or a function of (module,
    #: entry, shapes) giving one (the Triton autotuner's record, else its default)
    cfg: TileConfig | Callable[[Module, str, tuple], TileConfig] | None = None
    #: ``render`` takes the tile configuration as a second argument (its launch options)
    render_cfg: bool = False


def source_target(name: str, render: Callable[..., str],
                  make: Callable[[Program, str], Any], cfg: Any = None,
                  render_cfg: bool = False) -> Target:
    """A target whose build takes the rendered source (``make(program, source)``); a build
    given none is the project's error naming the target."""
    def build(program: Program, source: str | None) -> Any:
        if source is None:
            raise InvalidArgumentError(f"the {name} target builds from rendered source; "
                                       f"got none")
        return make(program, source)
    return Target(name, render, build, cfg, render_cfg)


#: targets whose module registers them on import (loaded by ``compile`` on first use)
LAZY_TARGETS: dict[str, str] = {"simd": "tilefoundry.compiler.simd_backend",
                                 "triton": "tilefoundry.compiler.triton_backend",
                                 "triton-cuda": "tilefoundry.compiler.triton_backend",
                                 "cuda": "tilefoundry.compiler.cuda_backend",
                                 "cuda-host": "tilefoundry.compiler.cuda_backend"}

TARGETS: dict[str, Target] = {
    "interp": Target("interp", lambda p: None, lambda p, src: Interpreter(p)),
}


# =============================================================================================
# state and passes
# =============================================================================================
@dataclass
class State:
    module: Module
    entry: str
    shapes: list[tuple[int, ...]]
    target: Target
    cfg: TileConfig = field(default_factory=TileConfig)
    session: Session = field(default_factory=Session)
    inferred: Module | None = None
    hir: Function | None = None
    program: Program | None = None
    checks: RunChecks = field(default_factory=RunChecks)
    source: str | None = None
    executable: Any = None
    forwarded: list[str] = field(default_factory=list)  # the copies fuse forwarded (D549)


def _typeinfer(s: State) -> None:
    s.inferred = typeinfer(s.module, s.session)


def _elaborate(s: State) -> None:
    s.hir = elaborate(s.inferred, s.entry, s.shapes, s.session)


def _canonicalize(s: State) -> None:
    s.hir = canonicalize(s.hir)


def _lower(s: State) -> None:
    s.program, s.checks = lower_checked(s.hir, s.cfg)
    verify(s.program)


def _fuse(s: State) -> None:
    from tilefoundry.compiler.inplace import inplace

    # dead-destination copies dropped (D404)
    s.program = inplace(fuse_pass(s.program, s.cfg, s.forwarded))
    verify(s.program)


def _render(s: State) -> None:
    s.source = s.target.render(s.program, s.cfg) if s.target.render_cfg else \
        s.target.render(s.program)


def _build(s: State) -> None:
    verify(s.program)
    s.executable = s.target.build(s.program, s.source)
    if s.checks:  # the run-time checks (lower.RunChecks): the executable makes them
        if not hasattr(s.executable, "checks"):
            raise NotSupportedError("run-time checks", f"the {s.target.name} executable "
                                    f"cannot make them", stage=f"target {s.target.name}")
        s.executable.checks = s.checks


def _hir_text(s: State) -> str:
    return function_text(s.hir, show_types=True)


def _build_text(s: State) -> str:
    ks = s.program.kernels()
    return (f"target {s.target.name}: {len(ks)} kernel(s) "
            f"({', '.join(k.name for k in ks)}); {type(s.executable).__name__} ready\n")


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[State], None]
    show: Callable[[State], str]


PASSES: tuple[Pass, ...] = (
    Pass("typeinfer", _typeinfer, lambda s: module_text(s.inferred, show_types=True)),
    Pass("elaborate", _elaborate, _hir_text),
    Pass("canonicalize", _canonicalize, _hir_text),
    Pass("lower", _lower, lambda s: to_text(s.program)),
    Pass("fuse", _fuse, lambda s: to_text(s.program)),
    Pass("render", _render,
         lambda s: s.source if s.source is not None else
         f"target {s.target.name}: no source (the kernel IR is executed directly)\n"),
    Pass("build", _build, _build_text),
)
PASS_NAMES = tuple(p.name for p in PASSES)


def run_passes(state: State, names: Iterable[str] | None = None, *,
               print_after: Iterable[str] = (), stream: TextIO | None = None,
               printed: dict[str, str] | None = None) -> State:
    """Run the named passes (all by default, always in pipeline order) on ``state``."""
    want = set(PASS_NAMES if names is None else names)
    shows = set(print_after)
    bad = (want | shows) - set(PASS_NAMES)
    if bad:
        raise LoweringError(f"unknown pass(es) {sorted(bad)}; passes: {', '.join(PASS_NAMES)}")
    for p in PASSES:
        if p.name not in want:
            continue
        p.run(state)
        if p.name in shows:
            text = p.show(state)
            if printed is not None:
                printed[p.name] = text
            if stream is not None:
                stream.write(f"// ----- after {p.name} -----\n{text}")
                if not text.endswith("\n"):
                    stream.write("\n")
    return state


@dataclass
class Compiled:
    """The result of ``compile``: the fused kernel-IR program, its executable, the texts
    ``print_after`` asked for and the run-time checks. Calling it runs the program (making the
    checks: ``RunTimeCheckError`` when one fails)."""

    entry: str
    shapes: list[tuple[int, ...]]
    target: str
    hir: Function
    program: Program
    executable: Any
    printed: dict[str, str]
    checks: RunChecks = field(default_factory=RunChecks)
    #: the copy kernels the fuse pass forwarded into their readers (D549), one line each
    forwarded: list[str] = field(default_factory=list)

    def __call__(self, inputs: Sequence[Any]) -> Any:
        from tilefoundry.arguments import input_list

        inputs = input_list(inputs, f"compiled {self.entry}")
        # the evaluator's loop-iteration and value-size limits, before anything runs
        check_run(self.program, f"compiled @{self.entry}")
        return self.executable.run(inputs)

    @property
    def kernels(self) -> list:
        return self.program.kernels()


def check_shapes(shapes: Any) -> list[tuple[int, ...]]:
    """``compile``'s shapes: a sequence of shapes, each a sequence of non-negative ints, every
    one within the value-size limit (counted in elements: the dtype is the signature's)."""
    if isinstance(shapes, str | bytes) or not isinstance(shapes, Sequence):
        raise LoweringError(f"compile: shapes must be a list of shapes (one tuple of ints per "
                            f"parameter), got {shapes!r}")
    out = []
    for i, s in enumerate(shapes):
        if isinstance(s, str | bytes) or not isinstance(s, Sequence):
            raise LoweringError(f"compile: shapes[{i}] must be a tuple of ints, got {s!r}")
        dims = []
        for a, n in enumerate(s):
            if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
                raise LoweringError(f"compile: shapes[{i}] axis {a} must be a non-negative int, "
                                    f"got {n!r}")
            dims.append(int(n))
        check_value_size(tuple(dims), 1, f"compile: shapes[{i}]")
        out.append(tuple(dims))
    return out


def compile(module: Module, entry: str, shapes: Sequence[Sequence[int]],
            target: str = "interp", *, print_after: Iterable[str] = (),
            stream: TextIO | None = None, fuse: bool = True,
            cfg: TileConfig | None = None) -> Compiled:
    """Compile ``module[entry]`` for concrete input ``shapes`` (one per parameter) to
    ``target``. ``fuse=False`` skips the fuse pass (one kernel per op)."""
    if not isinstance(target, str):
        raise LoweringError(f"compile: target must be a target name (str), got {target!r}; "
                            f"targets: {', '.join(sorted(set(TARGETS) | set(LAZY_TARGETS)))}")
    if not isinstance(module, Module):
        raise LoweringError(f"compile: expected a Module, got {type(module).__name__}")
    if not isinstance(entry, str):
        raise LoweringError(f"compile: the entry must be a function name (str), got {entry!r}")
    if target not in TARGETS and target in LAZY_TARGETS:
        importlib.import_module(LAZY_TARGETS[target])  # registers itself in TARGETS
    tgt = TARGETS.get(target)
    if tgt is None:
        raise LoweringError(f"unknown target {target!r}; targets: "
                           f"{', '.join(sorted(set(TARGETS) | set(LAZY_TARGETS)))}")
    shapes = check_shapes(shapes)
    default = tgt.cfg(module, entry, shapes) if callable(tgt.cfg) else tgt.cfg
    state = State(module, entry, shapes, tgt, cfg or default or TileConfig())
    printed: dict[str, str] = {}
    names = [n for n in PASS_NAMES if fuse or n != "fuse"]
    with deep_recursion():
        try:
            run_passes(state, names, print_after=print_after, stream=stream, printed=printed)
        except MemoryError:
            raise LimitError(f"compile @{entry}: out of memory while compiling; lower the limit "
                             f"max_value_bytes ({limits().max_value_bytes:,}) to refuse such "
                             f"shapes up front, or free memory", "max_value_bytes") from None
    return Compiled(entry, state.shapes, tgt.name, state.hir, state.program, state.executable,
                    printed, state.checks, state.forwarded)
