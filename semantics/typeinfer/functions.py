"""Typing of Function, GridRegionExpr and calls to Functions (HIR spec §1.1, §1.2); call
elaboration, shape dispatch, signature-stride materialization and the module verifier.

Entry points (the driver in ``core.py`` dispatches Function / GridRegionExpr / Call-to-Function
nodes here):

- ``infer_function(fn, session)`` checks the Function rules and infers the body (never a
  dispatch prototype's: it has none; its variants are inferred instead); the value is the
  ``CallableType`` projected from params and return_type.
- ``infer_call_to_function(call, arg_types, session)`` types a call by elaboration: it binds the
  arguments to the parameters, reconstructs the body under that binding (memoized per session)
  and records the elaborated instance as the call's target (``resolved_target``). A call to a
  dispatch prototype is not elaborated; when the shapes it dispatches on are concrete, the variant
  is resolved (``resolved_variant``); ``select_variant`` does the same for the evaluator.
- ``infer_grid_region(node, session)`` types the loop-phi node.
- ``infer_module(module)`` runs one Session over every function and returns the module with its
  signatures materialized; ``verify_module(module)`` checks the module-level rules.

Rules raise ``TypeInferError(message, op="Function <name>" | "Call @<name>" | "GridRegionExpr" |
"Module", rule=..., fix=...)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from typing import Any

from tilefoundry.semantics.ir import (
    Call,
    Constant,
    DimVarRangePat,
    Expr,
    Function,
    Var,
    all_children,
    reachable,
    run_dag,
)
from tilefoundry.semantics.printer import type_str
from tilefoundry.semantics.typeinfer.core import Session, TypeInferError, infer_expr
from tilefoundry.semantics.types import (
    CallableType,
    DimVar,
    IRError,
    Layout,
    ShapeDim,
    ShardLayout,
    TensorType,
    TupleType,
    c_order,
    dim_bounds,
    dim_str,
    evaluate_dim,
    free_dimvars,
    is_type,
    simplify,
)

__all__ = [
    "check_function",
    "elaborate",
    "infer_call_to_function",
    "infer_function",
    "materialize_signature",
    "materialize_type",
    "resolved_target",
    "resolved_variant",
    "select_variant",
]


def _fn_error(fn: Function | str, message: str, rule: str, fix: str | None = None,
              operand: str | None = None) -> TypeInferError:
    name = fn if isinstance(fn, str) else fn.name
    return TypeInferError(message, op=f"Function {name}", operand=operand, rule=rule, fix=fix)


# =============================================================================================
# walking types and expressions
# =============================================================================================
def _tensor_types(t: Any) -> Iterator[TensorType]:
    if isinstance(t, TensorType):
        yield t
    elif isinstance(t, TupleType):
        for f in t.fields:
            yield from _tensor_types(f)
    elif isinstance(t, CallableType):
        for p in t.params:
            yield from _tensor_types(p)
        yield from _tensor_types(t.result)


def _dimvars_of(t: Any) -> list[DimVar]:
    """Every DimVar a type mentions (in shapes, through dim expressions), in a stable order."""
    out: list[DimVar] = []
    for tt in _tensor_types(t):
        for d in tt.shape:
            out.extend(sorted(free_dimvars(d), key=lambda v: (v.name, v.lo, v.hi)))
    return out


def param_dimvars(params: Sequence[Var]) -> dict[str, DimVar]:
    out: dict[str, DimVar] = {}
    for p in params:
        for dv in _dimvars_of(p.type):
            out.setdefault(dv.name, dv)
    return out


def _walk(root: Expr) -> Iterator[Expr]:
    """Every node reachable from ``root`` once (iterative; Functions are leaves)."""
    return reachable(root, all_children)


def _referenced_functions(root: Expr) -> Iterator[Function]:
    """Functions a body calls (Call.op) or mentions as values, each once, in a stable order."""
    seen: set[int] = set()
    for node in _walk(root):
        for f in ([node.op] if isinstance(node, Call) and isinstance(node.op, Function) else
                  [node] if isinstance(node, Function) else []):
            if id(f) not in seen:
                seen.add(id(f))
                yield f


def _copy_node(node: Expr, new: dict[int, Expr], fn_map: Callable[[Function], Function]) -> Expr:
    if isinstance(node, Function):
        return fn_map(node)
    if isinstance(node, Var):
        return Var(node.name, node.type)
    if isinstance(node, Constant):
        return Constant(node.value)
    if isinstance(node, Call):
        op = fn_map(node.op) if isinstance(node.op, Function) else node.op
        return Call(op, tuple(new[id(a)] for a in node.args))

    def conv(v: Any) -> Any:
        if isinstance(v, Expr):
            return new[id(v)]
        if isinstance(v, tuple):
            return tuple(new[id(x)] if isinstance(x, Expr) else x for x in v)
        return v

    return type(node)(**{f.name: conv(getattr(node, f.name)) for f in fields(node) if f.init})


def _rebuild(root: Expr, subst: dict[int, Expr],
             fn_map: Callable[[Function], Function] = lambda f: f) -> Expr:
    """A fresh copy of the DAG under ``root``: every node is new and unstamped (so it is
    inferred afresh), sharing is preserved (one copy per original node), nodes whose id is in
    ``subst`` are replaced, and referenced Functions go through ``fn_map``."""
    new: dict[int, Expr] = dict(subst)
    return run_dag(root, new, lambda node: _copy_node(node, new, fn_map), all_children)


# =============================================================================================
# signature Layout.strides materialization
# =============================================================================================
def materialize_type(t: Any) -> Any:
    """``t`` with every ``Layout(strides=None)`` sugar materialized to shared-engine C-order
    over the canonical global shape (a ShardLayout: ``shared_engine_strides``; a plain Layout:
    C-order over its layout positions, i.e. ``Layout.natural`` for a flat layout). Verbose
    strides are kept verbatim; an unchanged type is returned as the same object."""
    if isinstance(t, TensorType):
        lay = t.layout
        if isinstance(lay, ShardLayout) and lay.layout.strides is None:
            lay = lay.with_strides(lay.shared_engine_strides())
        elif isinstance(lay, Layout) and lay.strides is None:
            lay = lay.with_flat_strides(c_order(lay.positions))
        return t if lay is t.layout else TensorType(t.shape, t.dtype, lay, t.storage)
    if isinstance(t, TupleType):
        fs = tuple(materialize_type(f) for f in t.fields)
        return t if all(a is b for a, b in zip(fs, t.fields, strict=True)) else TupleType(fs)
    if isinstance(t, CallableType):
        ps = tuple(materialize_type(p) for p in t.params)
        r = materialize_type(t.result)
        same = r is t.result and all(a is b for a, b in zip(ps, t.params, strict=True))
        return t if same else CallableType(ps, r)
    return t


def materialize_signature(fn: Function, session: Session | None = None) -> Function:
    """``fn`` with its signature annotations materialized (HIR spec, Signature annotation
    Layout.strides materialization), or ``fn`` itself when nothing changes. A rebuilt function
    gets new parameter Vars, a fresh body, materialized variants, and calls retargeted to the
    materialized callees. Memoized per session, so every call site sees one instance."""
    session = session if session is not None else Session()
    hit = session.signatures.get(id(fn))
    if hit is not None:
        return hit
    ptypes = [materialize_type(p.type) for p in fn.params]
    rt = materialize_type(fn.return_type)
    variants = tuple(materialize_signature(v, session) for v in fn.variants)
    callees: dict[int, Function] = {}
    if isinstance(fn.body, Expr):
        for c in _referenced_functions(fn.body):
            m = materialize_signature(c, session)
            if m is not c:
                callees[id(c)] = m
    changed = rt is not fn.return_type or callees or \
        any(a is not p.type for a, p in zip(ptypes, fn.params, strict=True)) or \
        any(a is not b for a, b in zip(variants, fn.variants, strict=True))
    result = fn
    if changed:
        params = tuple(Var(p.name, t) for p, t in zip(fn.params, ptypes, strict=True))
        body = fn.body
        if isinstance(body, Expr):
            body = _rebuild(body, {id(p): q for p, q in zip(fn.params, params, strict=True)},
                            lambda f: callees.get(id(f), f))
        result = Function(fn.name, params, body, rt, fn.specializations, variants,
                          label=fn.label)
        if fn.sealed:
            result.seal()
    session.signatures[id(fn)] = result
    session.keep.append(fn)
    return result


# =============================================================================================
# Function rules
# =============================================================================================
def _check_dimvar_agreement(fn: Function) -> None:
    """Within a signature, every same-name DimVar agrees on (lo, hi)."""
    seen: dict[str, tuple[DimVar, str]] = {}
    sites = [(f"parameter {p.name}", p.type) for p in fn.params]
    sites.append(("return_type", fn.return_type))
    for where, t in sites:
        for dv in _dimvars_of(t):
            prev = seen.get(dv.name)
            if prev is None:
                seen[dv.name] = (dv, where)
            elif (prev[0].lo, prev[0].hi) != (dv.lo, dv.hi):
                raise _fn_error(
                    fn, f"DimVar {dv.name} has envelope [{prev[0].lo}, {prev[0].hi}) in "
                    f"{prev[1]} but [{dv.lo}, {dv.hi}) in {where}",
                    rule="same-name DimVars agree on (lo, hi) across params and return_type",
                    fix=f"give every occurrence of {dv.name} the same bounds")


def check_anchor(fn: Function, pat: DimVarRangePat) -> DimVar:
    dvs = param_dimvars(fn.params)
    dv = dvs.get(pat.dim_var)
    if dv is None:
        where = " (it appears only in the return_type)" if any(
            v.name == pat.dim_var for v in _dimvars_of(fn.return_type)) else ""
        raise _fn_error(
            fn, f"specialization {pat.canonical} names DimVar {pat.dim_var}, which no input "
            f"parameter's shape carries{where}; parameter DimVars: {sorted(dvs) or 'none'}",
            rule="a DimVarRangePat anchors to a DimVar reachable from an input parameter",
            fix="dispatch on a DimVar of a parameter shape")
    if not (dv.lo <= pat.lo and pat.hi <= dv.hi):
        raise _fn_error(
            fn, f"specialization {pat.canonical} range [{pat.lo}, {pat.hi}) is not within "
            f"{dv.name}'s envelope [{dv.lo}, {dv.hi})",
            rule="a DimVarRangePat lies within its DimVar's envelope",
            fix=f"clip the range to [{dv.lo}, {dv.hi})")
    return dv


def _variant_name(v: Function) -> str:
    return v.canonical_signature + (f" (label {v.label})" if v.label is not None else "")


def _segments(points: list[tuple[int, int]]) -> str:
    return ", ".join(f"[{a}, {b}) ({b - a} value{'s' if b - a != 1 else ''})" for a, b in points)


def check_partition(base: Function, dv: DimVar) -> None:
    """The variants' ranges partition [lo, hi): pairwise disjoint and jointly complete."""
    pats = [(v.specializations[0], v) for v in base.variants]
    cuts = sorted({dv.lo, dv.hi, *(p.lo for p, _ in pats), *(p.hi for p, _ in pats)})
    gaps: list[tuple[int, int]] = []
    overlaps: list[tuple[int, int, tuple[str, ...]]] = []
    for a, b in itertools.pairwise(cuts):
        if a < dv.lo or b > dv.hi:
            continue
        cover = tuple(_variant_name(v) for p, v in pats if p.lo <= a and b <= p.hi)
        if not cover:
            if gaps and gaps[-1][1] == a:
                gaps[-1] = (gaps[-1][0], b)
            else:
                gaps.append((a, b))
        elif len(cover) > 1:
            if overlaps and overlaps[-1][1] == a and overlaps[-1][2] == cover:
                overlaps[-1] = (overlaps[-1][0], b, cover)
            else:
                overlaps.append((a, b, cover))
    problems = []
    if gaps:
        n = sum(b - a for a, b in gaps)
        problems.append(f"uncovered: {_segments(gaps)} — {n} in-envelope value"
                        f"{'s' if n != 1 else ''} select no variant")
    for a, b, cover in overlaps:
        problems.append(f"doubly covered: [{a}, {b}) ({b - a} value{'s' if b - a != 1 else ''})"
                        f" by {len(cover)} variants {', '.join(cover)}")
    if problems:
        raise _fn_error(
            base, f"the variants' ranges do not partition {dv.name}'s envelope "
            f"[{dv.lo}, {dv.hi}): " + "; ".join(problems),
            rule="Envelope coverage: the variants' ranges MUST partition the envelope "
            "(pairwise disjoint and jointly complete)",
            fix="make adjacent ranges meet at a shared boundary, [.., c) then [c, ..)")


