"""The hub addon manager process: leader election, the controllers, health and metrics.

One replica leads (a coordination.k8s.io Lease in the manager's namespace) and runs every
controller of `CONTROLLER_FACTORIES` on one `ControllerManager` (shared watches); the others wait
to take over.  Each replica serves `/healthz`, `/readyz` and `/metrics` on one address.

Readiness and liveness while a resource is missing: each controller starts once its own watches
have listed, so a CRD not installed yet (or a list the RBAC forbids) holds back only the
controllers that use it.  `/healthz` stays 200 meanwhile (a restart would not install a CRD, and
a kubelet restart loop would also stop the controllers that do run); `/readyz` answers 503 and
names each waiting controller, what it waits for and what to do, because a leader with idle
controllers is not doing its job, and readiness is where `kubectl get pods` shows that.

Exit status, as a Deployment's restart policy expects it:
* 0 after SIGTERM/SIGINT (the leader releases its Lease first, so the standby takes over within
  one retry period rather than a lease duration);
* 1 when leadership is lost (the Lease could not be renewed within the renew deadline: a replica
  that cannot be sure it still leads must stop writing, and a fresh process is the simplest way
  to start from clean caches) or when the controller loop ended or raised on its own.

Fencing: the controllers write through `KubeAPI.fenced(elector.fence)`, so from the instant the
renew deadline has passed since the last renewal, no write leaves the process, even from a
reconcile already running, and even when the process was frozen (SIGSTOP, a paused VM) and has
not noticed yet.  The refused request raises `Fenced`, and the process exits 1 as above.
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest

from dynamic_scoring.addon.constants import ADDON_NAME, DEFAULT_IMAGE
from dynamic_scoring.addon.controllers import ControllerFactory, HubContext
from dynamic_scoring.addon.controllers.factories import CONTROLLER_FACTORIES
from dynamic_scoring.addon.dispatch import DEFAULT_DELAY_SECONDS
from dynamic_scoring.addon.logs import keyed
from dynamic_scoring.addon.registry.probe_settings import ProbeSettings
from dynamic_scoring.addon.render.token_allow import AgentTokenAllow
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.controller import ControllerManager
from dynamic_scoring.kube.leader import LeaderElector
from dynamic_scoring.kube.resources import DYNAMIC_SCORERS, MULTIKUEUE_CONFIGS, Resource
from dynamic_scoring.runtime.bind_address import parse_bind_address
from dynamic_scoring.runtime.threaded_server import (
    HEALTH_CLIENT_TIMEOUT_SECONDS,
    HEALTH_HEAD_TIMEOUT_SECONDS,
    HEALTH_MAX_CONNECTIONS,
    HEALTH_MAX_CONNECTIONS_PER_PEER,
    HeadDeadlineHandler,
    ThreadedHTTPServer,
)

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = ADDON_NAME
DEFAULT_LEASE_NAME = f"{ADDON_NAME}-addon-manager"
OCM_GROUP_SUFFIX = ".open-cluster-management.io"


def crd_remedy(resource: Resource) -> str:
    """What to do when the hub does not serve `resource`: whose CRDs to install, and how."""
    if resource.group == DYNAMIC_SCORERS.group:
        return (
            "install the addon's CRDs: kubectl apply -k manifests/crds "
            "(or kubectl apply -f charts/dynamic-scoring/crds/)"
        )
    if resource.group.endswith(OCM_GROUP_SUFFIX):
        return f"install Open Cluster Management's hub CRDs ({resource.kind}): clusteradm init"
    if resource.group == MULTIKUEUE_CONFIGS.group:
        return (
            f"install Kueue v0.19 or newer on the hub ({resource.kind}), or turn --multikueue-order and "
            "--multikueue-dispatch off (chart multikueueOrder.enabled=false)"
        )
    return f"install the CustomResourceDefinition of {resource.kind}"


@dataclass(frozen=True)
class ManagerOptions:
    """Everything the `manager` subcommand's flags set (docs/addon-manager.md, "Flags")."""

    namespace: str = DEFAULT_NAMESPACE
    agent_image: str = DEFAULT_IMAGE
    adopt_unlabelled_scores: bool = False
    agent_image_allow: tuple[str, ...] = ()
    trust_proxy_ca_for_destinations: bool = False
    # --agent-token-destination-allow and friends; the default allows the ADC no token destination
    agent_token_allow: AgentTokenAllow = field(default_factory=AgentTokenAllow)
    bind_address: str = ":8080"
    leader_elect: bool = True
    leader_election_namespace: str | None = None
    leader_election_id: str = DEFAULT_LEASE_NAME
    lease_seconds: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resync_seconds: float = 600.0
    workers: int = 4
    probe_period: float = 30.0
    probe_jitter: float = 0.1
    probe_failure_threshold: int = 3
    probe_concurrency: int = 8
    probe_allow_cidrs: tuple[str, ...] = ()
    probe_deny_private_networks: bool = False
    multikueue_order: bool = False
    multikueue_namespace: str = "kueue-system"
    multikueue_dispatch: bool = False
    multikueue_dispatch_delay: float = DEFAULT_DELAY_SECONDS
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}")


