"""The addon's lifecycle controllers: what addon-framework's manager does for a Go addon.

The letters label the same controllers in docs/addon-manager.md ("What the manager writes, and when").

| controller | label | keyed by | writes |
|---|---|---|---|
| `cma-config` | A | the CMA | CMA status: ADC spec hashes |
| `addon-config` | B | MCA | MCA status: `configReferences` generations, own-config hashes |
| `registration` | C, F | MCA | hub Role/RoleBinding; MCA status: `supportedConfigs`, |
|  |  |  | `registrations`, `namespace`, `healthCheck`, `RegistrationApplied` |
| `csr-approver` | D | CSR | CSR approval |
| `deploy` | E | MCA | deploy ManifestWorks; MCA status: `ManifestApplied` |

They share one set of watches (`inputs.Caches`) and never call each other: each reacts to the
API objects the others write, so any one of them can restart, lag or fail alone.
"""

from __future__ import annotations

from dynamic_scoring.addon.controllers import HubContext
from dynamic_scoring.addon.controllers.lifecycle.addon_config import NAME as ADDON_CONFIG
from dynamic_scoring.addon.controllers.lifecycle.addon_config import addon_config_controller
from dynamic_scoring.addon.controllers.lifecycle.cma_config import NAME as CMA_CONFIG
from dynamic_scoring.addon.controllers.lifecycle.cma_config import cma_config_controller
from dynamic_scoring.addon.controllers.lifecycle.csr_approver import NAME as CSR_APPROVER
from dynamic_scoring.addon.controllers.lifecycle.csr_approver import csr_approver_controller
from dynamic_scoring.addon.controllers.lifecycle.deploy import NAME as DEPLOY
from dynamic_scoring.addon.controllers.lifecycle.deploy import AgentRenderOptions, deploy_controller
from dynamic_scoring.addon.controllers.lifecycle.inputs import Caches
from dynamic_scoring.addon.controllers.lifecycle.registration import NAME as REGISTRATION
from dynamic_scoring.addon.controllers.lifecycle.registration import registration_controller
from dynamic_scoring.kube.controller import Controller

__all__ = ["ADDON_CONFIG", "CMA_CONFIG", "CSR_APPROVER", "DEPLOY", "REGISTRATION", "lifecycle_controllers"]


def lifecycle_controllers(ctx: HubContext) -> list[Controller]:
    """The five lifecycle controllers on the manager's shared informers (a `ControllerFactory`)."""
    manager = ctx.manager
    caches = Caches.of(manager)
    resync = ctx.resync_seconds
    workers = ctx.workers
    return [
        cma_config_controller(caches, manager.writer(CMA_CONFIG), resync_seconds=resync),
        addon_config_controller(caches, manager.writer(ADDON_CONFIG), resync_seconds=resync, workers=workers),
        registration_controller(
            caches,
            manager.writer(REGISTRATION),
            resync_seconds=resync,
            workers=workers,
            adopt_unlabelled_scores=ctx.adopt_unlabelled_scores,
        ),
        csr_approver_controller(caches, manager.writer(CSR_APPROVER), manager.metrics, resync_seconds=resync),
        deploy_controller(
            caches,
            manager.writer(DEPLOY),
            AgentRenderOptions(
                agent_image=ctx.agent_image,
                adopt_unlabelled_scores=ctx.adopt_unlabelled_scores,
                agent_image_allow=ctx.agent_image_allow,
                trust_proxy_ca_for_destinations=ctx.trust_proxy_ca_for_destinations,
                agent_token_allow=ctx.agent_token_allow,
            ),
            resync_seconds=resync,
            workers=workers,
        ),
    ]
