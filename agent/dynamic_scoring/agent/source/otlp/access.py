"""Who may push to the OTLP receiver: an optional bearer token and optional (mutual) TLS.

Pushed series become this cluster's scores on the hub, so a pusher the cluster admin did not
choose must not be able to move them.  Two controls, each optional and usable together:

* Bearer token.  The token is read from a file (a Secret mounted by the Deployment) and compared
  in constant time (``hmac.compare_digest``) with ``Authorization: Bearer <token>``.  The file is
  re-read whenever it changes (the kubelet swaps Secret volumes atomically on rotation), so a new
  token takes effect without a restart.  While the file is missing or empty every push is refused:
  the receiver fails closed, and the rest of the agent keeps scoring.  The token never appears in a
  log line, a metric or a response.
* TLS, optionally mutual.  A server certificate and key (and, for mutual TLS, the CA that signs
  the pushers' client certificates) from mounted files.  Files are re-read when they change, at
  most every ``RELOAD_SECONDS``; until a usable set exists every connection is closed at once.
  The handshake runs on the connection's own thread, never on the accept loop, under the read
  timeout, so a client that stalls in the handshake holds one connection slot and nothing else.
"""

from __future__ import annotations

import hmac
import logging
import os
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("dynamic_scoring.agent.source.otlp")

RELOAD_SECONDS = 10.0
"""How often the TLS files are checked for a change (each new connection may trigger the check)."""
LOG_EVERY_SECONDS = 60.0
"""Refusals of one kind are logged at most this often, with the count since the last line."""


@dataclass(frozen=True)
class ReceiverAccess:
    """The receiver's access settings (the ``--otlp-*`` flags); all paths are optional."""

    bearer_token_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    client_ca_file: Path | None = None

    def __post_init__(self) -> None:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("a TLS certificate and its key go together: set both files or neither")
        if self.client_ca_file is not None and self.tls_cert_file is None:
            raise ValueError("client certificates need TLS: set the server certificate and key too")

    @property
    def tls(self) -> bool:
        """True when the receiver serves HTTPS."""
        return self.tls_cert_file is not None


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class ThrottledLog:
    """A warning logged at most once per ``LOG_EVERY_SECONDS``, counting the occurrences between.

    A flood of unauthenticated pushes must not become a flood of log lines.
    """

    def __init__(self, every: float = LOG_EVERY_SECONDS) -> None:
        self._every = every
        self._lock = threading.Lock()
        self._last = -float("inf")
        self._suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        """Log ``message % args`` now, or count it for the next line."""
        with self._lock:
            now = time.monotonic()
            if now - self._last < self._every:
                self._suppressed += 1
                return
            suppressed, self._suppressed, self._last = self._suppressed, 0, now
        if suppressed:
            logger.warning(message + " (%d more like it since the last such line)", *args, suppressed)
        else:
            logger.warning(message, *args)


class BearerToken:
    """The expected token, from a file re-read when it changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._token: bytes | None = None
        self._logged_missing = ThrottledLog()

    def current(self) -> bytes | None:
        """The token now; None while the file is missing, unreadable or empty."""
        stamp = _stamp(self.path)
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp
                self._token = self._read()
            token = self._token
        if token is None:
            self._logged_missing.warning(
                "OTLP receiver: bearer token file %s is missing or empty; every push is refused (401)",
                self.path,
            )
        return token

    def _read(self) -> bytes | None:
        try:
            text = self.path.read_bytes().strip()
        except OSError:
            return None
        return text or None

    def admits(self, authorization: str | None) -> bool:
        """True when ``authorization`` is ``Bearer <the token>`` (compared in constant time)."""
        token = self.current()
        if token is None or authorization is None:
            return False
        scheme, _, presented = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        # http.server decodes headers as ISO-8859-1: encoding back gives the bytes that were sent.
        return hmac.compare_digest(presented.strip().encode("latin-1", "replace"), token)


class TlsFiles:
    """A server ``SSLContext`` built from files, rebuilt when they change.

    With ``client_ca_file`` the context requires a client certificate that CA signed.
    """

    def __init__(self, cert_file: Path, key_file: Path, client_ca_file: Path | None = None) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.client_ca_file = client_ca_file
        self._lock = threading.Lock()
        self._checked = -float("inf")
        self._stamps: tuple[tuple[int, int, int] | None, ...] = ()
        self._context: ssl.SSLContext | None = None
        self._logged = ThrottledLog()

    def _files(self) -> tuple[Path, ...]:
        return (self.cert_file, self.key_file, *([self.client_ca_file] if self.client_ca_file else []))

    def context(self) -> ssl.SSLContext | None:
        """The current context; None until the files make a usable one."""
        now = time.monotonic()
        with self._lock:
            if now - self._checked >= RELOAD_SECONDS or self._context is None:
                self._checked = now
                stamps = tuple(_stamp(p) for p in self._files())
                if stamps != self._stamps:
                    self._stamps = stamps
                    self._reload()
            context = self._context
        if context is None:
            self._logged.warning(
                "OTLP receiver: no usable TLS certificate yet (%s, %s); connections are closed",
                self.cert_file,
                self.key_file,
            )
        return context

    def _reload(self) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(str(self.cert_file), str(self.key_file))
            if self.client_ca_file is not None:
                context.load_verify_locations(cafile=str(self.client_ca_file))
                context.verify_mode = ssl.CERT_REQUIRED
        except (OSError, ssl.SSLError, ValueError) as exc:
            # Keep the last good context: a half-written rotation must not take the receiver down.
            logger.warning("OTLP receiver: cannot load the TLS files (%s); keeping the previous ones", exc)
            return
        if self._context is not None:
            logger.info("OTLP receiver: TLS files changed; new connections use the new certificate")
        self._context = context


__all__ = ["RELOAD_SECONDS", "BearerToken", "ReceiverAccess", "ThrottledLog", "TlsFiles"]
