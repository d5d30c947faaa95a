"""`dynamic-scoring-agent`: the per-cluster process, wiring the scoring core to Kubernetes.

Flags follow upstream's agent (`--hub-kubeconfig`, `--managed-kubeconfig`, `--cluster-name`,
`--addon-namespace`, `--addon-name`) so existing Deployments translate one to one; the rest are
additions with defaults that match the Deployment this project renders.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from dynamic_scoring.agent.errors import PublishError
from dynamic_scoring.agent.health import Health, Heartbeat
from dynamic_scoring.agent.kube.lease import LeaseRenewer
from dynamic_scoring.agent.kube.scores import KubeScorePublisher
from dynamic_scoring.agent.kube.secrets import KubeSecretReader
from dynamic_scoring.agent.kube.summaries import CONFIGMAP_NAME, SummaryWatcher
from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.options import (
    DEAD_WORKER_EXIT_SECONDS,
    WATCH_DOWN_LIMIT_SECONDS,
    AgentOptions,
    OtlpOptions,
)
from dynamic_scoring.agent.own_token import OwnToken
from dynamic_scoring.agent.proxy import proxy_settings_from_env
from dynamic_scoring.agent.server import HealthServer
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.source.otlp.access import ReceiverAccess
from dynamic_scoring.agent.source.otlp.receiver import OtlpReceiver
from dynamic_scoring.agent.source.otlp.store import LabelLimits, SeriesStore
from dynamic_scoring.agent.source.otlp.telemetry import OtlpTelemetry
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.contract.score_size import (
    MAX_SCORE_BYTES,
    MAX_SCORE_BYTES_SETTING,
    MIN_SCORE_BYTES_SETTING,
)
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.outbound.addresses import AGENT_ALLOW_CIDRS_ENV, AddressPolicy
from dynamic_scoring.runtime.bind_address import parse_bind_address

log = logging.getLogger("dynamic_scoring.agent")

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
SHUTDOWN_SECONDS = 4.0


@dataclass
class Agent:
    """The parts of one running agent, wired together; `serve` runs them."""

    supervisor: Supervisor
    publisher: KubeScorePublisher
    watcher: SummaryWatcher
    lease: LeaseRenewer
    health: Health
    server: HealthServer
    dead_worker_exit_seconds: float
    heartbeat: Heartbeat = field(default_factory=Heartbeat)
    exit_reason: str = ""
    otlp: OtlpReceiver | None = None
    """The OTLP/HTTP receiver, when ``--otlp-bind-address`` is set."""

    async def serve(self, stop: asyncio.Event) -> int:
        """Run until `stop` is set (exit code 0) or a loop dies (exit code 1).

        The long-lived loops are the summaries watch, the Lease and the worker watchdog.  Any of
        them ending is a crash: the process exits non-zero so that the kubelet (or the e2e process
        runner) restarts it, instead of running on with a part missing.
        """
        self.server.start()
        if self.otlp is not None:
            self.otlp.start()
        loops = [
            asyncio.create_task(self.watcher.run(), name="summaries"),
            asyncio.create_task(self.lease.run(), name="lease"),
            asyncio.create_task(self._watchdog(), name="watchdog"),
        ]
        cleanup = asyncio.create_task(self._remove_orphans(), name="orphan-cleanup")
        stopping = asyncio.create_task(stop.wait(), name="stop")
        code = 0
        try:
            done, _ = await asyncio.wait([stopping, *loops], return_when=asyncio.FIRST_COMPLETED)
            for task in loops:
                if task in done:
                    code = 1
                    exc = None if task.cancelled() else task.exception()
                    self.exit_reason = f"{task.get_name()} loop ended: {exc!r}"
                    log.critical("%s; exiting with code 1 so that the agent is restarted", self.exit_reason)
        finally:
            log.info("stopping")
            for pending in (*loops, cleanup, stopping):
                pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*loops, cleanup, stopping, return_exceptions=True)
            await self.supervisor.close(SHUTDOWN_SECONDS)
            self.server.stop()
            if self.otlp is not None:
                self.otlp.stop()
        return code

    async def _watchdog(self) -> None:
        """End the process once a worker task has been dead for `dead_worker_exit_seconds`.

        Until then `/healthz` says which one and the Lease is not renewed, so the state is visible
        before the restart.
        """
        dead_since: float | None = None
        while True:
            self.heartbeat.beat()
            self.supervisor.note_progress()
            dead = self.supervisor.dead_workers()
            now = time.monotonic()
            if not dead:
                dead_since = None
            elif dead_since is None:
                dead_since = now
            elif now - dead_since >= self.dead_worker_exit_seconds:
                raise RuntimeError(f"worker task(s) dead: {', '.join(sorted(dead))}")
            await asyncio.sleep(0.5)

    async def _remove_orphans(self) -> None:
        """Once the first summary list is applied, delete our APSs that no scorer publishes."""
        await self.watcher.applied_once.wait()
        backoff = 1.0
        while True:
            try:
                owned = await self.publisher.list_owned()
                orphans = await self.supervisor.remove_orphans(owned)
                log.info(
                    "start-up check: %d APS(s) of ours on the hub, %d orphaned", len(owned), len(orphans)
                )
                return
            except PublishError as exc:
                log.warning("start-up check for orphaned APSs failed (%s); retrying in %.0fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 60.0)

    def on_sighup(self) -> None:
        """SIGHUP: re-apply the summaries now and retry owed APS deletes now; keep running."""
        log.info("SIGHUP: re-applying the summaries and retrying pending APS deletes")
        self.watcher.request_resync()
        self.supervisor.retry_removals_now()


def build_agent(hub: KubeAPI, managed: KubeAPI, options: AgentOptions) -> Agent:
    """Wire the scoring core to the two clusters' APIs (nothing runs until `Agent.serve`)."""
    metrics = AgentMetrics()
    o = options
    publisher = KubeScorePublisher(
        hub, o.cluster_name, addon_name=o.addon_name, adopt_unlabelled=o.adopt_unlabelled_scores
    )
    otlp_store = None
    otlp = None
    if o.otlp is not None:
        otlp_store = SeriesStore(max_series=o.otlp.max_series, label_limits=o.otlp.label_limits)
        otlp = OtlpReceiver(otlp_store, host=o.otlp.bind[0], port=o.otlp.bind[1], access=o.otlp.access)
        metrics.registry.register(OtlpTelemetry(otlp_store, otlp))
    supervisor = Supervisor(
        cluster_name=o.cluster_name,
        secrets=KubeSecretReader(managed, o.addon_namespace),
        publisher=publisher,
        metrics=metrics,
        settings=o.settings,
        otlp_store=otlp_store,
    )
    watcher = SummaryWatcher(
        managed,
        o.addon_namespace,
        supervisor.apply_payload,
        name=o.config_map,
        resync_seconds=o.watch_resync_seconds,
    )

    def watch_check() -> str | None:
        down = watcher.down_for()
        if down > o.watch_down_limit_seconds:
            return (
                f"summaries watch of {watcher.where} down for {down:.0f}s "
                f"(limit {o.watch_down_limit_seconds:.0f}s)"
            )
        return None

    def workers_check() -> str | None:
        dead = supervisor.dead_workers()
        if dead:
            return "worker task ended: " + ", ".join(f"{name} ({how})" for name, how in sorted(dead.items()))
        return None

    def starved_check() -> str | None:
        starved = supervisor.starved_workers()
        if starved:
            return "worker finished no cycle within its scores' validity: " + ", ".join(
                f"{name} ({since:.0f}s, limit {bound:.0f}s)"
                for name, (since, bound) in sorted(starved.items())
            )
        return None

    health = Health([watch_check, workers_check, starved_check])
    lease = LeaseRenewer(
        managed,
        o.addon_namespace,
        o.addon_name,
        holder=os.environ.get("HOSTNAME") or f"{o.addon_name}-agent-{o.cluster_name}",
        period=o.lease_seconds,
        healthy=lambda: watcher.applied_once.is_set() and health.healthy(),
        owner_deployment=o.owner_deployment,
    )
    heartbeat = Heartbeat()
    server = HealthServer(
        metrics,
        lambda: supervisor.ready,
        host=o.bind[0],
        port=o.bind[1],
        problems=health.problems,
        live=heartbeat.problems,
    )
    return Agent(
        supervisor,
        publisher,
        watcher,
        lease,
        health,
        server,
        o.dead_worker_exit_seconds,
        heartbeat,
        otlp=otlp,
    )


