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

*Paths compared for access.*  ``normalise_path`` and ``path_within`` decide whether a request path
lies under a path prefix (a Secret bound to ``host/team-a``).  A shared ingress, the proxy behind it
and the backend may each decode and clean a path their own way; a path is therefore accepted only in
a form all of them read alike, and anything that could be read two ways is refused rather than
guessed (see ``normalise_path``).
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
import string
from urllib.parse import SplitResult, unquote_plus, urlsplit, urlunsplit

from dynamic_scoring.contract.wire import escape_control

_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z")


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


_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
_HEX = frozenset(string.hexdigits)


def _decode_unreserved(path: str) -> str | None:
    """``path`` with ``%XX`` of unreserved characters decoded and other escapes upper-cased.

    None when an escape could change how a later reader splits or decodes the path: an encoded
    ``/`` or backslash (a second segment for some servers, not for others), an encoded ``%`` (a second
    decoding turns ``%252e`` into ``.``), an encoded control character, or a malformed escape.
    """
    out: list[str] = []
    i = 0
    while i < len(path):
        ch = path[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        pair = path[i + 1 : i + 3]
        if len(pair) != 2 or not all(c in _HEX for c in pair):
            return None
        decoded = chr(int(pair, 16))
        if decoded in _UNRESERVED:
            out.append(decoded)
        elif decoded in "/\\%" or ord(decoded) < 0x20 or ord(decoded) == 0x7F:
            return None
        else:
            out.append("%" + pair.upper())
        i += 3
    return "".join(out)


def normalise_path(path: str, *, merge_slashes: bool = False, refuse_dots: bool = False) -> str | None:
    """The path as a server that cleans it would see it, or None when that is not safely defined.

    Rules, in order: an empty path is ``/``; a path must start with ``/``; a backslash, ``;`` (path
    parameters: ``/..;/`` is a known traversal on some servers), a control character, an encoded
    ``/``, backslash or ``%`` or a malformed escape refuse it; ``%XX`` of unreserved characters
    (``A-Z a-z 0-9 - . _ ~``) is decoded, so ``%2e`` is ``.``; dot segments are then removed as RFC
    3986 says, except that ``..`` above the root refuses the path instead of being dropped.  With
    ``merge_slashes`` empty segments are dropped first (as a proxy that merges ``//`` does);
    without, they are kept (as a backend that does not).  Callers that grant access compare both.
    With ``refuse_dots`` any dot segment refuses the path: for text that must already be plain.
    """
    if path == "":
        return "/"
    if not path.startswith("/") or any(ch in path for ch in "\\;") or not path.isprintable():
        return None
    decoded = _decode_unreserved(path)
    if decoded is None:
        return None
    segments = decoded[1:].split("/")
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if merge_slashes and segment == "" and not last:
            continue
        if segment in (".", ".."):
            if refuse_dots:
                return None
            if segment == "..":
                if not out:
                    return None
                out.pop()
            if last:
                out.append("")
            continue
        out.append(segment)
    return "/" + "/".join(out)


def path_within(path: str, prefix: str) -> bool:
    """Whether normalised ``path`` is ``prefix`` or below it, at a segment boundary.

    ``prefix`` is normalised and has no trailing ``/`` (``/`` itself is written ``""``): ``/team-a``
    covers ``/team-a``, ``/team-a/`` and ``/team-a/x``, never ``/team-ab``.
    """
    return path == prefix or path.startswith(prefix + "/")


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


__all__ = [
    "has_path",
    "join_url",
    "normalise_path",
    "origin",
    "path_within",
    "redact_url",
    "url_problem",
    "url_secrets",
]
