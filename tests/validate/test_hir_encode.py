"""Per HIR op the lower pass consumes: the HIR encoding (validate/hir_smt.py) and the reference
evaluator agree on special values and seeded random bit patterns; an op without an encoding is
reported by name."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.ops import Binary, Cast, MatMul, Reduce, Select, Unary
from tilefoundry.semantics.ops.math import BinaryKind, UnaryKind
from tilefoundry.semantics.ops.tensor import ReduceKind
from tilefoundry.validate.agree import agreement_hir

from .helpers import module_of, values

N = 16
BF16 = ml_dtypes.bfloat16


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
    from tilefoundry.semantics.ops import CustomReduce
    from tilefoundry.validate.encode import Unsupported

    # (Sort, the example before D514, SoftMax, the one before D523, Conv2D, the one before
    # D535, and a masked float tree sum, the one before D542, are encoded now: every op class
    # is, so the example is an unencoded configuration — a custom reducer's tree over more
    # merge trees than refinement enumerates)
    m = module_of(CustomReduce((1,), "welford", "unordered_tree", False),
                  [DType.F32, DType.F32], [(2, 4), (2, 3)])
    with pytest.raises(Unsupported, match=r"unsupported op CustomReduce\(welford\) under "
                                          "unordered_tree"):
        agreement_hir(m, "f", [values(DType.F32, 8, 1).reshape(2, 4),
                               np.zeros((2, 3), np.float32)])


def _movement_module(src: str):
    from tilefoundry.semantics.dsl import parse_module

    return parse_module(src)


@pytest.mark.parametrize("dt", [DType.F32, DType.BF16, DType.FP8E5M2, DType.I8, DType.BOOL],
                         ids=str)
def test_data_movement_is_the_reference_index_map(dt):
    """Reshape, Transpose, Slice, Concat, Stack: every output element is the operand element the
    reference moves there, bit for bit (NaN payloads included: the special values hold
    signalling and negative NaNs in the float dtypes)."""
    t = dt.value
    m = _movement_module(f'''
@func
def f(a: Tensor[(2, 3), {t}], b: Tensor[(2, 3), {t}]):
    c = concat((transpose(a, (1, 0)), transpose(b, (1, 0))), 0)
    s = stack((a, b), 1)
    return (reshape(c, (4, 3)), s[:, 1, 1:], slice(c, (1, 0), (5, 2)))

module(f)
''')
    a, b = values(dt, 6, 11).reshape(2, 3), values(dt, 6, 12).reshape(2, 3)
    assert agreement_hir(m, "f", [a, b]) == []


def test_a_value_independent_op_is_constants_and_tuples_compare_field_by_field():
    m = _movement_module('''
@func
def f(a: Tensor[(2, 3), f32]):
    return (zeros((2, 2), f32), a + a)

module(f)
''')
    assert agreement_hir(m, "f", [values(DType.F32, 6, 13).reshape(2, 3)]) == []


def test_the_index_map_encoding_detects_a_wrong_move(monkeypatch):
    """The check can fail: an index map that reads the wrong element (the reference's Transpose
    replaced by the identity while the encoding keeps the reference's) disagrees."""
    import tilefoundry.validate.hir_smt as H

    m = _movement_module('''
@func
def f(a: Tensor[(2, 3), f32]):
    return transpose(a, (1, 0))

module(f)
''')
    x = values(DType.F32, 6, 14).reshape(2, 3)
    real = H._run_ref
    monkeypatch.setattr(H, "_run_ref", lambda call, ops, env: np.flip(real(call, ops, env)))
    assert agreement_hir(m, "f", [x]) != []


@pytest.mark.parametrize("dt", [DType.F32, DType.BF16, DType.I32], ids=str)
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize("policy", ["fold_left", "fold_right", "ordered_tree",
                                    "unordered_tree"])
def test_seeded_reduce(kind, policy, dt):
    """SeededReduce (reducers._seeded_fibers): the seed enters as a state; narrow floats widen
    to f32 and round once; tree sums are their admitted set (the reference's member in it)."""
    t = dt.value
    m = _movement_module(f'''
@func
def f(x: Tensor[(3, 4), {t}], s: Tensor[(3,), {t}]):
    return reduce_{kind}_seeded(x, s, (1,), "{policy}", False)

module(f)
''')
    x, s = values(dt, 12, 21).reshape(3, 4), values(dt, 3, 22)
    assert agreement_hir(m, "f", [x, s]) == []


@pytest.mark.parametrize("dt", [DType.F32, DType.F16, DType.I8], ids=str)
@pytest.mark.parametrize("kind,policy", [("sum", "fold_left"), ("sum", "fold_right"),
                                         ("max", "ordered_tree"), ("min", "unordered_tree")])
def test_masked_reduce(kind, policy, dt):
    """MaskedReduce: inactive lanes are absent (a fully masked fiber is its seed)."""
    t = dt.value
    m = _movement_module(f'''
@func
def f(x: Tensor[(3, 4), {t}], s: Tensor[(3,), {t}], k: Tensor[(3, 4), bool]):
    return reduce_{kind}_masked(x, s, k, (1,), "{policy}", False)

module(f)
''')
    x, s = values(dt, 12, 23).reshape(3, 4), values(dt, 3, 24)
    k = np.array([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0, 1]], bool)
    assert agreement_hir(m, "f", [x, s, k]) == []


