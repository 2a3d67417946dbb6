"""HIR types: ShapeDim arithmetic, TensorType and friends, Layout, Mesh / Topology, ShardLayout.

What the spec's missing companion documents (types, shard) would have said is decided in
ARCHITECTURE.md, "Types"; this module implements that. Every type is a frozen dataclass with
structural equality and hashing. Constructors validate their fields and raise ``IRError`` (a
``TilefoundryError``) naming the field and the rule.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Union

from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.combine_laws import REDUCE_COMBINES as _REDUCE_COMBINES
from tilefoundry.semantics.formats import DType


class IRError(TilefoundryError, ValueError):
    """Malformed IR or types: a field of the wrong kind, an out-of-range value, a broken rule."""


# =============================================================================================
# ShapeDim: int | DimVar | dim expression
# =============================================================================================
class _DimArith:
    """Operator sugar shared by DimVar and DimExpr: ``N // 4``, ``dim_min(512, CTX // 4)``."""

    def __add__(self, o):
        return DimAdd(self, _dim(o, "+"))

    def __radd__(self, o):
        return DimAdd(_dim(o, "+"), self)

    def __sub__(self, o):
        return DimSub(self, _dim(o, "-"))

    def __rsub__(self, o):
        return DimSub(_dim(o, "-"), self)

    def __mul__(self, o):
        return DimMul(self, _dim(o, "*"))

    def __rmul__(self, o):
        return DimMul(_dim(o, "*"), self)

    def __floordiv__(self, o):
        return DimFloorDiv(self, _dim(o, "//"))

    def __rfloordiv__(self, o):
        return DimFloorDiv(_dim(o, "//"), self)

    def __mod__(self, o):
        return DimMod(self, _dim(o, "%"))

    def __rmod__(self, o):
        return DimMod(_dim(o, "%"), self)


@dataclass(frozen=True, eq=True)
class DimVar(_DimArith):
    """A symbolic extent ranging over the half-open envelope ``[lo, hi)``."""

    name: str
    lo: int
    hi: int

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise IRError(f"DimVar.name must be an identifier, got {self.name!r}")
        for f in ("lo", "hi"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool):
                raise IRError(f"DimVar {self.name}: {f} must be an int, got {v!r}")
        if not 0 <= self.lo < self.hi:
            raise IRError(f"DimVar {self.name}: the envelope [lo, hi) = [{self.lo}, {self.hi}) "
                          f"must satisfy 0 <= lo < hi")

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False)  # ==, hash: below, without recursion
class DimExpr(_DimArith):
    lhs: ShapeDim
    rhs: ShapeDim
    SYMBOL: ClassVar[str] = "?"
    FN: ClassVar[Callable[[int, int], int]]

    def __post_init__(self):
        for f in ("lhs", "rhs"):
            if not is_shape_dim(getattr(self, f)):
                raise IRError(f"{type(self).__name__}.{f} must be a ShapeDim (int, DimVar or "
                              f"dim expression), got {getattr(self, f)!r}")

    # str, == and hash walk the left operands in a loop, not by recursion: Concat of K
    # operands sums K extents into a left-deep chain K levels deep (issue 34)
    def __str__(self) -> str:
        spine, leaf = _left_spine(self)
        text = dim_str(leaf)
        for d in reversed(spine):
            rhs = dim_str(d.rhs)
            text = f"{d.SYMBOL}({text}, {rhs})" if d.SYMBOL.isidentifier() else \
                f"({text} {d.SYMBOL} {rhs})"
        return text

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        a, b = self, other
        while isinstance(a, DimExpr):
            if a is b:
                return True
            if type(a) is not type(b) or a.rhs != b.rhs:
                return False
            a, b = a.lhs, b.lhs
        return type(a) is type(b) and a == b

    def __hash__(self) -> int:
        spine, leaf = _left_spine(self)
        h = hash(leaf)
        for d in reversed(spine):
            h = hash((d.SYMBOL, h, d.rhs))
        return h


def _left_spine(d: DimExpr) -> tuple[list[DimExpr], ShapeDim]:
    """The chain ``d, d.lhs, d.lhs.lhs, ...`` of dim expressions, and the operand below it."""
    spine = []
    x: ShapeDim = d
    while isinstance(x, DimExpr):
        spine.append(x)
        x = x.lhs
    return spine, x


