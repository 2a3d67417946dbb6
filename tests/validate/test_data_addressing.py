"""Kernel-IR loads and stores at data-dependent offsets (``validate/symexec.py``: ``_gather``,
``_scatter``, D514): run on input variables with the inputs substituted afterwards, they agree
with kernel-interp — in-range, repeated and out-of-range indices (a load clips into the buffer,
a Gather's fill replaces an out-of-range read) — and an expansion past ``MAX_SCATTER`` is
"unsupported" with the reason. The HIR side (``validate/hir_dynamic.py``, D528): a Gather by
data indices and InsertSlice / CacheUpdate at data positions agree with the reference, lower
valid (an out-of-range position is the source's evaluation error, named), and a gather along
the wrong axis / offsets swapped are invalid with a counterexample the reference confirms."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.semantics.dtypes import DType
from tilefoundry.semantics.ops import Gather
from tilefoundry.semantics.ops.tile_sort import Sort
from tilefoundry.validate import symexec
from tilefoundry.validate.agree import agreement
from tilefoundry.validate.encode import Unsupported

from .helpers import lowered, module_of, values


@pytest.mark.parametrize("fill", [None, 2.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gather_by_data_indices_agrees_with_interp(fill, seed):
    m = module_of(Gather(0, 0, fill), [DType.BF16, DType.I32], [(5,), (7,)])
    p = lowered(m, [(5,), (7,)])
    rng = np.random.default_rng(seed)
    lo, hi = (-3, 9) if fill is not None else (0, 5)  # None: every index must be in range
    idx = rng.integers(lo, hi, 7).astype(np.int32)
    idx[:2] = idx[2]  # a repeated index
    assert agreement(p, [values(DType.BF16, 5, seed), idx], variables=True) == []


def test_an_expansion_past_the_limit_is_unsupported(monkeypatch):
    monkeypatch.setattr(symexec, "MAX_SCATTER", 4)
    p = lowered(module_of(Sort(), [DType.F32], [(2, 3)]), [(2, 3)])
    with pytest.raises(Unsupported, match=r"data-dependent addressing of .* lanes over"):
        agreement(p, [values(DType.F32, 6, 1).reshape(2, 3)], variables=True)


def test_the_offset_interval_of_a_rank():
    """A rank (a sum of ``If(c, 1, 0)``) plus a row base reaches only that row's positions."""
    import z3

    cs = [z3.Bool(f"c{i}") for i in range(4)]
    one, nil = z3.BitVecVal(1, 64), z3.BitVecVal(0, 64)
    rank = sum((z3.If(c, one, nil) for c in cs[1:]), z3.If(cs[0], one, nil))
    assert symexec._offset_range(z3.BitVecVal(8, 64) + rank, 100) == (8, 12)
    assert symexec._offset_range(rank * z3.BitVecVal(3, 64), 10) == (0, 9)  # clipped
    assert symexec._offset_range(z3.BitVec("free", 64), 10) == (0, 9)  # unbounded
    big = z3.BitVecVal(1 << 62, 64)
    assert symexec._offset_range(big + big + rank, 10) == (0, 9)  # could wrap: no bound


# ---------------------------------------------------------------------------------------------
# HIR Gather by data-dependent indices (validate/hir_dynamic.py, D528)
# ---------------------------------------------------------------------------------------------
def _gather_module(op, shapes, dts=(DType.F32, DType.I32)):
    return module_of(op, list(dts), shapes)


@pytest.mark.parametrize("op,shapes", [
    (Gather(0, 0, None), [(5,), (7,)]),
    (Gather(1, 0, None), [(2, 3), (2, 2)]),
    (Gather(1, 1, None), [(2, 3), (2, 4)]),   # batch_dims: row b reads its own indices
    (Gather(0, 0, -1.5), [(3, 2), (4,)]),
], ids=["axis0", "axis1", "batch", "fill"])
@pytest.mark.parametrize("seed", [0, 1])
def test_hir_gather_by_data_indices_agrees_with_the_reference(op, shapes, seed):
    """Tile design: "gather supplies a logical shift with defined boundary fill" (D388): with a
    fill an index outside [0, n) reads it; without one every index is in range."""
    from tilefoundry.validate.agree import agreement_hir

    xs, ish = shapes
    rng = np.random.default_rng(seed)
    n = xs[op.axis]
    lo, hi = (-3, n + 3) if op.fill is not None else (0, n)
    idx = rng.integers(lo, hi, ish).astype(np.int32)
    x = values(DType.F32, int(np.prod(xs)), seed).reshape(xs)
    m = _gather_module(op, [xs, ish])
    assert agreement_hir(m, "f", [x, idx], variables=True) == []


