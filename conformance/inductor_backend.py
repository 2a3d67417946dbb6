"""``InductorBackend``: the whole program as ONE ``torch.compile(fullgraph=True)`` function.

The second common torch path beside the eager ``torch`` backend (``torch_backend.py``): the
same op mapping — every HIR op becomes the torch call a user would write, unchanged — but
the entry function, with every call, dispatch and loop of the program, is one Python function
of torch tensors, compiled with ``torch.compile(fn, fullgraph=True)`` and Inductor's default
settings (``backend="inductor"``, no ``mode``, no ``options``: what a user gets), on CPU. The
conformance runner then judges what the compiled code returns; Inductor fuses the ops into C++
kernels, so where it computes a fused chain differently from op-by-op torch (a bf16 chain kept
in f32 and rounded once, a cast pair dropped), the verdicts show it.

How the program becomes one function: the eager backend's interpreter (``_Interpreter``) walks
the HIR DAG with Python control flow that depends only on the program and the input shapes
(the DAG order, a dispatch variant chosen by shape, a ``GridRegionExpr`` loop over its static
domain), so TorchDynamo traces straight through it and records only the torch calls: one FX
graph, which Inductor compiles. What differs from the eager run:

* constants are converted to torch tensors (by bits, ``to_torch``) **before** tracing, and the
  entry's inputs cross numpy <-> torch by bits outside the compiled function, as in the eager
  backend (bit views are not traced);
* the ``index_range`` run-time checks of Gather and RoPE cannot ``raise`` inside a graph (the
  condition depends on values): the traced interpreter defers them (``torch_backend._in_range``:
  the graph returns each check's index tensor and an any-bad flag, and an out-of-range entry
  reads entry 0 so the kernel never reads outside its operand); after the compiled call a set
  flag raises ``RunTimeCheckError`` with the eager backend's message. ``dispatch_envelope``
  at the entry is a check of shapes, made before the call;
* anything TorchDynamo cannot capture in one graph is **NOT_SUPPORTED**, with Dynamo's reason
  (``BackendUnsupportedError``): with ``fullgraph=True`` a graph break, a guard on a
  data-dependent value (CacheUpdate's and InsertSlice's run-time positions become Python ints
  in the torch mapping; so do their run-time checks) or a hit recompile limit is an exception,
  never a silent fallback to eager torch. An Inductor crash (lowering, C++ compilation) and
  any other exception propagates: an **ERROR** of the stack. Inductor's own aten fallback
  kernels inside the compiled graph (``topk``, for one) are part of the default settings.

Compilation happens in ``compile``: the compiled function is called once on inputs of ones of
the case's input shapes and dtypes (the protocol's ``input_specs``, ``protocol.py``; without
them, of the parameter types where those are static) — that call traces and compiles, its
values are discarded — so ``run`` only runs it (Dynamo's guards pass: same shapes, dtypes and
strides). Only without input specs and with a DimVar in a parameter shape does the first
``run`` compile; inputs outside a DimVar's envelope are left to ``run`` (its
``dispatch_envelope`` check).
``compile`` starts from a fresh Dynamo state (``torch._dynamo.reset()``: every case would
otherwise recompile the same code object until the recompile limit). ``stats`` holds the
last case's figures: ``graphs`` (FX graphs Dynamo captured), ``inductor_graphs`` (graphs
Inductor compiled or loaded from its FX graph cache), ``compile_s`` (the call that traced and
compiled) and ``run_s``. Capabilities are the eager backend's (the same mapping).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilefoundry.conformance.backend import Capabilities
from tilefoundry.conformance.torch_backend import (
    TorchBackend,
    _check_envelopes,
    _check_range,
    _Interpreter,
    _to_numpy,
    to_torch,
    torch_dtype,
)
from tilefoundry.errors import BackendUnsupportedError, InvalidArgumentError
from tilefoundry.semantics.ir import (
    Constant,
    Expr,
    Function,
    GridRegionExpr,
    Module,
    operands,
    reachable,
)
from tilefoundry.semantics.types import DimVar, TensorType

__all__ = ["InductorBackend"]


def _torch():
    import torch

    return torch


# ---------------------------------------------------------------------------------------------
# the traced interpreter
# ---------------------------------------------------------------------------------------------
class _TracedInterpreter(_Interpreter):
    """The eager interpreter with constants taken from a table converted before tracing and
    the ``index_range`` checks deferred (``checks`` a list)."""

    def __init__(self, session: Any, constants: dict[int, Any], checks: list):
        super().__init__(session, "cpu", checks)
        self.constants = constants

    def node(self, node: Expr, values: dict[int, Any], env: Any) -> Any:
        if isinstance(node, Constant):
            hit = self.constants.get(id(node))
            if hit is None:  # a constant the pre-pass did not see: a bug here, not torch's
                raise InvalidArgumentError("InductorBackend: a constant outside the "
                                           "converted table (the pre-pass missed it)")
            return hit
        return super().node(node, values, env)


def _children(e: Expr) -> list[Expr]:
    out = operands(e)
    if isinstance(e, GridRegionExpr):
        out = out + list(e.yield_values)
    return out


def _functions(module: Module, session: Any) -> list[Function]:
    """Every function body the interpreter may run: the module's functions and their
    variants, and each call target the session resolved (elaborated instances)."""
    fns: list[Function] = []
    for f in module.functions:
        fns.append(f)
        fns.extend(f.variants)
    for hit in getattr(session, "targets", {}).values():
        target = hit[1]
        if isinstance(target, Function):
            fns.append(target)
            fns.extend(target.variants)
    return fns


def _constants(module: Module, session: Any) -> dict[int, Any]:
    """Every Constant of the program as a CPU torch tensor with the same bits."""
    table: dict[int, Any] = {}
    for f in _functions(module, session):
        if f.body is None:
            continue
        for n in reachable(f.body, _children):
            if isinstance(n, Constant) and id(n) not in table:
                table[id(n)] = to_torch(n.value, "cpu")
    return table


# ---------------------------------------------------------------------------------------------
# what Dynamo cannot capture
# ---------------------------------------------------------------------------------------------
def _chain(e: BaseException) -> list[BaseException]:
    """``e`` and the exceptions it wraps (``inner_exception`` of Dynamo's backend failures,
    ``__cause__``, ``__context__``), each once."""
    out: list[BaseException] = []
    todo: list[BaseException | None] = [e]
    while todo:
        x = todo.pop(0)
        if x is None or any(x is y for y in out):
            continue
        out.append(x)
        todo += [getattr(x, "inner_exception", None), x.__cause__, x.__context__]
    return out


def _data_dependent(text: str) -> str | None:
    m = re.search(r"Could not guard on data-dependent expression (.+?) \(unhinted", text)
    if m is None:
        return None
    why = f"a guard on the data-dependent expression {m.group(1)}"
    cause = re.search(r"Caused by: (.+?)(?: \(_dynamo/|$| For more information)", text, re.M)
    if cause is not None:
        why += f", from `{cause.group(1).strip()}`"
    return why


def _untraceable(e: BaseException) -> str | None:
    """Why the program cannot be compiled as one graph, when ``e`` says so: a graph break
    under ``fullgraph=True`` (Dynamo's ``Unsupported``), or a guard on a data-dependent value
    (a ``UserError`` or ``GuardOnDataDependentSymNode`` from Dynamo, or one Inductor's lowering
    raised, wrapped in an ``InductorError``). None for anything else — an op that raises on
    the traced values (``... when making fake tensor call``), an Inductor crash, an internal
    Dynamo error: the stack's ERROR."""
    from torch._dynamo import exc as dexc
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    text = str(e)
    if isinstance(e, dexc.UserError | GuardOnDataDependentSymNode):
        why = _data_dependent(text)
    elif isinstance(e, dexc.Unsupported):
        why = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(e).__name__)
        if re.match(r"\w+ when making fake tensor call", why):
            return None  # the op itself raised (the eager run raises it too)
    elif isinstance(e, dexc.BackendCompilerFailed):
        inner = [x for x in _chain(e) if isinstance(x, GuardOnDataDependentSymNode)]
        why = _data_dependent(str(inner[0]) if inner else "")
        why = None if why is None else "Inductor's lowering: " + why
    else:
        return None
    if why is None:
        return None
    return why if len(why) <= 400 else why[:400] + " ..."


