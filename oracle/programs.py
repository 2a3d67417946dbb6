"""Whole well-typed HIR programs as a hypothesis strategy (issue 7, deliverable 2).

``programs(...)`` is a strategy of ``GeneratedProgram``: a ``Module``, its entry name, the entry's
inputs (numpy arrays of the storage dtypes, or ``Sharded`` values) and metadata (the op classes
reachable from the entry, with counts; structural features; the DimVar binding; the mesh).
``generate_program(seed, ...)`` builds the same kind of program from a seed without hypothesis
(deterministic: the same seed and options give the same program and inputs) — the fast path the
volume test and the benchmark use; the strategy drives the identical generator with hypothesis
draws, so hypothesis can shrink programs (fewer steps, earlier / simpler choices).

How a program is built (docs/decisions.md D140–D146):

* A function body is a DAG grown step by step over a **pool** of typed values: parameters,
  literals and every earlier result. Each step picks an op class and calls that op's **builder**
  (``BUILDERS``: exactly one per class of ``ALL_OPS``), which draws attributes and operands that
  satisfy the op's type rule — reusing pool values wherever their types fit (sharing), creating
  fresh leaves (parameters of the entry, literals elsewhere) otherwise — or declines. The result
  type is computed by calling the op's registered type rule directly on the operand types (no
  stamping, so the finished module is inferred from scratch by whoever checks it). Unsharded
  builders are exact by construction (the volume test asserts that no proposal is ever rejected);
  sharded builders propose and the rule arbitrates (a rejected proposal is dropped and counted in
  ``GeneratedProgram.stats``).
* Structural steps: a **GridRegionExpr** loop (one to three carries, static or DimVar extent,
  start / step, an induction variable usable as an index), a **call** to a new or an existing
  Function (sharing a callee between call sites), a call to a **dispatch prototype** whose
  variants partition a DimVar's envelope into one to three ranges.
* The body returns every value no other node consumed (so nearly every generated op is
  reachable), as one value or a Tuple. With ``sharded=True`` the entry takes ShardLayout
  parameters on a 1-D or 2-D mesh and every sharded result is Resharded to Broadcast at the end.
* **Unspecified behaviour is avoided** unless ``avoid_unspecified=False``: a float → int Cast
  reads only values known to truncate into the target's range (a fresh leaf drawn in range, or a
  value with a known integer bound); Gather / RoPE indices, InsertSlice offsets, CacheUpdate
  positions are drawn inside their valid windows (for symbolic extents, inside the envelope's
  lower bound); extents are >= 1 so no mean reduces an empty set; Zeros never takes f8e8m0 (no
  zero exists) and f4e2m1 appears only with ``type_level_only=True`` (the evaluator rejects it).
  With ``avoid_unspecified=False`` float → int Casts read arbitrary values (NaN, inf, out of
  range). Indices and windows stay valid either way (out-of-range ones are evaluation errors,
  not unspecified values).
* Sharded programs are built so that evaluating per device and gathering equals the erased
  program exactly (``check_erasure``): leaves hold small integers, and every op that reads or
  produces a Partial state must keep values integral and inside the dtype's exactly
  representable integers (a tracked magnitude bound), so no summation order can change a value.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from types import MappingProxyType
from typing import Any

import numpy as np
from hypothesis import strategies as st

from tilefoundry.errors import TilefoundryError
from tilefoundry.oracle.strategies import (
    GENERAL,
    ORDINARY,
    DrawSource,
    RandomSource,
    Source,
    ValueSpec,
    bind,
    draw_array,
    draw_mesh,
    draw_shard_layout,
    topology_of,
)
from tilefoundry.semantics.dtypes import OVERFLOW_MODES, ROUNDING_MODES
from tilefoundry.semantics.evaluator.mesh import Sharded, shard
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    DimVarRangePat,
    Expr,
    Function,
    GridRegionExpr,
    Module,
    Op,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.ops import (
    ALL_OPS,
    Binary,
    BinaryKind,
    CacheUpdate,
    Cast,
    Concat,
    Conv2D,
    Gather,
    Gelu,
    InsertSlice,
    LayerNorm,
    Local,
    MatMul,
    Rank,
    Reduce,
    ReduceKind,
    ReLU,
    Reshape,
    Reshard,
    RMSNorm,
    RoPE,
    ShapeCompose,
    ShapeExtract,
    ShapeOf,
    Sigmoid,
    Silu,
    Slice,
    SoftMax,
    Stack,
    Tanh,
    TopK,
    Transpose,
    Unary,
    UnaryKind,
    Zeros,
)
from tilefoundry.semantics.ops.tile_mma import Mma
from tilefoundry.semantics.ops.tile_reduce import CustomReduce, MaskedReduce, SeededReduce
from tilefoundry.semantics.ops.tile_scan import SCAN_COMBINES, SCAN_POLICIES, Scan
from tilefoundry.semantics.ops.tile_select import Bitcast, Select
from tilefoundry.semantics.ops.tile_sort import Sort
from tilefoundry.semantics.reducers import REDUCERS
from tilefoundry.semantics.reductions import POLICIES
from tilefoundry.semantics.typeinfer import RULES, Ctx, Session, TypeInferError
from tilefoundry.semantics.typeinfer.commutation import lookup
from tilefoundry.semantics.types import (
    Broadcast,
    DimMin,
    DimMul,
    DimType,
    DimVar,
    IRError,
    Layout,
    Mesh,
    Partial,
    ShapeType,
    ShardLayout,
    TensorType,
    TupleType,
    dim_bounds,
    free_dimvars,
    simplify,
)

__all__ = [
    "BUILDERS",
    "CAPS_ATTEMPTS",
    "SHARDED_FRACTION",
    "GenConfig",
    "GeneratedProgram",
    "capability_limit",
    "count_ops",
    "generate_program",
    "iter_programs",
    "programs",
]

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


# =============================================================================================
# capability restriction (a backend's declared ops / dtypes / policies / overflow modes / mesh)
# =============================================================================================
_KINDS: dict[type, tuple] = {Binary: tuple(BinaryKind), Unary: tuple(UnaryKind),
                             Reduce: tuple(ReduceKind)}


def _kind_feasible(cls: type, kind: Any, dts: frozenset) -> bool:
    """Some dtype of ``dts`` can be an operand of ``cls(kind)`` and the result's dtype is in
    ``dts`` too (comparisons produce bool)."""
    if cls is Binary:
        return any(_binary_dtype_ok(kind, d) for d in dts) and \
            (not kind.is_comparison or BOOL in dts)
    if cls is Unary:
        return any(_unary_ok(kind, d) for d in dts)
    return any(kind in _reduce_kinds(d) for d in dts)


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


def capability_limit(caps: Any) -> _Limit:
    """The draws a backend declaring ``caps`` can run. ``caps`` is duck-typed (the
    ``conformance.backend.Capabilities`` fields): ``ops`` (None: all; else class names such as
    ``"Binary"`` or single kinds such as ``"Binary.add"``), ``dtypes`` (DType members),
    ``policies``, ``overflow_modes``, ``mesh``. Raises TilefoundryError when nothing can be
    drawn (no op class with a builder, no evaluable dtype)."""
    names = None if caps.ops is None else {str(o) for o in caps.ops}
    dts = frozenset(DType(d) for d in caps.dtypes)
    pols = tuple(p for p in POLICIES if p in set(caps.policies))
    ovf = tuple(m for m in OVERFLOW_MODES if m in set(caps.overflow_modes))
    classes, kinds = set(), {}
    for cls in BUILDERS:
        name = cls.__name__
        named = names is None or name in names
        if cls in _KINDS:
            ks = frozenset(k for k in _KINDS[cls]
                           if (named or f"{name}.{k.value}" in names)
                           and _kind_feasible(cls, k, dts))
            if not ks or (cls is Reduce and not pols):
                continue
            kinds[cls] = ks
        elif not named or (cls is Cast and not any(
                (d.is_float and ovf) or (not d.is_float and "nonfinite" in ovf)
                for d in dts if d in _CAST_TARGETS)):
            continue  # a Cast to a non-float dtype carries overflow="nonfinite"
        classes.add(cls)
    fallback = tuple(d for d in DType if d in dts and FORMATS[d].evaluable)
    if not fallback:
        raise TilefoundryError(f"capabilities: no evaluable dtype among "
                               f"{sorted(d.value for d in dts)}; nothing can be generated")
    if not classes - {Reshard, Local}:
        raise TilefoundryError(f"capabilities: no op the generator builds is admitted "
                               f"(ops {sorted(names or ())}, dtypes "
                               f"{sorted(d.value for d in dts)})")
    sharded = bool(caps.mesh) and Reshard in classes and bool(dts & set(_SHARDED_DTYPES))
    return _Limit(frozenset(classes), MappingProxyType(kinds), dts, pols, ovf, sharded,
                  fallback)


# =============================================================================================
# internal values and scopes
# =============================================================================================
@dataclass(eq=False)
class _Val:
    expr: Expr
    type: Any
    bound: float | None = None  # |value| bound of an integer-valued tensor (None: unknown)
    domain: tuple[int, int] | None = None  # every element lies in [lo, hi] (integers)
    local: bool = False  # device-varying (from Local): never mixed with sharded values
    leaf: bool = False
    is_tensor: bool = field(init=False)
    evaluable: bool = field(init=False)  # a tensor whose dtype the evaluator computes with

    def __post_init__(self):
        self.is_tensor = isinstance(self.type, TensorType)
        self.evaluable = self.is_tensor and FORMATS[self.type.dtype].evaluable


class _Scope:
    def __init__(self, kind: str, parent: _Scope | None = None):
        self.kind = kind  # "entry" | "callee" | "variant" | "loop"
        self.parent = parent
        self.pool: list[_Val] = list(parent.pool) if parent is not None else []
        self.created: list[_Val] = []
        self.used: set[int] = set()
        self.fscope: _Scope = parent.fscope if kind == "loop" and parent else self
        self.params: list[Var] = []
        self.inputs: list[Any] = []
        self.env: dict[str, int] = self.fscope.env if self.fscope is not self else {}
        self.depth = 0 if parent is None else parent.depth + 1

    def direct_dvs(self) -> list[DimVar]:
        """DimVars that are a whole axis of some parameter of the enclosing function."""
        out: dict[str, DimVar] = {}
        for p in self.fscope.params:
            if isinstance(p.type, TensorType):
                for d in p.type.shape:
                    if isinstance(d, DimVar):
                        out.setdefault(d.name, d)
        return list(out.values())


def _static(shape: tuple) -> bool:
    return all(isinstance(simplify(d), int) for d in shape)


def _lo(d) -> int:
    d = simplify(d)
    if isinstance(d, int):
        return d
    lo = dim_bounds(d)[0]
    return max(lo, 0) if lo is not None else 0


def _eq(a, b) -> bool:
    return simplify(a) == simplify(b)


def _direct(shape: tuple) -> set[str]:
    return {d.name for d in shape if isinstance(d, DimVar)}


def _resolvable(d, shape: tuple) -> bool:
    """``d`` evaluates from the DimVars that are whole axes of ``shape`` (what the evaluator can
    read off an operand's array)."""
    return {v.name for v in free_dimvars(simplify(d))} <= _direct(shape)


def _exact_limit(dt: DType) -> float:
    info = FORMATS[dt]
    if info.kind == "bool":
        return 1
    if info.kind == "int":
        return (1 << (info.bits - 1)) - 1 if info.signed else (1 << info.bits) - 1
    if not info.implicit_bit:
        return 1  # f8e8m0: the integers it holds exactly are powers of two; keep only 1
    return float(min(2 ** (info.mbits + 1), info.max_finite))


def _mx(*bs):
    return None if any(b is None for b in bs) else max(bs, default=0)


def _has_shard(t: Any) -> bool:
    if isinstance(t, TupleType):
        return all(_has_shard(f) for f in t.fields)
    return isinstance(t, TensorType) and t.shard is not None


def _partials(t: Any) -> bool:
    if isinstance(t, TupleType):
        return any(_partials(f) for f in t.fields)
    return isinstance(t, TensorType) and t.shard is not None and bool(t.shard.partials)


# =============================================================================================
# the generator
# =============================================================================================
class _Gen:
    def __init__(self, src: Source, cfg: GenConfig, seed: int | None = None):
        self.src = src
        self.data = src
        self.seed = seed  # set: inputs are drawn lazily, each from its own seeded stream
        self.cfg = cfg
        self.session = Session()
        self.stats: Counter = Counter()
        self.functions: list[Function] = []
        self.callees: list[tuple[Function, tuple, list]] = []  # (fn, arg bounds, out vals)
        self.counter = 0
        self.mesh: Mesh | None = None
        self.ops = tuple(c for c in cfg.ops if c in BUILDERS)
        self.limit: _Limit | None = cfg.limit
        if self.limit is not None:
            self.ops = tuple(c for c in self.ops if c in self.limit.classes) or self.ops
        self.features: set[str] = set()

    def add_input(self, sc: _Scope, make: Callable[[Source], Any]) -> None:
        """Register the entry input ``make(source)`` draws (lazily for a seeded program)."""
        if self.seed is not None:
            key = f"tilefoundry-input:{self.seed}:{len(sc.inputs)}"
            sc.inputs.append(lambda: make(RandomSource(key)))  # type: ignore[arg-type]
        else:
            v = make(self.data)
            sc.inputs.append(lambda: v)

    def fresh(self) -> int:
        self.counter += 1
        return self.counter

    # ---- choices ---------------------------------------------------------------------------
    def pick(self, cands: Sequence[Any]) -> Any:
        return self.src.choice(list(cands)) if cands else None

    def only(self, dtypes: Sequence[DType]) -> Sequence[DType]:
        """``dtypes`` less those outside the capability limit (unchanged without one)."""
        if self.limit is None:
            return dtypes
        return tuple(d for d in dtypes if d in self.limit.dtypes)

    def kinds(self, cls: type, kinds: Sequence[Any]) -> list:
        """The kinds of ``cls`` to draw from (the admitted ones under a capability limit)."""
        if self.limit is None:
            return list(kinds)
        return [k for k in kinds if k in self.limit.kinds.get(cls, ())]

    def tensors(self, sc: _Scope, pred: Callable[[_Val], bool] | None = None, *,
                sharded: bool = True, f4: bool = False, u32: bool = False) -> list[_Val]:
        """Pool tensors; u32 values (a Bitcast's) only for the builders that take them
        (``u32=True``: Select, Bitcast)."""
        return [v for v in sc.pool if v.is_tensor and not v.local and (f4 or v.evaluable)
                and (u32 or v.type.dtype is not DType.U32)
                and (sharded or v.type.layout is None or v.type.shard is None)
                and (pred is None or pred(v))]

    def leaf_dtype(self, kinds: str = "fib") -> DType:
        pool = _SHARDED_DTYPES if self.cfg.sharded else _LEAF_DTYPES
        if self.limit is not None:
            pool = self.only(pool) or self.limit.fallback
        pool = tuple(d for d in pool if ("f" in kinds and d.is_float) or
                     ("i" in kinds and d.is_int) or ("b" in kinds and d is BOOL))
        if self.limit is not None and not pool:
            pool = self.limit.fallback  # the builder's type checks decline what cannot fit
        return self.src.choice(pool or (F32,))

    def leaf_shape(self, sc: _Scope, *, min_rank: int = 0, max_rank: int = 3,
                   max_side: int = 4) -> tuple:
        shapes = [v.type.shape for v in self.tensors(sc)
                  if min_rank <= v.type.rank <= max_rank and self.can_leaf(sc, v.type.shape)]
        if shapes and self.src.boolean(0.5):
            return self.src.choice(shapes)
        rank = self.src.integer(min_rank, max_rank)
        dvs = sc.direct_dvs() if sc.fscope.kind == "entry" else []
        out = []
        for _ in range(rank):
            if dvs and self.src.boolean(0.3):
                out.append(self.src.choice(dvs))
            else:
                out.append(self.src.integer(1, max_side))
        return tuple(out)

    def can_leaf(self, sc: _Scope, shape: tuple) -> bool:
        if _static(shape):
            return True
        if sc.fscope.kind != "entry":
            return False
        env = sc.fscope.env
        return all(v.name in env for d in shape for v in free_dimvars(d))

    def spec(self) -> ValueSpec:
        if self.cfg.sharded:
            return _TAME
        return GENERAL if self.src.boolean(0.8) else ORDINARY

    # ---- leaves ----------------------------------------------------------------------------
    def leaf(self, sc: _Scope, t: TensorType, spec: ValueSpec | None = None,
             name: str = "x") -> _Val | None:
        """A fresh leaf of type ``t``: an entry parameter (with a drawn input) or a literal."""
        if self.limit is not None and not self.limit.admits_type(t):
            self.stats["declined:capabilities"] += 1
            return None
        spec = spec if spec is not None else self.spec()
        if t.dtype is BOOL and spec.kind == "int_range":
            spec = ValueSpec.int_range(0, 1)
        f = sc.fscope
        if not self.can_leaf(sc, t.shape):
            return None
        bound = domain = None
        if spec.kind == "int_range":
            bound = max(abs(spec.lo), abs(spec.hi))
            if t.dtype.is_int or t.dtype is BOOL:
                domain = (int(spec.lo), int(spec.hi))
        if f.kind == "entry" and (not _static(t.shape) or self.src.boolean(0.7)):
            shape = bind(t.shape, f.env)
            var = Var(f"{name}{len(f.params)}", t)
            f.params.append(var)
            self.add_input(f, lambda d, dt=t.dtype, shape=shape, spec=spec:
                           draw_array(d, dt, shape, spec))
            v = _Val(var, t, bound, domain, leaf=True)
        else:
            arr = draw_array(self.data, t.dtype, tuple(simplify(d) for d in t.shape), spec)
            v = _Val(Constant(arr), TensorType(tuple(arr.shape), t.dtype), bound, domain,
                     leaf=True)
        sc.pool.append(v)
        return v

    def index_leaf(self, sc: _Scope, shape: tuple, lo: int, hi: int,
                   dtypes: Sequence[DType] = (I32, I64)) -> _Val | None:
        """An integer operand with every element in [lo, hi]: a pool value whose domain fits,
        else a fresh leaf drawn in range."""
        fits = [v for v in self.tensors(sc, sharded=False)
                if v.domain is not None and lo <= v.domain[0] and v.domain[1] <= hi
                and v.type.dtype in dtypes and len(v.type.shape) == len(shape)
                and all(_eq(a, b) for a, b in zip(v.type.shape, shape, strict=True))]
        if fits and self.src.boolean(0.6):
            return self.src.choice(fits)
        dtypes = self.only(dtypes)
        if not dtypes:
            return None
        return self.leaf(sc, TensorType(tuple(shape), self.src.choice(list(dtypes))),
                         ValueSpec.int_range(lo, hi), name="idx")

    # ---- applying an op --------------------------------------------------------------------
    def rule_type(self, op: Op, call: Call, types: list) -> Any:
        try:
            return RULES[type(op)](Ctx(op, call, self.session), tuple(types))
        except (TypeInferError, IRError) as e:
            self.stats[f"rejected:{type(op).__name__}"] += 1
            self.last_rejection = e
            return None

    def apply(self, sc: _Scope, op: Op, args: Sequence[_Val], *, local: bool = False,
              domain: tuple[int, int] | None = None) -> list[_Val] | None:
        if self.limit is not None and not self.limit.admits_op(op):
            self.stats["declined:capabilities"] += 1
            return None
        call = Call(op, tuple(a.expr for a in args))
        t = self.rule_type(op, call, [a.type for a in args])
        if t is None:
            return None
        if self.limit is not None and not self.limit.admits_type(t):
            self.stats["declined:capabilities"] += 1
            return None
        if any(a.is_tensor and a.type.shard is not None for a in args) and \
                not isinstance(op, ShapeOf | Rank | Local) and not _has_shard(t):
            # the rule typed a sharded operand's result as a plain tensor (seen: Reshape of a
            # refined all-Broadcast layout); the mesh simulation would make it a device-varying
            # value (finding, D146)
            self.stats["declined:sharding-dropped"] += 1
            return None
        bounds = _bounds(op, args, t)
        if self.cfg.sharded and (_partials(t) or any(_partials(a.type) for a in args)):
            ok = all(a.bound is not None or not a.is_tensor or not a.type.dtype.is_float
                     for a in args) and all(b is not None for b in bounds)
            if not ok:  # a Partial state over values not known to be exact integers
                self.stats["declined:inexact-partial"] += 1
                return None
        for a in args:
            sc.used.add(id(a))
        if isinstance(t, TupleType):
            vals = [_Val(TupleGetItem(call, i), ft, bounds[i], _domain(op, args, i), local)
                    for i, ft in enumerate(t.fields)]
        else:
            vals = [_Val(call, t, bounds[0], domain if domain is not None else
                         _domain(op, args, 0), local)]
        sc.pool.extend(vals)
        sc.created.extend(vals)
        return vals

    # ---- steps -----------------------------------------------------------------------------
    def op_step(self, sc: _Scope) -> bool:
        for _ in range(4):
            cls = self.src.choice(self.ops)
            if BUILDERS[cls](self, sc):
                return True
            self.stats[f"declined:{cls.__name__}"] += 1
        return False

    def grow(self, sc: _Scope, steps: int, *, structure: bool = True) -> None:
        for _ in range(steps):
            if self.cfg.motifs and self.src.boolean(self.cfg.motifs):
                from tilefoundry.oracle.program_motifs import build_motif

                if build_motif(self, sc):
                    continue
            if structure:
                r = self.src.integer(0, 99)
                if r < 10 and self.cfg.allow_loops and sc.kind != "loop" and \
                        build_loop(self, sc):  # loops in the entry, callees and variants
                    continue
                if 10 <= r < 20 and self.cfg.allow_calls and sc.fscope.kind == "entry" and \
                        build_call(self, sc):
                    continue
                if 20 <= r < 30 and self.cfg.allow_dispatch and sc.fscope.kind == "entry" and \
                        build_dispatch(self, sc):
                    continue
            self.op_step(sc)

    def outputs(self, sc: _Scope, cap: int = 6) -> list[_Val]:
        outs = [v for v in sc.created if id(v) not in sc.used and
                isinstance(v.type, TensorType | ShapeType | DimType)]
        if len(outs) > cap:
            outs = outs[-cap:]
        if not outs:
            made = [v for v in sc.created if isinstance(v.type, TensorType)]
            outs = made[-1:] or [v for v in sc.pool if v.is_tensor][:1]
        return outs

    # ---- the program -----------------------------------------------------------------------
    def run(self, seed: int | None = None) -> GeneratedProgram:
        cfg, src = self.cfg, self.src
        sc = _Scope("entry")
        if cfg.sharded:
            self.mesh = draw_mesh(src)
            self.features.add("sharded")
            self.init_sharded(sc)
        else:
            self.init_plain(sc)
        self.grow(sc, src.integer(1, max(1, cfg.max_ops)))
        outs = self.outputs(sc, cap=8)
        if cfg.sharded:
            outs = [self.to_broadcast(sc, v) for v in outs]
        body = outs[0].expr if len(outs) == 1 else Tuple(tuple(v.expr for v in outs))
        if len(outs) > 1:
            self.features.add("tuple_output")
        entry = Function("main", tuple(sc.params), body, None)
        topo = topology_of(self.mesh) if self.mesh is not None else None
        module = Module((entry, *self.functions), topology=topo) if topo is not None else \
            Module((entry, *self.functions))
        counts, feats = count_ops(module)
        self.features |= feats
        if sc.env:
            self.features.add("symbolic")
        return GeneratedProgram(module, "main", tuple(sc.inputs), MappingProxyType(counts),
                                frozenset(self.features), MappingProxyType(dict(sc.env)),
                                self.mesh, seed, MappingProxyType(dict(self.stats)))

    def init_plain(self, sc: _Scope) -> None:
        src, cfg = self.src, self.cfg
        symbolic = cfg.symbolic if cfg.symbolic is not None else src.boolean(0.35)
        dvs: list[DimVar] = []
        if symbolic:
            for name in ("N", "M")[:src.integer(1, 2)]:
                lo = src.integer(1, 3)
                hi = src.integer(lo + 2, lo + 5)
                dvs.append(DimVar(name, lo, hi))
                sc.env[name] = src.integer(lo, hi - 1)
        rank = src.integer(1, 3)
        base = tuple(src.choice(dvs) if dvs and src.boolean(0.5) else src.integer(1, 4)
                     for _ in range(rank))
        for dv in dvs:  # the first parameter binds every DimVar as a whole axis
            if dv not in base:
                ints = [i for i, d in enumerate(base) if isinstance(d, int)]
                if len(base) < 3 or not ints:
                    base = (*base, dv)
                else:
                    i = src.choice(ints)
                    base = (*base[:i], dv, *base[i + 1:])
        for k in range(src.integer(1, 3)):
            r = src.integer(0, 3) if k else 0
            if r == 0:
                shape = base
            elif r == 1:
                shape = base[src.integer(0, len(base)):]  # a broadcastable suffix
            elif r == 2:
                shape = tuple(1 if src.boolean(0.3) else d for d in base)
            else:
                shape = self.leaf_shape(sc)
            if not self.can_leaf(sc, shape):
                shape = base
            self.leaf(sc, TensorType(shape, self.leaf_dtype()))

    def init_sharded(self, sc: _Scope) -> None:
        src, mesh = self.src, self.mesh
        assert mesh is not None
        base = tuple(src.choice((2, 4, 6, 2, 3, 1, 4)) for _ in range(src.integer(1, 3)))
        for k in range(src.integer(1, 3)):
            shape = base if k == 0 or src.boolean(0.6) else \
                tuple(src.choice((2, 4, 6, 3)) for _ in range(src.integer(1, 3)))
            dt = self.leaf_dtype("fi")
            if src.boolean(0.8):
                self.sharded_param(sc, shape, dt)
            else:
                self.leaf(sc, TensorType(shape, dt), _TAME)

    def sharded_param(self, sc: _Scope, shape: tuple, dt: DType) -> _Val:
        src, mesh = self.src, self.mesh
        assert mesh is not None
        lay = draw_shard_layout(src, shape, mesh)
        from tilefoundry.semantics.typeinfer.functions import materialize_type

        declared = TensorType(shape, dt, lay)
        t = materialize_type(declared)  # what inference sees after signature materialization
        if src.boolean(0.5):
            declared = t  # otherwise keep the strides=None sugar in the signature
        var = Var(f"s{len(sc.params)}", declared)
        n_part = math.prod(m for a, m in zip(lay.attrs, mesh.axis_extents, strict=True)
                           if isinstance(a, Partial))
        if lay.partials:
            sums = sum(1 for r in lay.partials.values() if r == "sum")
            bound = _TAME.hi * (n_part if sums else 1)
            make = partial(_partial_input, lay, dt)
        else:
            bound = _TAME.hi
            make = partial(_split_input, lay, dt, shape, src.boolean(0.5))
        sc.params.append(var)
        self.add_input(sc, make)
        v = _Val(var, t, bound if bound <= _exact_limit(dt) else None, leaf=True)
        sc.pool.append(v)
        return v

    def to_broadcast(self, sc: _Scope, v: _Val) -> _Val:
        t = v.type
        if not isinstance(t, TensorType) or t.shard is None or v.local:
            return v
        assert self.mesh is not None
        target = ShardLayout(self.mesh, (Broadcast(),) * len(self.mesh.axis_names),
                             Layout(tuple(simplify(d) for d in t.shape)))
        out = self.apply(sc, Reshard(layout=target), [v])
        if out is None:  # pragma: no cover - every Partial value is exact by construction
            raise TilefoundryError(f"generator: cannot Reshard {t} to Broadcast: "
                                   f"{getattr(self, 'last_rejection', '')}")
        return out[0]


def _partial_input(lay: ShardLayout, dt: DType, d: Source) -> Sharded:
    """Per-device pieces of a Partial parameter (replicas on Broadcast axes identical)."""
    full = (*lay.mesh.axis_extents, *lay.local_axis_extents())
    data = draw_array(d, dt, full, _TAME)
    for i, a in enumerate(lay.attrs):
        if isinstance(a, Broadcast):
            data = np.broadcast_to(np.take(data, [0], axis=i), data.shape)
    return Sharded.from_devices(lay, np.ascontiguousarray(data))


def _split_input(lay: ShardLayout, dt: DType, shape: tuple, sharded: bool, d: Source) -> Any:
    """A parameter without Partials: the global array, distributed or not (evaluate shards a
    global array itself)."""
    arr = draw_array(d, dt, shape, _TAME)
    return shard(arr, lay) if sharded else arr


# =============================================================================================
# bounds and domains (exactness tracking)
# =============================================================================================
def _clip(b: float | None, t: Any) -> float | None:
    if b is None or not isinstance(t, TensorType):
        return None
    return b if b <= _exact_limit(t.dtype) else None


def _static_prod(ds) -> int | None:
    out = 1
    for d in ds:
        d = simplify(d)
        if not isinstance(d, int):
            return None
        out *= d
    return out


def _bounds(op: Op, args: Sequence[_Val], t: Any) -> list[float | None]:
    bs = [a.bound if a.is_tensor else None for a in args]
    b0 = bs[0] if bs else None
    res: float | list | None = None
    if isinstance(op, Binary):
        k = op.kind
        if k.is_comparison or k.is_boolean:
            res = 1
        elif k in (BinaryKind.ADD, BinaryKind.SUB):
            res = None if None in bs else bs[0] + bs[1]
        elif k is BinaryKind.MUL:
            res = None if None in bs else bs[0] * bs[1]
        elif k in (BinaryKind.MIN, BinaryKind.MAX):
            res = _mx(*bs)
    elif isinstance(op, Unary):
        if op.kind in (UnaryKind.NEG, UnaryKind.ABS, UnaryKind.CEIL, UnaryKind.ROUND,
                       UnaryKind.RELU):
            res = b0
        elif op.kind is UnaryKind.SQUARE:
            res = None if b0 is None else b0 * b0
        elif op.kind is UnaryKind.LOGICAL_NOT:
            res = 1
    elif isinstance(op, ReLU):
        res = b0
    elif isinstance(op, Reduce):
        x = args[0].type
        if op.kind in (ReduceKind.MAX, ReduceKind.MIN, ReduceKind.ABS_MAX):
            res = b0
        elif op.kind is ReduceKind.SUM and b0 is not None:
            n = _static_prod(x.shape[a % max(x.rank, 1)] for a in op.axes)
            res = None if n is None else b0 * n
    elif isinstance(op, MatMul):
        k = simplify(args[0].type.shape[-1])
        res = None if None in bs or not isinstance(k, int) else bs[0] * bs[1] * k
    elif isinstance(op, Conv2D):
        w = args[1].type.shape
        k = _static_prod(w[1:])
        res = None if None in bs or k is None else bs[0] * bs[1] * k + bs[2]
    elif isinstance(op, RoPE):
        if None in bs[:4]:
            return [None, None]
        c = bs[2] + bs[3]
        return [_clip(bs[0] * c, t.fields[0]), _clip(bs[1] * c, t.fields[1])]
    elif isinstance(op, TopK | Sort):
        n = simplify(args[0].type.shape[op.axis % args[0].type.rank])
        return [_clip(b0, t.fields[0]), _clip(n - 1 if isinstance(n, int) else None,
                                              t.fields[1])]
    elif isinstance(op, Zeros):
        res = 0
    elif isinstance(op, Select):
        res = _mx(bs[1], bs[2])
    elif isinstance(op, Scan):
        sd = abs(op.seed) if op.seed is not None else 0
        n = simplify(args[0].type.shape[op.axis % args[0].type.rank])
        if b0 is not None and op.combine in ("max", "min"):
            res = max(b0, sd)
        elif b0 is not None and op.combine == "add" and isinstance(n, int):
            res = b0 * n + sd
    elif isinstance(op, Rank):
        res = args[0].type.rank
    elif isinstance(op, Cast):
        res = b0 if op.dtype is not BOOL else 1
    elif isinstance(op, Gather | Transpose | Reshape | Slice | Reshard | Local):
        res = b0
    elif isinstance(op, Concat | Stack):
        res = _mx(*bs)
    elif isinstance(op, InsertSlice):
        res = _mx(bs[0], bs[1])
    elif isinstance(op, CacheUpdate):
        res = _mx(bs[0], bs[3])
    if isinstance(t, TupleType):
        return [None] * len(t.fields)
    return [_clip(res, t)]


def _domain(op: Op, args: Sequence[_Val], i: int) -> tuple[int, int] | None:
    if isinstance(op, TopK | Sort) and i == 1:
        n = simplify(args[0].type.shape[op.axis % args[0].type.rank])
        return (0, n - 1) if isinstance(n, int) and n >= 1 else None
    if isinstance(op, Rank):
        r = args[0].type.rank
        return (r, r)
    if isinstance(op, Transpose | Reshape | Slice | Reshard | Gather) and args[0].domain:
        return args[0].domain
    if isinstance(op, Concat | Stack) and all(a.domain for a in args):
        return (min(a.domain[0] for a in args), max(a.domain[1] for a in args))
    return None


# =============================================================================================
# op builders: one per op class
# =============================================================================================
BUILDERS: dict[type, Callable[[_Gen, _Scope], bool]] = {}


def _builder(cls: type) -> Callable:
    def deco(fn):
        assert cls not in BUILDERS, cls
        BUILDERS[cls] = fn
        return fn
    return deco


def _has_split(t: TensorType) -> bool:
    return t.shard is not None and bool(t.shard.split_positions)


def _split_axes(t: TensorType) -> set[int]:
    """Tensor axes of ``t`` that some mesh axis splits."""
    if t.shard is None:
        return set()
    aop = t.shard.layout.axis_of_position
    return {aop[p] for p in t.shard.split_positions}


def _table_ok(op: str, kind: str, t: TensorType) -> bool:
    """Every Partial state of the single value operand ``x`` has an allow row."""
    if t.shard is None:
        return True
    for red in set(t.shard.partials.values()):
        row = lookup(op, kind, "x", red)
        if row is None or not row.allow:
            return False
    return True


def _bshape(a: tuple, b: tuple) -> bool:
    """a and b broadcast under the type rule (a symbolic dim only against 1 or itself)."""
    for x, y in zip(reversed(a), reversed(b), strict=False):
        if not (x == 1 or y == 1 or _eq(x, y)):
            return False
    return True


def _binary_dtype_ok(kind: BinaryKind, dt: DType) -> bool:
    if kind.is_boolean:
        return dt is BOOL
    if kind is BinaryKind.DIV:
        return dt.is_float
    if kind.is_comparison:
        return True
    return dt is not BOOL


@_builder(Binary)
def build_binary(g: _Gen, sc: _Scope) -> bool:
    kinds = g.kinds(Binary, BinaryKind)
    if not kinds:
        return False
    kind = g.src.choice(kinds)
    lhs = g.pick(g.tensors(sc, lambda v: _binary_dtype_ok(kind, v.type.dtype)))
    if lhs is None:
        return False
    lt = lhs.type
    sharded = lt.shard is not None

    def rhs_ok(v: _Val) -> bool:
        t = v.type
        if t.dtype is not lt.dtype:
            return False
        if sharded or t.shard is not None:
            return tuple(t.shape) == tuple(lt.shape) or (t.shard is None and
                                                         len(t.shape) <= lt.rank and
                                                         _bshape(lt.shape, t.shape))
        return _bshape(lt.shape, t.shape)

    r = g.src.integer(0, 9)
    rhs = lhs if r < 2 else g.pick(g.tensors(sc, rhs_ok)) if r < 7 else None
    if rhs is None:
        k = g.src.integer(0, lt.rank)
        shape = tuple(1 if g.src.boolean(0.25) else d for d in lt.shape[k:])
        if not g.can_leaf(sc, shape):
            shape = ()
        rhs = g.leaf(sc, TensorType(shape, lt.dtype))
        if rhs is None:
            return False
    args = [lhs, rhs] if g.src.boolean(0.7) or (rhs.type.shard is None and sharded) \
        else [rhs, lhs]
    return g.apply(sc, Binary(kind), args) is not None


_UNARY_FLOAT = (UnaryKind.RSQRT, UnaryKind.EXP, UnaryKind.LOG, UnaryKind.EXP2, UnaryKind.LOG2,
                UnaryKind.SQRT)
_UNARY_NUMERIC = (UnaryKind.NEG, UnaryKind.ABS, UnaryKind.CEIL, UnaryKind.ROUND,
                  UnaryKind.RELU, UnaryKind.SQUARE)


def _unary_ok(kind: UnaryKind, dt: DType) -> bool:
    if kind is UnaryKind.LOGICAL_NOT:
        return dt is BOOL
    if kind in _UNARY_FLOAT:
        return dt.is_float
    return dt is not BOOL


@_builder(Unary)
def build_unary(g: _Gen, sc: _Scope) -> bool:
    kinds = g.kinds(Unary, UnaryKind)
    if not kinds:
        return False
    kind = g.src.choice(kinds)
    x = g.pick(g.tensors(sc, lambda v: _unary_ok(kind, v.type.dtype) and
                         _table_ok("Unary", kind.value, v.type)))
    return x is not None and g.apply(sc, Unary(kind), [x]) is not None


def _factorizations(n: int, rank: int, src: Source) -> tuple[int, ...]:
    """A random ordered factorization of n into ``rank`` factors."""
    primes, m, p = [], n, 2
    while m > 1 and p * p <= m:
        while m % p == 0:
            primes.append(p)
            m //= p
        p += 1
    if m > 1:
        primes.append(m)
    out = [1] * rank
    for q in primes:
        out[src.integer(0, rank - 1)] *= q
    return tuple(out)


@_builder(Reshape)
def build_reshape(g: _Gen, sc: _Scope) -> bool:
    # a sharded x only without Splits: the mesh simulation reshapes each device's block with
    # the global new_shape (finding, D146)
    x = g.pick(g.tensors(sc, lambda v: not _has_split(v.type), f4=g.cfg.type_level_only))
    if x is None:
        return False
    shape = tuple(x.type.shape)
    src = g.src
    if _static(shape):
        total = math.prod(simplify(d) for d in shape)
        rank = src.integer(0 if total == 1 else 1, 4)
        new = _factorizations(total, rank, src) if rank else ()
    else:
        new_l = list(shape)
        r = src.integer(0, 2)
        if r == 0:  # insert a unit axis
            new_l.insert(src.integer(0, len(new_l)), 1)
        elif r == 1 and 1 in new_l:  # drop a unit axis
            new_l.remove(1)
        elif len(new_l) >= 2:  # merge two adjacent axes
            i = src.integer(0, len(new_l) - 2)
            a, b = new_l[i], new_l[i + 1]
            m = simplify(DimMul(a, b)) if not (isinstance(a, int) and isinstance(b, int)) \
                else a * b
            new_l[i:i + 2] = [m]
        else:
            new_l.append(1)
        new = tuple(new_l)
        unresolved = [d for d in new if not _resolvable(d, shape)]
        if len(unresolved) > 1:
            return False
    return g.apply(sc, Reshape(tuple(new)), [x]) is not None


_CAST_TARGETS = (F32, BF16, F16, DType.FP8E4M3, DType.FP8E5M2, F8E8M0, I32, I64, I8, U8, BOOL)


def _int_safe_spec(dst: DType) -> ValueSpec:
    """Float values that truncate into ``dst``'s range in every float source format (after the
    source's own rounding: e.g. 100 rounds to at most 104 in fp8e4m3)."""
    if dst is U8:
        return ValueSpec.real_range(0, 200)
    return ValueSpec.real_range(-100, 100)


@_builder(Cast)
def build_cast(g: _Gen, sc: _Scope) -> bool:
    targets = g.only(_CAST_TARGETS + ((F4E2M1,) if g.cfg.type_level_only else ()))
    if not targets:
        return False
    dst = g.src.choice(targets)
    x = g.pick(g.tensors(sc))
    if x is None:
        return False
    xt = x.type
    if xt.dtype.is_float and dst.is_int and g.cfg.avoid_unspecified:
        lim = 100 if dst is not U8 else -1
        if x.bound is None or x.bound > lim:
            if xt.shard is not None:
                return False
            # a fresh source drawn in range (f8e8m0 holds no such range: an f32 source then)
            src_dt = xt.dtype if xt.dtype is not F8E8M0 else F32
            x = g.leaf(sc, TensorType(xt.shape, src_dt), _int_safe_spec(dst))
            if x is None:
                return False
    if _partials(x.type) and (dst is BOOL or dst is U8):
        # the Cast rule keeps a Partial state, but x != 0 (and u8's wraparound) is no monotone
        # or linear map: sum / max of the pieces' casts is not the cast of the sum / max
        # (finding, D146)
        return False
    if dst.is_float:
        overflow = g.src.choice(OVERFLOW_MODES if g.limit is None else g.limit.overflow)
        rounding = g.src.choice(ROUNDING_MODES) if dst is F8E8M0 else "nearest"
    else:
        overflow, rounding = "nonfinite", "nearest"
    return g.apply(sc, Cast(dst, overflow, rounding), [x]) is not None


@_builder(Gather)
def build_gather(g: _Gen, sc: _Scope) -> bool:
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1))
    if x is None:
        return False
    xt = x.type
    src = g.src
    axis = src.integer(0, xt.rank - 1)
    if axis in _split_axes(xt) and xt.dtype in (BOOL, F8E8M0):
        # the rule makes a Gather over a Split axis Partial(sum) for every dtype, but a bool /
        # f8e8m0 sum does not exist, so nothing could complete it (finding, D146)
        return False
    n = _lo(xt.shape[axis])
    if n < 1:
        return False
    bd = 0
    if axis >= 1 and xt.shard is None and src.boolean(0.25):
        bd = src.integer(1, axis)
    extra = tuple(src.integer(1, 3) for _ in range(src.integer(0, 2)))
    idx_shape = tuple(xt.shape[:bd]) + extra
    if not g.can_leaf(sc, idx_shape):
        return False
    idx = g.index_leaf(sc, idx_shape, 0, n - 1, (I32, I64, I8, U8) if n <= 100 else (I32, I64))
    if idx is None:
        return False
    ax = axis - xt.rank if src.boolean(0.3) else axis
    return g.apply(sc, Gather(ax, bd), [x, idx]) is not None


