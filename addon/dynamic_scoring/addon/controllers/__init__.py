"""The hub's controllers, each an independent sibling on the shared controller core.

The manager process (`dynamic_scoring.addon.manager`) builds one `HubContext` and hands it to every factory in
`CONTROLLER_FACTORIES`; each factory asks the context's `ControllerManager` for the (shared)
informers it needs and returns its `Controller`s.  Controllers never import each other: what one
needs from another travels through the API objects they both watch (e.g. the distribution
controller reads DynamicScorer status written by the scorer controller); the import contract
`hub-controllers-independent` (`.importlinter`) enforces it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from dynamic_scoring.addon.constants import ADDON_NAME
from dynamic_scoring.addon.registry.probe_settings import ProbeSettings
from dynamic_scoring.addon.render.token_allow import AgentTokenAllow
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.controller import Controller, ControllerManager
from dynamic_scoring.kube.informer import Informer
from dynamic_scoring.kube.resources import ADDON_PLACEMENT_SCORES
from dynamic_scoring.ocm.score_labels import foreign_selector, score_selector


@dataclass
class HubContext:
    """What every controller factory gets.

    Attributes:
        api: the hub API (the manager's own identity).
        manager: shared informers and the controller registry (`manager.informer(...)`,
            `manager.writer(name)`).
        namespace: the manager's own namespace: where DynamicScorers, the DynamicScoringConfig,
            the default AddOnDeploymentConfig and the leader-election Lease live.
        agent_image: the agent image, from the manager's environment (one place: kustomize images).
        adopt_unlabelled_scores: the hub admin's migration opt-in (--adopt-unlabelled-scores): an
            AddOnPlacementScore with no owner and no addon label may be taken over.
        agent_image_allow: repository prefixes an ADC's image may lie under besides `agent_image`'s
            repository (--agent-image-allow): who writes an ADC must not pick the code that runs
            with the agent's rights.
        trust_proxy_ca_for_destinations: the hub admin's opt-in (--trust-proxy-ca-for-destinations)
            for a TLS-intercepting proxy; rendered into every agent.
        agent_token_allow: the hub admin's bound on where an ADC may send the agent's own token, with
            which audience and role (--agent-token-destination-allow, --agent-token-audience-allow,
            --agent-monitoring-role-allow): who writes an ADC must not choose where the agent's
            identity goes.
        resync_seconds: periodic resync for every controller.
        stop: set when the process (or its leadership) ends; long-running helpers (probers) watch it.
        workers: reconcile workers of each controller that runs several (the manager's --workers).
        probe: how the scorer controller probes scorers (the manager's --scorer-probe-* flags).
        multikueue_order: the hub admin's opt-in (--multikueue-order) for ordered MultiKueueConfigs
            of labelled Placements; without it that controller does not run and needs no RBAC.
        multikueue_namespace: the one namespace whose Placements may opt in (--multikueue-namespace).
        multikueue_dispatch: the hub admin's opt-in (--multikueue-dispatch) for nominating waiting
            Workloads to the ordered configs' clusters, as Kueue's External dispatcher.
        multikueue_dispatch_delay: seconds a nominated cluster has to reserve quota before the next
            is nominated as well (--multikueue-dispatch-delay).
    """

    api: KubeAPI
    manager: ControllerManager
    namespace: str
    agent_image: str
    adopt_unlabelled_scores: bool = False
    agent_image_allow: tuple[str, ...] = ()
    trust_proxy_ca_for_destinations: bool = False
    agent_token_allow: AgentTokenAllow = field(default_factory=AgentTokenAllow)
    resync_seconds: float = 600.0
    stop: threading.Event = field(default_factory=threading.Event)
    workers: int = 4
    probe: ProbeSettings = field(default_factory=ProbeSettings)
    multikueue_order: bool = False
    multikueue_namespace: str = "kueue-system"
    multikueue_dispatch: bool = False
    multikueue_dispatch_delay: float = 10.0


ControllerFactory = Callable[[HubContext], list[Controller]]


def agent_scores(manager: ControllerManager, addon_name: str = ADDON_NAME) -> Informer:
    """The one AddOnPlacementScore informer the controllers share: our agents' scores only.

    Selected by `score_selector`, so the apiserver filters: a hub where other addons write
    thousands of scores costs us neither their events nor their memory.  A score leaving the
    selection (relabelled) arrives as DELETED, one entering it as ADDED, as for any selector.
    """
    return manager.informer(ADDON_PLACEMENT_SCORES, label_selector=score_selector(addon_name))


def foreign_scores(manager: ControllerManager, addon_name: str = ADDON_NAME) -> Informer:
    """Every AddOnPlacementScore our agents did not write (`foreign_selector`): names that are taken.

    A scorer whose score name is another owner's object on a cluster must be told so
    (``ScoreNameTaken``), that name must stay out of the cluster agent's hub Role, and the hub
    must not take the object over for an ``AgentReplicas: "0"`` cluster.  This cache costs what
    the other addons' scores cost (their objects and their status writes); it is the price of
    knowing which names are taken without a request per cluster and scorer.
    """
    return manager.informer(ADDON_PLACEMENT_SCORES, label_selector=foreign_selector(addon_name))