def _check_variants(base: Function) -> None:
    sigs: dict[str, Function] = {}
    for v in base.variants:
        who = f"variant {_variant_name(v) or '(no specialization)'}"
        if v.variants:
            raise _fn_error(base, f"{who} itself carries {len(v.variants)} variants",
                            rule="Nesting is exactly one level: a variant MUST NOT itself "
                            "carry variants")
        if not v.specializations:
            raise _fn_error(base, f"variant {v.name} carries no DimVarRangePat",
                            rule="A variant carries exactly one DimVarRangePat in "
                            "specializations", fix="register it with @f.specialize(...)")
        if v.name != base.name:
            raise _fn_error(base, f"{who} is named {v.name!r}",
                            rule="Every variant of a base MUST share the base's name")
        if v.params != base.params:
            raise _fn_error(base, f"{who} has params {_params_str(v)}, the base "
                            f"{_params_str(base)}",
                            rule="Every variant of a base MUST share the base's params")
        if v.return_type != base.return_type:
            raise _fn_error(base, f"{who} returns {type_str(v.return_type)}, the base "
                            f"{type_str(base.return_type)}",
                            rule="Every variant of a base MUST share the base's return_type")
        check_function(v)
        prev = sigs.get(v.canonical_signature)
        if prev is not None:
            raise _fn_error(base, f"variants {_variant_name(prev)} and {_variant_name(v)} "
                            f"have the same canonical signature {v.canonical_signature}",
                            rule="Two variants of one base MUST have distinct canonical "
                            "signatures")
        sigs[v.canonical_signature] = v
    names = sorted({v.specializations[0].dim_var for v in base.variants})
    if len(names) > 1:
        raise _fn_error(base, f"the variants dispatch on different DimVars {names}",
                        rule="Envelope coverage: the variants partition one dispatch envelope",
                        fix="dispatch every variant on the same DimVar")
    check_partition(base, param_dimvars(base.params)[names[0]])


