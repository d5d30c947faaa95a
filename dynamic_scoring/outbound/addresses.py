"""Which IP addresses the hub's scorer probe and the agents may connect to (the rules only; no I/O).

The person who writes a DynamicScorer chooses its URLs, and two programs call them with their own
network position: the hub's scorer probe (``/healthz``, ``/config``) and every selected cluster's
agent (Prometheus ``query_range``, the scoring call).  Without a rule, that person could make either
request the cloud metadata service, a sidecar on loopback, or any other address it can reach, and
read the status code (and part of the body) back from a status.  Hub and agent share these rules so
that one decision is made in one place (the connecting backend is
``dynamic_scoring.outbound.guarded_transport``).

The rules, applied to every address a host name resolves to (a name whose answer includes any
refused address is refused as a whole, so a DNS answer mixing a public and a loopback address
cannot slip through):

* always refused unless explicitly allowed: loopback (``127.0.0.0/8``, ``::1``), unspecified
  (``0.0.0.0/8``, ``::``), link-local (``169.254.0.0/16``, ``fe80::/10``, which hold the cloud
  metadata endpoints), known metadata addresses outside those ranges (``fd00:ec2::254``,
  ``100.100.100.200``, ``168.63.129.16``), multicast, broadcast and the reserved and documentation
  ranges that no scorer can live in;
* private networks (RFC 1918 ``10/8``, ``172.16/12``, ``192.168/16``, the shared ``100.64/10`` and
  IPv6 unique-local ``fc00::/7``) are allowed by default, because in-cluster scorers live there
  (Service ClusterIPs, pod IPs), and refused when ``deny_private`` is set;
* everything else (public addresses) is allowed.

IPv4 addresses embedded in IPv6 ones (``::ffff:127.0.0.1``, SIIT's ``::ffff:0:127.0.0.1``,
``::127.0.0.1``, 6to4 ``2002::/16``, NAT64 ``64:ff9b::/96``, Teredo) are judged by the IPv4 address they
carry; the local-use NAT64 prefix ``64:ff9b:1::/48``, whose IPv4 address cannot be located, is refused
as reserved, and the deprecated site-local ``fec0::/10`` counts as private.  Numeric spellings such as
``2130706433`` or ``0x7f.1`` are not special here: the resolver turns them into ``127.0.0.1`` first.

``allow`` (a list of networks from the manager's or the agent's flags) overrides every refusal for
the addresses it covers: ``127.0.0.0/8`` for a development setup whose scorers run on the same host,
or one pod CIDR when ``deny_private`` is on.

Metadata services also answer only requests that carry a marker header (``Metadata-Flavor: Google``,
``Metadata: true``, the EC2 token headers); ``metadata_header`` names such a header in a scorer's
headers so that both sides can refuse it, even where an address check could not see the target
(through a proxy).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

PROBE_ALLOW_CIDRS_ENV = "DYNAMIC_SCORING_PROBE_ALLOW_CIDRS"
"""The manager's environment variable for ``--scorer-probe-allow-cidr`` (also set by the test harness)."""
PROBE_DENY_PRIVATE_ENV = "DYNAMIC_SCORING_PROBE_DENY_PRIVATE_NETWORKS"
"""The manager's environment variable for ``--scorer-probe-deny-private-networks``."""
AGENT_ALLOW_CIDRS_ENV = "DYNAMIC_SCORING_AGENT_ALLOW_CIDRS"
"""The agent's environment variable for ``--allow-cidr`` (set by the test harness, whose servers are
on loopback; a managed cluster gets the list from the AddOnDeploymentConfig's ``AgentAllowCIDRs``)."""

