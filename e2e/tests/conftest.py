"""Fixtures of the e2e tier only."""

from __future__ import annotations

import pytest

from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.ocm import forget_issued_addon_csrs


@pytest.fixture(scope="module", autouse=True)
def issued_addon_csrs_forgotten(control_plane: ControlPlane) -> None:
    """Each e2e module starts without the issued addon CSRs earlier modules left on the hub.

    The klusterlet's cap of 10 CSRs per cluster and addon is otherwise reached partway through a
    full run (kube-controller-manager deletes issued CSRs only after an hour), and an agent
    enabled after that never gets its hub credentials.
    """
    assert control_plane.hub is not None
    forget_issued_addon_csrs(Client(control_plane.hub.admin_kubeconfig))