def _hir_pair(op_src, op_tgt, dts, shapes):
    from tilefoundry.compiler.pipeline import TARGETS, State, run_passes

    fns = []
    for op in (op_src, op_tgt):
        m = module_of(op, dts, shapes)
        st = State(m, "f", shapes, TARGETS["interp"])
        run_passes(st, ["typeinfer", "elaborate", "canonicalize"])
        fns.append((m, st.hir))
    return fns


@pytest.mark.parametrize("op,other,dts,shapes,what", [
    ("masked", "fold_left", [DType.F32, DType.F32, DType.BOOL], [(2, 4), (2,), (2, 4)],
     "a masked ordered_tree sum (admitted set abstracted)"),
    ("scan", "fold_left", [DType.F32, DType.BOOL], [(3, 4), (3, 4)],
     "a masked ordered_tree sum (admitted set abstracted)")])
def test_a_tree_sum_that_depends_on_a_mask_is_abstracted_by_name(op, other, dts, shapes, what):
    """D542: a float tree sum whose admitted set depends on mask / flag values (a masked tree
    reduction, a flagged ordered-tree scan) is one uninterpreted function of its values and
    flags: the same op on the same operands on both sides is valid, the abstraction named;
    another program (here the fold the policy admits, or not) is at most "failed to prove" —
    a difference is no proof of a bug there, and no proof of its absence."""
    from tilefoundry.semantics.ops import MaskedReduce, MaskedScan
    from tilefoundry.validate.elaborate import check_hir_refinement

    def mk(policy):
        return MaskedReduce((1,), "sum", policy, False) if op == "masked" else \
            MaskedScan(axis=1, combine="add", policy=policy)

    (m, src), (_, tgt) = _hir_pair(mk("ordered_tree"), mk(other), dts, shapes)
    same = check_hir_refinement(src, src, (m, "f"), "same", timeout_ms=10_000)
    assert same.status == "valid" and what in same.abstractions, same
    out = check_hir_refinement(src, tgt, (m, "f"), "other", timeout_ms=10_000)
    assert out.status == "failed to prove" and "abstract" in out.reason, (out.status, out.reason)


_MASKED_SUM = """
@func
def f(x: Tensor[(2, 4), {t}], s: Tensor[(2,), {t}], k: Tensor[(2, 4), bool]):
    return reduce_sum_masked({x}, {s}, k, (1,), "{policy}", False)

module(f)
"""


