"""The scorer and distribution controllers in-process against the real hub apiserver, with real scorers.

Only the two registry controllers run (on their own `ControllerManager`, in a namespace of their own),
with a 1 s probe period so health transitions take seconds.  Scorers are real HTTP servers on
loopback; clusters are ManagedClusters with a ManagedClusterAddOn created directly on the hub (no
klusterlet), whose `status.namespace` the test sets as the registration controller would.  What is
checked is what lands on the hub: the config ManifestWorks and the ConfigMap inside them, the
DynamicScorer and DynamicScoringConfig status, Events, and the write counters.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from dynamic_scoring.addon.controllers import HubContext
from dynamic_scoring.addon.controllers.distribution.controller import WORK_NAME, distribution_controller
from dynamic_scoring.addon.controllers.registry.controller import scorer_controller
from dynamic_scoring.addon.registry.health import HealthSettings, worst_case_detection
from dynamic_scoring.addon.registry.probe_settings import ProbeSettings
from dynamic_scoring.kube.api import KubeAPI, NotFound
from dynamic_scoring.kube.controller import ControllerManager
from dynamic_scoring.ocm.naming import aps_name
from dynamic_scoring.ocm.score_labels import score_labels
from dynamic_scoring.outbound.secret_binding import ALLOWED_HOSTS_ANNOTATION
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.loopback import LoopbackServer, QuietHandler
from e2e.procs import wait_until

GROUP = "dynamic-scoring.open-cluster-management.io"
DS_V1A1 = f"{GROUP}/v1alpha1"
ADDON = "dynamic-scoring"
ADDON_V1A1 = "addon.open-cluster-management.io/v1alpha1"
CLUSTER_V1 = "cluster.open-cluster-management.io/v1"
WORK_V1 = "work.open-cluster-management.io/v1"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
AGENT_NS = "open-cluster-management-agent-addon"
PERIOD, JITTER, THRESHOLD, TIMEOUT = 1.0, 0.1, 2, 1.0


class Scorer:
    """A scoring API's hub-facing side on loopback: `/healthz` and a `/config` the test can change."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}
        self.token: str | None = None
        self.seen_auth: list[str | None] = []
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                outer.seen_auth.append(self.headers.get("Authorization"))
                if outer.token is not None and self.headers.get("Authorization") != f"Bearer {outer.token}":
                    self.reply(401, b"{}")
                elif self.path == "/healthz":
                    self.reply(200, b"ok")
                elif self.path == "/config":
                    self.reply(200, outer.config)
                else:
                    self.reply(404, b"{}")

        self.loopback = LoopbackServer(Handler, name="registry-scorer")
        self.port = self.loopback.port
        self.url = self.loopback.url

    def stop(self) -> None:
        self.loopback.stop()


@pytest.fixture
def scorer() -> Iterator[Scorer]:
    s = Scorer()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def hub(scorer_crds_hub: Client) -> Client:
    """This module's hub client: the shared one with the scorer CRDs served (see conftest.py)."""
    return scorer_crds_hub


class Registry:
    """The two registry controllers running in a thread of the test process."""

    def __init__(self, api: KubeAPI, namespace: str) -> None:
        self.registry = CollectorRegistry()
        self.cm = ControllerManager(api, metrics_registry=self.registry)
        self.stop = threading.Event()
        probe = ProbeSettings.build(
            period=PERIOD,
            jitter=JITTER,
            failure_threshold=THRESHOLD,
            allow_cidrs="127.0.0.0/8",  # the test scorers listen on loopback
        )
        ctx = HubContext(
            api, self.cm, namespace, "unused:0", resync_seconds=2.0, stop=self.stop, workers=4, probe=probe
        )
        for factory in (scorer_controller, distribution_controller):
            for controller in factory(ctx):
                self.cm.add(controller)
        self.thread = threading.Thread(target=self.cm.run, args=(self.stop,), daemon=True)
        self.thread.start()
        wait_until(self.cm.ready, timeout=60, what="registry controllers ready")

    def writes(self, verb: str, resource: str = "manifestworks.work.open-cluster-management.io") -> float:
        value = self.registry.get_sample_value(
            "dynamic_scoring_controller_writes_total",
            {"controller": "distribution", "verb": verb, "resource": resource},
        )
        return value or 0.0

    def resyncs(self) -> float:
        """The distribution controller's completed periodic resyncs (2 s apart here)."""
        value = self.registry.get_sample_value(
            "dynamic_scoring_controller_resyncs_total", {"controller": "distribution"}
        )
        return value or 0.0

    def after_resyncs(self, count: int, what: str) -> None:
        """Wait until `count` more resyncs were queued and every key since was reconciled.

        The window in which a wrong write would have happened is thus two full reconcile passes,
        not a guessed number of seconds.
        """
        queue = self.cm.controllers[1].queue
        start = self.resyncs()
        wait_for(lambda: self.resyncs() >= start + count and not queue.unfinished(), what)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)