def _params_str(fn: Function) -> str:
    return "(" + ", ".join(f"{p.name}: {type_str(p.type)}" for p in fn.params) + ")"


def check_function(fn: Function) -> None:
    """The structural Function rules (HIR spec §1.1): body a single Expr, params Vars with
    annotations, same-name DimVars agreeing, and the normal / prototype / variant shapes with
    their variant, anchor and envelope-coverage rules. Infers nothing."""
    if not isinstance(fn, Function):
        raise TypeInferError(f"expected a Function, got {type(fn).__name__}", op="Function",
                             rule="Function")
    if fn.body is not None and not isinstance(fn.body, Expr):
        raise _fn_error(fn, f"body is a {type(fn.body).__name__}",
                        rule="Function.body is a single Expr; Stmts MUST NOT appear")
    if not isinstance(fn.params, tuple):
        raise _fn_error(fn, "params is not a tuple", rule="Function.params entries MUST be Vars")
    names: set[str] = set()
    for i, p in enumerate(fn.params):
        if not isinstance(p, Var):
            raise _fn_error(fn, f"params[{i}] is a {type(p).__name__}",
                            rule="Function.params entries MUST be Vars")
        if p.type is None:
            raise _fn_error(fn, f"parameter {p.name} has no type annotation",
                            rule="each parameter Var carries a type annotation",
                            fix="annotate it, e.g. Tensor[(M, N), f32]")
        if p.name in names:
            raise _fn_error(fn, f"two parameters are named {p.name}",
                            rule="parameter names are distinct")
        names.add(p.name)
    _check_dimvar_agreement(fn)
    if fn.specializations:  # variant
        if len(fn.specializations) != 1:
            raise _fn_error(fn, f"a variant carries {len(fn.specializations)} specializations "
                            f"({fn.canonical_signature})",
                            rule="A variant carries exactly one DimVarRangePat in "
                            "specializations")
        if fn.variants:
            raise _fn_error(fn, f"variant {fn.canonical_signature} carries "
                            f"{len(fn.variants)} variants of its own",
                            rule="Nesting is exactly one level: a variant MUST NOT itself "
                            "carry variants")
        if fn.body is None:
            raise _fn_error(fn, f"variant {fn.canonical_signature} has no body",
                            rule="only variants carry executable bodies")
        check_anchor(fn, fn.specializations[0])
    elif fn.variants:  # dispatch prototype
        if fn.body is not None:
            raise _fn_error(fn, "a function with variants also has a body",
                            rule="body is None ⟺ variants != (): a real body combined with "
                            "variants is invalid", fix="write the base's body as `pass`")
        if fn.return_type is None:
            raise _fn_error(fn, "a dispatch prototype has no return_type",
                            rule="a dispatch prototype declares the signature")
        _check_variants(fn)
    elif fn.body is None:
        raise _fn_error(fn, "a function with no body and no variants is uncallable",
                        rule="body is None ⟺ variants != (): a dispatch prototype with no "
                        "variants is invalid", fix="register a variant with @f.specialize(...) "
                        "or give the function a body")


