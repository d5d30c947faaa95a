"""Tunables of the agent's scoring core, with the defaults the Deployment runs with.

Everything a scorer can choose lives in its summary; these are the agent-wide limits around it.
The CLI builds one ``AgentSettings`` and hands it to the ``Supervisor``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dynamic_scoring.agent.own_token import OwnToken
from dynamic_scoring.agent.proxy import ProxySettings
from dynamic_scoring.contract.score_size import MAX_SCORE_BYTES
from dynamic_scoring.outbound.addresses import STRICT, AddressPolicy

MIB = 1024 * 1024

OPENSHIFT_SERVICE_CA = Path("/var/run/secrets/openshift/service-ca/service-ca.crt")
"""Upstream's Deployment mounts OpenShift's service CA here; it is trusted in addition to system CAs."""
OPENSHIFT_POD_SERVICE_CA = Path("/var/run/secrets/kubernetes.io/serviceaccount/service-ca.crt")
"""Where OpenShift puts its service CA in every pod's ServiceAccount volume: it signs the Thanos
querier's certificate, so the agent reaches it with no CA Secret.  Absent elsewhere (skipped)."""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter for transient failures, always inside the cycle's budget.

    Attributes:
        base_delay: the first pause, in seconds; each further pause doubles, up to ``max_delay``.
        max_delay: upper bound of one pause.
        max_attempts: attempts per request, the first included.
        min_attempt_seconds: no new attempt starts with less than this much of the budget left.
    """

    base_delay: float = 0.5
    max_delay: float = 8.0
    max_attempts: int = 4
    min_attempt_seconds: float = 1.0


@dataclass(frozen=True)
class AgentSettings:
    """Agent-wide limits.

    Attributes:
        max_concurrent_cycles: cycles that may run at the same time across all scorers; the rest wait
            for a slot, so a burst of slow scorers cannot exhaust sockets or memory.
        default_timeout_seconds: per-request timeout when the summary sets no ``timeoutSeconds``;
            always further bounded by the time left in the scorer's interval.
        max_response_bytes: largest scoring-API response body accepted (read incrementally; the
            decompressed size counts).
        max_score_bytes: largest JSON of one AddOnPlacementScore's ``status.scores`` the agent
            writes (``dynamic_scoring.contract.score_size``: what a default hub's etcd can store); a scorer
            whose items are larger fails its cycle with ``ScorerTooManyResults`` before the write.
            An answer with more results than could fit with the shortest names is refused before
            its results are validated or exported.  A summary's ``maxScoreBytes`` lowers it for
            that scorer.
        max_source_bytes: largest Prometheus response body accepted, per query, after
            decompression.  32 MiB is twice the 17 MB of the benchmark's 10,000 series x 60 points.
        max_source_bytes_per_cycle: the bodies of all queries of one cycle together; they are held
            until the scoring call.  With ``max_concurrent_cycles`` cycles at once this bounds what
            source data can occupy (8 x 64 MiB worst case; typical answers are kilobytes).
        initial_jitter_seconds: the first cycle of a new worker starts after a random delay in
            ``[0, min(this, interval)]``, so that agents restarted together do not hit a shared
            scorer at the same instant.
        retry: backoff policy for transient failures.
        publish_timeout_seconds: limit for one ``ScorePublisher.publish`` call.
        stop_timeout_seconds: how long stopping a worker may take before it is abandoned.
        extra_ca_files: PEM files trusted in addition to the system store and certifi for endpoints
            that configure no CA of their own (missing files are skipped).
        user_agent: the ``User-Agent`` header of every request.
        proxies: outbound proxies for Prometheus and scorer calls (from the Deployment's proxy
            variables; see ``dynamic_scoring.agent.proxy``).
        address_policy: which addresses Prometheus and scorer calls may go to
            (``dynamic_scoring.outbound.addresses``).  The default refuses loopback, link-local, metadata,
            unspecified, multicast and reserved addresses and allows private networks, where
            in-cluster Services and pods live; ``--allow-cidr`` and ``DYNAMIC_SCORING_AGENT_ALLOW_CIDRS``
            add networks.  Tests that run scorers on 127.0.0.1 set ``AddressPolicy.parse("127.0.0.0/8")``.
        own_token: the agent's projected ServiceAccount token and where its admin lets it go
            (``dynamic_scoring.agent.own_token``); None when not enabled, the default.
    """

    max_concurrent_cycles: int = 8
    default_timeout_seconds: float = 30.0
    max_response_bytes: int = 8 * MIB
    max_score_bytes: int = MAX_SCORE_BYTES
    max_source_bytes: int = 32 * MIB
    max_source_bytes_per_cycle: int = 64 * MIB
    initial_jitter_seconds: float = 5.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    publish_timeout_seconds: float = 15.0
    stop_timeout_seconds: float = 3.0
    extra_ca_files: tuple[Path, ...] = (OPENSHIFT_SERVICE_CA, OPENSHIFT_POD_SERVICE_CA)
    user_agent: str = "dynamic-scoring-agent"
    proxies: ProxySettings = field(default_factory=ProxySettings)
    address_policy: AddressPolicy = STRICT
    own_token: OwnToken | None = None


__all__ = ["MIB", "OPENSHIFT_POD_SERVICE_CA", "OPENSHIFT_SERVICE_CA", "AgentSettings", "RetryPolicy"]
