"""The upstream Go addon's binaries, run beside ours: what the interop tests start.

`make tools` builds addon-contrib's `dynamic-scoring-framework` at a pinned commit into the tools
cache (`e2e/build-tools.sh upstream`): `bin/dynamic-scoring-addon` (subcommands `controller`, the
addon manager, and `agent`) and `bin/dynamic-scoring-manager` (the hub's DynamicScorer controller),
with upstream's `crds/`, `rbac/`, `deploy/` and `samples/` next to them.

The upstream agent reads its summaries from the ConfigMap `dynamic-scoring-config` in the
namespace `dynamic-scoring` on its managed cluster (both hard-coded), writes AddOnPlacementScores
in its cluster's namespace on the hub, and binds `:8080` and `:8443` on every interface, so
`UpstreamAgent` runs it in a network namespace of its own (`e2e.netns`).
"""

from __future__ import annotations

import base64
import os
import urllib.request
from pathlib import Path

from e2e.kube import Client
from e2e.netns import NetNs, server_ports
from e2e.procs import Proc, free_port, wait_until
from e2e.tools import component_dirs

UPSTREAM_NAMESPACE = "dynamic-scoring"
"""Where the upstream agent looks for its summaries ConfigMap (not configurable upstream)."""


def upstream_dir() -> Path:
    """The tools-cache directory of the upstream build (built first when missing)."""
    return component_dirs("upstream")["upstream"]


def upstream_addon_binary() -> Path:
    """`dynamic-scoring-addon`: the upstream addon manager (`controller`) and agent (`agent`)."""
    return upstream_dir() / "bin" / "dynamic-scoring-addon"


def write_hub_kubeconfig(managed: Client, namespace: str, secret: str, directory: Path) -> Path:
    """The hub kubeconfig the klusterlet issued to an addon, as files an agent process can read.

    The registration agent writes it into the Secret `secret` of the addon's install namespace on
    the managed cluster (`kubeconfig`, `tls.crt`, `tls.key`; the kubeconfig names the two files by
    relative path, as a pod mounting the Secret sees them).  Waits until the Secret holds all three.
    """
    data: dict[str, str] = {}

    def issued() -> bool:
        obj = managed.find("v1", "Secret", secret, namespace)
        nonlocal data
        data = dict((obj or {}).get("data") or {})
        return all(k in data for k in ("kubeconfig", "tls.crt", "tls.key"))

    wait_until(issued, timeout=120, what=f"the hub kubeconfig Secret {namespace}/{secret}", interval=0.5)
    directory.mkdir(parents=True, exist_ok=True)
    for key, value in data.items():
        (directory / key).write_bytes(base64.b64decode(value))
    return directory / "kubeconfig"


class UpstreamAgent:
    """The upstream agent as a process in its own network namespace, for one managed cluster.

    Args:
        workdir: where its log, the namespace's holder and relay logs go.
        cluster: the managed cluster's name (its namespace on the hub).
        hub_kubeconfig: the addon's hub credentials (`write_hub_kubeconfig`).
        managed_kubeconfig: the managed cluster's credentials.
        addon_name: the name of the addon whose Lease the agent renews.
        ports: more host loopback ports the agent must reach (scorers, Prometheus).
    """

    def __init__(
        self,
        workdir: Path,
        cluster: str,
        hub_kubeconfig: Path,
        managed_kubeconfig: Path,
        *,
        addon_name: str,
        ports: list[int],
    ) -> None:
        self.workdir = workdir
        self.cluster = cluster
        self.argv = [
            str(upstream_addon_binary()),
            "agent",
            f"--kubeconfig={managed_kubeconfig}",
            f"--hub-kubeconfig={hub_kubeconfig}",
            f"--managed-kubeconfig={managed_kubeconfig}",
            f"--cluster-name={cluster}",
            f"--addon-namespace={UPSTREAM_NAMESPACE}",
            f"--addon-name={addon_name}",
        ]
        self.ports = sorted({*server_ports(hub_kubeconfig), *server_ports(managed_kubeconfig), *ports})
        self.netns: NetNs | None = None
        self.proc: Proc | None = None

    def start(self) -> UpstreamAgent:
        """Start the namespace, the relay and the agent."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        name = f"upstream-agent-{self.cluster}"
        self.netns = NetNs(self.workdir, self.ports, name=f"{name}-netns")
        try:
            self.proc = Proc(name, self.netns.argv(self.argv), self.workdir / f"{name}.log").start()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def alive(self) -> bool:
        """Whether the agent process still runs."""
        return self.proc is not None and self.proc.alive

    def stop(self) -> None:
        """Stop the agent, then its namespace and relay."""
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        if self.netns is not None:
            self.netns.stop()
            self.netns = None


# ------------------------------------------------------------------------------ upstream's hub side


def upstream_manager_binary() -> Path:
    """`dynamic-scoring-manager`: the upstream hub's DynamicScorer/DynamicScoringConfig controller."""
    return upstream_dir() / "bin" / "dynamic-scoring-manager"


