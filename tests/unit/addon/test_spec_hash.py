"""The spec hash must equal addon-framework's byte for byte; the pinned digests were computed by a
Go program running encoding/json.Marshal + sha256 over the same objects (not by this code)."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.addon.config.spec_hash import go_json, spec_hash

ADC = {
    "apiVersion": "addon.open-cluster-management.io/v1alpha1",
    "kind": "AddOnDeploymentConfig",
    "metadata": {
        "name": "dynamic-scoring-default",
        "namespace": "dynamic-scoring",
        "generation": 3,
        "uid": "1",
    },
    "spec": {
        "agentInstallNamespace": "open-cluster-management-agent-addon",
        "customizedVariables": [
            {"name": "LogLevel", "value": "debug"},
            {"name": "Image", "value": "registry.example.com/ds/dynamic-scoring:1.0"},
            {"name": "Note", "value": "a<b>&c \u2028 caf\u00e9"},
        ],
        "nodePlacement": {
            "nodeSelector": {"kubernetes.io/os": "linux", "zone": "eu-1"},
            "tolerations": [
                {
                    "key": "dedicated",
                    "operator": "Equal",
                    "value": "scoring",
                    "effect": "NoSchedule",
                    "tolerationSeconds": 300,
                }
            ],
        },
        "proxyConfig": {"httpProxy": "http://proxy.example.com:3128", "noProxy": "10.0.0.0/8,.svc"},
        "registries": [{"mirror": "mirror.example.com/ocm", "source": "quay.io/open-cluster-management"}],
        "resourceRequirements": [
            {
                "containerID": "deployments:dynamic-scoring-agent:*",
                "resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "256Mi"}},
            }
        ],
    },
    "status": {},
}


def test_pinned_adc_hash_matches_go() -> None:
    assert spec_hash(ADC) == "1b8e80ffc4436854c2058751f8360a4d0d2ca9c7560162df7afb2529be97653c"


def test_framework_test_vectors() -> None:
    # addon-framework pkg/utils/helpers_test.go TestGetSpecHash
    assert spec_hash({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"}}) == (
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    )
    assert spec_hash({"kind": "X", "spec": {"test": 1}}) == (
        "af144391b79b4b07bd7c579980ae9ed42dc8e34f7babebbf3fd08cacb578fba4"
    )


def test_go_escapes_html_and_line_separators() -> None:
    assert go_json({"v": "<>&\u2028\u2029é"}) == '{"v":"\\u003c\\u003e\\u0026\\u2028\\u2029é"}'


def test_metadata_and_status_do_not_change_the_hash() -> None:
    other = {**ADC, "metadata": {"name": "x", "generation": 99}, "status": {"anything": True}}
    assert spec_hash(other) == spec_hash(ADC)


def test_floats_are_refused_not_hashed_differently() -> None:
    with pytest.raises(ValueError, match="float"):
        spec_hash({"spec": {"ratio": 1e-7}})


@given(
    st.dictionaries(
        st.text(),
        st.recursive(
            st.text() | st.integers() | st.booleans(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
        ),
    )
)
def test_go_json_round_trips_to_the_same_data(spec: dict[str, object]) -> None:
    encoded = go_json({"spec": spec})
    assert json.loads(encoded) == {"spec": spec}
    assert spec_hash({"spec": spec}) == hashlib.sha256(encoded.encode()).hexdigest()
