"""Whoever writes an AddOnDeploymentConfig may not pick an agent image outside the hub admin's allow-list."""

from __future__ import annotations

import re

import pytest

from dynamic_scoring.addon.constants import DEFAULT_IMAGE, DEFAULT_IMAGE_REPOSITORY, DEFAULT_IMAGE_TAG
from dynamic_scoring.addon.controllers.lifecycle.deploy import (
    AGENT_IMAGE_NOT_ALLOWED,
    _reason,
    _where,
    render_fingerprint,
)
from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.addon.render.image_allow import (
    AgentImageNotAllowedError,
    allowed_prefixes,
    image_allowed,
    image_repository,
    parse_allow_prefix,
    parse_allow_values,
)
from dynamic_scoring.kube.jsontypes import JSON
from tests.unit.addon.helpers import adc, mca, variables

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("ghcr.io/dynamic-scoring/dynamic-scoring:0.1.0", "ghcr.io/dynamic-scoring/dynamic-scoring"),
        (f"ghcr.io/dynamic-scoring/dynamic-scoring@{DIGEST}", "ghcr.io/dynamic-scoring/dynamic-scoring"),
        (f"ghcr.io/dynamic-scoring/dynamic-scoring:1@{DIGEST}", "ghcr.io/dynamic-scoring/dynamic-scoring"),
        ("localhost:5000/x", "localhost:5000/x"),
        ("localhost:5000/x:dev", "localhost:5000/x"),
        ("agent", "agent"),
        ("agent:1", "agent"),
    ],
)
def test_the_repository_drops_tag_and_digest_but_keeps_the_registry_port(image: str, repository: str) -> None:
    assert image_repository(image) == repository


@pytest.mark.parametrize(
    ("image", "allowed"),
    [
        ("registry.example.com/team/agent:1", True),
        ("registry.example.com/team:1", True),
        (f"registry.example.com/team/agent@{DIGEST}", True),
        ("registry.example.com/team/sub/agent", True),
        ("registry.example.com/teamevil/x", False),
        ("registry.example.com/teamevil:1", False),
        ("registry.example.com/tea", False),
        ("registry.example.com.evil/team/agent", False),
        ("evil.example.com/registry.example.com/team/agent", False),
    ],
)
def test_a_prefix_matches_only_at_a_path_segment_boundary(image: str, allowed: bool) -> None:
    assert image_allowed(image, ["registry.example.com/team"]) is allowed


def test_a_registry_with_a_port_is_a_prefix_of_its_own() -> None:
    assert image_allowed("localhost:5000/x:dev", ["localhost:5000"])
    assert image_allowed("localhost:5000/x", ["localhost:5000/x"])
    assert not image_allowed("localhost:50001/x", ["localhost:5000"])
    assert not image_allowed("localhost/x", ["localhost:5000"])


def test_the_default_allows_every_tag_and_digest_of_the_managers_repository_only() -> None:
    prefixes = allowed_prefixes(DEFAULT_IMAGE)
    assert prefixes == (DEFAULT_IMAGE_REPOSITORY,)
    assert image_allowed(f"{DEFAULT_IMAGE_REPOSITORY}:9.9.9", prefixes)
    assert image_allowed(f"{DEFAULT_IMAGE_REPOSITORY}@{DIGEST}", prefixes)
    assert not image_allowed(f"{DEFAULT_IMAGE_REPOSITORY}-evil:0.1.0", prefixes)
    assert not image_allowed("ghcr.io/dynamic-scoring/other:0.1.0", prefixes)
    assert allowed_prefixes(DEFAULT_IMAGE, ["m.example.com/", DEFAULT_IMAGE_REPOSITORY]) == (
        DEFAULT_IMAGE_REPOSITORY,
        "m.example.com",
    )


def test_flag_values_are_lists_of_prefixes_without_tags() -> None:
    assert parse_allow_values(["a.example.com/x, b.example.com/y/", "localhost:5000"]) == (
        "a.example.com/x",
        "b.example.com/y",
        "localhost:5000",
    )
    for bad in ("ghcr.io/x/y:1.0", f"ghcr.io/x/y@{DIGEST}", "https://ghcr.io/x", "/"):
        with pytest.raises(ValueError, match=r"tag or digest|not a repository prefix"):
            parse_allow_prefix(bad)


