"""Why a scoring cycle failed, as a small tree of exception classes.

Every failure the agent can report is one of these.  The worker catches them, records the failing
``stage`` as a metric label, names the class as the condition reason on the AddOnPlacementScore and
decides from ``transient`` whether another attempt inside the interval is worthwhile.  The original
exception (an ``httpx`` error, a ``msgspec`` or ``pydantic`` validation error) is always chained as
``__cause__`` so that a log line shows the full story, while the message itself stays short and
never contains a credential.

    AgentError
    ├── SourceError                     stage "fetch"
    │   ├── PrometheusUnavailable       connection refused, reset, 5xx, 429   (transient)
    │   │   └── PrometheusTimeout       no complete answer within the attempt's deadline (transient)
    │   ├── PrometheusQueryError        Prometheus rejected one query (4xx, "status": "error")
    │   ├── PrometheusRequestInvalid    the request cannot be sent (a URL httpx refuses, a metadata header)
    │   ├── PrometheusAddressRefused    the host is an address the agent's policy refuses (not connected)
    │   └── PrometheusResponseError     the answer is not a range-query matrix, too large, undecodable
    ├── ScorerError                     stage "score"
    │   ├── ScorerUnavailable           connection refused, reset                (transient)
    │   │   └── ScorerTimeout           no complete answer within the attempt's deadline (transient)
    │   ├── ScorerHTTPError             a non-2xx status; transient for 5xx, 408 and 429
    │   ├── ScorerRequestInvalid        the request cannot be sent (a URL httpx refuses, a metadata header)
    │   ├── ScorerAddressRefused        the host is an address the agent's policy refuses (not connected)
    │   ├── ScorerResponseInvalid       not JSON, wrong shape, NaN or infinite scores, undecodable
    │   ├── ScorerResponseTooLarge      the body exceeded the configured limit
    │   ├── ScorerTooManyResults        more results than the per-scorer item limit
    │   └── ItemNameCollision           several results render to one item name (scoreDimensionFormat)
    ├── AuthError                       credentials could not be built (stage of the endpoint)
    │   ├── SecretNotFound              the Secret or its key does not exist
    │   ├── SecretNotBound              the Secret's owner did not bind it to the request's host
    │   └── SecretInvalid               the value cannot be used (bad PEM, newline in a token)
    └── PublishError                    stage "write": the AddOnPlacementScore write failed
        └── ScoreNameTaken              another owner's AddOnPlacementScore has the name: left alone
"""

from __future__ import annotations

from typing import Literal

Stage = Literal["fetch", "score", "write"]
"""The three stages of a scoring cycle, used as the ``stage`` metric label."""


