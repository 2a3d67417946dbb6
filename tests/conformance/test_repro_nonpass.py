"""Issue 33, Deliver 5: a reproducer for every non-PASS (ERROR, CRASH, TIMEOUT too, not only
FAIL); ``repro.py`` works from any directory and, when the backend is not importable from there,
says how to make it importable (one line, exit 2); a mistyped ``--backend`` is one line, exit 2;
``ReproducerError`` is one of the project's errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import synthetic_catalog as syn

from tilefoundry.conformance.report import ReproducerError
from tilefoundry.conformance.runner import run
from tilefoundry.errors import TilefoundryError

HERE = Path(__file__).resolve().parent
CASE = "spec/binary/max-orders-signed-zeros/f32"

BACKEND = textwrap.dedent('''
    import numpy as np

    from tilefoundry.conformance.backend import Capabilities
    from tilefoundry.semantics.formats import DType


    class MaxBackend:  # np.maximum: max(-0, +0) is its first operand (a FAIL)
        name = "max"

        def capabilities(self):
            return Capabilities(ops=frozenset({"Binary.max"}), dtypes=frozenset({DType.F32}))

        def compile(self, module, entry):
            return module[entry].body

        def run(self, body, inputs):
            return np.maximum(*inputs).astype(np.float32)


    class RaisingBackend(MaxBackend):  # an ERROR
        def run(self, body, inputs):
            raise ValueError("boom in my backend")
''')


def _status(d: Path) -> str:
    return json.loads((d / "case.json").read_text())["status"]


def test_reproducer_error_is_a_tilefoundry_error():
    assert issubclass(ReproducerError, TilefoundryError)


def test_error_crash_and_timeout_get_a_reproducer_too(tmp_path):
    ids = ["flaky/segv", "flaky/hang", "flaky/raise", "flaky/garbage", "elementwise/add/f32"]
    cat = syn.build_catalog(0)
    res = run("flaky_backend:factory", [cat[i] for i in ids], jobs=2, timeout_s=8.0,
              out_jsonl=tmp_path / "r.jsonl", repro_dir=tmp_path / "repro")
    v = res.verdicts()
    assert v == {"flaky/segv": "CRASH", "flaky/hang": "TIMEOUT", "flaky/raise": "ERROR",
                 "flaky/garbage": "FAIL", "elementwise/add/f32": "PASS"}, v
    by_id = {r["id"]: r for r in res.records}
    for cid, verdict in v.items():
        if verdict == "PASS":
            assert "repro" not in by_id[cid]
            continue
        d = tmp_path / "repro" / by_id[cid]["repro"]
        assert _status(d) == verdict, cid
        assert (d / "repro.py").is_file() and (d / "input_0.npy").is_file()
        assert (d / "BUG.md").read_text().startswith(f"# {cid}: {verdict} on backend")
    assert len(list((tmp_path / "repro").iterdir())) == 4  # one folder per case, none twice


def _run_in(work: Path, spec: str, monkeypatch, tmp_path: Path):
    monkeypatch.chdir(work)  # the user's directory: the backend is importable from here
    res = run(spec, "quick", case_globs=[CASE], timeout_s=60, out_jsonl=tmp_path / "r.jsonl",
              repro_dir=tmp_path / "repro")
    (rec,) = res.records
    return tmp_path / "repro" / rec["repro"], rec["verdict"]


def _replay(d: Path, *args: str, cwd: Path, pythonpath: str | None = None):
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, str(d / "repro.py"), *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120)


def test_repro_py_from_another_directory_says_how_to_make_the_backend_importable(
        tmp_path, monkeypatch):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (work / "my_backend.py").write_text(BACKEND)
    d, verdict = _run_in(work, "my_backend:MaxBackend", monkeypatch, tmp_path)
    assert verdict == "FAIL"
    # from the run's directory it replays
    p = _replay(d, "--backend", "my_backend:MaxBackend", cwd=work)
    assert p.returncode == 1 and "FAIL" in p.stdout, p.stdout + p.stderr
    # from anywhere else: one line, exit 2, the way to make it importable (no traceback)
    p = _replay(d, "--backend", "my_backend:MaxBackend", cwd=elsewhere)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr
    assert "cannot import 'my_backend'" in p.stderr and \
        f"the run was started in {work}, which holds it: PYTHONPATH={work} python " in p.stderr
    # ... and following it works
    p = _replay(d, "--backend", "my_backend:MaxBackend", cwd=elsewhere, pythonpath=str(work))
    assert p.returncode == 1 and "FAIL" in p.stdout, p.stdout + p.stderr
    # a mistyped backend name: one line, exit 2, the closest built-in
    p = _replay(d, "--backend", "refrence", cwd=elsewhere)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and \
        "did you mean 'reference'?" in p.stderr, p.stderr
    p = _replay(d, "--backend", "reference", cwd=elsewhere)  # the built-in runs from anywhere
    assert p.returncode == 0 and "PASS" in p.stdout, p.stdout + p.stderr


def test_an_error_reproducer_replays_the_backends_exception(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "my_backend.py").write_text(BACKEND)
    d, verdict = _run_in(work, "my_backend:RaisingBackend", monkeypatch, tmp_path)
    assert verdict == "ERROR" and _status(d) == "ERROR"
    p = _replay(d, "--backend", "my_backend:RaisingBackend", cwd=tmp_path,
                pythonpath=str(work))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "ValueError: boom in my backend" in p.stderr  # its traceback: the reproduction
    assert "ERROR: the backend raised ValueError: boom in my backend" in p.stdout
    p = _replay(d, "--recorded", cwd=tmp_path)  # nothing recorded to judge
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and \
        "has no recorded outputs to judge" in p.stderr, p.stderr
    p = _replay(d, "--backend", "my_backend:MaxBackend", cwd=tmp_path, pythonpath=str(work))
    assert p.returncode == 1 and "FAIL" in p.stdout  # the other backend runs on the same case
