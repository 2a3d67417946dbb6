"""Lowering of the tile family's reductions (``compiler/lower_tile_reduce.py``) on the kernel-IR
interpreter: the seed is the kir.Reduce's ``init`` in its position (fold_left first, fold_right
last — also across tile loops, forced with a small ``max_row``), masked lanes skipped, a custom
reducer as a one-element fold. Results are judged by the oracle (``check``) and, where the
contract is exact, compared bit for bit with the reference. The SIMD C path runs the same cases
through ``tilefoundry conformance run --backend simd`` (not repeated here: it compiles C)."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler.pipeline import compile
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.oracle.compare import PASS, check
from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.evaluator.core import evaluate

BIG = 2.0 ** 24


def _run(src: str, inputs: list, cfg: TileConfig | None = None):
    m = parse_module(src)
    c = compile(m, "f", [np.shape(a) for a in inputs], "interp", cfg=cfg)
    return m, c(inputs)


@pytest.mark.parametrize("policy", ["fold_left", "fold_right", "ordered_tree",
                                    "unordered_tree"])
@pytest.mark.parametrize("small", [False, True])
def test_seeded_masked_sum_on_the_interpreter(policy, small):
    rng = np.random.default_rng(3)
    x = rng.choice(np.float32([1.0, -1.0, BIG, -BIG, 0.5, -0.0]), (3, 40))
    z = rng.choice(np.float32([BIG, -0.0, 3.0]), (3,))
    keep = rng.random((3, 40)) < 0.7
    keep[2] = False  # a fully masked fiber returns its seed
    src = f'''
@func
def f(x: Tensor[(3, 40), f32], z: Tensor[(3,), f32], m: Tensor[(3, 40), bool]):
    return reduce_sum_masked(x, z, m, (1,), "{policy}", False)
'''
    cfg = TileConfig(max_row=8) if small else None  # tile loops carry the seed across tiles
    m, out = _run(src, [x, z, keep], cfg)
    assert check(m, "f", [x, z, keep], out).status == PASS
    assert np.array_equal(out[2:].view(np.uint32), z[2:].view(np.uint32))
    if policy.startswith("fold"):
        ref = evaluate(m, "f", [x, z, keep])
        assert np.array_equal(out.view(np.uint32), ref.view(np.uint32))


def test_seed_position_survives_tile_loops():
    """fold_left: ((2^24 + 1) + 1 ...) keeps 2^24; fold_right adds the ones to -2^24 first."""
    x = np.array([[1.0] * 20 + [-BIG]], np.float32)
    z = np.array([BIG], np.float32)
    for policy, want in (("fold_left", 0.0), ("fold_right", 20.0)):
        src = f'''
@func
def f(x: Tensor[(1, 21), f32], z: Tensor[(1,), f32]):
    return reduce_sum_seeded(x, z, (1,), "{policy}", False)
'''
        _m, out = _run(src, [x, z], TileConfig(max_row=4))
        assert out.tolist() == [want], policy


def test_no_reduced_axes_and_low_precision_max():
    import ml_dtypes

    x = np.array([[1.0, np.nan], [-0.0, 2.0]], ml_dtypes.bfloat16)
    z = np.array([[0.0, 5.0], [-0.0, 3.0]], ml_dtypes.bfloat16)
    keep = np.array([[True, False], [True, True]])
    src = '''
@func
def f(x: Tensor[(2, 2), bf16], z: Tensor[(2, 2), bf16], m: Tensor[(2, 2), bool]):
    return reduce_max_masked(x, z, m, ())
'''
    m, out = _run(src, [x, z, keep])
    ref = evaluate(m, "f", [x, z, keep])
    assert out.view(np.uint16).tolist() == ref.view(np.uint16).tolist()
    assert np.asarray(out, np.float32).tolist() == [[1.0, 5.0], [0.0, 3.0]]


@pytest.mark.parametrize("reducer,policy", [("welford", "fold_left"), ("welford", "fold_right"),
                                            ("welford", "ordered_tree"),
                                            ("sum_max", "unordered_tree"),
                                            ("difference", "fold_right")])
def test_custom_reducers_on_the_interpreter(reducer, policy):
    from tilefoundry.semantics.reducers import REDUCERS

    S = len(REDUCERS[reducer].state)
    rng = np.random.default_rng(11)
    x = np.round(rng.normal(0, 10, (4, 5)), 2).astype(np.float32)
    s = np.zeros((4, S), np.float32)
    src = f'''
@func
def f(x: Tensor[(4, 5), f32], s: Tensor[(4, {S}), f32]):
    return reduce_custom(x, s, (1,), "{reducer}", "{policy}", False)
'''
    m, out = _run(src, [x, s])
    assert check(m, "f", [x, s], out).status == PASS
    if policy.startswith("fold"):
        ref = evaluate(m, "f", [x, s])
        assert np.array_equal(out.view(np.uint32), ref.view(np.uint32))


@pytest.mark.parametrize("policy", ["fold_left", "unordered_tree"])
def test_a_declared_reducer_on_the_interpreter(policy):
    """A program-declared Reducer(...) lowers from its own declared expressions (D448) and the
    interpreter's result is admitted by the declared-law judge."""
    rng = np.random.default_rng(12)
    x = np.round(rng.normal(0, 10, (4, 9)), 2).astype(np.float32)
    s = np.tile(np.float32([-0.0, 0.0]), (4, 1))
    src = f'''
@func
def f(x: Tensor[(4, 9), f32], s: Tensor[(4, 2), f32]):
    return reduce_custom(x, s, (1,), Reducer("sum_absmax", state=(("sum", f32), ("amax", f32)),
        lift=("x", ("max", "x", ("sub", 0.0, "x"))),
        merge=(("add", "a.sum", "b.sum"), ("max", "a.amax", "b.amax")), identity=(-0.0, 0.0),
        laws=(("associative", "real", ("sum",)), ("associative", "exact", ("amax",)),
              ("commutative", "exact"), ("identity", "exact"))), "{policy}", False)
'''
    m, out = _run(src, [x, s])
    assert check(m, "f", [x, s], out).status == PASS
    ref = evaluate(m, "f", [x, s])
    assert np.asarray(out)[:, 1].tolist() == np.asarray(ref)[:, 1].tolist()
