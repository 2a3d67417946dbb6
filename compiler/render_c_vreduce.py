"""Interleaved f32 row reductions as GCC vector code (the SIMD C renderer, D401).

``render_c.KernelC.emit_reduce`` folds an order-free reduction over one contiguous axis into
eight interleaved accumulators (accumulator ``j`` takes lanes ``j, j + 8, j + 16, ...`` in
order) combined by a balanced tree. Written as scalar C, the float max / min step
(``TF__PICKMAX``: the first NaN met stays, −0 < +0) is a chain of conditionals that GCC 12
neither if-converts nor vectorizes inside the unrolled eight-lane step ("control flow in
loop"), and the sum's step is held in memory by the accumulation barrier (D221): a softmax row's
max ran one lane at a time.

``vector_loop`` renders the same fold with the eight accumulators as the eight lanes of one GCC
vector (``vector_size(32)``): lane ``j`` of the vector is accumulator ``j`` and takes the same
lanes in the same order with the same step, so every result is bit for bit the scalar form's
(``tests/compiler/test_c_vreduce.py`` compares the two on rows with NaNs of both signs, signed
zeros and infinities). The max / min step is the same selection written with lane masks:
``take = ¬isnan(acc) ∧ (isnan(v) ∨ v > acc ∨ (v = acc ∧ acc is −0-signed ∧ v is not))``.
The tail lanes and the tree stay the scalar code of ``emit_reduce``.

For max / min / abs_max the loop first runs a NaN-free fast path: each f32 pattern mapped to its
ordered-integer key (``u ^ ((u >> 31) & 0x7FFFFFFF)``, monotonic in the float order with
−0 < +0 for every non-NaN value), an integer max / min per lane (one-cycle latency, where the
exact step is a chain of four), and a NaN flag per lane. When the row holds no NaN each
accumulator's value is the unique largest (smallest) key of its lanes and seed, which is what
the exact fold gives; when it holds one, the exact fold runs from the seeded accumulators.

Used for f32 ``sum`` / ``max`` / ``min`` / ``abs_max`` without a mask; everything else keeps the
scalar form. GCC vector extensions (not intrinsics) keep it portable to any GCC / clang target;
the CUDA spelling does not use it.
"""

from __future__ import annotations

__all__ = ["VREDUCE_C", "vector_loop", "vectorizable"]

#: the C helpers (in the SIMD C prelude after ``tf_numerics.h``)
VREDUCE_C = r"""
/* eight f32 accumulators as one vector (compiler/render_c_vreduce.py, D401) */
typedef float tf__v8f __attribute__((vector_size(32)));
typedef int32_t tf__v8i __attribute__((vector_size(32)));
static inline tf__v8f tf__v8_load(const float *p) { tf__v8f v; memcpy(&v, p, 32); return v; }
static inline void tf__v8_store(float *p, tf__v8f v) { memcpy(p, &v, 32); }
static inline tf__v8i tf__v8_bits(tf__v8f v) { tf__v8i u; memcpy(&u, &v, 32); return u; }
static inline tf__v8f tf__v8_float(tf__v8i u) { tf__v8f v; memcpy(&v, &u, 32); return v; }
static inline tf__v8f tf__v8_abs(tf__v8f v)
{
    const tf__v8i m = {0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF,
                       0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF};
    return tf__v8_float(tf__v8_bits(v) & m);
}
/* the ordered-integer key of an f32 pattern: monotonic in the float order with -0 < +0 for
 * every non-NaN value (its own inverse) */
static inline tf__v8i tf__v8_key(tf__v8i u)
{
    const tf__v8i m = {0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF,
                       0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF};
    return u ^ ((u >> 31) & m);
}
static inline tf__v8i tf__v8_imax(tf__v8i a, tf__v8i b, const int is_max)
{
    const tf__v8i t = is_max ? (b > a) : (b < a);
    return (b & t) | (a & ~t);
}
/* TF__PICKMAX (is_max) / TF__PICKMIN lane by lane: the first NaN met stays; -0 < +0 */
static inline tf__v8f tf__v8_pick(tf__v8f acc, tf__v8f v, const int is_max)
{
    const tf__v8i ai = tf__v8_bits(acc), vi = tf__v8_bits(v);
    const tf__v8i zero = {0, 0, 0, 0, 0, 0, 0, 0};
    const tf__v8i an = acc != acc, vn = v != v;
    const tf__v8i better = is_max ? ((v > acc) | ((v == acc) & (ai < zero) & (vi >= zero)))
                                  : ((v < acc) | ((v == acc) & (ai >= zero) & (vi < zero)));
    const tf__v8i take = ~an & (vn | better);
    return tf__v8_float((take & vi) | (~take & ai));
}
"""

