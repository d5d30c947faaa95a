"""The hub as the manager's own ServiceAccount sees it: `kubectl auth can-i` and a token kubeconfig.

For integration tests that run a controller on exactly the rules the installs grant, rather than
as the admin: ask what the ServiceAccount may do, then connect with a real token of it.
"""

from __future__ import annotations

from pathlib import Path

from e2e.controlplane import ControlPlane
from e2e.kube import Kubectl
from e2e.pki import write_kubeconfig

MANAGER = "dynamic-scoring-addon-manager"
MANAGER_NS = "dynamic-scoring"
MANAGER_SA = f"system:serviceaccount:{MANAGER_NS}:{MANAGER}"


def can_i(kubectl: Kubectl, verb: str, resource: str, namespace: str | None = None) -> str:
    """`kubectl auth can-i` as the manager ("yes"/"no"); `resource/sub` asks about a subresource."""
    resource, _, sub = resource.partition("/")
    where = ["-n", namespace] if namespace else []
    if sub:
        where.append(f"--subresource={sub}")
    return kubectl.run("auth", "can-i", verb, resource, *where, f"--as={MANAGER_SA}", check=False).strip()


def token_kubeconfig(control_plane: ControlPlane, kubectl: Kubectl, directory: Path) -> Path:
    """A kubeconfig in `directory` with an hour's token of the manager's ServiceAccount."""
    assert control_plane.hub is not None
    token = kubectl.run("create", "token", MANAGER, "-n", MANAGER_NS, "--duration=1h").strip()
    return write_kubeconfig(
        directory / "kubeconfig",
        server=control_plane.hub.server,
        ca_pem=control_plane.hub.ca.cert_pem,
        user=MANAGER,
        token=token,
    )