@pytest.fixture(scope="module")
def namespace(hub: Client) -> Iterator[str]:
    name = f"registry-{uuid.uuid4().hex[:6]}"
    hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    hub.delete("v1", "Namespace", name)


def add_cluster(hub: Client, name: str, labels: dict[str, str] | None = None, ns: str = AGENT_NS) -> None:
    hub.apply(
        {
            "apiVersion": CLUSTER_V1,
            "kind": "ManagedCluster",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"hubAcceptsClient": True},
        }
    )
    hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    mca = hub.apply(
        {
            "apiVersion": ADDON_V1A1,
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": ADDON, "namespace": name},
            "spec": {"installNamespace": ns},
        }
    )
    hub.patch_status(mca, {"namespace": ns})  # what the registration controller writes


def remove_cluster(hub: Client, name: str) -> None:
    hub.delete(ADDON_V1A1, "ManagedClusterAddOn", ADDON, name)
    hub.delete(CLUSTER_V1, "ManagedCluster", name)


@pytest.fixture(scope="module")
def clusters(hub: Client) -> Iterator[list[str]]:
    tag = uuid.uuid4().hex[:4]
    names = [f"reg-{tag}-a", f"reg-{tag}-b", f"reg-{tag}-c"]
    add_cluster(hub, names[0], {"env": "prod"})
    add_cluster(hub, names[1], {"env": "prod"})
    add_cluster(hub, names[2], {"env": "dev"})
    yield names
    for name in names:
        remove_cluster(hub, name)


@pytest.fixture(scope="module")
def running(
    control_plane: ControlPlane, hub: Client, namespace: str, clusters: list[str]
) -> Iterator[Registry]:
    assert control_plane.hub is not None
    create_config(hub, namespace)
    registry = Registry(KubeAPI(control_plane.hub.admin_kubeconfig), namespace)
    yield registry
    # withdraw every work we wrote before stopping, so no other test meets them
    hub.delete(DS_V1A1, "DynamicScoringConfig", "dynamic-scoring-config", namespace)
    wait_until(lambda: not config_works(hub), timeout=60, what="config works withdrawn")
    registry.close()


def create_config(hub: Client, namespace: str) -> None:
    """The DynamicScoringConfig without masks (created, or its masks removed by a merge patch)."""
    body = {
        "apiVersion": DS_V1A1,
        "kind": "DynamicScoringConfig",
        "metadata": {"name": "dynamic-scoring-config", "namespace": namespace},
        "spec": {"masks": None},
    }
    path = hub.resource(DS_V1A1, "DynamicScoringConfig").path(namespace, "dynamic-scoring-config")
    try:
        hub.api.request("PATCH", path, body=body, content_type="application/merge-patch+json")
    except NotFound:
        hub.api.request(
            "POST", hub.resource(DS_V1A1, "DynamicScoringConfig").path(namespace), body={**body, "spec": {}}
        )


def config_works(hub: Client) -> list[dict[str, Any]]:
    return [w for w in hub.items(WORK_V1, "ManifestWork") if w["metadata"]["name"] == WORK_NAME]


def summaries(hub: Client, cluster: str) -> list[dict[str, Any]] | None:
    """The summaries in that cluster's config work, None when it has none."""
    work = hub.find(WORK_V1, "ManifestWork", WORK_NAME, cluster)
    if work is None:
        return None
    (cm,) = work["spec"]["workload"]["manifests"]
    value: list[dict[str, Any]] = json.loads(cm["data"]["summaries"])
    return value


def score_names(hub: Client, cluster: str) -> set[str] | None:
    got = summaries(hub, cluster)
    return None if got is None else {s["scoreName"] for s in got}


