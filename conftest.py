"""Session-wide fixtures shared by the integration and e2e tiers.

The local OCM control plane is expensive (about a minute to start on two cores), so it is
started at most once per test run, lazily, by the first test that asks for it, and stopped at
the end of the session.  Tests marked `teardown_last` run after every other test because they
take the session's control plane down on purpose; tests marked `own_install` (the helm install and
mission tests) run just before them, after every test that shares a `kubectl apply -k` install.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TIER_BY_DIR = {
    "unit": "unit",
    "component": "component",
    "integration": "integration",
    "packaging": "packaging",
}


def pytest_configure(config: pytest.Config) -> None:
    """Register the ordering marker."""
    config.addinivalue_line("markers", "teardown_last: stops the session control plane; runs last")
    config.addinivalue_line(
        "markers",
        "own_install: installs and uninstalls the addon itself (helm); runs after the tests sharing an "
        "install, before teardown_last",
    )
    config.addinivalue_line(
        "markers",
        "ocm_contract: the addon contract with OCM (lifecycle, registration, status, config, upgrade, "
        "uninstall, the mission); `make test` runs these again on the older OCM release",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its tier (from its directory) and move `teardown_last` tests last."""
    for item in items:
        parts = Path(str(item.fspath)).parts
        if "e2e" in parts and "tests" in parts and parts.index("tests") > parts.index("e2e"):
            item.add_marker(pytest.mark.e2e)
        elif "tests" in parts:
            tier = parts[parts.index("tests") + 1] if parts.index("tests") + 1 < len(parts) else ""
            if tier in TIER_BY_DIR:
                item.add_marker(getattr(pytest.mark, TIER_BY_DIR[tier]))
    items.sort(
        key=lambda i: (
            i.get_closest_marker("teardown_last") is not None,
            i.get_closest_marker("own_install") is not None,
        )
    )


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The local OCM control plane, started once per session on first use."""
    from e2e.controlplane import ControlPlane

    run_dir = tmp_path_factory.mktemp("ocm")

    def progress(msg: str) -> None:
        print(f"[e2e] {msg}", file=sys.__stderr__, flush=True)

    cp = ControlPlane(
        run_dir, progress=progress, with_prometheus=os.environ.get("DS_E2E_PROMETHEUS", "1") == "1"
    )
    progress(f"starting the local OCM control plane in {run_dir}")
    cp.up()
    yield cp
    problems = cp.down()
    assert not problems, f"control plane teardown left: {problems}"
