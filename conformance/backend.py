"""The backend protocol: what a backend author implements to be judged by tilefoundry.

A backend is any object with::

    name: str
    capabilities() -> Capabilities
    compile(module: Module, entry: str) -> Any          # anything the backend wants to keep
    run(compiled: Any, inputs: list[np.ndarray]) -> np.ndarray | tuple[np.ndarray, ...]

Inputs are numpy arrays of the parameters' storage dtypes (ml_dtypes for bf16 / fp8 / e8m0),
rank-0 arrays for scalars, C-contiguous. Outputs are the same kind of arrays, one per result
(a tuple for tuple results). Backends are loaded with ``--backend package.module:factory`` (the
factory is called with no arguments) or by name from the ``tilefoundry.backends`` entry-point
group; ``reference`` is built in.

``Capabilities`` declares what the backend claims to support. A case that needs anything outside
it is **NOT_SUPPORTED** (naming what is missing), never a FAIL: the conformance report separates
"wrong" from "not implemented".

**Run-time checks.** Some checks of the spec take run-time values, so no type rule makes them
(``tilefoundry.errors.RUN_TIME_CHECKS``): ``index_range`` (a Gather index or a RoPE position
outside its axis), ``cache_bounds`` (CacheUpdate's ``cur_pos`` / ``s``), ``slice_window`` (an
InsertSlice offset), ``dispatch_envelope`` (an extent outside a DimVar's envelope). Inputs that
fail one have no result. A backend reports that by raising
``tilefoundry.errors.RunTimeCheckError(message, check=<name or None>)`` from ``run`` (re-exported
here). Catalog cases with ``Case.expect_error`` feed such inputs; the verdicts:

* ``RunTimeCheckError`` naming the expected check, or ``check=None``: **PASS**;
* ``RunTimeCheckError`` naming another check: **FAIL**, naming both;
* values returned (clamped, wrapped, ignored): **FAIL**, naming the check the reference fails;
* any other exception: **ERROR**, naming the check and this protocol (D202: the backend may
  have detected the problem, but it did not report it in the documented way);
* a hang or a crash: **TIMEOUT** / **CRASH** as for any case; ``BackendUnsupportedError``:
  **NOT_SUPPORTED** as for any case.

``RunTimeCheckError`` raised on a case whose inputs pass every check (the reference returns
values) is a **FAIL**: the backend refused a program that has a result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tilefoundry.errors import RUN_TIME_CHECKS, InvalidArgumentError, RunTimeCheckError
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module

__all__ = [
    "ALL_FEATURES",
    "ALL_OVERFLOW",
    "ALL_POLICIES",
    "ALL_ROUNDING",
    "RUN_TIME_CHECKS",
    "Backend",
    "Capabilities",
    "ReferenceBackend",
    "RunTimeCheckError",
    "load_backend",
    "reference_check",
    "requirements",
    "unsupported_reason",
]

ALL_POLICIES = frozenset({"unordered_tree", "ordered_tree", "fold_left", "fold_right"})
ALL_OVERFLOW = frozenset({"nonfinite", "saturate"})
ALL_ROUNDING = frozenset({"nearest", "up", "down"})
#: structural features a program may need beyond its ops: tuple values (a Tuple, a
#: TupleGetItem or a tuple-typed parameter / result), calls of another function of the module,
#: loops (GridRegionExpr), dispatch (a function with DimVar variants or specializations)
ALL_FEATURES = frozenset({"tuples", "calls", "loops", "dispatch"})
#: the attributes ``op_attrs`` may restrict (the others are shape attributes, never claimed)
_ATTR_SETS = {"policy": ALL_POLICIES, "overflow": ALL_OVERFLOW, "rounding": ALL_ROUNDING}


@dataclass(frozen=True)
class Capabilities:
    """What a backend claims. The default claims **nothing** (D247): a backend states each op,
    dtype, reduction policy, Cast overflow / rounding mode and structural feature it runs, and
    a case needing anything else is NOT_SUPPORTED, naming it.

    * ``ops``: op class names (``"Binary"``, ``"MatMul"``) or ``"Binary.add"``-style names for
      a single kind; ``None`` means every op (say so explicitly).
    * ``dtypes``: the dtypes any value may have.
    * ``op_dtypes``: per op name (a class or a ``Class.kind``), the only dtypes its operands and
      result may have (``{"Cast": {f32, bf16}, "Binary.lt": {f32, bool}}``); ops it does not
      name are limited by ``dtypes`` alone.
    * ``policies`` (reduction policies), ``overflow_modes`` and ``rounding_modes`` (Cast):
      for every op; ``op_attrs`` narrows them per op: ``{"Reduce.sum": {"policy":
      {"fold_left"}}}`` (attributes ``policy``, ``overflow``, ``rounding``).
    * ``features``: of ``ALL_FEATURES`` (tuples, calls, loops, dispatch).
    * ``mesh``: sharded programs; ``mesh_shapes`` (None: any) the mesh axis extents it runs,
      e.g. ``{(2,), (2, 2)}``.
    * ``cast_pairs``: the (source, destination) dtype pairs ``Cast`` runs, e.g.
      ``{(f16, f32)}``; None (the default) limits a Cast by ``dtypes`` / ``op_dtypes`` alone,
      so every pair of claimed dtypes is claimed (D300).
    * ``reduction_order``: the order the backend's float sums reduce in, when it knows it
      (``"fold_left"``, ``"fold_right"``, ``"pairwise"`` / ``"pairwise:W"``, ``"any"``; None:
      not declared): cases whose policy needs another order are NOT_SUPPORTED, tree policies
      are judged against a declared fold; ``empty_reductions=False``: reductions over an
      empty axis are NOT_SUPPORTED (``reduction_orders.py``).

    ``Capabilities.everything()`` claims every op, dtype, mode and feature (the reference);
    ``to_json`` / ``from_json`` round-trip a set (what ``conformance probe`` writes)."""

    ops: frozenset[str] | None = frozenset()
    dtypes: frozenset[DType] = frozenset()
    policies: frozenset[str] = frozenset()
    overflow_modes: frozenset[str] = frozenset()
    mesh: bool = False
    rounding_modes: frozenset[str] = frozenset()
    features: frozenset[str] = frozenset()
    op_dtypes: Mapping[str, frozenset[DType]] = field(default_factory=dict)
    op_attrs: Mapping[str, Mapping[str, frozenset[str]]] = field(default_factory=dict)
    mesh_shapes: frozenset[tuple[int, ...]] | None = None
    cast_pairs: frozenset[tuple[DType, DType]] | None = None
    reduction_order: str | None = None
    empty_reductions: bool = True

    def __reduce__(self) -> tuple:
        """Picklable (a spawned worker receives them) although the runner's validated sets
        hold read-only mappings: pickled as plain dicts, read-only again when unpickled."""
        import dataclasses

        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields["op_dtypes"] = dict(self.op_dtypes)
        fields["op_attrs"] = {k: dict(v) for k, v in self.op_attrs.items()}
        return (_unpickle_capabilities, (fields,))

    @classmethod
    def everything(cls, **overrides: Any) -> Capabilities:
        """Every op, every dtype, policy, mode and feature (no mesh unless ``mesh=True``);
        ``overrides`` replace single fields."""
        base = {"ops": None, "dtypes": frozenset(DType), "policies": ALL_POLICIES,
                "overflow_modes": ALL_OVERFLOW, "rounding_modes": ALL_ROUNDING,
                "features": ALL_FEATURES}
        return cls(**{**base, **overrides})

    def to_json(self) -> dict:
        return {"ops": None if self.ops is None else sorted(self.ops),
                "dtypes": sorted(_dt_name(d) for d in self.dtypes),
                "policies": sorted(self.policies), "overflow_modes": sorted(self.overflow_modes),
                "rounding_modes": sorted(self.rounding_modes),
                "features": sorted(self.features), "mesh": self.mesh,
                "mesh_shapes": None if self.mesh_shapes is None else
                sorted(list(s) for s in self.mesh_shapes),
                "op_dtypes": {k: sorted(_dt_name(d) for d in v)
                              for k, v in sorted(self.op_dtypes.items())},
                "op_attrs": {k: {a: sorted(vs) for a, vs in sorted(v.items())}
                             for k, v in sorted(self.op_attrs.items())},
                **({} if self.cast_pairs is None else {"cast_pairs": sorted(
                    [_dt_name(a), _dt_name(b)] for a, b in self.cast_pairs)}),
                **({} if self.reduction_order is None else
                   {"reduction_order": self.reduction_order}),
                **({} if self.empty_reductions else {"empty_reductions": False})}

    @classmethod
    def from_json(cls, data: Any, source: str = "capabilities") -> Capabilities:
        """The inverse of ``to_json``; an InvalidArgumentError naming the bad key. Names are
        checked later, with the closest valid name (``runner.validate_capabilities``)."""
        keys = {"ops", "dtypes", "policies", "overflow_modes", "rounding_modes", "features",
                "mesh", "mesh_shapes", "op_dtypes", "op_attrs", "cast_pairs",
                "reduction_order", "empty_reductions"}
        if not isinstance(data, dict):
            raise InvalidArgumentError(f"{source}: expected a JSON object, got "
                                       f"{type(data).__name__}")
        unknown = sorted(set(data) - keys)
        if unknown:
            raise InvalidArgumentError(f"{source}: unknown key(s) {unknown} (allowed: "
                                       f"{sorted(keys)})")

        def strs(k: str) -> frozenset:
            v = data.get(k, [])
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise InvalidArgumentError(f"{source}: {k!r} must be a list of strings, got "
                                           f"{_brief(v)}")
            return frozenset(v)

        ops = None if data.get("ops", []) is None else strs("ops")
        shapes = data.get("mesh_shapes")
        if shapes is not None and (not isinstance(shapes, list) or not all(
                isinstance(x, list) and all(type(n) is int and n > 0 for n in x)
                for x in shapes)):
            raise InvalidArgumentError(f"{source}: 'mesh_shapes' must be null or a list of "
                                       f"lists of positive ints, got {_brief(shapes)}")
        od, oa = data.get("op_dtypes", {}), data.get("op_attrs", {})
        if not isinstance(od, dict) or not all(
                isinstance(v, list) and all(isinstance(x, str) for x in v) for v in od.values()):
            raise InvalidArgumentError(f"{source}: 'op_dtypes' must map op names to lists of "
                                       f"dtype names, got {_brief(od)}")
        if not isinstance(oa, dict) or not all(
                isinstance(v, dict) and all(isinstance(x, list) and
                                            all(isinstance(y, str) for y in x)
                                            for x in v.values())
                for v in oa.values()):
            raise InvalidArgumentError(f"{source}: 'op_attrs' must map op names to "
                                       f"{{attribute: [value names]}}, got {_brief(oa)}")
        if not isinstance(data.get("mesh", False), bool):
            raise InvalidArgumentError(f"{source}: 'mesh' must be true or false")
        pairs = data.get("cast_pairs")
        if pairs is not None and (not isinstance(pairs, list) or not all(
                isinstance(x, list) and len(x) == 2 and all(isinstance(d, str) for d in x)
                for x in pairs)):
            raise InvalidArgumentError(f"{source}: 'cast_pairs' must be null or a list of "
                                       f"[source, destination] dtype names, got {_brief(pairs)}")
        from tilefoundry.conformance.reduction_orders import check_reduction_claims

        red = check_reduction_claims(_claims_of(data), source, InvalidArgumentError)
        return cls(ops=ops, dtypes=strs("dtypes"), policies=strs("policies"),
                   overflow_modes=strs("overflow_modes"),
                   rounding_modes=strs("rounding_modes"), features=strs("features"),
                   mesh=data.get("mesh", False),
                   mesh_shapes=None if shapes is None else frozenset(tuple(x) for x in shapes),
                   op_dtypes={k: frozenset(v) for k, v in od.items()},
                   op_attrs={k: {a: frozenset(x) for a, x in v.items()}
                             for k, v in oa.items()},
                   cast_pairs=None if pairs is None else frozenset(tuple(x) for x in pairs),
                   **red)

    @classmethod
    def load(cls, path: str) -> Capabilities:
        """A capability set from a JSON file (``conformance probe`` writes one), read by
        ``loaders.load_json`` (a regular, bounded, UTF-8 JSON file)."""
        from tilefoundry.conformance.loaders import load_json

        data = load_json(path, what=f"--capabilities {path}", kind="capabilities",
                         error=InvalidArgumentError,
                         fix="write one with: tilefoundry conformance probe --out FILE")
        return cls.from_json(data, f"--capabilities {path}")


def _brief(v: Any, n: int = 80) -> str:
    """``repr(v)`` cut to ``n`` characters (a message stays one short line)."""
    r = repr(v)
    return r if len(r) <= n else r[:n] + "..."


def _claims_of(data: dict) -> Any:
    """``data``'s keys as attributes (what ``check_reduction_claims`` reads)."""
    from types import SimpleNamespace

    return SimpleNamespace(reduction_order=data.get("reduction_order"),
                           empty_reductions=data.get("empty_reductions", True))


