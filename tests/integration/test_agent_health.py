"""Health true to what runs: `/healthz` and the Lease follow the summaries watch and the workers.

The agent runs in this process (`dynamic_scoring.agent.cli.build_agent`, the wiring the CLI uses) against the
real apiservers of the local control plane.  Faults are injected where a test can reach them:
the managed cluster's API object fails every ConfigMap call on demand (with an exception type
the watch did not expect), and a worker's asyncio task is cancelled from outside.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dynamic_scoring.agent.cli import Agent, build_agent
from dynamic_scoring.agent.kube.summaries import SummaryWatcher
from dynamic_scoring.agent.options import AgentOptions
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.kube.api import KubeAPI, NotFound
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.timestamps import parse_time
from dynamic_scoring.outbound.addresses import AddressPolicy
from e2e.controlplane import ControlPlane
from tests.component.harness import eventually

LOOPBACK = AddressPolicy.parse("127.0.0.0/8")
"""The address policy opt-in: every test Prometheus and scorer listens on 127.0.0.1."""

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}"


class FaultInjectedAPI(KubeAPI):
    """The real managed-cluster API, except that ConfigMap calls raise `fault` while it is set."""

    def __init__(self, kubeconfig: Path) -> None:
        super().__init__(kubeconfig)
        self.fault: Exception | None = None
        self.faults_raised = 0

    def request(self, method: str, path: str, **kwargs: Any) -> JSON:
        if self.fault is not None and "/configmaps" in path:
            self.faults_raised += 1
            raise self.fault
        return super().request(method, path, **kwargs)

    def watch(self, path: str, query: dict[str, str], stop: threading.Event, **kwargs: Any) -> Iterator[JSON]:
        if self.fault is not None:
            self.faults_raised += 1
            raise self.fault
        yield from super().watch(path, query, stop, **kwargs)


def healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def renew_time(api: KubeAPI, ns: str, name: str) -> str | None:
    try:
        return str(api.request("GET", LEASES.format(ns=ns, name=name))["spec"]["renewTime"])
    except NotFound:
        return None


async def lease_renewals(api: KubeAPI, ns: str, name: str, count: int, timeout: float) -> bool:
    """True when the Lease's renewTime changed `count` times within `timeout` seconds."""
    seen = {await asyncio.to_thread(renew_time, api, ns, name)}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        seen.add(await asyncio.to_thread(renew_time, api, ns, name))
        if len(seen - {None}) > count:
            return True
        await asyncio.sleep(0.2)
    return False


def micro(value: str) -> dt.datetime:
    """A Lease MicroTime (the agent's wall clock when it decided to renew)."""
    parsed = parse_time(value)
    assert parsed is not None, value
    return parsed


