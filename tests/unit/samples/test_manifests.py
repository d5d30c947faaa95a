"""The sample manifests agree with each other, with the scorers, and with what their readers expect.

Here the samples are checked against each other; the OCM objects are applied to a real hub in
tests/integration/test_samples_crds.py, and the Kueue objects to Kueue's own v0.19.2 CRDs in
tests/integration/test_kueue.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.dispatch import DISPATCHER_NAME
from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.addon.render.token_allow import (
    AgentTokenAllow,
    AgentTokenNotAllowedError,
    parse_audience_allow,
    parse_destination_allow,
    parse_monitoring_role_allow,
)
from dynamic_scoring.ocm.naming import aps_name
from dynamic_scoring.outbound.secret_binding import listed_destination
from dynamic_scoring.samples.scorers import cpu, predict
from tests.unit.addon.helpers import mca
from tests.unit.samples.agent_names import agent_metric_names

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
OCM_CLUSTER = "cluster.open-cluster-management.io"


def docs(path: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SAMPLES / path).read_text()) if d is not None]


def one(path: str, kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs(path) if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (path, kind, name, found)
    return found[0]


def test_every_sample_manifest_parses_and_has_kind_and_name() -> None:
    files = [p for p in SAMPLES.rglob("*.yaml") if "upstream" not in p.parts]
    assert len(files) >= 15
    for path in files:
        for d in yaml.safe_load_all(path.read_text()):
            if path.name in (
                "remote-write-values.yaml",
                "hub-values.yaml",
                "alert-rules.yaml",
                "alert-rules.test.yaml",
            ):
                continue
            assert d["apiVersion"] and d["kind"], path
            if path.name.startswith("kueue-config"):  # Kueue's Configuration (a config file, not an object)
                assert d["kind"] == "Configuration", path
                continue
            assert d["metadata"].get("name") or d["metadata"].get("generateName"), path


# -- scorers, CRs and Placement ---------------------------------------------------------------------


def test_the_scorer_crs_name_the_scorers_scores() -> None:
    headroom = one("crs/cpu-headroom-scorer.yaml", "DynamicScorer")
    forecast = one("crs/cpu-forecast-scorer.yaml", "DynamicScorer")
    # Full mode: the score name, query and interval come from the scorer's /config.
    assert headroom["spec"]["configSyncMode"] == "Full"
    assert headroom["spec"]["configURL"].endswith(":8000/config") and cpu.DEFAULTS.port == 8000
    # None mode: the spec must say what the scorer's /config would have said.
    params = forecast["spec"]["source"]["params"]
    assert forecast["spec"]["configSyncMode"] == "None"
    assert (params["query"], params["range"], params["step"]) == (
        predict.DEFAULTS.query,
        predict.DEFAULTS.range,
        predict.DEFAULTS.step,
    )
    assert forecast["spec"]["scoring"]["params"] == {"name": predict.DEFAULTS.name, "interval": 30}
    for cr in (headroom, forecast):
        assert cr["spec"]["scoreDimensionFormat"] == "${scoreName}"  # one item per cluster
        assert cr["metadata"]["namespace"] == "dynamic-scoring"  # the manager's namespace
    config = one("crs/dynamicscoringconfig.yaml", "DynamicScoringConfig")
    assert (config["metadata"]["name"], config["metadata"]["namespace"]) == (
        "dynamic-scoring-config",
        "dynamic-scoring",
    )


def prioritizers(placement: dict[str, Any]) -> dict[str, int]:
    """Each prioritizer's weight, by score name (AddOn) or built-in name."""
    return {
        c["scoreCoordinate"].get("builtIn") or c["scoreCoordinate"]["addOn"]["scoreName"]: c["weight"]
        for c in placement["spec"]["prioritizerPolicy"]["configurations"]
    }


