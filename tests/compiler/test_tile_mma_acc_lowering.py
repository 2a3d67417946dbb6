"""Mma with an f16 / bf16 accumulator through the compiler (D389): the accumulator widens
exactly into the f32 Dot and the result rounds once at the store — bit-identical to the
reference on the kernel-IR interpreter and the SIMD C backend (one K tile and a TileLoop over
K), and on the Triton interpreter and the CUDA host emulation where installed."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from tilefoundry.compiler.pipeline import compile
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.oracle.compare import PASS, check
from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.dtypes import cast, to_bits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType

HAS_TRITON = importlib.util.find_spec("triton") is not None
if HAS_TRITON:  # read by triton when first imported
    os.environ.setdefault("TRITON_INTERPRET", "1")

SRC = '''
@func
def main(a: Tensor[(2, 5, 37), bf16], b: Tensor[(2, 37, 3), bf16], c: Tensor[(2, 5, 3), bf16],
         d: Tensor[(2, 5, 3), f16], e: Tensor[(2, 5, 37), f16], f: Tensor[(2, 37, 3), f16]):
    return mma(a, b, c), mma(e, f, d), mma(a, b, cast(d, f32))

module(main)
'''


def _inputs():
    r = np.random.default_rng(0)

    def mk(s, dt):
        return cast(r.standard_normal(s).astype(np.float32), dt)
    return [mk((2, 5, 37), DType.BF16), mk((2, 37, 3), DType.BF16), mk((2, 5, 3), DType.BF16),
            mk((2, 5, 3), DType.F16), mk((2, 5, 37), DType.F16), mk((2, 37, 3), DType.F16)]


def _run(target, cfg):
    m, xs = parse_module(SRC), _inputs()
    ref = evaluate(m, "main", xs)
    assert [o.dtype.name for o in ref][1:] == ["float16", "float32"]
    out = compile(m, "main", [x.shape for x in xs], target, cfg=cfg)(xs)
    assert check(m, "main", xs, out).status == PASS
    for o, w in zip(out, ref, strict=True):
        assert np.asarray(o).dtype == w.dtype and np.array_equal(to_bits(o), to_bits(w))


@pytest.mark.parametrize("target", ["interp", "simd"])
@pytest.mark.parametrize("cfg", [TileConfig(), TileConfig(k_block=8)], ids=["one-k", "k-loop"])
def test_narrow_accumulators_are_bit_identical(target, cfg):
    _run(target, cfg)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_narrow_accumulators_on_the_triton_interpreter():
    _run("triton", TileConfig())


def test_narrow_accumulators_on_the_cuda_host_emulation():
    pytest.importorskip("cuda.bindings.nvrtc")
    _run("cuda-host", TileConfig())
