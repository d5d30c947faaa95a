"""Leader election on a real Lease: one leader, takeover when it dies, step-down when it loses."""

from __future__ import annotations

import re
import threading
import time

import pytest

from dynamic_scoring.kube.api import MERGE_PATCH, Fenced, KubeAPI
from dynamic_scoring.kube.leader import LeaderElector
from dynamic_scoring.kube.resources import LEASES, NAMESPACES
from dynamic_scoring.timestamps import micro_time
from e2e.procs import wait_until

MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class Candidate:
    """An elector running in a thread, recording when its work starts and stops."""

    def __init__(self, elector: LeaderElector) -> None:
        self.elector = elector
        self.stop = threading.Event()
        self.started_at: float | None = None
        self.leading_stopped = threading.Event()
        self.thread = threading.Thread(target=elector.run, args=(self._work, self.stop), daemon=True)

    def _work(self, leading_stop: threading.Event) -> None:
        self.started_at = time.monotonic()
        leading_stop.wait()
        self.leading_stopped.set()

    def start(self) -> Candidate:
        self.thread.start()
        return self

    def halt(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()


def elector(api: KubeAPI, namespace: str, identity: str, fast: bool = True, **kw: object) -> LeaderElector:
    timings = {"lease_seconds": 4.0, "renew_deadline": 3.0, "retry_period": 0.5} if fast else {}
    return LeaderElector(api, namespace, "manager", identity, **timings, **kw)  # type: ignore[arg-type]


def lease(api: KubeAPI, namespace: str) -> dict[str, object]:
    spec: dict[str, object] = api.request("GET", LEASES.path(namespace, "manager"))["spec"]
    return spec


def test_micro_time_always_has_six_fractional_digits() -> None:
    import datetime as dt

    assert micro_time(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)) == "2026-01-02T03:04:05.000000Z"


def test_one_leader_and_the_standby_takes_over_when_the_leader_dies(api: KubeAPI, namespace: str) -> None:
    a = Candidate(elector(api, namespace, "a", release_on_stop=False)).start()
    wait_until(lambda: a.elector.is_leader and a.started_at, timeout=15, what="a leads")
    b = Candidate(elector(api, namespace, "b")).start()
    try:
        spec = lease(api, namespace)
        assert spec["holderIdentity"] == "a"
        assert MICRO.match(str(spec["renewTime"])) and MICRO.match(str(spec["acquireTime"]))
        # while a renews, b waits: watch a's renewals move on three times
        renewals = {str(spec["renewTime"])}
        while len(renewals) < 4:
            wait_until(
                lambda: str(lease(api, namespace)["renewTime"]) not in renewals, timeout=10, what="a renews"
            )
            renewals.add(str(lease(api, namespace)["renewTime"]))
            assert not b.elector.is_leader
        # a dies without releasing (kill -9: nothing renews any more)
        killed = time.monotonic()
        a.halt()
        wait_until(lambda: b.elector.is_leader and b.started_at, timeout=15, what="b takes over")
        took = time.monotonic() - killed
        assert took <= 4.0 + 2 * 0.5 + 1.0  # lease + retries + one round-trip's slack
        spec = lease(api, namespace)
        assert spec["holderIdentity"] == "b"
        assert spec["leaseTransitions"] == 1
    finally:
        b.halt()
        if a.thread.is_alive():
            a.halt()
    assert lease(api, namespace)["holderIdentity"] == ""  # b released on its clean stop


def test_with_default_timings_a_killed_leader_is_replaced_within_30_seconds(
    api: KubeAPI, namespace: str
) -> None:
    a = Candidate(elector(api, namespace, "a", fast=False, release_on_stop=False)).start()
    wait_until(lambda: a.elector.is_leader, timeout=15, what="a leads")
    b = Candidate(elector(api, namespace, "b", fast=False)).start()
    try:
        wait_until(lambda: b.elector._observed is not None, timeout=10, what="b has looked at the lease")
        killed = time.monotonic()
        a.halt()
        wait_until(lambda: b.elector.is_leader, timeout=30, what="b takes over", interval=0.1)
        took = time.monotonic() - killed
        print(f"takeover after the leader stopped renewing: {took:.1f}s")
        assert took < 30
    finally:
        b.halt()


def test_a_clean_stop_hands_over_within_a_retry_period(api: KubeAPI, namespace: str) -> None:
    a = Candidate(elector(api, namespace, "a")).start()
    wait_until(lambda: a.elector.is_leader, timeout=15, what="a leads")
    b = Candidate(elector(api, namespace, "b")).start()
    try:
        wait_until(lambda: b.elector._observed is not None, timeout=10, what="b has looked at the lease")
        stopped = time.monotonic()
        a.halt()
        assert a.leading_stopped.is_set()
        wait_until(lambda: b.elector.is_leader, timeout=10, what="b takes over", interval=0.05)
        assert time.monotonic() - stopped < 4.0  # well before the 4 s lease would expire
    finally:
        b.halt()


def test_a_leader_that_cannot_renew_stops_its_work_within_the_renew_deadline(
    api: KubeAPI, namespace: str
) -> None:
    a = Candidate(elector(api, namespace, "a")).start()
    try:
        wait_until(lambda: a.elector.is_leader and a.started_at, timeout=15, what="a leads")
        # an intruder claims the Lease with a long duration: a's renewals fail from now on
        api.request(
            "PATCH",
            LEASES.path(namespace, "manager"),
            body={"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 3600}},
            content_type=MERGE_PATCH,
        )
        assert a.leading_stopped.wait(3.0 + 2 * 0.5 + 2.0), "a kept working without the lease"
        a.thread.join(10)
        assert not a.thread.is_alive()  # run() returned: the process would exit and restart
        assert not a.elector.is_leader
        assert lease(api, namespace)["holderIdentity"] == "intruder"  # not released: it is not ours
    finally:
        a.halt()


def test_writes_are_fenced_the_moment_the_renew_deadline_passes_even_before_the_leader_notices(
    api: KubeAPI, namespace: str
) -> None:
    """A leader frozen past its renew deadline sends no write when it runs again, not even one in flight.

    The elector's clock jumps forward as a frozen process's monotonic clock does, without its
    renewal thread having run in between.
    """
    skew = [0.0]
    a = Candidate(elector(api, namespace, "a", clock=lambda: time.monotonic() + skew[0])).start()
    fenced = api.fenced(a.elector.fence)
    path = NAMESPACES.path(None, namespace)
    label = {"metadata": {"labels": {"written-by": "a"}}}
    try:
        wait_until(lambda: a.elector.is_leader and a.started_at, timeout=15, what="a leads")
        assert a.elector.fence() is None
        fenced.request("PATCH", path, body=label, content_type=MERGE_PATCH)  # while leading: sent
        skew[0] = 3.0  # the renew deadline, as if frozen that long since the last renewal began
        reason = a.elector.fence()
        assert reason is not None and "lapsed" in reason and "renew deadline 3s" in reason, reason
        with pytest.raises(Fenced, match=r"PATCH /api/v1/namespaces/.* not sent: leadership of lease"):
            fenced.request(
                "PATCH",
                path,
                body={"metadata": {"labels": {"written-by": "a-late"}}},
                content_type=MERGE_PATCH,
            )
        assert api.request("GET", path)["metadata"]["labels"]["written-by"] == "a"  # nothing reached it
        fenced.request("GET", path)  # reads are never fenced
        # and the elector gives up at once instead of trying for another renew deadline
        assert a.leading_stopped.wait(0.5 + 2.0), "a kept leading after its deadline had passed"
    finally:
        a.halt()
