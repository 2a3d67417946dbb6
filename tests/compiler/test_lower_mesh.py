"""The per-device lowering of sharded programs (``compiler/lower_mesh.py``): device launches on
the local shapes, explicit collective steps between them, simulated on the host.

Expected values come from independent models: numpy slicing of the global array for the data
movement (HIR Types: "local shape per layout position is E/m for a Split position"; a device
``d`` owns the contiguous block ``[d·E/m, (d+1)·E/m)``), Python integer arithmetic for the
matmul, hand-derived NaN / signed-zero results for Partial(max / min)."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler.errors import KernelIRError
from tilefoundry.compiler.lower_mesh import (
    Collective,
    DeviceLaunch,
    Slot,
    compile_mesh,
    mesh_text,
    plan_reshard,
    run_collective,
)
from tilefoundry.conformance.catalog.build import (
    make_call,
    make_mesh,
    make_module,
    make_var,
    shard_layout,
)
from tilefoundry.errors import RunTimeCheckError
from tilefoundry.semantics.evaluator.mesh import Sharded
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.math import Binary, BinaryKind
from tilefoundry.semantics.ops.nn import MatMul
from tilefoundry.semantics.ops.sharding import Reshard
from tilefoundry.semantics.ops.tensor import Gather
from tilefoundry.semantics.types import Broadcast, Partial, Split

F32, I32, I64 = DType.F32, DType.I32, DType.I64
MESH2, _ = make_mesh((2,))
MESH22, _ = make_mesh((2, 2))


def kinds(src, dst) -> list[str]:
    return [k for k, _, _ in plan_reshard(src, dst)]


def test_reshard_table_rows_are_the_collectives():
    """HIR Reshard: "The single op covers zero-copy view, cross-storage copy, cross-CTA
    redistribute, and mixed cases" — each row of the table is its collective."""
    sh = (4, 6)
    s0, s1 = shard_layout(MESH2, (Split(0),), sh), shard_layout(MESH2, (Split(1),), sh)
    b, ps = shard_layout(MESH2, (Broadcast(),), sh), shard_layout(MESH2, (Partial("sum"),), sh)
    assert kinds(ps, b) == ["all_reduce"]  # Partial completion
    assert kinds(s0, b) == ["all_gather"]  # Split -> Broadcast
    assert kinds(b, s0) == ["slice"]  # Broadcast -> Split: a local slice
    assert kinds(s0, s1) == ["all_to_all"]  # Split -> Split on another position
    assert kinds(ps, s1) == ["all_reduce", "slice"]
    assert kinds(s0, None) == ["all_gather", "replicate"]  # to a plain value
    assert kinds(None, s1) == ["slice"]
    assert kinds(s0, s0) == []
    # distinct reductions complete one mesh axis at a time, in mesh-axis order
    mixed = shard_layout(MESH22, (Partial("max"), Partial("sum")), sh)
    plan = plan_reshard(mixed, shard_layout(MESH22, (Broadcast(), Broadcast()), sh))
    assert [(k, a) for k, a, _ in plan] == [("all_reduce", (0,)), ("all_reduce", (1,))]


def _values(x: np.ndarray, lay) -> np.ndarray:
    """Hand distribution: device d holds rows / columns [d·E/m, (d+1)·E/m) of a split axis."""
    (a,) = lay.attrs
    m = lay.mesh.axis_extents[0]
    if isinstance(a, Broadcast):
        return np.stack([x] * m)
    blk = x.shape[a.position] // m
    return np.stack([np.take(x, range(d * blk, (d + 1) * blk), axis=a.position)
                     for d in range(m)])


@pytest.mark.parametrize("src,dst", [((0,), (1,)), ((1,), (0,))])
def test_all_to_all_delivers_each_block_to_its_owner(src, dst):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    ls, ld = (shard_layout(MESH2, (Split(src[0]),), (4, 6)), shard_layout(MESH2, (Split(dst[0]),), (4, 6)))
    slots = {"a": Slot("a", F32, tuple(ls.local_axis_extents()), ls),
             "b": Slot("b", F32, tuple(ld.local_axis_extents()), ld)}
    got = run_collective(Collective("all_to_all", ("a",), "b", (0,)), slots,
                         {"a": _values(x, ls)}, MESH2)
    assert np.array_equal(got, _values(x, ld))


