"""The hub admin's bound on the agent's own token: where it goes, its audience and the role it gets.

An AddOnDeploymentConfig's writer (a namespace or cluster-set admin) lists `AgentTokenDestinations`,
`AgentTokenAudience` and `AgentMonitoringClusterRole`; the manager renders them only when the hub
admin's `--agent-token-*-allow` / `--agent-monitoring-role-allow` flags cover them.
"""

from __future__ import annotations

import pytest

from dynamic_scoring.addon.constants import DEFAULT_IMAGE
from dynamic_scoring.addon.controllers.lifecycle.deploy import (
    AGENT_TOKEN_NOT_ALLOWED,
    APPLY_FAILED,
    AgentRenderOptions,
    Deploy,
    _reason,
    _where,
    render_fingerprint,
)
from dynamic_scoring.addon.errors import AddonConfigError
from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.addon.render.token_allow import (
    AGENT_MONITORING_ROLE_ALLOW_FLAG,
    AGENT_TOKEN_AUDIENCE_ALLOW_FLAG,
    AGENT_TOKEN_DESTINATION_ALLOW_ENV,
    AGENT_TOKEN_DESTINATION_ALLOW_FLAG,
    AGENT_TOKEN_DESTINATION_ALLOW_VALUE,
    AgentTokenAllow,
    AgentTokenNotAllowedError,
    covers,
    parse_audience_allow,
    parse_destination_allow,
    parse_monitoring_role_allow,
)
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.outbound.secret_binding import HostEntry, parse_allowed_hosts
from tests.unit.addon.controllers.fakes import Cache, Recorder, lifecycle_caches
from tests.unit.addon.helpers import adc, by_kind, mca, variables

THANOS = "https://thanos-querier.openshift-monitoring.svc:9091"
WRITER = "https://collector.writer.example.com"  # the ADC writer's own server


def entry(text: str) -> HostEntry:
    (parsed,), bad = parse_allowed_hosts(text)
    assert bad == ()
    return parsed


def render(allow: AgentTokenAllow | None = None, **values: str) -> list[JSON]:
    """The agent rendered from an ADC with `values`; `allow` None: the manager's defaults."""
    adc_ = adc(customizedVariables=variables(**values))
    if allow is None:
        return render_agent(mca=mca(install_namespace="scoring"), adc=adc_).manifests
    return render_agent(mca=mca(install_namespace="scoring"), adc=adc_, agent_token_allow=allow).manifests


# -- covers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("allowed", "requested", "expected"),
    [
        (THANOS, THANOS, True),
        ("https://prom.example.com", "https://prom.example.com:443", True),  # the default port, spelled
        ("https://PROM.example.com", "https://prom.example.com", True),  # hosts compare case-insensitively
        ("https://prom.example.com", "https://prom.example.com:8443", False),  # another port
        ("https://prom.example.com:8443", "https://prom.example.com", False),
        ("https://prom.example.com", "https://other.example.com", False),
        ("https://prom.example.com", "https://prom.example.com.evil.com", False),
        ("https://[::1]:9091", "https://[0:0::1]:9091", True),  # IPs in their canonical form
        # wildcards: names below the domain, or a narrower wildcard; never the domain itself
        ("https://*.example.com", "https://prom.example.com", True),
        ("https://*.example.com", "https://a.b.example.com", True),
        ("https://*.example.com", "https://*.mon.example.com", True),
        ("https://*.example.com", "https://*.example.com", True),
        ("https://*.example.com", "https://example.com", False),
        ("https://*.example.com", "https://prom.example.community", False),
        ("https://*.example.com", "https://*.com", False),
        ("https://prom.example.com", "https://*.example.com", False),  # a wildcard is wider than a host
        ("https://*.example.com", "https://*.example.com:8443", False),
        # path prefixes: the request must lie within the allowed prefix, at a segment boundary
        ("https://prom.example.com/tenant-a", "https://prom.example.com/tenant-a", True),
        ("https://prom.example.com/tenant-a", "https://prom.example.com/tenant-a/", True),
        ("https://prom.example.com/tenant-a", "https://prom.example.com/tenant-a/api", True),
        ("https://prom.example.com/tenant-a/", "https://prom.example.com/tenant-a/api", True),
        ("https://prom.example.com/tenant-a", "https://prom.example.com/tenant-ab", False),
        ("https://prom.example.com/tenant-a", "https://prom.example.com/", False),  # every path: wider
        ("https://prom.example.com/tenant-a", "https://prom.example.com", False),
        ("https://prom.example.com/tenant-a/api", "https://prom.example.com/tenant-a", False),
        ("https://prom.example.com", "https://prom.example.com/tenant-a", True),
        ("https://prom.example.com/", "https://prom.example.com/any/thing", True),
        ("https://*.example.com/t", "https://prom.example.com/t/x", True),
        ("https://*.example.com/t", "https://prom.example.com/u", False),
    ],
)
def test_covers(allowed: str, requested: str, expected: bool) -> None:
    assert covers(entry(allowed), entry(requested)) is expected


