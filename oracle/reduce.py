"""The reducer: shrink a failing (program, inputs) pair at the IR level, keeping the failure.

``reduce_failure(module, entry, inputs, still_fails)`` applies these passes greedily until none
makes progress (each accepted step is re-checked with ``still_fails``, so the result fails for
the same reason class the caller's predicate tests):

0. **drop outputs** — when the entry returns a Tuple: remove an output that is an entry
   parameter returned unchanged (a *pass-through*), then any other output whose removal keeps
   the failure; a one-field Tuple becomes its field;
1. **cut downstream** — make an interior node the function's only output (smallest upstream
   first): everything after the failing op disappears;
2. **cut upstream** — replace a subexpression by a fresh input whose value is the reference
   value of that subexpression on the current inputs (largest subtrees first): everything
   before the failing op disappears, the failing op's operands become inputs;
3. **bypass** — replace an op by one of its operands of the same type (drop an op);
   **inline** — replace a call by the callee's body on its arguments when the program gets no
   larger (the callee is called nowhere else), so the passes reach the callee's ops;
4. **unshard** — ``erase_sharding`` when the program is sharded;
5. **shrink shapes** — for an elementwise program over one static shape, keep one element
   (the first element the predicate still fails on);
6. **simplify values** — replace input elements by 0 / 1 in halves (delta debugging) where the
   failure survives.

Passes 0–5 run to their fixpoint, then pass 6; when pass 6 changed a value, passes 0–5 run again
(and pass 6 after them when they changed the program), so at the end no output can be dropped
and no structural step applies on the final inputs (``Reduction.complete`` says whether that
fixpoint was reached within the budget).

Every candidate is first cleaned: entry parameters nothing reads (loop bodies included) are
dropped with their inputs — when that candidate is rejected, a second one keeps, for each
dimension (DimVar) no read parameter binds, the first unread parameter that binds it (a loop
extent or an attribute may need it) — and every function not reachable from the entry through
calls (transitively, loop bodies and dispatch variants included) is dropped. A candidate with more ops than the current program
(``program_ops``) is never accepted. A candidate the pipeline cannot type, evaluate or judge is
no reduction: any exception the predicate or type inference raises on a *candidate* rejects it
(exceptions that are not ``TilefoundryError`` are recorded in ``Reduction.rejected``); on the
original program they propagate.

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
    loop_children,
    operands,
    postorder,
    reachable,
)
from tilefoundry.semantics.types import TensorType, free_dimvars

__all__ = ["Reduction", "pass_through_outputs", "program_ops", "reachable_functions",
           "reduce_failure"]

Predicate = Callable[[Module, str, list], bool]


@dataclass(frozen=True)
class Reduction:
    module: Module
    entry: str
    inputs: tuple
    steps: tuple  # the accepted steps, in order (human-readable)
    checks: int  # predicate evaluations
    seconds: float
    complete: bool = True  # False when the budget ran out before the passes reached a fixpoint
    rejected: tuple = ()  # non-project exceptions that rejected candidates (first few, as text)

    @property
    def op_count(self) -> int:
        """Calls in the entry and every function reachable from it (``program_ops``)."""
        return program_ops(self.module, self.entry)


# ---------------------------------------------------------------------------------------------
# DAG utilities
# ---------------------------------------------------------------------------------------------
_children = operands


def _nodes(root: Expr) -> list[Expr]:
    """The nodes reachable from ``root`` outside loop bodies, in post order (operands first)."""
    return postorder(root, _children)


def _walk(root: Expr | None) -> list[Expr]:
    """Every node reachable from ``root``, loop bodies included (each once, any order)."""
    return [] if root is None else list(reachable(root, loop_children))


def _callees(fn: Function) -> list[Function]:
    """The functions ``fn`` calls directly (loop bodies included) and its dispatch variants."""
    out = [n.op for n in _walk(fn.body) if isinstance(n, Call) and isinstance(n.op, Function)]
    return out + list(fn.variants)


def _reachable_fns(module: Module, entry: str) -> list[Function]:
    by_name = {f.name: f for f in module.functions}
    seen: dict[str, Function] = {}
    stack = [module[entry]]
    while stack:
        f = stack.pop()
        if f.name in seen:
            continue
        seen[f.name] = f
        # a call names its callee; the module's definition of that name is what runs
        stack.extend(by_name.get(g.name, g) for g in _callees(f))
    return list(seen.values())


def reachable_functions(module: Module, entry: str) -> list[str]:
    """Names of the entry and of every function reachable from it through calls (transitively,
    inside loop bodies and dispatch variants too)."""
    return [f.name for f in _reachable_fns(module, entry)]


def program_ops(module: Module, entry: str) -> int:
    """The program's size in ops: Call nodes (op applications and function calls) in the entry
    and in every function reachable from it, loop bodies included, each node once."""
    return sum(1 for f in _reachable_fns(module, entry) for n in _walk(f.body)
               if isinstance(n, Call))


def pass_through_outputs(module: Module, entry: str) -> list[int]:
    """Indices of the entry's outputs that are one of its parameters returned unchanged (the
    output expression *is* a parameter Var). The body is output 0 unless it is a Tuple."""
    fn = module[entry]
    if fn.body is None:
        return []
    params = {id(p) for p in fn.params}
    fields = fn.body.fields if isinstance(fn.body, Tuple) else (fn.body,)
    return [i for i, f in enumerate(fields) if id(f) in params]


def _rebuild(root: Expr, repl: dict[int, Expr], *, fold: bool = False) -> Expr:
    """``root`` with the nodes in ``repl`` (by id) replaced; sharing is preserved. ``fold``:
    a TupleGetItem of a (rebuilt) Tuple becomes that field."""
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
            if fold and isinstance(t, Tuple) and 0 <= n.index < len(t.fields):
                memo[id(n)] = t.fields[n.index]
            else:
                memo[id(n)] = n if t is n.tuple_value else TupleGetItem(t, n.index)
        elif isinstance(n, GridRegionExpr):
            ins = tuple(memo[id(a)] for a in n.init_args)
            memo[id(n)] = n if all(a is b for a, b in zip(ins, n.init_args, strict=True)) else \
                GridRegionExpr(n.induction_var, n.carried_args, ins, n.body, n.yield_values,
                               n.extent, n.step, n.start)
        else:
            memo[id(n)] = n
    return memo[id(root)]


def _prune_functions(module: Module, entry: str) -> Module:
    """``module`` without the functions the entry cannot reach (the same object when none)."""
    live = set(reachable_functions(module, entry))
    if all(f.name in live for f in module.functions):
        return module
    return Module(tuple(f for f in module.functions if f.name in live), module.target,
                  module.topology)


def _with_body(module: Module, entry: str, params: tuple, body: Expr) -> Module:
    old = module[entry]
    fn = Function(old.name, params, body, None, label=old.label)
    fns = tuple(fn if f.name == entry else f for f in module.functions)
    return _prune_functions(Module(fns, module.target, module.topology), entry)


def _dims_of(p: Var) -> set[str]:
    t = p.type
    if not isinstance(t, TensorType):
        return set()
    return {v.name for d in t.shape for v in free_dimvars(d)}


def _prune_params(module: Module, entry: str, inputs: list, *,
                  keep_dims: bool = False) -> tuple[Module, list]:
    """Drop the entry parameters nothing reads (loop bodies included) with their inputs. With
    ``keep_dims``, an unread parameter stays when it is the first to bind a dimension (DimVar)
    that no read parameter binds."""
    fn = module[entry]
    if fn.body is None or len(inputs) != len(fn.params):
        return module, inputs
    used = {id(n) for n in _walk(fn.body)}
    read = [id(p) in used for p in fn.params]
    if keep_dims:
        bound = set().union(*(_dims_of(p) for p, r in zip(fn.params, read, strict=True) if r))
        for i, p in enumerate(fn.params):
            if not read[i] and _dims_of(p) - bound:
                read[i] = True
                bound |= _dims_of(p)
    if all(read):
        return module, inputs
    keep = [(p, x) for p, x, r in zip(fn.params, inputs, read, strict=True) if r]
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
        self.rejected: list[str] = []
        self.deadline = time.monotonic() + budget_s

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def _judge(self, module: Module, inputs: list) -> bool:
        from tilefoundry.semantics.typeinfer.core import Session
        from tilefoundry.semantics.typeinfer.functions import infer_module

        self.checks += 1
        infer_module(module, Session())
        return bool(self.pred(module, self.entry, list(inputs)))

    def fails(self, module: Module, inputs: list) -> bool:
        """Does the *candidate* still fail? Anything it raises makes it no reduction."""
        try:
            return self._judge(module, inputs)
        except TilefoundryError:
            return False  # an ill-typed or unevaluable candidate program is no reduction
        except Exception as e:  # a crash elsewhere is a different failure
            if len(self.rejected) < 8:
                self.rejected.append(f"{type(e).__name__}: {e}")
            return False

    def accept(self, module: Module, inputs: list, step: str) -> bool:
        module = _prune_functions(module, self.entry)
        if program_ops(module, self.entry) > program_ops(self.module, self.entry):
            return False
        tries = [_prune_params(module, self.entry, list(inputs))]
        # an unread parameter may still bind a dimension (a DimVar a loop extent or an
        # attribute uses): when the pruned candidate is rejected, the one keeping a parameter
        # for each dimension no read parameter binds gets a try
        binders = _prune_params(module, self.entry, list(inputs), keep_dims=True)
        if binders[0] is not tries[0][0]:
            tries.append(binders)
        for m, xs in tries:
            if self.fails(m, xs):
                self.module, self.inputs = m, list(xs)
                self.steps.append(step)
                return True
        return False

    # -- pass 0: drop outputs ------------------------------------------------------------------
    def drop_outputs(self) -> bool:
        fn = self.module[self.entry]
        if not isinstance(fn.body, Tuple):
            return False
        fields = fn.body.fields
        passing = set(pass_through_outputs(self.module, self.entry))
        # pass-throughs first, then the other outputs, last first (later outputs are the
        # generator's leftovers more often than not)
        order = sorted(range(len(fields)), key=lambda i: (i not in passing, -i))
        if len(fields) > 1:
            for i in order:
                if self.out_of_time():
                    return False
                rest = fields[:i] + fields[i + 1:]
                what = "pass-through" if i in passing else "output"
                if self.accept(_with_body(self.module, self.entry, fn.params, Tuple(rest)),
                               self.inputs, f"drop {what} {i}"):
                    return True
            return False
        return self.accept(_with_body(self.module, self.entry, fn.params, fields[0]),
                           self.inputs, "unwrap the one-output tuple") if fields else False

    # -- pass 1: cut downstream ------------------------------------------------------------
    def cut_downstream(self) -> bool:
        fn = self.module[self.entry]
        if fn.body is None:
            return False
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
        if body is None:
            return False
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
        if body is None:
            return False
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

    # -- pass 3b: inline a call ------------------------------------------------------------------
    def inline(self) -> bool:
        """Replace a call to a normal function by the callee's body on the call's arguments
        (a get of the callee's returned Tuple becomes the field), so the other passes reach
        the callee's ops. Accepted only when the program gets no larger: the callee is then
        called nowhere else and goes with the call."""
        fn = self.module[self.entry]
        body = fn.body
        if body is None:
            return False
        defs = {f.name: f for f in self.module.functions}
        for n in _nodes(body):
            if self.out_of_time():
                return False
            if not (isinstance(n, Call) and isinstance(n.op, Function)):
                continue
            callee = defs.get(n.op.name, n.op)
            if callee.body is None or callee.variants or len(callee.params) != len(n.args):
                continue
            sub = _rebuild(callee.body, {id(p): a for p, a in zip(callee.params, n.args,
                                                                  strict=True)})
            new_body = _rebuild(body, {id(n): sub}, fold=True)
            if self.accept(_with_body(self.module, self.entry, fn.params, new_body),
                           self.inputs, f"inline @{callee.name}"):
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
        if fn.body is None:
            return False
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
    def _input_of(self, name: str) -> int | None:
        """The current position of the entry parameter ``name`` (None once it is gone)."""
        for i, p in enumerate(self.module[self.entry].params):
            if p.name == name:
                return i if i < len(self.inputs) else None
        return None

    def simplify_values(self) -> bool:
        """Delta debugging over each input's elements. An accepted step may drop parameters
        (``accept`` prunes unread ones), which shifts the input list: every step finds its
        input again by parameter name and re-reads its current value (walking the list this
        pass started with was the IndexError / reshape ValueError of issue 16)."""
        progress = False
        for name in [p.name for p in self.module[self.entry].params]:
            for fill in (0, 1):
                i = self._input_of(name)
                if i is None:
                    break
                x = self.inputs[i]
                if not isinstance(x, np.ndarray) or x.size == 0 or x.dtype.kind == "b":
                    break
                shape, size = x.shape, x.size
                chunk = size
                while chunk >= 1 and not self.out_of_time():
                    for start in range(0, size, chunk):
                        i = self._input_of(name)
                        if i is None or np.shape(self.inputs[i]) != shape:
                            return progress
                        y = np.array(self.inputs[i], copy=True).reshape(-1)
                        seg = y[start:start + chunk]
                        target = np.asarray(fill).astype(y.dtype)
                        if np.all(seg == target):
                            continue
                        y[start:start + chunk] = target
                        xs = list(self.inputs)
                        xs[i] = y.reshape(shape)
                        if self.accept(self.module, xs, f"input {name}[{start}:{start + chunk}] "
                                                        f":= {fill}"):
                            progress = True
                    chunk //= 2
        return progress

    def clean(self) -> None:
        """Unused parameters and unreachable functions go first (a checked step)."""
        m, _ = _prune_params(_prune_functions(self.module, self.entry), self.entry,
                             list(self.inputs), keep_dims=True)
        if m is not self.module:
            self.accept(self.module, self.inputs, "drop unused parameters / unreachable "
                                                  "functions")

    def structural(self) -> bool:
        """The structural passes to their fixpoint (or the deadline); True if any step was
        accepted."""
        passes = (self.drop_outputs, self.cut_downstream, self.cut_upstream, self.bypass,
                  self.inline, self.unshard, self.shrink_shape)
        changed = False
        while not self.out_of_time() and any(p() for p in passes):
            changed = True
        return changed

    def run(self) -> bool:
        """Structure to a fixpoint, then values; simpler values can let more structure go
        (an output that failed only on the old values), so the structural passes run again
        after every value pass that changed something, and values again after structure that
        changed. True when that joint fixpoint was reached before the deadline."""
        self.clean()
        first = True
        while True:
            changed = self.structural()
            if self.out_of_time():
                return False
            if not (first or changed):
                return True
            first = False
            if not self.simplify_values():
                return not self.out_of_time()


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
    if not r._judge(module, list(inputs)):  # raises what the original raises
        raise TilefoundryError("reduce_failure: the predicate does not hold for the original "
                               "program; there is nothing to reduce")
    complete = r.run()
    return Reduction(r.module, entry, tuple(r.inputs), tuple(r.steps), r.checks,
                     time.monotonic() - t0, complete, tuple(r.rejected))


# re-exported for callers that want the same DAG walk
nodes = _nodes
__all__ += ["nodes"]
