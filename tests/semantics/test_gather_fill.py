"""Gather's ``fill`` (D388): "gather supplies a logical shift with defined boundary fill; a bare
out-of-bounds reindex would not" — the fill at every out-of-range index, the in-range error
unchanged without it, the type rule (exactly representable fill, unsharded operands), the
op's identity (-0.0 and 0.0 are different fills), the DSL round trip, the torch adapter."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.dsl.source import to_source as print_module
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.registry import EvaluationError
from tilefoundry.semantics.ops import Gather
from tilefoundry.semantics.typeinfer import TypeInferError, infer_module
from tilefoundry.semantics.types import IRError

SRC = '''
@func
def main(x: Tensor[(2, 4), {dt}], i: Tensor[(3,), i32]):
    return gather(x, i, 1{fill})

module(main)
'''


def _mod(dt="f32", fill=", fill=-1.5"):
    return parse_module(SRC.format(dt=dt, fill=fill))


def test_out_of_range_reads_the_fill_by_definition():
    x = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float32)
    i = np.array([-1, 3, 4], np.int32)
    out = evaluate(_mod(), "main", [x, i])
    want = [[-1.5 if not 0 <= k < 4 else x[r, k] for k in i] for r in range(2)]
    assert out.tolist() == want
    with pytest.raises(EvaluationError, match="index value -1"):
        evaluate(_mod(fill=""), "main", [x, i])  # no fill: the range error, as before


def test_type_rule_and_identity():
    with pytest.raises(TypeInferError, match=r"fill 0\.1 is not exactly representable in bf16"):
        infer_module(_mod("bf16", ", fill=0.1"))
    with pytest.raises(TypeInferError, match="fill 300"):
        infer_module(_mod("u8", ", fill=300"))
    with pytest.raises(IRError, match=r"Gather\.fill"):
        Gather(0, fill=float("nan"))
    assert Gather(0, fill=-0.0) != Gather(0, fill=0.0) and Gather(0) != Gather(0, fill=0)
    assert hash(Gather(1, fill=2)) == hash(Gather(1, fill=2))
    with pytest.raises(TypeInferError, match="unsharded"):
        infer_module(parse_module('''
dev = Mesh("device", ("x",), (2,))

@func
def main(x: Tensor[(2, 4), f32, ShardLayout(dev, (Split(0),), Layout((2, 4)))],
         i: Tensor[(3,), i32]):
    return gather(x, i, 1, fill=0.0)

module(main, topology={"device": 2})
'''))


def test_round_trip_keeps_the_fill():
    m = _mod(fill=", fill=-0.0")
    text = print_module(m)
    assert "fill=-0.0" in text
    assert print_module(parse_module(text)) == text


def test_torch_adapter_reads_the_fill():
    pytest.importorskip("torch")
    from tilefoundry.conformance.torch_backend import TorchBackend

    x = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.int32)
    i = np.array([-1, 3, 9], np.int32)
    m = _mod("i32", ", fill=-7")
    be = TorchBackend()
    assert np.asarray(be.run(be.compile(m, "main"), [x, i])).tolist() == [[-7, 4, -7],
                                                                        [-7, 8, -7]]
