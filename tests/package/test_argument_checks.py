"""Type checks at public constructors and calls (issue 34 item 2): each wrong argument is the
project's error naming the argument and the fix; ``hash`` of any module works."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.errors import InvalidArgumentError, RunTimeCheckError, TilefoundryError
from tilefoundry.limits import use_limits
from tilefoundry.semantics.dsl import parse_module

SRC = '''
@func
def f(x: Tensor[(4,), f32], y: Tensor[(4,), f32]) -> Tensor[(4,), f32]:
    return x * y + x
'''
RAGGED = [[1.0], [1.0, 2.0]]


def test_hash_of_a_module_whose_functions_were_never_hashed():
    a, b = parse_module(SRC), parse_module(SRC)  # two modules: nothing hashed in either yet
    assert hash(a) == hash(b)
    assert hash(a) != hash(parse_module(SRC.replace("x * y", "x - y")))


def test_sharded_refuses_a_layout_that_is_not_a_shard_layout():
    from tilefoundry.semantics.evaluator.mesh import Sharded

    for bad in (3, "x", None, np.zeros(2)):
        with pytest.raises(TilefoundryError, match="Sharded: layout must be a ShardLayout"):
            Sharded(bad, np.zeros(4, np.float32))


def test_use_limits_refuses_an_unknown_limit_listing_the_known_ones():
    with pytest.raises(InvalidArgumentError, match=r"use_limits: no limit named 'bogus'; the "
                                                   r"limits are max_elements, "):
        with use_limits(bogus=1):
            pass
    with use_limits(max_elements=10) as lim:  # a known one still works
        assert lim.max_elements == 10


def test_run_time_check_error_refuses_a_check_that_is_no_name():
    for bad in ({}, [], 3):
        with pytest.raises(InvalidArgumentError, match="RunTimeCheckError: check"):
            RunTimeCheckError("m", check=bad)
    with pytest.raises(InvalidArgumentError, match="message must be a str"):
        RunTimeCheckError({"m": 1})
    assert RunTimeCheckError("m", check="index_range").check == "index_range"


def test_to_bits_and_from_bits_refuse_ragged_lists_naming_the_argument():
    from tilefoundry.semantics.dtypes import from_bits, to_bits

    with pytest.raises(InvalidArgumentError, match=r"to_bits: x: not an array \(list"):
        to_bits(RAGGED)
    with pytest.raises(InvalidArgumentError, match="from_bits: bits: not an array"):
        from_bits(RAGGED, "f32")
    with pytest.raises(InvalidArgumentError, match="not an array of numbers"):
        to_bits([{"a": 1}])


def test_a_compiled_program_refuses_ragged_or_non_list_inputs():
    from tilefoundry.compiler.pipeline import compile as tf_compile

    c = tf_compile(parse_module(SRC), "f", [(4,), (4,)])
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(InvalidArgumentError, match=r"compiled f: inputs\[1\]: not an array"):
        c([x, RAGGED])
    with pytest.raises(InvalidArgumentError, match="compiled f: inputs must be a list of"):
        c(3)
    with pytest.raises(InvalidArgumentError, match="compiled f: inputs must be a list of"):
        c(x)
    assert np.array_equal(c([x, x]), x * x + x)


def test_parse_of_a_manifest_or_baseline_that_is_not_text():
    from tilefoundry.conformance.campaign import Baseline, BaselineError
    from tilefoundry.conformance.manifest import Manifest, ManifestError

    with pytest.raises(ManifestError, match=r"Manifest\.parse takes the TOML text"):
        Manifest.parse(1.5)
    with pytest.raises(BaselineError, match=r"Baseline\.parse takes the JSON text"):
        Baseline.parse(np.zeros(2))


@pytest.mark.parametrize("body", ["x * 0x" + "f" * 5000, "0x" + "f" * 5000])
def test_a_dsl_int_of_20000_bits_is_named_by_its_size(body):
    # found by benchmarks/malformed_inputs.py: the message formatted the int in decimal, past
    # Python's 4,300-digit limit (ValueError)
    from tilefoundry.semantics.dsl import DSLError

    src = f"@func\ndef f(x: Tensor[(4,), f32]) -> Tensor[(4,), f32]:\n    return {body}\n"
    with pytest.raises(DSLError, match="<an int of 20,000 bits>"):
        parse_module(src)