@pytest.mark.parametrize("t", ["f32", "bf16"])
def test_a_masked_tree_sum_lowers_to_the_same_abstraction(t):
    """D542: the kernel IR's f32 tree sum over a data-dependent mask is the abstraction the
    HIR's masked tree sum is (the seed, the lanes, their mask bits; the tile's padded lanes
    dropped): the lowering is valid. A lowering that reads other lanes, another seed, or
    folds (a member of the admitted set, but not the abstraction) is not valid — at most
    "failed to prove", since a difference under an abstracted admitted set proves nothing."""
    from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
    from tilefoundry.validate.refine import check_lowering

    from .helpers import lowered

    def mod(x="x", s="s", policy="ordered_tree"):
        return _movement_module(_MASKED_SUM.format(t=t, x=x, s=s, policy=policy))

    shapes = [(2, 4), (2,), (2, 4)]
    m = mod()
    st = run_passes(State(m, "f", shapes, TARGETS["interp"]),
                    ["typeinfer", "elaborate", "canonicalize", "lower"])
    ok = check_lowering(m, "f", st.hir, st.program, timeout_ms=10_000)
    assert ok.status == "valid", (ok.status, ok.reason)
    assert "a masked ordered_tree sum (admitted set abstracted)" in ok.abstractions
    for wrong in (mod(x="-x"), mod(s="-s"), mod(policy="fold_left")):
        out = check_lowering(m, "f", st.hir, lowered(wrong, shapes, fuse=False),
                             timeout_ms=10_000)
        assert out.status == "failed to prove", (out.status, out.reason)


@pytest.mark.parametrize("cls", ["MaskedScan", "SegmentedScan"])
@pytest.mark.parametrize("seed", [0.5, None])
@pytest.mark.parametrize("inclusive", [True, False])
def test_a_flagged_ordered_tree_scan_lowers_to_the_masked_sum_of_each_prefix(cls, seed,
                                                                             inclusive):
    """D542 / D544: a MaskedScan / SegmentedScan add under ordered_tree, prefix i, is the
    masked tree sum of the lanes it keeps (its mask's lanes 0..i, or 0..i-1 exclusive; a
    segmented scan's lanes of i's segment, no head in (j, i]), the seed first where it takes
    part (always for a masked scan, in the segment before the first head for a segmented one),
    and the identity where it keeps nothing: the kernel IR's masked prefix sums (segment ids
    compared, a lane count selecting the identity) give the same terms, so `lower` is valid
    (and `elaborate`, the same op on both sides)."""
    from tilefoundry.semantics import ops
    from tilefoundry.validate.passes import Bounds, validate_program

    m = module_of(getattr(ops, cls)(axis=1, combine="add", policy="ordered_tree",
                                    inclusive=inclusive, seed=seed),
                  [DType.F32, DType.BOOL], [(2, 4), (2, 4)])
    rep = validate_program(m, "f", [(2, 4), (2, 4)], bounds=Bounds(timeout_ms=10_000))
    for name in ("elaborate", "lower"):
        out = next(p.outcome for p in rep.passes if p.name == name)
        assert out.status == "valid", rep.text()
        assert "a masked ordered_tree sum (admitted set abstracted)" in out.abstractions


@pytest.mark.parametrize("wrong", ["masked", "exclusive", "unseeded", "seed 1"])
def test_a_segmented_tree_scan_against_another_lowering_is_not_valid(wrong):
    """D544's matching is no blanket: the segmented scan's HIR against the lowering of another
    flagged scan (lanes chosen by the mask instead of the segment, the exclusive prefix, the
    seed dropped or another seed) is "invalid" where the replay confirms a difference, else
    "failed to prove" — never "valid"."""
    from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
    from tilefoundry.semantics.ops import MaskedScan, SegmentedScan
    from tilefoundry.validate.refine import check_lowering

    from .helpers import lowered

    shapes = [(2, 4), (2, 4)]
    dts = [DType.F32, DType.BOOL]
    kw = dict(axis=1, combine="add", policy="ordered_tree", inclusive=True, seed=0.5)
    m = module_of(SegmentedScan(**kw), dts, shapes)
    st = run_passes(State(m, "f", shapes, TARGETS["interp"]),
                    ["typeinfer", "elaborate", "canonicalize", "lower"])
    other = {"masked": (MaskedScan, {}), "exclusive": (SegmentedScan, {"inclusive": False}),
             "unseeded": (SegmentedScan, {"seed": None}),
             "seed 1": (SegmentedScan, {"seed": 1.0})}[wrong]
    bad = lowered(module_of(other[0](**{**kw, **other[1]}), dts, shapes), shapes, fuse=False)
    out = check_lowering(m, "f", st.hir, bad, timeout_ms=10_000)
    assert out.status in ("invalid", "failed to prove"), (out.status, out.reason)


