"""OCM's hub webhooks as processes on 127.0.0.1, wired the way the cluster manager wires them.

From v1.3 on the cluster manager runs three webhook servers beside the hub controllers, and a hub
without them is not the hub users install:

- `registration webhook-server` mutates ManagedClusters (with `DefaultClusterSet` on, a new
  cluster is labelled into the `default` set) and validates ManagedClusters and
  ManagedClusterSetBindings (accepting a cluster or binding a set needs the permission for it);
- `work webhook-server` validates ManifestWorks (size limit, executor permission);
- `addon webhook-server` converts ClusterManagementAddOn and ManagedClusterAddOn between
  v1alpha1 (stored) and v1beta1 (what OCM's own controllers read).

The cluster manager points the configurations at Services; the kube-apiserver can call a `url:`
with a `caBundle` instead, so here each server listens on a loopback port with a certificate from
the hub's CA.  The servers bind 127.0.0.1 because the build patches their listen host (they have no
flag for it); their metrics and health listeners are off.
"""

from __future__ import annotations

import base64
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.kube import Client, KubeCluster
from e2e.ocm import HUB_NAMESPACE
from e2e.procs import Proc, free_port, wait_until
from e2e.tools import Tools

WEBHOOK_API = "admissionregistration.k8s.io/v1"


@dataclass(frozen=True)
class Hook:
    """One webhook of a configuration, as the cluster manager's template declares it."""

    kind: str  # MutatingWebhookConfiguration | ValidatingWebhookConfiguration
    name: str
    server: str  # registration | work
    path: str
    group: str
    versions: tuple[str, ...]
    resource: str


HOOKS = (
    Hook(
        "MutatingWebhookConfiguration",
        "managedclustermutators.admission.cluster.open-cluster-management.io",
        "registration",
        "/mutate-cluster-open-cluster-management-io-v1-managedcluster",
        "cluster.open-cluster-management.io",
        ("*",),
        "managedclusters",
    ),
    Hook(
        "ValidatingWebhookConfiguration",
        "managedclustervalidators.admission.cluster.open-cluster-management.io",
        "registration",
        "/validate-cluster-open-cluster-management-io-v1-managedcluster",
        "cluster.open-cluster-management.io",
        ("*",),
        "managedclusters",
    ),
    Hook(
        "ValidatingWebhookConfiguration",
        "managedclustersetbindingvalidators.admission.cluster.open-cluster-management.io",
        "registration",
        "/validate-cluster-open-cluster-management-io-v1beta2-managedclustersetbinding",
        "cluster.open-cluster-management.io",
        ("v1beta2",),
        "managedclustersetbindings",
    ),
    Hook(
        "ValidatingWebhookConfiguration",
        "manifestworkvalidators.admission.work.open-cluster-management.io",
        "work",
        "/validate-work-open-cluster-management-io-v1-manifestwork",
        "work.open-cluster-management.io",
        ("*",),
        "manifestworks",
    ),
)
# The flags the cluster manager's webhook Deployments pass, minus the listeners we turn off.
SERVER_FLAGS = {
    "registration": ("--feature-gates=DefaultClusterSet=true",),
    "work": (),
    "addon": (),
}


def configurations(base_urls: dict[str, str], ca_bundle: str) -> list[dict[str, Any]]:
    """The webhook configurations, one per hook, each calling `<base_url><path>`."""
    out = []
    for hook in HOOKS:
        out.append(
            {
                "apiVersion": WEBHOOK_API,
                "kind": hook.kind,
                "metadata": {"name": hook.name},
                "webhooks": [
                    {
                        "name": hook.name,
                        "failurePolicy": "Fail",
                        "clientConfig": {"url": base_urls[hook.server] + hook.path, "caBundle": ca_bundle},
                        "rules": [
                            {
                                "operations": ["CREATE", "UPDATE"],
                                "apiGroups": [hook.group],
                                "apiVersions": list(hook.versions),
                                "resources": [hook.resource],
                            }
                        ],
                        "admissionReviewVersions": ["v1beta1", "v1"],
                        "sideEffects": "None",
                        "timeoutSeconds": 10,
                    }
                ],
            }
        )
    return out


