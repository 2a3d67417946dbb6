"""The planner collectives implementation (``mesh_planner.py``, D430): the recorded steps,
replayed by the in-process collectives, give the values the driver computed, and planning does
not change any value the evaluator gives, for every sharded catalog case of the quick tier."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.conformance import runner
from tilefoundry.semantics.dtypes import to_bits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.mesh import PerDevice, Sharded
from tilefoundry.semantics.evaluator.mesh_planner import plan, replay_step
from tilefoundry.semantics.types import Split

_CASES = [c for c in runner.select_cases(runner.load_catalog(0), "quick", None)
          if c.id.startswith("sharded/")]


def _same(a: object, b: object) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, Sharded | PerDevice):
        return (type(a) is type(b) and getattr(a, "layout", None) == getattr(b, "layout", None)
                and _same(a.data, b.data))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(
        np.array_equal(to_bits(np.array(a, order="C")), to_bits(np.array(b, order="C"))))


def test_there_are_sharded_cases():
    assert len(_CASES) >= 5


@pytest.mark.parametrize("case", _CASES, ids=lambda c: c.id)
def test_planned_steps_replay_to_the_evaluators_values(case):
    m, entry, inputs = case.build()
    try:
        want = evaluate(m, entry, inputs)
    except Exception as e:  # a case whose evaluation is refused is refused the same way
        with pytest.raises(type(e)):
            plan(m, entry, inputs)
        return
    got, steps = plan(m, entry, inputs)
    assert _same(got, want)
    for s in steps:
        assert _same(replay_step(s), s.result), (s.kind, s.op, s.axes)
        if s.kind == "all_gather":
            # a gather is over mesh axes that split a position in the operand's layout
            assert s.axes and all(isinstance(s.src.attrs[a], Split) for a in s.axes)


def test_the_catalog_plans_gathers():
    kinds = set()
    for case in _CASES:
        m, entry, inputs = case.build()
        try:
            _, steps = plan(m, entry, inputs)
        except Exception:  # refused cases are covered above
            continue
        kinds |= {s.kind for s in steps}
    assert "all_gather" in kinds
