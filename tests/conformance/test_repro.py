"""The reproducer writer (conformance/repro.py).

Issue 'oracle', Deliver 5: "a directory holding the minimal program as DSL source, the inputs as
raw bits (.npy plus hex in a text file), expected and observed values, the contract, and a
standalone repro.py that needs only tilefoundry and the backend to re-run the comparison."
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tilefoundry.conformance.repro import load_repro, rerun, write_repro
from tilefoundry.oracle.compare import FAIL, check_candidate
from tilefoundry.oracle.planted import buried_program, truncating_mul
from tilefoundry.oracle.reduce import reduce_failure
from tilefoundry.semantics.dtypes import to_bits


def test_reduced_failure_round_trips_through_a_standalone_reproducer(tmp_path):
    module, entry, inputs = buried_program(30, 0)
    r = reduce_failure(module, entry, inputs,
                       lambda m, e, xs: check_candidate(m, e, xs, truncating_mul).status == FAIL)
    observed = truncating_mul(r.module, r.entry, list(r.inputs))
    v = check_candidate(r.module, r.entry, list(r.inputs), truncating_mul)
    d = write_repro(tmp_path / "case", r.module, r.entry, r.inputs, v,
                    candidate="tilefoundry.oracle.planted:truncating_mul", observed=observed)
    names = {p.name for p in d.iterdir()}
    assert {"program.txt", "input_0.npy", "inputs.hex.txt", "expected_0.npy",
            "observed_0.npy", "verdict.txt", "repro.py", "case.json"} <= names
    assert not [n for n in names if n.endswith(".pkl")]
    assert "program_dsl.py" in names  # the minimal program as DSL source
    dsl_lines = [ln for ln in (d / "program_dsl.py").read_text().splitlines() if ln.strip()]
    assert len(dsl_lines) <= 15, dsl_lines
    m2, e2, xs2, _ = load_repro(d)
    assert m2 == r.module and e2 == r.entry
    assert all(np.array_equal(to_bits(a), to_bits(b)) for a, b in zip(xs2, r.inputs,
                                                                       strict=True))
    hex_text = (d / "inputs.hex.txt").read_text()
    assert f"{int(to_bits(r.inputs[0]).reshape(-1)[0]):04x}" in hex_text
    assert "FAIL" in (d / "verdict.txt").read_text()
    # the standalone script: FAIL with the candidate, PASS with the reference
    bad = subprocess.run([sys.executable, str(d / "repro.py"), "--backend",
                          "tilefoundry.oracle.planted:truncating_mul"], capture_output=True,
                         text=True, cwd=tmp_path, timeout=120)
    assert bad.returncode == 1 and "FAIL" in bad.stdout, bad.stdout + bad.stderr
    good = subprocess.run([sys.executable, str(d / "repro.py"), "--backend", "reference"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert good.returncode == 0 and "PASS" in good.stdout, good.stdout + good.stderr


def _planted_reproducer(tmp_path):
    module, entry, inputs = buried_program(8, 0)
    v = check_candidate(module, entry, inputs, truncating_mul)
    observed = truncating_mul(module, entry, list(inputs))
    return write_repro(tmp_path / "case", module, entry, inputs, v,
                       candidate="tilefoundry.oracle.planted:truncating_mul", observed=observed)


def test_a_reproducer_runs_nothing_of_its_own_when_opened(tmp_path):
    """Issue 21: repro.py unpickled module.pkl / inputs.pkl, ran program_dsl.py and put its own
    directory first on sys.path, so a reproducer from a bug report ran code when opened. Now:
    a module shadowing the standard library or numpy in the directory is not imported, code in
    program_dsl.py is parsed, never run (the load fails instead), and a planted pickle makes
    the reproducer refused. The payloads would create a marker file."""
    import pickle

    d = _planted_reproducer(tmp_path)
    marker = tmp_path / "pwned"
    payload = f"open({str(marker)!r}, 'w').write('x')\n"
    for name in ("json.py", "argparse.py", "numpy.py", "pathlib.py"):
        (d / name).write_text(payload)
    ok = subprocess.run([sys.executable, str(d / "repro.py"), "--backend", "reference"],
                        capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert ok.returncode == 0 and "PASS" in ok.stdout, ok.stdout + ok.stderr
    assert not marker.exists()
    # code in the program source: the DSL parser reads it, never runs it
    src = (d / "program_dsl.py").read_text()
    (d / "program_dsl.py").write_text(f"__import__('os').system('touch {marker}')\n" + src)
    bad = subprocess.run([sys.executable, str(d / "repro.py"), "--backend", "reference"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert not marker.exists(), bad.stdout + bad.stderr
    (d / "program_dsl.py").write_text(src)

    class Boom:
        def __reduce__(self):
            return (exec, (payload,))

    (d / "module.pkl").write_bytes(pickle.dumps(Boom()))
    refused = subprocess.run([sys.executable, str(d / "repro.py"), "--recorded"],
                             capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert refused.returncode == 2 and "refused" in refused.stderr, refused.stderr
    assert not marker.exists()
    with pytest.raises(Exception, match="holding pickles"):
        load_repro(d)


def test_a_sweep_reproducer_is_sized_by_what_failed_not_by_the_sweep(tmp_path):
    """Issue 22: the full tier's 301 FAIL reproducers were 120 MB, three quarters hex dumps of
    whole sweeps. inputs.hex.txt now holds the first 256 elements of an input past 4,096 (and
    says where the rest is); the raw bits stay whole in input_<i>.npy and the replay works."""
    from tilefoundry.conformance.report import HEX_HEAD, write_reproducer
    from tilefoundry.oracle.compare import check
    from tilefoundry.semantics.dsl import parse_module

    m = parse_module('''
@func
def f(x: Tensor[(65536,), f32]):
    return x + x
''')
    x = np.arange(65536, dtype=np.float32)
    observed = x + x + np.float32(1.0)
    d = write_reproducer(tmp_path / "r", case_id="sweep", family="t", seed=0,
                         backend="reference", module=m, entry="f", inputs=[x],
                         verdict=check(m, "f", [x], observed), observed=observed)
    hexes = (d / "inputs.hex.txt").read_text()
    words = [w for ln in hexes.splitlines()[1:] if ln.startswith("  ") and "..." not in ln
             for w in ln.split()]
    assert len(words) == HEX_HEAD and "65,280 more element(s), not shown" in hexes
    assert np.load(d / "input_0.npy").size == 65536  # every element's bits
    assert len(hexes) < 4000 < (d / "input_0.npy").stat().st_size


def _evil_backend_file(path, marker) -> None:
    """A backend module that would create ``marker`` when imported."""
    path.write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                    "def factory():\n"
                    "    from tilefoundry.conformance.backend import load_backend\n"
                    "    return load_backend('reference')\n")


def _set_recorded_backend(d, spec: str) -> None:
    meta = json.loads((d / "case.json").read_text())
    meta["backend"] = spec
    (d / "case.json").write_text(json.dumps(meta))


def test_case_json_never_chooses_the_backend(tmp_path):
    """Issue 34, deliver 1: a reproducer whose case.json names a backend file inside the folder
    (`evil.py:factory`, `evil:factory`, or `<dir>.evil:factory` from its parent) ran it on a
    plain `python repro.py`. The backend now comes only from the command line: without
    --backend (or --recorded) the replay is refused, exit 2, with the command to type, and
    case.json's spec is shown there only when it names nothing inside the folder."""
    d = _planted_reproducer(tmp_path)
    marker = tmp_path / "pwned"
    _evil_backend_file(d / "evil.py", marker)
    script = d / "repro.py"
    for spec, cwd in (("evil.py:factory", d), ("evil:factory", d),
                      (f"{d.name}.evil:factory", d.parent), (f"{d.name}.evil:factory", d),
                      ("evil.py:factory", tmp_path)):
        _set_recorded_backend(d, spec)
        p = subprocess.run([sys.executable, "repro.py" if cwd == d else str(script)],
                           capture_output=True, text=True, cwd=cwd, timeout=120)
        assert not marker.exists(), (spec, cwd, p.stdout, p.stderr)
        assert p.returncode == 2 and p.stdout == "", (spec, p.stdout, p.stderr)
        assert p.stderr == (f"repro.py: no backend named: type it, e.g. python {script} "
                            f"--backend SPEC, or add --recorded to judge the recorded outputs; "
                            f"a reproducer never chooses the code it runs\n"), (spec, p.stderr)
        rec = subprocess.run([sys.executable, str(script), "--recorded"], capture_output=True,
                             text=True, cwd=cwd, timeout=120)
        assert rec.returncode == 1 and "FAIL" in rec.stdout, rec.stderr
        assert not marker.exists()
    # a backend outside the folder is shown (quoted for the shell), still not loaded
    _set_recorded_backend(d, "tilefoundry.oracle.planted:truncating_mul")
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert p.returncode == 2 and f"python {script} --backend " \
        "tilefoundry.oracle.planted:truncating_mul (the backend case.json records)" in p.stderr
    _set_recorded_backend(d, "x; touch pwned")  # not a plain spec: SPEC
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert p.returncode == 2 and "--backend SPEC," in p.stderr and "touch" not in p.stderr
    # the library's replay follows the same rule
    assert rerun(d) == 2 and rerun(d, recorded=True) == 1
    assert rerun(d, "reference") == 0 and not marker.exists()