@_builder(Zeros)
def build_zeros(g: _Gen, sc: _Scope) -> bool:
    statics = [tuple(v.type.shape) for v in g.tensors(sc) if _static(v.type.shape)]
    shape = g.src.choice(statics) if statics and g.src.boolean(0.5) else \
        tuple(g.src.integer(1, 4) for _ in range(g.src.integer(0, 3)))
    dt = g.leaf_dtype()
    if dt is F8E8M0:
        dt = F32
    return g.apply(sc, Zeros(tuple(shape), dt), []) is not None


def _reduce_kinds(dt: DType) -> list[ReduceKind]:
    if dt is BOOL:
        return [ReduceKind.MAX, ReduceKind.MIN]
    if dt.is_int:
        return [ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN, ReduceKind.ABS_MAX]
    if dt is F8E8M0:
        return [ReduceKind.MAX, ReduceKind.MIN, ReduceKind.ABS_MAX]
    return list(ReduceKind)


@_builder(Reduce)
def build_reduce(g: _Gen, sc: _Scope) -> bool:
    x = g.pick(g.tensors(sc))
    if x is None:
        return False
    xt = x.type
    src = g.src
    kinds = [k for k in g.kinds(Reduce, _reduce_kinds(xt.dtype))
             if _table_ok("Reduce", k.value, xt)]
    if not kinds:
        return False
    kind = src.choice(kinds)
    axes = [a for a in range(xt.rank) if src.boolean(0.5)]
    if xt.rank and not axes and src.boolean(0.7):
        axes = [src.integer(0, xt.rank - 1)]
    axes = [a - xt.rank if src.boolean(0.3) else a for a in axes]
    order = src.permutation(len(axes))
    axes = [axes[i] for i in order]
    op = Reduce(tuple(axes), keepdim=src.boolean(0.5), kind=kind,
                policy=src.choice(POLICIES if g.limit is None else g.limit.policies))
    return g.apply(sc, op, [x]) is not None


