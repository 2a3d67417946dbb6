"""The conformance case catalog: ``build_catalog(seed)``.

Every case is a deterministic recipe (``conformance/cases.py``): ``build()`` returns
``(module, "f", inputs)`` with plain C-contiguous numpy inputs (ml_dtypes storage for the low
precision formats; a sharded parameter takes the *global* array, which a mesh-capable backend
distributes as the parameter's ShardLayout says). Building the catalog builds no program — the
builders run when a case runs, so a worker process rebuilds the catalog and picks one id cheaply.

Families of cases (the first segment of the id):

* ``spec/...`` — **spec-derived**: each cites the sentence it tests in ``Case.spec`` (the HIR spec,
  the Tile design, or ARCHITECTURE.md's numeric contracts, which decide what the missing companion
  documents leave open). Empty-reduction identities, NaN and signed-zero order of max / min,
  round half to even, integer wraparound, the fold_left / fold_right ``[1, 2, 3]`` example,
  Gather's batched element rule, CacheUpdate's write window, TopK tie-breaking, the fused Silu,
  RoPE's rotate-half form, casts' overflow modes, f8e8m0 rounding, single rounding, Partial
  completion by Reshard (sharded), loops, calls and dispatch.
* ``cast/<src>-><dst>/[<overflow>/][<rounding>/]exhaustive`` — every bit pattern of f16, bf16,
  fp8e4m3, fp8e5m2, f8e8m0, i8, u8 and bool through every destination and mode (one case per
  (src, dst, overflow, rounding)); ``.../structured`` — the f32 patterns that put a tie, a carry
  and a sticky bit at every rounding position for every exponent
  (``numerics_sweep.structured_f32_patterns``); ``.../near-ties`` — i32 / i64 integers next to
  the destination's rounding ties.
* ``binary/<fp8>/<kind>/all-pairs`` — all 65,536 pairs of an fp8 format through add, sub, mul,
  div, min, max and the comparisons; ``unary/<dtype>/<kind>/all-patterns`` — every pattern of
  f16, bf16 and the fp8 formats through every float Unary kind.
* ``spec/tile/...`` / ``special/tile/...`` — the tile family (Select / ``ite``, Bitcast, Scan)
  and the fold_right orientation example (``conformance/catalog/tile.py``).
* ``special/<family>/<op>/<dtype>`` — every op of ``ALL_OPS`` over special values (NaN, ±inf,
  ±0, subnormals, max finite, rounding ties, half-integers) in every float dtype it takes
  (f32, bf16, f16 always; the fp8 formats for the elementwise and structural ops).
* ``sharded/...`` — sharded programs (Split inputs, Partial results completed by Reshard,
  per-device elementwise, redistribution, ``Local``); they need ``Capabilities.mesh`` (the runner
  derives NOT_SUPPORTED from ``requirements(module).mesh``).
* ``spec/run-time-check/<check>/...`` (and ``sharded/run-time-check/...``) — **expected-error**
  cases (``Case.expect_error``): inputs that fail a run-time check of the spec (a Gather index or
  RoPE position out of range, a CacheUpdate or InsertSlice window out of bounds, an extent
  outside a dispatch envelope); a backend passes by raising ``RunTimeCheckError``
  (``backend.py``), all in the quick tier; see ``_run_time_check_cases``.
* ``spec/tile/...`` and ``special/tile/...`` — the ``tile`` family's seeded, masked and custom
  reductions (``conformance/catalog/tile_reduce.py``): the seed's position per policy, empty and
  fully masked fibers returning the seed, masked lanes skipped, Welford / product / difference
  reducers, special values.
* ``program/seed<S>/<i>`` — hypothesis-generated programs, drawn from ``seed`` when the program
  generator (``tilefoundry.oracle.programs``) is importable; see ``_program_cases``.
* ``capability/<key>/<n>`` — with ``build_catalog(seed, backend_caps=caps)`` (every run: the
  runner passes the judged backend's capabilities): programs composed only of the claimed ops,
  dtypes and modes — chains and DAGs of >= 3 of them with narrow-float rounding points in the
  middle, reductions feeding elementwise ops, casts between claimed dtypes
  (``conformance/catalog/capability.py``); ``key`` hashes the capability set and ``seed``.
* ``kernels/<pattern>/...`` — the patterns real models run (SwiGLU, RMSNorm, softmax, RoPE,
  attention, cross-entropy, GEMM epilogues, MX fp8 quantization, ...) at model shapes, each
  quoting its convention (``conformance/catalog/kernels.py``).

Determinism: ids never depend on the machine; inputs depend only on the case id (a SHA-256 of
the id seeds the case's generator), except generated programs, whose ids carry the seed. The
same ``seed`` therefore gives the same ids and the same input bits.

Tiers: ``quick`` (the spec cases, the special-value cases, the sharded cases, a representative
subset of the sweeps, 25 generated programs, the expected-error cases, the coverage fill, the
kernels family's small shapes) ⊂ ``full`` (everything). The sizes and the reference's time are
in docs/conformance.md (held to this catalog by ``tests/conformance/test_conformance_doc.py``);
``tilefoundry conformance list --tier quick`` counts them per family.
"""

