"""Kueue and OCM's kueue-addon, as built into the tools cache by `e2e/build-tools.sh kueue kueue-addon`.

Kueue's controller manager (v0.19.2) is built from its Go module through the module proxy, and
kueue-addon's hub controller (addon-contrib f5844b98) from a pinned git mirror, against the Kueue
v0.16.0 tree it declares (the proxy refuses the v0.16.x line); it runs unchanged against v0.19.2, whose
storage version is still `kueue.x-k8s.io/v1beta2`.  Beside each binary the recipe copies what the
harness installs with it: Kueue's CRDs, webhook configurations and manager ClusterRole; the
ManagedServiceAccount, ClusterPermission and ClusterProfile CRDs kueue-addon's informers need, and
its hub ClusterRole.  See docs/local-control-plane.md, "Kueue and kueue-addon".
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dynamic_scoring.kube.jsontypes import JSON
from e2e.kube import Client, KubeCluster
from e2e.ocm import install_crds
from e2e.procs import Proc, free_port, port_in_use, wait_until
from e2e.tools import component_dirs

KUEUE_MANAGER = "kueue-manager"
KUEUE_ADDON_CONTROLLER = "kueue-addon-controller"

# MultiKueue's dispatchers (Configuration `multiKueue.dispatcherName`).  Kueue's default
# (`kueue.x-k8s.io/multikueue-dispatcher-all-at-once`) sends a Workload to every cluster of its
# MultiKueueConfig at once; the incremental one nominates `stepSize`
# of them per round, in `spec.clusters` order (feature gate MultiKueueIncrementalDispatcherRespectConfigOrder,
# Beta and on by default in v0.19, as is MultiKueueIncrementalDispatcherConfig, which honours `stepSize`),
# and adds the next ones only when a round ends without admission.
INCREMENTAL_DISPATCHER = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
# The length of the incremental dispatcher's round: a constant 5 minutes upstream, read from this
# variable by the harness's build (e2e/build-tools.sh, recipe_kueue), so tests of spill-over to the next
# cluster need not wait minutes per step.  An unset or invalid value keeps the 5 minutes.
ROUND_TIMEOUT_ENV = "KUEUE_INCREMENTAL_DISPATCHER_ROUND_TIMEOUT"
# What Go's time.ParseDuration accepts, unsigned: checked here because the patched Kueue silently falls
# back to 5 minutes on a value it cannot parse, which would show only as a slow test.
_GO_DURATION = re.compile(r"(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+")


@dataclass(frozen=True)
class KueueBuild:
    """The built Kueue manager and kueue-addon controller, with the manifests of the same versions."""

    manager: Path
    kueue_crds: tuple[Path, ...]
    webhooks: Path
    manager_role: Path
    kueue_source: dict[str, str]
    addon_controller: Path
    addon_crds: tuple[Path, ...]
    addon_role: Path
    addon_source: dict[str, str]


@functools.cache
def kueue_build() -> KueueBuild:
    """The pinned Kueue and kueue-addon, built on first use (cold: many minutes; `make tools` does it)."""
    dirs = component_dirs("kueue", "kueue-addon")
    kueue, addon = dirs["kueue"], dirs["kueue-addon"]
    return KueueBuild(
        manager=kueue / "bin" / KUEUE_MANAGER,
        kueue_crds=tuple(sorted((kueue / "crds").glob("*.yaml"))),
        webhooks=kueue / "webhook" / "manifests.yaml",
        manager_role=kueue / "rbac" / "role.yaml",
        kueue_source=json.loads((kueue / "source.json").read_text()),
        addon_controller=addon / "bin" / KUEUE_ADDON_CONTROLLER,
        addon_crds=tuple(sorted((addon / "crds").glob("*.yaml"))),
        addon_role=addon / "rbac" / "cluster-role.yaml",
        addon_source=json.loads((addon / "source.json").read_text()),
    )


NAMESPACE = "kueue-system"


# Kueue's webhooks the harness installs: those for Kueue's own kinds and for batch/v1 Jobs, the one
# integration it enables.  The others (Pods, Deployments, StatefulSets, Kubeflow, Ray, ...) belong to
# integrations left off, and with `failurePolicy: Fail` they would put Kueue in the path of every Pod
# of the shared test hub.
WEBHOOK_GROUPS = {"kueue.x-k8s.io", "batch"}


def _webhooks(build: KueueBuild, base_url: str, ca_bundle: str, prefix: str) -> list[dict[str, Any]]:
    """Kueue's webhook configurations, pointed at `base_url` with `ca_bundle`, for the kinds above."""
    configs = []
    for doc in yaml.safe_load_all(build.webhooks.read_text()):
        if not doc:
            continue
        hooks = []
        for hook in doc.get("webhooks") or []:
            groups = {g for rule in hook.get("rules") or [] for g in rule.get("apiGroups") or []}
            if not groups & WEBHOOK_GROUPS:
                continue
            path = hook["clientConfig"]["service"]["path"]
            hooks.append({**hook, "clientConfig": {"url": base_url + path, "caBundle": ca_bundle}})
        configs.append(
            {**doc, "metadata": {"name": f"{prefix}-{doc['metadata']['name']}"}, "webhooks": hooks}
        )
    return configs


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


