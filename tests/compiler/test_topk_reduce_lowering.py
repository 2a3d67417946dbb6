"""Lowering of Top-K as a reduce (``CustomReduce`` with ``TopKMerge``;
``compiler/lower_tile_topk.py``, D488): the design's region form — identity_K, the seed's slots
inserted, then one insertion per element along the axis — as one kernel with a tile loop, run
on the kernel-IR interpreter and the SIMD C renderer and compared bit for bit with the
reference (values and indices). Triton (its CPU interpreter) and CUDA (its host emulation) run
the catalog's topk-merge cases through ``tilefoundry conformance run``."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler import kir
from tilefoundry.compiler.pipeline import compile
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.errors import RunTimeCheckError
from tilefoundry.oracle.compare import PASS, check
from tilefoundry.semantics.dtypes import cast
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Tuple, Var
from tilefoundry.semantics.ops.math import Unary, UnaryKind
from tilefoundry.semantics.ops.tile_reduce import CustomReduce
from tilefoundry.semantics.topk_reducer import TopKMerge, topk_identity_state
from tilefoundry.semantics.types import TensorType

F32, BF16, F16, I32, U8, I64 = (DType.F32, DType.BF16, DType.F16, DType.I32, DType.U8,
                                DType.I64)
POOL = np.float32([-2.0, -0.0, 0.0, 1.0, 1.0, 3.0, np.inf, -np.inf, np.nan])


def _module(shape, dt, r: TopKMerge, axis: int, policy: str, keepdim: bool):
    a = axis % len(shape)
    batch = tuple(1 if (d == a and keepdim) else n for d, n in enumerate(shape)
                  if d != a or keepdim)
    x = Var("x", TensorType(shape, dt))
    sv, si = Var("sv", TensorType((*batch, r.k), dt)), Var("si", TensorType((*batch, r.k), I64))
    body = Call(CustomReduce((axis,), r, policy, keepdim), (x, Tuple((sv, si))))
    return Module((Function("f", (x, sv, si), body, None),)), batch


def _inputs(rng, shape, dt, r, batch, seeded: bool):
    x = cast(rng.choice(POOL, shape), dt) if dt.is_float else \
        rng.integers(0 if dt is U8 else -4, 5, shape).astype(np.uint8 if dt is U8 else np.int32)
    sv, si = (np.array(a) for a in topk_identity_state(r, batch, dt))
    if seeded:  # an unsorted earlier state: two valid slots past the axis, the rest empty
        flat = x.reshape(-1) if x.size else np.zeros(1, x.dtype)
        sv[..., 0], si[..., 0] = flat[0], 1000
        if r.k > 1:
            sv[..., r.k - 1], si[..., r.k - 1] = flat[-1], 999
        if dt.is_float and r.k > 2:
            sv[..., 1] = cast(np.float32([np.nan]), dt)[0]  # an empty slot's bits are ignored
    return [x, sv, si]


CASES = [((4, 13), F32, TopKMerge(3), 1, "fold_left", False),
         ((4, 13), F32, TopKMerge(4, False, "first"), 1, "unordered_tree", False),
         ((7, 5), BF16, TopKMerge(2, False), 0, "fold_right", False),
         ((2, 3, 6), F16, TopKMerge(3, True, "first"), 1, "ordered_tree", True),
         ((3, 9), I32, TopKMerge(4), -1, "unordered_tree", False),
         ((3, 9), U8, TopKMerge(2, False), 1, "fold_left", False),
         ((3, 4), F32, TopKMerge(6), 1, "fold_left", False),  # K past the extent
         ((3, 1), F32, TopKMerge(2), 1, "fold_left", False),
         ((3, 0), F32, TopKMerge(2), 1, "fold_left", False)]


@pytest.mark.parametrize("target", ["interp", "simd"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_compiled_region_is_bit_exact(target, case):
    """Values (bits) and indices equal the reference's; the oracle judges PASS (exact)."""
    shape, dt, r, axis, policy, keepdim = CASES[case]
    m, batch = _module(shape, dt, r, axis, policy, keepdim)
    rng = np.random.default_rng(case)
    for seeded in (False, True):
        ins = _inputs(rng, shape, dt, r, batch, seeded)
        ref = evaluate(m, "f", ins)
        out = compile(m, "f", [a.shape for a in ins], target,
                      cfg=TileConfig(max_row=4))(ins)
        for o, w in zip(out, ref, strict=True):
            same = np.asarray(o).dtype == w.dtype and np.asarray(o).tobytes() == w.tobytes()
            assert same or (dt.is_float and np.array_equal(o, w, equal_nan=True)), (case, seeded)
        assert check(m, "f", ins, out).status == PASS


