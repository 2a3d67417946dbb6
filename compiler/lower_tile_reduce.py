"""Lowering rules of the ``tile`` family's reductions (registered into ``lower.LOWERINGS``).

* **SeededReduce / MaskedReduce** lower to one kernel-IR ``Reduce`` whose ``init`` is the seed
  (loaded per output element, widened to f32 for low-precision floats) and whose lane mask is
  the user's mask and-ed with the tile's edge mask. The kernel IR already places ``init``
  where the policy says: the first state of fold_left, the last of fold_right (a reversed
  tile loop), combined once with the tree of the lanes for the tree policies
  (``merge(seed, tree)``) — never per lane or per tile partial. Masked-out lanes are skipped by
  the interpreter and padded by the SIMD renderer only with an exact identity of the f32
  operation (−0 for RNE addition, −inf for max, +inf for min; docs/decisions.md D234).
* **CustomReduce** lowers to a nested tile loop (one element per step) over the reduced axes
  carrying the state components, the merge spelled as kernel-IR BinOps and Selects from the
  reducer's declarative expressions — a strict left fold (fold_right: the loops reversed and
  ``merge(lift(x), state)``). A serial fold is a member of every tree policy's admitted set.
  With the Top-K merge reducer (a (values, indices) state pair) it lowers through
  ``lower_tile_topk``: the insertion-network fold of the design's region form.
"""

from __future__ import annotations

import math

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import Buffer, c_strides
from tilefoundry.compiler.lower import KB, _Lowerer, _spread, bcast_strides, out_type, register
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.ops.tile_reduce import CustomReduce, MaskedReduce, SeededReduce
from tilefoundry.semantics.reducers import reducer
from tilefoundry.semantics.topk_reducer import TopKMerge


def _axes(node: Call, x: Buffer) -> tuple[int, ...]:
    r = len(x.shape)
    return tuple(sorted({a % r for a in node.op.axes})) if r else ()


def _copy(lw: _Lowerer, hint: str, shape: tuple, src: Buffer) -> Buffer:
    return lw.elementwise(hint, src.dtype, shape, [src], lambda kb, v: v)


def _contiguous(lw: _Lowerer, b: Buffer) -> Buffer:
    return b if b.strides == c_strides(b.shape) else _copy(lw, "contiguous", b.shape, b)


@register(SeededReduce, MaskedReduce)
def _seeded(lw: _Lowerer, node: Call, args: list[Buffer]) -> Buffer:
    t = out_type(node)
    op = node.op
    x, seed = args[0], args[1]
    mask = args[2] if isinstance(op, MaskedReduce) else None
    dt = x.dtype
    axes = _axes(node, x)
    n = math.prod(x.shape[a] for a in axes)
    if math.prod(t.shape) == 0:
        return lw.temp(dt, t.shape)
    if n == 0:  # an empty fiber returns its seed
        return _copy(lw, "seeded_empty", tuple(t.shape), seed)
    flt = kir.is_float(dt)
    acc = "f32" if flt else dt
    keepdim = op.keepdim
    if not axes:  # every element a fiber of one: reduce a trailing axis of extent 1
        x = lw.alias(_contiguous(lw, x), (*x.shape, 1))
        if mask is not None:
            mask = lw.alias(_contiguous(lw, mask), (*mask.shape, 1))
        axes, keepdim = (len(x.shape) - 1,), False
    dom = tuple(x.shape)
    out = lw.temp(dt, t.shape)
    out_strides = tuple(0 if d in axes else s for d, s in
                        zip(range(len(dom)), _spread(out.strides, dom, axes, keepdim),
                            strict=True))
    seed_strides = tuple(0 if d in axes else s for d, s in
                         zip(range(len(dom)), _spread(seed.strides, dom, axes, keepdim),
                             strict=True))
    x_strides = bcast_strides(x, dom)

    def produce(kb: KB) -> tuple[str, str | None]:
        v = kb.load(x, x_strides)
        m = kb.edge(kb.f(v))
        if mask is not None:
            mv = kb.load(mask, bcast_strides(mask, dom))
            m = kb.and_masks(m, mv) if m is not None else mv
        return (kb.widen(v, dt, "f32") if flt else v), m

    def seed_fn(kb: KB) -> str:
        z = kb.load(seed, seed_strides)
        return kb.widen(z, dt, "f32") if flt else z

    def post(kb: KB, s: str) -> str:
        return kb.round(s, "f32", dt) if flt else s

    lw.reduce_kernel(f"seeded_{op.kind}", dom, axes, op.kind, op.policy, acc, produce,
                     post, out, out_strides, seed_fn)
    return out


