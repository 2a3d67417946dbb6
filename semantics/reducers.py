"""Seeded / masked reductions and declared custom reducers: reference results and the sets of
results their policies admit (the ``tile`` family's ``SeededReduce``, ``MaskedReduce``,
``CustomReduce``).

Contracts (Tile design "Reference fold and permitted regrouping", "Grouping, merge legality and
edge cases"; docs/decisions.md D231–D235):

* **Seed position.** fold_left ``op(op(op(z, x0), x1), x2)``: the seed first; fold_right
  ``op(x0, op(x1, op(x2, z)))``: the seed last, the element the left operand; ordered_tree: the
  seed is the leftmost leaf of an ordered tree over ``[z, x0, ..., xn-1]`` ("preserve leaf order
  and the seed's reference position"; the design's admitted realization
  ``merge(incoming, ordered_merge(identity, [lift(ω0), ...]))`` puts it at the left boundary);
  unordered_tree: any tree over any permutation of ``{z, x0, ..., xn-1}`` — the seed is one
  leaf, included exactly once, never added per partial. The reference tree is
  ``merge(z, T)`` with ``T`` the balanced pairwise tree over the active contributions in source
  order whose partials carry validity ("otherwise partials carry validity"). An empty or fully
  masked fiber returns the seed.
* **Masks.** A masked-out occurrence is skipped: it is not a leaf of any admitted tree. The
  reference never substitutes a padding value for it (the evaluator's ``where`` keeps the state).
* **Arithmetic.** As ``reductions``: low-precision floats widen exactly to f32 (the seed too),
  each combine is one IEEE f32 operation, the result rounds once; max / min propagate NaN and
  order −0 < +0; integer sums wrap; bool max / min are any / all.
* **Custom reducers** are data (``REDUCERS``): a state of named f32 components, ``lift``
  expressions over the contribution ``x``, a ``merge`` over two states ``a`` / ``b`` (let
  bindings then one expression per component), an optional ``identity`` and the laws declared
  for the merge. The update is ``merge(state, lift(x))`` for left-reference policies and
  ``merge(lift(x), state)`` for fold_right. A tree policy needs ``merge_contract``; the
  admitted set of a tree policy is every ordered bracketing (ordered_tree) or every tree of
  every permutation (unordered_tree) of the leaves ``[seed, lift(x0), ...]``, each node one f32
  ``merge`` — enumerated up to ``ENUMERATE_MAX`` leaves (Welford's f32 merge is not
  associative, so no cheaper bound is sound); beyond that Welford's state is judged by the sound
  bound of every merge tree (``reducer_bounds``) and the product reducer's sum component by the
  rigorous sum bound of ``reductions``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from tilefoundry.errors import InvalidArgumentError, bad_choice
from tilefoundry.semantics.dtypes import dtype_of
from tilefoundry.semantics.formats import DType, require_evaluable
from tilefoundry.semantics.reductions import (
    ENUMERATE_MAX,
    POLICIES,
    Admission,
    _fibers,
    _pick,
    _same,
    _same_f32,
    _tree_admits,
    normalize_axes,
    round_to,
    widen,
)

__all__ = ["REDUCERS", "Law", "Reducer", "custom_admits", "custom_reduce", "eval_expr",
           "merge_states", "seeded_admits", "seeded_reduce"]

_F32 = np.float32
TREES = ("unordered_tree", "ordered_tree")


# =============================================================================================
# the reducer registry (data)
# =============================================================================================
@dataclass(frozen=True)
class Law:
    """A law declared for a reducer's merge: ``name`` one of associative / commutative /
    identity; ``over`` "exact" (claimed bit-exact in f32) or "real" (claimed over the reals
    only; f32 results of different trees may differ and the admitted set enumerates them)."""

    name: str
    over: str
    components: tuple[str, ...] = ()  # empty: every component


@dataclass(frozen=True)
class Reducer:
    name: str
    state: tuple[str, ...]
    lift: tuple  # one expression over "x" per component
    lets: tuple  # (name, expression) bindings over "a.<c>" / "b.<c>"
    merge: tuple  # one expression per component
    identity: tuple[float, ...] | None
    merge_contract: bool
    laws: tuple[Law, ...]
    doc: str

    def law(self, name: str, component: str | None = None) -> str | None:
        for lw in self.laws:
            if lw.name == name and (not lw.components or component is None or
                                    component in lw.components):
                return lw.over
        return None


_WELFORD = Reducer(
    name="welford",
    state=("count", "mean", "m2"),
    lift=(1.0, "x", 0.0),
    lets=(("n", ("add", "a.count", "b.count")),
          ("d", ("sub", "b.mean", "a.mean")),
          ("wb", ("div", "b.count", "n")),
          ("wab", ("div", ("mul", "a.count", "b.count"), "n"))),
    merge=("n",
           ("ifzero", "b.count", "a.mean",
            ("ifzero", "a.count", "b.mean", ("add", "a.mean", ("mul", "d", "wb")))),
           ("ifzero", "b.count", "a.m2",
            ("ifzero", "a.count", "b.m2",
             ("add", ("add", "a.m2", "b.m2"), ("mul", ("mul", "d", "d"), "wab"))))),
    identity=(0.0, 0.0, 0.0),
    merge_contract=True,
    laws=(Law("associative", "real"), Law("commutative", "real"), Law("identity", "exact")),
    doc="Welford / Chan mean and sum of squared deviations: state (count, mean, m2); "
        "variance = m2 / count",
)

_SUM_MAX = Reducer(
    name="sum_max",
    state=("sum", "max"),
    lift=("x", "x"),
    lets=(),
    merge=(("add", "a.sum", "b.sum"), ("max", "a.max", "b.max")),
    identity=(-0.0, -math.inf),
    merge_contract=True,
    laws=(Law("associative", "real", ("sum",)), Law("associative", "exact", ("max",)),
          Law("commutative", "exact"), Law("identity", "exact")),
    doc="a product reducer of two independent states: an f32 sum and a max",
)

_DIFFERENCE = Reducer(
    name="difference",
    state=("value",),
    lift=("x",),
    lets=(),
    merge=(("sub", "a.value", "b.value"),),
    identity=None,
    merge_contract=False,
    laws=(),
    doc="op(a, b) = a - b with no merge contract: a strict fold only (fold_left "
        "state - x, fold_right x - state)",
)

#: every reducer a CustomReduce may name, by name
REDUCERS: dict[str, Reducer] = {r.name: r for r in (_WELFORD, _SUM_MAX, _DIFFERENCE)}

_OPS: dict[str, Callable] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "max": lambda a, b: _pick(a, b, True), "min": lambda a, b: _pick(a, b, False),
}
OPS = (*_OPS, "ifzero")


def reducer(name: str | Reducer) -> Reducer:
    """The reducer a ``CustomReduce`` names: a built-in by name, or the program's own
    declaration (a ``Reducer`` value, ``declared_reducers.declare_reducer``) as it stands."""
    if isinstance(name, Reducer):
        return name
    if name not in REDUCERS:
        raise InvalidArgumentError(bad_choice("reducer", name, tuple(REDUCERS)))
    return REDUCERS[name]


def eval_expr(e: object, env: dict[str, np.ndarray]) -> np.ndarray:
    """One expression in f32, vectorized: each operation one IEEE f32 operation (no FMA)."""
    if isinstance(e, str):
        return env[e]
    if isinstance(e, float | int):
        return _F32(e)
    head, *args = e
    if head == "ifzero":
        c, t, f = (eval_expr(a, env) for a in args)
        return np.where(c == 0, t, f).astype(_F32)
    a, b = (eval_expr(x, env) for x in args)
    return np.asarray(_OPS[head](np.asarray(a, _F32), np.asarray(b, _F32)), _F32)


def merge_states(r: Reducer, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``merge(a, b)`` over states with the component axis last (f32)."""
    env = {f"a.{c}": a[..., i] for i, c in enumerate(r.state)}
    env.update({f"b.{c}": b[..., i] for i, c in enumerate(r.state)})
    with np.errstate(all="ignore"):
        for name, e in r.lets:
            env[name] = eval_expr(e, env)
        outs = [np.broadcast_to(eval_expr(e, env), np.broadcast_shapes(a.shape[:-1],
                                                                       b.shape[:-1]))
                for e in r.merge]
    return np.stack(outs, -1).astype(_F32)