async def renewed_after(api: KubeAPI, ns: str, name: str, since: dt.datetime, window: float) -> str | None:
    """A renewTime stamped after `since`, if one shows within `window` seconds; else None.

    The agent stamps renewTime synchronously right after its health check passed, in this process,
    on the clock `since` was read from.  So a renewal that was decided while the agent was still
    healthy, and only lands late (its request slowed down by a loaded machine), carries a stamp
    before `since` when `since` is read after /healthz said 503; only a renewal decided while
    unhealthy can carry a later one.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + window
    while loop.time() < deadline:
        stamp = await asyncio.to_thread(renew_time, api, ns, name)
        if stamp is not None and micro(stamp) > since:
            return stamp
        await asyncio.sleep(0.2)
    return None


@asynccontextmanager
async def running_agent(
    cp: ControlPlane,
) -> AsyncIterator[tuple[Agent, FaultInjectedAPI, str, asyncio.Task[int]]]:
    """An agent with a 1 s Lease, a 3 s watch bound and a 4 s dead-worker exit, one scorer running."""
    assert cp.hub is not None and cp.spoke2 is not None
    ns = f"it-health-{uuid.uuid4().hex[:5]}"
    admin = KubeAPI(cp.spoke2.admin_kubeconfig)
    admin.request(
        "POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    summaries = [
        {
            "name": "health-scorer",
            "scoreName": "health_probe",
            "sourceType": "None",
            "scoringEndpoint": "http://127.0.0.1:9/scoring",
            "scoringInterval": 30,
            "scoreDestination": "None",
        }
    ]
    admin.request(
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        body={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "dynamic-scoring-config"},
            "data": {"summaries": json.dumps(summaries)},
        },
    )
    managed = FaultInjectedAPI(cp.spoke2.admin_kubeconfig)
    options = AgentOptions(
        cluster_name="cluster2",
        addon_namespace=ns,
        bind=("127.0.0.1", 0),
        settings=AgentSettings(address_policy=LOOPBACK),
        lease_seconds=1,
        watch_down_limit_seconds=3,
        dead_worker_exit_seconds=4,
        watch_resync_seconds=2,
    )
    agent = build_agent(KubeAPI(cp.hub.admin_kubeconfig), managed, options)
    stop = asyncio.Event()
    serving = asyncio.create_task(agent.serve(stop))
    try:
        await eventually(lambda: "health_probe" in agent.supervisor.workers, what="the scorer running")
        yield agent, managed, ns, serving
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.shield(serving), 15)
        await asyncio.to_thread(admin.request, "DELETE", f"/api/v1/namespaces/{ns}")


def test_dead_summaries_watch_turns_unhealthy_stops_the_lease_and_recovers(
    control_plane: ControlPlane,
) -> None:
    assert control_plane.spoke2 is not None
    spoke = KubeAPI(control_plane.spoke2.admin_kubeconfig)

    async def scenario() -> None:
        async with running_agent(control_plane) as (agent, managed, ns, serving):
            port = agent.server.port
            await eventually(lambda: healthz(port)[0] == 200, what="/healthz 200")
            assert await lease_renewals(spoke, ns, "dynamic-scoring", 2, timeout=10), "Lease not renewed"

            # every ConfigMap list and watch now fails with an error nobody planned for
            managed.fault = RuntimeError("injected fault: the ConfigMap path is cut")
            injected = time.monotonic()
            await eventually(lambda: healthz(port)[0] == 503, timeout=20, what="/healthz 503")
            unhealthy_at = dt.datetime.now(dt.UTC)
            print(f"measured: /healthz 503 {time.monotonic() - injected:.1f}s after the fault (bound 3 s)")
            await eventually(
                lambda: "summaries watch of configmap" in (body := healthz(port)[1]) and "limit 3s" in body,
                timeout=10,
                what="/healthz naming the summaries watch of configmap and its limit 3s",
            )
            # No renewal decided while unhealthy in the next 4 s (an unhealthy agent retries every
            # ~1-1.25 s, so a regressed one renews about 3 times in it).  Judged on the Lease's own
            # renewTime stamps: a renewal decided just before the fault and landing late is no failure.
            late = await renewed_after(spoke, ns, "dynamic-scoring", unhealthy_at, window=4)
            assert late is None, f"Lease renewed at {late}, after /healthz said 503 at {unhealthy_at}"
            assert agent.watcher.thread_alive and not serving.done()

            # healthy is not set once: it comes back with the watch
            managed.fault = None
            cleared = time.monotonic()
            await eventually(lambda: healthz(port)[0] == 200, timeout=40, what="/healthz 200 again")
            print(f"measured: /healthz 200 again {time.monotonic() - cleared:.1f}s after the fault ended")
            assert await lease_renewals(spoke, ns, "dynamic-scoring", 1, timeout=10), (
                "Lease not renewed again"
            )

    asyncio.run(scenario())


def test_dead_worker_task_turns_unhealthy_stops_the_lease_then_exits_1(control_plane: ControlPlane) -> None:
    assert control_plane.spoke2 is not None
    spoke = KubeAPI(control_plane.spoke2.admin_kubeconfig)

    async def scenario() -> None:
        async with running_agent(control_plane) as (agent, _, ns, serving):
            port = agent.server.port
            await eventually(lambda: healthz(port)[0] == 200, what="/healthz 200")
            assert await lease_renewals(spoke, ns, "dynamic-scoring", 2, timeout=10), "Lease not renewed"
            killed = [t for t in asyncio.all_tasks() if t.get_name() == "scorer:health_probe"]
            assert len(killed) == 1
            killed[0].cancel()
            killed_at = time.monotonic()
            # One response, both facts: the agent exits 4 s after the worker died and its /healthz
            # goes with it, so the test looks once the answer is there rather than twice.
            await eventually(
                lambda: (
                    (r := healthz(port))[0] == 503 and "worker task ended: health_probe (cancelled)" in r[1]
                ),
                timeout=10,
                what="/healthz 503 naming the ended worker task health_probe (cancelled)",
            )
            unhealthy_at = dt.datetime.now(dt.UTC)
            print(f"measured: /healthz 503 {time.monotonic() - killed_at:.2f}s after the worker died")
            # as in the test above: judged on the Lease's renewTime stamps, not on a late landing
            late = await renewed_after(spoke, ns, "dynamic-scoring", unhealthy_at, window=3)
            assert late is None, f"Lease renewed at {late}, after /healthz said 503 at {unhealthy_at}"
            code = await asyncio.wait_for(asyncio.shield(serving), 10)
            assert code == 1
            print(
                f"measured: exit code 1 {time.monotonic() - killed_at:.1f}s after the worker died (bound 4 s)"
            )
            assert "worker task(s) dead: health_probe" in agent.exit_reason

    asyncio.run(scenario())


@dataclass
class Followed:
    """A namespace on cluster2 holding the summaries ConfigMap (``"[1]"`` at first) and what `apply` saw."""

    admin: KubeAPI
    ns: str
    seen: list[str | None] = field(default_factory=list)

    async def apply(self, payload: str | None) -> None:
        self.seen.append(payload)

    async def put(self, value: str) -> None:
        path = f"/api/v1/namespaces/{self.ns}/configmaps/dynamic-scoring-config"
        await asyncio.to_thread(self.admin.request, "PUT", path, body=_configmap(value))


def _configmap(value: str) -> dict[str, Any]:
    meta = {"name": "dynamic-scoring-config"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"summaries": value}}


@pytest.fixture
def followed(control_plane: ControlPlane) -> Iterator[Followed]:
    assert control_plane.spoke2 is not None
    admin = KubeAPI(control_plane.spoke2.admin_kubeconfig)
    ns = f"it-watch-{uuid.uuid4().hex[:5]}"
    admin.request(
        "POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    admin.request("POST", f"/api/v1/namespaces/{ns}/configmaps", body=_configmap("[1]"))
    yield Followed(admin, ns)
    admin.request("DELETE", f"/api/v1/namespaces/{ns}")


def test_watch_thread_survives_an_unexpected_exception(
    control_plane: ControlPlane, followed: Followed
) -> None:
    """An exception type the watch does not expect ends in a relist, not in a dead thread."""
    f = followed

    async def scenario() -> None:
        managed = FaultInjectedAPI(control_plane.spoke2.admin_kubeconfig)  # type: ignore[union-attr]
        watcher = SummaryWatcher(managed, f.ns, f.apply, watch_timeout=1)
        task = asyncio.create_task(watcher.run())
        try:
            await eventually(lambda: f.seen == ["[1]"], what="the first payload")
            managed.fault = RuntimeError("injected: not a KubeError, not an OSError")
            # the open watch ends within its 1 s timeout; the next call meets the fault
            await eventually(
                lambda: managed.faults_raised > 0, timeout=10, what="the watch to meet the fault"
            )
            managed.fault = None
            await f.put("[2]")
            await eventually(lambda: f.seen[-1] == "[2]", timeout=40, what="the change after the fault")
            assert not task.done()
        finally:
            task.cancel()

    asyncio.run(scenario())


class ClosingWatchAPI(KubeAPI):
    """The real managed-cluster API, except that while `closing` every watch is accepted and ends at once.

    That is what a proxy in front of the apiserver does when it answers the watch and closes it
    straight away: no error and no event.  Each watch call's start time is recorded.
    """

    def __init__(self, kubeconfig: Path) -> None:
        super().__init__(kubeconfig)
        self.closing = True
        self.watch_calls: list[float] = []

    def watch(self, path: str, query: dict[str, str], stop: threading.Event, **kwargs: Any) -> Iterator[JSON]:
        if not self.closing:
            yield from super().watch(path, query, stop, **kwargs)
            return
        self.watch_calls.append(time.monotonic())
        on_open = kwargs.get("on_open")
        if on_open is not None:
            on_open(lambda: None)  # accepted ...
        return  # ... and closed with nothing in it


def test_a_watch_stream_that_ends_at_once_backs_off_with_jitter_and_reports_down(
    control_plane: ControlPlane, followed: Followed
) -> None:
    """No tight re-watch loop: the delays grow, and the watcher says it is not following."""
    f = followed
    managed = ClosingWatchAPI(control_plane.spoke2.admin_kubeconfig)  # type: ignore[union-attr]

    async def scenario() -> None:
        watcher = SummaryWatcher(managed, f.ns, f.apply, watch_timeout=60)
        task = asyncio.create_task(watcher.run())
        try:
            await eventually(lambda: f.seen == ["[1]"], what="the first payload, from the list")
            await eventually(lambda: len(managed.watch_calls) >= 4, timeout=20, what="four watch attempts")
            calls = list(managed.watch_calls)
            gaps = [b - a for a, b in itertools.pairwise(calls)]
            print(f"measured: gaps between watch attempts {[round(g, 2) for g in gaps]} s")
            # backoff 0.8 s doubling, each delay in [d/2, d]: 0.4-0.8, 0.8-1.6, 1.6-3.2
            assert 0.35 <= gaps[0] <= 1.0 and gaps[1] >= 0.75 and gaps[2] >= 1.5, gaps
            assert watcher.down_for() > 0 and watcher.thread_alive  # not following, and says so
            managed.closing = False
            await f.put("[2]")
            await eventually(
                lambda: f.seen[-1] == "[2]", timeout=40, what="the change once watches stay open"
            )
            await eventually(lambda: watcher.down_for() == 0, timeout=10, what="following again")
            assert not task.done()
        finally:
            task.cancel()

    asyncio.run(scenario())
