"""The flagged scans (issue 37 item 1): MaskedScan ("Masked contributions are skipped under a
defined mask contract, rather than treating every padding value as a valid identity") and
SegmentedScan ("segmented scans can use a lifted (head, value) associative state") — the
reference against a per-position definition written here with Python lists, their relation to
Scan, the type rules' errors, and the admitted-set judge under ordered_tree."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import MaskedScan, Scan, SegmentedScan
from tilefoundry.semantics.reductions import scan
from tilefoundry.semantics.scan_flags import flagged_scan, flagged_scan_admits
from tilefoundry.semantics.typeinfer import TypeInferError, infer_module
from tilefoundry.semantics.types import IRError, TensorType

OPS = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "max": max, "min": min}
IDENT = {"add": 0, "mul": 1, "max": -(1 << 31), "min": (1 << 31) - 1}


def _fold(comb, vals):
    s = vals[0]
    for v in vals[1:]:
        s = OPS[comb](s, v)
    return s


def _wrap(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def _by_definition(x, flags, mode, comb, inclusive, seed):
    """Per output position, the contributions its prefix combines, folded in order."""
    out = []
    for i in range(len(x)):
        stop = i + 1 if inclusive else i
        if mode == "mask":
            leaves = ([] if seed is None else [seed]) + [int(x[j]) for j in range(stop)
                                                         if flags[j]]
        else:
            heads = [k for k in range(i + 1) if flags[k]]
            if heads:
                leaves = [int(v) for v in x[heads[-1]:stop]]
            else:
                leaves = ([] if seed is None else [seed]) + [int(v) for v in x[:stop]]
        out.append(_wrap(_fold(comb, leaves)) if leaves else IDENT[comb])
    return out


@pytest.mark.parametrize("mode", ["mask", "segment"])
@pytest.mark.parametrize("comb", ["add", "mul", "max", "min"])
def test_reference_matches_the_definition(mode, comb):
    rng = np.random.default_rng(11)
    for trial in range(30):
        n = int(rng.integers(1, 9))
        x = rng.integers(-9, 10, n).astype(np.int32)
        f = rng.random(n) < 0.4
        seed = None if trial % 3 == 0 else int(rng.integers(-5, 6))
        for inc in (True, False):
            got = flagged_scan(x, f, mode, comb, inclusive=inc, seed=seed).tolist()
            assert got == _by_definition(x, f, mode, comb, inc, seed), (x, f, seed, inc)


def test_worked_examples():
    x = np.array([1, 2, 3, 4, 5], np.int32)
    h = np.array([0, 0, 1, 0, 1], bool)
    # the seed 10 enters the first segment only; a head resets (exclusive: the identity there)
    assert flagged_scan(x, h, "segment", seed=10).tolist() == [11, 13, 3, 7, 5]
    assert flagged_scan(x, h, "segment", seed=10, inclusive=False).tolist() == [10, 11, 0, 3, 0]
    # masked lanes are skipped: the state passes them unchanged
    assert flagged_scan(x, h, "mask").tolist() == [0, 0, 3, 3, 8]
    assert flagged_scan(x, h, "mask", inclusive=False).tolist() == [0, 0, 0, 3, 3]


def test_masked_lanes_never_enter_even_nan_and_inf():
    x = np.array([1.0, np.nan, 2.0, np.inf, -1.0], np.float32)
    m = np.array([1, 0, 1, 0, 1], bool)
    assert flagged_scan(x, m, "mask").tolist() == [1.0, 1.0, 3.0, 3.0, 2.0]
    assert flagged_scan(x, m, "mask", "max").tolist() == [1.0, 1.0, 2.0, 2.0, 2.0]


@pytest.mark.parametrize("dt", [DType.F32, DType.BF16, DType.I8])
def test_all_true_mask_and_no_heads_are_the_plain_scan(dt):
    rng = np.random.default_rng(4)
    from tilefoundry.semantics.dtypes import cast
    x = cast(rng.standard_normal((3, 7)).astype(np.float32) * 4, dt)
    for inc in (True, False):
        for seed in (None, 2):
            want = scan(x, "add", 1, inclusive=inc, seed=seed)
            for mode, f in (("mask", np.ones(x.shape, bool)), ("segment", np.zeros(x.shape, bool))):
                got = flagged_scan(x, f, mode, "add", 1, inclusive=inc, seed=seed)
                assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (mode, inc, seed)


def test_every_lane_a_head_gives_x_and_exclusive_identity():
    x = np.array([[3.0, -0.0, 5.0]], np.float32)
    h = np.ones(x.shape, bool)
    got = flagged_scan(x, h, "segment", "add", seed=7.0)
    assert got.tolist() == x.tolist() and np.signbit(got[0, 1])  # -0 itself, no seed
    exc = flagged_scan(x, h, "segment", "add", inclusive=False, seed=7.0)
    assert exc.tolist() == [[0.0, 0.0, 0.0]] and not np.signbit(exc).any()


def test_ordered_tree_admits_regrouping_of_kept_leaves_only():
    t = np.float32(2.0 ** -24)
    x = np.array([t, 5.0, t, 1.0], np.float32)
    m = np.array([1, 0, 1, 1], bool)
    fold = flagged_scan(x, m, "mask", seed=1.0)
    assert fold.tolist() == [1.0, 1.0, 1.0, 2.0]  # ((1 + t) + t) ties to 1 each step
    regroup = fold.copy()
    regroup[2] = np.float32(1.0) + (t + t)  # seed first, kept leaves in order, regrouped
    assert regroup[2] != fold[2]
    ok = flagged_scan_admits(regroup, x, m, "mask", seed=1.0, policy="ordered_tree").admitted
    assert ok.all()
    strict = flagged_scan_admits(regroup, x, m, "mask", seed=1.0, policy="fold_left").admitted
    assert strict.tolist() == [True, True, False, True]
    combined = fold.copy()
    combined[2] = fold[2] + np.float32(5.0)  # the masked lane entered
    assert flagged_scan_admits(combined, x, m, "mask", seed=1.0).admitted.tolist() == \
        [True, True, False, True]
    seeded_twice = fold.copy()
    seeded_twice[0] = np.float32(2.0) + t  # the seed entered twice
    assert not flagged_scan_admits(seeded_twice, x, m, "mask", seed=1.0).admitted[0]


def _typed(op, xt, ft):
    x, f = Var("x", xt), Var("f", ft)
    return infer_module(Module((Function("f", (x, f), Call(op, (x, f)), None),)))


def test_type_rules():
    x = TensorType((4, 6), DType.F32)
    _typed(MaskedScan(1, "add", seed=2.0), x, TensorType((4, 6), DType.BOOL))  # accepted
    cases = [
        (MaskedScan(1), TensorType((4, 6), DType.I32), "mask has dtype i32"),
        (SegmentedScan(1), TensorType((4, 1), DType.BOOL), r"heads has shape \(4, 1\)"),
        (SegmentedScan(1, "mul"), TensorType((4, 6), DType.BOOL), "combine=mul"),
        (MaskedScan(1, seed=0.1), TensorType((4, 6), DType.BOOL), "not exactly"),
        (MaskedScan(2), TensorType((4, 6), DType.BOOL), "axis"),
    ]
    for op, ft, msg in cases:
        with pytest.raises(TypeInferError, match=msg) as ei:
            _typed(op, x, ft)
        assert type(op).__name__ in str(ei.value)


def test_constructor_checks_name_the_op():
    with pytest.raises(IRError, match=r"SegmentedScan\.policy.*must not"):
        SegmentedScan(0, policy="unordered_tree")
    with pytest.raises(IRError, match=r"MaskedScan\.combine"):
        MaskedScan(0, "xor")
    assert MaskedScan(0, seed=-0.0) != MaskedScan(0, seed=0.0)
    assert MaskedScan(0) != SegmentedScan(0) and MaskedScan(0) != Scan(0)
    assert hash(MaskedScan(1, "max")) == hash(MaskedScan(1, "max"))
