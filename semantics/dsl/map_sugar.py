"""``map(values..., lambda a, b, ...: expr)``: the Tile design's escape hatch for a custom pure
scalar expression, as parse-time sugar (D456).

Tile design: "map(values..., scalar_lambda) remains the escape hatch for a custom pure scalar
expression, not mandatory ceremony around every elementwise operator. Both forms become one
elementwise op with a scalar SSA region in TileIR, so fusion sees the complete expression DAG
rather than an opaque C++ callback."

The parser expands the call into the elementwise ops of the lambda's body applied to the values:
``map(x, y, lambda a, b: exp(a - b) * 2.0)`` builds exactly the IR of ``exp(x - y) * 2.0``. HIR
has no Region abstraction (its one structured exception is GridRegionExpr), so the expression
DAG of Calls *is* the scalar SSA region here, and every evaluator and backend already handles it.

The lambda is checked before anything is built; each rejection is a ``DSLError`` naming the
problem and the fix:

- arity: one lambda parameter per value, plain positional parameters only;
- pure: no walrus, no call of a ``@func`` or of anything that is not an elementwise op spelling,
  no reading of an outer tensor value (pass it as one more value instead);
- scalar: no subscripts, tuples, reductions, shape or layout ops in the body, and the body must
  produce one tensor value that depends on a parameter.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from tilefoundry.semantics.dsl.surface import BY_NAME, Builtin, Intrinsic, Namespace
from tilefoundry.semantics.ir import Expr
from tilefoundry.semantics.ops.math import Binary, Unary
from tilefoundry.semantics.ops.nn import Gelu, ReLU, Sigmoid, Silu, Tanh
from tilefoundry.semantics.ops.tensor import Cast
from tilefoundry.semantics.ops.tile_select import Bitcast, Select

if TYPE_CHECKING:
    from tilefoundry.semantics.dsl.parser import FunctionParser

#: The op classes whose spellings a map lambda may call: each is a pure function of one element
#: of each operand (elementwise), so the expansion stays one elementwise expression DAG.
ELEMENTWISE_OPS: tuple[type, ...] = (Binary, Unary, Cast, Select, Bitcast, ReLU, Sigmoid, Tanh,
                                     Gelu, Silu)
#: Parser builtins allowed in the body (scalar literals).
_SCALAR_BUILTINS = {Builtin.CONST.value, Builtin.CONST_BITS.value, Builtin.FLOAT.value}
#: Expression nodes allowed in the body (anything else is named in the error).
_ALLOWED = (ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call, ast.Name, ast.Constant,
            ast.Attribute, ast.keyword, ast.Load, ast.operator, ast.unaryop, ast.cmpop)
_WHY: dict[type, str] = {
    ast.NamedExpr: "is impure: a walrus (:=) binds a name",
    ast.Subscript: "is not scalar: a subscript selects a sub-tensor",
    ast.Tuple: "is not scalar: a tuple is not one element value",
    ast.List: "is not scalar: a list is not one element value",
    ast.Lambda: "nests a lambda; write the inner expression inline",
    ast.IfExp: "uses a conditional expression; write ite(cond, a, b)",
    ast.Await: "is impure (await)", ast.Yield: "is impure (yield)",
    ast.YieldFrom: "is impure (yield)", ast.Starred: "uses *args",
}


def map_call(p: FunctionParser, node: ast.Call) -> Expr:
    """Expand ``map(values..., lambda ...: body)`` at ``node`` into the body's elementwise ops."""
    where = "map(...)"
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        raise p.error(node, where, "pass the values and the lambda positionally: "
                      "map(x, y, lambda a, b: a * b + 1.0)")
    if len(node.args) < 2 or not isinstance(node.args[-1], ast.Lambda):
        raise p.error(node, where, "takes one or more tensor values and then a lambda: "
                      "map(x, lambda a: a * a)")
    lam: ast.Lambda = node.args[-1]
    values_ast = node.args[:-1]
    params = _params(p, lam, len(values_ast))
    _check_body(p, lam, set(params))
    values = [p.ir(p.expr(a), a, "a tensor value (map's values are tensors)")
              for a in values_ast]
    saved = {n: p.env[n] for n in params if n in p.env}
    p.env.update(zip(params, values, strict=True))
    try:
        out = p.expr(lam.body)
    finally:
        for n in params:
            p.env.pop(n, None)
        p.env.update(saved)
    if not isinstance(out, Expr):
        raise p.error(lam.body, "map lambda", "the lambda's body is a static value, not an "
                      "expression of its parameters; write the constant with const(v, dtype)")
    if not any(_reads(out, v) for v in values):
        raise p.error(lam.body, "map lambda", "the lambda's body reads none of its parameters; "
                      "write the constant with const(v, dtype)")
    return out


