"""The agent's own token for metrics sources, as the hub renders it from the AddOnDeploymentConfig."""

from __future__ import annotations

import pytest

from dynamic_scoring.addon.errors import AddonConfigError
from dynamic_scoring.addon.render.agent import AGENT_TOKEN_DIR, render_agent
from dynamic_scoring.addon.render.token_allow import AgentTokenAllow
from dynamic_scoring.kube.jsontypes import JSON
from tests.restricted_v2 import violations
from tests.unit.addon.helpers import adc, by_kind, mca, variables

THANOS = "https://thanos-querier.openshift-monitoring.svc:9091"
# What the hub admin allows here (the manager's --agent-token-*-allow flags; test_token_allow.py
# covers the bound itself): every value these tests render.
ALLOW = AgentTokenAllow(
    destinations=(THANOS, "https://prom.example.com/tenant-a"),
    audiences=("prometheus",),
    monitoring_roles=("cluster-monitoring-view",),
)


def render(**values: str) -> list[JSON]:
    return render_agent(
        mca=mca(install_namespace="scoring"),
        adc=adc(customizedVariables=variables(**values)),
        agent_token_allow=ALLOW,
    ).manifests


def pod(manifests: list[JSON]) -> JSON:
    spec: JSON = by_kind(manifests, "Deployment")["spec"]["template"]["spec"]
    return spec


def test_off_by_default_no_volume_no_flag_no_binding() -> None:
    manifests = render()
    spec = pod(manifests)
    assert not [v for v in spec["volumes"] if v["name"] == "agent-token"]
    assert not [a for a in spec["containers"][0]["args"] if a.startswith("--service-account-token")]
    assert not [m for m in manifests if m["kind"] in ("ClusterRole", "ClusterRoleBinding")]


def test_destinations_mount_a_projected_token_and_reach_the_agent() -> None:
    spec = pod(render(AgentTokenDestinations=f"{THANOS},  https://prom.example.com/tenant-a"))
    volume = next(v for v in spec["volumes"] if v["name"] == "agent-token")
    # No audience: the kube-apiserver's own, which kube-rbac-proxy accepts unless told otherwise.
    assert volume["projected"]["sources"] == [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}
    ]
    container = spec["containers"][0]
    assert {"name": "agent-token", "mountPath": AGENT_TOKEN_DIR, "readOnly": True} in container[
        "volumeMounts"
    ]
    assert f"--service-account-token-file={AGENT_TOKEN_DIR}/token" in container["args"]
    assert (
        f"--service-account-token-destinations={THANOS}, https://prom.example.com/tenant-a"
        in container["args"]
    )
    assert not [a for a in container["args"] if a.startswith("--service-account-token-scorers")]


def test_audience_expiry_and_scorers() -> None:
    spec = pod(
        render(
            AgentTokenDestinations=THANOS,
            AgentTokenAudience="prometheus",
            AgentTokenExpirationSeconds="600",
            AgentTokenScorers="cpu-headroom gpu",
            Platform="openshift",
        )
    )
    volume = next(v for v in spec["volumes"] if v["name"] == "agent-token")
    assert volume["projected"]["sources"][0]["serviceAccountToken"] == {
        "path": "token",
        "expirationSeconds": 600,
        "audience": "prometheus",
    }
    assert "--service-account-token-scorers=cpu-headroom, gpu" in spec["containers"][0]["args"]
    assert violations(spec) == []  # a projected volume is allowed by restricted-v2


def test_the_monitoring_role_binding_names_only_the_agent() -> None:
    manifests = render(AgentTokenDestinations=THANOS, AgentMonitoringClusterRole="cluster-monitoring-view")
    binding = by_kind(manifests, "ClusterRoleBinding")
    assert binding["metadata"]["name"] == "dynamic-scoring-agent-scoring-monitoring"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "cluster-monitoring-view",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "dynamic-scoring-agent", "namespace": "scoring"}
    ]
    assert not [m for m in manifests if m["kind"] == "ClusterRole"]  # the platform's role, never ours


@pytest.mark.parametrize(
    ("values", "variable", "says"),
    [
        ({"AgentTokenDestinations": ""}, "AgentTokenDestinations", "at least one destination"),
        ({"AgentTokenDestinations": "prom:99999"}, "AgentTokenDestinations", "cannot be read ('prom:99999')"),
        # host and host:port also match http://: the token would travel in clear text
        ({"AgentTokenDestinations": "prom:9091"}, "AgentTokenDestinations", "https:// destinations only"),
        (
            {"AgentTokenDestinations": f"{THANOS} prom"},
            "AgentTokenDestinations",
            "https:// destinations only",
        ),
        (
            {"AgentTokenDestinations": "http://prom:9090"},
            "AgentTokenDestinations",
            "https:// destinations only",
        ),
        ({"AgentTokenScorers": "a"}, "AgentTokenScorers", "needs AgentTokenDestinations"),
        (
            {"AgentTokenDestinations": THANOS, "AgentTokenScorers": "Bad_Name"},
            "AgentTokenScorers",
            "DynamicScorer",
        ),
        (
            {"AgentTokenDestinations": THANOS, "AgentTokenAudience": "a b"},
            "AgentTokenAudience",
            "one audience",
        ),
        (
            {"AgentTokenDestinations": THANOS, "AgentTokenExpirationSeconds": "60"},
            "AgentTokenExpirationSeconds",
            "600",
        ),
        ({"AgentMonitoringClusterRole": "cluster-monitoring-view"}, "AgentMonitoringClusterRole", "needs"),
        # An AddOnDeploymentConfig cannot grant the agent cluster-admin (or any role but the view one).
        (
            {"AgentTokenDestinations": THANOS, "AgentMonitoringClusterRole": "cluster-admin"},
            "AgentMonitoringClusterRole",
            "only to the monitoring view role",
        ),
    ],
)
def test_bad_values_name_the_variable(values: dict[str, str], variable: str, says: str) -> None:
    with pytest.raises(AddonConfigError) as err:
        render(**values)
    assert err.value.field == f"spec.customizedVariables[{variable}]"
    assert says in str(err.value)
