"""HTTP plumbing shared by the Prometheus and scorer calls: clients per TLS identity, bounded reads.

``httpx`` fixes TLS settings per client, while each endpoint may bring its own CA, client
certificate or ``insecureSkipVerify``.  ``ClientPool`` therefore keeps one client for the default
trust store and one per distinct TLS material (keyed by a digest of the material), and closes the
ones nobody used for a while, which is also how a rotated certificate replaces the old client.

TLS material never touches the disk when it can be avoided: a CA bundle is loaded from memory, and a
client certificate (which OpenSSL only loads from a path) goes through an anonymous in-memory file
(``memfd``) that is closed right after loading; where ``memfd`` does not exist it is a 0600 file in a
0700 temporary directory, removed right after loading.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import certifi
import httpx

from agent.errors import SecretInvalid


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
        try:
            ctx.load_verify_locations(cadata=tls.ca_pem.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError) as exc:
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
    """

    def __init__(
        self,
        *,
        extra_ca_files: Sequence[Path] = (),
        idle_seconds: float = 600.0,
        user_agent: str = "dynamic-scoring-agent",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._extra_ca_files = tuple(extra_ca_files)
        self._idle_seconds = idle_seconds
        self._user_agent = user_agent
        self._clock = clock
        self._default: httpx.AsyncClient | None = None
        self._custom: dict[str, tuple[httpx.AsyncClient, float]] = {}
        self._closing: list[httpx.AsyncClient] = []

    def _new_client(self, verify: ssl.SSLContext) -> httpx.AsyncClient:
        # trust_env=False: no .netrc credentials or proxy variables sneak into scorer calls, and the
        # trust store is exactly the one built here.
        return httpx.AsyncClient(
            verify=verify,
            trust_env=False,
            follow_redirects=False,
            headers={"User-Agent": self._user_agent},
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16, keepalive_expiry=90),
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


async def read_limited(response: httpx.Response, limit: int) -> bytearray | None:
    """Read the (decoded) body into one buffer; ``None`` as soon as it would exceed ``limit`` bytes.

    The buffer is a ``bytearray`` grown in place, so a large body is held once, not as a list of
    chunks plus a joined copy; a declared ``Content-Length`` above the limit fails before reading.
    """
    declared = response.headers.get("content-length")
    if declared is not None and "content-encoding" not in response.headers:
        with contextlib.suppress(ValueError):
            if int(declared) > limit:
                return None
    body = bytearray()
    async for chunk in response.aiter_bytes():
        if len(body) + len(chunk) > limit:
            return None
        body += chunk
    return body


def redact_url(url: str) -> str:
    """The URL without user-info, safe for logs and messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def printable_excerpt(data: bytes | bytearray, limit: int = 200, scrub: Iterable[str] = ()) -> str:
    """The start of a body as a one-line printable string, for error messages.

    ``scrub`` lists values that must not appear (the credentials just sent: a server that echoes
    request headers in its error page must not get them into a condition message).
    """
    # Decode well past the limit so that a credential straddling it is scrubbed whole, not half-kept.
    text = bytes(data[: limit * 4 + 16384]).decode("utf-8", "replace")
    for secret in scrub:
        if secret:
            text = text.replace(secret, "<redacted>")
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = [
    "ClientPool",
    "TLSMaterial",
    "build_ssl_context",
    "default_ssl_context",
    "printable_excerpt",
    "read_limited",
    "redact_url",
]
