"""Checking the laws a declared reducer claims, per program (docs/decisions.md D449).

Each claimed law, per component it covers, gets one verdict with its provenance:

* ``over="real"`` (the law holds for the merge over the reals): Z3 over ``Real`` states (``ite``
  for ``max`` / ``min`` / ``ifzero``; Z3's division is total, so an ``unsat`` answer covers
  every value ``x / 0`` could take) — ``proved by Z3 (reals)``. Where Z3 finds a real
  counterexample (it may lie outside the states a reduction reaches, e.g. a negative count) or
  gives no answer within its resource limit, seeded random falsification over *reachable* states (lifts of random
  contributions, merges of two lifts, the identity) in exact rational arithmetic
  (``fractions.Fraction``; a trial that divides by zero is skipped and counted).
* ``over="exact"`` (bit-exact for the f32 merge): Z3's FP theory over every f32 state
  (``Float32``; add / sub / mul / div rounded to nearest-even, each one IEEE operation as
  ``reducers.eval_expr`` runs it; max / min NaN-propagating with -0 < +0 as
  ``reductions._pick``; SMT equality: NaN equals NaN, -0 is not +0) — ``proved by Z3 (f32 FP
  theory, all states)``. Where Z3 finds a counterexample (a state no reduction may reach) or
  gives no answer within its resource limit: seeded random falsification of the f32 merge over
  reachable states, vectorized (``reducers.merge_states``), NaN equal to NaN (D495, D510).

Z3 runs under a resource limit (``Z3_RLIMIT``), not a wall-clock timeout, so the same reducer
gets the same verdicts and provenance on a loaded machine.

A law falsified at some inputs raises ``ReducerLawError`` naming the reducer, the law, the
component and the inputs. Otherwise the verdicts say "proved by Z3 (reals)" or "not refuted by
N random trials, seed S". Same reducer, seed and count: same verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tilefoundry.errors import InvalidArgumentError

__all__ = ["LAW_SEED", "LAW_TRIALS", "LawVerdict", "ReducerLawError", "check_laws",
           "laws_summary"]

LAW_SEED = 20260437
LAW_TRIALS = 4096  # f32 trials (vectorized); real-law trials use REAL_TRIALS
REAL_TRIALS = 256
#: Z3's resource limit per law: deterministic, unlike a wall-clock timeout, so a loaded machine
#: gives the same verdicts and provenance (about 2.5 s here; the catalog's laws take < 0.1 M)
Z3_RLIMIT = 3_000_000


class ReducerLawError(InvalidArgumentError):
    """A declared reducer claims a law its merge does not satisfy."""


@dataclass(frozen=True)
class LawVerdict:
    law: str
    over: str
    component: str
    status: str  # "proved" | "not refuted"
    provenance: str

    def __str__(self) -> str:
        return f"{self.law} ({self.over}) of {self.component}: {self.provenance}"


# --- random reachable states ------------------------------------------------------------------
_SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 1e-3, 1e6, -7.25, 1e-40],
                    np.float32)


def _samples(rng: np.random.Generator, n: int) -> np.ndarray:
    pick = rng.integers(0, 3, n)
    out = np.where(pick == 0, _SPECIAL[rng.integers(0, _SPECIAL.size, n)],
                   np.where(pick == 1, rng.integers(-8, 9, n).astype(np.float64),
                            rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)))
    return out.astype(np.float32)


def _states(r, rng: np.random.Generator, n: int) -> np.ndarray:
    from tilefoundry.semantics.reducers import lift, merge_states

    one = lift(r, _samples(rng, n))
    two = merge_states(r, lift(r, _samples(rng, n)), lift(r, _samples(rng, n)))
    kind = rng.integers(0, 5 if r.identity is not None else 4, n)
    out = np.where((kind < 2)[:, None], one, two)
    if r.identity is not None:
        out = np.where((kind == 4)[:, None], np.asarray(r.identity, np.float32), out)
    return out.astype(np.float32)


def _sides(r, law: str, a, b, c, e, merge):
    if law == "associative":
        return merge(r, merge(r, a, b), c), merge(r, a, merge(r, b, c))
    if law == "commutative":
        return merge(r, a, b), merge(r, b, a)
    return (merge(r, e, a), a), (merge(r, a, e), a)  # identity: both sides


def _f32_check(r, law: str, k: int, rng, trials: int):
    """None, or the first falsifying (a, b, c) as lists of floats."""
    from tilefoundry.semantics.reducers import _same_f32, merge_states

    a, b, c = (_states(r, rng, trials) for _ in range(3))
    e = np.asarray(r.identity if r.identity is not None else [0.0] * len(r.state), np.float32)
    pairs = _sides(r, law, a, b, c, e, merge_states)
    pairs = list(pairs) if law == "identity" else [pairs]
    bad = np.zeros(trials, bool)
    for lhs, rhs in pairs:
        lk, rk = np.broadcast_to(lhs, a.shape)[:, k], np.broadcast_to(rhs, a.shape)[:, k]
        bad |= ~_same_f32(lk, rk)
    if bad.any():
        i = int(np.argmax(bad))
        return [a[i].tolist(), b[i].tolist(), c[i].tolist()]
    return None


# --- exact rationals ----------------------------------------------------------------------------
def _q_expr(e, env):
    if isinstance(e, str):
        return env[e]
    if isinstance(e, float | int):
        return Fraction(float(np.float32(e)))
    head, *args = e
    vals = [_q_expr(x, env) for x in args]
    if head == "ifzero":
        return vals[1] if vals[0] == 0 else vals[2]
    a, b = vals
    if head == "div":
        if b == 0:
            raise ZeroDivisionError
        return a / b
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "max": lambda: max(a, b), "min": lambda: min(a, b)}[head]()


def _q_merge(r, a, b):
    env = {f"a.{c}": a[i] for i, c in enumerate(r.state)}
    env.update({f"b.{c}": b[i] for i, c in enumerate(r.state)})
    for n, e in r.lets:
        env[n] = _q_expr(e, env)
    return [_q_expr(e, env) for e in r.merge]


def _real_check(r, law: str, k: int, rng, trials: int):
    """(None or falsifying inputs, skipped count) in exact rationals over reachable states."""
    st = [_states(r, rng, trials) for _ in range(3)]
    e = [Fraction(v) for v in (r.identity or [0.0] * len(r.state))]
    skipped = 0
    for i in range(trials):  # not the evaluator: a law check over sampled states
        a, b, c = ([Fraction(float(v)) for v in s[i]] if np.all(np.isfinite(s[i])) else None
                   for s in st)
        if a is None or b is None or c is None:
            skipped += 1
            continue
        try:
            pairs = _sides(r, law, a, b, c, e, _q_merge)
        except ZeroDivisionError:
            skipped += 1
            continue
        for lhs, rhs in (pairs if law == "identity" else [pairs]):
            if lhs[k] != rhs[k]:
                return [st[0][i].tolist(), st[1][i].tolist(), st[2][i].tolist()], skipped
    return None, skipped


# --- Z3 proofs ---------------------------------------------------------------------------------
def _z3_law(r, law: str, k: int, over: str) -> str:
    """"proved", "counterexample" or "unknown" for component ``k`` of ``law``, with the merge's expressions over Z3 ``Real`` states
    (``over="real"``: ``ite`` for max / min / ifzero; Z3's division is total) or ``Float32``
    states (``"exact"``: add / sub / mul / div rounded to nearest-even, max / min as
    ``reductions._pick``, SMT equality — NaN equals NaN, -0 is not +0)."""
    try:
        import z3

        from tilefoundry.semantics.smt_fp import fminmax
    except ImportError:  # pragma: no cover - z3 is a dependency
        return "unknown"
    if over == "real":
        var, ident = z3.Real, lambda v: z3.RealVal(Fraction(v))
        const = lambda v: z3.RealVal(Fraction(float(np.float32(v))))  # noqa: E731
        ops = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
               "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
               "max": lambda a, b: z3.If(a >= b, a, b), "min": lambda a, b: z3.If(a <= b, a, b),
               "ifzero": lambda c, t, f: z3.If(c == 0, t, f)}
    else:
        f32 = z3.Float32()
        var = lambda n: z3.FP(n, f32)  # noqa: E731
        const = ident = lambda v: z3.FPVal(float(np.float32(v)), f32)
        rne = z3.RNE()
        ops = {"add": lambda a, b: z3.fpAdd(rne, a, b), "sub": lambda a, b: z3.fpSub(rne, a, b),
               "mul": lambda a, b: z3.fpMul(rne, a, b), "div": lambda a, b: z3.fpDiv(rne, a, b),
               "max": lambda a, b: fminmax(a, b, True), "min": lambda a, b: fminmax(a, b, False),
               "ifzero": lambda c, t, f: z3.If(z3.fpIsZero(c), t, f)}

    def ex(e, env, get):
        if isinstance(e, str):
            return get(e)
        if isinstance(e, float | int):
            return const(e)
        head, *args = e
        return ops[head](*(ex(x, env, get) for x in args))

    # over f32 only the components k depends on are encoded (``_reads``);
    # a let is encoded when first read
    need = range(len(r.state)) if over == "real" else _reads(r, k)
    lets = dict(r.lets)

    def merge(_r, a, b):
        env = {f"a.{c}": a[i] for i, c in enumerate(r.state)}
        env.update({f"b.{c}": b[i] for i, c in enumerate(r.state)})

        def get(e):
            if isinstance(e, str) and e in lets and e not in env:
                env[e] = ex(lets[e], env, get)
            return env[e]

        return [ex(e, env, get) if i in need else None for i, e in enumerate(r.merge)]

    a, b, c = ([var(f"{s}_{x}") for x in r.state] for s in "abc")
    e = [ident(v) for v in (r.identity or [0.0] * len(r.state))]
    pairs = _sides(r, law, a, b, c, e, merge)
    claim = z3.And(*[lhs[k] == rhs[k] for lhs, rhs in
                     (pairs if law == "identity" else [pairs])])
    s = z3.Solver()
    s.set("rlimit", Z3_RLIMIT)
    s.add(z3.Not(claim))
    res = s.check()
    if res == z3.unsat:
        return "proved"
    # the model itself is not reported: which state Z3 picks depends on the queries the
    # process ran before, and the provenance must not (D510)
    return "counterexample" if res == z3.sat else "unknown"


def _reads(r, k: int) -> set[int]:
    """The state components component ``k``'s merge depends on, ``k`` included, transitively
    (a nested merge feeds each of them back in)."""
    lets, idx = dict(r.lets), {c: i for i, c in enumerate(r.state)}

    def names(e, seen=frozenset()) -> set[int]:
        if isinstance(e, str):
            if e in lets:
                return set() if e in seen else names(lets[e], seen | {e})
            return {idx[e[2:]]} if e[:2] in ("a.", "b.") else set()
        if isinstance(e, float | int):
            return set()
        return set().union(*(names(x, seen) for x in e[1:]))

    out, todo = set(), [k]
    while todo:
        j = todo.pop()
        if j not in out:
            out.add(j)
            todo += names(r.merge[j])
    return out


def _fail(r, law: str, over: str, comp: str, inputs, how: str) -> ReducerLawError:
    what = "a, b, c" if law == "associative" else "a, b" if law == "commutative" else "a"
    shown = inputs[:3 if law == "associative" else 2 if law == "commutative" else 1]
    return ReducerLawError(
        f"reducer {r.name!r} claims {law} ({over}) for component {comp!r}, but its merge "
        f"is falsified at inputs {what} = {', '.join(map(str, shown))} (states {r.state}; "
        f"{how}); drop the law (a fold policy needs none) or fix the merge")


_CACHE: dict[tuple[str, int, int], tuple[LawVerdict, ...]] = {}
_CACHE_MAX = 256


def check_laws(r, seed: int = LAW_SEED, trials: int = LAW_TRIALS) -> tuple[LawVerdict, ...]:
    """Every claimed law's verdict (module docstring); raises ReducerLawError on a false one.
    Cached by ``repr(r)``, not by equality (F44): declarations that differ only in a zero's
    sign compare equal (``-0.0 == 0.0``) yet are different reducers (−0 is an identity of f32
    addition, +0 is not)."""
    key = (repr(r), seed, trials)
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = _check_laws(r, seed, trials)  # raises on a false claim: not cached
    return _CACHE[key]


check_laws.cache_clear = _CACHE.clear  # type: ignore[attr-defined]


def _check_laws(r, seed: int, trials: int) -> tuple[LawVerdict, ...]:
    out = []
    for lw in r.laws:
        comps = lw.components or r.state
        for comp in comps:
            k = r.state.index(comp)
            rng = np.random.default_rng([seed, k, ("associative", "commutative",
                                                   "identity").index(lw.name)])
            if lw.over == "real":
                z = _z3_law(r, lw.name, k, "real")
                if z == "proved":
                    out.append(LawVerdict(lw.name, "real", comp, "proved", "proved by Z3 (reals)"))
                    continue
                n = min(trials, REAL_TRIALS)
                bad, skipped = _real_check(r, lw.name, k, rng, n)
                how = f"exact rationals, random trial with seed {seed}"
                if bad is not None:
                    raise _fail(r, lw.name, "real", comp, bad, how)
                note = ("Z3 refutes it only at a state outside the sampled reachable ones"
                        if z == "counterexample" else "Z3 gave no answer within its resource limit")
                out.append(LawVerdict(lw.name, "real", comp, "not refuted",
                                      f"not refuted by {n - skipped} random trials in exact "
                                      f"rationals, seed {seed} ({skipped} skipped: division by "
                                      f"zero or a non-finite state; {note})"))
            else:
                z = _z3_law(r, lw.name, k, "exact")
                if z == "proved":
                    out.append(LawVerdict(lw.name, "exact", comp, "proved",
                                          "proved by Z3 (f32 FP theory, all states)"))
                    continue
                bad = _f32_check(r, lw.name, k, rng, trials)
                if bad is not None:
                    raise _fail(r, lw.name, "exact", comp, bad,
                                f"f32 merge, random trial with seed {seed}")
                note = ("; Z3 refutes it only at a state outside the sampled reachable ones"
                        if z == "counterexample"
                        else "; Z3 gave no answer within its resource limit")
                out.append(LawVerdict(lw.name, "exact", comp, "not refuted",
                                      f"not refuted by {trials} random f32 trials, seed {seed}"
                                      f"{note}"))
    return tuple(out)


def laws_summary(r) -> str:
    """One line of every verdict, for a case's contract note."""
    return "; ".join(str(v) for v in check_laws(r)) or "no laws claimed"