def test_covers_needs_https_on_both_sides() -> None:
    # The flag and the ADC both refuse anything else; covers() fails closed if it is ever handed one.
    assert not covers(entry("prom.example.com:9091"), entry("https://prom.example.com:9091"))
    assert not covers(entry("https://prom.example.com:9091"), entry("prom.example.com:9091"))
    assert not covers(entry("http://prom.example.com:9091"), entry("http://prom.example.com:9091"))


# -- the flags' parsing ------------------------------------------------------------------------


def test_destination_allow_values_are_split_and_kept_as_written() -> None:
    assert parse_destination_allow([f"{THANOS}, https://*.example.com/t", "  ", "https://[::1]:9091"]) == (
        THANOS,
        "https://*.example.com/t",
        "https://[::1]:9091",
    )
    assert parse_destination_allow([]) == ()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("prom.example.com:9091", "https://"),  # would also match http://
        ("http://prom.example.com:9091", "https://"),
        ("https://prom:99999", "cannot be read"),
        ("https://*", "cannot be read"),
        ("https://prom.example.com/a/../b", "cannot be read"),
    ],
)
def test_destination_allow_refuses_what_could_not_bound_a_token(value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_destination_allow([value])


def test_audience_and_role_allow_values() -> None:
    assert parse_audience_allow(["prometheus, thanos", "x"]) == ("prometheus", "thanos", "x")
    with pytest.raises(ValueError, match="253"):
        parse_audience_allow(["a" * 254])
    assert parse_monitoring_role_allow(["cluster-monitoring-view"]) == ("cluster-monitoring-view",)
    with pytest.raises(ValueError, match="cluster-monitoring-view"):
        parse_monitoring_role_allow(["cluster-admin"])


# -- rendering ---------------------------------------------------------------------------------


def test_by_default_no_destination_is_allowed_and_the_error_names_what_the_hub_admin_sets() -> None:
    with pytest.raises(AgentTokenNotAllowedError) as err:
        render(AgentTokenDestinations=WRITER)
    assert isinstance(err.value, AddonConfigError)  # kept last good work, ManifestApplied=False
    assert err.value.field == "spec.customizedVariables[AgentTokenDestinations]"
    text = str(err.value)
    assert AGENT_TOKEN_DESTINATION_ALLOW_FLAG in text
    assert AGENT_TOKEN_DESTINATION_ALLOW_VALUE in text and AGENT_TOKEN_DESTINATION_ALLOW_ENV in text
    assert "collector.writer.example.com" in text and "allows none" in text, text


def test_the_writers_own_host_is_refused_when_the_flag_names_another() -> None:
    allow = AgentTokenAllow(destinations=(THANOS,))
    with pytest.raises(AgentTokenNotAllowedError) as err:
        render(allow, AgentTokenDestinations=f"{THANOS} {WRITER}")
    assert "collector.writer.example.com" in str(err.value) and THANOS in str(err.value)
    # the covered entry alone is fine
    spec = by_kind(render(allow, AgentTokenDestinations=THANOS), "Deployment")["spec"]["template"]["spec"]
    assert f"--service-account-token-destinations={THANOS}" in spec["containers"][0]["args"]


def test_wildcard_and_path_prefix_coverage_when_rendering() -> None:
    allow = AgentTokenAllow(destinations=("https://*.mon.example.com/tenant-a",))
    render(allow, AgentTokenDestinations="https://prom.mon.example.com/tenant-a/api")
    with pytest.raises(AgentTokenNotAllowedError):
        render(allow, AgentTokenDestinations="https://prom.mon.example.com/tenant-b")
    with pytest.raises(AgentTokenNotAllowedError):
        render(allow, AgentTokenDestinations="https://mon.example.com/tenant-a")


def test_the_audience_is_bounded_and_unset_stays_allowed() -> None:
    allow = AgentTokenAllow(destinations=(THANOS,))
    render(allow, AgentTokenDestinations=THANOS)  # the kube-apiserver's audience: no flag needed
    with pytest.raises(AgentTokenNotAllowedError) as err:
        render(allow, AgentTokenDestinations=THANOS, AgentTokenAudience="vault")
    assert err.value.field == "spec.customizedVariables[AgentTokenAudience]"
    assert AGENT_TOKEN_AUDIENCE_ALLOW_FLAG in str(err.value) and "'vault'" in str(err.value)
    allowed = AgentTokenAllow(destinations=(THANOS,), audiences=("prometheus",))
    render(allowed, AgentTokenDestinations=THANOS, AgentTokenAudience="prometheus")
    with pytest.raises(AgentTokenNotAllowedError):
        render(allowed, AgentTokenDestinations=THANOS, AgentTokenAudience="vault")


def test_the_monitoring_role_is_bounded() -> None:
    allow = AgentTokenAllow(destinations=(THANOS,))
    with pytest.raises(AgentTokenNotAllowedError) as err:
        render(allow, AgentTokenDestinations=THANOS, AgentMonitoringClusterRole="cluster-monitoring-view")
    assert err.value.field == "spec.customizedVariables[AgentMonitoringClusterRole]"
    assert AGENT_MONITORING_ROLE_ALLOW_FLAG in str(err.value)
    allowed = AgentTokenAllow(destinations=(THANOS,), monitoring_roles=("cluster-monitoring-view",))
    manifests = render(
        allowed, AgentTokenDestinations=THANOS, AgentMonitoringClusterRole="cluster-monitoring-view"
    )
    assert by_kind(manifests, "ClusterRoleBinding")["roleRef"]["name"] == "cluster-monitoring-view"


def test_an_adc_without_the_token_needs_no_allowance() -> None:
    assert render(LogLevel="debug")  # the flags bound the token only; nothing else changes


def test_the_refusal_fits_a_condition_message() -> None:
    many = " ".join(f"https://h{i}.writer.example.com/{'p' * 40}" for i in range(30))
    with pytest.raises(AgentTokenNotAllowedError) as err:
        render(AgentTokenDestinations=many)
    assert len(str(err.value)) < 512


# -- where the refusal goes ----------------------------------------------------------------------


def test_a_refusal_names_the_adc_and_has_its_own_event_reason() -> None:
    with pytest.raises(AgentTokenNotAllowedError) as err:
        render(AgentTokenDestinations=WRITER)
    assert _reason(err.value) == AGENT_TOKEN_NOT_ALLOWED == "AgentTokenNotAllowed"
    assert _where(err.value, "ns/cfg") == "AddOnDeploymentConfig ns/cfg: "


def test_the_bound_is_an_input_of_the_render_fingerprint() -> None:
    m: JSON = {"metadata": {"uid": "u"}}
    cluster: JSON = {"metadata": {}}
    base = render_fingerprint(m, None, cluster, DEFAULT_IMAGE)
    # unset: existing fingerprints stay as they are, so an upgrade renders nothing again by itself
    assert render_fingerprint(m, None, cluster, DEFAULT_IMAGE, False, (), False, AgentTokenAllow()) == base
    for bound in (
        AgentTokenAllow(destinations=(THANOS,)),
        AgentTokenAllow(audiences=("prometheus",)),
        AgentTokenAllow(monitoring_roles=("cluster-monitoring-view",)),
    ):
        assert render_fingerprint(m, None, cluster, DEFAULT_IMAGE, False, (), False, bound) != base


def test_the_deploy_reconcile_reports_the_refusal_on_the_addon_and_writes_no_work() -> None:
    """Where every ADC error goes: ManifestApplied=False and a Warning Event on the MCA."""
    config = adc(customizedVariables=variables(AgentTokenDestinations=WRITER))
    config["metadata"] = {"name": "token", "namespace": "cluster1"}
    addon = mca(
        conditions=[{"type": "RegistrationApplied", "status": "True", "reason": "Applied", "message": ""}],
        configReferences=[
            {
                "group": "addon.open-cluster-management.io",
                "resource": "addondeploymentconfigs",
                "namespace": "cluster1",
                "name": "token",
                "desiredConfig": {"namespace": "cluster1", "name": "token", "specHash": "abc"},
            }
        ],
    )
    cluster: JSON = {
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": "cluster1"},
    }
    api = Recorder()
    caches = lifecycle_caches(addons=Cache(addon), clusters=Cache(cluster), configs=Cache(config))
    Deploy(caches, api.writer("deploy"), AgentRenderOptions(agent_image="example.com/agent:1")).reconcile(
        "cluster1/dynamic-scoring"
    )
    assert api.writes("/apis/work.open-cluster-management.io/v1/namespaces/cluster1/manifestworks") == []
    assert [e["reason"] for e in api.events()] == [AGENT_TOKEN_NOT_ALLOWED]
    status = "/apis/addon.open-cluster-management.io/v1alpha1/namespaces/cluster1/managedclusteraddons"
    [condition] = [
        c for c in api.writes(status)[0][1]["status"]["conditions"] if c["type"] == "ManifestApplied"
    ]
    assert condition["status"] == "False" and condition["reason"] == APPLY_FAILED
    message = condition["message"]
    assert "AddOnDeploymentConfig cluster1/token" in message and AGENT_TOKEN_DESTINATION_ALLOW_FLAG in message