def lift(r: Reducer, x: np.ndarray) -> np.ndarray:
    env = {"x": np.asarray(x, _F32)}
    return np.stack([np.broadcast_to(eval_expr(e, env), env["x"].shape) for e in r.lift],
                    -1).astype(_F32)


# =============================================================================================
# seeded / masked reductions
# =============================================================================================
def _check_kind(kind: str, dt: DType, what: str) -> None:
    if kind not in ("sum", "max", "min"):
        raise InvalidArgumentError(bad_choice(f"{what} kind", kind, ("sum", "max", "min")))
    if dt is DType.BOOL and kind == "sum":
        raise InvalidArgumentError(f"{what} sum: bool has no arithmetic; Cast x to an integer "
                                   f"dtype first")
    if dt is DType.F8E8M0 and kind == "sum":
        raise InvalidArgumentError(f"{what} sum: f8e8m0 has no zero and no sign; Cast x to f32 "
                                   f"first")


def _prepare(x, seed, mask, axes, what):
    x = np.asarray(x)
    dt = dtype_of(x)
    require_evaluable(dt, what)
    ax = normalize_axes(axes, x.ndim, what)
    f, batch, keep_shape = _fibers(x, ax)
    s = np.asarray(seed)
    if dtype_of(s) is not dt:
        raise InvalidArgumentError(f"{what}: seed has dtype {dtype_of(s)}, x has {dt}; the seed "
                                   f"is a state of x's dtype")
    if s.shape not in (batch, keep_shape):
        raise InvalidArgumentError(f"{what}: seed has shape {s.shape}; expected {batch} (or "
                                   f"{keep_shape})")
    s = s.reshape(batch)
    if mask is None:
        valid = np.ones(f.shape, bool)
    else:
        m = np.asarray(mask)
        if m.dtype != np.bool_ or m.shape != x.shape:
            raise InvalidArgumentError(f"{what}: mask must be a bool array of x's shape "
                                       f"{x.shape}, got {m.dtype} {m.shape}")
        valid = _fibers(m, ax)[0]
    return x, dt, ax, f, valid, s, batch, keep_shape


