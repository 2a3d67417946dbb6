"""tilefoundry.semantics.reductions: reduce policies, folds, admitted sets and scan.

Expected values come from the Tile design text, the HIR Reduce entry, exact rational arithmetic
(Fraction) or independent f32 evaluations written here (random trees, K-order loops), never from
this implementation's own output. Rounding to a low-precision dtype uses ``dtypes.cast``, the
project's cast contract, which is not under test here.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from reduction_helpers import (
    F32MAX,
    FLOATS,
    INTS,
    draw_x,
    f32,
    in_dtype,
    random_tree,
    same,
    wide,
)

from tilefoundry.errors import EmptyReductionError, InvalidArgumentError
from tilefoundry.semantics.dtypes import DType, cast, from_bits, to_bits
from tilefoundry.semantics.reductions import (
    POLICIES,
    admits,
    fold_left,
    fold_right,
    reduce,
    scan,
    scan_admits,
)


def tree_results(data, x: np.ndarray, permute: bool) -> np.ndarray:
    w = wide(x)
    out = []
    for row in w:
        order = data.draw(st.permutations(range(len(row)))) if permute else range(len(row))
        out.append(random_tree(data, [row[i] for i in order]))
    return np.array(out, np.float32)


# ---------------------------------------------------------------------------------------------
# folds
# ---------------------------------------------------------------------------------------------
def test_fold_example_from_the_tile_design():
    """Tile design, Reference fold: 'For x = [1, 2, 3] these examples yield left = -6,
    right = 2' (left = left - x.at(r); right = x.at(r) - right; both seeded with 0)."""
    x = np.array([1, 2, 3], np.int32)
    assert int(fold_left(x, lambda s, e: s - e, 0)) == -6
    assert int(fold_right(x, lambda e, s: e - s, 0)) == 2


def test_fold_left_and_right_differ_on_floats():
    """Tile design: 'left and right folds generally compute different functions'. Over
    [1, 2^-24, 2^-24] in f32, fold_left adds 2^-24 to 1 twice (each a tie to even, back to 1),
    fold_right first forms 2^-23 exactly, and 1 + 2^-23 is representable."""
    x = f32(1.0, 2.0 ** -24, 2.0 ** -24)
    assert reduce(x, "sum", policy="fold_left") == np.float32(1.0)
    assert reduce(x, "sum", policy="fold_right") == np.float32(1.0 + 2.0 ** -23)


@given(data=st.data(), dt=st.sampled_from(INTS), n=st.integers(0, 40))
def test_integer_sums_wrap_and_agree_across_policies(data, dt, n):
    """Integer sums wrap around in the dtype, so every policy gives sum mod 2^bits."""
    info = np.iinfo(dt.storage)
    x = data.draw(arrays(dt.storage, (2, n), elements=st.integers(info.min, info.max)))
    bits = 8 * dt.storage.itemsize
    for row, *res in zip(x, *(reduce(x, "sum", 1, policy=p) for p in POLICIES), strict=True):
        want = sum(int(v) for v in row) % (1 << bits)
        if info.min < 0 and want >= 1 << (bits - 1):
            want -= 1 << bits
        assert all(int(r) == want for r in res)


def test_low_precision_rounds_once_at_the_end():
    """ARCHITECTURE.md: 'Low-precision floats accumulate in f32 and round once at the end.'
    bf16 [1, 2^-8, 2^-8]: per-step bf16 rounding would tie back to 1 twice; the f32 sum is
    1 + 2^-7 exactly, a bf16 value."""
    x = in_dtype(DType.BF16, 1.0, 2.0 ** -8, 2.0 ** -8)
    for p in POLICIES:
        assert float(reduce(x, "sum", policy=p)) == 1.0 + 2.0 ** -7