from __future__ import annotations

from tilefoundry.conformance.cases import Case, Catalog
from tilefoundry.conformance.catalog.build import (
    ENTRY,
    GENERATED_PER_TIER,
    Acc,
    Built,
    int_special_values,
    special_values,
)
from tilefoundry.conformance.catalog.generated import _program_cases, _program_generator
from tilefoundry.conformance.catalog.run_time_checks import _run_time_check_cases
from tilefoundry.conformance.catalog.sharded import _sharded_cases, _sharded_loop_cases
from tilefoundry.conformance.catalog.spec import _spec_cases
from tilefoundry.conformance.catalog.special import _special_cases
from tilefoundry.conformance.catalog.sweeps import _arith_sweeps, _cast_sweeps

__all__ = ["ENTRY", "GENERATED_PER_TIER", "build_catalog", "int_special_values",
           "special_values"]


def build_catalog(seed: int = 0, *, backend_caps=None) -> Catalog:
    """Every case of the conformance suite (``full``), the ``quick`` ones marked; see the
    module docstring. Deterministic in ``seed``; cheap (no program is built here, except the
    first capability-directed one, to see that the claim admits any).

    ``backend_caps`` (the ``Capabilities`` being judged; the runner passes them) adds the
    capability-directed programs of that claim (``capability/<key>/<n>``,
    ``conformance/catalog/capability.py``) to both tiers."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        from tilefoundry.errors import InvalidArgumentError

        raise InvalidArgumentError(f"build_catalog: seed must be a non-negative int, got "
                                   f"{seed!r}")
    acc = Acc()
    _spec_cases(acc)
    _cast_sweeps(acc)
    _arith_sweeps(acc)
    _special_cases(acc)
    _sharded_cases(acc)
    _sharded_loop_cases(acc)
    _program_cases(acc, seed)
    _run_time_check_cases(acc)
    from tilefoundry.conformance.catalog.coverage import coverage_cases

    coverage_cases(acc)
    from tilefoundry.conformance.catalog.tile import tile_cases

    tile_cases(acc)
    from tilefoundry.conformance.catalog.tile_reduce import tile_reduce_cases

    tile_reduce_cases(acc)
    from tilefoundry.conformance.catalog.declared_reduce import declared_reduce_cases

    declared_reduce_cases(acc)
    from tilefoundry.conformance.catalog.topk_reduce import topk_reduce_cases

    topk_reduce_cases(acc)
    from tilefoundry.conformance.catalog.tile_scan_flags import tile_scan_flag_cases

    tile_scan_flag_cases(acc)
    from tilefoundry.conformance.catalog.tile_ite import tile_ite_nan_cases

    tile_ite_nan_cases(acc)
    from tilefoundry.conformance.catalog.tile_gather import tile_gather_cases

    tile_gather_cases(acc)
    from tilefoundry.conformance.catalog.tile_mma_acc import tile_mma_acc_cases

    tile_mma_acc_cases(acc)
    from tilefoundry.conformance.catalog.kernels import kernel_cases

    kernel_cases(acc.add)
    _quick_fill(acc)
    if backend_caps is not None:
        from tilefoundry.conformance.catalog.capability import capability_cases

        acc.cases.extend(capability_cases(backend_caps, seed))
    return Catalog(acc.cases)


def pool_case(i: int) -> Case:
    """Program ``i`` of the coverage pool (``coverage.POOL_SEED``): a generated program the
    quick tier's fill may choose (``program/cover/<i>``, full tier unless chosen)."""
    from tilefoundry.conformance.coverage import POOL_SEED

    gen = _program_generator()
    sharded = i % 5 == 4

    def build() -> Built:
        return gen(POOL_SEED + i, sharded=sharded)

    return Case(f"program/cover/{i}", "sharding" if sharded else "program", build, (), (),
                f"Generated program (tilefoundry.oracle.programs.generate_program"
                f"({POOL_SEED + i}{', sharded=True' if sharded else ''})), chosen to cover "
                f"what the rest of the quick tier does not", "full")


def _quick_fill(acc: Acc) -> None:
    """The quick tier's coverage fill (``conformance/quick_fill.json``, written by
    ``tilefoundry conformance coverage --write-fill``): full-tier cases promoted to quick and
    pool programs added, so the quick tier exercises every op feature and cast boundary class
    the full tier and the program pool do (``tests/conformance/test_coverage.py``)."""
    import dataclasses

    from tilefoundry.conformance.coverage import load_fill

    fill = load_fill()
    promote = set(fill.get("promote", ()))
    acc.cases = [dataclasses.replace(c, tier="quick") if c.id in promote else c
                 for c in acc.cases]
    if _program_generator() is None:
        return
    for i in fill.get("programs", ()):
        acc.cases.append(dataclasses.replace(pool_case(int(i)), tier="quick"))
