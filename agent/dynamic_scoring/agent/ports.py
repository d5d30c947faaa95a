"""The two seams between the agent's scoring core and Kubernetes.

The core never talks to an API server.  It reads credentials through a ``SecretReader`` and hands
each cycle's outcome to a ``ScorePublisher``; ``agent/dynamic_scoring/agent/kube/`` implements both against
the managed cluster and the hub.  Component tests use a dict-backed reader and an in-memory publisher,
which are implementations of these ports rather than fakes of Kubernetes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, NamedTuple, Protocol

from dynamic_scoring.agent.errors import SecretNotFound


@dataclass(frozen=True)
class SecretContents:
    """One Secret as the agent sees it: its values and the annotations its owner set.

    ``annotations`` carries the owner's binding (``dynamic_scoring.outbound.secret_binding``): the agent
    sends a value only to a destination listed there.  ``operator_supplied`` is True only for
    values a person handed to a local tool directly (``dynamic-scoring explain --token-file``):
    they are not a Secret of the cluster, the person running the tool owns them, and no binding
    applies.  The agent's own readers never set it.
    """

    namespace: str
    name: str
    data: Mapping[str, bytes]
    annotations: Mapping[str, str] = field(default_factory=dict)
    operator_supplied: bool = False

    def value(self, key: str) -> bytes:
        """The value of ``key``.

        Raises:
            dynamic_scoring.agent.errors.SecretNotFound: the Secret has no such key (the message names it).
        """
        if key not in self.data:
            raise SecretNotFound(f'secret {self.namespace}/{self.name} has no key "{key}"')
        return self.data[key]

    def __repr__(self) -> str:
        return f"SecretContents({self.namespace}/{self.name}, keys={sorted(self.data)})"


class SecretReader(Protocol):
    """Reads Secrets in the agent's install namespace."""

    async def get(self, name: str) -> SecretContents:
        """Return Secret ``name`` with every value (base64-decoded) and its annotations.

        The agent calls this at the start of every cycle that needs a value, so a rotated Secret
        (or a changed binding) takes effect at the next cycle; an implementation may serve it from
        a watch cache.  Values and annotations come from one read, so the binding checked is the
        one of the values sent.  Messages name namespace and Secret, never a value.

        Raises:
            dynamic_scoring.agent.errors.SecretNotFound: the Secret does not exist.
            dynamic_scoring.agent.errors.AuthError: any other reason it cannot be read (forbidden, API down).
        """
        ...


class ScoreItem(NamedTuple):
    """One entry of ``AddOnPlacementScore.status.scores``: already clamped to [-100, 100] and rounded.

    A named tuple rather than a frozen dataclass: a cycle builds one per result, and at 10,000
    results the dataclass's ``__init__`` alone cost about 30 ms of the agent's cycle.
    """

    name: str
    value: int


@dataclass(frozen=True)
class CycleCondition:
    """What the last cycle did and why, shaped like a ``metav1.Condition`` without the timestamps.

    ``type`` is always ``ScoresUpToDate``.  ``status`` is ``"True"`` after a successful cycle; after a
    failure it is ``"False"`` with ``reason`` set to the error class (``PrometheusQueryError``,
    ``ScorerTimeout``, ...) and ``message`` saying which stage failed for which scorer.  The
    publisher sets ``lastTransitionTime`` and ``observedGeneration`` itself.
    """

    type: str
    status: Literal["True", "False"]
    reason: str
    message: str


@dataclass(frozen=True)
class PublishRequest:
    """The outcome of one scoring cycle, to be written to the AddOnPlacementScore on the hub.

    Attributes:
        score_name: the summary's ``scoreName``.
        aps_name: the AddOnPlacementScore name
        (``dynamic_scoring.agent.items.naming.aps_name(score_name)``); the
            namespace is the publisher's cluster namespace.
        items: after a successful cycle, the complete new score list, sorted by name (possibly
            empty: the scorer returned no usable results).  ``None`` after a failed cycle, meaning
            *keep the scores that are there*: by default a failing scorer's last scores stay until
            they expire at the ``validUntil`` already on the object, and are then ignored by
            Placement.  The publisher must not clear them.
        valid_until: timezone-aware UTC.  After a success, the new expiry to write.  After a failure,
            the expiry of the last success in this agent process, or ``None`` when this process has
            not succeeded yet; in both cases the publisher keeps the object's existing value.
        condition: what this cycle did; always written.
        interval_seconds: the scorer's interval, so the publisher can decide when an unchanged
            object is due for a refresh (e.g. skip the write while ``valid_until`` is more than two
            intervals away and nothing else changed).
    """

    score_name: str
    aps_name: str
    items: list[ScoreItem] | None
    valid_until: datetime | None
    condition: CycleCondition
    interval_seconds: int

    @property
    def succeeded(self) -> bool:
        """True when this request carries a new score list."""
        return self.items is not None


@dataclass(frozen=True)
class PublishedScores:
    """What the hub holds for one AddOnPlacementScore of ours: its items and their expiry."""

    items: list[ScoreItem]
    valid_until: datetime | None


class ScorePublisher(Protocol):
    """Writes scoring outcomes to the hub (AddOnPlacementScore in the cluster's namespace)."""

    async def publish(self, result: PublishRequest) -> None:
        """Create or update the AddOnPlacementScore named ``result.aps_name``.

        Called exactly once at the end of every cycle of a scorer whose destination is
        ``AddOnPlacementScore``.  The implementation creates the object when missing, writes
        ``status`` through the status subresource (so the first scores are not dropped), may skip a
        write that would change nothing while ``validUntil`` is far off, and raises on failure; the
        agent then counts a failed ``write`` stage and tries again next cycle.
        """
        ...

    async def current(self, aps_name: str) -> PublishedScores | None:
        """The scores the hub holds under ``aps_name``, if this addon's agent wrote them.

        None when the object does not exist, is another owner's, or cannot be read: the caller
        then starts from nothing.  Read once by a restarted worker whose scorer stabilizes its
        scores, so that its windows start from what Placement sees rather than from a jump.
        """
        ...

    async def remove(self, aps_name: str) -> None:
        """Delete the AddOnPlacementScore ``aps_name``; succeed quietly if it does not exist.

        Called when a scorer disappears from the summaries (or stops publishing), never on agent
        shutdown: scores of a stopped agent expire through ``validUntil`` instead.
        """
        ...


CONDITION_TYPE = "ScoresUpToDate"
"""The condition type the agent reports on every AddOnPlacementScore."""
SCORED_REASON = "Scored"
"""The condition's reason (status ``True``) for a cycle that scored and published every value as
the scorer returned it."""
STABILIZED_REASON = "Stabilized"
"""The condition's reason (status ``True``) for a cycle that scored and published some values held
back by the scorer's ``stabilization``; the message says how many and why.  Its wording changes
with every raw value, so a publisher need not write it on its own (see ``QUIET_REASONS``)."""
QUIET_REASONS = frozenset({SCORED_REASON, STABILIZED_REASON})
"""Reasons whose difference alone (with the same published scores, type and status) is not worth a
hub write: under noise a stabilized scorer switches between them, and rewrites the held-back
message, every cycle while publishing nothing new.  The next write carries the newest wording."""

__all__ = [
    "CONDITION_TYPE",
    "QUIET_REASONS",
    "SCORED_REASON",
    "STABILIZED_REASON",
    "CycleCondition",
    "PublishRequest",
    "PublishedScores",
    "ScoreItem",
    "ScorePublisher",
    "SecretContents",
    "SecretReader",
]