class AgentError(Exception):
    """Base of every failure the agent reports about a scoring cycle.

    Args:
        message: a short human sentence; it ends up in logs and on the object's condition, so it must
            never contain a credential.
        stage: the cycle stage that failed; ``None`` when the raiser cannot know it (a SecretReader
            does not know which endpoint asked), in which case the caller fills it in.
    """

    default_stage: Stage | None = None
    transient: bool = False
    """True when another attempt within the same interval may succeed."""

    def __init__(self, message: str, *, stage: Stage | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.stage: Stage | None = stage if stage is not None else self.default_stage
        self.retry_after: float | None = None
        """Seconds the peer asked to wait (``Retry-After`` on 429/503) before the next attempt."""

    @property
    def reason(self) -> str:
        """A CamelCase reason for conditions and the ``reason`` metric label: the class name."""
        return type(self).__name__

    def __str__(self) -> str:
        return self.message


class SourceError(AgentError):
    """Fetching the series from the metrics source failed."""

    default_stage: Stage | None = "fetch"


class PrometheusUnavailable(SourceError):  # noqa: N818 - names of the agent's public contract
    """Prometheus could not be reached or answered with a server-side error."""

    transient = True


class PrometheusTimeout(PrometheusUnavailable):
    """Prometheus did not send its complete answer within the attempt's deadline."""


class PrometheusQueryError(SourceError):
    """Prometheus rejected one of the queries.

    Args:
        message: the sentence to report.
        query_index: position of the failing query (0-based) in the scorer's query list.
        query: the query text, possibly truncated for display.
        error_type: Prometheus' ``errorType`` (``bad_data``, ``execution``, ...), if it sent one the
            Prometheus API defines.
        prometheus_error: kept for callers that set it; the agent's clients leave it empty, as
            Prometheus' free-text ``error`` is never repeated (``dynamic_scoring.agent.source.prometheus``).
    """

    def __init__(
        self,
        message: str,
        *,
        query_index: int,
        query: str,
        error_type: str = "",
        prometheus_error: str = "",
    ) -> None:
        super().__init__(message)
        self.query_index = query_index
        self.query = query
        self.error_type = error_type
        self.prometheus_error = prometheus_error


class PrometheusAccessDenied(SourceError):  # noqa: N818 - names of the agent's public contract
    """Prometheus (or the proxy in front of it) refused the request's credentials: HTTP 401 or 403.

    Not a problem of the query, so not a ``PrometheusQueryError``: the fix is a token, a binding or a
    role.  When the answer is kube-rbac-proxy's (OpenShift's Thanos querier), the message names the
    identity and the permission it lacks, read from the proxy's fixed sentence
    (``dynamic_scoring.agent.source.access``); other free text from the server is never repeated.
    """


class PrometheusRequestInvalid(SourceError):  # noqa: N818 - names of the agent's public contract
    """The request to Prometheus cannot be sent as configured (the HTTP library refuses the URL)."""


class AddressRefused(AgentError):  # noqa: N818 - names of the agent's public contract
    """The request's host is (or resolves to) an address the agent's ``AddressPolicy`` refuses.

    Raised before any connection is made.  ``host`` and ``category`` (``loopback``, ``link-local``,
    ``metadata`` ...) say which rule; an administrator allows a network with the AddOnDeploymentConfig
    variable ``AgentAllowCIDRs`` (docs/agent.md).  Never transient: the next attempt would be refused
    the same way.

    Args:
        message: the sentence to report.
        host: the host as the URL named it.
        category: the refused category.
    """

    def __init__(
        self, message: str, *, host: str = "", category: str = "", stage: Stage | None = None
    ) -> None:
        super().__init__(message, stage=stage)
        self.host = host
        self.category = category


class PrometheusAddressRefused(SourceError, AddressRefused):  # noqa: N818 - the agent's public contract
    """Prometheus' host is an address the agent may not connect to."""


class PrometheusResponseError(SourceError):
    """Prometheus answered, but not with a range-query matrix the agent can forward."""


class ScorerError(AgentError):
    """Calling the scoring API failed or its answer cannot be used."""

    default_stage: Stage | None = "score"


class ScorerUnavailable(ScorerError):  # noqa: N818 - names of the agent's public contract
    """The scoring API could not be reached (refused, reset, DNS)."""

    transient = True


class ScorerTimeout(ScorerUnavailable):
    """The scoring API did not send its complete answer within the attempt's deadline."""


class ScorerHTTPError(ScorerError):
    """The scoring API answered with a status outside 2xx.

    Args:
        message: the sentence to report.
        status: the HTTP status code.
    """

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status
        self.transient = status >= 500 or status in (408, 429)


class ScorerRequestInvalid(ScorerError):  # noqa: N818 - names of the agent's public contract
    """The request to the scoring API cannot be sent as configured (the HTTP library refuses the URL)."""


class ScorerAddressRefused(ScorerError, AddressRefused):  # noqa: N818 - the agent's public contract
    """The scoring API's host is an address the agent may not connect to."""


class ScorerResponseInvalid(ScorerError):  # noqa: N818 - names of the agent's public contract
    """The scoring API's body is not a valid scoring response."""


class ScorerResponseTooLarge(ScorerError):  # noqa: N818 - names of the agent's public contract
    """The scoring API's body exceeded the size limit; reading stopped at the limit."""


class ScorerTooManyResults(ScorerError):  # noqa: N818 - names of the agent's public contract
    """The scoring API returned more results than the agent publishes for one scorer.

    Counted before the results are validated or turned into metrics, so an oversized answer costs
    neither memory nor ``/metrics`` series; the last good scores stay until they expire.
    """


class ItemNameCollision(ScorerError):  # noqa: N818 - names of the agent's public contract
    """Two or more results of one answer render to the same item name under ``scoreDimensionFormat``.

    No one of them is the item's value, so nothing is published: the last good scores stay until
    they expire.  The message names the item, the format, the labels the results differ in and a
    format that would tell them apart (``dynamic_scoring.agent.items.dimensions.describe_collisions``).
    """


class AuthError(AgentError):
    """Credentials or TLS material for an endpoint could not be prepared."""


class SecretNotFound(AuthError):  # noqa: N818 - names of the agent's public contract
    """A referenced Secret, or a key inside it, does not exist.

    The message names namespace, Secret and key (never the value), for example
    ``secret dynamic-scoring/prom-token has no key "token"``.
    """


class SecretNotBound(AuthError):  # noqa: N818 - names of the agent's public contract
    """A Secret exists but its owner has not bound it to the host the request would go to.

    The agent sends a Secret's value only to hosts listed in the Secret's
    ``dynamic-scoring.open-cluster-management.io/allowed-hosts`` annotation; otherwise the request
    is not sent at all.  The message names the Secret, the destination, the annotation and the
    ``kubectl annotate`` command that binds it (never a value).
    """


class SecretInvalid(AuthError):  # noqa: N818 - names of the agent's public contract
    """A Secret value exists but cannot be used: a malformed PEM, a token with a line break inside."""


class PublishError(AgentError):
    """Writing the result (the AddOnPlacementScore) failed."""

    default_stage: Stage | None = "write"


class ScoreNameTaken(PublishError):  # noqa: N818 - names of the agent's public contract
    """The AddOnPlacementScore of this score name exists and this addon's agent did not create it.

    Another addon (or a person) owns it: the agent neither writes, relabels, re-owns nor deletes
    it, and publishes nothing for the scorer on this cluster until the name is free.
    """


__all__ = [
    "AddressRefused",
    "AgentError",
    "AuthError",
    "ItemNameCollision",
    "PrometheusAccessDenied",
    "PrometheusAddressRefused",
    "PrometheusQueryError",
    "PrometheusRequestInvalid",
    "PrometheusResponseError",
    "PrometheusTimeout",
    "PrometheusUnavailable",
    "PublishError",
    "ScoreNameTaken",
    "ScorerAddressRefused",
    "ScorerError",
    "ScorerHTTPError",
    "ScorerRequestInvalid",
    "ScorerResponseInvalid",
    "ScorerResponseTooLarge",
    "ScorerTimeout",
    "ScorerTooManyResults",
    "ScorerUnavailable",
    "SecretInvalid",
    "SecretNotBound",
    "SecretNotFound",
    "SourceError",
    "Stage",
]
