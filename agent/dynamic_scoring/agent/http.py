"""HTTP plumbing shared by the Prometheus and scorer calls: clients, bounded reads, errors, redaction.

Three things every exchange of the agent needs live here, so that both client families behave alike
(``dynamic_scoring.agent.exchange.bounded_exchange`` puts them together into the one exchange both use):
``transport_errors`` (the whole-exchange deadline and the one map from ``httpx``/OS failures to the
agent's typed errors), ``read_limited`` (the body, inflated in bounded steps and refused past a
limit), and ``scrub``, which keeps credentials out of messages (the URL's own are named by
``dynamic_scoring.outbound.urls.url_secrets``; URLs are shown by
``dynamic_scoring.outbound.urls.redact_url``).

``httpx`` fixes TLS settings per client, while each endpoint may bring its own CA, client
certificate or ``insecureSkipVerify``.  ``ClientPool`` therefore keeps one client for the default
trust store and one per distinct TLS material (keyed by a digest of the material), and closes the
ones nobody used for a while, which is also how a rotated certificate replaces the old client.

Every client connects through ``dynamic_scoring.outbound.guarded_transport``: the host of each request is
resolved once and refused, before any connection, when an address it resolves to is one the
agent's ``AddressPolicy`` refuses (loopback, link-local, metadata, reserved ...; private networks are
allowed); ``transport_errors`` turns that into the family's ``...AddressRefused`` naming the host and
the category.  Through a proxy, see ``dynamic_scoring.agent.proxy.proxy_mounts`` for what is checked.
Unit tests may hand ``ClientPool`` a transport of their own (``httpx.MockTransport``) to run a whole
cycle without sockets; no production path passes one, so the guarded transport stays the only one.

TLS material never touches the disk when it can be avoided: a CA bundle is loaded from memory, and a
client certificate (which OpenSSL only loads from a path) goes through an anonymous in-memory file
(``memfd``) that is closed right after loading; where ``memfd`` does not exist it is a 0600 file in a
0700 temporary directory, removed right after loading.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import ssl
import tempfile
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, quote_plus

import certifi
import httpx

from dynamic_scoring.agent.errors import AgentError, SecretInvalid
from dynamic_scoring.agent.proxy import ProxySettings, proxy_mounts
from dynamic_scoring.contract.wire import escape_control
from dynamic_scoring.outbound.addresses import STRICT, AddressPolicy, metadata_header
from dynamic_scoring.outbound.guarded_transport import address_refusal, async_guarded_transport
from dynamic_scoring.outbound.inflate import InflateTooLarge, decompressor, inflate_chunk
from dynamic_scoring.outbound.transport_errors import TRANSPORT_EXCEPTIONS, FailureKind, classify
from dynamic_scoring.outbound.urls import url_secrets

# httpx logs every request line, URL with user-info and query included, at INFO; httpcore logs
# connection details at DEBUG.  Neither may reach the agent's log: URLs can carry credentials.
for _name in ("httpx", "httpcore"):
    logging.getLogger(_name).setLevel(logging.WARNING)


@dataclass(frozen=True)
class TLSMaterial:
    """TLS settings of one endpoint, as read from Secrets this cycle.

    Attributes:
        ca_pem: PEM bundle that replaces the default trust store, or ``None``.
        cert_pem: PEM client certificate (chain), or ``None``.
        key_pem: PEM private key of ``cert_pem``.
        insecure: skip server verification entirely (``insecureSkipVerify``).
        origin: where the material came from, for error messages (Secret names and keys only).
    """

    ca_pem: bytes | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    insecure: bool = False
    origin: str = field(default="", compare=False)

    @property
    def fingerprint(self) -> str:
        """A digest identifying the material; equal material shares one client."""
        digest = hashlib.sha256()
        for part in (self.ca_pem, self.cert_pem, self.key_pem):
            digest.update(b"-" if part is None else hashlib.sha256(part).digest())
        digest.update(b"insecure" if self.insecure else b"verify")
        return digest.hexdigest()

    def __repr__(self) -> str:
        return f"TLSMaterial(origin={self.origin!r}, fingerprint={self.fingerprint[:12]})"


def default_ssl_context(extra_ca_files: Sequence[Path] = ()) -> ssl.SSLContext:
    """Verification against the system store, certifi's bundle and any extra PEM files that exist.

    ``SSL_CERT_FILE`` makes OpenSSL read that file *instead of* the system bundle; upstream's
    Deployment used it to add OpenShift's service CA, which silently dropped the public CAs.  Loading
    the compiled-in system path explicitly keeps both.
    """
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.openssl_cafile, certifi.where(), *map(str, extra_ca_files)):
        if candidate and os.path.isfile(candidate):
            with contextlib.suppress(ssl.SSLError):
                ctx.load_verify_locations(cafile=candidate)
    return ctx


def _load_client_cert(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    pem = cert_pem.rstrip(b"\n") + b"\n" + key_pem
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("dynamic-scoring-client-cert", os.MFD_CLOEXEC)
        try:
            os.write(fd, pem)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="dynamic-scoring-") as tmp:  # created 0700
        path = Path(tmp) / "client.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, pem)
        finally:
            os.close(fd)
        ctx.load_cert_chain(str(path))


def build_ssl_context(tls: TLSMaterial, extra_ca_files: Sequence[Path] = ()) -> ssl.SSLContext:
    """The client-side SSL context for ``tls``; verification stays on unless ``insecure`` is set.

    Raises:
        SecretInvalid: the CA bundle or the client certificate cannot be loaded.
    """
    if tls.ca_pem is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies and checks host names by default
        if not tls.ca_pem.isascii():
            raise SecretInvalid(f"CA bundle from {tls.origin or 'secret'} is not PEM text (binary data)")
        try:
            ctx.load_verify_locations(cadata=tls.ca_pem.decode("ascii"))
        except (ssl.SSLError, ValueError, TypeError) as exc:
            raise SecretInvalid(f"CA bundle from {tls.origin or 'secret'} cannot be loaded: {exc}") from exc
    else:
        ctx = default_ssl_context(extra_ca_files)
    if tls.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.cert_pem is not None and tls.key_pem is not None:
        try:
            _load_client_cert(ctx, tls.cert_pem, tls.key_pem)
        except (ssl.SSLError, OSError) as exc:
            raise SecretInvalid(
                f"client certificate from {tls.origin or 'secret'} cannot be loaded: {exc}"
            ) from exc
    return ctx


class ClientPool:
    """One ``httpx.AsyncClient`` per TLS identity, created on demand and closed when idle.

    Args:
        extra_ca_files: added to the default trust store (see ``default_ssl_context``).
        idle_seconds: a client for custom TLS material unused this long is closed.
        user_agent: ``User-Agent`` of every request.
        clock: monotonic seconds, injectable for tests.
        proxies: outbound proxies (``dynamic_scoring.agent.proxy``).  Their CA verifies the connection to an
            ``https://`` proxy; it joins the destinations' trust only with ``ca_for_destinations``.
        policy: the addresses requests may go to (``AgentSettings.address_policy``).
        transport: for tests only: the transport every client uses instead of the guarded one and
            the proxies (an ``httpx.MockTransport`` answering as Prometheus and a scorer would), so
            that a whole ``ScoringCycle`` runs without sockets.  It bypasses the address policy,
            the proxies and the endpoints' TLS material, which is why production code never passes
            it; ``None``, the default, keeps the guarded transport.
    """

    def __init__(
        self,
        *,
        extra_ca_files: Sequence[Path] = (),
        idle_seconds: float = 600.0,
        user_agent: str = "dynamic-scoring-agent",
        clock: Callable[[], float] = time.monotonic,
        proxies: ProxySettings | None = None,
        policy: AddressPolicy = STRICT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._transport = transport
        self._proxies = proxies or ProxySettings()
        self._extra_ca_files = (*extra_ca_files, *self._proxies.destination_ca_files)
        self._proxy_verify: ssl.SSLContext | None = None
        if self._proxies.ca_files:  # the one context that trusts the proxy's CA without the opt-in
            self._proxy_verify = default_ssl_context((*extra_ca_files, *self._proxies.ca_files))
        self._policy = policy
        self._idle_seconds = idle_seconds
        self._user_agent = user_agent
        self._clock = clock
        self._default: httpx.AsyncClient | None = None
        self._custom: dict[str, tuple[httpx.AsyncClient, float]] = {}
        self._closing: list[httpx.AsyncClient] = []

    def _new_client(self, verify: ssl.SSLContext) -> httpx.AsyncClient:
        # trust_env=False: no .netrc credentials sneak into scorer calls and the trust store is
        # exactly the one built here; proxies come only from the explicit settings
        # (dynamic_scoring.agent.proxy).
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=16, keepalive_expiry=90)
        transport: httpx.AsyncBaseTransport
        mounts: dict[str, httpx.AsyncBaseTransport | None]
        if self._transport is not None:  # a test's transport: it answers every request, proxied or not
            transport, mounts = self._transport, {}
        else:
            transport = async_guarded_transport(verify=verify, limits=limits, policy=self._policy)
            mounts = proxy_mounts(self._proxies, verify, limits, self._policy, self._proxy_verify)
        return httpx.AsyncClient(
            verify=verify,
            trust_env=False,
            follow_redirects=False,
            # Only what read_limited can inflate with a bound on the output.
            headers={"User-Agent": self._user_agent, "Accept-Encoding": "gzip, deflate"},
            transport=transport,
            mounts=mounts,
        )

    def client_for(self, tls: TLSMaterial | None) -> httpx.AsyncClient:
        """The client to use for an endpoint with ``tls`` (``None``: default verification).

        Raises:
            SecretInvalid: the TLS material cannot be loaded.
        """
        now = self._clock()
        self._evict_idle(now)
        if tls is None or tls == TLSMaterial():
            if self._default is None:
                self._default = self._new_client(default_ssl_context(self._extra_ca_files))
            return self._default
        key = tls.fingerprint
        entry = self._custom.get(key)
        client = entry[0] if entry else self._new_client(build_ssl_context(tls, self._extra_ca_files))
        self._custom[key] = (client, now)
        return client

    def _evict_idle(self, now: float) -> None:
        for key, (client, used) in list(self._custom.items()):
            if now - used > self._idle_seconds:
                del self._custom[key]
                self._closing.append(client)

    async def collect(self) -> None:
        """Close clients evicted as idle (called between cycles, where awaiting is possible)."""
        closing, self._closing = self._closing, []
        for client in closing:
            await client.aclose()

    async def aclose(self) -> None:
        """Close every client."""
        clients = [c for c, _ in self._custom.values()] + self._closing
        if self._default is not None:
            clients.append(self._default)
        self._custom.clear()
        self._closing = []
        self._default = None
        for client in clients:
            await client.aclose()


class BodyTooLarge(Exception):  # noqa: N818 - an outcome, mapped to each family's "too large" error
    """The (decoded) body would exceed the limit; reading stopped there."""


_INFLATE_STEP = 1024 * 1024
"""At most this much decompressed output per step, with a yield to the event loop in between."""


def _inflater(content_encoding: str) -> zlib._Decompress | None:
    """A decompressor for the response's ``Content-Encoding``; ``None`` for identity.

    Raises:
        httpx.DecodingError: an encoding the agent did not ask for, or more than one.
    """
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return None
    if len(codings) > 1:
        raise httpx.DecodingError(f"stacked content encodings are not accepted ({len(codings)})")
    try:
        return decompressor(codings[0])
    except ValueError:
        raise httpx.DecodingError(
            "unsupported content encoding (the agent asks for gzip or deflate only)"
        ) from None


async def read_limited(response: httpx.Response, limit: int) -> bytearray:
    """Read and decode the body into one buffer, failing as soon as it would exceed ``limit`` bytes.

    The limit applies to the *decoded* size while it is being decoded: compressed input is inflated
    in steps of at most 1 MiB of output, so a small gzip body that inflates to gigabytes costs at
    most ``limit`` plus one step of memory before it is refused (``httpx``'s own decoder inflates
    each network chunk completely, which is up to a thousand times the chunk).  Between steps the
    event loop runs, so a large body never stalls other scorers.  The buffer is a ``bytearray``
    grown in place, held once; a declared ``Content-Length`` above the limit fails before reading.

    Raises:
        BodyTooLarge: the decoded body would exceed ``limit``.
        httpx.DecodingError: an unsupported or corrupt content encoding.
    """
    encoding = response.headers.get("content-encoding", "")
    inflater = _inflater(encoding)
    declared = response.headers.get("content-length")
    if declared is not None and inflater is None:
        with contextlib.suppress(ValueError):
            if int(declared) > limit:
                raise BodyTooLarge(f"declared length {int(declared)} exceeds {limit}")
    body = bytearray()
    async for chunk in response.aiter_raw():
        if inflater is None:
            if len(body) + len(chunk) > limit:
                raise BodyTooLarge(f"more than {limit} bytes")
            body += chunk
            continue
        try:
            for out in inflate_chunk(inflater, chunk, limit - len(body), step=_INFLATE_STEP):
                body += out
                if len(out) == _INFLATE_STEP:  # more of this chunk may follow: let others run
                    await asyncio.sleep(0)
        except zlib.error as exc:
            raise httpx.DecodingError(f"corrupt {encoding} body: {exc}") from exc
        except InflateTooLarge:
            raise BodyTooLarge(f"more than {limit} bytes after decompression") from None
    return body


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret replaced by ``<redacted>``.

    An echo need not be verbatim: servers change case (``BEARER ABC``), percent-encode (``a%2Fb``) or
    form-encode what they were sent, so each secret is matched case-insensitively in all three forms.
    Secrets shorter than 4 characters are left alone, as scrubbing them would destroy the message.
    """
    forms: set[str] = set()
    for secret in secrets:
        if len(secret) < 4:
            continue
        forms.update((secret, quote(secret, safe=""), quote_plus(secret, safe="")))
    if not forms:
        return text
    pattern = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
    return re.sub(pattern, "<redacted>", text, flags=re.IGNORECASE)


