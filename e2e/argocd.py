"""Argo CD's ApplicationSet controller, the real one, as a local process against the hub.

Why a real controller: the sample ApplicationSet (`samples/argocd/`) is only worth shipping if Argo
CD reads OCM's PlacementDecisions through it the way the docs say.  The controller is built from
the `github.com/argoproj/argo-cd/v3` module (`e2e/build-tools.sh argocd`), with the CRDs and the
controller's own Role of the same version.

What an Argo CD install would provide, and this module provides instead (nothing else of Argo CD
runs: no repo-server, no application-controller, so nothing is ever synced):

* the CRDs (Application, ApplicationSet, AppProject) and the namespace `argocd`;
* the AppProject `default`, which the controller checks every generated Application against;
* `argocd-cm` and `argocd-secret`, which its settings manager reads;
* a cluster Secret (label `argocd.argoproj.io/secret-type: cluster`) per managed cluster, named as
  the ManagedCluster, as OCM's GitOpsCluster would register them: the generator matches each
  decision's `clusterName` against these names, and a destination must name a known cluster;
* the ServiceAccount `argocd-applicationset-controller` bound to Argo CD's own Role for it.  The
  process runs with that account's token, so the sample's RBAC (reading PlacementDecisions) is
  tested as it would be used, not bypassed by an admin identity.

Every port the controller opens (metrics, health probes, SCM webhook) is bound to 127.0.0.1; the
repo-server address points at a closed loopback port, since the `clusterDecisionResource`
generator never calls it.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import ipaddress
import json
import os
import secrets
import subprocess
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from dynamic_scoring.kube.api import MERGE_PATCH, NotFound
from dynamic_scoring.kube.jsontypes import JSON
from e2e.kube import Client
from e2e.pki import write_kubeconfig
from e2e.procs import Proc, StartupError, free_port, port_in_use, wait_until
from e2e.tools import BUILD_SCRIPT

NAMESPACE = "argocd"
CONTROLLER = "argocd-applicationset-controller"  # the binary and its ServiceAccount
ARGO_V1A1 = "argoproj.io/v1alpha1"
CRD_V1 = "apiextensions.k8s.io/v1"
SECRET_TYPE_LABEL = "argocd.argoproj.io/secret-type"
PART_OF = {"app.kubernetes.io/part-of": "argocd"}
# One hour: far longer than a test, so the controller's token never needs refreshing.
TOKEN_SECONDS = 3600


@dataclass(frozen=True)
class ArgoCDBuild:
    """The built controller and the manifests of the same Argo CD version."""

    binary: Path
    crds: list[Path]
    role: Path


@functools.cache
def argocd_build() -> ArgoCDBuild:
    """The pinned controller, built from the Go module proxy on first use (cold: many minutes)."""
    proc = subprocess.run([str(BUILD_SCRIPT), "argocd"], capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        name, _, path = line.partition("=")
        if name == "argocd" and path:
            root = Path(path)
            return ArgoCDBuild(
                binary=root / "bin" / CONTROLLER,
                crds=sorted((root / "crds").glob("*.yaml")),
                role=root / "rbac" / f"{CONTROLLER}-role.yaml",
            )
    raise StartupError(f"building argocd-applicationset-controller failed:\n{proc.stderr[-3000:]}")


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state held by `pid`, read from /proc.

    Read from the kernel rather than from the flags we passed, so a port the controller opens on
    its own (a default we forgot to override) shows up too.
    """
    inodes: set[str] = set()
    with contextlib.suppress(FileNotFoundError, PermissionError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    found: set[tuple[str, int]] = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/net/{table}") as f:
            next(f)
            for line in f:
                parts = line.split()
                if parts[3] != "0A" or parts[9] not in inodes:  # 0A = LISTEN
                    continue
                hex_addr, hex_port = parts[1].split(":")
                raw = bytes.fromhex(hex_addr)
                # /proc prints each 32-bit word of the address in host (little-endian) order
                packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                found.add((str(ipaddress.ip_address(packed)), int(hex_port, 16)))
    return found


@dataclass
class ManagedClusterRef:
    """What Argo CD needs to know of one cluster: its name and API server (never its credentials)."""

    name: str
    server: str
    ca_pem: bytes


@dataclass
class AppSetController:
    """Installs what the controller needs on the hub, runs it, and removes all of it again."""

    hub: Client
    hub_server: str
    hub_ca_pem: bytes
    work_dir: Path
    build: ArgoCDBuild
    proc: Proc | None = None
    ports: dict[str, int] = field(default_factory=dict)

    # ---------------------------------------------------------------- install
    def install(self, clusters: Iterable[ManagedClusterRef]) -> None:
        """CRDs, namespace, AppProject, settings, cluster Secrets and the controller's identity."""
        self._wait_namespace_gone()  # a previous test's `argocd` may still be terminating
        for path in self.build.crds:
            self.hub.apply_yaml(path.read_text())
        for name in self._crd_names():
            wait_until(
                functools.partial(self._crd_established, name), timeout=60, what=f"CRD {name} Established"
            )
        self.hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        meta = {"namespace": NAMESPACE, "labels": PART_OF}
        self.hub.apply(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cm", **meta}, "data": {}}
        )
        # `server.secretkey` is what argocd-server generates on first start; without it the settings
        # do not load and the controller runs without its SCM webhook endpoint (logged as an error).
        self.hub.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "argocd-secret", **meta},
                "stringData": {"server.secretkey": secrets.token_urlsafe(32)},
            }
        )
        self.hub.apply(
            {
                "apiVersion": ARGO_V1A1,
                "kind": "AppProject",
                "metadata": {"name": "default", "namespace": NAMESPACE},
                "spec": {
                    "sourceRepos": ["*"],
                    "destinations": [{"server": "*", "namespace": "*"}],
                    "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
                },
            }
        )
        for cluster in clusters:
            self.register_cluster(cluster)
        self.hub.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": CONTROLLER, "namespace": NAMESPACE},
            }
        )
        role = yaml.safe_load(self.build.role.read_text())
        role["metadata"]["namespace"] = NAMESPACE
        self.hub.apply(role)
        self.hub.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": CONTROLLER, "namespace": NAMESPACE},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": CONTROLLER},
                "subjects": [{"kind": "ServiceAccount", "name": CONTROLLER, "namespace": NAMESPACE}],
            }
        )

    def register_cluster(self, cluster: ManagedClusterRef) -> None:
        """An Argo CD cluster Secret: name and server only; no credentials, nothing ever syncs."""
        config = {"tlsClientConfig": {"insecure": False, "caData": base64.b64encode(cluster.ca_pem).decode()}}
        self.hub.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": f"cluster-{cluster.name}",
                    "namespace": NAMESPACE,
                    "labels": {SECRET_TYPE_LABEL: "cluster"},
                },
                "stringData": {"name": cluster.name, "server": cluster.server, "config": json.dumps(config)},
            }
        )

    # ---------------------------------------------------------------- run
    def start(self, timeout: float = 90) -> Proc:
        """Run the controller as its ServiceAccount and wait until its reconciler has started."""
        token = self.hub.service_account_token(NAMESPACE, CONTROLLER, TOKEN_SECONDS)
        kubeconfig = write_kubeconfig(
            self.work_dir / f"{CONTROLLER}.kubeconfig",
            server=self.hub_server,
            ca_pem=self.hub_ca_pem,
            user=CONTROLLER,
            token=str(token),
            cluster="hub",
            namespace=NAMESPACE,
        )
        self.ports = {name: free_port() for name in ("metrics", "probe", "webhook", "repo-server")}
        argv = [
            str(self.build.binary),
            f"--kubeconfig={kubeconfig}",
            f"--namespace={NAMESPACE}",
            "--enable-leader-election=false",
            f"--metrics-addr=127.0.0.1:{self.ports['metrics']}",
            f"--probe-addr=127.0.0.1:{self.ports['probe']}",
            f"--webhook-addr=127.0.0.1:{self.ports['webhook']}",
            f"--argocd-repo-server=127.0.0.1:{self.ports['repo-server']}",
            "--logformat=text",
        ]
        # controller-runtime reads its REST config from $KUBECONFIG, the cobra flag only sets the namespace
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        self.proc = Proc(CONTROLLER, argv, self.work_dir / f"{CONTROLLER}.log", env=env).start()
        wait_until(self._ready, timeout=timeout, what=f"{CONTROLLER} reconciler started", proc=self.proc)
        return self.proc

    def _ready(self) -> bool:
        """The ApplicationSet reconciler has started (its metrics exist).

        Not the probe port: the controller registers no health checks there, so `/readyz` answers
        404 for as long as it runs.  controller-runtime creates the reconciler's counters when it
        starts it; events arriving before its caches sync are queued, not lost.
        """
        url = f"http://127.0.0.1:{self.ports['metrics']}/metrics"
        with urllib.request.urlopen(url, timeout=2) as resp:
            return b'controller_runtime_reconcile_total{controller="applicationset"' in resp.read()

    def stop(self) -> None:
        """Stop the process and check its ports are free again."""
        if self.proc is None:
            return
        self.proc.stop()
        opened = [self.ports[n] for n in ("metrics", "probe", "webhook")]
        wait_until(
            lambda: not any(port_in_use(p) for p in opened), timeout=15, what=f"{CONTROLLER}'s ports freed"
        )
        self.proc = None

    # ---------------------------------------------------------------- read
    def applications(self) -> list[JSON]:
        """Every Application in `argocd`."""
        return self.hub.items(ARGO_V1A1, "Application", NAMESPACE)

    # ---------------------------------------------------------------- remove
    def uninstall(self) -> None:
        """Remove everything `install` created and whatever the test left in `argocd`, CRDs included.

        Run after `stop`: with no Argo CD controller left to honour a finalizer on an Application or
        ApplicationSet, any is dropped first; otherwise the namespace would never finish terminating.
        """
        for kind in ("ApplicationSet", "Application"):
            for obj in self._argo_items(kind):
                if obj["metadata"].get("finalizers"):
                    self.hub.api.request(
                        "PATCH",
                        self.hub.resource(ARGO_V1A1, kind).path(NAMESPACE, obj["metadata"]["name"]),
                        body={"metadata": {"finalizers": None}},
                        content_type=MERGE_PATCH,
                    )
        self.hub.delete("v1", "Namespace", NAMESPACE)
        self._wait_namespace_gone()
        for name in self._crd_names():
            self.hub.delete(CRD_V1, "CustomResourceDefinition", name)
        for name in self._crd_names():
            wait_until(functools.partial(self._crd_gone, name), timeout=60, what=f"CRD {name} deleted")

    def _crd_names(self) -> list[str]:
        return [str(yaml.safe_load(p.read_text())["metadata"]["name"]) for p in self.build.crds]

    def _crd_established(self, name: str) -> bool:
        crd = self.hub.get(CRD_V1, "CustomResourceDefinition", name)
        return any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in crd.get("status", {}).get("conditions", [])
        )

    def _crd_gone(self, name: str) -> bool:
        return self.hub.find(CRD_V1, "CustomResourceDefinition", name) is None

    def _argo_items(self, kind: str) -> list[JSON]:
        try:
            return self.hub.items(ARGO_V1A1, kind, NAMESPACE)
        except NotFound:  # CRDs not installed (install failed early)
            return []

    def _wait_namespace_gone(self, timeout: float = 120) -> None:
        ns = self.hub.find("v1", "Namespace", NAMESPACE)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        wait_until(
            lambda: self.hub.find("v1", "Namespace", NAMESPACE) is None,
            timeout=timeout,
            what=f"namespace {NAMESPACE} to finish terminating",
        )