def make_scorer(hub: Client, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return hub.apply(
        {
            "apiVersion": DS_V1A1,
            "kind": "DynamicScorer",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
    )


def none_mode(scorer: Scorer, score: str, **extra: Any) -> dict[str, Any]:
    spec = {
        "configURL": f"{scorer.url}/config",
        "configSyncMode": "None",
        "source": {
            "host": "http://prometheus.example:9090",
            "params": {"query": "up", "range": 600, "step": 60},
        },
        "scoring": {"host": scorer.url, "params": {"name": score, "interval": 30}},
    }
    spec.update(extra)
    return spec


def scorer_obj(hub: Client, namespace: str, name: str) -> dict[str, Any]:
    return hub.get(DS_V1A1, "DynamicScorer", name, namespace)


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return {}


def health(hub: Client, namespace: str, name: str) -> str | None:
    value = (scorer_obj(hub, namespace, name).get("status") or {}).get("healthStatus")
    return None if value is None else str(value)


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    return wait_until(check, timeout=timeout, what=what, interval=0.1)


def scorer_events(hub: Client, namespace: str, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in hub.items("v1", "Event", namespace)
        if e["involvedObject"].get("name") == name and e["involvedObject"].get("kind") == "DynamicScorer"
    ]


def events(hub: Client, namespace: str, name: str) -> list[str]:
    return [e["reason"] for e in scorer_events(hub, namespace, name)]


def config_events(hub: Client, namespace: str, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in hub.items("v1", "Event", namespace)
        if e["involvedObject"].get("name") == name
        and e["involvedObject"].get("kind") == "DynamicScoringConfig"
    ]


def test_a_real_scorer_becomes_active_then_inactive_within_the_bound_and_leaves_every_configmap(
    hub: Client, namespace: str, clusters: list[str], running: Registry, scorer: Scorer
) -> None:
    score = f"live_{uuid.uuid4().hex[:4]}"
    make_scorer(hub, namespace, "live", none_mode(scorer, score, probe={"timeoutSeconds": TIMEOUT}))
    wait_for(lambda: health(hub, namespace, "live") == "Active", "scorer Active")
    wait_for(lambda: all(score in (score_names(hub, c) or ()) for c in clusters), "summary on every cluster")
    cm = hub.get(WORK_V1, "ManifestWork", WORK_NAME, clusters[0])["spec"]["workload"]["manifests"][0]
    assert cm["metadata"] == {
        "name": "dynamic-scoring-config",
        "namespace": AGENT_NS,
        "labels": {"app.kubernetes.io/managed-by": ADDON},
    }
    stopped = time.monotonic()
    scorer.stop()
    bound = worst_case_detection(HealthSettings(PERIOD, JITTER, THRESHOLD), TIMEOUT)
    # Liveness: nominally Inactive within `bound` (3.2 s: THRESHOLD probes PERIOD apart, plus the
    # probe timeout).  The deadline leaves 10 s on top for a loaded machine, so only a detection
    # about 4x slower than designed (or none) fails here; how many probes it took is checked
    # exactly below, on the controller's own Event, which no scheduling delay can change.
    wait_for(lambda: health(hub, namespace, "live") == "Inactive", "scorer Inactive", timeout=bound + 10)
    took = time.monotonic() - stopped
    print(f"\nInactive {took:.2f}s after the scorer stopped (bound {bound:.2f}s + one reconcile)")
    healthy = condition(scorer_obj(hub, namespace, "live"), "Healthy")
    assert healthy["status"] == "False" and healthy["reason"] == "Unreachable", healthy
    wait_for(lambda: all(score not in (score_names(hub, c) or ()) for c in clusters), "summary withdrawn")
    wait_for(
        lambda: sorted(events(hub, namespace, "live")) == ["ScorerActive", "ScorerInactive"],
        "exactly the Events ScorerActive and ScorerInactive on the scorer",
    )
    # Inactive at exactly the THRESHOLD-th failed probe in a row, as the controller recorded it at
    # the transition (written once; later failed rounds do not change it).  A controller that waits
    # for more failures than configured, or counts a probe twice, fails this.
    (inactive,) = [
        str(e.get("message") or "")
        for e in scorer_events(hub, namespace, "live")
        if e["reason"] == "ScorerInactive"
    ]
    assert f"Inactive after {THRESHOLD} failed probe(s) in a row" in inactive, inactive
    hub.delete(DS_V1A1, "DynamicScorer", "live", namespace)


def test_full_mode_a_changed_config_reaches_the_configmaps(
    hub: Client, namespace: str, clusters: list[str], running: Registry, scorer: Scorer
) -> None:
    score = f"full_{uuid.uuid4().hex[:4]}"
    doc: dict[str, Any] = {
        "name": "full",
        "source": {
            "type": "prometheus",
            "host": "http://prom.example:9090",
            "params": {"query": "q_one", "range": 300, "step": 30},
        },
        "scoring": {"host": scorer.url, "params": {"name": score, "interval": 20}},
    }
    scorer.config = doc
    scorer.token = "s3cret-probe-token"
    hub.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "probe-token",
                "namespace": namespace,
                # the hub sends the token only to hosts its owner listed on the Secret
                "annotations": {ALLOWED_HOSTS_ANNOTATION: f"127.0.0.1:{scorer.port}"},
            },
            "stringData": {"token": scorer.token},
        }
    )
    make_scorer(
        hub,
        namespace,
        "full",
        {
            "configURL": f"{scorer.url}/config",
            "configSyncMode": "Full",
            "probe": {"tokenSecretRef": {"name": "probe-token", "key": "token"}},
        },
    )

    def queries() -> set[str]:
        found = set()
        for c in clusters:
            for s in summaries(hub, c) or []:
                if s["scoreName"] == score:
                    found.add(s["sourceQuery"])
        return found

    def first_summary() -> dict[str, Any] | None:
        return next((s for s in summaries(hub, clusters[0]) or [] if s["scoreName"] == score), None)

    wait_for(lambda: queries() == {"q_one"}, "the first /config on every cluster")
    # Read inside a wait, not once after it: a probe that times out on a loaded machine turns the
    # scorer Inactive for a moment, and an Inactive scorer is withdrawn from every ConfigMap.
    one = wait_for(first_summary, "the first /config's summary on the first cluster")
    assert one["sourceType"] == "Prometheus" and one["scoringInterval"] == 20 and one["sourceRange"] == 300
    scorer.config = {
        **doc,
        "source": {**doc["source"], "params": {"query": "q_two", "range": 300, "step": 30}},
    }
    wait_for(lambda: queries() == {"q_two"}, "the changed /config on every cluster")
    wait_for(
        lambda: (
            scorer_obj(hub, namespace, "full")["status"]["lastSyncedConfig"]["source"]["params"]["query"]
            == "q_two"
        ),
        "status.lastSyncedConfig with the query q_two",
    )
    wait_for(
        lambda: condition(scorer_obj(hub, namespace, "full"), "ConfigSynced")["status"] == "True",
        "ConfigSynced=True",
    )
    assert set(scorer.seen_auth) == {f"Bearer {scorer.token}"}
    assert scorer.token not in json.dumps(scorer_obj(hub, namespace, "full"))
    # a document with the wrong schema: flagged, the last valid one is kept
    scorer.config = {"scoring": {"params": {"interval": "soon"}}}
    invalid = wait_for(
        lambda: (
            (c := condition(scorer_obj(hub, namespace, "full"), "ConfigSynced")).get("reason")
            == "InvalidSchema"
            and c
        ),
        "ConfigSynced=False/InvalidSchema",
    )
    assert "scoring.params.interval" in invalid["message"]
    wait_for(lambda: queries() == {"q_two"}, "the last valid /config kept on every cluster")
    hub.delete(DS_V1A1, "DynamicScorer", "full", namespace)
    wait_for(lambda: not queries(), "deleted scorer withdrawn")