def addon_coordinates(placement: dict[str, Any]) -> dict[str, str]:
    """Each AddOn prioritizer's score name and the AddOnPlacementScore it reads."""
    return {
        c["scoreCoordinate"]["addOn"]["scoreName"]: c["scoreCoordinate"]["addOn"]["resourceName"]
        for c in placement["spec"]["prioritizerPolicy"]["configurations"]
        if c["scoreCoordinate"]["type"] == "AddOn"
    }


def seasonal_scorers() -> dict[str, dict[str, Any]]:
    """The seasonal sample's DynamicScorers, by the score name each publishes."""
    return {d["spec"]["scoring"]["params"]["name"]: d for d in docs("crs/cpu-seasonal-scorer.yaml")}


def test_the_seasonal_scorers_differ_only_in_score_name_and_horizon() -> None:
    scorers = seasonal_scorers()
    assert {n: s["spec"]["scoring"]["params"]["horizon"] for n, s in scorers.items()} == {
        "cpu_seasonal": 3_600,
        "cpu_seasonal_4h": 14_400,
    }
    short, long = (scorers[n]["spec"] for n in ("cpu_seasonal", "cpu_seasonal_4h"))
    strip = {"description", "scoring"}
    assert {k: v for k, v in short.items() if k not in strip} == {
        k: v for k, v in long.items() if k not in strip
    }
    assert {**short["scoring"], "params": None} == {**long["scoring"], "params": None}
    for scorer in scorers.values():  # the margin recipe's band: 10 points are 3 points of headroom
        assert scorer["spec"]["scoreNormalization"] == {
            "min": 20,
            "max": 80,
            "targetMin": -100,
            "targetMax": 100,
        }


def test_the_placement_is_the_margin_recipe_on_the_four_hour_forecast() -> None:
    placement = one("placement/placement.yaml", "Placement")
    # With "${scoreName}" the item is the score name; the APS is the sanitised score name.
    assert addon_coordinates(placement) == {"cpu_seasonal_4h": aps_name("cpu_seasonal_4h")}
    assert "cpu_seasonal_4h" in seasonal_scorers()
    # AddOn 10 + Steady 1: a challenger must lead by 100 x 1 / 10 = 10 points, 3 of headroom
    assert prioritizers(placement) == {"cpu_seasonal_4h": 10, "Steady": 1}
    assert placement["spec"]["prioritizerPolicy"]["mode"] == "Exact"
    binding = one("placement/placement.yaml", "ManagedClusterSetBinding")
    assert binding["metadata"]["namespace"] == placement["metadata"]["namespace"]
    assert binding["metadata"]["name"] == binding["spec"]["clusterSet"]
    assert placement["spec"]["clusterSets"] == [binding["spec"]["clusterSet"]]


def test_the_per_workload_placement_adds_balance_and_a_steady_that_outweighs_it() -> None:
    placement = one("placement/per-workload.yaml", "Placement")
    reference = one("placement/placement.yaml", "Placement")
    weights = prioritizers(placement)
    assert weights == {"cpu_seasonal_4h": 10, "Balance": 3, "Steady": 7}
    assert addon_coordinates(placement) == addon_coordinates(reference)
    # Balance swings the lead by 200 x wBalance / wAddOn; Steady keeps a 10-point lead beyond it
    swing = 200 * weights["Balance"] / weights["cpu_seasonal_4h"]
    assert 100 * weights["Steady"] / weights["cpu_seasonal_4h"] - swing == 10
    assert placement["metadata"]["namespace"] == reference["metadata"]["namespace"]
    assert placement["spec"]["clusterSets"] == reference["spec"]["clusterSets"]
    assert placement["spec"]["numberOfClusters"] == 1


def test_the_argo_cd_placement_is_the_sample_placement_in_its_namespace() -> None:
    reference = one("placement/placement.yaml", "Placement")
    copy = one("argocd/placement.yaml", "Placement")
    assert copy["spec"] == reference["spec"] and copy["metadata"]["name"] == reference["metadata"]["name"]
    binding = one("argocd/placement.yaml", "ManagedClusterSetBinding")
    assert binding["metadata"]["namespace"] == copy["metadata"]["namespace"] == "argocd"
    assert binding["spec"] == one("placement/placement.yaml", "ManagedClusterSetBinding")["spec"]


