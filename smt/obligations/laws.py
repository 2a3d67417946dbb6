"""Merge-law obligations: which reduction merges may be regrouped, and which may not.

Proved (``expect="proved"``):

* ``laws.sum_i8`` / ``laws.sum_i32``: wraparound integer addition (bit-vectors) is associative,
  commutative and has the identity ``reductions.identity("sum", dt)`` (D34) — all inputs.
* ``laws.{max,min}_{f32,bf16,fp8e4m3}``: the project's max / min (D35: NaN propagates — the
  first NaN operand is returned — and ``-0 < +0``) is associative (bit-exact, NaN payloads
  included), commutative (bit-exact unless both operands are NaN: then NaN as a class) and has
  the empty-axis identity of D33 (``reductions.identity``: -inf / +inf, ∓448 for fp8e4m3) on
  both sides, bit-exact — all inputs. The order is written out: IEEE ``fpLT`` plus an explicit
  ``-0 < +0`` clause for f32 / bf16 (never Z3's ``fpMax``, whose ±0 result is unspecified); for
  fp8e4m3 the rank of the exact value (``FormatInfo.code_value``, -0 before +0) of every code.
* ``laws.topk_merge_k1`` / ``laws.topk_merge_k2``: the Top-K merge ``take_K(sort(a ∪ b))`` on
  the total key (valid, NaN placement, value with -0 == +0, index). A lemma over symbolic f32
  values and indices shows that one composite bit-vector key orders candidates exactly as the
  D38 key written over the FP theory (for largest / smallest × nan last / first); the laws —
  associativity and commutativity over candidate lists of up to 3 slots each (symbolic
  validity, so every length 0..3) and the all-invalid identity on well-formed K-slot states —
  are then proved with those keys abstracted to free 4-bit values distinct among valid
  candidates (sound because the merge reads keys only through comparisons; see
  ``check_topk_laws``), with free payloads.

Refuted (``expect="counterexample"``), each with the simplest concrete witness and the
intermediate values of both sides: ``laws.f32_add_assoc``, ``laws.bf16_add_assoc`` (bf16 via
widen–op–round, D20: exact widening to f32, f32 RNE addition, RNE rounding to FPSort(8, 8)),
``laws.fold_sub_left_right`` / ``laws.fold_add_left_right`` (``(z∘x0)∘x1`` vs ``x0∘(x1∘z)``)
and ``laws.welford_merge_assoc`` (Chan et al.'s (count, mean, M2) merge in f32). The witness is
found by a vectorized scan of structured values through the package's reference (numpy
float32, ``dtypes.apply_lowp``, ``reductions.fold_left`` / ``fold_right``), shrunk, and then
confirmed by Z3 in an independent FP-theory encoding, which must agree with the reference on
every intermediate value.

Every proved law is also cross-checked on concrete values against the package's reference
(``reductions.reduce``, ``ordering.topk_merge``) by substituting them into the encoding.
"""

from __future__ import annotations

import functools
import itertools
import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import z3

from tilefoundry.semantics.dtypes import apply_lowp, from_bits, to_bits
from tilefoundry.semantics.formats import FORMATS, DType, FormatInfo
from tilefoundry.semantics.ordering import TopKState, topk_from, topk_merge
from tilefoundry.semantics.reductions import fold_left, fold_right, identity, reduce
from tilefoundry.smt.framework import Outcome, ProveCtx, fmt_value, obligation

__all__ = [
    "ORDERINGS",
    "Cand",
    "Val",
    "Var",
    "check_extremum_laws",
    "check_int_sum_laws",
    "check_topk_laws",
    "encode_extremum",
    "encode_topk_merge",
    "identity_bits",
    "refute",
]

_RNE = z3.RNE()


def _bits_np(info: FormatInfo) -> type:
    return {8: np.uint8, 16: np.uint16, 32: np.uint32}[info.bits]


def identity_bits(kind: str, dt: DType) -> int:
    """Bit pattern of the HIR Reduce identity (``reductions.identity``) of ``kind`` in ``dt``."""
    return int(to_bits(identity(kind, dt).reshape(1))[0])