def _offset_operand(g: _Gen, sc: _Scope, lo: int, hi: int, dtypes=(I32, I64)) -> _Val | None:
    """A rank-0 integer in [lo, hi]: a literal, a pool value whose domain fits, or a leaf."""
    r = g.src.integer(0, 2)
    if r == 0:
        v = g.src.integer(lo, hi)
        if not g.only(dtypes):
            return None
        dt = g.src.choice(list(g.only(dtypes)))
        c = _Val(Constant(np.asarray(v, FORMATS[dt].storage)), TensorType((), dt), abs(v),
                 (v, v), leaf=True)
        sc.pool.append(c)
        return c
    return g.index_leaf(sc, (), lo, hi, dtypes)


@_builder(InsertSlice)
def build_insert_slice(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    dst = g.pick(g.tensors(sc, lambda v: v.type.shard is None or src.boolean(0.5)))
    if dst is None:
        return False
    dt = dst.type

    def fits(v: _Val) -> bool:
        t = v.type
        if t.dtype is not dt.dtype or t.rank != dt.rank:
            return False
        for u, d in zip(t.shape, dt.shape, strict=True):
            u, d = simplify(u), simplify(d)
            if _eq(u, d):
                continue
            if not isinstance(u, int) or u > _lo(d):
                return False
        return True

    # a dst with a Split takes only an update sharded identically: the mesh simulation writes
    # a replicated update's global window into each device's block (finding, D146)
    split = _has_split(dt)
    fits0 = fits
    fits = (lambda v: fits0(v) and v.type.shard == dt.shard) if split else fits0
    upd = g.pick(g.tensors(sc, fits)) if src.boolean(0.6) or split else None
    if upd is None and split:
        return False
    if upd is None:
        shape = tuple(d if not isinstance(simplify(d), int) and src.boolean(0.5) else
                      src.integer(1, max(1, _lo(d))) for d in dt.shape)
        upd = g.leaf(sc, TensorType(shape, dt.dtype))
        if upd is None or not fits(upd):
            return False
    offs = []
    for u, d in zip(upd.type.shape, dt.shape, strict=True):
        hi = 0 if _eq(u, d) else _lo(d) - simplify(u)
        o = _offset_operand(g, sc, 0, hi)
        if o is None:
            return False
        offs.append(o)
    return g.apply(sc, InsertSlice(), [dst, upd, *offs]) is not None


@_builder(CacheUpdate)
def build_cache_update(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    cache = g.pick(g.tensors(sc, lambda v: v.type.rank == 4))
    if cache is None or src.boolean(0.3):
        shape = (src.integer(1, 2), src.integer(1, 5), src.integer(1, 2), src.integer(1, 4))
        cache = g.leaf(sc, TensorType(shape, g.leaf_dtype()))
        if cache is None:
            return False
    ct = cache.type
    length = _lo(ct.shape[1])
    if length < 1:
        return False

    def fits(v: _Val) -> bool:
        t = v.type
        return t.rank == 4 and t.dtype is ct.dtype and all(
            _eq(t.shape[a], ct.shape[a]) for a in (0, 2, 3)) and \
            isinstance(simplify(t.shape[1]), int) and 1 <= simplify(t.shape[1]) <= length and \
            (t.shard == ct.shard if _has_split(ct) else t.shard is None or t.shard == ct.shard)

    split = _has_split(ct)  # see InsertSlice: a split cache takes an identically sharded new
    new = g.pick(g.tensors(sc, fits)) if src.boolean(0.5) or split else None
    if new is None and split:
        return False
    if new is None:
        shape = (ct.shape[0], src.integer(1, length), ct.shape[2], ct.shape[3])
        new = g.leaf(sc, TensorType(shape, ct.dtype))
        if new is None:
            return False
    nl = simplify(new.type.shape[1])
    s_hi = src.integer(1, nl)
    s = _offset_operand(g, sc, 1, s_hi, (I32,))
    cur = _offset_operand(g, sc, 0, length - s_hi, (I32,))
    if s is None or cur is None:
        return False
    return g.apply(sc, CacheUpdate(), [cache, cur, s, new]) is not None


@_builder(TopK)
def build_topk(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1 and _table_ok("TopK", "-", v.type) and
                         len(_split_axes(v.type)) < v.type.rank))
    if x is None:
        return False
    xt = x.type
    axis = src.choice([a for a in range(xt.rank) if a not in _split_axes(xt)])
    n = simplify(xt.shape[axis])
    if isinstance(n, int):  # k >= 1: an empty result would reach mean / reductions later
        k: Any = src.integer(1, n)
    elif isinstance(n, DimVar) and src.boolean(0.6):
        k = n if src.boolean(0.5) else DimMin(src.integer(1, 3), n)
    else:
        k = src.integer(1, max(1, _lo(n)))
    ax = axis - xt.rank if src.boolean(0.3) else axis
    op = TopK(k, ax, largest=src.boolean(0.5), sorted=src.boolean(0.7))
    return g.apply(sc, op, [x]) is not None


@_builder(Select)
def build_select(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    t = g.pick(g.tensors(sc, u32=True))
    if t is None:
        return False
    tt = t.type
    shape = tuple(tt.shape)

    def same(v: _Val) -> bool:
        return v is not t and v.type.dtype is tt.dtype and len(v.type.shape) == len(shape) and \
            all(_eq(a, b) for a, b in zip(v.type.shape, shape, strict=True))

    f = g.pick(g.tensors(sc, same, u32=True)) if src.boolean(0.5) else None
    if f is None:
        f = g.leaf(sc, TensorType(shape, tt.dtype))
        if f is None:
            return False
    conds = g.tensors(sc, lambda v: v.type.dtype is BOOL and _bshape(v.type.shape, shape) and
                      len(v.type.shape) <= len(shape) and v.type.shard is None)
    cond = g.pick(conds) if src.boolean(0.4) else None
    if cond is None:  # the full shape, or a broadcast one (the last axis only)
        cshape = shape if not shape or src.boolean(0.6) else (shape[-1],)
        cond = g.leaf(sc, TensorType(cshape, BOOL))
        if cond is None:
            return False
    return g.apply(sc, Select(), [cond, t, f]) is not None


@_builder(Bitcast)
def build_bitcast(g: _Gen, sc: _Scope) -> bool:
    x = g.pick(g.tensors(sc, lambda v: v.type.dtype in (F32, DType.U32) and
                         (v.type.shard is None or not v.type.shard.partials), u32=True))
    if x is None:
        if not g.only((F32,)):
            return False
        x = g.leaf(sc, TensorType(g.leaf_shape(sc), F32))
        if x is None:
            return False
    to = DType.U32 if x.type.dtype is F32 else F32
    return g.apply(sc, Bitcast(to), [x]) is not None


def _scan_combines(dt: DType) -> list[str]:
    return [c for c in SCAN_COMBINES if (c != "mul" or dt.is_int) and
            (c != "add" or dt not in (BOOL, F8E8M0))]


_SCAN_SEEDS = {"int": (-3, -1, 0, 2, 3), "float": (-0.0, 0.0, 1.0, -2.5, 0.5, 6.0)}


@_builder(Scan)
def build_scan(g: _Gen, sc: _Scope) -> bool:
    from tilefoundry.semantics.typeinfer.tile_scan import seed_problem

    src = g.src
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1 and
                         len(_split_axes(v.type)) < v.type.rank))
    if x is None:
        return False
    xt = x.type
    combines = [c for c in _scan_combines(xt.dtype) if _table_ok("Scan", c, xt)]
    if not combines:
        return False
    c = src.choice(combines)
    axis = src.choice([a for a in range(xt.rank) if a not in _split_axes(xt)])
    seed = None
    partial = xt.shard is not None and bool(xt.shard.partials)
    if src.boolean(0.5) and not (partial and c in ("add", "mul")):
        pool = _SCAN_SEEDS["float" if xt.dtype.is_float else "int"]
        ok = [v for v in pool if seed_problem(v, xt.dtype) is None]
        seed = src.choice(ok) if ok else None
    pols = [p for p in SCAN_POLICIES if g.limit is None or p in g.limit.policies]
    if not pols:
        return False
    ax = axis - xt.rank if src.boolean(0.3) else axis
    op = Scan(ax, c, inclusive=src.boolean(0.5), seed=seed, policy=src.choice(pols))
    return g.apply(sc, op, [x]) is not None