@pytest.mark.parametrize("path", ["kueue/placement.yaml", "kueue/ordered/placement.yaml"])
def test_kueue_placements_read_the_one_hour_forecast_without_a_margin(path: str) -> None:
    placement = one(path, "Placement")
    # Jobs stay about an hour and a decision change only steers the next one: Exact, no Steady
    assert prioritizers(placement) == {"cpu_seasonal": 10}
    assert addon_coordinates(placement) == {"cpu_seasonal": aps_name("cpu_seasonal")}
    assert placement["spec"]["prioritizerPolicy"]["mode"] == "Exact"
    assert seasonal_scorers()["cpu_seasonal"]["spec"]["scoring"]["params"]["horizon"] == 3_600
    # MultiKueue cannot dispatch to its own manager: the hub's cluster is left out
    assert placement["spec"]["predicates"] == [
        {
            "requiredClusterSelector": {
                "labelSelector": {"matchExpressions": [{"key": "local-cluster", "operator": "DoesNotExist"}]}
            }
        }
    ]
    assert (
        placement["spec"]["clusterSets"]
        == one("placement/placement.yaml", "Placement")["spec"]["clusterSets"]
    )
    binding = one(path, "ManagedClusterSetBinding")
    assert binding["metadata"]["namespace"] == placement["metadata"]["namespace"] == "kueue-system"
    assert binding["spec"] == one("placement/placement.yaml", "ManagedClusterSetBinding")["spec"]


def test_the_kueue_placement_keeps_the_sample_name_and_picks_one_cluster() -> None:
    reference = one("placement/placement.yaml", "Placement")
    placement = one("kueue/placement.yaml", "Placement")
    assert placement["metadata"]["name"] == reference["metadata"]["name"]
    assert placement["spec"]["numberOfClusters"] == reference["spec"]["numberOfClusters"] == 1


# -- Argo CD ----------------------------------------------------------------------------------------


def test_applicationset_reads_the_placements_decisions_through_the_configmap() -> None:
    appset = one("argocd/applicationset.yaml", "ApplicationSet")
    configmap = one("argocd/configmap.yaml", "ConfigMap")
    placement = one("argocd/placement.yaml", "Placement")
    assert appset["apiVersion"] == "argoproj.io/v1alpha1"
    [generator] = appset["spec"]["generators"]
    source = generator["clusterDecisionResource"]
    assert source["configMapRef"] == configmap["metadata"]["name"] == "ocm-placement-generator"
    assert source["labelSelector"] == {
        "matchLabels": {f"{OCM_CLUSTER}/placement": placement["metadata"]["name"]}
    }
    # The generator reads PlacementDecisions, and its ConfigMap, in the ApplicationSet's namespace.
    namespaces = {appset["metadata"]["namespace"], configmap["metadata"]["namespace"]}
    assert namespaces == {placement["metadata"]["namespace"]}
    assert configmap["data"] == {
        "apiVersion": f"{OCM_CLUSTER}/v1beta1",
        "kind": "placementdecisions",
        "statusListKey": "decisions",
        "matchKey": "clusterName",
    }
    template = appset["spec"]["template"]
    assert "{{name}}" in template["metadata"]["name"]
    assert template["spec"]["destination"]["server"] == "{{server}}"


def test_applicationset_controller_may_only_read_placementdecisions_in_its_namespace() -> None:
    role = one("argocd/rbac.yaml", "Role")
    binding = one("argocd/rbac.yaml", "RoleBinding")
    assert role["rules"] == [
        {"apiGroups": [OCM_CLUSTER], "resources": ["placementdecisions"], "verbs": ["get", "list", "watch"]}
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "argocd-applicationset-controller", "namespace": "argocd"}
    ]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "argocd"


