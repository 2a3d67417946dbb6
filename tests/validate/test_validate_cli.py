"""``tilefoundry validate``: outcomes, exit codes, bounds, errors and the reproducer."""

from __future__ import annotations

import json

import pytest

from tilefoundry.cli import main
from tilefoundry.errors import InvalidArgumentError
from tilefoundry.validate.passes import Bounds, validate_program
from tilefoundry.validate.planted import SAMPLES

SPEC = "tilefoundry.validate.planted:SAMPLE_MODULE"


def test_clean_program_exits_0_and_names_every_pass(capsys):
    assert main(["validate", SPEC, "diff", "--shape", "3", "--shape", "3"]) == 0
    out = capsys.readouterr().out
    for p in ("typeinfer", "elaborate", "canonicalize", "lower", "fuse", "schedule"):
        assert p in out
    assert "fuse          valid" in out and "lower         valid" in out
    assert "elaborate     valid" in out  # D479: the typed entry read against the elaborated
    assert "typeinfer     unsupported" in out and "typeinfer rewrites nothing" in out


def test_planted_bug_exits_1_with_counterexample_and_reproducer(capsys, tmp_path):
    rc = main(["validate", SPEC, "diff", "--shape", "3", "--shape", "3", "--plant",
               "edge_mask_off_by_one", "--repro-dir", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert rc == 1
    assert "fuse          invalid" in out and "differing output elements: t0[2]" in out
    assert "0x" in out  # inputs as hex bits
    meta = json.loads((tmp_path / "r" / "case.json").read_text())
    assert meta["backend"] == "kernel-interp"
    from tilefoundry.conformance.report import load_reproducer

    rp = load_reproducer(tmp_path / "r")
    assert rp is not None


def test_json_report(capsys):
    assert main(["validate", SPEC, "diff", "--shape", "2", "--shape", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [p["pass"] for p in d["passes"]][-2:] == ["fuse", "schedule"]


def test_shape_outside_bounds_is_unsupported_with_reason():
    m, e, _ = SAMPLES["swap_operands"]  # lane-wise (sub / div): the larger bound applies (D517)
    rep = validate_program(m, e, [(65,), (65,)])
    assert {p.outcome.status for p in rep.passes} == {"unsupported"}
    why = rep.passes[0].outcome.reason
    assert "65 elements" in why and "--max-elems-lanewise" in why, why
    rep = validate_program(m, e, [(17,), (17,)], bounds=Bounds(max_elems_lanewise=16))
    assert {p.outcome.status for p in rep.passes} == {"unsupported"}
    assert "17 elements" in rep.passes[0].outcome.reason and "--max-elems" in \
        rep.passes[0].outcome.reason
    for b in (Bounds(), Bounds(max_elems=32)):
        assert validate_program(m, e, [(17,), (17,)], bounds=b).status("fuse") == "valid"


def test_a_program_that_combines_lanes_keeps_the_smaller_bound():
    m, e, _ = SAMPLES["reassociate_ordered_tree"]  # a sum: its queries grow with the row
    rep = validate_program(m, e, [(17,)])
    assert {p.outcome.status for p in rep.passes} == {"unsupported"}
    why = rep.passes[0].outcome.reason
    assert "17 elements" in why and "not lane-wise (a Reduce" in why, why


def test_default_shapes_bind_dimvars_at_the_bound():
    m, e, _ = SAMPLES["swap_operands"]
    assert validate_program(m, e, bounds=Bounds(max_dim=3)).shapes == [(3,), (3,)]


@pytest.mark.parametrize("argv,msg", [
    (["--plant", "nope"], "unknown planted bug 'nope'"),
    (["--plant", "drop_all_reduce"], "--plant drop_all_reduce: a mesh bug mutates a compiled "
                                     "sharded program's MeshProgram"),
    (["--max-dim", "0"], "max_dim must be a positive int"),
    (["--shape", "3y"], "write extents joined by 'x'"),
])
def test_user_errors_are_one_line_exit_2(capsys, argv, msg):
    assert main(["validate", SPEC, "diff", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_bad_bounds_argument_raises_project_error():
    with pytest.raises(InvalidArgumentError, match="timeout_ms"):
        Bounds(timeout_ms=-1)


def test_solver_timeout_is_failed_to_prove_and_fails_ci():
    """A query Z3 cannot finish in 1 ms: 'failed to prove', exit 0 without --ci, 1 with it."""
    from tilefoundry.validate.passes import PassResult, ValidationReport
    from tilefoundry.validate.refine import Outcome

    m, e, shapes = SAMPLES["drop_rounding"]
    from tilefoundry.compiler.fusion import fuse
    from tilefoundry.validate.planted import plant

    rep = validate_program(m, e, shapes, bounds=Bounds(timeout_ms=1),
                           fuse_pass=lambda p, c: plant("drop_rounding", fuse(p, c)))
    assert rep.status("fuse") == "failed to prove", rep.text()
    assert "timeout" in next(p.outcome.reason for p in rep.passes if p.name == "fuse")
    assert rep.exit_code() == 0 and rep.exit_code(ci=True) == 1
    fake = ValidationReport("f", [], [PassResult("fuse", Outcome("failed to prove", "t"))])
    assert fake.exit_code() == 0 and fake.exit_code(ci=True) == 1


def test_malformed_shapes_are_the_projects_error():
    from tilefoundry.errors import TilefoundryError

    m, e, _ = SAMPLES["swap_operands"]
    with pytest.raises(TilefoundryError, match=r"shapes\[0\] axis 0 must be a non-negative int"):
        validate_program(m, e, [(-1,), (3,)])
    with pytest.raises(InvalidArgumentError, match="expected a Module"):
        validate_program("not a module", e)
