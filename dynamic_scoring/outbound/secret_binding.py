"""Which destinations a Secret may be sent to: the rule the agent and the hub manager both apply.

A DynamicScorer names Secrets and the URLs their values go to, and the person who writes the
DynamicScorer is usually not the person who owns the Secrets (they live in the agent's install
namespace on every managed cluster, or in the manager's namespace on the hub).  Without a check, a
scorer author could point ``scoring.host`` at their own server and name any Secret the agent can
read.  So a Secret is sent only to a destination that its owner listed on the Secret itself::

    metadata:
      annotations:
        dynamic-scoring.open-cluster-management.io/allowed-hosts: "scorer.example.com, prom.mon.svc:9090"

Whoever may annotate the Secret controls it; a scorer author who may only write DynamicScorers
cannot.  A Secret without the annotation (or with an empty one) is bound to nothing and is never
sent: the caller refuses the request instead of sending it with or without the credential.

Entries are separated by commas or whitespace.  Each is one of:

* ``host`` — that host on the default port of the request's scheme (80 for http, 443 for https);
* ``host:port`` — that host on that port, whatever the scheme;
* ``http://host[:port]`` or ``https://host[:port]`` — that scheme only, on that port (default: the
  scheme's);
* ``*.example.com`` (optionally with a port or scheme) — any name below ``example.com`` (not
  ``example.com`` itself), for scorers behind per-region names.  A ``*`` anywhere else is invalid;
* any of the above followed by a path prefix, ``ingress.example.com/team-a`` or
  ``https://ingress.example.com:8443/team-a/`` — only request paths at or below that prefix.

An entry without a path (or with the path ``/``) allows every path on its host and port, as entries
always did.  That is too wide on a shared ingress that routes one host to many backends by path
prefix: the token would reach every backend behind it.  A path prefix narrows it.  The request
path is compared after ``dynamic_scoring.outbound.urls.normalise_path`` (unreserved escapes decoded, dot
segments resolved), at a segment boundary (``/team-a`` never covers ``/team-ab``; a trailing ``/``
on the prefix changes nothing), and the query never counts.  A request path that cannot be
normalised safely (an encoded ``/``, a backslash, ``..`` above the root, ...) is refused by a
path-bound entry.  A path with ``//`` must lie under the prefix both with the empty segments kept
and with them merged, as the ingress and the backend may disagree on that.  The prefix itself is
written plainly: one with dot segments, ``//``, a query, a fragment or an escape that would be
refused in a request is unreadable.

Hosts compare case-insensitively, and IP addresses in their canonical form (``[0:0::1]`` is
``[::1]``).  Names are compared as written: ``prometheus.monitoring.svc`` and
``prometheus.monitoring.svc.cluster.local`` are different entries, and a numeric host such as
``2130706433`` matches only itself.  A trailing dot counts too: ``scorer.dev`` (looked up through the
pod's DNS search list first, so the Service ``scorer`` in namespace ``dev``) and ``scorer.dev.`` (only
the public name under the ``.dev`` top-level domain) are different destinations, so each allows only
itself.  Non-ASCII names are written in their ``xn--`` form, which is also what a URL with the
Unicode spelling is sent to.  An entry that cannot be read allows nothing and is named in the
refusal, so a typo never widens access; that includes a wildcard whose last label is not a name
(``*.0.0.1``), which could otherwise match resolver spellings of addresses such as ``0x7f.0.0.1``.

Binding a Secret to a host protects its value, not what it unlocks: a DynamicScorer may name a
Prometheus token bound to Prometheus and send the query results to a scoring host of its own.  An
owner who wants to rule that out also lists the DynamicScorers that may use the Secret::

    dynamic-scoring.open-cluster-management.io/allowed-scorers: "cpu-headroom, cpu-forecast"

When that annotation is present, only the named DynamicScorers (``metadata.name``, exact match) may
use the Secret, and only towards its allowed hosts; when it is absent, any DynamicScorer may, towards
those hosts.  A present but empty list allows none.

Pure functions only; no I/O.  ``httpx.URL`` parses the destination, as it is what sends the request.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from dynamic_scoring.outbound.urls import normalise_path, path_within

ALLOWED_HOSTS_ANNOTATION = "dynamic-scoring.open-cluster-management.io/allowed-hosts"
"""The annotation on a Secret listing the destinations its values may be sent to."""

ALLOWED_SCORERS_ANNOTATION = "dynamic-scoring.open-cluster-management.io/allowed-scorers"
"""The optional annotation on a Secret listing the DynamicScorers that may use it."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\Z")
_SPLIT = re.compile(r"[\s,]+")