def _combine(results: list[tuple[str, str, dict[str, str] | None]], proved_detail: str
             ) -> Outcome:
    """One outcome from sub-queries (case, status, counterexample): the first non-proved wins."""
    sub = [(case, st) for case, st, _ in results]
    for case, st, cex in results:
        if st != "proved":
            what = {"counterexample": "fails", "failed": "the solver gave up on"}.get(st, st)
            return Outcome(st, f"{what}: {case}", cex, sub=sub)
    return Outcome("proved", proved_detail, sub=sub)


# =============================================================================================
# integer sums
# =============================================================================================
def check_int_sum_laws(ctx: ProveCtx, dt: DType, ident: int | None = None) -> Outcome:
    """Wraparound addition of ``dt`` (bit-vectors): associative, commutative, identity."""
    info = FORMATS[dt]
    w = info.bits
    e = identity_bits("sum", dt) if ident is None else ident
    a, b, c = z3.BitVecs("a b c", w)
    show = {"a": a, "b": b, "c": c}
    res: list[tuple[str, str, dict[str, str] | None]] = []
    # concrete: the bit-vector sum is the reference reduce(sum) (wraparound in the input dtype)
    rng = np.random.default_rng(1)
    lo, hi = np.iinfo(info.storage).min, np.iinfo(info.storage).max
    xs = np.concatenate([np.array([lo, hi, -1, 0, 1, lo, hi], info.storage),
                         rng.integers(lo, hi, 29, dtype=np.int64, endpoint=True).astype(
                             info.storage)]).reshape(-1, 3)
    bad = None
    for row in xs:
        ref = int(to_bits(reduce(row, "sum").reshape(1))[0])
        u = [int(v) for v in to_bits(row)]
        got = z3.simplify(z3.BitVecVal(u[0], w) + u[1] + u[2]).as_long()
        if got != ref:
            bad = {"inputs": str(row.tolist()), "encoded": f"{got:#x}", "reduce": f"{ref:#x}"}
            break
    res.append(("crosscheck with reductions.reduce(sum)", "counterexample" if bad else "proved",
                bad))
    res.append(("associative", *ctx.prove((a + b) + c == a + (b + c), f"sum_{dt}_assoc",
                                          show=show)))
    res.append(("commutative", *ctx.prove(a + b == b + a, f"sum_{dt}_comm", show=show)))
    res.append(("identity", *ctx.prove(z3.And(a + e == a, e + a == a), f"sum_{dt}_identity",
                                       show=show)))
    return _combine(res, f"{w}-bit wraparound sum: associative, commutative, identity {e:#x} "
                         f"(all 2^{3 * w} inputs); reduce(sum) agrees on {len(xs)} triples")


# =============================================================================================
# max / min (D35)
# =============================================================================================
@dataclass(frozen=True)
class Val:
    """A value of a float format: its bits, whether it is a NaN, and how it is ordered — an FP
    term (f32, bf16) or the rank of its exact value among the format's values (fp8e4m3)."""

    bits: z3.BitVecRef
    nan: z3.BoolRef
    fp: z3.FPRef | None = None
    rank: z3.BitVecRef | None = None

    def select(self, cond: z3.BoolRef, other: Val) -> Val:
        def pick(x, y):
            return None if x is None else z3.If(cond, x, y)

        return Val(z3.If(cond, self.bits, other.bits), z3.If(cond, self.nan, other.nan),
                   pick(self.fp, other.fp), pick(self.rank, other.rank))


@functools.cache
def rank_table(dt: DType) -> dict[int, int]:
    """Rank of every non-NaN code of ``dt`` in the order of max / min: by exact value
    (``FormatInfo.code_value``), and ``-0 < +0``."""
    info = FORMATS[dt]
    keyed = []
    for code in range(1 << info.bits):
        neg = bool(info.has_sign and code & info.sign_bit)
        v = info.code_value(code & (info.sign_bit - 1) if info.has_sign else code)
        if v is not None:
            keyed.append(((-v if neg else v), 0 if neg else 1, code))
    return {code: r for r, (_, _, code) in enumerate(sorted(keyed))}


