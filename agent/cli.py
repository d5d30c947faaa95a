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
from pathlib import Path

import click

from agent.k8s.lease import LeaseRenewer
from agent.k8s.scores import KubeScorePublisher
from agent.k8s.secrets import KubeSecretReader
from agent.k8s.summaries import CONFIGMAP_NAME, SummaryWatcher
from agent.metrics import AgentMetrics
from agent.server import HealthServer, parse_bind_address
from agent.settings import AgentSettings
from agent.supervisor import Supervisor
from dynamic_scoring.kube.api import KubeAPI

log = logging.getLogger("agent")

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
SHUTDOWN_SECONDS = 4.0


async def run_agent(
    *,
    hub_kubeconfig: Path,
    managed_kubeconfig: Path | None,
    cluster_name: str,
    addon_namespace: str,
    addon_name: str,
    bind: tuple[str, int],
    config_map: str,
    lease_seconds: float,
    settings: AgentSettings,
) -> None:
    """Run until SIGTERM/SIGINT, then stop within `SHUTDOWN_SECONDS` plus a margin."""
    hub = KubeAPI(hub_kubeconfig)
    managed = KubeAPI(managed_kubeconfig)
    metrics = AgentMetrics()
    supervisor = Supervisor(
        cluster_name=cluster_name,
        secrets=KubeSecretReader(managed, addon_namespace),
        publisher=KubeScorePublisher(hub, cluster_name, addon_name=addon_name),
        metrics=metrics,
        settings=settings,
    )

    watcher = SummaryWatcher(managed, addon_namespace, supervisor.apply_payload, name=config_map)
    lease = LeaseRenewer(
        managed,
        addon_namespace,
        addon_name,
        holder=os.environ.get("HOSTNAME") or f"{addon_name}-agent-{cluster_name}",
        period=lease_seconds,
        healthy=watcher.applied_once.is_set,
    )
    server = HealthServer(metrics, lambda: supervisor.ready, host=bind[0], port=bind[1])
    server.start()
    log.info(
        "agent for cluster %s started: watching configmap %s/%s, metrics on %s:%d",
        cluster_name,
        addon_namespace,
        config_map,
        bind[0],
        server.port,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tasks = [
        asyncio.create_task(watcher.run(), name="summaries"),
        asyncio.create_task(lease.run(), name="lease"),
    ]
    try:
        done, _ = await asyncio.wait(
            [asyncio.create_task(stop.wait()), *tasks], return_when=asyncio.FIRST_COMPLETED
        )
        for task in done:
            if task in tasks and task.exception() is not None:
                log.error("%s loop ended: %s", task.get_name(), task.exception())
    finally:
        log.info("stopping")
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
        await supervisor.close(SHUTDOWN_SECONDS)
        server.stop()


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
    log_level: str,
) -> None:
    """Score this managed cluster: feed metrics to every configured scoring API, publish the results.

    Reads scorer summaries from the ConfigMap the hub delivers, runs one worker per score name,
    writes AddOnPlacementScores to this cluster's namespace on the hub, exports Prometheus metrics,
    and renews the health Lease OCM uses to mark the addon Available.
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
    settings = AgentSettings(max_concurrent_cycles=max_concurrent_cycles)
    asyncio.run(
        run_agent(
            hub_kubeconfig=hub_kubeconfig,
            managed_kubeconfig=managed_kubeconfig,
            cluster_name=cluster_name,
            addon_namespace=addon_namespace,
            addon_name=addon_name,
            bind=bind,
            config_map=config_map,
            lease_seconds=lease_renew_seconds,
            settings=settings,
        )
    )
