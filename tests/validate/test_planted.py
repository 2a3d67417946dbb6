"""The planted-bug suite: each bug in the fuse pass is caught by the validator with a
counterexample that reproduces on the kernel-interp backend (the planted backend's output on
the counterexample's inputs differs from the clean backend's, which equals the source
program's). The mesh bugs' detection is tests/validate/test_mesh.py's ("wrong mesh programs");
here the suite's bookkeeping: names, samples, backends, refusals."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler.backends import KernelInterpBackend
from tilefoundry.compiler.fusion import fuse
from tilefoundry.validate.passes import Bounds, validate_program
from tilefoundry.validate.planted import (
    MESH_PLANTED,
    MESH_SAMPLES,
    PLANTED,
    SAMPLES,
    mesh_sample,
    plant,
    planted_backend,
)

CAUGHT = [b for b in PLANTED if b != "fold_mul_one"]


def _planted_fuse(bug):
    def fz(p, cfg):
        bad = plant(bug, fuse(p, cfg))
        assert bad is not None, f"{bug}: no site in the sample"
        return bad
    return fz


def _run(backend, module, entry, inputs):
    prog = backend.compile(module, entry)
    out = backend.run(prog, list(inputs))
    return out if isinstance(out, tuple) else (out,)


def _same(a, b) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    ua = np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")
    ub = np.ascontiguousarray(b).view(f"u{b.dtype.itemsize}")
    with np.errstate(all="ignore"):
        nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return (ua == ub) | nan


@pytest.mark.parametrize("bug", CAUGHT)
def test_planted_bug_is_caught_and_reproduces_on_kernel_interp(bug):
    module, entry, shapes = SAMPLES[bug]
    # a generous solver limit: the 4-lane tree-vs-fold query takes 2-25 s on a loaded machine
    rep = validate_program(module, entry, shapes, bounds=Bounds(timeout_ms=120_000),
                           fuse_pass=_planted_fuse(bug))
    assert rep.status("fuse") == "invalid", rep.text()
    assert rep.exit_code() == 1
    cx = next(p.outcome.counterexample for p in rep.passes if p.name == "fuse")
    assert cx.differing and cx.elements == sum(int(np.prod(s)) for s in shapes)
    inputs = list(cx.inputs.values())
    clean = _run(KernelInterpBackend(), module, entry, inputs)
    bad = _run(planted_backend(bug), module, entry, inputs)
    src = list(cx.src.values())
    for c, s in zip(clean, src, strict=True):
        assert _same(c, s).all()  # the clean backend computes the source program's values
    assert not all(_same(c, b).all() for c, b in zip(clean, bad, strict=True))


def test_fold_mul_one_is_proved_valid():
    """x * 1.0 -> x is no bug under the NaN-class rule: -0 * 1 = -0, NaN * 1 is NaN."""
    module, entry, shapes = SAMPLES["fold_mul_one"]
    rep = validate_program(module, entry, shapes, fuse_pass=_planted_fuse("fold_mul_one"))
    assert rep.status("fuse") == "valid", rep.text()


@pytest.mark.parametrize("bug", list(PLANTED))
def test_clean_pipeline_is_valid_on_the_samples(bug):
    module, entry, shapes = SAMPLES[bug]
    rep = validate_program(module, entry, shapes)
    assert rep.status("fuse") == "valid" and rep.status("canonicalize") == "valid"
    assert rep.status("schedule") in ("valid", "failed to prove"), rep.text()


def test_unknown_planted_bug_is_the_projects_error():
    from tilefoundry.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=r"unknown planted bug 'nope'.*drop_rounding"
                                                   r".*drop_all_reduce"):
        plant("nope", SAMPLES["swap_operands"][0])
    with pytest.raises(InvalidArgumentError, match=r"unknown planted bug 'nope'"):
        planted_backend("nope")
    with pytest.raises(InvalidArgumentError, match=r"unknown mesh planted bug 'swap_operands'"):
        mesh_sample("swap_operands")


def test_a_bug_given_the_other_kind_of_program_is_refused_by_name():
    """A mesh bug takes a MeshProgram, a fuse bug a kernel-IR Program: the other is refused,
    naming the bug, what it got and what to pass."""
    from tilefoundry.compiler.pipeline import compile
    from tilefoundry.errors import InvalidArgumentError

    module, entry, shapes = SAMPLES["swap_operands"]
    prog = compile(module, entry, shapes, "interp").program
    with pytest.raises(InvalidArgumentError, match=r"'drop_all_reduce' mutates a sharded "
                                                   r"program's MeshProgram.*got Program"):
        plant("drop_all_reduce", prog)
    with pytest.raises(InvalidArgumentError, match=r"'swap_operands' mutates a kernel-IR "
                                                   r"Program, got str"):
        plant("swap_operands", "not a program")


def test_every_bug_has_a_sample_and_a_backend_factory():
    """``--backend tilefoundry.validate.planted:<bug>`` names each bug's planted backend."""
    from tilefoundry.validate import planted

    assert set(MESH_SAMPLES) == set(MESH_PLANTED) and set(SAMPLES) == set(PLANTED)
    assert not set(PLANTED) & set(MESH_PLANTED)
    for bug in [*PLANTED, *MESH_PLANTED]:
        assert getattr(planted, bug)().name == f"planted-{bug}"