def _decode(bits: z3.BitVecRef, dt: DType) -> Val:
    """f32 / bf16 (IEEE formats): the FP theory. Other formats: NaN by the descriptor and the
    value's rank from ``rank_table`` (an if-then-else over the codes)."""
    info = FORMATS[dt]
    if info.nan == "ieee":
        fp = z3.fpBVToFP(bits, z3.FPSort(info.ebits, info.mbits + 1))
        return Val(bits, z3.fpIsNaN(fp), fp=fp)
    w = info.bits
    rank: z3.BitVecRef = z3.BitVecVal(0, w)
    for code, r in rank_table(dt).items():
        rank = z3.If(bits == code, z3.BitVecVal(r, w), rank)
    mag = bits & (info.sign_bit - 1) if info.has_sign else bits
    nan = mag == info.nan_code if info.nan == "all_ones" else z3.BoolVal(False)
    return Val(bits, nan, rank=rank)


def value_lt(a: Val, b: Val) -> z3.BoolRef:
    """The strict order of max / min on non-NaN values: IEEE ``<`` plus ``-0 < +0`` written out
    (never ``fpMax``, whose result on ±0 is unspecified); the exact-value rank for fp8."""
    if a.rank is not None and b.rank is not None:
        return z3.ULT(a.rank, b.rank)
    x, y = a.fp, b.fp
    return z3.Or(z3.fpLT(x, y), z3.And(z3.fpIsZero(x), z3.fpIsZero(y), z3.fpIsNegative(x),
                                       z3.fpIsPositive(y)))


def encode_extremum(kind: str, a: Val, b: Val) -> Val:
    """``max`` / ``min`` of D35: a NaN operand propagates (the first one), otherwise the larger
    (smaller) under ``value_lt``; equal operands have equal bits."""
    if kind not in ("max", "min"):
        raise ValueError(f"kind must be 'max' or 'min', got {kind!r}")
    take_b = value_lt(a, b) if kind == "max" else value_lt(b, a)
    take_b = z3.And(z3.Not(a.nan), z3.Or(b.nan, take_b))
    return b.select(take_b, a)


def _special_values(dt: DType) -> np.ndarray:
    """Bit patterns of special and ordinary values of ``dt`` for concrete cross-checks."""
    info = FORMATS[dt]
    mags = {0, 1, info.max_code, 1 << info.mbits, (1 << info.mbits) - 1}
    one = int(to_bits(np.asarray([1.0], np.float32).astype(info.storage))[0])
    mags.add(one)
    if info.inf_code is not None:
        mags.add(info.inf_code)
    if info.nan_code is not None:
        mags.add(info.nan_code)
    if info.nan == "ieee":
        mags.add(info.inf_code + 1)  # a signaling NaN
    pats = sorted({*mags, *(m | info.sign_bit for m in mags)})
    return np.array(pats, _bits_np(info))


def check_extremum_laws(ctx: ProveCtx, dt: DType, kind: str, ident: int | None = None,
                        encoder: Callable[[str, Val, Val], Val] = encode_extremum) -> Outcome:
    """Associativity, commutativity and identity of ``kind`` over ``dt``; cross-checked with
    ``reductions.reduce``. ``ident`` / ``encoder`` exist to plant bugs in tests."""
    info = FORMATS[dt]
    w = info.bits
    e_bits = identity_bits(kind, dt) if ident is None else ident
    a, b, c = (_decode(z3.BitVec(n, w), dt) for n in "abc")
    e = _decode(z3.BitVecVal(e_bits, w), dt)

    def op(x: Val, y: Val) -> Val:
        return encoder(kind, x, y)

    res: list[tuple[str, str, dict[str, str] | None]] = []
    # concrete: op on all pairs of special values == reduce([x, y], kind) bit for bit
    pats = _special_values(dt)
    xa, xb = z3.BitVecs("xa xb", w)
    sym = op(_decode(xa, dt), _decode(xb, dt)).bits
    pairs = np.array(list(itertools.product(pats.tolist(), repeat=2)), _bits_np(info))
    ref = to_bits(reduce(from_bits(pairs, dt), kind, axes=-1))
    bad = None
    for (p, q), r in zip(pairs.tolist(), ref.tolist(), strict=True):
        got = z3.simplify(z3.substitute(sym, (xa, z3.BitVecVal(p, w)),
                                        (xb, z3.BitVecVal(q, w)))).as_long()
        if got != r:
            bad = {"x": f"{p:#x}", "y": f"{q:#x}", "encoded": f"{got:#x}",
                   f"reduce {kind}": f"{r:#x}"}
            break
    res.append((f"crosscheck with reductions.reduce({kind})", "counterexample" if bad else
                "proved", bad))
    ab, bc = op(a, b), op(b, c)
    left, right = op(ab, c), op(a, bc)
    show = {"a": a.bits, "b": b.bits, "c": c.bits}
    res.append(("associative (bit-exact)",
                *ctx.prove(left.bits == right.bits, f"{kind}_{dt}_assoc",
                           show={**show, "op(a,b)": ab.bits, "op(op(a,b),c)": left.bits,
                                 "op(b,c)": bc.bits, "op(a,op(b,c))": right.bits})))
    both_nan = z3.And(a.nan, b.nan)
    ba = op(b, a)
    res.append(("commutative (bit-exact unless both are NaN)",
                *ctx.prove(z3.If(both_nan, ab.nan, ab.bits == ba.bits),
                           f"{kind}_{dt}_comm",
                           show={**show, "op(a,b)": ab.bits, "op(b,a)": ba.bits})))
    ea, ae = op(e, a), op(a, e)
    res.append((f"identity {e_bits:#x} (both sides, bit-exact)",
                *ctx.prove(z3.And(ea.bits == a.bits, ae.bits == a.bits), f"{kind}_{dt}_identity",
                           show={"a": a.bits, "op(e,a)": ea.bits, "op(a,e)": ae.bits})))
    return _combine(res, f"{kind} over {dt} (NaN-propagating, -0 < +0): associative, "
                         f"commutative, identity {e_bits:#x}, over all inputs; reduce({kind}) "
                         f"agrees on {len(pairs)} pairs of special values")


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


