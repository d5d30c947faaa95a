from __future__ import annotations

import pytest

from dynamic_scoring.addon.constants import DEFAULT_IMAGE, DEFAULT_IMAGE_TAG
from dynamic_scoring.addon.errors import AddonConfigError
from dynamic_scoring.addon.render.agent import DEFAULT_RESOURCES, render_agent
from dynamic_scoring.kube.jsontypes import JSON
from tests.unit.addon.helpers import adc, b64, by_kind, mca, variables

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def deployment(manifests: list[JSON]) -> JSON:
    return by_kind(manifests, "Deployment")


def container(manifests: list[JSON]) -> JSON:
    containers = deployment(manifests)["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def test_default_render_is_the_expected_set_of_objects() -> None:
    r = render_agent(mca=mca(install_namespace="open-cluster-management-agent-addon"), adc=None)
    kinds = [(m["kind"], m["metadata"].get("namespace")) for m in r.manifests]
    ns = "open-cluster-management-agent-addon"
    assert kinds == [
        ("Namespace", None),
        ("ServiceAccount", ns),
        ("Role", ns),
        ("RoleBinding", ns),
        ("Deployment", ns),
    ]
    assert r.image == DEFAULT_IMAGE


def test_deployment_structure() -> None:
    r = render_agent(mca=mca("cluster7"), adc=None)
    dep = deployment(r.manifests)
    pod = dep["spec"]["template"]["spec"]
    c = container(r.manifests)
    assert pod["serviceAccountName"] == "dynamic-scoring-agent"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["command"] == ["dynamic-scoring-agent"]
    assert c["args"] == [
        "--hub-kubeconfig=/var/run/hub/kubeconfig",
        "--cluster-name=cluster7",
        "--addon-namespace=open-cluster-management-agent-addon",
        "--addon-name=dynamic-scoring",
        "--config-map=dynamic-scoring-config",
        "--metrics-bind-address=:8080",
        "--log-level=info",
        "--max-concurrent-cycles=8",
        "--owner-deployment=dynamic-scoring-agent",
    ]
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert c["livenessProbe"]["httpGet"] == {"path": "/livez", "port": 8080}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8080}
    assert c["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert c["resources"] == DEFAULT_RESOURCES
    assert set(c["resources"]) == {"requests", "limits"}
    # The hub kubeconfig Secret mounted as a directory: no subPath, kubeconfig inside it; /tmp is
    # the one writable place on the read-only root (the Kubernetes client writes inline CA data there).
    tmp, mount = c["volumeMounts"]
    assert tmp == {"name": "tmp", "mountPath": "/tmp"}
    assert mount == {"name": "hub-kubeconfig", "mountPath": "/var/run/hub", "readOnly": True}
    assert pod["volumes"] == [
        {"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}},
        {"name": "hub-kubeconfig", "secret": {"secretName": "dynamic-scoring-hub-kubeconfig"}},
    ]
    assert "nodeSelector" not in pod and "tolerations" not in pod and "imagePullSecrets" not in pod


def test_node_placement() -> None:
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "scoring", "effect": "NoSchedule"}]
    r = render_agent(
        mca=mca(), adc=adc(nodePlacement={"nodeSelector": {"zone": "eu-1"}, "tolerations": tolerations})
    )
    pod = deployment(r.manifests)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"zone": "eu-1"}
    assert pod["tolerations"] == tolerations


def test_registries_rewrite_the_image() -> None:
    rules = [{"source": "ghcr.io/dynamic-scoring", "mirror": "mirror.example.com/ocm"}]
    r = render_agent(mca=mca(), adc=adc(registries=rules), agent_image_allow=("mirror.example.com/ocm",))
    assert container(r.manifests)["image"] == f"mirror.example.com/ocm/dynamic-scoring:{DEFAULT_IMAGE_TAG}"


def test_customized_image_then_mirrored() -> None:
    r = render_agent(
        mca=mca(),
        adc=adc(
            customizedVariables=variables(Image="quay.io/me/dynamic-scoring:2.0"),
            registries=[{"mirror": "local.registry:5000"}],
        ),
        agent_image_allow=("local.registry:5000",),
    )
    assert container(r.manifests)["image"] == "local.registry:5000/dynamic-scoring:2.0"