METADATA_HEADERS: frozenset[str] = frozenset(
    h.lower()
    for h in (
        "Metadata-Flavor",  # GCP (Google), OpenStack, Oracle
        "Metadata",  # Azure instance metadata (Metadata: true)
        "X-aws-ec2-metadata-token",  # AWS IMDSv2 token
        "X-aws-ec2-metadata-token-ttl-seconds",  # AWS IMDSv2 token request
        "X-Google-Metadata-Request",  # GCP legacy
    )
)
"""Headers that only a cloud metadata service cares about: no scorer or Prometheus needs them."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, Oracle instance metadata (link-local anyway)
        "169.254.170.2",  # AWS ECS task metadata (link-local anyway)
        "fd00:ec2::254",  # AWS instance metadata over IPv6 (inside unique-local fc00::/7)
        "100.100.100.200",  # Alibaba Cloud metadata (inside shared 100.64/10)
        "168.63.129.16",  # Azure wire server (a public address)
    )
)
"""Cloud metadata endpoints, refused even where their range would be allowed."""

_PRIVATE: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT's ::ffff:0:a.b.c.d
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
# Refused whatever the Python version says: ``is_global`` learnt these only in later 3.11/3.12
# releases.  The local-use NAT64 prefix cannot be unwrapped (where its IPv4 address sits depends on
# the prefix length the network chose), and 192.0.0.0/24 holds protocol assignments, not scorers.
_RESERVED: tuple[IPNetwork, ...] = (
    ipaddress.ip_network("64:ff9b:1::/48"),
    ipaddress.ip_network("192.0.0.0/24"),
)
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")  # deprecated, but routed inside some sites: private


def metadata_header(names: Iterable[str]) -> str | None:
    """The first of ``names`` that is a metadata-service header (compared case-insensitively), or None.

    A scorer's author who sends one of these is asking a metadata service for credentials; refusing
    the header closes that path even where the address check cannot see the final target.
    """
    for name in names:
        if name.strip().lower() in METADATA_HEADERS:
            return name
    return None


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, 6to4, NAT64, Teredo), if any."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64 or address in _IPV4_TRANSLATED:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    packed = int(address)
    if packed >> 32 == 0 and packed > 1:  # IPv4-compatible ::a.b.c.d (deprecated, still routed by some)
        return ipaddress.IPv4Address(packed)
    return None


def category(address: IPAddress) -> str | None:
    """Why ``address`` is special (``loopback``, ``link-local``, ``metadata``, ``private`` ...), or None.

    ``private`` is the one category allowed by default; every other category is refused by default.
    """
    inner = embedded_ipv4(address)
    if inner is not None:
        return category(inner)
    if address in METADATA_ADDRESSES:
        return "metadata"
    if address.is_loopback:
        return "loopback"
    if address.is_unspecified or (isinstance(address, ipaddress.IPv4Address) and address in _THIS_NETWORK):
        return "unspecified"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if any(address in net for net in _RESERVED):
        return "reserved"
    if address in _SITE_LOCAL or any(address in net for net in _PRIVATE):
        return "private"
    if not address.is_global:
        return "reserved"  # broadcast, 240/4, documentation, benchmarking, IETF protocol ranges
    return None


@dataclass(frozen=True)
class AddressPolicy:
    """Where the probe or an agent may connect: the default rules, plus an allow list and strictness.

    Attributes:
        allow: networks allowed whatever their category (manager flag ``--scorer-probe-allow-cidr``,
            agent flag ``--allow-cidr``).
        deny_private: refuse private networks too (``--scorer-probe-deny-private-networks``).
    """

    allow: tuple[IPNetwork, ...] = ()
    deny_private: bool = False

    @classmethod
    def parse(cls, cidrs: Iterable[str] | str | None, *, deny_private: bool = False) -> AddressPolicy:
        """A policy from CIDR texts (a list, or one string separated by commas or spaces).

        Raises:
            ValueError: a text is not a network (named, so the manager's flag error says which).
        """
        if cidrs is None:
            texts: list[str] = []
        elif isinstance(cidrs, str):
            texts = cidrs.replace(",", " ").split()
        else:
            texts = [t for c in cidrs for t in c.replace(",", " ").split()]
        networks: list[IPNetwork] = []
        for text in texts:
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError as exc:
                raise ValueError(f"{text!r} is not an IP network in CIDR notation ({exc})") from None
        return cls(tuple(networks), deny_private)

    def refusal(self, address: IPAddress) -> str | None:
        """The category that refuses ``address`` (``loopback``, ``metadata`` ...), or None if allowed."""
        if any(address.version == net.version and address in net for net in self.allow):
            return None
        found = category(address)
        if found is None or (found == "private" and not self.deny_private):
            return None
        return found

    def describe(self, what: str = "probe") -> str:
        """One line for the manager's (``probe``) or the agent's (``agent``) startup log."""
        allowed = ", ".join(str(n) for n in self.allow) or "none"
        private = "refused" if self.deny_private else "allowed"
        return f"{what} addresses: private networks {private}; also allowed: {allowed}"


STRICT = AddressPolicy()
"""The default: loopback, link-local, metadata and reserved refused; private networks allowed."""


__all__ = [
    "AGENT_ALLOW_CIDRS_ENV",
    "METADATA_ADDRESSES",
    "METADATA_HEADERS",
    "PROBE_ALLOW_CIDRS_ENV",
    "PROBE_DENY_PRIVATE_ENV",
    "STRICT",
    "AddressPolicy",
    "IPAddress",
    "IPNetwork",
    "category",
    "embedded_ipv4",
    "metadata_header",
]
