"""The SIMD C backend (minimal, elementwise): every claimed op x dtype is bit-exact with the
reference evaluator (the oracle's PASS) and with the kernel-IR interpreter (identical bits), on
hypothesis-drawn bit patterns weighted toward the special values; what it cannot render is
NOT_SUPPORTED, never a fallback."""

from __future__ import annotations

import json

import numpy as np
import pytest
from compiler_helpers import SMALL, module_of, one_op, var
from hypothesis import given, settings
from hypothesis import strategies as st

from tilefoundry.compiler.errors import NotSupportedError
from tilefoundry.compiler.pipeline import compile
from tilefoundry.compiler.render_c import render
from tilefoundry.compiler.simd_backend import SIMD_DTYPES, SIMD_OPS, SimdBackend
from tilefoundry.oracle.compare import check
from tilefoundry.oracle.strategies import special_codes
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call
from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary, UnaryKind
from tilefoundry.semantics.ops.tensor import Cast

DTS = (DType.F32, DType.BF16, DType.F16)
SHAPE = (5, 9)  # ragged under SMALL tiles: several instances, masked edges
BINARY = ("add", "sub", "mul", "div", "min", "max")
UNARY = ("neg", "abs", "sqrt")
BACKEND = SimdBackend(cfg=SMALL)



def _arrays(dt: DType, n_arrays: int) -> st.SearchStrategy:
    npdt = np.dtype(dt.storage)
    width = npdt.itemsize * 8
    code = st.one_of(st.sampled_from(special_codes(dt)), st.integers(0, 2 ** width - 1))
    n = int(np.prod(SHAPE))
    one = st.lists(code, min_size=n, max_size=n).map(
        lambda c: np.array(c, f"u{npdt.itemsize}").view(npdt).reshape(SHAPE))
    return st.tuples(*[one] * n_arrays)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    u = np.dtype(f"u{a.dtype.itemsize}")
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(u), b.view(u))


def _judge(m, inputs) -> None:
    got = BACKEND.run(BACKEND.compile(m, "f"), [x.copy() for x in inputs])
    v = check(m, "f", [x.copy() for x in inputs], got)
    assert v.status == "PASS", v.summary()
    interp = compile(m, "f", [x.shape for x in inputs], cfg=SMALL)([x.copy() for x in inputs])
    assert _same_bits(got, interp)


def test_capabilities_are_the_tested_set() -> None:
    caps = BACKEND.capabilities()
    assert caps.ops == SIMD_OPS == {f"Binary.{k}" for k in BINARY} | \
        {f"Unary.{k}" for k in UNARY} | {"Cast"}
    assert caps.dtypes == SIMD_DTYPES == set(DTS)


@pytest.mark.parametrize("dt", DTS, ids=str)
@pytest.mark.parametrize("kind", BINARY)
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_binary_bitexact(kind: str, dt: DType, data) -> None:
    a, b = data.draw(_arrays(dt, 2))
    _judge(one_op(Binary(BinaryKind(kind)), a, b), [a, b])


@pytest.mark.parametrize("dt", DTS, ids=str)
@pytest.mark.parametrize("kind", UNARY)
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_unary_bitexact(kind: str, dt: DType, data) -> None:
    (a,) = data.draw(_arrays(dt, 1))
    _judge(one_op(Unary(UnaryKind(kind)), a), [a])


@pytest.mark.parametrize("overflow", ["nonfinite", "saturate"])
@pytest.mark.parametrize("dst", DTS, ids=str)
@pytest.mark.parametrize("src", DTS, ids=str)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_cast_bitexact(src: DType, dst: DType, overflow: str, data) -> None:
    (a,) = data.draw(_arrays(src, 1))
    _judge(one_op(Cast(dst, overflow), a), [a])


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_fused_chain_broadcast_bitexact(data) -> None:
    """sqrt(|min(a * b + a, b)|) - (-a) with b broadcast along rows, bf16: one fused kernel."""
    a, b2 = data.draw(_arrays(DType.BF16, 2))
    b = np.ascontiguousarray(b2[0])
    x, y = var("a", SHAPE, DType.BF16), var("b", SHAPE[1:], DType.BF16)
    c = lambda k, *xs: Call(Binary(BinaryKind(k)), xs)  # noqa: E731
    u = lambda k, x: Call(Unary(UnaryKind(k)), (x,))  # noqa: E731
    body = c("sub", u("sqrt", u("abs", c("min", c("add", c("mul", x, y), x), y))), u("neg", x))
    m = module_of([x, y], body)
    assert len(compile(m, "f", [SHAPE, SHAPE[1:]], "simd", cfg=SMALL).kernels) == 1
    _judge(m, [a, b])


def test_unsupported_raises_not_supported() -> None:
    a = np.ones(SHAPE, np.float32)
    m = one_op(Unary(UnaryKind.EXP), a)
    with pytest.raises(NotSupportedError, match="Math"):
        compile(m, "f", [SHAPE], "simd", cfg=SMALL)
    prog = compile(one_op(Binary(BinaryKind.LT), a, a), "f", [SHAPE, SHAPE]).program
    with pytest.raises(NotSupportedError):
        render(prog)


def test_conformance_quick(tmp_path) -> None:
    from tilefoundry.conformance.runner import run

    out = tmp_path / "r.jsonl"
    run("simd", "quick", out_jsonl=out, jobs=1, timeout_s=60)
    verdicts: dict[str, int] = {}
    for line in out.read_text().splitlines():
        rec = json.loads(line)
        if "verdict" in rec:
            verdicts[rec["verdict"]] = verdicts.get(rec["verdict"], 0) + 1
    bad = {k: n for k, n in verdicts.items() if k in ("FAIL", "CRASH", "ERROR")}
    assert not bad, (bad, verdicts)
    assert verdicts.get("PASS", 0) > 0 and verdicts.get("NOT_SUPPORTED", 0) > 0, verdicts