def _infer_body(params: tuple, body: Expr, session: Session) -> Any:
    session.scope.append(params)
    try:
        return infer_expr(body, session)
    finally:
        session.scope.pop()


def _dims_equal(a: ShapeDim, b: ShapeDim) -> bool:
    return simplify(a) == simplify(b)


def _return_matches(declared: Any, inferred: Any) -> bool:
    """The body type against a declared return_type: a tensor return with ``layout is None`` is
    layout-unconstrained (any layout and storage, like a wildcard parameter); otherwise exact."""
    if isinstance(declared, TensorType):
        if not isinstance(inferred, TensorType) or declared.dtype is not inferred.dtype or \
                len(declared.shape) != len(inferred.shape) or \
                not all(_dims_equal(a, b) for a, b in zip(declared.shape, inferred.shape,
                                                          strict=True)):
            return False
        return declared.layout is None or (declared.layout == inferred.layout and
                                           declared.storage is inferred.storage)
    if isinstance(declared, TupleType):
        return isinstance(inferred, TupleType) and len(declared.fields) == len(inferred.fields) \
            and all(_return_matches(d, i) for d, i in zip(declared.fields, inferred.fields,
                                                          strict=True))
    return declared == inferred


def _check_return(fn: Function | str, declared: Any, inferred: Any) -> None:
    if declared is not None and not _return_matches(declared, inferred):
        raise _fn_error(fn, f"the body's type {type_str(inferred)} does not match the declared "
                        f"return_type {type_str(declared)}",
                        rule="the inferred body type equals the declared return_type",
                        fix="change the annotation or Reshard / cast the returned value")