def _unpickle_capabilities(fields: dict) -> Capabilities:
    from types import MappingProxyType

    fields["op_dtypes"] = MappingProxyType(fields["op_dtypes"])
    fields["op_attrs"] = MappingProxyType({k: MappingProxyType(v)
                                           for k, v in fields["op_attrs"].items()})
    return Capabilities(**fields)


def _dt_name(d: Any) -> str:
    return d.value if isinstance(d, DType) else str(d)


@runtime_checkable
class Backend(Protocol):
    name: str

    def capabilities(self) -> Capabilities: ...

    def compile(self, module: Module, entry: str) -> Any: ...

    def run(self, compiled: Any, inputs: list[np.ndarray]) -> Any: ...


# ---------------------------------------------------------------------------------------------
# capability names
# ---------------------------------------------------------------------------------------------
def known_op_names() -> frozenset[str]:
    """Every name ``Capabilities.ops`` may hold: each op class of ``ALL_OPS`` and, for a class
    with an enumerated ``kind`` (Binary, Unary, Reduce), each ``"Class.kind"``."""
    import enum
    import typing

    from tilefoundry.semantics.ops import ALL_OPS

    out: set[str] = set()
    for cls in ALL_OPS:
        out.add(cls.__name__)
        try:
            kind = typing.get_type_hints(cls).get("kind")
        except Exception:  # an unresolvable annotation: no kinds to name
            kind = None
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            out.update(f"{cls.__name__}.{k.value}" for k in kind)
    return frozenset(out)


