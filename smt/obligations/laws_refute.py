"""Laws that fail (split out of ``smt/obligations/laws.py`` by concern, D440): the counterexample
search — a solver model, shrunk toward simple values and replayed through the reference
(``refute``) — and the solver helpers the law checks share (``_combine``, ``_RNE``). The
obligations themselves are registered in ``laws.py``, which re-exports these names."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import z3

from tilefoundry.semantics.dtypes import from_bits, to_bits
from tilefoundry.semantics.formats import FORMATS, DType, FormatInfo
from tilefoundry.semantics.reductions import identity
from tilefoundry.smt.framework import Outcome, ProveCtx, fmt_value

_RNE = z3.RNE()


def _bits_np(info: FormatInfo) -> type:
    return {8: np.uint8, 16: np.uint16, 32: np.uint32}[info.bits]


def identity_bits(kind: str, dt: DType) -> int:
    """Bit pattern of the HIR Reduce identity (``reductions.identity``) of ``kind`` in ``dt``."""
    return int(to_bits(identity(kind, dt).reshape(1))[0])


def _combine(results: list[tuple[str, str, dict[str, str] | None]], proved_detail: str
             ) -> Outcome:
    """One outcome from sub-queries (case, status, counterexample): the first non-proved wins."""
    sub = [(case, st) for case, st, _ in results]
    for case, st, cex in results:
        if st != "proved":
            what = {"counterexample": "fails", "failed": "the solver gave up on"}.get(st, st)
            return Outcome(st, f"{what}: {case}", cex, sub=sub)
    return Outcome("proved", proved_detail, sub=sub)


# =============================================================================================
# laws that fail: counterexamples, shrunk and replayed through the reference
# =============================================================================================
@dataclass(frozen=True)
class Var:
    """A witness variable of a refutation: its name, bit-vector and float format."""

    name: str
    bits: z3.BitVecRef
    dt: DType

    @property
    def fp(self) -> z3.FPRef:
        info = FORMATS[self.dt]
        return z3.fpBVToFP(self.bits, z3.FPSort(info.ebits, info.mbits + 1))


def _to_float(bits: int, dt: DType) -> float:
    return float(from_bits(np.array([bits], _bits_np(FORMATS[dt])), dt)[0])


def _to_bits(v: float, dt: DType) -> int | None:
    """Bits of ``v`` in ``dt`` (f32 or bf16) when it is finite and exactly representable."""
    if not math.isfinite(v):
        return None
    try:
        u = struct.unpack("<I", struct.pack("<f", v))[0]
    except OverflowError:
        return None
    if struct.unpack("<f", struct.pack("<I", u))[0] != v:
        return None
    if dt is DType.F32:
        return u
    if dt is DType.BF16:
        return u >> 16 if u & 0xFFFF == 0 else None
    raise ValueError(f"witness values of {dt} are not supported")


def _complexity(v: float) -> float:
    """How hard a value is to read: 0 for zero; else 2 * significant bits + |exponent| (+ sign)."""
    if v == 0:
        return 0.25 if math.copysign(1, v) < 0 else 0.0
    mant, ex = math.frexp(abs(v))
    sig = 1
    while mant != int(mant):
        mant *= 2
        sig += 1
    return 2 * sig + abs(ex - 1) + (0.5 if v < 0 else 0.0)


def _moves(vals: list[float]) -> list[list[float]]:
    """Candidate simplifications of a witness: scale everything by 2^k; replace one value by a
    simpler one (0, ±1, fewer significant bits, a power of two, ±another value)."""
    out: list[list[float]] = []
    for k in range(-160, 161):
        if k:
            out.append([math.ldexp(v, k) for v in vals])
    for i, v in enumerate(vals):
        cands = [0.0, 1.0, -1.0, 2.0, 0.5, abs(v), float(round(v))]
        cands += [vals[j] for j in range(len(vals)) if j != i]
        cands += [-vals[j] for j in range(len(vals)) if j != i]
        if v != 0 and math.isfinite(v):
            mant, ex = math.frexp(v)
            cands += [math.ldexp(math.trunc(math.ldexp(mant, nb)), ex - nb) for nb in range(1, 25)]
            cands += [math.copysign(2.0 ** e2, v) for e2 in range(-30, 31)]
        out += [[*vals[:i], c, *vals[i + 1:]] for c in cands]
    return out


def _shrink(dts: list[DType], start: list[float],
            broken: Callable[[list[np.ndarray]], np.ndarray], max_rounds: int = 64
            ) -> list[float]:
    """Greedy, deterministic shrinking of a witness: take the simplest move (by total
    ``_complexity``) that keeps the law broken, until none does. ``broken`` is vectorized:
    one array per variable in, a boolean mask out."""
    cur = list(start)
    for _ in range(max_rounds):
        base = sum(map(_complexity, cur))
        moves = [m for m in _moves(cur)
                 if sum(map(_complexity, m)) < base
                 and all(_to_bits(v, dt) is not None for v, dt in zip(m, dts, strict=True))]
        if not moves:
            break
        cols = [np.array([m[i] for m in moves]) for i in range(len(cur))]
        ok = np.asarray(broken(cols), bool)
        if not ok.any():
            break
        cx = np.array([sum(map(_complexity, m)) for m in moves])
        cx[~ok] = np.inf
        cur = moves[int(np.argmin(cx))]
    return cur


def _subst(e: z3.ExprRef, vars_: list[Var], bits: list[int]) -> z3.ExprRef:
    return z3.simplify(z3.substitute(e, *[(v.bits, z3.BitVecVal(x, v.bits.size()))
                                          for v, x in zip(vars_, bits, strict=True)]))


def _fp_float(e: z3.ExprRef) -> float:
    """The value of a constant FP term as a Python float (sign of zero kept)."""
    if z3.is_true(z3.simplify(z3.fpIsNaN(e))):
        return math.nan
    neg = z3.is_true(z3.simplify(z3.fpIsNegative(e)))
    if z3.is_true(z3.simplify(z3.fpIsInf(e))):
        return -math.inf if neg else math.inf
    v = float(z3.simplify(z3.fpToReal(e)).as_fraction())
    return math.copysign(v, -1.0 if neg else 1.0)


def _same_float(x: float, y: float) -> bool:
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y and math.copysign(1, x) == math.copysign(1, y)


def _pool(dt: DType) -> np.ndarray:
    """Witness candidates for one variable: 0, ±1, ±3 and ±2^k over the format's precision."""
    p = FORMATS[dt].mbits + 3
    mags = [1.0, 3.0, *(2.0 ** k for k in range(-p, p + 1) if k)]
    return np.array([0.0, *mags, *(-m for m in mags)])


