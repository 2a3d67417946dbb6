"""Peer stacks (ml_dtypes, torch CPU): models of how they differ from the contract, and the judge
that decides, where a peer and the reference disagree, which one is wrong.

Each peer is described as *our contract plus documented deviations* (``DEVIATIONS``), each valid
for a range of the peer's versions (ml_dtypes 0.7 fixed F1 and F2; torch saturates fp8e4m3 from
2.13 on). A peer model computes what the installed peer is expected to return from that
description alone, and the numerics sweep counts how many inputs each deviation affects.

A peer is judged, never trusted (``judge``): where the peer and the reference disagree, an
independent exact model decides. The reference wrong is an error of ours and fails; the peer
wrong is a *finding*, counted in ``FINDINGS`` per (peer, version, code path, class) and never a
failure, so a peer fixing or growing a bug cannot turn our CI red. See docs/findings.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tilefoundry.semantics.dtypes import (
    FORMATS,
    DType,
    bits_dtype,
    cast,
    dtype_of,
    from_bits,
    to_bits,
)

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
    #: the peer versions that have it (a PEP 440 specifier; "" = every version seen so far)
    versions: str = ""

    def present_in(self, version: str | None) -> bool:
        if version is None:
            return False
        return SpecifierSet(self.versions).contains(Version(version).public, prereleases=True)


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
        "gives 2^-126; round to nearest gives 2^-127 (the midpoint is 1.5·2^-127).",
        versions="<0.7"),
    Deviation(
        "ml_dtypes", "int-to-float-through-f32",
        lambda s, d: s.is_int and d.is_float and d is not _F32,
        _via_f32,
        "int → bf16 (and other narrow floats) converts through f32 first: a double rounding "
        "that differs from one rounding of the exact integer near bf16 ties.",
        versions="<0.7"),
    Deviation(
        "torch", "fp8e4m3-saturates",
        lambda s, d: d is DType.FP8E4M3,
        _saturating,
        "float8_e4m3fn conversion saturates finite overflow and ±inf to ±448 (our "
        "overflow='saturate'); the default contract gives NaN (torch 2.11 gives NaN, on CPU and "
        "CUDA alike).",
        versions=">=2.13"),
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


def peer_version(peer: str) -> str | None:
    """The installed version of a peer (None where it is not installed)."""
    from tilefoundry.versions import package_version

    return package_version(peer)


def model(peer: str, x: np.ndarray, dst: DType,
          version: str | None = None) -> tuple[np.ndarray, dict[str, int]]:
    """What ``peer`` (at ``version``: default the installed one) is expected to return for
    ``cast(x, dst)``, and per-deviation counts.

    Later deviations of the list take precedence where masks overlap.
    """
    out, counts, _ = model_with_mask(peer, x, dst, version)
    return out, counts


def model_with_mask(peer: str, x: np.ndarray, dst: DType, version: str | None = None
                    ) -> tuple[np.ndarray, dict[str, int], np.ndarray]:
    """``model`` plus the mask of the elements a documented deviation changes."""
    src = dtype_of(x)
    changed_any = np.zeros(np.shape(x), bool)
    version = peer_version(peer) if version is None else version
    out = cast(x, dst).copy()
    counts: dict[str, int] = {}
    for dev in DEVIATIONS:
        if dev.peer != peer or not dev.applies(src, dst) or not dev.present_in(version):
            continue
        mask, vals = dev.model(x, dst)
        # a deviation only counts where it changes the contract's result
        changed = mask & (to_bits(vals) != to_bits(out))
        counts[dev.name] = int(changed.sum())
        changed_any |= changed
        out[mask] = vals[mask]
    return out, counts, changed_any


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


# ---------------------------------------------------------------------------------------------
# judging a peer: who is wrong where the peer and the reference disagree
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FindingKey:
    """What a finding is keyed by: the peer, its version, the code path that produced the value
    (the op and dtypes, and for torch its CPU capability), and the class of the divergence."""

    peer: str
    version: str
    code_path: str
    klass: str

    def __str__(self) -> str:
        return f"{self.peer} {self.version} [{self.code_path}] {self.klass}"


class Findings(Counter):
    """Counts of peer divergences (elements) by ``FindingKey``: what a run learned about peers."""

    def record(self, peer: str, code_path: str, klass: str, count: int) -> None:
        if count:
            self[FindingKey(peer, peer_version_label(peer), code_path, klass)] += int(count)

    def report(self) -> str:
        if not self:
            return "no peer divergences recorded"
        return "\n".join(f"{n:>10,}  {k}" for k, n in sorted(self.items(), key=str))


#: the process-wide ledger (the test session prints it; ``selfcheck`` prints its own)
FINDINGS = Findings()


def peer_version_label(peer: str) -> str:
    """``peer_version`` plus, for torch, the CPU capability its kernels dispatch on."""
    v = peer_version(peer) or "not installed"
    if peer == "torch":
        from tilefoundry.versions import torch_cpu_capability

        v += f" cpu={torch_cpu_capability()}"
    return v


@dataclass(frozen=True)
class Judgement:
    """The outcome of judging a peer against the reference on some elements."""

    disagreements: int  # elements where peer and reference differ (beyond what is documented)
    ours_wrong: np.ndarray  # flat indices where the exact model says the reference is wrong
    peer_wrong: int  # disagreements the exact model blames on the peer (findings)

    def assert_ours_right(self, what: str, show: Callable[[np.ndarray], str] | None = None):
        """Fail (our error) when the exact model convicts the reference on any element."""
        if self.ours_wrong.size:
            detail = show(self.ours_wrong[:6]) if show else str(self.ours_wrong[:6].tolist())
            raise AssertionError(
                f"{what}: the reference is wrong on {self.ours_wrong.size} element(s) by the "
                f"exact model (the peer disagreed there): {detail}")


def judge(peer: str, code_path: str, disagree: np.ndarray,
          ours_right: Callable[[np.ndarray], np.ndarray], klass: str = "undocumented",
          findings: Findings | None = None) -> Judgement:
    """Decide the elements where a peer and the reference disagree.

    ``disagree`` is a boolean mask (any shape) of the elements where the peer's value differs
    from the reference beyond the contract and the documented deviations. ``ours_right`` is the
    independent exact model, called once with the flat indices of those elements only (so it may
    be a slow scalar model): True where the reference's value is the one the model admits. The
    peer is then wrong there and the divergence is recorded as a finding of class ``klass``;
    False elements are errors of ours (``Judgement.ours_wrong``).
    """
    idx = np.flatnonzero(np.asarray(disagree))
    if idx.size == 0:
        return Judgement(0, idx, 0)
    ok = np.asarray(ours_right(idx), dtype=bool).reshape(-1)
    if ok.shape != idx.shape:
        raise ValueError(f"ours_right returned {ok.shape} verdicts for {idx.size} elements")
    (FINDINGS if findings is None else findings).record(peer, code_path, klass,
                                                         int(ok.sum()))
    return Judgement(int(idx.size), idx[~ok], int(ok.sum()))


def exact_cast_agrees(x: np.ndarray, dst: DType, ours: np.ndarray, idx: np.ndarray,
                      overflow: str = "nonfinite", rounding: str = "nearest") -> np.ndarray:
    """The exact scalar model's verdict on ``ours = cast(x, dst)`` at flat indices ``idx``: True
    where ours is the model's value (NaN as a class, an unspecified element admitting any)."""
    from tilefoundry.semantics import exact

    src = dtype_of(x)
    xs = np.asarray(x).reshape(-1)[idx]
    if src is DType.BOOL:
        src_bits = xs.astype(np.uint8)
    elif src.is_int:  # two's complement bits, as non-negative Python ints
        src_bits = np.ascontiguousarray(xs).view(f"u{xs.dtype.itemsize}")
    else:
        src_bits = to_bits(xs)
    want = exact.exact_cast_many(src_bits.tolist(), src, dst, overflow, rounding)
    ov = np.asarray(ours).reshape(-1)[idx]
    if dst is DType.BOOL:
        ob = ov.astype(np.uint64)
    else:
        ob = to_bits(ov).astype(np.uint64)
    spec = np.array([w is not None for w in want])
    wb = np.array([0 if w is None else w for w in want], dtype=np.uint64)
    good = ~spec | (ob == wb)
    if dst.is_float:
        wv = cast(from_bits(wb.astype(bits_dtype(dst)), dst), _F32)
        good |= spec & np.isnan(cast(ov, _F32)) & np.isnan(wv)
    return good
