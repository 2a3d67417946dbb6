"""What the program generator is asked for and what it returns (split from ``oracle/programs.py``,
D384; the package mirrors ``semantics/ops``).

``GenConfig`` (the options of one draw), ``GeneratedProgram`` (the module, entry, inputs and
metadata) and ``capability_limit``: the draws a backend declaring a capability set can run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tilefoundry.oracle.strategies import (
    ValueSpec,
)
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import (
    Call,
    Expr,
    Function,
    GridRegionExpr,
    Module,
    Op,
    Tuple,
    TupleGetItem,
)
from tilefoundry.semantics.ops import (
    ALL_OPS,
)
from tilefoundry.semantics.types import (
    Mesh,
    TensorType,
    TupleType,
)

F32, BF16, F16, I32, I64, I8, U8, BOOL = (DType.F32, DType.BF16, DType.F16, DType.I32, DType.I64,
                                          DType.I8, DType.U8, DType.BOOL)


F8E8M0, F4E2M1 = DType.F8E8M0, DType.F4E2M1


#: dtype draw weights for fresh leaves (repeats are weights; f32 first so shrinking prefers it)
_LEAF_DTYPES = (F32, F32, F32, BF16, BF16, F16, DType.FP8E4M3, DType.FP8E5M2, F8E8M0, I32, I32,
                I64, I8, U8, BOOL)


_SHARDED_DTYPES = (F32, F32, F32, BF16, F16, I32, I32, I64)


_TAME = ValueSpec.int_range(-3, 3)


# =============================================================================================
# public result and configuration
# =============================================================================================
@dataclass(frozen=True)
class GenConfig:
    ops: tuple = ALL_OPS
    max_ops: int = 8
    allow_loops: bool = True
    allow_calls: bool = True
    allow_dispatch: bool = True
    sharded: bool = False
    avoid_unspecified: bool = True
    symbolic: bool | None = None  # None: drawn per program (unsharded programs only)
    type_level_only: bool = False  # allow Casts to f4e2m1 (such programs are not evaluable)
    limit: Any = None  # a _Limit: draw only inside a backend's capabilities (None: anything)
    #: the share of steps that draw one of the under-drawn shapes of ``program_motifs`` (0:
    #: none, and no draw is spent on the coin — a seed's program without them is unchanged)
    motifs: float = 0.0


@dataclass(frozen=True, eq=False)
class GeneratedProgram:
    """A generated program: ``evaluate(module, entry, inputs)`` runs it. ``inputs`` are drawn
    on first access (a seeded program draws each input from its own stream, so a caller that
    only type-checks never pays for them, and the values do not depend on whether or when they
    are drawn)."""

    module: Module
    entry: str
    input_makers: tuple = field(repr=False)  # zero-argument callables, one per entry param
    op_counts: Any  # Mapping[type[Op], int]: Calls reachable from the entry, per op class
    features: frozenset
    dims: Any  # Mapping[str, int]: the DimVar binding the inputs realize
    mesh: Mesh | None = None
    seed: int | None = None
    stats: Any = field(default_factory=dict)  # builder declines / rule rejections / ...

    @property
    def ops(self) -> frozenset:
        return frozenset(self.op_counts)

    @cached_property
    def inputs(self) -> tuple:
        return tuple(make() for make in self.input_makers)

    def text(self) -> str:
        from tilefoundry.semantics.printer import to_text

        return to_text(self.module)

    def __repr__(self) -> str:
        ops = ", ".join(f"{c.__name__}x{n}" for c, n in sorted(self.op_counts.items(),
                                                                 key=lambda kv: kv[0].__name__))
        return (f"GeneratedProgram(entry={self.entry!r}, seed={self.seed}, inputs="
                f"{len(self.input_makers)}, features={sorted(self.features)}, ops=[{ops}])")


@dataclass(frozen=True)
class _Limit:
    """What a generated program may contain: ``kinds[cls]`` the admitted kinds of a kinded op
    class (``Binary`` / ``Unary`` / ``Reduce``), ``dtypes`` every tensor's dtype (operands,
    results, literals, an op's ``dtype`` attribute)."""

    classes: frozenset
    kinds: Any  # MappingProxyType[type, frozenset]
    dtypes: frozenset
    policies: tuple
    overflow: tuple
    sharded: bool  # sharded programs are possible (mesh declared, Reshard admitted, a dtype)
    fallback: tuple  # evaluable admitted dtypes, in DType order (a leaf when a pool is empty)

    def admits_op(self, op: Op) -> bool:
        cls = type(op)
        if cls not in self.classes:
            return False
        if cls in self.kinds and op.kind not in self.kinds[cls]:
            return False
        if getattr(op, "policy", None) and op.policy not in self.policies:
            return False
        if getattr(op, "overflow", None) and op.overflow not in self.overflow:
            return False
        dt = getattr(op, "dtype", None)
        return dt is None or dt in self.dtypes

    def admits_type(self, t: Any) -> bool:
        if isinstance(t, TupleType):
            return all(self.admits_type(f) for f in t.fields)
        if isinstance(t, TensorType):
            return t.dtype in self.dtypes and (t.shard is None or self.sharded)
        return True


# =============================================================================================
# walking a module
# =============================================================================================
def count_ops(module: Module) -> tuple[dict[type, int], set[str]]:
    """Calls reachable from the module's functions, per op class (each node once), and the
    structural features seen (loop, call, dispatch, sharing)."""
    counts: Counter = Counter()
    feats: set[str] = set()
    seen: set[int] = set()
    parents: Counter = Counter()
    fns: list[Function] = list(module.functions)
    fseen: set[int] = set()
    while fns:
        f = fns.pop()
        if id(f) in fseen:
            continue
        fseen.add(id(f))
        fns.extend(f.variants)
        if f.body is None:
            continue
        stack = [f.body]
        while stack:
            e = stack.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            kids: list[Expr] = []
            if isinstance(e, Call):
                kids = list(e.args)
                if isinstance(e.op, Function):
                    fns.append(e.op)
                else:
                    counts[type(e.op)] += 1
            elif isinstance(e, Tuple):
                kids = list(e.fields)
            elif isinstance(e, TupleGetItem):
                kids = [e.tuple_value]
            elif isinstance(e, GridRegionExpr):
                kids = [*e.init_args, *e.yield_values, e.body]
                feats.add("loop")
            for k in kids:
                parents[id(k)] += 1
            stack.extend(kids)
    if any(n > 1 for n in parents.values()):
        feats.add("sharing")
    return dict(counts), feats
