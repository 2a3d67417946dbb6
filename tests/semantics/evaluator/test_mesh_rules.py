"""The mesh rule table (``semantics/evaluator/mesh_rules.py``, D370) and the per-device driver
(``mesh_driver.py``, D371): every op class has a rule; the evaluator reads the table (a Select
whose operands need aligning is right only under ALIGN); a driver that computes one device at a
time (as a distributed rank does) gives each device the block the all-devices driver gives it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.evaluator import mesh_rules
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.mesh import Sharded, shard, unshard
from tilefoundry.semantics.evaluator.mesh_rules import MESH_RULES, MeshRule, mesh_rule
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Op, Var
from tilefoundry.semantics.ops import Binary, BinaryKind, Select
from tilefoundry.semantics.ops.sharding import Reshard
from tilefoundry.semantics.types import (
    Broadcast,
    Layout,
    Mesh,
    ShardLayout,
    Split,
    TensorType,
    Topology,
    TopologyLevel,
)


def test_every_rule_kind_is_in_use():
    assert set(mesh_rules.mesh_rules().values()) == set(MeshRule)


def test_the_drifted_places_agree_select_aligns_like_binary():
    assert mesh_rule(Select) is mesh_rule(Binary) is MeshRule.ALIGN


def test_an_op_class_without_a_rule_is_refused_with_the_fix():
    @dataclass(frozen=True)
    class NewOp(Op):
        pass

    with pytest.raises(TilefoundryError, match=r"NewOp has no mesh rule; add it to "
                                               r"semantics/evaluator/mesh_rules\.py"):
        mesh_rule(NewOp)
    with pytest.raises(TilefoundryError, match="already has the mesh rule ALIGN"):
        mesh_rules.register_mesh_rule(Binary, MeshRule.LOCAL)


MESH = Mesh("device", ("x",), (2,))
TOPO = Topology((TopologyLevel("device", 2),))
F32 = DType.F32


def _select_program():
    """select(cond, t, f) with t Split(0) on x, cond and f plain: the result is Split(0), so
    each device must read its own rows of cond and f (ALIGN)."""
    split = ShardLayout(MESH, (Split(0),), Layout((4, 3)))
    bcast = ShardLayout(MESH, (Broadcast(),), Layout((4, 3)))
    cond = Var("c", TensorType((4, 3), DType.BOOL))
    t = Var("t", TensorType((4, 3), F32, split))
    f = Var("f", TensorType((4, 3), F32))
    body = Call(Reshard(layout=bcast), (Call(Select(), (cond, t, f)),))
    module = Module((Function("g", (cond, t, f), body, None),), topology=TOPO)
    rng = np.random.default_rng(0)
    c = rng.random((4, 3)) < 0.5
    tv = rng.standard_normal((4, 3)).astype(np.float32)
    fv = rng.standard_normal((4, 3)).astype(np.float32)
    return module, [c, tv, fv], np.where(c, tv, fv)


def test_the_evaluator_reads_the_table(monkeypatch):
    module, inputs, want = _select_program()
    got = unshard(evaluate(module, "g", inputs))
    assert np.array_equal(got, want)
    # without the alignment each device would pair its rows of t with all rows of cond / f
    monkeypatch.setitem(MESH_RULES, Select, MeshRule.LOCAL)
    try:
        got = unshard(evaluate(module, "g", inputs))
    except (TilefoundryError, ValueError):
        pass  # the local kernel refuses the unaligned operand shapes
    else:
        assert not np.array_equal(got, want)


# ---------------------------------------------------------------------------------------------
# one driver, two collectives implementations
# ---------------------------------------------------------------------------------------------
def _one_device(coord):
    from tilefoundry.semantics.evaluator.sharding import AllDevices

    class OneDevice(AllDevices):
        """Every value held whole (as the simulation does) but one device computed: what a
        rank does, with the simulation's collectives."""

        def coords(self, mesh):
            return [coord]

        def assemble(self, t, mesh, results, varying):
            (r,) = results
            return r

    return OneDevice()


@pytest.mark.parametrize("op", [Binary(BinaryKind.ADD), Select()], ids=["Binary", "Select"])
def test_one_device_at_a_time_gives_each_device_its_block(op):
    from tilefoundry.semantics.evaluator import families  # noqa: F401  (registers)
    from tilefoundry.semantics.evaluator.mesh_driver import run_on_mesh
    from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx
    from tilefoundry.semantics.evaluator.sharding import ALL_DEVICES

    mesh = Mesh("device", ("x", "y"), (2, 2))
    out = ShardLayout(mesh, (Split(0), Split(1)), Layout((4, 6)))
    rows = ShardLayout(mesh, (Split(0), Broadcast()), Layout((4, 6)))
    rng = np.random.default_rng(1)
    a = shard(rng.standard_normal((4, 6)).astype(np.float32), rows)
    b = rng.standard_normal((4, 6)).astype(np.float32)  # plain: read through `out`
    args = (a, b) if isinstance(op, Binary) else (rng.random((4, 6)) < 0.5, a, b)
    out_t = TensorType((4, 6), F32, out)
    whole = run_on_mesh(EvalCtx(op, None, out_t, [], args), EVALUATORS[type(op)], args,
                        ALL_DEVICES)
    assert isinstance(whole, Sharded) and whole.layout == out
    for coord in np.ndindex(*mesh.axis_extents):
        mine = run_on_mesh(EvalCtx(op, None, out_t, [], args), EVALUATORS[type(op)], args,
                           _one_device(coord))
        assert np.array_equal(mine, whole.data[coord]), coord
    full = unshard(whole)
    ref = unshard(a) + b if isinstance(op, Binary) else np.where(args[0], unshard(a), b)
    assert np.array_equal(full, ref)
    assert math.prod(mesh.axis_extents) == 4


def test_only_the_driver_says_what_a_rule_does():
    """What an op does on sharded values is written once, in the per-device driver (D490,
    D491): no other package module branches on a rule kind other than COLLECTIVE (the
    collective ops are each collectives implementation's own). The evaluator, the distributed
    ranks, the mesh lowering and the enclosing evaluator run the driver instead."""
    import re
    from pathlib import Path

    root = Path(mesh_rules.__file__).resolve().parents[2]
    kinds = "|".join(k.name for k in MeshRule if k is not MeshRule.COLLECTIVE)
    pat = re.compile(rf"\b(?:MeshRule|R)\.(?:{kinds})\b")
    allowed = {Path("semantics/evaluator/mesh_driver.py"), Path("semantics/evaluator/mesh_rules.py")}
    found = []
    for top in ("semantics", "oracle", "compiler", "conformance", "smt", "validate"):
        for p in sorted((root / top).rglob("*.py")):
            rel = p.relative_to(root)
            if rel not in allowed and pat.search(p.read_text()):
                found.append(str(rel))
    assert found == [], f"per-rule mesh behaviour outside the driver: {found}"
