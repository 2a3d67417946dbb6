/* tf_numerics.c: array loops over the conversions of tf_numerics.h, exported for ctypes
 * (compiler/c_runtime/convert.py) and for the tests. The SIMD renderer calls the inline scalar
 * routines of the header inside its own loops; these loops are the same pattern, one
 * conversion per loop, so `-fopt-info-vec` on this file shows which conversions vectorize.
 *
 * Every loop: `void tfl_<name>(const S *restrict x, D *restrict y, int64_t n)`, y[i] = f(x[i]).
 * Symbols (see convert.py for the mapping from dtypes and modes):
 *   tfl_widen_<bf16|f16|fp8e4m3|fp8e5m2|f8e8m0>                    narrow bits -> f32
 *   tfl_f32_to_<f32|bf16|f16|fp8e4m3|fp8e5m2>_<nonfinite|saturate>   a cast (NaN keeps its sign)
 *   tfl_f32_to_<...>_<nonfinite|saturate>_pnan                     the rounding step of
 *                                                                   low-precision arithmetic
 *   tfl_f32_to_f8e8m0_<nonfinite|saturate>_<nearest|up|down>
 *   tfl_f32_to_<i8|u8|i32|i64>
 *   tfl_<i8|u8|i32|i64>_to_<f32|bf16|f16|fp8e4m3|fp8e5m2>_<nonfinite|saturate>
 *   tfl_<i8|u8|i32|i64>_to_f8e8m0_<nonfinite|saturate>_<nearest|up|down>
 */
#include "tf_numerics.h"

/* A unit that defines TF_LOOP first gets the same conversions as other loops: the CUDA unit
 * (compiler/cuda_numerics.py) makes each one a __global__ kernel of one element a thread. */
#ifndef TF_LOOP
#define TF_LOOP(NAME, S, D, EXPR)                                                                 \
    void tfl_##NAME(const S *restrict x, D *restrict y, int64_t n);                               \
    void tfl_##NAME(const S *restrict x, D *restrict y, int64_t n)                                \
    {                                                                                             \
        for (int64_t i = 0; i < n; ++i) {                                                         \
            const S v = x[i];                                                                     \
            y[i] = (EXPR);                                                                        \
        }                                                                                         \
    }
#endif

/* ---- widening ---------------------------------------------------------------------------- */
TF_LOOP(widen_bf16, uint16_t, float, tf_bf16_to_f32(v))
TF_LOOP(widen_f16, uint16_t, float, tf_f16_to_f32(v))
TF_LOOP(widen_fp8e4m3, uint8_t, float, tf_fp8e4m3_to_f32(v))
TF_LOOP(widen_fp8e5m2, uint8_t, float, tf_fp8e5m2_to_f32(v))
TF_LOOP(widen_f8e8m0, uint8_t, float, tf_f8e8m0_to_f32(v))

