"""Every auth mode against real HTTP(S) servers, token rotation, and TLS verification on by default."""

from __future__ import annotations

import base64
import logging
import uuid
from typing import Any

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher, MemorySecrets
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.outbound.secret_binding import ALLOWED_SCORERS_ANNOTATION
from tests.component.harness import ScorerPKI, ScorerProcess, eventually, published, summary

pytestmark = pytest.mark.anyio


def bound(scorer: ScorerProcess) -> str:
    """The allowed-hosts entry that binds a Secret to the scorer process's host and port."""
    return f"127.0.0.1:{scorer.port}"


async def test_upstream_bearer_token_is_trimmed_and_rotation_applies_next_cycle(
    supervisor: Supervisor, publisher: MemoryPublisher, secrets: MemorySecrets, scorer: ScorerProcess
) -> None:
    key = uuid.uuid4().hex
    secrets.set("scorer-token", "token", "first-token\n", allowed_hosts=bound(scorer))
    scorer.expect(key, {"Authorization": "Bearer first-token"})
    s = summary(
        "bearer",
        scorer.url(f"/auth/{key}/scoring"),
        scoringInterval=1,
        scoringEndpointAuthName="scorer-token",
        scoringEndpointAuthKey="token",
    )
    await supervisor.apply([s])
    first = (await published(publisher, "bearer"))[0]
    assert first.condition.status == "True", first.condition

    secrets.set("scorer-token", "token", "second-token", allowed_hosts=bound(scorer))
    scorer.expect(key, {"Authorization": "Bearer second-token"})

    def rotated() -> bool:
        seen = [r["headers"].get("authorization") for r in scorer.requests(f"/auth/{key}/")]
        return "Bearer second-token" in seen

    await eventually(rotated, what="a request with the rotated token")
    await eventually(lambda: publisher.requests_for("bearer")[-1].condition.status == "True", what="success")


async def test_source_bearer_and_custom_headers_reach_the_source(
    supervisor: Supervisor, publisher: MemoryPublisher, secrets: MemorySecrets, scorer: ScorerProcess
) -> None:
    key = uuid.uuid4().hex
    secrets.set("prom", "token", "  prom-token  ", allowed_hosts=bound(scorer))
    secrets.set("tenant", "id", "tenant-42\n", allowed_hosts=bound(scorer))
    scorer.expect(
        key, {"Authorization": "Bearer prom-token", "X-Scope-OrgID": "tenant-42", "X-Static": "yes"}
    )
    s = summary(
        "source_auth",
        scorer.url("/count/scoring"),
        sourceType="Prometheus",
        sourceEndpoint=scorer.url(f"/prom/{key}/api/v1/query_range"),
        sourceQuery="up",
        sourceRange=60,
        sourceStep=30,
        sourceEndpointAuthName="prom",
        sourceEndpointAuthKey="token",
        sourceAuth={
            "headers": [
                {"name": "X-Scope-OrgID", "secretKeyRef": {"name": "tenant", "key": "id"}},
                {"name": "X-Static", "value": "yes"},
            ]
        },
    )
    await supervisor.apply([s])
    first = (await published(publisher, "source_auth"))[0]
    assert first.condition.status == "True", first.condition
    scoring_request = scorer.requests("/count/scoring")[-1]
    assert "authorization" not in scoring_request["headers"]  # source credentials stay with the source


async def test_extension_bearer_wins_over_the_upstream_pair(
    supervisor: Supervisor, publisher: MemoryPublisher, secrets: MemorySecrets, scorer: ScorerProcess
) -> None:
    key = uuid.uuid4().hex
    secrets.set("old", "token", "old-token", allowed_hosts=bound(scorer))
    secrets.set("new", "t", "new-token", allowed_hosts=bound(scorer))
    scorer.expect(key, {"Authorization": "Bearer new-token"})
    s = summary(
        "precedence",
        scorer.url(f"/auth/{key}/scoring"),
        scoringEndpointAuthName="old",
        scoringEndpointAuthKey="token",
        scoringAuth={"bearerTokenSecretRef": {"name": "new", "key": "t"}},
    )
    await supervisor.apply([s])
    assert (await published(publisher, "precedence"))[0].condition.status == "True"


