"""Capability restriction (split from ``oracle/programs.py``, D384; the package mirrors
``semantics/ops``).

``capability_limit``: the op classes, kinds, dtypes, policies, overflow modes and mesh a backend
declaring a capability set admits, read from the builders' own dtype rules so that nothing is
restated.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from tilefoundry.errors import TilefoundryError
from tilefoundry.oracle.generator.base import BUILDERS
from tilefoundry.oracle.generator.config import _SHARDED_DTYPES, BOOL, _Limit
from tilefoundry.oracle.generator.engine import _binary_dtype_ok
from tilefoundry.oracle.generator.math import _unary_ok
from tilefoundry.oracle.generator.tensor import _CAST_TARGETS, _reduce_kinds
from tilefoundry.semantics.dtypes import OVERFLOW_MODES
from tilefoundry.semantics.formats import FORMATS, DType
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Cast,
    Local,
    Reduce,
    ReduceKind,
    Reshard,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.reductions import POLICIES

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