def infer_function(fn: Function, session: Session | None = None) -> CallableType:
    """Check ``fn``'s rules and infer its body (a dispatch prototype's variants instead); the
    value type is the CallableType projected from the (materialized) params and return_type.

    When the signature carries ``Layout(strides=None)`` sugar, the materialized instance
    (``materialize_signature``) is what is inferred and stamped — ``infer_module`` returns a
    module made of those instances — and ``fn``'s own body is left unstamped."""
    session = session if session is not None else Session()
    check_function(fn)
    m = materialize_signature(fn, session)
    if m is not fn:
        return infer_expr(m, session)
    ptypes = tuple(p.type for p in fn.params)
    if fn.body is None:  # dispatch prototype: never inferred as a body
        for v in fn.variants:
            infer_expr(v, session)
        return CallableType(ptypes, fn.return_type)
    body_t = _infer_body(fn.params, fn.body, session)
    _check_return(fn, fn.return_type, body_t)
    if not is_type(body_t):
        raise _fn_error(fn, f"the body's value {body_t!r} is not an IR type",
                        rule="Function value type")
    return CallableType(ptypes, fn.return_type if fn.return_type is not None else body_t)


# =============================================================================================
# calls: binding, elaboration, dispatch
# =============================================================================================
class _Binder:
    """Binds arguments to parameters (HIR spec, Argument ↔ parameter binding) and records the
    value each parameter DimVar takes (an int, or the argument's symbolic dim)."""

    def __init__(self, callee: Function) -> None:
        self.callee = callee
        self.env: dict[str, ShapeDim] = {}
        self.deferred: list[tuple[str, int, ShapeDim, ShapeDim]] = []

    def error(self, message: str, rule: str, operand: str | None = None,
              fix: str | None = None) -> TypeInferError:
        return TypeInferError(message, op=f"Call @{self.callee.name}", operand=operand,
                              rule=rule, fix=fix)

    def bind_all(self, arg_types: Sequence[Any]) -> tuple:
        params = self.callee.params
        if len(arg_types) != len(params):
            raise self.error(f"{len(arg_types)} argument(s) for {len(params)} parameter(s) "
                             f"{tuple(p.name for p in params)}",
                             rule="Arity MUST match — exactly one argument per parameter")
        bound = tuple(self.bind(i, p, a) for i, (p, a) in enumerate(zip(params, arg_types,
                                                                         strict=True)))
        ints = {k: v for k, v in self.env.items() if isinstance(v, int)}
        for where, k, p, a in self.deferred:  # dim expressions over the parameter DimVars
            if _dims_equal(p, a):
                continue
            a = simplify(a)
            if isinstance(a, int) and all(v.name in ints for v in free_dimvars(p)) and \
                    _safe_eval(p, ints) == a:
                continue
            raise self.error(f"axis {k} is {dim_str(a)} but the parameter's is {dim_str(p)}",
                             rule="argument shapes match the parameter shapes", operand=where)
        return bound

    def bind(self, i: int, p: Var, a: Any) -> Any:
        where = f"argument {i} ({p.name})"
        pt = p.type
        if not isinstance(pt, TensorType):
            if a != pt:
                raise self.error(f"type {type_str(a)} is not the parameter's {type_str(pt)}",
                                 rule="Any other parameter requires exact type equality",
                                 operand=where)
            return pt
        if not isinstance(a, TensorType):
            raise self.error(f"expected a tensor, got {type_str(a)}",
                             rule="argument kind matches the parameter", operand=where)
        if a.dtype is not pt.dtype:
            raise self.error(f"dtype {a.dtype} is not the parameter's {pt.dtype}",
                             rule="a wildcard parameter binds once the logical shape and dtype "
                             "match" if pt.layout is None else "exact type equality",
                             operand=where, fix=f"cast the argument to {pt.dtype}")
        self.match_shape(where, pt.shape, a.shape)
        if pt.layout is None:  # template wildcard: binds the argument's full type
            if a.shape == pt.shape:
                return a
            # DimVar shapes keep envelope matching: the parameter keeps its dynamic shape
            return TensorType(pt.shape, a.dtype, a.layout, a.storage)
        if isinstance(pt.layout, ShardLayout):
            if a.layout != pt.layout or a.storage is not pt.storage:
                raise self.error(f"type {type_str(a)} does not match the parameter's "
                                 f"{type_str(pt)}",
                                 rule="A parameter that carries a ShardLayout is an explicit "
                                 "contract: the argument type MUST match it exactly",
                                 operand=where, fix="Reshard the argument to the parameter's "
                                 "layout")
            return pt
        if a.layout != pt.layout or a.storage is not pt.storage:
            raise self.error(f"type {type_str(a)} is not the parameter's {type_str(pt)}",
                             rule="Any other parameter requires exact type equality",
                             operand=where)
        return pt

    def match_shape(self, where: str, pshape: tuple, ashape: tuple) -> None:
        if len(pshape) != len(ashape):
            raise self.error(f"rank {len(ashape)} is not the parameter's {len(pshape)}",
                             rule="argument shapes match the parameter shapes", operand=where)
        for k, (p, a) in enumerate(zip(pshape, ashape, strict=True)):
            p, a = simplify(p), simplify(a)
            if isinstance(p, int):
                if a != p:
                    raise self.error(f"axis {k} is {dim_str(a)} but the parameter's is {p}",
                                     rule="argument shapes match the parameter shapes",
                                     operand=where)
            elif isinstance(p, DimVar):
                self.match_envelope(where, k, p, a)
            else:
                self.deferred.append((where, k, p, a))

    def match_envelope(self, where: str, k: int, p: DimVar, a: ShapeDim) -> None:
        rule = "DimVar shapes keep envelope matching"
        if isinstance(a, int):
            if not p.lo <= a < p.hi:
                raise self.error(f"axis {k} is {a}, outside {p.name}'s envelope "
                                 f"[{p.lo}, {p.hi})", rule=rule, operand=where)
        elif isinstance(a, DimVar):
            if a != p and not (p.lo <= a.lo and a.hi <= p.hi):
                raise self.error(f"axis {k} is DimVar {a.name} with envelope [{a.lo}, {a.hi}), "
                                 f"not inside {p.name}'s [{p.lo}, {p.hi})", rule=rule,
                                 operand=where)
        else:
            lo, hi = dim_bounds(a)
            if lo is None or hi is None or lo < p.lo or hi >= p.hi:
                span = f"[{lo}, {hi}]" if lo is not None and hi is not None else "unbounded"
                raise self.error(f"axis {k} is {dim_str(a)}, whose static range {span} is not "
                                 f"inside {p.name}'s envelope [{p.lo}, {p.hi})", rule=rule,
                                 operand=where)
        prev = self.env.get(p.name)
        if isinstance(prev, int) and isinstance(a, int) and prev != a:
            raise self.error(f"DimVar {p.name} is bound to {prev} by an earlier argument and to "
                             f"{a} here", rule="a DimVar takes one value per call",
                             operand=where)
        if prev is None or (isinstance(a, int) and not isinstance(prev, int)):
            self.env[p.name] = a