async def run_agent(hub_kubeconfig: Path, managed_kubeconfig: Path | None, options: AgentOptions) -> int:
    """Run until SIGTERM/SIGINT (exit code 0, within `SHUTDOWN_SECONDS` plus a margin) or a crash (1)."""
    agent = build_agent(KubeAPI(hub_kubeconfig), KubeAPI(managed_kubeconfig), options)
    if agent.otlp is not None:
        access = agent.otlp.access
        log.info(
            "OTLP/HTTP receiver on %s://%s:%d (POST /v1/metrics; bearer token: %s, client certificates: %s)",
            agent.otlp.scheme,
            options.otlp.bind[0] if options.otlp else "",
            agent.otlp.port,
            "required" if access.bearer_token_file else "no",
            "required" if access.client_ca_file else "no",
        )
    log.info(
        "agent for cluster %s started: watching configmap %s/%s, metrics on %s:%d",
        options.cluster_name,
        options.addon_namespace,
        options.config_map,
        options.bind[0],
        agent.server.port,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, agent.on_sighup)
    return await agent.serve(stop)


def _own_token(path: Path | None, destinations: str, scorers: str | None) -> OwnToken | None:
    """The agent's own token settings; both the file and its destinations, or neither."""
    if path is None:
        if destinations.strip() or scorers is not None:
            raise click.UsageError(
                "--service-account-token-destinations/--service-account-token-scorers need "
                "--service-account-token-file"
            )
        return None
    try:
        own = OwnToken(path, destinations, scorers)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--service-account-token-destinations") from exc
    logging.getLogger(__name__).info(
        "the agent's ServiceAccount token (%s) may be sent to sources at %s%s",
        path,
        destinations.strip(),
        f" by DynamicScorers {scorers.strip()}" if scorers is not None else "",
    )
    return own


