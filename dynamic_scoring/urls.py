"""The one set of URL rules and the one redaction rule: hub, agent, CLI and scorer library use them.

*Rules.*  A scorer's or a source's URL is an absolute http(s) URL with a usable host and no
credentials.  ``http://<NODE_IP>:30007`` passes the apiserver's ``isURL`` but can never be reached,
so it is named instead of probed forever.  Hosts and paths join like Go's ``url.JoinPath``: the
upstream implementation did, and existing scorers register ``host`` + ``path`` pairs that rely on it.
The hub (CR resolution, Full-mode ``/config`` sync, the probe) and the scorer library's conformance
check apply the same ``url_problem``, so the check cannot pass what the hub then refuses.

*Redaction.*  ``redact_url`` is how any URL is shown in a message, a condition, a log line or a
recording: without user-info, with every query value hidden (nobody can tell a credential from a
harmless parameter), without fragment, control characters escaped.  ``url_secrets`` lists the same
parts so that an exception's text can be scrubbed of them.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from urllib.parse import SplitResult, unquote_plus, urlsplit, urlunsplit

from dynamic_scoring.wire import escape_control

_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def _valid_host(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    if len(host) > 253:
        return False
    labels = host.rstrip(".").split(".")
    return all(_LABEL.match(label) for label in labels)


def redact_url(url: str) -> str:
    """The URL without user-info and with every query value replaced, safe for logs and messages.

    Query values are hidden wholesale (``?api_key=<redacted>``): nobody reading the message can tell
    a credential from a harmless parameter, and the names are enough to recognise the endpoint.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "<invalid URL>"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if port is not None:
        host = f"{host}:{port}"
    query = "&".join(
        f"{pair.split('=', 1)[0]}=<redacted>" if "=" in pair else pair for pair in parts.query.split("&")
    )
    return escape_control(urlunsplit((parts.scheme, host, parts.path, query, "")))


def url_secrets(url: str) -> list[str]:
    """The parts of ``url`` that may be credentials (password, user, query values), to scrub from text."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [p for p in (parts.password, parts.username) if p]
    for pair in parts.query.split("&"):
        value = pair.split("=", 1)[1] if "=" in pair else ""
        if value:
            found += [value, unquote_plus(value)]
    return found


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an absolute http(s) URL with a usable host, or None when it is.

    The message quotes the URL as ``redact_url`` shows it: it goes into status conditions.
    """
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"{shown!r} is not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"{shown!r} must start with http:// or https://"
    host = parts.netloc.rsplit("@", 1)[-1]
    if port is not None or host.endswith(":"):
        host = host.rsplit(":", 1)[0]
    if not host:
        return f"{shown!r} has no host"
    if not _valid_host(host):
        return f"{shown!r}: {host!r} is not a valid host name or IP address (an unfilled placeholder?)"
    if parts.username is not None:
        return f"{shown!r} must not carry credentials (user:password@); use a Secret reference"
    return None


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url`` (path, query, fragment and credentials dropped)."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, host, "", "", ""))


def has_path(url: str) -> bool:
    """Whether ``url`` carries a path other than ``/``."""
    return urlsplit(url).path not in ("", "/")


def join_url(base: str, path: str) -> str:
    """Join ``path`` to ``base`` like Go's ``url.JoinPath``.

    One ``/`` between them, dot segments cleaned, a trailing ``/`` of ``path`` kept, ``base``'s query
    kept; an empty ``path`` leaves ``base`` unchanged.
    """
    if not path:
        return base
    parts = urlsplit(base)
    joined = posixpath.normpath("/" + parts.path.strip("/") + "/" + path.lstrip("/"))
    joined = "/" + joined.lstrip("/")
    if path.endswith("/") and not joined.endswith("/"):
        joined += "/"
    return urlunsplit(SplitResult(parts.scheme, parts.netloc, joined, parts.query, parts.fragment))


__all__ = ["has_path", "join_url", "origin", "redact_url", "url_problem", "url_secrets"]
