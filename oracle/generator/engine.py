"""The generator's engine (split from ``oracle/programs.py``, D384; the package mirrors
``semantics/ops``).

The pool of typed values (``_Val``, ``_Scope``), the generator state ``_Gen`` (draw source, leaves
and literals, applying an op through its type rule, growing a function body step by step), the
value-range helpers and the operand helpers builders of several families share.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np

from tilefoundry.errors import TilefoundryError
from tilefoundry.oracle.generator.base import BUILDERS
from tilefoundry.oracle.generator.bounds import bounds as _bounds
from tilefoundry.oracle.generator.bounds import domain as _domain
from tilefoundry.oracle.generator.bounds import exact_limit as _exact_limit
from tilefoundry.oracle.generator.config import (
    _LEAF_DTYPES,
    _SHARDED_DTYPES,
    _TAME,
    BOOL,
    F32,
    I32,
    I64,
    GenConfig,
    GeneratedProgram,
    _Limit,
    count_ops,
)
from tilefoundry.oracle.strategies import (
    GENERAL,
    ORDINARY,
    RandomSource,
    Source,
    ValueSpec,
    bind,
    draw_array,
    draw_mesh,
    draw_shard_layout,
    topology_of,
)
from tilefoundry.semantics.evaluator.mesh import Sharded, shard
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Expr,
    Function,
    Module,
    Op,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.ops import (
    BinaryKind,
    Local,
    Rank,
    Reshard,
    ShapeOf,
)
from tilefoundry.semantics.typeinfer import RULES, Ctx, Session, TypeInferError
from tilefoundry.semantics.typeinfer.commutation import lookup
from tilefoundry.semantics.types import (
    Broadcast,
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
        # the values an op consumed, by id; the dict holds each value, so an id stays its
        # value's for the whole draw (a set of ids let a freed operand's id be reused by a later
        # value, marking it used: the program then depended on memory layout)
        self.used: dict[int, _Val] = {}
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
            sc.used[id(a)] = a
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
                # the structural steps grow bodies through this generator (a cycle at import)
                from tilefoundry.oracle.generator.structure import (
                    build_call,
                    build_dispatch,
                    build_loop,
                )

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
