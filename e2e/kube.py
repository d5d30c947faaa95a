"""etcd, kube-apiserver and kube-controller-manager as local processes, and admin access to them.

The harness reads and writes objects through the project's one Kubernetes layer
(`dynamic_scoring.kube.api.KubeAPI`, JSON over the `kubernetes` package's transport): `Client`
adds what a harness needs on top, namely paths for any apiVersion/kind found by discovery (the
harness applies CRDs and arbitrary manifests), server-side apply, and list/delete helpers.
`Kubectl` remains for what a test deliberately does as a user would type it.

One etcd serves every apiserver of a run, each under its own `--etcd-prefix`; that saves a
process without letting the clusters see each other's objects.  kube-controller-manager runs
the controllers OCM relies on (CSR signing, garbage collection, namespace deletion, service
accounts) and deliberately not `deployment`/`replicaset`: there is no kubelet, so the process
runner (`e2e.runner`) owns Deployment status instead.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dynamic_scoring.kube.api import KubeAPI, NotFound
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import Resource
from e2e.pki import CertificateAuthority, Issued, random_token, service_account_keys, write_kubeconfig
from e2e.procs import Proc, free_port, wait_until

HUB_CONTROLLERS = (
    "csrsigning,csrapproving,csrcleaner,garbagecollector,namespace,serviceaccount,"
    "serviceaccount-token,root-ca-cert-publisher,clusterrole-aggregation"
)
SPOKE_CONTROLLERS = (
    "garbagecollector,namespace,serviceaccount,serviceaccount-token,root-ca-cert-publisher,"
    "clusterrole-aggregation"
)


class Etcd:
    """A single-member etcd on loopback without fsync (test data only)."""

    def __init__(self, binary: Path, run_dir: Path) -> None:
        self.client_port = free_port()
        self.peer_port = free_port()
        self.url = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        self.proc = Proc(
            "etcd",
            [
                str(binary),
                "--name=e2e",
                f"--data-dir={run_dir / 'etcd-data'}",
                f"--listen-client-urls={self.url}",
                f"--advertise-client-urls={self.url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=e2e={peer}",
                "--listen-metrics-urls=",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            run_dir / "logs" / "etcd.log",
        )

    def start(self, timeout: float = 60) -> None:
        """Start and wait for `/health`."""
        self.proc.start()
        wait_until(self.healthy, timeout=timeout, what="etcd /health", proc=self.proc)

    def healthy(self) -> bool:
        """True when etcd answers `/health` with a healthy member."""
        with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
            return bool(json.load(resp).get("health") == "true")


@dataclass
class KubeCluster:
    """One Kubernetes control plane (apiserver + controller-manager) with its own CA."""

    name: str
    run_dir: Path
    apiserver_bin: Path
    kcm_bin: Path
    etcd_url: str
    controllers: str
    static_tokens: Sequence[tuple[str, str, str, str]] = ()
    port: int = field(default_factory=free_port)

    def __post_init__(self) -> None:
        self.dir = self.run_dir / self.name
        self.pki = self.dir / "pki"
        self.ca = CertificateAuthority(self.pki, f"{self.name}-ca")
        self.server = f"https://127.0.0.1:{self.port}"
        self.admin_kubeconfig = self.dir / "admin.kubeconfig"
        self.procs: list[Proc] = []

    def _write_credentials(self) -> Issued:
        serving = self.ca.issue(
            "apiserver",
            common_name="kube-apiserver",
            server_hosts=(
                "127.0.0.1",
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "10.0.0.1",
            ),
        )
        admin = self.ca.issue(
            "admin", common_name="e2e-admin", organizations=("system:masters",), client=True
        )
        write_kubeconfig(
            self.admin_kubeconfig,
            server=self.server,
            ca_pem=self.ca.cert_pem,
            user="e2e-admin",
            client=admin,
            cluster=self.name,
        )
        lines = [f'{random_token()},e2e-unused,e2e-unused,"e2e"']
        lines += [f'{tok},{user},{uid},"{groups}"' for tok, user, uid, groups in self.static_tokens]
        (self.pki / "tokens.csv").write_text("\n".join(lines) + "\n")
        return serving

    def launch_apiserver(self) -> None:
        """Start the apiserver process without waiting (so several clusters boot in parallel)."""
        serving = self._write_credentials()
        sa_key, sa_pub = service_account_keys(self.pki)
        logs = self.run_dir / "logs"
        api = Proc(
            f"{self.name}-kube-apiserver",
            [
                str(self.apiserver_bin),
                f"--etcd-servers={self.etcd_url}",
                f"--etcd-prefix=/registry-{self.name}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port}",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                f"--tls-cert-file={serving.cert_path}",
                f"--tls-private-key-file={serving.key_path}",
                f"--client-ca-file={self.ca.cert_path}",
                f"--token-auth-file={self.pki / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={self.server}",
                f"--service-account-key-file={sa_pub}",
                f"--service-account-signing-key-file={sa_key}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                "--profiling=false",
                # PodTemplates, which nothing here uses, are served from etcd without a watch cache,
                # so a test makes a resourceVersion expire at once by compacting etcd
                # (controlplane.compact_etcd) instead of outliving the cache's 75 s window.
                "--watch-cache-sizes=podtemplates#0",
                f"--cert-dir={self.pki / 'apiserver-certs'}",
                "--v=1",
            ],
            logs / f"{self.name}-kube-apiserver.log",
        )
        self.procs.append(api.start())

    @property
    def apiserver(self) -> Proc:
        """The kube-apiserver process (launched first)."""
        return self.procs[0]

    def wait_ready(self, timeout: float = 120) -> None:
        """Wait for the apiserver's /readyz; fails early with its log if it exits."""
        wait_until(
            self.ready, timeout=timeout, what=f"{self.name} kube-apiserver /readyz", proc=self.apiserver
        )

    def start_controller_manager(self) -> None:
        """Start kube-controller-manager with the controllers this cluster needs."""
        sa_key = self.pki / "sa.key"
        logs = self.run_dir / "logs"
        kcm = Proc(
            f"{self.name}-kube-controller-manager",
            [
                str(self.kcm_bin),
                f"--kubeconfig={self.admin_kubeconfig}",
                "--secure-port=0",
                "--leader-elect=false",
                "--use-service-account-credentials=false",
                f"--controllers={self.controllers}",
                f"--cluster-signing-cert-file={self.ca.cert_path}",
                f"--cluster-signing-key-file={self.ca.key_path}",
                "--cluster-signing-duration=24h",
                f"--service-account-private-key-file={sa_key}",
                f"--root-ca-file={self.ca.cert_path}",
                "--v=1",
            ],
            logs / f"{self.name}-kube-controller-manager.log",
        )
        self.procs.append(kcm.start())

    def ready(self) -> bool:
        """True when the apiserver answers `/readyz` with 200 (every post-start hook done)."""
        ctx = ssl.create_default_context(cafile=str(self.ca.cert_path))
        with urllib.request.urlopen(f"{self.server}/readyz", context=ctx, timeout=3) as resp:
            return bool(resp.status == 200)

    def stop(self) -> None:
        """Stop the controller-manager, then the apiserver."""
        for proc in reversed(self.procs):
            proc.stop()


