/* The prelude both C-family spellings share (SIMD C and CUDA C++), after the spelling's own
 * head, which defines TF_FN and the TF__* operators (compiler/render_c.py reads this file). */

#ifndef TF__HAVE_RND_BF16  /* (the CUDA spelling's GPU build has its own, D525) */
/* the f32 value of round-to-bf16 (nonfinite overflow; a NaN keeps its sign) without the 16-bit
 * pattern: tf_bf16_to_f32(tf_f32_to_bf16(x, TF_NONFINITE, 0)) bit for bit */
TF_FN float tf__rnd_bf16(float x)
{
    /* round to nearest even on the signed pattern: for every non-NaN x the carry stops below
     * the sign bit (|x| + 0x8000 <= 0x7F808000), so no absolute value / sign re-insertion */
    const uint32_t u = tf_f32_bits(x);
    const uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    return tf_f32_from_bits(isnan(x) ? ((u & 0x80000000u) | TF_F32_QNAN) : r);
}
#endif

/* NaN-propagating min / max ordering -0 < +0; a NaN gives the positive quiet NaN */
TF_FN float tf__fmin(float a, float b)
{
    const float tie = signbit(a) ? a : b;
    const float r = a < b ? a : (b < a ? b : tie);
    return (isnan(a) || isnan(b)) ? tf_f32_from_bits(TF_F32_QNAN) : r;
}
TF_FN float tf__fmax(float a, float b)
{
    const float tie = signbit(a) ? b : a;
    const float r = a > b ? a : (b > a ? b : tie);
    return (isnan(a) || isnan(b)) ? tf_f32_from_bits(TF_F32_QNAN) : r;
}
TF_FN double tf__dmin(double a, double b)
{
    const double tie = signbit(a) ? a : b;
    const double r = a < b ? a : (b < a ? b : tie);
    return (isnan(a) || isnan(b)) ? tf_f64_from_bits(0x7FF8000000000000ull) : r;
}
TF_FN double tf__dmax(double a, double b)
{
    const double tie = signbit(a) ? b : a;
    const double r = a > b ? a : (b > a ? b : tie);
    return (isnan(a) || isnan(b)) ? tf_f64_from_bits(0x7FF8000000000000ull) : r;
}
/* reduction steps: the first NaN met stays; -0 < +0 (a spelling may define its own first:
 * the CUDA one's are branch-free, D525) */
#ifndef TF__PICKMAX
#define TF__PICKMAX(acc, v) (isnan(acc) ? (acc) : (isnan(v) ? (v) : \
    (((v) > (acc) || ((v) == (acc) && signbit(acc) && !signbit(v))) ? (v) : (acc))))
#define TF__PICKMIN(acc, v) (isnan(acc) ? (acc) : (isnan(v) ? (v) : \
    (((v) < (acc) || ((v) == (acc) && !signbit(acc) && signbit(v))) ? (v) : (acc))))
#endif

/* f64 -> float dtypes, rounded once (semantics.evaluator.math.round_f64_once): a NaN gives the
 * positive quiet NaN */
TF_FN float tf__rf64_f32(double v)
{
    const float r = (float)v;
    return isnan(r) ? tf_f32_from_bits(TF_F32_QNAN) : r;
}
TF_FN float tf__rf64_odd(double v)
{
    const float r = tf__f64_to_f32_odd(v);
    return isnan(r) ? tf_f32_from_bits(TF_F32_QNAN) : r;
}

/* floored integer division and modulo (numpy's): a zero divisor gives 0, MIN / -1 wraps */
#define TF__FLOORDIV(T, UT)                                                                  \
    TF_FN T tf__floordiv_##T(T a, T b)                                               \
    {                                                                                        \
        if (b == 0) return 0;                                                                \
        if (b == -1) return (T)((UT)0 - (UT)a);                                              \
        T q = (T)(a / b);                                                                    \
        if ((T)(a % b) != 0 && ((a < 0) != (b < 0))) q = (T)(q - 1);                         \
        return q;                                                                            \
    }                                                                                        \
    TF_FN T tf__mod_##T(T a, T b)                                                    \
    {                                                                                        \
        if (b == 0 || b == -1) return 0;                                                     \
        T r = (T)(a % b);                                                                    \
        if (r != 0 && ((r < 0) != (b < 0))) r = (T)(r + b);                                  \
        return r;                                                                            \
    }
TF__FLOORDIV(int8_t, uint8_t)
TF__FLOORDIV(int32_t, uint32_t)
TF__FLOORDIV(int64_t, uint64_t)
TF_FN uint8_t tf__floordiv_uint8_t(uint8_t a, uint8_t b) { return b ? a / b : 0; }
TF_FN uint8_t tf__mod_uint8_t(uint8_t a, uint8_t b) { return b ? a % b : 0; }
/* Bitcast: the f32 <-> u32 bit reinterpretation (tf_numerics.h's bit views: memcpy in C,
   __float_as_uint on the device; no conversion, no aliasing UB) */
TF_FN uint32_t tf__bitcast_u32(float v) { return tf_f32_bits(v); }
TF_FN float tf__bitcast_f32(uint32_t u) { return tf_f32_from_bits(u); }

/* the math functions in double (semantics.evaluator.nn's formulas) */
TF_FN double tf__sigmoid64(double w) { return TF__DDIV(1.0, 1.0 + TF_EXP(-w)); }
TF_FN double tf__silu64(double w)
{
    return w == -INFINITY ? -0.0 : TF__DDIV(w, 1.0 + TF_EXP(-w));
}
TF_FN double tf__gelu_tanh64(double w)
{
    const double z = w * (TF__GELU_C0 + TF__GELU_C1 * (w * w));
    const double v = fabs(w) < TF__TINY ? w * 0.5 : TF__DDIV(w, 1.0 + TF_EXP(-z));
    return w == -INFINITY ? -0.0 : v;
}
TF_FN double tf__gelu_none64(double w)
{
    const double v = fabs(w) < TF__TINY ? w * 0.5 : 0.5 * w * TF_ERFC(-w * TF__INV_SQRT2);
    return w == -INFINITY ? -0.0 : v;
}
TF_FN double tf__rsqrt64(double w) { return TF__DDIV(1.0, TF__DSQRT(w)); }
