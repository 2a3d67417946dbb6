"""Planted backends for the protocol's ``input_specs`` (conformance/protocol.py).

``SpecBackend`` takes ``input_specs`` in ``compile`` and, in ``run``, raises AssertionError (an
ERROR verdict) unless the specs it was compiled with describe exactly the inputs it is given:
one spec per input, the same shape, storage dtype and IR dtype, a scalar kind for rank-0
arrays, a sharded kind exactly where the parameter's type has a layout. It refuses to run when
it was compiled without specs on an entry that has inputs. The specs it saw are appended as
JSON lines to ``$SPEC_LOG`` when set. Otherwise it runs the reference.

``LegacyBackend`` has the old two-argument ``compile``; ``KwargsBackend`` takes only
``**kwargs`` (which does not opt in: it must be called without specs)."""

from __future__ import annotations

import json
import os

import numpy as np

from tilefoundry.conformance.backend import ReferenceBackend
from tilefoundry.semantics.evaluator.core import shape_of
from tilefoundry.semantics.formats import FORMATS


def _check(spec, x, param) -> None:
    from tilefoundry.semantics.types import TensorType

    declared = param.type
    assert spec.name == param.name, (spec.name, param.name)
    if spec.kind == "tuple":
        assert isinstance(x, tuple | list) and len(spec.fields) == len(x)
        return
    assert tuple(spec.shape) == tuple(shape_of(x)), (spec.name, spec.shape, shape_of(x))
    if isinstance(x, np.ndarray):
        assert spec.storage == x.dtype, (spec.name, spec.storage, x.dtype)
        assert FORMATS[spec.dtype].storage == x.dtype, (spec.name, spec.dtype, x.dtype)
    if isinstance(declared, TensorType):
        assert spec.dtype == declared.dtype
        assert (spec.kind == "sharded") == (declared.shard is not None), spec
        assert spec.layout == declared.shard
    if spec.kind != "sharded":
        assert spec.kind == ("scalar" if np.ndim(x) == 0 else "array"), spec


class SpecBackend(ReferenceBackend):
    name = "spec-recorder"

    def compile(self, module, entry, input_specs=()):
        return module, entry, tuple(input_specs)

    def run(self, compiled, inputs):
        module, entry, specs = compiled
        fn = next(f for f in module.functions if f.name == entry)
        if inputs and not specs:
            raise AssertionError("compile received no input_specs")
        assert len(specs) == len(inputs) == len(fn.params), (len(specs), len(inputs))
        for spec, x, p in zip(specs, inputs, fn.params, strict=True):
            _check(spec, x, p)
        log = os.environ.get("SPEC_LOG")
        if log:
            with open(log, "a") as f:
                f.write(json.dumps({"entry": entry, "specs": [
                    {"name": s.name, "kind": s.kind, "shape": list(s.shape),
                     "dtype": None if s.dtype is None else s.dtype.value} for s in specs]})
                        + "\n")
        return super().run((module, entry), inputs)


class LegacyBackend(ReferenceBackend):
    name = "legacy"


class KwargsBackend(ReferenceBackend):
    name = "kwargs"

    def compile(self, module, entry, **kwargs):
        if kwargs:
            raise AssertionError(f"called with {sorted(kwargs)}")
        return module, entry