# =============================================================================================
# laws that fail: counterexamples, shrunk and replayed through the reference
# =============================================================================================
@dataclass(frozen=True)
class Var:
    """A witness variable of a refutation: its name, bit-vector and float format."""

    name: str
    bits: z3.BitVecRef
    dt: DType

    @property
    def fp(self) -> z3.FPRef:
        info = FORMATS[self.dt]
        return z3.fpBVToFP(self.bits, z3.FPSort(info.ebits, info.mbits + 1))


def _to_float(bits: int, dt: DType) -> float:
    return float(from_bits(np.array([bits], _bits_np(FORMATS[dt])), dt)[0])


def _to_bits(v: float, dt: DType) -> int | None:
    """Bits of ``v`` in ``dt`` (f32 or bf16) when it is finite and exactly representable."""
    if not math.isfinite(v):
        return None
    try:
        u = struct.unpack("<I", struct.pack("<f", v))[0]
    except OverflowError:
        return None
    if struct.unpack("<f", struct.pack("<I", u))[0] != v:
        return None
    if dt is DType.F32:
        return u
    if dt is DType.BF16:
        return u >> 16 if u & 0xFFFF == 0 else None
    raise ValueError(f"witness values of {dt} are not supported")


def _complexity(v: float) -> float:
    """How hard a value is to read: 0 for zero; else 2 * significant bits + |exponent| (+ sign)."""
    if v == 0:
        return 0.25 if math.copysign(1, v) < 0 else 0.0
    mant, ex = math.frexp(abs(v))
    sig = 1
    while mant != int(mant):
        mant *= 2
        sig += 1
    return 2 * sig + abs(ex - 1) + (0.5 if v < 0 else 0.0)


def _moves(vals: list[float]) -> list[list[float]]:
    """Candidate simplifications of a witness: scale everything by 2^k; replace one value by a
    simpler one (0, ±1, fewer significant bits, a power of two, ±another value)."""
    out: list[list[float]] = []
    for k in range(-160, 161):
        if k:
            out.append([math.ldexp(v, k) for v in vals])
    for i, v in enumerate(vals):
        cands = [0.0, 1.0, -1.0, 2.0, 0.5, abs(v), float(round(v))]
        cands += [vals[j] for j in range(len(vals)) if j != i]
        cands += [-vals[j] for j in range(len(vals)) if j != i]
        if v != 0 and math.isfinite(v):
            mant, ex = math.frexp(v)
            cands += [math.ldexp(math.trunc(math.ldexp(mant, nb)), ex - nb) for nb in range(1, 25)]
            cands += [math.copysign(2.0 ** e2, v) for e2 in range(-30, 31)]
        out += [[*vals[:i], c, *vals[i + 1:]] for c in cands]
    return out


