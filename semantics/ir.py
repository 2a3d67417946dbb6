"""HIR nodes: Expr, Var, Constant, Call, Tuple, TupleGetItem, Op, Function, GridRegionExpr, Module.

HIR is pure SSA-as-DAG: sharing is Python object identity. Nodes are frozen dataclasses with
*structural* equality and hashing (memoized per node, so a DAG with sharing compares and hashes in
time linear in its distinct nodes). Non-canonical metadata — a variant's display label, the type
stamped by inference — takes no part in equality, hashing or the canonical signature.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from tilefoundry.semantics.types import (
    IRError,
    Topology,
    TupleType,
    is_shape_dim,
    is_type,
)

# =============================================================================================
# structural equality / hashing
# =============================================================================================
_NONCANONICAL = {"label"}


def canonical_fields(node: Any) -> list[str]:
    return [f.name for f in fields(node) if f.name not in _NONCANONICAL]


def structurally_equal(a: Any, b: Any) -> bool:
    """Structural equality over IR values; iterative and memoized on node pairs, so deep and
    shared DAGs compare in time linear in their distinct nodes."""
    stack = [(a, b)]
    seen: set[tuple[int, int]] = set()
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if type(x) is not type(y):
            return False
        if isinstance(x, tuple | list):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, np.ndarray):
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                return False
        elif isinstance(x, Expr | Op):
            key = (id(x), id(y))
            if key in seen:
                continue
            seen.add(key)
            if isinstance(x, Expr) and hash(x) != hash(y):
                return False
            stack.extend((getattr(x, n), getattr(y, n)) for n in canonical_fields(x))
        elif x != y:
            return False
    return True


def _children(v: Any):
    """Expr nodes directly inside a field value (through tuples)."""
    if isinstance(v, Expr):
        yield v
    elif isinstance(v, tuple | list):
        for x in v:
            yield from _children(x)


def _hash_value(v: Any) -> int:
    if isinstance(v, Expr):  # children are hashed first (post-order); a Function in a Module
        h = v.__dict__.get("_hash")  # is not, until hashed here
        return h if h is not None else hash(v)
    if isinstance(v, tuple | list):
        return hash(tuple(_hash_value(x) for x in v))
    if isinstance(v, np.ndarray):
        return hash((str(v.dtype), v.shape, v.tobytes()))
    return hash(v)


def _structural_hash(root: Expr) -> int:
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if "_hash" in node.__dict__:
            continue
        if ready:
            h = hash((type(node).__name__,
                      *(_hash_value(getattr(node, n)) for n in canonical_fields(node))))
            object.__setattr__(node, "_hash", h)
            continue
        node._check_hashable()
        stack.append((node, True))
        for n in canonical_fields(node):
            stack.extend((c, False) for c in _children(getattr(node, n))
                         if "_hash" not in c.__dict__)
    return root.__dict__["_hash"]


def _short_repr(v: Any, depth: int) -> str:
    """A bounded repr: a deep or shared DAG prints in bounded size, without recursion limits
    (the dataclass repr would recurse through every path)."""
    if isinstance(v, Expr):
        if depth <= 0:
            return f"{type(v).__name__}(...)"
        inner = ", ".join(f"{f.name}={_short_repr(getattr(v, f.name), depth - 1)}"
                          for f in fields(v))
        return f"{type(v).__name__}({inner})"
    if isinstance(v, tuple):
        items = [_short_repr(x, depth) for x in v[:8]] + (["..."] if len(v) > 8 else [])
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    return repr(v)


class Expr:
    """Base of every HIR value node."""

    def __repr__(self) -> str:
        return _short_repr(self, 3)

    def __eq__(self, other: object) -> bool:
        return structurally_equal(self, other)

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        return h if h is not None else _structural_hash(self)

    def _check_hashable(self) -> None:
        pass

    # --- the type inference stamps (non-canonical) ------------------------------------------
    @property
    def checked_type(self):
        t = self.__dict__.get("_checked_type")
        if t is None:
            raise IRError(f"{type(self).__name__} has no inferred type yet; run type inference "
                          f"(tilefoundry.semantics.typeinfer.infer_module) first")
        return t

    @property
    def has_type(self) -> bool:
        return "_checked_type" in self.__dict__

    def stamp(self, t) -> None:
        object.__setattr__(self, "_checked_type", t)


@dataclass(frozen=True, eq=False, repr=False)
class Var(Expr):
    name: str
    type: Any = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise IRError(f"Var.name must be an identifier, got {self.name!r}")
        if self.type is not None and not is_type(self.type):
            raise IRError(f"Var {self.name}: type must be an IR type or None, got "
                          f"{self.type!r}")


@dataclass(frozen=True, eq=False, repr=False)
class Constant(Expr):
    """A literal tensor (numpy array of an IR dtype's storage type)."""

    value: np.ndarray

    def __post_init__(self):
        if not isinstance(self.value, np.ndarray):
            raise IRError(f"Constant.value must be a numpy array, got {type(self.value).__name__}")
        from tilefoundry.errors import TilefoundryError
        from tilefoundry.semantics.formats import dtype_of

        try:
            dtype_of(self.value)  # raises for storage types that are not IR dtypes
        except TilefoundryError as e:
            raise IRError(f"Constant.value: {e}") from e
        # within the element limits at construction: a broadcast view of 2^32 elements costs
        # nothing here but everything in the printer, hash and check (issue 34)
        from tilefoundry.limits import check_value_size

        check_value_size(self.value.shape, self.value.itemsize,
                         lambda: f"Constant of dtype {self.value.dtype}")
        self.value.setflags(write=False)


@dataclass(frozen=True)
class Op:
    """Base of op classes: attributes only; inputs are the Call's args, named by INPUTS."""

    INPUTS: ClassVar[tuple[str, ...]] = ()
    FAMILY: ClassVar[str] = ""
    #: True when the trailing inputs are variadic (Concat, Stack, ShapeCompose)
    VARIADIC: ClassVar[bool] = False
    #: True when the op moves its float operands' encodings unchanged (a load / store copy, a
    #: selection, a bit reinterpretation): NaN payloads and signs survive it, and the oracle
    #: judges an output made only of such moves bit for bit (D298)
    COPIES_BITS: ClassVar[bool] = False


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    op: Any  # Op | Function
    args: tuple

    def __post_init__(self):
        if not isinstance(self.op, Op | Function):
            raise IRError(f"Call.op must be an Op or a Function, got {self.op!r}")
        if not isinstance(self.args, tuple) or not all(isinstance(a, Expr) for a in self.args):
            raise IRError(f"Call.args must be a tuple of Exprs, got {self.args!r}")
        if isinstance(self.op, Op) and not self.op.VARIADIC and \
                len(self.args) != len(self.op.INPUTS):
            raise IRError(f"Call of {type(self.op).__name__}: expected {len(self.op.INPUTS)} "
                          f"inputs {self.op.INPUTS}, got {len(self.args)}")


@dataclass(frozen=True, eq=False, repr=False)
class Tuple(Expr):
    fields: tuple

    def __post_init__(self):
        if not isinstance(self.fields, tuple) or not all(isinstance(a, Expr) for a in self.fields):
            raise IRError(f"Tuple.fields must be a tuple of Exprs, got {self.fields!r}")


@dataclass(frozen=True, eq=False, repr=False)
class TupleGetItem(Expr):
    tuple_value: Expr
    index: int

    def __post_init__(self):
        if not isinstance(self.tuple_value, Expr):
            raise IRError(f"TupleGetItem.tuple_value must be an Expr, got {self.tuple_value!r}")
        if not isinstance(self.index, int) or isinstance(self.index, bool) or self.index < 0:
            raise IRError(f"TupleGetItem.index must be a non-negative int, got {self.index!r}")


# =============================================================================================
# dispatch patterns, functions, loops, modules
# =============================================================================================
@dataclass(frozen=True)
class DimVarRangePat:
    """Selects a variant when the named DimVar's concrete value lies in ``[lo, hi)``."""

    dim_var: str
    lo: int
    hi: int

    def __post_init__(self):
        if not isinstance(self.dim_var, str) or not self.dim_var.isidentifier():
            raise IRError(f"DimVarRangePat.dim_var must be a DimVar name, got {self.dim_var!r}")
        if not (isinstance(self.lo, int) and isinstance(self.hi, int) and self.lo < self.hi) \
                or isinstance(self.lo, bool) or isinstance(self.hi, bool):
            raise IRError(f"DimVarRangePat {self.dim_var}: the range [lo, hi) = "
                          f"[{self.lo}, {self.hi}) must have lo < hi")

    @property
    def canonical(self) -> str:
        return f"{self.dim_var}${self.lo}_{self.hi}"


@dataclass(frozen=True, eq=False, repr=False)
class Function(Expr):
    """HIR's function container: normal, dispatch prototype (base) or variant."""

    name: str
    params: tuple
    body: Expr | None
    return_type: Any
    specializations: tuple = ()
    variants: tuple = ()
    label: str | None = field(default=None, compare=False)  # non-canonical display label

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise IRError(f"Function.name must be an identifier, got {self.name!r}")
        if not isinstance(self.params, tuple):
            raise IRError(f"Function {self.name}: params must be a tuple, got {self.params!r}")
        for p in self.params:
            if not isinstance(p, Var):
                raise IRError(f"Function {self.name}: params entries MUST be Vars (HIR spec "
                              f"§1.1), got {type(p).__name__}")
        if self.body is not None and not isinstance(self.body, Expr):
            raise IRError(f"Function {self.name}: body must be a single Expr or None, got "
                          f"{type(self.body).__name__}")
        if self.return_type is not None and not is_type(self.return_type):
            raise IRError(f"Function {self.name}: return_type must be an IR type, got "
                          f"{self.return_type!r}")
        if not isinstance(self.specializations, tuple) or \
                not all(isinstance(s, DimVarRangePat) for s in self.specializations):
            raise IRError(f"Function {self.name}: specializations must be a tuple of "
                          f"DimVarRangePats, got {self.specializations!r}")
        if not isinstance(self.variants, tuple) or \
                not all(isinstance(v, Function) for v in self.variants):
            raise IRError(f"Function {self.name}: variants must be a tuple of Functions, got "
                          f"{type(self.variants).__name__}")
        if self.label is not None and not isinstance(self.label, str):
            raise IRError(f"Function {self.name}: label must be a str or None, got "
                          f"{self.label!r}")
        object.__setattr__(self, "_sealed", bool(self.variants))

    @property
    def type(self):
        """The CallableType projected from params + return_type (HIR spec §1.1, Value type)."""
        from tilefoundry.semantics.types import CallableType

        return CallableType(tuple(p.type for p in self.params), self.return_type)

    @property
    def kind(self) -> str:
        if self.specializations:
            return "variant"
        if self.variants or self.body is None:
            return "prototype"
        return "normal"

    @property
    def sealed(self) -> bool:
        return self.__dict__["_sealed"]

    @property
    def canonical_signature(self) -> str:
        return ";".join(p.canonical for p in self.specializations)

    def add_variant(self, variant: Function) -> None:
        """Authoring: register a variant on a dispatch prototype before it is sealed."""
        if self.sealed:
            raise IRError(f"Function {self.name}: the dispatch prototype is sealed (it entered "
                          f"a Module); it rejects further variants (HIR spec, Authoring freeze)")
        if self.body is not None:
            raise IRError(f"Function {self.name}: only a dispatch prototype (body None, written "
                          f"`pass`) takes variants")
        if not isinstance(variant, Function) or not variant.specializations:
            raise IRError(f"Function {self.name}: a variant carries exactly one DimVarRangePat "
                          f"in specializations")
        if variant is self:
            raise IRError(f"Function {self.name}: a function is not its own variant "
                          f"(add_variant(self) would make dispatch recurse); register a "
                          f"separate Function with a body")
        if "_hash" in self.__dict__:
            raise IRError(f"Function {self.name}: hashed while still accumulating variants")
        object.__setattr__(self, "variants", (*self.variants, variant))

    def seal(self) -> None:
        object.__setattr__(self, "_sealed", True)

    def _check_hashable(self) -> None:
        if self.body is None and not self.sealed:
            raise IRError(f"Function {self.name}: a dispatch prototype MUST NOT be hashed while "
                          f"still accumulating variants (seal it by adding it to a Module)")


@dataclass(frozen=True, eq=False, repr=False)
class GridRegionExpr(Expr):
    """Loop-phi-shaped structured SSA: ``range(start, extent, step)`` with a carry chain."""

    induction_var: Var
    carried_args: tuple
    init_args: tuple
    body: Expr
    yield_values: tuple
    extent: Any
    step: Any = 1
    start: Any = 0

    def __post_init__(self):
        if not isinstance(self.induction_var, Var):
            raise IRError("GridRegionExpr.induction_var must be a Var")
        for f in ("carried_args", "init_args", "yield_values"):
            v = getattr(self, f)
            if not isinstance(v, tuple) or not all(isinstance(e, Expr) for e in v):
                raise IRError(f"GridRegionExpr.{f} must be a tuple of Exprs")
        if not all(isinstance(v, Var) for v in self.carried_args):
            raise IRError("GridRegionExpr.carried_args must be Vars (the loop phis)")
        if not isinstance(self.body, Expr):
            raise IRError("GridRegionExpr.body must be an Expr")
        for f in ("extent", "step", "start"):
            if not is_shape_dim(getattr(self, f)):
                raise IRError(f"GridRegionExpr.{f} must be a ShapeDim, got "
                              f"{getattr(self, f)!r}")


@dataclass(frozen=True)
class Target:
    name: str = "reference"


@dataclass(frozen=True, eq=False)
class Module:
    """Functions with a Target and the ordered Topology hierarchy; entering seals functions."""

    functions: tuple
    target: Target = field(default_factory=Target)
    topology: Topology = field(default_factory=lambda: Topology(()))

    def __post_init__(self):
        if not isinstance(self.functions, tuple) or not all(isinstance(f, Function)
                                                            for f in self.functions):
            raise IRError("Module.functions must be a tuple of Functions")
        names = [f.name for f in self.functions]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise IRError(f"Module: function names must be unique, {sorted(dup)} repeat")
        if not isinstance(self.topology, Topology):
            raise IRError("Module.topology must be a Topology")
        if not isinstance(self.target, Target):
            raise IRError(f"Module.target must be a Target, got {self.target!r}")
        for f in self.functions:
            if f.specializations:
                raise IRError(f"Module: top-level function {f.name} is a variant "
                              f"(specializations != ()); register it on its dispatch prototype "
                              f"with @{f.name}.specialize instead (HIR spec, Authoring freeze)")
        for f in self.functions:  # seal only once every check passed
            f.seal()

    def __getitem__(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise IRError(f"Module has no function {name!r}; it has "
                      f"{[f.name for f in self.functions]}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Module) and self.target == other.target and \
            self.topology == other.topology and structurally_equal(self.functions,
                                                                   other.functions)

    def __hash__(self) -> int:
        return hash((self.target, self.topology, _hash_value(self.functions)))


def tuple_type_of(fields_: tuple) -> TupleType:
    return TupleType(tuple(fields_))


# =============================================================================================
# DAG walks shared by the evaluator, erasure, the oracle, the reducer and backends
# =============================================================================================
def operands(e: Expr) -> list[Expr]:
    """The value operands of ``e`` in the enclosing scope: a Call's args, a Tuple's fields, a
    TupleGetItem's tuple, a GridRegionExpr's init args (its body is a scope of its own)."""
    if isinstance(e, Call):
        return list(e.args)
    if isinstance(e, Tuple):
        return list(e.fields)
    if isinstance(e, TupleGetItem):
        return [e.tuple_value]
    if isinstance(e, GridRegionExpr):
        return list(e.init_args)
    return []


def loop_children(e: Expr) -> list[Expr]:
    """``operands`` plus, for a loop, its body and yields (a loop body may read outer values):
    the children of a walk that enters loop bodies."""
    if isinstance(e, GridRegionExpr):
        return [*e.init_args, e.body, *e.yield_values]
    return operands(e)


def yield_children(e: Expr) -> list[Expr]:
    """``operands`` plus, for a loop, its yields (what the loop's results are computed from;
    nodes of the body no yield reads are not entered)."""
    if isinstance(e, GridRegionExpr):
        return [*e.init_args, *e.yield_values]
    return operands(e)


def all_children(e: Expr) -> list[Expr]:
    """Every Expr field of ``e`` in field order (a loop's induction and carried Vars
    included); a Function is a leaf (its body is its own) and a Call's ``op`` is no child."""
    if isinstance(e, Function):
        return []
    if isinstance(e, Call):
        return list(e.args)
    out: list[Expr] = []
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, Expr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, Expr))
    return out


