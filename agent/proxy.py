"""Outbound proxies from the AddOnDeploymentConfig's `proxyConfig`, and nothing else from the environment.

The hub renders `HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY` and a CA bundle path into the agent's
Deployment (docs/addon-manager.md).  httpx's `trust_env=True` would honour them, but would also
read `.netrc` credentials and `SSL_CERT_FILE`, which could send a password to a scorer or replace
the trust store behind the agent's back.  So the clients keep `trust_env=False` and get their
proxies from here, as explicit transports per URL pattern.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

CA_BUNDLE_ENV = "CA_BUNDLE_FILE_PATH"
"""Where the rendered Deployment mounts the proxy's CA bundle (addon.render)."""


@dataclass(frozen=True)
class ProxySettings:
    """The proxies to use: one per scheme, and the hosts that bypass them."""

    http: str | None = None
    https: str | None = None
    no_proxy: tuple[str, ...] = ()

    @property
    def enabled(self) -> bool:
        """True when any request may go through a proxy."""
        return bool(self.http or self.https) and "*" not in self.no_proxy


def _env(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name) or environ.get(name.lower())
    return value.strip() or None if value else None


def proxy_settings_from_env(environ: Mapping[str, str]) -> ProxySettings:
    """Read the three proxy variables (upper case first, then lower case, as curl does)."""
    no_proxy = _env(environ, "NO_PROXY") or ""
    return ProxySettings(
        http=_env(environ, "HTTP_PROXY"),
        https=_env(environ, "HTTPS_PROXY"),
        no_proxy=tuple(h.strip().lower() for h in no_proxy.split(",") if h.strip()),
    )


def ca_bundle_from_env(environ: Mapping[str, str]) -> tuple[Path, ...]:
    """The proxy's CA bundle, trusted in addition to the default store, when the Deployment names one."""
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


def proxy_mounts(
    proxies: ProxySettings, verify: ssl.SSLContext, limits: httpx.Limits
) -> dict[str, httpx.AsyncBaseTransport | None]:
    """The httpx `mounts` that route each scheme through its proxy and bypassed hosts direct."""
    if not proxies.enabled:
        return {}
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {}
    for scheme, url in (("http", proxies.http), ("https", proxies.https)):
        if url:
            mounts[f"{scheme}://"] = httpx.AsyncHTTPTransport(proxy=url, verify=verify, limits=limits)
    for entry in proxies.no_proxy:
        pattern = _bypass_pattern(entry)
        if pattern is not None:
            mounts[pattern] = None  # None: the client's default (direct) transport
    return mounts


__all__ = [
    "CA_BUNDLE_ENV",
    "ProxySettings",
    "ca_bundle_from_env",
    "proxy_mounts",
    "proxy_settings_from_env",
]
