"""The pipeline of a sharded program, pass by pass (D534; the semantics: ``validate.mesh``).

``compile_mesh`` runs typeinfer, ``elaborate(keep_shard=True)`` and canonicalize on the global
HIR, then ``lower_mesh`` partitions it into launches and collectives and runs each launch's
local HIR through the single-device pipeline (canonicalize, lower, fuse). The checks:

=============  =========================================================================
pass           source -> target
=============  =========================================================================
elaborate      the typed module read as the reference runs it -> the elaborated sharded
               Function (both through the HIR encodings with the mesh driver)
canonicalize   the elaborated -> the canonicalized sharded Function (the same way)
lower          the canonical sharded Function (the mesh simulation on terms) -> the
               ``MeshProgram`` with each launch lowered, not fused: the partition into
               launches and collectives, each launch's local canonicalize and lowering, and
               the collectives together (``lower_mesh``)
fuse           each launch's lowered -> fused kernel IR (``check_refinement``, as for a
               single-device program)
schedule       each launch fused at the default tiles -> at ``SMALL_TILES``
=============  =========================================================================

Outputs are compared as logical values (Partials completed, Splits gathered), every device's
copy of a replicated output against the source. A counterexample is replayed concretely: the
reference evaluator on the model's inputs (``Sharded.from_devices`` for a sharded parameter)
against the compiled mesh program on kernel-interp.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import z3

from tilefoundry.errors import TilefoundryError
from tilefoundry.validate.encode import Unsupported
from tilefoundry.validate.refine import (
    Counterexample,
    Outcome,
    _same,
    check_refinement,
    decide,
)

__all__ = ["check_mesh_hir", "check_mesh_lowering", "is_sharded_program", "validate_sharded"]


def is_sharded_program(module: Any, entry: str) -> bool:
    """Whether the typed entry holds a ShardLayout-typed value (``lower_mesh.has_mesh``)."""
    from tilefoundry.compiler.hir_passes import typeinfer
    from tilefoundry.compiler.lower_mesh import has_mesh

    try:
        return has_mesh(typeinfer(module)[entry])
    except (TilefoundryError, KeyError):
        return False


def _logical(v: Any) -> list[np.ndarray]:
    """The reference's result as its tensors' logical values (a ``Sharded`` one unsharded)."""
    from tilefoundry.semantics.evaluator.mesh import Sharded, unshard
    from tilefoundry.validate.refine import flat_arrays

    if isinstance(v, tuple | list):
        return [a for f in v for a in _logical(f)]
    return [unshard(v)] if isinstance(v, Sharded) else flat_arrays(v)


def _results(res: Any, abstr: set[str]) -> list[tuple[np.ndarray, str]]:
    """An encoded result's tensors, a sharded one as its logical value."""
    from tilefoundry.validate.hir_smt import flatten
    from tilefoundry.validate.mesh import to_global

    return [to_global(r, abstr) for r in flatten(res)]


def check_mesh_hir(src_fn: Any, tgt_fn: Any, source: tuple[Any, str], label: str, *,
                   session: Any = None, timeout_ms: int = 10_000) -> Outcome:
    """Does the sharded HIR Function ``tgt_fn`` refine ``src_fn`` (the ``elaborate`` /
    ``canonicalize`` checks of a sharded program)? Both through the HIR encodings and the mesh
    driver; a counterexample replayed by the reference evaluator on both."""
    from tilefoundry.semantics.evaluator.core import evaluate
    from tilefoundry.semantics.ir import Module
    from tilefoundry.validate.elaborate import result_pairs
    from tilefoundry.validate.hir_smt import run_hir
    from tilefoundry.validate.mesh import concrete_inputs, mesh_hook, sharded_inputs

    t0 = time.perf_counter()
    vals, raw = sharded_inputs(tgt_fn)
    try:
        s_res, s_abs = run_hir(src_fn, vals, session, mesh=mesh_hook)
        t_res, t_abs = run_hir(tgt_fn, vals, mesh=mesh_hook)
        srcs, tgts = _results(s_res, s_abs), _results(t_res, t_abs)
    except Unsupported as e:
        return Outcome("unsupported", str(e), time.perf_counter() - t0)
    pairs = result_pairs(srcs, tgts, label, t0)
    if isinstance(pairs, Outcome):
        return pairs
    names = [p.name for p in tgt_fn.params]

    def rp(model: z3.ModelRef) -> Counterexample:
        inputs = concrete_inputs(model, raw, names)
        ref = _logical(evaluate(source[0], source[1], inputs))
        got = _logical(evaluate(Module((tgt_fn,)), tgt_fn.name, inputs))
        diff = []
        for k, (r, g) in enumerate(zip(ref, got, strict=True)):
            diff += [f"result {k}[{i}]" for i in np.nonzero(~_same(r, g).reshape(-1))[0]]
        return Counterexample(_shown(names, inputs), {f"source {k}": r for k, r in
                                                      enumerate(ref)},
                              {f"{label} {k}": g for k, g in enumerate(got)}, {}, {}, diff,
                              entry_inputs=inputs)

    return decide(pairs, s_abs, t_abs, rp, t0, timeout_ms)