@_builder(Sort)
def build_sort(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1 and _table_ok("Sort", "-", v.type) and
                         len(_split_axes(v.type)) < v.type.rank))
    if x is None:
        return False
    xt = x.type
    axis = src.choice([a for a in range(xt.rank) if a not in _split_axes(xt)])
    ax = axis - xt.rank if src.boolean(0.3) else axis
    # nan="error" only where x has no NaN by construction would need value tracking: the
    # generator draws "last" / "first" (the catalog covers "error")
    op = Sort(ax, descending=src.boolean(0.5), nan=src.choice(("last", "first")))
    return g.apply(sc, op, [x]) is not None


@_builder(Transpose)
def build_transpose(g: _Gen, sc: _Scope) -> bool:
    x = g.pick(g.tensors(sc, f4=g.cfg.type_level_only))
    if x is None:
        return False
    r = x.type.rank
    perm = tuple(p - r if g.src.boolean(0.2) else p for p in g.src.permutation(r))
    return g.apply(sc, Transpose(perm), [x]) is not None


@_builder(Slice)
def build_slice(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    # rank >= 1: the evaluator's Slice of a rank-0 array returns a numpy scalar (finding, D146)
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1, f4=g.cfg.type_level_only))
    if x is None:
        return False
    shape = x.type.shape
    begin, end, steps = [], [], []
    split = _split_axes(x.type)
    for a, d in enumerate(shape):
        d = simplify(d)
        t = src.choice((1, 1, 1, 2))
        if a in split:  # a Split axis stays whole (the rule fails closed otherwise)
            begin.append(0)
            end.append(d)
            steps.append(1)
            continue
        if isinstance(d, int):
            b = src.integer(0, d - 1)
            e = src.integer(b + 1, d)
            if src.boolean(0.2):
                b -= d  # negative begin counts from the end
            if e == d and src.boolean(0.2):
                e += src.integer(1, 3)  # an end past the extent clamps
            elif src.boolean(0.15):
                e -= d  # negative end
                if e == 0:
                    e = d
        else:
            if not _resolvable(d, shape):
                return False
            b = src.integer(0, max(0, _lo(d) - 1))
            e = d
        begin.append(b)
        end.append(e)
        steps.append(t)
    strides = tuple(steps) if any(s != 1 for s in steps) or src.boolean(0.3) else None
    return g.apply(sc, Slice(tuple(begin), tuple(end), strides), [x]) is not None


