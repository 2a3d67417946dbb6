"""tilefoundry.semantics.dsl: the authoring surface — write HIR as Python.

``@func`` parses a Python function's source into a HIR ``Function`` (the body is never run);
``@f.specialize(DimVarRangePat(...))`` adds shape-dispatch variants to a prototype written
``pass``; ``module(...)`` builds the sealed ``Module``; ``to_source(module)`` prints a Module back
as DSL source and ``parse_module(source, env)`` reads it. See docs/dsl.md.
"""

from __future__ import annotations

import builtins

from tilefoundry.semantics.declared_reducers import declare_reducer as Reducer
from tilefoundry.semantics.dsl.errors import DSLError
from tilefoundry.semantics.dsl.frontend import DSLFunction, func, module, parse_module
from tilefoundry.semantics.dsl.source import to_source
from tilefoundry.semantics.dsl.surface import (
    DTYPE_NAMES,
    FAMILIES,
    INTRINSICS,
    SPELLINGS,
    STORAGE_NAMES,
    Tensor,
    Tuple,
)
from tilefoundry.semantics.ir import DimVarRangePat, Target
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
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    Topology,
    TopologyLevel,
    dim_max,
    dim_min,
)

# the op spellings, tile / range / const / ... and the dtype names as module attributes, so that
# `from tilefoundry.semantics.dsl import *` makes DSL code read as Python, and the storage kinds
# rmem / smem / gmem. Names that are Python builtins (abs, round, slice, range, float, bool) are
# left out of `import *` so they do not shadow the builtins; inside @func bodies they are known.
globals().update(INTRINSICS)
globals().update({k: v for k, v in DTYPE_NAMES.items() if k != "bool"})
globals().update(STORAGE_NAMES)
nn = FAMILIES["nn"]

__all__ = [
    "Broadcast", "DSLError", "DSLFunction", "DimAdd", "DimFloorDiv", "DimMax", "DimMin",
    "DimMod", "DimMul", "DimSub", "DimVar", "DimVarRangePat", "Layout", "Mesh", "Partial",
    "Reducer", "SPELLINGS", "ShardLayout", "Split", "Target", "Tensor", "TopKMerge", "Topology",
    "TopologyLevel", "Tuple", "dim_max", "dim_min", "func", "module", "nn", "parse_module", "to_source",
    *sorted(k for k in INTRINSICS if not hasattr(builtins, k)),
    *sorted(k for k in DTYPE_NAMES if k != "bool"), *sorted(STORAGE_NAMES),
]