@dataclass(frozen=True)
class Destination:
    """Where a request goes: scheme, canonical host and the port actually connected to."""

    scheme: str
    host: str
    port: int

    @property
    def entry(self) -> str:
        """The shortest annotation entry that allows exactly this destination's host and port."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.port == _DEFAULT_PORTS.get(self.scheme):
            return host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


@dataclass(frozen=True)
class HostEntry:
    """One readable entry of the annotation.

    Attributes:
        host: the canonical host, or the suffix (starting with ``.``) for a ``*.`` entry.
        wildcard: True for a ``*.`` entry.
        port: the port it allows, or None for the request scheme's default port.
        scheme: the scheme it is limited to, or None for both http and https.
        path: the normalised path prefix without trailing ``/``, or None for every path.
    """

    host: str
    wildcard: bool
    port: int | None
    scheme: str | None
    path: str | None = None

    def allows(self, dest: Destination, paths: tuple[str, ...] | None = None) -> bool:
        """True when this entry lets a value go to ``dest`` with request path(s) ``paths``.

        ``paths`` are the request path's normalised readings (``request_paths``), or None when it
        has none.  A path-bound entry needs every reading under its prefix, so it refuses a path
        that is missing or could not be normalised: it fails closed.
        """
        if self.path is not None and (not paths or not all(path_within(p, self.path) for p in paths)):
            return False
        return self.allows_host(dest)

    def allows_host(self, dest: Destination) -> bool:
        """True when this entry's scheme, host and port match ``dest``, whatever its path."""
        if self.scheme is not None and self.scheme != dest.scheme:
            return False
        port = self.port if self.port is not None else _DEFAULT_PORTS.get(self.scheme or dest.scheme)
        if port != dest.port:
            return False
        if self.wildcard:
            # A name below the suffix; never an IP address (``*.2.3.4`` is not ``1.2.3.4``).
            return dest.host.endswith(self.host) and not is_ip(dest.host)
        return dest.host == self.host