# ---------------------------------------------------------------------------------------------
# CustomReduce: the reducer's merge as kernel-IR arithmetic
# ---------------------------------------------------------------------------------------------
#: the kernel-IR BinOps (max / min: NaN-propagating, -0 < +0, as the HIR Binary and D35)
_BIN = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max", "min": "min"}


def _expr(kb: KB, e: object, env: dict[str, str]) -> str:
    if isinstance(e, str):
        return env[e]
    if isinstance(e, float | int):
        return kb.const(float(e), "f32")
    head, *a = e
    if head == "ifzero":
        c, t, f = (_expr(kb, x, env) for x in a)
        return kb.select(kb.binop("eq", c, kb.const(0.0, "f32")), t, f)
    x, y = (_expr(kb, v, env) for v in a)
    return kb.binop(_BIN[head], x, y)


def _merge(kb: KB, r, a: list[str], b: list[str]) -> list[str]:
    env = {f"a.{c}": v for c, v in zip(r.state, a, strict=True)}
    env.update({f"b.{c}": v for c, v in zip(r.state, b, strict=True)})
    for name, e in r.lets:
        env[name] = _expr(kb, e, env)
    return [_expr(kb, e, env) for e in r.merge]


@register(CustomReduce)
def _custom(lw: _Lowerer, node: Call, args: list) -> Buffer | tuple[Buffer, Buffer]:
    op = node.op
    if isinstance(op.reducer, TopKMerge):  # the (values, indices) state: lower_tile_topk
        from tilefoundry.compiler.lower_tile_topk import lower_topk_reduce

        return lower_topk_reduce(lw, node, args[0], args[1])
    t = out_type(node)
    r = reducer(op.reducer)
    x, seed = args
    dt = x.dtype
    axes = _axes(node, x)
    S = len(r.state)
    out = lw.temp("f32", t.shape)
    if out.size == 0:
        return out
    dom = tuple(x.shape)
    red = [a for a in axes if dom[a] > 1]
    n = math.prod(dom[a] for a in axes)
    if n == 0:
        return _copy(lw, "custom_empty", tuple(t.shape), seed)
    kb = KB(lw, f"custom_{r.name}", dom)
    # out / seed are (reduced shape..., S): component j at offset j * stride of the last axis
    o_spread = _spread(out.strides[:-1], dom, axes, op.keepdim)
    s_spread = _spread(seed.strides[:-1], dom, axes, op.keepdim)
    o_str = tuple(0 if d in axes else s for d, s in enumerate(o_spread))
    s_str = tuple(0 if d in axes else s for d, s in enumerate(s_spread))
    state = [kb.load(seed, s_str, offset=j * seed.strides[-1]) for j in range(S)]
    state = [kb.broadcast(v, [d for d in range(len(dom)) if d not in axes]) for v in state]
    x_strides = bcast_strides(x, dom)
    right = op.policy == "fold_right"

    def step(carried: list[str]) -> list[str]:
        v = kb.load(x, x_strides)
        v = kb.widen(v, dt, "f32")
        if red:  # one lane per step: drop the loop axes (a fold of one lane is the lane)
            v = kb.reduce(v, tuple(red), "sum", "fold_left", None, None)
        lifted = [_expr(kb, e, {"x": v}) for e in r.lift]
        return _merge(kb, r, lifted, carried) if right else _merge(kb, r, carried, lifted)

    def nest(i: int, carried: list[str]) -> list[str]:
        if i == len(red):
            return step(carried)
        return kb.loop(red[i], 1, carried, lambda *c: nest(i + 1, list(c)), right)

    final = nest(0, state) if red else step(state)
    for j, v in enumerate(final):
        kb.store(out, o_str, v, offset=j * out.strides[-1])
    kb.finish()
    return out
