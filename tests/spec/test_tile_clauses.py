"""Tile design clauses the audit (tests/spec/clauses_tile.py) found without a test of their own.
Each test quotes its clause."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.semantics.dsl import DSLError, parse_module
from tilefoundry.semantics.dsl.surface import SPELLINGS
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.mesh import Sharded, unshard
from tilefoundry.semantics.ops import ALL_OPS
from tilefoundry.semantics.ops.tensor import Reduce
from tilefoundry.semantics.ops.tile_mma import Mma

HEAD = "from tilefoundry.semantics.dsl import *\n"


def test_the_source_default_policy_is_unordered_tree():
    """"The source default is unordered_tree." / "The default is reduction::unordered_tree; each
    REDUCE operation stores a typed ReductionPolicy." — the op's default and what the DSL builds
    when no policy is written."""
    assert Reduce((0,)).policy == "unordered_tree"
    m = parse_module(HEAD + "@func\ndef f(x: Tensor[(4, 8), f32]):\n"
                            "    return reduce_sum(x, (1,))\n")
    assert m["f"].body.op.policy == "unordered_tree"
    m2 = parse_module(HEAD + "@func\ndef f(x: Tensor[(4, 8), f32]):\n"
                             "    return reduce_sum(x, (1,), policy='fold_left')\n")
    assert m2["f"].body.op.policy == "fold_left"


def test_mma_permits_reassociation_by_default():
    """"MMA permits reassociation by default ... Ordered accumulation is explicit"."""
    assert Mma().allow_reassociation is True
    assert Mma(allow_reassociation=False).allow_reassociation is False


def test_there_is_no_select_alias():
    """"There is no Tile DSL select alias: Luisa's existing select(false_value, true_value,
    condition) uses a different order." — `select` is not a DSL name; `ite` is."""
    sig = "c: Tensor[(4,), bool], x: Tensor[(4,), f32], y: Tensor[(4,), f32]"
    with pytest.raises(DSLError) as e:
        parse_module(HEAD + f"@func\ndef f({sig}):\n    return select(y, x, c)\n")
    assert "'select' is not bound" in str(e.value)
    assert "select" not in {s.name.split(".")[-1] for s in SPELLINGS}
    parse_module(HEAD + f"@func\ndef f({sig}):\n    return ite(c, x, y)\n")


def test_no_shuffle_scatter_or_atomic_op():
    """"Do not add mandatory shuffle_up/down/xor calls to generic Tile kernels now." and "There
    is currently no public scatter helper or Tile atomic opcode." — no op of the catalog and no
    DSL spelling is one."""
    names = {c.__name__.lower() for c in ALL_OPS} | {s.name.lower() for s in SPELLINGS}
    bad = {n for n in names if any(w in n for w in ("shuffle", "scatter", "atomic"))}
    assert bad == set()


def test_pure_gather_chains_compose():
    """"For valid domains and the same SSA snapshot, pure chains compose as R_g(R_f(x)) =
    R_(f composed with g)(x)." — gather(gather(x, f), g) equals gather(x, gather(f, g)) bit for
    bit, over random valid index maps (repetitions included: f need not be injective)."""
    src = HEAD + """
@func
def chained(x: Tensor[(3, 7), f32], f: Tensor[(5,), i32], g: Tensor[(6,), i32]):
    return gather(gather(x, f, 1), g, 1)

@func
def composed(x: Tensor[(3, 7), f32], f: Tensor[(5,), i32], g: Tensor[(6,), i32]):
    return gather(x, gather(f, g, 0), 1)
"""
    m = parse_module(src)
    rng = np.random.default_rng(456)
    for _ in range(20):
        x = rng.standard_normal((3, 7)).astype(np.float32)
        f = rng.integers(0, 7, 5).astype(np.int32)
        g = rng.integers(0, 5, 6).astype(np.int32)
        a = evaluate(m, "chained", [x, f, g])
        b = evaluate(m, "composed", [x, f, g])
        assert a.shape == (3, 6)
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
        np.testing.assert_array_equal(a, x[:, f[g]])


def test_storage_replicas_are_not_contributions():
    """"Storage replicas are not semantic contributions." / "This distinction prevents a
    broadcast or replicated fragment from silently multiplying a sum." — a sum over an operand
    replicated on a 2-device mesh (Broadcast) is the sum of its logical elements, not twice it;
    the same holds for a Split operand (each element on one device)."""
    src = HEAD + """
dev = Mesh(topology="device", axis_names=("d",), axis_extents=(2,))

@func
def rep(x: Tensor[(4, 8), f32, ShardLayout(dev, (Broadcast(),), Layout((4, 8)))]):
    return reduce_sum(x, (1,), keepdim=False)

@func
def split(x: Tensor[(4, 8), f32, ShardLayout(dev, (Split(0),), Layout((4, 8)))]):
    return reduce_sum(x, (1,), keepdim=False)

@func
def plain(x: Tensor[(4, 8), f32]):
    return reduce_sum(x, (1,), keepdim=False)

mod = module(rep, split, plain, topology={"device": 2})
"""
    m = parse_module(src)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    want = x.sum(axis=1)  # exact: small integers
    for name in ("rep", "split", "plain"):
        out = evaluate(m, name, [x])
        got = unshard(out) if isinstance(out, Sharded) else out
        if name == "rep":  # each device holds the whole (replicated) sum
            assert all(np.array_equal(out.local(c), want) for c in out.devices())
        np.testing.assert_array_equal(got.reshape(-1), want, err_msg=name)


def test_fills_compose_with_the_chain():
    """"Masks and fallback values must be composed too; intervening arithmetic is not another
    coordinate rename." — a chain of two filled Gathers is the composed read with both fills in
    their places: an out-of-range outer index reads the outer fill, an in-range outer index whose
    inner index is out of range reads the inner fill; a ``+ 1.0`` between them applies to the
    inner fill too (it is arithmetic on values, not a rename)."""
    src = HEAD + """
@func
def chain(x: Tensor[(2, 5), f32], f: Tensor[(4,), i32], g: Tensor[(6,), i32]):
    return gather(gather(x, f, 1, fill=-1.5) + 1.0, g, 1, fill=7.0)
"""
    m = parse_module(src)
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    f = np.array([4, -1, 0, 5], np.int32)       # -1 and 5: inner fill
    g = np.array([0, 1, 3, 4, -2, 2], np.int32)  # 4 and -2: outer fill
    got = evaluate(m, "chain", [x, f, g])
    inner = np.where((f >= 0) & (f < 5), x[:, np.clip(f, 0, 4)], np.float32(-1.5)) + 1.0
    ok = (g >= 0) & (g < 4)
    want = np.where(ok, inner[:, np.clip(g, 0, 3)], np.float32(7.0)).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert got[0].tolist() == [5.0, -0.5, -0.5, 7.0, 7.0, 1.0]  # worked by hand
