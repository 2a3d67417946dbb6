"""The Triton backend's prelude: the ``@triton.jit`` helpers every generated module starts with.

``compiler/render_triton.py`` reads this file as text (``PRELUDE``) and puts it first in each
generated module, followed by the generated ``_tf_erfc64`` and the row kernels' helpers; it is a
real module so that tools lint it and tests import it (D481)."""

import triton
import triton.language as tl


@triton.jit
def _tf_widen(code, BITS: tl.constexpr, EBITS: tl.constexpr, MBITS: tl.constexpr,
              BIAS: tl.constexpr, E4M3FN: tl.constexpr, SCALE: tl.constexpr):
    """narrow bits -> f32 (exact; NaN -> the quiet NaN with the source's sign): tf__widen_ieee"""
    c = code.to(tl.uint32)
    if BITS == 16 and EBITS == 8:  # bf16: the upper half of the f32 pattern
        u = c << 16
        r = tl.where((u & 0x7FFFFFFF) > 0x7F800000, (u & 0x80000000) | 0x7FC00000, u)
    else:
        sign = (c >> (BITS - 1)) << 31
        mag = c & ((1 << (BITS - 1)) - 1)
        e = mag >> MBITS
        f = mag & ((1 << MBITS) - 1)
        normal = ((e + (127 - BIAS)) << 23) | (f << (23 - MBITS))
        sub = (f.to(tl.int32).to(tl.float32) * SCALE).to(tl.uint32, bitcast=True)
        r = tl.where(e == 0, sub, normal)
        if E4M3FN:
            r = tl.where(mag == (1 << (BITS - 1)) - 1, 0x7FC00000, r)
        else:
            r = tl.where(e == (1 << EBITS) - 1, tl.where(f != 0, 0x7FC00000, 0x7F800000), r)
        r = r | sign
    return r.to(tl.uint32).to(tl.float32, bitcast=True)


@triton.jit
def _tf_round(x, BITS: tl.constexpr, MBITS: tl.constexpr, BIAS: tl.constexpr,
              MAX_CODE: tl.constexpr, NAN_CODE: tl.constexpr, SAT: tl.constexpr):
    """f32 -> narrow bits, one rounding to nearest even (tf__round_f32, pos_nan = 0)"""
    u = x.to(tl.uint32, bitcast=True)
    SHIFT: tl.constexpr = 23 - MBITS
    EMIN: tl.constexpr = 1 - BIAS
    a = u & 0x7FFFFFFF
    sign = (u >> (32 - BITS)) & (1 << (BITS - 1))
    t = (a + ((1 << (SHIFT - 1)) - 1) + ((a >> SHIFT) & 1)) >> SHIFT
    t = t - ((127 - BIAS) << MBITS)
    if BIAS != 127:
        e = a >> 23
        m = (a & 0x7FFFFF) | tl.where(e != 0, 0x800000, 0).to(tl.uint32)
        s = (EMIN - MBITS + 150) - tl.where(e != 0, e, 1).to(tl.int32)
        s = tl.minimum(tl.maximum(s, 1), 31).to(tl.uint32)
        half = (m * 0 + 1) << (s - 1)
        sub = (m + (half - 1) + ((m >> s) & 1)) >> s
        t = tl.where(a < ((EMIN + 127) << 23), sub, t)
    if SAT:
        t = tl.minimum(t, MAX_CODE)
    else:
        t = tl.minimum(t, MAX_CODE + 1)
    r = tl.where(a > 0x7F800000, sign | NAN_CODE, t | sign)
    if BITS == 16:
        out = r.to(tl.uint16)
    else:
        out = r.to(tl.uint8)
    return out


@triton.jit
def _tf_widen_e8m0(code):
    """f8e8m0 bits -> f32: 2^(code - 127); code 0 is 2^-127 (an f32 subnormal, as bits); 0xFF
    is NaN (tf_f8e8m0_to_f32)"""
    c = code.to(tl.uint32)
    r = tl.where(c == 0xFF, 0x7FC00000, tl.where(c == 0, 0x00400000, c << 23))
    return r.to(tl.uint32).to(tl.float32, bitcast=True)


