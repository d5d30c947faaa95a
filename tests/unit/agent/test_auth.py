from __future__ import annotations

import pytest

from agent.auth import resolve_credentials
from agent.errors import SecretInvalid, SecretNotFound
from agent.http import TLSMaterial, redact_url
from agent.memory import MemorySecrets
from dynamic_scoring.wire import EndpointAuth

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_legacy_bearer_is_trimmed_and_hidden_from_repr() -> None:
    secrets = MemorySecrets({"s": {"token": b"  abc.def\n"}})
    creds = await resolve_credentials(None, ("s", "token"), secrets, stage="fetch")
    assert creds.headers == {"Authorization": "Bearer abc.def"}
    assert "abc.def" not in repr(creds)


async def test_basic_replaces_the_legacy_bearer_and_headers_come_last() -> None:
    secrets = MemorySecrets({"b": {"username": b"u\n", "password": b"p w\n"}, "h": {"v": b"tenant\n"}})
    auth = EndpointAuth.model_validate(
        {
            "basicAuthSecretRef": {"name": "b"},
            "headers": [{"name": "X-Scope-OrgID", "secretKeyRef": {"name": "h", "key": "v"}}],
        }
    )
    creds = await resolve_credentials(auth, ("legacy", "t"), secrets, stage="score")
    assert creds.headers == {"Authorization": "Basic dTpwIHc=", "X-Scope-OrgID": "tenant"}
    assert creds.tls is None


async def test_errors_carry_the_stage_and_name_the_secret() -> None:
    with pytest.raises(SecretNotFound) as missing:
        await resolve_credentials(None, ("nope", "t"), MemorySecrets(namespace="ns"), stage="score")
    assert missing.value.stage == "score" and "ns/nope" in str(missing.value)
    bad = MemorySecrets({"s": {"t": b"two\nlines"}})
    with pytest.raises(SecretInvalid, match="not allowed in an HTTP header") as invalid:
        await resolve_credentials(None, ("s", "t"), bad, stage="fetch")
    assert "two" not in str(invalid.value)


async def test_tls_material_is_only_built_when_asked_for() -> None:
    secrets = MemorySecrets({"ca": {"ca.crt": b"PEM"}})
    auth = EndpointAuth.model_validate(
        {"caSecretRef": {"name": "ca", "key": "ca.crt"}, "insecureSkipVerify": True}
    )
    creds = await resolve_credentials(auth, None, secrets, stage="fetch")
    assert creds.tls == TLSMaterial(ca_pem=b"PEM", insecure=True)
    assert "PEM" not in repr(creds.tls)


def test_redact_url() -> None:
    assert redact_url("https://user:pw@host:9090/api?x=1") == "https://host:9090/api?x=1"
    assert redact_url("http://host/p") == "http://host/p"
