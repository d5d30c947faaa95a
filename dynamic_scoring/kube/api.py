"""JSON over the Kubernetes REST API, with errors a caller can branch on.

The agent touches four kinds of objects (a ConfigMap, Secrets, a Lease and AddOnPlacementScores),
so it speaks plain JSON paths through the `kubernetes` package's transport (auth, TLS, kubeconfig
and in-cluster loading) instead of its generated models.  Blocking calls run in a worker thread
so the scoring loop never waits on the API.

The hub kubeconfig's client certificate is rotated by the klusterlet while the agent runs; the
client is rebuilt when the kubeconfig or the certificate files next to it change, so the agent
keeps its hub access without a restart.

Errors::

    KubeError                 transport failure or unexpected status (has .status, .reason)
    ├── NotFound              404
    ├── Conflict              409 (AlreadyExists or a stale resourceVersion)
    ├── Forbidden             401/403: the identity lacks a permission
    ├── Gone                  410: a watch's resourceVersion expired; relist
    ├── Invalid               422: the apiserver rejected the object (schema, enum, range)
    └── Fenced                a write not sent: this process may no longer write (see `fenced`)
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import urllib3
from kubernetes import client, config

from dynamic_scoring.kube.jsontypes import JSON

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"  # server-side apply; JSON is YAML
PARTIAL_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
"""`accept` for an object's metadata alone (resourceVersion, labels, owners), not its whole body."""
# How often the kubeconfig and its certificate files are looked at for a rotation: a busy manager
# sends hundreds of requests a second, and three stat calls before each were a tenth of its time.
CREDENTIALS_CHECK_SECONDS = 1.0


class KubeError(Exception):
    """A Kubernetes API call failed."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(KubeError):  # noqa: N818 - named after the HTTP status, like the apiserver does
    """The object does not exist."""


class Conflict(KubeError):  # noqa: N818 - named after the HTTP status, like the apiserver does
    """The object exists already, or changed since it was read."""


class Forbidden(KubeError):  # noqa: N818 - named after the HTTP status, like the apiserver does
    """The identity may not do this."""


class Gone(KubeError):  # noqa: N818 - named after the HTTP status, like the apiserver does
    """A watch's resourceVersion is too old."""


class Invalid(KubeError):  # noqa: N818 - named after the HTTP status, like the apiserver does
    """The apiserver rejected the object."""


class Fenced(KubeError):  # noqa: N818 - like its siblings, named for what happened
    """A write refused before it was sent, because this process may no longer write.

    The hub manager's controllers write through a fenced `KubeAPI` whose fence is the leader
    elector: once leadership cannot be vouched for, not one more write leaves the process.
    """


_BY_STATUS: dict[int, type[KubeError]] = {
    401: Forbidden,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
}


def _error(status: int, body: bytes | str) -> KubeError:
    reason, message = "", body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        doc = json.loads(body)
        reason, message = str(doc.get("reason", "")), str(doc.get("message", message))
    except (ValueError, AttributeError):
        pass
    return _BY_STATUS.get(status, KubeError)(status, reason, message.strip()[:2000])


@contextlib.contextmanager
def map_transport_errors(what: str) -> Iterator[None]:
    """Turn every transport failure inside the block into `KubeError(0, "Unavailable")`.

    This is the one place where urllib3's and the socket layer's exceptions meet the typed tree,
    in the manner of httpx's `map_exceptions`.  It wraps the request *and* the reading of a body or
    a watch stream: a stream that breaks mid-body raises urllib3's `ProtocolError` or
    `ReadTimeoutError`, which are not `OSError`, and an unmapped one once ended the agent's watch
    thread while its Lease kept saying it was healthy.
    """
    try:
        yield
    except KubeError:
        raise
    except client.ApiException as exc:
        raise _error(int(exc.status or 0), exc.body or str(exc)) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeError(0, "Unavailable", f"{what}: {type(exc).__name__}: {exc}") from exc
    except ValueError as exc:  # a truncated or garbled JSON document
        raise KubeError(0, "BadResponse", f"{what}: undecodable response: {exc}") from exc