def _closest(name: str, valid: frozenset[str]) -> list[str]:
    """The valid names closest to ``name`` (difflib's ratio, case-insensitive): the best one,
    and every other one exactly as close (``'Binary.ad'`` is one letter from both
    ``'Binary.add'`` and ``'Binary.and'``)."""
    import difflib

    low = {v.lower(): v for v in valid}
    scored = sorted(((difflib.SequenceMatcher(None, name.lower(), k).ratio(), low[k])
                     for k in low), key=lambda t: (-t[0], t[1]))
    best = scored[0][0]
    return [v for r, v in scored if r == best][:3]


def _unknown(what: str, name: str, valid: frozenset[str]) -> str:
    near = _closest(name, valid)
    return f"unknown {what} {name!r} (closest valid name{'s' if len(near) > 1 else ''}: " \
           f"{', '.join(repr(n) for n in near)})"


def capability_name_error(ops: Any, dtypes: Any, policies: Any = (),
                          overflow_modes: Any = (), rounding_modes: Any = (),
                          features: Any = (), op_dtypes: Any = None,
                          op_attrs: Any = None, cast_pairs: Any = None) -> str | None:
    """Every op, dtype, reduction policy and overflow mode name of the capabilities that names
    nothing, each with the closest valid name(s), as ``"unknown op 'Binray' (closest valid
    name: 'Binary')"`` joined by ``"; "`` (None: every name is known). ``dtypes`` may hold
    DType members or their names (``"bf16"``). A misspelled name would otherwise claim
    nothing and turn every case that needs it into a silent NOT_SUPPORTED."""
    bad: list[str] = []
    if ops is not None:
        valid = known_op_names()
        bad += [_unknown("op", o, valid) for o in sorted(str(x) for x in ops) if o not in valid]
    names = frozenset(d.value for d in DType)
    bad += [_unknown("dtype", d, names) for d in sorted(str(x) for x in dtypes
                                                         if not isinstance(x, DType))
            if d not in names]
    bad += [_unknown("reduction policy", p, ALL_POLICIES) for p in sorted(map(str, policies))
            if p not in ALL_POLICIES]
    bad += [_unknown("overflow mode", m, ALL_OVERFLOW) for m in sorted(map(str, overflow_modes))
            if m not in ALL_OVERFLOW]
    bad += [_unknown("rounding mode", m, ALL_ROUNDING) for m in sorted(map(str, rounding_modes))
            if m not in ALL_ROUNDING]
    bad += [_unknown("feature", f, ALL_FEATURES) for f in sorted(map(str, features))
            if f not in ALL_FEATURES]
    valid = known_op_names()
    for k, dts in sorted((op_dtypes or {}).items()):
        if k not in valid:
            bad.append("op_dtypes: " + _unknown("op", str(k), valid))
        bad += [f"op_dtypes[{k!r}]: " + _unknown("dtype", str(d), names)
                for d in sorted(map(_dt_name, dts)) if d not in names]
    for k, attrs in sorted((op_attrs or {}).items()):
        if k not in valid:
            bad.append("op_attrs: " + _unknown("op", str(k), valid))
        for a, vs in sorted(attrs.items()):
            if a not in _ATTR_SETS:
                bad.append(f"op_attrs[{k!r}]: " + _unknown("attribute", str(a),
                                                           frozenset(_ATTR_SETS)))
                continue
            bad += [f"op_attrs[{k!r}][{a!r}]: " + _unknown(a, str(v), _ATTR_SETS[a])
                    for v in sorted(map(str, vs)) if v not in _ATTR_SETS[a]]
    for pair in sorted(cast_pairs or (), key=lambda p: tuple(map(_dt_name, p))):
        bad += [f"cast_pairs[{_dt_name(pair[0])}->{_dt_name(pair[1])}]: " +
                _unknown("dtype", str(d), names) for d in map(_dt_name, pair) if d not in names]
    return "; ".join(bad) or None