def test_a_loop_unrolls_as_the_evaluator_runs_it_and_constant_indices_gather():
    """A GridRegionExpr carrying two values over x[i] (a Gather at the unrolled, constant i):
    the encoding agrees with the reference; the elaborate pass over it is proved valid."""
    from tilefoundry.semantics.dsl import DimVar, Tensor, bf16, func, maximum, module, tile, zeros
    from tilefoundry.validate.passes import validate_program

    K = DimVar("K", 1, 33)

    @func
    def running(x: Tensor[(K, 3), bf16]):
        total = zeros((3,), bf16)
        peak = x[0]
        for i in tile(K):
            total = total + x[i]
            peak = maximum(peak, x[i])
        return total, peak

    m = module(running)
    assert agreement_hir(m, "running", [values(DType.BF16, 12, 25).reshape(4, 3)]) == []
    assert validate_program(m, "running", [(4, 3)]).status("elaborate") == "valid"


@pytest.mark.parametrize("dt", [DType.F32, DType.FP8E4M3, DType.I32], ids=str)
def test_insert_slice_and_cache_update_are_index_maps_at_constant_positions(dt):
    """The other bit-copying ops (``COPIES_BITS``): InsertSlice and CacheUpdate at constant
    positions agree with the reference, NaN payloads included."""
    t = dt.value
    m = _movement_module(f'''
@func
def f(d: Tensor[(4, 4), {t}], u: Tensor[(2, 2), {t}], c: Tensor[(1, 5, 1, 2), {t}],
      n: Tensor[(1, 2, 1, 2), {t}]):
    return (insert_slice(d, u, 1, 2), cache_update(c, 2, 2, n))

module(f)
''')
    ins = [values(dt, 16, 31).reshape(4, 4), values(dt, 4, 32).reshape(2, 2),
           values(dt, 10, 33).reshape(1, 5, 1, 2), values(dt, 4, 34).reshape(1, 2, 1, 2)]
    assert agreement_hir(m, "f", ins) == []


def test_every_bit_copying_op_is_encoded():
    """One fact, one reader: every op class whose ``COPIES_BITS`` holds has an HIR encoding
    (an index map, Select's choice, Bitcast's bits, D522)."""
    from tilefoundry.semantics.ops import ALL_OPS
    from tilefoundry.validate.hir_smt import HIR_OPS, MOVEMENT

    copying = {c for c in ALL_OPS if getattr(c, "COPIES_BITS", False)}
    missing = {c.__name__ for c in copying if c not in MOVEMENT and c not in HIR_OPS}
    assert missing == set(), missing


_SCANS = [(c, d) for d in (DType.F32, DType.BF16, DType.I32, DType.I8)
          for c in ("add", "max", "min", "mul") if not (c == "mul" and d.is_float)]


@pytest.mark.parametrize("combine,dt", _SCANS, ids=str)
@pytest.mark.parametrize("inclusive,seed", [(True, None), (False, None), (True, 2),
                                            (False, -3)])
@pytest.mark.parametrize("policy", ["fold_left", "ordered_tree"])
def test_scan(combine, dt, inclusive, seed, policy):
    """Scan (reductions.scan; Tile design: "left prefix[i + 1] = op(left prefix[i], x[i])"):
    each prefix the reduction of its own leaves, seed first; exclusive[0] the seed or the
    identity; narrow floats widen to f32 and each output rounds once; integers wrap."""
    from tilefoundry.semantics.ops import Scan

    x = values(dt, 12, 31).reshape(3, 4)
    m = module_of(Scan(axis=1, combine=combine, inclusive=inclusive, seed=seed, policy=policy),
                  [dt], [(3, 4)])
    assert agreement_hir(m, "f", [x]) == []


