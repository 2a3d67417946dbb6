"""A backend for ``conformance probe``'s tests: it runs (with the reference evaluator) only
``Binary.add`` / ``Binary.mul`` on f32 and bf16 and ``Cast`` between them, with round-to-nearest,
in programs without tuples, calls, loops, dispatch or a mesh, and raises
``BackendUnsupportedError`` for anything else. It declares no capabilities at all (the default
claims nothing): the probe has to find them."""

from __future__ import annotations

from tilefoundry.conformance.backend import Capabilities, requirements
from tilefoundry.errors import BackendUnsupportedError
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType

OPS = {"Binary", "Binary.add", "Binary.mul", "Cast"}
DTYPES = {DType.F32, DType.BF16}


class ProbeBackend:
    name = "probe-me"

    def capabilities(self) -> Capabilities:
        return Capabilities()

    def compile(self, module, entry):
        r = requirements(module)
        if r.ops - OPS or r.dtypes - DTYPES or r.features or r.mesh or \
                r.rounding_modes - {"nearest"} or r.overflow_modes - {"nonfinite"}:
            raise BackendUnsupportedError(f"probe-me runs only {sorted(OPS)} on f32 / bf16")
        return module, entry

    def run(self, compiled, inputs):
        return evaluate(*compiled, inputs)


def factory() -> ProbeBackend:
    return ProbeBackend()