def _floordiv(a: int, b: int) -> int:
    if b == 0:
        raise IRError("dim expression divides by zero")
    return a // b


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise IRError("dim expression takes a remainder modulo zero")
    return a % b


@dataclass(frozen=True, eq=False)  # DimExpr's ==, hash
class DimAdd(DimExpr):
    SYMBOL = "+"
    FN = staticmethod(lambda a, b: a + b)


@dataclass(frozen=True, eq=False)  # DimExpr's ==, hash
class DimSub(DimExpr):
    SYMBOL = "-"
    FN = staticmethod(lambda a, b: a - b)


@dataclass(frozen=True, eq=False)  # DimExpr's ==, hash
class DimMul(DimExpr):
    SYMBOL = "*"
    FN = staticmethod(lambda a, b: a * b)


@dataclass(frozen=True, eq=False)  # DimExpr's ==, hash
class DimFloorDiv(DimExpr):
    SYMBOL = "//"
    FN = staticmethod(_floordiv)


@dataclass(frozen=True, eq=False)  # DimExpr's ==, hash
class DimMod(DimExpr):
    SYMBOL = "%"
    FN = staticmethod(_mod)


@dataclass(frozen=True, eq=False)  # DimExpr's ==, hash
class DimMin(DimExpr):
    SYMBOL = "dim_min"
    FN = staticmethod(min)


@dataclass(frozen=True, eq=False)  # DimExpr's ==, hash
class DimMax(DimExpr):
    SYMBOL = "dim_max"
    FN = staticmethod(max)


ShapeDim = Union[int, DimVar, DimExpr]  # noqa: UP007 - a runtime alias used in isinstance docs


def dim_min(a: ShapeDim, b: ShapeDim) -> DimMin:
    return DimMin(_dim(a, "dim_min"), _dim(b, "dim_min"))


def dim_max(a: ShapeDim, b: ShapeDim) -> DimMax:
    return DimMax(_dim(a, "dim_max"), _dim(b, "dim_max"))


def is_shape_dim(d: object) -> bool:
    return (isinstance(d, int) and not isinstance(d, bool)) or isinstance(d, DimVar | DimExpr)


def _dim(d: object, what: str) -> ShapeDim:
    if not is_shape_dim(d):
        raise IRError(f"{what}: expected a ShapeDim (int, DimVar or dim expression), got {d!r}")
    return d  # type: ignore[return-value]


def dim_str(d: ShapeDim) -> str:
    return str(d)


def free_dimvars(d: ShapeDim) -> frozenset[DimVar]:
    if isinstance(d, DimVar):
        return frozenset([d])
    if isinstance(d, DimExpr):
        return free_dimvars(d.lhs) | free_dimvars(d.rhs)
    return frozenset()


def simplify(d: ShapeDim) -> ShapeDim:
    """Constant-fold with Python floor semantics and drop identities (x+0, x*1, x//1, x*0)."""
    if not isinstance(d, DimExpr):
        return d
    return _simplified(type(d), simplify(d.lhs), simplify(d.rhs))


def _simplified(t: type[DimExpr], a: ShapeDim, b: ShapeDim) -> ShapeDim:
    """``simplify(t(a, b))`` for operands ``a``, ``b`` that are simplified already: one step,
    no walk of the operands."""
    if isinstance(a, int) and isinstance(b, int):
        return t.FN(a, b)
    if (t is DimAdd and b == 0) or (t is DimSub and b == 0) or (t is DimMul and b == 1) \
            or (t is DimFloorDiv and b == 1):
        return a
    if (t is DimAdd and a == 0) or (t is DimMul and a == 1):
        return b
    if t is DimMul and (a == 0 or b == 0):
        return 0
    if t in (DimMin, DimMax) and a == b:
        return a
    if t is DimSub and a == b:
        return 0
    return t(a, b)


