"""The locked test environment (issue 14): requirements/lock.txt pins every package `make test`
installs, matches pyproject.toml both ways, and a mismatch names the package and the refresh
command."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("lockfile", ROOT / "requirements" / "lockfile.py")
lockfile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lockfile)


def test_the_lock_matches_pyproject():
    assert lockfile.check() == []


@pytest.mark.skipif(os.environ.get("TILEFOUNDRY_LOCKED") != "1",
                    reason="only `make test` installs from the lock (make test-latest does not)")
def test_the_installed_environment_is_the_locked_one():
    assert lockfile.check(installed_must_match=True) == []


def test_torch_is_pinned_to_the_cpu_build():
    pins = lockfile.read_lock()
    assert str(pins["torch"]) == "2.13.0+cpu"
    assert {"numpy", "ml-dtypes", "z3-solver", "hypothesis", "sympy", "pytest", "ruff",
            "mpmath", "packaging"} <= set(pins)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of pyproject.toml and the lock the check reads instead of the real ones."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(lockfile.LOCK, tmp_path / "lock.txt")
    real = lockfile.direct_requirements
    monkeypatch.setattr(lockfile, "direct_requirements",
                        lambda: real(tmp_path / "pyproject.toml"))
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_dependency_added_to_pyproject_only_is_named(project):
    _edit(project / "pyproject.toml", '"sympy>=1.12",', '"sympy>=1.12",\n    "six>=1",')
    problems = lockfile.check(project / "lock.txt")
    assert problems and all(p.startswith("six: ") and "make lock" in p for p in problems)
    assert any(p.startswith("six: required by pyproject.toml (six>=1) but not pinned")
               for p in problems)


def test_a_pin_added_to_the_lock_only_is_named(project):
    with open(project / "lock.txt", "a") as f:
        f.write("six==1.17.0\n")  # nothing here requires six (attrs: the ray extra does)
    problems = lockfile.check(project / "lock.txt")
    assert problems == [p for p in problems if p.startswith("six: pinned in lock.txt but "
                                                            "nothing in pyproject.toml requires")]
    assert len(problems) == 1 and "make lock" in problems[0]


def test_a_transitive_pin_removed_from_the_lock_is_named(project):
    _edit(project / "lock.txt", "sortedcontainers==", "# sortedcontainers==")
    problems = lockfile.check(project / "lock.txt")
    assert len(problems) == 1 and problems[0].startswith("sortedcontainers: needed by hypothesis")


def test_a_pin_outside_the_range_is_named(project):
    _edit(project / "pyproject.toml", '"ml_dtypes>=0.5",', '"ml_dtypes>=0.5,<0.7",')
    pinned = str(lockfile.read_lock(project / "lock.txt")["ml-dtypes"])
    problems = lockfile.check(project / "lock.txt")
    if pinned.startswith("0.7"):
        assert len(problems) == 1 and "does not admit" in problems[0]
        assert problems[0].startswith("ml_dtypes: lock.txt pins 0.7")
    else:  # the lock was refreshed below 0.7: the edit must then be accepted
        assert problems == []


def test_a_malformed_line_is_named(project):
    with open(project / "lock.txt", "a") as f:
        f.write("numpy>=2\n")
    with pytest.raises(lockfile.LockError, match=re.escape("'numpy>=2' is not 'name==version'")):
        lockfile.check(project / "lock.txt")


def test_the_ray_extra_is_pinned_and_its_own_pins_are_marked():
    pins, marked = lockfile.read_lock(), lockfile.lock_extras()
    assert str(pins["ray"]) == "2.40.0" and marked["ray"] == "ray"
    assert "numpy" not in marked  # the test environment's pins are not the extra's
    assert all(e in lockfile.OPTIONAL_EXTRAS for e in marked.values())


def test_an_optional_pin_without_its_mark_is_named(project):
    if not lockfile._installed("ray"):
        pytest.skip("the ray extra is not installed: its closure cannot be walked here")
    _edit(project / "lock.txt", "msgpack==1.2.4  # extra: ray", "msgpack==1.2.4")
    problems = lockfile.check(project / "lock.txt")
    assert len(problems) == 1 and problems[0].startswith("msgpack: needed by the ray extra "
                                                         "only but not marked")


def test_without_the_optional_extra_installed_its_marked_pins_pass(project, monkeypatch):
    real = lockfile._installed
    monkeypatch.setattr(lockfile, "_installed", lambda n: n != "ray" and real(n))
    assert lockfile.check(project / "lock.txt") == []
    with open(project / "lock.txt", "a") as f:  # a stray pin is still one
        f.write("six==1.17.0\n")
    problems = lockfile.check(project / "lock.txt")
    assert len(problems) == 1 and problems[0].startswith("six: pinned in lock.txt but")


def test_make_test_installs_the_test_extras_ray_included():
    """The Makefile's install rule ($(STAMP), what `make test` and CI run) installs exactly the
    extras the lock check holds to their pins: ray among them, so the Ray executor's tests run
    in CI instead of skipping."""
    make = (ROOT / "Makefile").read_text()
    rule = make[make.index("$(STAMP):"):make.index("\ninstall:")]
    assert re.findall(r"-e '\.\[([^]]+)\]'", rule) == ["$(EXTRAS)"], rule
    extras = re.findall(r"^EXTRAS := ([A-Za-z0-9_,-]+)$", make, re.M)
    assert len(extras) == 1 and set(extras[0].split(",")) == set(lockfile.TEST_EXTRAS)
    stamp = next(ln for ln in make.splitlines() if ln.startswith("STAMP :="))
    assert "$(EXTRAS)" in stamp  # changing the extras reinstalls an existing .venv
    assert "ray" in lockfile.TEST_EXTRAS and "ray" in lockfile.OPTIONAL_EXTRAS


def test_a_missing_ray_pin_is_named_where_make_test_installs_it(monkeypatch):
    """`make test` installs the ray extra, so its pins (ray's own and the ones marked
    '# extra: ray') must be installed at their versions there."""
    real = lockfile.metadata.version

    def version(name: str) -> str:
        if lockfile.canonicalize_name(name) in ("ray", "msgpack"):
            raise lockfile.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(lockfile.metadata, "version", version)
    problems = lockfile.check(installed_must_match=True)
    pins = lockfile.read_lock()
    for name in ("ray", "msgpack"):
        assert f"{name}: pinned {pins[name]} in lock.txt but not installed; reinstall with " \
               f"`make install`" in problems


def test_the_ray_tests_fail_instead_of_skipping_under_make_test(tmp_path):
    """Without ray, tests/conformance/test_ray_executor.py skips in a plain pytest run but is a
    collection error (a failing run) under TILEFOUNDRY_LOCKED=1, what `make test` sets."""
    import subprocess
    import sys

    fake = tmp_path / "ray"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'ray'\", name='ray')\n")
    target = str(ROOT / "tests" / "conformance" / "test_ray_executor.py")
    outs = {}
    for locked in ("0", "1"):
        env = {**os.environ, "PYTHONPATH": str(tmp_path), "TILEFOUNDRY_LOCKED": locked}
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p",
                            "no:cacheprovider", target], capture_output=True, text=True,
                           env=env, cwd=ROOT, timeout=300)
        outs[locked] = (p.returncode, p.stdout + p.stderr)
    assert outs["0"][0] in (0, 5) and "SKIPPED" in outs["0"][1], outs["0"]
    assert outs["1"][0] not in (0, 5), outs["1"]
    assert "TILEFOUNDRY_LOCKED=1 (make test) but ray is not importable" in outs["1"][1]
