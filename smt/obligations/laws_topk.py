"""Top-K merge as a combine law (split out of ``smt/obligations/laws.py`` by concern, D440): the
candidate encoding on the composite key, the merge ``take_K(sort(a ∪ b))``, and
``check_topk_laws`` (associative, commutative, identity), cross-checked against
``semantics.ordering.topk_merge``. The obligations ``laws.topk_merge_k*`` are registered in
``laws.py``, which re-exports these names."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import z3

from tilefoundry.semantics.ordering import TopKState, topk_from, topk_merge
from tilefoundry.smt.framework import Outcome, ProveCtx
from tilefoundry.smt.obligations.laws_refute import _combine

# =============================================================================================
# Top-K merge
# =============================================================================================
IDX_BITS = 16
KEY_BITS_ABSTRACT = 4  # 16 distinct keys >= the 9 candidates of a 3-state law


def order_key(v: z3.BitVecRef) -> z3.BitVecRef:
    """An unsigned key of f32 bits, increasing with the value, with -0 and +0 equal."""
    sign = z3.Extract(31, 31, v) == 1
    return z3.If(v & 0x7FFFFFFF == 0, z3.BitVecVal(0x80000000, 32),
                 z3.If(sign, ~v, v | 0x80000000))


def composite_key(value: z3.BitVecRef, index: z3.BitVecRef, largest: bool = True,
                  nan: str = "last") -> z3.BitVecRef:
    """One unsigned key whose order (larger first) is the total key of a valid candidate:
    NaN placement, then the value (-0 == +0; all NaNs equal), then the index ascending."""
    is_nan = z3.fpIsNaN(z3.fpBVToFP(value, z3.Float32()))
    early = is_nan if nan == "first" else z3.Not(is_nan)
    vk = order_key(value) if largest else ~order_key(value)
    vk = z3.If(is_nan, z3.BitVecVal(0, 32), vk)
    return z3.Concat(z3.If(early, z3.BitVecVal(1, 1), z3.BitVecVal(0, 1)), vk, ~index)


KeyFn = Callable[[z3.BitVecRef, z3.BitVecRef, bool, str], z3.BitVecRef]


@dataclass(frozen=True)
class Cand:
    """One Top-K candidate slot: validity, an order key (larger first among valid slots) and
    the payload the state stores (f32 value bits, original index)."""

    valid: z3.BoolRef
    key: z3.BitVecRef
    value: z3.BitVecRef  # f32 bits
    index: z3.BitVecRef  # IDX_BITS bits

    @staticmethod
    def of(valid: z3.BoolRef, value: z3.BitVecRef, index: z3.BitVecRef, largest: bool = True,
           nan: str = "last", key_fn: KeyFn | None = None) -> Cand:
        """A real candidate: the key is ``composite_key`` (or ``key_fn``) of value and index."""
        return Cand(valid, (key_fn or composite_key)(value, index, largest, nan), value, index)

    @property
    def fp(self) -> z3.FPRef:
        return z3.fpBVToFP(self.value, z3.Float32())

    def fields(self) -> tuple:
        return (self.valid, self.key, self.value, self.index)

    def canonical(self) -> Cand:
        """Invalid slots hold zero bits and index -1 (D38) and key 0."""
        return Cand(self.valid, z3.If(self.valid, self.key, z3.BitVecVal(0, self.key.size())),
                    z3.If(self.valid, self.value, z3.BitVecVal(0, 32)),
                    z3.If(self.valid, self.index, z3.BitVecVal(-1, IDX_BITS)))


def before(p: Cand, q: Cand) -> z3.BoolRef:
    """``p`` strictly precedes ``q``: valid before invalid, then the larger key."""
    return z3.And(p.valid, z3.Or(z3.Not(q.valid), z3.UGT(p.key, q.key)))


def spec_before(p: Cand, q: Cand, largest: bool = True, nan: str = "last") -> z3.BoolRef:
    """The total key of D38 written out over the FP theory: valid first; NaN placement; the
    value (IEEE comparison, so -0 == +0); the index ascending."""
    pf, qf = p.fp, q.fp
    pn, qn = z3.fpIsNaN(pf), z3.fpIsNaN(qf)
    better = z3.fpGT(pf, qf) if largest else z3.fpLT(pf, qf)
    worse = z3.fpGT(qf, pf) if largest else z3.fpLT(qf, pf)
    idx_lt = z3.ULT(p.index, q.index)
    nan_first = pn if nan == "first" else z3.Not(pn)
    return z3.If(p.valid != q.valid, p.valid,
                 z3.If(z3.Not(p.valid), False,
                       z3.If(pn != qn, nan_first,
                             z3.If(pn, idx_lt,
                                   z3.If(better, True, z3.If(worse, False, idx_lt))))))


def _cx(p: Cand, q: Cand) -> tuple[Cand, Cand]:
    """Compare-exchange: swap when ``q`` strictly precedes ``p`` (ties keep their order)."""
    sw = before(q, p)
    first = Cand(*(z3.If(sw, y, x) for x, y in zip(p.fields(), q.fields(), strict=True)))
    second = Cand(*(z3.If(sw, x, y) for x, y in zip(p.fields(), q.fields(), strict=True)))
    return first, second


def encode_topk_merge(a: Sequence[Cand], b: Sequence[Cand], k: int) -> list[Cand]:
    """``take_K(sort(a ∪ b))`` as a selection network: K bubble passes over the concatenation,
    pass r carrying the r-th candidate of the order to slot r (a stable sort of its first K
    slots), then invalid slots made canonical."""
    u = [*a, *b]
    n = len(u)
    for r in range(min(k, n)):
        for j in range(n - 1, r, -1):
            u[j - 1], u[j] = _cx(u[j - 1], u[j])
    out = [c.canonical() for c in u[:k]]
    key_w = u[0].key.size() if u else KEY_BITS_ABSTRACT
    while len(out) < k:
        out.append(_invalid(key_w))
    return out


def _invalid(key_bits: int) -> Cand:
    return Cand(z3.BoolVal(False), z3.BitVecVal(0, key_bits), z3.BitVecVal(0, 32),
                z3.BitVecVal(-1, IDX_BITS))


def _abstract(prefix: str, n: int, key_bits: int = KEY_BITS_ABSTRACT) -> list[Cand]:
    """Candidates whose key is a free ``key_bits``-bit value and whose payload is free."""
    return [Cand(z3.Bool(f"{prefix}{i}_valid"), z3.BitVec(f"{prefix}{i}_key", key_bits),
                 z3.BitVec(f"{prefix}{i}_value", 32), z3.BitVec(f"{prefix}{i}_index", IDX_BITS))
            for i in range(n)]


def _same(xs: Sequence[Cand], ys: Sequence[Cand]) -> z3.BoolRef:
    return z3.And(*[z3.And(*[f == g for f, g in zip(x.fields(), y.fields(), strict=True)])
                    for x, y in zip(xs, ys, strict=True)])


def _distinct_keys(cs: Sequence[Cand]) -> list[z3.BoolRef]:
    return [z3.Implies(z3.And(p.valid, q.valid), p.key != q.key)
            for p, q in itertools.combinations(cs, 2)]


def _well_formed(s: Sequence[Cand]) -> list[z3.BoolRef]:
    """A K-slot state as topk_from / topk_merge build it: valid slots first, strictly in key
    order, invalid slots canonical."""
    out = [z3.Implies(s[i + 1].valid, before(s[i], s[i + 1])) for i in range(len(s) - 1)]
    out += [z3.Implies(z3.Not(c.valid), z3.And(c.key == 0, c.value == 0,
                                               c.index == 2 ** IDX_BITS - 1)) for c in s]
    return out + _distinct_keys(s)


def _show(cs: Sequence[Cand], name: str) -> dict[str, z3.ExprRef]:
    out: dict[str, z3.ExprRef] = {}
    for i, c in enumerate(cs):
        out[f"{name}[{i}].valid"] = z3.If(c.valid, z3.BitVecVal(1, 1), z3.BitVecVal(0, 1))
        out[f"{name}[{i}].key"] = c.key
        out[f"{name}[{i}].value"] = c.value
        out[f"{name}[{i}].index"] = c.index
    return out


def _concrete_state(s: TopKState, row: int, key_fn: KeyFn) -> list[Cand]:
    vals = s.values[row].view(np.uint32).tolist()
    return [Cand.of(z3.BoolVal(bool(v)), z3.BitVecVal(int(x), 32),
                    z3.BitVecVal(int(i), IDX_BITS), s.largest, s.nan, key_fn)
            for v, x, i in zip(s.valid[row].tolist(), vals, s.indices[row].tolist(),
                               strict=True)]


def _topk_crosscheck(k: int, largest: bool, nan: str, merge: Callable[..., list[Cand]],
                     key_fn: KeyFn, n_cases: int = 32) -> tuple[int, dict[str, str] | None]:
    """``merge`` on real candidates == ordering.topk_merge, on states built by topk_from from
    random chunks of special values (±0, ±inf, NaN, repeated values)."""
    rng = np.random.default_rng(2)
    pool = np.array([0.0, -0.0, 1.0, -1.0, 2.0, np.inf, -np.inf, np.nan, 1.0, 0.5],
                    np.float32)
    for case in range(n_cases):
        la, lb = int(rng.integers(0, 5)), int(rng.integers(0, 5))
        xa, xb = rng.choice(pool, la), rng.choice(pool, lb)
        sa = topk_from(xa.reshape(1, -1), k, 0, largest=largest, nan=nan)
        sb = topk_from(xb.reshape(1, -1), k, 10, largest=largest, nan=nan)
        ref = topk_merge(sa, sb)
        enc = merge(_concrete_state(sa, 0, key_fn), _concrete_state(sb, 0, key_fn), k)
        got = [(z3.is_true(z3.simplify(c.valid)), z3.simplify(c.value).as_long(),
                z3.simplify(c.index).as_long()) for c in enc]
        want = [(bool(v), int(x), int(i) & (2 ** IDX_BITS - 1)) for v, x, i in
                zip(ref.valid[0].tolist(), ref.values[0].view(np.uint32).tolist(),
                    ref.indices[0].tolist(), strict=True)]
        if got != want:
            return case + 1, {"a": str(xa.tolist()), "b (indices from 10)": str(xb.tolist()),
                              "encoded (valid, bits, index)": str(got),
                              "topk_merge": str(want)}
    return n_cases, None


ORDERINGS = ((True, "last"), (False, "last"), (True, "first"), (False, "first"))


def check_topk_laws(ctx: ProveCtx, k: int, n: int = 3,
                    orderings: Sequence[tuple[bool, str]] = ORDERINGS,
                    merge: Callable[..., list[Cand]] = encode_topk_merge,
                    empty: Callable[[int], list[Cand]] | None = None,
                    key_fn: KeyFn = composite_key) -> Outcome:
    """The Top-K merge laws. ``merge`` / ``empty`` / ``key_fn`` exist to plant bugs in tests.

    1. lemma (full width, symbolic f32 values and indices), per (largest, nan) ordering:
       ``composite_key`` order == the total key of D38 written over the FP theory
       (``spec_before``);
    2. concrete, per ordering: the merge on real candidates == ``ordering.topk_merge``;
    3. associativity and commutativity over candidate lists of ``n`` slots and the identity on
       well-formed K-slot states, with free ``KEY_BITS_ABSTRACT``-bit keys (distinct among valid
       candidates) and free payloads. The merge reads keys only through comparisons, so an
       order-preserving relabelling of the <= 3n real keys into 4 bits maps any real
       counterexample to one of these: the laws hold for the real keys of step 1.
    """
    res: list[tuple[str, str, dict[str, str] | None]] = []
    cases = 0
    for largest, nan in orderings:
        tag = f"largest={largest}, nan={nan}"
        p, q = (Cand.of(z3.Bool(f"{n}_valid"), z3.BitVec(f"{n}_value", 32),
                        z3.BitVec(f"{n}_index", IDX_BITS), largest, nan, key_fn) for n in "pq")
        res.append((f"lemma ({tag}): composite key order == the D38 total key", *ctx.prove(
            before(p, q) == spec_before(p, q, largest, nan), f"topk_key_order_{largest}_{nan}",
            assumptions=(z3.Implies(z3.And(p.valid, q.valid), p.index != q.index),),
            show={"p.valid": p.valid, "p.value": p.fp, "p.index": p.index, "q.valid": q.valid,
                  "q.value": q.fp, "q.index": q.index})))
        n_cases, bad = _topk_crosscheck(k, largest, nan, merge, key_fn)
        cases += n_cases
        res.append((f"crosscheck ({tag}) with ordering.topk_merge",
                     "counterexample" if bad else "proved", bad))

    def m(x: Sequence[Cand], y: Sequence[Cand]) -> list[Cand]:
        return merge(x, y, k)

    a, b, c = _abstract("a", n), _abstract("b", n), _abstract("c", n)
    ab = m(a, b)
    left, right = m(ab, c), m(a, m(b, c))
    res.append(("associative", *ctx.prove(
        _same(left, right), f"topk_k{k}_assoc", assumptions=tuple(_distinct_keys([*a, *b, *c])),
        show={**_show(a, "a"), **_show(b, "b"), **_show(c, "c"), **_show(left, "(ab)c"),
              **_show(right, "a(bc)")})))
    ba = m(b, a)
    res.append(("commutative", *ctx.prove(
        _same(ab, ba), f"topk_k{k}_comm", assumptions=tuple(_distinct_keys([*a, *b])),
        show={**_show(a, "a"), **_show(b, "b"), **_show(ab, "ab"), **_show(ba, "ba")})))
    s = _abstract("s", k)
    e = empty(k) if empty is not None else [_invalid(KEY_BITS_ABSTRACT) for _ in range(k)]
    es, se = m(e, s), m(s, e)
    res.append(("identity (both sides, well-formed states)", *ctx.prove(
        z3.And(_same(es, s), _same(se, s)), f"topk_k{k}_identity",
        assumptions=tuple(_well_formed(s)),
        show={**_show(s, "s"), **_show(es, "merge(e,s)"), **_show(se, "merge(s,e)")})))
    return _combine(res, f"K={k}: key order == D38 total key for largest/smallest x nan "
                         f"last/first (symbolic f32 values and indices); associative and "
                         f"commutative over candidate "
                         f"lists of <= {n} (every length 0..{n}), identity on well-formed "
                         f"K-slot states (keys abstracted to {KEY_BITS_ABSTRACT} bits, see "
                         f"docstring); topk_merge agrees on {cases} concrete merges")
