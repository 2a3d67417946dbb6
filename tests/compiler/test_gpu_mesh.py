"""Sharded programs on the GPU backends (issue 37 item 4, D347): the per-device lowering
(``lower_mesh.compile_mesh``) runs every device's launches on the one device the backend has,
the collectives simulated on the host between them. Here on the CPU: the Triton backend
through Triton's interpreter and the CUDA backend's host emulation; on the H200 the same
code path runs the launches on the GPU (docs/compiler.md, "Sharded programs on one GPU")."""

from __future__ import annotations

import pytest

from tilefoundry.compiler import cuda_backend
from tilefoundry.compiler.backends import KernelInterpBackend
from tilefoundry.conformance.runner import run
from tilefoundry.conformance.selection import load_catalog, select_cases

# one case per kind of mesh step: a Partial(sum) / Partial(max) completion, a split-K matmul
# all-reduce, a reshard between split axes (all-to-all), a gather along a split axis with its
# run-time check, a host loop around collectives on a 2x2 mesh, and Local
CASES = ["spec/reshard/partial-sum-completion/bf16",
         "spec/reshard/partial-max-completion/f32",
         "sharded/matmul/split-k-partial-sum/i32",
         "sharded/reshard/split0-to-split1/fp8e4m3",
         "sharded/gather/split-axis-partial-sum/f32",
         "sharded/run-time-check/index_range/gather-split-axis-index-at-extent/f32",
         "sharded/loop/partial-sum/mesh2x2/trips3/f32",
         "special/sharding/local/bf16"]


def test_the_gpu_backends_claim_what_kernel_interp_claims_mesh_included() -> None:
    ref = KernelInterpBackend().capabilities()
    caps = cuda_backend.host_backend().capabilities()
    assert caps.mesh and "Local" in caps.ops and caps.ops == ref.ops


@pytest.mark.parametrize("backend", ["triton", "tilefoundry.compiler.cuda_backend:host_backend"])
def test_sharded_cases_run_and_pass(backend, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    cases = select_cases(load_catalog(0), "quick", CASES)
    assert sorted(c.id for c in cases) == sorted(CASES)
    res = run(backend, cases, jobs=1, timeout_s=300, out_jsonl=tmp_path / "r.jsonl")
    got = {r["id"]: r["verdict"] for r in res.records}
    assert got == dict.fromkeys(CASES, "PASS"), [r for r in res.records
                                                 if r["verdict"] != "PASS"]
