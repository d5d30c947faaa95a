"""The whole local OCM environment: a hub that manages itself (`cluster1`) and a second cluster.

Topology (every listener on 127.0.0.1, every log under `<run_dir>/logs`):

    etcd ─┬─ hub kube-apiserver + controller-manager ── OCM registration/placement/addon-manager
          │     └─ also managed cluster `cluster1` (self-managed, like OCM's local-cluster)
          └─ cluster2 kube-apiserver + controller-manager
    klusterlet registration + work agents for cluster1 and cluster2 (joined by `clusteradm accept`)
    one Prometheus per managed cluster, fed by a LoadExporter the tests shape
    the process runner (`e2e.runner`), standing in for the kubelet for this project's image
    on demand, more managed clusters joined like cluster2 (`add_cluster`, `remove_cluster`)

`ControlPlane.up()` starts it and records every process in `<run_dir>/state.json`, so that a
different process (`python -m e2e.cli down`) can stop exactly what was started, and verify no
process and no port of the run is left.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shlex
import shutil
import signal
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from dynamic_scoring.outbound.addresses import AGENT_ALLOW_CIDRS_ENV, PROBE_ALLOW_CIDRS_ENV
from e2e import ocm
from e2e.containers import remove_containers, runner_label
from e2e.kube import HUB_CONTROLLERS, SPOKE_CONTROLLERS, Client, Etcd, KubeCluster
from e2e.ocm_webhooks import HubWebhooks
from e2e.pki import bootstrap_token
from e2e.procs import (
    Proc,
    StartupError,
    group_alive,
    kill_groups,
    listening_ports,
    pid_alive,
    port_in_use,
    process_start_ticks,
    wait_until,
)
from e2e.tools import OCM_VERSION_ENV, Tools, locate, ocm_release

CLUSTERS = ("cluster1", "cluster2")
# Initial CPU cores per demo pod, so a fresh environment already has something to score.
DEFAULT_LOAD = {"cluster1": (0.2, 0.4), "cluster2": (1.2, 1.6)}
Progress = Callable[[str], None]
# Short names for the components tests restart most (the process names are the long ones).
COMPONENT_ALIASES = {
    "hub-apiserver": "hub-kube-apiserver",
    "cluster1-apiserver": "hub-kube-apiserver",
    "cluster2-apiserver": "cluster2-kube-apiserver",
    "hub-controller-manager": "hub-kube-controller-manager",
    "cluster2-controller-manager": "cluster2-kube-controller-manager",
}


def _quiet(_: str) -> None:
    return None


@dataclass
class ManagedClusterInfo:
    """What a test needs to reach one managed cluster."""

    name: str
    kubeconfig: Path
    prometheus_url: str = ""
    load_file: Path | None = None


@dataclass
class ControlPlane:
    """Starts, describes and stops the local OCM environment rooted at `run_dir`."""

    run_dir: Path
    with_prometheus: bool = True
    with_runner: bool = True
    progress: Progress = _quiet
    # container: the runner runs our Deployments from the built image (podman); process: from the
    # checkout's console scripts, for quick local iteration.  DS_E2E_RUNNER chooses.
    runner_mode: str = field(default_factory=lambda: os.environ.get("DS_E2E_RUNNER", "container"))
    # which OCM release runs the hub and the klusterlets (e2e.tools.RELEASES); DS_OCM_VERSION chooses
    ocm_version: str = field(default_factory=lambda: ocm_release().version)
    procs: list[Proc] = field(default_factory=list)
    clusters: dict[str, ManagedClusterInfo] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.run_dir = self.run_dir.resolve()
        self.state_path = self.run_dir / "state.json"
        self.env_path = self.run_dir / "env"
        self.tools: Tools | None = None
        self.hub: KubeCluster | None = None
        self.spoke2: KubeCluster | None = None
        self.extra: dict[str, KubeCluster] = {}  # clusters a test added with `add_cluster`
        self.boot_token = ""
        self.etcd: Etcd | None = None
        self._stopped_ports: dict[str, set[int]] = {}
        self.prometheus: dict[str, Any] = {}

    # ------------------------------------------------------------------ start
    def up(self) -> None:
        """Start everything; on any failure stop what was started and re-raise."""
        if self.state_path.exists() and running(self.state_path):
            raise StartupError(
                f"a control plane is already running from {self.run_dir}; "
                "run `make e2e-down` (or `python -m e2e.cli down`) first"
            )
        if self.run_dir.exists():  # a previous run's data (etcd, PKI, hub credentials) must not leak in
            shutil.rmtree(self.run_dir)
        self.run_dir.mkdir(parents=True)
        started = time.monotonic()
        try:
            self._up()
        except BaseException:
            self.progress("start-up failed; stopping what was started")
            self._save_state()
            self.down()
            raise
        self._save_state()
        self._write_env()
        self.progress(f"control plane ready in {time.monotonic() - started:.0f}s; env in {self.env_path}")

    def _track(self, *procs: Proc) -> None:
        self.procs.extend(procs)
        self._save_state()

    def _up(self) -> None:
        self.progress("locating tools (builds what is missing; a cold build takes ~30 min)")
        tools = self.tools = locate(self.ocm_version)
        self.progress(f"OCM {tools.ocm.version} ({'with' if tools.ocm.webhooks else 'without'} its webhooks)")
        etcd = self.etcd = Etcd(tools.etcd, self.run_dir)
        self.progress("starting etcd")
        etcd.start()
        self._track(etcd.proc)

        token_id, token_secret = bootstrap_token()
        boot_token = self.boot_token = f"{token_id}.{token_secret}"
        hub = self.hub = KubeCluster(
            "hub",
            self.run_dir,
            tools.kube_apiserver,
            tools.kube_controller_manager,
            etcd.url,
            HUB_CONTROLLERS,
            static_tokens=[(boot_token, ocm.BOOTSTRAP_USER, "e2e001", ocm.BOOTSTRAP_GROUP)],
        )
        spoke2 = self.spoke2 = KubeCluster(
            "cluster2",
            self.run_dir,
            tools.kube_apiserver,
            tools.kube_controller_manager,
            etcd.url,
            SPOKE_CONTROLLERS,
        )
        self.progress("starting kube-apiservers for the hub and cluster2")
        for c in (hub, spoke2):
            c.launch_apiserver()
            self._track(c.procs[-1])
        for c in (hub, spoke2):
            c.wait_ready()

        # Every OCM CRD exists before kube-controller-manager starts: its garbage collector only
        # learns new kinds at its 30 s discovery resync, and until then logs "unable to get REST
        # mapping" for a dependent of such a kind (a ConfigMap owned by an AppliedManifestWork).
        webhooks = None
        if tools.ocm.webhooks:
            # before the CRDs: the addon CRDs convert through the addon webhook, and before any
            # ManagedCluster exists: the admission webhooks fail closed
            self.progress("starting OCM's registration, work and addon webhook servers")
            webhooks = HubWebhooks(tools, hub)
            self._track(*webhooks.start())
        self.progress("installing OCM CRDs")
        ocm.install_hub(tools, hub, webhooks.render_crd if webhooks else None)
        if webhooks:
            webhooks.register(Client(hub.admin_kubeconfig))
        klusterlets = [
            ocm.Klusterlet("cluster1", hub, hub, tools, boot_token),
            ocm.Klusterlet("cluster2", spoke2, hub, tools, boot_token),
        ]
        for k in klusterlets:
            k.prepare_spoke()
        for c in (hub, spoke2):
            c.start_controller_manager()
            self._track(c.procs[-1])

        self.progress("starting hub controllers and klusterlet registration agents")
        self._track(*ocm.start_hub_controllers(tools, hub))
        for k in klusterlets:
            self._track(k.start_registration())

        self._join(klusterlets)
        self.clusters = {
            "cluster1": ManagedClusterInfo("cluster1", hub.admin_kubeconfig),
            "cluster2": ManagedClusterInfo("cluster2", spoke2.admin_kubeconfig),
        }
        if self.with_prometheus:
            self._start_prometheus()
        if self.with_runner:
            self._start_runner()

    def _join(self, klusterlets: list[ocm.Klusterlet]) -> None:
        """Accept the klusterlets' clusters with clusteradm once they ask, then start their work agents.

        Returns once they are available members of the `default` ManagedClusterSet.
        """
        assert self.tools is not None and self.hub is not None
        names = [k.cluster_name for k in klusterlets]
        hub_client = Client(self.hub.admin_kubeconfig)

        def ready_to_accept() -> bool:
            # `clusteradm accept` approves the CSR *and* sets hubAcceptsClient on the
            # ManagedCluster; it fails when either is missing ("managedclusters ... not found, no
            # csr is approved yet").  The registration agent creates the CSR and the ManagedCluster
            # in either order, so wait for both.
            csrs = hub_client.items(
                "certificates.k8s.io/v1",
                "CertificateSigningRequest",
                label_selector="open-cluster-management.io/cluster-name",
            )
            asked = {i["metadata"]["labels"]["open-cluster-management.io/cluster-name"] for i in csrs}
            known = {
                i["metadata"]["name"]
                for i in hub_client.items("cluster.open-cluster-management.io/v1", "ManagedCluster")
            }
            return asked >= set(names) and known >= set(names)

        wanted = " and ".join(names)
        wait_until(ready_to_accept, timeout=120, what=f"registration CSRs and ManagedClusters of {wanted}")
        self.progress(f"accepting {wanted} with clusteradm")
        ocm.accept_clusters(self.tools, self.hub.admin_kubeconfig, names)
        for k in klusterlets:
            self._track(k.start_work())
        wait_until(
            lambda: self._clusters_available(hub_client, names),
            timeout=180,
            what=f"ManagedClusters {wanted} joined and available",
        )
        if not self.tools.ocm.webhooks:
            # a real hub of any release runs OCM's registration webhook, which puts every joining
            # cluster into the `default` set; without it, the harness sets the same label itself
            for name in names:
                hub_client.api.request(
                    "PATCH",
                    f"/apis/cluster.open-cluster-management.io/v1/managedclusters/{name}",
                    body={"metadata": {"labels": {ocm.CLUSTERSET_LABEL: "default"}}},
                    content_type="application/merge-patch+json",
                )

    def _clusters_available(self, hub: Client, names: list[str]) -> bool:
        items = hub.items("cluster.open-cluster-management.io/v1", "ManagedCluster")
        ok = set()
        for mc in items:
            conds = {c["type"]: c["status"] for c in mc.get("status", {}).get("conditions", [])}
            if (
                mc["spec"].get("hubAcceptsClient")
                and conds.get("ManagedClusterJoined") == "True"
                and conds.get("ManagedClusterConditionAvailable") == "True"
            ):
                ok.add(mc["metadata"]["name"])
        return ok >= set(names)

    def _start_prometheus(self) -> None:
        for name in CLUSTERS:
            self._start_prometheus_for(name, DEFAULT_LOAD[name])

    def _start_prometheus_for(self, name: str, load_cores: tuple[float, ...]) -> None:
        """A load exporter and a Prometheus scraping it for `name`: one demo pod per core value."""
        from e2e.loadgen import LoadFile
        from e2e.prometheus import PrometheusServer

        self.progress(f"starting the load exporter and Prometheus for {name}")
        workdir = self.run_dir / f"prometheus-{name}"
        workdir.mkdir(parents=True, exist_ok=True)
        load = LoadFile(workdir / "load.json")
        for i, cores in enumerate(load_cores, start=1):
            load.set_cpu("demo", f"app-{i}", cores, node=f"{name}-node")
        port_file = workdir / "exporter.port"
        port_file.unlink(missing_ok=True)
        exporter = Proc(
            f"{name}-load-exporter",
            [sys.executable, "-m", "e2e.loadgen", f"--load-file={load.path}", f"--port-file={port_file}"],
            self.run_dir / "logs" / f"{name}-load-exporter.log",
        ).start()
        self._track(exporter)
        port = wait_until(
            lambda pf=port_file: pf.exists() and pf.read_text(),  # type: ignore[misc]
            timeout=30,
            what=f"{name} load exporter port",
            proc=exporter,
        )
        prom = PrometheusServer(workdir, scrape_targets=[f"127.0.0.1:{port}"])
        prom.start()
        self.prometheus[name] = prom
        assert prom.proc is not None
        prom.proc.name = f"{name}-prometheus"
        self._track(prom.proc)
        self.clusters[name].prometheus_url = prom.url
        self.clusters[name].load_file = load.path

    def _start_runner(self) -> None:
        assert self.hub is not None and self.spoke2 is not None
        if self.runner_mode == "container":
            from e2e.image import build, default_tag

            started = time.monotonic()
            self.progress(f"building the image {default_tag()} (make image; seconds when nothing changed)")
            build(default_tag(), quiet=True)
            self.progress(f"image ready in {time.monotonic() - started:.0f}s")
        self.progress(
            f"starting the runner in {self.runner_mode} mode (kubelet stand-in for this project's image)"
        )
        runner = Proc(
            "runner",
            [
                sys.executable,
                "-m",
                "e2e.runner",
                f"--state-dir={self.run_dir / 'runner'}",
                f"--mode={self.runner_mode}",
                f"--cluster=hub={self.hub.admin_kubeconfig}",
                f"--cluster=cluster2={self.spoke2.admin_kubeconfig}",
                f"--clusters-dir={self.run_dir / 'runner-clusters'}",
                # every scorer of the tests listens on 127.0.0.1, which the manager's probe refuses
                # by default; this host-only network is the harness's, so the opt-out is too
                f"--extra-env={PROBE_ALLOW_CIDRS_ENV}=127.0.0.0/8",
                # and the agents' address policy refuses it too (every test Prometheus and scorer)
                f"--extra-env={AGENT_ALLOW_CIDRS_ENV}=127.0.0.0/8",
            ],
            self.run_dir / "logs" / "runner.log",
        ).start()
        self._track(runner)
        wait_until(
            lambda: (self.run_dir / "runner" / "ready").exists(),
            timeout=60,
            what="the process runner to watch both clusters",
            proc=runner,
        )

    # ------------------------------------------------------------------ extra managed clusters
    def add_cluster(self, name: str, load_cores: tuple[float, ...] = (0.4, 0.4)) -> ManagedClusterInfo:
        """Start one more managed cluster and join it as cluster2 was joined; returns how to reach it.

        A third kube-apiserver (its own CA, its own etcd prefix) and controller-manager, a
        klusterlet accepted with `clusteradm accept`, a load exporter and Prometheus like the
        others', and the runner serving it (so an enabled addon's agent runs there).  For tests
        that need a second worker besides cluster2 (MultiKueue cannot use the hub as its worker).
        `remove_cluster` detaches and stops it; the session's other tests never see it.
        """
        if self.tools is None or self.hub is None or self.etcd is None:
            raise RuntimeError("the control plane is not up")
        if name in self.clusters or name in CLUSTERS:
            raise ValueError(f"cluster {name} already exists")
        started = time.monotonic()
        spoke = KubeCluster(
            name,
            self.run_dir,
            self.tools.kube_apiserver,
            self.tools.kube_controller_manager,
            self.etcd.url,
            SPOKE_CONTROLLERS,
        )
        self.extra[name] = spoke
        self.progress(f"adding managed cluster {name}: kube-apiserver")
        spoke.launch_apiserver()
        self._track(spoke.procs[-1])
        spoke.wait_ready()
        klusterlet = ocm.Klusterlet(name, spoke, self.hub, self.tools, self.boot_token)
        klusterlet.prepare_spoke()
        spoke.start_controller_manager()
        self._track(spoke.procs[-1])
        self._track(klusterlet.start_registration())
        self._join([klusterlet])
        self.clusters[name] = ManagedClusterInfo(name, spoke.admin_kubeconfig)
        if self.with_prometheus:
            self._start_prometheus_for(name, load_cores)
        if self.with_runner:
            served = self.run_dir / "runner-clusters"
            served.mkdir(exist_ok=True)
            (served / name).write_text(str(spoke.admin_kubeconfig))
            wait_until(
                lambda: name in self._runner_serves(),
                timeout=60,
                what=f"the runner to serve {name}",
            )
        self._save_state()
        self._write_env()
        self.progress(f"managed cluster {name} joined in {time.monotonic() - started:.0f}s")
        return self.clusters[name]

    def _runner_serves(self) -> list[str]:
        try:
            return (self.run_dir / "runner" / "clusters").read_text().split()
        except FileNotFoundError:
            return []

    def remove_cluster(self, name: str, timeout: float = 180) -> None:
        """Detach a cluster `add_cluster` started from the hub, then stop its processes and drop its data.

        The order matters: the registration agent stops first (otherwise, once the hub revokes its
        access, it would bootstrap again and re-create the ManagedCluster); then the ManagedCluster is
        deleted and OCM cleans its namespace (ManifestWorks, addons) with the work agent still running to
        remove what they applied; then its namespace, which OCM leaves; the runner stops serving it; only
        then do its processes stop.
        """
        spoke = self.extra.get(name)
        if spoke is None or self.hub is None or self.etcd is None:
            raise KeyError(f"{name} was not added with add_cluster")
        started = time.monotonic()
        self.progress(f"removing managed cluster {name}")
        self.stop_component(f"{name}-registration-agent")
        hub = Client(self.hub.admin_kubeconfig)
        hub.delete("cluster.open-cluster-management.io/v1", "ManagedCluster", name)
        wait_until(
            lambda: hub.find("cluster.open-cluster-management.io/v1", "ManagedCluster", name) is None,
            timeout=timeout,
            what=f"ManagedCluster {name} deleted from the hub (OCM first removes its works and addons)",
        )
        # OCM leaves the cluster's namespace on the hub; what is left in it (scores, leases) goes with it
        hub.delete("v1", "Namespace", name)
        wait_until(
            lambda: hub.find("v1", "Namespace", name) is None,
            timeout=timeout,
            what=f"namespace {name} deleted from the hub",
        )
        (self.run_dir / "runner-clusters" / name).unlink(missing_ok=True)
        if self.with_runner:
            wait_until(
                lambda: name not in self._runner_serves(), timeout=60, what=f"the runner to drop {name}"
            )
        mine = [p for p in self.procs if p.name.startswith(f"{name}-")]
        kill_groups([p.pid for p in reversed(mine) if p.alive and p.pid is not None], timeout=10)
        for p in mine:
            p.stop(timeout=1)
            self.procs.remove(p)
        self.prometheus.pop(name, None)
        self.clusters.pop(name, None)
        del self.extra[name]
        delete_etcd_prefix(self.etcd.url, f"/registry-{name}/")
        self._save_state()
        self._write_env()
        self.progress(f"managed cluster {name} removed in {time.monotonic() - started:.0f}s")

    # ------------------------------------------------------------------ one component
    def components(self) -> list[str]:
        """Names `stop_component`/`start_component` accept (aliases of `COMPONENT_ALIASES` too)."""
        return [p.name for p in self.procs if not p.name.endswith("-load-exporter")]

    def _component(self, name: str) -> Proc:
        real = COMPONENT_ALIASES.get(name, name)
        if real.endswith("-load-exporter"):
            raise ValueError(
                f"{name} cannot be restarted: it binds a fresh port that its Prometheus would not know"
            )
        for proc in self.procs:
            if proc.name == real:
                return proc
        raise KeyError(f"no component {name!r}; known: {', '.join(self.components())}")

    def stop_component(self, name: str, *, kill: bool = False, timeout: float = 30) -> None:
        """Stop one component and wait until its process group is gone and its ports are free.

        `kill=True` sends SIGKILL at once (a crash: no graceful shutdown, open connections are
        reset); otherwise SIGTERM, then SIGKILL after `timeout`.  Stopping the runner also stops
        the processes it ran (a SIGKILLed runner cannot), as a node restart would: the restarted
        runner cannot adopt them and would otherwise run every replica twice.
        """
        proc = self._component(name)
        if not proc.alive or proc.pid is None:
            raise RuntimeError(f"{proc.name} is not running")
        pid = proc.pid
        ports = listening_ports({pid})
        self._stopped_ports[proc.name] = ports
        pod_pids = self._runner_pod_pids() if proc.name == "runner" else []
        self.progress(f"stopping {proc.name} (pid {pid}, {'SIGKILL' if kill else 'SIGTERM'})")
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        else:
            kill_groups([pid], timeout=timeout)
        wait_until(lambda: not group_alive(pid), timeout=timeout, what=f"{proc.name} to exit")
        proc.stop(timeout=1)  # reaps it
        if pod_pids:
            kill_groups(pod_pids, timeout=timeout)
            remove_containers(runner_label=runner_label(self.run_dir / "runner"))
        wait_until(
            lambda: not any(port_in_use(p) for p in ports),
            timeout=timeout,
            what=f"ports {sorted(ports)} of {proc.name} to be released",
        )
        self._save_state()

    def start_component(self, name: str, *, timeout: float = 120, extra_args: tuple[str, ...] = ()) -> None:
        """Start a stopped component again with the same command line, and wait until it is ready.

        Same command line means the same ports, certificates and data (etcd keeps every object).
        `extra_args` are appended to it for this start only (a klusterlet flag a test is about);
        the next start without them runs the original command line again.
        Ready means: an apiserver answers `/readyz`, etcd `/health`, the runner has written its
        `ready` file, and any other component accepts connections on every port it listened on
        before it was stopped (kube-controller-manager listens on none: running is all it shows).
        """
        proc = self._component(name)
        if proc.alive:
            raise RuntimeError(f"{proc.name} is already running (pid {proc.pid})")
        ready_file = self.run_dir / "runner" / "ready"
        if proc.name == "runner":
            ready_file.unlink(missing_ok=True)  # a SIGKILLed runner leaves it behind
        ports = self._stopped_ports.pop(proc.name, set())
        started = time.monotonic()
        proc.argv = [*proc.base_argv, *extra_args]
        proc.start()
        self._save_state()
        check: Callable[[], bool]
        if self.hub is not None and proc is self.hub.apiserver:
            check = self.hub.ready
        elif self.spoke2 is not None and proc is self.spoke2.apiserver:
            check = self.spoke2.ready
        elif self.etcd is not None and proc is self.etcd.proc:
            check = self.etcd.healthy
        elif proc.name == "runner":
            check = ready_file.exists
        else:

            def check() -> bool:
                return all(port_in_use(p) for p in ports)

        wait_until(check, timeout=timeout, what=f"{proc.name} ready after a restart", proc=proc)
        self.progress(f"{proc.name} ready again in {time.monotonic() - started:.1f}s (pid {proc.pid})")

    def restart_component(self, name: str, *, kill: bool = False, timeout: float = 120) -> None:
        """`stop_component` then `start_component`; to keep it down for a while, call those two."""
        self.stop_component(name, kill=kill)
        self.start_component(name, timeout=timeout)

    def _runner_pod_pids(self) -> list[int]:
        try:
            rows = json.loads((self.run_dir / "runner" / "pods.json").read_text())
        except (FileNotFoundError, ValueError):
            return []
        return [int(r["pid"]) for r in rows if r.get("pid")]

    # ------------------------------------------------------------------ describe
    def _save_state(self) -> None:
        records = [
            {
                "name": p.name,
                "pid": p.pid,
                "start": process_start_ticks(p.pid) if p.pid else None,
                "log": str(p.log_path),
            }
            for p in self.procs
            if p.pid is not None
        ]
        state = {
            "run_dir": str(self.run_dir),
            "processes": records,
            "clusters": {
                n: {
                    "kubeconfig": str(c.kubeconfig),
                    "prometheus_url": c.prometheus_url,
                    "load_file": str(c.load_file or ""),
                }
                for n, c in self.clusters.items()
            },
            "hub_kubeconfig": str(self.hub.admin_kubeconfig) if self.hub else "",
            "ocm_version": self.ocm_version,
        }
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_path)

    def _write_env(self) -> None:
        assert self.tools is not None and self.hub is not None
        path_dirs = [str(d) for d in self.tools.bin_dirs]
        values = {
            "HUB_KUBECONFIG": str(self.hub.admin_kubeconfig),
            "KUBECONFIG": str(self.hub.admin_kubeconfig),
            "E2E_RUN_DIR": str(self.run_dir),
            OCM_VERSION_ENV: self.ocm_version,
        }
        for name, info in self.clusters.items():
            values[f"{name.upper()}_KUBECONFIG"] = str(info.kubeconfig)
            values[f"{name.upper()}_PROMETHEUS_URL"] = info.prometheus_url
            values[f"{name.upper()}_LOAD_FILE"] = str(info.load_file or "")
        lines = [f"export {k}={shlex.quote(v)}" for k, v in values.items()]
        lines.append(f'export PATH={shlex.quote(":".join(path_dirs))}:"$PATH"')
        self.env_path.write_text("# written by `python -m e2e.cli up`; source it\n" + "\n".join(lines) + "\n")

    # ------------------------------------------------------------------ stop
    def down(self) -> list[str]:
        """Stop every recorded process; returns problems found afterwards (empty when clean)."""
        problems = stop_recorded(self.state_path) if self.state_path.exists() else []
        for proc in self.procs:  # already stopped; this reaps the children this process started
            proc.stop(timeout=1)
        self.procs.clear()
        return problems


def delete_etcd_prefix(etcd_url: str, prefix: str) -> int:
    """Delete every etcd key under `prefix` (a removed cluster's objects); returns how many.

    Through etcd's JSON gateway, so no etcdctl is needed: keys are base64, and the range end is the
    prefix with its last byte incremented.
    """
    key = prefix.encode()
    end = key[:-1] + bytes([key[-1] + 1])
    payload = {"key": base64.b64encode(key).decode(), "range_end": base64.b64encode(end).decode()}
    return int(_etcd_post(etcd_url, "/v3/kv/deleterange", payload).get("deleted", 0))


def _etcd_post(etcd_url: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """One call to etcd's JSON gateway (keys and values in base64)."""
    req = urllib.request.Request(f"{etcd_url}{path}", data=json.dumps(payload).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return cast(dict[str, Any], json.load(resp))


def compact_etcd(etcd_url: str) -> int:
    """Compact etcd's history up to its current revision; returns that revision.

    A watch from an older resourceVersion of a resource served without a watch cache (PodTemplates,
    see `KubeCluster.launch_apiserver`) is then answered with 410 Gone, as after a long outage.
    Resources with a watch cache are not affected: their caches watch from the current revision.
    """
    head = _etcd_post(etcd_url, "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
    revision = int(head["header"]["revision"])
    _etcd_post(etcd_url, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


def _records(state_path: Path) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = json.loads(state_path.read_text()).get("processes", [])
    return recs


def _ours(rec: dict[str, Any]) -> bool:
    pid = int(rec.get("pid") or 0)
    return pid > 0 and process_start_ticks(pid) == rec.get("start") and pid_alive(pid)


def running(state_path: Path) -> list[dict[str, Any]]:
    """The recorded processes still alive (same pid and start time)."""
    return [r for r in _records(state_path) if _ours(r)]


def stop_recorded(state_path: Path) -> list[str]:
    """Stop the recorded processes in reverse start order; report leftovers and held ports."""
    records = _records(state_path)
    alive = [r for r in records if _ours(r)]
    pids = {int(r["pid"]) for r in alive}
    ports = listening_ports(pids)
    kill_groups([int(r["pid"]) for r in reversed(alive)], timeout=10)
    problems = [f"{r['name']} (pid {r['pid']}) still running" for r in alive if group_alive(int(r["pid"]))]
    deadline = time.monotonic() + 10
    while True:
        held = sorted(p for p in ports if port_in_use(p))
        if not held or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    problems += [f"port {p} still held" for p in held]
    # the runner removes its containers when it stops; a SIGKILLed one cannot
    left = remove_containers(runner_label=runner_label(state_path.parent / "runner"))
    problems += [f"container {c} was left running by the runner (removed now)" for c in left]
    return problems


def status(state_path: Path) -> list[tuple[str, str, str]]:
    """(name, state, detail) per recorded process, for `python -m e2e.cli status`."""
    rows = []
    for rec in _records(state_path):
        if _ours(rec):
            ports = listening_ports({int(rec["pid"])})
            detail = "ports " + ",".join(map(str, sorted(ports))) if ports else ""
            rows.append((rec["name"], f"running (pid {rec['pid']})", detail))
        else:
            rows.append((rec["name"], "stopped", rec.get("log", "")))
    return rows
