from __future__ import annotations

import pytest

from dynamic_scoring.agent.auth import resolve_credentials
from dynamic_scoring.agent.errors import SecretInvalid, SecretNotBound, SecretNotFound
from dynamic_scoring.agent.http import (
    TLSMaterial,
    build_ssl_context,
    printable_excerpt,
    retry_after_seconds,
    scrub,
)
from dynamic_scoring.agent.memory import MemorySecrets
from dynamic_scoring.contract.wire import EndpointAuth
from dynamic_scoring.outbound.secret_binding import ALLOWED_HOSTS_ANNOTATION
from dynamic_scoring.outbound.urls import redact_url, url_secrets

URL = "http://scorer.example.com:8000/scoring"
HOST = "scorer.example.com:8000"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_legacy_bearer_is_trimmed_and_hidden_from_repr() -> None:
    secrets = MemorySecrets({"s": {"token": b"  abc.def\n"}})
    secrets.bind("s", HOST)
    creds = await resolve_credentials(None, ("s", "token"), secrets, url=URL, stage="fetch")
    assert creds.headers == {"Authorization": "Bearer abc.def"}
    assert "abc.def" not in repr(creds)


async def test_basic_replaces_the_legacy_bearer_and_headers_come_last() -> None:
    secrets = MemorySecrets({"b": {"username": b"u\n", "password": b"p w\n"}, "h": {"v": b"tenant\n"}})
    secrets.bind("b", HOST)
    secrets.bind("h", HOST)
    auth = EndpointAuth.model_validate(
        {
            "basicAuthSecretRef": {"name": "b"},
            "headers": [{"name": "X-Scope-OrgID", "secretKeyRef": {"name": "h", "key": "v"}}],
        }
    )
    creds = await resolve_credentials(auth, ("legacy", "t"), secrets, url=URL, stage="score")
    assert creds.headers == {"Authorization": "Basic dTpwIHc=", "X-Scope-OrgID": "tenant"}
    assert creds.tls is None


async def test_errors_carry_the_stage_and_name_the_secret() -> None:
    with pytest.raises(SecretNotFound) as missing:
        await resolve_credentials(None, ("nope", "t"), MemorySecrets(namespace="ns"), url=URL, stage="score")
    assert missing.value.stage == "score" and "ns/nope" in str(missing.value)
    bad = MemorySecrets({"s": {"t": b"two\nlines"}})
    bad.bind("s", HOST)
    with pytest.raises(SecretInvalid, match="not allowed in an HTTP header") as invalid:
        await resolve_credentials(None, ("s", "t"), bad, url=URL, stage="fetch")
    assert "two" not in str(invalid.value)


async def test_tls_material_is_only_built_when_asked_for() -> None:
    secrets = MemorySecrets({"ca": {"ca.crt": b"PEM"}})
    auth = EndpointAuth.model_validate(
        {"caSecretRef": {"name": "ca", "key": "ca.crt"}, "insecureSkipVerify": True}
    )
    # A CA bundle is read, never sent: it needs no binding.
    creds = await resolve_credentials(auth, None, secrets, url=URL, stage="fetch")
    assert creds.tls == TLSMaterial(ca_pem=b"PEM", insecure=True)
    assert "PEM" not in repr(creds.tls)


AUTHS = {
    "legacy bearer": (None, ("s", "token")),
    "bearer": (EndpointAuth.model_validate({"bearerTokenSecretRef": {"name": "s", "key": "token"}}), None),
    "basic": (EndpointAuth.model_validate({"basicAuthSecretRef": {"name": "s"}}), None),
    "header": (
        EndpointAuth.model_validate(
            {"headers": [{"name": "X-Key", "secretKeyRef": {"name": "s", "key": "token"}}]}
        ),
        None,
    ),
    "client certificate": (EndpointAuth.model_validate({"clientCertSecretRef": {"name": "s"}}), None),
}


def _secret(annotation: str | None) -> MemorySecrets:
    values = {"token": b"hunter2", "username": b"u", "password": b"hunter2", "tls.crt": b"C", "tls.key": b"K"}
    secrets = MemorySecrets({"s": values}, namespace="agents")
    if annotation is not None:
        secrets.bind("s", annotation)
    return secrets


@pytest.mark.parametrize("kind", sorted(AUTHS))
@pytest.mark.parametrize("annotation", [None, "", "evil.example.com:8000", "scorer.example.com"])
async def test_every_sent_secret_needs_a_binding_to_the_request_host(
    kind: str, annotation: str | None
) -> None:
    auth, legacy = AUTHS[kind]
    with pytest.raises(SecretNotBound) as refused:
        await resolve_credentials(auth, legacy, _secret(annotation), url=URL, stage="score")
    message = str(refused.value)
    assert refused.value.stage == "score" and refused.value.reason == "SecretNotBound"
    assert "secret agents/s" in message and HOST in message and ALLOWED_HOSTS_ANNOTATION in message
    assert "hunter2" not in message


