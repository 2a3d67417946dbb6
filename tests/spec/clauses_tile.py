"""The clause audit of the Tile operations and reductions design (the spec text
``002_186bf9ff267546f5.txt``): each normative sentence quoted, with its status (see spec_audit.py).
Long for a reason: it is data, one record per clause, grouped by the text's sections."""

from __future__ import annotations

from spec_audit import Clause

# test files, abbreviated
DT = "tests/semantics/test_dtypes.py::"
RED = "tests/semantics/test_reductions.py::"
RDC = "tests/semantics/test_reducers.py::"
DRD = "tests/semantics/test_declared_reducers.py::"
PTR = "tests/conformance/test_planted_tile_reduce.py::"
ORD = "tests/semantics/test_ordering.py::"
MM = "tests/semantics/test_matmul.py::"
EVT = "tests/semantics/evaluator/test_eval_tile.py::"
EVS = "tests/semantics/evaluator/test_eval_tile_sort_mma.py::"
EVO = "tests/semantics/evaluator/test_eval_tensor_ops.py::"
RT = "tests/semantics/typeinfer/test_rules_tile.py::"
RTR = "tests/semantics/typeinfer/test_rules_tile_reduce.py::"
RTS = "tests/semantics/typeinfer/test_rules_tile_sort_mma.py::"
RM = "tests/semantics/typeinfer/test_rules_math.py::"
SF = "tests/semantics/test_scan_flags.py::"
GF = "tests/semantics/test_gather_fill.py::"
NA8 = "tests/semantics/test_mma_narrow_acc.py::"
TC = "tests/spec/test_tile_clauses.py::"
MAP = "tests/semantics/dsl/test_dsl_map.py::"
SW = "tests/compiler/test_scan_work.py::"
TRL = "tests/compiler/test_tile_reduce_lowering.py::"
TLS = "tests/compiler/test_tile_lowering_sort_mma.py::"
ROR = "tests/conformance/test_reduction_orders.py::"
CTG = "tests/conformance/test_catalog_tile_gather.py::"
LAW = "tests/smt/test_law_proofs.py::"
TKR = "tests/semantics/test_topk_reducer.py::"
TKL = "tests/compiler/test_topk_reduce_lowering.py::"
PTL = "tests/conformance/test_planted_tile.py::"

S1 = "Storage and arithmetic precision"
S2 = "Elementwise operators lift directly to tiles"
S3 = "MMA is a portable value primitive"
S4 = "Reduction is a structured algebraic region"
S5 = "Reference fold and permitted regrouping"
S6 = "Grouping, merge legality and edge cases"
S7 = "Scan preserves prefixes"
S8 = "Logical exchange versus physical shuffle"
S9 = "Ordering and selection stay logical Tile operations"

CPP = "C++ / Luisa surface detail; the IR here has no such construct"
TGT = "a statement about the Luisa XIR / Metal / TIRx / LLVM bridges, not about the semantics"
FUT = "future work or a design extension the text itself labels so"
WHY = "rationale or history, no requirement of its own"


def I(i: str, s: str, t: str, *tests: str) -> Clause:  # noqa: E743
    return Clause(i, s, t, "implemented", tests)


def D(i: str, s: str, t: str, d: str, frag: str) -> Clause:
    return Clause(i, s, t, "decided", (d, frag))


def N(i: str, s: str, t: str, why: str) -> Clause:
    return Clause(i, s, t, "not applicable", (why,))


def M(i: str, s: str, t: str, note: str = "") -> Clause:
    return Clause(i, s, t, "missing", (note,) if note else ())