class UpstreamHub:
    """Upstream's two hub processes against one hub: its addon manager and its DynamicScorer manager.

    The addon manager (`dynamic-scoring-addon controller`, addon-framework's command) serves its
    health endpoint on `:8443` of every interface with no flag to move it, so it runs in a network
    namespace of its own (`e2e.netns`) that relays only the hub apiserver's port; its self-signed
    serving certificate goes to a temporary directory, kept under `workdir` through `TMPDIR`.
    The DynamicScorer manager (controller-runtime) takes its ports by flag: metrics off, the
    health probe on a free loopback port, so it stays on the host's network, where it must reach
    the scorers' `/healthz` and `/config` on loopback.  Neither uses leader election.  Both run
    with the hub admin's kubeconfig: their own RBAC is not what the tests are about.
    """

    def __init__(self, workdir: Path, hub_kubeconfig: Path) -> None:
        self.workdir = workdir
        self.hub_kubeconfig = hub_kubeconfig
        self.netns: NetNs | None = None
        self.addon_manager: Proc | None = None
        self.manager: Proc | None = None
        self.probe_port = 0

    def start(self) -> UpstreamHub:
        """Start both; return once the DynamicScorer manager answers `/readyz`."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        tmp = self.workdir / "tmp"
        tmp.mkdir(exist_ok=True)
        try:
            ports = server_ports(self.hub_kubeconfig)
            self.netns = NetNs(self.workdir, ports, name="upstream-addon-manager-netns")
            argv = [str(upstream_addon_binary()), "controller", f"--kubeconfig={self.hub_kubeconfig}"]
            self.addon_manager = Proc(
                "upstream-addon-manager",
                self.netns.argv(argv),
                self.workdir / "upstream-addon-manager.log",
                env={**os.environ, "TMPDIR": str(tmp)},
            ).start()
            self.probe_port = free_port()
            self.manager = Proc(
                "upstream-dynamic-scoring-manager",
                [
                    str(upstream_manager_binary()),
                    f"--kubeconfig={self.hub_kubeconfig}",
                    "--metrics-bind-address=0",
                    f"--health-probe-bind-address=127.0.0.1:{self.probe_port}",
                ],
                self.workdir / "upstream-dynamic-scoring-manager.log",
            ).start()

            def ready() -> bool:
                url = f"http://127.0.0.1:{self.probe_port}/readyz"
                with urllib.request.urlopen(url, timeout=2) as resp:
                    return int(resp.status) == 200

            wait_until(ready, timeout=60, what="upstream's DynamicScorer manager ready", proc=self.manager)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def alive(self) -> bool:
        """Whether both processes still run."""
        return all(p is not None and p.alive for p in (self.addon_manager, self.manager))

    def log(self, which: str) -> str:
        """The log of `addon-manager` or `manager` so far."""
        proc = self.addon_manager if which == "addon-manager" else self.manager
        if proc is None:
            return ""
        try:
            return proc.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        """Stop both processes, then the namespace and its relay."""
        for proc in (self.manager, self.addon_manager):
            if proc is not None:
                proc.stop()
        if self.netns is not None:
            self.netns.stop()
            self.netns = None


__all__ = [
    "UPSTREAM_NAMESPACE",
    "UpstreamAgent",
    "UpstreamHub",
    "upstream_addon_binary",
    "upstream_dir",
    "upstream_manager_binary",
    "write_hub_kubeconfig",
]
