"""The SMT encoding checked against the kernel-IR interpreter on concrete points.

``agreement(program, inputs)`` runs ``program`` symbolically with every input element a
bit-vector *literal* (so each output term simplifies to a literal) and with the interpreter,
and returns the output elements whose values differ (bits, NaN compared as a class). The
per-op tests call it on one-op programs over random and special values of every dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import z3

from tilefoundry.compiler import kir
from tilefoundry.compiler.interp import run_program
from tilefoundry.compiler.kir import Program
from tilefoundry.validate import encode as E
from tilefoundry.validate.encode import math_value as _math_value
from tilefoundry.validate.encode import value_bits as _value_bits
from tilefoundry.validate.symexec import run_symbolic

__all__ = ["agreement"]


def _interp_member(t: z3.ExprRef, abstractions: set[str]) -> z3.ExprRef:
    """``t`` with every tree-sum choice replaced by the member kernel-interp computes and every
    unspecified element by the 0 it writes."""
    from tilefoundry.validate.choices import PREFIX, REGISTRY, UNSPEC_PREFIX, UNSPECIFIED, zero

    sub = [(REGISTRY[a[len(PREFIX):]].var, REGISTRY[a[len(PREFIX):]].default)
           for a in abstractions if a.startswith(PREFIX)]
    for a in abstractions:
        if a.startswith(UNSPEC_PREFIX):
            u = UNSPECIFIED[a[len(UNSPEC_PREFIX):]]
            sub.append((u, zero(u)))
    return z3.substitute(t, *sub) if sub else t


def concrete_math(t: z3.ExprRef) -> z3.ExprRef:
    """``t`` with every application of an uninterpreted ``math`` function (``encode.math_fn``)
    to a literal replaced by the function's real value, innermost first, so that a term over
    literal inputs simplifies to a literal (the per-op agreement of the math-based ops)."""
    for _ in range(64):
        t = z3.simplify(t)
        apps = [e for e in E.dag_nodes(t)
                if z3.is_app(e) and e.decl().name().startswith("math.") and e.num_args() == 1]
        subs = [(a, v) for a in apps
                if (v := _math_value(a.decl().name(), z3.simplify(a.arg(0)))) is not None]
        if not subs:
            return t
        t = z3.substitute(t, *subs)
    return t


def _literal_bits(x: np.ndarray, dt: str) -> np.ndarray:
    a = np.ascontiguousarray(x).reshape(np.shape(x))  # keeps a 0-d input 0-d
    raw = a.view(np.dtype(f"u{a.dtype.itemsize}")).reshape(-1)
    out = np.empty(raw.size, object)
    for i, b in enumerate(raw.tolist()):
        out[i] = z3.BitVecVal(int(b), E.width(dt))
    return out.reshape(a.shape)


def _nan_codes(dt: str, bits: np.ndarray) -> np.ndarray:
    x = bits.view(kir.numpy_dtype(dt))
    with np.errstate(all="ignore"):
        return np.isnan(x.astype(np.float64))


def agreement(program: Program, inputs: Sequence[np.ndarray], *,
              variables: bool = False) -> list[str]:
    """Output elements where the SMT semantics and the interpreter disagree (empty: agree).
    ``variables``: run on bit-vector *variables* and substitute the inputs' bits into the
    output terms afterwards, so that the paths taken for data-dependent values (addressing,
    masks) are the symbolic ones, not the interpreter's own on literals."""
    bm = program.buffer_map()
    bits = {n: _literal_bits(x, bm[n].dtype) for n, x in zip(program.inputs, inputs,
                                                             strict=True)}
    subs: list = []
    if variables:
        from tilefoundry.validate.symexec import input_vars

        var = input_vars(program, "agree.")
        subs = [(v, b) for n in program.inputs
                for v, b in zip(var[n].reshape(-1), bits[n].reshape(-1), strict=True)]
        bits = var
    sym = run_symbolic(program, bits)
    if subs:
        for name, arr in sym.outputs.items():
            sym.outputs[name] = np.vectorize(lambda t: z3.substitute(t, *subs),
                                             otypes=[object])(arr) if arr.size else arr
    got = run_program(program, list(inputs))
    got = got if isinstance(got, tuple) else (got,)
    bad = []
    for name, ref in zip(program.output_names(), got, strict=True):
        dt = bm[name].dtype
        ref = np.ascontiguousarray(ref)
        rbits = ref.view(np.dtype(f"u{ref.dtype.itemsize}")).reshape(-1)
        rnan = _nan_codes(dt, rbits) if kir.is_float(dt) else np.zeros(rbits.size, bool)
        for i, t in enumerate(sym.outputs[name].reshape(-1)):
            b, nan = _value_bits(concrete_math(_interp_member(t, sym.abstractions)), dt)
            if E.is_code(dt):
                nan = bool(_nan_codes(dt, np.array([b], rbits.dtype))[0]) if b is not None \
                    else False
            if nan and rnan[i]:
                continue
            if b is None or b != int(rbits[i]) or nan != bool(rnan[i]):
                bad.append(f"{name}[{i}]: smt {'NaN' if nan else hex(b or 0)} vs interp "
                           f"{hex(int(rbits[i]))}")
    return bad


