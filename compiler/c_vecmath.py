"""Vectorizable f32 math for the SIMD C renderer (D400): an ``exp`` GCC turns into SIMD code.

``render_c`` used to compute every math function as libm's double function (libmvec's vector
variant where glibc has one) rounded once. For ``exp`` of an f32 value that costs an f64
conversion both ways and an f64 vector call per element; the softmax row kernel spent most of
its time there. ``EXPF_C`` is a branch-free f32 ``exp`` of plain arithmetic, integer bit
operations and selects only, so an ``omp simd`` loop that inlines it vectorizes with no call:

* clamp x to [-104, 89] (a NaN compares false and becomes -104; its result is replaced at the
  end); below -104 every result rounds to +0 (exp(-104) < 2^-150), above 88.73 every result
  overflows to +inf;
* ``k = rint(x·log2 e)``, ``r = (x − k·ln2_hi) − k·ln2_lo`` (Cody–Waite: ``ln2_hi`` has 15
  significant bits, so ``k·ln2_hi`` is exact for |k| <= 151 and the subtraction is exact by
  Sterbenz), |r| <= 0.347;
* ``exp(r) ≈ 1 + (r + r²·P(r))``, P the degree-5 minimax polynomial of SLEEF's ``expf``
  (public domain coefficients, ``sleef/src/libm/sleefsp.c``'s ``xexpf``), evaluated by Horner
  without FMA (the build turns contraction off);
* ``2^k`` applied as two exact power-of-two factors ``2^⌊k/2⌋ · 2^(k−⌊k/2⌋)`` (each factor a
  normal f32 built from its exponent bits), so a result in the subnormal range is rounded
  once, by the last multiply, and +inf comes out of the last multiply too;
* a NaN argument gives the positive quiet NaN (``tf__rf64_f32``'s NaN, as before).

Error (``tests/compiler/test_c_vecmath.py``): at most 1 ulp from the reference's correctly
rounded value on every f32 input tested (a seeded sample of 2^22 arguments over the whole
finite range that matters, every power of two, the overflow and underflow thresholds and
their neighbours, ±0, ±inf, NaN) — the f32 budget of ``exp`` is 3 ulp (docs/contracts.md);
for bf16 / f16 arguments widened to f32 and the result rounded back, every one of the 65,536
patterns of each is within the 1-ulp budget (exhaustive). ``render_c`` uses it for ``Math(exp)``
of f32, bf16 and f16 values and for the f32 ``exp`` of a narrow softmax (``Math.within``,
lemma B of ``semantics/ulp.py``: any f32 error below 2^(23−p) ulp32 is admitted there).

Only the C spelling uses it: the CUDA C++ renderer shares ``render_c.SHARED_PRELUDE``, not this.
Why not a library: SLEEF and libmvec have no f32 ``exp`` GCC inlines into an ``omp simd`` loop
without ``-ffast-math`` (libmvec's ``_ZGV*_expf`` is declared only under fast-math and its
4-ulp documented bound is past the f32 budget of 3); the SLEEF coefficients are used as is.
"""

from __future__ import annotations

__all__ = ["EXPF_C", "VEC_EXP_DTYPES"]

#: the dtypes whose ``Math(exp)`` ``render_c`` computes with ``tf__expf_v``
VEC_EXP_DTYPES = ("f32", "bf16", "f16")

EXPF_C = r"""
/* exp of an f32 value, branch-free so that omp simd loops vectorize it (D400,
 * compiler/c_vecmath.py): Cody-Waite reduction, SLEEF's xexpf polynomial, 2^k as two exact
 * factors (one rounding in the subnormal range); NaN -> the positive quiet NaN */
static inline float tf__expf_v(float x)
{
    /* clamped to [-104, 89]; a NaN compares false and becomes -104 (its result is replaced by
     * the quiet NaN below), so k is always a small integer */
    float xc = x > -104.0f ? x : -104.0f;
    xc = xc < 89.0f ? xc : 89.0f;
    const float kf = rintf(xc * 1.44269502162933349609375f);
    const float r = (xc - kf * 0.693145751953125f) - kf * 1.428606765330187045e-06f;
    float u = 0.000198527617612853646278381f;
    u = u * r + 0.00139304355252534151077271f;
    u = u * r + 0.00833336077630519866943359f;
    u = u * r + 0.0416664853692054748535156f;
    u = u * r + 0.166666671633720397949219f;
    u = u * r + 0.5f;
    u = 1.0f + (r + (r * r) * u);
    const int32_t k = (int32_t)kf;
    const int32_t k1 = k >> 1;
    const float s1 = tf_f32_from_bits((uint32_t)(k1 + 127) << 23);
    const float s2 = tf_f32_from_bits((uint32_t)(k - k1 + 127) << 23);
    const float v = (u * s1) * s2;
    return isnan(x) ? tf_f32_from_bits(TF_F32_QNAN) : v;
}
"""