@_builder(Concat)
def build_concat(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1 and len(_split_axes(v.type)) <
                         v.type.rank, f4=g.cfg.type_level_only))
    if x is None:
        return False
    xt = x.type
    axis = src.choice([a for a in range(xt.rank) if a not in _split_axes(xt)])

    def fits(v: _Val) -> bool:
        t = v.type
        return t.dtype is xt.dtype and t.rank == xt.rank and t.storage is xt.storage and \
            all(_eq(t.shape[a], xt.shape[a]) for a in range(xt.rank) if a != axis) and \
            (t.shard == xt.shard or (t.shard is None and xt.shard is None))

    parts = [x]
    for _ in range(src.integer(0, 2)):
        r = src.integer(0, 2)
        v = x if r == 0 else g.pick(g.tensors(sc, fits, f4=g.cfg.type_level_only)) \
            if r == 1 else None
        if v is None and xt.shard is None and FORMATS[xt.dtype].evaluable:
            shape = tuple(src.integer(1, 3) if a == axis else d for a, d in enumerate(xt.shape))
            v = g.leaf(sc, TensorType(shape, xt.dtype))
        if v is not None:
            parts.append(v)
    order = src.permutation(len(parts))
    ax = axis - xt.rank if src.boolean(0.3) else axis
    return g.apply(sc, Concat(ax), [parts[i] for i in order]) is not None


