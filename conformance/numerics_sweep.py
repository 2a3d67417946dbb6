"""Numerics sweeps: the vectorized conversions and widen-op-round against the exact scalar model
and against peer stacks (ml_dtypes, torch CPU).

* exhaustive: every f16 / bf16 / fp8 / e8m0 / i8 / u8 / bool pattern through every conversion and
  mode; every pair of fp8 patterns (and every single pattern) through each arithmetic op;
* sampled: f32 sources — a structured set (every sign × exponent field × mantissa patterns that
  put a tie, a carry or a sticky bit at every possible rounding position) plus seeded random bit
  patterns — against the exact model, split over worker processes.

Results are plain data (``SweepRow``) so the self-check prints them and the tests assert on them.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import dataclass, field

import numpy as np

from tilefoundry.conformance import peers
from tilefoundry.semantics import exact
from tilefoundry.semantics.dtypes import (
    FORMATS,
    DType,
    apply_lowp,
    bits_dtype,
    cast,
    cast_ex,
    dtype_of,
    from_bits,
    to_bits,
)

FLOATS = (DType.F32, DType.F16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2, DType.F8E8M0)
INTS = (DType.I8, DType.U8, DType.I32, DType.I64)
EXHAUSTIVE_SOURCES = (DType.F16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2, DType.F8E8M0,
                      DType.I8, DType.U8, DType.BOOL)
ARITH_DTYPES = (DType.FP8E4M3, DType.FP8E5M2)
BINARY_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
UNARY_OPS = {"neg": np.negative, "abs": np.abs, "sqrt": np.sqrt}


def modes(dst: DType) -> list[tuple[str, str]]:
    """Every (overflow, rounding) pair a destination takes."""
    if not dst.is_float:
        return [("nonfinite", "nearest")]
    rounds = ["nearest", "up", "down"] if dst is DType.F8E8M0 else ["nearest"]
    return [(o, r) for o in ("nonfinite", "saturate") for r in rounds]


def all_patterns(dt: DType) -> np.ndarray:
    """Every bit pattern of a format of at most 16 bits, as an array of that dtype."""
    if dt is DType.BOOL:
        return np.array([False, True])
    n = 1 << FORMATS[dt].bits
    return from_bits(np.arange(n, dtype=np.uint32).astype(bits_dtype(dt)), dt)


@dataclass
class SweepRow:
    what: str  # "cast" | "binary" | "unary"
    src: str
    dst: str
    mode: str
    n: int
    exact_mismatches: int = -1  # -1: not compared
    unspecified: int = 0
    peer: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: float = 0.0


def _compare_exact(x: np.ndarray, src: DType, dst: DType, overflow: str,
                   rounding: str) -> tuple[int, int]:
    res = cast_ex(x, dst, overflow=overflow, rounding=rounding)
    ours = to_bits(res.values) if dst is not DType.BOOL else res.values.astype(np.uint8)
    src_bits = (to_bits(x) if src is not DType.BOOL else x.astype(np.uint8)).astype(np.int64)
    if FORMATS[src].kind == "int" and FORMATS[src].signed:
        src_bits &= (1 << FORMATS[src].bits) - 1
    want = exact.exact_cast_many(src_bits.tolist(), src, dst, overflow, rounding)
    unspec_model = np.array([w is None for w in want])
    want_bits = np.array([0 if w is None else w for w in want], dtype=np.uint64)
    bad = unspec_model != res.unspecified
    spec = ~unspec_model & ~res.unspecified
    bad |= spec & (ours.astype(np.uint64) != want_bits)
    return int(bad.sum()), int(unspec_model.sum())


def cast_sweep(*, with_exact: bool = True, with_peers: bool = True,
               sources: tuple[DType, ...] = EXHAUSTIVE_SOURCES,
               dsts: tuple[DType, ...] = FLOATS + INTS + (DType.BOOL,)) -> list[SweepRow]:
    """Every pattern of each source through every destination and mode."""
    rows: list[SweepRow] = []
    available = [p for p in peers.PEERS if with_peers and _peer_available(p)]
    for src in sources:
        x = all_patterns(src)
        for dst in dsts:
            for overflow, rounding in modes(dst):
                t0 = time.perf_counter()
                row = SweepRow("cast", str(src), str(dst), f"{overflow}/{rounding}", x.size)
                if with_exact:
                    row.exact_mismatches, row.unspecified = _compare_exact(
                        x, src, dst, overflow, rounding)
                if (overflow, rounding) == ("nonfinite", "nearest") and dst.is_float:
                    for p in available:
                        got = peers.run_peer(p, x, dst)
                        if got is not None:
                            row.peer[p] = judge_peer_cast(p, x, dst, got)
                row.seconds = time.perf_counter() - t0
                rows.append(row)
    return rows


def judge_peer_cast(peer: str, x: np.ndarray, dst: DType, got: np.ndarray,
                    ours: np.ndarray | None = None) -> dict[str, int]:
    """Judge a peer's ``cast(x, dst)``: per-deviation counts of the documented divergences (for
    the installed version), ``undocumented``: elements where the peer differs from its model and
    the exact model says the peer is wrong (findings, recorded in ``peers.FINDINGS``), and
    ``ours_wrong``: elements where the exact model says the reference is wrong (our errors).
    ``ours`` defaults to the reference's ``cast``; tests plant a wrong one."""
    src = dtype_of(x)
    ours = cast(x, dst) if ours is None else ours
    want, counts, documented = peers.model_with_mask(peer, x, dst)
    path = f"{peer_code_path(peer)}: {src}->{dst}"
    for name, n in counts.items():
        peers.FINDINGS.record(peer, path, name, n)
    # elements the model did not predict: either the peer has an undocumented divergence or the
    # reference (which the model is built on) is wrong; the exact model decides which. Also
    # where the peer and the reference differ outside every documented deviation.
    off = ~peers.same_class(got, want) | (~peers.same_class(got, ours) & ~documented)
    j = peers.judge(peer, path, off, lambda idx: peers.exact_cast_agrees(x, dst, ours, idx))
    counts["undocumented"] = j.peer_wrong
    counts["ours_wrong"] = int(j.ours_wrong.size)
    return counts


