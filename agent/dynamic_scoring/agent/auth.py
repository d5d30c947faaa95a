"""Credentials for one endpoint, read from Secrets at the start of every cycle that uses them.

Reading every cycle (through the ``SecretReader`` port, which may cache) is what makes a rotated
token apply without a restart, and what makes removed auth really stop being sent (upstream kept
sending the old token).  Values are trimmed as their kind allows: a bearer token loses all
surrounding whitespace (the classic trailing newline of ``echo token > file``), basic-auth parts
only a trailing line break, header values their surrounding whitespace.

A Secret's value goes only to a destination its owner bound it to: the
``dynamic-scoring.open-cluster-management.io/allowed-hosts`` annotation on the Secret must list the
host (and port, and the path prefix when the entry has one) of the URL the request is for
(``dynamic_scoring.outbound.secret_binding``), so ``url`` is the full request URL, never only its origin.
The person who writes a DynamicScorer chooses both the Secret's name and the URL, so without this
check anyone who may write DynamicScorers could have every agent send any Secret it can read to a
server of their choosing.  An unbound Secret raises ``SecretNotBound`` before any request is made:
the request is not sent at all, with or without the credential.  A CA bundle (``caSecretRef``) is
only read, never sent, and needs no binding.

Credentials never appear in a message, a log line or a ``repr``: errors name the Secret and key.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from dynamic_scoring.agent.errors import AgentError, AuthError, SecretInvalid, SecretNotBound, Stage
from dynamic_scoring.agent.http import TLSMaterial
from dynamic_scoring.agent.own_token import OwnToken, not_enabled
from dynamic_scoring.agent.ports import SecretContents, SecretReader
from dynamic_scoring.contract.wire import EndpointAuth, SecretKeyRef
from dynamic_scoring.outbound.secret_binding import binding_refusal


@dataclass(frozen=True)
class EndpointCredentials:
    """Headers and TLS material for one request to one endpoint."""

    headers: dict[str, str]
    tls: TLSMaterial | None

    def __repr__(self) -> str:
        return f"EndpointCredentials(headers={sorted(self.headers)}, tls={self.tls!r})"


def _has_bad_header_chars(value: str) -> bool:
    # Visible ASCII, space and tab only: anything else would make the HTTP library raise an error
    # whose text quotes part of the value.
    return any((ord(ch) < 0x20 and ch != "\t") or ord(ch) >= 0x7F for ch in value)


class _Secrets:
    """The Secrets of one endpoint's credentials, each read once and checked against the URL."""

    def __init__(self, reader: SecretReader, url: str, stage: Stage, scorer: str) -> None:
        self._reader = reader
        self._url = url
        self._stage = stage
        self._scorer = scorer
        self._seen: dict[str, SecretContents] = {}

    async def contents(self, name: str) -> SecretContents:
        secret = self._seen.get(name)
        if secret is not None:
            return secret
        try:
            secret = await self._reader.get(name)
        except AgentError as exc:
            if exc.stage is None:
                exc.stage = self._stage
            raise
        except Exception as exc:  # an implementation bug or an unexpected client error
            raise AuthError(
                f"reading secret {name!r} failed ({type(exc).__name__})", stage=self._stage
            ) from exc
        self._seen[name] = secret
        return secret

    async def raw(self, name: str, key: str, *, sent: bool = True) -> bytes:
        """The value of ``key``; when it is ``sent`` to the URL, only if the Secret is bound to it."""
        secret = await self.contents(name)
        if sent and not secret.operator_supplied:
            refusal = binding_refusal(
                secret.annotations, self._url, secret=name, namespace=secret.namespace, scorer=self._scorer
            )
            if refusal is not None:
                raise SecretNotBound(refusal, stage=self._stage)
        try:
            return secret.value(key)
        except AgentError as exc:
            exc.stage = self._stage
            raise

    async def text(self, ref: SecretKeyRef, what: str) -> str:
        raw = await self.raw(ref.name, ref.key)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SecretInvalid(
                f"{what} in key {ref.key!r} of secret {ref.name!r} is not UTF-8 text", stage=self._stage
            ) from exc


def _checked(value: str, *, name: str, key: str, what: str, stage: Stage) -> str:
    if not value:
        raise SecretInvalid(f"{what} in key {key!r} of secret {name!r} is empty", stage=stage)
    if _has_bad_header_chars(value):
        raise SecretInvalid(
            f"{what} in key {key!r} of secret {name!r} contains characters not allowed in an HTTP header",
            stage=stage,
        )
    return value


