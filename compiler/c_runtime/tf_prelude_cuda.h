/* The CUDA C++ spelling's head and prelude (compiler/render_cuda.py reads this file). */
/* CUDA C++ for NVRTC: no C library headers; tf_numerics.h is compiled as __device__ code
 * (TF_FN). Build with --fmad=false and without -use_fast_math (tf_numerics.h refuses it). */
#include "tf_numerics.h"
#ifndef INFINITY
#define INFINITY __uint_as_float(0x7F800000u)
#endif
/* explicit round-to-nearest division and square root (never the approximate ones) */
#define TF__DDIV(a, b) __ddiv_rn((a), (b))
#define TF__DSQRT(a) __dsqrt_rn(a)
/* CUDA's double-precision math library (the f32 results are rounded once from double) */
#define TF_EXP exp
#define TF_LOG log
#define TF_EXP2 exp2
#define TF_LOG2 log2
#define TF_TANH tanh
#define TF_ERFC erfc
/* the block mapping (D276): a kernel body is phases that every thread of the block runs, split
 * by barriers; values of whole tiles are per-thread arrays indexed by unrolled loops (registers)
 * or shared arrays. The host emulation (cuda_backend.host_source) defines these first: there a
 * phase is a loop over the block's threads. */
#ifndef TF_PHASE_BEGIN
#define TF_PHASE_BEGIN {
#define TF_PHASE_END }
#define TF_SYNC __syncthreads();
#define TF_SYNCWARP __syncwarp();
#define TF_SHARED __shared__
#define TF_REG(type, name, threads, slots) type name[slots]
#define TF_R(name) (name)
#endif

/* the spelling's reduction steps and GPU conversions, before the prelude both C-family spellings
 * share, which defines what this file has not (D525) */

/* max / min reduction steps without branches (D525): fmax / fmin order every pair of numbers
 * but may take either zero of +-0, which the pattern's and (max) / or (min) settles (-0 < +0; an
 * equal pair of other numbers has one pattern); a NaN operand gives a NaN (a + v: which NaN is
 * no contract, D342), where the shared prelude's form keeps the first NaN met through branches
 * (nvcc made each step two to four branches, a row kernel's max ~15 instructions a lane) */
TF_FN float tf__pick(float a, float v, bool mx)
{
    const uint32_t z = mx ? (tf_f32_bits(a) & tf_f32_bits(v)) : (tf_f32_bits(a) | tf_f32_bits(v));
    const float r = a == v ? tf_f32_from_bits(z) : (mx ? fmaxf(a, v) : fminf(a, v));
    return (isnan(a) || isnan(v)) ? a + v : r;
}
TF_FN double tf__pick(double a, double v, bool mx)
{
    const uint64_t z = mx ? (tf_f64_bits(a) & tf_f64_bits(v)) : (tf_f64_bits(a) | tf_f64_bits(v));
    const double r = a == v ? tf_f64_from_bits(z) : (mx ? fmax(a, v) : fmin(a, v));
    return (isnan(a) || isnan(v)) ? a + v : r;
}
#define TF__PICKMAX(acc, v) tf__pick((acc), (v), true)
#define TF__PICKMIN(acc, v) tf__pick((acc), (v), false)
/* the max step of sign-clear f32 values (|x|, an abs_max) folded from -inf: their patterns
 * order as int32 (+0 < subnormals < normals < inf < NaNs; -inf negative), one integer max
 * instead of tf__pick; which NaN wins is no contract (D525) */
TF_FN float tf__max_nonneg(float a, float v)
{
    const int32_t x = (int32_t)tf_f32_bits(a), y = (int32_t)tf_f32_bits(v);
    return tf_f32_from_bits((uint32_t)(x > y ? x : y));
}
/* an f32 max / min as ordered-integer keys (the row mapping's folds from the identity): the
 * key u ^ ((u >> 31) & 0x7FFFFFFF) is monotonic in the float order with -0 < +0 and its own
 * inverse; a NaN of either sign is the extreme key (INT32_MAX for max, INT32_MIN for min), which
 * no number's key is, so a NaN lane wins and unkeys to the quiet NaN. The keys travel in f32
 * registers as bit patterns (moves and shuffles; no float operation reads them) (D525) */
TF_FN uint32_t tf__key_bits(float x)
{
    const uint32_t u = tf_f32_bits(x);
    return u ^ ((uint32_t)((int32_t)u >> 31) & 0x7FFFFFFFu);
}
TF_FN float tf__key_max(float x) { return tf_f32_from_bits(isnan(x) ? 0x7FFFFFFFu : tf__key_bits(x)); }
TF_FN float tf__key_min(float x) { return tf_f32_from_bits(isnan(x) ? 0x80000000u : tf__key_bits(x)); }
TF_FN float tf__kstep_max(float a, float v)
{
    const int32_t x = (int32_t)tf_f32_bits(a), y = (int32_t)tf_f32_bits(v);
    return tf_f32_from_bits((uint32_t)(x > y ? x : y));
}
TF_FN float tf__kstep_min(float a, float v)
{
    const int32_t x = (int32_t)tf_f32_bits(a), y = (int32_t)tf_f32_bits(v);
    return tf_f32_from_bits((uint32_t)(x < y ? x : y));
}
TF_FN float tf__unkey_max(float k)
{
    return tf_f32_bits(k) == 0x7FFFFFFFu ? tf_f32_from_bits(TF_F32_QNAN)
                                          : tf_f32_from_bits(tf__key_bits(k));
}
TF_FN float tf__unkey_min(float k)
{
    return tf_f32_bits(k) == 0x80000000u ? tf_f32_from_bits(TF_F32_QNAN)
                                          : tf_f32_from_bits(tf__key_bits(k));
}
/* on the GPU (sm_80 on) a value rounded to bf16 inside a kernel (a kernel-IR Round, nonfinite
 * overflow) is the hardware conversion cvt.rn.bf16.f32, as the Triton renderer's (D279(c), D342:
 * a NaN becomes the canonical 0x7FFF, whose sign and payload are no contract); the host
 * emulation keeps the integer algorithm (D525) */
#if !defined(TF_HOST_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TF__HAVE_RND_BF16
TF_FN float tf__rnd_bf16(float x)
{
    uint16_t h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return tf_f32_from_bits((uint32_t)h << 16);
}
#define TF__RN_BF16(x) tf__rn_bf16(x)
TF_FN uint16_t tf__rn_bf16(float x)
{
    uint16_t h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return h;
}
#else
#define TF__RN_BF16(x) tf_f32_to_bf16((x), TF_NONFINITE, 0)
#endif
/* a bf16 value widened inside a kernel (a kernel-IR Widen): on the GPU the exact conversion,
 * a shift, whose NaN keeps its payload, as the Triton renderer's (D279(c): a Widen feeds
 * arithmetic, comparisons, reductions and Rounds, never a result the program shows as is, and a
 * NaN's payload is no contract); the host emulation keeps tf_bf16_to_f32 (D525) */
#if !defined(TF_HOST_EMULATION) && defined(__CUDA_ARCH__)
#define TF__WIDEN_BF16(h) tf_f32_from_bits((uint32_t)(h) << 16)
#else
#define TF__WIDEN_BF16(h) tf_bf16_to_f32(h)
#endif
