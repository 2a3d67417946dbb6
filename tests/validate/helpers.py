"""One-op HIR programs and their inputs for the validator's tests."""

from __future__ import annotations

import numpy as np

from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
from tilefoundry.conformance.catalog import int_special_values, special_values
from tilefoundry.semantics.dtypes import DType, from_bits
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.types import TensorType


def module_of(op, dts: list[DType], shapes: list[tuple]) -> Module:
    params = tuple(Var(f"a{i}", TensorType(tuple(s), dt)) for i, (dt, s) in
                   enumerate(zip(dts, shapes, strict=True)))
    return Module((Function("f", params, Call(op, params), None),))


def lowered(module: Module, shapes: list[tuple], fuse: bool = True):
    st = State(module, "f", [tuple(s) for s in shapes], TARGETS["interp"])
    run_passes(st, ["typeinfer", "elaborate", "canonicalize", "lower"] + (["fuse"] if fuse
                                                                            else []))
    return st.program


def values(dt: DType, n: int, seed: int) -> np.ndarray:
    """``n`` values of ``dt``: its special values (NaN, ±0, ±inf, subnormals, extremes) first,
    then random bit patterns (seeded)."""
    rng = np.random.default_rng(seed)
    sp = np.array([False, True]) if dt is DType.BOOL else \
        int_special_values(dt) if dt.is_int else special_values(dt)
    sp = np.asarray(sp).reshape(-1)
    width = np.dtype(dt.storage).itemsize
    raw = rng.integers(0, 1 << (8 * width), n, dtype=np.uint64).astype(f"u{width}")
    rnd = from_bits(raw, dt) if dt is not DType.BOOL else rng.integers(0, 2, n).astype(bool)
    out = np.concatenate([sp.astype(rnd.dtype), rnd])[:n]
    return rng.permutation(out)