def test_the_lowering_is_one_fold_kernel():
    """The region form, not a rank-selection: one kernel, a tile loop along the axis carrying
    2K values (the K slots' values and indices), no scatter by rank."""
    r = TopKMerge(3)
    m, _ = _module((4, 16), F32, r, 1, "unordered_tree", False)
    prog = compile(m, "f", [(4, 16), (4, 3), (4, 3)], "interp").program
    ks = [k for k in prog.kernels() if "topk" in k.name]
    assert len(ks) == 1
    loops = [i for i in kir.iter_instrs(ks[0].body) if isinstance(i, kir.TileLoop)]
    assert len(loops) == 1 and len(loops[0].carried) == 2 * r.k
    assert not [i for i in kir.iter_instrs(ks[0].body) if isinstance(i, kir.Store) and i.index]


@pytest.mark.parametrize("target", ["interp", "simd"])
def test_nan_error_is_the_run_time_check_topk_nan(target):
    """nan='error': a NaN in x or in the seed's values is RunTimeCheckError('topk_nan') with
    the reference's message; without one the result is the nan='last' one, bit for bit. Also
    for a computed x (a probe kernel, not a host check)."""
    r = TopKMerge(2, True, "error")
    m, _ = _module((2, 4), F32, r, 1, "fold_left", False)
    c = compile(m, "f", [(2, 4), (2, 2), (2, 2)], target)
    x = np.float32([[1.0, 2.0, -0.0, 0.0], [3.0, 3.0, 1.0, 0.5]])
    sv, si = (np.array(a) for a in topk_identity_state(r, (2,), F32))
    out = c([x, sv, si])
    ref = evaluate(m, "f", [x, sv, si])
    assert all(np.asarray(o).tobytes() == w.tobytes() for o, w in zip(out, ref, strict=True))
    bad_x = x.copy()
    bad_x[1, 2] = np.nan
    with pytest.raises(RunTimeCheckError, match=r"CustomReduce: x holds 1 NaN value\(s\) "
                       r"\(first at \[1, 2\]\)") as e:
        c([bad_x, sv, si])
    assert e.value.check == "topk_nan"
    sv[0, 1] = np.nan
    with pytest.raises(RunTimeCheckError, match="seed values holds 1 NaN") as e:
        c([x, sv, si])
    assert e.value.check == "topk_nan"
    xv = Var("x", TensorType((2, 4), F32))
    s0 = Var("sv", TensorType((2, 2), F32))
    s1 = Var("si", TensorType((2, 2), I64))
    body = Call(CustomReduce((1,), r, "fold_left", False),
                (Call(Unary(UnaryKind.LOG), (xv,)), Tuple((s0, s1))))
    m2 = Module((Function("f", (xv, s0, s1), body, None),))
    c2 = compile(m2, "f", [(2, 4), (2, 2), (2, 2)], target)
    with pytest.raises(RunTimeCheckError, match="x holds 1 NaN") as e:  # log(-0.5)
        c2([np.float32([[1.0, 2.0, 3.0, 4.0], [1.0, -0.5, 2.0, 3.0]]),
            *topk_identity_state(r, (2,), F32)])
    assert e.value.check == "topk_nan"