def test_a_case_id_cannot_break_out_of_repro_py(tmp_path):
    """Issue 34, deliver 1: a case id holding three double quotes broke out of the docstring
    of the generated repro.py, and the injected statement ran even under --recorded. repro.py
    is now one fixed file holding nothing of the case (the id is data, in case.json)."""
    from tilefoundry.conformance.report import REPRO_PY

    marker = tmp_path / "pwned"
    q3 = '"' * 3
    case_id = f'x{q3}; open({json.dumps(str(marker))}, "w").write("ran"); {q3}'
    module, entry, inputs = buried_program(8, 0)
    v = check_candidate(module, entry, inputs, truncating_mul)
    d = write_repro(tmp_path / "case", module, entry, inputs, v, case_id=case_id,
                    candidate="tilefoundry.oracle.planted:truncating_mul",
                    observed=truncating_mul(module, entry, list(inputs)))
    for args in (["--recorded"], ["--backend", "reference"]):
        p = subprocess.run([sys.executable, str(d / "repro.py"), *args],
                           capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert not marker.exists(), p.stdout + p.stderr
        assert p.returncode == (1 if args == ["--recorded"] else 0), p.stdout + p.stderr
    assert (d / "repro.py").read_text() == REPRO_PY and "{" not in REPRO_PY
    assert json.loads((d / "case.json").read_text())["id"] == case_id  # the id: data only


def test_a_reproducer_bool_input_byte_other_than_0_or_1_is_refused_naming_the_file(tmp_path):
    """D543: numpy views any byte as a bool, and the reference and kernel-interp read such a
    byte differently (a sort of [0xFF, 0x00]); only 0 and 1 are bool values, so a reproducer
    file holding another byte is refused by name, never evaluated."""
    from tilefoundry.conformance.report import ReproducerError, load_reproducer, write_reproducer
    from tilefoundry.oracle.compare import check
    from tilefoundry.semantics.dsl import parse_module

    m = parse_module('''
@func
def f(x: Tensor[(2,), bool]):
    return x
''')
    x = np.array([True, False])
    d = write_reproducer(tmp_path / "r", case_id="bools", family="t", seed=0,
                         backend="reference", module=m, entry="f", inputs=[x],
                         verdict=check(m, "f", [x], x), observed=x)
    assert load_reproducer(d)[2][0].tolist() == [True, False]  # canonical bytes load
    np.save(d / "input_0.npy", np.array([0xFF, 0x00], np.uint8))
    with pytest.raises(ReproducerError, match=r"input_0\.npy: .*bits are 0 or 1; element 0 "
                                              r"\(flat\) is 0xff"):
        load_reproducer(d)