def test_the_scan_agreement_would_catch_an_inclusive_exclusive_swap(monkeypatch):
    from dataclasses import replace

    from tilefoundry.semantics.ops import Scan
    from tilefoundry.validate import hir_smt

    real = hir_smt.HIR_OPS[Scan]
    monkeypatch.setitem(hir_smt.HIR_OPS, Scan, lambda op, args, ab: real(
        replace(op, inclusive=not op.inclusive), args, ab))
    m = module_of(Scan(axis=1, combine="add", inclusive=True, seed=None, policy="fold_left"),
                  [DType.I32], [(3, 4)])
    assert agreement_hir(m, "f", [values(DType.I32, 12, 31).reshape(3, 4)]) != []


@pytest.mark.parametrize("combine,dt", [c for c in _SCANS if c[1] is not DType.I8], ids=str)
@pytest.mark.parametrize("cls", ["MaskedScan", "SegmentedScan"])
@pytest.mark.parametrize("inclusive,seed", [(True, None), (False, None), (True, 2),
                                            (False, -3)])
def test_flagged_scan(combine, dt, cls, inclusive, seed):
    """MaskedScan / SegmentedScan (scan_flags.flagged_scan; D385 "a contribution whose mask is
    false is skipped", D386 the lifted (head, value) state): the reference's loop, an If per
    flag, on flags with an all-false fiber, an all-true fiber and a flag at position 0."""
    import tilefoundry.semantics.ops as ops

    policy = "fold_left" if combine == "add" and dt.is_float else "ordered_tree"
    op = getattr(ops, cls)(axis=1, combine=combine, inclusive=inclusive, seed=seed,
                           policy=policy)
    x = values(dt, 12, 41).reshape(3, 4)
    k = np.array([[0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 0, 1]], bool)
    m = module_of(op, [dt, DType.BOOL], [(3, 4), (3, 4)])
    assert agreement_hir(m, "f", [x, k]) == []


@pytest.mark.parametrize("name", ["welford", "sum_max", "difference", "sum_absmax"])
@pytest.mark.parametrize("policy", ["fold_left", "fold_right"])
@pytest.mark.parametrize("dt", [DType.F32, DType.BF16], ids=str)
def test_custom_reduce_under_a_fold(name, policy, dt):
    """CustomReduce (reducers.custom_reduce) under a fold: the seed, then each lifted
    contribution merged in, every declared expression one f32 operation (ifzero on either
    zero, max / min NaN-propagating with -0 < +0); built-in and program-declared reducers."""
    from tilefoundry.conformance.catalog.declared_reduce import SUM_ABSMAX
    from tilefoundry.semantics.ops import CustomReduce
    from tilefoundry.semantics.reducers import reducer

    r = SUM_ABSMAX if name == "sum_absmax" else name
    comps = len(reducer(r).state)
    x = values(dt, 12, 51).reshape(3, 4)
    s = values(DType.F32, 3 * comps, 52).reshape(3, comps)
    s[0] = 0.0  # an empty Welford state (count 0: the ifzero branches)
    m = module_of(CustomReduce((1,), r, policy, False), [dt, DType.F32], [(3, 4), (3, comps)])
    assert agreement_hir(m, "f", [x, s]) == []