def _unsupported(e: BaseException, why: str) -> BackendUnsupportedError:
    return BackendUnsupportedError(f"torch.compile(fullgraph=True) cannot capture the program "
                                   f"in one graph ({type(e).__name__}): {why}")


# ---------------------------------------------------------------------------------------------
# the backend
# ---------------------------------------------------------------------------------------------
@dataclass
class _Compiled:
    entry: Function
    fn: Any  # the torch.compile'd program: (*tensors) -> (result, deferred checks)
    warm: bool = False  # traced and compiled (by compile's call on ones)
    stats: dict[str, Any] = field(default_factory=dict)


def _graph_counts() -> tuple[int, int]:
    """(FX graphs Dynamo captured, FX graphs Inductor compiled or loaded from its cache) so
    far in this process: Dynamo's ``unique_graphs`` counter and Inductor's FX-graph-cache
    counters (a miss compiles, a hit loads, a bypass compiles uncached)."""
    from torch._dynamo.utils import counters

    ind = counters["inductor"]
    return (int(counters["stats"]["unique_graphs"]),
            int(ind["fxgraph_cache_miss"] + ind["fxgraph_cache_hit"]
                + ind["fxgraph_cache_bypass"]))


def _spec_inputs(fn: Function, specs: tuple) -> list[Any] | None:
    """Inputs of ones of the case's input specs (None: a spec is not a plain or scalar array,
    or the shapes fail the entry's ``dispatch_envelope`` check, which ``run`` reports)."""
    from tilefoundry.errors import RunTimeCheckError

    torch = _torch()
    if len(specs) != len(fn.params) or any(s.kind not in ("array", "scalar") for s in specs):
        return None
    try:
        _check_envelopes(fn, [s.shape for s in specs])
    except RunTimeCheckError:
        return None
    try:
        return [torch.ones(s.shape, dtype=torch_dtype(s.dtype)) for s in specs]
    except Exception:  # a dtype torch cannot fill: the first run compiles, on the inputs
        return None


