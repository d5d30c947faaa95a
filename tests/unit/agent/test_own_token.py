"""The agent's own ServiceAccount token: sent only where the cluster's admin bound it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynamic_scoring.agent.auth import resolve_credentials
from dynamic_scoring.agent.errors import SecretInvalid, SecretNotBound, SecretNotFound
from dynamic_scoring.agent.memory import MemorySecrets
from dynamic_scoring.agent.own_token import OwnToken
from dynamic_scoring.contract.wire import EndpointAuth

PROM = "https://thanos-querier.openshift-monitoring.svc:9091/api/v1/query_range"
ASK = EndpointAuth.model_validate({"agentServiceAccountToken": True})

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9.c2lnbmF0dXJl\n")
    return path


def own(
    path: Path,
    destinations: str = "https://thanos-querier.openshift-monitoring.svc:9091",
    scorers: str | None = None,
) -> OwnToken:
    return OwnToken(path, destinations, scorers)


async def test_the_token_goes_to_a_bound_source_and_is_read_every_time(token_file: Path) -> None:
    token = own(token_file)
    creds = await resolve_credentials(ASK, None, MemorySecrets(), url=PROM, stage="fetch", own_token=token)
    assert creds.headers == {"Authorization": "Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9.c2lnbmF0dXJl"}
    token_file.write_text("rotated.by.kubelet")  # the kubelet's rotation applies at the next read
    creds = await resolve_credentials(ASK, None, MemorySecrets(), url=PROM, stage="fetch", own_token=token)
    assert creds.headers["Authorization"] == "Bearer rotated.by.kubelet"
    assert "rotated" not in repr(token) and "rotated" not in repr(creds)


async def test_it_replaces_the_upstream_token_of_the_summary(token_file: Path) -> None:
    # The legacy Secret is not even read: it does not exist here.
    creds = await resolve_credentials(
        ASK, ("legacy", "token"), MemorySecrets(), url=PROM, stage="fetch", own_token=own(token_file)
    )
    assert creds.headers["Authorization"].startswith("Bearer eyJ")


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example.com/api/v1/query_range",  # another host
        "https://thanos-querier.openshift-monitoring.svc:9092/api/v1/query_range",  # another port
        "https://thanos-querier.openshift-monitoring.svc.evil.example.com:9091/x",  # a suffix is not the host
        "https://user@thanos-querier.openshift-monitoring.svc:9091@evil.example.com/",  # userinfo trick
    ],
)
async def test_a_scorer_author_cannot_send_it_anywhere_else(token_file: Path, url: str) -> None:
    with pytest.raises(SecretNotBound, match="AgentTokenDestinations") as refused:
        await resolve_credentials(
            ASK, None, MemorySecrets(), url=url, stage="fetch", own_token=own(token_file)
        )
    assert refused.value.stage == "fetch" and "eyJ" not in str(refused.value)


async def test_a_path_bound_destination_narrows_it(token_file: Path) -> None:
    token = own(token_file, "https://gateway.example.com/prometheus/")
    ok = "https://gateway.example.com/prometheus/api/v1/query_range"
    creds = await resolve_credentials(ASK, None, MemorySecrets(), url=ok, stage="fetch", own_token=token)
    assert "Authorization" in creds.headers
    for other in ("https://gateway.example.com/grafana/api", "https://gateway.example.com/prometheus/../x"):
        with pytest.raises(SecretNotBound):
            await resolve_credentials(ASK, None, MemorySecrets(), url=other, stage="fetch", own_token=token)


async def test_the_admin_may_name_the_scorers_that_use_it(token_file: Path) -> None:
    token = own(token_file, scorers="cpu-headroom, gpu")
    creds = await resolve_credentials(
        ASK, None, MemorySecrets(), url=PROM, stage="fetch", scorer="gpu", own_token=token
    )
    assert "Authorization" in creds.headers
    with pytest.raises(SecretNotBound, match=r"may not be used by DynamicScorer exfil.*AgentTokenScorers"):
        await resolve_credentials(
            ASK, None, MemorySecrets(), url=PROM, stage="fetch", scorer="exfil", own_token=token
        )


async def test_not_enabled_and_never_for_a_scoring_api(token_file: Path) -> None:
    with pytest.raises(SecretNotBound, match="enables it with the AddOnDeploymentConfig variable"):
        await resolve_credentials(ASK, None, MemorySecrets(), url=PROM, stage="fetch")
    # The scoring stage is never handed the token: a summary asking there is refused by name.
    with pytest.raises(SecretNotBound, match="never to a scoring API"):
        await resolve_credentials(ASK, None, MemorySecrets(), url=PROM, stage="score")


async def test_a_missing_or_bad_file_is_named_without_its_content(tmp_path: Path) -> None:
    missing = own(tmp_path / "absent")
    with pytest.raises(SecretNotFound, match="projected volume is not mounted"):
        await resolve_credentials(ASK, None, MemorySecrets(), url=PROM, stage="fetch", own_token=missing)
    for content in (b"", b"two\nlines", b"\xff\xfe", b"x" * 70_000):
        (tmp_path / "bad").write_bytes(content)
        with pytest.raises(SecretInvalid, match="does not hold one token") as bad:
            await resolve_credentials(
                ASK, None, MemorySecrets(), url=PROM, stage="fetch", own_token=own(tmp_path / "bad")
            )
        assert "lines" not in str(bad.value)


def test_the_binding_must_be_readable_and_not_empty(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no destination"):
        OwnToken(tmp_path / "t", " , ")
    with pytest.raises(ValueError, match="unreadable destination entries: '\\*evil'"):
        OwnToken(tmp_path / "t", "prom.example.com, *evil")


@pytest.mark.parametrize(
    "entry", ["prom.example.com", "prom.example.com:9091", "http://prom.example.com", "*.svc"]
)
def test_every_destination_must_be_https(tmp_path: Path, entry: str) -> None:
    """``host`` and ``host:port`` also match http://: the agent's identity would travel in clear."""
    with pytest.raises(ValueError, match="https://"):
        OwnToken(tmp_path / "t", f"https://ok.example.com {entry}")


async def test_a_source_over_plain_http_never_gets_it(token_file: Path) -> None:
    token = own(token_file, "https://thanos-querier.openshift-monitoring.svc:9091")
    url = "http://thanos-querier.openshift-monitoring.svc:9091/api/v1/query_range"
    with pytest.raises(SecretNotBound, match=r"never over plain http.*AgentTokenDestinations") as refused:
        await resolve_credentials(ASK, None, MemorySecrets(), url=url, stage="fetch", own_token=token)
    assert "eyJ" not in str(refused.value)


def test_the_wire_refuses_it_with_verification_off() -> None:
    with pytest.raises(ValueError, match="only over verified TLS"):
        EndpointAuth.model_validate({"agentServiceAccountToken": True, "insecureSkipVerify": True})
    assert EndpointAuth.model_validate({"agentServiceAccountToken": True}).agent_service_account_token


def test_the_wire_field_excludes_the_other_authorizations() -> None:
    with pytest.raises(ValueError, match="agentServiceAccountToken excludes"):
        EndpointAuth.model_validate(
            {"agentServiceAccountToken": True, "bearerTokenSecretRef": {"name": "s", "key": "k"}}
        )
    assert EndpointAuth.model_validate({}).agent_service_account_token is False
