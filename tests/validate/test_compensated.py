"""The compensated f64 row sum (kernel-IR ``reduce.sum_hi`` / ``sum_lo``, the reference's
``dd_row_sum``), numpy's float64 sum order, and the nn ops built on them (``LayerNorm``,
``RMSNorm``, ``validate/hir_nn.py``): the encodings agree with the reference evaluator and the
kernel-IR interpreter on special values and seeded random bit patterns; wrong variants (a
``sum_lo`` without the compensation, a sum in the wrong order, a lowering that drops ``sum_lo``)
disagree or are proved invalid."""

from __future__ import annotations

import numpy as np
import pytest
import z3

from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.evaluator.nn import dd_row_sum as ref_dd_row_sum
from tilefoundry.semantics.ops import LayerNorm, RMSNorm
from tilefoundry.validate import encode as E
from tilefoundry.validate import symexec
from tilefoundry.validate.agree import agreement, agreement_hir
from tilefoundry.validate.encode import Unsupported

from .helpers import lowered, module_of, values

F64_SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324,
                        2.2250738585072014e-308, np.finfo(np.float64).max,
                        -np.finfo(np.float64).max, 1.0, -1.0, 1e16, -1e16, 3.0])


def _f64_rows(rows: int, n: int, seed: int) -> np.ndarray:
    """Rows of f64 lanes: special values, seeded random bit patterns, random moderate values,
    and cancelling rows (where the compensation is the whole answer)."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 1 << 64, (rows, n), dtype=np.uint64).view(np.float64)
    mod = rng.standard_normal((rows, n)) * 10.0 ** rng.integers(-20, 20, (rows, n))
    pick = rng.integers(0, 3, (rows, n))
    out = np.where(pick == 0, raw, mod)
    sp = rng.choice(F64_SPECIAL, (rows, n))
    out = np.where(pick == 2, sp, out)
    out[0, :] = 1e300 if n == 1 else np.resize([1e30, 1.0, -1e30, 1.0], n)  # cancellation
    return np.ascontiguousarray(out)


def _lit(x: float) -> z3.FPRef:
    return E.const(np.float64(x), "f64")


def _bits(t: z3.ExprRef) -> int | None:
    s = z3.simplify(t)
    if z3.is_true(z3.simplify(z3.fpIsNaN(s))):
        return None  # NaN: compared as a class
    return z3.simplify(z3.fpToIEEEBV(s)).as_long()


def _ref_bits(v: float) -> int | None:
    return None if np.isnan(v) else int(np.float64(v).view(np.uint64))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8, 9, 16])
def test_dd_row_sum_agrees_with_the_reference(n):
    rows = _f64_rows(24, n, n)
    with np.errstate(all="ignore"):
        hi, lo = ref_dd_row_sum(rows)
    for r in range(rows.shape[0]):
        h, lw = symexec.dd_row_sum([_lit(v) for v in rows[r]])
        assert (_bits(h), _bits(lw)) == (_ref_bits(hi[r, 0]), _ref_bits(lo[r, 0])), rows[r]


def test_a_sum_lo_without_compensation_disagrees():
    """lo = the plain sum's rounding error dropped: the cancelling row [1e30, 1, -1e30, 1]
    has hi = 2 only through lo (the plain left fold gives 1)."""
    row = np.array([[1e30, 1.0, -1e30, 1.0]])
    hi, lo = ref_dd_row_sum(row)
    assert (hi[0, 0], lo[0, 0]) == (2.0, 0.0)  # the exact sum, by hand
    add = E.binary("add", "f64")
    h = lw = _lit(0.0)
    for v in row[0]:  # the wrong variant: TwoSum's error term never accumulated
        h, _ = symexec.two_sum(h, _lit(v))
    h, lw = symexec.two_sum(h, lw)
    assert _bits(h) != _ref_bits(hi[0, 0])
    assert _bits(add(h, lw)) == _ref_bits(1.0)


@pytest.mark.parametrize("n", list(range(1, 17)))
def test_numpy_sum_order_agrees_with_np_sum(n):
    rows = _f64_rows(40, n, 100 + n)
    with np.errstate(all="ignore"):
        ref = np.sum(rows, axis=-1, keepdims=True)[:, 0]
    for r in range(rows.shape[0]):
        assert _bits(symexec.numpy_sum_f64([_lit(v) for v in rows[r]])) == _ref_bits(ref[r])


def test_a_sum_in_the_wrong_order_disagrees_with_np_sum():
    """A left fold from +0 is np.sum's value below 8 lanes, not from 8 on (numpy's eight
    strided accumulators): some seeded row of 9 lanes tells them apart."""
    rows = _f64_rows(200, 9, 7)
    with np.errstate(all="ignore"):
        ref = np.sum(rows, axis=-1)
    add = E.binary("add", "f64")
    differ = 0
    for r in range(rows.shape[0]):
        s = _lit(0.0)
        for v in rows[r]:
            s = add(s, _lit(v))
        differ += _bits(s) != _ref_bits(ref[r])
    assert differ > 0


def test_kernel_reduce_sum_hi_and_sum_lo_agree_with_the_interpreter():
    """The lowered LayerNorm carries ``reduce.sum_hi`` / ``sum_lo`` (fold_left, f64): the
    symbolic run and kernel-interp agree on every output element."""
    p = lowered(module_of(LayerNorm(), [DType.F32] * 3, [(6, 4), (4,), (4,)]),
                [(6, 4), (4,), (4,)])
    text = str(p)
    assert "sum_hi" in text and "sum_lo" in text
    x = values(DType.F32, 24, 3).reshape(6, 4)
    x[0] = [1e30, 1.0, -1e30, 1.0]
    x[1] = [3.0, 3.0, 3.0, 3.0]  # an exact zero deviation
    assert agreement(p, [x, values(DType.F32, 4, 4), values(DType.F32, 4, 5)]) == []


def _uncompensated(v, dt="f64"):
    """A wrong ``dd_row_sum``: the plain left fold from +0, the low part 0."""
    add = E.binary("add", dt)
    hi = E.const(0.0, dt)
    for x in v:
        hi = add(hi, x)
    return hi, E.const(0.0, dt)


def test_a_wrong_sum_lo_encoding_disagrees_with_the_interpreter(monkeypatch):
    monkeypatch.setattr(symexec, "dd_row_sum", _uncompensated)
    p = lowered(module_of(LayerNorm(), [DType.F32] * 3, [(2, 4), (4,), (4,)]),
                [(2, 4), (4,), (4,)])
    x = np.array([[1e30, 1.0, -1e30, 1.0], [1.0, 2.0, 3.0, 4.0]], np.float32)
    one = np.ones(4, np.float32)
    assert agreement(p, [x, one, np.zeros(4, np.float32)]) != []


def test_compensated_sum_with_a_seed_or_on_f32_is_reported():
    with pytest.raises(Unsupported, match=r"reduce\.sum_hi on f32"):
        symexec.reduce_lanes([E.const(1.0, "f32")], "f32", "sum_hi", "fold_left", None, set())
    with pytest.raises(Unsupported, match=r"reduce\.sum_lo with a seed"):
        symexec.reduce_lanes([_lit(1.0)], "f64", "sum_lo", "fold_left", _lit(0.0), set())


def test_is_finite_spelling_is_np_isfinite_on_every_f64():
    """hir_nn spells np.isfinite(t) as t - t == 0; Z3 proves them equal for all 2^64 bits."""
    from tilefoundry.validate.hir_nn import _is_finite

    t = z3.FP("t", z3.Float64())
    s = z3.Solver()
    s.add(_is_finite(t) != z3.Not(z3.Or(z3.fpIsInf(t), z3.fpIsNaN(t))))
    assert s.check() == z3.unsat


_NN = [(LayerNorm(), 3), (LayerNorm(eps=0.5), 3), (RMSNorm(), 2), (RMSNorm(eps=2.0), 2)]


@pytest.mark.parametrize("dt", [DType.F32, DType.BF16, DType.F16], ids=str)
@pytest.mark.parametrize("op,k", _NN, ids=lambda v: repr(v)[:24])
@pytest.mark.parametrize("shape", [(4, 4), (2, 9), (3, 1)], ids=str)
def test_nn_hir_encoding_agrees_with_the_reference(op, k, dt, shape):
    n = shape[-1]
    x = values(dt, int(np.prod(shape)), 21).reshape(shape)
    if n == 4:
        with np.errstate(over="ignore"):
            x[0] = np.array([1e30, 1.0, -1e30, 1.0]).astype(x.dtype)  # cancels (inf in f16)
        x[1] = x[1, :1]  # an exact zero deviation
    ins = [x] + [values(dt, n, 22 + i) for i in range(k - 1)]
    m = module_of(op, [dt] * k, [shape] + [(n,)] * (k - 1))
    assert agreement_hir(m, "f", ins) == []


def test_a_wrong_nn_hir_encoding_disagrees_with_the_reference(monkeypatch):
    """The LayerNorm encoding with the row sum uncompensated (a plain left fold, lo = 0): the
    cancelling row [1e30, 1, -1e30, 1] has mean 1/4 there, 1/2 in the reference."""
    from tilefoundry.validate import hir_nn

    m = module_of(LayerNorm(), [DType.F32] * 3, [(2, 4), (4,), (4,)])
    x = np.array([[1e30, 1.0, -1e30, 1.0], [1.0, 2.0, 3.0, 4.0]], np.float32)
    ins = [x, np.ones(4, np.float32), np.zeros(4, np.float32)]
    assert agreement_hir(m, "f", ins) == []
    monkeypatch.setattr(hir_nn, "dd_row_sum", _uncompensated)
    bad = agreement_hir(m, "f", ins)
    where = {int(b.split("[")[1].split("]")[0]) for b in bad}
    # the cancelling row's lanes of value 1 (their deviation from the mean changes sign's
    # scale); the second row, summed exactly either way, is unchanged
    assert {1, 3} <= where <= {0, 1, 2, 3}, bad


def test_layernorm_and_rmsnorm_lower_is_proved():
    """Rows of up to 4 lanes: the lowering computes the reference's bits (one query per output
    element, each immediate: both sides build the same terms)."""
    from tilefoundry.validate.passes import Bounds, validate_program

    for op, k in ((LayerNorm(), 3), (RMSNorm(), 2)):
        for dt, shape in ((DType.F32, (2, 4)), (DType.BF16, (3, 3)), (DType.F16, (1, 1))):
            m = module_of(op, [dt] * k, [shape] + [shape[-1:]] * (k - 1))
            rep = validate_program(m, "f", [shape] + [shape[-1:]] * (k - 1),
                                   bounds=Bounds(timeout_ms=20_000))
            assert rep.status("lower") == "valid", rep.text()
            assert rep.status("fuse") == "valid", rep.text()


def test_a_lowering_that_drops_sum_lo_is_not_proved(monkeypatch):
    """A LayerNorm lowering whose ``sum_lo`` row reduction is replaced by a zero (a sum of
    0·x: the compensation dropped) is never proved valid. (It is not "invalid" either at 2 s
    per element: the compensation is a relative 2^-53 correction, visible in an f32 output
    only near a rounding midpoint, and Z3 finds no such model of the f64 circuit in time.)"""
    from tilefoundry.compiler.lower import _Lowerer
    from tilefoundry.validate.passes import Bounds, validate_program

    real = _Lowerer.reduction

    def planted(self, hint, x, axes, kind, policy, acc, out_dtype, pre=None, post=None,
                keepdim=True):
        if kind == "sum_lo":
            return real(self, hint, x, axes, "sum", "fold_left", acc, out_dtype,
                        pre=lambda kb, v: kb.binop("mul", v, kb.const(0.0, "f64")))
        return real(self, hint, x, axes, kind, policy, acc, out_dtype, pre, post, keepdim)

    shapes = [(1, 4), (4,), (4,)]
    m = module_of(LayerNorm(), [DType.F32] * 3, shapes)
    assert validate_program(m, "f", shapes, bounds=Bounds(timeout_ms=2000)).status(
        "lower") == "valid"  # the landed lowering
    monkeypatch.setattr(_Lowerer, "reduction", planted)
    rep = validate_program(m, "f", shapes, bounds=Bounds(timeout_ms=2000))
    assert rep.status("lower") in ("invalid", "failed to prove"), rep.text()
