"""The validating loaders (conformance/loaders.py, issue 34 item 2): every file kind a user
hands the tool is refused with the project's one-line error — naming the file, the line or key
and the fix — when it is not a regular file, too big, not UTF-8, nested too deep, holds a huge
integer or a field of the wrong type; a bad fuzz-database entry is skipped with a warning."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from tilefoundry.cli import main
from tilefoundry.conformance import cli
from tilefoundry.conformance.backend import Capabilities
from tilefoundry.conformance.campaign import Baseline, BaselineError, CampaignError, merge_results
from tilefoundry.conformance.loaders import MAX_DEPTH, LoadError, fuzz_db_seeds, load_json
from tilefoundry.conformance.manifest import Manifest, ManifestError
from tilefoundry.conformance.report import ReproducerError, ResultsError, read_jsonl
from tilefoundry.errors import InvalidArgumentError, TilefoundryError

HEADER = {"type": "run", "backend": "reference", "seed": 0, "format": 1, "shard": None}


def _record(**over) -> dict:
    r = {"type": "case", "id": "spec/binary/add/f32/0", "family": "binary", "verdict": "FAIL",
         "seconds": 0.01, "message": "worst element", "ops": ["Add"], "dtypes": ["f32"],
         "elements": 16, "unjudged": 0,
         "outputs": [{"output": 0, "contract": "ulp<=0", "mismatches": 1, "total": 16,
                      "worst_index": [2], "classes": [
                          {"class": "rounding", "count": 1, "index": [2], "expected": 1.0,
                           "observed": 2.0, "expected_hex": "0x3f800000",
                           "observed_hex": "0x40000000"}]}],
         "warnings": [{"phase": "run", "category": "RuntimeWarning", "where": "x.py:3",
                       "message": "overflow", "count": 1}]}
    r.update(over)
    return r


def _results(tmp_path: Path, *records: dict, name: str = "r.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(x) + "\n" for x in (HEADER, *records)))
    return p


# ---------------------------------------------------------------------------------------------
# not a regular file: refused before anything is read (a FIFO would hang a plain open)
# ---------------------------------------------------------------------------------------------
def _special(tmp_path: Path, kind: str) -> Path:
    p = tmp_path / f"special-{kind}"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dir":
        p.mkdir()
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()
    elif kind == "dev-zero":
        os.symlink("/dev/zero", p)
    return p


LOADERS = {
    "results": (lambda p: read_jsonl(p), ResultsError),
    "manifest": (lambda p: Manifest.load(p), ManifestError),
    "baseline": (lambda p: Baseline.load(p), BaselineError),
    "capabilities": (lambda p: Capabilities.load(str(p)), InvalidArgumentError),
    "merge": (lambda p: merge_results([p]), CampaignError),
}
WHAT = {"fifo": "a FIFO (named pipe)", "dir": "a directory", "socket": "a socket",
        "dev-zero": "a character device"}


@pytest.mark.parametrize("special", sorted(WHAT))
@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_a_file_that_is_not_regular_is_refused_naming_it(tmp_path, kind, special):
    load, err = LOADERS[kind]
    p = _special(tmp_path, special)
    with pytest.raises(err) as e:
        load(p)
    msg = str(e.value)
    assert str(p) in msg and WHAT[special] in msg and "regular file" in msg and "\n" not in msg


def test_the_reproducer_refuses_a_fifo_or_dev_zero_in_place_of_its_files(tmp_path, capsys):
    from tilefoundry.conformance.report import load_reproducer

    d = tmp_path / "repro"
    d.mkdir()
    os.mkfifo(d / "case.json")
    with pytest.raises(ReproducerError, match=r"case\.json: a FIFO"):
        load_reproducer(d)
    (d / "case.json").unlink()
    os.symlink("/dev/zero", d / "case.json")
    with pytest.raises(ReproducerError, match=r"case\.json: a character device"):
        load_reproducer(d)


# ---------------------------------------------------------------------------------------------
# size, bytes, depth, integers, duplicate keys
# ---------------------------------------------------------------------------------------------
def test_a_file_over_its_kinds_limit_is_refused_and_the_limit_can_be_raised(tmp_path,
                                                                             monkeypatch):
    p = tmp_path / "b.json"
    p.write_text(json.dumps({"format": 1, "failures": [], "backend": "x" * 3000}))
    monkeypatch.setenv("TILEFOUNDRY_MAX_BASELINE_MB", "0.001")  # 1,048 bytes
    with pytest.raises(BaselineError, match=r"more than the 1,048-byte limit of a baseline "
                                            r"file.*TILEFOUNDRY_MAX_BASELINE_MB"):
        Baseline.load(p)
    monkeypatch.setenv("TILEFOUNDRY_MAX_BASELINE_MB", "1")
    assert Baseline.load(p).entries == {}


def test_a_sparse_file_past_the_limit_is_refused_without_reading_it(tmp_path):
    p = tmp_path / "r.jsonl"
    with open(p, "wb") as f:
        f.truncate(3 * 2**30)  # 3 GiB of holes: read whole it would take 3 GiB of memory
    with pytest.raises(ResultsError, match="3,221,225,472 bytes, more than"):
        read_jsonl(p)


def test_bytes_that_are_not_utf8_name_the_line(tmp_path):
    p = tmp_path / "m.toml"
    p.write_bytes(b'[[skip]]\ncase = "a"\nreason = "\xff\xfe"\n')
    with pytest.raises(ManifestError, match=r"m.toml: line 3, column 11: byte b'\\xff' is not UTF-8"):
        Manifest.load(p)
    r = _results(tmp_path)
    r.write_bytes(r.read_bytes() + b'{"type": "case", "id": "\xc3("}\n')
    with pytest.raises(ResultsError, match=r"r.jsonl: line 2, column 25: byte b'\\xc3' is not UTF-8"):
        read_jsonl(r)


def test_a_utf8_bom_is_read_as_nothing(tmp_path):
    p = tmp_path / "b.json"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps({"format": 1, "failures": []}).encode())
    assert Baseline.load(p).entries == {}


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 200_000])
def test_json_nested_too_deep_is_refused_at_any_depth(tmp_path, depth):
    p = tmp_path / "c.json"
    p.write_text('{"ops": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(InvalidArgumentError, match=f"nested deeper than {MAX_DEPTH} levels"):
        Capabilities.load(str(p))


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000])
def test_toml_nested_too_deep_is_refused(tmp_path, depth):
    p = tmp_path / "m.toml"
    p.write_text("x = " + "[" * depth + "]" * depth + "\n")
    with pytest.raises(ManifestError, match="nested deeper than"):
        Manifest.load(p)


def test_nesting_within_the_limit_loads(tmp_path):
    p = tmp_path / "v.json"
    p.write_text("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
    assert load_json(p, what="v", kind="capabilities") is not None


def test_a_5000_digit_integer_is_refused_naming_the_line(tmp_path):
    r = _results(tmp_path, _record(elements=12345))
    r.write_text(r.read_text().replace("12345", "7" * 5000))
    with pytest.raises(ResultsError, match=r"line 2: an integer of 5,000 digits"):
        read_jsonl(r)
    m = tmp_path / "m.toml"
    m.write_text('[[tolerance]]\ncase = "a"\nreason = "r"\nulp = ' + "9" * 5000 + "\n")
    with pytest.raises(ManifestError, match=r"manifest .*m.toml: "):
        Manifest.load(m)


def test_a_key_twice_in_one_object_is_refused(tmp_path):
    p = tmp_path / "b.json"
    p.write_text('{"format": 1, "failures": [], "failures": [{"case": "x"}]}')
    with pytest.raises(BaselineError, match="key 'failures' appears twice"):
        Baseline.load(p)


def test_nan_tokens_are_refused_where_the_tool_never_writes_them(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"ops": NaN}')
    with pytest.raises(InvalidArgumentError, match="NaN is not JSON"):
        Capabilities.load(str(p))
    # the runner writes NaN in a record's values (json.dumps): a results file reads them
    r = _results(tmp_path)
    r.write_text(r.read_text() + json.dumps(_record(seconds=float("nan"))) + "\n")
    assert len(read_jsonl(r)[1]) == 1


# ---------------------------------------------------------------------------------------------
# wrong types, per key, in a results file: one line naming the file, the line and the key
# ---------------------------------------------------------------------------------------------
WRONG = [("id", 3), ("verdict", "MAYBE"), ("verdict", None), ("family", []), ("seconds", "1"),
         ("message", {}), ("ops", "Add"), ("ops", [1]), ("dtypes", [None]), ("outputs", {}),
         ("outputs", [3]), ("attempts", "FAIL"), ("repro", 7), ("elements", 1.5),
         ("unjudged", True), ("diagnosis", []), ("warnings", [{"message": "m"}]),
         ("warnings", "w")]


@pytest.mark.parametrize("key,value", WRONG)
def test_a_results_field_of_the_wrong_type_is_one_line_naming_line_and_key(tmp_path, key,
                                                                           value):
    r = _results(tmp_path, _record(**{key: value}))
    with pytest.raises(ResultsError) as e:
        read_jsonl(r)
    msg = str(e.value)
    assert f"{r}: line 2: " in msg and key in msg and "\n" not in msg
    assert "restore it or remove the line" in msg


@pytest.mark.parametrize("where,value", [("output", [1]), ("mismatches", "3"),
                                         ("classes", [{"class": "x"}]), ("worst_index", "2")])
def test_a_wrong_type_inside_an_output_names_its_path(tmp_path, where, value):
    rec = _record()
    rec["outputs"][0][where] = value
    with pytest.raises(ResultsError, match=r"outputs\[0\]"):
        read_jsonl(_results(tmp_path, rec))


def test_a_record_without_id_or_verdict_is_refused(tmp_path):
    rec = _record()
    del rec["verdict"]
    with pytest.raises(ResultsError, match="a case record without 'verdict'"):
        read_jsonl(_results(tmp_path, rec))


def test_resume_skips_a_bad_record_and_runs_its_case_again(tmp_path, capsys):
    from tilefoundry.conformance.results import _read_resume

    good = _record(id="a/1")
    r = _results(tmp_path, good, _record(id="a/2", seconds="slow"), _record(id="a/3"))
    _, recs = _read_resume(r, "reference", 0)
    assert sorted(recs) == ["a/1", "a/3"]
    assert "skipped 1 unreadable line(s)" in capsys.readouterr().err


@pytest.mark.parametrize("sub", ["merge", "diff"])
def test_merge_and_diff_print_one_line_and_exit_2_on_a_wrong_type(tmp_path, capsys, sub):
    r = _results(tmp_path, _record(outputs=[{"mismatches": "many"}]))
    argv = [str(r), "-o", str(tmp_path / "m.jsonl")] if sub == "merge" else [str(r), str(r)]
    rc = main(["conformance", sub, *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "line 2: outputs[0].'mismatches' must be an integer, got a string" in err


def test_junit_and_html_reports_written_from_a_file_that_loads(tmp_path, capsys):
    r = _results(tmp_path, _record(), _record(id="b/1", verdict="PASS", outputs=None))
    rc = main(["conformance", "merge", str(r), "-o", str(tmp_path / "m.jsonl"), "--junit",
                   str(tmp_path / "j.xml"), "--html", str(tmp_path / "h.html")])
    assert rc == 1  # one FAIL
    assert "b/1" in (tmp_path / "j.xml").read_text()
    assert "spec/binary/add/f32/0" in (tmp_path / "h.html").read_text()


# ---------------------------------------------------------------------------------------------
# baseline, capabilities, reproducer: a field of the wrong type
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("data,match", [
    ({"op_dtypes": {"Add": [{}]}}, "'op_dtypes' must map op names to lists of dtype names"),
    ({"op_attrs": {"Cast": {"rounding": [[1]]}}}, "'op_attrs' must map"),
    ({"mesh_shapes": [[True]]}, "'mesh_shapes' must be null or a list of lists of positive"),
    ({"ops": "Add"}, "'ops' must be a list of strings"),
])
def test_capabilities_of_a_wrong_type_name_the_key(tmp_path, data, match):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(data))
    with pytest.raises(InvalidArgumentError, match=match):
        Capabilities.load(str(p))


@pytest.mark.parametrize("key,value", [("entry", 3), ("inputs", {}), ("inputs", [{"dtype": 1}]),
                                       ("seed", "0"), ("tuple_result", "no"),
                                       ("observed", [3])])
def test_a_case_json_field_of_the_wrong_type_names_the_key(tmp_path, key, value):
    from tilefoundry.conformance.report import load_reproducer

    d = tmp_path / "repro"
    d.mkdir()
    meta = {"format": 2, "id": "oracle/x", "entry": "f", "inputs": [], "observed": [],
            "tuple_result": False, "seed": 0, key: value}
    (d / "case.json").write_text(json.dumps(meta))
    with pytest.raises(ReproducerError) as e:
        load_reproducer(d)
    assert key in str(e.value) and "rebuild the reproducer" in str(e.value)


# ---------------------------------------------------------------------------------------------
# the fuzz database: a bad entry is skipped with a warning, never breaks a fuzz run
# ---------------------------------------------------------------------------------------------
def test_a_5000_digit_seed_in_the_fuzz_db_is_skipped_naming_its_file(tmp_path):
    from hypothesis.database import DirectoryBasedExampleDatabase

    db = DirectoryBasedExampleDatabase(str(tmp_path / "db"))
    key = cli.fuzz_db_key("reference", None, Capabilities.everything())
    db.save(key, b"12345")
    db.save(key, b"9" * 5000)
    db.save(key, b"18446744073709551616")  # 2**64
    db.save(key, b"not a seed")
    folder = Path(db._key_path(key))
    os.mkfifo(folder / "fifo-entry")
    warned: list[str] = []
    assert fuzz_db_seeds(db, key, warn=warned.append) == [12345]
    assert len(warned) == 4 and all("\n" not in w and "remove it: rm -rf" in w for w in warned)
    assert any("fifo-entry: a FIFO" in w for w in warned)
    assert any("not a seed (more than 20 bytes; a seed is at most 20 ASCII digits)" in w
               for w in warned)
    # hypothesis's own fetch would have hung on the FIFO; the loader never opens it blocking
    assert fuzz_db_seeds(db, b"no such key", warn=warned.append) == []


def test_the_size_limit_env_var_must_be_a_positive_number(tmp_path, monkeypatch):
    p = tmp_path / "b.json"
    p.write_text("{}")
    monkeypatch.setenv("TILEFOUNDRY_MAX_BASELINE_MB", "lots")
    with pytest.raises(TilefoundryError, match="TILEFOUNDRY_MAX_BASELINE_MB='lots'"):
        Baseline.load(p)


def test_load_error_is_the_projects(tmp_path):
    with pytest.raises(LoadError):
        load_json(tmp_path / "missing.json", what="x", kind="capabilities")
    assert issubclass(LoadError, TilefoundryError)


# ---------------------------------------------------------------------------------------------
# finds of the malformed-input fuzz (benchmarks/malformed_inputs.py)
# ---------------------------------------------------------------------------------------------
def test_a_lone_surrogate_is_refused_before_a_report_cannot_write_it(tmp_path):
    r = _results(tmp_path)
    r.write_text(r.read_text() + json.dumps(_record(message="\ud800")) + "\n")
    with pytest.raises(ResultsError, match=r"line 2: message: a string with a lone surrogate"):
        read_jsonl(r)


@pytest.mark.parametrize("diag", [{"least": True}, {"least": [3]}, {"least": [[1]]},
                                  {"classes": [{"least": "nsz"}]}, {"none": "all"}])
def test_a_diagnosis_of_the_wrong_shape_is_refused(tmp_path, diag):
    with pytest.raises(ResultsError, match="diagnosis"):
        read_jsonl(_results(tmp_path, _record(diagnosis=diag)))
    rec = _record()
    rec["outputs"][0]["diagnosis"] = diag
    with pytest.raises(ResultsError, match=r"outputs\[0\]\.diagnosis"):
        read_jsonl(_results(tmp_path, rec, name="o.jsonl"))


def test_a_manifest_glob_past_its_length_limit_is_refused(tmp_path):
    # fnmatch took minutes to translate a 100,000-bracket glob
    p = tmp_path / "m.toml"
    p.write_text('[[skip]]\ncase = "spec/' + "[" * 100_000 + '"\nreason = "r"\n')
    with pytest.raises(ManifestError, match=r"'case' is 100,005 characters, more than 512"):
        Manifest.load(p)


def test_a_cases_glob_past_the_length_limit_is_one_line(tmp_path, capsys):
    rc = main(["conformance", "run", "--backend", "reference", "--cases", "[" * 100_000,
               "--jsonl", str(tmp_path / "r.jsonl"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.endswith("--cases: a glob of 100,000 characters, more than 512; a "
                                    "case id or glob is shorter")
