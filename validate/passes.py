"""``validate_program``: translation validation of every compiler pass on bounded shapes.

For a module's entry and input shapes inside the bounds (every DimVar <= ``max_dim``, every
input <= ``max_elems`` elements, or <= ``max_elems_lanewise`` for a lane-wise program, D517),
the pipeline runs pass by pass and each pass's
output is checked to refine its input (``refine.check_refinement``):

| pass | checked as |
|---|---|
| ``typeinfer`` | unsupported: it rewrites nothing, only stamps types (D479) |
| ``elaborate`` | the typed entry read as the reference evaluator runs it (its call, dispatch and DimVar semantics) refined by the elaborated Function (``validate/elaborate.py``, D479) |
| ``canonicalize`` | ``lower(elaborated)`` refined by ``lower(canonicalized)``: the HIR read through the lowering's semantics (a canonicalization bug shows; a lowering bug common to both does not) |
| ``lower`` | the elaborated HIR entry (``hir_smt``, whose docstring lists the encoded ops) refined by the lowered kernel IR; another op is "unsupported op X"; a counterexample is replayed against the reference evaluator |
| ``fuse`` | the lowered kernel IR refined by the fused kernel IR |
| ``schedule`` | the fused program at the default tile configuration refined by the fused program at ``SMALL_TILES`` (blocks of 2, tile loops over rows and K: tiling decisions that change arithmetic) |

A shape outside the bounds, a program the pipeline refuses, an op without an encoding: the pass
is ``unsupported`` with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tilefoundry.compiler.errors import LoweringError
from tilefoundry.compiler.fusion import fuse
from tilefoundry.compiler.kir import Program
from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.errors import InvalidArgumentError, TilefoundryError
from tilefoundry.semantics.ir import Module
from tilefoundry.validate.refine import OUTCOMES, Outcome, SymRuns, check_lowering, check_refinement

__all__ = ["SMALL_TILES", "VALIDATED_PASSES", "Bounds", "PassResult", "ValidationReport",
           "validate_case", "validate_program"]

VALIDATED_PASSES = ("typeinfer", "elaborate", "canonicalize", "lower", "fuse", "schedule")
#: why typeinfer is not a refinement check (D479)
TYPEINFER_WHY = ("typeinfer rewrites nothing (it stamps types on the same nodes); a wrong stamp "
                 "is what the elaborate / lower checks read the program's meaning against")
SMALL_TILES = TileConfig(tile_elems=2, max_row=4, k_block=2)


@dataclass(frozen=True)
class Bounds:
    """``max_elems`` bounds every input; ``max_elems_lanewise`` (D517) is the larger bound for a
    lane-wise program (its kernel IR combines no lanes: no reduction, dot, tile loop or host
    loop), whose output elements each read a fixed number of input elements, so its
    per-element queries stay as small as at ``max_elems`` and only their number grows."""

    max_dim: int = 4
    max_elems: int = 16
    timeout_ms: int = 10_000
    max_elems_lanewise: int = 64
    #: try each element's query narrowed first (readable counterexamples, D524); the CI test
    #: of the whole tier turns it off (it asserts no invalid, and the tries cost time, D530)
    narrow: bool = True

    def __post_init__(self):
        if not isinstance(self.narrow, bool):
            raise InvalidArgumentError(f"validate bounds: narrow must be a bool, got "
                                       f"{self.narrow!r}")
        for n in ("max_dim", "max_elems", "timeout_ms", "max_elems_lanewise"):
            v = getattr(self, n)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidArgumentError(f"validate bounds: {n} must be a positive int, got "
                                           f"{v!r}")


@dataclass
class PassResult:
    name: str
    outcome: Outcome

    def to_json(self) -> dict:
        o = self.outcome
        d: dict[str, Any] = {"pass": self.name, "status": o.status, "reason": o.reason,
                             "seconds": round(o.seconds, 4),
                             "abstractions": list(o.abstractions)}
        if o.counterexample is not None:
            d["counterexample_elements"] = o.counterexample.elements
            d["counterexample"] = o.counterexample.text()
        return d


@dataclass
class ValidationReport:
    entry: str
    shapes: list[tuple[int, ...]]
    passes: list[PassResult] = field(default_factory=list)
    #: the (source, target) programs of each kernel-IR pass, for reproducers and replay
    programs: dict[str, tuple[Program, Program]] = field(default_factory=dict, repr=False)
    #: the mesh pipeline's report (D534): its fuse / schedule checks are per launch
    sharded: bool = False

    def counts(self) -> dict[str, int]:
        c = dict.fromkeys(OUTCOMES, 0)
        for p in self.passes:
            c[p.outcome.status] += 1
        return c

    def status(self, name: str) -> str:
        return next(p.outcome.status for p in self.passes if p.name == name)

    @property
    def invalid(self) -> bool:
        return any(p.outcome.status == "invalid" for p in self.passes)

    def exit_code(self, ci: bool = False) -> int:
        bad = {"invalid"} | ({"failed to prove"} if ci else set())
        return 1 if any(p.outcome.status in bad for p in self.passes) else 0

    def text(self) -> str:
        shapes = ", ".join("x".join(map(str, s)) or "scalar" for s in self.shapes)
        lines = [f"validate @{self.entry} [{shapes}]"]
        for p in self.passes:
            o = p.outcome
            lines.append(f"  {p.name:<13} {o.status:<16} {o.seconds:7.2f}s  {o.reason}")
            if o.counterexample is not None and o.status == "invalid":
                lines += ["    " + ln for ln in o.counterexample.text().splitlines()]
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({"entry": self.entry, "shapes": [list(s) for s in self.shapes],
                           "passes": [p.to_json() for p in self.passes]}, indent=1)


def _fn(module: Module, entry: str):
    from tilefoundry.compiler.hir_passes import typeinfer
    from tilefoundry.semantics.typeinfer.core import Session

    inferred = typeinfer(module, Session())
    return inferred[entry]


def bounded_shapes(module: Module, entry: str, bounds: Bounds) -> list[tuple[int, ...]]:
    """Shapes for the entry inside ``bounds``: each DimVar at min(max_dim, its envelope's
    largest), constant extents as declared."""
    from tilefoundry.semantics.types import DimVar, TensorType

    fn = _fn(module, entry)
    if fn.body is None:
        raise InvalidArgumentError(f"@{entry} is a dispatch prototype: give --shape for it")
    out = []
    for p in fn.params:
        t = p.checked_type if p.has_type else p.type
        if not isinstance(t, TensorType):
            raise InvalidArgumentError(f"@{entry} parameter {p.name}: not a tensor; give "
                                       f"--shape")
        out.append(tuple(max(d.lo, min(bounds.max_dim, d.hi - 1)) if isinstance(d, DimVar)
                         else int(d) for d in t.shape))
    return out


def _outside(shapes: Sequence[tuple[int, ...]], bounds: Bounds, lanewise: bool = False
             ) -> str | None:
    """Why ``shapes`` lie outside the bound (``max_elems``, or ``max_elems_lanewise`` for a
    lane-wise program), or None."""
    limit = max(bounds.max_elems, bounds.max_elems_lanewise) if lanewise else bounds.max_elems
    for i, s in enumerate(shapes):
        n = math.prod(s)
        if n > limit:
            if lanewise:
                return (f"input {i} has {n} elements ({'x'.join(map(str, s))}), above the "
                        f"bound of {bounds.max_elems} (--max-elems) and that of {limit} for a "
                        f"lane-wise program (--max-elems-lanewise)")
            return (f"input {i} has {n} elements ({'x'.join(map(str, s))}), above the bound "
                    f"of {bounds.max_elems} (--max-elems)")
    return None


def combines_lanes(p: Program) -> str | None:
    """What in ``p`` combines lanes (a ``Reduce``, ``Dot`` or ``TileLoop`` instruction, a host
    loop), or None for a lane-wise program (D517)."""
    from tilefoundry.compiler import kir

    def walk(steps) -> str | None:
        for st in steps:
            if isinstance(st, kir.HostLoop):
                return "a host loop"
            if isinstance(st, kir.Kernel):
                for ins in kir.iter_instrs(st.body):
                    if isinstance(ins, kir.Reduce | kir.Dot | kir.TileLoop):
                        return f"a {type(ins).__name__} in kernel {st.name}"
        return None

    return walk(p.steps)


#: HIR ops of which each output element reads a fixed number of input elements (element-wise
#: ops and the data movement ``hir_smt`` encodes by the reference's index map)
LANEWISE_OPS = frozenset({"Binary", "Unary", "Cast", "Select", "Bitcast", "ReLU", "Reshape", "Transpose",
                          "Slice", "Concat", "Stack", "ShapeOf", "Rank", "Zeros"})


def hir_combines_lanes(fn: Any) -> str | None:
    """What in the HIR function ``fn`` is not known lane-wise (an op outside ``LANEWISE_OPS``,
    a node other than a variable, constant, call or tuple), or None (D517). A ``Scan`` lowers
    to kernel IR without a ``Reduce``, so the kernel IR alone does not tell."""
    from tilefoundry.semantics.ir import Call, Constant, Tuple, TupleGetItem, Var, function_nodes

    for n in function_nodes([fn]):
        if isinstance(n, Call):
            name = type(n.op).__name__
            if name not in LANEWISE_OPS:
                return f"the op {name}"
        elif not isinstance(n, Var | Constant | Tuple | TupleGetItem):
            return f"a {type(n).__name__}"
    return None


def _outside_program(stages: _Stages, shapes: list, bounds: Bounds) -> str | None:
    """``_outside``, with the lane-wise bound for a program whose kernel IR (the default
    lowering, computed once in ``stages`` and shared with the checks) combines no lanes."""
    why = _outside(shapes, bounds)
    if why is None:
        return None
    far = _outside(shapes, bounds, lanewise=True)
    if far is not None:
        return far
    try:
        st = stages.lowered()
        lanes = combines_lanes(st.program) or hir_combines_lanes(st.hir)
    except TilefoundryError as e:
        return f"{why}; the lane-wise bound ({bounds.max_elems_lanewise}) not tried: {_why(e)}"
    if lanes is not None:
        return (f"{why}; the program is not lane-wise ({lanes}), so the lane-wise bound of "
                f"{bounds.max_elems_lanewise} does not apply")
    return None


#: the reason for a program whose types carry a ShardLayout (the elaborate pass of the
#: single-device pipeline refuses it; its message names "the kernel-IR lowering")
SHARDED_WHY = ("a sharded program (a ShardLayout in its types): the single-device pipeline "
               "refuses it at elaborate (the mesh pipeline validates it: "
               "validate.mesh_passes.validate_sharded, D534)")


def _why(e: TilefoundryError) -> str:
    from tilefoundry.compiler.errors import NotSupportedError

    if isinstance(e, NotSupportedError) and e.op == "ShardLayout":
        return f"{SHARDED_WHY} ({type(e).__name__}: {e})"
    return f"{type(e).__name__}: {e}"


def _timed(fn: Callable[[], Outcome]) -> Outcome:
    t0 = time.perf_counter()
    try:
        o = fn()
    except TilefoundryError as e:
        o = Outcome("unsupported", _why(e))
    o.seconds = o.seconds or time.perf_counter() - t0
    return o


class _Stages:
    """The pipeline's intermediate results for one ``validate_program``, each computed once
    (by the pipeline's own passes, ``run_passes``) and shared by the checks that read it
    (D521): typeinfer and elaborate once instead of four times, canonicalize once instead of
    three. A stage that raised raises the same error wherever it is read again."""

    def __init__(self, module: Module, entry: str, shapes: list, cfg: TileConfig):
        self.module, self.entry, self.shapes, self.cfg = module, entry, shapes, cfg
        self._done: dict[str, tuple[Any, TilefoundryError | None]] = {}

    def _get(self, name: str, make: Callable[[], Any]) -> Any:
        if name not in self._done:
            try:
                self._done[name] = (make(), None)
            except TilefoundryError as e:
                self._done[name] = (None, e)
        v, e = self._done[name]
        if e is not None:
            raise e
        return v

    def _then(self, st: State, names: list[str], cfg: TileConfig | None = None) -> State:
        # a shallow copy: each pass replaces the state's fields (hir, program), it does not
        # mutate the earlier stage's values
        return run_passes(dataclasses.replace(st, cfg=cfg or st.cfg), names)

    def elaborated(self) -> State:
        """typeinfer and elaborate"""
        return self._get("elaborated", lambda: run_passes(
            State(self.module, self.entry, self.shapes, TARGETS["interp"], self.cfg),
            ["typeinfer", "elaborate"]))

    def canonical(self) -> State:
        return self._get("canonical", lambda: self._then(self.elaborated(), ["canonicalize"]))

    def lowered(self) -> State:
        """the canonical HIR lowered at the default tile configuration"""
        return self._get("lowered", lambda: self._then(self.canonical(), ["lower"]))

    def raw(self) -> Program:
        """the elaborated HIR lowered without canonicalize"""
        return self._get("raw", lambda: self._then(self.elaborated(), ["lower"]).program)

    def small(self) -> Program:
        """the canonical HIR lowered at ``SMALL_TILES``"""
        return self._get("small", lambda: self._then(self.canonical(), ["lower"],
                                                      SMALL_TILES).program)


def validate_program(module: Module, entry: str, shapes: Sequence[Sequence[int]] | None = None,
                     *, bounds: Bounds | None = None,
                     fuse_pass: Callable[[Program, TileConfig], Program] | None = None
                     ) -> ValidationReport:
    """Validate each pass of the pipeline for ``module[entry]`` at ``shapes`` (default: the
    bounded shapes of the signature). ``fuse_pass`` replaces the fuse pass (planted bugs).

    Each pipeline stage is computed once and shared (``_Stages``: typeinfer and elaborate once
    for every check, the canonical HIR once for both tile configurations); each kernel-IR
    program checked twice (the target of one check, the source of the next) is run
    symbolically once (``SymRuns``)."""
    bounds = bounds or Bounds()
    if not isinstance(module, Module):
        raise InvalidArgumentError(f"validate_program: expected a Module, got "
                                   f"{type(module).__name__}")
    from tilefoundry.compiler.pipeline import check_shapes

    shp = check_shapes(shapes) if shapes is not None else bounded_shapes(module, entry, bounds)
    if fuse_pass is None:
        from tilefoundry.validate.mesh_passes import is_sharded_program, validate_sharded

        if is_sharded_program(module, entry):  # the mesh pipeline (D534), inside the bound
            why = _outside(shp, bounds)
            if why is not None:
                return _all_unsupported(entry, shp, f"a sharded program: {why}")
            return validate_sharded(module, entry, shp, bounds)
    rep = ValidationReport(entry, shp)
    fz = fuse_pass or (lambda p, cfg: fuse(p, cfg))
    cfg = TileConfig()
    stages = _Stages(module, entry, shp, cfg)
    why = _outside_program(stages, shp, bounds)
    if why is not None:
        for n in VALIDATED_PASSES:
            rep.passes.append(PassResult(n, Outcome("unsupported", why)))
        return rep
    rep.passes.append(PassResult("typeinfer", Outcome("unsupported", TYPEINFER_WHY)))
    runs = SymRuns()  # a program checked twice (target, then source) is run symbolically once
    to, nw = bounds.timeout_ms, bounds.narrow

    def elab() -> Outcome:
        from tilefoundry.validate.elaborate import check_elaboration

        return check_elaboration(module, entry, shp, timeout_ms=to, state=stages.elaborated())

    rep.passes.append(PassResult("elaborate", _timed(elab)))

    def canon() -> Outcome:
        try:
            raw = stages.raw()
        except LoweringError as e:
            # the elaborated HIR does not lower without canonicalize (a ShapeOf / Rank of
            # concrete shapes is folded only there): the canonical HIR against the elaborated
            # HIR, both read by the HIR encodings (D527)
            from tilefoundry.validate.elaborate import check_hir_refinement

            el, can = stages.elaborated().hir, stages.canonical().hir
            out = check_hir_refinement(el, can, (Module((el,)), el.name), "canonical",
                                       timeout_ms=to)
            return dataclasses.replace(out, reason=f"{out.reason} (HIR against HIR: the "
                                       f"elaborated HIR does not lower: {e})")
        low = stages.lowered().program
        rep.programs["canonicalize"] = (raw, low)
        return check_refinement(raw, low, timeout_ms=to, runs=runs, narrow=nw)

    rep.passes.append(PassResult("canonicalize", _timed(canon)))

    def lower() -> Outcome:
        st = stages.lowered()
        return check_lowering(module, entry, st.hir, st.program, timeout_ms=to, runs=runs,
                              narrow=nw, probes=tuple(c.probe for c in st.checks.probed))

    rep.passes.append(PassResult("lower", _timed(lower)))
    fused: list[Program] = []

    def fuse_() -> Outcome:
        p = stages.lowered().program
        fused.append(fz(p, cfg))
        rep.programs["fuse"] = (p, fused[0])
        return check_refinement(p, fused[0], timeout_ms=to, runs=runs, narrow=nw)

    rep.passes.append(PassResult("fuse", _timed(fuse_)))

    def schedule() -> Outcome:
        if not fused:
            return Outcome("unsupported", "the fuse pass did not produce a program: "
                           + rep.passes[-1].outcome.reason)
        small = fz(stages.small(), SMALL_TILES)
        rep.programs["schedule"] = (fused[0], small)
        return check_refinement(fused[0], small, timeout_ms=to, runs=runs, narrow=nw)

    rep.passes.append(PassResult("schedule", _timed(schedule)))
    return rep


def validate_case(case: Any, bounds: Bounds | None = None) -> ValidationReport:
    """A conformance case's program (``Case.build``): at the case's input shapes when they lie
    inside ``bounds``, else at the bounded shapes of the signature; a program that does not
    build: every pass unsupported with the reason. An expected-error case's program is checked
    like any other (its own inputs raise; the inputs the reference raises on are not compared,
    D541), each checked pass naming that."""
    bounds = bounds or Bounds()
    try:
        module, entry, inputs = case.build()
    except TilefoundryError as e:
        return _all_unsupported(case.id, [], f"the case does not build: {e}")
    shapes = []
    for x in inputs:
        if not hasattr(x, "shape"):
            return _all_unsupported(entry, [], f"a non-array input ({type(x).__name__})")
        shapes.append(tuple(x.shape))  # a Sharded input: its logical (global) shape
    rep = _validate_case(module, entry, shapes, bounds)
    if case.expect_error is not None:  # the program is checked all the same (D541)
        note = (f"an expected-error case ({case.expect_error}): the case's own inputs raise; "
                f"the pass is checked on every input, those the reference raises on not "
                f"compared")
        rep.passes = [PassResult(p.name, dataclasses.replace(
            p.outcome, abstractions=(*p.outcome.abstractions, note)))
            if p.outcome.status != "unsupported" else p for p in rep.passes]
    return rep


def _validate_case(module: Module, entry: str, shapes: list, bounds: Bounds
                   ) -> ValidationReport:
    from tilefoundry.validate.mesh_passes import is_sharded_program

    # a sharded program at the case's own (logical) shapes, never shrunk: validate_program
    # routes it to the mesh pipeline, or names the bound it is above
    if not is_sharded_program(module, entry) and _outside(shapes, bounds) is not None:
        try:
            small = bounded_shapes(module, entry, bounds)
        except TilefoundryError as e:
            small = None
            fixed = f"no bounded shapes ({e})"
        else:
            fixed = "the signature fixes the extents"
        if small is not None and small != shapes and _outside(small, bounds) is None:
            shapes = small
        elif _outside(shapes, bounds, lanewise=True) is None:
            pass  # within the lane-wise bound: validate_program decides (D517)
        else:
            return _all_unsupported(entry, shapes, f"{_outside(shapes, bounds, lanewise=True)}"
                                    f" and {fixed}")
    try:
        return validate_program(module, entry, shapes, bounds=bounds)
    except TilefoundryError as e:
        return _all_unsupported(entry, shapes, _why(e))


def _all_unsupported(entry: str, shapes: list, why: str) -> ValidationReport:
    rep = ValidationReport(entry, shapes)
    rep.passes = [PassResult(n, Outcome("unsupported", why)) for n in VALIDATED_PASSES]
    return rep