def reachable(root: Expr | Iterable[Expr], children: Any = operands):
    """Every node reachable from ``root`` (one node or several roots) through ``children``,
    once each, in depth-first pre-order (iterative)."""
    seen: set[int] = set()
    stack = [root] if isinstance(root, Expr) else list(root)[::-1]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(c for c in children(node) if id(c) not in seen)


def postorder(roots: Expr | Iterable[Expr], children: Any = operands,
              known: Iterable[int] = ()) -> list[Expr]:
    """The nodes reachable from ``roots`` through ``children``, operands first (each once, the
    first operand's subtree first); nodes whose ``id`` is in ``known`` are not entered."""
    out: list[Expr] = []
    seen: set[int] = set(known)
    for r in [roots] if isinstance(roots, Expr) else roots:
        stack: list[tuple[Expr, bool]] = [(r, False)]
        while stack:
            node, ready = stack.pop()
            if ready:
                out.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(children(node)) if id(c) not in seen)
    return out


def function_nodes(functions: Iterable[Function], children: Any = loop_children):
    """Every node of the functions' bodies and of their dispatch variants' bodies (loop bodies
    included by default), each once, function by function."""
    fns: list[Expr] = []
    for f in functions:
        fns.append(f)
        fns.extend(f.variants)
    return reachable([f.body for f in fns if f.body is not None], children)


