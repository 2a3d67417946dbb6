"""The spec sentences the catalog's cases quote in ``Case.spec`` (split from
``conformance/catalog.py``, D383).

The HIR spec, the Tile design, ARCHITECTURE.md's numeric contracts and the decisions, each quoted
once and cited by the spec-derived, special-value and sharded cases.
"""

from __future__ import annotations

# =============================================================================================
# spec-derived cases
# =============================================================================================
_S_EMPTY = ("HIR Reduce: \"A reduction over an axis of no elements MUST return that kind's "
            "identity rather than fail. For max that is the least value its result dtype can "
            "hold, which is not always -inf: an integer dtype cannot hold -inf, bool's least "
            "value is False, and a finite-only float has no infinity. abs_max is 0, its results "
            "being magnitudes. sum is 0.\"")


_S_MAXMIN = ("ARCHITECTURE.md, Numeric contracts: \"`max`/`min` propagate NaN and order "
             "`-0 < +0`.\" (docs/decisions.md D35, D93)")


_S_ROUND = ("HIR Unary: \"round rounds to the nearest integer with ties to even (banker's "
            "rounding, matching torch's own round semantics).\"")


_S_CEIL = "HIR Unary: \"ceil rounds toward positive infinity\""


_S_WRAP = ("docs/decisions.md D93 / D34: integers follow torch with two's-complement "
           "wraparound (`abs(INT_MIN) = INT_MIN`); integer sums wrap in the input dtype.")


_S_FOLD = ("Tile design, Reference fold: \"left = left - x.at(r)\" (fold_left) and \"right = "
           "x.at(r) - right\" (fold_right): \"For x = [1, 2, 3] these examples yield left = -6, "
           "right = 2.\"")


_S_FOLD_DIFFER = ("Tile design: \"A policy is not an optimization-strength integer: left and "
                  "right folds generally compute different functions.\" fold_left = "
                  "op(op(op(z, x0), x1), x2), fold_right = op(x0, op(x1, op(x2, z))).")


_S_LOWP_RED = ("ARCHITECTURE.md, Numeric contracts: \"Low-precision floats accumulate in f32 "
               "and round once at the end. `fold_left` / `fold_right` are bit-exact "
               "functions\"")


_S_TREE = ("ARCHITECTURE.md, Numeric contracts: \"A tree policy defines a *set* of admitted "
           "results\"; Tile design: ordered_tree may \"Regroup; preserve leaf order\", "
           "unordered_tree may \"Regroup and permute contributions\".")


_S_GATHER = ("HIR Gather: \"Element rule: out[c.., i.., t..] = x[c.., index[b.., i..], t..], "
             "where the first batch_dims of the axis leading dims also index index.\"")


_S_GATHER0 = ("HIR Gather: \"batch_dims=0 (default) inserts the full index shape at axis; a "
              "leading-dimension shape coincidence MUST NOT implicitly enable batching\"")


_S_CACHE = ("HIR CacheUpdate: \"Write a window of ``new`` into ``cache``\" — \"cur_pos: i32 "
            "scalar where the write begins. s: i32 scalar number of positions to write. new: "
            "source positions, taken as ``new[:, :s]``.\" \"The result has cache's same static "
            "shape\"")


_S_INSERT = ("HIR InsertSlice: \"the window on each axis is [offset_axis, offset_axis + "
             "update.shape[axis]).\"")


_S_TOPK = ("Tile design: topk \"breaks equal-value ties by original index, including ties "
           "between the two zero signs.\" HIR TopK: \"sorted returns the selected elements "
           "ordered by largest\"; indices are i64.")


_S_TOPK_NAN = ("Tile design: sort(x, feature, descending, stable_ties(), nan::last) — NaNs "
               "last; the reference applies nan::last to TopK in both directions "
               "(docs/decisions.md D103).")


_S_SILU = ("HIR Silu: \"Fused rather than decomposed into Sigmoid + Binary(MUL): the fused "
           "form does not round the intermediate sigmoid(x) to x's dtype, so at reduced "
           "precision the two differ by up to ~1 ULP per element.\"")


_S_GELU = ("HIR Gelu: \"approximate: attribute; \"tanh\" selects the tanh-based approximation "
           "(HF gelu_pytorch_tanh / Gemma-2 MLP activation).\" (default \"tanh\")")