def peer_code_path(peer: str) -> str:
    return {"torch": "torch.Tensor.to (CPU)", "ml_dtypes": "numpy astype"}.get(peer, peer)


def _peer_available(peer: str) -> bool:
    if peer == "torch":
        try:
            import torch  # noqa: F401
        except ImportError:
            return False
    return True


def arithmetic_sweep(dts: tuple[DType, ...] = ARITH_DTYPES,
                     overflows: tuple[str, ...] = ("nonfinite", "saturate")) -> list[SweepRow]:
    """Every fp8 pair through add/sub/mul/div and every pattern through neg/abs/sqrt, via
    ``apply_lowp`` (widen, IEEE f32 op, round once) against the exact model. ``peer['single']``
    counts results that differ from one rounding of the exact real result (NaN-class equal)."""
    rows = []
    for dt in dts:
        codes = np.arange(1 << FORMATS[dt].bits, dtype=np.uint64).astype(bits_dtype(dt))
        a_bits, b_bits = (g.ravel() for g in np.meshgrid(codes, codes, indexing="ij"))
        a, b = from_bits(a_bits, dt), from_bits(b_bits, dt)
        for overflow in overflows:
            for name, fn in BINARY_OPS.items():
                t0 = time.perf_counter()
                ours = to_bits(apply_lowp(fn, a, b, overflow=overflow)).tolist()
                al, bl = a_bits.tolist(), b_bits.tolist()
                want = [exact.binary_bits(name, p, q, dt, overflow) for p, q in zip(al, bl,
                                                                                  strict=True)]
                bad = sum(o != w for o, w in zip(ours, want, strict=True))
                rows.append(SweepRow("binary", str(dt), name, overflow, len(ours), bad,
                                     seconds=time.perf_counter() - t0))
            for name, fn in UNARY_OPS.items():
                t0 = time.perf_counter()
                x = from_bits(codes, dt)
                ours = to_bits(apply_lowp(fn, x, overflow=overflow)).tolist()
                want = [exact.unary_bits(name, int(p), dt, overflow) for p in codes.tolist()]
                bad = sum(o != w for o, w in zip(ours, want, strict=True))
                rows.append(SweepRow("unary", str(dt), name, overflow, len(ours), bad,
                                     seconds=time.perf_counter() - t0))
    return rows


