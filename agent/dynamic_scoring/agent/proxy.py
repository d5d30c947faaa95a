"""Outbound proxies from the AddOnDeploymentConfig's `proxyConfig`, and nothing else from the environment.

The hub renders `HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY` and a CA bundle path into the agent's
Deployment (docs/addon-manager.md).  httpx's `trust_env=True` would honour them, but would also
read `.netrc` credentials and `SSL_CERT_FILE`, which could send a password to a scorer or replace
the trust store behind the agent's back.  So the clients keep `trust_env=False` and get their
proxies from here, as explicit transports per URL pattern.

The address policy through a proxy.  The agent connects only to the proxy; the proxy resolves and
connects to the target.  So:

* the proxy hop is not checked: its address comes from the administrator's AddOnDeploymentConfig,
  not from a scorer's author, and is often private or even loopback (a sidecar);
* a target whose host is a literal IP address is checked against the policy before the request is
  handed to the proxy (``http://169.254.169.254/`` is refused as ``metadata``, never sent);
* a target host *name* is not resolved by the agent (the proxy's resolver decides, and may see
  other answers); the proxy's own rules govern where it goes.  The metadata-header rule
  (``dynamic_scoring.agent.http.refuse_metadata_headers``) still applies, and hosts in ``NO_PROXY`` are
  connected to directly, through the full check.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from dynamic_scoring.outbound.addresses import STRICT, AddressPolicy
from dynamic_scoring.outbound.guarded_transport import AddressNotAllowed, check_literal

CA_BUNDLE_ENV = "CA_BUNDLE_FILE_PATH"
"""Where the rendered Deployment mounts the proxy's CA bundle (dynamic_scoring.addon.render)."""


@dataclass(frozen=True)
class ProxySettings:
    """The proxies to use: one per scheme, the hosts that bypass them, and the proxy's CA.

    The CA (the ADC's ``proxyConfig.caBundle``) is chosen by whoever writes the AddOnDeploymentConfig.
    Trusted for every destination, it would let a proxy of their choice that intercepts TLS read the
    tokens the agent sends to scorers and Prometheus.  So it verifies only the TLS connection to an
    ``https://`` proxy itself, unless the hub admin started the manager with
    ``--trust-proxy-ca-for-destinations`` (rendered as the agent flag of the same name), for a proxy
    that does intercept TLS.
    """

    http: str | None = None
    https: str | None = None
    no_proxy: tuple[str, ...] = ()
    ca_files: tuple[Path, ...] = ()
    ca_for_destinations: bool = False

    @property
    def destination_ca_files(self) -> tuple[Path, ...]:
        """The proxy CA files to add to the destinations' trust store: none unless the admin opted in."""
        return self.ca_files if self.ca_for_destinations else ()

    @property
    def enabled(self) -> bool:
        """True when any request may go through a proxy."""
        return bool(self.http or self.https) and "*" not in self.no_proxy


def _env(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name) or environ.get(name.lower())
    return value.strip() or None if value else None


def proxy_settings_from_env(
    environ: Mapping[str, str], *, trust_ca_for_destinations: bool = False
) -> ProxySettings:
    """Read the three proxy variables (upper case first, then lower case, as curl does) and the CA path.

    ``trust_ca_for_destinations`` is the agent's ``--trust-proxy-ca-for-destinations``.
    """
    no_proxy = _env(environ, "NO_PROXY") or ""
    return ProxySettings(
        http=_env(environ, "HTTP_PROXY"),
        https=_env(environ, "HTTPS_PROXY"),
        no_proxy=tuple(h.strip().lower() for h in no_proxy.split(",") if h.strip()),
        ca_files=ca_bundle_from_env(environ),
        ca_for_destinations=trust_ca_for_destinations,
    )


def ca_bundle_from_env(environ: Mapping[str, str]) -> tuple[Path, ...]:
    """The proxy's CA bundle, when the Deployment names one (what trusts it: ``ProxySettings``)."""
    path = _env(environ, CA_BUNDLE_ENV)
    return (Path(path),) if path else ()


def _bypass_pattern(entry: str) -> str | None:
    """The httpx mount pattern that sends `entry`'s hosts direct, or None for what it cannot express.

    `example.com` and `.example.com` both cover the domain and its subdomains (curl's reading);
    an IP address matches itself.  CIDR ranges cannot be expressed as an httpx pattern and are
    skipped (documented), rather than guessed.
    """
    host = entry.split(":", 1)[0] if entry.count(":") == 1 else entry  # host:port -> host
    if "/" in host:
        return None
    try:
        ipaddress.ip_address(host.strip("[]"))
        return f"all://{host}"
    except ValueError:
        pass
    return f"all://*{host.lstrip('.').lstrip('*')}" if host else None


class TargetChecked(httpx.AsyncBaseTransport):
    """A proxy transport that first refuses targets whose host is a literal address the policy refuses."""

    def __init__(self, inner: httpx.AsyncBaseTransport, policy: AddressPolicy) -> None:
        self._inner = inner
        self._policy = policy

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Check the target's literal address, then hand the request to the proxy."""
        try:
            check_literal(request.url.host, self._policy)
        except AddressNotAllowed as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the proxy transport."""
        await self._inner.aclose()


def proxy_mounts(
    proxies: ProxySettings,
    verify: ssl.SSLContext,
    limits: httpx.Limits,
    policy: AddressPolicy = STRICT,
    proxy_verify: ssl.SSLContext | None = None,
) -> dict[str, httpx.AsyncBaseTransport | None]:
    """The httpx `mounts` that route each scheme through its proxy and bypassed hosts direct.

    What ``policy`` checks through a proxy is in this module's docstring.  ``verify`` checks the
    destinations (through the tunnel); ``proxy_verify``, the one context that holds the proxy's CA
    (``ProxySettings``), checks only the TLS connection to an ``https://`` proxy.
    """
    if not proxies.enabled:
        return {}
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {}
    for scheme, url in (("http", proxies.http), ("https", proxies.https)):
        if url:
            proxy = (
                httpx.Proxy(url, ssl_context=proxy_verify)
                if proxy_verify is not None and url.lower().startswith("https://")
                else url
            )
            mounts[f"{scheme}://"] = TargetChecked(
                httpx.AsyncHTTPTransport(proxy=proxy, verify=verify, limits=limits), policy
            )
    for entry in proxies.no_proxy:
        pattern = _bypass_pattern(entry)
        if pattern is not None:
            mounts[pattern] = None  # None: the client's default (direct) transport
    return mounts


__all__ = [
    "CA_BUNDLE_ENV",
    "ProxySettings",
    "TargetChecked",
    "ca_bundle_from_env",
    "proxy_mounts",
    "proxy_settings_from_env",
]