def _static_inputs(fn: Function) -> list[Any] | None:
    """Inputs of ones of the entry's parameter types (None: a shape is symbolic, or a
    parameter is not a tensor)."""
    torch = _torch()
    out = []
    for p in fn.params:
        t = p.checked_type if p.has_type else p.type
        if not isinstance(t, TensorType) or any(isinstance(d, DimVar) or not isinstance(d, int)
                                                for d in t.shape):
            return None
        out.append(torch.ones(tuple(t.shape), dtype=torch_dtype(t.dtype)))
    return out


_FORK_HOOK: list[bool] = []


def _fresh_compile_threads_after_fork() -> None:
    """torch 2.13's at-fork hook resets Inductor's compile *process* pool in a forked child but
    not its compile *thread* pool (``AsyncCompile.pool``, an ``lru_cache``d
    ``ThreadPoolExecutor``): a child forked after the parent compiled inherits an executor
    whose threads do not exist, and its next uncached compile waits forever (measured: a
    runner worker forked from a process that had compiled hung until the case timed out;
    docs/findings.md). Registered once, in the process that loads the backend — the runner's
    parent, before it forks its workers — it drops that cache in every forked child."""
    import os

    if _FORK_HOOK:
        return
    from torch._inductor.async_compile import AsyncCompile

    pool = getattr(AsyncCompile, "pool", None)
    if hasattr(pool, "cache_clear") and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=pool.cache_clear)
    _FORK_HOOK.append(True)


class InductorBackend:
    """PyTorch Inductor as a conformance backend (built-in name ``inductor``): the program
    compiled whole by ``torch.compile(fullgraph=True)`` with default settings, on CPU."""

    name = "inductor"

    def __init__(self) -> None:
        _fresh_compile_threads_after_fork()
        self._eager = TorchBackend("cpu")
        self.version = self._eager.version
        self.stats: dict[str, Any] = {}

    def capabilities(self) -> Capabilities:
        return self._eager.capabilities()

    def compile(self, module: Module, entry: str, input_specs: tuple = ()) -> _Compiled:
        torch = _torch()
        base = self._eager.compile(module, entry)  # type inference, as the eager backend
        constants = _constants(base.module, base.session)
        session = base.session

        def program(*args: Any) -> tuple[Any, tuple]:
            checks: list = []
            interp = _TracedInterpreter(session, constants, checks)
            return interp.call(base.entry, list(args)), tuple(checks)

        torch._dynamo.reset()  # a fresh Dynamo state per case (same code object each time)
        compiled = _Compiled(base.entry, torch.compile(program, fullgraph=True))
        self.stats = compiled.stats
        ones = _spec_inputs(base.entry, input_specs) if input_specs else \
            _static_inputs(base.entry)
        if ones is not None:
            from torch._dynamo.exc import TorchDynamoException

            try:
                self._call(compiled, ones, "compile_s")
                compiled.warm = True
            except (BackendUnsupportedError, TorchDynamoException):
                raise  # tracing or compiling failed: the program's failure, whatever the values
            except Exception:  # the compiled code failed on ones: run decides, on the inputs
                pass
        return compiled

    def _call(self, compiled: _Compiled, args: list[Any], key: str) -> tuple[Any, tuple]:
        torch = _torch()
        (g0, i0), t0 = _graph_counts(), time.perf_counter()
        try:
            with torch.no_grad():
                out = compiled.fn(*args)
        except Exception as e:
            why = _untraceable(e)
            if why is not None:
                raise _unsupported(e, why) from e
            raise
        finally:
            compiled.stats[key] = time.perf_counter() - t0
            g1, i1 = _graph_counts()
            compiled.stats["graphs"] = compiled.stats.get("graphs", 0) + g1 - g0
            compiled.stats["inductor_graphs"] = compiled.stats.get("inductor_graphs", 0) + i1 - i0
        return out

    def run(self, compiled: _Compiled, inputs: list[np.ndarray]) -> Any:
        _check_envelopes(compiled.entry, [tuple(np.shape(x)) for x in inputs])
        args = [to_torch(x, "cpu") for x in inputs]
        out, checks = self._call(compiled, args, "run_s" if compiled.warm else "compile_s")
        for op, what, idx, n, axis, bad in checks:
            if bool(bad):
                _check_range(op, what, idx, n, axis)  # raises RunTimeCheckError
        return _to_numpy(out)
