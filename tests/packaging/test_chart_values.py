"""The chart's values, rendered by the real `helm template` / `helm lint` (no control plane).

The defaults must render exactly what `kubectl kustomize manifests/` renders (test_install_chart.py
compares every object; here the configurable fields are named one by one), every value must reach
the object it configures, `values.schema.json` must refuse what the objects could not take, and
the chart-only optional objects must equal their kustomize twins in `manifests/components/`.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import chartgen
from e2e.mission import CHART, NAMESPACE, helm_binary
from e2e.tools import locate
from tests.restricted_v2 import pod_spec, violations

# helm and kubectl are built Go tools: on a cold machine `make test` runs these once they are built
# (late_tools) instead of holding up the tiers that need none.
pytestmark = pytest.mark.late_tools

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
MANAGER = chartgen.MANAGER

NON_DEFAULT: dict[str, Any] = {
    "manager": {
        "replicas": 3,
        "logLevel": "debug",
        "imagePullPolicy": "Always",
        "resources": {
            "requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"cpu": None, "memory": "1Gi"},
        },
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
        "tolerations": [
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
        ],
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": MANAGER}},
                        },
                    }
                ]
            }
        },
        "imagePullSecrets": [{"name": "registry-credentials"}],
        "priorityClassName": "system-cluster-critical",
        "podAnnotations": {"example.com/owner": "platform"},
        # the selector's label cannot be replaced: it is dropped, the other one is added
        "podLabels": {"team": "platform", "app.kubernetes.io/name": "something-else"},
        "platform": "openshift",
    },
    "installStrategy": {
        "type": "Placements",
        "placements": [
            {
                "name": "all-clusters",
                "namespace": "fleet",
                "configs": [
                    {
                        "group": "addon.open-cluster-management.io",
                        "resource": "addondeploymentconfigs",
                        "name": "debug-logs",
                        "namespace": "fleet",
                    }
                ],
                "rolloutStrategy": {"type": "Progressive", "progressive": {"maxConcurrency": "25%"}},
            }
        ],
    },
    "agentToken": {
        "destinationAllow": [
            "https://thanos-querier.openshift-monitoring.svc:9091",
            "https://*.example.com/t",
        ],
        "audienceAllow": ["prometheus"],
        "monitoringRoleAllow": ["cluster-monitoring-view"],
    },
    "podDisruptionBudget": {"enabled": True},
    "metrics": {
        "service": {"enabled": True, "port": 9090},
        "serviceMonitor": {
            "enabled": True,
            "interval": "15s",
            "labels": {"release": "kube-prometheus-stack"},
        },
    },
}


def key(o: Obj) -> tuple[str, str, str]:
    return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def helm(*args: str, chart: Path = CHART) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm_binary()), *args[:1], *(["x"] if args[0] == "template" else []), str(chart), *args[1:]],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def values_file(values: dict[str, Any], tmp_path: Path) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


def render(*args: str, namespace: str = NAMESPACE, chart: Path = CHART) -> list[Obj]:
    proc = helm("template", "--namespace", namespace, "--include-crds", *args, chart=chart)
    assert proc.returncode == 0, proc.stderr
    return sorted((d for d in yaml.safe_load_all(proc.stdout) if d), key=key)


def one(objs: list[Obj], kind: str) -> Obj:
    (found,) = [o for o in objs if o["kind"] == kind]
    return found


@functools.cache
def kustomized() -> list[Obj]:
    return sorted((o for o in chartgen.kustomize(locate().kubectl) if o["kind"] != "Namespace"), key=key)


def kustomize_overlay(text: str) -> list[Obj]:
    """`kubectl kustomize` of an overlay of manifests/ (`BASE` in `text` is the path to manifests/)."""
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.relpath(chartgen.MANIFESTS, tmp)  # kustomize refuses absolute paths
        Path(tmp, "kustomization.yaml").write_text(text.replace("BASE", base))
        proc = subprocess.run(
            [str(locate().kubectl), "kustomize", tmp],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    return sorted((d for d in yaml.safe_load_all(proc.stdout) if d and d["kind"] != "Namespace"), key=key)


def with_kustomize_components(*names: str) -> list[Obj]:
    """`manifests/` with the named components of `manifests/components/`."""
    listed = "".join(f"  - BASE/components/{n}\n" for n in names)
    return kustomize_overlay(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - BASE\ncomponents:\n{listed}"
    )


# ------------------------------------------------------------------------ defaults
def test_the_defaults_render_todays_objects_and_no_optional_one() -> None:
    objs = render()
    assert [key(o) for o in objs] == [key(o) for o in kustomized()]
    assert objs == kustomized()
    assert not {"PodDisruptionBudget", "Service", "ServiceMonitor"} & {o["kind"] for o in objs}
    dep = one(objs, "Deployment")
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]
    assert pod["metadata"] == {
        "labels": {"app.kubernetes.io/name": MANAGER, "app.kubernetes.io/part-of": "dynamic-scoring"}
    }
    assert not {"nodeSelector", "tolerations", "affinity", "imagePullSecrets", "priorityClassName"} & set(
        pod["spec"]
    )
    (container,) = pod["spec"]["containers"]
    assert "--log-level=info" in container["args"]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "1", "memory": "512Mi"},
    }
    assert one(objs, "ClusterManagementAddOn")["spec"]["installStrategy"] == {"type": "Manual"}


# ------------------------------------------------------------------------ every value reaches its object
def test_non_default_values_reach_the_objects_they_configure(tmp_path: Path) -> None:
    objs = render("-f", values_file(NON_DEFAULT, tmp_path))
    manager = NON_DEFAULT["manager"]
    dep = one(objs, "Deployment")
    assert dep["spec"]["replicas"] == 3
    pod = dep["spec"]["template"]
    assert pod["metadata"]["labels"] == {
        "app.kubernetes.io/name": MANAGER,  # kept: the selector needs it
        "app.kubernetes.io/part-of": "dynamic-scoring",
        "team": "platform",
    }
    assert dep["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": MANAGER}
    assert pod["metadata"]["annotations"] == manager["podAnnotations"]
    spec = pod["spec"]
    for field in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets", "priorityClassName"):
        assert spec[field] == manager[field], field
    (container,) = spec["containers"]
    assert [a for a in container["args"] if a.startswith("--log-level")] == ["--log-level=debug"]
    assert container["imagePullPolicy"] == "Always"
    # the agent-token bounds reach the manager's env as the space-separated lists its flags read
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DYNAMIC_SCORING_AGENT_TOKEN_DESTINATION_ALLOW"] == (
        "https://thanos-querier.openshift-monitoring.svc:9091 https://*.example.com/t"
    )
    assert env["DYNAMIC_SCORING_AGENT_TOKEN_AUDIENCE_ALLOW"] == "prometheus"
    assert env["DYNAMIC_SCORING_AGENT_MONITORING_ROLE_ALLOW"] == "cluster-monitoring-view"
    default_env = {
        e["name"]: e.get("value")
        for e in one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert default_env["DYNAMIC_SCORING_AGENT_TOKEN_DESTINATION_ALLOW"] is None  # the default: no value
    # Helm merges maps with the defaults; null removes a default (the cpu limit here)
    assert container["resources"] == {
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }
    # what the values do not name is unchanged
    default_dep = one(render(), "Deployment")
    assert (
        container["securityContext"]
        == default_dep["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    )
    # but manager.platform=openshift: the pod names no user (the SCC assigns one)
    pinned = default_dep["spec"]["template"]["spec"]["securityContext"]
    assert spec["securityContext"] == {
        k: v for k, v in pinned.items() if k not in ("runAsUser", "runAsGroup")
    }

    cma = one(objs, "ClusterManagementAddOn")
    assert cma["spec"]["installStrategy"] == NON_DEFAULT["installStrategy"]
    assert (
        cma["spec"]["supportedConfigs"] == one(render(), "ClusterManagementAddOn")["spec"]["supportedConfigs"]
    )

    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["metadata"]["namespace"] == NAMESPACE
    assert pdb["spec"] == {
        "minAvailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": MANAGER}},
    }

    svc = one(objs, "Service")
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["ports"] == [
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert "metrics" in {p["name"] for p in container["ports"]}, (
        "the Service's targetPort names the container's"
    )
    sm = one(objs, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert sm["spec"]["selector"]["matchLabels"] == {
        k: v for k, v in svc["metadata"]["labels"].items() if k == "app.kubernetes.io/name"
    }
    assert sm["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}
    ]

    # nothing else appears or goes: the same objects as the defaults, plus the three optional ones
    assert {key(o) for o in objs} - {key(o) for o in render()} == {key(pdb), key(svc), key(sm)}


def test_the_pdb_needs_more_than_one_replica_and_the_servicemonitor_brings_its_service() -> None:
    one_replica = render("--set", "podDisruptionBudget.enabled=true", "--set", "manager.replicas=1")
    assert "PodDisruptionBudget" not in {o["kind"] for o in one_replica}, (
        "a PDB on 1 replica blocks every drain"
    )
    pdb = one(
        render("--set", "podDisruptionBudget.enabled=true", "--set", "podDisruptionBudget.minAvailable=50%"),
        "PodDisruptionBudget",
    )
    assert pdb["spec"]["minAvailable"] == "50%"
    objs = render("--set", "metrics.serviceMonitor.enabled=true")
    assert {"Service", "ServiceMonitor"} <= {o["kind"] for o in objs}
    only_service = render("--set", "metrics.service.enabled=true")
    assert "Service" in {o["kind"] for o in only_service}
    assert "ServiceMonitor" not in {o["kind"] for o in only_service}


# ------------------------------------------------------------------------ the release namespace
def test_every_namespace_reference_follows_the_release_namespace(tmp_path: Path) -> None:
    objs = render("-f", values_file(NON_DEFAULT, tmp_path), namespace="hub-addons")
    text = yaml.safe_dump_all(objs)
    assert f"namespace: {NAMESPACE}\n" not in text
    for o in objs:
        if o["kind"] not in (
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterManagementAddOn",
            "CustomResourceDefinition",
        ):
            assert o["metadata"]["namespace"] == "hub-addons", key(o)
    crb = one(objs, "ClusterRoleBinding")
    rb = one(objs, "RoleBinding")
    assert crb["subjects"][0]["namespace"] == rb["subjects"][0]["namespace"] == "hub-addons"
    cma = one(objs, "ClusterManagementAddOn")
    assert cma["spec"]["supportedConfigs"][0]["defaultConfig"]["namespace"] == "hub-addons"
    # the manager reads its namespace (scorers, the Lease) from the downward API, not from a flag
    (container,) = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def documented_overlay() -> str:
    """The overlay docs/install.md shows, with `../../manifests` as BASE."""
    text = (REPO / "docs" / "install.md").read_text()
    blocks = re.findall(r"```yaml\n(# overlays/hub/kustomization.yaml\n.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/install.md lost its kustomize overlay example"
    return str(blocks[0]).replace("../../manifests", "BASE")


def test_the_documented_kustomize_overlay_renders_what_the_equivalent_values_render(tmp_path: Path) -> None:
    """docs/install.md's overlay and the values it says are the same: the same objects."""
    overlay = kustomize_overlay(documented_overlay())
    # kustomize does not know the CMA is cluster-scoped and stamps the namespace on it too; the
    # apiserver drops metadata.namespace from a cluster-scoped object, so that is harmless
    cma = one(overlay, "ClusterManagementAddOn")
    assert cma["metadata"].pop("namespace") == "hub-addons"
    values = {
        "manager": {
            "replicas": 3,
            "logLevel": "debug",
            "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
        },
        "agentToken": {
            "destinationAllow": ["https://thanos-querier.openshift-monitoring.svc:9091"],
            "monitoringRoleAllow": ["cluster-monitoring-view"],
        },
        "installStrategy": {
            "type": "Placements",
            "placements": [{"name": "all-clusters", "namespace": "fleet"}],
        },
        "podDisruptionBudget": {"enabled": True},
        "metrics": {"serviceMonitor": {"enabled": True}},
    }
    chart = render("-f", values_file(values, tmp_path), namespace="hub-addons")
    assert [key(o) for o in overlay] == [key(o) for o in chart]
    for o, c in zip(overlay, chart, strict=True):
        assert o == c, key(o)