def split_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The newline-separated lines of a chunked stream; a last line without a newline is dropped.

    A line's pieces are joined once, when its newline arrives, so a 17 MB watch event is not
    copied again for every 64 KiB chunk.
    """
    partial: list[bytes] = []
    for chunk in chunks:
        if b"\n" not in chunk:
            partial.append(chunk)
            continue
        first, *rest = chunk.split(b"\n")
        yield b"".join([*partial, first])
        tail = rest.pop()
        yield from rest
        partial = [tail] if tail else []


def _interrupt(raw: urllib3.BaseHTTPResponse) -> None:
    """Unblock a thread reading `raw` (urllib3 >= 2.3 shuts the socket down for reading)."""
    shutdown = getattr(raw, "shutdown", None)
    if shutdown is not None:
        with contextlib.suppress(OSError):
            shutdown()


def _load(kubeconfig: Path | None) -> client.ApiClient:
    if kubeconfig is None:
        cfg = client.Configuration()
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        return client.ApiClient(cfg)
    return cast(client.ApiClient, config.new_client_from_config(config_file=str(kubeconfig)))  # type: ignore[no-untyped-call]


def _timeout(timeout: float | tuple[float, float]) -> urllib3.Timeout:
    """The client's reading of a request timeout: a total, or (connect, read)."""
    if isinstance(timeout, tuple):
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return urllib3.Timeout(total=timeout)