def test_an_adc_image_outside_the_allow_list_is_refused_naming_the_variable_and_the_flag() -> None:
    config = adc(customizedVariables=variables(Image="evil.example.com/steal/secrets:1"))
    with pytest.raises(AgentImageNotAllowedError) as err:
        render_agent(mca=mca(), adc=config)
    assert err.value.field == "spec.customizedVariables[Image]"
    text = str(err.value)
    assert "'evil.example.com/steal/secrets:1' is not allowed" in text
    assert DEFAULT_IMAGE_REPOSITORY in text
    assert "--agent-image-allow=evil.example.com/steal/secrets" in text
    assert "DYNAMIC_SCORING_AGENT_IMAGE_ALLOW" in text
    allowed = render_agent(mca=mca(), adc=config, agent_image_allow=("evil.example.com/steal",))
    assert allowed.image == "evil.example.com/steal/secrets:1"


def test_an_adc_image_of_the_managers_repository_needs_no_flag() -> None:
    config = adc(customizedVariables=variables(Image=f"{DEFAULT_IMAGE_REPOSITORY}@{DIGEST}"))
    assert render_agent(mca=mca(), adc=config).image == f"{DEFAULT_IMAGE_REPOSITORY}@{DIGEST}"


def test_a_mirror_that_rewrites_to_an_unallowed_registry_is_refused_with_the_final_image() -> None:
    config = adc(registries=[{"source": "ghcr.io", "mirror": "evil.example.com"}])
    with pytest.raises(AgentImageNotAllowedError) as err:
        render_agent(mca=mca(), adc=config, agent_image_allow=("mirror.example.com",))
    assert err.value.field == "spec.registries"
    assert err.value.image == f"evil.example.com/dynamic-scoring/dynamic-scoring:{DEFAULT_IMAGE_TAG}"
    assert f"{DEFAULT_IMAGE!r} rewritten by spec.registries" in str(err.value)
    # the check is on the final image: an allowed ADC Image mirrored elsewhere is refused too
    allowed_image = adc(
        customizedVariables=variables(Image="mirror.example.com/agent:1"),
        registries=[{"mirror": "evil.example.com"}],
    )
    with pytest.raises(AgentImageNotAllowedError, match=re.escape("evil.example.com/agent:1")):
        render_agent(mca=mca(), adc=allowed_image, agent_image_allow=("mirror.example.com",))


def test_a_cluster_annotation_mirror_is_refused_and_reported_as_the_clusters() -> None:
    cluster: JSON = {
        "metadata": {
            "name": "cluster1",
            "annotations": {
                "open-cluster-management.io/image-registries": (
                    '{"registries":[{"source":"ghcr.io","mirror":"evil.example.com"}]}'
                )
            },
        }
    }
    with pytest.raises(AgentImageNotAllowedError) as err:
        render_agent(mca=mca(), adc=adc(), cluster=cluster)
    assert err.value.field == "ManagedCluster cluster1 annotation open-cluster-management.io/image-registries"
    # reported under its own reason, and not as the ADC's fault
    assert _reason(err.value) == AGENT_IMAGE_NOT_ALLOWED
    assert _where(err.value, "open-cluster-management-hub/default") == ""


def test_an_adc_refusal_names_the_adc_and_has_its_own_reason() -> None:
    err = AgentImageNotAllowedError(
        "spec.customizedVariables[Image]", "x.example.com/a:1", "x.example.com/a:1", ()
    )
    assert _reason(err) == AGENT_IMAGE_NOT_ALLOWED
    assert _where(err, "ns/cfg") == "AddOnDeploymentConfig ns/cfg: "


def test_the_allow_list_and_the_proxy_ca_opt_in_are_inputs_of_the_render_fingerprint() -> None:
    m: JSON = {"metadata": {"uid": "u"}}
    cluster: JSON = {"metadata": {}}
    base = render_fingerprint(m, None, cluster, DEFAULT_IMAGE)
    assert render_fingerprint(m, None, cluster, DEFAULT_IMAGE, False, (), False) == base
    assert render_fingerprint(m, None, cluster, DEFAULT_IMAGE, False, ("m.example.com",)) != base
    assert render_fingerprint(m, None, cluster, DEFAULT_IMAGE, False, (), True) != base
