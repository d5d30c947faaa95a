"""How the hub probes scorers: the scorer controller's typed settings, built from the manager's flags.

The manager's flags become this one value before any controller starts, so a wrong value fails
there with the flag's meaning in the message, and the controller reads fields, not strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dynamic_scoring.addon.registry.health import (
    DEFAULT_FAILURE_THRESHOLD,
    DEFAULT_JITTER,
    DEFAULT_PERIOD,
    HealthSettings,
)
from dynamic_scoring.outbound.addresses import STRICT, AddressPolicy

DEFAULT_CONCURRENCY = 8


@dataclass(frozen=True)
class ProbeSettings:
    """Probe timing (``health``), how many probes run at once, and which addresses may be probed."""

    health: HealthSettings = field(default_factory=HealthSettings)
    concurrency: int = DEFAULT_CONCURRENCY
    addresses: AddressPolicy = STRICT

    @classmethod
    def build(
        cls,
        *,
        period: float = DEFAULT_PERIOD,
        jitter: float = DEFAULT_JITTER,
        failure_threshold: int = DEFAULT_FAILURE_THRESHOLD,
        concurrency: int = DEFAULT_CONCURRENCY,
        allow_cidrs: Sequence[str] | str = (),
        deny_private_networks: bool = False,
    ) -> ProbeSettings:
        """The settings from the manager's ``--scorer-probe-*`` values.

        Raises:
            ValueError: a value is out of range or a CIDR does not parse.
        """
        health = HealthSettings(period=period, jitter=jitter, failure_threshold=failure_threshold)
        if concurrency < 1:
            raise ValueError(f"probe concurrency must be at least 1, got {concurrency}")
        cidrs = allow_cidrs if isinstance(allow_cidrs, str) else [str(c) for c in allow_cidrs]
        addresses = AddressPolicy.parse(cidrs, deny_private=deny_private_networks)
        return cls(health, concurrency, addresses)


__all__ = ["DEFAULT_CONCURRENCY", "ProbeSettings"]
