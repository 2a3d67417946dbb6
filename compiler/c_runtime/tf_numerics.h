/* tf_numerics.h: bit-exact conversions of the tilefoundry numeric contracts, in C.
 *
 * Every routine here is bit-identical to `tilefoundry.semantics.dtypes.cast` / `widen_to_f32`
 * (ARCHITECTURE.md "Numeric contracts"; docs/decisions.md D10-D17, D21, D180-D186), which
 * tests/compiler/test_c_runtime.py checks exhaustively (every 8- and 16-bit pattern) and on the
 * structured + random f32 / integer sets.
 *
 * Rules this file keeps:
 *  - Portable C11, and CUDA C++ under NVRTC (`TF_FN`, below). Tested with GCC. No
 *    `_Float16`, no `__bf16`: every narrow format is handled as its bit pattern in an unsigned
 *    integer, so results do not depend on the target's half-precision support.
 *  - Rounding is integer arithmetic on bit patterns; the only floating-point operations are
 *    exact ones (integer -> f32 / f64 conversions of values that fit, products by powers of two
 *    whose results are normal, one Fast2Sum) and the correctly rounded f64 -> f32 and
 *    int -> f32 conversions, none of which produces or consumes a subnormal whose flushing
 *    would change a result, so a caller that runs with flush-to-zero / denormals-are-zero set
 *    still gets the exact results.
 *  - Compile without fast-math and without FP contraction (`-ffp-contract=off`, and the pragma
 *    below for compilers that honour it). The round-to-nearest-even rounding mode is assumed.
 *  - Every routine is branch-free (ternaries on values that are all computed), so loops that
 *    call them auto-vectorize.
 *
 * Naming: `tf_<src>_to_<dst>`. Narrow formats travel as their bit patterns: bf16 / f16 in
 * uint16_t, fp8e4m3 / fp8e5m2 / f8e8m0 in uint8_t; f32 as float. Mode arguments are meant to be
 * compile-time constants (the renderer writes literals), so each call folds to one variant:
 *  - `saturate`: 0 = overflow "nonfinite", 1 = "saturate" (D11);
 *  - `pos_nan`:  0 = a NaN result carries the source's sign (a cast, D14),
 *                1 = it is the positive quiet NaN (the rounding step of low-precision
 *                    arithmetic, `apply_lowp`, D21);
 *  - `rounding` (f8e8m0 only): TF_RN "nearest" (a tie goes up), TF_RU "up", TF_RD "down" (D12).
 */
#ifndef TF_NUMERICS_H
#define TF_NUMERICS_H

/* One source, two compilers (D208): C (GCC, the SIMD backend and the exhaustive tests) and CUDA
 * C++ (NVRTC, the CUDA backend). `TF_FN` qualifies every routine: `static inline` for C,
 * `static __device__ __forceinline__` for CUDA; the bit views use memcpy in C and CUDA's
 * reinterpreting intrinsics on the device. Nothing else differs: the same integer algorithms
 * run on both, so the CPU tests of this file test the device's conversions too. */
#if defined(__CUDACC__)
#define TF_FN static __device__ __forceinline__
#else
#define TF_FN static inline
#endif

#if defined(__CUDACC_RTC__)
/* NVRTC has no C library headers: the fixed-width types of the CUDA data model */
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#define INT8_MIN (-128)
#define INT8_MAX 127
#define UINT8_MAX 255
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define INT64_MIN (-9223372036854775807ll - 1)
#define INT64_MAX 9223372036854775807ll
#else
#include <stdint.h>
#include <string.h>
#endif

/* NVRTC defines __USE_FAST_MATH__ always: 1 under -use_fast_math */
#if defined(__FAST_MATH__) || defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__ || \
    defined(__USE_FAST_MATH__) && __USE_FAST_MATH__
#error "tf_numerics.h: compile without -ffast-math / -ffinite-math-only / -use_fast_math"
#endif

