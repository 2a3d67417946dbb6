"""The commutation rows over the reals (split from ``commutation.py``, D381): an allow row's
homomorphism step proved for two arbitrary pieces, a reject row refuted by a staged
witness search (or recorded sound-but-rejected); the ``commutation.<group>`` and
``commutation.sound_but_rejected`` obligations. ``commutation.py``'s docstring states the
argument (induction over the associative reduction).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import z3

from tilefoundry.semantics.ops import ALL_OPS
from tilefoundry.semantics.typeinfer.commutation import REDS, TABLE, Row
from tilefoundry.smt.framework import Outcome, ProveCtx, fmt_value, obligation
from tilefoundry.smt.obligations.commutation_models import (
    BOUNDS,
    _bound_note,
    _Env,
    _Model,
    _model,
    _red,
    row_id,
)


# =============================================================================================
# the row prover
# =============================================================================================
@dataclass
class RowResult:
    row: Row
    status: str  # proved | counterexample | sound-but-rejected | failed | error
    detail: str = ""
    values: dict[str, str] | None = None


@dataclass
class _Eq:
    env: _Env
    outs: dict[str, tuple[list, list[list], str]]  # output -> (lhs, per-element device values)
    n: int
    elems: tuple[int, ...] | None = None  # restrict the claim to these output elements

    def claim(self, rho: dict[str, str]):
        parts = []
        for name, (lhs, devs, sort) in self.outs.items():
            parts += [lhs[e] == _red(sort, rho[name], devs[e]) for e in range(len(lhs))
                      if self.elems is None or e in self.elems]
        return z3.And(*parts)


def _equation(model: _Model, pattern: Sequence[str], reds: dict[str, str], mode: str,
              n: int = 2, tag: str = "") -> _Eq:
    env = _Env(mode, tag)
    dev: list[dict[str, list]] = [{} for _ in range(n)]
    true: dict[str, list] = {}
    for o in model.operands:
        if o.name in pattern:
            for i in range(n):
                dev[i][o.name] = [env.var(f"{o.name}@{i}[{e}]", o.sort) for e in range(o.size)]
            true[o.name] = [_red(o.sort, reds[o.name], [dev[i][o.name][e] for i in range(n)])
                            for e in range(o.size)]
        else:
            shared = [env.var(f"{o.name}[{e}]", o.sort) for e in range(o.size)]
            true[o.name] = shared
            for i in range(n):
                dev[i][o.name] = shared
    for v in (true, *dev):
        env.side += model.admissible(v)
    lhs = model.fn(env, true)
    per = [model.fn(env, v) for v in dev]
    outs = {}
    for k, (name, sort, reads) in enumerate(model.outputs):
        if reads & set(pattern):
            outs[name] = (lhs[k], [[per[i][k][e] for i in range(n)] for e in range(len(lhs[k]))],
                          sort)
    return _Eq(env, outs, n)


def _fmt_real(v) -> str:
    """A model value; a rational with a long denominator (a kernel value inside its enclosure)
    as a decimal approximation."""
    if isinstance(v, z3.RatNumRef) and v.denominator_as_long() > 10 ** 4:
        return f"≈{float(v.as_fraction()):.10g}"
    return fmt_value(v)


def _values(eq: _Eq, m: z3.ModelRef, rho: dict[str, str]) -> dict[str, str]:
    vals = {"devices": str(eq.n)}
    for name, v in eq.env.inputs.items():
        vals[name] = _fmt_real(m.eval(v, model_completion=True))
    for name, (lhs, devs, sort) in eq.outs.items():
        for e in range(len(lhs)):
            if eq.elems is not None and e not in eq.elems:
                continue
            vals[f"op(reduce) {name}[{e}]"] = _fmt_real(m.eval(lhs[e], model_completion=True))
            vals[f"{rho[name]}(op) {name}[{e}]"] = _fmt_real(
                m.eval(_red(sort, rho[name], devs[e]), model_completion=True))
    return vals


def _search(ctx: ProveCtx, eq: _Eq, rhos: list[dict[str, str]], label: str,
            b: tuple[int, int] | None) -> tuple[str, dict | None, str]:
    """A witness where the claim fails under every reduction map in ``rhos``, at one search
    stage ``b`` (values in a small grid, or unbounded reals); with uninterpreted kernels the
    witness is then proved for every function with the kernel's facts. Returns (status, values,
    note) with status counterexample / none / unknown."""
    env = eq.env
    fail = z3.And(*[z3.Not(eq.claim(r)) for r in rhos])
    facts = env.facts()
    s = ctx.solver()
    s.add(*env.side, *facts, fail)
    if b is not None:  # a finite domain (faster for Z3 than IsInt and bounds)
        grid = [Fraction(i, b[1]) for i in range(-b[0] * b[1], b[0] * b[1] + 1)]
        for v in env.inputs.values():
            if v.sort() == z3.RealSort():
                s.add(z3.Or(*[v == z3.RealVal(g) for g in grid]))
            elif v.sort() == z3.IntSort():
                s.add(z3.Or(*[v == int(g) for g in grid if g.denominator == 1]))
    tag = "R" if b is None else f"{b[0]}_{b[1]}"
    for _attempt in range(3):
        r = ctx.check(s, f"{label}:find-{tag}")
        if r != z3.sat:
            return ("unknown" if r == z3.unknown else "none"), None, ""
        m = s.model()
        fixed = [(v, m.eval(v, model_completion=True)) for v in env.inputs.values()]
        if not env.apps:
            return "counterexample", _values(eq, m, rhos[0]), _bound_note(b)
        # verify: with the inputs fixed, the inequality holds for every admissible kernel
        st, _ = ctx.prove(z3.substitute(fail, *fixed), f"{label}:verify",
                          assumptions=(z3.simplify(z3.substitute(z3.And(*env.side, *facts),
                                                                 *fixed)),))
        if st == "proved":
            return "counterexample", _values(eq, m, rhos[0]), \
                f"{_bound_note(b)}; verified for every kernel with its recorded facts"
        s.add(z3.Or(*[v != val for v, val in fixed]))  # try other inputs
    return "none", None, ""


def _refute(ctx: ProveCtx, model: _Model, row: Row, label: str,
            b: tuple[int, int] | None) -> tuple[str, str, dict | None]:
    """One search stage over every reduction assignment and output of a reject row: a
    counterexample refutes the row when one output fails under every reduction it could be
    claimed to carry (per-reduction witnesses where no single one exists)."""
    pattern = row.pattern.split("+")
    unknown = False
    for reds in _assignments(pattern, row.reduction):
        choices = _rho_choices(model, pattern, reds)
        eq = _equation(model, pattern, reds, "refute")
        for out in eq.outs:
            rhos = list({c[out]: c for c in choices}.values())
            sub = _Eq(eq.env, {out: eq.outs[out]}, eq.n, model.witness_elems)
            fs, fvals, note = _search(ctx, sub, rhos, f"{label}:{out}", b)
            if fs == "none" and len(rhos) > 1:  # one witness per claimed reduction
                found = [_search(ctx, sub, [c], f"{label}:{out}:{c[out]}", b) for c in rhos]
                if all(f[0] == "counterexample" for f in found):
                    fs, note = "counterexample", "one witness per reduction"
                    fvals = {f"[{c[out]}] {k}": v for c, f in zip(rhos, found, strict=True)
                             for k, v in (f[1] or {}).items()}
                elif any(f[0] == "unknown" for f in found):
                    fs = "unknown"
            if fs == "counterexample":
                how = "; ".join(f"{p}: {reds[p]}" for p in pattern)
                return "counterexample", (f"{out} under {'/'.join(c[out] for c in rhos)}" +
                                          (f" ({how})" if row.reduction == "mixed" else "") +
                                          f"; {note}"), fvals
            unknown |= fs == "unknown"
    return ("unknown" if unknown else "none"), "", None


def _assignments(pattern: list[str], red: str) -> list[dict[str, str]]:
    if red != "mixed":
        return [dict.fromkeys(pattern, red)]
    out = []
    for r1, r2 in itertools.permutations(REDS, 2):
        out.append({p: (r1 if i == 0 else r2) for i, p in enumerate(pattern)})
    return out


def _rho_choices(model: _Model, pattern: list[str], reds: dict[str, str]) -> list[dict]:
    """The reduction maps the result could be claimed to carry: the operands' own reduction
    where an output reads Partial operands of one reduction, every reduction otherwise."""
    per: dict[str, tuple[str, ...]] = {}
    for name, _sort, reads in model.outputs:
        rs = {reds[p] for p in pattern if p in reads}
        if rs:
            per[name] = (rs.pop(),) if len(rs) == 1 else REDS
    keys = list(per)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*per.values())]


def _fmt_witness(vals: dict[str, str] | None) -> str:
    if not vals:
        return ""
    return ", ".join(f"{k} = {v}" for k, v in vals.items())


_ROW_CACHE: dict[tuple[Row, int], RowResult] = {}


def prove_row(ctx: ProveCtx, row: Row) -> RowResult:
    """Prove an allow row over the reals (any device count, by the homomorphism step) or refute
    a reject row with a concrete counterexample; a reject row whose equation holds is
    ``sound-but-rejected``. An allow row that fails gets a concrete counterexample."""
    key = (row, ctx.rlimit)
    if key in _ROW_CACHE:
        return _ROW_CACHE[key]
    try:
        res = _prove_row(ctx, row)
    except Exception as e:  # a modelling bug is an error for this row, never a pass
        res = RowResult(row, "error", f"{type(e).__name__}: {e}")
    _ROW_CACHE[key] = res
    return res


def _prove_row(ctx: ProveCtx, row: Row) -> RowResult:
    model = _model(row)
    if model is None:
        return RowResult(row, "error", f"no model for op {row.op}")
    pattern = row.pattern.split("+")
    names = {o.name for o in model.operands}
    if not set(pattern) <= names:
        return RowResult(row, "error", f"pattern {row.pattern} names no operands of {row.op}")
    label = row_id(row).replace(" ", "_")
    if row.allow:
        if row.reduction == "mixed":
            return RowResult(row, "counterexample", "an allow row with mixed reductions has no "
                             "single reduction to carry")
        reds = dict.fromkeys(pattern, row.reduction)
        rho = _rho_choices(model, pattern, reds)[0]
        eq = _equation(model, pattern, reds, "prove")
        st, vals = ctx.prove(eq.claim(rho), f"{label}:step",
                             assumptions=(*eq.env.side, *eq.env.facts()))
        if st == "proved":
            return RowResult(row, "proved", "homomorphism step for two arbitrary pieces; every "
                             "n by induction" + (f" ({model.note})" if model.note else ""))
        if st == "failed":
            return RowResult(row, "failed", f"step: solver gave up ({vals})")
        # concrete values with the kernels' true facts
        req = _equation(model, pattern, reds, "refute")
        for b in BOUNDS:
            fs, fvals, note = _search(ctx, req, [rho], label, b)
            if fs == "counterexample":
                return RowResult(row, "counterexample", f"the allow row fails ({note})", fvals)
        full = _values(eq, _model_of(ctx, eq, rho), rho)
        return RowResult(row, "counterexample", "the allow row fails for some function with "
                         "the row's properties (no concrete witness for the kernel itself)", full)
    # reject row: the smallest search stage, then (before the larger stages) a soundness proof
    unknown = False
    for i, b in enumerate(BOUNDS):
        fs, where, fvals = _refute(ctx, model, row, label, b)
        if fs == "counterexample":
            return RowResult(row, "counterexample", where, fvals)
        unknown |= fs == "unknown"
        if i == 0:
            st = _sound(ctx, model, row, label)
            if st is not None:
                return st
    st = _sound(ctx, model, row, label, final=True)
    if st is not None:
        return st
    return RowResult(row, "failed", "no counterexample found and the equation not proved" +
                     (" (a solver gave up)" if unknown else ""))


def _sound(ctx: ProveCtx, model: _Model, row: Row, label: str,
           final: bool = False) -> RowResult | None:
    """Prove a reject row's equation (the operands' own reductions; with the kernels' true
    facts): sound-but-rejected. None when not proved."""
    pattern = row.pattern.split("+")
    reds = _assignments(pattern, row.reduction)[0]
    eq = _equation(model, pattern, reds, "refute")
    rho = _rho_choices(model, pattern, reds)[0]
    if row.reduction == "mixed" and not final:
        return None
    st, _vals = ctx.prove(eq.claim(rho), f"{label}:sound",
                          assumptions=(*eq.env.side, *eq.env.facts()))
    if st != "proved":
        return None
    return RowResult(row, "sound-but-rejected", "the equation holds over the reals for any "
                     "device count; the spec rejects the row conservatively" +
                     ("" if row.reduction != "mixed" else
                      f" (with {', '.join(f'{p}: {r}' for p, r in reds.items())})"))


def _model_of(ctx: ProveCtx, eq: _Eq, rho: dict[str, str]) -> z3.ModelRef:
    s = ctx.solver()
    s.add(*eq.env.side, *eq.env.facts(), z3.Not(eq.claim(rho)))
    if ctx.check(s, "model") != z3.sat:  # pragma: no cover - called after a sat query
        raise RuntimeError("lost the counterexample model")
    return s.model()


# =============================================================================================
# the row-group obligations
# =============================================================================================
_FAMILY = {cls.__name__: getattr(cls, "FAMILY", "") for cls in ALL_OPS}


def _group_of(row: Row) -> str:
    if row.op in ("Binary", "Unary", "Reduce"):
        return row.op
    if _FAMILY.get(row.op) == "tile":
        return "tile"
    return "nn" if _FAMILY.get(row.op) == "nn" else "tensor"


GROUPS = ("Binary", "Unary", "Reduce", "nn", "tensor", "tile")


def _run_group(ctx: ProveCtx, group: str) -> Outcome:
    rows = [r for r in TABLE if _group_of(r) == group]
    results = [prove_row(ctx, r) for r in rows]
    return _group_outcome(results)


def _group_outcome(results: list[RowResult]) -> Outcome:
    sub = [(row_id(r.row), r.status) for r in results]
    bad_allow = [r for r in results if r.row.allow and r.status != "proved"]
    bad_reject = [r for r in results if not r.row.allow and
                  r.status not in ("counterexample", "sound-but-rejected")]
    sbr = [r for r in results if r.status == "sound-but-rejected"]
    n_allow = sum(r.row.allow for r in results)
    n_cex = sum(1 for r in results if not r.row.allow and r.status == "counterexample")
    lines = [f"{len(results)} rows: {n_allow - len(bad_allow)}/{n_allow} allow rows proved, "
             f"{n_cex} reject rows refuted, {len(sbr)} sound-but-rejected"]
    for r in bad_allow + bad_reject:
        lines.append(f"{row_id(r.row)}: {r.status}: {r.detail} {_fmt_witness(r.values)}")
    if sbr:
        lines.append("sound-but-rejected: " + "; ".join(row_id(r.row) for r in sbr))
    detail = "\n".join(lines)
    errors = [r for r in bad_allow + bad_reject if r.status in ("error", "failed")]
    if errors:
        st = "error" if any(r.status == "error" for r in errors) else "failed"
        return Outcome(st, detail, sub=sub)
    if bad_allow or bad_reject:
        first = (bad_allow + bad_reject)[0]
        cex = {"row": row_id(first.row), **(first.values or {})}
        return Outcome("counterexample", detail, cex, sub=sub)
    return Outcome("proved", detail, sub=sub)


def _group_obligation(group: str) -> None:
    def run(ctx: ProveCtx) -> Outcome:
        return _run_group(ctx, group)

    run.__doc__ = (f"Partial commutation rows of {group}: allow rows proved over the reals for "
                   f"any device count, reject rows refuted (or sound-but-rejected).")
    obligation(f"commutation.{group}")(run)


for _g in GROUPS:
    _group_obligation(_g)


@obligation("commutation.sound_but_rejected", expect="report")
def sound_but_rejected(ctx: ProveCtx) -> Outcome:
    """Reject rows whose equation holds over the reals (the spec's conservatism), listed."""
    results = [prove_row(ctx, r) for r in TABLE if not r.allow]
    sbr = [r for r in results if r.status == "sound-but-rejected"]
    bad = [r for r in results if r.status in ("failed", "error")]
    sub = [(row_id(r.row), r.status) for r in sbr]
    detail = f"{len(sbr)} of {len(results)} reject rows hold over the reals:\n" + \
        "\n".join(f"{row_id(r.row)}: {r.row.reason}" for r in sbr)
    if bad:
        return Outcome("failed", detail + f"\n{len(bad)} rows undecided", sub=sub)
    return Outcome("report", detail, sub=sub)