def test_a_backend_plants_only_its_own_kind_of_program():
    """A mesh bug's backend compiles single-device programs clean, a fuse bug's backend
    sharded ones: each kind's counts in the conformance runs are its own bugs'."""
    module, entry, _ = SAMPLES["swap_operands"]
    x = [np.array([1.0, 2.0, 3.0, 4.0], np.float32), np.array([0.5, 0.0, -1.0, 8.0], np.float32)]
    assert _same(_run(planted_backend("swap_launch_operands"), module, entry, x)[0],
                 x[0] - x[1]).all()
    assert not _same(_run(planted_backend("swap_operands"), module, entry, x)[0],
                     x[0] - x[1]).all()
    m, e, xs = mesh_sample("swap_launch_operands")
    clean = _run(KernelInterpBackend(), m, e, xs)
    assert all(_same(a, b).all() for a, b in zip(
        clean, _run(planted_backend("swap_operands"), m, e, xs), strict=True))
    assert not all(_same(a, b).all() for a, b in zip(
        clean, _run(planted_backend("swap_launch_operands"), m, e, xs), strict=True))


def test_a_lowering_bug_is_caught_against_the_hir_semantics():
    """The lower pass is checked against the HIR encoding (hir_smt): a lowered program with its
    sub's operands swapped is invalid, and the counterexample differs from the reference
    evaluator's value."""
    from tilefoundry.compiler.pipeline import TARGETS, State, run_passes
    from tilefoundry.validate.refine import check_lowering

    module, entry, shapes = SAMPLES["swap_operands"]
    st = State(module, entry, shapes, TARGETS["interp"])
    run_passes(st, ["typeinfer", "elaborate", "canonicalize", "lower"])
    assert check_lowering(module, entry, st.hir, st.program).status == "valid"
    bad = plant("swap_operands", st.program)
    o = check_lowering(module, entry, st.hir, bad)
    assert o.status == "invalid" and o.counterexample.differing
    ref = next(iter(o.counterexample.src.values()))  # "reference <output>"
    got = next(iter(o.counterexample.tgt.values()))
    assert not _same(ref, got).all()


def test_unencoded_hir_op_makes_lower_unsupported_by_name():
    from tilefoundry.semantics.dtypes import DType
    from tilefoundry.semantics.ops import CustomReduce

    from .helpers import module_of

    # (Conv2D, the example before D535, and a masked float tree sum, the one before D542, are
    # encoded: an unencoded configuration instead, a custom reducer's tree over more merge
    # trees than refinement enumerates per element)
    shapes = [(2, 4), (2, 3)]
    m = module_of(CustomReduce((1,), "welford", "unordered_tree", False),
                  [DType.F32, DType.F32], shapes)
    rep = validate_program(m, "f", shapes)
    lower = next(p.outcome for p in rep.passes if p.name == "lower")
    assert lower.status == "unsupported" and "CustomReduce(welford)" in lower.reason and \
        "more than 256 merge trees" in lower.reason, lower.reason


def _relabel(policy_from: str, policy_to: str):
    def fz(p, cfg):
        from dataclasses import replace as rp

        from tilefoundry.compiler import kir

        def fix(body):
            return tuple(rp(i, policy=policy_to) if isinstance(i, kir.Reduce)
                         and i.policy == policy_from else
                         rp(i, body=fix(i.body)) if isinstance(i, kir.TileLoop) else i
                         for i in body)
        f = fuse(p, cfg)
        return rp(f, steps=tuple(rp(s, body=fix(s.body)) for s in f.steps))
    return fz


def test_an_ordered_tree_refined_by_a_left_fold_is_valid():
    """A left fold is one bracketing in source order: inside ordered_tree's admitted set (the
    SIMD backend computes ordered_tree so, D189), so narrowing to it is a valid refinement."""
    module, entry, shapes = SAMPLES["reassociate_ordered_tree"]
    rep = validate_program(module, entry, shapes, bounds=Bounds(timeout_ms=120_000),
                           fuse_pass=_relabel("ordered_tree", "fold_left"))
    assert rep.status("fuse") == "valid", rep.text()


def test_a_left_fold_widened_to_an_ordered_tree_is_invalid():
    """The converse is a bug: the source fixes one order, the target admits others (the
    interpreter's member, the balanced tree, differs from the fold)."""
    from tilefoundry.semantics.dsl import DimVar, Tensor, f32, func, module, reduce_sum

    n = DimVar("N", 1, 64)

    @func
    def fold(x: Tensor[(n,), f32]) -> Tensor[(1,), f32]:
        return reduce_sum(x, (0,), policy="fold_left")

    rep = validate_program(module(fold), "fold", [(4,)], bounds=Bounds(timeout_ms=120_000),
                           fuse_pass=_relabel("fold_left", "ordered_tree"))
    assert rep.status("fuse") == "invalid", rep.text()
