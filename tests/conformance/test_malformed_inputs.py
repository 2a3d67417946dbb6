"""The widened malformed-input fuzz (benchmarks/malformed_inputs.py, issue 34 item 6) as a
bounded test: files of every kind, tampered reproducers, DSL, IR and API arguments of wrong
types, with generators that share nothing with ``fuzz_ir``. Every input ends ok or in the
project's error; none raises anything else or runs past the 10 s timer. The long run (10^5
inputs) is by hand: ``python benchmarks/malformed_inputs.py 100000 --jobs 2``."""

from __future__ import annotations

import importlib.util
import os
import random
import sys
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "malformed_inputs.py"
#: inputs per category and profile (ci: a few seconds)
_PER = {"ci": 12, "dev": 100, "thorough": 1000}.get(os.environ.get("TILEFOUNDRY_PROFILE", "ci"),
                                                    12)


@pytest.fixture(scope="module")
def fz():
    spec = importlib.util.spec_from_file_location("malformed_inputs", _SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_every_category_ends_ok_or_in_the_projects_error(fz):
    n = _PER * len(fz.CATEGORIES)
    res = fz.fuzz(n, seed=0, jobs=1)
    oc = res["outcomes"]
    assert res["inputs"] == n and set(res["mix"]) == set(fz.CATEGORIES)
    assert not res["bugs"], fz.report(res)
    # the inputs are hostile: most are refused, and every category was refused at least once
    # (an input that never reaches the loaders cannot pass this)
    assert sum(v for (c, o), v in oc.items() if o == "project") > n // 3, fz.report(res)
    for c in ("results", "manifest", "baseline", "capabilities", "dsl", "ir", "api"):
        assert oc[(c, "project")] > 0, (c, fz.report(res))


def test_the_generators_are_deterministic(fz, tmp_path):
    a = fz.dsl_text(random.Random("0:dsl:5"))
    assert a == fz.dsl_text(random.Random("0:dsl:5"))
    t = fz.results_template()
    assert fz.mutate_tree(t, random.Random(1)) == fz.mutate_tree(t, random.Random(1))


def test_a_foreign_exception_is_classified_as_a_bug(fz, tmp_path, monkeypatch):
    def boom(rng, work):
        return (lambda: {}["missing"]), "planted"

    monkeypatch.setitem(fz.MAKERS, "api", boom)
    cat, _, outcome, how, _, sig = fz.run_one("api", 0, 0, tmp_path)
    assert (cat, outcome, how) == ("api", "bug", "planted") and sig.startswith("KeyError at")


def test_a_project_error_is_not_a_bug(fz, tmp_path, monkeypatch):
    from tilefoundry.errors import InvalidArgumentError

    def refuse(rng, work):
        def run():
            raise InvalidArgumentError("no")
        return run, "planted"

    monkeypatch.setitem(fz.MAKERS, "api", refuse)
    assert fz.run_one("api", 0, 0, tmp_path)[2] == "project"