def _valid_pairwise(v: np.ndarray, ok: np.ndarray, op: Callable) -> tuple[np.ndarray, np.ndarray]:
    """Balanced pairwise tree over the valid leaves (partials carry validity): an invalid
    partial is absent, never a padding value."""
    while v.shape[-1] > 1:
        m = v.shape[-1]
        a, b = v[..., 0:m - 1:2], v[..., 1:m:2]
        oa, ob = ok[..., 0:m - 1:2], ok[..., 1:m:2]
        pair = np.where(oa & ob, op(a, b), np.where(oa, a, b))
        pok = oa | ob
        if m % 2:
            pair, pok = np.concatenate([pair, v[..., m - 1:]], -1), \
                np.concatenate([pok, ok[..., m - 1:]], -1)
        v, ok = pair, pok
    return v[..., 0], ok[..., 0]


def _seeded_fibers(f, valid, s, dt: DType, kind: str, policy: str) -> np.ndarray:
    n = f.shape[-1]
    if dt is DType.BOOL:
        if kind == "max":
            return s | np.any(valid & f, -1)
        return s & np.all(~valid | f, -1)
    if dt.is_int:
        if kind == "sum":  # modular: every order gives the same result
            tot = np.where(valid, f, 0).astype(np.int64).sum(-1) + s.astype(np.int64)
            return tot.astype(dt.storage)
        ii = np.iinfo(f.dtype)
        pad = ii.min if kind == "max" else ii.max  # an exact identity of integer max / min
        red = np.where(valid, f, pad)
        r = red.max(-1, initial=pad) if kind == "max" else red.min(-1, initial=pad)
        return np.maximum(s, r) if kind == "max" else np.minimum(s, r)
    v, z = widen(f, dt), widen(s, dt)
    with np.errstate(all="ignore"):
        if kind == "sum":
            if policy == "fold_left":
                acc = z
                for i in range(n):
                    acc = np.where(valid[..., i], acc + v[..., i], acc)
            elif policy == "fold_right":
                acc = z
                for i in range(n - 1, -1, -1):
                    acc = np.where(valid[..., i], v[..., i] + acc, acc)
            else:
                if n == 0:
                    acc = z
                else:
                    t, tok = _valid_pairwise(v, valid, np.add)
                    acc = np.where(tok, z + t, z)
        else:
            acc = z
            for i in range(n):  # max / min are exact: every policy gives this value
                acc = np.where(valid[..., i], _pick(acc, v[..., i], kind == "max"), acc)
    return round_to(np.asarray(acc, _F32), dt)