def _safe_eval(d: ShapeDim, env: dict[str, int]) -> int | None:
    try:
        return evaluate_dim(d, env)
    except IRError:
        return None


def _record(table: dict, call: Call, fn: Function) -> None:
    table[id(call)] = (call, fn)


def elaborate(callee: Function, arg_types: Sequence[Any],
              session: Session | None = None) -> Function:
    """The concrete Function instance a call with ``arg_types`` resolves to (HIR spec, Call
    typing — elaboration): ``callee`` itself when the bound parameter types equal its own,
    else a reconstruction of the body under the binding, inferred afresh, whose return_type is
    the re-derived body type. Memoized per session on (callee, bound parameter types), so equal
    argument types give the identical instance within a session and never across sessions."""
    session = session if session is not None else Session()
    check_function(callee)
    callee = materialize_signature(callee, session)
    if callee.body is None:
        raise TypeInferError("a dispatch prototype is not elaborated; its calls dispatch to a "
                             "variant", op=f"Call @{callee.name}", rule="Dispatch resolution")
    bound = _Binder(callee).bind_all(arg_types)
    if all(b == p.type for b, p in zip(bound, callee.params, strict=True)):
        infer_expr(callee, session)  # dedup: the same instance, its body typed once
        return callee
    key = (id(callee), bound)
    hit = session.memo.get(key)
    if hit is not None:
        return hit
    params = tuple(Var(p.name, t) for p, t in zip(callee.params, bound, strict=True))
    body = _rebuild(callee.body, {id(p): q for p, q in zip(callee.params, params, strict=True)})
    body_t = _infer_body(params, body, session)
    _check_return(callee, callee.return_type, body_t)
    inst = Function(callee.name, params, body, body_t, callee.specializations, (),
                    label=callee.label)
    inst.stamp(CallableType(bound, body_t))
    session.memo[key] = inst
    session.keep.append(callee)
    return inst


