"""D. Approval of the agents' client-certificate CSRs.

The klusterlet of each cluster asks for the agent's hub identity with a CSR labelled with our
addon and its cluster; `registration.csr_approval.decide` says whether the framework's default
approver would approve it.  Approved CSRs are signed by kube-controller-manager, never by us.
A CSR that must not be approved is left pending (the framework does not deny either: another
approver may own it) and reported once, as a Warning Event on the cluster's MCA when there is
one, else on the CSR itself.
"""

from __future__ import annotations

import logging

from dynamic_scoring.addon.constants import ADDON_NAME, CLUSTER_NAME_LABEL
from dynamic_scoring.addon.controllers.lifecycle.inputs import Caches, addon_key
from dynamic_scoring.addon.controllers.notices import Notices
from dynamic_scoring.addon.registration.csr_approval import approval_body, decide, is_decided
from dynamic_scoring.kube.api import KubeError
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.metrics import ControllerMetrics
from dynamic_scoring.kube.resources import CSRS
from dynamic_scoring.kube.writes import Writer

log = logging.getLogger(__name__)

NAME = "csr-approver"


def csr_approver_controller(
    caches: Caches,
    writer: Writer,
    metrics: ControllerMetrics,
    *,
    resync_seconds: float,
    addon_name: str = ADDON_NAME,
) -> Controller:
    """The controller: keyed by CSR name; an MCA or cluster appearing re-examines its pending CSRs."""
    notices = Notices(writer)

    def pending_of(cluster: str) -> list[str]:
        return [
            csr["metadata"]["name"]
            for csr in caches.csrs.list()
            if (csr["metadata"].get("labels") or {}).get(CLUSTER_NAME_LABEL) == cluster
            and not is_decided(csr)
        ]

    def reconcile(key: str) -> Result | None:
        csr = caches.csrs.get(key)
        if csr is None or is_decided(csr):
            notices.clear(key)
            return None
        cluster = (csr["metadata"].get("labels") or {}).get(CLUSTER_NAME_LABEL) or ""
        mca = caches.addons.get(addon_key(cluster, addon_name)) if cluster else None
        decision = decide(
            csr, cluster=caches.clusters.get(cluster) if cluster else None, addon=mca, addon_name=addon_name
        )
        if not decision.approve:
            notices.warn(
                key,
                mca if mca is not None else csr,
                "CSRNotApproved",
                f"CertificateSigningRequest {key} is not approved: {decision.reason}",
            )
            return None
        try:
            writer.api.request("PUT", CSRS.path(None, key, "approval"), body=approval_body(csr))
        except KubeError:
            metrics.write_failed(NAME, "approve", CSRS.name)
            raise
        metrics.wrote(NAME, "approve", CSRS.name)
        notices.clear(key)
        log.info("approved the agent's CSR (%s)", decision.reason, extra={"key": key})
        return None

    controller = Controller(NAME, reconcile, resync_seconds=resync_seconds)
    controller.watch(caches.csrs)
    controller.watch(caches.addons, keys=lambda mca: pending_of(mca["metadata"]["namespace"]))
    controller.watch(caches.clusters, keys=lambda cluster: pending_of(cluster["metadata"]["name"]))
    return controller
