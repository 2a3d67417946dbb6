"""Mma with an f16 / bf16 accumulator (D389): the reference is the f32 K-order fold from the
exactly widened accumulator, rounded once to the accumulator's dtype; the judge admits any order
of the K + 1 leaves rounded once, and rejects an accumulation rounded to the narrow dtype at
every step (the "strict BF16 accumulation" the design rejects) and an f32 result."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.dtypes import cast, to_bits, widen_to_f32
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.matmul import mma, mma_admits


def _operands(acc_dt, k=33):
    r = np.random.default_rng(8)
    a = cast(r.uniform(-4, 4, (3, k)).astype(np.float32), DType.BF16)
    b = cast(r.uniform(-4, 4, (k, 4)).astype(np.float32), DType.BF16)
    c = cast(r.uniform(-16, 16, (3, 4)).astype(np.float32), acc_dt)
    return a, b, c


@pytest.mark.parametrize("acc_dt", [DType.BF16, DType.F16])
def test_reference_is_the_f32_fold_rounded_once(acc_dt):
    a, b, c = _operands(acc_dt)
    a32, b32, s = widen_to_f32(a), widen_to_f32(b), widen_to_f32(c).astype(np.float32)
    for k in range(a.shape[1]):  # written out here: the K-order f32 fold from the acc
        s = (s + a32[:, k, None] * b32[None, k, :]).astype(np.float32)
    want = cast(s, acc_dt)
    got = mma(a, b, c)
    assert got.dtype == want.dtype and np.array_equal(to_bits(got), to_bits(want))
    assert mma_admits(got, a, b, c).admitted.all()


@pytest.mark.parametrize("acc_dt", [DType.BF16, DType.F16])
def test_step_rounded_accumulation_is_not_admitted(acc_dt):
    a, b, c = _operands(acc_dt)
    a32, b32, s = widen_to_f32(a), widen_to_f32(b), widen_to_f32(c)
    for k in range(a.shape[1]):
        s = widen_to_f32(cast((s + a32[:, k, None] * b32[None, k, :]).astype(np.float32),
                              acc_dt))
    strict = cast(s.astype(np.float32), acc_dt)
    assert not np.array_equal(to_bits(strict), to_bits(mma(a, b, c)))
    assert not mma_admits(strict, a, b, c).admitted.all()


def test_reassociated_sum_rounded_once_is_admitted_and_f32_result_refused():
    a, b, c = _operands(DType.BF16)
    exact = (widen_to_f32(a).astype(np.float64) @ widen_to_f32(b).astype(np.float64) +
             widen_to_f32(c).astype(np.float64))
    other_order = cast(exact.astype(np.float32), DType.BF16)  # the real sum, rounded once
    assert mma_admits(other_order, a, b, c).admitted.all()
    with pytest.raises(InvalidArgumentError, match="must be bf16"):
        mma_admits(exact.astype(np.float32), a, b, c)