def test_masks_and_a_selector_exclude_exactly_what_they_name(
    hub: Client, namespace: str, clusters: list[str], running: Registry, scorer: Scorer
) -> None:
    a, b, c = clusters
    sel, masked = f"sel_{uuid.uuid4().hex[:4]}", f"mask_{uuid.uuid4().hex[:4]}"
    make_scorer(
        hub, namespace, "sel", none_mode(scorer, sel, clusterSelector={"matchLabels": {"env": "prod"}})
    )
    make_scorer(hub, namespace, "masked", none_mode(scorer, masked))
    hub.apply(
        {
            "apiVersion": DS_V1A1,
            "kind": "DynamicScoringConfig",
            "metadata": {"name": "dynamic-scoring-config", "namespace": namespace},
            "spec": {
                "masks": [
                    {"clusterName": b, "scoreName": masked},
                    {"clusterName": "nowhere", "scoreName": masked},
                ]
            },
        }
    )
    expected = {a: {sel, masked}, b: {sel}, c: {masked}}

    def ours(cluster: str) -> set[str]:
        return (score_names(hub, cluster) or set()) & {sel, masked}

    wait_for(lambda: all(ours(k) == v for k, v in expected.items()), "selector and mask applied")

    def the_config() -> dict[str, Any]:
        return hub.get(DS_V1A1, "DynamicScoringConfig", "dynamic-scoring-config", namespace)

    dsc = wait_for(
        lambda: condition(c := the_config(), "Accepted").get("reason") == "AcceptedWithWarnings" and c,
        "warnings",
    )
    accepted = condition(dsc, "Accepted")
    assert "spec.masks[1].clusterName" in accepted["message"] and "nowhere" in accepted["message"]
    warned = wait_for(
        lambda: [
            e
            for e in config_events(hub, namespace, "dynamic-scoring-config")
            if e["reason"] == "AcceptedWithWarnings"
        ],
        "a Warning Event on the config",
    )
    assert warned[0]["type"] == "Warning" and "spec.masks[1].clusterName" in warned[0]["message"]

    def entry_of_a() -> bool:
        entries = {e["clusterName"]: e for e in the_config()["status"]["clusters"]}
        return bool(entries[a]["namespace"] == AGENT_NS and entries[a]["applied"] == "Unknown")

    # no work agent here
    wait_for(entry_of_a, f"status.clusters[] entry of {a}: namespace {AGENT_NS}, applied Unknown")
    dist = wait_for(
        lambda: (
            condition(scorer_obj(hub, namespace, "masked"), "Distributed")
            if condition(scorer_obj(hub, namespace, "masked"), "Distributed").get("status") == "True"
            else None
        ),
        "Distributed=True on the masked scorer",
    )
    assert b in dist["message"] and "masked on" in dist["message"], dist
    create_config(hub, namespace)
    for name in ("sel", "masked"):
        hub.delete(DS_V1A1, "DynamicScorer", name, namespace)
    wait_for(lambda: not any(ours(k) for k in clusters), "scorers withdrawn")


