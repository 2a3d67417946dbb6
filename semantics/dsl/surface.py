"""The DSL's vocabulary: one table of op call spellings, read by both the parser and the source
printer, plus the names the parser knows without an import (dtypes, storage kinds, loop forms,
annotation markers, the static constructors).

Every op class of the catalog (``ops.ALL_OPS``) has at least one spelling; a spelling names the
op, the attributes its name fixes (a Binary / Unary kind, a Reduce kind), how many leading
positional arguments are tensor inputs, and the order in which the remaining attributes may be
given positionally. Operators and subscripts (``a + b``, ``a @ b``, ``x[1:3, :]``) are the
preferred spelling where one exists; the printer chooses them, the call spellings stay available.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tilefoundry.semantics.declared_reducers import declare_reducer
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import DimVarRangePat, Op, Target
from tilefoundry.semantics.ops import ALIASES
from tilefoundry.semantics.ops.math import Binary, BinaryKind, UnaryKind
from tilefoundry.semantics.ops.nn import (
    Conv2D,
    Gelu,
    LayerNorm,
    MatMul,
    ReLU,
    RMSNorm,
    RoPE,
    Sigmoid,
    Silu,
    SoftMax,
    Tanh,
)
from tilefoundry.semantics.ops.shape import ShapeCompose, ShapeExtract
from tilefoundry.semantics.ops.sharding import Local, Reshard
from tilefoundry.semantics.ops.tensor import (
    CacheUpdate,
    Cast,
    Concat,
    Gather,
    InsertSlice,
    Rank,
    Reduce,
    ReduceKind,
    Reshape,
    ShapeOf,
    Slice,
    Stack,
    TopK,
    Transpose,
    Zeros,
)
from tilefoundry.semantics.ops.tile_mma import Mma
from tilefoundry.semantics.ops.tile_reduce import (
    SEEDED_KINDS,
    CustomReduce,
    MaskedReduce,
    SeededReduce,
)
from tilefoundry.semantics.ops.tile_scan import Scan
from tilefoundry.semantics.ops.tile_scan_flags import MaskedScan, SegmentedScan
from tilefoundry.semantics.ops.tile_select import Bitcast, Select
from tilefoundry.semantics.ops.tile_sort import Sort
from tilefoundry.semantics.topk_reducer import TopKMerge
from tilefoundry.semantics.types import (
    Broadcast,
    DimAdd,
    DimFloorDiv,
    DimMax,
    DimMin,
    DimMod,
    DimMul,
    DimSub,
    DimVar,
    IRError,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    StorageKind,
    TensorType,
    Topology,
    TopologyLevel,
    TupleType,
    dim_max,
    dim_min,
)


# =============================================================================================
# op spellings
# =============================================================================================
def _storage(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return StorageKind(v)
        except ValueError:
            raise IRError(f"storage must be one of {[s.value for s in StorageKind]}, got "
                          f"{v!r}") from None
    return v


def _dtype(v: Any) -> Any:
    if v is bool:
        return DType.BOOL
    if isinstance(v, str):
        return DType.parse(v)
    return v


def _axes(v: Any) -> Any:
    return (v,) if isinstance(v, int) and not isinstance(v, bool) else v


_CONVERT: dict[str, Callable[[Any], Any]] = {"storage": _storage, "dtype": _dtype,
                                             "axes": _axes}


@dataclass(frozen=True)
class Spelling:
    """One call spelling of an op.

    ``inputs``: the number of leading positional tensor inputs. ``variadic``: ``None``, or
    ``"positional"`` (every positional argument is an input, e.g. ``insert_slice(d, u, 0, 2)``)
    or ``"sequence"`` (the first argument is a tuple of inputs, e.g. ``concat((a, b), axis=1)``).
    ``attrs``: the attributes, in the order they may be given positionally after the inputs.
    ``fixed``: attributes the name itself fixes."""

    name: str
    op: type[Op]
    inputs: int = 1
    attrs: tuple[str, ...] = ()
    fixed: dict[str, Any] = field(default_factory=dict)
    variadic: str | None = None
    family: str = ""

    @property
    def defaults(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self.op):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
        return out

    @property
    def required(self) -> tuple[str, ...]:
        d = self.defaults
        return tuple(a for a in self.attrs if a not in d)

    def build(self, attrs: dict[str, Any]) -> Op:
        """The op for the given attribute values (converted; fixed ones added). Raises
        ``TypeError`` for a missing / unknown attribute, ``IRError`` for a bad value."""
        vals = {k: _CONVERT[k](v) if k in _CONVERT else v for k, v in attrs.items()}
        return self.op(**vals, **self.fixed)


def _math_spellings() -> list[Spelling]:
    out = []
    for name, (cls, kind) in ALIASES.items():
        n = 2 if cls is Binary else 1
        out.append(Spelling(name, cls, n, (), {"kind": kind}, family="math"))
    return out


SPELLINGS: tuple[Spelling, ...] = (
    *_math_spellings(),
    # tensor
    Spelling("reshape", Reshape, 1, ("new_shape",), family="tensor"),
    Spelling("cast", Cast, 1, ("dtype", "overflow", "rounding"), family="tensor"),
    Spelling("gather", Gather, 2, ("axis", "batch_dims", "fill"), family="tensor"),
    Spelling("zeros", Zeros, 0, ("shape", "dtype", "storage"), family="tensor"),
    *(Spelling(f"reduce_{k.value}", Reduce, 1, ("axes", "keepdim", "policy"), {"kind": k},
               family="tensor") for k in ReduceKind),
    Spelling("insert_slice", InsertSlice, 2, (), variadic="positional", family="tensor"),
    Spelling("cache_update", CacheUpdate, 4, (), family="tensor"),
    Spelling("topk", TopK, 1, ("k", "axis", "largest", "sorted"), family="tensor"),
    Spelling("transpose", Transpose, 1, ("perm",), family="tensor"),
    Spelling("slice", Slice, 1, ("begin", "end", "strides"), family="tensor"),
    Spelling("concat", Concat, 1, ("axis",), variadic="sequence", family="tensor"),
    Spelling("stack", Stack, 1, ("axis",), variadic="sequence", family="tensor"),
    Spelling("shape_of", ShapeOf, 1, family="tensor"),
    Spelling("rank", Rank, 1, family="tensor"),
    # nn
    Spelling("matmul", MatMul, 2, ("allow_reassociation",), family="nn"),
    Spelling("conv2d", Conv2D, 3, ("stride", "padding", "dilation", "groups"), family="nn"),
    Spelling("nn.relu", ReLU, 1, family="nn"),
    Spelling("sigmoid", Sigmoid, 1, family="nn"),
    Spelling("tanh", Tanh, 1, family="nn"),
    Spelling("softmax", SoftMax, 1, ("axis",), family="nn"),
    Spelling("layer_norm", LayerNorm, 3, ("eps",), family="nn"),
    Spelling("gelu", Gelu, 1, ("approximate",), family="nn"),
    Spelling("silu", Silu, 1, family="nn"),
    Spelling("rms_norm", RMSNorm, 2, ("eps",), family="nn"),
    Spelling("rope", RoPE, 5, family="nn"),
    # shape
    Spelling("shape_extract", ShapeExtract, 1, ("index",), family="shape"),
    Spelling("shape_compose", ShapeCompose, 0, (), variadic="positional", family="shape"),
    # sharding
    Spelling("reshard", Reshard, 1, ("layout", "storage"), family="sharding"),
    Spelling("local", Local, 1, family="sharding"),
    # tile (extensions of the HIR catalog)
    Spelling("sort", Sort, 1, ("axis", "descending", "nan"), family="tile"),
    Spelling("mma", Mma, 3, ("allow_reassociation",), family="tile"),
    # tile (extensions of the HIR catalog, from the Tile design)
    Spelling("ite", Select, 3, family="tile"),
    Spelling("bitcast", Bitcast, 1, ("dtype",), family="tile"),
    Spelling("scan", Scan, 1, ("axis", "combine", "inclusive", "seed", "policy"), family="tile"),
    Spelling("scan_masked", MaskedScan, 2, ("axis", "combine", "inclusive", "seed", "policy"),
             family="tile"),
    Spelling("scan_segmented", SegmentedScan, 2,
             ("axis", "combine", "inclusive", "seed", "policy"), family="tile"),
    *(Spelling(f"reduce_{k}_seeded", SeededReduce, 2, ("axes", "policy", "keepdim"),
               {"kind": k}, family="tile") for k in SEEDED_KINDS),
    *(Spelling(f"reduce_{k}_masked", MaskedReduce, 3, ("axes", "policy", "keepdim"),
               {"kind": k}, family="tile") for k in SEEDED_KINDS),
    Spelling("reduce_custom", CustomReduce, 2, ("axes", "reducer", "policy", "keepdim"),
             family="tile"),
)

BY_NAME: dict[str, Spelling] = {s.name: s for s in SPELLINGS}


def spelling_of(op: Op) -> Spelling:
    """The spelling the printer uses for ``op`` (the one whose fixed attributes match)."""
    for s in SPELLINGS:
        if s.op is type(op) and all(getattr(op, k) == v for k, v in s.fixed.items()):
            return s
    raise KeyError(type(op).__name__)  # pragma: no cover - the completeness test guards this


#: Binary kinds with a Python operator, and the operator.
BINARY_OPERATORS: dict[BinaryKind, str] = {
    BinaryKind.ADD: "+", BinaryKind.SUB: "-", BinaryKind.MUL: "*", BinaryKind.DIV: "/",
    BinaryKind.EQ: "==", BinaryKind.NE: "!=", BinaryKind.LT: "<", BinaryKind.LE: "<=",
    BinaryKind.GT: ">", BinaryKind.GE: ">=", BinaryKind.AND: "&", BinaryKind.OR: "|",
    BinaryKind.XOR: "^",
}
UNARY_OPERATORS: dict[UnaryKind, str] = {UnaryKind.NEG: "-", UnaryKind.LOGICAL_NOT: "~"}


# =============================================================================================
# intrinsics: Python objects standing for DSL names (usable only inside @func bodies)
# =============================================================================================
class Intrinsic:
    """A DSL name (an op spelling, ``tile``, ``const``, ...). It exists so that
    ``from tilefoundry.semantics.dsl import exp`` names something; the parser reads it, and
    calling it as Python raises."""

    def __init__(self, name: str) -> None:
        self.dsl_name = name

    def __repr__(self) -> str:
        return f"<dsl {self.dsl_name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from tilefoundry.semantics.dsl.errors import DSLError

        raise DSLError(f"{self.dsl_name}(...) is DSL syntax: it is read by the @func parser and "
                       f"is not run as Python; use it inside a @func body",
                       construct=f"call of {self.dsl_name}")


class Namespace:
    """An op family as a namespace (``nn.relu``): attribute access yields its intrinsics."""

    def __init__(self, family: str, members: dict[str, Intrinsic]) -> None:
        self.dsl_family = family
        self._members = members

    def __getattr__(self, name: str) -> Intrinsic:
        members = self.__dict__.get("_members", {})
        if name in members:
            return members[name]
        raise AttributeError(f"the DSL family {self.__dict__.get('dsl_family')} has no op "
                             f"{name!r}")

    def __repr__(self) -> str:
        return f"<dsl family {self.dsl_family}>"


class _TensorMarker:
    """``Tensor[shape, dtype, (layout), (storage)]``: the tensor annotation. Read by the parser
    from the source; subscripting it at run time (Python evaluates annotations) returns the
    TensorType when the items form one."""

    def __repr__(self) -> str:
        return "Tensor"

    def __getitem__(self, items: Any) -> Any:
        try:
            return tensor_type_from_items(items if isinstance(items, tuple) else (items,))
        except Exception:  # run-time annotation values are never read by the parser
            return ("Tensor", items)


class _TupleMarker:
    """``Tuple[T1, T2, ...]``: the tuple annotation."""

    def __repr__(self) -> str:
        return "Tuple"

    def __getitem__(self, items: Any) -> Any:
        items = items if isinstance(items, tuple) else (items,)
        try:
            return TupleType(tuple(items))
        except Exception:
            return ("Tuple", items)


Tensor = _TensorMarker()
Tuple = _TupleMarker()


def tensor_type_from_items(items: tuple) -> TensorType:
    """The TensorType of ``Tensor[shape, dtype, extras...]`` (extras: a storage name or
    StorageKind, a Layout or ShardLayout, in any order)."""
    if len(items) < 2:
        raise IRError("Tensor[...] takes a shape and a dtype: Tensor[(M, N), f32]")
    shape, dt = items[0], _dtype(items[1])
    if isinstance(shape, list):
        shape = tuple(shape)
    if not isinstance(shape, tuple):
        raise IRError(f"the shape of Tensor[...] must be a tuple such as (M, N) or (), got "
                      f"{shape!r}")
    if not isinstance(dt, DType):
        raise IRError(f"the dtype of Tensor[...] must be a dtype name such as f32, got {dt!r}")
    layout, storage = None, StorageKind.GMEM
    seen_layout = seen_storage = False
    for extra in items[2:]:
        if isinstance(extra, Layout | ShardLayout) and not seen_layout:
            layout, seen_layout = extra, True
        elif isinstance(extra, str | StorageKind) and not seen_storage:
            storage, seen_storage = _storage(extra), True
        else:
            raise IRError(f"Tensor[...] takes at most one layout (Layout / ShardLayout) and one "
                          f"storage ('rmem', 'smem', 'gmem') after the shape and dtype, got "
                          f"{extra!r}")
    return TensorType(shape, dt, layout, storage)


# =============================================================================================
# the names the parser knows without an import
# =============================================================================================
class Builtin(enum.Enum):
    """Parser-level forms that are not op spellings."""

    TILE = "tile"
    RANGE = "range"
    CONST = "const"
    CONST_BITS = "const_bits"
    TUPLE_GET_ITEM = "tuple_get_item"
    FLOAT = "float"
    MAP = "map"  # map(values..., lambda): parse-time sugar (dsl/map_sugar.py)
    TOPK_MERGE = "topk_merge"  # topk<K>(x, axis, order): parse-time sugar (dsl/topk_sugar.py)


#: Static constructors: called at parse time with static arguments.
STATIC_CALLABLES: dict[str, Any] = {
    "DimVar": DimVar, "dim_min": dim_min, "dim_max": dim_max,
    "DimAdd": DimAdd, "DimSub": DimSub, "DimMul": DimMul, "DimFloorDiv": DimFloorDiv,
    "DimMod": DimMod, "DimMin": DimMin, "DimMax": DimMax,
    "Layout": Layout, "ShardLayout": ShardLayout, "Mesh": Mesh, "Split": Split,
    "Broadcast": Broadcast, "Partial": Partial, "DimVarRangePat": DimVarRangePat,
    "Topology": Topology, "TopologyLevel": TopologyLevel, "Target": Target,
    "Reducer": declare_reducer,  # a program's own reducer (declared_reducers, D448)
    "TopKMerge": TopKMerge,  # the Top-K merge reducer over (value, index) states (D486)
}
STATIC_CALLABLE_IDS = {id(v) for v in STATIC_CALLABLES.values()}

DTYPE_NAMES: dict[str, DType] = {d.value: d for d in DType}
STORAGE_NAMES: dict[str, StorageKind] = {k.value: k for k in (StorageKind.RMEM, StorageKind.SMEM,
                                                               StorageKind.GMEM)}

INTRINSICS: dict[str, Intrinsic] = {s.name: Intrinsic(s.name) for s in SPELLINGS
                                    if "." not in s.name}
INTRINSICS.update({b.value: Intrinsic(b.value) for b in Builtin})

FAMILIES: dict[str, Namespace] = {}
# (no "tile" namespace: `tile` is the loop form `for i in tile(n)`; the tile family's ops are
# spelled bare: ite, bitcast, scan)
for _fam in ("math", "tensor", "nn", "shape", "sharding"):
    _members = {}
    for _s in SPELLINGS:
        if _s.family == _fam:
            short = _s.name.split(".")[-1]
            _members[short] = INTRINSICS.get(_s.name) or Intrinsic(_s.name)
    FAMILIES[_fam] = Namespace(_fam, _members)


def builtin_names() -> dict[str, Any]:
    """Every name the parser resolves when neither the function's scope nor its module binds
    it: op spellings, families, dtypes, the loop forms, markers and static constructors."""
    out: dict[str, Any] = {}
    out.update(STATIC_CALLABLES)
    out.update(DTYPE_NAMES)
    out.update(INTRINSICS)
    out.update(FAMILIES)
    out.update(STORAGE_NAMES)
    out["Tensor"] = Tensor
    out["Tuple"] = Tuple
    out["tuple"] = Tuple
    return out


BUILTINS: dict[str, Any] = builtin_names()
