"""The evaluator's driver: ``evaluate(module, entry, inputs)`` on numpy arrays.

Inputs are checked against the entry's signature before any computation (count, array kind,
contiguity, dtype, shape, DimVar envelopes). The body is evaluated bottom-up without recursion
(deep DAGs are fine); Calls to Functions evaluate the elaborated callee; a dispatch prototype
selects its variant by the concrete argument shapes; a GridRegionExpr resolves its bounds from
the enclosing function's argument shapes and iterates with its carried values. Op semantics come
from the registry (``registry.EVALUATORS``), one implementation per op class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from tilefoundry.errors import TilefoundryError
from tilefoundry.limits import LimitError, check_value_size, deep_recursion, limits
from tilefoundry.semantics.dtypes import noncanonical_bool
from tilefoundry.semantics.evaluator.mesh import PerDevice, Sharded, shard
from tilefoundry.semantics.evaluator.mesh_rules import MeshRule, mesh_rule
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx, EvaluationError
from tilefoundry.semantics.evaluator.sharding import eval_on_mesh, is_mesh_value
from tilefoundry.semantics.formats import FORMATS, DType, dtype_of
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GridRegionExpr,
    Module,
    Tuple,
    TupleGetItem,
    Var,
    loop_scope,
    run_dag,
)
from tilefoundry.semantics.printer import type_str
from tilefoundry.semantics.typeinfer.core import Session, TypeInferError
from tilefoundry.semantics.typeinfer.functions import (
    dim_env,
    infer_module,
    resolve_grid_domain,
    resolved_target,
    select_variant,
)
from tilefoundry.semantics.types import DimVar, ShardLayout, TensorType, TupleType, evaluate_dim


def shape_of(v: Any) -> tuple:
    """The logical shape of a runtime value (a sharded value's global shape)."""
    if isinstance(v, np.ndarray | Sharded | PerDevice):
        return tuple(v.shape)
    return ()


def same_sharding(a: ShardLayout, b: ShardLayout) -> bool:
    return a.mesh == b.mesh and a.attrs == b.attrs and a.layout.shape == b.layout.shape


def check_inputs(fn: Function, inputs: Sequence[Any]) -> list[Any]:
    """Validate inputs against the signature; the error names the parameter and the fix.

    A parameter whose type carries a ShardLayout takes a ``Sharded`` value of that sharding, or
    a global array that is distributed with ``mesh.shard``."""
    if len(inputs) != len(fn.params):
        raise EvaluationError(
            f"@{fn.name} takes {len(fn.params)} inputs "
            f"({', '.join(p.name for p in fn.params)}), got {len(inputs)}")
    out = []
    for p, x in zip(fn.params, inputs, strict=True):
        where = f"@{fn.name} parameter {p.name}"
        t = p.type
        sharding = t.shard if isinstance(t, TensorType) else None
        if isinstance(x, Sharded):
            if sharding is None:
                raise EvaluationError(f"{where}: got a sharded value {x!r} but the parameter "
                                      f"is unsharded; pass unshard(value)")
            if not same_sharding(x.layout, sharding):
                raise EvaluationError(f"{where}: the value's sharding {x.layout.attrs} over "
                                      f"{x.layout.layout.shape} does not match the declared "
                                      f"{sharding.attrs} over {sharding.layout.shape}; "
                                      f"reshard it with shard(unshard(value), layout)")
            arr = x.data
        elif isinstance(x, np.ndarray):
            arr = x
        else:
            raise EvaluationError(f"{where}: expected a numpy array, got {type(x).__name__}; "
                                  f"wrap scalars as rank-0 arrays (np.asarray(v, dtype))")
        if arr.dtype == object:
            raise EvaluationError(f"{where}: object arrays are not IR values; convert to the "
                                  f"parameter's storage dtype")
        if not arr.flags.c_contiguous:
            raise EvaluationError(f"{where}: the array is not C-contiguous; pass "
                                  f"np.ascontiguousarray(x)")
        shape = shape_of(x)
        if isinstance(t, TensorType):
            try:
                dt = dtype_of(arr)
            except Exception as e:  # a numpy type that is no IR dtype
                raise EvaluationError(f"{where}: {e}") from None
            if dt is not t.dtype:
                raise EvaluationError(
                    f"{where}: dtype {dt} (storage {arr.dtype}) does not match the declared "
                    f"{t.dtype} (storage {FORMATS[t.dtype].storage}); cast the input first")
            bad = noncanonical_bool(arr) if dt is DType.BOOL else None
            if bad is not None:
                raise EvaluationError(
                    f"{where}: a bool element is stored as the byte 0 or 1; element {bad[0]} "
                    f"(flat) holds {bad[1]:#04x} (an array viewed as bool from other bytes); "
                    f"pass x.view(np.uint8) != 0 (D543)")
            if len(shape) != len(t.shape):
                raise EvaluationError(f"{where}: rank {len(shape)} does not match the declared "
                                      f"rank {len(t.shape)} (shape {t.shape})")
            for a, (n, d) in enumerate(zip(shape, t.shape, strict=True)):
                if isinstance(d, int) and n != d:
                    raise EvaluationError(f"{where}: axis {a} has extent {n}, declared {d}")
                if isinstance(d, DimVar) and not d.lo <= n < d.hi:
                    raise EvaluationError(f"{where}: axis {a} has extent {n}, outside the "
                                          f"envelope of {d.name} [{d.lo}, {d.hi})")
            if sharding is not None and isinstance(x, np.ndarray):
                if shape != tuple(sharding.layout.axis_extents):
                    raise EvaluationError(f"{where}: shape {shape} does not match the "
                                          f"ShardLayout's extents {sharding.layout.axis_extents}")
                x = shard(x, sharding)
        out.append(x)
    try:
        env = dim_env(fn.params, [shape_of(x) for x in out])
    except TypeInferError as e:
        raise EvaluationError(f"@{fn.name} inputs: {e}") from None
    for p, x in zip(fn.params, out, strict=True):
        if isinstance(p.type, TensorType):
            for a, (n, d) in enumerate(zip(shape_of(x), p.type.shape, strict=True)):
                if not isinstance(d, int | DimVar) and evaluate_dim(d, env) != n:
                    raise EvaluationError(f"@{fn.name} parameter {p.name}: axis {a} has extent "
                                          f"{n}, but {d} = {evaluate_dim(d, env)} here")
    return out


def _check_result_size(node: Call, env: Mapping[str, int]) -> None:
    """Refuse to compute a Call whose result crosses the value-size limits (before any
    allocation: the result type's extents under the binding decide)."""
    stack = [node.checked_type]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(t.fields)
        elif isinstance(t, TensorType):
            try:
                shape = tuple(evaluate_dim(d, env) for d in t.shape)
            except (TilefoundryError, ArithmeticError):
                continue  # not resolvable here: the op resolves (and checks) it itself
            check_value_size(shape, FORMATS[t.dtype].storage.itemsize,
                             lambda t=t: f"evaluate: {type(node.op).__name__} (result type "
                                         f"{type_str(t)})")


def op_hook(op_cls: type) -> Callable:
    """Mark an ``Evaluator`` method as its class's implementation of ``op_cls`` (xDSL's
    per-op interpreter functions): ``eval_op`` calls ``method(self, ctx, args)`` instead of
    the registry's implementation, on plain and mesh operands alike."""
    def deco(fn: Callable) -> Callable:
        fn.__op_hook__ = op_cls  # type: ignore[attr-defined]
        return fn

    return deco


class Evaluator:
    """The reference evaluator; an alternate interpretation subclasses it and overrides a hook
    (never the walk). The hooks, in the order a value is computed:

    * ``call_function(fn, args)`` — a Call of a Function (the entry's too): selects a dispatch
      variant by ``shape_of`` of the arguments and evaluates the body;
    * ``eval_call(node, values, env)`` — an op Call, its operands' values in ``values``:
      checks the result size and calls ``eval_op``; override to compute something beside each
      op's value (``super().eval_call(...)`` computes the value);
    * ``eval_op(ctx, args)`` — the op on its operand values: an ``@op_hook(OpClass)`` method of
      the class when there is one, else ``on_mesh`` when an operand is a mesh value
      (``is_mesh_value``), else the registry's implementation;
    * ``on_mesh(ctx, impl, args)`` — an op on mesh values (default: the per-device driver over
      every device of the mesh, ``sharding.eval_on_mesh``);
    * ``after_node(node, values, value)`` — every node's value, once computed (default: the
      value unchanged);
    * ``shape_of(v)`` / ``is_mesh_value(v)`` / ``check_result_size(node, env)`` — how values
      of this interpretation look.

    ``eval_node`` / ``eval_expr`` / ``eval_loop`` are the walk (``ir.run_dag``)."""

    #: op class -> name of the ``@op_hook`` method implementing it (collected per subclass)
    op_hooks: ClassVar[dict[type, str]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        hooks = dict(cls.op_hooks)
        for name, fn in vars(cls).items():
            op_cls = getattr(fn, "__op_hook__", None)
            if op_cls is not None:
                hooks[op_cls] = name
        cls.op_hooks = hooks

    def __init__(self, session: Session):
        self.session = session
        self.contracts: list = []
        self.iterations = 0  # loop iterations so far (bounded by Limits.max_loop_iterations)

    # -- hooks ---------------------------------------------------------------------------------
    def shape_of(self, v: Any) -> tuple:
        return shape_of(v)

    def is_mesh_value(self, v: Any) -> bool:
        return is_mesh_value(v)

    def check_result_size(self, node: Call, env: Mapping[str, int]) -> None:
        _check_result_size(node, env)

    def call_function(self, fn: Function, args: list[Any]) -> Any:
        if fn.body is None:  # a dispatch prototype: select the variant by the argument shapes
            try:
                fn = select_variant(fn, [self.shape_of(a) for a in args])
            except TypeInferError as e:
                raise EvaluationError(f"dispatch of @{fn.name} on argument shapes "
                                      f"{[self.shape_of(a) for a in args]}: {e}") from None
        env = dim_env(fn.params, [self.shape_of(a) for a in args])
        values: dict[int, Any] = {id(p): a for p, a in zip(fn.params, args, strict=True)}
        return self.eval_expr(fn.body, values, env)

    def eval_call(self, node: Call, values: dict[int, Any], env: Mapping[str, int]) -> Any:
        args = tuple(values[id(a)] for a in node.args)
        if type(node.op) not in EVALUATORS:
            raise EvaluationError(f"{type(node.op).__name__}: the reference evaluator has "
                                  f"no implementation of this op yet")
        self.check_result_size(node, env)
        return self.eval_op(EvalCtx(node.op, node, node.checked_type, self.contracts, args, env),
                            args)

    def eval_op(self, ctx: EvalCtx, args: tuple) -> Any:
        hook = self.op_hooks.get(type(ctx.op))
        if hook is not None:
            return getattr(self, hook)(ctx, args)
        impl = EVALUATORS[type(ctx.op)]
        if any(self.is_mesh_value(a) for a in args) and \
                mesh_rule(ctx.op) is not MeshRule.COLLECTIVE:
            return self.on_mesh(ctx, impl, args)
        return impl(ctx, args)

    def on_mesh(self, ctx: EvalCtx, impl: Callable, args: tuple) -> Any:
        return eval_on_mesh(ctx, impl, args)

    def after_node(self, node: Expr, values: dict[int, Any], value: Any) -> Any:
        return value

    # -- the walk ------------------------------------------------------------------------------
    def eval_expr(self, root: Expr, values: dict[int, Any], env: Mapping[str, int]) -> Any:
        return run_dag(root, values, lambda node: self.eval_node(node, values, env))

    def eval_node(self, node: Expr, values: dict[int, Any], env: Mapping[str, int]) -> Any:
        if isinstance(node, Var):
            raise EvaluationError(f"Var {node.name} is not bound here (a free variable of the "
                                  f"body)")
        if isinstance(node, Constant):
            v = node.value
        elif isinstance(node, Tuple):
            v = tuple(values[id(f)] for f in node.fields)
        elif isinstance(node, TupleGetItem):
            v = values[id(node.tuple_value)][node.index]
        elif isinstance(node, GridRegionExpr):
            v = self.eval_loop(node, values, env)
        elif isinstance(node, Call) and isinstance(node.op, Function):
            v = self.call_function(resolved_target(node, self.session),
                                   [values[id(a)] for a in node.args])
        elif isinstance(node, Call):
            v = self.eval_call(node, values, env)
        else:
            raise EvaluationError(f"cannot evaluate a {type(node).__name__} node")
        return self.after_node(node, values, v)

    def eval_loop(self, node: GridRegionExpr, values: dict[int, Any],
                  env: Mapping[str, int]) -> Any:
        try:
            dom = resolve_grid_domain(node, dict(env))
        except TypeInferError as e:
            raise EvaluationError(f"GridRegionExpr: {e}") from None
        carried = [values[id(a)] for a in node.init_args]
        lim = limits()
        n = max(0, -((dom.start - dom.stop) // dom.step))  # len(dom) without its int64 cap
        if self.iterations + n > lim.max_loop_iterations:
            raise LimitError(f"evaluate: a GridRegionExpr over {dom} would bring the loop "
                             f"iterations to {self.iterations + n:,}, more than the limit "
                             f"max_loop_iterations (nested loops multiply); "
                             f"{lim.how('max_loop_iterations')}", "max_loop_iterations")
        self.iterations += n
        ivar_t = node.induction_var.checked_type if node.induction_var.has_type else None
        idt = ivar_t.dtype.storage if isinstance(ivar_t, TensorType) else np.int32
        for i in dom:
            bind = {id(node.induction_var): np.asarray(i, idt)}
            bind.update((id(v), c) for v, c in zip(node.carried_args, carried, strict=True))
            with loop_scope(values, bind) as it:  # loop-invariant values stay shared
                carried = [self.eval_expr(y, it, env) for y in node.yield_values]
        if len(carried) == 1:
            return carried[0]
        return tuple(carried)


@dataclass(frozen=True)
class Evaluation:
    """``evaluate(..., report=True)``: the result plus the contracts the oracle must apply, one
    ``(Call, OpContract)`` pair per evaluated Call whose result is not simply bit-exact (in
    evaluation order; a Call inside a loop reports once per iteration)."""

    value: Any
    contracts: tuple
    #: per output, its sound enclosure (filled in by the oracle's enclosing evaluation,
    #: ``oracle/enclosure_eval.py``; None when evaluated without)
    enclosures: Any = None
    #: the typed entry Function the evaluation ran (its Calls are those ``contracts`` name)
    entry_fn: Any = None


def evaluate(module: Module, entry: str, inputs: Sequence[np.ndarray], *,
             report: bool = False) -> Any:
    """Evaluate ``module[entry]`` on ``inputs`` (numpy arrays; rank-0 arrays for scalars).

    Returns the result value (an array, or a tuple for tuple results); with ``report=True`` an
    ``Evaluation`` holding the value and the per-Call contracts. Every value computed stays
    within ``tilefoundry.limits`` (``max_elements``, ``max_value_bytes``; a ``LimitError``
    names the op and the limit otherwise)."""
    value, ev = run(module, entry, inputs)
    return Evaluation(value, tuple(ev.contracts), entry_fn=ev.entry_fn) if report else value


def run(module: Module, entry: str, inputs: Sequence[np.ndarray],
        evaluator: type[Evaluator] = Evaluator) -> tuple[Any, Evaluator]:
    """``evaluate``'s driver: the result value and the evaluator that computed it (a subclass
    may compute more beside each value: the oracle's enclosures do)."""
    # importing the families registers their implementations
    from tilefoundry.semantics.evaluator import families  # noqa: F401

    if not isinstance(module, Module):
        raise EvaluationError(f"evaluate: expected a Module, got {type(module).__name__}")
    if not isinstance(entry, str):
        raise EvaluationError(f"evaluate: the entry must be a function name (str), got "
                              f"{entry!r}")
    if not isinstance(inputs, Sequence) or isinstance(inputs, str | bytes):
        raise EvaluationError(f"evaluate: inputs must be a sequence of numpy arrays, got "
                              f"{type(inputs).__name__}")
    with deep_recursion():
        try:
            return _run(module, entry, inputs, evaluator)
        except MemoryError:
            lim = limits()
            raise LimitError(f"evaluate @{entry}: out of memory while evaluating (every value "
                             f"was within max_value_bytes = {lim.max_value_bytes:,}); lower the "
                             f"limit max_value_bytes to refuse such programs up front, or free "
                             f"memory", "max_value_bytes") from None


def _run(module: Module, entry: str, inputs: Sequence[np.ndarray],
         evaluator: type[Evaluator]) -> tuple[Any, Evaluator]:
    session = Session()
    m = infer_module(module, session)
    fn = m[entry]
    if fn.body is None:
        try:
            chosen = select_variant(fn, [shape_of(x) for x in inputs])
        except TypeInferError as e:
            raise EvaluationError(f"dispatch of @{fn.name}: {e}") from None
        fn = chosen
    args = check_inputs(fn, list(inputs))
    ev = evaluator(session)
    ev.entry_fn = fn  # the typed entry (the chosen variant of a dispatch) the value came from
    return ev.call_function(fn, args), ev