/* ---- f32 -> float formats ------------------------------------------------------------------ */
#define TF_ROUND_LOOPS(DST, D)                                                                    \
    TF_LOOP(f32_to_##DST##_nonfinite, float, D, tf_f32_to_##DST(v, TF_NONFINITE, 0))              \
    TF_LOOP(f32_to_##DST##_saturate, float, D, tf_f32_to_##DST(v, TF_SATURATE, 0))                \
    TF_LOOP(f32_to_##DST##_nonfinite_pnan, float, D, tf_f32_to_##DST(v, TF_NONFINITE, 1))         \
    TF_LOOP(f32_to_##DST##_saturate_pnan, float, D, tf_f32_to_##DST(v, TF_SATURATE, 1))

TF_ROUND_LOOPS(f32, float)
TF_ROUND_LOOPS(bf16, uint16_t)
TF_ROUND_LOOPS(f16, uint16_t)
TF_ROUND_LOOPS(fp8e4m3, uint8_t)
TF_ROUND_LOOPS(fp8e5m2, uint8_t)

#define TF_E8M0_LOOPS(SRC, S, CONV)                                                               \
    TF_LOOP(SRC##_to_f8e8m0_nonfinite_nearest, S, uint8_t,                                        \
            tf_f32_to_f8e8m0(CONV(v), TF_NONFINITE, TF_RN))                                       \
    TF_LOOP(SRC##_to_f8e8m0_nonfinite_up, S, uint8_t,                                             \
            tf_f32_to_f8e8m0(CONV(v), TF_NONFINITE, TF_RU))                                       \
    TF_LOOP(SRC##_to_f8e8m0_nonfinite_down, S, uint8_t,                                           \
            tf_f32_to_f8e8m0(CONV(v), TF_NONFINITE, TF_RD))                                       \
    TF_LOOP(SRC##_to_f8e8m0_saturate_nearest, S, uint8_t,                                         \
            tf_f32_to_f8e8m0(CONV(v), TF_SATURATE, TF_RN))                                        \
    TF_LOOP(SRC##_to_f8e8m0_saturate_up, S, uint8_t,                                              \
            tf_f32_to_f8e8m0(CONV(v), TF_SATURATE, TF_RU))                                        \
    TF_LOOP(SRC##_to_f8e8m0_saturate_down, S, uint8_t,                                            \
            tf_f32_to_f8e8m0(CONV(v), TF_SATURATE, TF_RD))

#define TF_ID(v) (v)
TF_E8M0_LOOPS(f32, float, TF_ID)

/* ---- f32 -> integers ----------------------------------------------------------------------- */
TF_LOOP(f32_to_i8, float, int8_t, tf_f32_to_i8(v))
TF_LOOP(f32_to_u8, float, uint8_t, tf_f32_to_u8(v))
TF_LOOP(f32_to_i32, float, int32_t, tf_f32_to_i32(v))
TF_LOOP(f32_to_i64, float, int64_t, tf_f32_to_i64(v))

/* ---- integers -> float formats ------------------------------------------------------------ */
/* i8 / u8 go through f32 (exact there: the `small` carrier, D545). f32 as a destination
 * needs no overflow mode (every integer is finite in f32); both names exist for uniformity. */
#define TF_INT_LOOPS(SRC, S, CARRIER)                                                             \
    TF_LOOP(SRC##_to_f32_nonfinite, S, float, tf_##CARRIER##_to_f32(v))                           \
    TF_LOOP(SRC##_to_f32_saturate, S, float, tf_##CARRIER##_to_f32(v))                            \
    TF_LOOP(SRC##_to_bf16_nonfinite, S, uint16_t, tf_##CARRIER##_to_bf16(v, TF_NONFINITE))        \
    TF_LOOP(SRC##_to_bf16_saturate, S, uint16_t, tf_##CARRIER##_to_bf16(v, TF_SATURATE))          \
    TF_LOOP(SRC##_to_f16_nonfinite, S, uint16_t, tf_##CARRIER##_to_f16(v, TF_NONFINITE))          \
    TF_LOOP(SRC##_to_f16_saturate, S, uint16_t, tf_##CARRIER##_to_f16(v, TF_SATURATE))            \
    TF_LOOP(SRC##_to_fp8e4m3_nonfinite, S, uint8_t, tf_##CARRIER##_to_fp8e4m3(v, TF_NONFINITE))   \
    TF_LOOP(SRC##_to_fp8e4m3_saturate, S, uint8_t, tf_##CARRIER##_to_fp8e4m3(v, TF_SATURATE))     \
    TF_LOOP(SRC##_to_fp8e5m2_nonfinite, S, uint8_t, tf_##CARRIER##_to_fp8e5m2(v, TF_NONFINITE))   \
    TF_LOOP(SRC##_to_fp8e5m2_saturate, S, uint8_t, tf_##CARRIER##_to_fp8e5m2(v, TF_SATURATE))     \
    TF_E8M0_LOOPS(SRC, S, tf_##CARRIER##_to_f32_odd)

TF_INT_LOOPS(i8, int8_t, small)
TF_INT_LOOPS(u8, uint8_t, small)
TF_INT_LOOPS(i32, int32_t, i32)
TF_INT_LOOPS(i64, int64_t, i64)