def header_secrets(headers: Mapping[str, str] | None) -> list[str]:
    """Every header value sent, plus each value without its scheme word (the bare token)."""
    sent = [v for v in (headers or {}).values() if v]
    return sent + [v.split(" ", 1)[1] for v in sent if " " in v]


def printable_excerpt(data: bytes | bytearray, limit: int = 200, scrub_values: Iterable[str] = ()) -> str:
    """The start of a body as a one-line printable string, for error messages.

    ``scrub_values`` lists values that must not appear (the credentials just sent: a server that
    echoes request headers in its error page must not get them into a condition message).
    """
    # Decode well past the limit so that a credential straddling it is scrubbed whole, not half-kept.
    text = scrub(bytes(data[: limit * 4 + 16384]).decode("utf-8", "replace"), scrub_values)
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """The pause a ``Retry-After`` header asks for (delta-seconds or an HTTP date), or ``None``."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(min(int(value), 86400))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class AddressRefusedFactory(Protocol):
    """Builds a family's ``AddressRefused`` error (``PrometheusAddressRefused``, ``ScorerAddressRefused``)."""

    def __call__(self, message: str, *, host: str, category: str) -> AgentError:
        """The error for a refused ``host`` of ``category``."""
        ...


@dataclass(frozen=True)
class ErrorFamily:
    """How one client family (Prometheus, scorer) names its failures; see ``transport_errors``."""

    timeout: Callable[[str], AgentError]
    unavailable: Callable[[str], AgentError]
    invalid_response: Callable[[str], AgentError]
    invalid_request: Callable[[str], AgentError]
    address_refused: AddressRefusedFactory