def _shrink(dts: list[DType], start: list[float],
            broken: Callable[[list[np.ndarray]], np.ndarray], max_rounds: int = 64
            ) -> list[float]:
    """Greedy, deterministic shrinking of a witness: take the simplest move (by total
    ``_complexity``) that keeps the law broken, until none does. ``broken`` is vectorized:
    one array per variable in, a boolean mask out."""
    cur = list(start)
    for _ in range(max_rounds):
        base = sum(map(_complexity, cur))
        moves = [m for m in _moves(cur)
                 if sum(map(_complexity, m)) < base
                 and all(_to_bits(v, dt) is not None for v, dt in zip(m, dts, strict=True))]
        if not moves:
            break
        cols = [np.array([m[i] for m in moves]) for i in range(len(cur))]
        ok = np.asarray(broken(cols), bool)
        if not ok.any():
            break
        cx = np.array([sum(map(_complexity, m)) for m in moves])
        cx[~ok] = np.inf
        cur = moves[int(np.argmin(cx))]
    return cur


def _subst(e: z3.ExprRef, vars_: list[Var], bits: list[int]) -> z3.ExprRef:
    return z3.simplify(z3.substitute(e, *[(v.bits, z3.BitVecVal(x, v.bits.size()))
                                          for v, x in zip(vars_, bits, strict=True)]))


def _fp_float(e: z3.ExprRef) -> float:
    """The value of a constant FP term as a Python float (sign of zero kept)."""
    if z3.is_true(z3.simplify(z3.fpIsNaN(e))):
        return math.nan
    neg = z3.is_true(z3.simplify(z3.fpIsNegative(e)))
    if z3.is_true(z3.simplify(z3.fpIsInf(e))):
        return -math.inf if neg else math.inf
    v = float(z3.simplify(z3.fpToReal(e)).as_fraction())
    return math.copysign(v, -1.0 if neg else 1.0)


def _same_float(x: float, y: float) -> bool:
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y and math.copysign(1, x) == math.copysign(1, y)


def _pool(dt: DType) -> np.ndarray:
    """Witness candidates for one variable: 0, ±1, ±3 and ±2^k over the format's precision."""
    p = FORMATS[dt].mbits + 3
    mags = [1.0, 3.0, *(2.0 ** k for k in range(-p, p + 1) if k)]
    return np.array([0.0, *mags, *(-m for m in mags)])


def refute(ctx: ProveCtx, label: str, vars_: list[Var], cond: z3.BoolRef,
           show: dict[str, z3.ExprRef],
           replay: Callable[[list[np.ndarray]], dict[str, np.ndarray]],
           broken: Callable[[dict[str, np.ndarray]], np.ndarray], what: str) -> Outcome:
    """Refute a law: scan every combination of ``_pool`` values through the package's
    reference (``replay``, vectorized) for the simplest one that breaks the law (``broken``),
    shrink it, then confirm it with Z3 in the independent encoding (``cond`` with the inputs
    pinned must be satisfiable) and check that the encoding and the reference agree on every
    intermediate value of ``show`` that ``replay`` returns.

    (Z3's own search for such witnesses — and ``ctx.find(minimize=...)`` — is slow and
    unstable on f32 arithmetic: it ran past the default rlimit in some process states, so the
    search is done concretely and Z3 checks the result.)"""
    dts = [v.dt for v in vars_]

    def bad(cols: list[np.ndarray]) -> np.ndarray:
        return np.asarray(broken(replay(cols)), bool)

    pools = [_pool(dt) for dt in dts]
    grids = [g.reshape(-1) for g in np.meshgrid(*pools, indexing="ij")]
    hit = bad(grids)
    if not hit.any():
        return Outcome("failed", f"{what}: no witness among {hit.size} pool combinations")
    cx = sum(g.reshape(-1) for g in np.meshgrid(
        *[np.array([_complexity(float(v)) for v in pool]) for pool in pools], indexing="ij"))
    start = [float(g[int(np.argmin(np.where(hit, cx, np.inf)))]) for g in grids]
    vals = _shrink(dts, start, bad)
    bits = [_to_bits(f, dt) for f, dt in zip(vals, dts, strict=True)]
    assert all(b is not None for b in bits)
    pins = [v.bits == b for v, b in zip(vars_, bits, strict=True)]
    st, _ = ctx.find(z3.And(cond, *pins), label)
    if st != "counterexample":
        return Outcome("failed" if st == "failed" else "error",
                       f"{what}: the witness {vals} breaks the law in the reference but the "
                       f"Z3 encoding says {st}")
    cex = {k: fmt_value(_subst(e, vars_, bits)) for k, e in show.items()}  # type: ignore[arg-type]
    ref = {k: float(np.asarray(v).reshape(-1)[0])
           for k, v in replay([np.array([f]) for f in vals]).items()}
    mismatch = [f"{k}: encoding {_fp_float(_subst(show[k], vars_, bits))!r}, reference {rv!r}"
                for k, rv in ref.items()
                if not _same_float(_fp_float(_subst(show[k], vars_, bits)), rv)]  # type: ignore[arg-type]
    if mismatch:
        return Outcome("error", f"{what}: the encoding and the reference disagree on the "
                                f"witness: " + "; ".join(mismatch), cex)
    args = ", ".join(f"{v.name}={f!r}" for v, f in zip(vars_, vals, strict=True))
    return Outcome("counterexample",
                   f"{what}: {args} (simplest witness over {hit.size} combinations, confirmed "
                   f"by Z3 in the FP-theory encoding; the reference replays the same "
                   f"intermediate values)", cex,
                   sub=[("reference scan", "counterexample"), ("z3 witness", st)])


