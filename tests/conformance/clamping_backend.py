"""Planted backends for the expected-error cases (test_expected_errors.py).

Each one is the reference evaluator plus one realistic way of handling inputs that fail a
run-time check of the spec (a Gather index or RoPE position out of range, a CacheUpdate or
InsertSlice window out of bounds, an extent outside a DimVar's envelope, a NaN reaching a
tile-family Sort or a Top-K merge reduce with nan='error'):

* ``clamping`` clamps the bad index / offset / extent into range and computes a result — what a
  kernel that saturates its address arithmetic does. It must FAIL on every expected-error case
  and PASS where every input is in range (clamping is then the identity).
* ``checking`` detects the bad input itself (its own bounds checks, not the reference's) and
  raises ``RunTimeCheckError`` naming the check; ``anonymous`` raises it with ``check=None``;
  ``misnaming`` always names ``index_range``; ``value_error`` raises a plain ``ValueError``;
  ``refusing`` raises ``RunTimeCheckError`` on every program; ``hanging`` / ``crashing`` hang or
  die where an input is out of range.

The detection walks the entry's body for the checked ops fed directly by entry parameters (the
shape of every catalog expected-error case) and the DimVar envelopes of the entry's parameters.
"""

from __future__ import annotations

import os
import time

import numpy as np

from tilefoundry.conformance.backend import Capabilities, RunTimeCheckError
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Tuple, TupleGetItem
from tilefoundry.semantics.ops import CacheUpdate, CustomReduce, Gather, InsertSlice, RoPE, Sort
from tilefoundry.semantics.topk_reducer import TopKMerge
from tilefoundry.semantics.types import DimVar, TensorType


def _calls(fn: Function) -> list[Call]:
    """Every op Call of ``fn``'s body (or of its variants' bodies, for a prototype)."""
    out: list[Call] = []
    seen: set[int] = set()
    stack = [v.body for v in fn.variants] if fn.body is None else [fn.body]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Call):
            if not isinstance(n.op, Function):
                out.append(n)
            stack.extend(n.args)
        elif isinstance(n, Tuple):
            stack.extend(n.fields)
        elif isinstance(n, TupleGetItem):
            stack.append(n.tuple_value)
    return out


def _entry(module, entry: str) -> Function:
    return next(f for f in module.functions if f.name == entry)


def clamp_inputs(module, entry: str, inputs: list) -> tuple[list, list[tuple[str, str]]]:
    """The inputs with every bad index, offset and extent clamped into range, and what was
    clamped: ``(check, description)`` pairs (empty when every input is in range)."""
    fn = _entry(module, entry)
    ins = [np.array(x, copy=True) for x in inputs]
    pos = {id(p): k for k, p in enumerate(fn.params)}
    bad: list[tuple[str, str]] = []

    def k_of(node) -> int | None:
        return pos.get(id(node))

    def clip(k: int | None, lo: int, hi: int, check: str, what: str) -> None:
        if k is None:
            return
        v = ins[k].astype(np.int64)
        c = np.clip(v, lo, hi)
        if (c != v).any():
            bad.append((check, f"{what}: {v.tolist()} outside [{lo}, {hi}]"))
            ins[k] = np.asarray(c.astype(ins[k].dtype))  # rank-0 stays an array

    # extents outside a DimVar envelope first (the ops' bounds read the clamped shapes)
    for k, p in enumerate(fn.params):
        if not isinstance(p.type, TensorType):
            continue
        for a, d in enumerate(p.type.shape):
            if isinstance(d, DimVar):
                n = ins[k].shape[a]
                m = min(max(n, d.lo), d.hi - 1)
                if m != n:
                    bad.append(("dispatch_envelope", f"{p.name} axis {a}: extent {n} outside "
                                                     f"[{d.lo}, {d.hi})"))
                    ins[k] = np.take(ins[k], np.clip(np.arange(m), 0, max(n - 1, 0)), axis=a)
    for c in _calls(fn):
        if isinstance(c.op, Gather):
            kx = k_of(c.args[0])
            if kx is not None:
                n = ins[kx].shape[c.op.axis]
                clip(k_of(c.args[1]), 0, n - 1, "index_range", "Gather indices")
        elif isinstance(c.op, RoPE):
            kc = k_of(c.args[2])
            if kc is not None:
                clip(k_of(c.args[4]), 0, ins[kc].shape[0] - 1, "index_range", "RoPE pos_ids")
        elif isinstance(c.op, CacheUpdate):
            kc, kn = k_of(c.args[0]), k_of(c.args[3])
            if kc is not None and kn is not None:
                length, nlen = ins[kc].shape[1], ins[kn].shape[1]
                clip(k_of(c.args[2]), 1, nlen, "cache_bounds", "CacheUpdate s")
                ks = k_of(c.args[2])
                s = int(ins[ks]) if ks is not None else 1
                clip(k_of(c.args[1]), 0, length - s, "cache_bounds", "CacheUpdate cur_pos")
        elif isinstance(c.op, Sort) and c.op.nan == "error":  # tile family
            kx = k_of(c.args[0])
            if kx is not None and ins[kx].dtype.kind not in "biu":
                v = ins[kx]
                nan = np.isnan(v.astype(np.float32))
                if nan.any():  # a kernel that flushes NaN to zero instead of checking
                    bad.append(("sort_nan", f"Sort x: {int(nan.sum())} NaN value(s)"))
                    ins[kx] = np.where(nan, np.zeros((), v.dtype), v).astype(v.dtype)
        elif isinstance(c.op, CustomReduce) and isinstance(c.op.reducer, TopKMerge) and \
                c.op.reducer.nan == "error" and isinstance(c.args[1], Tuple):
            for node, what in ((c.args[0], "x"), (c.args[1].fields[0], "seed values")):
                k = k_of(node)
                if k is not None and ins[k].dtype.kind not in "biu":
                    v = ins[k]
                    nan = np.isnan(v.astype(np.float32))
                    if nan.any():  # NaN flushed to zero instead of checked
                        bad.append(("topk_nan", f"Top-K {what}: {int(nan.sum())} NaN value(s)"))
                        ins[k] = np.where(nan, np.zeros((), v.dtype), v).astype(v.dtype)
        elif isinstance(c.op, InsertSlice):
            kd, ku = k_of(c.args[0]), k_of(c.args[1])
            if kd is not None and ku is not None:
                for a, o in enumerate(c.args[2:]):
                    clip(k_of(o), 0, ins[kd].shape[a] - ins[ku].shape[a], "slice_window",
                         f"InsertSlice offset of axis {a}")
    return ins, bad


