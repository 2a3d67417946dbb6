"""Peer conversion stacks (ml_dtypes, torch CPU) and models of how they differ from the contract.

Each peer is described as *our contract plus documented deviations* (``DEVIATIONS``). A peer
model computes what the peer is expected to return from that description alone; the test suite
checks that the real peer returns exactly the model's result on exhaustive and sampled domains
(so every disagreement with the contract is one of the documented ones), and the numerics sweep
counts how many inputs each deviation affects. See docs/decisions.md and docs/findings.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tilefoundry.semantics.dtypes import FORMATS, DType, bits_dtype, cast, dtype_of, to_bits

_F32 = DType.F32
_E8M0_MIN = np.float32(2.0**-127)
_E8M0_QUIRK_HI = np.float32(1.5 * 2.0**-127)


@dataclass(frozen=True)
class Deviation:
    """One documented way a peer's conversion differs from the contract."""

    peer: str
    name: str
    applies: Callable[[DType, DType], bool]  # (src, dst) -> does this deviation apply
    #: mask of affected inputs and the peer's value (as the dst dtype) on them
    model: Callable[[np.ndarray, DType], tuple[np.ndarray, np.ndarray]]
    explanation: str


def _float_src(src: DType) -> bool:
    return src.is_float


def _abs_f32(x: np.ndarray) -> np.ndarray:
    return np.abs(cast(x, _F32))


def _e8m0_quirk(v: np.ndarray, dst: DType) -> tuple[np.ndarray, np.ndarray]:
    mask = (v > _E8M0_MIN) & (v < _E8M0_QUIRK_HI)
    return mask, np.full(v.shape, 1, np.uint8).view(FORMATS[dst].storage)


def _e8m0_subnormal_quirk(x: np.ndarray, dst: DType) -> tuple[np.ndarray, np.ndarray]:
    return _e8m0_quirk(cast(x, _F32), dst)


def _e8m0_subnormal_quirk_abs(x: np.ndarray, dst: DType) -> tuple[np.ndarray, np.ndarray]:
    return _e8m0_quirk(_abs_f32(x), dst)


def _torch_e8m0_sign_zero(x: np.ndarray, dst: DType) -> tuple[np.ndarray, np.ndarray]:
    v = cast(x, _F32)  # exact for float sources; integer magnitudes round, as torch's do
    mask = ((v < 0) & np.isfinite(v)) | (v == 0)
    mag = np.where(v == 0, _E8M0_MIN, np.abs(v)).astype(np.float32)
    return mask, cast(mag, dst)


def _saturating(x: np.ndarray, dst: DType) -> tuple[np.ndarray, np.ndarray]:
    sat = cast(x, dst, overflow="saturate")
    ours = cast(x, dst)
    return to_bits(sat) != to_bits(ours), sat


def _via_f32(x: np.ndarray, dst: DType) -> tuple[np.ndarray, np.ndarray]:
    peer = cast(cast(x, _F32), dst)
    return to_bits(peer) != to_bits(cast(x, dst)), peer


DEVIATIONS: tuple[Deviation, ...] = (
    Deviation(
        "ml_dtypes", "e8m0-subnormal-range-rounds-up",
        lambda s, d: d is DType.F8E8M0 and s.is_float,
        _e8m0_subnormal_quirk,
        "f8e8m0 of a value in the open interval (2^-127, 1.5·2^-127) — f32-subnormal sources — "
        "gives 2^-126; round to nearest gives 2^-127 (the midpoint is 1.5·2^-127)."),
    Deviation(
        "ml_dtypes", "int-to-float-through-f32",
        lambda s, d: s.is_int and d.is_float and d is not _F32,
        _via_f32,
        "int → bf16 (and other narrow floats) converts through f32 first: a double rounding "
        "that differs from one rounding of the exact integer near bf16 ties."),
    Deviation(
        "torch", "fp8e4m3-saturates",
        lambda s, d: d is DType.FP8E4M3,
        _saturating,
        "float8_e4m3fn conversion saturates finite overflow and ±inf to ±448 (our "
        "overflow='saturate'); the default contract gives NaN."),
    Deviation(
        "torch", "e8m0-ignores-sign-and-zero",
        lambda s, d: d is DType.F8E8M0,
        _torch_e8m0_sign_zero,
        "float8_e8m0fnu of a negative finite value converts |x|; ±0 gives 2^-127 (code 0); the "
        "contract gives NaN for zero and negative sources."),
    Deviation(
        "torch", "e8m0-subnormal-range-rounds-up",
        lambda s, d: d is DType.F8E8M0 and s.is_float,
        _e8m0_subnormal_quirk_abs,
        "as ml_dtypes: (2^-127, 1.5·2^-127) gives 2^-126 (magnitudes, since torch drops the "
        "sign)."),
    Deviation(
        "torch", "int-to-float-through-f32",
        lambda s, d: s.is_int and d.is_float and d is not _F32,
        _via_f32,
        "int → bf16 converts through f32 first (double rounding), as ml_dtypes."),
)

