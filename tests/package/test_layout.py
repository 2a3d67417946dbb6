"""Packaging: one import namespace, every package folder listed, the console command works."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import tilefoundry

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_mapped():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = cfg["package-dir"]
    listed = set(cfg["packages"])
    for top in ("semantics", "smt", "oracle", "compiler", "conformance", "validate"):
        assert mapped[f"tilefoundry.{top}"] == top
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top).parts
            assert ".".join(("tilefoundry", top, *rel)) in listed, init


def test_subpackages_import_under_one_namespace():
    import tilefoundry.compiler
    import tilefoundry.conformance
    import tilefoundry.oracle
    import tilefoundry.semantics
    import tilefoundry.smt

    for m in (tilefoundry.semantics, tilefoundry.smt, tilefoundry.oracle, tilefoundry.compiler,
              tilefoundry.conformance):
        assert Path(m.__file__).parent.name == m.__name__.rsplit(".", 1)[1]


def test_version_command():
    out = subprocess.run([sys.executable, "-m", "tilefoundry", "--version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == f"tilefoundry {tilefoundry.__version__}"
    assert tilefoundry.__version__ == "0.1.0"


def test_selfcheck_subcommand_is_registered():
    from tilefoundry.cli import build_parser

    args = build_parser().parse_args(["selfcheck", "--seed", "3", "--f32-samples", "10"])
    assert args.seed == 3 and args.f32_samples == 10