# ---------------------------------------------------------------------------------------------
# what a program needs
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Requirements:
    ops: frozenset[str]  # "Class" and "Class.kind" names
    dtypes: frozenset[DType]
    policies: frozenset[str]
    overflow_modes: frozenset[str]
    mesh: bool
    rounding_modes: frozenset[str] = frozenset()
    features: frozenset[str] = frozenset()
    op_dtypes: frozenset[tuple[str, DType]] = frozenset()  # (op name, operand / result dtype)
    op_attrs: frozenset[tuple[str, str, str]] = frozenset()  # (op name, attribute, value)
    mesh_shapes: frozenset[tuple[int, ...]] = frozenset()
    cast_pairs: frozenset[tuple[DType, DType]] = frozenset()  # (source, destination) of a Cast
    #: (op name, policy, seeded) of each order-sensitive reduction (reduction_orders.py)
    reduction_orders: frozenset[tuple[str, str, bool]] = frozenset()
    empty_reductions: frozenset[str] = frozenset()  # each reduction over an empty axis


def _dtypes_of(t: Any) -> list[DType]:
    from tilefoundry.semantics.types import TensorType, TupleType

    if isinstance(t, TensorType):
        return [t.dtype]
    if isinstance(t, TupleType):
        return [d for f in t.fields for d in _dtypes_of(f)]
    return []