def infer_call_to_function(call: Call, arg_types: tuple, session: Session | None = None) -> Any:
    """The type of a Call whose target is a Function: the elaborated instance's body type, or
    a dispatch prototype's declared return_type. Records the target (``resolved_target``) and,
    for a dispatch call over concrete shapes, the selected variant (``resolved_variant``)."""
    session = session if session is not None else Session()
    callee0 = call.op
    check_function(callee0)
    callee = materialize_signature(callee0, session)
    if callee.body is None:  # dispatch prototype: not elaborated, the None body never read
        binder = _Binder(callee)
        binder.bind_all(arg_types)
        infer_expr(callee, session)  # its variants are checked and inferred
        _record(session.targets, call, callee)
        dim = callee.variants[0].specializations[0].dim_var
        val = binder.env.get(dim)
        if isinstance(val, int):
            _record(session.dispatch, call, _select(callee, val))
        return callee.return_type
    inst = elaborate(callee, arg_types, session)
    _record(session.targets, call, inst)
    return inst.body.checked_type


def resolved_target(call: Call, session: Session) -> Function:
    """The Function a call resolved to in ``session``: the elaborated instance of a direct
    call, the prototype of a dispatch call. A call typed in an earlier session is resolved now
    (elaboration state is session-local)."""
    if not isinstance(call, Call) or not isinstance(call.op, Function):
        raise TypeInferError("resolved_target takes a Call whose target is a Function",
                             op="Call", rule="Call typing — elaboration")
    hit = session.targets.get(id(call))
    if hit is None or hit[0] is not call:
        arg_types = tuple(infer_expr(a, session) for a in call.args)
        infer_call_to_function(call, arg_types, session)
        hit = session.targets[id(call)]
    return hit[1]