def is_ip(host: str) -> bool:
    """True when `host` is an IP address literal (the wildcard rules never match one)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _canonical_host(host: str) -> str | None:
    """Lower case, IPs canonical; None when it is not a host name or address.

    A trailing dot is kept: ``name.`` is looked up as it is, ``name`` through the DNS search list
    first, and the two can reach different servers.
    """
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        pass
    name = host.removesuffix(".")
    if not name or len(name) > 253 or not name.isascii():
        return None
    if not all(_LABEL.match(label) for label in name.split(".")):
        return None
    return host


def destination(url: str) -> Destination:
    """The destination of ``url`` as the HTTP client will connect to it.

    Raises:
        ValueError: the URL has no http(s) scheme or no host.
    """
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"not a URL: {exc}") from exc
    scheme = parsed.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError(f"scheme {scheme or '(none)'!r} is not http or https")
    # raw_host is what is resolved and connected to: the xn-- form of a Unicode name.
    raw_host = parsed.raw_host.decode("ascii", "replace")
    host = _canonical_host(raw_host) if raw_host else None
    if host is None:
        raise ValueError(f"host {raw_host!r} is not a host name or IP address")
    return Destination(scheme, host, parsed.port or _DEFAULT_PORTS[scheme])


def request_paths(url: str) -> tuple[str, ...] | None:
    """The normalised readings of the path ``url`` is sent with, or None when it is not safe to read.

    The path is taken as httpx sends it (its ``raw_path``, literal dot segments already resolved),
    without the query.  Two readings, slashes kept and merged, because the ingress and the backend
    may each do either; they are one when the path has no ``//``.
    """
    try:
        raw = httpx.URL(url).raw_path.decode("ascii")
    except (httpx.InvalidURL, TypeError, UnicodeDecodeError):
        return None
    path = raw.partition("?")[0]
    kept = normalise_path(path)
    merged = normalise_path(path, merge_slashes=True)
    if kept is None or merged is None:
        return None
    return (kept,) if kept == merged else (kept, merged)


def _prefix(path: str) -> str | None:
    """The normalised prefix of an entry's path (``""`` for ``/``), or None when it is not plain.

    A prefix is compared with normalised request paths, so it must already be in that form: no dot
    segments and no ``//`` (which would never match, or match something unintended).
    """
    norm = normalise_path(path, refuse_dots=True)
    if norm is None or "//" in norm:
        return None
    return norm.removesuffix("/")


def _entry(text: str) -> HostEntry | None:
    scheme: str | None = None
    rest = text
    if "://" in text:
        scheme, _, rest = text.partition("://")
        scheme = scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            return None
    path: str | None = None
    if "/" in rest:
        slash = rest.index("/")
        rest, raw_path = rest[:slash], rest[slash:]
        if any(ch in raw_path for ch in "?#"):
            return None
        path = _prefix(raw_path)
        if path is None:
            return None
        path = path or None  # "/" is every path, as before
        if path is not None and ":" in rest and not rest.startswith("[") and is_ip(rest):
            return None  # "fd00::/8" is a network, not a host and a path: a path needs "[fd00::]/8"
    if not rest or any(ch in rest for ch in "/?#@\\"):
        return None
    wildcard = rest.startswith("*.")
    if wildcard:
        rest = rest[2:]
    if not wildcard and ":" in rest and not rest.startswith("[") and is_ip(rest):
        rest = f"[{rest}]"  # a bare IPv6 address: its colons are not a port
    try:
        split = urlsplit("//" + rest)
        port = split.port
        hostname = split.hostname
    except ValueError:
        return None
    if hostname is None or "*" in rest:
        return None
    if rest.endswith(":"):  # "host:" is a typo, not "the default port"
        return None
    host = _canonical_host(hostname)
    if host is None or (wildcard and ":" in host):
        return None
    if wildcard and not host.removesuffix(".").rsplit(".", 1)[-1][:1].isalpha():
        return None  # no top-level domain starts with a digit: "*.0.0.1" would match "0x7f.0.0.1"
    if port is None and scheme is not None:
        port = _DEFAULT_PORTS[scheme]
    return HostEntry("." + host if wildcard else host, wildcard, port, scheme, path)


def parse_allowed_hosts(value: str | None) -> tuple[tuple[HostEntry, ...], tuple[str, ...]]:
    """The readable entries of an annotation value, and the entries that could not be read."""
    entries: list[HostEntry] = []
    bad: list[str] = []
    for text in _SPLIT.split(value or ""):
        if not text:
            continue
        entry = _entry(text)
        if entry is None:
            bad.append(text)
        else:
            entries.append(entry)
    return tuple(entries), tuple(bad)


def listed_destination(value: str | None, url: str) -> bool:
    """True when the entries in ``value`` (the allowed-hosts syntax) let a value go to ``url``.

    The same check as a Secret's annotation gets, for lists an administrator writes elsewhere (the
    agent's own ServiceAccount token is bound by an AddOnDeploymentConfig variable).
    """
    try:
        dest = destination(url)
    except ValueError:
        return False
    entries, _ = parse_allowed_hosts(value)
    paths = request_paths(url)
    return any(entry.allows(dest, paths) for entry in entries)


def listed_names(value: str) -> tuple[str, ...]:
    """The names of an allowed-scorers style list (comma or whitespace separated)."""
    return tuple(n for n in _SPLIT.split(value) if n)


def _scorer_refusal(value: str, scorer: str, *, secret: str, namespace: str) -> str | None:
    names = list(listed_names(value))
    if scorer and scorer in names:
        return None
    who = f"DynamicScorer {scorer}" if scorer else "a summary without a DynamicScorer name"
    wanted = ", ".join([*names, scorer]) if scorer else ", ".join(names)
    return (
        f"secret {namespace}/{secret} may not be used by {who}: its allowed-scorers annotation lists "
        f"{value.strip()!r}; if that scorer is meant to use it, the Secret's owner runs: kubectl -n "
        f"{namespace} annotate secret {secret} --overwrite {ALLOWED_SCORERS_ANNOTATION}='{wanted}'"
    )


def binding_refusal(
    annotations: Mapping[str, str] | None,
    url: str,
    *,
    secret: str,
    namespace: str,
    scorer: str = "",
) -> str | None:
    """Why the Secret ``namespace/secret`` may not be sent to ``url`` for ``scorer``, or None when it may.

    ``scorer`` is the DynamicScorer's ``metadata.name`` (``""`` when unknown, which only matters when
    the Secret lists allowed scorers).  The sentence names the Secret, the destination (or scorer)
    and the annotation, and ends with the ``kubectl annotate`` command that would bind it; it never
    contains a Secret value.
    """
    try:
        dest = destination(url)
    except ValueError:
        # The URL itself is not quoted: its query could carry a credential of its own.
        return f"secret {namespace}/{secret} is not sent: the destination is not an http(s) URL with a host"
    annotations = annotations or {}
    value = annotations.get(ALLOWED_HOSTS_ANNOTATION)
    entries, bad = parse_allowed_hosts(value)
    paths = request_paths(url)
    if any(entry.allows(dest, paths) for entry in entries):
        scorers = annotations.get(ALLOWED_SCORERS_ANNOTATION)
        if scorers is None:
            return None
        return _scorer_refusal(scorers, scorer, secret=secret, namespace=namespace)
    if not value or not value.strip():
        why = "it has no allowed-hosts annotation"
        wanted = dest.entry
    else:
        why = f"its allowed-hosts annotation lists {value.strip()!r}"
        if bad:
            why += f" (unreadable: {', '.join(repr(b) for b in bad)})"
        wanted = f"{value.strip()}, {dest.entry}"
        if any(entry.allows_host(dest) for entry in entries):
            # The host is listed, but only under path prefixes.  The path is not quoted (it is the
            # scorer author's text) and no command is offered: which prefix to add is the owner's call.
            unsafe = " (it cannot be normalised safely)" if paths is None else ""
            return (
                f"secret {namespace}/{secret} is not bound to this path on {dest.entry}{unsafe}: its "
                f"allowed-hosts annotation lists {value.strip()!r}, which limits that host to path "
                f"prefixes; the Secret's owner decides whether to add one ({ALLOWED_HOSTS_ANNOTATION})"
            )
    # Kept short: it travels in conditions capped at 512 characters, the command last.
    return (
        f"secret {namespace}/{secret} is not bound to {dest.entry}: {why}; if that host is meant to "
        f"receive it, the Secret's owner runs: kubectl -n {namespace} annotate secret {secret} "
        f"--overwrite {ALLOWED_HOSTS_ANNOTATION}='{wanted}'"
    )


__all__ = [
    "ALLOWED_HOSTS_ANNOTATION",
    "ALLOWED_SCORERS_ANNOTATION",
    "Destination",
    "HostEntry",
    "binding_refusal",
    "destination",
    "is_ip",
    "listed_destination",
    "listed_names",
    "parse_allowed_hosts",
    "request_paths",
]