class _Base:
    name = "planted"

    def capabilities(self) -> Capabilities:
        return Capabilities.everything(dtypes=frozenset(d for d in DType
                                                        if d is not DType.F4E2M1),
                            mesh=True)

    def compile(self, module, entry: str):
        return (module, entry)

    def _evaluate(self, module, entry: str, inputs: list):
        from tilefoundry.semantics.evaluator.core import evaluate

        return evaluate(module, entry, inputs)

    def on_bad(self, bad: list[tuple[str, str]]) -> None:
        """What the backend does with the bad values; by default nothing: it runs on the
        clamped ones (the bug under test). Subclasses report them in their own way."""

    def run(self, compiled, inputs: list):
        module, entry = compiled
        clamped, bad = clamp_inputs(module, entry, inputs)
        if bad:
            self.on_bad(bad)
        return self._evaluate(module, entry, clamped)


class Clamping(_Base):
    """Clamps every bad index, offset and extent into range and returns the result."""

    name = "clamping"


class Checking(_Base):
    """Its own bounds checks; raises the protocol's RunTimeCheckError naming the check."""

    name = "checking"

    def on_bad(self, bad):
        check, what = bad[0]
        raise RunTimeCheckError(f"planted checking backend: {what}", check)


class Anonymous(_Base):
    name = "anonymous"

    def on_bad(self, bad):
        raise RunTimeCheckError(f"planted backend: {bad[0][1]}")


class Misnaming(_Base):
    name = "misnaming"

    def on_bad(self, bad):
        raise RunTimeCheckError(f"planted backend: {bad[0][1]}", "index_range")


class ValueErrorBackend(_Base):
    name = "value-error"

    def on_bad(self, bad):
        raise ValueError(f"planted backend: {bad[0][1]}")


class Refusing(_Base):
    """Reports a run-time check failure on every program, bad inputs or not."""

    name = "refusing"

    def run(self, compiled, inputs):
        raise RunTimeCheckError("planted backend: refuses every program", "cache_bounds")


class Hanging(_Base):
    name = "hanging"

    def on_bad(self, bad):
        time.sleep(60)


class Crashing(_Base):
    name = "crashing"

    def on_bad(self, bad):
        os._exit(7)


def clamping() -> Clamping:
    return Clamping()


def checking() -> Checking:
    return Checking()


def anonymous() -> Anonymous:
    return Anonymous()


def misnaming() -> Misnaming:
    return Misnaming()


def value_error() -> ValueErrorBackend:
    return ValueErrorBackend()


def refusing() -> Refusing:
    return Refusing()


def hanging() -> Hanging:
    return Hanging()


def crashing() -> Crashing:
    return Crashing()