#if !defined(__CUDACC__)
/* No contraction of a*b+c into an FMA. GCC ignores this standard pragma (it needs the
 * command-line flag -ffp-contract=off, which build.py passes) and would warn about it. NVRTC:
 * the CUDA backend passes --fmad=false. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#pragma STDC FP_CONTRACT OFF
#pragma GCC diagnostic pop
#endif

#define TF_NONFINITE 0
#define TF_SATURATE 1
#define TF_RN 0
#define TF_RU 1
#define TF_RD 2

#define TF_F32_QNAN 0x7FC00000u
#define TF_F32_INF 0x7F800000u
#define TF_F32_MAX 0x7F7FFFFFu

/* ---- bit views --------------------------------------------------------------------------- */
#if defined(__CUDACC__)
TF_FN uint32_t tf_f32_bits(float x) { return __float_as_uint(x); }
TF_FN float tf_f32_from_bits(uint32_t u) { return __uint_as_float(u); }
TF_FN uint64_t tf_f64_bits(double x) { return (uint64_t)__double_as_longlong(x); }
TF_FN double tf_f64_from_bits(uint64_t u) { return __longlong_as_double((long long)u); }
#else
TF_FN uint32_t tf_f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
TF_FN float tf_f32_from_bits(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
TF_FN uint64_t tf_f64_bits(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
TF_FN double tf_f64_from_bits(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }
#endif

/* ---- widening to f32 (exact; NaN -> the quiet NaN with the source's sign, D14) ----------- */

/* An IEEE-like format with `ebits`, `mbits`, `bias`; `e4m3fn`: E4M3FN's specials (no inf,
 * only S.1111.111 is NaN) instead of IEEE's all-ones exponent field. */
TF_FN float tf__widen_ieee(uint32_t code, const int bits, const int ebits,
                                   const int mbits, const int bias, const int e4m3fn)
{
    const uint32_t sign = (code >> (bits - 1)) << 31;
    const uint32_t mag = code & ((1u << (bits - 1)) - 1u);
    const uint32_t e = mag >> mbits;
    const uint32_t f = mag & ((1u << mbits) - 1u);
    const uint32_t emax = (1u << ebits) - 1u;
    const uint32_t normal = ((e + (uint32_t)(127 - bias)) << 23) | (f << (23 - mbits));
    /* subnormal: f * 2^(1 - bias - mbits); the integer and the scale are normal f32 values and
     * the product is exact and normal in f32 (f32's exponent range covers every narrow one) */
    const float scale = tf_f32_from_bits((uint32_t)(127 + 1 - bias - mbits) << 23);
    const uint32_t sub = tf_f32_bits((float)(int32_t)f * scale);
    uint32_t r = e == 0 ? sub : normal;
    if (e4m3fn) {
        r = mag == (1u << (bits - 1)) - 1u ? TF_F32_QNAN : r;
    } else {
        r = e == emax ? (f != 0 ? TF_F32_QNAN : TF_F32_INF) : r;
    }
    return tf_f32_from_bits(r | sign);
}

TF_FN float tf_bf16_to_f32(uint16_t h)
{
    /* a bf16 pattern is the upper half of the f32 pattern of the same value */
    const uint32_t u = (uint32_t)h << 16;
    const uint32_t nan = (u & 0x80000000u) | TF_F32_QNAN;
    return tf_f32_from_bits((u & 0x7FFFFFFFu) > TF_F32_INF ? nan : u);
}

TF_FN float tf_f16_to_f32(uint16_t h) { return tf__widen_ieee(h, 16, 5, 10, 15, 0); }
TF_FN float tf_fp8e4m3_to_f32(uint8_t h) { return tf__widen_ieee(h, 8, 4, 3, 7, 1); }
TF_FN float tf_fp8e5m2_to_f32(uint8_t h) { return tf__widen_ieee(h, 8, 5, 2, 15, 0); }

TF_FN float tf_f8e8m0_to_f32(uint8_t h)
{
    /* 2^(code - 127); code 0 is 2^-127, an f32 subnormal (written as bits, not computed);
     * 0xFF is NaN (the format has no sign: the positive quiet NaN) */
    const uint32_t c = h;
    const uint32_t r = c == 0xFFu ? TF_F32_QNAN : c == 0 ? 0x00400000u : c << 23;
    return tf_f32_from_bits(r);
}

/* ---- f32 -> narrow float (one rounding to nearest even, D10; overflow D11) ---------------- */

/* f32 pattern `u` -> the pattern of an IEEE-like format (bf16, f16, fp8e4m3, fp8e5m2) whose
 * code just above `max_code` is its overflow result (inf, or E4M3FN's NaN). Magnitudes in the
 * destination's normal range round by the bias trick on the f32 pattern (a carry out of the
 * fraction increments the exponent; the unbounded exponent rounds past the largest code);
 * magnitudes below its smallest normal have the fixed quantum 2^(emin - mbits) and round as
 * the integer significand shifted right by a per-element amount. */
TF_FN uint32_t tf__round_f32(uint32_t u, const int bits, const int mbits, const int bias,
                                     const uint32_t max_code, const uint32_t nan_code,
                                     int saturate, int pos_nan)
{
    const int shift = 23 - mbits;
    const int emin = 1 - bias;
    const uint32_t a = u & 0x7FFFFFFFu;
    const uint32_t sign = (u >> (32 - bits)) & (1u << (bits - 1));
    uint32_t t = (a + ((1u << (shift - 1)) - 1u) + ((a >> shift) & 1u)) >> shift;
    t -= (uint32_t)(127 - bias) << mbits; /* wraps below the normal range: replaced next */
    if (bias != 127) { /* a narrower exponent range than f32's: its own subnormals */
        const uint32_t e = a >> 23;
        const uint32_t m = (a & 0x7FFFFFu) | (e != 0 ? 0x800000u : 0u);
        int32_t s = (emin - mbits + 150) - (int32_t)(e != 0 ? e : 1u);
        s = s > 31 ? 31 : s; /* m < 2^24: any shift >= 26 rounds to 0, as 31 does */
        s = s < 1 ? 1 : s;   /* normal-range magnitudes: result unused, keep the shift defined */
        const uint32_t sub = (m + ((1u << (s - 1)) - 1u) + ((m >> s) & 1u)) >> s;
        t = a < ((uint32_t)(emin + 127) << 23) ? sub : t;
    }
    const uint32_t lim = saturate ? max_code : max_code + 1u;
    t = t < lim ? t : lim;
    const uint32_t nan = (pos_nan ? 0u : sign) | nan_code;
    return a > TF_F32_INF ? nan : (t | sign);
}

TF_FN uint16_t tf_f32_to_bf16(float x, int saturate, int pos_nan)
{
    return (uint16_t)tf__round_f32(tf_f32_bits(x), 16, 7, 127, 0x7F7Fu, 0x7FC0u, saturate,
                                   pos_nan);
}

TF_FN uint16_t tf_f32_to_f16(float x, int saturate, int pos_nan)
{
    return (uint16_t)tf__round_f32(tf_f32_bits(x), 16, 10, 15, 0x7BFFu, 0x7E00u, saturate,
                                   pos_nan);
}

TF_FN uint8_t tf_f32_to_fp8e4m3(float x, int saturate, int pos_nan)
{
    return (uint8_t)tf__round_f32(tf_f32_bits(x), 8, 3, 7, 0x7Eu, 0x7Fu, saturate, pos_nan);
}

TF_FN uint8_t tf_f32_to_fp8e5m2(float x, int saturate, int pos_nan)
{
    return (uint8_t)tf__round_f32(tf_f32_bits(x), 8, 2, 15, 0x7Bu, 0x7Eu, saturate, pos_nan);
}

/* f32 -> f32 "cast": the identity, except that NaNs become the canonical quiet NaN and, under
 * saturate, +-inf become +-max finite (D11, D22). */
TF_FN float tf_f32_to_f32(float x, int saturate, int pos_nan)
{
    const uint32_t u = tf_f32_bits(x);
    const uint32_t a = u & 0x7FFFFFFFu;
    const uint32_t sign = u & 0x80000000u;
    const uint32_t nan = (pos_nan ? 0u : sign) | TF_F32_QNAN;
    uint32_t r = (saturate && a == TF_F32_INF) ? (sign | TF_F32_MAX) : u;
    r = a > TF_F32_INF ? nan : r;
    return tf_f32_from_bits(r);
}

/* f32 -> f8e8m0 (D12): 2^e with e = floor(log2 x), plus one when the rounding says so; zero,
 * negative (-0 included) and NaN sources give NaN (0xFF); beyond 2^127 is overflow (NaN, or
 * 2^127 under saturate); below 2^-127 gives 2^-127 in every rounding mode. */
TF_FN uint8_t tf_f32_to_f8e8m0(float x, int saturate, int rounding)
{
    const uint32_t u = tf_f32_bits(x);
    const uint32_t e = (u >> 23) & 0xFFu;
    const uint32_t f = u & 0x7FFFFFu;
    /* normals: x = (1 + f/2^23) 2^(e-127), code e (+1). f32 subnormals: x = f 2^-149; those
     * in [2^-127, 2^-126) are (f / 2^22) 2^-127, code 0 (+1); smaller ones clamp to code 0. */
    const uint32_t up_n = e != 0 ? (uint32_t)(f >= 0x400000u) : (uint32_t)(f >= 0x600000u);
    const uint32_t up_u = e != 0 ? (uint32_t)(f != 0) : (uint32_t)(f > 0x400000u);
    const uint32_t inc = rounding == TF_RN ? up_n : rounding == TF_RU ? up_u : 0u;
    uint32_t code = e + inc; /* +inf: 255 -> overflow */
    code = code > 0xFEu ? (saturate ? 0xFEu : 0xFFu) : code;
    const int bad = (u >> 31) != 0 || u == 0 || (u & 0x7FFFFFFFu) > TF_F32_INF;
    return (uint8_t)(bad ? 0xFFu : code);
}

/* ---- f32 -> integer (D16) ---------------------------------------------------------------- */
/* Truncation toward zero. NaN, +-inf and sources whose truncation lies outside the destination
 * are unspecified by the contract; these routines write 0 there, as the reference does. The
 * bounds are exact f32 values: every f32 in (lo, hi) truncates into range and none outside. */
TF_FN int8_t tf_f32_to_i8(float x)
{
    const int ok = x > -129.0f && x < 128.0f;
    return (int8_t)(int32_t)(ok ? x : 0.0f);
}

TF_FN uint8_t tf_f32_to_u8(float x)
{
    const int ok = x > -1.0f && x < 256.0f;
    return (uint8_t)(int32_t)(ok ? x : 0.0f);
}

TF_FN int32_t tf_f32_to_i32(float x)
{
    const int ok = x >= -2147483648.0f && x < 2147483648.0f;
    return (int32_t)(ok ? x : 0.0f);
}

TF_FN int64_t tf_f32_to_i64(float x)
{
    const int ok = x >= -9223372036854775808.0f && x < 9223372036854775808.0f;
    return (int64_t)(ok ? x : 0.0f);
}

/* ---- integer -> float (one rounding from the exact integer, D15) ------------------------- */
/* Round-to-odd is the tool: rounding the exact value to odd at precision q >= p + 2 and then to
 * nearest even at precision p equals one rounding to nearest (and one directed rounding for
 * p + 1 <= q), so f32 (24 bits) may carry an integer to any narrower format, provided it was
 * rounded to odd, and f64 (53 bits) may carry an i64 to f32. */

/* The f64 `d` rounded to odd at f32 precision (|d| well inside f32's normal range or 0). */
TF_FN float tf__f64_to_f32_odd(double d)
{
    const float f = (float)d; /* round to nearest even */
    const double fd = (double)f;
    uint32_t b = tf_f32_bits(f);
    b -= (uint32_t)(fd != d && (fd < 0.0 ? -fd : fd) > (d < 0.0 ? -d : d)); /* toward zero */
    b |= (uint32_t)(fd != d);                                              /* then odd */
    return tf_f32_from_bits(b);
}

/* The i64 `v` rounded to odd at f64 precision: v = hi 2^32 + lo, both parts exact in f64;
 * s = hi 2^32 + lo rounded once, and Fast2Sum (|hi 2^32| >= lo unless hi = 0) gives the exact
 * error err = v - s. */
TF_FN double tf__i64_to_f64_odd(int64_t v)
{
    const double a = (double)(int32_t)(v >> 32) * 4294967296.0;
    const uint32_t lo = (uint32_t)v;
    const double b = (double)(int32_t)(lo ^ 0x80000000u) + 2147483648.0; /* lo, exactly */
    const double s = a + b;
    const double err = b - (s - a);
    uint64_t bs = tf_f64_bits(s);
    /* |v| < |s| when err has the sign opposite to s (s != 0 whenever err != 0) */
    bs -= (uint64_t)(err != 0.0 && ((err < 0.0) != (s < 0.0)));
    bs |= (uint64_t)(err != 0.0);
    return tf_f64_from_bits(bs);
}

/* i32 / i64 -> f32, rounded once (to nearest even) */
TF_FN float tf_i32_to_f32(int32_t v) { return (float)(double)v; }
TF_FN float tf_i64_to_f32(int64_t v) { return (float)tf__i64_to_f64_odd(v); }

/* i32 / i64 rounded to odd at f32 precision: the carrier of an integer to a narrower format */
TF_FN float tf_i32_to_f32_odd(int32_t v) { return tf__f64_to_f32_odd((double)v); }
TF_FN float tf_i64_to_f32_odd(int64_t v)
{
    return tf__f64_to_f32_odd(tf__i64_to_f64_odd(v));
}

/* an 8-bit integer (i8 / u8) is exact in f32, so its odd rounding is the plain conversion; a
 * carrier of its own (not i32's, through f64) lets GCC vectorize the i8 loops on AVX-512 FP16
 * targets, where the i32 route's mixed-width compare masks are not converted (D545) */
TF_FN float tf_small_to_f32(int32_t v) { return (float)v; }
TF_FN float tf_small_to_f32_odd(int32_t v) { return (float)v; }

#define TF__INT_TO_NARROW(IT, SRC)                                                                \
    TF_FN uint16_t tf_##SRC##_to_bf16(IT v, int saturate)                                 \
    {                                                                                             \
        return tf_f32_to_bf16(tf_##SRC##_to_f32_odd(v), saturate, 0);                             \
    }                                                                                             \
    TF_FN uint16_t tf_##SRC##_to_f16(IT v, int saturate)                                  \
    {                                                                                             \
        return tf_f32_to_f16(tf_##SRC##_to_f32_odd(v), saturate, 0);                              \
    }                                                                                             \
    TF_FN uint8_t tf_##SRC##_to_fp8e4m3(IT v, int saturate)                               \
    {                                                                                             \
        return tf_f32_to_fp8e4m3(tf_##SRC##_to_f32_odd(v), saturate, 0);                          \
    }                                                                                             \
    TF_FN uint8_t tf_##SRC##_to_fp8e5m2(IT v, int saturate)                               \
    {                                                                                             \
        return tf_f32_to_fp8e5m2(tf_##SRC##_to_f32_odd(v), saturate, 0);                          \
    }                                                                                             \
    TF_FN uint8_t tf_##SRC##_to_f8e8m0(IT v, int saturate, int rounding)                  \
    {                                                                                             \
        return tf_f32_to_f8e8m0(tf_##SRC##_to_f32_odd(v), saturate, rounding);                    \
    }

TF__INT_TO_NARROW(int32_t, i32)
TF__INT_TO_NARROW(int32_t, small)
TF__INT_TO_NARROW(int64_t, i64)
#undef TF__INT_TO_NARROW

#endif /* TF_NUMERICS_H */