def _shown(names: list[str], inputs: list) -> dict[str, np.ndarray]:
    """Inputs for a counterexample's text: a sharded one as its devices' pieces."""
    from tilefoundry.semantics.evaluator.mesh import Sharded

    return {n: (x.data if isinstance(x, Sharded) else x) for n, x in
            zip(names, inputs, strict=True)}


def check_mesh_lowering(module: Any, entry: str, hir: Any, compiled: Any, *,
                        timeout_ms: int = 10_000) -> Outcome:
    """Does the mesh program ``compiled.program`` (launches lowered, collectives) refine the
    canonical sharded ``hir``? A counterexample is replayed: the reference evaluator against
    ``compiled`` (kernel-interp) on the model's inputs."""
    from tilefoundry.semantics.evaluator.core import evaluate
    from tilefoundry.validate.hir_smt import run_hir
    from tilefoundry.validate.mesh import (
        concrete_inputs,
        mesh_hook,
        run_mesh_program,
        sharded_inputs,
    )

    t0 = time.perf_counter()
    mp = compiled.program
    vals, raw = sharded_inputs(hir)
    t_abs: set[str] = set()
    try:
        s_res, s_abs = run_hir(hir, vals, mesh=mesh_hook)
        srcs = _results(s_res, s_abs)
        slots = run_mesh_program(mp, vals, t_abs)
    except Unsupported as e:
        return Outcome("unsupported", str(e), time.perf_counter() - t0)
    if len(srcs) != len(mp.outputs):
        return Outcome("unsupported", f"{len(srcs)} source results vs {len(mp.outputs)} mesh "
                       f"program outputs", time.perf_counter() - t0)
    sm = mp.slot_map()
    nm = len(mp.mesh.axis_extents)
    pairs = []
    for (a, dt), o in zip(srcs, mp.outputs, strict=True):
        got = slots[o]
        if tuple(got.shape[nm:]) != a.shape or sm[o].dtype.value != dt:
            return Outcome("unsupported", f"result {dt}{list(a.shape)} vs mesh output "
                           f"{sm[o].dtype.value}{list(got.shape[nm:])} ({o})",
                           time.perf_counter() - t0)
        per = got.reshape((int(np.prod(got.shape[:nm])), *a.shape))
        for i in range(per.shape[0]):  # every device's copy of the output
            pairs.append((a, per[i:i + 1].reshape(a.shape)))
    names = [p.name for p in hir.params]

    def rp(model: z3.ModelRef) -> Counterexample:
        inputs = concrete_inputs(model, raw, names)
        ref = _logical(evaluate(module, entry, inputs))
        try:
            out = compiled(inputs)
        except TilefoundryError as e:  # the reference runs, the mesh program raises
            return Counterexample(_shown(names, inputs),
                                  {f"reference {o}": r for o, r in zip(mp.outputs, ref,
                                                                        strict=True)},
                                  {}, {}, {}, [f"the mesh program raised "
                                               f"{type(e).__name__}: {e}"],
                                  entry_inputs=inputs)
        got = [np.asarray(g) for g in (out if isinstance(out, tuple) else (out,))]
        diff = []
        for k, (r, g) in enumerate(zip(ref, got, strict=True)):
            diff += [f"{mp.outputs[k]}[{i}]"
                     for i in np.nonzero(~_same(r.astype(g.dtype), g).reshape(-1))[0]]
        return Counterexample(_shown(names, inputs),
                              {f"reference {o}": r for o, r in zip(mp.outputs, ref,
                                                                    strict=True)},
                              dict(zip(mp.outputs, got, strict=True)), {}, {}, diff,
                              entry_inputs=inputs)

    return decide(pairs, s_abs, t_abs, rp, t0, timeout_ms)


