"""The ordering ops' SMT semantics (``validate/hir_order.py``, D514 / D515) and the kernel IR's
data-dependent stores they lower to (``validate/symexec.py``):

* agreement with the reference evaluator (HIR side) and kernel-interp (kernel side, run on
  variables so that the symbolic scatter is what is checked) on special values (NaN, ±0, ±inf,
  subnormals), ties and seeded random bit patterns;
* the ``lower`` pass proved valid on the landed lowering;
* wrong lowerings — an unstable sort (ties reversed), zero signs ordered by their bits, NaNs
  placed first instead of last, Top-K ties reversed — are ``invalid`` with a counterexample
  that replays: the reference evaluator and the wrong program, run here on its inputs, differ.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import z3

from tilefoundry.compiler import kir
from tilefoundry.compiler.interp import run_program
from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
from tilefoundry.semantics.dtypes import DType, cast
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.ir import Call, Function, Module, Tuple, Var
from tilefoundry.semantics.ops.tensor import TopK
from tilefoundry.semantics.ops.tile_reduce import CustomReduce
from tilefoundry.semantics.ops.tile_sort import Sort
from tilefoundry.semantics.topk_reducer import TopKMerge, topk_identity_state
from tilefoundry.semantics.types import TensorType
from tilefoundry.validate.agree import agreement, agreement_hir
from tilefoundry.validate.planted import _map_kernels
from tilefoundry.validate.refine import check_lowering, flat_arrays

from .helpers import lowered, module_of, values

F32, BF16, F16, E4M3, I32, U8, I64, BOOL = (DType.F32, DType.BF16, DType.F16, DType.FP8E4M3,
                                           DType.I32, DType.U8, DType.I64, DType.BOOL)
E8M0 = DType.F8E8M0
ORDER_DTYPES = [F32, BF16, F16, E4M3, E8M0, I32, U8, BOOL]
#: ties of every kind: the two zero signs, equal numbers, NaNs, infinities
TIES = np.float32([0.0, -0.0, 1.5, np.nan, -0.0, 1.5, -np.inf, np.nan, 0.0, np.inf, 1.5, -2.0,
                   np.nan, -0.0, 3.0])


def _x(dt: DType, seed: int, shape: tuple = (3, 5)) -> np.ndarray:
    """Special values and random bit patterns (``values``), with the tie pool in row 0."""
    x = values(dt, int(np.prod(shape)), seed).reshape(shape)
    if dt is E8M0:  # no zeros or signs: ties of equal codes (NaN among the special values)
        x[0, :3] = x[1, 0]
    elif dt.is_float:
        x[0] = cast(TIES[:shape[1]], dt)
    elif dt is not BOOL:
        x[0] = np.array([0, 1, 1, 0, 1, 2, 1, 0, 0, 2, 1, 1, 0, 3, 3][:shape[1]], x.dtype)
    return x


def _replays(module: Module, bad: kir.Program, good: kir.Program, out) -> None:
    """The outcome is invalid and its counterexample really separates the wrong program from
    the reference, while the landed program matches the reference there."""
    assert out.status == "invalid", (out.status, out.reason)
    cex = out.counterexample
    assert cex is not None and cex.differing
    inputs = [cex.inputs[n] for n in bad.inputs]
    ref = flat_arrays(evaluate(module, "f", inputs))
    got = run_program(bad, inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    fine = run_program(good, inputs)
    fine = list(fine) if isinstance(fine, tuple) else [fine]

    def same(a: np.ndarray, b: np.ndarray) -> bool:
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind in "iub":
            return np.array_equal(a, b)
        with np.errstate(invalid="ignore"):
            wa, wb = a.astype(np.float64), b.astype(np.float64)
        return bool(np.all((a.view(f"u{a.itemsize}") == b.view(f"u{b.itemsize}")) |
                           (np.isnan(wa) & np.isnan(wb))))

    assert not all(same(r, g) for r, g in zip(ref, got, strict=True)), cex.text()
    assert all(same(r, g) for r, g in zip(ref, fine, strict=True)), cex.text()


def _rewrite_all(p: kir.Program, fn) -> kir.Program:
    """Every instruction of the first kernel ``fn`` rewrites (a list) replaced; the mutation
    must change something."""

    def on_kernel(k: kir.Kernel) -> kir.Kernel | None:
        types = kir.kernel_types(k, p.buffer_map())
        hits = [0]

        def walk(body: tuple) -> tuple:
            out: list = []
            for ins in body:
                if isinstance(ins, kir.TileLoop):
                    out.append(replace(ins, body=walk(ins.body)))
                    continue
                new = fn(ins, types)
                hits[0] += new is not None
                out.extend([ins] if new is None else new)
            return tuple(out)

        body = walk(k.body)
        return replace(k, body=body) if hits[0] else None

    bad = _map_kernels(p, on_kernel)
    assert bad is not None, "the mutation matched no instruction"
    return bad


def _stage(module: Module, shapes: list[tuple]) -> State:
    st = State(module, "f", shapes, TARGETS["interp"])
    run_passes(st, ["typeinfer", "elaborate", "canonicalize", "lower"])
    return st


# ---------------------------------------------------------------------------------------------
# Sort / TopK
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ORDER_DTYPES, ids=str)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("nan", ["last", "first"])
def test_sort_encoding_agrees_with_the_reference(dt, descending, nan):
    m = module_of(Sort(-1, descending, nan), [dt], [(3, 5)])
    for seed in (1, 2):
        assert agreement_hir(m, "f", [_x(dt, seed)]) == []


@pytest.mark.parametrize("dt", [F32, BF16, E4M3, I32, BOOL], ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_kernel_ir_agrees_with_interp_symbolically(dt, descending):
    """The lowered sort stores each element at its computed rank: a data-dependent store,
    executed by ``symexec._scatter`` on input variables, then the inputs substituted."""
    p = lowered(module_of(Sort(0, descending, "first"), [dt], [(5, 3)]), [(5, 3)])
    assert agreement(p, [_x(dt, 4, (3, 5)).T.copy()], variables=True) == []


@pytest.mark.parametrize("k", [0, 1, 3])
def test_topk_encoding_agrees_with_the_reference(k):
    x = Var("x", TensorType((3, 5), BF16))
    m = Module((Function("f", (x,), Call(TopK(k, 1, k != 1, True), (x,)), None),))
    assert agreement_hir(m, "f", [_x(BF16, 3)]) == []


@pytest.mark.parametrize("dt,shape,descending,nan", [
    (F32, (2, 4), False, "last"), (BF16, (3, 3), True, "first"), (F16, (1, 5), False, "first"),
    (E4M3, (2, 3), True, "last"), (I32, (2, 4), True, "last"), (BOOL, (2, 4), False, "last"),
    (F32, (4, 2), True, "last")], ids=str)
def test_lower_of_sort_is_valid(dt, shape, descending, nan):
    from tilefoundry.validate.passes import validate_program

    rep = validate_program(module_of(Sort(-1, descending, nan), [dt], [shape]), "f", [shape])
    for p in ("elaborate", "lower", "fuse"):
        assert rep.status(p) == "valid", rep.text()


def _sort_case(dt: DType = F32, descending: bool = False, nan: str = "last",
               shape: tuple = (1, 4)):
    m = module_of(Sort(-1, descending, nan), [dt], [shape])
    st = _stage(m, [shape])
    return m, st


def test_an_unstable_sort_is_invalid_and_replays():
    """Ties ordered by descending index (``j after i`` read as ``j before i``)."""
    m, st = _sort_case()

    def flip(ins, types):
        if isinstance(ins, kir.BinOp) and ins.kind == "lt" and types[ins.a].dtype == "i64" \
                and types[ins.b].dtype == "i64":
            return [replace(ins, kind="gt")]
        return None

    bad = _rewrite_all(st.program, flip)
    _replays(m, bad, st.program, check_lowering(m, "f", st.hir, bad, timeout_ms=20_000))


def test_zero_signs_ordered_by_bits_is_invalid_and_replays():
    """Values tie only when bit-equal: -0 and +0 no longer tie (the contract: they compare
    equal and keep their source order)."""
    m, st = _sort_case()

    def bits_eq(ins, types):
        if isinstance(ins, kir.BinOp) and ins.kind == "eq" and types[ins.a].dtype == "f32" \
                and ins.a != ins.b:
            return [kir.Bitcast(ins.out + "_ba", ins.a, "u32"),
                    kir.Bitcast(ins.out + "_bb", ins.b, "u32"),
                    replace(ins, a=ins.out + "_ba", b=ins.out + "_bb")]
        return None

    bad = _rewrite_all(st.program, bits_eq)
    out = check_lowering(m, "f", st.hir, bad, timeout_ms=20_000)
    _replays(m, bad, st.program, out)
    xs = next(iter(out.counterexample.inputs.values())).reshape(-1)
    assert (xs == 0).sum() >= 2  # the counterexample holds two zeros (of either sign)


def test_nans_placed_first_instead_of_last_is_invalid_and_replays():
    m, st = _sort_case(BF16, True, "last", (2, 3))

    # the placement ``and(not(second), first)`` (rank_select's only ``not``): swap its operands
    prog = st.program
    k = next(s for s in prog.steps if isinstance(s, kir.Kernel))
    instrs = list(kir.iter_instrs(k.body))
    nots = {i.out: i.x for i in instrs if isinstance(i, kir.UnOp) and i.kind == "not"}
    target = next(i for i in instrs if isinstance(i, kir.BinOp) and i.kind == "and" and
                  (i.a in nots or i.b in nots))
    neg, other = (target.a, target.b) if target.a in nots else (target.b, target.a)

    def swap(ins, types):
        if isinstance(ins, kir.UnOp) and ins.out == neg:
            return [replace(ins, x=other)]
        if ins is target or (isinstance(ins, kir.BinOp) and ins.out == target.out):
            return [replace(ins, a=neg, b=nots[neg])]
        return None

    bad = _rewrite_all(prog, swap)
    _replays(m, bad, prog, check_lowering(m, "f", st.hir, bad, timeout_ms=20_000))


# ---------------------------------------------------------------------------------------------
# CustomReduce(TopKMerge)
# ---------------------------------------------------------------------------------------------
def _topk_module(shape: tuple, dt: DType, r: TopKMerge, policy: str = "fold_left",
                 keepdim: bool = False):
    batch = (*shape[:-1], 1) if keepdim else shape[:-1]
    x = Var("x", TensorType(shape, dt))
    sv, si = Var("sv", TensorType((*batch, r.k), dt)), Var("si", TensorType((*batch, r.k), I64))
    body = Call(CustomReduce((len(shape) - 1,), r, policy, keepdim), (x, Tuple((sv, si))))
    return Module((Function("f", (x, sv, si), body, None),)), batch


def _seed(r: TopKMerge, batch: tuple, dt: DType, x: np.ndarray, rng) -> list[np.ndarray]:
    """An unsorted earlier state: valid slots holding values of x (ties with x, the zero signs,
    NaN), indices that tie with x's own or lie past it, and empty slots (index < 0) whose
    value bits must be ignored."""
    sv, si = (np.array(a) for a in topk_identity_state(r, batch, dt))
    flat = x.reshape(-1)
    for j in range(r.k):
        sv[..., j] = flat[rng.integers(0, flat.size)]
        si[..., j] = rng.choice([-1, -7, 0, 1, 2, 9])
    return [sv, si]


@pytest.mark.parametrize("dt", [F32, BF16, F16, E4M3, I32, U8, BOOL], ids=str)
@pytest.mark.parametrize("largest,nan", [(True, "last"), (False, "first"), (True, "first")])
def test_topk_merge_encoding_agrees_with_the_reference(dt, largest, nan):
    r = TopKMerge(3, largest, nan)
    rng = np.random.default_rng(5)
    for seed in (1, 2):
        x = _x(dt, seed, (2, 5))
        m, batch = _topk_module((2, 5), dt, r, "unordered_tree")
        assert agreement_hir(m, "f", [x, *_seed(r, batch, dt, x, rng)]) == []


@pytest.mark.parametrize("dt,k,largest,nan,policy,keepdim", [
    (F32, 2, True, "last", "fold_left", False), (BF16, 3, False, "first", "unordered_tree", True),
    (I32, 2, True, "last", "fold_right", False), (F16, 4, True, "first", "ordered_tree", False),
    (E4M3, 2, False, "last", "fold_left", False)], ids=str)
def test_lower_of_topk_merge_is_valid(dt, k, largest, nan, policy, keepdim):
    from tilefoundry.validate.passes import validate_program

    r = TopKMerge(k, largest, nan)
    m, batch = _topk_module((2, 4), dt, r, policy, keepdim)
    rep = validate_program(m, "f", [(2, 4), (*batch, k), (*batch, k)])
    for p in ("elaborate", "lower", "fuse"):
        assert rep.status(p) in ("valid",), rep.text()


def test_topk_merge_ties_reversed_is_invalid_and_replays():
    """The index tiebreak reversed (a later index wins a tie)."""
    r = TopKMerge(2, True, "last")
    m, _ = _topk_module((1, 4), F32, r)
    st = _stage(m, [(1, 4), (1, 2), (1, 2)])

    def later(ins, types):  # every ``ci < si`` (the index tiebreak): i64 operands
        if isinstance(ins, kir.BinOp) and ins.kind == "lt" and types[ins.a].dtype == "i64":
            return [replace(ins, kind="gt")]
        return None

    bad = _rewrite_all(st.program, later)
    _replays(m, bad, st.program, check_lowering(m, "f", st.hir, bad, timeout_ms=20_000))


def test_topk_merge_predicate_normal_form_is_the_lexicographic_order():
    """``hir_order._precedes`` (the normal form the encoding builds, D515) equals the
    contract's lexicographic order ``_lex`` on (NaN placement, value, index) on every pair of
    f32 / i32 candidates: one Z3 query per direction and placement."""
    from tilefoundry.validate import encode as E
    from tilefoundry.validate.hir_order import _lex, _precedes, _Slot, _value_cmp

    for dt, flt in (("f32", True), ("i32", False)):
        for largest in (False, True):
            for nan_first in (False, True):
                bits = [z3.BitVec(f"v{i}", 32) for i in range(2)]
                ix = [z3.BitVec(f"i{i}", 64) for i in range(2)]
                vals = [E.from_input_bits(b, dt) for b in bits]
                keys = vals if flt else [E.cast(v, dt, "i64", "nonfinite", "nearest")
                                         for v in vals]
                c, s = (_Slot(k, i, flt) for k, i in zip(keys, ix, strict=True))
                ok = z3.Bool("ok")
                nf = _precedes(c, ok, s, flt, largest, nan_first)
                lt, eq = _value_cmp("f32" if flt else "i64", largest)
                cn = c.nan if flt else z3.BoolVal(False)
                sn = s.nan if flt else z3.BoolVal(False)
                nan_key = (z3.And(cn, z3.Not(sn)) if nan_first else z3.And(z3.Not(cn), sn),
                           cn == sn)
                value_key = (lt(c.key, s.key), z3.Or(eq(c.key, s.key), z3.And(cn, sn)))
                lex = _lex([nan_key, value_key, (c.index < s.index, c.index == s.index)],
                           z3.BoolVal(False))
                spec = z3.And(ok, z3.Or(s.index < 0, lex))
                solver = z3.Solver()
                solver.add(nf != spec)
                assert solver.check() == z3.unsat, (dt, largest, nan_first)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([str(Path(__file__)), "-q"]))
