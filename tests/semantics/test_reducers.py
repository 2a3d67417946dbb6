"""Seeded / masked reductions and custom reducers (``semantics/reducers.py``) against an
independent model: Python loops over Fractions, each f32 operation rounded to nearest even by
hand (``_rn32``), signed zeros decided by the IEEE rule — no numpy float arithmetic in the
model. Worked examples of the Tile design are tests here too (each cites its sentence)."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import permutations

import numpy as np
import pytest

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.dtypes import DType, cast
from tilefoundry.semantics.reducers import (
    REDUCERS,
    custom_admits,
    custom_reduce,
    seeded_admits,
    seeded_reduce,
)

BIG = 2.0 ** 24
POLS = ("fold_left", "fold_right", "ordered_tree", "unordered_tree")


# --- the independent f32 model -----------------------------------------------------------------
def _rn32(q: Fraction) -> float:
    """q rounded to the nearest f32 (ties to even), as a Python float; inf past the top."""
    if q == 0:
        return 0.0
    s, a = (-1 if q < 0 else 1), abs(q)
    e = max(math.floor(math.log2(a)), -126)
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, -126)
    ulp = Fraction(2) ** (e - 23)
    n, rem = divmod(a, ulp)
    if rem * 2 > ulp or (rem * 2 == ulp and n % 2 == 1):
        n += 1
    v = n * ulp
    if v >= Fraction(2) ** 128:
        return s * math.inf
    return s * float(v)


def add32(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if math.isinf(a) or math.isinf(b):
        if math.isinf(a) and math.isinf(b) and a != b:
            return math.nan
        return a if math.isinf(a) else b
    q = Fraction(a) + Fraction(b)
    if q == 0:  # RNE: -0 only when both are -0
        return -0.0 if (a == 0 and b == 0 and math.copysign(1, a) < 0 and
                        math.copysign(1, b) < 0) else 0.0
    return _rn32(q)


def _op32(f, a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        raise AssertionError("the model takes finite values only")
    return _rn32(f(Fraction(a), Fraction(b)))


def mul32(a, b):
    return _op32(lambda x, y: x * y, a, b)


def div32(a, b):
    return _op32(lambda x, y: x / y, a, b)


def sub32(a, b):
    return add32(a, -b)


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                 math.copysign(1, b))


def _draw(rng, n):
    pool = np.array([0.0, -0.0, 1.0, -1.0, 0.1, 3.5, -2.25, 1e-3, 7e5, BIG, -BIG, 1e-40,
                     0.3333333], np.float32)
    return pool[rng.integers(0, pool.size, n)]


# --- seeded / masked folds: bit-exact against the model --------------------------------------
@pytest.mark.parametrize("policy", ["fold_left", "fold_right"])
def test_seeded_masked_folds_match_the_fraction_model(policy):
    rng = np.random.default_rng(23)
    x = _draw(rng, (40, 5))
    z = _draw(rng, (40,))
    m = rng.random((40, 5)) < 0.7
    got = seeded_reduce(x, z, "sum", 1, mask=m, policy=policy)
    for i in range(40):
        acc = float(z[i])
        idx = range(5) if policy == "fold_left" else range(4, -1, -1)
        for j in idx:
            if m[i, j]:
                acc = add32(acc, float(x[i, j])) if policy == "fold_left" else \
                    add32(float(x[i, j]), acc)
        assert same(float(got[i]), acc), (i, x[i], z[i], m[i], got[i], acc)


def test_seeded_masked_max_min_and_ints_match_loops():
    rng = np.random.default_rng(5)
    x = _draw(rng, (30, 4))
    x[0, 1] = np.nan
    z = _draw(rng, (30,))
    m = rng.random((30, 4)) < 0.6
    m[0] = [False, True, False, False]
    for kind in ("max", "min"):
        got = seeded_reduce(x, z, kind, 1, mask=m)
        for i in range(30):
            acc = float(z[i])
            for j in range(4):
                if not m[i, j]:
                    continue
                v = float(x[i, j])
                if math.isnan(acc):
                    continue
                if math.isnan(v):
                    acc = v
                    continue
                key = (v, math.copysign(1, v))  # -0 < +0
                cur = (acc, math.copysign(1, acc))
                if (key > cur) if kind == "max" else (key < cur):
                    acc = v
            assert same(float(got[i]), acc), (kind, i)
    xi = rng.integers(-128, 128, (20, 6)).astype(np.int8)
    zi = rng.integers(-128, 128, (20,)).astype(np.int8)
    mi = rng.random((20, 6)) < 0.5
    got = seeded_reduce(xi, zi, "sum", 1, mask=mi, policy="unordered_tree")
    want = [((int(zi[i]) + sum(int(v) for v, k in zip(xi[i], mi[i], strict=True) if k) + 128)
             % 256) - 128 for i in range(20)]
    assert got.tolist() == want


# --- the seed's position (Tile design policy table) --------------------------------------------
def test_seed_position_fold_left_first_fold_right_last():
    """'fold_left op(op(op(z, x0), x1), x2)', 'fold_right op(x0, op(x1, op(x2, z)))'."""
    x = np.array([1.0, 1.0, -BIG], np.float32)
    z = np.float32(BIG)
    # ((2^24 + 1) + 1) - 2^24 = 0: the seed absorbs both ones; seeding last would give 2
    assert seeded_reduce(x, z, "sum", policy="fold_left") == 0.0
    assert seeded_reduce(x[::-1].copy(), z, "sum", policy="fold_right") == 0.0
    assert seeded_reduce(x, z, "sum", policy="fold_right") == add32(1.0, add32(1.0, 0.0))


def _all_ordered(leaves):
    if len(leaves) == 1:
        return {leaves[0]}
    out = set()
    for k in range(1, len(leaves)):
        for a in _all_ordered(leaves[:k]):
            for b in _all_ordered(leaves[k:]):
                out.add(add32(a, b))
    return out


def test_tree_admitted_sets_place_the_seed_once():
    """ordered_tree 'preserve leaf order and the seed's reference position'; unordered_tree
    'seed exactly once'. x = [2^24, 1], z = 1: the seed-first trees give 2^24 only; the tree
    2^24 + (1 + 1) = 2^24 + 2 keeps the seed last — a permutation."""
    x = np.array([BIG, 1.0], np.float32)
    z = np.float32(1.0)
    ordered = _all_ordered([1.0, BIG, 1.0])
    unordered = set().union(*(_all_ordered(list(p)) for p in permutations([1.0, BIG, 1.0])))
    assert ordered == {BIG} and BIG + 2 in unordered
    for cand in sorted(unordered | {BIG + 4, 2 * BIG}):
        r = np.float32(cand)
        assert bool(seeded_admits(r, x, z, "sum", policy="ordered_tree")) == (cand in ordered)
        assert bool(seeded_admits(r, x, z, "sum", policy="unordered_tree")) == \
            (cand in unordered)
    # the reference is one member
    for p in ("ordered_tree", "unordered_tree"):
        assert float(seeded_reduce(x, z, "sum", policy=p)) in ordered


def test_a_seed_per_leaf_is_rejected():
    x = np.array([[1.0, 1.0]], np.float32)
    z = np.array([BIG], np.float32)
    per_leaf = np.float32(add32(add32(BIG, 1.0), add32(BIG, 1.0)))
    for p in ("ordered_tree", "unordered_tree"):
        assert not bool(seeded_admits(np.array([per_leaf]), x, z, "sum", 1, policy=p))
        assert bool(seeded_admits(seeded_reduce(x, z, "sum", 1, policy=p), x, z, "sum", 1,
                                  policy=p))


@pytest.mark.parametrize("policy", POLS)
@pytest.mark.parametrize("dt", [DType.F32, DType.BF16, DType.FP8E4M3, DType.I8, DType.BOOL])
def test_empty_fibers_return_the_seed(policy, dt):
    """'Empty fibers return that seed.'"""
    if dt is DType.BOOL:
        x, z = np.zeros((3, 0), bool), np.array([True, False, True])
    elif dt.is_int:
        x, z = np.zeros((3, 0), np.int8), np.array([-5, 7, 0], np.int8)
    else:
        x = cast(np.zeros((3, 0), np.float32), dt)
        z = cast(np.array([-0.0, 7.0, -2.5], np.float32), dt)
    for kind in ("max", "min") + (() if dt is DType.BOOL else ("sum",)):
        got = seeded_reduce(x, z, kind, 1, policy=policy)
        assert np.array_equal(got.view(np.uint8), z.view(np.uint8)), (kind, got, z)


@pytest.mark.parametrize("policy", POLS)
def test_masked_lanes_are_skipped_not_padded_with_plus_zero(policy):
    """'Masked-out occurrences are skipped': -0 active leaves and a -0 seed give -0; a masked
    lane read as +0 would give +0. A fully masked fiber returns its seed."""
    x = np.array([[-0.0, 5.0, -0.0], [1.0, 2.0, 3.0]], np.float32)
    z = np.array([-0.0, -0.0], np.float32)
    m = np.array([[True, False, True], [False, False, False]])
    got = seeded_reduce(x, z, "sum", 1, mask=m, policy=policy)
    assert np.signbit(got).all() and (got == 0).all()
    plus = np.array([0.0, -0.0], np.float32)
    assert not seeded_admits(plus, x, z, "sum", 1, mask=m, policy=policy).admitted[0]


def test_fp8e4m3_masked_max_skips_a_nan_lane():
    x = cast(np.array([[np.nan, 1.0, 2.0]], np.float32), DType.FP8E4M3)
    z = cast(np.array([-448.0], np.float32), DType.FP8E4M3)
    got = seeded_reduce(x, z, "max", 1, mask=np.array([[False, True, True]]))
    assert float(got.astype(np.float32)[0]) == 2.0


# --- custom reducers --------------------------------------------------------------------------
def _welford_model(xs, seed):
    """Chan's merge written out with the model's f32 operations (the registry's expression
    order: mean = ma + d * (nb / n), m2 = (m2a + m2b) + (d * d) * ((na * nb) / n))."""
    n_a, ma, qa = seed
    for x in xs:
        n_b, mb, qb = 1.0, x, 0.0
        n = add32(n_a, n_b)
        if n_a == 0:
            n_a, ma, qa = n, mb, qb
            continue
        d = sub32(mb, ma)
        mean = add32(ma, mul32(d, div32(n_b, n)))
        q = add32(add32(qa, qb), mul32(mul32(d, d), div32(mul32(n_a, n_b), n)))
        n_a, ma, qa = n, mean, q
    return n_a, ma, qa


def test_welford_fold_matches_the_fraction_model():
    rng = np.random.default_rng(7)
    x = np.round(rng.normal(3, 2, (12, 5)), 3).astype(np.float32)
    seed = np.zeros((12, 3), np.float32)
    got = custom_reduce(x, seed, "welford", 1, policy="fold_left")
    for i in range(12):
        want = _welford_model([float(v) for v in x[i]], (0.0, 0.0, 0.0))
        assert all(same(float(g), w) for g, w in zip(got[i], want, strict=True)), i


def test_welford_worked_example_and_variance():
    """Tile design: Welford 'uses one state'; variance = m2 / count."""
    x = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    s = np.zeros((1, 3), np.float32)
    for p in POLS:
        got = custom_reduce(x, s, "welford", 1, policy=p)
        assert got.tolist() == [[4.0, 2.5, 5.0]], p  # mean 5/2, m2 = 9/4+1/4+1/4+9/4
        assert bool(custom_admits(got, x, s, "welford", 1, policy=p))


def test_difference_orientation_worked_example():
    """'For x = [1, 2, 3] these examples yield left = -6, right = 2.'"""
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    s = np.zeros((1, 1), np.float32)
    assert custom_reduce(x, s, "difference", 1, policy="fold_left").tolist() == [[-6.0]]
    assert custom_reduce(x, s, "difference", 1, policy="fold_right").tolist() == [[2.0]]


@pytest.mark.parametrize("policy", ["ordered_tree", "unordered_tree"])
def test_a_tree_without_a_merge_contract_suggests_a_fold(policy):
    """'diagnose the missing contract and suggest a fold policy'"""
    x = np.zeros((1, 3), np.float32)
    with pytest.raises(InvalidArgumentError, match="fold_left"):
        custom_reduce(x, np.zeros((1, 1), np.float32), "difference", 1, policy=policy)


def test_welford_tree_set_holds_every_bracketing_and_nothing_else():
    """'Without exact laws, the tree policy must admit the changed results': the ordered set
    over [seed, l(x0), l(x1), l(x2)] is every bracketing, computed here by the model."""
    x = [0.1, 1e6, -3.0]
    leaves = [(0.0, 0.0, 0.0)] + [(1.0, v, 0.0) for v in np.float32(x).tolist()]

    def merge(a, b):
        n_a, ma, qa = a
        n_b, mb, qb = b
        n = add32(n_a, n_b)
        if n_b == 0:
            return (n, ma, qa)
        if n_a == 0:
            return (n, mb, qb)
        d = sub32(mb, ma)
        return (n, add32(ma, mul32(d, div32(n_b, n))),
                add32(add32(qa, qb), mul32(mul32(d, d), div32(mul32(n_a, n_b), n))))

    def trees(ls):
        if len(ls) == 1:
            return {ls[0]}
        return {merge(a, b) for k in range(1, len(ls)) for a in trees(ls[:k])
                for b in trees(ls[k:])}

    allowed = trees(leaves)
    assert len(allowed) >= 2  # f32 Welford is not associative on these
    xa, s = np.array([x], np.float32), np.zeros((1, 3), np.float32)
    for st in allowed:
        assert bool(custom_admits(np.array([st], np.float32), xa, s, "welford", 1,
                                  policy="ordered_tree"))
    worst = max(allowed, key=lambda t: t[1])
    off = np.array([[worst[0], np.nextafter(np.float32(worst[1]), np.float32(np.inf)),
                     worst[2]]], np.float32)
    assert not bool(custom_admits(off, xa, s, "welford", 1, policy="ordered_tree"))


def test_sum_max_is_two_independent_states():
    x = np.array([[1.0, -0.0, 3.0]], np.float32)
    s = np.array([[-0.0, -np.inf]], np.float32)
    got = custom_reduce(x, s, "sum_max", 1, policy="fold_left")
    assert got.tolist() == [[4.0, 3.0]]
    assert set(REDUCERS) == {"welford", "sum_max", "difference"}