_S_ROPE = ("HIR RoPE: \"The rotation is the rotate-half form: the last axis splits in two "
           "halves and the pair (x[i], x[i + d/2]) rotates together. This is the unqualified "
           "HF convention (apply_rotary_pos_emb / rotate_half)\"")


_S_MATMUL = ("Tile design: \"Ordered accumulation is explicit: ... {.allow_reassociation = "
             "false} // preserve contraction order\"; \"Disabling reassociation retains the "
             "reference K order, not a promise to disable target FMA fusion\".")


_S_OVF = ("ARCHITECTURE.md, Numeric contracts: \"`\"nonfinite\"` (default): formats with "
          "infinities give ±inf, formats without (fp8e4m3) give NaN; `\"saturate\"`: finite "
          "overflow and infinities clamp to ±max finite; NaN stays NaN.\"")


_S_ONCE = ("ARCHITECTURE.md, Numeric contracts: \"Narrowing float casts round once from the "
           "exact source value, to nearest, ties to even. Signed zeros and subnormals are "
           "preserved; a double rounding through an intermediate format is a defect "
           "(f32→bf16→fp8e4m3 differs from f32→fp8e4m3 on millions of inputs).\"")


_S_BF16 = ("Tile design: \"BF16 host conversion from float32 uses nearest, ties to even, "
           "preserves signed zeros/subnormals, overflows to infinity and quiets NaNs.\"")


_S_E8M0 = ("ARCHITECTURE.md, Numeric contracts: \"f8e8m0 ... takes a `rounding` attribute: "
           "`\"nearest\"` (default; ties at 1.5·2^e go up, as ml_dtypes and torch do), "
           "`\"up\"` (toward +inf, the usual MX scale rule) and `\"down\"` (toward zero). Zero, "
           "negative and NaN inputs and results beyond 2^127 give NaN; results below 2^-127 "
           "give 2^-127.\"")


_S_INT2F = ("ARCHITECTURE.md, Numeric contracts: \"Integer → float rounds once from the exact "
            "integer (no double rounding through f32).\"")


_S_F2INT = ("ARCHITECTURE.md, Numeric contracts: \"Float → integer truncates toward zero; NaN "
            "or out-of-range sources give an unspecified value (the oracle accepts any value "
            "there\"")


_S_CMP = ("docs/decisions.md D93: \"Comparisons with NaN are false except `ne`; −0 == +0.\" "
          "(HIR Binary: torch pointwise semantics)")


_S_GRID = ("HIR GridRegionExpr: \"the pre-loop binding of that name becomes the matching entry "
           "in init_args (the carry's value on the first iteration)\"; \"induction_var ranges "
           "over range(start, extent, step)\"")


_S_GRID_DIM = ("HIR GridRegionExpr: \"Every DimVar referenced by a ShapeDim start / extent / "
               "step MUST be bound by the enclosing Function's parameter shapes. Resolution "
               "substitutes each such DimVar with the corresponding argument-shape size\"")


_S_DISPATCH = ("HIR Function, Dispatch resolution: \"the variant whose DimVarRangePat matches "
               "the call's concrete argument shapes is selected and is the call's result.\"")


_S_CALL = ("HIR Function, Call typing: \"A Call whose target is a Function types by "
           "elaboration: elaborate(callee, arg_types) binds each parameter to the caller's "
           "actual argument type\"")


_S_PARTIAL = ("ARCHITECTURE.md, Types: \"`Partial(reduction)` ...: every device holds a "
              "partial value; the logical value is that reduction over the axis. A Partial is a "
              "pending collective, not data.\" HIR Function: \"Only an explicit Reshard or "
              "allreduce may complete that state.\"")


_S_GATHER_SPLIT = ("HIR Gather: \"A Split targeting the gathered axis produces Partial(sum) on "
                   "that mesh axis (each device already holds the true value at the rows it "
                   "owns and a zero row elsewhere, so summing the per-device partials across "
                   "the mesh axis reconstructs the true gather).\"")


_S_LOCAL = ("HIR Local: \"The result shape contracts each Split axis by that mesh axis's "
            "extent.\"")


_S_ZEROS = "HIR Zeros: \"The result is zero-initialised.\""


_S_SOFTMAX = ("docs/decisions.md D95-D99 (nn special values): softmax: a NaN or +inf anywhere "
              "in the row makes the whole row NaN; an all −inf row is NaN; −inf entries beside "
              "a finite maximum give +0.")
