"""Law obligations of the declared custom reducers (``semantics.reducers.REDUCERS``) and of the
padding identities the compiled backends use for masked lanes.

The reducers are data: each merge is a small expression tree, translated here twice — into the
Z3 FP theory (f32, RNE, one rounding per operation; max / min as D35: NaN propagates, −0 < +0)
and into real arithmetic (``ifzero`` a case split, division the real one). Nothing of the
numpy evaluator (``reducers.eval_expr``) is reused by the encodings; ``refute`` checks that the
two agree on every intermediate value of a witness.

For every reducer and every law it declares:

* a law declared ``exact`` is proved for all f32 inputs (bit-exact up to NaN class) —
  ``reducers.<name>.<law>[.<component>]``, expect proved;
* a law declared ``real`` is proved over the reals (``....real``, expect proved) and refuted in
  f32 (``....f32``, expect counterexample: the witness, both sides and every intermediate value
  are reported). The reducer's tree policies therefore admit every tree's f32 result
  (``reducers.custom_admits`` enumerates them); ``reducers.welford.admitted_set_covers``
  checks that both sides of the Welford witness are admitted for the leaves [a, b, c] and that a
  value between them is not.

Identity laws assume well-formed states where the reducer needs them (Welford: count is not −0,
and a zero count carries mean = m2 = +0). Padding: −0 is the exact identity of f32 RNE addition
on both sides for every x (NaN as a class), which is why a renderer may pad a masked-out sum lane
with it; +0 is not (x = −0 gives +0), refuted — the planted "masked lane read as +0" backend's
bug.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import z3

from tilefoundry.semantics.reducers import REDUCERS, Reducer, custom_admits, merge_states
from tilefoundry.smt.framework import Outcome, ProveCtx, obligation
from tilefoundry.smt.obligations.laws_refute import _RNE, _combine, _f32, _np32, refute

_F = z3.Float32()


# --- encodings ---------------------------------------------------------------------------------
def _fp_max(a, b, largest: bool):
    lt = z3.Or(z3.fpLT(a, b) if largest else z3.fpLT(b, a),
               z3.And(z3.fpIsZero(a), z3.fpIsZero(b),
                      (z3.fpIsNegative(a) if largest else z3.fpIsNegative(b)),
                      (z3.fpIsPositive(b) if largest else z3.fpIsPositive(a))))
    take_b = z3.And(z3.Not(z3.fpIsNaN(a)), z3.Or(z3.fpIsNaN(b), lt))
    return z3.If(take_b, b, a)


def _enc(e, env: dict, real: bool):
    if isinstance(e, str):
        return env[e]
    if isinstance(e, float | int):
        return z3.RealVal(e) if real else z3.FPVal(float(e), _F)
    head, *args = e
    vals = [_enc(a, env, real) for a in args]
    if head == "ifzero":
        c, t, f = vals
        return z3.If(c == 0 if real else z3.fpIsZero(c), t, f)
    a, b = vals
    if real:
        return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
                "div": lambda: a / b, "max": lambda: z3.If(a < b, b, a),
                "min": lambda: z3.If(b < a, b, a)}[head]()
    return {"add": lambda: z3.fpAdd(_RNE, a, b), "sub": lambda: z3.fpSub(_RNE, a, b),
            "mul": lambda: z3.fpMul(_RNE, a, b), "div": lambda: z3.fpDiv(_RNE, a, b),
            "max": lambda: _fp_max(a, b, True), "min": lambda: _fp_max(a, b, False)}[head]()


def merge_enc(r: Reducer, a: tuple, b: tuple, real: bool) -> tuple:
    env = {f"a.{c}": v for c, v in zip(r.state, a, strict=True)}
    env.update({f"b.{c}": v for c, v in zip(r.state, b, strict=True)})
    for name, e in r.lets:
        env[name] = _enc(e, env, real)
    return tuple(_enc(e, env, real) for e in r.merge)


def lift_enc(r: Reducer, x, real: bool) -> tuple:
    return tuple(_enc(e, {"x": x}, real) for e in r.lift)


def _same_fp(x, y):
    return z3.Or(z3.And(z3.fpIsNaN(x), z3.fpIsNaN(y)), z3.fpToIEEEBV(x) == z3.fpToIEEEBV(y))


def _comps(r: Reducer, law) -> list[int]:
    return [i for i, c in enumerate(r.state) if not law.components or c in law.components]


def _states(r: Reducer, tag: str, real: bool) -> tuple:
    mk = z3.Real if real else (lambda n: z3.FP(n, _F))
    return tuple(mk(f"{tag}.{c}") for c in r.state)


def _wellformed(r: Reducer, s: tuple, real: bool) -> list:
    """Assumptions an identity (or real-arithmetic) law of ``r`` needs on a state."""
    if r.name != "welford":
        return []
    n, m, q = s
    if real:
        return [n > 0]
    return [z3.Not(z3.And(z3.fpIsZero(n), z3.fpIsNegative(n))), z3.Not(z3.fpIsNaN(n)),
            z3.Implies(z3.fpIsZero(n), z3.And(z3.fpIsZero(m), z3.fpIsPositive(m),
                                               z3.fpIsZero(q), z3.fpIsPositive(q)))]


# --- laws ------------------------------------------------------------------------------------
def check_exact(ctx: ProveCtx, r: Reducer, law) -> Outcome:
    comps = _comps(r, law)
    a, b, c = (_states(r, t, False) for t in "abc")
    res = []
    if law.name == "associative":
        left = merge_enc(r, merge_enc(r, a, b, False), c, False)
        right = merge_enc(r, a, merge_enc(r, b, c, False), False)
        claim = z3.And(*[_same_fp(left[i], right[i]) for i in comps])
        res.append(("associative (bit-exact, f32)",
                    *ctx.prove(claim, f"{r.name}_assoc", show={"a": a[comps[0]],
                                                               "b": b[comps[0]],
                                                               "c": c[comps[0]]})))
    elif law.name == "commutative":
        ab, ba = merge_enc(r, a, b, False), merge_enc(r, b, a, False)
        claim = z3.And(*[_same_fp(ab[i], ba[i]) for i in comps])
        res.append(("commutative (bit-exact up to NaN class, f32)",
                    *ctx.prove(claim, f"{r.name}_comm")))
    elif law.name == "identity":
        e = tuple(z3.FPVal(v, _F) for v in r.identity)
        ea, ae = merge_enc(r, e, a, False), merge_enc(r, a, e, False)
        claim = z3.And(*[z3.And(_same_fp(ea[i], a[i]), _same_fp(ae[i], a[i])) for i in comps])
        res.append((f"identity {r.identity} (both sides, bit-exact, f32)",
                    *ctx.prove(claim, f"{r.name}_identity",
                               assumptions=tuple(_wellformed(r, a, False)))))
    return _combine(res, f"{r.name}: {law.name} holds bit-exactly in f32 on components "
                         f"{[r.state[i] for i in comps]}")


def check_real(ctx: ProveCtx, r: Reducer, law) -> Outcome:
    comps = _comps(r, law)
    a, b, c = (_states(r, t, True) for t in "abc")
    assume = tuple(_wellformed(r, a, True) + _wellformed(r, b, True) + _wellformed(r, c, True))
    if law.name == "associative":
        left = merge_enc(r, merge_enc(r, a, b, True), c, True)
        right = merge_enc(r, a, merge_enc(r, b, c, True), True)
    else:
        left, right = merge_enc(r, a, b, True), merge_enc(r, b, a, True)
    res = []
    for i in comps:  # one nonlinear real query per component (nlsat: complete for these)
        s = z3.Then("simplify", "qfnra-nlsat").solver()
        s.set("rlimit", ctx.rlimit)
        s.add(*assume)
        s.add(left[i] != right[i])
        got = ctx.check(s, f"{r.name}_{law.name}_real_{r.state[i]}")
        st = "proved" if got == z3.unsat else ("counterexample" if got == z3.sat else "failed")
        cex = None if st == "proved" else ({k.name(): str(s.model()[k]) for k in s.model()}
                                           if st == "counterexample" else
                                           {"reason": s.reason_unknown()})
        res.append((f"{law.name} over the reals: {r.state[i]}", st, cex))
    return _combine(res,
                    f"{r.name}: {law.name} holds over the reals on components "
                    f"{[r.state[i] for i in comps]}" +
                    (" (counts > 0)" if r.name == "welford" else ""))


def refute_f32(ctx: ProveCtx, r: Reducer, law) -> Outcome:
    """The law fails in f32: a witness over single-contribution states lift(a), lift(b),
    lift(c), searched through the package's reference and confirmed by Z3."""
    comps = _comps(r, law)
    vs = [_f32(n) for n in "abc"]
    la, lb, lc = (lift_enc(r, v.fp, False) for v in vs)
    if law.name == "associative":
        ab, bc = merge_enc(r, la, lb, False), merge_enc(r, lb, lc, False)
        left, right = merge_enc(r, ab, lc, False), merge_enc(r, la, bc, False)
    else:
        left, right = merge_enc(r, la, lb, False), merge_enc(r, lb, la, False)
    fin = [z3.Not(z3.Or(z3.fpIsNaN(x), z3.fpIsInf(x))) for i in comps for x in (left[i],
                                                                                 right[i])]
    cond = z3.And(z3.Or(*[z3.Not(z3.fpEQ(left[i], right[i])) for i in comps]), *fin)
    show = {"a": vs[0].fp, "b": vs[1].fp, "c": vs[2].fp}
    for i in comps:
        show[f"left.{r.state[i]}"] = left[i]
        show[f"right.{r.state[i]}"] = right[i]
    from tilefoundry.semantics.reducers import lift as np_lift

    def replay(f: list[np.ndarray]) -> dict[str, np.ndarray]:
        ta, tb, tc = (np_lift(r, x) for x in _np32(f))
        if law.name == "associative":
            lft = merge_states(r, merge_states(r, ta, tb), tc)
            rgt = merge_states(r, ta, merge_states(r, tb, tc))
        else:
            lft, rgt = merge_states(r, ta, tb), merge_states(r, tb, ta)
        out = {}
        for i in comps:
            out[f"left.{r.state[i]}"] = lft[..., i]
            out[f"right.{r.state[i]}"] = rgt[..., i]
        return out

    def broken(d: dict[str, np.ndarray]) -> np.ndarray:
        ok = np.ones(np.shape(next(iter(d.values()))), bool)
        diff = np.zeros_like(ok)
        for i in comps:
            x, y = d[f"left.{r.state[i]}"], d[f"right.{r.state[i]}"]
            ok &= np.isfinite(x) & np.isfinite(y)
            diff |= x != y
        return ok & diff

    return refute(ctx, f"{r.name}_{law.name}_f32", vs, cond, show, replay, broken,
                  f"the f32 {r.name} merge is not {law.name} on components "
                  f"{[r.state[i] for i in comps]}")