# ------------------------------------------------------------------------ kustomize components
def test_the_kustomize_components_are_the_charts_optional_objects() -> None:
    with_components = with_kustomize_components("pdb", "metrics", "multikueue-order", "multikueue-dispatch")
    chart = render(
        "--set",
        "multikueueOrder.enabled=true",
        "--set",
        "multikueueOrder.dispatch.enabled=true",
        "--set",
        "podDisruptionBudget.enabled=true",
        "--set",
        "metrics.service.enabled=true",
        "--set",
        "metrics.serviceMonitor.enabled=true",
    )
    assert [key(o) for o in with_components] == [key(o) for o in chart]
    assert with_components == chart


def test_multikueue_order_turns_the_managers_flag_on_with_its_own_rbac_only() -> None:
    default, enabled = render(), render("--set", "multikueueOrder.enabled=true")

    def order_env(objs: list[Obj]) -> str:
        (container,) = pod_spec(one(objs, "Deployment"))["containers"]
        (env,) = [e for e in container["env"] if e["name"] == chartgen.MULTIKUEUE_ORDER_ENV]
        return str(env["value"])

    assert (order_env(default), order_env(enabled)) == ("false", "true")
    added = [o for o in enabled if key(o) not in {key(d) for d in default}]
    assert sorted(o["kind"] for o in added) == ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]

    def granted(role: Obj) -> set[tuple[str, str]]:
        return {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}

    # Placements and their decisions in Kueue's namespace only; MultiKueueConfigs are cluster-scoped
    role, cluster_role = one(added, "Role"), one(added, "ClusterRole")
    assert role["metadata"]["namespace"] == "kueue-system"
    assert granted(role) == {
        ("cluster.open-cluster-management.io", "placements"),
        ("cluster.open-cluster-management.io", "placementdecisions"),
    }
    assert role["rules"][0]["verbs"] == ["list", "watch"]
    assert granted(cluster_role) == {("kueue.x-k8s.io", "multikueueconfigs")}
    assert not any(
        "update" in r["verbs"] or "*" in r["verbs"] for r in [*role["rules"], *cluster_role["rules"]]
    )
    for binding in (one(added, "RoleBinding"), one(added, "ClusterRoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": MANAGER, "namespace": NAMESPACE}]


