"""What one agent process is started with: one value, built once from the flags.

The command line (`dynamic_scoring.agent.cli.main`) checks its flags and builds an `AgentOptions`;
`run_agent` and `build_agent` take that value instead of restating every option in their own
signatures, so a new flag is one field here and one line where the CLI fills it.  Tests build the
value directly, with the defaults below, and change only what they are about.

`AgentSettings` (the scoring loop's own knobs: concurrency, size limits, trust, proxies, the address
policy) is one field of it, because the supervisor and the workers read only that part.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dynamic_scoring.agent.kube.summaries import CONFIGMAP_NAME
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.source.otlp.access import ReceiverAccess
from dynamic_scoring.agent.source.otlp.store import LabelLimits

WATCH_DOWN_LIMIT_SECONDS = 120.0
"""The summaries watch may be unable to list for this long before the agent reports unhealthy."""
DEAD_WORKER_EXIT_SECONDS = 60.0
"""A dead worker task is reported this long (unhealthy, Lease not renewed) before the process exits 1."""


@dataclass(frozen=True)
class OtlpOptions:
    """The OTLP/HTTP receiver: where it listens, what it keeps, who may write to it."""

    bind: tuple[str, int]
    max_series: int = 20_000
    access: ReceiverAccess = field(default_factory=ReceiverAccess)
    label_limits: LabelLimits = field(default_factory=LabelLimits)


@dataclass(frozen=True)
class AgentOptions:
    """Everything one agent process is started with (see the module docstring)."""

    cluster_name: str
    addon_namespace: str
    addon_name: str = "dynamic-scoring"
    bind: tuple[str, int] = ("0.0.0.0", 8080)
    """host:port of /metrics, /healthz and /readyz (every address, as `--metrics-bind-address :8080`)."""
    config_map: str = CONFIGMAP_NAME
    lease_seconds: float = 60.0
    settings: AgentSettings = field(default_factory=AgentSettings)
    watch_down_limit_seconds: float = WATCH_DOWN_LIMIT_SECONDS
    dead_worker_exit_seconds: float = DEAD_WORKER_EXIT_SECONDS
    watch_resync_seconds: float = 300.0
    owner_deployment: str | None = None
    """The Deployment that owns the health Lease (garbage-collected with it); None: no owner."""
    otlp: OtlpOptions | None = None
    """The OTLP receiver; None: not started."""
    adopt_unlabelled_scores: bool = False
