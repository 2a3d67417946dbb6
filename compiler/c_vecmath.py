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

The CUDA C++ renderer uses it too (``CUDA_MATH``, D519): there ``exp`` of an f32 / bf16 / f16
value is ``tf__expf_v`` (as here), and ``exp`` / ``sigmoid`` / ``silu`` whose result is only
rounded to bf16 / f16 (a narrow operand, or ``Math.within``) are the f32 forms of D279(b) that
the Triton renderer renders: ``h = exp(-|w|/2)``, ``q = h²``; on the GPU ``h`` is
``ex2.approx.ftz.f32`` and the division by ``1 + q`` a multiply by ``rcp.approx.ftz.f32`` (the
Triton GPU forms, D343, whose errors are far inside lemma B's 2^(23-p) ulp32); the host
emulation, which cannot run PTX, computes ``h`` with ``tf__expf_v`` and divides.
Why not a library: SLEEF and libmvec have no f32 ``exp`` GCC inlines into an ``omp simd`` loop
without ``-ffast-math`` (libmvec's ``_ZGV*_expf`` is declared only under fast-math and its
4-ulp documented bound is past the f32 budget of 3); the SLEEF coefficients are used as is.
"""

from __future__ import annotations

__all__ = ["CUDA_MATH", "EXPF_C", "NARROW_DTYPES", "VEC_EXP_DTYPES"]

#: the dtypes whose ``Math(exp)`` ``render_c`` computes with ``tf__expf_v``
VEC_EXP_DTYPES = ("f32", "bf16", "f16")
#: the operand dtypes whose ``exp`` / ``sigmoid`` / ``silu`` the CUDA renderer computes in f32
#: by the narrow forms (``tf__<fn>_nf``, D519); an f32 operand takes them under ``Math.within``
NARROW_DTYPES = ("bf16", "f16")

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

#: the CUDA C++ spelling's f32 math (D519): ``tf__expf_v`` as a device function, and the narrow
#: forms of D279(b) / D343 (the Triton renderer's ``_tf_exp_narrow_gpu`` / ``_tf_sigmoid_narrow_gpu``
#: / ``_tf_silu_narrow_gpu``, instruction for instruction on the GPU)
CUDA_MATH = EXPF_C.replace("static inline float", "TF_FN float") + r"""
/* exp / sigmoid / silu of an f32 w whose result is only rounded to bf16 / f16 (D519; the forms
 * of D279(b)): h = exp(-|w|/2) is normal for |w| < 174, past which every narrow result is 0 / -0
 * already. On the GPU h is ex2.approx.ftz (about 2 ulp32) and 1/(1+q) rcp.approx.ftz (1 ulp32),
 * as the Triton renderer's GPU forms (D343); the host emulation, which has no PTX, uses
 * tf__expf_v and a division. Every error is far inside lemma B's 2^(23-p) ulp32. */
#ifdef TF_HOST_EMULATION
#define TF__HALF_EXP(a) tf__expf_v((a) * 0.5f)
#define TF__OVER_1P(y, q) ((y) / (1.0f + (q)))
#else
TF_FN float tf__ex2_ftz(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
TF_FN float tf__rcp_ftz(float x) { float y; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
#define TF__HALF_EXP(a) tf__ex2_ftz((a) * 0.7213475204444817f)
#define TF__OVER_1P(y, q) ((y) * tf__rcp_ftz(1.0f + (q)))
#endif
TF_FN float tf__exp_nf(float w) { const float h = TF__HALF_EXP(w); return h * h; }
TF_FN float tf__sigmoid_nf(float w)
{
    const float h = TF__HALF_EXP(-fabsf(w));
    const float q = h * h;
    return TF__OVER_1P(w < 0.0f ? q : 1.0f, q);
}
TF_FN float tf__silu_nf(float w)
{
    const float h = TF__HALF_EXP(-fabsf(w));
    const float q = h * h;
    const float y = TF__OVER_1P(w < 0.0f ? (w * h) * h : w, q);
    return w == -((float)INFINITY) ? -0.0f : y;
}
"""