@triton.jit
def _tf_round_e8m0(x, SAT: tl.constexpr, RND: tl.constexpr):
    """f32 -> f8e8m0 bits (tf_f32_to_f8e8m0): RND 0 nearest (a tie goes up), 1 up, 2 down"""
    u = x.to(tl.uint32, bitcast=True)
    e = (u >> 23) & 0xFF
    f = u & 0x7FFFFF
    if RND == 0:
        inc = tl.where(e != 0, f >= 0x400000, f >= 0x600000).to(tl.uint32)
    elif RND == 1:
        inc = tl.where(e != 0, f != 0, f > 0x400000).to(tl.uint32)
    else:
        inc = e * 0
    code = e + inc
    if SAT:
        code = tl.where(code > 0xFE, 0xFE, code)
    else:
        code = tl.where(code > 0xFE, 0xFF, code)
    bad = ((u >> 31) != 0) | (u == 0) | ((u & 0x7FFFFFFF) > 0x7F800000)
    return tl.where(bad, 0xFF, code).to(tl.uint8)


@triton.jit
def _tf_i64_to_f64_odd(v):
    """i64 -> f64 rounded to odd (tf__i64_to_f64_odd): v = hi 2^32 + lo, Fast2Sum's error"""
    a = (v >> 32).to(tl.int32).to(tl.float64) * 4294967296.0
    lo = v.to(tl.uint32)
    b = (lo ^ 0x80000000).to(tl.int32, bitcast=True).to(tl.float64) + 2147483648.0
    s = a + b
    err = b - (s - a)
    bs = s.to(tl.uint64, bitcast=True)
    bs = bs - ((err != 0.0) & ((err < 0.0) != (s < 0.0))).to(tl.uint64)
    bs = bs | (err != 0.0).to(tl.uint64)
    return bs.to(tl.float64, bitcast=True)


@triton.jit
def _tf_f32_to_f32(x, SAT: tl.constexpr):
    """the f32 'cast': NaN -> the quiet NaN with its sign; saturate: +-inf -> +-max"""
    u = x.to(tl.uint32, bitcast=True)
    a = u & 0x7FFFFFFF
    sign = u & 0x80000000
    r = u
    if SAT:
        r = tl.where(a == 0x7F800000, sign | 0x7F7FFFFF, r)
    r = tl.where(a > 0x7F800000, sign | 0x7FC00000, r)
    return r.to(tl.float32, bitcast=True)


@triton.jit
def _tf_f64_to_f32_odd(d):
    """f64 -> f32 rounded to odd (the carrier of one rounding to a narrower format)"""
    f = d.to(tl.float32)
    fd = f.to(tl.float64)
    b = f.to(tl.uint32, bitcast=True)
    inexact = fd != d
    b = b - (inexact & (tl.abs(fd) > tl.abs(d))).to(tl.uint32)
    b = b | inexact.to(tl.uint32)
    b = tl.where(d != d, 0x7FC00000, b)  # a NaN gives the positive quiet NaN (tf__rf64_odd)
    return b.to(tl.uint32).to(tl.float32, bitcast=True)


@triton.jit
def _tf_rf64_f32(v):
    """f64 -> f32 rounded once; a NaN gives the positive quiet NaN"""
    r = v.to(tl.float32)
    return tl.where(r != r, 0x7FC00000, r.to(tl.uint32, bitcast=True)).to(tl.uint32).to(
        tl.float32, bitcast=True)


@triton.jit
def _tf_qnan_like(x):
    """the positive quiet NaN of x's float type, x's shape"""
    if x.dtype == tl.float64:
        out = tl.full(x.shape, 0x7FF8000000000000, tl.uint64).to(tl.float64, bitcast=True)
    else:
        out = tl.full(x.shape, 0x7FC00000, tl.uint32).to(tl.float32, bitcast=True)
    return out


@triton.jit
def _tf_round_bf16_hw(x):
    """f32 -> bf16 bits on the GPU: cvt.rn.bf16.f32 (to nearest even, overflow to inf,
    subnormals kept); a NaN gives the hardware's canonical NaN 0x7FFF (a NaN's payload and
    sign are no contract; D342)"""
    return x.to(tl.bfloat16).to(tl.uint16, bitcast=True)