# -- Kueue ------------------------------------------------------------------------------------------

KUEUE = "kueue.x-k8s.io/v1beta2"
# Scope of each kind; the fields themselves are checked against Kueue's own CRDs by a strict
# server-side apply in tests/integration/test_kueue.py.
KUEUE_NAMESPACED = {
    "ResourceFlavor": False,
    "AdmissionCheck": False,
    "ClusterQueue": False,
    "LocalQueue": True,
}


def test_kueue_objects_are_the_v1beta2_kinds_multikueue_needs() -> None:
    objects = docs("kueue/multikueue.yaml")
    assert sorted(o["kind"] for o in objects) == sorted(
        ["ResourceFlavor", "AdmissionCheck", "AdmissionCheck", "ClusterQueue", "LocalQueue"]
    )
    for o in objects:
        assert o["apiVersion"] == KUEUE, o
        assert ("namespace" in o["metadata"]) == KUEUE_NAMESPACED[o["kind"]], o
    for check in (o for o in objects if o["kind"] == "AdmissionCheck"):
        assert set(check["spec"]["parameters"]) == {"apiGroup", "kind", "name"}


def test_multikueue_is_driven_by_the_placement() -> None:
    placement = one("kueue/placement.yaml", "Placement")
    assert placement["metadata"]["namespace"] == "kueue-system"
    checks = {
        o["spec"]["controllerName"]: o for o in docs("kueue/multikueue.yaml") if o["kind"] == "AdmissionCheck"
    }
    ocm = checks["open-cluster-management.io/placement"]
    assert ocm["spec"]["parameters"] == {
        "apiGroup": OCM_CLUSTER,
        "kind": "Placement",
        "name": placement["metadata"]["name"],
    }
    # OCM's controller writes the MultiKueueConfig under the Placement's name; Kueue's check reads it.
    assert checks["kueue.x-k8s.io/multikueue"]["spec"]["parameters"] == {
        "apiGroup": "kueue.x-k8s.io",
        "kind": "MultiKueueConfig",
        "name": placement["metadata"]["name"],
    }
    queue = one("kueue/multikueue.yaml", "ClusterQueue")
    required = [rule["name"] for rule in queue["spec"]["admissionChecksStrategy"]["admissionChecks"]]
    # only Kueue's own check: MultiKueue (v0.16.6+) would wait for OCM's check to be Ready on each
    # workload, which nothing does
    assert required == [checks["kueue.x-k8s.io/multikueue"]["metadata"]["name"]]
    flavor = one("kueue/multikueue.yaml", "ResourceFlavor")
    [group] = queue["spec"]["resourceGroups"]
    [used] = group["flavors"]
    assert used["name"] == flavor["metadata"]["name"]
    assert [r["name"] for r in used["resources"]] == group["coveredResources"]
    local = one("kueue/multikueue.yaml", "LocalQueue")
    assert local["spec"]["clusterQueue"] == queue["metadata"]["name"]
    # the worker's queue: same LocalQueue name and namespace (MultiKueue copies the Job under them),
    # a ClusterQueue with quota and no admission check of its own
    worker_local = one("kueue/worker.yaml", "LocalQueue")
    assert worker_local["metadata"] == local["metadata"]
    worker_queue = one("kueue/worker.yaml", "ClusterQueue")
    assert worker_local["spec"]["clusterQueue"] == worker_queue["metadata"]["name"]
    assert "admissionChecksStrategy" not in worker_queue["spec"] and worker_queue["spec"]["resourceGroups"]
    job = one("kueue/job.yaml", "Job")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == local["metadata"]["name"]
    assert job["metadata"]["namespace"] == local["metadata"]["namespace"]
    assert job["spec"]["suspend"] is True


# -- monitoring -------------------------------------------------------------------------------------


def agent_deployment() -> dict[str, Any]:
    rendered = render_agent(mca=mca(), adc=None)
    [deployment] = [m for m in rendered.manifests if m["kind"] == "Deployment"]
    return deployment


