"""The reference backend PASSes its own oracle on generated programs (issue 32, item 6): a small
run of ``benchmarks/reference_self_fuzz.py`` (the long run is by hand: 20,000+ programs). A
FAIL is an oracle error, an ERROR an exception in the oracle, the reference or the type rules."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "reference_self_fuzz.py"


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("reference_self_fuzz", _SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up
    spec.loader.exec_module(mod)
    return mod


def test_the_reference_passes_its_own_oracle_on_generated_programs(fuzz):
    outs, _ = fuzz.run(0, 240)  # the generator's own mix: about 30 % sharded
    bad = [o for o in outs if o.verdict in fuzz.BAD]
    assert not bad, fuzz.summary(bad, 0.0)
    assert sum(o.sharded for o in outs) >= 40 and sum(o.verdict == "PASS" for o in outs) >= 200


# seeds whose sharded programs the oracle once FAILed (a Gather along a Split axis of an
# enclosed value, completed by a Reshard: an empty enclosure) in a 20,000-program sharded run
@pytest.mark.parametrize("seed", [9693, 13358, 14691])
def test_the_sharded_programs_that_exposed_the_empty_completion_pass(fuzz, seed):
    o = fuzz.judge_seed(seed, sharded=True)
    assert o.sharded and o.verdict in ("PASS", "UNJUDGED"), (o.verdict, o.detail, o.program)


def test_a_fail_is_reported_with_the_program_text(fuzz):
    o = fuzz.Outcome(5, "FAIL", True, 0.1, "output 0: FAIL", "module target=reference ...")
    text = fuzz.summary([o], 1.0)
    assert "FAIL 1" in text and "seed 5 (sharded): FAIL" in text and "module target" in text


# mixed-run seeds the oracle once FAILed: a NaN behind a ULP op carried as a finite candidate
# set that had lost it (a comparison of RoPE / RMSNorm / LayerNorm / Tanh / Mma results)
@pytest.mark.parametrize("seed", [7812, 9622, 20805, 32115])
def test_the_programs_that_exposed_nan_free_candidate_sets_pass(fuzz, seed):
    o = fuzz.judge_seed(seed)
    assert o.verdict in ("PASS", "UNJUDGED"), (o.verdict, o.detail, o.program)
