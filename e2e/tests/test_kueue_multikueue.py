"""A Job MultiKueue dispatches to the worker our scores picked, through OCM's kueue-addon.

The whole path, on the session's control plane with a third managed cluster added for it:

* our addon installed as users install it (`helm install`, `clusteradm addon enable` on the two
  workers), the seasonal sample scorer registered as the DynamicScorer the Kueue samples read
  (cpu-seasonal, the one-hour forecast), each worker's agent scoring it from its own Prometheus;
* Kueue v0.19.2 with its webhooks as the MultiKueue manager on the hub and as the worker on
  cluster2 and cluster3 (`samples/kueue/worker.yaml`); the hub's own cluster, labelled
  `local-cluster` as OCM labels a self-managed hub, is left out by the sample Placement;
* kueue-addon's hub controller (addon-contrib f5844b98), turning the sample Placement's decision
  into the MultiKueueConfig, and each worker's token Secret into a MultiKueueCluster.  The token
  Secrets are what the managed-serviceaccount addon would sync back; the fixture writes them
  (`e2e.kueue.worker_token_secret`), as docs/samples.md says.

A Job submitted to the sample LocalQueue on the hub is admitted there and its copy admitted by the
chosen worker's Kueue (no pod runs: there is no kubelet).  Then the load shifts, the scores and the
decision flip, and the next Job lands on the other worker.  A third worker, cluster4, stays heavy
meanwhile.

Then the ordered sample (`samples/kueue/ordered/`) replaces kueue-addon's admission check: the
addon upgraded with `multikueueOrder.enabled`, the hub's Kueue restarted with the sample's
incremental dispatcher, one cluster per round (its 5-minute round shortened to 5 s by the harness's
build), and all three workers decided and listed in score order.  Jobs go to the best-scored worker
until its quota is used up, then to the second-best, not to the next name; when the scores move,
the order follows and nothing admitted moves.  Each step waits on conditions and its
time is printed (`-s` shows them) and kept in `TIMINGS` for the docs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.kube.api import MERGE_PATCH
from dynamic_scoring.kube.jsontypes import JSON
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.kueue import NAMESPACE as KUEUE_NS
from e2e.kueue import (
    WORKER_IDENTITY,
    KueueAddon,
    KueueBuild,
    KueueManager,
    kueue_build,
    worker_token_secret,
)
from e2e.mission import (
    ADDON_V1A1,
    CHART,
    HEAVY,
    LIGHT,
    NAMESPACE,
    RELEASE,
    SAMPLE_CONFIG,
    Mission,
    sample_documents,
)
from e2e.procs import Proc, listening_addresses, wait_until, wait_value

pytestmark = [pytest.mark.own_install, pytest.mark.late_tools]

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples" / "kueue"
ADDON = "dynamic-scoring"
WORKERS = ("cluster2", "cluster3", "cluster4")
EXTRA = "cluster3"
THIRD = "cluster4"  # heavy through the first tests, so the sample Placement never picks it
HUB_CLUSTER = "cluster1"
LOCAL_CLUSTER = "local-cluster"
PLACEMENT = "least-loaded"
KUEUE_V1B2 = "kueue.x-k8s.io/v1beta2"
JOB_NS = "default"
INTERVAL, WINDOW = 2, 5
TIMINGS: dict[str, float] = {}
MSA_V1B1 = "authentication.open-cluster-management.io/v1beta1"
CLUSTER_PERMISSION_V1A1 = "rbac.open-cluster-management.io/v1alpha1"


@dataclass
class Fleet:
    """What the steps need: the mission's handles and the Jobs submitted."""

    m: Mission
    jobs: list[str] = field(default_factory=list)
    processes: list[Proc] = field(default_factory=list)  # the Kueues and kueue-addon
    kueues: dict[str, KueueManager] = field(default_factory=dict)  # "hub" and each worker

    @property
    def hub(self) -> Client:
        return self.m.hub

    @property
    def workers(self) -> dict[str, Client]:
        """A client per worker: the mission's, which has one per cluster it enables."""
        return self.m.spokes

    def note(self, what: str, seconds: float) -> None:
        TIMINGS[what] = seconds
        print(f"[kueue] {what}: {seconds:.1f}s", flush=True)

    def multikueue_clusters(self) -> list[str]:
        config = self.hub.find(KUEUE_V1B2, "MultiKueueConfig", PLACEMENT)
        return list(((config or {}).get("spec") or {}).get("clusters") or [])

    def cluster_active(self, name: str) -> bool:
        return condition(self.hub.find(KUEUE_V1B2, "MultiKueueCluster", name), "Active") == "True"

    def submit(self) -> str:
        """`kubectl create -f samples/kueue/job.yaml` (it has a generateName); returns the name."""
        [job] = sample_documents(SAMPLES / "job.yaml")
        created = self.hub.api.request("POST", f"/apis/batch/v1/namespaces/{JOB_NS}/jobs", body=job)
        name = str(created["metadata"]["name"])
        assert created["spec"]["suspend"] is True
        # Kueue's webhook hands the Job to MultiKueue, so the hub's job controller leaves it alone
        assert created["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue", created["spec"]
        self.jobs.append(name)
        return name

    def hub_workload(self, job: str) -> JSON | None:
        for wl in self.hub.items(KUEUE_V1B2, "Workload", JOB_NS):
            if any(o.get("name") == job for o in wl["metadata"].get("ownerReferences") or []):
                return wl
        return None

    def landed(self, job: str) -> str | None:
        """The worker the hub's Workload was dispatched to, once admitted there and on the hub."""
        wl = self.hub_workload(job)
        if wl is None or condition(wl, "Admitted") != "True":
            return None
        return str((wl.get("status") or {}).get("clusterName") or "") or None

    def copy_on(self, worker: str, job: str) -> JSON | None:
        return self.workers[worker].find("batch/v1", "Job", job, JOB_NS)

    def admitted_copy(self, worker: str, job: str) -> JSON | None:
        """The copy of `job` on `worker` once its Kueue admitted it: unsuspended, its Workload Admitted."""
        copy = self.copy_on(worker, job)
        if copy is None or copy["spec"].get("suspend") is not False:
            return None
        workloads = self.workers[worker].items(KUEUE_V1B2, "Workload", JOB_NS)
        owners = [{o.get("name") for o in w["metadata"].get("ownerReferences") or []} for w in workloads]
        owned = [w for w, names in zip(workloads, owners, strict=True) if job in names]
        return copy if any(condition(w, "Admitted") == "True" for w in owned) else None


def condition(obj: JSON | None, kind: str) -> str | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


def label_cluster(hub: Client, name: str, value: str | None) -> None:
    hub.api.request(
        "PATCH",
        f"/apis/cluster.open-cluster-management.io/v1/managedclusters/{name}",
        body={"metadata": {"labels": {LOCAL_CLUSTER: value}}},
        content_type=MERGE_PATCH,
    )


def apply_file(client: Client, path: Path) -> list[JSON]:
    return [client.apply(doc) for doc in yaml.safe_load_all(path.read_text()) if doc]


def apply_sample(undo: contextlib.ExitStack, client: Client, path: Path) -> None:
    """Apply a sample file as it is, and delete its objects when `undo` closes."""
    apply_file(client, path)
    undo.callback(delete_docs, client, path)


def delete_docs(client: Client, path: Path) -> None:
    for doc in reversed([d for d in yaml.safe_load_all(path.read_text()) if d]):
        meta = doc["metadata"]
        client.delete(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace"))


@pytest.fixture(scope="module")
def fleet(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    cp = control_plane
    if not cp.with_prometheus:
        pytest.skip("needs the per-cluster Prometheus servers (DS_E2E_PROMETHEUS=1)")
    assert cp.hub is not None and cp.spoke2 is not None
    build = kueue_build()
    hub = Client(cp.hub.admin_kubeconfig, timeout=10)
    with contextlib.ExitStack() as undo:
        started = time.monotonic()
        for extra in (EXTRA, THIRD):
            cp.add_cluster(extra, load_cores=(HEAVY / 2, HEAVY / 2))
            undo.callback(cp.remove_cluster, extra)
        label_cluster(hub, HUB_CLUSTER, "true")
        undo.callback(label_cluster, hub, HUB_CLUSTER, None)
        m = Mission(
            cp,
            progress=print,
            interval=INTERVAL,
            window=WINDOW,
            work_dir=tmp_path_factory.mktemp("kueue-mission"),
            clusters=WORKERS,
            placement_ref=(KUEUE_NS, PLACEMENT),
            scorer="cpu-seasonal",
        )
        fleet = Fleet(m)
        loads = {c: m.load_file(c).read() for c in WORKERS}
        for c in WORKERS:
            undo.callback(m.load_file(c).write, loads[c])
        m.set_load("cluster2", LIGHT)
        m.set_load(EXTRA, HEAVY)
        m.set_load(THIRD, HEAVY)

        # our addon, as a user installs it
        undo.callback(uninstall_addon, m)
        m.tenant_secrets()
        m.install()
        m.enable()
        undo.callback(m.stop_local)
        m.start_gateway()
        base = m.start_scorer()
        hub.apply(m.dynamic_scorer(base))
        for doc in sample_documents(SAMPLE_CONFIG):
            hub.apply(doc)

        # Kueue on the hub (MultiKueue manager) and on each worker
        managers = fleet.kueues
        managers["hub"] = KueueManager(build, cp.hub)
        managers |= {c: KueueManager(build, cp.spoke2 if c == "cluster2" else cp.extra[c]) for c in WORKERS}
        for key, manager in list(managers.items()):
            manager.install()
            # the hub's Kueue is restarted later (another dispatcher): stop whichever runs then
            undo.callback(stop_kueue, fleet, key)
            fleet.processes.append(manager.start())
        undo.callback(uninstall_kueue_crds, cp, build)
        for client in fleet.workers.values():
            apply_sample(undo, client, SAMPLES / "worker.yaml")

        # kueue-addon, and the worker tokens the managed-serviceaccount addon would have synced
        addon = KueueAddon(build, cp.hub)
        undo.callback(delete_crds, hub, build.addon_crds)
        addon.install()
        for c in WORKERS:
            worker_token_secret(hub, cp.extra.get(c) or cp.spoke2, c)
            undo.callback(hub.delete, "v1", "Secret", WORKER_IDENTITY, c)
        undo.callback(clean_kueue_addon_objects, hub)
        undo.callback(addon.stop)
        fleet.processes.append(addon.start())

        # the samples: Placement (kueue-system), then the hub's queues and admission checks
        apply_sample(undo, hub, SAMPLES / "placement.yaml")
        apply_sample(undo, hub, SAMPLES / "multikueue.yaml")
        undo.callback(delete_jobs, fleet)
        fleet.note("setup (cluster3, cluster4, addon, 4 Kueues, kueue-addon)", time.monotonic() - started)
        yield fleet


def stop_kueue(fleet: Fleet, key: str) -> None:
    """Stop the Kueue that runs for `key` now (the hub's is replaced when the dispatcher changes)."""
    fleet.kueues[key].stop()


def uninstall_addon(m: Mission) -> None:
    for c in m.clusters:
        if m.hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, c) is not None:
            m.disable(c)
    wait_until(
        lambda: all(m.hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, c) is None for c in m.clusters),
        timeout=90,
        what="the addon disabled on both workers",
    )
    m.run_helm("uninstall", "dynamic-scoring", "--namespace", NAMESPACE, "--ignore-not-found")
    m.hub.delete("v1", "Namespace", NAMESPACE)
    gone = f"namespace {NAMESPACE} gone"
    wait_until(lambda: m.hub.find("v1", "Namespace", NAMESPACE) is None, timeout=90, what=gone)


def delete_jobs(fleet: Fleet) -> None:
    """The test's Jobs and their Workloads, on the hub and on the workers, while Kueue still runs."""
    for job in fleet.jobs:
        for client in (fleet.hub, *fleet.workers.values()):
            client.delete("batch/v1", "Job", job, JOB_NS)
    for client in (fleet.hub, *fleet.workers.values()):
        wait_until(
            lambda c=client: not c.items(KUEUE_V1B2, "Workload", JOB_NS),  # type: ignore[misc]
            timeout=60,
            what="the test's Workloads deleted",
        )


def clean_kueue_addon_objects(hub: Client) -> None:
    """What kueue-addon created: per-cluster ManagedServiceAccounts, ClusterPermissions, kubeconfigs."""
    for mc in hub.items("cluster.open-cluster-management.io/v1", "ManagedCluster"):
        c = mc["metadata"]["name"]
        hub.delete(MSA_V1B1, "ManagedServiceAccount", WORKER_IDENTITY, c)
        hub.delete(CLUSTER_PERMISSION_V1A1, "ClusterPermission", WORKER_IDENTITY, c)
        hub.delete("v1", "Secret", f"multikueue-{c}", KUEUE_NS)
    for kind in ("MultiKueueCluster", "MultiKueueConfig"):
        for obj in hub.items(KUEUE_V1B2, kind):
            hub.delete(KUEUE_V1B2, kind, obj["metadata"]["name"])


def delete_crds(client: Client, paths: tuple[Path, ...]) -> None:
    """Delete the CRDs of `paths` (after every object of theirs with a finalizer is gone)."""
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", doc["metadata"]["name"])


def uninstall_kueue_crds(cp: ControlPlane, build: KueueBuild) -> None:
    """Kueue's CRDs off the hub and cluster2 (cluster3 goes as a whole), after every Kueue object."""
    assert cp.hub is not None and cp.spoke2 is not None
    for kubeconfig in (cp.hub.admin_kubeconfig, cp.spoke2.admin_kubeconfig):
        delete_crds(Client(kubeconfig), build.kueue_crds)


def wait_target(fleet: Fleet, target: str, timeout: float) -> None:
    """The decision, then the MultiKueueConfig, name `target`, whose MultiKueueCluster is connected."""
    fleet.m.wait_ranked(target, timeout=timeout)
    wait_until(
        lambda: fleet.multikueue_clusters() == [target] and fleet.cluster_active(target),
        timeout=60,
        what=f"MultiKueueConfig {PLACEMENT} naming only {target}, its MultiKueueCluster Active",
    )


def dispatch(fleet: Fleet, target: str) -> str:
    """Submit the sample Job; it must be admitted on the hub and its copy admitted on `target` only."""
    start = time.monotonic()
    job = fleet.submit()
    landed = wait_until(lambda: fleet.landed(job), timeout=90, what=f"Job {job} admitted through MultiKueue")
    fleet.note(f"Job submitted -> admitted on {target}", time.monotonic() - start)
    assert landed == target, f"dispatched to {landed}, the Placement chose {target}"
    # The hub's Workload turns Admitted once the worker reserved quota; the worker's Kueue admits its
    # own Workload and unsuspends the copy afterwards, asynchronously: wait for both.
    copy = wait_until(
        lambda: fleet.admitted_copy(target, job),
        timeout=60,
        what=f"the copy of {job} on {target} unsuspended and its Workload admitted there",
    )
    # the origin label marks it as MultiKueue's
    assert copy["metadata"]["labels"].get("kueue.x-k8s.io/multikueue-origin"), copy["metadata"]["labels"]
    for other in WORKERS:
        if other != target:
            assert fleet.copy_on(other, job) is None, f"{job} was copied to {other} too"
    return job


def test_the_sample_placement_leaves_the_hub_out_and_kueue_addon_follows_its_decision(fleet: Fleet) -> None:
    start = time.monotonic()
    wait_target(fleet, "cluster2", timeout=180)
    fleet.note("scores -> decision -> MultiKueueConfig (first)", time.monotonic() - start)
    # the hub's Kueue writes the AdmissionCheck's status on its own, after the MultiKueueCluster's
    wait_value(
        lambda: fleet.hub.get(KUEUE_V1B2, "AdmissionCheck", PLACEMENT).get("status"),
        lambda status: condition({"status": status}, "Active") == "True",
        timeout=60,
        what=f"AdmissionCheck {PLACEMENT} Active=True",
    )
    # the hub's own cluster is never a candidate, whatever it scores
    assert HUB_CLUSTER not in fleet.m.decision()


def test_kueue_and_kueue_addon_listen_on_loopback_only(fleet: Fleet) -> None:
    """Read from the kernel: a listener one of them opens by default, not set by a flag, shows too."""
    for proc in fleet.processes:
        assert proc.pid is not None and proc.alive, proc.name
        addresses = listening_addresses({proc.pid})
        assert addresses, f"{proc.name} listens on nothing"
        assert {host for host, _ in addresses} == {"127.0.0.1"}, (proc.name, addresses)


def test_a_job_lands_on_the_least_loaded_worker(fleet: Fleet) -> None:
    wait_target(fleet, "cluster2", timeout=120)
    dispatch(fleet, "cluster2")


def test_when_the_scores_flip_the_next_job_lands_on_the_other_worker(fleet: Fleet) -> None:
    wait_target(fleet, "cluster2", timeout=120)
    flip = fleet.m.shift(EXTRA, timeout=180)
    fleet.note("load shift -> scores crossed", flip.scores_crossed)
    fleet.note("load shift -> decision", flip.decided)
    start = time.monotonic()
    wait_until(
        lambda: fleet.multikueue_clusters() == [EXTRA] and fleet.cluster_active(EXTRA),
        timeout=60,
        what=f"MultiKueueConfig following the decision to {EXTRA}",
    )
    fleet.note("decision -> MultiKueueConfig", time.monotonic() - start)
    dispatch(fleet, EXTRA)
    fleet.note("load shift -> Job landed on the new worker", time.monotonic() - start + flip.decided)
    # Kueue v0.19 does not leave the first Job where it was: its worker left the MultiKueueConfig, so
    # MultiKueue no longer sees the admitted remote, evicts the Workload ("Admitting remote no longer
    # exists") and dispatches it again, to the worker the decision names now. (v0.16.9 kept it on
    # cluster2.) A decision change therefore moves running batch work: docs/samples.md says so.
    first = fleet.jobs[0]
    start = time.monotonic()
    wait_until(
        lambda: fleet.landed(first) == EXTRA, timeout=90, what=f"the first Job dispatched again to {EXTRA}"
    )
    fleet.note(
        "decision change -> the first Job evicted and admitted again on the new worker",
        time.monotonic() - start,
    )
    evictions = (
        ((fleet.hub_workload(first) or {}).get("status") or {}).get("schedulingStats", {}).get("evictions")
    )
    assert evictions and evictions[0]["reason"] == "AdmissionCheck", evictions


# ------------------------------------------------------------------ ordered dispatch (Kueue v0.19)
ORDERED = SAMPLES / "ordered"
SPILL = "spill-over"  # the ordered sample's Placement, and so its MultiKueueConfig
ORDERED_CHECK = "multikueue-ordered"
MID = (HEAVY + LIGHT) / 2
ROUND = "5s"  # the incremental dispatcher's round, 5 minutes in Kueue's own build


def ordered_clusters(fleet: Fleet) -> list[str]:
    config = fleet.hub.find(KUEUE_V1B2, "MultiKueueConfig", SPILL)
    return list(((config or {}).get("spec") or {}).get("clusters") or [])


def set_loads(fleet: Fleet, loads: dict[str, float]) -> list[str]:
    """Set each worker's load; the workers from least to most loaded: the score order to expect."""
    for cluster, cores in loads.items():
        fleet.m.set_load(cluster, cores)
    return sorted(loads, key=lambda c: loads[c])


def wait_order(fleet: Fleet, want: list[str], timeout: float) -> None:
    wait_until(
        lambda: ordered_clusters(fleet) == want and all(fleet.cluster_active(c) for c in want),
        timeout=timeout,
        what=f"MultiKueueConfig {SPILL} listing {want}, each MultiKueueCluster Active",
    )


def evictions(fleet: Fleet, job: str) -> list[JSON]:
    status = (fleet.hub_workload(job) or {}).get("status") or {}
    return list((status.get("schedulingStats") or {}).get("evictions") or [])


def one_job_quota(client: Client) -> JSON:
    """samples/kueue/worker.yaml's ClusterQueue with room for one sample Job's CPU (500m) only."""
    [queue] = [d for d in sample_documents(SAMPLES / "worker.yaml") if d["kind"] == "ClusterQueue"]
    for group in queue["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for resource in flavor["resources"]:
                if resource["name"] == "cpu":
                    resource["nominalQuota"] = "500m"
    return client.apply(queue)


def upgrade_addon(m: Mission, setting: str) -> None:
    """`helm upgrade --reuse-values --set <setting>`, as the docs say, and the manager back up."""
    m.run_helm("upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values", "--set", setting)
    m.wait_manager()


def restart_hub_kueue(fleet: Fleet, **settings: Any) -> KueueManager:
    """The hub's Kueue stopped and started again with other `KueueManager` settings."""
    old = fleet.kueues["hub"]
    old_proc = old.proc
    assert old_proc is not None
    old.stop()
    new = KueueManager(old.build, old.cluster, **settings)
    fleet.kueues["hub"] = new
    fleet.processes[fleet.processes.index(old_proc)] = new.start()
    return new


@pytest.fixture(scope="module")
def ordered(fleet: Fleet) -> Iterator[Fleet]:
    """Switch the fleet from kueue-addon's admission check to the ordered sample, as a user would."""
    hub, m = fleet.hub, fleet.m
    with contextlib.ExitStack() as undo:
        started = time.monotonic()
        delete_jobs(fleet)
        fleet.jobs.clear()
        # kueue-addon's sample queues and checks go; kueue-addon keeps running for the MultiKueueClusters
        delete_docs(hub, SAMPLES / "multikueue.yaml")
        # the addon with the option on (its own RBAC comes with it), as docs/multikueue-order.md says
        upgrade_addon(m, "multikueueOrder.enabled=true")
        # the hub's Kueue again, with the sample's dispatcher settings and a short round
        section = yaml.safe_load((ORDERED / "kueue-config.yaml").read_text())["multiKueue"]
        restart_hub_kueue(
            fleet,
            dispatcher=section["dispatcherName"],
            step_size=section["incrementalDispatcherConfig"]["stepSize"],
            round_timeout=ROUND,
        )
        # the best worker can take one Job only, so the next one must spill over
        one_job_quota(fleet.workers[EXTRA])
        undo.callback(apply_file, fleet.workers[EXTRA], SAMPLES / "worker.yaml")
        apply_sample(undo, hub, ORDERED / "placement.yaml")
        apply_sample(undo, hub, ORDERED / "multikueue.yaml")
        undo.callback(delete_jobs, fleet)
        fleet.note("ordered setup (helm upgrade, hub Kueue restarted, samples)", time.monotonic() - started)
        yield fleet


def test_the_ordered_config_lists_every_worker_best_scored_first(ordered: Fleet) -> None:
    start = time.monotonic()
    # cluster3 least loaded, then cluster4, then cluster2: score order, not name order
    want = set_loads(ordered, {EXTRA: LIGHT, THIRD: MID, "cluster2": HEAVY})
    assert want == [EXTRA, THIRD, "cluster2"]
    wait_order(ordered, want, timeout=180)
    ordered.note("load set -> ordered MultiKueueConfig", time.monotonic() - start)
    # the Placement decides all three; the hub's own cluster stays out
    decided = sorted(
        d["clusterName"]
        for pd in ordered.hub.items(
            "cluster.open-cluster-management.io/v1beta1",
            "PlacementDecision",
            KUEUE_NS,
            label_selector=f"cluster.open-cluster-management.io/placement={SPILL}",
        )
        for d in (pd.get("status") or {}).get("decisions") or []
    )
    assert decided == sorted(WORKERS), decided
    config = ordered.hub.get(KUEUE_V1B2, "MultiKueueConfig", SPILL)
    assert config["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "dynamic-scoring-addon-manager"
    events = wait_value(
        lambda: [
            str(e.get("message"))
            for e in ordered.hub.items("v1", "Event", KUEUE_NS)
            if e.get("reason") == "MultiKueueOrderChanged"
            and (e.get("involvedObject") or {}).get("name") == SPILL
            and f"order {EXTRA} (" in str(e.get("message"))
        ],
        bool,
        timeout=30,
        what="the MultiKueueOrderChanged Event of that order",
    )
    print(f"[kueue] {events[-1]}", flush=True)
    wait_value(
        lambda: ordered.hub.get(KUEUE_V1B2, "AdmissionCheck", ORDERED_CHECK).get("status"),
        lambda status: condition({"status": status}, "Active") == "True",
        timeout=60,
        what=f"AdmissionCheck {ORDERED_CHECK} Active=True",
    )


def test_jobs_fill_the_best_worker_then_spill_over_in_score_order_and_follow_the_scores(
    ordered: Fleet,
) -> None:
    wait_order(ordered, [EXTRA, THIRD, "cluster2"], timeout=120)
    # 1. the best-scored worker takes the first Job
    first = dispatch(ordered, EXTRA)
    # 2. it has no quota left: the next Job goes to the second-best (cluster4), not to the next
    #    name (cluster2), once the dispatcher's round on cluster3 has passed
    start = time.monotonic()
    second = ordered.submit()
    landed = wait_until(lambda: ordered.landed(second), timeout=90, what=f"Job {second} admitted")
    ordered.note(
        f"Job submitted, best worker full -> admitted on {THIRD} (round {ROUND})", time.monotonic() - start
    )
    assert landed == THIRD, f"spilled over to {landed}; the score order says {THIRD}"
    wait_until(lambda: ordered.admitted_copy(THIRD, second), timeout=60, what=f"{second} admitted on {THIRD}")
    assert ordered.copy_on("cluster2", second) is None, "the last in score order got a copy"
    # 3. the scores move: cluster2 becomes the best; the order follows, nothing admitted moves
    start = time.monotonic()
    want = set_loads(ordered, {"cluster2": LIGHT, EXTRA: MID, THIRD: HEAVY})
    wait_order(ordered, want, timeout=180)
    ordered.note("load shift -> MultiKueueConfig reordered", time.monotonic() - start)
    assert (ordered.landed(first), ordered.landed(second)) == (EXTRA, THIRD)
    assert evictions(ordered, first) == [] and evictions(ordered, second) == []
    # 4. the next Job goes to the new best
    dispatch(ordered, "cluster2")
    assert (ordered.landed(first), ordered.landed(second)) == (EXTRA, THIRD)


# ----------------------------------------------- the External dispatcher, on Kueue's own timing
EXTERNAL_CONFIG = ORDERED / "kueue-config-external.yaml"
DELAY = 10  # the chart's default multikueueOrder.dispatch.delaySeconds


def workload_events(fleet: Fleet, job: str, reason: str) -> list[str]:
    """The messages of the Events `reason` on the hub Workload of `job`, oldest first."""
    name = ((fleet.hub_workload(job) or {}).get("metadata") or {}).get("name")
    found = [
        e
        for e in fleet.hub.items("v1", "Event", JOB_NS)
        if e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == name
    ]
    return [str(e.get("message")) for e in sorted(found, key=lambda e: str(e.get("firstTimestamp")))]


@pytest.fixture(scope="module")
def external(ordered: Fleet) -> Iterator[Fleet]:
    """The ordered fleet switched to the External dispatcher, as docs/multikueue-order.md says.

    The addon upgraded with `multikueueOrder.dispatch.enabled` (the default delay), and the hub's
    Kueue restarted with the sample's `kueue-config-external.yaml`: the dispatcher's name and the
    merge-patch feature gate, nothing else.  No round timeout is set in its environment: Kueue's
    incremental dispatcher does not even run in this mode, so nothing of the harness's build
    patch takes part.
    """
    hub, m = ordered.hub, ordered.m
    started = time.monotonic()
    delete_jobs(ordered)
    ordered.jobs.clear()
    upgrade_addon(m, "multikueueOrder.dispatch.enabled=true")
    config = yaml.safe_load(EXTERNAL_CONFIG.read_text())
    assert set(config) == {"apiVersion", "kind", "multiKueue", "featureGates"}, config
    new = restart_hub_kueue(
        ordered, dispatcher=config["multiKueue"]["dispatcherName"], feature_gates=config["featureGates"]
    )
    assert new.round_timeout is None
    ordered.note("External setup (helm upgrade, hub Kueue restarted)", time.monotonic() - started)
    assert hub.find(KUEUE_V1B2, "AdmissionCheck", ORDERED_CHECK) is not None
    yield ordered


def test_with_the_external_dispatcher_jobs_spill_over_in_seconds_in_score_order(external: Fleet) -> None:
    fleet = external
    want = set_loads(fleet, {EXTRA: LIGHT, THIRD: MID, "cluster2": HEAVY})
    wait_order(fleet, want, timeout=180)
    # 1. the best-scored worker is nominated first and takes the first Job
    first = dispatch(fleet, EXTRA)
    nominated = workload_events(fleet, first, "MultiKueueNominated")
    assert (
        nominated
        and f"nominated {EXTRA}, the best-scored cluster of MultiKueueConfig {SPILL}" in nominated[0]
    )
    # 2. its quota is used up: after the dispatcher's delay (not Kueue's 5-minute round) the
    #    second-best is nominated as well and admits the Job; the third never gets a copy
    start = time.monotonic()
    second = fleet.submit()
    landed = wait_until(
        lambda: fleet.landed(second), timeout=DELAY + 60, what=f"Job {second} admitted within seconds"
    )
    fleet.note(
        f"External dispatcher: Job submitted, best worker full -> admitted on {THIRD} (delay {DELAY} s)",
        time.monotonic() - start,
    )
    assert landed == THIRD, f"spilled over to {landed}; the score order says {THIRD}"
    wait_until(lambda: fleet.admitted_copy(THIRD, second), timeout=60, what=f"{second} admitted on {THIRD}")
    assert fleet.copy_on("cluster2", second) is None, "the last in score order got a copy"
    # Kueue withdraws the copy still waiting on the best worker once another admitted the Job
    wait_until(
        lambda: fleet.copy_on(EXTRA, second) is None, timeout=60, what=f"{second} withdrawn from {EXTRA}"
    )
    steps = workload_events(fleet, second, "MultiKueueNominated")
    assert len(steps) == 2 and f"nominated {THIRD}, the next" in steps[1], steps
    # our condition sits among Kueue's on the admitted Workload, naming both nominations
    ours = [
        c
        for c in (fleet.hub_workload(second) or {})["status"]["conditions"]
        if c["type"] == "MultiKueueNominated"
    ]
    assert ours and ours[0]["message"].startswith(
        f"nominated {EXTRA}, {THIRD} of MultiKueueConfig {SPILL}"
    ), ours
    assert condition(fleet.hub_workload(second), "Admitted") == "True"
    # 3. the scores move: the order follows, the next Job goes to the new best, nothing admitted moves
    start = time.monotonic()
    want = set_loads(fleet, {"cluster2": LIGHT, EXTRA: MID, THIRD: HEAVY})
    wait_order(fleet, want, timeout=180)
    fleet.note("External dispatcher: load shift -> MultiKueueConfig reordered", time.monotonic() - start)
    dispatch(fleet, "cluster2")
    assert (fleet.landed(first), fleet.landed(second)) == (EXTRA, THIRD)
    assert evictions(fleet, first) == [] and evictions(fleet, second) == []