@pytest.mark.parametrize("name", ["welford", "sum_max", "sum_absmax"])  # difference: folds only
@pytest.mark.parametrize("policy,n", [("ordered_tree", 4), ("unordered_tree", 3)])
def test_custom_reduce_under_a_tree_policy_is_a_choice_among_its_merge_trees(name, policy, n):
    """docs/contracts.md: a tree policy "admits the f32 state of every merge tree over
    [seed, lift(x0), …]" (D537): the encoding is one choice among them whose reference member
    (the pairwise tree of the contributions, then the seed merged in front) agrees with the
    evaluator bit for bit; 5 leaves in order (14 trees), 4 in any order (120 oriented trees)."""
    from tilefoundry.conformance.catalog.declared_reduce import SUM_ABSMAX
    from tilefoundry.semantics.ops import CustomReduce
    from tilefoundry.semantics.reducers import reducer

    r = SUM_ABSMAX if name == "sum_absmax" else name
    comps = len(reducer(r).state)
    x = values(DType.F32, 3 * n, 61).reshape(3, n)
    s = values(DType.F32, 3 * comps, 62).reshape(3, comps)
    s[0] = 0.0
    m = module_of(CustomReduce((1,), r, policy, False), [DType.F32, DType.F32],
                  [(3, n), (3, comps)])
    assert agreement_hir(m, "f", [x, s]) == []


def test_a_custom_tree_policy_over_too_many_trees_is_unsupported_by_name():
    """Five leaves in any order are 1,680 oriented trees, past the 256 that refinement
    enumerates per element: unsupported, with the count."""
    from tilefoundry.semantics.ops import CustomReduce
    from tilefoundry.validate.encode import Unsupported

    m = module_of(CustomReduce((1,), "sum_max", "unordered_tree", False),
                  [DType.F32, DType.F32], [(3, 4), (3, 2)])
    with pytest.raises(Unsupported, match=r"sum_max\) under unordered_tree over 5 leaves "
                                          r"\(more than 256 merge trees\)"):
        agreement_hir(m, "f", [values(DType.F32, 12, 1).reshape(3, 4),
                               np.zeros((3, 2), np.float32)])


def _elaborated(op, shapes):
    from tilefoundry.compiler.pipeline import TARGETS, State, run_passes

    m = module_of(op, [DType.F32, DType.F32], shapes)
    st = State(m, "f", shapes, TARGETS["interp"])
    run_passes(st, ["typeinfer", "elaborate", "canonicalize"])
    return m, st.hir


@pytest.mark.parametrize("target,status", [("fold_left", "valid"), ("fold_right", "invalid")])
def test_a_tree_custom_reduce_is_refined_by_its_members_only(target, status):
    """``ordered_tree`` sum_max over [seed, x0, x1, x2] (the seed the leftmost leaf): the left
    fold is one of its bracketings (the lowering's, D537) — valid; the right fold puts the seed
    last, no bracketing in order — invalid, with a counterexample the reference replays."""
    from tilefoundry.semantics.ops import CustomReduce
    from tilefoundry.validate.elaborate import check_hir_refinement

    shapes = [(2, 3), (2, 2)]
    m, src = _elaborated(CustomReduce((1,), "sum_max", "ordered_tree", False), shapes)
    _, tgt = _elaborated(CustomReduce((1,), "sum_max", target, False), shapes)
    out = check_hir_refinement(src, tgt, (m, "f"), target, timeout_ms=20_000)
    assert out.status == status, (out.status, out.reason)
    if status == "invalid":
        assert out.counterexample is not None and out.counterexample.differing


@pytest.mark.parametrize("policy", ["fold_left", "fold_right", "ordered_tree"])
def test_a_welford_lowering_is_valid_under_the_ci_timeout(policy):
    """The HIR spells Welford's ``ifzero`` as the lowering does (``x == +0``, true at ±0), so
    the lowered merges are the same terms: ``lower`` valid within the CI's 2 s an element (it
    was "failed to prove" when the HIR said ``fpIsZero``: Z3 had to bit-blast the divisions)."""
    from tilefoundry.semantics.ops import CustomReduce
    from tilefoundry.validate.passes import Bounds, validate_program

    m = module_of(CustomReduce((1,), "welford", policy, False), [DType.F32, DType.F32],
                  [(2, 3), (2, 3)])
    rep = validate_program(m, "f", [(2, 3), (2, 3)], bounds=Bounds(timeout_ms=2_000))
    assert rep.status("lower") == "valid", rep.text()
    assert rep.status("elaborate") == "valid", rep.text()


