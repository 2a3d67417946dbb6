"""Translation validation of sharded programs (D534, docs/validate.md "Sharded programs"): the
mesh driver on terms agrees with the reference evaluator and the mesh program on terms with
kernel-interp; quick-tier sharded programs are valid pass by pass; wrong mesh programs (an
all-reduce dropped, a launch's operands swapped, a Partial completed with the wrong
reduction, a split Gather's rows kept on a device that does not own them: the planted suite's
mesh bugs, ``validate/planted.py``) are invalid with a counterexample that reproduces on the
conformance backends; what is not encoded is unsupported by name."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from tilefoundry.compiler.lower_mesh import compile_mesh
from tilefoundry.conformance.catalog import build_catalog
from tilefoundry.semantics.evaluator.mesh import Sharded, unshard
from tilefoundry.validate.mesh_passes import (
    agreement_mesh,
    check_mesh_lowering,
    validate_sharded,
)
from tilefoundry.validate.passes import Bounds, validate_case, validate_program
from tilefoundry.validate.planted import MESH_SAMPLES, plant, planted_backend

B = Bounds(timeout_ms=5_000, narrow=False)


@pytest.fixture(scope="module")
def cases() -> dict:
    return {c.id: c for c in build_catalog(0).tier("quick")}


def _built(cases: dict, cid: str):
    m, e, xs = cases[cid].build()
    return m, e, list(xs)


#: quick-tier sharded programs whose every pass the validator proves: Split elementwise ops on
#: 1-D and 2-D meshes, a reduction over a split axis, a split-K matmul (Partial(sum) completed
#: by an all-reduce), all-to-all, Partial(max) completion, host loops carrying Partials, Reshape
#: of sharded values
VALID = ["sharded/elementwise/split-neg-add-allgather/f32",
         "sharded/elementwise/mesh2d-split-split/bf16",
         "sharded/reduce/split-axis-sum/f32", "sharded/reduce/split-axis-max/bf16",
         "sharded/matmul/split-k-partial-sum/i32", "sharded/reshard/split0-to-split1/fp8e4m3",
         "spec/reshard/partial-max-completion/f32", "sharded/loop/partial-sum/mesh2/trips3/i32",
         "sharded/loop/all-to-all/mesh2x2/trips3/i32", "sharded/reshape/partial-sum/bf16",
         "sharded/partial-pieces/max-nan-signed-zero/f16"]


@pytest.mark.parametrize("cid", VALID)
def test_sharded_programs_validate_pass_by_pass(cases, cid: str) -> None:
    m, e, xs = _built(cases, cid)
    rep = validate_sharded(m, e, [tuple(x.shape) for x in xs], B)
    got = {p.name: p.outcome.status for p in rep.passes}
    assert got == {"typeinfer": "unsupported", "elaborate": "valid", "canonicalize": "valid",
                   "lower": "valid", "fuse": "valid", "schedule": "valid"}, rep.text()


@pytest.mark.parametrize("cid", ["sharded/partial-completion-feeds/mul/bf16",
                                 "sharded/partial-pieces/max-nan-signed-zero/f16",
                                 "sharded/loop/partial-sum/mesh2x2/trips3/f32",
                                 "sharded/reshape/split-refined-outer-position/f32",
                                 "sharded/reshard/split0-to-split1/bf16",
                                 "spec/reshard/partial-max-completion/bf16",
                                 "sharded/gather/split-axis-partial-sum/bf16"])
def test_encodings_agree_with_the_reference_and_kernel_interp(cases, cid: str) -> None:
    """The source (the mesh driver on terms) gives the reference evaluator's logical outputs
    and the target (the mesh program on terms) kernel-interp's, on the case's inputs (a
    Partial(max) input given as different pieces per device among them) and on random ones."""
    m, e, xs = _built(cases, cid)
    assert agreement_mesh(m, e, xs) == []
    rng = np.random.default_rng(7)

    def rand(x):
        if isinstance(x, Sharded):  # different pieces on every device
            return Sharded.from_devices(x.layout, rand(x.data))
        if isinstance(x, np.ndarray) and (x.dtype.kind == "f" or "float" in str(x.dtype)):
            return (rng.standard_normal(x.shape) * 3).astype(x.dtype)
        return x

    other = [rand(x) for x in xs]
    assert any(o is not x for o, x in zip(other, xs, strict=True))
    assert agreement_mesh(m, e, other) == []


# ---------------------------------------------------------------------------------------------
# wrong mesh programs
# ---------------------------------------------------------------------------------------------
def _planted(cases, bug: str) -> tuple:
    """Mesh bug ``bug`` of the planted suite (``validate/planted.py``) in its sample's compiled
    mesh program, whose clean lowering the validator proves first (so an ``invalid`` is the
    bug's)."""
    m, e, xs = _built(cases, MESH_SAMPLES[bug])
    c = compile_mesh(m, e, [x.shape for x in xs], "interp", fuse=False)
    assert check_mesh_lowering(m, e, c.hir, c, timeout_ms=10_000).status == "valid"
    bad = plant(bug, c.program, verify=False)
    assert bad is not None, f"{bug}: no site in {MESH_SAMPLES[bug]}"
    return m, e, dataclasses.replace(c, program=bad)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and \
        np.array_equal(a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}"))


def _check(m, e, c, bug: str) -> object:
    """Invalid with a counterexample whose replay differs, and that reproduces through the
    conformance backends: on its inputs the clean ``kernel-interp`` gives the reference's
    values, the planted backend (fused launches) other values or an error."""
    from tilefoundry.compiler.backends import KernelInterpBackend
    from tilefoundry.errors import TilefoundryError

    out = check_mesh_lowering(m, e, c.hir, c, timeout_ms=10_000)
    assert out.status == "invalid", (out.status, out.reason)
    cx = out.counterexample
    assert cx is not None and cx.differing and cx.entry_inputs is not None

    def run(backend) -> list[np.ndarray]:
        r = backend.run(backend.compile(m, e), list(cx.entry_inputs))
        return [np.asarray(x) for x in (r if isinstance(r, tuple) else (r,))]

    clean = run(KernelInterpBackend())
    assert all(_same_bits(g, np.asarray(r).astype(g.dtype))
               for g, r in zip(clean, cx.src.values(), strict=True))
    try:
        bad = run(planted_backend(bug))
    except TilefoundryError as err:  # raises where the reference runs, as the replay did
        assert f"raised {type(err).__name__}" in " ".join(cx.differing), (err, cx.differing)
        return out
    assert not all(_same_bits(g, b) for g, b in zip(clean, bad, strict=True))
    return out


def test_a_dropped_all_reduce_is_invalid(cases) -> None:
    """Split-K matmul without the all-reduce of its Partial(sum): each device keeps its own
    partial product; the replay's replica check raises where the reference runs."""
    m, e, c = _planted(cases, "drop_all_reduce")
    out = _check(m, e, c, "drop_all_reduce")
    assert "raised" in " ".join(out.counterexample.differing)


def test_swapped_launch_operands_are_invalid(cases) -> None:
    """neg(x) + y computed as neg(y) + x on every device of a 2 x 3 mesh."""
    m, e, c = _planted(cases, "swap_launch_operands")
    _check(m, e, c, "swap_launch_operands")


def test_a_partial_completed_with_the_wrong_reduction_is_invalid(cases) -> None:
    """Partial(max) pieces completed as a sum (the slot's layout says Partial(sum))."""
    m, e, c = _planted(cases, "wrong_partial_reduction")
    (ar,) = [s for s in c.program.collectives() if s.kind == "all_reduce"]
    assert c.program.slot_map()[ar.srcs[0]].layout.partials == {0: "sum"}
    _check(m, e, c, "wrong_partial_reduction")


# ---------------------------------------------------------------------------------------------
# what is not encoded
# ---------------------------------------------------------------------------------------------
def test_a_gather_along_a_split_axis_is_valid_and_a_wrong_ownership_is_invalid(cases) -> None:
    """Gather from a row-split x: each device gathers the rows it owns (its local indices, 0
    elsewhere) and writes -0 at the others, a Partial(sum) completed by an all-reduce; an index
    out of range is the reference's evaluation error (not compared there). With the mask's
    block size wrong (device 0 keeps every row it gathered, owned or not) it is invalid."""
    cid = MESH_SAMPLES["gather_wrong_ownership"]
    m, e, xs = _built(cases, cid)
    rep = validate_sharded(m, e, [tuple(x.shape) for x in xs], B)
    assert all(p.outcome.status == "valid" for p in rep.passes[1:]), rep.text()
    lower = next(p.outcome for p in rep.passes if p.name == "lower")
    assert any("out of range" in a for a in lower.abstractions), lower.abstractions
    m, e, c = _planted(cases, "gather_wrong_ownership")
    (gm,) = [s for s in c.program.collectives() if s.kind == "gather_mask"]
    assert gm.attrs[1] == gm.attrs[0]  # the block size is the global extent
    _check(m, e, c, "gather_wrong_ownership")


@pytest.mark.parametrize("cid", ["special/sharding/local/f32", "special/sharding/local/bf16",
                                 "spec/local/shape-contracts-split-axes/f32"])
def test_the_shape_and_rank_of_a_local_view_are_validated(cases, cid: str) -> None:
    """HIR Local: "The current device's local view of a sharded tensor" — a device-varying
    value (the reference's PerDevice) whose shape and rank every device shares (D540): the
    ShapeOf / Rank of a Local view of a split value is validated pass by pass (canonicalize
    folds them to constants)."""
    m, e, xs = _built(cases, cid)
    rep = validate_sharded(m, e, [tuple(x.shape) for x in xs], B)
    assert all(p.outcome.status == "valid" for p in rep.passes[1:]), rep.text()


def test_other_uses_of_a_local_view_are_unsupported_by_name() -> None:
    """Only the shape and rank of a device-varying value are encoded: an arithmetic use of a
    Local view is "unsupported" naming the op (the reference keeps the result per device)."""
    from tilefoundry.semantics.ir import Call, Var
    from tilefoundry.semantics.ops import Unary
    from tilefoundry.semantics.ops.math import UnaryKind
    from tilefoundry.validate import mesh as vm
    from tilefoundry.validate.encode import Unsupported

    x = vm.SymVarying(SimpleNamespace(axis_extents=(2,)), np.empty((2, 2), object), "f32")
    call = Call(Unary(UnaryKind.NEG), (Var("v"),))
    with pytest.raises(Unsupported, match=r"Unary of a device-varying value \(from Local\)"):
        vm.mesh_hook(call, [x], {}, set())


def test_a_sharded_case_above_the_bound_is_unsupported_with_it(cases) -> None:
    rep = validate_case(cases["sharded/elementwise/split-neg-add-allgather/f32"],
                        Bounds(max_elems=8))
    assert all(p.outcome.status == "unsupported" and "a sharded program: input 0 has 24 "
               "elements" in p.outcome.reason for p in rep.passes), rep.text()


def test_validate_program_names_the_bound_a_sharded_program_is_above(cases) -> None:
    """The library call (and ``tilefoundry validate --shape``) checks a sharded program's
    logical shapes against the bound as ``validate_case`` does ("unsupported" naming it), rather
    than handing the mesh pipeline a program of any size."""
    module, entry, inputs = cases["sharded/elementwise/split-neg-add-allgather/f32"].build()
    shapes = [tuple(x.shape) for x in inputs]
    rep = validate_program(module, entry, shapes, bounds=Bounds(max_elems=8))
    assert all(p.outcome.status == "unsupported" and "a sharded program: input 0 has 24 "
               "elements" in p.outcome.reason for p in rep.passes), rep.text()


def test_validate_program_takes_the_mesh_pipeline_for_a_sharded_program(cases) -> None:
    """The library call (and so ``tilefoundry validate``) routes a program with a
    ShardLayout-typed value to the mesh pipeline instead of refusing it at elaborate."""
    m, e, xs = _built(cases, "sharded/reduce/split-axis-sum/f32")
    # 16 x 4 logical elements: inside a bound of 64 (above the default 16, where it is named)
    rep = validate_program(m, e, [tuple(x.shape) for x in xs], bounds=Bounds(max_elems=64))
    assert rep.status("lower") == "valid" and rep.status("schedule") == "valid", rep.text()


def test_a_launch_with_run_time_check_probes_is_validated_with_them_named(cases) -> None:
    """A launch whose lowering added a run-time check kernel returns its probe buffers after
    its results (``lower.RunChecks.probed``): the results are compared, the probes named as
    not compared (this case crashed the validator at the larger bound before)."""
    from tilefoundry.validate.refine import PROBES_NOT_COMPARED

    rep = validate_case(cases["program/seed0/sharded/17"], Bounds(max_elems=32,
                                                                  timeout_ms=5_000))
    lower = next(p.outcome for p in rep.passes if p.name == "lower")
    assert lower.status == "valid" and PROBES_NOT_COMPARED in lower.abstractions, rep.text()


def test_a_sharded_counterexample_becomes_a_reproducer_the_runner_reloads(cases, tmp_path):
    """An invalid `lower` of a sharded program is written as a conformance reproducer whose
    inputs are the entry's (``Sharded`` values where the parameter is sharded): it reloads,
    and the reference on its inputs differs from the recorded (wrong) observation. A launch's
    fuse counterexample is refused by name (its inputs are the launch's)."""
    from tilefoundry.conformance.report import load_reproducer
    from tilefoundry.errors import TilefoundryError
    from tilefoundry.semantics.evaluator.core import evaluate
    from tilefoundry.validate.passes import PassResult, ValidationReport
    from tilefoundry.validate.refine import Outcome
    from tilefoundry.validate.repro import write_validation_reproducer

    m, e, c = _planted(cases, "swap_launch_operands")
    out = _check(m, e, c, "swap_launch_operands")
    xs = _built(cases, MESH_SAMPLES["swap_launch_operands"])[2]
    rep = ValidationReport(e, [tuple(x.shape) for x in xs], sharded=True)
    rep.passes.append(PassResult("lower", out))
    path = write_validation_reproducer(tmp_path / "cx", m, e, rep)
    m2, e2, inputs, _meta = load_reproducer(path)
    assert all(isinstance(x, Sharded) for x in inputs), [type(x) for x in inputs]
    r = evaluate(m2, e2, inputs)
    ref = unshard(r) if isinstance(r, Sharded) else np.asarray(r)
    (obs,) = sorted(path.glob("observed*.npy"))
    observed = np.load(obs)
    assert ref.shape == observed.shape, (ref.shape, observed.shape)
    assert not np.array_equal(ref.view(np.uint32), observed.view(np.uint32))
    bad = ValidationReport(e, rep.shapes, sharded=True)
    bad.passes.append(PassResult("fuse", Outcome("invalid", "x", 0.0,
                                                 dataclasses.replace(out.counterexample,
                                                                     entry_inputs=None))))
    with pytest.raises(TilefoundryError, match="one launch's kernel IR"):
        write_validation_reproducer(tmp_path / "cx2", m, e, bad)