@click.command(context_settings={"show_default": True, "max_content_width": 100})
@click.option(
    "--hub-kubeconfig",
    type=click.Path(path_type=Path),
    required=True,
    help="Kubeconfig for the hub (the mounted <addon>-hub-kubeconfig Secret); reloaded when rotated.",
)
@click.option(
    "--managed-kubeconfig",
    type=click.Path(path_type=Path),
    default=None,
    help="Kubeconfig for the managed cluster. Default: in-cluster configuration.",
)
@click.option("--cluster-name", required=True, help="This managed cluster's name (its namespace on the hub).")
@click.option(
    "--addon-namespace",
    envvar="POD_NAMESPACE",
    required=True,
    show_envvar=True,
    help="Install namespace: where the summary ConfigMap, auth Secrets and health Lease live.",
)
@click.option("--addon-name", default="dynamic-scoring", help="Addon name; also the health Lease's name.")
@click.option("--metrics-bind-address", default=":8080", help="host:port for /metrics, /healthz and /readyz.")
@click.option("--config-map", default=CONFIGMAP_NAME, help="Name of the summary ConfigMap.")
@click.option(
    "--lease-renew-seconds", type=click.FloatRange(min=1), default=60.0, help="Health Lease renewal period."
)
@click.option(
    "--max-concurrent-cycles", type=click.IntRange(min=1), default=8, help="Scoring cycles running at once."
)
@click.option(
    "--max-score-bytes",
    type=click.IntRange(min=MIN_SCORE_BYTES_SETTING, max=MAX_SCORE_BYTES_SETTING),
    default=MAX_SCORE_BYTES,
    show_default=True,
    help="Largest JSON of one AddOnPlacementScore's scores; larger fail the cycle (ScorerTooManyResults). "
    "The default fits etcd's default 1.5 MiB request limit: raise it only where the hub's etcd allows more.",
)
@click.option(
    "--allow-cidr",
    "allow_cidrs",
    multiple=True,
    metavar="CIDR",
    help="A network the agent may call although it is loopback, link-local, metadata, unspecified, "
    "multicast or reserved (private networks are allowed anyway); repeatable or comma/space separated. "
    f"Added to the networks in env {AGENT_ALLOW_CIDRS_ENV}. The hub renders it from the "
    "AddOnDeploymentConfig variable AgentAllowCIDRs. Default: none.",
)
@click.option(
    "--adopt-unlabelled-scores",
    is_flag=True,
    help="Take over an existing AddOnPlacementScore of a scorer's name that has no owner and no addon "
    "label (as the upstream Go agent leaves them), instead of leaving it alone with ScoreNameTaken. "
    "For a move from the upstream agent only; the hub renders it when its manager has the same flag.",
)
@click.option(
    "--trust-proxy-ca-for-destinations",
    is_flag=True,
    help="Also trust the proxy's CA bundle (CA_BUNDLE_FILE_PATH, from the AddOnDeploymentConfig) for the "
    "scorers and Prometheus called through the proxy, for a proxy that intercepts TLS. Without it that CA "
    "verifies only the connection to an https:// proxy. The hub renders it when its manager has the same "
    "flag.",
)
@click.option(
    "--service-account-token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The agent's projected ServiceAccount token, sent to metrics sources whose sourceAuth asks for "
    "agentServiceAccountToken, and only to --service-account-token-destinations. Read at every cycle, so "
    "the kubelet's rotation applies. The hub renders it from the AddOnDeploymentConfig variable "
    "AgentTokenDestinations. Default: none (a summary asking for it fails with SecretNotBound).",
)
@click.option(
    "--service-account-token-destinations",
    default="",
    metavar="ENTRIES",
    help="Where the token may go, in the allowed-hosts annotation's syntax (host, host:port, scheme://host, "
    "*.domain, with an optional path prefix; comma or space separated). Required with the file.",
)
@click.option(
    "--service-account-token-scorers",
    default=None,
    metavar="NAMES",
    help="The DynamicScorers that may use the token (comma or space separated). Default: any scorer, "
    "towards the destinations only.",
)
@click.option(
    "--watch-down-limit-seconds",
    type=click.FloatRange(min=1),
    default=WATCH_DOWN_LIMIT_SECONDS,
    help="Report unhealthy once the summaries watch has been unable to list for this long.",
)
@click.option(
    "--dead-worker-exit-seconds",
    type=click.FloatRange(min=0),
    default=DEAD_WORKER_EXIT_SECONDS,
    help="Exit with code 1 once a worker task has been dead this long (unhealthy meanwhile).",
)
@click.option(
    "--owner-deployment",
    default=None,
    help="The agent's own Deployment in --addon-namespace; it becomes the owner of the health Lease, "
    "so the Lease is garbage-collected with the agent when the addon is disabled.",
)
@click.option(
    "--otlp-bind-address",
    default="",
    help="host:port of the OTLP/HTTP metrics receiver (OpenTelemetry sources; 4318 is OTLP/HTTP's "
    "port). Empty: no receiver, no open port.",
)
@click.option(
    "--otlp-max-series",
    type=click.IntRange(min=1),
    default=20_000,
    help="Most pushed series the OTLP receiver holds; new series beyond it are dropped and counted.",
)
@click.option(
    "--otlp-bearer-token-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="File holding the token OTLP pushers must send as 'Authorization: Bearer <token>' (a mounted "
    "Secret; re-read when it changes). While it is missing or empty every push is refused.",
)
@click.option(
    "--otlp-tls-cert-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Server certificate (PEM) of the OTLP receiver: serve HTTPS. Needs --otlp-tls-key-file.",
)
@click.option(
    "--otlp-tls-key-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Private key (PEM) of --otlp-tls-cert-file.",
)
@click.option(
    "--otlp-client-ca-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="CA bundle (PEM) that signs OTLP pushers' client certificates: require one (mutual TLS).",
)
@click.option(
    "--otlp-max-labels",
    type=click.IntRange(min=1),
    default=LabelLimits.max_labels,
    help="Most labels one pushed series may have; points of a new series with more are refused.",
)
@click.option(
    "--otlp-max-label-name-length",
    type=click.IntRange(min=1),
    default=LabelLimits.max_name_length,
    help="Longest label name (characters) of a pushed series.",
)
@click.option(
    "--otlp-max-label-value-length",
    type=click.IntRange(min=1),
    default=LabelLimits.max_value_length,
    help="Longest label value (characters) of a pushed series.",
)
@click.option(
    "--otlp-max-label-chars",
    type=click.IntRange(min=1),
    default=LabelLimits.max_total_chars,
    help="Most characters of label names and values together in one pushed series.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    help="Logging verbosity.",
)
def main(
    hub_kubeconfig: Path,
    managed_kubeconfig: Path | None,
    cluster_name: str,
    addon_namespace: str,
    addon_name: str,
    metrics_bind_address: str,
    config_map: str,
    lease_renew_seconds: float,
    max_concurrent_cycles: int,
    max_score_bytes: int,
    allow_cidrs: tuple[str, ...],
    adopt_unlabelled_scores: bool,
    trust_proxy_ca_for_destinations: bool,
    service_account_token_file: Path | None,
    service_account_token_destinations: str,
    service_account_token_scorers: str | None,
    watch_down_limit_seconds: float,
    dead_worker_exit_seconds: float,
    owner_deployment: str | None,
    otlp_bind_address: str,
    otlp_max_series: int,
    otlp_bearer_token_file: Path | None,
    otlp_tls_cert_file: Path | None,
    otlp_tls_key_file: Path | None,
    otlp_client_ca_file: Path | None,
    otlp_max_labels: int,
    otlp_max_label_name_length: int,
    otlp_max_label_value_length: int,
    otlp_max_label_chars: int,
    log_level: str,
) -> None:
    """Score this managed cluster: feed metrics to every configured scoring API, publish the results.

    Reads scorer summaries from the ConfigMap the hub delivers, runs one worker per score name,
    writes AddOnPlacementScores to this cluster's namespace on the hub, exports Prometheus metrics,
    and renews the health Lease OCM uses to mark the addon Available.

    Exit codes: 0 after SIGTERM/SIGINT; 1 when a loop of the agent died (it should be restarted).
    SIGHUP re-applies the summary ConfigMap and retries pending AddOnPlacementScore deletes.
    """
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not DNS_LABEL.match(cluster_name):
        raise click.BadParameter(
            f"{cluster_name!r} is not a valid cluster (namespace) name", param_hint="--cluster-name"
        )
    if not hub_kubeconfig.exists():
        raise click.ClickException(
            f"hub kubeconfig {hub_kubeconfig} does not exist; the addon's registration has not produced "
            f"the Secret {addon_name}-hub-kubeconfig yet (check the ManagedClusterAddOn's conditions)"
        )
    if managed_kubeconfig is not None and not managed_kubeconfig.exists():
        raise click.BadParameter(f"{managed_kubeconfig} does not exist", param_hint="--managed-kubeconfig")
    try:
        bind = parse_bind_address(metrics_bind_address)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--metrics-bind-address") from exc
    otlp_bind = None
    if otlp_bind_address:
        try:
            otlp_bind = parse_bind_address(otlp_bind_address)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--otlp-bind-address") from exc
    try:
        otlp_access = ReceiverAccess(
            bearer_token_file=otlp_bearer_token_file,
            tls_cert_file=otlp_tls_cert_file,
            tls_key_file=otlp_tls_key_file,
            client_ca_file=otlp_client_ca_file,
        )
    except ValueError as exc:
        raise click.UsageError(f"OTLP receiver: {exc}") from exc
    otlp = None
    if otlp_bind is not None:
        label_limits = LabelLimits(
            max_labels=otlp_max_labels,
            max_name_length=otlp_max_label_name_length,
            max_value_length=otlp_max_label_value_length,
            max_total_chars=otlp_max_label_chars,
        )
        otlp = OtlpOptions(otlp_bind, otlp_max_series, otlp_access, label_limits)
    # The flag (from the AddOnDeploymentConfig) and the environment (the test harness) add up: a
    # harness that opts in to loopback must not lose an administrator's networks, nor the reverse.
    try:
        policy = AddressPolicy.parse([*allow_cidrs, os.environ.get(AGENT_ALLOW_CIDRS_ENV, "")])
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=f"--allow-cidr or env {AGENT_ALLOW_CIDRS_ENV}") from exc
    logging.getLogger(__name__).info("%s", policy.describe("agent"))
    own_token = _own_token(
        service_account_token_file, service_account_token_destinations, service_account_token_scorers
    )
    settings = AgentSettings(
        max_concurrent_cycles=max_concurrent_cycles,
        max_score_bytes=max_score_bytes,
        # the proxy's CA travels with the proxy settings, which decide where it is trusted
        extra_ca_files=AgentSettings().extra_ca_files,
        proxies=proxy_settings_from_env(
            os.environ, trust_ca_for_destinations=trust_proxy_ca_for_destinations
        ),
        address_policy=policy,
        own_token=own_token,
    )
    options = AgentOptions(
        cluster_name=cluster_name,
        addon_namespace=addon_namespace,
        addon_name=addon_name,
        bind=bind,
        config_map=config_map,
        lease_seconds=lease_renew_seconds,
        settings=settings,
        watch_down_limit_seconds=watch_down_limit_seconds,
        dead_worker_exit_seconds=dead_worker_exit_seconds,
        owner_deployment=owner_deployment,
        otlp=otlp,
        adopt_unlabelled_scores=adopt_unlabelled_scores,
    )
    code = asyncio.run(run_agent(hub_kubeconfig, managed_kubeconfig, options))
    sys.exit(code)