def test_multikueue_dispatch_turns_its_flag_on_with_its_own_rbac_only() -> None:
    order = render("--set", "multikueueOrder.enabled=true")
    dispatch = render(
        "--set",
        "multikueueOrder.enabled=true",
        "--set",
        "multikueueOrder.dispatch.enabled=true",
        "--set",
        "multikueueOrder.dispatch.delaySeconds=3",
    )

    def env(objs: list[Obj]) -> dict[str, str]:
        (container,) = pod_spec(one(objs, "Deployment"))["containers"]
        return {e["name"]: e.get("value") for e in container["env"] if "MULTIKUEUE" in e["name"]}

    assert env(render()) == {
        "DYNAMIC_SCORING_MULTIKUEUE_ORDER": "false",
        "DYNAMIC_SCORING_MULTIKUEUE_DISPATCH": "false",
        "DYNAMIC_SCORING_MULTIKUEUE_DISPATCH_DELAY": "10",
    }
    assert env(dispatch) == {
        "DYNAMIC_SCORING_MULTIKUEUE_ORDER": "true",
        "DYNAMIC_SCORING_MULTIKUEUE_DISPATCH": "true",
        "DYNAMIC_SCORING_MULTIKUEUE_DISPATCH_DELAY": "3",
    }
    added = [o for o in dispatch if key(o) not in {key(d) for d in order}]
    assert sorted(o["kind"] for o in added) == ["ClusterRole", "ClusterRoleBinding"]
    rules = {
        (g, r): tuple(rule["verbs"])
        for rule in one(added, "ClusterRole")["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    # Workloads read; of a Workload only its status written (the nominations), never its spec
    assert rules == {
        ("kueue.x-k8s.io", "workloads"): ("get", "list", "watch"),
        ("kueue.x-k8s.io", "workloads/status"): ("patch",),
        ("kueue.x-k8s.io", "admissionchecks"): ("list", "watch"),
    }
    assert one(added, "ClusterRoleBinding")["subjects"] == [
        {"kind": "ServiceAccount", "name": MANAGER, "namespace": NAMESPACE}
    ]


def test_the_dispatcher_without_the_order_is_refused_when_the_chart_renders() -> None:
    proc = helm(
        "template", "--namespace", NAMESPACE, "--set", "multikueueOrder.dispatch.enabled=true", chart=CHART
    )
    assert proc.returncode != 0
    assert "needs multikueueOrder.enabled=true" in proc.stderr


# ------------------------------------------------------------------------ OpenShift
OPENSHIFT_API = ["--api-versions", "security.openshift.io/v1"]


def manager_pod(objs: list[Obj]) -> Obj:
    return pod_spec(one(objs, "Deployment"))


@pytest.mark.parametrize(
    "args",
    [
        ["--set", "manager.platform=openshift"],
        OPENSHIFT_API,
        [*OPENSHIFT_API, "--set", "manager.platform=auto"],
    ],
)
def test_on_openshift_the_managers_pod_names_no_user_and_meets_restricted_v2(args: list[str]) -> None:
    pod = manager_pod(render(*args))
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert violations(pod) == []


@pytest.mark.parametrize("args", [[], ["--set", "manager.platform=kubernetes", *OPENSHIFT_API]])
def test_elsewhere_the_managers_pod_pins_the_images_user(args: list[str]) -> None:
    pod = manager_pod(render(*args))
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (65532, 65532)
    assert sorted(violations(pod)) == [
        "securityContext.runAsGroup is set (65532)",
        "securityContext.runAsUser is set (65532)",
    ]


def test_the_openshift_component_is_the_charts_openshift_platform() -> None:
    overlay = with_kustomize_components("openshift")
    assert overlay == render("--set", "manager.platform=openshift")
    assert violations(manager_pod(overlay)) == []


# ------------------------------------------------------------------------ lint and the schema
def test_helm_lint_passes_with_the_defaults_and_with_every_value_set(tmp_path: Path) -> None:
    for args in ([], ["-f", values_file(NON_DEFAULT, tmp_path)], ["--namespace", "hub-addons"]):
        proc = helm("lint", "--strict", *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "0 chart(s) failed" in proc.stdout


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--set", "installStrategy.type=Bogus"], "/installStrategy/type"),
        (["--set", "manager.replicas=x"], "/manager/replicas"),
        (["--set", "manager.replicas=-1"], "/manager/replicas"),
        (["--set", "manager.logLevel=trace"], "/manager/logLevel"),
        (["--set", "installStrategy.type=Placements"], "/installStrategy/placements"),
        (
            ["--set", "installStrategy.type=Placements", "--set", "installStrategy.placements[0].name=p"],
            "missing property 'namespace'",
        ),
        (
            [
                "--set",
                "installStrategy.type=Placements",
                "--set",
                "installStrategy.placements[0].name=p",
                "--set",
                "installStrategy.placements[0].namespace=n",
                "--set",
                "installStrategy.placements[0].rolloutStrategy.type=Sometimes",
            ],
            "rolloutStrategy/type",
        ),
        (["--set", "manager.replica=3"], "additional properties 'replica'"),
        (["--set", "manager.platform=OpenShift"], "/manager/platform"),
        (["--set", "podDisruptionBudget.minAvailable=half"], "/podDisruptionBudget/minAvailable"),
        (["--set", "metrics.service.port=0"], "/metrics/service/port"),
        (["--set", "manager.imagePullSecrets[0]=regcred"], "/manager/imagePullSecrets/0"),
        # host:port would also match http://; the manager refuses it at start, the schema first
        (["--set", "agentToken.destinationAllow[0]=prom.example.com:9091"], "/agentToken/destinationAllow/0"),
        (["--set", "agentToken.monitoringRoleAllow[0]=cluster-admin"], "/agentToken/monitoringRoleAllow/0"),
        (["--set", "agentToken.audienceAllow[0]=a b"], "/agentToken/audienceAllow/0"),
    ],
)
def test_the_schema_refuses_values_the_objects_cannot_take(args: list[str], complaint: str) -> None:
    for command in ("template", "lint"):
        proc = helm(command, *args)
        assert proc.returncode != 0, f"helm {command} {args} was accepted"
        assert complaint in proc.stdout + proc.stderr, proc.stdout + proc.stderr


# ------------------------------------------------------------------------ NOTES.txt
def notes(tmp_path: Path, *args: str) -> str:
    """NOTES.txt rendered (helm renders it only on install): copied into a template of a chart copy."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    body = "".join(
        "  " + line + "\n" for line in (CHART / "templates" / "NOTES.txt").read_text().splitlines()
    )
    (chart / "templates" / "notes-as-yaml.yaml").write_text("notes: |\n" + body)
    proc = helm(
        "template",
        "--namespace",
        "hub-addons",
        "--show-only",
        "templates/notes-as-yaml.yaml",
        *args,
        chart=chart,
    )
    assert proc.returncode == 0, proc.stderr
    return str(yaml.safe_load(proc.stdout)["notes"])


def test_notes_give_next_steps_for_either_install_strategy_and_no_repository_path(tmp_path: Path) -> None:
    manual = notes(tmp_path)
    assert "clusteradm addon enable --names dynamic-scoring" in manual
    assert "installStrategy.type=Placements" in manual
    assert "DynamicScorer in hub-addons" in manual
    placements = notes(
        tmp_path / "p",
        "--set",
        "installStrategy.type=Placements",
        "--set",
        "installStrategy.placements[0].name=all-clusters",
        "--set",
        "installStrategy.placements[0].namespace=fleet",
    )
    assert "fleet/all-clusters" in placements
    assert "clusteradm addon enable" not in placements
    for text in (manual, placements):
        # docs by URL, each to a page that exists; no path that only resolves in a checkout
        urls = re.findall(r"https://github\.com/dynamic-scoring/dynamic-scoring/blob/main/(\S+)", text)
        assert len(urls) == 3 and all((REPO / u).is_file() for u in urls), urls
        bare = re.sub(r"https://\S+", "", text)
        assert "docs/" not in bare and ".md" not in bare and "charts/" not in bare, text
        assert "manifests/" not in bare and "samples/" not in bare, text
    assert "--reuse-values" in manual and "'installStrategy.placements[0].name=all-clusters'" in manual
