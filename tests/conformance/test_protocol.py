"""The protocol's ``input_specs`` (issue 33 item 7, D310): a ``compile`` that takes them
receives the shapes and dtypes of the case's inputs (plain, scalar, DimVar-shaped and sharded
parameters), an old two-argument ``compile`` keeps working, and the built-in compilers do their
work in ``compile`` with them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import spec_backend

from tilefoundry.conformance.backend import load_backend
from tilefoundry.conformance.protocol import (
    InputSpec,
    accepts_input_specs,
    compile_for,
    input_specs,
)
from tilefoundry.conformance.runner import run
from tilefoundry.conformance.selection import load_catalog
from tilefoundry.semantics.formats import FORMATS

#: a plain array, a scalar (CacheUpdate's cur_pos / s), DimVar-shaped dispatch entries and
#: sharded parameters (a Partial layout among them)
GLOBS = ["spec/reduce/empty-sum-identity/f32", "spec/cache-update/write-window/f32",
         "spec/function/dispatch-*", "spec/reshard/partial-sum-completion/*",
         "sharded/elementwise/split-neg-add-allgather/*"]


def _nonzero(res) -> dict:
    return {k: v for k, v in res.counts().items() if v}


@pytest.fixture(scope="module")
def cases():
    from tilefoundry.conformance.selection import select_cases

    return select_cases(load_catalog(0), "quick", GLOBS)


def test_specs_describe_the_case_inputs(cases):
    kinds = set()
    for c in cases:
        m, e, ins = c.build()
        specs = input_specs(m, e, ins)
        fn = next(f for f in m.functions if f.name == e)
        assert [s.name for s in specs] == [p.name for p in fn.params]
        for s, x, p in zip(specs, ins, fn.params, strict=True):
            kinds.add(s.kind)
            assert s.shape == np.shape(x)
            assert s.storage == np.asarray(x).dtype == FORMATS[s.dtype].storage
            assert s.dtype == p.type.dtype and s.layout == p.type.shard
            assert s.scalar == (np.ndim(x) == 0 and p.type.shard is None)
        hash(specs)  # frozen: a backend may key a cache on them
    assert kinds == {"array", "scalar", "sharded"}


def test_a_dimvar_parameter_gets_the_concrete_shape(cases):
    from tilefoundry.semantics.types import DimVar

    c = next(c for c in cases if c.id.startswith("spec/function/dispatch-"))
    m, e, ins = c.build()
    fn = next(f for f in m.functions if f.name == e)
    assert any(isinstance(d, DimVar) for p in fn.params for d in p.type.shape)
    assert all(isinstance(n, int) for s in input_specs(m, e, ins) for n in s.shape)


def test_which_compile_signatures_receive_specs():
    class Positional:
        def compile(self, module, entry, input_specs=()): ...

    class KeywordOnly:
        def compile(self, module, entry, *, input_specs): ...

    assert accepts_input_specs(Positional()) and accepts_input_specs(KeywordOnly())
    assert not accepts_input_specs(spec_backend.LegacyBackend())
    assert not accepts_input_specs(spec_backend.KwargsBackend())  # **kwargs does not opt in


def test_the_runner_passes_matching_specs_and_old_backends_still_run(tmp_path, monkeypatch,
                                                                     cases):
    log = tmp_path / "specs.jsonl"
    monkeypatch.setenv("SPEC_LOG", str(log))
    ids = [c.id for c in cases]
    res = run("spec_backend:SpecBackend", "quick", case_globs=GLOBS, jobs=2, timeout_s=120,
              out_jsonl=tmp_path / "s.jsonl")
    assert [r["id"] for r in res.records] == ids
    assert _nonzero(res) == {"PASS": len(ids)}, [r["message"] for r in res.records]
    seen = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(seen) == len(ids)  # every case's run checked the specs it was compiled with
    assert {s["kind"] for x in seen for s in x["specs"]} == {"array", "scalar", "sharded"}
    for spec in ("spec_backend:LegacyBackend", "spec_backend:KwargsBackend"):
        old = run(spec, "quick", case_globs=GLOBS, jobs=1, timeout_s=120,
                  out_jsonl=tmp_path / f"{spec.split(':')[1]}.jsonl")
        assert _nonzero(old) == {"PASS": len(ids)}, [r["message"] for r in old.records]


def test_a_compile_without_specs_is_caught_by_the_planted_backend(cases):
    """The planted backend's own check can fail: compiled the old way, it refuses to run."""
    b = spec_backend.SpecBackend()
    m, e, ins = cases[0].build()
    with pytest.raises(AssertionError, match="no input_specs"):
        b.run((m, e, ()), ins)
    wrong = tuple(InputSpec(s.name, s.kind, (*s.shape, 1), s.dtype, s.storage)
                  for s in input_specs(m, e, ins))
    with pytest.raises(AssertionError):
        b.run((m, e, wrong), ins)
    assert b.run(compile_for(b, m, e, ins), ins) is not None


def test_kernel_interp_compiles_in_compile_with_specs(cases):
    b = load_backend("kernel-interp")
    c = next(c for c in cases if c.id.startswith("spec/function/dispatch-"))
    m, e, ins = c.build()
    assert b.compile(m, e).cache == {}  # without specs the first run compiles
    prog = compile_for(b, m, e, ins)
    assert list(prog.cache) == [tuple(np.shape(x) for x in ins)]
    ref = load_backend("reference")
    got, want = b.run(prog, ins), ref.run(ref.compile(m, e), ins)
    assert np.array_equal(np.asarray(got), np.asarray(want), equal_nan=True)
