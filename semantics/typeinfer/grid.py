"""Typing of GridRegionExpr (HIR spec §1.2): its domain, binders and carried types; the DimVar
environment of a call (``dim_env``) and a loop's concrete domain (``resolve_grid_domain``).
Split from ``functions.py`` (D480)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import (
    GridRegionExpr,
    Var,
)
from tilefoundry.semantics.printer import type_str
from tilefoundry.semantics.typeinfer.core import Session, TypeInferError, infer_expr
from tilefoundry.semantics.typeinfer.functions import (
    param_dimvars,
)
from tilefoundry.semantics.types import (
    DimVar,
    IRError,
    TensorType,
    TupleType,
    dim_str,
    evaluate_dim,
    free_dimvars,
    simplify,
    upper_bound,
)


# =============================================================================================
# GridRegionExpr
# =============================================================================================
def _grid_error(message: str, rule: str, fix: str | None = None) -> TypeInferError:
    return TypeInferError(message, op="GridRegionExpr", rule=rule, fix=fix)


def _stamp_binder(v: Var, t: Any, what: str) -> None:
    if v.has_type and v.checked_type != t:
        raise _grid_error(f"{what} {v.name} is already typed {type_str(v.checked_type)} "
                          f"elsewhere; here it would be {type_str(t)}",
                          rule="a loop binder Var belongs to one loop",
                          fix="use a fresh Var for each loop")
    v.stamp(t)


def _check_domain(node: GridRegionExpr, params: tuple | None) -> None:
    bound = param_dimvars(params) if params is not None else {}
    for fld in ("start", "extent", "step"):
        d = getattr(node, fld)
        for dv in sorted(free_dimvars(d), key=lambda v: (v.name, v.lo, v.hi)):
            b = bound.get(dv.name)
            if b is None:
                where = "the enclosing Function's parameter shapes" if params is not None \
                    else "any enclosing Function (the loop is inferred outside one)"
                raise _grid_error(f"{fld} = {dim_str(d)} uses DimVar {dv.name}, which is not "
                                  f"bound by {where}",
                                  rule="Every DimVar referenced by a ShapeDim start / extent / "
                                  "step MUST be bound by the enclosing Function's parameter "
                                  "shapes; an unbound DimVar MUST raise",
                                  fix=f"add a parameter whose shape carries {dv.name}")
            if b != dv:
                raise _grid_error(f"{fld} uses {dv.name} with envelope [{dv.lo}, {dv.hi}) but "
                                  f"the parameter's {dv.name} has [{b.lo}, {b.hi})",
                                  rule="same-name DimVars agree on (lo, hi)")
        v = simplify(d)
        least = 1 if fld == "step" else 0
        what = "a positive integer" if fld == "step" else "a non-negative integer"
        if isinstance(v, int):
            if v < least:
                raise _grid_error(f"{fld} = {v} is not {what}",
                                  rule="the resolved start and extent MUST be non-negative "
                                  "integers and the resolved step MUST be a positive integer")
        else:
            ub = upper_bound(v)
            if ub is not None and ub < least:
                raise _grid_error(f"{fld} = {dim_str(d)} is at most {ub} for every shape in "
                                  f"the envelope, never {what}",
                                  rule="the resolved start and extent MUST be non-negative "
                                  "integers and the resolved step MUST be a positive integer")


def dim_env(params: Sequence[Var], arg_shapes: Sequence[Sequence[Any]]) -> dict[str, int]:
    """DimVar name -> concrete size, read from concrete argument shapes (one per parameter;
    non-tensor parameters' entries are ignored) at every axis whose parameter dim is a DimVar.
    A size outside the DimVar's envelope, or two sizes for one DimVar, raise."""
    if len(arg_shapes) != len(params):
        raise TypeInferError(f"{len(arg_shapes)} argument shapes for {len(params)} parameters",
                             op="Call", rule="Arity MUST match — exactly one argument per "
                             "parameter")
    env: dict[str, int] = {}
    for i, (p, shape) in enumerate(zip(params, arg_shapes, strict=True)):
        if not isinstance(p.type, TensorType):
            continue
        shape = tuple(shape)
        if len(shape) != len(p.type.shape):
            raise TypeInferError(f"rank {len(shape)} is not the parameter's {len(p.type.shape)}",
                                 op="Call", operand=f"argument {i} ({p.name})",
                                 rule="argument shapes match the parameter shapes")
        for k, (d, a) in enumerate(zip(p.type.shape, shape, strict=True)):
            if not isinstance(d, DimVar):
                continue
            if not isinstance(a, int) or isinstance(a, bool) or not d.lo <= a < d.hi:
                raise TypeInferError(f"axis {k} is {a!r}, not a size in {d.name}'s envelope "
                                     f"[{d.lo}, {d.hi})", op="Call",
                                     operand=f"argument {i} ({p.name})",
                                     rule="DimVar shapes keep envelope matching")
            if env.setdefault(d.name, a) != a:
                raise TypeInferError(f"DimVar {d.name} is {env[d.name]} in one argument and "
                                     f"{a} here", op="Call", operand=f"argument {i} ({p.name})",
                                     rule="a DimVar takes one value per call")
    return env


def resolve_grid_domain(node: GridRegionExpr, env: dict[str, int]) -> range:
    """The loop's iteration domain ``range(start, extent, step)`` at call time: 'Resolution
    substitutes each such DimVar with the corresponding argument-shape size and folds the dim
    Expr to a value n. The resolved start and extent MUST be non-negative integers and the
    resolved step MUST be a positive integer; otherwise resolution MUST raise. An unbound DimVar
    MUST raise.' ``env`` comes from ``dim_env`` over the enclosing Function's parameters."""
    vals = []
    for fld in ("start", "extent", "step"):
        d = getattr(node, fld)
        try:
            v = evaluate_dim(d, env)
        except IRError as e:
            raise _grid_error(f"{fld} = {dim_str(d)}: {e}",
                              rule="An unbound DimVar MUST raise") from e
        least = 1 if fld == "step" else 0
        if v < least:
            raise _grid_error(f"{fld} = {dim_str(d)} resolves to {v}, not a "
                              f"{'positive' if fld == 'step' else 'non-negative'} integer",
                              rule="the resolved start and extent MUST be non-negative "
                              "integers and the resolved step MUST be a positive integer")
        vals.append(v)
    return range(vals[0], vals[1], vals[2])


def infer_grid_region(node: GridRegionExpr, session: Session | None = None) -> Any:
    """Type a GridRegionExpr: the carry chain has one init / phi / yield per carry; phis are
    typed by their init_args, the induction var is a rank-0 i32 tensor unless annotated (then
    a rank-0 integer tensor), each yield's type equals its carry's; the domain's DimVars are
    bound by the enclosing Function's parameter shapes and static values are in range. The
    value is the single carry's type, a TupleType of all carries' types for several, and the
    empty TupleType for a loop with no carry."""
    session = session if session is not None else Session()
    n = (len(node.carried_args), len(node.init_args), len(node.yield_values))
    if len(set(n)) != 1:
        raise _grid_error(f"carried_args / init_args / yield_values have lengths {n}",
                          rule="len(init_args) == len(carried_args) == len(yield_values)")
    _check_domain(node, session.scope[-1] if session.scope else None)
    iv = node.induction_var
    it = iv.type if iv.type is not None else TensorType((), DType.I32)
    if not (isinstance(it, TensorType) and it.rank == 0 and it.dtype.is_int):
        raise _grid_error(f"the induction var {iv.name} is annotated {type_str(it)}",
                          rule="the induction var is a rank-0 integer tensor",
                          fix="annotate it Tensor[(), i32] or leave it unannotated")
    _stamp_binder(iv, it, "induction var")
    init_t = tuple(infer_expr(a, session) for a in node.init_args)
    for k, (phi, t) in enumerate(zip(node.carried_args, init_t, strict=True)):
        if phi.type is not None and phi.type != t:
            raise _grid_error(f"carry {k} ({phi.name}) is annotated {type_str(phi.type)} but "
                              f"its init_args entry has type {type_str(t)}",
                              rule="the first-iteration value of each carried_args phi is its "
                              "init_args entry")
        _stamp_binder(phi, t, "carry phi")
    infer_expr(node.body, session)
    for k, (y, phi, t) in enumerate(zip(node.yield_values, node.carried_args, init_t,
                                        strict=True)):
        yt = infer_expr(y, session)
        if yt != t:
            raise _grid_error(f"yield {k} has type {type_str(yt)} but carry {phi.name} has "
                              f"{type_str(t)}",
                              rule="each yield's type equals its carry's type (loop-phi)",
                              fix="Reshard or cast the yielded value to the carry's type")
    if len(init_t) == 1:
        return init_t[0]
    return TupleType(init_t)


