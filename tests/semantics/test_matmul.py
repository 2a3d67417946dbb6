"""tilefoundry.semantics.matmul: the K-order reference, the fma chain and the reassociation bound.

Expected values come from exact rational arithmetic (Fraction) or independent f32 K-order loops
and random trees written here, never from this implementation's own output.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reduction_helpers import draw_x, f32, random_tree, same, wide

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.dtypes import DType, cast, to_bits
from tilefoundry.semantics.matmul import matmul, matmul_admits


# ---------------------------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------------------------
def round_f32(q: Fraction) -> np.float32:
    """Round a rational to f32, nearest, ties to even (finite results only)."""
    r = np.float32(float(q))
    cands = [np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))]
    best = min(abs(Fraction(float(c)) - q) for c in cands)
    ties = [c for c in cands if abs(Fraction(float(c)) - q) == best]
    return ties[0] if len(ties) == 1 else next(c for c in ties if to_bits(f32(c))[0] % 2 == 0)


def fma_f32(x: np.float32, y: np.float32, c: np.float32) -> np.float32:
    """IEEE fma in exact rationals: one rounding; an exact zero is -0 only from (-0) + (-0)."""
    q = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(c))
    if q == 0:
        neg = x * y == 0 and np.signbit(x) != np.signbit(y) and c == 0 and np.signbit(c)
        return np.float32(-0.0 if neg else 0.0)
    return round_f32(q)


def test_matmul_fma_is_admitted_without_reassociation():
    """Tile design: disabling reassociation 'retains the reference K order, not a promise to
    disable target FMA fusion'. a = [-1, 1+2^-12], b = [1, 1+2^-12]: the product
    1 + 2^-11 + 2^-24 rounds (tie, even) to 1 + 2^-11, so the unfused chain gives 2^-11 and the
    fused one the exact 2^-11 + 2^-24."""
    a, b = f32(-1.0, 1 + 2.0 ** -12).reshape(1, 2), f32(1.0, 1 + 2.0 ** -12).reshape(2, 1)
    assert matmul(a, b).item() == 2.0 ** -11
    for r in (2.0 ** -11, 2.0 ** -11 + 2.0 ** -24):
        assert matmul_admits(f32(r).reshape(1, 1), a, b, allow_reassociation=False)
    assert not matmul_admits(f32(2.0 ** -11 + 2.0 ** -23).reshape(1, 1), a, b,
                             allow_reassociation=False)


def test_matmul_fma_near_a_midpoint_is_rounded_once():
    """fma(2^-24·(1+2^-23), 1-2^-23, 1+2^-23): the exact value 1 + 3·2^-24 - 2^-70 lies just
    below the f32 midpoint; rounding through f64 would land on the midpoint and tie to
    1 + 2^-22. The single rounding gives 1 + 2^-23 (the unfused chain gives 1 + 2^-22)."""
    a = f32(1 + 2.0 ** -23, 2.0 ** -24 * (1 + 2.0 ** -23)).reshape(1, 2)
    b = f32(1.0, 1 - 2.0 ** -23).reshape(2, 1)
    assert matmul(a, b).item() == 1 + 2.0 ** -22
    assert matmul_admits(f32(1 + 2.0 ** -23).reshape(1, 1), a, b, allow_reassociation=False)


@given(data=st.data(), k=st.integers(1, 12), dt=st.sampled_from([DType.F32, DType.BF16]))
def test_matmul_references_and_admitted_orders(data, k, dt):
    """The K-order fold from a +0 seed (Tile design: "matmul(a, b); // equivalent to mma(a, b,
    zeros(result_shape))") matches a loop written here; the fma chain (exact rationals, one
    rounding per step) and a random-order, randomly-treed sum of f32 products are admitted."""
    a = draw_x(data, dt, (2, k), special=False)
    b = draw_x(data, dt, (k, 3), special=False)
    wa, wb = wide(a), wide(b)
    want = np.zeros((2, 3), np.float32)
    fma = np.zeros((2, 3), np.float32)
    treed = np.zeros((2, 3), np.float32)
    with np.errstate(all="ignore"):
        for i in range(2):
            for j in range(3):
                acc = np.float32(np.float32(0.0) + np.float32(wa[i, 0] * wb[0, j]))
                f = fma_f32(wa[i, 0], wb[0, j], np.float32(0.0))
                for t in range(1, k):
                    acc = np.float32(acc + np.float32(wa[i, t] * wb[t, j]))
                    f = fma_f32(wa[i, t], wb[t, j], f)
                want[i, j], fma[i, j] = acc, f
                prods = [np.float32(wa[i, t] * wb[t, j]) for t in range(k)]
                order = data.draw(st.permutations(range(k)))
                treed[i, j] = random_tree(data, [prods[t] for t in order])
    assert same(matmul(a, b), cast(want, dt))
    assert matmul_admits(cast(fma, dt), a, b, allow_reassociation=False)
    assert matmul_admits(cast(treed, dt), a, b)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_matmul_is_mma_with_a_zeros_accumulator(k):
    """Tile design: "auto c = matmul(a, b); // equivalent to mma(a, b, zeros(result_shape))".
    Issue 16: every product -0 (here -0 * 1 and 1 * -0 alike) gives +0 (the zeros seed), not
    the -0 a first-product seed gives; without reassociation only +0 is admitted (D200). Any
    other product or order is unaffected: one +0 product makes both seeds +0."""
    a = np.array([[-0.0, 1.0] * k], np.float32)[:, :k]
    b = np.array([[1.0], [-0.0]] * k, np.float32)[:k]
    r = matmul(a, b)
    assert r.item() == 0.0 and not np.signbit(r.item())
    for reassoc in (False, True):
        assert matmul_admits(f32(0.0).reshape(1, 1), a, b, allow_reassociation=reassoc)
    assert not matmul_admits(f32(-0.0).reshape(1, 1), a, b, allow_reassociation=False)
    bf = matmul(cast(a, DType.BF16), cast(b, DType.BF16))
    assert not np.signbit(wide(bf).item())


def test_matmul_integers_broadcasting_and_errors():
    a = np.array([[[100, 100]], [[1, 2]]], np.int8)  # [2, 1, 2]
    b = np.array([[2], [1]], np.int8)  # [2, 1]
    r = matmul(a, b)
    assert r.shape == (2, 1, 1) and r.ravel().tolist() == [300 - 256, 4]
    assert matmul(a, b, out_dtype="i32").ravel().tolist() == [300, 4]
    assert matmul_admits(r, a, b) and not matmul_admits(r + 1, a, b)
    with pytest.raises(InvalidArgumentError, match=r"K = 2.*K = 3"):
        matmul(np.zeros((1, 2), np.float32), np.zeros((3, 1), np.float32))
    with pytest.raises(InvalidArgumentError, match="both be float or both be integer"):
        matmul(np.zeros((1, 2), np.float32), np.zeros((2, 1), np.int32))
    assert same(matmul(np.zeros((1, 0), np.float32), np.zeros((0, 2), np.float32)),
                np.zeros((1, 2), np.float32))


def test_matmul_bound_rejects_a_planted_error():
    """allow_reassociation=True admits only results within γ(K)·Σ|a·b| of the exact dot."""
    a = np.ones((1, 64), np.float32)
    b = np.full((64, 1), 0.5, np.float32)
    assert matmul_admits(f32(32.0).reshape(1, 1), a, b)
    assert not matmul_admits(f32(32.01).reshape(1, 1), a, b)
    assert not matmul_admits(f32(32.0 + 2.0 ** -18).reshape(1, 1), a, b,
                             allow_reassociation=False)