def test_the_custom_agreement_would_catch_a_wrong_merge(monkeypatch):
    from tilefoundry.semantics.ops import CustomReduce
    from tilefoundry.validate import hir_custom

    real = hir_custom._reducer_expr
    monkeypatch.setattr(hir_custom, "_reducer_expr", lambda e, env: real(
        ("min", *e[1:]) if isinstance(e, tuple) and e[0] == "max" else e, env))
    m = module_of(CustomReduce((1,), "sum_max", "fold_left", False), [DType.F32, DType.F32],
                  [(3, 4), (3, 2)])
    x = values(DType.F32, 12, 51).reshape(3, 4)
    assert agreement_hir(m, "f", [x, np.zeros((3, 2), np.float32)]) != []


@pytest.mark.parametrize("dt", [DType.F32, DType.BF16, DType.F16, DType.FP8E4M3], ids=str)
def test_nn_relu_is_the_unary_relu(dt):  # ReLU takes floats only (its type rule)
    """nn ReLU (evaluator/nn.py: "ReLU is Unary(relu) ... relu(-0) = -0, NaN stays NaN")."""
    from tilefoundry.semantics.ops import ReLU

    assert agreement_hir(module_of(ReLU(), [dt], [(N,)]), "f", [values(dt, N, 61)]) == []


def test_zero_dimensional_inputs_and_results_agree():
    """A 0-d seed and a 0-d result (numpy's ascontiguousarray makes a 0-d array 1-d: the
    harness keeps the shape, or every 0-d result would read as a shape mismatch)."""
    from tilefoundry.semantics.ops import SeededReduce

    for dt in (DType.F16, DType.I32):
        m = module_of(SeededReduce((-1,), "max", "unordered_tree", False), [dt, dt],
                      [(3,), ()])
        assert agreement_hir(m, "f", [values(dt, 3, 71), values(dt, 1, 72).reshape(())]) == []


def test_matmul_starts_its_k_fold_at_plus_zero():
    """D200: "MatMul is mma(a, b, zeros): the K fold starts from +0" — so products of -0 sum to
    +0 (a fold seeded by the first product gives -0; the encoding once did, and the validator
    then reported non-reproducing counterexamples on such programs)."""
    a = np.array([[-1.0, 2.0]], np.float32)
    b = np.array([[0.0], [-0.0]], np.float32)  # products -0 and -0
    m = module_of(MatMul(False), [DType.F32, DType.F32], [(1, 2), (2, 1)])
    assert agreement_hir(m, "f", [a, b]) == []
    m1 = module_of(MatMul(False), [DType.BF16, DType.BF16], [(1, 1), (1, 2)])
    x = np.array([[-1.0]], np.float32).astype(BF16)
    y = np.array([[0.0, 1.0]], np.float32).astype(BF16)
    assert agreement_hir(m1, "f", [x, y]) == []


@pytest.mark.parametrize("seed", [2.0, None])
def test_a_seeded_hillis_steele_tree_scan_of_five_lanes_lowers_valid(seed):
    """D547: a seeded ordered_tree float scan over 5 lanes has prefixes of up to 6 leaves (the
    seed first); the Hillis–Steele lowering builds one in-order bracketing of each. With
    choices over at most 5 lanes the 6-leaf prefix was the abstraction on the HIR side and a
    concrete bracketing on the kernel IR's — "failed to prove" (spec/tile/scan/inclusive-seed2);
    with the 42 bracketings of 6 leaves a choice, `lower` is proved."""
    from tilefoundry.semantics.ops import Scan
    from tilefoundry.validate.passes import Bounds, validate_program

    m = module_of(Scan(axis=1, combine="add", inclusive=True, seed=seed, policy="ordered_tree"),
                  [DType.F32], [(2, 5)])
    rep = validate_program(m, "f", [(2, 5)], bounds=Bounds(timeout_ms=10_000))
    assert rep.status("lower") == "valid", rep.text()