def _f32(name: str) -> Var:
    return Var(name, z3.BitVec(name, 32), DType.F32)


def _finite(*xs: z3.FPRef) -> list[z3.BoolRef]:
    return [z3.Not(z3.Or(z3.fpIsNaN(x), z3.fpIsInf(x))) for x in xs]


def _differ(x: z3.FPRef, y: z3.FPRef) -> z3.BoolRef:
    return z3.And(z3.Not(z3.fpEQ(x, y)), *_finite(x, y))


def _np_differ(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.isfinite(x) & np.isfinite(y) & (x != y)


def _np32(cols: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(c, np.float64).astype(np.float32) for c in cols]


@obligation("laws.f32_add_assoc", expect="counterexample")
def f32_add_assoc(ctx: ProveCtx) -> Outcome:
    """f32 addition is not associative: (a+b)+c != a+(b+c) for some finite a, b, c."""
    va, vb, vc = _f32("a"), _f32("b"), _f32("c")
    a, b, c = va.fp, vb.fp, vc.fp
    ab, bc = z3.fpAdd(_RNE, a, b), z3.fpAdd(_RNE, b, c)
    left, right = z3.fpAdd(_RNE, ab, c), z3.fpAdd(_RNE, a, bc)
    show = {"a": a, "b": b, "c": c, "a+b": ab, "(a+b)+c": left, "b+c": bc, "a+(b+c)": right}

    def replay(f: list[np.ndarray]) -> dict[str, np.ndarray]:
        x, y, z = _np32(f)
        with np.errstate(all="ignore"):
            return {"a+b": x + y, "(a+b)+c": (x + y) + z, "b+c": y + z, "a+(b+c)": x + (y + z)}

    return refute(ctx, "f32_add_assoc", [va, vb, vc], _differ(left, right), show, replay,
                   lambda r: _np_differ(r["(a+b)+c"], r["a+(b+c)"]),
                   "f32 add is not associative")


@obligation("laws.bf16_add_assoc", expect="counterexample")
def bf16_add_assoc(ctx: ProveCtx) -> Outcome:
    """bf16 addition (widen-op-round, D20) is not associative."""
    bf = z3.FPSort(8, 8)
    vs = [Var(n, z3.BitVec(n, 16), DType.BF16) for n in "abc"]
    a, b, c = (v.fp for v in vs)

    def add(x: z3.FPRef, y: z3.FPRef) -> z3.FPRef:  # exact widening, f32 RNE add, RNE round
        wx, wy = z3.fpToFP(_RNE, x, z3.Float32()), z3.fpToFP(_RNE, y, z3.Float32())
        return z3.fpToFP(_RNE, z3.fpAdd(_RNE, wx, wy), bf)

    ab, bc = add(a, b), add(b, c)
    left, right = add(ab, c), add(a, bc)
    show = {"a": a, "b": b, "c": c, "a+b": ab, "(a+b)+c": left, "b+c": bc, "a+(b+c)": right}

    def replay(f: list[np.ndarray]) -> dict[str, np.ndarray]:
        x, y, z = (np.asarray(v, np.float64).astype(ml_dtypes.bfloat16) for v in f)
        xy, yz = apply_lowp(np.add, x, y), apply_lowp(np.add, y, z)
        return {k: v.astype(np.float64) for k, v in
                {"a+b": xy, "(a+b)+c": apply_lowp(np.add, xy, z), "b+c": yz,
                 "a+(b+c)": apply_lowp(np.add, x, yz)}.items()}

    return refute(ctx, "bf16_add_assoc", vs, _differ(left, right), show, replay,
                   lambda r: _np_differ(r["(a+b)+c"], r["a+(b+c)"]),
                   "bf16 add (widen to f32, add, round once to bf16) is not associative")


def _fold_obligation(ctx: ProveCtx, name: str, op_z3: Callable, op_np: np.ufunc,
                     sym: str) -> Outcome:
    vz, v0, v1 = _f32("z"), _f32("x0"), _f32("x1")
    z, x0, x1 = vz.fp, v0.fp, v1.fp
    l1 = op_z3(z, x0)
    left = op_z3(l1, x1)  # fold_left: op(op(z, x0), x1)
    r1 = op_z3(x1, z)
    right = op_z3(x0, r1)  # fold_right: op(x0, op(x1, z))
    kl, kr = f"(z{sym}x0){sym}x1", f"x0{sym}(x1{sym}z)"
    show = {"z": z, "x0": x0, "x1": x1, f"z{sym}x0": l1, kl: left, f"x1{sym}z": r1, kr: right}

    def replay(f: list[np.ndarray]) -> dict[str, np.ndarray]:
        zz, a0, a1 = _np32(f)
        xs = np.stack([a0, a1], -1)  # one fiber per candidate witness
        with np.errstate(all="ignore"):
            return {f"z{sym}x0": op_np(zz, a0), kl: fold_left(xs, op_np, seed=zz),
                    f"x1{sym}z": op_np(a1, zz), kr: fold_right(xs, op_np, seed=zz)}

    return refute(ctx, name, [vz, v0, v1], _differ(left, right), show, replay,
                   lambda r: _np_differ(r[kl], r[kr]),
                   f"fold_left != fold_right for the update s {sym} e (seed z, elements x0, x1)")


@obligation("laws.fold_sub_left_right", expect="counterexample")
def fold_sub_left_right(ctx: ProveCtx) -> Outcome:
    """fold_left and fold_right differ for a subtraction update: (z-x0)-x1 vs x0-(x1-z)."""
    return _fold_obligation(ctx, "fold_sub_left_right", lambda x, y: z3.fpSub(_RNE, x, y),
                            np.subtract, "-")


@obligation("laws.fold_add_left_right", expect="counterexample")
def fold_add_left_right(ctx: ProveCtx) -> Outcome:
    """fold_left and fold_right differ for f32 addition: (z+x0)+x1 vs x0+(x1+z)."""
    return _fold_obligation(ctx, "fold_add_left_right", lambda x, y: z3.fpAdd(_RNE, x, y),
                            np.add, "+")


def welford_merge_z3(s: tuple, t: tuple) -> tuple:
    """Chan et al.'s merge of (count, mean, M2) states in f32 RNE, left to right as written:
    n = na + nb; d = mb - ma; mean = ma + d * (nb / n); M2 = (M2a + M2b) + (d * d) * ((na * nb)
    / n)."""
    (na, ma, qa), (nb, mb, qb) = s, t
    n = z3.fpAdd(_RNE, na, nb)
    d = z3.fpSub(_RNE, mb, ma)
    mean = z3.fpAdd(_RNE, ma, z3.fpMul(_RNE, d, z3.fpDiv(_RNE, nb, n)))
    corr = z3.fpMul(_RNE, z3.fpMul(_RNE, d, d), z3.fpDiv(_RNE, z3.fpMul(_RNE, na, nb), n))
    return n, mean, z3.fpAdd(_RNE, z3.fpAdd(_RNE, qa, qb), corr)


def welford_merge_np(s: tuple, t: tuple) -> tuple:
    """The same merge in numpy float32."""
    (na, ma, qa), (nb, mb, qb) = s, t
    with np.errstate(all="ignore"):
        n = na + nb
        d = mb - ma
        return n, ma + d * (nb / n), (qa + qb) + (d * d) * ((na * nb) / n)


@obligation("laws.welford_merge_assoc", expect="counterexample")
def welford_merge_assoc(ctx: ProveCtx) -> Outcome:
    """A Welford-style (count, mean, M2) merge in f32 is not associative."""
    vs = [_f32(n) for n in ("a", "b", "c")]
    one, zero = z3.FPVal(1.0, z3.Float32()), z3.FPVal(0.0, z3.Float32())
    sa, sb, sc = ((one, v.fp, zero) for v in vs)  # the states of single elements a, b, c
    ab = welford_merge_z3(sa, sb)
    bc = welford_merge_z3(sb, sc)
    left, right = welford_merge_z3(ab, sc), welford_merge_z3(sa, bc)
    cond = z3.And(z3.Or(z3.Not(z3.fpEQ(left[1], right[1])), z3.Not(z3.fpEQ(left[2], right[2]))),
                  *_finite(left[1], right[1], left[2], right[2]))
    show = {"a": vs[0].fp, "b": vs[1].fp, "c": vs[2].fp,
            "mean(ab)": ab[1], "M2(ab)": ab[2], "mean((ab)c)": left[1], "M2((ab)c)": left[2],
            "mean(bc)": bc[1], "M2(bc)": bc[2], "mean(a(bc))": right[1], "M2(a(bc))": right[2]}

    def replay(f: list[np.ndarray]) -> dict[str, np.ndarray]:
        o, zz = np.float32(1), np.float32(0)
        ta, tb, tc = ((o, x, zz) for x in _np32(f))
        nab, nbc = welford_merge_np(ta, tb), welford_merge_np(tb, tc)
        lft, rgt = welford_merge_np(nab, tc), welford_merge_np(ta, nbc)
        return {"mean(ab)": nab[1], "M2(ab)": nab[2], "mean((ab)c)": lft[1],
                "M2((ab)c)": lft[2], "mean(bc)": nbc[1], "M2(bc)": nbc[2],
                "mean(a(bc))": rgt[1], "M2(a(bc))": rgt[2]}

    def broken(r: dict[str, np.ndarray]) -> np.ndarray:
        fin = np.logical_and.reduce([np.isfinite(r[k]) for k in
                                     ("mean((ab)c)", "mean(a(bc))", "M2((ab)c)", "M2(a(bc))")])
        return fin & ((r["mean((ab)c)"] != r["mean(a(bc))"]) | (r["M2((ab)c)"] != r["M2(a(bc))"]))

    return refute(ctx, "welford_merge_assoc", vs, cond, show, replay, broken,
                   "the f32 (count, mean, M2) merge of the single-element states of a, b, c "
                   "is not associative")


# =============================================================================================
# registration of the proved laws
# =============================================================================================
def _reg(name: str, doc: str, fn: Callable[[ProveCtx], Outcome]) -> None:
    fn.__doc__ = doc
    obligation(name)(fn)


for _dt in (DType.I8, DType.I32):
    _reg(f"laws.sum_{_dt.value}",
         f"wraparound {_dt} sum: associative, commutative, identity (all inputs)",
         lambda ctx, dt=_dt: check_int_sum_laws(ctx, dt))

for _dt in (DType.F32, DType.BF16, DType.FP8E4M3):
    for _kind in ("max", "min"):
        _reg(f"laws.{_kind}_{_dt.value}",
             f"{_kind} over {_dt} (NaN-propagating, -0 < +0): associative, commutative, "
             f"identity (all inputs)",
             lambda ctx, dt=_dt, kind=_kind: check_extremum_laws(ctx, dt, kind))

for _k in (1, 2):
    _reg(f"laws.topk_merge_k{_k}",
         f"Top-K merge take_K(sort(a ∪ b)), K={_k}: associative, commutative, identity",
         lambda ctx, k=_k: check_topk_laws(ctx, k))
