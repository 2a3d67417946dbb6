"""The tile-family ``Mma``'s SMT semantics (``validate/hir_smt._mma``, D516): agreement with the
reference evaluator and of the lowered ``Dot`` with kernel-interp on special values (NaN, ±0,
±inf, subnormals) and seeded random bit patterns; the ``lower`` pass proved valid; wrong
lowerings — operands rounded to bf16 before the products, the accumulator kept in bf16, the
accumulator added after the products instead of seeding the fold — are ``invalid`` with a
counterexample that replays (the reference and the wrong program differ on its inputs, the
landed program matches the reference there)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tilefoundry.compiler import kir
from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.ops import Mma
from tilefoundry.validate.agree import agreement, agreement_hir
from tilefoundry.validate.passes import validate_program
from tilefoundry.validate.refine import check_lowering

from .helpers import lowered, module_of, values
from .test_hir_order import _replays, _rewrite_all, _stage

F32, BF16, F16, E4M3, E5M2 = DType.F32, DType.BF16, DType.F16, DType.FP8E4M3, DType.FP8E5M2

CASES = [  # (operand dtype, acc dtype, (a, b, acc) shapes, allow_reassociation)
    (F32, F32, ((2, 3), (3, 2), (2, 2)), False),
    (BF16, F32, ((3, 4), (4, 2), (3, 2)), True),
    (F16, F16, ((2, 2, 3), (2, 3, 2), (2, 2, 2)), True),
    (E4M3, BF16, ((2, 4), (4, 2), (2, 2)), True),
    (E5M2, F32, ((1, 5), (5, 3), (1, 3)), False),
    (F32, F32, ((2, 0), (0, 3), (2, 3)), True),  # K = 0: the result is acc
]


def _inputs(dt: DType, ct: DType, shapes, seed: int) -> list[np.ndarray]:
    return [values(d, int(np.prod(s)), seed + i).reshape(s)
            for i, (d, s) in enumerate(zip((dt, dt, ct), shapes, strict=True))]


@pytest.mark.parametrize("dt,ct,shapes,reassoc", CASES, ids=str)
def test_mma_encoding_agrees_with_the_reference(dt, ct, shapes, reassoc):
    m = module_of(Mma(reassoc), [dt, dt, ct], list(shapes))
    for seed in (1, 7, 21):
        assert agreement_hir(m, "f", _inputs(dt, ct, shapes, seed)) == []


@pytest.mark.parametrize("dt,ct,shapes,reassoc", CASES, ids=str)
def test_mma_kernel_ir_agrees_with_interp(dt, ct, shapes, reassoc):
    p = lowered(module_of(Mma(reassoc), [dt, dt, ct], list(shapes)), list(shapes))
    assert agreement(p, _inputs(dt, ct, shapes, 3), variables=True) == []


@pytest.mark.parametrize("dt,ct,shapes,reassoc", CASES, ids=str)
def test_lower_of_mma_is_valid(dt, ct, shapes, reassoc):
    rep = validate_program(module_of(Mma(reassoc), [dt, dt, ct], list(shapes)), "f",
                           list(shapes))
    for p in ("elaborate", "lower", "fuse", "schedule"):
        assert rep.status(p) == "valid", rep.text()


def _mma(shapes=((2, 3), (3, 2), (2, 2)), dt=F32):
    m = module_of(Mma(True), [dt, dt, F32], list(shapes))
    return m, _stage(m, list(shapes))


def test_operands_rounded_to_bf16_is_invalid_and_replays():
    """Precision reduced (a TF32 / bf16 MMA): the contract never reduces input precision."""
    m, st = _mma()

    def narrow(ins, types):
        if isinstance(ins, kir.Dot):
            return [kir.Round(ins.out + "_ar", ins.a, "bf16"),
                    kir.Widen(ins.out + "_aw", ins.out + "_ar", "f32"),
                    replace(ins, a=ins.out + "_aw")]
        return None

    bad = _rewrite_all(st.program, narrow)
    _replays(m, bad, st.program, check_lowering(m, "f", st.hir, bad, timeout_ms=20_000))


def test_accumulator_kept_in_bf16_is_invalid_and_replays():
    m, st = _mma()

    def bf16_acc(ins, types):
        if isinstance(ins, kir.Dot):
            return [replace(ins, out=ins.out + "_raw"),
                    kir.Round(ins.out + "_r", ins.out + "_raw", "bf16"),
                    kir.Widen(ins.out, ins.out + "_r", "f32")]
        return None

    bad = _rewrite_all(st.program, bf16_acc)
    _replays(m, bad, st.program, check_lowering(m, "f", st.hir, bad, timeout_ms=20_000))


def test_accumulator_added_last_is_invalid_and_replays():
    """``fl(a·b) + acc`` instead of the fold seeded by acc: a different rounding order."""
    m, st = _mma()

    def add_last(ins, types):
        if isinstance(ins, kir.Dot) and ins.init is not None:
            return [replace(ins, out=ins.out + "_p", init=None),
                    kir.BinOp(ins.out, "add", ins.out + "_p", ins.init)]
        return None

    bad = _rewrite_all(st.program, add_last)
    _replays(m, bad, st.program, check_lowering(m, "f", st.hir, bad, timeout_ms=20_000))
