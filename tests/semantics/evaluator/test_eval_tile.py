"""Evaluator of the tile family against independent models: Python loops over Fractions (each
IEEE operation rounded by a hand-written round-to-nearest-even onto the format's grid), Python
ints modulo 2^bits, ``struct`` for bit patterns — never the evaluator's own helpers. The Tile
design's worked examples are tests here: the scan of ``[1, 2, 3]`` and of its permutation
``[3, 1, 2]``, and the fold_left / fold_right ``x - state`` orientation."""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest

from tilefoundry.oracle.compare import FAIL, PASS, check
from tilefoundry.semantics.dtypes import cast, from_bits
from tilefoundry.semantics.evaluator import families  # noqa: F401  (registers)
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Bitcast, Scan, Select
from tilefoundry.semantics.reductions import fold_left, fold_right
from tilefoundry.semantics.types import TensorType

F32, BF16, F16, I8, U8, I32, BOOL, U32 = (DType.F32, DType.BF16, DType.F16, DType.I8, DType.U8,
                                          DType.I32, DType.BOOL, DType.U32)
E4M3 = DType.FP8E4M3
#: (significand bits incl. the implicit one, emin, largest finite or None, has inf)
FMT = {F32: (24, -126, None, True), BF16: (8, -126, None, True), F16: (11, -14, None, True),
       E4M3: (4, -6, Fraction(448), False)}


def rne(q: Fraction, dt: DType) -> Fraction | float:
    """Round the exact rational ``q`` to nearest-even on ``dt``'s grid (inf / NaN overflow)."""
    p, emin, top, has_inf = FMT[dt]
    if q == 0:
        return q
    s, a = (-1 if q < 0 else 1), abs(q)
    e = max(math.floor(math.log2(a)), emin)
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, emin)
    ulp = Fraction(2) ** (e - p + 1)
    n, r = divmod(a, ulp)
    if r > ulp / 2 or (r == ulp / 2 and n % 2 == 1):
        n += 1
    v = n * ulp
    if dt in (F32, BF16):
        top = Fraction(2) ** 128 - Fraction(2) ** (128 - p)
    elif dt is F16:
        top = Fraction(65504)
    if v > top:
        # IEEE: overflow when the rounded-with-unbounded-exponent value exceeds max finite
        return s * math.inf if has_inf else math.nan
    return s * v


def frac(x) -> Fraction:
    return Fraction(float(np.asarray(x, np.float32)))


def fvals(vals, dt):
    return cast(np.asarray(vals, np.float32), dt)


def run(op, *args):
    return EVALUATORS[type(op)](EvalCtx(op, None, None), tuple(np.asarray(a) for a in args))


def module_of(op, *types):
    ps = [Var(f"x{i}", t) for i, t in enumerate(types)]
    return Module((Function("f", tuple(ps), Call(op, tuple(ps)), None),))


# ---- Select ---------------------------------------------------------------------------------
def test_select_matches_a_loop_and_moves_bits():
    rng = np.random.default_rng(1)
    bits = np.array([0x7FC00001, 0xFFA00000, 0x80000000, 0x00000001, 0x7F800000, 0x3F800000],
                    np.uint32)
    t = from_bits(np.resize(bits, (4, 6)), F32)
    f = from_bits(np.resize(bits[::-1], (1, 6)), F32)
    c = rng.random((4, 1)) < 0.5
    out = run(Select(), c, t, f)
    tb, fb = t.view(np.uint32), f.view(np.uint32)  # bits, never through a Python float
    want = [[int(tb[i, j]) if c[i, 0] else int(fb[0, j]) for j in range(6)] for i in range(4)]
    assert out.dtype == np.float32 and out.view(np.uint32).tolist() == want
    # the argument order is ite(cond, true_value, false_value)
    assert run(Select(), np.array([True, False]), fvals([1, 2], F32),
               fvals([3, 4], F32)).tolist() == [1.0, 4.0]


def test_select_of_integers_and_u32():
    c = np.array([[True], [False]])
    a = np.array([1, 2, 3], np.uint32)
    b = np.array(7, np.uint32)
    assert run(Select(), c, a, b).tolist() == [[1, 2, 3], [7, 7, 7]]


# ---- Bitcast --------------------------------------------------------------------------------
@pytest.mark.parametrize("bits", [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000,
                                  0x7FC00000, 0x7F800001, 0xFFBADBAD, 0x3F800000, 0xC0490FDB])
def test_bitcast_preserves_every_bit(bits):
    """Tile design: bitcast preserves "zero signs, subnormals and NaN payloads" — a signalling
    NaN (0x7F800001) and payloads included, both directions."""
    u = np.array([bits], np.uint32)
    f = run(Bitcast(F32), u)
    assert f.dtype == np.float32 and f.tobytes() == struct.pack("<I", bits)
    back = run(Bitcast(U32), f)
    assert back.dtype == np.uint32 and int(back[0]) == bits


