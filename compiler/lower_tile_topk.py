"""Lowering of ``CustomReduce`` with the Top-K merge reducer (``TopKMerge``; D488): the region
form of the Tile design, literally —

    best = identity_K
    for each valid seed slot s:  best = topk_insert(best, s)     (the seed, included once)
    for i along the axis:        best = topk_insert(best, (x[i], i))

one kernel whose tile loop along the reduced axis (one element per step) carries the K slots
(values widened exactly to f32, or to i64 for integers and bool; indices i64; a slot is valid
iff its index is >= 0). ``topk_insert`` is a sorted insertion network of K compare-and-select
steps under the total order (NaN placement, value with -0 == +0, index ascending); a candidate
enters only by strictly preceding a slot, so a full tie keeps the earlier (the seed's) candidate,
as the reference does. Every slot starts as identity_K and the seed's slots are inserted one by
one, so an unsorted seed state lowers to the same result as the reference's sort of it.

A strict fold is one tree of every policy, and merge_K is exactly associative and commutative, so
this is the result every policy admits. ``nan='error'`` is the run-time check ``topk_nan``
(``lower.plan_checks``: x and the seed's values, on the host for inputs and constants, by a
probe kernel for computed ones); the fold itself then orders as ``nan='last'``.
"""

from __future__ import annotations

from tilefoundry.compiler import kir
from tilefoundry.compiler.errors import NotSupportedError
from tilefoundry.compiler.kir import Buffer
from tilefoundry.compiler.lower import KB, RunCheck, _Lowerer, _spread, bcast_strides, plan_check
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.topk_reducer import TopKMerge

__all__ = ["lower_topk_reduce", "state_operand", "topk_nan_checks"]


def state_operand(op: object, i: int, a: object) -> bool:
    """The one tuple operand a lowering rule takes (``lower._Lowerer.node``): a CustomReduce's
    Top-K state seed ``(values, indices)``, a pair of buffers."""
    return (i == 1 and isinstance(getattr(op, "reducer", None), TopKMerge) and
            isinstance(a, tuple) and all(isinstance(b, Buffer) for b in a))


def topk_nan_checks(lw: _Lowerer, node: Call, args: list) -> None:
    """``nan='error'``: the run-time check ``topk_nan`` on x, then on the seed's values (on the
    host for inputs and constants, by a probe kernel for computed ones; ``lower.plan_check``)."""
    r = getattr(node.op, "reducer", None)
    if not (isinstance(r, TopKMerge) and r.nan == "error" and kir.is_float(args[0].dtype)):
        return
    for b, what in ((args[0], "x"), (args[1][0], "seed values")):
        if b.size:
            plan_check(lw, RunCheck("topk_nan", "CustomReduce", "nan", (b.name,), (), what,
                                    shape=b.shape))


def _carry_dtype(dt: str) -> str:
    return "f32" if kir.is_float(dt) else "i64"


def _to_carry(kb: KB, v: str, dt: str) -> str:
    if kir.is_float(dt):
        return kb.widen(v, dt, "f32")
    return v if dt == "i64" else kb.cast(v, "i64")


def _from_carry(kb: KB, v: str, dt: str) -> str:
    if kir.is_float(dt):
        return kb.round(v, "f32", dt)
    return v if dt == "i64" else kb.cast(v, dt)


def _precedes(kb: KB, r: TopKMerge, flt: bool, cv: str, ci: str, cok: str, sv: str,
              si: str) -> str:
    """Candidate (cv, ci), valid where ``cok``, strictly precedes slot (sv, si)."""
    zero = kb.const(0, "i64")
    s_ok = kb.binop("ge", si, zero)
    better = kb.binop("gt" if r.largest else "lt", cv, sv)
    earlier = kb.binop("lt", ci, si)
    if flt:
        cn, sn = kb.binop("ne", cv, cv), kb.binop("ne", sv, sv)
        tie = kb.binop("or", kb.binop("eq", cv, sv), kb.binop("and", cn, sn))
        same_class = kb.binop("eq", cn, sn)
        by_key = kb.binop("and", same_class,
                          kb.binop("or", better, kb.binop("and", tie, earlier)))
        # NaN placement: last -> a number precedes a NaN; first -> a NaN precedes a number
        a, b = (sn, cn) if r.nan != "first" else (cn, sn)
        by_nan = kb.binop("and", a, kb.unop("not", b))
        key = kb.binop("or", by_nan, by_key)
    else:
        key = kb.binop("or", better, kb.binop("and", kb.binop("eq", cv, sv), earlier))
    return kb.binop("and", cok, kb.binop("or", kb.unop("not", s_ok), key))