def requirements(module: Module) -> Requirements:
    """Every op (with the dtypes of its operands and result and its policy / overflow /
    rounding attributes), dtype, structural feature and mesh shape ``module`` uses."""
    from tilefoundry.conformance.reduction_orders import reduction_needs
    from tilefoundry.semantics.ir import GridRegionExpr, TupleGetItem, reachable, yield_children
    from tilefoundry.semantics.ir import Tuple as TupleExpr
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.semantics.typeinfer.functions import infer_module
    from tilefoundry.semantics.types import TensorType, TupleType

    m = infer_module(module, Session())
    ops: set[str] = set()
    dts: set[DType] = set()
    attrs: dict[str, set[str]] = {"policy": set(), "overflow": set(), "rounding": set()}
    feats: set[str] = set()
    op_dts: set[tuple[str, DType]] = set()
    op_attrs: set[tuple[str, str, str]] = set()
    shapes: set[tuple[int, ...]] = set()
    pairs: set[tuple[DType, DType]] = set()
    red_orders: set[tuple[str, str, bool]] = set()
    red_empty: set[str] = set()

    def see_type(t: Any) -> None:
        if isinstance(t, TensorType):
            dts.add(t.dtype)
            if t.shard is not None:
                shapes.add(tuple(t.shard.mesh.axis_extents))
        elif isinstance(t, TupleType):
            feats.add("tuples")
            for f in t.fields:
                see_type(f)

    fns: list[Function] = []
    for f in m.functions:
        fns.append(f)
        fns.extend(f.variants)
        if f.variants or f.specializations:
            feats.add("dispatch")
    for f in fns:
        for p in f.params:
            see_type(p.type)
        if f.body is None:
            continue
        for n in reachable(f.body, yield_children):
            if n.has_type:
                see_type(n.checked_type)
            if isinstance(n, TupleExpr | TupleGetItem):
                feats.add("tuples")
            if isinstance(n, Call) and isinstance(n.op, Function):
                feats.add("calls")
            elif isinstance(n, Call):
                name = type(n.op).__name__
                names = [name]
                kind = getattr(n.op, "kind", None)
                if hasattr(kind, "value"):
                    names.append(f"{name}.{kind.value}")
                ops.update(names)
                touched = [d for a in n.args if a.has_type
                           for d in _dtypes_of(a.checked_type)]
                if n.has_type:
                    touched += _dtypes_of(n.checked_type)
                if isinstance(getattr(n.op, "dtype", None), DType):
                    dts.add(n.op.dtype)
                    touched.append(n.op.dtype)
                op_dts.update((o, d) for o in names for d in touched)
                if name == "Cast" and n.args and n.args[0].has_type and \
                        isinstance(n.op.dtype, DType):
                    pairs.update((d, n.op.dtype) for d in _dtypes_of(n.args[0].checked_type))
                o, em = reduction_needs(n)
                red_orders |= o
                red_empty |= em
                for a in attrs:
                    v = getattr(n.op, a, None)
                    if isinstance(v, str) and v:
                        attrs[a].add(v)
                        op_attrs.update((o, a, v) for o in names)
            if isinstance(n, GridRegionExpr):
                feats.add("loops")
    return Requirements(frozenset(ops), frozenset(dts), frozenset(attrs["policy"]),
                        frozenset(attrs["overflow"]), bool(shapes),
                        frozenset(attrs["rounding"]), frozenset(feats), frozenset(op_dts),
                        frozenset(op_attrs), frozenset(shapes), frozenset(pairs),
                        frozenset(red_orders), frozenset(red_empty))


