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

import importlib
import re
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tilefoundry.errors import RUN_TIME_CHECKS, InvalidArgumentError, RunTimeCheckError
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module

__all__ = [
    "ALL_OVERFLOW",
    "ALL_POLICIES",
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


@dataclass(frozen=True)
class Capabilities:
    """What a backend claims. ``ops`` holds op class names (``"Binary"``, ``"MatMul"``) or
    ``"Binary.add"``-style names for a single kind; ``None`` means every op."""

    ops: frozenset[str] | None = None
    dtypes: frozenset[DType] = field(default_factory=lambda: frozenset(DType))
    policies: frozenset[str] = ALL_POLICIES
    overflow_modes: frozenset[str] = ALL_OVERFLOW
    mesh: bool = False

    def to_json(self) -> dict:
        return {"ops": None if self.ops is None else sorted(self.ops),
                "dtypes": sorted(d.value for d in self.dtypes),
                "policies": sorted(self.policies), "overflow_modes": sorted(self.overflow_modes),
                "mesh": self.mesh}


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


def _closest(name: str, valid: frozenset[str]) -> str:
    import difflib

    low = {v.lower(): v for v in valid}
    hit = difflib.get_close_matches(name.lower(), list(low), n=1, cutoff=0.0)
    return low[hit[0]] if hit else sorted(valid)[0]


def capability_name_error(ops: Any, dtypes: Any) -> str | None:
    """The first op or dtype name of ``ops`` / ``dtypes`` that names nothing, as ``"unknown op
    'Binray' (closest valid name: 'Binary')"`` (None: every name is known). ``dtypes`` may hold
    DType members or their names (``"bf16"``)."""
    if ops is not None:
        valid = known_op_names()
        for o in sorted(str(x) for x in ops):
            if o not in valid:
                return f"unknown op {o!r} (closest valid name: {_closest(o, valid)!r})"
    names = frozenset(d.value for d in DType)
    for d in sorted(str(x) for x in dtypes if not isinstance(x, DType)):
        if d not in names:
            return f"unknown dtype {d!r} (closest valid name: {_closest(d, names)!r})"
    return None


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


def requirements(module: Module) -> Requirements:
    """Every op, dtype, reduction policy, overflow mode and mesh use of ``module``."""
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.semantics.typeinfer.functions import infer_module
    from tilefoundry.semantics.types import TensorType, TupleType

    m = infer_module(module, Session())
    ops: set[str] = set()
    dts: set[DType] = set()
    pols: set[str] = set()
    ovf: set[str] = set()
    mesh = False

    def see_type(t: Any) -> None:
        nonlocal mesh
        if isinstance(t, TensorType):
            dts.add(t.dtype)
            mesh = mesh or t.shard is not None
        elif isinstance(t, TupleType):
            for f in t.fields:
                see_type(f)

    from tilefoundry.oracle.reduce import nodes

    fns: list[Function] = []
    for f in m.functions:
        fns.append(f)
        fns.extend(f.variants)
    for f in fns:
        for p in f.params:
            see_type(p.type)
        if f.body is None:
            continue
        stack = [f.body]
        seen: set[int] = set()
        while stack:
            root = stack.pop()
            for n in nodes(root):
                if id(n) in seen:
                    continue
                seen.add(id(n))
                if n.has_type:
                    see_type(n.checked_type)
                if isinstance(n, Call) and not isinstance(n.op, Function):
                    name = type(n.op).__name__
                    ops.add(name)
                    kind = getattr(n.op, "kind", None)
                    if hasattr(kind, "value"):
                        ops.add(f"{name}.{kind.value}")
                    if getattr(n.op, "policy", None):
                        pols.add(n.op.policy)
                    if getattr(n.op, "overflow", None):
                        ovf.add(n.op.overflow)
                    if getattr(n.op, "dtype", None) is not None:
                        dts.add(n.op.dtype)
                from tilefoundry.semantics.ir import GridRegionExpr

                if isinstance(n, GridRegionExpr):
                    stack.extend(n.yield_values)
    return Requirements(frozenset(ops), frozenset(dts), frozenset(pols), frozenset(ovf), mesh)


def unsupported_reason(caps: Capabilities, req: Requirements) -> str | None:
    """Why a backend with ``caps`` cannot run a program needing ``req`` (None: it can)."""
    if caps.ops is not None:
        kinds = {o.split(".")[0] for o in req.ops if "." in o}
        missing = sorted(o for o in req.ops
                         if ("." in o and o not in caps.ops and o.split(".")[0] not in caps.ops)
                         or ("." not in o and o not in kinds and o not in caps.ops))
        if missing:
            return f"op(s) {missing} not in the backend's capabilities"
    if req.dtypes - caps.dtypes:
        return f"dtype(s) {sorted(d.value for d in req.dtypes - caps.dtypes)} not supported"
    if req.policies - caps.policies:
        return f"reduction policy(ies) {sorted(req.policies - caps.policies)} not supported"
    if req.overflow_modes - caps.overflow_modes:
        return f"overflow mode(s) {sorted(req.overflow_modes - caps.overflow_modes)} not " \
               f"supported"
    if req.mesh and not caps.mesh:
        return "sharded programs (mesh simulation) not supported"
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
        return Capabilities(ops=None, dtypes=frozenset(d for d in DType
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
    "kernel-interp": "tilefoundry.compiler.backends:KernelInterpBackend",
    "simd": "tilefoundry.compiler.simd_backend:SimdBackend",
    "triton": "tilefoundry.compiler.triton_backend:TritonBackend",
    "distributed": "tilefoundry.conformance.distributed_backend:DistributedBackend",
}


def load_backend(spec: str) -> Backend:
    """``package.module:factory``, a built-in name, or a ``tilefoundry.backends`` entry point."""
    if not isinstance(spec, str) or not spec:
        raise InvalidArgumentError(f"--backend: expected 'package.module:factory' or a name, "
                                   f"got {spec!r}")
    target = BUILTIN.get(spec)
    if target is None and ":" not in spec:
        from importlib.metadata import entry_points

        eps = [ep for ep in entry_points(group="tilefoundry.backends") if ep.name == spec]
        if not eps:
            raise InvalidArgumentError(
                f"--backend {spec!r}: not a built-in ({sorted(BUILTIN)}), not an entry point "
                f"of group 'tilefoundry.backends', and not 'package.module:factory'")
        factory = eps[0].load()
    else:
        mod_name, _, attr = (target or spec).partition(":")
        try:
            mod = importlib.import_module(mod_name)
        except ImportError as e:
            raise InvalidArgumentError(f"--backend {spec!r}: cannot import {mod_name!r}: {e}") \
                from None
        factory = getattr(mod, attr, None)
        if factory is None:
            raise InvalidArgumentError(f"--backend {spec!r}: module {mod_name!r} has no "
                                       f"attribute {attr!r}")
    backend = factory()
    for what in ("name", "capabilities", "compile", "run"):
        if not hasattr(backend, what):
            raise InvalidArgumentError(f"--backend {spec!r}: the object the factory returned "
                                       f"has no {what!r} (see conformance/backend.py for the "
                                       f"protocol)")
    return backend
