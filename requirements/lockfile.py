"""The test environment's lock: every package ``make test`` installs, pinned.

The package keeps version ranges in ``pyproject.toml`` (it is a library); ``make test``,
``make selfcheck`` and ``.ci/run`` install with ``requirements/lock.txt`` as a pip constraints
file, so a fresh machine gets the environment CI proved. ``make test-latest`` ignores the lock.

    python requirements/lockfile.py refresh   # rebuild the lock (= ``make lock``)
    python requirements/lockfile.py check     # does the lock match pyproject.toml and this venv?

``refresh`` installs ``.[dev,torch]`` with the newest allowed versions into a scratch venv and
writes its ``pip freeze --all`` (less pip and tilefoundry itself). ``check`` is what
``tests/package/test_lock.py`` runs: every requirement of pyproject.toml (dependencies and the
``dev`` / ``torch`` extras) is pinned by a version it admits, and every pin is needed by one of
them, through the installed distributions' own requirement metadata.

The optional extras of ``OPTIONAL_EXTRAS`` (``ray``: ``--executor ray``) are pinned too, for
``pip install -c requirements/lock.txt '.[ray]'``: their pins that the core environment
(``EXTRAS``) does not need carry the comment ``# extra: ray``. ``check`` verifies them through the
metadata where the extra is installed, and otherwise only that they are marked. ``make test``
installs the extras of ``TEST_EXTRAS`` — the core ones and ``ray``, so CI runs the Ray executor's
tests (``tests/conformance/test_ray_executor.py`` fails, never skips, under
``TILEFOUNDRY_LOCKED=1`` without ray) — and ``check(installed_must_match=True)`` (what ``make
test`` runs) holds every pin of those extras, the ``# extra: ray`` ones included, to the
installed version.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"
EXTRAS = ("dev", "torch")  # the test environment's extras (triton is not installed on the CPU)
OPTIONAL_EXTRAS = ("ray",)  # pinned; the pins only they need are marked '# extra: NAME'
#: what `make test` installs (the Makefile's $(STAMP) rule, checked by tests/package/test_lock.py)
TEST_EXTRAS = (*EXTRAS, "ray")
_EXTRA_MARK = re.compile(r"#\s*extra:\s*([A-Za-z0-9_-]+)")
REFRESH = "make lock  (python requirements/lockfile.py refresh)"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*(?:#.*)?$")


class LockError(Exception):
    """The lock does not match pyproject.toml or the installed environment."""


def direct_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[Requirement]:
    proj = tomllib.loads(pyproject.read_text())["project"]
    reqs = list(proj.get("dependencies", []))
    for extra in EXTRAS:
        reqs += proj.get("optional-dependencies", {}).get(extra, [])
    return [Requirement(r) for r in reqs]


def optional_requirements(pyproject: Path = ROOT / "pyproject.toml"
                          ) -> dict[str, list[Requirement]]:
    """``{extra: its requirements}`` of the ``OPTIONAL_EXTRAS``."""
    opt = tomllib.loads(pyproject.read_text())["project"].get("optional-dependencies", {})
    return {e: [Requirement(r) for r in opt.get(e, [])] for e in OPTIONAL_EXTRAS}


def lock_extras(path: Path = LOCK) -> dict[str, str]:
    """``{canonical name: extra}`` of the pins marked ``# extra: NAME``."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        m, e = _PIN.match(line.strip()), _EXTRA_MARK.search(line)
        if m and e:
            out[canonicalize_name(m.group(1))] = e.group(1)
    return out


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def read_lock(path: Path = LOCK) -> dict[str, Version]:
    """``{canonical name: version}`` of a lock file; a line that is not ``name==version`` is an
    error naming the line."""
    pins: dict[str, Version] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        m = _PIN.match(s)
        if not m:
            raise LockError(f"{path.name}:{n}: {s!r} is not 'name==version'; regenerate the lock "
                            f"with {REFRESH}")
        name = canonicalize_name(m.group(1))
        if name in pins:
            raise LockError(f"{path.name}:{n}: {m.group(1)} is pinned twice")
        pins[name] = Version(m.group(2))
    return pins


def closure(reqs: list[Requirement]) -> dict[str, list[str]]:
    """Every distribution the requirements need in this environment, with the chain that needs
    it (``{name: [requirer, ...]}``), walked through the installed packages' metadata."""
    env = default_environment()
    need: dict[str, list[str]] = {}
    todo = [(r, "pyproject.toml") for r in reqs]
    while todo:
        req, by = todo.pop()
        if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in need:
            need[name].append(by)
            continue
        need[name] = [by]
        try:
            sub = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue  # check() reports it as not installed
        extras = req.extras
        for s in sub:
            r = Requirement(s)
            if r.marker is not None and not any(
                    r.marker.evaluate({**env, "extra": e}) for e in (extras or {""})):
                continue
            todo.append((Requirement(str(r).split(";")[0]), req.name))
    return need