def unsupported_reason(caps: Capabilities, req: Requirements) -> str | None:
    """Why a backend with ``caps`` cannot run a program needing ``req`` (None: it can)."""
    from tilefoundry.conformance.reduction_orders import reduction_reason

    if caps.ops is not None:
        kinds = {o.split(".")[0] for o in req.ops if "." in o}
        missing = sorted(o for o in req.ops
                         if ("." in o and o not in caps.ops and o.split(".")[0] not in caps.ops)
                         or ("." not in o and o not in kinds and o not in caps.ops))
        if missing:
            return f"op(s) {missing} not in the backend's capabilities"
    if req.dtypes - caps.dtypes:
        return f"dtype(s) {sorted(d.value for d in req.dtypes - caps.dtypes)} not supported"
    if req.features - caps.features:
        return f"feature(s) {sorted(req.features - caps.features)} not in the backend's " \
               f"capabilities (declare them in Capabilities.features)"
    bad_pairs = sorted({(o, d.value) for o, d in req.op_dtypes
                        if o in caps.op_dtypes and d not in caps.op_dtypes[o]})
    if bad_pairs:
        return "op x dtype " + ", ".join(f"{o} on {d}" for o, d in bad_pairs[:4]) + \
               (f" (+{len(bad_pairs) - 4} more)" if len(bad_pairs) > 4 else "") + \
               " not supported (op_dtypes)"
    for what, need, have in (("reduction policy(ies)", req.policies, caps.policies),
                             ("overflow mode(s)", req.overflow_modes, caps.overflow_modes),
                             ("rounding mode(s)", req.rounding_modes, caps.rounding_modes)):
        if need - have:
            return f"{what} {sorted(need - have)} not supported"
    if caps.cast_pairs is not None and req.cast_pairs - caps.cast_pairs:
        miss = sorted(f"{a.value}->{b.value}" for a, b in req.cast_pairs - caps.cast_pairs)
        return f"cast pair(s) [{', '.join(miss)}] not in the backend's capabilities " \
               f"(cast_pairs)"
    bad_attr = sorted((o, a, v) for o, a, v in req.op_attrs
                      if a in caps.op_attrs.get(o, {}) and v not in caps.op_attrs[o][a])
    if bad_attr:
        o, a, v = bad_attr[0]
        return f"{o} with {a}={v!r} not supported (op_attrs[{o!r}][{a!r}] = " \
               f"{sorted(caps.op_attrs[o][a])})"
    why = reduction_reason(caps, req.reduction_orders, req.empty_reductions)
    if why is not None:
        return why
    if req.mesh and not caps.mesh:
        return "sharded programs (mesh simulation) not supported"
    if req.mesh and caps.mesh_shapes is not None and req.mesh_shapes - caps.mesh_shapes:
        return f"mesh shape(s) {sorted(req.mesh_shapes - caps.mesh_shapes)} not supported " \
               f"(mesh_shapes {sorted(caps.mesh_shapes)})"
    return None


