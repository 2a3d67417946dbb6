"""The generator's structural steps (split from ``oracle/programs.py``, D384; the package mirrors
``semantics/ops``).

A ``GridRegionExpr`` loop (one to three carries, static or DimVar extent), a call to a new or an
existing Function, and a call to a dispatch prototype whose variants partition a DimVar's envelope.
"""

from __future__ import annotations

import itertools
from typing import Any

from tilefoundry.oracle.generator.bounds import clip as _clip
from tilefoundry.oracle.generator.bounds import mx as _mx
from tilefoundry.oracle.generator.config import BOOL, I32, I64
from tilefoundry.oracle.generator.engine import (
    _eq,
    _Gen,
    _partials,
    _Scope,
    _table_ok,
    _Val,
)
from tilefoundry.semantics.ir import (
    Call,
    DimVarRangePat,
    Expr,
    Function,
    GridRegionExpr,
    Op,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.types import (
    DimVar,
    TensorType,
    TupleType,
)


# =============================================================================================
# structural steps: loops, calls, dispatch
# =============================================================================================
def build_loop(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    if g.limit is not None and I32 not in g.limit.dtypes:
        return False  # an induction variable is i32 (or i64, when declared so)
    cands = g.tensors(sc)
    if not cands:
        return False
    inits = [src.choice(cands) for _ in range(src.integer(1, 3))]
    n = g.fresh()
    it_t = TensorType((), src.choice(g.only((I32, I32, I64))))
    iv = Var(f"i{n}", it_t if src.boolean(0.3) else None)
    if iv.type is None:
        it_t = TensorType((), I32)
    phis = [Var(f"c{n}_{k}", v.type if src.boolean(0.2) else None) for k, v in enumerate(inits)]
    dvs = sc.direct_dvs()
    start = src.integer(0, 1)
    step = src.choice((1, 1, 2))
    if dvs and src.boolean(0.4):
        dv = src.choice(dvs)
        extent: Any = dv
        last = dv.hi - 1
    else:
        extent = start + src.choice((2, 1, 3, 2, 0, 3))  # one loop in six runs zero times
        last = max(extent - 1, start)
    body = _Scope("loop", sc)
    phi_vals = [_Val(p, v.type, v.bound, v.domain) for p, v in zip(phis, inits, strict=True)]
    body.pool.extend(phi_vals)
    body.pool.append(_Val(iv, it_t, float(max(start, last)), (start, max(start, last))))
    g.grow(body, src.integer(1, 3), structure=False)
    yields: list[_Val] = []
    for phi, init in zip(phi_vals, inits, strict=True):
        # the body was built assuming each phi holds its init's bound and domain; a yield that
        # keeps them makes the assumption hold for every iteration (induction)
        same = [v for v in body.created if v.type == init.type and _within(v, init)]
        y = src.choice(same) if same and src.boolean(0.9) else None
        if y is None:  # an elementwise step of the phi itself keeps its exact type
            y = _same_type_step(g, body, phi, init)
        yields.append(y or phi)
    yexprs = tuple(y.expr for y in yields)
    node = GridRegionExpr(iv, tuple(phis), tuple(v.expr for v in inits),
                          yexprs[0] if len(yexprs) == 1 else Tuple(yexprs), yexprs, extent,
                          step, start)
    for v in inits:
        sc.used[id(v)] = v
    g.features.add("loop" if len(inits) == 1 else "multi_carry_loop")
    outs: list[_Val] = []
    for k, init in enumerate(inits):  # every yield is within its init's bound and domain
        e = node if len(inits) == 1 else TupleGetItem(node, k)
        outs.append(_Val(e, init.type, init.bound, init.domain))
    sc.pool.extend(outs)
    sc.created.extend(outs)
    return True


def _within(v: _Val, ref: _Val | None) -> bool:
    """``v`` keeps ``ref``'s known bound and integer domain (None: no constraint)."""
    if ref is None:
        return True
    if ref.bound is not None and (v.bound is None or v.bound > ref.bound):
        return False
    return ref.domain is None or (v.domain is not None and ref.domain[0] <= v.domain[0] and
                                  v.domain[1] <= ref.domain[1])


def _same_type_step(g: _Gen, sc: _Scope, v: _Val, keep: _Val | None) -> _Val | None:
    """An elementwise Unary / Binary step on ``v`` whose result has exactly ``v``'s type (a
    loop yield, a variant's result), or None; the result must stay ``_within(keep)``."""
    t = v.type
    if not v.evaluable:
        return None
    if t.dtype is BOOL:
        cands: list[Op] = [Unary(UnaryKind.LOGICAL_NOT), Binary(BinaryKind.XOR),
                           Binary(BinaryKind.OR)]
    else:
        kinds = [k for k in (UnaryKind.NEG, UnaryKind.ABS, UnaryKind.RELU, UnaryKind.CEIL)
                 if _table_ok("Unary", k.value, t)]
        cands = [Unary(k) for k in kinds]
        if not _partials(t):
            cands += [Binary(BinaryKind.MAX), Binary(BinaryKind.MIN)]
            if t.dtype.is_float:
                cands.append(Unary(UnaryKind.SQRT))
    if t.dtype is BOOL and _partials(t):
        return None
    if not cands:
        return None
    op = g.src.choice(cands)
    out = g.apply(sc, op, [v] if isinstance(op, Unary) else [v, v])
    if not out or out[0].type != t or not _within(out[0], keep):
        return None
    return out[0]


def _function_body(outs: list[_Val]) -> tuple[Expr, Any]:
    if len(outs) == 1:
        return outs[0].expr, outs[0].type
    return Tuple(tuple(v.expr for v in outs)), TupleType(tuple(v.type for v in outs))


def build_call(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    # reuse an existing callee when the pool holds arguments of exactly its parameter types
    if g.callees and src.boolean(0.35):
        fn, arg_bounds, outs = src.choice(g.callees)
        args = []
        for p in fn.params:
            fits = [v for v in g.tensors(sc, f4=True) if v.type == p.type]
            if not fits:
                break
            args.append(src.choice(fits))
        if len(args) == len(fn.params):
            same = all(b0 is not None and a.bound is not None and a.bound <= b0
                       for a, b0 in zip(args, arg_bounds, strict=True))
            if same or not g.cfg.sharded:  # sharded: only where the first call's bounds hold
                _emit_call(g, sc, fn, args, outs, same)
                g.features.add("shared_callee")
                return True
    cands = g.tensors(sc)
    if not cands:
        return False
    args = [src.choice(cands) for _ in range(src.integer(1, 3))]
    n = g.fresh()
    params = tuple(Var(f"a{k}", a.type) for k, a in enumerate(args))
    body = _Scope("callee", sc)
    body.pool = [_Val(p, a.type, a.bound, a.domain) for p, a in zip(params, args, strict=True)]
    body.params = list(params)
    body.depth = 1
    g.grow(body, src.integer(1, 4))  # loops inside; calls / dispatch only from the entry
    outs = g.outputs(body, cap=3)
    expr, t = _function_body(outs)
    ret = None
    if isinstance(t, TensorType) and src.boolean(0.3):
        ret = TensorType(t.shape, t.dtype)  # a layout-free declared return type
    fn = Function(f"fn{n}", params, expr, ret)
    g.functions.append(fn)
    g.callees.append((fn, [a.bound for a in args], outs))
    _emit_call(g, sc, fn, args, outs, True)
    g.features.add("call")
    return True


def _emit_call(g: _Gen, sc: _Scope, fn: Function, args: list[_Val], outs: list[_Val],
               exact: bool) -> None:
    """The Call and its results; ``outs`` are the callee's output values (types, Local flags;
    bounds only when ``exact``: the arguments' bounds are within the first call's)."""
    call = Call(fn, tuple(a.expr for a in args))
    for a in args:
        sc.used[id(a)] = a
    if isinstance(fn.body, Tuple):
        vals = [_Val(TupleGetItem(call, i), o.type, o.bound if exact else None, None, o.local)
                for i, o in enumerate(outs)]
    else:
        o = outs[0]
        vals = [_Val(call, o.type, o.bound if exact else None, None, o.local)]
    sc.pool.extend(vals)
    sc.created.extend(vals)


def build_dispatch(g: _Gen, sc: _Scope) -> bool:
    src = g.src
    cands = g.tensors(sc, lambda v: any(isinstance(d, DimVar) for d in v.type.shape),
                      sharded=False)
    if not cands:
        return False
    x = src.choice(cands)
    dv = src.choice([d for d in x.type.shape if isinstance(d, DimVar)])
    args = [x] + ([src.choice(g.tensors(sc, sharded=False))] if src.boolean(0.4) else [])
    n = g.fresh()
    name = f"disp{n}"
    params = tuple(Var(f"a{k}", a.type) for k, a in enumerate(args))
    j = src.integer(0, len(args) - 1)
    ret = TensorType(tuple(args[j].type.shape), args[j].type.dtype)
    n_var = src.integer(1, min(3, dv.hi - dv.lo))
    cuts = sorted({src.integer(dv.lo + 1, dv.hi - 1) for _ in range(n_var - 1)}) \
        if dv.hi - dv.lo > 1 else []
    bounds = [dv.lo, *cuts, dv.hi]
    variants = []
    out_bounds = []
    for lo, hi in itertools.pairwise(bounds):
        vparams = tuple(Var(p.name, p.type) for p in params)
        vs = _Scope("variant", sc)
        vs.pool = [_Val(p, a.type, a.bound, a.domain) for p, a in zip(vparams, args,
                                                                        strict=True)]
        vs.params = list(vparams)
        vs.depth = 1
        g.grow(vs, src.integer(1, 3))
        same = [v for v in vs.created if v.is_tensor and v.type.dtype is ret.dtype and
                v.type.rank == ret.rank and all(_eq(a, b) for a, b in
                                                zip(v.type.shape, ret.shape, strict=True))]
        chosen = src.choice(same) if same else \
            _same_type_step(g, vs, vs.pool[j], None) or vs.pool[j]
        out_bounds.append(chosen.bound)
        variants.append(Function(name, vparams, chosen.expr, ret,
                                 (DimVarRangePat(dv.name, lo, hi),), label=f"r{lo}_{hi}"))
    proto = Function(name, params, None, ret, (), tuple(variants))
    g.functions.append(proto)
    call = Call(proto, tuple(a.expr for a in args))
    for a in args:
        sc.used[id(a)] = a
    v = _Val(call, ret, _clip(_mx(*out_bounds), ret))
    sc.pool.append(v)
    sc.created.append(v)
    g.features.add("dispatch")
    return True