class Kubectl:
    """`kubectl` bound to one kubeconfig; raises with stderr on failure.

    For what a test deliberately does as a user types it (`kubectl apply -k`, `kubectl scale`);
    the harness itself reads and writes objects through `Client`.
    """

    def __init__(self, binary: Path, kubeconfig: Path) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """Run kubectl and return stdout."""
        proc = subprocess.run(
            [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def apply(self, manifest: str) -> str:
        """Server-side apply of a YAML/JSON document stream."""
        return self.run("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=manifest)

    def get_json(self, *args: str) -> Any:
        """`kubectl get ... -o json`, decoded."""
        return json.loads(self.run("get", *args, "-o", "json"))


APPLY_PATCH = "application/apply-patch+yaml"
FIELD_MANAGER = "dynamic-scoring-e2e"


@dataclass(frozen=True)
class ResourceInfo:
    """Where objects of one apiVersion/kind live, as discovery reports it."""

    api_version: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str = "") -> str:
        """The REST path of the collection, or of one object (and a subresource of it)."""
        group, _, version = self.api_version.rpartition("/")
        resource = Resource(group, version, self.plural, "", namespaced=self.namespaced)
        return resource.path(
            (namespace or None) if self.namespaced else None,
            name or None,
            (subresource or None) if name else None,
        )


class Client:
    """Admin access to one cluster through `KubeAPI`, with discovery so any manifest can be applied."""

    def __init__(self, kubeconfig: Path, *, timeout: float = 30.0) -> None:
        self.api = KubeAPI(kubeconfig, timeout=timeout)
        self._discovered: dict[str, dict[str, ResourceInfo]] = {}

    def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """Look up `kind` in `api_version` (re-discovered once when missing: a CRD may be new)."""
        for attempt in range(2):
            known = self._discovered.get(api_version)
            if known is None or (attempt == 1 and kind not in known):
                path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
                try:
                    listing = self.api.request("GET", path).get("resources", [])
                except NotFound:  # the group/version is not served (yet)
                    listing = []
                known = {
                    r["kind"]: ResourceInfo(api_version, r["name"], bool(r["namespaced"]))
                    for r in listing
                    if "/" not in r["name"]
                }
                self._discovered[api_version] = known
            if kind in known:
                return known[kind]
        raise NotFound(404, "NotFound", f"the server has no {kind} in {api_version}")

    def _info(self, obj: JSON) -> tuple[ResourceInfo, str | None, str]:
        meta = obj.get("metadata", {})
        info = self.resource(str(obj["apiVersion"]), str(obj["kind"]))
        return info, meta.get("namespace"), str(meta["name"])

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> JSON:
        """One object; raises `NotFound` when it does not exist."""
        return self.api.request("GET", self.resource(api_version, kind).path(namespace, name))

    def find(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> JSON | None:
        """One object, or None when it does not exist."""
        try:
            return self.get(api_version, kind, name, namespace)
        except NotFound:
            return None

    def items(
        self, api_version: str, kind: str, namespace: str | None = None, *, label_selector: str = ""
    ) -> list[JSON]:
        """Every object of a kind (in one namespace, or all), optionally filtered by labels."""
        query = {"labelSelector": label_selector} if label_selector else None
        path = self.resource(api_version, kind).path(namespace)
        items: list[JSON] = self.api.request("GET", path, query=query).get("items", [])
        return items

    def service_account_token(self, namespace: str, name: str, seconds: int) -> str:
        """A token for the ServiceAccount from the TokenRequest API, valid for `seconds`."""
        answer = self.api.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds},
            },
        )
        return str(answer["status"]["token"])

    def apply(self, obj: JSON) -> JSON:
        """Server-side apply of one object, taking over fields others set (as `--force-conflicts`)."""
        info, namespace, name = self._info(obj)
        return self.api.request(
            "PATCH",
            info.path(namespace, name),
            query={"fieldManager": FIELD_MANAGER, "force": "true"},
            body=obj,
            content_type=APPLY_PATCH,
        )

    def apply_yaml(self, documents: str) -> list[JSON]:
        """Apply every object of a YAML stream, in order."""
        return [self.apply(doc) for doc in yaml.safe_load_all(documents) if doc]

    def patch_status(self, obj: JSON, status: JSON, *, field_manager: str | None = None) -> JSON:
        """Merge-patch the status subresource of an existing object.

        `field_manager` names the writer in `managedFields`, so a test can tell its own fields
        from a controller's (the default is derived from the client's user agent).
        """
        info, namespace, name = self._info(obj)
        return self.api.request(
            "PATCH",
            info.path(namespace, name, "status"),
            query={"fieldManager": field_manager} if field_manager else None,
            body={"status": status},
            content_type="application/merge-patch+json",
        )

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Delete one object (background propagation); False when it was already gone."""
        try:
            self.api.request(
                "DELETE",
                self.resource(api_version, kind).path(namespace, name),
                body={"propagationPolicy": "Background"},
            )
        except NotFound:
            return False
        return True
