"""In-memory implementations of the agent's ports, for running the core without Kubernetes.

They are real implementations of ``SecretReader`` and ``ScorePublisher`` with the documented
semantics (a missing key raises ``SecretNotFound``; ``items=None`` keeps the previous scores), used
by the component tests and the benchmark, which run the scoring loop without a hub.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from dynamic_scoring.agent.errors import SecretNotFound
from dynamic_scoring.agent.ports import (
    CycleCondition,
    PublishedScores,
    PublishRequest,
    ScoreItem,
    SecretContents,
)
from dynamic_scoring.outbound.secret_binding import ALLOWED_HOSTS_ANNOTATION


class MemorySecrets:
    """A ``SecretReader`` over a dict ``{secret_name: {key: value}}`` that tests may change at any time.

    Like a Secret in a cluster, an entry is bound to no destination until its owner says so:
    ``set(..., allowed_hosts=...)`` or ``bind`` writes the
    ``dynamic-scoring.open-cluster-management.io/allowed-hosts`` annotation.

    Args:
        namespace: used in error messages, as the Kubernetes reader would.
    """

    def __init__(self, data: dict[str, dict[str, bytes]] | None = None, namespace: str = "memory") -> None:
        self.data: dict[str, dict[str, bytes]] = data if data is not None else {}
        self.annotations: dict[str, dict[str, str]] = {}
        self.namespace = namespace

    def set(self, name: str, key: str, value: bytes | str, *, allowed_hosts: str | None = None) -> None:
        """Create or change one key; ``allowed_hosts`` also sets the binding annotation."""
        self.data.setdefault(name, {})[key] = value.encode() if isinstance(value, str) else value
        if allowed_hosts is not None:
            self.bind(name, allowed_hosts)

    def bind(self, name: str, allowed_hosts: str) -> None:
        """Set (or with ``""``, empty) the allowed-hosts annotation of Secret ``name``."""
        self.annotations.setdefault(name, {})[ALLOWED_HOSTS_ANNOTATION] = allowed_hosts

    async def get(self, name: str) -> SecretContents:
        """Return the Secret, or raise ``SecretNotFound`` naming namespace and Secret."""
        secret = self.data.get(name)
        if secret is None:
            raise SecretNotFound(f"secret {self.namespace}/{name} not found")
        return SecretContents(self.namespace, name, dict(secret), dict(self.annotations.get(name, {})))


@dataclass
class StoredScore:
    """What a publisher holds for one AddOnPlacementScore."""

    items: list[ScoreItem]
    valid_until: datetime | None
    condition: CycleCondition


@dataclass
class MemoryPublisher:
    """A ``ScorePublisher`` that keeps scores in a dict and records every call.

    ``publish`` with ``items=None`` keeps the stored items and ``validUntil`` and only replaces the
    condition, as the Kubernetes publisher does.
    """

    scores: dict[str, StoredScore] = field(default_factory=dict)
    published: list[PublishRequest] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    async def publish(self, result: PublishRequest) -> None:
        """Record the request and update the stored score."""
        self.published.append(result)
        stored = self.scores.get(result.aps_name)
        if result.items is not None:
            self.scores[result.aps_name] = StoredScore(
                list(result.items), result.valid_until, result.condition
            )
        elif stored is not None:
            stored.condition = result.condition
        else:
            self.scores[result.aps_name] = StoredScore([], None, result.condition)

    async def current(self, aps_name: str) -> PublishedScores | None:
        """The stored items and expiry of ``aps_name`` (None when nothing is stored)."""
        stored = self.scores.get(aps_name)
        return None if stored is None else PublishedScores(list(stored.items), stored.valid_until)

    async def remove(self, aps_name: str) -> None:
        """Forget the score; absent names are fine."""
        self.removed.append(aps_name)
        self.scores.pop(aps_name, None)

    def requests_for(self, score_name: str) -> list[PublishRequest]:
        """Every publish request of one score name, oldest first."""
        return [r for r in self.published if r.score_name == score_name]


__all__ = ["MemoryPublisher", "MemorySecrets", "StoredScore"]
