"""The malformed-input fuzz: only the project's own errors at every public entry point.

``tilefoundry selfcheck --fuzz-ir N`` and ``tests/conformance/test_fuzz_ir.py`` run it. Input
``i`` of a run with seed ``s`` is built from ``random.Random(f"{s}/{i}")`` and is one of five
families (in turn):

* ``program``: a generated program (``oracle/programs.py``) with one field of one node (an
  Expr, an Op, a Function, a type) replaced through its constructor (``dataclasses.replace``) by
  a perturbed or garbage value; when the constructor accepts it, the node takes the value and
  the program goes through the entry points;
* ``bypass``: the same, but the value is written with ``object.__setattr__`` — the frozen
  field's validation is bypassed, so the entry points must find it themselves;
* ``dsl-mutated``: a generated program's DSL source (``to_source``) with a few textual
  mutations (tokens replaced, swapped, deleted, numbers made huge), then ``parse_module``;
* ``dsl-garbage``: DSL source assembled from hostile snippets (towers of powers, huge
  repetitions, deep nesting, random tokens);
* ``api``: garbage arguments to the IR / op / type constructors, ``evaluate`` and ``compile``.

The entry points called on whatever was built: the constructors, ``infer_module``,
``evaluate``, ``to_text``, ``to_source`` / ``parse_module``, ``compile`` (the ``interp``
target). Every call must succeed or raise a ``TilefoundryError``; anything else is a *finding*,
counted by exception type and *site* (the innermost frame inside the package). Each input runs
in a worker process with an address-space limit (``memory_mb``; an allocation beyond it is a
MemoryError finding, not a swapped machine) under a watchdog: an input that takes longer than
``hang_s`` is a hang, its worker is killed and a fresh one continues with the next input.
The watchdog times each call (and the building of the input) separately.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import multiprocessing as mp
import os
import random
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilefoundry.errors import TilefoundryError

__all__ = ["FAMILIES", "FuzzReport", "run_fuzz", "run_inputs"]

FAMILIES = ("program", "bypass", "dsl-mutated", "dsl-garbage", "api")

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SELF = os.path.abspath(__file__)


# =============================================================================================
# outcomes
# =============================================================================================
@dataclass
class FuzzReport:
    inputs: int = 0
    calls: int = 0
    ok: int = 0
    project_errors: int = 0
    #: (family, entry point, exception type, site) -> count
    findings: Counter = field(default_factory=Counter)
    #: (family, input index, the call) of calls that ran past the watchdog
    hangs: list = field(default_factory=list)
    examples: dict = field(default_factory=dict)  # finding key -> (input index, message)
    seconds: float = 0.0

    @property
    def non_project(self) -> int:
        return sum(self.findings.values())

    def by_type(self) -> Counter:
        c: Counter = Counter()
        for (_fam, _call, exc, _site), n in self.findings.items():
            c[exc] += n
        return c

    def sites(self) -> Counter:
        c: Counter = Counter()
        for (_fam, call, exc, site), n in self.findings.items():
            c[(exc, site, call)] += n
        return c

    def merge(self, other: FuzzReport) -> None:
        self.inputs += other.inputs
        self.calls += other.calls
        self.ok += other.ok
        self.project_errors += other.project_errors
        self.findings.update(other.findings)
        self.hangs.extend(other.hangs)
        for k, v in other.examples.items():
            self.examples.setdefault(k, v)

    def format(self, top: int = 40) -> str:
        lines = [f"malformed-input fuzz: {self.inputs:,} inputs, {self.calls:,} calls into the "
                 f"entry points in {self.seconds:.1f} s",
                 f"  succeeded: {self.ok:,}; the project's own errors: {self.project_errors:,}",
                 f"  non-project exceptions: {self.non_project:,}; hangs over the watchdog: "
                 f"{len(self.hangs)}"]
        if self.findings:
            lines.append("  by type: " + ", ".join(f"{k} {v:,}"
                                                    for k, v in self.by_type().most_common()))
            lines.append(f"  by site ({len(self.sites())} distinct):")
            for (exc, site, call), n in self.sites().most_common(top):
                key = next(k for k in self.examples if k[1:] == (call, exc, site))
                idx, msg = self.examples[key]
                lines.append(f"    {n:6,}  {exc} at {site} (in {call}; e.g. input {idx}: "
                             f"{msg[:120]})")
        for fam, idx, what in self.hangs[:top]:
            lines.append(f"  hang: input {idx} ({fam}) in {what}")
        return "\n".join(lines)


def _site(tb: Any) -> str:
    """The innermost frame inside the package (not this module), as ``path:line``."""
    site = "?"
    for fr, line in traceback.walk_tb(tb):
        fn = os.path.abspath(fr.f_code.co_filename)
        if fn.startswith(_ROOT + os.sep) and fn != _SELF and ".venv" not in fn:
            site = f"{os.path.relpath(fn, _ROOT)}:{line}"
    return site


#: in a watched worker: a callback telling the watchdog a call starts (each call is timed)
_BEAT: list[Callable[[str], None]] = []


class _Calls:
    """Runs entry-point calls of one input, recording each outcome."""

    def __init__(self, report: FuzzReport, family: str, index: int):
        self.r, self.family, self.index = report, family, index

    def __call__(self, name: str, fn: Callable, /, *args: Any, **kw: Any) -> tuple[bool, Any]:
        self.r.calls += 1
        if _BEAT:  # the watchdog times each call
            _BEAT[0](name)
        try:
            out = fn(*args, **kw)
        except TilefoundryError:
            self.r.project_errors += 1
            return False, None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            key = (self.family, name, type(e).__name__, _site(e.__traceback__))
            self.r.findings[key] += 1
            if key not in self.r.examples:
                try:
                    msg = str(e)
                except BaseException:
                    msg = "<unprintable>"
                self.r.examples[key] = (self.index, msg.replace("\n", " "))
            return False, None
        self.r.ok += 1
        return True, out


# =============================================================================================
# garbage values
# =============================================================================================
class _Weird:
    def __repr__(self) -> str:
        return "<weird>"


def _garbage(rng: random.Random, depth: int = 0) -> Any:
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.types import DimVar

    F32, I32, BF16, F8E4M3FN, I64 = (DType.F32, DType.I32, DType.BF16, DType.FP8E4M3,
                                     DType.I64)

    pool: list[Callable[[], Any]] = [
        lambda: None, lambda: True, lambda: False, lambda: 0, lambda: -1, lambda: 1,
        lambda: 1 << 62, lambda: 1 << 64, lambda: -(1 << 63), lambda: 10 ** 400,
        lambda: float("inf"), lambda: float("-inf"), lambda: float("nan"), lambda: 1e308,
        lambda: 0.5, lambda: "x", lambda: "", lambda: "N", lambda: b"\x00",
        lambda: (), lambda: (1,), lambda: (1 << 62,), lambda: (0, 0), lambda: (-1, 2),
        lambda: (None,), lambda: ("a", 1), lambda: (float("inf"), 2), lambda: [1, 2],
        lambda: {}, lambda: {"a": 1}, lambda: _Weird(), lambda: np.array([1, 2]),
        lambda: np.zeros((2, 2), np.float32), lambda: np.int64(3), lambda: np.float32(1.5),
        lambda: np.array(5), lambda: F32, lambda: I32, lambda: BF16, lambda: F8E4M3FN,
        lambda: I64, lambda: DimVar("N", 1, 8), lambda: DimVar("Q", 2, 1 << 40),
        lambda: object, lambda: print, lambda: 1j, lambda: range(3), lambda: {1, 2},
    ]
    if depth < 2:
        pool += [lambda: tuple(_garbage(rng, depth + 1) for _ in range(rng.randrange(1, 4))),
                 lambda: _nest(rng.randrange(50, 400))]
    return rng.choice(pool)()


def _nest(n: int) -> Any:
    v: Any = 1
    for _ in range(n):
        v = (v,)
    return v


def _perturb(rng: random.Random, v: Any) -> Any:
    """A value near ``v`` (kept in kind) or garbage."""
    if rng.random() < 0.4:
        return _garbage(rng)
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return rng.choice([v + 1, v - 1, -v, 0, v * (1 << 40), 1 << 62, 1 << 64, -1])
    if isinstance(v, float):
        return rng.choice([-v, math.inf, math.nan, v * 1e300, 0.0])
    if isinstance(v, str):
        return rng.choice([v + "_", "", "1x", v.upper(), "λ", v * 3])
    if isinstance(v, tuple):
        if not v:
            return (_garbage(rng),)
        k = rng.randrange(len(v))
        op = rng.randrange(5)
        if op == 0:
            return v[:k] + v[k + 1:]
        if op == 1:
            return (*v, v[k])
        if op == 2:
            return (*v[:k], _perturb(rng, v[k]), *v[k + 1:])
        if op == 3:
            return tuple(reversed(v))
        return v * rng.choice([2, 50])
    if isinstance(v, enum.Enum):
        members = list(type(v))
        return rng.choice(members) if rng.random() < 0.5 else v.value
    if isinstance(v, np.ndarray):
        return rng.choice([v.astype(np.float64), v.reshape(-1), np.zeros((0,), v.dtype),
                           np.array([v, v]) if v.size < 64 else v, v.T])
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return _garbage(rng)
    return _garbage(rng)


# =============================================================================================
# the families
# =============================================================================================
def _nodes(module: Any) -> list[Any]:
    """Every mutable-in-principle object of a module: Expr nodes, Ops, Functions, types."""
    from tilefoundry.semantics.ir import Call, Expr, Function, GridRegionExpr, operands

    out: list[Any] = []
    seen: set[int] = set()
    stack: list[Any] = list(module.functions)
    while stack and len(out) < 5000:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        out.append(n)
        if isinstance(n, Function):
            stack.extend(n.params)
            stack.extend(n.variants)
            if n.body is not None:
                stack.append(n.body)
            if n.return_type is not None:
                stack.append(n.return_type)
        elif isinstance(n, Expr):
            stack.extend(operands(n))
            if isinstance(n, Call):
                stack.append(n.op)
            if isinstance(n, GridRegionExpr):
                stack.extend((n.body, n.induction_var, *n.carried_args, *n.yield_values))
            t = getattr(n, "type", None)
            if dataclasses.is_dataclass(t):
                stack.append(t)
        elif dataclasses.is_dataclass(n):
            for f in dataclasses.fields(n):
                v = getattr(n, f.name)
                if dataclasses.is_dataclass(v) and not isinstance(v, type):
                    stack.append(v)
    return out


def _forget_caches(module: Any) -> None:
    from tilefoundry.semantics.ir import Expr

    for n in _nodes(module):
        if isinstance(n, Expr):
            n.__dict__.pop("_hash", None)
            n.__dict__.pop("_checked_type", None)


def _program(rng: random.Random) -> Any:
    from tilefoundry.oracle.program_motifs import MOTIF_RATE
    from tilefoundry.oracle.programs import generate_program

    # with the under-drawn shapes (narrow chains, float selects) drawn on a share of the steps
    return generate_program(rng.randrange(1 << 30), max_ops=rng.randrange(1, 9),
                            motifs=MOTIF_RATE)


def _run_program(call: _Calls, rng: random.Random, gp: Any, module: Any) -> None:
    from tilefoundry.compiler.pipeline import compile as tf_compile
    from tilefoundry.semantics.dsl import parse_module, to_source
    from tilefoundry.semantics.evaluator.core import evaluate
    from tilefoundry.semantics.printer import to_text
    from tilefoundry.semantics.typeinfer import infer_module

    call("infer_module", infer_module, module)
    call("to_text", to_text, module)
    ok, src = call("to_source", to_source, module)
    if ok:
        call("parse_module", parse_module, src)
    inputs = list(gp.inputs)
    if rng.random() < 0.3 and inputs:
        k = rng.randrange(len(inputs))
        inputs[k] = _perturb(rng, inputs[k])
    call("evaluate", evaluate, module, gp.entry, inputs)
    if gp.mesh is None and rng.random() < 0.5:
        shapes = [getattr(x, "shape", x) for x in inputs]
        call("compile", tf_compile, module, gp.entry, shapes, "interp")


def _mutate_node(rng: random.Random, module: Any, bypass: bool,
                 call: _Calls) -> bool:
    nodes = [n for n in _nodes(module) if dataclasses.is_dataclass(n)
             and dataclasses.fields(n)]
    if not nodes:
        return False
    node = rng.choice(nodes)
    f = rng.choice(dataclasses.fields(node))
    new = _perturb(rng, getattr(node, f.name))
    if bypass:
        object.__setattr__(node, f.name, new)
        return True
    ok, _ = call(f"{type(node).__name__}()", dataclasses.replace, node, **{f.name: new})
    if ok:
        object.__setattr__(node, f.name, new)
        _forget_caches(module)
    return ok


def family_program(call: _Calls, rng: random.Random, bypass: bool) -> None:
    gp = _program(rng)
    if _mutate_node(rng, gp.module, bypass, call):
        _run_program(call, rng, gp, gp.module)


_TOKENS = ["(", ")", "[", "]", ",", ":", "=", "+", "*", "**", "//", "-", "0", "1", "-1",
           "10 ** 10 ** 10", "1e400", "10.0 ** 400", "(1,) * 10 ** 9", "None", "True", "'s'",
           "f32", "i32", "x", "N", "tile", "DimVar", "def", "return", "@func", "lambda",
           "\n", "    ", "1 << 62", "2 ** 64", "...", "Tensor", "nn", "zeros", "__class__"]


def _mutate_text(rng: random.Random, src: str) -> str:
    import re

    toks = re.findall(r"\w+|\s+|.", src)
    for _ in range(rng.randrange(1, 4)):
        if not toks:
            break
        k = rng.randrange(len(toks))
        op = rng.randrange(5)
        if op == 0:
            toks[k] = rng.choice(_TOKENS)
        elif op == 1:
            del toks[k]
        elif op == 2:
            toks.insert(k, rng.choice(_TOKENS))
        elif op == 3:
            nums = [i for i, t in enumerate(toks) if t.isdigit()]
            if nums:
                toks[rng.choice(nums)] = rng.choice(["0", "1 << 62", "10 ** 30", "2 ** 64",
                                                     "-5", "10 ** 10 ** 10", "1e308"])
        else:
            j = rng.randrange(len(toks))
            toks[k], toks[j] = toks[j], toks[k]
    return "".join(toks)


def family_dsl_mutated(call: _Calls, rng: random.Random) -> None:
    from tilefoundry.semantics.dsl import parse_module, to_source
    from tilefoundry.semantics.typeinfer import infer_module

    gp = _program(rng)
    ok, src = call("to_source", to_source, gp.module)
    if not ok:
        return
    ok, m = call("parse_module", parse_module, _mutate_text(rng, src))
    if ok:
        call("infer_module", infer_module, m)


_HEAD = "from tilefoundry.semantics.dsl import *\n"
_SNIPPETS = [
    "N = 10 ** 10 ** 10\n", "K = 10.0 ** 400\n", "S = (1,) * 10 ** 9\n", "T = 'ab' * 10 ** 9\n",
    "N = DimVar('N', 1, 1 << 62)\n", "N = DimVar('N', 2, 2 ** 64)\n", "Z = 2 ** -10000\n",
    "A = 1 << 10 ** 6\n", "B = [0] * 10 ** 10\n", "C = -(10 ** 400)\n", "D = 1 / 0\n",
    "E = 7 % 0\n", "F = 5 // 0\n", "G = 1e308 * 10\n", "H = float('nan')\n",
    "M = Mesh((2, 2), ('a', 'b'))\n",
]


def _deep(rng: random.Random) -> str:
    n = rng.choice([50, 200, 1000, 5000])
    kind = rng.randrange(3)
    if kind == 0:
        return "X = " + "(" * n + "1" + ")" * n + "\n"
    if kind == 1:
        return "X = " + " + ".join(["1"] * n) + "\n"
    return "X = " + "-" * n + "1\n"


def _fn_source(rng: random.Random) -> str:
    shape = rng.choice(["(4,)", "(1 << 62,)", "(N,)", "(None,)", "('a',)", "(-1,)", "(2 ** 64,)",
                        "(4, 4)", "()", "(float('inf'),)", "(1e400,)"])
    body = rng.choice([
        "    return x + x\n", "    return zeros(" + shape + ", f32)\n",
        "    y = x\n" + "    y = y + x\n" * rng.choice([3, 300]) + "    return y\n",
        "    return f(x)\n", "    return x @ x\n", "    return reshape(x, " + shape + ")\n",
        "    return cast(x, i32)\n", "    return sum(x, axis=" + rng.choice(["0", "9", "-7",
                                                                              "(0, 0)"]) + ")\n",
    ])
    dt = rng.choice(["f32", "i32", "bf16", "fp8e4m3", "junk", "None"])
    return f"@func\ndef f(x: Tensor[{shape}, {dt}]) -> Tensor[{shape}, {dt}]:\n{body}"


def family_dsl_garbage(call: _Calls, rng: random.Random) -> None:
    from tilefoundry.semantics.dsl import parse_module
    from tilefoundry.semantics.typeinfer import infer_module

    parts = [_HEAD]
    for _ in range(rng.randrange(1, 4)):
        k = rng.randrange(4)
        if k == 0:
            parts.append(rng.choice(_SNIPPETS))
        elif k == 1:
            parts.append(_deep(rng))
        elif k == 2:
            parts.append(_fn_source(rng))
        else:
            parts.append(" ".join(rng.choice(_TOKENS) for _ in range(rng.randrange(1, 30)))
                         + "\n")
    src = "".join(parts)
    ok, m = call("parse_module", parse_module, src)
    if ok:
        call("infer_module", infer_module, m)


def _api_targets() -> list[Any]:
    from tilefoundry.semantics import ir, types
    from tilefoundry.semantics.ops import ALL_OPS

    classes: list[Any] = list(ALL_OPS)
    classes += [ir.Var, ir.Constant, ir.Call, ir.Tuple, ir.TupleGetItem, ir.Function,
                ir.GridRegionExpr, ir.Module, ir.DimVarRangePat]
    classes += [getattr(types, n) for n in ("TensorType", "DimVar", "Layout", "Mesh",
                                            "ShardLayout", "Split", "Partial", "TupleType",
                                            "DimAdd", "DimMul", "DimFloorDiv", "DimMin")
                if hasattr(types, n)]
    return classes


def _valid_args(cls: Any) -> dict[str, Any] | None:
    """Keyword arguments that construct ``cls`` (from its defaults), or None."""
    kw = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        if not f.init:
            continue
        return None
    return kw


def _small_program(rng: random.Random) -> tuple[Any, str, list]:
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ir import Call, Function, Module, Var
    from tilefoundry.semantics.ops import Binary, BinaryKind
    from tilefoundry.semantics.types import TensorType

    t = TensorType((4,), DType.F32)
    x = Var("x", t)
    fn = Function("f", (x,), Call(Binary(BinaryKind.ADD), (x, x)), t)
    return Module((fn,)), "f", [np.zeros(4, np.float32)]


def family_api(call: _Calls, rng: random.Random) -> None:
    from tilefoundry.compiler.pipeline import compile as tf_compile
    from tilefoundry.semantics.evaluator.core import evaluate
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ir import Call, Function, Module, Var
    from tilefoundry.semantics.ops import Conv2D, MatMul, Zeros
    from tilefoundry.semantics.printer import to_text
    from tilefoundry.semantics.typeinfer import infer_module
    from tilefoundry.semantics.types import TensorType

    F32, I32 = DType.F32, DType.I32
    k = rng.randrange(6)
    if k <= 1:  # a constructor with garbage arguments
        cls = rng.choice(_api_targets())
        # as many arguments as the class takes (a wrong arity is Python's own TypeError)
        fs = [f for f in dataclasses.fields(cls) if f.init]
        need = sum(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                   for f in fs)
        args = [_garbage(rng) for _ in fs[:rng.randrange(need, len(fs) + 1)]]
        call(f"{cls.__name__}()", cls, *args)
    elif k == 2:  # evaluate with garbage inputs / entry
        m, entry, inputs = _small_program(rng)
        if rng.random() < 0.5:
            inputs = [_garbage(rng) for _ in range(rng.randrange(0, 3))]
        else:
            entry = _garbage(rng) if rng.random() < 0.3 else entry
        call("evaluate", evaluate, m, entry, inputs)
    elif k == 3:  # compile with garbage shapes / target / entry
        m, entry, _ = _small_program(rng)
        shapes: Any = rng.choice([[_garbage(rng)], [(4,)], _garbage(rng), [("a",)], [(None,)],
                                  [(math.inf,)], [(1 << 62,)], [(-4,)]])
        target = rng.choice(["interp", "interp", _garbage(rng)])
        call("compile", tf_compile, m, entry, shapes, target)
    elif k == 4:  # huge values through a valid program
        n = rng.choice([1 << 62, 1 << 40, 10 ** 5, 3, 1 << 31])
        which = rng.randrange(3)
        if which == 0:
            t = TensorType((n,), F32)
            body: Any = Call(Zeros((n,), F32), ())
            params: tuple = ()
            inputs: list = []
        elif which == 1:
            a, b = Var("a", TensorType((n, 1), F32)), Var("b", TensorType((1, n), F32))
            t = TensorType((n, n), F32)
            body = Call(MatMul(), (a, b))
            params = (a, b)
            inputs = [np.zeros((min(n, 10 ** 5), 1), np.float32),
                      np.zeros((1, min(n, 10 ** 5)), np.float32)]
        else:
            x = Var("x", TensorType((1, 1, 4, 4), F32))
            w = Var("w", TensorType((1, 1, 1, 1), F32))
            bias = Var("bias", TensorType((1,), F32))
            conv_args = rng.choice([dict(padding=(n, 0)), dict(stride=(1 << 64, 1)),
                                    dict(groups=True), dict(dilation=(0, 1)),
                                    dict(padding=np.array([1, 1]))])
            ok, op = call("Conv2D()", _conv, Conv2D, conv_args)
            if not ok:
                return
            t = TensorType((1, 1, 4, 4), F32)
            body = Call(op, (x, w, bias))
            params = (x, w, bias)
            inputs = [np.zeros((1, 1, 4, 4), np.float32), np.zeros((1, 1, 1, 1), np.float32),
                      np.zeros((1,), np.float32)]
        ok, fn = call("Function()", Function, "f", params, body, t)
        if not ok:
            return
        ok, m = call("Module()", Module, (fn,))
        if not ok:
            return
        call("infer_module", infer_module, m)
        call("evaluate", evaluate, m, "f", inputs)
        if rng.random() < 0.3:
            call("compile", tf_compile, m, "f", [x.shape for x in inputs], "interp")
    else:  # deep structure: nested calls, long chains, self-referencing dispatch
        depth = rng.choice([130, 200, 2000, 10 ** 4])
        t = TensorType((2,), I32)
        x = Var("x", t)
        ok, m = call("chain", _chain, x, t, depth, rng.randrange(3))
        if not ok:
            return
        call("infer_module", infer_module, m)
        call("to_text", to_text, m)
        from tilefoundry.semantics.dsl import to_source

        call("to_source", to_source, m)
        call("evaluate", evaluate, m, m.functions[-1].name, [np.zeros(2, np.int32)])
        _ = I32


def _conv(cls: Any, kw: dict) -> Any:
    return cls(**kw)


def _chain(x: Any, t: Any, depth: int, kind: int) -> Any:
    from tilefoundry.semantics.ir import Call, Function, GridRegionExpr, Module, Var
    from tilefoundry.semantics.ops import Binary, BinaryKind

    if kind == 0:  # a long op chain
        e = x
        for _ in range(depth):
            e = Call(Binary(BinaryKind.ADD), (e, x))
        return Module((Function("f", (x,), e, t),))
    if kind == 1:  # nested calls: f_k calls f_{k-1}
        fns = []
        prev = Function("f0", (x,), Call(Binary(BinaryKind.ADD), (x, x)), t)
        fns.append(prev)
        for i in range(1, min(depth, 400)):
            y = Var("x", t)
            prev = Function(f"f{i}", (y,), Call(prev, (y,)), t)
            fns.append(prev)
        return Module(tuple(fns))
    # GridRegionExprs nested in each other's bodies
    body: Any = x
    carry = x
    for _ in range(min(depth, 400)):
        c = Var("c", t)
        body = GridRegionExpr(Var("i", None), (c,), (carry,), _tuple((body,)), (body,), 2)
    return Module((Function("f", (x,), body, t),))


def _tuple(fields_: tuple) -> Any:
    from tilefoundry.semantics.ir import Tuple

    return Tuple(fields_)


_RUN: dict[str, Callable[[_Calls, random.Random], None]] = {
    "program": lambda c, r: family_program(c, r, bypass=False),
    "bypass": lambda c, r: family_program(c, r, bypass=True),
    "dsl-mutated": family_dsl_mutated,
    "dsl-garbage": family_dsl_garbage,
    "api": family_api,
}


def run_input(seed: int, index: int, report: FuzzReport) -> None:
    """Build and run input ``index`` of the run with ``seed``, recording into ``report``."""
    family = FAMILIES[index % len(FAMILIES)]
    rng = random.Random(f"{seed}/{index}")
    call = _Calls(report, family, index)
    report.inputs += 1
    try:
        _RUN[family](call, rng)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        key = (family, "harness", type(e).__name__, _site(e.__traceback__))
        report.findings[key] += 1
        report.examples.setdefault(key, (index, repr(e)[:200]))


def run_inputs(seed: int, indices: range) -> FuzzReport:
    """Run inputs in this process (no watchdog, no memory limit): the test's path."""
    r = FuzzReport()
    t0 = time.perf_counter()
    for i in indices:
        run_input(seed, i, r)
    r.seconds = time.perf_counter() - t0
    return r