@dataclass
class KueueManager:
    """Kueue's controller manager as a process against one cluster, its webhooks on loopback.

    What Kueue's kustomize install does, done for a process: the CRDs, the `kueue-system` namespace, a
    Configuration (no internal cert management, no leader election, the batch/Job integration), a
    serving certificate for 127.0.0.1 from the cluster's CA, and the webhook configurations with
    `url:` and `caBundle` instead of a Service.  Every listener binds 127.0.0.1.

    As a MultiKueue manager it runs Kueue's default dispatcher unless `dispatcher` names another
    (`INCREMENTAL_DISPATCHER`): ordered dispatch, one cluster after the other, is what tests of
    dispatch by score need.  `step_size` sets the incremental dispatcher's clusters per round, and
    `round_timeout` (a Go duration, e.g. "5s") its round length; both only with that dispatcher.  Any
    other `dispatcher` name is Kueue's External mode: an outside controller nominates the clusters,
    and `feature_gates` carries what a sample's Configuration turns on for it.  Left at None, the
    Configuration and the environment are exactly those of a plain start.
    """

    build: KueueBuild
    cluster: KubeCluster
    proc: Proc | None = None
    ports: dict[str, int] = field(default_factory=dict)
    registered: list[tuple[str, str]] = field(default_factory=list)  # webhook configurations: (kind, name)
    dispatcher: str | None = None  # Configuration multiKueue.dispatcherName; None: Kueue's default
    step_size: int | None = None  # multiKueue.incrementalDispatcherConfig.stepSize; None: Kueue's 3
    round_timeout: str | None = None  # $KUEUE_INCREMENTAL_DISPATCHER_ROUND_TIMEOUT; None: 5 minutes
    # Configuration featureGates (a sample's); None: only VisibilityOnDemand off, on the command line
    feature_gates: dict[str, bool] | None = None

    def __post_init__(self) -> None:
        """Paths and names; and reject dispatcher settings Kueue would refuse or silently ignore.

        Kueue exits on a `stepSize` without the incremental dispatcher or below 1, and the patched
        build ignores a round timeout it cannot parse; failing here says which setting is wrong.
        """
        self.dir = self.cluster.dir / "kueue"
        self.prefix = f"kueue-{self.cluster.name}"
        incremental = self.dispatcher == INCREMENTAL_DISPATCHER
        if (self.step_size is not None or self.round_timeout is not None) and not incremental:
            raise ValueError(f"step_size and round_timeout need dispatcher={INCREMENTAL_DISPATCHER!r}")
        if self.step_size is not None and self.step_size < 1:
            raise ValueError(f"step_size must be at least 1, not {self.step_size}")
        timeout = self.round_timeout
        if timeout is not None and not (_GO_DURATION.fullmatch(timeout) and re.search("[1-9]", timeout)):
            raise ValueError(f"round_timeout {self.round_timeout!r} is not a positive Go duration (e.g. 5s)")

    def _multikueue_config(self) -> dict[str, Any] | None:
        """The Configuration's `multiKueue` section, or None to leave it out (Kueue's defaults)."""
        if self.dispatcher is None:
            return None
        section: dict[str, Any] = {"dispatcherName": self.dispatcher}
        if self.step_size is not None:
            section["incrementalDispatcherConfig"] = {"stepSize": self.step_size}
        return section

    def install(self) -> None:
        """CRDs (Established) and namespace (idempotent): before `start`, and before any Kueue object.

        Kueue's manager exits at once when a kind it indexes is not served yet.
        """
        client = Client(self.cluster.admin_kubeconfig)
        install_crds(client, self.build.kueue_crds)
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})

    def start(self, timeout: float = 90) -> Proc:
        """Start the manager, register its webhooks, and wait until it is ready."""
        self.dir.mkdir(parents=True, exist_ok=True)
        issued = self.cluster.ca.issue(
            "kueue-serving", common_name=f"{self.prefix}-webhooks", server_hosts=("127.0.0.1",)
        )
        certs = self.dir / "certs"
        certs.mkdir(exist_ok=True)
        (certs / "tls.crt").write_bytes(issued.cert_pem)
        (certs / "tls.key").write_bytes(issued.key_pem)
        (certs / "tls.key").chmod(0o600)
        self.ports = {name: free_port() for name in ("webhook", "health", "metrics")}
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.ports['health']}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.ports['metrics']}"},
            "webhook": {"host": "127.0.0.1", "port": self.ports["webhook"], "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "manageJobsWithoutQueueName": False,
            "integrations": {"frameworks": ["batch/job"]},
        }
        multikueue = self._multikueue_config()
        if multikueue is not None:
            config["multiKueue"] = multikueue
        # Kueue takes feature gates from the command line or the Configuration, never both
        gates = ["--feature-gates=VisibilityOnDemand=false"]
        if self.feature_gates is not None:
            config["featureGates"] = {"VisibilityOnDemand": False, **self.feature_gates}
            gates = []
        env = {**os.environ, "KUEUE_METRICS_CERT_DIR": str(certs)}
        if self.round_timeout is not None:
            env[ROUND_TIMEOUT_ENV] = self.round_timeout
        config_path = self.dir / "config.yaml"
        config_path.write_text(yaml.safe_dump(config))
        self.proc = Proc(
            f"{self.cluster.name}-kueue",
            [
                str(self.build.manager),
                f"--config={config_path}",
                f"--kubeconfig={self.cluster.admin_kubeconfig}",
                # the visibility API server is an aggregated apiserver on every interface: not needed
                *gates,
            ],
            self.cluster.run_dir / "logs" / f"{self.cluster.name}-kueue.log",
            env=env,
        ).start()
        ca_bundle = base64.b64encode(self.cluster.ca.cert_pem).decode()
        client = Client(self.cluster.admin_kubeconfig)
        for obj in _webhooks(
            self.build, f"https://127.0.0.1:{self.ports['webhook']}", ca_bundle, self.prefix
        ):
            client.apply(obj)
            self.registered.append((obj["kind"], obj["metadata"]["name"]))
        wait_until(
            lambda: _healthy(self.ports["health"]),
            timeout=timeout,
            what=f"Kueue on {self.cluster.name} ready (127.0.0.1:{self.ports['health']}/readyz)",
            proc=self.proc,
        )
        return self.proc

    def stop(self) -> None:
        """Remove the webhook configurations first (they fail closed), then stop the process."""
        client = Client(self.cluster.admin_kubeconfig)
        while self.registered:
            kind, name = self.registered.pop()
            client.delete("admissionregistration.k8s.io/v1", kind, name)
        if self.proc is not None:
            self.proc.stop()
            self.proc = None