# ---------------------------------------------------------------------------------------------
# the built-in reference backend and loading
# ---------------------------------------------------------------------------------------------
#: The reference evaluator's message for each run-time check (it raises one class,
#: ``EvaluationError``, for every check and for malformed inputs; these are the messages of
#: exactly the run-time checks of ``RUN_TIME_CHECKS``, anchored at the op or function name).
_CHECK_MESSAGES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (check, re.compile(pat)) for check, pat in (
        ("index_range", r"Gather: index value -?\d+ at indices position \(.*\) is out of range "
                        r"for axis \d+ of extent \d+ "),
        ("index_range", r"Gather: index -?\d+ at indices\[.*\] is outside \[0, \d+\) on axis "
                        r"\d+$"),
        ("index_range", r"RoPE: pos_ids\[\d+\] = -?\d+ is outside the cache positions "
                        r"\[0, \d+\) "),
        ("cache_bounds", r"CacheUpdate: (cur_pos = -?\d+ is negative \(the spec: cur_pos >= 0\)"
                         r"|s = -?\d+ is outside \[1, new\.len = \d+\] "
                         r"|cur_pos \+ s = -?\d+ \+ -?\d+ = -?\d+ exceeds cache\.len = \d+ )"),
        ("slice_window", r"InsertSlice: axis \d+: offset -?\d+ places the window \[-?\d+, "
                         r"-?\d+\) of the update extent \d+ outside the dst extent \d+ "),
        ("sort_nan", r"Sort: x holds \d+ NaN value\(s\) \(first at \[.*\]\) and "
                     r"nan='error'; "),
        ("topk_nan", r"CustomReduce: (x|seed values) holds \d+ NaN value\(s\) \(first at "
                     r"\[.*\]\) and nan='error'; "),
        ("dispatch_envelope", r"dispatch of @[\w.]+( on argument shapes \[.*\])?: "
                              r"(Call @[\w.]+: )?\w+ = -?\d+ is outside the dispatch envelope "
                              r"\[-?\d+, -?\d+\)"),
        ("dispatch_envelope", r"@[\w.]+ parameter \w+: axis \d+ has extent \d+, outside the "
                              r"envelope of \w+ \[-?\d+, -?\d+\)$"),
    ))


