"""Results are never lost (issue 33, Deliver 6; D303): every command that writes a results
file refuses one that is not empty unless told to replace it. ``run`` takes ``--resume`` or
``--overwrite`` (tests/conformance/test_conformance_cli.py); ``fuzz --jsonl``, ``merge -o``
and ``probe --out`` / ``--jsonl`` cannot continue a run, so their one line names only
``--overwrite``.

Issue 33: 'Re-running without `--resume` silently replaced a 1,656-case results file with a
2-line one.' Before this, ``fuzz --jsonl`` replaced an existing file silently."""

from __future__ import annotations

import json

from tilefoundry.cli import main

CAT = ["--catalog", "synthetic_catalog:build_no_hang"]
HELD = '{"type": "header"}\n{"type": "case", "id": "x", "verdict": "PASS"}\n'


def cli(*args: str) -> int:
    return main(["conformance", *args])


def _one_line(err: str, flag: str, path: str, held: str) -> None:
    assert err == (f"tilefoundry conformance: error: {flag} {path} already holds {held}; add "
                   f"--overwrite to replace it (or give another {flag})\n"), err
    assert "--resume" not in err


def test_fuzz_refuses_an_existing_results_file_without_overwrite(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    j = tmp_path / "f.jsonl"
    j.write_text(HELD)
    fuzz = ["fuzz", "--backend", "reference", "--minutes", "0.01", "--generator",
            "synthetic_catalog:generate", "--no-db", "--no-progress", "--jsonl", "f.jsonl"]
    assert cli(*fuzz) == 2
    _one_line(capsys.readouterr().err, "--jsonl", "f.jsonl", "1 case result(s)")
    assert j.read_text() == HELD
    assert cli(*fuzz, "--overwrite") == 0
    recs = [json.loads(x) for x in j.read_text().splitlines()]
    assert recs[0]["type"] == "run" and all(r.get("id") != "x" for r in recs)
    assert any(r.get("id", "").startswith("fuzz/") for r in recs)


def test_merge_refuses_an_existing_output_without_overwrite(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli("run", "--backend", "reference", *CAT, "--cases", "elementwise/*",
               "--jsonl", "a.jsonl", "--no-progress") == 0
    (tmp_path / "m.jsonl").write_text(HELD)
    capsys.readouterr()
    assert cli("merge", "a.jsonl", "-o", "m.jsonl") == 2
    _one_line(capsys.readouterr().err, "-o", "m.jsonl", "1 case result(s)")
    assert (tmp_path / "m.jsonl").read_text() == HELD
    assert cli("merge", "a.jsonl", "-o", "m.jsonl", "--overwrite") == 0
    assert '"id": "x"' not in (tmp_path / "m.jsonl").read_text()


def test_probe_refuses_an_existing_capability_file_or_results_file(tmp_path, monkeypatch,
                                                                   capsys):
    monkeypatch.chdir(tmp_path)
    caps = tmp_path / "caps.json"
    caps.write_text('{"ops": ["Binary.add"]}\n')  # a set the author edited by hand
    probe = ["probe", "--backend", "reference", "--cases", "special/binary/add/*",
             "--no-progress"]
    assert cli(*probe, "--out", "caps.json") == 2
    _one_line(capsys.readouterr().err, "--out", "caps.json", "24 byte(s)")
    assert caps.read_text() == '{"ops": ["Binary.add"]}\n'
    (tmp_path / "p.jsonl").write_text(HELD)
    assert cli(*probe, "--out", "new.json", "--jsonl", "p.jsonl") == 2
    _one_line(capsys.readouterr().err, "--jsonl", "p.jsonl", "1 case result(s)")
    assert not (tmp_path / "new.json").exists()
    assert cli(*probe, "--out", "caps.json", "--jsonl", "p.jsonl", "--overwrite") == 0
    assert "Binary.add" in json.loads(caps.read_text())["ops"]