def test_proxy_env_and_ca_bundle_as_a_mounted_config_map() -> None:
    r = render_agent(
        mca=mca(),
        adc=adc(
            proxyConfig={
                "httpProxy": "http://proxy:3128",
                "httpsProxy": "https://proxy:3129",
                "noProxy": ".svc,10.0.0.0/8",
                "caBundle": b64(PEM),
            }
        ),
    )
    c = container(r.manifests)
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["HTTP_PROXY"] == "http://proxy:3128"
    assert env["HTTPS_PROXY"] == "https://proxy:3129"
    assert env["NO_PROXY"] == ".svc,10.0.0.0/8"
    assert env["CA_BUNDLE_FILE_PATH"] == "/etc/dynamic-scoring/proxy-ca/ca-bundle.crt"
    cm = by_kind(r.manifests, "ConfigMap")
    assert cm["data"] == {"ca-bundle.crt": PEM}
    assert {"name": "proxy-ca", "mountPath": "/etc/dynamic-scoring/proxy-ca", "readOnly": True} in c[
        "volumeMounts"
    ]
    volumes = deployment(r.manifests)["spec"]["template"]["spec"]["volumes"]
    assert {"name": "proxy-ca", "configMap": {"name": cm["metadata"]["name"]}} in volumes


def test_no_proxy_means_no_proxy_env() -> None:
    c = container(render_agent(mca=mca(), adc=adc()).manifests)
    assert [e["name"] for e in c["env"]] == ["POD_NAMESPACE"]


def test_invalid_ca_bundle_is_a_config_error() -> None:
    with pytest.raises(AddonConfigError, match="caBundle"):
        render_agent(mca=mca(), adc=adc(proxyConfig={"caBundle": b64("not a cert")}))


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ([{"containerID": "deployments:dynamic-scoring-agent:dynamic-scoring-agent"}], "exact"),
        ([{"containerID": "*:*:*"}], "wildcard"),
        ([{"containerID": "deployments:*:dynamic-scoring-agent"}], "wildcard-name"),
        ([{"containerID": "deployments:other:*"}], None),
        ([{"containerID": "daemonsets:*:*"}], None),
    ],
)
def test_resource_requirements_match_container_ids(rules: list[JSON], expected: str | None) -> None:
    resources = {"requests": {"memory": "300Mi"}, "limits": {"memory": "600Mi"}}
    spec_rules = [{**rule, "resources": resources} for rule in rules]
    c = container(render_agent(mca=mca(), adc=adc(resourceRequirements=spec_rules)).manifests)
    assert c["resources"] == (resources if expected else DEFAULT_RESOURCES)


def test_last_matching_resource_rule_wins() -> None:
    rules = [
        {"containerID": "*:*:*", "resources": {"limits": {"memory": "1Gi"}}},
        {"containerID": "deployments:dynamic-scoring-agent:*", "resources": {"limits": {"memory": "2Gi"}}},
    ]
    c = container(render_agent(mca=mca(), adc=adc(resourceRequirements=rules)).manifests)
    assert c["resources"] == {"limits": {"memory": "2Gi"}}


@pytest.mark.parametrize("container_id", ["deployments:x", "widgets:*:*", "a:b:c:d", "::"])
def test_malformed_container_id_is_rejected(container_id: str) -> None:
    with pytest.raises(AddonConfigError, match="containerID"):
        render_agent(
            mca=mca(), adc=adc(resourceRequirements=[{"containerID": container_id, "resources": {}}])
        )


def test_bad_quantity_is_rejected() -> None:
    rule = {"containerID": "*:*:*", "resources": {"limits": {"memory": "lots"}}}
    with pytest.raises(AddonConfigError, match=r"limits\.memory"):
        render_agent(mca=mca(), adc=adc(resourceRequirements=[rule]))


def test_customized_variables_reach_the_deployment() -> None:
    r = render_agent(
        mca=mca(),
        adc=adc(
            customizedVariables=variables(
                LogLevel="debug",
                MetricsBindAddress="0.0.0.0:9100",
                ImagePullPolicy="Always",
                ImagePullSecrets='["pull-a", "pull-b"]',
                MaxConcurrentCycles="3",
                MaxScoreBytes="2000000",
            )
        ),
    )
    c = container(r.manifests)
    pod = deployment(r.manifests)["spec"]["template"]["spec"]
    assert "--log-level=debug" in c["args"]
    assert "--metrics-bind-address=0.0.0.0:9100" in c["args"]
    assert "--max-concurrent-cycles=3" in c["args"]
    assert "--max-score-bytes=2000000" in c["args"]
    assert c["ports"][0]["containerPort"] == 9100
    assert c["livenessProbe"]["httpGet"]["port"] == 9100
    assert c["readinessProbe"]["httpGet"]["port"] == 9100
    assert c["imagePullPolicy"] == "Always"
    assert pod["imagePullSecrets"] == [{"name": "pull-a"}, {"name": "pull-b"}]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LogLevel", "verbose"),
        ("MetricsBindAddress", "8080"),
        ("MetricsBindAddress", ":99999"),
        ("ImagePullPolicy", "Sometimes"),
        ("ImagePullSecrets", "pull-a"),
        ("MaxConcurrentCycles", "0"),
        ("MaxScoreBytes", "1023"),
        ("MaxScoreBytes", "3145729"),
        ("MaxScoreBytes", "1.5Mi"),
        ("AgentAllowCIDRs", "127.0.0.0/8, not-a-network"),
        ("Image", "has space:1"),
        ("DeleteInstallNamespace", "yes"),
        ("AgentReplicas", "2"),
        ("AgentReplicas", "none"),
        ("LogLvl", "debug"),
    ],
)
def test_invalid_variables_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(AddonConfigError) as err:
        render_agent(mca=mca(), adc=adc(customizedVariables=variables(**{name: value})))
    assert err.value.field == f"spec.customizedVariables[{name}]"


