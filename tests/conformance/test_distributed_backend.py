"""--backend distributed (issue 19): sharded cases on real torch.distributed (gloo) ranks.

* the quick tier's sharded cases (the sharding family and the sharded/ spec/reshard spec/local
  program/*/sharded ids, 233) through ``runner.run("distributed", ...)``: no ERROR / CRASH /
  TIMEOUT, and the FAILs are exactly the documented findings (docs/findings.md), each with its
  exact signature;
* a rank killed with SIGKILL mid-case is that case's CRASH, a rank that hangs is its TIMEOUT; the
  run continues and the next case passes (0 cases lost);
* bad input: a one-line error naming the problem and the variable that fixes it.
"""

from __future__ import annotations

import socket

import pytest

from tilefoundry.conformance import runner
from tilefoundry.errors import InvalidArgumentError, TilefoundryError

pytest.importorskip("torch.distributed")

SHARDED = ["sharded/*", "spec/reshard/*", "spec/local/*", "program/*/sharded/*"]

#: the FAILs of the quick tier's sharded cases, by case id: a substring of the record's message
#: that pins the finding (docs/findings.md)
FINDINGS = {
    # gloo sums bf16 in bf16 (rounding per step): the 3-device completion leaves the admitted set
    "sharded/partial-completion-order/mesh3-exp/bf16":
        "FAIL under enclosure(Reshard(Partial(sum) completion); width median 2 / max 2 ulp): "
        "2/12 elements rejected; worst at index [2, 2]: expected 9.9375 (0x411f), observed "
        "9.8125 (0x411d)",
    # gloo's MAX / MIN keep a number over a NaN piece (F21), from the catalog's per-device
    # pieces cases the quick tier's coverage fill promotes
    "sharded/partial-pieces/max-nan-signed-zero/f16":
        "FAIL under exact: 4/8 elements rejected; worst at index [0]: expected nan (0x7e00), "
        "observed 1.0 (0x3c00)",
    "sharded/partial-pieces/min-nan-signed-zero/f16":
        "FAIL under exact: 2/8 elements rejected; worst at index [0]: expected nan (0x7e00), "
        "observed 1.0 (0x3c00)",
    # (F22, the reference's all-gather interleaving the blocks of a split position, is fixed:
    # the split-axis fold_left cases PASS on the ranks)
}


GLOO_MAX_CASE = "finding/gloo-partial-max-nan-signed-zero/f32"
GLOO_MAX_SIGNATURE = ("FAIL under exact: 2/6 elements rejected; worst at index [0]: expected nan "
                      "(0x7fc00000), observed -1.0 (0xbf800000)")


def _gloo_max_case():
    """Partial(max) pieces that differ by device (the catalog's come from ``shard``, so every
    device holds the same value and gloo's max is never put to the test): NaN on device 1,
    -0 on device 0 and +0 elsewhere. gloo's MAX keeps 1.0 and -0 (docs/findings.md)."""
    import numpy as np

    from tilefoundry.conformance.cases import Case
    from tilefoundry.semantics.evaluator.mesh import Sharded

    (base,) = _cases(["sharded/partial-max-completion-feeds/neg/f32"])

    def build():
        module, entry, _ = base.build()
        layout = module[entry].params[0].type.layout
        pieces = np.array([[1.0, -0.0, 1.0, 1.0, 1.0, 1.0],
                           [np.nan, 0.0, 1.0, 1.0, 1.0, 1.0],
                           [1.0, 0.0, 1.0, 1.0, 1.0, 1.0]], np.float32)
        return module, entry, [Sharded.from_devices(layout, pieces)]

    return Case(id=GLOO_MAX_CASE, family="sharding", build=build, ops=base.ops,
                dtypes=base.dtypes, spec=base.spec)


def _cases(globs):
    cat = runner.load_catalog(0)
    return runner.select_cases(cat, "quick", globs)


