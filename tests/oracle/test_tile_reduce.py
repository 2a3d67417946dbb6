"""The oracle on the tile family's reductions (``oracle/tile_reduce.py``): a tree policy is
judged by its admitted set including the seed's position; enclosed inputs (a seeded sum of
exp(x)) are judged through the enclosure rule; a custom reducer's tree over more leaves than
can be enumerated is never a false verdict."""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.compare import FAIL, PASS, check
from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.evaluator.core import evaluate

BIG = np.float32(2.0 ** 24)

SEEDED = parse_module('''
@func
def f(x: Tensor[(2, 2), f32], z: Tensor[(2,), f32]):
    return reduce_sum_seeded(x, z, (1,), "ordered_tree", False)

@func
def g(x: Tensor[(2, 2), f32], z: Tensor[(2,), f32]):
    return reduce_sum_seeded(x, z, (1,), "unordered_tree", False)
''')


def test_ordered_tree_admits_seed_first_trees_only():
    """x = [2^24, 1], z = 1: (1 + 2^24) + 1 = 2^24 and 1 + (2^24 + 1) = 2^24 are the seed-first
    trees; 2^24 + (1 + 1) keeps the seed last (a permutation): unordered_tree only."""
    x = np.array([[BIG, 1.0], [1.0, 2.0]], np.float32)
    z = np.array([1.0, 0.5], np.float32)
    ref = evaluate(SEEDED, "f", [x, z])
    assert check(SEEDED, "f", [x, z], ref).status == PASS
    perm = np.array([BIG + 2, 3.5], np.float32)
    assert check(SEEDED, "f", [x, z], perm).status == FAIL
    assert check(SEEDED, "g", [x, z], perm).status == PASS


def test_a_seed_counted_twice_fails_every_tree_policy():
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    z = np.array([10.0, 20.0], np.float32)
    twice = np.array([23.0, 47.0], np.float32)
    for e in ("f", "g"):
        assert check(SEEDED, e, [x, z], twice).status == FAIL


def test_enclosed_inputs_through_the_enclosure_rule():
    m = parse_module('''
@func
def f(x: Tensor[(3, 4), f32], z: Tensor[(3,), f32], k: Tensor[(3, 4), bool]):
    return reduce_sum_masked(exp(x), z, k, (1,), "unordered_tree", False)
''')
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, (3, 4)).astype(np.float32)
    z = np.array([1.0, -2.0, 0.25], np.float32)
    k = rng.random((3, 4)) < 0.6
    ref = evaluate(m, "f", [x, z, k])
    assert check(m, "f", [x, z, k], ref).status == PASS
    off = ref.copy()
    off[0] += np.float32(1.0)
    assert check(m, "f", [x, z, k], off).status == FAIL


def test_welford_tree_beyond_enumeration_is_not_a_false_verdict():
    m = parse_module('''
@func
def f(x: Tensor[(1, 9), f32], s: Tensor[(1, 3), f32]):
    return reduce_custom(x, s, (1,), "welford", "ordered_tree", False)
''')
    x = np.arange(9, dtype=np.float32).reshape(1, 9)
    s = np.zeros((1, 3), np.float32)
    ref = evaluate(m, "f", [x, s])
    v = check(m, "f", [x, s], ref)
    # judged by the bound of every merge tree (D299): the reference's own state is admitted,
    # never a false FAIL; beyond enumeration it used to be UNJUDGED
    assert v.status == PASS, v
    bad = np.array(ref, copy=True)
    bad[0, 1] = np.float32(99.0)  # a mean outside [0, 8]
    assert check(m, "f", [x, s], bad).status == FAIL