def _insert(kb: KB, r: TopKMerge, flt: bool, vals: list[str], idxs: list[str], cv: str,
            ci: str, cok: str) -> tuple[list[str], list[str]]:
    """topk_insert: the sorted state with the candidate inserted, the last slot dropped."""
    b = [_precedes(kb, r, flt, cv, ci, cok, v, i) for v, i in zip(vals, idxs, strict=True)]
    nv, ni = [], []
    for j in range(r.k):
        if j == 0:
            nv.append(kb.select(b[0], cv, vals[0]))
            ni.append(kb.select(b[0], ci, idxs[0]))
        else:  # b is monotone: where b[j - 1] holds the candidate sits above, shift down
            nv.append(kb.select(b[j], kb.select(b[j - 1], vals[j - 1], cv), vals[j]))
            ni.append(kb.select(b[j], kb.select(b[j - 1], idxs[j - 1], ci), idxs[j]))
    return nv, ni


def lower_topk_reduce(lw: _Lowerer, node: Call, x: Buffer, seed: tuple) -> tuple[Buffer, Buffer]:
    op = node.op
    r: TopKMerge = op.reducer
    if not (isinstance(seed, tuple) and len(seed) == 2 and
            all(isinstance(b, Buffer) for b in seed)):
        raise NotSupportedError("CustomReduce", "the Top-K merge seed is not a (values, "
                                "indices) pair of buffers")
    sv_b, si_b = seed
    vt, it = node.checked_type.fields
    dt = x.dtype
    vals_out, idx_out = lw.temp(dt, vt.shape), lw.temp("i64", it.shape)
    if vals_out.size == 0:
        return vals_out, idx_out
    a = op.axes[0] % len(x.shape)
    n = x.shape[a]
    dom = tuple(x.shape) if n else tuple(1 if d == a else e for d, e in enumerate(x.shape))
    axes = (a,)
    flt = kir.is_float(dt)
    cd = _carry_dtype(dt)
    kb = KB(lw, "custom_topk_merge", dom)
    batch_axes = [d for d in range(len(dom)) if d != a]

    def spread(b: Buffer) -> tuple[int, ...]:
        s = _spread(b.strides[:-1], dom, axes, op.keepdim)
        return tuple(0 if d == a else st for d, st in enumerate(s))

    o_str, s_str = spread(vals_out), spread(sv_b)
    vals = [kb.broadcast(kb.const(0, cd), batch_axes) for _ in range(r.k)]
    idxs = [kb.broadcast(kb.const(-1, "i64"), batch_axes) for _ in range(r.k)]
    zero = kb.const(0, "i64")
    for j in range(r.k):  # the seed, included once: its valid slots inserted in slot order
        v = _to_carry(kb, kb.load(sv_b, s_str, offset=j * sv_b.strides[-1]), dt)
        i = kb.load(si_b, s_str, offset=j * si_b.strides[-1])
        vals, idxs = _insert(kb, r, flt, vals, idxs, v, i, kb.binop("ge", i, zero))
    if n:
        x_strides = bcast_strides(x, dom)
        looped = dom[a] > 1
        true = kb.binop("eq", zero, zero)

        def step(carried: list[str]) -> list[str]:
            v = _to_carry(kb, kb.load(x, x_strides), dt)
            i = kb.coord(a)
            if looped:  # one lane per step: drop the loop axis (a fold of one lane is the lane)
                v = kb.reduce(v, axes, "sum", "fold_left", None, None)
                i = kb.reduce(i, axes, "sum", "fold_left", None, None)
            nv, ni = _insert(kb, r, flt, carried[:r.k], carried[r.k:], v, i, true)
            return [*nv, *ni]

        state = [*vals, *idxs]
        final = kb.loop(a, 1, state, lambda *c: step(list(c))) if looped else step(state)
        vals, idxs = final[:r.k], final[r.k:]
    for j in range(r.k):
        kb.store(vals_out, o_str, _from_carry(kb, vals[j], dt), offset=j * vals_out.strides[-1])
        kb.store(idx_out, o_str if idx_out.strides == vals_out.strides else spread(idx_out),
                 idxs[j], offset=j * idx_out.strides[-1])
    kb.finish()
    return vals_out, idx_out
