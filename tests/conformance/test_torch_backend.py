"""The torch backend (conformance/torch_backend.py): an honest adapter, judged by the oracle.

Issue 'conformance runner', Deliver 2: "torch (an adapter that runs each HIR op with torch on CPU
or CUDA — an honest example of a third-party stack under test; what it gets wrong is reported,
not hidden)". The cases where torch is exact pass; documented divergences (docs/findings.md)
fail with exactly the documented signature. torch is required (a missing torch fails, as in
test_numerics_sweep.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch  # required: a missing torch must fail, not skip

from tilefoundry.conformance.backend import load_backend, requirements, unsupported_reason
from tilefoundry.conformance.catalog import build_catalog, special_values
from tilefoundry.conformance.numerics_sweep import all_patterns
from tilefoundry.conformance.torch_backend import TorchBackend, from_torch, to_torch
from tilefoundry.errors import InvalidArgumentError
from tilefoundry.oracle.compare import ERROR, FAIL, PASS, check
from tilefoundry.semantics.dtypes import DType, cast, to_bits


@pytest.fixture(scope="module")
def catalog():
    return build_catalog(0)


@pytest.fixture(scope="module")
def backend():
    return load_backend("torch")


def run_case(backend, case):
    module, entry, inputs = case.build()
    got = backend.run(backend.compile(module, entry), [x.copy() for x in inputs])
    return check(module, entry, inputs, got), inputs, got


def test_loaded_by_builtin_name_with_honest_capabilities(backend):
    assert isinstance(backend, TorchBackend) and backend.name == "torch"
    caps = backend.capabilities()
    assert caps.mesh is False
    assert "Local" not in caps.ops and {"Binary", "Cast", "RoPE", "TopK"} <= caps.ops
    assert DType.F4E2M1 not in caps.dtypes and DType.FP8E4M3 in caps.dtypes
    assert caps.to_json()["mesh"] is False


def test_bad_device_is_rejected():
    with pytest.raises(InvalidArgumentError, match="device"):
        TorchBackend("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(InvalidArgumentError, match="cuda"):
            TorchBackend("cuda")


@pytest.mark.parametrize("dt", [DType.F32, DType.BF16, DType.F16, DType.FP8E4M3,
                                DType.FP8E5M2, DType.F8E8M0])
def test_arrays_cross_as_bits(dt):
    x = all_patterns(dt) if dt not in (DType.F32,) else special_values(dt)
    if dt is DType.F32:  # NaN payloads and signs survive
        x = np.concatenate([x, np.array([0x7FC00123, 0xFFC00001, 0x7F800001], np.uint32)
                            .view(np.float32)])
    back = from_torch(to_torch(x))
    assert back.dtype == x.dtype and back.shape == x.shape
    assert np.array_equal(to_bits(back), to_bits(x))
    for y in (np.arange(-3, 3, dtype=np.int8), np.array([True, False]), np.full((), 7, np.int64)):
        assert np.array_equal(from_torch(to_torch(np.asarray(y))), y)


# ---------------------------------------------------------------------------------------------
# where torch meets the contract
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cid", [
    "special/binary/add/f32", "special/binary/mul/bf16", "special/binary/div/f16",
    "special/binary/lt/f32", "binary/fp8e5m2/mul/all-pairs",
    "cast/f16->bf16/nonfinite/exhaustive", "spec/cast/overflow-saturate/f32->fp8e4m3",
    "spec/cast/overflow-saturate/f32->bf16", "spec/unary/round-half-even/f32",
    "spec/reduce/fold-left-sub-123/f32", "spec/reduce/fold-right-sub-123/i32",
    "spec/reduce/fold-left-vs-fold-right-sum/f32", "spec/function/dispatch-large/f32",
    "spec/grid/dimvar-extent-step-start/f32", "spec/gather/batch-dims-element-rule/f32",
    "spec/cache-update/write-window/bf16", "spec/matmul/no-reassociation-k-order/f32",
    "special/tensor/transpose/fp8e4m3", "special/tensor/shape-compose/f32",
])
def test_exact_cases_pass(backend, catalog, cid):
    v, _, _ = run_case(backend, catalog[cid])
    assert v.status == PASS, v.summary()


def test_sharded_cases_are_not_supported(backend, catalog):
    m, _, _ = catalog["sharded/matmul/split-k-partial-sum/i32"].build()
    assert "mesh" in unsupported_reason(backend.capabilities(), requirements(m))


# ---------------------------------------------------------------------------------------------
# documented divergences (docs/findings.md)
# ---------------------------------------------------------------------------------------------
def test_f4_e4m3_overflow_saturates(backend, catalog):
    """F4: every bf16 pattern through float8_e4m3fn: 30,512 overflows give ±448, not NaN —
    exactly the contract's overflow='saturate' result on those elements."""
    v, (x,), got = run_case(backend, catalog["cast/bf16->fp8e4m3/nonfinite/exhaustive"])
    assert v.status == FAIL and v.mismatches == 30512
    ref = cast(x, DType.FP8E4M3)
    bad = to_bits(ref) != to_bits(got)
    assert np.isnan(ref.astype(np.float32)[bad]).all()
    assert set(to_bits(got)[bad].tolist()) == {0x7E, 0xFE}
    assert np.array_equal(to_bits(got), to_bits(cast(x, DType.FP8E4M3, overflow="saturate")))


def test_f6_maximum_does_not_order_signed_zeros(backend, catalog):
    """F6: torch.maximum(-0, +0) returns its first operand, -0; the contract gives +0."""
    v, (a, b), _ = run_case(backend, catalog["spec/binary/max-orders-signed-zeros/f32"])
    assert v.status == FAIL and v.mismatches == 1
    o = v.outputs[0]
    assert o.worst_index == (0,) and o.expected == "0.0" and o.observed == "-0.0"
    assert np.signbit(a[0]) and not np.signbit(b[0])


def test_f7_empty_max_raises(backend, catalog):
    """F7: torch.amax over an empty axis raises instead of returning the identity."""
    m, e, ins = catalog["spec/reduce/empty-max-identity/f32"].build()
    with pytest.raises(IndexError, match="non-zero size"):
        backend.run(backend.compile(m, e), ins)


def test_f10_silu_of_minus_infinity_is_nan(backend, catalog):
    """F10: F.silu(-inf) is NaN; the contract gives -0 (the limit)."""
    v, (x,), got = run_case(backend, catalog["special/nn/silu/f32"])
    assert v.status == FAIL and v.mismatches == 1
    i = v.outputs[0].worst_index
    assert np.isneginf(x[i]) and np.isnan(got[i]) and v.outputs[0].expected == "-0.0"


def test_f17_reduce_over_no_axes_reduces_everything(backend, catalog):
    """F17: torch.sum(x, dim=()) reduces every axis; HIR Reduce over axes=() reduces none."""
    v, _, got = run_case(backend, catalog["spec/reduce/no-axes-is-identity-sum/f32"])
    assert v.status == ERROR and "shape ()" in v.message and got.shape == ()