@_builder(Stack)
def build_stack(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    x = g.pick(g.tensors(sc, f4=g.cfg.type_level_only))
    if x is None:
        return False
    xt = x.type

    def fits(v: _Val) -> bool:
        t = v.type
        return t.dtype is xt.dtype and t.rank == xt.rank and t.storage is xt.storage and \
            all(_eq(a, b) for a, b in zip(t.shape, xt.shape, strict=True)) and \
            (t.shard == xt.shard or (t.shard is None and xt.shard is None))

    parts = [x]
    for _ in range(src.integer(0, 2)):
        r = src.integer(0, 2)
        v = x if r == 0 else g.pick(g.tensors(sc, fits, f4=g.cfg.type_level_only)) \
            if r == 1 else None
        if v is None and xt.shard is None and FORMATS[xt.dtype].evaluable:
            v = g.leaf(sc, TensorType(xt.shape, xt.dtype))
        if v is not None:
            parts.append(v)
    axis = src.integer(0, xt.rank)
    ax = axis - (xt.rank + 1) if src.boolean(0.3) else axis
    return g.apply(sc, Stack(ax), parts) is not None


@_builder(ShapeOf)
def build_shape_of(g: _Gen, sc: _Scope) -> bool:
    x = g.pick(g.tensors(sc, f4=True))
    return x is not None and g.apply(sc, ShapeOf(), [x]) is not None


@_builder(Rank)
def build_rank(g: _Gen, sc: _Scope) -> bool:
    x = g.pick(g.tensors(sc, f4=True))
    return x is not None and g.apply(sc, Rank(), [x]) is not None


def _shape_value(g: _Gen, sc: _Scope) -> _Val | None:
    shapes = [v for v in sc.pool if isinstance(v.type, ShapeType) and v.type.rank >= 1]
    if shapes and g.src.boolean(0.7):
        return g.src.choice(shapes)
    x = g.pick(g.tensors(sc, lambda v: v.type.rank >= 1, f4=True))
    if x is None:
        return None
    out = g.apply(sc, ShapeOf(), [x])
    return out[0] if out else None


@_builder(ShapeExtract)
def build_shape_extract(g: _Gen, sc: _Scope) -> bool:
    s = _shape_value(g, sc)
    if s is None:
        return False
    r = s.type.rank
    return g.apply(sc, ShapeExtract(g.src.integer(-r, r - 1)), [s]) is not None


@_builder(ShapeCompose)
def build_shape_compose(g: _Gen, sc: _Scope) -> bool:
    dims = [v for v in sc.pool if isinstance(v.type, DimType)]
    n = g.src.integer(0, 3)
    parts = []
    for _ in range(n):
        if dims and g.src.boolean(0.6):
            parts.append(g.src.choice(dims))
            continue
        s = _shape_value(g, sc)
        if s is None:
            break
        r = s.type.rank
        out = g.apply(sc, ShapeExtract(g.src.integer(-r, r - 1)), [s])
        if out:
            parts.append(out[0])
            dims.append(out[0])
    return g.apply(sc, ShapeCompose(), parts) is not None


# ---- nn ---------------------------------------------------------------------------------------
def _float_x(g: _Gen, sc: _Scope, pred=None) -> _Val | None:
    return g.pick(g.tensors(sc, lambda v: v.type.dtype.is_float and (pred is None or pred(v))))


@_builder(MatMul)
def build_matmul(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    # not f8e8m0: the type rule accepts it but semantics.matmul has no f8e8m0 output (D146)
    a = g.pick(g.tensors(sc, lambda v: v.type.rank >= 2 and v.type.dtype not in (BOOL, F8E8M0)))
    if a is None or src.boolean(0.15):
        shape = (*((src.integer(1, 2),) if src.boolean(0.3) else ()), src.integer(1, 4),
                 src.integer(1, 4))
        dt = g.leaf_dtype("fi")
        a = g.leaf(sc, TensorType(shape, dt if dt is not F8E8M0 else F32))
        if a is None:
            return False
    at = a.type
    k = at.shape[-1]
    batch = tuple(at.shape[:-2])

    def fits(v: _Val) -> bool:
        t = v.type
        return t.dtype is at.dtype and t.rank >= 2 and _eq(t.shape[-2], k) and \
            _bshape(batch, tuple(t.shape[:-2]))

    b = g.pick(g.tensors(sc, fits)) if src.boolean(0.6) else None
    if b is None:
        j = src.integer(0, len(batch))
        bb = tuple(1 if src.boolean(0.3) else d for d in batch[j:])
        b = g.leaf(sc, TensorType((*bb, k, src.integer(1, 4)), at.dtype))
        if b is None:
            return False
    return g.apply(sc, MatMul(src.boolean(0.5)), [a, b]) is not None


_MMA_INPUTS = (F32, F16, BF16, DType.FP8E4M3, DType.FP8E5M2)


@_builder(Mma)
def build_mma(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    a = g.pick(g.tensors(sc, lambda v: v.type.rank >= 2 and v.type.dtype in _MMA_INPUTS,
                         sharded=False))
    if a is None or src.boolean(0.15):
        shape = (*((src.integer(1, 2),) if src.boolean(0.3) else ()), src.integer(1, 4),
                 src.integer(1, 4))
        dt = g.leaf_dtype("f")
        a = g.leaf(sc, TensorType(shape, dt if dt in _MMA_INPUTS else F32))
        if a is None:
            return False
    at = a.type
    batch, m, k = tuple(at.shape[:-2]), at.shape[-2], at.shape[-1]

    def fits(t: TensorType, dt: DType, rows, cols=None) -> bool:
        return t.dtype is dt and t.rank == len(batch) + 2 and _eq(t.shape[-2], rows) and \
            (cols is None or _eq(t.shape[-1], cols)) and \
            all(_eq(x, y) for x, y in zip(t.shape[:-2], batch, strict=True))

    b = g.pick(g.tensors(sc, lambda v: fits(v.type, at.dtype, k), sharded=False)) \
        if src.boolean(0.5) else None
    if b is None:
        b = g.leaf(sc, TensorType((*batch, k, src.integer(1, 4)), at.dtype))
        if b is None:
            return False
    n = b.type.shape[-1]
    acc = g.pick(g.tensors(sc, lambda v: fits(v.type, F32, m, n), sharded=False)) \
        if src.boolean(0.5) else None
    if acc is None:
        acc = g.leaf(sc, TensorType((*batch, m, n), F32))
        if acc is None:
            return False
    return g.apply(sc, Mma(src.boolean(0.5)), [a, b, acc]) is not None


@_builder(Conv2D)
def build_conv2d(g: _Gen, sc: _Scope) -> bool:
    src = g.src

    def ok(v: _Val) -> bool:
        t = v.type
        return t.rank == 4 and _lo(t.shape[2]) >= 1 and _lo(t.shape[3]) >= 1

    x = _float_x(g, sc, lambda v: ok(v) and v.type.dtype is not F8E8M0)
    if x is None or src.boolean(0.3):
        shape = (src.integer(1, 2), src.choice((1, 2, 4)), src.integer(2, 5), src.integer(2, 5))
        dt = g.leaf_dtype("f")
        x = g.leaf(sc, TensorType(shape, dt if dt is not F8E8M0 else F32))
        if x is None:
            return False
    xt = x.type
    c = simplify(xt.shape[1])
    groups = 1
    if isinstance(c, int) and src.boolean(0.3):
        groups = src.choice([d for d in range(1, c + 1) if c % d == 0])
    o = groups * src.integer(1, 2)
    stride = (src.integer(1, 2), src.integer(1, 2))
    padding = (src.integer(0, 1), src.integer(0, 1))
    dil = (src.integer(1, 2), src.integer(1, 2))
    ks = []
    for ax in (0, 1):
        room = _lo(xt.shape[2 + ax]) + 2 * padding[ax]
        kmax = min(3, (room - 1) // dil[ax] + 1)
        if kmax < 1:
            return False
        ks.append(src.integer(1, kmax))
    cg = c // groups if isinstance(c, int) else xt.shape[1]
    w = g.leaf(sc, TensorType((o, cg, ks[0], ks[1]), xt.dtype))
    bias = g.leaf(sc, TensorType((o,), xt.dtype))
    if w is None or bias is None:
        return False
    return g.apply(sc, Conv2D(stride, padding, dil, groups), [x, w, bias]) is not None


def _activation(cls: type, make: Callable[[Source], Op]) -> None:
    def build(g: _Gen, sc: _Scope) -> bool:
        x = _float_x(g, sc, lambda v: _table_ok(cls.__name__, "-", v.type))
        return x is not None and g.apply(sc, make(g.src), [x]) is not None
    build.__name__ = f"build_{cls.__name__.lower()}"
    _builder(cls)(build)


_activation(ReLU, lambda s: ReLU())
_activation(Sigmoid, lambda s: Sigmoid())
_activation(Tanh, lambda s: Tanh())
_activation(Silu, lambda s: Silu())
_activation(Gelu, lambda s: Gelu(s.choice(("tanh", "none"))))


@_builder(SoftMax)
def build_softmax(g: _Gen, sc: _Scope) -> bool:
    x = _float_x(g, sc, lambda v: v.type.rank >= 1 and not _partials(v.type) and
                 len(_split_axes(v.type)) < v.type.rank)
    if x is None:
        return False
    r = x.type.rank
    axis = g.src.choice([a for a in range(r) if a not in _split_axes(x.type)])
    return g.apply(sc, SoftMax(axis - r if g.src.boolean(0.3) else axis), [x]) is not None


def _affine(g: _Gen, sc: _Scope, x: _Val) -> _Val | None:
    last = x.type.shape[-1]
    fits = [v for v in g.tensors(sc, sharded=False) if v.type.rank == 1 and
            v.type.dtype is x.type.dtype and _eq(v.type.shape[0], last)]
    if fits and g.src.boolean(0.5):
        return g.src.choice(fits)
    return g.leaf(sc, TensorType((last,), x.type.dtype))


def _norm(cls: type, n_affine: int) -> None:
    def build(g: _Gen, sc: _Scope) -> bool:
        x = _float_x(g, sc, lambda v: v.type.rank >= 1 and not _partials(v.type) and
                     v.type.rank - 1 not in _split_axes(v.type))
        if x is None:
            return False
        aff = [_affine(g, sc, x) for _ in range(n_affine)]
        if any(a is None for a in aff):
            return False
        eps = g.src.choice((1e-5, 1e-6, 1e-3, 0.5))
        return g.apply(sc, cls(eps=eps), [x, *aff]) is not None
    build.__name__ = f"build_{cls.__name__.lower()}"
    _builder(cls)(build)


_norm(LayerNorm, 2)
_norm(RMSNorm, 1)


@_builder(RoPE)
def build_rope(g: _Gen, sc: _Scope) -> bool:
    src = g.src

    def ok(v: _Val) -> bool:
        d = simplify(v.type.shape[-1]) if v.type.rank >= 2 else 0
        return isinstance(d, int) and d > 0 and d % 2 == 0 and \
            not _split_axes(v.type) & {v.type.rank - 1, v.type.rank - 2}

    q = _float_x(g, sc, ok)
    if q is None or src.boolean(0.2):
        shape = (*((src.integer(1, 2),) if src.boolean(0.5) else ()), src.integer(1, 4),
                 src.choice((2, 4)))
        q = g.leaf(sc, TensorType(shape, g.leaf_dtype("f")))
        if q is None:
            return False
    qt = q.type
    s, d = qt.shape[-2], qt.shape[-1]

    def k_ok(v: _Val) -> bool:
        t = v.type
        return t.dtype is qt.dtype and t.rank >= 2 and _eq(t.shape[-1], d) and \
            _eq(t.shape[-2], s)

    r = src.integer(0, 2)
    k = q if r == 0 else g.pick(g.tensors(sc, k_ok)) if r == 1 else None
    if k is None:
        lead = (src.integer(1, 2),) if src.boolean(0.5) else ()
        k = g.leaf(sc, TensorType((*lead, s, d), qt.dtype))
        if k is None:
            return False
    p = src.integer(1, 5)
    cos = g.leaf(sc, TensorType((p, d), qt.dtype))
    sin = cos if src.boolean(0.2) else g.leaf(sc, TensorType((p, d), qt.dtype))
    pos = g.index_leaf(sc, (s,), 0, p - 1)
    if cos is None or sin is None or pos is None:
        return False
    return g.apply(sc, RoPE(), [q, k, cos, sin, pos]) is not None


# ---- sharding ------------------------------------------------------------------------------
@_builder(Reshard)
def build_reshard(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    if g.mesh is None:  # unsharded programs: the identity Reshard (no layout / storage change)
        x = g.pick(g.tensors(sc))
        return x is not None and g.apply(sc, Reshard(), [x]) is not None
    x = g.pick(g.tensors(sc, lambda v: _static(v.type.shape)))
    if x is None:
        return False
    t = x.type
    numeric = t.dtype is not BOOL and t.dtype is not F8E8M0 and x.bound is not None
    lay = draw_shard_layout(src, tuple(simplify(d) for d in t.shape), g.mesh,
                            partials=("sum", "max", "min") if numeric else ())
    return g.apply(sc, Reshard(layout=lay), [x]) is not None


@_builder(Local)
def build_local(g: _Gen, sc: _Scope) -> bool:
    # Only a Local of an all-Broadcast value: its device view *is* the value, so the program
    # keeps an unsharded twin (erase_sharding refuses the Local of a Split / Partial value).
    x = g.pick(g.tensors(sc, lambda v: v.type.shard is not None and
                         v.type.shard.is_fully_broadcast))
    if x is None and g.mesh is not None:  # Reshard a value to Broadcast first
        y = g.pick(g.tensors(sc, lambda v: _static(v.type.shape) and (
            not _partials(v.type) or v.bound is not None)))
        if y is None:
            return False
        target = ShardLayout(g.mesh, (Broadcast(),) * len(g.mesh.axis_names),
                             Layout(tuple(simplify(d) for d in y.type.shape)))
        out = g.apply(sc, Reshard(layout=target), [y])
        x = out[0] if out else None
    if x is None:
        return False
    out = g.apply(sc, Local(), [x], local=True)
    return out is not None


# =============================================================================================
# structural steps: loops, calls, dispatch
# =============================================================================================
def build_loop(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    if g.limit is not None and I32 not in g.limit.dtypes:
        return False  # an induction variable is i32 (or i64, when declared so)
    cands = g.tensors(sc)
    if not cands:
        return False
    inits = [src.choice(cands) for _ in range(src.integer(1, 3))]
    n = g.fresh()
    it_t = TensorType((), src.choice(g.only((I32, I32, I64))))
    iv = Var(f"i{n}", it_t if src.boolean(0.3) else None)
    if iv.type is None:
        it_t = TensorType((), I32)
    phis = [Var(f"c{n}_{k}", v.type if src.boolean(0.2) else None) for k, v in enumerate(inits)]
    dvs = sc.direct_dvs()
    start = src.integer(0, 1)
    step = src.choice((1, 1, 2))
    if dvs and src.boolean(0.4):
        dv = src.choice(dvs)
        extent: Any = dv
        last = dv.hi - 1
    else:
        extent = start + src.choice((2, 1, 3, 2, 0, 3))  # one loop in six runs zero times
        last = max(extent - 1, start)
    body = _Scope("loop", sc)
    phi_vals = [_Val(p, v.type, v.bound, v.domain) for p, v in zip(phis, inits, strict=True)]
    body.pool.extend(phi_vals)
    body.pool.append(_Val(iv, it_t, float(max(start, last)), (start, max(start, last))))
    g.grow(body, src.integer(1, 3), structure=False)
    yields: list[_Val] = []
    for phi, init in zip(phi_vals, inits, strict=True):
        # the body was built assuming each phi holds its init's bound and domain; a yield that
        # keeps them makes the assumption hold for every iteration (induction)
        same = [v for v in body.created if v.type == init.type and _within(v, init)]
        y = src.choice(same) if same and src.boolean(0.9) else None
        if y is None:  # an elementwise step of the phi itself keeps its exact type
            y = _same_type_step(g, body, phi, init)
        yields.append(y or phi)
    yexprs = tuple(y.expr for y in yields)
    node = GridRegionExpr(iv, tuple(phis), tuple(v.expr for v in inits),
                          yexprs[0] if len(yexprs) == 1 else Tuple(yexprs), yexprs, extent,
                          step, start)
    for v in inits:
        sc.used.add(id(v))
    g.features.add("loop" if len(inits) == 1 else "multi_carry_loop")
    outs: list[_Val] = []
    for k, init in enumerate(inits):  # every yield is within its init's bound and domain
        e = node if len(inits) == 1 else TupleGetItem(node, k)
        outs.append(_Val(e, init.type, init.bound, init.domain))
    sc.pool.extend(outs)
    sc.created.extend(outs)
    return True


def _within(v: _Val, ref: _Val | None) -> bool:
    """``v`` keeps ``ref``'s known bound and integer domain (None: no constraint)."""
    if ref is None:
        return True
    if ref.bound is not None and (v.bound is None or v.bound > ref.bound):
        return False
    return ref.domain is None or (v.domain is not None and ref.domain[0] <= v.domain[0] and
                                  v.domain[1] <= ref.domain[1])


def _same_type_step(g: _Gen, sc: _Scope, v: _Val, keep: _Val | None) -> _Val | None:
    """An elementwise Unary / Binary step on ``v`` whose result has exactly ``v``'s type (a
    loop yield, a variant's result), or None; the result must stay ``_within(keep)``."""
    t = v.type
    if not v.evaluable:
        return None
    if t.dtype is BOOL:
        cands: list[Op] = [Unary(UnaryKind.LOGICAL_NOT), Binary(BinaryKind.XOR),
                           Binary(BinaryKind.OR)]
    else:
        kinds = [k for k in (UnaryKind.NEG, UnaryKind.ABS, UnaryKind.RELU, UnaryKind.CEIL)
                 if _table_ok("Unary", k.value, t)]
        cands = [Unary(k) for k in kinds]
        if not _partials(t):
            cands += [Binary(BinaryKind.MAX), Binary(BinaryKind.MIN)]
            if t.dtype.is_float:
                cands.append(Unary(UnaryKind.SQRT))
    if t.dtype is BOOL and _partials(t):
        return None
    if not cands:
        return None
    op = g.src.choice(cands)
    out = g.apply(sc, op, [v] if isinstance(op, Unary) else [v, v])
    if not out or out[0].type != t or not _within(out[0], keep):
        return None
    return out[0]


def _function_body(outs: list[_Val]) -> tuple[Expr, Any]:
    if len(outs) == 1:
        return outs[0].expr, outs[0].type
    return Tuple(tuple(v.expr for v in outs)), TupleType(tuple(v.type for v in outs))


def build_call(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    # reuse an existing callee when the pool holds arguments of exactly its parameter types
    if g.callees and src.boolean(0.35):
        fn, arg_bounds, outs = src.choice(g.callees)
        args = []
        for p in fn.params:
            fits = [v for v in g.tensors(sc, f4=True) if v.type == p.type]
            if not fits:
                break
            args.append(src.choice(fits))
        if len(args) == len(fn.params):
            same = all(b0 is not None and a.bound is not None and a.bound <= b0
                       for a, b0 in zip(args, arg_bounds, strict=True))
            if same or not g.cfg.sharded:  # sharded: only where the first call's bounds hold
                _emit_call(g, sc, fn, args, outs, same)
                g.features.add("shared_callee")
                return True
    cands = g.tensors(sc)
    if not cands:
        return False
    args = [src.choice(cands) for _ in range(src.integer(1, 3))]
    n = g.fresh()
    params = tuple(Var(f"a{k}", a.type) for k, a in enumerate(args))
    body = _Scope("callee", sc)
    body.pool = [_Val(p, a.type, a.bound, a.domain) for p, a in zip(params, args, strict=True)]
    body.params = list(params)
    body.depth = 1
    g.grow(body, src.integer(1, 4))  # loops inside; calls / dispatch only from the entry
    outs = g.outputs(body, cap=3)
    expr, t = _function_body(outs)
    ret = None
    if isinstance(t, TensorType) and src.boolean(0.3):
        ret = TensorType(t.shape, t.dtype)  # a layout-free declared return type
    fn = Function(f"fn{n}", params, expr, ret)
    g.functions.append(fn)
    g.callees.append((fn, [a.bound for a in args], outs))
    _emit_call(g, sc, fn, args, outs, True)
    g.features.add("call")
    return True


def _emit_call(g: _Gen, sc: _Scope, fn: Function, args: list[_Val], outs: list[_Val],
               exact: bool) -> None:
    """The Call and its results; ``outs`` are the callee's output values (types, Local flags;
    bounds only when ``exact``: the arguments' bounds are within the first call's)."""
    call = Call(fn, tuple(a.expr for a in args))
    for a in args:
        sc.used.add(id(a))
    if isinstance(fn.body, Tuple):
        vals = [_Val(TupleGetItem(call, i), o.type, o.bound if exact else None, None, o.local)
                for i, o in enumerate(outs)]
    else:
        o = outs[0]
        vals = [_Val(call, o.type, o.bound if exact else None, None, o.local)]
    sc.pool.extend(vals)
    sc.created.extend(vals)


def build_dispatch(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    cands = g.tensors(sc, lambda v: any(isinstance(d, DimVar) for d in v.type.shape),
                      sharded=False)
    if not cands:
        return False
    x = src.choice(cands)
    dv = src.choice([d for d in x.type.shape if isinstance(d, DimVar)])
    args = [x] + ([src.choice(g.tensors(sc, sharded=False))] if src.boolean(0.4) else [])
    n = g.fresh()
    name = f"disp{n}"
    params = tuple(Var(f"a{k}", a.type) for k, a in enumerate(args))
    j = src.integer(0, len(args) - 1)
    ret = TensorType(tuple(args[j].type.shape), args[j].type.dtype)
    n_var = src.integer(1, min(3, dv.hi - dv.lo))
    cuts = sorted({src.integer(dv.lo + 1, dv.hi - 1) for _ in range(n_var - 1)}) \
        if dv.hi - dv.lo > 1 else []
    bounds = [dv.lo, *cuts, dv.hi]
    variants = []
    out_bounds = []
    for lo, hi in itertools.pairwise(bounds):
        vparams = tuple(Var(p.name, p.type) for p in params)
        vs = _Scope("variant", sc)
        vs.pool = [_Val(p, a.type, a.bound, a.domain) for p, a in zip(vparams, args,
                                                                        strict=True)]
        vs.params = list(vparams)
        vs.depth = 1
        g.grow(vs, src.integer(1, 3))
        same = [v for v in vs.created if v.is_tensor and v.type.dtype is ret.dtype and
                v.type.rank == ret.rank and all(_eq(a, b) for a, b in
                                                zip(v.type.shape, ret.shape, strict=True))]
        chosen = src.choice(same) if same else \
            _same_type_step(g, vs, vs.pool[j], None) or vs.pool[j]
        out_bounds.append(chosen.bound)
        variants.append(Function(name, vparams, chosen.expr, ret,
                                 (DimVarRangePat(dv.name, lo, hi),), label=f"r{lo}_{hi}"))
    proto = Function(name, params, None, ret, (), tuple(variants))
    g.functions.append(proto)
    call = Call(proto, tuple(a.expr for a in args))
    for a in args:
        sc.used.add(id(a))
    v = _Val(call, ret, _clip(_mx(*out_bounds), ret))
    sc.pool.append(v)
    sc.created.append(v)
    g.features.add("dispatch")
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


# =============================================================================================
# public API
# =============================================================================================
def _config(ops, max_ops, allow_loops, allow_calls, allow_dispatch, sharded,
            avoid_unspecified, symbolic, type_level_only, limit=None,
            motifs: float = 0.0) -> GenConfig:
    ops_t = tuple(ALL_OPS) if ops is None else tuple(ops)
    unknown = [o for o in ops_t if o not in BUILDERS]
    if unknown:
        raise TilefoundryError(f"programs(): no builder for {unknown}; ops must be classes of "
                               f"ALL_OPS")
    if not ops_t:
        raise TilefoundryError("programs(): ops is empty")
    if limit is not None:
        if not set(ops_t) & (limit.classes - {Reshard, Local}):
            raise TilefoundryError(f"programs(): none of the ops "
                                   f"{sorted(o.__name__ for o in ops_t)} is inside the "
                                   f"capabilities")
        if sharded and not limit.sharded:
            raise TilefoundryError("programs(): sharded=True, but the capabilities declare no "
                                   "mesh (or admit no Reshard, or no dtype a sharded "
                                   "parameter can have)")
    if not 0.0 <= motifs <= 1.0:
        raise TilefoundryError(f"programs(): motifs must be a share in [0, 1], got {motifs!r}")
    return GenConfig(ops_t, max_ops, allow_loops, allow_calls, allow_dispatch, bool(sharded),
                     avoid_unspecified, symbolic, type_level_only, limit, float(motifs))


#: the fraction of capability-directed programs that are sharded (when a mesh is declared)
SHARDED_FRACTION = 0.3
#: draws of a capability-directed program before one that holds an op is accepted
CAPS_ATTEMPTS = 8


def _attempt_seed(seed: int, k: int) -> int:
    return seed if k == 0 else zlib.crc32(f"tilefoundry-caps:{seed}:{k}".encode())


def generate_program(seed: int, *, ops: Sequence[type] | None = None, max_ops: int = 8,
                     allow_loops: bool = True, allow_calls: bool = True,
                     allow_dispatch: bool = True, sharded: bool | None = None,
                     avoid_unspecified: bool = True, symbolic: bool | None = None,
                     type_level_only: bool = False, caps: Any = None,
                     motifs: float | None = None) -> GeneratedProgram:
    """One program from ``seed`` (deterministic; no hypothesis). Options as in ``programs``.

    ``motifs``: the share of steps that draw one of the shapes random steps rarely make
    (``oracle/program_motifs.py``: a narrow-float elementwise chain, a float comparison in a
    Select's condition, a nonlinear consumer of a completed mixed-sign Partial(sum), a sharded
    Reshape merging a split inner position); None means ``MOTIF_RATE`` with ``caps`` (what
    ``conformance fuzz`` draws) and 0 without them.

    ``caps`` (a backend's ``Capabilities``, see ``capability_limit``) draws only inside them:
    op classes and kinds, dtypes (of every leaf, literal, result and op attribute), reduction
    policies, overflow modes; with ``sharded=None`` (the default) a program is sharded with
    probability ``SHARDED_FRACTION`` (a coin of its own per seed) when and only when the
    capabilities declare a mesh. A draw that ends without any op is redrawn from derived seeds
    (up to ``CAPS_ATTEMPTS`` times; ``stats['caps_attempts']``), so the same seed and
    capabilities always give the same program. Without ``caps``, ``sharded=None`` is False and
    every program is what it always was for its seed."""
    from tilefoundry.oracle.program_motifs import MOTIF_RATE

    if caps is None:
        cfg = _config(ops, max_ops, allow_loops, allow_calls, allow_dispatch, bool(sharded),
                      avoid_unspecified, symbolic, type_level_only, None, motifs or 0.0)
        return _Gen(RandomSource(seed), cfg, seed).run(seed)
    limit = caps if isinstance(caps, _Limit) else capability_limit(caps)
    if sharded is None:
        import random

        sharded = limit.sharded and \
            random.Random(f"tilefoundry-sharded:{seed}").random() < SHARDED_FRACTION
    cfg = _config(ops, max_ops, allow_loops, allow_calls, allow_dispatch, sharded,
                  avoid_unspecified, symbolic, type_level_only, limit,
                  MOTIF_RATE if motifs is None else motifs)
    for k in range(CAPS_ATTEMPTS):
        s = _attempt_seed(seed, k)
        p = _Gen(RandomSource(s), cfg, s).run(seed)
        if p.op_counts:
            break
    return dataclasses.replace(p, stats=MappingProxyType({**p.stats, "caps_attempts": k + 1}))


def iter_programs(seed: int, n: int, **options: Any) -> Iterator[GeneratedProgram]:
    """``n`` programs from consecutive seeds ``seed, seed + 1, ...`` (``generate_program``)."""
    for i in range(n):
        yield generate_program(seed + i, **options)


def programs(*, ops: Sequence[type] | None = None, max_ops: int = 8, allow_loops: bool = True,
             allow_calls: bool = True, allow_dispatch: bool = True, sharded: bool = False,
             avoid_unspecified: bool = True, symbolic: bool | None = None,
             type_level_only: bool = False, caps: Any = None,
             motifs: float = 0.0) -> st.SearchStrategy:
    """A strategy of ``GeneratedProgram``s: well-typed DAGs of at most ``max_ops`` builder
    steps per function body over ``ops`` (default: every class of ``ALL_OPS``), with
    GridRegionExpr loops, calls and dispatch prototypes when allowed, and ShardLayout parameters
    on a 1-D / 2-D mesh when ``sharded``. ``symbolic`` forces (True) or forbids (False) DimVar
    parameter shapes (default: drawn). ``caps`` draws only inside a backend's capabilities
    (as in ``generate_program``; ``sharded`` stays as given); ``motifs`` the share of steps
    drawing an under-drawn shape (``program_motifs``; default none). See the module docstring
    for what is avoided."""
    limit = None if caps is None else caps if isinstance(caps, _Limit) else \
        capability_limit(caps)
    cfg = _config(ops, max_ops, allow_loops, allow_calls, allow_dispatch, sharded,
                  avoid_unspecified, symbolic, type_level_only, limit, motifs)

    @st.composite
    def _programs(draw):
        return _Gen(DrawSource(draw), cfg).run(None)

    return _programs()


# ---- the tile family's reductions (semantics/ops/tile_reduce.py) ------------------------------
def _tile_reduce_axes(g: _Gen, xt: TensorType) -> tuple[int, ...]:
    src = g.src
    axes = [a for a in range(xt.rank) if src.boolean(0.5)]
    if xt.rank and not axes and src.boolean(0.7):
        axes = [src.integer(0, xt.rank - 1)]
    return tuple(a - xt.rank if src.boolean(0.3) else a for a in axes)


def _tile_reduced_shape(xt: TensorType, axes: tuple, keepdim: bool) -> tuple:
    red = {a % max(xt.rank, 1) for a in axes}
    if keepdim:
        return tuple(1 if a in red else d for a, d in enumerate(xt.shape))
    return tuple(d for a, d in enumerate(xt.shape) if a not in red)


def _build_seeded(g: _Gen, sc: _Scope, masked: bool) -> bool:
    x = g.pick(g.tensors(sc, lambda v: v.type.shard is None, sharded=False))
    if x is None:
        return False
    xt = x.type
    src = g.src
    kinds = [k for k in ("sum", "max", "min")
             if not (k == "sum" and xt.dtype in (BOOL, F8E8M0))]
    kind = src.choice(kinds)
    axes = _tile_reduce_axes(g, xt)
    keepdim = src.boolean(0.5)
    seed = g.leaf(sc, TensorType(_tile_reduced_shape(xt, axes, keepdim), xt.dtype), name="z")
    if seed is None:
        return False
    args = [x, seed]
    if masked:
        m = g.leaf(sc, TensorType(tuple(xt.shape), BOOL), name="m")
        if m is None:
            return False
        args.append(m)
    cls = MaskedReduce if masked else SeededReduce
    op = cls(axes, kind, src.choice(POLICIES if g.limit is None else g.limit.policies), keepdim)
    return g.apply(sc, op, args) is not None


@_builder(SeededReduce)
def build_seeded_reduce(g: _Gen, sc: _Scope) -> bool:
    return _build_seeded(g, sc, False)


@_builder(MaskedReduce)
def build_masked_reduce(g: _Gen, sc: _Scope) -> bool:
    return _build_seeded(g, sc, True)


@_builder(CustomReduce)
def build_custom_reduce(g: _Gen, sc: _Scope) -> bool:

    def ok(v: _Val) -> bool:
        return v.type.shard is None and v.type.dtype.is_float and v.type.dtype is not F8E8M0

    x = g.pick(g.tensors(sc, ok, sharded=False))
    if x is None:
        return False
    xt = x.type
    src = g.src
    name = src.choice(tuple(REDUCERS))
    r = REDUCERS[name]
    axes = _tile_reduce_axes(g, xt)
    red = {a % max(xt.rank, 1) for a in axes}
    ext = [simplify(xt.shape[a]) for a in red]
    n = math.prod(ext) if all(isinstance(e, int) for e in ext) else None
    pols = [p for p in (POLICIES if g.limit is None else g.limit.policies)
            if p.startswith("fold") or (r.merge_contract and n is not None and
                                        n + 1 <= (6 if p == "ordered_tree" else 5))]
    if not pols:
        return False
    keepdim = src.boolean(0.5)
    shape = (*_tile_reduced_shape(xt, axes, keepdim), len(r.state))
    seed = g.leaf(sc, TensorType(shape, F32), name="s")
    if seed is None:
        return False
    op = CustomReduce(axes, name, src.choice(pols), keepdim)
    return g.apply(sc, op, [x, seed]) is not None




from tilefoundry.oracle import programs_tile_scan as _programs_tile_scan  # noqa: E402, F401
