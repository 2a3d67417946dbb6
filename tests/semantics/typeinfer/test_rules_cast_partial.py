"""Cast of a Partial value (docs/decisions.md D137, from the program generator's finding D146.6).

Every (source dtype, destination dtype, reduction) decision of ``cast_partial_reason`` is checked
against evaluation: where the rule lets the Partial through, the sharded program (cast each
device's piece, then complete) equals its erased twin (complete, then cast) on every pair of
candidate pieces; where it rejects, some candidate pair is a witness that they differ — so the
rule is sound on the candidates and never rejects without a reason."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.dtypes import cast, to_bits
from tilefoundry.semantics.evaluator.erasure import check_erasure
from tilefoundry.semantics.evaluator.mesh import Sharded, unshard
from tilefoundry.semantics.formats import FORMATS, DType, dtype_of
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Cast, Gather, MatMul
from tilefoundry.semantics.ops.sharding import Reshard
from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
from tilefoundry.semantics.typeinfer.tensor import cast_partial_reason
from tilefoundry.semantics.types import (
    Broadcast,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    TensorType,
    Topology,
    TopologyLevel,
)

DTS = [DType.F32, DType.BF16, DType.I8, DType.U8, DType.I32, DType.BOOL, DType.F8E8M0]
CANDIDATES = [-128.0, -100.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.5, 100.0, 127.0, 255.0,
              2.0 ** 31 - 128]
MESH = Mesh("device", ("x",), (2,))
TOPO = Topology((TopologyLevel("device", 2),))


def program(src: DType, dst: DType, red: str) -> Module:
    lay = ShardLayout(MESH, (Partial(red),), Layout((1,)))
    x = Var("x", TensorType((1,), src, lay))
    out = Call(Reshard(layout=ShardLayout(MESH, (Broadcast(),), Layout((1,)))),
               (Call(Cast(dst), (x,)),))
    return Module((Function("f", (x,), out, None),), topology=TOPO)


def pieces(src: DType, dst: DType) -> list[np.ndarray]:
    """The candidates representable in ``src`` (ints: the in-range integers), one per pattern;
    for a float -> int cast only sources inside the target's range (the contract leaves the
    others unspecified)."""
    vals = np.array(CANDIDATES, np.float32)
    if src.is_int:
        info = np.iinfo(FORMATS[src].storage)
        vals = vals[(vals == np.trunc(vals)) & (vals >= info.min) & (vals <= info.max)]
    xs = np.asarray(cast(vals, src))
    if src.is_float and dst.is_int:  # keep the sources whose conversion is specified
        w = np.asarray(cast(xs, DType.F32)).astype(np.float64)
        info = np.iinfo(FORMATS[dst].storage)
        xs = xs[np.isfinite(w) & (np.trunc(w) >= info.min) & (np.trunc(w) <= info.max)]
    _, first = np.unique(to_bits(xs), return_index=True)
    return [xs[i:i + 1] for i in sorted(first)]


def same(g: np.ndarray, e: np.ndarray, red: str, src: DType) -> bool:
    if not dtype_of(g).is_float:
        return bool(np.array_equal(g, e))
    if red == "sum" and src.is_float:
        # float -> float sums commute up to rounding (D72): equal after rounding both to the
        # narrower format, within one unit there (the two sides round at different places)
        narrow = src if FORMATS[src].mbits < FORMATS[dtype_of(g)].mbits else dtype_of(g)
        gn, en = np.asarray(cast(g, narrow)), np.asarray(cast(e, narrow))
        from tilefoundry.oracle.compare import ulp_distance

        return bool(np.all(ulp_distance(gn, en) <= 1))
    g32, e32 = np.asarray(cast(g, DType.F32)), np.asarray(cast(e, DType.F32))
    eq = to_bits(g) == to_bits(e)
    if red == "sum":
        eq |= (g32 == 0) & (e32 == 0)  # a sum decomposition fixes no zero sign (D135)
    return bool(np.all((np.isnan(g32) & np.isnan(e32)) | eq))


def direct(data: np.ndarray, lay: ShardLayout, dst: DType) -> tuple[np.ndarray, np.ndarray]:
    """What the evaluator does for Cast-then-Reshard (per-device cast, then completion) and for
    the erased twin (completion, then cast), with the same primitives, bypassing the rule."""
    sharded = unshard(Sharded.from_devices(lay, np.asarray(cast(data, dst))))
    erased = np.asarray(cast(unshard(Sharded.from_devices(lay, data)), dst))
    return sharded, erased


@pytest.mark.parametrize(("src", "dst", "red"), [
    (s, d, r) for s, d, r in itertools.product(DTS, DTS, ("sum", "max", "min")) if s is not d])
def test_cast_partial_rule_agrees_with_evaluation(src, dst, red):
    reason = cast_partial_reason(src, dst, red)
    lay = ShardLayout(MESH, (Partial(red),), Layout((1,)))
    x = Var("x", TensorType((1,), src, lay))
    if reason is not None:
        with pytest.raises(TypeInferError, match=r"does not commute with"):
            infer_expr(Call(Cast(dst), (x,)))
    else:
        infer_expr(Call(Cast(dst), (x,)))
    if red == "sum" and src in (DType.BOOL, DType.F8E8M0):
        assert reason is not None  # no sum to complete the pieces with: nothing to evaluate
        return
    module = program(src, dst, red)
    witnesses = 0
    for a, b in itertools.product(pieces(src, dst), repeat=2):
        data = np.concatenate([a, b]).reshape(2, 1)
        try:
            if reason is None:  # the real evaluator on the real program
                g, e = check_erasure(module, "f", [Sharded.from_devices(lay, data)])
            else:
                g, e = direct(data, lay, dst)
        except TilefoundryError:
            assert reason is not None
            witnesses += 1
            continue
        if not same(g, e, red, src):
            assert reason is not None, (f"allowed but differs for pieces {a}, {b}: sharded "
                                        f"{g}, erased {e}")
            witnesses += 1
    if reason is not None:
        assert witnesses > 0, f"rejected ({reason}) but no candidate pair differs"


def test_gather_of_bool_split_on_the_gathered_axis_is_rejected():
    lay = ShardLayout(MESH, (Split(0),), Layout((4,)))
    x = Var("x", TensorType((4,), DType.BOOL, lay))
    i = Var("i", TensorType((2,), DType.I64))
    with pytest.raises(TypeInferError, match=r"bool has no sum"):
        infer_expr(Call(Gather(axis=0), (x, i)))


def test_matmul_of_f8e8m0_is_rejected_with_the_cast_fix():
    a = Var("a", TensorType((2, 2), DType.F8E8M0))
    with pytest.raises(TypeInferError, match=r"f8e8m0 operands.*cast to f32"):
        infer_expr(Call(MatMul(), (a, a)))