def test_a_cluster_enabled_later_gets_its_configmap_moves_with_its_namespace_and_loses_it_when_disabled(
    hub: Client, namespace: str, clusters: list[str], running: Registry, scorer: Scorer
) -> None:
    score = f"late_{uuid.uuid4().hex[:4]}"
    make_scorer(hub, namespace, "late", none_mode(scorer, score))
    wait_for(lambda: score in (score_names(hub, clusters[0]) or ()), "scorer distributed")
    late = f"reg-late-{uuid.uuid4().hex[:4]}"
    add_cluster(hub, late)
    try:
        wait_for(lambda: score in (score_names(hub, late) or ()), "late cluster served")
        mca = hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, late)
        hub.patch_status(mca, {"namespace": "scoring-elsewhere"})

        def cm_namespace() -> str | None:
            work = hub.find(WORK_V1, "ManifestWork", WORK_NAME, late)
            return (
                None
                if work is None
                else str(work["spec"]["workload"]["manifests"][0]["metadata"]["namespace"])
            )

        wait_for(lambda: cm_namespace() == "scoring-elsewhere", "ConfigMap follows the install namespace")
        work = hub.get(WORK_V1, "ManifestWork", WORK_NAME, late)
        assert work["metadata"]["labels"]["open-cluster-management.io/addon-name"] == ADDON
        (owner,) = work["metadata"]["ownerReferences"]
        assert owner["kind"] == "ManagedClusterAddOn" and owner["uid"] == mca["metadata"]["uid"]
        hub.delete(ADDON_V1A1, "ManagedClusterAddOn", ADDON, late)
        wait_for(
            lambda: hub.find(WORK_V1, "ManifestWork", WORK_NAME, late) is None, "disabled cluster loses it"
        )
    finally:
        remove_cluster(hub, late)
        hub.delete(DS_V1A1, "DynamicScorer", "late", namespace)