def test_all_gather_and_slice_move_blocks_in_device_order():
    x = np.arange(24, dtype=np.int32).reshape(4, 6)
    ls, lb = shard_layout(MESH2, (Split(1),), (4, 6)), shard_layout(MESH2, (Broadcast(),), (4, 6))
    slots = {"a": Slot("a", I32, (4, 3), ls), "b": Slot("b", I32, (4, 6), lb)}
    got = run_collective(Collective("all_gather", ("a",), "b", (0,)), slots,
                         {"a": _values(x, ls)}, MESH2)
    assert np.array_equal(got, np.stack([x, x]))
    back = run_collective(Collective("slice", ("b",), "a"), slots, {"b": got}, MESH2)
    assert np.array_equal(back, _values(x, ls))


def test_a_diverged_replica_is_an_error_not_averaged():
    lb = shard_layout(MESH2, (Broadcast(),), (2,))
    slots = {"a": Slot("a", F32, (2,), lb), "b": Slot("b", F32, (2,))}
    bad = np.array([[1.0, 2.0], [1.0, 3.0]], np.float32)
    with pytest.raises(KernelIRError, match="device 1's replica differs"):
        run_collective(Collective("replicate", ("a",), "b"), slots, {"a": bad}, MESH2)


def _split_k(dt, target):
    av = make_var("a", (3, 4), dt, shard_layout(MESH2, (Split(1),), (3, 4)))
    bv = make_var("b", (4, 2), dt, shard_layout(MESH2, (Split(0),), (4, 2)))
    out = make_call(Reshard(layout=shard_layout(MESH2, (Broadcast(),), (3, 2))), make_call(MatMul(), av, bv))
    m = make_module([av, bv], out, make_mesh((2,))[1])
    return compile_mesh(m, "f", [(3, 4), (4, 2)], target)


@pytest.mark.parametrize("target", ["interp", "simd"])
def test_split_k_matmul_is_local_matmuls_and_one_all_reduce(target):
    rng = np.random.default_rng(7)
    a = rng.integers(-50, 50, (3, 4)).astype(np.int32)
    b = rng.integers(-50, 50, (4, 2)).astype(np.int32)
    c = _split_k(I32, target)
    want = np.array([[sum(int(a[i, k]) * int(b[k, j]) for k in range(4)) for j in range(2)]
                     for i in range(3)], np.int32)
    assert np.array_equal(c([a, b]), want)
    steps = c.program.steps
    assert [type(s).__name__ for s in steps] == ["DeviceLaunch", "Collective", "Collective"]
    assert [s.kind for s in c.program.collectives()] == ["all_reduce", "replicate"]
    launch = steps[0]
    assert isinstance(launch, DeviceLaunch)
    # the launch runs on the local shapes: a's (3, 2) block and b's (2, 2) block
    bm = launch.program.buffer_map()
    assert [bm[n].shape for n in launch.program.inputs] == [(3, 2), (2, 2)]
    assert c.device_runs == 2
    text = mesh_text(c.program)
    assert "all_reduce[axes=[0]]" in text and "kernel boundary" in text


def test_partial_max_min_pieces_complete_with_nan_and_signed_zero():
    """HIR Partial(max / min): the logical value is the reduction over the devices' pieces;
    max / min propagate NaN and order -0 < +0 (the Tile numerics design)."""
    nan = np.float32("nan")
    pieces = np.array([[1.0, -0.0, nan, 0.0, -3.0],
                       [2.0, 0.0, 5.0, -0.0, -4.0]], np.float32)
    for red, want in (("max", [2.0, 0.0, nan, 0.0, -3.0]),
                      ("min", [1.0, -0.0, nan, -0.0, -4.0])):
        lay = shard_layout(MESH2, (Partial(red),), (5,))
        x = make_var("x", (5,), F32, lay)
        out = make_call(Reshard(layout=shard_layout(MESH2, (Broadcast(),), (5,))), x)
        c = compile_mesh(make_module([x], out, make_mesh((2,))[1]), "f", [(5,)])
        got = c([Sharded.from_devices(lay, pieces)])
        w = np.array(want, np.float32)
        assert np.array_equal(np.isnan(got), np.isnan(w))
        ok = ~np.isnan(w)
        assert np.array_equal(got[ok], w[ok]) and np.array_equal(np.signbit(got[ok]),
                                                                 np.signbit(w[ok])), red