def test_service_and_monitors_select_the_rendered_agent_pods_and_port() -> None:
    deployment = agent_deployment()
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    namespace = deployment["metadata"]["namespace"]

    service = one("monitoring/agent-metrics-service.yaml", "Service")
    assert service["metadata"]["namespace"] == namespace
    assert service["spec"]["selector"].items() <= pod_labels.items()
    [port] = service["spec"]["ports"]
    assert port["targetPort"] in ports and port["port"] == ports[port["targetPort"]]

    monitor = one("monitoring/servicemonitor.yaml", "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [namespace]
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [port["name"]]

    podmonitor = one("monitoring/podmonitor.yaml", "PodMonitor")
    assert podmonitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert [e["port"] for e in podmonitor["spec"]["podMetricsEndpoints"]] == ["metrics"]
    assert "metrics" in ports


def test_prometheusrule_carries_exactly_the_checked_rule_file() -> None:
    rule = one("monitoring/prometheusrule.yaml", "PrometheusRule")
    assert rule["spec"] == yaml.safe_load((SAMPLES / "monitoring" / "alert-rules.yaml").read_text())


def test_remote_write_keeps_the_agent_series_and_nothing_else() -> None:
    values = yaml.safe_load((SAMPLES / "monitoring" / "remote-write-values.yaml").read_text())
    [target] = values["prometheus"]["prometheusSpec"]["remoteWrite"]
    assert target["url"].startswith("https://")
    [keep] = target["writeRelabelConfigs"]
    assert keep["action"] == "keep" and keep["sourceLabels"] == ["__name__"]
    regex = re.compile(f"^(?:{keep['regex']})$")  # Prometheus anchors relabel regexes
    assert all(regex.match(name) for name in agent_metric_names())
    for other in ("process_cpu_seconds_total", "python_info", "container_cpu_usage_seconds_total", "up"):
        assert not regex.match(other)


def test_the_openshift_samples_render_the_token_and_the_binding_and_use_them() -> None:
    config = one("openshift/addondeploymentconfig.yaml", "AddOnDeploymentConfig")
    scorer = one("openshift/cpu-headroom-scorer.yaml", "DynamicScorer")
    # The hub admin's step first: without it the manager refuses the ADC's token.
    with pytest.raises(AgentTokenNotAllowedError):
        render_agent(mca=mca(), adc=config)
    hub = yaml.safe_load((SAMPLES / "openshift" / "hub-values.yaml").read_text())["agentToken"]
    allow = AgentTokenAllow(
        destinations=parse_destination_allow(hub["destinationAllow"]),
        audiences=parse_audience_allow(hub["audienceAllow"]),
        monitoring_roles=parse_monitoring_role_allow(hub["monitoringRoleAllow"]),
    )
    manifests = render_agent(mca=mca(), adc=config, agent_token_allow=allow).manifests
    binding = next(m for m in manifests if m["kind"] == "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "cluster-monitoring-view"
    pod = next(m for m in manifests if m["kind"] == "Deployment")["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    destinations = next(a for a in args if a.startswith("--service-account-token-destinations="))
    # The scorer's source is where the admin lets the token go, and only there.
    source = scorer["spec"]["source"]
    url = source["host"] + source["path"]
    assert listed_destination(destinations.partition("=")[2], url)
    assert source["auth"] == {"agentServiceAccountToken": True}


def test_the_external_kueue_config_names_the_managers_dispatcher_and_the_gate_it_needs() -> None:
    config = yaml.safe_load((SAMPLES / "kueue" / "ordered" / "kueue-config-external.yaml").read_text())
    assert config["multiKueue"] == {"dispatcherName": DISPATCHER_NAME}
    # without it Kueue's apply cannot clear the nominations, and no Workload is ever admitted
    assert config["featureGates"] == {"WorkloadRequestUseMergePatch": True}