def test_one_scorer_change_writes_once_per_affected_cluster_and_a_resync_writes_nothing(
    hub: Client, namespace: str, clusters: list[str], running: Registry, scorer: Scorer
) -> None:
    score = f"count_{uuid.uuid4().hex[:4]}"
    make_scorer(
        hub, namespace, "count", none_mode(scorer, score, clusterSelector={"matchLabels": {"env": "prod"}})
    )
    wait_for(lambda: all(score in (score_names(hub, c) or ()) for c in clusters[:2]), "distributed")
    wait_for(lambda: not running.cm.controllers[1].queue.unfinished(), "the distribution queue drained")
    before = (running.writes("patch"), running.writes("create"), running.writes("delete"))
    running.after_resyncs(2, "two resyncs reconciled")
    assert (running.writes("patch"), running.writes("create"), running.writes("delete")) == before
    obj = scorer_obj(hub, namespace, "count")
    spec = obj["spec"]
    spec["scoring"]["params"]["interval"] = 45
    make_scorer(hub, namespace, "count", spec)

    def intervals() -> list[int]:
        return [
            s["scoringInterval"]
            for c in clusters[:2]
            for s in summaries(hub, c) or []
            if s["scoreName"] == score
        ]

    wait_for(lambda: intervals() == [45, 45], "the edit on both selected clusters")
    wait_for(lambda: running.writes("patch") - before[0] >= 2, "patch counters")
    running.after_resyncs(2, "two resyncs after the edit reconciled")  # any extra write would be in
    assert running.writes("patch") - before[0] == 2  # exactly one per affected cluster, none for clusters[2]
    hub.delete(DS_V1A1, "DynamicScorer", "count", namespace)


def test_agent_reports_show_per_cluster_on_the_scorer(
    hub: Client, namespace: str, clusters: list[str], running: Registry, scorer: Scorer
) -> None:
    score = f"rep_{uuid.uuid4().hex[:4]}"
    make_scorer(hub, namespace, "rep", none_mode(scorer, score))
    wait_for(lambda: all(score in (score_names(hub, c) or ()) for c in clusters), "distributed")
    until = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    # clusters[2]'s score is written by someone else (no agent labels): the hub does not count it, it
    # reports the name as taken there
    for cluster, ok, labels in (
        (clusters[0], True, score_labels(ADDON)),
        (clusters[1], False, score_labels(ADDON)),
        (clusters[2], True, {}),
    ):
        aps = hub.apply(
            {
                "apiVersion": APS_V1A1,
                "kind": "AddOnPlacementScore",
                "metadata": {
                    "name": aps_name(score),
                    "namespace": cluster,
                    "labels": labels,
                    "annotations": {f"{GROUP}/score-name": score},
                },
            }
        )
        hub.patch_status(
            aps,
            {
                "validUntil": until,
                "scores": [{"name": score, "value": 10}] if ok else [],
                "conditions": [
                    {
                        "type": "ScoresUpToDate",
                        "status": "True" if ok else "False",
                        "reason": "Scored" if ok else "PrometheusQueryError",
                        "message": "ok" if ok else "query #1: bad_data: parse error at char 4",
                        "lastTransitionTime": now,
                    }
                ],
            },
        )

    def entries() -> dict[str, dict[str, Any]]:
        return {
            e["clusterName"]: e
            for e in (scorer_obj(hub, namespace, "rep").get("status") or {}).get("clusters") or []
        }

    wait_for(
        lambda: entries().get(clusters[1], {}).get("reason") == "PrometheusQueryError", "report folded in"
    )
    # each cluster's report is folded in on its own: wait for the other two as well
    wait_for(
        lambda: (
            (got := entries())[clusters[0]]["status"] == "True"
            and (got[clusters[2]]["status"], got[clusters[2]]["reason"]) == ("False", "ScoreNameTaken")
        ),
        f"status.clusters[]: {clusters[0]} True, {clusters[2]} False/ScoreNameTaken",
    )

    def distributed() -> bool:
        dist = condition(scorer_obj(hub, namespace, "rep"), "Distributed")
        return bool(
            dist["reason"] == "ScoreNameTaken"  # the failure only the scorer's author can fix comes first
            and clusters[1] in dist["message"]
            and "parse error" in dist["message"]
            and f"{clusters[2]}: ScoreNameTaken" in dist["message"]
        )

    wait_for(
        distributed,
        f"Distributed reason ScoreNameTaken, its message naming {clusters[1]}, the parse error and "
        f"{clusters[2]}: ScoreNameTaken",
    )
    for cluster in clusters:
        hub.delete(APS_V1A1, "AddOnPlacementScore", aps_name(score), cluster)
    hub.delete(DS_V1A1, "DynamicScorer", "rep", namespace)


