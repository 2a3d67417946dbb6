"""What an op does on sharded values: one mesh rule per op class, kept as data (D370).

The type rules (``semantics/typeinfer``) decide the result's ShardLayout; the evaluator's
implementation (``registry.EVALUATORS``) computes one device's local result. The mesh rule says
what happens between the two when an operand is a mesh value — which operands move before the
local computation, and how the local results form the result. One place applies the rules:
the per-device driver (``mesh_driver.run_on_mesh``), which every runner of ops on sharded
values calls with its own collectives implementation (``MeshDevices``): the simulated mesh
(``sharding.AllDevices``), the distributed backend's ranks (``RankDevices``), the mesh lowering's
partition (``compiler/mesh_partition.py``, D490) and the enclosing evaluator
(``oracle/enclosure_eval.py``, D491). ``tests/semantics/evaluator/test_mesh_rules.py`` checks
that every op class of ``ALL_OPS`` has a rule.

The rule kinds (docs/decisions.md D130–D138 for the layout algebra behind each):

* ``LOCAL`` — each device applies the op to its local operands; nothing crosses devices.
* ``ALIGN`` — elementwise operands (Binary, Select): a plain operand, or a Broadcast mesh axis of
  a sharded operand under a Split result, is read through the result layout (each device reads
  its own block of the replicated value).
* ``GATHER_REDUCED`` — Reduce over an axis whose position is Split: all-gather that position
  first (the HIR Reduce rule makes the result Broadcast on that mesh axis).
* ``GATHER_SPLIT`` — Gather along a Split axis: each device gathers the rows it owns and writes
  the sum's neutral element elsewhere (a Partial(sum) result); indices are made global first.
* ``LOCAL_RESHAPE`` — Reshape: each device reshapes its block to its local extents.
* ``WRITE_SPLIT`` — InsertSlice / CacheUpdate into a destination with Splits: a replicated update
  covers a split axis whole, so each device writes its own block of it.
* ``GLOBAL_SHAPE`` — ShapeOf / Rank describe the logical (global) value; no device data is read.
* ``COLLECTIVE`` — the op is itself the cross-device step (Reshard, Local): it is implemented
  by the collectives of whoever runs the mesh, never per device.
"""

from __future__ import annotations

import enum

from tilefoundry.errors import TilefoundryError


class MeshRule(enum.Enum):
    LOCAL = "local"
    ALIGN = "align operands"
    GATHER_REDUCED = "gather reduced axes"
    GATHER_SPLIT = "gather split"
    LOCAL_RESHAPE = "local reshape"
    WRITE_SPLIT = "write split"
    GLOBAL_SHAPE = "global shape"
    COLLECTIVE = "collective"


def _table() -> dict[type, MeshRule]:
    from tilefoundry.semantics import ops as o

    by_rule: dict[MeshRule, tuple[type, ...]] = {
        MeshRule.ALIGN: (o.Binary, o.Select),
        MeshRule.GATHER_REDUCED: (o.Reduce,),
        MeshRule.GATHER_SPLIT: (o.Gather,),
        MeshRule.LOCAL_RESHAPE: (o.Reshape,),
        MeshRule.WRITE_SPLIT: (o.InsertSlice, o.CacheUpdate),
        MeshRule.GLOBAL_SHAPE: (o.ShapeOf, o.Rank),
        MeshRule.COLLECTIVE: (o.Reshard, o.Local),
        # the type rules only admit these on layouts where each device's block is a whole
        # value of the op (or refuse sharded operands outright)
        MeshRule.LOCAL: (
            o.Unary, o.Cast, o.Zeros, o.TopK, o.Transpose, o.Slice, o.Concat, o.Stack,
            o.MatMul, o.Conv2D, o.ReLU, o.Sigmoid, o.Tanh, o.SoftMax, o.LayerNorm, o.Gelu,
            o.Silu, o.RMSNorm, o.RoPE, o.ShapeExtract, o.ShapeCompose,
            o.Bitcast, o.Scan, o.Sort, o.Mma, o.SeededReduce, o.MaskedReduce, o.CustomReduce,
            o.MaskedScan, o.SegmentedScan,  # unsharded operands only (their type rules)
        ),
    }
    out: dict[type, MeshRule] = {}
    for rule, classes in by_rule.items():
        for c in classes:
            if c in out:
                raise TilefoundryError(f"mesh rules: {c.__name__} has two rules ({out[c].name}, "
                                       f"{rule.name})")
            out[c] = rule
    return out


#: op class -> its mesh rule (filled on first use: the op modules import nothing from here)
MESH_RULES: dict[type, MeshRule] = {}


def register_mesh_rule(op_cls: type, rule: MeshRule) -> None:
    """The mesh rule of an op class defined outside ``semantics.ops`` (or a new one)."""
    rules = mesh_rules()
    if op_cls in rules:
        raise TilefoundryError(f"register_mesh_rule: {op_cls.__name__} already has the mesh "
                               f"rule {rules[op_cls].name}")
    rules[op_cls] = rule


def mesh_rules() -> dict[type, MeshRule]:
    if not MESH_RULES:
        MESH_RULES.update(_table())
    return MESH_RULES


def mesh_rule(op: object) -> MeshRule:
    """The mesh rule of an op instance (or op class). An op class without a rule is refused:
    guessing LOCAL for it would be silently wrong on layouts that need data movement."""
    cls = op if isinstance(op, type) else type(op)
    rule = mesh_rules().get(cls)
    if rule is None:
        raise TilefoundryError(f"{cls.__name__} has no mesh rule; add it to "
                               f"semantics/evaluator/mesh_rules.py (the rule kinds are listed "
                               f"there)")
    return rule
