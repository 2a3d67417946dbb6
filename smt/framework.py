"""Proof obligations: a registry of named, individually runnable checks and their outcomes.

Every obligation is a function ``(ProveCtx) -> Outcome`` registered with ``@obligation(name,
expect=...)``. Solver effort is bounded by Z3's deterministic ``rlimit`` (resource units), never
by wall time, so the same run gives the same outcomes. A solver that gives up (``unknown``) is
``failed`` — never mistaken for a proof — and fails the run.

Outcomes: ``proved`` (the negated claim is unsat), ``counterexample`` (sat; the model is printed
in hex and decimal), ``failed`` (unknown / resource limit), ``error`` (the obligation itself
raised), ``report`` (an informational result, e.g. which rejected reshapes would be sound).
Obligations that *must* find a counterexample (f32 add is not associative) say
``expect="counterexample"``.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import z3

from tilefoundry.smt import DEFAULT_RLIMIT, ProveError

OUTCOMES = ("proved", "counterexample", "failed", "error", "report")


@dataclass
class Outcome:
    status: str
    detail: str = ""
    counterexample: dict[str, Any] | None = None
    queries: int = 0
    seconds: float = 0.0
    sub: list[tuple[str, str]] = field(default_factory=list)  # (case, status) per sub-query

    def __post_init__(self):
        if self.status not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.status!r}")


@dataclass(frozen=True)
class Obligation:
    name: str
    run: Callable[[ProveCtx], Outcome]
    expect: str = "proved"
    doc: str = ""


REGISTRY: dict[str, Obligation] = {}


def obligation(name: str, expect: str = "proved") -> Callable:
    """Register an obligation under ``name`` (unique)."""

    def deco(fn: Callable[[ProveCtx], Outcome]) -> Callable[[ProveCtx], Outcome]:
        if name in REGISTRY:
            raise ProveError(f"obligation {name!r} is registered twice")
        REGISTRY[name] = Obligation(name, fn, expect, (fn.__doc__ or "").strip().split("\n")[0])
        return fn

    return deco


def fmt_value(v: Any) -> str:
    """A model value in hex and decimal where it is a bit-vector / FP / int."""
    if isinstance(v, z3.BitVecNumRef):
        return f"{v.as_long():#x} ({v.as_signed_long()})"
    if isinstance(v, z3.FPNumRef):
        bits = z3.simplify(z3.fpToIEEEBV(v))
        return f"{bits.as_long():#x} ({v})" if isinstance(bits, z3.BitVecNumRef) else str(v)
    if isinstance(v, z3.IntNumRef):
        return str(v.as_long())
    if isinstance(v, z3.RatNumRef):
        return str(v.as_fraction())
    return str(v)


@dataclass
class ProveCtx:
    """What an obligation uses: bounded solving, SMT-LIB2 dumps, the module under check."""

    rlimit: int = DEFAULT_RLIMIT
    smt2_dir: Path | None = None
    module: Any = None  # a tilefoundry Module for module-level obligations
    obligation: str = ""
    queries: int = 0

    def solver(self) -> z3.Solver:
        s = z3.Solver()
        s.set("rlimit", self.rlimit)
        return s

    def check(self, s: z3.Solver, label: str) -> z3.CheckSatResult:
        self.queries += 1
        if self.smt2_dir is not None:
            self.smt2_dir.mkdir(parents=True, exist_ok=True)
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
            (self.smt2_dir / f"{self.obligation}__{self.queries:04d}_{safe}.smt2").write_text(
                s.to_smt2())
        return s.check()

    def prove(self, claim: z3.BoolRef, label: str, *, assumptions: tuple = (),
              show: dict[str, z3.ExprRef] | None = None) -> tuple[str, dict[str, str] | None]:
        """Check ``assumptions ⇒ claim`` for all values: ('proved', None), ('counterexample',
        model values of ``show`` in hex/decimal) or ('failed', {'reason': ...})."""
        s = self.solver()
        s.add(*assumptions)
        s.add(z3.Not(claim))
        r = self.check(s, label)
        if r == z3.unsat:
            return "proved", None
        if r == z3.sat:
            m = s.model()
            vals = {k: fmt_value(m.eval(e, model_completion=True)) for k, e in
                    (show or {}).items()}
            return "counterexample", vals
        return "failed", {"reason": s.reason_unknown()}

    def find(self, cond: z3.BoolRef, label: str, *, show: dict[str, z3.ExprRef] | None = None,
             minimize: list[z3.ExprRef] | None = None) -> tuple[str, dict[str, str] | None]:
        """Find a witness of ``cond``: ('counterexample', values) when one exists (minimized
        lexicographically over ``minimize`` with z3.Optimize), ('proved', None) when none does
        (the negation holds), ('failed', ...) on unknown."""
        if minimize:
            o = z3.Optimize()
            o.set("rlimit", self.rlimit)
            o.add(cond)
            for e in minimize:
                o.minimize(e)
            self.queries += 1
            r = o.check()
            m = o.model() if r == z3.sat else None
        else:
            s = self.solver()
            s.add(cond)
            r = self.check(s, label)
            m = s.model() if r == z3.sat else None
        if r == z3.sat:
            return "counterexample", {k: fmt_value(m.eval(e, model_completion=True))
                                      for k, e in (show or {}).items()}
        if r == z3.unsat:
            return "proved", None
        return "failed", {"reason": "unknown"}


def run_obligations(names: list[str] | None = None, *, rlimit: int = DEFAULT_RLIMIT,
                    smt2_dir: Path | None = None, module: Any = None
                    ) -> list[tuple[Obligation, Outcome]]:
    """Run the named obligations (all when ``names`` is empty), in registration order."""
    import tilefoundry.smt.obligations  # noqa: F401  (registers every obligation)

    if names:
        unknown = [n for n in names if n not in REGISTRY]
        if unknown:
            raise ProveError(f"unknown obligation(s) {unknown}; known: {sorted(REGISTRY)}")
        chosen = [REGISTRY[n] for n in names]
    else:
        chosen = list(REGISTRY.values())
    results = []
    for ob in chosen:
        ctx = ProveCtx(rlimit=rlimit, smt2_dir=smt2_dir, module=module, obligation=ob.name)
        t0 = time.perf_counter()
        try:
            out = ob.run(ctx)
        except Exception as e:  # an obligation that crashes is an 'error', never a pass
            out = Outcome("error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")
        out.seconds = time.perf_counter() - t0
        out.queries = max(out.queries, ctx.queries)
        results.append((ob, out))
    return results


def unexpected(ob: Obligation, out: Outcome) -> bool:
    """An outcome that fails the run: anything but the expected one (reports never fail)."""
    if out.status == "report":
        return False
    return out.status != ob.expect