PEERS = ("ml_dtypes", "torch")


def model(peer: str, x: np.ndarray, dst: DType) -> tuple[np.ndarray, dict[str, int]]:
    """What ``peer`` is expected to return for ``cast(x, dst)``, and per-deviation counts.

    Later deviations of the list take precedence where masks overlap.
    """
    src = dtype_of(x)
    out = cast(x, dst).copy()
    counts: dict[str, int] = {}
    for dev in DEVIATIONS:
        if dev.peer != peer or not dev.applies(src, dst):
            continue
        mask, vals = dev.model(x, dst)
        # a deviation only counts where it changes the contract's result
        changed = mask & (to_bits(vals) != to_bits(out))
        counts[dev.name] = int(changed.sum())
        out[mask] = vals[mask]
    return out, counts


# ---------------------------------------------------------------------------------------------
# running the real peers
# ---------------------------------------------------------------------------------------------
def _torch_dtype(dt: DType):
    import torch

    return {
        DType.F32: torch.float32, DType.F16: torch.float16, DType.BF16: torch.bfloat16,
        DType.FP8E4M3: torch.float8_e4m3fn, DType.FP8E5M2: torch.float8_e5m2,
        DType.F8E8M0: torch.float8_e8m0fnu, DType.I8: torch.int8, DType.U8: torch.uint8,
        DType.I32: torch.int32, DType.I64: torch.int64, DType.BOOL: torch.bool,
    }[dt]


def _torch_bits_dtype(bits: int):
    import torch

    return {8: torch.uint8, 16: torch.uint16, 32: torch.uint32, 64: torch.uint64}[bits]


def run_peer(peer: str, x: np.ndarray, dst: DType) -> np.ndarray | None:
    """The peer's own conversion of ``x`` to ``dst`` (None where the peer has no such cast)."""
    src = dtype_of(x)
    if peer == "ml_dtypes":
        try:
            with np.errstate(all="ignore"):
                return x.astype(FORMATS[dst].storage)
        except (TypeError, ValueError):
            return None
    if peer == "torch":
        import torch

        if src.is_float and src is not DType.BOOL:
            bits = np.ascontiguousarray(to_bits(x))
            t = torch.from_numpy(bits.view(bits.dtype)).view(_torch_bits_dtype(
                max(8, FORMATS[src].bits))).view(_torch_dtype(src))
        else:
            t = torch.from_numpy(np.ascontiguousarray(x))
        r = t.to(_torch_dtype(dst))
        if dst.is_float:
            raw = r.view(_torch_bits_dtype(FORMATS[dst].bits)).numpy()
            return raw.view(bits_dtype(dst)).view(FORMATS[dst].storage)
        return r.numpy().astype(FORMATS[dst].storage)
    raise ValueError(peer)


def same_class(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise agreement: equal bits, or both NaN (NaN sign and payload are not contract)."""
    dt = dtype_of(a)
    eq = to_bits(a) == to_bits(b)
    if dt.is_float:
        eq |= np.isnan(cast(a, _F32)) & np.isnan(cast(b, _F32))
    return eq