def _substituted(result, subs: list):
    """A ``run_hir`` result (a Val or a tuple of them) with ``subs`` substituted."""
    if isinstance(result, tuple) and not (len(result) == 2 and isinstance(result[0], np.ndarray)
                                          and isinstance(result[1], str)):
        return tuple(_substituted(r, subs) for r in result)
    arr, dt = result
    return (np.vectorize(lambda t: z3.simplify(z3.substitute(t, *subs)), otypes=[object])(arr)
            if arr.size else arr), dt


def agreement_hir(module, entry: str, inputs: Sequence[np.ndarray], *,
                  variables: bool = False) -> list[str]:
    """Elements where the HIR encoding (``hir_smt``) and the reference evaluator disagree, the
    entry elaborated for the inputs' shapes. ``variables``: encode on bit-vector variables and
    substitute the inputs' bits afterwards (the data-dependent paths, a Gather's indices, are
    then the symbolic ones)."""
    from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
    from tilefoundry.semantics.evaluator.core import evaluate
    from tilefoundry.validate.hir_smt import flatten, run_hir
    from tilefoundry.validate.refine import flat_arrays

    st = State(module, entry, [tuple(np.shape(x)) for x in inputs], TARGETS["interp"])
    run_passes(st, ["typeinfer", "elaborate", "canonicalize"])
    fn = st.hir
    vals = {}
    subs: list = []
    for p, x in zip(fn.params, inputs, strict=True):
        dt = (p.checked_type if p.has_type else p.type).dtype.value
        b = _literal_bits(np.asarray(x), dt)
        if variables and b.size:
            var = np.empty(b.shape, object)
            for i, idx in enumerate(np.ndindex(*b.shape)):
                var[idx] = E.input_var(f"agree.{p.name}.{i}", dt)
                subs.append((var[idx], b[idx]))
            b = var
        vals[p.name] = np.vectorize(lambda t, d=dt: E.from_input_bits(t, d), otypes=[object])(b) \
            if b.size else b
    result, abstr = run_hir(fn, vals)
    if subs:
        result = _substituted(result, subs)
    refs = flat_arrays(evaluate(module, entry, list(inputs)))
    results = flatten(result)
    if len(refs) != len(results):
        return [f"{len(results)} encoded results vs {len(refs)} reference results"]
    bad = []
    for k, ((res, dt), ref0) in enumerate(zip(results, refs, strict=True)):
        ref = np.ascontiguousarray(ref0).reshape(np.shape(ref0))  # 0-d stays 0-d
        if ref.shape != res.shape:
            bad.append(f"result {k}: shape {res.shape} vs reference {ref.shape}")
            continue
        rbits = ref.view(np.dtype(f"u{ref.dtype.itemsize}")).reshape(-1)
        rnan = _nan_codes(dt, rbits) if kir.is_float(dt) else np.zeros(rbits.size, bool)
        for i, t in enumerate(res.reshape(-1)):
            b, nan = _value_bits(concrete_math(_interp_member(t, abstr)), dt)
            if E.is_code(dt):
                nan = b is not None and bool(_nan_codes(dt, np.array([b], rbits.dtype))[0])
            if (nan and rnan[i]) or (b is not None and not nan and not rnan[i] and
                                     b == rbits[i]):
                continue
            bad.append(f"result {k} [{i}]: smt {'NaN' if nan else hex(b or 0)} vs reference "
                       f"{hex(int(rbits[i]))}")
    return bad
