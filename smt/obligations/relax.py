"""Conformance levels (``oracle/relax.py``): the finite laws its widenings rest on.

Proved (``expect="proved"``), every input of the format:

* ``relax.excess.one_ulp.{bf16,f16}``: the widening ``excess`` applies — the enclosure of a
  narrow intermediate widened by one ulp of its dtype — holds the unrounded f32 value: for
  every finite f32 x whose rounding to the dtype is finite, RNE(x) is RD(x) or RU(x), so
  [pred(RNE(x)), succ(RNE(x))] ⊇ [RD(x), RU(x)] ∋ x. (RD / RU are adjacent values of the
  dtype or equal, so the claim is that RNE picks one of them.)
Refuted (``expect="counterexample"``): ``relax.arcp.differs.f32``: x · RN(1/y) differs from
RN(x / y) for some finite f32 x, y — the relaxation admits results the strict contract does
not (it is not vacuous). The witness is found concretely through numpy f32 and confirmed by Z3.

Not proved here: fma's monotonicity in its addend (the corners of ``contract``): Z3's fpFMA runs
past the default resource limit even in a 1-4-3 format.
"""

from __future__ import annotations

import numpy as np
import z3

from tilefoundry.smt.framework import Outcome, ProveCtx, obligation

_RNE = z3.RNE()
_FMT = {"bf16": z3.FPSort(8, 8), "f16": z3.FPSort(5, 11)}


def _excess(ctx: ProveCtx, name: str) -> Outcome:
    sort = _FMT[name]
    xb = z3.BitVec("x", 32)
    x = z3.fpBVToFP(xb, z3.Float32())
    rne = z3.fpToFP(_RNE, x, sort)
    rd = z3.fpToFP(z3.RTN(), x, sort)
    ru = z3.fpToFP(z3.RTP(), x, sort)
    fin = [z3.Not(z3.fpIsNaN(x)), z3.Not(z3.fpIsInf(x)), z3.Not(z3.fpIsInf(rne))]
    claim = z3.Or(z3.fpEQ(rne, rd), z3.fpEQ(rne, ru))
    status, cex = ctx.prove(claim, f"excess_{name}", assumptions=tuple(fin),
                            show={"x": x, "rne": rne, "rd": rd, "ru": ru})
    return Outcome(status, f"RNE to {name} is one of the two directed roundings of every "
                           f"finite f32", cex)


@obligation("relax.excess.one_ulp.bf16")
def excess_bf16(ctx: ProveCtx) -> Outcome:
    """excess: one bf16 ulp around the rounded value holds the unrounded f32 value."""
    return _excess(ctx, "bf16")


@obligation("relax.excess.one_ulp.f16")
def excess_f16(ctx: ProveCtx) -> Outcome:
    """excess: one f16 ulp around the rounded value holds the unrounded f32 value."""
    return _excess(ctx, "f16")


@obligation("relax.arcp.differs.f32", expect="counterexample")
def arcp_differs(ctx: ProveCtx) -> Outcome:
    """arcp: x · (1/y) differs from x / y for some finite f32 (the widening is real)."""
    xs = np.arange(1, 64, dtype=np.float32)
    ys = np.arange(1, 64, dtype=np.float32)
    gx, gy = np.meshgrid(xs, ys)
    with np.errstate(all="ignore"):
        bad = (gx * (np.float32(1) / gy)) != (gx / gy)
    i = np.argwhere(bad)
    if not len(i):
        return Outcome("failed", "no witness among 1..63 x 1..63")
    yi, xi = i[0]
    xv, yv = float(gx[yi, xi]), float(gy[yi, xi])
    x, y = z3.FPVal(xv, z3.Float32()), z3.FPVal(yv, z3.Float32())
    recip = z3.fpMul(_RNE, x, z3.fpDiv(_RNE, z3.FPVal(1.0, z3.Float32()), y))
    div = z3.fpDiv(_RNE, x, y)
    status, cex = ctx.find(z3.Not(z3.fpEQ(recip, div)), "arcp_differs",
                           show={"x": x, "y": y, "x*(1/y)": recip, "x/y": div})
    # Z3 (independent encoding) must agree with numpy on the witness
    if status != "counterexample":
        return Outcome("error", f"numpy says {xv} * (1/{yv}) != {xv}/{yv}; Z3 disagrees")
    return Outcome("counterexample", f"{xv:g} * (1/{yv:g}) != {xv:g} / {yv:g}", cex)