# -- kueue-addon's hub controller, and the worker credentials it would get from two other addons -----

# The label kueue-addon's secret copier selects Secrets by: what the managed-serviceaccount addon puts
# on the token Secret it syncs back into the cluster's namespace on the hub.
MSA_LABEL = "authentication.open-cluster-management.io/is-managed-serviceaccount"
# kueue-addon's name for each cluster's ManagedServiceAccount and ClusterPermission, and so for the
# token Secret the managed-serviceaccount addon writes: `<cluster>/multikueue` on the hub.
WORKER_IDENTITY = "multikueue"
WORKER_SA_NAMESPACE = "open-cluster-management-agent-addon"
# What MultiKueue's manager does on a worker: create the Job copy and its prebuilt Workload, follow
# their status, delete them when done (Kueue's MultiKueue documentation lists the same rules).
WORKER_ROLE: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "e2e-multikueue-worker"},
    "rules": [
        {
            "apiGroups": ["batch"],
            "resources": ["jobs"],
            "verbs": ["create", "delete", "get", "list", "watch", "update", "patch"],
        },
        {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["workloads"],
            "verbs": ["create", "delete", "get", "list", "watch", "update", "patch"],
        },
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["workloads/status"],
            "verbs": ["get", "patch", "update"],
        },
    ],
}