def reference_check(e: BaseException) -> str | None:
    """The run-time check (a ``RUN_TIME_CHECKS`` name) a reference evaluator error reports;
    None for any other exception (malformed inputs, an unimplemented op, a harness bug)."""
    from tilefoundry.semantics.evaluator.registry import EvaluationError

    if not isinstance(e, EvaluationError):
        return None
    msg = str(e)
    for check, pat in _CHECK_MESSAGES:
        if pat.match(msg):
            return check
    return None


class ReferenceBackend:
    """The reference evaluator as a backend: the runner's self-check. It raises
    ``RunTimeCheckError`` (naming the check) for exactly the evaluator's run-time check errors
    (``reference_check``); every other evaluator error propagates unchanged."""

    name = "reference"

    def capabilities(self) -> Capabilities:
        return Capabilities.everything(dtypes=frozenset(d for d in DType
                                                        if d is not DType.F4E2M1), mesh=True)

    def compile(self, module: Module, entry: str) -> Any:
        return (module, entry)

    def run(self, compiled: Any, inputs: list[np.ndarray]) -> Any:
        from tilefoundry.semantics.evaluator.core import evaluate
        from tilefoundry.semantics.evaluator.registry import EvaluationError

        module, entry = compiled
        try:
            return evaluate(module, entry, inputs)
        except EvaluationError as e:
            check = reference_check(e)
            if check is None:
                raise
            raise RunTimeCheckError(str(e), check) from e


BUILTIN: dict[str, str] = {
    "reference": "tilefoundry.conformance.backend:ReferenceBackend",
    "torch": "tilefoundry.conformance.torch_backend:TorchBackend",
    "torch-cuda": "tilefoundry.conformance.torch_backend:cuda",
    "inductor": "tilefoundry.conformance.inductor_backend:InductorBackend",
    "kernel-interp": "tilefoundry.compiler.backends:KernelInterpBackend",
    "simd": "tilefoundry.compiler.simd_backend:SimdBackend",
    "triton": "tilefoundry.compiler.triton_backend:TritonBackend",
    "cuda": "tilefoundry.compiler.cuda_backend:CudaBackend",
    # the CUDA backend's source run on the host (a test harness: no GPU needed, D212)
    "cuda-host": "tilefoundry.compiler.cuda_backend:host_backend",
    "distributed": "tilefoundry.conformance.distributed_backend:DistributedBackend",
}


def load_backend(spec: str) -> Backend:
    """``package.module:factory``, ``path/to/file.py:factory``, a built-in name, or a
    ``tilefoundry.backends`` entry point."""
    if not isinstance(spec, str) or not spec:
        raise InvalidArgumentError(f"--backend: expected 'package.module:factory' or a name, "
                                   f"got {spec!r}")
    target = BUILTIN.get(spec)
    if target is None and ":" not in spec:
        from importlib.metadata import entry_points

        group = list(entry_points(group="tilefoundry.backends"))
        eps = [ep for ep in group if ep.name == spec]
        if not eps:
            from tilefoundry.conformance.input_checks import closest_names

            near = closest_names(spec, [*BUILTIN, *(ep.name for ep in group)])
            if near:
                raise InvalidArgumentError(
                    f"--backend {spec!r}: no backend of that name; did you mean "
                    f"{' or '.join(repr(n) for n in near)}? (built-ins: "
                    f"{', '.join(sorted(BUILTIN))}; or 'package.module:factory')")
            raise InvalidArgumentError(
                f"--backend {spec!r}: not a built-in ({sorted(BUILTIN)}), not an entry point "
                f"of group 'tilefoundry.backends', and not 'package.module:factory'")
        factory = eps[0].load()
    else:  # 'package.module:factory' or 'path/to/file.py:factory' (tilefoundry.loading)
        from tilefoundry.loading import load_object

        factory = load_object(target or spec, "--backend")
        if not callable(factory):
            raise InvalidArgumentError(f"--backend {spec!r}: {type(factory).__name__} is not "
                                       f"callable (name a factory returning a backend)")
    backend = factory()
    for what in ("name", "capabilities", "compile", "run"):
        if not hasattr(backend, what):
            raise InvalidArgumentError(f"--backend {spec!r}: the object the factory returned "
                                       f"has no {what!r} (see conformance/backend.py for the "
                                       f"protocol)")
    return backend
