"""The enclosing evaluation: the reference evaluator, with every value's enclosure computed
beside it (``oracle/enclosure.py``). Values no contract's freedom reaches carry none (exact)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tilefoundry.oracle import enclosure_rules as _rules
from tilefoundry.oracle.enclosure import ENCLOSURES, Enc
from tilefoundry.semantics.evaluator.core import Evaluation, _Evaluator, run
from tilefoundry.semantics.evaluator.mesh import PerDevice, Sharded
from tilefoundry.semantics.ir import Call, Function, Module
from tilefoundry.semantics.typeinfer.core import Session

#: the enclosure of a mesh value downstream of freedom: not enclosed (unjudged)
SHARDED = "sharded"


class EnclosingEvaluator(_Evaluator):
    def __init__(self, session: Session):
        super().__init__(session)
        self._encs: dict[int, tuple[Any, Any]] = {}  # id(value) -> (value, enclosure)

    def enc_of(self, v: Any) -> Any:
        hit = self._encs.get(id(v))
        return hit[1] if hit is not None and hit[0] is v else None

    def _set(self, v: Any, e: Any) -> None:
        if isinstance(v, tuple):
            es = e if isinstance(e, tuple) else (e,) * len(v)
            for vi, ei in zip(v, es, strict=True):
                self._set(vi, ei)
            return
        if isinstance(e, Enc) and e.shape != tuple(np.shape(v)):
            raise AssertionError(f"enclosure of shape {e.shape} for a value of shape "
                                 f"{np.shape(v)} (an enclosure rule's bug)")
        if e is not None:
            self._encs[id(v)] = (v, e)

    def eval_node(self, node, values, env):
        if not isinstance(node, Call) or isinstance(node.op, Function):
            return super().eval_node(node, values, env)
        n0 = len(self.contracts)
        v = super().eval_node(node, values, env)
        new = [c for _, c in self.contracts[n0:]]
        args = tuple(values[id(a)] for a in node.args)
        encs = [self.enc_of(a) for a in args]
        if not new and all(e is None for e in encs):
            return v
        mesh = any(isinstance(a, Sharded | PerDevice) for a in args) or \
            isinstance(v, Sharded | PerDevice) or any(c.per_device for c in new)
        if mesh and (any(e is not None for e in encs) or any(c.per_device for c in new)):
            self._set(v, SHARDED)
            return v
        if any(e == SHARDED for e in encs if isinstance(e, str)):
            self._set(v, SHARDED)
            return v
        rule = ENCLOSURES.get(type(node.op))
        if rule is None:
            raise KeyError(f"no enclosure rule for {type(node.op).__name__}")
        site = _rules.Site(node.op, node, node.checked_type, env, encs, args, v, new)
        self._set(v, rule(site))
        return v


def evaluate_enclosed(module: Module, entry: str, inputs: Sequence[np.ndarray]
                      ) -> tuple[Evaluation, list[Any]]:
    """``evaluate(..., report=True)`` plus, per output (as ``compare`` lists them), its
    enclosure: None (exact), an ``Enc``, or ``SHARDED``."""
    value, ev = run(module, entry, inputs, EnclosingEvaluator)
    outs = list(value) if isinstance(value, tuple | list) else [value]
    encs = [ev.enc_of(o) for o in outs]
    return Evaluation(value, tuple(ev.contracts), encs, ev.entry_fn), encs


__all__ = ["SHARDED", "Enc", "EnclosingEvaluator", "evaluate_enclosed"]
