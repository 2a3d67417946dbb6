"""What ``compile`` may be told about the inputs: ``InputSpec`` (docs/backend-authors.md, D310).

A real compiler specialises on the input shapes and dtypes (torch.compile traces for them,
the tile compiler picks tile sizes for them). The protocol's ``compile(module, entry)`` does
not see the inputs, so such a backend did its work in the first ``run`` — the case's time, but
booked in the wrong phase (a compile error reported as a run error, a compile that hangs
reported as a hung run), and for shape-polymorphic entries (a DimVar in a parameter shape)
the only place it could.

A backend whose ``compile`` has a parameter named ``input_specs`` now receives them::

    def compile(self, module, entry, input_specs=()):   # or a keyword-only parameter
        ...

``input_specs`` is a tuple of ``InputSpec``, one per entry parameter in order, describing
exactly the values ``run`` will receive for this case. A ``compile(module, entry)`` without
that parameter is called as before (backwards compatible; ``**kwargs`` alone does not opt in,
so a wrapper that forwards ``**kwargs`` to an older inner backend keeps working). The specs
are a promise about this case only: the runner calls ``compile`` once per case, and the
reducer's and the reproducer's re-runs call it again with the specs of their inputs.

``InputSpec`` fields:

* ``name``: the parameter's name;
* ``kind``: ``"array"`` (a numpy array), ``"scalar"`` (a rank-0 array), ``"sharded"`` (the
  parameter's type carries a ``ShardLayout``: the value is a global numpy array the backend
  distributes, or a ``Sharded`` value of that layout) or ``"tuple"`` (a tuple-typed
  parameter: ``fields`` holds one spec per element; ``shape`` is ``()`` and ``dtype`` None);
* ``shape``: the value's (global) shape, concrete even where the parameter's declared shape
  has a DimVar;
* ``dtype``: the IR ``DType`` (the parameter's declared dtype);
* ``storage``: the numpy storage dtype of the array (ml_dtypes types for bf16 / fp8 / e8m0),
  None for a ``Sharded`` value or a tuple;
* ``layout``: the parameter's ``ShardLayout`` (mesh, split / broadcast / partial attributes),
  None when it is not sharded;
* ``fields``: a tuple parameter's element specs.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilefoundry.semantics.formats import DType, dtype_of

__all__ = ["INPUT_KINDS", "InputSpec", "accepts_input_specs", "compile_for", "input_specs"]

INPUT_KINDS = ("array", "scalar", "sharded", "tuple")


@dataclass(frozen=True)
class InputSpec:
    """One entry input as ``compile`` is told about it (see the module docstring)."""

    name: str
    kind: str
    shape: tuple[int, ...]
    dtype: DType | None
    storage: np.dtype | None = None
    layout: Any = None  # a ShardLayout, for kind "sharded"
    fields: tuple[InputSpec, ...] = ()

    @property
    def scalar(self) -> bool:
        return self.kind == "scalar"


def _spec(name: str, declared: Any, value: Any) -> InputSpec:
    from tilefoundry.semantics.evaluator.core import shape_of
    from tilefoundry.semantics.types import TensorType, TupleType

    if isinstance(declared, TupleType) or (declared is None and isinstance(value, tuple | list)):
        vals = list(value) if isinstance(value, tuple | list) else []
        decl = list(declared.fields) if isinstance(declared, TupleType) else [None] * len(vals)
        return InputSpec(name, "tuple", (), None, None, None,
                         tuple(_spec(f"{name}[{i}]", d, v)
                               for i, (d, v) in enumerate(zip(decl, vals, strict=False))))
    shape = tuple(int(n) for n in shape_of(value))
    storage = np.asarray(value).dtype if isinstance(value, np.ndarray | np.generic) else None
    if isinstance(declared, TensorType):
        dt = declared.dtype
        layout = declared.shard
    else:
        dt = dtype_of(value) if storage is not None else None
        layout = None
    kind = "sharded" if layout is not None else "scalar" if shape == () else "array"
    return InputSpec(name, kind, shape, dt, storage, layout)


def input_specs(module: Any, entry: str, inputs: list) -> tuple[InputSpec, ...]:
    """The specs of ``inputs`` for ``module[entry]`` (one per parameter, in order)."""
    fn = next((f for f in module.functions if f.name == entry), None)
    params = list(fn.params) if fn is not None else []
    out = []
    for i, x in enumerate(inputs):
        p = params[i] if i < len(params) else None
        declared = None if p is None else (p.checked_type if p.has_type else p.type)
        out.append(_spec(p.name if p is not None else f"arg{i}", declared, x))
    return tuple(out)


def accepts_input_specs(backend: Any) -> bool:
    """Whether ``backend.compile`` has a parameter named ``input_specs`` (positional-or-
    keyword or keyword-only)."""
    try:
        params = inspect.signature(backend.compile).parameters
    except (TypeError, ValueError, AttributeError):
        return False
    p = params.get("input_specs")
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def compile_for(backend: Any, module: Any, entry: str, inputs: list) -> Any:
    """``backend.compile(module, entry)``, with ``input_specs=`` of ``inputs`` when the backend
    takes them: how the runner, its reducer and the reproducers call ``compile``."""
    if accepts_input_specs(backend):
        return backend.compile(module, entry, input_specs=input_specs(module, entry, inputs))
    return backend.compile(module, entry)
