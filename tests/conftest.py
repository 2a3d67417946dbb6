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


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print the peer findings of the session (divergences the exact model blamed on a peer,
    keyed by the peer's version and code path) and write them to build/peer-findings.json."""
    import json
    import sys
    from pathlib import Path

    peers = sys.modules.get("tilefoundry.conformance.peers")
    if peers is None or not peers.FINDINGS:
        return
    terminalreporter.section("peer findings (the peer was wrong; not failures)")
    terminalreporter.write_line(peers.FINDINGS.report())
    out = Path(config.rootpath) / "build" / "peer-findings.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([{"peer": k.peer, "version": k.version, "code_path": k.code_path,
                                "class": k.klass, "elements": n}
                               for k, n in sorted(peers.FINDINGS.items(), key=str)], indent=1))
