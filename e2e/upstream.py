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
from pathlib import Path

from e2e.kube import Client
from e2e.netns import NetNs, server_ports
from e2e.procs import Proc, wait_until
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


__all__ = [
    "UPSTREAM_NAMESPACE",
    "UpstreamAgent",
    "upstream_addon_binary",
    "upstream_dir",
    "write_hub_kubeconfig",
]
