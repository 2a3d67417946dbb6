"""tilefoundry.limits: one frozen Limits, overridable by TILEFOUNDRY_LIMITS or use_limits."""

from __future__ import annotations

import dataclasses

import pytest

from tilefoundry import limits as L
from tilefoundry.errors import InvalidArgumentError


def test_defaults_are_frozen_and_positive():
    d = L.Limits()
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.max_elements = 1  # type: ignore[misc]
    assert all(getattr(d, f.name) > 0 for f in dataclasses.fields(d))


def test_env_override(monkeypatch):
    monkeypatch.setenv(L.ENV, "max_elements=1e3, max_nesting=7")
    got = L._from_env()
    assert (got.max_elements, got.max_nesting) == (1000, 7)
    assert got.max_value_bytes == L.Limits().max_value_bytes


@pytest.mark.parametrize("text, match", [("max_elemnts=5", "NAME=VALUE"),
                                         ("max_elements=lots", "not a number"),
                                         ("max_elements=0", "positive"),
                                         ("max_elements=2.5", "an integer")])
def test_env_errors_are_the_projects(monkeypatch, text, match):
    monkeypatch.setenv(L.ENV, text)
    with pytest.raises(InvalidArgumentError, match=match):
        L._from_env()


def test_use_limits_nests_and_restores():
    before = L.limits()
    with L.use_limits(max_elements=10) as a:
        assert L.limits() is a and a.max_elements == 10
        with L.use_limits(max_nesting=3):
            assert (L.limits().max_elements, L.limits().max_nesting) == (10, 3)
        assert L.limits() is a
    assert L.limits() is before


def test_check_value_size_names_the_limit_and_the_fix():
    with L.use_limits(max_elements=100, max_value_bytes=1000):
        L.check_value_size((10, 10), 8, "x")  # 100 elements, 800 bytes: within both
        with pytest.raises(L.LimitError, match=r"x: shape \(10, 11\) has 110 elements.*"
                                               r"max_elements.*use_limits") as ei:
            L.check_value_size((10, 11), 1, "x")
        assert ei.value.limit == "max_elements"
        with pytest.raises(L.LimitError, match=r"1,600 bytes.*max_value_bytes"):
            L.check_value_size((10, 10), 16, lambda: "x")
