"""Generator builders of Mma (split from ``oracle/programs.py``, D384; the package mirrors
``semantics/ops``).

Each builder draws attributes and operands that satisfy the op's type rule, reusing pool values
where their types fit, and registers itself in ``base.BUILDERS``; see ``oracle/programs.py``'s
docstring.
"""

from __future__ import annotations

from tilefoundry.oracle.generator.base import _builder
from tilefoundry.oracle.generator.config import BF16, F16, F32
from tilefoundry.oracle.generator.engine import _eq, _Gen, _Scope
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_mma import Mma
from tilefoundry.semantics.types import (
    TensorType,
)

_MMA_INPUTS = (F32, F16, BF16, DType.FP8E4M3, DType.FP8E5M2)


@_builder(Mma)
def build_mma(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    a = g.pick(g.tensors(sc, lambda v: v.type.rank >= 2 and v.type.dtype in _MMA_INPUTS,
                         sharded=False))
    if a is None or src.boolean(0.15):
        shape = (*((src.integer(1, 2),) if src.boolean(0.3) else ()), src.integer(1, 4),
                 src.integer(1, 4))
        dt = g.leaf_dtype("f")
        a = g.leaf(sc, TensorType(shape, dt if dt in _MMA_INPUTS else F32))
        if a is None:
            return False
    at = a.type
    batch, m, k = tuple(at.shape[:-2]), at.shape[-2], at.shape[-1]

    def fits(t: TensorType, dt: DType, rows, cols=None) -> bool:
        return t.dtype is dt and t.rank == len(batch) + 2 and _eq(t.shape[-2], rows) and \
            (cols is None or _eq(t.shape[-1], cols)) and \
            all(_eq(x, y) for x, y in zip(t.shape[:-2], batch, strict=True))

    b = g.pick(g.tensors(sc, lambda v: fits(v.type, at.dtype, k), sharded=False)) \
        if src.boolean(0.5) else None
    if b is None:
        b = g.leaf(sc, TensorType((*batch, k, src.integer(1, 4)), at.dtype))
        if b is None:
            return False
    n = b.type.shape[-1]
    acc = g.pick(g.tensors(sc, lambda v: fits(v.type, F32, m, n), sharded=False)) \
        if src.boolean(0.5) else None
    if acc is None:
        acc = g.leaf(sc, TensorType((*batch, m, n), F32))
        if acc is None:
            return False
    return g.apply(sc, Mma(src.boolean(0.5)), [a, b, acc]) is not None
