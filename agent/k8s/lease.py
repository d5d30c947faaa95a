"""The health Lease that tells OCM the addon is alive.

OCM's registration agent on the managed cluster checks every 30 s that Lease `<addon-name>` in the
install namespace was renewed within the last 300 s, and sets the ManagedClusterAddOn's
`Available` condition from it.  Like the Go addon-framework agent, we renew every 60 s with up to
25 % jitter, and skip a renewal while the agent reports itself unhealthy, so a wedged agent turns
the addon unavailable instead of looking fine.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
from collections.abc import Callable

from agent.k8s.paths import namespaced
from dynamic_scoring.kube.api import MERGE_PATCH, Conflict, KubeAPI, KubeError, NotFound

log = logging.getLogger(__name__)

LEASE_DURATION_SECONDS = 60


def micro_time(t: dt.datetime) -> str:
    """metav1.MicroTime; the apiserver accepts exactly six fractional digits, even when they are zero."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.holder = holder
        self.period = period
        self.jitter = jitter
        self.healthy = healthy
        self.path = namespaced("/apis/coordination.k8s.io/v1", namespace, "leases")
        self.object_path = namespaced("/apis/coordination.k8s.io/v1", namespace, "leases", name)

    async def renew_once(self) -> None:
        """Set `renewTime` to now, creating the Lease when it does not exist."""
        now = micro_time(dt.datetime.now(dt.UTC))
        spec = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": now,
        }
        try:
            await self.api.arequest("PATCH", self.object_path, body={"spec": spec}, content_type=MERGE_PATCH)
            return
        except NotFound:
            pass
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {**spec, "acquireTime": now},
        }
        try:
            await self.api.arequest("POST", self.path, body=body)
        except Conflict:
            await self.api.arequest("PATCH", self.object_path, body={"spec": spec}, content_type=MERGE_PATCH)

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