def render_crd(text: str, conversion_url: str, ca_bundle: str) -> str:
    """A cluster-manager CRD template made installable: placeholders filled, conversion at a URL.

    Only the addon CRDs have placeholders (`{{ .AddonAPIServiceCABundle }}`,
    `{{ .ClusterManagerNamespace }}`) and a `Webhook` conversion whose `service` becomes `url`.
    Any other placeholder left is an error, so a new one in a later release is not applied raw.
    """
    text = text.replace("{{ .AddonAPIServiceCABundle }}", ca_bundle)
    text = text.replace("{{ .ClusterManagerNamespace }}", HUB_NAMESPACE)
    if "{{" in text:
        line = next(ln for ln in text.splitlines() if "{{" in ln)
        raise ValueError(f"CRD template has a placeholder the harness does not fill: {line.strip()}")
    docs = [d for d in yaml.safe_load_all(text) if d]
    for doc in docs:
        webhook = ((doc.get("spec") or {}).get("conversion") or {}).get("webhook")
        if webhook:
            webhook["clientConfig"] = {"url": conversion_url, "caBundle": ca_bundle}
    return yaml.safe_dump_all(docs, sort_keys=False)


def _tls_ready(port: int, ca_pem: bytes) -> bool:
    """True once the server completes a TLS handshake with a certificate the CA signed for 127.0.0.1."""
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=2) as raw,
            ctx.wrap_socket(raw, server_hostname="127.0.0.1"),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False


@dataclass
class HubWebhooks:
    """The three webhook servers of one hub, their certificate and their ports."""

    tools: Tools
    hub: KubeCluster
    ports: dict[str, int] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cert_dir = self.hub.run_dir / "ocm-webhooks"
        self.ca_pem: bytes = self.hub.ca.cert_pem
        self.ca_bundle = base64.b64encode(self.ca_pem).decode()

    def base_url(self, server: str) -> str:
        """`https://127.0.0.1:<port>` of one server (after `start`)."""
        return f"https://127.0.0.1:{self.ports[server]}"

    @property
    def conversion_url(self) -> str:
        """Where the kube-apiserver sends addon conversion reviews."""
        return self.base_url("addon") + "/convert"

    def start(self, timeout: float = 60) -> list[Proc]:
        """Start the servers and wait until each answers TLS; returns their processes."""
        issued = self.hub.ca.issue(
            "ocm-webhook-serving", common_name="ocm-webhooks", server_hosts=("127.0.0.1",)
        )
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        (self.cert_dir / "tls.crt").write_bytes(issued.cert_pem)
        key = self.cert_dir / "tls.key"
        key.write_bytes(issued.key_pem)
        key.chmod(0o600)
        binaries: dict[str, Path] = {
            "registration": self.tools.registration,
            "work": self.tools.work,
            "addon": self.tools.addon,
        }
        for server, binary in binaries.items():
            port = self.ports[server] = free_port()
            proc = Proc(
                f"hub-{server}-webhook",
                [
                    str(binary),
                    "webhook-server",
                    f"--kubeconfig={self.hub.admin_kubeconfig}",
                    f"--port={port}",
                    f"--certdir={self.cert_dir}",
                    "--metrics-port=0",
                    "--health-probe-port=0",
                    *SERVER_FLAGS[server],
                ],
                self.hub.run_dir / "logs" / f"hub-{server}-webhook.log",
            ).start()
            self.procs.append(proc)
        for proc, port in zip(self.procs, self.ports.values(), strict=True):
            wait_until(
                lambda p=port: _tls_ready(p, self.ca_pem),  # type: ignore[misc]
                timeout=timeout,
                what=f"{proc.name} serving TLS on 127.0.0.1:{port}",
                proc=proc,
            )
        return self.procs

    def render_crd(self, text: str) -> str:
        """`render_crd` with this hub's conversion URL and CA."""
        return render_crd(text, self.conversion_url, self.ca_bundle)

    def register(self, client: Client) -> None:
        """Create the admission webhook configurations (after `start`, before any ManagedCluster)."""
        for obj in configurations({s: self.base_url(s) for s in self.ports}, self.ca_bundle):
            client.apply(obj)
