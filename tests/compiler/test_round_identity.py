"""``kir.bf16_round_is_identity`` (D511): a bf16 round of a value that is already a bf16 value
(or the quiet NaN of its sign) returns it bit for bit, so the C renderer spells it as a
truncation. Each rule is checked against the reference's own rounding (``dtypes.cast``, not the
C prelude) on all 65,536 bf16 codes, and the analysis on kernel bodies that must and must not
qualify."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler import kir
from tilefoundry.semantics.dtypes import cast, widen_to_f32
from tilefoundry.semantics.evaluator.math import _f32_max, _f32_min
from tilefoundry.semantics.formats import DType

CODES = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, np.float32).view(np.uint32)


def _rnd(x: np.ndarray) -> np.ndarray:
    """The f32 value of round-to-bf16 (nonfinite overflow), the reference's cast."""
    return widen_to_f32(cast(np.asarray(x, np.float32), DType.BF16, overflow="nonfinite"))


def _any_bf16() -> np.ndarray:
    """Every bf16 code widened to f32, NaN payloads included."""
    return widen_to_f32(CODES.view(DType.BF16.storage))


def _rounded() -> np.ndarray:
    """Every value a round -> bf16 can produce: all codes, and f32 values with every low-half
    pattern (so NaNs of every payload), rounded."""
    rng = np.random.default_rng(7)
    x = np.concatenate([_any_bf16(), rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64)
                        .astype(np.uint32).view(np.float32)])
    return _rnd(x)


def test_rounding_is_idempotent_and_keeps_sign_changes():
    w = _rounded()
    for v in (w, -w, np.abs(w)):
        assert np.array_equal(_bits(_rnd(v)), _bits(v))


def test_max_min_of_bf16_values_round_to_themselves():
    a = _any_bf16()  # NaN payloads included: max / min give the positive quiet NaN
    pick = np.concatenate([a[::509], np.float32([0.0, -0.0, np.inf, -np.inf]),
                           _rounded()[::4099]]).astype(np.float32)
    for b in pick:
        bb = np.full_like(a, b)
        for f in (_f32_max, _f32_min):
            for v in (f(a, bb), f(bb, a)):
                assert np.array_equal(_bits(_rnd(v)), _bits(v))


def _body(*instrs):
    defs = {i.out: i for i in instrs}
    dts = {}
    for i in instrs:
        if isinstance(i, kir.Load):
            dts[i.out] = "bf16"
        elif isinstance(i, kir.Round):
            dts[i.out] = i.to
        elif isinstance(i, kir.Const):
            dts[i.out] = i.dtype
        else:
            dts[i.out] = "f32"
    return defs, dts.__getitem__


LD = kir.Load("ld", "x", (1,))
LD2 = kir.Load("ld2", "y", (1,))
W = kir.Widen("w", "ld", "f32")
W2 = kir.Widen("w2", "ld2", "f32")
ADD = kir.BinOp("s", "add", "w", "w2")
R = kir.Round("r", "s", "bf16")
RW = kir.Widen("rw", "r", "f32")


@pytest.mark.parametrize("instrs, x, expect", [
    ((LD, W, LD2, W2, ADD, R, RW, kir.UnOp("n", "neg", "rw")), "n", True),
    ((LD, W, LD2, W2, ADD, R, RW, kir.UnOp("n", "abs", "rw")), "n", True),
    ((LD, W, LD2, W2, ADD, R, RW, kir.BinOp("m", "max", "rw", "w")), "m", True),
    ((LD, W, kir.Const("z", 0.0, "f32"), kir.BinOp("m", "max", "w", "z")), "m", True),  # relu
    ((LD, W, kir.Const("z", 0.1, "f32"), kir.BinOp("m", "min", "w", "z")), "m", False),
    ((LD, W, LD2, W2, kir.BinOp("m", "min", "w", "w2")), "m", True),
    ((LD, W, kir.UnOp("n", "neg", "w")), "n", False),  # a loaded NaN's payload
    ((LD, W), "w", False),
    ((LD, W, LD2, W2, ADD), "s", False),
    ((LD, W, LD2, W2, ADD, kir.Round("r", "s", "bf16", "saturate"), RW,
      kir.UnOp("n", "neg", "rw")), "n", False),
    ((LD, W, LD2, W2, ADD, kir.Round("r", "s", "f16"), kir.Widen("rw", "r", "f32"),
      kir.UnOp("n", "neg", "rw")), "n", False),
    ((LD, W, LD2, W2, ADD, R, RW, kir.Const("c", True, "bool"),
      kir.Select("q", "c", "rw", "w")), "q", False),
    ((LD, W, LD2, W2, ADD, R, RW, kir.Const("c", True, "bool"), kir.UnOp("n", "neg", "rw"),
      kir.Select("q", "c", "rw", "n")), "q", True),
])
def test_which_rounds_are_identities(instrs, x, expect):
    defs, dt = _body(*instrs)
    assert kir.bf16_round_is_identity(defs, dt, x) is expect


# ---------------------------------------------------------------------------------------------
# end to end: the SIMD C backend with the rounds spelled as truncations, on every bf16 code
# ---------------------------------------------------------------------------------------------
def _program(kind: str):
    from compiler_helpers import module_of, var

    from tilefoundry.semantics.ir import Call
    from tilefoundry.semantics.ops import Binary, BinaryKind, Unary, UnaryKind

    x, y = var("x", (1 << 16,), DType.BF16), var("y", (1 << 16,), DType.BF16)
    p = Call(Binary(BinaryKind.MUL), (x, y))  # a rounded product
    body = {"neg": Call(Unary(UnaryKind.NEG), (p,)),
            "abs": Call(Unary(UnaryKind.ABS), (p,)),
            "max": Call(Binary(BinaryKind.MAX), (p, x)),
            "min": Call(Binary(BinaryKind.MIN), (x, y)),
            "relu": Call(Unary(UnaryKind.RELU), (p,)),
            "neg_loaded": Call(Unary(UnaryKind.NEG), (x,))}[kind]
    return module_of([x, y], body)


@pytest.mark.parametrize("kind, calls", [("neg", 1), ("abs", 1), ("max", 1), ("min", 0),
                                         ("relu", None), ("neg_loaded", 1)])
def test_simd_rounds_elided_are_bit_exact_on_every_code(kind, calls):
    """``calls``: the bf16 roundings left in the kernel (the product's; none for min of two
    loaded values; the round of a negated *loaded* value stays)."""
    from compiler_helpers import assert_bitexact

    m = _program(kind)
    x = CODES.view(DType.BF16.storage).copy()
    rng = np.random.default_rng(3)
    for y in (x[::-1].copy(), rng.permutation(x)):
        c = assert_bitexact(m, [x, y], target="simd")
    src = c.executable.source
    if calls is not None:  # minus the prelude's definition
        assert src.count("tf__rnd_bf16(") - 1 == calls, kind