def test_agent_allow_cidrs_become_one_allow_cidr_flag_each() -> None:
    """The agent's address policy allow list: comma/space separated in, normalised flags out."""
    default = container(render_agent(mca=mca(), adc=adc()).manifests)
    assert not any(a.startswith("--allow-cidr") for a in default["args"])
    r = render_agent(
        mca=mca(),
        adc=adc(customizedVariables=variables(AgentAllowCIDRs="127.0.0.1/8, 169.254.10.0/24 fd00::/8")),
    )
    args = [a for a in container(r.manifests)["args"] if a.startswith("--allow-cidr")]
    assert args == ["--allow-cidr=127.0.0.0/8", "--allow-cidr=169.254.10.0/24", "--allow-cidr=fd00::/8"]


def test_agent_replicas_zero_renders_the_deployment_without_pods() -> None:
    """`AgentReplicas: 0` keeps the namespace, the summaries' RBAC and the Deployment, scaled to 0."""
    default = render_agent(mca=mca(), adc=adc())
    assert deployment(default.manifests)["spec"]["replicas"] == 1
    external = render_agent(mca=mca(), adc=adc(customizedVariables=variables(AgentReplicas="0")))
    assert deployment(external.manifests)["spec"]["replicas"] == 0
    assert [m["kind"] for m in external.manifests] == [m["kind"] for m in default.manifests]


def test_values_cannot_inject_yaml() -> None:
    hostile = 'x"\n  injected: true\nkind: Secret'
    r = render_agent(mca=mca(), adc=adc(proxyConfig={"httpProxy": hostile}))
    assert [m["kind"] for m in r.manifests].count("Secret") == 0
    env = {e["name"]: e.get("value") for e in container(r.manifests)["env"]}
    assert env["HTTP_PROXY"] == hostile


def test_cluster_annotation_mirrors_apply_only_without_adc_rules() -> None:
    cluster = {
        "metadata": {
            "name": "cluster1",
            "annotations": {
                "open-cluster-management.io/image-registries": (
                    '{"registries":[{"source":"ghcr.io","mirror":"cluster-mirror.example.com"}]}'
                )
            },
        }
    }
    allow = ("cluster-mirror.example.com", "adc-mirror.example.com")
    plain = render_agent(mca=mca(), adc=None, cluster=cluster, agent_image_allow=allow)
    assert plain.image == f"cluster-mirror.example.com/dynamic-scoring/dynamic-scoring:{DEFAULT_IMAGE_TAG}"
    adc_rules = adc(registries=[{"source": "ghcr.io", "mirror": "adc-mirror.example.com"}])
    rendered = render_agent(mca=mca(), adc=adc_rules, cluster=cluster, agent_image_allow=allow)
    assert rendered.image.startswith("adc-mirror.example.com/")


def test_the_adoption_opt_in_reaches_the_agent_only_when_the_manager_sets_it() -> None:
    """Only the hub admin's manager flag may let agents take over unlabelled scores, never an ADC."""
    assert "--adopt-unlabelled-scores" not in container(render_agent(mca=mca(), adc=None).manifests)["args"]
    opted = render_agent(mca=mca(), adc=None, adopt_unlabelled_scores=True)
    assert "--adopt-unlabelled-scores" in container(opted.manifests)["args"]


def test_trusting_the_proxy_ca_for_destinations_reaches_the_agent_only_when_the_manager_sets_it() -> None:
    """An ADC writer chooses the proxy CA; only the hub admin's flag lets agents trust it beyond the proxy."""
    with_ca = adc(proxyConfig={"httpsProxy": "https://proxy:3129", "caBundle": b64(PEM)})
    assert (
        "--trust-proxy-ca-for-destinations"
        not in container(render_agent(mca=mca(), adc=with_ca).manifests)["args"]
    )
    opted = render_agent(mca=mca(), adc=with_ca, trust_proxy_ca_for_destinations=True)
    assert "--trust-proxy-ca-for-destinations" in container(opted.manifests)["args"]