# ---------------------------------------------------------------------------------------------
# f32 sources
# ---------------------------------------------------------------------------------------------
def structured_f32_patterns() -> np.ndarray:
    """Bit patterns that put a tie, a near-tie, a carry and a sticky bit at every rounding
    position, for every sign and exponent field (subnormal boundaries and overflow thresholds of
    every destination lie on some exponent field), plus the specials."""
    mants = {0, 1, 0x7FFFFF, 0x400000, 0x3FFFFF}
    for p in range(23):
        tie = 1 << p
        above = 0x7FFFFF & ~((2 << p) - 1)  # every bit above the guard set: a carry chain
        for upper in (0, 2 << p if p < 22 else 0, above):
            for delta in (-1, 0, 1):
                mants.add((upper | tie) + delta)
    m = np.array(sorted(v for v in mants if 0 <= v <= 0x7FFFFF), dtype=np.uint32)
    se = np.arange(512, dtype=np.uint32) << np.uint32(23)
    return (se[:, None] | m[None, :]).ravel()


def f32_sources(n: int, seed: int) -> np.ndarray:
    """``n`` f32 bit patterns: the structured set first, then seeded uniform random patterns."""
    s = structured_f32_patterns()
    if n <= s.size:
        return s[:n]
    rng = np.random.default_rng(seed)
    r = rng.integers(0, 1 << 32, n - s.size, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([s, r])


def _f32_chunk(args: tuple[np.ndarray, str, str, str]) -> tuple[int, int]:
    bits, dst_name, overflow, rounding = args
    dst = DType(dst_name)
    x = bits.view(np.float32)
    return _compare_exact(x, DType.F32, dst, overflow, rounding)


def f32_sweep(n: int, seed: int = 0, workers: int = 2,
              dsts: tuple[DType, ...] = FLOATS[1:] + INTS) -> list[SweepRow]:
    """``n`` f32 sources per conversion and mode against the exact model, in worker processes."""
    src = f32_sources(n, seed)
    chunks = np.array_split(src, max(1, workers * 4))
    rows = []
    ctx = mp.get_context("spawn") if workers > 1 else None
    pool = ctx.Pool(workers) if ctx else None
    try:
        for dst in dsts:
            for overflow, rounding in modes(dst):
                t0 = time.perf_counter()
                jobs = [(c, str(dst), overflow, rounding) for c in chunks]
                results = pool.map(_f32_chunk, jobs) if pool else [_f32_chunk(j) for j in jobs]
                rows.append(SweepRow("cast", "f32", str(dst), f"{overflow}/{rounding}", src.size,
                                     sum(r[0] for r in results), sum(r[1] for r in results),
                                     seconds=time.perf_counter() - t0))
    finally:
        if pool:
            pool.close()
            pool.join()
    return rows


def format_rows(rows: list[SweepRow]) -> str:
    lines = [f"{'what':6} {'src':8} {'dst':8} {'mode':18} {'n':>10} {'vs exact':>9} "
             f"{'unspec':>7} {'secs':>6}  peers (deviation: inputs affected)"]
    for r in rows:
        ex = "-" if r.exact_mismatches < 0 else str(r.exact_mismatches)
        peer_s = "; ".join(
            f"{p}: " + ", ".join(f"{k}={v}" for k, v in c.items()) for p, c in r.peer.items())
        lines.append(f"{r.what:6} {r.src:8} {r.dst:8} {r.mode:18} {r.n:>10} {ex:>9} "
                     f"{r.unspecified:>7} {r.seconds:>6.2f}  {peer_s}")
    return "\n".join(lines)