def _params(p: FunctionParser, lam: ast.Lambda, n_values: int) -> list[str]:
    a = lam.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults or a.kw_defaults:
        raise p.error(lam, "map lambda", "the lambda takes plain positional parameters only, "
                      "one per value (no defaults, *args, **kwargs or keyword-only parameters)")
    names = [x.arg for x in a.args]
    if len(names) != n_values:
        raise p.error(lam, "map lambda", f"the lambda takes {len(names)} parameter(s) "
                      f"{tuple(names)} but map passes {n_values} value(s); give it one "
                      f"parameter per value")
    return names


def _check_body(p: FunctionParser, lam: ast.Lambda, params: set[str]) -> None:
    for sub in ast.walk(lam.body):
        if type(sub) in _WHY:
            raise p.error(sub, "map lambda", f"the lambda's body {_WHY[type(sub)]}")
        if not isinstance(sub, _ALLOWED):
            raise p.error(sub, "map lambda", f"the lambda's body uses "
                          f"{type(sub).__name__}, which is not a scalar expression; use "
                          f"operators, comparisons and elementwise ops")
        if isinstance(sub, ast.Name) and sub.id not in params:
            v = p.lookup(sub.id, sub)
            from tilefoundry.semantics.dsl.parser import RangeSlice  # (parser imports us)

            if isinstance(v, Expr | RangeSlice):
                raise p.error(sub, "map lambda", f"the lambda reads the outer tensor value "
                              f"{sub.id!r}, so it is not a pure function of its parameters; "
                              f"pass {sub.id} as one more value of map")
        if isinstance(sub, ast.Call):
            _check_callee(p, sub)


def _check_callee(p: FunctionParser, call: ast.Call) -> None:
    fn: Any = p.expr(call.func) if isinstance(call.func, ast.Name | ast.Attribute) else None
    if isinstance(fn, Namespace):
        fn = None
    if isinstance(fn, Intrinsic):
        if fn.dsl_name in _SCALAR_BUILTINS:
            return
        sp = BY_NAME.get(fn.dsl_name)
        if sp is not None and issubclass(sp.op, ELEMENTWISE_OPS):
            return
        raise p.error(call, "map lambda", f"the lambda's body calls {fn.dsl_name}(...), which "
                      f"is not an elementwise scalar op; map's lambda may use only operators "
                      f"and elementwise ops (call {fn.dsl_name} outside the lambda)")
    shown = ast.unparse(call.func)
    raise p.error(call, "map lambda", f"the lambda's body calls {shown}(...), which is not an "
                  f"elementwise DSL op (a @func call or any other callable may be impure or "
                  f"non-scalar); inline the expression with elementwise ops")


def _reads(e: Expr, v: Expr) -> bool:
    """Whether ``v`` (by identity) is reachable from ``e`` through Call arguments."""
    stack, seen = [e], set()
    while stack:
        cur = stack.pop()
        if cur is v:
            return True
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        stack.extend(getattr(cur, "args", ()) or ())
    return False
