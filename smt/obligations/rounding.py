"""Rounding obligations: the f32 → narrow-float cast, proved for every f32 input.

For each destination format and mode an obligation ``rounding.f32_to_<dt>.<mode>`` checks that a
bit-vector transcription of the reference algorithm (``dtypes._decode_f32`` followed by
``dtypes._round_codes``: decode to ``(sign, m, e)``, round once with an unbounded exponent, compare
with the largest finite code, then the overflow / NaN / sign rules) equals an independent
specification, over **all** 2^32 f32 bit patterns symbolically:

* f16, bf16, fp8e5m2 (IEEE-like): Z3's floating-point theory, ``fpToFP(RNE, x, FPSort(e, p))``
  then ``fpToIEEEBV``; ``saturate`` is expressed on top of that result (an infinite result becomes
  ± the IEEE largest finite of the sort, computed from (e, p), not from ``formats``); NaN results
  are compared as a class (any NaN encoding).
* fp8e4m3 (E4M3FN) and f8e8m0: a *midpoint-count* specification over the exact grid
  ``g_0 < g_1 < … < g_N`` of the format's finite magnitudes (``FormatInfo.code_value``) extended by
  the next value an unbounded exponent would give above the largest finite one. Round to nearest
  gives the magnitude code ``#{i : |x| > mid_i} + #{i : |x| = mid_i and the tie goes up}`` with
  ``mid_i = (g_i + g_(i+1)) / 2`` (ties to the even code; f8e8m0 ties go up, D12); ``up`` is
  ``#{i : x > g_i}``; ``down`` is ``max(#{i : x ≥ g_i} - 1, 0)``. The comparisons are exact FP
  comparisons in Float64 (every grid point and midpoint is a Float64 constant), arranged as a
  bisection tree over the sorted thresholds. A count of ``N`` (the extended point) is an
  overflow. The fp8e5m2 obligations also prove this construction equal to the FP-theory
  specification on all inputs, which validates it on a format where both apply.

Each obligation also evaluates the transcription on a few hundred structured f32 patterns (ties,
carries, subnormal boundaries, overflow thresholds, NaN, ±inf, ±0) by substituting the input and
simplifying, and compares the bits with ``tilefoundry.semantics.dtypes.cast`` (NaN as a class);
a mismatch is a ``counterexample`` naming the input in hex.

Encoders take parameters (``ties``, ``max_code``) so that tests can plant a bug and watch the
obligation fail.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import z3

from tilefoundry.semantics.dtypes import cast, from_bits
from tilefoundry.semantics.formats import FORMATS, DType, FormatInfo
from tilefoundry.smt.framework import Outcome, ProveCtx, obligation

__all__ = [
    "DESTINATIONS",
    "RoundEncoder",
    "check_rounding",
    "crosscheck",
    "encode_round_f32",
    "f32_patterns",
    "is_nan_code",
    "obligation_name",
    "rounding_cases",
    "spec_round_f32",
]

#: Destination formats proved here (f4e2m1 is type-level only, D18).
DESTINATIONS = (DType.F16, DType.BF16, DType.FP8E5M2, DType.FP8E4M3, DType.F8E8M0)
_IEEE_LIKE = (DType.F16, DType.BF16, DType.FP8E5M2)
_F32_M_BITS = 24  # every f32 significand is below 2^24 (dtypes._Decoded.m_bits for f32)

RoundEncoder = Callable[[z3.BitVecRef, FormatInfo, str, str], z3.BitVecRef]


def _c(v: int, w: int = 32) -> z3.BitVecNumRef:
    return z3.BitVecVal(v, w)


def _smax(a: z3.BitVecRef, b: z3.BitVecRef | int) -> z3.BitVecRef:
    return z3.If(a > b, a, b)


def _bit_length23(f: z3.BitVecRef) -> z3.BitVecRef:
    """Bit length (0..23) of the low 23 bits of a 32-bit vector, as a 32-bit value."""
    out: z3.BitVecRef = _c(0)
    for k in range(23):  # the highest set bit wins: build from the lowest up
        out = z3.If(z3.Extract(k, k, f) == 1, _c(k + 1), out)
    return out


# ---------------------------------------------------------------------------------------------
# the transcription of the reference algorithm
# ---------------------------------------------------------------------------------------------
def encode_round_f32(x: z3.BitVecRef, info: FormatInfo, overflow: str, rounding: str, *,
                     ties: str = "even", max_code: int | None = None) -> z3.BitVecRef:
    """Bit-vector transcription of ``cast(f32 -> info.dtype, overflow, rounding)``.

    Follows ``dtypes._decode_f32`` and ``dtypes._round_codes`` step by step in the same integer
    widths (int32 exponents, uint32 significands, wraparound included). ``ties="away"`` and
    ``max_code`` exist only to plant bugs in tests (ties away from zero instead of
    half-minus-one-plus-lsb; a wrong largest finite code).
    """
    if ties not in ("even", "away"):
        raise ValueError(f"ties must be 'even' or 'away', got {ties!r}")
    max_c = info.max_code if max_code is None else max_code
    # --- _decode_f32 --------------------------------------------------------------------------
    sign = z3.Extract(31, 31, x)
    efield = z3.ZeroExt(24, z3.Extract(30, 23, x))
    fbits = z3.ZeroExt(9, z3.Extract(22, 0, x))
    normal = efield != 0
    m = fbits | z3.If(normal, _c(1 << 23), _c(0))
    e = z3.If(normal, efield, _c(1)) - 150
    sub = z3.And(z3.Not(normal), fbits != 0)
    valexp = z3.If(sub, _bit_length23(fbits) - 150, efield - 127)  # frexp exponent - 1
    special = efield == 0xFF
    is_inf = z3.And(special, fbits == 0)
    is_nan = z3.And(special, fbits != 0)
    # --- _round_codes -------------------------------------------------------------------------
    mb, emin = info.mbits, info.emin
    q = _smax(valexp, _c(emin)) - mb
    sh = q - e
    far = sh >= _F32_M_BITS + 2
    left = sh < 0
    m_r = z3.If(far, _c(1), m)
    sh_r = z3.If(far, _c(2), z3.If(sh < 0, _c(0), sh))
    one = _c(1)
    if rounding == "nearest":  # 25 < 32: the extra-bit path of _round_codes
        m_r = m_r << 1
        sh_r = sh_r + 1
        lsb = z3.LShR(m_r, sh_r) & one
        if ties == "even":
            r = z3.LShR(m_r + ((one << (sh_r - 1)) - 1) + lsb, sh_r)
        else:  # planted bug: add half, so ties round away from zero
            r = z3.LShR(m_r + (one << (sh_r - 1)), sh_r)
    else:
        r = z3.LShR(m_r, sh_r)
        rem = m_r - (r << sh_r)
        if rounding == "up":
            r = r + z3.If(rem != 0, one, _c(0))
        elif rounding != "down":
            raise ValueError(f"unknown rounding {rounding!r}")
    neg_sh = -sh
    r = z3.If(left, m << z3.If(neg_sh > 63, _c(63), neg_sh), r)  # widening only; never here
    if info.implicit_bit:
        code = ((q + (mb - emin)) << mb) + r
    else:  # E8M0
        code = _smax(q - emin + r - 1, _c(0))
    nonzero = m != 0
    over = z3.Or(code > max_c, is_inf)
    if overflow == "saturate":
        special_code = max_c
    elif overflow == "nonfinite":
        special_code = info.inf_code if info.inf_code is not None else info.nan_code
    else:
        raise ValueError(f"unknown overflow {overflow!r}")
    assert info.nan_code is not None
    bits = info.bits
    out = z3.Extract(bits - 1, 0, code)
    out = z3.If(nonzero, out, _c(0, bits))
    out = z3.If(over, _c(special_code, bits), out)
    nan = is_nan
    if not info.has_sign:
        nan = z3.Or(nan, z3.And(z3.Not(nonzero), z3.Not(special)), sign == 1)
    out = z3.If(nan, _c(info.nan_code, bits), out)
    if info.has_sign:
        out = out | (z3.ZeroExt(bits - 1, sign) << (bits - 1))
    return out


def is_nan_code(v: z3.BitVecRef, info: FormatInfo) -> z3.BoolRef:
    """Whether bit pattern ``v`` of format ``info`` is a NaN (any NaN encoding)."""
    mag = v & (info.sign_bit - 1) if info.has_sign else v
    if info.nan == "ieee":
        return z3.UGT(mag, info.inf_code)
    if info.nan == "all_ones":
        return mag == info.nan_code
    return z3.BoolVal(False)


# ---------------------------------------------------------------------------------------------
# the independent specifications
# ---------------------------------------------------------------------------------------------
def _ieee_max_finite(ebits: int, sbits: int) -> Fraction:
    """Largest finite value of the IEEE binary format FPSort(ebits, sbits) (IEEE 754, 3.3)."""
    emax = (1 << (ebits - 1)) - 1
    return (2 - Fraction(1, 1 << (sbits - 1))) * Fraction(2) ** emax


def _fp_const(v: Fraction, sort: z3.FPSortRef) -> z3.FPNumRef:
    f = float(v)
    if Fraction(f) != v:
        raise AssertionError(f"{v} is not exact in float64")
    c = z3.FPVal(f, sort)
    if Fraction(z3.simplify(z3.fpToReal(c)).as_fraction()) != v:
        raise AssertionError(f"{v} is not exact in {sort}")
    return c


def _grid(info: FormatInfo) -> list[Fraction]:
    """Finite magnitudes g_0 < … < g_max of ``info`` plus the next value above the largest one
    that rounding with an unbounded exponent reaches (the overflow point)."""
    g = [info.code_value(c) for c in range(info.max_code + 1)]
    assert all(v is not None for v in g)
    top: Fraction = g[-1]  # type: ignore[assignment]
    if info.implicit_bit:
        top_exp = (info.max_code >> info.mbits) - info.bias
        g.append(top + Fraction(2) ** (top_exp - info.mbits))
    else:  # exponent-only grid: the next power of two
        g.append(2 * top)
    return g  # type: ignore[return-value]


def _rank(preds: list[z3.BoolRef], width: int) -> z3.BitVecRef:
    """The number of true predicates of a monotone family (``preds[j]`` implies ``preds[i]`` for
    i < j), by bisection: an if-then-else tree of depth log2(len) with every predicate once."""

    def go(lo: int, hi: int) -> z3.BitVecRef:  # the count lies in [lo, hi]
        if lo == hi:
            return _c(lo, width)
        mid = (lo + hi + 1) // 2  # count >= mid  iff  preds[mid - 1]
        return z3.If(preds[mid - 1], go(mid, hi), go(lo, mid - 1))

    return go(0, len(preds))


def spec_round_f32(x: z3.BitVecRef, info: FormatInfo, overflow: str, rounding: str,
                   method: str | None = None) -> tuple[z3.BoolRef, z3.BitVecRef]:
    """The specification: (result is NaN, result bits where it is not NaN).

    ``method`` is ``"fp"`` (Z3's FP theory; IEEE-like formats only) or ``"midpoint"`` (the
    midpoint count over the exact grid; any format); by default ``"fp"`` where it applies.
    """
    xf = z3.fpBVToFP(x, z3.Float32())
    dt = info.dtype
    if method is None:
        method = "fp" if dt in _IEEE_LIKE else "midpoint"
    if method == "fp":
        if dt not in _IEEE_LIKE or rounding != "nearest":
            raise ValueError(f"the FP-theory specification covers {_IEEE_LIKE}, nearest only")
        sort = z3.FPSort(info.ebits, info.mbits + 1)
        r = z3.fpToFP(z3.RNE(), xf, sort)
        if overflow == "saturate":
            top = _fp_const(_ieee_max_finite(info.ebits, info.mbits + 1), sort)
            r = z3.If(z3.fpIsInf(r), z3.If(z3.fpIsNegative(r), z3.fpNeg(top), top), r)
        return z3.fpIsNaN(xf), z3.fpToIEEEBV(r)
    if method != "midpoint":
        raise ValueError(f"unknown specification method {method!r}")
    # midpoint-count specification, exact comparisons in Float64
    g = _grid(info)
    n = len(g) - 1  # the code of the overflow point
    width = max(n.bit_length() + 1, info.bits + 1)
    d = z3.Float64()
    xd = z3.fpToFP(z3.RNE(), xf, d)  # exact widening
    ax = z3.fpAbs(xd)
    if rounding == "nearest":
        mids = [_fp_const((g[i] + g[i + 1]) / 2, d) for i in range(n)]
        if info.implicit_bit:  # ties to the even code
            conds = [z3.Or(z3.fpGT(ax, mid), z3.And(z3.fpEQ(ax, mid), z3.BoolVal(i % 2 == 1)))
                     for i, mid in enumerate(mids)]
        else:  # E8M0: the tie at 1.5·2^e goes up (D12)
            conds = [z3.fpGEQ(ax, mid) for mid in mids]
        cnt = _rank(conds, width)
    elif rounding == "up":
        cnt = _rank([z3.fpGT(ax, _fp_const(v, d)) for v in g[:-1]], width)
    elif rounding == "down":
        ge = _rank([z3.fpGEQ(ax, _fp_const(v, d)) for v in g], width)
        cnt = z3.If(ge == 0, _c(0, width), ge - 1)
    else:
        raise ValueError(f"unknown rounding {rounding!r}")
    over = cnt == n
    nan = z3.fpIsNaN(xf)
    if overflow == "saturate":
        mag = z3.If(over, _c(info.max_code, width), cnt)
    elif info.inf_code is not None:
        mag = z3.If(over, _c(info.inf_code, width), cnt)
    else:  # no infinity: an overflow is NaN (D11)
        mag = cnt
        nan = z3.Or(nan, over)
    if not info.has_sign:  # E8M0: zero, negatives (and -inf) have no encoding
        nan = z3.Or(nan, z3.fpLEQ(xf, z3.FPVal(0.0, z3.Float32())))
        return nan, z3.Extract(info.bits - 1, 0, mag)
    sign = z3.Extract(31, 31, x)
    bits = z3.Concat(sign, z3.Extract(info.bits - 2, 0, mag))
    return nan, bits


# ---------------------------------------------------------------------------------------------
# concrete cross-check patterns
# ---------------------------------------------------------------------------------------------
def _f32_bits(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, np.float32).view(np.uint32)


def f32_patterns(dt: DType, n_codes: int = 20, seed: int = 0) -> np.ndarray:
    """A few hundred structured f32 bit patterns around the grid of ``dt`` (uint32, unique)."""
    info = FORMATS[dt]
    pats: list[int] = [
        0x00000000, 0x80000000, 0x7F800000, 0xFF800000,  # ±0, ±inf
        0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF,  # NaNs (quiet, signaling)
        0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
        0x3F800000, 0x3F7FFFFF, 0x3FFFFFFF, 0x3F800001,  # 1, carries into the next binade
    ]
    # grid points of the destination (a spread of codes plus both ends) as exact f32 values
    hi = info.max_code
    codes = sorted({*range(0, 6), *range(hi - 5, hi + 1),
                    *np.linspace(0, hi, n_codes).astype(int).tolist(),
                    *[(k << info.mbits) for k in range(1, 4) if info.implicit_bit]})
    codes = [c for c in codes if 0 <= c <= hi]
    grid = cast(from_bits(np.array(codes, np.uint64).astype(_bits_np(info)), dt), DType.F32)
    g = [Fraction(float(v)) for v in grid]
    nxt = dict(zip(codes, g, strict=True))
    ext = _grid(info)
    vals: set[float] = set()
    for c, v in nxt.items():
        vals.add(float(v))
        above = ext[c + 1]
        mid = (v + above) / 2
        for t in (mid, v):
            f = np.float32(float(t))
            if Fraction(float(f)) == t:
                vals.update([float(f), float(np.nextafter(f, np.float32(np.inf))),
                             float(np.nextafter(f, np.float32(0)))])
    if not info.implicit_bit:  # E8M0: the smallest value and below
        vals.update([2.0 ** -128, 2.0 ** -149, 1.5 * 2.0 ** -127, 1.5 * 2.0 ** 127])
    arr = np.array(sorted(vals), np.float32)
    mags = _f32_bits(arr[np.isfinite(arr)])
    pats += mags.tolist() + (mags | np.uint32(0x80000000)).tolist()
    for ef in (1, 103, 112, 113, 126, 127, 142, 143, 254):  # all-ones significands: carries
        pats += [(ef << 23) | 0x7FFFFF, (ef << 23) | 0x400000, (ef << 23) | 0x7FFF]
    rng = np.random.default_rng(seed)
    pats += rng.integers(0, 1 << 32, 48, dtype=np.uint64).tolist()
    return np.array(sorted({p & 0xFFFFFFFF for p in pats}), np.uint32)


def _bits_np(info: FormatInfo) -> type:
    return {8: np.uint8, 16: np.uint16, 32: np.uint32}[info.bits]


def _nan_np(b: np.ndarray, info: FormatInfo) -> np.ndarray:
    b = b.astype(np.uint64)
    mag = b & np.uint64(info.sign_bit - 1) if info.has_sign else b
    if info.nan == "ieee":
        return mag > np.uint64(info.inf_code)
    return mag == np.uint64(info.nan_code)


def crosscheck(enc_fn: RoundEncoder, info: FormatInfo, overflow: str, rounding: str,
               patterns: np.ndarray) -> tuple[int, dict[str, str] | None]:
    """Evaluate the encoding on concrete patterns (substitute + simplify) and compare with
    ``dtypes.cast``: (number compared, first mismatch or None)."""
    x = z3.BitVec("x", 32)
    enc = enc_fn(x, info, overflow, rounding)
    ref = cast(patterns.view(np.float32), info.dtype, overflow=overflow, rounding=rounding)
    ref_bits = ref.view(_bits_np(info)).astype(np.uint64)
    ref_nan = _nan_np(ref_bits, info)
    for p, rb, rn in zip(patterns.tolist(), ref_bits.tolist(), ref_nan.tolist(), strict=True):
        v = z3.simplify(z3.substitute(enc, (x, _c(p))))
        if not isinstance(v, z3.BitVecNumRef):
            raise AssertionError(f"the encoding did not simplify to a constant on {p:#010x}")
        got = v.as_long()
        got_nan = bool(_nan_np(np.array([got], np.uint64), info)[0])
        if (got_nan != rn) or (not rn and got != rb):
            xv = float(np.array(p, np.uint32).view(np.float32))
            return len(patterns), {"x": f"{p:#010x} ({xv!r})", "encoded": f"{got:#x}",
                                   "dtypes.cast": f"{rb:#x}"}
    return len(patterns), None


# ---------------------------------------------------------------------------------------------
# the obligations
# ---------------------------------------------------------------------------------------------
def rounding_cases() -> list[tuple[DType, str, str]]:
    """(destination, overflow, rounding) of every rounding obligation."""
    out = []
    for dt in DESTINATIONS:
        for ov in ("nonfinite", "saturate"):
            for rd in (("nearest", "up", "down") if dt is DType.F8E8M0 else ("nearest",)):
                out.append((dt, ov, rd))
    return out


def obligation_name(dt: DType, overflow: str, rounding: str) -> str:
    base = f"rounding.f32_to_{dt.value}.{overflow}"
    return base if dt is not DType.F8E8M0 else f"{base}.{rounding}"


def _smallest_violation(claim: z3.BoolRef, x: z3.BitVecRef, pats: np.ndarray) -> str | None:
    """The finite pattern of least magnitude (else any) on which ``claim`` is false."""
    fin = pats[(pats & 0x7F800000) != 0x7F800000]
    order = np.concatenate([fin[np.argsort(fin & 0x7FFFFFFF, kind="stable")],
                            pats[(pats & 0x7F800000) == 0x7F800000]])
    for p in order.tolist():
        if z3.is_false(z3.simplify(z3.substitute(claim, (x, _c(p))))):
            return f"{p:#010x} ({float(np.array(p, np.uint32).view(np.float32))!r})"
    return None


def check_rounding(ctx: ProveCtx, dt: DType, overflow: str, rounding: str,
                   enc_fn: RoundEncoder = encode_round_f32, *, symbolic: bool = True,
                   concrete: bool = True) -> Outcome:
    """Prove ``enc_fn`` equal to the specification for all f32 inputs and cross-check it against
    ``dtypes.cast`` on structured patterns."""
    info = FORMATS[dt]
    sub: list[tuple[str, str]] = []
    details = []
    if concrete:
        pats = f32_patterns(dt)
        n, bad = crosscheck(enc_fn, info, overflow, rounding, pats)
        sub.append(("crosscheck", "counterexample" if bad else "proved"))
        if bad:
            return Outcome("counterexample",
                           f"the encoding differs from dtypes.cast on one of {n} patterns",
                           bad, sub=sub)
        details.append(f"{n} structured f32 patterns agree with dtypes.cast bit for bit "
                       f"(NaN as a class)")
    if symbolic:
        x = z3.BitVec("x", 32)
        enc = enc_fn(x, info, overflow, rounding)
        spec_nan, spec_bits = spec_round_f32(x, info, overflow, rounding)
        claim = z3.If(spec_nan, is_nan_code(enc, info), enc == spec_bits)
        show = {"x": x, "x_value": z3.fpBVToFP(x, z3.Float32()), "encoded": enc,
                "spec_bits": spec_bits, "spec_is_nan": z3.If(spec_nan, _c(1, 1), _c(0, 1))}
        kind = "FP theory fpToFP(RNE)" if dt in _IEEE_LIKE else "midpoint-count over the grid"
        st, cex = ctx.prove(claim, obligation_name(dt, overflow, rounding), show=show)
        sub.append(("symbolic", st))
        if st == "counterexample" and cex is not None:
            small = _smallest_violation(claim, x, f32_patterns(dt))
            if small is not None:  # a readable witness next to the solver's
                cex = {**cex, "smallest structured witness": small}
        if st != "proved":
            what = ("the encoding differs from the specification" if st == "counterexample"
                    else "the solver gave up (raise --rlimit?)")
            return Outcome(st, f"{what} ({kind})", cex, sub=sub)
        details.append(f"all 2^32 f32 inputs: transcription == spec ({kind})")
        if dt in _IEEE_LIKE and info.bits <= 8:
            # validate the midpoint-count construction (the spec of fp8e4m3 / f8e8m0) against
            # the FP theory on a format where both apply
            m_nan, m_bits = spec_round_f32(x, info, overflow, rounding, method="midpoint")
            agree = z3.And(spec_nan == m_nan, z3.Or(spec_nan, spec_bits == m_bits))
            st, cex = ctx.prove(agree, f"{obligation_name(dt, overflow, rounding)}_specs",
                                show={"x": x, "fp_spec": spec_bits, "midpoint_spec": m_bits})
            sub.append(("midpoint spec == FP-theory spec", st))
            if st != "proved":
                return Outcome(st, "the two specifications disagree" if st == "counterexample"
                               else "the solver gave up (raise --rlimit?)", cex, sub=sub)
            details.append("the midpoint-count spec equals the FP-theory spec on all inputs")
    return Outcome("proved", "; ".join(details), sub=sub)


def _register(dt: DType, overflow: str, rounding: str) -> None:
    def run(ctx: ProveCtx) -> Outcome:
        return check_rounding(ctx, dt, overflow, rounding)

    run.__doc__ = (f"f32 -> {dt} cast (overflow={overflow}, rounding={rounding}): reference "
                   f"transcription == spec for all f32; cross-checked with dtypes.cast")
    obligation(obligation_name(dt, overflow, rounding))(run)


for _dt, _ov, _rd in rounding_cases():
    _register(_dt, _ov, _rd)
