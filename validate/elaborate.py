"""Translation validation of the ``elaborate`` pass (D479).

``elaborate`` turns the typed, shape-polymorphic entry into one flat, concretely typed Function
for the input shapes: it inlines every Call of a Function (selecting dispatch variants by
shape), binds DimVars and rewrites op attributes that name them. The source side is the typed
module read the way the reference evaluator runs it (``hir_smt.run_hir`` with the typing
session: ``resolved_target``, ``select_variant``, ``dim_env`` — the evaluator's own call
semantics, not the elaborator's rewriting); the target side is the elaborated Function. Both
are read by the same op encodings, so a difference is the elaborator's (a wrong variant, a
DimVar bound wrongly into an attribute, an operand rewired). A counterexample is replayed
concretely: the reference evaluator on the source module and on the elaborated Function.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import z3

from tilefoundry.compiler import kir
from tilefoundry.validate import encode as E
from tilefoundry.validate.encode import Unsupported
from tilefoundry.validate.refine import Counterexample, Outcome, _same, decide, flat_arrays

__all__ = ["check_elaboration", "check_hir_refinement", "result_pairs"]


def _param_vars(fn: Any) -> dict[str, tuple[np.ndarray, str]]:
    """A bit-vector variable per element of each (concrete) parameter, and its dtype."""
    out = {}
    for p in fn.params:
        t = p.checked_type if p.has_type else p.type
        dt = t.dtype.value
        shape = tuple(int(n) for n in t.shape)
        arr = np.empty(shape, object)
        for idx in np.ndindex(*shape):
            arr[idx] = E.input_var(f"{p.name}[{','.join(map(str, idx))}]", dt)
        out[p.name] = (arr, dt)
    return out


def check_elaboration(module: Any, entry: str, shapes: Sequence[Sequence[int]], *,
                      timeout_ms: int = 10_000, state: Any = None) -> Outcome:
    """Does the elaborated entry refine the typed module's entry at ``shapes``? ``state``: the
    pipeline's state after typeinfer and elaborate for these shapes (``validate_program``
    shares it with the other checks), else they are run here."""
    from tilefoundry.compiler.pipeline import TARGETS, State, run_passes

    st = state
    if st is None:
        st = State(module, entry, [tuple(s) for s in shapes], TARGETS["interp"])
        run_passes(st, ["typeinfer", "elaborate"])
    return check_hir_refinement(st.inferred[entry], st.hir, (module, entry), "elaborated",
                                session=st.session, timeout_ms=timeout_ms)


def result_pairs(srcs: list, tgts: list, label: str, t0: float) -> list | Outcome:
    """The (source, target) term arrays of two HIR results, output by output; an
    "unsupported" outcome where their number, shapes or dtypes differ."""
    if len(srcs) != len(tgts):
        return Outcome("unsupported", f"{len(srcs)} source results vs {len(tgts)} {label}",
                       time.perf_counter() - t0)
    pairs = []
    for k, ((a, da), (b, db)) in enumerate(zip(srcs, tgts, strict=True)):
        if a.shape != b.shape or da != db:
            return Outcome("unsupported", f"result {k}: {label} {db}{list(b.shape)} vs "
                           f"source {da}{list(a.shape)}", time.perf_counter() - t0)
        pairs.append((a, b))
    return pairs


def check_hir_refinement(src_fn: Any, tgt_fn: Any, source: tuple[Any, str], label: str, *,
                         session: Any = None, timeout_ms: int = 10_000) -> Outcome:
    """Does the flat, concretely typed HIR Function ``tgt_fn`` refine ``src_fn`` (read with
    the typing ``session`` when it calls Functions)? Both are read by the same op encodings
    (``hir_smt.run_hir``); a counterexample is replayed by the reference evaluator on
    ``source`` (module, entry) and on ``tgt_fn``, whose results are named ``label``."""
    from tilefoundry.semantics.evaluator.core import evaluate
    from tilefoundry.semantics.ir import Module
    from tilefoundry.validate.hir_smt import flatten, run_hir
    from tilefoundry.validate.symexec import _vmap

    t0 = time.perf_counter()
    pv = _param_vars(tgt_fn)
    vals = {n: (_vmap(lambda x, d=dt: E.from_input_bits(x, d), a) if a.size else a)
            for n, (a, dt) in pv.items()}
    try:
        s_res, s_abs = run_hir(src_fn, vals, session)
        t_res, t_abs = run_hir(tgt_fn, vals)
    except Unsupported as e:
        return Outcome("unsupported", str(e), time.perf_counter() - t0)
    pairs = result_pairs(flatten(s_res), flatten(t_res), label, t0)
    if isinstance(pairs, Outcome):
        return pairs
    names = [p.name for p in tgt_fn.params]

    def rp(model: z3.ModelRef) -> Counterexample:
        inputs = []
        for n in names:
            a, dt = pv[n]
            npdt = kir.numpy_dtype(dt)
            raw = np.array([model.eval(v, model_completion=True).as_long()
                            for v in a.reshape(-1)], dtype=np.uint64)
            inputs.append(raw.astype(np.dtype(f"u{npdt.itemsize}")).view(npdt)
                          .reshape(a.shape))
        ref = flat_arrays(evaluate(source[0], source[1], inputs))
        got = flat_arrays(evaluate(Module((tgt_fn,)), tgt_fn.name, inputs))
        diff = []
        for k, (r, g) in enumerate(zip(ref, got, strict=True)):
            bad = ~_same(np.asarray(r), np.asarray(g)).reshape(-1)
            diff += [f"result {k}[{i}]" for i in np.nonzero(bad)[0]]
        return Counterexample(dict(zip(names, inputs, strict=True)),
                              {f"source {k}": r for k, r in enumerate(ref)},
                              {f"{label} {k}": g for k, g in enumerate(got)}, {}, {}, diff)

    return decide(pairs, s_abs, t_abs, rp, t0, timeout_ms)