def test_bitcast_of_f32_values_is_their_encoding():
    x = fvals([1.0, -2.0, 0.5, -0.0], F32)
    want = [struct.unpack("<I", struct.pack("<f", float(v)))[0] for v in (1.0, -2.0, 0.5, -0.0)]
    assert run(Bitcast(U32), x).tolist() == want


# ---- Scan: the independent model --------------------------------------------------------------
def model_scan(xs, comb, dt, inclusive=True, seed=None):
    """The design's recurrence, one element at a time. Floats: the state is f32 (each combine
    rounded to f32), each output rounded once to dt; ints: modulo 2^bits."""
    info = dt.info
    if dt.is_int:
        m = 1 << info.bits

        def wrap(v):
            v %= m
            return v - m if info.signed and v >= m // 2 else v
        op = {"add": lambda s, x: wrap(s + x), "mul": lambda s, x: wrap(s * x),
              "max": max, "min": min}[comb]
        ident = {"add": 0, "mul": 1, "max": -(m // 2) if info.signed else 0,
                 "min": m // 2 - 1 if info.signed else m - 1}[comb]
        state, out = seed, []
        for x in xs:
            prev = state
            state = x if state is None else op(state, x)
            out.append(state if inclusive else (ident if prev is None else prev))
        return out

    def fmax(s, x, largest):  # NaN propagates; -0 < +0
        if (isinstance(s, float) and math.isnan(s)) or (isinstance(x, float) and math.isnan(x)):
            return math.nan
        ks = (s, math.copysign(1, float(s))) if s == 0 else (s, 0)
        kx = (x, math.copysign(1, float(x))) if x == 0 else (x, 0)
        return (x if kx > ks else s) if largest else (x if kx < ks else s)

    def add(s, x):
        if any(isinstance(v, float) and (math.isnan(v) or math.isinf(v)) for v in (s, x)):
            return float(s) + float(x)
        if s == 0 and x == 0:  # IEEE: -0 + -0 = -0, otherwise +0
            neg = math.copysign(1, float(s)) < 0 and math.copysign(1, float(x)) < 0
            return -0.0 if neg else Fraction(0)
        return rne(Fraction(s) + Fraction(x), F32)

    op = add if comb == "add" else (lambda s, x: fmax(s, x, comb == "max"))
    big = math.inf if FMT[dt][3] else FMT[dt][2]  # HIR identity: the format's extreme value
    ident = {"add": Fraction(0), "max": -big, "min": big}[comb]
    state, out = (None if seed is None else as_model(seed)), []
    for x in xs:
        prev = state
        state = x if state is None else op(state, x)
        out.append(state if inclusive else (ident if prev is None else prev))
    return out


def as_model(v):
    v = float(v)
    return v if math.isnan(v) or math.isinf(v) or v == 0 else Fraction(v)


def same(a, b) -> bool:
    fa, fb = float(a), float(b)
    if math.isnan(fa) or math.isnan(fb):
        return math.isnan(fa) and math.isnan(fb)
    return fa == fb and math.copysign(1, fa) == math.copysign(1, fb)


@pytest.mark.parametrize("dt", [F32, BF16, F16, E4M3])
@pytest.mark.parametrize("comb", ["add", "max", "min"])
@pytest.mark.parametrize(("inclusive", "seed"), [(True, None), (False, None), (True, 2.0),
                                                 (False, -0.0)])
def test_float_scan_matches_the_fraction_model(dt, comb, inclusive, seed):
    rng = np.random.default_rng(7)
    pool = [1.0, -1.0, 0.5, 3.0, 2.0 ** -7, -0.0, 0.0, 2.5, -6.0, 1.25, 7.5]
    if comb != "add":
        pool += [math.nan, math.inf, -math.inf]
    rows = rng.choice(pool, (5, 9))
    x = fvals(rows, dt)
    got = run(Scan(1, comb, inclusive=inclusive, seed=seed, policy="fold_left"), x)
    for r in range(x.shape[0]):
        xs = [as_model(np.asarray(v).astype(np.float32)) for v in x[r]]
        want = model_scan(xs, comb, dt, inclusive, seed)
        for j, w in enumerate(want):
            w = w if isinstance(w, float) else rne(Fraction(w), dt)
            assert same(float(np.asarray(got[r, j]).astype(np.float32)), w), (r, j, w)


@pytest.mark.parametrize("dt", [I8, U8, I32, DType.I64])
@pytest.mark.parametrize("comb", ["add", "mul", "max", "min"])
@pytest.mark.parametrize(("inclusive", "seed"), [(True, None), (False, None), (False, 3)])
def test_integer_scan_wraps_like_python_ints(dt, comb, inclusive, seed):
    rng = np.random.default_rng(11)
    ii = np.iinfo(dt.storage)
    x = rng.integers(max(ii.min, -100), min(ii.max, 100), (4, 8)).astype(dt.storage)
    x[0, :3] = [ii.max, ii.max, ii.min] if ii.min < 0 else [ii.max, ii.max, 1]
    got = run(Scan(-1, comb, inclusive=inclusive, seed=seed), x)
    for r in range(4):
        assert got[r].tolist() == model_scan([int(v) for v in x[r]], comb, dt, inclusive, seed)


def test_bool_scan_max_min():
    x = np.array([[False, True, False], [True, True, False]])
    assert run(Scan(1, "max"), x).tolist() == [[False, True, True], [True, True, True]]
    assert run(Scan(1, "min", inclusive=False), x).tolist() == [[True, False, False],
                                                               [True, True, True]]


def test_scan_design_example():
    """Tile design: "Moving [1, 2, 3] to [3, 1, 2] preserves an integer sum of 6, but changes
    inclusive prefixes from [1, 3, 6] to [3, 4, 6]." — and the oracle rejects the permuted
    prefixes as a scan of [1, 2, 3], under fold_left and under ordered_tree."""
    for dt in (I32, F32):
        a = np.array([1, 2, 3], dt.storage)
        assert run(Scan(0), a).tolist() == [1, 3, 6]
        assert run(Scan(0), np.array([3, 1, 2], dt.storage)).tolist() == [3, 4, 6]
        for pol in ("fold_left", "ordered_tree"):
            m = module_of(Scan(0, policy=pol), TensorType((3,), dt))
            assert check(m, "f", [a], np.array([1, 3, 6], dt.storage)).status == PASS
            assert check(m, "f", [a], np.array([3, 4, 6], dt.storage)).status == FAIL


def test_scan_boundaries_and_empty_axis():
    """exclusive[i] = prefix[i], exclusive[0] = the seed (or the combine's identity); an empty
    axis gives an empty result."""
    x = fvals([1, 2, 3], F32)
    assert run(Scan(0, inclusive=False, seed=10.0), x).tolist() == [10.0, 11.0, 13.0]
    z = run(Scan(0, inclusive=False), x)
    assert z.tolist() == [0.0, 1.0, 3.0] and not np.signbit(z[0])  # +0, the HIR identity
    assert np.signbit(run(Scan(0), fvals([-0.0], F32))[0])  # no seed: x0 itself (-0)
    assert run(Scan(0, "max", inclusive=False), x)[0] == -np.inf
    assert float(np.asarray(run(Scan(0, "max", inclusive=False), fvals([1.0], E4M3))[0])
                 .astype(np.float32)) == -448.0  # fp8e4m3 has no -inf
    assert run(Scan(0, "mul", inclusive=False), np.array([5, 6], np.int32)).tolist() == [1, 5]
    e = run(Scan(1, seed=3), np.zeros((2, 0), np.float32))
    assert e.shape == (2, 0) and e.dtype == np.float32


def test_scan_notes_the_admitted_set_only_for_ordered_tree_float_add():
    cases = [(Scan(0), F32, True), (Scan(0, policy="fold_left"), F32, False),
             (Scan(0, "max"), F32, False), (Scan(0), I32, False), (Scan(0), BF16, True)]
    for op, dt, noted in cases:
        m = module_of(op, TensorType((4,), dt))
        ev = evaluate(m, "f", [np.ones(4, dt.storage)], report=True)
        kinds = [c.kind for _, c in ev.contracts]
        assert kinds == (["admitted_set"] if noted else []), (op, dt, kinds)


def test_ordered_tree_admits_a_regrouping_the_fold_does_not():
    """[1, 2^-24, 2^-24]: the fold gives 1 at prefix 3, the tree 1 + (2^-24 + 2^-24) = 1 + 2^-23
    — admitted under ordered_tree, a FAIL under fold_left."""
    t = 2.0 ** -24
    x = fvals([1.0, t, t], F32)
    tree = np.array([1.0, 1.0, 1.0 + 2.0 ** -23], np.float32)
    for pol, want in (("ordered_tree", PASS), ("fold_left", FAIL)):
        m = module_of(Scan(0, policy=pol), TensorType((3,), F32))
        assert check(m, "f", [x], tree).status == want


# ---- fold_right orientation -------------------------------------------------------------------
def test_fold_right_orientation_design_example():
    """Tile design: "For x = [1, 2, 3] these examples yield left = -6, right = 2." "The policy
    does not silently change state - element into element - state; doing only a reversed
    left-fold traversal is not the same contract.\""""
    x = np.array([1.0, 2.0, 3.0], np.float32)
    assert float(fold_left(x, lambda s, e: s - e, seed=np.float32(0))) == -6.0
    assert float(fold_right(x, lambda e, s: e - s, seed=np.float32(0))) == 2.0
    # the reversed left traversal (state - element over [3, 2, 1]) is a different function
    assert float(fold_left(x[::-1], lambda s, e: s - e, seed=np.float32(0))) == -6.0
    # [1, 2, 4, 8] (the catalog's spec/tile/fold-right-orientation-1248 case): by hand,
    # right = 1 - (2 - (4 - (8 - 0))) = -5
    y = np.array([1, 2, 4, 8], np.int64)
    assert int(fold_right(y, lambda e, s: e - s, seed=np.int64(0))) == -5
    assert int(fold_left(y[::-1], lambda s, e: s - e, seed=np.int64(0))) == -15
