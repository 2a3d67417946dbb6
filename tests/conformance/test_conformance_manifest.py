"""Manifests: every entry needs a case and a reason; unknown tables and keys are errors."""

from __future__ import annotations

import pytest

from tilefoundry.conformance.manifest import FAILURE_VERDICTS, Manifest, ManifestError


def test_parses_entries_and_matches_ids_and_globs():
    m = Manifest.parse("""
[[xfail]]
case = "cast/*"
reason = "truncates"
[[xfail]]
case = "cast/f32-bf16"
reason = "never reached: the first matching entry applies"
[[skip]]
case = "matmul/f32"
reason = "later"
[[tolerance]]
case = "exp/?"
reason = "approximation"
ulp = 2
""")
    assert m.xfail_for("cast/f32-bf16").reason == "truncates"
    assert m.xfail_for("cast/f32-bf16").verdicts == FAILURE_VERDICTS
    assert m.xfail_for("castx") is None
    assert m.skip_for("matmul/f32").reason == "later" and m.skip_for("matmul/f16") is None
    assert m.tolerance_for("exp/1").ulp == 2 and m.tolerance_for("exp/12") is None
    assert [e.case for e in m.unused(["cast/a", "exp/1"])] == ["cast/f32-bf16", "matmul/f32"]


@pytest.mark.parametrize(("text", "pattern"), [
    ('[[xfail]]\ncase = "a"\n', r"\[\[xfail\]\] entry 1 \('a'\): a non-empty 'reason' is "
                                r"required"),
    ('[[skip]]\ncase = "a"\nreason = "  "\n', "non-empty 'reason'"),
    ('[[skip]]\nreason = "r"\n', r"'case' \(a case id or glob\) is required"),
    ('[[xfail]]\ncase = "a"\nreason = "r"\nwhy = "x"\n', r"unknown key\(s\) \['why'\]"),
    ('[[expected]]\ncase = "a"\nreason = "r"\n', "unknown table 'expected'"),
    ('xfail = "a"\n', "must be an array of tables"),
    ('[[tolerance]]\ncase = "a"\nreason = "r"\n', "'ulp' .* is required"),
    ('[[tolerance]]\ncase = "a"\nreason = "r"\nulp = -1\n', "'ulp'"),
    ('[[tolerance]]\ncase = "a"\nreason = "r"\nulp = 0.5\n', "'ulp'"),
    ('[[xfail]]\ncase = "a"\nreason = "r"\nverdict = "PASS"\n', "'verdict' must be"),
    ('[[xfail\n', "not valid TOML"),
])
def test_bad_manifests_are_one_line_errors(text, pattern):
    with pytest.raises(ManifestError, match=pattern) as e:
        Manifest.parse(text, source="m.toml")
    assert "\n" not in str(e.value) and str(e.value).startswith("manifest m.toml")


def test_missing_file(tmp_path):
    with pytest.raises(ManifestError, match="cannot read it"):
        Manifest.load(tmp_path / "nope.toml")
