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
from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import z3

from tilefoundry.semantics.combine_laws import COMBINE_LAWS, REDUCE_COMBINES
from tilefoundry.semantics.dtypes import apply_lowp, from_bits, to_bits
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.reductions import fold_left, fold_right, reduce
from tilefoundry.smt.framework import Outcome, ProveCtx, obligation
from tilefoundry.smt.obligations.laws_refute import (
    _RNE,
    Var,
    _bits_np,
    _combine,
    _differ,
    _f32,
    _finite,
    _np32,
    _np_differ,
    identity_bits,
    refute,
)
from tilefoundry.smt.obligations.laws_topk import (
    ORDERINGS,
    Cand,
    check_topk_laws,
    encode_topk_merge,
)

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
# laws that fail: the obligations (the search is laws_refute.py)
# =============================================================================================
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

# the combines the table states associative on floats (semantics/combine_laws.py, D439)
for _dt in (DType.F32, DType.BF16, DType.FP8E4M3):
    for _kind in (r for r, c in REDUCE_COMBINES.items() if "float" in COMBINE_LAWS[c].associative):
        _reg(f"laws.{_kind}_{_dt.value}",
             f"{_kind} over {_dt} (NaN-propagating, -0 < +0): associative, commutative, "
             f"identity (all inputs)",
             lambda ctx, dt=_dt, kind=_kind: check_extremum_laws(ctx, dt, kind))

for _k in (1, 2):
    _reg(f"laws.topk_merge_k{_k}",
         f"Top-K merge take_K(sort(a ∪ b)), K={_k}: associative, commutative, identity",
         lambda ctx, k=_k: check_topk_laws(ctx, k))
