"""``--backend torch-cuda`` (issue 22, deliverable 7): a built-in name, and fork-safe — the
runner loads the backend in its own process before forking the workers, so loading it must not
initialise the CUDA runtime (D253)."""

from __future__ import annotations

import os

import pytest

from tilefoundry.cli import main
from tilefoundry.conformance.backend import BUILTIN, load_backend

torch = pytest.importorskip("torch")


def test_loading_asks_nvml_and_initialises_no_cuda(monkeypatch):
    monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    seen = []

    def is_available():
        seen.append(os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"))
        return True

    monkeypatch.setattr(torch.cuda, "is_available", is_available)
    b = load_backend("torch-cuda")
    assert "torch-cuda" in BUILTIN
    assert b.name == "torch-cuda" and b.device == "cuda"
    assert seen == ["1"]  # the NVML-based check, which creates no CUDA context
    assert "PYTORCH_NVML_BASED_CUDA_CHECK" not in os.environ  # restored
    b.capabilities()
    assert not torch.cuda.is_initialized()


def test_without_cuda_it_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    rc = main(["conformance", "run", "--backend", "torch-cuda", "--jsonl", "r.jsonl"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "device 'cuda' asked for, but torch.cuda.is_available() is False" in err, err
    assert not (tmp_path / "r.jsonl").exists()
