"""The hub's names for the shared address policy (the rules live in ``dynamic_scoring.outbound.addresses``).

The scorer probe and the agents apply one policy, so the rules moved to the shared package; this
module keeps the hub's imports working and is where a hub-only addition would go.
"""

from __future__ import annotations

from dynamic_scoring.outbound.addresses import (
    METADATA_ADDRESSES,
    PROBE_ALLOW_CIDRS_ENV,
    PROBE_DENY_PRIVATE_ENV,
    STRICT,
    AddressPolicy,
    IPAddress,
    category,
    embedded_ipv4,
)

__all__ = [
    "METADATA_ADDRESSES",
    "PROBE_ALLOW_CIDRS_ENV",
    "PROBE_DENY_PRIVATE_ENV",
    "STRICT",
    "AddressPolicy",
    "IPAddress",
    "category",
    "embedded_ipv4",
]
