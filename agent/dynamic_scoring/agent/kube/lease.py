"""The health Lease that tells OCM the addon is alive.

OCM's registration agent on the managed cluster checks every 30 s that Lease `<addon-name>` in the
install namespace was renewed within the last 300 s, and sets the ManagedClusterAddOn's
`Available` condition from it.  Like the Go addon-framework agent, we renew every 60 s with up to
25 % jitter, and skip a renewal while the agent reports itself unhealthy, so a wedged agent turns
the addon unavailable instead of looking fine.

The agent creates the Lease itself, so it is not among the objects the deploy ManifestWork removes
when the addon is disabled.  When told its Deployment (`owner_deployment`), the agent makes that
Deployment the Lease's owner, and the managed cluster's garbage collector deletes the Lease with the
agent: nothing of ours outlives the addon.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
from collections.abc import Callable

from dynamic_scoring.kube.api import MERGE_PATCH, Conflict, KubeAPI, KubeError, NotFound
from dynamic_scoring.kube.resources import DEPLOYMENTS, LEASES
from dynamic_scoring.kube.timestamps import micro_time  # one MicroTime format for every Lease we write

log = logging.getLogger(__name__)

LEASE_DURATION_SECONDS = 60


class LeaseRenewer:
    """Creates and renews one coordination.k8s.io/v1 Lease."""

    def __init__(
        self,
        api: KubeAPI,
        namespace: str,
        name: str,
        *,
        holder: str,
        period: float = 60.0,
        jitter: float = 0.25,
        healthy: Callable[[], bool] = lambda: True,
        owner_deployment: str | None = None,
    ) -> None:
        self.api = api
        self.owner_deployment = owner_deployment
        self._owner: list[dict[str, object]] | None = None
        self.namespace = namespace
        self.name = name
        self.holder = holder
        self.period = period
        self.jitter = jitter
        self.healthy = healthy
        self.path = LEASES.path(namespace)
        self.object_path = LEASES.path(namespace, name)

    async def _owner_references(self) -> list[dict[str, object]] | None:
        """The Deployment as owner, looked up once; None (no owner written) while it cannot be read."""
        if self.owner_deployment is None or self._owner is not None:
            return self._owner
        path = DEPLOYMENTS.path(self.namespace, self.owner_deployment)
        try:
            deployment = await self.api.arequest("GET", path)
        except KubeError as exc:
            log.warning(
                "lease %s/%s: owner deployment %s not readable (%s); the Lease is written without an "
                "owner and is not garbage-collected with the agent until this succeeds",
                self.namespace,
                self.name,
                self.owner_deployment,
                exc,
            )
            return None
        self._owner = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": self.owner_deployment,
                "uid": deployment["metadata"]["uid"],
            }
        ]
        return self._owner

    async def renew_once(self) -> None:
        """Set `renewTime` to now, creating the Lease when it does not exist."""
        now = micro_time(dt.datetime.now(dt.UTC))
        spec = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": now,
        }
        owners = await self._owner_references()
        patch: dict[str, object] = {"spec": spec}
        metadata: dict[str, object] = {"name": self.name, "namespace": self.namespace}
        if owners is not None:
            patch["metadata"] = {"ownerReferences": owners}
            metadata["ownerReferences"] = owners
        try:
            await self.api.arequest("PATCH", self.object_path, body=patch, content_type=MERGE_PATCH)
            return
        except NotFound:
            pass
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {**spec, "acquireTime": now},
        }
        try:
            await self.api.arequest("POST", self.path, body=body)
        except Conflict:
            await self.api.arequest("PATCH", self.object_path, body=patch, content_type=MERGE_PATCH)

    async def run(self) -> None:
        """Renew until cancelled; API errors are logged and retried at the next period."""
        while True:
            renewed = False
            if self.healthy():
                try:
                    await self.renew_once()
                    renewed = True
                except KubeError as exc:
                    log.warning("lease %s/%s not renewed: %s", self.namespace, self.name, exc)
            else:
                log.warning(
                    "agent not healthy (see /healthz); lease %s/%s not renewed", self.namespace, self.name
                )
            # after a miss, try again soon: the addon should turn Available as soon as it is healthy
            delay = self.period if renewed else min(self.period, 5.0)
            await asyncio.sleep(delay * (1 + random.uniform(0, self.jitter)))
