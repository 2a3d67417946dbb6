"""Shared helpers of the compiler tests: one-op modules, running the kernel-IR interpreter next
to the reference evaluator, and the two judgements (bit-exact, within the contract)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tilefoundry.compiler.pipeline import Compiled, compile
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.oracle.compare import check, compare_exact
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.types import TensorType

#: small tiles so that ragged edges, several program instances and tile loops all happen
SMALL = TileConfig(tile_elems=16, max_row=8, k_block=4)

#: the matmul programs of the tensor-core tests (``SRC.format(dt=...)``, ``parse_module``): a
#: plain matmul, both operands transposed, and a batched one
MATMUL_SRC = """
M = DimVar("M", 1, 1 << 16)
K = DimVar("K", 1, 1 << 16)
N = DimVar("N", 1, 1 << 16)
B = DimVar("B", 1, 64)

@func
def mm(a: Tensor[(M, K), {dt}], b: Tensor[(K, N), {dt}]) -> Tensor[(M, N), {dt}]:
    return matmul(a, b, allow_reassociation=True)

@func
def mm_tn(a: Tensor[(K, M), {dt}], b: Tensor[(N, K), {dt}]) -> Tensor[(M, N), {dt}]:
    return matmul(transpose(a, (1, 0)), transpose(b, (1, 0)), allow_reassociation=True)

@func
def bmm(a: Tensor[(B, M, K), {dt}], b: Tensor[(B, K, N), {dt}]) -> Tensor[(B, M, N), {dt}]:
    return matmul(a, b, allow_reassociation=True)
"""

#: the bf16 RMSNorm over rows of the row-mapping tests (``rms_norm(x, w, eps=1e-6)``)
RMSNORM_SRC = """
R = DimVar("R", 1, 1 << 16)
C = DimVar("C", 1, 1 << 16)

@func
def rmsnorm(x: Tensor[(R, C), bf16], w: Tensor[(C,), bf16]) -> Tensor[(R, C), bf16]:
    return rms_norm(x, w, eps=1e-6)
"""


def var(name: str, shape: tuple, dtype: DType) -> Var:
    return Var(name, TensorType(tuple(shape), dtype))


def module_of(params: Sequence[Var], body: Any, name: str = "f") -> Module:
    return Module((Function(name, tuple(params), body, None),))


def one_op(op: Any, *arrays: np.ndarray, dtypes: Sequence[DType] | None = None) -> Module:
    from tilefoundry.semantics.formats import dtype_of

    ps = [var(f"x{i}", a.shape, dtypes[i] if dtypes else dtype_of(a))
          for i, a in enumerate(arrays)]
    return module_of(ps, Call(op, tuple(ps)))


#: the pipeline targets the op-by-op suites run against: the kernel-IR interpreter and the SIMD C
#: backend (same kernel IR, rendered to C)
TARGETS = ("interp", "simd")


def run(m: Module, inputs: Sequence[np.ndarray], *, cfg: TileConfig | None = None,
        fuse: bool = True, entry: str = "f", target: str = "interp") -> tuple[Any, Compiled]:
    import tilefoundry.compiler.simd_backend  # noqa: F401  (registers the simd target)

    c = compile(m, entry, [np.shape(x) for x in inputs], target, cfg=cfg, fuse=fuse)
    return c([np.array(x, copy=True) for x in inputs]), c


def outputs(v: Any) -> list:
    return list(v) if isinstance(v, tuple) else [v]


def simd_inexact(m: Module) -> str | None:
    """Why the SIMD C backend is judged by the contract rather than bit for bit on ``m``: math
    functions come from libm (within their ULP budgets, not correctly rounded), and float tree
    sums use other members of the admitted set (multi-accumulator trees, folds). None when the
    C code promises the interpreter's bits."""
    from tilefoundry.semantics.ir import Call, GridRegionExpr, operands, reachable
    from tilefoundry.semantics.ops import (
        Gelu,
        LayerNorm,
        Reduce,
        Sigmoid,
        Silu,
        SoftMax,
        Tanh,
        Unary,
        UnaryKind,
    )
    from tilefoundry.semantics.ops.nn import RoPE
    from tilefoundry.semantics.typeinfer import infer_module

    libm = {UnaryKind.EXP, UnaryKind.LOG, UnaryKind.EXP2, UnaryKind.LOG2, UnaryKind.RSQRT}
    inferred = infer_module(m)
    found: list[str] = []

    def children(e: Any) -> list:  # loop bodies and yields too
        extra = [e.body, *e.yield_values] if isinstance(e, GridRegionExpr) else []
        return operands(e) + extra

    for fn in inferred.functions:
        for node in reachable(fn.body, children):
            if not isinstance(node, Call):
                continue
            op = node.op
            if isinstance(op, Sigmoid | Tanh | Silu | Gelu | SoftMax | LayerNorm | RoPE) or \
                    (isinstance(op, Unary) and op.kind in libm):
                found.append(type(op).__name__)
            if isinstance(op, Reduce) and op.policy.endswith("tree") and \
                    op.kind.value in ("sum", "mean") and node.args[0].type.dtype.is_float:
                found.append(f"Reduce {op.kind.value} {op.policy}")
    return ", ".join(sorted(set(found))) or None


def assert_bitexact(m: Module, inputs: Sequence[np.ndarray], **kw: Any) -> Compiled:
    """The target reproduces the reference bit for bit (NaN payloads aside); the SIMD C target
    on a program with libm math or float tree sums is judged by the contract instead
    (``simd_inexact``)."""
    if kw.get("target") == "simd" and simd_inexact(m):
        return assert_conforms(m, inputs, **kw)
    got, c = run(m, inputs, **kw)
    ref = evaluate(m, "f", [np.array(x, copy=True) for x in inputs])
    for i, (r, o) in enumerate(zip(outputs(ref), outputs(got), strict=True)):
        assert o.dtype == r.dtype and o.shape == r.shape, (i, o.dtype, o.shape, r.shape)
        ok = compare_exact(r, o)
        assert ok.all(), (f"output {i}: {int((~ok).sum())} element(s) differ; first at "
                          f"{tuple(np.argwhere(~ok)[0])}: ref {r[~ok][:4]!r} got {o[~ok][:4]!r}")
    return c


def assert_conforms(m: Module, inputs: Sequence[np.ndarray], **kw: Any) -> Compiled:
    """The target's outputs pass the oracle under the ops' contracts."""
    got, c = run(m, inputs, **kw)
    v = check(m, "f", [np.array(x, copy=True) for x in inputs], got)
    assert v.status == "PASS", v.summary()
    return c
