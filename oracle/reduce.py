"""The reducer: shrink a failing (program, inputs) pair at the IR level, keeping the failure.

``reduce_failure(module, entry, inputs, still_fails)`` applies these passes greedily until none
makes progress (each accepted step is re-checked with ``still_fails``, so the result fails for
the same reason class the caller's predicate tests):

1. **cut downstream** — make an interior node the function's only output (smallest upstream
   first): everything after the failing op disappears;
2. **cut upstream** — replace a subexpression by a fresh input whose value is the reference
   value of that subexpression on the current inputs (largest subtrees first): everything
   before the failing op disappears, the failing op's operands become inputs;
3. **bypass** — replace an op by one of its operands of the same type (drop an op);
4. **unshard** — ``erase_sharding`` when the program is sharded;
5. **shrink shapes** — for an elementwise program over one static shape, keep one element
   (the first element the predicate still fails on);
6. **simplify values** — replace input elements by 0 / 1 in halves (delta debugging) where the
   failure survives.

Hypothesis' own shrinking works on how a program was *drawn*; this reducer works on the program
itself, so it also shrinks programs that did not come from a strategy (a user's model, a
reproducer from a bug report). Deterministic: no randomness, a fixed pass order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.evaluator.mesh import Sharded
from tilefoundry.semantics.ir import (
    Call,
    Expr,
    Function,
    GridRegionExpr,
    Module,
    Tuple,
    TupleGetItem,
    Var,
    operands,
)
from tilefoundry.semantics.types import TensorType

__all__ = ["Reduction", "reduce_failure"]

Predicate = Callable[[Module, str, list], bool]


@dataclass(frozen=True)
class Reduction:
    module: Module
    entry: str
    inputs: tuple
    steps: tuple  # the accepted steps, in order (human-readable)
    checks: int  # predicate evaluations
    seconds: float

    @property
    def op_count(self) -> int:
        return sum(1 for n in _nodes(self.module[self.entry].body)
                   if isinstance(n, Call))


# ---------------------------------------------------------------------------------------------
# DAG utilities
# ---------------------------------------------------------------------------------------------
_children = operands


def _nodes(root: Expr) -> list[Expr]:
    """The nodes reachable from ``root`` outside loop bodies, in post order (operands first)."""
    seen: set[int] = set()
    out: list[Expr] = []
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        n, ready = stack.pop()
        if ready:
            out.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        stack.extend((c, False) for c in reversed(_children(n)))
    return out


def _rebuild(root: Expr, repl: dict[int, Expr]) -> Expr:
    """``root`` with the nodes in ``repl`` (by id) replaced; sharing is preserved."""
    memo: dict[int, Expr] = dict(repl)
    for n in _nodes(root):
        if id(n) in memo:
            continue
        if isinstance(n, Call):
            args = tuple(memo[id(a)] for a in n.args)
            memo[id(n)] = n if all(a is b for a, b in zip(args, n.args, strict=True)) \
                else Call(n.op, args)
        elif isinstance(n, Tuple):
            fs = tuple(memo[id(f)] for f in n.fields)
            memo[id(n)] = n if all(a is b for a, b in zip(fs, n.fields, strict=True)) \
                else Tuple(fs)
        elif isinstance(n, TupleGetItem):
            t = memo[id(n.tuple_value)]
            memo[id(n)] = n if t is n.tuple_value else TupleGetItem(t, n.index)
        elif isinstance(n, GridRegionExpr):
            ins = tuple(memo[id(a)] for a in n.init_args)
            memo[id(n)] = n if all(a is b for a, b in zip(ins, n.init_args, strict=True)) else \
                GridRegionExpr(n.induction_var, n.carried_args, ins, n.body, n.yield_values,
                               n.extent, n.step, n.start)
        else:
            memo[id(n)] = n
    return memo[id(root)]


def _with_body(module: Module, entry: str, params: tuple, body: Expr) -> Module:
    old = module[entry]
    fn = Function(old.name, params, body, None, label=old.label)
    fns = tuple(fn if f.name == entry else f for f in module.functions)
    # drop functions nothing calls any more (the entry stays)
    called = {f.name for f in fns for n in (_nodes(f.body) if f.body is not None else [])
              if isinstance(n, Call) and isinstance(n.op, Function)}
    called |= {v.name for f in fns for v in f.variants}
    keep = tuple(f for f in fns if f.name == entry or f.name in called)
    return Module(keep, module.target, module.topology)


def _prune_params(module: Module, entry: str, inputs: list) -> tuple[Module, list]:
    fn = module[entry]
    used = {id(n) for n in _nodes(fn.body)}
    keep = [(p, x) for p, x in zip(fn.params, inputs, strict=True) if id(p) in used]
    if len(keep) == len(fn.params):
        return module, inputs
    params = tuple(p for p, _ in keep)
    return _with_body(module, entry, params, fn.body), [x for _, x in keep]


def _fresh_name(fn: Function, base: str) -> str:
    names = {p.name for p in fn.params}
    i = 0
    while f"{base}{i}" in names:
        i += 1
    return f"{base}{i}"


def _value_of(module: Module, entry: str, inputs: list, node: Expr) -> Any:
    """The reference value of ``node`` (a node of the entry's body) on ``inputs``."""
    from tilefoundry.semantics.evaluator.core import evaluate

    fn = module[entry]
    probe = Function(fn.name, fn.params, node, None)
    m = Module(tuple(probe if f.name == entry else f for f in module.functions), module.target,
               module.topology)
    return evaluate(m, entry, inputs)


def _plain_type(t: Any) -> bool:
    return isinstance(t, TensorType)


# ---------------------------------------------------------------------------------------------
# the reducer
# ---------------------------------------------------------------------------------------------
class _Reducer:
    def __init__(self, module: Module, entry: str, inputs: list, still_fails: Predicate,
                 budget_s: float):
        self.module, self.entry, self.inputs = module, entry, list(inputs)
        self.pred = still_fails
        self.checks = 0
        self.steps: list[str] = []
        self.deadline = time.monotonic() + budget_s

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def fails(self, module: Module, inputs: list) -> bool:
        self.checks += 1
        try:
            from tilefoundry.semantics.typeinfer.core import Session
            from tilefoundry.semantics.typeinfer.functions import infer_module

            infer_module(module, Session())
            return bool(self.pred(module, self.entry, list(inputs)))
        except TilefoundryError:
            return False  # an ill-typed or unevaluable candidate program is no reduction

    def accept(self, module: Module, inputs: list, step: str) -> bool:
        module, inputs = _prune_params(module, self.entry, inputs)
        if self.fails(module, inputs):
            self.module, self.inputs = module, inputs
            self.steps.append(step)
            return True
        return False

    # -- pass 1: cut downstream ------------------------------------------------------------
    def cut_downstream(self) -> bool:
        fn = self.module[self.entry]
        nodes = [n for n in _nodes(fn.body) if n is not fn.body and isinstance(n, Call)
                 and _plain_type(n.checked_type if n.has_type else None)]
        nodes.sort(key=lambda n: len(_nodes(n)))
        for n in nodes:
            if self.out_of_time():
                return False
            if self.accept(_with_body(self.module, self.entry, fn.params, n), self.inputs,
                           f"output := {type(n.op).__name__}"):
                return True
        return False

    # -- pass 2: cut upstream --------------------------------------------------------------
    def cut_upstream(self) -> bool:
        fn = self.module[self.entry]
        body = fn.body
        cands = [n for n in _nodes(body) if n is not body and isinstance(n, Call | GridRegionExpr
                                                                         | TupleGetItem)
                 and n.has_type and _plain_type(n.checked_type)]
        cands.sort(key=lambda n: -len(_nodes(n)))
        for n in cands:
            if self.out_of_time():
                return False
            try:
                value = _value_of(self.module, self.entry, self.inputs, n)
            except TilefoundryError:
                continue
            if isinstance(value, tuple):
                continue
            t = n.checked_type
            v = Var(_fresh_name(fn, "t"), TensorType(tuple(np.shape(value)) if not isinstance(
                value, Sharded) else tuple(t.shape), t.dtype, t.layout, t.storage))
            new_body = _rebuild(body, {id(n): v})
            if self.accept(_with_body(self.module, self.entry, (*fn.params, v), new_body),
                           [*self.inputs, value], f"input := {_label(n)}"):
                return True
        return False

    # -- pass 3: bypass an op ----------------------------------------------------------------
    def bypass(self) -> bool:
        fn = self.module[self.entry]
        body = fn.body
        for n in _nodes(body):
            if not isinstance(n, Call) or not n.has_type or self.out_of_time():
                continue
            for a in n.args:
                if a.has_type and a.checked_type == n.checked_type:
                    new_body = _rebuild(body, {id(n): a}) if n is not body else a
                    if self.accept(_with_body(self.module, self.entry, fn.params, new_body),
                                   self.inputs, f"drop {_label(n)}"):
                        return True
        return False

    # -- pass 4: unshard ---------------------------------------------------------------------
    def unshard(self) -> bool:
        from tilefoundry.semantics.evaluator.erasure import erase_sharding
        from tilefoundry.semantics.evaluator.mesh import unshard

        if not any(isinstance(x, Sharded) for x in self.inputs) and not any(
                isinstance(p.type, TensorType) and p.type.shard is not None
                for p in self.module[self.entry].params):
            return False
        try:
            m = erase_sharding(self.module)
        except TilefoundryError:
            return False
        return self.accept(m, [unshard(x) if isinstance(x, Sharded) else x
                               for x in self.inputs], "erase sharding")

    # -- pass 5: one element -----------------------------------------------------------------
    def shrink_shape(self) -> bool:
        fn = self.module[self.entry]
        shapes = {tuple(x.shape) for x in self.inputs if isinstance(x, np.ndarray)}
        nodes = _nodes(fn.body)
        if len(shapes) != 1 or any(isinstance(n, GridRegionExpr | Tuple | TupleGetItem)
                                   for n in nodes):
            return False
        (shape,) = shapes
        if not shape or int(np.prod(shape)) <= 1:
            return False
        types = [n.checked_type for n in nodes if n.has_type]
        if any(not isinstance(t, TensorType) or tuple(t.shape) != shape or t.shard is not None
               for t in types):
            return False
        from tilefoundry.semantics.ops.math import Binary, Unary
        from tilefoundry.semantics.ops.nn import Gelu, ReLU, Sigmoid, Silu, Tanh
        from tilefoundry.semantics.ops.tensor import Cast

        ew = (Binary, Unary, Cast, ReLU, Sigmoid, Tanh, Gelu, Silu)
        if not all(isinstance(n.op, ew) for n in nodes if isinstance(n, Call)):
            return False
        one = (1,) * len(shape)
        params = tuple(Var(p.name, TensorType(one, p.type.dtype, None, p.type.storage))
                       for p in fn.params)
        repl = {id(p): q for p, q in zip(fn.params, params, strict=True)}
        body = _rebuild(fn.body, repl)
        for flat in range(int(np.prod(shape))):
            if self.out_of_time():
                return False
            idx = np.unravel_index(flat, shape)
            xs = [np.array(x[idx], order="C").reshape(one) for x in self.inputs]
            if self.accept(_with_body(self.module, self.entry, params, body), xs,
                           f"shape {shape} -> {one} (element {tuple(int(i) for i in idx)})"):
                return True
        return False

    # -- pass 6: simplify values ---------------------------------------------------------------
    def simplify_values(self) -> bool:
        progress = False
        for i, x in enumerate(self.inputs):
            if not isinstance(x, np.ndarray) or x.size == 0 or x.dtype.kind == "b":
                continue
            for fill in (0, 1):
                flat = x.reshape(-1)
                chunk = flat.size
                while chunk >= 1 and not self.out_of_time():
                    for start in range(0, flat.size, chunk):
                        y = np.array(self.inputs[i], copy=True).reshape(-1)
                        seg = y[start:start + chunk]
                        target = np.asarray(fill).astype(y.dtype)
                        if np.all(seg == target):
                            continue
                        y[start:start + chunk] = target
                        xs = list(self.inputs)
                        xs[i] = y.reshape(x.shape)
                        if self.accept(self.module, xs, f"input {i}[{start}:{start + chunk}] "
                                                        f":= {fill}"):
                            progress = True
                    chunk //= 2
        return progress

    def run(self) -> None:
        passes = (self.cut_downstream, self.cut_upstream, self.bypass, self.unshard,
                  self.shrink_shape)
        while not self.out_of_time():
            if not any(p() for p in passes):
                break
        if not self.out_of_time():
            self.simplify_values()


def _label(n: Expr) -> str:
    if isinstance(n, Call):
        op = n.op
        kind = getattr(op, "kind", None)
        return f"{type(op).__name__}" + (f"({kind.value})" if hasattr(kind, "value") else "")
    return type(n).__name__


def reduce_failure(module: Module, entry: str, inputs: Sequence[Any], still_fails: Predicate,
                   *, budget_s: float = 60.0) -> Reduction:
    """Shrink ``(module, entry, inputs)`` while ``still_fails(module, entry, inputs)`` holds.

    ``still_fails`` must hold for the original; raises ``TilefoundryError`` otherwise."""
    t0 = time.monotonic()
    r = _Reducer(module, entry, list(inputs), still_fails, budget_s)
    if not r.fails(module, list(inputs)):
        raise TilefoundryError("reduce_failure: the predicate does not hold for the original "
                               "program; there is nothing to reduce")
    r.run()
    return Reduction(r.module, entry, tuple(r.inputs), tuple(r.steps), r.checks,
                     time.monotonic() - t0)


# re-exported for callers that want the same DAG walk
nodes = _nodes
__all__ += ["nodes"]