def _per_launch(pairs: list[tuple[str, Any, Any]], check: Callable[[Any, Any], Outcome]
                ) -> Outcome:
    """One outcome for a check run per launch: the first invalid or failed launch's (named),
    else valid (unsupported when one is)."""
    t0 = time.perf_counter()
    outs = []
    for name, a, b in pairs:
        o = check(a, b)
        outs.append((name, o))
        if o.status in ("invalid", "failed to prove"):
            return dataclasses.replace(o, reason=f"launch {name}: {o.reason}",
                                       seconds=time.perf_counter() - t0)
    bad = [(n, o) for n, o in outs if o.status == "unsupported"]
    if bad:
        n, o = bad[0]
        return dataclasses.replace(o, reason=f"launch {n}: {o.reason}",
                                   seconds=time.perf_counter() - t0)
    abstr = tuple(sorted({a for _, o in outs for a in o.abstractions}))
    return Outcome("valid", f"{len(outs)} launch(es)", time.perf_counter() - t0,
                   abstractions=abstr)


def validate_sharded(module: Any, entry: str, shapes: list, bounds: Any) -> Any:
    """Every pass of a sharded program's pipeline (the table above); a ``ValidationReport``."""
    from tilefoundry.compiler.fusion import fuse
    from tilefoundry.compiler.hir_passes import canonicalize, elaborate, typeinfer
    from tilefoundry.compiler.lower_mesh import compile_mesh
    from tilefoundry.compiler.schedule import TileConfig
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.validate.passes import (
        SMALL_TILES,
        TYPEINFER_WHY,
        PassResult,
        ValidationReport,
        _timed,
    )

    rep = ValidationReport(entry, shapes)
    to = bounds.timeout_ms
    rep.passes.append(PassResult("typeinfer", Outcome("unsupported", TYPEINFER_WHY)))
    stage: dict[str, Any] = {}

    def elab() -> Outcome:
        session = Session()
        inferred = typeinfer(module, session)
        stage["el"] = elaborate(inferred, entry, shapes, session, keep_shard=True)
        return check_mesh_hir(inferred[entry], stage["el"], (module, entry), "elaborated",
                              session=session, timeout_ms=to)

    def canon() -> Outcome:
        if "el" not in stage:
            return Outcome("unsupported", "elaborate did not produce a Function")
        stage["can"] = canonicalize(stage["el"])
        return check_mesh_hir(stage["el"], stage["can"], (module, entry), "canonical",
                              timeout_ms=to)

    def lower() -> Outcome:
        c = compile_mesh(module, entry, shapes, "interp", fuse=False)
        stage["mesh"] = c
        return check_mesh_lowering(module, entry, c.hir, c, timeout_ms=to)

    def launches(cfg: TileConfig) -> list:
        c = compile_mesh(module, entry, shapes, "interp", fuse=False, cfg=cfg)
        return [(ln.name, ln.program) for ln in c.program.launches()]

    def fuse_() -> Outcome:
        if "mesh" not in stage:
            return Outcome("unsupported", "lower_mesh did not produce a mesh program")
        cfg = TileConfig()
        lowered = [(ln.name, ln.program) for ln in stage["mesh"].program.launches()]
        stage["fused"] = [(n, fuse(p, cfg)) for n, p in lowered]
        return _per_launch([(n, p, f) for (n, p), (_, f) in zip(lowered, stage["fused"],
                                                                 strict=True)],
                           lambda a, b: check_refinement(a, b, timeout_ms=to,
                                                         narrow=bounds.narrow))

    def schedule() -> Outcome:
        if "fused" not in stage:
            return Outcome("unsupported", "the fuse pass did not produce programs")
        small = [(n, fuse(p, SMALL_TILES)) for n, p in launches(SMALL_TILES)]
        if [n for n, _ in small] != [n for n, _ in stage["fused"]]:
            return Outcome("unsupported", "the launches differ between tile configurations")
        return _per_launch([(n, f, s) for (n, f), (_, s) in zip(stage["fused"], small,
                                                                 strict=True)],
                           lambda a, b: check_refinement(a, b, timeout_ms=to,
                                                         narrow=bounds.narrow))

    for name, fn in (("elaborate", elab), ("canonicalize", canon), ("lower", lower),
                     ("fuse", fuse_), ("schedule", schedule)):
        rep.passes.append(PassResult(name, _timed(fn)))
    rep.sharded = True  # a fuse / schedule counterexample is a launch's, not the entry's
    return rep


