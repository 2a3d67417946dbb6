"""The pytest plugin: ``pytest --tilefoundry-backend=SPEC`` runs the catalog as parametrized
tests; without the option it does nothing. Run in subprocesses (plugin autoloading off, the
plugin named with -p, so the result does not depend on how tilefoundry was installed)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def pytest_run(tmp_path: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, **extra_env, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p",
                           "tilefoundry.conformance.pytest_plugin", "-p", "no:cacheprovider",
                           "-q", "-rA", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_catalog_as_tests(tmp_path):
    r = pytest_run(tmp_path, "--tilefoundry-backend=flaky_backend:factory",
                   "--tilefoundry-catalog=synthetic_catalog:build_catalog",
                   "--tilefoundry-tier=full", "--tilefoundry-timeout=30",
                   "--tilefoundry-jobs=2", "-k", "not hang")
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    assert "6 failed, 7 passed, 1 skipped, 1 deselected" in out
    assert "PASSED tilefoundry-conformance::test_case[elementwise/add/f32]" in out
    assert "FAILED tilefoundry-conformance::test_case[flaky/segv] - CRASH" in out
    assert "NOT_SUPPORTED: dtype(s) ['i8'] not supported" in out
    assert "worst at [3]" in out  # the FAIL's worst element in the failure report


def test_manifest_xfail_and_marker_selection(tmp_path):
    """... and, without --tilefoundry-jsonl, the run leaves no scratch folder in the temporary
    directory (issue 22: the plugin left a /tmp/tilefoundry-* folder per run)."""
    (tmp_path / "m.toml").write_text('[[xfail]]\ncase = "flaky/garbage"\nreason = "known"\n')
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    r = pytest_run(tmp_path, "--tilefoundry-backend=flaky_backend:factory",
                   "--tilefoundry-catalog=synthetic_catalog:build_catalog",
                   "--tilefoundry-cases=flaky/garbage", "--tilefoundry-cases=cast/*",
                   "--tilefoundry-manifest=m.toml", "-m", "tilefoundry_conformance",
                   TMPDIR=str(scratch))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed, 1 xfailed" in r.stdout
    assert sorted(p.name for p in scratch.glob("tilefoundry-*")) == []


def test_inert_without_the_option(tmp_path):
    (tmp_path / "test_plain.py").write_text("def test_one():\n    assert True\n")
    r = pytest_run(tmp_path)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    assert "tilefoundry-conformance" not in r.stdout
    bad = pytest_run(tmp_path, "--tilefoundry-backend=no_such_pkg:factory")
    assert bad.returncode != 0 and "cannot import 'no_such_pkg'" in bad.stderr


def test_registered_as_a_pytest11_entry_point():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["pytest11"] == {
        "tilefoundry": "tilefoundry.conformance.pytest_plugin"}
