"""The process runner's reading of a pod spec: `$(VAR)` expansion, probe ports, downward API, extra env."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from e2e.runner import Cluster, ConfigError, Replica, expand_references, field_value, resolve_port

ENV = {"NS": "open-cluster-management", "PORT": "8443", "EMPTY": ""}


@pytest.mark.parametrize(
    ("raw", "expanded"),
    [
        ("--namespace=$(NS)", "--namespace=open-cluster-management"),
        ("$(NS)/$(PORT)", "open-cluster-management/8443"),
        ("$(UNDEFINED)", "$(UNDEFINED)"),  # left as written, as the kubelet does
        ("$$(NS)", "$(NS)"),  # escaped
        ("$$$(NS)", "$open-cluster-management"),
        ("a$(EMPTY)b", "ab"),
        ("$(NS", "$(NS"),  # unclosed: literal
        ("cost $5", "cost $5"),
        ("$", "$"),
    ],
)
def test_expand_references_follows_kubernetes(raw: str, expanded: str) -> None:
    assert expand_references(raw, ENV) == expanded


@given(st.text().filter(lambda s: "$" not in s))
def test_text_without_a_dollar_is_unchanged(text: str) -> None:
    assert expand_references(text, ENV) == text


@given(st.from_regex(r"[A-Z_][A-Z0-9_]{0,10}", fullmatch=True), st.text(max_size=20))
def test_a_defined_variable_is_replaced_and_an_escaped_one_is_not(name: str, value: str) -> None:
    env = {name: value}
    assert expand_references(f"x$({name})y", env) == f"x{value}y"
    assert expand_references(f"x$$({name})y", env) == f"x$({name})y"


def test_probe_port_by_number_or_by_name() -> None:
    container = {"name": "manager", "ports": [{"name": "healthz", "containerPort": 8000}]}
    assert resolve_port(8000, container) == 8000
    assert resolve_port("8081", container) == 8081
    assert resolve_port("healthz", container) == 8000
    with pytest.raises(ConfigError, match="'metrics' is not a named port of container 'manager'"):
        resolve_port("metrics", container)


def test_downward_api_fields() -> None:
    pod = {
        "name": "manager-abc-0",
        "namespace": "open-cluster-management",
        "uid": "u1",
        "labels": {"app": "manager"},
        "annotations": {},
        "serviceAccountName": "dynamic-scoring-manager",
    }
    assert field_value("metadata.namespace", pod) == "open-cluster-management"
    assert field_value("metadata.name", pod) == "manager-abc-0"
    assert field_value("spec.nodeName", pod) == "e2e-node"
    assert field_value("spec.serviceAccountName", pod) == "dynamic-scoring-manager"
    assert field_value("metadata.labels['app']", pod) == "manager"
    assert field_value("metadata.annotations['missing']", pod) == ""
    with pytest.raises(ConfigError, match=r"status\.phase"):
        field_value("status.phase", pod)


def test_extra_env_reaches_every_replica_and_the_container_env_wins(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    deploy = {
        "metadata": {"name": "manager", "namespace": "dynamic-scoring"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "m", "image": "x", "env": [{"name": "MODE", "value": "pod"}]}]
                }
            }
        },
    }
    extra = {"DYNAMIC_SCORING_PROBE_ALLOW_CIDRS": "127.0.0.0/8", "MODE": "runner"}
    replica = Replica(Cluster("hub", kubeconfig), deploy, 0, tmp_path, "/usr/bin", extra)
    env = replica._env()
    assert env["DYNAMIC_SCORING_PROBE_ALLOW_CIDRS"] == "127.0.0.0/8"
    assert env["MODE"] == "pod"  # a manifest's own value is never overridden
