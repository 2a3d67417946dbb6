"""Per HIR op the lower pass consumes: the HIR encoding (validate/hir_smt.py) and the reference
evaluator agree on special values and seeded random bit patterns; an op without an encoding is
reported by name."""

from __future__ import annotations

import pytest

from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.ops import Binary, Cast, MatMul, Reduce, Select, Unary
from tilefoundry.semantics.ops.math import BinaryKind, UnaryKind
from tilefoundry.semantics.ops.tensor import ReduceKind
from tilefoundry.validate.agree import agreement_hir

from .helpers import module_of, values

N = 16


@pytest.mark.parametrize("kind,dt", [
    (k, d) for d in (DType.F32, DType.BF16, DType.FP8E4M3, DType.I8)
    for k in ("add", "sub", "mul", "div", "min", "max", "lt", "ne")
    if not (d.is_int and k == "div")], ids=str)  # no integer div
def test_binary(kind, dt):
    a, b = values(dt, N, 1), values(dt, N, 2)
    assert agreement_hir(module_of(Binary(BinaryKind(kind)), [dt, dt], [(N,), (N,)]), "f",
                         [a, b]) == []


@pytest.mark.parametrize("kind,dt", [
    (k, d) for d in (DType.F32, DType.F16, DType.FP8E5M2, DType.I32)
    for k in ("neg", "abs", "ceil", "round", "relu", "square", "sqrt")
    if not (d.is_int and k == "sqrt")], ids=str)  # no integer sqrt
def test_unary(kind, dt):
    assert agreement_hir(module_of(Unary(UnaryKind(kind)), [dt], [(N,)]), "f",
                         [values(dt, N, 3)]) == []


@pytest.mark.parametrize("src,dst", [(DType.F32, DType.FP8E4M3), (DType.BF16, DType.F16),
                                     (DType.F16, DType.F8E8M0), (DType.I32, DType.BF16),
                                     (DType.I64, DType.I8)], ids=str)
def test_cast(src, dst):
    assert agreement_hir(module_of(Cast(dst), [src], [(N,)]), "f", [values(src, N, 4)]) == []


@pytest.mark.parametrize("kind,dt", [
    (k, d) for d in (DType.F32, DType.BF16, DType.I32) for k in ("sum", "mean", "max", "abs_max")
    if not (d.is_int and k == "mean")], ids=str)  # no integer mean
@pytest.mark.parametrize("policy", ["fold_left", "fold_right", "ordered_tree"])
def test_reduce(kind, policy, dt):
    x = values(dt, 12, 5).reshape(3, 4)
    m = module_of(Reduce((1,), False, ReduceKind(kind), policy), [dt], [(3, 4)])
    assert agreement_hir(m, "f", [x]) == []


def test_matmul_and_select():
    a, b = values(DType.BF16, 6, 1).reshape(2, 3), values(DType.BF16, 6, 2).reshape(3, 2)
    assert agreement_hir(module_of(MatMul(False), [DType.BF16] * 2, [(2, 3), (3, 2)]), "f",
                         [a, b]) == []
    c = values(DType.BOOL, 4, 3)
    x, y = values(DType.FP8E4M3, 4, 1), values(DType.FP8E4M3, 4, 2)
    assert agreement_hir(module_of(Select(), [DType.BOOL, DType.FP8E4M3, DType.FP8E4M3],
                                   [(4,)] * 3), "f", [c, x, y]) == []


def test_unencoded_hir_op_is_named():
    from tilefoundry.semantics.ops import Transpose
    from tilefoundry.validate.encode import Unsupported

    with pytest.raises(Unsupported, match="unsupported op Transpose"):
        agreement_hir(module_of(Transpose((1, 0)), [DType.F32], [(2, 3)]), "f",
                      [values(DType.F32, 6, 1).reshape(2, 3)])
