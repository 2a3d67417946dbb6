"""Scan's work-efficient lowering (``compiler/lower_tile_scan.py``, D402): Hillis-Steele steps,
O(n log n) lane work where the contract admits a regrouping of each prefix, the per-prefix
reduction (O(n^2)) or, past ``SEQUENTIAL_FROM``, a sequential host loop (O(n), D512) for
float ``add`` under ``fold_left``.

Lane work is counted on the kernel IR (instances x tile lanes x instructions: every kernel's
domain size times its instruction count), not timed. The regrouped results are judged by the
oracle (a float add under ``ordered_tree``: each prefix an in-order bracketing of its own
leaves), differ from the left fold on inputs where the bracketing matters (so the tree is
really used), and run in Triton's interpreter too.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest

from tilefoundry.compiler import kir, lower_tile_scan
from tilefoundry.compiler.pipeline import compile
from tilefoundry.oracle.compare import PASS, check
from tilefoundry.semantics.dtypes import cast, to_bits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Scan
from tilefoundry.semantics.reductions import scan
from tilefoundry.semantics.types import TensorType

F32, BF16, I32, I8 = DType.F32, DType.BF16, DType.I32, DType.I8


def _module(shape, dt, op) -> Module:
    x = Var("x", TensorType(shape, dt))
    return Module((Function("f", (x,), Call(op, (x,)), None),))


def _lane_ops(program: kir.Program) -> int:
    return sum(math.prod(k.domain) * sum(1 for _ in kir.iter_instrs(k.body))
               for k in program.kernels())


@pytest.mark.parametrize("dt,op", [
    (F32, Scan(0, "add")),
    (BF16, Scan(0, "add", inclusive=False, seed=1.0)),
    (F32, Scan(0, "max")),
    (I32, Scan(0, "mul", seed=3)),
    (I8, Scan(0, "add", inclusive=False)),
], ids=["f32-add", "bf16-add-excl-seed", "f32-max", "i32-mul-seed", "i8-add-excl"])
def test_regroupable_scans_take_n_log_n_lane_work(dt, op) -> None:
    n = 1024
    m = _module((n,), dt, op)
    prog = compile(m, "f", [(n,)], "interp", fuse=False).program
    assert not any(isinstance(i, kir.Reduce) for k in prog.kernels()
                   for i in kir.iter_instrs(k.body))
    assert len(prog.kernels()) == 2 + int(math.log2(n))  # leaves, log2 n steps, result
    work = _lane_ops(prog)
    assert work <= 16 * n * math.log2(n), work  # at most 16 instructions per lane and step


def test_fold_left_float_add_is_sequential_past_the_threshold() -> None:
    """The left fold is the contract there (exact), so no regrouping: past
    ``SEQUENTIAL_FROM`` it is a host loop of n steps carrying the f32 fold (O(n) work, D512);
    up to it the per-prefix reduction (O(n^2) work in one kernel). At n = 1024 the sequential
    form is a few instructions per element, against n^2 for the per-prefix one."""
    n = 1024
    m = _module((3, n), F32, Scan(1, "add", policy="fold_left"))
    left = compile(m, "f", [(3, n)], "interp", fuse=False).program
    loops = [s for s in left.steps if isinstance(s, kir.HostLoop)]
    assert len(loops) == 1 and (loops[0].start, loops[0].stop, loops[0].step) == (0, n, 1)
    assert not any(isinstance(i, kir.Reduce) for k in left.kernels()
                   for i in kir.iter_instrs(k.body))
    per_step = sum(math.prod(k.domain) * sum(1 for _ in kir.iter_instrs(k.body))
                   for s in loops for k in s.body)
    assert per_step * n <= 16 * 3 * n, per_step  # O(n): at most 16 instructions per element
    short = lower_tile_scan.SEQUENTIAL_FROM
    small = compile(_module((3, short), F32, Scan(1, "add", policy="fold_left")), "f",
                    [(3, short)], "interp", fuse=False).program
    assert not any(isinstance(s, kir.HostLoop) for s in small.steps)
    assert any(isinstance(i, kir.Reduce) for k in small.kernels() for i in kir.iter_instrs(k.body))


@pytest.mark.parametrize("target", ["interp", "simd", "cuda-host"])
@pytest.mark.parametrize("dt", [F32, BF16])
@pytest.mark.parametrize("op", [Scan(1, "add", policy="fold_left"),
                                Scan(1, "add", policy="fold_left", inclusive=False),
                                Scan(1, "add", policy="fold_left", inclusive=False, seed=0.5),
                                Scan(0, "add", policy="fold_left", seed=-0.0)],
                         ids=["incl", "excl", "excl-seed", "axis0-seed"])
def test_sequential_fold_left_scan_is_bit_exact(target, dt, op) -> None:
    """Special values in the rows (NaN, ±inf, -0 first: -0 + x0 is x0) and large cancelling
    values, where any regrouping would show."""
    if target == "cuda-host":
        import tilefoundry.compiler.cuda_backend  # noqa: F401  (registers the target)
    shape = (5, 300) if op.axis == 1 else (300, 5)
    x = _cancelling(shape)
    row = x[0] if op.axis == 1 else x[:, 0]
    row[:5] = [-0.0, np.nan, 1.0, np.inf, -np.inf]
    (x[1] if op.axis == 1 else x[:, 1])[0] = -0.0
    if dt is BF16:
        x = cast(x, BF16)
    m = _module(x.shape, dt, op)
    c = compile(m, "f", [x.shape], target)
    assert any(isinstance(s, kir.HostLoop) for s in c.program.steps)
    out, ref = np.asarray(c([x])), np.asarray(evaluate(m, "f", [x]))
    nan = np.isnan(out.astype(np.float32)) & np.isnan(ref.astype(np.float32))
    assert (np.equal(to_bits(out), to_bits(ref)) | nan).all(), (dt, op)


def _cancelling(shape) -> np.ndarray:
    """Large values that cancel: a left fold and a log-depth tree round differently."""
    rng = np.random.default_rng(37)
    x = rng.standard_normal(shape).astype(np.float32)
    x[..., ::3] *= np.float32(1e7)
    return x


@pytest.mark.parametrize("target", ["interp", "simd"])
@pytest.mark.parametrize("op", [Scan(1, "add"), Scan(1, "add", inclusive=False, seed=0.5),
                                Scan(0, "add", seed=-0.0)], ids=["incl", "excl-seed", "axis0"])
def test_ordered_tree_scan_is_admitted_and_is_a_tree(target, op) -> None:
    x = _cancelling((5, 77))
    m = _module(x.shape, F32, op)
    out = np.asarray(compile(m, "f", [x.shape], target)([x]))
    v = check(m, "f", [x], out)
    assert v.status == PASS, v.message[:2000]
    left = scan(x, "add", op.axis, inclusive=op.inclusive, seed=op.seed, policy="fold_left")
    assert not np.array_equal(to_bits(out), to_bits(np.asarray(left)))  # not the left fold


@pytest.mark.parametrize("target", ["interp", "simd"])
def test_integer_and_extreme_scans_are_bit_exact(target) -> None:
    rng = np.random.default_rng(3)
    cases = [(I32, Scan(1, "mul", seed=3), rng.integers(-9, 10, (3, 100)).astype(np.int32)),
             (I8, Scan(1, "add", inclusive=False, seed=100),
              rng.integers(-128, 128, (3, 100)).astype(np.int8)),
             (BF16, Scan(1, "max", inclusive=False),
              cast(rng.standard_normal((3, 100)).astype(np.float32), BF16)),
             (F32, Scan(0, "min", seed=-0.0), rng.standard_normal((100, 3)).astype(np.float32))]
    for dt, op, x in cases:
        m = _module(x.shape, dt, op)
        out = np.asarray(compile(m, "f", [x.shape], target)([x]))
        ref = np.asarray(evaluate(m, "f", [x]))
        assert np.array_equal(to_bits(out), to_bits(ref)), (dt, op)


def test_the_per_prefix_lowering_is_still_reachable_and_admitted(monkeypatch) -> None:
    """Forcing the old lowering (the 'before' of the lane counts) still gives admitted
    results: both lowerings stay correct."""
    monkeypatch.setattr(lower_tile_scan, "_work_efficient", lambda op, dt: False)
    x = _cancelling((4, 40))
    m = _module(x.shape, F32, Scan(1, "add"))
    out = compile(m, "f", [x.shape], "interp")([x])
    assert check(m, "f", [x], out).status == PASS


def test_scans_run_in_the_triton_interpreter() -> None:
    if "triton" not in sys.modules:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    pytest.importorskip("triton")
    from tilefoundry.compiler.triton_backend import TRITON_TILES, TritonBackend

    TritonBackend(device="interpret")
    rng = np.random.default_rng(8)
    cases = [(I32, Scan(1, "mul", seed=3), rng.integers(-9, 10, (2, 37)).astype(np.int32)),
             (F32, Scan(1, "add", inclusive=False, seed=0.5), _cancelling((2, 37))),
             (F32, Scan(1, "add", policy="fold_left", inclusive=False, seed=0.5),
              _cancelling((2, 80)))]  # the sequential host loop (D512)
    for dt, op, x in cases:
        m = _module(x.shape, dt, op)
        out = compile(m, "f", [x.shape], "triton", cfg=TRITON_TILES)([x])
        v = check(m, "f", [x], out)
        assert v.status == PASS, (dt, v.message[:2000])