def agreement_mesh(module: Any, entry: str, inputs: list) -> list[str]:
    """Elements where the encodings of a sharded program disagree with concrete runs on
    ``inputs`` (arrays or ``Sharded`` values): the source (the mesh driver on terms) against
    the reference evaluator, and the target (the mesh program on terms) against the compiled
    mesh program on kernel-interp, each output's logical value. Terms are built on variables
    and the inputs' bits substituted afterwards; a tree choice is the member kernel-interp
    runs."""
    from tilefoundry.compiler.lower_mesh import compile_mesh
    from tilefoundry.semantics.evaluator.core import evaluate
    from tilefoundry.semantics.evaluator.mesh import Sharded, shard
    from tilefoundry.validate.agree import (
        _interp_member,
        _literal_bits,
        _value_bits,
        concrete_math,
    )
    from tilefoundry.validate.hir_smt import run_hir
    from tilefoundry.validate.mesh import mesh_hook, run_mesh_program, sharded_inputs

    shapes = [tuple(x.shape) for x in inputs]
    c = compile_mesh(module, entry, shapes, "interp", fuse=False)
    vals, raw = sharded_inputs(c.hir, "agree.")
    subs = []
    for p, x in zip(c.hir.params, inputs, strict=True):
        bits, dt, lay = raw[p.name]
        if lay is not None:
            sh = x if isinstance(x, Sharded) else shard(np.asarray(x), lay)
            data = sh.data[tuple(slice(0, n) for n in bits.shape)]  # one replica per group
        else:
            data = np.asarray(x)
        lit = _literal_bits(np.ascontiguousarray(data), dt)
        subs += list(zip(bits.reshape(-1), lit.reshape(-1), strict=True))
    s_res, s_abs = run_hir(c.hir, vals, mesh=mesh_hook)
    srcs = _results(s_res, s_abs)
    t_abs: set[str] = set()
    slots = run_mesh_program(c.program, vals, t_abs)
    refs = _logical(evaluate(module, entry, inputs))
    out = c(inputs)
    gots = [np.asarray(g) for g in (out if isinstance(out, tuple) else (out,))]
    nm = len(c.program.mesh.axis_extents)
    bad = []

    def compare(label: str, terms: np.ndarray, dt: str, want: np.ndarray, abstr: set) -> None:
        want = np.ascontiguousarray(want)
        wb = want.view(np.dtype(f"u{want.dtype.itemsize}")).reshape(-1)
        with np.errstate(all="ignore"):
            wnan = np.isnan(want.astype(np.float64)).reshape(-1) \
                if want.dtype.kind == "f" or "float" in str(want.dtype) else \
                np.zeros(wb.size, bool)
        for i, t in enumerate(terms.reshape(-1)):
            for _ in range(8):  # a choice's member may hold another choice (a completed sum
                t, t0 = _interp_member(t, abstr), t  # of sums): to a fixpoint, then the bits
                if z3.eq(t, t0):
                    break
            b, nan = _value_bits(concrete_math(z3.substitute(t, *subs)), dt)
            if (nan and wnan[i]) or (b is not None and not nan and b == int(wb[i])):
                continue
            bad.append(f"{label}[{i}]: smt {'NaN' if nan else hex(b or 0)} vs "
                       f"{hex(int(wb[i]))}")

    for k, ((a, dt), ref) in enumerate(zip(srcs, refs, strict=True)):
        compare(f"source result {k}", a, dt, ref, s_abs)
    for o, got in zip(c.program.outputs, gots, strict=True):
        per = slots[o].reshape((int(np.prod(slots[o].shape[:nm])), *slots[o].shape[nm:]))
        for d in range(per.shape[0]):
            compare(f"target {o} device {d}", per[d:d + 1].reshape(per.shape[1:]),
                    c.program.slot_map()[o].dtype.value, got, t_abs)
    return bad