def refute(ctx: ProveCtx, label: str, vars_: list[Var], cond: z3.BoolRef,
           show: dict[str, z3.ExprRef],
           replay: Callable[[list[np.ndarray]], dict[str, np.ndarray]],
           broken: Callable[[dict[str, np.ndarray]], np.ndarray], what: str) -> Outcome:
    """Refute a law: scan every combination of ``_pool`` values through the package's
    reference (``replay``, vectorized) for the simplest one that breaks the law (``broken``),
    shrink it, then confirm it with Z3 in the independent encoding (``cond`` with the inputs
    pinned must be satisfiable) and check that the encoding and the reference agree on every
    intermediate value of ``show`` that ``replay`` returns.

    (Z3's own search for such witnesses — and ``ctx.find(minimize=...)`` — is slow and
    unstable on f32 arithmetic: it ran past the default rlimit in some process states, so the
    search is done concretely and Z3 checks the result.)"""
    dts = [v.dt for v in vars_]

    def bad(cols: list[np.ndarray]) -> np.ndarray:
        return np.asarray(broken(replay(cols)), bool)

    pools = [_pool(dt) for dt in dts]
    grids = [g.reshape(-1) for g in np.meshgrid(*pools, indexing="ij")]
    hit = bad(grids)
    if not hit.any():
        return Outcome("failed", f"{what}: no witness among {hit.size} pool combinations")
    cx = sum(g.reshape(-1) for g in np.meshgrid(
        *[np.array([_complexity(float(v)) for v in pool]) for pool in pools], indexing="ij"))
    start = [float(g[int(np.argmin(np.where(hit, cx, np.inf)))]) for g in grids]
    vals = _shrink(dts, start, bad)
    bits = [_to_bits(f, dt) for f, dt in zip(vals, dts, strict=True)]
    assert all(b is not None for b in bits)
    pins = [v.bits == b for v, b in zip(vars_, bits, strict=True)]
    st, _ = ctx.find(z3.And(cond, *pins), label)
    if st != "counterexample":
        return Outcome("failed" if st == "failed" else "error",
                       f"{what}: the witness {vals} breaks the law in the reference but the "
                       f"Z3 encoding says {st}")
    cex = {k: fmt_value(_subst(e, vars_, bits)) for k, e in show.items()}  # type: ignore[arg-type]
    ref = {k: float(np.asarray(v).reshape(-1)[0])
           for k, v in replay([np.array([f]) for f in vals]).items()}
    mismatch = [f"{k}: encoding {_fp_float(_subst(show[k], vars_, bits))!r}, reference {rv!r}"
                for k, rv in ref.items()
                if not _same_float(_fp_float(_subst(show[k], vars_, bits)), rv)]  # type: ignore[arg-type]
    if mismatch:
        return Outcome("error", f"{what}: the encoding and the reference disagree on the "
                                f"witness: " + "; ".join(mismatch), cex)
    args = ", ".join(f"{v.name}={f!r}" for v, f in zip(vars_, vals, strict=True))
    return Outcome("counterexample",
                   f"{what}: {args} (simplest witness over {hit.size} combinations, confirmed "
                   f"by Z3 in the FP-theory encoding; the reference replays the same "
                   f"intermediate values)", cex,
                   sub=[("reference scan", "counterexample"), ("z3 witness", st)])


def _f32(name: str) -> Var:
    return Var(name, z3.BitVec(name, 32), DType.F32)


def _finite(*xs: z3.FPRef) -> list[z3.BoolRef]:
    return [z3.Not(z3.Or(z3.fpIsNaN(x), z3.fpIsInf(x))) for x in xs]


def _differ(x: z3.FPRef, y: z3.FPRef) -> z3.BoolRef:
    return z3.And(z3.Not(z3.fpEQ(x, y)), *_finite(x, y))


def _np_differ(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.isfinite(x) & np.isfinite(y) & (x != y)


def _np32(cols: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(c, np.float64).astype(np.float32) for c in cols]