def dim_sum(dims: Iterable[ShapeDim]) -> ShapeDim:
    """``simplify(d0 + d1 + ...)`` (the left-deep sum, as a loop of ``+`` builds it) in time
    linear in the number of terms: each step simplifies only the new node (``simplify`` of the
    growing sum at every step is quadratic; Concat of K operands sums K extents)."""
    it = iter(dims)
    total = simplify(next(it))
    for d in it:
        total = _simplified(DimAdd, total, simplify(_dim(d, "+")))
    return total


def evaluate_dim(d: ShapeDim, env: Mapping[str, int]) -> int:
    """The value of ``d`` with each DimVar bound by name in ``env``; an unbound DimVar raises."""
    if isinstance(d, int):
        return d
    if isinstance(d, DimVar):
        if d.name not in env:
            raise IRError(f"DimVar {d.name} is unbound here; bind it through a parameter shape "
                          f"of the enclosing Function")
        return env[d.name]
    return d.FN(evaluate_dim(d.lhs, env), evaluate_dim(d.rhs, env))


def dim_bounds(d: ShapeDim) -> tuple[int | None, int | None]:
    """Sound static inclusive bounds ``(lo, hi)`` of ``d`` over every environment that keeps each
    DimVar in its envelope (None where no bound composes). The upper bound follows the HIR TopK
    entry: DimVar.hi - 1 composed through DimMin / DimMax / DimAdd / DimMul / DimFloorDiv / DimMod
    with constant positive divisors; DimSub and symbolic divisors give no upper bound. Lower
    bounds are tracked only so that products and remainders of possibly negative operands (a
    negative constant, ``N + -10``) stay sound."""
    if isinstance(d, int):
        return d, d
    if isinstance(d, DimVar):
        return d.lo, d.hi - 1
    la, ha = dim_bounds(d.lhs)
    lb, hb = dim_bounds(d.rhs)
    if isinstance(d, DimSub):
        return (la - hb if la is not None and hb is not None else None), None
    if isinstance(d, DimAdd):
        return (la + lb if la is not None and lb is not None else None,
                ha + hb if ha is not None and hb is not None else None)
    if isinstance(d, DimMin):
        his = [v for v in (ha, hb) if v is not None]
        return (min(la, lb) if la is not None and lb is not None else None,
                min(his) if his else None)
    if isinstance(d, DimMax):
        los = [v for v in (la, lb) if v is not None]
        return (max(los) if los else None,
                max(ha, hb) if ha is not None and hb is not None else None)
    if isinstance(d, DimMul):
        if None in (la, ha, lb, hb):
            return None, None
        corners = [la * lb, la * hb, ha * lb, ha * hb]  # type: ignore[operator]
        return min(corners), max(corners)
    # DimFloorDiv / DimMod: only a constant positive divisor composes
    if not isinstance(d.rhs, int) or d.rhs <= 0:
        return None, None
    r = d.rhs
    if isinstance(d, DimFloorDiv):  # floor(x / r) is non-decreasing in x for r > 0
        return (la // r if la is not None else None, ha // r if ha is not None else None)
    # DimMod with r > 0 lies in [0, r - 1]; it is x itself when 0 <= x < r
    if ha is None:
        return 0, None
    if la is not None and la >= 0:
        return (la if ha < r else 0), min(r - 1, ha)
    return 0, r - 1


def upper_bound(d: ShapeDim) -> int | None:
    """A static inclusive upper bound, where one composes (HIR TopK entry): DimVar.hi - 1
    through DimMin / DimMax / DimAdd / DimMul / DimFloorDiv / DimMod with constant divisors;
    DimSub and symbolic divisors do not compose (None). Sound for negative operands too (see
    ``dim_bounds``)."""
    return dim_bounds(d)[1]


# =============================================================================================
# storage, layout, mesh
# =============================================================================================
class StorageKind(enum.Enum):
    """Addressability order rmem < smem < gmem; UNMATERIALIZED is a marker Reshard rejects."""

    RMEM = "rmem"
    SMEM = "smem"
    GMEM = "gmem"
    UNMATERIALIZED = "unmaterialized"

    @property
    def level(self) -> int:
        return {"rmem": 0, "smem": 1, "gmem": 2, "unmaterialized": -1}[self.value]


def _ints(t: object, what: str, *, allow_nested: bool = False) -> tuple:
    if not isinstance(t, tuple):
        raise IRError(f"{what} must be a tuple, got {t!r}")
    for v in t:
        if allow_nested and isinstance(v, tuple):
            _ints(v, what)
            if not v:
                raise IRError(f"{what}: a nested entry must hold at least one extent")
        elif not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise IRError(f"{what} entries must be non-negative ints, got {v!r}")
    return t


@dataclass(frozen=True)
class Layout:
    """CuTe-style layout: one shape entry per tensor axis, an extent or a tuple of extents (the
    axis refined into layout positions, outermost first); ``strides`` mirrors ``shape`` or is
    None (parser sugar that type inference materializes)."""

    shape: tuple
    strides: tuple | None = None

    def __post_init__(self):
        _ints(self.shape, "Layout.shape", allow_nested=True)
        if self.strides is not None:
            _ints(self.strides, "Layout.strides", allow_nested=True)
            if _flat(self.strides) is None or len(_flat(self.strides)) != len(self.positions) or \
                    [isinstance(s, tuple) for s in self.strides] != \
                    [isinstance(s, tuple) for s in self.shape]:
                raise IRError(f"Layout.strides {self.strides} must mirror Layout.shape "
                              f"{self.shape}")

    @property
    def positions(self) -> tuple[int, ...]:
        """Extents of the layout positions, flattened in axis order."""
        return _flat(self.shape)

    @property
    def axis_of_position(self) -> tuple[int, ...]:
        return tuple(a for a, e in enumerate(self.shape)
                     for _ in (e if isinstance(e, tuple) else (e,)))

    @property
    def axis_extents(self) -> tuple[int, ...]:
        return tuple(math.prod(e) if isinstance(e, tuple) else e for e in self.shape)

    @property
    def flat_strides(self) -> tuple[int, ...] | None:
        return None if self.strides is None else _flat(self.strides)

    def with_flat_strides(self, flat: tuple[int, ...]) -> Layout:
        it = iter(flat)
        st = tuple(tuple(next(it) for _ in e) if isinstance(e, tuple) else next(it)
                   for e in self.shape)
        return Layout(self.shape, st)

    @staticmethod
    def natural(shape: tuple[int, ...]) -> Layout:
        """One position per axis, C-order strides."""
        return Layout(tuple(shape)).with_flat_strides(c_order(tuple(shape)))


def _flat(t: tuple) -> tuple[int, ...]:
    return tuple(v for e in t for v in (e if isinstance(e, tuple) else (e,)))


def c_order(extents: tuple[int, ...], zero_size_one: bool = False) -> tuple[int, ...]:
    """Row-major strides over ``extents``; optionally stride 0 for size-1 extents."""
    out, acc = [], 1
    for e in reversed(extents):
        out.append(0 if zero_size_one and e == 1 else acc)
        acc *= e
    return tuple(reversed(out))


@dataclass(frozen=True)
class TopologyLevel:
    name: str
    extent: int

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise IRError(f"TopologyLevel.name must be an identifier, got {self.name!r}")
        if not isinstance(self.extent, int) or isinstance(self.extent, bool) or self.extent < 1:
            raise IRError(f"TopologyLevel {self.name}: extent must be a positive int, got "
                          f"{self.extent!r}")


@dataclass(frozen=True)
class Topology:
    """The Module's ordered execution hierarchy (outermost first), e.g. device then cta."""

    levels: tuple[TopologyLevel, ...]

    def __post_init__(self):
        if not isinstance(self.levels, tuple) or not all(isinstance(v, TopologyLevel)
                                                         for v in self.levels):
            raise IRError("Topology.levels must be a tuple of TopologyLevel")
        names = [v.name for v in self.levels]
        if len(set(names)) != len(names):
            raise IRError(f"Topology level names must be distinct, got {names}")

    def level(self, name: str) -> TopologyLevel | None:
        return next((v for v in self.levels if v.name == name), None)


@dataclass(frozen=True)
class Mesh:
    """A named view of one Topology level as a grid of mesh axes."""

    topology: str
    axis_names: tuple[str, ...]
    axis_extents: tuple[int, ...]

    def __post_init__(self):
        if not isinstance(self.topology, str):
            raise IRError(f"Mesh.topology must be a level name, got {self.topology!r}")
        if not isinstance(self.axis_names, tuple) or not all(
                isinstance(n, str) and n.isidentifier() for n in self.axis_names):
            raise IRError(f"Mesh.axis_names must be a tuple of identifiers, got "
                          f"{self.axis_names!r}")
        if len(set(self.axis_names)) != len(self.axis_names):
            raise IRError(f"Mesh axis names must be distinct, got {self.axis_names}")
        _ints(self.axis_extents, "Mesh.axis_extents")
        if len(self.axis_extents) != len(self.axis_names) or any(e < 1 for e in
                                                                 self.axis_extents):
            raise IRError("Mesh.axis_extents must give one positive extent per axis name")

    @property
    def size(self) -> int:
        return math.prod(self.axis_extents)


@dataclass(frozen=True)
class Split:
    """Partition along the mesh axis by one layout position (index into Layout.positions)."""

    position: int

    def __post_init__(self):
        if not isinstance(self.position, int) or isinstance(self.position, bool) or \
                self.position < 0:
            raise IRError(f"Split.position must be a non-negative int, got {self.position!r}")


@dataclass(frozen=True)
class Broadcast:
    """Every device along the mesh axis holds the whole value."""


#: the Partial reductions: the kinds that fold with one combine (semantics/combine_laws.py)
REDUCTIONS = tuple(_REDUCE_COMBINES)


@dataclass(frozen=True)
class Partial:
    """A pending collective: the logical value is ``reduction`` over the mesh axis."""

    reduction: str

    def __post_init__(self):
        if not isinstance(self.reduction, str) or self.reduction not in REDUCTIONS:
            raise IRError(f"Partial.reduction must be one of {REDUCTIONS}, got "
                          f"{self.reduction!r}")


ShardAttr = Union[Split, Broadcast, Partial]  # noqa: UP007


@dataclass(frozen=True)
class ShardLayout:
    """Exactly one ShardAttr per mesh axis, over a Layout of the tensor's global shape."""

    mesh: Mesh
    attrs: tuple
    layout: Layout

    def __post_init__(self):
        if not isinstance(self.mesh, Mesh):
            raise IRError(f"ShardLayout.mesh must be a Mesh, got {self.mesh!r}")
        if not isinstance(self.layout, Layout):
            raise IRError(f"ShardLayout.layout must be a Layout, got {self.layout!r}")
        if not isinstance(self.attrs, tuple) or len(self.attrs) != len(self.mesh.axis_names):
            raise IRError(f"ShardLayout needs exactly one ShardAttr per mesh axis "
                          f"({len(self.mesh.axis_names)}: {self.mesh.axis_names}), got "
                          f"{self.attrs!r}")
        pos = self.layout.positions
        seen: set[int] = set()
        for ax, (a, m) in enumerate(zip(self.attrs, self.mesh.axis_extents, strict=True)):
            if not isinstance(a, Split | Broadcast | Partial):
                raise IRError(f"ShardLayout.attrs[{ax}] must be Split, Broadcast or Partial, "
                              f"got {a!r}")
            if isinstance(a, Split):
                if a.position >= len(pos):
                    raise IRError(f"ShardLayout: Split({a.position}) on mesh axis "
                                  f"{self.mesh.axis_names[ax]} names a layout position that "
                                  f"does not exist (the layout has {len(pos)})")
                if a.position in seen:
                    raise IRError(f"ShardLayout: two mesh axes split layout position "
                                  f"{a.position}")
                seen.add(a.position)
                if pos[a.position] % m:
                    raise IRError(f"ShardLayout: layout position {a.position} of extent "
                                  f"{pos[a.position]} is not divisible by mesh axis "
                                  f"{self.mesh.axis_names[ax]} of extent {m}")

    @property
    def split_positions(self) -> dict[int, int]:
        """layout position -> mesh-axis extent, for every Split."""
        return {a.position: m for a, m in zip(self.attrs, self.mesh.axis_extents, strict=True)
                if isinstance(a, Split)}

    @property
    def partials(self) -> dict[int, str]:
        """mesh-axis index -> reduction, for every Partial."""
        return {i: a.reduction for i, a in enumerate(self.attrs) if isinstance(a, Partial)}

    @property
    def is_fully_broadcast(self) -> bool:
        return all(isinstance(a, Broadcast) for a in self.attrs)

    def local_positions(self) -> tuple[int, ...]:
        sp = self.split_positions
        return tuple(e // sp[i] if i in sp else e for i, e in enumerate(self.layout.positions))

    def local_axis_extents(self) -> tuple[int, ...]:
        loc = self.local_positions()
        out = [1] * len(self.layout.shape)
        for p, a in enumerate(self.layout.axis_of_position):
            out[a] *= loc[p]
        return tuple(out)

    def shared_engine_strides(self) -> tuple[int, ...]:
        """C-order over the global layout positions."""
        return c_order(self.layout.positions)

    def per_instance_strides(self) -> tuple[int, ...]:
        """Stride 0 on split positions; the rest C-order over local extents, size-1 -> 0."""
        sp = self.split_positions
        loc = self.local_positions()
        rest = c_order(tuple(1 if i in sp else e for i, e in enumerate(loc)), zero_size_one=True)
        return tuple(0 if i in sp else s for i, s in enumerate(rest))

    def with_strides(self, flat: tuple[int, ...]) -> ShardLayout:
        return ShardLayout(self.mesh, self.attrs, self.layout.with_flat_strides(flat))


# =============================================================================================
# value types
# =============================================================================================
@dataclass(frozen=True)
class TensorType:
    shape: tuple
    dtype: DType
    layout: Layout | ShardLayout | None = None
    storage: StorageKind = StorageKind.GMEM

    def __post_init__(self):
        if not isinstance(self.shape, tuple) or not all(is_shape_dim(d) for d in self.shape):
            raise IRError(f"TensorType.shape must be a tuple of ShapeDims, got {self.shape!r}")
        if any(isinstance(d, int) and d < 0 for d in self.shape):
            raise IRError(f"TensorType.shape extents must be non-negative, got {self.shape}")
        if not isinstance(self.dtype, DType):
            raise IRError(f"TensorType.dtype must be a DType, got {self.dtype!r}")
        if self.layout is not None and not isinstance(self.layout, Layout | ShardLayout):
            raise IRError(f"TensorType.layout must be a Layout, ShardLayout or None, got "
                          f"{self.layout!r}")
        if not isinstance(self.storage, StorageKind):
            raise IRError(f"TensorType.storage must be a StorageKind, got {self.storage!r}")
        lay = self.layout.layout if isinstance(self.layout, ShardLayout) else self.layout
        if lay is not None and len(lay.shape) != len(self.shape):
            raise IRError(f"TensorType: layout has {len(lay.shape)} axes but the shape "
                          f"{self.shape} has {len(self.shape)}")
        if lay is not None:
            for a, (d, e) in enumerate(zip(self.shape, lay.axis_extents, strict=True)):
                if isinstance(d, int) and d != e:
                    raise IRError(f"TensorType: axis {a} has extent {d} but its layout "
                                  f"positions multiply to {e}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def shard(self) -> ShardLayout | None:
        return self.layout if isinstance(self.layout, ShardLayout) else None


@dataclass(frozen=True)
class TupleType:
    fields: tuple

    def __post_init__(self):
        if not isinstance(self.fields, tuple) or not all(is_type(f) for f in self.fields):
            raise IRError(f"TupleType.fields must be a tuple of types, got {self.fields!r}")


@dataclass(frozen=True)
class DimType:
    """The type of one dimension value (ShapeExtract's result)."""


@dataclass(frozen=True)
class ShapeType:
    """The type of a whole shape value of a given rank (ShapeOf / ShapeCompose)."""

    rank: int


@dataclass(frozen=True)
class CallableType:
    params: tuple
    result: object

    def __post_init__(self):
        if not isinstance(self.params, tuple) or not all(is_type(p) for p in self.params):
            raise IRError(f"CallableType.params must be a tuple of types, got {self.params!r}")
        if not is_type(self.result):
            raise IRError(f"CallableType.result must be a type, got {self.result!r}")


IRType = Union[TensorType, TupleType, CallableType, DimType, ShapeType]  # noqa: UP007


def is_type(t: object) -> bool:
    return isinstance(t, TensorType | TupleType | CallableType | DimType | ShapeType)
