"""Lowering of the tile family (Sort, Mma) to the kernel IR: the kernel-IR interpreter and the
SIMD C backend against the reference evaluator — bit for bit for Sort (exact) and for the
K-order Mma (the Dot seeded by acc), within the admitted set otherwise — with small tiles so
the rank count and the K fold run as tile loops; Sort's ``nan="error"`` check on the host (an
input) and by a probe kernel (a computed operand)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.compiler.compiler_helpers import SMALL, TARGETS, module_of, one_op, run, var
from tilefoundry.errors import RunTimeCheckError
from tilefoundry.oracle.compare import PASS, check
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.ops import Binary, BinaryKind, Mma, Sort

F32 = DType.F32


def _bits_equal(got, ref) -> bool:
    gs = got if isinstance(got, tuple) else (got,)
    rs = ref if isinstance(ref, tuple) else (ref,)
    return len(gs) == len(rs) and all(
        np.array_equal(np.ascontiguousarray(g).view(np.uint8),
                       np.ascontiguousarray(r).view(np.uint8)) for g, r in zip(gs, rs, strict=True))


@pytest.mark.parametrize("target", TARGETS)
def test_sort_is_bit_exact_with_tile_loops(target):
    x = np.random.default_rng(1).integers(-3, 4, (3, 11)).astype(np.float32)  # 11 > max_row 8
    x[0, 2], x[1, 3], x[1, 4], x[2, 0] = np.nan, -0.0, 0.0, -0.0
    for op in (Sort(), Sort(1, True), Sort(-1, False, "first"), Sort(0, True, "first")):
        m = one_op(op, x)
        got, _ = run(m, [x], cfg=SMALL, target=target)
        assert _bits_equal(got, evaluate(m, "f", [x])), op


@pytest.mark.parametrize("target", TARGETS)
def test_mma_k_order_is_bit_exact_and_reassociating_conforms(target):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 3, 9)).astype(np.float16)  # K = 9 > k_block 4: a K loop
    b = rng.standard_normal((2, 9, 5)).astype(np.float16)
    c = rng.standard_normal((2, 3, 5)).astype(np.float32)
    c[0, 0, 0] = -0.0
    m = one_op(Mma(False), a, b, c)
    got, _ = run(m, [a, b, c], cfg=SMALL, target=target)
    assert _bits_equal(got, evaluate(m, "f", [a, b, c]))
    m = one_op(Mma(), a, b, c)
    got, _ = run(m, [a, b, c], cfg=SMALL, target=target)
    assert check(m, "f", [a, b, c], got).status == PASS


@pytest.mark.parametrize("target", TARGETS)
def test_mma_empty_k_copies_acc(target):
    a, b = np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32)
    c = np.array([[-0.0, 1.0, np.inf], [2.0, -3.0, 0.5]], np.float32)
    got, _ = run(one_op(Mma(), a, b, c), [a, b, c], target=target)
    assert np.array_equal(got.view(np.uint32), c.view(np.uint32))


@pytest.mark.parametrize("target", TARGETS)
def test_sort_nan_error_checked_on_the_host_and_by_a_probe(target):
    x = np.array([[1.0, 2.0, np.nan], [0.0, -1.0, 3.0]], np.float32)
    with pytest.raises(RunTimeCheckError, match=r"1 NaN value\(s\) \(first at \[0, 2\]\)") as e:
        run(one_op(Sort(nan="error"), x), [x], target=target)
    assert e.value.check == "sort_nan"
    v = var("x", x.shape, F32)  # a computed operand: x + x, checked by a probe kernel
    m = module_of([v], Call(Sort(nan="error"), (Call(Binary(BinaryKind.ADD), (v, v)),)))
    with pytest.raises(RunTimeCheckError, match="NaN") as e:
        run(m, [x], cfg=SMALL, target=target)
    assert e.value.check == "sort_nan"
    ok = np.nan_to_num(x)
    got, _ = run(m, [ok], cfg=SMALL, target=target)
    assert _bits_equal(got, evaluate(m, "f", [ok]))
