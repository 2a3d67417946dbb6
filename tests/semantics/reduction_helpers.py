"""Helpers shared by the reduction and matmul tests (independent f32 evaluation, drawing)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tilefoundry.semantics.dtypes import DType, cast

FLOATS = [DType.F32, DType.F16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2]
INTS = [DType.I8, DType.U8, DType.I32, DType.I64]
F32MAX = float(np.finfo(np.float32).max)


def f32(*v: float) -> np.ndarray:
    return np.array(v, np.float32)


def in_dtype(dt: DType, *v: float) -> np.ndarray:
    return cast(f32(*v), dt)


def wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)  # exact widening through ml_dtypes / numpy


def same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = wide(np.asarray(a)), wide(np.asarray(b))
    return bool(np.all(((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))))


ELEMS = st.one_of(
    st.floats(-8, 8, width=32),
    st.floats(width=32),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0 ** -24, 1e-40, 3e38, -3e38, 1e8, -1e8]),
)


def draw_x(data, dt: DType, shape: tuple, special: bool = True) -> np.ndarray:
    f = data.draw(arrays(np.float32, shape, elements=ELEMS if special else st.floats(
        -1e4, 1e4, width=32)))
    return cast(f, dt, overflow="nonfinite" if special else "saturate")


def random_tree(data, leaves: list) -> np.float32:
    """An arbitrary binary tree over ``leaves`` (in the given order), evaluated in f32."""
    if len(leaves) == 1:
        return np.float32(leaves[0])
    k = data.draw(st.integers(1, len(leaves) - 1))
    with np.errstate(all="ignore"):
        return np.float32(random_tree(data, leaves[:k]) + random_tree(data, leaves[k:]))