def test_what_the_schema_cannot_catch_is_flagged_in_status(
    hub: Client, namespace: str, clusters: list[str], running: Registry, scorer: Scorer
) -> None:
    spec = none_mode(scorer, f"bad_{uuid.uuid4().hex[:4]}")
    spec["source"]["host"] = "http://<NODE_IP>:9090"
    make_scorer(hub, namespace, "badhost", spec)
    valid = wait_for(
        lambda: (
            (c := condition(scorer_obj(hub, namespace, "badhost"), "Valid")).get("status") == "False" and c
        ),
        "Valid=False",
    )
    assert valid["reason"] == "InvalidSpec" and "spec.source.host" in valid["message"]
    wait_for(
        lambda: (
            condition(scorer_obj(hub, namespace, "badhost"), "Distributed").get("reason") == "NotResolved"
        ),
        "Distributed=False/NotResolved",
    )
    # a DynamicScoringConfig with another name is ignored, and says so
    hub.apply(
        {
            "apiVersion": DS_V1A1,
            "kind": "DynamicScoringConfig",
            "metadata": {"name": "dynamic-scoring", "namespace": namespace},
            "spec": {},
        }
    )
    wait_for(
        lambda: (
            condition(hub.get(DS_V1A1, "DynamicScoringConfig", "dynamic-scoring", namespace), "Accepted").get(
                "reason"
            )
            == "WrongName"
        ),
        "Accepted=False/WrongName",
    )
    assert wait_for(
        lambda: [e for e in config_events(hub, namespace, "dynamic-scoring") if e["reason"] == "WrongName"],
        "a WrongName Event",
    )
    hub.delete(DS_V1A1, "DynamicScoringConfig", "dynamic-scoring", namespace)
    hub.delete(DS_V1A1, "DynamicScorer", "badhost", namespace)


def _drained(registry: Registry) -> bool:
    return all(len(c.queue) == 0 for c in registry.cm.controllers)


def test_a_new_leader_keeps_every_config_work_while_it_starts(
    control_plane: ControlPlane,
    hub: Client,
    namespace: str,
    clusters: list[str],
    running: Registry,
    scorer: Scorer,
) -> None:
    # A second manager taking over (leader change, upgrade) sees every work in its first sync,
    # before its first plan has run; it once withdrew them all, and every agent dropped its scores.
    assert control_plane.hub is not None
    score = f"nl_{uuid.uuid4().hex[:4]}"
    make_scorer(hub, namespace, "nl", none_mode(scorer, score))
    wait_for(lambda: all(score in (score_names(hub, c) or ()) for c in clusters), "distributed")
    uids = {c: hub.get(WORK_V1, "ManifestWork", WORK_NAME, c)["metadata"]["uid"] for c in clusters}
    for _ in range(3):  # the race needs the work keys to run before the plan; give it chances
        successor = Registry(KubeAPI(control_plane.hub.admin_kubeconfig), namespace)
        try:
            wait_for(partial(_drained, successor), "the new manager's queues drained")
            assert successor.writes("delete") == 0
        finally:
            successor.close()
        assert {
            c: hub.get(WORK_V1, "ManifestWork", WORK_NAME, c)["metadata"]["uid"] for c in clusters
        } == uids
    hub.delete(DS_V1A1, "DynamicScorer", "nl", namespace)


def test_deleting_the_config_withdraws_every_config_work(
    hub: Client, namespace: str, clusters: list[str], running: Registry, scorer: Scorer
) -> None:
    score = f"wd_{uuid.uuid4().hex[:4]}"
    make_scorer(hub, namespace, "wd", none_mode(scorer, score))
    wait_for(lambda: all(score in (score_names(hub, c) or ()) for c in clusters), "distributed")
    hub.delete(DS_V1A1, "DynamicScoringConfig", "dynamic-scoring-config", namespace)
    wait_for(lambda: all(summaries(hub, c) is None for c in clusters), "works withdrawn")
    dist = condition(scorer_obj(hub, namespace, "wd"), "Distributed")
    wait_for(
        lambda: (
            condition(scorer_obj(hub, namespace, "wd"), "Distributed").get("reason")
            == "NoDynamicScoringConfig"
        ),
        "scorer says distribution is off",
    )
    del dist
    create_config(hub, namespace)
    wait_for(lambda: all(score in (score_names(hub, c) or ()) for c in clusters), "back after re-creating it")
    hub.delete(DS_V1A1, "DynamicScorer", "wd", namespace)
