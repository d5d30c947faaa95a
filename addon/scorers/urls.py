"""URL helpers with upstream's semantics, and the checks a CRD's CEL rule cannot make.

Upstream joined a host and a path with Go's ``url.JoinPath`` and accepted any URL with a scheme and a
host.  We keep the join (existing scorers register ``host`` + ``path`` pairs that rely on it) and are
stricter about hosts: ``http://<NODE_IP>:30007`` passes the apiserver's ``isURL`` but can never be
reached, so the hub names it instead of probing it forever.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from urllib.parse import SplitResult, urlsplit, urlunsplit

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


def redact(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``, safe for a condition message."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(SplitResult(parts.scheme, "***@" + host, parts.path, parts.query, parts.fragment))


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an absolute http(s) URL with a usable host, or None when it is.

    The message quotes the URL with credentials redacted: it goes into status conditions.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"{redact(url)!r} is not a URL ({exc})"
    shown = redact(url)
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
        return f"{shown!r} must not carry credentials; use a Secret reference"
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


__all__ = ["has_path", "join_url", "origin", "redact", "url_problem"]