def test_broadcast_operand_is_sliced_for_a_split_result():
    """An elementwise op reads a replicated operand's own block (HIR elementwise sharding)."""
    ls, lb = shard_layout(MESH2, (Split(0),), (4, 3)), shard_layout(MESH2, (Broadcast(),), (4, 3))
    x, y = make_var("x", (4, 3), F32, ls), make_var("y", (4, 3), F32, lb)
    s = make_call(Binary(BinaryKind.ADD), x, y)
    out = make_call(Reshard(layout=lb), s)
    c = compile_mesh(make_module([x, y], out, make_mesh((2,))[1]), "f", [(4, 3), (4, 3)])
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    b = np.full((4, 3), 0.5, np.float32)
    assert np.array_equal(c([a, b]), a + 0.5)  # exact: every value is a multiple of 0.5
    assert [s.kind for s in c.program.collectives()] == ["align", "all_gather", "replicate"]


def test_gather_on_a_split_axis_checks_global_indices():
    lx = shard_layout(MESH2, (Split(0),), (4, 3))
    x, i = make_var("x", (4, 3), F32, lx), make_var("i", (2,), I64)
    g = make_call(Gather(axis=0), x, i)
    out = make_call(Reshard(layout=shard_layout(MESH2, (Broadcast(),), (2, 3))), g)
    c = compile_mesh(make_module([x, i], out, make_mesh((2,))[1]), "f", [(4, 3), (2,)])
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert np.array_equal(c([a, np.array([3, 0], np.int64)]), a[[3, 0]])
    with pytest.raises(RunTimeCheckError, match=r"index 4 .* outside \[0, 4\)") as e:
        c([a, np.array([1, 4], np.int64)])
    assert e.value.check == "index_range"


@pytest.mark.parametrize("red", ["max", "min"])
def test_catalog_partial_pieces_complete_by_hand(red):
    """The catalog's Partial(max / min) cases whose devices hold different pieces: the
    completion, column by column, derived by hand (NaN anywhere gives NaN; max(-0, +0) = +0,
    min = -0), on the per-device lowering and on the reference."""
    from tilefoundry.conformance import runner
    from tilefoundry.semantics.evaluator.core import evaluate
    from tilefoundry.semantics.evaluator.mesh import unshard

    (case,) = runner.select_cases(runner.load_catalog(0), "full",
                                  [f"sharded/partial-pieces/{red}-nan-signed-zero/f32"])
    m, entry, inputs = case.build()
    nan, inf = np.nan, np.inf
    want = np.array([nan, 0.0, 0.0, nan, 4.0, inf, nan, 2.5] if red == "max" else
                    [nan, -0.0, -0.0, nan, 1.0, -inf, nan, 2.5], np.float32)
    c = compile_mesh(m, entry, [(8,)])
    for got in (c(inputs), unshard(evaluate(m, entry, inputs))):
        got = np.asarray(got)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        assert np.array_equal(got[ok], want[ok])
        assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


def test_a_cta_reshard_comes_after_a_kernel_boundary():
    """HIR Reshard, cross-CTA fence: "When a reshard reads a gmem shard produced under a
    different CTA ownership (an ownership change across a cta mesh), the lowering MUST emit a
    grid barrier before the reshard so every CTA's prior shard writes are visible." Here the
    reshard is a collective step between launches: every launch writing its source has ended
    (a kernel boundary, which is a grid barrier and more, D492). Values against numpy."""
    from tilefoundry.semantics.types import Mesh, Topology, TopologyLevel

    mesh = Mesh("cta", ("x",), (2,))
    topo = Topology((TopologyLevel("device", 1), TopologyLevel("cta", 2)))
    x = make_var("x", (4, 6), F32, shard_layout(mesh, (Split(0),), (4, 6)))
    y = make_call(Binary(BinaryKind("add")), x, x)
    z = make_call(Reshard(layout=shard_layout(mesh, (Split(1),), (4, 6))), y)
    m = make_module([x], make_call(Binary(BinaryKind("mul")), z, z), topo)
    c = compile_mesh(m, "f", [(4, 6)], "interp")
    steps = list(c.program.steps)
    kinds = [s.kind if isinstance(s, Collective) else "launch" for s in steps]
    assert kinds[:3] == ["launch", "all_to_all", "launch"]
    writer, fence = steps[0], steps[1]
    assert isinstance(writer, DeviceLaunch) and fence.srcs == writer.outputs
    assert "all_to_all[axes=[0]](v1)  // kernel boundary" in mesh_text(c.program)
    a = np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5
    assert np.array_equal(np.asarray(c([a])), (a + a) * (a + a))