@contextmanager
def loop_scope(values: dict[int, Any], bindings: dict[int, Any]) -> Iterator[dict[int, Any]]:
    """One loop iteration's value table: ``values`` itself with ``bindings`` (the induction and
    carried variables) bound, and on exit every key the iteration added removed again and each
    binding it shadowed restored. ``run_dag`` only adds keys and dicts keep insertion order, so
    this costs what the iteration computed, not a copy of the whole table per iteration (which
    made a 10^5-iteration loop over a large program quadratic)."""
    n0 = len(values)
    shadowed = {k: values[k] for k in bindings if k in values}
    values.update(bindings)
    try:
        yield values
    finally:
        while len(values) > n0:
            values.popitem()
        values.update(shadowed)


def run_dag(root: Expr, values: dict[int, Any], compute: Any,
            children: Any = operands) -> Any:
    """Iterative post-order evaluation (deep DAGs do not recurse): ``values`` maps ``id(node)``
    to known values (parameters, loop-invariant values) and receives ``compute(node)`` of every
    other node reachable through ``children``; returns the value of ``root``."""
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in values:
            continue
        if not ready:
            stack.append((node, True))
            stack.extend((c, False) for c in children(node) if id(c) not in values)
            continue
        values[id(node)] = compute(node)
    return values[id(root)]
