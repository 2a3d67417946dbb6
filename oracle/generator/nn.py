"""Generator builders of the nn family (MatMul, Conv2D, the activations, SoftMax, the norms, RoPE)
(split from ``oracle/programs.py``, D384; the package mirrors ``semantics/ops``).

Each builder draws attributes and operands that satisfy the op's type rule, reusing pool values
where their types fit, and registers itself in ``base.BUILDERS``; see ``oracle/programs.py``'s
docstring.
"""

from __future__ import annotations

from collections.abc import Callable

from tilefoundry.oracle.generator.base import _builder
from tilefoundry.oracle.generator.config import BOOL, F8E8M0, F32
from tilefoundry.oracle.generator.engine import (
    _bshape,
    _eq,
    _Gen,
    _lo,
    _partials,
    _Scope,
    _split_axes,
    _table_ok,
    _Val,
)
from tilefoundry.oracle.strategies import (
    Source,
)
from tilefoundry.semantics.ir import (
    Op,
)
from tilefoundry.semantics.ops import (
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
from tilefoundry.semantics.types import (
    TensorType,
    simplify,
)


# ---- nn ---------------------------------------------------------------------------------------
def _float_x(g: _Gen, sc: _Scope, pred=None) -> _Val | None:
    return g.pick(g.tensors(sc, lambda v: v.type.dtype.is_float and (pred is None or pred(v))))


@_builder(MatMul)
def build_matmul(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    # not f8e8m0: the type rule accepts it but semantics.matmul has no f8e8m0 output (D146)
    a = g.pick(g.tensors(sc, lambda v: v.type.rank >= 2 and v.type.dtype not in (BOOL, F8E8M0)))
    if a is None or src.boolean(0.15):
        shape = (*((src.integer(1, 2),) if src.boolean(0.3) else ()), src.integer(1, 4),
                 src.integer(1, 4))
        dt = g.leaf_dtype("fi")
        a = g.leaf(sc, TensorType(shape, dt if dt is not F8E8M0 else F32))
        if a is None:
            return False
    at = a.type
    k = at.shape[-1]
    batch = tuple(at.shape[:-2])

    def fits(v: _Val) -> bool:
        t = v.type
        return t.dtype is at.dtype and t.rank >= 2 and _eq(t.shape[-2], k) and \
            _bshape(batch, tuple(t.shape[:-2]))

    b = g.pick(g.tensors(sc, fits)) if src.boolean(0.6) else None
    if b is None:
        j = src.integer(0, len(batch))
        bb = tuple(1 if src.boolean(0.3) else d for d in batch[j:])
        b = g.leaf(sc, TensorType((*bb, k, src.integer(1, 4)), at.dtype))
        if b is None:
            return False
    return g.apply(sc, MatMul(src.boolean(0.5)), [a, b]) is not None


@_builder(Conv2D)
def build_conv2d(g: _Gen, sc: _Scope) -> bool:
    src = g.src

    def ok(v: _Val) -> bool:
        t = v.type
        return t.rank == 4 and _lo(t.shape[2]) >= 1 and _lo(t.shape[3]) >= 1

    x = _float_x(g, sc, lambda v: ok(v) and v.type.dtype is not F8E8M0)
    if x is None or src.boolean(0.3):
        shape = (src.integer(1, 2), src.choice((1, 2, 4)), src.integer(2, 5), src.integer(2, 5))
        dt = g.leaf_dtype("f")
        x = g.leaf(sc, TensorType(shape, dt if dt is not F8E8M0 else F32))
        if x is None:
            return False
    xt = x.type
    c = simplify(xt.shape[1])
    groups = 1
    if isinstance(c, int) and src.boolean(0.3):
        groups = src.choice([d for d in range(1, c + 1) if c % d == 0])
    o = groups * src.integer(1, 2)
    stride = (src.integer(1, 2), src.integer(1, 2))
    padding = (src.integer(0, 1), src.integer(0, 1))
    dil = (src.integer(1, 2), src.integer(1, 2))
    ks = []
    for ax in (0, 1):
        room = _lo(xt.shape[2 + ax]) + 2 * padding[ax]
        kmax = min(3, (room - 1) // dil[ax] + 1)
        if kmax < 1:
            return False
        ks.append(src.integer(1, kmax))
    cg = c // groups if isinstance(c, int) else xt.shape[1]
    w = g.leaf(sc, TensorType((o, cg, ks[0], ks[1]), xt.dtype))
    bias = g.leaf(sc, TensorType((o,), xt.dtype))
    if w is None or bias is None:
        return False
    return g.apply(sc, Conv2D(stride, padding, dil, groups), [x, w, bias]) is not None


def _activation(cls: type, make: Callable[[Source], Op]) -> None:
    def build(g: _Gen, sc: _Scope) -> bool:
        x = _float_x(g, sc, lambda v: _table_ok(cls.__name__, "-", v.type))
        return x is not None and g.apply(sc, make(g.src), [x]) is not None
    build.__name__ = f"build_{cls.__name__.lower()}"
    _builder(cls)(build)


_activation(ReLU, lambda s: ReLU())


_activation(Sigmoid, lambda s: Sigmoid())


_activation(Tanh, lambda s: Tanh())


_activation(Silu, lambda s: Silu())


_activation(Gelu, lambda s: Gelu(s.choice(("tanh", "none"))))


@_builder(SoftMax)
def build_softmax(g: _Gen, sc: _Scope) -> bool:
    x = _float_x(g, sc, lambda v: v.type.rank >= 1 and not _partials(v.type) and
                 len(_split_axes(v.type)) < v.type.rank)
    if x is None:
        return False
    r = x.type.rank
    axis = g.src.choice([a for a in range(r) if a not in _split_axes(x.type)])
    return g.apply(sc, SoftMax(axis - r if g.src.boolean(0.3) else axis), [x]) is not None


def _affine(g: _Gen, sc: _Scope, x: _Val) -> _Val | None:
    last = x.type.shape[-1]
    fits = [v for v in g.tensors(sc, sharded=False) if v.type.rank == 1 and
            v.type.dtype is x.type.dtype and _eq(v.type.shape[0], last)]
    if fits and g.src.boolean(0.5):
        return g.src.choice(fits)
    return g.leaf(sc, TensorType((last,), x.type.dtype))


def _norm(cls: type, n_affine: int) -> None:
    def build(g: _Gen, sc: _Scope) -> bool:
        x = _float_x(g, sc, lambda v: v.type.rank >= 1 and not _partials(v.type) and
                     v.type.rank - 1 not in _split_axes(v.type))
        if x is None:
            return False
        aff = [_affine(g, sc, x) for _ in range(n_affine)]
        if any(a is None for a in aff):
            return False
        eps = g.src.choice((1e-5, 1e-6, 1e-3, 0.5))
        return g.apply(sc, cls(eps=eps), [x, *aff]) is not None
    build.__name__ = f"build_{cls.__name__.lower()}"
    _builder(cls)(build)


_norm(LayerNorm, 2)


_norm(RMSNorm, 1)


@_builder(RoPE)
def build_rope(g: _Gen, sc: _Scope) -> bool:
    src = g.src

    def ok(v: _Val) -> bool:
        d = simplify(v.type.shape[-1]) if v.type.rank >= 2 else 0
        return isinstance(d, int) and d > 0 and d % 2 == 0 and \
            not _split_axes(v.type) & {v.type.rank - 1, v.type.rank - 2}

    q = _float_x(g, sc, ok)
    if q is None or src.boolean(0.2):
        shape = (*((src.integer(1, 2),) if src.boolean(0.5) else ()), src.integer(1, 4),
                 src.choice((2, 4)))
        q = g.leaf(sc, TensorType(shape, g.leaf_dtype("f")))
        if q is None:
            return False
    qt = q.type
    s, d = qt.shape[-2], qt.shape[-1]

    def k_ok(v: _Val) -> bool:
        t = v.type
        return t.dtype is qt.dtype and t.rank >= 2 and _eq(t.shape[-1], d) and \
            _eq(t.shape[-2], s)

    r = src.integer(0, 2)
    k = q if r == 0 else g.pick(g.tensors(sc, k_ok)) if r == 1 else None
    if k is None:
        lead = (src.integer(1, 2),) if src.boolean(0.5) else ()
        k = g.leaf(sc, TensorType((*lead, s, d), qt.dtype))
        if k is None:
            return False
    p = src.integer(1, 5)
    cos = g.leaf(sc, TensorType((p, d), qt.dtype))
    sin = cos if src.boolean(0.2) else g.leaf(sc, TensorType((p, d), qt.dtype))
    pos = g.index_leaf(sc, (s,), 0, p - 1)
    if cos is None or sin is None or pos is None:
        return False
    return g.apply(sc, RoPE(), [q, k, cos, sin, pos]) is not None