class _Server(ThreadedHTTPServer):
    thread_name = "health server"

    def __init__(
        self,
        address: tuple[str, int],
        manager: Manager,
        *,
        max_connections: int,
        max_connections_per_peer: int,
        head_timeout_seconds: float,
    ) -> None:
        super().__init__(
            address,
            _Handler,
            max_connections=max_connections,
            max_connections_per_peer=max_connections_per_peer,
            head_timeout_seconds=head_timeout_seconds,
        )
        self.manager = manager


class _Handler(HeadDeadlineHandler):
    server: _Server
    timeout = HEALTH_CLIENT_TIMEOUT_SECONDS

    def do_GET(self) -> None:
        manager = self.server.manager
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._reply(200, generate_latest(manager.registry), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            problem = manager.failure
            self._reply(500 if problem else 200, (problem or "ok").encode() + b"\n")
        elif path == "/readyz":
            ready, why = manager.readiness()
            self._reply(200 if ready else 503, why.encode() + b"\n")
        else:
            self._reply(404, b"not found\n")

    def _reply(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Probes every few seconds are not worth a log line."""


class Manager:
    """One replica of the addon manager."""

    def __init__(
        self,
        api: KubeAPI,
        options: ManagerOptions,
        *,
        factories: Sequence[ControllerFactory] = CONTROLLER_FACTORIES,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.options = options
        self.factories = list(factories)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.elector: LeaderElector | None = None
        if options.leader_elect:
            self.elector = LeaderElector(
                api,  # the Lease itself is written unfenced: renewing is how the fence stays open
                options.leader_election_namespace or options.namespace,
                options.leader_election_id,
                options.identity,
                lease_seconds=options.lease_seconds,
                renew_deadline=options.renew_deadline,
                retry_period=options.retry_period,
            )
            # every controller write asks the elector first: none is sent once leadership lapsed
            api = api.fenced(self.elector.fence)
        self.api = api
        self.controllers = ControllerManager(api, metrics_registry=self.registry, remedy_404=crd_remedy)
        self._leader_gauge = Gauge(
            "dynamic_scoring_manager_leader",
            "1 while this replica leads and runs the controllers.",
            registry=self.registry,
        )
        self._leading = threading.Event()
        self._failure: str | None = None
        self._server: _Server | None = None

    # -- health ---------------------------------------------------------------------------------

    @property
    def failure(self) -> str | None:
        """Why this replica is broken (its controller loop died), or None."""
        return self._failure

    @property
    def leading(self) -> bool:
        """True while this replica runs the controllers."""
        return self._leading.is_set()

    def readiness(self) -> tuple[bool, str]:
        """Ready: a standby always (it can take over); a leader once all controllers run on healthy caches.

        Not ready, the body names each waiting controller and each watch that is not synced or
        failing, with the cause and what to do, one per line.
        """
        if self._failure:
            return False, self._failure
        if not self._leading.is_set():
            return True, "standby"
        problems = self.controllers.problems()
        if not problems:
            return True, "leading"
        return False, "leading; not ready:\n" + "\n".join(problems)

    def serve(
        self,
        *,
        max_connections: int = HEALTH_MAX_CONNECTIONS,
        max_connections_per_peer: int = HEALTH_MAX_CONNECTIONS_PER_PEER,
        head_timeout_seconds: float = HEALTH_HEAD_TIMEOUT_SECONDS,
    ) -> int:
        """Start the health and metrics server; the port it listens on.

        The server is reachable from the network, so what a client that connects and never sends
        a request can hold is bounded: the connections at once (in total and per client address;
        more are closed at once) and the time to send the request head.  The defaults suit a
        Deployment; tests pass smaller ones.
        """
        host, port = parse_bind_address(self.options.bind_address)
        self._server = _Server(
            (host, port),
            self,
            max_connections=max_connections,
            max_connections_per_peer=max_connections_per_peer,
            head_timeout_seconds=head_timeout_seconds,
        )
        self._server.start()
        bound = self._server.port
        log.info("serving /healthz /readyz /metrics on %s:%d", host, bound)
        return bound

    def stop_serving(self) -> None:
        """Stop the health and metrics server and release its port; idempotent, a no-op if never served."""
        if self._server is not None:
            self._server.stop()

    # -- running --------------------------------------------------------------------------------

    def _lead(self, leading_stop: threading.Event) -> None:
        ctx = HubContext(
            api=self.api,
            manager=self.controllers,
            namespace=self.options.namespace,
            agent_image=self.options.agent_image,
            adopt_unlabelled_scores=self.options.adopt_unlabelled_scores,
            agent_image_allow=self.options.agent_image_allow,
            trust_proxy_ca_for_destinations=self.options.trust_proxy_ca_for_destinations,
            agent_token_allow=self.options.agent_token_allow,
            resync_seconds=self.options.resync_seconds,
            stop=leading_stop,
            workers=self.options.workers,
            multikueue_order=self.options.multikueue_order,
            multikueue_namespace=self.options.multikueue_namespace,
            multikueue_dispatch=self.options.multikueue_dispatch,
            multikueue_dispatch_delay=self.options.multikueue_dispatch_delay,
            probe=ProbeSettings.build(
                period=self.options.probe_period,
                jitter=self.options.probe_jitter,
                failure_threshold=self.options.probe_failure_threshold,
                concurrency=self.options.probe_concurrency,
                allow_cidrs=self.options.probe_allow_cidrs,
                deny_private_networks=self.options.probe_deny_private_networks,
            ),
        )
        for factory in self.factories:
            for controller in factory(ctx):
                controller.reconcile = keyed(controller.name, controller.reconcile)
                self.controllers.add(controller)
        self._leading.set()
        self._leader_gauge.set(1)
        log.info("leading: running %d controllers", len(self.controllers.controllers))
        try:
            self.controllers.run(leading_stop)
        except Exception as exc:
            self._failure = f"controller loop raised {type(exc).__name__}: {exc}"
            raise
        finally:
            self._leading.clear()
            self._leader_gauge.set(0)
        if not leading_stop.is_set():
            self._failure = "controller loop ended on its own"
            log.error(self._failure)

    def run(self, stop: threading.Event) -> int:
        """Lead (or wait to) until `stop`; the process exit status (see the module docstring)."""
        if self.elector is None:
            try:
                self._lead(stop)
            except Exception:
                log.exception("the controller loop raised")
        else:
            self.elector.run(self._lead, stop)
        self.stop_serving()
        if stop.is_set() and self._failure is None:
            log.info("stopped")
            return 0
        log.error("exiting: %s", self._failure or "leadership lost")
        return 1


def build_api(kubeconfig: Path | None) -> KubeAPI:
    """The hub API: from `kubeconfig`, or the pod's in-cluster identity when None."""
    return KubeAPI(kubeconfig)