async def resolve_credentials(
    auth: EndpointAuth | None,
    legacy_secret: tuple[str, str] | None,
    secrets: SecretReader,
    *,
    url: str,
    stage: Stage,
    scorer: str = "",
    own_token: OwnToken | None = None,
) -> EndpointCredentials:
    """Read what the endpoint's auth settings reference and turn it into headers and TLS material.

    Call it before sending anything to ``url``: every Secret whose value would go there (bearer,
    basic, header and client-certificate Secrets) must be bound to the URL's host and port, and to
    its path when the binding names a path prefix.

    Args:
        auth: the extension ``sourceAuth``/``scoringAuth`` of the summary, if any.
        legacy_secret: upstream's ``*EndpointAuthName``/``*EndpointAuthKey`` pair (a bearer token),
            or ``None`` when either is empty.  Ignored when ``auth`` sets a bearer or basic secret.
        secrets: where Secrets are read from.
        url: the URL the request goes to (not a proxy's): the destination every Secret is checked
            against.
        scorer: the DynamicScorer's name (the summary's ``name``), checked against a Secret's
            optional allowed-scorers annotation.
        stage: the cycle stage these credentials are for, carried by any error.
        own_token: the agent's own ServiceAccount token and its admin's binding, when the admin
            enabled it for this kind of endpoint (only sources); None refuses a summary that asks.

    Raises:
        SecretNotFound: a referenced Secret or key does not exist.
        SecretNotBound: a Secret whose value would be sent is not bound to ``url``'s host, or the
            agent's own token is asked for where its admin did not allow it.
        SecretInvalid: a value cannot be used.
        AuthError: the Secret could not be read for another reason.
    """
    read = _Secrets(secrets, url, stage, scorer)
    headers: dict[str, str] = {}
    bearer_ref: SecretKeyRef | None = None
    if auth is not None and auth.agent_service_account_token:
        # Replaces the upstream token like bearerTokenSecretRef does; the binding is the admin's.
        if own_token is None:
            raise not_enabled(stage)
        headers["Authorization"] = f"Bearer {own_token.bearer(url, scorer=scorer, stage=stage)}"
    elif auth is not None and auth.bearer_token_secret_ref is not None:
        bearer_ref = auth.bearer_token_secret_ref
    elif legacy_secret is not None and (auth is None or auth.basic_auth_secret_ref is None):
        bearer_ref = SecretKeyRef(name=legacy_secret[0], key=legacy_secret[1])
    if bearer_ref is not None:
        token = (await read.text(bearer_ref, "bearer token")).strip()
        token = _checked(token, name=bearer_ref.name, key=bearer_ref.key, what="bearer token", stage=stage)
        headers["Authorization"] = f"Bearer {token}"
    if auth is None:
        return EndpointCredentials(headers, None)

    basic = auth.basic_auth_secret_ref
    if basic is not None:
        user_ref = SecretKeyRef(name=basic.name, key=basic.username_key)
        pass_ref = SecretKeyRef(name=basic.name, key=basic.password_key)
        user = (await read.text(user_ref, "username")).rstrip("\r\n")
        password = (await read.text(pass_ref, "password")).rstrip("\r\n")
        if not user:  # other characters are fine: the pair is base64-encoded
            raise SecretInvalid(
                f"username in key {basic.username_key!r} of secret {basic.name!r} is empty", stage=stage
            )
        if ":" in user:
            raise SecretInvalid(
                f"username in key {basic.username_key!r} of secret {basic.name!r} contains ':'", stage=stage
            )
        for part, key in ((user, basic.username_key), (password, basic.password_key)):
            # A line break inside (not the trailing one, already gone) is a pasting accident: two
            # values in one key.  Sending it base64-encoded would only fail at the server, unexplained.
            if "\r" in part or "\n" in part:
                raise SecretInvalid(
                    f"value in key {key!r} of secret {basic.name!r} contains a line break", stage=stage
                )
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {token}"

    for spec in auth.headers or ():
        if spec.secret_key_ref is not None:
            ref = spec.secret_key_ref
            value = (await read.text(ref, f"header {spec.name}")).strip()
            headers[spec.name] = _checked(
                value, name=ref.name, key=ref.key, what=f"header {spec.name}", stage=stage
            )
        else:
            headers[spec.name] = spec.value or ""

    ca_pem = cert_pem = key_pem = None
    origin: list[str] = []
    if auth.ca_secret_ref is not None:
        ref = auth.ca_secret_ref
        ca_pem = await read.raw(ref.name, ref.key, sent=False)
        origin.append(f"CA {ref.name}/{ref.key}")
    if auth.client_cert_secret_ref is not None:
        cc = auth.client_cert_secret_ref
        # The key never leaves, but it proves the agent's identity to whoever receives the
        # handshake: it is bound like any other credential.
        cert_pem = await read.raw(cc.name, cc.cert_key)
        key_pem = await read.raw(cc.name, cc.key_key)
        origin.append(f"client certificate {cc.name}/{cc.cert_key},{cc.key_key}")
    tls = None
    if ca_pem is not None or cert_pem is not None or auth.insecure_skip_verify:
        tls = TLSMaterial(ca_pem, cert_pem, key_pem, auth.insecure_skip_verify, origin="; ".join(origin))
    return EndpointCredentials(headers, tls)


__all__ = ["EndpointCredentials", "resolve_credentials"]
