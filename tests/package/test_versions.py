"""Versions on every record (issue 14): the JSON-lines header, selfcheck and
``tilefoundry --version --verbose`` name numpy, ml_dtypes, torch, triton, z3, hypothesis, the
Python, the platform and torch's CPU capability."""

from __future__ import annotations

import json
import platform
from importlib import metadata

from tilefoundry.cli import main
from tilefoundry.versions import PACKAGES, environment

KEYS = {"tilefoundry", "python", "platform", "numpy", "ml_dtypes", "torch", "triton", "z3-solver",
        "hypothesis", "sympy", "torch_cpu_capability"}


def test_environment_names_every_version():
    env = environment()
    assert set(env) == KEYS
    assert env["numpy"] == metadata.version("numpy")
    assert env["ml_dtypes"] == metadata.version("ml_dtypes")
    assert platform.python_version() in env["python"]
    assert platform.machine() in env["platform"]
    import torch  # the test environment has torch: its capability must be read, not None

    assert env["torch_cpu_capability"] == str(torch.backends.cpu.get_cpu_capability())
    assert set(PACKAGES) < set(env)


def test_version_verbose_prints_them(capsys):
    assert main(["--version", "--verbose"]) == 0
    out = capsys.readouterr().out
    for k in KEYS:
        assert k in out, k
    assert metadata.version("ml_dtypes") in out


def test_plain_version_is_one_line(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip().count("\n") == 0


def test_jsonl_header_records_the_versions(tmp_path):
    out = tmp_path / "r.jsonl"
    rc = main(["conformance", "run", "--backend", "reference", "--cases", "spec/cast*",
               "--jsonl", str(out), "--no-progress"])
    assert rc == 0
    header = json.loads(out.read_text().splitlines()[0])
    assert header["type"] == "run"
    assert set(header["versions"]) == KEYS
    assert header["versions"]["ml_dtypes"] == metadata.version("ml_dtypes")
