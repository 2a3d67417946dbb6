"""InsertSlice / CacheUpdate write in place where the destination is dead (``compiler/inplace.py``,
D404): a loop-carried destination reuses one buffer (no copy kernel in the body, the carried
buffer yielded to itself), and every case where the old value is still needed keeps its copy.
Results are compared with the reference evaluator bit for bit on both CPU targets."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler import kir
from tilefoundry.compiler.inplace import inplace
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.evaluator.core import evaluate

SOURCE = '''
K = DimVar("K", 1, 64)

@func
def build(x: Tensor[(K, 8), f32]) -> Tensor[(K, 8), f32]:
    out = zeros((K, 8), f32)
    for i in tile(K):
        row = x[i] * 2.0
        out = insert_slice(out, reshape(row, (1, 8)), i, 0)
    return out

@func
def build_and_read_old(x: Tensor[(K, 8), f32]):
    out = zeros((K, 8), f32)
    acc = zeros((8,), f32)
    for i in tile(K):
        new = insert_slice(out, reshape(x[i], (1, 8)), i, 0)
        acc = acc + reduce_sum(new - out, (0,), keepdim=False)  # old out read after the insert
        out = new
    return out, acc

@func
def into_input(dst: Tensor[(K, 8), f32], upd: Tensor[(1, 8), f32]):
    return insert_slice(dst, upd, 2, 0), dst * 1.0
'''
MOD = parse_module(SOURCE)


def _loops(p: kir.Program) -> list[kir.HostLoop]:
    return [s for s in p.steps if isinstance(s, kir.HostLoop)]


def _copies(steps) -> int:
    return sum(1 for s in steps if isinstance(s, kir.Kernel) and s.name.endswith("_copy"))


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("target", ["interp", "simd"])
def test_a_loop_carried_destination_reuses_one_buffer(target) -> None:
    x = np.arange(16 * 8, dtype=np.float32).reshape(16, 8) - 40.0
    comp = tf_compile(MOD, "build", [x.shape], target)
    (loop,) = _loops(comp.program)
    assert loop.yields == loop.carried  # no copy back at the end of an iteration
    assert _copies(loop.body) == 0  # no copy of the destination in the body
    assert _same(comp([x]), evaluate(MOD, "build", [x]))


@pytest.mark.parametrize("target", ["interp", "simd"])
def test_a_destination_read_after_the_insert_keeps_its_copy(target) -> None:
    x = np.arange(12 * 8, dtype=np.float32).reshape(12, 8)
    comp = tf_compile(MOD, "build_and_read_old", [x.shape], target)
    (loop,) = _loops(comp.program)
    assert _copies(loop.body) == 1
    for o, r in zip(comp([x]), evaluate(MOD, "build_and_read_old", [x]), strict=True):
        assert _same(o, r)


@pytest.mark.parametrize("target", ["interp", "simd"])
def test_an_input_destination_is_never_written(target) -> None:
    dst = np.arange(6 * 8, dtype=np.float32).reshape(6, 8)
    keep = dst.copy()
    upd = np.full((1, 8), -1.0, np.float32)
    comp = tf_compile(MOD, "into_input", [dst.shape, upd.shape], target)
    assert _copies(comp.program.steps) == 1
    for o, r in zip(comp([dst, upd]), evaluate(MOD, "into_input", [dst, upd]), strict=True):
        assert _same(o, r)
    assert _same(dst, keep)


def test_the_pass_alone_removes_exactly_the_loop_copy() -> None:
    """Without the pass (fuse=False skips it; fusion never removes a loop-carried copy) the body
    copies the carried tensor; the pass removes that copy and nothing else."""
    x_shape = (16, 8)
    plain = tf_compile(MOD, "build", [x_shape], "interp", fuse=False).program
    (loop,) = _loops(plain)
    assert _copies(loop.body) == 1 and loop.yields != loop.carried
    after = inplace(plain)
    (loop2,) = _loops(after)
    assert _copies(loop2.body) == 0 and loop2.yields == loop2.carried
    assert len(loop2.body) == len(loop.body) - 1
    assert len(after.buffers) == len(plain.buffers) - 1
