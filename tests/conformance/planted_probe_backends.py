"""Backends for ``conformance probe``'s claim tests (issue 33, Deliver 3). Each runs the
reference evaluator on what it accepts and fails, the way a real first backend does, on the
rest; neither declares a capability (the probe has to find them).

* ``cast_f16_f32_only``: runs only programs made of ``Cast`` f16 -> f32; any other program
  raises ``ValueError`` in ``compile`` (an ERROR: a rejection).
* ``empty_reduce_errors``: runs every program, but ``run`` raises ``ValueError`` on an input
  with no element (an empty reduction): right on every ordinary case.
"""

from __future__ import annotations

from tilefoundry.conformance.backend import Capabilities, requirements
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType


class _Reference:
    name = "planted-probe"

    def capabilities(self) -> Capabilities:
        return Capabilities()

    def compile(self, module, entry):
        return module, entry

    def run(self, compiled, inputs):
        return evaluate(*compiled, inputs)


class CastF16F32Only(_Reference):
    name = "cast-f16-f32-only"

    def compile(self, module, entry):
        r = requirements(module)
        if r.ops != {"Cast"} or r.cast_pairs != {(DType.F16, DType.F32)} or r.features:
            raise ValueError("this backend lowers only Cast f16 -> f32")
        return module, entry


class EmptyReduceErrors(_Reference):
    name = "empty-reduce-errors"

    def run(self, compiled, inputs):
        if any(getattr(x, "size", 1) == 0 for x in inputs):
            raise ValueError("empty input: cannot launch a zero-size grid")
        return evaluate(*compiled, inputs)


def cast_f16_f32_only() -> CastF16F32Only:
    return CastF16F32Only()


def empty_reduce_errors() -> EmptyReduceErrors:
    return EmptyReduceErrors()