async def test_basic_auth(
    supervisor: Supervisor, publisher: MemoryPublisher, secrets: MemorySecrets, scorer: ScorerProcess
) -> None:
    key = uuid.uuid4().hex
    secrets.set("basic", "username", "agent\n", allowed_hosts=bound(scorer))
    secrets.set("basic", "password", "p@ss word", allowed_hosts=bound(scorer))
    expected = "Basic " + base64.b64encode(b"agent:p@ss word").decode()
    scorer.expect(key, {"Authorization": expected})
    s = summary(
        "basic", scorer.url(f"/auth/{key}/scoring"), scoringAuth={"basicAuthSecretRef": {"name": "basic"}}
    )
    await supervisor.apply([s])
    assert (await published(publisher, "basic"))[0].condition.status == "True"


async def test_missing_secret_names_it_and_leaks_nothing(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    secrets: MemorySecrets,
    scorer: ScorerProcess,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    key = uuid.uuid4().hex
    secrets.set("wrong", "token", "super-secret-value", allowed_hosts=bound(scorer))
    scorer.expect(key, {"Authorization": "Bearer something-else"})
    await supervisor.apply(
        [
            summary(
                "missing",
                scorer.url("/mean/scoring"),
                scoringAuth={"bearerTokenSecretRef": {"name": "nope", "key": "t"}},
            ),
            summary(
                "rejected",
                scorer.url(f"/auth/{key}/scoring"),
                scoringEndpointAuthName="wrong",
                scoringEndpointAuthKey="token",
            ),
        ]
    )
    missing = (await published(publisher, "missing"))[0]
    assert missing.condition.reason == "SecretNotFound"
    assert "dynamic-scoring/nope" in missing.condition.message
    rejected = (await published(publisher, "rejected"))[0]
    assert rejected.condition.reason == "ScorerHTTPError"
    everything = "\n".join(
        [caplog.text, supervisor.metrics.exposition().decode()]
        + [r.condition.message for r in publisher.published]
    )
    assert "super-secret-value" not in everything
    assert "scorer=rejected-scorer score=rejected" in caplog.text


async def test_tls_verification_is_on_by_default(
    supervisor: Supervisor, publisher: MemoryPublisher, tls_scorer: ScorerProcess
) -> None:
    await supervisor.apply([summary("untrusted", tls_scorer.url("/mean/scoring"))])
    first = (await published(publisher, "untrusted"))[0]
    assert first.condition.reason == "ScorerUnavailable"
    assert "CERTIFICATE_VERIFY_FAILED" in first.condition.message


async def test_tls_with_the_ca_from_a_secret(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    secrets: MemorySecrets,
    tls_scorer: ScorerProcess,
    pki: ScorerPKI,
) -> None:
    secrets.set("scorer-ca", "ca.crt", pki.ca.cert_pem)
    s = summary(
        "trusted",
        tls_scorer.url("/mean/scoring"),
        scoringAuth={"caSecretRef": {"name": "scorer-ca", "key": "ca.crt"}},
    )
    await supervisor.apply([s])
    assert (await published(publisher, "trusted"))[0].condition.status == "True"


async def test_insecure_skip_verify_must_be_explicit(
    supervisor: Supervisor, publisher: MemoryPublisher, tls_scorer: ScorerProcess
) -> None:
    s = summary("insecure", tls_scorer.url("/mean/scoring"), scoringAuth={"insecureSkipVerify": True})
    await supervisor.apply([s])
    assert (await published(publisher, "insecure"))[0].condition.status == "True"


@pytest.mark.parametrize(("client", "ok"), [("agent", True), (None, False), ("intruder", False)])
async def test_client_certificates(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    secrets: MemorySecrets,
    mtls_scorer: ScorerProcess,
    pki: ScorerPKI,
    client: str | None,
    ok: bool,
) -> None:
    secrets.set("scorer-ca", "ca.crt", pki.ca.cert_pem)
    auth: dict[str, object] = {"caSecretRef": {"name": "scorer-ca", "key": "ca.crt"}}
    if client is not None:
        issued = pki.client if client == "agent" else pki.stranger_client
        secrets.set("client-cert", "tls.crt", issued.cert_pem, allowed_hosts=bound(mtls_scorer))
        secrets.set("client-cert", "tls.key", issued.key_pem, allowed_hosts=bound(mtls_scorer))
        auth["clientCertSecretRef"] = {"name": "client-cert"}
    await supervisor.apply([summary("mtls", mtls_scorer.url("/mean/scoring"), scoringAuth=auth)])
    first = (await published(publisher, "mtls"))[0]
    assert (first.condition.status == "True") == ok, first.condition


async def test_unloadable_client_certificate_is_a_secret_problem(
    supervisor: Supervisor, publisher: MemoryPublisher, secrets: MemorySecrets, mtls_scorer: ScorerProcess
) -> None:
    secrets.set("broken", "tls.crt", "not a certificate", allowed_hosts=bound(mtls_scorer))
    secrets.set("broken", "tls.key", "not a key", allowed_hosts=bound(mtls_scorer))
    s = summary(
        "broken_cert",
        mtls_scorer.url("/mean/scoring"),
        scoringAuth={"clientCertSecretRef": {"name": "broken"}},
    )
    await supervisor.apply([s])
    first = (await published(publisher, "broken_cert"))[0]
    assert first.condition.reason == "SecretInvalid"
    assert "broken/tls.crt,tls.key" in first.condition.message


async def test_credentials_echoed_by_a_server_are_redacted(
    supervisor: Supervisor, publisher: MemoryPublisher, secrets: MemorySecrets, scorer: ScorerProcess
) -> None:
    secrets.set("echo", "token", "echo-me-not", allowed_hosts=bound(scorer))
    s = summary(
        "echo", scorer.url("/echo/scoring"), scoringEndpointAuthName="echo", scoringEndpointAuthKey="token"
    )
    await supervisor.apply([s])
    first = (await published(publisher, "echo"))[0]
    assert first.condition.reason == "ScorerHTTPError"
    # The body (which echoes the headers) is not repeated at all: status code and phrase only.
    assert "echo-me-not" not in first.condition.message
    assert first.condition.message.endswith("answered HTTP 401 (Unauthorized)"), first.condition.message


@pytest.mark.parametrize("annotation", [None, "", "scorer.example.com", "127.0.0.1"])
async def test_an_unbound_secret_is_never_sent_and_binding_it_takes_effect_next_cycle(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    secrets: MemorySecrets,
    scorer: ScorerProcess,
    caplog: pytest.LogCaptureFixture,
    annotation: str | None,
) -> None:
    """A DynamicScorer names both the Secret and the URL; only the Secret's owner may bind the two.

    Before the binding check, every agent sent the named Secret's value to whatever host the
    summary gave, so a scorer author could collect Secrets they were never given.  Now the request
    is not sent at all (with or without the value) until the Secret lists the host and port.
    """
    caplog.set_level(logging.DEBUG)
    key = uuid.uuid4().hex
    secrets.set("stolen", "token", "never-leaves-the-cluster")
    if annotation is not None:
        secrets.bind("stolen", annotation)
    scorer.expect(key, {"Authorization": "Bearer never-leaves-the-cluster"})
    name = f"unbound_{uuid.uuid4().hex[:6]}"
    s = summary(
        name,
        scorer.url(f"/auth/{key}/scoring"),
        scoringInterval=1,
        scoringAuth={"bearerTokenSecretRef": {"name": "stolen", "key": "token"}},
    )
    await supervisor.apply([s])
    first = (await published(publisher, name))[0]
    assert first.condition.status == "False" and first.condition.reason == "SecretNotBound", first.condition
    message = first.condition.message
    assert "secret dynamic-scoring/stolen" in message
    assert f"127.0.0.1:{scorer.port}" in message
    assert "dynamic-scoring.open-cluster-management.io/allowed-hosts" in message
    assert scorer.requests(f"/auth/{key}/") == []  # not sent, neither with nor without the token
    everything = "\n".join(
        [caplog.text, supervisor.metrics.exposition().decode()]
        + [r.condition.message for r in publisher.published]
    )
    assert "never-leaves-the-cluster" not in everything
    assert 'reason="SecretNotBound"' in supervisor.metrics.exposition().decode()

    secrets.bind("stolen", f"{annotation or 'scorer.example.com'}, {bound(scorer)}")
    await eventually(
        lambda: publisher.requests_for(name)[-1].condition.status == "True", what="success once bound"
    )
    sent = [r["headers"].get("authorization") for r in scorer.requests(f"/auth/{key}/")]
    assert sent and set(sent) == {"Bearer never-leaves-the-cluster"}


async def test_an_unbound_source_secret_stops_the_cycle_before_the_source_is_asked(
    supervisor: Supervisor, publisher: MemoryPublisher, secrets: MemorySecrets, scorer: ScorerProcess
) -> None:
    key = uuid.uuid4().hex
    secrets.set("prom-token", "token", "source-token")
    secrets.bind("prom-token", "prometheus-k8s.monitoring.svc:9090")
    name = f"unbound_source_{uuid.uuid4().hex[:6]}"
    s = summary(
        name,
        scorer.url(f"/count/scoring?run={key}"),
        sourceType="Prometheus",
        sourceEndpoint=scorer.url(f"/prom/{key}/api/v1/query_range"),
        sourceQuery="up",
        sourceRange=60,
        sourceStep=30,
        sourceAuth={
            "headers": [{"name": "X-Api-Key", "secretKeyRef": {"name": "prom-token", "key": "token"}}]
        },
    )
    await supervisor.apply([s])
    first = (await published(publisher, name))[0]
    assert first.condition.reason == "SecretNotBound", first.condition
    assert "fetch" in first.condition.message
    assert scorer.requests(f"/prom/{key}/") == []
    assert [r for r in scorer.requests("/count/scoring") if key in r["query"]] == []


async def test_a_secret_that_names_its_scorers_is_refused_to_any_other_scorer(
    supervisor: Supervisor, publisher: MemoryPublisher, secrets: MemorySecrets, scorer: ScorerProcess
) -> None:
    """The host binding keeps the token at Prometheus; the scorer list keeps its results from others.

    Without the list, a scorer author could name a Prometheus token bound to Prometheus and have the
    query results it unlocks POSTed to a scoring host of their own.
    """
    key = uuid.uuid4().hex
    secrets.set("team-prom", "token", "team-token", allowed_hosts=bound(scorer))
    secrets.annotations["team-prom"][ALLOWED_SCORERS_ANNOTATION] = "team-scorer"
    scorer.expect(key, {"Authorization": "Bearer team-token"})

    def entry(name: str, scoring_path: str) -> Any:
        return summary(
            name,
            scorer.url(scoring_path),
            name=name.replace("_", "-"),
            sourceType="Prometheus",
            sourceEndpoint=scorer.url(f"/prom/{key}/api/v1/query_range"),
            sourceQuery="up",
            sourceRange=60,
            sourceStep=30,
            sourceEndpointAuthName="team-prom",
            sourceEndpointAuthKey="token",
        )

    stranger = f"stranger_{key[:6]}"
    await supervisor.apply(
        [entry(stranger, f"/count/scoring?stranger={key}"), entry("team_scorer", "/count/scoring")]
    )
    refused = (await published(publisher, stranger))[0]
    assert refused.condition.reason == "SecretNotBound", refused.condition
    assert f"may not be used by DynamicScorer {stranger.replace('_', '-')}" in refused.condition.message
    assert (await published(publisher, "team_scorer"))[0].condition.status == "True"
    assert [r for r in scorer.requests("/count/scoring") if f"stranger={key}" in r["query"]] == []
    prom = scorer.requests(f"/prom/{key}/")
    assert len(prom) >= 1 and all(r["headers"]["authorization"] == "Bearer team-token" for r in prom)