CLAUSES: list[Clause] = [
    # --- Storage and arithmetic precision ---------------------------------------------------
    I("T-S01", S1, "TensorView<T, Rank> and Tile<T> carry an exact element format.",
      DT + "test_format_facts_match_published_definitions"),
    I("T-S02", S1, "Changing T does not create an execution Nest or choose a memory resource.",
      "tests/semantics/typeinfer/test_rules_tensor.py::test_cast_identity_in_shape_storage_layout"),
    N("T-S03", S1, "The public header luisa/tile/types.h exposes half (the existing luisa::half), "
      "bfloat16 / bf16, float8_e4m3fn, and float8_e5m2, alongside the ordinary fixed-width "
      "integer types.", CPP),
    I("T-S04", S1, "IEEE binary16, 5 exponent / 10 fraction bits",
      DT + "test_format_facts_match_published_definitions"),
    I("T-S05", S1, "BF16, 8 exponent / 7 fraction bits",
      DT + "test_format_facts_match_published_definitions"),
    I("T-S06", S1, "Bias 7, finite values through ±448, signed zeros and NaNs, no infinities",
      DT + "test_format_facts_match_published_definitions",
      RED + "test_fp8e4m3_overflow_must_be_nan"),
    I("T-S07", S1, "Bias 15, finite values through ±57344, signed zeros, infinities and NaNs",
      DT + "test_format_facts_match_published_definitions"),
    I("T-S08", S1, "Signed / unsigned integers; not implicitly scaled quantities",
      "tests/semantics/evaluator/test_eval_math.py::test_i8_binary_exhaustive_matches_torch",
      DT + "test_int_to_int_wraps_around"),
    I("T-S09", S1, "E4M3FN, IEEE-style E4M3, and FNUZ are not interchangeable.",
      DT + "test_format_facts_match_published_definitions",
      RED + "test_fp8e4m3_overflow_must_be_nan"),
    N("T-S10", S1, "ScalarType::FLOAT8_E4M3FN is the TileIR name for the finite-only format "
      "mapped to DLPack e4m3fn; there is no ambiguous FLOAT8_E4M3 compatibility alias.",
      "TileIR / DLPack enum naming; this project's one E4M3 dtype is the finite-only E4M3FN "
      "(T-S06)"),
    I("T-S11", S1, "Storage, operation and accumulation precision are independent",
      RTS + "test_mma_result_is_acc_shape_in_f32", RED + "test_low_precision_rounds_once_at_the_end"),
    I("T-S12", S1, "A narrowing cast is a numerical event: cast<float>(cast<bf16>(x)) is not x.",
      DT + "test_narrowing_is_a_numerical_event"),
    I("T-S13", S1, "Fusion, forwarding and temporary promotion must retain that rounding.",
      "tests/compiler/test_interp_reference.py::test_fused_elementwise_chains_keep_every_rounding",
      "tests/compiler/test_interp_reference.py::"
      "test_bf16_a_plus_b_times_c_rounds_twice_in_one_kernel"),
    I("T-S14", S1, "BF16 host conversion from float32 uses nearest, ties to even, preserves "
      "signed zeros/subnormals, overflows to infinity and quiets NaNs.",
      DT + "test_bf16_host_conversion_rules"),
    I("T-S15", S1, "BF16 arithmetic in the reference realizations uses FP32 and rounds its BF16 "
      "result explicitly.",
      "tests/semantics/test_dtypes_fastpath.py::"
      "test_apply_lowp_matches_the_engine_on_every_kind_of_operation",
      "tests/compiler/test_simd_backend.py::"
      "test_rnd_bf16_shortcut_is_round_then_widen_on_every_f32_pattern"),
    I("T-S16", S1, "Raw from_bits() / bits() and load/store copying preserve the encoded value; "
      "they are not numeric conversion and preserve NaN payloads.",
      "tests/oracle/test_copy_bits.py::test_a_copy_that_quiets_a_nan_fails",
      EVO + "test_torch_gather_16bit_nan_payloads_are_judged"),
    I("T-S17", S1, "Narrowing a wide integer or FP64 value to BF16 currently requires an explicit "
      "intermediate cast<float> on these bridges, rather than silently introducing double "
      "rounding.",
      DT + "test_i64_to_float_rounds_once_from_the_exact_integer",
      DT + "test_int_to_bf16_tie_region_example"),
    I("T-S18", S1, "tile::bitcast<uint32_t>(float_value) and tile::bitcast<float>(uint_value) "
      "reinterpret the storage bits of a Scalar or Tile without numerical conversion.",
      EVT + "test_bitcast_of_f32_values_is_their_encoding"),
    I("T-S19", S1, "They preserve the named axes and extents, including zero signs, subnormals "
      "and NaN payloads.",
      EVT + "test_bitcast_preserves_every_bit",
      RT + "test_bitcast_f32_u32_pair_keeps_shape_layout_storage"),
    I("T-S20", S1, "This initial API supports only the float32/uint32 pair; other widths and "
      "index/view conversions are rejected.", RT + "test_bitcast_rejects_every_other_pair"),
    I("T-S21", S1, "Native CUDA Tile, XIR and TIRx lower this operation as a bit "
      "reinterpretation.",
      "tests/compiler/test_triton_backend.py::test_bitcast_keeps_every_bit_both_ways",
      "tests/compiler/test_tile_lowering.py::test_triton_renderer_renders_bitcast_and_u32"),
    N("T-S22", S1, "FP8 host wrappers expose exact bit storage and decoding to float32, but no "
      "implicit float-to-FP8 constructor.", CPP),
    I("T-S23", S1, "A future quantizing conversion must specify rounding and overflow/saturation "
      "independently of the format.", DT + "test_overflow_and_tie_cases"),
    N("T-S24", S1, "Scale, zero point and per-channel/per-block scale tensors remain explicit "
      "values and indexing, not hidden fields of a layout or execution Nest.",
      "the IR has no quantized dtype and no layout field that could hold a scale"),
    N("T-S25", S1, "Packed INT4/FP4 likewise need an explicit packing/address map; an element "
      "must not be misrepresented as a byte merely because the Runtime is byte-addressable.",
      "f4e2m1 exists at the type level only (D18): no value of it is ever stored or packed"),
    N("T-S26", S1, "FP16/BF16 and INT8/UINT8 mixed-precision examples are exercised on XIR/SIMD "
      "and Metal/TIRx; native Metal MPP remains its existing FP32 subset.", TGT),
    I("T-S27", S1, "XIR lowers FP16/BF16 MMA accumulators through FP32 internal accumulation "
      "when MmaPolicy::allow_reassociation is enabled, then rounds the result to the declared "
      "type.",
      RTS + "test_mma_narrow_accumulator_needs_reassociation",
      NA8 + "test_reference_is_the_f32_fold_rounded_once",
      "tests/compiler/test_tile_mma_acc_lowering.py::test_narrow_accumulators_are_bit_identical"),
    I("T-S28", S1, "Strict BF16 accumulation still rejects, as does BF16 accumulation on TIRx; "
      "BF16 inputs with an explicit FP32 accumulator are supported on both bridges.",
      RTS + "test_mma_narrow_accumulator_needs_reassociation",
      RTS + "test_mma_result_is_acc_shape_in_f32"),
    N("T-S29", S1, "FP8 capture and typed Buffer allocation are available, but these two Runtime "
      "routes reject FP8 execution explicitly.", TGT),
    N("T-S30", S1, "Manual Memory<half/bf16> works on Metal/TIRx; the XIR planner still rejects "
      "manual Memory for all dtypes.", TGT),
    N("T-S31", S1, "Neither fact guarantees target instruction support.", TGT),
    I("T-S32", S1, "TileIR therefore retains the format until the bridge chooses a native atom, "
      "bit-storage legalization/conversion, or an explicit unsupported diagnostic.",
      "tests/conformance/test_capabilities.py::test_probe_derives_what_the_backend_runs",
      "tests/compiler/test_c_runtime.py::test_widen_op_round_every_fp8_pair"),
    # --- Elementwise ---------------------------------------------------------------------------
    I("T-E01", S2, "Pure scalar operators are rank-polymorphically lifted to Tile values.",
      RM + "test_binary_broadcasting_accepts",
      "tests/semantics/evaluator/test_eval_math.py::test_fp8_dtypes_widen_op_round"),
    I("T-E02", S2, "ite(condition, true_value, false_value) means if-then-else, using the same "
      "name and argument order as Luisa's SIMT DSL.",
      EVT + "test_select_matches_a_loop_and_moves_bits"),
    I("T-E03", S2, "It supports Scalar and Tile values, including broadcast conditions and "
      "operands.", RT + "test_select_broadcasts_condition_and_operands"),
    I("T-E04", S2, "There is no Tile DSL select alias: Luisa's existing select(false_value, "
      "true_value, condition) uses a different order.", TC + "test_there_is_no_select_alias"),
    I("T-E05", S2, "ite selects already-computed values; it is not lazy control flow and does "
      "not by itself guard an unsafe load in either operand.",
      "tests/semantics/evaluator/test_ite_not_lazy.py::test_the_unpicked_operand_is_still_evaluated",
      "tests/semantics/evaluator/test_ite_not_lazy.py::"
      "test_the_compiled_kernel_does_not_skip_it_either"),
    I("T-E06", S2, "Elementwise_f(v0, ..., vn)[q] = f(v0[project_0(q)], ..., vn[project_n(q)])",
      EVT + "test_select_matches_a_loop_and_moves_bits",
      "tests/semantics/evaluator/test_eval_math.py::test_fp8_dtypes_widen_op_round"),
    I("T-E07", S2, "The output dimension set is the compatible identity join of the operands.",
      RM + "test_binary_broadcasting_accepts", RM + "test_binary_symbolic_broadcasting"),
    I("T-E08", S2, "A missing size-one dimension broadcasts; introducing or resolving any other "
      "ambiguous dimension requires explicit broadcast, reshape, or reindex.",
      RM + "test_binary_non_broadcastable_rejected", RT + "test_select_shapes_must_broadcast"),
    N("T-E09", S2, "Diagnostic labels never participate in this decision.",
      "HIR dimensions carry no labels (they are positional)"),
    I("T-E10", S2, "Physical distribution is not part of elementwise semantics.",
      "tests/compiler/test_lower_mesh.py::test_broadcast_operand_is_sliced_for_a_split_result",
      RM + "test_binary_split_layout_carries"),
    D("T-E11", S2, "If operand distributions cannot feed one selected atom, scheduling inserts "
      "and costs a Repartition.", "D458", "scheduling inserts and costs a Repartition"),
    I("T-E12", S2, "map(values..., scalar_lambda) remains the escape hatch for a custom pure "
      "scalar expression, not mandatory ceremony around every elementwise operator.",
      MAP + "test_map_builds_the_ir_of_the_written_out_form",
      MAP + "test_map_evaluates_like_the_written_out_form",
      MAP + "test_bad_lambdas_are_the_projects_error"),
    D("T-E13", S2, "Both forms become one elementwise op with a scalar SSA region in TileIR, so "
      "fusion sees the complete expression DAG rather than an opaque C++ callback.", "D456",
      "so fusion sees the complete expression DAG rather than an opaque C++ callback"),
    # --- MMA -----------------------------------------------------------------------------------
    I("T-M01", S3, "All three operands and the result are ordinary Tile SSA values.",
      RTS + "test_mma_result_is_acc_shape_in_f32"),
    D("T-M02", S3, "Shared logical dimension identities determine the roles without a positional "
      "reduction-axis argument.", "D457",
      "Shared logical dimension identities determine the roles"),
    I("T-M03", S3, "then mma(A, B, C) returns a value in Batch x M x N.",
      RTS + "test_mma_result_is_acc_shape_in_f32", RTS + "test_mma_symbolic_roles"),
    I("T-M04", S3, "Batch dimensions occur in all three operands, contraction dimensions occur in "
      "A and B but not C, and the two free dimension sets are checked against C.",
      RTS + "test_mma_roles_must_agree", RTS + "test_mma_batch_dims_must_be_identical"),
    I("T-M05", S3, "Unrelated argument dimensions must first be related with with_dims or an "
      "explicit reindex; the operation never guesses from labels, extents, strides, or physical "
      "layouts.", RTS + "test_mma_batch_dims_must_be_identical"),
    I("T-M06", S3, "mma(A, B, C)[b, m, n] = accumulate_policy(C[b, m, n], { convert(A[b, m, k]) "
      "* convert(B[b, k, n]) | k in K })", EVS + "test_mma_matches_the_fraction_model"),
    I("T-M07", S3, "The current typed operation records input/accumulator element types, "
      "contraction dimensions, and MmaPolicy::allow_reassociation.",
      RTS + "test_mma_attribute_is_validated", RTS + "test_mma_input_dtypes"),
    I("T-M08", S3, "Inputs are converted to the accumulator type by the reference realization.",
      RTS + "test_mma_accumulator_must_be_f32", EVS + "test_mma_matches_the_fraction_model"),
    I("T-M09", S3, "MMA permits reassociation by default, but does not permit silently reducing "
      "input precision (for example, substituting TF32 for FP32).",
      TC + "test_mma_permits_reassociation_by_default",
      EVS + "test_mma_admitted_set_excludes_reduced_input_precision"),
    I("T-M10", S3, "Ordered accumulation is explicit", TC + "test_mma_permits_reassociation_by_default",
      EVS + "test_mma_k_order_from_the_accumulator"),
    I("T-M11", S3, "The policy is stored on the TileIR operation and survives lowering; it is not "
      "just a frontend scheduling hint.",
      TLS + "test_mma_k_order_is_bit_exact_and_reassociating_conforms"),
    I("T-M12", S3, "Disabling reassociation retains the reference K order, not a promise to "
      "disable target FMA fusion or obtain bit-identical results on different devices.",
      EVS + "test_mma_k_order_from_the_accumulator",
      MM + "test_matmul_fma_is_admitted_without_reassociation"),
    N("T-M13", S3, "More detailed accuracy/rounding policies are design extensions, not "
      "implemented public options.", FUT),
    I("T-M14", S3, "A CPU may use vector FMAs; a GPU may select matrix atoms only when their "
      "numerical and layout contracts refine this operation.",
      MM + "test_matmul_references_and_admitted_orders",
      "tests/compiler/test_triton_gemm.py::test_tma_gemm_wrong_result_is_caught"),
    I("T-M15", S3, "Otherwise the reference loop remains available.",
      TLS + "test_mma_k_order_is_bit_exact_and_reassociating_conforms"),
    N("T-M16", S3, "mma(a, b, acc) is one fused update, so acc += mma(a, b) would ambiguously add "
      "the accumulator twice.", WHY),
    I("T-M17", S3, "auto c = matmul(a, b); // equivalent to mma(a, b, zeros(result_shape))",
      EVS + "test_matmul_is_mma_of_zeros_bit_for_bit", MM + "test_matmul_is_mma_with_a_zeros_accumulator"),
    I("T-M18", S3, "The two-argument library overload uses the conventional [..., M, K] x [..., "
      "K, N] interpretation.", MM + "test_matmul_integers_broadcasting_and_errors"),
    N("T-M19", S3, "A general call either supplies the local contraction Dim set or uses einsum; "
      "this convenience rule is not part of the core mma semantics.",
      "HIR has no named Dim sets and no einsum"),
    N("T-M20", S3, "General einsum/contraction remains a library composition over reindex, "
      "elementwise arithmetic, and reduce; scheduling may tile a compatible expansion into mma.",
      "no einsum library here; a permission for a scheduler this project does not have"),
    D("T-M21", S3, "There is still no GEMM, convolution, or attention opcode.", "D457",
      "There is still no GEMM, convolution, or attention opcode"),
    N("T-M22", S3, "a target MMA atom specifies concrete participants, operand slots, "
      "instruction shapes, and resource protocol.", TGT),
    # --- Reduction region ----------------------------------------------------------------------
    N("T-R01", S4, "Nest::reduce(IndexSpace, policy) and ordinary carried assignment are "
      "implemented.", CPP),
    I("T-R02", S4, "The default is reduction::unordered_tree; each REDUCE operation stores a "
      "typed ReductionPolicy.", TC + "test_the_source_default_policy_is_unordered_tree"),
    I("T-R03", S4, "TIRx and XIR preserve explicit order restrictions, and backend switches "
      "control candidate availability only.",
      ROR + "test_a_declared_fold_left_opts_out_and_is_judged_exactly",
      ROR + "test_which_policies_a_declared_order_runs"),
    I("T-R04", S4, "Custom lift/merge contracts, their general validation and the richer domain "
      "conveniences below remain design extensions.",
      DRD + "test_dsl_prints_and_parses_a_declared_reducer",
      DRD + "test_a_non_associative_merge_claimed_associative_is_refused"),
    I("T-R05", S4, "Unrecognized bodies currently retain a serial realization; they are not "
      "silently granted an invented parallel merge.",
      RTR + "test_a_tree_policy_without_a_merge_contract_suggests_a_fold"),
    N("T-R06", S4, "the loop variable is the current region scope, never a data value or "
      "accumulator proxy", CPP),
    N("T-R07", S4, "column is a non-copyable Nest handle, just like the other range-for "
      "bindings.", CPP),
    N("T-R08", S4, "Neither operation chooses participants, memory, or a collective.", CPP),
    I("T-R09", S4, "On region close, the frontend finds every Tile defined outside the region and "
      "updated inside it. Those values become the region's incoming block arguments and outgoing "
      "results.",
      "tests/semantics/dsl/test_dsl_examples.py::test_multi_carry_loop_binds_tuple_get_items"),
    N("T-R10", S4, "There is no public result(), yield, accumulator proxy, or state list.", CPP),
    N("T-R11", S4, "A canonical state += contribution, state = maximum(state, contribution), or "
      "corresponding minimum/logical form identifies a possible reducer contract.",
      "the text's proposed body analysis; the IR names the reducer (Reduce kind) explicitly"),
    N("T-R12", S4, "state = mma(a, b, state) still has its own inner contraction policy; "
      "recognizing this update does not authorize reordering the outer block/tap fold.",
      "the text's proposed body analysis; no pass here recognizes updates"),
    I("T-R13", S4, "A tree candidate needs a compatible lift/merge and numerical contract for "
      "that fold.", RTR + "test_a_tree_policy_without_a_merge_contract_suggests_a_fold",
      RDC + "test_welford_tree_set_holds_every_bracketing_and_nothing_else"),
    I("T-R14", S4, "Independent states may form a product reducer with permissions checked for "
      "each component; coupled updates need a joint contract.",
      RDC + "test_sum_max_is_two_independent_states"),
    I("T-R15", S4, "Recognition of floating-point addition does not by itself permit arbitrary "
      "reassociation; the math policy still decides that.",
      EVO + "test_reduce_fold_planted", RED + "test_ordered_tree_rejects_a_permuted_order"),
    I("T-R16", S4, "A custom contract can be supplied after the domain",
      DRD + "test_dsl_prints_and_parses_a_declared_reducer",
      PTR + "test_a_declared_wrong_merge_fails_past_enumeration"),
    I("T-R17", S4, "An unrecognized pure update can use an explicitly selected strict fold.",
      RDC + "test_difference_orientation_worked_example"),
    I("T-R18", S4, "The default tree policy still needs a compatible merge contract; if none is "
      "available, diagnose the missing contract and suggest a fold policy rather than silently "
      "inventing a merge.", RTR + "test_a_tree_policy_without_a_merge_contract_suggests_a_fold",
      RDC + "test_a_tree_without_a_merge_contract_suggests_a_fold"),
    I("T-R19", S4, "Programs with observable intermediate states or general ordered effects use "
      "serial or a suitable scan/effect contract.", RED + "test_scan_boundaries_and_seed"),
    N("T-R20", S4, "elem_nest contributes coordinates, not a memory level or address.", CPP),
    N("T-R21", S4, "These are library shorthand for a reduction region with a generated domain, "
      "state, and update.", CPP),
    D("T-R22", S4, "The state, coordinate, contribution-producing operations, grouping "
      "projection, and body are independently inspectable and rewritable.", "D457",
      "are independently inspectable and rewritable"),
    # --- Reference fold and permitted regrouping -----------------------------------------------
    I("T-F01", S5, "Regroup and permute contributions; seed exactly once",
      RDC + "test_tree_admitted_sets_place_the_seed_once", RED + "test_admits_every_tree_short_fibers"),
    I("T-F02", S5, "Regroup; preserve leaf order and the seed's reference position",
      RDC + "test_tree_admitted_sets_place_the_seed_once",
      RED + "test_ordered_tree_rejects_a_permuted_order"),
    I("T-F03", S5, "op(op(op(z, x0), x1), x2)	No merge law required; preserve this update chain",
      RED + "test_reference_results_of_each_policy",
      RDC + "test_seed_position_fold_left_first_fold_right_last"),
    I("T-F04", S5, "op(x0, op(x1, op(x2, z)))	No merge law required; preserve this update chain "
      "and operand orientation", RED + "test_reference_results_of_each_policy",
      RDC + "test_seed_position_fold_left_first_fold_right_last"),
    I("T-F05", S5, "The source default is unordered_tree.",
      TC + "test_the_source_default_policy_is_unordered_tree"),
    I("T-F06", S5, "Ordinary nest.reduce(domain) authorizes a compatible reducer's tree "
      "regrouping and contribution permutation, including changed FP32-add rounding; users need "
      "not add a fast-math switch to obtain that permission.",
      RED + "test_admits_every_tree_short_fibers", RED + "test_admits_every_tree_long_fibers"),
    I("T-F07", S5, "ordered_tree, fold_left and fold_right are explicit restrictions.",
      RED + "test_reference_results_of_each_policy", EVO + "test_reduce_fold_planted"),
    I("T-F08", S5, "A tree policy permits a serial realization too: it describes a set of allowed "
      "computations, not a mandatory hardware algorithm.",
      EVO + "test_reduce_tree_result_is_admitted"),
    I("T-F09", S5, "This default does not authorize a different accumulation dtype, approximate "
      "transcendentals, FMA contraction or ignoring NaNs; those remain independent arithmetic "
      "contracts.", RED + "test_low_precision_rounds_once_at_the_end",
      RED + "test_max_min_propagate_nan_and_order_signed_zeros",
      RED + "test_planted_errors_one_ulp_and_zero_sign"),
    N("T-F10", S5, "A strict floating-point operation mode does not retract the reduction's "
      "regrouping permission.", "the IR has no strict floating-point mode to retract anything"),
    I("T-F11", S5, "Conversely, an explicit fold restriction must survive every backend and "
      "tuning configuration.", ROR + "test_a_declared_fold_left_opts_out_and_is_judged_exactly",
      TRL + "test_seed_position_survives_tile_loops"),
    N("T-F12", S5, "Current striped Metal collectives and CPU array reductions require "
      "unordered_tree; ordered trees conservatively retain a source-ordered recurrence.", TGT),
    N("T-F13", S5, "XIR/SIMD currently retains serial reductions for all four policies.", TGT),
    N("T-F14", S5, "The Metal and SIMD Runtime factories disable kernel-wide fast-math when any "
      "reduction requires order, because their current final compiler interfaces cannot express "
      "a local arithmetic override.", TGT),
    N("T-F15", S5, "This does not turn unrelated unordered reductions into explicit folds.", TGT),
    N("T-F16", S5, "The TIRx LLVM target likewise cannot override order with global fast-math "
      "flags.", TGT),
    N("T-F17", S5, "TVM's own Metal runtime requires the optional precise-math extension; without "
      "it, ordered reductions fail compilation explicitly.", TGT),
    I("T-F18", S5, "For order-sensitive policies, multidimensional source order is lexicographic "
      "in the IndexSpace axis order over active coordinates; physical layout, lane number and "
      "storage replication cannot redefine it.", RED + "test_reference_results_of_each_policy"),
    I("T-F19", S5, "A policy is not an optimization-strength integer: left and right folds "
      "generally compute different functions.", RED + "test_fold_left_and_right_differ_on_floats"),
    I("T-F20", S5, "Mathematical laws and policy-granted relaxation are distinct evidence. FP32 "
      "addition does not have exact associativity.",
      RED + "test_ordered_tree_rejects_a_permuted_order", RED + "test_admits_every_tree_short_fibers"),
    I("T-F21", S5, "For x = [1, 2, 3] these examples yield left = -6, right = 2.",
      RED + "test_fold_example_from_the_tile_design",
      EVT + "test_fold_right_orientation_design_example"),
    I("T-F22", S5, "Right fold visits contributions in reverse source order and uses the stated "
      "element/state operand orientation.", EVT + "test_fold_right_orientation_design_example"),
    I("T-F23", S5, "The policy does not silently change state - element into element - state; "
      "doing only a reversed left-fold traversal is not the same contract.",
      EVT + "test_fold_right_orientation_design_example",
      RDC + "test_difference_orientation_worked_example"),
    I("T-F24", S5, "Heterogeneous folds must type-check the appropriate State x Elem -> State or "
      "Elem x State -> State update.", RTR + "test_custom_x_must_be_float_and_seed_its_f32_state",
      RTR + "test_custom_accepts_a_registered_reducer_with_its_state_seed"),
    # --- Grouping, merge legality, edge cases --------------------------------------------------
    I("T-G01", S6, "For x.domain(axes), group is the familiar projection that removes those axes.",
      "tests/semantics/typeinfer/test_rules_tensor.py::test_reduce_numpy_shape",
      RTR + "test_seed_must_have_the_result_shape"),
    N("T-G02", S6, "For a general map-reduce body it is inferred from the shape/index map of the "
      "state update.", "the text's proposed region inference; the IR states the reduced axes"),
    I("T-G03", S6, "A strict fold only requires a typed update and seed; it does not require an "
      "identity or a parallel merge.", RDC + "test_difference_orientation_worked_example"),
    I("T-G04", S6, "result[g] = merge(incoming[g], ordered_merge(identity, [lift(omega0), ..., "
      "lift(omegaN-1)]))", RDC + "test_welford_tree_set_holds_every_bracketing_and_nothing_else",
      RDC + "test_tree_admitted_sets_place_the_seed_once"),
    I("T-G05", S6, "update(s, omega) = merge(s, lift(omega)) merge(merge(a, b), c) = merge(a, "
      "merge(b, c)) merge(identity, a) = a = merge(a, identity)",
      LAW + "test_laws_that_hold_are_proved", LAW + "test_wrong_identity_for_sum_is_a_counterexample"),
    I("T-G06", S6, "Without exact laws, the tree policy must admit the changed results for that "
      "compatible reducer.", RED + "test_admits_every_tree_short_fibers",
      RDC + "test_welford_tree_set_holds_every_bracketing_and_nothing_else"),
    I("T-G07", S6, "A law declaration and numerical permission remain separate evidence, even "
      "when they enable the same candidate.",
      DRD + "test_a_law_declaration_and_a_numerical_permission_are_separate_evidence"),
    I("T-G08", S6, "For a right-reference update, the lift/merge relation instead has the element "
      "on the left: update(omega, s) = merge(lift(omega), s), with the seed at the right "
      "boundary.", RDC + "test_seed_position_fold_left_first_fold_right_last"),
    I("T-G09", S6, "A generic State x Elem -> State update does not automatically provide State x "
      "State -> State merge.", RDC + "test_a_tree_without_a_merge_contract_suggests_a_fold"),
    I("T-G10", S6, "The fiber is an ordered contribution sequence unless the contract also grants "
      "permutation.", RED + "test_ordered_tree_rejects_a_permuted_order"),
    I("T-G11", S6, "Associativity permits different parentheses, not an arbitrary permutation: "
      "preserving a noncommutative reducer's source sequence requires contiguous partial "
      "sequences and an order-preserving merge.", RED + "test_ordered_tree_rejects_a_permuted_order",
      "tests/smt/test_scan_proofs.py::test_carry_on_the_right_is_refuted_for_a_noncommutative_combine"),
    I("T-G12", S6, "Striped worker assignment generally changes order and needs the stronger "
      "permission.", RED + "test_ordered_tree_rejects_a_permuted_order",
      ROR + "test_which_policies_a_declared_order_runs"),
    N("T-G13", S6, "An independent output-group direction and a reduction direction are separate "
      "factors of one domain, as formalized in the execution calculus.",
      "refers to the execution calculus, another text"),
    N("T-G14", S6, "The current implementation is narrower; body recognition is not a proof of "
      "arbitrary custom laws.", "status of the C++ implementation"),
    I("T-G15", S6, "Strict folds remain valid without merge laws.",
      RDC + "test_difference_orientation_worked_example"),
    N("T-G16", S6, "Floating-point reassociation, precision, FMA behavior and determinism are "
      "separate policy dimensions.", "a taxonomy; each dimension is its own clause here (T-F09, "
      "T-M09, T-M12)"),
    I("T-G17", S6, "A fixed tree can be reproducible within one configuration without being "
      "bit-identical across different JIT configurations or devices.",
      EVO + "test_reduce_tree_result_is_admitted"),
    I("T-G18", S6, "incoming state is included once, in its specified position; it is not copied "
      "into every worker's partial.", RDC + "test_a_seed_per_leaf_is_rejected",
      RDC + "test_tree_admitted_sets_place_the_seed_once"),
    I("T-G19", S6, "Empty fibers return that seed.", RDC + "test_empty_fibers_return_the_seed"),
    I("T-G20", S6, "Masked-out occurrences are skipped; padded physical lanes may use an identity "
      "only when it is valid under the selected arithmetic semantics, otherwise partials carry "
      "validity.", RDC + "test_masked_lanes_are_skipped_not_padded_with_plus_zero",
      RDC + "test_fp8e4m3_masked_max_skips_a_nan_lane"),
    I("T-G21", S6, "Exceptional values: overflow, NaNs, signed zero, ties and argmax ordering are "
      "part of the operation contract, not guessed from an intrinsic name.",
      RED + "test_max_min_propagate_nan_and_order_signed_zeros",
      RED + "test_overflow_admits_infinity_only_where_a_partial_can_overflow",
      ORD + "test_ties_break_by_index_including_signed_zeros"),
    I("T-G22", S6, "Local permissions: the language/kernel default resolves at capture; a "
      "stricter local policy is never widened by a backend or tuner.",
      ROR + "test_a_declared_fold_left_opts_out_and_is_judged_exactly"),
    I("T-G23", S6, "Independent state components may need separate trees or a common stricter "
      "realization.", RDC + "test_sum_max_is_two_independent_states"),
    I("T-G24", S6, "Proof boundary: builtin facts, derived conditions and trusted custom law "
      "declarations retain their provenance.",
      DRD + "test_law_verdicts_name_their_provenance"),
    I("T-G25", S6, "Random testing can falsify a law, not prove it for an arbitrary function.",
      DRD + "test_law_verdicts_name_their_provenance",
      DRD + "test_an_exact_identity_refuted_at_minus_zero"),
    I("T-G26", S6, "Storage replicas are not semantic contributions.",
      TC + "test_storage_replicas_are_not_contributions"),
    I("T-G27", S6, "This distinction prevents a broadcast or replicated fragment from silently "
      "multiplying a sum.", TC + "test_storage_replicas_are_not_contributions"),
    N("T-G28", S6, "reduce introduces a lexical reduction domain R, not a resource-owning spatial "
      "prefix.", CPP),
    I("T-G29", S6, "With the corresponding permission and merge contract, it may become a lane "
      "shuffle tree, a shared-memory tree, a SIMD horizontal operation or a hybrid.",
      "tests/compiler/test_cuda_block.py::test_reductions_with_init_and_mask_match_the_interpreter"),
    I("T-G30", S6, "A strict fold preserves its chain while independent output fibers may still "
      "execute in parallel.", TRL + "test_seed_position_survives_tile_loops"),
    I("T-G31", S6, "missing merge laws do not invalidate an explicitly selected strict fold.",
      RDC + "test_difference_orientation_worked_example"),
    N("T-G32", S6, "In that bounded implementation, metal_subgroup_reductions only enables the "
      "candidate family; the per-operation policy supplies tree-order permission.", TGT),
    N("T-G33", S6, "A distributed definition of logical Tile[N] does not make the other elements "
      "of each worker's physical private array valid.", TGT),
    I("T-G34", S6, "Welford normalization, for example, uses one state instead of hard-coding a "
      "two-pass warp algorithm", RDC + "test_welford_worked_example_and_variance",
      "tests/conformance/test_planted_tile_reduce.py::"
      "test_a_wrong_welford_mean_fails_over_8_and_1000_contributions"),
    N("T-G35", S6, "An ordinary tile_kernel still cannot assume a device-wide barrier between "
      "independent root instances.", "tile_kernel / root instances are the C++ surface's; "
      "HIR has no kernel construct"),
    N("T-G36", S6, "The frontend never disguises an illegal global synchronization as a Tile op.",
      "HIR has no synchronization op at all; the cross-CTA fence belongs to Reshard lowering "
      "(HIR text)"),
    # --- Scan ----------------------------------------------------------------------------------
    N("T-C01", S7, "Keep scan as a Tile-level library operation, not another range-for Nest.", CPP),
    I("T-C02", S7, "A chain of logical reindex/gather and elementwise operations already "
      "expresses prefix scan.", CTG + "test_hillis_steele_in_ir_is_the_scan_on_integers",
      CTG + "test_hillis_steele_in_ir_is_an_admitted_float_scan"),
    I("T-C03", S7, "A public scan convenience can reuse the reducer's identity, combine function, "
      "accumulator type and numerical contract without requiring a new primitive.",
      EVT + "test_scan_boundaries_and_empty_axis", EVT + "test_float_scan_matches_the_fraction_model"),
    I("T-C04", S7, "columns is an ordinary user-defined Axis, not a predefined semantic or "
      "hardware axis.", RT + "test_scan_needs_an_axis"),
    I("T-C05", S7, "An options argument can request exclusive output, an explicit seed, or a "
      "strict left fold; it does not specify a warp width.",
      RED + "test_scan_boundaries_and_seed", RT + "test_scan_exact_seeds_accepted"),
    I("T-C06", S7, "The first implementation should support existing builtin reducers before "
      "introducing custom tuple-state combine regions.",
      EVT + "test_float_scan_matches_the_fraction_model", RT + "test_scan_combine_dtype_rejects"),
    I("T-C07", S7, "gather supplies a logical shift with defined boundary fill; a bare "
      "out-of-bounds reindex would not.", GF + "test_out_of_range_reads_the_fill_by_definition"),
    I("T-C08", S7, "Each iteration reads the previous SSA Tile, so updates are simultaneous "
      "rather than an in-place sequential sweep.",
      CTG + "test_hillis_steele_in_ir_is_the_scan_on_integers"),
    I("T-C09", S7, "For length n, this direct Hillis-Steele chain has O(n log n) work and "
      "O(log n) depth.", SW + "test_regroupable_scans_take_n_log_n_lane_work"),
    N("T-C10", S7, "Work-efficient up/down-sweep and hierarchical segmented algorithms are "
      "alternative library compositions.", FUT),
    I("T-C11", S7, "left prefix[0] = z left prefix[i + 1] = op(left prefix[i], x[i]) inclusive[i] "
      "= left prefix[i + 1] exclusive[i] = left prefix[i] reduce result = left prefix[n]",
      RED + "test_scan_boundaries_and_seed", EVT + "test_scan_boundaries_and_empty_axis"),
    I("T-C12", S7, "An ordered-tree scan may regroup each prefix when the merge/math contract "
      "permits it, but must preserve that prefix's leaf sequence and include the seed once.",
      RED + "test_scan_admits_hillis_steele_and_the_recurrence",
      EVT + "test_ordered_tree_admits_a_regrouping_the_fold_does_not"),
    I("T-C13", S7, "The existing default reduce policy remains unordered tree.",
      TC + "test_the_source_default_policy_is_unordered_tree"),
    I("T-C14", S7, "Moving [1, 2, 3] to [3, 1, 2] preserves an integer sum of 6, but changes "
      "inclusive prefixes from [1, 3, 6] to [3, 4, 6].", EVT + "test_scan_design_example",
      RED + "test_scan_permutation_example"),
    I("T-C15", S7, "Therefore scan must not inherit the permission to globally permute reduction "
      "contributions.", RT + "test_scan_policy_never_permutes",
      "tests/conformance/test_planted_tile_scan.py::test_each_planted_bug_fails_the_quick_tier"),
    D("T-C16", S7, "Associativity permits parallel prefix evaluation; commutativity is not "
      "required.", "D387", "Associativity permits parallel prefix evaluation"),
    D("T-C17", S7, "A noncommutative combine must receive the earlier subsequence on its left.",
      "D387", "must receive the earlier subsequence on its left"),
    I("T-C18", S7, "Floating-point regrouping permission does not imply exact real associativity "
      "or relax dtype, NaN, signed-zero or rounding rules.",
      EVT + "test_ordered_tree_admits_a_regrouping_the_fold_does_not",
      RT + "test_scan_signed_zero_seeds_are_distinct_ops"),
    N("T-C19", S7, "The current closed-reduction fast path recognizes a final scalar carry with "
      "restricted pure updates; stores of intermediate carries do not qualify.", CPP),
    N("T-C20", S7, "If expanding early demonstrably prevents useful algorithm selection or causes "
      "excessive IR growth, retain a typed, decomposable scan library operation until planning.",
      "an optional representation choice the text allows; Scan is such a typed op (D215)"),
    N("T-C21", S7, "Replacing it with a different scan tree requires the corresponding numerical "
      "permissions; recognizing shifted indices alone does not authorize reassociation.",
      "no pass here recognizes hand-written chains, so none reassociates one"),
    I("T-C22", S7, "A library scan may declare the ordered-tree contract and expose several "
      "equivalent decompositions for JIT/planner selection.",
      SW + "test_ordered_tree_scan_is_admitted_and_is_a_tree",
      SW + "test_the_per_prefix_lowering_is_still_reachable_and_admitted"),
    I("T-C23", S7, "do not infer arbitrary custom associativity from the body or erase "
      "intermediate low-precision rounding.",
      "tests/compiler/test_interp_reference.py::test_fused_elementwise_chains_keep_every_rounding"),
    I("T-C24", S7, "Empty input produces an empty output; a separate final-state result, if "
      "added, would be the seed.", EVT + "test_scan_boundaries_and_empty_axis"),
    I("T-C25", S7, "Masked contributions are skipped under a defined mask contract, rather than "
      "treating every padding value as a valid identity.",
      SF + "test_masked_lanes_never_enter_even_nan_and_inf",
      "tests/oracle/test_enclosure_tile_scan.py::test_a_masked_lane_that_entered_fails"),
    I("T-C26", S7, "A strict fold preserves the recurrence above.",
      SW + "test_fold_left_float_add_is_sequential_past_the_threshold",
      SW + "test_sequential_fold_left_scan_is_bit_exact"),
    I("T-C27", S7, "Reversing the axis is expressible by reindexing, and segmented scans can use "
      "a lifted (head, value) associative state; neither needs a new Nest kind.",
      SF + "test_worked_examples", SF + "test_reference_matches_the_definition"),
    I("T-C28", S7, "The parallel library algorithm need not independently reduce all n prefixes "
      "in quadratic work.", SW + "test_regroupable_scans_take_n_log_n_lane_work",
      SW + "test_fold_left_float_add_is_sequential_past_the_threshold"),
    N("T-C29", S7, "The implementation's hard-coded 32-lane block heuristic, sum/max-only combine "
      "ordering, and fragment staging are not general reducer contracts to copy into the new "
      "frontend.", WHY),
    N("T-C30", S7, "Preserving scan semantics can aid algorithm selection, but fixing general "
      "logical exchange is the first priority; an added opcode would not itself implement that "
      "mapping.", WHY),
    # --- Logical exchange ----------------------------------------------------------------------
    I("T-X01", S8, "Keep the public portable vocabulary small: reindex for coordinate maps and "
      "gather for single-axis index-Tile selection with fallback from an SSA Tile.",
      GF + "test_type_rule_and_identity", TC + "test_no_shuffle_scatter_or_atomic_op"),
    I("T-X02", S8, "means y[j] = x[f(j)]; f need not be affine, injective or surjective.",
      TC + "test_pure_gather_chains_compose"),
    I("T-X03", S8, "gather supplies one axis of f from an index Tile, combines the source's "
      "remaining dimensions with the index Tile's dimensions by identity, and defines fallback "
      "for invalid indices on that axis.", GF + "test_out_of_range_reads_the_fill_by_definition",
      GF + "test_type_rule_and_identity"),
    I("T-X04", S8, "For valid domains and the same SSA snapshot, pure chains compose as "
      "R_g(R_f(x)) = R_(f composed with g)(x).", TC + "test_pure_gather_chains_compose"),
    I("T-X05", S8, "Masks and fallback values must be composed too; intervening arithmetic is not "
      "another coordinate rename.", TC + "test_fills_compose_with_the_chain"),
    N("T-X06", S8, "A unique destination write may use explicit MemoryRef/ElementRef.store; "
      "collisions need an explicit reducer or execution order.",
      "no scatter in the IR (T-X07); InsertSlice writes one window"),
    I("T-X07", S8, "There is currently no public scatter helper or Tile atomic opcode.",
      TC + "test_no_shuffle_scatter_or_atomic_op"),
    N("T-X08", S8, "A future value-producing scatter can be a library composition of "
      "target-fiber grouping and reduction; an effectful scatter must retain its store effects.",
      FUT),
    N("T-X09", S8, "In particular, a logical butterfly is not necessarily a physical lane XOR",
      WHY),
    D("T-X10", S8, "The communication plan selects a valid provider in S(f(j)) for each "
      "consumer.", "D494", "selects a valid provider in S(f(j)) for each"),
    D("T-X11", S8, "The planner must jointly price source/output ownership, communication and "
      "consumers, rather than assuming every reindex is free or every gather needs shared "
      "memory.", "D494", "jointly price source/output ownership, communication and"),
    D("T-X12", S8, "Backend policies supply measured capabilities/costs; the solver chooses "
      "among legal candidates.", "D494", "Backend policies supply measured capabilities/costs"),
    I("T-X13", S8, "The baseline algorithm and its work bound remain available when a target "
      "lacks a specialized collective.",
      SW + "test_the_per_prefix_lowering_is_still_reachable_and_admitted"),
    I("T-X14", S8, "Do not add mandatory shuffle_up/down/xor calls to generic Tile kernels now.",
      TC + "test_no_shuffle_scatter_or_atomic_op"),
    N("T-X15", S8, "A future explicitly bound SIMT escape hatch may expose physical lane "
      "intrinsics with convergence, participation-mask, width and capability constraints; it "
      "must not silently restrict the remapping freedom of ordinary Tile code.", FUT),
    I("T-X16", S8, "Validation should cover noncommutative associative combines, seeds, "
      "inclusive/exclusive boundaries, empty/single/ragged axes, non-power-of-two lengths, "
      "subgroup/block boundaries, strict floating-point folds, exceptional values and "
      "low-precision accumulator conversion.",
      "tests/conformance/test_planted_tile_scan.py::test_each_planted_bug_fails_the_quick_tier",
      "tests/smt/test_scan_proofs.py::test_carry_on_the_right_is_refuted_for_a_noncommutative_combine",
      EVT + "test_scan_boundaries_and_empty_axis", SW + "test_integer_and_extreme_scans_are_bit_exact"),
    N("T-X17", S8, "A device-wide scan still needs an explicit supported multi-dispatch/"
      "synchronization plan; no independent root instance acquires an implicit global barrier.",
      "root instances / dispatch are the C++ surface's; HIR has no kernel construct"),
    # --- Ordering and selection ----------------------------------------------------------------
    I("T-O01", S9, "The Tile library defines sort as a logical permutation along named axes with "
      "a pure total-order contract", ORD + "test_sort_matches_the_total_order",
      EVS + "test_sort_matches_the_fraction_model"),
    I("T-O02", S9, "It returns values and, when requested, the logical source permutation.",
      RTS + "test_sort_returns_values_and_int64_indices"),
    D("T-O03", S9, "Its reference expansion uses core comparison/ite, reindex, reduction, and "
      "structured regions; no core SortOp is required.", "D457",
      "reduction, and structured regions; no core SortOp is required"),
    I("T-O04", S9, "Distribution analysis may keep the axis local, repartition it, or reject a "
      "requested single-kernel schedule that cannot communicate across the required participant "
      "scope.", RTS + "test_sort_split_on_the_sorted_axis_is_rejected_other_splits_carry"),
    I("T-O05", S9, "A target may replace a proved equivalent expansion with a sort atom.",
      "tests/conformance/test_planted_tile.py::test_packed_key_sort_passes"),
    I("T-O06", S9, "returning RankedTile<T> with values and INT64 source indices.",
      RTS + "test_sort_returns_values_and_int64_indices"),
    I("T-O07", S9, "It requires non-NaN inputs and breaks equal-value ties by original index, "
      "including ties between the two zero signs.",
      EVS + "test_sort_zero_signs_tie_by_source_index_both_directions",
      EVS + "test_sort_nan_error_is_the_sort_nan_run_time_check"),
    I("T-O08", S9, "The key carries the original index and zero sign, so decoding recovers the "
      "original value bits without a second input gather.",
      "tests/conformance/test_planted_tile.py::test_packed_key_decoding_restores_bits"),
    N("T-O09", S9, "Other inputs reject this option; the default algorithm is unchanged.",
      "SortAlgorithm is a C++ option; here a packed-key sort is a backend's realization (D230)"),
    I("T-O10", S9, "merge_K(merge_K(a, b), c) = merge_K(a, merge_K(b, c))",
      ORD + "test_merge_is_associative_with_identity",
      LAW + "test_topk_merge_without_sorting_is_caught"),
    I("T-O11", S9, "Discarding everything below the current K-th candidate cannot affect any "
      "later Top-K merge, so this is associative under the stated total order.",
      ORD + "test_merge_is_associative_with_identity", ORD + "test_topk_of_whole_equals_merge_of_chunks"),
    I("T-O12", S9, "The general region form is therefore ordinary reduce over an indexed Tile",
      TKR + "test_reduce_equals_argsort_model_and_hir_topk",
      TKR + "test_region_is_an_ordinary_fold_and_every_tree_agrees",
      TKR + "test_policies_are_all_exact", TKR + "test_laws_are_the_proved_ones",
      TKL + "test_compiled_region_is_bit_exact", TKL + "test_the_lowering_is_one_fold_kernel",
      "tests/oracle/test_topk_reduce_oracle.py::test_the_reference_passes_and_wrong_answers_fail",
      PTL + "test_each_planted_topk_merge_bug_fails_the_quick_tier"),
    I("T-O13", S9, "topk<K>(x, axis, order...) is a library shorthand for that region, not a "
      "second execution model or primitive.",
      TKR + "test_shorthand_elaborates_to_the_reduce_not_a_primitive",
      TKR + "test_shorthand_rejections_name_the_fix"),
    D("T-O14", S9, "K is normally an ordinary host/JIT specialization because it changes the "
      "result type and Tile shape.", "D228", "K is normally an ordinary host/JIT specialization"),
    D("T-O15", S9, "A runtime k uses a statically bounded KMax result plus a staged valid count; "
      "it never creates a dynamically sized register fragment.", "D228",
      "A runtime k uses a statically bounded KMax result plus a staged valid count"),
    N("T-O16", S9, "A large full sort is a launch graph: block-local sort, followed by "
      "merge_sorted passes, or radix histogram + scan + scatter passes.",
      "a realization plan for a multi-dispatch program; HIR has no launch graph"),
]