def worker_token_secret(hub: Client, worker: KubeCluster, cluster: str, seconds: int = 3600) -> JSON:
    """Give MultiKueue an identity on `worker` and put its token where kueue-addon looks for it.

    In a fleet, kueue-addon creates a ManagedServiceAccount and a ClusterPermission for each cluster;
    the managed-serviceaccount addon then creates the ServiceAccount on the cluster and syncs a token
    back as the Secret `<cluster>/multikueue` (keys `token` and `ca.crt`, the MSA label), and the
    cluster-permission addon binds the rules.  Those two addons are not part of this harness, so this
    does their part directly: a ServiceAccount bound to `WORKER_ROLE` on the worker, a token from the
    TokenRequest API, and the Secret on the hub shaped as they would write it.
    """
    client = Client(worker.admin_kubeconfig)
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORKER_SA_NAMESPACE}})
    client.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": WORKER_IDENTITY, "namespace": WORKER_SA_NAMESPACE},
        }
    )
    client.apply(WORKER_ROLE)
    client.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": WORKER_ROLE["metadata"]["name"]},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": WORKER_ROLE["metadata"]["name"],
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": WORKER_IDENTITY, "namespace": WORKER_SA_NAMESPACE}
            ],
        }
    )
    token = client.service_account_token(WORKER_SA_NAMESPACE, WORKER_IDENTITY, seconds)
    return hub.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": WORKER_IDENTITY, "namespace": cluster, "labels": {MSA_LABEL: "true"}},
            "stringData": {"token": str(token), "ca.crt": worker.ca.cert_pem.decode()},
        }
    )


@dataclass
class KueueAddon:
    """kueue-addon's hub controller as a process against the hub (legacy Secret mode, the default).

    It turns the Placement an AdmissionCheck names into the MultiKueueConfig of the same name, and
    each cluster's token Secret into the kubeconfig Secret `kueue-system/multikueue-<cluster>` and the
    MultiKueueCluster `<cluster>`.  It runs with the hub's admin credentials: its chart's ClusterRole
    is checked to apply (tests/integration/test_kueue.py), but the test is about what it does.
    """

    build: KueueBuild
    hub: KubeCluster
    proc: Proc | None = None

    def install(self) -> None:
        """The CRDs its informers wait for (ManagedServiceAccount, ClusterPermission, ClusterProfile)."""
        install_crds(Client(self.hub.admin_kubeconfig), self.build.addon_crds)

    def start(self, timeout: float = 60) -> Proc:
        """Start the controller and wait until it serves its health endpoint (informers synced)."""
        port = free_port()
        self.proc = Proc(
            KUEUE_ADDON_CONTROLLER,
            [
                str(self.build.addon_controller),
                "hub",
                f"--kubeconfig={self.hub.admin_kubeconfig}",
                f"--namespace={NAMESPACE}",
                "--disable-leader-election",
                f"--listen=127.0.0.1:{port}",
            ],
            self.hub.run_dir / "logs" / f"{KUEUE_ADDON_CONTROLLER}.log",
            env={**os.environ, "KUEUE_NAMESPACE": NAMESPACE},
        ).start()
        wait_until(
            lambda: port_in_use(port),
            timeout=timeout,
            what=f"{KUEUE_ADDON_CONTROLLER} listening on 127.0.0.1:{port}",
            proc=self.proc,
        )
        return self.proc

    def stop(self) -> None:
        """Stop the process (what it wrote on the hub is the test's to delete)."""
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
