"""Translation validation of the compiler (docs/validate.md): bit-precise Z3 semantics of the
kernel IR (``encode``, ``symexec``) and of the HIR ops lowering consumes (``hir_smt``),
refinement with Alive2's outcomes (``refine``), the per-pass driver ``passes.validate_program``,
planted-bug passes (``planted``), reproducers (``repro``) and ``tilefoundry validate`` (``cli``)."""