def check(lock: Path = LOCK, *, installed_must_match: bool = False) -> list[str]:
    """The problems of the lock, each a sentence naming the package and the refresh command."""
    problems: list[str] = []
    pins = read_lock(lock)
    marked = lock_extras(lock)
    direct = direct_requirements()
    optional = optional_requirements()
    for req in [*direct, *(r for rs in optional.values() for r in rs)]:
        name = canonicalize_name(req.name)
        if name not in pins:
            problems.append(f"{req.name}: required by pyproject.toml ({req}) but not pinned in "
                            f"{lock.name}; refresh it with {REFRESH}")
        elif not req.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{req.name}: {lock.name} pins {pins[name]}, which pyproject.toml's "
                            f"{req} does not admit; refresh it with {REFRESH}")
    need = closure(direct)
    walked = {e for e, rs in optional.items() if all(_installed(r.name) for r in rs)}
    opt_need: dict[str, list[str]] = {}
    for e in walked:
        for name, by in closure(optional[e]).items():
            if name not in need:
                opt_need.setdefault(name, []).extend(by)
                if marked.get(name) != e:
                    problems.append(f"{name}: needed by the {e} extra only but not marked "
                                    f"'# extra: {e}' in {lock.name}; refresh it with {REFRESH}")
    for name in sorted(set(pins) - set(need)):
        e = marked.get(name)
        if name in opt_need or (e in OPTIONAL_EXTRAS and e not in walked):
            continue  # an optional extra's pin (not installed here: only its mark is checked)
        problems.append(f"{name}: pinned in {lock.name} but nothing in pyproject.toml requires "
                        f"it (directly or through another package); refresh it with {REFRESH}")
    for name in sorted((set(need) | set(opt_need)) - set(pins)):
        need.setdefault(name, opt_need.get(name, []))
        problems.append(f"{name}: needed by {', '.join(sorted(set(need[name])))} but not pinned "
                        f"in {lock.name}; refresh it with {REFRESH}")
    if installed_must_match:
        for name, want in sorted(pins.items()):
            if marked.get(name) not in (None, *TEST_EXTRAS) and name not in need:
                continue  # an optional extra `make test` does not install
            try:
                got = Version(metadata.version(name))
            except metadata.PackageNotFoundError:
                problems.append(f"{name}: pinned {want} in {lock.name} but not installed; "
                                f"reinstall with `make install`")
                continue
            if got.public != want.public or (want.local and got.local != want.local):
                problems.append(f"{name}: {got} installed but {lock.name} pins {want}; "
                                f"reinstall with `make install`")
    return problems


def refresh(lock: Path = LOCK) -> None:
    with tempfile.TemporaryDirectory(prefix="tilefoundry-lock-") as tmp:
        py = Path(tmp) / "bin" / "python"
        subprocess.run([sys.executable, "-m", "venv", tmp], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--upgrade", "setuptools"], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        f"{ROOT}[{','.join(EXTRAS)}]"], check=True)
        frozen = subprocess.run([str(py), "-m", "pip", "freeze", "--all"], check=True,
                                capture_output=True, text=True).stdout.splitlines()
        base = {ln for ln in frozen if _PIN.match(ln)}
        cons = Path(tmp) / "base.txt"
        cons.write_text("\n".join(sorted(base)) + "\n")
        for extra in OPTIONAL_EXTRAS:  # on top of the test environment, which stays as it is
            subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "-c", str(cons), f"{ROOT}[{extra}]"], check=True)
            more = subprocess.run([str(py), "-m", "pip", "freeze", "--all"], check=True,
                                  capture_output=True, text=True).stdout.splitlines()
            frozen += [f"{ln}  # extra: {extra}" for ln in more
                       if _PIN.match(ln) and ln not in base and ln not in frozen]
    keep = sorted((ln for ln in frozen if _PIN.match(ln) and canonicalize_name(
        ln.split("==")[0]) not in ("pip", "tilefoundry")), key=str.lower)
    py_ver = ".".join(map(str, sys.version_info[:2]))
    lock.write_text(
        "# The test environment's lock (pip constraints): every package `make test` installs.\n"
        f"# Generated by `{REFRESH}` on Python {py_ver}; do not edit by hand.\n"
        "# The package's own version ranges stay in pyproject.toml.\n" + "\n".join(keep) + "\n")
    print(f"wrote {lock} ({len(keep)} pins)")


def main(argv: list[str]) -> int:
    if argv[:1] == ["refresh"]:
        refresh()
        return 0
    if argv[:1] == ["check"]:
        problems = check(installed_must_match="--installed" in argv)
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