def seeded_reduce(x: np.ndarray, seed: np.ndarray, kind: str = "sum",
                  axes: int | tuple[int, ...] | None = None, *, mask: np.ndarray | None = None,
                  policy: str = "unordered_tree", keepdim: bool = False) -> np.ndarray:
    """Reference result of ``SeededReduce`` / ``MaskedReduce`` (module docstring)."""
    if policy not in POLICIES:
        raise InvalidArgumentError(bad_choice("seeded_reduce policy", policy, POLICIES))
    x, dt, _ax, f, valid, s, batch, keep_shape = _prepare(x, seed, mask, axes, "seeded_reduce")
    _check_kind(kind, dt, "seeded_reduce")
    out = np.asarray(_seeded_fibers(f, valid, s, dt, kind, policy), dt.storage)
    return out.reshape(keep_shape if keepdim else batch)


def _patterns(valid: np.ndarray):
    """(pattern, selector) per distinct validity pattern of the fibers (rows)."""
    flat = valid.reshape(-1, valid.shape[-1])
    if flat.shape[0] == 0:
        return []
    pats, inv = np.unique(flat, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    return [(p, inv == i) for i, p in enumerate(pats)]


def seeded_admits(result: np.ndarray, x: np.ndarray, seed: np.ndarray, kind: str = "sum",
                  axes: int | tuple[int, ...] | None = None, *, mask: np.ndarray | None = None,
                  policy: str = "unordered_tree",
                  enumerate_max: int = ENUMERATE_MAX) -> Admission:
    """Whether each element of ``result`` is admitted. Float sums under a tree policy: the
    leaves are ``[seed, active x...]`` (the seed first for ordered_tree, anywhere for
    unordered_tree), decided like ``reductions.admits`` (enumeration up to ``enumerate_max``
    leaves, the rigorous bound beyond); everything else is exact (equality with the
    reference)."""
    x, dt, ax, f, valid, s, batch, keep_shape = _prepare(x, seed, mask, axes, "seeded_admits")
    _check_kind(kind, dt, "seeded_admits")
    r0 = np.asarray(result)
    if r0.shape not in (batch, keep_shape):
        raise InvalidArgumentError(f"seeded_admits: result has shape {r0.shape}; expected "
                                   f"{batch}")
    r = r0.reshape(batch)
    if not dt.is_float or kind != "sum" or policy.startswith("fold") or f.shape[-1] == 0:
        ok = _same(r, _seeded_fibers(f, valid, s, dt, kind, policy), dt, "seeded_admits")
        how = "equality with the reference"
        method = "exact"
    else:
        if dtype_of(r) is not dt:
            raise InvalidArgumentError(f"seeded_admits: result has dtype {dtype_of(r)}, x has "
                                       f"{dt}")
        v, z, rw = widen(f, dt), widen(s, dt), widen(r, dt)
        fv, fz, fr = (v.reshape(-1, v.shape[-1]), z.reshape(-1), rw.reshape(-1))
        ok = np.zeros(fr.shape, bool)
        methods = set()
        for pat, sel in _patterns(valid):
            leaves = np.concatenate([fz[sel][:, None], fv[sel][:, pat]], -1)
            if leaves.shape[-1] == 1:
                ok[sel] = _same_f32(fr[sel], leaves[:, 0])
                methods.add("exact")
                continue
            o, m, _ = _tree_admits(leaves, fr[sel], dt, policy == "unordered_tree", None,
                                   enumerate_max)
            ok[sel] = o
            methods.add(m)
        ok = ok.reshape(batch)
        method = "bound" if "bound" in methods else ("enumeration" if "enumeration" in methods
                                                     else "exact")
        how = ("every tree over the seed and the active contributions "
               f"({'any permutation' if policy == 'unordered_tree' else 'seed leftmost'})")
    detail = (f"seeded {kind} of {dt} over axes {ax} under {policy}: {how}; "
              f"{int(ok.sum())}/{ok.size} admitted")
    if not ok.all():
        detail += f"; first rejected at output index {tuple(int(i) for i in np.argwhere(~ok)[0])}"
    return Admission(ok.reshape(r0.shape), np.full(r0.shape, method), detail)


# =============================================================================================
# custom reducers
# =============================================================================================
def check_custom(r: Reducer, policy: str, what: str) -> None:
    """The policy/contract rules (also the type rule's): a tree needs a merge contract, an
    unordered tree a commutative merge."""
    if policy in TREES and not r.merge_contract:
        raise InvalidArgumentError(
            f"{what}: policy {policy} needs a merge contract, and reducer {r.name!r} declares "
            f"none (Tile design: 'diagnose the missing contract and suggest a fold policy'); use "
            f"policy='fold_left' or 'fold_right'")
    if policy == "unordered_tree" and not r.law("commutative"):
        raise InvalidArgumentError(
            f"{what}: unordered_tree permutes contributions and reducer {r.name!r} declares no "
            f"commutative law; use ordered_tree or a fold")


def custom_prepare(x, seed, r: Reducer, axes, what):
    x = np.asarray(x)
    dt = dtype_of(x)
    if not dt.is_float or dt is DType.F8E8M0:
        raise InvalidArgumentError(f"{what}: reducer {r.name!r} takes a float x (f32, f16, "
                                   f"bf16, fp8e4m3, fp8e5m2), got {dt}; Cast x first")
    require_evaluable(dt, what)
    ax = normalize_axes(axes, x.ndim, what)
    f, batch, keep_shape = _fibers(x, ax)
    s = np.asarray(seed)
    S = len(r.state)
    if s.dtype != np.float32 or s.shape not in ((*batch, S), (*keep_shape, S)):
        raise InvalidArgumentError(f"{what}: seed must be an f32 array of shape {(*batch, S)} "
                                   f"(the reduced shape plus the {S} state components "
                                   f"{r.state}), got {s.dtype} {s.shape}")
    return ax, lift(r, widen(f, dt)), s.reshape(*batch, S), batch, keep_shape


def _custom_fibers(r: Reducer, leaves: np.ndarray, seed: np.ndarray, policy: str) -> np.ndarray:
    """leaves (..., n, S) lifted contributions; seed (..., S)."""
    n = leaves.shape[-2]
    acc = seed
    if policy == "fold_right":
        for i in range(n - 1, -1, -1):
            acc = merge_states(r, leaves[..., i, :], acc)
        return acc
    if policy == "fold_left" or n == 0:
        for i in range(n):
            acc = merge_states(r, acc, leaves[..., i, :])
        return acc
    t = np.moveaxis(leaves, -2, 0)  # the pairwise tree over the leaves, then the seed
    while t.shape[0] > 1:
        m = t.shape[0]
        pair = merge_states(r, t[0:m - 1:2], t[1:m:2])
        t = np.concatenate([pair, t[m - 1:]], 0) if m % 2 else pair
    return merge_states(r, seed, t[0])


def custom_reduce(x: np.ndarray, seed: np.ndarray, reducer_name: str = "welford",
                  axes: int | tuple[int, ...] | None = None, *, policy: str = "fold_left",
                  keepdim: bool = False) -> np.ndarray:
    """Reference result of ``CustomReduce``: an f32 state array, components last."""
    r = reducer(reducer_name)
    if policy not in POLICIES:
        raise InvalidArgumentError(bad_choice("custom_reduce policy", policy, POLICIES))
    check_custom(r, policy, "custom_reduce")
    _ax, leaves, s, batch, keep_shape = custom_prepare(x, seed, r, axes, "custom_reduce")
    out = _custom_fibers(r, leaves, s, policy)
    return out.reshape((*keep_shape, len(r.state)) if keepdim else (*batch, len(r.state)))


def merge_trees(leaves: list, merge: Callable[[Any, Any], Any], unordered: bool) -> list:
    """Every merge tree over ``leaves`` (any values; ``merge(a, b)`` builds a node): the
    bracketings in leaf order, or (``unordered``) every split into two non-empty sets with both
    operand orders — the admitted set of a tree policy (the validator enumerates the same
    trees over Z3 terms, D537)."""
    memo: dict = {}

    def ordered(i: int, j: int) -> list:
        if j - i == 1:
            return [leaves[i]]
        if (i, j) not in memo:
            memo[(i, j)] = [merge(a, b) for k in range(i + 1, j)
                            for a in ordered(i, k) for b in ordered(k, j)]
        return memo[(i, j)]

    def anyorder(s: tuple) -> list:
        if len(s) == 1:
            return [leaves[s[0]]]
        if s not in memo:  # every split into two non-empty sets, both operand orders
            out = []
            rest = s[1:]
            for k in range(len(rest)):
                for extra in combinations(rest, k):
                    left = (s[0], *extra)
                    right = tuple(i for i in rest if i not in extra)
                    for a in anyorder(left):
                        for b in anyorder(right):
                            out += [merge(a, b), merge(b, a)]
            memo[s] = out
        return memo[s]

    n = len(leaves)
    return anyorder(tuple(range(n))) if unordered else ordered(0, n)


def reducer_trees(cols: list, r: Reducer, unordered: bool) -> list[np.ndarray]:
    """Every f32 tree result over the leaf columns (each (..., S))."""
    return merge_trees(cols, lambda a, b: merge_states(r, a, b), unordered)


def _same_state(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.all(_same_f32(np.asarray(a, _F32), np.asarray(b, _F32)), -1)


def custom_admits(result: np.ndarray, x: np.ndarray, seed: np.ndarray,
                  reducer_name: str = "welford", axes: int | tuple[int, ...] | None = None, *,
                  policy: str = "fold_left", enumerate_max: int = ENUMERATE_MAX) -> Admission:
    """Whether each result state is admitted (module docstring). Raises InvalidArgumentError
    for a tree policy over more leaves than ``enumerate_max`` when no bound is sound for the
    reducer (every component but an f32 sum or an exact-law one)."""
    r = reducer(reducer_name)
    check_custom(r, policy, "custom_admits")
    ax, leaves, s, batch, keep_shape = custom_prepare(x, seed, r, axes, "custom_admits")
    S = len(r.state)
    r0 = np.asarray(result)
    if r0.dtype != np.float32 or r0.shape not in ((*batch, S), (*keep_shape, S)):
        raise InvalidArgumentError(f"custom_admits: result must be f32 of shape {(*batch, S)}, "
                                   f"got {r0.dtype} {r0.shape}")
    rr = r0.reshape(*batch, S)
    n = leaves.shape[-2]
    if policy.startswith("fold") or n == 0:
        ok = _same_state(rr, _custom_fibers(r, leaves, s, policy))
        method, how = "exact", "equality with the reference fold"
    elif n + 1 <= (enumerate_max if policy == "ordered_tree" else min(enumerate_max, 5)):
        cols = [s] + [leaves[..., i, :] for i in range(n)]
        ok = np.zeros(batch, bool)
        for c in reducer_trees(cols, r, policy == "unordered_tree"):
            ok |= _same_state(rr, c)
        method = "enumeration"
        how = f"every f32 merge tree over the seed and {n} lifted contributions enumerated"
    elif getattr(r, "declared", False):  # a program's own reducer: the declared-law enclosure
        from tilefoundry.semantics.declared_enclosure import declared_tree_admits

        ok, how = declared_tree_admits(r, rr, leaves, s, policy == "unordered_tree")
        method = "bound"
    elif r.name == "welford":  # any length: the sound bound of every merge tree
        from tilefoundry.semantics.reducer_bounds import welford_tree_bounds

        _, lo, hi = welford_tree_bounds(leaves, s)
        with np.errstate(invalid="ignore"):
            v = rr.astype(np.float64)
            ok = np.all((v >= lo) & (v <= hi), -1)
        method = "bound"
        how = (f"every f32 merge tree over the seed and {n} lifted contributions, bounded from "
               f"the pooled statistics (reducer_bounds; the merge expressions are not read)")
    elif r.name == "sum_max":
        v = np.concatenate([s[..., :1], leaves[..., 0]], -1)
        ok_sum, _, _ = _tree_admits(v, rr[..., 0], DType.F32, policy == "unordered_tree", None,
                                    enumerate_max)
        mx = _custom_fibers(r, leaves, s, "fold_left")[..., 1]
        ok = ok_sum & _same_f32(rr[..., 1], mx)
        method, how = "bound", "sum component by the rigorous sum bound, max exact"
    else:
        raise InvalidArgumentError(
            f"custom_admits: {policy} over {n + 1} leaves of reducer {r.name!r}: its f32 merge "
            f"is not associative and no sound bound is implemented beyond {enumerate_max} "
            f"leaves; judge a fold policy or shorter fibers")
    detail = (f"{r.name} over axes {ax} under {policy}: {how}; {int(ok.sum())}/{ok.size} "
              f"admitted")
    if not ok.all():
        detail += f"; first rejected at output index {tuple(int(i) for i in np.argwhere(~ok)[0])}"
    return Admission(ok.reshape(r0.shape[:-1]), np.full(r0.shape[:-1], method), detail)