def test_quick_tier_sharded_cases(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFOUNDRY_DIST_RANKS", "8")  # one pool serves meshes of 1..8 devices
    monkeypatch.delenv("TILEFOUNDRY_DIST_FAULT", raising=False)
    cases = _cases(SHARDED)
    assert len(cases) == 96  # the quick tier's sharded ids with its coverage fill (7 host-loop cases)
    # and the rest of the sharding family (generated cover programs, special/sharding/*)
    ids = {c.id for c in cases}
    cases += [c for c in runner.select_cases(runner.load_catalog(0), "quick")
              if c.family == "sharding" and c.id not in ids]
    assert len(cases) == 239  # 240 before the 2026-12-05 coverage fill (D513)
    # the findings always run: those the current coverage fill does not promote, from the full tier
    have = {c.id for c in cases}
    missing = [k for k in FINDINGS if k not in have]
    cases += runner.select_cases(runner.load_catalog(0), "full", missing) if missing else []
    assert set(FINDINGS) <= {c.id for c in cases}
    cases = [*cases, _gloo_max_case()]
    res = runner.run("distributed", cases, jobs=1, timeout_s=150, seed=0,
                     out_jsonl=tmp_path / "r.jsonl")
    by = {r["id"]: r for r in res.records}
    assert len(by) == len(cases)  # no case lost
    counts = res.counts()
    assert counts.get("ERROR", 0) == counts.get("CRASH", 0) == counts.get("TIMEOUT", 0) == 0, \
        res.bad[:3]
    # not supported: only what the backend does not claim (the tile family's extensions) and
    # a pool program that turned out to hold no mesh
    unsupported = [r for r in res.records if r["verdict"] == "NOT_SUPPORTED"]
    from tilefoundry.semantics.ops import ALL_OPS

    tile = [c.__name__ for c in ALL_OPS if c.FAMILY == "tile"]
    assert all("the program has no mesh" in r["message"] or
               any(f"'{t}'" in r["message"] or f" {t}" in r["message"] for t in tile)
               for r in unsupported), unsupported[:3]
    fails = {k: r for k, r in by.items() if r["verdict"] == "FAIL"}
    assert set(fails) == {*FINDINGS, GLOO_MAX_CASE}
    assert GLOO_MAX_SIGNATURE in fails[GLOO_MAX_CASE]["message"]
    for k, sig in FINDINGS.items():
        assert sig in fails[k]["message"], (k, fails[k]["message"])
    # the run-time check of a Gather split on its axis is reported as the protocol's error
    assert by["sharded/run-time-check/index_range/gather-split-axis-index-at-extent/f32"][
        "verdict"] == "PASS"
    assert counts["PASS"] + counts.get("UNJUDGED", 0) + len(unsupported) == \
        len(cases) - len(FINDINGS) - 1
    assert len(unsupported) <= 25, len(unsupported)  # 21 with the 2026-12-02 fill (Select)


#: the quick tier's generated sharded programs that hold a Select (the tile family's, whose
#: operands broadcast to the result: the per-device driver aligns them like Binary's)
#: the quick tier's generated sharded programs that hold a Select (the test checks they do)
SELECT_PROGRAMS = ["program/seed0/sharded/17", "program/seed0/sharded/21",
                   "program/seed0/sharded/41"]


def test_select_is_claimed_and_its_sharded_programs_pass_on_the_ranks(tmp_path, monkeypatch):
    """The backend shares the reference's per-device driver and mesh rules (D371), so it claims
    Select (it withdrew it while its own dispatch aligned Binary's operands only) and the
    Select programs PASS on the ranks, not NOT_SUPPORTED."""
    from tilefoundry.conformance.distributed_backend import DistributedBackend

    monkeypatch.delenv("TILEFOUNDRY_DIST_FAULT", raising=False)
    assert "Select" in DistributedBackend().capabilities().ops
    cases = _cases(SELECT_PROGRAMS)
    assert sorted(c.id for c in cases) == sorted(SELECT_PROGRAMS)
    from tilefoundry.semantics.ir import Call, reachable

    for c in cases:  # each holds a Select (the generator's seed 0 draws them)
        module, _, _ = c.build()
        assert any(isinstance(n, Call) and type(n.op).__name__ == "Select"
                   for f in module.functions if f.body is not None
                   for n in reachable(f.body)), c.id
    res = runner.run("distributed", cases, jobs=1, timeout_s=150, seed=0,
                     out_jsonl=tmp_path / "r.jsonl")
    assert [r["verdict"] for r in res.records] == ["PASS"] * len(cases), res.records


def _two_device_cases():
    return _cases(["sharded/elementwise/split-neg-add-allgather/f32",
                   "spec/reshard/partial-sum-completion/f32"])


def test_rank_killed_then_rank_hung_then_pass(tmp_path, monkeypatch):
    """Case 1: rank 1 SIGKILLs itself at its first collective -> CRASH; case 2 (a fresh worker
    and process group): rank 1 hangs there -> TIMEOUT; case 3 passes. 0 cases lost."""
    killed, hung = tmp_path / "killed", tmp_path / "hung"
    monkeypatch.setenv("TILEFOUNDRY_DIST_FAULT", f"kill:1:{killed},hang:1:{hung}")
    monkeypatch.delenv("TILEFOUNDRY_DIST_RANKS", raising=False)
    a, b = _two_device_cases()
    from tilefoundry.conformance.cases import Case

    again = Case(id=a.id + "#again", family=a.family, build=a.build, ops=a.ops,
                 dtypes=a.dtypes, spec=a.spec)
    res = runner.run("distributed", [a, b, again], jobs=1, timeout_s=25, seed=0,
                     out_jsonl=tmp_path / "r.jsonl")
    assert [r["verdict"] for r in res.records] == ["CRASH", "TIMEOUT", "PASS"], res.records
    assert killed.read_text() == "kill rank 1\n" and hung.read_text() == "hang rank 1\n"
    crash, timeout = res.records[0]["message"], res.records[1]["message"]
    assert "SIGKILL" in crash and "backend.run" in crash, crash
    assert "exceeded the 25 s limit during backend.run" in timeout, timeout


def test_compiled_local_target_runs_the_mesh_program_on_the_ranks(tmp_path, monkeypatch):
    """``TILEFOUNDRY_DIST_LOCAL_TARGET=kernel-interp``: each rank runs the compiler's
    per-device lowering (its launches on the rank's blocks, its collective steps as gloo's):
    an all-reduce (split-K), an all-to-all, a gather along a split axis on a 2x2 mesh and its
    run-time check PASS; the Partial(max) pieces case FAILs exactly as gloo's MAX does with the
    reference local target (docs/findings.md F21: the completion is gloo's either way). Host
    loops (D259) run on every rank around real collectives: a Partial(sum) completion and a
    split-axis reduce every iteration on the 2x2 mesh, an all-to-all round trip on 4 ranks, a
    zero-trip Split -> Broadcast loop; they PASS (judged against the reference's loop)."""
    monkeypatch.setenv("TILEFOUNDRY_DIST_LOCAL_TARGET", "kernel-interp")
    monkeypatch.setenv("TILEFOUNDRY_DIST_RANKS", "4")
    monkeypatch.delenv("TILEFOUNDRY_DIST_FAULT", raising=False)
    cases = _cases(["sharded/matmul/split-k-partial-sum/i32", "sharded/reshard/split0-to-split1/f32",
                    "sharded/gather/split-axis-partial-sum/f32",
                    "sharded/run-time-check/index_range/gather-split-axis-index-at-extent/f32"])
    cases += runner.select_cases(runner.load_catalog(0), "full",
                                 ["sharded/partial-pieces/max-nan-signed-zero/f32"])
    loops = ["sharded/loop/partial-sum/mesh2x2/trips3/f32",
             "sharded/loop/all-to-all/mesh4/trips3/i32",
             "sharded/loop/split-to-broadcast/mesh2/trips0/i32"]
    cases += runner.select_cases(runner.load_catalog(0), "full", loops)
    assert len(cases) == 8
    res = runner.run("distributed", cases, jobs=1, timeout_s=150, seed=0,
                     out_jsonl=tmp_path / "r.jsonl")
    got = {r["id"]: r for r in res.records}
    assert set(loops) <= set(got)
    pieces = got.pop("sharded/partial-pieces/max-nan-signed-zero/f32")
    assert {r["verdict"] for r in got.values()} == {"PASS"}, got
    assert pieces["verdict"] == "FAIL"
    assert ("4/8 elements rejected; worst at index [0]: expected nan (0x7fc00000), observed "
            "1.0 (0x3f800000)") in pieces["message"], pieces["message"]


def _busy_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s, s.getsockname()[1]


def test_bad_input_one_line_errors(monkeypatch, tmp_path):
    from tilefoundry.conformance.distributed_backend import DistributedBackend

    for k in ("TILEFOUNDRY_DIST_BACKEND", "TILEFOUNDRY_DIST_PORT", "TILEFOUNDRY_DIST_FAULT",
              "TILEFOUNDRY_DIST_RANKS", "TILEFOUNDRY_DIST_MAX_RANKS"):
        monkeypatch.delenv(k, raising=False)
    import torch

    def one_line(e):
        msg = str(e.value)
        assert "\n" not in msg
        return msg

    # nccl without GPUs (this machine has none; with GPUs the nccl path is not there yet)
    monkeypatch.setenv("TILEFOUNDRY_DIST_BACKEND", "nccl")
    with pytest.raises(InvalidArgumentError) as e:
        DistributedBackend()
    msg = one_line(e)
    assert "nccl" in msg and "TILEFOUNDRY_DIST_BACKEND=gloo" in msg
    if not torch.cuda.is_available():
        assert "GPU" in msg or "no 'nccl'" in msg
    # before any case, through the runner
    with pytest.raises(TilefoundryError) as e:
        runner.run("distributed", _two_device_cases(), out_jsonl=tmp_path / "r.jsonl")
    assert "TILEFOUNDRY_DIST_BACKEND=gloo" in one_line(e)
    monkeypatch.setenv("TILEFOUNDRY_DIST_BACKEND", "nosuch")
    with pytest.raises(InvalidArgumentError) as e:
        DistributedBackend()
    assert "'nosuch'" in one_line(e)
    monkeypatch.delenv("TILEFOUNDRY_DIST_BACKEND")

    # a rendezvous port in use
    s, port = _busy_port()
    try:
        with pytest.raises(InvalidArgumentError) as e:
            DistributedBackend(port=port)
        assert one_line(e) == (f"distributed: the rendezvous port {port} is in use; set "
                               f"TILEFOUNDRY_DIST_PORT to a free port (or unset it to pick one)")
        monkeypatch.setenv("TILEFOUNDRY_DIST_PORT", str(port))
        with pytest.raises(InvalidArgumentError) as e:
            DistributedBackend()
        assert f"port {port} is in use" in one_line(e)
    finally:
        s.close()
        monkeypatch.delenv("TILEFOUNDRY_DIST_PORT")

    # a mesh larger than the ranks available: refused before any process starts
    b = DistributedBackend(max_ranks=1)
    (case,) = _cases(["spec/reshard/partial-sum-completion/f32"])
    m, entry, ins = case.build()
    with pytest.raises(InvalidArgumentError) as e:
        b.run(b.compile(m, entry), ins)
    assert one_line(e) == ("distributed: the program's mesh has 2 devices but only 1 ranks "
                           "are available; raise TILEFOUNDRY_DIST_MAX_RANKS (one process per "
                           "device)")
    assert b.pools_started == 0

    # a local target that is not there (reference, kernel-interp and simd are)
    with pytest.raises(InvalidArgumentError) as e:
        DistributedBackend(local_target="triton")
    assert "TILEFOUNDRY_DIST_LOCAL_TARGET=reference" in one_line(e)
    monkeypatch.setenv("TILEFOUNDRY_DIST_FAULT", "explode:1")
    with pytest.raises(InvalidArgumentError) as e:
        DistributedBackend()
    assert "kill:<rank>:<marker file>" in one_line(e)
    monkeypatch.setenv("TILEFOUNDRY_DIST_FAULT", "kill:1:/tmp/m,hang:x:/tmp/m")
    with pytest.raises(InvalidArgumentError):
        DistributedBackend()