def pairwise_ref(vals: list) -> np.float32:
    """Balanced pairwise tree in source order, odd last element carried up (the decision)."""
    while len(vals) > 1:
        nxt = [np.float32(vals[i] + vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
        vals = nxt + vals[len(vals) - 1:] if len(vals) % 2 else nxt
    return np.float32(vals[0])


@given(data=st.data(), dt=st.sampled_from(FLOATS), n=st.integers(1, 23))
def test_reference_results_of_each_policy(data, dt, n):
    """Tile design: fold_left = op(op(op(z, x0), x1), x2), fold_right = op(x0, op(x1, op(x2,
    z))); the tree reference is balanced pairwise. Multi-axis source order is 'lexicographic in
    the IndexSpace axis order'. All accumulate in f32 and round once."""
    x = draw_x(data, dt, (2, n, 3))
    w = wide(x)
    with np.errstate(all="ignore"):
        for p in POLICIES:
            got = reduce(x, "sum", (1, 2), policy=p)
            for row, g in zip(w.reshape(2, -1), got, strict=True):
                vals = [np.float32(t) for t in row]
                if p == "fold_left":
                    want = vals[0]
                    for t in vals[1:]:
                        want = np.float32(want + t)
                elif p == "fold_right":
                    want = vals[-1]
                    for t in reversed(vals[:-1]):
                        want = np.float32(t + want)
                else:
                    want = pairwise_ref(vals)
                assert same(g, cast(f32(want), dt))


def test_signed_zero_seed_decision():
    """Decision: no seed enters a non-empty reduction, so a sum over [-0.] is -0 (IEEE -0 + -0);
    the HIR identity +0 appears only for an empty fiber."""
    for p in POLICIES:
        assert same(reduce(f32(-0.0), "sum", policy=p), f32(-0.0))
        assert same(reduce(f32(-0.0, -0.0, -0.0), "sum", policy=p), f32(-0.0))
        assert same(reduce(f32(-0.0, 0.0), "sum", policy=p), f32(0.0))
    assert same(reduce(np.zeros(0, np.float32), "sum"), f32(0.0))


def test_max_min_propagate_nan_and_order_signed_zeros():
    """ARCHITECTURE.md: 'max/min propagate NaN and order -0 < +0.'"""
    for p in POLICIES:
        assert same(reduce(f32(-0.0, 0.0), "max", policy=p), f32(0.0))
        assert same(reduce(f32(0.0, -0.0), "min", policy=p), f32(-0.0))
        assert np.isnan(reduce(f32(1.0, np.nan, np.inf), "max", policy=p))
        assert np.isnan(reduce(f32(-np.inf, np.nan), "min", policy=p))
    assert float(reduce(in_dtype(DType.FP8E4M3, -3.0, 2.0), "abs_max")) == 3.0
    assert int(reduce(np.array([5, -128], np.int8), "abs_max")) == -128  # |-128| wraps


# ---------------------------------------------------------------------------------------------
# empty axes and errors
# ---------------------------------------------------------------------------------------------
EMPTY = [  # dtype, sum, max, min, abs_max (from the format definitions)
    (DType.F32, 0.0, -np.inf, np.inf, 0.0), (DType.F16, 0.0, -np.inf, np.inf, 0.0),
    (DType.BF16, 0.0, -np.inf, np.inf, 0.0), (DType.FP8E5M2, 0.0, -np.inf, np.inf, 0.0),
    (DType.FP8E4M3, 0.0, -448.0, 448.0, 0.0),
    (DType.I8, 0, -128, 127, 0), (DType.U8, 0, 0, 255, 0), (DType.I32, 0, -2**31, 2**31 - 1, 0),
    (DType.I64, 0, -2**63, 2**63 - 1, 0),
]


@pytest.mark.parametrize(("dt", "s", "mx", "mn", "am"), EMPTY)
def test_empty_axis_returns_the_identity(dt, s, mx, mn, am):
    """HIR Reduce: 'A reduction over an axis of no elements MUST return that kind's identity
    rather than fail. For max that is the least value its result dtype can hold, which is not
    always -inf: an integer dtype cannot hold -inf, bool's least value is False, and a
    finite-only float has no infinity. abs_max is 0 ... sum is 0. mean has no identity.'"""
    x = np.zeros((2, 0, 3), dt.storage)
    for kind, want in (("sum", s), ("max", mx), ("min", mn), ("abs_max", am)):
        r = reduce(x, kind, 1)
        assert r.shape == (2, 3) and r.dtype == dt.storage
        assert all(v == want for v in r.ravel().tolist()), (kind, r)
    assert not np.signbit(wide(reduce(x, "sum", 1))).any() if dt.is_float else True
    if dt.is_float:
        with pytest.raises(EmptyReductionError, match="mean has no identity"):
            reduce(x, "mean", 1)


def test_empty_axis_bool_and_e8m0():
    """HIR Reduce: 'bool's least value is False'. f8e8m0 (decision): its least value 2^-127
    serves max and abs_max, its greatest 2^127 min; sums are refused."""
    b = np.zeros((0,), bool)
    assert reduce(b, "max") == np.False_ and reduce(b, "min") == np.True_
    e = np.zeros((0,), DType.F8E8M0.storage)
    assert float(reduce(e, "max")) == 2.0 ** -127 == float(reduce(e, "abs_max"))
    assert float(reduce(e, "min")) == 2.0 ** 127
    with pytest.raises(InvalidArgumentError, match="f8e8m0"):
        reduce(e, "sum")


def test_errors_name_what_is_wrong():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(InvalidArgumentError, match=r"axis 2 .*rank 2"):
        reduce(x, "sum", 2)
    with pytest.raises(InvalidArgumentError, match=r"axis -3 .*rank 2"):
        admits(x[:, 0], x, "sum", -3)
    with pytest.raises(InvalidArgumentError, match="'sum', 'mean', 'max', 'min', 'abs_max'"):
        reduce(x, "prod")
    with pytest.raises(InvalidArgumentError, match="'unordered_tree', 'ordered_tree'"):
        reduce(x, "sum", policy="fast")
    with pytest.raises(InvalidArgumentError, match="Cast"):
        reduce(np.zeros(3, bool), "sum")
    with pytest.raises(InvalidArgumentError, match="Cast"):
        reduce(np.zeros(3, np.int32), "mean")
    with pytest.raises(InvalidArgumentError, match="twice"):
        reduce(x, "sum", (0, -2))
    with pytest.raises(InvalidArgumentError, match="storage type"):
        reduce(np.zeros(3), "sum")


# ---------------------------------------------------------------------------------------------
# admitted sets
# ---------------------------------------------------------------------------------------------
@given(data=st.data(), dt=st.sampled_from(FLOATS), n=st.integers(1, 6), permute=st.booleans())
def test_admits_every_tree_short_fibers(data, dt, n, permute):
    """Tile design: 'Without exact laws, the tree policy must admit the changed results for
    that compatible reducer.' Every random tree (over a random permutation for unordered_tree),
    evaluated in f32 and rounded once, is admitted by exact enumeration."""
    x = draw_x(data, dt, (3, n))
    r = cast(tree_results(data, x, permute), dt)
    policies = ["unordered_tree"] + ([] if permute else ["ordered_tree"])
    for p in policies:
        adm = admits(r, x, "sum", 1, policy=p)
        assert adm.admitted.all(), adm.detail
        assert set(adm.method.ravel()) == {"enumeration"}


@given(data=st.data(), dt=st.sampled_from(FLOATS), n=st.integers(50, 80),
       permute=st.booleans(), special=st.booleans())
def test_admits_every_tree_long_fibers(data, dt, n, permute, special):
    """As above for long fibers, decided by the rigorous bound; also for mean."""
    x = draw_x(data, dt, (3, n), special)
    v = tree_results(data, x, permute)
    adm = admits(cast(v, dt), x, "sum", 1, policy="unordered_tree" if permute else "ordered_tree")
    assert adm.admitted.all(), adm.detail
    assert set(adm.method.ravel()) == {"bound"}
    with np.errstate(all="ignore"):
        m = cast(v / np.float32(n), dt)
    assert admits(m, x, "mean", 1).admitted.all()


def test_ordered_tree_rejects_a_permuted_order():
    """Tile design: 'Associativity permits different parentheses, not an arbitrary
    permutation.' [1e8, 1, -1e8] in f32 (ulp(1e8) = 8): both bracketings of the source order give
    0 (1 vanishes next to ±1e8), while (1e8 + -1e8) + 1 = 1 reorders the leaves."""
    x = f32(1e8, 1.0, -1e8)
    assert admits(f32(0.0), x, policy="ordered_tree")
    assert not admits(f32(1.0), x, policy="ordered_tree")
    assert admits(f32(1.0), x, policy="unordered_tree")
    assert not admits(f32(2.0), x, policy="unordered_tree")


def exact_bound(x: np.ndarray) -> tuple[Fraction, Fraction]:
    vals = [Fraction(float(v)) for v in wide(x)]
    n = len(vals)
    g = Fraction(n - 1, 2**24) / (1 - Fraction(n - 1, 2**24))
    return sum(vals, Fraction(0)), g * sum(abs(v) for v in vals)


def step(x: np.ndarray, k: int, dt: DType) -> np.ndarray:
    """k representable steps up (positive finite values only)."""
    return from_bits(to_bits(x).astype(np.int64) + k, dt)


@given(data=st.data(), dt=st.sampled_from(FLOATS), n=st.integers(50, 70))
def test_bound_rejects_just_outside(data, dt, n):
    """A planted error a few ULPs beyond cast(S + B), B = γ(n-1)·Σ|x| computed exactly here,
    is rejected; cast(S) itself is admitted."""
    x = cast(data.draw(arrays(np.float32, n, elements=st.floats(0.25, 4, width=32))), dt)
    s, b = exact_bound(x)
    hi = cast(f32(float(s + b)), dt)
    assert not admits(step(hi, 3, dt), x)
    assert admits(cast(f32(float(s)), dt), x)
    lo = cast(f32(float(s - b)), dt)
    assert not admits(step(lo, -3, dt), x)


def test_planted_errors_one_ulp_and_zero_sign():
    """Meta-tests for the judge: one ULP, one sign of zero, one NaN class."""
    ones = np.ones(60, DType.BF16.storage)
    assert admits(in_dtype(DType.BF16, 60.0), ones)
    assert not admits(in_dtype(DType.BF16, 60.5), ones)  # one bf16 ULP at 60 is 0.5
    assert not admits(f32(6.0 + 2.0 ** -21), np.ones(6, np.float32))  # enumeration
    for n in (2, 60):  # enumeration and bound: only -0 sums to -0
        negz = np.full(n, -0.0, np.float32)
        assert admits(f32(-0.0), negz) and not admits(f32(0.0), negz)
        mixed = np.where(np.arange(n) % 2 == 0, np.float32(0.0), np.float32(-0.0))
        assert admits(f32(0.0), mixed) and not admits(f32(-0.0), mixed)
    # mean of bf16 [-2^-133, +0 x59]: -2^-133/60 is below half of bf16's least subnormal, so
    # the result rounds to -0 in bf16; +0 is not a possible result.
    x = in_dtype(DType.BF16, -(2.0 ** -133), *([0.0] * 59))
    assert admits(in_dtype(DType.BF16, -0.0), x, "mean")
    assert not admits(in_dtype(DType.BF16, 0.0), x, "mean")
    for n in (3, 60):
        with_nan = f32(1.0, np.nan, *([2.0] * (n - 2)))
        assert admits(f32(np.nan), with_nan) and not admits(f32(1.0 + 2 * (n - 2)), with_nan)
        both = f32(np.inf, -np.inf, *([0.0] * (n - 2)))
        assert admits(f32(np.nan), both) and not admits(f32(np.inf), both)


@pytest.mark.parametrize("n", [3, 60])
def test_overflow_admits_infinity_only_where_a_partial_can_overflow(n):
    """f32 [max, max/2, -max/2, 0...]: (max + max/2) overflows to +inf and stays there;
    max + (max/2 - max/2) = max. -inf and NaN are impossible: the negative part is far from
    overflowing."""
    x = f32(F32MAX, F32MAX / 2, -F32MAX / 2, *([0.0] * (n - 3)))
    assert admits(f32(np.inf), x) and admits(f32(F32MAX), x)
    assert not admits(f32(-np.inf), x) and not admits(f32(np.nan), x)
    assert not admits(f32(F32MAX), f32(F32MAX, F32MAX, *([0.0] * (n - 2))))


def test_fp8e4m3_overflow_must_be_nan():
    """ARCHITECTURE.md: formats without infinities (fp8e4m3) give NaN on overflow. Every tree
    over [448, 448] gives f32 896, at least 448 + 16, so the result is NaN."""
    x = in_dtype(DType.FP8E4M3, 448.0, 448.0)
    nan = from_bits(np.array([0x7F], np.uint8), DType.FP8E4M3)
    assert admits(nan, x) and not admits(in_dtype(DType.FP8E4M3, 448.0), x)


def test_exact_methods_for_max_and_folds():
    x = f32(1.0, 2.0 ** -24, 2.0 ** -24)
    adm = admits(f32(1.0), x, policy="fold_left")
    assert adm and adm.method.item() == "exact"
    assert not admits(f32(1.0), x, policy="fold_right")
    assert admits(f32(-0.0), f32(-0.0, -0.0), "max") and not admits(f32(0.0), f32(-0.0), "max")


# ---------------------------------------------------------------------------------------------
# scan
# ---------------------------------------------------------------------------------------------
def test_scan_permutation_example():
    """Tile design: 'Moving [1, 2, 3] to [3, 1, 2] preserves an integer sum of 6, but changes
    inclusive prefixes from [1, 3, 6] to [3, 4, 6]. Therefore scan must not inherit the
    permission to globally permute reduction contributions.'"""
    assert scan(np.array([1, 2, 3], np.int32)).tolist() == [1, 3, 6]
    assert scan(np.array([3, 1, 2], np.int32)).tolist() == [3, 4, 6]
    assert not scan_admits(np.array([3, 4, 6], np.int32), np.array([1, 2, 3], np.int32))
    assert not scan_admits(f32(3, 4, 6), f32(1, 2, 3))
    assert scan_admits(f32(1, 3, 6), f32(1, 2, 3))
    with pytest.raises(InvalidArgumentError, match="'ordered_tree', 'fold_left'"):
        scan(f32(1, 2), policy="unordered_tree")


def test_scan_boundaries_and_seed():
    """Tile design: 'inclusive[i] = left prefix[i + 1]; exclusive[i] = left prefix[i]' with
    prefix[0] = z; 'Empty input produces an empty output'."""
    x = np.array([1, 2, 3], np.int32)
    assert scan(x, inclusive=False).tolist() == [0, 1, 3]
    assert scan(x, seed=10).tolist() == [11, 13, 16]
    assert scan(x, seed=10, inclusive=False).tolist() == [10, 11, 13]
    assert scan(np.zeros((2, 0), np.float32)).shape == (2, 0)
    assert scan(np.array([1, -5, 3], np.int32), "max").tolist() == [1, 1, 3]
    assert same(scan(f32(-0.0, 0.0, np.nan, 1.0), "max"), f32(-0.0, 0.0, np.nan, np.nan))
    assert scan(np.array([100, 100], np.int8)).tolist() == [100, -56]  # wraps around
    cat = scan(np.array(["a", "b", "c"], object), lambda s, e: s + e, policy="fold_left")
    assert cat.tolist() == ["a", "ab", "abc"]  # noncommutative: earlier subsequence on the left


def hillis_steele(x: np.ndarray) -> np.ndarray:
    """The Tile design's composition: prefix = shift(prefix, d) + prefix for d = 1, 2, 4..."""
    p = x.copy()
    d = 1
    with np.errstate(all="ignore"):
        while d < x.shape[-1]:
            left = np.concatenate([np.zeros_like(p[..., :d]), p[..., :-d]], -1)
            p = np.where(np.arange(x.shape[-1]) >= d, left + p, p)
            d *= 2
    return p


@given(data=st.data(), dt=st.sampled_from(FLOATS), n=st.sampled_from([5, 6, 52]))
def test_scan_admits_hillis_steele_and_the_recurrence(data, dt, n):
    """Tile design: 'An ordered-tree scan may regroup each prefix ... but must preserve that
    prefix's leaf sequence'. Hillis-Steele regroups every prefix in order, so it is admitted."""
    x = draw_x(data, dt, (2, n))
    assert scan_admits(cast(hillis_steele(wide(x)), dt), x)
    assert scan_admits(scan(x), x)
