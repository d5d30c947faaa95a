"""The hub's names for the shared connecting backend (``dynamic_scoring.outbound.guarded_transport``).

The probe and the agents connect through one implementation of the address check; this module
keeps the hub's imports working.
"""

from __future__ import annotations

from dynamic_scoring.outbound.guarded_transport import (
    RESOLVER_THREADS,
    AddressNotAllowed,
    GuardedBackend,
    guarded_transport,
    resolve,
)

__all__ = ["RESOLVER_THREADS", "AddressNotAllowed", "GuardedBackend", "guarded_transport", "resolve"]