_STEP = {"sum": "{acc} + {v}", "max": "tf__v8_pick({acc}, {v}, 1)",
         "min": "tf__v8_pick({acc}, {v}, 0)", "abs_max": "tf__v8_pick({acc}, tf__v8_abs({v}), 1)"}


def vectorizable(dt: str, kind: str, lane_mask: bool, accumulators: int) -> bool:
    """Whether ``vector_loop`` renders this interleaved reduction (``lane_mask``: a mask that
    varies along the reduced axis, which keeps the scalar form)."""
    return dt == "f32" and kind in _STEP and not lane_mask and accumulators == 8


def vector_loop(acc: str, kind: str, lane: str, d: int, whole: int, ind: str,
                row_mask: str | None = None, anyv: str | None = None) -> list[str]:
    """C lines folding lanes ``[0, whole)`` (a multiple of 8) of the reduced axis ``c{d}`` into
    the accumulator array ``acc`` (8 floats, already seeded). ``lane``: the C lvalue of the
    operand at ``c{d}`` (the axis is contiguous in the operand's array). ``row_mask``: a mask
    constant along the axis (the row is masked out or in as a whole): a masked-out row folds
    nothing, which is what folding the identity into every accumulator gives (max / min keep
    the accumulator, a sum adds -0); ``anyv``: the no-valid-lane flag set when it is in."""
    va = f"{acc}_v"
    step = _STEP[kind].format(acc=va, v=f"tf__v8_load(&{lane})")
    head = f"{ind}if ({row_mask}) {{" if row_mask else f"{ind}{{"
    lines = [head]
    if row_mask and anyv:
        lines.append(f"{ind}    {anyv} = 1;")
    lines.append(f"{ind}    tf__v8f {va} = tf__v8_load({acc});")
    exact = [f"{ind}    for (int64_t c{d} = 0; c{d} < {whole}ll; c{d} += 8)",
             f"{ind}        {va} = {step};"]
    if kind == "sum":
        lines += exact
    else:  # the NaN-free fast path, the exact fold only for a row holding a NaN
        is_max = int(kind != "min")
        v = f"tf__v8_load(&{lane})" if kind != "abs_max" else f"tf__v8_abs(tf__v8_load(&{lane}))"
        lines += [f"{ind}    tf__v8i {va}k = tf__v8_key(tf__v8_bits({va})), {va}n = {va}k ^ {va}k;",
                  f"{ind}    for (int64_t c{d} = 0; c{d} < {whole}ll; c{d} += 8) {{",
                  f"{ind}        const tf__v8f x = {v};",
                  f"{ind}        {va}n |= (x != x);",
                  f"{ind}        {va}k = tf__v8_imax({va}k, tf__v8_key(tf__v8_bits(x)), {is_max});",
                  f"{ind}    }}",
                  f"{ind}    int {va}any = 0;",
                  f"{ind}    for (int j = 0; j < 8; ++j) {va}any |= {va}n[j];",
                  f"{ind}    if (!{va}any) {{",
                  f"{ind}        {va} = tf__v8_float(tf__v8_key({va}k));",
                  f"{ind}    }} else {{",
                  *["    " + x for x in exact],
                  f"{ind}    }}"]
    return [*lines, f"{ind}    tf__v8_store({acc}, {va});", f"{ind}}}"]