@triton.jit
def _tf_neg32(x):
    return (x.to(tl.uint32, bitcast=True) ^ 0x80000000).to(tl.float32, bitcast=True)


@triton.jit
def _tf_abs32(x):
    return (x.to(tl.uint32, bitcast=True) & 0x7FFFFFFF).to(tl.float32, bitcast=True)


@triton.jit
def _tf_neg64(x):
    return (x.to(tl.uint64, bitcast=True) ^ 0x8000000000000000).to(tl.float64, bitcast=True)


@triton.jit
def _tf_abs64(x):
    return (x.to(tl.uint64, bitcast=True) & 0x7FFFFFFFFFFFFFFF).to(tl.float64, bitcast=True)


@triton.jit
def _tf_signbit(x):
    if x.dtype == tl.float64:
        out = (x.to(tl.uint64, bitcast=True) >> 63) != 0
    else:
        out = (x.to(tl.uint32, bitcast=True) >> 31) != 0
    return out


@triton.jit
def _tf_fmax(a, b):
    """NaN-propagating max ordering -0 < +0; a NaN gives the positive quiet NaN"""
    tie = tl.where(_tf_signbit(a), b, a)
    r = tl.where(a > b, a, tl.where(b > a, b, tie))
    nan = (a != a) | (b != b)
    return tl.where(nan, _tf_qnan_like(r), r)


@triton.jit
def _tf_fmin(a, b):
    tie = tl.where(_tf_signbit(a), a, b)
    r = tl.where(a < b, a, tl.where(b < a, b, tie))
    nan = (a != a) | (b != b)
    return tl.where(nan, _tf_qnan_like(r), r)


@triton.jit
def _tf_pickmax(acc, v):
    """a reduction step: the first NaN met stays; -0 < +0"""
    take = (v > acc) | ((v == acc) & _tf_signbit(acc) & (~_tf_signbit(v)))
    return tl.where(acc != acc, acc, tl.where(v != v, v, tl.where(take, v, acc)))


@triton.jit
def _tf_pickmin(acc, v):
    take = (v < acc) | ((v == acc) & (~_tf_signbit(acc)) & _tf_signbit(v))
    return tl.where(acc != acc, acc, tl.where(v != v, v, tl.where(take, v, acc)))


@triton.jit
def _tf_add(a, b):
    """the combine step of float sums (the interpreter's tl.sum is np.sum: -0 lanes give +0)"""
    return a + b


@triton.jit
def _tf_mul(a, b):
    """the combine step of integer products (wrapping: any bracketing gives the same bits)"""
    return a * b


@triton.jit
def _tf_two_sum(a, b):
    """Knuth's TwoSum (semantics.evaluator.nn._two_sum)"""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@triton.jit
def _tf_ceil32(x):
    """ceil without flushing subnormals (tl.ceil flushes them on the GPU)"""
    r = tl.ceil(x)
    r = tl.where((x > 0) & (x < 1.0), 1.0, r)
    return tl.where((x < 0) & (x > -1.0), _tf_neg32(x * 0.0 + 0.0), r)


@triton.jit
def _tf_rint32(x):
    """round half to even (rint): |x| < 2^23 by adding and subtracting 2^23 (exact steps)"""
    a = _tf_abs32(x)
    r = (a + 8388608.0) - 8388608.0
    r = tl.where(a < 8388608.0, r, a)
    s = x.to(tl.uint32, bitcast=True) & 0x80000000
    out = (r.to(tl.uint32, bitcast=True) | s).to(tl.float32, bitcast=True)
    return tl.where(x != x, x, out)


@triton.jit
def _tf_exp64(w):
    return tl.exp(w)


@triton.jit
def _tf_tanh64(w):
    a = tl.abs(w)
    big = 1.0 - 2.0 / (tl.exp(2.0 * a) + 1.0)
    small = a - a * a * a / 3.0
    r = tl.where(a < 0.000244140625, small, big)
    r = tl.where(a > 20.0, 1.0, r)
    r = tl.where(w < 0, -r, r)
    return tl.where(w == 0, w, tl.where(w != w, w, r))
