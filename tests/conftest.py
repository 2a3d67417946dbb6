"""Test configuration: hypothesis profiles ``ci`` (default, bounded), ``dev`` and ``thorough``.

Select with TILEFOUNDRY_PROFILE=dev|thorough. Seeds are derandomized in ``ci`` so the same run
gives the same cases and verdicts; ``thorough`` also enables tests marked ``slow``.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("TILEFOUNDRY_PROFILE", "ci")

settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=200, deadline=None, print_blob=True)
settings.register_profile(
    "thorough", max_examples=5000, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(PROFILE)


def pytest_collection_modifyitems(config, items):
    if PROFILE == "thorough":
        return
    skip_slow = pytest.mark.skip(reason="slow sweep: run with TILEFOUNDRY_PROFILE=thorough")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
