"""`dynamic-scoring-addon`: the hub side of the addon.

`dynamic-scoring-addon manager` runs the addon manager (docs/addon-manager.md).  Flags are
named as controller-runtime's managers name them, so the Deployment reads like any other.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType

import click
from kubernetes.config import ConfigException

from dynamic_scoring.addon.config.variables import MONITORING_CLUSTER_ROLES
from dynamic_scoring.addon.constants import AGENT_IMAGE_ENV, DEFAULT_IMAGE
from dynamic_scoring.addon.dispatch import DEFAULT_DELAY_SECONDS, DISPATCHER_NAME
from dynamic_scoring.addon.logs import configure
from dynamic_scoring.addon.manager import (
    DEFAULT_LEASE_NAME,
    DEFAULT_NAMESPACE,
    Manager,
    ManagerOptions,
    build_api,
)
from dynamic_scoring.addon.render.image_allow import AGENT_IMAGE_ALLOW_ENV, parse_allow_values
from dynamic_scoring.addon.render.token_allow import (
    AGENT_MONITORING_ROLE_ALLOW_ENV,
    AGENT_MONITORING_ROLE_ALLOW_FLAG,
    AGENT_TOKEN_AUDIENCE_ALLOW_ENV,
    AGENT_TOKEN_AUDIENCE_ALLOW_FLAG,
    AGENT_TOKEN_DESTINATION_ALLOW_ENV,
    AGENT_TOKEN_DESTINATION_ALLOW_FLAG,
    AgentTokenAllow,
    parse_audience_allow,
    parse_destination_allow,
    parse_monitoring_role_allow,
)
from dynamic_scoring.outbound.addresses import PROBE_ALLOW_CIDRS_ENV, PROBE_DENY_PRIVATE_ENV, AddressPolicy


def _parsed(
    parse: Callable[[Iterable[str]], tuple[str, ...]], values: tuple[str, ...], flag: str
) -> tuple[str, ...]:
    """`parse(values)`, or a usage error naming `flag`.

    A bad allow-list stops the start rather than leaving the hub admin wondering why ADCs are refused.
    """
    try:
        return parse(values)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from exc


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """The dynamic-scoring OCM addon, hub side."""


@main.command()
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Hub kubeconfig. Default: the pod's in-cluster ServiceAccount.",
)
@click.option(
    "--namespace",
    envvar="POD_NAMESPACE",
    default=DEFAULT_NAMESPACE,
    show_default=True,
    help="The manager's namespace (env POD_NAMESPACE).",
)
@click.option(
    "--agent-image",
    envvar=AGENT_IMAGE_ENV,
    default=DEFAULT_IMAGE,
    show_default=True,
    help=f"Image of the agent rendered into every ManifestWork (env {AGENT_IMAGE_ENV}); "
    "an ADC's Image variable overrides it per cluster.",
)
@click.option(
    "--metrics-bind-address",
    default=":8080",
    show_default=True,
    help="host:port serving /healthz, /readyz and /metrics (':port' = all interfaces).",
)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=True,
    show_default=True,
    help="Run only while holding the leader Lease (required with more than one replica).",
)
@click.option("--leader-election-namespace", help="Namespace of the leader Lease. Default: --namespace.")
@click.option(
    "--leader-election-id", default=DEFAULT_LEASE_NAME, show_default=True, help="Name of the Lease."
)
@click.option(
    "--leader-election-lease-duration",
    type=click.FloatRange(min=2),
    default=15.0,
    show_default=True,
    help="Seconds a standby waits on an unrenewed Lease before taking over.",
)
@click.option(
    "--leader-election-renew-deadline",
    type=click.FloatRange(min=1),
    default=10.0,
    show_default=True,
    help="Seconds the leader keeps trying to renew before it exits.",
)
@click.option(
    "--leader-election-retry-period",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="Seconds between Lease attempts.",
)
@click.option(
    "--resync-period",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    help="Seconds between full resyncs of every controller (0 disables).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=64),
    default=4,
    show_default=True,
    help="Concurrent reconciles of each per-cluster controller (deploy, registration, addon-config).",
)
@click.option(
    "--scorer-probe-period",
    type=click.FloatRange(min=0.1, max=3600),
    default=30.0,
    show_default=True,
    help="Seconds between probe rounds of each DynamicScorer (/healthz, and /config in Full mode).",
)
@click.option(
    "--scorer-probe-jitter",
    type=click.FloatRange(min=0, max=0.9),
    default=0.1,
    show_default=True,
    help="Each probe delay is stretched or shrunk by up to this fraction.",
)
@click.option(
    "--scorer-failure-threshold",
    type=click.IntRange(min=1, max=100),
    default=3,
    show_default=True,
    help="Consecutive failed probe rounds that make a DynamicScorer Inactive.",
)
@click.option(
    "--scorer-probe-concurrency",
    type=click.IntRange(min=1, max=256),
    default=8,
    show_default=True,
    help="Probe rounds in flight at once (each holds a worker for at most its timeout).",
)
@click.option(
    "--scorer-probe-allow-cidr",
    "scorer_probe_allow_cidrs",
    multiple=True,
    envvar=PROBE_ALLOW_CIDRS_ENV,
    metavar="CIDR",
    help="A network the DynamicScorer probe may reach although it is loopback, link-local, metadata, "
    "reserved or (with --scorer-probe-deny-private-networks) private; repeatable, or a comma- or "
    f"space-separated list in env {PROBE_ALLOW_CIDRS_ENV}. For development hubs whose scorers run "
    "on the same host (127.0.0.0/8). Default: none.",
)
@click.option(
    "--scorer-probe-deny-private-networks/--scorer-probe-allow-private-networks",
    envvar=PROBE_DENY_PRIVATE_ENV,
    default=False,
    show_default=True,
    help="Also refuse private networks (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7), where "
    "in-cluster scorers usually live; allow their own range again with --scorer-probe-allow-cidr.",
)
@click.option(
    "--adopt-unlabelled-scores",
    envvar="DYNAMIC_SCORING_ADOPT_UNLABELLED_SCORES",
    is_flag=True,
    default=False,
    help="Migration from the upstream Go agent only: let agents (and, for AgentReplicas 0 clusters, the "
    "manager) take over an existing AddOnPlacementScore of a scorer's name that has no owner and no "
    "addon label, as the upstream agent leaves them. Without it, any AddOnPlacementScore this addon did "
    "not create is left untouched and its scorer reports ScoreNameTaken.",
)
@click.option(
    "--agent-image-allow",
    "agent_image_allow",
    multiple=True,
    envvar=AGENT_IMAGE_ALLOW_ENV,
    metavar="REPOSITORY_PREFIX",
    help="A repository prefix the agent image may come from, after an ADC's Image variable, its "
    "registries and the cluster's image-registries annotation are applied (e.g. "
    "registry.example.com/mirror; any tag or digest, matched at a '/' boundary); repeatable, or a "
    f"comma- or space-separated list in env {AGENT_IMAGE_ALLOW_ENV}. The repository of --agent-image "
    "is always allowed. Default: only that one, so whoever writes an ADC cannot choose the code that "
    "runs with the agent's rights.",
)
@click.option(
    AGENT_TOKEN_DESTINATION_ALLOW_FLAG,
    "agent_token_destination_allow",
    multiple=True,
    envvar=AGENT_TOKEN_DESTINATION_ALLOW_ENV,
    metavar="HTTPS_ENTRY",
    help="Where an ADC's AgentTokenDestinations may send the agent's own ServiceAccount token: an "
    "entry in the allowed-hosts syntax, https:// only (https://host[:port][/path-prefix] or "
    "https://*.domain[:port][/path-prefix]); repeatable, or a comma- or space-separated list in env "
    f"{AGENT_TOKEN_DESTINATION_ALLOW_ENV}. Every ADC destination must lie within one: same port, the "
    "host equal or below the wildcard's domain, the path at or below the prefix. Default: none, so "
    "whoever writes an ADC cannot choose where the agent's identity goes.",
)
@click.option(
    AGENT_TOKEN_AUDIENCE_ALLOW_FLAG,
    "agent_token_audience_allow",
    multiple=True,
    envvar=AGENT_TOKEN_AUDIENCE_ALLOW_ENV,
    metavar="AUDIENCE",
    help="An audience an ADC's AgentTokenAudience may name; repeatable, or a comma- or space-separated "
    f"list in env {AGENT_TOKEN_AUDIENCE_ALLOW_ENV}. An ADC without AgentTokenAudience (the "
    "kube-apiserver's own audience) needs none. Default: none.",
)
@click.option(
    AGENT_MONITORING_ROLE_ALLOW_FLAG,
    "agent_monitoring_role_allow",
    multiple=True,
    envvar=AGENT_MONITORING_ROLE_ALLOW_ENV,
    metavar="CLUSTER_ROLE",
    help="A ClusterRole an ADC's AgentMonitoringClusterRole may bind the agent to, of "
    f"{', '.join(MONITORING_CLUSTER_ROLES)}; repeatable, or a comma- or space-separated list in env "
    f"{AGENT_MONITORING_ROLE_ALLOW_ENV}. Default: none, as the binding is a cluster-wide grant on every "
    "cluster the ADC reaches.",
)
@click.option(
    "--trust-proxy-ca-for-destinations",
    envvar="DYNAMIC_SCORING_TRUST_PROXY_CA_FOR_DESTINATIONS",
    is_flag=True,
    default=False,
    help="For a proxy that intercepts TLS only: agents also trust an ADC's proxy caBundle for the "
    "scorers and Prometheus they call through it (rendered as the agent flag of the same name). Without "
    "it, that CA is trusted only for the TLS connection to an https:// proxy itself.",
)
@click.option(
    "--multikueue-order",
    envvar="DYNAMIC_SCORING_MULTIKUEUE_ORDER",
    is_flag=True,
    default=False,
    help="For every Placement in --multikueue-namespace labelled "
    "dynamic-scoring.open-cluster-management.io/multikueue-order=score, write a MultiKueueConfig of the "
    "Placement's name listing its decided clusters best-scored first, for Kueue's incremental dispatcher "
    "(Kueue v0.19+). Needs the RBAC of the multikueue-order kustomize component or the chart's "
    "multikueueOrder.enabled (docs/multikueue-order.md).",
)
@click.option(
    "--multikueue-namespace",
    envvar="DYNAMIC_SCORING_MULTIKUEUE_NAMESPACE",
    default="kueue-system",
    show_default=True,
    help="With --multikueue-order: the one namespace whose Placements may ask for an ordered "
    "MultiKueueConfig (where kueue-addon reads its Placements too).",
)
@click.option(
    "--multikueue-dispatch",
    envvar="DYNAMIC_SCORING_MULTIKUEUE_DISPATCH",
    is_flag=True,
    default=False,
    help="With --multikueue-order: act as Kueue's External MultiKueue dispatcher. A Workload waiting on "
    "an AdmissionCheck that names one of the ordered MultiKueueConfigs is nominated to the best-scored "
    "cluster, then to the next one after each --multikueue-dispatch-delay without an admission. Set "
    f"Kueue's multiKueue.dispatcherName to {DISPATCHER_NAME} and its feature gate "
    "WorkloadRequestUseMergePatch (docs/multikueue-order.md).",
)
@click.option(
    "--multikueue-dispatch-delay",
    envvar="DYNAMIC_SCORING_MULTIKUEUE_DISPATCH_DELAY",
    type=click.FloatRange(min=1.0, max=3600.0),
    default=DEFAULT_DELAY_SECONDS,
    show_default=True,
    help="With --multikueue-dispatch: seconds a nominated cluster has to reserve quota for a Workload "
    "before the next-best cluster is nominated as well.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="JSON logs on stderr at this level and above.",
)
def manager(
    kubeconfig: Path | None,
    namespace: str,
    agent_image: str,
    metrics_bind_address: str,
    leader_elect: bool,
    leader_election_namespace: str | None,
    leader_election_id: str,
    leader_election_lease_duration: float,
    leader_election_renew_deadline: float,
    leader_election_retry_period: float,
    resync_period: float,
    workers: int,
    scorer_probe_period: float,
    scorer_probe_jitter: float,
    scorer_failure_threshold: int,
    scorer_probe_concurrency: int,
    scorer_probe_allow_cidrs: tuple[str, ...],
    scorer_probe_deny_private_networks: bool,
    adopt_unlabelled_scores: bool,
    agent_image_allow: tuple[str, ...],
    agent_token_destination_allow: tuple[str, ...],
    agent_token_audience_allow: tuple[str, ...],
    agent_monitoring_role_allow: tuple[str, ...],
    trust_proxy_ca_for_destinations: bool,
    multikueue_order: bool,
    multikueue_namespace: str,
    multikueue_dispatch: bool,
    multikueue_dispatch_delay: float,
    log_level: str,
) -> None:
    """Run the addon manager: registration, CSR approval and agent delivery for every cluster."""
    if not leader_election_lease_duration > leader_election_renew_deadline > leader_election_retry_period:
        raise click.BadParameter(
            "need lease duration > renew deadline > retry period", param_hint="--leader-election-*"
        )
    if multikueue_dispatch and not multikueue_order:
        raise click.BadParameter(
            "the dispatcher nominates clusters in the order of the ordered MultiKueueConfigs: add "
            "--multikueue-order (chart: multikueueOrder.enabled=true)",
            param_hint="--multikueue-dispatch",
        )
    try:
        allowed = AddressPolicy.parse(scorer_probe_allow_cidrs).allow
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--scorer-probe-allow-cidr") from exc
    try:
        image_allow = parse_allow_values(agent_image_allow)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--agent-image-allow") from exc
    token_allow = AgentTokenAllow(
        destinations=_parsed(
            parse_destination_allow, agent_token_destination_allow, AGENT_TOKEN_DESTINATION_ALLOW_FLAG
        ),
        audiences=_parsed(parse_audience_allow, agent_token_audience_allow, AGENT_TOKEN_AUDIENCE_ALLOW_FLAG),
        monitoring_roles=_parsed(
            parse_monitoring_role_allow, agent_monitoring_role_allow, AGENT_MONITORING_ROLE_ALLOW_FLAG
        ),
    )
    configure(log_level)
    options = ManagerOptions(
        namespace=namespace,
        agent_image=agent_image,
        adopt_unlabelled_scores=adopt_unlabelled_scores,
        agent_image_allow=image_allow,
        agent_token_allow=token_allow,
        trust_proxy_ca_for_destinations=trust_proxy_ca_for_destinations,
        bind_address=metrics_bind_address,
        leader_elect=leader_elect,
        leader_election_namespace=leader_election_namespace,
        leader_election_id=leader_election_id,
        lease_seconds=leader_election_lease_duration,
        renew_deadline=leader_election_renew_deadline,
        retry_period=leader_election_retry_period,
        resync_seconds=resync_period,
        workers=workers,
        probe_period=scorer_probe_period,
        probe_jitter=scorer_probe_jitter,
        probe_failure_threshold=scorer_failure_threshold,
        probe_concurrency=scorer_probe_concurrency,
        probe_allow_cidrs=tuple(str(n) for n in allowed),
        probe_deny_private_networks=scorer_probe_deny_private_networks,
        multikueue_order=multikueue_order,
        multikueue_namespace=multikueue_namespace,
        multikueue_dispatch=multikueue_dispatch,
        multikueue_dispatch_delay=multikueue_dispatch_delay,
        identity=f"{os.environ.get('HOSTNAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}",
    )
    try:
        process = Manager(build_api(kubeconfig), options)
        process.serve()
    except (ValueError, OSError, ConfigException) as exc:
        raise click.ClickException(str(exc)) from exc
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sys.exit(process.run(stop))