def resolved_variant(call: Call, session: Session) -> Function | None:
    """The variant a dispatch call selected, when its dispatch shapes were concrete."""
    resolved_target(call, session)
    hit = session.dispatch.get(id(call))
    return hit[1] if hit is not None and hit[0] is call else None


def _select(proto: Function, value: int) -> Function:
    dim = proto.variants[0].specializations[0].dim_var
    dv = param_dimvars(proto.params).get(dim)
    op = f"Call @{proto.name}"
    if dv is not None and not dv.lo <= value < dv.hi:
        raise TypeInferError(f"{dim} = {value} is outside the dispatch envelope "
                             f"[{dv.lo}, {dv.hi}); it matches no variant and there is no base "
                             f"body to fall back to", op=op, rule="Dispatch resolution")
    hits = [v for v in proto.variants
            if v.specializations[0].lo <= value < v.specializations[0].hi]
    if len(hits) != 1:
        raise TypeInferError(f"{dim} = {value} matches {len(hits)} variants "
                             f"{[_variant_name(v) for v in hits]}", op=op,
                             rule="Envelope coverage: every in-envelope shape selects exactly "
                             "one variant")
    return hits[0]


def select_variant(prototype: Function, arg_shapes: Sequence[Sequence[Any]]) -> Function:
    """The variant of a dispatch prototype selected by concrete argument shapes (one shape per
    parameter; non-tensor parameters' entries are ignored). A shape outside the envelope
    matches no variant and raises."""
    if not isinstance(prototype, Function) or prototype.body is not None or \
            not prototype.variants:
        raise TypeInferError("select_variant takes a dispatch prototype (body None, variants "
                             "!= ())", op="Function", rule="Dispatch resolution")
    op = f"Call @{prototype.name}"
    if len(arg_shapes) != len(prototype.params):
        raise TypeInferError(f"{len(arg_shapes)} argument shapes for "
                             f"{len(prototype.params)} parameters", op=op,
                             rule="Arity MUST match — exactly one argument per parameter")
    dim = prototype.variants[0].specializations[0].dim_var
    value: int | None = None
    for i, (p, shape) in enumerate(zip(prototype.params, arg_shapes, strict=True)):
        if not isinstance(p.type, TensorType):
            continue
        shape = tuple(shape)
        if len(shape) != len(p.type.shape):
            raise TypeInferError(f"rank {len(shape)} is not the parameter's "
                                 f"{len(p.type.shape)}", op=op, operand=f"argument {i}",
                                 rule="argument shapes match the parameter shapes")
        for k, (d, a) in enumerate(zip(p.type.shape, shape, strict=True)):
            if isinstance(d, DimVar) and d.name == dim:
                if not isinstance(a, int) or isinstance(a, bool):
                    raise TypeInferError(f"axis {k} is {a!r}, not a concrete int", op=op,
                                         operand=f"argument {i}", rule="Dispatch resolution")
                if value is not None and value != a:
                    raise TypeInferError(f"{dim} is {value} in one argument and {a} in "
                                         f"another", op=op, operand=f"argument {i}",
                                         rule="a DimVar takes one value per call")
                value = a
    if value is None:
        raise TypeInferError(f"no argument shape binds the dispatch DimVar {dim} directly",
                             op=op, rule="Dispatch resolution")
    return _select(prototype, value)



# the loop typing and the module verifier live in their own modules (D480); their public names
# stay importable from here, resolved on first use (PEP 562) so that neither module is imported
# while this one is still initializing
_MOVED = {"dim_env": "grid", "infer_grid_region": "grid", "resolve_grid_domain": "grid",
          "check_strides_materialized": "module_verify", "infer_module": "module_verify",
          "reachable_functions": "module_verify", "verify_module": "module_verify"}


def __getattr__(name: str) -> Any:
    where = _MOVED.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"tilefoundry.semantics.typeinfer.{where}"), name)
