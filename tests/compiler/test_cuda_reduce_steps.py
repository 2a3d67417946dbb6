"""The CUDA spelling's max / min reduction steps (docs/decisions.md D525).

``tf__pick`` (``TF__PICKMAX`` / ``TF__PICKMIN`` of the CUDA prelude) is branch-free: fmax / fmin,
the tie of two zeros settled by the patterns' and / or, a NaN operand giving a NaN; an f32 max of
sign-clear values (an ``abs_max``, a ``max`` of ``abs``) folded from -inf is one int32 max of the
patterns (``tf__max_nonneg``); the row mapping folds any other f32 max / min from its identity
as ordered-integer keys (``tf__kstep_max`` / ``_min``, a NaN the extreme key). The contract they must keep (docs/contracts.md): max / min are
NaN-propagating and order -0 < +0 — "the max of -0 and +0 is +0, their min is -0" — and which
NaN a NaN result is is no contract. Judged here on the host emulation, through both the block
mapping (D276) and the row mapping (D482), on rows of zero ties, NaNs of both signs and
infinities; the expected zero signs are written from the contract, not read from a run.
"""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest
from compiler_helpers import RMSNORM_SRC, one_op

pytest.importorskip("cuda.bindings.nvrtc")

from tilefoundry.compiler import render_cuda
from tilefoundry.compiler.cuda_backend import CudaExecutable
from tilefoundry.compiler.pipeline import compile as tf_compile
from tilefoundry.oracle.compare import check
from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.ops import Reduce, ReduceKind

RMSNORM = parse_module(RMSNORM_SRC)


HOST_CXX = shutil.which("g++") is not None
KINDS = {"max": ReduceKind.MAX, "min": ReduceKind.MIN, "abs_max": ReduceKind.ABS_MAX}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFOUNDRY_CACHE", str(tmp_path / "cache"))


def _rows(cols: int) -> np.ndarray:
    """Rows whose max / min / abs_max each hinge on one rule: zero ties in both orders, all -0,
    -inf only, NaNs of both signs first / inside / last, inf beside a NaN, ordinary values."""
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((10, cols)) * 3).astype(np.float32)
    x[0, :] = -0.0
    x[0, cols // 2] = 0.0            # max +0, min -0, abs_max +0
    x[1, :] = 0.0
    x[1, cols - 1] = -0.0            # the same ties in the other order
    x[2, :] = -0.0                   # max / min -0, abs_max +0
    x[3, :] = -np.inf                # max / min -inf, abs_max +inf
    x[4, 0] = -np.nan                # a NaN of each sign at each place: NaN
    x[5, cols // 3] = np.nan
    x[6, cols - 1] = -np.nan
    x[7, :2] = [np.inf, np.nan]
    x[8, :3] = [-0.0, -np.inf, 0.0]
    return x


def _expected_zero(kind: str, row: int) -> float | None:
    """The result the contract fixes for the zero-tie rows (bits matter: -0 < +0)."""
    if row in (0, 1):
        return -0.0 if kind == "min" else 0.0
    if row == 2:
        return 0.0 if kind == "abs_max" else -0.0
    return None


def _host(m, entry, arrays):
    if not HOST_CXX:
        pytest.skip("no host C++ compiler for the emulation")
    comp = tf_compile(m, entry, [a.shape for a in arrays], "interp")
    src = render_cuda.render(comp.program)
    return src, CudaExecutable(comp.program, src, "host").run(arrays)


@pytest.mark.parametrize("rows_mapping", [True, False])
@pytest.mark.parametrize("policy", ["unordered_tree", "fold_left"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_max_min_steps_keep_the_zero_order_and_the_nans(kind, policy, rows_mapping,
                                                         monkeypatch) -> None:
    monkeypatch.setattr(render_cuda.KernelCuda, "ROWS_MAPPING", rows_mapping)
    x = _rows(4096 if rows_mapping else 700)
    m = one_op(Reduce((1,), False, KINDS[kind], policy), x)
    src, got = _host(m, "f", [x])
    step = ("tf__max_nonneg(" if kind == "abs_max" else
            f"tf__kstep_{kind}" if rows_mapping else f"TF__PICK{kind.upper()[:3]}")
    assert step in src, step
    assert check(m, "f", [x], got).status == "PASS", (kind, policy)
    got = np.asarray(got).reshape(-1)
    for r in range(len(x)):
        z = _expected_zero(kind, r)
        if z is not None:
            assert got[r] == 0 and np.signbit(got[r]) == np.signbit(z), (r, got[r])
    assert np.isnan(got[[4, 5, 6, 7]]).all()


def test_rmsnorm_max_of_abs_takes_the_integer_step() -> None:
    """RMSNorm's row scale is a max of |x| folded from -inf: the int32 step, and the kernel
    still passes the oracle on rows of NaN, inf and both zeros."""
    x = _rows(4096).astype(ml_dtypes.bfloat16)
    w = np.linspace(-2, 2, 4096).astype(ml_dtypes.bfloat16)
    m = RMSNORM
    src, got = _host(m, "rmsnorm", [x, w])
    assert "tf__max_nonneg(" in src
    assert check(m, "rmsnorm", [x, w], got).status == "PASS"


@pytest.mark.parametrize("old,new,kind,step", [
    # the int32 step taking the smaller: the abs_max rows
    ("return tf_f32_from_bits((uint32_t)(x > y ? x : y));\n}\n/* an f32 max / min as",
     "return tf_f32_from_bits((uint32_t)(x < y ? x : y));\n}\n/* an f32 max / min as",
     ReduceKind.ABS_MAX, "tf__max_nonneg("),
    # a NaN keyed as +inf (a lost NaN): the keyed max rows
    ("tf__key_max(float x) { return tf_f32_from_bits(isnan(x) ? 0x7FFFFFFFu",
     "tf__key_max(float x) { return tf_f32_from_bits(isnan(x) ? 0x7F800000u",
     ReduceKind.MAX, "tf__kstep_max"),
], ids=["integer-step", "nan-key"])
def test_a_wrong_step_is_caught(monkeypatch, old, new, kind, step) -> None:
    """The tests are sharp: a row step planted wrong in the prelude FAILs its rows."""
    planted = render_cuda.CUDA_PRELUDE.replace(old, new)
    assert planted != render_cuda.CUDA_PRELUDE
    monkeypatch.setattr(render_cuda, "CUDA_PRELUDE", planted)
    x = _rows(4096)
    m = one_op(Reduce((1,), False, kind, "unordered_tree"), x)
    src, got = _host(m, "f", [x])
    assert step in src
    assert check(m, "f", [x], got).status == "FAIL"
