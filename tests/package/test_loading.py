"""One way to name an object on the command line (tilefoundry/loading.py, D252; issue 22,
deliverable 6): 'module:attr' and 'path/to/file.py:attr' everywhere (backend, compile, prove),
the current directory importable, one-line errors, --help with examples on every subcommand."""

from __future__ import annotations

import sys

import pytest

from tilefoundry.cli import main
from tilefoundry.errors import InvalidArgumentError
from tilefoundry.loading import load_object

KERNEL = '''from tilefoundry.semantics.dsl import *  # noqa: F403


@func
def f(x: Tensor[(8,), f32], y: Tensor[(8,), f32]):
    return x * y


mod = module(f)
'''

BACKEND = '''from tilefoundry.conformance.backend import ReferenceBackend


def factory():
    return ReferenceBackend()
'''


@pytest.fixture
def clean_path(monkeypatch):
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    yield
    for name in [n for n in sys.modules if n.startswith("tilefoundry_user_") or n == "cwdmod"]:
        del sys.modules[name]


def test_a_file_spec_and_a_module_in_the_current_directory(tmp_path, monkeypatch, clean_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cwdmod.py").write_text("VALUE = 41\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "k.py").write_text(KERNEL)
    assert load_object("cwdmod:VALUE", "x") == 41  # the current directory is importable
    m1 = load_object("sub/k.py:mod", "x")
    assert load_object(str(tmp_path / "sub" / "k.py") + ":mod", "x") is m1  # loaded once
    assert [f.name for f in m1.functions] == ["f"]


@pytest.mark.parametrize(("spec", "pattern"), [
    ("nope.py:x", "no such file 'nope.py'"),
    ("bad.py:x", "bad.py does not parse (line 1:"),
    ("good.py:VALEU", "'good.py' has no attribute 'VALEU' (closest: 'VALUE')"),
    ("good.py", "expected 'package.module:attr' or 'path/to/file.py:attr'"),
    ("no_such_pkg_xyz:f", "cannot import 'no_such_pkg_xyz'"),
    ("raises.py:x", "running raises.py raised ZeroDivisionError"),
])
def test_loading_errors_name_the_spec_and_the_problem(tmp_path, monkeypatch, clean_path, spec,
                                                      pattern):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text("def (:\n")
    (tmp_path / "good.py").write_text("VALUE = 1\n")
    (tmp_path / "raises.py").write_text("1 / 0\n")
    with pytest.raises(InvalidArgumentError) as e:
        load_object(spec, "--backend")
    assert str(e.value).startswith(f"--backend {spec!r}: ") and pattern in str(e.value), e.value


def test_backend_compile_and_prove_take_file_specs(tmp_path, monkeypatch, capsys, clean_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_backend.py").write_text(BACKEND)
    (tmp_path / "k.py").write_text(KERNEL)
    rc = main(["conformance", "run", "--backend", "./my_backend.py:factory", "--cases",
               "special/binary/add/f32", "--no-progress", "--jsonl", "r.jsonl"])
    out = capsys.readouterr().out
    assert rc == 0 and "result: PASS" in out, out
    assert main(["compile", "k.py:mod", "f", "--shape", "8", "--shape", "8"]) == 0
    assert "kernel(s) for target" in capsys.readouterr().out
    assert main(["compile", "k.py:nope", "f"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no attribute 'nope'" in err, err
    from tilefoundry.smt.cli import load_module_file

    assert [f.name for f in load_module_file("k.py:mod").functions] == ["f"]
    # a bare file path: `module` is the DSL's builder here, so its only Module is taken
    assert [f.name for f in load_module_file("k.py").functions] == ["f"]


@pytest.mark.parametrize("argv", [
    ["conformance", "run"], ["conformance", "fuzz"], ["conformance", "list"],
    ["conformance", "merge"], ["conformance", "diff"], ["conformance", "probe"],
    ["conformance", "coverage"], ["compile"], ["prove"], ["selfcheck"],
])
def test_every_subcommand_help_has_an_example(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out and f"tilefoundry {argv[0]}" in out, out
