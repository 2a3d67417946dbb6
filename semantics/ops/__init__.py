"""HIR op classes, one file per family as the spec organizes them (math, tensor, nn, shape,
sharding), plus the ``tile`` family that extends the HIR catalog with ops of the Tile design
(``tile_select.py``: Select, Bitcast; ``tile_scan.py``: Scan; ``tile_sort.py``: Sort;
``tile_mma.py``: Mma; ``tile_reduce.py``: SeededReduce, MaskedReduce, CustomReduce). Ops hold
attributes; inputs are the Call's args in the order of ``INPUTS``. Surface aliases (add,
cmp_eq, minimum, ...) map to kinded ops in ``ALIASES``; there are no per-name IR classes."""

from __future__ import annotations

from tilefoundry.semantics.ir import Op
from tilefoundry.semantics.ops.math import ALIASES as _MATH_ALIASES
from tilefoundry.semantics.ops.math import (
    BINARY_PROPERTIES,
    UNARY_PROPERTIES,
    Binary,
    BinaryKind,
    Unary,
    UnaryKind,
)
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
from tilefoundry.semantics.ops.tile_reduce import CustomReduce, MaskedReduce, SeededReduce
from tilefoundry.semantics.ops.tile_scan import Scan
from tilefoundry.semantics.ops.tile_scan_flags import MaskedScan, SegmentedScan
from tilefoundry.semantics.ops.tile_select import Bitcast, Select
from tilefoundry.semantics.ops.tile_sort import Sort

ALIASES = dict(_MATH_ALIASES)

#: Every op class of the catalog; registries are checked for completeness against this.
ALL_OPS: tuple[type[Op], ...] = (
    Binary, Unary,
    Reshape, Cast, Gather, Zeros, Reduce, InsertSlice, CacheUpdate, TopK, Transpose, Slice,
    Concat, Stack, ShapeOf, Rank,
    MatMul, Conv2D, ReLU, Sigmoid, Tanh, SoftMax, LayerNorm, Gelu, Silu, RMSNorm, RoPE,
    ShapeExtract, ShapeCompose,
    Reshard, Local,
    # the tile family (extensions of the HIR catalog, from the Tile design)
    Select, Bitcast, Scan, Sort, Mma, SeededReduce, MaskedReduce, CustomReduce,
    MaskedScan, SegmentedScan,
)

__all__ = [
    "ALIASES",
    "ALL_OPS",
    "BINARY_PROPERTIES",
    "UNARY_PROPERTIES",
    "Binary",
    "BinaryKind",
    "Bitcast",
    "CacheUpdate",
    "Cast",
    "Concat",
    "Conv2D",
    "CustomReduce",
    "Gather",
    "Gelu",
    "InsertSlice",
    "LayerNorm",
    "Local",
    "MaskedReduce",
    "MaskedScan",
    "MatMul",
    "Mma",
    "RMSNorm",
    "Rank",
    "ReLU",
    "Reduce",
    "ReduceKind",
    "Reshape",
    "Reshard",
    "RoPE",
    "Scan",
    "SeededReduce",
    "SegmentedScan",
    "Select",
    "ShapeCompose",
    "ShapeExtract",
    "ShapeOf",
    "Sigmoid",
    "Silu",
    "Slice",
    "SoftMax",
    "Sort",
    "Stack",
    "Tanh",
    "TopK",
    "Transpose",
    "Unary",
    "UnaryKind",
    "Zeros",
]