def _check(m, wrong, shapes, timeout_ms=20_000):
    from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
    from tilefoundry.validate.refine import check_lowering

    st = run_passes(State(m, "f", shapes, TARGETS["interp"]),
                    ["typeinfer", "elaborate", "canonicalize", "lower"])
    tgt = st.program if wrong is None else lowered(wrong, shapes, fuse=False)
    return check_lowering(m, "f", st.hir, tgt, timeout_ms=timeout_ms)


@pytest.mark.parametrize("fill", [None, 0.5])
def test_lower_of_a_gather_by_data_indices_is_valid(fill):
    from tilefoundry.validate.hir_dynamic import GATHER_OOB

    out = _check(_gather_module(Gather(1, 0, fill), [(2, 3), (2,)]), None, [(2, 3), (2,)])
    assert out.status == "valid", (out.status, out.reason)
    # without a fill an index out of range is the source's evaluation error: named
    assert (GATHER_OOB in out.abstractions) == (fill is None)


@pytest.mark.parametrize("wrong,why", [
    (Gather(0, 0, None), "the other axis of a square x"),
    (Gather(1, 0, 1.0), "a fill where the source's index must be in range: still the same "
                        "in range"),
], ids=["axis", "fill"])
def test_a_wrong_gather_lowering(wrong, why):
    """A gather along the wrong axis is invalid with a counterexample the reference confirms;
    a fill added where the source requires in-range indices refines it (valid)."""
    from tilefoundry.compiler.interp import run_program
    from tilefoundry.semantics.evaluator.core import evaluate

    shapes = [(2, 2), (2,)]
    m = _gather_module(Gather(1, 0, None), shapes)
    bad = _gather_module(wrong, shapes)
    out = _check(m, bad, shapes)
    if wrong.fill is not None:
        assert out.status == "valid", (why, out.status, out.reason)
        return
    assert out.status == "invalid", (why, out.status, out.reason)
    x, idx = (out.counterexample.inputs[n] for n in lowered(bad, shapes).inputs)
    ref = np.asarray(evaluate(m, "f", [x, idx]))
    got = run_program(lowered(bad, shapes), [x, idx])
    assert not np.array_equal(ref.view(np.uint32), np.asarray(got).view(np.uint32))


# rank-0 positions that are data: InsertSlice's offsets, CacheUpdate's cur_pos and s
def _insert_module(swap: bool = False):
    from tilefoundry.semantics.ir import Call, Function, Module, Var
    from tilefoundry.semantics.ops import InsertSlice
    from tilefoundry.semantics.types import TensorType

    d = Var("a0", TensorType((3, 3), DType.F32))
    u = Var("a1", TensorType((2, 2), DType.F32))
    o0, o1 = Var("a2", TensorType((), DType.I32)), Var("a3", TensorType((), DType.I32))
    offs = (o1, o0) if swap else (o0, o1)
    return Module((Function("f", (d, u, o0, o1), Call(InsertSlice(), (d, u, *offs)), None),))


def _cache_module():
    from tilefoundry.semantics.ops import CacheUpdate

    return module_of(CacheUpdate(), [DType.BF16, DType.I32, DType.I32, DType.BF16],
                     [(1, 4, 1, 2), (), (), (1, 2, 1, 2)])