class KubeAPI:
    """One cluster's API: blocking `request`/`watch`, and `call` to run them off the event loop."""

    def __init__(self, kubeconfig: Path | None, *, timeout: float = 30.0) -> None:
        self.kubeconfig = kubeconfig
        self.timeout = timeout
        self.write_fence: Callable[[], str | None] | None = None
        self._lock = threading.Lock()
        self._stamp = self._files_stamp()
        self._checked_at = time.monotonic()
        self._client = _load(kubeconfig)

    def fenced(self, fence: Callable[[], str | None]) -> KubeAPI:
        """This API (same transport) for a writer that must stop at once when `fence` says so.

        Before every request other than GET, `fence()` is asked; a reason (not None) refuses the
        request with `Fenced`, naming it.  Reads and watches are never fenced.
        """
        view = copy.copy(self)
        view.write_fence = fence
        return view

    def _files_stamp(self) -> tuple[float, ...]:
        if self.kubeconfig is None:
            return ()
        stamps = []
        for name in (self.kubeconfig.name, "tls.crt", "tls.key"):
            try:
                stamps.append((self.kubeconfig.parent / name).stat().st_mtime)
            except FileNotFoundError:
                stamps.append(0.0)
        return tuple(stamps)

    @property
    def api_client(self) -> client.ApiClient:
        """The transport, rebuilt first if the kubeconfig or its certificate files changed.

        The files are looked at once a second at most (`CREDENTIALS_CHECK_SECONDS`): a rotated
        certificate is used from the first request after that.
        """
        now = time.monotonic()
        if self.kubeconfig is None or now - self._checked_at < CREDENTIALS_CHECK_SECONDS:
            return self._client
        self._checked_at = now
        stamp = self._files_stamp()
        if stamp != self._stamp:
            with self._lock:
                if stamp != self._stamp:
                    log.info("reloading credentials from %s (certificate rotated)", self.kubeconfig)
                    self._client = _load(self.kubeconfig)
                    self._stamp = stamp
        return self._client

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None,
        body: Any,
        content_type: str,
        timeout: float | tuple[float, float],
        accept: str = "application/json",
    ) -> urllib3.BaseHTTPResponse:
        fence = self.write_fence
        if fence is not None and method != "GET":
            reason = fence()
            if reason is not None:
                raise Fenced(0, "Fenced", f"{method} {path} not sent: {reason}")
        api = self.api_client
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        encoded = body if isinstance(body, bytes) else None
        _, url, headers, body, _ = api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=None if encoded is not None else body,
            auth_settings=["BearerToken"],
        )
        with map_transport_errors(f"{method} {path}"):
            if encoded is not None:
                # Already JSON: sent as is, on the client's own connection pool.  The client's body
                # path would walk it in Python and encode it again (about 95 ms for a 10,000-item
                # AddOnPlacementScore status, a tenth of the whole write).
                raw = api.rest_client.pool_manager.request(
                    method,
                    url,
                    body=encoded,
                    headers=headers,
                    timeout=_timeout(timeout),
                    preload_content=False,
                )
                status = raw.status
            else:
                resp = api.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)
                raw = cast(urllib3.BaseHTTPResponse, resp.response)
                status = resp.status
            if not 200 <= status < 300:
                raise _error(status, raw.read())
        return raw

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        accept: str = "application/json",
    ) -> JSON:
        """Send one request and return the decoded JSON response (blocking).

        `body` is JSON-encoded, unless it is `bytes`: then it is already JSON and sent as is (a large
        body encoded once, with a fast encoder, by its writer).  `timeout` overrides the client's for
        this call: a leader renewing its Lease must give up before its renew deadline, not after the
        client's 30 s.  `accept` asks for another representation, such as `PARTIAL_METADATA`.
        """
        raw = self._send(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            timeout=self.timeout if timeout is None else timeout,
            accept=accept,
        )
        with map_transport_errors(f"{method} {path}"):
            data = raw.read()
            return cast(JSON, json.loads(data)) if data else {}

    def list_all(
        self, path: str, query: dict[str, str] | None = None, *, page_size: int = 500
    ) -> tuple[list[JSON], str]:
        """Every object at the collection `path`, in pages of `page_size`; and the list's resourceVersion.

        When a `continue` token expires between pages (410 Gone: the apiserver compacted that
        version), the rest cannot be had consistently, so the list restarts once unpaged, as
        client-go's pager does.  The informer and the CLI both list through here.
        """
        base = dict(query or {})
        paged = {**base, "limit": str(page_size)}
        items: list[JSON] = []
        while True:
            try:
                page = self.request("GET", path, query=paged)
            except Gone:
                page = self.request("GET", path, query=base)
                items, paged = [], base
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token or "limit" not in paged:
                return items, str(meta.get("resourceVersion", ""))
            paged = {**paged, "continue": token}

    def watch(
        self,
        path: str,
        query: dict[str, str],
        stop: threading.Event,
        *,
        on_open: Callable[[Callable[[], None]], None] | None = None,
    ) -> Iterator[JSON]:
        """Yield watch events (`{"type", "object"}`) until the server closes the stream (blocking).

        `query` should carry `resourceVersion` and `timeoutSeconds`; an ERROR event with status 410
        is raised as `Gone` so the caller relists.  `on_open(cancel)` is called once the server
        has accepted the watch (a quiet watch yields nothing for minutes, and its owner needs to
        know it is connected); `cancel()` interrupts the blocking read from another thread, so a
        stop does not wait for the next event.
        """
        raw = self._send(
            "GET",
            path,
            query={**query, "watch": "true", "allowWatchBookmarks": "true"},
            body=None,
            content_type="application/json",
            timeout=(self.timeout, float(query.get("timeoutSeconds", "300")) + 30),
        )
        try:
            if on_open is not None:
                on_open(lambda: _interrupt(raw))
            with map_transport_errors(f"watch {path}"):
                chunks = raw.stream(64 * 1024, decode_content=True)
                for line in split_lines(itertools.takewhile(lambda _: not stop.is_set(), chunks)):
                    if stop.is_set():
                        return
                    if not line.strip():
                        continue
                    event = cast(JSON, json.loads(line))
                    if event.get("type") == "ERROR":
                        status = event.get("object", {})
                        raise _error(int(status.get("code", 0)), json.dumps(status))
                    yield event
        finally:
            raw.release_conn()

    async def arequest(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> JSON:
        """`request` off the event loop."""
        return await asyncio.to_thread(
            self.request, method, path, query=query, body=body, content_type=content_type, accept=accept
        )