# =============================================================================================
# the watched run: worker processes, a watchdog, an address-space limit
# =============================================================================================
def _worker(conn: Any, seed: int, start: int, stop: int, memory_mb: int) -> None:
    import resource
    import warnings

    warnings.simplefilter("ignore")
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    if memory_mb:
        lim = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    _BEAT[:] = [lambda name: conn.send(("beat", name))]
    # import what the inputs use before the watchdog starts timing (a fresh worker on a loaded
    # machine can take seconds to import; that is no input's hang)
    import tilefoundry.compiler.pipeline
    import tilefoundry.oracle.programs
    import tilefoundry.semantics.dsl
    import tilefoundry.semantics.evaluator.core
    import tilefoundry.semantics.typeinfer  # noqa: F401

    conn.send(("ready", start))
    for i in range(start, stop):
        conn.send(("start", i))
        r = FuzzReport()
        run_input(seed, i, r)
        conn.send(("done", i, r))
    conn.send(("end", stop))


#: seconds a fresh worker may take to import before the watchdog times it
_START_S = 120.0


def _watched(seed: int, start: int, stop: int, hang_s: float,
             memory_mb: int) -> Iterator[tuple[str, Any]]:
    ctx = mp.get_context("fork")
    i = start
    while i < stop:
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker, args=(child, seed, i, stop, memory_mb), daemon=True)
        p.start()
        child.close()
        current, what = i, "starting the worker"
        since = time.monotonic() + _START_S  # the imports are not timed as a hang
        while True:
            if parent.poll(0.2):
                try:
                    msg = parent.recv()
                except EOFError:  # the worker died (a segfault, an OOM kill): a finding
                    yield ("died", current)
                    i = current + 1
                    break
                if msg[0] == "ready":
                    since = time.monotonic()
                elif msg[0] == "start":
                    current, since, what = msg[1], time.monotonic(), "building the input"
                elif msg[0] == "beat":
                    since, what = time.monotonic(), msg[1]
                elif msg[0] == "done":
                    yield ("done", msg[2])
                    i = msg[1] + 1
                else:
                    i = stop
                    break
            elif time.monotonic() - since > hang_s:
                p.kill()
                yield ("hang", (current, what))
                i = current + 1
                break
            elif not p.is_alive() and not parent.poll(0):
                yield ("died", current)
                i = current + 1
                break
        p.join(5)
        parent.close()