def status_phrase(status: int) -> str:
    """A fixed phrase for a non-2xx status, used instead of anything the peer sent in its body.

    The body of an error answer is chosen by whatever listens at the URL, which a scorer's author
    picks; echoing it into a condition or a status would let that author read internal services.
    """
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "server error" if status >= 500 else "client error" if status >= 400 else "unexpected status"


def refuse_metadata_headers(family: ErrorFamily, headers: Mapping[str, str] | None, what: str) -> None:
    """Refuse a request that carries a cloud metadata-service header (``Metadata-Flavor`` ...).

    No Prometheus or scorer needs one; a metadata service does, so such a header in a summary is an
    attempt to fetch the node's credentials.  Checked on every call, whatever the address policy.

    Raises:
        AgentError: ``family``'s ``invalid_request`` error naming the header.
    """
    found = metadata_header(headers or {})
    if found is not None:
        raise family.invalid_request(
            f"request to {what} refused: header {escape_control(found)!r} is a cloud metadata-service "
            "header, which the agent never sends"
        )


@contextlib.asynccontextmanager
async def transport_errors(
    family: ErrorFamily, *, what: str, seconds: float, url: str = ""
) -> AsyncIterator[None]:
    """Bound a whole exchange by ``seconds`` and map every transport failure to ``family``'s errors.

    This is where ``httpx``, ``h11``, ``ssl`` and OS exceptions become the agent's typed errors, for
    the request *and* for streaming the body; which kind of failure it was is decided by
    ``dynamic_scoring.outbound.transport_errors.classify``, the map the hub's probe uses too.  It is also
    where the deadline of one attempt is enforced: ``asyncio.timeout`` covers connecting, sending,
    the status line and every byte of the body, so a peer that drips one byte a second is cut off
    at the deadline instead of holding a concurrency slot (``httpx``'s timeouts are per socket
    operation and never fire while bytes keep trickling).  Messages name the peer by ``what`` and
    never carry the URL's credentials: the exception text is scrubbed of the URL's user-info and
    query values.
    """

    def text(exc: BaseException) -> str:
        detail = escape_control(scrub(str(exc) or type(exc).__name__, url_secrets(url)))
        return detail if len(detail) <= 300 else detail[:299] + "…"

    try:
        async with asyncio.timeout(seconds):
            yield
    except TRANSPORT_EXCEPTIONS as exc:
        refusal = address_refusal(exc)
        if refusal is not None:
            raise family.address_refused(
                f"{what} refused: {escape_control(refusal.host)} is a {refusal.category} address, which "
                "the agent does not connect to (allow a network with the AgentAllowCIDRs variable)",
                host=refusal.host,
                category=refusal.category,
            ) from exc
        failure = classify(exc)
        if failure.kind is FailureKind.TIMEOUT:
            raise family.timeout(f"{what} did not answer within {seconds:.3g}s") from exc
        if failure.kind is FailureKind.INVALID_REQUEST:
            raise family.invalid_request(f"request to {what} cannot be sent: {text(exc)}") from exc
        if failure.kind is FailureKind.UNDECODABLE:
            raise family.invalid_response(f"{what} sent an undecodable body: {text(exc)}") from exc
        if failure.kind is FailureKind.TLS:
            raise family.unavailable(f"{what} unreachable ({failure.summary}): {text(exc)}") from exc
        raise family.unavailable(f"{what} unreachable: {text(exc)}") from exc


__all__ = [
    "AddressRefusedFactory",
    "BodyTooLarge",
    "ClientPool",
    "ErrorFamily",
    "TLSMaterial",
    "build_ssl_context",
    "default_ssl_context",
    "escape_control",
    "header_secrets",
    "printable_excerpt",
    "read_limited",
    "refuse_metadata_headers",
    "retry_after_seconds",
    "scrub",
    "status_phrase",
    "transport_errors",
]