@pytest.mark.parametrize("o0,o1", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_insert_slice_at_data_offsets_agrees_with_the_reference(o0, o1):
    from tilefoundry.validate.agree import agreement_hir

    x = values(DType.F32, 9, o0).reshape(3, 3)
    u = values(DType.F32, 4, 7 + o1).reshape(2, 2)
    args = [x, u, np.asarray(o0, np.int32), np.asarray(o1, np.int32)]
    assert agreement_hir(_insert_module(), "f", args, variables=True) == []


@pytest.mark.parametrize("cur,s", [(0, 1), (0, 2), (1, 2), (2, 2), (3, 1)])  # 1 <= s, cur + s <= len
def test_cache_update_at_data_positions_agrees_with_the_reference(cur, s):
    from tilefoundry.validate.agree import agreement_hir

    c = values(DType.BF16, 8, cur).reshape(1, 4, 1, 2)
    n = values(DType.BF16, 4, 9 + s).reshape(1, 2, 1, 2)
    args = [c, np.asarray(cur, np.int32), np.asarray(s, np.int32), n]
    assert agreement_hir(_cache_module(), "f", args, variables=True) == []


@pytest.mark.parametrize("module,shapes", [
    (_insert_module(), [(3, 3), (2, 2), (), ()]),
    (_cache_module(), [(1, 4, 1, 2), (), (), (1, 2, 1, 2)]),
], ids=["insert_slice", "cache_update"])
def test_lower_at_data_positions_is_valid(module, shapes):
    from tilefoundry.validate.hir_dynamic import GATHER_OOB

    out = _check(module, None, shapes)
    assert out.status == "valid", (out.status, out.reason)
    assert GATHER_OOB in out.abstractions


def test_insert_slice_with_its_offsets_swapped_is_invalid_and_replays():
    from tilefoundry.compiler.interp import run_program
    from tilefoundry.semantics.evaluator.core import evaluate

    shapes = [(3, 3), (2, 2), (), ()]
    out = _check(_insert_module(), _insert_module(swap=True), shapes)
    assert out.status == "invalid", (out.status, out.reason)
    bad = lowered(_insert_module(swap=True), shapes)
    args = [out.counterexample.inputs[n] for n in bad.inputs]
    ref = np.asarray(evaluate(_insert_module(), "f", args))
    got = np.asarray(run_program(bad, args))
    assert not np.array_equal(ref.view(np.uint32), got.view(np.uint32))
    assert int(args[2]) != int(args[3])  # only unequal offsets tell them apart


def test_too_many_position_combinations_are_unsupported_with_the_count(monkeypatch):
    from tilefoundry.validate import hir_dynamic
    from tilefoundry.validate.agree import agreement_hir

    monkeypatch.setattr(hir_dynamic, "MAX_COMBOS", 8)
    args = [values(DType.F32, 9, 0).reshape(3, 3), values(DType.F32, 4, 1).reshape(2, 2),
            np.asarray(0, np.int32), np.asarray(1, np.int32)]
    with pytest.raises(Unsupported, match=r"2 data-dependent positions .* \(16 combinations, "
                                          r"more than 8\)"):
        agreement_hir(_insert_module(), "f", args, variables=True)


# ---------------------------------------------------------------------------------------------
# run-time check kernels (D531): where the reference cannot raise, no check may fire
# ---------------------------------------------------------------------------------------------
def _fold_sub_lowered():
    from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
    from tilefoundry.conformance.catalog import build_catalog

    case = next(c for c in build_catalog(0).tier("quick")
                if c.id == "spec/reduce/fold-left-sub-123/f32")  # Gather(x, i) in a loop
    m, e, ins = case.build()
    st = run_passes(State(m, e, [x.shape for x in ins], TARGETS["interp"]),
                    ["typeinfer", "elaborate", "canonicalize", "lower"])
    return m, e, st


def _shrink_check_bound(obj, inside: bool = False):
    """``obj`` (a program, step, kernel or instruction) with the check kernels' extent
    constant 3 made 2: the range check then fires at index 2, which is in range."""
    import dataclasses

    from tilefoundry.compiler import kir

    if isinstance(obj, tuple):
        return tuple(_shrink_check_bound(o, inside) for o in obj)
    if isinstance(obj, kir.Const) and inside and obj.value == 3:
        return dataclasses.replace(obj, value=2)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        inside = inside or (isinstance(obj, kir.Kernel) and "check" in obj.name)
        kw = {f.name: _shrink_check_bound(getattr(obj, f.name), inside)
              for f in dataclasses.fields(obj)
              if isinstance(getattr(obj, f.name), tuple) or
              dataclasses.is_dataclass(getattr(obj, f.name))}
        return dataclasses.replace(obj, **kw)
    return obj


def test_check_flags_are_compared_where_the_reference_cannot_raise():
    from tilefoundry.validate.refine import check_lowering

    m, e, st = _fold_sub_lowered()
    probes = tuple(c.probe for c in st.checks.probed)
    assert probes, "the loop's Gather index is checked by a probe kernel"
    out = check_lowering(m, e, st.hir, st.program, probes=probes, timeout_ms=20_000)
    assert out.status == "valid", (out.status, out.reason)
    wrong = _shrink_check_bound(st.program)
    assert wrong != st.program
    out = check_lowering(m, e, st.hir, wrong, probes=probes, timeout_ms=20_000)
    assert out.status == "invalid", (out.status, out.reason)
    assert any("a run-time check fired" in d for d in out.counterexample.differing)


@pytest.mark.parametrize("cid", ["spec/run-time-check/cache_bounds/s-zero/f32",
                                 "spec/run-time-check/slice_window/window-past-end/f32",
                                 "spec/run-time-check/index_range/gather-index-at-extent/f32"])
def test_an_expected_error_cases_program_is_validated(cid):
    """D541: the case's own inputs raise (the run-time check is its point), but its program is
    a program like any other: each pass is checked on every input, the inputs the reference
    raises on not compared, and the outcome names that."""
    from tilefoundry.conformance.catalog import build_catalog
    from tilefoundry.validate.passes import Bounds, validate_case

    (case,) = [c for c in build_catalog(0).tier("quick") if c.id == cid]
    assert case.expect_error is not None
    rep = validate_case(case, Bounds(timeout_ms=10_000))
    for p in rep.passes[1:]:
        assert p.outcome.status == "valid", rep.text()
        assert any("expected-error case" in a for a in p.outcome.abstractions)