@pytest.mark.parametrize("kind", sorted(AUTHS))
async def test_a_bound_secret_is_used(kind: str) -> None:
    auth, legacy = AUTHS[kind]
    creds = await resolve_credentials(
        auth, legacy, _secret(f"other.example.com, {HOST}"), url=URL, stage="fetch"
    )
    assert creds.headers or creds.tls is not None


async def test_the_binding_is_checked_against_the_url_not_the_secret_name() -> None:
    secrets = _secret("prometheus.monitoring.svc:9090")
    bearer = EndpointAuth.model_validate({"bearerTokenSecretRef": {"name": "s", "key": "token"}})
    ok = await resolve_credentials(
        bearer, None, secrets, url="http://prometheus.monitoring.svc:9090/api", stage="fetch"
    )
    assert ok.headers == {"Authorization": "Bearer hunter2"}
    with pytest.raises(SecretNotBound):
        await resolve_credentials(bearer, None, secrets, url=URL, stage="score")


def test_redact_url_drops_user_info_and_every_query_value() -> None:
    assert redact_url("https://user:pw@host:9090/api?x=1") == "https://host:9090/api?x=<redacted>"
    assert (
        redact_url("http://host/p?api_key=abc&flag&b=")
        == "http://host/p?api_key=<redacted>&flag&b=<redacted>"
    )
    assert redact_url("http://[::1]:80/p#frag") == "http://[::1]:80/p"
    assert redact_url("http://host/p") == "http://host/p"
    assert redact_url("http://host:99999/p") == "<invalid URL>"


def test_url_secrets_cover_password_user_and_decoded_query_values() -> None:
    found = url_secrets("http://robot:pw@h/p?k=a%2Fb+c")
    assert {"pw", "robot", "a%2Fb+c", "a/b c"} <= set(found)


def test_scrub_catches_case_changed_and_percent_encoded_echoes() -> None:
    token = "Tok/en+Secret"
    text = f"got BEARER {token.upper()} and tok%2fen%2bsecret and {token.swapcase()} and TOK%2FEN%2BSECRET"
    cleaned = scrub(text, [token])
    assert "secret" not in cleaned.lower(), cleaned
    assert cleaned.count("<redacted>") == 4
    assert scrub("abc abc", ["abc"]) == "abc abc"  # too short to scrub without destroying the text


def test_excerpt_is_one_printable_line_without_the_secret() -> None:
    assert (
        printable_excerpt(b"line1\n\x1b[31mSECRET-value\r\n", scrub_values=["secret-value"])
        == "line1 [31m<redacted>"
    )


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("2", 2.0), (" 120 ", 120.0), ("99999999", 86400.0), ("soon", None), (None, None), ("-3", None)],
)
def test_retry_after_delta_seconds(header: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(header) == seconds


def test_retry_after_http_date() -> None:
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0


@pytest.mark.parametrize("value", [b"u\nx", b"p\rq"])
async def test_a_basic_auth_part_with_a_line_break_inside_is_rejected(value: bytes) -> None:
    secrets = MemorySecrets({"b": {"username": b"user", "password": b"pass"}})
    key = "username" if value.startswith(b"u") else "password"
    secrets.set("b", key, value + b"\n", allowed_hosts=HOST)
    auth = EndpointAuth.model_validate({"basicAuthSecretRef": {"name": "b"}})
    with pytest.raises(SecretInvalid, match=f"key '{key}' of secret 'b' contains a line break") as exc:
        await resolve_credentials(auth, None, secrets, url=URL, stage="score")
    assert value.decode()[:1] + value.decode()[2:] not in str(exc.value)


def test_a_binary_ca_bundle_is_a_secret_problem_not_a_crash() -> None:
    with pytest.raises(SecretInvalid, match="not PEM text"):
        build_ssl_context(TLSMaterial(ca_pem=bytes(range(256)), origin="CA ca/ca.crt"))
    with pytest.raises(SecretInvalid, match="cannot be loaded"):
        build_ssl_context(TLSMaterial(ca_pem=b"not a certificate", origin="CA ca/ca.crt"))


@pytest.mark.parametrize(
    ("url", "sent"),
    [
        ("https://ingress.example.com/team-a/api/v1/query_range", True),
        ("https://ingress.example.com/team-a/scoring?next=/team-b", True),
        ("https://ingress.example.com/team-b/api/v1/query_range", False),
        ("https://ingress.example.com/team-a/%2e%2e/team-b/scoring", False),
        ("https://ingress.example.com/team-ab/scoring", False),
    ],
)
async def test_a_path_bound_secret_is_checked_against_the_request_path(url: str, sent: bool) -> None:
    """On a shared ingress the path picks the backend, so the full URL, not its origin, is checked."""
    secrets = MemorySecrets({"s": {"token": b"t0ken"}}, namespace="agents")
    secrets.bind("s", "ingress.example.com/team-a")
    if sent:
        creds = await resolve_credentials(None, ("s", "token"), secrets, url=url, stage="fetch")
        assert creds.headers == {"Authorization": "Bearer t0ken"}
        return
    with pytest.raises(SecretNotBound, match=r"not bound to this path on ingress\.example\.com"):
        await resolve_credentials(None, ("s", "token"), secrets, url=url, stage="fetch")
