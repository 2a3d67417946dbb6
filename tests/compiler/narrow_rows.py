"""Rows that reach both ends of a narrow dtype's range, shared by the narrow-f32 tests of the
Triton and CUDA backends (``TileConfig.narrow_f32``, D279)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

NP = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}


def softmax_rows(dt: str) -> np.ndarray:
    """Random rows at three scales, a row whose exponents reach bf16's subnormal range (e^-88
    .. e^-104 after the max subtraction), and rows holding inf, NaN, and only -inf."""
    rng = np.random.default_rng(7)
    rows = [rng.standard_normal(64, np.float32) * s for s in (0.5, 3.0, 20.0)]
    rows.append(np.concatenate([[0.0], -np.linspace(80.0, 104.0, 63)]).astype(np.float32))
    rows.append(np.concatenate([[np.inf, 1.0], np.zeros(62)]).astype(np.float32))
    rows.append(np.concatenate([[np.nan], np.zeros(63)]).astype(np.float32))
    rows.append(np.full(64, -np.inf, np.float32))
    return np.stack(rows).astype(NP[dt])


def rms_rows(dt: str) -> np.ndarray:
    """Rows reaching both ends of the dtype: squares that overflow f32 or sink into its
    subnormals unscaled (bf16), rows of one huge and many tiny values, subnormal rows, zero
    rows of both signs, inf and NaN rows, and random rows at several scales."""
    fin = ml_dtypes.finfo(NP[dt])
    big, tiny = float(fin.max), float(fin.smallest_subnormal)
    rng = np.random.default_rng(11)
    n = 96
    rows = [rng.standard_normal(n) * s for s in (1e-3, 1.0, 300.0)]
    rows += [rng.standard_normal(n) * s for s in (1e25, 1e36, 1e-25, 1e-38)] if dt == "bf16" \
        else []
    rows.append(np.full(n, big))
    rows.append(np.concatenate([[big, -big], rng.standard_normal(n - 2) * tiny * 8]))
    rows.append(np.concatenate([[1.0], np.full(n - 1, tiny)]))
    rows.append(rng.integers(-40, 40, n) * tiny)
    rows.append(np.full(n, tiny))
    rows.append(np.zeros(n))
    rows.append(-np.zeros(n))
    rows.append(np.concatenate([[np.inf, -2.0], np.ones(n - 2)]))
    rows.append(np.concatenate([[np.nan, 0.0], np.ones(n - 2)]))
    rows.append(np.concatenate([[-np.inf, np.inf], np.zeros(n - 2)]))
    return np.stack(rows).astype(NP[dt])