def run_fuzz(n: int, seed: int = 0, *, start: int = 0, hang_s: float = 10.0,
             memory_mb: int = 4096,
             progress: Callable[[FuzzReport], None] | None = None) -> FuzzReport:
    """Inputs ``start .. start + n`` of the run with ``seed``, each watched (see the module
    docstring); ``progress`` sees the running total after each input."""
    total = FuzzReport()
    t0 = time.perf_counter()
    for kind, v in _watched(seed, start, start + n, hang_s, memory_mb):
        if kind == "done":
            total.merge(v)
            if progress:
                total.seconds = time.perf_counter() - t0
                progress(total)
        elif kind == "hang":
            idx, what = v
            total.inputs += 1
            total.hangs.append((FAMILIES[idx % len(FAMILIES)], idx, what))
        else:
            fam = FAMILIES[v % len(FAMILIES)]
            total.inputs += 1
            key = (fam, "worker", "WorkerDied", "?")
            total.findings[key] += 1
            total.examples.setdefault(key, (v, "the worker process died"))
    total.seconds = time.perf_counter() - t0
    return total


def main(argv: list[str] | None = None) -> int:  # python -m tilefoundry.conformance.fuzz_ir
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0)
    a = ap.parse_args(argv)
    def progress(r: FuzzReport) -> None:
        if r.inputs % 250 == 0:
            print(r.format(), "\n", flush=True)

    r = run_fuzz(a.n, a.seed, start=a.start, progress=progress)
    print(r.format())
    return 0 if not r.non_project and not r.hangs else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
