"""Planted backends for declared reduction orders and empty reductions
(conformance/reduction_orders.py).

``FoldLeftBackend`` really sums left to right: it runs the reference evaluator on the program
with every tree-policy ``Reduce`` of the entry's body given ``policy="fold_left"`` (its own
rewrite, independent of the runner's), and declares ``reduction_order="fold_left"``.
``LyingFoldLeftBackend`` declares ``fold_left`` but computes the reference's balanced pairwise
tree. ``NoEmptyBackend`` declares ``empty_reductions=False`` and raises (an ERROR) if it is
ever run on a reduction over an empty axis."""

from __future__ import annotations

import dataclasses

from tilefoundry.conformance.backend import ReferenceBackend
from tilefoundry.semantics.ir import Call, Module
from tilefoundry.semantics.ops.tensor import Reduce
from tilefoundry.semantics.typeinfer.core import Session
from tilefoundry.semantics.typeinfer.functions import infer_module


def _fold_left(module: Module, entry: str) -> Module:
    memo: dict[int, object] = {}

    def walk(e):
        if id(e) in memo:
            return memo[id(e)]
        out = e
        if isinstance(e, Call):
            args = tuple(walk(a) for a in e.args)
            op = e.op
            if isinstance(op, Reduce) and op.policy in ("unordered_tree", "ordered_tree"):
                op = dataclasses.replace(op, policy="fold_left")
            if op is not e.op or any(a is not b for a, b in zip(args, e.args, strict=True)):
                out = Call(op, args)
        memo[id(e)] = out
        return out

    fns = tuple(dataclasses.replace(f, body=walk(f.body)) if f.name == entry and f.body
                is not None else f for f in module.functions)
    return Module(fns, module.target, module.topology)


class FoldLeftBackend(ReferenceBackend):
    name = "fold-left"

    def capabilities(self):
        return dataclasses.replace(super().capabilities(), reduction_order="fold_left")

    def compile(self, module, entry):
        return _fold_left(module, entry), entry


class LyingFoldLeftBackend(ReferenceBackend):
    name = "lying-fold-left"

    def capabilities(self):
        return dataclasses.replace(super().capabilities(), reduction_order="fold_left")


class NoEmptyBackend(ReferenceBackend):
    name = "no-empty"

    def capabilities(self):
        return dataclasses.replace(super().capabilities(), empty_reductions=False)

    def run(self, compiled, inputs):
        module, _entry = compiled
        from tilefoundry.oracle.reduce import nodes

        m = infer_module(module, Session())
        for f in m.functions:
            for n in nodes(f.body) if f.body is not None else ():
                if isinstance(n, Call) and isinstance(n.op, Reduce):
                    shape = n.args[0].checked_type.shape
                    if any(shape[a] == 0 for a in n.op.axes):
                        raise RuntimeError("run on an empty reduction it declared unsupported")
        return super().run(compiled, inputs)