def _register(name: str, fn: Callable[[ProveCtx], Outcome], doc: str, expect: str) -> None:
    fn.__doc__ = doc
    obligation(name, expect=expect)(fn)


for _r in REDUCERS.values():
    for _law in _r.laws:
        _sfx = f"{_r.name}.{_law.name}" + (f".{'_'.join(_law.components)}"
                                           if _law.components else "")
        if _law.over == "exact":
            _register(f"reducers.{_sfx}", lambda ctx, r=_r, lw=_law: check_exact(ctx, r, lw),
                      f"{_r.name}: declared {_law.name} law, bit-exact in f32 (all inputs)",
                      "proved")
        else:
            _register(f"reducers.{_sfx}.real", lambda ctx, r=_r, lw=_law: check_real(ctx, r, lw),
                      f"{_r.name}: declared {_law.name} law, over the reals", "proved")
            _register(f"reducers.{_sfx}.f32", lambda ctx, r=_r, lw=_law: refute_f32(ctx, r, lw),
                      f"{_r.name}: the {_law.name} law fails in f32 (a witness)",
                      "counterexample")


@obligation("reducers.welford.admitted_set_covers")
def welford_admitted_set_covers(ctx: ProveCtx) -> Outcome:
    """The ordered_tree admitted set of welford contains both sides of its f32
    non-associativity witness, and rejects a state that neither tree gives."""
    r = REDUCERS["welford"]
    law = next(lw for lw in r.laws if lw.name == "associative")
    o = refute_f32(ctx, r, law)
    if o.status != "counterexample" or not o.counterexample:
        return Outcome("failed", f"no witness to check: {o.detail}")
    import re

    def num(key: str) -> np.float32:
        m = re.search(r"\(([^)]*)\)", o.counterexample[key])
        return np.float32(float(m.group(1) if m else o.counterexample[key]))

    a, b, c = num("a"), num("b"), num("c")
    x = np.array([[b, c]], np.float32)
    seed = np.array([[1.0, a, 0.0]], np.float32)  # the state lift(a) as the incoming seed
    from tilefoundry.semantics.reducers import lift as np_lift

    la, lb, lc = (np_lift(r, np.array([v], np.float32)) for v in (a, b, c))
    left = merge_states(r, merge_states(r, la, lb), lc)
    right = merge_states(r, la, merge_states(r, lb, lc))
    res = []
    for what, v in (("(a·b)·c", left), ("a·(b·c)", right)):
        adm = custom_admits(v, x, seed, "welford", 1, policy="ordered_tree")
        res.append((f"{what} admitted", "proved" if bool(adm) else "counterexample",
                    None if bool(adm) else {"state": str(v.tolist())}))
    other = left.copy()
    other[..., 1] = np.nextafter(np.maximum(left[..., 1], right[..., 1]), np.float32(np.inf))
    adm = custom_admits(other, x, seed, "welford", 1, policy="ordered_tree")
    res.append(("a state no tree gives rejected", "counterexample" if bool(adm) else "proved",
                {"state": str(other.tolist())} if bool(adm) else None))
    return _combine(res, f"witness a={a}, b={b}, c={c}: both trees admitted "
                         f"({left.tolist()} and {right.tolist()}), their neighbour rejected")


@obligation("reducers.padding.neg_zero_add")
def neg_zero_add(ctx: ProveCtx) -> Outcome:
    """-0 is the exact identity of f32 RNE addition on both sides (a valid padding)."""
    x = z3.FP("x", _F)
    nz = z3.FPVal(-0.0, _F)
    claim = z3.And(_same_fp(z3.fpAdd(_RNE, x, nz), x), _same_fp(z3.fpAdd(_RNE, nz, x), x))
    st, cex = ctx.prove(claim, "neg_zero_add", show={"x": x})
    return _combine([("x + -0 = -0 + x = x", st, cex)],
                    "-0 is an exact two-sided identity of f32 RNE addition (NaN as a class)")


@obligation("reducers.padding.pos_zero_add", expect="counterexample")
def pos_zero_add(ctx: ProveCtx) -> Outcome:
    """+0 is not an identity of f32 addition: a masked lane read as +0 changes a -0 sum."""
    x = z3.FP("x", _F)
    pz = z3.FPVal(0.0, _F)
    s = z3.fpAdd(_RNE, x, pz)
    st, cex = ctx.prove(_same_fp(s, x), "pos_zero_add", show={"x": x, "x + +0": s})
    return _combine([("x + +0 = x", st, cex)], "+0 is an identity")
